#!/usr/bin/env bash
# Installs the third-party inference servers the endpoint suite's tests run against, each in
# its own Python virtual environment under DIR (default: $CARGO_TARGET_DIR/endpoint-servers),
# with every package pinned. Created once; rerun only when a requirements file changes.
#
#   mlserver/   MLServer 1.7.1 with its scikit-learn runtime, serving a classifier trained here
#               on scikit-learn's bundled digits (models/digits)
#   guidellm/   GuideLLM 0.8.1's OpenAI-compatible mock server (without PyTorch: the mock needs
#               only its own tokenizer stand-in)
#   kserve/     KServe 0.21.0's Python model server, serving the same classifier
#               (kserve_digits.py) over REST with the binary tensor data extension
#
# Needs python3 with venv and PyPI; nothing is fetched when the tests run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/endpoint-servers}"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

stamp="$(cat "$here"/requirements-*.txt "$here"/*.py "$0" | sha256sum | cut -c1-16)"
if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    exit 0
fi
rm -rf "$dir/mlserver" "$dir/guidellm" "$dir/kserve" "$dir/models"

echo "endpoint-servers: installing MLServer into $dir/mlserver (once)" >&2
python3 -m venv "$dir/mlserver"
"$dir/mlserver/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements-mlserver.txt"
"$dir/mlserver/bin/python" "$here/train_digits.py" "$dir/models/digits"

echo "endpoint-servers: installing GuideLLM's mock server into $dir/guidellm (once)" >&2
python3 -m venv "$dir/guidellm"
"$dir/guidellm/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements-guidellm.txt"
"$dir/guidellm/bin/pip" install --quiet --disable-pip-version-check --no-deps guidellm==0.8.1
"$dir/guidellm/bin/python" -c "import guidellm.mock_server.server"

echo "endpoint-servers: installing KServe's model server into $dir/kserve (once)" >&2
python3 -m venv "$dir/kserve"
"$dir/kserve/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements-kserve.txt"
"$dir/kserve/bin/python" -c "import kserve, numpy"

echo "$stamp" > "$dir/.stamp"
