//! A small real model: a 64–128–10 MLP classifier of 8×8 handwritten digits, trained here in
//! Rust with a fixed seed, and its quantized variants (BF16, INT8 post-training dynamic and
//! static, per-tensor and per-channel, INT8 and INT4 quantization-aware training, INT4 weights).

use model::plan::rng::Rng;
use serde::{Deserialize, Serialize};

use super::gemm::{self, Isa, Op, PackedF, PackedI8};
use super::kernels;

pub const INPUTS: usize = 64;
pub const HIDDEN: usize = 128;
pub const CLASSES: usize = 10;

/// The shipped data set (see `data/digits/README.md` for its source and licence).
const DIGITS: &str = include_str!("../../../data/digits/digits.csv");

/// Names the data and training recipe, so a cached network is used only for the same ones.
pub fn training_key() -> String {
    // FNV-1a over the data and the recipe's version.
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in DIGITS.bytes().chain(RECIPE.bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x100000001b3);
    }
    format!("{hash:016x}")
}

/// Change this whenever [`Trained::train`] or the network's shape changes.
const RECIPE: &str = "mlp 64-128-10, he seed 7, 40 epochs sgd 0.05 m0.9 seed 11, qat 8 epochs 0.01 seeds 13/17, v1";

/// Images scaled to [0, 1] and their digits, split once with a fixed seed.
pub struct Data {
    pub train_x: Vec<f32>,
    pub train_y: Vec<u8>,
    pub test_x: Vec<f32>,
    pub test_y: Vec<u8>,
}

impl Data {
    /// 80% train, 20% held out, shuffled with seed 42.
    pub fn load() -> Data {
        let mut rows: Vec<(Vec<f32>, u8)> = DIGITS
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let values: Vec<u8> =
                    line.split(',').map(|v| v.trim().parse().expect("digits.csv holds integers")).collect();
                assert_eq!(values.len(), INPUTS + 1, "digits.csv rows are 64 pixels and a label");
                (values[..INPUTS].iter().map(|&p| f32::from(p) / 16.0).collect(), values[INPUTS])
            })
            .collect();
        let mut rng = Rng::seeded(42);
        for i in (1..rows.len()).rev() {
            rows.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let split = rows.len() * 4 / 5;
        let (train, test) = rows.split_at(split);
        let flat = |part: &[(Vec<f32>, u8)]| {
            (part.iter().flat_map(|r| r.0.clone()).collect(), part.iter().map(|r| r.1).collect())
        };
        let (train_x, train_y) = flat(train);
        let (test_x, test_y) = flat(test);
        Data { train_x, train_y, test_x, test_y }
    }
}

/// FP32 weights, row-major `out × in`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mlp {
    pub w1: Vec<f32>,
    pub b1: Vec<f32>,
    pub w2: Vec<f32>,
    pub b2: Vec<f32>,
}

/// Quantization of a weight tensor: bit width and one scale per tensor or per output channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scheme {
    pub bits: u32,
    pub per_channel: bool,
}

impl Scheme {
    fn max_q(self) -> f32 {
        ((1 << (self.bits - 1)) - 1) as f32
    }
}

/// Symmetric scales of `w` (rows of `k`): max |w| / max_q per row or for the whole tensor.
pub fn weight_scales(w: &[f32], k: usize, scheme: Scheme) -> Vec<f32> {
    let scale = |values: &[f32]| (values.iter().fold(0f32, |m, v| m.max(v.abs())) / scheme.max_q()).max(1e-12);
    if scheme.per_channel { w.chunks_exact(k).map(scale).collect() } else { vec![scale(w); w.len() / k] }
}

/// Quantized integer values of `w`, clamped to the scheme's range.
pub fn quantize(w: &[f32], k: usize, scales: &[f32], scheme: Scheme) -> Vec<i8> {
    let q = scheme.max_q();
    w.chunks_exact(k)
        .zip(scales)
        .flat_map(|(row, s)| row.iter().map(move |v| (v / s).round().clamp(-q, q) as i8))
        .collect()
}

/// `w` after a round trip through the scheme: what the network sees once quantized.
fn fake_quantize(w: &[f32], k: usize, scheme: Scheme) -> Vec<f32> {
    let scales = weight_scales(w, k, scheme);
    quantize(w, k, &scales, scheme)
        .chunks_exact(k)
        .zip(&scales)
        .flat_map(|(row, s)| row.iter().map(move |v| f32::from(*v) * s))
        .collect()
}

