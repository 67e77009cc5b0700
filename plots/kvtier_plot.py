#!/usr/bin/env python3
"""The figures a paper needs from kvtier runs and sweeps, one entry point:

  kvtier_plot.py heatmap   SWEEP --x PATH --y PATH [--metric M]      a metric over two axes, best point marked
  kvtier_plot.py lines     SWEEP --x PATH [--by PATH] [--metric M]   a metric against one axis, a line per variant
  kvtier_plot.py bars      RESULT... --baseline NAME [--metric M]    speedup of each system over a baseline
  kvtier_plot.py capacity  REPLAY.json|CSV                           hit rate against cache capacity, a line per policy
  kvtier_plot.py mrc       REPLAY.json|CSV [--bytes]                 miss ratio and byte miss ratio curves, a line per policy
  kvtier_plot.py timeline  TIMELINE.json [--start MS --end MS]       device and link lanes: compute and transfer overlap
  kvtier_plot.py breakdown TIMELINE.json STEPS.csv                   stacked time per decode step
  kvtier_plot.py breakdown --energy RESULT...                        joules per generated token, split by device
  kvtier_plot.py latency   RUN... (folder, result.json, requests.csv)  serving: TTFT, TPOT, end-to-end CDFs
  kvtier_plot.py load      SWEEP --x serving.time_scale              serving: latency against load, SLOs, knee
  kvtier_plot.py occupancy RUN (folder, result.json, iterations.csv) serving: the queue and KV per tier over time

SWEEP is a sweep's JSON-lines file or its CSV (docs/sweep.md); RESULT a
result.json or a sweep's JSON-lines file. Every figure is written as PNG and
PDF: -o STEM gives STEM.png and STEM.pdf (default: next to the first input,
named after the kind). Sized for one column of a two-column paper (3.4 in
wide). docs/plots.md has the details.
"""

import argparse
import csv
import difflib
import json
import math
import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kvtier_results as kr  # noqa: E402  (sets the Agg backend)
import kvtier_energy as ke  # noqa: E402
import kvtier_serving as ks  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402

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
    "serving.time_scale": "arrival time scale (x the trace's gaps)",
    "serving.max_running": "running sequences (at most)",
    "serving.max_batched_tokens": "tokens per iteration (at most)",
    "hardware.devices.dram.capacity_GB": "DRAM (GB)",
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


def wrap_title(text, width=60):
    """A title on as many lines as a column-wide figure needs."""
    return "\n".join(textwrap.fill(line, width) for line in str(text).split("\n"))


def axis_label(path):
    return AXES.get(path, path)


def setup_style():
    plt.rcParams.update({
        "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
        "xtick.labelsize": 7, "ytick.labelsize": 7, "figure.dpi": 150, "savefig.bbox": "tight",
        "pdf.fonttype": 42,  # TrueType in PDFs, as publishers ask
    })


def save(fig, stem, dpi=None):
    """STEM.png and STEM.pdf, each written atomically; `dpi` sets the PNG's
    resolution (the PDF is vector)."""
    paths = [stem + ".png", stem + ".pdf"]
    for p in paths:
        kr.save_figure(fig, p, dpi=dpi)
    plt.close(fig)
    return paths


def stem_for(args, default_name):
    if args.output:
        base, ext = os.path.splitext(args.output)
        return base if ext.lower() in (".png", ".pdf", ".svg") else args.output
    first = args.inputs[0] if getattr(args, "inputs", None) else args.input
    if os.path.isdir(first):  # a run folder: the figure goes in it
        return os.path.join(first, default_name)
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
        title = sweep_title(path, first_config(path[:-4] + ".jsonl"))
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
        title = sweep_title(path, cfg if isinstance(cfg, dict) else None)
    if not rows:
        raise kr.ResultError("%s: no sweep points" % path)
    rows.sort(key=lambda r: (r.get("index") if isinstance(r.get("index"), int) else 0))
    return rows, title


