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
Throughput, TPOT and traffic get log axes where their values span two
decades or more (--log, --linear to force either).
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


def use_log(vals, log=None):
    """A log axis when asked, or by default when the positive values span two
    decades or more: on a linear axis the small bars would not be seen."""
    pos = [v for v in vals if v == v and v > 0]
    if log is not None:
        return log and bool(pos)
    return len(pos) > 1 and max(pos) / min(pos) >= 100


def hbars(ax, ys, vals, labels, color, log, height=0.8, label=None, fontsize=7):
    """Horizontal bars with their values written at their ends; on a log axis
    a zero is written at the axis' left edge (it has no bar)."""
    pos = [v for v in vals if v == v and v > 0]
    lo = min(pos) / 3 if log and pos else 0.0
    bars = ax.barh(ys, [v if v == v else 0 for v in vals], height, color=color, label=label)
    for y, v, text in zip(ys, vals, labels):
        ax.text(max(v, lo) if v == v else lo, y, " " + text, va="center", fontsize=fontsize)
    return bars, lo


def finish_axis(ax, vals, log, lo):
    finite = [v for v in vals if v == v]
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo, max(finite) * 8)
    elif finite and max(finite) > 0:
        ax.set_xlim(0, max(finite) * 1.3)


def bar(ax, ys, vals, title, xlabel, color, spec, log=None):
    log = use_log(vals, log)
    _, lo = hbars(ax, ys, vals, [fmt(v, spec) for v in vals], color, log)
    finish_axis(ax, vals, log, lo)
    ax.set_title(title + (" (log)" if log else ""), fontsize=10)
    ax.set_xlabel(xlabel)


def make_figure(labels, results, log=None):
    """One row per run, four panels side by side sharing the run labels;
    `log` True/False forces the throughput, TPOT and traffic axes, None
    (default) picks log where values span two decades."""
    n = len(results)
    fig, axes = plt.subplots(1, 4, sharey=True, figsize=(16, 1.6 + 0.45 * max(n, 2)))
    ys = list(range(n))
    bar(axes[0], ys, [kr.metric(r, "decode_tokens_per_s") for r in results], "decode tokens/s", "tokens/s",
        "tab:blue", "%.1f", log)
    bar(axes[1], ys, [kr.time_per_token_s(r) * 1e3 for r in results],
        "mean time per output token (TPOT)", "ms", "tab:purple", "%.2f", log)
    bar(axes[2], ys, [kr.metric(r, "attention_recall") for r in results], "attention recall",
        "share of attention mass", "tab:green", "%.3f", False)
    axes[2].set_xlim(0, 1.3)
    ax = axes[3]
    pcie = [kr.pcie_bytes(r) / 1e9 for r in results]
    ssd = [kr.ssd_bytes(r) / 1e9 for r in results]
    lg = use_log(pcie + ssd, log)
    h = 0.4
    _, lo1 = hbars(ax, [y - h / 2 for y in ys], pcie, [kr.human_bytes(v * 1e9) for v in pcie], "tab:red", lg, h,
                   "PCIe links", 6)
    _, lo2 = hbars(ax, [y + h / 2 for y in ys], ssd, [kr.human_bytes(v * 1e9) for v in ssd], "tab:brown", lg, h,
                   "SSD media", 6)
    if max(pcie + ssd) > 0:
        finish_axis(ax, pcie + ssd, lg, min(x for x in (lo1, lo2) if x > 0) if lg else 0.0)
    ax.set_title("PCIe and SSD traffic" + (" (log)" if lg else ""), fontsize=10)
    ax.set_xlabel("GB")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
    scale = ap.add_mutually_exclusive_group()
    scale.add_argument("--log", dest="log", action="store_true", default=None,
                       help="log axes for throughput, TPOT and traffic (default: where values span two decades)")
    scale.add_argument("--linear", dest="log", action="store_false", help="linear axes throughout")
    ap.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
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
        kr.save_figure(make_figure(labels, results, args.log), args.output, dpi=args.dpi)
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
