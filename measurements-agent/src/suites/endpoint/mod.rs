//! The `endpoint` suite: load-tests the inference service a team runs, over the protocol it
//! speaks, at open-loop rates up to saturation, and records every latency as a histogram.

pub mod arrivals;
pub mod grpc;
mod http1;
pub mod load;
pub mod prompts;
pub mod protocol;
pub mod tensors;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use model::plan::llm::fit::SlotsFrom;
use model::plan::rng::Rng;
use model::{Case, Measurement, MeasurementStatus, Stats, Suite, Unit};

use self::arrivals::Arrivals;
use self::load::Outcome;
use self::protocol::{Client, Failure, Prepared, Protocol, TargetOptions};
use crate::stats::t95;
use crate::suites::{Benchmark, Effort, Progress};

/// A step is saturated when it achieves less than this fraction of the offered rate...
const SATURATED_ACHIEVED: f64 = 0.9;
/// ...or its p99 exceeds this multiple of the unloaded p99...
const SATURATED_P99: f64 = 10.0;
/// ...or more than this fraction of its requests fail.
const SATURATED_ERRORS: f64 = 0.01;
/// Requests that waited for the in-flight cap and then took this many times the unloaded p50
/// at the server show the server queueing: the step is saturated, not client-limited.
const CAPPED_QUEUEING: f64 = 2.0;
/// A step whose client used more than this share of the node's CPU is not trusted.
const CLIENT_CPU_LIMIT: f64 = 0.9;
/// Most steps of a sweep.
const MAX_SWEEP_STEPS: usize = 12;
/// A closed-loop step with more requests in flight than an earlier one is saturated when its
/// throughput is less than this multiple of the earlier one's best: more callers bought nothing.
const CLOSED_GAIN: f64 = 1.1;
/// The most requests in flight of a closed-loop step.
pub const MAX_CONCURRENCY: u32 = 4096;

/// What to load and how.
#[derive(Debug, Clone)]
pub struct Config {
    pub target: String,
    pub protocol: Protocol,
    pub options: TargetOptions,
    /// The Authorization header value (from the environment; never stored or printed).
    pub authorization: Option<Secret>,
    /// Fixed rates per second; empty with `sweep`.
    pub rates: Vec<f64>,
    pub sweep: bool,
    /// Closed loop instead: requests in flight, one step each; empty for open loop.
    pub concurrency: Vec<u32>,
    pub arrivals: Arrivals,
    pub duration: Option<Duration>,
    pub warmup: Option<Duration>,
    pub max_in_flight: usize,
    pub timeout: Duration,
    /// How late a send may go before its step is marked client-limited.
    pub max_send_lag: LagBound,
    pub slo: Slo,
    pub seed: Option<u64>,
}

/// How late a send may go before its step is not trusted: its send lag p99 above the bound, or
/// its median lag above a tenth of it, marks the step client-limited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LagBound {
    /// `--max-send-lag`: this, whatever the service's latency (1 ms is fair on dedicated
    /// hardware).
    Fixed(Duration),
    /// The default: a twentieth of the p99 of what the service took (its time to first token,
    /// for an LLM; each request's lag and wait at the cap taken off), but no more than the time
    /// between two sends at the step's rate (later than that, sends bunch up), and never under
    /// [`DEFAULT_SEND_LAG`]. Every latency is timed from the scheduled send, so a send that late adds at most
    /// 5 % to the p99 it is judged by; a shared VM wakes a sleeping thread a few milliseconds
    /// late at p99 even when idle, and at one LLM request a second the p99 of a step's lags is
    /// the latest of a few dozen.
    Relative,
}

/// The least bound [`LagBound::Relative`] allows.
pub const DEFAULT_SEND_LAG: Duration = Duration::from_millis(10);

impl LagBound {
    /// The lag allowed in a step that sent `rate` requests a second whose service took `p99`
    /// at p99 (TTFT for an LLM).
    pub fn allowed(self, p99: Duration, rate: f64) -> Duration {
        match self {
            LagBound::Fixed(bound) => bound,
            LagBound::Relative => {
                let between =
                    if rate > 0.0 { Duration::from_secs_f64((1.0 / rate).min(3600.0)) } else { Duration::MAX };
                DEFAULT_SEND_LAG.max((p99 / 20).min(between))
            }
        }
    }
}

/// A header value that never shows in a log or a `{:?}`.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Per-request service-level objectives; goodput counts the requests that meet all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Slo {
    /// End-to-end latency bound (from `p99=` or `latency=`).
    pub latency: Option<Duration>,
    /// Time to first token.
    pub ttft: Option<Duration>,
    /// Mean gap between a request's tokens.
    pub itl: Option<Duration>,
}

impl Slo {
    /// `p99=200ms,ttft=500ms,itl=50ms` (any of them).
    pub fn parse(text: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                part.split_once('=').ok_or_else(|| format!("--slo takes KEY=DURATION items, not '{part}'"))?;
            let value = parse_duration(value).map_err(|e| format!("--slo {key}: {e}"))?;
            match key {
                "p99" | "latency" => slo.latency = Some(value),
                "ttft" => slo.ttft = Some(value),
                "itl" => slo.itl = Some(value),
                other => return Err(format!("--slo knows p99, ttft and itl, not '{other}'")),
            }
        }
        Ok(slo)
    }

    pub fn is_set(&self) -> bool {
        self.latency.is_some() || self.ttft.is_some() || self.itl.is_some()
    }

    fn label(&self) -> String {
        let ms = |d: Duration| format!("{}ms", d.as_secs_f64() * 1e3);
        let mut parts = Vec::new();
        if let Some(d) = self.latency {
            parts.push(format!("latency<={}", ms(d)));
        }
        if let Some(d) = self.ttft {
            parts.push(format!("ttft<={}", ms(d)));
        }
        if let Some(d) = self.itl {
            parts.push(format!("itl<={}", ms(d)));
        }
        parts.join(",")
    }

    fn met(&self, outcome: &Outcome) -> bool {
        let within = |bound: Option<Duration>, value: Option<Duration>| match (bound, value) {
            (None, _) => true,
            (Some(bound), Some(value)) => value <= bound,
            (Some(_), None) => false,
        };
        let mean_gap = (!outcome.gaps.is_empty())
            .then(|| outcome.gaps.iter().sum::<Duration>() / outcome.gaps.len() as u32)
            .or(Some(Duration::ZERO));
        outcome.result.is_ok()
            && within(self.latency, Some(outcome.latency))
            && within(self.ttft, outcome.first_token)
            && within(self.itl, mean_gap)
    }
}

