//! The GEMM cases: each kernel path on each inference shape, against the core's measured peak
//! for its precision and, where ONNX Runtime is installed, against its figure on the same shape
//! in the same run.

use std::collections::BTreeMap;
use std::time::Duration;

use model::{Floor, Measurement, Suite, Unit};

use super::gemm::peak::{self, Instruction, Peak};
use super::gemm::{self, Isa, Op, PackedF, PackedI8};
use super::onnxruntime::Anchor;
use super::{CHECKED_ROWS, kernels, mlp, params, push, relative_error, values};
use crate::suites::figure;
use crate::suites::transport::harness::{Recorder, wall_per_call};

/// The core's clock and the peak of each kernel instruction it has: the best of a measurement
/// at the start of the run and one beside each shape's kernels, so a stretch when a neighbour
/// had the core (a shared VM, an SMT sibling) cannot stand as the hardware's limit.
pub struct Limits {
    pub clock: Option<f64>,
    pub peaks: Vec<(Instruction, Peak)>,
}

impl Limits {
    pub fn measure() -> Limits {
        let clock = peak::clock_hz();
        let mut asked = vec![Instruction::Fma(Isa::Avx2), Instruction::Fma(Isa::Avx512), Instruction::Bf16Dot];
        asked.extend(Isa::available(Op::Int8).into_iter().map(Instruction::Int8));
        let peaks = asked.into_iter().filter_map(|i| Some((i, peak::peak(i, clock)?))).collect();
        Limits { clock, peaks }
    }

    /// Measures every peak again and keeps the higher of each (the clock too).
    pub fn remeasure(&mut self) {
        let again = Limits::measure();
        self.clock = match (self.clock, again.clock) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        for (instruction, peak) in &mut self.peaks {
            if let Some((_, new)) = again.peaks.iter().find(|(i, _)| i == instruction) {
                peak.ops = peak.ops.max(new.ops);
            }
        }
        for (_, peak) in &mut self.peaks {
            peak.per_cycle = self.clock.map_or(f64::NAN, |c| peak.ops / c);
        }
    }

    /// Each GEMM throughput's floor (its precision's peak) and its fraction of that peak, set
    /// once every shape has run, against the best peak of the whole run.
    pub fn against_peaks(&self, out: &mut Vec<Measurement>) {
        let mut fractions = Vec::new();
        for m in out.iter_mut().filter(|m| m.case == "gemm_throughput") {
            let (Some(stats), Some(precision)) = (m.stats, m.parameters.get("precision")) else { continue };
            if let Some((instruction, peak)) = self.floor(precision) {
                m.floor = Some(Floor { name: format!("core_peak_{}", instruction.name()), value: peak.ops });
                fractions.push((m.parameters.clone(), stats.p50 / peak.ops));
            }
        }
        for (p, fraction) in fractions {
            push(out, "gemm_fraction_of_peak", Unit::Ratio, &p, fraction);
        }
    }

    /// The core's peak for `precision`: its fastest instruction for it. BF16 work runs either
    /// on `vdpbf16ps` or widened to FP32 on FMA, so its peak is the faster of the two: on
    /// Zen 4 `vdpbf16ps` does twice FMA's operations a cycle, but on an Intel Xeon VM with
    /// AVX-512 BF16 the FMA path ran at 1.5× the BF16 instruction's measured peak.
    pub fn floor(&self, precision: &str) -> Option<(Instruction, Peak)> {
        let best = |fits: &dyn Fn(&Instruction) -> bool| {
            self.peaks.iter().filter(|(i, _)| fits(i)).max_by(|a, b| a.1.ops.total_cmp(&b.1.ops)).copied()
        };
        let fma = |i: &Instruction| matches!(i, Instruction::Fma(_));
        match precision {
            "int8" => best(&|i| matches!(i, Instruction::Int8(_))),
            "bf16" => best(&|i| *i == Instruction::Bf16Dot || fma(i)),
            _ => best(&fma),
        }
    }

