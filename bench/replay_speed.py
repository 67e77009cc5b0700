#!/usr/bin/env python3
"""Replay speed side by side with libCacheSim's cachesim on the same block stream.

The Mooncake conversation trace played 20 times back to back (5.77M block
references, same ids each time) goes through one cache of a fixed capacity,
once per policy: kvtier reads the JSONL and replays it (`--repeat 20`);
cachesim reads the same stream exported as oracleGeneral. farm-bench times
both whole processes in turn on one pinned core and gives the ratio pair by
pair. Before timing, the two miss ratios are checked to agree (cachesim prints
four decimals; the exact counts are checked by the test suite).

  bench/replay_speed.py --cachesim /path/to/libCacheSim/_build/bin/cachesim

prints a Markdown table (the one in docs/performance.md) and the raw
farm-bench reports with --verbose.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["lru", "fifo", "lfu", "clock", "sieve", "arc", "s3fifo", "twoq", "belady"]


def median(report, row):
    m = re.search(r"^%s\s+(\S+)\s+(\S+)\s+(\S+)" % re.escape(row), report, re.M)
    if not m:
        sys.exit("replay_speed: farm-bench printed no '%s' row:\n%s" % (row, report))
    return float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cachesim", required=True, help="libCacheSim's cachesim binary")
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build", "kvtier"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "..", "shared", "traces", "mooncake_conversation_trace.jsonl"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--capacity", type=int, default=10000, help="cache capacity in blocks")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("-n", "--runs", type=int, default=5, help="timed runs of each command")
    ap.add_argument("--pin", default="0", help="farm-bench --pin (empty: no pinning)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    a.kvtier, a.cachesim, a.trace = (os.path.abspath(x) for x in (a.kvtier, a.cachesim, a.trace))

    tmp = tempfile.mkdtemp(prefix="kvtier_replay_speed.")
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(a, tmp):
    og = os.path.join(tmp, "stream.oracleGeneral")
    subprocess.run([a.kvtier, "trace", "export", a.trace, "--repeat", str(a.repeat), "--out", og], check=True,
                   stdout=subprocess.DEVNULL)
    result = os.path.join(tmp, "replay.json")
    rows = []
    for p in a.policies.split(","):
        kv = [a.kvtier, "replay", a.trace, "--repeat", str(a.repeat), "-p", p, "-c", str(a.capacity),
              "--policy-param", "lfu.keep_history=false", "-q", "-o", result]
        cs = [a.cachesim, og, "oracleGeneral", p, str(a.capacity), "--ignore-obj-size", "1"]
        # Same stream, same answer (to cachesim's four decimals).
        subprocess.run(kv, check=True, capture_output=True, text=True)
        run = json.load(open(result))["runs"][0]
        refs, kv_miss = run["references"], run["misses"] / run["references"]
        out = subprocess.run(cs, check=True, capture_output=True, text=True, cwd=tmp).stdout
        cs_miss = float(re.search(r"miss ratio (\S+),", out).group(1))
        if abs(cs_miss - kv_miss) > 0.00005 + 1e-12:
            sys.exit("replay_speed: %s: miss ratio kvtier %.6f, cachesim %.4f" % (p, kv_miss, cs_miss))
        fb = ["farm-bench", "-n", str(a.runs), "--warmup", "1", "--timeout", "900"]
        if a.pin:
            fb += ["--pin", a.pin]
        fb += ["--vs", " ".join(cs), "--"] + kv
        rep = subprocess.run(fb, check=True, capture_output=True, text=True, cwd=tmp).stdout
        if a.verbose:
            print(rep)
        rows.append((p, kv_miss, median(rep, "A cpu s"), median(rep, "B cpu s"), median(rep, "A/B cpu"),
                     median(rep, "A peak MiB"), median(rep, "B peak MiB"), refs))
    print("| policy | miss ratio | kvtier cpu s | kvtier M refs/s | cachesim cpu s | cachesim M refs/s | "
          "kvtier speed-up | peak MiB kvtier / cachesim |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for p, miss, ka, cb, ratio, pa, pb, refs in rows:
        print("| %s | %.4f | %.3f | %.1f | %.3f | %.2f | %.1f | %.0f / %.0f |" %
              (p, miss, ka, refs / ka / 1e6, cb, refs / cb / 1e6, 1.0 / ratio, pa, pb))
    print("\n%d references (%s x %d), capacity %d blocks; medians of %d runs, whole processes (cpu = user + sys)."
          % (refs, os.path.basename(a.trace), a.repeat, a.capacity, a.runs))


if __name__ == "__main__":
    main()
