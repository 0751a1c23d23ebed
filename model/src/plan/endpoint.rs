//! A team's own inference service, as the agent's `endpoint` suite measured it, and the
//! queueing model calibrated on it and checked against it.
//!
//! Calibration takes the service time from the least-loaded step (its mean latency, network and
//! client included, so the model predicts what a caller sees) and its variation in one of two
//! ways ([`Fit`]): the cv whose gamma distribution at that mean has the step's measured p99
//! (the tail, which an SLO is about, and the default: inference latency tails are often heavier
//! than a gamma with the same two moments), or the coefficient of variation of its histogram
//! (two moments); and the service's effective concurrency from the highest
//! throughput it achieved: c = round(X_max × mean service time), at least 1. When no step
//! saturated, X_max is only a lower bound and so is c. Each step is then predicted with M/G/c
//! (see [`crate::plan::queue`]) at its offered rate and set beside what was measured.

use std::collections::BTreeMap;

use crate::plan::queue::{Queue, Service};
use crate::wire::run::{Case, Measurement, MeasurementStatus, Suite};

/// What one step of a load test measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub step: u32,
    /// Requests per second sent in the measured window.
    pub offered: f64,
    /// Successful answers per second.
    pub achieved: f64,
    /// Latency of successful requests, seconds; `None` when none succeeded.
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub cv: Option<f64>,
    /// Successful requests the latency figures rest on (the histogram's count).
    pub requests: u64,
    pub error_rate: f64,
    pub saturated: bool,
    pub client_limited: bool,
    /// Closed loop: the requests kept in flight (`load=closed`, `in_flight=N`); `None` for an
    /// open-loop step, whose rate was offered on a schedule.
    pub in_flight: Option<u32>,
    /// Open loop: the rate the schedule was drawn for (the `rate` parameter); a Poisson
    /// schedule's `offered` differs from it by chance, by a few per cent over seconds.
    pub scheduled: Option<f64>,
}

impl Step {
    /// Trusted: the client kept its schedule.
    pub fn trusted(&self) -> bool {
        !self.client_limited
    }
}

/// Steps read from one run: a sweep takes at most 13; more would only be work for a page.
pub const MAX_STEPS: usize = 64;
/// The highest concurrency calibrated (c of M/G/c costs O(c) per prediction).
pub const MAX_CONCURRENCY: u32 = 4096;

/// The steps of an endpoint run, in order (the first [`MAX_STEPS`]). Measurements of other
/// suites are ignored.
pub fn steps(measurements: &[Measurement]) -> Vec<Step> {
    let mut by_step: BTreeMap<u32, Vec<&Measurement>> = BTreeMap::new();
    for m in measurements.iter().filter(|m| m.suite == Suite::Endpoint) {
        if let Some(step) = m.parameters.get("step").and_then(|s| s.parse().ok()) {
            by_step.entry(step).or_default().push(m);
        }
    }
    by_step
        .into_iter()
        .filter_map(|(step, ms)| {
            let find = |case: Case| ms.iter().copied().find(|m| m.is(case) && m.status == MeasurementStatus::Ok);
            let value = |case: Case| find(case).and_then(|m| m.stats).map(|s| s.mean);
            let latency = ms.iter().copied().find(|m| m.is(Case::EndpointLatency))?;
            let flag = |key: &str| latency.parameters.get(key).is_some_and(|v| v == "true");
            let closed = latency.parameters.get("load").is_some_and(|v| v == "closed");
            let in_flight = if closed { Some(latency.parameters.get("in_flight")?.parse().ok()?) } else { None };
            let stats = latency.stats;
            Some(Step {
                step,
                offered: value(Case::EndpointOfferedRate)?,
                achieved: value(Case::EndpointAchievedRate).unwrap_or(0.0),
                mean: stats.map(|s| s.mean),
                p50: stats.map(|s| s.p50),
                p99: stats.map(|s| s.p99),
                cv: value(Case::EndpointLatencyCv),
                requests: stats.map_or(0, |s| s.samples),
                error_rate: value(Case::EndpointErrorRate).unwrap_or(0.0),
                saturated: flag("saturated"),
                client_limited: flag("client_limited"),
                in_flight,
                scheduled: latency
                    .parameters
                    .get("rate")
                    .and_then(|r| r.parse::<f64>().ok())
                    .filter(|r| r.is_finite() && *r > 0.0 && !closed),
            })
        })
        .take(MAX_STEPS)
        .collect()
}