    /// One `core_peak` measurement per instruction, and the clock they were divided by.
    pub fn measurements(&self, features: &str) -> Vec<Measurement> {
        let ghz = self.clock.map_or("unknown".into(), |c| format!("{:.3}", c / 1e9));
        self.peaks
            .iter()
            .map(|(instruction, peak)| {
                let p = params(&[
                    ("instruction", instruction.name()),
                    ("clock_ghz", ghz.clone()),
                    ("ops_per_cycle", format!("{:.1}", peak.per_cycle)),
                    ("cpu_features", features.to_string()),
                ]);
                figure(Suite::Quant, "core_peak", Unit::FlopPerSecond, p, Some(crate::suites::single(peak.ops)))
            })
            .collect()
    }
}

/// A way of computing the product.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kernel {
    /// FP32 through the `matrixmultiply` crate.
    Library,
    Fp32(Isa),
    /// BF16 weights, FP32 inputs and arithmetic.
    Bf16(Isa),
    /// BF16 weights and inputs through `vdpbf16ps`.
    Bf16Dot,
    Int8(Isa),
}

impl Kernel {
    fn precision(self) -> &'static str {
        match self {
            Kernel::Library | Kernel::Fp32(_) => "fp32",
            Kernel::Bf16(_) | Kernel::Bf16Dot => "bf16",
            Kernel::Int8(_) => "int8",
        }
    }

    fn name(self) -> String {
        match self {
            Kernel::Library => "matrixmultiply".into(),
            Kernel::Fp32(Isa::Portable) | Kernel::Bf16(Isa::Portable) | Kernel::Int8(Isa::Portable) => {
                "portable (autovectorized)".into()
            }
            Kernel::Fp32(isa) | Kernel::Bf16(isa) | Kernel::Int8(isa) => format!("packed, {isa}"),
            Kernel::Bf16Dot => "packed, avx512_bf16".into(),
        }
    }

    /// Weight bytes a deployment holds (packing's padding aside).
    fn weight_bytes(self, n: usize, k: usize) -> usize {
        match self.precision() {
            "fp32" => 4 * n * k,
            "bf16" => 2 * n * k,
            // One FP32 scale per output channel on top of the values.
            _ => n * k + 4 * n,
        }
    }
}

/// The paths measured: the library, then our fastest kernel for each precision (the headline
/// `fp32`, `bf16`, `int8`, and `bf16_dot` where the CPU has it), then with `every` each other
/// path this CPU runs, named after its instruction set.
fn paths(every: bool) -> Vec<(String, Kernel)> {
    let mut out = vec![
        ("fp32_library".to_string(), Kernel::Library),
        ("fp32".into(), Kernel::Fp32(Isa::best(Op::Fp32))),
        ("bf16".into(), Kernel::Bf16(Isa::best(Op::Bf16Weights))),
    ];
    if Isa::Avx512Bf16.runs_here() {
        out.push(("bf16_dot".into(), Kernel::Bf16Dot));
    }
    out.push(("int8".into(), Kernel::Int8(Isa::best(Op::Int8))));
    if every {
        for (op, make, prefix) in [
            (Op::Fp32, Kernel::Fp32 as fn(Isa) -> Kernel, "fp32"),
            (Op::Bf16Weights, Kernel::Bf16, "bf16"),
            (Op::Int8, Kernel::Int8, "int8"),
        ] {
            let best = Isa::best(op);
            out.extend(
                Isa::available(op).into_iter().filter(|i| *i != best).map(|i| (format!("{prefix}_{i}"), make(i))),
            );
        }
    }
    out
}

/// One shape's operands, made once for every path.
struct Operands {
    k: usize,
    n: usize,
    x: Vec<f32>,
    w: Vec<f32>,
    w_bf16: Vec<u16>,
    x_i8: Vec<i8>,
    x_scale: f32,
    w_i8: Vec<i8>,
    w_scales: Vec<f32>,
}

impl Operands {
    fn new(batch: usize, n: usize) -> Operands {
        let k = n;
        let seed = (batch * 1_000_003 + n) as u64;
        let (x, w) = (values(batch * k, seed), values(n * k, seed + 1));
        let w_scales = mlp::weight_scales(&w, k, mlp::INT8_PER_CHANNEL);
        let w_i8 = mlp::quantize(&w, k, &w_scales, mlp::INT8_PER_CHANNEL);
        let x_scale = x.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
        let x_i8 = x.iter().map(|v| (v / x_scale).round().clamp(-127.0, 127.0) as i8).collect();
        let w_bf16 = w.iter().map(|v| kernels::f32_to_bf16(*v)).collect();
        Operands { k, n, x, w, w_bf16, x_i8, x_scale, w_i8, w_scales }
    }
}

