//! Dense layers `y = x · Wᵀ` (x: batch × k, W: n × k, row-major) at FP32, BF16 weights and INT8
//! with 32-bit accumulation. One portable body per precision, compiled twice: for the x86-64
//! baseline (SSE2) and for AVX2+FMA, chosen at run time; [`kernel_name`] says which ran.
#![allow(unsafe_code)]

/// Defines `pub fn $name` that runs `$body` compiled for AVX2+FMA when this CPU has them.
macro_rules! dispatched {
    ($(#[$meta:meta])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        pub fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) {
                    body($($arg),*)
                }
                if has_avx2() {
                    // SAFETY: AVX2 and FMA were detected on this CPU.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CPU's vector and matrix features that matter for these precisions, from /proc/cpuinfo.
pub fn cpu_features() -> Vec<&'static str> {
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = flags.lines().find(|l| l.starts_with("flags")).unwrap_or("").split_whitespace().collect();
    ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8"]
        .into_iter()
        .filter(|f| flags.contains(f))
        .collect()
}

const LANES: usize = 16;

#[inline(always)]
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let (a_body, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_body, b_tail) = b.split_at(a_body.len());
    for (x, y) in a_body.chunks_exact(LANES).zip(b_body.chunks_exact(LANES)) {
        for j in 0..LANES {
            acc[j] += x[j] * y[j];
        }
    }
    acc.iter().sum::<f32>() + a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum::<f32>()
}

#[inline(always)]
fn bf16_to_f32(v: u16) -> f32 {
    f32::from_bits(u32::from(v) << 16)
}

/// Rounds to the nearest BF16 (ties to even); NaN stays NaN.
pub fn f32_to_bf16(v: f32) -> u16 {
    if v.is_nan() {
        return 0x7fc0;
    }
    let bits = v.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

#[inline(always)]
fn dot_bf16(a: &[f32], b: &[u16]) -> f32 {
    let mut acc = [0f32; LANES];
    let (a_body, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_body, b_tail) = b.split_at(a_body.len());
    for (x, y) in a_body.chunks_exact(LANES).zip(b_body.chunks_exact(LANES)) {
        for j in 0..LANES {
            acc[j] += x[j] * bf16_to_f32(y[j]);
        }
    }
    acc.iter().sum::<f32>() + a_tail.iter().zip(b_tail).map(|(x, y)| x * bf16_to_f32(*y)).sum::<f32>()
}

#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Pairs of 16-bit products summed into 32-bit lanes: the shape of x86's `pmaddwd`, which
    // the compiler emits for this loop.
    let mut acc = [0i32; LANES];
    let (a_body, a_tail) = a.split_at(a.len() / (2 * LANES) * (2 * LANES));
    let (b_body, b_tail) = b.split_at(a_body.len());
    for (x, y) in a_body.chunks_exact(2 * LANES).zip(b_body.chunks_exact(2 * LANES)) {
        for j in 0..LANES {
            let lo = i32::from(i16::from(x[2 * j]) * i16::from(y[2 * j]));
            let hi = i32::from(i16::from(x[2 * j + 1]) * i16::from(y[2 * j + 1]));
            acc[j] += lo + hi;
        }
    }
    acc.iter().sum::<i32>() + a_tail.iter().zip(b_tail).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum::<i32>()
}

dispatched! {
    /// `y[i][o] = Σ_k x[i][k] · w[o][k]`.
    pub fn gemm_f32(x: &[f32], w: &[f32], k: usize, y: &mut [f32]) {
        let n = w.len() / k;
        for (row, out) in x.chunks_exact(k).zip(y.chunks_exact_mut(n)) {
            for (o, weights) in out.iter_mut().zip(w.chunks_exact(k)) {
                *o = dot_f32(row, weights);
            }
        }
    }
}

dispatched! {
    /// As [`gemm_f32`] with BF16 weights widened to FP32 as they are read.
    pub fn gemm_bf16(x: &[f32], w: &[u16], k: usize, y: &mut [f32]) {
        let n = w.len() / k;
        for (row, out) in x.chunks_exact(k).zip(y.chunks_exact_mut(n)) {
            for (o, weights) in out.iter_mut().zip(w.chunks_exact(k)) {
                *o = dot_bf16(row, weights);
            }
        }
    }
}

dispatched! {
    /// INT8 × INT8 with exact 32-bit accumulation.
    pub fn gemm_i8(x: &[i8], w: &[i8], k: usize, y: &mut [i32]) {
        let n = w.len() / k;
        for (row, out) in x.chunks_exact(k).zip(y.chunks_exact_mut(n)) {
            for (o, weights) in out.iter_mut().zip(w.chunks_exact(k)) {
                *o = dot_i8(row, weights);
            }
        }
    }
}

/// 1.5 × 2²³: added to a float of magnitude below 2²², it leaves the value rounded to the
/// nearest integer (ties to even) in the low bits of the mantissa.
const ROUNDING: f32 = 12_582_912.0;

dispatched! {
    /// `q = x / scale` clamped to [-127, 127] (NaN to -127) and rounded to the nearest integer,
    /// ties to even. By the float-addition trick, not `round` and `as`: rounding half away from
    /// zero is a library call per value and the saturating cast one branch per value, so
    /// neither vectorises.
    pub fn quantize_i8(x: &[f32], scale: f32, q: &mut [i8]) {
        let bias = ROUNDING.to_bits() as i32;
        for (v, o) in x.iter().zip(q.iter_mut()) {
            // Not `clamp`: it keeps NaN, which the bit trick would turn into any value.
            #[allow(clippy::manual_clamp)]
            let rounded = (v / scale).max(-127.0).min(127.0) + ROUNDING;
            *o = (rounded.to_bits() as i32 - bias) as i8;
        }
    }
}

/// FP32 through the `matrixmultiply` crate (its own runtime-dispatched SIMD kernels): the
/// library baseline the other precisions are compared with.
pub fn gemm_f32_library(x: &[f32], w: &[f32], k: usize, y: &mut [f32]) {
    let m = x.len() / k;
    let n = w.len() / k;
    assert!(x.len() == m * k && w.len() == n * k && y.len() == m * n, "shapes disagree");
    // SAFETY: the asserts above keep every index the strides describe inside the slices:
    // x is m × k (row stride k), W is n × k read as its transpose k × n (row stride 1, column
    // stride k), y is m × n (row stride n).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            x.as_ptr(),
            k as isize,
            1,
            w.as_ptr(),
            1,
            k as isize,
            0.0,
            y.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f32], w: &[f32], k: usize) -> Vec<f64> {
        let n = w.len() / k;
        x.chunks_exact(k)
            .flat_map(|row| w.chunks_exact(k).map(move |c| row.iter().zip(c).map(|(a, b)| *a as f64 * *b as f64).sum()))
            .collect::<Vec<f64>>()
            .into_iter()
            .take(x.len() / k * n)
            .collect()
    }

    #[test]
    fn every_kernel_agrees_with_a_float64_reference() {
        let (m, k, n) = (3, 37, 5);
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 31 % 17) as f32 - 8.0) / 7.0).collect();
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 13 % 11) as f32 - 5.0) / 3.0).collect();
        let want = reference(&x, &w, k);
        let mut y = vec![0.0; m * n];
        gemm_f32(&x, &w, k, &mut y);
        assert!(y.iter().zip(&want).all(|(a, b)| (*a as f64 - b).abs() < 1e-4), "{y:?} {want:?}");
        gemm_f32_library(&x, &w, k, &mut y);
        assert!(y.iter().zip(&want).all(|(a, b)| (*a as f64 - b).abs() < 1e-4), "{y:?} {want:?}");
        let wb: Vec<u16> = w.iter().map(|v| f32_to_bf16(*v)).collect();
        gemm_bf16(&x, &wb, k, &mut y);
        assert!(y.iter().zip(&want).all(|(a, b)| (*a as f64 - b).abs() < 0.05 * b.abs().max(1.0)));
        let xi: Vec<i8> = (0..m * k).map(|i| (i % 255) as i8).collect();
        let wi: Vec<i8> = (0..n * k).map(|i| (i * 7 % 255) as i8).collect();
        let mut acc = vec![0; m * n];
        gemm_i8(&xi, &wi, k, &mut acc);
        for (i, got) in acc.iter().enumerate() {
            let (r, c) = (i / n, i % n);
            let exact: i32 = (0..k).map(|j| xi[r * k + j] as i32 * wi[c * k + j] as i32).sum();
            assert_eq!(*got, exact);
        }
    }

    #[test]
    fn quantization_rounds_to_nearest_even_and_clamps() {
        let x = [0.5, 1.5, 2.5, -0.5, -1.5, 126.6, 300.0, -300.0, f32::NAN, 0.49, -2.51];
        let mut q = [0i8; 11];
        quantize_i8(&x, 1.0, &mut q);
        assert_eq!(q, [0, 2, 2, 0, -2, 127, 127, -127, -127, 0, -3]);
        let mut half = [0i8; 3];
        quantize_i8(&[1.0, -1.0, 0.3], 2.0, &mut half);
        assert_eq!(half, [0, 0, 0]);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(f32_to_bf16(3.140625)), 3.140625);
        // 1 + 2^-8 is exactly halfway between two BF16 values: ties go to the even one (1.0).
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
    }
}
