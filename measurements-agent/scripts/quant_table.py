#!/usr/bin/env python3
"""Prints a quant run's GEMM and MLP tables from the agent's JSON: each GEMM path against the FP32
library, the core's measured peak and ONNX Runtime on the same shape; each MLP variant against FP32.

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
    for m in ms:
        if m["case"] == "core_peak":
            p = m["parameters"]
            print(f"core peak {p['instruction']:26} {m['stats']['p50'] / 1e9:8.1f} GOP/s = {p['ops_per_cycle']:>6} a cycle at {p['clock_ghz']} GHz")
    ort = next((m["parameters"]["onnxruntime"] for m in ms if "onnxruntime" in m["parameters"]), None)
    print(f"ONNX Runtime: {ort + ', one thread' if ort else 'not measured'}")
    print(f"\n{'GEMM batch×hidden':18} {'path':21} {'kernel':24} {'latency':>11} {'GOP/s':>7} {'of peak':>7} "
          f"{'× fp32 lib':>10} {'× ORT':>6} {'rel. error':>10} {'weights':>8}")
    shapes = sorted({(int(k[2]), int(k[3])) for k in val if k[0] == "gemm_latency"}, key=lambda s: (s[1], s[0]))
    kernels = {(m["parameters"]["path"], m["parameters"]["batch"], m["parameters"]["hidden"]): m["parameters"]["kernel"]
               for m in ms if m["case"] == "gemm_latency"}
    for batch, hidden in shapes:
        paths = [k[1] for k in val if k[0] == "gemm_latency" and k[2:] == (str(batch), str(hidden))]
        for path in paths:
            k = lambda case: val.get((case, path, str(batch), str(hidden)), float("nan"))
            against = "int8" if path.startswith("int8") else "fp32"
            print(f"{f'{batch} × {hidden}':18} {path:21} {kernels[(path, str(batch), str(hidden))][:24]:24} "
                  f"{k('gemm_latency') * 1e6:9.1f}µs {k('gemm_throughput') / 1e9:7.1f} {k('gemm_fraction_of_peak') * 100:6.0f}% "
                  f"{k('gemm_speedup_vs_fp32_library'):10.2f} {k('gemm_ratio_vs_onnxruntime_' + against):6.2f} "
                  f"{k('gemm_relative_error'):10.2e} {k('gemm_weight_bytes') / 1024:6.0f}Ki")
        for precision in ["fp32", "int8"]:
            ops = val.get((f"floor_onnxruntime_{precision}", None, str(batch), str(hidden)))
            if ops:
                print(f"{f'{batch} × {hidden}':18} {'onnxruntime_' + precision:21} {'':24} {'':>11} {ops / 1e9:7.1f}")
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
