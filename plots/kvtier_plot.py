#!/usr/bin/env python3
"""The figures a paper needs from kvtier runs and sweeps, one entry point:

  kvtier_plot.py heatmap   SWEEP --x PATH --y PATH [--metric M]      a metric over two axes, best point marked
  kvtier_plot.py lines     SWEEP --x PATH [--by PATH] [--metric M]   a metric against one axis, a line per variant
  kvtier_plot.py bars      RESULT... --baseline NAME [--metric M]    speedup of each system over a baseline
  kvtier_plot.py capacity  REPLAY.json|CSV                           hit rate against cache capacity, a line per policy
  kvtier_plot.py timeline  TIMELINE.json [--start MS --end MS]       device and link lanes: compute and transfer overlap
  kvtier_plot.py breakdown TIMELINE.json STEPS.csv                   stacked time per decode step
  kvtier_plot.py breakdown --energy RESULT...                        joules per generated token, split by device

SWEEP is a sweep's JSON-lines file or its CSV (docs/sweep.md); RESULT a
result.json or a sweep's JSON-lines file. Every figure is written as PNG and
PDF: -o STEM gives STEM.png and STEM.pdf (default: next to the first input,
named after the kind). Sized for one column of a two-column paper (3.4 in
wide). docs/plots.md has the details.
"""

import argparse
import csv
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kvtier_results as kr  # noqa: E402  (sets the Agg backend)
import kvtier_energy as ke  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

PROG = "kvtier_plot.py"
COLUMN_IN = 3.4  # one column of a two-column paper

# Metrics: label with unit, scale from the stored SI value, and which way is better.
METRICS = {
    "decode_tokens_per_s": ("decode throughput (tokens/s)", 1.0, "max"),
    "mean_step_latency_s": ("TPOT, mean (ms)", 1e3, "min"),
    "p50_step_latency_s": ("TPOT, p50 (ms)", 1e3, "min"),
    "p99_step_latency_s": ("TPOT, p99 (ms)", 1e3, "min"),
    "ttft_s": ("TTFT (s)", 1.0, "min"),
    "attention_recall": ("attention recall", 1.0, "max"),
    "gpu_busy_fraction": ("GPU busy (%)", 100.0, "max"),
    "simulated_time_s": ("simulated time (s)", 1.0, "min"),
    "fetched_bytes": ("bytes fetched to the GPU (GB)", 1e-9, "min"),
    "ssd_bytes_written": ("SSD bytes written (GB)", 1e-9, "min"),
}
# Config paths that sweeps vary, as axis labels with units.
AXES = {
    "policies.prefetch.depth": "prefetch depth (layers ahead)",
    "workload.batch": "batch (sequences)",
    "workload.context_tokens": "context (tokens)",
    "workload.decode_steps": "decode steps",
    "workload.block_tokens": "block (tokens)",
    "policies.evaluation.beta": "β: share of scoring on the CPU",
    "policies.evaluation.alpha": "kept fraction of KV blocks",
    "policies.placement.alpha": "α: HKM time pinning",
    "policies.eviction.alpha": "α: HKM time pinning",
    "sim.seed": "seed",
}


def metric_info(name):
    if name in METRICS:
        return METRICS[name]
    if name.endswith("hit_rate"):
        return (name.replace("tiers.", "").replace(".hit_rate", "") + " hit rate", 1.0, "max")
    if name.endswith("busy_fraction"):
        return (name.replace("links.", "").replace(".busy_fraction", "") + " busy (%)", 100.0, "max")
    if name.endswith("bytes"):
        return (name + " (GB)", 1e-9, "min")
    if name.endswith("_s"):
        return (name + " (s)", 1.0, "min")
    return (name, 1.0, "max")


def axis_label(path):
    return AXES.get(path, path)


def setup_style():
    plt.rcParams.update({
        "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
        "xtick.labelsize": 7, "ytick.labelsize": 7, "figure.dpi": 150, "savefig.bbox": "tight",
        "pdf.fonttype": 42,  # TrueType in PDFs, as publishers ask
    })


