//! The x86-64 micro-kernels behind [`super`]: one body per kernel family, written against a
//! small trait and compiled once per instruction set inside a `#[target_feature]` function, so
//! every intrinsic is inlined where its instructions are enabled.
//!
//! Two families, each an `MR × 2 vectors` block of outputs kept in registers over all of `k`:
//! - *dot*: each 32-bit lane of a weight vector holds one output column's next 4 INT8 (or 2
//!   BF16) weights; the input row's matching 4 bytes are broadcast and multiplied in one
//!   instruction (`vpdpbusd`, `vpmaddubsw` + `vpmaddwd`, `vdpbf16ps`).
//! - *fma*: each lane holds one column's weight at one k (FP32, or BF16 widened by a shift);
//!   the input value is broadcast and fused-multiply-added.
//!
//! # Safety
//! Every `unsafe fn` here asks two things of its caller: the instruction set it is written for
//! is present (each `#[target_feature]` entry point is called only after [`super::Isa`] found
//! it on this CPU), and each pointer is valid for the bytes it reads or writes (the block
//! loops in `dot_gemm` and `fma_gemm` keep them inside slices whose lengths they assert). The
//! one-intrinsic blocks in the trait implementations rely on exactly that and say no more.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// One instruction set's *dot* step.
pub trait Dot {
    type V: Copy;
    /// 32-bit lanes in `V`.
    const LANES: usize;
    /// Rows of inputs per block: as many as keep `2 × MR` accumulators and the temporaries in
    /// the register file.
    const MR: usize;
    unsafe fn zero() -> Self::V;
    /// A weight vector: `LANES × 4` bytes.
    unsafe fn load(p: *const u8) -> Self::V;
    /// The 4 bytes at `p` in every lane.
    unsafe fn splat(p: *const u8) -> Self::V;
    /// `acc + Σ₄ x·w` per lane.
    unsafe fn dot(acc: Self::V, x: Self::V, w: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// The first `cols` lanes of `v` (32-bit each) to `out`.
    unsafe fn store(v: Self::V, out: *mut u8, cols: usize);
}

/// One instruction set's *fma* step.
pub trait Fma {
    type V: Copy;
    const LANES: usize;
    const MR: usize;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: f32) -> Self::V;
    unsafe fn load_f32(p: *const f32) -> Self::V;
    /// `LANES` BF16 values widened to FP32 (a BF16 is the high half of its FP32).
    unsafe fn load_bf16(p: *const u16) -> Self::V;
    unsafe fn fma(acc: Self::V, x: Self::V, w: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn store(v: Self::V, out: *mut f32, cols: usize);
}

/// A weight element the *fma* family reads.
pub trait Weight: Copy {
    unsafe fn load<F: Fma>(p: *const Self) -> F::V;
}

impl Weight for f32 {
    #[inline(always)]
    unsafe fn load<F: Fma>(p: *const f32) -> F::V {
        unsafe { F::load_f32(p) }
    }
}

impl Weight for u16 {
    #[inline(always)]
    unsafe fn load<F: Fma>(p: *const u16) -> F::V {
        unsafe { F::load_bf16(p) }
    }
}

/// Stores the first `cols` of `N` 32-bit lanes held in `lanes`.
#[inline(always)]
unsafe fn store_partial<const N: usize>(lanes: [u32; N], out: *mut u8, cols: usize) {
    // SAFETY (caller): `out` has room for `cols ≤ N` 32-bit values.
    unsafe { std::ptr::copy_nonoverlapping(lanes.as_ptr().cast::<u8>(), out, cols.min(N) * 4) }
}

/// The integer-vector half of a [`Dot`] implementation, the same for every INT8 method at one
/// width: `ymm` (8 lanes) or `zmm` (16 lanes, masked partial stores).
macro_rules! int_lanes {
    (ymm) => {
        type V = __m256i;
        const LANES: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> __m256i {
            unsafe { _mm256_setzero_si256() }
        }
        #[inline(always)]
        unsafe fn load(p: *const u8) -> __m256i {
            unsafe { _mm256_loadu_si256(p.cast()) }
        }
        #[inline(always)]
        unsafe fn splat(p: *const u8) -> __m256i {
            unsafe { _mm256_set1_epi32(p.cast::<i32>().read_unaligned()) }
        }
        #[inline(always)]
        unsafe fn add(a: __m256i, b: __m256i) -> __m256i {
            unsafe { _mm256_add_epi32(a, b) }
        }
        #[inline(always)]
        unsafe fn store(v: __m256i, out: *mut u8, cols: usize) {
            unsafe {
                if cols >= 8 {
                    _mm256_storeu_si256(out.cast(), v)
                } else {
                    store_partial(std::mem::transmute::<__m256i, [u32; 8]>(v), out, cols)
                }
            }
        }
    };
    (zmm) => {
        type V = __m512i;
        const LANES: usize = 16;
        #[inline(always)]
        unsafe fn zero() -> __m512i {
            unsafe { _mm512_setzero_si512() }
        }
        #[inline(always)]
        unsafe fn load(p: *const u8) -> __m512i {
            unsafe { _mm512_loadu_si512(p.cast()) }
        }
        #[inline(always)]
        unsafe fn splat(p: *const u8) -> __m512i {
            unsafe { _mm512_set1_epi32(p.cast::<i32>().read_unaligned()) }
        }
        #[inline(always)]
        unsafe fn add(a: __m512i, b: __m512i) -> __m512i {
            unsafe { _mm512_add_epi32(a, b) }
        }
        #[inline(always)]
        unsafe fn store(v: __m512i, out: *mut u8, cols: usize) {
            unsafe { _mm512_mask_storeu_epi32(out.cast(), mask16(cols), v) }
        }
    };
}

fn mask16(cols: usize) -> __mmask16 {
    if cols >= 16 { 0xffff } else { (1u16 << cols) - 1 }
}

/// AVX2 INT8: `vpmaddubsw` multiplies unsigned by signed bytes and adds pairs into saturating
/// 16-bit lanes. With |x| as the unsigned side and w carrying x's sign (`vpsignb`), each pair is
/// at most 2 × 128 × 127 = 32 512 < 32 767, so nothing saturates and the result is exact for
/// weights in [-127, 127]; `vpmaddwd` by ones then adds pairs of pairs into 32-bit lanes.
pub struct Avx2;

impl Dot for Avx2 {
    int_lanes!(ymm);
    const MR: usize = 4;
    #[inline(always)]
    unsafe fn dot(acc: __m256i, x: __m256i, w: __m256i) -> __m256i {
        unsafe {
            let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x));
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
        }
    }
}