def describe_config(cfg, name=None):
    """'hifc_paper: OPT-30B, 16K context, a100_80gb_dram_nvme' style: what a
    figure was computed on (a serving run: model, hardware, the request stream)."""
    m = cfg.get("model", {})
    w = cfg.get("workload", {})
    hw = cfg.get("hardware", {})
    bits = []
    if isinstance(m, dict) and m.get("name"):
        bits.append(str(m["name"]))
    if isinstance(cfg.get("serving"), dict):
        req = cfg["serving"].get("requests", {})
        if isinstance(req, dict) and isinstance(req.get("path"), str):
            bits.append(os.path.splitext(os.path.basename(req["path"]))[0])
        elif isinstance(req, dict) and req.get("kind"):
            bits.append("%s requests" % req["kind"])
    elif isinstance(w, dict):
        if w.get("context_tokens"):
            bits.append("%g K context" % (w["context_tokens"] / 1024.0))
        if w.get("decode_steps"):
            bits.append("%d steps" % w["decode_steps"])
    if isinstance(hw, dict) and hw.get("name"):
        bits.append(str(hw["name"]))
    head = name or cfg.get("name", "run")
    return head + (": " + ", ".join(bits) if bits else "")


def first_config(jsonl):
    """The resolved config of a sweep's first line (its JSON-lines file), or None."""
    try:
        with open(jsonl, encoding="utf-8") as f:
            obj = json.loads(f.readline())
        cfg = kr._unwrap(obj).get("config")
        return cfg if isinstance(cfg, dict) else None
    except (OSError, ValueError, AttributeError):
        return None


def sweep_title(path, cfg):
    """'sweep NAME: model, context, hardware' from the manifest beside the
    sweep's files and the first point's resolved config."""
    name = None
    base = path[:-4] if path.endswith(".csv") else (path[:-6] if path.endswith(".jsonl") else path)
    try:
        with open(base + ".manifest.json", encoding="utf-8") as f:
            name = json.load(f).get("sweep_name")
    except (OSError, ValueError, AttributeError):
        pass
    name = "sweep " + name if isinstance(name, str) and name else None
    if cfg:
        return describe_config(cfg, name)
    return name


SECTIONS = ("hardware", "model", "workload", "policies", "sim", "serving")


def sweep_axes(rows):
    """The sweep's axes: config-path columns whose value differs between points."""
    cols = []
    for r in rows:
        for k in r:
            if k.split(".")[0] in SECTIONS and k not in cols:
                cols.append(k)
    return [c for c in cols if len({json.dumps(r.get(c), sort_keys=True) for r in rows}) > 1]


def apply_where(rows, where):
    """Rows whose columns hold the values of --where PATH=VALUE (repeatable)."""
    for cond in where or []:
        if "=" not in cond:
            raise kr.ResultError("--where %r: expected PATH=VALUE, e.g. workload.batch=8" % cond)
        k, v = cond.split("=", 1)
        column(rows, k, "--where")
        want = _number(v)
        kept = [r for r in rows if r.get(k) == want or str(r.get(k)) == v]
        if not kept:
            values = ", ".join(str(x) for x in _sorted_unique([r.get(k) for r in rows]))
            raise kr.ResultError("--where %s: no point has %s=%s (values: %s)" % (cond, k, v, values))
        rows = kept
    return rows


def check_one_line_each(rows, x, by):
    """A line plot draws one value per x on each line: any other axis that
    varies must be held by --where or given to --by, or lines zigzag."""
    other = [a for a in sweep_axes(rows) if a not in (x, by)]
    if other:
        hint = "; ".join("%s in %s" % (a, ", ".join(str(v) for v in _sorted_unique([r.get(a) for r in rows])))
                         for a in other)
        raise kr.ResultError("lines --x %s: the sweep also varies %s; give --by %s or hold it with --where %s=VALUE"
                             % (x, hint, other[0], other[0]))


