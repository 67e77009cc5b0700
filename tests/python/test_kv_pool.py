"""A KV pool across the nodes of a cluster (cluster.kv_pool "pooled",
docs/cluster.md): one prefix cache of every instance's share. One instance
pooled is its local cache exactly; a pool finds at least the hits of local
caches behind round robin; a remote hit's load takes the route's latency
plus bytes over its bottleneck; a slower fabric never makes a pooled run
faster; every fabric byte of a pooled run is a byte the pool says it moved."""

import csv
import json

import pytest

from conftest import ROOT

MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"
HGX = ROOT / "configs" / "hardware" / "hgx_h100x8.json"


def run(kvtier, tmp_path, name, config, *sets, timeline=False):
    out = tmp_path / name
    args = ["run", config, "--out", out, "-q"]
    for s in sets:
        args += ["--set", s]
    if timeline:
        args += ["--timeline", out.with_suffix(".trace.json")]
    p = kvtier(*args, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "result.json").read_text())["metrics"], out


def flat(d, prefix=""):
    out = {}
    items = d.items() if isinstance(d, dict) else enumerate(d)
    for k, v in items:
        k = str(k)
        if isinstance(v, (dict, list)):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def two_nodes(GBps=50, latency_us=1.0):
    return ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0", "ssd0"], "cluster": {"nodes": 2, '
            '"fabric": {"nic": "port", "nic_GBps": %s, "latency_us": %s}}}' % (HGX, GBps, latency_us))


# Every node's first socket with 20 GB of DRAM: blocks go down to the drives.
TIGHT = "hardware.devices.dram0.capacity_GB=20"


@pytest.mark.parametrize("placement", ["local_first", "hashed"])
def test_pooled_on_one_instance_is_its_local_cache_exactly(kvtier, tmp_path, placement):
    sets = ["serving.limit=400"]
    local, ldir = run(kvtier, tmp_path, "local", MOONCAKE, *sets, 'cluster={"replicas": 1}')
    pooled, pdir = run(kvtier, tmp_path, "pooled", MOONCAKE, *sets,
                       'cluster={"replicas": 1, "kv_pool": "pooled", "kv_pool_placement": "%s"}' % placement)
    fl, fp = flat(local), flat(pooled)
    differ = [k for k in fl if fp.get(k) != fl[k]]
    assert not differ, [(k, fl[k], fp.get(k)) for k in differ[:5]]
    extra = sorted(set(fp) - set(fl))
    assert extra and all(k.startswith(("pooled_cache.", "prefix_cache.pool.", "instances.0.prefix_cache.pool."))
                         for k in extra), extra
    # Every hit is on the instance's own node.
    assert pooled["pooled_cache"]["remote_hit_tokens"] == 0 and pooled["pooled_cache"]["fabric_read_bytes"] == 0
    assert pooled["pooled_cache"]["local_hit_tokens"] == pooled["prefix_hit_tokens"] > 0
    a = (ldir / "requests.csv").read_text().splitlines()
    b = (pdir / "requests.csv").read_text().splitlines()
    assert [l.rsplit(",", 2)[0] for l in b] == a
    assert b[0].endswith(",remote_hit_tokens,remote_nodes") and all(l.endswith(",0,0") for l in b[1:])


# Two nodes of LLaMA-3.1-70B (FP8) instances, each on two GPUs, behind
# round robin: requests sharing a prefix land on both nodes.
TWO = ['cluster={"replicas": 2, "tp": 2, "router": "round_robin", "gpus": ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]}',
       "serving.limit=300"]


def pooled(sets):
    return [s.replace('"router"', '"kv_pool": "pooled", "router"') for s in sets]


