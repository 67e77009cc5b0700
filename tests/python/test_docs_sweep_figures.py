"""The figures docs/sweep.md quotes for its shipped sweeps are what those
sweeps print today: each sweep runs exactly as the doc says (a few seconds
each at -j2) and every quoted number is compared with the CSV it wrote, so a
change to the engine that moves them fails here until the doc is rewritten
from the new output."""

import csv
import re

from conftest import ROOT

DOC = (ROOT / "docs" / "sweep.md").read_text()


def paragraph(name):
    """The doc's bullet on configs/sweeps/NAME.json, continuation lines joined."""
    m = re.search(r"^- `%s\.json`:(.*?)(?=^- `|^\S|\Z)" % re.escape(name), DOC, re.S | re.M)
    assert m, "docs/sweep.md has no bullet for %s.json" % name
    return " ".join(m.group(1).split())


def run_sweep(kvtier, tmp_path, name):
    p = kvtier("sweep", ROOT / "configs" / "sweeps" / (name + ".json"), "-j2", "-q", "--out", tmp_path / name / "sweep.jsonl",
               cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader((tmp_path / name / "sweep.csv").open()))
    assert rows, "no points"
    return rows


def quoted(text, value, digits):
    """Whether `text` quotes `value` at `digits` decimals."""
    return ("%.*f" % (digits, value)) in text


def test_prefetch_depth_figures(kvtier, tmp_path):
    doc = paragraph("prefetch_depth")
    rows = run_sweep(kvtier, tmp_path, "prefetch_depth")
    by = {(int(r["policies.prefetch.depth"]), int(r["workload.batch"])): r for r in rows}
    assert len(by) == 10
    b4 = {float(by[(d, 4)]["decode_tokens_per_s"]) for d in range(5)}
    assert len(b4) == 1 and quoted(doc, b4.pop(), 1), doc
    tpot = [float(by[(d, 8)]["mean_step_latency_s"]) for d in range(5)]
    assert quoted(doc, tpot[0], 2) and quoted(doc, tpot[1], 2), (tpot, doc)
    assert all(abs(t - tpot[1]) < 1e-9 for t in tpot[1:]), tpot  # "10.38 s at depths 1-4"
    hit = float(by[(0, 8)]["tiers.gpu.hit_rate"])
    assert quoted(doc, hit, 4), (hit, doc)


def test_hillinfer_alpha_beta_figures(kvtier, tmp_path):
    doc = paragraph("hillinfer_alpha_beta")
    rows = run_sweep(kvtier, tmp_path, "hillinfer_alpha_beta")
    t = {(float(r["policies.placement.alpha"]), float(r["policies.evaluation.beta"])): float(r["decode_tokens_per_s"])
         for r in rows}
    assert len(t) == 25
    for point in [(0.1, 0.9), (0.5, 0.9), (0.5, 0.1), (0.1, 0.1)]:
        assert quoted(doc, t[point], 2), (point, t[point], doc)
    # "Both matter and alpha more": the doc's claim, from the same numbers.
    assert t[(0.5, 0.9)] / t[(0.1, 0.9)] > t[(0.5, 0.9)] / t[(0.5, 0.1)] > 1.0
