"""Serving runs as figures: per-request latency distributions, the queue over
time, prefix hits per tier, the operating point against the SLOs, and
latency against load over a sweep.

A serving run (a config with a `serving` section, docs/serving.md) writes
result.json and requests.csv (one line per request: id, arrival_s,
input_tokens, output_tokens, queueing_s, ttft_s, tpot_s, e2e_s,
computed_prompt_tokens, preemptions, hit_tokens_<tier>...). Everything here
is computed from those two files, and from iterations.csv where the run wrote
it (`--set sim.step_csv=true`: one line per scheduler iteration with the
queues and each tier's KV bytes after it).
"""

import csv
import math
import os
import textwrap

import kvtier_results as kr

import numpy as np

import matplotlib.pyplot as plt

# The SLO attainment a deployment is sized for, drawn as a reference line:
# DistServe (OSDI'24) sizes a deployment for 90% SLO attainment.
TARGET_ATTAINMENT = 0.9

LATENCIES = (("ttft_s", "TTFT", "s", 1.0), ("tpot_s", "TPOT", "ms", 1e3), ("e2e_s", "end to end", "s", 1.0))
COLOURS = {"ttft_s": "C0", "tpot_s": "C1", "e2e_s": "C2", "queueing_s": "C3"}


class Requests:
    """requests.csv as columns: arrival_s, queueing_s, ttft_s, tpot_s, e2e_s,
    output_tokens, input_tokens, computed_prompt_tokens (floats), and
    hits {tier: [tokens]} from the hit_tokens_<tier> columns."""

    NEEDED = ("arrival_s", "input_tokens", "output_tokens", "queueing_s", "ttft_s", "tpot_s", "e2e_s")
    # A cluster run names the instance (its GPU) that served each request, and
    # the one that decoded it where prefill and decode are apart (empty when
    # the request never reached one): kept as text, in `text`.
    TEXT = ("instance", "decode_instance")

    def __init__(self, path):
        self.path = path
        cols = {}
        try:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                header = reader.fieldnames or []
                missing = [c for c in self.NEEDED if c not in header]
                if missing:
                    raise kr.ResultError("%s: not a kvtier requests.csv (no column %s)" % (path, ", ".join(missing)))
                for c in header:
                    cols[c] = []
                for n, row in enumerate(reader, 2):
                    for c in header:
                        if c in self.TEXT:
                            cols[c].append(row[c] or "")
                            continue
                        try:
                            cols[c].append(float(row[c]))
                        except (TypeError, ValueError):
                            raise kr.ResultError("%s:%d: column %s: expected a number, got %r" % (path, n, c, row[c]))
        except FileNotFoundError:
            raise kr.ResultError("%s: no such file (a serving run writes requests.csv beside result.json unless "
                                 "serving.request_csv is false)" % path)
        except UnicodeDecodeError as e:
            raise kr.ResultError("%s: byte %d: not UTF-8 text (expected a kvtier requests.csv)" % (path, e.start))
        except (OSError, csv.Error) as e:
            raise kr.ResultError("%s: cannot read: %s" % (path, e))
        if not cols.get("arrival_s"):
            raise kr.ResultError("%s: no requests" % path)
        self.text = {c: cols.pop(c) for c in self.TEXT if c in cols}
        self.cols = cols
        self.hits = {c[len("hit_tokens_"):]: v for c, v in cols.items() if c.startswith("hit_tokens_")}

    def __len__(self):
        return len(self.cols["arrival_s"])

    def __getitem__(self, name):
        return self.cols[name]

    def tpot(self):
        """TPOT of the requests that have one (two output tokens or more), as metrics.tpot_s counts them."""
        return [t for t, o in zip(self.cols["tpot_s"], self.cols["output_tokens"]) if o >= 2]

    def finish(self):
        if "finish_s" in self.cols:
            return list(self.cols["finish_s"])
        return [a + e for a, e in zip(self.cols["arrival_s"], self.cols["e2e_s"])]  # a requests.csv without finish_s