@pytest.mark.parametrize("room", [None, TIGHT])
def test_a_pool_finds_at_least_the_local_caches_hits_and_every_fabric_byte_is_its_own(kvtier, tmp_path, room):
    sets = TWO + ([room] if room else [])
    local, _ = run(kvtier, tmp_path, "local", MOONCAKE, two_nodes(), *sets)
    pool, out = run(kvtier, tmp_path, "pooled", MOONCAKE, two_nodes(), *pooled(sets))
    assert "pooled_cache" not in local
    kp = pool["pooled_cache"]
    assert pool["prefix_hit_tokens"] > local["prefix_hit_tokens"]
    assert pool["computed_prompt_tokens"] < local["computed_prompt_tokens"]
    assert kp["remote_hit_tokens"] > 0 and kp["local_hit_tokens"] > 0
    assert kp["local_hit_tokens"] + kp["remote_hit_tokens"] == pool["prefix_hit_tokens"] == kp["prefill_tokens_saved"]
    # Per instance, summed.
    per = [i["prefix_cache"]["pool"] for i in pool["instances"]]
    assert sum(p["remote_hit_tokens"] for p in per) == kp["remote_hit_tokens"]
    # The fabric carried the pool's reads and writes between nodes and nothing else.
    up = pool["links"]["n0.fabric:up"]["bytes"] + pool["links"]["n1.fabric:up"]["bytes"]
    assert kp["fabric_read_bytes"] > 0
    assert up == pytest.approx(kp["fabric_read_bytes"] + kp["fabric_write_bytes"], rel=1e-9)
    assert local["links"]["n0.fabric:up"]["bytes"] + local["links"]["n1.fabric:up"]["bytes"] == 0
    # The pool's room is the instances' caches' room together.
    assert [t["tier"] for t in kp["tiers"]] == ["n0.dram0", "n0.ssd0"]  # the first instance's names, as metrics.tiers
    for t in kp["tiers"]:
        assert 0 <= t["used_blocks"] <= t["capacity_blocks"]
    assert kp["tiers"][0]["used_blocks"] > 0
    if room:  # the drives take what DRAM lets go of, and wear
        assert kp["tiers"][1]["used_blocks"] > 0 and pool["ssd_bytes_written"] > 0
    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert sum(int(r["remote_hit_tokens"]) for r in rows) == kp["remote_hit_tokens"]
    assert {r["remote_nodes"] for r in rows} <= {"0", "1"} and any(r["remote_nodes"] == "1" for r in rows)


def test_a_pooled_run_is_the_same_every_time(kvtier, tmp_path):
    a, adir = run(kvtier, tmp_path, "a", MOONCAKE, two_nodes(), *pooled(TWO), TIGHT)
    b, bdir = run(kvtier, tmp_path, "b", MOONCAKE, two_nodes(), *pooled(TWO), TIGHT)
    assert a == b
    assert (adir / "requests.csv").read_text() == (bdir / "requests.csv").read_text()


def test_a_slower_fabric_never_makes_a_pooled_run_faster(kvtier, tmp_path):
    fast, _ = run(kvtier, tmp_path, "fast", MOONCAKE, two_nodes(50), *pooled(TWO))
    slow, _ = run(kvtier, tmp_path, "slow", MOONCAKE, two_nodes(5), *pooled(TWO))
    assert slow["simulated_time_s"] >= fast["simulated_time_s"] * (1 - 1e-12)
    assert slow["ttft_s"]["mean"] >= fast["ttft_s"]["mean"] * (1 - 1e-12)
    assert slow["ttft_s"]["p99"] >= fast["ttft_s"]["p99"] * (1 - 1e-12)
    assert slow["pooled_cache"]["fabric_read_bytes"] > 0


