use super::*;
use crate::suites::quant::kernels::f32_to_bf16;

/// Shapes that leave every edge: one row, a partial row block, k not a multiple of a group,
/// n not a multiple of a panel, and a panel wider than n.
const SHAPES: [(usize, usize, usize); 12] = [
    (0, 8, 16),
    (2, 8, 0),
    (1, 1, 3),
    (2, 2, 17),
    (3, 3, 33),
    (1, 4, 1),
    (1, 64, 10),
    (3, 37, 5),
    (7, 130, 33),
    (9, 64, 128),
    (17, 67, 47),
    (64, 256, 96),
];

fn ints(n: usize, seed: u64, low: i32) -> Vec<i8> {
    let mut rng = model::plan::rng::Rng::seeded(seed);
    (0..n).map(|_| (low + (rng.next_u64() % (128 - low as i64) as u64) as i32) as i8).collect()
}

fn exact_i8(x: &[i8], w: &[i8], k: usize) -> Vec<i32> {
    x.chunks_exact(k)
        .flat_map(|r| w.chunks_exact(k).map(move |c| r.iter().zip(c).map(|(a, b)| i32::from(*a) * i32::from(*b)).sum()))
        .collect()
}

#[test]
fn every_int8_path_here_is_exact_on_every_edge_and_at_the_extremes() {
    let paths = Isa::available(Op::Int8);
    assert!(paths.contains(&Isa::Portable));
    for (m, k, n) in SHAPES {
        // Random values over the whole range (x may be -128, w may not), then all extremes.
        let cases = [
            (ints(m * k, (m * k) as u64, -128), ints(n * k, (n + k) as u64, -127)),
            (vec![-128; m * k], vec![127; n * k]),
            (vec![127; m * k], vec![-127; n * k]),
            (vec![-127; m * k], vec![-127; n * k]),
            (vec![-128; m * k], vec![-127; n * k]),
        ];
        for (x, w) in cases {
            let want = exact_i8(&x, &w, k);
            for &isa in &paths {
                let packed = PackedI8::new(&w, k, isa);
                let mut y = vec![i32::MIN; m * n];
                gemm_i8(&x, &packed, &mut y);
                assert_eq!(y, want, "{isa} at {m} × {k} × {n}");
            }
        }
    }
}

#[test]
fn every_float_path_here_agrees_with_a_float64_reference() {
    for (m, k, n) in SHAPES {
        let mut rng = model::plan::rng::Rng::seeded((m * 7 + k * 3 + n) as u64);
        let mut value = || (rng.open01() * 2.0 - 1.0) as f32;
        let x: Vec<f32> = (0..m * k).map(|_| value()).collect();
        let w: Vec<f32> = (0..n * k).map(|_| value()).collect();
        let wb: Vec<u16> = w.iter().map(|v| f32_to_bf16(*v)).collect();
        let widen = |b: u16| f32::from_bits(u32::from(b) << 16) as f64;
        // What each product should be: FP32 weights, BF16 weights, BF16 weights and inputs.
        let reference = |xs: &dyn Fn(f32) -> f64, ws: &dyn Fn(usize) -> f64| -> (Vec<f64>, Vec<f64>) {
            let mut exact = Vec::new();
            let mut magnitude = Vec::new();
            for r in x.chunks_exact(k) {
                for c in 0..n {
                    let terms = r.iter().enumerate().map(|(j, v)| xs(*v) * ws(c * k + j));
                    exact.push(terms.clone().sum());
                    magnitude.push(terms.map(f64::abs).sum());
                }
            }
            (exact, magnitude)
        };
        let fp32 = reference(&|v| v as f64, &|i| w[i] as f64);
        let bf16w = reference(&|v| v as f64, &|i| widen(wb[i]));
        let bf16 = reference(&|v| widen(f32_to_bf16(v)), &|i| widen(wb[i]));
        // FP32 accumulation of k terms: each partial sum rounds by at most 2^-24 of its size.
        let close = |y: &[f32], (exact, magnitude): &(Vec<f64>, Vec<f64>), what: &str| {
            for (i, got) in y.iter().enumerate() {
                let bound = magnitude[i] * k as f64 * f64::from(f32::EPSILON) + 1e-30;
                assert!((*got as f64 - exact[i]).abs() <= bound, "{what} {m}×{k}×{n} [{i}]: {got} vs {}", exact[i]);
            }
        };
        for isa in Isa::available(Op::Fp32) {
            let mut y = vec![f32::NAN; m * n];
            gemm_f32(&x, &PackedF::fp32(&w, k, isa), &mut y);
            close(&y, &fp32, &format!("fp32 {isa}"));
        }
        for isa in Isa::available(Op::Bf16Weights) {
            let mut y = vec![f32::NAN; m * n];
            gemm_bf16(&x, &PackedF::bf16(&wb, k, isa), &mut y);
            close(&y, &bf16w, &format!("bf16 weights {isa}"));
        }
        if Isa::Avx512Bf16.runs_here() {
            let mut y = vec![f32::NAN; m * n];
            gemm_bf16(&x, &PackedF::bf16_dot(&wb, k), &mut y);
            close(&y, &bf16, "bf16 dot");
        }
    }
}

#[test]
fn packing_puts_each_weight_where_the_kernel_reads_it() {
    // 3 rows of k = 5, panels of 2 rows, groups of 4: k pads to 8, n to 4.
    let w: Vec<u8> = (1..=15).collect();
    let packed = pack(&w, 5, 2, 4);
    #[rustfmt::skip]
    let want = [
        1, 2, 3, 4, 6, 7, 8, 9, 5, 0, 0, 0, 10, 0, 0, 0,
        11, 12, 13, 14, 0, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(packed, want);
}

#[test]
fn the_longest_exact_k_is_exact_on_every_path() {
    // 128 × 127 × MAX_K is just below 2³¹: the largest product any path can be asked for.
    let (x, w) = (vec![-128i8; MAX_K], vec![127i8; 2 * MAX_K]);
    for isa in Isa::available(Op::Int8) {
        let mut y = [0i32; 2];
        gemm_i8(&x, &PackedI8::new(&w, MAX_K, isa), &mut y);
        assert_eq!(y, [-128 * 127 * MAX_K as i32; 2], "{isa}");
    }
}

#[test]
#[should_panic(expected = "overflow")]
fn a_k_that_could_overflow_is_refused() {
    PackedI8::new(&vec![1; MAX_K + 1], MAX_K + 1, Isa::Portable);
}

#[test]
#[should_panic(expected = "symmetric")]
fn minus_128_weights_are_refused() {
    PackedI8::new(&[-128, 1, 2, 3], 4, Isa::Portable);
}