class Iterations:
    """iterations.csv as columns (floats): start_s, end_s, running, waiting,
    swapped, and kv {tier: [bytes]} from the kv_bytes_<tier> columns."""

    NEEDED = ("start_s", "end_s", "running", "waiting", "swapped")

    def __init__(self, path):
        self.path = path
        try:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.reader(f)
                header = next(reader, None) or []
                missing = [c for c in self.NEEDED if c not in header]
                if missing:
                    raise kr.ResultError("%s: not a kvtier iterations.csv (no column %s)" % (path, ", ".join(missing)))
                cols = [[] for _ in header]
                for n, row in enumerate(reader, 2):
                    if len(row) != len(header):
                        raise kr.ResultError("%s:%d: %d fields, expected %d" % (path, n, len(row), len(header)))
                    try:
                        for c, v in zip(cols, row):
                            c.append(float(v))
                    except ValueError:
                        raise kr.ResultError("%s:%d: expected numbers, got %s" % (path, n, ",".join(row)))
        except FileNotFoundError:
            raise kr.ResultError("%s: no such file (a serving run writes iterations.csv beside result.json with "
                                 "--set sim.step_csv=true)" % path)
        except UnicodeDecodeError as e:
            raise kr.ResultError("%s: byte %d: not UTF-8 text (expected a kvtier iterations.csv)" % (path, e.start))
        except (OSError, csv.Error) as e:
            raise kr.ResultError("%s: cannot read: %s" % (path, e))
        self.cols = dict(zip(header, cols))
        if not self.cols["start_s"]:
            raise kr.ResultError("%s: no iterations" % path)
        self.kv = {c[len("kv_bytes_"):]: v for c, v in self.cols.items() if c.startswith("kv_bytes_")}

    def __len__(self):
        return len(self.cols["start_s"])

    def __getitem__(self, name):
        return self.cols[name]


def csv_beside(path, name):
    """The run's CSV `name` for a result.json, a run folder or the CSV itself."""
    if os.path.isdir(path):
        return os.path.join(path, name)
    if path.endswith(".csv"):
        return path
    return os.path.join(os.path.dirname(os.path.abspath(path)), name)


def iterations_beside(path):
    """iterations.csv for a result.json, a run folder or the CSV itself."""
    return csv_beside(path, "iterations.csv")


def time_unit(span_s):
    """(scale, unit) for an axis of simulated time spanning span_s seconds."""
    return (1 / 3600.0, "h") if span_s > 3 * 3600 else ((1 / 60.0, "min") if span_s > 180 else (1, "s"))


# Up to this many iterations are drawn one step each; more (an hour of
# Mooncake is 344,000) are drawn as STEP_BINS time bins: a line at each bin's
# duration-weighted mean over the iterations that start in it, and a band
# from their least to their largest value, so peaks stay visible and the
# figure draws in seconds.
STEP_LIMIT = 4000
STEP_BINS = 600


def binned_steps(starts, ends, values, bins=STEP_BINS):
    """(edges, mean, lo, hi) of `values` held from starts[i] to ends[i], in
    `bins` equal time bins; lo and hi are None when every step is drawn. A
    bin in which no iteration starts lies inside a longer one: it keeps the
    previous bin's value."""
    n = len(values)
    if n <= STEP_LIMIT:
        return list(starts) + [ends[-1]], list(values), None, None
    t0, t1 = starts[0], ends[-1]
    st = np.asarray(starts, dtype=float)
    v = np.asarray(values, dtype=float)
    dur = np.maximum(np.asarray(ends, dtype=float) - st, 0.0)
    idx = np.minimum(((st - t0) / (t1 - t0) * bins).astype(int), bins - 1)
    weight = np.bincount(idx, weights=dur, minlength=bins)
    total = np.bincount(idx, weights=v * dur, minlength=bins)
    count = np.bincount(idx, minlength=bins)
    plain = np.bincount(idx, weights=v, minlength=bins)
    lo = np.full(bins, np.inf)
    hi = np.full(bins, -np.inf)
    np.minimum.at(lo, idx, v)
    np.maximum.at(hi, idx, v)
    mean = np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), plain / np.maximum(count, 1))
    last = v[0]
    for b in range(bins):
        if count[b] == 0:
            mean[b] = lo[b] = hi[b] = last
        else:
            last = v[np.searchsorted(idx, b, side="right") - 1]  # the value the bin ends holding
    edges = [t0 + (t1 - t0) * b / bins for b in range(bins + 1)]
    return edges, list(mean), list(lo), list(hi)


