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
    Ok(size_within(input, u64::MAX)?.expect("a search without a budget finishes"))
}

/// What a server may spend on one sizing while it renders a page, in the model's steps
/// ([`super::batching::work`]). On a shared 2-vCPU VM, natively: 40–130 ms for the plans
/// probed (a step took 1–17 ns over 4,800 inputs, so at most 0.34 s), plus the one or two
/// predictions that may run past it (at most 85 ms each seen). The default plan (Llama 3 8B,
/// 10M requests a month) takes under a million; about a quarter of 3,240 plausible plans,
/// mostly at 100 billion requests a month, take more and are sized in the browser.
pub const RENDER_WORK: u64 = 20_000_000;

/// [`size`], given up (`Ok(None)`) once the predictions made have cost more than `work` steps
/// ([`super::batching::work`]): checked before each prediction, so it overruns by the one
/// under way (and, where no replica count meets the SLOs, the unloaded one that names why).
/// A budget of 0 checks the inputs and makes no prediction.
pub fn size_within(input: &LlmSizingInput, work: u64) -> Result<Option<LlmSizing>, ModelError> {
    positive("rate_per_s", input.load.rate)?;
    non_negative("replica_hourly_usd", input.replica_hourly.0)?;
    for (field, slo) in [("ttft_p99_slo_s", input.ttft_p99_slo), ("itl_p99_slo_s", input.itl_p99_slo)] {
        if let Some(slo) = slo {
            positive(field, slo.0)?;
        }
    }
    let start = super::batching::work::spent();
    // A budget of 0 sizes nothing: the inputs above are checked, and no prediction is made.
    let spent = || work == 0 || super::batching::work::spent().saturating_sub(start) > work;
    // `Err(None)`: the budget ran out first.
    let at = |replicas: u32| -> Result<Option<Latency>, Option<ModelError>> {
        if spent() {
            return Err(None);
        }
        let load = Load { rate: input.load.rate / f64::from(replicas), ..input.load };
        Ok(predict(&input.engine, &load).map_err(Some)?.filter(|l| meets(l, input)))
    };
    match search(input, at) {
        Ok(sizing) => Ok(Some(sizing)),
        Err(None) => Ok(None),
        Err(Some(error)) => Err(error),
    }
}

/// The replica search of [`size`] over `at`, the latency that meets the SLOs at a replica count.
fn search(
    input: &LlmSizingInput,
    at: impl Fn(u32) -> Result<Option<Latency>, Option<ModelError>>,
) -> Result<LlmSizing, Option<ModelError>> {
    let Some(most) = at(MAX_REPLICAS)? else {
        let unloaded = predict(&input.engine, &Load { rate: 1e-9, ..input.load }).map_err(Some)?;
        let alone = |what: &str, p99: f64| {
            format!(
                "no number of replicas meets it: one request alone has {what} p99 of {} on this engine",
                crate::format::seconds(p99)
            )
        };
        return Err(Some(match unloaded {
            Some(l) if input.ttft_p99_slo.is_some_and(|s| l.ttft_p99.0 > s.0) => {
                FieldError::new("ttft_p99_slo_s", alone("a TTFT", l.ttft_p99.0))
            }
            Some(l) if input.itl_p99_slo.is_some_and(|s| l.itl_p99.0 > s.0) => {
                FieldError::new("itl_p99_slo_s", alone("an ITL", l.itl_p99.0))
            }
            _ => FieldError::new("rate_per_s", "no number of replicas meets it: the engine alone is slower than that"),
        }));
    };
    // Fewer replicas than the traffic ÷ one replica's capacity never keep up; from there, double
    // until the SLOs are met, then bisect, keeping the latency at the fewest that meet them.
    let capacity = input.engine.capacity(input.load.input_tokens, input.load.output_tokens);
    let mut lo = ((input.load.rate / capacity).ceil() as u32).saturating_sub(1).min(MAX_REPLICAS - 1);
    let mut hi = (lo + 1).min(MAX_REPLICAS);
    let mut met = if hi == MAX_REPLICAS { Some(most) } else { at(hi)? };
    while met.is_none() {
        lo = hi;
        hi = hi.saturating_mul(2).min(MAX_REPLICAS);
        met = if hi == MAX_REPLICAS { Some(most) } else { at(hi)? };
    }
    let mut latency = met.expect("the doubling ends on a replica count that meets the SLOs");
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match at(mid)? {
            Some(l) => (hi, latency) = (mid, l),
            None => lo = mid,
        }
    }
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

