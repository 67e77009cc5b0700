"""hardware.kv_capacity: a tier's KV room given in bytes or blocks replaces
the room worked out from its memory, in single-batch runs and in serving
(the paged pool, the prefix cache, KV in tiers); less room never means more
hits, and a room the device does not hold is refused."""

import csv
import json

import pytest

from conftest import DEFAULT_CONFIG, ROOT

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"


def run(kvtier, d, config, *sets, step_csv=False):
    d.mkdir(parents=True, exist_ok=True)
    args = ["run", config, "--out", d / "out", "-q"]
    for s in sets + (("sim.step_csv=true",) if step_csv else ()):
        args += ["--set", s]
    p = kvtier(*args, cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(d / "out" / "result.json") as f:
        return json.load(f)["metrics"]


def capacity(**tiers):
    return "hardware.kv_capacity=" + json.dumps(tiers)


def test_single_batch_smaller_gpu_room_lowers_its_hit_rate(kvtier, tmp_path):
    sets = ("workload.decode_steps=16",)
    full = run(kvtier, tmp_path / "full", DEFAULT_CONFIG, *sets)
    # A third of what the 4090 holds after weights and reserve (about 9 GB), in bytes and as blocks.
    small = run(kvtier, tmp_path / "small", DEFAULT_CONFIG, *sets, capacity(gpu="3GB"))
    gpu_full, gpu_small = full["tiers"]["gpu"]["hit_rate"], small["tiers"]["gpu"]["hit_rate"]
    assert gpu_small < gpu_full, (gpu_small, gpu_full)
    assert small["mean_step_latency_s"] >= full["mean_step_latency_s"]
    # Blocks: 128 tokens (workload.block_tokens) of every layer; OPT-6.7B: 32 layers x 2 x 4096 x 2 bytes per token.
    block = 128 * 32 * 2 * 4096 * 2
    blocks = run(kvtier, tmp_path / "blocks", DEFAULT_CONFIG, *sets, capacity(gpu=3 * 10**9 // block))
    assert blocks["tiers"]["gpu"]["hit_rate"] <= gpu_full


def test_serving_pool_is_the_given_blocks_and_fewer_sequences_run(kvtier, tmp_path):
    full = run(kvtier, tmp_path / "full", VLLM, step_csv=True)
    small = run(kvtier, tmp_path / "small", VLLM, capacity(gpu=2000), step_csv=True)
    assert small["kv_pool_blocks"] == 2000 < full["kv_pool_blocks"]

    def most_running(d):
        with open(d / "out" / "iterations.csv", newline="") as f:
            return max(int(r["running"]) for r in csv.DictReader(f))

    # 2,000 blocks of 16 tokens hold three 8K-token sequences at most.
    assert most_running(tmp_path / "small") < most_running(tmp_path / "full") == 15
    assert small["simulated_time_s"] > full["simulated_time_s"]
    gib = run(kvtier, tmp_path / "gib", VLLM, capacity(gpu="10GiB"))
    assert gib["kv_pool_blocks"] == 10 * 2**30 // (16 * 32 * 2 * 4096 * 2)


def test_serving_prefix_cache_room_is_the_given_one(kvtier, tmp_path):
    cfg = ROOT / "configs" / "serving" / "mooncake.json"
    sets = ("serving.limit=300", "serving.request_csv=false")
    full = run(kvtier, tmp_path / "full", cfg, *sets)
    with open(tmp_path / "full" / "out" / "result.json") as f:
        below = json.load(f)["config"]["hardware"]["tiers"][1]  # the first cache tier below the GPU
    small = run(kvtier, tmp_path / "small", cfg, *sets, capacity(**{below: "2GB"}))
    assert small["tiers"][below]["peak_bytes"] <= 2e9
    assert small["prefix_hit_rate"] <= full["prefix_hit_rate"]
    assert small["tiers"][below].get("hit_tokens", 0) < full["tiers"][below].get("hit_tokens", 0)


def test_serving_tiered_kv_room(kvtier, tmp_path):
    sets = ("serving.kv=tiered", "serving.preemption=recompute")
    full = run(kvtier, tmp_path / "full", VLLM, *sets)
    small = run(kvtier, tmp_path / "small", VLLM, *sets, capacity(gpu="20GB"))
    assert small["tiers"]["gpu"]["peak_bytes"] <= 20e9 < full["tiers"]["gpu"]["peak_bytes"]
    # The scheduler admits against every tier's room: the GPU's share of it is smaller.
    assert small["kv_pool_blocks"] < full["kv_pool_blocks"]
    assert small["simulated_time_s"] >= full["simulated_time_s"]


@pytest.mark.parametrize("value, fragment", [
    ('{"gpu": "900GB"}', "hardware.kv_capacity.gpu: \"900GB\" (900.0 GB of KV) is more than the device holds"),
    ('{"gpu": 10000000}', "hardware.kv_capacity.gpu: 10000000"),
    ('{"gpu": "40 GBs"}', "hardware.kv_capacity.gpu: expected a size such as \"40GB\""),
    ('{"gpu": 0}', "hardware.kv_capacity.gpu: expected a size such as \"40GB\""),
    ('{"gpuu": "1GB"}', "hardware.kv_capacity.gpuu: not a tier of hardware.tiers (did you mean 'gpu'?)"),
    ('"40GB"', "hardware.kv_capacity: expected an object: tier name -> size"),
])
def test_bad_kv_capacity_is_refused(kvtier, tmp_path, value, fragment):
    for cfg in (DEFAULT_CONFIG, VLLM):
        p = kvtier("run", cfg, "--out", tmp_path / "out", "--set", "hardware.kv_capacity=" + value, cwd=tmp_path)
        assert p.returncode == 2 and fragment in p.stderr, (cfg, p.stderr)
        assert p.stderr.count("\n") == 1
        assert not (tmp_path / "out").exists()
