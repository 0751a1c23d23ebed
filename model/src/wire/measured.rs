//! From stored measurements to the planning model's inputs: the right-sizing candidates a
//! node's quantization run supports, and the per-transport figures of a transport run.
//! Pure, so the server (which loads the runs) and the tests share one reading of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::llm::fit::{self as llm_fit, LlmCheck};
use crate::plan::memory::Precision;
use crate::plan::rightsize::{Hardware, PerfPoint, Source};
use crate::plan::transport::TransportMeasurement;
use crate::units::{Bytes, Seconds, UsdPerHour};
use crate::wire::run::{Case, GpuInfo, Measurement, MeasurementStatus, Suite};
use crate::wire::view::NodeSummary;

/// z of the 99th percentile of a standard normal.
const Z99: f64 = 2.326_347_874_040_841;

/// Coefficient of variation of a log-normal whose median and 99th percentile are these:
/// σ = ln(p99 / p50) / z₀.₉₉, cv = √(e^{σ²} − 1). The agent stores percentiles, not the raw
/// samples; a service time's right tail is close to log-normal, so this is the honest estimate.
pub fn cv_from_percentiles(p50: f64, p99: f64) -> f64 {
    if !(p50 > 0.0 && p99 >= p50 && p99.is_finite()) {
        return 0.0;
    }
    let sigma = (p99 / p50).ln() / Z99;
    (sigma * sigma).exp_m1().sqrt()
}

fn ok(m: &Measurement) -> Option<crate::wire::run::Stats> {
    (m.status == MeasurementStatus::Ok).then_some(m.stats).flatten()
}

/// The right-sizing candidate one node's quantization run supports: per precision and batch
/// size, the reference model's measured batch latency, with the accuracy change of that
/// precision's most accurate variant (the fastest among equals). `None` when the run measured
/// no model latency. `service_time_scale` multiplies every service time (the served model's
/// cost relative to the agent's reference model); `hourly_usd` is what the node costs.
pub fn hardware_from_quant_run(
    node: &NodeSummary,
    run_id: &str,
    measurements: &[Measurement],
    hourly_usd: f64,
    service_time_scale: f64,
) -> Option<Hardware> {
    hardware_from_perf(node, run_id, quant_perf(measurements), hourly_usd, service_time_scale)
}

/// [`hardware_from_quant_run`] from the perf points [`quant_perf`] read of the run (as a
/// [`SuiteDigest`] keeps them).
pub fn hardware_from_perf(
    node: &NodeSummary,
    run_id: &str,
    perf: Vec<PerfPoint>,
    hourly_usd: f64,
    service_time_scale: f64,
) -> Option<Hardware> {
    if perf.is_empty() {
        return None;
    }
    let device_memory = node.gpus.first().map(|g| g.memory_bytes).unwrap_or(node.memory_bytes);
    Some(Hardware {
        instance_type: node.instance_type.clone().unwrap_or_else(|| node.hostname.clone()),
        hourly_usd: UsdPerHour(hourly_usd),
        device_memory_bytes: Bytes(device_memory as f64),
        source: Source::Measured { run_ids: vec![run_id.to_string()] },
        perf: perf
            .into_iter()
            .map(|p| PerfPoint { service_time_mean_s: Seconds(p.service_time_mean_s.0 * service_time_scale), ..p })
            .collect(),
        power_watts: None,
    })
}

/// A quantization run's perf points, in (precision, batch) order: per precision and batch
/// size, the measured batch latency of that precision's most accurate variant (the fastest
/// among equals), unscaled.
pub fn quant_perf(measurements: &[Measurement]) -> Vec<PerfPoint> {
    let mut accuracy: BTreeMap<&str, f64> = BTreeMap::new();
    for m in measurements.iter().filter(|m| m.suite == Suite::Quant && m.is(Case::MlpAccuracyDelta)) {
        if let (Some(stats), Some(variant)) = (ok(m), m.parameters.get("variant")) {
            accuracy.insert(variant, stats.mean);
        }
    }
    // (precision, batch) → (accuracy delta, perf point)
    let mut best: BTreeMap<(Precision, u32), (f64, PerfPoint)> = BTreeMap::new();
    for m in measurements.iter().filter(|m| m.suite == Suite::Quant && m.is(Case::MlpLatency)) {
        let Some(stats) = ok(m) else { continue };
        let p = &m.parameters;
        let (Some(variant), Some(precision), Some(batch)) = (
            p.get("variant"),
            p.get("precision").and_then(|s| Precision::parse(s)),
            p.get("batch").and_then(|b| b.parse::<u32>().ok()),
        ) else {
            continue;
        };
        let delta = accuracy.get(variant.as_str()).copied().unwrap_or(0.0);
        let point = PerfPoint {
            precision,
            batch_size: batch,
            service_time_mean_s: Seconds(stats.mean),
            service_time_cv: cv_from_percentiles(stats.p50, stats.p99),
            accuracy_delta: delta,
            concurrency: 1,
        };
        let better = match best.get(&(precision, batch)) {
            None => true,
            Some((d, q)) => delta > *d || (delta == *d && point.service_time_mean_s.0 < q.service_time_mean_s.0),
        };
        if better {
            best.insert((precision, batch), (delta, point));
        }
    }
    best.into_values().map(|(_, point)| point).collect()
}

