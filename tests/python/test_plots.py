"""plots/plot_run.py and plots/compare.py on real kvtier results."""

import json
import shutil

import pytest

from conftest import DEFAULT_CONFIG

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == PNG_MAGIC


@pytest.fixture(scope="module")
def variant_run(kvtier, tmp_path_factory):
    """A second run that differs from the default: less DRAM, so the SSD is used."""
    d = tmp_path_factory.mktemp("variant")
    p = kvtier("run", DEFAULT_CONFIG, "-q", "--out", d / "out", "--set", "workload.decode_steps=8", "--set",
               "hardware.devices.dram.capacity_GB=2", cwd=d)
    assert p.returncode == 0, p.stderr
    return d / "out" / "result.json"


def test_plot_run_default_output_next_to_result(default_run, plot_script, tmp_path):
    out, _ = default_run
    run = tmp_path / "run"
    shutil.copytree(out, run)  # keep the session's run folder untouched
    assert (run / "steps.csv").is_file()
    p = plot_script("plot_run.py", run / "result.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert is_png(run / "plot.png")
    assert sorted(x.name for x in run.iterdir()) == ["plot.png", "result.json", "steps.csv"]  # no temp files left


def test_plot_run_without_steps_csv_and_explicit_output(variant_run, plot_script, tmp_path):
    assert not (variant_run.parent / "steps.csv").exists()
    png = tmp_path / "figs" / "variant.png"
    p = plot_script("plot_run.py", variant_run, "-o", png, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert is_png(png)


@pytest.mark.parametrize("content", [None, '{"name": "x"}', "not json"])
def test_plot_run_bad_input(plot_script, tmp_path, content):
    f = tmp_path / "result.json"
    if content is not None:
        f.write_text(content)
    p = plot_script("plot_run.py", f, cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("plot_run.py: error:") and str(f) in lines[0], p.stderr
    assert not (tmp_path / "plot.png").exists()


def test_compare_two_runs_png_and_table(default_run, variant_run, plot_script, tmp_path):
    out, _ = default_run
    png, md = tmp_path / "cmp.png", tmp_path / "cmp.md"
    p = plot_script("compare.py", out / "result.json", variant_run, "-o", png, "--table", md, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert is_png(png)
    rows = [l for l in md.read_text().splitlines() if l.startswith("|")]
    assert len(rows) == 2 + 2  # header, rule, one row per run
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    assert head == ["system", "tokens/s", "TPOT ms", "TTFT s", "attention recall", "GPU busy", "ssd_bytes_written"]
    assert set(rows[1].replace("|", "").strip()) <= set("-: ")
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]
    assert all(c[0].startswith("default") for c in cells)
    assert cells[0][0] != cells[1][0]  # two runs of one config get distinct labels
    m = json.loads(variant_run.read_text())["metrics"]
    assert float(cells[1][1]) == pytest.approx(m["decode_tokens_per_s"], rel=1e-3)
    assert float(cells[1][2]) == pytest.approx(m["mean_step_latency_s"] * 1e3, rel=1e-3)
    assert m["ssd_bytes_written"] > 0 and cells[1][6] != "0 B"
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".tmp")]


def test_compare_accepts_sweep_jsonl(default_run, variant_run, plot_script, tmp_path):
    out, _ = default_run
    lines = [json.dumps(json.loads((out / "result.json").read_text())), json.dumps(json.loads(variant_run.read_text()))]
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("\n".join(lines) + "\n")
    png = tmp_path / "sweep.png"
    p = plot_script("compare.py", sweep, "-o", png, "--table", "-", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert is_png(png)
    assert len([l for l in p.stdout.splitlines() if l.startswith("| default")]) == 2


def test_compare_bad_input(default_run, plot_script, tmp_path):
    out, _ = default_run
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"metrics": {}}) + "\n" + '{"no": "metrics"}\n')
    p = plot_script("compare.py", out / "result.json", bad, "-o", tmp_path / "x.png", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compare.py: error:") and str(bad) + ":2" in lines[0], p.stderr
    assert not (tmp_path / "x.png").exists()


# ---------------------------------------------------------------- plots/kvtier_plot.py, one test per kind

import csv as _csv
import importlib.util
import sys as _sys

from conftest import PLOTS


def _plot_module():
    _sys.path.insert(0, str(PLOTS))
    spec = importlib.util.spec_from_file_location("kvtier_plot", PLOTS / "kvtier_plot.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


PDF_MAGIC = b"%PDF"


def assert_png_and_pdf(stem):
    assert is_png(str(stem) + ".png")
    with open(str(stem) + ".pdf", "rb") as f:
        assert f.read(4) == PDF_MAGIC


def _sweep_fixture(path):
    """A 3 x 2 sweep as kvtier writes it (JSON lines), with known values."""
    lines = []
    for i, (a, b) in enumerate([(a, b) for a in (0.1, 0.2, 0.3) for b in (1, 2)]):
        m = {"decode_tokens_per_s": 10 * a + b, "mean_step_latency_s": 0.001 * (b + a)}
        lines.append({"index": i, "key": "%016x" % i, "overrides": {"policies.placement.alpha": a, "workload.batch": b},
                      "result": {"kvtier_version": "0", "config": {"name": "fx", "workload": {"context_tokens": 2048}},
                                 "metrics": m}})
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    return path


def test_kind_heatmap_marks_the_best_point(plot_script, tmp_path):
    sweep = _sweep_fixture(tmp_path / "s.jsonl")
    p = plot_script("kvtier_plot.py", "heatmap", sweep, "--x", "policies.placement.alpha", "--y", "workload.batch",
                    "-o", tmp_path / "hm", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "hm")
    kp = _plot_module()
    rows, _ = kp.load_sweep_table(str(sweep))
    fig, grid = kp.plot_heatmap(rows, "policies.placement.alpha", "workload.batch", "decode_tokens_per_s")
    assert grid == [[pytest.approx(10 * a + b) for a in (0.1, 0.2, 0.3)] for b in (1, 2)]
    assert "best (max): 5 at alpha=0.3, batch=2" in fig.axes[0].get_title()


def test_kind_lines_one_line_per_variant_in_ms(plot_script, tmp_path):
    sweep = _sweep_fixture(tmp_path / "s.jsonl")
    # The CSV the sweep writes beside the JSON lines works the same.
    rows = [json.loads(l) for l in sweep.read_text().splitlines()]
    with open(tmp_path / "s.csv", "w", newline="") as f:
        w = _csv.writer(f)
        w.writerow(["index", "key", "policies.placement.alpha", "workload.batch", "mean_step_latency_s"])
        for r in rows:
            w.writerow([r["index"], r["key"], r["overrides"]["policies.placement.alpha"], r["overrides"]["workload.batch"],
                        r["result"]["metrics"]["mean_step_latency_s"]])
    p = plot_script("kvtier_plot.py", "lines", tmp_path / "s.csv", "--x", "policies.placement.alpha", "--by",
                    "workload.batch", "-o", tmp_path / "ln.png", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "ln")
    kp = _plot_module()
    table, _ = kp.load_sweep_table(str(tmp_path / "s.csv"))
    fig, series = kp.plot_lines(table, "policies.placement.alpha", "mean_step_latency_s", "workload.batch")
    ax = fig.axes[0]
    assert [l.get_label() for l in ax.get_lines()] == ["batch=1", "batch=2"]
    assert list(ax.get_lines()[1].get_ydata()) == pytest.approx([2.1, 2.2, 2.3])  # ms
    assert "(ms)" in ax.get_ylabel() and ax.get_xlabel() == "α: HKM time pinning"


def test_kind_bars_speedup_over_baseline_with_values(plot_script, tmp_path):
    files = []
    for name, tps in [("base", 10.0), ("fast", 25.0), ("slow", 5.0)]:
        f = tmp_path / (name + ".json")
        f.write_text(json.dumps({"config": {"name": name}, "metrics": {"decode_tokens_per_s": tps}}))
        files.append(f)
    p = plot_script("kvtier_plot.py", "bars", *files, "--baseline", "base", "-o", tmp_path / "b", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "b")
    kp = _plot_module()
    results = [json.loads(f.read_text()) for f in files]
    fig, speedup = kp.plot_bars(results, "base", "decode_tokens_per_s")
    assert speedup == {"base": 1.0, "fast": 2.5, "slow": 0.5}
    texts = [t.get_text().strip() for t in fig.axes[0].texts]
    assert texts == ["1.00×", "2.50×", "0.50×"]
    p = plot_script("kvtier_plot.py", "bars", *files, "--baseline", "nope", "-o", tmp_path / "x", cwd=tmp_path)
    assert p.returncode == 2 and "nope" in p.stderr and not (tmp_path / "x.png").exists()


def test_kind_capacity_line_per_policy(plot_script, tmp_path):
    f = tmp_path / "replay.csv"
    f.write_text("policy,capacity,hit_ratio\nlru,100,0.4\nlru,10,0.1\nsieve,10,0.15\nsieve,100,0.5\n")
    p = plot_script("kvtier_plot.py", "capacity", f, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "capacity")  # default: next to the input, named after the kind
    kp = _plot_module()
    series, cap = kp.load_capacity(str(f))
    fig, out = kp.plot_capacity(series, cap)
    assert out == {"lru": [(10, 0.1), (100, 0.4)], "sieve": [(10, 0.15), (100, 0.5)]}
    assert [list(l.get_ydata()) for l in fig.axes[0].get_lines()] == [[0.1, 0.4], [0.15, 0.5]]


def _timeline_fixture(path):
    ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "streams"}},
          {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "links"}},
          {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "gpu compute"}},
          {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "cpu work"}},
          {"name": "thread_name", "ph": "M", "pid": 2, "tid": 3, "args": {"name": "pcie"}}]
    # Step 0: [0, 10) ms: compute 0-4, transfer 3-8 (4 ms of GPU wait), scoring 8-9, nothing 9-10.
    # Step 1: [10, 14) ms: compute 10-14.
    ev += [{"name": "compute", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 4000},
           {"name": "compute", "ph": "X", "pid": 1, "tid": 1, "ts": 10000, "dur": 4000},
           {"name": "transfer dram->gpu", "ph": "X", "pid": 2, "tid": 3, "ts": 3000, "dur": 5000},
           {"name": "score on cpu", "ph": "X", "pid": 1, "tid": 2, "ts": 8000, "dur": 1000}]
    path.write_text(json.dumps({"traceEvents": ev}))
    steps = path.parent / "steps.csv"
    steps.write_text("step,start_s,end_s,latency_s\n0,0,0.010,0.010\n1,0.010,0.014,0.004\n")
    return path, steps