/// `250ms`, `2s`, `1.5s`, `3m`, `500us`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a duration such as 250ms, 2s or 3m"))?;
    let seconds = match unit {
        "us" | "µs" => value * 1e-6,
        "ms" => value * 1e-3,
        "s" | "" => value,
        "m" | "min" => value * 60.0,
        _ => return Err(format!("'{text}': use us, ms, s or m")),
    };
    if !seconds.is_finite() || seconds <= 0.0 || seconds > 86_400.0 {
        return Err(format!("'{text}' must be above zero and at most a day"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A rate per second: finite and above zero.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 && rate <= 1e6 => Ok(rate),
        _ => Err(format!("--rates takes requests per second above 0 and at most 1000000, not '{text}'")),
    }
}

/// Requests kept in flight by a closed-loop step: 1 to [`MAX_CONCURRENCY`].
pub fn parse_concurrency(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_CONCURRENCY).contains(&n) => Ok(n),
        _ => Err(format!("--concurrency takes requests in flight from 1 to {MAX_CONCURRENCY}, not '{text}'")),
    }
}

/// Said before a load test of a service on this node while the agent may run on any of its
/// cores.
const SHARED_CORES: &str = "  note: the target is on this node and the agent may run on any of its cores: under load \
    the agent's own CPU competes with the service's, and the latencies measured include that; pin them apart \
    (taskset -c 0 measurements-agent …, the service on the other cores) or run the agent on another node";

/// Whether `url` names this node: `localhost` or a loopback address.
fn on_this_node(url: &str) -> bool {
    let Some(host) = reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned)) else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether this process may run on fewer than all of the node's online CPUs (`taskset`,
