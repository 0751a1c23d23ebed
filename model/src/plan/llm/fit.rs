//! The engine's costs fitted from a load test of an OpenAI-compatible server (the agent's
//! `endpoint` suite with `--protocol openai-*`), and every step predicted beside its
//! measurement.
//!
//! Medians calibrate; the p99s are left to check the model. From the least-loaded trusted step
//! (the base), with I and O its mean prompt and output lengths and the prompt lengths' cv: the
//! median gap is one iteration of one sequence, t₀ + d. From the step with the largest mean
//! batch (L = achieved rate × mean latency, by Little's law, at least 0.3) the per-sequence
//! cost d is the one at which the model's mean gap at that step's rate is the measured one
//! (bisection over [0, t₀ + d]; the mean, because the median gap does not move until half the
//! gaps are batched, and a sweep on a small engine may never get there); with no such step
//! (every step nearly idle) d = 0 and [`LlmCalibration::batch_step`] is `None`. The prompt cost p starts as the base step's
//! median TTFT less one gap, over I, and is then the one at which the model's median TTFTs
//! match those of every unsaturated trusted step best (least squares in logarithms): a base
//! step at a low rate holds few requests, and its median alone moved p by a sixth between runs.
//! Everything before the first token that is not an iteration (parsing, tokenizing) is counted
//! in p. The slots come from the caller: the server's configuration, or the memory fit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::batching::{Engine, Load, predict, predict_ranked};
use crate::plan::endpoint::{self, COUNTED_BELOW_UTILIZATION};
use crate::units::Seconds;
use crate::wire::run::{Measurement, MeasurementStatus, Stats, Suite};

/// One step of an LLM load test.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmStep {
    pub step: endpoint::Step,
    pub ttft: Stats,
    pub itl: Stats,
    /// Mean prompt and output tokens of the successful requests.
    pub input_tokens: f64,
    /// The prompt lengths' coefficient of variation, where the server reported each (0 else).
    pub input_cv: f64,
    pub output_tokens: f64,
    /// Successful requests in the measured window.
    pub requests: u64,
    /// Output tokens per second, as the agent measured them.
    pub tokens_per_second: Option<f64>,
}

/// Steps fitted and checked: a sweep takes at most 13, and each costs the fit dozens of
/// predictions, which the server computes when it stores the run.
pub const MAX_LLM_STEPS: usize = 16;

/// The steps of a run that carry TTFT, ITL and token counts, in order (the first
/// [`MAX_LLM_STEPS`]).
pub fn steps(measurements: &[Measurement]) -> Vec<LlmStep> {
    let mut by_step: BTreeMap<u32, Vec<&Measurement>> = BTreeMap::new();
    for m in measurements.iter().filter(|m| m.suite == Suite::Endpoint && m.status == MeasurementStatus::Ok) {
        if let Some(step) = m.parameters.get("step").and_then(|s| s.parse().ok()) {
            by_step.entry(step).or_default().push(m);
        }
    }
    endpoint::steps(measurements)
        .into_iter()
        .filter_map(|step| {
            let ms = by_step.get(&step.step)?;
            let stats = |case: &str| ms.iter().find(|m| m.case == case).and_then(|m| m.stats);
            let requests = stats("endpoint_latency")?.samples;
            let per_request = |case: &str| stats(case).map(|s| s.mean / requests.max(1) as f64);
            Some(LlmStep {
                ttft: stats("endpoint_ttft")?,
                itl: stats("endpoint_itl")?,
                input_tokens: per_request("endpoint_input_tokens")?,
                input_cv: stats("endpoint_prompt_tokens_cv").map_or(0.0, |s| s.mean.clamp(0.0, 5.0)),
                output_tokens: per_request("endpoint_output_tokens")?,
                requests,
                tokens_per_second: stats("endpoint_output_tokens_per_second").map(|s| s.mean),
                step,
            })
        })
        .filter(|s| s.requests > 0 && s.output_tokens >= 1.0)
        .take(MAX_LLM_STEPS)
        .collect()
}

/// The slots assumed where the server's are not known: the OpenAI API does not report them,
/// and vLLM's default `max_num_seqs` is 256. They matter only once they fill.
pub const ASSUMED_SLOTS: u32 = 256;

/// The most slots a fit (and the LLM page's plan) is made with. The model's cost grows with the
/// slots (its steady state sums a term per slot, for each of up to [`MAX_LLM_STEPS`] steps), a
/// fit runs at every upload of an LLM run, and engines batch a few hundred.
pub const MAX_FITTED_SLOTS: u32 = 4096;