/// How the service time's variation is taken from the least-loaded step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// The histogram's coefficient of variation.
    Moments,
    /// The cv at which a gamma distribution of the measured mean has the measured p99
    /// ([`tail_fitted_cv`]); the histogram's cv where the step has no p99 above its mean.
    Tail,
}

/// The variation fitted to the tail ([`Fit::Tail`]) stays in this range.
pub const FITTED_CV: (f64, f64) = (0.05, 3.0);

/// The coefficient of variation whose gamma distribution with mean `mean` has its 0.99 quantile
/// at `p99` (by bisection: over [`FITTED_CV`] that quantile grows with the cv), clamped to
/// [`FITTED_CV`]; `None` unless 0 < mean < p99, both finite.
pub fn tail_fitted_cv(mean: f64, p99: f64) -> Option<f64> {
    if !(mean.is_finite() && p99.is_finite() && mean > 0.0 && p99 > mean) {
        return None;
    }
    let quantile = |cv: f64| Service::new(1.0, cv).map_or(f64::INFINITY, |service| service.quantile(0.99));
    let target = p99 / mean;
    let (mut lo, mut hi) = FITTED_CV;
    if target <= quantile(lo) {
        return Some(lo);
    }
    if target >= quantile(hi) {
        return Some(hi);
    }
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        if quantile(mid) < target { lo = mid } else { hi = mid }
    }
    Some(0.5 * (lo + hi))
}

/// The service as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Mean service time in seconds (the least-loaded step's mean latency).
    pub service_mean: f64,
    /// Its coefficient of variation, as the model uses it (see [`Fit`]).
    pub service_cv: f64,
    /// The coefficient of variation of the least-loaded step's histogram.
    pub measured_cv: f64,
    pub fit: Fit,
    /// Requests served at once: c of M/G/c.
    pub concurrency: u32,
    /// The highest throughput achieved, requests per second.
    pub saturation_rps: f64,
    /// Whether a step saturated, so that `saturation_rps` and `concurrency` are measured
    /// rather than lower bounds.
    pub saturation_measured: bool,
    /// The step the service time came from.
    pub base_step: u32,
}

/// Calibrates on the trusted steps with the default fit ([`DEFAULT_FIT`]); `None` without a
/// trusted step that succeeded.
pub fn calibrate(steps: &[Step]) -> Option<Calibration> {
    calibrate_with(steps, DEFAULT_FIT)
}

/// The fit [`calibrate`] and [`check`] use: the tail. Of eight MLServer sweeps on 2-vCPU VMs
/// (README) it gave the lower mean p99 error in five, and in all of the three made since a
/// saturated step is trusted (31/14/15 % against the moments' 37/22/25 %). The two-moment fit
/// stays to compare (`endpoint_check` prints both).
pub const DEFAULT_FIT: Fit = Fit::Tail;

/// [`calibrate`] with the variation taken as `fit` says.
pub fn calibrate_with(steps: &[Step], fit: Fit) -> Option<Calibration> {
    let trusted: Vec<&Step> = steps.iter().filter(|s| s.trusted()).collect();
    // The service time comes from a step that kept up without errors, when there is one.
    let timed = || trusted.iter().filter(|s| s.mean.is_some_and(|m| m > 0.0));
    let base = timed()
        .filter(|s| !s.saturated && s.error_rate <= 0.01)
        .min_by(|a, b| a.offered.total_cmp(&b.offered))
        .or_else(|| timed().min_by(|a, b| a.offered.total_cmp(&b.offered)))?;
    let service_mean = base.mean?;
    let measured_cv = base.cv.unwrap_or(1.0).clamp(0.05, 5.0);
    let service_cv = match fit {
        Fit::Moments => measured_cv,
        Fit::Tail => base.p99.and_then(|p99| tail_fitted_cv(service_mean, p99)).unwrap_or(measured_cv),
    };
    let saturation_rps = trusted.iter().map(|s| s.achieved).fold(0.0, f64::max);
    let saturation_measured = trusted.iter().any(|s| s.saturated);
    let load = saturation_rps * service_mean;
    let concurrency =
        if saturation_measured { load.round() } else { load.ceil() }.clamp(1.0, f64::from(MAX_CONCURRENCY)) as u32;
    Some(Calibration {
        service_mean,
        service_cv,
        measured_cv,
        fit,
        concurrency,
        saturation_rps,
        saturation_measured,
        base_step: base.step,
    })
}

