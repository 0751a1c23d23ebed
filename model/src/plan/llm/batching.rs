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
//! takes one iteration. The approximation:
//!
//! - the requests held (resident, or waiting for a slot): reading a prompt stops every
//!   sequence for p·I, and the prompts that arrive meanwhile are read next, so on a clock that
//!   runs only while the engine decodes requests come in clusters (one arrival and all it
//!   holds up, a Borel number, mean 1 ÷ (1 − a), a = p·λ·I, or its negative binomial kin
//!   when prompt lengths vary) and leave at μ(m) = m ÷ (O·(t₀ +
//!   d·m)). With the fixed cost dominant (a GPU reading its weights) μ is nearly linear in m
//!   and the count nearly Poisson, as in M/G/∞; with the per-sequence cost dominant (a CPU),
//!   nearly geometric, as one processor shared by all; the more of the time goes to prompts,
//!   the heavier its tail. The share a of real time spent reading is added back, each cluster
//!   at its size above the count it found. Past S every slot is taken: a prompt waits unread,
//!   each departure lets one in, and each slot is held a fixed time T (a sequence's O
//!   iterations and the prompts read meanwhile), so the waiters queue as in M/D/S
//!   ([`waiting_line`]), and one that finds j waiting waits for the (j + 1)th of the resident
//!   to leave, those leaving at times spread evenly over T;
//! - while busy, iterations with m resident take τ(m) = (t₀ + d·m) ÷ (1 − φ) on average, where
//!   φ = p·λ·I ÷ u is the share of busy time spent reading prompts (u = 1 − π(0));
//! - the iteration an arrival lands in: with m resident, an iteration reads the k prompts that
//!   arrived during the one before and lasts t₀ + d·m + p·(their tokens), so the counts form a
//!   chain (a long prompt iteration gathers the prompts that make the next one long), whose
//!   long-run iterations, weighted by their length, are where arrivals land ([`landing`]);
//! - a token's gap (ITL) is t₀ + d·m + p·L, L the prompt tokens read in that iteration. Counted
//!   from the prompts' side: a request that finds m < S resident is read beside those m with
//!   the K ~ Poisson(λ·t) others that arrive during the iteration under way (t drawn as above,
//!   so prompts bunch after a long one), one that waits for a slot with the
//!   others freed in the same iteration (about S ÷ O) beside the sequences left, and each of
//!   those sequences gets one gap holding the K prompts read. At most O − 1 such gaps a
//!   request; the rest are plain, t₀ + d·m with m drawn as gaps see it (weight m·π(m)/τ(m));
//! - a request's TTFT is the slot wait, then, when the engine is busy, the rest of the iteration
//!   under way (uniform over it), then its own iteration t₀ + d·(m + 1) + p·(its prompt + I·K'),
//!   K' ~ Poisson(λ·t) the others that arrived during the whole iteration it landed in, before
//!   it as well as after.
//!
//! Percentiles are read off these mixtures, enumerated with their weights (deterministic, so a
//! replica search over rates is monotone and the browser and server agree).

use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::units::Seconds;

/// The approximation was checked against a simulation of the scheduler
/// (`model/tests/llm_simulation.rs`: GPU-like and CPU-like engines, 10–70 % of capacity) where
/// the resident sequences filled at most this share of the slots on average;
/// [`Latency::validated`] says whether a prediction is in that range (and [`VALIDATED_LOAD`]).
pub const VALIDATED_SHARE: f64 = 0.5;

/// The highest share of a replica's capacity ([`Engine::capacity`]) the simulation covered.
pub const VALIDATED_LOAD: f64 = 0.7;

/// The most sequences one replica is modelled with (the chain of requests held costs
/// O(S·[`MAX_CLUSTER`])); engines batch a few hundred.
pub const MAX_SLOTS: u32 = 100_000;

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
    /// The prompt lengths' coefficient of variation (0: all alike); a request's own prompt is
    /// drawn from a gamma distribution with this mean and cv, so long prompts make the TTFT tail.
    #[serde(default)]
    pub input_cv: f64,
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
    /// The mean gap between tokens.
    pub itl_mean: Seconds,
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
    /// Inside the range the approximation was checked in: slots at most [`VALIDATED_SHARE`]
    /// full on average, and the rate at most [`VALIDATED_LOAD`] of capacity.
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
        if !(1..=MAX_SLOTS).contains(&self.slots) {
            return Err(FieldError::new("slots", format!("must be 1 to {MAX_SLOTS}")));
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
        crate::plan::checks::between("input_cv", self.input_cv, 0.0, 5.0)?;
        if positive("output_tokens", self.output_tokens)? < 1.0 {
            return Err(FieldError::new("output_tokens", "must be at least 1 (the first token)"));
        }
        Ok(())
    }
}

/// The work predictions have done on this thread, counted in the steps of their inner loops
/// (a Poisson term, a state × count product; about 400 for each quantile of a prompt
/// spread), so that a caller can stop a search that has cost too much
/// ([`super::sizing::size_within`]). The count follows the input, not the clock or the
/// machine's load, to the rounding of the floating-point library: a comparison rounded the
/// other way (glibc's `exp` against the browser's) can move it a little.
pub mod work {
    use std::cell::Cell;

    thread_local! {
        static SPENT: Cell<u64> = const { Cell::new(0) };
    }

    pub(crate) fn spend(steps: usize) {
        SPENT.with(|spent| spent.set(spent.get().saturating_add(steps as u64)));
    }

    /// Steps counted on this thread so far; a difference of two readings is what lay between.
    pub fn spent() -> u64 {
        SPENT.with(Cell::get)
    }
}