def save(fig, stem):
    """STEM.png and STEM.pdf, each written atomically."""
    paths = [stem + ".png", stem + ".pdf"]
    for p in paths:
        kr.save_figure(fig, p)
    plt.close(fig)
    return paths


def stem_for(args, default_name):
    if args.output:
        base, ext = os.path.splitext(args.output)
        return base if ext.lower() in (".png", ".pdf", ".svg") else args.output
    first = args.inputs[0] if getattr(args, "inputs", None) else args.input
    return os.path.join(os.path.dirname(os.path.abspath(first)), default_name)


# ---------------------------------------------------------------- sweep tables

def _number(v):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        pass
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _flat(obj, prefix, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flat(v, prefix + k + ".", out)
    else:
        out[prefix[:-1]] = obj


def load_sweep_table(path):
    """Rows {column: value} of a sweep, from its CSV or JSON-lines file (the same
    columns: index, key, the override paths, the flattened metrics), and a title
    naming the configuration."""
    title = None
    rows = []
    if path.endswith(".csv"):
        try:
            with open(path, newline="", encoding="utf-8") as f:
                for r in csv.DictReader(f):
                    rows.append({k: _number(v) if v != "" else None for k, v in r.items()})
        except FileNotFoundError:
            raise kr.ResultError("%s: no such file" % path)
        except UnicodeDecodeError as e:
            raise kr.ResultError("%s: byte %d: not UTF-8 text (expected a sweep's CSV)" % (path, e.start))
        except (OSError, csv.Error) as e:
            raise kr.ResultError("%s: cannot read: %s" % (path, e))
        manifest = path[:-4] + ".manifest.json"
        if os.path.isfile(manifest):
            try:
                with open(manifest, encoding="utf-8") as f:
                    title = "sweep " + json.load(f).get("sweep_name", "")
            except (OSError, ValueError):
                pass
    else:
        # A sweep line wraps its result: {"index", "key", "overrides", "result"}.
        text = kr._read_text(path)
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise kr.ResultError("%s:%d: invalid JSON: %s" % (path, n, e.msg))
            except (ValueError, RecursionError) as e:
                raise kr.ResultError("%s:%d: cannot read its JSON: %s" % (path, n, " ".join(str(e).split())[:200]))
            res = kr.check_result(kr._unwrap(obj), "%s:%d" % (path, n))
            row = {"_result": res}
            _flat(res["metrics"], "", row)
            if isinstance(obj, dict) and "result" in obj:
                row.update(obj.get("overrides", {}))
                row["index"] = obj.get("index")
                row["key"] = obj.get("key")
            rows.append(row)
        cfg = rows[0]["_result"].get("config", {}) if rows else {}
        if isinstance(cfg, dict):
            title = describe_config(cfg)
    if not rows:
        raise kr.ResultError("%s: no sweep points" % path)
    rows.sort(key=lambda r: (r.get("index") if isinstance(r.get("index"), int) else 0))
    return rows, title


def describe_config(cfg):
    """'hifc_paper: OPT-30B, 16K context' style: what a figure was computed on."""
    parts = [cfg.get("name", "run")]
    m = cfg.get("model", {})
    w = cfg.get("workload", {})
    bits = []
    if isinstance(m, dict) and m.get("name"):
        bits.append(str(m["name"]))
    if isinstance(w, dict):
        if w.get("context_tokens"):
            bits.append("%g K context" % (w["context_tokens"] / 1024.0))
        if w.get("decode_steps"):
            bits.append("%d steps" % w["decode_steps"])
    return parts[0] + (": " + ", ".join(bits) if bits else "")


def column(rows, name, where):
    if not any(name in r for r in rows):
        known = sorted(k for k in rows[0] if not k.startswith("_"))
        raise kr.ResultError("%s: no column %r; columns: %s" % (where, name, ", ".join(known)))
    return [r.get(name) for r in rows]


def _sorted_unique(vals):
    out = []
    for v in vals:
        if v not in out:
            out.append(v)
    try:
        return sorted(out)
    except TypeError:
        return out


# ---------------------------------------------------------------- kinds

def plot_heatmap(rows, x, y, metric, title=None, best=None):
    xs, ys, vs = column(rows, x, "--x"), column(rows, y, "--y"), column(rows, metric, "--metric")
    label, scale, better = metric_info(metric)
    better = best or better
    ux, uy = _sorted_unique(xs), _sorted_unique(ys)
    grid = [[float("nan")] * len(ux) for _ in uy]
    for a, b, v in zip(xs, ys, vs):
        if isinstance(v, (int, float)):
            grid[uy.index(b)][ux.index(a)] = v * scale
    fig, ax = plt.subplots(figsize=(COLUMN_IN, COLUMN_IN * 0.8))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(ux)))
    ax.set_xticklabels([str(v) for v in ux])
    ax.set_yticks(range(len(uy)))
    ax.set_yticklabels([str(v) for v in uy])
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(label)
    finite = [(v, i, j) for i, rowv in enumerate(grid) for j, v in enumerate(rowv) if not math.isnan(v)]
    if finite:
        lo, hi = min(v for v, _, _ in finite), max(v for v, _, _ in finite)
        for v, i, j in finite:
            shade = (v - lo) / (hi - lo) if hi > lo else 0.5
            ax.text(j, i, "%.3g" % v, ha="center", va="center", fontsize=6,
                    color="black" if shade > 0.6 else "white")
        # The first best cell in row order, so ties name the same point as a table sorted by index would.
        bv, bi, bj = (max if better == "max" else min)(finite, key=lambda c: c[0])
        ax.add_patch(plt.Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
        ax.set_title("%s\nbest (%s): %.4g at %s=%s, %s=%s" % (
            title or label, better, bv, x.split(".")[-1], ux[bj], y.split(".")[-1], uy[bi]))
    fig.tight_layout()
    return fig, grid


def plot_lines(rows, x, metric, by=None, title=None):
    xs, vs = column(rows, x, "--x"), column(rows, metric, "--metric")
    bys = column(rows, by, "--by") if by else [None] * len(rows)
    label, scale, _ = metric_info(metric)
    fig, ax = plt.subplots(figsize=(COLUMN_IN, COLUMN_IN * 0.7))
    series = {}
    for variant in _sorted_unique(bys):
        pts = sorted((a, v * scale) for a, v, b in zip(xs, vs, bys) if b == variant and isinstance(v, (int, float)))
        shown = os.path.splitext(os.path.basename(variant))[0] if isinstance(variant, str) and \
            variant.endswith(".json") else variant  # a preset swapped in: its file's stem
        name = "%s=%s" % (by.split(".")[-1], shown) if by else label
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=name)
        series[name] = pts
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(label)
    if all(isinstance(v, int) for v in xs):
        ax.set_xticks(_sorted_unique(xs))
    ax.grid(True, linewidth=0.3)
    if by:
        ax.legend(title=axis_label(by), frameon=False)
    ax.set_title(title or label)
    fig.tight_layout()
    return fig, series


