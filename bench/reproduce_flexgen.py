#!/usr/bin/env python3
"""Reproduce FlexGen's batch-size table (benchmark/batch_size_table.md: one
T4 16 GB, 208 GB DRAM, 1.5 TB SSD; prompt 512, 32 output tokens) and write
its section of docs/reproductions.md.

    /usr/bin/python3 bench/reproduce_flexgen.py [--steps N] [--calibration fitted|datasheet|both]
                                               [--doc docs/reproductions.md] [--json FILE] [--timelines]

Each cell runs its config in configs/flexgen/ (placement, batch and GPU
batches from FlexGen's own benchmark scripts, cited in each config) twice:
with FlexGen's fitted T4 constants and a measured T4 memory bandwidth
(configs/hardware/t4_flexgen_fitted.json) and with datasheet figures (configs/hardware/t4_flexgen.json). Throughput is
FlexGen's own definition (flex_opt.py, run_flexgen): batch x 32 generated
tokens over prefill plus 31 decode steps. --steps N simulates N decode steps
and takes 31 x their mean (the ctest label repro uses it). What bounds a run
is its busiest resource (GPU compute, CPU attention or a link). The causes
of the gaps (causes()) explain them with figures read from the same runs'
result.json metrics and timelines (--timelines keeps the timelines under the
output folder), the published table and FlexGen's own cost model
(bench/flexgen_cost_model.py); they are text, never an input to a run.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flexgen_cost_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("KVTIER_BINARY", os.path.join(ROOT, "build", "kvtier"))
GEN_TOKENS = 32  # FlexGen's --gen-len: the first token comes out of prefill

SYSTEMS = [("hf_accelerate", "Hugging Face Accelerate"), ("deepspeed", "DeepSpeed ZeRO-Inference"),
           ("flexgen", "FlexGen"), ("flexgen_compressed", "FlexGen with compression")]
MODELS = [("opt-6.7b", "OPT-6.7B"), ("opt-30b", "OPT-30B"), ("opt-175b", "OPT-175B")]
# FlexGen benchmark/batch_size_table.md, tokens/s.
PUBLISHED = {
    "hf_accelerate": {"opt-6.7b": 25.12, "opt-30b": 0.62, "opt-175b": 0.01},
    "deepspeed": {"opt-6.7b": 9.28, "opt-30b": 0.60, "opt-175b": 0.01},
    "flexgen": {"opt-6.7b": 25.26, "opt-30b": 7.32, "opt-175b": 0.69},
    "flexgen_compressed": {"opt-6.7b": 29.12, "opt-30b": 8.38, "opt-175b": 1.12},
}
TARGET = {"flexgen", "flexgen_compressed"}  # rows held to +-25%
TOLERANCE = 0.25
TIE = 1.05  # published figures closer than this are a tie for the ordering check
CALIBRATIONS = {"fitted": "configs/hardware/t4_flexgen_fitted.json", "datasheet": "configs/hardware/t4_flexgen.json"}

# Memory traffic of restoring one FP16 byte from FlexGen's 4-bit groups, as
# models/group_quant.h counts it from FlexGen's compression.py (13N bytes
# for N FP16 values = 6.5 per FP16 byte): text only, the run takes its own.
KV_RESTORE_TRAFFIC = 6.5


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def run_cell(system, model, calibration, steps, out_dir, timelines, bounds=True):
    cfg_path = f"configs/flexgen/{system}_{model}.json"
    cfg = load(cfg_path)
    tag = f"{system}_{model}_{calibration}"
    res = os.path.join(out_dir, tag)
    tl = os.path.join(out_dir, tag + ".timeline.json")
    cmd = [BIN, "run", os.path.join(ROOT, cfg_path), "--out", res, "-q",
           "--set", f"hardware={CALIBRATIONS[calibration]}", "--set", f"workload.decode_steps={steps}"]
    if bounds or timelines:
        cmd += ["--timeline", tl]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        return {"error": msg[-1] if msg else f"exit {p.returncode}"}
    with open(os.path.join(res, "result.json")) as f:
        m = json.load(f)["metrics"]
    prefill_bound = decode_bound = "-"
    hidden_prefill_s = pin_decode_s = None
    if bounds or timelines:
        prefill_bound = timeline_bound(tl, m, 0.0, m["ttft_s"])
        decode_bound = timeline_bound(tl, m, m["ttft_s"], m["simulated_time_s"])
        # The GPU waits for each hidden-state trip as it is made, so the
        # trips' time in prefill is prefill's share of metrics.weights.hidden_wait_s.
        hidden_prefill_s = timeline_span_s(tl, 0.0, m["ttft_s"], "hidden ")
        pin_decode_s = timeline_span_s(tl, m["ttft_s"], m["simulated_time_s"], "pin ")
        if not timelines:
            os.remove(tl)
    batch = cfg["workload"]["batch"]
    decode_s = (GEN_TOKENS - 1) * m["all_steps_mean_latency_s"]
    total = m["ttft_s"] + decode_s
    w = m.get("weights", {})
    return {"tokens_per_s": batch * GEN_TOKENS / total, "prefill_s": m["ttft_s"], "decode_s": decode_s,
            "step_s": m["all_steps_mean_latency_s"], "bound": decode_bound, "prefill_bound": prefill_bound,
            "batch": batch,
            "weights_streamed_GB": w.get("bytes_to_gpu", 0) / 1e9,
            "steps": steps, "gpu_batches": w.get("gpu_batches", 1),
            "hidden_wait_s": w.get("hidden_wait_s", 0.0), "hidden_prefill_s": hidden_prefill_s,
            "pin_copy_s": w.get("pin_copy_s", 0.0), "pin_decode_s": pin_decode_s,
            "prefill_write_wait_s": m.get("prefill_write_wait_s", 0.0),
            "prefill_staging_peak_GB": m.get("prefill_staging_peak_bytes", 0.0) / 1e9}


def busy_s(intervals):
    """Seconds of the union of (start, end) intervals."""
    busy, cur_s, cur_e = 0.0, None, None
    for s, d in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, d
        else:
            cur_e = max(cur_e, d)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


def timeline_span_s(path, t0, t1, prefix):
    """Seconds between t0 and t1 in which some job whose timeline name
    starts with `prefix` ("hidden ": the hidden states' trips; "pin ": the
    copies into pinned buffers) is under way."""
    with open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    a, b = t0 * 1e6, t1 * 1e6
    iv = [(max(e["ts"], a), min(e["ts"] + e["dur"], b)) for e in ev
          if e.get("ph") == "X" and e.get("name", "").startswith(prefix)]
    return busy_s([x for x in iv if x[1] > x[0]]) / 1e6


def timeline_bound(path, m, t0, t1):
    """The busiest resource between t0 and t1 (seconds), read from the run's
    timeline: the GPU's compute stream, the CPU's work queue (attention) and
    every link. Every link a transfer crosses is busy while it moves, so
    among the resources within 5% of the busiest the slowest link is the
    bound (compute first)."""
    with open(path) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    spans = {}
    a, b = t0 * 1e6, t1 * 1e6
    for e in ev:
        if e.get("ph") != "X":
            continue
        key = (e["pid"], e["tid"])
        name, proc = names.get(key, "?"), procs.get(e["pid"], "")
        if proc == "streams" and not (name.endswith(" compute") or name.endswith(" work")):
            continue  # copy streams: their links say where they are bound
        s, d = max(e["ts"], a), min(e["ts"] + e["dur"], b)
        if d > s:
            spans.setdefault(name, []).append((s, d))
    end = m["simulated_time_s"] or 1.0
    cands = []
    for name, iv in spans.items():
        busy = busy_s(iv)
        base = name.split(" #")[0]  # a link's second timeline track (the other direction of a shared link)
        l = m.get("links", {}).get(base)
        compute = name.endswith(" compute") or name.endswith(" work")
        bw = 0.0 if compute else (l["bytes"] / (l["utilization"] * end) if l and l.get("utilization", 0) > 0 else float("inf"))
        cpu_label = "CPU attention" if not m.get("weights", {}).get("pin_copy_s") else "CPU (attention, pinning copies)"
        label = "GPU compute" if name.endswith(" compute") else (cpu_label if name.endswith(" work") else base)
        cands.append((label, busy / max(b - a, 1e-12), bw))
    if not cands:
        return "-"
    top = max(c[1] for c in cands)
    name, frac, _ = min((c for c in cands if c[1] >= top - 0.05), key=lambda c: c[2])
    return f"{name} ({frac:.0%} busy)"


def bound(m):
    """The busiest resource of a run: GPU compute, CPU attention, or a link.
    Every link a transfer crosses is busy while it moves, so among equally
    busy links (to 1%) the slowest one (lowest bandwidth) is the bound."""
    end = m["simulated_time_s"] or 1.0
    cands = [("GPU compute", m.get("gpu_busy_fraction", 0.0), 0.0)]
    w = m.get("weights")
    if w and w.get("cpu_attention_s", 0) + w.get("pin_copy_s", 0) > 0:
        label = "CPU attention" if not w.get("pin_copy_s") else "CPU (attention, pinning copies)"
        cands.append((label, (w["cpu_attention_s"] + w.get("pin_copy_s", 0)) / end, 0.0))
    for name, l in m.get("links", {}).items():
        bw = l["bytes"] / (l["utilization"] * end) if l.get("utilization", 0) > 0 else float("inf")
        cands.append((name, l.get("busy_fraction", 0.0), bw))
    name, frac, _ = min(cands, key=lambda c: (-round(c[1], 2), c[2]))
    return f"{name} ({frac:.0%} busy)"


def fmt(x):
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def run_all(calibrations, steps, out_dir, timelines, bounds=True):
    results = {}
    for cal in calibrations:
        for system, _ in SYSTEMS:
            for model, _ in MODELS:
                results[(cal, system, model)] = run_cell(system, model, cal, steps, out_dir, timelines, bounds)
    return results


def within(r, pub):
    return "error" not in r and abs(r["tokens_per_s"] / pub - 1) <= TOLERANCE


def ordering_violations(results, cal):
    """Pairs of systems whose published order (outside a tie) kvtier reverses, per model column."""
    bad = []
    for model, mlabel in MODELS:
        for i, (a, al) in enumerate(SYSTEMS):
            for b, bl in SYSTEMS[i + 1:]:
                pa, pb = PUBLISHED[a][model], PUBLISHED[b][model]
                if max(pa, pb) / min(pa, pb) < TIE:
                    continue
                ra, rb = results[(cal, a, model)], results[(cal, b, model)]
                if "error" in ra or "error" in rb:
                    bad.append(f"{mlabel}: {al} vs {bl}: cannot compare")
                    continue
                if (pa > pb) != (ra["tokens_per_s"] > rb["tokens_per_s"]):
                    bad.append(f"{mlabel}: published {al} {'>' if pa > pb else '<'} {bl}, kvtier the reverse")
    return bad


def section(results, calibrations, steps):
    L = ["## FlexGen (T4 batch-size table)", "",
         "Generated by `/usr/bin/python3 bench/reproduce_flexgen.py` (also run by `bench/reproduce.py`). FlexGen's "
         "`benchmark/batch_size_table.md`: one T4 16 GB, 208 GB DRAM, 1.5 TB SSD, prompt 512, 32 output tokens; "
         "tokens/s as FlexGen counts them (batch x 32 over prefill + 31 decode steps). Each cell's placement, "
         "batch and GPU batches come from FlexGen's benchmark scripts (`configs/flexgen/`, each citing its "
         "command). Two calibrations: FlexGen's own fitted T4 constants, with the T4's memory bandwidth as measured "
         "(bandwidthTest, 239.6 of the datasheet's 320 GB/s; FlexGen fits none) (`configs/hardware/t4_flexgen_fitted.json`), "
         "and datasheet figures (`configs/hardware/t4_flexgen.json`). Target: the FlexGen rows within "
         f"+-{TOLERANCE:.0%} of the published figure, and the published order of the systems in every column "
         f"(figures within {TIE - 1:.0%} of each other count as a tie).", ""]
    for cal in calibrations:
        L += [f"### {cal} calibration ({CALIBRATIONS[cal]})", "",
              "| system | " + " | ".join(f"{ml} published | {ml} kvtier" for _, ml in MODELS) + " |",
              "|---|" + "---|---|" * len(MODELS)]
        for system, slabel in SYSTEMS:
            cells = []
            for model, _ in MODELS:
                r = results[(cal, system, model)]
                pub = PUBLISHED[system][model]
                if "error" in r:
                    cells += [f"{pub:g}", "cannot run"]
                else:
                    mark = ""
                    if system in TARGET:
                        mark = " (within)" if within(r, pub) else " (misses)"
                    cells += [f"{pub:g}", f"{fmt(r['tokens_per_s'])}{mark}"]
            L.append(f"| {slabel} | " + " | ".join(cells) + " |")
        L += ["", "| system | model | batch | kvtier / published | prefill s | prefill bound | decode step s | decode bound | weights streamed GB |",
              "|---|---|---|---|---|---|---|---|---|"]
        for system, slabel in SYSTEMS:
            for model, mlabel in MODELS:
                r = results[(cal, system, model)]
                if "error" in r:
                    L.append(f"| {slabel} | {mlabel} | - | cannot run: {r['error']} | - | - | - | - | - |")
                    continue
                L.append(f"| {slabel} | {mlabel} | {r['batch']} | {fmt(r['tokens_per_s'] / PUBLISHED[system][model])} | "
                         f"{fmt(r['prefill_s'])} | {r['prefill_bound']} | {fmt(r['step_s'])} | {r['bound']} | "
                         f"{fmt(r['weights_streamed_GB'])} |")
        bad = ordering_violations(results, cal)
        L += ["", "Order of the systems per column: " + ("preserved." if not bad else "; ".join(bad) + "."), ""]
        if cal == "fitted":
            L += cost_model_table(results)
    L += ["Cause of the gaps: " + causes(results, calibrations), ""]
    if steps != GEN_TOKENS - 1:
        L.insert(2, f"(Run with {steps} decode steps, scaled to 31.)")
    return "\n".join(L) + "\n"


def _gb(bps):
    return bps / flexgen_cost_model.GB  # FlexGen's fitted rates are in GiB/s (flexgen/utils.py GB)


def model_config(system, model):
    cfg = load(f"configs/flexgen/{system}_{model}.json")
    return cfg, load(cfg["model"]) if isinstance(cfg["model"], str) else cfg["model"]


def host_memory_GBps(calibration):
    """The host memory's rate as kvtier builds it from the hardware config
    (channels x MT/s x 8 bytes x efficiency): what the pinning copies run at."""
    d = load(CALIBRATIONS[calibration])["devices"]["dram"]
    return d["channels"] * d["MTps"] * 8 * d.get("efficiency", 1.0) / 1e3


def weights_read_GB(model):
    """Bytes of weights a decode step reads: every layer and the LM head's
    whole matrix (the embedding reads one row per token), as kvtier counts them."""
    _, m = model_config("flexgen", model)
    d, v, e = m["heads"] * m["head_dim"], m.get("vocab_size", 0), m["dtype_bytes"]
    embedding_and_head = v * d * (1 if m.get("tied_embeddings") else 2)
    return ((m["params_B"] * 1e9 - embedding_and_head) * e + v * d * e) / 1e9


def _ratio(r, pub):
    return None if r is None or "error" in r else r["tokens_per_s"] / pub


def _pct(x):
    return "-" if x is None else f"{abs(x - 1):.0%}"


def _above(x, up="above", down="below"):
    return "-" if x is None else (up if x >= 1 else down)


def _times(x):
    """A ratio as 'N.Nx high' or 'N.Nx low'."""
    if x is None:
        return "-"
    return f"{x:.1f}x high" if x >= 1 else f"{1 / x:.1f}x low"


def _standing(x):
    """Where a kvtier / published ratio stands against the +-25% target."""
    if x is None:
        return "not run"
    if abs(x - 1) <= TOLERANCE:
        return "within"
    off = f"{_pct(x)} {_above(x, 'high', 'low')}"
    return off + (", just outside" if abs(x - 1) - TOLERANCE < 0.05 else ", outside")


def _span(xs, f):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return "-"
    lo, hi = f(xs[0]), f(xs[-1])
    return lo if lo == hi else f"{lo}-{hi}"


def _bound_name(r):
    return "-" if r is None or "error" in r else r["bound"].split(" (")[0]


def _s(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def causes(results, calibrations):
    """The causes of the gaps, every figure read from this run's results
    (result.json metrics and timelines), the published table, the configs'
    constants and FlexGen's own cost model (bench/flexgen_cost_model.py)."""
    def res(cal, system, model):
        r = results.get((cal, system, model))
        return None if r is None or "error" in r else r

    def ratio(cal, system, model):
        return _ratio(res(cal, system, model), PUBLISHED[system][model])

    k = flexgen_cost_model.FITTED
    TF = flexgen_cost_model.TFLOP
    fitted_hw = load(CALIBRATIONS["fitted"])["devices"]["gpu"]
    measured_GBps = fitted_hw["memory_GBps"] * fitted_hw["memory_efficiency"]
    sheet = load(CALIBRATIONS["datasheet"])["devices"]
    sheet_cpu_TF = sheet["cpu"]["cores"] * sheet["cpu"]["fp32_GFLOPS_per_core"] / 1e3
    sheet_disk_GBps = sheet["ssd"]["drives"] * sheet["ssd"]["read_GBps"]
    cpu_GF = k["cpu_flops"] / 1e9
    T = []
    T.append("Read from the runs' timelines (prefill and decode bounds above; `--timelines` keeps them).")
    if "fitted" in calibrations:
        T.append(
            f"Fitted calibration: FlexGen's four fitted GPU rates (GEMMs {k['mm_flops_p'] / TF:g} / {k['mm_flops_g'] / TF:g} "
            f"TFLOP/s and batched matmuls {k['bmm_flops_p'] / TF:g} / {k['bmm_flops_g'] / TF:g} TFLOP/s in prefill / decode) "
            "applied per kernel shape, its fitted link, disk and CPU rates, and the T4's memory bandwidth as measured "
            f"({measured_GBps:.1f} GB/s device to device; FlexGen fits none, and memory-bound kernels run at the sustained "
            f"rate, not the datasheet's {fitted_hw['memory_GBps']:g}).")
        # FlexGen OPT-6.7B: weights on the GPU.
        r67 = res("fitted", "flexgen", "opt-6.7b")
        if r67:
            implied = (r67["batch"] * GEN_TOKENS / PUBLISHED["flexgen"]["opt-6.7b"] - r67["prefill_s"]) / (GEN_TOKENS - 1)
            T.append(
                f"FlexGen OPT-6.7B is {_standing(ratio('fitted', 'flexgen', 'opt-6.7b'))}: decode reads "
                f"{weights_read_GB('opt-6.7b'):.1f} GB of weights per step (the layers and the LM head) from the T4's GDDR6 "
                f"at the measured bandwidth, then attention at the fitted decode rate, {r67['step_s'] * 1e3:.0f} ms a step, "
                f"where FlexGen's published {PUBLISHED['flexgen']['opt-6.7b']:g} tokens/s implies about {implied * 1e3:.0f} ms "
                f"(with kvtier's {r67['prefill_s']:.2f} s prefill).")
        # FlexGen OPT-30B against FlexGen's cost model.
        r30 = res("fitted", "flexgen", "opt-30b")
        if r30:
            tps30, t30 = cost_model("flexgen", "opt-30b")
            inp30 = flexgen_cost_model.from_config(load("configs/flexgen/flexgen_opt-30b.json"))
            cm_prefill = t30["prefill_layer_s"] * inp30["l"]
            kv_layer_GB = 4 * inp30["s"] * inp30["h1"] * inp30["bls"] / 1e9  # K and V in FP16, the prompt of every sequence
            b = _bound_name(r30)
            decode_clause = (f"CPU attention at FlexGen's fitted {cpu_GF:.1f} GFLOP/s bounds decode" if b.startswith("CPU")
                             else f"CPU attention runs at FlexGen's fitted {cpu_GF:.1f} GFLOP/s (decode's bound not read)"
                             if b == "-" else
                             f"decode is bound by {b} (CPU attention at FlexGen's fitted {cpu_GF:.1f} GFLOP/s)")
            wait = r30["prefill_write_wait_s"]
            write_clause = (f"so part of each layer waits for earlier writes ({wait:.0f} s in all, "
                            "metrics.prefill_write_wait_s)" if wait >= 0.5 else
                            f"and no layer waits for earlier writes ({wait:.1f} s, metrics.prefill_write_wait_s): they "
                            "drain while later kernels run")
            x = r30["tokens_per_s"] / tps30
            y = r30["prefill_s"] / cm_prefill
            T.append(
                f"FlexGen OPT-30B is {_standing(ratio('fitted', 'flexgen', 'opt-30b'))}: {decode_clause}, and FlexGen's "
                "per-GPU-batch synchronisation makes each layer's first GPU batch wait for the next layer's weights. "
                f"FlexGen's own cost model, with the same fitted constants at the same policy, gives {fmt(tps30)} (published "
                f"{PUBLISHED['flexgen']['opt-30b']:g}); kvtier's {fmt(r30['tokens_per_s'])} is {_pct(x)} {_above(x)} it, "
                "because the cost model adds each decode layer's weight load "
                f"({t30['decode_weights_to_gpu_s']:.2g} s) to the slowest of the other terms, where kvtier overlaps it with "
                f"the layer before, as FlexGen's --overlap does. kvtier's prefill ({_s(r30['prefill_s'])} s) is {_pct(y)} "
                f"{_above(y)} the cost model's ({_s(cm_prefill)} s), which overlaps every transfer with compute: the hidden "
                "states go to host memory and back before every GPU batch's kernels, at both sub-layers, as FlexGen copies "
                f"them on the kernels' own CUDA stream ({_s(r30['hidden_prefill_s'])} s in all, prefill's share of "
                f"metrics.weights.hidden_wait_s, at the fitted {_gb(k['gtoc_bdw_hidden']):g} GB/s out and "
                f"{_gb(k['ctog_bdw']):g} GB/s in, sharing the link with the weight stream and the KV writes), and the "
                f"{kv_layer_GB:.1f} GB of KV each layer writes into FlexGen's pageable CPU cache, relayed at the fitted "
                f"{_gb(k['gtoc_bdw_cache']):g} GB/s, is held in the GPU memory the weights and their buffers leave until "
                f"written ({r30['prefill_staging_peak_GB']:.2f} GB of it at most, metrics.prefill_staging_peak_bytes), "
                f"{write_clause}.")
        r67 = res("fitted", "flexgen", "opt-6.7b")
        tps67, _ = cost_model("flexgen", "opt-6.7b")
        T.append(f"At OPT-6.7B (batch {r67['batch'] if r67 else '-'}) the cost model's {fmt(tps67)} counts GEMM FLOPs only, "
                 "where the layer is bound by reading its weights from GDDR6.")
        # FlexGen OPT-175B: the disk read.
        r175 = res("fitted", "flexgen", "opt-175b")
        if r175:
            cfg175, _ = model_config("flexgen", "opt-175b")
            inp = flexgen_cost_model.from_config(cfg175)
            kv_GB = 4 * (inp["s"] + inp["n"]) * inp["h1"] * inp["bls"] * inp["l"] / 1e9  # FlexGen allocates prompt + gen_len
            disk_pct = cfg175["policies"]["weights"]["disk_percent"]
            tps175, t175 = cost_model("flexgen", "opt-175b")
            implied_step = (r175["batch"] * GEN_TOKENS / PUBLISHED["flexgen"]["opt-175b"] - r175["prefill_s"]) / (GEN_TOKENS - 1)
            implied_GBps = _gb(k["dtoc_bdw"]) * r175["step_s"] / implied_step
            near = abs(implied_GBps / sheet_disk_GBps - 1) <= 0.1
            x = r175["tokens_per_s"] / tps175
            pub_x = PUBLISHED["flexgen"]["opt-175b"] / tps175
            sheet_clause = ""
            if "datasheet" in calibrations:
                sheet_clause = (f"; with datasheet figures the cell is "
                                f"{_standing(ratio('datasheet', 'flexgen', 'opt-175b'))}")
            agree = (f"kvtier agrees with FlexGen's model ({x:.2f} of it)" if abs(x - 1) <= 0.1
                     else f"kvtier gives {x:.2f} of FlexGen's model")
            T.append(
                f"FlexGen OPT-175B is {_times(ratio('fitted', 'flexgen', 'opt-175b'))}: its KV ({kv_GB:,.0f} GB, on disk) "
                f"and {disk_pct:g}% of its weights are read from disk every step, and at the fitted {_gb(k['dtoc_bdw']):g} "
                f"GB/s disk-to-CPU rate that takes about {round(r175['step_s'], -2):,.0f} s a step, where FlexGen's "
                "measurement (20 layer iterations of the first decode step, projected) implies about "
                f"{implied_GBps:.1f} GB/s ({implied_step:,.0f} s a step once kvtier's prefill is taken from its total time), "
                + (f"about the 4-drive array's datasheet rate ({sheet_disk_GBps:.2f} GB/s)" if near else
                   f"against the 4-drive array's datasheet {sheet_disk_GBps:.2f} GB/s")
                + f"{sheet_clause}. FlexGen's own cost model, with the same fitted constants at the same policy, predicts "
                f"{fmt(tps175)} tokens/s for this cell ({t175['decode_disk_to_cpu_s']:.3g} of its "
                f"{t175['decode_layer_s']:.3g} s per decode layer are the disk read): {agree}, and FlexGen's measurement is "
                f"{pub_x if pub_x >= 1 else 1 / pub_x:.1f}x {_above(pub_x, 'faster', 'slower')} than its own model.")
        # FlexGen with compression.
        c67, c30, c175 = (res("fitted", "flexgen_compressed", m) for m in ("opt-6.7b", "opt-30b", "opt-175b"))
        x67, x30, x175 = (ratio("fitted", "flexgen_compressed", m) for m in ("opt-6.7b", "opt-30b", "opt-175b"))
        names = {_bound_name(c) for c in (c67, c30) if c}
        bound_clause = ("bound by GPU compute" if names == {"GPU compute"} else
                        "whose GPU work is" if "-" in names else
                        f"bound in decode by {' and '.join(sorted(names))}; their GPU work is")
        both = (f"{_standing(x67)} at OPT-6.7B ({fmt(x67)}) and OPT-30B ({fmt(x30)})" if _standing(x67) == _standing(x30)
                else f"{_standing(x67)} at OPT-6.7B ({fmt(x67)}) and {_standing(x30)} at OPT-30B ({fmt(x30)})")
        T.append(
            f"FlexGen with compression is {both}, {bound_clause}: the restores of 4-bit weights and KV ({KV_RESTORE_TRAFFIC:g} bytes of memory "
            "traffic per FP16 byte, counted from FlexGen's compression.py) at the measured bandwidth, and the GEMMs at the "
            "fitted decode rate.")
        host = host_memory_GBps("fitted")
        if c30:
            _, m30 = model_config("flexgen_compressed", "opt-30b")
            per_step = c30["pin_decode_s"] / c30["steps"] if c30["pin_decode_s"] is not None else None
            pin_GB = (None if per_step is None else
                      per_step * host * 1e9 / 2 / (m30["layers"] * c30["gpu_batches"]) / 1e9)  # read and written once
            T.append(
                "At OPT-30B its KV lives in FlexGen's CPU cache, which FlexGen never pins, so before each GPU batch's "
                "kernels launch the thread that launches them copies that GPU batch's compressed KV "
                f"({'-' if pin_GB is None else f'{pin_GB:.2f}'} GB a layer) into a pinned buffer, "
                f"{'-' if per_step is None else f'{per_step:.1f}'} s a step at the host memory's {host:.1f} GB/s "
                f"(decode's share of metrics.weights.pin_copy_s), and its prefill waits {_s(c30['hidden_prefill_s'])} s in "
                "all for the hidden states' trips to host memory and back (prefill's share of "
                "metrics.weights.hidden_wait_s), in which earlier KV writes drain"
                + (f", and {c30['prefill_write_wait_s']:.0f} s more for those writes (metrics.prefill_write_wait_s)."
                   if c30["prefill_write_wait_s"] >= 0.5 else "."))
        if c175:
            per_step = c175["pin_decode_s"] / c175["steps"] if c175["pin_decode_s"] is not None else None
            T.append(
                f"At OPT-175B it is {_standing(x175)}: the same copies and those of the pageable weights (--pin-weight 0) "
                f"add {'-' if per_step is None else f'{per_step:.0f}'} s to a {c175['step_s']:.0f} s step, the hidden "
                f"states {_s(c175['hidden_prefill_s'])} s to prefill, and the rest is the restores of 4-bit weights for "
                "every GPU batch, whose measured cost FlexGen's cost model does not give.")
        # The baselines, weights in DRAM or on disk.
        def where(system, model):
            w = load(f"configs/flexgen/{system}_{model}.json")["policies"]["weights"]
            return "disk" if w.get("disk_percent", 0) > 0 else ("dram" if w.get("cpu_percent", 0) > 0 else "gpu")
        base = [(s, m) for s in ("hf_accelerate", "deepspeed") for m, _ in MODELS]
        dram = [ratio("fitted", s, m) for s, m in base if where(s, m) == "dram"]
        disk = [(s, m) for s, m in base if where(s, m) == "disk"]
        dram_known = [x for x in dram if x is not None]
        if dram_known and min(dram_known) >= 1:
            dram_words = f"run {_span(dram, lambda v: f'{v:.1f}')}x faster than measured"
        elif dram_known and max(dram_known) < 1:
            dram_words = f"run at {_span(dram, lambda v: f'{v:.2f}')}x of the measured figure"
        else:
            dram_words = f"run at {_span(dram, lambda v: f'{v:.2f}')}x the measured figure"
        disk_sheet = ""
        if "datasheet" in calibrations:
            disk_sheet = (f"; datasheet: {_span([ratio('datasheet', s, m) for s, m in disk], lambda v: f'{v:.2f}')}x, "
                          "Accelerate's read and copy of a layer one after the other")
        T.append(
            f"Hugging Face Accelerate and DeepSpeed ZeRO-Inference with weights in DRAM {dram_words}: kvtier streams them "
            f"at FlexGen's {_gb(k['ctog_bdw']):g} GB/s (pinned memory), while Accelerate's hooks copy each module "
            "synchronously from pageable memory and ZeRO-3 gathers parameters module by module; with weights on disk they "
            f"are bound by the disk read ({_gb(k['dtoc_bdw']):g} GB/s fitted: "
            f"{_span([ratio('fitted', s, m) for s, m in disk], lambda v: f'{v:.2f}')}x{disk_sheet}).")
    if "datasheet" in calibrations:
        x67 = ratio("datasheet", "flexgen", "opt-6.7b")
        comp = [ratio("datasheet", "flexgen_compressed", m) for m, _ in MODELS]
        comp_known = [x for x in comp if x is not None]
        comp_dir = ("high" if comp_known and min(comp_known) > 1 else
                    "low" if comp_known and max(comp_known) < 1 else "off")
        b30 = _bound_name(res("datasheet", "flexgen", "opt-30b"))
        b30_words = ("the weight stream over PCIe" if b30.startswith("pcie") else
                     "another resource (bound not read)" if b30 == "-" else b30)
        gpu = sheet["gpu"]
        T.append(
            f"Datasheet calibration: one roofline per layer at the datasheet {gpu['fp16_TFLOPS']:g} TFLOP/s and "
            f"{gpu['memory_GBps']:g} GB/s (no per-shape figure exists in a datasheet), so FlexGen OPT-6.7B is {_pct(x67)} "
            f"{_above(x67, 'high', 'low')} and the compressed cells "
            f"{_span([abs(x - 1) for x in comp_known], lambda v: f'{v * 100:.0f}')}% {comp_dir}; the CPU's datasheet "
            f"{sheet_cpu_TF:.0f} TFLOP/s makes CPU attention cheap, so FlexGen OPT-30B becomes bound by {b30_words} "
            f"({ratio('datasheet', 'flexgen', 'opt-30b') or 0:.1f}x); FlexGen measured its CPU attention (PyTorch, FP32) near "
            f"the fitted {cpu_GF:.1f} GFLOP/s.")
    T.append("Not modelled (docs/weights.md): the page cache in front of FlexGen's memory-mapped disk tensors, the weights "
             "of FlexGen's separate attention and MLP layers loading at half a layer's granularity.")
    return " ".join(T)


