//! Replicas for TTFT and ITL SLOs, and what requests and tokens cost.
//!
//! Replicas: the fewest r for which one replica at λ ÷ r meets both p99 SLOs ([`predict`]; the
//! prediction worsens with the rate, so the search is a bisection). Capacity is paid by the
//! hour: cost per request = replicas × price per replica-hour ÷ (λ × 3600).
//!
//! Tokens: a request's engine time is split between its prompt and its output as the engine
//! spends it, p·I reading the prompt against O × τ ÷ B generating (an iteration of τ seconds
//! serves B sequences). The request's cost is split in that ratio, then divided by I and by O:
//! dollars per million input tokens and per million output tokens. Where the weighting is not
//! wanted, cost per million tokens of any kind is the request's cost ÷ (I + O).

use serde::{Deserialize, Serialize};

use super::batching::{Engine, Latency, Load, predict};
use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::units::{Seconds, UsdPerHour};

/// What [`size`] is asked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmSizingInput {
    pub engine: Engine,
    /// The whole traffic (its rate over all replicas).
    pub load: Load,
    pub ttft_p99_slo: Option<Seconds>,
    pub itl_p99_slo: Option<Seconds>,
    /// What one replica costs an hour (all its GPUs).
    pub replica_hourly: UsdPerHour,
}

/// The answer of [`size`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmSizing {
    pub replicas: u32,
    /// The model's latency on one replica at its share of the traffic.
    pub latency: Latency,
    pub cost_per_request: f64,
    /// The share of a request's engine time spent reading its prompt.
    pub input_share: f64,
    pub usd_per_million_input: f64,
    pub usd_per_million_output: f64,
    pub usd_per_million_tokens: f64,
    pub usd_per_month: f64,
}

/// At most this many replicas are considered.
pub const MAX_REPLICAS: u32 = 100_000;

fn meets(latency: &Latency, input: &LlmSizingInput) -> bool {
    input.ttft_p99_slo.is_none_or(|slo| latency.ttft_p99.0 <= slo.0)
        && input.itl_p99_slo.is_none_or(|slo| latency.itl_p99.0 <= slo.0)
}

/// Replicas, latency and prices; an error names the input that makes it impossible.
pub fn size(input: &LlmSizingInput) -> Result<LlmSizing, ModelError> {
    positive("rate_per_s", input.load.rate)?;
    non_negative("replica_hourly_usd", input.replica_hourly.0)?;
    for (field, slo) in [("ttft_p99_slo_s", input.ttft_p99_slo), ("itl_p99_slo_s", input.itl_p99_slo)] {
        if let Some(slo) = slo {
            positive(field, slo.0)?;
        }
    }
    let at = |replicas: u32| -> Result<Option<Latency>, ModelError> {
        let load = Load { rate: input.load.rate / f64::from(replicas), ..input.load };
        Ok(predict(&input.engine, &load)?.filter(|l| meets(l, input)))
    };
    if at(MAX_REPLICAS)?.is_none() {
        let unloaded = predict(&input.engine, &Load { rate: 1e-9, ..input.load })?;
        let field = match unloaded {
            Some(l) if input.ttft_p99_slo.is_some_and(|s| l.ttft_p99.0 > s.0) => "ttft_p99_slo_s",
            Some(l) if input.itl_p99_slo.is_some_and(|s| l.itl_p99.0 > s.0) => "itl_p99_slo_s",
            _ => "rate_per_s",
        };
        return Err(FieldError::new(field, "no number of replicas meets it: the engine alone is slower than that"));
    }
    // Fewer replicas than the traffic ÷ one replica's capacity never keep up; from there, double
    // until the SLOs are met, then bisect.
    let capacity = input.engine.capacity(input.load.input_tokens, input.load.output_tokens);
    let mut lo = ((input.load.rate / capacity).ceil() as u32).saturating_sub(1).min(MAX_REPLICAS - 1);
    let mut hi = (lo + 1).min(MAX_REPLICAS);
    while at(hi)?.is_none() {
        lo = hi;
        hi = hi.saturating_mul(2).min(MAX_REPLICAS);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at(mid)?.is_some() { hi = mid } else { lo = mid }
    }
    let latency = at(hi)?.expect("the bisection ends on a replica count that meets the SLOs");
    Ok(priced(input, hi, latency))
}