def plot_bars(results, baseline, metric, title=None):
    labels = kr.run_labels(results)
    names = [kr.config_name(r) for r in results]
    if baseline in labels:
        base = labels.index(baseline)
    elif baseline in names:
        base = names.index(baseline)
    else:
        raise kr.ResultError("--baseline %r: not among the runs (%s)" % (baseline, ", ".join(labels)))
    label, _, better = metric_info(metric)
    vals = [kr.metric(r, metric) for r in results]
    b = vals[base]
    speedup = [(v / b if better == "max" else b / v) if b and v else float("nan") for v in vals]
    # Long run labels get a wider figure rather than a squeezed plot.
    width = max(COLUMN_IN, 2.0 + 0.055 * max(len(l) for l in labels))
    fig, ax = plt.subplots(figsize=(width, max(1.2, 0.28 * len(results) + 0.6)))
    order = list(range(len(results)))
    bars = ax.barh(range(len(order)), [speedup[i] for i in order],
                   color=["0.6" if i == base else "C0" for i in order])
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([labels[i] for i in order])
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.6)
    for rect, i in zip(bars, order):
        ax.text(rect.get_width(), rect.get_y() + rect.get_height() / 2, " %.2f×" % speedup[i], va="center",
                fontsize=7)
    ax.set_xlabel("speedup over %s\n(%s)" % (labels[base], label))
    ax.set_xlim(0, max(s for s in speedup if not math.isnan(s)) * 1.25)
    ax.set_title(title or "speedup in %s" % label)
    fig.tight_layout()
    return fig, dict(zip(labels, speedup))


