#!/usr/bin/env python3
"""FlexGen's own analytical cost model, evaluated at a fixed policy: an
independent estimate to hold kvtier's FlexGen cells against.

FlexGen (Sheng et al., ICML 2023) publishes a linear cost model of its block
schedule in experimental/cost_model.py (FMInference/FlexGen), fitted to its
T4 testbed, and searches policies with it. At a given policy every term is
fixed, so it reduces to closed forms, written here from the model's
published equations (per layer, per block of bls = gpu_batch x num_gpu_batches
sequences):

    prefill  Tpre = max(ctog + dtoc, gtoc + ctod, comp)
    decode   Tgen = ctog + max(gtoc, dtoc, ctod, comp)
    total    T    = Tpre x l + Tgen x (n - 1) x l,  throughput = bls x n / T

with ctog / gtoc / dtoc / ctod the bytes each direction moves (weights,
cache, hidden states, split by the placement fractions) over its fitted
bandwidth, and comp the GEMMs and attention at the fitted FLOP rates (the
CPU's for attention over KV held off the GPU). The model counts no memory
traffic in its GPU kernels (decode GEMMs at a fixed FLOP rate whatever the
batch), overlaps nothing of a layer's weight load in decode, and has only
weight compression (the weights' bytes / 4); FlexGen's own note says CPU
compute delegation and quantization are incomplete in it.

    /usr/bin/python3 bench/flexgen_cost_model.py configs/flexgen/flexgen_opt-30b.json
"""

import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GB = 1 << 30  # flexgen/utils.py
TFLOP = 1e12

# experimental/cost_model.py, CostModelConfig: fitted on a GCP T4.
FITTED = {
    "ctog_bdw": 12.89 * GB, "gtoc_bdw_cache": 0.97 * GB, "gtoc_bdw_hidden": 4.82 * GB,
    "dtoc_bdw": 0.473 * GB, "ctod_bdw_cache_p": 0.746 * GB, "ctod_bdw_hidden_p": 2.015 * GB,
    "ctod_bdw_g": 2.015 * GB,
    "mm_flops_p": 21.24 * TFLOP, "mm_flops_g": 4.3 * TFLOP, "bmm_flops_p": 9.97 * TFLOP,
    "bmm_flops_g": 0.079 * TFLOP, "cpu_flops": 0.0123 * TFLOP,
    "c1": 0.0168, "c2": 0.0328, "c3": 0.0621,
}


def estimate(l, h1, h2, nh, s, n, bls, gbs, wg, wc, cg, cc, hg, hc, compress_w=False, k=FITTED):
    """Throughput (tokens/s) and the per-layer terms, fractions in [0, 1]."""
    wn, cn, hn = 1 - wg - wc, 1 - cg - cc, 1 - hg - hc
    wi = 8 * h1 ** 2 + 4 * h1 * h2  # one layer's FP16 weight bytes
    if compress_w:
        wi /= 4
    ctogp = (wi * (wc + wn) + 2 * s * h1 * bls * (hc + hn)) / k["ctog_bdw"]
    gtocp = 4 * (s + 1) * h1 * bls * (cc + cn) / k["gtoc_bdw_cache"] + 2 * s * h1 * bls * (hc + hn) / k["gtoc_bdw_hidden"]
    dtocp = (wi * wn + 2 * s * h1 * bls * hn) / k["dtoc_bdw"]
    ctodp = 4 * bls * (s + 1) * h1 * cn / k["ctod_bdw_cache_p"] + 2 * s * h1 * bls * hn / k["ctod_bdw_hidden_p"]
    compp = bls * (8 * s * h1 ** 2 + 4 * s * h1 * h2) / k["mm_flops_p"] + 4 * bls * s ** 2 * h1 / k["bmm_flops_p"]
    tpre = max(ctogp + dtocp, gtocp + ctodp, compp)
    ctogg = (wi * (wc + wn) + 2 * h1 * bls * (hc + hn)) / k["ctog_bdw"]
    gtocg = 2 * h1 * bls * (hc + hn) / k["gtoc_bdw_hidden"]
    dtocg = (4 * bls * (s + n / 2) * h1 * cn + 2 * h1 * bls * hn) / k["dtoc_bdw"] + wi * wn / (k["dtoc_bdw"] * 0.95)
    ctodg = (4 * bls * h1 * cn + 2 * h1 * bls * hn) / k["ctod_bdw_g"]
    # The CPU's fitted rate falls with small GPU batches and narrow models.
    g, h = max(0.0, math.log2(64 / gbs)), max(0.0, math.log2(4096 / h1))
    cpu = k["cpu_flops"] * max(0.1, 1 + k["c1"] * g * h - k["c2"] * g - k["c3"] * h)
    compg = (bls * (8 * h1 ** 2 + 4 * h1 * h2) / k["mm_flops_g"] + 4 * bls * (s + n / 2) * h1 * cg / k["bmm_flops_g"]
             + 4 * bls * (s + n / 2) * h1 * (cc + cn) / cpu)
    tgen = ctogg + max(gtocg, dtocg, ctodg, compg)
    total = tpre * l + tgen * (n - 1) * l
    terms = {"prefill_layer_s": tpre, "decode_layer_s": tgen, "decode_weights_to_gpu_s": ctogg,
             "decode_disk_to_cpu_s": dtocg, "decode_compute_s": compg}
    return bls * n / total, terms


def from_config(cfg):
    """The cost model's inputs from a configs/flexgen/ cell (model preset
    expanded): OPT's shapes (h2 = 4 h1), placement fractions, batch split."""
    m = cfg["model"]
    if isinstance(m, str):
        with open(os.path.join(ROOT, m)) as f:
            m = json.load(f)
    w = cfg["policies"]["weights"]
    kv = cfg["policies"]["placement"]["percent"]
    h1 = m["heads"] * m["head_dim"]
    bls = cfg["workload"]["batch"]
    act_cpu = w.get("activations", "gpu") == "cpu"
    return dict(l=m["layers"], h1=h1, h2=4 * h1, nh=m["heads"], s=cfg["workload"]["context_tokens"],
                n=cfg["workload"]["decode_steps"] + 1, bls=bls, gbs=bls // w.get("gpu_batches", 1),
                wg=w["gpu_percent"] / 100, wc=w["cpu_percent"] / 100, cg=kv[0] / 100, cc=kv[1] / 100,
                hg=0.0 if act_cpu else 1.0, hc=1.0 if act_cpu else 0.0,
                compress_w=w.get("compress_weights", "none") != "none")


def main(argv):
    for path in argv:
        with open(path if os.path.isabs(path) else os.path.join(ROOT, path)) as f:
            tps, terms = estimate(**from_config(json.load(f)))
        print(f"{path}: {tps:.4g} tokens/s " + " ".join(f"{k}={v:.4g}" for k, v in terms.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
