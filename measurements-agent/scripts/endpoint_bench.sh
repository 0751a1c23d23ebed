#!/usr/bin/env bash
# The endpoint suite measured against reference tools on the same server in the same minute,
# and the queueing model's error on a real server. Prints tables; compare the ratios, not the
# times (shared machines are noisy).
#
#   measurements-agent/scripts/endpoint_bench.sh [seconds per measurement, default 15]
#
# 1. Unloaded latency of MLServer (digits): wrk, one connection, closed loop, against the agent
#    at a constant rate where the server is idle 90 % of the time. Both see one request alone.
# 2. Capacity: wrk with 16 connections (closed loop, the most it can push) against the highest
#    throughput the agent's sweep achieved (open loop).
# 3. The M/G/c model against the sweep, step by step (model/examples/endpoint_check.rs).
# 4. GuideLLM's mock OpenAI server told TTFT 100 ms and ITL 10 ms, measured by the agent.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
secs="${1:-15}"
target="${CARGO_TARGET_DIR:-$root/target}"
servers="$target/endpoint-servers"
bash tools/endpoint-servers/setup.sh "$servers"
if ! command -v wrk >/dev/null; then
    echo "installing Debian's wrk (the reference HTTP load tool)" >&2
    apt-get install -y -qq wrk >/dev/null
fi
cargo build -q --release -p measurements-agent
cargo build -q --release -p model --example endpoint_check
agent="$target/release/measurements-agent"
check="$target/release/examples/endpoint_check"

work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port); grpc=$(port); metrics=$(port)
mkdir -p "$work/models/digits"
cp "$servers/models/digits/"* "$work/models/digits/"
cat > "$work/models/settings.json" <<JSON
{"http_port": $http, "grpc_port": $grpc, "metrics_port": $metrics, "host": "127.0.0.1", "parallel_workers": 0}
JSON
"$servers/mlserver/bin/mlserver" start "$work/models" >"$work/mlserver.log" 2>&1 &
url="http://127.0.0.1:$http"
for _ in $(seq 1 240); do curl -sf "$url/v2/models/digits/ready" >/dev/null && break; sleep 0.5; done
curl -sf "$url/v2/models/digits/ready" >/dev/null || { cat "$work/mlserver.log"; exit 1; }

body='{"inputs":[{"name":"pixels","shape":[1,64],"datatype":"FP64","data":['"$(python3 -c 'print(",".join(str(float(i%17)) for i in range(64)))')"']}]}'
printf '%s' "$body" > "$work/body.json"
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = io.open("$work/body.json"):read("a")
LUA
infer="$url/v2/models/digits/infer"
# wrk --latency prints "50%  7.12ms"; in milliseconds.
wrk_ms() { awk -v q="$2" '$1==q { v=$2; if (v ~ /us$/) { sub(/us/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms/,"",v) } else if (v ~ /s$/) { sub(/s/,"",v); v*=1000 } print v }' "$1"; }
stat_ms() { python3 - "$1" "$2" "$3" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
m = [m for m in run["measurements"] if m["case"] == sys.argv[2] and m["parameters"].get("step") == "1"][0]
print(f'{m["stats"][sys.argv[3]] * (1e3 if m["unit"] == "seconds" else 1):.3f}')
PY
}

echo "== 1. unloaded latency, $secs s each" >&2
wrk -t1 -c1 -d"${secs}s" --latency -s "$work/post.lua" "$infer" > "$work/wrk1.txt"
"$agent" --spool "$work/spool" run endpoint --target "$infer" --protocol http-json --input "$work/body.json" \
    --rates 15 --arrivals constant --duration "${secs}s" --warmup 2s --json > "$work/low.json" 2>/dev/null
w50=$(wrk_ms "$work/wrk1.txt" 50%); w99=$(wrk_ms "$work/wrk1.txt" 99%)
a50=$(stat_ms "$work/low.json" endpoint_latency p50); a99=$(stat_ms "$work/low.json" endpoint_latency p99)

echo "== 2. capacity" >&2
wrk -t2 -c16 -d"${secs}s" -s "$work/post.lua" "$infer" > "$work/wrk16.txt"
wrps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk16.txt")
"$agent" --spool "$work/spool" run endpoint --target "$url" --protocol kserve-v2 --model digits --sweep \
    --duration "$(( secs / 2 > 3 ? secs / 2 : 3 ))s" --warmup 2s --json > "$work/sweep.json" 2>"$work/sweep.err"
arps=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(max(m["stats"]["mean"] for m in r["measurements"] if m["case"]=="endpoint_achieved_rate"))' "$work/sweep.json")

echo
echo "MLServer 1.7.1 (scikit-learn digits) at $infer; agent: measurements-agent (release)"
echo
echo "| figure | wrk 4.1 | agent | agent ÷ wrk |"
echo "|---|---|---|---|"
printf '| unloaded p50 (wrk -c1 closed loop; agent 15/s constant) | %.2f ms | %.2f ms | %.2f |\n' "$w50" "$a50" "$(echo "$a50 / $w50" | bc -l)"
printf '| unloaded p99 | %.2f ms | %.2f ms | %.2f |\n' "$w99" "$a99" "$(echo "$a99 / $w99" | bc -l)"
printf '| most requests/s (wrk -c16; agent sweep, highest achieved) | %.1f | %.1f | %.2f |\n' "$wrps" "$arps" "$(echo "$arps / $wrps" | bc -l)"
echo
echo "== 3. the model against the sweep"
"$check" "$work/sweep.json"
grep "step" "$work/sweep.err" || true

echo
echo "== 4. GuideLLM mock server told TTFT 100 ms, ITL 10 ms, 32 tokens"
llm=$(port)
HF_HUB_OFFLINE=1 "$servers/guidellm/bin/python" tools/endpoint-servers/mock_llm.py "$llm" 100 10 32 >"$work/llm.log" 2>&1 &
for _ in $(seq 1 240); do curl -sf "http://127.0.0.1:$llm/v1/models" >/dev/null && break; sleep 0.5; done
"$agent" --spool "$work/spool" run endpoint --target "http://127.0.0.1:$llm" --protocol openai-chat --rates 4 \
    --max-tokens 32 --duration "${secs}s" --warmup 2s --json > "$work/llm.json" 2>/dev/null
echo "| figure | told | measured p50 | ratio |"
echo "|---|---|---|---|"
t=$(stat_ms "$work/llm.json" endpoint_ttft p50); i=$(stat_ms "$work/llm.json" endpoint_itl p50)
printf '| TTFT | 100 ms | %.2f ms | %.3f |\n' "$t" "$(echo "$t / 100" | bc -l)"
printf '| ITL | 10 ms | %.3f ms | %.3f |\n' "$i" "$(echo "$i / 10" | bc -l)"