/// Poisson(mean) probabilities from its mode out to where they vanish, as (k, weight).
fn poisson(mean: f64, limit: u32) -> Vec<(u32, f64)> {
    if mean <= 1e-12 || limit == 0 {
        return vec![(0, 1.0)];
    }
    let spread = 7.0 * mean.sqrt() + 7.0;
    let hi = ((mean + spread).min(f64::from(u32::MAX)) as u32).min(limit);
    // A mean far above the cap puts everything on the cap.
    let lo = ((mean - spread).max(0.0) as u32).min(hi);
    // The first weight from its logarithm, the rest by P(k) = P(k − 1)·mean ÷ k: one exp a call
    // (this is on every prediction's hot path), and the ratio's rounding over the ±7σ walked is
    // far below the weights' cut.
    work::spend(hi as usize - lo as usize + 1);
    let mut out = Vec::new();
    let mut weight = (f64::from(lo) * mean.ln() - mean - statrs::function::gamma::ln_gamma(f64::from(lo) + 1.0)).exp();
    for k in lo..=hi {
        if k > lo {
            weight *= mean / f64::from(k);
        }
        // Terms too small to move a p99 only cost time in the mixtures built from them.
        if weight > 1e-12 || k == hi {
            out.push((k, weight));
        }
    }
    // Mass beyond `limit` (the free slots) sits on the cap.
    let total: f64 = out.iter().map(|(_, w)| w).sum();
    if let Some(last) = out.last_mut() {
        last.1 += (1.0 - total).max(0.0);
    }
    if out.len() <= 24 {
        return out;
    }
    // A wide spread is merged into groups at their (rounded) mean counts: the work of every
    // mixture built from it stays bounded whatever the rate.
    let points: Vec<(f64, f64)> = out.iter().map(|&(k, w)| (f64::from(k), w)).collect();
    coarse(&points, |_| false).into_iter().map(|(k, w)| (k.round() as u32, w)).collect()
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

/// The engine's state in the long run: how many requests it holds (resident in a slot or
/// waiting for one) and how long its iterations are.
struct Steady {
    /// π(n) for n = 0 up to S, or to where it vanishes before S (the entry at S the weight of
    /// every slot taken, waiters included).
    occupancy: Vec<f64>,
    /// P(an arrival waits for a slot), and how long it waits as (seconds, weight) points whose
    /// weights sum to it.
    slot_wait: f64,
    slot_waits: Vec<(f64, f64)>,
    busy: f64,
    /// φ: the share of busy time spent reading prompts.
    prompt_share: f64,
}

impl Steady {
    /// The mean decode iteration with `m` resident, stretched by the prompt iterations
    /// interleaved with it.
    fn iteration(&self, engine: &Engine, m: f64) -> f64 {
        (engine.fixed.0 + engine.per_sequence.0 * m) / (1.0 - self.prompt_share)
    }

    fn resident(&self) -> f64 {
        self.occupancy.iter().enumerate().map(|(m, w)| m as f64 * w).sum()
    }
}

/// The requests held (resident, or waiting for a slot) in the long run. Reading a prompt stops
/// every sequence for p·I, and the requests that arrive meanwhile are read next, stopping them
/// again: so, on a clock that runs only while the engine decodes (or idles), requests arrive in
/// clusters at rate λ, each cluster the whole progeny of one arrival when each prompt read
/// brings Poisson(a) more, a = λ·p·I (a Borel number of requests, mean 1 ÷ (1 − a); with
/// prompt lengths that vary, its negative binomial kin, heavier in the tail), and leave
/// at μ(m) = m ÷ (O·(t₀ + d·m)) with m resident, each after its O iterations. Across the cut
/// between n and n + 1 as many go up as come down, up to the slots:
/// π(n + 1)·μ(n + 1) = λ·Σₖ₌₀..ₙ π(k)·P(cluster > n − k). Then the share a of real time spent
/// reading prompts is added back, a cluster of j at j above the count it found, and past S the
/// waiters queued as in M/D/S ([`waiting_line`]). So the count is Poisson when the fixed
/// cost dominates (a GPU reading its weights), geometric when the per-sequence cost does (one
/// processor shared by all), and heavier in the tail the more of the time goes to prompts. A
/// birth-death chain with the prompts spread evenly over the iterations, as the model had,
/// held the same mean but half the simulated scheduler's chance of finding every slot taken
/// (1.3 % against 2.8 %, 16 slots at 70 % of capacity), and its TTFT p99 was 38–42 % short
/// there. `None` past what the engine can serve.
fn steady(engine: &Engine, load: &Load, prompts: &mut Prompts) -> Option<Steady> {
    let (t0, d, p) = (engine.fixed.0, engine.per_sequence.0, engine.per_prompt_token.0);
    let (lambda, i, o) = (load.rate, load.input_tokens, load.output_tokens);
    let s = engine.slots as usize;
    if lambda >= engine.capacity(i, o) {
        return None;
    }
    let a = lambda * p * i;
    if a >= 1.0 {
        return None;
    }
    // P(cluster > j) until it vanishes. Each prompt read brings Poisson(λ·p·its length) more:
    // Poisson(a) when prompts are alike, negative binomial (shape r = 1 ÷ cv²) when their
    // lengths are gamma, and a cluster of n is the progeny of those, P(n) = P(n − 1 brought
    // by n) ÷ n (Otter–Dwass): the Borel distribution, or its negative binomial kin, whose
    // tail is heavier (with cv 1 at 70 % of capacity, 8 slots, the chance of finding every
    // slot taken was half the simulated scheduler's with the Borel).
    let ln_gamma = statrs::function::gamma::ln_gamma;
    // Below a cv of 10⁻³ the difference from Borel's is of order a·cv², and the negative
    // binomial's log-gammas would cancel to nothing but rounding.
    let shape = if load.input_cv > 1e-3 { 1.0 / (load.input_cv * load.input_cv) } else { f64::INFINITY };
    let mut beyond = Vec::new();
    let mut left = 1.0f64;
    for n in 1..=MAX_CLUSTER {
        let nf = n as f64;
        let ln_pmf = if a > 0.0 && shape.is_finite() {
            // n − 1 from a negative binomial of shape n·r and mean n·a, divided by n.
            let r = nf * shape;
            ln_gamma(nf - 1.0 + r) - ln_gamma(r) - ln_gamma(nf)
                + r * (shape / (shape + a)).ln()
                + (nf - 1.0) * (a / (shape + a)).ln()
                - nf.ln()
        } else if a > 0.0 {
            -a * nf + (nf - 1.0) * (a * nf).ln() - ln_gamma(nf + 1.0)
        } else if n == 1 {
            0.0
        } else {
            f64::NEG_INFINITY
        };
        beyond.push(left);
        left = (left - ln_pmf.exp()).max(0.0);
        if left < 1e-15 {
            break;
        }
    }
    let over = |j: usize| beyond.get(j).copied().unwrap_or(0.0);
    // P(cluster = j) × its reading time in prompts (j when they are alike), for j = 1, 2, …:
    // the time a cluster's reading holds j more. The j − 1 it brought depend only on its
    // prompts' total length, so given them that length is gamma, of mean (j·r + j − 1) ÷ (r + a)
    // prompts: a large cluster came from long prompts and is read for longer.
    let reading_time = |j: f64| if shape.is_finite() { (j * shape + j - 1.0) / (shape + a) } else { j };
    let sized: Vec<f64> = (1..=beyond.len()).map(|j| (over(j - 1) - over(j)) * reading_time(j as f64)).collect();
    let leave = |m: usize| {
        let m = m.min(s) as f64;
        m / (o * (t0 + d * m))
    };
    // π(n) ÷ π(0) up to the slots, rescaled when it grows large, until it vanishes.
    let mut weights = vec![1.0f64];
    let mut peak = 1.0f64;
    // Products summed in the two loops below; a step of theirs, a multiply-add over
    // contiguous memory, took about an eighth of the others' time (measured over 4,800 inputs).
    let mut summed = 0usize;
    for n in 0..s {
        // Σₖ π(k)·P(cluster > n − k) over the k a cluster can reach n + 1 from.
        let from = (n + 1).saturating_sub(beyond.len());
        summed += n + 1 - from;
        let up: f64 =
            weights[from..=n].iter().zip(beyond[..=n - from].iter().rev()).map(|(w, b)| w * b).sum::<f64>() * lambda;
        let next = up / leave(n + 1);
        if !next.is_finite() {
            return None;
        }
        weights.push(next);
        if next > peak {
            peak = next;
            if peak > 1e200 {
                weights.iter_mut().for_each(|w| *w *= 1e-200);
                peak *= 1e-200;
            }
        }
        if next < peak * 1e-16 && next < weights[n] {
            break;
        }
    }
    // That is the decode clock's share of each count. A share a of real time goes to reading
    // prompts: a cluster of j read with j more held than before it came.
    let decoding = weights.clone();
    for (n, w) in weights.iter_mut().enumerate() {
        // Σₖ π(k)·(n − k)·P(cluster = n − k) for clusters of 1 to its longest.
        let from = n.saturating_sub(sized.len());
        summed += n - from;
        let reading: f64 = decoding[from..n].iter().zip(sized[..n - from].iter().rev()).map(|(w, j)| w * j).sum();
        *w = (1.0 - a) * *w + a * (1.0 - a) * reading;
    }
    // and passes over the counts, a dozen or so.
    work::spend(summed / 8 + 16 * weights.len());
    // With every slot taken an arrival's prompt waits unread, and each departure lets one in,
    // whose prompt is read before the next token: on the real clock the S resident leave at
    // μ' = μ(S) ÷ (1 + μ(S)·p·I), each slot held T = S ÷ μ', at a load ρ = λ ÷ μ' (below one
    // exactly when λ is below capacity).
    let full = weights.len() == s + 1;
    let departures = leave(s) / (1.0 + leave(s) * p * i);
    let rho = lambda / departures;
    if full {
        if rho >= 1.0 {
            return None;
        }
        // A cluster that reaches past the slots has only the S − k prompts that find a slot
        // read at once, with every slot then taken (the rest wait, and are read one a
        // departure, in μ' below): Σₖ π(k)·(S − k)·P(cluster > S − k) more at S.
        let over_s: f64 = (s.saturating_sub(beyond.len())..s).map(|k| decoding[k] * (s - k) as f64 * over(s - k)).sum();
        weights[s] += a * (1.0 - a) * over_s;
    }
    let at_s = if full { weights[s] } else { 0.0 };
    // The chain's weight at S is that of none waiting. Past it, the chance of waiting takes
    // M/M/S's ratio, ρ ÷ (1 − ρ) more (the chance that a request waits in M/G/S hardly depends
    // on how its service times vary: Erlang's C, M/M/S's, is within 10 % of M/D/S's at 8 and
    // 16 slots from 30 to 90 % load), and the line an arrival finds, given every slot taken,
    // M/D/S's, each slot held T = S ÷ μ' ([`waiting_line`]). M/D/S's own ratio from S on put
    // the chance of waiting below the simulated scheduler's (10 % against 12 % at 62 % of
    // capacity, 8 slots, 32-token answers; 9 % against 17 % at 70 % with 128-token ones) and
    // the TTFT p99s with prompt lengths of cv 1 at 70 % 21–26 % short of it, where this gives
    // 16–17 %.
    let line = if full { waiting_line(rho, s) } else { Line::none() };
    let waiters = if full { at_s * rho / (1.0 - rho) } else { 0.0 };
    let total: f64 = weights.iter().sum::<f64>() + waiters;
    let mut occupancy: Vec<f64> = weights.iter().map(|w| w / total).collect();
    let slot_wait = (at_s + waiters) / total;
    if full {
        occupancy[s] = slot_wait;
    }
    // One that finds j waiting waits for the (j + 1)th slot to free. The S resident came at
    // times spread over the last T, so they leave as S ordered uniform points of it, the kth
    // at k ÷ (S + 1) of T on average, and then each slot again every T: a share f = rounds +
    // k ÷ (S + 1) of T, of which O·(t₀ + d·S)·f decoding and, for the S·f prompts read
    // meanwhile (each departure lets one in), their tokens, spread as S·f prompts' lengths
    // are (the first few dozen; past them the spread is small beside the wait). Counted one by
    // one as far as the line is followed, its tail past that at eight quantiles of its
    // geometric.
    let decode_hold = o * (t0 + d * s as f64);
    let mut slot_waits = Vec::new();
    let mut add = |j: f64, weight: f64| {
        let (rounds, k) = ((j / s as f64).floor(), j % s as f64);
        let f = rounds + (k + 1.0) / (s as f64 + 1.0);
        let read = s as f64 * f;
        let reads = read.round().max(1.0);
        let lengths = if reads <= 32.0 { prompts.of(reads as u32) } else { vec![(reads * i, 1.0)] };
        for (tokens, w) in lengths {
            slot_waits.push((decode_hold * f + p * tokens * read / reads, weight * w));
        }
    };
    if slot_wait > 0.0 {
        for (j, w) in line.ahead.iter().enumerate() {
            add(j as f64, slot_wait * w);
        }
        if line.beyond > 0.0 {
            let end = line.ahead.len() as f64;
            for k in 0..8 {
                let u = (k as f64 + 0.5) / 8.0;
                let past =
                    if line.ratio > 0.0 && line.ratio < 1.0 { ((1.0 - u).ln() / line.ratio.ln()).floor() } else { 0.0 };
                add(end + past, slot_wait * line.beyond / 8.0);
            }
        }
    }
    slot_waits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let slot_waits = coarse(&slot_waits, |_| false);
    let busy = 1.0 - occupancy[0];
    // At most a (the chain's mass is kept whole, clusters past S included); the cap is for the
    // Borel tail dropped past MAX_CLUSTER.
    let prompt_share = (a / busy.max(1e-12)).min(0.999);
    Some(Steady { occupancy, slot_wait, slot_waits, busy, prompt_share })
}

/// The requests waiting for a slot, as an arrival that finds every slot taken sees them.
struct Line {
    /// P(j ahead of it | every slot taken) for j = 0, 1, … up to where it is followed.
    ahead: Vec<f64>,
    /// The mass past `ahead`, spread as a geometric of ratio `ratio`.
    beyond: f64,
    ratio: f64,
}

impl Line {
    /// No one waiting: every arrival that finds the slots taken is first in line.
    fn none() -> Line {
        Line { ahead: vec![1.0], beyond: 0.0, ratio: 0.0 }
    }

    /// A geometric line of ratio `ratio`.
    fn geometric(ratio: f64) -> Line {
        Line { ahead: vec![1.0 - ratio], beyond: ratio, ratio }
    }
}

/// The most waiters the waiting line is followed to state by state, the most work (states ×
/// arrival counts) a sweep may take, and all its sweeps; past the first two the line is read
/// from its arrivals (see [`waiting_line`]).
const LINE_STATES: usize = 512;
const LINE_WORK: usize = 50_000;
const LINE_SWEEPS_WORK: usize = 10_000_000;

/// The line of requests waiting for a slot when all S are taken, each slot held a fixed time
/// T by a sequence (its O iterations and the prompts read meanwhile), at ρ = λ·T ÷ S: the
/// queue of M/D/S. Looked at every T, the waiters x become max(x + A − S, 0), A ~ Poisson(ρ·S)
/// the arrivals in between (every sequence resident at the start has left by the end); the
/// walk's stationary law gives j's: P(j = y) = π(y) for y > 0 and P(j = 0, all taken) =
/// Σₓ π(x)·P(A = S − x). Its tail falls as σʲ, σ = e^(−θ) with ρ·(e^θ − 1) = θ, more steeply
/// than the geometric of ratio ρ that departures spaced at random would give (M/M/S): the
/// sequences resident leave on a schedule, each O iterations after it came. With 8 slots at 62
/// and 74 % of the full batch's capacity, the line the simulated scheduler's arrivals saw was
/// within 0.03 of this at every j, where the geometric put twice its mass at 6 ahead and three
/// times at 8, and the model's TTFT p99 past 60 % of capacity 30–50 % above the scheduler's.
fn waiting_line(rho: f64, s: usize) -> Line {
    // The Cramér root of ρ·(e^θ − 1) = θ, by bisection (the left side is convex, equal at 0,
    // and above for large θ).
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while rho * hi.exp_m1() < hi && hi < 700.0 {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if rho * mid.exp_m1() < mid { lo = mid } else { hi = mid }
    }
    let ratio = (-hi).exp().min(1.0 - 1e-12);
    if rho <= 0.0 {
        return Line::none();
    }
    let m = rho * s as f64;
    let spread = 8.0 * m.sqrt() + 8.0;
    let (a_lo, a_hi) = ((m - spread).max(0.0) as usize, (m + spread).ceil() as usize);
    // Followed to where its tail is 10⁻¹², or no further than the budget allows (compared as
    // a float: near capacity the count does not fit a 32-bit usize, as in the browser).
    let states = (27.6 / -ratio.ln()).ceil() + 2.0;
    let width = a_hi - a_lo + 1;
    if states > LINE_STATES as f64 || states * width as f64 > LINE_WORK as f64 {
        return line_from_arrivals(rho, s, ratio);
    }
    let states = states as usize;
    let geometric = Line::geometric(ratio);
    // P(A = k) for k = a_lo..=a_hi, and P(A ≤ k).
    let pmf: Vec<f64> = (a_lo..=a_hi)
        .map(|k| {
            let k = k as f64;
            (k * m.ln() - m - statrs::function::gamma::ln_gamma(k + 1.0)).exp()
        })
        .collect();
    // P(A < a_lo) = Q(a_lo, m), the upper regularized gamma function.
    let below = if a_lo == 0 { 0.0 } else { statrs::function::gamma::gamma_ur(a_lo as f64, m) };
    let cdf: Vec<f64> = pmf
        .iter()
        .scan(below, |sum, p| {
            *sum += p;
            Some(*sum)
        })
        .collect();
    let at_most = |k: usize| if k < a_lo { 0.0 } else { cdf[(k - a_lo).min(width - 1)] };
    let exactly = |k: usize| if k < a_lo || k > a_hi { 0.0 } else { pmf[k - a_lo] };
    let mut line: Vec<f64> = (0..states).map(|x| (1.0 - ratio) * ratio.powi(x as i32)).collect();
    // Few slots near capacity mix slowly (the walk's gap is about S·(1 − ρ)² ÷ 2ρ a sweep): as
    // many sweeps as the budget allows, from 200.
    for _ in 0..(LINE_SWEEPS_WORK / (states * width)).max(200) {
        let mut next = vec![0.0; states];
        let mut steps = line.len();
        for (x, &w) in line.iter().enumerate() {
            if w < 1e-300 {
                continue;
            }
            if x <= s {
                next[0] += w * at_most(s - x);
            }
            // x + A − S > 0: A from S − x + 1.
            for k in (s + 1).saturating_sub(x).max(a_lo)..=a_hi {
                let y = x + k - s;
                if y >= states {
                    break;
                }
                steps += 1;
                next[y] += w * pmf[k - a_lo];
            }
        }
        work::spend(steps);
        let total: f64 = next.iter().sum();
        if total.is_nan() || total <= 0.0 {
            return geometric;
        }
        next.iter_mut().for_each(|w| *w /= total);
        let moved: f64 = next.iter().zip(&line).map(|(a, b)| (a - b).abs()).sum();
        line = next;
        if moved < 1e-10 {
            break;
        }
    }
    let none_waiting: f64 = line.iter().enumerate().filter(|&(x, _)| x <= s).map(|(x, w)| w * exactly(s - x)).sum();
    let mut ahead = vec![none_waiting];
    ahead.extend(line.iter().skip(1).copied());
    let total: f64 = ahead.iter().sum();
    if total.is_nan() || total <= 0.0 {
        return geometric;
    }
    ahead.iter_mut().for_each(|w| *w /= total);
    Line { ahead, beyond: 0.0, ratio }
}

/// The waiting line where the walk of [`waiting_line`] is too wide to follow (many slots):
/// when every slot taken is rare (the arrivals of one holding time reach past S less than
/// once in a hundred), the walk starts from none waiting and the line is the arrivals' own
/// excess, P(j) ∝ P(A = S + j), which falls about as ρ (each step m ÷ (S + j + 1)); else its
/// geometric tail of ratio σ.
fn line_from_arrivals(rho: f64, s: usize, ratio: f64) -> Line {
    let m = rho * s as f64;
    let past = statrs::function::gamma::gamma_lr(s as f64 + 1.0, m);
    if past.is_nan() || past >= 0.01 {
        return Line::geometric(ratio);
    }
    let mut ahead = vec![1.0];
    let mut w = 1.0;
    while ahead.len() < LINE_STATES {
        w *= m / (s + ahead.len()) as f64;
        if w < 1e-12 {
            break;
        }
        ahead.push(w);
    }
    let step = m / (s + ahead.len()) as f64;
    let beyond = if w < 1e-12 { 0.0 } else { w * step / (1.0 - step) };
    let total = ahead.iter().sum::<f64>() + beyond;
    ahead.iter_mut().for_each(|w| *w /= total);
    Line { ahead, beyond: beyond / total, ratio: step }
}

/// The largest cluster of requests followed (the chain's work grows with it: a link asking for
/// 100,000 slots held 90,000 deep took 0.6 s natively with 2,048). The tail past it, cut off
/// (its mass sits at 256), is about 10⁻⁹ while prompts take at most 70 % of the time, as they
/// do wherever the model is validated (their share is at most the rate's share of capacity,
/// [`VALIDATED_LOAD`]), with prompts alike; 7·10⁻⁷ with prompt lengths of cv 1, 8·10⁻⁵ with cv
/// 2 and 0.14 % with cv 5, whose clusters are heavier; 10⁻⁵ at 80 % and 0.3 % at 90 % with
/// prompts alike.
const MAX_CLUSTER: usize = 256;

/// The bins over which a prompt length distribution is enumerated: finer in the tail, which
/// is where a p99 is read.
const PROMPT_BINS: [f64; 16] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0];

