"""Layer-wise KV streaming from prefill to decode instances
(cluster.kv_transfer "layerwise", docs/cluster.md): each layer's KV leaves
the prefill GPU when that layer is computed, once the decode instance holds
room for it; the prefill instance holds the KV until the last layer lands.
Checked: one request on an idle fabric takes the closed form; the pull after
the prefill is today's run; streaming never loses to it on the shipped
presets; a slower fabric never helps; the same bytes move; runs repeat."""

import csv

import pytest

from conftest import ROOT, run_metrics as run

MOONCAKE = ROOT / "configs" / "serving" / "mooncake.json"
HGX = ROOT / "configs" / "hardware" / "hgx_h100x8.json"
DISAGGREGATED = ROOT / "configs" / "cluster" / "mooncake_disaggregated.json"
POOL = ROOT / "configs" / "cluster" / "mooncake_pool.json"
ONE_REQUEST = 'serving.requests={"kind": "identical", "count": 1, "input_tokens": 8192, "output_tokens": 4}'
# Llama-3-70B: 80 layers x 2 x 8 KV heads x 128 x 2 bytes per token.
LAYERS = 80
KV = 8192 * LAYERS * 2 * 8 * 128 * 2
# Outside the layers (model.vocab_size): the embedding reads a row of d FP8
# weights per prompt token before the first layer; the LM head (2 d vocab
# FLOPs, its d x vocab matrix read whole) samples after the last. Each is a
# kernel of the H100's roofline (configs/hardware/hgx_h100x8.json: launch,
# then the longer of FLOPs at fp16_TFLOPS x flops_efficiency and bytes at
# memory_GBps).
D, VOCAB, WEIGHT_BYTES = 8192, 128256, 1


def _roofline(flops, nbytes):
    import json
    gpu = next(v for v in json.load(open(HGX))["devices"].values() if v["kind"] == "gpu")
    launch = gpu["launch_overhead_us"] * 1e-6
    rate = gpu["fp16_TFLOPS"] * 1e12 * gpu.get("flops_efficiency", 1.0)
    return max(launch + flops / rate, launch + nbytes / (gpu["memory_GBps"] * 1e9 * gpu.get("memory_efficiency", 1.0)))


def embedding_s(tokens):
    return _roofline(0.0, tokens * D * WEIGHT_BYTES)


HEAD_S = _roofline(2.0 * D * VOCAB, VOCAB * D * WEIGHT_BYTES)


def two_nodes(gbps):
    return ('hardware={"preset": "%s", "tiers": ["gpu0", "dram0", "ssd0"], "cluster": {"nodes": 2, '
            '"fabric": {"nic": "port", "nic_GBps": %s, "latency_us": 1.0}}}' % (HGX, gbps))


def pair(mode):
    return ('cluster={"replicas": 2, "prefill_replicas": 1, "gpus": ["n0.gpu0", "n1.gpu0"], "kv_transfer": "%s"}'
            % mode)


