#!/usr/bin/env python3
"""Reproduce each source system's own comparison, on its own testbed, and
write docs/reproductions.md.

    python3 bench/reproduce.py [--fast] [--out DIR] [--doc docs/reproductions.md] [--json FILE]

Each row runs kvtier on the system's preset (configs/systems/) and on its
paper's baselines, with the workload the paper (or the seed, where there is
no paper) describes, and sets kvtier's figure beside the published one. The
published figures are the papers' claims, typed from the papers (see
docs/systems.md for sources); kvtier's are measured by the runs. What bounds
a step is read from the run: the busiest device or link. The causes of the
gaps are in CAUSES below, written after reading the timelines; they are
text, never an input to a run.

--fast runs fewer decode steps (the ctest label `repro` uses it and checks
the orderings); the full run writes the doc.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("KVTIER_BINARY", os.path.join(ROOT, "build", "kvtier"))


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and "preset" not in v:
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def system(name, policies=None, **over):
    """A system preset with overrides merged in; `policies`, if given,
    replaces the preset's policies whole (a baseline's own policies)."""
    cfg = load(f"configs/systems/{name}.json")
    cfg.pop("note", None)
    cfg = merge(cfg, over)
    if policies is not None:
        cfg["policies"] = copy.deepcopy(policies)
    return cfg


def run(cfg, out_dir, tag):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, tag + ".json")
    cfg = copy.deepcopy(cfg)
    cfg["name"] = tag
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    res_dir = os.path.join(out_dir, tag)
    p = subprocess.run([BIN, "run", path, "--out", res_dir, "-q"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else f"exit {p.returncode}"}
    with open(os.path.join(res_dir, "result.json")) as f:
        return json.load(f)["metrics"]


def bound(m):
    """The busiest resource of a run: GPU compute, APP's scorers, or a link."""
    if "error" in m:
        return "-"
    end = m["simulated_time_s"] or 1.0
    cands = [("GPU compute", m.get("gpu_busy_fraction", 0.0))]
    app = m.get("app")
    if app:
        cands.append(("FPGA scoring", app["fpga_busy_s"] / end))
        cands.append(("CPU scoring", app["cpu_busy_s"] / end))
    for name, l in m.get("links", {}).items():
        cands.append((name, l.get("busy_fraction", 0.0)))
    name, frac = max(cands, key=lambda c: c[1])
    return f"{name} ({frac:.0%} busy)"


def fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


# ---------------------------------------------------------------- the rows

LONGBENCH_36K = 36 * 1024
HILLINFER_HW = "configs/hardware/rtx4090_ddr4_smartssd.json"


def hillinfer_baselines():
    """HillInfer's comparison: its own design against the offloading designs
    it names (H2O, LeoAM) and a dense FlexGen-style offload, on its testbed."""
    tiers = {"hardware": {"preset": HILLINFER_HW, "tiers": ["gpu", "dram", "smartssd"]}}
    return {
        "hillinfer": system("hillinfer"),
        # H2O's heavy hitters (accumulated attention, what H2O keeps) loaded
        # each step from the offloaded KV, with no near-data scoring and no hot pool.
        "h2o_offload": system("hillinfer", **tiers, policies={
            "eviction": {"name": "lru"}, "promotion": {"name": "none"}, "placement": {"name": "top"},
            "prefetch": {"name": "layer_ahead", "depth": 1}, "evaluation": {"name": "topk", "budget": 0.2},
            "compression": {"name": "none"}}),
        # LeoAM-like: per-chunk key summaries (Quest-style bounds) choose what to load.
        "leoam_like": system("hillinfer", **tiers, policies={
            "eviction": {"name": "lru"}, "promotion": {"name": "none"}, "placement": {"name": "top"},
            "prefetch": {"name": "layer_ahead", "depth": 1}, "evaluation": {"name": "quest", "budget": 0.2},
            "compression": {"name": "none"}}),
        # FlexGen-style: dense attention over the whole offloaded KV.
        "flexgen_dense": system("hillinfer", **tiers, policies={
            "eviction": {"name": "lru"}, "promotion": {"name": "none"}, "placement": {"name": "top"},
            "prefetch": {"name": "layer_ahead", "depth": 1}, "evaluation": {"name": "exact"},
            "compression": {"name": "none"}}),
    }