/// Activations after an INT8 round trip at the scale of their largest value.
fn fake_quantize_activations(x: &mut [f32]) {
    let scale = max_abs(x).max(1e-12) / 127.0;
    for v in x {
        *v = (*v / scale).round().clamp(-127.0, 127.0) * scale;
    }
}

fn max_abs(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

impl Mlp {
    /// He-initialized weights from `seed`.
    pub fn new(seed: u64) -> Mlp {
        let mut rng = Rng::seeded(seed);
        let mut normal = |fan_in: usize| {
            // Box–Muller from two uniform draws.
            let (u, v) = (rng.open01(), rng.open01());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos() * (2.0 / fan_in as f64).sqrt()) as f32
        };
        let w1 = (0..HIDDEN * INPUTS).map(|_| normal(INPUTS)).collect();
        let w2 = (0..CLASSES * HIDDEN).map(|_| normal(HIDDEN)).collect();
        Mlp { w1, b1: vec![0.0; HIDDEN], w2, b2: vec![0.0; CLASSES] }
    }

    /// Minibatch SGD with momentum on softmax cross-entropy. With `fake`, the forward pass sees
    /// weights and activations as the scheme would quantize them and the gradient passes
    /// through the rounding unchanged (straight-through estimator): quantization-aware training.
    pub fn train(&mut self, data: &Data, epochs: usize, lr: f32, seed: u64, fake: Option<Scheme>) {
        const BATCH: usize = 32;
        let n = data.train_y.len();
        let mut order: Vec<usize> = (0..n).collect();
        let mut rng = Rng::seeded(seed);
        let mut velocity = Mlp {
            w1: vec![0.0; self.w1.len()],
            b1: vec![0.0; HIDDEN],
            w2: vec![0.0; self.w2.len()],
            b2: vec![0.0; CLASSES],
        };
        for _ in 0..epochs {
            for i in (1..n).rev() {
                order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            for chunk in order.chunks(BATCH) {
                let x: Vec<f32> =
                    chunk.iter().flat_map(|&i| data.train_x[i * INPUTS..(i + 1) * INPUTS].iter().copied()).collect();
                let y: Vec<u8> = chunk.iter().map(|&i| data.train_y[i]).collect();
                let grad = self.gradient(&x, &y, fake);
                for (param, (g, v)) in [
                    (&mut self.w1, (&grad.w1, &mut velocity.w1)),
                    (&mut self.b1, (&grad.b1, &mut velocity.b1)),
                    (&mut self.w2, (&grad.w2, &mut velocity.w2)),
                    (&mut self.b2, (&grad.b2, &mut velocity.b2)),
                ] {
                    for ((p, g), v) in param.iter_mut().zip(g).zip(v.iter_mut()) {
                        *v = 0.9 * *v - lr * g;
                        *p += *v;
                    }
                }
            }
        }
    }

    /// Mean cross-entropy gradient over one batch.
    fn gradient(&self, x: &[f32], y: &[u8], fake: Option<Scheme>) -> Mlp {
        let batch = y.len();
        let (w1, w2) = match fake {
            Some(s) => (fake_quantize(&self.w1, INPUTS, s), fake_quantize(&self.w2, HIDDEN, s)),
            None => (self.w1.clone(), self.w2.clone()),
        };
        let mut x = x.to_vec();
        if fake.is_some() {
            fake_quantize_activations(&mut x);
        }
        let mut h = vec![0.0; batch * HIDDEN];
        kernels::gemm_f32(&x, &w1, INPUTS, &mut h);
        add_bias_relu(&mut h, &self.b1, true);
        if fake.is_some() {
            fake_quantize_activations(&mut h);
        }
        let mut logits = vec![0.0; batch * CLASSES];
        kernels::gemm_f32(&h, &w2, HIDDEN, &mut logits);
        add_bias_relu(&mut logits, &self.b2, false);
        // d loss / d logits = softmax − one-hot, averaged over the batch.
        let mut d_out = logits;
        for (row, &label) in d_out.chunks_exact_mut(CLASSES).zip(y) {
            let max = row.iter().fold(f32::MIN, |m, v| m.max(*v));
            let sum: f32 = row
                .iter_mut()
                .map(|v| {
                    *v = (*v - max).exp();
                    *v
                })
                .sum();
            for (c, v) in row.iter_mut().enumerate() {
                *v = (*v / sum - if c == usize::from(label) { 1.0 } else { 0.0 }) / batch as f32;
            }
        }
        let mut grad = Mlp {
            w1: vec![0.0; self.w1.len()],
            b1: vec![0.0; HIDDEN],
            w2: vec![0.0; self.w2.len()],
            b2: vec![0.0; CLASSES],
        };
        let mut d_h = vec![0.0; batch * HIDDEN];
        for b in 0..batch {
            let d = &d_out[b * CLASSES..(b + 1) * CLASSES];
            let hb = &h[b * HIDDEN..(b + 1) * HIDDEN];
            for (c, &dc) in d.iter().enumerate() {
                grad.b2[c] += dc;
                for (j, hv) in hb.iter().enumerate() {
                    grad.w2[c * HIDDEN + j] += dc * hv;
                    d_h[b * HIDDEN + j] += dc * w2[c * HIDDEN + j];
                }
            }
        }
        for b in 0..batch {
            let xb = &x[b * INPUTS..(b + 1) * INPUTS];
            for j in 0..HIDDEN {
                // ReLU passes the gradient only where the unit was active.
                let dj = if h[b * HIDDEN + j] > 0.0 { d_h[b * HIDDEN + j] } else { 0.0 };
                grad.b1[j] += dj;
                for (i, xv) in xb.iter().enumerate() {
                    grad.w1[j * INPUTS + i] += dj * xv;
                }
            }
        }
        grad
    }
}

fn add_bias_relu(y: &mut [f32], bias: &[f32], relu: bool) {
    for row in y.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
            if relu && *v < 0.0 {
                *v = 0.0;
            }
        }
    }
}

