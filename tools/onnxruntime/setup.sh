#!/usr/bin/env bash
# Installs ONNX Runtime (CPU) and the `onnx` package, the anchor the quant suite times its GEMM
# kernels against, into a virtual environment at DIR (default: $CARGO_TARGET_DIR/onnxruntime),
# every package pinned in requirements.txt. Needs python3 with venv and PyPI. Point the agent
# at it with
#   HEADROOM_ONNXRUNTIME_PYTHON=DIR/bin/python measurements-agent run quant
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/onnxruntime}"
exec bash "$here/../pinned-venv.sh" "$dir" "$here/requirements.txt" "$0" python -c "import onnx, onnxruntime"
