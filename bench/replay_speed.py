#!/usr/bin/env python3
"""Replay speed side by side with libCacheSim's simulator on the same block stream.

The Mooncake conversation trace played 20 times back to back (5.77M block
references, same ids each time) goes through one cache of a fixed capacity,
once per policy: kvtier reads the JSONL and replays it (`--repeat 20`);
libCacheSim's `cachesim` binary (built by the user from its own repository,
given with --cachesim) reads the same stream exported as oracleGeneral. Both
whole processes are timed in turn (A B A B ...) on one pinned core, each run's
user + system seconds and peak memory taken from the kernel's accounting of
the finished child (os.wait4), and the ratio is taken pair by pair. Before
timing, the two miss ratios are checked to agree (cachesim prints four
decimals; the exact counts are checked by the test suite). Without
--cachesim, kvtier is timed alone.

  /usr/bin/python3 bench/replay_speed.py [--cachesim /path/to/libCacheSim/_build/bin/cachesim]

prints a Markdown table (the one in docs/performance.md).
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


def timed(cmd, cwd, pin):
    """One whole process: (user + sys seconds, peak MiB) from the kernel's rusage of the child."""
    pre = (lambda: os.sched_setaffinity(0, {int(pin)})) if pin else None
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pre)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("replay_speed: %s exited %d" % (cmd[0], os.waitstatus_to_exitcode(status)))
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def med(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def pair_runs(a_cmd, b_cmd, cwd, runs, pin):
    """A and B in turn after one untimed run of each; medians of cpu, peak and the pairwise ratio A/B."""
    for c in (a_cmd, b_cmd):
        if c:
            timed(c, cwd, pin)
    ta, tb, ma, mb, r = [], [], [], [], []
    for _ in range(runs):
        ca, pa = timed(a_cmd, cwd, pin)
        ta.append(ca)
        ma.append(pa)
        if b_cmd:
            cb, pb = timed(b_cmd, cwd, pin)
            tb.append(cb)
            mb.append(pb)
            r.append(ca / cb)
    return med(ta), med(tb) if tb else None, med(r) if r else None, med(ma), med(mb) if mb else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cachesim", help="libCacheSim's cachesim binary (built from its repository); none: kvtier alone")
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build", "kvtier"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "..", "shared", "traces", "mooncake_conversation_trace.jsonl"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--capacity", type=int, default=10000, help="cache capacity in blocks")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("-n", "--runs", type=int, default=5, help="timed runs of each command")
    ap.add_argument("--pin", default="0", help="the CPU both run on (empty: no pinning)")
    a = ap.parse_args()
    a.kvtier, a.trace = os.path.abspath(a.kvtier), os.path.abspath(a.trace)
    a.cachesim = os.path.abspath(a.cachesim) if a.cachesim else None

    tmp = tempfile.mkdtemp(prefix="kvtier_replay_speed.")
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(a, tmp):
    og = os.path.join(tmp, "stream.oracleGeneral")
    if a.cachesim:
        subprocess.run([a.kvtier, "trace", "export", a.trace, "--repeat", str(a.repeat), "--out", og], check=True,
                       stdout=subprocess.DEVNULL)
    result = os.path.join(tmp, "replay.json")
    rows = []
    for p in a.policies.split(","):
        kv = [a.kvtier, "replay", a.trace, "--repeat", str(a.repeat), "-p", p, "-c", str(a.capacity),
              "-q", "-o", result] + (["--policy-param", "lfu.keep_history=false"] if p == "lfu" else [])
        subprocess.run(kv, check=True, capture_output=True, text=True)
        run = json.load(open(result))["runs"][0]
        refs, kv_miss = run["references"], run["misses"] / run["references"]
        cs = None
        if a.cachesim:
            # Same stream, same answer (to cachesim's four decimals).
            cs = [a.cachesim, og, "oracleGeneral", p, str(a.capacity), "--ignore-obj-size", "1"]
            out = subprocess.run(cs, check=True, capture_output=True, text=True, cwd=tmp).stdout
            cs_miss = float(re.search(r"miss ratio (\S+),", out).group(1))
            if abs(cs_miss - kv_miss) > 0.00005 + 1e-12:
                sys.exit("replay_speed: %s: miss ratio kvtier %.6f, cachesim %.4f" % (p, kv_miss, cs_miss))
        rows.append((p, kv_miss, refs) + pair_runs(kv, cs, tmp, a.runs, a.pin))
    print("| policy | miss ratio | kvtier cpu s | kvtier M refs/s | cachesim cpu s | cachesim M refs/s | "
          "kvtier speed-up | peak MiB kvtier / cachesim |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    na = lambda x, f: "-" if x is None else f % x  # noqa: E731
    for p, miss, refs, ka, cb, ratio, pa, pb in rows:
        print("| %s | %.4f | %.3f | %.1f | %s | %s | %s | %.0f / %s |" %
              (p, miss, ka, refs / ka / 1e6, na(cb, "%.3f"), na(cb and refs / cb / 1e6, "%.2f"),
               na(ratio and 1.0 / ratio, "%.1f"), pa, na(pb, "%.0f")))
    print("\n%d references (%s x %d), capacity %d blocks; medians of %d runs, whole processes (cpu = user + sys)."
          % (refs, os.path.basename(a.trace), a.repeat, a.capacity, a.runs))


if __name__ == "__main__":
    main()
