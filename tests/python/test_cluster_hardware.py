"""Multi-GPU node presets and hardware.cluster through the command line: the
single-GPU engine runs on every node preset (its first GPU, that GPU's
socket's memory and drive as tiers), a one-node cluster object changes no
metric, and a cluster's result lists the fabric's links."""

import json

import pytest

from conftest import DEFAULT_CONFIG, read_json

SMALL = ["--set", "workload.decode_steps=4", "--set", "workload.context_tokens=2048", "-q"]
PRESETS = ["hgx_h100x8", "a100x4_pcie", "aios_testbed"]


@pytest.mark.parametrize("preset", PRESETS)
def test_the_single_gpu_engine_runs_on_a_node_preset(kvtier, tmp_path, preset):
    p = kvtier("run", DEFAULT_CONFIG, "--set", "hardware=configs/hardware/%s.json" % preset, "--out", tmp_path / "o",
               *SMALL, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = read_json(tmp_path / "o" / "result.json")
    assert r["metrics"]["decode_tokens_per_s"] > 0
    assert "gpu0" in r["metrics"]["tiers"]


def test_a_one_node_cluster_changes_no_metric(kvtier, tmp_path):
    hw = ["--set", "hardware=configs/hardware/hgx_h100x8.json"]
    one = ["--set", 'hardware.cluster={"nodes": 1, "fabric": {"nic": "port", "nic_GBps": 50}}']
    a = kvtier("run", DEFAULT_CONFIG, *hw, "--out", tmp_path / "a", *SMALL, cwd=tmp_path)
    b = kvtier("run", DEFAULT_CONFIG, *hw, *one, "--out", tmp_path / "b", *SMALL, cwd=tmp_path)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ma = read_json(tmp_path / "a" / "result.json")["metrics"]
    mb = read_json(tmp_path / "b" / "result.json")["metrics"]
    assert json.dumps(ma, sort_keys=True) == json.dumps(mb, sort_keys=True)


@pytest.mark.parametrize("fabric", [
    {"nic": "port", "nic_GBps": 50, "topology": "star", "oversubscription": 2},
    {"nic": "port", "nic_GBps": 50, "topology": "fat_tree", "nodes_per_leaf": 2, "oversubscription": 2},
])
def test_a_cluster_runs_on_node_0_and_lists_the_fabric_links(kvtier, tmp_path, fabric):
    cluster = json.dumps({"nodes": 4, "fabric": fabric})
    p = kvtier("run", DEFAULT_CONFIG, "--set", "hardware=configs/hardware/hgx_h100x8.json", "--set",
               "hardware.cluster=" + cluster, "--out", tmp_path / "o", *SMALL, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = read_json(tmp_path / "o" / "result.json")["metrics"]
    assert "n0.gpu0" in m["tiers"]
    links = m["links"]
    assert any(k.startswith("n3.") for k in links)
    fabric_links = [k for k in links if "fabric" in k]
    assert fabric_links, sorted(links)[:20]
    # The engine runs on node 0 alone: nothing crosses the fabric.
    assert all(links[k]["bytes"] == 0 for k in fabric_links)
