#!/usr/bin/env bash
# The quant suite's GEMM kernels on this CPU, in one run of the release agent: every kernel path
# against the FP32 library (matrixmultiply) and the portable loops it replaced, the core's peak
# measured in the same run, and ONNX Runtime (pinned, one thread) on the same shapes. Prints
# the tables; compare the ratios, not the times (shared machines are noisy).
#
#   measurements-agent/scripts/quant_bench.sh [extra agent arguments, e.g. --quick]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
bash tools/onnxruntime/setup.sh "$target/onnxruntime"
cargo build --quiet --release -p measurements-agent
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
HEADROOM_ONNXRUNTIME_PYTHON="$target/onnxruntime/bin/python" \
    "$target/release/measurements-agent" run quant "$@" --json --spool "$out/spool" > "$out/run.json"
python3 measurements-agent/scripts/quant_table.py "$out/run.json"
