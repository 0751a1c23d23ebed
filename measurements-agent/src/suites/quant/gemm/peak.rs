//! The core's own limits, measured rather than read from a table: the clock (a chain of
//! dependent integer adds, one a cycle) and, for each kernel instruction this CPU has, how many
//! operations a second one core retires when nothing but that instruction runs (independent
//! accumulators in registers, no memory). A kernel's fraction of that is its fraction of the
//! hardware, whatever the number of ports or the width of the units behind the instruction.
#![allow(unsafe_code)]

use std::time::Instant;

use super::Isa;

/// Iterations of each loop (a few milliseconds), and how many loops: the fastest counts, so a
/// moment when the core ran alone (a busy SMT sibling halves its share) is found.
const ITERATIONS: u64 = 500_000;
const REPEATS: usize = 15;

/// One instruction's measured throughput.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    /// Operations a second (a multiply-add is two).
    pub ops: f64,
    /// `ops` over the measured clock.
    pub per_cycle: f64,
}

/// What one kernel family's instruction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instruction {
    /// FP32 FMA at the width of the path (AVX2: 256 bits, AVX-512: 512).
    Fma(Isa),
    /// The INT8 step of the path (`vpdpbusd`, or the AVX2/AVX-512BW sign-and-`vpmaddubsw`
    /// sequence the kernel runs).
    Int8(Isa),
    /// `vdpbf16ps`.
    Bf16Dot,
}

impl Instruction {
    pub fn name(self) -> String {
        match self {
            Instruction::Fma(isa) => format!("fp32_fma_{isa}"),
            Instruction::Int8(isa) => format!("int8_{isa}"),
            Instruction::Bf16Dot => "bf16_dot_avx512_bf16".into(),
        }
    }
}

