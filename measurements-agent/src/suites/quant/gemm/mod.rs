//! Packed, register-blocked GEMM `y = x · Wᵀ` (x: m × k, W: n × k, row-major) for INT8 with
//! 32-bit accumulation, FP32, BF16 weights with FP32 inputs, and BF16 × BF16, on every x86-64
//! instruction set that has a faster way than the portable loops in [`super::kernels`], which
//! stay as the fallback and the reference.
//!
//! Weights are packed once, as inference runtimes pre-pack them: panels of `2 × LANES` output
//! columns, within a panel the weights of one k-step side by side, so the kernel streams each
//! panel once per block of rows and keeps `rows × 2` vectors of outputs in registers over all
//! of k. The instruction sets are chosen at run time; [`Isa::available`] lists those this CPU
//! runs, and each can be asked for by name so the suite measures every one.

pub mod peak;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::fmt;

use super::kernels;

/// One instruction-set path through the kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// The autovectorised loops of [`kernels`], for any CPU.
    Portable,
    /// AVX2 (+ FMA): INT8 by `vpmaddubsw`/`vpmaddwd`, FP32 and BF16 weights by FMA.
    Avx2,
    /// AVX-512 F+BW: the same on 512-bit vectors.
    Avx512,
    /// AVX-VNNI (256-bit `vpdpbusd`, VEX): INT8 only.
    AvxVnni,
    /// AVX-512 VNNI at 256 bits (EVEX): the AVX-VNNI kernel's body on an AVX-512 CPU.
    Vnni256Evex,
    /// AVX-512 VNNI (512-bit `vpdpbusd`): INT8 only.
    Avx512Vnni,
    /// AVX-512 BF16 (`vdpbf16ps`): BF16 × BF16 only.
    Avx512Bf16,
}

/// Which product a kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Int8,
    Fp32,
    /// BF16 weights widened to FP32, FP32 inputs.
    Bf16Weights,
    /// BF16 weights and inputs rounded to BF16, FP32 accumulation.
    Bf16Dot,
}