@pytest.mark.parametrize("gbps", [50, 0.25])
def test_one_prompts_kv_lands_at_the_max_over_layers_of_its_end_plus_the_transfers_left(kvtier, tmp_path, gbps):
    # Prefill on node 0's gpu0, decode on node 1's, 8,192 tokens. The prompt's
    # prefill alone (one instance) takes T: the embedding (e), L equal layers
    # and the head (h); layer l ends at e + (l + 1) x (T - e - h) / L. Layer l's KV (KV / L) crosses the route in t = 6 us
    # (four PCIe hops and two fabric ports of 1 us) + KV / L / the port's
    # bandwidth, one layer after another on the pair's copy stream: the last
    # lands at max over l of (end of layer l + (L - l) x t). At 50 GB/s a
    # layer's transfer (0.67 ms) is shorter than its compute (the last
    # layer's end + t); at 0.25 GB/s longer (the first layer's end + L x t).
    hw = two_nodes(gbps)
    colo, _ = run(kvtier, tmp_path, "colo", MOONCAKE, hw, ONE_REQUEST, 'cluster={"replicas": 1}')
    after, _ = run(kvtier, tmp_path, "after", MOONCAKE, hw, ONE_REQUEST, pair("after_prefill"))
    lw, out = run(kvtier, tmp_path, "lw", MOONCAKE, hw, ONE_REQUEST, pair("layerwise"))
    prefill = colo["ttft_s"]["mean"]
    t = 6e-6 + KV / LAYERS / (gbps * 1e9)
    e = embedding_s(8192)
    layer = (prefill - e - HEAD_S) / LAYERS
    landed = max(e + (l + 1) * layer + (LAYERS - l) * t for l in range(LAYERS))
    assert lw["ttft_s"]["mean"] == pytest.approx(landed, rel=1e-9)
    # The pull after the prefill: the whole KV in one transfer at its end.
    assert after["ttft_s"]["mean"] == pytest.approx(prefill + 6e-6 + KV / (gbps * 1e9), rel=1e-9)
    assert lw["ttft_s"]["mean"] <= after["ttft_s"]["mean"]
    # The same bytes, counted on each link they crossed.
    for link in ("n0.fabric:up", "fabric.core", "n1.fabric:down", "n0.pcie_gpu0:n0.gpu0->n0.pcie_sw0",
                 "n1.pcie_gpu0:n1.pcie_sw0->n1.gpu0"):
        assert lw["links"][link]["bytes"] == pytest.approx(KV, rel=1e-12), link
        assert after["links"][link]["bytes"] == KV, link
    # The prefill instance holds the prompt's 512 blocks of KV from its
    # prefill's end until the last layer has landed (the pull frees them at
    # the prefill's end).
    held = lw["instances"][0]["tiers"]["n0.gpu0"]["mean_bytes"] * lw["simulated_time_s"]
    assert held == pytest.approx(KV * (landed - prefill), rel=1e-9)
    assert after["instances"][0]["tiers"]["n0.gpu0"]["mean_bytes"] == 0
    row = next(csv.DictReader(open(out / "requests.csv")))
    assert (row["instance"], row["decode_instance"]) == ("n0.gpu0", "n1.gpu0")


@pytest.mark.parametrize("gbps", [50, 0.25])
def test_a_chunked_prompt_streams_each_chunks_kv_as_it_is_computed(kvtier, tmp_path, gbps):
    # 24,576 tokens in three chunks of 8,192 (the preset's token budget). The
    # same prompt served alone gives each chunk's iteration (iterations.csv);
    # a chunk is the embedding of its tokens, L equal layers and, in the chunk
    # that ends the prompt, the head: layer l of chunk c ends at its start +
    # the embedding + (l + 1) x its layers' time / L, and its
    # 8,192 tokens' KV of that layer go then, one transfer after another on
    # the pair's stream: the last lands at the recurrence below. Sent all in
    # the last chunk instead (each layer the whole prompt's), it would land
    # later wherever the fabric is the bottleneck.
    hw = two_nodes(gbps)
    req = 'serving.requests={"kind": "identical", "count": 1, "input_tokens": 24576, "output_tokens": 4}'
    _, alone = run(kvtier, tmp_path, "alone", MOONCAKE, hw, req, "sim.step_csv=true")
    lw, _ = run(kvtier, tmp_path, "lw", MOONCAKE, hw, req, pair("layerwise"))
    chunks = [r for r in csv.DictReader(open(alone / "iterations.csv")) if int(r["prefill_tokens"]) > 0]
    assert [int(r["prefill_tokens"]) for r in chunks] == [8192] * 3
    per_token = KV / 8192 / LAYERS  # one token's KV of one layer

    def landed(sends):
        done = 0.0
        for at, tokens in sends:
            done = max(at, done) + 6e-6 + tokens * per_token / (gbps * 1e9)
        return done

    def layer_ends(r, last):
        t0, t1 = float(r["start_s"]), float(r["end_s"])
        e = embedding_s(8192)
        layer = (t1 - t0 - e - (HEAD_S if last else 0.0)) / LAYERS
        return [t0 + e + (l + 1) * layer for l in range(LAYERS)]

    chunked = landed([(t, 8192) for i, r in enumerate(chunks) for t in layer_ends(r, i + 1 == len(chunks))])
    assert lw["ttft_s"]["mean"] == pytest.approx(chunked, rel=1e-9)
    prefill_end = float(chunks[-1]["end_s"])
    assert lw["ttft_s"]["mean"] >= prefill_end
    at_the_end = landed([(t, 24576) for t in layer_ends(chunks[-1], True)])
    if gbps < 1:
        assert lw["ttft_s"]["mean"] < at_the_end
    for link in ("n0.fabric:up", "fabric.core", "n1.fabric:down"):
        assert lw["links"][link]["bytes"] == pytest.approx(3 * KV, rel=1e-12), link


