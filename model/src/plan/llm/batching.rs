//! TTFT and ITL under continuous batching (the scheduling of vLLM, TGI and llama.cpp's server).
//!
//! The engine runs iterations. Each takes one token of every sequence it is generating (N of
//! them) and the whole prompt of every request admitted since the last one (P tokens in all),
//! and lasts t = t₀ + d·N + p·P: a fixed cost t₀ (reading the weights, launching work), d per
//! sequence decoded and p per prompt token (1/p is the prefill rate). At most S sequences are
//! resident at once (the engine's slots, bounded by the KV cache: see [`super::memory`]).
//!
//! Requests arrive as a Poisson process at rate λ with I prompt tokens and O output tokens. A
//! request's first token comes out of the iteration that reads its prompt; each later token
//! takes one iteration. The stationary approximation:
//!
//! - L, the mean number of resident sequences, solves L = λ·R(L), where R is the mean residence
//!   (a wait for the iteration under way, the prompt's iteration, and O − 1 iterations more);
//! - resident sequences are taken as Poisson(L) (as in M/G/∞), so the engine is busy with
//!   probability u = 1 − e^(−L) and its batch while busy is B = L / u;
//! - while busy, iterations take τ = (t₀ + d·B) / (1 − p·λ·I / u) on average: the prompt tokens
//!   that arrive during an iteration (λ·I·τ/u of them) are read in the next;
//! - a token's gap (ITL) is t₀ + d·(1 + N') + p·I·K, with N' ~ Poisson(L) other sequences and
//!   K ~ Poisson(λτ) prompts admitted into that iteration;
//! - a request's TTFT is a wait for a free slot (Erlang C over S slots each held for R), then,
//!   with probability u, the rest of the iteration under way (uniform over τ), then its own
//!   iteration t₀ + d·N' + p·I·(1 + K'), K' ~ Poisson(λ·rest).
//!
//! Percentiles are read off these mixtures, enumerated with their weights (deterministic, so a
//! replica search over rates is monotone and the browser and server agree).

use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::plan::queue::erlang_b;
use crate::units::Seconds;

/// The approximation holds (checked against a simulation of the scheduler in
/// `model/tests/llm_simulation.rs`) while the resident sequences fill at most this share of the
/// slots and add at most this share of t₀ to an iteration (d·L ≤ 0.5·t₀). Beyond, a burst of
/// arrivals lengthens every iteration, which keeps sequences resident longer, which lengthens
/// iterations again: the batch varies far more than Poisson(L) and the model under-predicts
/// the tails. [`Latency::validated`] says which side a prediction is on.
pub const VALIDATED_SHARE: f64 = 0.5;

/// What an engine's iteration costs: t = t₀ + d·N + p·P (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Engine {
    /// t₀: the cost of an iteration whatever it holds.
    pub fixed: Seconds,
    /// d: the added cost of each sequence decoded in it.
    pub per_sequence: Seconds,
    /// p: the cost of each prompt token read in it (the prefill rate is 1/p).
    pub per_prompt_token: Seconds,
    /// S: sequences resident at once.
    pub slots: u32,
}

/// The traffic offered to one replica.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Load {
    /// λ, requests per second.
    pub rate: f64,
    /// I, the mean prompt length in tokens.
    pub input_tokens: f64,
    /// O, the mean number of generated tokens (at least 1).
    pub output_tokens: f64,
}

/// The model's answer at one load.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Latency {
    pub ttft_p50: Seconds,
    pub ttft_p99: Seconds,
    pub itl_p50: Seconds,
    pub itl_p99: Seconds,
    /// Mean TTFT plus O − 1 mean gaps.
    pub e2e_mean: Seconds,
    /// L: sequences resident on average.
    pub mean_resident: f64,
    /// u: the share of time the engine is working.
    pub busy: f64,
    /// τ: the mean iteration while busy.
    pub iteration: Seconds,
    /// Probability that a request waits for a free slot.
    pub slot_wait_probability: f64,
    /// Output tokens per second.
    pub output_tokens_per_second: f64,
    /// Inside the range the approximation was checked in ([`VALIDATED_SHARE`]).
    pub validated: bool,
}

impl Engine {
    /// Checks every field, naming the one that is wrong.
    pub fn validate(&self) -> Result<(), ModelError> {
        non_negative("fixed_s", self.fixed.0)?;
        non_negative("per_sequence_s", self.per_sequence.0)?;
        non_negative("per_prompt_token_s", self.per_prompt_token.0)?;
        positive("iteration_s", self.fixed.0 + self.per_sequence.0)
            .map_err(|_| FieldError::new("fixed_s", "an iteration must take some time: fixed + per sequence > 0"))?;
        if self.slots == 0 {
            return Err(FieldError::new("slots", "must be at least 1"));
        }
        Ok(())
    }

