#!/usr/bin/env bash
# Installs ONNX Runtime (CPU) and the `onnx` package, the anchor the quant suite times its GEMM
# kernels against, into a virtual environment at DIR (default: $CARGO_TARGET_DIR/onnxruntime),
# every package pinned in requirements.txt. Created once; rerun only when requirements.txt
# changes. Needs python3 with venv and PyPI. Point the agent at it with
#   HEADROOM_ONNXRUNTIME_PYTHON=DIR/bin/python measurements-agent run quant
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/onnxruntime}"
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9

stamp="$(cat "$here/requirements.txt" "$0" | sha256sum | cut -c1-16)"
if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    exit 0
fi
rm -rf "$dir"
echo "onnxruntime: installing into $dir (once)" >&2
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements.txt"
"$dir/bin/python" -c "import onnx, onnxruntime; print('onnxruntime', onnxruntime.__version__, file=__import__('sys').stderr)"
echo "$stamp" > "$dir/.stamp"