/// AVX-512BW INT8: the AVX2 method on 512-bit vectors, negating w under x's sign mask (AVX-512
/// has no `vpsignb`).
pub struct Avx512Bw;

impl Dot for Avx512Bw {
    int_lanes!(zmm);
    const MR: usize = 8;
    #[inline(always)]
    unsafe fn dot(acc: __m512i, x: __m512i, w: __m512i) -> __m512i {
        unsafe {
            let negative = _mm512_movepi8_mask(x);
            let signed_w = _mm512_mask_sub_epi8(w, negative, _mm512_setzero_si512(), w);
            let pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(x), signed_w);
            _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)))
        }
    }
}

/// AVX-512 VNNI INT8: `vpdpbusd` multiplies 4 unsigned by 4 signed bytes and adds them to a
/// 32-bit lane without saturating. The inputs are sent as x + 128 and 128 × Σ w is taken off
/// afterwards ([`super::PackedI8`] keeps those sums).
pub struct Avx512Vnni;

impl Dot for Avx512Vnni {
    int_lanes!(zmm);
    const MR: usize = 8;
    #[inline(always)]
    unsafe fn dot(acc: __m512i, x: __m512i, w: __m512i) -> __m512i {
        unsafe { _mm512_dpbusd_epi32(acc, x, w) }
    }
}

/// 256-bit `vpdpbusd`, as AVX-VNNI (VEX, Alder Lake and later) or AVX512-VNNI+VL (EVEX)
/// encodes it; `EVEX` picks the encoding, so the same body runs on either kind of CPU.
pub struct Vnni256<const EVEX: bool>;

impl<const EVEX: bool> Dot for Vnni256<EVEX> {
    int_lanes!(ymm);
    const MR: usize = 6;
    #[inline(always)]
    unsafe fn dot(acc: __m256i, x: __m256i, w: __m256i) -> __m256i {
        unsafe { if EVEX { _mm256_dpbusd_epi32(acc, x, w) } else { _mm256_dpbusd_avx_epi32(acc, x, w) } }
    }
}

/// AVX-512 BF16: `vdpbf16ps` multiplies pairs of BF16 and adds both products to an FP32 lane.
pub struct Avx512Bf16;