/// The total length of `k` prompts as (tokens, weight) points: k·I when lengths do not vary,
/// else the gamma distribution of a sum of k (mean k·I, cv ÷ √k) at the middle of each bin.
/// From a gamma shape of 1,000 (k ÷ cv² prompts' worth), Wilson and Hilferty's cube of a
/// normal stands for the gamma's quantiles (within 6·10⁻⁶ of them there, and closer above): a
/// sum of thousands of prompts, as a large engine admits at once, would cost a series of
/// thousands of terms per cdf evaluation.
fn prompt_points(load: &Load, k: u32) -> Vec<(f64, f64)> {
    let mean = load.input_tokens * f64::from(k);
    let cv = load.input_cv / f64::from(k.max(1)).sqrt();
    let shape = 1.0 / (cv * cv);
    work::spend(PROMPT_BINS.len() * if shape >= 1000.0 { 4 } else { 400 });
    if k > 0 && mean > 0.0 && shape.is_finite() && shape >= 1000.0 {
        let quantile = |q| crate::plan::queue::wilson_hilferty(mean, shape, q);
        return PROMPT_BINS.windows(2).map(|bin| (quantile(0.5 * (bin[0] + bin[1])), bin[1] - bin[0])).collect();
    }
    match crate::plan::queue::Service::new(mean.max(1e-9), cv) {
        Ok(lengths) if k > 0 && cv > 0.0 && mean > 0.0 => {
            PROMPT_BINS.windows(2).map(|bin| (lengths.quantile(0.5 * (bin[0] + bin[1])), bin[1] - bin[0])).collect()
        }
        _ => vec![(mean, 1.0)],
    }
}

