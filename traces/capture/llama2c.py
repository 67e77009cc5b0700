"""A llama2.c checkpoint (.bin, fp32) and its tokenizer, run in numpy.

The forward pass follows llama2.c's model: RMSNorm (eps 1e-5), rotary position
embedding on interleaved pairs, grouped-query causal softmax attention, SwiGLU
feed-forward, and a classifier shared with the token embedding unless the
header's vocab_size is negative. It runs a batch of sequences of equal length
and returns, with the logits, the attention probabilities of every layer and
query head, so that capture can sum them per KV block.
"""

import hashlib
import struct

import numpy as np

BOS = 1
EOS = 2


class CheckpointError(ValueError):
    """A checkpoint or tokenizer file that does not match the llama2.c format; the message names the file."""


class Config:
    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, shared_classifier):
        self.dim = dim
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.shared_classifier = shared_classifier
        self.head_size = dim // n_heads

    def as_json(self):
        return {"dim": self.dim, "hidden_dim": self.hidden_dim, "layers": self.n_layers, "heads": self.n_heads,
                "kv_heads": self.n_kv_heads, "head_dim": self.head_size, "vocab_size": self.vocab_size,
                "max_seq_len": self.seq_len, "shared_classifier": self.shared_classifier}


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Llama2c:
    """Weights of a llama2.c .bin checkpoint (legacy format: 7 int32, then fp32 tensors)."""

    def __init__(self, path):
        self.path = str(path)
        raw = open(path, "rb").read()
        if len(raw) < 28:
            raise CheckpointError("%s: %d bytes, too short for the 7-int32 llama2.c header" % (path, len(raw)))
        dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
        if min(dim, hidden, layers, heads, kv_heads, abs(vocab), seq_len) <= 0 or dim % heads or heads % kv_heads:
            raise CheckpointError("%s: implausible header dim=%d hidden=%d layers=%d heads=%d kv_heads=%d vocab=%d "
                                  "seq_len=%d" % (path, dim, hidden, layers, heads, kv_heads, vocab, seq_len))
        c = Config(dim, hidden, layers, heads, kv_heads, abs(vocab), seq_len, vocab > 0)
        self.config = c
        w = np.frombuffer(raw, dtype="<f4", offset=28)
        hs = c.head_size
        kv_dim = kv_heads * hs
        shapes = [("tok", (c.vocab_size, dim)), ("rms_att", (layers, dim)), ("wq", (layers, dim, dim)),
                  ("wk", (layers, kv_dim, dim)), ("wv", (layers, kv_dim, dim)), ("wo", (layers, dim, dim)),
                  ("rms_ffn", (layers, dim)), ("w1", (layers, hidden, dim)), ("w2", (layers, dim, hidden)),
                  ("w3", (layers, hidden, dim)), ("rms_final", (dim,)), ("freq_real", (seq_len, hs // 2)),
                  ("freq_imag", (seq_len, hs // 2))]
        if not c.shared_classifier:
            shapes.append(("wcls", (c.vocab_size, dim)))
        need = sum(int(np.prod(s)) for _, s in shapes)
        if w.size != need:
            raise CheckpointError("%s: %d fp32 values after the header, the header's shape needs %d"
                                  % (path, w.size, need))
        off = 0
        for name, shape in shapes:
            n = int(np.prod(shape))
            setattr(self, name, w[off:off + n].reshape(shape))
            off += n
        if c.shared_classifier:
            self.wcls = self.tok
        # Rotary angles exactly as llama2.c computes them (float32), per position and pair.
        i = np.arange(0, hs, 2, dtype=np.float32)
        self.inv_freq = (1.0 / np.power(np.float32(10000.0), i / np.float32(hs))).astype(np.float32)

    # --- forward pieces ---
    @staticmethod
    def _rmsnorm(x, weight):
        ss = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) + np.float32(1e-5)
        return (x / np.sqrt(ss)) * weight

    def _rope(self, x, positions):
        """x: (..., T, heads, hs) with positions (T,); rotates interleaved pairs."""
        ang = positions.astype(np.float32)[:, None] * self.inv_freq[None, :]  # (T, hs/2)
        cos = np.cos(ang)[:, None, :]
        sin = np.sin(ang)[:, None, :]
        x0 = x[..., 0::2]
        x1 = x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out


class Session:
    """A batch of B sequences decoded together with a KV cache.

    feed(tokens) appends T tokens to every sequence (tokens: (B, T) int array)
    and returns (logits of the last position (B, vocab), probs) where probs[l]
    is the attention probability array of layer l, shape (B, heads, T, length
    after the feed): row t is query t's softmax over keys 0..pos(t).
    """

    def __init__(self, model, batch):
        self.m = model
        c = model.config
        self.B = batch
        self.k = np.zeros((c.n_layers, batch, c.seq_len, c.n_kv_heads, c.head_size), np.float32)
        self.v = np.zeros_like(self.k)
        self.pos = 0

    def feed(self, tokens):
        m, c = self.m, self.m.config
        tokens = np.asarray(tokens)
        B, T = tokens.shape
        if self.pos + T > c.seq_len:
            raise ValueError("the model's context is %d tokens; %d would not fit" % (c.seq_len, self.pos + T))
        hs, H, KV = c.head_size, c.n_heads, c.n_kv_heads
        rep = H // KV
        positions = np.arange(self.pos, self.pos + T)
        end = self.pos + T
        x = m.tok[tokens].astype(np.float32)  # (B, T, dim)
        scale = np.float32(1.0 / np.sqrt(hs))
        # Causal mask for the new queries over every key so far.
        key_pos = np.arange(end)
        mask = key_pos[None, :] > positions[:, None]  # (T, end)
        all_probs = []
        for l in range(c.n_layers):
            xb = Llama2c._rmsnorm(x, m.rms_att[l])
            q = (xb @ m.wq[l].T).reshape(B, T, H, hs)
            k = (xb @ m.wk[l].T).reshape(B, T, KV, hs)
            v = (xb @ m.wv[l].T).reshape(B, T, KV, hs)
            q = m._rope(q, positions)
            k = m._rope(k, positions)
            self.k[l, :, self.pos:end] = k
            self.v[l, :, self.pos:end] = v
            keys = np.repeat(self.k[l, :, :end], rep, axis=2)    # (B, end, H, hs)
            vals = np.repeat(self.v[l, :, :end], rep, axis=2)
            att = np.einsum("bthd,bshd->bhts", q, keys) * scale  # (B, H, T, end)
            att = np.where(mask[None, None], np.float32(-np.inf), att)
            att = att - att.max(axis=-1, keepdims=True)
            p = np.exp(att)
            p /= p.sum(axis=-1, keepdims=True)
            all_probs.append(p)
            o = np.einsum("bhts,bshd->bthd", p, vals).reshape(B, T, H * hs)
            x = x + o @ m.wo[l].T
            xb = Llama2c._rmsnorm(x, m.rms_ffn[l])
            h1 = xb @ m.w1[l].T
            h3 = xb @ m.w3[l].T
            h = (h1 / (np.float32(1.0) + np.exp(-h1))) * h3
            x = x + h @ m.w2[l].T
        self.pos = end
        xl = Llama2c._rmsnorm(x[:, -1], m.rms_final)
        logits = xl @ m.wcls.T
        return logits, all_probs


class Tokenizer:
    """llama2.c's tokenizer file: int32 max_token_length, then per token a float32 score, int32 length, bytes."""

    def __init__(self, path, vocab_size):
        self.path = str(path)
        raw = open(path, "rb").read()
        off = 4
        self.pieces, self.scores = [], []
        for i in range(vocab_size):
            if off + 8 > len(raw):
                raise CheckpointError("%s: ends at token %d of %d" % (path, i, vocab_size))
            score, n = struct.unpack_from("<fi", raw, off)
            off += 8
            if n < 0 or off + n > len(raw):
                raise CheckpointError("%s: token %d has a bad length %d" % (path, i, n))
            self.pieces.append(raw[off:off + n])
            self.scores.append(score)
            off += n
        self.index = {p: i for i, p in enumerate(self.pieces)}

    def encode(self, text, bos=True):
        """llama2.c's BPE: a dummy-prefix space, code points (bytes + 3 as fallback), greedy best-score merges."""
        ids = []
        data = text.encode("utf-8")
        if data:
            ids.append(self.index[b" "])
        for ch in text:
            b = ch.encode("utf-8")
            if b in self.index:
                ids.append(self.index[b])
            else:
                ids.extend(x + 3 for x in b)
        while True:
            best, best_i, best_id = -1e10, -1, -1
            for i in range(len(ids) - 1):
                j = self.index.get(self.pieces[ids[i]] + self.pieces[ids[i + 1]])
                if j is not None and self.scores[j] > best:
                    best, best_i, best_id = self.scores[j], i, j
            if best_i < 0:
                break
            ids[best_i:best_i + 2] = [best_id]
        return ([BOS] if bos else []) + ids

    def decode_piece(self, prev, token):
        p = self.pieces[token]
        if prev == BOS and p.startswith(b" "):
            p = p[1:]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            p = bytes([int(p[3:5], 16)])
        return p

    def decode(self, ids, prev=None):
        out = b""
        for t in ids:
            out += self.decode_piece(prev, t)
            prev = t
        return out.decode("utf-8", errors="replace")


def greedy(model, tok, prompt_ids, steps):
    """Greedy continuation of one prompt (a list of token ids); returns the new ids."""
    s = Session(model, 1)
    logits, _ = s.feed(np.array([prompt_ids]))
    out = []
    for _ in range(steps):
        t = int(np.argmax(logits[0]))
        out.append(t)
        if t == EOS or s.pos >= model.config.seq_len:
            break
        logits, _ = s.feed(np.array([[t]]))
    return out