/// Where a run's slots came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotsFrom {
    /// Not known: [`ASSUMED_SLOTS`].
    #[default]
    Assumed,
    /// The server said (llama.cpp's `/props`, `total_slots`).
    Server,
    /// The agent was told (`--slots`).
    Stated,
}

impl SlotsFrom {
    /// Where the slots came from, as a page says it after "4 slots, ".
    pub fn words(self) -> &'static str {
        match self {
            SlotsFrom::Assumed => "assumed: the server did not report its own",
            SlotsFrom::Server => "as the server reported them",
            SlotsFrom::Stated => "as the agent was told (--slots)",
        }
    }

    /// The `slots_from` parameter the agent records.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotsFrom::Assumed => "assumed",
            SlotsFrom::Server => "server",
            SlotsFrom::Stated => "stated",
        }
    }
}

/// The slots the server of an endpoint run decodes at once, as the agent recorded them (the
/// `slots` and `slots_from` parameters), else [`ASSUMED_SLOTS`]. An agent token may upload
/// anything: a count that is not a whole number from 1 to [`MAX_FITTED_SLOTS`] is not taken.
pub fn slots(measurements: &[Measurement]) -> (u32, SlotsFrom) {
    let Some(first) = measurements.iter().find(|m| m.suite == Suite::Endpoint) else {
        return (ASSUMED_SLOTS, SlotsFrom::Assumed);
    };
    let count = first
        .parameters
        .get("slots")
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|n| (1..=MAX_FITTED_SLOTS).contains(n));
    let recorded = first.parameters.get("slots_from").map(String::as_str);
    let from = [SlotsFrom::Server, SlotsFrom::Stated]
        .into_iter()
        .find(|f| recorded == Some(f.as_str()))
        .unwrap_or(SlotsFrom::Assumed);
    match count {
        Some(n) if from != SlotsFrom::Assumed => (n, from),
        _ => (ASSUMED_SLOTS, SlotsFrom::Assumed),
    }
}

/// The engine as fitted, and where each part came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LlmCalibration {
    pub engine: Engine,
    pub input_tokens: f64,
    pub input_cv: f64,
    pub output_tokens: f64,
    pub base_step: u32,
    /// The step d was fitted on; `None` when no step batched enough to tell.
    pub batch_step: Option<u32>,
}

impl LlmCalibration {
    /// The traffic of the fitted lengths at `rate`.
    pub fn load_at(&self, rate: f64) -> Load {
        Load { rate, input_tokens: self.input_tokens, input_cv: self.input_cv, output_tokens: self.output_tokens }
    }
}

/// A step's mean number of resident sequences, by Little's law.
fn resident(s: &LlmStep) -> f64 {
    s.step.achieved * s.step.mean.unwrap_or(0.0)
}

/// The prompt cost at which the model's median TTFT matches the measured medians best, in
/// logarithms, over `steps` (golden-section search over a factor of three either side of
/// `start`).
fn fit_prompt_cost(steps: &[&LlmStep], engine: impl Fn(f64) -> Engine, load: Load, start: f64) -> f64 {
    let misfit = |ln_p: f64| -> f64 {
        let engine = engine(ln_p.exp());
        steps
            .iter()
            .map(|s| {
                let at = Load { rate: s.step.offered, ..load };
                match predict(&engine, &at).ok().flatten() {
                    Some(l) if s.ttft.p50 > 0.0 => (l.ttft_p50.0 / s.ttft.p50).ln().powi(2),
                    _ => 1e3,
                }
            })
            .sum()
    };
    let golden = 0.5 * (5f64.sqrt() - 1.0);
    let (mut a, mut b) = (start.ln() - 3f64.ln(), start.ln() + 3f64.ln());
    let (mut c, mut e) = (b - golden * (b - a), a + golden * (b - a));
    let (mut fc, mut fe) = (misfit(c), misfit(e));
    for _ in 0..30 {
        if fc < fe {
            (b, e, fe) = (e, c, fc);
            c = b - golden * (b - a);
            fc = misfit(c);
        } else {
            (a, c, fc) = (c, e, fe);
            e = a + golden * (b - a);
            fe = misfit(e);
        }
    }
    (0.5 * (a + b)).exp()
}

