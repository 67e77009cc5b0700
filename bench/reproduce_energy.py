"""Energy and cost in the reproductions (bench/reproduce.py): the figures
each run's result.json reports (docs/results.md, "Energy and cost") set
beside the seeds' energy, TCO and endurance claims. Nothing here computes
joules or dollars of its own; it reads kvtier's and takes ratios.

MatKV's source article (seed 001) claims 40-45% less system energy (its
IPMI table: 566 against 289 kJ per 1,000 requests, 1,038 against 947 W on
average) and a cost per hour $3.2 below GPU-only under sustained load, on
AWS p4d.24xlarge pricing. HiFC argues for flash as swap space by endurance
(the seed: a 2 TB drive lasts 5+ years under sustained load; the paper: up
to 8x write endurance through pSLC) and cost (the paper: 4.5x lower
memory-expansion cost over 3 years).
"""

import copy

# AWS EC2 on-demand price of p4d.24xlarge (8 x A100 40 GB), us-east-1: the
# price the seed's TCO claim is stated on. The whole instance is charged on
# the GPU; the host's other devices come with it (bundled).
P4D_USD_PER_HOUR = 32.7726
SEED_MATKV = {"kJ_per_1000": (566, 289), "mean_W": (1038, 947), "usd_per_hour_below": 3.2}


def fields(m, cfg):
    """The energy and cost figures of one run's metrics, for bench/reproduce.py's rows."""
    e, c = m.get("energy"), m.get("cost")
    if not isinstance(e, dict) or not isinstance(c, dict):
        return {}
    batch = cfg.get("workload", {}).get("batch", 1)
    devs = cfg["hardware"]["devices"]

    def swap_GB(d):
        v = devs[d]
        per = v.get("pslc_GB") or v.get("capacity_GB", 0)
        return per * v.get("drives", 1)
    return {"energy_J": e["total_J"], "J_per_token": e["J_per_generated_token"], "mean_W": e["mean_W"],
            "J_per_request": e.get("J_per_request", e["total_J"] / batch),
            "usd_per_hour": c["usd_per_hour"], "usd_per_Mtok": c["usd_per_million_tokens"],
            "flash_usd_per_Mtok": c["flash_replacement_usd_per_million_tokens"],
            "device_usd_per_hour": {d: v["usd_per_hour"] for d, v in c.get("devices", {}).items()},
            "device_GB": {d: swap_GB(d) for d in devs if "capacity_GB" in devs[d]},
            "device_J": {d: v["J"] for d, v in e["devices"].items()}}


def p4d_priced(cfg, preset_devices):
    """`cfg` with the whole machine rented at p4d.24xlarge's price (on its GPU)."""
    out = copy.deepcopy(cfg)
    hw = out.setdefault("hardware", {})
    if isinstance(hw, str):  # a preset by name: overrides go beside it
        hw = out["hardware"] = {"preset": hw}
    devices = hw.setdefault("devices", {})
    for name, dev in preset_devices.items():
        if dev.get("kind") == "gpu":
            price = {"usd": 0, "usd_per_hour": P4D_USD_PER_HOUR, "bundled": False}
        else:
            price = {"usd": 0, "usd_per_hour": 0, "bundled": True}
        devices.setdefault(name, {})["price"] = price
    return out


def _r(a, b):
    return a / b if a and b else None


def matkv_lines(case, res, fmt):
    a, b = res.get("matkv_load", {}), res.get("recompute", {})
    if "error" in a or "error" in b or "J_per_request" not in a:
        return []
    kj = SEED_MATKV["kJ_per_1000"]
    out = [f"{case}: system energy per request load / recompute: seed {kj[1]} / {kj[0]} J "
           f"= {fmt(kj[1] / kj[0])} (its text: 40-45% less), kvtier {fmt(a['J_per_request'])} / "
           f"{fmt(b['J_per_request'])} J = {fmt(_r(a['J_per_request'], b['J_per_request']))}",
           f"{case}: mean power load / recompute: seed {SEED_MATKV['mean_W'][1]} / {SEED_MATKV['mean_W'][0]} W = "
           f"{fmt(SEED_MATKV['mean_W'][1] / SEED_MATKV['mean_W'][0])}, kvtier {fmt(a['mean_W'])} / {fmt(b['mean_W'])} W = "
           f"{fmt(_r(a['mean_W'], b['mean_W']))}"]
    pa, pb = res.get("matkv_load_p4d", {}), res.get("recompute_p4d", {})
    if "usd_per_Mtok" in pa and "usd_per_Mtok" in pb and pb["usd_per_Mtok"]:
        # The same sustained load served for an hour: the recompute machine's
        # hour costs usd_per_hour; the loading one does it in the share
        # usd_per_Mtok(load) / usd_per_Mtok(recompute) of that hour.
        below = pb["usd_per_hour"] * (1 - pa["usd_per_Mtok"] / pb["usd_per_Mtok"])
        out.append(f"{case}: cost per hour of sustained load below GPU-only, whole machine at p4d.24xlarge's "
                   f"${P4D_USD_PER_HOUR}/h: seed ${SEED_MATKV['usd_per_hour_below']}, kvtier ${fmt(below)} "
                   f"(${fmt(pa['usd_per_Mtok'])} against ${fmt(pb['usd_per_Mtok'])} per million tokens)")
    return out