def column(rows, name, where):
    if not any(name in r for r in rows):
        known = sorted(k for k in rows[0] if not k.startswith("_"))
        axes = [k for k in known if k.split(".")[0] in SECTIONS]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = ("did you mean %s? " % " or ".join(close)) if close else ""
        raise kr.ResultError("%s: no column %r; %sthe sweep's axes: %s; metrics: %d columns such as %s" % (
            where, name, hint, ", ".join(axes) or "none",
            len(known) - len(axes), ", ".join(k for k in known if k in METRICS or k.endswith(".p50"))[:200]))
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
            wrap_title(title or label), better, bv, x.split(".")[-1], ux[bj], y.split(".")[-1], uy[bi]))
    fig.tight_layout()
    return fig, grid


def set_log_axes(ax, xs, ys, log_x=None, log_y=None):
    """Log axes where asked (True/False), or by default where positive values
    span two decades or more (a linear axis would flatten the small ones)."""
    if log_x if log_x is not None else ks.spans_decades([v for v in xs if isinstance(v, (int, float))]):
        ax.set_xscale("log")
    if log_y if log_y is not None else ks.spans_decades([v for v in ys if isinstance(v, (int, float))]):
        ax.set_yscale("log")


def legend_outside(ax, **kw):
    """The legend off the data: right of the axes, or below them in columns
    when a column-wide figure has more entries than its side can take."""
    n = len(kw["labels"]) if "labels" in kw else len(ax.get_legend_handles_labels()[1])
    if ax.figure.get_figwidth() <= 4.0 and n > 4:
        kw.pop("title", None)  # the axis label above says what the entries are
        ax.figure.set_figheight(ax.figure.get_figheight() + 0.16 * math.ceil(n / 3.0))  # room for its rows
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3, frameon=False, **kw)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False, **kw)


def plot_lines(rows, x, metric, by=None, title=None, log_x=None, log_y=None):
    xs, vs = column(rows, x, "--x"), column(rows, metric, "--metric")
    bys = column(rows, by, "--by") if by else [None] * len(rows)
    check_one_line_each(rows, x, by)
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
    set_log_axes(ax, xs, [v for pts in series.values() for _, v in pts], log_x, log_y)
    if all(isinstance(v, int) for v in xs) and ax.get_xscale() == "linear":
        ax.set_xticks(_sorted_unique(xs))
    ax.grid(True, linewidth=0.3, which="both")
    if by:
        legend_outside(ax, title=axis_label(by))
    ax.set_title(wrap_title(title or label))
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
    ax.set_xlabel("%s\n(%s)" % (wrap_title("speedup over %s" % labels[base], 30), label))
    ax.set_xlim(0, max(s for s in speedup if not math.isnan(s)) * 1.25)
    ax.set_title(wrap_title(title or "speedup in %s" % label))
    fig.tight_layout()
    return fig, dict(zip(labels, speedup))


def _replay_json_points(path, unit, fields, hint=""):
    """From `kvtier replay`'s JSON (-o): {policy: [(top tier's capacity,
    run[field] for each field)]}, the capacity in blocks or GiB."""
    obj = kr._load_json(path)
    runs = obj.get("runs") if isinstance(obj, dict) else None
    if not isinstance(runs, list) or not runs:
        raise kr.ResultError("%s: not a kvtier replay result (no \"runs\"): expected the JSON of "
                             "`kvtier replay --out`" % path)
    key = "capacity_bytes" if unit == "GiB" else "capacity_blocks"
    out = {}
    for i, r in enumerate(runs):
        try:
            top = r["tiers"][0]
            pol = top["policy"]["name"] if isinstance(top["policy"], dict) else str(top["policy"])
            cap = float(top[key]) / (2 ** 30 if unit == "GiB" else 1)
            out.setdefault(pol, []).append((cap,) + tuple(float(r[f]) for f in fields))
        except (KeyError, IndexError, TypeError, ValueError):
            raise kr.ResultError("%s: runs[%d]: expected tiers[0].policy, tiers[0].%s and %s%s"
                                 % (path, i, key, " and ".join(fields), hint))
    return out


