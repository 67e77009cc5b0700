#!/usr/bin/env python3
"""Do two kvtier binaries give the same results on the shipped configurations?

Runs configs/*.json, configs/systems/*.json, configs/serving/*.json and
configs/sweeps/bases/*.json, and the variants below (serving with the KV in
tiers: the vLLM preset, slices of the Mooncake trace whose requests differ in
length, with and without the prefix cache, with per-request attention and
the policies that read it) with a baseline binary (e.g. built from main in a
separate checkout) and the candidate (build/kvtier), and compares each
result.json's resolved configuration, seed and metrics byte for byte (JSON
with sorted keys; provenance, version and host resources differ by design).
A run the baseline does not finish within --timeout seconds is skipped (and
said so). Exit status 1 if any differs.

    python3 bench/same_results.py --baseline /tmp/base/build/kvtier [--candidate build/kvtier] [-j 2] [--timeout 60]
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("config", "seed", "metrics")


TIERED = ["serving.kv=tiered", "serving.preemption=recompute"]
MOONCAKE = "configs/serving/mooncake.json"
VLLM = "configs/systems/vllm_swap.json"
ATTENTION = 'serving.attention={"kind": "synthetic"}'
# (name, config, --set overrides): serving with the KV in tiers, where requests
# of different lengths leave most of a range per request unused.
VARIANTS = [
    ("vllm_swap tiered, 15 requests", VLLM, TIERED + ["serving.requests.count=15"]),
    ("vllm_swap tiered, 40 requests, 4 at once", VLLM, TIERED + ["serving.requests.count=40", "serving.max_running=4"]),
    ("vllm_swap tiered, attention, quest + hkm", VLLM,
     TIERED + ["serving.requests.count=12", ATTENTION, "policies.evaluation=quest", "policies.eviction=hkm",
               "policies.placement=hkm", "policies.promotion=hkm"]),
    ("mooncake tiered, 20 requests, 512-token blocks", MOONCAKE,
     TIERED + ["serving.limit=20", "workload.block_tokens=512", "serving.prefix_cache.enabled=false"]),
    ("mooncake tiered, 20 requests, 512-token blocks, prefix cache", MOONCAKE,
     TIERED + ["serving.limit=20", "workload.block_tokens=512"]),
    ("mooncake tiered, 30 requests, 16 at once, 64-token blocks", MOONCAKE,
     TIERED + ["serving.limit=30", "serving.max_running=16", "workload.block_tokens=64"]),
    ("mooncake tiered, 8 requests, 16-token blocks", MOONCAKE,
     TIERED + ["serving.limit=8", "serving.prefix_cache.enabled=false"]),
    ("mooncake tiered, 24 requests, attention, quest", MOONCAKE,
     TIERED + ["serving.limit=24", "workload.block_tokens=256", ATTENTION, "policies.evaluation=quest"]),
]


def configs():
    out = sorted((ROOT / "configs").glob("*.json"))
    for d in ("systems", "serving", "sweeps/bases"):
        out += sorted((ROOT / "configs" / d).glob("*.json"))
    points = [(str(c.relative_to(ROOT)), c, []) for c in out]
    return points + [(name, ROOT / cfg, sets) for name, cfg, sets in VARIANTS]


def result(binary, cfg, sets, out, timeout):
    cmd = [str(binary), "run", str(cfg), "--out", str(out), "-q"]
    for s in sets:
        cmd += ["--set", s]
    try:
        p = subprocess.run(cmd, cwd=str(ROOT), capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": True}
    if p.returncode != 0:
        return {"error": p.stderr.strip()}
    with open(out / "result.json") as f:
        r = json.load(f)
    return {k: json.dumps(r.get(k), sort_keys=True) for k in COMPARED}


def compare(args, point, tmp):
    name, cfg, sets = point
    # One output folder for both runs, in turn: the resolved configuration names it.
    out = tmp / ("%d" % abs(hash(name)))
    a = result(args.baseline, cfg, sets, out, args.timeout)
    shutil.rmtree(out, ignore_errors=True)
    if a.get("timeout"):
        return name, [], "skipped: the baseline takes more than %d s" % args.timeout
    b = result(args.candidate, cfg, sets, out, None)
    differs = [k for k in set(a) | set(b) if a.get(k) != b.get(k)]
    err = a.get("error") or b.get("error")
    return name, differs, ("both failed alike: " + err.splitlines()[-1][:120]) if err else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--candidate", default=str(ROOT / "build" / "kvtier"))
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60, help="skip a run the baseline does not finish in this many seconds")
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as t, ThreadPoolExecutor(args.j) as pool:
        for name, differs, note in pool.map(lambda c: compare(args, c, Path(t)), configs()):
            status = "identical" if not differs else "DIFFERS in " + ", ".join(sorted(differs))
            if note and not differs:
                status = note
            bad += bool(differs)
            print("%-64s %s" % (name, status), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
