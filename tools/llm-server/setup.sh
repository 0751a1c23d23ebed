#!/usr/bin/env bash
# Builds llama.cpp's OpenAI-compatible server and writes the tiny model the LLM tests serve,
# under DIR (default: $CARGO_TARGET_DIR/llm-server). Created once; rerun only when this
# directory's files change, or the CPU or compiler does. `cargo xtask test` runs it before the
# tests; after that nothing is fetched when they run.
#
#   venv/                 cmake, ninja and the gguf writer, pinned (requirements.txt)
#   bin/llama-server      llama.cpp's server, built from the llama.cpp sources that the PyPI
#                         package llama-cpp-python 0.3.36 vendors (its sdist, checked by hash):
#                         the server with continuous batching over --parallel slots, which the
#                         package's own Python server (one request at a time) does not have
#   models/tiny.gguf      a Llama-architecture model with random weights (write_tiny_llama.py),
#   models/tiny.json      and its shape for the planning model
#
# Needs python3 with venv, a C++ compiler and PyPI. The build takes about 12 min on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-${CARGO_TARGET_DIR:-$here/../../target}/llm-server}"
version=0.3.36
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

# The server is built for this CPU (-DGGML_NATIVE=ON): a new CPU or compiler builds it again.
machine="$(uname -m; grep -m1 '^flags' /proc/cpuinfo 2>/dev/null; c++ --version 2>/dev/null | head -n1)"
stamp="$( (cat "$here"/requirements.txt "$here"/*.py "$0"; echo "$machine") | sha256sum | cut -c1-16)"
if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    exit 0
fi
rm -rf "$dir/venv" "$dir/bin" "$dir/models" "$dir/src" "$dir/build"

echo "llm-server: installing the build tools and the model writer into $dir/venv (once)" >&2
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary :all: -r "$here/requirements.txt"

echo "llm-server: fetching llama-cpp-python $version's sources from PyPI (once)" >&2
mkdir -p "$dir/src"
# The hash is checked as the file arrives, before pip reads anything in it.
echo "llama-cpp-python==$version --hash=sha256:$sdist_sha256" > "$dir/src/sdist.txt"
"$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    --no-build-isolation --require-hashes -d "$dir/src" -r "$dir/src/sdist.txt"
sdist="$dir/src/llama_cpp_python-$version.tar.gz"
echo "$sdist_sha256  $sdist" | sha256sum --check --quiet
tar -xzf "$sdist" -C "$dir/src"

echo "llm-server: building llama-server (once, about 12 min on 2 cores)" >&2
export PATH="$dir/venv/bin:$PATH"
cmake -S "$dir/src/llama_cpp_python-$version/vendor/llama.cpp" -B "$dir/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    > "$dir/build.log" 2>&1
cmake --build "$dir/build" --target llama-server -j "$(nproc)" >> "$dir/build.log" 2>&1 \
  || { tail -40 "$dir/build.log" >&2; exit 1; }
mkdir -p "$dir/bin"
cp "$dir/build/bin/llama-server" "$dir/bin/"
rm -rf "$dir/build" "$dir/src"

mkdir -p "$dir/models"
"$dir/venv/bin/python" "$here/write_tiny_llama.py" "$dir/models/tiny.gguf" >/dev/null
"$dir/bin/llama-server" --version >/dev/null 2>&1
echo "$stamp" > "$dir/.stamp"
