//! The scheduler that [`super::batching`] approximates, simulated event by event, and what it
//! says of a load test's own noise.
//!
//! [`simulate`]: Poisson arrivals, at most S resident sequences, each iteration reading the
//! prompts of every request admitted since the last and one token of every other resident
//! sequence, and lasting t₀ + d·N + p·P. Seeded and deterministic.
//!
//! [`sampling`]: a p99 read off a step of a few dozen seconds is itself uncertain, the more so
//! near capacity, where one burst holds a run of requests back. To tell a model's error from
//! that noise, the steps of a run are simulated again and again with the engine fitted on it
//! (at each step's rate and number of requests, with the fitted lengths), each replicate is
//! fitted and checked as the run was, and the spread of the replicates' mean |error| of TTFT
//! p99 is what a run gives when the server is the scheduler the model describes (a parametric
//! bootstrap): sampling noise, plus the approximation's own error and the fit's. For
//! four 30-second steps at 9–57 % of a CPU-like engine's capacity that mean was 0.26 in the
//! median replicate, above 0.55 in one in ten and up to 0.86 (`model/tests/llm_simulation.rs`).

use std::collections::VecDeque;

use super::batching::{Engine, Load};
use super::fit::{LlmCheck, LlmStep, check};
use crate::plan::endpoint::{Band, Step};
use crate::plan::rng::Rng;
use crate::wire::run::Stats;

/// What a simulated run measured of the requests that arrived after its warm-up, each list in
/// increasing order but `prompts`, which is in arrival order.
#[derive(Debug, Clone, Default)]
pub struct Simulated {
    pub ttft: Vec<f64>,
    pub itl: Vec<f64>,
    /// Arrival to last token.
    pub e2e: Vec<f64>,
    pub prompts: Vec<f64>,
    /// Seconds from the first counted arrival to the last.
    pub span: f64,
}

impl Simulated {
    /// The q-quantile as an HDR histogram reads it: the smallest value with at least q of
    /// the count at or below it (0 when empty).
    pub fn quantile(values: &[f64], q: f64) -> f64 {
        if values.is_empty() {
            return 0.0;
        }
        let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
        values[rank - 1]
    }

    /// The share of values at or below `x`.
    pub fn rank(values: &[f64], x: f64) -> f64 {
        values.partition_point(|v| *v <= x) as f64 / values.len().max(1) as f64
    }
}

/// `requests` arrivals at `load` (prompts gamma-distributed with its mean and cv), the first
/// `warmup` of them served but not counted; nothing when the engine or load is invalid, the
/// rate is not positive or no request is left after the warm-up.
pub fn simulate(engine: &Engine, load: &Load, requests: usize, warmup: usize, rng: &mut Rng) -> Simulated {
    // Nothing arrives, or nothing could ever be served: nothing to measure.
    if engine.validate().is_err() || load.validate().is_err() || load.rate <= 0.0 || requests <= warmup {
        return Simulated::default();
    }
    let (t0, d, p) = (engine.fixed.0, engine.per_sequence.0, engine.per_prompt_token.0);
    let output = (load.output_tokens.round() as u32).max(1);
    // (arrival, prompt tokens)
    let mut arrivals = VecDeque::with_capacity(requests);
    let mut t = 0.0;
    for _ in 0..requests {
        t += rng.exp(load.rate);
        // A cv below 10⁻³ is no variation, as `queue::Service` takes it (its gamma shape,
        // 1 ÷ cv², passes 10⁶ and at the limit is not finite).
        let prompt = if load.input_cv >= 1e-3 {
            let shape = 1.0 / (load.input_cv * load.input_cv);
            rng.gamma(shape) * load.input_tokens / shape
        } else {
            load.input_tokens
        };
        arrivals.push_back((t, prompt));
    }
    let mut out = Simulated::default();
    let Some(&(from, _)) = arrivals.get(warmup) else { return out };
    out.span = t - from;
    let mut waiting: VecDeque<(f64, f64)> = VecDeque::new();
    // Resident: (arrival, tokens produced, time of the last token).
    let mut resident: Vec<(f64, u32, f64)> = Vec::new();
    let mut now = 0.0f64;
    while !(arrivals.is_empty() && waiting.is_empty() && resident.is_empty()) {
        while arrivals.front().is_some_and(|&(a, _)| a <= now) {
            waiting.extend(arrivals.pop_front());
        }
        if waiting.is_empty() && resident.is_empty() {
            if let Some(&(next, _)) = arrivals.front() {
                now = next;
            }
            continue;
        }
        let decoding = resident.len();
        let free = (engine.slots as usize).saturating_sub(resident.len());
        let admitted: Vec<(f64, f64)> = waiting.drain(..free.min(waiting.len())).collect();
        let prompt_tokens: f64 = admitted.iter().map(|a| a.1).sum();
        now += t0 + d * (decoding + admitted.len()) as f64 + p * prompt_tokens;
        for seq in resident.iter_mut() {
            if seq.0 >= from {
                out.itl.push(now - seq.2);
            }
            seq.1 += 1;
            seq.2 = now;
        }
        for (arrival, prompt) in admitted {
            if arrival >= from {
                out.ttft.push(now - arrival);
                out.prompts.push(prompt);
            }
            resident.push((arrival, 1, now));
        }
        for seq in resident.iter().filter(|seq| seq.1 >= output && seq.0 >= from) {
            out.e2e.push(now - seq.0);
        }
        resident.retain(|seq| seq.1 < output);
    }
    out.ttft.sort_by(f64::total_cmp);
    out.itl.sort_by(f64::total_cmp);
    out.e2e.sort_by(f64::total_cmp);
    out
}

