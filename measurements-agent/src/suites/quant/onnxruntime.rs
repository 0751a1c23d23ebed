//! ONNX Runtime on the same GEMM shapes in the same run: the figure a team would get from the
//! runtime it deploys, beside which our kernels are judged. It runs through a small Python
//! script shipped inside the agent (`onnxruntime_gemm.py`), when a Python with `onnxruntime` and
//! `onnx` is there: `HEADROOM_ONNXRUNTIME_PYTHON`, else `python3`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

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

/// Times ONNX Runtime on one thread for each `(batch, hidden)`; the error says why it could
/// not (no Python, no onnxruntime, a crash, or longer than `limit`).
pub fn measure(shapes: &[(usize, usize)], budget: Duration, limit: Duration) -> Result<Anchor, String> {
    let python = python();
    let mut script = tempfile::Builder::new()
        .prefix("headroom-onnxruntime-")
        .suffix(".py")
        .tempfile()
        .map_err(|e| format!("cannot write the ONNX Runtime script: {e}"))?;
    script.write_all(SCRIPT.as_bytes()).map_err(|e| format!("cannot write the ONNX Runtime script: {e}"))?;
    let request = serde_json::json!({ "shapes": shapes, "budget_s": budget.as_secs_f64() });
    let mut child = Command::new(&python)
        .arg(script.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {python}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(request.to_string().as_bytes()).map_err(|e| format!("{python}: {e}"))?;
    }
    // Read both pipes on their own threads so a chatty child never blocks on a full pipe.
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait().map_err(|e| format!("{python}: {e}"))? {
            Some(status) => break status,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("ONNX Runtime took longer than {} s and was stopped", limit.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    if !status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim();
        return Err(if last.contains("No module named") {
            format!("{python} has no onnxruntime or onnx ({last}); set HEADROOM_ONNXRUNTIME_PYTHON to one that has")
        } else {
            format!("ONNX Runtime failed ({status}): {last}")
        });
    }
    serde_json::from_str(stdout.trim()).map_err(|e| format!("ONNX Runtime's answer is not what was expected: {e}"))
}
