#!/usr/bin/env python3
"""Prints a quant run's GEMM and MLP tables from the agent's JSON, speedups against FP32.

    measurements-agent run quant --json > run.json
    python3 measurements-agent/scripts/quant_table.py run.json
"""
import json
import sys


def main(path):
    ms = [m for m in json.load(open(path))["measurements"] if m["suite"] == "quant" and m["status"] == "ok"]
    val = {}
    for m in ms:
        p = m["parameters"]
        key = (m["case"], p.get("path", p.get("variant")), p.get("batch", ""), p.get("hidden", ""))
        val[key] = m["stats"]["p50"]
    features = next((m["parameters"].get("cpu_features") for m in ms), "")
    print(f"CPU features: {features or '(none detected)'}")
    print(f"\n{'GEMM batch×hidden':18} {'path':13} {'latency':>12} {'GFLOP/s':>9} {'× fp32 lib':>10} {'× fp32 own':>10} "
          f"{'rel. error':>10} {'weights':>10}")
    shapes = sorted({(int(k[2]), int(k[3])) for k in val if k[0] == "gemm_latency"}, key=lambda s: (s[1], s[0]))
    for batch, hidden in shapes:
        for path in ["fp32_library", "fp32", "bf16", "int8"]:
            k = lambda case: val.get((case, path, str(batch), str(hidden)), float("nan"))
            print(f"{f'{batch} × {hidden}':18} {path:13} {k('gemm_latency') * 1e6:10.1f}µs "
                  f"{k('gemm_throughput') / 1e9:9.2f} {k('gemm_speedup_vs_fp32_library'):10.2f} "
                  f"{k('gemm_speedup_vs_fp32_own'):10.2f} {k('gemm_relative_error'):10.2e} "
                  f"{k('gemm_weight_bytes') / 1024:8.0f}Ki")
    print(f"\n{'MLP variant':30} {'accuracy':>8} {'Δ':>8} {'lat b=1':>10} {'lat b=64':>10} {'× fp32 b=64':>11} "
          f"{'samples/s':>10} {'weights':>8}")
    variants = [k[1] for k in val if k[0] == "mlp_accuracy"]
    base64 = val.get(("mlp_latency", "fp32", "64", ""))
    for v in variants:
        g = lambda case, batch="": val.get((case, v, batch, ""), float("nan"))
        print(f"{v:30} {g('mlp_accuracy'):8.4f} {g('mlp_accuracy_delta'):+8.4f} {g('mlp_latency', '1') * 1e6:8.2f}µs "
              f"{g('mlp_latency', '64') * 1e6:8.1f}µs {base64 / g('mlp_latency', '64'):11.2f} "
              f"{g('mlp_throughput', '64'):10.0f} {g('mlp_weight_bytes'):8.0f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin")