/// Requests per second of the reference model at FP32, at its best measured batch size.
pub fn best_fp32_throughput(measurements: &[Measurement]) -> Option<f64> {
    measurements
        .iter()
        .filter(|m| m.suite == Suite::Quant && m.is(Case::MlpThroughput))
        .filter(|m| m.parameters.get("variant").map(String::as_str) == Some("fp32"))
        .filter_map(|m| ok(m).map(|s| s.mean))
        .max_by(f64::total_cmp)
}

/// Which reading of a run [`SuiteDigest`] holds, for the suites [`SUITE_DIGEST_VERSIONS`] does
/// not name. Raise a suite's figure there (or this, for all) whenever [`digest`] would answer
/// differently for its measurements: the server then recomputes that suite's stored digests,
/// and only those (an LLM run's fit is seconds of CPU; a change to the system suite's must not
/// refit them all).
pub const DIGEST_VERSION: i64 = 2;

/// Suites whose reading changed since [`DIGEST_VERSION`]: the system suite's power (3), the
/// endpoint suite's noise bands and ITL ranks (3), its LLM steps' TTFT and ITL bands (4), its
/// LLM fit with the gaps that hold a prompt counted from the prompts' side (5), its LLM fit
/// with prompts read in clusters and runs of prompt iterations (6), its LLM fit with the
/// requests waiting for a slot queued as in M/D/S (7), its LLM fit with prompt spreads shared
/// between nearby counts and one grouping of resident counts (8), and the gemm suite's GPU
/// power (3). Not raised when a streamed LLM run stopped getting the request-level
/// queue's bands (`endpoint_bands`): no page shows them for such a run, so a stored digest that
/// still holds them answers every page as a new one does, and raising it would refit every
/// LLM run stored.
pub const SUITE_DIGEST_VERSIONS: [(Suite, i64); 3] = [(Suite::System, 3), (Suite::Endpoint, 8), (Suite::Gemm, 3)];

/// The reading of `suite`'s runs this build stores.
pub fn digest_version(suite: Suite) -> i64 {
    SUITE_DIGEST_VERSIONS.iter().find(|(s, _)| *s == suite).map_or(DIGEST_VERSION, |(_, v)| *v)
}

/// [`digest_version`] as SQL over `column`, a column holding a suite's name.
pub fn digest_version_sql(column: &str) -> String {
    let cases: String =
        SUITE_DIGEST_VERSIONS.iter().map(|(suite, v)| format!(" WHEN '{}' THEN {v}", suite.as_str())).collect();
    format!("(CASE {column}{cases} ELSE {DIGEST_VERSION} END)")
}

/// What the pages read of one suite of one run, computed once when the run is stored so that
/// a page over the fleet reads a row per node instead of every node's measurements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteDigest {
    /// The suite's figure a node's trend follows ([`headline`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<Headline>,
    /// Quantization: [`quant_perf`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub perf: Vec<PerfPoint>,
    /// Quantization: [`best_fp32_throughput`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_throughput_rps: Option<f64>,
    /// Transport: [`transport_points`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transport: Vec<TransportPoint>,
    /// Endpoint, of an OpenAI-compatible server: [`llm_digest`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmDigest>,
    /// System and gemm: [`power_digest`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerDigest>,
    /// Endpoint: where each open-loop step's p99 would fall by chance were the service the
    /// calibrated queue ([`crate::plan::endpoint::bands`]); simulated once, where the LLM fit is,
    /// and not for a streamed LLM run (its page shows the LLM model's bands instead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_bands: Vec<crate::plan::endpoint::Band>,
}

/// The power a node drew in a run, where it could be read: in a `system` run its CPU packages
/// and their DRAM (RAPL), in a `gemm` run the GPU the suite used (NVML), not the disks or fans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerDigest {
    /// Idle, before the suite's work.
    pub idle_watts: Option<f64>,
    /// Under load: every core copying memory (system), FP16 GEMMs back to back (gemm).
    pub busy_watts: Option<f64>,
    /// What was counted, e.g. `package-0, package-0 dram` or `GPU 0 (NVIDIA H100 80GB HBM3)`.
    pub zones: String,
    /// A gemm run's: the NVIDIA GPUs NVML listed on the node, of which one was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
}

