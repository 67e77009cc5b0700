#!/usr/bin/env python3
"""Run every system preset (configs/systems/*.json) on one common base and
write the comparison to docs/systems.md (and a figure, docs/systems.png).

    python3 bench/compare_systems.py [--steps N] [--out DIR]

Common base: the HillInfer testbed (configs/hardware/rtx4090_ddr4_smartssd.json:
RTX 4090, DDR4 host, Samsung SmartSSD with its KU15P FPGA, so APP can run),
OPT-6.7B, batch 4, 8K context, 128-token blocks, the same synthetic attention
trace and seed. Each system keeps its own policies (from its preset) and maps
its tier structure onto the base's devices (SYSTEMS below). Everything else in
the preset (its native testbed, model and workload) is replaced.

The binary is $KVTIER_BINARY (default build/kvtier). Per-system configs and
results land under --out (default out/systems). The Markdown file is written
atomically; a system that fails is listed with its error and the exit status
is 1.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plots"))
import kvtier_results as kr  # noqa: E402

BASE_HARDWARE = "configs/hardware/rtx4090_ddr4_smartssd.json"
BASE_MODEL = "configs/models/opt-6.7b.json"
BASE_WORKLOAD = {
    "batch": 4,
    "context_tokens": 8192,
    "decode_steps": 64,
    "past_trained_context": True,  # OPT-6.7B at 8K, past the 2,048 tokens it was trained for, as the presets run it
    "block_tokens": 128,
    "prefill": "compute",
    "trace": {"kind": "synthetic", "heavy_fraction": 0.15},
}
SEED = 1

# name -> (tiers on the base's devices, workload overrides, why this mapping)
SYSTEMS = [
    ("hillinfer", ["gpu", "dram", "smartssd"], {}, "native testbed: hot GPU, warm DRAM, cold SmartSSD"),
    ("matkv", ["gpu", "dram", "smartssd"], {"prefill": "load", "query_tokens": 64},
     "prompt KV precomputed on the lowest tier (the SmartSSD's NAND in place of the RAID-0) and loaded"),
    ("hifc_paper", ["gpu", "smartssd"], {},
     "GPU <-> flash only (peer to peer through the root complex), no DRAM tier, sequences swapped to the SmartSSD; "
     "it has no pSLC mode"),
    ("hifc_seed", ["gpu", "dram", "smartssd"], {}, "GPU -> DRAM -> flash as in the seed"),
    ("aios", ["gpu", "dram", "smartssd"], {}, "HBM -> CXL -> NVMe mapped to GPU -> DRAM -> SmartSSD (no CXL device here)"),
    ("aios_70b", ["gpu", "dram", "smartssd"], {},
     "as aios: its policies are aios's, its LLaMA2-70B and A100 are replaced by the base's"),
    ("flexgen", ["gpu", "dram", "smartssd"], {}, "GPU / CPU DRAM / disk"),
    ("h2o", ["gpu"], {}, "GPU only; evicted KV is dropped"),
    ("vllm_swap", ["gpu", "dram"], {}, "GPU with a CPU DRAM swap pool"),
    ("dram_offload", ["dram"], {}, "all KV in DRAM, nothing cached on the GPU"),
    ("ssd_offload", ["smartssd"], {}, "all KV on the SmartSSD, nothing cached on the GPU"),
    ("near_storage_attention", ["smartssd"], {},
     "all KV on the SmartSSD, attended in the drive by its FPGA; only queries and outputs cross PCIe"),
    # HillInfer's comparators keep their overflow on a standard NVMe; the base has
    # no drive but the SmartSSD, whose NAND stands in for it (its FPGA unused).
    ("h2o_ssd_offload", ["gpu", "dram", "smartssd"], {}, "GPU, host memory, then the SSD (the SmartSSD's NAND as a plain drive)"),
    ("leoam", ["gpu", "dram", "smartssd"], {}, "GPU, host memory, then the SSD (the SmartSSD's NAND as a plain drive)"),
    ("flexgen_ssd", ["gpu", "dram", "smartssd"], {}, "all KV on the SSD (the SmartSSD's NAND as a plain drive), nothing cached on the GPU"),
]

EVAL_WORDS = {"exact": "dense", "trace": "oracle sparse (trace)", "app": "top-k (APP)", "topk": "top-k",
              "quest": "Quest top-k", "near_storage": "dense, in the drive"}


def policy_name(p):
    return p if isinstance(p, str) else p.get("name", "?")


def build_config(name, tiers, overrides, steps):
    with open(os.path.join(ROOT, "configs", "systems", name + ".json")) as f:
        preset = json.load(f)
    wl = copy.deepcopy(BASE_WORKLOAD)
    wl["decode_steps"] = steps
    wl.update(overrides)
    if "serving" in preset:
        # A serving preset (its scheduler, its own KV paging): the same batch
        # as requests, all at time 0, each its prompt plus the decode steps'
        # tokens after the first (which prefill produces).
        sv = copy.deepcopy(preset["serving"])
        sv["requests"] = {"kind": "identical", "count": wl["batch"], "input_tokens": wl["context_tokens"],
                          "output_tokens": steps + 1}
        if sv.get("swap_tier"):
            sv["swap_tier"] = tiers[-1]  # the preset's swap device is the base's lowest tier
        cfg = {
            "name": name,
            "description": "common base (bench/compare_systems.py) with the scheduler of configs/systems/%s.json" % name,
            "hardware": {"preset": os.path.join(ROOT, BASE_HARDWARE), "tiers": tiers},
            "model": {"preset": os.path.join(ROOT, BASE_MODEL), "max_context_tokens": 0},
            "workload": {"block_tokens": preset.get("workload", {}).get("block_tokens", 16)},
            "serving": sv,
            "sim": {"seed": SEED},
        }
        if preset.get("policies"):
            cfg["policies"] = preset["policies"]
        return preset, cfg
    cfg = {
        "name": name,
        "description": "common base (bench/compare_systems.py) with the policies of configs/systems/%s.json" % name,
        "hardware": {"preset": os.path.join(ROOT, BASE_HARDWARE), "tiers": tiers},
        "model": os.path.join(ROOT, BASE_MODEL),
        "workload": wl,
        "policies": preset["policies"],
        "sim": {"seed": SEED},
    }
    return preset, cfg


def run_one(binary, cfg, workdir):
    cfg_path = os.path.join(workdir, "configs", cfg["name"] + ".json")
    os.makedirs(os.path.dirname(cfg_path), exist_ok=True)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    out = os.path.join(workdir, cfg["name"])
    t0 = time.time()
    p = subprocess.run([binary, "run", cfg_path, "--out", out], capture_output=True, text=True, cwd=ROOT)
    wall = time.time() - t0
    if p.returncode != 0:
        return None, "exit %d: %s" % (p.returncode, (p.stderr or p.stdout).strip().splitlines()[-1:] or ""), wall
    with open(os.path.join(out, "result.json")) as f:
        return json.load(f), None, wall


def fmt(v, spec):
    return "n/a" if v is None or v != v else spec % v


def gb(b):
    return "n/a" if b is None or b != b else "%.1f" % (b / 1e9)


def dram_link_bytes(r):
    return sum(b for n, b in kr.link_bytes(r).items() if n.startswith("dram"))


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp_", suffix=os.path.basename(path))
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def energy_markdown(rows):
    """The energy and cost table: each run's joules and dollars per generated
    token beside its tokens/s (docs/results.md, "Energy and cost")."""
    L = ["## Energy and cost\n",
         "Joules from each device's power model over what the run did (docs/results.md, \"Energy and cost\"; the "
         "base's power figures and prices, with their sources, in `%s`). Every run covers prefill and decode, so "
         "J per token = all the run's joules / tokens generated; peak W = the busiest window's mean power "
         "(`energy.peak_window_s`). $ per hour = the devices' purchase prices over 3 "
         "years + electricity + flash worn out before then; $/M tokens = that over the run's tokens; flash $/M tokens "
         "= the share of the drive's price the run's writes used up.\n" % BASE_HARDWARE]
    head = ["system", "tokens/s", "J per token", "mean W", "peak W", "GPU J %", "CPU J %", "flash and FPGA J %", "$ per hour",
            "$ per M tokens", "flash $ per M tokens"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|---|" + "|".join(["---:"] * (len(head) - 1)) + "|")
    for name, cfg, r, err, preset, why in rows:
        if r is None or "energy" not in r["metrics"]:
            L.append("| %s | n/a |" % name + " |" * (len(head) - 2))
            continue
        e, c = r["metrics"]["energy"], r["metrics"]["cost"]
        total = e["total_J"] or float("nan")
        kinds = {d: v.get("kind") for d, v in r["config"]["hardware"]["devices"].items()}

        def share(of_kinds):
            return 100 * sum(v["J"] for d, v in e["devices"].items() if kinds.get(d) in of_kinds) / total
        L.append("| " + " | ".join([
            name + (" (serving)" if kr.is_serving(r) else ""),
            fmt(kr.metric(r, "decode_tokens_per_s"), "%.2f"),
            fmt(e["J_per_generated_token"], "%.3g"),
            fmt(e["mean_W"], "%.0f"),
            fmt(e.get("peak_W", float("nan")), "%.0f"),
            fmt(share({"gpu"}), "%.0f"),
            fmt(share({"cpu"}), "%.0f"),
            fmt(share({"nvme", "smartssd", "ku15p"}), "%.0f"),
            fmt(c["usd_per_hour"], "%.3f"),
            fmt(c["usd_per_million_tokens"], "%.3g"),
            fmt(c["flash_replacement_usd_per_million_tokens"], "%.3g"),
        ]) + " |")
    L.append("")
    return L


def markdown(rows, steps, cmdline, figure_rel=None):
    L = []
    L.append("# System presets compared on one testbed\n")
    L.append("Generated by `%s` (kvtier %s); do not edit by hand, re-run the command.\n" %
             (cmdline, rows[0][2]["kvtier_version"] if rows and rows[0][2] else "?"))
    L.append("Each system of `configs/systems/` keeps its own policies; its testbed, model and workload are replaced "
             "by one common base, so the numbers compare policies and tier structures, not the papers' machines. "
             "Each preset also runs alone on its native testbed: `build/kvtier run configs/systems/NAME.json`.\n")
    L.append("## Common setup\n")
    L.append("- hardware: `%s` (RTX 4090 24 GB, PCIe Gen4 x16; Xeon 8352V with 256 GB DDR4-2933 x 8; Samsung "
             "SmartSSD 3.84 TB on PCIe Gen3 x4 with its KU15P FPGA), tiers set per system below" % BASE_HARDWARE)
    L.append("- model: `%s` (13.4 GB of FP16 weights on the GPU, 9.6 GB of GPU memory left for KV; 512 KB of KV "
             "per token)" % BASE_MODEL)
    wl = dict(BASE_WORKLOAD, decode_steps=steps)
    L.append("- workload: batch %d, context %d tokens, %d decode steps, %d-token blocks (2 MB), %s trace "
             "(heavy_fraction 0.15), prefill `compute` (MatKV: `load`), seed %d: %.1f GB of KV, more than the GPU "
             "holds" % (wl["batch"], wl["context_tokens"], wl["decode_steps"], wl["block_tokens"],
                        wl["trace"]["kind"], SEED,
                        wl["batch"] * (wl["context_tokens"] + steps) * 524288 / 1e9))
    L.append("- TPOT = time per decode step (all sequences of the batch); tokens/s = batch x steps / decode time; "
             "attention recall = attention mass used / mass in the trace (1 for dense or oracle attention); "
             "PCIe = bytes over every PCIe link, both directions, summed over links; fetched = KV bytes moved into "
             "the GPU; DRAM = bytes through the DRAM bus; SSD written = bytes written to storage\n")
    L.append("## Results\n")
    head = ["system", "tiers", "attention", "tokens/s", "TPOT ms", "p99 TPOT ms", "TTFT s", "attention recall",
            "GPU hit rate", "PCIe GB", "fetched GB", "DRAM GB", "SSD written GB"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "|".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + "|")
    for name, cfg, r, err, preset, why in rows:
        tiers = " → ".join(cfg["hardware"]["tiers"])
        paged = "serving" in cfg and cfg["serving"].get("kv", "paged") == "paged"
        ev = ("dense (paged, whole sequences)" if paged else
              EVAL_WORDS.get(policy_name(cfg.get("policies", {}).get("evaluation", "exact" if "serving" in cfg else "trace")), "?"))
        if r is None:
            L.append("| %s | %s | %s | failed: %s |" % (name, tiers, ev, str(err).replace("|", "\\|")) +
                     " |" * (len(head) - 4))
            continue
        m = lambda k: kr.metric(r, k)  # noqa: E731
        gpu_hit = r["metrics"]["tiers"].get("gpu", {}).get("hit_rate", float("nan"))
        L.append("| " + " | ".join([
            name + (" (serving)" if kr.is_serving(r) else ""), tiers, ev,
            fmt(m("decode_tokens_per_s"), "%.2f"),
            fmt(kr.time_per_token_s(r) * 1e3, "%.1f"),
            fmt(kr.time_per_token_s(r, "p99") * 1e3, "%.1f"),
            fmt(kr.ttft_s(r), "%.3f"),
            fmt(m("attention_recall"), "%.4f"),
            fmt(gpu_hit, "%.3f"),
            gb(kr.pcie_bytes(r)),
            gb(r["metrics"].get("kv", {}).get("fetched_bytes", float("nan")) if kr.is_serving(r) else m("fetched_bytes")),
            gb(dram_link_bytes(r)),
            gb(m("ssd_bytes_written")),
        ]) + " |")
    L.append("")
    L += energy_markdown(rows)
    if figure_rel:
        L.append("![tokens/s, TPOT, recall and traffic per system](%s)\n" % figure_rel)
    L.append("How to read it:\n")
    L.append("- `attention`: *dense* reads every kept block each step; *oracle sparse (trace)* reads exactly the "
             "blocks the trace used (HiFC-seed and AIOS presume sparse reads but name no selection method), so its "
             "recall is 1 by construction and it moves far less KV than dense systems; *top-k (APP)* picks blocks "
             "from past attention masses and loses the mass it misses.")
    L.append("- *(serving)* rows run the serving engine (docs/serving.md): the batch is that many identical requests "
             "at time 0, the scheduler admits what the GPU's paged pool holds and queues or preempts the rest (vLLM "
             "swaps whole sequences). TPOT is then the mean over requests of their time per output token, p99 TPOT "
             "their 99th percentile, TTFT their mean (queueing included), tokens/s the output tokens after each "
             "request's first over the time from the first token to the end. With the paged pool (vllm_swap, "
             "hifc_paper) attention recall and GPU hit rate are n/a (running sequences keep all their KV on the GPU); "
             "with the KV in tiers (hifc_seed) each request's blocks live where the preset's policies put them and "
             "its own synthetic attention drives them, so the requests attend differently where one batch's "
             "sequences share one trace.")
    L.append("- LRU with promotion on access (matkv after its load) under dense attention reads the whole "
             "KV in the same order every step: once the KV exceeds the GPU, LRU evicts exactly the block needed next "
             "and every step re-reads (and writes back) the overflow and more.")
    L.append("- promotion `none` (flexgen, the plain offloads) keeps what fits on the GPU and streams the rest "
             "through a staging buffer, which is why FlexGen-style offload beats per-block swapping here.")
    L.append("- MatKV's TTFT is the time to read the prompt's KV from the SmartSSD (about 2.4 GB/s internal, Gen3 x4 "
             "to the host) plus the query tokens; on this testbed loading is slower than computing the prefill on "
             "the 4090, unlike on MatKV's H100 + PCIe 5.0 RAID (run configs/systems/matkv.json).\n")
    L.append("## Policies per system\n")
    L.append("| system | tiers on the base (why) | eviction | promotion | placement | prefetch | evaluation | "
             "compression |")
    L.append("|---|---|---|---|---|---|---|---|")
    for name, cfg, r, err, preset, why in rows:
        p = cfg.get("policies", {})
        if "serving" in cfg and cfg["serving"].get("kv", "paged") == "paged":
            sv = cfg["serving"]
            L.append("| %s | %s (%s) | serving: preemption %s, swap space %s GiB, block %d tokens, max_running %s |" % (
                name, " → ".join(cfg["hardware"]["tiers"]), why, sv.get("preemption", "swap"),
                sv.get("swap_space_GiB", 4), cfg["workload"]["block_tokens"], sv.get("max_running", 256)) +
                " |" * 5)
            continue

        def desc(fam):
            v = p.get(fam, "-")
            if isinstance(v, str):
                return v
            extra = ", ".join("%s %s" % (k, json.dumps(x)) for k, x in v.items()
                              if k != "name" and not isinstance(x, (list, dict)))
            return v.get("name", "?") + (" (%s)" % extra if extra else "")
        L.append("| %s | %s (%s) | %s |" % (name, " → ".join(cfg["hardware"]["tiers"]), why, " | ".join(
            desc(f) for f in ["eviction", "promotion", "placement", "prefetch", "evaluation", "compression"])))
    L.append("")
    L.append("## What each preset follows and what it does not\n")
    L.append("From the `note` of each `configs/systems/*.json` (its native testbed). On the common base, every "
             "system additionally runs on the HillInfer testbed with OPT-6.7B at batch 4 x 8K, which is not its "
             "paper's setup.\n")
    for name, cfg, r, err, preset, why in rows:
        L.append("### %s\n" % name)
        L.append("%s  \nSource: %s\n" % (preset.get("description", ""), preset.get("source", "")))
        note = preset.get("note", {})
        if note.get("follows"):
            L.append("Follows:\n")
            L += ["- " + s for s in note["follows"]]
            L.append("")
        if note.get("does_not_follow"):
            L.append("Does not follow:\n")
            L += ["- " + s for s in note["does_not_follow"]]
            L.append("")
    return "\n".join(L).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=BASE_WORKLOAD["decode_steps"], help="decode steps (default 64)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "systems"), help="where configs and results go")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "systems.md"), help="Markdown output")
    ap.add_argument("--figure", default=os.path.join(ROOT, "docs", "systems.png"),
                    help="figure output (plots/compare.py); empty: none")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    b = os.environ.get("KVTIER_BINARY") or "build/kvtier"
    binary = b if os.path.isabs(b) else os.path.join(ROOT, b)
    if not os.access(binary, os.X_OK):
        print("compare_systems.py: kvtier binary not found at %s (build it or set KVTIER_BINARY)" % binary,
              file=sys.stderr)
        return 2
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    rows, failed = [], 0
    for name, tiers, overrides, why in SYSTEMS:
        preset, cfg = build_config(name, tiers, overrides, args.steps)
        r, err, wall = run_one(binary, cfg, out)
        if r is None:
            failed += 1
            print("%-13s FAILED %s" % (name, err), file=sys.stderr)
        else:
            print("%-13s %9.2f tokens/s  TPOT %9.1f ms  recall %.4f  (%.1f s)" % (
                name, kr.metric(r, "decode_tokens_per_s"), kr.time_per_token_s(r) * 1e3,
                kr.metric(r, "attention_recall"), wall))
        rows.append((name, cfg, r, err, preset, why))
    cmdline = "python3 bench/compare_systems.py" + (" --steps %d" % args.steps
                                                    if args.steps != BASE_WORKLOAD["decode_steps"] else "")
    figure_rel = None
    ok = [os.path.join(out, name, "result.json") for name, cfg, r, *_ in rows if r is not None]
    if args.figure and ok:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", "compare.py")] + ok + ["-o", args.figure],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print("compare_systems.py: figure failed: %s" % p.stderr.strip(), file=sys.stderr)
        else:
            figure_rel = os.path.relpath(os.path.abspath(args.figure), os.path.dirname(os.path.abspath(args.doc)))
    write_atomic(args.doc, markdown(rows, args.steps, cmdline, figure_rel))
    print("wrote %s" % args.doc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