/// a cgroup's cpuset): then someone has placed it, and presumably the service elsewhere.
fn pinned() -> bool {
    let allowed = crate::suites::transport::allowed_cpus().len();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").ok().and_then(|list| cpu_count(&list));
    online.is_some_and(|online| allowed > 0 && allowed < online)
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn cpu_count(list: &str) -> Option<usize> {
    list.trim().split(',').try_fold(0, |n, part| {
        let count = match part.split_once('-') {
            Some((lo, hi)) => hi.parse::<usize>().ok()?.checked_sub(lo.parse::<usize>().ok()?)? + 1,
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
        Some(n + count)
    })
}

/// The target's URL as stored: scheme, host, port and path; never credentials or a query.
pub fn public_url(url: &str) -> anyhow::Result<String> {
    // The error does not repeat the URL: it may hold a secret.
    let parsed = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("--target is not a URL: {e}"))?;
    anyhow::ensure!(
        matches!(parsed.scheme(), "http" | "https"),
        "--target must be an http:// or https:// URL, not '{}'",
        parsed.scheme()
    );
    let host = parsed.host_str().context("--target has no host")?;
    let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
    let mut text = format!("{}://{host}{port}{}", parsed.scheme(), parsed.path().trim_end_matches('/'));
    text.truncate(200);
    Ok(text)
}

pub struct EndpointSuite {
    pub config: Config,
}

impl Benchmark for EndpointSuite {
    fn suite(&self) -> Suite {
        Suite::Endpoint
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let config = &self.config;
        // A lane per core the agent may use (see `load`); preparing and probing need one thread.
        let lanes = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let authorization = config.authorization.as_ref().map(|s| s.0.clone());
        let pool = config.concurrency.iter().map(|&n| n as usize).fold(config.max_in_flight, usize::max);
        let client = Arc::new(Client::new(config.timeout, pool, authorization)?);
        let prepared =
            runtime.block_on(protocol::prepare(&client, &config.target, config.protocol, &config.options))?;
        let target = Arc::new(prepared);
        let load = load::Load { client: &client, target: &target, lanes, timeout: config.timeout };
        let public = public_url(&config.target)?;
        let duration = config.duration.unwrap_or(Duration::from_secs(if effort.quick { 5 } else { 20 }));
        let warmup = config.warmup.unwrap_or(Duration::from_secs(if effort.quick { 1 } else { 3 }));
        let seed = config.seed.unwrap_or_else(|| {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).map(|_| u64::from_le_bytes(bytes)).unwrap_or(1)
        });
        let mut rng = Rng::seeded(seed);

        // A few requests one at a time: the target answers, and how long one takes unloaded.
        let (probe, failed) = probe(&runtime, &client, &target, config.timeout)?;
        let what = format!(
            "endpoint {public} ({}{}{}{})",
            config.protocol.as_str(),
            target.model.as_deref().map(|m| format!(", model {}", clean(m))).unwrap_or_default(),
            if target.binary_header.is_some() { ", binary tensors" } else { "" },
            match target.slots {
                Some((n, SlotsFrom::Server)) => format!(", {n} slots as the server reports"),
                Some((n, _)) => match target.server_slots {
                    Some(reported) =>
                        format!(", {n} slots as stated (the server reports {reported}; the stated count is used)"),
                    None => format!(", {n} slots as stated"),
                },
                None if config.protocol.is_llm() => ", slots unknown (--slots N states them)".into(),
                None => String::new(),
            },
        );
        progress.line(&match failed {
            None => format!("{what}: one request alone takes {:.2} ms", probe.as_secs_f64() * 1e3),
            Some(failed) => format!("{what}: every probe request failed ({failed}); the steps count such failures"),
        });
        if on_this_node(&config.target) && !pinned() {
            progress.line(SHARED_CORES);
        }

        let mut base = BTreeMap::new();
        base.insert("target".to_string(), public.clone());
        base.insert("protocol".to_string(), config.protocol.as_str().to_string());
        if config.protocol == Protocol::KserveV2 {
            let encoding = if target.binary_header.is_some() { "binary" } else { "json" };
            base.insert("tensor_data".to_string(), encoding.to_string());
        }
        // A closed loop has no arrival schedule.
        if config.concurrency.is_empty() {
            base.insert("arrivals".to_string(), config.arrivals.label());
            base.insert("seed".to_string(), seed.to_string());
        }
        for (key, value) in
            [("model", &target.model), ("model_version", &target.model_version), ("server", &target.server)]
        {
            if let Some(value) = value {
                base.insert(key.to_string(), clean(value));
            }
        }
        if let Some((slots, from)) = target.slots {
            base.insert("slots".to_string(), slots.to_string());
            base.insert("slots_from".to_string(), from.as_str().to_string());
        }
        if config.slo.is_set() {
            base.insert("slo".to_string(), config.slo.label());
        }

        let run_step = |rate: f64, rng: &mut Rng| -> anyhow::Result<Step> {
            let span = (warmup + duration).as_secs_f64();
            let offsets = config.arrivals.schedule(rate, span, rng);
            let ran = load::run(&load, &offsets, config.max_in_flight)?;
            let window = match &config.arrivals {
                // The whole trace, its last request included.
                Arrivals::Trace(_) => (0.0, offsets.last().copied().unwrap_or(0.0).max(1e-3) + 1e-9),
                _ => (warmup.as_secs_f64(), span),
            };
            Ok(Step::summarise(rate, window, &ran, &config.slo, config.protocol.is_llm(), config.max_send_lag))
        };
        let run_closed_step = |in_flight: u32| -> anyhow::Result<Step> {
            let span = (warmup + duration).as_secs_f64();
            let ran = load::run_closed(&load, in_flight as usize, span)?;
            let window = (warmup.as_secs_f64(), span);
            let mut step =
                Step::summarise(0.0, window, &ran, &config.slo, config.protocol.is_llm(), config.max_send_lag);
            step.in_flight = Some(in_flight);
            Ok(step)
        };

        let mut steps: Vec<Step> = Vec::new();
        let report = |step: &Step, steps: &[Step], progress: &mut Progress| {
            progress.line(&format!("  step {}: {}", steps.len() + 1, step.line()));
        };
        if !config.concurrency.is_empty() {
            for &in_flight in &config.concurrency {
                let mut step = run_closed_step(in_flight)?;
                step.judge_closed(steps.iter().find(|s| !s.latency.is_empty()), &steps);
                report(&step, &steps, progress);
                steps.push(step);
            }
        } else if let Arrivals::Trace(_) = config.arrivals {
            let mut step = run_step(0.0, &mut rng)?;
            step.judge_cap(None);
            report(&step, &steps, progress);
            steps.push(step);
        } else if config.sweep {
            // Start where one request in ten finds the service busy (and with at least 20
            // requests in the step), then double.
            let enough = 20.0 / duration.as_secs_f64();
            let mut rate = round2((0.1 / probe.as_secs_f64().max(1e-6)).max(enough)).clamp(0.2, 2000.0);
            let mut last_good = None;
            let mut retried = false;
            while steps.len() < MAX_SWEEP_STEPS {
                let mut step = run_step(rate, &mut rng)?;
                step.judge(steps.iter().find(|s| !s.latency.is_empty()));
                // A virtual machine's scheduler can hold the sending thread back once in a
                // while, and a stall that late also delays the answers, so the step looks
                // saturated too: a client that fell behind gets one more try at that rate
                // before the sweep ends on it, whatever the service seemed to do.
                if step.client_limited && !retried {
                    progress.line(&format!("  step {}: {} — trying that rate once more", steps.len() + 1, step.line()));
                    retried = true;
                    continue;
                }
                report(&step, &steps, progress);
                let stop = step.saturated || step.client_limited;
                if !stop {
                    last_good = Some(rate);
                }
                steps.push(step);
                if stop {
                    break;
                }
                rate = round2(rate * 2.0);
                retried = false;
            }
            // One step between the last rate it kept up with and the one it did not.
            if let (Some(good), Some(last)) = (last_good, steps.last())
                && last.saturated
                && !last.client_limited
                && last.rate / good > 1.3
                && steps.len() < MAX_SWEEP_STEPS
            {
                let mut step = run_step(round2((good * last.rate).sqrt()), &mut rng)?;
                step.judge(steps.iter().find(|s| !s.latency.is_empty()));
                report(&step, &steps, progress);
                steps.push(step);
            }
        } else {
            for &rate in &config.rates {
                let mut step = run_step(rate, &mut rng)?;
                step.judge(steps.iter().find(|s| !s.latency.is_empty()));
                report(&step, &steps, progress);
                steps.push(step);
            }
        }
        let open_loop = config.concurrency.is_empty() && !matches!(config.arrivals, Arrivals::Trace(_));
        if open_loop
            && !config.protocol.is_llm()
            && let Some(warning) = unsaturated(&steps, config.sweep)
        {
            progress.line(&warning);
        }
        Ok(steps.iter().enumerate().flat_map(|(i, step)| step.measurements(i + 1, &base)).collect())
    }
}

/// What to say after an open-loop run in which no trusted step saturated the service: the
/// concurrency fitted from it is only a lower bound (the run page says so too, but a user who
/// ran the agent by hand should learn it here). `None` where a step saturated, or none ran.
fn unsaturated(steps: &[Step], sweep: bool) -> Option<String> {
    if steps.is_empty() || steps.iter().any(|s| s.saturated && !s.client_limited) {
        return None;
    }
    let behind = steps.iter().position(|s| s.client_limited);
    let why = match (behind, sweep) {
        (Some(i), true) => format!(
            "the sweep stopped at step {}, where the client fell behind its schedule, before the service saturated",
            i + 1
        ),
        (Some(i), false) => {
            format!("no step the client kept to its schedule saturated the service (it fell behind at step {})", i + 1)
        }
        (None, true) => "the sweep ran out of steps before the service saturated".to_string(),
        (None, false) => {
            let top = steps.iter().map(|s| s.rate).fold(0.0, f64::max);
            format!("no step saturated the service (the highest rate was {top:.1}/s)")
        }
    };
    let fix = match (behind, sweep) {
        (Some(_), _) => "run the agent from a node with more cores, or raise --max-in-flight if steps waited for it",
        (None, true) => "give it higher rates with --rates",
        (None, false) => "add higher rates, or use --sweep",
    };
    Some(format!(
        "  note: {why}, so the concurrency fitted from this run is only a lower bound and its predicted P99s upper bounds: {fix}"
    ))
}