/// The most one GPU is taken to draw: above any datasheet's board power (1.4 kW for the
/// largest at the time of writing), so an upload past it is no GPU's reading.
pub const MAX_GPU_WATTS: f64 = 2_500.0;

/// The measured power of a `system` run (RAPL) or a `gemm` run (NVML, one GPU); `None` where it
/// was skipped or is not finite.
pub fn power_digest(suite: Suite, measurements: &[Measurement]) -> Option<PowerDigest> {
    let gpu = suite == Suite::Gemm;
    // A reading the agent would not make (none, past a replica's or a GPU's bound, or a gemm
    // run's not from NVML) is not a figure: an agent token may upload anything.
    let most = if gpu { MAX_GPU_WATTS } else { crate::plan::carbon::MAX_WATTS };
    let mut digest = PowerDigest { idle_watts: None, busy_watts: None, zones: String::new(), gpus: None };
    for m in measurements.iter().filter(|m| m.suite == suite && m.is(Case::Power)) {
        if gpu && m.parameters.get("source").map(String::as_str) != Some("nvml") {
            continue;
        }
        let Some(watts) = ok(m).map(|s| s.mean).filter(|w| *w > 0.0 && *w <= most) else { continue };
        match m.parameters.get("state").map(String::as_str) {
            Some("idle") => digest.idle_watts = Some(watts),
            Some("busy") => digest.busy_watts = Some(watts),
            _ => continue,
        }
        digest.zones = m.parameters.get("zones").cloned().unwrap_or_default();
        if gpu {
            // At most the inventory's bound.
            digest.gpus = m
                .parameters
                .get("gpus")
                .and_then(|g| g.parse::<u32>().ok())
                .filter(|g| (1..=crate::wire::validate::MAX_GPUS as u32).contains(g));
        }
    }
    (digest.idle_watts.is_some() || digest.busy_watts.is_some()).then_some(digest)
}

impl PowerDigest {
    /// A GPU node's power: each GPU of its inventory (`gpus`) at the draw of the one a gemm run
    /// measured (`gpu`, NVML), plus its CPU packages and DRAM where a system run (`cpu`, with
    /// its run id) read them (RAPL). Every GPU is taken to draw what the measured one did, idle
    /// and under load, so only on a node whose GPUs are all of the model measured and as many
    /// as NVML listed when it measured; else `None`, as one GPU's draw does not stand for the
    /// others.
    /// Without the CPUs' reading the figure is the GPUs' alone, and `zones` says so. Neither
    /// part counts power supplies, fans, disks or the GPUs' switches.
    pub fn of_gpu_node(gpu: &PowerDigest, gpus: &[GpuInfo], cpu: Option<(&PowerDigest, &str)>) -> Option<PowerDigest> {
        let first = gpus.first()?;
        // NVML's zone names the GPU it read, e.g. `GPU 0 (NVIDIA H100 80GB HBM3)`.
        let read_this_model = gpu.zones.ends_with(&format!("({})", first.name));
        if !read_this_model || gpu.gpus != Some(gpus.len() as u32) || gpus.iter().any(|g| g.name != first.name) {
            return None;
        }
        let n = gpus.len() as f64;
        // Past a replica's bound the sum is no figure (each part was within its own).
        let sum = |g: Option<f64>, c: Option<f64>| {
            let watts = match cpu {
                Some(_) => g? * n + c?,
                None => g? * n,
            };
            Some(watts).filter(|w| *w <= crate::plan::carbon::MAX_WATTS)
        };
        let each = if gpus.len() > 1 {
            format!("{} GPUs, each drawing what {} did", gpus.len(), gpu.zones)
        } else {
            gpu.zones.clone()
        };
        let cpus = match cpu {
            Some((cpu, run)) => format!("CPUs (RAPL, run {}): {}", &run[..8.min(run.len())], cpu.zones),
            None => "CPUs not measured (no RAPL)".into(),
        };
        let c = cpu.map(|(c, _)| c);
        Some(PowerDigest {
            idle_watts: sum(gpu.idle_watts, c.and_then(|c| c.idle_watts)),
            busy_watts: sum(gpu.busy_watts, c.and_then(|c| c.busy_watts)),
            zones: format!("GPUs (NVML): {each}; {cpus}"),
            gpus: Some(gpus.len() as u32),
        })
    }
}

