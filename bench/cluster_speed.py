#!/usr/bin/env python3
"""What the cluster engine costs on Mooncake's conversation hour, side by side
with the single-GPU serving run of the same trace.

Each point is one `kvtier run` in its own process; the CPU time (user +
system) and peak resident memory are the child's own (os.wait4), so other
load on the machine does not inflate them. docs/cluster.md quotes the output.

    python3 bench/cluster_speed.py                 # 1 GPU, the three cluster presets, 16 HGX nodes of TP=8
    python3 bench/cluster_speed.py --points serving hgx_node
    python3 bench/cluster_speed.py --points dense_1024   # 128 nodes, 1,024 GPUs, arrivals 8x denser (long)
    python3 bench/cluster_speed.py --points dense_hour_1024   # the same GPUs, a whole hour 8x denser (longer)
    python3 bench/cluster_speed.py --scaling       # the pooled cluster on 4 to 32 nodes and on fewer requests

The 8x denser hour is eight copies of the conversation trace, copy k's
arrivals shifted by k/8 of the trace's mean gap and its blocks renamed (other
users with the same habits; block 0, the prompt every conversation starts
with, stays shared): 96,248 requests over the hour.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (config, --set overrides, what it is)
DISAGG = ROOT / "configs" / "cluster" / "mooncake_disaggregated.json"
POINTS = {
    "serving": (ROOT / "configs" / "serving" / "mooncake.json", [],
                "one H200, LLaMA-3.1-70B FP8, time_scale 10 (the serving preset)"),
    "replica_farm": (ROOT / "configs" / "cluster" / "replica_farm.json", [],
                     "8 x LLaMA-3.1-8B replicas on one HGX node"),
    "hgx_node": (ROOT / "configs" / "cluster" / "hgx_node.json", [],
                 "one HGX node: 2 x TP=4 LLaMA-3.1-70B"),
    "hgx_node_per_rank": (ROOT / "configs" / "cluster" / "hgx_node.json", ["cluster.fold_ranks=false"],
                          "the same, every rank's copy its own SimGrid flow (the same results)"),
    "hgx_pipeline": (ROOT / "configs" / "cluster" / "hgx_pipeline.json", [],
                     "one HGX node: 1 x PP=2 x TP=4 LLaMA-3.1-70B"),
    "disaggregated_2": (DISAGG, [], "2 HGX nodes: 2 prefill + 2 decode TP=4 instances"),
    "layerwise_2": (DISAGG, ['cluster.kv_transfer="layerwise"'],
                    "the same, each prompt's KV streamed layer by layer as its prefill computes it"),
    "pooled_2": (ROOT / "configs" / "cluster" / "mooncake_pool.json", [],
                 "2 HGX nodes: 2 prefill + 2 decode TP=4 instances, one KV pool of both nodes' DRAM (Mooncake Store)"),
    "disaggregated_16": (DISAGG, ["hardware.cluster.nodes=16", 'cluster={"tp": 8, "replicas": 16, "prefill_replicas": 8}',
                                  "serving.time_scale=1"],
                         "16 HGX nodes (128 GPUs): 8 prefill + 8 decode TP=8 instances, the trace's own rate"),
    "disaggregated_16_per_rank": (DISAGG, ["hardware.cluster.nodes=16",
                                           'cluster={"tp": 8, "replicas": 16, "prefill_replicas": 8, "fold_ranks": false}',
                                           "serving.time_scale=1"],
                                  "the same, every rank's copy its own SimGrid flow (the same results)"),
    "pooled_16": (ROOT / "configs" / "cluster" / "mooncake_pool.json",
                  ["hardware.cluster.nodes=16",
                   'cluster={"tp": 8, "replicas": 16, "prefill_replicas": 8, "kv_pool": "pooled"}',
                   "serving.time_scale=1"],
                  "the same 16 nodes with one KV pool of every node's DRAM (Mooncake Store)"),
    "pooled_16_per_rank": (ROOT / "configs" / "cluster" / "mooncake_pool.json",
                           ["hardware.cluster.nodes=16",
                            'cluster={"tp": 8, "replicas": 16, "prefill_replicas": 8, "kv_pool": "pooled", '
                            '"fold_ranks": false}', "serving.time_scale=1"],
                           "the same, every rank's copy its own SimGrid flow (the same results)"),
    "pooled_16_one_adapter": (ROOT / "configs" / "cluster" / "mooncake_pool.json",
                              ["hardware.cluster.nodes=16", "hardware.cluster.fabric.nic=nic0",
                               'cluster={"tp": 8, "replicas": 16, "prefill_replicas": 8, "kv_pool": "pooled"}',
                               "serving.time_scale=1"],
                              "pooled_16 with every cross-node byte through the first switch's adapter (nothing folds)"),
    "dense_1024": (DISAGG, ["hardware.cluster.nodes=128", 'cluster={"tp": 8, "replicas": 128, "prefill_replicas": 64}',
                            "serving.time_scale=0.125"],
                   "128 HGX nodes (1,024 GPUs): 64 prefill + 64 decode TP=8 instances, arrivals 8x denser"),
}
TRACE = ROOT.parent / "shared" / "traces" / "mooncake_conversation_trace.jsonl"


def denser_hour(folder, copies=8):
    """Writes `copies` copies of the conversation trace merged into one hour
    (timestamps in ms, as the trace has them); returns its path."""
    rows = [json.loads(l) for l in TRACE.read_text().splitlines() if l.strip()]
    span = rows[-1]["timestamp"] - rows[0]["timestamp"]
    gap = span / max(len(rows) - 1, 1)
    top = max(max(r["hash_ids"], default=0) for r in rows) + 1
    out = []
    for k in range(copies):
        shift = round(k * gap / copies)
        for r in rows:
            ids = [h if h == 0 else h + k * top for h in r["hash_ids"]]
            out.append({"timestamp": r["timestamp"] + shift, "input_length": r["input_length"],
                        "output_length": r["output_length"], "hash_ids": ids})
    out.sort(key=lambda r: r["timestamp"])  # stable: copies in order within a millisecond
    path = Path(folder) / ("conversation_x%d.jsonl" % copies)
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path


def dense_hour_sets(folder):
    return ["hardware.cluster.nodes=128", 'cluster={"tp": 8, "replicas": 128, "prefill_replicas": 64}',
            "serving.time_scale=1", 'serving.requests={"kind": "trace", "path": "%s"}' % denser_hour(folder)]


POINTS["dense_hour_1024"] = (DISAGG, dense_hour_sets,
                             "128 HGX nodes (1,024 GPUs): 64 prefill + 64 decode TP=8 instances, a whole hour 8x denser")

POOL = ROOT / "configs" / "cluster" / "mooncake_pool.json"


def pooled(nodes, limit=None):
    """The pooled cluster of `nodes` HGX nodes (half prefill, half decode,
    TP=8) at the trace's own rate: the whole hour, or its first `limit`
    requests."""
    sets = ["hardware.cluster.nodes=%d" % nodes,
            'cluster={"tp": 8, "replicas": %d, "prefill_replicas": %d, "kv_pool": "pooled"}' % (nodes, nodes // 2),
            "serving.time_scale=1"]
    if limit:
        sets.append("serving.limit=%d" % limit)
    return sets


# How the cost grows: with the requests (the first 3,000 and 6,000 of the
# hour on 16 nodes, beside pooled_16's whole hour) and with the nodes (the
# whole hour on 4 and 8 nodes, and on 32: the same requests over more nodes).
for n in (4, 8, 32):
    POINTS["pooled_%d" % n] = (POOL, pooled(n), "pooled_16 on %d nodes (%d GPUs)" % (n, 8 * n))
for k in (3000, 6000):
    POINTS["pooled_16_first_%d" % k] = (POOL, pooled(16, k), "pooled_16, the hour's first %d requests" % k)
SCALING = ["pooled_4", "pooled_8", "pooled_16", "pooled_32", "pooled_16_first_3000", "pooled_16_first_6000"]

DEFAULT = ["serving", "replica_farm", "hgx_node", "hgx_pipeline", "disaggregated_2", "pooled_2", "disaggregated_16", "pooled_16"]


def run_point(binary, name, out_root):
    config, sets, _ = POINTS[name]
    if callable(sets):
        sets = sets(out_root)
    args = [str(binary), "run", str(config), "--out", str(out_root / name), "-q"]
    for s in sets:
        args += ["--set", s]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"cluster_speed: {name} failed: {err.strip()}")
    m = json.loads((out_root / name / "result.json").read_text())["metrics"]
    return {
        "point": name,
        "gpus": sum(len(i.get("gpus", [i["gpu"]])) for i in m.get("instances", [{"gpu": "gpu"}])),
        "instances": len(m.get("instances", [None])),
        "requests": m["requests"],
        "iterations": m["iterations"],
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "wall_s": wall,
        "max_rss_MB": ru.ru_maxrss / 1024,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "kvtier"))
    ap.add_argument("--points", nargs="+", default=DEFAULT, choices=sorted(POINTS))
    ap.add_argument("--scaling", action="store_true",
                    help="run the pooled cluster at 4 to 32 nodes and on the first 3,000 and 6,000 requests "
                         "(with pooled_16: how the cost grows with nodes and with requests)")
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args()
    if not Path(a.binary).exists():
        sys.exit(f"cluster_speed: no binary at {a.binary} (build it: cmake --build build --target kvtier)")
    rows = []
    points = list(a.points)
    if a.scaling:
        points = (["serving"] if "serving" in points else []) + SCALING
    with tempfile.TemporaryDirectory() as tmp:
        for name in points:
            rows.append(run_point(a.binary, name, Path(tmp)))
            print(f"  {name}: {rows[-1]['cpu_s']:.1f} s CPU", file=sys.stderr)
    base = next((r["cpu_s"] for r in rows if r["point"] == "serving"), None)
    print("| point | what | GPUs | instances | requests | iterations | CPU, s | x one GPU | CPU ms a request | "
          "wall, s | peak RSS, MB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ratio = f"{r['cpu_s'] / base:.1f}" if base else "-"
        print(f"| {r['point']} | {POINTS[r['point']][2]} | {r['gpus']} | {r['instances']} | {r['requests']:,} | "
              f"{r['iterations']:,} | {r['cpu_s']:.1f} | {ratio} | {1e3 * r['cpu_s'] / max(r['requests'], 1):.2f} | "
              f"{r['wall_s']:.1f} | {r['max_rss_MB']:.0f} |")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
