"""The cluster engine (docs/cluster.md): model instances on a machine's GPUs
behind a router. One instance is the serving run exactly; N instances on
identical requests are N times one; the routers route as they say; shared
host memory is shared out; a slower link never makes the cluster faster."""

import csv
import json

import pytest

from conftest import ROOT, flat, run_metrics as run

FOUR = ROOT / "tests" / "data" / "cluster" / "four_a100.json"
FOUR_H200 = ROOT / "tests" / "data" / "cluster" / "four_h200.json"
VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"


FOUR_HW = 'hardware={"preset": "%s"}' % FOUR
# Mooncake's preset keeps its KV in DRAM and an SSD below its H200s.
FOUR_H200_HW = 'hardware={"preset": "%s", "tiers": ["gpu", "dram", "ssd"]}' % FOUR_H200


@pytest.mark.parametrize("config,sets", [
    (VLLM, []),
    (ROOT / "configs" / "serving" / "prefix_example.json", []),
    (MOONCAKE, ["serving.limit=400"]),
])
def test_one_instance_is_the_serving_run_exactly(kvtier, tmp_path, config, sets):
    plain, pdir = run(kvtier, tmp_path, "plain", config, *sets)
    one, cdir = run(kvtier, tmp_path, "cluster", config, *sets, 'cluster={"replicas": 1}')
    fp, fc = flat(plain), flat(one)
    differ = [k for k in fp if fc.get(k) != fp[k]]
    assert not differ, [(k, fp[k], fc.get(k)) for k in differ[:5]]
    assert len(one["instances"]) == 1 and one["instances"][0]["requests"] == plain["requests"]
    # requests.csv: the same lines, each with the instance that served it.
    a = (pdir / "requests.csv").read_text().splitlines()
    b = (cdir / "requests.csv").read_text().splitlines()
    assert [l.rsplit(",", 1)[0] for l in b] == a
    assert b[0].endswith(",instance") and all(l.endswith(",gpu") for l in b[1:])


@pytest.mark.parametrize("router", ["round_robin", "least_tokens", "kv_aware", "min_ttft"])
def test_n_instances_on_identical_requests_are_n_times_one(kvtier, tmp_path, router):
    one, _ = run(kvtier, tmp_path, "one", VLLM, "serving.requests.count=15", "serving.preemption=recompute")
    four, out = run(kvtier, tmp_path, "four", VLLM, FOUR_HW, "serving.requests.count=60", "serving.preemption=recompute",
                    'cluster={"replicas": 4, "router": "%s"}' % router)
    assert four["throughput_tokens_per_s"] == pytest.approx(4 * one["throughput_tokens_per_s"], rel=1e-9)
    assert four["simulated_time_s"] == pytest.approx(one["simulated_time_s"], rel=1e-9)
    assert [i["requests"] for i in four["instances"]] == [15] * 4
    assert [i["gpu"] for i in four["instances"]] == ["gpu", "gpu1", "gpu2", "gpu3"]
    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert sorted({r["instance"] for r in rows}) == ["gpu", "gpu1", "gpu2", "gpu3"]


def test_least_tokens_balances_what_round_robin_does_not(kvtier, tmp_path):
    # Alternating long and short prompts: round-robin gives one instance
    # every long one; least-tokens spreads them.
    sets = [FOUR_H200_HW, "serving.limit=200", "serving.preemption=recompute"]
    rr, _ = run(kvtier, tmp_path, "rr", MOONCAKE, *sets, 'cluster={"replicas": 2, "router": "round_robin"}')
    lt, _ = run(kvtier, tmp_path, "lt", MOONCAKE, *sets, 'cluster={"replicas": 2, "router": "least_tokens"}')
    spread = lambda m: abs(m["instances"][0]["prompt_tokens"] - m["instances"][1]["prompt_tokens"])
    assert sum(i["requests"] for i in lt["instances"]) == 200
    assert spread(lt) < spread(rr)
    assert lt["ttft_s"]["p50"] <= rr["ttft_s"]["p50"]