/// Three requests to warm the connection, then up to ten one at a time; the median time of
/// those that succeeded. An unreachable target is an error; one that answers with errors is
/// measured (its errors are counted): when every probe request failed, 10 ms stands in for the
/// time and the failures are named, by kind and count.
fn probe(
    runtime: &tokio::runtime::Runtime,
    client: &Arc<Client>,
    target: &Arc<Prepared>,
    timeout: Duration,
) -> anyhow::Result<(Duration, Option<String>)> {
    let shown = public_url(&target.url).unwrap_or_else(|_| "the target".into());
    runtime.block_on(async {
        let mut times = Vec::new();
        let mut failures = BTreeMap::<String, u32>::new();
        for i in 0..13 {
            let started = std::time::Instant::now();
            let sent = tokio::time::timeout(timeout, client.send(target, i));
            match sent.await.unwrap_or(Err(Failure::Timeout)) {
                Ok(_) if i >= 3 => times.push(started.elapsed()),
                Ok(_) => {}
                Err(Failure::Connect) => anyhow::bail!("cannot reach {shown}: connection refused or no route"),
                Err(Failure::Timeout) => anyhow::bail!("{shown} did not answer within --timeout {timeout:?}"),
                Err(failure) => *failures.entry(failure.label()).or_default() += 1,
            }
        }
        times.sort();
        match times.get(times.len() / 2) {
            Some(median) => Ok((*median, None)),
            None => {
                let list: Vec<String> = failures.iter().map(|(k, n)| format!("{k} × {n}")).collect();
                Ok((Duration::from_millis(10), Some(list.join(", "))))
            }
        }
    })
}

/// Text from the target as a stored parameter: no control characters, at most 200 bytes.
fn clean(text: &str) -> String {
    crate::upload::printable_within(text, 200)
}

fn round2(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powf(x.log10().floor() - 1.0);
    (x / scale).round() * scale
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("valid bounds")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_nanos() as u64).max(1));
}

/// Statistics in seconds of a histogram of nanoseconds; `None` when it is empty.
fn seconds_stats(h: &Histogram<u64>) -> Option<Stats> {
    scaled_stats(h, 1e-9)
}

/// The histogram's figures, each value multiplied by `scale`.
fn scaled_stats(h: &Histogram<u64>, scale: f64) -> Option<Stats> {
    if h.is_empty() {
        return None;
    }
    let n = h.len();
    let mean = h.mean() * scale;
    let half = if n > 1 { t95((n - 1) as usize) * h.stdev() * scale / (n as f64).sqrt() } else { 0.0 };
    let q = |q: f64| h.value_at_quantile(q) as f64 * scale;
    Some(Stats {
        samples: n,
        mean,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p999: q(0.999),
        ci95_low: mean - half,
        ci95_high: mean + half,
    })
}

/// The histogram as stored; `None` (statistics only) in the unlikely case it is larger than the
/// server accepts.
fn encode(h: &Histogram<u64>) -> Option<String> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
        .filter(|t| t.len() <= model::wire::validate::MAX_HISTOGRAM)
}

/// One step's figures.
struct Step {
    rate: f64,
    /// Closed loop: the requests kept in flight; `None` for an open-loop step.
    in_flight: Option<u32>,
    offered: f64,
    achieved: f64,
    goodput: Option<f64>,
    latency: Histogram<u64>,
    lag: Histogram<u64>,
    sent: u64,
    errors: BTreeMap<String, u64>,
    capped: u64,
    /// The median time at the server of the successful requests that waited for the cap: from
    /// their send, after the wait, to their answer (seconds).
    capped_served: Option<f64>,
    cpu: f64,
    client_limited: bool,
    /// The send lag this step was allowed ([`LagBound::allowed`]).
    lag_bound: Duration,
    saturated: bool,
    llm: Option<Llm>,
}

struct Llm {
    /// Prompt tokens of each request, where the server reported them.
    prompt: Histogram<u64>,
    ttft: Histogram<u64>,
    itl: Histogram<u64>,
    tpot: Histogram<u64>,
    output_tokens: u64,
    input_tokens: u64,
    from_usage: bool,
    tokens_per_second: f64,
}