/// A simulated run's measurements as one step of a load test (quantiles read as the agent's
/// histograms read them), its answers `output_tokens` long as simulated.
fn as_step(step: &LlmStep, sim: &Simulated, output_tokens: f64) -> LlmStep {
    let stats = |values: &[f64]| {
        let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
        Stats {
            samples: values.len() as u64,
            p50: Simulated::quantile(values, 0.5),
            p90: Simulated::quantile(values, 0.9),
            p99: Simulated::quantile(values, 0.99),
            p999: Simulated::quantile(values, 0.999),
            ..Stats::single(mean)
        }
    };
    let n = sim.prompts.len().max(1) as f64;
    let input = sim.prompts.iter().sum::<f64>() / n;
    let sd = (sim.prompts.iter().map(|x| (x - input).powi(2)).sum::<f64>() / n).sqrt();
    let e2e = stats(&sim.e2e);
    LlmStep {
        step: Step {
            achieved: if sim.span > 0.0 { sim.ttft.len() as f64 / sim.span } else { step.step.offered },
            mean: Some(e2e.mean),
            p50: Some(e2e.p50),
            p99: Some(e2e.p99),
            cv: None,
            requests: sim.e2e.len() as u64,
            error_rate: 0.0,
            saturated: false,
            client_limited: false,
            ..step.step.clone()
        },
        ttft: stats(&sim.ttft),
        itl: stats(&sim.itl),
        input_tokens: input,
        input_cv: if input > 0.0 { sd / input } else { 0.0 },
        output_tokens: output_tokens.round().max(1.0),
        requests: sim.ttft.len() as u64,
        tokens_per_second: None,
    }
}

/// The most replicates [`sampling`] runs (each a simulation of every step and a fit).
pub const MAX_REPLICATES: usize = 1000;

/// The most requests [`sampling`] simulates of one step (a few minutes at a thousand a second).
pub const MAX_SIMULATED_REQUESTS: usize = 200_000;

/// The mean |error| of TTFT p99 of runs like `steps` of the scheduler the model describes, with
/// the engine `fitted` on it: sampling noise, the approximation's error and the fit's. One
/// value per replicate that could be checked, in increasing order.
pub struct Sampling {
    pub mape_ttft_p99: Vec<f64>,
}

impl Sampling {
    /// The q-quantile of the replicates' mean |error| (`None` without one).
    pub fn ttft_p99_error(&self, q: f64) -> Option<f64> {
        (!self.mape_ttft_p99.is_empty()).then(|| Simulated::quantile(&self.mape_ttft_p99, q))
    }
}

/// Simulates the trusted, unsaturated steps of a run `replicates` times with the engine of
/// `fitted` (each step at its offered rate, with as many requests as it counted and a tenth
/// more before them as a warm-up), fits and checks every replicate as [`check`] did the run.
pub fn sampling(fitted: &LlmCheck, steps: &[LlmStep], replicates: usize, seed: u64) -> Sampling {
    let c = &fitted.calibration;
    let capacity = c.engine.capacity(c.input_tokens, c.output_tokens);
    let kept: Vec<&LlmStep> = steps
        .iter()
        .filter(|s| s.step.trusted() && !s.step.saturated && s.step.error_rate <= 0.01 && s.step.offered < capacity)
        .take(super::fit::MAX_LLM_STEPS)
        .collect();
    let mut rng = Rng::seeded(seed);
    let mut mape = Vec::new();
    for _ in 0..replicates.min(MAX_REPLICATES) {
        let synthetic: Vec<LlmStep> = kept
            .iter()
            .map(|s| {
                let requests = (s.requests as usize).min(MAX_SIMULATED_REQUESTS);
                let sim =
                    simulate(&c.engine, &c.load_at(s.step.offered), requests + requests / 10, requests / 10, &mut rng);
                as_step(s, &sim, c.output_tokens)
            })
            .filter(|s| s.requests > 0)
            .collect();
        if let Some(error) = check(&synthetic, c.engine.slots).and_then(|c| c.mape_ttft_p99) {
            mape.push(error);
        }
    }
    mape.sort_by(f64::total_cmp);
    Sampling { mape_ttft_p99: mape }
}

/// Where one step's TTFT and ITL p99 would fall by chance were the server the fitted engine:
/// the 5th to 95th percentile of those p99s over simulated steps of its rate and size.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LlmBand {
    pub step: u32,
    pub ttft: Band,
    pub itl: Band,
}