def binned_note(it):
    """A title's second line where the steps are binned."""
    return "\n%d bins: line the mean, band least to largest" % STEP_BINS if len(it) > STEP_LIMIT else ""


def draw_steps(ax, it, values, scale, colour, label):
    """One series of iterations.csv as steps (or binned, see STEP_LIMIT)."""
    edges, mean, lo, hi = binned_steps(it["start_s"], it["end_s"], values)
    x = [e * scale for e in edges]
    if lo is not None:
        ax.stairs(hi, x, baseline=lo, fill=True, color=colour, alpha=0.25, linewidth=0, label="_range " + label)
    ax.stairs(mean, x, color=colour, linewidth=1, label=label, baseline=None)


def plot_queue_iterations(ax, it):
    """Running, waiting and swapped requests as the scheduler planned each
    iteration (a step from its start to the next one's)."""
    scale, unit = time_unit(it["end_s"][-1] - it["start_s"][0])
    for key, colour in (("waiting", "C3"), ("running", "C0"), ("swapped", "C4")):
        ys = it[key]
        if key == "swapped" and not any(ys):
            continue  # nothing was preempted by swap: no line to read
        draw_steps(ax, it, ys, scale, colour, key)
    ax.set_xlabel("simulated time (%s)" % unit)
    ax.set_ylabel("requests")
    ax.set_ylim(bottom=0)
    ax.grid(True, linewidth=0.3)
    ax.legend(loc="best", frameon=False)
    ax.set_title("queue over time (from iterations.csv)" + binned_note(it))


def plot_occupancy_over_time(ax, it, result=None):
    """Each tier's KV bytes after every iteration, with its capacity dashed
    in the same colour where the result gives one (metrics.tiers.<name>.
    capacity_bytes); log y when the tiers span two decades."""
    scale, unit = time_unit(it["end_s"][-1] - it["start_s"][0])
    caps = {}
    if result is not None:
        for name, v in kr.ordered_tiers(result).items():
            if isinstance(v.get("capacity_bytes"), (int, float)) and v["capacity_bytes"] > 0:
                caps[name] = float(v["capacity_bytes"]) / 1e9
    values = []
    for i, (tier, ys) in enumerate(it.kv.items()):
        gb = [v / 1e9 for v in ys]
        values += [v for v in gb if v > 0]
        colour = "C%d" % i
        draw_steps(ax, it, gb, scale, colour, "%s (peak %s)" % (tier, kr.human_bytes(max(ys))))
        if tier in caps:
            ax.axhline(caps[tier], color=colour, linestyle="--", linewidth=0.8)
            values.append(caps[tier])
    if spans_decades(values):
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("simulated time (%s)" % unit)
    ax.set_ylabel("KV held (GB)")
    ax.grid(True, linewidth=0.3, which="both")
    drawn = [t for t in it.kv if t in caps]
    ax.set_title("KV per tier over time" + (" (dashed: capacity)" if drawn else "") + binned_note(it))
    handles, labels = ax.get_legend_handles_labels()
    keep = [(h, l) for h, l in zip(handles, labels) if not l.startswith("_")]
    return [h for h, _ in keep], [l for _, l in keep]


def requests_beside(path):
    """requests.csv for a result.json, a run folder or the CSV itself."""
    return csv_beside(path, "requests.csv")


def result_beside(path):
    """result.json for a run folder, a requests.csv or the result itself; None when absent."""
    if os.path.isdir(path):
        cand = os.path.join(path, "result.json")
    elif path.endswith(".csv"):
        cand = os.path.join(os.path.dirname(os.path.abspath(path)), "result.json")
    else:
        return kr.load_result(path)
    return kr.load_result(cand) if os.path.isfile(cand) else None


def slo_of(result):
    """(ttft_s, tpot_s) limits from the resolved config; None for a limit not set."""
    slo = (result or {}).get("config", {}).get("serving", {}).get("slo", {})
    out = []
    for k in ("ttft_s", "tpot_s"):
        v = slo.get(k) if isinstance(slo, dict) else None
        out.append(float(v) if isinstance(v, (int, float)) and v > 0 else None)
    return tuple(out)