impl Step {
    fn summarise(
        rate: f64,
        (from, to): (f64, f64),
        ran: &load::Ran,
        slo: &Slo,
        llm: bool,
        max_send_lag: LagBound,
    ) -> Step {
        let measured: Vec<&Outcome> = ran.outcomes.iter().filter(|o| o.offset >= from && o.offset < to).collect();
        let window = (to - from).max(1e-9);
        let mut latency = histogram();
        let mut lag = histogram();
        let mut errors = BTreeMap::new();
        let mut llm_figures = llm.then(|| Llm {
            prompt: histogram(),
            ttft: histogram(),
            itl: histogram(),
            tpot: histogram(),
            output_tokens: 0,
            input_tokens: 0,
            from_usage: true,
            tokens_per_second: 0.0,
        });
        for outcome in &measured {
            record(&mut lag, outcome.lag);
            match &outcome.result {
                Ok(tokens) => {
                    record(&mut latency, outcome.latency);
                    if let (Some(figures), Some(tokens)) = (llm_figures.as_mut(), tokens) {
                        if let Some(first) = outcome.first_token {
                            record(&mut figures.ttft, first);
                        }
                        for gap in &outcome.gaps {
                            record(&mut figures.itl, *gap);
                        }
                        let (output, from_usage) = tokens.output();
                        figures.from_usage &= from_usage;
                        figures.output_tokens = figures.output_tokens.saturating_add(output);
                        figures.input_tokens = figures.input_tokens.saturating_add(tokens.usage.map_or(0, |u| u.1));
                        if let Some((_, prompt)) = tokens.usage {
                            figures.prompt.saturating_record(prompt.max(1));
                        }
                        let between = u32::try_from(output.saturating_sub(1)).unwrap_or(u32::MAX);
                        if let (Some(first), true) = (outcome.first_token, between > 0) {
                            record(&mut figures.tpot, outcome.latency.saturating_sub(first) / between);
                        }
                    }
                }
                Err(failure) => {
                    // A misbehaving target could answer with any status: a few dozen kinds at most.
                    let kind = if errors.len() < 32 { failure.label() } else { "other".into() };
                    *errors.entry(kind).or_default() += 1
                }
            }
        }
        // Throughput: successful answers that ended in a window as long as the sending window,
        // shifted by the median latency (whenever they were sent), over its length. A service
        // that keeps up, however slowly, achieves what was offered; one that does not, its
        // capacity, since it works through its backlog after the last send.
        let shift = if latency.is_empty() { 0.0 } else { latency.value_at_quantile(0.5) as f64 * 1e-9 };
        let (end_from, end_to) = (from + shift, to + shift);
        let ended: Vec<&Outcome> =
            ran.outcomes.iter().filter(|o| o.result.is_ok() && o.finished >= end_from && o.finished < end_to).collect();
        let ok = ended.len() as u64;
        let good = ended.iter().filter(|o| slo.met(o)).count() as u64;
        if let Some(figures) = llm_figures.as_mut() {
            let tokens: u64 = ended
                .iter()
                .filter_map(|o| o.result.as_ref().ok().and_then(Option::as_ref))
                .map(|t| t.output().0)
                .fold(0, u64::saturating_add);
            figures.tokens_per_second = tokens as f64 / window;
        }
        // Behind schedule now and then (a virtual machine's scheduler wakes a sleeping thread a
        // few milliseconds late at p99 even when idle), or behind all the time, or out of CPU.
        // The bound is judged by what the service itself took (each request's lag and wait at
        // the cap taken off), so a client that falls behind cannot widen its own bound.
        let mut own: Vec<Duration> = measured
            .iter()
            .filter(|o| o.result.is_ok())
            .filter_map(|o| {
                let took = if llm { o.first_token? } else { o.latency };
                Some(took.saturating_sub(o.lag).saturating_sub(o.capped.unwrap_or_default()))
            })
            .collect();
        own.sort_unstable();
        let p99 = own.get((own.len() * 99).div_ceil(100).saturating_sub(1)).copied().unwrap_or_default();
        // The gap between sends as they were scheduled (a trace's too, whose step has no rate).
        let lag_bound = max_send_lag.allowed(p99, measured.len() as f64 / window);
        let allowed = lag_bound.as_nanos() as f64;
        let capped = measured.iter().filter(|o| o.capped.is_some()).count() as u64;
        let mut served: Vec<Duration> = measured
            .iter()
            .filter(|o| o.result.is_ok())
            .filter_map(|o| Some(o.latency.saturating_sub(o.lag).saturating_sub(o.capped?)))
            .collect();
        served.sort_unstable();
        let capped_served = served.get(served.len() / 2).map(Duration::as_secs_f64);
        // Waiting for --max-in-flight is judged with the step's saturation (`judge_cap`).
        let client_limited = lag.value_at_quantile(0.99) as f64 > allowed
            || lag.value_at_quantile(0.5) as f64 > allowed / 10.0
            || ran.cpu > CLIENT_CPU_LIMIT;
        Step {
            rate,
            in_flight: None,
            offered: measured.len() as f64 / window,
            achieved: ok as f64 / window,
            goodput: slo.is_set().then(|| good as f64 / window),
            latency,
            lag,
            sent: measured.len() as u64,
            errors,
            capped,
            capped_served,
            cpu: ran.cpu,
            client_limited,
            lag_bound,
            saturated: false,
            llm: llm_figures,
        }
    }

    fn error_rate(&self) -> f64 {
        self.errors.values().sum::<u64>() as f64 / self.sent.max(1) as f64
    }

    /// Marks saturation against the first (least loaded) step.
    fn judge(&mut self, unloaded: Option<&Step>) {
        let p99 = |s: &Step| s.latency.value_at_quantile(0.99) as f64;
        let slow = unloaded.is_some_and(|u| !u.latency.is_empty() && p99(self) > SATURATED_P99 * p99(u));
        self.saturated =
            self.achieved < SATURATED_ACHIEVED * self.offered || slow || self.error_rate() > SATURATED_ERRORS;
        self.judge_cap(unloaded);
    }

    /// Whether over 1 % of the requests waited for `--max-in-flight`.
    fn waited_for_cap(&self) -> bool {
        self.capped as f64 > 0.01 * self.sent as f64
    }

    /// Over 1 % of the requests waited for `--max-in-flight`. Either the server was queueing
    /// them (those that got a place still took over [`CAPPED_QUEUEING`] × the unloaded p50 at
    /// the server): it is saturated, and the cap only kept its backlog at the client, where the
    /// wait is counted as latency all the same. Or the server answered them about as fast as
    /// unloaded: then the cap, the client, set the pace, and the step is client-limited. With no
    /// unloaded step to compare with, it is client-limited; so is an LLM step, since a server
    /// that batches what is in flight takes longer per request with more of them while it
    /// still has room for more, and only a higher cap would tell.
    fn judge_cap(&mut self, unloaded: Option<&Step>) {
        if !self.waited_for_cap() {
            return;
        }
        if self.llm.is_some() {
            self.client_limited = true;
            return;
        }
        let unloaded_p50 =
            unloaded.filter(|u| !u.latency.is_empty()).map(|u| u.latency.value_at_quantile(0.5) as f64 * 1e-9);
        match (unloaded_p50, self.capped_served) {
            (Some(unloaded), Some(served)) if served > CAPPED_QUEUEING * unloaded => self.saturated = true,
            _ => self.client_limited = true,
        }
    }

