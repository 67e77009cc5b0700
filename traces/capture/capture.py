#!/usr/bin/env python3
"""Capture an attention trace (format v2, docs/traces.md) from a real model.

For every decode step and layer it records, per sequence of the batch, the
attention probabilities summed over each KV block's tokens and averaged over
query heads (and, with --head-groups G, also averaged within each of G groups
of KV heads), and for every layer the prompt's own attention (prefill), per
prompt block, averaged over the prompt's queries.

Prompts are cut to --context-tokens tokens (the BOS token included) so that
every sequence of the batch has the same context, as the trace's header
requires. Decoding is greedy by default; --temperature T > 0 samples with
--seed.

  python3 traces/capture/capture.py --prompts traces/capture/prompts_stories.json \
      --context-tokens 256 --steps 224 --block-tokens 8 -o stories260K.jsonl

Without --hf it runs a llama2.c checkpoint (default: stories260K) in numpy;
with --hf NAME_OR_PATH a Hugging Face transformers model (hf_capture.py).
Bad input: one line naming the file and what was wrong, exit 2.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_v2  # noqa: E402

DEFAULT_MODEL_DIR = "/work/shared/models/stories260K"


class InputError(Exception):
    pass


def load_prompts(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("%s: cannot read a prompts JSON file: %s" % (path, e))
    prompts = doc.get("prompts") if isinstance(doc, dict) else doc
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise InputError("%s: expected a non-empty list of prompt strings (or {\"prompts\": [...]})" % path)
    return prompts


def choose(logits, temperature, rng):
    if temperature <= 0:
        return np.argmax(logits, axis=-1)
    z = logits.astype(np.float64) / temperature
    z -= z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    return np.array([rng.choice(p.shape[-1], p=row) for row in p])


def _feed(session, tokens, block_tokens):
    """Per-layer per-head block masses (S, H, T, nblocks) of feeding `tokens`, and the last position's logits."""
    if hasattr(session, "feed_blocks"):  # sessions that sum blocks where the probabilities are (a GPU)
        return session.feed_blocks(tokens, block_tokens)
    logits, probs = session.feed(tokens)
    return logits, [trace_v2.per_head_blocks(p, block_tokens) for p in probs]


