#!/usr/bin/env bash
# The continuous-batching model against llama.cpp's server, with steps long enough for a p99:
# issue 19's bar (TTFT p99 and ITL p99 within ±25 % at three arrival rates) on this machine.
# CI's test (`measurements-agent/tests/llm.rs`) runs 30-second steps and can only hold the
# error to what chance gives steps that short; this runs the README's validation in one
# command, prints `llm_check`'s table, and exits with 1 unless TTFT p99 and ITL p99 are within
# ±25 % at every counted step (at least three).
#
#   [RATES=0.6,3,5.5,7] measurements-agent/scripts/llm_bench.sh [seconds per step, default 90] [OUT.json]
#
# The server is the one the tests start (tools/llm-server/setup.sh: llama.cpp's server, a
# 9.8 M-parameter random-weight Llama model, 8 slots, one thread). RATES are requests per
# second, the first a low one to fit the engine alone; without RATES they are fractions of
# what this machine's server completes one request at a time (timed in a 20-second step
# first): 6, 30, 50 and 65 %, which on the 2-vCPU development VM came out 6, 34, 51 and 72 %
# busy as the fitted engine reads them (the Poisson schedule's own count moves a rate by a few
# per cent). About 4 × (seconds + 3) of wall time, plus
# the builds the first time; keep the machine otherwise quiet (the agent and the server share
# its cores, as they would on a node).
set -euo pipefail
secs="${1:-90}"
# OUT as the caller named it, before the cd below.
out="${2:+$(realpath -m -- "$2")}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
dir="$target/llm-server"
bash tools/llm-server/setup.sh "$dir"
cargo build -q --release -p measurements-agent
cargo build -q --release -p model --example llm_check
agent="$target/release/measurements-agent"
check="$target/release/examples/llm_check"

work="$(mktemp -d)"
server=""
trap 'if [[ -n "$server" ]]; then kill "$server" 2> /dev/null || true; fi; rm -rf "$work"' EXIT
trap 'exit 143' TERM HUP
# The runs stay here: never uploaded to a Headroom server named in the environment.
agent() { env -u HEADROOM_SERVER -u HEADROOM_TOKEN -u HEADROOM_CONFIG "$agent" --spool "$work/spool" "$@"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
slots=8
# As measurements-agent/tests/llm.rs starts it: one thread, no prompt cache, every answer
# max_tokens long.
"$dir/bin/llama-server" -m "$dir/models/tiny.gguf" -c 4096 -np "$slots" -t 1 -tb 1 \
    --host 127.0.0.1 --port "$port" --ignore-eos --no-webui --no-cache-prompt --cache-ram 0 -lv 0 --metrics \
    > /dev/null 2> "$work/server.log" &
server=$!
for _ in $(seq 1 600); do
    curl -sf "$url/health" > /dev/null && break
    kill -0 "$server" 2> /dev/null || break
    sleep 0.2
done
curl -sf "$url/health" > /dev/null || { cat "$work/server.log"; exit 1; }

if [[ -z "${RATES:-}" ]]; then
    # A short step at 0.5/s: a request's time alone, its first token and 31 gaps. This CPU
    # server batches no cheaper than one by one, so 1 ÷ that is about what it completes at
    # most (a little more than it sustains: HTTP and the client share the cores).
    agent run endpoint --target "$url" --protocol openai-completions \
        --rates 0.5 --duration 20s --warmup 2s --max-tokens 32 --prompt-words 40-80 --json > "$work/alone.json"
    RATES=$(python3 - "$work/alone.json" <<'PY'
import json, sys
stats = {m["case"]: m["stats"] for m in json.load(open(sys.argv[1]))["measurements"] if m.get("stats")}
one = stats["endpoint_ttft"]["p50"] + 31 * stats["endpoint_itl"]["p50"]
print(",".join(f"{max(f / one, 0.01):.2f}" for f in (0.06, 0.3, 0.5, 0.65)))
PY
)
    echo "rates $RATES/s: 6, 30, 50 and 65 % of one request at a time alone" >&2
fi

agent run endpoint --target "$url" --protocol openai-completions \
    --rates "$RATES" --duration "${secs}s" --warmup 3s --max-tokens 32 --prompt-words 40-80 --json \
    > "$work/run.json"
if [[ -n "$out" ]]; then cp "$work/run.json" "$out"; fi
echo
echo "== llama.cpp's server (8 slots, 1 thread), ${secs}-second steps at $RATES/s"
echo
"$check" "$work/run.json" "$slots" | tee "$work/check.txt"
# The verdict: the issue's bar holds where TTFT p99 and ITL p99 are within ±25 % at every
# counted step, and at least three steps count.
python3 - "$work/check.txt" <<'PY'
import re, sys
line = next(l for l in open(sys.argv[1]) if l.startswith("within ±25 %"))
ttft, n, itl, _ = map(int, re.findall(r"(\d+) of (\d+)", line)[0] + re.findall(r"(\d+) of (\d+)", line)[1])
ok = n >= 3 and ttft == n and itl == n
print(f"\n{'PASS' if ok else 'FAIL'}: TTFT p99 within ±25 % at {ttft} of {n} counted steps, ITL p99 at {itl} of {n} (the bar: every one, at least 3)")
sys.exit(0 if ok else 1)
PY