fn priced(input: &LlmSizingInput, replicas: u32, latency: Latency) -> LlmSizing {
    let e = &input.engine;
    let (i, o) = (input.load.input_tokens, input.load.output_tokens);
    let batch = (latency.mean_resident / latency.busy.max(1e-12)).max(1.0);
    let prompt_time = e.per_prompt_token.0 * i;
    let output_time = o * (e.fixed.0 + e.per_sequence.0 * batch) / batch;
    let input_share = if prompt_time + output_time > 0.0 { prompt_time / (prompt_time + output_time) } else { 0.0 };
    let hourly = input.replica_hourly.0 * f64::from(replicas);
    let cost_per_request = hourly / (input.load.rate * 3600.0);
    let per_million =
        |share: f64, tokens: f64| if tokens > 0.0 { cost_per_request * share / tokens * 1e6 } else { 0.0 };
    LlmSizing {
        replicas,
        latency,
        cost_per_request,
        input_share,
        usd_per_million_input: per_million(input_share, i),
        usd_per_million_output: per_million(1.0 - input_share, o),
        usd_per_million_tokens: per_million(1.0, i + o),
        usd_per_month: hourly * crate::units::HOURS_PER_MONTH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn engine() -> Engine {
        // An 8B model on one GPU: 12 ms per iteration plus 0.1 ms per sequence, 10 000 prompt
        // tokens per second, 64 slots.
        Engine { fixed: Seconds(0.012), per_sequence: Seconds(0.0001), per_prompt_token: Seconds(1e-4), slots: 64 }
    }

    fn input(rate: f64) -> LlmSizingInput {
        LlmSizingInput {
            engine: engine(),
            load: Load { rate, input_tokens: 500.0, input_cv: 0.5, output_tokens: 200.0 },
            ttft_p99_slo: Some(Seconds(1.0)),
            itl_p99_slo: Some(Seconds(0.1)),
            replica_hourly: UsdPerHour(4.0),
        }
    }

    #[test]
    fn the_fewest_replicas_that_meet_the_slos() {
        let plan = size(&input(20.0)).unwrap();
        assert!(meets(&plan.latency, &input(20.0)));
        let fewer = Load { rate: 20.0 / f64::from(plan.replicas - 1), ..input(20.0).load };
        assert!(predict(&engine(), &fewer).unwrap().is_none_or(|l| !meets(&l, &input(20.0))));
        // Prices: the split adds up to the request's cost.
        let per_request = plan.usd_per_million_input * 500.0 / 1e6 + plan.usd_per_million_output * 200.0 / 1e6;
        assert!((per_request - plan.cost_per_request).abs() < 1e-12 * plan.cost_per_request.max(1.0));
        assert!((plan.usd_per_month - 4.0 * f64::from(plan.replicas) * crate::units::HOURS_PER_MONTH).abs() < 1e-6);
    }

    #[test]
    fn an_slo_below_the_unloaded_latency_names_itself() {
        let tight = LlmSizingInput { ttft_p99_slo: Some(Seconds(0.01)), ..input(5.0) };
        assert_eq!(size(&tight).unwrap_err().field, "ttft_p99_slo_s");
        let tight = LlmSizingInput { itl_p99_slo: Some(Seconds(0.005)), ..input(5.0) };
        assert_eq!(size(&tight).unwrap_err().field, "itl_p99_slo_s");
        assert_eq!(size(&input(0.0)).unwrap_err().field, "rate_per_s");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn more_traffic_never_needs_fewer_replicas(rate in 0.1f64..200.0, more in 1.0f64..4.0) {
            let a = size(&input(rate)).unwrap();
            let b = size(&input(rate * more)).unwrap();
            prop_assert!(b.replicas >= a.replicas);
            prop_assert!(a.input_share > 0.0 && a.input_share < 1.0);
        }
    }
}
