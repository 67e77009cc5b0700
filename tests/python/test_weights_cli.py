"""policies.weights from the command line: FlexGen configs run, bad placements
are one line naming the JSON path, exit 2, nothing written."""

import json

import pytest

from conftest import ROOT

CFG = ROOT / "configs" / "flexgen" / "flexgen_opt-30b.json"


def test_flexgen_config_runs_and_reports_weights(kvtier, tmp_path):
    p = kvtier("run", CFG, "--out", tmp_path / "out", "--set", "workload.decode_steps=2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "out" / "result.json").read_text())["metrics"]
    w = m["weights"]
    # 80% of OPT-30B's 60 GB of FP16 weights, and of the LM head's own copy
    # of the tied 50272 x 7168 embedding (FlexGen's OutputEmbed loads it as a
    # weight of its own), live in DRAM and stream once per step (prefill + 2 steps).
    streamed = 0.8 * (60e9 + 50272 * 7168 * 2)
    assert w["dram_bytes"] == pytest.approx(streamed)
    assert w["bytes_to_gpu"] == pytest.approx(3 * streamed)
    assert w["cpu_attention_s"] > 0


@pytest.mark.parametrize("override,path", [
    ("policies.weights.gpu_percent=30", "policies.weights"),
    ("policies.placement.percent=[0,60,0]", "policies.placement.percent"),
    ("hardware.devices.dram.capacity_GB=40", "hardware.devices.dram"),
    ("model.weight_dtype=int8", None),  # runs: INT8 weights are half the bytes
    ("policies.weights.gpu_batches=5", "policies.weights.gpu_batches"),
])
def test_bad_weight_placement_is_one_line_exit_2(kvtier, tmp_path, override, path):
    out = tmp_path / "out"
    p = kvtier("run", CFG, "--out", out, "-q", "--set", "workload.decode_steps=1", "--set", override, cwd=tmp_path)
    if path is None:
        assert p.returncode == 0, p.stderr
        return
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0], p.stderr
    assert not out.exists()