/// Weighted values (in increasing order) merged into groups of neighbours, each at its
/// weighted mean: a group per tenth of the weight in the body, finer in the upper tail where a
/// p99 is decided. Values `alone` says to keep (the idle state, the full one) stay on their own.
fn coarse(points: &[(f64, f64)], alone: impl Fn(f64) -> bool) -> Vec<(f64, f64)> {
    const EDGES: [f64; 14] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999];
    let total: f64 = points.iter().map(|p| p.1).sum::<f64>().max(f64::MIN_POSITIVE);
    let mut groups = Vec::new();
    let (mut seen, mut edge, mut mass, mut moment) = (0.0, 0, 0.0, 0.0);
    for &(value, w) in points {
        seen += w / total;
        if alone(value) {
            groups.push((value, w));
            continue;
        }
        mass += w;
        moment += value * w;
        if edge < EDGES.len() && seen >= EDGES[edge] {
            groups.push((moment / mass, mass));
            (mass, moment) = (0.0, 0.0);
            while edge < EDGES.len() && seen >= EDGES[edge] {
                edge += 1;
            }
        }
    }
    if mass > 0.0 {
        groups.push((moment / mass, mass));
    }
    groups
}

/// [`prompt_points`] for each number of prompts, computed once per prediction.
struct Prompts<'a> {
    load: &'a Load,
    known: std::collections::BTreeMap<u32, Vec<(f64, f64)>>,
}