/// The model's answer for one step beside the measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub step: u32,
    pub offered: f64,
    /// Closed loop: the requests kept in flight, predicted with [`closed_loop`] instead of M/G/c.
    pub in_flight: Option<u32>,
    /// ρ = λ·m / c; closed loop, min(N, c) / c.
    pub utilization: f64,
    /// `None` where the model says the queue grows without bound (ρ ≥ 1).
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub measured_p50: Option<f64>,
    pub measured_p99: Option<f64>,
    /// (predicted − measured) / measured.
    pub error_p50: Option<f64>,
    pub error_p99: Option<f64>,
    /// Counted in [`Check::mape_p99`]: trusted, not the calibration step, and for open loop not
    /// saturated and below ρ = 0.8, for closed loop with at most 1 % errors (its queue is bounded
    /// by the requests in flight, so a saturated step is predicted too).
    pub counted: bool,
}

/// Every step predicted, and the error summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub calibration: Calibration,
    pub predictions: Vec<Prediction>,
    /// Mean absolute percentage error of p99 over the counted steps, as a fraction.
    pub mape_p99: Option<f64>,
    /// The largest absolute p99 error among them.
    pub worst_p99: Option<f64>,
}

impl Check {
    /// Whether every step was a closed loop (the agent runs one kind of load per run).
    pub fn closed_loop(&self) -> bool {
        self.predictions.iter().all(|p| p.in_flight.is_some())
    }
}

/// Steps below this utilisation count toward the error.
pub const COUNTED_BELOW_UTILIZATION: f64 = 0.8;

/// Every step predicted with the default fit.
pub fn check(steps: &[Step]) -> Option<Check> {
    check_with(steps, DEFAULT_FIT)
}

/// Every step predicted with the variation taken as `fit` says.
pub fn check_with(steps: &[Step], fit: Fit) -> Option<Check> {
    let calibration = calibrate_with(steps, fit)?;
    let predictions: Vec<Prediction> = steps
        .iter()
        .map(|s| {
            let c = calibration.concurrency;
            let (utilization, p50, p99) = match s.in_flight {
                Some(n) => {
                    let closed = closed_loop(calibration.service_mean, calibration.service_cv, c, n);
                    (
                        f64::from(n.min(c)) / f64::from(c),
                        closed.as_ref().map(|r| r.quantile(0.5)),
                        closed.as_ref().map(|r| r.quantile(0.99)),
                    )
                }
                None => {
                    let queue = Queue::new(s.offered, calibration.service_mean, calibration.service_cv, c);
                    let utilization = s.offered * calibration.service_mean / f64::from(c);
                    (utilization, queue.as_ref().map(|q| q.quantile(0.5)), queue.as_ref().map(|q| q.quantile(0.99)))
                }
            };
            let error = |p: Option<f64>, m: Option<f64>| match (p, m) {
                (Some(p), Some(m)) if m > 0.0 => Some((p - m) / m),
                _ => None,
            };
            let error_p99 = error(p99, s.p99);
            let open_counted = !s.saturated && utilization < COUNTED_BELOW_UTILIZATION;
            let closed_counted = s.error_rate <= 0.01;
            Prediction {
                step: s.step,
                offered: s.offered,
                in_flight: s.in_flight,
                utilization,
                p50,
                p99,
                measured_p50: s.p50,
                measured_p99: s.p99,
                error_p50: error(p50, s.p50),
                error_p99,
                counted: s.trusted()
                    && if s.in_flight.is_some() { closed_counted } else { open_counted }
                    && error_p99.is_some()
                    && s.step != calibration.base_step,
            }
        })
        .collect();
    let counted: Vec<f64> =
        predictions.iter().filter(|p| p.counted).filter_map(|p| p.error_p99).map(f64::abs).collect();
    let mape_p99 = (!counted.is_empty()).then(|| counted.iter().sum::<f64>() / counted.len() as f64);
    let worst_p99 = counted.iter().copied().reduce(f64::max);
    Some(Check { calibration, predictions, mape_p99, worst_p99 })
}

