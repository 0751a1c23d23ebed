//! Does an LLM fit on a device, and how many sequences does its KV cache hold?
//!
//! Per GPU, at a tensor-parallel degree T (weights and attention heads split over T GPUs):
//!
//! - weights = parameters × bytes per weight ÷ T;
//! - KV cache per token = 2 (K and V) × layers × ⌈KV heads ÷ T⌉ × head dimension × bytes per
//!   KV value (a KV head is not split: with fewer KV heads than GPUs each GPU keeps a copy);
//! - usable = device memory × (1 − headroom) − weights − activations;
//! - tokens held = usable ÷ KV per token (the same on every GPU, so per replica);
//! - sequences at once = ⌊tokens held ÷ tokens per sequence⌋, where a sequence holds its prompt
//!   and its output (the planner takes a high quantile of their lengths, not the mean).

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::checks::{ModelError, between, non_negative, positive};
use crate::plan::memory::Precision;
use crate::units::Bytes;

/// The shape of a decoder-only transformer, as its config names it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LlmShape {
    pub parameters: f64,
    pub layers: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub weights: Precision,
    pub kv: Precision,
}

impl LlmShape {
    pub fn validate(&self) -> Result<(), ModelError> {
        positive("parameters", self.parameters)?;
        for (field, value) in [("layers", self.layers), ("kv_heads", self.kv_heads), ("head_dim", self.head_dim)] {
            if value == 0 {
                return Err(FieldError::new(field, "must be at least 1"));
            }
        }
        Ok(())
    }

    /// Bytes of K and V for one token on one GPU at tensor-parallel degree `tp`.
    pub fn kv_bytes_per_token(&self, tp: u32) -> Bytes {
        let heads = self.kv_heads.div_ceil(tp.max(1));
        Bytes(2.0 * f64::from(self.layers) * f64::from(heads) * f64::from(self.head_dim) * self.kv.bytes_per_value())
    }

    /// Bytes of weights on one GPU at tensor-parallel degree `tp`.
    pub fn weight_bytes(&self, tp: u32) -> Bytes {
        Bytes(self.parameters * self.weights.bytes_per_value() / f64::from(tp.max(1)))
    }
}

/// What [`fit`] is asked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmMemoryInput {
    pub shape: LlmShape,
    /// Memory of one GPU.
    pub device_memory: Bytes,
    /// GPUs one replica's weights and heads are split over: 1, 2, 4 or 8.
    pub tensor_parallel: u32,
    /// Working memory of the forward pass per GPU (activations, the engine's buffers).
    pub activations: Bytes,
    /// Share of the device kept free (allocator slack, CUDA context), 0 to 0.9.
    pub headroom: f64,
    /// Tokens one sequence holds in the cache: prompt plus output.
    pub tokens_per_sequence: f64,
}

/// The answer of [`fit`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LlmMemoryFit {
    pub weights_per_gpu: Bytes,
    pub kv_per_token_per_gpu: Bytes,
    /// Memory left for the KV cache on each GPU (negative when the weights do not fit).
    pub kv_budget_per_gpu: Bytes,
    /// Tokens the replica's cache holds.
    pub kv_tokens: f64,
    /// Sequences of `tokens_per_sequence` held at once; 0 when not even one fits.
    pub max_sequences: u32,
    pub fits: bool,
}

/// The tensor-parallel degrees considered.
pub const TENSOR_PARALLEL: [u32; 4] = [1, 2, 4, 8];