/// The most tokens [`bands`] simulates for one run, all steps, replicates and warm-ups together
/// (a fraction of a second of one core; it runs once, when the run is stored).
pub const BANDS_BUDGET: f64 = 5e6;

/// The [`LlmBand`] of every step the check counts (trusted, unsaturated, at most 1 % errors,
/// below 80 % of capacity), with as many replicates (20 to 100) as [`BANDS_BUDGET`] allows over
/// those steps' tokens; empty when they are too large for 20 replicates each (then their p99s
/// rest on so many tokens that chance moves them little). Seeded by step: the same run gets
/// the same bands.
///
/// At a low rate a step's ITL p99 sits where the model's gaps jump from one iteration of a few
/// sequences to one that also reads another request's prompt (a few gaps in a hundred hold
/// one): whether a step's p99 lands below or above that jump is mostly chance, and the band
/// says so where a value error of tens of per cent would not.
pub fn bands(fitted: &LlmCheck, steps: &[LlmStep]) -> Vec<LlmBand> {
    let c = &fitted.calibration;
    let counted: Vec<&LlmStep> = steps
        .iter()
        .filter(|s| fitted.predictions.iter().any(|p| p.step == s.step.step && p.counted))
        .filter(|s| s.requests > 0)
        .collect();
    let tokens = c.output_tokens.max(1.0) + 1.0;
    let per_replicate: f64 = counted.iter().map(|s| (s.requests as f64 * 1.1 + 1.0) * tokens).sum();
    let replicates = (BANDS_BUDGET / per_replicate.max(1.0)).min(100.0) as usize;
    if replicates < 20 {
        return Vec::new();
    }
    counted
        .into_iter()
        .filter_map(|s| {
            let mut rng = Rng::seeded(u64::from(s.step.step) << 32 | 0x11);
            let load = c.load_at(s.step.offered);
            let requests = s.requests as usize;
            let (mut ttft, mut itl) = (Vec::with_capacity(replicates), Vec::with_capacity(replicates));
            for _ in 0..replicates {
                let sim = simulate(&c.engine, &load, requests + requests / 10 + 1, requests / 10 + 1, &mut rng);
                if sim.ttft.is_empty() || sim.itl.is_empty() {
                    continue;
                }
                ttft.push(Simulated::quantile(&sim.ttft, 0.99));
                itl.push(Simulated::quantile(&sim.itl, 0.99));
            }
            if ttft.len() < 20 {
                return None;
            }
            ttft.sort_by(f64::total_cmp);
            itl.sort_by(f64::total_cmp);
            // As many replicates below the band as above it: a twentieth of them on each side.
            let band = |values: &[f64]| {
                let outside = values.len() / 20;
                let (low, high) = (values[outside], values[values.len() - 1 - outside]);
                // Figures so extreme that the simulated clock lost them (a hostile upload's
                // rate of 1e-300/s) give no band: it is stored as JSON, where they do not survive.
                (low.is_finite() && high.is_finite() && low > 0.0).then_some(Band { step: s.step.step, low, high })
            };
            Some(LlmBand { step: s.step.step, ttft: band(&ttft)?, itl: band(&itl)? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Seconds;

    fn engine(slots: u32) -> Engine {
        Engine { fixed: Seconds(0.001), per_sequence: Seconds(0.0), per_prompt_token: Seconds(0.0), slots }
    }

    #[test]
    fn nothing_to_measure_ends_at_once_with_nothing() {
        let load = Load { rate: 1.0, input_tokens: 10.0, input_cv: 0.0, output_tokens: 4.0 };
        let mut rng = Rng::seeded(1);
        for (engine, load, requests, warmup) in [
            (engine(0), load, 10, 1),
            (engine(1), Load { rate: 0.0, ..load }, 10, 1),
            (engine(1), Load { rate: f64::NAN, ..load }, 10, 1),
            (engine(1), Load { output_tokens: 0.0, ..load }, 10, 1),
            (engine(1), load, 5, 5),
        ] {
            let sim = simulate(&engine, &load, requests, warmup, &mut rng);
            assert!(sim.ttft.is_empty() && sim.itl.is_empty() && sim.e2e.is_empty(), "{engine:?} {load:?}");
        }
    }

    #[test]
    fn a_lone_request_takes_one_iteration_a_token() {
        // One request every 100 s on an engine whose iteration is 1 ms: never a queue.
        let load = Load { rate: 0.01, input_tokens: 10.0, input_cv: 0.0, output_tokens: 4.0 };
        let sim = simulate(&engine(4), &load, 50, 5, &mut Rng::seeded(2));
        assert_eq!((sim.ttft.len(), sim.e2e.len(), sim.itl.len()), (45, 45, 45 * 3));
        assert!(sim.ttft.iter().chain(&sim.itl).all(|t| (t - 0.001).abs() < 1e-9), "{sim:?}");
        assert!(sim.e2e.iter().all(|t| (t - 0.004).abs() < 1e-9), "{sim:?}");
    }
}