def test_kind_timeline_lanes(plot_script, tmp_path):
    tl, _ = _timeline_fixture(tmp_path / "tl.json")
    p = plot_script("kvtier_plot.py", "timeline", tl, "-o", tmp_path / "t", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "t")
    kp = _plot_module()
    names, _, slices = kp.load_timeline(str(tl))
    fig, shown = kp.plot_timeline(names, slices)
    assert shown == {"compute": 2, "transfer": 1, "score": 1}
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["gpu compute", "cpu work", "pcie"]


def test_kind_breakdown_adds_up_to_step_latency(plot_script, tmp_path):
    tl, steps = _timeline_fixture(tmp_path / "tl.json")
    p = plot_script("kvtier_plot.py", "breakdown", tl, steps, "-o", tmp_path / "bd", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "bd")
    kp = _plot_module()
    names, _, slices = kp.load_timeline(str(tl))
    rows = kp.step_breakdown(names, slices, kp.read_steps(str(steps)))
    assert rows[0] == pytest.approx({"compute": 0.004, "transfer": 0.004, "scoring": 0.001, "stall": 0.001})
    assert rows[1] == pytest.approx({"compute": 0.004, "transfer": 0.0, "scoring": 0.0, "stall": 0.0})
    fig = kp.plot_breakdown(rows)
    heights = sorted(round(r.get_height(), 9) for r in fig.axes[0].patches)
    assert heights == sorted([4.0, 4.0, 1.0, 1.0, 4.0, 0.0, 0.0, 0.0])