/// A kernel's weights, packed as it reads them.
enum Packed {
    Library,
    F32(PackedF<f32>),
    Bf16(PackedF<u16>),
    I8(PackedI8),
}

impl Packed {
    fn new(kernel: Kernel, o: &Operands) -> Packed {
        match kernel {
            Kernel::Library => Packed::Library,
            Kernel::Fp32(isa) => Packed::F32(PackedF::fp32(&o.w, o.k, isa)),
            Kernel::Bf16(isa) => Packed::Bf16(PackedF::bf16(&o.w_bf16, o.k, isa)),
            Kernel::Bf16Dot => Packed::Bf16(PackedF::bf16_dot(&o.w_bf16, o.k)),
            Kernel::Int8(isa) => Packed::I8(PackedI8::new(&o.w_i8, o.k, isa)),
        }
    }

    /// The product of the first `rows` rows (INT8 left in `acc`, not scaled back).
    fn run(&self, o: &Operands, rows: usize, y: &mut [f32], acc: &mut [i32]) {
        let (x, y) = (&o.x[..rows * o.k], &mut y[..rows * o.n]);
        match self {
            Packed::Library => kernels::gemm_f32_library(x, &o.w, o.k, y),
            Packed::F32(w) => gemm::gemm_f32(x, w, y),
            Packed::Bf16(w) => gemm::gemm_bf16(x, w, y),
            Packed::I8(w) => gemm::gemm_i8(&o.x_i8[..rows * o.k], w, &mut acc[..rows * o.n]),
        }
    }

    /// ‖y − y_ref‖ / ‖y_ref‖ over the first rows, INT8 scaled back to real values.
    fn error(&self, o: &Operands, reference: &[f64], y: &mut [f32], acc: &mut [i32]) -> f64 {
        let rows = reference.len() / o.n;
        self.run(o, rows, y, acc);
        if let Packed::I8(_) = self {
            for (i, a) in acc[..rows * o.n].iter().enumerate() {
                y[i] = *a as f32 * o.x_scale * o.w_scales[i % o.n];
            }
        }
        relative_error(&y[..rows * o.n], reference)
    }
}

/// What every shape is measured against.
pub struct Context<'a> {
    pub budget: Duration,
    pub features: &'a str,
    pub every_path: bool,
    pub anchor: Option<&'a Anchor>,
}