def capture(session, prompt_ids, steps, block_tokens, head_groups, writer, temperature=0.0, seed=1, min_mass=0.0,
            prefill_chunk=0):
    """Runs the batch: prefill of prompt_ids (S, C), then `steps` decode steps; writes every record.

    `session.feed(tokens (S, T))` returns (logits (S, vocab), [probs (S, heads, T, keys)] per layer), or
    `session.feed_blocks(tokens, block_tokens)` the same with keys already summed per block. The prompt
    goes in chunks of `prefill_chunk` tokens (0: at once) so that long prompts need bounded memory.
    Returns the generated token ids, (S, steps).
    """
    rng = np.random.default_rng(seed)
    S, C = prompt_ids.shape
    nbp = (C + block_tokens - 1) // block_tokens
    chunk = prefill_chunk if prefill_chunk > 0 else C
    prompt_sum = None
    for start in range(0, C, chunk):
        logits, per_head = _feed(session, prompt_ids[:, start:start + chunk], block_tokens)
        if prompt_sum is None:
            prompt_sum = np.zeros((len(per_head), S, nbp))
        for layer, ph in enumerate(per_head):
            total, _ = trace_v2.reduce_heads(ph)
            prompt_sum[layer, :, :total.shape[-1]] += total.sum(axis=1)
    for layer in range(prompt_sum.shape[0]):
        per_block = prompt_sum[layer] / C  # averaged over the prompt's queries: each row sums to 1
        for s in range(S):
            writer.prompt(layer, s, per_block[s])
    generated = np.zeros((S, steps), dtype=np.int64)
    tok = choose(logits, temperature, rng)
    for step in range(steps):
        generated[:, step] = tok
        logits, per_head = _feed(session, tok[:, None], block_tokens)
        for layer, ph in enumerate(per_head):
            total, groups = trace_v2.reduce_heads(ph, head_groups)
            for s in range(S):
                m = total[s, 0]
                keep = np.nonzero(m > min_mass)[0]
                g = None if groups is None else groups[s, :, 0][:, keep]
                writer.record(step, layer, s, keep, m[keep], g)
        tok = choose(logits, temperature, rng)
    return generated


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=os.path.join(DEFAULT_MODEL_DIR, "stories260K.bin"),
                    help="llama2.c .bin checkpoint (default: stories260K)")
    ap.add_argument("--tokenizer", default=os.path.join(DEFAULT_MODEL_DIR, "tok512.bin"),
                    help="llama2.c tokenizer .bin (default: stories260K's tok512.bin)")
    ap.add_argument("--hf", help="capture a Hugging Face transformers model (name or local path) instead")
    ap.add_argument("--device", default="cpu", help="torch device for --hf (cpu, cuda)")
    ap.add_argument("--prompts", required=True, help="JSON: a list of prompt strings, or {\"prompts\": [...]}")
    ap.add_argument("--context-tokens", type=int, required=True, help="prompt tokens per sequence (BOS included)")
    ap.add_argument("--steps", type=int, required=True, help="decode steps")
    ap.add_argument("--block-tokens", type=int, default=16, help="tokens per KV block (default 16)")
    ap.add_argument("--head-groups", type=int, default=1, help="also record mass per group of KV heads (divides KV heads)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default); > 0: sample with --seed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-mass", type=float, default=0.0, help="leave out blocks with at most this mass (default 0: keep all)")
    ap.add_argument("--prefill-chunk", type=int, default=0,
                    help="prompt tokens fed at once (default: all; 256 with --hf), bounding prefill memory")
    ap.add_argument("-o", "--out", required=True, help="output trace (JSON lines, format v2)")
    a = ap.parse_args(argv)
    try:
        for k in ("context_tokens", "steps", "block_tokens", "head_groups"):
            if getattr(a, k) <= 0:
                raise InputError("--%s: must be a positive integer, got %d" % (k.replace("_", "-"), getattr(a, k)))
        prompts = load_prompts(a.prompts)
        if a.hf:
            import hf_capture
            try:
                session_for, encode, decode, model_info, origin_model = hf_capture.open_model(a.hf, a.device)
            except ImportError as e:
                raise InputError("--hf needs torch and transformers, which this Python cannot import (%s)" % e)
            except (OSError, ValueError) as e:
                raise InputError("--hf %s: cannot load the model: %s" % (a.hf, str(e).splitlines()[0] if str(e) else e))
            a.prefill_chunk = a.prefill_chunk or 256
        else:
            import llama2c
            try:
                model = llama2c.Llama2c(a.checkpoint)
                tok = llama2c.Tokenizer(a.tokenizer, model.config.vocab_size)
            except (OSError, llama2c.CheckpointError) as e:
                raise InputError(str(e))
            session_for = lambda batch: llama2c.Session(model, batch)  # noqa: E731
            encode = tok.encode
            def decode(ids):
                # The BOS token is not text; a leading space after it is dropped, as llama2.c prints.
                return tok.decode(ids[1:], prev=llama2c.BOS) if ids and ids[0] == llama2c.BOS else tok.decode(ids)
            c = model.config
            model_info = {"name": os.path.basename(a.checkpoint).rsplit(".", 1)[0], "layers": c.n_layers,
                          "heads": c.n_heads, "kv_heads": c.n_kv_heads, "head_dim": c.head_size,
                          "max_context_tokens": c.seq_len, "architecture": "llama2.c"}
            origin_model = {"checkpoint": os.path.basename(a.checkpoint),
                            "checkpoint_sha256": llama2c.sha256_of(a.checkpoint),
                            "tokenizer": os.path.basename(a.tokenizer)}
        layers, kv_heads = model_info["layers"], model_info["kv_heads"]
        if kv_heads % a.head_groups:
            raise InputError("--head-groups %d: must divide the model's %d KV heads" % (a.head_groups, kv_heads))
        if a.context_tokens + a.steps > model_info["max_context_tokens"]:
            raise InputError("--context-tokens %d + --steps %d exceed the model's context of %d tokens"
                             % (a.context_tokens, a.steps, model_info["max_context_tokens"]))
        ids = []
        for i, p in enumerate(prompts):
            t = encode(p)
            if len(t) < a.context_tokens:
                raise InputError("%s: prompt %d has %d tokens, fewer than --context-tokens %d"
                                 % (a.prompts, i, len(t), a.context_tokens))
            ids.append(t[:a.context_tokens])
        ids = np.array(ids, dtype=np.int64)
        origin = {"tool": "traces/capture/capture.py", "model": origin_model,
                  "prompts_file": os.path.basename(a.prompts),
                  "prompts": [decode(list(r)) for r in ids],
                  "settings": {"context_tokens": a.context_tokens, "steps": a.steps, "block_tokens": a.block_tokens,
                               "head_groups": a.head_groups, "temperature": a.temperature, "seed": a.seed,
                               "min_mass": a.min_mass, "prefill_chunk": a.prefill_chunk,
                               "mass": "softmax probability summed over the block's tokens, mean over query heads"}}
        try:
            writer = trace_v2.TraceWriter(a.out, layers, a.steps, a.block_tokens, a.context_tokens, len(prompts),
                                          a.head_groups, True, model_info, origin)
        except OSError as e:
            raise InputError("%s: cannot write: %s" % (a.out, e.strerror or e))
        with writer as w:
            gen = capture(session_for(len(prompts)), ids, a.steps, a.block_tokens, a.head_groups, w,
                          a.temperature, a.seed, a.min_mass, a.prefill_chunk)
        for s, row in enumerate(gen):
            print("capture: sequence %d continues: %r" % (s, decode(list(row))[:80]))
        print("capture: wrote %s (%d layers, %d steps, %d sequences)" % (a.out, layers, a.steps, len(prompts)))
        return 0
    except InputError as e:
        print("capture: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