impl Prompts<'_> {
    /// Past 32 prompts, k is read as the nearest of 16 counts an octave and the lengths
    /// scaled back to k's mean: the spread, cv ÷ √k, is then off by under 1.6 % of itself
    /// (itself under a sixth of one prompt's), and a large engine's thousands of distinct
    /// admission counts cost a hundred spreads rather than thousands.
    fn of(&mut self, k: u32) -> Vec<(f64, f64)> {
        let load = self.load;
        let step = if k > 32 { 1u32 << (k.ilog2() - 4) } else { 1 };
        let near = (k + step / 2) / step * step;
        let points = self.known.entry(near).or_insert_with(|| prompt_points(load, near));
        if near == k {
            return points.clone();
        }
        let scale = f64::from(k) / f64::from(near);
        points.iter().map(|&(tokens, w)| (tokens * scale, w)).collect()
    }
}

/// The states worth enumerating: resident counts with their weight, those that carry weight
/// beside the heaviest.
fn states(st: &Steady) -> Vec<(f64, f64)> {
    let heaviest = st.occupancy.iter().copied().fold(0.0, f64::max);
    st.occupancy.iter().enumerate().filter(|&(_, &w)| w > 1e-12 * heaviest).map(|(m, &w)| (m as f64, w)).collect()
}

/// The most prompts one iteration is modelled admitting, whatever the free slots: a count this
/// large only bounds a Poisson spread, which [`poisson`] merges into a few groups anyway.
const MAX_ADMITTED: u32 = 4096;

/// Prompts a state of `m` resident can still admit: one per free slot.
fn free_slots(engine: &Engine, m: f64) -> u32 {
    ((f64::from(engine.slots) - m).max(0.0) as u32).min(MAX_ADMITTED)
}

