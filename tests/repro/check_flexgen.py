#!/usr/bin/env python3
"""FlexGen's T4 batch-size table (bench/reproduce_flexgen.py), both
calibrations: every cell runs; the FlexGen cells that kvtier reproduces stay
within +-25% of the published throughput; the published order of the systems
holds in every column. The cells that miss are
printed with their ratio (docs/reproductions.md says what bounds them); they
are not asserted either way.

Run by ctest (label `repro`): python3 tests/repro/check_flexgen.py
"""

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import reproduce_flexgen as rf  # noqa: E402

# (calibration, system, model) cells of the FlexGen rows within +-25% in the
# full run of docs/reproductions.md.
REPRODUCED = {
    ("fitted", "flexgen", "opt-6.7b"),
    ("fitted", "flexgen", "opt-30b"),
    ("fitted", "flexgen_compressed", "opt-6.7b"),
    ("fitted", "flexgen_compressed", "opt-30b"),
    ("datasheet", "flexgen", "opt-175b"),
}
# FlexGen cells held to FlexGen's own cost model (bench/flexgen_cost_model.py);
# at OPT-6.7B the cost model counts GEMM FLOPs only, where the layer reads its weights.
COST_MODEL_CELLS = ("opt-30b", "opt-175b")
# The calibrations whose column orderings kvtier reproduces.
ORDERED = ("fitted", "datasheet")
STEPS = 8  # of FlexGen's 31 decode steps, scaled to 31: within 1% of the full runs' figures


def main():
    with tempfile.TemporaryDirectory() as tmp:
        res = rf.main(["--steps", str(STEPS), "--out", tmp, "--no-bounds"])
    failures = []

    def check(cond, what):
        print(("ok      " if cond else "FAILED  ") + what)
        if not cond:
            failures.append(what)

    for (cal, system, model), r in res.items():
        check("error" not in r, f"{cal} {system} {model} runs ({r.get('error', '')})")
        if "error" in r:
            continue
        pub = rf.PUBLISHED[system][model]
        ratio = r["tokens_per_s"] / pub
        if (cal, system, model) in REPRODUCED:
            check(abs(ratio - 1) <= rf.TOLERANCE, f"{cal} {system} {model}: kvtier/published {ratio:.3f} within +-25%")
        else:
            print(f"        {cal} {system} {model}: kvtier/published {ratio:.3f} ({r['bound']})")
    # FlexGen's own cost model, same fitted constants and policy: where both
    # model the same bound (CPU attention at 30B, the disk read at 175B),
    # kvtier's fitted cell agrees with it to 25%.
    for model in COST_MODEL_CELLS:
        r = res[("fitted", "flexgen", model)]
        if "error" in r:
            continue
        tps, _ = rf.cost_model("flexgen", model)
        ratio = r["tokens_per_s"] / tps
        check(abs(ratio - 1) <= rf.TOLERANCE, f"fitted flexgen {model}: kvtier / FlexGen's cost model {ratio:.3f} within +-25%")
    for cal in ("fitted", "datasheet"):
        bad = rf.ordering_violations(res, cal)
        if cal in ORDERED:
            check(not bad, f"{cal}: the published order of the systems holds in every column {bad}")
        else:
            print(f"        {cal}: order of the systems: {'preserved' if not bad else '; '.join(bad)}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