/// Fraction of `x`'s rows whose largest logit is the label.
pub fn accuracy(logits: &[f32], labels: &[u8]) -> f64 {
    let right = logits
        .chunks_exact(CLASSES)
        .zip(labels)
        .filter(|(row, label)| {
            let best = row.iter().enumerate().fold((0, f32::MIN), |b, (i, v)| if *v > b.1 { (i, *v) } else { b }).0;
            best == usize::from(**label)
        })
        .count();
    right as f64 / labels.len() as f64
}

/// How a layer's weights are stored: packed for this CPU's fastest kernel, as a runtime would
/// pre-pack them when it loads a model.
enum Weights {
    F32(PackedF<f32>),
    Bf16(PackedF<u16>),
    /// INT8 values with their scales (one per output row).
    I8 {
        q: PackedI8,
        scales: Vec<f32>,
    },
    /// INT4 values packed two to a byte (low nibble first), with their scales.
    I4 {
        packed: Vec<u8>,
        scales: Vec<f32>,
    },
}

/// How a layer's input is quantized for an integer kernel.
#[derive(Clone, Copy)]
enum Activations {
    /// Scale from this batch's largest value, computed as it runs.
    Dynamic,
    /// Scale fixed from a calibration set.
    Static(f32),
}

struct Layer {
    weights: Weights,
    bias: Vec<f32>,
    inputs: usize,
    activations: Activations,
}

impl Layer {
    /// Bytes of the weights themselves (a packed layout's padding aside).
    fn weight_bytes(&self) -> usize {
        let values = self.inputs * self.bias.len();
        let weights = match &self.weights {
            Weights::F32(_) => values * 4,
            Weights::Bf16(_) => values * 2,
            Weights::I8 { scales, .. } => values + scales.len() * 4,
            Weights::I4 { packed, scales } => packed.len() + scales.len() * 4,
        };
        weights + self.bias.len() * 4
    }