impl Dot for Avx512Bf16 {
    type V = __m512;
    const LANES: usize = 16;
    const MR: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_loadu_si512(p.cast())) }
    }
    #[inline(always)]
    unsafe fn splat(p: *const u8) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_set1_epi32(p.cast::<i32>().read_unaligned())) }
    }
    #[inline(always)]
    unsafe fn dot(acc: __m512, x: __m512, w: __m512) -> __m512 {
        // SAFETY: __m512bh and __m512 are the same 64 bytes, reinterpreted.
        unsafe {
            _mm512_dpbf16_ps(
                acc,
                std::mem::transmute::<__m512, __m512bh>(x),
                std::mem::transmute::<__m512, __m512bh>(w),
            )
        }
    }
    #[inline(always)]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(v: __m512, out: *mut u8, cols: usize) {
        unsafe { _mm512_mask_storeu_ps(out.cast(), mask16(cols), v) }
    }
}

/// AVX2 + FMA, 8 FP32 lanes; 6 rows keep 12 accumulators in the 16 registers.
pub struct Fma256;

impl Fma for Fma256 {
    type V = __m256;
    const LANES: usize = 8;
    const MR: usize = 6;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load_f32(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> __m256 {
        unsafe {
            let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
        }
    }
    #[inline(always)]
    unsafe fn fma(acc: __m256, x: __m256, w: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(x, w, acc) }
    }
    #[inline(always)]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(v: __m256, out: *mut f32, cols: usize) {
        unsafe {
            if cols >= 8 {
                _mm256_storeu_ps(out, v)
            } else {
                store_partial(std::mem::transmute::<__m256, [u32; 8]>(v), out.cast(), cols)
            }
        }
    }
}

/// AVX-512F, 16 FP32 lanes; 8 rows keep 16 accumulators in the 32 registers.
pub struct Fma512;

impl Fma for Fma512 {
    type V = __m512;
    const LANES: usize = 16;
    const MR: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load_f32(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> __m512 {
        unsafe {
            let wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()));
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(wide))
        }
    }
    #[inline(always)]
    unsafe fn fma(acc: __m512, x: __m512, w: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(x, w, acc) }
    }
    #[inline(always)]
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(v: __m512, out: *mut f32, cols: usize) {
        unsafe { _mm512_mask_storeu_ps(out, mask16(cols), v) }
    }
}

/// Where one block's operands are. `x` rows are `x_stride` bytes (or floats) apart, `y` rows
/// `y_stride` elements; the block is `rows ≤ MR` by `cols ≤ 2 × LANES`.
#[derive(Clone, Copy)]
pub struct Block<X, W, Y> {
    pub x: *const X,
    pub x_stride: usize,
    pub w: *const W,
    /// Steps of k: groups of 4 bytes (dot) or single values (fma).
    pub steps: usize,
    pub y: *mut Y,
    pub y_stride: usize,
    pub cols: usize,
}

/// Runs `$call::<MR, CHAINS>` for a runtime row count 1..=8, each count its own unrolled kernel.
/// One or two rows give too few accumulators to hide the multiply's latency, so their k-steps
/// are dealt round-robin to 4 or 2 independent chains, added up at the end.
macro_rules! by_rows {
    ($rows:expr, $call:ident :: <$($t:ty),*>($($arg:expr),*)) => {
        match $rows {
            1 => $call::<$($t,)* 1, 4>($($arg),*),
            2 => $call::<$($t,)* 2, 2>($($arg),*),
            3 => $call::<$($t,)* 3, 1>($($arg),*),
            4 => $call::<$($t,)* 4, 1>($($arg),*),
            5 => $call::<$($t,)* 5, 1>($($arg),*),
            6 => $call::<$($t,)* 6, 1>($($arg),*),
            7 => $call::<$($t,)* 7, 1>($($arg),*),
            _ => $call::<$($t,)* 8, 1>($($arg),*),
        }
    };
}

/// Deals `$steps` k-steps to `$chains` chains round-robin (the rest to chain 0), running
/// `$step(s, chain)` for each. A macro, not a closure: a closure is a function of its own,
/// without the caller's target features, and where the inliner leaves it out of line every
/// intrinsic in it becomes a call.
macro_rules! deal {
    ($steps:expr, $chains:expr, $step:ident::<$($t:ty),*>($($arg:expr),*)) => {{
        let whole = $steps / $chains * $chains;
        let mut s = 0;
        while s < whole {
            for chain in 0..$chains {
                $step::<$($t),*>($($arg,)* s + chain, chain);
            }
            s += $chains;
        }
        while s < $steps {
            $step::<$($t),*>($($arg,)* s, 0);
            s += 1;
        }
    }};
}

