#!/usr/bin/env python3
"""One static HTML page from a kvtier run or sweep: the key figures, the
plots (embedded as PNG data, so the page needs no server and no network) and
the resolved configuration. `kvtier report INPUT -o report.html` runs this.

  kvtier_report.py RESULT.json|RUN_DIR|SWEEP.jsonl|SWEEP.csv [-o report.html] [--timeline TL.json]

A run's page shows tokens/s, TPOT, TTFT, recall, GPU busy, per-tier and
per-link figures, a timeline and a per-step breakdown when the run has a
timeline (--timeline, or timeline.json next to result.json) and steps.csv.
A sweep's page shows the best point, a heatmap over its first two axes, a
line plot against its first axis and speedups over point 0. A cache replay's
page (the JSON of `kvtier replay -o`) shows hit ratio, miss ratio and byte
miss ratio against capacity per policy, and every run in a table.
"""

import argparse
import base64
import html
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kvtier_results as kr  # noqa: E402
import kvtier_plot as kp  # noqa: E402
import kvtier_energy as ke  # noqa: E402
import kvtier_serving as ks  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

PROG = "kvtier_report.py"

CSS = """
body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
figure{display:inline-block;margin:.5em;vertical-align:top}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:.8em}
.verdict{padding:.4em .6em;border-left:4px solid #888;background:#f7f7f7}
.verdict.saturated,.verdict.overloaded{border-color:#c33;background:#fdf0f0}
"""

# Counts the figures the browser could decode: a test reads it from the DOM.
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('figure img');
  var ok = 0;
  imgs.forEach(function (i) { if (i.complete && i.naturalWidth > 0) ok++; });
  document.body.setAttribute('data-figures-loaded', String(ok));
  document.body.setAttribute('data-figures', String(imgs.length));
});
"""


def png_data(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=150)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def figure_html(fig_id, fig, caption):
    return ('<figure id="%s"><img alt="%s" src="data:image/png;base64,%s"><figcaption>%s</figcaption></figure>'
            % (fig_id, html.escape(caption), png_data(fig), html.escape(caption)))


def table_html(header, rows):
    out = ["<table><tr>%s</tr>" % "".join("<th>%s</th>" % html.escape(str(h)) for h in header)]
    for r in rows:
        out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(str(c)) for c in r))
    out.append("</table>")
    return "\n".join(out)


def fmt(v, scale=1.0, digits=4):
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "n/a" if v is None else str(v)
    return "%.*g" % (digits, v * scale)


def key_figures(m):
    rows = []
    for key in ("decode_tokens_per_s", "mean_step_latency_s", "p50_step_latency_s", "p99_step_latency_s", "ttft_s",
                "attention_recall", "gpu_busy_fraction", "simulated_time_s", "fetched_bytes", "ssd_bytes_written"):
        if key in m:
            label, scale, _ = kp.metric_info(key)
            rows.append((label, fmt(m[key], scale)))
    return rows


def provenance_html(r):
    p = r.get("provenance", {})
    bits = ["kvtier %s" % r.get("kvtier_version", "?")]
    if p.get("git_commit"):
        bits.append("commit %s" % p["git_commit"])
    if p.get("simgrid_version"):
        bits.append("SimGrid %s" % p["simgrid_version"])
    if "seed" in r:
        bits.append("seed %s" % r["seed"])
    return "<p>%s</p>" % html.escape(", ".join(bits))


def serving_key_figures(result, req):
    """A serving run's figures: requests, throughput, latency percentiles, SLOs."""
    m = result["metrics"]
    n = m.get("requests")
    rows = [("requests", "{:,}".format(n) if isinstance(n, int) else fmt(n)),
            ("output tokens/s", fmt(m.get("throughput_tokens_per_s"))),
            ("requests/s", fmt(m.get("request_throughput_per_s")))]
    for key, name, unit, scale in ks.LATENCIES + (("queueing_s", "queueing", "s", 1.0),):
        d = m.get(key)
        if isinstance(d, dict):
            rows.append(("%s p50 / p90 / p99 (%s)" % (name, unit),
                         " / ".join(fmt(d.get(q), scale) for q in ("p50", "p90", "p99"))))
    op = ks.operating_point(result, req)
    if op.get("slo_ttft_s") or op.get("slo_tpot_s"):
        rows.append(("SLO attainment", "%.1f %%" % (100 * op["slo_attainment"])))
        rows.append(("goodput (requests/s within the SLOs)", fmt(m.get("goodput_requests_per_s"))))
    for key, label, scale in (("prefix_hit_rate", "prefix hit rate", 1.0), ("gpu_busy_fraction", "GPU busy (%)", 100.0),
                              ("preemptions", "preemptions", 1.0), ("simulated_time_s", "simulated time (s)", 1.0)):
        if key in m:
            rows.append((label, fmt(m[key], scale)))
    return rows, op


