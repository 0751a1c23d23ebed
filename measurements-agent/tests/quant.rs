//! The quantization suite through the real agent binary: the shipped digits model trained,
//! cached and evaluated in every variant, and the GEMM cases against their FP64 reference.

use std::collections::BTreeMap;
use std::process::Output;

use assert_cmd::cargo::CommandCargoExt;
use model::{MeasurementStatus, RunUpload};

fn run_quant(cache: &std::path::Path, spool: &std::path::Path) -> (Output, RunUpload) {
    let out = std::process::Command::cargo_bin("measurements-agent")
        .unwrap()
        .env("HEADROOM_CACHE", cache)
        .env_remove("HEADROOM_SERVER")
        .args(["run", "quant", "--quick", "--json", "--spool"])
        .arg(spool)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    let run: RunUpload = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    run.validate().expect("a valid run");
    (out, run)
}

/// `case` of each variant (or GEMM path) as a map.
fn by(run: &RunUpload, case: &str, key: &str, filter: &[(&str, &str)]) -> BTreeMap<String, f64> {
    run.measurements
        .iter()
        .filter(|m| m.case == case && m.status == MeasurementStatus::Ok)
        .filter(|m| filter.iter().all(|(k, v)| m.parameters.get(*k).map(String::as_str) == Some(*v)))
        .map(|m| (m.parameters[key].clone(), m.stats.unwrap().p50))
        .collect()
}

#[test]
fn the_digits_model_in_every_precision() {
    let cache = tempfile::tempdir().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let (first, run) = run_quant(cache.path(), spool.path());
    assert!(String::from_utf8_lossy(&first.stderr).contains("trained in"), "the first run trains");

    for m in &run.measurements {
        let s = m.stats.unwrap_or_else(|| panic!("every quant case ran: {m:?}"));
        assert!(s.p50.is_finite(), "{m:?}");
        assert!(m.parameters.contains_key("kernel") && m.parameters.contains_key("cpu_features"), "{m:?}");
    }

    let accuracy = by(&run, "mlp_accuracy", "variant", &[]);
    assert_eq!(accuracy.len(), 10, "{accuracy:?}");
    // Ten classes: chance is 0.1.
    assert!(accuracy["fp32"] > 0.9, "FP32 top-1 {}", accuracy["fp32"]);
    for v in ["int8_ptq_dynamic_per_channel", "int8_ptq_static_per_channel", "int8_qat_per_channel"] {
        assert!((accuracy[v] - accuracy["fp32"]).abs() <= 0.01, "{v}: {} vs FP32 {}", accuracy[v], accuracy["fp32"]);
    }
    // Quantization-aware training gets back at least what post-training INT4 lost.
    assert!(accuracy["int4_qat_per_channel"] >= accuracy["int4_ptq_per_channel"], "{accuracy:?}");

    let bytes = by(&run, "mlp_weight_bytes", "variant", &[]);
    assert!(
        bytes["int8_ptq_static_per_channel"] < bytes["fp32"] * 0.3
            && bytes["int4_ptq_per_channel"] < bytes["int8_ptq_static_per_channel"]
    );
    for (case, hidden) in [("gemm_weight_bytes", 512.0), ("gemm_weight_bytes", 1024.0)] {
        let b = by(&run, case, "path", &[("batch", "1"), ("hidden", &format!("{hidden}"))]);
        // INT8 values are a quarter of FP32's; one FP32 scale per output channel comes on top.
        assert_eq!(b["int8"] - 4.0 * hidden, b["fp32"] / 4.0, "{b:?}");
        assert_eq!(b["bf16"], b["fp32"] / 2.0);
    }
    for batch in ["1", "64"] {
        let error = by(&run, "gemm_relative_error", "path", &[("batch", batch), ("hidden", "1024")]);
        assert!(error["fp32"] < 1e-5 && error["fp32_library"] < 1e-5, "{error:?}");
        assert!(error["bf16"] > error["fp32"] && error["bf16"] < 1e-2, "{error:?}");
        assert!(error["int8"] > error["fp32"] && error["int8"] < 2e-2, "{error:?}");
    }

    // What the model crate reads from the run for the planner.
    let effects = model::plan::quant::effects(&run.measurements);
    let int8 = effects.iter().find(|e| e.variant == "int8_ptq_static_per_channel" && e.batch_size == 64).unwrap();
    assert!(int8.memory_ratio_vs_fp32 < 0.3 && int8.speedup_vs_fp32 > 0.0, "{int8:?}");

    // A second run uses the cached networks and gets the same accuracies: training is
    // deterministic and the cache holds exactly what was trained.
    let (second, again) = run_quant(cache.path(), spool.path());
    assert!(String::from_utf8_lossy(&second.stderr).contains("trained networks from"), "the second run uses the cache");
    assert_eq!(by(&again, "mlp_accuracy", "variant", &[]), accuracy);
}
