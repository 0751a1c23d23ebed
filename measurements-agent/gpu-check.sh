#!/usr/bin/env bash
# Proof of the GPU suites on a real NVIDIA GPU: runs the agent's transfer, alloc and gemm suites,
# prints one table (GB/s, × the PCIe link's limit, × the best copy), and compares pinned
# host→device at 256 MiB with PyTorch's `pin_memory().to('cuda', non_blocking=True)` on the
# same machine in the same run (goal: ≥ 0.97×), and the GPU's power the gemm suite read through
# NVML's energy counter with nvidia-smi's power.draw under the same FP16 GEMMs driven by PyTorch
# (goal: busy within 0.9–1.1×).
#
#   measurements-agent/gpu-check.sh            # uses $AGENT, else target/gpu-check/measurements-agent,
#                                              # else builds with cargo (needs the crates registry)
# To run on a machine without a registry, build here and carry the binary:
#   cargo build --release -p measurements-agent && mkdir -p target/gpu-check && \
#     cp "${CARGO_TARGET_DIR:-target}/release/measurements-agent" target/gpu-check/
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT="${AGENT:-target/gpu-check/measurements-agent}"
if [ ! -x "$AGENT" ]; then
  cargo build --release -p measurements-agent
  AGENT="${CARGO_TARGET_DIR:-target}/release/measurements-agent"
fi
OUT="${OUT:-$(mktemp -d)}"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current,driver_version --format=csv,noheader || true
"$AGENT" inventory | python3 -c 'import json,sys; print("agent inventory (NVML):", json.load(sys.stdin)["gpus"])'
"$AGENT" run transfer alloc gemm --json --spool "$OUT/spool" > "$OUT/run.json"

python3 - "$OUT/run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
ms = [m for m in run["measurements"] if m["suite"] in ("transfer", "alloc", "gemm")]
skipped = [m for m in ms if m["status"] != "ok"]
if skipped:
    print(f"{len(skipped)} case(s) did not run: {skipped[0]['reason']}")
copies = [m for m in ms if m["case"] == "copy" and m["status"] == "ok"]
best = max((m["stats"]["p50"] for m in copies), default=float("nan"))
print(f"\n{'memory':24} {'dir':4} {'bytes':>11} {'copies':>6} {'GB/s':>8} {'× PCIe':>7} {'× best':>7}")
for m in copies:
    p = m["parameters"]; bw = m["stats"]["p50"]; floor = (m.get("floor") or {}).get("value")
    print(f"{p['memory']:24} {p['direction']:4} {int(p['bytes']):>11} {p['copies']:>6} {bw/1e9:8.2f} "
          f"{(bw/floor if floor else float('nan')):7.3f} {bw/best:7.3f}")
print(f"\n{'allocator':22} {'bytes':>10} {'µs per alloc+free':>18}")
for m in ms:
    if m["case"] == "alloc_free" and m["status"] == "ok":
        print(f"{m['parameters']['allocator']:22} {int(m['parameters']['bytes']):>10} {m['stats']['p50']*1e6:18.2f}")
print(f"\n{'gemm':6} {'m×n×k':>16} {'TFLOP/s':>9} {'rel. error':>11}")
errors = {tuple(sorted(m["parameters"].items())): m["stats"]["p50"] for m in ms if m["case"] == "cublas_gemm_relative_error"}
for m in ms:
    if m["case"] == "cublas_gemm" and m["status"] == "ok":
        p = m["parameters"]
        print(f"{p['precision']:6} {p['m']+'×'+p['n']+'×'+p['k']:>16} {m['stats']['p50']/1e12:9.1f} "
              f"{errors.get(tuple(sorted(p.items())), float('nan')):11.2e}")
ours = next((m["stats"]["p50"] for m in copies if m["parameters"]["memory"] == "pinned"
             and m["parameters"]["direction"] == "h2d" and m["parameters"]["bytes"] == str(256 << 20)
             and m["parameters"]["copies"] == "1"), None)
try:
    import torch
    x = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
    for _ in range(3):
        x.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); x.to("cuda", non_blocking=True); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    torch_bw = (256 << 20) / (times[len(times) // 2] / 1e3)
    print(f"\npinned H2D 256 MiB: agent {ours/1e9 if ours else float('nan'):.2f} GB/s, "
          f"PyTorch {torch_bw/1e9:.2f} GB/s, ratio {(ours or 0)/torch_bw:.3f} (goal ≥ 0.97)")
except ImportError:
    print("\nPyTorch is not installed here: no comparison")
PY

python3 - "$OUT/run.json" <<'PY'
import json, subprocess, sys, time
run = json.load(open(sys.argv[1]))
power = {m["parameters"].get("state", "?"): m for m in run["measurements"] if m["suite"] == "gemm" and m["case"] == "power"}
try:
    import torch
    # CUDA's GPU 0, which the agent and PyTorch use, by its PCI address (nvidia-smi's --id=0 is
    # NVML's first, which may be another card).
    props = torch.cuda.get_device_properties(0)
    bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    def smi():
        out = subprocess.run(["nvidia-smi", f"--id={bus}", "--query-gpu=power.draw", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
        return float(out.strip().splitlines()[0])
    # Idle as the agent reads it: a context open, nothing running.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize(); time.sleep(1)
    idle = []
    for _ in range(20):
        idle.append(smi()); time.sleep(0.1)
    end = time.time() + 2
    while time.time() < end:
        a @ b; torch.cuda.synchronize()
    busy, end = [], time.time() + 6
    while time.time() < end:
        for _ in range(8):
            a @ b
        torch.cuda.synchronize(); busy.append(smi())
    theirs = {"idle": sum(idle) / len(idle), "busy": sum(busy) / len(busy)}
except Exception as e:  # no PyTorch, no nvidia-smi
    print(f"\nno nvidia-smi comparison: {e}"); theirs = {}
print(f"\n{'GPU power':9} {'agent (NVML energy)':>20} {'nvidia-smi (PyTorch load)':>26} {'ratio':>6}  zones")
for state in ("idle", "busy"):
    m = power.get(state)
    ours = m["stats"]["mean"] if m and m.get("stats") else None
    ref = theirs.get(state)
    ratio = f"{ours / ref:6.3f}" if ours and ref else "     -"
    shown = f"{ours:.1f} W" if ours else (m or {}).get("reason", "absent")
    print(f"{state:9} {shown:>20} {(f'{ref:.1f} W' if ref else '-'):>26} {ratio}  {(m or {}).get('parameters', {}).get('zones', '')}")
PY
