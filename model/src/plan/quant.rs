//! What quantization did to a model, read from a `quant` run: for each variant its precision,
//! speedup over FP32, memory ratio and accuracy change. The planner and right-sizing take a
//! precision's figures from here instead of from a guess.
//!
//! speedup = FP32 latency / variant latency at the same batch size; memory ratio = variant
//! weight bytes / FP32 weight bytes; accuracy change = variant top-1 − FP32 top-1.

use serde::{Deserialize, Serialize};

use crate::plan::memory::Precision;
use crate::wire::run::{Case, Measurement, MeasurementStatus, Suite};

/// One quantized variant of the measured model against its FP32 baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrecisionEffect {
    pub variant: String,
    pub precision: Precision,
    pub batch_size: u32,
    pub speedup_vs_fp32: f64,
    pub memory_ratio_vs_fp32: f64,
    pub accuracy_delta: f64,
}

fn figure(measurements: &[Measurement], case: Case, variant: &str, batch: Option<&str>) -> Option<f64> {
    measurements
        .iter()
        .find(|m| {
            m.suite == Suite::Quant
                && m.status == MeasurementStatus::Ok
                && m.is(case)
                && m.parameters.get("variant").map(String::as_str) == Some(variant)
                && batch.is_none_or(|b| m.parameters.get("batch").map(String::as_str) == Some(b))
        })
        .and_then(|m| m.stats.map(|s| s.p50))
        .filter(|v| v.is_finite())
}

/// Every variant of the run's MLP at every measured batch size, in the run's order. Variants
/// with a missing or non-positive figure are left out rather than guessed.
pub fn effects(measurements: &[Measurement]) -> Vec<PrecisionEffect> {
    let mut out = Vec::new();
    let fp32_bytes = figure(measurements, Case::MlpWeightBytes, "fp32", None);
    for m in measurements.iter().filter(|m| m.suite == Suite::Quant && m.is(Case::MlpLatency)) {
        let (Some(variant), Some(batch)) = (m.parameters.get("variant"), m.parameters.get("batch")) else { continue };
        let Some(precision) = m.parameters.get("precision").and_then(|p| Precision::parse(p)) else { continue };
        let latency = figure(measurements, Case::MlpLatency, variant, Some(batch));
        let fp32_latency = figure(measurements, Case::MlpLatency, "fp32", Some(batch));
        let bytes = figure(measurements, Case::MlpWeightBytes, variant, None);
        let delta = figure(measurements, Case::MlpAccuracyDelta, variant, None);
        let (Some(latency), Some(fp32_latency), Some(bytes), Some(fp32_bytes), Some(delta), Ok(batch_size)) =
            (latency, fp32_latency, bytes, fp32_bytes, delta, batch.parse())
        else {
            continue;
        };
        if latency <= 0.0 || fp32_bytes <= 0.0 {
            continue;
        }
        out.push(PrecisionEffect {
            variant: variant.clone(),
            precision,
            batch_size,
            speedup_vs_fp32: fp32_latency / latency,
            memory_ratio_vs_fp32: bytes / fp32_bytes,
            accuracy_delta: delta,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::wire::run::{Stats, Unit};

    fn m(case: &str, variant: &str, precision: &str, batch: Option<&str>, value: f64) -> Measurement {
        let mut parameters = BTreeMap::from([
            ("variant".to_string(), variant.to_string()),
            ("precision".to_string(), precision.to_string()),
        ]);
        if let Some(b) = batch {
            parameters.insert("batch".into(), b.into());
        }
        Measurement {
            suite: Suite::Quant,
            case: case.into(),
            parameters,
            unit: Unit::Seconds,
            status: MeasurementStatus::Ok,
            reason: None,
            stats: Some(Stats::single(value)),
            floor: None,
            histogram: None,
        }
    }

    #[test]
    fn ratios_are_taken_against_fp32_at_the_same_batch() {
        let run = vec![
            m("mlp_weight_bytes", "fp32", "fp32", None, 40_000.0),
            m("mlp_accuracy_delta", "fp32", "fp32", None, 0.0),
            m("mlp_latency", "fp32", "fp32", Some("64"), 100e-6),
            m("mlp_weight_bytes", "int8_x", "int8", None, 10_000.0),
            m("mlp_accuracy_delta", "int8_x", "int8", None, -0.003),
            m("mlp_latency", "int8_x", "int8", Some("64"), 50e-6),
            // No accuracy figure: left out, not guessed.
            m("mlp_weight_bytes", "int4_y", "int4", None, 5_000.0),
            m("mlp_latency", "int4_y", "int4", Some("64"), 40e-6),
        ];
        let effects = effects(&run);
        assert_eq!(effects.len(), 2);
        let int8 = &effects[1];
        assert_eq!((int8.precision, int8.batch_size), (Precision::Int8, 64));
        assert!((int8.speedup_vs_fp32 - 2.0).abs() < 1e-12);
        assert!((int8.memory_ratio_vs_fp32 - 0.25).abs() < 1e-12);
        assert_eq!(int8.accuracy_delta, -0.003);
    }
}
