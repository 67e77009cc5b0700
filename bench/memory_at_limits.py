#!/usr/bin/env python3
"""Peak memory and time of replay, trace generation, a request trace file in
serving and validate at their documented maxima (docs/config.md, the CLI's
help), and what kvtier estimated beforehand where it writes it.

Each command runs as a whole process in a scratch folder; its peak resident
memory and exit code come from the kernel's accounting of the finished child
(os.wait4), its time from the wall clock. A command at a maximum is either
refused up front (exit 2, a tenth of a second, the process's base memory) or
runs in the memory it estimated. Generators whose output at their maxima is
petabytes are run for --seconds and stopped: their memory does not grow with
the steps, so the peak so far is the peak.

  /usr/bin/python3 bench/memory_at_limits.py [--kvtier build/kvtier] [--seconds 30]

prints a Markdown table.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.path.join(ROOT, "..", "shared", "traces", "mooncake_conversation_trace.jsonl")
MEASUREMENT = os.path.join(ROOT, "configs", "hardware", "measurements", "host_vm_2026-12-01.json")


def run(cmd, cwd, seconds=None):
    """(exit code, wall seconds, peak MiB); stopped with SIGTERM after `seconds` if given."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if seconds:
        try:
            p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
    _, status, ru = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), time.monotonic() - t0, ru.ru_maxrss / 1024.0


def estimate(path):
    try:
        with open(path) as f:
            return json.load(f)["resources"]["estimated_peak_bytes"] / 2**20
    except (OSError, KeyError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvtier", default=os.path.join(ROOT, "build", "kvtier"))
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the generators at 2^24 steps run")
    a = ap.parse_args()
    k = os.path.abspath(a.kvtier)
    with tempfile.TemporaryDirectory(prefix="kvtier-limits-") as d:
        for name, text in {"g1e9.json": {"requests": 1000000000}, "g1e7.json": {"requests": 10000000},
                           "p.json": {"kind": "patterns"}}.items():
            with open(os.path.join(d, name), "w") as f:
                json.dump(text, f)
        serving = os.path.join(ROOT, "configs", "systems", "vllm_swap.json")
        trace_req = 'serving.requests={"kind": "trace", "path": "%s"}' % os.path.abspath(TRACE)
        rows = [
            ("replay, 10^9 synthetic requests", [k, "replay", "--synthetic", "g1e9.json", "-c", "10%", "-o", "a.json"], None, None),
            ("replay --stream, 10^9 synthetic requests", [k, "replay", "--synthetic", "g1e9.json", "-c", "10%", "--stream", "-o", "a.json"], None, None),
            ("replay --stack-distance, 10^9 synthetic requests", [k, "replay", "--synthetic", "g1e9.json", "-c", "10%", "--stack-distance", "-o", "a.json"], None, None),
            ("replay, 10^7 synthetic requests", [k, "replay", "--synthetic", "g1e7.json", "-c", "10%", "-o", "b.json", "-q"], "b.json", None),
            ("replay --stream, 10^7 synthetic requests", [k, "replay", "--synthetic", "g1e7.json", "-c", "10%", "--stream", "-o", "c.json", "-q"], "c.json", None),
            ("replay, conversation trace --repeat 1000", [k, "replay", TRACE, "-c", "10%", "--repeat", "1000", "-o", "d.json", "-q"], "d.json", None),
            ("replay --stream, conversation trace --repeat 1000", [k, "replay", TRACE, "-c", "10%", "--repeat", "1000", "--stream", "-o", "e.json", "-q"], "e.json", None),
            ("trace synth, every maximum (2^20 lanes, 2^24 tokens of 1, 2^24 steps)", [k, "trace", "synth", "p.json", "--layers", "4096", "--sequences", "256", "--context-tokens", "16777216", "--block-tokens", "1", "--steps", "16777216", "-o", "s.trace"], None, None),
            ("trace synth, 2^20 lanes (4096 x 256), 4096 tokens, 1 step", [k, "trace", "synth", "p.json", "--layers", "4096", "--sequences", "256", "--context-tokens", "4096", "--block-tokens", "16", "--steps", "1", "-o", "s1.trace"], None, None),
            ("trace synth, 32 layers, 2^24 tokens of 16, 1 step", [k, "trace", "synth", "p.json", "--layers", "32", "--context-tokens", "16777216", "--block-tokens", "16", "--steps", "1", "-o", "s2.trace"], None, None),
            ("trace synth, 32 layers, 2^24 steps (stopped)", [k, "trace", "synth", "p.json", "--layers", "32", "--context-tokens", "8192", "--block-tokens", "16", "--steps", "16777216", "-o", "s3.trace"], None, a.seconds),
            ("trace gen, configs/default.json at 2^24 steps (stopped)", [k, "trace", "gen", "--config", os.path.join(ROOT, "configs", "default.json"), "--set", "workload.decode_steps=16777216", "--out", "g.jsonl"], None, a.seconds),
            ("run, serving the conversation trace file (serving.limit 6000)", [k, "run", serving, "--set", trace_req, "--set", "serving.limit=6000", "--out", "sv", "-q"], "sv/result.json", None),
            ("validate --paths-only", [k, "validate", "--paths-only", "--measurement", MEASUREMENT, "--out", "v"], None, None),
        ]
        print("| command | exit | wall s | peak MiB | estimate MiB |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, cmd, est_file, seconds in rows:
            rc, wall, peak = run(cmd, d, seconds)
            est = estimate(os.path.join(d, est_file)) if est_file else None
            print("| %s | %d | %.2f | %.0f | %s |" % (name, rc, wall, peak, "%.0f" % est if est else ""))
            sys.stdout.flush()
            for f in os.listdir(d):
                if f.endswith(".trace") or f.endswith(".jsonl") or f.endswith(".tmp"):
                    os.remove(os.path.join(d, f))


if __name__ == "__main__":
    main()
