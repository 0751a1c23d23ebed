#!/usr/bin/env bash
# Installs kubernetes-validate (the Kubernetes API's JSON schemas, 1.25 to 1.34, and a checker;
# no cluster needed) into a virtual environment at DIR (default:
# $CARGO_TARGET_DIR/kubernetes-validate), every package pinned in requirements.txt. Created
# once; rerun only when requirements.txt changes. Needs python3 with venv and PyPI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/kubernetes-validate}"
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9

stamp="$(cat "$here/requirements.txt" "$0" | sha256sum | cut -c1-16)"
if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    exit 0
fi
rm -rf "$dir"
echo "kubernetes-validate: installing into $dir (once)" >&2
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$here/requirements.txt"
"$dir/bin/kubernetes-validate" --version >/dev/null
echo "$stamp" > "$dir/.stamp"
