"""Serving end to end: the presets run, outputs are complete and deterministic,
bad serving input is refused, and the single-batch engine still gives the
numbers it gave before serving existed."""

import csv
import json

import pytest

from conftest import ROOT

REGRESSION = ROOT / "tests" / "data" / "regression" / "single_batch.json"
SERVING = ROOT / "configs" / "serving"


def run_metrics(kvtier, tmp_path, config, *sets):
    tmp_path.mkdir(parents=True, exist_ok=True)
    args = ["run", config, "--out", tmp_path / "out"]
    for s in sets:
        args += ["--set", s]
    p = kvtier(*args, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "out" / "result.json") as f:
        return json.load(f)["metrics"]


def compare(expected, got, where):
    for k, v in expected.items():
        assert k in got, "%s: %s missing" % (where, k)
        if isinstance(v, dict):
            compare(v, got[k], where + "." + k)
        else:
            assert got[k] == v, "%s.%s: %r, recorded %r" % (where, k, got[k], v)


REG = json.load(open(REGRESSION))


@pytest.mark.parametrize("name", sorted(REG["configs"]))
def test_single_batch_numbers_unchanged(kvtier, tmp_path, name):
    m = run_metrics(kvtier, tmp_path, ROOT / REG["configs"][name], *REG.get("sets", {}).get(name, []))
    compare(REG["metrics"][name], m, name)


def test_vllm_swap_runs_15_and_queues_one(kvtier, tmp_path):
    m = run_metrics(kvtier, tmp_path, ROOT / "configs" / "systems" / "vllm_swap.json")
    rows = list(csv.DictReader(open(tmp_path / "out" / "requests.csv")))
    assert len(rows) == 16
    assert sum(1 for r in rows if float(r["queueing_s"]) == 0) == 15
    assert m["preemptions"] == 0
    # 15 sequences decode together: vLLM's figure is about 390 tokens/s, where
    # the single-batch LRU loop over a dense scan gives 6.5.
    decode_rate = 15 / m["tpot_s"]["p50"]
    assert 300 < decode_rate < 500


def test_hifc_flash_swap_is_comparable_to_dram_swap(kvtier, tmp_path):
    flash = run_metrics(kvtier, tmp_path / "f", ROOT / "configs" / "systems" / "hifc_paper.json")
    dram = run_metrics(kvtier, tmp_path / "d", ROOT / "configs" / "systems" / "hifc_paper.json", 'hardware.tiers=["gpu","dram"]',
                       "serving.swap_tier=dram")
    assert flash["swapped_out"] > 0 and flash["swapped_out"] == dram["swapped_out"]
    assert flash["tiers"]["ssd"]["nand_bytes_written"] > 0
    # GPU <-> flash peer to peer: nothing crosses the DRAM bus.
    assert all(l["bytes"] == 0 for n, l in flash["links"].items() if n.startswith("dram")), flash["links"]
    ratio = flash["throughput_tokens_per_s"] / dram["throughput_tokens_per_s"]
    assert 0.8 < ratio <= 1.0


def test_matkv_loads_chunks_instead_of_computing_them(kvtier, tmp_path):
    load = run_metrics(kvtier, tmp_path / "l", SERVING / "matkv_rag.json")
    comp = run_metrics(kvtier, tmp_path / "c", SERVING / "matkv_rag.json", "serving.prefix_cache.enabled=false")
    assert load["prefix_hit_rate"] > 0.9
    assert load["computed_prompt_tokens"] < 0.1 * comp["computed_prompt_tokens"]
    assert load["ttft_s"]["mean"] < comp["ttft_s"]["mean"]
    assert load["prefix_cache"]["load_bytes"] > 0


def test_mooncake_head_runs_and_is_deterministic(kvtier, tmp_path):
    a = run_metrics(kvtier, tmp_path / "a", SERVING / "mooncake.json", "serving.limit=300")
    b = run_metrics(kvtier, tmp_path / "b", SERVING / "mooncake.json", "serving.limit=300")
    assert a == b
    assert (tmp_path / "a" / "out" / "requests.csv").read_bytes() == (tmp_path / "b" / "out" / "requests.csv").read_bytes()
    assert a["requests"] == 300 and a["prefix_hit_rate"] > 0
    assert a["tiers"]["dram"]["hit_tokens"] > 0
    assert a["ttft_s"]["p50"] <= a["ttft_s"]["p90"] <= a["ttft_s"]["p99"]


