#!/usr/bin/env bash
# Creates a Python virtual environment at DIR holding exactly the packages pinned in
# REQUIREMENTS (installed without resolving dependencies, so every version is the file's),
# then runs CHECK… with DIR/bin first on PATH. Done once: rerun only when REQUIREMENTS or the
# calling script changes. Concurrent callers wait on a lock beside DIR.
#
#   tools/pinned-venv.sh DIR REQUIREMENTS CALLER CHECK…
set -euo pipefail
dir="$1" requirements="$2" caller="$3"
shift 3
name="$(basename "$dir")"
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9

stamp="$(cat "$requirements" "$caller" "$0" | sha256sum | cut -c1-16)"
if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    exit 0
fi
rm -rf "$dir"
echo "$name: installing into $dir (once)" >&2
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
PATH="$dir/bin:$PATH" "$@" >/dev/null
echo "$stamp" > "$dir/.stamp"
