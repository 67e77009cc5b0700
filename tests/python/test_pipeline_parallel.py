"""Pipeline parallelism within a model instance (cluster.pp, docs/cluster.md):
stages of consecutive layers on consecutive GPUs, activations handed on over
the route between them, and pp micro-batches (vLLM's virtual engines) that
keep the stages busy at once. pp=1 is today's run exactly; one request's
iteration takes the stages' compute plus the hand-overs in closed form; a
stage's GPU holds its layers' KV only; P micro-batches of identical requests
run at the slowest stage's rate; a slower link never makes a run faster."""

import csv
import json

import pytest

from conftest import ROOT, flat, run_metrics as run

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
HGX = ROOT / "configs" / "hardware" / "hgx_h100x8.json"
# vLLM's OPT-6.7B requests on an HGX node (NVSwitch: 450 GB/s a direction
# per GPU, 0.5 us a hop), the GPU's KV room given.
HGX_HW = 'hardware={"preset": "%s", "tiers": ["gpu0", "dram0"], "kv_capacity": {"gpu0": "8GB"}}' % HGX
OPT_LAYERS, OPT_HIDDEN = 32, 4096
NVLINK_BPS, NVLINK_HOP_S = 450e9, 0.5e-6
ONE = ["serving.requests.count=1", "serving.requests.output_tokens=33"]


def test_one_stage_is_todays_run_exactly(kvtier, tmp_path):
    for cl in ['{"replicas": 1}', '{"tp": 4, "replicas": 1}']:
        before, bdir = run(kvtier, tmp_path, "b" + cl[3:5], VLLM, HGX_HW, "cluster=" + cl)
        pp1, pdir = run(kvtier, tmp_path, "p" + cl[3:5], VLLM, HGX_HW, "cluster=" + cl[:-1] + ', "pp": 1}')
        assert flat(before) == flat(pp1)
        assert (bdir / "requests.csv").read_text() == (pdir / "requests.csv").read_text()
        assert "pp" not in pp1["instances"][0]


