#!/usr/bin/env python3
"""How long `kvtier sweep --dry-run` takes to expand and validate a sweep, and
its peak memory, on one core (docs/sweep.md, Validation).

Two sweeps of configs/default.json (16 decode steps) are written:

- replicated: 10^6 points, the largest a sweep may have: prefetch depth
  0-9 x batch 1-10 (100 configurations) x 10,000 seeds, the shape of a
  study that repeats each design over seeds;
- distinct: --distinct points that are all different configurations
  (prefetch depth x batch x context length), the worst case: every point's
  engine is constructed to validate it.

Each is validated by one `kvtier sweep S.json --dry-run -q` process pinned
to one CPU; its user + system seconds, wall seconds and peak resident
memory come from the kernel's accounting of the finished child (os.wait4).
Prints a Markdown table; exits 1 when the replicated sweep misses the
figure (60 s, 200 MB).

  /usr/bin/python3 bench/sweep_validate.py [--distinct 10000] [--pin 0]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT_S, LIMIT_MB = 60.0, 200.0


def sweeps(folder, distinct):
    base = {"base": os.path.join(ROOT, "configs", "default.json"), "set": {"workload.decode_steps": 16}}
    rep = dict(base, name="replicated", grid={"policies.prefetch.depth": list(range(10)),
                                              "workload.batch": list(range(1, 11))}, seed=list(range(10000)))
    ctx = max(1, distinct // 100)
    dis = dict(base, name="distinct", grid={"policies.prefetch.depth": list(range(10)),
                                            "workload.batch": list(range(1, 11)),
                                            "workload.context_tokens": list(range(1000, 1000 + ctx))})
    out = []
    for doc in (rep, dis):
        path = os.path.join(folder, doc["name"] + ".json")
        with open(path, "w") as f:
            json.dump(doc, f)
        n = 1
        for v in doc["grid"].values():
            n *= len(v)
        out.append((doc["name"], path, n * len(doc.get("seed", [0]))))
    return out


def timed(cmd, pin):
    pre = (lambda: os.sched_setaffinity(0, {int(pin)})) if pin != "" else None
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pre)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("sweep_validate: %s exited %d: %s" % (" ".join(cmd), os.waitstatus_to_exitcode(status), err))
    return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build", "kvtier"))
    ap.add_argument("--distinct", type=int, default=10000, help="points of the all-distinct sweep (a multiple of 100)")
    ap.add_argument("--pin", default="0", help="the CPU it runs on (empty: no pinning)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvtier_sweep_validate.") as tmp:
        rows, ok = [], True
        for name, path, n in sweeps(tmp, a.distinct):
            cpu, wall, mb = timed([a.kvtier, "sweep", path, "--dry-run", "-q"], a.pin)
            per = cpu / n * 1e6
            if name == "replicated":
                ok = wall <= LIMIT_S and mb <= LIMIT_MB
            # us a point is s per 10^6 points
            rows.append("| %s | %d | %.2f | %.2f | %.1f | %.0f | %.0f |" % (name, n, wall, cpu, per, mb, per))
    print("| sweep | points | wall s | cpu s | cpu us/point | peak MB | 10^6 points, s (extrapolated) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    print("\nfigure: 10^6 points in at most %.0f s and %.0f MB on one core: %s" % (LIMIT_S, LIMIT_MB,
                                                                             "met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