def load_capacity(path):
    """Hit ratio against capacity per policy, from `kvtier replay`'s JSON (-o)
    or CSV (--csv: one row per run and tier; the top tier's rows are used, its
    capacity being the one that varies), or any CSV with columns
    policy,capacity,hit_ratio. Returns ({policy: [(capacity, hit_ratio)]},
    capacity column name)."""
    if path.endswith(".json"):
        obj = kr._load_json(path)
        runs = obj.get("runs") if isinstance(obj, dict) else None
        if not isinstance(runs, list) or not runs:
            raise kr.ResultError("%s: not a kvtier replay result (no \"runs\")" % path)
        out = {}
        for i, r in enumerate(runs):
            try:
                top = r["tiers"][0]
                pol = top["policy"]["name"] if isinstance(top["policy"], dict) else str(top["policy"])
                out.setdefault(pol, []).append((float(top["capacity_blocks"]), float(r["hit_ratio"])))
            except (KeyError, IndexError, TypeError, ValueError):
                raise kr.ResultError("%s: runs[%d]: expected tiers[0].policy, tiers[0].capacity_blocks and hit_ratio"
                                     % (path, i))
        return out, "capacity_blocks"
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise kr.ResultError("%s: no such file" % path)
    if not rows:
        raise kr.ResultError("%s: no rows" % path)
    cols = rows[0].keys()
    cap = next((c for c in ("capacity", "capacity_blocks", "capacity_bytes") if c in cols), None) or \
        next((c for c in cols if c.startswith("capacity")), None)
    hit = next((c for c in ("hit_ratio", "hit_rate") if c in cols), None)
    if "policy" not in cols or not cap or not hit:
        raise kr.ResultError("%s: expected columns policy,capacity,hit_ratio; found %s" % (path, ",".join(cols)))
    if "tier" in cols:
        top = rows[0]["tier"]
        rows = [r for r in rows if r["tier"] == top]
    out = {}
    for n, r in enumerate(rows, 2):
        try:
            out.setdefault(r["policy"], []).append((float(r[cap]), float(r[hit])))
        except (TypeError, ValueError):
            raise kr.ResultError("%s:%d: capacity and hit ratio must be numbers" % (path, n))
    return out, cap


def plot_capacity(series, cap_col="capacity", title=None):
    fig, ax = plt.subplots(figsize=(COLUMN_IN, COLUMN_IN * 0.7))
    out = {}
    for policy in sorted(series):
        pts = sorted(series[policy])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=policy)
        out[policy] = pts
    caps = [c for pts in out.values() for c, _ in pts if c > 0]
    if caps and max(caps) / min(caps) >= 20:
        ax.set_xscale("log")
    unit = cap_col[len("capacity"):].strip("_") or "blocks"
    ax.set_xlabel("cache capacity (%s)" % unit)
    ax.set_ylabel("hit ratio")
    ax.set_ylim(0, 1.02)
    ax.grid(True, linewidth=0.3)
    ax.legend(title="policy", frameon=False)
    ax.set_title(title or "hit ratio against cache capacity")
    fig.tight_layout()
    return fig, out


