//! The quantization suite through the real agent binary: the shipped digits model trained,
//! cached and evaluated in every variant, and the GEMM cases against their FP64 reference, the
//! core's measured peak and ONNX Runtime (the real package, installed by
//! `tools/onnxruntime/setup.sh`) on the same shapes.

use std::collections::BTreeMap;
use std::process::Output;

use assert_cmd::cargo::CommandCargoExt;
use model::{MeasurementStatus, RunUpload};

mod common;

fn run_quant(cache: &std::path::Path, spool: &std::path::Path, python: &std::path::Path) -> (Output, RunUpload) {
    let out = std::process::Command::cargo_bin("measurements-agent")
        .unwrap()
        .env("HEADROOM_CACHE", cache)
        .env("HEADROOM_ONNXRUNTIME_PYTHON", python)
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
    let python = common::tool_venv("onnxruntime").join("bin/python");
    let (first, run) = run_quant(cache.path(), spool.path(), &python);
    assert!(String::from_utf8_lossy(&first.stderr).contains("trained in"), "the first run trains");

    for m in &run.measurements {
        let s = m.stats.unwrap_or_else(|| panic!("every quant case ran: {m:?}"));
        assert!(s.p50.is_finite(), "{m:?}");
        assert!(m.parameters.contains_key("cpu_features"), "{m:?}");
        let limit = ["core_peak", "floor_onnxruntime_fp32", "floor_onnxruntime_int8"].contains(&m.case.as_str());
        assert!(limit || m.parameters.contains_key("kernel"), "{m:?}");
    }
    gemm_against_the_core_and_onnxruntime(&run);

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
    // Without ONNX Runtime the run still succeeds, and says why the anchor is missing.
    let (second, again) = run_quant(cache.path(), spool.path(), std::path::Path::new("/nonexistent/python"));
    assert!(String::from_utf8_lossy(&second.stderr).contains("trained networks from"), "the second run uses the cache");
    assert_eq!(by(&again, "mlp_accuracy", "variant", &[]), accuracy);
    let skipped: Vec<_> = again.measurements.iter().filter(|m| m.status != MeasurementStatus::Ok).collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!((skipped[0].case.as_str(), skipped[0].status), ("floor_onnxruntime", MeasurementStatus::Skipped));
    assert!(skipped[0].reason.as_deref().unwrap().contains("/nonexistent/python"), "{skipped:?}");
    assert!(!again.measurements.iter().any(|m| m.case.starts_with("gemm_ratio_vs_onnxruntime")));
}

/// Every GEMM path has its fraction of the core's measured peak and its ratio to ONNX
/// Runtime's figure on the same shape, and the headline paths run this CPU's packed kernels.
fn gemm_against_the_core_and_onnxruntime(run: &RunUpload) {
    let peaks: Vec<_> = run.measurements.iter().filter(|m| m.case == "core_peak").collect();
    assert!(peaks.iter().any(|m| m.parameters["instruction"].starts_with("int8_")), "{peaks:?}");
    assert!(peaks.iter().any(|m| m.parameters["instruction"].starts_with("fp32_fma_")), "{peaks:?}");
    for m in &peaks {
        let ghz: f64 = m.parameters["clock_ghz"].parse().unwrap();
        let per_cycle: f64 = m.parameters["ops_per_cycle"].parse().unwrap();
        // Any x86-64 of this decade: 0.5-7 GHz, and at least one SSE-width FMA a cycle.
        assert!((0.5..7.0).contains(&ghz) && per_cycle >= 8.0, "{m:?}");
    }
    for (batch, hidden) in [("1", "512"), ("64", "512"), ("1", "1024"), ("64", "1024")] {
        let shape = [("batch", batch), ("hidden", hidden)];
        for precision in ["fp32", "int8"] {
            let floor = run.measurements.iter().find(|m| {
                m.case == format!("floor_onnxruntime_{precision}")
                    && shape.iter().all(|(k, v)| m.parameters.get(*k).map(String::as_str) == Some(*v))
            });
            let floor = floor.unwrap_or_else(|| panic!("ONNX Runtime's {precision} at {shape:?}"));
            assert_eq!(floor.parameters["onnxruntime"], "1.31.1");
            assert!(floor.parameters["op"].starts_with(if precision == "int8" { "MatMulInteger" } else { "MatMul" }));
        }
        let kernel = by(run, "gemm_throughput", "path", &shape);
        for path in ["fp32_library", "fp32", "bf16", "int8"] {
            assert!(kernel[path] > 0.0, "{path} at {shape:?}: {kernel:?}");
        }
        let fraction = by(run, "gemm_fraction_of_peak", "path", &shape);
        let int8_ratio = by(run, "gemm_ratio_vs_onnxruntime_int8", "path", &shape);
        let fp32_ratio = by(run, "gemm_ratio_vs_onnxruntime_fp32", "path", &shape);
        for path in kernel.keys() {
            // A kernel's median cannot be far above the best its instruction ever did.
            assert!(fraction[path] > 0.0 && fraction[path] < 1.5, "{path} at {shape:?}: {fraction:?}");
            let ratio = if path.starts_with("int8") { &int8_ratio } else { &fp32_ratio };
            assert!(ratio[path] > 0.0, "{path} at {shape:?}");
        }
        let int8 = run
            .measurements
            .iter()
            .find(|m| {
                m.case == "gemm_throughput"
                    && m.parameters["path"] == "int8"
                    && m.parameters["batch"] == batch
                    && m.parameters["hidden"] == hidden
            })
            .unwrap();
        assert!(int8.floor.as_ref().unwrap().name.starts_with("core_peak_int8_"), "{int8:?}");
        if std::arch::is_x86_feature_detected!("avx2") {
            assert!(int8.parameters["kernel"].starts_with("packed, "), "{int8:?}");
        }
    }
}