def prefix_loads(trace_path):
    """The durations (s) of the prefix-cache loads on the timeline, in order."""
    events = json.loads(trace_path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    # The stream's own track (the links' tracks repeat each slice per link).
    track = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [e["dur"] * 1e-6 for e in events
            if e.get("ph") == "X" and e.get("name", "").startswith("prefix load")
            and track.get((e["pid"], e["tid"])) == e["args"]["stream"]]


def test_a_remote_hit_loads_in_the_routes_latency_plus_bytes_over_the_fabric(kvtier, tmp_path):
    # Two requests with the same 16-block prompt ten minutes apart: the first
    # is computed on node 0 and written into its DRAM; round robin sends the
    # second to node 1, which reads it from node 0's DRAM over an idle fabric.
    trace = tmp_path / "two.jsonl"
    line = {"input_length": 8192, "output_length": 4, "hash_ids": list(range(16))}
    trace.write_text("".join(json.dumps(dict(line, timestamp=t)) + "\n" for t in (0, 60000)))
    sets = ['serving.requests={"kind": "trace", "path": "%s"}' % trace,
            'cluster={"replicas": 2, "kv_pool": "pooled", "gpus": ["n0.gpu0", "n1.gpu0"]}']
    d = {}
    for GBps, lat in ((50, 1.0), (12.5, 3.0)):
        m, out = run(kvtier, tmp_path, "r%s" % GBps, MOONCAKE, two_nodes(GBps, lat), *sets, timeline=True)
        kp = m["pooled_cache"]
        assert kp["remote_hit_tokens"] == 8191 and kp["local_hit_tokens"] == 0  # the last token is computed
        layers = 80
        B = 8191 * 2 * 8 * 128 * 2  # a layer's K and V of the hit tokens, LLaMA-3-70B in FP16
        assert kp["fabric_read_bytes"] == pytest.approx(layers * B, rel=1e-12)
        loads = prefix_loads(out.with_suffix(".trace.json"))
        assert len(loads) == layers
        # Each layer's load alone on the fabric: the same time, every layer.
        assert max(loads) - min(loads) < 2e-9
        d[GBps] = (loads[0], lat, B)
    # The route's latency beside the fabric's (two fabric links on a star
    # route) is the same in both runs; the rest is bytes over the fabric's port.
    (t1, l1, B), (t2, l2, _) = d[50], d[12.5]
    rest1 = t1 - 2 * l1 * 1e-6 - B / 50e9
    rest2 = t2 - 2 * l2 * 1e-6 - B / 12.5e9
    assert rest1 == pytest.approx(rest2, abs=2e-9)
    # The rest of the route (configs/hardware/hgx_h100x8.json): DRAM 0.11 us,
    # its bus 0; on node 0 the switch's uplink and the adapter's PCIe link,
    # on node 1 the adapter's PCIe link and the GPU's, 1 us each; the
    # adapters' links to their node's port 0. The bottleneck is the port.
    assert rest1 == pytest.approx(0.11e-6 + 4 * 1e-6, abs=2e-9)


def slices(trace_path, prefix):
    """(start, end) in s of the slices named `prefix`... on their stream's own track, in order."""
    events = json.loads(trace_path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    track = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return sorted((e["ts"] * 1e-6, (e["ts"] + e["dur"]) * 1e-6) for e in events
                  if e.get("ph") == "X" and e.get("name", "").startswith(prefix)
                  and track.get((e["pid"], e["tid"])) == e["args"].get("stream"))


def test_a_block_another_instance_is_still_writing_is_read_once_it_has_landed(kvtier, tmp_path):
    # Request A's prompt is computed on node 0 and written into its DRAM as
    # its first token comes out (16 blocks, 2.7 GB: tens of milliseconds);
    # B, the same prompt on node 1, arrives 5 ms later and finds it cached.
    def trace(times_ms):
        t = tmp_path / ("t%d.jsonl" % len(times_ms))
        line = {"input_length": 8192, "output_length": 2, "hash_ids": list(range(16))}
        t.write_text("".join(json.dumps(dict(line, timestamp=x)) + "\n" for x in times_ms))
        return 'serving.requests={"kind": "trace", "path": "%s"}' % t
    sets = ['cluster={"replicas": 2, "kv_pool": "pooled", "gpus": ["n0.gpu0", "n1.gpu0"]}', "serving.time_scale=1"]
    alone, _ = run(kvtier, tmp_path, "alone", MOONCAKE, two_nodes(), trace([0]), *sets)
    b_at = int(alone["ttft_s"]["mean"] * 1e3) + 5
    both, out = run(kvtier, tmp_path, "both", MOONCAKE, two_nodes(), trace([0, b_at]), *sets, timeline=True)
    assert both["pooled_cache"]["remote_hit_tokens"] == 8191
    writes = slices(out.with_suffix(".trace.json"), "cache write n0.gpu0->n0.dram0")
    loads = slices(out.with_suffix(".trace.json"), "prefix load n0.dram0->n1.gpu0")
    assert writes and len(loads) == 80
    assert writes[-1][1] > b_at * 1e-3  # the write was still on its way when B arrived
    assert loads[0][0] >= writes[-1][1] - 1e-9


def test_kv_aware_routing_with_a_pool_prefers_the_node_that_holds_the_prefix(kvtier, tmp_path):
    # Four co-located TP=4 instances, two on each node, one pool: every
    # instance finds the same hits, so a KV-aware router weighs the prompt's
    # tokens held on each instance's own node, and more hits are read locally.
    pool = ROOT / "configs" / "cluster" / "mooncake_pool.json"
    frac = {}
    for router in ("round_robin", "kv_aware"):
        m, _ = run(kvtier, tmp_path, router, pool, "serving.limit=600",
                   'cluster={"tp": 4, "replicas": 4, "kv_pool": "pooled", "router": "%s"}' % router)
        frac[router] = m["pooled_cache"]["remote_hit_fraction"]
    assert frac["kv_aware"] < 0.75 * frac["round_robin"], frac


def test_hashed_placement_spreads_blocks_over_the_nodes_and_the_fabric_carries_it(kvtier, tmp_path):
    # Local first keeps what an instance writes on its own node while its
    # share has room; hashed sends each block to the share its hash names,
    # so about half the writes and half the hits of two nodes cross the
    # fabric whoever reads them, and every fabric byte is still the pool's.
    first, _ = run(kvtier, tmp_path, "first", MOONCAKE, two_nodes(), *pooled(TWO))
    hashed, _ = run(kvtier, tmp_path, "hashed", MOONCAKE, two_nodes(), *pooled(TWO),
                    "cluster.kv_pool_placement=hashed")
    kf, kh = first["pooled_cache"], hashed["pooled_cache"]
    assert 0.3 < kh["remote_hit_fraction"] < 0.7, kh["remote_hit_fraction"]
    assert kh["fabric_write_bytes"] > kf["fabric_write_bytes"]
    up = hashed["links"]["n0.fabric:up"]["bytes"] + hashed["links"]["n1.fabric:up"]["bytes"]
    assert up == pytest.approx(kh["fabric_read_bytes"] + kh["fabric_write_bytes"], rel=1e-9)
    # Where a block lies is placement's; whether it is cached, the one index's.
    assert kh["tiers"][0]["capacity_blocks"] == kf["tiers"][0]["capacity_blocks"]


@pytest.mark.parametrize("room", [None, TIGHT])
def test_hot_blocks_replicated_to_their_readers_are_read_locally(kvtier, tmp_path, room):
    sets = pooled(TWO) + ([room] if room else [])
    one, _ = run(kvtier, tmp_path, "one", MOONCAKE, two_nodes(), *sets)
    rep, out = run(kvtier, tmp_path, "rep", MOONCAKE, two_nodes(), *sets, "cluster.kv_pool_replicate_after=2")
    k1, kr = one["pooled_cache"], rep["pooled_cache"]
    assert "replicas" not in k1
    r = kr["replicas"]
    assert r["after_reads"] == 2 and r["made"] >= r["held"] and r["made"] > 0 and r["hit_tokens"] > 0
    # Reads of hot blocks stay on the reader's node: fewer cross the fabric.
    assert kr["remote_hit_fraction"] < k1["remote_hit_fraction"]
    assert kr["fabric_read_bytes"] < k1["fabric_read_bytes"]
    assert sum(i["prefix_cache"]["pool"]["replica_hit_tokens"] for i in rep["instances"]) == r["hit_tokens"]
    assert r["hit_tokens"] <= kr["local_hit_tokens"]
    # A copy is written from the reader's GPU into its own node: every fabric
    # byte is still a pool read or write, and the shares never overflow.
    up = rep["links"]["n0.fabric:up"]["bytes"] + rep["links"]["n1.fabric:up"]["bytes"]
    assert up == pytest.approx(kr["fabric_read_bytes"] + kr["fabric_write_bytes"], rel=1e-9)
    for t in kr["tiers"]:
        assert 0 <= t["used_blocks"] <= t["capacity_blocks"]
    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert sum(int(x["remote_hit_tokens"]) for x in rows) == kr["remote_hit_tokens"]


def test_hot_blocks_get_copies_on_several_readers_nodes(kvtier, tmp_path):
    # Four nodes, an instance of two GPUs on each, round robin: a hot block is
    # read from three other nodes. With up to three copies at once, more of
    # those reads stay on the reader's node than with one; the index, and so
    # the hits, are the same; one copy is the default exactly.
    hw = two_nodes().replace('"nodes": 2', '"nodes": 4')
    four = ['cluster={"replicas": 4, "tp": 2, "router": "round_robin", "kv_pool": "pooled", '
            '"kv_pool_replicate_after": 2, "gpus": ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1", "n2.gpu0", '
            '"n2.gpu1", "n3.gpu0", "n3.gpu1"]}', "serving.limit=300"]
    one, _ = run(kvtier, tmp_path, "one", MOONCAKE, hw, *four)
    same, _ = run(kvtier, tmp_path, "same", MOONCAKE, hw, *four, "cluster.kv_pool_copies=1")
    assert one == same
    three, _ = run(kvtier, tmp_path, "three", MOONCAKE, hw, *four, "cluster.kv_pool_copies=3")
    k1, k3 = one["pooled_cache"], three["pooled_cache"]
    assert k1["replicas"]["most_copies"] == 1 and k3["replicas"]["most_copies"] == 3
    assert k3["replicas"]["made"] > k1["replicas"]["made"]
    assert k3["replicas"]["hit_tokens"] > k1["replicas"]["hit_tokens"]
    assert k3["remote_hit_tokens"] < k1["remote_hit_tokens"]
    assert k3["fabric_read_bytes"] < k1["fabric_read_bytes"]
    assert three["prefix_hit_tokens"] == one["prefix_hit_tokens"]
    for t in k3["tiers"]:
        assert 0 <= t["used_blocks"] <= t["capacity_blocks"]


def test_a_pipelines_virtual_engines_read_each_others_blocks_from_the_pool(kvtier, tmp_path):
    # One instance of two stages, two virtual engines. Prompts A and B come
    # together (A to the first engine, B to the second), then again once
    # both have finished, the other way round: with a cache per engine each
    # finds nothing the second time; pooled, each reads what the other wrote.
    trace = tmp_path / "ab.jsonl"
    a, b = list(range(1, 9)), list(range(11, 19))
    rows = [(0, a), (0, b), (600000, b), (600000, a)]
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 4096, "output_length": 2, "hash_ids": h}) + "\n"
                             for t, h in rows))
    hw = 'hardware={"preset": "%s", "tiers": ["gpu0", "dram0"]}' % HGX
    sets = [hw, "serving.requests.path=%s" % trace, "serving.time_scale=1"]
    local, _ = run(kvtier, tmp_path, "local", MOONCAKE, *sets, 'cluster={"pp": 2, "replicas": 1}')
    pool, out = run(kvtier, tmp_path, "pooled", MOONCAKE, *sets, 'cluster={"pp": 2, "replicas": 1, "kv_pool": "pooled"}')
    assert local["prefix_hit_tokens"] == 0
    hit = 2 * 4095  # the prompt's last token is computed (it yields the first token)
    assert pool["prefix_hit_tokens"] == hit
    assert pool["pooled_cache"]["members"] == 2
    assert pool["pooled_cache"]["local_hit_tokens"] == hit and pool["pooled_cache"]["fabric_read_bytes"] == 0
    assert pool["computed_prompt_tokens"] == local["computed_prompt_tokens"] - hit