/// Where a step's p99 would fall if the service were the calibrated queue: the 5th and 95th
/// percentiles of the p99s of `replicates` simulated steps ([`crate::plan::queue::simulate`])
/// of as many requests at the same rate. A measured p99 outside that band is the model's
/// error, not the step's own noise (a p99 of a few thousand requests moves by several per
/// cent from one step to the next, and more near capacity). `None` for a closed-loop or
/// unstable step, one without requests, or fewer than 20 replicates; at most 1,000 replicates
/// of 1,000,000 requests.
pub fn noise(calibration: &Calibration, step: &Step, replicates: usize, seed: u64) -> Option<(f64, f64)> {
    let (rate, mean, c) = (step.offered, calibration.service_mean, calibration.concurrency);
    if !simulable(calibration, step) || replicates < 20 {
        return None;
    }
    let requests = step.requests.min(MAX_BAND_REQUESTS) as usize;
    let mut p99s: Vec<f64> = (0..replicates.min(1000) as u64)
        .filter_map(|k| {
            let mut r =
                crate::plan::queue::simulate(rate, mean, calibration.service_cv, c, requests, seed.wrapping_add(k));
            // The rank HdrHistogram reads a p99 at: the ⌈0.99·n⌉-th smallest.
            let rank = ((0.99 * r.len() as f64).ceil() as usize).clamp(1, r.len().max(1)) - 1;
            (rank < r.len()).then(|| *r.select_nth_unstable_by(rank, f64::total_cmp).1)
        })
        .collect();
    p99s.sort_by(f64::total_cmp);
    // As many replicates below the band as above it: a twentieth of them on each side.
    let outside = p99s.len() / 20;
    Some((*p99s.get(outside)?, *p99s.get(p99s.len().checked_sub(outside + 1)?)?))
}

/// Whether [`noise`] can simulate `step`: open loop, with requests, at a rate the calibrated
/// queue keeps up with.
fn simulable(calibration: &Calibration, step: &Step) -> bool {
    step.in_flight.is_none()
        && step.requests > 0
        && step.offered * calibration.service_mean < f64::from(calibration.concurrency)
}

/// The most requests of one step [`noise`] simulates.
pub const MAX_BAND_REQUESTS: u64 = 1_000_000;

/// A step's [`noise`] band, as the run page shows it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Band {
    pub step: u32,
    /// The 5th and 95th percentiles of the simulated steps' p99, seconds.
    pub low: f64,
    pub high: f64,
}

impl Band {
    /// Where a measured p99 lies against the band: `below`, `inside` or `above`.
    pub fn side(&self, p99: f64) -> &'static str {
        if p99 < self.low {
            "below"
        } else if p99 > self.high {
            "above"
        } else {
            "inside"
        }
    }
}

/// The most requests [`bands`] simulates for one run, all steps, replicates and their warm-ups
/// together (about half a second of one core; it runs once, when the run is stored).
pub const BANDS_BUDGET: u64 = 5_000_000;

/// The [`noise`] band of every trusted open-loop step below saturation that the default
/// calibration can predict, with as many replicates (20 to 100) as [`BANDS_BUDGET`] allows
/// over those steps' requests; empty when the run cannot be calibrated or those steps are too
/// large for 20 replicates each (then their p99s rest on so many requests that chance moves
/// them little). Seeded by step: the same run gets the same bands.
pub fn bands(steps: &[Step]) -> Vec<Band> {
    let Some(calibration) = calibrate(steps) else { return Vec::new() };
    let judged: Vec<&Step> =
        steps.iter().filter(|s| s.trusted() && !s.saturated && simulable(&calibration, s)).collect();
    // Each replicate also simulates a warm-up of a tenth as many requests and 100 more.
    let per_replicate: u64 = judged.iter().map(|s| s.requests.min(MAX_BAND_REQUESTS) * 11 / 10 + 100).sum();
    let replicates = (BANDS_BUDGET / per_replicate.max(1)).min(100);
    if replicates < 20 {
        return Vec::new();
    }
    judged
        .into_iter()
        .filter_map(|s| {
            let (low, high) = noise(&calibration, s, replicates as usize, u64::from(s.step) << 32)?;
            Some(Band { step: s.step, low, high })
        })
        .collect()
}

/// Steps run at the same load: how far their p99 moved from one to the next, chance and the
/// server's own drift together. A step's [`noise`] band holds only the chance of a step of its
/// length; a server also drifts between steps (other work on the node, caches, its own
/// housekeeping), and only a load measured more than once shows by how much.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    pub load: RepeatedLoad,
    /// The steps, in order.
    pub steps: Vec<u32>,
    /// Their lowest and highest p99, seconds.
    pub low: f64,
    pub high: f64,
}

/// The load of a [`Repeat`]: open-loop steps' scheduled rate, or closed-loop steps' requests in
/// flight (closed loops sort after open ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RepeatedLoad {
    Rate(f64),
    InFlight(u32),
}