def hillinfer_rows(fast):
    steps = 8 if fast else 32
    rows = []
    cases = [("OPT-6.7B", "configs/models/opt-6.7b.json", 8.56, 1, None),
             ("Qwen-7B", "configs/models/qwen-7b.json", 7.3, 1, None)]
    # HillInfer's LLaMA-13B: its FP16 weights (26 GB) exceed the 4090's 24 GB, so
    # either INT8 weights (13 GB) stay on the GPU, or FP16 weights are partly
    # streamed from DRAM layer by layer (70% kept on the GPU leaves it room for KV).
    llama_int8 = {"preset": "configs/models/llama-13b.json", "weight_dtype": "int8"}
    llama_fp16 = "configs/models/llama-13b.json"
    partly_offloaded = {"policies": {"weights": {"name": "offload", "gpu_percent": 70, "cpu_percent": 30}}}
    if not fast:
        cases += [("LLaMA-13B, INT8 weights", llama_int8, 6.8, 1, None),
                  ("LLaMA-13B, FP16 weights 30% streamed from DRAM", llama_fp16, 6.8, 1, None, partly_offloaded),
                  # An AI PC: 16 GB of system memory (the Copilot+ PC minimum), less than the 19 GB of KV.
                  ("OPT-6.7B, AI PC (16 GB DRAM)", "configs/models/opt-6.7b.json", 8.56, 1, 16),
                  ("OPT-6.7B, batch 25", "configs/models/opt-6.7b.json", None, 25, None)]
    for label, model, claim, batch, dram_GB, *extra in cases:
        wl = {"batch": batch, "context_tokens": LONGBENCH_36K, "decode_steps": steps, "warmup_steps": 2}
        runs = {}
        for sysname, cfg in hillinfer_baselines().items():
            c = merge(cfg, {"model": model, "workload": wl})
            for e in extra:
                c = merge(c, e)
            if dram_GB:
                hw = c["hardware"] if isinstance(c["hardware"], dict) else {"preset": c["hardware"]}
                hw = merge(hw, {"devices": {"dram": {"capacity_GB": dram_GB}}})
                c["hardware"] = hw
            runs[sysname] = c
        rows.append({"group": "HillInfer", "case": label, "claim_speedup": claim, "runs": runs,
                     "claim_batch25_tokens_per_s": 50.0 if batch == 25 else None})
    return rows


def hillinfer_interval_rows(fast):
    """How HillInfer's standing moves with how often it scores (the seed does not say)."""
    if fast:
        return []
    wl = {"batch": 1, "context_tokens": LONGBENCH_36K, "decode_steps": 32, "warmup_steps": 2}
    hw = {"preset": HILLINFER_HW, "devices": {"dram": {"capacity_GB": 16}}}
    runs = {f"hillinfer, score_interval {n}": system("hillinfer", workload=wl, hardware=hw,
                                                   policies=merge(load("configs/systems/hillinfer.json")["policies"],
                                                                  {"evaluation": {"score_interval": n}}))
            for n in (1, 4, 16)}
    base = hillinfer_baselines()["h2o_offload"]
    runs["h2o_offload"] = merge(base, {"workload": wl, "hardware": merge(base["hardware"], {"devices": {"dram": {"capacity_GB": 16}}})})
    return [{"group": "HillInfer", "case": "OPT-6.7B, AI PC, scoring interval", "claim_speedup": 8.56, "runs": runs,
             "interval_row": True}]


def hifc_rows(fast):
    # The serving preset (whole sequences swapped when preempted); --fast serves its first 24 requests.
    sv = {"limit": 24} if fast else {}
    return [{"group": "HiFC", "case": "flash swap (pSLC, GPUDirect) vs DRAM swap, A100, Llama-2-7B, serving",
             "runs": {"hifc_paper": system("hifc_paper", serving=sv),
                      "dram_swap": system("hifc_paper", serving=merge(sv, {"swap_tier": "dram"}),
                                          hardware={"preset": "configs/hardware/a100_80gb_dram_nvme.json",
                                                    "tiers": ["gpu", "dram"]})}}]


def matkv_rows(fast):
    steps = 16 if fast else 128
    rows = []
    for batch in (1, 8):
        wl = {"batch": batch, "decode_steps": steps, "overlap_next_load": False}
        rows.append({"group": "MatKV", "case": f"load vs recompute prefill, H100 + RAID-0, batch {batch}",
                     "runs": {"matkv_load": system("matkv", workload=merge(wl, {"prefill": "load"})),
                              "recompute": system("matkv", workload=merge(wl, {"prefill": "compute"}))}})
    return rows