/// A load test of an OpenAI-compatible server with the engine fitted on it and every step
/// predicted beside its measurement ([`crate::plan::llm::fit::check`]), computed once when the
/// run is stored: the run page shows it and the LLM page sizes with its engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmDigest {
    /// Scheme, host, port and path of the server.
    pub target: String,
    pub protocol: String,
    pub model: Option<String>,
    pub check: LlmCheck,
    /// Where each counted step's TTFT and ITL p99 would fall by chance were the server the
    /// fitted engine ([`crate::plan::llm::simulate::bands`]); empty in digests stored before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bands: Vec<crate::plan::llm::simulate::LlmBand>,
}

/// The fitted engine of an endpoint run of an OpenAI-compatible server, with the slots the
/// agent recorded ([`llm_fit::slots`]: the server's, or `--slots`), else [`llm_fit::ASSUMED_SLOTS`];
/// `None` for other protocols or a run with no trusted step.
pub fn llm_digest(measurements: &[Measurement]) -> Option<LlmDigest> {
    let first = measurements.iter().find(|m| m.suite == Suite::Endpoint)?;
    let param = |key: &str| first.parameters.get(key).cloned();
    let protocol = param("protocol")?;
    if !protocol.starts_with("openai") {
        return None;
    }
    let (slots, slots_from) = llm_fit::slots(measurements);
    let steps = llm_fit::steps(measurements);
    let mut check = llm_fit::check(&steps, slots)?;
    check.slots_from = slots_from;
    // Stored as JSON, where a non-finite number does not survive (it is written as null): a
    // fit of hostile figures that is not every number finite is not kept.
    if !check.is_finite() {
        return None;
    }
    let bands = crate::plan::llm::simulate::bands(&check, &steps);
    Some(LlmDigest { target: param("target").unwrap_or_default(), protocol, model: param("model"), check, bands })
}

/// A suite's headline figure: what it is, its unit and its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub name: String,
    pub unit: String,
    pub value: f64,
}

/// The digest of `suite` in the run `run_id`.
pub fn digest(suite: Suite, run_id: &str, measurements: &[Measurement]) -> SuiteDigest {
    digest_with(suite, run_id, measurements, true)
}

/// [`digest`], with the LLM fit of an endpoint run ([`llm_digest`], up to seconds of CPU) only
/// where `fit_llm`: a page over many stale runs wants their headlines, not their fits.
pub fn digest_with(suite: Suite, run_id: &str, measurements: &[Measurement], fit_llm: bool) -> SuiteDigest {
    let headline = headline(suite, measurements).map(|(name, unit, value)| Headline { name, unit, value });
    match suite {
        Suite::Quant => SuiteDigest {
            headline,
            perf: quant_perf(measurements),
            best_throughput_rps: best_fp32_throughput(measurements),
            ..SuiteDigest::default()
        },
        Suite::Transport => {
            SuiteDigest { headline, transport: transport_points(run_id, measurements), ..SuiteDigest::default() }
        }
        Suite::Endpoint => {
            // A streamed LLM run's page sets the LLM model beside its steps, not the request-level
            // queue, whose bands would be simulated for nothing.
            let queue = crate::plan::llm::fit::steps(measurements).is_empty();
            SuiteDigest {
                headline,
                llm: if fit_llm { llm_digest(measurements) } else { None },
                endpoint_bands: if fit_llm && queue {
                    crate::plan::endpoint::bands(&crate::plan::endpoint::steps(measurements))
                } else {
                    Vec::new()
                },
                ..SuiteDigest::default()
            }
        }
        Suite::System | Suite::Gemm => {
            SuiteDigest { headline, power: power_digest(suite, measurements), ..SuiteDigest::default() }
        }
        _ => SuiteDigest { headline, ..SuiteDigest::default() },
    }
}

/// One transport at one payload size and placement, from a transport run (closed loop, one
/// request in flight).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportPoint {
    /// `http_json`, `grpc_protobuf_packed`, `shared_memory (busy_poll)`, …
    pub transport: String,
    pub payload_bytes: u64,
    /// `same_core`, `different_cores` or `cross_node`.
    pub placement: String,
    pub latency_p50_s: f64,
    pub latency_p99_s: f64,
    /// Client plus server CPU time per request.
    pub cpu_seconds_per_request: f64,
    /// The client's share of it.
    pub client_cpu_seconds_per_request: f64,
    /// The physical floor this round trip was measured against, if any.
    pub floor_name: Option<String>,
    pub floor_s: Option<f64>,
    pub run_id: String,
}

impl TransportPoint {
    /// Shared memory and Unix sockets need both ends on one node.
    pub fn works_across_nodes(&self) -> bool {
        !(self.transport.starts_with("shared_memory") || self.transport.starts_with("unix_socket"))
    }

