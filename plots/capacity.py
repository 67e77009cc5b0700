#!/usr/bin/env python3
"""Hit ratio against cache capacity, one line per eviction policy, from the
JSON that `kvtier replay --out` writes (docs/replay.md).

  kvtier replay TRACE -p lru,s3fifo,belady -c 1%,2%,5%,10%,20%,50% -o replay.json
  python3 plots/capacity.py replay.json -o capacity.png

The x axis is the capacity of the top tier in blocks (log scale; --bytes: in
GiB of KV); the y axis is the share of block references served from the cache
(all tiers). The unbounded-cache ratio (every reference after a block's first)
is drawn as a dashed line when the trace's distinct block count is known.
"""
import argparse
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("capacity.py: %s: %s" % (path, e))
    if r.get("command") != "replay" or "runs" not in r:
        sys.exit("capacity.py: %s: expected the JSON of `kvtier replay --out`" % path)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", help="kvtier replay JSON")
    ap.add_argument("-o", "--out", default="capacity.png", help="image to write (png, pdf, svg)")
    ap.add_argument("--bytes", action="store_true", help="capacity axis in GiB of KV instead of blocks")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    r = load(a.result)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = {}
    for run in r["runs"]:
        top = run["tiers"][0]
        name = top["policy"]["name"] if isinstance(top["policy"], dict) else str(top["policy"])
        x = top["capacity_bytes"] / 2**30 if a.bytes else top["capacity_blocks"]
        lines.setdefault(name, []).append((x, run["hit_ratio"]))
    if not lines:
        sys.exit("capacity.py: %s: no runs" % a.result)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name in sorted(lines, key=lambda n: -max(h for _, h in lines[n])):
        pts = sorted(lines[name])
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o", markersize=3, label=name)
    refs, distinct = r.get("references", 0), r.get("distinct_blocks", 0)
    if refs and distinct and r.get("repeat", 1) == 1 and r.get("semantics") == "block":
        ax.axhline(100.0 * (refs - distinct) / refs, color="grey", linestyle="--", linewidth=1,
                   label="unbounded cache")
    ax.set_xscale("log")
    ax.set_xlabel("cache capacity (GiB of KV, %s)" % r.get("model", "") if a.bytes else "cache capacity (blocks)")
    ax.set_ylabel("block references served from cache (%)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(a.title or "%s: %s semantics" % (os.path.basename(r.get("trace", "")), r.get("semantics", "")),
                 fontsize=10)
    fig.tight_layout()
    tmp = a.out + ".tmp" + os.path.splitext(a.out)[1]
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, a.out)
    print("capacity.py: wrote %s" % a.out)


if __name__ == "__main__":
    main()
