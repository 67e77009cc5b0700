"""A tensor-parallel instance's copies as one folded flow (cluster.fold_ranks,
docs/cluster.md): where every rank's route is the first rank's seen from
another GPU, max-min sharing gives every rank's flow the same rate, so the
folded run gives the per-rank run's results. Each case runs both ways and
compares every metric; the timeline shows the folded run made one flow for
all ranks (the other ranks' streams carry no copies)."""

import json
import math

import pytest

from conftest import ROOT, SANITIZED

CLUSTER = ROOT / "configs" / "cluster"


def run(kvtier, tmp_path, name, config, *sets):
    out = tmp_path / name
    trace = tmp_path / (name + ".trace.json")
    args = ["run", config, "--out", out, "-q", "--timeline", trace]
    for s in sets:
        args += ["--set", s]
    p = kvtier(*args, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "result.json").read_text())["metrics"], json.loads(trace.read_text())


def copies_by_stream(trace):
    """Transfer slices per stream (the timeline's "streams" process; its
    "links" process repeats each transfer on the links it crosses)."""
    events = trace["traceEvents"]
    streams = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
               and e["args"]["name"] == "streams"}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    count = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] in streams and "bytes" in e.get("args", {}):
            n = names.get((e["pid"], e["tid"]), "")
            count[n] = count.get(n, 0) + 1
    return count


def on(device, stream):
    """Whether a stream's copies go from or to `device` ("a->b", or a GPU's "... copies in")."""
    return device in stream.split(" ")[0].split("->")


def flat(d, prefix=""):
    out = {}
    items = d.items() if isinstance(d, dict) else enumerate(d)
    for k, v in items:
        if isinstance(v, (dict, list)):
            out.update(flat(v, prefix + str(k) + "."))
        else:
            out[prefix + str(k)] = v
    return out


def same(a, b, rel=1e-9):
    fa, fb = flat(a), flat(b)
    assert fa.keys() == fb.keys()
    differ = []
    for k, v in fa.items():
        w = fb[k]
        if isinstance(v, float) or isinstance(w, float):
            if not math.isclose(v, w, rel_tol=rel, abs_tol=1e-12):
                differ.append((k, v, w))
        elif v != w:
            differ.append((k, v, w))
    return differ


