#!/usr/bin/env python3
"""What building a cluster's SimGrid platform costs, at several node counts.

Runs build/bench/kvtier_platform_bench (one process per point: SimGrid allows
one platform per process) on a node preset replicated N times, star and
fat-tree fabrics, and prints the platform build time, the time of 1,000
cross-node route look-ups, the wall time and the peak resident memory of the
whole process (/usr/bin/time). docs/cluster.md quotes its output.

    python3 bench/cluster_platform.py                       # 16 and 128 nodes of configs/hardware/hgx_h100x8.json
    python3 bench/cluster_platform.py --nodes 16 128 256 512
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(binary, hw, nodes, topology, cross):
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        p = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%e %M", str(binary), str(hw), str(nodes), topology,
                            str(cross)], capture_output=True, text=True, check=False)
        if p.returncode != 0:
            sys.exit("kvtier_platform_bench failed: " + p.stderr.strip())
        wall, rss_kb = t.read().split()[-2:]
    r = json.loads(p.stdout)
    r["wall_s"] = float(wall)
    r["max_rss_MB"] = int(rss_kb) / 1024
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default=str(ROOT / "configs" / "hardware" / "hgx_h100x8.json"))
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--cross", type=int, default=1000, help="cross-node routes to look up")
    ap.add_argument("--binary", default=os.environ.get("KVTIER_PLATFORM_BENCH",
                                                       str(ROOT / "build" / "bench" / "kvtier_platform_bench")))
    a = ap.parse_args()
    if not Path(a.binary).is_file():
        sys.exit("%s not found: cmake --build build --target kvtier_platform_bench" % a.binary)
    print("| nodes | fabric | devices | SimGrid links | platform build, s | %d cross routes, s | wall, s | peak RSS, MB |" % a.cross)
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in a.nodes:
        for topo in ("star", "fat_tree"):
            r = run(a.binary, a.hardware, n, topo, a.cross)
            print("| %d | %s | %d | %d | %.3f | %.4f | %.2f | %.0f |" % (n, topo, r["devices"], r["links"], r["platform_s"],
                                                                      r["cross_routes_s"], r["wall_s"], r["max_rss_MB"]))


if __name__ == "__main__":
    main()