def serving_sections(result, run_dir):
    """Key figures, the operating point and the figures of a serving run."""
    path = os.path.join(run_dir or ".", "requests.csv")
    req = ks.Requests(path) if os.path.isfile(path) else None
    rows, op = serving_key_figures(result, req)
    parts = ['<h2>Key figures</h2><div id="key-figures">%s</div>' % table_html(["figure", "value"], rows)]
    sentence = ks.describe_operating_point(op)
    if sentence:
        parts.append('<p id="operating-point" class="verdict %s">Operating point: %s</p>'
                     % (html.escape(op.get("verdict") or "").replace(" ", "-"), html.escape(sentence)))
    figs = []
    if req is not None:
        fig, axes = plt.subplots(1, 3, figsize=(kp.COLUMN_IN * 2, kp.COLUMN_IN * 0.75))
        ks.plot_latency_cdfs(axes, [("requests", req, ks.slo_of(result))])
        ks.slo_legends(axes)
        fig.tight_layout()
        figs.append(figure_html("fig-latency", fig, "TTFT, TPOT and end-to-end latency: share of requests (CDF)"))
        fig, ax = plt.subplots(figsize=(kp.COLUMN_IN, kp.COLUMN_IN * 0.7))
        ks.plot_queue(ax, req)
        fig.tight_layout()
        figs.append(figure_html("fig-queue", fig, "Requests waiting and running over time"))
    fig, ax = plt.subplots(figsize=(kp.COLUMN_IN, kp.COLUMN_IN * 0.8))
    ks.plot_prefix_hits(ax, result, req)
    fig.tight_layout()
    figs.append(figure_html("fig-prefix", fig, "Prompt tokens: prefix-cache hits per tier and computed"))
    fig, ax = plt.subplots(figsize=(kp.COLUMN_IN, kp.COLUMN_IN * 0.8))
    ks.plot_tier_occupancy(ax, result)
    fig.tight_layout()
    figs.append(figure_html("fig-occupancy", fig, "KV bytes per tier, time-averaged and peak"))
    return parts, figs


def run_page(result, run_dir, timeline):
    if kr.is_serving(result):
        return serving_run_page(result, run_dir, timeline)
    m = result["metrics"]
    cfg = result.get("config", {})
    parts = ["<h1>kvtier run: %s</h1>" % html.escape(kp.describe_config(cfg)), provenance_html(result)]
    if cfg.get("description"):
        parts.append("<p>%s</p>" % html.escape(cfg["description"]))
    parts.append('<h2>Key figures</h2><div id="key-figures">%s</div>' % table_html(["figure", "value"], key_figures(m)))
    tiers = kr.ordered_tiers(result)
    if tiers:
        parts.append("<h2>Tiers</h2>" + table_html(
            ["tier", "hit rate", "peak", "capacity"],
            [(t, fmt(v.get("hit_rate")), kr.human_bytes(v.get("peak_bytes")), kr.human_bytes(v.get("capacity_bytes")))
             for t, v in tiers.items()]))
    links = {n: v for n, v in m.get("links", {}).items() if isinstance(v, dict) and v.get("bytes")}
    if links:
        parts.append("<h2>Links</h2>" + table_html(
            ["link", "bytes", "busy"],
            [(n, kr.human_bytes(v.get("bytes")), fmt(v.get("busy_fraction"), 100, 3) + " %") for n, v in sorted(links.items())]))
    parts += ke.energy_section(result, table_html, fmt)
    figs = ke.energy_figures(result, figure_html, plt, kp.COLUMN_IN)
    if tiers:
        fig, ax = plt.subplots(figsize=(kp.COLUMN_IN, kp.COLUMN_IN * 0.6))
        ax.bar(list(tiers), [v.get("hit_rate") or 0 for v in tiers.values()], color="C0")
        ax.set_ylabel("share of block accesses served")
        ax.set_ylim(0, 1.05)
        ax.set_title("hit rate per tier")
        fig.tight_layout()
        figs.append(figure_html("fig-tiers", fig, "Hit rate per tier"))
    steps = os.path.join(run_dir, "steps.csv") if run_dir else None
    if timeline and os.path.isfile(timeline):
        names, _, slices = kp.load_timeline(timeline)
        step_times = kp.read_steps(steps) if steps and os.path.isfile(steps) else None
        if step_times:  # the decode steps, where compute and transfers overlap
            fig, _ = kp.plot_timeline(names, slices, step_times[0][0] * 1e3, step_times[-1][1] * 1e3)
            caption = "Timeline of the decode steps: compute and transfers per device and link"
        else:
            fig, _ = kp.plot_timeline(names, slices)
            caption = "Timeline: compute and transfers per device and link"
        figs.append(figure_html("fig-timeline", fig, caption))
        if step_times:
            fig = kp.plot_breakdown(kp.step_breakdown(names, slices, step_times))
            figs.append(figure_html("fig-breakdown", fig, "Time per decode step: compute, transfer, scoring, stall"))
    parts.append('<h2>Figures</h2><div id="figures">%s</div>' % "\n".join(figs))
    parts.append("<h2>Resolved configuration</h2><details open><summary>config</summary><pre id=\"config\">%s</pre>"
                 "</details>" % html.escape(json.dumps(cfg, indent=2, sort_keys=True)))
    return parts


