"""Attention capture from a Hugging Face transformers model (Llama, Qwen, OPT
and other causal LMs whose attention layers return their probabilities).

The model runs with eager attention and output_attentions=True, with its KV
cache between calls, so each decode step returns every layer's softmax over
all keys so far; the probabilities are summed per KV block on the model's
device, so only (batch, heads, queries, blocks) arrays leave it.

transformers and torch are not Debian packages here: this module is imported
only for `capture.py --hf`, on machines that have them.
"""

import hashlib
import json
import os

import numpy as np


def _eager(model):
    # output_attentions needs the eager kernels (sdpa and flash attention return no probabilities).
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
            return
        except Exception:  # older versions: the config attribute below
            pass
    model.config._attn_implementation = "eager"


def model_info(model):
    cfg = model.config
    layers = getattr(cfg, "num_hidden_layers", None)
    heads = getattr(cfg, "num_attention_heads", None)
    if layers is None or heads is None:
        raise ValueError("model config has no num_hidden_layers / num_attention_heads")
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None) or getattr(cfg, "word_embed_proj_dim", 0)
    head_dim = getattr(cfg, "head_dim", None) or (hidden // heads if hidden else 0)
    ctx = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 2048
    return {"name": getattr(cfg, "_name_or_path", "") or cfg.model_type, "layers": layers, "heads": heads,
            "kv_heads": kv, "head_dim": head_dim, "max_context_tokens": ctx, "architecture": cfg.model_type}


def session_factory(model, device):
    """(session_for(batch), info) for capture.capture(): sessions with feed_blocks()."""
    import torch

    _eager(model)
    model.to(device).eval()
    info = model_info(model)
    heads, kv = info["heads"], info["kv_heads"]

    class Session:
        def __init__(self, batch):
            self.batch = batch
            self.past = None

        def feed_blocks(self, tokens, block_tokens):
            ids = torch.as_tensor(np.asarray(tokens), dtype=torch.long, device=device)
            with torch.no_grad():
                out = model(input_ids=ids, past_key_values=self.past, use_cache=True, output_attentions=True)
            self.past = out.past_key_values
            per_layer = []
            for a in out.attentions:  # (B, heads, T, K); some models give per-KV-head probabilities
                a = a.float()
                if a.shape[1] != heads:
                    raise ValueError("attention has %d heads, config says %d" % (a.shape[1], heads))
                B, H, T, K = a.shape
                nb = (K + block_tokens - 1) // block_tokens
                pad = nb * block_tokens - K
                if pad:
                    a = torch.nn.functional.pad(a, (0, pad))
                per_layer.append(a.reshape(B, H, T, nb, block_tokens).sum(-1).double().cpu().numpy())
            return out.logits[:, -1].float().cpu().numpy(), per_layer

    assert heads % kv == 0
    return (lambda batch: Session(batch)), info


def open_model(name, device):
    """Loads a model and its tokenizer by name or local path: (session_for, encode, decode, info, origin)."""
    import torch  # noqa: F401
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(name)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(name, attn_implementation="eager",
                                                                  torch_dtype="auto")
    except TypeError:  # versions before attn_implementation: eager is their only kernel with probabilities
        model = transformers.AutoModelForCausalLM.from_pretrained(name, torch_dtype="auto")
    session_for, info = session_factory(model, device)

    def encode(text):
        return tok(text)["input_ids"]

    def decode(ids):
        return tok.decode(ids, skip_special_tokens=True)

    origin = {"hf_model": name, "transformers_version": transformers.__version__,
              "dtype": str(next(model.parameters()).dtype), "device": device}
    cfg_path = os.path.join(name, "config.json")
    if os.path.exists(cfg_path):
        origin["config_sha256"] = hashlib.sha256(open(cfg_path, "rb").read()).hexdigest()
    else:
        origin["config"] = json.loads(model.config.to_json_string())
    return session_for, encode, decode, info, origin
