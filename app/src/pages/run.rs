//! One run: per suite, the charts that fit its figures, the same figure across the node's runs,
//! and every measurement in a table.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use model::format::{bytes, bytes_per_second, points as accuracy_points, seconds, utc_minute};
use model::wire::measured::transport_points;
use model::{Case, Measurement, MeasurementStatus, Suite, Unit, plan::endpoint};

use crate::components::charts::{LineChart, Rule as ChartRule, Series, line_chart};
use crate::data::{RunView, TrendPoint, run_page};

/// Bandwidth against transfer size: memcpy per thread count (system), or host↔GPU copies per
/// host memory and direction (transfer), with the limit they were measured against.
pub fn bandwidth_chart(ms: &[Measurement], suite: Suite) -> Option<String> {
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut limits = Vec::new();
    for m in
        ms.iter().filter(|m| m.suite == suite && m.unit == Unit::BytesPerSecond && m.status == MeasurementStatus::Ok)
    {
        let (Some(stats), Some(size)) = (m.stats, m.parameters.get("bytes").and_then(|b| b.parse::<f64>().ok())) else {
            continue;
        };
        let p = |k: &str| m.parameters.get(k).cloned().unwrap_or_default();
        let name = match suite {
            Suite::Transfer if p("copies") != "1" => continue,
            Suite::Transfer => format!("{} {}", p("memory").replace('_', " "), p("direction")),
            _ => {
                let threads: u32 = p("threads").parse().unwrap_or(1);
                format!("memcpy, {threads} thread{}", if threads == 1 { "" } else { "s" })
            }
        };
        lines.entry(name).or_default().push((size, stats.p50));
        if let Some(f) = &m.floor {
            limits.push(ChartRule { at: f.value, label: f.name.replace('_', " ") });
        }
    }
    if lines.is_empty() {
        return None;
    }
    let title =
        if suite == Suite::Transfer { "Host↔GPU copy bandwidth vs size" } else { "Bandwidth vs transfer size" };
    let mut chart = LineChart::new(title, "transfer size (log)", "bandwidth (median)");
    chart.x_log = true;
    chart.x_format = bytes;
    chart.y_format = bytes_per_second;
    for (name, mut pts) in lines {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.series.push(Series::new(name, pts));
    }
    limits.dedup_by(|a, b| a.label == b.label);
    chart.y_rules = limits;
    Some(line_chart(&chart))
}

/// The latency distribution of each transport's closed-loop round trip at one payload size, as
/// the cumulative fraction at its measured percentiles.
pub fn cdf_chart(ms: &[Measurement]) -> Option<String> {
    let rows: Vec<&Measurement> = ms
        .iter()
        .filter(|m| m.suite == Suite::Transport && m.is(Case::RoundTrip) && m.status == MeasurementStatus::Ok)
        .filter(|m| m.parameters.get("load").map(String::as_str) == Some("closed"))
        .collect();
    let payload = rows.iter().filter_map(|m| m.parameters.get("payload_bytes")?.parse::<u64>().ok()).min()?;
    let placement = ["different_cores", "cross_node", "same_core"]
        .into_iter()
        .find(|p| rows.iter().any(|m| m.parameters.get("placement").map(String::as_str) == Some(*p)))?;
    let mut chart = LineChart::new(
        format!("Round-trip latency CDF, {} payload, {}", bytes(payload as f64), placement.replace('_', " ")),
        "round trip (log)",
        "fraction of requests",
    );
    chart.x_log = true;
    chart.x_format = seconds;
    chart.y_format = |v| format!("{:.0} %", v * 100.0);
    for m in rows {
        let p = &m.parameters;
        if p.get("payload_bytes").and_then(|b| b.parse::<u64>().ok()) != Some(payload)
            || p.get("placement").map(String::as_str) != Some(placement)
        {
            continue;
        }
        let Some(s) = m.stats else { continue };
        let name = match p.get("wait") {
            Some(w) => format!("{} ({w})", p.get("transport").cloned().unwrap_or_default()),
            None => p.get("transport").cloned().unwrap_or_default(),
        };
        chart.series.push(Series::new(name, vec![(s.p50, 0.5), (s.p90, 0.9), (s.p99, 0.99), (s.p999, 0.999)]));
    }
    Some(line_chart(&chart))
}

/// P99 round trip against payload size per transport, with the floors measured beside them.
pub fn payload_chart(run_id: &str, ms: &[Measurement], placement: &str) -> Option<String> {
    let points: Vec<_> = transport_points(run_id, ms).into_iter().filter(|p| p.placement == placement).collect();
    if points.is_empty() {
        return None;
    }
    Some(crate::pages::transport::latency_chart(&points, placement))
}