def percentile(values, q):
    """Nearest rank, as metrics.ttft_s.p50 etc. are computed."""
    if not values:
        return float("nan")
    s = sorted(values)
    rank = max(1, int(math.ceil(q / 100.0 * len(s))))
    return s[min(rank, len(s)) - 1]


def median(values):
    return percentile(values, 50)


def waiting_trend(req):
    """Seconds of extra waiting per second of arrivals, from the median wait of
    the first and last fifth of the requests by arrival. About 0 when the node
    keeps up on average; about 1 - served/offered when the queue grows
    through the run (a fluid queue under constant overload)."""
    pairs = sorted(zip(req["arrival_s"], req["queueing_s"]))
    n = len(pairs)
    if n < 10:
        return float("nan")
    k = n // 5
    first, last = pairs[:k], pairs[-k:]
    dt = median([a for a, _ in last]) - median([a for a, _ in first])
    return (median([q for _, q in last]) - median([q for _, q in first])) / dt if dt > 0 else float("nan")


def operating_point(result, req=None):
    """Where a serving run operates, from its metrics (and requests.csv when
    given): SLO attainment, per limit when requests are known; the median wait
    against the median time in service; the waiting trend. `verdict` is
    'overloaded' when waits grow through the run (trend above 0.05 s per s),
    'saturated' when requests wait longer than they are served (median
    queueing above the median of e2e - queueing), otherwise 'keeps up'."""
    m = result["metrics"]
    ttft_lim, tpot_lim = slo_of(result)
    op = {"slo_ttft_s": ttft_lim, "slo_tpot_s": tpot_lim, "slo_attainment": kr.metric(result, "slo_attainment"),
          "gpu_busy_fraction": kr.metric(result, "gpu_busy_fraction"),
          "queueing_p50_s": kr.metric({"metrics": m.get("queueing_s", {})}, "p50")}
    if req is not None:
        n = float(len(req))
        if ttft_lim is not None:
            op["ttft_attainment"] = sum(1 for t in req["ttft_s"] if t <= ttft_lim) / n
        if tpot_lim is not None:
            op["tpot_attainment"] = sum(1 for t in req["tpot_s"] if t <= tpot_lim) / n
        service = [e - q for e, q in zip(req["e2e_s"], req["queueing_s"])]
        op["service_p50_s"] = median(service)
        op["queueing_p50_s"] = median(req["queueing_s"])
        op["waiting_trend"] = waiting_trend(req)
        arr = req["arrival_s"]
        span = max(arr) - min(arr)
        op["offered_requests_per_s"] = (len(arr) - 1) / span if span > 0 else float("nan")
        op["drain_s"] = max(req.finish()) - max(arr)
    trend, q, s = op.get("waiting_trend", float("nan")), op["queueing_p50_s"], op.get("service_p50_s", float("nan"))
    if math.isfinite(trend) and trend > 0.05:
        op["verdict"] = "overloaded"
    elif math.isfinite(q) and math.isfinite(s) and q > s:
        op["verdict"] = "saturated"
    elif math.isfinite(s):
        op["verdict"] = "keeps up"
    else:
        op["verdict"] = None
    return op


def describe_operating_point(op):
    """One sentence for a title or a report: the verdict and the figures behind it."""
    bits = []
    if op.get("slo_ttft_s") or op.get("slo_tpot_s"):
        lim = []
        if op.get("slo_ttft_s"):
            lim.append("TTFT <= %g s%s" % (op["slo_ttft_s"], " (%.0f%%)" % (100 * op["ttft_attainment"])
                                           if "ttft_attainment" in op else ""))
        if op.get("slo_tpot_s"):
            lim.append("TPOT <= %g ms%s" % (op["slo_tpot_s"] * 1e3, " (%.0f%%)" % (100 * op["tpot_attainment"])
                                            if "tpot_attainment" in op else ""))
        bits.append("SLO attainment %.0f%% (%s)" % (100 * op["slo_attainment"], ", ".join(lim)))
    v = op.get("verdict")
    if v == "overloaded":
        bits.append("overloaded: waits grow by %.2f s per s of arrivals" % op["waiting_trend"])
    elif v == "saturated":
        bits.append("saturated: median wait %.3g s > median service %.3g s" % (op["queueing_p50_s"], op["service_p50_s"]))
    elif v == "keeps up":
        bits.append("keeps up: median wait %.3g s, median service %.3g s" % (op["queueing_p50_s"], op["service_p50_s"]))
    return "; ".join(bits)