def serving_run_page(result, run_dir, timeline):
    m = result["metrics"]
    cfg = result.get("config", {})
    parts = ["<h1>kvtier serving run: %s</h1>" % html.escape(kp.describe_config(cfg)), provenance_html(result)]
    if cfg.get("description"):
        parts.append("<p>%s</p>" % html.escape(cfg["description"]))
    sections, figs = serving_sections(result, run_dir)
    parts += sections
    links = {n: v for n, v in m.get("links", {}).items() if isinstance(v, dict) and v.get("bytes")}
    if links:
        parts.append("<h2>Links</h2>" + table_html(
            ["link", "bytes", "busy"],
            [(n, kr.human_bytes(v.get("bytes")), fmt(v.get("busy_fraction"), 100, 3) + " %") for n, v in sorted(links.items())]))
    if timeline and os.path.isfile(timeline):
        names, _, slices = kp.load_timeline(timeline)
        fig, _ = kp.plot_timeline(names, slices)
        figs.append(figure_html("fig-timeline", fig, "Timeline: iterations, loads and writes per device and link"))
    parts.append('<h2>Figures</h2><div id="figures">%s</div>' % "\n".join(figs))
    parts.append("<h2>Resolved configuration</h2><details open><summary>config</summary><pre id=\"config\">%s</pre>"
                 "</details>" % html.escape(json.dumps(cfg, indent=2, sort_keys=True)))
    return parts


def serving_sweep_figures(good, axes, title):
    """A serving sweep: latency against load when an axis is the load
    (serving.time_scale, an arrival rate), else TTFT p50 against the first axis."""
    figures = []
    load = next((a for a in axes if a.endswith("time_scale") or a.endswith("rate_per_s")), None)
    if load:
        fixed = [r for r in good if all(r.get(a) == good[0].get(a) for a in axes if a != load)]
        slo = ks.slo_of(fixed[0]["_result"]) if "_result" in fixed[0] else (None, None)
        fig, _ = ks.plot_load(fixed, load, slo, title)
        figures.append(figure_html("fig-load", fig, "Latency and SLO attainment against load (%s)" % load))
    elif axes:
        fixed = [r for r in good if all(r.get(a) == good[0].get(a) for a in axes[2:])]
        fig, _ = kp.plot_lines(fixed, axes[0], "ttft_s.p50", axes[1] if len(axes) > 1 else None, title)
        figures.append(figure_html("fig-lines", fig, "TTFT p50 against %s" % axes[0]))
    return figures


