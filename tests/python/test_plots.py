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