pub fn gemm_cases(batch: usize, n: usize, cx: &Context, out: &mut Vec<Measurement>) {
    let o = Operands::new(batch, n);
    let k = o.k;
    let rows = batch.min(CHECKED_ROWS);
    let reference: Vec<f64> = o.x[..rows * k]
        .chunks_exact(k)
        .flat_map(|r| {
            o.w.chunks_exact(k).map(move |c| r.iter().zip(c).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>())
        })
        .collect();
    let (mut y, mut acc) = (vec![0f32; batch * n], vec![0i32; batch * n]);
    let flops = 2.0 * (batch * n * k) as f64;
    let measured: Vec<(String, Kernel, Recorder, f64)> = paths(cx.every_path)
        .into_iter()
        .map(|(path, kernel)| {
            let packed = Packed::new(kernel, &o);
            let recorder = wall_per_call(|| packed.run(&o, batch, &mut y, &mut acc), cx.budget);
            let error = packed.error(&o, &reference, &mut y, &mut acc);
            (path, kernel, recorder, error)
        })
        .collect();
    let p50 = |name: &str| measured.iter().find(|m| m.0 == name).and_then(|m| m.2.stats()).map(|s| s.p50);
    let (library, own) = (p50("fp32_library"), p50("fp32"));
    let shape = [("batch", batch.to_string()), ("hidden", n.to_string()), ("cpu_features", cx.features.to_string())];
    // ONNX Runtime's seconds for the product on this shape, per precision.
    let anchor = |precision: &str| {
        let a = cx.anchor?;
        Some((a.find(batch, n, precision)?, a))
    };
    for precision in ["fp32", "int8"] {
        if let Some((r, a)) = anchor(precision) {
            let mut p = params(&shape);
            p.insert("onnxruntime".into(), a.version.clone());
            p.insert("call_overhead_s".into(), format!("{:.3e}", a.call_overhead_s));
            p.insert("op".into(), r.op.clone());
            let seconds = r.kernel_seconds(a.call_overhead_s);
            push(out, &format!("floor_onnxruntime_{precision}"), Unit::FlopPerSecond, &p, flops / seconds);
        }
    }
    for (path, kernel, recorder, error) in measured {
        let Some(stats) = recorder.stats() else { continue };
        let precision = kernel.precision();
        let mut p: BTreeMap<String, String> = params(&shape);
        p.extend(params(&[("path", path.clone()), ("precision", precision.into()), ("kernel", kernel.name())]));
        let throughput = flops / stats.p50;
        out.push(figure(Suite::Quant, "gemm_latency", Unit::Seconds, p.clone(), Some(stats)));
        let speed = figure(
            Suite::Quant,
            "gemm_throughput",
            Unit::FlopPerSecond,
            p.clone(),
            Some(crate::suites::single(throughput)),
        );
        out.push(speed);
        push(out, "gemm_relative_error", Unit::Ratio, &p, error);
        push(out, "gemm_weight_bytes", Unit::Bytes, &p, kernel.weight_bytes(n, k) as f64);
        if let (Some(library), Some(own)) = (library, own) {
            push(out, "gemm_speedup_vs_fp32_library", Unit::Ratio, &p, library / stats.p50);
            push(out, "gemm_speedup_vs_fp32_own", Unit::Ratio, &p, own / stats.p50);
        }
        // INT8 against ONNX Runtime's INT8; FP32 and BF16 against its FP32.
        let against = if precision == "int8" { "int8" } else { "fp32" };
        if let Some((r, a)) = anchor(against) {
            let seconds = r.kernel_seconds(a.call_overhead_s);
            push(out, &format!("gemm_ratio_vs_onnxruntime_{against}"), Unit::Ratio, &p, seconds / stats.p50);
        }
    }
}

/// The GEMM figures as the operator reads them at the end of a run: per shape and path,
/// throughput, its fraction of the core's peak and its ratio to ONNX Runtime.
pub fn table(ms: &[Measurement]) -> Vec<String> {
    let value = |case: &str, p: &BTreeMap<String, String>| {
        ms.iter().find(|m| m.case == case && m.parameters == *p).and_then(|m| m.stats).map(|s| s.p50)
    };
    let ort = ms
        .iter()
        .find_map(|m| m.parameters.get("onnxruntime"))
        .map_or("not measured".into(), |v| format!("{v}, 1 thread"));
    let mut lines = vec![
        format!("quant: GEMM y = x·Wᵀ, one core; ONNX Runtime {ort}"),
        format!(
            "  {:<16} {:<16} {:<28} {:>8} {:>8} {:>8}",
            "batch×hidden", "path", "kernel", "GOP/s", "of peak", "vs ORT"
        ),
    ];
    for m in ms.iter().filter(|m| m.case == "gemm_throughput") {
        let (Some(stats), p) = (m.stats, &m.parameters) else { continue };
        let get = |k: &str| p.get(k).cloned().unwrap_or_default();
        let against = if get("precision") == "int8" { "int8" } else { "fp32" };
        let ratio = value(&format!("gemm_ratio_vs_onnxruntime_{against}"), p);
        let peak = value("gemm_fraction_of_peak", p);
        lines.push(format!(
            "  {:<16} {:<16} {:<28} {:>8.1} {:>8} {:>8}",
            format!("{}×{}", get("batch"), get("hidden")),
            get("path"),
            get("kernel"),
            stats.p50 / 1e9,
            peak.map_or("–".into(), |f| format!("{:.0} %", f * 100.0)),
            ratio.map_or("–".into(), |r| format!("{r:.2}×")),
        ));
    }
    lines
}
