//! `quant`: what quantization buys and costs on this CPU. GEMM at FP32 (the `matrixmultiply`
//! library and our own kernel), BF16 weights and INT8 with 32-bit accumulation for inference
//! shapes, against an FP64 reference; and a small real model (an MLP on handwritten digits)
//! in FP32, BF16, INT8 post-training (dynamic and static, per tensor and per channel), INT8 and
//! INT4 quantization-aware, and INT4 post-training: accuracy, latency, throughput and memory.

pub mod kernels;
pub mod mlp;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use model::{Case, Measurement, Suite, Unit};

use self::mlp::{Data, Trained, weight_scales};
use super::transport::harness::{Recorder, wall_per_call};
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
        progress.line(&format!("quant: CPU features {features:?}; kernels: {}", kernels::kernel_name()));
        let mut out = Vec::new();
        let (hidden, batches): (&[usize], &[usize]) =
            if effort.quick { (&QUICK_HIDDEN, &QUICK_BATCHES) } else { (&HIDDEN, &BATCHES) };
        // Each GEMM shape, then the MLP.
        progress.start("quant", (hidden.len() * batches.len() + 1) as u64);
        for &n in hidden {
            for &batch in batches {
                progress.step(&format!("GEMM {batch} × {n} × {n}"));
                gemm_cases(batch, n, budget, &features, &mut out);
            }
        }
        progress.step("the digits MLP (training is cached)");
        mlp_cases(budget, &features, &mut out, progress)?;
        progress.finish();
        Ok(out)
    }
}

fn params(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn push(out: &mut Vec<Measurement>, case: &str, unit: Unit, p: &BTreeMap<String, String>, value: f64) {
    out.push(figure(Suite::Quant, case, unit, p.clone(), Some(single(value))));
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

fn gemm_cases(batch: usize, n: usize, budget: Duration, features: &str, out: &mut Vec<Measurement>) {
    let k = n;
    let seed = (batch * 1_000_003 + n) as u64;
    let x = values(batch * k, seed);
    let w = values(n * k, seed + 1);
    let rows = batch.min(CHECKED_ROWS);
    let reference: Vec<f64> = x[..rows * k]
        .chunks_exact(k)
        .flat_map(|r| w.chunks_exact(k).map(move |c| r.iter().zip(c).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>()))
        .collect();
    let w_bf16: Vec<u16> = w.iter().map(|v| kernels::f32_to_bf16(*v)).collect();
    let scheme = mlp::INT8_PER_CHANNEL;
    let w_scales = weight_scales(&w, k, scheme);
    let w_i8 = mlp::quantize(&w, k, &w_scales, scheme);
    let x_scale = x.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
    let x_i8: Vec<i8> = x.iter().map(|v| (v / x_scale).round().clamp(-127.0, 127.0) as i8).collect();

    let mut y = vec![0f32; batch * n];
    let mut acc = vec![0i32; batch * n];
    let flops = 2.0 * (batch * n * k) as f64;
    let time = |name: &str, f: &mut dyn FnMut()| -> (String, Recorder) { (name.to_string(), wall_per_call(f, budget)) };
    let cases = [
        (
            time("fp32_library", &mut || kernels::gemm_f32_library(&x, &w, k, &mut y)),
            "fp32",
            "matrixmultiply",
            4 * n * k,
        ),
        (time("fp32", &mut || kernels::gemm_f32(&x, &w, k, &mut y)), "fp32", kernels::kernel_name(), 4 * n * k),
        (time("bf16", &mut || kernels::gemm_bf16(&x, &w_bf16, k, &mut y)), "bf16", kernels::kernel_name(), 2 * n * k),
        (
            time("int8", &mut || kernels::gemm_i8(&x_i8, &w_i8, k, &mut acc)),
            "int8",
            kernels::kernel_name(),
            n * k + 4 * n,
        ),
    ];
    // The error of each path, computed once outside the timing.
    let mut error = |path: &str| -> f64 {
        match path {
            "fp32_library" => kernels::gemm_f32_library(&x[..rows * k], &w, k, &mut y[..rows * n]),
            "fp32" => kernels::gemm_f32(&x[..rows * k], &w, k, &mut y[..rows * n]),
            "bf16" => kernels::gemm_bf16(&x[..rows * k], &w_bf16, k, &mut y[..rows * n]),
            _ => {
                kernels::gemm_i8(&x_i8[..rows * k], &w_i8, k, &mut acc[..rows * n]);
                for (i, a) in acc[..rows * n].iter().enumerate() {
                    y[i] = *a as f32 * x_scale * w_scales[i % n];
                }
            }
        }
        relative_error(&y[..rows * n], &reference)
    };
    let library = cases[0].0.1.stats().map(|s| s.p50);
    let own = cases[1].0.1.stats().map(|s| s.p50);
    for ((path, recorder), precision, kernel, weight_bytes) in cases {
        let Some(stats) = recorder.stats() else { continue };
        let p = params(&[
            ("path", path.clone()),
            ("precision", precision.to_string()),
            ("kernel", kernel.to_string()),
            ("batch", batch.to_string()),
            ("hidden", n.to_string()),
            ("cpu_features", features.to_string()),
        ]);
        out.push(figure(Suite::Quant, "gemm_latency", Unit::Seconds, p.clone(), Some(stats)));
        push(out, "gemm_throughput", Unit::FlopPerSecond, &p, flops / stats.p50);
        push(out, "gemm_relative_error", Unit::Ratio, &p, error(&path));
        push(out, "gemm_weight_bytes", Unit::Bytes, &p, weight_bytes as f64);
        if let (Some(library), Some(own)) = (library, own) {
            push(out, "gemm_speedup_vs_fp32_library", Unit::Ratio, &p, library / stats.p50);
            push(out, "gemm_speedup_vs_fp32_own", Unit::Ratio, &p, own / stats.p50);
        }
    }
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
            ("kernel", kernels::kernel_name().to_string()),
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
