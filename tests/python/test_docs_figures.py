"""The figures docs quote are what the commands they name print today:
docs/sweep.md's shipped sweeps (a few seconds each at -j2) and
docs/replay.md's miss ratio curves of the conversation trace (about a
second) run as the docs say, and every quoted number is compared with their
output, so a change that moves them fails here until the doc is rewritten
from the new output."""

import csv
import json
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


def test_replay_miss_ratio_figures(kvtier, tmp_path):
    trace = ROOT / ".." / "shared" / "traces" / "mooncake_conversation_trace.jsonl"
    assert trace.is_file(), "../shared/traces/mooncake_conversation_trace.jsonl is missing beside the repository"
    text = " ".join((ROOT / "docs" / "replay.md").read_text().split())
    m = re.search(r"\*\*Miss ratio curves\.\*\*(.*?)```sh", text)
    assert m, "docs/replay.md: no Miss ratio curves paragraph"
    doc = m.group(1)
    p = kvtier("replay", trace, "-p", "lru,fifo,clock,sieve,arc,s3fifo,twoq,belady", "-c",
               "0.5%,1%,2%,5%,10%,20%,50%", "-o", tmp_path / "r.json", "-q", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    miss = {(r["tiers"][0]["policy"]["name"], r["tiers"][0]["capacity_blocks"]): r for r in runs}
    five, ten = 9139, 18279  # 5% and 10% of 182,790 blocks
    floor = miss[("belady", five)]["miss_ratio"]
    assert quoted(doc, floor, 3) and miss[("belady", 18279)]["miss_ratio"] == floor
    for policy in ("lru", "sieve"):
        assert quoted(doc, miss[(policy, five)]["miss_ratio"], 3) and quoted(doc, miss[(policy, ten)]["miss_ratio"], 3)
    gaps = [r["miss_ratio"] - r["byte_miss_ratio"] for r in runs]
    assert "%.3f-%.3f" % (min(gaps), max(gaps)) in doc, (min(gaps), max(gaps))
