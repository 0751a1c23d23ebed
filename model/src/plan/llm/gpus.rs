//! GPU types as their datasheets give them, and an engine's iteration costs estimated from them
//! when nothing was measured on that GPU (a roofline).
//!
//! Decoding one token of every resident sequence reads the weights once and each sequence's KV
//! cache once, so it is bound by memory bandwidth; reading a prompt multiplies every weight by
//! every prompt token, so it is bound by arithmetic. At a tensor-parallel degree T, with the
//! bandwidth B and the dense 16-bit tensor throughput F of one GPU reached at shares ηB and ηF:
//!
//! - t₀ (fixed) = weights per GPU ÷ (ηB·B);
//! - d (per sequence) = KV bytes per token per GPU × tokens a sequence holds while it decodes
//!   (its prompt and, on average, half its output) ÷ (ηB·B);
//! - p (per prompt token) = 2 × parameters ÷ T ÷ (ηF·F).
//!
//! Weights stored in 8 or 4 bits are read faster (fewer bytes) but multiplied in 16 bits, as
//! weight-only quantization does; the link between GPUs of one replica (all-reduce) is not
//! counted. The defaults, 80 % of the bandwidth and 50 % of the arithmetic, are what a good
//! engine reaches with large batches; a load test of the real server replaces all three costs.

use serde::{Deserialize, Serialize};

use super::batching::Engine;
use super::memory::LlmShape;
use crate::plan::checks::{ModelError, between};
use crate::units::Seconds;

/// One GPU model's figures, from its maker's datasheet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuSpec {
    /// The name as the price catalog writes it (`NVIDIA H100 80GB`).
    pub name: &'static str,
    /// Device memory in GiB, as marketed (GPU "GB" are binary).
    pub memory_gib: f64,
    /// Memory bandwidth, bytes per second.
    pub bandwidth: f64,
    /// Dense tensor throughput at 16 bits (BF16, or FP16 where the GPU has no BF16), FLOP/s.
    pub flops_16bit: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

const TB: f64 = 1e12;

/// The GPUs of the shipped price catalog. Dense figures (without 2:4 sparsity).
pub const GPUS: &[GpuSpec] = &[
    GpuSpec {
        name: "NVIDIA T4",
        memory_gib: 16.0,
        bandwidth: 0.32 * TB,
        flops_16bit: 65.0 * TB,
        source: "NVIDIA T4 datasheet: 320 GB/s, 65 TFLOPS FP16 mixed precision (no BF16)",
    },
    GpuSpec {
        name: "NVIDIA V100",
        memory_gib: 16.0,
        bandwidth: 0.9 * TB,
        flops_16bit: 125.0 * TB,
        source: "NVIDIA V100 datasheet, SXM2 16 GB: 900 GB/s, 125 TFLOPS tensor (FP16; no BF16)",
    },
    GpuSpec {
        name: "NVIDIA A10G",
        memory_gib: 24.0,
        bandwidth: 0.6 * TB,
        flops_16bit: 125.0 * TB,
        source: "NVIDIA A10 datasheet (the A10G is AWS's variant, with no datasheet of its own): 600 GB/s, 125 TFLOPS BF16",
    },
    GpuSpec {
        name: "NVIDIA L4",
        memory_gib: 24.0,
        bandwidth: 0.3 * TB,
        flops_16bit: 121.0 * TB,
        source: "NVIDIA L4 datasheet: 300 GB/s, 121 TFLOPS BF16 (242 with sparsity)",
    },
    GpuSpec {
        name: "NVIDIA L40S",
        memory_gib: 48.0,
        bandwidth: 0.864 * TB,
        flops_16bit: 362.05 * TB,
        source: "NVIDIA L40S datasheet: 864 GB/s, 362 TFLOPS BF16 (733 with sparsity)",
    },
    GpuSpec {
        name: "NVIDIA A100 40GB",
        memory_gib: 40.0,
        bandwidth: 1.555 * TB,
        flops_16bit: 312.0 * TB,
        source: "NVIDIA A100 datasheet, 40 GB SXM: 1,555 GB/s, 312 TFLOPS BF16",
    },
    GpuSpec {
        name: "NVIDIA A100 80GB",
        memory_gib: 80.0,
        bandwidth: 1.935 * TB,
        flops_16bit: 312.0 * TB,
        source: "NVIDIA A100 datasheet, 80 GB PCIe: 1,935 GB/s, 312 TFLOPS BF16",
    },
    GpuSpec {
        name: "NVIDIA H100 80GB",
        memory_gib: 80.0,
        bandwidth: 3.35 * TB,
        flops_16bit: 989.0 * TB,
        source: "NVIDIA H100 datasheet, SXM: 3.35 TB/s, 989 TFLOPS BF16 (1,979 with sparsity)",
    },
];

/// The datasheet of the GPU the catalog names (case and spacing ignored), if one is shipped.
pub fn spec(name: &str) -> Option<&'static GpuSpec> {
    let key = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let wanted = key(name);
    GPUS.iter().find(|g| key(g.name) == wanted)
}

