#!/usr/bin/env bash
# The endpoint suite measured against reference tools on the same server in the same minute,
# and the queueing model's error on a real server. Prints tables; compare the ratios, not the
# times (shared machines are noisy).
#
#   [SECTIONS="1 2 3 4"] measurements-agent/scripts/endpoint_bench.sh [seconds per measurement, default 15]
#
# 1. Like for like on MLServer (scikit-learn digits), the same JSON body: wrk's closed loop with
#    1 and 16 connections against the agent's closed loop (--concurrency 1, then 16), each pair
#    back to back: p50, p99, requests/s. Then the agent's open loop at 15/s (the server idle
#    between requests) beside its closed loop at 1 (the server never idle).
# 2. The M/G/c model against an open-loop sweep, step by step (model/examples/endpoint_check.rs).
# 3. The client's own ceiling: Debian's nginx answering `return 200` on one core, the client
#    pinned to the other. wrk -t1 -c16 against --concurrency 16 (requests/s and the cores each
#    side used), and the open-loop rates the agent sends with send lag p99 under 1 ms.
# 4. GuideLLM's mock OpenAI server told TTFT 100 ms and ITL 10 ms, measured by the agent.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
secs="${1:-15}"
# SECTIONS="3" runs only the client's ceiling, and so on (default: all four).
want() { [[ " ${SECTIONS:-1 2 3 4} " == *" $1 "* ]]; }
target="${CARGO_TARGET_DIR:-$root/target}"
servers="$target/endpoint-servers"
bash tools/endpoint-servers/setup.sh "$servers"
if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
    echo "installing Debian's wrk (the reference HTTP load tool) and nginx-light (a trivial server)" >&2
    apt-get install -y -qq wrk nginx-light >/dev/null \
        || { apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null; }
fi
cargo build -q --release -p measurements-agent
cargo build -q --release -p model --example endpoint_check
agent="$target/release/measurements-agent"
check="$target/release/examples/endpoint_check"

work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 1 240); do curl -sf "$1" >/dev/null && return 0; sleep 0.5; done; return 1; }