def test_min_ttft_weighs_a_queued_prompt_as_it_weighs_the_prompt_it_routes(kvtier, tmp_path):
    # Prompts of 400, 200 and 200 tokens at once on two idle instances: the
    # first goes to one, the second to the other, and the third queues behind
    # the second, the same prompt. Its estimated first token is then twice
    # the second's: the queued prompt's layers, embedding and LM head (a
    # vocabulary of a million reads an 8 GB head once per pass), then its own.
    trace = tmp_path / "three.jsonl"
    lines = [{"timestamp": 0, "input_length": n, "output_length": 4, "hash_ids": [i]}
             for i, n in enumerate([400, 200, 200])]
    trace.write_text("".join(json.dumps(l) + "\n" for l in lines))
    for vocab in (0, 1000000):
        _, d = run(kvtier, tmp_path, "v%d" % vocab, VLLM, FOUR_HW, "serving.preemption=recompute",
                   'serving.requests={"kind": "trace", "path": "%s"}' % trace,
                   'cluster={"replicas": 2, "router": "min_ttft"}', "model.vocab_size=%d" % vocab)
        rows = list(csv.DictReader(open(d / "requests.csv")))
        assert rows[1]["instance"] == rows[2]["instance"] != rows[0]["instance"]
        second, third = float(rows[1]["estimated_ttft_s"]), float(rows[2]["estimated_ttft_s"])
        assert third == pytest.approx(2 * second, rel=1e-9), vocab


def test_kv_aware_routing_finds_more_cached_prefix_than_round_robin(kvtier, tmp_path):
    sets = [FOUR_H200_HW, "serving.limit=1500", "serving.preemption=recompute"]
    rr, _ = run(kvtier, tmp_path, "rr", MOONCAKE, *sets, 'cluster={"replicas": 4, "router": "round_robin"}')
    kv, _ = run(kvtier, tmp_path, "kv", MOONCAKE, *sets, 'cluster={"replicas": 4, "router": "kv_aware"}')
    assert kv["prefix_hit_tokens"] > 1.2 * rr["prefix_hit_tokens"]
    assert kv["computed_prompt_tokens"] < rr["computed_prompt_tokens"]


def test_instances_sharing_host_memory_get_a_share_each(kvtier, tmp_path):
    # Four instances, one 64 GB DRAM: each prefix cache holds at most a quarter.
    sets = [FOUR_H200_HW, "serving.limit=1500", "serving.preemption=recompute", "hardware.devices.dram.capacity_GB=64"]
    one, _ = run(kvtier, tmp_path, "one", MOONCAKE, *sets, 'cluster={"replicas": 1}')
    four, _ = run(kvtier, tmp_path, "four", MOONCAKE, *sets, 'cluster={"replicas": 4, "router": "kv_aware"}')
    assert all(i["tier_devices"] == [i["gpu"], "dram", "ssd"] for i in four["instances"])
    assert one["tiers"]["dram"]["peak_bytes"] > 16e9
    peaks = [i["tiers"]["dram"]["peak_bytes"] for i in four["instances"]]
    assert max(peaks) <= 16e9 and min(peaks) > 8e9, peaks
    # The cluster's tier: the instances' bytes summed, its peak their peaks'
    # sum (at least the mean of the sum).
    assert four["tiers"]["dram"]["peak_bytes"] == pytest.approx(sum(peaks), rel=1e-12)
    assert four["tiers"]["dram"]["peak_bytes"] >= four["tiers"]["dram"]["mean_bytes"]
    assert four["kv_pool_blocks"] == 4 * one["kv_pool_blocks"]


def test_a_slower_host_link_never_makes_the_cluster_faster(kvtier, tmp_path):
    # Round-robin: the routing does not depend on timing (a load-aware router
    # may route differently on a slower machine, a different run).
    sets = [FOUR_H200_HW, "serving.limit=300", "serving.preemption=recompute", 'cluster={"replicas": 2}']
    fast, _ = run(kvtier, tmp_path, "fast", MOONCAKE, *sets)
    slow, _ = run(kvtier, tmp_path, "slow", MOONCAKE, *sets, "hardware.links.pcie_gpu1.pcie=\"gen3x4\"")
    assert slow["prefix_hit_tokens"] == fast["prefix_hit_tokens"]
    assert slow["simulated_time_s"] >= fast["simulated_time_s"] * (1 - 1e-12)
    assert slow["ttft_s"]["mean"] >= fast["ttft_s"]["mean"] * (1 - 1e-12)
    assert slow["links"] != fast["links"]


ONE_REQUEST = 'serving.requests={"kind": "identical", "count": 1, "input_tokens": 8192, "output_tokens": 4}'


