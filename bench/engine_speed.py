#!/usr/bin/env python3
"""Measures the engine against the speed targets of ARCHITECTURE.md.

Runs bench/reference.json (LLaMA-13B, 32K context, 1,024 steps), the same
with 4x the steps, and a 128K context, each as its own process, and reports
wall time and peak resident memory (from wait4's rusage, so the numbers are
the kvtier process's own). Exit status 1 if a target is missed.

    python3 bench/engine_speed.py [--kvtier build/kvtier] [--repeat 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(kvtier, sets, repeat):
    best = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            cmd = [kvtier, "run", os.path.join(ROOT, "bench/reference.json"), "--quiet", "--out", out]
            for s in sets:
                cmd += ["--set", s]
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, cwd=ROOT)
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            if status != 0:
                sys.exit(f"engine_speed: {' '.join(cmd)} failed with status {status}")
            with open(os.path.join(out, "result.json")) as f:
                m = json.load(f)["metrics"]
        sample = {"wall_s": wall, "peak_rss_MB": ru.ru_maxrss / 1024.0, "block_accesses": m["block_accesses"],
                  "simulated_time_s": m["simulated_time_s"]}
        if best is None or sample["wall_s"] < best["wall_s"]:
            best = sample
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build/kvtier"))
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the fastest counts")
    a = ap.parse_args()
    ref = run(a.kvtier, [], a.repeat)
    x4 = run(a.kvtier, ["workload.decode_steps=4096"], a.repeat)
    ctx128k = run(a.kvtier, ["workload.context_tokens=131072", "workload.decode_steps=256",
                             "hardware.devices.gpu.capacity_GB=80"], 1)
    checks = [
        ("reference: wall <= 3 s", ref["wall_s"] <= 3.0),
        ("reference: peak RSS <= 300 MB", ref["peak_rss_MB"] <= 300),
        ("4x steps: wall <= 4.4 x reference", x4["wall_s"] <= 4.4 * ref["wall_s"]),
        ("128K context: peak RSS <= 1 GB", ctx128k["peak_rss_MB"] <= 1024),
    ]
    report = {"reference": ref, "steps_x4": x4, "context_128k": ctx128k,
              "steps_x4_over_reference": x4["wall_s"] / ref["wall_s"],
              "checks": {name: ok for name, ok in checks}}
    print(json.dumps(report, indent=2))
    sys.exit(0 if all(ok for _, ok in checks) else 1)


if __name__ == "__main__":
    main()