def test_the_pull_after_the_prefill_is_the_default(kvtier, tmp_path):
    sets = ["serving.limit=40"]
    default, dout = run(kvtier, tmp_path, "default", DISAGGREGATED, *sets)
    after, aout = run(kvtier, tmp_path, "after", DISAGGREGATED, *sets, 'cluster.kv_transfer="after_prefill"')
    assert default == after
    assert (dout / "requests.csv").read_text() == (aout / "requests.csv").read_text()


@pytest.mark.parametrize("config", [DISAGGREGATED, POOL])
def test_streaming_never_loses_to_the_pull_on_the_shipped_presets(kvtier, tmp_path, config):
    sets = ["serving.limit=150"]
    after, _ = run(kvtier, tmp_path, "after", config, *sets)
    lw, _ = run(kvtier, tmp_path, "lw", config, *sets, 'cluster.kv_transfer="layerwise"')
    assert lw["requests"] == after["requests"] == 150
    assert lw["output_tokens"] == after["output_tokens"]
    for q in ("mean", "p50", "p99"):
        assert lw["ttft_s"][q] <= after["ttft_s"][q], q
    # Every prompt's KV crosses node 0's port once in either mode (prefill on
    # node 0, decode on node 1); with the pool, its reads and writes too.
    if config == DISAGGREGATED:
        assert lw["nodes"][0]["fabric_bytes_out"] == pytest.approx(after["nodes"][0]["fabric_bytes_out"], rel=1e-9)
        assert lw["nodes"][1]["fabric_bytes_in"] == pytest.approx(after["nodes"][1]["fabric_bytes_in"], rel=1e-9)


@pytest.mark.parametrize("mode", ["after_prefill", "layerwise"])
def test_a_slower_fabric_never_makes_either_transfer_faster(kvtier, tmp_path, mode):
    sets = ["serving.limit=60", 'cluster.kv_transfer="%s"' % mode]
    fast, _ = run(kvtier, tmp_path, "fast", DISAGGREGATED, *sets)
    slow, _ = run(kvtier, tmp_path, "slow", DISAGGREGATED, *sets, "hardware.cluster.fabric.nic_GBps=5")
    for k in ("ttft_s", "e2e_s"):
        assert slow[k]["mean"] >= fast[k]["mean"] * (1 - 1e-12), k
    assert slow["simulated_time_s"] >= fast["simulated_time_s"] * (1 - 1e-12)


def test_a_streaming_run_repeats_bit_for_bit(kvtier, tmp_path):
    sets = ["serving.limit=60", 'cluster.kv_transfer="layerwise"']
    a, aout = run(kvtier, tmp_path, "a", DISAGGREGATED, *sets)
    b, bout = run(kvtier, tmp_path, "b", DISAGGREGATED, *sets)
    assert a == b
    assert (aout / "requests.csv").read_text() == (bout / "requests.csv").read_text()