/// Fits the engine on the trusted steps; `None` without a trusted step that succeeded.
pub fn calibrate(steps: &[LlmStep], slots: u32) -> Option<LlmCalibration> {
    let trusted: Vec<&LlmStep> = steps.iter().filter(|s| s.step.trusted() && s.step.error_rate <= 0.01).collect();
    let base = trusted
        .iter()
        .filter(|s| !s.step.saturated)
        .min_by(|a, b| a.step.offered.total_cmp(&b.step.offered))
        .or_else(|| trusted.iter().min_by(|a, b| a.step.offered.total_cmp(&b.step.offered)))?;
    let (i, o, cv) = (base.input_tokens, base.output_tokens, base.input_cv);
    let load = Load { rate: 0.0, input_tokens: i, input_cv: cv, output_tokens: o };
    let one = base.itl.p50.max(1e-6);
    let engine = |d: f64, p: f64| Engine {
        fixed: Seconds((one - d).max(0.0)),
        per_sequence: Seconds(d.min(one)),
        per_prompt_token: Seconds(p),
        slots: slots.max(1),
    };
    let unsaturated: Vec<&LlmStep> = trusted.iter().copied().filter(|s| !s.step.saturated).collect();
    let batched = unsaturated
        .iter()
        .filter(|s| s.step.step != base.step.step && resident(s) >= 0.3)
        .max_by(|a, b| resident(a).total_cmp(&resident(b)));
    let mut p = if i > 0.0 { (base.ttft.p50 - one).max(1e-6) / i } else { 0.0 };
    let mut d = 0.0;
    // d and p each move what the other is fitted on: two rounds settle them.
    for _ in 0..2 {
        if let Some(batched) = batched {
            let at = Load { rate: batched.step.offered, ..load };
            let gap = |d: f64| predict(&engine(d, p), &at).ok().flatten().map_or(f64::INFINITY, |l| l.itl_mean.0);
            let (mut lo, mut hi) = (0.0, one);
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                if gap(mid) < batched.itl.mean { lo = mid } else { hi = mid }
            }
            d = lo;
        }
        if i > 0.0 && unsaturated.len() >= 2 {
            p = fit_prompt_cost(&unsaturated, |p| engine(d, p), load, p);
        }
    }
    Some(LlmCalibration {
        engine: engine(d, p),
        input_tokens: i,
        input_cv: cv,
        output_tokens: o,
        base_step: base.step.step,
        batch_step: batched.map(|b| b.step.step),
    })
}

/// The model's TTFT and ITL beside one step's measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LlmPrediction {
    pub step: u32,
    pub offered: f64,
    /// The engine's busy share predicted at that rate; `None` past its capacity.
    pub busy: Option<f64>,
    pub ttft_p99: Option<f64>,
    pub itl_p99: Option<f64>,
    pub ttft_p50: Option<f64>,
    pub itl_p50: Option<f64>,
    pub measured_ttft_p99: f64,
    pub measured_itl_p99: f64,
    pub measured_ttft_p50: f64,
    pub measured_itl_p50: f64,
    /// (predicted − measured) / measured.
    pub error_ttft_p99: Option<f64>,
    pub error_itl_p99: Option<f64>,
    /// The share of the model's gaps between tokens at or below the measured ITL p99
    /// ([`super::batching::itl_share_at_most`]): at least 0.99 when the model agrees (its distribution is a set of
    /// weighted points, so a value on the p99's point counts all of it). Near a jump in the distribution (a
    /// gap that holds another request's prompt, one in a hundred) a p99 off by tens of per cent
    /// can sit at the model's 0.985.
    #[serde(default)]
    pub itl_rank: Option<f64>,
    /// Counted in the summary: trusted, not the base step, not saturated, below capacity × 0.8.
    pub counted: bool,
}

/// Every step predicted, and the error summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmCheck {
    pub calibration: LlmCalibration,
    /// Where the engine's slots came from: [`check`] is given a count and leaves this
    /// [`SlotsFrom::Assumed`]; the fit the server stores ([`crate::wire::measured::llm_digest`])
    /// says where its count came from.
    #[serde(default)]
    pub slots_from: SlotsFrom,
    pub predictions: Vec<LlmPrediction>,
    /// Mean absolute error of TTFT p99 and of ITL p99 over the counted steps, as fractions.
    pub mape_ttft_p99: Option<f64>,
    pub mape_itl_p99: Option<f64>,
}