    /// A closed-loop step: saturated, besides as [`Step::judge`] says, when it achieved less
    /// than [`CLOSED_GAIN`] × the best of the steps with fewer requests in flight.
    fn judge_closed(&mut self, unloaded: Option<&Step>, earlier: &[Step]) {
        self.judge(unloaded);
        let fewer = earlier.iter().filter(|s| s.in_flight < self.in_flight && !s.client_limited);
        let best = fewer.map(|s| s.achieved).reduce(f64::max);
        self.saturated |= best.is_some_and(|best| self.achieved < CLOSED_GAIN * best);
    }

    fn line(&self) -> String {
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 * 1e-6;
        let load = match self.in_flight {
            Some(n) => format!("{n} in flight, achieved {:.1}/s", self.achieved),
            None => format!(
                "offered {:.1}/s, achieved {:.1}/s, send lag p99 {:.3} ms",
                self.offered,
                self.achieved,
                ms(&self.lag, 0.99)
            ),
        };
        let mut line = format!(
            "{load}, p50 {:.2} ms, p99 {:.2} ms, errors {:.1}%, client CPU {:.0}%",
            ms(&self.latency, 0.5),
            ms(&self.latency, 0.99),
            self.error_rate() * 100.0,
            self.cpu * 100.0
        );
        if let Some(llm) = &self.llm {
            line.push_str(&format!(
                ", TTFT p50 {:.1} ms, ITL p50 {:.2} ms, {:.0} tokens/s",
                ms(&llm.ttft, 0.5),
                ms(&llm.itl, 0.5),
                llm.tokens_per_second
            ));
        }
        if self.saturated {
            line.push_str(" — saturated");
        }
        if self.client_limited {
            line.push_str(&format!(
                " — CLIENT-LIMITED (not trusted; send lag allowed {:.1} ms)",
                self.lag_bound.as_secs_f64() * 1e3
            ));
        }
        if self.waited_for_cap() {
            line.push_str(&format!(
                " — {} requests waited for --max-in-flight (a server that batches may take more)",
                self.capped
            ));
        }
        line
    }

    fn measurements(&self, index: usize, base: &BTreeMap<String, String>) -> Vec<Measurement> {
        let mut parameters = base.clone();
        parameters.insert("step".into(), index.to_string());
        match self.in_flight {
            Some(n) => {
                parameters.insert("load".into(), "closed".into());
                parameters.insert("in_flight".into(), n.to_string());
            }
            None => {
                parameters.insert("load".into(), "open".into());
                parameters.insert("rate".into(), format!("{}", self.rate));
            }
        }
        parameters.insert("client_limited".into(), self.client_limited.to_string());
        parameters.insert("send_lag_bound_ms".into(), format!("{:.3}", self.lag_bound.as_secs_f64() * 1e3));
        parameters.insert("saturated".into(), self.saturated.to_string());
        let make = |case: &str,
                    unit: Unit,
                    stats: Option<Stats>,
                    histogram: Option<&Histogram<u64>>,
                    extra: &[(&str, String)]| {
            let mut parameters = parameters.clone();
            for (key, value) in extra {
                parameters.insert((*key).to_string(), value.clone());
            }
            let status = if stats.is_some() { MeasurementStatus::Ok } else { MeasurementStatus::Failed };
            Measurement {
                suite: Suite::Endpoint,
                case: case.into(),
                parameters,
                unit,
                status,
                reason: stats.is_none().then(|| self.failure_reason()),
                histogram: stats.and(histogram).and_then(encode),
                stats,
                floor: None,
            }
        };
        let single = |v: f64| Some(Stats::single(v));
        let latency = seconds_stats(&self.latency);
        let cv = latency.filter(|s| s.samples > 1 && s.mean > 0.0).map(|s| self.latency.stdev() * 1e-9 / s.mean);
        let mut out = vec![
            make(Case::EndpointLatency.as_str(), Unit::Seconds, latency, Some(&self.latency), &[]),
            make(Case::EndpointLatencyCv.as_str(), Unit::Ratio, cv.and_then(single), None, &[]),
            make(Case::EndpointOfferedRate.as_str(), Unit::RequestsPerSecond, single(self.offered), None, &[]),
            make(Case::EndpointAchievedRate.as_str(), Unit::RequestsPerSecond, single(self.achieved), None, &[]),
            make(Case::EndpointErrorRate.as_str(), Unit::Ratio, single(self.error_rate()), None, &[]),
            make("endpoint_client_cpu", Unit::Ratio, single(self.cpu), None, &[]),
        ];
        // A closed loop sends when the last answer came: no schedule to lag behind or cap.
        if self.in_flight.is_none() {
            out.push(make("endpoint_send_lag", Unit::Seconds, seconds_stats(&self.lag), Some(&self.lag), &[]));
            out.push(make("endpoint_capped", Unit::Count, single(self.capped as f64), None, &[]));
        }
        for (kind, count) in &self.errors {
            out.push(make("endpoint_errors", Unit::Count, single(*count as f64), None, &[("kind", kind.clone())]));
        }
        if let Some(goodput) = self.goodput {
            out.push(make("endpoint_goodput", Unit::RequestsPerSecond, single(goodput), None, &[]));
        }
        if let Some(llm) = &self.llm {
            let source = [("token_count_source", if llm.from_usage { "usage" } else { "chunks" }.to_string())];
            out.push(make("endpoint_ttft", Unit::Seconds, seconds_stats(&llm.ttft), Some(&llm.ttft), &[]));
            out.push(make("endpoint_itl", Unit::Seconds, seconds_stats(&llm.itl), Some(&llm.itl), &[]));
            out.push(make("endpoint_tpot", Unit::Seconds, seconds_stats(&llm.tpot), Some(&llm.tpot), &[]));
            out.push(make("endpoint_output_tokens", Unit::Count, single(llm.output_tokens as f64), None, &source));
            out.push(make("endpoint_input_tokens", Unit::Count, single(llm.input_tokens as f64), None, &source));
            // Each request's prompt length, and its variation: long prompts make the TTFT tail.
            if let Some(prompt) = scaled_stats(&llm.prompt, 1.0) {
                out.push(make("endpoint_prompt_tokens", Unit::Count, Some(prompt), Some(&llm.prompt), &[]));
                let cv = (prompt.samples > 1 && prompt.mean > 0.0).then(|| llm.prompt.stdev() / prompt.mean);
                out.push(make("endpoint_prompt_tokens_cv", Unit::Ratio, cv.and_then(single), None, &[]));
            }
            out.push(make(
                "endpoint_output_tokens_per_second",
                Unit::TokensPerSecond,
                single(llm.tokens_per_second),
                None,
                &source,
            ));
        }
        out
    }