def sweep_page(path):
    rows, title = kp.load_sweep_table(path)
    axes = kp.sweep_axes(rows)
    if not path.endswith(".csv"):
        axes.sort()
    tps = "decode_tokens_per_s"
    parts = ["<h1>kvtier sweep: %s</h1>" % html.escape(title or os.path.basename(path))]
    manifest = None
    mpath = path[:-6] + ".manifest.json" if path.endswith(".jsonl") else path[:-4] + ".manifest.json"
    if os.path.isfile(mpath):
        with open(mpath, encoding="utf-8") as f:
            manifest = json.load(f)
        parts.append("<p>%s</p>" % html.escape(
            "%d points done, %d failed; kvtier %s, commit %s, SimGrid %s; %s, %s, %.1f s" % (
                manifest.get("points_done", 0), manifest.get("points_failed", 0), manifest.get("kvtier_version"),
                manifest.get("git_commit"), manifest.get("simgrid_version"), manifest.get("host"),
                manifest.get("started_utc"), manifest.get("wall_s", 0))))
    good = [r for r in rows if isinstance(r.get(tps), (int, float))]
    figures = []
    if good:
        best = max(good, key=lambda r: r[tps])
        kf = [("points", str(len(rows))), ("axes", ", ".join(axes) or "none"),
              ("best " + kp.metric_info(tps)[0], fmt(best[tps])),
              ("best point", ", ".join("%s=%s" % (a, best.get(a)) for a in axes) or "the only one")]
        if "mean_step_latency_s" in best:
            kf.append(("TPOT at the best point (ms)", fmt(best["mean_step_latency_s"], 1e3)))
        parts.append('<h2>Key figures</h2><div id="key-figures">%s</div>' % table_html(["figure", "value"], kf))
        if "ttft_s.p50" in best:
            figures += serving_sweep_figures(good, axes, title)
        elif len(axes) >= 2:
            fixed = [r for r in good if all(r.get(a) == best.get(a) for a in axes[2:])]
            fig, _ = kp.plot_heatmap(fixed, axes[0], axes[1], tps, title)
            figures.append(figure_html("fig-heatmap", fig, "%s over %s x %s" % (kp.metric_info(tps)[0], axes[0], axes[1])))
        if axes and "ttft_s.p50" not in best:
            fixed = [r for r in good if all(r.get(a) == best.get(a) for a in axes[2:])]
            fig, _ = kp.plot_lines(fixed, axes[0], "mean_step_latency_s", axes[1] if len(axes) > 1 else None, title)
            figures.append(figure_html("fig-lines", fig, "TPOT against %s" % axes[0]))
        if len(good) > 1 and len(good) <= 40 and all("_result" in r for r in good):
            results = [r["_result"] for r in good]
            labels = kr.run_labels(results)
            fig, _ = kp.plot_bars(results, labels[0], tps)
            figures.append(figure_html("fig-bars", fig, "Speedup over point %s" % good[0].get("index")))
    parts.append('<h2>Figures</h2><div id="figures">%s</div>' % "\n".join(figures))
    cols = ["index"] + axes + [c for c in (tps, "mean_step_latency_s", "ttft_s", "attention_recall", "ttft_s.p50",
                                           "tpot_s.p50", "e2e_s.p50", "slo_attainment") if c in rows[0]]
    parts.append("<h2>Points</h2>" + table_html(cols, [[fmt(r.get(c)) if c not in axes and c != "index" else r.get(c)
                                                        for c in cols] for r in rows]))
    cfg = rows[0].get("_result", {}).get("config") if "_result" in rows[0] else None
    if cfg:
        parts.append("<h2>Resolved configuration (point %s)</h2><details open><summary>config</summary>"
                     "<pre id=\"config\">%s</pre></details>" % (rows[0].get("index"),
                                                                 html.escape(json.dumps(cfg, indent=2, sort_keys=True))))
    elif manifest:
        parts.append("<h2>Sweep</h2><pre id=\"config\">%s</pre>" % html.escape(json.dumps(manifest, indent=2)))
    return parts