def test_pipeline_stages_on_two_nodes_pool_their_blocks_and_the_fabric_carries_each_gpus_share(kvtier, tmp_path):
    # Two instances of two stages (one GPU each), one per node, round robin.
    sets = ['cluster={"replicas": 2, "pp": 2, "router": "round_robin", '
            '"gpus": ["n0.gpu0", "n0.gpu1", "n1.gpu0", "n1.gpu1"]}', "serving.limit=300"]
    local, _ = run(kvtier, tmp_path, "local", MOONCAKE, two_nodes(), *sets)
    pool, _ = run(kvtier, tmp_path, "pooled", MOONCAKE, two_nodes(), *pooled(sets))
    kp = pool["pooled_cache"]
    assert kp["members"] == 4
    assert pool["prefix_hit_tokens"] > local["prefix_hit_tokens"]
    assert kp["remote_hit_tokens"] > 0
    assert kp["local_hit_tokens"] + kp["remote_hit_tokens"] == pool["prefix_hit_tokens"]
    # Each stage's GPU reads its layers' share: together, every layer of every remote token, once.
    tp1, _ = run(kvtier, tmp_path, "tp", MOONCAKE, two_nodes(), *pooled(TWO))
    per_token = tp1["pooled_cache"]["fabric_read_bytes"] / tp1["pooled_cache"]["remote_hit_tokens"]
    assert kp["fabric_read_bytes"] == pytest.approx(kp["remote_hit_tokens"] * per_token, rel=1e-12)
    up = pool["links"]["n0.fabric:up"]["bytes"] + pool["links"]["n1.fabric:up"]["bytes"]
    assert up == pytest.approx(kp["fabric_read_bytes"] + kp["fabric_write_bytes"], rel=1e-9)
    slow, _ = run(kvtier, tmp_path, "slow", MOONCAKE, two_nodes(5), *pooled(sets))
    assert slow["simulated_time_s"] >= pool["simulated_time_s"] * (1 - 1e-12)
    assert slow["ttft_s"]["mean"] >= pool["ttft_s"]["mean"] * (1 - 1e-12)
