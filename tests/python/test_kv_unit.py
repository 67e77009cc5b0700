"""serving.kv_unit "all_layers" end to end: a KV block of every layer placed,
evicted and fetched as one unit (vLLM's swap space, Mooncake Store, LMCache),
against the per-layer block table of serving.kv "tiered"."""

import csv
import json
import shutil

import pytest

from conftest import ROOT, flat, run_metrics

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
TIERED = ["serving.kv=tiered", "serving.preemption=recompute"]
WHOLE = TIERED + ["serving.kv_unit=all_layers"]
LAYERS = 32  # OPT-6.7B
BLOCK = 16 * LAYERS * 16384  # 16 tokens x 32 layers x 16 KiB per token per layer


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def test_all_on_the_gpu_gives_the_per_layer_times_with_a_block_per_model(kvtier, tmp_path):
    """15 x 8K on the A100: every block on the GPU, nothing moves either way;
    the same TTFT, TPOT and makespan, one access per block of every layer
    instead of one per layer."""
    sets = ["serving.requests.count=15"]
    layer, _ = run_metrics(kvtier, tmp_path, "layer", VLLM, *TIERED, *sets)
    whole, _ = run_metrics(kvtier, tmp_path, "whole", VLLM, *WHOLE, *sets)
    assert layer["kv_unit"] == "layer" and whole["kv_unit"] == "all_layers"
    for k in ("simulated_time_s",):
        assert rel(whole[k], layer[k]) < 1e-9
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in ("mean", "p50", "p99"):
            assert rel(whole[k][stat], layer[k][stat]) < 1e-9, (k, stat)
    assert whole["kv"]["fetched_bytes"] == 0 and layer["kv"]["fetched_bytes"] == 0
    assert whole["kv"]["kv_block_bytes"] == BLOCK and layer["kv"]["kv_block_bytes"] == BLOCK // LAYERS
    assert layer["kv"]["block_accesses"] == LAYERS * whole["kv"]["block_accesses"] > 0
    assert whole["kv_pool_blocks"] == layer["kv_pool_blocks"]


def test_one_layer_model_gives_the_same_result(kvtier, tmp_path):
    """With one layer a block of every layer is a block of one layer: every
    metric the same, spilling to DRAM included."""
    sets = ["model.layers=1", 'hardware.kv_capacity={"gpu": "0.3GB"}', "serving.requests.count=6"]
    layer, _ = run_metrics(kvtier, tmp_path, "layer", VLLM, *TIERED, *sets)
    whole, _ = run_metrics(kvtier, tmp_path, "whole", VLLM, *WHOLE, *sets)
    assert layer["kv"]["fetched_bytes"] > 0  # the KV spilled
    a, b = flat(layer), flat(whole)
    a.pop("kv_unit")
    b.pop("kv_unit")
    assert a.keys() == b.keys()
    assert {k: v for k, v in a.items() if b[k] != v} == {}


def spill(kvtier, tmp_path, name, *sets):
    m, _ = run_metrics(kvtier, tmp_path, name, VLLM, *WHOLE, *sets)
    return m


def test_whole_blocks_move_and_bytes_add_up(kvtier, tmp_path):
    """16 x 8K spill 3 GB to DRAM: what crosses PCIe into the GPU is what the
    store fetched, what crosses out is what it wrote back, each a whole
    number of all-layer blocks, and DRAM's media carries both."""
    m = spill(kvtier, tmp_path, "spill")
    kv, links = m["kv"], m["links"]
    assert kv["kv_block_bytes"] == BLOCK
    into, out = links["pcie_gpu:root->gpu"]["bytes"], links["pcie_gpu:gpu->root"]["bytes"]
    assert into == kv["fetched_bytes"] > 0
    assert into % BLOCK == 0 and out % BLOCK == 0
    assert out == kv["blocks_written_back"] * BLOCK > 0
    assert links["dram.media"]["bytes"] == into + out
    assert m["tiers"]["dram"]["peak_bytes"] % BLOCK == 0 and m["tiers"]["gpu"]["peak_bytes"] % BLOCK == 0