    fn failure_reason(&self) -> String {
        if self.errors.is_empty() {
            return "no request completed".into();
        }
        let list: Vec<String> = self.errors.iter().map(|(k, n)| format!("{k} × {n}")).collect();
        clean(&format!("no request succeeded: {}", list.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_on_this_node_is_told_apart_and_cpu_lists_are_counted() {
        for local in ["http://127.0.0.1:8000/v2", "http://localhost:3000", "https://LOCALHOST", "http://[::1]:80/"] {
            assert!(on_this_node(local), "{local}");
        }
        for remote in ["http://10.0.0.7:8000", "https://inference.example.com", "http://[2001:db8::1]/", "nonsense"] {
            assert!(!on_this_node(remote), "{remote}");
        }
        assert_eq!(cpu_count("0-3,8,10-11\n"), Some(7));
        assert_eq!(cpu_count("0"), Some(1));
        assert_eq!(cpu_count("3-1"), None);
        assert_eq!(cpu_count("x"), None);
    }

    #[test]
    fn durations_rates_and_slos_parse_or_say_why() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").is_err() && parse_duration("fast").is_err());
        assert!(parse_rate("0").unwrap_err().contains("--rates"));
        assert!(parse_rate("NaN").is_err() && parse_rate("-3").is_err());
        let slo = Slo::parse("p99=200ms,ttft=1s").unwrap();
        assert_eq!(slo.latency, Some(Duration::from_millis(200)));
        assert_eq!(slo.ttft, Some(Duration::from_secs(1)));
        assert!(Slo::parse("p50=3ms").unwrap_err().contains("p99, ttft and itl"));
    }

    #[test]
    fn stored_urls_carry_no_secrets() {
        assert_eq!(public_url("http://user:pw@host:8080/v2/?key=sk-1").unwrap(), "http://host:8080/v2");
        assert!(public_url("ftp://host").is_err());
        assert_eq!(round2(0.1 / 0.0023), 43.0);
    }

    /// The bound the unit tests judge lag by unless they test the bound itself.
    const TEN_MS: LagBound = LagBound::Fixed(Duration::from_millis(10));

    fn outcome(offset: f64, latency: f64, result: Result<Option<protocol::Tokens>, Failure>) -> Outcome {
        Outcome {
            offset,
            lag: Duration::from_micros(50),
            capped: None,
            latency: Duration::from_secs_f64(latency),
            finished: offset + latency,
            result,
            first_token: None,
            gaps: Vec::new(),
        }
    }

    #[test]
    fn the_default_lag_bound_grows_with_the_latency_it_would_move() {
        // 20 sends a second for 4 s, one of them 15 ms late: trusted where the p99 it moves is
        // 400 ms (15 ms is under its twentieth), not where it is 3 ms, nor under a fixed 10 ms.
        let late = |latency: f64| {
            let mut outcomes: Vec<Outcome> = (0..80).map(|i| outcome(f64::from(i) * 0.05, latency, Ok(None))).collect();
            outcomes[40].lag = Duration::from_millis(15);
            load::Ran { outcomes, cpu: 0.01 }
        };
        let limited = |latency: f64, bound: LagBound| {
            Step::summarise(20.0, (0.0, 4.0), &late(latency), &Slo::default(), false, bound).client_limited
        };
        assert!(!limited(0.4, LagBound::Relative));
        assert!(limited(0.003, LagBound::Relative), "10 ms at least");
        assert!(limited(0.4, TEN_MS), "--max-send-lag is kept as given");
        // A service queueing for seconds does not excuse a send later than the 50 ms between
        // two sends at 20 a second (sends that late bunch up).
        let mut bunched = late(2.0);
        bunched.outcomes[40].lag = Duration::from_millis(60);
        let step = Step::summarise(20.0, (0.0, 4.0), &bunched, &Slo::default(), false, LagBound::Relative);
        assert!(step.client_limited, "{}", step.line());
        assert_eq!(LagBound::Relative.allowed(Duration::from_secs(1), 1.0), Duration::from_millis(50));
        assert_eq!(LagBound::Relative.allowed(Duration::ZERO, 1.0), DEFAULT_SEND_LAG);
        // Never past the gap between sends: at 50 a second, 20 ms, whatever the latency.
        assert_eq!(LagBound::Relative.allowed(Duration::from_secs(10), 50.0), Duration::from_millis(20));
        assert_eq!(LagBound::Relative.allowed(Duration::from_secs(10), 0.0), Duration::from_millis(500));
    }

    #[test]
    fn a_slow_service_that_keeps_up_achieves_its_offered_rate() {
        // 10 requests a second for 5 s, each taking 2 s: the service keeps up, just slowly.
        let outcomes = (0..50).map(|i| outcome(f64::from(i) * 0.1, 2.0, Ok(None))).collect();
        let ran = load::Ran { outcomes, cpu: 0.01 };
        let mut step = Step::summarise(10.0, (1.0, 5.0), &ran, &Slo::default(), false, TEN_MS);
        step.judge(None);
        assert!((step.offered - 10.0).abs() < 1e-9 && (step.achieved - 10.0).abs() < 0.5, "{}", step.line());
        assert!(!step.saturated && !step.client_limited, "{}", step.line());
        // Half of them failing is saturation, and the failures are counted by kind.
        let outcomes = (0..50)
            .map(|i| outcome(f64::from(i) * 0.1, 0.01, if i % 2 == 0 { Ok(None) } else { Err(Failure::Status(503)) }))
            .collect();
        let ran = load::Ran { outcomes, cpu: 0.01 };
        let mut step = Step::summarise(10.0, (1.0, 5.0), &ran, &Slo::default(), false, TEN_MS);
        step.judge(None);
        assert!(step.saturated && step.errors.get("http_503") == Some(&20), "{:?}", step.errors);
    }

    #[test]
    fn waiting_for_the_cap_is_saturation_when_the_server_queues_and_the_client_when_it_does_not() {
        let unloaded = {
            let outcomes = (0..50).map(|i| outcome(f64::from(i) * 0.1, 0.002, Ok(None))).collect();
            let ran = load::Ran { outcomes, cpu: 0.01 };
            Step::summarise(10.0, (1.0, 5.0), &ran, &Slo::default(), false, TEN_MS)
        };
        // Every request waited 100 ms for a place; at the server it then took `served`.
        let capped = |served: f64| {
            let outcomes = (0..500)
                .map(|i| {
                    let mut o = outcome(f64::from(i) * 0.01, 0.1 + served, Ok(None));
                    o.capped = Some(Duration::from_millis(100));
                    o
                })
                .collect();
            let ran = load::Ran { outcomes, cpu: 0.05 };
            let mut step = Step::summarise(100.0, (1.0, 5.0), &ran, &Slo::default(), false, TEN_MS);
            step.judge(Some(&unloaded));
            step
        };
        let queued = capped(0.5);
        assert!(queued.saturated && !queued.client_limited, "{}", queued.line());
        let quick = capped(0.002);
        assert!(quick.client_limited, "the cap set the pace: {}", quick.line());
        // Nothing to compare with: not trusted.
        let mut first = capped(0.5);
        first.client_limited = false;
        first.judge_cap(None);
        assert!(first.client_limited);
    }

    #[test]
    fn a_closed_loop_step_saturates_when_more_in_flight_buys_no_throughput() {
        // Back-to-back requests of 10 ms: 100/s with one in flight.
        let closed = |n: u32, latency: f64, per_second: f64| {
            let outcomes =
                (0..(per_second * 5.0) as usize).map(|i| outcome(i as f64 / per_second, latency, Ok(None))).collect();
            let ran = load::Ran { outcomes, cpu: 0.01 };
            let mut step = Step::summarise(0.0, (1.0, 5.0), &ran, &Slo::default(), false, TEN_MS);
            step.in_flight = Some(n);
            step
        };
        let mut one = closed(1, 0.010, 100.0);
        one.judge_closed(None, &[]);
        let mut four = closed(4, 0.011, 360.0);
        four.judge_closed(Some(&one), std::slice::from_ref(&one));
        assert!(!one.saturated && !four.saturated, "{} / {}", one.line(), four.line());
        // Sixteen in flight achieve no more than four: the service is full.
        let mut sixteen = closed(16, 0.044, 370.0);
        let earlier = [one, four];
        sixteen.judge_closed(Some(&earlier[0]), &earlier);
        assert!(sixteen.saturated && !sixteen.client_limited, "{}", sixteen.line());
        assert!(sixteen.line().starts_with("16 in flight, achieved 3"), "{}", sixteen.line());
        // Stored as closed, with no schedule's figures.
        let ms = sixteen.measurements(3, &BTreeMap::new());
        let latency = ms.iter().find(|m| m.case == Case::EndpointLatency.as_str()).unwrap();
        assert_eq!(latency.parameters.get("load").map(String::as_str), Some("closed"));
        assert_eq!(latency.parameters.get("in_flight").map(String::as_str), Some("16"));
        assert!(!latency.parameters.contains_key("rate"));
        assert!(!ms.iter().any(|m| m.case == "endpoint_send_lag" || m.case == "endpoint_capped"));
        let steps = model::plan::endpoint::steps(&ms);
        assert_eq!(steps[0].in_flight, Some(16), "the model reads it back as closed");
    }

    #[test]
    fn a_run_that_never_saturated_says_its_concurrency_is_a_lower_bound() {
        let step = |rate: f64, saturated: bool, client_limited: bool| {
            let outcomes = (0..50).map(|i| outcome(f64::from(i) / rate, 0.002, Ok(None))).collect();
            let ran = load::Ran { outcomes, cpu: 0.01 };
            let mut step = Step::summarise(rate, (0.0, 50.0 / rate), &ran, &Slo::default(), false, TEN_MS);
            (step.saturated, step.client_limited) = (saturated, client_limited);
            step
        };
        assert_eq!(unsaturated(&[], false), None, "nothing ran");
        let rates = [step(100.0, false, false), step(300.0, false, false)];
        let said = unsaturated(&rates, false).unwrap();
        assert!(said.contains("highest rate was 300.0/s") && said.contains("add higher rates"), "{said}");
        assert_eq!(unsaturated(&[step(100.0, false, false), step(900.0, true, false)], false), None);
        // A saturated step the client could not keep up with is no measurement of saturation.
        let behind = [step(100.0, false, false), step(200.0, true, true)];
        let said = unsaturated(&behind, true).unwrap();
        assert!(
            said.contains("stopped at step 2, where the client fell behind") && said.contains("more cores"),
            "{said}"
        );
        let said = unsaturated(&behind, false).unwrap();
        assert!(said.contains("(it fell behind at step 2)") && said.contains("more cores"), "{said}");
        let said = unsaturated(&rates, true).unwrap();
        assert!(said.contains("ran out of steps") && said.contains("higher rates with --rates"), "{said}");
    }

    #[test]
    fn histogram_statistics_are_in_seconds() {
        let mut h = histogram();
        for ms in 1..=100u64 {
            record(&mut h, Duration::from_millis(ms));
        }
        let stats = seconds_stats(&h).unwrap();
        assert_eq!(stats.samples, 100);
        assert!((stats.p50 - 0.050).abs() < 0.0001 && (stats.p99 - 0.099).abs() < 0.0001, "{stats:?}");
        assert!(encode(&h).is_some_and(|text| text.starts_with("HISTF")));
    }
}