@pytest.mark.parametrize("sets,fragment", [
    (["serving.requests.input_tokens=900000", "serving.chunked_prefill=true"], "can never run"),
    (["serving.max_batched_tokens=1000"], "serving.max_batched_tokens"),
    (['serving.slo={"ttft": 1}'], "serving.slo.ttft"),
    (["serving.swap_tier=nvme9"], "serving.swap_tier"),
    (['serving.requests={"kind": "trace"}'], "serving.requests.path"),
    (["policies.eviction=h2o"], "policies.eviction: not run by the serving engine with serving.kv \"paged\""),
    # serving.kv "tiered": what it cannot run is refused, naming the place.
    (["serving.kv=tiered"], "serving.preemption: with serving.kv \"tiered\""),
    (["serving.kv=tiered", "serving.preemption=recompute", "policies.evaluation=topk"],
     "policies.evaluation: 'topk' selects by attention"),
    (["serving.kv=tiered", "serving.preemption=recompute", "policies.eviction=h2o"],
     "policies.eviction: 'h2o' evicts by attention mass"),
    (["serving.kv=tiered", "serving.preemption=recompute", "policies.prefetch=markov"],
     "policies.prefetch: 'markov' learns from attention"),
    (["serving.kv=tiered", "serving.preemption=recompute", "policies.prefetch=adaptive"],
     "policies.prefetch: 'adaptive' adapts its depth"),
    (["serving.kv=tiered", "serving.preemption=recompute", 'serving.attention={"kind": "synthetic"}',
      "policies.evaluation=app"], "policies.evaluation: 'app' splits scoring"),
    (['serving.attention={"kind": "synthetic"}'], "serving.attention: read by the KV policies with serving.kv"),
    (["serving.kv=tiered", "serving.preemption=recompute", 'serving.attention={"kind": "file", "path": "t.jsonl"}'],
     "serving.attention: expected {\"kind\": \"synthetic\""),
    (["serving.kv=tiered", "serving.preemption=recompute", 'serving.attention={"kind": "synthetic", "heavy": 1}'],
     "serving.attention.heavy"),
    (["serving.kv=tiered", "serving.preemption=recompute", "serving.requests.count=1000",
      "serving.requests.input_tokens=100000", "workload.block_tokens=1", 'hardware.tiers=["gpu", "dram", "ssd"]'],
     "serving.kv: \"tiered\" keeps state for"),
    (["workload.batch=4"], "workload.batch: not read in a serving config"),
    (['policies.weights={"name": "offload", "gpu_percent": 50, "cpu_percent": 50, "gpu_batches": 2}'],
     "policies.weights.gpu_batches"),
    (['policies.weights={"name": "offload", "gpu_percent": 0, "cpu_percent": 100}', "serving.swap_space_GiB=470"],
     "serving.swap_space_GiB"),
])
def test_bad_serving_input(kvtier, tmp_path, sets, fragment):
    args = ["run", ROOT / "configs" / "systems" / "vllm_swap.json", "--out", tmp_path / "out"]
    for s in sets:
        args += ["--set", s]
    p = kvtier(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert fragment in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_gpu_prefix_cache_serves_a_prefix_from_the_pool(kvtier, tmp_path):
    """prefix_cache.gpu: the first request's freed prompt blocks are still in the
    GPU's pool when the second arrives: its 3,072 shared tokens are neither
    loaded from DRAM nor computed, and it starts sooner."""
    cfg = SERVING / "prefix_example.json"
    off = run_metrics(kvtier, tmp_path / "off", cfg)
    rows_off = list(csv.DictReader(open(tmp_path / "off" / "out" / "requests.csv")))
    on = run_metrics(kvtier, tmp_path / "on", cfg, "serving.prefix_cache.gpu=true")
    rows_on = list(csv.DictReader(open(tmp_path / "on" / "out" / "requests.csv")))
    assert "hit_tokens_gpu" not in rows_off[0]
    assert int(rows_off[1]["hit_tokens_dram"]) == 3072 and off["prefix_cache"]["load_bytes"] > 0
    assert int(rows_on[1]["hit_tokens_gpu"]) == 3072 and int(rows_on[1]["hit_tokens_dram"]) == 0
    assert on["prefix_cache"]["load_bytes"] == 0 and on["prefix_cache"]["gpu_hit_tokens"] == 3072
    assert on["tiers"]["gpu"]["hit_tokens"] == 3072
    assert on["computed_prompt_tokens"] == off["computed_prompt_tokens"]
    assert float(rows_on[1]["ttft_s"]) < float(rows_off[1]["ttft_s"])


def test_tiered_kv_serves_a_prefix_from_the_cache(kvtier, tmp_path):
    """With the KV in tiers the prefix cache keeps its share of DRAM
    (serving.prefix_cache.tier_share): the second request's 3,072 shared
    tokens are read from there into the blocks placement gives them instead
    of being computed (0.5 MiB per token of OPT-6.7B), and its first token
    comes sooner; a share too small to keep the first request's leading
    blocks finds nothing."""
    cfg = SERVING / "prefix_example.json"
    tiered = ["serving.kv=tiered", "serving.preemption=recompute"]
    on = run_metrics(kvtier, tmp_path / "on", cfg, *tiered)
    rows_on = list(csv.DictReader(open(tmp_path / "on" / "out" / "requests.csv")))
    off = run_metrics(kvtier, tmp_path / "off", cfg, *tiered, "serving.prefix_cache.enabled=false")
    rows_off = list(csv.DictReader(open(tmp_path / "off" / "out" / "requests.csv")))
    assert int(rows_on[1]["hit_tokens_dram"]) == 3072 and int(rows_on[1]["computed_prompt_tokens"]) == 1024
    assert on["prefix_cache"]["load_bytes"] == 3072 * 524288
    assert on["kv"]["fetched_bytes"] == on["prefix_cache"]["load_bytes"]  # read from DRAM into the GPU tier
    assert off["computed_prompt_tokens"] - on["computed_prompt_tokens"] == 3072
    assert float(rows_on[1]["ttft_s"]) < float(rows_off[1]["ttft_s"])
    assert float(rows_on[0]["ttft_s"]) == float(rows_off[0]["ttft_s"])
    small = run_metrics(kvtier, tmp_path / "small", cfg, *tiered, "serving.prefix_cache.tier_share=0.003")
    assert small["prefix_cache"]["load_bytes"] == 0 and small["tiers"]["dram"]["hit_tokens"] == 0
    again = run_metrics(kvtier, tmp_path / "again", cfg, *tiered)
    assert again == on


@pytest.mark.parametrize("sets,fragment", [
    (["serving.prefix_cache.tier_share=0.3"], "serving.prefix_cache.tier_share: read with serving.kv \"tiered\" only"),
    (["serving.kv=tiered", "serving.preemption=recompute", "serving.prefix_cache.gpu=true"],
     "serving.prefix_cache.gpu: with serving.kv \"tiered\""),
    (["serving.kv=tiered", "serving.preemption=recompute", "serving.prefix_cache.tier_share=0"],
     "hardware.devices.dram: holds no prefix-cache block"),
    (["serving.kv=tiered", "serving.preemption=recompute", "serving.prefix_cache.tier_share=1"],
     "serving.prefix_cache.tier_share: 1 of hardware.devices.dram"),
    (["serving.kv=tiered", "serving.preemption=recompute", "serving.prefix_cache.tier_share=1.5"],
     "serving.prefix_cache.tier_share"),
])
def test_bad_tiered_prefix_cache_input(kvtier, tmp_path, sets, fragment):
    args = ["run", SERVING / "prefix_example.json", "--out", tmp_path / "out"]
    for s in sets:
        args += ["--set", s]
    p = kvtier(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert fragment in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_tiered_kv_block_table_holds_what_can_be_live(kvtier, tmp_path):
    """The block table keeps state for what can be live at once: the blocks
    of the requests that can run at once (serving.max_running), or what the
    tiers hold if less, not a range of the longest request for each running
    request, nor anything for the rest of the stream. A thousand 100K-token
    requests in 1-token blocks at 256 running are refused where the tiers
    include the 3.84 TB SSD (above 2^26 blocks either way) and resolve at 16;
    in GPU and DRAM only they resolve at 256: the tiers bound the table."""
    sets = ["serving.kv=tiered", "serving.preemption=recompute", "serving.requests.count=1000",
            "serving.requests.input_tokens=100000", "workload.block_tokens=1"]
    args = ["config", ROOT / "configs" / "systems" / "vllm_swap.json"]
    for s in sets:
        args += ["--set", s]
    ssd = ["--set", 'hardware.tiers=["gpu", "dram", "ssd"]']
    p = kvtier(*args, *ssd, cwd=tmp_path)
    assert p.returncode == 2 and "256 longest requests (serving.max_running" in p.stderr, p.stderr
    p = kvtier(*args, *ssd, "--set", "serving.max_running=16", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["serving"]["max_running"] == 16
    p = kvtier(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr


def test_tiered_kv_takes_the_mooncake_trace_in_its_own_blocks(kvtier, tmp_path):
    """The first 200 requests of the Mooncake trace (up to 121K tokens each)
    in the preset's 16-token blocks: a range of the longest request for each
    of the 200 would be 121 M blocks, above 2^26; what they can hold together
    is 14.5 M, which resolves."""
    p = kvtier("config", ROOT / "configs" / "serving" / "mooncake.json", "--set", "serving.kv=tiered",
               "--set", "serving.preemption=recompute", "--set", "serving.limit=200", cwd=tmp_path)
    assert p.returncode == 0, p.stderr


def test_config_resolves_a_serving_config(kvtier, tmp_path):
    p = kvtier("config", ROOT / "configs" / "serving" / "mooncake.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    cfg = json.loads(p.stdout)
    assert "serving" in cfg and cfg["serving"]["requests"]