def test_slower_links_or_less_gpu_never_run_faster(kvtier, tmp_path):
    """Metamorphic: a slower PCIe link to the GPU, slower DRAM, or less GPU
    room for KV never shortens the run; in GPU, DRAM and SSD the same for a
    slower SSD link and less DRAM."""
    base = spill(kvtier, tmp_path, "base")["simulated_time_s"]
    for i, s in enumerate(["hardware.links.pcie_gpu.pcie=gen3x16", "hardware.devices.dram.MTps=400",
                           'hardware.kv_capacity={"gpu": "60GB"}', 'hardware.kv_capacity={"gpu": "40GB"}']):
        assert spill(kvtier, tmp_path, "slow%d" % i, s)["simulated_time_s"] >= base, s
    ssd = ['hardware.tiers=["gpu", "dram", "ssd"]', "serving.requests.count=6"]
    small = 'hardware.kv_capacity={"gpu": "20GB", "dram": "3GB"}'
    three = spill(kvtier, tmp_path, "three", *ssd, small)
    assert three["links"]["ssd.read"]["bytes"] > 0 and three["links"]["ssd.read"]["bytes"] % BLOCK == 0
    for i, s in enumerate(["hardware.links.pcie_ssd.pcie=gen3x4",
                           'hardware.kv_capacity={"gpu": "20GB", "dram": "1GB"}',
                           'hardware.kv_capacity={"gpu": "10GB", "dram": "3GB"}']):
        sets = ssd + ([small, s] if "kv_capacity" not in s else [s])
        assert spill(kvtier, tmp_path, "ssd%d" % i, *sets)["simulated_time_s"] >= three["simulated_time_s"], s


def test_same_config_and_seed_give_the_same_result(kvtier, tmp_path):
    """Run twice into the same folder (result.json names it): the same bytes."""
    sets = ['hardware.tiers=["gpu", "dram", "ssd"]', "serving.requests.count=6",
            'hardware.kv_capacity={"gpu": "20GB", "dram": "3GB"}']
    _, out = run_metrics(kvtier, tmp_path, "a", VLLM, *WHOLE, *sets)
    first = {f: (out / f).read_bytes() for f in ("result.json", "requests.csv")}
    shutil.rmtree(out)
    run_metrics(kvtier, tmp_path, "a", VLLM, *WHOLE, *sets)
    for f, data in first.items():
        assert (out / f).read_bytes() == data, f
    assert json.loads(first["result.json"])["config"]["serving"]["kv_unit"] == "all_layers"
    assert json.loads(first["result.json"])["metrics"]["links"]["ssd.read"]["bytes"] > 0


def test_mooncake_head_with_the_prefix_cache(kvtier, tmp_path):
    """The first 40 Mooncake requests in GPU, DRAM and SSD, 512-token blocks,
    the prefix cache on: every cached block's bytes of all layers loaded once
    (the cache's load bytes are the KV fetched from it), and the run's
    requests as many as per layer."""
    cfg = ROOT / "configs" / "serving" / "mooncake.json"
    sets = TIERED + ["workload.block_tokens=512", "serving.limit=40", 'hardware.kv_capacity={"gpu": "20GB"}']
    layer, _ = run_metrics(kvtier, tmp_path, "layer", cfg, *sets)
    whole, _ = run_metrics(kvtier, tmp_path, "whole", cfg, *sets, "serving.kv_unit=all_layers")
    assert whole["requests"] == layer["requests"] == 40
    assert whole["output_tokens"] == layer["output_tokens"]
    assert whole["prefix_cache"]["load_bytes"] == layer["prefix_cache"]["load_bytes"]
    assert whole["kv"]["block_accesses"] * 80 == pytest.approx(layer["kv"]["block_accesses"], rel=0.05)


def test_prefix_cache_hits_load_each_block_of_every_layer_once(kvtier, tmp_path):
    """The worked example of docs/serving.md: the second request's 3,072
    cached tokens (192 blocks of every layer) are read from DRAM into the
    blocks placement gives them, once each, all layers' bytes: what the cache
    loads is what crosses into the GPU, and the first token comes sooner
    than without the cache."""
    cfg = ROOT / "configs" / "serving" / "prefix_example.json"
    on, out_on = run_metrics(kvtier, tmp_path, "on", cfg, *WHOLE)
    off, out_off = run_metrics(kvtier, tmp_path, "off", cfg, *WHOLE, "serving.prefix_cache.enabled=false")
    assert on["prefix_cache"]["load_bytes"] == 3072 * 524288 == 192 * BLOCK
    assert on["kv"]["fetched_bytes"] == on["prefix_cache"]["load_bytes"]
    assert on["links"]["pcie_gpu:root->gpu"]["bytes"] == on["kv"]["fetched_bytes"]
    assert off["computed_prompt_tokens"] - on["computed_prompt_tokens"] == 3072
    ttft = lambda d: [float(r["ttft_s"]) for r in csv.DictReader(open(d / "requests.csv"))]
    assert ttft(out_on)[1] < ttft(out_off)[1]
