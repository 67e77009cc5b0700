#!/usr/bin/env python3
"""Size and replay speed of the attention-trace formats (docs/formats.md).

Writes the architecture's reference trace shape -- 40 layers, a 32,768-token
context in 128-token blocks, 1,000 decode steps -- with the patterns
generator, as JSON lines and as the binary container (float32 and float16
masses), and reports each file's size and how long reading every record
takes (`kvtier trace check`, the reader the simulator replays through; median
of --runs runs, peak memory from the operating system). Two patterns:

  reference  about 20% of the blocks per record (ARCHITECTURE.md's workload),
             masses jittered from step to step as in captured traces (a
             pattern without jitter repeats the same floats and compresses
             far better than real attention does)
  dense      the pattern fitted to the stories260K capture, which gives every
             block some mass, so every block of every record is listed

It also reports what float16 costs: the largest difference between the two
files' top-1/5/20% mass shares (the recall of an oracle top-k selection).

  python3 bench/trace_format.py [--kvtier build/kvtier] [--runs 3] [--out out/bench/trace_format.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ["--layers", "40", "--context-tokens", "32768", "--steps", "1000", "--block-tokens", "128"]
REFERENCE = {"kind": "patterns", "sink_blocks": 1, "sink_mass": 0.1, "window_blocks": 2, "window_mass": 0.2,
             "heavy_fraction": [0.3, 0.15], "zipf_s": 1.1, "span_blocks": 3, "drift": 0.05, "burst_rate": 0.01,
             "jitter": 0.3}


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("trace_format: %s failed: %s" % (" ".join(map(str, cmd)), p.stderr.strip()))
    return p.stdout


def timed(cmd, runs):
    walls, rss = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - t0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit("trace_format: %s failed" % " ".join(map(str, cmd)))
        rss = max(rss, usage.ru_maxrss)
    return statistics.median(walls), rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvtier", default=str(ROOT / "build" / "kvtier"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--patterns", default="reference,dense", help="comma-separated: reference, dense")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench" / "trace_format.json"))
    a = ap.parse_args()
    kv = a.kvtier
    results = {}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for name in a.patterns.split(","):
            params = d / ("%s.json" % name)
            if name == "reference":
                params.write_text(json.dumps(REFERENCE))
            else:
                run([kv, "trace", "fit", ROOT / "traces" / "data" / "stories260K.trace", "-o", params])
            jl, f32, f16 = d / (name + ".jsonl"), d / (name + "_f32.trace"), d / (name + "_f16.trace")
            run([kv, "trace", "synth", params] + SHAPE + ["-o", jl])
            run([kv, "trace", "convert", jl, "-o", f32])
            run([kv, "trace", "convert", jl, "-o", f16, "--mass", "f16"])
            check = run([kv, "trace", "check", f32])
            entries = int(check.split(" block entries")[0].rsplit(" ", 1)[1])
            r = {"block_entries": entries, "records": 40 * 1000}
            for label, f in [("jsonl", jl), ("binary_f32", f32), ("binary_f16", f16)]:
                wall, rss = timed([kv, "trace", "check", f], a.runs)
                r[label] = {"bytes": f.stat().st_size, "read_s": round(wall, 3), "peak_rss_kb": rss}
            for label in ("binary_f32", "binary_f16"):
                r[label]["speedup_vs_jsonl"] = round(r["jsonl"]["read_s"] / r[label]["read_s"], 2)
            s32 = json.loads(run([kv, "trace", "stats", f32, "--json", d / "s32.json"]) and (d / "s32.json").read_text())
            s16 = json.loads(run([kv, "trace", "stats", f16, "--json", d / "s16.json"]) and (d / "s16.json").read_text())
            r["f16_max_share_error"] = max(abs(s32["decode"][k] - s16["decode"][k])
                                           for k in ("top_1pct", "top_5pct", "top_20pct"))
            results[name] = r
            for f in (jl, f32, f16):
                f.unlink()
    print("%-10s %-11s %12s %10s %9s %10s" % ("pattern", "format", "MB", "read s", "speedup", "peak MB"))
    for name, r in results.items():
        for label in ("jsonl", "binary_f32", "binary_f16"):
            x = r[label]
            print("%-10s %-11s %12.1f %10.3f %9s %10.1f" % (name, label, x["bytes"] / 1e6, x["read_s"],
                                                          x.get("speedup_vs_jsonl", ""), x["peak_rss_kb"] / 1024))
        print("%-10s block entries %d, f16 top-k share error at most %.2e" % (name, r["block_entries"],
                                                                            r["f16_max_share_error"]))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"shape": SHAPE, "runs": a.runs, "results": results}, indent=2) + "\n")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