    fn forward(&self, x: &[f32], relu: bool) -> Vec<f32> {
        let n = self.bias.len();
        let batch = x.len() / self.inputs;
        let mut y = vec![0.0; batch * n];
        let integer = |gemm: &dyn Fn(&[i8], &mut [i32]), scales: &[f32], y: &mut [f32]| {
            let sx = match self.activations {
                Activations::Dynamic => max_abs(x).max(1e-12) / 127.0,
                Activations::Static(s) => s,
            };
            let mut xq = vec![0i8; x.len()];
            kernels::quantize_i8(x, sx, &mut xq);
            let mut acc = vec![0i32; batch * n];
            gemm(&xq, &mut acc);
            for (row, out) in acc.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
                for ((a, o), s) in row.iter().zip(out.iter_mut()).zip(scales) {
                    *o = *a as f32 * sx * s;
                }
            }
        };
        match &self.weights {
            Weights::F32(w) => gemm::gemm_f32(x, w, &mut y),
            Weights::Bf16(w) => gemm::gemm_bf16(x, w, &mut y),
            Weights::I8 { q, scales } => integer(&|x, acc| gemm::gemm_i8(x, q, acc), scales, &mut y),
            Weights::I4 { packed, scales } => {
                // No INT4 kernel: the values are unpacked at each call, as a weight-only INT4
                // runtime without one would.
                let q: Vec<i8> = packed.iter().flat_map(|b| [((b << 4) as i8) >> 4, (*b as i8) >> 4]).collect();
                integer(&|x, acc| kernels::gemm_i8(x, &q, self.inputs, acc), scales, &mut y)
            }
        }
        add_bias_relu(&mut y, &self.bias, relu);
        y
    }
}

/// One way of running the trained network.
pub struct Variant {
    pub name: &'static str,
    /// `fp32`, `bf16`, `int8` or `int4`: what the model crate's precisions call it.
    pub precision: &'static str,
    layers: [Layer; 2],
}

impl Variant {
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        let h = self.layers[0].forward(x, true);
        self.layers[1].forward(&h, false)
    }

    pub fn weight_bytes(&self) -> usize {
        self.layers.iter().map(Layer::weight_bytes).sum()
    }

    /// The kernel the variant's layers run on.
    pub fn kernel(&self) -> String {
        match &self.layers[0].weights {
            Weights::F32(w) => format!("packed, {}", w.isa()),
            Weights::Bf16(w) => format!("packed, {}", w.isa()),
            Weights::I8 { q, .. } => format!("packed, {}", q.isa()),
            Weights::I4 { .. } => "portable, unpacked to INT8 at each call".into(),
        }
    }

    /// Bytes the forward pass holds at its peak for `batch`: weights plus the input, hidden and
    /// output buffers (and the integer copies an integer variant makes).
    pub fn memory_bytes(&self, batch: usize) -> usize {
        let integer = matches!(self.layers[0].weights, Weights::I8 { .. } | Weights::I4 { .. });
        let unpacked = if let Weights::I4 { packed, .. } = &self.layers[0].weights { packed.len() * 2 } else { 0 };
        let floats = batch * (INPUTS + HIDDEN + CLASSES) * 4;
        let integers = if integer { batch * (INPUTS + HIDDEN) + batch * HIDDEN.max(CLASSES) * 4 } else { 0 };
        self.weight_bytes() + floats + integers + unpacked
    }
}

fn layer(w: &[f32], bias: &[f32], inputs: usize, store: &Store, activations: Activations) -> Layer {
    let weights = match store {
        Store::F32 => Weights::F32(PackedF::fp32(w, inputs, Isa::best(Op::Fp32))),
        Store::Bf16 => {
            let w: Vec<u16> = w.iter().map(|v| kernels::f32_to_bf16(*v)).collect();
            Weights::Bf16(PackedF::bf16(&w, inputs, Isa::best(Op::Bf16Weights)))
        }
        Store::Int(scheme) => {
            let scales = weight_scales(w, inputs, *scheme);
            let q = quantize(w, inputs, &scales, *scheme);
            if scheme.bits == 4 {
                let packed =
                    q.chunks(2).map(|p| (p[0] as u8 & 0x0f) | ((p.get(1).copied().unwrap_or(0) as u8) << 4)).collect();
                Weights::I4 { packed, scales }
            } else {
                Weights::I8 { q: PackedI8::new(&q, inputs, Isa::best(Op::Int8)), scales }
            }
        }
    };
    Layer { weights, bias: bias.to_vec(), inputs, activations }
}

enum Store {
    F32,
    Bf16,
    Int(Scheme),
}

/// The networks behind every variant: the FP32 training and the two quantization-aware ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trained {
    pub fp32: Mlp,
    pub qat_int8: Mlp,
    pub qat_int4: Mlp,
}

pub const INT8_PER_TENSOR: Scheme = Scheme { bits: 8, per_channel: false };
pub const INT8_PER_CHANNEL: Scheme = Scheme { bits: 8, per_channel: true };
pub const INT4_PER_CHANNEL: Scheme = Scheme { bits: 4, per_channel: true };
pub const INT4_PER_TENSOR: Scheme = Scheme { bits: 4, per_channel: false };