def title_of(result, req=None):
    m = lambda k, s="p50": kr.metric({"metrics": result["metrics"].get(k, {})}, s)  # noqa: E731
    head = "%s: %d requests, %.1f tokens/s, TTFT p50 %.3g s, TPOT p50 %.3g ms" % (
        kr.config_name(result), int(kr.metric(result, "requests", 0)), kr.metric(result, "throughput_tokens_per_s"),
        m("ttft_s"), m("tpot_s") * 1e3)
    op = describe_operating_point(operating_point(result, req))
    return head + ("\n" + op if op else "")


# ---------------------------------------------------------------- figures

def spans_decades(values, ratio=100.0):
    pos = [v for v in values if v > 0 and math.isfinite(v)]
    return len(pos) > 1 and max(pos) / min(pos) >= ratio


def plot_cdf(ax, series, unit, limit=None, log=None):
    """series [(label, values in the unit)]: one empirical CDF each, p50 and p99
    marked; `limit` (in the unit) a dashed SLO line."""
    allv = []
    for i, (label, vals) in enumerate(series):
        s = sorted(v for v in vals if math.isfinite(v))
        if not s:
            continue
        allv += s
        n = float(len(s))
        line, = ax.step(s, [(k + 1) / n for k in range(len(s))], where="post", lw=1, label=label,
                        color="C%d" % i if len(series) > 1 else None)
        for q, mk in ((50, "o"), (99, "^")):
            ax.plot([percentile(s, q)], [q / 100.0], mk, color=line.get_color(), ms=3)
    if limit is not None:
        ax.axvline(limit, color="red", ls="--", lw=0.8, label="SLO %g %s" % (limit, unit))
    if log if log is not None else spans_decades(allv):
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("share of requests")
    ax.grid(True, linewidth=0.3, which="both")


def plot_latency_cdfs(axes, runs, log=None):
    """runs [(label, Requests, (ttft_lim, tpot_lim))]: TTFT, TPOT and end-to-end CDFs on three axes."""
    for ax, (key, name, unit, scale) in zip(axes, LATENCIES):
        series = []
        for label, req, _ in runs:
            vals = req.tpot() if key == "tpot_s" else req[key]
            series.append((label, [v * scale for v in vals]))
        lims = {r[2][0 if key == "ttft_s" else 1] for r in runs} if key != "e2e_s" else {None}
        lim = lims.pop() if len(lims) == 1 else None
        plot_cdf(ax, series, unit, None if lim is None else lim * scale, log)
        ax.set_xlabel("%s (%s)" % (name, unit))
        ax.set_title("%s: p50 (o), p99 (^)" % name)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    return handles, labels


def slo_legends(axes):
    """Each panel's SLO line named in its own corner, clear of the CDF's rise."""
    for ax in axes:
        hl = [(h, l) for h, l in zip(*ax.get_legend_handles_labels()) if l.startswith("SLO")]
        if hl:
            ax.legend([h for h, _ in hl], [l for _, l in hl], loc="lower right", frameon=False)


def queue_over_time(req, points=400):
    """(times, waiting, running): requests arrived and not yet scheduled, and
    scheduled and not finished, sampled at `points` times over the run."""
    arr, q, fin = req["arrival_s"], req["queueing_s"], req.finish()
    start = [a + w for a, w in zip(arr, q)]
    t0, t1 = min(arr), max(fin)
    times = [t0 + (t1 - t0) * i / (points - 1) for i in range(points)] if t1 > t0 else [t0]

    def count(events_in, events_out):
        # Sorted sweeps: arrivals minus departures up to each sample time.
        ins, outs = sorted(events_in), sorted(events_out)
        res, i, j = [], 0, 0
        for t in times:
            while i < len(ins) and ins[i] <= t:
                i += 1
            while j < len(outs) and outs[j] <= t:
                j += 1
            res.append(i - j)
        return res

    return times, count(arr, start), count(start, fin)