# wrk --latency prints "50%  7.12ms"; in milliseconds.
wrk_ms() { awk -v q="$2" '$1==q { v=$2; if (v ~ /us$/) { sub(/us/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms/,"",v) } else if (v ~ /s$/) { sub(/s/,"",v); v*=1000 } print v }' "$1"; }
wrk_rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
# A figure of one step of a stored run: in milliseconds when its unit is seconds.
cat > "$work/stat.py" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
case, stat = sys.argv[2], sys.argv[3]
step = sys.argv[4] if len(sys.argv) > 4 else "1"
m = [m for m in run["measurements"] if m["case"] == case and m["parameters"].get("step") == step][0]
print(f'{m["stats"][stat] * (1e3 if m["unit"] == "seconds" else 1):.3f}')
PY
stat_of() { python3 "$work/stat.py" "$@"; }
ratio() { python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' "$1" "$2"; }
post_lua() { # FILE BODY
    printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = io.open("%s"):read("a")\n' "$2" > "$1"
}
# The agent's closed loop against an http-json target: OUT IN_FLIGHT URL BODY.
agent_closed() {
    "$agent" --spool "$work/spool" run endpoint --target "$3" --protocol http-json \
        --input "$4" --concurrency "$2" --duration "${secs}s" --warmup 2s --json > "$1" 2>/dev/null
}

if want 1 || want 2; then
http=$(port); grpc=$(port); metrics=$(port)
mkdir -p "$work/models/digits"
cp "$servers/models/digits/"* "$work/models/digits/"
cat > "$work/models/settings.json" <<JSON
{"http_port": $http, "grpc_port": $grpc, "metrics_port": $metrics, "host": "127.0.0.1", "parallel_workers": 0}
JSON
"$servers/mlserver/bin/mlserver" start "$work/models" >"$work/mlserver.log" 2>&1 &
url="http://127.0.0.1:$http"
wait_for "$url/v2/models/digits/ready" || { cat "$work/mlserver.log"; exit 1; }
infer="$url/v2/models/digits/infer"
body='{"inputs":[{"name":"pixels","shape":[1,64],"datatype":"FP64","data":['"$(python3 -c 'print(",".join(str(float(i%17)) for i in range(64)))')"']}]}'
printf '%s' "$body" > "$work/body.json"
post_lua "$work/post.lua" "$work/body.json"
fi

if want 1; then
echo "== 1. like for like, closed loops, $secs s each" >&2
declare -A w50 w99 wrps a50 a99 arps
for c in 1 16; do
    wrk -t"$(( c < 2 ? 1 : 2 ))" -c"$c" -d"${secs}s" --latency -s "$work/post.lua" "$infer" > "$work/wrk$c.txt"
    agent_closed "$work/closed$c.json" "$c" "$infer" "$work/body.json"
    w50[$c]=$(wrk_ms "$work/wrk$c.txt" 50%); w99[$c]=$(wrk_ms "$work/wrk$c.txt" 99%); wrps[$c]=$(wrk_rps "$work/wrk$c.txt")
    a50[$c]=$(stat_of "$work/closed$c.json" endpoint_latency p50)
    a99[$c]=$(stat_of "$work/closed$c.json" endpoint_latency p99)
    arps[$c]=$(stat_of "$work/closed$c.json" endpoint_achieved_rate mean)
done
"$agent" --spool "$work/spool" run endpoint --target "$infer" --protocol http-json --input "$work/body.json" \
    --rates 15 --arrivals constant --duration "${secs}s" --warmup 2s --json > "$work/low.json" 2>/dev/null
o50=$(stat_of "$work/low.json" endpoint_latency p50); o99=$(stat_of "$work/low.json" endpoint_latency p99)
fi

if want 2; then
echo "== 2. an open-loop sweep" >&2
"$agent" --spool "$work/spool" run endpoint --target "$url" --protocol kserve-v2 --model digits --sweep \
    --duration "$(( secs / 2 > 3 ? secs / 2 : 3 ))s" --warmup 2s --json > "$work/sweep.json" 2>"$work/sweep.err"
fi

if want 1; then
echo
echo "== 1. MLServer 1.7.1 (scikit-learn digits) at $infer, the same body; agent: measurements-agent (release)"
echo
echo "| closed loop | wrk 4.1 | agent | agent ÷ wrk |"
echo "|---|---|---|---|"
for c in 1 16; do
    printf '| %s in flight, p50 | %.2f ms | %.2f ms | %s |\n' "$c" "${w50[$c]}" "${a50[$c]}" "$(ratio "${a50[$c]}" "${w50[$c]}")"
    printf '| %s in flight, p99 | %.2f ms | %.2f ms | %s |\n' "$c" "${w99[$c]}" "${a99[$c]}" "$(ratio "${a99[$c]}" "${w99[$c]}")"
    printf '| %s in flight, requests/s | %.1f | %.1f | %s |\n' "$c" "${wrps[$c]}" "${arps[$c]}" "$(ratio "${arps[$c]}" "${wrps[$c]}")"
done
echo
echo "| the agent alone | p50 | p99 |"
echo "|---|---|---|"
printf '| closed loop, 1 in flight (the server never idle) | %.2f ms | %.2f ms |\n' "${a50[1]}" "${a99[1]}"
printf '| open loop, 15/s constant (the server idle between requests) | %.2f ms | %.2f ms |\n' "$o50" "$o99"
fi

echo
if want 2; then
echo "== 2. the model against the sweep"
"$check" "$work/sweep.json"
grep "step" "$work/sweep.err" || true
fi

echo
if want 3; then
echo "== 3. the client's ceiling: nginx 'return 200' on CPU 0, the client on CPU 1" >&2
ng=$(port)
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $work/nginx/body;
    server {
        listen 127.0.0.1:$ng;
        location / { return 200 "ok"; }
    }
}
CONF
taskset -c 0 nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
wait_for "http://127.0.0.1:$ng/" || { cat "$work/nginx/error.log"; exit 1; }
printf '{}' > "$work/empty.json"
post_lua "$work/post-empty.lua" "$work/empty.json"
# Runs a command and prints the cores it used and the cores nginx used meanwhile.
cat > "$work/cores.py" <<'PY'
import os, resource, subprocess, sys, time
def ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
hz = os.sysconf("SC_CLK_TCK")
server, out, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
before, start = ticks(server), time.monotonic()
with open(out, "w") as f:
    subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True)
