//! Does a model fit on a device, and how large a batch fits?
//!
//! total = weights + (activations per sample + KV cache per sample) × batch, plus allocator
//! headroom: total = (weights + per-sample × batch) × (1 + headroom). Weights = parameters ×
//! bytes per parameter at the precision; KV cache per sample = 2 (K and V) × layers ×
//! KV heads × head dimension × context tokens × bytes per KV element.

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::units::Bytes;

/// Numeric precision of weights (or of the KV cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    Fp32,
    Fp16,
    Bf16,
    Int8,
    Int4,
}

impl Precision {
    pub const ALL: [Precision; 5] =
        [Precision::Fp32, Precision::Fp16, Precision::Bf16, Precision::Int8, Precision::Int4];

    pub fn bytes_per_value(self) -> f64 {
        match self {
            Precision::Fp32 => 4.0,
            Precision::Fp16 | Precision::Bf16 => 2.0,
            Precision::Int8 => 1.0,
            Precision::Int4 => 0.5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
            Precision::Int4 => "int4",
        }
    }

    /// The precision named by [`Precision::as_str`].
    pub fn parse(text: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.as_str() == text)
    }
}

/// The attention cache of a transformer; all zero for models without one.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KvCache {
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub context_tokens: u32,
    pub precision: Option<Precision>,
}

impl KvCache {
    /// Bytes of K and V for one sequence.
    pub fn bytes_per_sample(&self) -> Bytes {
        let per_value = self.precision.unwrap_or(Precision::Fp16).bytes_per_value();
        Bytes(
            2.0 * f64::from(self.layers)
                * f64::from(self.kv_heads)
                * f64::from(self.head_dim)
                * f64::from(self.context_tokens)
                * per_value,
        )
    }
}

/// Inputs of [`memory_fit`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MemoryInput {
    pub parameters: f64,
    pub precision: Precision,
    /// Activation memory for one sample in a batch.
    pub activation_bytes_per_sample: Bytes,
    #[serde(default)]
    pub kv_cache: KvCache,
    pub batch_size: u32,
    /// Allocator and fragmentation headroom as a fraction, e.g. 0.1 for 10%.
    pub headroom_fraction: f64,
    pub device_memory_bytes: Bytes,
}

/// Result of [`memory_fit`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryFit {
    pub weights_bytes: Bytes,
    pub activations_bytes: Bytes,
    pub kv_cache_bytes: Bytes,
    pub headroom_bytes: Bytes,
    pub total_bytes: Bytes,
    pub fits: bool,
    /// Device memory left (negative when it does not fit).
    pub free_bytes: Bytes,
    /// Largest batch that fits; 0 when not even the weights fit.
    pub max_batch_size: u32,
}

/// See the module documentation for the formula.
pub fn memory_fit(input: &MemoryInput) -> Result<MemoryFit, ModelError> {
    positive("parameters", input.parameters)?;
    non_negative("activation_bytes_per_sample", input.activation_bytes_per_sample.0)?;
    let headroom = non_negative("headroom_fraction", input.headroom_fraction)?;
    if headroom > 10.0 {
        return Err(FieldError::new("headroom_fraction", "must be a fraction such as 0.1, at most 10"));
    }
    positive("device_memory_bytes", input.device_memory_bytes.0)?;
    if input.batch_size == 0 {
        return Err(FieldError::new("batch_size", "must be at least 1"));
    }
    let weights = Bytes(input.parameters * input.precision.bytes_per_value());
    let kv_per_sample = input.kv_cache.bytes_per_sample();
    let batch = f64::from(input.batch_size);
    let activations = input.activation_bytes_per_sample * batch;
    let kv = kv_per_sample * batch;
    let before_headroom = weights + activations + kv;
    let total = before_headroom * (1.0 + headroom);
    let usable = input.device_memory_bytes / (1.0 + headroom);
    let per_sample = input.activation_bytes_per_sample + kv_per_sample;
    let max_batch = if usable.0 < weights.0 {
        0
    } else if per_sample.0 == 0.0 {
        u32::MAX
    } else {
        ((usable - weights) / per_sample).floor().min(f64::from(u32::MAX)) as u32
    };
    Ok(MemoryFit {
        weights_bytes: weights,
        activations_bytes: activations,
        kv_cache_bytes: kv,
        headroom_bytes: total - before_headroom,
        total_bytes: total,
        fits: total.0 <= input.device_memory_bytes.0,
        free_bytes: input.device_memory_bytes - total,
        max_batch_size: max_batch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn llama_8b(batch: u32, precision: Precision) -> MemoryInput {
        MemoryInput {
            parameters: 8.03e9,
            precision,
            activation_bytes_per_sample: Bytes(64.0 * 1024.0 * 1024.0),
            kv_cache: KvCache {
                layers: 32,
                kv_heads: 8,
                head_dim: 128,
                context_tokens: 8192,
                precision: Some(Precision::Fp16),
            },
            batch_size: batch,
            headroom_fraction: 0.1,
            device_memory_bytes: Bytes(80.0 * 1e9),
        }
    }

    #[test]
    fn an_8b_model_on_an_80_gb_device() {
        let fit = memory_fit(&llama_8b(8, Precision::Bf16)).unwrap();
        assert_eq!(fit.weights_bytes, Bytes(16.06e9));
        // 2 × 32 × 8 × 128 × 8192 × 2 bytes = 1 GiB per sequence.
        assert_eq!(fit.kv_cache_bytes, Bytes(8.0 * 1024.0 * 1024.0 * 1024.0));
        assert!(fit.fits);
        let int4 = memory_fit(&llama_8b(8, Precision::Int4)).unwrap();
        assert!(int4.max_batch_size > fit.max_batch_size);
        let fp32 = memory_fit(&llama_8b(1, Precision::Fp32)).unwrap();
        assert_eq!(fp32.weights_bytes, Bytes(32.12e9));
    }

    proptest! {
        /// The largest batch fits and one more does not.
        #[test]
        fn max_batch_is_the_boundary(params in 1e6..2e10f64, act in 0.0..1e9f64, ctx in 0u32..32_768, headroom in 0.0..0.5f64, device in 1e9..2e11f64, p in 0usize..5) {
            let mut input = MemoryInput {
                parameters: params,
                precision: Precision::ALL[p],
                activation_bytes_per_sample: Bytes(act),
                kv_cache: KvCache { layers: 32, kv_heads: 8, head_dim: 128, context_tokens: ctx, precision: None },
                batch_size: 1,
                headroom_fraction: headroom,
                device_memory_bytes: Bytes(device),
            };
            let fit = memory_fit(&input).unwrap();
            prop_assert!((fit.total_bytes.0 - (fit.weights_bytes + fit.activations_bytes + fit.kv_cache_bytes + fit.headroom_bytes).0).abs() <= 1e-6 * fit.total_bytes.0);
            let max = fit.max_batch_size;
            if (1..1_000_000).contains(&max) {
                input.batch_size = max;
                prop_assert!(memory_fit(&input).unwrap().fits);
                input.batch_size = max + 1;
                prop_assert!(!memory_fit(&input).unwrap().fits);
            } else if max == 0 {
                prop_assert!(!fit.fits);
            }
        }
    }
}