def load_capacity(path, unit="blocks"):
    """Hit ratio against capacity per policy, from `kvtier replay`'s JSON (-o)
    or CSV (--csv: one row per run and tier; the top tier's rows are used, its
    capacity being the one that varies), or any CSV with columns
    policy,capacity,hit_ratio. Returns ({policy: [(capacity, hit_ratio)]},
    capacity column name); unit "GiB" reads a replay JSON's capacity_bytes."""
    if path.endswith(".json"):
        return _replay_json_points(path, unit, ("hit_ratio",)), ("capacity_GiB" if unit == "GiB" else "capacity_blocks")
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


def capacity_context(path):
    """From a replay JSON: the unbounded cache's hit ratio (every reference
    after a block's first; block semantics, one pass) and a title naming the
    trace; (None, None) otherwise."""
    if not path.endswith(".json"):
        return None, None
    r = kr._load_json(path)
    refs, distinct = r.get("references", 0), r.get("distinct_blocks", 0)
    unbounded = None
    if refs and distinct and r.get("repeat", 1) == 1 and r.get("semantics") == "block":
        unbounded = (refs - distinct) / float(refs)
    title = "%s: %s semantics" % (os.path.basename(str(r.get("trace", ""))), r.get("semantics", "")) \
        if r.get("trace") else None
    return unbounded, title


# Every figure gives a policy the same colour (kvtier_plot.py capacity, plots/capacity.py, the report).
POLICY_COLOURS = ["lru", "fifo", "clock", "sieve", "arc", "s3fifo", "twoq", "lfu", "belady"]


def policy_colour(name):
    if name in POLICY_COLOURS:
        return "C%d" % POLICY_COLOURS.index(name)
    return "C9" if not name else "C%d" % (sum(name.encode()) % 10)


def load_mrc(path, unit="blocks"):
    """Miss ratio and byte miss ratio against the top tier's capacity, per
    policy, from `kvtier replay`'s JSON (-o) or CSV (--csv). Returns
    ({policy: [(capacity, miss_ratio, byte_miss_ratio)]}, capacity column)."""
    need = ("miss_ratio", "byte_miss_ratio")
    if path.endswith(".json"):
        return (_replay_json_points(path, unit, need, " (a replay of kvtier 0.x before them? run it again)"),
                "capacity_GiB" if unit == "GiB" else "capacity_blocks")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise kr.ResultError("%s: no such file" % path)
    if not rows:
        raise kr.ResultError("%s: no rows" % path)
    cols = list(rows[0].keys())
    cap = "capacity_bytes" if unit == "GiB" else "capacity_blocks"
    missing = [c for c in ("policy", "tier", cap) + need if c not in cols]
    if missing:
        raise kr.ResultError("%s: expected kvtier replay's --csv (columns policy, tier, %s, miss_ratio, "
                             "byte_miss_ratio); missing %s" % (path, cap, ", ".join(missing)))
    top = rows[0]["tier"]
    out = {}
    for n, r in enumerate(rows, 2):
        if r["tier"] != top:
            continue
        try:
            c = float(r[cap]) / (2 ** 30 if unit == "GiB" else 1)
            out.setdefault(r["policy"], []).append((c, float(r[need[0]]), float(r[need[1]])))
        except (TypeError, ValueError):
            raise kr.ResultError("%s:%d: capacity and miss ratios must be numbers" % (path, n))
    return out, ("capacity_GiB" if unit == "GiB" else "capacity_blocks")


def mrc_context(path):
    """From a replay JSON: the miss ratio no capacity avoids (each block's
    first reference, when every reference is counted from a cold cache) and a
    title naming the trace and any warm-up; (None, None) otherwise."""
    if not path.endswith(".json"):
        return None, None
    r = kr._load_json(path)
    refs, distinct = r.get("references", 0), r.get("distinct_blocks", 0)
    warm = r.get("warmup_requests", 0) or 0
    cold = None
    if refs and distinct and r.get("repeat", 1) == 1 and not warm:
        cold = distinct / float(refs)
    title = None
    if r.get("trace"):
        title = "%s: %s semantics" % (os.path.basename(str(r.get("trace", ""))), r.get("semantics", ""))
        if warm:
            title += ", %d warm-up requests" % warm
    return cold, title