impl Trained {
    /// Trains from scratch (seconds): 40 epochs of FP32, then 8 epochs of quantization-aware
    /// fine-tuning from the FP32 weights for each of INT8 and INT4 (per channel).
    pub fn train(data: &Data) -> Trained {
        let mut fp32 = Mlp::new(7);
        fp32.train(data, 40, 0.05, 11, None);
        let mut qat_int8 = fp32.clone();
        qat_int8.train(data, 8, 0.01, 13, Some(INT8_PER_CHANNEL));
        let mut qat_int4 = fp32.clone();
        qat_int4.train(data, 8, 0.01, 17, Some(INT4_PER_CHANNEL));
        Trained { fp32, qat_int8, qat_int4 }
    }

    /// Every variant, FP32 first. Static activation scales come from the first 256 training
    /// images (the calibration set).
    pub fn variants(&self, data: &Data) -> Vec<Variant> {
        let calibration = &data.train_x[..256.min(data.train_y.len()) * INPUTS];
        let statics = |m: &Mlp| {
            let mut h = vec![0.0; calibration.len() / INPUTS * HIDDEN];
            kernels::gemm_f32(calibration, &m.w1, INPUTS, &mut h);
            add_bias_relu(&mut h, &m.b1, true);
            (Activations::Static(max_abs(calibration) / 127.0), Activations::Static(max_abs(&h) / 127.0))
        };
        let build = |name, precision, m: &Mlp, store: Store, acts: (Activations, Activations)| Variant {
            name,
            precision,
            layers: [layer(&m.w1, &m.b1, INPUTS, &store, acts.0), layer(&m.w2, &m.b2, HIDDEN, &store, acts.1)],
        };
        let dynamic = (Activations::Dynamic, Activations::Dynamic);
        let f = &self.fp32;
        vec![
            build("fp32", "fp32", f, Store::F32, dynamic),
            build("bf16_weights", "bf16", f, Store::Bf16, dynamic),
            build("int8_ptq_dynamic_per_tensor", "int8", f, Store::Int(INT8_PER_TENSOR), dynamic),
            build("int8_ptq_dynamic_per_channel", "int8", f, Store::Int(INT8_PER_CHANNEL), dynamic),
            build("int8_ptq_static_per_tensor", "int8", f, Store::Int(INT8_PER_TENSOR), statics(f)),
            build("int8_ptq_static_per_channel", "int8", f, Store::Int(INT8_PER_CHANNEL), statics(f)),
            build(
                "int8_qat_per_channel",
                "int8",
                &self.qat_int8,
                Store::Int(INT8_PER_CHANNEL),
                statics(&self.qat_int8),
            ),
            build("int4_ptq_per_tensor", "int4", f, Store::Int(INT4_PER_TENSOR), dynamic),
            build("int4_ptq_per_channel", "int4", f, Store::Int(INT4_PER_CHANNEL), dynamic),
            build("int4_qat_per_channel", "int4", &self.qat_int4, Store::Int(INT4_PER_CHANNEL), dynamic),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_is_deterministic_and_learns() {
        let data = Data::load();
        assert_eq!((data.train_y.len(), data.test_y.len()), (1437, 360));
        let (a, b) = (Trained::train(&data), Trained::train(&data));
        assert_eq!(a, b, "the same seed trains the same network");
        let fp32 = &a.variants(&data)[0];
        assert!(accuracy(&fp32.forward(&data.test_x), &data.test_y) > 0.9);
    }

    #[test]
    fn int4_packing_round_trips() {
        let w: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) / 4.0).collect();
        let l = layer(&w, &[0.0; 2], 16, &Store::Int(INT4_PER_CHANNEL), Activations::Dynamic);
        let Weights::I4 { packed, scales } = &l.weights else { panic!("int4") };
        let q = quantize(&w, 16, scales, INT4_PER_CHANNEL);
        let unpacked: Vec<i8> = packed.iter().flat_map(|b| [((b << 4) as i8) >> 4, (*b as i8) >> 4]).collect();
        assert_eq!(unpacked, q);
        assert!(q.iter().all(|v| (-7..=7).contains(v)));
        assert_eq!(packed.len(), w.len() / 2);
    }
}
