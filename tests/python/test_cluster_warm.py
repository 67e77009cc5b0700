"""A warm start in a cluster (serving.prefix_cache.warm, docs/cluster.md):
one instance warm is the warm serving run exactly; every instance's own
cache starts holding the stream; a pool starts holding it, placed by its
placement with nothing moved or written for it; and a warm run is the same
every time."""

import csv

import pytest

from conftest import ROOT, run_metrics as run
# The check that one instance is the serving run, every metric and requests.csv line.
from test_cluster import test_one_instance_is_the_serving_run_exactly as one_instance_is_the_serving_run

MATKV = ROOT / "configs" / "serving" / "matkv_rag.json"
MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"
HGX = ROOT / "configs" / "hardware" / "hgx_h100x8.json"
WARM = "serving.prefix_cache.warm=true"

# Two nodes of LLaMA-3.1-70B (FP8) instances, each on two GPUs, behind
# round robin; 300 requests whose 7,814 distinct blocks fit the pool's DRAM.
TWO_NODES = ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0", "ssd0"], "cluster": {"nodes": 2, '
             '"fabric": {"nic": "port", "nic_GBps": 50, "latency_us": 1.0}}}' % HGX)


def two(pool=None):
    c = '"replicas": 2, "tp": 2, "router": "round_robin", "gpus": ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]'
    if pool:
        c += ', "kv_pool": "pooled", "kv_pool_placement": "%s"' % pool
    return [TWO_NODES, "cluster={%s}" % c, "serving.limit=300"]


def rows(out):
    with open(out / "requests.csv") as f:
        return list(csv.DictReader(f))


def hits(row):
    return sum(int(v) for k, v in row.items() if k.startswith("hit_tokens_"))


@pytest.mark.parametrize("config,sets", [
    (MATKV, ["serving.requests.requests=120"]),  # warm as published
    (MOONCAKE, ["serving.limit=200", WARM]),
])
def test_one_warm_instance_is_the_warm_serving_run_exactly(kvtier, tmp_path, config, sets):
    one_instance_is_the_serving_run(kvtier, tmp_path, config, sets)


@pytest.mark.parametrize("placement", ["hashed", "local_first"])
def test_a_warm_pool_holds_the_stream_from_the_start_and_writes_no_more(kvtier, tmp_path, placement):
    cold, cdir = run(kvtier, tmp_path, "cold", MOONCAKE, *two(placement))
    warm, wdir = run(kvtier, tmp_path, "warm", MOONCAKE, *two(placement), WARM)
    kc, kw = cold["pooled_cache"], warm["pooled_cache"]
    assert sum(t["used_blocks"] for t in kw["tiers"]) == warm["prefix_cache"]["distinct_blocks"] <= \
        kw["tiers"][0]["capacity_blocks"]
    # The first request finds every block of its prompt (all but the token
    # computed to start decoding); cold, nothing.
    first_c, first_w = rows(cdir)[0], rows(wdir)[0]
    assert hits(first_c) == 0
    assert hits(first_w) == int(first_w["input_tokens"]) - int(first_w["computed_prompt_tokens"]) > 0
    assert int(first_w["computed_prompt_tokens"]) == 1
    assert warm["prefix_hit_tokens"] >= cold["prefix_hit_tokens"]
    assert warm["computed_prompt_tokens"] <= cold["computed_prompt_tokens"]
    # Warm blocks are not written: the stream fits the DRAM, so nothing is.
    assert kw["fabric_write_bytes"] <= kc["fabric_write_bytes"]
    assert kw["fabric_write_bytes"] == 0 and warm["prefix_cache"]["write_bytes"] == 0
    assert warm["ssd_bytes_written"] == 0
    if placement == "hashed":
        # Both shares hold blocks from the start: the first request, on node
        # 0, reads some of its prefix from node 1's share and some from its own.
        assert kc["fabric_write_bytes"] > 0
        assert 0 < int(first_w["remote_hit_tokens"]) < hits(first_w) and first_w["remote_nodes"] == "1"
        assert first_w["instance"] == "n0.gpu0"


def test_warm_local_caches_each_start_holding_the_stream(kvtier, tmp_path):
    cold, cdir = run(kvtier, tmp_path, "cold", MOONCAKE, *two())
    warm, wdir = run(kvtier, tmp_path, "warm", MOONCAKE, *two(), WARM)
    assert "pooled_cache" not in warm
    for name, out, want_hits in (("cold", cdir, False), ("warm", wdir, True)):
        firsts = {}
        for r in rows(out):
            firsts.setdefault(r["instance"], r)
        assert sorted(firsts) == ["n0.gpu0", "n1.gpu0"]
        for r in firsts.values():  # each instance's first request
            if want_hits:
                assert hits(r) == int(r["input_tokens"]) - 1 > 0, name
            else:
                assert hits(r) == 0, name
    assert warm["prefix_hit_tokens"] > cold["prefix_hit_tokens"]


def test_a_warm_cluster_run_is_the_same_every_time(kvtier, tmp_path):
    a, adir = run(kvtier, tmp_path, "a", MOONCAKE, *two("local_first"), WARM)
    b, bdir = run(kvtier, tmp_path, "b", MOONCAKE, *two("local_first"), WARM)
    assert a == b
    assert (adir / "requests.csv").read_text() == (bdir / "requests.csv").read_text()
