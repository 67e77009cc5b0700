#!/usr/bin/env python3
"""The fast rows of bench/reproduce.py, and the orderings the papers claim
that kvtier reproduces. Orderings it does not reproduce are printed, with
the reason in docs/reproductions.md; they are not asserted either way.

Run by ctest (label `repro`): python3 tests/repro/check_orderings.py
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "reproduce.py"), "--fast", "--out",
                        os.path.join(tmp, "runs"), "--json", out], check=True, cwd=ROOT)
        with open(out) as f:
            rows = json.load(f)
    failures = []

    def check(cond, what):
        print(("ok      " if cond else "FAILED  ") + what)
        if not cond:
            failures.append(what)

    for r in rows:
        res = r["results"]
        for name, m in res.items():
            check("error" not in m, f"{r['case']}: {name} runs ({m.get('error', '')})")
        if any("error" in m for m in res.values()):
            continue
        if r["group"] == "HillInfer":
            hi, dense, h2o = res["hillinfer"], res["flexgen_ssd"], res["h2o_ssd_offload"]
            conds = {c["condition"]: c for c in r["conditions"]}
            # One machine and one host-memory budget (M_0) for every system of the case.
            one = next(c for n, c in conds.items() if n.startswith("one machine"))
            check(one["holds"] == "yes", f"{r['case']}: every system on one machine with one M_0 ({one['kvtier']})")
            check(conds["weights quantized"]["holds"] == "yes",
                  f"{r['case']}: weights quantized, as the seed's GPU footprint implies ({conds['weights quantized']['kvtier']})")
            # HKM: the hot pool keeps what steps touch on the GPU (>98% hit rate,
            # 83% less PCIe traffic): both outcomes of the mechanism.
            # (a few steps only here: the first ones miss while the pool fills)
            check(hi["gpu_hit"] > 0.8, f"{r['case']}: HillInfer's GPU hit rate {hi['gpu_hit']:.3f} > 0.8")
            check(hi["fetched_GB"] < 0.17 * dense["fetched_GB"],
                  f"{r['case']}: HillInfer moves at least 83% less KV into the GPU than dense offload from the SSD")
            # APP's scoring chooses at least as well as H2O's history.
            check(hi["recall"] >= h2o["recall"] - 1e-9, f"{r['case']}: HillInfer's recall >= H2O-style offload's")
            # Pure SSD offload: the whole KV over the NVMe's Gen3 x4 link every step; the GPU idles
            # (seed: under 30% utilised) and HillInfer, reading a fifth of it, is faster.
            check(dense["decode_gpu_busy"] is not None and dense["decode_gpu_busy"] < 0.3,
                  f"{r['case']}: pure SSD offload leaves the GPU under 30% busy in decode ({dense['decode_gpu_busy']:.1%})")
            check(hi["tokens_per_s"] > dense["tokens_per_s"],
                  f"{r['case']}: HillInfer beats FlexGen-style offload from the SSD "
                  f"({hi['tokens_per_s'] / dense['tokens_per_s']:.2f}x)")
            # The design HillInfer argues against: exact attention on the drive's FPGA, every K and V
            # read off its NAND each step and attended with the full-attention kernel.
            ns = res.get("near_storage_attention")
            if ns:
                check(hi["tokens_per_s"] > ns["tokens_per_s"],
                      f"{r['case']}: HillInfer beats exact attention near storage "
                      f"({hi['tokens_per_s'] / ns['tokens_per_s']:.2f}x)")
            # Keys scored from the FPGA's DDR4 are never slower to score than from its NAND.
            fk = res.get("hillinfer, key copy in FPGA memory")
            if fk:
                check(fk["tokens_per_s"] >= hi["tokens_per_s"] * (1 - 1e-9),
                      f"{r['case']}: the key copy in FPGA memory is no slower than on NAND "
                      f"({fk['tokens_per_s'] / hi['tokens_per_s']:.2f}x)")
            print(f"not reproduced: {r['case']}: HillInfer / H2O-style offload tokens/s = "
                  f"{hi['tokens_per_s'] / h2o['tokens_per_s']:.3f} (published up to {r['claim_speedup']}x); "
                  "see docs/reproductions.md")
            for c in r["conditions"]:
                if c["holds"] == "no":
                    print(f"stated condition does not hold: {r['case']}: {c['condition']}: {c['kvtier']}")
        elif r["group"] == "MatKV":
            a, b = res["matkv_load"], res["recompute"]
            check(a["ttft_s"] < b["ttft_s"], f"{r['case']}: loading the KV beats recomputing the prefill (TTFT)")
            check(a["e2e_s"] < b["e2e_s"], f"{r['case']}: and end to end")
        elif r["group"] == "HiFC":
            a, b = res["hifc_paper"], res["dram_swap"]
            check(a["swapped_out"] > 0 and a["swapped_out"] == b["swapped_out"],
                  "HiFC: both runs preempt and swap the same sequences")
            check(a["ssd_written_GB"] > 0, "HiFC: the flash swap writes its drive")
            r_ = a["tokens_per_s"] / b["tokens_per_s"]
            check(0.8 <= r_ <= 1.0 + 1e-9, f"HiFC: flash swap throughput comparable to DRAM swap ({r_:.2f}x)")
        elif r["group"] == "AIOS":
            check(res["ctx32k"]["tpot_s"] > res["ctx4k"]["tpot_s"], "AIOS: TPOT grows from 4K to 32K context")
    if failures:
        print(f"{len(failures)} ordering(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
