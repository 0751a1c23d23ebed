//! `quant`: what quantization buys and costs on this CPU. GEMM at FP32 (the `matrixmultiply`
//! library and our own kernel), BF16 weights and INT8 with 32-bit accumulation for inference
//! shapes, against an FP64 reference; and a small real model (an MLP on handwritten digits)
//! in FP32, BF16, INT8 post-training (dynamic and static, per tensor and per channel), INT8 and
//! INT4 quantization-aware, and INT4 post-training: accuracy, latency, throughput and memory.

pub mod gemm;
pub mod kernels;
pub mod mlp;
pub mod onnxruntime;
mod shapes;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use model::{Case, Measurement, MeasurementStatus, Suite, Unit};

use self::gemm::{Isa, Op};
use self::mlp::{Data, Trained};
use super::transport::harness::wall_per_call;
use super::{Benchmark, Effort, Progress, figure, single};

pub struct QuantSuite;

/// Hidden sizes of the GEMM cases (square weights) and their batch sizes.
const HIDDEN: [usize; 4] = [512, 1024, 2048, 4096];
const QUICK_HIDDEN: [usize; 2] = [512, 1024];
const BATCHES: [usize; 3] = [1, 8, 64];
const QUICK_BATCHES: [usize; 2] = [1, 64];
/// Rows of each GEMM checked against the FP64 reference.
const CHECKED_ROWS: usize = 8;

impl Benchmark for QuantSuite {
    fn suite(&self) -> Suite {
        Suite::Quant
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let budget = Duration::from_millis(if effort.quick { 60 } else { 300 });
        let features = kernels::cpu_features().join(" ");
        let kernels_used =
            [Op::Fp32, Op::Bf16Weights, Op::Int8].map(|op| format!("{op:?} {}", Isa::best(op))).join(", ");
        progress.line(&format!("quant: CPU features {features:?}; kernels: {kernels_used}"));
        let mut out = Vec::new();
        let (hidden, batches): (&[usize], &[usize]) =
            if effort.quick { (&QUICK_HIDDEN, &QUICK_BATCHES) } else { (&HIDDEN, &BATCHES) };
        let shapes: Vec<(usize, usize)> = hidden.iter().flat_map(|&n| batches.iter().map(move |&b| (b, n))).collect();
        // The core's limits, ONNX Runtime, each GEMM shape, then the MLP.
        progress.start("quant", shapes.len() as u64 + 3);
        progress.step("the core's clock and peak per instruction");
        let mut limits = shapes::Limits::measure();
        progress.step("ONNX Runtime on the same shapes (one thread)");
        let limit = budget * 8 * shapes.len() as u32 + Duration::from_secs(120);
        let anchor = match onnxruntime::measure(&shapes, budget, limit) {
            Ok(anchor) => Some(anchor),
            Err(reason) => {
                // The reason quotes the operator's Python path and its last words: stored text.
                let reason = crate::upload::printable_within(&reason, 200);
                progress.line(&format!("quant: ONNX Runtime not measured: {reason}"));
                out.push(skipped("floor_onnxruntime", &features, &reason));
                None
            }
        };
        let cx = shapes::Context { budget, features: &features, every_path: !effort.quick, anchor: anchor.as_ref() };
        for &(batch, n) in &shapes {
            progress.step(&format!("GEMM {batch} × {n} × {n}"));
            limits.remeasure();
            shapes::gemm_cases(batch, n, &cx, &mut out);
        }
        out.extend(limits.measurements(&features));
        limits.against_peaks(&mut out);
        progress.step("the digits MLP (training is cached)");
        mlp_cases(budget, &features, &mut out, progress)?;
        progress.finish();
        for line in shapes::table(&out) {
            progress.line(&line);
        }
        Ok(out)
    }
}

fn skipped(case: &str, features: &str, reason: &str) -> Measurement {
    Measurement {
        status: MeasurementStatus::Skipped,
        reason: Some(format!("skipped: {reason}")),
        stats: None,
        ..figure(Suite::Quant, case, Unit::FlopPerSecond, params(&[("cpu_features", features.to_string())]), None)
    }
}