/// The shares of a GPU's peak an engine reaches (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Efficiency {
    /// ηB, of the memory bandwidth, when reading weights and KV cache.
    pub bandwidth: f64,
    /// ηF, of the dense 16-bit tensor throughput, when reading prompts.
    pub compute: f64,
}

/// 80 % of the bandwidth, 50 % of the arithmetic.
pub const DEFAULT_EFFICIENCY: Efficiency = Efficiency { bandwidth: 0.8, compute: 0.5 };

impl Efficiency {
    pub fn validate(&self) -> Result<(), ModelError> {
        between("bandwidth_efficiency", self.bandwidth, 0.01, 1.0)?;
        between("compute_efficiency", self.compute, 0.01, 1.0)?;
        Ok(())
    }
}

/// The engine's costs on `gpu` at tensor-parallel degree `tp` (module docs), with `slots`
/// sequences at most; `decode_tokens` is what one sequence holds in its cache on average while
/// it decodes (prompt + half the output).
pub fn roofline(
    gpu: &GpuSpec,
    shape: &LlmShape,
    tp: u32,
    decode_tokens: f64,
    efficiency: Efficiency,
    slots: u32,
) -> Result<Engine, ModelError> {
    shape.validate()?;
    efficiency.validate()?;
    let bandwidth = gpu.bandwidth * efficiency.bandwidth;
    let tp = tp.max(1);
    Ok(Engine {
        fixed: Seconds(shape.weight_bytes(tp).0 / bandwidth),
        per_sequence: Seconds(shape.kv_bytes_per_token(tp).0 * decode_tokens.max(0.0) / bandwidth),
        per_prompt_token: Seconds(2.0 * shape.parameters / f64::from(tp) / (gpu.flops_16bit * efficiency.compute)),
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::memory::Precision;

    fn llama_8b(weights: Precision) -> LlmShape {
        LlmShape { parameters: 8.03e9, layers: 32, kv_heads: 8, head_dim: 128, weights, kv: Precision::Bf16 }
    }

    #[test]
    fn every_catalog_gpu_has_a_datasheet_found_by_its_catalog_name() {
        let catalog = include_str!("../../../../server/data/price-catalog.csv");
        for row in catalog.lines().skip(1) {
            let gpu = row.split(',').nth(2).unwrap();
            if !gpu.is_empty() {
                assert!(spec(gpu).is_some(), "{gpu} has no datasheet");
            }
        }
        assert_eq!(spec("  nvidia   h100 80gb").unwrap().name, "NVIDIA H100 80GB");
        assert!(spec("NVIDIA H100").is_none(), "a name is matched whole, never by prefix");
    }

    #[test]
    fn llama_3_8b_on_an_h100_gives_the_llm_pages_default_engine() {
        // The LLM page's defaults: 6 ms fixed, 0.06 ms per sequence, 30,000 prompt tokens/s.
        let h100 = spec("NVIDIA H100 80GB").unwrap();
        let e = roofline(h100, &llama_8b(Precision::Bf16), 1, 1000.0 + 125.0, DEFAULT_EFFICIENCY, 256).unwrap();
        assert!((e.fixed.0 - 16.06e9 / 2.68e12).abs() < 1e-9, "{e:?}");
        assert!((e.fixed.0 * 1e3 - 6.0).abs() < 0.05);
        assert!((e.per_sequence.0 * 1e3 - 0.055).abs() < 0.001, "{e:?}");
        assert!((1.0 / e.per_prompt_token.0 - 30_800.0).abs() < 100.0, "{e:?}");
        // Four-bit weights are read in a quarter of the time; prompts are not read faster.
        let int4 = roofline(h100, &llama_8b(Precision::Int4), 1, 1125.0, DEFAULT_EFFICIENCY, 256).unwrap();
        assert!((int4.fixed.0 * 4.0 - e.fixed.0).abs() < 1e-12);
        assert_eq!(int4.per_prompt_token, e.per_prompt_token);
        // Two GPUs: each reads half the weights and half the KV heads, and does half the sums.
        let two = roofline(h100, &llama_8b(Precision::Bf16), 2, 1125.0, DEFAULT_EFFICIENCY, 256).unwrap();
        assert!((two.fixed.0 * 2.0 - e.fixed.0).abs() < 1e-12);
        assert!((two.per_sequence.0 * 2.0 - e.per_sequence.0).abs() < 1e-15);
        assert!((two.per_prompt_token.0 * 2.0 - e.per_prompt_token.0).abs() < 1e-15);
        let bad = Efficiency { bandwidth: 1.5, ..DEFAULT_EFFICIENCY };
        assert_eq!(
            roofline(h100, &llama_8b(Precision::Bf16), 1, 1.0, bad, 1).unwrap_err().field,
            "bandwidth_efficiency"
        );
    }
}