def aios_rows(fast):
    steps = 8 if fast else 32
    return [{"group": "AIOS", "case": "TPOT growth from 4K to 32K context (seed: +15%)",
             "runs": {f"ctx{c // 1024}k": system("aios", workload={"context_tokens": c, "decode_steps": steps,
                                                                   "warmup_steps": 2})
                      for c in (4096, 32768)}}]


CAUSES = {
    "HillInfer": (
        "Read from the runs' timelines. (1) HKM places the older 80% of each prompt on the SmartSSD, and APP, "
        "taken literally (every key of every layer scored at every step, INT8), has the FPGA read that share of "
        "the keys off its NAND for every layer of every step: at the measured SSD-to-FPGA rate for block-sized "
        "requests (1.7 GB/s) this read bounds the step (smartssd.read 85% busy, 1.9 s per step at 36K), while the "
        "baselines load their 20% from DRAM or the GPU and are bound by GPU compute (75 ms per step). "
        "(2) On this testbed the baselines' KV fits in the GPU plus DRAM (19 GB at 36K, batch 1, also with a 16 GB "
        "AI-PC DRAM), so they never touch the SSD; HillInfer's advantage needs a regime where the baselines must "
        "read the SSD over its Gen3 x4 link: at batch 25 they do (bound by PCIe into the GPU), and HillInfer's "
        "ratio rises to 0.49x over H2O-style offload and 2.7x over dense offload, still scoring-bound. "
        "Its prefill at batch 25 takes 2.3x the baselines': HKM writes the older 80% of every layer's prompt KV "
        "straight to the SmartSSD, whose NAND takes writes more slowly than the GPU computes them, and the GPU has no "
        "memory left to hold more than a few sequences' layers of output that has not been written yet, so prefill "
        "waits for those writes (prefill_write_wait_s); the baselines keep their prompt on the GPU and demote it. "
        "(3) How often HillInfer scores is not stated: scoring every 16th step gives 0.92x at 36K batch 1. The "
        "mechanisms the paper names do come out: a GPU hit rate of 0.97 (published >98%) and 99% less KV moved "
        "into the GPU than dense offload (published 83% less PCIe traffic). LLaMA-13B's FP16 weights (26 GB) exceed "
        "the 4090's 24 GB: with INT8 weights (13 GB on the GPU) HillInfer is bound by the SmartSSD read as with the "
        "smaller models (0.05x H2O-style offload); with FP16 weights, 30% streamed from DRAM every layer "
        "(policies.weights), the 7.8 GB of weights per step share PCIe with the KV fetches and slow the baselines 3x, "
        "while HillInfer's step hardly moves (0.14x), and the 4.4 GB the weights leave on the GPU keep none of "
        "HKM's hot pool there (GPU hit 0). The published 6.8-8.6x is therefore not reproduced; nothing was tuned "
        "towards it."),
    "HiFC": ("Served as vLLM serves (whole sequences swapped out when preempted, back in before they run again), "
             "a sequence's KV crosses the swap path twice per preemption, not every step. Each swap moves a "
             "16K-token sequence (about 8 GB): flash swap reads and writes it at the NVMe's pSLC rates, below the "
             "PCIe Gen4 rate DRAM swap gets, but swaps are a small share of the run, so throughput is close to DRAM "
             "swap's. Served block by block under a dense scan every step instead (the single-batch engine, "
             "configs/sweeps/bases/gpu_ssd_page_swap.json), the same comparison gave about 0.4: the overflow is "
             "re-read every step. Endurance: every swap-out writes the drive."),
    "MatKV": ("Loading is bounded by the RAID-0's read rate and the PCIe 5.0 link, recompute by the H100's "
              "dense FLOP/s: TTFT falls to 0.14-0.18x of recompute. End to end, decode (the same for both) "
              "dominates at batch 1, so the saving is smaller than the published halving. The load path is the "
              "seed's: LZ4-compressed chunks read into a host buffer, decompressed there (12 cores assumed, the "
              "number that keeps pace with the array) and copied to the GPU, the three stages overlapped."),
    "AIOS": ("Decode reads only the blocks the trace touches, and the synthetic trace's touched set grows with "
             "the context (heavy hitters are a fixed fraction of it), so TPOT grows about 2x from 4K to 32K "
             "where the seed claims +15%; the seed's figure is for LLaMA2-70B and names no trace."),
}