/// Weights and KV cache against device memory (module docs).
pub fn fit(input: &LlmMemoryInput) -> Result<LlmMemoryFit, ModelError> {
    input.shape.validate()?;
    positive("device_memory_bytes", input.device_memory.0)?;
    non_negative("activations_bytes", input.activations.0)?;
    between("headroom", input.headroom, 0.0, 0.9)?;
    positive("tokens_per_sequence", input.tokens_per_sequence)?;
    if !TENSOR_PARALLEL.contains(&input.tensor_parallel) {
        return Err(FieldError::new("tensor_parallel", "must be 1, 2, 4 or 8"));
    }
    let tp = input.tensor_parallel;
    let weights = input.shape.weight_bytes(tp);
    let per_token = input.shape.kv_bytes_per_token(tp);
    let budget = input.device_memory * (1.0 - input.headroom) - weights - input.activations;
    let kv_tokens = (budget / per_token).max(0.0);
    let sequences = (kv_tokens / input.tokens_per_sequence).floor().min(f64::from(u32::MAX));
    Ok(LlmMemoryFit {
        weights_per_gpu: weights,
        kv_per_token_per_gpu: per_token,
        kv_budget_per_gpu: budget,
        kv_tokens,
        max_sequences: sequences as u32,
        fits: sequences >= 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

    fn llama_8b() -> LlmShape {
        LlmShape {
            parameters: 8.03e9,
            layers: 32,
            kv_heads: 8,
            head_dim: 128,
            weights: Precision::Bf16,
            kv: Precision::Bf16,
        }
    }

    #[test]
    fn llama_3_8b_on_an_80_gib_gpu() {
        // 128 KiB of KV per token (2 × 32 × 8 × 128 × 2 bytes), 16 GB of weights.
        let input = LlmMemoryInput {
            shape: llama_8b(),
            device_memory: Bytes(80.0 * GIB),
            tensor_parallel: 1,
            activations: Bytes(2.0 * GIB),
            headroom: 0.1,
            tokens_per_sequence: 4096.0,
        };
        let fit = fit(&input).unwrap();
        assert_eq!(fit.kv_per_token_per_gpu, Bytes(131_072.0));
        let budget = 72.0 * GIB - 16.06e9 - 2.0 * GIB;
        assert!((fit.kv_tokens - budget / 131_072.0).abs() < 1e-6);
        assert_eq!(fit.max_sequences, (budget / 131_072.0 / 4096.0) as u32);
        // Two GPUs: half the weights and half the KV heads on each, so more than twice the tokens.
        let two = super::fit(&LlmMemoryInput { tensor_parallel: 2, ..input }).unwrap();
        assert_eq!(two.kv_per_token_per_gpu, Bytes(65_536.0));
        assert!(two.kv_tokens > 2.0 * fit.kv_tokens);
        // Eight GPUs and eight KV heads: one head each; sixteen would not split them further.
        let shape = LlmShape { kv_heads: 4, ..llama_8b() };
        assert_eq!(shape.kv_bytes_per_token(8), shape.kv_bytes_per_token(4));
    }

    #[test]
    fn refusals_name_the_field() {
        let input = LlmMemoryInput {
            shape: llama_8b(),
            device_memory: Bytes(24.0 * GIB),
            tensor_parallel: 3,
            activations: Bytes(0.0),
            headroom: 0.1,
            tokens_per_sequence: 1000.0,
        };
        assert_eq!(fit(&input).unwrap_err().field, "tensor_parallel");
        let too_small = fit(&LlmMemoryInput { tensor_parallel: 1, device_memory: Bytes(8.0 * GIB), ..input }).unwrap();
        assert!(!too_small.fits && too_small.max_sequences == 0 && too_small.kv_tokens == 0.0);
        let bad = LlmMemoryInput { shape: LlmShape { head_dim: 0, ..llama_8b() }, tensor_parallel: 1, ..input };
        assert_eq!(fit(&bad).unwrap_err().field, "head_dim");
        assert_eq!(
            fit(&LlmMemoryInput { headroom: f64::NAN, tensor_parallel: 1, ..input }).unwrap_err().field,
            "headroom"
        );
    }

    proptest! {
        #[test]
        fn the_parts_add_up_and_more_memory_never_holds_less(
            gib in 1.0f64..200.0, extra in 0.0f64..64.0, tokens in 16.0f64..32_768.0, tp_index in 0usize..4,
        ) {
            let input = LlmMemoryInput {
                shape: llama_8b(),
                device_memory: Bytes(gib * GIB),
                tensor_parallel: TENSOR_PARALLEL[tp_index],
                activations: Bytes(GIB),
                headroom: 0.05,
                tokens_per_sequence: tokens,
            };
            let a = fit(&input).unwrap();
            let b = fit(&LlmMemoryInput { device_memory: Bytes((gib + extra) * GIB), ..input }).unwrap();
            prop_assert!(b.kv_tokens >= a.kv_tokens && b.max_sequences >= a.max_sequences);
            if a.fits {
                let used = a.weights_per_gpu + a.kv_per_token_per_gpu * a.kv_tokens + input.activations;
                prop_assert!((used.0 - input.device_memory.0 * 0.95).abs() <= 1e-6 * used.0);
                prop_assert!(f64::from(a.max_sequences) * tokens <= a.kv_tokens + 1e-6);
                prop_assert!(f64::from(a.max_sequences + 1) * tokens > a.kv_tokens);
            }
        }
    }
}