def plot_queue(ax, req):
    t, waiting, running = queue_over_time(req)
    scale, unit = time_unit(t[-1] - t[0])
    ax.plot([x * scale for x in t], waiting, lw=1, color="C3", label="waiting")
    ax.plot([x * scale for x in t], running, lw=1, color="C0", label="running")
    ax.set_xlabel("simulated time (%s)" % unit)
    ax.set_ylabel("requests")
    ax.set_ylim(bottom=0)
    ax.grid(True, linewidth=0.3)
    ax.legend(loc="best", frameon=False)
    ax.set_title("queue over time (from requests.csv)")


def prefix_sources(result, req=None):
    """Prompt tokens by where they came from: each cache tier's hits, then computed."""
    m = result["metrics"]
    out = {}
    tiers = kr.ordered_tiers(result)
    for t, v in tiers.items():
        if isinstance(v.get("hit_tokens"), (int, float)):
            out[t] = float(v["hit_tokens"])
    if not out and req is not None:
        out = {t: float(sum(v)) for t, v in req.hits.items()}
    prompt = kr.metric(result, "prompt_tokens", 0.0)
    hit = sum(out.values())
    out["computed"] = max(0.0, prompt - hit) if prompt else float("nan")
    return out, prompt


def plot_prefix_hits(ax, result, req=None):
    src, prompt = prefix_sources(result, req)
    names = list(src)
    share = [v / prompt if prompt else float("nan") for v in src.values()]
    bars = ax.bar(names, share, color=["C2"] * (len(names) - 1) + ["0.6"])
    ax.bar_label(bars, labels=["%.1f%%\n%.3g M" % (100 * s, v / 1e6) for s, v in zip(share, src.values())], fontsize=7)
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("share of prompt tokens")
    ax.set_title("prompt tokens: prefix hits per tier, computed")


