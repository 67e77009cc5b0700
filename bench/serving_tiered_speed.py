#!/usr/bin/env python3
"""Speed of serving with the KV in tiers (serving.kv "tiered") as the run grows.

The vLLM preset's 8K-token requests (configs/systems/vllm_swap.json, recompute
preemption, LRU with promotion on access) served tiered at 15, 60 and 240
requests (960 with --sizes), a slice of the Mooncake conversation trace with
its KV in GPU, DRAM and SSD in 512-token blocks (--mooncake N requests), the
same slice with the prefix cache on (--mooncake-cache N: half of DRAM and SSD
keep prompt blocks), slices in the preset's own 16-token blocks (--mooncake-own
N1,N2,...: prompts up to 121K tokens, where a range of the longest request for
each running request would be up to 121 M blocks), and the paged Mooncake hour
(--paged-hour: the preset as shipped), and the whole Mooncake hour tiered
(--tiered-hour: GPU, DRAM and SSD, 512-token blocks, prefix cache as the preset
has it), and the vLLM preset with its KV in the GPU only (--gpu N1,N2,...)
or in DRAM only (--dram N1,N2,...: streamed into the GPU every iteration). --kv-unit layer,all_layers runs every
tiered point with each KV unit (serving.kv_unit: a block per layer, or a block
of every layer as one unit), a row each; --kv-layers all,representative each
point in full and with one representative layer (serving.kv_layers), whose
row says whether it was exact and counts the full run's block accesses. Each run is a whole process, timed on one pinned core: user + system
seconds and peak memory from the kernel's accounting of the finished child
(os.wait4), the block accesses from the run's own result.json
(kv.block_accesses), and the cost per access is their quotient. Where the KV
spills, an access can also move blocks (a promotion into the GPU, the demotion
that makes its room, a write down where the victim has no valid copy below):
"moves per access" is (kv.blocks_promoted + kv.blocks_demoted +
kv.blocks_written_back) / kv.block_accesses, and "ns per operation" divides
the CPU time by the accesses and those moves together, the store's work
whatever the mix. --eviction lru,lfu,s3fifo,... runs every tiered point under
each eviction policy, a row each (in serving a layer in flight pins the
blocks it reads, which a policy's victim must pass over). With
--baseline B (another build of kvtier) every point runs on both binaries in
turn, the ratio is taken pair by pair, and the two results must agree (or the
row says which differ); a point the baseline refuses says so.

  /usr/bin/python3 bench/serving_tiered_speed.py [--sizes 15,60,240] [--mooncake 200] [--mooncake-cache 200]
      [--mooncake-own 50,100,200] [--paged-hour] [--tiered-hour] [--kv-unit layer,all_layers]
      [--gpu 15,60] [--dram 15,60] [--kv-layers all,representative] [--eviction lru,lfu,s3fifo]
      [--baseline OLD/kvtier] [-n 1]

prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from replay_speed import med  # noqa: E402


def timed(cmd, pin):
    """One whole process: (user + sys seconds, peak MiB, None), or (None, None, its error line) if it fails."""
    pre = (lambda: os.sched_setaffinity(0, {int(pin)})) if pin else None
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pre)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None, None, err.strip().splitlines()[-1] if err.strip() else "exit %d" % os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, None


def table_blocks(result):
    """The KV block table's blocks, as the run committed its memory (result.json resources), or None."""
    for part in result.get("resources", {}).get("parts", {}):
        if part.startswith("the KV block table ("):
            return int(part[len("the KV block table ("):].split()[0])
    return None