impl Isa {
    /// The path's name as stored in a measurement's `kernel` parameter.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512bw",
            Isa::AvxVnni => "avx_vnni",
            Isa::Vnni256Evex => "avx512_vnni_256",
            Isa::Avx512Vnni => "avx512_vnni",
            Isa::Avx512Bf16 => "avx512_bf16",
        }
    }

    /// The products this path computes.
    pub fn ops(self) -> &'static [Op] {
        match self {
            Isa::Portable | Isa::Avx2 | Isa::Avx512 => &[Op::Int8, Op::Fp32, Op::Bf16Weights],
            Isa::AvxVnni | Isa::Vnni256Evex | Isa::Avx512Vnni => &[Op::Int8],
            Isa::Avx512Bf16 => &[Op::Bf16Dot],
        }
    }

    /// Whether this CPU runs the path.
    pub fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                Isa::Portable => true,
                Isa::Avx2 => has!("avx2") && has!("fma"),
                Isa::Avx512 => has!("avx512f") && has!("avx512bw"),
                Isa::AvxVnni => has!("avx2") && has!("avxvnni"),
                Isa::Vnni256Evex => has!("avx2") && has!("avx512f") && has!("avx512vl") && has!("avx512vnni"),
                Isa::Avx512Vnni => has!("avx512f") && has!("avx512bw") && has!("avx512vnni"),
                Isa::Avx512Bf16 => has!("avx512f") && has!("avx512bw") && has!("avx512bf16"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Portable
        }
    }

    /// Every path this CPU runs for `op`, fastest last.
    pub fn available(op: Op) -> Vec<Isa> {
        let all =
            [Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::AvxVnni, Isa::Vnni256Evex, Isa::Avx512Vnni, Isa::Avx512Bf16];
        all.into_iter().filter(|i| i.ops().contains(&op) && i.runs_here()).collect()
    }

    /// The path the MLP and the headline figures use for `op`.
    pub fn best(op: Op) -> Isa {
        *Isa::available(op).last().unwrap_or(&Isa::Portable)
    }

    /// Output columns per packed panel.
    fn panel(self) -> usize {
        match self {
            Isa::Portable => 0,
            Isa::Avx2 | Isa::AvxVnni | Isa::Vnni256Evex => 16,
            Isa::Avx512 | Isa::Avx512Vnni | Isa::Avx512Bf16 => 32,
        }
    }

    /// Whether the INT8 path sends x + 128 as unsigned bytes (VNNI) rather than x itself.
    fn offset(self) -> bool {
        matches!(self, Isa::AvxVnni | Isa::Vnni256Evex | Isa::Avx512Vnni)
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rows of `k` values (row-major, `n × k`) laid out in panels of `nr` rows, each panel `group`
/// consecutive values of one row side by side, k padded with `T::default()` to a whole group.
fn pack<T: Copy + Default>(w: &[T], k: usize, nr: usize, group: usize) -> Vec<T> {
    let n = w.len() / k;
    let kp = k.div_ceil(group) * group;
    let mut out = vec![T::default(); n.div_ceil(nr) * kp * nr];
    for (col, row) in w.chunks_exact(k).enumerate() {
        let (panel, c) = (col / nr, col % nr);
        for (kk, v) in row.iter().enumerate() {
            out[panel * kp * nr + (kk / group) * nr * group + c * group + kk % group] = *v;
        }
    }
    out
}

/// The longest k whose INT8 products always fit in 32 bits: 128 × 127 × k < 2³¹.
pub const MAX_K: usize = 132_104;

/// INT8 weights packed for one path, with what that path needs to finish the product.
pub struct PackedI8 {
    isa: Isa,
    k: usize,
    n: usize,
    data: Vec<i8>,
    /// 128 × Σ_k w per column, for the paths that send x + 128.
    offset: Vec<i32>,
}

impl PackedI8 {
    /// Packs `w` (`n × k`, symmetric INT8 in [-127, 127], as [`super::mlp::quantize`] makes
    /// them; -128 would overflow the AVX2 method's sign trick) for `isa`.
    pub fn new(w: &[i8], k: usize, isa: Isa) -> PackedI8 {
        assert!(k > 0 && w.len().is_multiple_of(k), "weights are n × k");
        assert!(k <= MAX_K, "k = {k} could overflow 32-bit accumulation (at most {MAX_K})");
        assert!(w.iter().all(|v| *v != i8::MIN), "INT8 weights are symmetric, in [-127, 127]");
        assert!(isa.ops().contains(&Op::Int8), "{isa} has no INT8 kernel");
        let n = w.len() / k;
        let data = if isa == Isa::Portable { w.to_vec() } else { pack(w, k, isa.panel(), 4) };
        let offset = if isa.offset() {
            // |Σ w| ≤ 127 k, so 128 Σ w fits in 32 bits for k ≤ MAX_K.
            w.chunks_exact(k).map(|row| 128 * row.iter().map(|v| i32::from(*v)).sum::<i32>()).collect()
        } else {
            Vec::new()
        };
        PackedI8 { isa, k, n, data, offset }
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }
}

thread_local! {
    /// Inputs as the kernel reads them (k padded to a group; + 128 for VNNI), reused.
    static STAGED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `y[i][o] = Σ_k x[i][k] · w[o][k]`, exact in 32 bits.
pub fn gemm_i8(x: &[i8], w: &PackedI8, y: &mut [i32]) {
    let (k, n) = (w.k, w.n);
    let m = x.len() / k;
    assert!(x.len() == m * k && y.len() == m * n, "shapes disagree: x {} , k {k}, n {n}, y {}", x.len(), y.len());
    if n == 0 {
        return;
    }
    if w.isa == Isa::Portable {
        return kernels::gemm_i8(x, &w.data, k, y);
    }
    let kp = k.div_ceil(4) * 4;
    let flip = if w.isa.offset() { 0x80 } else { 0 };
    STAGED.with_borrow_mut(|staged| {
        staged.clear();
        for row in x.chunks_exact(k) {
            staged.extend(row.iter().map(|v| *v as u8 ^ flip));
            staged.extend(std::iter::repeat_n(flip, kp - k));
        }
        let data: &[u8] = bytemuck::cast_slice(&w.data);
        run_dot(w.isa, staged, kp, data, kp / 4, bytemuck::cast_slice_mut(y), m, n);
    });
    if w.isa.offset() {
        // Σ (x + 128) w − 128 Σ w: the first sum may pass 2³¹ on the way (it holds 255 × 127
        // per term), so both wrap, and the difference is the exact product.
        for row in y.chunks_exact_mut(n) {
            for (v, o) in row.iter_mut().zip(&w.offset) {
                *v = v.wrapping_sub(*o);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_dot(isa: Isa, x: &[u8], x_stride: usize, w: &[u8], steps: usize, y: &mut [u8], m: usize, n: usize) {
    assert!(isa.runs_here(), "{isa} does not run on this CPU");
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: the path runs on this CPU (asserted above); the kernels check x, w and y against
    // m, n and steps.
    unsafe {
        match isa {
            Isa::Avx2 => x86::dot_avx2(x, x_stride, w, steps, y, m, n),
            Isa::Avx512 => x86::dot_avx512bw(x, x_stride, w, steps, y, m, n),
            Isa::AvxVnni => x86::dot_avxvnni(x, x_stride, w, steps, y, m, n),
            Isa::Vnni256Evex => x86::dot_vnni256_evex(x, x_stride, w, steps, y, m, n),
            Isa::Avx512Vnni => x86::dot_avx512vnni(x, x_stride, w, steps, y, m, n),
            Isa::Avx512Bf16 => x86::dot_avx512bf16(x, x_stride, w, steps, y, m, n),
            Isa::Portable => unreachable!("the portable path has no packed kernel"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, x_stride, w, steps, y, m, n);
}

/// FP32 or BF16 weights packed for one FMA path (or BF16 pairs for [`Isa::Avx512Bf16`]).
pub struct PackedF<T> {
    isa: Isa,
    k: usize,
    n: usize,
    data: Vec<T>,
}

impl<T: Copy + Default> PackedF<T> {
    fn with(w: &[T], k: usize, isa: Isa, op: Op, group: usize) -> PackedF<T> {
        assert!(k > 0 && w.len().is_multiple_of(k), "weights are n × k");
        assert!(isa.ops().contains(&op), "{isa} has no {op:?} kernel");
        let data = if isa == Isa::Portable { w.to_vec() } else { pack(w, k, isa.panel(), group) };
        PackedF { isa, k, n: w.len() / k, data }
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }
}

impl PackedF<f32> {
    pub fn fp32(w: &[f32], k: usize, isa: Isa) -> Self {
        Self::with(w, k, isa, Op::Fp32, 1)
    }
}

impl PackedF<u16> {
    /// BF16 weights for the FMA paths (FP32 inputs).
    pub fn bf16(w: &[u16], k: usize, isa: Isa) -> Self {
        Self::with(w, k, isa, Op::Bf16Weights, 1)
    }

    /// BF16 weights for `vdpbf16ps` (inputs rounded to BF16 as they are staged).
    pub fn bf16_dot(w: &[u16], k: usize) -> Self {
        Self::with(w, k, Isa::Avx512Bf16, Op::Bf16Dot, 2)
    }
}

/// `y = x · Wᵀ` in FP32 (FP32 weights).
pub fn gemm_f32(x: &[f32], w: &PackedF<f32>, y: &mut [f32]) {
    if !check(x.len(), w.k, w.n, y.len()) {
        return;
    }
    fma(x, w, y)
}

/// `y = x · Wᵀ` with BF16 weights: FP32 inputs and accumulation, or for
/// [`Isa::Avx512Bf16`] inputs rounded to BF16 too.
pub fn gemm_bf16(x: &[f32], w: &PackedF<u16>, y: &mut [f32]) {
    if !check(x.len(), w.k, w.n, y.len()) {
        return;
    }
    if w.isa == Isa::Avx512Bf16 {
        let (k, kp) = (w.k, w.k.div_ceil(2) * 2);
        return STAGED.with_borrow_mut(|staged| {
            staged.clear();
            for row in x.chunks_exact(k) {
                let values = row.iter().map(|v| kernels::f32_to_bf16(*v)).chain(std::iter::repeat_n(0, kp - k));
                staged.extend(values.flat_map(u16::to_le_bytes));
            }
            let data: &[u8] = bytemuck::cast_slice(&w.data);
            run_dot(w.isa, staged, kp * 2, data, kp / 2, bytemuck::cast_slice_mut(y), x.len() / k, w.n);
        });
    }
    fma(x, w, y)
}

/// A weight type of the FMA family: its kernel per path.
trait FmaWeight: Sized {
    #[cfg(target_arch = "x86_64")]
    const AVX2: x86::FmaEntry<Self>;
    #[cfg(target_arch = "x86_64")]
    const AVX512: x86::FmaEntry<Self>;
    const PORTABLE: fn(&[f32], &[Self], usize, &mut [f32]);
}

impl FmaWeight for f32 {
    #[cfg(target_arch = "x86_64")]
    const AVX2: x86::FmaEntry<f32> = x86::fma_f32_avx2;
    #[cfg(target_arch = "x86_64")]
    const AVX512: x86::FmaEntry<f32> = x86::fma_f32_avx512;
    const PORTABLE: fn(&[f32], &[f32], usize, &mut [f32]) = kernels::gemm_f32;
}

impl FmaWeight for u16 {
    #[cfg(target_arch = "x86_64")]
    const AVX2: x86::FmaEntry<u16> = x86::fma_bf16_avx2;
    #[cfg(target_arch = "x86_64")]
    const AVX512: x86::FmaEntry<u16> = x86::fma_bf16_avx512;
    const PORTABLE: fn(&[f32], &[u16], usize, &mut [f32]) = kernels::gemm_bf16;
}

/// The FMA family's product on `w`'s path.
fn fma<T: FmaWeight>(x: &[f32], w: &PackedF<T>, y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        let entry = match w.isa {
            Isa::Avx2 => Some(T::AVX2),
            Isa::Avx512 => Some(T::AVX512),
            _ => None,
        };
        if let Some(entry) = entry.filter(|_| w.isa.runs_here()) {
            #[allow(unsafe_code)]
            // SAFETY: the path's features were detected on this CPU; the kernel checks shapes.
            return unsafe { entry(x, w.k, &w.data, y, w.n) };
        }
    }
    assert_eq!(w.isa, Isa::Portable, "{} does not run on this CPU", w.isa);
    T::PORTABLE(x, &w.data, w.k, y)
}

/// Whether there is anything to compute, after checking the shapes agree.
fn check(x: usize, k: usize, n: usize, y: usize) -> bool {
    let m = x / k;
    assert!(x == m * k && y == m * n, "shapes disagree: x {x}, k {k}, n {n}, y {y}");
    n > 0 && m > 0
}

#[cfg(test)]
mod tests;
