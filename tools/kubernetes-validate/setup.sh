#!/usr/bin/env bash
# Installs kubernetes-validate (the Kubernetes API's JSON schemas, 1.25 to 1.34, and a checker;
# no cluster needed) into a virtual environment at DIR (default:
# $CARGO_TARGET_DIR/kubernetes-validate), every package pinned in requirements.txt. Created
# once; rerun only when requirements.txt changes. Needs python3 with venv and PyPI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/kubernetes-validate}"
exec bash "$here/../pinned-venv.sh" "$dir" "$here/requirements.txt" "$0" kubernetes-validate --version