    pub fn is_cross_node(&self) -> bool {
        self.placement == "cross_node"
    }

    /// A busy-polling server spins whether or not requests come.
    pub fn busy_polls(&self) -> bool {
        self.transport.contains("busy_poll")
    }

    /// The model's view of this point. A busy-polling server costs a whole core at any rate
    /// (its measured per-request CPU is part of that core), the client its measured share.
    pub fn to_model(&self) -> TransportMeasurement {
        let (cpu, spinning) = if self.busy_polls() {
            (self.client_cpu_seconds_per_request, 1.0)
        } else {
            (self.cpu_seconds_per_request, 0.0)
        };
        TransportMeasurement {
            transport: self.transport.clone(),
            cpu_seconds_per_request: Seconds(cpu),
            latency_p99_s: Seconds(self.latency_p99_s),
            works_across_nodes: self.works_across_nodes(),
            measured_placement: Some(self.placement.clone()),
            spinning_cores: spinning,
        }
    }
}

/// Every closed-loop round trip of a transport run with its CPU cost.
pub fn transport_points(run_id: &str, measurements: &[Measurement]) -> Vec<TransportPoint> {
    type Key = (String, u64, String);
    let key = |m: &Measurement| -> Option<Key> {
        let p = &m.parameters;
        if p.get("load").map(String::as_str) != Some("closed") || p.get("in_flight").map(String::as_str) != Some("1") {
            return None;
        }
        let transport = match p.get("wait") {
            Some(wait) => format!("{} ({wait})", p.get("transport")?),
            None => p.get("transport")?.clone(),
        };
        Some((transport, p.get("payload_bytes")?.parse().ok()?, p.get("placement")?.clone()))
    };
    // (client, server) CPU seconds per request.
    let mut cpu: BTreeMap<Key, (f64, f64)> = BTreeMap::new();
    for m in measurements.iter().filter(|m| m.suite == Suite::Transport && m.is(Case::CpuPerRequest)) {
        if let (Some(k), Some(stats)) = (key(m), ok(m)) {
            let entry = cpu.entry(k).or_default();
            match m.parameters.get("side").map(String::as_str) {
                Some("client") => entry.0 += stats.mean,
                _ => entry.1 += stats.mean,
            }
        }
    }
    let mut points: Vec<TransportPoint> = measurements
        .iter()
        .filter(|m| m.suite == Suite::Transport && m.is(Case::RoundTrip))
        .filter_map(|m| {
            let k = key(m)?;
            let stats = ok(m)?;
            let (client, server) = cpu.get(&k).copied().unwrap_or((f64::NAN, f64::NAN));
            Some(TransportPoint {
                cpu_seconds_per_request: client + server,
                client_cpu_seconds_per_request: client,
                transport: k.0,
                payload_bytes: k.1,
                placement: k.2,
                latency_p50_s: stats.p50,
                latency_p99_s: stats.p99,
                floor_name: m.floor.as_ref().map(|f| f.name.clone()),
                floor_s: m.floor.as_ref().map(|f| f.value),
                run_id: run_id.to_string(),
            })
        })
        .filter(|p| p.cpu_seconds_per_request.is_finite())
        .collect();
    points.sort_by(|a, b| {
        (&a.transport, &a.placement, a.payload_bytes).cmp(&(&b.transport, &b.placement, b.payload_bytes))
    });
    points
}

/// How a `memcpy` measurement ranks as a node's DRAM bandwidth: the most threads, then the
/// largest buffer. The headline is the highest-ranked; the store picks a node's the same way.
pub fn memcpy_rank(parameters: &BTreeMap<String, String>) -> (u64, u64) {
    let number = |key: &str| parameters.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (number("threads").max(1), number("bytes"))
}

