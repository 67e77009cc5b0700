#!/usr/bin/env python3
"""Plot one kvtier run.

    python3 plots/plot_run.py out/default/result.json [-o FILE.png]

A serving run (a config with a `serving` section) gets TTFT, TPOT and
end-to-end CDFs from requests.csv beside result.json, with the SLO limits;
the waiting and running requests over time; prompt tokens by source (prefix
hits per tier, computed); KV bytes per tier; the title gives the operating
point (SLO attainment, saturated or not; docs/plots.md).

A single-batch run gets one figure with four panels:
  (a) per-step decode latency (TPOT) from steps.csv next to result.json
      (written by `kvtier run ... --set sim.step_csv=true`); without it, bars
      of the mean / p50 / p99 step latency;
  (b) per-tier hit rate, and per-tier peak bytes against capacity;
  (c) bytes per link and direction (only links that carried traffic).
The title names the config and gives tokens/s, TPOT, TTFT and attention recall.
Default output: plot.png next to result.json. The format follows the output
file's extension (png, pdf, svg).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kvtier_results as kr  # noqa: E402  (sets the Agg backend)
import kvtier_serving as ks  # noqa: E402
import kvtier_plot as kp  # noqa: E402  (positive_dpi)
import matplotlib.pyplot as plt  # noqa: E402

PROG = "plot_run.py"


def title_of(result):
    m = lambda k: kr.metric(result, k)  # noqa: E731
    return "%s: %.1f tokens/s, TPOT %.2f ms, TTFT %.3f s, attention recall %.3f" % (
        kr.config_name(result),
        m("decode_tokens_per_s"),
        m("mean_step_latency_s") * 1e3,
        m("ttft_s"),
        m("attention_recall"),
    )


def plot_latency(ax, result, steps):
    mean = kr.metric(result, "mean_step_latency_s") * 1e3
    p50 = kr.metric(result, "p50_step_latency_s") * 1e3
    p99 = kr.metric(result, "p99_step_latency_s") * 1e3
    if steps and steps[0]:
        x, lat = steps
        ax.plot(x, [v * 1e3 for v in lat], lw=1, color="tab:blue", label="step latency")
        for v, name, style in ((mean, "mean", "-"), (p50, "p50", "--"), (p99, "p99", ":")):
            if math.isfinite(v):
                ax.axhline(v, color="gray", ls=style, lw=0.8, label="%s %.2f ms" % (name, v))
        ax.set_xlabel("decode step")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="best")
        ax.set_title("time per decode step (TPOT)", fontsize=9)
    else:
        names, vals = ["mean", "p50", "p99"], [mean, p50, p99]
        bars = ax.bar(names, vals, color=["tab:blue", "tab:cyan", "tab:purple"])
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
        ax.set_title("time per decode step (no steps.csv: summary)", fontsize=9)
    ax.set_ylabel("ms")


def plot_hit_rate(ax, tiers):
    names = list(tiers)
    rates = [float(tiers[n].get("hit_rate", float("nan"))) for n in names]
    bars = ax.bar(names, rates, color="tab:green")
    ax.bar_label(bars, labels=["%.3f" % r for r in rates], fontsize=7)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("share of block accesses")
    ax.set_title("hit rate per tier", fontsize=9)


def plot_occupancy(ax, tiers):
    names = list(tiers)
    peak = [float(tiers[n].get("peak_bytes", float("nan"))) for n in names]
    cap = [tiers[n].get("capacity_bytes") for n in names]
    if all(isinstance(c, (int, float)) and c > 0 for c in cap):
        frac = [p / c for p, c in zip(peak, cap)]
        bars = ax.bar(names, frac, color="tab:orange")
        ax.bar_label(bars, labels=["%s / %s" % (kr.human_bytes(p), kr.human_bytes(c)) for p, c in zip(peak, cap)],
                     fontsize=7)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("peak bytes / capacity")
    else:  # no capacity in the result: absolute peak bytes
        bars = ax.bar(names, [p / 1e9 for p in peak], color="tab:orange")
        ax.bar_label(bars, labels=[kr.human_bytes(p) for p in peak], fontsize=7)
        ax.set_ylabel("peak GB")
    ax.set_title("peak KV bytes per tier vs capacity", fontsize=9)


def plot_links(ax, result):
    lb = {n: b for n, b in kr.link_bytes(result).items() if b > 0}
    ax.set_title("bytes per link and direction (links with traffic)", fontsize=9)
    if not lb:
        ax.text(0.5, 0.5, "no link traffic", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    names = sorted(lb)
    vals = [lb[n] / 1e9 for n in names]
    bars = ax.barh(names, vals, color="tab:red")
    ax.bar_label(bars, labels=[kr.human_bytes(lb[n]) for n in names], fontsize=7, padding=2)
    ax.invert_yaxis()
    ax.set_xlabel("GB")
    ax.set_xlim(0, max(vals) * 1.25)
    ax.tick_params(axis="y", labelsize=7)


def make_figure(result, steps):
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    plot_latency(axes[0][0], result, steps)
    plot_links(axes[0][1], result)
    tiers = kr.ordered_tiers(result)
    if isinstance(tiers, dict) and tiers:
        plot_hit_rate(axes[1][0], tiers)
        plot_occupancy(axes[1][1], tiers)
    else:
        for ax in axes[1]:
            ax.text(0.5, 0.5, "no tiers in the result", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
    fig.suptitle(title_of(result), fontsize=11)
    fig.tight_layout()
    return fig


def serving_figure(result, path):
    """A serving run: latency CDFs, the queue over time, prompt tokens by source
    and KV per tier, from result.json and requests.csv beside it (the queue
    and KV per tier over time from iterations.csv where the run wrote one)."""
    csv_path = ks.requests_beside(path)
    req = ks.Requests(csv_path) if os.path.isfile(csv_path) else None
    it_path = ks.iterations_beside(path)
    it = ks.Iterations(it_path) if os.path.isfile(it_path) else None
    return ks.run_figure(result, req, it=it)


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description="Plot one kvtier run (result.json).")
    ap.add_argument("result", help="a kvtier result.json")
    ap.add_argument("-o", "--output", help="output image (default: plot.png next to result.json; .pdf, .svg by name)")
    ap.add_argument("--dpi", type=kp.positive_dpi, default=110, help="PNG resolution in dots per inch (default 110)")
    args = ap.parse_args(argv)
    try:
        result = kr.load_result(args.result)
        out = args.output or os.path.join(os.path.dirname(os.path.abspath(args.result)), "plot.png")
        if kr.is_serving(result):
            fig = serving_figure(result, args.result)
        else:
            steps = kr.read_steps_csv(os.path.join(os.path.dirname(os.path.abspath(args.result)), "steps.csv"))
            fig = make_figure(result, steps)
        kr.save_figure(fig, out, dpi=args.dpi)
    except kr.ResultError as e:
        kr.die(PROG, e)
    except OSError as e:
        kr.die(PROG, "%s: %s" % (e.filename or "output", e.strerror or e))
    print("%s: wrote %s" % (PROG, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
