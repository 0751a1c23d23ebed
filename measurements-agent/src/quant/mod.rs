//! The quantization suite's parts: kernels per precision and the small real model.

pub mod kernels;
pub mod mlp;