/// The iteration under way when a request arrives at a busy engine with `m` resident, as
/// (length, share of arrivals) points. An iteration reads the prompts of the k requests that
/// arrived during the one before (at most the free slots) and lasts t = t₀ + d·m + p·(their
/// tokens), so the counts form a chain, k' ~ Poisson(λ·t): a long prompt iteration gathers
/// the prompts that make the next one long, and under prompt-heavy load they come in runs.
/// The chain's long-run iterations, spread as the prompts' lengths are and weighted by their
/// length (an arrival lands in a long iteration more often than their number says), are what
/// is returned. Drawing k only from the plain decode iteration before, at the mean prompt
/// length, as the model did, missed those runs and the long prompts, and put the simulated
/// scheduler's TTFT p99 20–53 % above the model's from 40 % of capacity where a prompt
/// outlasts a decode iteration (`model/examples/llm_vs_scheduler.rs`; 3–10 % with this). The
/// chain is followed to 128 prompts an iteration (where more arrive during one, as on a large
/// engine at a high rate, the rest sit on 128).
fn landing(engine: &Engine, load: &Load, st: &Steady, m: f64, prompts: &mut Prompts) -> Vec<(f64, f64)> {
    let (lambda, prompt) = (load.rate, engine.per_prompt_token.0 * load.input_tokens);
    let decode = engine.fixed.0 + engine.per_sequence.0 * m;
    let cap = free_slots(engine, m + 1.0);
    // The counts worth following: the chain's mean, λ·(t₀ + d·m) ÷ (1 − λ·p·I), and a wide
    // spread above it (the prompt share λ·p·I is below one under capacity).
    let a = (lambda * prompt).min(0.99);
    let mean = lambda * decode / (1.0 - a);
    let top = ((mean + 8.0 * (mean + 1.0).sqrt() / (1.0 - a).sqrt() + 8.0).min(f64::from(cap)) as u32).min(128);
    let p = engine.per_prompt_token.0;
    // The lengths of an iteration reading k prompts, spread as their lengths are.
    let spread: Vec<Vec<(f64, f64)>> =
        (0..=top).map(|k| prompts.of(k).into_iter().map(|(tokens, w)| (decode + p * tokens, w)).collect()).collect();
    let next: Vec<Vec<(u32, f64)>> = spread
        .iter()
        .map(|lengths| {
            let mut counts = vec![0.0f64; top as usize + 1];
            for &(len, w) in lengths {
                for (j, wj) in poisson(lambda * len, top) {
                    counts[j as usize] += w * wj;
                }
            }
            counts.into_iter().enumerate().filter(|&(_, w)| w > 0.0).map(|(j, w)| (j as u32, w)).collect()
        })
        .collect();
    let mut share = vec![0.0; top as usize + 1];
    for (k, w) in poisson(mean, top) {
        share[k as usize] += w;
    }
    let per_sweep: usize = next.iter().map(Vec::len).sum();
    for _ in 0..200 {
        work::spend(per_sweep);
        let mut after = vec![0.0; share.len()];
        for (k, w) in share.iter().enumerate() {
            for &(j, wj) in &next[k] {
                after[j as usize] += w * wj;
            }
        }
        let moved: f64 = after.iter().zip(&share).map(|(x, y)| (x - y).abs()).sum();
        share = after;
        if moved < 1e-10 {
            break;
        }
    }
    // Time in plain decode iterations, and in those reading prompts at each length.
    let plain = share[0] * decode;
    let mut reads: Vec<(f64, f64)> = share
        .iter()
        .zip(&spread)
        .skip(1)
        .filter(|&(&w, _)| w > 1e-12)
        .flat_map(|(&w, lengths)| lengths.iter().map(move |&(len, wl)| (len, w * wl * len)))
        .filter(|&(len, w)| len > decode && w > 0.0)
        .collect();
    reads.sort_by(|a, b| a.0.total_cmp(&b.0));
    let read: f64 = reads.iter().map(|r| r.1).sum();
    if read <= 0.0 {
        return vec![(decode, 1.0)];
    }
    // The chain counts only the prompts that arrive while the engine works; the one that
    // opened a busy period is read in it too, so of the busy time a share φ = p·λ·I ÷ u reads
    // prompts, more than the chain's p·λ·I when the engine is often idle.
    let reading = (read / (plain + read) / st.busy.max(1e-12)).min(1.0);
    let mut points = vec![(decode, 1.0 - reading)];
    points.extend(coarse(&reads, |_| false).into_iter().map(|(len, w)| (len, w / read * reading)));
    points
}

/// A group of resident counts (at its weighted mean) and the iterations an arrival finding it
/// lands in ([`landing`]; none when idle).
struct Landed {
    resident: f64,
    weight: f64,
    iterations: Vec<(f64, f64)>,
}

/// The gaps between tokens as (gap, weight) points, weighted per request (O − 1 gaps each).
///
/// Counted from the prompts' side: each request's prompt is read in one iteration, beside the
/// m sequences decoding then, and each of those m gets a gap that holds it (and every other
/// prompt read in that iteration). A request that finds m < S resident is admitted into the
/// next iteration with the k others that arrive during the one under way (k ~ Poisson(λ·t),
/// t that iteration's length as [`landing`] draws it: an arrival lands in the long,
/// prompt-reading iterations more often than their number says, so prompts bunch); one that
/// finds every slot taken waits for a departure and is read with the others admitted in that
/// iteration (about S ÷ O slots free at a time) beside the sequences left. An
/// iteration reading K prompts is met by each of them, so each counts its gaps once in K. The
/// rest of a request's O − 1 gaps are plain decode iterations, t₀ + d·m with m as gaps see it
/// (weight m·π(m)/τ(m)). Counting the prompt gaps per iteration instead, as Poisson(λ·τ(m))
/// arrivals during a mean iteration capped by the free slots, missed the bunching and the
/// admissions from the slot queue, and under-predicted the simulated scheduler's share of
/// prompt gaps by 30–35 % at 70 % of capacity (`model/tests/llm_simulation.rs`).
fn gap_points(
    engine: &Engine,
    load: &Load,
    st: &Steady,
    states: &[(f64, f64)],
    landed: &[Landed],
    prompts: &mut Prompts,
) -> Vec<(f64, f64)> {
    let (t0, d, p) = (engine.fixed.0, engine.per_sequence.0, engine.per_prompt_token.0);
    let s = f64::from(engine.slots);
    // Answers of under two tokens mostly leave before the next iteration: only that share of
    // the sequences resident decodes beside a prompt read next.
    let decoding = (load.output_tokens - 1.0).min(1.0);
    // (m decoding beside, K prompts read) → the gaps per request that hold them. A gap depends
    // only on m and the K prompts' length, so the weights are summed before the lengths are
    // spread out.
    let mut held: std::collections::BTreeMap<(u64, u32), f64> = Default::default();
    let mut admit = |m: f64, k: u32, weight: f64| {
        if m > 0.0 && weight > 0.0 {
            *held.entry((m.to_bits(), k)).or_default() += weight * decoding * m / f64::from(k);
        }
    };
    // Arrivals see the time-average state (Poisson arrivals); those at m = S wait for a slot.
    for group in landed.iter().filter(|g| g.resident > 0.0 && g.resident < s) {
        let m = group.resident;
        for &(t, share) in &group.iterations {
            for (k, wk) in poisson(load.rate * t, free_slots(engine, m + 1.0)) {
                admit(m, 1 + k, group.weight * share * wk);
            }
        }
    }
    // A request that waited is read when a slot frees, with the others freed in the same
    // iteration (each resident sequence leaves after O iterations: about S ÷ O a time), beside
    // the sequences left.
    if st.slot_wait > 0.0 {
        for (k, wk) in poisson(s / load.output_tokens, engine.slots - 1) {
            admit(s - 1.0 - f64::from(k), 1 + k, st.slot_wait * wk);
        }
    }
    // At most O − 1 gaps a request: answers of a token or two have few gaps to hold a prompt.
    let holding: f64 = held.values().sum();
    let scale = if holding > 0.0 { ((load.output_tokens - 1.0) / holding).min(1.0) } else { 0.0 };
    let mut gaps = Vec::new();
    for ((m, k), w) in held {
        for (tokens, wt) in prompts.of(k) {
            gaps.push((t0 + d * f64::from_bits(m) + p * tokens, w * scale * wt));
        }
    }
    let plain = (load.output_tokens - 1.0 - holding * scale).max(0.0);
    let seen_by_gaps: Vec<(f64, f64)> =
        states.iter().filter(|(m, _)| *m > 0.0).map(|&(m, w)| (m, m * w / st.iteration(engine, m))).collect();
    let total: f64 = seen_by_gaps.iter().map(|g| g.1).sum();
    if total > 0.0 && plain > 0.0 {
        gaps.extend(coarse(&seen_by_gaps, |_| false).into_iter().map(|(m, w)| (t0 + d * m, plain * w / total)));
    }
    // Nearly idle, or answers of one token: a gap is one sequence's alone.
    if gaps.iter().all(|g| g.1 <= 0.0) {
        gaps = vec![(t0 + d, 1.0)];
    }
    gaps
}