def metrics_row(m):
    if "error" in m:
        return {"error": m["error"]}
    if "tpot_s" in m and isinstance(m["tpot_s"], dict):
        # A serving run: throughput over the whole stream, per-request means.
        return {"tokens_per_s": m["throughput_tokens_per_s"], "tpot_s": m["tpot_s"]["mean"],
                "ttft_s": m["ttft_s"]["mean"], "e2e_s": m["e2e_s"]["mean"],
                "pcie_GB": sum(l["bytes"] for n, l in m["links"].items() if n.startswith("pcie")) / 1e9,
                "ssd_written_GB": m.get("ssd_bytes_written", 0) / 1e9,
                "years": next((t.get("years_to_wear_out") for t in m["tiers"].values() if "years_to_wear_out" in t), None),
                "swapped_out": m["swapped_out"], "bound": bound(m)}
    return {"tokens_per_s": m["decode_tokens_per_s"], "tpot_s": m["mean_step_latency_s"],
            "ttft_s": m["ttft_s"], "recall": m.get("attention_recall"),
            "gpu_hit": m["tiers"].get("gpu", {}).get("hit_rate"),
            "pcie_GB": sum(l["bytes"] for n, l in m["links"].items() if n.startswith("pcie")) / 1e9,
            "fetched_GB": m["fetched_bytes"] / 1e9,
            "ssd_written_GB": m.get("ssd_bytes_written", 0) / 1e9,
            "years": next((t.get("years_to_wear_out") for t in m["tiers"].values() if "years_to_wear_out" in t), None),
            "e2e_s": m["ttft_s"] + m["decode_time_s"],
            "bound": bound(m)}


def run_rows(rows, out_dir):
    for i, r in enumerate(rows):
        r["results"] = {}
        for name, cfg in r["runs"].items():
            tag = f"{r['group'].lower()}_{i}_{name}"
            r["results"][name] = metrics_row(run(cfg, out_dir, tag))
    return rows


def table(rows, cols):
    out = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(f(r) for _, f in cols) + " |")
    return "\n".join(out)


def write_doc(rows, path):
    L = ["# Reproductions: each system's own comparison on its own testbed", "",
         "Generated by `python3 bench/reproduce.py` (do not edit by hand). Published figures are the papers' "
         "(or the seeds', where there is no paper) claims; kvtier's are measured by the runs listed. "
         "`bound` is the busiest resource of kvtier's run. Every preset figure keeps its source; nothing here "
         "is tuned to a paper.", ""]
    for group in ("HillInfer", "HiFC", "MatKV", "AIOS"):
        grs = [r for r in rows if r["group"] == group]
        if not grs:
            continue
        L += [f"## {group}", ""]
        flat = []
        for r in grs:
            for name, m in r["results"].items():
                flat.append((r, name, m))
        L.append(table(flat, [
            ("case", lambda x: x[0]["case"]), ("system", lambda x: x[1]),
            ("tokens/s", lambda x: fmt(x[2].get("tokens_per_s")) if "error" not in x[2] else "cannot run: " + x[2]["error"]),
            ("TPOT ms", lambda x: fmt(x[2]["tpot_s"] * 1e3) if "error" not in x[2] else "-"),
            ("TTFT s", lambda x: fmt(x[2].get("ttft_s"))),
            ("end to end s", lambda x: fmt(x[2].get("e2e_s"))),
            ("recall", lambda x: fmt(x[2].get("recall"))),
            ("GPU hit", lambda x: fmt(x[2].get("gpu_hit"))),
            ("PCIe GB", lambda x: fmt(x[2].get("pcie_GB"))),
            ("fetched GB", lambda x: fmt(x[2].get("fetched_GB"))),
            ("SSD written GB", lambda x: fmt(x[2].get("ssd_written_GB"))),
            ("years to wear out", lambda x: fmt(x[2].get("years"))),
            ("bound", lambda x: x[2].get("bound", "-"))]))
        L += ["", "Published against kvtier:", ""]
        for r in grs:
            for line in compare(r):
                L.append("- " + line)
        L += ["", "Cause of the gaps: " + CAUSES[group], ""]
    text = "\n".join(L) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def ratio(a, b):
    return a / b if a and b else None