def hifc_lines(res, fmt):
    a, b = res.get("hifc_paper", {}), res.get("dram_swap", {})
    if "error" in a or "error" in b or "device_usd_per_hour" not in a:
        return []
    out = [f"endurance: the flash swap drive wears out in {fmt(a.get('years'))} years at this load (seed: a 2 TB drive "
           "lasts 5+ years under sustained load; the paper's up to 8x is the pSLC endurance factor, an input here); "
           f"its replacement costs ${fmt(a['flash_usd_per_Mtok'])} per million tokens"]
    ssd_h, dram_h = a["device_usd_per_hour"].get("ssd"), b["device_usd_per_hour"].get("dram")
    ssd_gb, dram_gb = a["device_GB"].get("ssd"), b["device_GB"].get("dram")
    if ssd_h and dram_h and ssd_gb and dram_gb:
        per_gb = (dram_h / dram_gb) / (ssd_h / ssd_gb)
        out.append(f"memory-expansion cost over 3 years, per GB of swap space (price amortised over 3 years, "
                   f"electricity, flash worn out before then): DRAM ${fmt(dram_h * 26298)} for {fmt(dram_gb)} GB "
                   f"against flash ${fmt(ssd_h * 26298)} for {fmt(ssd_gb)} GB of pSLC: flash {fmt(per_gb)}x cheaper "
                   "per GB (published 4.5x)")
    out.append(f"energy per generated token flash / DRAM swap: kvtier {fmt(a['J_per_token'])} / {fmt(b['J_per_token'])} J "
               f"= {fmt(_r(a['J_per_token'], b['J_per_token']))} (no published figure)")
    return out


CAUSES = {
    "MatKV": (
        " Energy and cost: the GPU draws most of the machine's power (700 W busy against 70 W idle; the host's CPU, "
        "DRAM and drives together about 200 W), so energy follows the GPU's busy time: loading leaves the GPU idle "
        "while the RAID and the CPU's decompression work, recomputing keeps it at full power. At batch 1 prefill is a "
        "small share of the run (20 decode tokens take 100 ms) and the energy ratio is close to the end-to-end time "
        "ratio; at batch 8 recompute's prefill dominates and loading saves 69%. The seed's own figures disagree with "
        "each other: its IPMI table gives 289 / 566 kJ = 0.51 (49% less), its text 40-45% less, and its "
        "requests per kWh (183 and 358) have the table's ratio but not its values (566 kJ per 1,000 requests is "
        "6,360 requests per kWh); its mean power falls 9% where kvtier's falls 1% "
        "(batch 1) and 14% (batch 8). Its $3.2 per hour below GPU-only is 10% of p4d.24xlarge's $32.77, a smaller "
        "saving than its own latency table implies (end to end 1,250 against 2,450 ms would save 49%, $16 per hour); "
        "kvtier charges the whole instance's price on its one GPU, so the saving is the share of machine time "
        "loading saves. Per GPU of the 8-GPU instance ($4.10 per hour) the savings are an eighth. The seed runs "
        "LLaMA-70B (which does not fit one H100), kvtier the paper's Llama-3.1-8B; the power figures are datasheet "
        "maxima and assumed idles (docs/sources.md), not the seed's IPMI readings."),
    "HiFC": (
        " Endurance and cost: the swap drive writes each preempted sequence once per swap-out, 148 GB over the run, "
        "so at this load it lasts 15.4 years with the pSLC region's 8x endurance (an input, HiFC's 'up to 8x'), "
        "beyond a 3-year amortisation: no replacement is due, and flash's cost is its price share. The "
        "memory-expansion ratio compares prices the presets assume (DRAM at $3 per GB, a 3.84 TB enterprise drive at "
        "$700 with a 1,000 GB pSLC region, docs/sources.md) plus the electricity the runs measure; it lands near "
        "the paper's 4.5x because of those assumed prices, not because a mechanism produced it. Energy per token is "
        "the same for both swaps: the GPU's compute dominates, and swapping is a small share of the run."),
}