wall = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{(usage.ru_utime + usage.ru_stime) / wall:.2f} {(ticks(server) - before) / hz / wall:.2f}")
PY
# wrk's own latency figures are for its closed loop; only its throughput is compared here.
read -r wcpu wng < <(python3 "$work/cores.py" "$nginx_pid" "$work/ng-wrk.txt" \
    taskset -c 1 wrk -t1 -c16 -d"${secs}s" -s "$work/post-empty.lua" "http://127.0.0.1:$ng/")
# The agent under test, and (BASELINE_AGENT=path) another build of it in the same minute.
clients=("agent=$agent")
[[ -n "${BASELINE_AGENT:-}" ]] && clients+=("baseline=$BASELINE_AGENT")
rates="5000,10000,20000,40000,60000,80000,120000"
declare -A acpu ang nga
for client in "${clients[@]}"; do
    name=${client%%=*}; bin=${client#*=}
    read -r acpu[$name] ang[$name] < <(python3 "$work/cores.py" "$nginx_pid" "$work/ng-closed-$name.json" \
        taskset -c 1 "$bin" --spool "$work/spool" run endpoint --target "http://127.0.0.1:$ng/" --protocol http-json \
        --input "$work/empty.json" --concurrency 16 --duration "${secs}s" --warmup 2s --json)
    nga[$name]=$(stat_of "$work/ng-closed-$name.json" endpoint_achieved_rate mean)
    taskset -c 1 "$bin" --spool "$work/spool" run endpoint --target "http://127.0.0.1:$ng/" --protocol http-json \
        --input "$work/empty.json" --rates "$rates" --arrivals poisson --max-send-lag 1ms \
        --duration "$(( secs / 3 > 3 ? secs / 3 : 3 ))s" --warmup 1s --json > "$work/ng-open-$name.json" 2>/dev/null
done
ngw=$(wrk_rps "$work/ng-wrk.txt")

echo
echo "== 3. the client's ceiling: nginx 1.22 'return 200' pinned to CPU 0, each client pinned to CPU 1"
echo
echo "| 16 in flight, closed loop | requests/s | ÷ wrk | client cores | nginx cores | requests per client CPU-second |"
echo "|---|---|---|---|---|---|"
printf '| wrk -t1 -c16 | %.0f | 1 | %s | %s | %.0f |\n' "$ngw" "$wcpu" "$wng" "$(python3 -c "print($ngw / max($wcpu, 1e-9))")"
for client in "${clients[@]}"; do
    name=${client%%=*}
    printf '| %s --concurrency 16 | %.0f | %s | %s | %s | %.0f |\n' "$name" "${nga[$name]}" "$(ratio "${nga[$name]}" "$ngw")" \
        "${acpu[$name]}" "${ang[$name]}" "$(python3 -c "print(${nga[$name]} / max(${acpu[$name]}, 1e-9))")"
done
for client in "${clients[@]}"; do
    name=${client%%=*}
    echo
    echo "| $name open loop, Poisson, --max-send-lag 1ms | achieved/s | send lag p50 | send lag p99 | client CPU | client-limited |"
    echo "|---|---|---|---|---|---|"
    python3 - "$work/ng-open-$name.json" "$ngw" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
wrk = float(sys.argv[2])
steps = {}
for m in run["measurements"]:
    steps.setdefault(int(m["parameters"]["step"]), {})[m["case"]] = m
best = None
for step in sorted(steps):
    s = steps[step]
    offered = s["endpoint_offered_rate"]["stats"]["mean"]
    limited = s["endpoint_latency"]["parameters"]["client_limited"] == "true"
    if not limited:
        best = max(best or 0, offered)
    lag = s["endpoint_send_lag"]["stats"]
    print(f'| offered {offered:.0f}/s | {s["endpoint_achieved_rate"]["stats"]["mean"]:.0f} | {lag["p50"] * 1e3:.3f} ms | '
          f'{lag["p99"] * 1e3:.3f} ms | {s["endpoint_client_cpu"]["stats"]["mean"] * 100:.0f} % | {"yes" if limited else "no"} |')
print()
print(f"highest open-loop rate not client-limited on one core: {best:.0f}/s, {best / wrk:.2f}× wrk's closed-loop rate"
      if best else "every step was client-limited")
PY
done
kill "$nginx_pid" 2>/dev/null || true
fi

echo
if want 4; then
echo "== 4. GuideLLM's mock OpenAI server told TTFT 100 ms, ITL 10 ms, 32 tokens: the agent and AIPerf at 4/s Poisson" >&2
bash tools/endpoint-servers/setup_aiperf.sh "$servers"
llm=$(port)
HF_HUB_OFFLINE=1 "$servers/guidellm/bin/python" tools/endpoint-servers/mock_llm.py "$llm" 100 10 32 >"$work/llm.log" 2>&1 &
wait_for "http://127.0.0.1:$llm/v1/models" || { cat "$work/llm.log"; exit 1; }
"$agent" --spool "$work/spool" run endpoint --target "http://127.0.0.1:$llm" --protocol openai-chat --rates 4 \
    --arrivals poisson --max-tokens 32 --prompt-words 64 --duration "${secs}s" --warmup 2s --json > "$work/llm.json" 2>/dev/null
HF_HOME="$servers/aiperf/hf" HF_HUB_OFFLINE=1 "$servers/aiperf/bin/aiperf" profile --model mock-llm \
    --url "http://127.0.0.1:$llm" --endpoint-type chat --streaming --request-rate 4 --arrival-pattern poisson \
    --benchmark-duration "$(( secs + 2 ))" --tokenizer headroom/tiny-words --use-server-token-count \
    --synthetic-input-tokens-mean 64 --synthetic-input-tokens-stddev 0 --output-tokens-mean 32 \
    --output-tokens-stddev 0 --artifact-dir "$work/aiperf" --ui-type none > "$work/aiperf.log" 2>&1 \
    || { tail -30 "$work/aiperf.log"; exit 1; }
echo
echo "== 4. GuideLLM 0.8.1's mock OpenAI server told TTFT 100 ms, ITL 10 ms, 32 tokens; 4/s Poisson, chat, streaming"
echo
echo "| figure | told | AIPerf 0.13 | agent | agent ÷ AIPerf |"
echo "|---|---|---|---|---|"
python3 - "$work/llm.json" "$work/aiperf/profile_export_aiperf.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
theirs = json.load(open(sys.argv[2]))
ours = {m["case"]: m["stats"] for m in run["measurements"] if m["parameters"].get("step") == "1"}
rows = [
    ("TTFT p50", "100 ms", "time_to_first_token", "p50", "endpoint_ttft", "p50"),
    ("TTFT p99", "", "time_to_first_token", "p99", "endpoint_ttft", "p99"),
    ("ITL p50", "10 ms", "inter_token_latency", "p50", "endpoint_itl", "p50"),
    ("request latency p50", "410 ms", "request_latency", "p50", "endpoint_latency", "p50"),
    ("request latency p99", "", "request_latency", "p99", "endpoint_latency", "p99"),
]
for name, told, their_key, their_q, our_case, our_q in rows:
    a, b = theirs[their_key][their_q], ours[our_case][our_q] * 1e3
    print(f"| {name} | {told} | {a:.2f} ms | {b:.2f} ms | {b / a:.3f} |")
a = theirs["request_throughput"]["avg"]
b = ours["endpoint_achieved_rate"]["mean"]
print(f"| requests/s | 4 | {a:.2f} | {b:.2f} | {b / a:.3f} |")
PY

fi