/// The plan over the corners of two ranges: the volume ± `volume` and every engine cost ±
/// `engine` (fractions below 0.9). Replicas grow with the volume and with a slower engine; the
/// prices per token need not, so all four corners are sized. A corner where no replica count
/// meets the SLOs (a slower engine than the SLO allows) is counted, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmSpread {
    /// Fewest and most replicas over the corners that could be sized; `None` if none could.
    pub replicas: Option<(u32, u32)>,
    pub usd_per_month: Option<(f64, f64)>,
    pub usd_per_million_input: Option<(f64, f64)>,
    pub usd_per_million_output: Option<(f64, f64)>,
    /// Corners at which no number of replicas meets the SLOs, of four.
    pub unmet: u32,
}

/// [`size`] at the corners of the ranges (see [`LlmSpread`]).
pub fn spread(input: &LlmSizingInput, volume: f64, engine: f64) -> Result<LlmSpread, ModelError> {
    crate::plan::checks::between("volume_spread", volume, 0.0, 0.9)?;
    crate::plan::checks::between("engine_spread", engine, 0.0, 0.9)?;
    let widen = |range: Option<(f64, f64)>, v: f64| Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
    let mut out = LlmSpread {
        replicas: None,
        usd_per_month: None,
        usd_per_million_input: None,
        usd_per_million_output: None,
        unmet: 0,
    };
    for v in [1.0 - volume, 1.0 + volume] {
        for k in [1.0 - engine, 1.0 + engine] {
            let e = &input.engine;
            let corner = LlmSizingInput {
                engine: Engine {
                    fixed: Seconds(e.fixed.0 * k),
                    per_sequence: Seconds(e.per_sequence.0 * k),
                    per_prompt_token: Seconds(e.per_prompt_token.0 * k),
                    slots: e.slots,
                },
                load: Load { rate: input.load.rate * v, ..input.load },
                ..*input
            };
            match size(&corner) {
                Ok(s) => {
                    let r = out
                        .replicas
                        .map_or((s.replicas, s.replicas), |(lo, hi)| (lo.min(s.replicas), hi.max(s.replicas)));
                    out.replicas = Some(r);
                    out.usd_per_month = widen(out.usd_per_month, s.usd_per_month);
                    out.usd_per_million_input = widen(out.usd_per_million_input, s.usd_per_million_input);
                    out.usd_per_million_output = widen(out.usd_per_million_output, s.usd_per_million_output);
                }
                // The inputs were valid at the point (the caller sized it): what fails at a
                // corner is the SLO or the volume out of reach there.
                Err(_) => out.unmet += 1,
            }
        }
    }
    Ok(out)
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
        // And says what one request alone takes, so that an SLO that can be met is found.
        let tight = LlmSizingInput { ttft_p99_slo: Some(Seconds(0.01)), ..input(5.0) };
        let (error, alone) = (size(&tight).unwrap_err(), predict(&engine(), &Load { rate: 1e-9, ..tight.load }));
        assert_eq!(error.field, "ttft_p99_slo_s");
        let alone = alone.unwrap().unwrap();
        let said =
            format!("one request alone has a TTFT p99 of {} on this engine", crate::format::seconds(alone.ttft_p99.0));
        assert!(alone.ttft_p99.0 > 0.01 && error.reason.ends_with(&said), "{}", error.reason);
        let tight = LlmSizingInput { itl_p99_slo: Some(Seconds(0.005)), ..input(5.0) };
        let error = size(&tight).unwrap_err();
        assert_eq!(error.field, "itl_p99_slo_s");
        assert!(error.reason.contains("one request alone has an ITL p99 of"), "{}", error.reason);
        assert_eq!(size(&input(0.0)).unwrap_err().field, "rate_per_s");
    }

    #[test]
    fn the_spread_holds_the_point_and_a_slow_corner_that_misses_the_slo_is_counted() {
        let point = size(&input(20.0)).unwrap();
        let s = spread(&input(20.0), 0.3, 0.25).unwrap();
        let (lo, hi) = s.replicas.unwrap();
        assert!(lo < point.replicas && point.replicas < hi, "{s:?} around {}", point.replicas);
        let (mlo, mhi) = s.usd_per_month.unwrap();
        assert!(mlo < point.usd_per_month && point.usd_per_month < mhi);
        assert_eq!(s.unmet, 0);
        assert_eq!(spread(&input(20.0), 0.0, 0.0).unwrap().replicas, Some((point.replicas, point.replicas)));
        // An ITL SLO just above the unloaded gap: a quarter slower, no count meets it.
        let unloaded = predict(&engine(), &Load { rate: 1e-9, ..input(1.0).load }).unwrap().unwrap();
        let tight = LlmSizingInput { itl_p99_slo: Some(Seconds(unloaded.itl_p99.0 * 1.1)), ..input(1.0) };
        let s = spread(&tight, 0.1, 0.25).unwrap();
        assert_eq!(s.unmet, 2, "both slow corners: {s:?}");
        assert!(s.replicas.is_some(), "the fast corners are sized");
        assert_eq!(spread(&input(1.0), 0.95, 0.1).unwrap_err().field, "volume_spread");
    }

    #[test]
    fn a_search_over_its_budget_gives_up_after_one_more_prediction_and_counts_alike_every_time() {
        use super::super::batching::work;
        let spend = |input: &LlmSizingInput, budget: u64| {
            let before = work::spent();
            let answer = size_within(input, budget).unwrap();
            (answer, work::spent() - before)
        };
        let (whole, cost) = spend(&input(20.0), u64::MAX);
        assert_eq!(whole, Some(size(&input(20.0)).unwrap()));
        assert!(cost > 0);
        assert_eq!(spend(&input(20.0), u64::MAX).1, cost, "the same input, the same count");
        assert_eq!(spend(&input(20.0), cost).0, whole, "a budget of exactly its cost finishes it");
        // Given up: it stops at the first check past the budget, one prediction over at most.
        let one = {
            let before = work::spent();
            predict(&engine(), &Load { rate: 20.0 / f64::from(MAX_REPLICAS), ..input(20.0).load }).unwrap();
            work::spent() - before
        };
        assert_eq!(spend(&input(20.0), 0), (None, 0), "a budget of 0 predicts nothing");
        let (answer, spent) = spend(&input(20.0), 1);
        assert_eq!(answer, None);
        assert!(spent >= one && spent < cost, "{spent} steps of {cost}");
        // Inputs chosen to be slow (the page's most slots, ten-token prompts of cv 5, 99.9 % of
        // what 4,096 replicas serve): given up, under twice the budget with the last prediction.
        let slow = LlmSizingInput {
            engine: Engine { slots: 4096, ..engine() },
            load: Load {
                rate: 4096.0 * 0.999 * engine().capacity(10.0, 2.0),
                input_tokens: 10.0,
                input_cv: 5.0,
                output_tokens: 2.0,
            },
            ..input(1.0)
        };
        let (answer, spent) = spend(&slow, RENDER_WORK);
        assert_eq!(answer, None, "{spent} steps");
        assert!(spent < 2 * RENDER_WORK, "{spent} steps");
        // Input errors are errors within any budget.
        assert_eq!(size_within(&input(0.0), 1).unwrap_err().field, "rate_per_s");
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