# Requests per case: under the sanitizers a fifth as many (the folding and
# its per-rank equality do not depend on the stream's length).
LIMIT = "serving.limit=%d" % (60 if SANITIZED else 300)
CASES = {
    # Two TP=4 instances on one HGX node: swaps, prefix loads and cache writes, each rank over its own PCIe.
    "hgx_node": (CLUSTER / "hgx_node.json", [LIMIT], "gpu1", True),
    # Two nodes, each GPU pair's own adapter to the fabric: prompts' KV pulled across nodes rank by rank.
    "disaggregated": (CLUSTER / "mooncake_disaggregated.json",
                      [LIMIT, "hardware.cluster.fabric.nic=port"], "n1.gpu1", True),
    # A KV pool of both nodes' host memory over each GPU pair's adapter: each rank's share of a
    # socket's memory leaves and enters its node through the adapter of the rank's own switch.
    "pool_adapters": (CLUSTER / "mooncake_pool.json",
                      [LIMIT, "hardware.cluster.fabric.nic=port"], "n0.gpu1", True),
    # The same with one TP=8 instance per node (the 16-node benchmark's shape on two nodes).
    "pool_adapters_tp8": (CLUSTER / "mooncake_pool.json",
                          [LIMIT, "hardware.cluster.fabric.nic=port",
                           'cluster={"tp": 8, "replicas": 2, "prefill_replicas": 1, "kv_pool": "pooled"}'],
                          "n0.gpu1", True),
    # One adapter per node, reached from the first GPUs' switch: the ranks' routes across nodes differ,
    # so nothing folds (and the results are the per-rank run's).
    "one_adapter": (CLUSTER / "mooncake_pool.json", [LIMIT, "hardware.cluster.fabric.nic=nic0"], "n0.gpu1",
                    False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_folded_copies_give_the_per_rank_results(kvtier, tmp_path, case):
    config, sets, rank1, folds = CASES[case]
    folded, ftrace = run(kvtier, tmp_path, "folded", config, *sets)
    per_rank, ptrace = run(kvtier, tmp_path, "per_rank", config, *sets, "cluster.fold_ranks=false")
    differ = same(folded, per_rank)
    assert not differ, differ[:8]
    # The per-rank run's other ranks copy on their own streams; folded, they do not.
    fc, pc = copies_by_stream(ftrace), copies_by_stream(ptrace)
    rank1_per_rank = sum(v for k, v in pc.items() if on(rank1, k))
    rank1_folded = sum(v for k, v in fc.items() if on(rank1, k))
    assert rank1_per_rank > 0
    if folds:
        assert rank1_folded == 0
        # Folded, the copies are fewer by about the ranks (4 per instance).
        assert sum(fc.values()) * 3 < sum(pc.values())
    else:
        assert rank1_folded == rank1_per_rank


def test_host_memory_reaches_the_fabric_through_each_of_its_adapters(kvtier, tmp_path):
    """A KV pool of host memory over each GPU pair's adapter, blocks hashed
    over both nodes' shares so that the decode node's memory is written and
    read from the prefill node: the ranks of a TP=8 instance that share a
    socket's memory take its two adapters in turn (Mooncake's Transfer
    Engine moves a buffer through the adapters near its memory), so the
    node's four adapters, and its four switches' links to the sockets, carry
    the same bytes each way. Through the memory's own route alone, each
    socket's memory would load one switch and one adapter."""
    sets = ["serving.limit=100", "hardware.cluster.fabric.nic=port",
            'cluster={"tp": 8, "replicas": 2, "prefill_replicas": 1, "kv_pool": "pooled", '
            '"kv_pool_placement": "hashed"}']
    m, _ = run(kvtier, tmp_path, "pool", CLUSTER / "mooncake_pool.json", *sets)
    links = m["links"]
    for name in ("n1.nic_port{k}:n1.nic{k}->n1.port", "n1.nic_port{k}:n1.port->n1.nic{k}",
                 "n1.pcie_up{k}:n1.pcie_sw{k}->n1.root{s}", "n1.pcie_up{k}:n1.root{s}->n1.pcie_sw{k}"):
        carried = [links[name.format(k=k, s=k // 2)]["bytes"] for k in range(4)]
        assert carried[0] > 0, name
        assert max(carried) == pytest.approx(min(carried), rel=1e-12), (name, carried)


def test_a_slower_adapter_never_makes_a_pooled_run_faster(kvtier, tmp_path):
    """Ranks 2-3 of each socket's memory go through the second adapter of
    the socket (nic1 on socket 0): slowing that adapter's port never makes
    the pooled run faster, and the bytes it carries stay the same."""
    sets = ["serving.limit=100", "hardware.cluster.fabric.nic=port",
            'cluster={"tp": 8, "replicas": 2, "prefill_replicas": 1, "kv_pool": "pooled", '
            '"kv_pool_placement": "hashed"}']
    fast, _ = run(kvtier, tmp_path, "fast", CLUSTER / "mooncake_pool.json", *sets)
    slow, _ = run(kvtier, tmp_path, "slow", CLUSTER / "mooncake_pool.json", *sets,
                  "hardware.links.nic_port1.bandwidth_GBps=5")
    assert slow["simulated_time_s"] >= fast["simulated_time_s"] * (1 - 1e-12)
    assert slow["ttft_s"]["mean"] > fast["ttft_s"]["mean"]
    name = "n1.nic_port1:n1.port->n1.nic1"
    assert slow["links"][name]["bytes"] == fast["links"][name]["bytes"] > 0
