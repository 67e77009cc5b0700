#!/usr/bin/python3
"""How fast each engine processes its events (GPU kernels, sim/core/event_budget.h),
and so how long a run at the default --max-events (1e8) would take.

Runs kvtier on the single-batch engine (configs/default.json) and on serving
(configs/systems/vllm_swap.json, KV paged in the GPU and in tiers), reads
`resources.events_counted` from each result.json and measures the wall time
and peak resident memory of each process (Python's resource module, over the
child alone). Usage: /usr/bin/python3 bench/events_per_second.py [build/kvtier]
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KVTIER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "kvtier")
LIMIT = 1e8

RUNS = [
    ("single-batch, 4096 decode steps", "configs/default.json", ["workload.decode_steps=4096"]),
    ("serving paged, 2000 requests", "configs/systems/vllm_swap.json",
     ["serving.requests.count=2000", "serving.requests.interval_s=0.05"]),
    ("serving tiered, 64 requests", "configs/systems/vllm_swap.json",
     ["serving.kv=tiered", "serving.preemption=recompute", "serving.requests.count=64",
      "serving.requests.output_tokens=64"]),
]


def measure(cfg, sets, out):
    args = [KVTIER, "run", os.path.join(ROOT, cfg), "--out", out, "-q"]
    for s in sets:
        args += ["--set", s]
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.execv(KVTIER, args)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("kvtier failed: %s" % " ".join(args))
    res = json.load(open(os.path.join(out, "result.json")))["resources"]
    return wall, usage.ru_maxrss / 1024.0, res


def main():
    print("%-34s %10s %12s %8s %10s %12s" % ("run", "events", "estimated", "wall s", "peak MiB", "events/s"))
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, cfg, sets) in enumerate(RUNS):
            wall, peak, res = measure(cfg, sets, os.path.join(tmp, str(i)))
            n = res["events_counted"]
            print("%-34s %10d %12.0f %8.2f %10.0f %12.0f" % (name, n, res["estimated_events"], wall, peak, n / wall))
            print("  at the default limit of %.0e events: about %.1f h" % (LIMIT, LIMIT / (n / wall) / 3600))


if __name__ == "__main__":
    main()