/// One k-step of a *dot* block on chain `chain`.
#[inline(always)]
unsafe fn dot_step<D: Dot, const MR: usize, const CHAINS: usize>(
    acc: &mut [[[D::V; 2]; CHAINS]; MR],
    b: &Block<u8, u8, u8>,
    s: usize,
    chain: usize,
) {
    let group = D::LANES * 4;
    // SAFETY (caller): step s of every row and of the panel is inside x and w.
    unsafe {
        let w0 = D::load(b.w.add(s * 2 * group));
        let w1 = D::load(b.w.add(s * 2 * group + group));
        for (i, a) in acc.iter_mut().enumerate() {
            let x = D::splat(b.x.add(i * b.x_stride + s * 4));
            a[chain][0] = D::dot(a[chain][0], x, w0);
            a[chain][1] = D::dot(a[chain][1], x, w1);
        }
    }
}

#[inline(always)]
unsafe fn dot_block<D: Dot, const MR: usize, const CHAINS: usize>(b: Block<u8, u8, u8>) {
    // SAFETY (caller): x holds MR rows of `steps × 4` bytes, w a panel of `steps` groups of
    // `2 × LANES × 4` bytes, y MR rows with room for `cols` 32-bit values.
    unsafe {
        let mut acc = [[[D::zero(); 2]; CHAINS]; MR];
        deal!(b.steps, CHAINS, dot_step::<D, MR, CHAINS>(&mut acc, &b));
        for (i, a) in acc.iter().enumerate() {
            let out = b.y.add(i * b.y_stride * 4);
            let (mut lo, mut hi) = (a[0][0], a[0][1]);
            for c in &a[1..] {
                (lo, hi) = (D::add(lo, c[0]), D::add(hi, c[1]));
            }
            D::store(lo, out, b.cols);
            if b.cols > D::LANES {
                D::store(hi, out.add(D::LANES * 4), b.cols - D::LANES);
            }
        }
    }
}

/// One k-step of an *fma* block on chain `chain`.
#[inline(always)]
unsafe fn fma_step<F: Fma, W: Weight, const MR: usize, const CHAINS: usize>(
    acc: &mut [[[F::V; 2]; CHAINS]; MR],
    b: &Block<f32, W, f32>,
    s: usize,
    chain: usize,
) {
    // SAFETY (caller): step s of every row and of the panel is inside x and w.
    unsafe {
        let w0 = W::load::<F>(b.w.add(s * 2 * F::LANES));
        let w1 = W::load::<F>(b.w.add(s * 2 * F::LANES + F::LANES));
        for (i, a) in acc.iter_mut().enumerate() {
            let x = F::splat(*b.x.add(i * b.x_stride + s));
            a[chain][0] = F::fma(a[chain][0], x, w0);
            a[chain][1] = F::fma(a[chain][1], x, w1);
        }
    }
}

#[inline(always)]
unsafe fn fma_block<F: Fma, W: Weight, const MR: usize, const CHAINS: usize>(b: Block<f32, W, f32>) {
    // SAFETY (caller): x holds MR rows of `steps` floats, w a panel of `steps × 2 × LANES`
    // weights, y MR rows with room for `cols` floats.
    unsafe {
        let mut acc = [[[F::zero(); 2]; CHAINS]; MR];
        deal!(b.steps, CHAINS, fma_step::<F, W, MR, CHAINS>(&mut acc, &b));
        for (i, a) in acc.iter().enumerate() {
            let out = b.y.add(i * b.y_stride);
            let (mut lo, mut hi) = (a[0][0], a[0][1]);
            for c in &a[1..] {
                (lo, hi) = (F::add(lo, c[0]), F::add(hi, c[1]));
            }
            F::store(lo, out, b.cols);
            if b.cols > F::LANES {
                F::store(hi, out.add(F::LANES), b.cols - F::LANES);
            }
        }
    }
}