/// The fastest of `REPEATS` runs of `f`, which does `ops` operations, in operations a second.
fn best(ops: f64, mut f: impl FnMut()) -> f64 {
    f();
    (0..REPEATS)
        .map(|_| {
            let start = Instant::now();
            f();
            ops / start.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}

/// Cycles a second of this core, from a loop of dependent register adds (one cycle each on
/// every x86-64 since the Pentium 4; a register operand, because recent Intel cores fold chains
/// of small immediate adds at rename); `None` off x86-64.
pub fn clock_hz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        Some(best(8.0 * ITERATIONS as f64, || {
            let (mut x, one) = (std::hint::black_box(0u64), std::hint::black_box(1u64));
            // SAFETY: register arithmetic only; both operands are ours and no memory is touched.
            unsafe {
                std::arch::asm!(
                    "2:",
                    "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                    "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                    "dec {n}",
                    "jnz 2b",
                    x = inout(reg) x,
                    one = in(reg) one,
                    n = inout(reg) ITERATIONS => _,
                    options(nomem, nostack),
                );
            }
            std::hint::black_box(x);
        }))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Throughput of `instruction` on this core, or `None` where the CPU lacks it.
pub fn peak(instruction: Instruction, clock: Option<f64>) -> Option<Peak> {
    #[cfg(target_arch = "x86_64")]
    {
        let ops = x86::throughput(instruction)?;
        Some(Peak { ops, per_cycle: clock.map_or(f64::NAN, |c| ops / c) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (instruction, clock);
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    use super::super::Isa;
    use super::{ITERATIONS, Instruction, best};

    /// Runs `$step` on `$chains` independent accumulators `ITERATIONS` times.
    macro_rules! chains {
        ($chains:literal, $zero:expr, |$acc:ident| $step:expr) => {{
            let mut accs = [$zero; $chains];
            for _ in 0..ITERATIONS {
                for $acc in accs.iter_mut() {
                    *$acc = $step;
                }
            }
            black_box(accs);
        }};
    }

    #[target_feature(enable = "avx2,fma")]
    fn fma256() {
        let (a, b) = (black_box(_mm256_set1_ps(1.0)), black_box(_mm256_set1_ps(1e-9)));
        chains!(12, _mm256_setzero_ps(), |acc| _mm256_fmadd_ps(a, b, *acc));
    }

    #[target_feature(enable = "avx512f")]
    fn fma512() {
        let (a, b) = (black_box(_mm512_set1_ps(1.0)), black_box(_mm512_set1_ps(1e-9)));
        chains!(16, _mm512_setzero_ps(), |acc| _mm512_fmadd_ps(a, b, *acc));
    }

    #[target_feature(enable = "avx2")]
    fn int8_avx2() {
        // The accumulator stands in for the weights, so no step can be hoisted out of the loop.
        let (x, ones) = (black_box(_mm256_set1_epi8(-3)), _mm256_set1_epi16(1));
        chains!(12, _mm256_setzero_si256(), |acc| {
            let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(*acc, x));
            _mm256_add_epi32(*acc, _mm256_madd_epi16(pairs, ones))
        });
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    fn int8_avx512bw() {
        let (x, ones) = (black_box(_mm512_set1_epi8(-3)), _mm512_set1_epi16(1));
        chains!(16, _mm512_setzero_si512(), |acc| {
            let signed_w = _mm512_mask_sub_epi8(*acc, _mm512_movepi8_mask(x), _mm512_setzero_si512(), *acc);
            let pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(x), signed_w);
            _mm512_add_epi32(*acc, _mm512_madd_epi16(pairs, ones))
        });
    }

    #[target_feature(enable = "avx2,avxvnni")]
    fn int8_avxvnni() {
        let (x, w) = (black_box(_mm256_set1_epi8(3)), black_box(_mm256_set1_epi8(5)));
        chains!(12, _mm256_setzero_si256(), |acc| _mm256_dpbusd_avx_epi32(*acc, x, w));
    }

    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    fn int8_vnni256_evex() {
        let (x, w) = (black_box(_mm256_set1_epi8(3)), black_box(_mm256_set1_epi8(5)));
        chains!(12, _mm256_setzero_si256(), |acc| _mm256_dpbusd_epi32(*acc, x, w));
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    fn int8_avx512vnni() {
        let (x, w) = (black_box(_mm512_set1_epi8(3)), black_box(_mm512_set1_epi8(5)));
        chains!(16, _mm512_setzero_si512(), |acc| _mm512_dpbusd_epi32(*acc, x, w));
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    fn bf16_dot() {
        // SAFETY: the same 64 bytes read as 32 BF16 values.
        let pair = unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(0x3f80_3f80)) };
        let (x, w) = (black_box(pair), black_box(pair));
        chains!(16, _mm512_setzero_ps(), |acc| _mm512_dpbf16_ps(*acc, x, w));
    }

    /// Operations a second of `instruction`, or `None` where this CPU lacks it.
    pub fn throughput(instruction: Instruction) -> Option<f64> {
        // Operations per instruction: lanes × products per lane × 2 (multiply and add).
        let (isa, ops, run): (Isa, f64, unsafe fn()) = match instruction {
            Instruction::Fma(Isa::Avx2) => (Isa::Avx2, 12.0 * 8.0 * 2.0, fma256),
            Instruction::Fma(Isa::Avx512) => (Isa::Avx512, 16.0 * 16.0 * 2.0, fma512),
            Instruction::Int8(Isa::Avx2) => (Isa::Avx2, 12.0 * 32.0 * 2.0, int8_avx2),
            Instruction::Int8(Isa::Avx512) => (Isa::Avx512, 16.0 * 64.0 * 2.0, int8_avx512bw),
            Instruction::Int8(Isa::AvxVnni) => (Isa::AvxVnni, 12.0 * 32.0 * 2.0, int8_avxvnni),
            Instruction::Int8(Isa::Vnni256Evex) => (Isa::Vnni256Evex, 12.0 * 32.0 * 2.0, int8_vnni256_evex),
            Instruction::Int8(Isa::Avx512Vnni) => (Isa::Avx512Vnni, 16.0 * 64.0 * 2.0, int8_avx512vnni),
            Instruction::Bf16Dot => (Isa::Avx512Bf16, 16.0 * 32.0 * 2.0, bf16_dot),
            _ => return None,
        };
        if !isa.runs_here() {
            return None;
        }
        // SAFETY: the path's features were detected on this CPU just above.
        Some(best(ops * ITERATIONS as f64, || unsafe { run() }))
    }
}