@pytest.mark.parametrize("pp", [2, 4])
def test_one_request_takes_the_stages_compute_plus_each_hand_over(kvtier, tmp_path, pp):
    # The same layers computed on one GPU or split over pp: the compute is
    # the same; each iteration adds pp-1 hand-overs of every token's hidden
    # state and residual (2 x 4096 x 2 bytes) over NVLink, GPU -> switch ->
    # GPU: two hops' latency + bytes / 450 GB/s.
    one, _ = run(kvtier, tmp_path, "one", VLLM, HGX_HW, *ONE, 'cluster={"replicas": 1}')
    m, _ = run(kvtier, tmp_path, "pp", VLLM, HGX_HW, *ONE, 'cluster={"replicas": 1, "pp": %d}' % pp)
    inst = m["instances"][0]
    assert inst["gpus"] == ["gpu%d" % g for g in range(pp)]
    assert [s["layers"] for s in inst["stages"]] == [OPT_LAYERS // pp] * pp
    # The prefill (every prompt token) and one iteration per further token.
    tokens = [8192] + [1] * (33 - 1)
    per_token = 2 * OPT_HIDDEN * 2
    hand_overs = sum((pp - 1) * (2 * NVLINK_HOP_S + t * per_token / NVLINK_BPS) for t in tokens)
    assert m["simulated_time_s"] == pytest.approx(one["simulated_time_s"] + hand_overs, rel=1e-9)
    assert inst["activation_s"] == pytest.approx(hand_overs, rel=1e-9)
    assert inst["activation_bytes"] == (pp - 1) * sum(tokens) * per_token
    # Each stage computed its share: the stages' busy time is the one GPU's.
    assert sum(s["busy_s"] for s in inst["stages"]) == pytest.approx(
        one["gpu_busy_fraction"] * one["simulated_time_s"], rel=1e-9)
    # Stage s's NVLink carried what it sent, the next stage's what it received.
    links = m["links"]
    for s in range(pp - 1):
        assert links["nvlink%d:gpu%d->nvswitch" % (s, s)]["bytes"] == sum(tokens) * per_token
        assert links["nvlink%d:nvswitch->gpu%d" % (s + 1, s + 1)]["bytes"] == sum(tokens) * per_token
    # One micro-batch at a time: each stage idles while the others compute.
    assert inst["pipeline_bubble_fraction"] == pytest.approx(1 - 1 / pp, abs=0.01)


def test_a_stage_holds_its_layers_kv_only(kvtier, tmp_path):
    one, _ = run(kvtier, tmp_path, "one", VLLM, HGX_HW, *ONE, 'cluster={"replicas": 1}')
    four, _ = run(kvtier, tmp_path, "four", VLLM, HGX_HW, *ONE, 'cluster={"replicas": 1, "pp": 4}')
    # The same 8 GB on each GPU holds four times the blocks: a stage keeps a
    # quarter of the layers of every block; its four virtual engines share them.
    assert abs(four["kv_pool_blocks"] - 4 * one["kv_pool_blocks"]) < 4
    assert four["instances"][0]["virtual_engines"] == 4
    # Without kv_capacity a stage's room is its GPU less a quarter of the weights.
    hw = 'hardware={"preset": "%s", "tiers": ["gpu0", "dram0"]}' % HGX
    whole, _ = run(kvtier, tmp_path, "w1", VLLM, hw, *ONE, 'cluster={"replicas": 1}')
    quarter, _ = run(kvtier, tmp_path, "w4", VLLM, hw, *ONE, 'cluster={"replicas": 1, "pp": 4}')
    block = OPT_LAYERS * 2 * OPT_HIDDEN * 2 * 16  # 16-token blocks of every layer, FP16
    weights = 6.7e9 * 2  # the head tied to the embedding: one copy on one GPU
    room = whole["kv_pool_blocks"] * block + weights  # the GPU's memory after its reserve, to a block
    # Every stage's pool is the fullest stage's: a quarter of the layers with
    # the embedding (stage 0) or the head's own copy of the tied matrix (the
    # last stage): 50272 x 4096 FP16 either way.
    vocab = 50272 * OPT_HIDDEN
    stage = ((6.7e9 - vocab) / 4 + vocab) * 2
    expect = (room - stage) / (block / 4)
    assert abs(quarter["kv_pool_blocks"] - expect) < 8


def test_an_uneven_split_puts_the_remainder_before_the_last_stage(kvtier, tmp_path):
    m, _ = run(kvtier, tmp_path, "three", VLLM, HGX_HW, *ONE, 'cluster={"replicas": 1, "pp": 3}')
    assert [s["layers"] for s in m["instances"][0]["stages"]] == [11, 11, 10]


def test_micro_batches_keep_every_stage_busy(kvtier, tmp_path):
    # Four identical requests on a pp=4 instance: one per virtual engine
    # (each new request goes to the one with the fewest unfinished), four
    # micro-batches in flight. Each stage takes the same time t for a
    # micro-batch, so after the pipeline fills every stage computes one
    # micro-batch after another and waits only for the hand-overs (a few
    # us against ms of compute): the instance runs at one micro-batch per t,
    # the slowest stage's rate, the bound, within 2% here (the fill and the
    # drain at both ends of the run). The stages' layers take the same time;
    # the first stage adds the embedding's lookups and the last the LM head
    # (its matrix read for every micro-batch's step), so the other stages
    # idle for the difference: the bubble is that imbalance, and 2% more.
    sets = ["serving.requests.input_tokens=512", "serving.requests.output_tokens=129", "serving.preemption=recompute"]
    single, _ = run(kvtier, tmp_path, "single", VLLM, HGX_HW, *sets, "serving.requests.count=1",
                    'cluster={"replicas": 1, "pp": 4}')
    full, out = run(kvtier, tmp_path, "full", VLLM, HGX_HW, *sets, "serving.requests.count=4",
                    'cluster={"replicas": 1, "pp": 4}')
    inst = full["instances"][0]
    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert sorted(r["virtual_engine"] for r in rows) == ["0", "1", "2", "3"] and {r["pp"] for r in rows} == {"4"}
    busy = [s["busy_s"] for s in inst["stages"]]
    slowest = max(busy)
    assert slowest == inst["stages"][-1]["busy_s"]
    assert slowest / full["simulated_time_s"] > 0.98
    imbalance = 1 - sum(busy) / len(busy) / slowest
    assert inst["pipeline_bubble_fraction"] < imbalance + 0.02
    # Four micro-batches of one request each: a micro-batch per slowest
    # stage's time against one per all stages' (sum / slowest: four with
    # equal stages), to the same 2%; one alone leaves three stages of four idle.
    assert full["throughput_tokens_per_s"] == pytest.approx(sum(busy) / slowest * single["throughput_tokens_per_s"],
                                                            rel=0.02)
    assert single["instances"][0]["pipeline_bubble_fraction"] > 0.74


def test_a_slower_link_between_stages_never_makes_the_run_faster(kvtier, tmp_path):
    sets = [HGX_HW, "serving.requests.count=8", 'cluster={"replicas": 1, "pp": 2}']
    fast, _ = run(kvtier, tmp_path, "fast", VLLM, *sets)
    slow, _ = run(kvtier, tmp_path, "slow", VLLM, *sets, "hardware.links.nvlink1.bandwidth_GBps=5")
    assert slow["simulated_time_s"] > fast["simulated_time_s"]
    assert slow["instances"][0]["activation_s"] > fast["instances"][0]["activation_s"]
    assert slow["output_tokens"] == fast["output_tokens"]


def test_stages_across_nodes_hand_over_on_the_fabric(kvtier, tmp_path):
    # Two HGX nodes, a TP=8 stage on each: each rank sends its eighth of the
    # activations to its peer on the other node, then the receiving stage
    # all-gathers them over NVLink; the fabric carries every rank's slice.
    two = ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0"], "kv_capacity": {"gpu0": "8GB"}, '
           '"cluster": {"nodes": 2, "fabric": {"nic": "port", "nic_GBps": %s}}}')
    sets = ["serving.requests.count=4", 'cluster={"replicas": 1, "tp": 8, "pp": 2}']
    fast, _ = run(kvtier, tmp_path, "fast", VLLM, two % (HGX, 50), *sets)
    inst = fast["instances"][0]
    assert inst["gpus"] == ["n0.gpu%d" % g for g in range(8)] + ["n1.gpu%d" % g for g in range(8)]
    assert [s["gpus"][0] for s in inst["stages"]] == ["n0.gpu0", "n1.gpu0"]
    sent = fast["links"]["n0.fabric:up"]["bytes"]
    assert sent > 0 and sent == fast["links"]["n1.fabric:down"]["bytes"]
    slow, _ = run(kvtier, tmp_path, "slow", VLLM, two % (HGX, 5), *sets)
    assert slow["simulated_time_s"] > fast["simulated_time_s"]


