#!/usr/bin/env bash
# Installs NVIDIA's AIPerf 0.13.0 (an LLM load tool) into DIR/aiperf, every package pinned, and a
# word-level tokenizer into DIR/aiperf/hf (HF_HOME), for the endpoint benchmark only: the tests
# do not need it (about 1.2 GB). Created once; rerun only when this or its requirements change.
#
# GuideLLM's own benchmark client was the first choice, but `guidellm run` imports PyTorch for
# its data loader, and PyPI's PyTorch for Linux brings CUDA: 5.9 GB.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/endpoint-servers}"
mkdir -p "$dir"
exec 9>"$dir/.aiperf-lock"
flock 9
stamp="$(cat "$here/requirements-aiperf.txt" "$here/tiny_tokenizer.py" "$0" | sha256sum | cut -c1-16)"
if [[ -f "$dir/aiperf/.stamp" && "$(cat "$dir/aiperf/.stamp")" == "$stamp" ]]; then
    exit 0
fi
rm -rf "$dir/aiperf"
echo "endpoint-servers: installing AIPerf into $dir/aiperf (once)" >&2
python3 -m venv "$dir/aiperf"
"$dir/aiperf/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements-aiperf.txt"
"$dir/aiperf/bin/python" "$here/tiny_tokenizer.py" "$dir/aiperf/hf"
echo "$stamp" > "$dir/aiperf/.stamp"
