#!/usr/bin/env python3
"""The serving engine on Mooncake's conversation trace: speed and what reuse does.

    python3 bench/serving_checks.py [--limit N] [--json OUT]

Runs configs/serving/mooncake.json (one H200, LLaMA-3-70B FP8 weights, DRAM
then NVMe prefix cache) and prints:
  - speed: wall and user seconds for the whole trace, simulated seconds per
    wall second, and the cost at 1/4, 1/2 and all of the requests (linear
    in the number of requests?);
  - coarsening: the same run with every iteration simulated layer by layer
    (serving.coarsen false) against the default, metric by metric;
  - reuse (Mooncake FAST'25, section 4: "at 3M tokens of local cache the hit
    rate reaches only about 41-75% of the unbounded maximum"): the prefix hit
    rate with a 3M-token DRAM cache against an unbounded one, and what reuse
    saves against a run without cache (prompt tokens computed, TTFT).

The binary is $KVTIER_BINARY (default build/kvtier).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("KVTIER_BINARY", os.path.join(ROOT, "build", "kvtier"))
PRESET = "configs/serving/mooncake.json"
KV_PER_TOKEN = 327680  # LLaMA-3-70B: 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes


def run(sets, tag):
    out = tempfile.mkdtemp(prefix="kvtier_serving_" + tag + "_")
    cmd = [BIN, "run", PRESET, "--out", out] + [a for s in sets for a in ("--set", s)]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("serving_checks.py: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
    m = json.load(open(os.path.join(out, "result.json")))["metrics"]
    return m, wall, r1.ru_utime - r0.ru_utime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=0, help="only the first N requests (0: the whole trace)")
    ap.add_argument("--json", help="also write every figure to this file")
    a = ap.parse_args()
    base = ["serving.limit=%d" % a.limit] if a.limit else []
    report = {}

    m, wall, user = run(base, "all")
    n = m["requests"]
    report["speed"] = {"requests": n, "wall_s": wall, "user_s": user, "simulated_s": m["simulated_time_s"],
                       "iterations": m["iterations"], "layered_iterations": m["layered_iterations"],
                       "realtime_factor": m["simulated_time_s"] / wall}
    print("speed: %d requests, %d iterations (%d layer by layer): %.2f s wall, %.2f s user; simulated %.0f s = %.0fx real time"
          % (n, m["iterations"], m["layered_iterations"], wall, user, m["simulated_time_s"], m["simulated_time_s"] / wall))
    scale = []
    for frac in (4, 2):
        mk, wk, uk = run(["serving.limit=%d" % (n // frac)], "part%d" % frac)
        scale.append({"requests": n // frac, "user_s": uk, "iterations": mk["iterations"]})
        print("  %5d requests: %.2f s user (%.2f us per request)" % (n // frac, uk, uk / (n // frac) * 1e6))
    print("  %5d requests: %.2f s user (%.2f us per request)" % (n, user, user / n * 1e6))
    report["scaling"] = scale

    fine_n = min(n, 3000)
    mc, _, _ = run(["serving.limit=%d" % fine_n], "coarse")
    mf, wf, uf = run(["serving.limit=%d" % fine_n, "serving.coarsen=false"], "fine")
    rows = {}
    for key in ("simulated_time_s", "throughput_tokens_per_s"):
        rows[key] = (mc[key], mf[key])
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        for q in ("mean", "p99"):
            rows[key + "." + q] = (mc[key][q], mf[key][q])
    worst = max(abs(c - f) / abs(f) for c, f in rows.values() if f)
    print("coarsening (first %d requests; layer by layer: %d iterations, %.2f s user): largest relative difference %.2e"
          % (fine_n, mf["iterations"], uf, worst))
    report["coarsening"] = {"requests": fine_n, "max_rel_diff": worst, "rows": rows}

    cache_3m = 3e6 * KV_PER_TOKEN / 1e9
    m3, _, _ = run(base + ["hardware.tiers=[\"gpu\",\"dram\"]", "hardware.devices.dram.capacity_GB=%.6f" % cache_3m], "3m")
    mu, _, _ = run(base + ["hardware.tiers=[\"gpu\",\"dram\"]", "hardware.devices.dram.capacity_GB=1e6"], "unbounded")
    m0, _, _ = run(base + ["serving.prefix_cache.enabled=false"], "nocache")
    ratio = m3["prefix_hit_rate"] / mu["prefix_hit_rate"] if mu["prefix_hit_rate"] else 0.0
    print("reuse: hit rate with a 3M-token DRAM cache %.3f, unbounded %.3f: %.0f%% of the maximum (Mooncake: 41-75%%)"
          % (m3["prefix_hit_rate"], mu["prefix_hit_rate"], 100 * ratio))
    print("  against no cache (preset tiers DRAM + NVMe): prompt tokens computed %.3g -> %.3g (%.0f%% saved); "
          "TTFT mean %.2f -> %.2f s, p50 %.2f -> %.2f s"
          % (m0["computed_prompt_tokens"], m["computed_prompt_tokens"],
             100 * (1 - m["computed_prompt_tokens"] / m0["computed_prompt_tokens"]),
             m0["ttft_s"]["mean"], m["ttft_s"]["mean"], m0["ttft_s"]["p50"], m["ttft_s"]["p50"]))
    report["reuse"] = {"hit_rate_3M": m3["prefix_hit_rate"], "hit_rate_unbounded": mu["prefix_hit_rate"], "ratio": ratio,
                       "computed_no_cache": m0["computed_prompt_tokens"], "computed_cache": m["computed_prompt_tokens"],
                       "ttft_mean_no_cache": m0["ttft_s"]["mean"], "ttft_mean_cache": m["ttft_s"]["mean"],
                       "ttft_p50_no_cache": m0["ttft_s"]["p50"], "ttft_p50_cache": m["ttft_s"]["p50"]}
    if a.json:
        json.dump(report, open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