/// Each quantized variant's batch latency against its accuracy, its weight memory in the legend.
pub fn precision_chart(ms: &[Measurement]) -> Option<String> {
    let value = |case: Case, variant: &str, batch: Option<&str>| {
        ms.iter()
            .find(|m| {
                m.is(case)
                    && m.parameters.get("variant").map(String::as_str) == Some(variant)
                    && batch.is_none_or(|b| m.parameters.get("batch").map(String::as_str) == Some(b))
            })
            .and_then(|m| m.stats)
            .map(|s| s.p50)
    };
    let batch = ms
        .iter()
        .filter(|m| m.is(Case::MlpLatency))
        .filter_map(|m| m.parameters.get("batch")?.parse::<u32>().ok())
        .max()?
        .to_string();
    let mut variants: Vec<&str> = ms
        .iter()
        .filter(|m| m.is(Case::MlpAccuracy))
        .filter_map(|m| m.parameters.get("variant").map(String::as_str))
        .collect();
    variants.dedup();
    let mut chart = LineChart::new(
        format!("Precision trade-off: latency at batch {batch} vs accuracy"),
        format!("latency of a batch of {batch} (median)"),
        "top-1 accuracy",
    );
    chart.points_only = true;
    chart.y_from_zero = false;
    chart.x_format = seconds;
    chart.y_format = |v| format!("{:.1} %", v * 100.0);
    for v in variants {
        if let (Some(lat), Some(acc)) = (value(Case::MlpLatency, v, Some(&batch)), value(Case::MlpAccuracy, v, None)) {
            let memory = value(Case::MlpWeightBytes, v, None).map(bytes).unwrap_or_default();
            chart.series.push(Series::new(format!("{v} ({memory})"), vec![(lat, acc)]));
        }
    }
    if chart.series.is_empty() {
        return None;
    }
    Some(line_chart(&chart))
}

/// Measured and predicted p99 latency against the offered rate of an open-loop endpoint run,
/// or against the requests in flight of a closed-loop one.
pub fn endpoint_chart(check: &endpoint::Check) -> Option<String> {
    let closed = check.closed_loop();
    let load = |p: &endpoint::Prediction| if closed { p.in_flight.map_or(0.0, f64::from) } else { p.offered };
    // In order of load: a sweep's last step sits between two earlier ones.
    let mut by_load: Vec<&endpoint::Prediction> = check.predictions.iter().collect();
    by_load.sort_by(|a, b| load(a).total_cmp(&load(b)));
    let measured: Vec<(f64, f64)> = by_load.iter().filter_map(|p| Some((load(p), p.measured_p99?))).collect();
    if measured.len() < 2 {
        return None;
    }
    let predicted: Vec<(f64, f64)> = by_load.iter().filter_map(|p| Some((load(p), p.p99?))).collect();
    let c = check.calibration.concurrency;
    let (title, x_label, model) = if closed {
        (
            "P99 latency vs requests in flight: measured and the closed-loop model",
            "requests in flight (log)",
            format!("closed loop, c = {c}"),
        )
    } else {
        ("P99 latency vs offered load: measured and M/G/c", "offered requests per second (log)", format!("M/G/{c}"))
    };
    let mut chart = LineChart::new(title, x_label, "P99 latency (log)");
    chart.x_log = true;
    chart.y_log = true;
    chart.x_format = if closed { |v| format!("{v:.0}") } else { |v| format!("{v:.0}/s") };
    chart.y_format = seconds;
    chart.series.push(Series::new("measured P99", measured));
    if !predicted.is_empty() {
        chart.series.push(Series::new(format!("predicted P99 ({model})"), predicted));
    }
    if closed {
        chart.x_rules.push(ChartRule { at: f64::from(c), label: format!("{c} served at once") });
    } else {
        chart
            .x_rules
            .push(ChartRule { at: check.calibration.saturation_rps, label: "highest throughput achieved".into() });
    }
    Some(line_chart(&chart))
}

pub fn percent(error: Option<f64>) -> String {
    error.map(|e| format!("{:+.0} %", e * 100.0)).unwrap_or_else(|| "–".into())
}