def tiered_points(a):
    vllm = ["configs/systems/vllm_swap.json", "--set", "serving.kv=tiered", "--set", "serving.preemption=recompute"]
    for n in [int(x) for x in a.sizes.split(",") if x]:
        yield "vllm_swap tiered, %d requests" % n, vllm + ["--set", "serving.requests.count=%d" % n]
    for n in [int(x) for x in a.gpu.split(",") if x]:
        yield ("vllm_swap tiered in the GPU only (15 run at once), %d requests" % n,
               vllm + ["--set", 'hardware.tiers=["gpu"]', "--set", "serving.requests.count=%d" % n])
    for n in [int(x) for x in a.dram.split(",") if x]:
        yield ("vllm_swap tiered in DRAM only (streamed every iteration, one layer ahead), %d requests" % n,
               vllm + ["--set", 'hardware.tiers=["dram"]', "--set", "serving.requests.count=%d" % n,
                       "--set", 'policies.prefetch={"name": "layer_ahead", "depth": 1}'])
    mooncake = ["configs/serving/mooncake.json", "--set", "serving.kv=tiered", "--set", "serving.preemption=recompute",
                "--set", "workload.block_tokens=512"]
    if a.mooncake:
        yield ("Mooncake, first %d requests, GPU+DRAM+SSD, 512-token blocks" % a.mooncake,
               mooncake + ["--set", "serving.prefix_cache.enabled=false", "--set", "serving.limit=%d" % a.mooncake])
    if a.mooncake_cache:
        yield ("Mooncake, first %d requests, GPU+DRAM+SSD, 512-token blocks, prefix cache on" % a.mooncake_cache,
               mooncake + ["--set", "serving.limit=%d" % a.mooncake_cache])
    own = ["configs/serving/mooncake.json", "--set", "serving.kv=tiered", "--set", "serving.preemption=recompute",
           "--set", "serving.prefix_cache.enabled=false"]
    for n in [int(x) for x in a.mooncake_own.split(",") if x]:
        yield "Mooncake, first %d requests, GPU+DRAM+SSD, 16-token blocks" % n, own + ["--set", "serving.limit=%d" % n]
    if a.tiered_hour:
        yield "Mooncake hour, GPU+DRAM+SSD, 512-token blocks", mooncake