def cost_model(system, model):
    """FlexGen's own cost model (bench/flexgen_cost_model.py) at the cell's policy: tokens/s and its decode terms."""
    return flexgen_cost_model.estimate(**flexgen_cost_model.from_config(load(f"configs/flexgen/{system}_{model}.json")))


def cost_model_table(results):
    """The FlexGen row beside FlexGen's own analytical model with the same
    fitted constants: the same mechanism estimated twice, independently."""
    L = ["FlexGen's own cost model (its experimental/cost_model.py evaluated at each cell's policy with the same fitted "
         "constants; bench/flexgen_cost_model.py) against kvtier's fitted run, FlexGen row:", "",
         "| model | published | FlexGen's cost model | kvtier (fitted) | kvtier / cost model | cost model's decode layer: weights to GPU s, disk to CPU s, compute s |",
         "|---|---|---|---|---|---|"]
    for model, mlabel in MODELS:
        r = results.get(("fitted", "flexgen", model))
        tps, t = cost_model("flexgen", model)
        got = "-" if r is None or "error" in r else fmt(r["tokens_per_s"])
        ratio = "-" if r is None or "error" in r else fmt(r["tokens_per_s"] / tps)
        L.append(f"| {mlabel} | {PUBLISHED['flexgen'][model]:g} | {fmt(tps)} | {got} | {ratio} | "
                 f"{t['decode_weights_to_gpu_s']:.3g}, {t['decode_disk_to_cpu_s']:.3g}, {t['decode_compute_s']:.3g} |")
    L.append("")
    return L