def plot_mrc(series, cap_col="capacity_blocks", title=None, cold=None, log_x=None, log_y=None):
    """Two panels over the same capacities: the share of block references
    that miss, and the share of KV bytes that miss (a request's last block
    holds only its prompt's remaining tokens)."""
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(COLUMN_IN, COLUMN_IN * 1.15))
    out = {}
    handles = {}
    for policy in sorted(series):
        pts = sorted(series[policy])
        out[policy] = pts
        for ax, k in zip(axes, (1, 2)):
            handles[policy], = ax.plot([p[0] for p in pts], [p[k] for p in pts], marker="o", markersize=3,
                                       label=policy, color=policy_colour(policy))
    if cold is not None:
        handles["cold misses"] = axes[0].axhline(cold, color="grey", linestyle="--", linewidth=1,
                                                 label="cold misses")
    caps = [c for pts in out.values() for c, _, _ in pts if c > 0]
    if log_x if log_x is not None else (caps and max(caps) / min(caps) >= 20):
        axes[1].set_xscale("log")
        # Labels at 1, 2 and 5 of each decade: a curve over one or two decades keeps its numbers.
        axes[1].xaxis.set_major_locator(mticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axes[1].xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: "%g" % v))
    values = [v for pts in out.values() for p in pts for v in p[1:] if v > 0] + ([cold] if cold else [])
    for ax, label in zip(axes, ("miss ratio", "byte miss ratio")):
        if log_y if log_y is not None else (values and max(values) / min(values) >= 100):
            ax.set_yscale("log")
        elif values:  # the data's range (ratios sit high on a cache's curve), padded, within [0, 1]
            lo, hi = min(values), max(values)
            pad = max(0.08 * (hi - lo), 0.01)
            ax.set_ylim(max(0.0, lo - pad), min(1.0, hi + pad))
        ax.set_ylabel(label)
        ax.grid(True, linewidth=0.3, which="both")
    unit = cap_col[len("capacity"):].strip("_") or "blocks"
    axes[1].set_xlabel("cache capacity (%s)" % unit)
    # Legend outside, lowest miss ratio first.
    order = sorted(handles, key=lambda n: min(m for _, m, _ in out[n]) if n in out else (cold or 0.0))
    legend_outside(axes[1], handles=[handles[n] for n in order], labels=order, title="policy")
    axes[0].set_title(wrap_title(title or "miss ratio against cache capacity"))
    fig.tight_layout()
    return fig, out


def plot_capacity(series, cap_col="capacity", title=None, unbounded=None, log_x=None, log_y=None,
                  figsize=(COLUMN_IN, COLUMN_IN * 0.7)):
    fig, ax = plt.subplots(figsize=figsize)
    out = {}
    lines = {}
    for policy in sorted(series):
        pts = sorted(series[policy])
        lines[policy], = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=policy,
                                 color=policy_colour(policy))
        out[policy] = pts
    top = max([h for pts in out.values() for _, h in pts] + [unbounded or 0.0])
    if unbounded is not None:
        lines["unbounded cache"] = ax.axhline(unbounded, color="grey", linestyle="--", linewidth=1,
                                              label="unbounded cache")
    caps = [c for pts in out.values() for c, _ in pts if c > 0]
    if log_x if log_x is not None else (caps and max(caps) / min(caps) >= 20):
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    unit = cap_col[len("capacity"):].strip("_") or "blocks"
    ax.set_xlabel("cache capacity (%s)" % unit)
    ax.set_ylabel("hit ratio")
    if not log_y:
        ax.set_ylim(0, min(1.02, top * 1.12) if top > 0 else 1.02)  # the data's range, not [0, 1]
    ax.grid(True, linewidth=0.3, which="both")
    # Legend outside, best policy first.
    order = sorted(lines, key=lambda n: -(max(h for _, h in out[n]) if n in out else unbounded))
    legend_outside(ax, handles=[lines[n] for n in order], labels=order, title="policy")
    ax.set_title(wrap_title(title or "hit ratio against cache capacity"))
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