@pytest.mark.parametrize("config,sets,merged", [
    # Prefill on node 0, decode on node 1: the pushes cross the fabric, never
    # an NVLink, so the all-reduces still run as closed forms.
    (DISAGGREGATED, ["serving.limit=15"], True),
    # Prefill and decode instances on one node: the pushes cross the
    # NVSwitch the all-reduces use, which then run as flows, layer by layer.
    (ROOT / "configs" / "cluster" / "hgx_node.json",
     ["serving.limit=15", 'cluster={"tp": 4, "prefill_replicas": 1, "allreduce": "ring"}'], False),
])
def test_streamed_runs_give_the_times_of_every_layer_and_flow(kvtier, tmp_path, config, sets, merged):
    sets = sets + ['cluster.kv_transfer="layerwise"']
    fast, _ = run(kvtier, tmp_path, "fast", config, *sets)
    ref, _ = run(kvtier, tmp_path, "ref", config, *sets, "serving.coarsen=false")
    assert ref["layered_iterations"] == ref["iterations"]
    assert (fast["layered_iterations"] < ref["layered_iterations"]) == merged
    assert fast["simulated_time_s"] == pytest.approx(ref["simulated_time_s"], rel=1e-8)
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        for q in ("mean", "p50", "p99"):
            assert fast[k][q] == pytest.approx(ref[k][q], rel=1e-8), (k, q)
    for name, link in ref["links"].items():
        assert fast["links"][name]["bytes"] == pytest.approx(link["bytes"], rel=1e-12, abs=1e-3), name


def test_with_a_full_decode_pool_the_prompts_wait_on_their_prefill_gpus(kvtier, tmp_path):
    # 8 GB of KV per GPU and arrivals ten times denser: the decode pools fill,
    # reservations wait for room, and the prefill GPUs hold the prompts' KV
    # meanwhile (the pull frees it when the prefill ends). Every request is
    # still served, and every invariant holds (the suite checks them).
    sets = ["serving.limit=95", "serving.time_scale=0.1", 'hardware.kv_capacity={"gpu0": "8GB"}']
    after, _ = run(kvtier, tmp_path, "after", DISAGGREGATED, *sets)
    lw, _ = run(kvtier, tmp_path, "lw", DISAGGREGATED, *sets, 'cluster.kv_transfer="layerwise"')
    assert lw["requests"] == after["requests"] == 95
    assert lw["output_tokens"] == after["output_tokens"]

    def peak(m, role):
        return sum(v["peak_bytes"] for i in m["instances"] if i["role"] == role
                   for t, v in i["tiers"].items() if t == i["gpu"])
    assert peak(lw, "decode") >= 0.99 * peak(after, "decode")  # the decode pools full in both
    assert peak(lw, "prefill") > 1.2 * peak(after, "prefill")


def stages(mode, pp):
    gpus = ["n%d.gpu%d" % (n, g) for n in (0, 1) for g in range(pp)]
    return ('cluster={"replicas": 2, "prefill_replicas": 1, "pp": %d, "gpus": %s, "kv_transfer": "%s"}'
            % (pp, str(gpus).replace("'", '"'), mode))


