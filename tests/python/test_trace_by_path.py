"""workload.trace given as a file name: the fitted generator's parameters
(`kvtier trace fit -o fit.json`) or a trace file, in a config or with --set;
and the fit judged by what policies see (bench/fit_recall.py), as
docs/traces.md reports it."""

import json
import re
import subprocess
import sys

from conftest import ROOT

CONFIG = ROOT / "configs" / "traces" / "stories260K.json"
CAPTURED = ROOT / "traces" / "data" / "stories260K.trace"


def metrics(path):
    return json.loads(path.read_text())["metrics"]


def test_fit_runs_by_path_as_if_inlined(kvtier, tmp_path):
    p = kvtier("trace", "fit", CAPTURED, "-o", tmp_path / "fit.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    fit = json.loads((tmp_path / "fit.json").read_text())
    p = kvtier("run", CONFIG, "-q", "--out", tmp_path / "by_path", "--set", "workload.trace=fit.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = kvtier("run", CONFIG, "-q", "--out", tmp_path / "inline", "--set", "workload.trace=%s" % json.dumps(fit),
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    by_path, inline = (json.loads((tmp_path / d / "result.json").read_text()) for d in ("by_path", "inline"))
    for r in (by_path, inline):
        del r["config"]["sim"]["out_dir"]
    assert by_path == inline
    # In a config file the name is found next to the config, as presets are.
    cfg = json.loads(CONFIG.read_text())
    cfg["workload"]["trace"] = "fit.json"
    cfg["hardware"] = str(ROOT / cfg["hardware"])
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "stories_fit.json").write_text(json.dumps(cfg))
    (tmp_path / "cfg" / "fit.json").write_text(json.dumps(fit))
    p = kvtier("run", tmp_path / "cfg" / "stories_fit.json", "-q", "--out", tmp_path / "from_file", cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert metrics(tmp_path / "from_file" / "result.json") == metrics(tmp_path / "inline" / "result.json")


def test_a_trace_file_by_path_is_kind_file(kvtier, tmp_path):
    p = kvtier("run", CONFIG, "-q", "--out", tmp_path / "a", "--set", "workload.trace=traces/data/stories260K.trace",
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = kvtier("run", CONFIG, "-q", "--out", tmp_path / "b", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert metrics(tmp_path / "a" / "result.json") == metrics(tmp_path / "b" / "result.json")


def test_a_json_file_without_trace_parameters_is_one_line(kvtier, tmp_path):
    (tmp_path / "x.json").write_text('{"batch": 4}')
    p = kvtier("run", CONFIG, "-q", "--out", tmp_path / "o", "--set", "workload.trace=x.json", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1
    assert "workload.trace" in p.stderr and "x.json" in p.stderr and '"kind"' in p.stderr
    p = kvtier("run", CONFIG, "-q", "--out", tmp_path / "o", "--set", "workload.trace=missing.json", cwd=tmp_path)
    assert p.returncode == 2 and "missing.json" in p.stderr and "not found" in p.stderr
    assert not (tmp_path / "o").exists()


def test_fit_recall_is_what_docs_report(tmp_path):
    """bench/fit_recall.py's figures are the ones docs/traces.md prints."""
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "fit_recall.py"), "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads((tmp_path / "r.json").read_text())
    doc = (ROOT / "docs" / "traces.md").read_text()
    for name, r in got.items():
        m = re.search(r"^\| %s \| ([0-9.]+) \| ([0-9.]+) \|" % re.escape(name), doc, re.M)
        assert m, "docs/traces.md has no row for %s" % name
        assert float(m.group(1)) == round(r["captured"], 3), (name, r)
        assert float(m.group(2)) == round(r["fitted"], 3), (name, r)
        # The fitted generator is judged by what the policy sees on the captured trace.
        assert abs(r["fitted"] - r["captured"]) <= 0.05, (name, r)
