//! ONNX Runtime on the same GEMM shapes in the same run: the figure a team would get from the
//! runtime it deploys, beside which our kernels are judged. It runs through a small Python
//! script shipped inside the agent (`onnxruntime_gemm.py`), when a Python with `onnxruntime` and
//! `onnx` is there: `HEADROOM_ONNXRUNTIME_PYTHON`, else `python3`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::upload::printable_within;

const SCRIPT: &str = include_str!("onnxruntime_gemm.py");

/// ONNX Runtime's figures for the shapes asked.
#[derive(Debug, Clone, Deserialize)]
pub struct Anchor {
    pub version: String,
    /// Seconds of one call of a one-element model: Python, binding and session, not the GEMM.
    pub call_overhead_s: f64,
    pub results: Vec<AnchorResult>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AnchorResult {
    pub batch: usize,
    pub hidden: usize,
    /// `fp32` or `int8`.
    pub precision: String,
    /// The operator timed, e.g. `MatMulInteger u8s8`.
    pub op: String,
    /// Median seconds per call, the call's fixed cost included.
    pub seconds: f64,
}

impl AnchorResult {
    /// Seconds of the product itself: the call's fixed cost taken off, but never more than
    /// half the call (so a tiny shape's figure is not made up of the subtraction).
    pub fn kernel_seconds(&self, overhead: f64) -> f64 {
        (self.seconds - overhead).max(self.seconds / 2.0)
    }
}

impl Anchor {
    pub fn find(&self, batch: usize, hidden: usize, precision: &str) -> Option<&AnchorResult> {
        self.results.iter().find(|r| r.batch == batch && r.hidden == hidden && r.precision == precision)
    }
}

/// The Python to run the script with.
fn python() -> String {
    std::env::var("HEADROOM_ONNXRUNTIME_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into())
}

/// Text the server takes: no control characters, at most this many bytes.
const TEXT: usize = 200;
/// The most of the script's output read: its answer is a few kilobytes.
const OUTPUT: u64 = 1 << 20;

/// Times ONNX Runtime on one thread for each `(batch, hidden)`; the error says why it could
/// not (no Python, no onnxruntime, a crash, or longer than `limit`).
///
/// The script is written into a private directory and run isolated (`python -I`: neither the
/// script's directory nor `PYTHON*` variables reach its imports), without the agent's
/// `HEADROOM_*` variables (tokens among them), in a process group of its own that is killed
/// whole at the deadline; its output is read up to 1 MiB.
pub fn measure(shapes: &[(usize, usize)], budget: Duration, limit: Duration) -> Result<Anchor, String> {
    let python = python();
    let dir = tempfile::Builder::new()
        .prefix("headroom-onnxruntime-")
        .tempdir()
        .map_err(|e| format!("cannot write the ONNX Runtime script: {e}"))?;
    let script = dir.path().join("onnxruntime_gemm.py");
    std::fs::write(&script, SCRIPT).map_err(|e| format!("cannot write the ONNX Runtime script: {e}"))?;
    let request = serde_json::json!({ "shapes": shapes, "budget_s": budget.as_secs_f64() });
    let mut command = Command::new(&python);
    command.arg("-I").arg(&script).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("HEADROOM_") {
            command.env_remove(name);
        }
    }
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().map_err(|e| format!("cannot start {python}: {e}"))?;
    // A child that exits before reading its request is judged by its exit status below.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    // Read both pipes on their own threads so a chatty child never blocks on a full pipe.
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(p) = pipe {
                let _ = std::io::Read::read_to_end(&mut std::io::Read::take(p, OUTPUT), &mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            waited => {
                kill_group(&mut child);
                return Err(match waited {
                    Err(e) => format!("{python}: {e}"),
                    _ => format!("ONNX Runtime took longer than {} s and was stopped", limit.as_secs()),
                });
            }
        }
    };
    // Anything the script left behind in its group goes with it, so the pipes close.
    kill_group(&mut child);
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    if !status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim();
        let last = printable_within(last, TEXT);
        return Err(if last.contains("No module named") {
            format!("{python} has no onnxruntime or onnx ({last}); set HEADROOM_ONNXRUNTIME_PYTHON to one that has")
        } else {
            format!("ONNX Runtime failed ({status}): {last}")
        });
    }
    let mut anchor: Anchor = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("ONNX Runtime's answer is not what was expected: {e}"))?;
    // Only figures that can be divided by and stored (the server refuses a run holding a
    // non-finite number or unprintable text, so one bad answer must not cost the whole run):
    // a GEMM faster than a nanosecond is not a measurement.
    anchor.results.retain(|r| r.seconds.is_finite() && r.seconds >= 1e-9 && shapes.contains(&(r.batch, r.hidden)));
    if !(anchor.call_overhead_s.is_finite() && anchor.call_overhead_s >= 0.0) {
        anchor.call_overhead_s = 0.0;
    }
    anchor.version = printable_within(&anchor.version, 64);
    for r in &mut anchor.results {
        r.op = printable_within(&r.op, 64);
    }
    Ok(anchor)
}

/// Kills `child`'s process group (it leads one of its own) and reaps the child.
fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(pid).expect("a child's pid is positive"),
            rustix::process::Signal::KILL,
        );
    }
    let _ = child.wait();
}