impl Repeat {
    /// The highest p99 over the lowest, less one.
    pub fn spread(&self) -> f64 {
        self.high / self.low - 1.0
    }
}

/// The loads of a run measured by two or more steps (`--rates 100,300,100,300`), in order of
/// load, counting only steps whose p99 the model check would judge: trusted, unsaturated, at
/// most 1 % errors, and open-loop ones below [`COUNTED_BELOW_UTILIZATION`] of `calibration`
/// (near capacity chance alone moves a p99 far). Steps are of one load when they were
/// scheduled at the same rate or kept as many requests in flight.
pub fn repeats(steps: &[Step], calibration: &Calibration) -> Vec<Repeat> {
    let below = |s: &Step| {
        s.in_flight.is_some()
            || s.offered * calibration.service_mean / f64::from(calibration.concurrency) < COUNTED_BELOW_UTILIZATION
    };
    let mut groups: Vec<Repeat> = Vec::new();
    for s in steps.iter().filter(|s| s.trusted() && !s.saturated && s.error_rate <= 0.01 && below(s)) {
        let Some(p99) = s.p99.filter(|p| *p > 0.0 && p.is_finite()) else { continue };
        let load = match (s.in_flight, s.scheduled) {
            (Some(n), _) => RepeatedLoad::InFlight(n),
            (None, Some(rate)) => RepeatedLoad::Rate(rate),
            (None, None) => continue,
        };
        match groups.iter_mut().find(|g| g.load == load) {
            Some(g) => {
                g.steps.push(s.step);
                g.low = g.low.min(p99);
                g.high = g.high.max(p99);
            }
            None => groups.push(Repeat { load, steps: vec![s.step], low: p99, high: p99 }),
        }
    }
    groups.retain(|g| g.steps.len() >= 2);
    groups.sort_by(|a, b| {
        let key = |g: &Repeat| match g.load {
            RepeatedLoad::Rate(rate) => (0, rate),
            RepeatedLoad::InFlight(n) => (1, f64::from(n)),
        };
        let (a, b) = (key(a), key(b));
        a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
    });
    groups
}

