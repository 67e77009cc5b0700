"""A run's memory, estimated before it allocates, against what it takes.

kvtier commits each large part of a run (the KV block table, the request
stream) before allocating it and refuses, with exit 2 and nothing written, a
run whose estimate passes the limit (--max-memory, else the machine's
available memory less a tenth). result.json's `resources` says what was
estimated; here it is held against the peak resident memory the kernel
measured for the finished process (/usr/bin/time), at three sizes per engine.
"""
import json
import os
import subprocess

import pytest

from conftest import ROOT, kvtier_binary

MiB = 1024.0 * 1024.0


def measured(tmp_path, name, *args):
    """(estimate, peak RSS) of one run. The peak comes from /usr/bin/time,
    whose child is forked from a small process: a child forked from this
    Python would carry Python's own high-water mark through exec."""
    if not os.access("/usr/bin/time", os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("/usr/bin/time (Debian's time) is missing; .ci/setup installs it")
        pytest.skip("/usr/bin/time (Debian's time) is not installed")
    out = tmp_path / name
    cmd = ["/usr/bin/time", "-f", "%M", str(kvtier_binary()), "run", *map(str, args), "--out", str(out), "-q"]
    p = subprocess.run(cmd, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert p.returncode == 0, p.stderr
    est = json.load(open(out / "result.json"))["resources"]["estimated_peak_bytes"]
    return est, float(p.stderr.strip().splitlines()[-1]) * 1024.0


ENGINES = {
    "single-batch": (ROOT / "configs" / "default.json",
                     [["workload.batch=%d" % b, "workload.block_tokens=16", "workload.decode_steps=2"] for b in (4, 32, 96)]),
    "serving, KV in tiers": (ROOT / "configs" / "systems" / "vllm_swap.json",
                             [["serving.kv=tiered", "serving.preemption=recompute", "serving.requests.count=%d" % n,
                               "serving.requests.input_tokens=64", "serving.requests.output_tokens=2",
                               "serving.max_running=%d" % n, "model.max_context_tokens=0"] for n in (64, 512, 2048)]),
    "serving, paged": (ROOT / "configs" / "systems" / "vllm_swap.json",
                       [["serving.requests.count=%d" % n, "serving.requests.input_tokens=16",
                         "serving.requests.output_tokens=1", "serving.requests.interval_s=1"] for n in (1000, 100000, 400000)]),
}


@pytest.mark.host_timing
@pytest.mark.parametrize("engine", list(ENGINES))
def test_estimate_holds_the_measured_peak(tmp_path, engine):
    """At each size the estimate is at least the measured peak and at most
    the peak plus a fixed slack (the process base is estimated high) and a
    fifth; between the smallest and largest size the estimate grows by at
    least 0.9 and at most 1.5 times what the process grew (per-sequence state
    counts against the blocks of short sequences: an overestimate)."""
    cfg, sizes = ENGINES[engine]
    pts = []
    for i, sets in enumerate(sizes):
        args = [cfg]
        for s in sets:
            args += ["--set", s]
        pts.append(measured(tmp_path, "r%d" % i, *args))
    for est, rss in pts:
        assert rss <= est <= 1.2 * rss + 32 * MiB, (engine, est / MiB, rss / MiB)
    grow_est, grow_rss = pts[-1][0] - pts[0][0], pts[-1][1] - pts[0][1]
    assert grow_rss > 8 * MiB, (engine, "the sizes should grow the process", grow_rss / MiB)
    assert 0.9 * grow_rss <= grow_est <= 1.5 * grow_rss, (engine, grow_est / MiB, grow_rss / MiB)


@pytest.mark.parametrize("sets, knob", [
    (["workload.batch=256", "--max-memory", "60M"], "workload.batch, workload.context_tokens"),
    (["serving.requests={\"kind\": \"synthetic\", \"requests\": 1000000000}"], "serving.requests.requests"),
])
def test_a_run_past_the_limit_is_refused_up_front(kvtier, tmp_path, sets, knob):
    cfg = ROOT / "configs" / ("default.json" if sets[0].startswith("workload") else "systems/vllm_swap.json")
    args = ["run", cfg, "--out", tmp_path / "out"]
    it = iter(sets)
    for s in it:
        args += [s, next(it)] if s.startswith("--") else ["--set", s]
    p = kvtier(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("kvtier: error: " + knob), line
    assert "above the limit of" in line
    assert not (tmp_path / "out").exists()


def test_max_memory_is_checked(kvtier, tmp_path):
    p = kvtier("run", ROOT / "configs" / "default.json", "--max-memory", "lots", "--out", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 2 and "--max-memory: expected a size" in p.stderr, p.stderr
