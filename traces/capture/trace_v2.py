"""Writes kvtier attention traces, format v2 JSON lines (docs/formats.md), and sums attention per KV block.

The writer is atomic like the simulator's: records go to PATH.tmp, renamed to
PATH on close(); an exception before close() leaves no file behind.
"""

import json
import os

import numpy as np

FORMAT = "kvtier-attention-trace"


def fmt(x):
    """The shortest text that reads back to the same float32."""
    return np.format_float_positional(np.float32(x), unique=True, trim="-")


def per_head_blocks(probs, block_tokens):
    """Attention probabilities (B, H, Q, K) summed over each block of keys: (B, H, Q, ceil(K / block_tokens))."""
    B, H, Q, K = probs.shape
    nb = (K + block_tokens - 1) // block_tokens
    pad = nb * block_tokens - K
    p = np.pad(probs, ((0, 0), (0, 0), (0, 0), (0, pad))) if pad else probs
    return p.reshape(B, H, Q, nb, block_tokens).sum(axis=-1, dtype=np.float64)


def reduce_heads(per_head, head_groups=1):
    """Per-head block masses (B, H, Q, nb) to (total, groups): total (B, Q, nb) is the mean over heads, groups
    (B, G, Q, nb) the mean over each of G equal, contiguous groups of heads, or None when head_groups is 1."""
    B, H, Q, nb = per_head.shape
    total = per_head.mean(axis=1)
    groups = None
    if head_groups > 1:
        groups = per_head.reshape(B, head_groups, H // head_groups, Q, nb).mean(axis=2)
    return total, groups


def block_mass(probs, block_tokens, head_groups=1):
    """Attention probabilities (B, H, Q, K) summed per KV block; see reduce_heads()."""
    return reduce_heads(per_head_blocks(probs, block_tokens), head_groups)


class TraceWriter:
    def __init__(self, path, layers, steps, block_tokens, context_tokens, sequences, head_groups=1,
                 has_prompt=True, model=None, origin=None):
        self.path = str(path)
        self.tmp = self.path + ".tmp"
        self.sequences = sequences
        self.head_groups = head_groups
        header = {"format": FORMAT, "version": 2, "layers": layers, "steps": steps, "block_tokens": block_tokens,
                  "context_tokens": context_tokens, "sequences": sequences, "head_groups": head_groups,
                  "has_prompt": has_prompt, "model": model or {}, "origin": origin or {}}
        self.f = open(self.tmp, "w")
        self.f.write(json.dumps(header, separators=(",", ":")) + "\n")
        self.closed = False

    def _seq(self, seq):
        return "" if self.sequences == 1 else ',"seq":%d' % seq

    def prompt(self, layer, seq, mass):
        self.f.write('{"prompt":true,"layer":%d%s,"mass":[%s]}\n' % (layer, self._seq(seq),
                                                                       ",".join(fmt(m) for m in mass)))

    def record(self, step, layer, seq, blocks, mass, groups=None):
        line = '{"step":%d,"layer":%d%s,"blocks":[%s],"mass":[%s]' % (
            step, layer, self._seq(seq), ",".join(str(int(b)) for b in blocks), ",".join(fmt(m) for m in mass))
        if groups is not None:
            line += ',"groups":[%s]' % ",".join("[" + ",".join(fmt(m) for m in g) + "]" for g in groups)
        self.f.write(line + "}\n")

    def close(self):
        self.f.close()
        os.replace(self.tmp, self.path)
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if not self.closed:
            if kind is None:
                self.close()
            else:
                self.f.close()
                os.remove(self.tmp)
        return False
