#!/usr/bin/env python3
"""Prints a transport run's round trips beside their floors, from the agent's JSON.

    measurements-agent run transport --json > run.json   (or a spooled run file)
    python3 measurements-agent/scripts/transport_table.py run.json
"""
import json
import sys


def fmt_s(x):
    return f"{x * 1e6:10.2f} µs"


def main(path):
    run = json.load(open(path))
    ms = [m for m in run["measurements"] if m["suite"] == "transport"]
    overhead = next((m for m in ms if m["case"] == "timer_overhead"), None)
    if overhead and overhead.get("stats"):
        print(f"timer overhead per sample: {overhead['stats']['p50'] * 1e9:.1f} ns")
    cpu = {}
    for m in ms:
        if m["case"] == "cpu_per_request" and m["parameters"].get("load") == "closed":
            p = m["parameters"]
            key = (p["transport"], p.get("wait", ""), int(p["payload_bytes"]), p["placement"])
            cpu.setdefault(key, {})[p["side"]] = m["stats"]["p50"]
    print(f"{'transport':24} {'wait':9} {'payload':>8} {'placement':16} {'p50':>13} {'p99':>13} "
          f"{'floor':16} {'floor p50':>13} {'× floor':>8} {'cpu/req cli+srv':>16}")
    rows = []
    for m in ms:
        p = m["parameters"]
        # Skipped and failed transports carry no load parameter: they never ran.
        if m["case"] != "round_trip" or p.get("load", "closed") != "closed":
            continue
        if m["status"] != "ok":
            rows.append((p["transport"], p.get("wait", ""), int(p["payload_bytes"]), p["placement"], None, m["reason"]))
            continue
        rows.append((p["transport"], p.get("wait", ""), int(p["payload_bytes"]), p["placement"], m, None))
    for transport, wait, size, placement, m, reason in sorted(rows, key=lambda r: (r[3], r[2], r[0], r[1])):
        if m is None:
            print(f"{transport:24} {wait:9} {size:>8} {placement:16} {'not run':>13}  {reason}")
            continue
        s = m["stats"]
        floor = m.get("floor") or {}
        ratio = s["p50"] / floor["value"] if floor.get("value") else float("nan")
        c = cpu.get((transport, wait, size, placement), {})
        cpu_total = c.get("client", 0) + c.get("server", 0)
        print(f"{transport:24} {wait:9} {size:>8} {placement:16} {fmt_s(s['p50'])} {fmt_s(s['p99'])} "
              f"{floor.get('name', '-'):16} {fmt_s(floor.get('value', float('nan')))} {ratio:8.2f} {fmt_s(cpu_total)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin")