def plot_tier_occupancy(ax, result):
    tiers = {t: v for t, v in kr.ordered_tiers(result).items() if isinstance(v.get("peak_bytes"), (int, float))}
    if not tiers:
        ax.text(0.5, 0.5, "no tier occupancy in the result", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    names = list(tiers)
    x = range(len(names))
    mean = [float(tiers[t].get("mean_bytes", float("nan"))) / 1e9 for t in names]
    peak = [float(tiers[t]["peak_bytes"]) / 1e9 for t in names]
    ax.bar([i - 0.2 for i in x], mean, width=0.4, color="C0", label="time-averaged")
    b = ax.bar([i + 0.2 for i in x], peak, width=0.4, color="C1", label="peak")
    ax.bar_label(b, labels=[kr.human_bytes(p * 1e9) for p in peak], fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names)
    if spans_decades(mean + peak):
        ax.set_yscale("log")
    ax.set_ylabel("GB")
    ax.legend(loc="best", frameon=False)
    ax.set_title("KV bytes held per tier")


def run_figure(result, req, title=None, it=None):
    """plot_run.py's figure for a serving run: CDFs, queue, prefix sources,
    occupancy (over time from iterations.csv where the run wrote one)."""
    fig = plt.figure(figsize=(12, 8.5))
    gs = fig.add_gridspec(2, 3)
    axes = [fig.add_subplot(gs[0, i]) for i in range(3)]
    if req is not None:
        plot_latency_cdfs(axes, [("requests", req, slo_of(result))])
        slo_legends(axes)
        if it is not None:
            plot_queue_iterations(fig.add_subplot(gs[1, 0]), it)
        else:
            plot_queue(fig.add_subplot(gs[1, 0]), req)
    else:
        for ax, (key, name, unit, scale) in zip(axes, LATENCIES):
            d = result["metrics"].get(key, {})
            qs = ["mean", "p50", "p90", "p99"]
            vals = [kr.metric({"metrics": d}, q) * scale for q in qs]
            bars = ax.bar(qs, vals, color=COLOURS[key])
            ax.bar_label(bars, fmt="%.3g", fontsize=7)
            ax.set_ylabel("%s (%s)" % (name, unit))
            ax.set_title("%s (no requests.csv: summary)" % name)
        ax = fig.add_subplot(gs[1, 0])
        ax.text(0.5, 0.5, "no requests.csv: no queue over time", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    plot_prefix_hits(fig.add_subplot(gs[1, 1]), result, req)
    if it is not None and it.kv:
        ax = fig.add_subplot(gs[1, 2])
        ax.legend(*plot_occupancy_over_time(ax, it, result), loc="best", frameon=False, fontsize=7)
    else:
        plot_tier_occupancy(fig.add_subplot(gs[1, 2]), result)
    fig.suptitle(title or title_of(result, req), fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- load sweeps

def load_axis(x):
    """A sweep axis as offered load: serving.time_scale stretches arrivals, so
    the load is its inverse (x the stream's own rate); a rate is itself."""
    if x.endswith("time_scale"):
        return (lambda v: 1.0 / v), "arrival rate (x the trace's own)"
    if x.endswith("rate_per_s"):
        return (lambda v: v), "arrival rate (requests/s)"
    return (lambda v: v), x


def knee(points):
    """points [(load, row)] sorted by load: the lowest load at which the run
    is saturated as operating_point() says (the median request waits longer
    than it is then served: queueing_s.p50 > e2e_s.p50 - queueing_s.p50),
    or None when no load is."""
    for load, r in points:
        q, e = r.get("queueing_s.p50"), r.get("e2e_s.p50")
        if isinstance(q, (int, float)) and isinstance(e, (int, float)) and q > e - q:
            return load
    return None


def plot_load(rows, x, slo=(None, None), title=None, log_x=None, log_y=None, figsize=(3.4, 4.2)):
    """Latency percentiles against load from a serving sweep's rows (CSV or
    JSON-lines columns ttft_s.p50 ...): TTFT and TPOT on two panels with the
    SLO lines, SLO attainment below them, and the lowest saturated load
    (knee()) marked on each."""
    fx, xlabel = load_axis(x)
    pts = []
    for r in rows:
        v = r.get(x)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            pts.append((fx(float(v)), r))
    if not pts:
        raise kr.ResultError("--x %s: no numeric values in the sweep" % x)
    if "ttft_s.p50" not in pts[0][1]:
        raise kr.ResultError("the sweep has no serving metrics (ttft_s.p50): `load` plots a sweep of serving runs")
    pts.sort(key=lambda p: p[0])
    loads = [p[0] for p in pts]
    fig, axes = plt.subplots(3, 1, figsize=figsize, sharex=True, gridspec_kw={"height_ratios": [2, 2, 1.2]})
    series = {}
    for ax, (key, name, unit, scale), lim in zip(axes, LATENCIES[:2], slo):
        for q, ls in (("p50", "-"), ("p90", "--"), ("p99", ":")):
            ys = [r.get("%s.%s" % (key, q)) for _, r in pts]
            ys = [y * scale if isinstance(y, (int, float)) else float("nan") for y in ys]
            ax.plot(loads, ys, ls=ls, marker="o", ms=2.5, color=COLOURS[key], label=q)
            series["%s.%s" % (key, q)] = list(zip(loads, ys))
        if lim is not None:
            ax.axhline(lim * scale, color="red", lw=0.8, ls="--", label="SLO")
        ax.set_ylabel("%s (%s)" % (name, unit))
        if log_y if log_y is not None else spans_decades([y for k, s in series.items() if k.startswith(key)
                                                          for _, y in s]):
            ax.set_yscale("log")
        ax.grid(True, linewidth=0.3, which="both")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    att = [r.get("slo_attainment") for _, r in pts]
    axes[2].plot(loads, [a * 100 if isinstance(a, (int, float)) else float("nan") for a in att], marker="o", ms=2.5,
                 color="k")
    axes[2].axhline(TARGET_ATTAINMENT * 100, color="red", lw=0.8, ls="--", label="%.0f%%" % (TARGET_ATTAINMENT * 100))
    axes[2].set_ylabel("SLO met (%)")
    axes[2].set_ylim(0, 105)
    axes[2].grid(True, linewidth=0.3)
    axes[2].legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    k = knee(pts)
    if k is not None:
        for ax in axes:
            ax.axvline(k, color="0.4", lw=0.8)
        axes[0].annotate("saturated", (k, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -8),
                         textcoords="offset points", fontsize=6, color="0.3", ha="left")
    series["slo_attainment"] = list(zip(loads, att))
    series["knee"] = k
    if log_x if log_x is not None else spans_decades(loads, 20):
        axes[2].set_xscale("log")
    axes[2].set_xlabel(xlabel)
    axes[0].set_title(textwrap.fill(title or "latency against load", 60))
    fig.tight_layout()
    return fig, series