def compare(r):
    res = r["results"]
    g = r["group"]
    out = []
    if g == "HillInfer" and r.get("interval_row"):
        b = res["h2o_offload"]
        for name, m in res.items():
            if name != "h2o_offload" and "error" not in m and "error" not in b:
                out.append(f"{r['case']}: {name}: speedup over h2o_offload {fmt(ratio(m['tokens_per_s'], b['tokens_per_s']))}x")
        return out
    if g == "HillInfer":
        hi = res.get("hillinfer", {})
        for base in ("h2o_offload", "leoam_like", "flexgen_dense"):
            b = res.get(base, {})
            if "error" in hi or "error" in b:
                out.append(f"{r['case']}: over {base}: cannot compare ({hi.get('error') or b.get('error')})")
                continue
            s = ratio(hi["tokens_per_s"], b["tokens_per_s"])
            claim = r.get("claim_speedup")
            out.append(f"{r['case']}: speedup over {base}: published up to {fmt(claim)}x, kvtier {fmt(s)}x"
                       + (f" (ratio {fmt(s / claim)})" if claim and s else ""))
        if r.get("claim_batch25_tokens_per_s") and "error" not in hi:
            out.append(f"{r['case']}: published 50 tokens/s at batch 25, kvtier {fmt(hi['tokens_per_s'])} "
                       f"(ratio {fmt(hi['tokens_per_s'] / 50)})")
        if "error" not in hi and "error" not in res.get("flexgen_dense", {"error": 1}) and res["flexgen_dense"]["fetched_GB"]:
            red = 1 - hi["fetched_GB"] / res["flexgen_dense"]["fetched_GB"]
            out.append(f"{r['case']}: KV moved into the GPU during decode against dense offload: published 83% less "
                       f"PCIe traffic, kvtier {red:.0%} less; GPU hit rate published >98%, kvtier {fmt(hi['gpu_hit'])}")
    elif g == "HiFC":
        a, b = res["hifc_paper"], res["dram_swap"]
        if "error" not in a and "error" not in b:
            out.append(f"throughput flash/DRAM swap: published about 1 (comparable), kvtier {fmt(ratio(a['tokens_per_s'], b['tokens_per_s']))} "
                       f"({a['swapped_out']} and {b['swapped_out']} sequences swapped out)")
            out.append(f"years to wear out of the flash swap drive: kvtier {fmt(a['years'])} "
                       f"(published: up to 8x the endurance of a plain TLC swap)")
    elif g == "MatKV":
        a, b = res["matkv_load"], res["recompute"]
        if "error" not in a and "error" not in b:
            out.append(f"{r['case']}: TTFT load/recompute kvtier {fmt(ratio(a['ttft_s'], b['ttft_s']))}; "
                       f"end to end kvtier {fmt(ratio(a['e2e_s'], b['e2e_s']))} (published: about 0.5)")
    elif g == "AIOS":
        a, b = res["ctx4k"], res["ctx32k"]
        if "error" not in a and "error" not in b:
            out.append(f"TPOT 32K / 4K: published 1.15, kvtier {fmt(ratio(b['tpot_s'], a['tpot_s']))}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="fewer steps and rows (the ctest label repro)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "reproductions"))
    ap.add_argument("--doc", default=None, help="write the Markdown report here (default docs/reproductions.md unless --fast)")
    ap.add_argument("--json", default=None, help="write the rows' results as JSON here")
    ap.add_argument("--only", default=None, help="run one group: HillInfer, HiFC, MatKV, AIOS or FlexGen")
    a = ap.parse_args()
    if a.only == "FlexGen":  # its own section of the report (bench/reproduce_flexgen.py)
        import reproduce_flexgen
        reproduce_flexgen.main(["--out", os.path.join(a.out, "flexgen")] + (["--doc", a.doc] if a.doc else []))
        return
    rows = []
    for f in (hillinfer_rows, hillinfer_interval_rows, hifc_rows, matkv_rows, aios_rows):
        rows += f(a.fast)
    if a.only:
        rows = [r for r in rows if r["group"] == a.only]
    run_rows(rows, a.out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{k: v for k, v in r.items() if k != "runs"} for r in rows], f, indent=1)
    doc = a.doc or (None if a.fast else os.path.join(ROOT, "docs", "reproductions.md"))
    if doc:
        write_doc(rows, doc)
        print(f"reproduce.py: wrote {doc}")
        if not a.fast and not a.only:
            # FlexGen's T4 table: a section of its own, written by bench/reproduce_flexgen.py.
            import reproduce_flexgen
            reproduce_flexgen.main(["--out", os.path.join(a.out, "flexgen"), "--doc", doc])
    for r in rows:
        for line in compare(r):
            print(line)


if __name__ == "__main__":
    main()
