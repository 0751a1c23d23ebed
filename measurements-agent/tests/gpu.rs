//! The GPU suites through the real agent binary. On a node without a CUDA driver (CI, this
//! project's build machines) every transfer and alloc case is recorded as skipped with the
//! reason, the run stays valid, and the other suites run. On a GPU node the same command
//! measures; `gpu-check.sh` is the proof run there.

use assert_cmd::cargo::CommandCargoExt;
use model::{MeasurementStatus, RunUpload, Suite};

#[test]
fn gpu_suites_run_or_say_why_not_and_the_rest_still_runs() {
    let spool = tempfile::tempdir().unwrap();
    let out = std::process::Command::cargo_bin("measurements-agent")
        .unwrap()
        .env_remove("HEADROOM_SERVER")
        .args(["run", "system", "transfer", "alloc", "gemm", "--quick", "--json", "--spool"])
        .arg(spool.path())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    let run: RunUpload = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    run.validate().expect("a valid run");
    let of = |suite: Suite| run.measurements.iter().filter(move |m| m.suite == suite).collect::<Vec<_>>();
    // The copies are measured (power may be skipped: a node without RAPL says why).
    let memcpy: Vec<_> = of(Suite::System).into_iter().filter(|m| m.case == "memcpy").collect();
    assert!(!memcpy.is_empty() && memcpy.iter().all(|m| m.status == MeasurementStatus::Ok), "system still runs");
    let gpu: Vec<_> = of(Suite::Transfer).into_iter().chain(of(Suite::Alloc)).chain(of(Suite::Gemm)).collect();
    // 3 memories × 2 directions × 4 sizes + the many-small-copies case; 2 allocators × 2 sizes;
    // 4 precisions × 4 shapes (and, measured, an error figure for each); the GPU's power.
    let extra = gpu.iter().filter(|m| m.case == "copy_latency" || m.case == "cublas_gemm_relative_error").count();
    let power: Vec<_> = gpu.iter().filter(|m| m.case == "power").collect();
    assert_eq!(gpu.len(), 3 * 2 * 4 + 1 + 4 + 4 * 4 + extra + power.len());
    let driver = std::path::Path::new("/dev/nvidiactl").exists();
    if driver {
        // Idle and under FP16 GEMMs, from NVML's energy counter, each with the GPUs on the
        // node, and busy draws more than idle; or skipped with the reason on a GPU whose power
        // would not be this suite's (MIG, another process, older than Volta).
        let watts = |state: &str| {
            let m = power.iter().find(|m| m.parameters.get("state").map(String::as_str) == Some(state));
            m.and_then(|m| m.stats.as_ref()).map(|s| s.mean)
        };
        match (watts("idle"), watts("busy")) {
            (Some(idle), Some(busy)) => {
                assert!(busy > idle * 1.2, "busy {busy} W, idle {idle} W");
                assert!(power.iter().all(|m| m.parameters["gpus"].parse::<u32>().unwrap() >= 1), "{power:?}");
            }
            _ => assert!(
                power.iter().all(|m| m.reason.as_deref().is_none_or(|r| r.starts_with("no NVML: "))),
                "{power:?}"
            ),
        }
        assert!(power.iter().all(|m| m.parameters["source"] == "nvml"), "{power:?}");
    } else {
        assert_eq!(power.len(), 1, "one skipped power case: {power:?}");
    }
    if driver {
        eprintln!("a GPU is present: checking measured figures");
        assert!(gpu.iter().filter(|m| m.case != "power").all(|m| m.status == MeasurementStatus::Ok), "{text}");
    } else {
        for m in &gpu {
            assert_eq!(m.status, MeasurementStatus::Skipped, "{m:?}");
            assert!(m.reason.as_deref().unwrap_or("").starts_with("skipped: no CUDA driver"), "{m:?}");
        }
        assert!(text.contains("transfer: every case skipped: no CUDA driver"), "{text}");
        assert!(text.contains("gemm: every case skipped: no CUDA driver"), "{text}");
    }
}