def test_pipeline_stages_stream_their_own_layers_from_their_own_gpus(kvtier, tmp_path):
    # Two stages of 40 layers on n0.gpu0 and n0.gpu1 prefill; n1.gpu0 and
    # n1.gpu1 decode. Each stage sends the KV of its layers as it computes
    # them, from its GPU to its peer's: at 50 GB/s a layer's transfer is
    # shorter than its compute, so the last (stage 1's last layer) lands one
    # transfer after that layer's end: the prefill's end less the head, which
    # runs after it on stage 1 (the transfer outlasts it).
    hw = two_nodes(50)
    colo, _ = run(kvtier, tmp_path, "colo", MOONCAKE, hw, ONE_REQUEST,
                  'cluster={"replicas": 1, "pp": 2, "gpus": ["n0.gpu0", "n0.gpu1"]}')
    lw, _ = run(kvtier, tmp_path, "lw", MOONCAKE, hw, ONE_REQUEST, stages("layerwise", 2))
    after, _ = run(kvtier, tmp_path, "after", MOONCAKE, hw, ONE_REQUEST, stages("after_prefill", 2))
    prefill = colo["ttft_s"]["mean"]
    assert 6e-6 + KV / LAYERS / 50e9 > HEAD_S
    assert lw["ttft_s"]["mean"] == pytest.approx(prefill - HEAD_S + 6e-6 + KV / LAYERS / 50e9, rel=1e-9)
    assert lw["ttft_s"]["mean"] < after["ttft_s"]["mean"]
    for link in ("n0.fabric:up", "n1.fabric:down"):
        assert lw["links"][link]["bytes"] == pytest.approx(KV, rel=1e-12), link
    for g in (0, 1):
        out = "n0.pcie_gpu%d:n0.gpu%d->n0.pcie_sw0" % (g, g)
        into = "n1.pcie_gpu%d:n1.pcie_sw0->n1.gpu%d" % (g, g)
        assert lw["links"][out]["bytes"] == pytest.approx(KV / 2, rel=1e-12), out
        assert lw["links"][into]["bytes"] == pytest.approx(KV / 2, rel=1e-12), into


@pytest.mark.parametrize("gbps", [50, 0.25])
def test_an_uneven_pipeline_streams_each_stages_share_and_never_loses_to_the_pull(kvtier, tmp_path, gbps):
    # Three stages of 27, 27 and 26 layers: each stage GPU sends its layers' share.
    hw = two_nodes(gbps)
    lw, _ = run(kvtier, tmp_path, "lw", MOONCAKE, hw, ONE_REQUEST, stages("layerwise", 3))
    after, _ = run(kvtier, tmp_path, "after", MOONCAKE, hw, ONE_REQUEST, stages("after_prefill", 3))
    assert [s["layers"] for s in lw["instances"][0]["stages"]] == [27, 27, 26]
    assert lw["ttft_s"]["mean"] <= after["ttft_s"]["mean"]
    for g, layers in ((0, 27), (1, 27), (2, 26)):
        sw = g // 2
        out = "n0.pcie_gpu%d:n0.gpu%d->n0.pcie_sw%d" % (g, g, sw)
        assert lw["links"][out]["bytes"] == pytest.approx(KV * layers / LAYERS, rel=1e-12), out
    assert lw["links"]["n0.fabric:up"]["bytes"] == pytest.approx(KV, rel=1e-12)
    slower, _ = run(kvtier, tmp_path, "slower", MOONCAKE, two_nodes(gbps / 2), ONE_REQUEST, stages("layerwise", 3))
    assert slower["ttft_s"]["mean"] >= lw["ttft_s"]["mean"]


def test_a_pipelined_streaming_run_repeats_and_serves_every_request(kvtier, tmp_path):
    sets = ["serving.limit=60", 'cluster.kv_transfer="layerwise"', "cluster.pp=2", "cluster.tp=2"]
    a, aout = run(kvtier, tmp_path, "a", DISAGGREGATED, *sets)
    b, bout = run(kvtier, tmp_path, "b", DISAGGREGATED, *sets)
    assert a == b and a["requests"] == 60
    assert (aout / "requests.csv").read_text() == (bout / "requests.csv").read_text()
    after, _ = run(kvtier, tmp_path, "after", DISAGGREGATED, *sets[:1], "cluster.pp=2", "cluster.tp=2")
    assert a["output_tokens"] == after["output_tokens"]
    assert a["nodes"][0]["fabric_bytes_out"] == pytest.approx(after["nodes"][0]["fabric_bytes_out"], rel=1e-9)
