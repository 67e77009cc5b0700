#!/usr/bin/env python3
"""Physics cannot run backwards: a slower link, medium or processor never
makes a run faster.

For every system preset (and a few generated configs), each rate of the
hardware (a link's or medium's bandwidth, a device's IOPS, a GPU's or CPU's
FLOP/s, memory bandwidth, efficiency or core count) is lowered, and each
latency raised, one at a time; the run must not get faster: tokens/s not
higher, TTFT, TPOT and simulated time not lower. Each run also checks that
every hit served from a tier below the GPU moved its block: the bytes
fetched into the GPU are at least the hits below it times the block size.

    python3 tests/physics/check_monotone.py [--only NAME] [-j N] [-v]

Exits 1 naming each case that ran backwards.
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("KVTIER_BINARY", os.path.join(ROOT, "build", "kvtier"))
# How far a slower part may seem to speed a run up. Not zero: flows that
# share a link or a medium share it max-min, so slowing one flow can hand its
# share to another that is on the critical path, and the makespan shrinks a
# little (a scheduling anomaly, as in Graham's list scheduling). Read from
# the timelines of HillInfer's preset: a slower host link for the SmartSSD
# leaves more of its NAND's read bandwidth to the FPGA's key reads, which
# bound the step (0.1% faster); and with SSD and DRAM writes leaving the
# GPU together in prefill, 10 us more DRAM latency makes the SSD's writes,
# which bound prefill, 1.4% faster: a route's media efficiency is a factor
# on the whole flow in SimGrid, so an SSD write shares the GPU's PCIe link
# as if that link were slow too while a DRAM write overlaps it. Anything
# past this is a defect (a block read as a hit from memory that no longer
# holds it made decode 34% faster at 1/7680 of the DRAM bus's bandwidth).
REL = 0.02

# Each case: a config and the --set overrides that keep its run short.
SHORT = ["workload.decode_steps=6", "workload.warmup_steps=1"]
CASES = {
    "default": ("configs/default.json", SHORT),
    "default, slow DRAM bus": ("configs/default.json", SHORT + ["hardware.links.dram_bus.bandwidth_GBps=2"]),
    "default, small GPU": ("configs/default.json", SHORT + ["hardware.devices.gpu.capacity_GB=16"]),
    "default, tokens unit": ("configs/default.json", SHORT + ["workload.transfer_unit=tokens"]),
    "hillinfer": ("configs/systems/hillinfer.json", SHORT + ["workload.context_tokens=4096"]),
    "default on H200, CXL, NVMe": ("configs/default.json", SHORT + ["hardware=configs/hardware/h200_cxl_nvme.json",
                                                                    "hardware.devices.gpu.capacity_GB=24"]),
    "h2o": ("configs/systems/h2o.json", SHORT),
    "dram_offload": ("configs/systems/dram_offload.json", SHORT),
    "ssd_offload": ("configs/systems/ssd_offload.json", SHORT),
    "flexgen": ("configs/systems/flexgen.json", ["workload.decode_steps=4", "workload.warmup_steps=1"]),
    "matkv": ("configs/systems/matkv.json", SHORT),
    "aios": ("configs/systems/aios.json", SHORT),
    "hifc_seed (serving)": ("configs/systems/hifc_seed.json", []),
    "hillinfer, key copy in FPGA memory": ("configs/systems/hillinfer.json",
                                           SHORT + ["workload.context_tokens=4096", "policies.evaluation.key_copy=fpga_dram"]),
    "near_storage_attention": ("configs/systems/near_storage_attention.json", SHORT + ["workload.context_tokens=4096"]),
    "h2o_ssd_offload": ("configs/systems/h2o_ssd_offload.json", SHORT + ["workload.context_tokens=8192"]),
    "leoam": ("configs/systems/leoam.json", SHORT + ["workload.context_tokens=8192"]),
    "flexgen_ssd": ("configs/systems/flexgen_ssd.json", SHORT + ["workload.context_tokens=8192"]),
    "aios_70b": ("configs/systems/aios_70b.json", SHORT),
    "hifc_paper (serving)": ("configs/systems/hifc_paper.json", []),
    "vllm_swap (serving)": ("configs/systems/vllm_swap.json", []),
    "vllm_swap (serving, KV in tiers, a block of every layer)": (
        "configs/systems/vllm_swap.json",
        ["serving.kv=tiered", "serving.preemption=recompute", "serving.kv_unit=all_layers"]),
}

RATE = re.compile(r"(GBps|TFLOPS|GFLOPS|kIOPS|MTps|MHz|_per_core|efficiency)$")
LATENCY = re.compile(r"latency_us$|_us$")


def run(config, sets):
    with tempfile.TemporaryDirectory() as d:
        args = [BIN, "run", config, "-q", "--out", d] + sum([["--set", s] for s in sets], [])
        p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit %d" % p.returncode
        with open(os.path.join(d, "result.json")) as f:
            return json.load(f), None


def resolved(config, sets):
    args = [BIN, "config", config] + sum([["--set", s] for s in sets], [])
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(p.stdout)


def perturbations(hw):
    """(description, --set) pairs, each making one part of the hardware slower."""
    out = []
    for sect in ("devices", "links"):
        for name, dev in sorted(hw.get(sect, {}).items()):
            if not isinstance(dev, dict):
                continue
            for key, v in sorted(dev.items()):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                    continue
                if key == "duplex_efficiency" and dev.get("duplex") != "split":
                    continue  # only a split-duplex link shares it between directions
                path = "hardware.%s.%s.%s" % (sect, name, key)
                if key in ("cores", "channels", "drives", "lanes"):
                    if v > 1:
                        out.append((path + " halved", "%s=%d" % (path, max(1, int(v) // 2))))
                elif RATE.search(key):
                    out.append((path + " halved", "%s=%r" % (path, v * 0.5)))
                elif LATENCY.search(key):
                    out.append((path + " raised", "%s=%r" % (path, v * 4 + 10)))
            # A PCIe link given by generation and width: the same generation at half the lanes.
            m = re.fullmatch(r"gen(\d)x(\d+)", str(dev.get("pcie", "")))
            if sect == "links" and m and int(m.group(2)) > 1:
                path = "hardware.links.%s.pcie" % name
                out.append((path + " at half width", "%s=gen%sx%d" % (path, m.group(1), int(m.group(2)) // 2)))
    return out


def figures(r):
    m = r["metrics"]
    if "requests" in m or "tpot_s" in m:  # a serving run
        def p(key):
            v = m.get(key)
            return v.get("mean") if isinstance(v, dict) else v
        return {"simulated_time_s": m.get("simulated_time_s"), "ttft_mean_s": p("ttft_s"), "tpot_mean_s": p("tpot_s")}, {}
    return ({"simulated_time_s": m["simulated_time_s"], "ttft_s": m["ttft_s"],
             "mean_step_latency_s": m["mean_step_latency_s"]},
            {"decode_tokens_per_s": m["decode_tokens_per_s"]})


def fetch_check(r):
    """Hits below the GPU must have moved their bytes (no compression, whole blocks)."""
    m, cfg = r["metrics"], r["config"]
    if "tiers" not in m or "block_accesses" not in m:
        return None
    hw = cfg["hardware"]
    if hw["tiers"][0] != hw["gpu"]:
        return None
    pol = cfg.get("policies", {})
    if pol.get("compression", {}).get("name", "none") != "none" or cfg["workload"].get("transfer_unit") == "tokens":
        return None
    if pol.get("weights", {}).get("cpu_attention") or pol.get("weights", {}).get("compress_cache"):
        return None
    below = sum(t["hit_rate"] for n, t in m["tiers"].items() if n != hw["gpu"]) * m["block_accesses"]
    need = below * m["kv_block_bytes"]
    if m["fetched_bytes"] < need * (1 - 1e-6) - 1:
        return "hits below the GPU (%.0f blocks, %.3g bytes) moved only %.3g bytes" % (below, need, m["fetched_bytes"])
    return None


def check_case(name, config, sets, verbose, anomalies):
    failures = []
    base, err = run(config, sets)
    if base is None:
        return ["%s: the base run failed: %s" % (name, err)], 0
    lower, higher = figures(base)
    msg = fetch_check(base)
    if msg:
        failures.append("%s: %s" % (name, msg))
    n = 0
    for what, s in perturbations(base["config"]["hardware"]):
        r, err = run(config, sets + [s])
        n += 1
        if r is None:
            # A slower part the config refuses (e.g. below a rate another figure needs) is not a run.
            if verbose:
                print("  %s: %s: refused (%s)" % (name, what, err))
            continue
        lo, hi = figures(r)
        for k, v in lo.items():
            if v is None or not lower[k]:
                continue
            gain = 1 - v / lower[k]  # how much faster
            if gain > 1e-9:
                anomalies.append((gain, "%s: %s made %s fall %.6g -> %.6g" % (name, what, k, lower[k], v)))
        for k, v in hi.items():
            if v is None or not higher[k]:
                continue
            gain = v / higher[k] - 1
            if gain > 1e-9:
                anomalies.append((gain, "%s: %s made %s rise %.6g -> %.6g" % (name, what, k, higher[k], v)))
        msg = fetch_check(r)
        if msg:
            failures.append("%s, %s: %s" % (name, what, msg))
    return failures, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("-j", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    cases = {k: v for k, v in CASES.items() if not a.only or a.only in k}
    failures, runs = [], 0
    worst = []
    with cf.ThreadPoolExecutor(a.j) as ex:
        anomalies = {k: [] for k in cases}
        futs = {ex.submit(check_case, k, c, s, a.v, anomalies[k]): k for k, (c, s) in cases.items()}
        for f in cf.as_completed(futs):
            k = futs[f]
            fl, n = f.result()
            fl += [m for g, m in anomalies[k] if g > REL]
            runs += n
            print("%-24s %3d slower variants, %s" % (k, n, "ok" if not fl else "%d failed" % len(fl)))
            failures += fl
            worst += anomalies[k]
    for g, m in sorted(worst, reverse=True):
        if g <= REL:
            print("within %.0f%%: %.3f%% faster: %s" % (REL * 100, g * 100, m))
    for f in sorted(failures):
        print("FAIL " + f)
    print("%d cases, %d slower variants, %d failures" % (len(cases), runs, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