def decode_window(slices, steps=2):
    """(start_ms, end_ms) of `steps` decode steps after the first (which still
    drains prefill's writes), from the GPU's "step N L<l>" slices: from the
    end of the step before to the end of the last one shown, so the
    transfers that lead into a step are in the window. (None, None), the
    whole run, when the timeline has no steps (a serving run's iterations)."""
    ends, starts = {}, {}
    for k in slices:
        for t, d, n in slices[k]:
            parts = n.split()
            if len(parts) >= 2 and parts[0] == "step" and parts[1].isdigit():
                i = int(parts[1])
                ends[i] = max(ends.get(i, t + d), t + d)
                starts[i] = min(starts.get(i, t), t)
    if not ends:
        return None, None
    ids = sorted(ends)
    first = 1 if len(ids) > steps else 0
    shown = ids[first:first + steps]
    start = ends[ids[first - 1]] if first > 0 else starts[shown[0]]
    return start, ends[shown[-1]]


def plot_timeline(names, slices, start_ms=None, end_ms=None, title=None, min_px=1.5):
    """One lane per stream and link. A slice narrower than `min_px` pixels at
    the figure's resolution is drawn `min_px` wide, so that hundreds of short
    slices (CPU scoring) show as marks instead of vanishing."""
    # A link's extra lanes ("<link> #2") right below the link.
    first = {}
    for k in sorted(slices):
        first.setdefault((k[0], names.get(k, "").split(" #")[0]), k[1])
    tracks = sorted(slices, key=lambda k: (k[0], first[(k[0], names.get(k, "").split(" #")[0])], k[1]))
    kinds = sorted({_kind(n) for k in tracks for _, _, n in slices[k]})
    colours = {k: "C%d" % (i % 10) for i, k in enumerate(kinds)}
    width_in = COLUMN_IN * 2
    fig, ax = plt.subplots(figsize=(width_in, max(1.5, 0.22 * len(tracks) + 0.8)))
    all_t = [(t, t + d) for k in tracks for t, d, _ in slices[k]]
    lo = start_ms if start_ms is not None else min((a for a, _ in all_t), default=0.0)
    hi = end_ms if end_ms is not None else max((b for _, b in all_t), default=1.0)
    # Data units per pixel: the plot area is about 80% of the figure's width.
    min_w = min_px * (hi - lo) / (0.8 * width_in * plt.rcParams["figure.dpi"]) if hi > lo else 1e-6
    shown = {}
    for row, k in enumerate(tracks):
        spans = [(t, d, n) for t, d, n in slices[k] if t + d >= lo and t <= hi]
        for kind in kinds:
            bars = [(t, max(d, min_w)) for t, d, n in spans if _kind(n) == kind]
            if bars:
                ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours[kind], edgecolor="none", label=kind)
                shown.setdefault(kind, 0)
                shown[kind] += len(bars)
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([names.get(k, str(k)) for k in tracks])
    ax.invert_yaxis()
    if hi > lo:
        ax.set_xlim(lo, hi)
    ax.set_xlabel("simulated time (ms)")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(wrap_title(title or "timeline: compute and transfers per device and link", 100))
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


def slo_from_sweep(path):
    """A sweep CSV's SLO limits, from the first point of its JSON-lines file."""
    cfg = first_config(path[:-4] + ".jsonl") if path.endswith(".csv") else None
    return ks.slo_of({"config": cfg}) if cfg else (None, None)


