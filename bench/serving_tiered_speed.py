#!/usr/bin/env python3
"""Speed of serving with the KV in tiers (serving.kv "tiered") as the run grows.

The vLLM preset's 8K-token requests (configs/systems/vllm_swap.json, recompute
preemption, LRU with promotion on access) served tiered at 15, 60 and 240
requests (960 with --sizes), and a slice of the Mooncake conversation trace
with its KV in GPU, DRAM and SSD in 512-token blocks (--mooncake N requests).
Each run is a whole process, timed on one pinned core: user + system seconds
and peak memory from the kernel's accounting of the finished child (os.wait4),
the block accesses from the run's own result.json (kv.block_accesses), and
the cost per access is their quotient. With --baseline B (another build of
kvtier) every point runs on both binaries in turn and the ratio is taken pair
by pair.

  /usr/bin/python3 bench/serving_tiered_speed.py [--sizes 15,60,240] [--mooncake 200] [--baseline OLD/kvtier] [-n 1]

prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from replay_speed import med  # noqa: E402


def timed(cmd, pin):
    """One whole process: (user + sys seconds, peak MiB); exits naming the command if it fails."""
    pre = (lambda: os.sched_setaffinity(0, {int(pin)})) if pin else None
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pre)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("serving_tiered_speed: %s exited %d: %s" % (" ".join(cmd), os.waitstatus_to_exitcode(status), err.strip()))
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def points(a):
    vllm = ["configs/systems/vllm_swap.json", "--set", "serving.kv=tiered", "--set", "serving.preemption=recompute"]
    for n in [int(x) for x in a.sizes.split(",") if x]:
        yield "vllm_swap tiered, %d requests" % n, vllm + ["--set", "serving.requests.count=%d" % n]
    if a.mooncake:
        yield ("Mooncake, first %d requests, GPU+DRAM+SSD, 512-token blocks" % a.mooncake,
               ["configs/serving/mooncake.json", "--set", "serving.kv=tiered", "--set", "serving.preemption=recompute",
                "--set", "serving.prefix_cache.enabled=false", "--set", "workload.block_tokens=512",
                "--set", "serving.limit=%d" % a.mooncake])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build", "kvtier"))
    ap.add_argument("--baseline", help="another kvtier binary, timed in turn with the first")
    ap.add_argument("--sizes", default="15,60,240", help="vllm_swap request counts (comma-separated; empty: none)")
    ap.add_argument("--mooncake", type=int, default=0, help="also the first N requests of the Mooncake trace (0: not)")
    ap.add_argument("-n", "--runs", type=int, default=1, help="timed runs of each command")
    ap.add_argument("--pin", default="0", help="the CPU the runs use (empty: no pinning)")
    a = ap.parse_args()
    binaries = [os.path.abspath(a.kvtier)] + ([os.path.abspath(a.baseline)] if a.baseline else [])
    tmp = tempfile.mkdtemp(prefix="kvtier_tiered_speed.")
    rows = []
    for name, args in points(a):
        cpu = [[] for _ in binaries]
        peak = [[] for _ in binaries]
        accesses = None
        for _ in range(a.runs):
            for i, b in enumerate(binaries):
                out = os.path.join(tmp, "b%d" % i)
                c, m = timed([b, "run"] + args + ["--out", out, "-q"], a.pin)
                cpu[i].append(c)
                peak[i].append(m)
                metrics = json.load(open(os.path.join(out, "result.json")))["metrics"]
                n = metrics["kv"]["block_accesses"]
                if accesses is not None and n != accesses:
                    sys.exit("serving_tiered_speed: %s: the binaries disagree on block accesses (%d, %d)" % (name, accesses, n))
                accesses = n
        rows.append((name, accesses, [med(c) for c in cpu], [med(m) for m in peak],
                     med([x / y for x, y in zip(cpu[0], cpu[1])]) if a.baseline else None))
    head = "| run | block accesses | cpu s | ns per access | peak MiB |"
    sep = "|---|---|---|---|---|"
    if a.baseline:
        head += " baseline cpu s | baseline ns per access | baseline peak MiB | time ratio |"
        sep += "---|---|---|---|"
    print(head)
    print(sep)
    for name, acc, c, m, r in rows:
        line = "| %s | %d | %.2f | %.0f | %.0f |" % (name, acc, c[0], 1e9 * c[0] / acc, m[0])
        if a.baseline:
            line += " %.2f | %.0f | %.0f | %.2f |" % (c[1], 1e9 * c[1] / acc, m[1], r)
        print(line)


if __name__ == "__main__":
    main()