def test_tensor_and_pipeline_parallel_on_one_node(kvtier, tmp_path):
    m, _ = run(kvtier, tmp_path, "tppp", VLLM, HGX_HW, "serving.requests.count=8", 'cluster={"tp": 4, "pp": 2}')
    assert len(m["instances"]) == 1
    inst = m["instances"][0]
    assert [s["gpus"] for s in inst["stages"]] == [["gpu%d" % g for g in range(4)], ["gpu%d" % g for g in range(4, 8)]]
    assert inst["allreduce_bytes"] > 0 and all(s["busy_s"] > 0 for s in inst["stages"])
    assert m["output_tokens"] == 8 * 129


def test_the_same_config_gives_the_same_result(kvtier, tmp_path):
    sets = [HGX_HW, "serving.requests.count=12", 'cluster={"replicas": 2, "pp": 2, "tp": 2}']
    a, _ = run(kvtier, tmp_path, "a", VLLM, *sets)
    b, _ = run(kvtier, tmp_path, "b", VLLM, *sets)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_disaggregated_stages_pull_each_gpu_its_share_of_the_prompt(kvtier, tmp_path):
    # A prefill and a decode instance of PP=2 x TP=4, one per HGX node: each
    # decode GPU pulls its stage's layers of its rank's KV heads, an eighth
    # of every prompt block, from the prefill GPU of the same stage and rank;
    # the fabric carries the whole model's KV of every prompt once.
    two = ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0"], "kv_capacity": {"gpu0": "8GB"}, '
           '"cluster": {"nodes": 2, "fabric": {"nic": "port", "nic_GBps": 50}}}' % HGX)
    m, _ = run(kvtier, tmp_path, "dz", VLLM, two, "serving.requests.count=6",
               'cluster={"tp": 4, "pp": 2, "prefill_replicas": 1}')
    assert [(i["role"], i["pp"]) for i in m["instances"]] == [("prefill", 2), ("decode", 2)]
    prompt = 6 * (8192 // 16) * 16 * OPT_LAYERS * 2 * OPT_HIDDEN * 2  # six prompts' blocks, every layer, FP16
    assert m["links"]["n0.fabric:up"]["bytes"] == prompt
    for g in range(8):
        into = m["links"]["n1.pcie_gpu%d:n1.pcie_sw%d->n1.gpu%d" % (g, g // 2, g)]["bytes"]
        assert into == prompt / 8
    assert m["output_tokens"] == 6 * 129


@pytest.mark.parametrize("algo", ["switch", "ring"])
def test_stages_all_reduce_in_closed_form_as_their_flows_would(kvtier, tmp_path, algo):
    # A hand-over holds both stages, so on an NVSwitch no send meets an
    # all-reduce: each stage's all-reduces run as closed forms after one
    # kernel, and agree with every layer and flow on its own (serving.coarsen false).
    sets = [HGX_HW, "serving.requests.count=8", 'cluster={"tp": 4, "pp": 2, "allreduce": "%s"}' % algo]
    fast, _ = run(kvtier, tmp_path, "closed", VLLM, *sets)
    ref, _ = run(kvtier, tmp_path, "flows", VLLM, *sets, "serving.coarsen=false")
    assert fast["layered_iterations"] == 0 and ref["layered_iterations"] == ref["iterations"]
    assert fast["simulated_time_s"] == pytest.approx(ref["simulated_time_s"], rel=1e-9)
    a, b = fast["instances"][0], ref["instances"][0]
    for k in ["allreduce_s", "activation_s", "pipeline_bubble_fraction"]:
        assert a[k] == pytest.approx(b[k], rel=1e-9)
    assert all(fast["links"][k]["bytes"] == pytest.approx(v["bytes"], rel=1e-12) for k, v in ref["links"].items())