/// The figure that stands for a suite in a run, to follow across a node's runs: (name, unit,
/// value). System: memcpy bandwidth at the most threads and largest buffer; transport: HTTP+JSON
/// median round trip at the smallest payload with the ends on different cores; quant: FP32
/// reference-model latency at the largest batch.
pub fn headline(suite: Suite, measurements: &[Measurement]) -> Option<(String, String, f64)> {
    let param = |m: &Measurement, k: &str| m.parameters.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let of_suite = || measurements.iter().filter(move |m| m.suite == suite).filter(|m| ok(m).is_some());
    let pick = |case: Case, filter: &dyn Fn(&Measurement) -> bool, key: &dyn Fn(&Measurement) -> f64| {
        of_suite().filter(|m| m.is(case) && filter(m)).max_by(|a, b| key(a).total_cmp(&key(b))).and_then(ok)
    };
    let is = |m: &Measurement, k: &str, v: &str| m.parameters.get(k).map(String::as_str) == Some(v);
    match suite {
        Suite::System => of_suite()
            .filter(|m| m.is(Case::Memcpy))
            .max_by_key(|m| memcpy_rank(&m.parameters))
            .and_then(ok)
            .map(|s| ("memcpy bandwidth".into(), "bytes_per_second".into(), s.p50)),
        Suite::Transport => pick(
            Case::RoundTrip,
            &|m| is(m, "transport", "http_json") && is(m, "load", "closed") && is(m, "placement", "different_cores"),
            &|m| -param(m, "payload_bytes"),
        )
        .map(|s| ("HTTP+JSON round trip (median)".into(), "seconds".into(), s.p50)),
        Suite::Quant => pick(Case::MlpLatency, &|m| is(m, "variant", "fp32"), &|m| param(m, "batch"))
            .map(|s| ("FP32 reference-model batch latency".into(), "seconds".into(), s.p50)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::run::{Floor, Stats, Unit};

    fn m(suite: Suite, case: &str, params: &[(&str, &str)], mean: f64, p50: f64, p99: f64) -> Measurement {
        Measurement {
            suite,
            case: case.into(),
            parameters: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            unit: Unit::Seconds,
            status: MeasurementStatus::Ok,
            reason: None,
            stats: Some(Stats { mean, p50, p99, ..Stats::single(mean) }),
            floor: None,
            histogram: None,
        }
    }

    fn node() -> NodeSummary {
        NodeSummary {
            node_id: "n".into(),
            hostname: "host-a".into(),
            cpu_model: "cpu".into(),
            cpu_cores: 8,
            memory_bytes: 1 << 30,
            kernel: "k".into(),
            instance_type: None,
            hourly_usd: None,
            gpus: vec![],
            first_seen_ms: 0,
            last_seen_ms: 0,
            run_count: 1,
            memcpy_bytes_per_second: None,
        }
    }

    #[test]
    fn a_gemm_runs_power_is_its_gpus_and_names_how_many_the_node_has() {
        let power = |state: &str, watts: f64, gpus: &str| {
            let params = [("source", "nvml"), ("zones", "GPU 0 (NVIDIA H100)"), ("state", state), ("gpus", gpus)];
            Measurement { unit: Unit::Watts, ..m(Suite::Gemm, "power", &params, watts, watts, watts) }
        };
        let run =
            [power("idle", 71.0, "8"), power("busy", 690.0, "8"), m(Suite::Gemm, "cublas_gemm", &[], 1e14, 1e14, 1e14)];
        let d = digest(Suite::Gemm, "r", &run).power.unwrap();
        assert_eq!((d.idle_watts, d.busy_watts, d.gpus), (Some(71.0), Some(690.0), Some(8)));
        assert_eq!(d.zones, "GPU 0 (NVIDIA H100)");
        // A count no inventory would hold is not kept, nor a figure no GPU draws, nor one not
        // read through NVML.
        for gpus in ["0", "65", "-1", "many"] {
            assert_eq!(power_digest(Suite::Gemm, &[power("busy", 690.0, gpus)]).unwrap().gpus, None, "{gpus}");
        }
        assert_eq!(power_digest(Suite::Gemm, &[power("busy", 2_600.0, "8")]), None);
        let mut rapl = power("busy", 300.0, "8");
        rapl.parameters.insert("source".into(), "rapl".into());
        assert_eq!(power_digest(Suite::Gemm, &[rapl]), None);
    }

    #[test]
    fn a_gpu_nodes_power_is_every_gpu_at_the_measured_ones_draw_and_its_cpus() {
        let gpu = PowerDigest {
            idle_watts: Some(70.0),
            busy_watts: Some(690.0),
            zones: "GPU 0 (H100)".into(),
            gpus: Some(8),
        };
        let cpu =
            PowerDigest { idle_watts: Some(100.0), busy_watts: Some(400.0), zones: "package-0".into(), gpus: None };
        let h100 = |n: usize| {
            let one = GpuInfo {
                name: "H100".into(),
                memory_bytes: 80 << 30,
                driver_version: None,
                cuda_version: None,
                pcie_generation: None,
                pcie_width: None,
            };
            vec![one; n]
        };
        let node = PowerDigest::of_gpu_node(&gpu, &h100(8), Some((&cpu, "5e1f0000-aaaa"))).unwrap();
        assert_eq!((node.idle_watts, node.busy_watts, node.gpus), (Some(660.0), Some(5920.0), Some(8)));
        assert_eq!(
            node.zones,
            "GPUs (NVML): 8 GPUs, each drawing what GPU 0 (H100) did; CPUs (RAPL, run 5e1f0000): package-0"
        );
        let one = PowerDigest { gpus: Some(1), ..gpu.clone() };
        let alone = PowerDigest::of_gpu_node(&one, &h100(1), None).unwrap();
        assert_eq!((alone.idle_watts, alone.busy_watts), (Some(70.0), Some(690.0)));
        assert_eq!(alone.zones, "GPUs (NVML): GPU 0 (H100); CPUs not measured (no RAPL)");
        // A CPU reading without its busy half leaves the node's busy figure unknown rather than
        // the GPUs' alone labelled as the node's.
        let idle_cpu = PowerDigest { busy_watts: None, ..cpu };
        assert_eq!(PowerDigest::of_gpu_node(&gpu, &h100(8), Some((&idle_cpu, "r"))).unwrap().busy_watts, None);
        // One GPU's draw stands for the others only on a node of one model, as many as NVML
        // listed when it was measured.
        assert_eq!(PowerDigest::of_gpu_node(&gpu, &h100(4), None), None);
        let mut mixed = h100(8);
        mixed[7].name = "NVIDIA T400".into();
        assert_eq!(PowerDigest::of_gpu_node(&gpu, &mixed, None), None);
        assert_eq!(PowerDigest::of_gpu_node(&gpu, &[], None), None);
        // Nor for GPUs of another model than the one read (swapped since).
        let mut swapped = h100(8);
        swapped.iter_mut().for_each(|g| g.name = "H200".into());
        assert_eq!(PowerDigest::of_gpu_node(&gpu, &swapped, None), None);
        // 64 GPUs at an uploaded 2 kW each are past any replica's power.
        let hostile = PowerDigest { busy_watts: Some(2_000.0), gpus: Some(64), ..gpu.clone() };
        assert_eq!(PowerDigest::of_gpu_node(&hostile, &h100(64), None).unwrap().busy_watts, None);
    }

    #[test]
    fn a_system_runs_power_is_its_idle_and_busy_reads() {
        let zones = [("source", "rapl"), ("zones", "package-0")];
        let power = |state: &str, watts: f64| {
            let mut p = m(Suite::System, "power", &[zones[0], zones[1], ("state", state)], watts, watts, watts);
            p.unit = Unit::Watts;
            p
        };
        let skipped = Measurement {
            status: MeasurementStatus::Skipped,
            stats: None,
            reason: Some("no RAPL".into()),
            ..power("idle", 0.0)
        };
        let run = [power("idle", 11.5), power("busy", 48.0), m(Suite::System, "memcpy", &[], 1e9, 1e9, 1e9)];
        let d = power_digest(Suite::System, &run).unwrap();
        assert_eq!((d.idle_watts, d.busy_watts, d.zones.as_str(), d.gpus), (Some(11.5), Some(48.0), "package-0", None));
        assert_eq!(digest(Suite::System, "r", &run).power, Some(d));
        assert_eq!(power_digest(Suite::System, &[skipped]), None, "a node without RAPL has no power");
        assert_eq!(power_digest(Suite::System, &[power("busy", f64::NAN), power("warm", 3.0)]), None);
        assert_eq!(power_digest(Suite::System, &[power("busy", 0.0), power("idle", 1e13)]), None, "not plausible");
        assert_eq!(power_digest(Suite::Gemm, &run), None, "another suite's power is not this one's");
        // Only the system suite's digests are read anew for it (and the endpoint suite's for
        // its noise bands and its LLM steps' bands); the others keep theirs.
        assert_eq!(
            (digest_version(Suite::System), digest_version(Suite::Endpoint), digest_version(Suite::Gemm)),
            (3, 8, 3)
        );
        assert_eq!(digest_version(Suite::Quant), DIGEST_VERSION);
        assert_eq!(
            digest_version_sql("suite"),
            "(CASE suite WHEN 'system' THEN 3 WHEN 'endpoint' THEN 8 WHEN 'gemm' THEN 3 ELSE 2 END)"
        );
    }

    #[test]
    fn cv_of_a_constant_is_zero_and_grows_with_the_tail() {
        assert_eq!(cv_from_percentiles(1.0, 1.0), 0.0);
        let narrow = cv_from_percentiles(1.0, 1.1);
        let wide = cv_from_percentiles(1.0, 3.0);
        assert!(narrow > 0.0 && narrow < wide, "{narrow} {wide}");
        // σ = 1 gives cv = √(e − 1).
        assert!((cv_from_percentiles(1.0, Z99.exp()) - (1f64.exp() - 1.0).sqrt()).abs() < 1e-12);
        assert_eq!(cv_from_percentiles(0.0, 1.0), 0.0);
    }

    #[test]
    fn quant_run_keeps_the_most_accurate_variant_of_each_precision() {
        let q = Suite::Quant;
        let ms = vec![
            m(q, "mlp_accuracy_delta", &[("variant", "int8_a")], -0.01, -0.01, -0.01),
            m(q, "mlp_accuracy_delta", &[("variant", "int8_b")], 0.0, 0.0, 0.0),
            m(q, "mlp_latency", &[("variant", "int8_a"), ("precision", "int8"), ("batch", "1")], 1e-6, 1e-6, 2e-6),
            m(q, "mlp_latency", &[("variant", "int8_b"), ("precision", "int8"), ("batch", "1")], 3e-6, 3e-6, 4e-6),
            m(q, "mlp_latency", &[("variant", "fp32"), ("precision", "fp32"), ("batch", "64")], 5e-5, 5e-5, 6e-5),
        ];
        let hw = hardware_from_quant_run(&node(), "run-1", &ms, 2.0, 10.0).expect("measured");
        assert_eq!(hw.instance_type, "host-a");
        assert_eq!(hw.source, Source::Measured { run_ids: vec!["run-1".into()] });
        assert_eq!(hw.perf.len(), 2);
        let int8 = hw.perf.iter().find(|p| p.precision == Precision::Int8).unwrap();
        assert_eq!(int8.accuracy_delta, 0.0, "the lossless variant wins over the faster lossy one");
        assert!((int8.service_time_mean_s.0 - 3e-5).abs() < 1e-15, "scaled by 10");
        assert!(hardware_from_quant_run(&node(), "r", &ms[..2], 2.0, 1.0).is_none());
    }

    #[test]
    fn headline_takes_the_widest_memcpy() {
        let s = Suite::System;
        let ms = vec![
            m(s, "memcpy", &[("threads", "1"), ("bytes", "1024")], 1.0, 1.0, 1.0),
            m(s, "memcpy", &[("threads", "2"), ("bytes", "512")], 2.0, 2.0, 2.0),
            m(s, "memcpy", &[("threads", "1"), ("bytes", "4096")], 3.0, 3.0, 3.0),
        ];
        assert_eq!(headline(s, &ms), Some(("memcpy bandwidth".into(), "bytes_per_second".into(), 2.0)));
        assert_eq!(headline(Suite::Quant, &ms), None);
    }

    #[test]
    fn transport_points_add_client_and_server_cpu() {
        let t = Suite::Transport;
        let base = [("load", "closed"), ("in_flight", "1"), ("payload_bytes", "1024"), ("placement", "same_core")];
        let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
            base.iter().chain(extra.iter()).copied().collect()
        };
        let mut rt = m(t, "round_trip", &with(&[("transport", "shared_memory"), ("wait", "futex")]), 5e-6, 4e-6, 9e-6);
        rt.floor = Some(Floor { name: "futex_ping_pong".into(), value: 3e-6 });
        let ms = vec![
            rt,
            m(
                t,
                "cpu_per_request",
                &with(&[("transport", "shared_memory"), ("wait", "futex"), ("side", "client")]),
                2e-6,
                0.0,
                0.0,
            ),
            m(
                t,
                "cpu_per_request",
                &with(&[("transport", "shared_memory"), ("wait", "futex"), ("side", "server")]),
                3e-6,
                0.0,
                0.0,
            ),
            // Open-loop rows are not the closed-loop figure.
            m(
                t,
                "round_trip",
                &[("load", "open"), ("payload_bytes", "1024"), ("placement", "same_core"), ("transport", "http_json")],
                1.0,
                1.0,
                1.0,
            ),
        ];
        let points = transport_points("r", &ms);
        assert_eq!(points.len(), 1);
        let p = &points[0];
        assert_eq!(p.transport, "shared_memory (futex)");
        assert!((p.cpu_seconds_per_request - 5e-6).abs() < 1e-18);
        assert_eq!(p.latency_p99_s, 9e-6);
        assert_eq!(p.floor_s, Some(3e-6));
        assert!(!p.works_across_nodes());
        assert!(!p.to_model().works_across_nodes);
        assert_eq!(p.client_cpu_seconds_per_request, 2e-6);
        assert_eq!(p.to_model().spinning_cores, 0.0);
        let busy = TransportPoint { transport: "shared_memory (busy_poll)".into(), ..p.clone() };
        let model = busy.to_model();
        assert_eq!(
            (model.spinning_cores, model.cpu_seconds_per_request.0),
            (1.0, 2e-6),
            "the server's core, the client's share"
        );
    }
}