    /// The highest request rate one replica sustains at this load's lengths: its slots full and
    /// each iteration as large as they allow, or its prompt reading, whichever binds first.
    pub fn capacity(&self, input_tokens: f64, output_tokens: f64) -> f64 {
        let s = f64::from(self.slots);
        // Full: S sequences, each needing O iterations and p·I of prompt work.
        let per_request =
            output_tokens * (self.fixed.0 + self.per_sequence.0 * s) / s + self.per_prompt_token.0 * input_tokens;
        1.0 / per_request
    }
}

impl Load {
    pub fn validate(&self) -> Result<(), ModelError> {
        non_negative("rate_per_s", self.rate)?;
        non_negative("input_tokens", self.input_tokens)?;
        if positive("output_tokens", self.output_tokens)? < 1.0 {
            return Err(FieldError::new("output_tokens", "must be at least 1 (the first token)"));
        }
        Ok(())
    }
}

/// Poisson(mean) probabilities from its mode out to where they vanish, as (k, weight).
fn poisson(mean: f64, limit: u32) -> Vec<(u32, f64)> {
    if mean <= 1e-12 {
        return vec![(0, 1.0)];
    }
    let spread = 7.0 * mean.sqrt() + 7.0;
    let lo = (mean - spread).max(0.0) as u32;
    let hi = ((mean + spread) as u32).min(limit);
    let ln_mean = mean.ln();
    let mut out = Vec::with_capacity((hi - lo + 1) as usize);
    let mut ln_factorial = (1..=lo).map(|k| f64::from(k).ln()).sum::<f64>();
    for k in lo..=hi {
        if k > lo {
            ln_factorial += f64::from(k).ln();
        }
        let weight = (f64::from(k) * ln_mean - mean - ln_factorial).exp();
        // Terms too small to move a p99 only cost time in the mixtures built from them.
        if weight > 1e-12 || k == hi {
            out.push((k, weight));
        }
    }
    // Mass beyond `limit` (a cap such as the slots) sits on the cap.
    let total: f64 = out.iter().map(|(_, w)| w).sum();
    if let Some(last) = out.last_mut() {
        last.1 += (1.0 - total).max(0.0);
    }
    out
}

/// The q-quantile of a weighted sample.
fn quantile(points: &mut [(f64, f64)], q: f64) -> f64 {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = points.iter().map(|p| p.1).sum();
    let mut seen = 0.0;
    for &(value, weight) in points.iter() {
        seen += weight;
        if seen >= q * total {
            return value;
        }
    }
    points.last().map_or(0.0, |p| p.0)
}

struct Steady {
    resident: f64,
    busy: f64,
    iteration: f64,
    slot_wait: f64,
    slot_wait_rate: f64,
}

/// Solves L = λ·R(L); `None` past what the engine can serve.
fn steady(engine: &Engine, load: &Load) -> Option<Steady> {
    let (t0, d, p) = (engine.fixed.0, engine.per_sequence.0, engine.per_prompt_token.0);
    let (lambda, i, o) = (load.rate, load.input_tokens, load.output_tokens);
    let s = f64::from(engine.slots);
    if lambda >= engine.capacity(i, o) {
        return None;
    }
    let mut l = lambda * (o * (t0 + d) + p * i);
    for _ in 0..500 {
        let busy = (1.0 - (-l).exp()).max(1e-12);
        let batch = (l / busy).clamp(1.0, s);
        let prompt_share = p * lambda * i / busy;
        if prompt_share >= 1.0 {
            l = (l * 2.0).max(1e-6);
            continue;
        }
        let tau = (t0 + d * batch) / (1.0 - prompt_share);
        let residence = busy * tau / 2.0 + tau + p * i + (o - 1.0) * tau;
        let next = (lambda * residence).min(s);
        if (next - l).abs() <= 1e-10 * l.max(1e-9) {
            l = next;
            break;
        }
        l = 0.5 * (l + next);
    }
    let busy = (1.0 - (-l).exp()).max(1e-12);
    let batch = (l / busy).clamp(1.0, s);
    let prompt_share = p * lambda * i / busy;
    if prompt_share >= 1.0 {
        return None;
    }
    let iteration = (t0 + d * batch) / (1.0 - prompt_share);
    let residence = busy * iteration / 2.0 + iteration + p * i + (o - 1.0) * iteration;
    // Waiting for a slot: Erlang C with S slots, each held for the residence.
    let offered = lambda * residence;
    if offered >= s {
        return None;
    }
    let b = erlang_b(engine.slots, offered);
    let rho = offered / s;
    let slot_wait = b / (1.0 - rho * (1.0 - b));
    let slot_wait_rate = (s - offered) / residence;
    Some(Steady { resident: l, busy, iteration, slot_wait, slot_wait_rate })
}