def points(a):
    units = [u for u in a.kv_unit.split(",") if u]
    layers = [x for x in a.kv_layers.split(",") if x]
    policies = [x for x in a.eviction.split(",") if x] or [""]
    for name, args, pol in ((n, g, p) for n, g in tiered_points(a) for p in policies):
        if pol:
            name, args = "%s, eviction %s" % (name, pol), args + ["--set", "policies.eviction.name=%s" % pol]
        for u in units:
            for kl in layers:
                n, more = name, list(args)
                if not (len(units) == 1 and u == "layer"):
                    n, more = "%s, kv_unit %s" % (n, u), more + ["--set", "serving.kv_unit=%s" % u]
                if not (len(layers) == 1 and kl == "all"):
                    n, more = "%s, kv_layers %s" % (n, kl), more + ["--set", "serving.kv_layers=%s" % kl]
                yield n, more  # as before the options existed where both are the default alone
    if a.paged_hour:
        yield "Mooncake hour, paged (configs/serving/mooncake.json)", ["configs/serving/mooncake.json"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build", "kvtier"))
    ap.add_argument("--baseline", help="another kvtier binary, timed in turn with the first")
    ap.add_argument("--sizes", default="15,60,240", help="vllm_swap request counts (comma-separated; empty: none)")
    ap.add_argument("--mooncake", type=int, default=0, help="also the first N requests of the Mooncake trace (0: not)")
    ap.add_argument("--mooncake-cache", type=int, default=0,
                    help="also the first N requests of the Mooncake trace with the prefix cache on (0: not)")
    ap.add_argument("--mooncake-own", default="",
                    help="also the first N requests of the Mooncake trace in the preset's 16-token blocks (comma-separated N)")
    ap.add_argument("--paged-hour", action="store_true", help="also the whole Mooncake hour, paged")
    ap.add_argument("--tiered-hour", action="store_true",
                    help="also the whole Mooncake hour tiered (GPU+DRAM+SSD, 512-token blocks)")
    ap.add_argument("--kv-unit", default="layer",
                    help="serving.kv_unit of every tiered point, comma-separated for a row each (layer, all_layers)")
    ap.add_argument("--kv-layers", default="all",
                    help="serving.kv_layers of every tiered point, comma-separated for a row each (all, representative); "
                         "a representative row's block accesses are the full run's (layer 0's times L), and it says "
                         "whether the run was exact")
    ap.add_argument("--eviction", default="",
                    help="eviction policies, comma-separated: every tiered point runs with each (policies.eviction), "
                         "a row each (empty: the configs' own, LRU)")
    ap.add_argument("--gpu", default="",
                    help="also vllm_swap tiered with its KV in the GPU only, N requests (comma-separated N)")
    ap.add_argument("--dram", default="",
                    help="also vllm_swap tiered with its KV in DRAM only, N requests (comma-separated N)")
    ap.add_argument("-n", "--runs", type=int, default=1, help="timed runs of each command")
    ap.add_argument("--pin", default="0", help="the CPU the runs use (empty: no pinning)")
    a = ap.parse_args()
    binaries = [os.path.abspath(a.kvtier)] + ([os.path.abspath(a.baseline)] if a.baseline else [])
    tmp = tempfile.mkdtemp(prefix="kvtier_tiered_speed.")
    rows = []
    for name, args in points(a):
        cpu = [[] for _ in binaries]
        peak = [[] for _ in binaries]
        results = [None for _ in binaries]
        errors = [None for _ in binaries]
        tables = [None for _ in binaries]
        for _ in range(a.runs):
            for i, b in enumerate(binaries):
                out = os.path.join(tmp, "b%d" % i)
                c, m, err = timed([b, "run"] + args + ["--out", out, "-q"], a.pin)
                if err:
                    if i == 0:
                        sys.exit("serving_tiered_speed: %s: %s" % (" ".join(args), err))
                    errors[i] = err
                    continue
                cpu[i].append(c)
                peak[i].append(m)
                r = json.load(open(os.path.join(out, "result.json")))
                results[i] = r["metrics"]
                tables[i] = table_blocks(r)
        kv = results[0].get("kv", {})
        accesses = kv.get("block_accesses", 0)
        moves = kv.get("blocks_promoted", 0) + kv.get("blocks_demoted", 0) + kv.get("blocks_written_back", 0)
        if "representative_layer" in results[0]:
            name += ", exact" if results[0]["representative_layer"]["exact"] else ", NOT exact"
        if len([x for x in a.kv_layers.split(",") if x]) > 1:  # the rows of a pair compare
            name += " (%.6g s simulated)" % results[0].get("simulated_time_s", 0)
        agree = ""
        if a.baseline and results[1] is not None:
            agree = "same results" if results[0] == results[1] else "results differ"
        ratio = med([x / y for x, y in zip(cpu[1], cpu[0])]) if a.baseline and cpu[1] else None
        rows.append((name, accesses, moves, [med(c) if c else None for c in cpu], [med(m) if m else None for m in peak],
                     ratio, errors[1] if a.baseline else None, agree, tables))
    head = "| run | block accesses | moves per access | table blocks | cpu s | ns per access | ns per operation | peak MiB |"
    sep = "|---|---|---|---|---|---|---|---|"
    if a.baseline:
        head += " baseline table blocks | baseline cpu s | baseline ns per access | baseline peak MiB | baseline / this (cpu) | results |"
        sep += "---|---|---|---|---|---|"
    print(head)
    print(sep)
    per = lambda c, n: "%.0f" % (1e9 * c / n) if n else "-"
    for name, acc, mv, c, m, r, err, agree, tb in rows:
        line = "| %s | %d | %s | %s | %.2f | %s | %s | %.0f |" % (
            name, acc, "%.2f" % (mv / acc) if acc else "-", tb[0] or "-", c[0], per(c[0], acc), per(c[0], acc + mv), m[0])
        if a.baseline:
            if err:
                line += " refused: %s | | | | | |" % err.replace("|", "/")
            else:
                line += " %s | %.2f | %s | %.0f | %.2f | %s |" % (tb[1] or "-", c[1], per(c[1], acc), m[1], r, agree)
        print(line)


if __name__ == "__main__":
    main()