fn params(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// A one-number figure; a non-finite one is recorded as failed (the server refuses a run that
/// holds one).
fn push(out: &mut Vec<Measurement>, case: &str, unit: Unit, p: &BTreeMap<String, String>, value: f64) {
    let stats = value.is_finite().then(|| single(value));
    out.push(figure(Suite::Quant, case, unit, p.clone(), stats));
}

/// Values in [-1, 1] that are never zero, from a small deterministic generator.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = model::plan::rng::Rng::seeded(seed);
    (0..n)
        .map(|_| ((rng.open01() * 2.0 - 1.0) as f32).clamp(-1.0, 1.0))
        .map(|v| if v == 0.0 { 1e-3 } else { v })
        .collect()
}

/// ‖y − y_ref‖ / ‖y_ref‖ over the checked rows.
fn relative_error(y: &[f32], reference: &[f64]) -> f64 {
    let (num, den) =
        y.iter().zip(reference).fold((0.0, 0.0), |(n, d), (a, b)| (n + (*a as f64 - b).powi(2), d + b * b));
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Where the trained networks are kept between runs.
fn cache_path() -> PathBuf {
    let base = std::env::var_os("HEADROOM_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("headroom")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/headroom")))
        .unwrap_or_else(std::env::temp_dir);
    base.join(format!("quant-mlp-{}.json", mlp::training_key()))
}

/// The trained networks from the cache, or trained now and cached (written whole, then
/// renamed, so a killed run never leaves half a file).
pub fn trained(data: &Data, progress: &mut Progress) -> anyhow::Result<Trained> {
    let path = cache_path();
    if let Ok(text) = std::fs::read(&path)
        && let Ok(trained) = serde_json::from_slice::<Trained>(&text)
    {
        progress.line(&format!("quant: trained networks from {}", path.display()));
        return Ok(trained);
    }
    let started = std::time::Instant::now();
    let trained = Trained::train(data);
    progress.line(&format!("quant: trained in {:.1} s; cached at {}", started.elapsed().as_secs_f64(), path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&trained)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(trained)
}

fn mlp_cases(
    budget: Duration,
    features: &str,
    out: &mut Vec<Measurement>,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let data = Data::load();
    let trained = trained(&data, progress)?;
    let variants = trained.variants(&data);
    let baseline = mlp::accuracy(&variants[0].forward(&data.test_x), &data.test_y);
    for variant in &variants {
        let accuracy = mlp::accuracy(&variant.forward(&data.test_x), &data.test_y);
        let base = params(&[
            ("variant", variant.name.to_string()),
            ("precision", variant.precision.to_string()),
            ("kernel", variant.kernel()),
            ("cpu_features", features.to_string()),
        ]);
        push(out, Case::MlpAccuracy.as_str(), Unit::Ratio, &base, accuracy);
        push(out, Case::MlpAccuracyDelta.as_str(), Unit::Ratio, &base, accuracy - baseline);
        push(out, Case::MlpWeightBytes.as_str(), Unit::Bytes, &base, variant.weight_bytes() as f64);
        for batch in [1, 64] {
            let x = &data.test_x[..batch * mlp::INPUTS];
            let recorder = wall_per_call(
                || {
                    std::hint::black_box(variant.forward(std::hint::black_box(x)));
                },
                budget,
            );
            let mut p = base.clone();
            p.insert("batch".into(), batch.to_string());
            let Some(stats) = recorder.stats() else { continue };
            out.push(figure(Suite::Quant, Case::MlpLatency.as_str(), Unit::Seconds, p.clone(), Some(stats)));
            push(out, Case::MlpThroughput.as_str(), Unit::RequestsPerSecond, &p, batch as f64 / stats.p50);
            push(out, Case::MlpMemoryBytes.as_str(), Unit::Bytes, &p, variant.memory_bytes(batch) as f64);
        }
        progress.line(&format!("quant: {:<30} accuracy {:.4} ({:+.4})", variant.name, accuracy, accuracy - baseline));
    }
    Ok(())
}