def test_a_prefilled_prompts_kv_moves_to_its_decode_gpu_in_latency_plus_bytes_over_bandwidth(kvtier, tmp_path):
    colo, _ = run(kvtier, tmp_path, "colo", MOONCAKE, FOUR_H200_HW, ONE_REQUEST, 'cluster={"replicas": 1}')
    dis, out = run(kvtier, tmp_path, "dis", MOONCAKE, FOUR_H200_HW, ONE_REQUEST,
                   'cluster={"replicas": 2, "prefill_replicas": 1}')
    # Llama-3-70B: 80 layers x 2 x 8 KV heads x 128 x 2 bytes per token.
    kv = 8192 * 80 * 2 * 8 * 128 * 2
    # GPU to root complex to GPU: two PCIe 5.0 x16 hops of 1 us; 32 GT/s x 16
    # lanes, 128b/130b, 256-byte payloads behind 24 bytes of TLP overhead.
    bw = 32e9 * 16 / 8 * 128 / 130 * 256 / 280
    assert dis["ttft_s"]["mean"] - colo["ttft_s"]["mean"] == pytest.approx(2e-6 + kv / bw, rel=1e-9)
    assert dis["links"]["pcie_gpu:gpu->root"]["bytes"] == kv
    assert dis["links"]["pcie_gpu1:root->gpu1"]["bytes"] == kv
    assert [i["role"] for i in dis["instances"]] == ["prefill", "decode"]
    row = next(csv.DictReader(open(out / "requests.csv")))
    assert (row["instance"], row["decode_instance"]) == ("gpu", "gpu1")


def test_disaggregation_trades_ttft_for_steady_tpot(kvtier, tmp_path):
    sets = [FOUR_H200_HW, "serving.limit=600"]
    colo, _ = run(kvtier, tmp_path, "colo", MOONCAKE, *sets, 'cluster={"replicas": 4}')
    dis, _ = run(kvtier, tmp_path, "dis", MOONCAKE, *sets, 'cluster={"replicas": 4, "prefill_replicas": 2}')
    assert [i["role"] for i in dis["instances"]] == ["prefill"] * 2 + ["decode"] * 2
    assert sum(i["requests"] for i in dis["instances"][:2]) == 600
    assert dis["requests"] == colo["requests"] == 600
    assert dis["output_tokens"] == colo["output_tokens"]
    # Decode iterations no longer wait behind prefill chunks: the TPOT tail
    # shrinks; prefill has half the GPUs and the KV must move: TTFT grows.
    assert dis["tpot_s"]["p99"] < 0.5 * colo["tpot_s"]["p99"]
    assert dis["ttft_s"]["p50"] > colo["ttft_s"]["p50"]
    pulled = sum(v["bytes"] for k, v in dis["links"].items() if k.endswith("->root") and k.startswith("pcie_gpu"))
    assert pulled > 0


HGX = ROOT / "configs" / "hardware" / "hgx_h100x8.json"
# vLLM's OPT-6.7B requests on an HGX node, the GPU's KV room given (so that
# the room does not depend on the weights each rank holds).
HGX_HW = 'hardware={"preset": "%s", "tiers": ["gpu0", "dram0"], "kv_capacity": {"gpu0": "4GB"}}' % HGX
OPT_LAYERS, OPT_HIDDEN = 32, 4096


@pytest.mark.parametrize("algo", ["switch", "ring"])
def test_tensor_parallel_all_reduces_take_their_closed_form(kvtier, tmp_path, algo):
    m, _ = run(kvtier, tmp_path, algo, VLLM, HGX_HW, 'cluster={"tp": 4, "replicas": 1, "allreduce": "%s"}' % algo)
    inst = m["instances"][0]
    assert inst["gpus"] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    n, bw, hop = 4, 450e9, 0.5e-6  # NVLink 4: 450 GB/s a direction, 0.5 us to the switch
    # Two all-reduces a layer of every computed token's hidden state (FP16).
    tokens = inst["computed_prompt_tokens"] + inst["output_tokens"] - inst["requests"]
    assert inst["allreduce_bytes"] == 2 * OPT_LAYERS * tokens * OPT_HIDDEN * 2
    # Switch: every rank sends 2B/n to each other rank at once, two phases of
    # GPU-switch-GPU latency; ring: 2(n-1) steps, 2(n-1)/n x B on each hop.
    latency = 2 * (2 * hop) if algo == "switch" else 2 * (n - 1) * (2 * hop)
    expect = inst["iterations"] * 2 * OPT_LAYERS * latency + 2 * (n - 1) / n * inst["allreduce_bytes"] / bw
    assert inst["allreduce_s"] == pytest.approx(expect, rel=1e-6)
    # What each rank's NVLink carried: its sends, 2(n-1)/n x B in all.
    links = m["links"]
    for g in range(4):
        assert links["nvlink%d:gpu%d->nvswitch" % (g, g)]["bytes"] == pytest.approx(
            2 * (n - 1) / n * inst["allreduce_bytes"], rel=1e-12)
    assert all(links["nvlink%d:gpu%d->nvswitch" % (g, g)]["bytes"] == 0 for g in range(4, 8))