def plot_latency(inputs, title=None, log_x=None):
    """TTFT, TPOT and end-to-end CDFs of one or more serving runs side by side
    (two columns wide), a line per run, the SLO limits dashed."""
    runs, results = [], []
    for path in inputs:
        req = ks.Requests(ks.requests_beside(path))
        res = ks.result_beside(path)
        results.append(res)
        runs.append([None, req, ks.slo_of(res) if res else (None, None)])
    labels = kr.run_labels(results) if all(results) else [os.path.basename(os.path.dirname(os.path.abspath(
        ks.requests_beside(p)))) for p in inputs]
    for r, label in zip(runs, labels):
        r[0] = label
    fig, axes = plt.subplots(1, 3, figsize=(COLUMN_IN * 2, COLUMN_IN * 0.75))
    handles, names = ks.plot_latency_cdfs(axes, runs, log_x)
    for ax in axes[1:]:
        ax.set_ylabel("")
    if len(runs) > 1:
        keep = [(h, n) for h, n in zip(handles, names) if not n.startswith("SLO")]
        fig.legend([h for h, _ in keep], [n for _, n in keep], loc="lower center", ncol=min(4, len(keep)),
                   frameon=False, bbox_to_anchor=(0.5, -0.02))
    ks.slo_legends(axes)
    head = title or (describe_config(results[0].get("config", {})) if results[0] else "serving latency")
    if len(runs) == 1 and results[0]:
        head += "\n" + ks.describe_operating_point(ks.operating_point(results[0], runs[0][1]))
    fig.suptitle(wrap_title(head, 110))
    fig.tight_layout(rect=(0, 0.08 if len(runs) > 1 else 0, 1, 1))
    return fig, {r[0]: r[1] for r in runs}


def plot_occupancy(path, title=None):
    """A serving run's queue and each tier's KV over time, from the
    iterations.csv it wrote (`--set sim.step_csv=true`), stacked on one
    time axis; the title and tier capacities from result.json beside it."""
    it_path = ks.iterations_beside(path)
    if not os.path.isfile(it_path):
        result = ks.result_beside(path) if os.path.exists(path) else None
        if result is not None and "instances" in result.get("metrics", {}):
            raise kr.ResultError("%s: a cluster run: its instances write no iterations.csv (plot_run.py draws its "
                                 "queue from requests.csv)" % path)
        raise kr.ResultError("%s: no iterations.csv beside it: run the serving config with --set sim.step_csv=true"
                             % path)
    it = ks.Iterations(it_path)
    result = ks.result_beside(it_path)
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(COLUMN_IN, COLUMN_IN * 1.25))
    ks.plot_queue_iterations(axes[0], it)
    axes[0].set_xlabel("")
    axes[0].set_title("")
    handles, labels = ks.plot_occupancy_over_time(axes[1], it, result)
    axes[1].set_title("")
    legend_outside(axes[1], handles=handles, labels=labels, title="tier")
    head = title or (ks.title_of(result) if result else os.path.basename(it_path))
    fig.suptitle(wrap_title(head, 50) + ks.binned_note(it), fontsize=8)
    fig.tight_layout()
    return fig, it