/// The share of gaps between tokens the model puts at or below `gap` seconds at `load`: where a
/// measured ITL p99 sits in the model's distribution (at least 0.99 when they agree: the
/// distribution is a set of weighted points, and a value on the p99's point counts all of it). Where a few per
/// cent of gaps hold another request's prompt, the distribution jumps, and a p99 that lands on
/// the other side of the jump is off by tens of per cent while its rank is off by a fraction of
/// one. `Ok(None)` where the engine cannot keep up.
pub fn itl_share_at_most(engine: &Engine, load: &Load, gap: f64) -> Result<Option<f64>, ModelError> {
    Ok(predict_ranked(engine, load, Some(gap))?.and_then(|(_, rank)| rank))
}

/// The share of weighted `gaps` at or below `gap`.
fn share_at_most(gaps: &[(f64, f64)], gap: f64) -> Option<f64> {
    let total: f64 = gaps.iter().map(|g| g.1).sum();
    let below: f64 = gaps.iter().filter(|g| g.0 <= gap).map(|g| g.1).sum();
    (total > 0.0).then(|| below / total)
}

/// TTFT and ITL percentiles at `load`; `Err` for invalid inputs, `Ok(None)` where the engine
/// cannot keep up (the queue grows without bound).
pub fn predict(engine: &Engine, load: &Load) -> Result<Option<Latency>, ModelError> {
    Ok(predict_ranked(engine, load, None)?.map(|(latency, _)| latency))
}

