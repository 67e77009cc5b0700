"""Serving runs as figures (plot_run.py, kvtier_plot.py latency and load),
the operating point, and what makes sweep figures printable: --where, the
refusal of a line plot that would zigzag, titles from the sweep's config,
--dpi and log axes, the timeline's decode window, one capacity figure."""

import csv
import json
import sys

import pytest

from conftest import DEFAULT_CONFIG, PLOTS, ROOT

sys.path.insert(0, str(PLOTS))

import kvtier_results as kr  # noqa: E402
import kvtier_plot as kp  # noqa: E402
import kvtier_serving as ks  # noqa: E402

MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"


@pytest.fixture(scope="module")
def serving_run(kvtier, tmp_path_factory):
    """The Mooncake preset on its first 400 requests: result.json, requests.csv and iterations.csv."""
    d = tmp_path_factory.mktemp("serving")
    p = kvtier("run", MOONCAKE, "-q", "--out", d / "out", "--set", "serving.limit=400", "--set", "sim.step_csv=true",
               cwd=d)
    assert p.returncode == 0, p.stderr
    return d / "out"


@pytest.fixture(scope="module")
def load_sweep(kvtier, tmp_path_factory):
    d = tmp_path_factory.mktemp("load")
    doc = {"name": "load", "base": str(MOONCAKE), "set": {"serving.limit": 300},
           "grid": {"serving.time_scale": [2, 10, 40]}}
    (d / "load.json").write_text(json.dumps(doc))
    p = kvtier("sweep", d / "load.json", "-q", cwd=d)
    assert p.returncode == 0, p.stderr
    return d / "out" / "load"


