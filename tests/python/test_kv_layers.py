"""serving.kv_layers "representative" end to end: layer 0's decisions stand
for every layer's and its transfers and kernel are issued again for each, so
the result is the full run's wherever every layer decides alike, and says
when it may not be."""

import json
import subprocess

import pytest

from conftest import ROOT, flat, run_metrics

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"
TIERED = ["serving.kv=tiered", "serving.preemption=recompute"]
REP = ["serving.kv_layers=representative"]
LAYERS = 32  # OPT-6.7B


def same(x, y):
    """Integers, strings and flags equal; floats (times, bytes) to 1e-9 relative."""
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        return x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y))
    return x == y


def compare(full, rep):
    """Every result.json metric of the two runs that differs."""
    a, b = flat(full), flat(rep)
    for k in ("layers", "exact", "why", "scaled_by_layers"):
        b.pop("representative_layer." + k)
    assert a.keys() == b.keys(), set(a) ^ set(b)
    return {k: (x, b[k]) for k, x in a.items() if not same(x, b[k])}


def pair(kvtier, tmp_path, *sets):
    full, _ = run_metrics(kvtier, tmp_path, "full", VLLM, *TIERED, *sets)
    rep, _ = run_metrics(kvtier, tmp_path, "rep", VLLM, *TIERED, *REP, *sets)
    return full, rep


def test_all_on_the_gpu_equals_the_full_run(kvtier, tmp_path):
    """15 x 8K on the A100: every block on the GPU at every layer."""
    full, rep = pair(kvtier, tmp_path, "serving.requests.count=15")
    assert rep["representative_layer"]["layers"] == LAYERS
    assert rep["representative_layer"]["exact"] is True
    assert "representative_layer" not in full
    assert full["kv"]["block_accesses"] > 0
    assert compare(full, rep) == {}


def test_streamed_from_dram_every_iteration_equals_the_full_run(kvtier, tmp_path):
    """The KV in DRAM only (the GPU is no tier): every layer's blocks cross
    PCIe into staging buffers every iteration and every new token is written
    back, one layer ahead of compute; every layer moves the same."""
    sets = ['hardware.tiers=["dram"]', "serving.requests.count=6", "serving.requests.output_tokens=9",
            'policies.prefetch={"name": "layer_ahead", "depth": 1}']
    full, rep = pair(kvtier, tmp_path, *sets)
    assert full["kv"]["fetched_bytes"] > 0  # the transfers really happen, every iteration
    assert full["links"]["pcie_gpu:root->gpu"]["bytes"] >= full["kv"]["fetched_bytes"]
    assert full["links"]["pcie_gpu:gpu->root"]["bytes"] > 0
    assert rep["representative_layer"]["exact"] is True, rep["representative_layer"]
    assert compare(full, rep) == {}


def test_streamed_from_ssd_waits_for_each_layers_own_writes(kvtier, tmp_path):
    """The KV on the SSD only: a layer's fetch of the next iteration waits
    for that layer's own writes (its prefill output, its last token), still
    in flight on the drive, so layer 0's jobs stand for layer l's only where
    each is mapped to layer l's own."""
    sets = ['hardware.tiers=["ssd"]', "serving.requests.count=4", "serving.requests.output_tokens=5",
            'policies.prefetch={"name": "layer_ahead", "depth": 1}']
    full, rep = pair(kvtier, tmp_path, *sets)
    assert full["kv"]["fetched_bytes"] > 0 and full["ssd_bytes_written"] > 0
    assert rep["representative_layer"]["exact"] is True, rep["representative_layer"]
    assert compare(full, rep) == {}


def test_prefix_cache_reads_equal_the_full_run(kvtier, tmp_path):
    """The Mooncake preset's first 12 requests in GPU, DRAM and SSD with its
    prefix cache: a prompt's cached blocks are read into the GPU by its own
    layer's selection, and its kernel waits for those reads, each layer's
    for its own (layer 0's mapped once layer l's are issued)."""
    sets = ["serving.kv=tiered", "serving.preemption=recompute", "workload.block_tokens=512", "serving.limit=12"]
    full, _ = run_metrics(kvtier, tmp_path, "full", MOONCAKE, *sets)
    rep, _ = run_metrics(kvtier, tmp_path, "rep", MOONCAKE, *sets, *REP)
    assert full["prefix_cache"]["load_bytes"] > 0  # cached prompt blocks really are read
    assert rep["representative_layer"]["exact"] is True, rep["representative_layer"]
    assert rep["representative_layer"]["layers"] == 80
    assert compare(full, rep) == {}


def test_spilling_from_the_gpu_is_reported_as_not_exact(kvtier, tmp_path):
    """16 x 8K need more than the GPU holds: blocks leave it for DRAM, in the
    full run in an order across layers that one layer cannot stand for."""
    proc_sets = ["serving.requests.count=16"]
    out = tmp_path / "spill"
    args = [str(VLLM), "--out", str(out), *sum((["--set", s] for s in TIERED + REP + proc_sets), [])]
    p = kvtier("run", *args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads((out / "result.json").read_text())["metrics"]
    assert rep["representative_layer"]["exact"] is False
    assert "tier" in rep["representative_layer"]["why"]
    warnings = [line for line in p.stderr.splitlines() if "representative" in line and "warning" in line]
    assert len(warnings) == 1, p.stderr


@pytest.mark.parametrize(
    "sets,key",
    [
        (["serving.kv_unit=all_layers"], "serving.kv_layers"),
        (["serving.kv=paged"], "serving.kv_layers"),
        (['policies.evaluation="topk"'], "policies.evaluation"),
        (['serving.attention={"kind": "synthetic"}'], "serving.attention"),
    ],
)
def test_refused_where_layers_decide_differently(kvtier, tmp_path, sets, key):
    args = [str(VLLM), "--out", str(tmp_path / "x"),
            *sum((["--set", s] for s in TIERED + REP + ["serving.requests.count=2"] + sets), [])]
    p = kvtier("run", *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and key in p.stderr, p.stderr
