#!/usr/bin/env python3
"""Do two kvtier binaries give the same results on the shipped configurations?

Runs configs/default.json, configs/systems/*.json and configs/serving/*.json
with a baseline binary (e.g. built from main in a separate checkout) and the
candidate (build/kvtier), and compares each result.json's resolved
configuration, seed and metrics byte for byte (JSON with sorted keys;
provenance, version and host resources differ by design). Exit status 1 if
any differs.

    python3 bench/same_results.py --baseline /tmp/base/build/kvtier [--candidate build/kvtier] [-j 2]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("config", "seed", "metrics")


def configs():
    out = [ROOT / "configs" / "default.json"]
    for d in ("systems", "serving"):
        out += sorted((ROOT / "configs" / d).glob("*.json"))
    return out


def result(binary, cfg, out):
    p = subprocess.run([str(binary), "run", str(cfg), "--out", str(out), "-q"], cwd=str(ROOT), capture_output=True,
                       text=True, check=False)
    if p.returncode != 0:
        return {"error": p.stderr.strip()}
    with open(out / "result.json") as f:
        r = json.load(f)
    return {k: json.dumps(r.get(k), sort_keys=True) for k in COMPARED}


def compare(args, cfg, tmp):
    name = cfg.relative_to(ROOT)
    a = result(args.baseline, cfg, tmp / ("base_" + cfg.stem))
    b = result(args.candidate, cfg, tmp / ("cand_" + cfg.stem))
    differs = [k for k in set(a) | set(b) if a.get(k) != b.get(k)]
    return name, differs, a.get("error") or b.get("error")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--candidate", default=str(ROOT / "build" / "kvtier"))
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as t, ThreadPoolExecutor(args.j) as pool:
        for name, differs, err in pool.map(lambda c: compare(args, c, Path(t)), configs()):
            status = "identical" if not differs else "DIFFERS in " + ", ".join(sorted(differs))
            if err and not differs:
                status = "both failed alike: " + err.splitlines()[-1][:120]
            bad += bool(differs)
            print("%-40s %s" % (name, status), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
