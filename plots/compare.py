#!/usr/bin/env python3
"""Compare kvtier runs (systems, policies, sweep points).

    python3 plots/compare.py RESULT.json... [-o FILE.png] [--table FILE.md]

Each input is a result.json, or a sweep's JSON-lines file with one result
object per line. The figure has bar charts of decode tokens/s, mean TPOT,
attention recall, and PCIe / SSD traffic:
  PCIe bytes = bytes over every PCIe link (hardware links with a "pcie" key),
               both directions, summed over links (a transfer that crosses two
               PCIe links counts on both);
  SSD bytes  = bytes through the media of storage devices (nvme, smartssd),
               reads and writes.
--table writes a Markdown table (system = config name, tokens/s, TPOT ms,
TTFT s, attention recall, GPU busy, SSD bytes written); "-" prints it to
stdout. Outputs are written atomically. Default figure: compare.png in the
current folder.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kvtier_results as kr  # noqa: E402  (sets the Agg backend)
import matplotlib.pyplot as plt  # noqa: E402

PROG = "compare.py"


def fmt(v, spec):
    return "n/a" if v != v else spec % v  # NaN: metric missing


def markdown_table(labels, results):
    head = ["system", "tokens/s", "TPOT ms", "TTFT s", "attention recall", "GPU busy", "ssd_bytes_written"]
    rows = []
    for lab, r in zip(labels, results):
        m = lambda k: kr.metric(r, k)  # noqa: E731
        rows.append([
            lab.replace("|", "\\|"),
            fmt(m("decode_tokens_per_s"), "%.1f"),
            fmt(kr.time_per_token_s(r) * 1e3, "%.3f"),
            fmt(kr.ttft_s(r), "%.3f"),
            fmt(m("attention_recall"), "%.4f"),
            fmt(m("gpu_busy_fraction"), "%.3f"),
            kr.human_bytes(m("ssd_bytes_written")),
        ])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def bar(ax, ys, vals, title, xlabel, color, spec):
    bars = ax.barh(ys, vals, color=color)
    ax.bar_label(bars, labels=[fmt(v, spec) for v in vals], fontsize=7, padding=2)
    finite = [v for v in vals if v == v]
    if finite and max(finite) > 0:
        ax.set_xlim(0, max(finite) * 1.3)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)


def make_figure(labels, results):
    """One row per run, four panels side by side sharing the run labels."""
    n = len(results)
    fig, axes = plt.subplots(1, 4, sharey=True, figsize=(16, 1.6 + 0.45 * max(n, 2)))
    ys = list(range(n))
    bar(axes[0], ys, [kr.metric(r, "decode_tokens_per_s") for r in results], "decode tokens/s", "tokens/s",
        "tab:blue", "%.1f")
    bar(axes[1], ys, [kr.time_per_token_s(r) * 1e3 for r in results],
        "mean time per output token (TPOT)", "ms", "tab:purple", "%.2f")
    bar(axes[2], ys, [kr.metric(r, "attention_recall") for r in results], "attention recall",
        "share of attention mass", "tab:green", "%.3f")
    axes[2].set_xlim(0, 1.3)
    ax = axes[3]
    pcie = [kr.pcie_bytes(r) for r in results]
    ssd = [kr.ssd_bytes(r) for r in results]
    h = 0.4
    b1 = ax.barh([y - h / 2 for y in ys], [v / 1e9 for v in pcie], h, label="PCIe links", color="tab:red")
    b2 = ax.barh([y + h / 2 for y in ys], [v / 1e9 for v in ssd], h, label="SSD media", color="tab:brown")
    ax.bar_label(b1, labels=[kr.human_bytes(v) for v in pcie], fontsize=6, padding=2)
    ax.bar_label(b2, labels=[kr.human_bytes(v) for v in ssd], fontsize=6, padding=2)
    top = max(pcie + ssd) / 1e9
    if top > 0:
        ax.set_xlim(0, top * 1.35)
    ax.set_title("PCIe and SSD traffic", fontsize=10)
    ax.set_xlabel("GB")
    ax.legend(fontsize=7, loc="lower right")
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels(labels, fontsize=8)
    axes[0].invert_yaxis()  # first run on top, as in the table
    fig.suptitle("kvtier: %d run%s compared" % (n, "" if n == 1 else "s"), fontsize=11)
    fig.tight_layout()
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description="Compare kvtier runs: bar charts and a Markdown table.")
    ap.add_argument("results", nargs="+", help="result.json files or sweep JSON-lines files")
    ap.add_argument("-o", "--output", default="compare.png", help="output image (default: compare.png)")
    ap.add_argument("--table", help='also write a Markdown table to this file ("-": stdout)')
    args = ap.parse_args(argv)
    try:
        results = []
        for path in args.results:
            results += [r for _, r in kr.load_results(path)]
        labels = kr.run_labels(results)
        if args.table:
            table = markdown_table(labels, results)
            if args.table == "-":
                sys.stdout.write(table)
            else:
                kr.write_text_atomic(args.table, table)
        kr.save_figure(make_figure(labels, results), args.output)
    except kr.ResultError as e:
        kr.die(PROG, e)
    except OSError as e:
        kr.die(PROG, "%s: %s" % (e.filename or "output", e.strerror or e))
    if args.table and args.table != "-":
        print("%s: wrote %s" % (PROG, args.table))
    print("%s: wrote %s" % (PROG, args.output), file=sys.stderr if args.table == "-" else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
