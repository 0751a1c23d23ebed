//! `transfer`, `alloc` and `gemm`: host↔GPU copies (pageable, pinned, pinned write-combined; one
//! packed copy against many small ones) timed with CUDA events, and per-request `cuMemAlloc`
//! against the stream-ordered pool, cuBLAS GEMM at FP32, TF32, FP16 and BF16 with its error
//! against FP64. On a node without a CUDA driver every case is recorded as
//! skipped with the reason, and the other suites run.

pub mod cuda;

use std::collections::BTreeMap;
use std::time::Duration;

use model::{Measurement, MeasurementStatus, Suite, Unit};

use self::cuda::{Direction, GemmPrecision, HostMemory};
use super::{Benchmark, Effort, Progress};
use crate::power::{self, Energy, Nvml};
use crate::stats::summarize;

pub struct TransferSuite;
pub struct AllocSuite;

fn params(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn skipped(suite: Suite, case: &str, unit: Unit, parameters: BTreeMap<String, String>, reason: &str) -> Measurement {
    Measurement {
        suite,
        case: case.into(),
        parameters,
        unit,
        status: MeasurementStatus::Skipped,
        reason: Some(format!("skipped: {reason}")),
        stats: None,
        floor: None,
        histogram: None,
    }
}

fn failed(suite: Suite, case: &str, unit: Unit, parameters: BTreeMap<String, String>, reason: String) -> Measurement {
    Measurement {
        status: MeasurementStatus::Failed,
        reason: Some(reason),
        ..skipped(suite, case, unit, parameters, "")
    }
}

/// The GPU, or every case recorded as skipped with the reason there is none.
fn open_or_skip(
    suite: Suite,
    case: &str,
    unit: Unit,
    cases: impl Iterator<Item = BTreeMap<String, String>>,
    progress: &mut Progress,
) -> Result<cuda::Gpu, Vec<Measurement>> {
    cuda::open().map_err(|reason| {
        progress.line(&format!("{suite}: every case skipped: {reason}"));
        cases.map(|parameters| skipped(suite, case, unit, parameters, &reason)).collect()
    })
}

fn sizes(effort: Effort) -> Vec<usize> {
    if effort.quick {
        vec![4 << 10, 1 << 20, 64 << 20, 256 << 20]
    } else {
        vec![4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    }
}

/// The bytes of each size the transfer suite copies, by name.
const PATTERN_BYTES: usize = 64 << 20;
const PATTERN_CHUNKS: usize = 256;

impl Benchmark for TransferSuite {
    fn suite(&self) -> Suite {
        Suite::Transfer
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let trials = if effort.quick { 10 } else { 30 };
        let mut cases: Vec<(HostMemory, Direction, usize, usize)> = Vec::new();
        for memory in HostMemory::ALL {
            for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
                for &bytes in &sizes(effort) {
                    cases.push((memory, direction, bytes, 1));
                }
            }
        }
        cases.push((HostMemory::Pinned, Direction::HostToDevice, PATTERN_BYTES, PATTERN_CHUNKS));
        let describe = |(memory, direction, bytes, chunks): (HostMemory, Direction, usize, usize)| {
            params(&[
                ("memory", memory.as_str().into()),
                ("direction", direction.as_str().into()),
                ("bytes", bytes.to_string()),
                ("copies", chunks.to_string()),
            ])
        };
        let gpu = match open_or_skip(
            Suite::Transfer,
            "copy",
            Unit::BytesPerSecond,
            cases.iter().map(|&c| describe(c)),
            progress,
        ) {
            Ok(gpu) => gpu,
            Err(skipped) => return Ok(skipped),
        };
        let name = gpu.name();
        // The link's limit is the floor every copy is measured against.
        let link = cuda::nvidia_pcie_link();
        let limit = link.and_then(|(gts, width)| cuda::pcie_limit(gts, width));
        if let Some((gts, width)) = link {
            progress.line(&format!("transfer: {name} on PCIe {gts} GT/s ×{width}"));
        }
        let mut out = Vec::new();
        for case in cases {
            let (memory, direction, bytes, chunks) = case;
            let mut parameters = describe(case);
            parameters.insert("gpu".into(), name.clone());
            match gpu.copy_ms(memory, direction, bytes, chunks, trials) {
                Ok(ms) => {
                    let bandwidth: Vec<f64> = ms.iter().filter_map(|&t| cuda::bytes_per_second(bytes, t)).collect();
                    let stats = summarize(&bandwidth);
                    progress.line(&format!(
                        "transfer: {} {} {} in {chunks} cop{} → {}",
                        memory.as_str(),
                        direction.as_str(),
                        model::format::bytes(bytes as f64),
                        if chunks == 1 { "y" } else { "ies" },
                        model::format::bytes_per_second(stats.p50)
                    ));
                    let mut m =
                        super::figure(Suite::Transfer, "copy", Unit::BytesPerSecond, parameters.clone(), Some(stats));
                    m.floor = limit.map(|value| model::Floor { name: "pcie_link".into(), value });
                    out.push(m);
                    if bytes <= 64 << 10 {
                        let seconds: Vec<f64> = ms.iter().map(|&t| f64::from(t) / 1e3).collect();
                        out.push(super::figure(
                            Suite::Transfer,
                            "copy_latency",
                            Unit::Seconds,
                            parameters,
                            Some(summarize(&seconds)),
                        ));
                    }
                }
                Err(e) => out.push(failed(Suite::Transfer, "copy", Unit::BytesPerSecond, parameters, e)),
            }
        }
        Ok(out)
    }
}

impl Benchmark for AllocSuite {
    fn suite(&self) -> Suite {
        Suite::Alloc
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let (rounds, count) = if effort.quick { (5, 50) } else { (15, 200) };
        let cases: Vec<(bool, usize)> =
            [false, true].into_iter().flat_map(|pooled| [1 << 20, 64 << 20].map(|bytes| (pooled, bytes))).collect();
        let describe = |(pooled, bytes): (bool, usize)| {
            params(&[
                ("allocator", if pooled { "stream_ordered_pool" } else { "cu_mem_alloc" }.into()),
                ("bytes", bytes.to_string()),
            ])
        };
        let gpu =
            match open_or_skip(Suite::Alloc, "alloc_free", Unit::Seconds, cases.iter().map(|&c| describe(c)), progress)
            {
                Ok(gpu) => gpu,
                Err(skipped) => return Ok(skipped),
            };
        let mut out = Vec::new();
        for case in cases {
            let (pooled, bytes) = case;
            let times: Result<Vec<f64>, String> =
                (0..rounds).map(|_| gpu.alloc_free_ms(pooled, bytes, count).map(|ms| ms / 1e3)).collect();
            match times {
                Ok(seconds) => {
                    let stats = summarize(&seconds);
                    progress.line(&format!(
                        "alloc: {} {} → {} per allocation and free",
                        describe(case)["allocator"],
                        model::format::bytes(bytes as f64),
                        model::format::seconds(stats.p50)
                    ));
                    out.push(super::figure(Suite::Alloc, "alloc_free", Unit::Seconds, describe(case), Some(stats)));
                }
                Err(e) => out.push(failed(Suite::Alloc, "alloc_free", Unit::Seconds, describe(case), e)),
            }
        }
        Ok(out)
    }
}

pub struct GemmSuite;

/// (m, n, k) shapes: squares, and one request of a 4096-wide layer (matrix × vector).
fn gemm_shapes(effort: Effort) -> Vec<(usize, usize, usize)> {
    let squares: &[usize] = if effort.quick { &[256, 1024, 4096] } else { &[256, 512, 1024, 2048, 4096, 8192] };
    squares.iter().map(|&s| (s, s, s)).chain([(4096, 1, 4096)]).collect()
}

impl Benchmark for GemmSuite {
    fn suite(&self) -> Suite {
        Suite::Gemm
    }

    fn run(&self, effort: Effort, progress: &mut Progress) -> anyhow::Result<Vec<Measurement>> {
        let trials = if effort.quick { 5 } else { 20 };
        let cases: Vec<(GemmPrecision, (usize, usize, usize))> = GemmPrecision::ALL
            .into_iter()
            .flat_map(|p| gemm_shapes(effort).into_iter().map(move |shape| (p, shape)))
            .collect();
        let describe = |(p, (m, n, k)): (GemmPrecision, (usize, usize, usize))| {
            params(&[
                ("precision", p.as_str().into()),
                ("m", m.to_string()),
                ("n", n.to_string()),
                ("k", k.to_string()),
            ])
        };
        let gpu = match open_or_skip(
            Suite::Gemm,
            "cublas_gemm",
            Unit::FlopPerSecond,
            cases.iter().map(|&c| describe(c)),
            progress,
        ) {
            Ok(gpu) => gpu,
            Err(mut out) => {
                let reason = out.first().and_then(|m| m.reason.clone()).unwrap_or_default();
                out.push(power::skipped::<Nvml>(Suite::Gemm, None, &reason, &[]));
                return Ok(out);
            }
        };
        // Idle first, before any GEMM warms the GPU; under load last, so the GEMM cases do not
        // run on a GPU already hot from it.
        let power = GpuPower::open(&gpu, effort, progress);
        let mut out = Vec::new();
        for case in cases {
            let (precision, (m, n, k)) = case;
            match gpu.gemm(precision, m, n, k, trials) {
                Ok((ms, error)) => {
                    let flops = 2.0 * (m * n * k) as f64;
                    let rates: Vec<f64> =
                        ms.iter().filter(|&&t| t > 0.0).map(|&t| flops / (f64::from(t) / 1e3)).collect();
                    let stats = summarize(&rates);
                    progress.line(&format!(
                        "gemm: {} {m}×{n}×{k} → {:.1} TFLOP/s, relative error {error:.1e}",
                        precision.as_str(),
                        stats.p50 / 1e12
                    ));
                    out.push(super::figure(
                        Suite::Gemm,
                        "cublas_gemm",
                        Unit::FlopPerSecond,
                        describe(case),
                        Some(stats),
                    ));
                    out.push(super::figure(
                        Suite::Gemm,
                        "cublas_gemm_relative_error",
                        Unit::Ratio,
                        describe(case),
                        Some(super::single(error)),
                    ));
                }
                Err(e) => out.push(failed(Suite::Gemm, "cublas_gemm", Unit::FlopPerSecond, describe(case), e)),
            }
        }
        out.extend(power.finish(&gpu, effort, progress));
        Ok(out)
    }
}

/// The side of the square FP16 GEMMs that load the GPU for its power (4096 with `--quick`, to
/// spare the host the inputs' 768 MiB): tensor cores on every SM, near the most a GPU draws.
fn power_gemm(effort: Effort) -> usize {
    if effort.quick { 4096 } else { 8192 }
}

/// The power of the GPU the suite uses, from NVML's energy counter: idle (its context open,
/// nothing running, read before the GEMM cases) and under FP16 GEMMs back to back after a
/// warm-up (read after them), with the GPUs NVML lists on the node (the server counts each at
/// this one's draw). Skipped with the reason where the counter cannot be read.
enum GpuPower {
    Measuring { nvml: Box<Nvml>, idle: Measurement },
    Skipped(Measurement),
}

impl GpuPower {
    fn open(gpu: &cuda::Gpu, effort: Effort, progress: &mut Progress) -> GpuPower {
        let nvml = match Nvml::open(gpu.pci_address()) {
            Ok(nvml) => nvml,
            Err(reason) => {
                progress.line(&format!("gemm: power not measured: {reason}"));
                return GpuPower::Skipped(power::skipped::<Nvml>(Suite::Gemm, None, &reason, &[]));
            }
        };
        let (settle, window) = if effort.quick {
            (Duration::from_millis(250), Duration::from_secs(1))
        } else {
            (Duration::from_secs(1), Duration::from_secs(3))
        };
        // A moment for the clocks to drop after the suites before.
        std::thread::sleep(settle);
        let watts = nvml.during(|| std::thread::sleep(window)).0;
        let idle = power::case(Suite::Gemm, "idle", &nvml, watts, &[("gpus", nvml.count.to_string())]);
        GpuPower::Measuring { nvml: Box::new(nvml), idle }
    }

    fn finish(self, gpu: &cuda::Gpu, effort: Effort, progress: &mut Progress) -> Vec<Measurement> {
        let (nvml, idle) = match self {
            GpuPower::Skipped(m) => return vec![m],
            GpuPower::Measuring { nvml, idle } => (*nvml, idle),
        };
        let (warmup, window) = if effort.quick {
            (Duration::from_millis(500), Duration::from_secs(2))
        } else {
            (Duration::from_secs(2), Duration::from_secs(6))
        };
        let size = power_gemm(effort);
        let load = [("gpus", nvml.count.to_string()), ("load", format!("fp16 gemm {size}"))];
        // The inputs are made and copied before the window, which holds GEMMs alone, to its
        // end: the window closes on the counter's next update, up to `power::ALIGN` after the
        // work, so GEMMs enough for twice that are queued before it closes.
        let loaded = gpu.fp16_gemm_load(size).and_then(|mut gemms| {
            let warmed = gemms.run_for(warmup)?;
            let each = warmup.as_secs_f64() / warmed.max(1) as f64;
            let tail = ((2.0 * power::ALIGN.as_secs_f64() / each).ceil() as usize).clamp(8, 900);
            let (watts, ran) = nvml.during(|| gemms.run_for(window).and_then(|_| gemms.queue(tail)));
            gemms.finish()?;
            ran.map(|_| watts)
        });
        let busy = match (loaded, nvml.other_work()) {
            (Err(e), _) => Measurement {
                status: MeasurementStatus::Failed,
                ..power::skipped::<Nvml>(Suite::Gemm, Some("busy"), &e, &load)
            },
            // Another process that started on the GPU meanwhile would be counted too: a reason
            // not to read, not a failure.
            (Ok(_), Some(reason)) => power::skipped::<Nvml>(Suite::Gemm, Some("busy"), &reason, &load),
            (Ok(watts), None) => power::case(Suite::Gemm, "busy", &nvml, watts, &load),
        };
        let out = vec![idle, busy];
        for line in power::said(&out, &nvml.describe()) {
            progress.line(&format!("gemm: {line}"));
        }
        out
    }
}