/// The response time of a closed loop: `in_flight` requests sent back to back (no think time)
/// to `c` servers of mean `mean` and coefficient of variation `cv`, first come first served.
///
/// Up to `c` in flight nothing queues: the response is the service time. Beyond, a request that
/// has just been answered and sent again finds the other N − 1 there and waits for N − c
/// departures of c busy servers, a mean of m / c apart. Over several departures their count
/// varies as the c servers' renewal processes add up, cv²·m / c² per departure. So the mean
/// response is N·m / c exactly (Little's law; the throughput is c / m), and the whole response,
/// wait plus service, is taken as the gamma with that mean and variance
/// cv²m² + (N − c)·cv²m² / c². Checked against a discrete-event simulation of the same loop in
/// `model/tests/queue_simulation.rs` (p50 within 5 %, p99 within 12 % for cv 0.3–1.5, c 1–8,
/// N up to 16c). `None` for inputs that describe no service.
pub fn closed_loop(mean: f64, cv: f64, c: u32, in_flight: u32) -> Option<Service> {
    if c == 0 || in_flight == 0 {
        return None;
    }
    if in_flight <= c {
        return Service::new(mean, cv).ok();
    }
    let (n, c) = (f64::from(in_flight), f64::from(c));
    let variance = (cv * mean).powi(2) * (1.0 + (n - c) / (c * c));
    let response_mean = n * mean / c;
    Service::new(response_mean, variance.sqrt() / response_mean).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::run::Stats;

    fn step(step: u32, offered: f64, achieved: f64, mean: f64, p99: f64, saturated: bool) -> Step {
        Step {
            step,
            offered,
            achieved,
            mean: Some(mean),
            p50: Some(mean * 0.9),
            p99: Some(p99),
            cv: Some(0.5),
            requests: 1000,
            error_rate: 0.0,
            saturated,
            client_limited: false,
            in_flight: None,
            scheduled: Some(offered),
        }
    }

    #[test]
    fn repeated_loads_are_grouped_by_their_schedule_and_span_their_p99s() {
        let at = |n: u32, rate: f64, p99: f64| Step { offered: rate * 1.04, ..step(n, rate, rate, 0.001, p99, false) };
        let closed =
            |n: u32, in_flight: u32, p99: f64| Step { in_flight: Some(in_flight), scheduled: None, ..at(n, 1.0, p99) };
        let steps = [
            at(1, 100.0, 0.003),
            at(2, 300.0, 0.004),
            at(3, 100.0, 0.005),
            // Neither an untrusted, a saturated nor a failing step is the server's drift.
            Step { client_limited: true, ..at(4, 100.0, 0.050) },
            Step { error_rate: 0.02, ..at(11, 100.0, 0.060) },
            at(5, 300.0, 0.002),
            Step { saturated: true, ..at(6, 300.0, 0.090) },
            at(7, 500.0, 0.006),
            closed(8, 4, 0.010),
            closed(9, 4, 0.012),
            closed(10, 8, 0.020),
        ];
        let calibration = calibrate(&steps).unwrap();
        let r = repeats(&steps, &calibration);
        let group = |load, steps: &[u32], low, high| Repeat { load, steps: steps.to_vec(), low, high };
        assert_eq!(
            r,
            vec![
                group(RepeatedLoad::Rate(100.0), &[1, 3], 0.003, 0.005),
                group(RepeatedLoad::Rate(300.0), &[2, 5], 0.002, 0.004),
                group(RepeatedLoad::InFlight(4), &[8, 9], 0.010, 0.012),
            ]
        );
        assert!((r[0].spread() - 2.0 / 3.0).abs() < 1e-12);
        // One step per load: nothing repeated.
        assert!(repeats(&steps[..2], &calibration).is_empty());
        // Nor are steps near the calibrated capacity, where chance alone moves a p99 far.
        let near = 0.9 * f64::from(calibration.concurrency) / calibration.service_mean;
        assert!(repeats(&[at(1, near, 0.003), at(2, near, 0.004)], &calibration).is_empty());
    }

    #[test]
    fn concurrency_comes_from_the_saturation_throughput() {
        // 10 ms per request, 400/s at most: four at once.
        let steps = [
            step(1, 10.0, 10.0, 0.010, 0.020, false),
            step(2, 200.0, 200.0, 0.011, 0.025, false),
            step(3, 800.0, 400.0, 0.5, 2.0, true),
        ];
        let cal = calibrate_with(&steps, Fit::Moments).unwrap();
        assert_eq!(cal.concurrency, 4);
        assert!(cal.saturation_measured);
        assert_eq!((cal.service_mean, cal.service_cv, cal.base_step), (0.010, 0.5, 1));
        // Fitted to the tail, the default: a p99 of twice the mean is a gamma with cv ≈ 0.43.
        let tail = calibrate_with(&steps, Fit::Tail).unwrap();
        assert_eq!((tail.measured_cv, tail.fit), (0.5, Fit::Tail));
        assert_eq!(tail.service_cv, tail_fitted_cv(0.010, 0.020).unwrap());
        assert_eq!(calibrate(&steps), Some(tail), "the tail is the default");
        let check = check(&steps).unwrap();
        assert!(check.predictions[2].p99.is_none(), "800/s on four 10 ms servers is unstable");
        assert!((check.predictions[1].utilization - 0.5).abs() < 1e-12);
        assert!(check.predictions[1].counted && !check.predictions[0].counted && !check.predictions[2].counted);
        assert_eq!(check.mape_p99, check.predictions[1].error_p99.map(f64::abs));
    }

    #[test]
    fn a_client_limited_step_is_not_trusted_and_no_saturation_is_a_lower_bound() {
        let mut limited = step(1, 5.0, 5.0, 0.001, 0.002, false);
        limited.client_limited = true;
        let steps = [limited, step(2, 50.0, 50.0, 0.010, 0.03, false), step(3, 100.0, 100.0, 0.010, 0.03, false)];
        let cal = calibrate(&steps).unwrap();
        assert_eq!(cal.base_step, 2, "the client-limited step is skipped");
        assert!(!cal.saturation_measured);
        assert_eq!(cal.concurrency, 1, "ceil(100 × 0.010) = 1: at least one");
        assert!(calibrate(&steps[..1]).is_none());
    }

    #[test]
    fn the_model_matches_a_queue_it_describes() {
        // Measurements that are the model's own predictions give zero error.
        let (mean, cv, c) = (0.004, 0.5, 2);
        let q = |rate: f64| Queue::new(rate, mean, cv, c).unwrap();
        let base = Step { cv: Some(cv), ..step(1, 1e-9, 1e-9, mean, q(1e-9).quantile(0.99), false) };
        let mid = Step { p99: Some(q(250.0).quantile(0.99)), ..step(2, 250.0, 250.0, 0.0045, 0.0, false) };
        let top = step(3, 600.0, 500.0, 0.1, 1.0, true);
        let check = check(&[base, mid, top]).unwrap();
        assert_eq!(check.calibration.concurrency, 2);
        assert!(check.mape_p99.unwrap() < 1e-9, "{check:?}");
    }

    #[test]
    fn the_tail_fit_recovers_the_cv_of_a_gamma_from_its_p99() {
        let mut last = 0.0;
        for cv in [0.1, 0.34, 0.5, 1.0, 1.7, 2.5, 2.95] {
            let unit = Service::new(1.0, cv).unwrap();
            let p99 = 0.006 * unit.quantile(0.99);
            let fitted = tail_fitted_cv(0.006, p99).unwrap();
            assert!((fitted - cv).abs() < 1e-6 * cv.max(1.0), "cv {cv}: fitted {fitted}");
            assert!(p99 > last, "the p99 grows with the cv over the fitted range");
            last = p99;
        }
        assert_eq!(tail_fitted_cv(0.006, 0.0061), Some(FITTED_CV.0), "near-constant: the lowest cv");
        assert_eq!(tail_fitted_cv(0.006, 10.0), Some(FITTED_CV.1), "a wild tail: the highest cv");
        assert_eq!(tail_fitted_cv(0.006, 0.005), None, "a p99 below the mean says nothing");
        assert_eq!(tail_fitted_cv(0.0, 0.005), None);
        assert_eq!(tail_fitted_cv(f64::NAN, 0.005), None);
    }

    #[test]
    fn the_noise_band_holds_the_queues_own_p99_and_narrows_with_more_requests() {
        let (mean, cv, c) = (0.0015, 0.45, 2u32);
        let cal = Calibration {
            service_mean: mean,
            service_cv: cv,
            measured_cv: cv,
            fit: Fit::Tail,
            concurrency: c,
            saturation_rps: 1300.0,
            saturation_measured: true,
            base_step: 1,
        };
        let rate = 0.5 * 2.0 / mean;
        let exact = Queue::new(rate, mean, cv, c).unwrap().quantile(0.99);
        let at = |requests: u64| Step { requests, ..step(2, rate, rate, mean, exact, false) };
        let (lo, hi) = noise(&cal, &at(5_000), 100, 1).unwrap();
        assert!(lo < exact && exact < hi, "{lo} < {exact} < {hi}");
        assert!(hi / lo < 1.5 && hi / lo > 1.05, "a p99 of 5,000 requests moves by per cents: {lo}..{hi}");
        let (lo_long, hi_long) = noise(&cal, &at(40_000), 40, 1).unwrap();
        assert!(hi_long / lo_long < hi / lo, "{lo_long}..{hi_long} against {lo}..{hi}");
        assert_eq!(noise(&cal, &at(5_000), 100, 1), noise(&cal, &at(5_000), 100, 1), "seeded");
        assert!(noise(&cal, &at(0), 100, 1).is_none());
        assert!(noise(&cal, &at(5_000), 10, 1).is_none(), "too few replicates to read a band");
        assert!(noise(&cal, &Step { offered: 2000.0, ..at(5_000) }, 100, 1).is_none(), "unstable");
        assert!(noise(&cal, &Step { in_flight: Some(4), ..at(5_000) }, 100, 1).is_none(), "closed loop");
    }

    #[test]
    fn a_run_gets_a_band_per_stable_open_loop_step_within_its_budget() {
        let (mean, cv, c) = (0.010, 0.5, 4u32);
        let q = |rate: f64| Queue::new(rate, mean, cv, c).unwrap();
        let at = |n: u32, rate: f64, requests: u64| Step {
            cv: Some(cv),
            requests,
            ..step(n, rate, rate, mean, q(rate).quantile(0.99), false)
        };
        let steps = [at(1, 10.0, 80), at(2, 200.0, 1600), at(3, 350.0, 2800), step(4, 800.0, 400.0, 0.5, 2.0, true)];
        let bands = bands(&steps);
        assert_eq!(bands.iter().map(|b| b.step).collect::<Vec<_>>(), [1, 2, 3], "the saturated step is unstable");
        for (band, s) in bands.iter().zip(&steps) {
            assert!(band.low < band.high, "{band:?}");
            // The model's own p99 lies inside its band (the approximation is close here).
            assert!(band.low < s.p99.unwrap() * 1.05 && s.p99.unwrap() < band.high * 1.05, "{band:?} {s:?}");
        }
        assert_eq!(super::bands(&steps), bands, "seeded");
        let b = bands[1];
        assert_eq!(
            [b.side(b.low * 0.99), b.side(b.low), b.side(b.high), b.side(b.high * 1.01)],
            ["below", "inside", "inside", "above"]
        );
        // Steps too large for 20 replicates within the budget get none.
        let huge = [at(1, 10.0, 80), at(2, 200.0, 150_000), at(3, 350.0, 150_000), steps[3].clone()];
        assert!(super::bands(&huge).is_empty());
        // Steps that are not judged (saturated, client-limited) cost nothing of the budget.
        let mut big = steps[3].clone();
        big.requests = 50_000_000;
        let mut limited = at(5, 300.0, 50_000_000);
        limited.client_limited = true;
        assert_eq!(super::bands(&[steps[0].clone(), steps[1].clone(), steps[2].clone(), big, limited]), bands);
        assert!(super::bands(&[]).is_empty());
    }

    /// The measurements of one closed-loop step, as the agent stores them.
    fn closed_measurements(step: u32, in_flight: u32, rate: f64, latency: Stats) -> Vec<Measurement> {
        use crate::wire::run::Unit;
        let parameters: BTreeMap<String, String> = [
            ("step", step.to_string()),
            ("load", "closed".to_string()),
            ("in_flight", in_flight.to_string()),
            ("saturated", "false".to_string()),
            ("client_limited", "false".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let m = |case: Case, unit: Unit, stats: Stats| Measurement {
            suite: Suite::Endpoint,
            case: case.as_str().into(),
            parameters: parameters.clone(),
            unit,
            status: MeasurementStatus::Ok,
            reason: None,
            histogram: None,
            stats: Some(stats),
            floor: None,
        };
        vec![
            m(Case::EndpointLatency, Unit::Seconds, latency),
            m(Case::EndpointLatencyCv, Unit::Ratio, Stats::single(0.5)),
            m(Case::EndpointOfferedRate, Unit::RequestsPerSecond, Stats::single(rate)),
            m(Case::EndpointAchievedRate, Unit::RequestsPerSecond, Stats::single(rate)),
            m(Case::EndpointErrorRate, Unit::Ratio, Stats::single(0.0)),
        ]
    }

    #[test]
    fn closed_loop_steps_are_read_and_predicted_by_the_closed_loop_model() {
        // A service of two servers, 10 ms each with cv 0.5, loaded with 1, 2, 4 and 8 in flight
        // and measuring exactly what the closed-loop model says.
        let (mean, cv, c) = (0.010, 0.5, 2u32);
        let mut ms = Vec::new();
        for (i, n) in [1u32, 2, 4, 8].into_iter().enumerate() {
            let r = closed_loop(mean, cv, c, n).unwrap();
            let rate = f64::from(n.min(c)) / mean;
            let stats =
                Stats { mean: r.mean(), p50: r.quantile(0.5), p99: r.quantile(0.99), ..Stats::single(r.mean()) };
            ms.extend(closed_measurements(i as u32 + 1, n, rate, stats));
        }
        let steps = steps(&ms);
        assert_eq!(steps.iter().map(|s| s.in_flight).collect::<Vec<_>>(), [Some(1), Some(2), Some(4), Some(8)]);
        let check = check(&steps).unwrap();
        assert_eq!(check.calibration.concurrency, 2, "200/s at most of 10 ms requests");
        assert_eq!(check.calibration.base_step, 1);
        // Past saturation too: a closed loop's queue is bounded by what is in flight.
        assert_eq!(check.predictions.iter().filter(|p| p.counted).count(), 3, "{check:?}");
        assert!(check.mape_p99.unwrap() < 1e-9, "{check:?}");
        assert!((check.predictions[3].utilization - 1.0).abs() < 1e-12);
        // Little's law: 8 in flight on 2 servers wait for 3 others' service on average.
        assert!((closed_loop(mean, cv, c, 8).unwrap().mean() - 0.040).abs() < 1e-12);
        assert!(closed_loop(mean, cv, 0, 8).is_none() && closed_loop(mean, cv, 2, 0).is_none());
        // A step that names no in-flight count is not read as closed.
        let mut broken = closed_measurements(9, 4, 100.0, Stats::single(0.02));
        broken.iter_mut().for_each(|m| {
            m.parameters.remove("in_flight");
        });
        assert!(super::steps(&broken).is_empty());
    }
}