def test_tensor_parallel_ranks_hold_a_quarter_of_each_block(kvtier, tmp_path):
    room = HGX_HW.replace('"4GB"', '"8GB"')
    one, _ = run(kvtier, tmp_path, "one", VLLM, room, 'cluster={"replicas": 1}')
    four, _ = run(kvtier, tmp_path, "four", VLLM, room, 'cluster={"tp": 4, "replicas": 1}')
    # The same 8 GB on each GPU holds four times the blocks: a rank keeps a
    # quarter of every block's KV heads.
    assert abs(four["kv_pool_blocks"] - 4 * one["kv_pool_blocks"]) < 4
    assert "allreduce_s" not in one["instances"][0]
    # Each rank computes a quarter of the work: the run is faster, but not
    # four times (all-reduces, and the part of an iteration that does not shrink).
    assert four["simulated_time_s"] < one["simulated_time_s"]
    assert four["instances"][0]["allreduce_s"] > 0


def test_tensor_parallel_ranks_swap_their_own_share_over_their_own_links(kvtier, tmp_path):
    # Room for two prompts but not for both to grow: one is swapped out.
    room = HGX_HW.replace('"4GB"', '"2.17GB"')
    m, _ = run(kvtier, tmp_path, "swap", VLLM, room, 'cluster={"tp": 4, "replicas": 1}')
    assert m["swapped_out"] > 0 and m["swapped_in"] == m["swapped_out"]
    down = [m["links"]["pcie_gpu%d:gpu%d->pcie_sw%d" % (g, g, g // 2)]["bytes"] for g in range(4)]
    up = [m["links"]["pcie_gpu%d:pcie_sw%d->gpu%d" % (g, g // 2, g)]["bytes"] for g in range(4)]
    # Every rank moves its quarter of every swapped block on its own PCIe
    # link, out and back; together they move the instance's swap bytes.
    assert len(set(down)) == 1 and down == up
    assert 4 * (down[0] + up[0]) == m["swap_bytes"]
    assert all(m["links"]["pcie_gpu%d:gpu%d->pcie_sw%d" % (g, g, g // 2)]["bytes"] == 0 for g in range(4, 8))


def test_a_slower_nvlink_never_makes_a_tensor_parallel_instance_faster(kvtier, tmp_path):
    fast, _ = run(kvtier, tmp_path, "fast", VLLM, HGX_HW, 'cluster={"tp": 4, "replicas": 1}')
    slow, _ = run(kvtier, tmp_path, "slow", VLLM, HGX_HW, 'cluster={"tp": 4, "replicas": 1}',
                  "hardware.links.nvlink2.bandwidth_GBps=50")
    assert slow["simulated_time_s"] > fast["simulated_time_s"]
    assert slow["instances"][0]["allreduce_s"] > fast["instances"][0]["allreduce_s"]
    assert slow["output_tokens"] == fast["output_tokens"]


def test_a_sweep_runs_cluster_points_on_the_cluster_engine(kvtier, tmp_path):
    sweep = ROOT / "configs" / "sweeps" / "cluster_disaggregation.json"
    p = kvtier("sweep", sweep, "--set", "serving.limit=12", "--set", 'serving.time_scale=3', "-j2",
               "--out", tmp_path / "s.jsonl", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in (tmp_path / "s.jsonl").read_text().splitlines()]
    roles = {r["overrides"]["cluster.prefill_replicas"]: [i["role"] for i in r["result"]["metrics"]["instances"]]
             for r in rows}
    assert roles[0] == ["both"] * 4 and roles[2] == ["prefill"] * 2 + ["decode"] * 2
    assert all(r["result"]["metrics"]["requests"] == 12 for r in rows)


def test_a_prompts_kv_pulled_across_nodes_takes_the_routes_latency_plus_bytes_over_the_fabric(kvtier, tmp_path):
    # Two HGX nodes on a star fabric of 50 GB/s ports; the prefill instance on
    # node 0's gpu0, the decode instance on node 1's.
    hw = ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0", "ssd0"], "cluster": {"nodes": 2, '
          '"fabric": {"nic": "port", "nic_GBps": 50, "latency_us": 1.0}}}' % HGX)
    colo, _ = run(kvtier, tmp_path, "colo", MOONCAKE, hw, ONE_REQUEST, 'cluster={"replicas": 1}')
    dis, _ = run(kvtier, tmp_path, "dis", MOONCAKE, hw, ONE_REQUEST,
                 'cluster={"replicas": 2, "prefill_replicas": 1, "gpus": ["n0.gpu0", "n1.gpu0"]}')
    kv = 8192 * 80 * 2 * 8 * 128 * 2
    # GPU -> PCIe switch -> adapter -> port (1 + 1 + 0 us), the node's fabric
    # port up and down (1 us each; the star's core adds none), and the same
    # back down on node 1: 6 us; the bottleneck is a 50 GB/s port (PCIe 5.0
    # x16 carries 57.6 GB/s of payload, the star's core 100 GB/s).
    assert dis["ttft_s"]["mean"] - colo["ttft_s"]["mean"] == pytest.approx(6e-6 + kv / 50e9, rel=1e-9)
    moved = {k for k, v in dis["links"].items() if v["bytes"] == kv}
    assert {"n0.fabric:up", "fabric.core", "n1.fabric:down", "n0.pcie_gpu0:n0.gpu0->n0.pcie_sw0",
            "n1.pcie_gpu0:n1.pcie_sw0->n1.gpu0"} <= moved
    # Per node: its instances, and what it sent into and took from the fabric.
    n0, n1 = dis["nodes"]
    assert (n0["node"], n0["instances"], n1["instances"]) == ("n0", ["n0.gpu0"], ["n1.gpu0"])
    assert n0["fabric_bytes_out"] == n1["fabric_bytes_in"] == kv and n0["fabric_bytes_in"] == n1["fabric_bytes_out"] == 0
    assert "nodes" not in colo or all(n["fabric_bytes_out"] == 0 for n in colo["nodes"])
    # A slower fabric never makes it faster.
    slow, _ = run(kvtier, tmp_path, "slow", MOONCAKE, hw.replace('"nic_GBps": 50', '"nic_GBps": 12.5'), ONE_REQUEST,
                  'cluster={"replicas": 2, "prefill_replicas": 1, "gpus": ["n0.gpu0", "n1.gpu0"]}')
    assert slow["ttft_s"]["mean"] - colo["ttft_s"]["mean"] == pytest.approx(6e-6 + kv / 12.5e9, rel=1e-9)


@pytest.mark.parametrize("config,sets,merged", [
    # TP=4 through the NVSwitch, two instances on one node: nothing else crosses their NVLinks.
    (ROOT / "configs" / "cluster" / "hgx_node.json", ["serving.limit=15"], True),
    # Prefill on node 0, decode on node 1, ring all-reduces; KV crosses the fabric.
    (ROOT / "configs" / "cluster" / "mooncake_disaggregated.json", ["serving.limit=15"], True),
    # Prefill and decode instances on one node: their KV moves GPU to GPU over
    # the NVSwitch, so the all-reduces share links with it, run as flows, and
    # every layer runs on its own.
    (ROOT / "configs" / "cluster" / "hgx_node.json",
     ["serving.limit=15", 'cluster={"tp": 4, "prefill_replicas": 1, "allreduce": "ring"}'], False),
    # Each TP=2 instance spans both nodes: its all-reduces cross the fabric the
    # KV pulls cross (no NVLink is shared: each rank's pull goes to the other node).
    (ROOT / "configs" / "cluster" / "mooncake_disaggregated.json",
     ["serving.limit=10", 'cluster={"tp": 2, "replicas": 2, "prefill_replicas": 1, '
                          '"gpus": ["n0.gpu0", "n1.gpu0", "n1.gpu4", "n0.gpu4"]}'], False),
    # A KV pool over both nodes: its reads, writes and demotions between the
    # shares are routes the all-reduces must not share.
    (ROOT / "configs" / "cluster" / "mooncake_pool.json", ["serving.limit=15"], True),
])
def test_fewer_simgrid_activities_give_the_times_of_every_layer_and_flow(kvtier, tmp_path, config, sets, merged):
    # serving.coarsen false runs every layer's kernel and every all-reduce's
    # flows on their own: the reference for the closed forms and merged layers.
    fast, fdir = run(kvtier, tmp_path, "fast", config, *sets)
    ref, rdir = run(kvtier, tmp_path, "ref", config, *sets, "serving.coarsen=false")
    assert ref["layered_iterations"] == ref["iterations"]
    if merged is not None:
        assert (fast["layered_iterations"] < ref["layered_iterations"]) == merged
    # SimGrid updates times to 1e-9 s (surf/precision), so the reference's
    # all-reduce time, a sum of thousands of flows of about 10 us each, agrees
    # with the closed forms to about 1e-8 (1.3e-8 seen on one instance of the
    # pooled case at 8 requests), and every other time to about 1e-9.
    assert fast["simulated_time_s"] == pytest.approx(ref["simulated_time_s"], rel=1e-8)
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        for q in ("mean", "p50", "p99"):
            assert fast[k][q] == pytest.approx(ref[k][q], rel=1e-8), (k, q)
    for f, r in zip(fast["instances"], ref["instances"]):
        assert f["allreduce_s"] == pytest.approx(r["allreduce_s"], rel=3e-8)
        assert f["allreduce_bytes"] == pytest.approx(r["allreduce_bytes"], rel=1e-12)
    for name, link in ref["links"].items():
        assert fast["links"][name]["bytes"] == pytest.approx(link["bytes"], rel=1e-12, abs=1e-3), name
        # Busy while a transfer or an all-reduce's latency steps hold it, merged or not.
        assert fast["links"][name]["busy_fraction"] == pytest.approx(link["busy_fraction"], rel=1e-6, abs=1e-12), name
    # A GPU's power over a window: merged layers' work is spread over their
    # kernel and the all-reduces after it, as layer by layer (to 5%: a window
    # spans a few layers, and where one cuts an iteration the two runs place
    # its work differently; the merged kernel alone gave peaks 6-9% high).
    for name, dev in ref["energy"]["devices"].items():
        if "gpu" in name:
            assert fast["energy"]["devices"][name]["peak_W"] == pytest.approx(dev["peak_W"], rel=0.05), name


def test_the_timeline_has_a_compute_track_per_gpu_with_every_kernel(kvtier, tmp_path):
    out = tmp_path / "tl"
    p = kvtier("run", ROOT / "configs" / "cluster" / "hgx_node.json", "--set", "serving.limit=4", "--out", out,
               "--timeline", out / "timeline.json", "-q", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "timeline.json").read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name"}
    slices = {}
    for e in events:
        if e.get("ph") == "X" and tracks.get((e["pid"], e["tid"]), "").endswith(" compute"):
            slices.setdefault(tracks[(e["pid"], e["tid"])], []).append((e["ts"], e["dur"], e["name"]))
    # Two TP=4 instances: every rank's GPU has its track, the same kernels as its instance's first rank.
    assert sorted(slices) == ["gpu%d compute" % g for g in range(8)]
    for g in range(8):
        assert slices["gpu%d compute" % g] == slices["gpu%d compute" % (g // 4 * 4)]
    assert slices["gpu0 compute"] and slices["gpu4 compute"]


def test_kv_capacity_holds_for_every_instance_on_every_node(kvtier, tmp_path):
    # hardware.kv_capacity names the tiers as written ("gpu0"); on two nodes
    # every instance's GPU gets that room, as on one node.
    cap = 'hardware.kv_capacity={"gpu0": "20GB"}'
    one, _ = run(kvtier, tmp_path, "one", ROOT / "configs" / "cluster" / "hgx_node.json", "serving.limit=3", cap)
    two, _ = run(kvtier, tmp_path, "two", ROOT / "configs" / "cluster" / "mooncake_disaggregated.json",
                 "serving.limit=3", cap)
    free, _ = run(kvtier, tmp_path, "free", ROOT / "configs" / "cluster" / "mooncake_disaggregated.json",
                  "serving.limit=3")
    assert {i["kv_pool_blocks"] for i in two["instances"]} == {one["instances"][0]["kv_pool_blocks"]}
    assert one["instances"][0]["kv_pool_blocks"] < free["instances"][0]["kv_pool_blocks"]
