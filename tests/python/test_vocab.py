"""The embedding and the LM head (model.vocab_size, model.tied_embeddings,
docs/config.md) in whole runs: a larger vocabulary over the same layers never
makes a run faster, single-batch or serving; an untied head costs GPU memory
a tied one does not; a vocabulary the parameters cannot hold is one line
naming model.vocab_size, exit 2."""

import pytest

from conftest import ROOT, run_metrics as run

DEFAULT = ROOT / "configs" / "default.json"  # OPT-6.7B: d = 4096, 6.7 B parameters
VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
D = 4096
LAYER_PARAMS = 6.7e9 - 50272 * D  # OPT-6.7B's layers, its tied 50272 x 4096 embedding aside


def model(vocab, tied=False):
    """OPT-6.7B's layers with a vocabulary of `vocab` tokens around them."""
    params = LAYER_PARAMS + vocab * D * (1 if tied else 2)
    return ["model.vocab_size=%d" % vocab, "model.tied_embeddings=%s" % ("true" if tied else "false"),
            "model.params_B=%r" % (params / 1e9)]


def test_a_larger_vocabulary_never_makes_a_single_batch_run_faster(kvtier, tmp_path):
    prev = None
    for vocab in (1000, 32000, 128256, 256000):
        m, _ = run(kvtier, tmp_path, "v%d" % vocab, DEFAULT, *model(vocab), "workload.decode_steps=16")
        if prev:
            assert m["ttft_s"] >= prev["ttft_s"], vocab
            assert m["mean_step_latency_s"] >= prev["mean_step_latency_s"], vocab
            assert m["decode_tokens_per_s"] <= prev["decode_tokens_per_s"], vocab
        prev = m


def test_a_larger_vocabulary_never_makes_serving_faster(kvtier, tmp_path):
    prev = None
    for vocab in (1000, 50272, 256000):
        m, _ = run(kvtier, tmp_path, "v%d" % vocab, VLLM, *model(vocab), "serving.limit=8")
        if prev:
            assert m["simulated_time_s"] >= prev["simulated_time_s"], vocab
            assert m["ttft_s"]["mean"] >= prev["ttft_s"]["mean"], vocab
            assert m["kv_pool_blocks"] <= prev["kv_pool_blocks"], vocab
        prev = m


def test_an_untied_head_takes_gpu_memory_a_tied_one_does_not(kvtier, tmp_path):
    tied, _ = run(kvtier, tmp_path, "tied", VLLM, *model(50272, tied=True), "serving.limit=4")
    untied, _ = run(kvtier, tmp_path, "untied", VLLM, *model(50272, tied=False), "serving.limit=4")
    # The untied head's 50272 x 4096 FP16 weights (0.41 GB) come out of the KV pool: 16-token blocks of 32 layers.
    block = 16 * 2 * 32 * D * 2
    assert tied["kv_pool_blocks"] - untied["kv_pool_blocks"] == pytest.approx(50272 * D * 2 / block, abs=1)


def test_a_vocabulary_the_parameters_cannot_hold_is_one_line_exit_2(kvtier, tmp_path):
    out = tmp_path / "out"
    # OPT-6.7B's tied embedding of 2M tokens x 4096 would be 8.2 B parameters of its 6.7 B.
    p = kvtier("run", DEFAULT, "--out", out, "-q", "--set", "model.vocab_size=2000000", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.vocab_size" in lines[0], p.stderr
    assert not out.exists()
