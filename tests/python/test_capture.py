"""Attention capture from a real model (traces/capture/): the llama2.c loader
reproduces stories260K's known greedy output, capture writes a valid v2 trace
(per-sequence, head groups, prompt records), the committed trace is what the
capture produces, and the Hugging Face path runs where transformers is."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

CAPTURE = ROOT / "traces" / "capture"
sys.path.insert(0, str(CAPTURE))
import capture  # noqa: E402
import llama2c  # noqa: E402
import trace_v2  # noqa: E402

MODEL_DIR = "/work/shared/models/stories260K"
CHECKPOINT = os.path.join(MODEL_DIR, "stories260K.bin")
TOKENIZER = os.path.join(MODEL_DIR, "tok512.bin")
COMMITTED = ROOT / "traces" / "data" / "stories260K.trace"
PROMPTS = CAPTURE / "prompts_stories.json"

needs_model = pytest.mark.skipif(not os.path.exists(CHECKPOINT),
                                 reason="stories260K is not at %s on this machine" % MODEL_DIR)


@pytest.fixture(scope="module")
def model():
    m = llama2c.Llama2c(CHECKPOINT)
    return m, llama2c.Tokenizer(TOKENIZER, m.config.vocab_size)


def read_jsonl(path):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    return lines[0], [l for l in lines[1:] if l.get("prompt")], [l for l in lines[1:] if not l.get("prompt")]


@needs_model
def test_loader_reproduces_the_known_greedy_output(model):
    m, tok = model
    c = m.config
    assert (c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len) == (64, 5, 8, 4, 512, 512)
    text = tok.decode(llama2c.greedy(m, tok, [llama2c.BOS], 60), prev=llama2c.BOS)
    assert text.startswith("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                           "park. One day, she saw a big, red ball.")
    assert tok.decode(tok.encode("Once upon a time")[1:], prev=llama2c.BOS) == "Once upon a time"


@needs_model
def test_batched_decode_matches_one_sequence_at_a_time(model):
    m, tok = model
    ids = np.array([tok.encode("Lily and Ben went to the park.")[:8], tok.encode("One day a bird sang.")[:8]])
    both = llama2c.Session(m, 2)
    lb, _ = both.feed(ids)
    for s in range(2):
        one = llama2c.Session(m, 1)
        l1, _ = one.feed(ids[s:s + 1])
        np.testing.assert_allclose(lb[s], l1[0], rtol=1e-4, atol=1e-4)


@needs_model
def test_capture_writes_per_sequence_group_and_prompt_records(tmp_path, kvtier):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps(["Tom had a red ball and a blue hat.", "The cat sat on the warm mat all day."]))
    out = tmp_path / "t.jsonl"
    rc = capture.main(["--prompts", str(prompts), "--context-tokens", "10", "--steps", "6", "--block-tokens", "4",
                       "--head-groups", "2", "-o", str(out)])
    assert rc == 0
    h, prompt, recs = read_jsonl(out)
    assert (h["version"], h["layers"], h["steps"], h["sequences"], h["head_groups"]) == (2, 5, 6, 2, 2)
    assert h["origin"]["model"]["checkpoint_sha256"].startswith("b0a507e7")
    assert h["origin"]["settings"]["temperature"] == 0.0
    assert len(prompt) == 5 * 2 and len(recs) == 6 * 5 * 2
    for p in prompt:
        assert len(p["mass"]) == 3 and abs(sum(p["mass"]) - 1) < 1e-5
    for i, r in enumerate(recs):
        assert (r["step"], r["layer"], r["seq"]) == (i // 10, (i // 2) % 5, i % 2)
        # Step s attends over 10 + s + 1 tokens: every block of them, masses summing to 1.
        assert r["blocks"] == list(range((10 + r["step"]) // 4 + 1))
        assert abs(sum(r["mass"]) - 1) < 1e-5
        g = np.array(r["groups"])
        np.testing.assert_allclose(g.mean(axis=0), r["mass"], rtol=1e-5, atol=1e-7)
    p = kvtier("trace", "check", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "2 head groups, prompt yes; 60 records" in p.stdout


@needs_model
def test_committed_trace_is_what_capture_writes(tmp_path, kvtier):
    """The committed trace's first steps, recaptured here, are the same numbers."""
    assert COMMITTED.stat().st_size < 5 << 20
    full = tmp_path / "committed.jsonl"
    p = kvtier("trace", "convert", COMMITTED, "-o", full, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    h, prompt, recs = read_jsonl(full)
    s = h["origin"]["settings"]
    assert (h["layers"], h["sequences"], h["context_tokens"], h["block_tokens"]) == (5, 4, 256, 8)
    out = tmp_path / "again.jsonl"
    assert capture.main(["--prompts", str(PROMPTS), "--context-tokens", str(s["context_tokens"]), "--steps", "3",
                         "--block-tokens", str(s["block_tokens"]), "-o", str(out)]) == 0
    h2, prompt2, recs2 = read_jsonl(out)
    assert h2["origin"]["prompts"] == h["origin"]["prompts"]
    # The same numbers up to float32 rounding (BLAS kernels differ between processors).
    np.testing.assert_allclose([x for p in prompt2 for x in p["mass"]], [x for p in prompt for x in p["mass"]],
                               rtol=1e-4, atol=1e-7)
    assert len(recs2) == 3 * 5 * 4
    for a, b in zip(recs2, recs[:len(recs2)]):
        assert (a["step"], a["layer"], a["seq"], a["blocks"]) == (b["step"], b["layer"], b["seq"], b["blocks"])
        np.testing.assert_allclose(a["mass"], b["mass"], rtol=1e-4, atol=1e-7)


@needs_model
def test_prefill_in_chunks_gives_the_same_prompt_attention(model, tmp_path):
    m, tok = model
    ids = np.array([tok.encode("Tom had a red ball and a blue hat. He liked to play.")[:16]])
    outs = []
    for chunk in (0, 5):
        out = tmp_path / ("c%d.jsonl" % chunk)
        with trace_v2.TraceWriter(out, 5, 2, 4, 16, 1) as w:
            capture.capture(llama2c.Session(m, 1), ids, 2, 4, 1, w, prefill_chunk=chunk)
        outs.append(read_jsonl(out))
    for a, b in zip(outs[0][1] + outs[0][2], outs[1][1] + outs[1][2]):
        np.testing.assert_allclose(a["mass"], b["mass"], rtol=1e-5, atol=1e-7)


def test_capture_bad_input_is_one_line_and_exit_2(tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps(["Short."]))
    cmd = [sys.executable, str(CAPTURE / "capture.py"), "--prompts", str(prompts), "--context-tokens", "64",
           "--steps", "2", "-o", str(tmp_path / "t.jsonl")]
    for extra, expect in [([], "prompt 0 has"), (["--head-groups", "3"], "must divide"),
                          (["--checkpoint", str(prompts)], str(prompts))]:
        if not os.path.exists(CHECKPOINT) and "--checkpoint" not in extra:
            continue
        p = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and expect in p.stderr
        assert not (tmp_path / "t.jsonl").exists()
    p = subprocess.run(cmd[:3] + [str(tmp_path / "missing.json")] + cmd[4:], capture_output=True, text=True)
    assert p.returncode == 2 and "missing.json" in p.stderr


def test_hugging_face_capture_on_a_tiny_random_model(tmp_path):
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed here (no Debian package); the Hugging Face capture "
                               "path is tested where it is")
    import hf_capture
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="eager")
    m = transformers.LlamaForCausalLM(cfg).eval()
    session_for, info = hf_capture.session_factory(m, "cpu")
    assert (info["layers"], info["heads"], info["kv_heads"]) == (2, 4, 2)
    out = tmp_path / "hf.jsonl"
    ids = np.array([[1, 5, 9, 13, 17, 21, 25, 29], [1, 4, 8, 15, 16, 23, 42, 3]])
    with trace_v2.TraceWriter(out, 2, 4, 4, 8, 2, 2, True, info, {"tool": "test"}) as w:
        capture.capture(session_for(2), ids, 4, 4, 2, w, prefill_chunk=3)
    h, prompt, recs = read_jsonl(out)
    assert len(prompt) == 4 and len(recs) == 16
    for p in prompt:
        assert abs(sum(p["mass"]) - 1) < 1e-4
    for r in recs:
        assert abs(sum(r["mass"]) - 1) < 1e-4
