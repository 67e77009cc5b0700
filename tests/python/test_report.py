"""`kvtier report`: one static page from a run or a sweep, figures embedded;
rendered in headless Chromium (Debian's `chromium`, which .ci/setup installs):
every figure decodes, nothing errs on the console, and a screenshot of the
page is drawn. Without Chromium these checks skip, saying so, except in CI
(the CI environment variable set), where they fail."""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import DEFAULT_CONFIG, ROOT

SERVING = ROOT / "configs" / "serving" / "mooncake.json"


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser_or_skip():
    browser = chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set and headless Chromium is not installed: .ci/setup installs Debian's chromium")
        pytest.skip("headless Chromium not installed (Debian: apt install chromium); the page itself was checked")
    return browser


def headless(page, tmp_path, *args):
    browser = browser_or_skip()
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--user-data-dir=%s" % (tmp_path / "chromium-profile"), "--virtual-time-budget=5000",
                        "--enable-logging=stderr", "--v=0"] + list(args) + [page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    # The page's console: a script error or a resource that failed to load.
    console = [l for l in p.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l or "Failed to load" in l]
    assert not console, "\n".join(console)
    return p


def render_dom(page, tmp_path):
    """The page's DOM after load, from headless Chromium."""
    return headless(page, tmp_path, "--dump-dom").stdout


def check_rendered(page, tmp_path, figures):
    """Chromium decodes every figure, and draws the page: a screenshot whose
    rows are not all one colour down to where the figures are."""
    dom = render_dom(page, tmp_path)
    m = re.search(r'data-figures-loaded="(\d+)" data-figures="(\d+)"', dom)
    assert m and m.group(1) == m.group(2) == str(figures), dom[:500]
    for section in ("Key figures", "Figures", "Resolved configuration"):
        assert "<h2>%s" % section in dom, section
    shot = tmp_path / "page.png"
    headless(page, tmp_path, "--hide-scrollbars", "--window-size=1000,1400", "--screenshot=%s" % shot)
    import matplotlib.image as mpimg  # decodes the PNG (Debian's python3-matplotlib)
    img = mpimg.imread(str(shot))
    assert img.shape[0] == 1400 and img.shape[1] == 1000, img.shape
    # Rows that hold anything but the background: text and figures, down the page.
    drawn = [(img[r] != img[r][0]).any() for r in range(img.shape[0])]
    assert sum(drawn) > 300, "the screenshot is nearly blank: %d drawn rows" % sum(drawn)
    return dom


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
    check_rendered(page, tmp_path, 4)


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
    check_rendered(page, tmp_path, 3)


def test_browser_check_catches_a_broken_page(tmp_path):
    """The console check is live: a script error and a missing image fail it."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><script>undefinedFunction();</script><img src="missing.png"></body></html>')
    with pytest.raises(AssertionError, match="CONSOLE"):
        headless(page, tmp_path, "--dump-dom")


def test_serving_run_report(kvtier, tmp_path):
    """A serving run's page: percentiles, SLO attainment, the operating point, its four figures."""
    p = kvtier("run", SERVING, "-q", "--out", tmp_path / "out", "--set", "serving.limit=300", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = tmp_path / "serving.html"
    p = kvtier("report", tmp_path / "out", "-o", page, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    check_static(html)
    assert "{" not in re.sub(r"<(style|script|pre)[^>]*>.*?</\1>", "", html, flags=re.S)  # no raw objects
    assert "TTFT p50 / p90 / p99 (s)" in html and "SLO attainment" in html
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert "%.1f %%" % (100 * result["metrics"]["slo_attainment"]) in html
    assert 'id="operating-point"' in html
    for fig in ("fig-latency", "fig-queue", "fig-prefix", "fig-occupancy"):
        assert 'id="%s"' % fig in html, fig
    check_rendered(page, tmp_path, 4)


def test_serving_sweep_report_plots_latency_against_load(kvtier, tmp_path):
    doc = {"name": "load", "base": str(SERVING), "set": {"serving.limit": 200},
           "grid": {"serving.time_scale": [5, 20]}}
    (tmp_path / "load.json").write_text(json.dumps(doc))
    p = kvtier("sweep", tmp_path / "load.json", "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = tmp_path / "load.html"
    p = kvtier("report", tmp_path / "out" / "load" / "sweep.jsonl", "-o", page, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    assert 'id="fig-load"' in html and "slo_attainment" in html
    check_rendered(page, tmp_path, 2)


def test_report_bad_input(kvtier, tmp_path):
    p = kvtier("report", tmp_path / "nothing.json", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert p.returncode == 2 and "nothing.json" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / "r.html").exists()


def test_replay_report(kvtier, tmp_path):
    """A cache replay's page: the best online policy per capacity beside
    Belady's bound, the hit ratio and miss ratio curves, every run."""
    out = tmp_path / "replay.json"
    slice_ = ROOT / "tests" / "data" / "mooncake_conversation_head1500.jsonl"
    p = kvtier("replay", slice_, "-p", "lru,s3fifo,belady", "-c", "1%,10%", "--warmup", "100", "-o", out, "-q",
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = tmp_path / "replay.html"
    p = kvtier("report", out, "-o", page, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    check_static(html)
    runs = json.loads(out.read_text())["runs"]
    for cap in {r["tiers"][0]["capacity_blocks"] for r in runs}:
        at = {r["tiers"][0]["policy"]["name"]: r["miss_ratio"] for r in runs if r["tiers"][0]["capacity_blocks"] == cap}
        best = min((m, pol) for pol, m in at.items() if pol != "belady")
        assert "%s (miss ratio %.4g; Belady %.4g)" % (best[1], best[0], at["belady"]) in html
    assert "the first 100 requests warm the cache, uncounted" in html
    for fig in ("fig-capacity", "fig-mrc"):
        assert 'id="%s"' % fig in html, fig
    assert html.count("<tr>") == (1 + 3) + (1 + 6)  # key figures: header, runs, 2 capacities; runs: header, 6
    check_rendered(page, tmp_path, 2)
