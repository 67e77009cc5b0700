"""Routing by estimated first token (cluster.router "min_ttft", docs/cluster.md):
the estimate a request was routed on (requests.csv estimated_ttft_s) is its
TTFT exactly when it runs alone, with or without a cached prefix to load,
on one GPU, on tensor-parallel ranks (their all-reduces, their loads
sharing PCIe switches) and through pipeline stages (their hand-overs);
the router weighs where cached blocks lie, so a slower fabric sends fewer
prompts to read their prefix from another node; a decode instance's router
cannot be one that estimates a prefill."""

import csv
import json

import pytest

from conftest import ROOT, run_metrics as run

FARM = ROOT / "configs" / "cluster" / "replica_farm.json"
MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"
HGX = ROOT / "configs" / "hardware" / "hgx_h100x8.json"
TP = ROOT / "configs" / "cluster" / "hgx_node.json"
PP = ROOT / "configs" / "cluster" / "hgx_pipeline.json"
INSTANCES = pytest.mark.parametrize("preset", [FARM, TP, PP], ids=["one_gpu", "tp4", "pp2_tp4"])


def rows(out):
    with open(out / "requests.csv") as f:
        return list(csv.DictReader(f))


@INSTANCES
def test_a_lone_prompt_gets_the_first_token_it_was_routed_on(kvtier, tmp_path, preset):
    _, out = run(kvtier, tmp_path, "one", preset, "serving.limit=1", "cluster.router=min_ttft")
    (r,) = rows(out)
    assert float(r["queueing_s"]) == 0
    assert float(r["estimated_ttft_s"]) == pytest.approx(float(r["ttft_s"]), rel=1e-9)


@INSTANCES
def test_a_cached_prefix_loads_beside_the_prefill_as_estimated(kvtier, tmp_path, preset):
    # The second prompt, long after the first has finished, finds the
    # first's eight blocks in its instance's DRAM: each layer's share loads
    # from there while the layers before it compute.
    trace = tmp_path / "two.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 4096, "output_length": 2, "hash_ids": [1,2,3,4,5,6,7,8]}\n'
                     '{"timestamp": 100000, "input_length": 4600, "output_length": 2, '
                     '"hash_ids": [1,2,3,4,5,6,7,8,9]}\n')
    _, out = run(kvtier, tmp_path, "two", preset, "serving.requests.path=%s" % trace, "serving.time_scale=1",
                 "cluster.router=min_ttft")
    first, second = rows(out)
    assert int(second["hit_tokens_dram0"]) == 4096 and second["instance"] == first["instance"]
    for r in (first, second):
        assert float(r["estimated_ttft_s"]) == pytest.approx(float(r["ttft_s"]), rel=1e-9)
    # Loading the cached prefix is faster than computing it.
    assert float(second["ttft_s"]) < float(first["ttft_s"])


def two_nodes(GBps):
    return ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0", "ssd0"], "cluster": {"nodes": 2, '
            '"fabric": {"nic": "port", "nic_GBps": %s, "latency_us": 1.0}}}' % (HGX, GBps))


def pooled(router):
    return ('cluster={"replicas": 2, "tp": 2, "router": "%s", "kv_pool": "pooled", '
            '"gpus": ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]}' % router)


def test_a_slower_fabric_sends_fewer_prompts_to_read_their_prefix_remotely(kvtier, tmp_path):
    remote = {}
    for gbps in (50, 2):
        m, out = run(kvtier, tmp_path, "f%s" % gbps, MOONCAKE, two_nodes(gbps), pooled("min_ttft"), "serving.limit=300")
        remote[gbps] = m["pooled_cache"]["remote_hit_tokens"]
        assert m["prefix_hit_tokens"] > 0
        est = [float(r["estimated_ttft_s"]) for r in rows(out)]
        assert len(est) == 300 and all(e > 0 for e in est)
    assert remote[2] < remote[50]
    # The longest-prefix router does not weigh the fabric: the same choices at either speed.
    kv = [run(kvtier, tmp_path, "kv%s" % g, MOONCAKE, two_nodes(g), pooled("kv_aware"), "serving.limit=300")[0]
          for g in (50, 2)]
    assert kv[0]["pooled_cache"]["remote_hit_tokens"] == kv[1]["pooled_cache"]["remote_hit_tokens"]


def test_the_estimates_are_deterministic(kvtier, tmp_path):
    a = [run(kvtier, tmp_path, "d%d" % i, FARM, "serving.limit=100", "cluster.router=min_ttft")[1] for i in range(2)]
    assert (a[0] / "requests.csv").read_text() == (a[1] / "requests.csv").read_text()
    assert json.loads((a[0] / "result.json").read_text())["metrics"] == json.loads((a[1] / "result.json").read_text())["metrics"]