def test_plot_run_on_a_serving_run(serving_run, plot_script, tmp_path):
    p = plot_script("plot_run.py", serving_run / "result.json", "-o", tmp_path / "s.png", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # --dpi sets the PNG's resolution: the 12 x 8.5 in figure at 200 dpi.
    p = plot_script("plot_run.py", serving_run / "result.json", "-o", tmp_path / "hi.png", "--dpi", "200", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    import matplotlib.image as mimg
    assert mimg.imread(str(tmp_path / "hi.png")).shape[:2] == (1700, 2400)
    result = kr.load_result(str(serving_run / "result.json"))
    fig = ks.run_figure(result, ks.Requests(str(serving_run / "requests.csv")))
    title = fig._suptitle.get_text()
    assert "nan" not in title and "SLO attainment %.0f%%" % (100 * result["metrics"]["slo_attainment"]) in title
    assert len(fig.axes) == 6
    for ax in fig.axes:  # no empty panel
        assert ax.lines or ax.patches, ax.get_title()


def test_queue_and_kv_over_time_are_the_iterations(serving_run, plot_script, tmp_path):
    """kvtier_plot.py occupancy and plot_run.py draw iterations.csv's queues
    and KV per tier step by step; without the file, one line naming the fix."""
    p = plot_script("kvtier_plot.py", "occupancy", serving_run, "-o", tmp_path / "occ", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "occ.png").is_file() and (tmp_path / "occ.pdf").is_file()
    rows = list(csv.DictReader((serving_run / "iterations.csv").open()))
    result = kr.load_result(str(serving_run / "result.json"))
    fig, _ = kp.plot_occupancy(str(serving_run))
    queue, kv = fig.axes[0], fig.axes[1]
    steps = {pt.get_label(): pt for pt in queue.patches}
    starts, ends = [float(r["start_s"]) for r in rows], [float(r["end_s"]) for r in rows]
    assert len(rows) > ks.STEP_LIMIT  # 400 requests: thousands of iterations, drawn in bins
    for key in ("waiting", "running"):
        vals = [float(r[key]) for r in rows]
        edges, mean, lo, hi = ks.binned_steps(starts, ends, vals)
        line, band = steps[key].get_data(), steps["_range " + key].get_data()
        assert list(line.values) == pytest.approx(mean) and list(band.values) == pytest.approx(hi)
        assert list(band.baseline) == pytest.approx(lo)
        assert max(band.values) == max(vals) and min(band.baseline) == min(vals)  # no peak lost
        assert list(line.edges) == pytest.approx([e / 60 for e in edges], rel=1e-12)  # minutes
    tiers = [c[len("kv_bytes_"):] for c in rows[0] if c.startswith("kv_bytes_")]
    lines = [pt for pt in kv.patches if not pt.get_label().startswith("_")]
    assert tiers[0] == "gpu" and len(lines) == len(tiers)
    for tier, pt in zip(tiers, lines):
        held = [float(r["kv_bytes_" + tier]) for r in rows]
        assert pt.get_label() == "%s (peak %s)" % (tier, kr.human_bytes(max(held)))
        # KV after an iteration never exceeds the run's peak for that tier.
        assert max(held) <= result["metrics"]["tiers"][tier]["peak_bytes"] * (1 + 1e-12)
    # plot_run.py uses the same file: the queue panel names it, no panel is empty.
    it = ks.Iterations(str(serving_run / "iterations.csv"))
    fig = ks.run_figure(result, ks.Requests(str(serving_run / "requests.csv")), it=it)
    assert fig.axes[3].get_title().startswith("queue over time (from iterations.csv)")
    assert fig.axes[5].get_title().startswith("KV per tier over time")
    for ax in fig.axes:
        assert ax.lines or ax.patches, ax.get_title()
    # A run without iterations.csv: one line, exit 2, nothing written.
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "result.json").write_bytes((serving_run / "result.json").read_bytes())
    q = plot_script("kvtier_plot.py", "occupancy", bare, cwd=tmp_path)
    assert q.returncode == 2 and len(q.stderr.strip().splitlines()) == 1, q.stderr
    assert "--set sim.step_csv=true" in q.stderr
    assert sorted(x.name for x in bare.iterdir()) == ["result.json"]


def test_binned_steps(monkeypatch):
    """Few iterations are drawn as they are; many, per time bin: the
    duration-weighted mean of the iterations starting in it, their least and
    largest value, and an empty bin holds the value its time is in."""
    edges, mean, lo, hi = ks.binned_steps([0, 1, 3], [1, 3, 4], [5, 7, 2])
    assert (edges, mean, lo, hi) == ([0, 1, 3, 4], [5, 7, 2], None, None)
    monkeypatch.setattr(ks, "STEP_LIMIT", 3)
    # Iterations [0,1) 4, [1,2) 8, [2,7) 1, [7,8) 3 in 4 bins of 2 s: bin 0
    # holds the first two (mean 6), bin 1 the third (1), bin 2 none (it is
    # inside the third: 1), bin 3 the fourth (3).
    edges, mean, lo, hi = ks.binned_steps([0, 1, 2, 7], [1, 2, 7, 8], [4, 8, 1, 3], bins=4)
    assert edges == [0, 2, 4, 6, 8]
    assert mean == [6, 1, 1, 3] and lo == [4, 1, 1, 3] and hi == [8, 1, 1, 3]
    # Weights are durations: [0,0.5) 10 and [0.5,2) 2 average to 4.
    _, mean, _, _ = ks.binned_steps([0, 0.5, 2, 3], [0.5, 2, 3, 4], [10, 2, 0, 0], bins=2)
    assert mean == [4, 0]


def test_latency_cdfs_are_the_requests(serving_run, plot_script, tmp_path):
    p = plot_script("kvtier_plot.py", "latency", serving_run, "-o", tmp_path / "lat", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "lat.png").is_file() and (tmp_path / "lat.pdf").is_file()
    req = ks.Requests(str(serving_run / "requests.csv"))
    result = kr.load_result(str(serving_run / "result.json"))
    fig, _ = kp.plot_latency([str(serving_run)])
    cdf = fig.axes[0].lines[0]
    assert list(cdf.get_xdata()) == sorted(req["ttft_s"])
    assert cdf.get_ydata()[-1] == 1.0
    # The p50 mark is metrics.ttft_s.p50 (nearest rank), the SLO line at serving.slo.ttft_s.
    assert fig.axes[0].lines[1].get_xdata()[0] == pytest.approx(result["metrics"]["ttft_s"]["p50"], rel=1e-12)
    assert ks.percentile(req.tpot(), 99) == pytest.approx(result["metrics"]["tpot_s"]["p99"], rel=1e-12)
    assert [l.get_xdata()[0] for l in fig.axes[0].lines if l.get_label().startswith("SLO")] == [30]


def test_two_runs_get_a_line_each_and_a_legend_below(serving_run, kvtier, plot_script, tmp_path):
    p = kvtier("run", MOONCAKE, "-q", "--out", tmp_path / "b", "--set", "serving.limit=400", "--set",
               "serving.prefix_cache.enabled=false", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    fig, runs = kp.plot_latency([str(serving_run), str(tmp_path / "b" / "requests.csv")])
    assert len(runs) == 2 and fig.legends, "a legend for the runs, outside the panels"
    assert any("enabled=false" in label for label in runs)


def synthetic(rows):
    return {"arrival_s": [r[0] for r in rows], "queueing_s": [r[1] for r in rows],
            "e2e_s": [r[2] for r in rows]}


class FakeRequests(ks.Requests):
    def __init__(self, cols):
        self.cols = dict(cols, ttft_s=cols["e2e_s"], tpot_s=[0.0] * len(cols["e2e_s"]),
                         output_tokens=[1.0] * len(cols["e2e_s"]))
        self.hits = {}


def fake_result():
    return {"config": {"serving": {"slo": {"ttft_s": 5}}},
            "metrics": {"slo_attainment": 0.5, "gpu_busy_fraction": 0.9, "queueing_s": {"p50": 0}}}


def test_operating_point_verdicts():
    # Waits that grow by half a second per second of arrivals: overloaded.
    grow = FakeRequests(synthetic([(t, 0.5 * t, 0.5 * t + 1) for t in range(100)]))
    op = ks.operating_point(fake_result(), grow)
    assert op["verdict"] == "overloaded" and op["waiting_trend"] == pytest.approx(0.5, abs=0.02)
    # A steady wait of 3 s for 1 s of service: saturated but not growing.
    steady = FakeRequests(synthetic([(t, 3.0, 4.0) for t in range(100)]))
    assert ks.operating_point(fake_result(), steady)["verdict"] == "saturated"
    idle = FakeRequests(synthetic([(t, 0.0, 1.0) for t in range(100)]))
    op = ks.operating_point(fake_result(), idle)
    assert op["verdict"] == "keeps up" and op["ttft_attainment"] == 1.0
    assert "keeps up" in ks.describe_operating_point(op)


def test_queue_over_time_counts_waiting_and_running():
    req = FakeRequests(synthetic([(0, 2, 3), (1, 0, 1), (1, 1, 4)]))
    t, waiting, running = ks.queue_over_time(req, points=6)  # t = 0, 1, ..., 5
    assert t == [0, 1, 2, 3, 4, 5]
    # At 1: request 0 waits (scheduled at 2), request 1 runs (done at 2), request 2 waits (scheduled at 2).
    assert waiting == [1, 2, 0, 0, 0, 0] and running == [0, 1, 2, 1, 1, 0]


def test_load_plot_from_a_serving_sweep(load_sweep, plot_script, tmp_path):
    p = plot_script("kvtier_plot.py", "load", load_sweep / "sweep.csv", "--x", "serving.time_scale", "-o",
                    tmp_path / "load", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows, title = kp.load_sweep_table(str(load_sweep / "sweep.csv"))
    assert title.startswith("sweep load: llama-3.1-70b") and "h200_cxl_nvme" in title
    fig, series = ks.plot_load(rows, "serving.time_scale", (30, 0.1))
    loads = [x for x, _ in series["ttft_s.p50"]]
    assert loads == pytest.approx([1 / 40, 1 / 10, 1 / 2])  # load = 1 / time_scale, ascending
    by_scale = {r["serving.time_scale"]: r for r in rows}
    assert series["ttft_s.p50"][0][1] == pytest.approx(by_scale[40]["ttft_s.p50"])
    # The knee is the lowest load whose median wait exceeds its median service.
    sat = [1 / s for s in (40, 10, 2)
           if by_scale[s]["queueing_s.p50"] > by_scale[s]["e2e_s.p50"] - by_scale[s]["queueing_s.p50"]]
    assert series["knee"] == (pytest.approx(sat[0]) if sat else None)
    p = plot_script("kvtier_plot.py", "load", load_sweep / "sweep.csv", "--x", "sim.seed", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1


@pytest.fixture(scope="module")
def two_axis_sweep(kvtier, tmp_path_factory):
    d = tmp_path_factory.mktemp("two_axis")
    doc = {"name": "two", "base": str(DEFAULT_CONFIG), "set": {"workload.decode_steps": 2},
           "grid": {"policies.prefetch.depth": [0, 1, 2], "workload.batch": [1, 2]}}
    (d / "two.json").write_text(json.dumps(doc))
    p = kvtier("sweep", d / "two.json", "-q", cwd=d)
    assert p.returncode == 0, p.stderr
    return d / "out" / "two"


def test_lines_refuses_to_zigzag_and_where_holds_an_axis(two_axis_sweep, plot_script, tmp_path):
    csv_path = two_axis_sweep / "sweep.csv"
    p = plot_script("kvtier_plot.py", "lines", csv_path, "--x", "policies.prefetch.depth", "-o", tmp_path / "l",
                    cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "workload.batch" in p.stderr and "--by" in p.stderr and "--where" in p.stderr
    assert not (tmp_path / "l.png").exists()
    p = plot_script("kvtier_plot.py", "lines", csv_path, "--x", "policies.prefetch.depth", "--where",
                    "workload.batch=2", "-o", tmp_path / "l", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows, _ = kp.load_sweep_table(str(csv_path))
    fig, series = kp.plot_lines(kp.apply_where(rows, ["workload.batch=2"]), "policies.prefetch.depth",
                                "mean_step_latency_s")
    assert [x for x, _ in list(series.values())[0]] == [0, 1, 2]
    p = plot_script("kvtier_plot.py", "lines", csv_path, "--x", "policies.prefetch.depth", "--where",
                    "workload.batch=7", cwd=tmp_path)
    assert p.returncode == 2 and "values: 1, 2" in p.stderr


def test_sweep_titles_legends_dpi_and_log_axes(two_axis_sweep, plot_script, tmp_path):
    rows, title = kp.load_sweep_table(str(two_axis_sweep / "sweep.csv"))
    assert title == "sweep two: llama-13b, 4 K context, 2 steps, rtx4090_ddr4_smartssd" or \
        (title.startswith("sweep two: ") and "K context" in title), title
    fig, _ = kp.plot_lines(rows, "policies.prefetch.depth", "mean_step_latency_s", "workload.batch", log_y=True)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    fig.canvas.draw()
    # The legend is outside the axes: no overlap with the plotting area.
    assert not ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())
    for dpi, width in ((100, None), (200, None)):
        p = plot_script("kvtier_plot.py", "lines", two_axis_sweep / "sweep.csv", "--x", "policies.prefetch.depth",
                        "--by", "workload.batch", "--dpi", str(dpi), "-o", tmp_path / ("d%d" % dpi), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    import matplotlib.image as mpimg
    w100 = mpimg.imread(str(tmp_path / "d100.png")).shape[1]
    w200 = mpimg.imread(str(tmp_path / "d200.png")).shape[1]
    assert abs(w200 / w100 - 2) < 0.05
    p = plot_script("kvtier_plot.py", "lines", two_axis_sweep / "sweep.csv", "--x", "policies.prefetch.depth",
                    "--by", "workload.batch", "--dpi", "0", cwd=tmp_path)
    assert p.returncode == 2


def test_a_missing_column_is_named_briefly(two_axis_sweep, plot_script, tmp_path):
    p = plot_script("kvtier_plot.py", "lines", two_axis_sweep / "sweep.csv", "--x", "policies.prefetch.dept",
                    "--by", "workload.batch", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1
    assert "did you mean policies.prefetch.depth" in p.stderr and len(p.stderr) < 600, p.stderr


def test_timeline_defaults_to_decode_and_keeps_narrow_slices():
    # Prefill 0-100 ms, then three decode steps of 10 ms, each with 50 scoring slices of 1 us.
    slices = {(1, 1): [(0.0, 100.0, "prefill L0")], (1, 2): []}
    for s in range(3):
        t0 = 100.0 + 10 * s
        slices[(1, 1)].append((t0 + 5, 5.0, "step %d L0" % s))
        slices[(1, 2)] += [(t0 + 0.1 * i, 0.001, "score on cpu") for i in range(50)]
    start, end = kp.decode_window(slices, steps=1)
    assert (start, end) == (110.0, 120.0)  # step 1, from the end of step 0
    names = {(1, 1): "gpu compute", (1, 2): "cpu work"}
    fig, shown = kp.plot_timeline(names, slices, start, end)
    assert shown["score"] == 51  # step 1's fifty and the first of step 2, at the window's end
    ax = fig.axes[0]
    fig.canvas.draw()
    px_per_ms = ax.get_window_extent().width / (end - start)
    drawn = ax.collections[[c.get_label() for c in ax.collections].index("score")].get_paths()
    assert min(p.get_extents().width for p in drawn) * px_per_ms >= 1.0  # at least a pixel each


def test_one_capacity_figure(tmp_path, plot_script, kvtier):
    slice_trace = ROOT / "tests" / "data"
    series = {"lru": [(10, 0.1), (100, 0.3)], "belady": [(10, 0.2), (100, 0.35)], "s3fifo": [(10, 0.12), (100, 0.31)]}
    fig, _ = kp.plot_capacity(series, unbounded=0.36)
    ax = fig.axes[0]
    colours = {l.get_label(): l.get_color() for l in ax.get_lines()}
    assert colours["lru"] == kp.policy_colour("lru") != colours["belady"]
    assert ax.get_ylim()[1] < 0.5  # the data's range, not up to 1
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:2] == ["unbounded cache", "belady"]  # best first
    fig2, _ = kp.plot_capacity({"belady": series["belady"]}, figsize=(6.4, 4.2))
    assert fig2.axes[0].get_lines()[0].get_color() == colours["belady"]  # plots/capacity.py's size, same colour


def test_compare_uses_log_axes_over_decades(plot_script, tmp_path):
    sys.path.insert(0, str(PLOTS))
    import compare  # noqa: E402
    fast = {"config": {"name": "fast"}, "metrics": {"decode_tokens_per_s": 200.0, "mean_step_latency_s": 0.005}}
    slow = {"config": {"name": "slow"}, "metrics": {"decode_tokens_per_s": 0.5, "mean_step_latency_s": 2.0}}
    fig = compare.make_figure(["fast", "slow"], [fast, slow])
    assert fig.axes[0].get_xscale() == "log" and fig.axes[1].get_xscale() == "log"
    fig = compare.make_figure(["fast", "slow"], [fast, slow], log=False)
    assert fig.axes[0].get_xscale() == "linear"


def test_cluster_runs_plot_and_report(kvtier, plot_script, tmp_path):
    """A cluster run's requests.csv names each request's instance (text):
    plot_run.py, kvtier_plot.py latency and kvtier report read it, and the
    per-instance columns stay as they are."""
    out = tmp_path / "cl"
    p = kvtier("run", MOONCAKE, "-q", "--out", out, "--set", "serving.limit=120", "--set",
               'hardware={"preset": "%s"}' % (ROOT / "tests" / "data" / "cluster" / "four_h200.json"),
               "--set", 'cluster={"replicas": 2}', cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    req = ks.Requests(str(out / "requests.csv"))
    assert len(req) == 120 and set(req.text["instance"]) == {"gpu", "gpu1"}
    for script, args in (("plot_run.py", [out / "result.json"]), ("kvtier_plot.py", ["latency", out])):
        q = plot_script(script, *args, cwd=tmp_path)
        assert q.returncode == 0, q.stderr
    assert (out / "plot.png").is_file() and (out / "latency.png").is_file()
    r = kvtier("report", out, "-o", out / "report.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "<img" in (out / "report.html").read_text()
    q = plot_script("kvtier_plot.py", "occupancy", out, cwd=tmp_path)
    assert q.returncode == 2 and "a cluster run: its instances write no iterations.csv" in q.stderr, q.stderr
