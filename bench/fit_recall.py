#!/usr/bin/env python3
"""Judge `kvtier trace fit` by what policies see: the captured stories260K
trace against the patterns generator fitted to it.

    python3 bench/fit_recall.py [--json OUT] [--seeds 1,2,3] [--window-blocks N]

Fits traces/data/stories260K.trace (`kvtier trace fit -o`), then runs
configs/traces/stories260K.json with `--set workload.trace=` the captured
file and the fit (several seeds: the fitted generator is random) under:
H2O (heavy hitters + recent window, 20% budget), StreamingLLM (one sink
block and the 8 newest) and top-k selection by the previous step's attention
(20%), all three with the KV on the GPU alone. Prints captured, fitted (mean
over seeds) and the difference; --json writes them. (An LRU tier's hit rate
says nothing here: both traces list every block at every step, a cyclic
scan that LRU misses alike.)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(os.environ.get("KVTIER_BINARY", os.path.join(ROOT, "build", "kvtier")))
CONFIG = os.path.join(ROOT, "configs", "traces", "stories260K.json")
CAPTURED = os.path.join(ROOT, "traces", "data", "stories260K.trace")

GPU_ONLY = ["--set", "hardware.tiers=[\"gpu\"]", "--set", "hardware.devices.gpu.capacity_GB=10",
            "--set", "hardware.devices.gpu.reserved_GB=0", "--set", "policies.prefetch=none"]
# What each policy sees, and the metric that says it.
POLICIES = {
    "H2O recall": (GPU_ONLY + ["--set", "policies.eviction={\"name\": \"h2o\", \"budget\": 0.2}",
                               "--set", "policies.promotion=none", "--set", "policies.evaluation=exact"],
                   "attention_recall"),
    "StreamingLLM recall": (GPU_ONLY + ["--set", "policies.eviction={\"name\": \"streaming_llm\", \"sinks\": 1, "
                                                 "\"recent\": 8}",
                                        "--set", "policies.promotion=none", "--set", "policies.evaluation=exact"],
                            "attention_recall"),
    "top-k recall": (GPU_ONLY + ["--set", "policies.evaluation={\"name\": \"topk\", \"budget\": 0.2}"],
                     "attention_recall"),
}


def metric(m, path):
    for k in path.split("."):
        m = m[k]
    return float(m)


def run(trace, args, seed, tmp, tag):
    out = os.path.join(tmp, tag)
    cmd = [BIN, "run", CONFIG, "-q", "--out", out, "--set", "workload.trace=%s" % trace, "--set", "sim.seed=%d" % seed]
    p = subprocess.run(cmd + args, cwd=tmp, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("fit_recall.py: %s: %s" % (" ".join(cmd + args), p.stderr.strip()))
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f)["metrics"]


def measure(seeds, window_blocks=1):
    with tempfile.TemporaryDirectory() as tmp:
        fit = os.path.join(tmp, "fit.json")
        p = subprocess.run([BIN, "trace", "fit", CAPTURED, "-o", fit, "--window-blocks", str(window_blocks)], cwd=tmp,
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("fit_recall.py: trace fit: %s" % p.stderr.strip())
        rows = {}
        for name, (args, key) in POLICIES.items():
            cap = metric(run(CAPTURED, args, 1, tmp, "c"), key)
            fitted = [metric(run(fit, args, s, tmp, "f%d" % s), key) for s in seeds]
            rows[name] = {"captured": cap, "fitted": sum(fitted) / len(fitted), "fitted_seeds": fitted}
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--seeds", default="1,2,3", help="seeds of the fitted generator (comma-separated)")
    ap.add_argument("--window-blocks", type=int, default=1, help="trace fit's --window-blocks (default 1)")
    a = ap.parse_args()
    rows = measure([int(s) for s in a.seeds.split(",")], a.window_blocks)
    print("| what policies see | captured | fitted | fitted - captured |")
    print("|---|---:|---:|---:|")
    for name, r in rows.items():
        print("| %s | %.3f | %.3f | %+.3f |" % (name, r["captured"], r["fitted"], r["fitted"] - r["captured"]))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(rows, f, indent=2)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