def replay_page(path, obj):
    """A `kvtier replay -o` result: what was replayed, the best policy at
    each capacity, the hit ratio and miss ratio curves, every run."""
    runs = obj["runs"]
    warm = obj.get("warmup_requests", 0) or 0
    parts = ["<h1>kvtier cache replay: %s</h1>" % html.escape(os.path.basename(str(obj.get("trace", path)))),
             "<p>%s</p>" % html.escape("kvtier %s; %s requests, %s block references, %s distinct %s-token blocks of "
                                       "%s; %s semantics, %s tiers%s" % (
                                           obj.get("kvtier_version", "?"), "{:,}".format(obj.get("requests", 0)),
                                           "{:,}".format(obj.get("references", 0)),
                                           "{:,}".format(obj.get("distinct_blocks", 0)), obj.get("block_tokens"),
                                           obj.get("model"), obj.get("semantics"),
                                           "inclusive" if obj.get("inclusive") else "exclusive",
                                           "; the first %d requests warm the cache, uncounted" % warm if warm else ""))]
    by_cap = {}
    for r in runs:
        top = r["tiers"][0]
        pol = top["policy"]["name"] if isinstance(top["policy"], dict) else str(top["policy"])
        by_cap.setdefault(top["capacity_blocks"], []).append((r.get("miss_ratio", 1 - r["hit_ratio"]), pol))
    kf = [("runs", str(len(runs)))]
    for cap in sorted(by_cap):
        # Belady knows the future: the bound, beside the best policy that does not.
        online = [x for x in by_cap[cap] if x[1] != "belady"]
        bound = [m for m, p in by_cap[cap] if p == "belady"]
        if online:
            miss, pol = min(online)
            kf.append(("least misses at %s blocks" % "{:,}".format(cap), "%s (miss ratio %s%s)" % (
                pol, fmt(miss), "; Belady %s" % fmt(bound[0]) if bound else "")))
        elif bound:
            kf.append(("Belady at %s blocks" % "{:,}".format(cap), "miss ratio %s" % fmt(bound[0])))
    parts.append('<h2>Key figures</h2><div id="key-figures">%s</div>' % table_html(["figure", "value"], kf))
    figs = []
    series, cap = kp.load_capacity(path)
    unbounded, title = kp.capacity_context(path)
    fig, _ = kp.plot_capacity(series, cap, title, unbounded)
    figs.append(figure_html("fig-capacity", fig, "Hit ratio against cache capacity, a line per policy"))
    if all("miss_ratio" in r and "byte_miss_ratio" in r for r in runs):
        series, cap = kp.load_mrc(path)
        cold, title = kp.mrc_context(path)
        fig, _ = kp.plot_mrc(series, cap, title, cold)
        figs.append(figure_html("fig-mrc", fig, "Miss ratio and byte miss ratio against cache capacity"))
    parts.append('<h2>Figures</h2><div id="figures">%s</div>' % "\n".join(figs))
    rows = []
    for r in runs:
        top = r["tiers"][0]
        pol = top["policy"]["name"] if isinstance(top["policy"], dict) else str(top["policy"])
        rows.append((pol, "{:,}".format(top["capacity_blocks"]), kr.human_bytes(top.get("capacity_bytes")),
                     fmt(r["hit_ratio"]), fmt(r.get("miss_ratio")), fmt(r.get("byte_miss_ratio")),
                     r.get("method", "")))
    parts.append('<h2>Runs</h2><div id="runs">%s</div>' % table_html(
        ["policy", "capacity (blocks)", "capacity", "hit ratio", "miss ratio", "byte miss ratio", "method"], rows))
    options = {k: v for k, v in obj.items() if k not in ("runs", "resources")}
    parts.append("<h2>Resolved configuration</h2><details open><summary>replay</summary><pre id=\"config\">%s</pre>"
                 "</details>" % html.escape(json.dumps(options, indent=2, sort_keys=True)))
    return parts


def replay_result(path):
    """The JSON of `kvtier replay -o`, or None for anything else."""
    if not path.endswith(".json") or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None  # load_result says what is wrong with it
    return obj if isinstance(obj, dict) and obj.get("command") == "replay" and isinstance(obj.get("runs"), list) else None


def render(inp, timeline=None):
    if os.path.isdir(inp):
        run_dir = inp
        inp = os.path.join(inp, "result.json")
    else:
        run_dir = os.path.dirname(inp)
    replay = replay_result(inp)
    if inp.endswith(".jsonl") or inp.endswith(".csv"):
        parts = sweep_page(inp)
    elif replay is not None:
        parts = replay_page(inp, replay)
    else:
        result = kr.load_result(inp)
        if timeline is None:
            guess = os.path.join(run_dir, "timeline.json")
            timeline = guess if os.path.isfile(guess) else None
        parts = run_page(result, run_dir, timeline)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvtier report</title>"
            "<style>%s</style><script>%s</script></head><body>\n%s\n</body></html>\n" % (CSS, SCRIPT, "\n".join(parts)))


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line with exit status 2, under the name the user typed."""

    def error(self, message):
        kr.die(self.prog, message)


def main(argv=None):
    kp.setup_style()
    # `kvtier report` runs this script as `--as kvtier`: its errors then read "kvtier: error: ...".
    prog = PROG
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--as"] and len(argv) >= 2:
        prog, argv = argv[1], argv[2:]
    ap = _Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="result.json, a run folder, a sweep's .jsonl or .csv, or kvtier replay's JSON")
    ap.add_argument("-o", "--output", default="report.html")
    ap.add_argument("--timeline", help="the run's --timeline file (default: timeline.json beside result.json)")
    args = ap.parse_args(argv)
    try:
        kr.check_writable(args.output, "-o")
        page = render(args.input, args.timeline)
        kr.write_text_atomic(args.output, page)
    except kr.ResultError as e:
        kr.die(prog, e)
    except OSError as e:
        kr.die(prog, "-o %s: cannot write: %s" % (args.output, e.strerror or e))
    print("%s: wrote %s" % (prog, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
