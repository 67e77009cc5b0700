"""End to end: `kvtier run` writes result.json with the metric contract of
shared/design/ARCHITECTURE.md ("Outputs", "Metrics"), deterministically."""

import json
import math

import pytest

from conftest import DEFAULT_CONFIG, ROOT

CONTRACT = [
    "simulated_time_s",
    "decode_tokens_per_s",
    "mean_step_latency_s",
    "p50_step_latency_s",
    "p99_step_latency_s",
    "ttft_s",
    "gpu_busy_fraction",
    "attention_recall",
    "ssd_bytes_written",
]
FAST = ["--set", "workload.decode_steps=4"]


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def test_result_has_version_resolved_config_seed(default_run):
    out, r = default_run
    assert isinstance(r["kvtier_version"], str) and r["kvtier_version"]
    assert r["seed"] == 1
    cfg = r["config"]
    assert cfg["name"] == "default"
    # Resolved: presets expanded into objects, defaults filled in.
    assert isinstance(cfg["hardware"], dict) and isinstance(cfg["model"], dict)
    assert cfg["workload"]["batch"] == 4
    assert cfg["workload"]["decode_steps"] == 128
    assert cfg["sim"]["seed"] == 1
    assert cfg["sim"]["step_csv"] is True
    for fam in ("eviction", "promotion", "placement", "prefetch", "evaluation"):
        assert isinstance(cfg["policies"][fam]["name"], str)


def test_metric_contract_and_sane_values(default_run):
    _, r = default_run
    m = r["metrics"]
    for k in CONTRACT:
        assert k in m, k
        assert finite(m[k]), (k, m[k])
        assert m[k] >= 0, (k, m[k])
    assert m["decode_tokens_per_s"] > 0
    assert m["simulated_time_s"] > 0
    assert 0 < m["p50_step_latency_s"] <= m["p99_step_latency_s"]
    assert m["mean_step_latency_s"] > 0
    assert 0 < m["ttft_s"] < m["simulated_time_s"]
    for k in ("gpu_busy_fraction", "attention_recall"):
        assert 0 <= m[k] <= 1, (k, m[k])
    # tokens/s and TPOT agree: batch tokens per mean step.
    batch = r["config"]["workload"]["batch"]
    assert math.isclose(m["decode_tokens_per_s"], batch / m["mean_step_latency_s"], rel_tol=1e-6)

    tiers = m["tiers"]
    assert set(tiers) == set(r["config"]["hardware"]["tiers"])
    for name, t in tiers.items():
        assert finite(t["hit_rate"]) and 0 <= t["hit_rate"] <= 1, name
        assert finite(t["peak_bytes"]) and t["peak_bytes"] >= 0, name
        if "capacity_bytes" in t:
            assert t["peak_bytes"] <= t["capacity_bytes"], name
    # LRU drops nothing: every access is served by some tier.
    assert math.isclose(sum(t["hit_rate"] for t in tiers.values()), 1.0, rel_tol=1e-9)

    links = m["links"]
    assert links
    for name, l in links.items():
        assert finite(l["bytes"]) and l["bytes"] >= 0, name
        assert finite(l["busy_fraction"]) and 0 <= l["busy_fraction"] <= 1, name
    assert any(l["bytes"] > 0 for l in links.values())


def test_steps_csv(default_run):
    out, r = default_run
    lines = (out / "steps.csv").read_text().splitlines()
    assert lines[0] == "step,start_s,end_s,latency_s"
    rows = [l.split(",") for l in lines[1:]]
    assert len(rows) == r["config"]["workload"]["decode_steps"]
    lat = [float(x[3]) for x in rows]
    assert all(v > 0 for v in lat)
    assert math.isclose(sum(lat) / len(lat), r["metrics"]["mean_step_latency_s"], rel_tol=1e-9)


def test_same_seed_is_byte_identical(kvtier, tmp_path):
    # The same relative --out from two folders: the resolved configs match too.
    outs = []
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        p = kvtier("run", DEFAULT_CONFIG, "--out", "out", "-q", *FAST, cwd=tmp_path / d)
        assert p.returncode == 0, p.stderr
        outs.append((tmp_path / d / "out" / "result.json").read_bytes())
    assert outs[0] == outs[1]


def test_other_seed_changes_result(kvtier, tmp_path):
    res = {}
    for seed in ("1", "2"):
        p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / seed, "-q", "--seed", seed, *FAST, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        res[seed] = json.loads((tmp_path / seed / "result.json").read_text())
    assert res["1"]["seed"] == 1 and res["2"]["seed"] == 2
    assert res["2"]["config"]["sim"]["seed"] == 2
    # The synthetic trace differs, so what the blocks did differs.
    assert res["1"]["metrics"] != res["2"]["metrics"]