impl LlmCheck {
    /// Whether every figure is a finite number (JSON, where it is stored, has no other).
    pub fn is_finite(&self) -> bool {
        let c = &self.calibration;
        let e = &c.engine;
        let some = |v: Option<f64>| v.is_none_or(f64::is_finite);
        [e.fixed.0, e.per_sequence.0, e.per_prompt_token.0, c.input_tokens, c.input_cv, c.output_tokens]
            .iter()
            .all(|v| v.is_finite())
            && some(self.mape_ttft_p99)
            && some(self.mape_itl_p99)
            && self.predictions.iter().all(|p| {
                [p.offered, p.measured_ttft_p99, p.measured_itl_p99, p.measured_ttft_p50, p.measured_itl_p50]
                    .iter()
                    .all(|v| v.is_finite())
                    && [
                        p.busy,
                        p.ttft_p99,
                        p.itl_p99,
                        p.ttft_p50,
                        p.itl_p50,
                        p.error_ttft_p99,
                        p.error_itl_p99,
                        p.itl_rank,
                    ]
                    .into_iter()
                    .all(some)
            })
    }
}

/// Calibrates on `steps` and predicts each at its offered rate and the base step's lengths.
pub fn check(steps: &[LlmStep], slots: u32) -> Option<LlmCheck> {
    let calibration = calibrate(steps, slots)?;
    let engine = calibration.engine;
    let capacity = engine.capacity(calibration.input_tokens, calibration.output_tokens);
    let predictions: Vec<LlmPrediction> = steps
        .iter()
        .map(|s| {
            let load = calibration.load_at(s.step.offered);
            let ranked = predict_ranked(&engine, &load, (s.itl.p99 > 0.0).then_some(s.itl.p99)).ok().flatten();
            let (latency, itl_rank) = (ranked.map(|r| r.0), ranked.and_then(|r| r.1));
            let error = |p: Option<f64>, m: f64| p.filter(|_| m > 0.0).map(|p| (p - m) / m);
            let ttft_p99 = latency.map(|l| l.ttft_p99.0);
            let itl_p99 = latency.map(|l| l.itl_p99.0);
            LlmPrediction {
                step: s.step.step,
                offered: s.step.offered,
                busy: latency.map(|l| l.busy),
                ttft_p99,
                itl_p99,
                ttft_p50: latency.map(|l| l.ttft_p50.0),
                itl_p50: latency.map(|l| l.itl_p50.0),
                measured_ttft_p99: s.ttft.p99,
                measured_itl_p99: s.itl.p99,
                measured_ttft_p50: s.ttft.p50,
                measured_itl_p50: s.itl.p50,
                error_ttft_p99: error(ttft_p99, s.ttft.p99),
                error_itl_p99: error(itl_p99, s.itl.p99),
                itl_rank,
                counted: s.step.trusted()
                    && !s.step.saturated
                    && s.step.error_rate <= 0.01
                    && s.step.step != calibration.base_step
                    && s.step.offered < COUNTED_BELOW_UTILIZATION * capacity
                    && latency.is_some(),
            }
        })
        .collect();
    let mean = |pick: fn(&LlmPrediction) -> Option<f64>| {
        let errors: Vec<f64> = predictions.iter().filter(|p| p.counted).filter_map(pick).map(f64::abs).collect();
        (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64)
    };
    Some(LlmCheck {
        calibration,
        slots_from: SlotsFrom::Assumed,
        mape_ttft_p99: mean(|p| p.error_ttft_p99),
        mape_itl_p99: mean(|p| p.error_itl_p99),
        predictions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::run::{Case, Unit};

    /// The measurements of one open-loop step, as the agent stores them, saying what the model
    /// predicts for `engine` at `rate`.
    fn step(step: u32, rate: f64, engine: &Engine, load: Load) -> Vec<Measurement> {
        let l = predict(engine, &Load { rate, ..load }).unwrap().unwrap();
        let parameters: BTreeMap<String, String> =
            [("step", step.to_string()), ("saturated", "false".into()), ("client_limited", "false".into())]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        let requests = 400u64;
        let m = |case: &str, unit: Unit, stats: Stats| Measurement {
            suite: Suite::Endpoint,
            case: case.into(),
            parameters: parameters.clone(),
            unit,
            status: MeasurementStatus::Ok,
            reason: None,
            histogram: None,
            stats: Some(stats),
            floor: None,
        };
        let quantiles = |p50: f64, p99: f64| Stats { p50, p99, samples: requests, ..Stats::single(p50) };
        vec![
            m(
                Case::EndpointLatency.as_str(),
                Unit::Seconds,
                Stats { samples: requests, ..Stats::single(l.e2e_mean.0) },
            ),
            m(Case::EndpointOfferedRate.as_str(), Unit::RequestsPerSecond, Stats::single(rate)),
            m(Case::EndpointAchievedRate.as_str(), Unit::RequestsPerSecond, Stats::single(rate)),
            m(Case::EndpointErrorRate.as_str(), Unit::Ratio, Stats::single(0.0)),
            m("endpoint_ttft", Unit::Seconds, quantiles(l.ttft_p50.0, l.ttft_p99.0)),
            m("endpoint_itl", Unit::Seconds, Stats { mean: l.itl_mean.0, ..quantiles(l.itl_p50.0, l.itl_p99.0) }),
            m("endpoint_input_tokens", Unit::Count, Stats::single(load.input_tokens * requests as f64)),
            m("endpoint_output_tokens", Unit::Count, Stats::single(load.output_tokens * requests as f64)),
        ]
    }

    #[test]
    fn a_run_that_measured_the_model_is_fitted_back_and_predicted_within_its_own_error() {
        let engine = Engine {
            fixed: Seconds(0.010),
            per_sequence: Seconds(0.0005),
            per_prompt_token: Seconds(0.0001),
            slots: 32,
        };
        let load = Load { rate: 0.0, input_tokens: 200.0, input_cv: 0.0, output_tokens: 64.0 };
        let rates = [0.2, 2.0, 5.0, 8.0];
        let ms: Vec<Measurement> =
            rates.iter().enumerate().flat_map(|(i, &r)| step(i as u32 + 1, r, &engine, load)).collect();
        let steps = steps(&ms);
        assert_eq!(steps.len(), 4);
        assert_eq!((steps[0].input_tokens, steps[0].output_tokens, steps[0].requests), (200.0, 64.0, 400));
        let check = check(&steps, 32).unwrap();
        let fitted = check.calibration.engine;
        assert_eq!(check.calibration.base_step, 1);
        assert_eq!(check.calibration.batch_step, Some(4), "the step with the largest batch");
        // The base step's median gap is t₀ + d·(1 + a few others), so t₀ + d comes out a little
        // high and d is fitted to make up for it at the loaded step: close, not exact.
        let within = |a: f64, b: f64, tolerance: f64| (a - b).abs() <= tolerance * b;
        assert!(within(fitted.fixed.0 + fitted.per_sequence.0, 0.0105, 0.05), "{fitted:?}");
        assert!(within(fitted.per_prompt_token.0, 0.0001, 0.25), "{fitted:?}");
        assert!(check.predictions.iter().filter(|p| p.counted).count() >= 2, "{check:?}");
        assert!(check.mape_ttft_p99.unwrap() < 0.15 && check.mape_itl_p99.unwrap() < 0.15, "{check:?}");
        // Each measured ITL p99 sits near the fitted model's own 99th percentile.
        assert!(check.predictions.iter().all(|p| p.itl_rank.is_some_and(|r| (0.97..=1.0).contains(&r))), "{check:?}");
        // Nothing to fit on: no step with an answer.
        assert!(super::check(&[], 32).is_none());
        // What is stored as JSON must be numbers JSON holds.
        assert!(check.is_finite());
        let mut odd = check.clone();
        odd.predictions[1].error_itl_p99 = Some(f64::INFINITY);
        assert!(!odd.is_finite());
        odd.predictions[1].error_itl_p99 = None;
        odd.calibration.engine.per_prompt_token = Seconds(f64::NAN);
        assert!(!odd.is_finite());
    }

    #[test]
    fn a_runs_slots_are_the_ones_it_recorded_and_assumed_where_they_are_not_a_count() {
        let engine =
            Engine { fixed: Seconds(0.01), per_sequence: Seconds(0.0), per_prompt_token: Seconds(0.0001), slots: 4 };
        let load = Load { rate: 0.0, input_tokens: 100.0, input_cv: 0.0, output_tokens: 16.0 };
        let with = |pairs: &[(&str, &str)]| {
            let mut ms = step(1, 0.5, &engine, load);
            for m in &mut ms {
                m.parameters.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            }
            slots(&ms)
        };
        assert_eq!(with(&[("slots", "4"), ("slots_from", "server")]), (4, SlotsFrom::Server));
        assert_eq!(with(&[("slots", "12"), ("slots_from", "stated")]), (12, SlotsFrom::Stated));
        let assumed = (ASSUMED_SLOTS, SlotsFrom::Assumed);
        assert_eq!(with(&[]), assumed);
        // A count with no source, a source with no count, and counts that are not slots.
        assert_eq!(with(&[("slots", "4")]), assumed);
        assert_eq!(with(&[("slots_from", "server")]), assumed);
        for bad in ["0", "-3", "4.5", "NaN", "4097", "100001", "</td><script>"] {
            assert_eq!(with(&[("slots", bad), ("slots_from", "server")]), assumed, "{bad}");
        }
        assert_eq!(with(&[("slots", "4"), ("slots_from", "guessed")]), assumed);
        assert_eq!(slots(&[]), assumed);
    }
}
