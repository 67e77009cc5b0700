"""`kvtier report`: one static page from a run or a sweep, figures embedded;
rendered in headless Chromium (Debian's `chromium`) where it is installed."""

import json
import re
import shutil
import subprocess

import pytest

from conftest import DEFAULT_CONFIG


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render_dom(page, tmp_path):
    """The page's DOM after load, from headless Chromium."""
    browser = chromium()
    if browser is None:
        pytest.skip("headless Chromium not installed (Debian: apt install chromium); the page itself was checked")
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--user-data-dir=%s" % (tmp_path / "chromium-profile"), "--virtual-time-budget=5000",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def check_static(html):
    # No server, no network: nothing is fetched from anywhere.
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)
    assert "<script src" not in html


@pytest.fixture(scope="module")
def run_with_timeline(kvtier, tmp_path_factory):
    d = tmp_path_factory.mktemp("report_run")
    p = kvtier("run", DEFAULT_CONFIG, "-q", "--out", d / "out", "--timeline", d / "out" / "timeline.json", "--set",
               "workload.decode_steps=3", "--set", "sim.step_csv=true", cwd=d)
    assert p.returncode == 0, p.stderr
    return d / "out"


def test_run_report(kvtier, run_with_timeline, tmp_path):
    page = tmp_path / "report.html"
    p = kvtier("report", run_with_timeline / "result.json", "-o", page, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    check_static(html)
    result = json.loads((run_with_timeline / "result.json").read_text())
    assert "%.4g" % result["metrics"]["decode_tokens_per_s"] in html  # the key figure
    for fig in ("fig-tiers", "fig-timeline", "fig-breakdown", "fig-energy"):
        assert 'id="%s"' % fig in html, fig
    assert 'id="energy"' in html and "%.4g" % result["metrics"]["energy"]["total_J"] in html
    assert 'id="config"' in html and "&quot;context_tokens&quot;" in html
    dom = render_dom(page, tmp_path)
    m = re.search(r'data-figures-loaded="(\d+)" data-figures="(\d+)"', dom)
    assert m and m.group(1) == m.group(2) == "4", dom[:500]


def test_sweep_report(kvtier, tmp_path):
    doc = {"name": "rep", "base": str(DEFAULT_CONFIG), "set": {"workload.decode_steps": 2},
           "grid": {"policies.prefetch.depth": [0, 1], "workload.batch": [1, 2]}}
    (tmp_path / "rep.json").write_text(json.dumps(doc))
    p = kvtier("sweep", tmp_path / "rep.json", "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = tmp_path / "sweep.html"
    p = kvtier("report", tmp_path / "out" / "rep" / "sweep.jsonl", "-o", page, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    check_static(html)
    for fig in ("fig-heatmap", "fig-lines", "fig-bars"):
        assert 'id="%s"' % fig in html, fig
    assert "4 points done, 0 failed" in html  # from the manifest
    dom = render_dom(page, tmp_path)
    m = re.search(r'data-figures-loaded="(\d+)" data-figures="(\d+)"', dom)
    assert m and m.group(1) == m.group(2) == "3", dom[:500]


def test_report_bad_input(kvtier, tmp_path):
    p = kvtier("report", tmp_path / "nothing.json", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert p.returncode == 2 and "nothing.json" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / "r.html").exists()