def test_kind_on_a_real_sweep_and_timeline(kvtier, plot_script, tmp_path):
    """End to end: the README's three commands (sweep, heatmap, lines) on a small sweep."""
    doc = {"name": "e2e", "base": str(DEFAULT_CONFIG), "set": {"workload.decode_steps": 2},
           "grid": {"policies.prefetch.depth": [0, 1], "workload.batch": [1, 2]}}
    (tmp_path / "e2e.json").write_text(json.dumps(doc))
    p = kvtier("sweep", tmp_path / "e2e.json", "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    csvf = tmp_path / "out" / "e2e" / "sweep.csv"
    p = plot_script("kvtier_plot.py", "heatmap", csvf, "--x", "policies.prefetch.depth", "--y", "workload.batch",
                    cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "out" / "e2e" / "heatmap")
    p = plot_script("kvtier_plot.py", "lines", tmp_path / "out" / "e2e" / "sweep.jsonl", "--x",
                    "policies.prefetch.depth", "--by", "workload.batch", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert_png_and_pdf(tmp_path / "out" / "e2e" / "lines")


def test_kind_bad_input_is_one_line_exit_2(plot_script, tmp_path):
    sweep = _sweep_fixture(tmp_path / "s.jsonl")
    p = plot_script("kvtier_plot.py", "heatmap", sweep, "--x", "nope", "--y", "workload.batch", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and "nope" in p.stderr, p.stderr
    p = plot_script("kvtier_plot.py", "capacity", tmp_path / "missing.csv", cwd=tmp_path)
    assert p.returncode == 2 and "missing.csv" in p.stderr


def test_sweep_lines_are_read_in_index_order(tmp_path):
    """A sweep's JSON lines come in completion order; plots list its points by index."""
    _sys.path.insert(0, str(PLOTS))
    import kvtier_results as kr
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps({"index": i, "key": str(i), "overrides": {},
                                     "result": {"config": {"name": "p%d" % i}, "metrics": {}}}) + "\n"
                         for i in (2, 0, 1)))
    assert [r["config"]["name"] for _, r in kr.load_results(str(f))] == ["p0", "p1", "p2"]


def test_kind_capacity_from_kvtier_replay(kvtier, plot_script, tmp_path):
    """The replay's own JSON and CSV plot the same points (the top tier's capacity)."""
    from conftest import ROOT
    p = kvtier("replay", "--synthetic", ROOT / "configs" / "replay" / "synthetic_chat_rag.json", "-p", "lru,s3fifo",
               "-c", "100,1000", "-o", tmp_path / "r.json", "--csv", tmp_path / "r.csv", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    kp = _plot_module()
    from_json, cap = kp.load_capacity(str(tmp_path / "r.json"))
    from_csv, _ = kp.load_capacity(str(tmp_path / "r.csv"))
    assert cap == "capacity_blocks" and sorted(from_json) == ["lru", "s3fifo"]
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert sorted(v for pts in from_json.values() for _, v in pts) == sorted(r["hit_ratio"] for r in runs)
    for pol in from_json:
        assert [c for c, _ in from_json[pol]] == [c for c, _ in from_csv[pol]] == [100, 1000]
        assert [v for _, v in from_csv[pol]] == pytest.approx([v for _, v in from_json[pol]], rel=1e-9)
    q = plot_script("kvtier_plot.py", "capacity", tmp_path / "r.json", "-o", tmp_path / "cap", cwd=tmp_path)
    assert q.returncode == 0, q.stderr
    assert_png_and_pdf(tmp_path / "cap")