def load_timeline(path):
    obj = kr._load_json(path)
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise kr.ResultError("%s: not a trace-event timeline (no traceEvents)" % path)
    names, procs = {}, {}
    for e in obj["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
    slices = {}
    for e in obj["traceEvents"]:
        if e.get("ph") == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"] * 1e-3, e["dur"] * 1e-3, e["name"]))
    return names, procs, slices


def _kind(name):
    return name.split(" ")[0]


def plot_timeline(names, slices, start_ms=None, end_ms=None, title=None):
    # A link's extra lanes ("<link> #2") right below the link.
    first = {}
    for k in sorted(slices):
        first.setdefault((k[0], names.get(k, "").split(" #")[0]), k[1])
    tracks = sorted(slices, key=lambda k: (k[0], first[(k[0], names.get(k, "").split(" #")[0])], k[1]))
    kinds = sorted({_kind(n) for k in tracks for _, _, n in slices[k]})
    colours = {k: "C%d" % (i % 10) for i, k in enumerate(kinds)}
    fig, ax = plt.subplots(figsize=(COLUMN_IN * 2, max(1.5, 0.22 * len(tracks) + 0.8)))
    shown = {}
    for row, k in enumerate(tracks):
        spans = [(t, d, n) for t, d, n in slices[k]
                 if (start_ms is None or t + d >= start_ms) and (end_ms is None or t <= end_ms)]
        for kind in kinds:
            bars = [(t, max(d, 1e-6)) for t, d, n in spans if _kind(n) == kind]
            if bars:
                ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours[kind], label=kind)
                shown.setdefault(kind, 0)
                shown[kind] += len(bars)
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([names.get(k, str(k)) for k in tracks])
    ax.invert_yaxis()
    if start_ms is not None or end_ms is not None:
        lo = start_ms if start_ms is not None else ax.get_xlim()[0]
        hi = end_ms if end_ms is not None else ax.get_xlim()[1]
        ax.set_xlim(lo, hi)
    ax.set_xlabel("simulated time (ms)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title or "timeline: compute and transfers per device and link")
    fig.tight_layout()
    return fig, shown


def _covered(intervals, a, b):
    """Length of [a, b) covered by the union of intervals [(t0, t1)]."""
    total, cur = 0.0, a
    for t0, t1 in sorted(intervals):
        t0, t1 = max(t0, cur), min(t1, b)
        if t1 > t0:
            total += t1 - t0
            cur = t1
    return total


def _subtract(intervals, holes):
    """intervals minus holes, both lists of (t0, t1)."""
    out = []
    holes = sorted(holes)
    for a, b in sorted(intervals):
        cur = a
        for h0, h1 in holes:
            if h1 <= cur or h0 >= b:
                continue
            if h0 > cur:
                out.append((cur, h0))
            cur = max(cur, h1)
        if cur < b:
            out.append((cur, b))
    return out


def step_breakdown(names, slices, steps):
    """Per decode step (start_s, end_s from steps.csv): GPU compute; time the GPU
    waited while a transfer was in flight; waited while only scoring ran; and
    the remaining stall. The four add up to the step's latency."""
    gpu = [k for k, n in names.items() if k[0] == 1 and n.endswith("compute")]
    comp = [(t * 1e-3, (t + d) * 1e-3) for k in gpu for t, d, _ in slices.get(k, [])]
    xfer = [(t * 1e-3, (t + d) * 1e-3) for k, xs in slices.items() if k[0] == 2 for t, d, _ in xs]
    score = [(t * 1e-3, (t + d) * 1e-3) for k, xs in slices.items() if k[0] == 1 and k not in gpu
             for t, d, n in xs if _kind(n) in ("score", "compress", "decompress")]
    rows = []
    for a, b in steps:
        c = _covered(comp, a, b)
        idle = _subtract([(a, b)], comp)
        w_x = sum(_covered(xfer, i0, i1) for i0, i1 in idle)
        idle2 = _subtract(idle, xfer)
        w_s = sum(_covered(score, i0, i1) for i0, i1 in idle2)
        rows.append({"compute": c, "transfer": w_x, "scoring": w_s, "stall": max(0.0, (b - a) - c - w_x - w_s)})
    return rows


def read_steps(path):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return [(float(r["start_s"]), float(r["end_s"])) for r in csv.DictReader(f)]
    except FileNotFoundError:
        raise kr.ResultError("%s: no such file" % path)
    except (KeyError, ValueError, TypeError) as e:
        raise kr.ResultError("%s: not a kvtier steps.csv (%s)" % (path, e))


def plot_breakdown(rows, title=None):
    parts = ["compute", "transfer", "scoring", "stall"]
    fig, ax = plt.subplots(figsize=(COLUMN_IN, COLUMN_IN * 0.7))
    bottom = [0.0] * len(rows)
    x = list(range(len(rows)))
    for i, p in enumerate(parts):
        h = [r[p] * 1e3 for r in rows]
        ax.bar(x, h, bottom=bottom, width=0.9 if len(rows) < 40 else 1.0, label=p, color="C%d" % i)
        bottom = [b + v for b, v in zip(bottom, h)]
    ax.set_xlabel("decode step")
    ax.set_ylabel("time (ms)")
    ax.legend(frameon=False, ncol=4, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    ax.set_title(title or "time per decode step")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- command line

def plot_pareto(path, title=None):
    """A search's trials (kvtier search's search.json): two objectives
    against each other, the Pareto front joined; one objective against the
    trial number with the best so far. Infeasible trials are hollow."""
    try:
        with open(path) as f:
            doc = json.load(f)
        objs, trials = doc["objectives"], doc["trials"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise kr.ResultError("%s: not a kvtier search's search.json (%s)" % (path, e))
    done = [t for t in trials if t.get("state") == "complete"]
    front = set(doc.get("pareto", []))
    fig, ax = plt.subplots(figsize=(3.6, 2.6))
    names = [o["metric"] for o in objs]
    if len(objs) >= 2:
        xy = lambda ts: ([t["values"][0] for t in ts], [t["values"][1] for t in ts])
        ok = [t for t in done if t.get("feasible")]
        bad = [t for t in done if not t.get("feasible")]
        ax.scatter(*xy(bad), s=12, facecolors="none", edgecolors="0.6", label="infeasible")
        ax.scatter(*xy(ok), s=12, color="C0", label="feasible")
        pf = sorted([t for t in done if t["trial"] in front], key=lambda t: t["values"][0])
        ax.plot(*xy(pf), "-o", color="C3", ms=4, label="Pareto front")
        ax.set_xlabel(axis_label(names[0]) + " (%s)" % objs[0]["direction"][:3])
        ax.set_ylabel(axis_label(names[1]) + " (%s)" % objs[1]["direction"][:3])
    else:
        sign = 1 if objs[0]["direction"] == "maximize" else -1
        for feas, style in ((False, dict(facecolors="none", edgecolors="0.6", label="infeasible")),
                            (True, dict(color="C0", label="feasible"))):
            ts = [t for t in done if bool(t.get("feasible")) == feas]
            ax.scatter([t["trial"] for t in ts], [t["values"][0] for t in ts], s=12, **style)
        best, xs, ys = None, [], []
        for t in sorted(done, key=lambda t: t["trial"]):
            if t.get("feasible") and (best is None or sign * t["values"][0] > sign * best):
                best = t["values"][0]
            if best is not None:
                xs.append(t["trial"])
                ys.append(best)
        ax.step(xs, ys, where="post", color="C3", label="best feasible so far")
        ax.set_xlabel("trial")
        ax.set_ylabel(axis_label(names[0]) + " (%s)" % objs[0]["direction"][:3])
    ax.legend(frameon=False)
    ax.set_title(title or "%s: %d trials" % (doc.get("name", ""), len(trials)))
    return fig, ax


def main(argv=None):
    setup_style()
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="kind", required=True)

    def common(p):
        p.add_argument("-o", "--output", help="output stem: writes STEM.png and STEM.pdf")
        p.add_argument("--title", help="figure title (default: the configuration and metric)")

    p = sub.add_parser("heatmap", help="a metric over two sweep axes, best point marked")
    p.add_argument("input")
    p.add_argument("--x", required=True, help="config path on the x axis (a sweep axis)")
    p.add_argument("--y", required=True, help="config path on the y axis")
    p.add_argument("--metric", default="decode_tokens_per_s")
    p.add_argument("--best", choices=["max", "min"], help="which end is best (default: by metric)")
    common(p)
    p = sub.add_parser("lines", help="a metric against one sweep axis, a line per variant")
    p.add_argument("input")
    p.add_argument("--x", required=True)
    p.add_argument("--by", help="config path whose values get a line each")
    p.add_argument("--metric", default="mean_step_latency_s")
    common(p)
    p = sub.add_parser("bars", help="speedup of each run over a baseline")
    p.add_argument("inputs", nargs="+", help="result.json files or sweep JSON-lines files")
    p.add_argument("--baseline", required=True, help="the baseline run's label or config name")
    p.add_argument("--metric", default="decode_tokens_per_s")
    common(p)
    p = sub.add_parser("capacity", help="hit ratio against cache capacity, a line per policy")
    p.add_argument("input", help="kvtier replay's JSON (-o) or CSV (--csv), or a CSV with columns policy,capacity,hit_ratio")
    common(p)
    p = sub.add_parser("timeline", help="per device and link lanes from a --timeline file")
    p.add_argument("input")
    p.add_argument("--start", type=float, help="window start (ms of simulated time)")
    p.add_argument("--end", type=float, help="window end (ms)")
    common(p)
    p = sub.add_parser("pareto", help="a kvtier search's trials and Pareto front (its search.json)")
    p.add_argument("input", help="search.json written by kvtier search")
    common(p)
    p = sub.add_parser("breakdown", help="stacked time per decode step: compute, transfer, scoring, stall")
    p.add_argument("input", nargs="?", help="the run's --timeline file")
    p.add_argument("steps", nargs="?", help="the run's steps.csv (--set sim.step_csv=true)")
    p.add_argument("--energy", nargs="+", metavar="RESULT", help="instead: result.json or sweep JSON-lines files, energy by device")
    common(p)
    args = ap.parse_args(argv)

    try:
        if args.kind == "heatmap":
            rows, title = load_sweep_table(args.input)
            fig, _ = plot_heatmap(rows, args.x, args.y, args.metric, args.title or title, args.best)
        elif args.kind == "lines":
            rows, title = load_sweep_table(args.input)
            fig, _ = plot_lines(rows, args.x, args.metric, args.by, args.title or title)
        elif args.kind == "bars":
            results = [r for path in args.inputs for _, r in kr.load_results(path)]
            fig, _ = plot_bars(results, args.baseline, args.metric, args.title)
        elif args.kind == "capacity":
            series, cap = load_capacity(args.input)
            fig, _ = plot_capacity(series, cap, args.title)
        elif args.kind == "timeline":
            names, _, slices = load_timeline(args.input)
            fig, _ = plot_timeline(names, slices, args.start, args.end, args.title)
        elif args.kind == "pareto":
            fig, _ = plot_pareto(args.input, args.title)
        elif getattr(args, "energy", None):
            args.input = args.energy[0]  # the figure goes next to the first result
            results = [r for path in args.energy for _, r in kr.load_results(path)]
            fig = ke.plot_energy_breakdown(ke.energy_rows(results), plt, COLUMN_IN, args.title)
        else:
            if not (args.input and args.steps):
                raise kr.ResultError("breakdown: expected a --timeline file and its steps.csv, or --energy RESULT...")
            names, _, slices = load_timeline(args.input)
            fig = plot_breakdown(step_breakdown(names, slices, read_steps(args.steps)), args.title)
        paths = save(fig, stem_for(args, "energy" if getattr(args, "energy", None) else args.kind))
    except kr.ResultError as e:
        kr.die(PROG, e)
    for p in paths:
        print("%s: wrote %s" % (PROG, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