/// The whole product for the *dot* family: panel by panel, `MR` rows at a time.
/// `x`: `m` rows of `x_stride` bytes; `w`: panels of `steps × 2 × LANES × 4` bytes;
/// `y`: `m × n` 32-bit values.
#[inline(always)]
unsafe fn dot_gemm<D: Dot>(x: &[u8], x_stride: usize, w: &[u8], steps: usize, y: &mut [u8], m: usize, n: usize) {
    let nr = 2 * D::LANES;
    let panel = steps * nr * 4;
    assert!(x.len() >= m * x_stride && x_stride >= steps * 4 && w.len() >= n.div_ceil(nr) * panel);
    assert!(y.len() >= m * n * 4, "y holds m × n 32-bit values");
    let y = y.as_mut_ptr();
    for (p, col) in (0..n).step_by(nr).enumerate() {
        let mut row = 0;
        while row < m {
            let rows = D::MR.min(m - row);
            // SAFETY: the asserts above and the loop bounds keep the block inside x, w and y.
            unsafe {
                let b = Block {
                    x: x.as_ptr().add(row * x_stride),
                    x_stride,
                    w: w.as_ptr().add(p * panel),
                    steps,
                    y: y.add((row * n + col) * 4),
                    y_stride: n,
                    cols: (n - col).min(nr),
                };
                by_rows!(rows, dot_block::<D>(b));
            }
            row += rows;
        }
    }
}

#[inline(always)]
unsafe fn fma_gemm<F: Fma, W: Weight>(x: &[f32], k: usize, w: &[W], y: &mut [f32], n: usize) {
    let (nr, m) = (2 * F::LANES, x.len() / k);
    assert!(x.len() == m * k && y.len() == m * n && w.len() >= n.div_ceil(nr) * k * nr);
    for (p, col) in (0..n).step_by(nr).enumerate() {
        let mut row = 0;
        while row < m {
            let rows = F::MR.min(m - row);
            // SAFETY: the assert above and the loop bounds keep the block inside x, w and y.
            unsafe {
                let b = Block {
                    x: x.as_ptr().add(row * k),
                    x_stride: k,
                    w: w.as_ptr().add(p * k * nr),
                    steps: k,
                    y: y.as_mut_ptr().add(row * n + col),
                    y_stride: n,
                    cols: (n - col).min(nr),
                };
                by_rows!(rows, fma_block::<F, W>(b));
            }
            row += rows;
        }
    }
}

/// Defines a `#[target_feature]` entry point for one instruction set of the *dot* family.
macro_rules! dot_entry {
    ($name:ident, $isa:ty, $features:literal) => {
        /// # Safety
        /// The CPU has the named features.
        #[target_feature(enable = $features)]
        pub unsafe fn $name(x: &[u8], x_stride: usize, w: &[u8], steps: usize, y: &mut [u8], m: usize, n: usize) {
            unsafe { dot_gemm::<$isa>(x, x_stride, w, steps, y, m, n) }
        }
    };
}

dot_entry!(dot_avx2, Avx2, "avx2");
dot_entry!(dot_avx512bw, Avx512Bw, "avx512f,avx512bw");
dot_entry!(dot_avx512vnni, Avx512Vnni, "avx512f,avx512bw,avx512vnni");
dot_entry!(dot_avxvnni, Vnni256<false>, "avx2,avxvnni");
dot_entry!(dot_vnni256_evex, Vnni256<true>, "avx2,avx512f,avx512vl,avx512vnni");
dot_entry!(dot_avx512bf16, Avx512Bf16, "avx512f,avx512bw,avx512bf16");

/// An entry point of the *fma* family for weights of type `W`.
pub type FmaEntry<W> = unsafe fn(&[f32], usize, &[W], &mut [f32], usize);

/// Defines a `#[target_feature]` entry point for one instruction set and weight type of the
/// *fma* family.
macro_rules! fma_entry {
    ($name:ident, $isa:ty, $weight:ty, $features:literal) => {
        /// # Safety
        /// The CPU has the named features.
        #[target_feature(enable = $features)]
        pub unsafe fn $name(x: &[f32], k: usize, w: &[$weight], y: &mut [f32], n: usize) {
            unsafe { fma_gemm::<$isa, $weight>(x, k, w, y, n) }
        }
    };
}

fma_entry!(fma_f32_avx2, Fma256, f32, "avx2,fma");
fma_entry!(fma_bf16_avx2, Fma256, u16, "avx2,fma");
fma_entry!(fma_f32_avx512, Fma512, f32, "avx512f");
fma_entry!(fma_bf16_avx512, Fma512, u16, "avx512f");