/// An endpoint run: the calibration, and each step's measurement beside the model's prediction.
#[component]
fn EndpointCheck(steps: Vec<endpoint::Step>, bands: Vec<endpoint::Band>) -> impl IntoView {
    let Some(check) = endpoint::check(&steps) else {
        return view! { <p class="error" data-out="endpoint-check">"No step of this load test had a successful request the client could trust, so the model was not calibrated."</p> }.into_any();
    };
    let c = check.calibration;
    let concurrency = if c.saturation_measured {
        format!(
            "{} request{} at once (from {:.1} req/s at saturation)",
            c.concurrency,
            if c.concurrency == 1 { "" } else { "s" },
            c.saturation_rps
        )
    } else {
        format!(
            "at least {} (no step saturated; {:.1} req/s is the most it was asked for and served)",
            c.concurrency, c.saturation_rps
        )
    };
    let closed = check.closed_loop();
    let counted = check.predictions.iter().filter(|p| p.counted).count();
    let error = match (check.mape_p99, check.worst_p99) {
        (Some(mape), Some(worst)) if closed => format!(
            "The closed-loop model's P99 is off by {:.0} % on average over the {counted} other steps (worst {:.0} %).",
            mape * 100.0,
            worst * 100.0
        ),
        (Some(mape), Some(worst)) => format!(
            "The model's P99 is off by {:.0} % on average over the {counted} steps below {:.0} % utilisation (worst {:.0} %).{}",
            mape * 100.0,
            endpoint::COUNTED_BELOW_UTILIZATION * 100.0,
            worst * 100.0,
            if c.saturation_measured {
                ""
            } else {
                " No step saturated, so the concurrency is only a lower bound, and the utilisations and predicted P99s upper bounds: sweep to saturation (--sweep) before reading this error as the model's."
            }
        ),
        _ if closed => "Only the calibration step ran without errors, so the model's error is not known yet: load it at more concurrencies.".into(),
        _ => "No step besides the calibration step ran below 80 % utilisation, so the model's error is not known yet: sweep at more rates.".into(),
    };
    // Where each step's P99 would fall by chance were the service the calibrated queue.
    let band = |step: u32| bands.iter().find(|b| b.step == step).copied();
    let side = |p: &endpoint::Prediction| Some(band(p.step)?.side(p.measured_p99?));
    let judged: Vec<&str> = check.predictions.iter().filter(|p| p.counted).filter_map(side).collect();
    let repeats = endpoint::repeats(&steps, &c);
    let outside = judged.iter().filter(|&&s| s != "inside").count();
    let noise = match (judged.len(), outside) {
        (0, _) => None,
        (n, 0) => Some(format!(
            "Every one of the {n} steps counted has its P99 inside the band it would fall in 90 times in 100 (the column P99 by chance) were the service the calibrated queue, simulated in steps of its size: this error is within the steps' own noise, and longer steps would tell."
        )),
        (n, k) => Some(format!(
            "{k} of the {n} steps counted have their P99 outside the band it would fall in 90 times in 100 (the column P99 by chance) were the service the calibrated queue, simulated in steps of their size: there the error is more than chance moves a step that long. It is the model's, its calibration step's, or the server's own drift between steps, which the band does not hold{}",
            if repeats.is_empty() {
                "; repeat a rate (as in --rates 100,300,100,300) to measure that drift."
            } else {
                ": the steps repeated at one load measure it."
            }
        )),
    };
    // How far the server itself moved between steps of one load.
    let drift = (!repeats.is_empty()).then(|| {
        let loads: Vec<String> = repeats
            .iter()
            .map(|g| {
                let load = match g.load {
                    endpoint::RepeatedLoad::InFlight(n) => format!("{n} in flight"),
                    endpoint::RepeatedLoad::Rate(rate) if rate.fract() == 0.0 && rate < 1e9 => format!("{rate:.0}/s"),
                    endpoint::RepeatedLoad::Rate(rate) => format!("{rate:.2}/s"),
                };
                format!(
                    "{}–{} over {} steps at {load} (+{:.0} %)",
                    seconds(g.low),
                    seconds(g.high),
                    g.steps.len(),
                    g.spread() * 100.0
                )
            })
            .collect();
        format!(
            "Steps repeated at one load show how far the P99 moved from one step to the next, chance and the server's own drift together: it ranged {}. A model error smaller than that spread is within what this server's steps do from one to the next.",
            loads.join("; ")
        )
    });
    let (load_head, how) = if closed {
        (
            "In flight",
            "Closed loop: each step kept a number of requests in flight, each sent when the last was answered (latency from the actual send).",
        )
    } else {
        ("Offered", "Open loop: requests were sent on a schedule, latency timed from the scheduled send.")
    };
    let chart = endpoint_chart(&check);
    let variation = match c.fit {
        endpoint::Fit::Tail => format!("fitted to that step's p99; its histogram's is {:.2}", c.measured_cv),
        endpoint::Fit::Moments => "its histogram's".to_string(),
    };
    view! {
        <section class="card" data-out="endpoint-check">
            <h2>"Your service under load"</h2>
            <p>{format!("Service time {} (coefficient of variation {:.2}, {}, from step {}); concurrency {}.", seconds(c.service_mean), c.service_cv, variation, c.base_step, concurrency)}</p>
            <p>{how}</p>
            <p data-out="model-error">{error}</p>
            {noise.map(|text| view! { <p data-out="model-noise">{text}</p> })}
            {drift.map(|text| view! { <p data-out="model-drift">{text}</p> })}
            {chart.map(|svg| view! { <div class="chart" data-chart="endpoint" inner_html=svg></div> })}
            <div tabindex="0" class="table-wrap">
                <table class="stack endpoint-steps">
                    <thead><tr><th>"Step"</th><th>{load_head}</th><th>"Achieved"</th><th>"Errors"</th><th>"P50 measured"</th><th>"P50 model"</th><th>"P99 measured"</th><th>"P99 model"</th><th>"P99 error"</th><th>"P99 by chance"</th><th>"Utilisation"</th><th>"Note"</th></tr></thead>
                    <tbody>
                        {check.predictions.iter().zip(&steps).map(|(p, s)| {
                            let note = if s.client_limited { "client-limited: not trusted" }
                                else if p.step == c.base_step { "calibration step" }
                                else if s.saturated && p.counted { "saturated (counted: a closed loop's queue is bounded)" }
                                else if s.saturated { "saturated" }
                                else if !p.counted && p.in_flight.is_some() { "not counted (over 1 % errors)" }
                                else if !p.counted { "not counted (≥ 80 %)" }
                                else { "" };
                            let load = match p.in_flight {
                                Some(n) => n.to_string(),
                                None => format!("{:.1}/s", p.offered),
                            };
                            let time = |v: Option<f64>| v.map(seconds).unwrap_or_else(|| "–".into());
                            let chance = match (band(p.step), side(p)) {
                                (Some(b), Some(side)) => format!("{}–{}, {side}", seconds(b.low), seconds(b.high)),
                                _ => "–".into(),
                            };
                            view! {
                                <tr>
                                    <td data-label="Step">{p.step}</td>
                                    <td data-label=load_head>{load}</td>
                                    <td data-label="Achieved">{format!("{:.1}/s", s.achieved)}</td>
                                    <td data-label="Errors">{format!("{:.1} %", s.error_rate * 100.0)}</td>
                                    <td data-label="P50 measured">{time(p.measured_p50)}</td>
                                    <td data-label="P50 model">{if p.p50.is_some() { time(p.p50) } else { "unbounded".into() }}</td>
                                    <td data-label="P99 measured">{time(p.measured_p99)}</td>
                                    <td data-label="P99 model">{if p.p99.is_some() { time(p.p99) } else { "unbounded".into() }}</td>
                                    <td data-label="P99 error">{percent(p.error_p99)}</td>
                                    <td data-label="P99 by chance">{chance}</td>
                                    <td data-label="Utilisation">{format!("{:.0} %", p.utilization * 100.0)}</td>
                                    <td data-label="Note">{note}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }.into_any()
}

/// A load test of a streamed LLM server: each step's requests end to end, measured only. The
/// request-level queue (M/G/c) of [`EndpointCheck`] does not describe continuous batching (on
/// the kept llama.cpp run `model/examples/llama-runs/2026-12-07-out-of-sample.json` its P99 is
/// off by −11 %, +84 % and +180 % where the LLM model's TTFT p99 is off by −16 %, −12 % and
/// −21 %), so it is not offered beside the LLM model, which predicts this server's TTFT and ITL.
#[component]
fn EndToEnd(steps: Vec<endpoint::Step>) -> impl IntoView {
    let time = |v: Option<f64>| v.map(seconds).unwrap_or_else(|| "–".into());
    let closed = steps.iter().any(|s| s.in_flight.is_some());
    let (load_head, from) = if closed { ("In flight", "its send") } else { ("Offered", "its scheduled send") };
    view! {
        <section class="card" data-out="end-to-end">
            <h2>"Requests end to end"</h2>
            <p>{format!("Each request from {from} to its last token, as measured. A streamed LLM server batches requests as they come, so a queue of whole requests (the model this page sets beside other load tests) does not describe it: the LLM model above predicts its time to first token and between tokens.")}</p>
            <div tabindex="0" class="table-wrap">
                <table class="stack end-to-end-steps">
                    <thead><tr><th>"Step"</th><th>{load_head}</th><th>"Achieved"</th><th>"Errors"</th><th>"Requests"</th><th>"P50"</th><th>"P99"</th><th>"Note"</th></tr></thead>
                    <tbody>
                        {steps.iter().map(|s| {
                            let note = if s.client_limited { "client-limited: not trusted" }
                                else if s.saturated { "saturated" }
                                else { "" };
                            let load = match s.in_flight {
                                Some(n) => n.to_string(),
                                None => format!("{:.2}/s", s.offered),
                            };
                            view! {
                                <tr>
                                    <td data-label="Step">{s.step}</td>
                                    <td data-label=load_head>{load}</td>
                                    <td data-label="Achieved">{format!("{:.2}/s", s.achieved)}</td>
                                    <td data-label="Errors">{format!("{:.1} %", s.error_rate * 100.0)}</td>
                                    <td data-label="Requests">{s.requests}</td>
                                    <td data-label="P50">{time(s.p50)}</td>
                                    <td data-label="P99">{time(s.p99)}</td>
                                    <td data-label="Note">{note}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

/// One row of the GEMM table: a path on a shape, or ONNX Runtime's figure on it.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmRow {
    pub batch: u64,
    pub hidden: u64,
    pub shape: String,
    pub path: String,
    pub kernel: String,
    pub ops: f64,
    pub of_peak: Option<f64>,
    pub vs_onnxruntime: Option<f64>,
}

/// The quant suite's GEMM figures for its headline paths (the library, and this CPU's fastest
/// kernel per precision), each shape followed by ONNX Runtime's figures on it. The run is read
/// once into an index: a run holds thousands of measurements, and a page must not cost their
/// square.
pub fn gemm_rows(ms: &[Measurement]) -> Vec<GemmRow> {
    const HEADLINE: [&str; 5] = ["fp32_library", "fp32", "bf16", "bf16_dot", "int8"];
    type Key<'a> = (&'a str, &'a str, &'a str, &'a str);
    let p = |m: &'_ Measurement, k: &str| m.parameters.get(k).map_or("", |v| v.as_str()).to_string();
    let mut index: std::collections::HashMap<Key, &Measurement> = std::collections::HashMap::new();
    let mut shapes: Vec<(u64, u64, &str, &str)> = Vec::new();
    for m in ms.iter().filter(|m| m.suite == Suite::Quant && m.status == MeasurementStatus::Ok && m.stats.is_some()) {
        let get = |k: &str| m.parameters.get(k).map_or("", |v| v.as_str());
        let (batch, hidden) = (get("batch"), get("hidden"));
        index.entry((m.case.as_str(), batch, hidden, get("path"))).or_insert(m);
        if m.case == "gemm_throughput" {
            let shape = (batch.parse().unwrap_or(0), hidden.parse().unwrap_or(0), batch, hidden);
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
    }
    shapes.sort();
    let value = |key: Key| index.get(&key).and_then(|m| m.stats).map(|s| s.p50);
    let mut rows = Vec::new();
    for (b, h, batch, hidden) in shapes {
        let shape = format!("{b} × {h} × {h}");
        for path in HEADLINE {
            let Some(m) = index.get(&("gemm_throughput", batch, hidden, path)) else { continue };
            let against = if p(m, "precision") == "int8" { "int8" } else { "fp32" };
            rows.push(GemmRow {
                batch: b,
                hidden: h,
                shape: shape.clone(),
                path: path.to_string(),
                kernel: p(m, "kernel"),
                ops: m.stats.map_or(0.0, |s| s.p50),
                of_peak: value(("gemm_fraction_of_peak", batch, hidden, path)),
                vs_onnxruntime: value((&format!("gemm_ratio_vs_onnxruntime_{against}"), batch, hidden, path)),
            });
        }
        for precision in ["fp32", "int8"] {
            if let Some(m) = index.get(&(format!("floor_onnxruntime_{precision}").as_str(), batch, hidden, "")) {
                rows.push(GemmRow {
                    batch: b,
                    hidden: h,
                    shape: shape.clone(),
                    path: format!("ONNX Runtime {precision}"),
                    kernel: format!("{} {} (1 thread)", p(m, "op"), p(m, "onnxruntime")),
                    ops: m.stats.map_or(0.0, |s| s.p50),
                    of_peak: None,
                    vs_onnxruntime: Some(1.0),
                });
            }
        }
    }
    rows
}

/// Throughput against batch size at the run's largest hidden size, one line per path and one
/// per ONNX Runtime precision, with the core's INT8 and FP32 peaks as rules.
pub fn gemm_chart(rows: &[GemmRow], peaks: &[(String, f64)]) -> Option<String> {
    let hidden = rows.iter().map(|r| r.hidden).max()?;
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows.iter().filter(|r| r.hidden == hidden && r.ops > 0.0) {
        let point = (r.batch as f64, r.ops);
        match lines.iter_mut().find(|(name, _)| *name == r.path) {
            Some((_, points)) => points.push(point),
            None => lines.push((r.path.clone(), vec![point])),
        }
    }
    if lines.iter().all(|(_, points)| points.len() < 2) {
        return None;
    }
    let mut chart = LineChart::new(
        format!("Matrix multiply at hidden {hidden}: throughput against batch size"),
        "batch size (log)",
        "operations per second",
    );
    chart.x_log = true;
    chart.x_format = |v| format!("{v:.0}");
    chart.y_format = |v| format!("{:.0} G", v / 1e9);
    for (name, mut points) in lines {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.series.push(Series::new(name, points));
    }
    for precision in ["int8", "fp32"] {
        let best = peaks.iter().filter(|(i, _)| i.starts_with(precision)).map(|(_, v)| *v).fold(0.0, f64::max);
        if best > 0.0 {
            chart
                .y_rules
                .push(ChartRule { at: best, label: format!("{} peak of this core", precision.to_uppercase()) });
        }
    }
    Some(line_chart(&chart))
}

/// The GEMM table of a quant run, with what the core's peak and ONNX Runtime mean here.
#[component]
fn GemmTable(ms: Vec<Measurement>) -> impl IntoView {
    let rows = gemm_rows(&ms);
    // The core's peaks, once: by name for the chart's rules, in words for the line above it.
    let measured_peaks: Vec<(&Measurement, f64)> = ms
        .iter()
        .filter(|m| m.case == "core_peak" && m.status == MeasurementStatus::Ok)
        .filter_map(|m| Some((m, m.stats?.p50)))
        .collect();
    let p = |m: &Measurement, k: &str| m.parameters.get(k).cloned().unwrap_or_default();
    let peak_values: Vec<(String, f64)> = measured_peaks.iter().map(|(m, v)| (p(m, "instruction"), *v)).collect();
    let chart = gemm_chart(&rows, &peak_values);
    let peaks: Vec<String> = measured_peaks
        .iter()
        .map(|(m, v)| {
            let (instruction, per_cycle, ghz) = (p(m, "instruction"), p(m, "ops_per_cycle"), p(m, "clock_ghz"));
            format!("{instruction} {:.0} GOP/s ({per_cycle} a cycle at {ghz} GHz)", v / 1e9)
        })
        .collect();
    let bf16_instructions = peak_values.iter().any(|(instruction, _)| instruction.starts_with("bf16"));
    let onnxruntime = ms.iter().find(|m| m.case == "floor_onnxruntime").and_then(|m| m.reason.clone());
    view! {
        <section class="card" data-out="gemm-table">
            <h2>"Matrix multiply per precision, against this core and ONNX Runtime"</h2>
            <p>{if peaks.is_empty() { "The core's peak was not measured in this run.".to_string() } else { format!("The core's peak, measured in this run: {}.", peaks.join("; ")) }}</p>
            {(!bf16_instructions).then(|| view! { <p data-out="bf16-note">"This CPU has no BF16 instructions: BF16 here is FP32 arithmetic on weights stored in half the bytes, a memory saving, not a speed-up."</p> })}
            {onnxruntime.map(|reason| view! { <p data-out="onnxruntime-missing">{format!("ONNX Runtime was not measured: {reason}")}</p> })}
            {chart.map(|svg| view! { <div class="chart" data-chart="gemm" inner_html=svg></div> })}
            <div tabindex="0" class="table-wrap">
                <table class="stack gemm">
                    <thead><tr><th>"Batch × hidden × hidden"</th><th>"Path"</th><th>"Kernel"</th><th>"GOP/s"</th><th>"Of the core's peak"</th><th>"Against ONNX Runtime"</th></tr></thead>
                    <tbody>
                        {rows.into_iter().map(|r| view! {
                            <tr>
                                <td data-label="Shape">{r.shape}</td>
                                <td data-label="Path">{r.path}</td>
                                <td data-label="Kernel">{r.kernel}</td>
                                <td data-label="GOP/s">{format!("{:.1}", r.ops / 1e9)}</td>
                                <td data-label="Of the core's peak">{r.of_peak.map(|f| format!("{:.0} %", f * 100.0)).unwrap_or_else(|| "–".into())}</td>
                                <td data-label="Against ONNX Runtime">{r.vs_onnxruntime.map(|v| format!("{v:.2}×")).unwrap_or_else(|| "–".into())}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

fn trend_chart(name: &str, unit: &str, points: &[TrendPoint]) -> String {
    let newest = points.iter().map(|p| p.started_at_ms).max().unwrap_or(0);
    let oldest = points.iter().map(|p| p.started_at_ms).min().unwrap_or(0);
    // Runs minutes apart are read in minutes, weeks apart in days.
    let (per, word) = match newest - oldest {
        span if span < 2 * 3_600_000 => (60_000.0, "minutes"),
        span if span < 2 * 86_400_000 => (3_600_000.0, "hours"),
        _ => (86_400_000.0, "days"),
    };
    let mut chart = LineChart::new(
        format!("{name} across this node's runs"),
        format!("run start ({word} before the newest)"),
        unit.to_string(),
    );
    chart.x_format = |v| format!("{v:.1}");
    chart.y_format = match unit {
        "bytes_per_second" => bytes_per_second,
        "seconds" => seconds,
        _ => |v| format!("{v:.3}"),
    };
    chart.series.push(Series::new(
        name,
        points.iter().map(|p| (-((newest - p.started_at_ms) as f64) / per, p.value)).collect(),
    ));
    line_chart(&chart)
}

fn stat_text(m: &Measurement) -> String {
    match (m.status, m.stats) {
        (MeasurementStatus::Ok, Some(s)) => match m.unit {
            Unit::Seconds => format!("{} (P99 {})", seconds(s.p50), seconds(s.p99)),
            Unit::BytesPerSecond => bytes_per_second(s.p50),
            Unit::Bytes => bytes(s.p50),
            Unit::FlopPerSecond => format!("{:.2} GFLOP/s", s.p50 / 1e9),
            Unit::RequestsPerSecond => format!("{:.1} req/s", s.p50),
            Unit::TokensPerSecond => format!("{:.0} tokens/s", s.p50),
            Unit::Watts => format!("{:.1} W", s.p50),
            Unit::Ratio if m.is(Case::MlpAccuracyDelta) => accuracy_points(s.p50),
            _ => format!("{:.4}", s.p50),
        },
        _ => m.reason.clone().unwrap_or_else(|| m.status.as_str().to_string()),
    }
}

#[component]
pub fn RunPageView() -> impl IntoView {
    let params = use_params_map();
    let data = Resource::new(move || params.read().get("id").unwrap_or_default(), run_page);
    view! {
        <Title text="Run · Headroom"/>
        <Suspense fallback=|| view! { <p>"Loading the run…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(view) => view! { <Run view/> }.into_any(),
                    Err(err) => view! { <h1>"Run"</h1><p class="error">{format!("Could not load the run: {}", crate::pages::scenarios::clean(&err))}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Run(view: RunView) -> impl IntoView {
    let run = view.detail.run.clone();
    let ms = view.detail.measurements.clone();
    let id = run.run_id.to_string();
    let mut charts: Vec<(&'static str, String)> = Vec::new();
    for suite in [Suite::System, Suite::Transfer] {
        if let Some(c) = bandwidth_chart(&ms, suite) {
            charts.push(("bandwidth", c));
        }
    }
    if let Some(c) = cdf_chart(&ms) {
        charts.push(("cdf", c));
    }
    for placement in ["different_cores", "cross_node"] {
        if let Some(c) = payload_chart(&id, &ms, placement) {
            charts.push(("payload", c));
        }
    }
    if let Some(c) = precision_chart(&ms) {
        charts.push(("precision", c));
    }
    for (name, unit, pts) in &view.trends {
        if pts.len() >= 2 {
            charts.push(("trend", trend_chart(name, unit, pts)));
        }
    }
    let suites = run.suites.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    let steps = endpoint::steps(&ms);
    let bands = view.endpoint_bands.clone();
    let llm_steps = model::plan::llm::fit::steps(&ms);
    let endpoint_check = match (steps.is_empty(), llm_steps.is_empty()) {
        (true, _) => None,
        (false, true) => Some(view! { <EndpointCheck steps bands/> }.into_any()),
        (false, false) => Some(view! { <EndToEnd steps/> }.into_any()),
    };
    let llm_check = (!llm_steps.is_empty())
        .then(|| view! { <crate::components::llm_check::LlmCheckView steps=llm_steps check=view.llm.clone() bands=view.llm_bands.clone()/> });
    let gemm = ms.iter().any(|m| m.case == "gemm_throughput").then(|| view! { <GemmTable ms=ms.clone()/> });
    view! {
        <h1>{format!("Run {} on {}", &id[..8], run.hostname)}</h1>
        <p class="lede">{format!("{} · suites {} · {} measurements · agent {} {} · status {}", utc_minute(run.started_at_ms), suites, run.measurement_count, run.agent_name, run.agent_version, run.status.as_str())}</p>
        {run.measurements_removed_at_ms.map(|at| view! {
            <p class="notice" data-out="measurements-removed">{format!("This run's measurements were removed by retention on {}. Its summaries stay: its figures in trends, on the Fleet, Transport and Right-sizing pages are those measured.", utc_minute(at))}</p>
        })}
        <crate::pages::alerts::RunAlerts alerts=view.alerts.clone()/>
        <p><a href=format!("/api/v1/runs/{id}")>"This run as JSON"</a></p>
        {llm_check}
        {endpoint_check}
        {gemm}
        {charts.into_iter().map(|(kind, svg)| view! { <div class="chart card" data-chart=kind inner_html=svg></div> }).collect_view()}
        <h2>"This node's runs"</h2>
        <ul class="node-runs">
            {view.node_runs.iter().map(|r| {
                let rid = r.run_id.to_string();
                let current = rid == id;
                view! { <li class:current=current><a href=format!("/runs/{rid}")>{utc_minute(r.started_at_ms)}</a>{format!(" · {}", r.suites.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))}</li> }
            }).collect_view()}
        </ul>
        <details class="card">
            <summary>{format!("All {} measurements", ms.len())}</summary>
            <div tabindex="0" class="table-wrap">
                <table class="stack measurements">
                    <thead><tr><th>"Suite"</th><th>"Case"</th><th>"Parameters"</th><th>"Median"</th><th>"Floor"</th></tr></thead>
                    <tbody>
                        {ms.iter().map(|m| view! {
                            <tr class=format!("status {}", m.status.as_str())>
                                <td data-label="Suite">{m.suite.as_str()}</td>
                                <td data-label="Case">{m.case.clone()}</td>
                                <td data-label="Parameters" class="params">{m.parameters.iter().filter(|(k, _)| k.as_str() != "cpu_features").map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")}</td>
                                <td data-label="Median">{stat_text(m)}</td>
                                <td data-label="Floor">{m.floor.as_ref().map(|f| format!("{} {}", f.name, if m.unit == Unit::Seconds { seconds(f.value) } else { format!("{:.3e}", f.value) })).unwrap_or_default()}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </details>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: u32, offered: f64, p99: f64, in_flight: Option<u32>) -> endpoint::Step {
        endpoint::Step {
            step,
            offered,
            achieved: offered.min(200.0),
            mean: Some(p99 / 2.0),
            p50: Some(p99 / 2.2),
            p99: Some(p99),
            cv: Some(0.5),
            requests: 1000,
            error_rate: 0.0,
            saturated: false,
            client_limited: false,
            in_flight,
            scheduled: in_flight.is_none().then_some(offered),
        }
    }

    fn quant(case: &str, pairs: &[(&str, &str)], value: f64) -> Measurement {
        Measurement {
            suite: Suite::Quant,
            case: case.into(),
            parameters: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            unit: Unit::Ratio,
            status: MeasurementStatus::Ok,
            reason: None,
            stats: Some(model::Stats::single(value)),
            floor: None,
            histogram: None,
        }
    }

    #[test]
    fn gemm_rows_pair_each_path_with_its_peak_share_and_onnxruntime() {
        let mut ms = Vec::new();
        for batch in ["64", "1"] {
            for (path, precision, ops) in
                [("int8", "int8", 400e9), ("int8_avx2", "int8", 130e9), ("fp32", "fp32", 100e9)]
            {
                let p = [("path", path), ("precision", precision), ("batch", batch), ("hidden", "512")];
                ms.push(quant("gemm_throughput", &p, ops));
                ms.push(quant("gemm_fraction_of_peak", &p, ops / 470e9));
                if path == "int8" {
                    ms.push(quant("gemm_ratio_vs_onnxruntime_int8", &p, 1.04));
                }
            }
            let p = [("batch", batch), ("hidden", "512"), ("op", "MatMulInteger u8s8"), ("onnxruntime", "1.31.1")];
            ms.push(quant("floor_onnxruntime_int8", &p, 385e9));
        }
        let rows = gemm_rows(&ms);
        let names: Vec<(&str, &str)> = rows.iter().map(|r| (r.shape.as_str(), r.path.as_str())).collect();
        // Shapes in order of batch; headline paths only (not int8_avx2), then ONNX Runtime.
        assert_eq!(
            names,
            [
                ("1 × 512 × 512", "fp32"),
                ("1 × 512 × 512", "int8"),
                ("1 × 512 × 512", "ONNX Runtime int8"),
                ("64 × 512 × 512", "fp32"),
                ("64 × 512 × 512", "int8"),
                ("64 × 512 × 512", "ONNX Runtime int8"),
            ]
        );
        let int8 = &rows[4];
        assert_eq!((int8.ops, int8.vs_onnxruntime), (400e9, Some(1.04)));
        assert!((int8.of_peak.unwrap() - 400.0 / 470.0).abs() < 1e-12);
        assert_eq!((rows[3].vs_onnxruntime, rows[5].kernel.as_str()), (None, "MatMulInteger u8s8 1.31.1 (1 thread)"));
        let svg = gemm_chart(&rows, &[("int8_avx512_vnni".into(), 470e9), ("fp32_fma_avx2".into(), 118e9)]).unwrap();
        for text in
            ["hidden 512", "int8", "fp32", "ONNX Runtime int8", "INT8 peak of this core", "FP32 peak of this core"]
        {
            assert!(svg.contains(text), "{text} in {svg}");
        }
        assert!(gemm_chart(&rows[..3], &[]).is_none(), "one batch size is no line");
    }

    #[test]
    fn a_closed_loop_run_is_charted_against_requests_in_flight() {
        let closed = [step(1, 100.0, 0.02, Some(1)), step(2, 200.0, 0.03, Some(4)), step(3, 200.0, 0.09, Some(16))];
        let svg = endpoint_chart(&endpoint::check(&closed).unwrap()).unwrap();
        assert!(svg.contains("requests in flight") && svg.contains("closed loop, c = 2"), "{svg}");
        assert!(!svg.contains("offered requests per second"));
        let open = [step(1, 10.0, 0.02, None), step(2, 100.0, 0.03, None), step(3, 400.0, 0.9, None)];
        let svg = endpoint_chart(&endpoint::check(&open).unwrap()).unwrap();
        assert!(svg.contains("offered requests per second") && svg.contains("M/G/"), "{svg}");
    }
}
