#!/usr/bin/env python3
"""Hit ratio against cache capacity, one line per eviction policy, from the
JSON that `kvtier replay --out` writes (docs/replay.md).

  kvtier replay TRACE -p lru,s3fifo,belady -c 1%,2%,5%,10%,20%,50% -o replay.json
  python3 plots/capacity.py replay.json -o capacity.png

The x axis is the capacity of the top tier in blocks (log scale; --bytes: in
GiB of KV); the y axis is the share of block references served from the cache
(all tiers). The unbounded-cache ratio (every reference after a block's first)
is drawn as a dashed line when the trace's distinct block count is known.
The figure is `kvtier_plot.py capacity`'s (the same colour per policy), sized
for a page rather than a paper's column; one image in the format of -o.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kvtier_results as kr  # noqa: E402  (sets the Agg backend)
import kvtier_plot as kp  # noqa: E402

PROG = "capacity.py"


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", help="kvtier replay JSON")
    ap.add_argument("-o", "--out", default="capacity.png", help="image to write (png, pdf, svg)")
    ap.add_argument("--bytes", action="store_true", help="capacity axis in GiB of KV instead of blocks")
    ap.add_argument("--title", default=None)
    ap.add_argument("--dpi", type=kp.positive_dpi, default=120, help="PNG resolution (default 120)")
    a = ap.parse_args(argv)
    try:
        if not a.result.endswith(".json"):
            raise kr.ResultError("%s: expected the JSON of `kvtier replay --out`" % a.result)
        series, cap = kp.load_capacity(a.result, "GiB" if a.bytes else "blocks")
        unbounded, title = kp.capacity_context(a.result)
        fig, _ = kp.plot_capacity(series, cap, a.title or title, unbounded, log_x=True, figsize=(6.4, 4.2))
        kr.save_figure(fig, a.out, dpi=a.dpi)
    except kr.ResultError as e:
        kr.die(PROG, e)
    print("%s: wrote %s" % (PROG, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