def test_resolved_config_reproduces_the_run(kvtier, tmp_path):
    """docs/formats.md: re-running result.json's resolved config reproduces the run."""
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "a", "-q", *FAST, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    first = json.loads((tmp_path / "a" / "result.json").read_text())
    cfg = dict(first["config"])
    cfg["sim"] = dict(cfg["sim"], out_dir="")
    (tmp_path / "resolved.json").write_text(json.dumps(cfg))
    p = kvtier("run", tmp_path / "resolved.json", "--out", tmp_path / "b", "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    again = json.loads((tmp_path / "b" / "result.json").read_text())
    assert again["metrics"] == first["metrics"]


def test_timeline_is_chrome_trace_json(kvtier, tmp_path):
    tl = tmp_path / "tl" / "timeline.json"
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "out", "-q", "--timeline", tl, *FAST, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(tl.read_text())
    events = doc["traceEvents"]
    assert isinstance(events, list)
    xs = [e for e in events if e.get("ph") == "X"]
    assert xs
    for e in xs:
        assert isinstance(e["name"], str)
        assert finite(e["ts"]) and e["ts"] >= 0
        assert finite(e["dur"]) and e["dur"] >= 0
    # Both the GPU's compute and data movement show up.
    assert any(e["name"].startswith("step ") for e in xs)
    assert any("bytes" in e.get("args", {}) for e in xs)
    assert not list(tl.parent.glob("*.tmp"))


def test_quiet_prints_nothing_and_default_prints_summary(kvtier, tmp_path):
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "q", "-q", *FAST, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "v", *FAST, cwd=tmp_path)
    assert p.returncode == 0
    assert "tokens/s" in p.stdout and "result.json" in p.stdout


def test_ssd_tier_in_use_counts_ssd_writes(kvtier, tmp_path):
    """With 2 GB of DRAM the KV spills to the SSD: ssd_bytes_written is what crossed the SSD's write media."""
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "o", "-q", "--set", "workload.decode_steps=8",
               "--set", "hardware.devices.dram.capacity_GB=2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "o" / "result.json").read_text())["metrics"]
    assert m["ssd_bytes_written"] > 0
    assert m["ssd_bytes_written"] == pytest.approx(m["links"]["ssd.write"]["bytes"], rel=1e-9)
    assert m["tiers"]["ssd"]["peak_bytes"] > 0 and m["tiers"]["ssd"]["hit_rate"] > 0
    assert m["tiers"]["dram"]["peak_bytes"] <= m["tiers"]["dram"]["capacity_bytes"] <= 2e9


def test_ttft_without_prefill_is_first_step(kvtier, tmp_path):
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "o", "-q", "--set", "workload.decode_steps=4",
               "--set", "workload.prefill=none", "--set", "sim.step_csv=true", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "o" / "result.json").read_text())["metrics"]
    first = (tmp_path / "o" / "steps.csv").read_text().splitlines()[1].split(",")
    assert float(first[1]) == 0.0
    assert m["ttft_s"] == pytest.approx(float(first[3]), rel=1e-12)


def test_decode_busy_figures_belong_to_their_links(kvtier, tmp_path):
    # HillInfer's testbed carries an idle NVMe link beside the SmartSSD's busy ones:
    # a link that moved nothing is never busy, and a busy one is busy over decode too.
    p = kvtier("run", "configs/systems/hillinfer.json", "--out", tmp_path / "o", "--set", "workload.decode_steps=6",
               "--set", "workload.warmup_steps=1", "--set", "workload.context_tokens=4096",
               "--set", "hardware=configs/hardware/rtx4090_ddr4_smartssd_nvme.json",
               "--set", 'hardware.tiers=["gpu", "dram", "smartssd"]', cwd=ROOT)
    assert p.returncode == 0, p.stderr
    m = json.load(open(tmp_path / "o" / "result.json"))["metrics"]
    for name, link in m["links"].items():
        assert 0 <= link["decode_busy_fraction"] <= 1, name
        if link["bytes"] == 0:
            assert link["decode_busy_fraction"] == 0 and link["busy_fraction"] == 0, name
    assert m["links"]["smartssd.read"]["decode_busy_fraction"] > 0.5  # the FPGA reads its keys every step
    assert 0 < m["gpu_busy_fraction"] <= 1 and 0 < m["prefill_gpu_busy_fraction"] <= 1