/// [`predict`], and where `itl` is given, the share of gaps at or below it
/// ([`itl_share_at_most`]) read off the same mixture of gaps, built once for both.
pub fn predict_ranked(
    engine: &Engine,
    load: &Load,
    itl: Option<f64>,
) -> Result<Option<(Latency, Option<f64>)>, ModelError> {
    engine.validate()?;
    load.validate()?;
    let mut prompts = Prompts { load, known: Default::default() };
    let Some(st) = steady(engine, load, &mut prompts) else { return Ok(None) };
    let (t0, d, p) = (engine.fixed.0, engine.per_sequence.0, engine.per_prompt_token.0);
    let (lambda, i) = (load.rate, load.input_tokens);
    let s = engine.slots as usize;
    let states = states(&st);
    let free = |m: f64| free_slots(engine, m);
    // The resident counts grouped once, each group with the iteration an arrival lands in
    // ([`landing`], the costliest part of a prediction), for both the gaps and the first tokens.
    let landed: Vec<Landed> = coarse(&states, |m| m == 0.0 || m == s as f64)
        .into_iter()
        .map(|(m, weight)| Landed {
            resident: m,
            weight,
            iterations: if m == 0.0 { Vec::new() } else { landing(engine, load, &st, m, &mut prompts) },
        })
        .collect();
    let mut gaps = gap_points(engine, load, &st, &states, &landed, &mut prompts);
    let rank = itl.and_then(|itl| share_at_most(&gaps, itl));
    let itl_mean = gaps.iter().map(|(g, w)| g * w).sum::<f64>() / gaps.iter().map(|g| g.1).sum::<f64>();

    // An arrival that finds m resident waits, when the slots are full, for one to free; then,
    // when the engine is busy, for the rest of the iteration under way ([`landing`]), uniform
    // over it. Then its own iteration reads its prompt and those that arrived meanwhile.
    const REST: usize = 6;
    let own_prompts = prompts.of(1);
    let mut firsts = Vec::new();
    for group in &landed {
        let (m, w) = (group.resident, group.weight);
        let full = m == s as f64 && st.slot_wait > 0.0;
        let mut waits = vec![(0.0, if full { w - st.slot_wait } else { w })];
        if full {
            waits.extend(st.slot_waits.iter().copied());
        }
        // Decoding beside it once admitted (a slot freed for it when all were taken).
        let others = if full { m - 1.0 } else { m };
        // (rest of the iteration under way, its whole length, weight)
        let mut rests = Vec::new();
        if m == 0.0 {
            rests.push((0.0, 0.0, 1.0));
        } else {
            for &(len, share) in &group.iterations {
                rests.extend((0..REST).map(|k| ((k as f64 + 0.5) / REST as f64 * len, len, share / REST as f64)));
            }
        }
        for &(wait, ww) in &waits {
            for &(rest, len, wr) in &rests {
                for (k, wk) in poisson(lambda * len, free(m + 1.0)) {
                    for &(prompt, wo) in &own_prompts {
                        let own = t0 + d * (others + 1.0) + p * (prompt + i * f64::from(k));
                        firsts.push((wait + rest + own, ww * wr * wk * wo));
                    }
                }
            }
        }
    }
    // Each point is made, summed and sorted (about twenty steps).
    work::spend(20 * (firsts.len() + gaps.len()));
    let total: f64 = firsts.iter().map(|f| f.1).sum();
    let ttft_mean = firsts.iter().map(|(f, w)| f * w).sum::<f64>() / total;
    let resident = st.resident();
    let latency = Latency {
        ttft_p50: Seconds(quantile(&mut firsts, 0.5)),
        ttft_p99: Seconds(quantile(&mut firsts, 0.99)),
        itl_p50: Seconds(quantile(&mut gaps, 0.5)),
        itl_p99: Seconds(quantile(&mut gaps, 0.99)),
        itl_mean: Seconds(itl_mean),
        e2e_mean: Seconds(ttft_mean + (load.output_tokens - 1.0) * itl_mean),
        mean_resident: resident,
        busy: st.busy,
        iteration: Seconds(st.iteration(engine, resident / st.busy.max(1e-12))),
        slot_wait_probability: st.slot_wait,
        output_tokens_per_second: lambda * load.output_tokens,
        validated: resident <= VALIDATED_SHARE * f64::from(engine.slots)
            && load.rate <= VALIDATED_LOAD * engine.capacity(load.input_tokens, load.output_tokens) * (1.0 + 1e-9),
    };
    Ok(Some((latency, rank)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_share_of_gaps_below_a_value_is_the_quantile_read_backwards() {
        let engine = Engine {
            fixed: Seconds(0.010),
            per_sequence: Seconds(0.0005),
            per_prompt_token: Seconds(0.0001),
            slots: 32,
        };
        for rate in [0.5, 3.0, 8.0] {
            let load = Load { rate, input_tokens: 200.0, input_cv: 0.3, output_tokens: 64.0 };
            let l = predict(&engine, &load).unwrap().unwrap();
            let share = |gap: f64| itl_share_at_most(&engine, &load, gap).unwrap().unwrap();
            // The p99 is the smallest gap with 99 % at or below it.
            assert!(share(l.itl_p99.0) >= 0.99 - 1e-12, "rate {rate}: {}", share(l.itl_p99.0));
            assert!(share(l.itl_p99.0 * (1.0 - 1e-9)) < 0.99, "rate {rate}");
            assert!(share(l.itl_p50.0) >= 0.5 && share(l.itl_p50.0 * (1.0 - 1e-9)) < 0.5, "rate {rate}");
            assert_eq!((share(0.0), share(1e9)), (0.0, 1.0));
        }
        let load = Load { rate: 1e6, input_tokens: 200.0, input_cv: 0.3, output_tokens: 64.0 };
        assert_eq!(itl_share_at_most(&engine, &load, 0.1), Ok(None), "past capacity");
        assert!(itl_share_at_most(&Engine { slots: 0, ..engine }, &load, 0.1).is_err());
    }

    #[test]
    fn answers_of_one_token_have_no_gap_that_holds_a_prompt() {
        let engine = Engine {
            fixed: Seconds(0.002),
            per_sequence: Seconds(0.002),
            per_prompt_token: Seconds(0.0004),
            slots: 256,
        };
        for share in [0.01, 0.3, 0.6] {
            let at = |output: f64| {
                let rate = share * engine.capacity(400.0, output);
                predict(&engine, &Load { rate, input_tokens: 400.0, input_cv: 0.5, output_tokens: output })
                    .unwrap()
                    .unwrap()
            };
            let one = at(1.0);
            assert_eq!((one.itl_p50.0, one.itl_p99.0), (0.004, 0.004), "at {share}: a lone sequence's gap");
            // Just over one token, lightly loaded: the few gaps there are seldom hold a prompt
            // (the sequences resident mostly leave before the prompt read next).
            let barely = at(1.001);
            assert!(share > 0.01 || barely.itl_p50.0 < 0.0004 * 400.0 / 2.0, "at {share}: {barely:?}");
        }
    }

    #[test]
    fn poisson_weights_sum_to_one_even_far_above_the_cap() {
        for (mean, limit) in [(0.3, 64), (12.0, 64), (190.0, 64), (5e4, 100_000), (1e7, 3), (2.0, 0)] {
            let points = poisson(mean, limit);
            let total: f64 = points.iter().map(|p| p.1).sum();
            assert!((total - 1.0).abs() < 1e-9, "mean {mean}, cap {limit}: {total}");
            assert!(points.iter().all(|&(k, _)| k <= limit), "mean {mean}, cap {limit}");
            assert!(points.len() <= 24, "mean {mean}: {} points", points.len());
        }
        assert_eq!(poisson(1e7, 3), vec![(3, 1.0)], "a mean far above the cap sits on it");
    }

    #[test]
    fn the_line_waiting_for_a_slot_is_that_of_m_d_s() {
        // M/D/1: P(one in the system) = (1 − ρ)·(e^ρ − 1), P(any) = ρ.
        let one = waiting_line(0.5, 1);
        let expected = (1.0 - 0.5) * (0.5f64.exp() - 1.0) / 0.5;
        assert!((one.ahead[0] - expected).abs() < 1e-6, "{} against {expected}", one.ahead[0]);
        // M/D/8 at 62 %, as a power iteration of the same walk in Python gave it, and its tail
        // falling as the root of 0.62·(e^θ − 1) = θ says (σ ≈ 0.41).
        let eight = waiting_line(0.62, 8);
        assert!(
            (eight.ahead[0] - 0.463).abs() < 0.002 && (eight.ahead[1] - 0.268).abs() < 0.002,
            "{:?}",
            &eight.ahead[..4]
        );
        assert!((eight.ratio - 0.410).abs() < 0.005, "{}", eight.ratio);
        for line in [one, eight, waiting_line(0.999, 100_000), waiting_line(1e-9, 3)] {
            let total = line.ahead.iter().sum::<f64>() + line.beyond;
            assert!((total - 1.0).abs() < 1e-9 && line.ahead.iter().all(|w| w.is_finite() && *w >= 0.0), "{total}");
        }
        // Many slots (the arrival counts enumerated from far above zero): the same as the walk
        // followed over every count, plainly.
        let (rho, s) = (0.9, 256usize);
        let m = rho * s as f64;
        let pmf: Vec<f64> = (0..420)
            .map(|k| (k as f64 * m.ln() - m - statrs::function::gamma::ln_gamma(k as f64 + 1.0)).exp())
            .collect();
        let mut walk = vec![0.0; 400];
        walk[0] = 1.0;
        for _ in 0..300 {
            let mut next = vec![0.0; walk.len()];
            for (x, &w) in walk.iter().enumerate() {
                // The counts with any weight: 230 ± 8 standard deviations.
                for k in 80..420 {
                    next[(x + k).saturating_sub(s).min(walk.len() - 1)] += w * pmf[k];
                }
            }
            let total: f64 = next.iter().sum();
            walk = next.iter().map(|w| w / total).collect();
        }
        let none: f64 = (0..=s).map(|x| walk[x] * pmf.get(s - x).unwrap_or(&0.0)).sum();
        let plain = none / (none + walk[1..].iter().sum::<f64>());
        let many = waiting_line(rho, s);
        assert!((many.ahead[0] - plain).abs() < 1e-3, "{} against {plain}", many.ahead[0]);
        // Lighter than the geometric of ratio ρ (departures spaced at random) from a few ahead.
        let tail = |l: &Line, from: usize| l.ahead[from..].iter().sum::<f64>() + l.beyond;
        assert!(tail(&waiting_line(0.74, 8), 6) < 0.5 * 0.74f64.powi(6));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever a link or an upload says, a prediction ends with finite figures or says the
        /// engine cannot keep up.
        #[test]
        fn any_valid_input_gives_finite_figures_or_none(
            fixed in 0.0f64..0.05, per_sequence in 0.0f64..0.05, per_prompt in 0.0f64..0.01,
            slots in 1u32..100_000, input in 0.0f64..100_000.0, input_cv in 0.0f64..5.0,
            output in 1.0f64..10_000.0, share in 0.0f64..1.2,
        ) {
            prop_assume!(fixed + per_sequence > 1e-6);
            let engine = Engine { fixed: Seconds(fixed), per_sequence: Seconds(per_sequence), per_prompt_token: Seconds(per_prompt), slots };
            let rate = share * engine.capacity(input, output);
            let load = Load { rate, input_tokens: input, input_cv, output_tokens: output };
            if let Some(l) = predict(&engine, &load).unwrap() {
                for v in [l.ttft_p50.0, l.ttft_p99.0, l.itl_p50.0, l.itl_p99.0, l.e2e_mean.0, l.busy, l.mean_resident] {
                    prop_assert!(v.is_finite() && v >= 0.0, "{l:?}");
                }
                prop_assert!(l.ttft_p50.0 <= l.ttft_p99.0 && l.itl_p50.0 <= l.itl_p99.0, "{l:?}");
            }
        }
    }
}