/// Quantile points of Exp(rate): `n` midpoints of equal probability.
fn exponential_points(rate: f64, n: usize) -> impl Iterator<Item = f64> {
    (0..n).map(move |k| -(1.0 - (k as f64 + 0.5) / n as f64).ln() / rate)
}

/// TTFT and ITL percentiles at `load`; `Err` for invalid inputs, `Ok(None)` where the engine
/// cannot keep up (the queue grows without bound).
pub fn predict(engine: &Engine, load: &Load) -> Result<Option<Latency>, ModelError> {
    engine.validate()?;
    load.validate()?;
    let Some(st) = steady(engine, load) else { return Ok(None) };
    let (t0, d, p) = (engine.fixed.0, engine.per_sequence.0, engine.per_prompt_token.0);
    let (lambda, i) = (load.rate, load.input_tokens);
    let batch = (st.resident / st.busy).clamp(1.0, f64::from(engine.slots));
    let others = poisson(st.resident, engine.slots.saturating_sub(1));
    // Prompts read in a sequence's next iteration: those that arrived during its last one.
    let admitted = poisson(lambda * st.iteration, 64);

    let mut gaps = Vec::with_capacity(others.len() * admitted.len());
    for &(n, wn) in &others {
        for &(k, wk) in &admitted {
            gaps.push((t0 + d * f64::from(1 + n) + p * i * f64::from(k), wn * wk));
        }
    }
    let itl_mean = gaps.iter().map(|(g, w)| g * w).sum::<f64>() / gaps.iter().map(|g| g.1).sum::<f64>();

    // An arrival that finds the engine busy waits for the rest of the iteration under way,
    // uniform over it. Iterations that read prompts are long and come at the rate prompts do
    // (each reads the one that opened it and those that arrived during the iteration before),
    // so they take a share f_p of the time that a mean over iterations would hide.
    const REST: usize = 12;
    const WAIT: usize = 8;
    let decode = t0 + d * batch;
    let extra = poisson(lambda * decode, 64);
    let prompt_iterations = lambda / (1.0 + lambda * decode);
    let lengths: Vec<(f64, f64)> = extra.iter().map(|&(k, w)| (decode + p * i * f64::from(1 + k), w)).collect();
    let mean_length: f64 = lengths.iter().map(|(len, w)| len * w).sum();
    let prompt_share = (prompt_iterations * mean_length).min(st.busy);
    let mut rests = vec![(0.0, 1.0 - st.busy)];
    let mut spread = |len: f64, share: f64| {
        rests.extend((0..REST).map(|k| ((k as f64 + 0.5) / REST as f64 * len, share / REST as f64)))
    };
    spread(decode, st.busy - prompt_share);
    for &(len, w) in &lengths {
        spread(len, prompt_share * len * w / mean_length);
    }
    let mut waits = vec![(0.0, 1.0 - st.slot_wait)];
    if st.slot_wait > 1e-6 {
        waits.extend(exponential_points(st.slot_wait_rate, WAIT).map(|w| (w, st.slot_wait / WAIT as f64)));
    }
    let decoding = poisson(st.resident, engine.slots.saturating_sub(1));
    let mut firsts = Vec::new();
    for &(rest, wr) in &rests {
        let joined = poisson(lambda * rest, 64);
        for &(n, wn) in &decoding {
            for &(k, wk) in &joined {
                let own = t0 + d * f64::from(n) + p * i * f64::from(1 + k);
                for &(wait, ww) in &waits {
                    firsts.push((wait + rest + own, wr * wn * wk * ww));
                }
            }
        }
    }
    let total: f64 = firsts.iter().map(|f| f.1).sum();
    let ttft_mean = firsts.iter().map(|(f, w)| f * w).sum::<f64>() / total;
    Ok(Some(Latency {
        ttft_p50: Seconds(quantile(&mut firsts, 0.5)),
        ttft_p99: Seconds(quantile(&mut firsts, 0.99)),
        itl_p50: Seconds(quantile(&mut gaps, 0.5)),
        itl_p99: Seconds(quantile(&mut gaps, 0.99)),
        e2e_mean: Seconds(ttft_mean + (load.output_tokens - 1.0) * itl_mean),
        mean_resident: st.resident,
        busy: st.busy,
        iteration: Seconds(st.iteration),
        slot_wait_probability: st.slot_wait,
        output_tokens_per_second: lambda * load.output_tokens,
        validated: st.resident <= VALIDATED_SHARE * f64::from(engine.slots) && d * st.resident <= VALIDATED_SHARE * t0,
    }))
}