def write_section(text, path, head="## FlexGen (T4 batch-size table)"):
    """Replaces the section of `path` that starts with `head` (to the next '## ' or the end), or appends it."""
    old = open(path).read() if os.path.exists(path) else ""
    if head in old:
        start = old.index(head)
        nxt = old.find("\n## ", start + len(head))
        new = old[:start] + text + (old[nxt + 1:] if nxt >= 0 else "")
    else:
        new = old + ("\n" if old and not old.endswith("\n\n") else "") + text
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=GEN_TOKENS - 1, help="decode steps to simulate (31 = all)")
    ap.add_argument("--calibration", default="both", choices=["fitted", "datasheet", "both"])
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "flexgen"))
    ap.add_argument("--doc", default=None, help="write the section into this Markdown file (default docs/reproductions.md "
                                                "for a full run of both calibrations)")
    ap.add_argument("--json", default=None, help="write the results as JSON here")
    ap.add_argument("--timelines", action="store_true", help="write each run's timeline next to its result")
    ap.add_argument("--no-bounds", action="store_true", help="skip reading the bounds from the timelines (faster)")
    a = ap.parse_args(argv)
    cals = ["fitted", "datasheet"] if a.calibration == "both" else [a.calibration]
    os.makedirs(a.out, exist_ok=True)
    results = run_all(cals, a.steps, a.out, a.timelines, not a.no_bounds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"|".join(k): v for k, v in results.items()}, f, indent=1)
    full = a.steps == GEN_TOKENS - 1 and len(cals) == 2
    doc = a.doc or (os.path.join(ROOT, "docs", "reproductions.md") if full else None)
    if doc:
        write_section(section(results, cals, a.steps), doc)
        print(f"reproduce_flexgen.py: wrote {doc}")
    for (cal, system, model), r in results.items():
        pub = PUBLISHED[system][model]
        got = "cannot run: " + r["error"] if "error" in r else f"{r['tokens_per_s']:.3g} tokens/s ({r['bound']})"
        print(f"{cal} {system} {model}: published {pub}, kvtier {got}")
    return results


if __name__ == "__main__":
    main()