def positive_dpi(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if not 20 <= v <= 2400:
        raise argparse.ArgumentTypeError("expected dots per inch from 20 to 2400, got %r" % text)
    return v


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
        p.add_argument("--dpi", type=positive_dpi, default=300, help="PNG resolution in dots per inch (default 300)")
        p.add_argument("--log-x", action="store_true", default=None,
                       help="logarithmic x axis (default: where values span two decades)")
        p.add_argument("--log-y", action="store_true", default=None,
                       help="logarithmic y axis (default: where values span two decades)")
        p.add_argument("--where", action="append", metavar="PATH=VALUE",
                       help="sweeps: keep only the points with this value (repeatable), holding other axes")

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
    p = sub.add_parser("mrc", help="miss ratio and byte miss ratio against cache capacity, a line per policy")
    p.add_argument("input", help="kvtier replay's JSON (-o) or CSV (--csv)")
    p.add_argument("--bytes", action="store_true", help="capacity axis in GiB of KV instead of blocks")
    common(p)
    p = sub.add_parser("timeline", help="per device and link lanes from a --timeline file")
    p.add_argument("input")
    p.add_argument("--start", type=float, help="window start (ms of simulated time)")
    p.add_argument("--end", type=float, help="window end (ms)")
    p.add_argument("--steps", type=int, default=2,
                   help="without --start/--end: show this many decode steps after the first (default 2)")
    common(p)
    p = sub.add_parser("pareto", help="a kvtier search's trials and Pareto front (its search.json)")
    p.add_argument("input", help="search.json written by kvtier search")
    common(p)
    p = sub.add_parser("breakdown", help="stacked time per decode step: compute, transfer, scoring, stall")
    p.add_argument("input", nargs="?", help="the run's --timeline file")
    p.add_argument("steps", nargs="?", help="the run's steps.csv (--set sim.step_csv=true)")
    p.add_argument("--energy", nargs="+", metavar="RESULT", help="instead: result.json or sweep JSON-lines files, energy by device")
    common(p)
    p = sub.add_parser("latency", help="serving: TTFT, TPOT and end-to-end CDFs, a line per run")
    p.add_argument("inputs", nargs="+", help="serving run folders, their result.json or requests.csv")
    common(p)
    p = sub.add_parser("load", help="serving sweep: latency percentiles and SLO attainment against load")
    p.add_argument("input", help="a sweep of serving runs (.csv or .jsonl)")
    p.add_argument("--x", required=True, help="the load axis: serving.time_scale or an arrival rate_per_s path")
    common(p)
    p = sub.add_parser("occupancy", help="serving: running/waiting requests and KV per tier over time")
    p.add_argument("input", help="a serving run folder, its result.json or iterations.csv (--set sim.step_csv=true)")
    common(p)
    args = ap.parse_args(argv)

    try:
        if args.kind in ("heatmap", "lines", "load"):
            rows, title = load_sweep_table(args.input)
            rows = apply_where(rows, args.where)
        elif args.where:
            raise kr.ResultError("--where: only for sweeps (heatmap, lines, load)")
        if args.kind == "heatmap":
            fig, _ = plot_heatmap(rows, args.x, args.y, args.metric, args.title or title, args.best)
        elif args.kind == "lines":
            fig, _ = plot_lines(rows, args.x, args.metric, args.by, args.title or title, args.log_x, args.log_y)
        elif args.kind == "load":
            slo = ks.slo_of(rows[0]["_result"]) if "_result" in rows[0] else slo_from_sweep(args.input)
            fig, _ = ks.plot_load(rows, args.x, slo, args.title or title, args.log_x, args.log_y)
        elif args.kind == "occupancy":
            fig, _ = plot_occupancy(args.input, args.title)
        elif args.kind == "latency":
            fig, _ = plot_latency(args.inputs, args.title, args.log_x)
        elif args.kind == "bars":
            results = [r for path in args.inputs for _, r in kr.load_results(path)]
            fig, _ = plot_bars(results, args.baseline, args.metric, args.title)
        elif args.kind == "capacity":
            series, cap = load_capacity(args.input)
            unbounded, ctitle = capacity_context(args.input)
            fig, _ = plot_capacity(series, cap, args.title or ctitle, unbounded, args.log_x, args.log_y)
        elif args.kind == "mrc":
            series, cap = load_mrc(args.input, "GiB" if args.bytes else "blocks")
            cold, ctitle = mrc_context(args.input)
            fig, _ = plot_mrc(series, cap, args.title or ctitle, cold, args.log_x, args.log_y)
        elif args.kind == "timeline":
            names, _, slices = load_timeline(args.input)
            start, end = args.start, args.end
            if start is None and end is None:
                start, end = decode_window(slices, args.steps)
            fig, _ = plot_timeline(names, slices, start, end, args.title)
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
        paths = save(fig, stem_for(args, "energy" if getattr(args, "energy", None) else args.kind), getattr(args, "dpi", None))
    except kr.ResultError as e:
        kr.die(PROG, e)
    for p in paths:
        print("%s: wrote %s" % (PROG, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
