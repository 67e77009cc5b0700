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
    """(estimate, peak RSS) of one run."""
    out = tmp_path / name
    rc, err, peak = peak_of(tmp_path, ["run", *args, "--out", out, "-q"])
    assert rc == 0, err
    return json.load(open(out / "result.json"))["resources"]["estimated_peak_bytes"], peak


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


def peak_of(tmp_path, args):
    """Runs kvtier under /usr/bin/time; returns (exit code, stderr, peak RSS
    in bytes). /usr/bin/time's child is forked from a small process: one
    forked from this Python would carry Python's own high-water mark through
    exec. The run checks no invariants (ctest asks for them in its other
    runs): what is measured is a run as users make it."""
    if not os.access("/usr/bin/time", os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("/usr/bin/time (Debian's time) is missing; .ci/setup installs it")
        pytest.skip("/usr/bin/time (Debian's time) is not installed")
    env = {k: v for k, v in os.environ.items() if k != "KVTIER_CHECK_INVARIANTS"}
    p = subprocess.run(["/usr/bin/time", "-f", "%M", str(kvtier_binary()), *map(str, args)], cwd=tmp_path, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = p.stderr.strip().splitlines()
    peak = float(lines.pop()) * 1024.0 if lines and lines[-1].isdigit() else 0.0
    err = [line for line in lines if not line.startswith("Command exited with non-zero status")]
    return p.returncode, "\n".join(err), peak


def replay_measured(tmp_path, n, *flags):
    gen = tmp_path / ("gen%d.json" % n)
    gen.write_text(json.dumps({"requests": n, "input": {"kind": "constant", "mean": 2048}}))
    out = tmp_path / ("replay%d.json" % n)
    rc, err, rss = peak_of(tmp_path, ["replay", "--synthetic", gen, "-c", "10%", "-c", "40%", "-p", "lru,lfu",
                                      *flags, "--out", out, "-q"])
    assert rc == 0, err
    return json.load(open(out))["resources"]["estimated_peak_bytes"], rss


@pytest.mark.host_timing
@pytest.mark.parametrize("mode", [[], ["--stream"]], ids=["in memory", "stream"])
def test_replay_estimate_holds_the_measured_peak(tmp_path, mode):
    """Replay's estimate (the block stream, the id map, each run's cache
    state: one run at a time in memory, all at once with --stream) against
    the measured peak at three sizes, held as `kvtier run`'s is."""
    pts = [replay_measured(tmp_path, n, *mode) for n in (100000, 400000, 1600000)]
    for est, rss in pts:
        assert rss <= est <= 1.2 * rss + 32 * MiB, (mode, est / MiB, rss / MiB)
    grow_est, grow_rss = pts[-1][0] - pts[0][0], pts[-1][1] - pts[0][1]
    assert grow_rss > 8 * MiB, (mode, grow_rss / MiB)
    assert 0.9 * grow_rss <= grow_est <= 1.5 * grow_rss, (mode, grow_est / MiB, grow_rss / MiB)


@pytest.mark.parametrize("mode", [[], ["--stream"], ["--stack-distance"]])
def test_a_billion_synthetic_requests_in_replay_are_refused_up_front(tmp_path, mode):
    gen = tmp_path / "gen.json"
    gen.write_text(json.dumps({"requests": 1000000000}))
    rc, err, rss = peak_of(tmp_path, ["replay", "--synthetic", gen, "-c", "10%", *mode, "--max-memory", "8G",
                                      "--out", tmp_path / "r.json"])
    assert rc == 2, err
    line = err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("kvtier: error: requests (%s)" % gen), line
    assert "above the limit of 8.59 GB (--max-memory)" in line, line
    assert rss < 256 * MiB, rss / MiB  # refused before reading: nothing grew
    assert not (tmp_path / "r.json").exists()


def test_replay_of_a_trace_file_is_held_to_max_memory(kvtier, tmp_path):
    trace = ROOT / "traces" / "data" / "prefix_example.jsonl"
    p = kvtier("replay", trace, "-c", "50%", "--out", tmp_path / "r.json", "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    parts = json.load(open(tmp_path / "r.json"))["resources"]["parts"]
    assert any(k.startswith("the block stream") for k in parts), parts
    p = kvtier("replay", trace, "-c", "50%", "--max-memory", "40M", "--out", tmp_path / "s.json", cwd=tmp_path)
    assert p.returncode == 2 and "above the limit" in p.stderr and "--max-memory" in p.stderr, p.stderr
    assert not (tmp_path / "s.json").exists()


@pytest.mark.host_timing
def test_pattern_trace_generation_does_not_hold_its_prompts(tmp_path):
    """`trace synth` writes each prompt record as it computes it: four times
    the sequences grow the peak by far less than the prompts it writes
    (layers x sequences x prompt blocks x 4 bytes), which it used to hold."""
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"kind": "patterns", "heavy_fraction": 0.02}))
    rss = {}
    for seqs in (64, 256):
        rc, err, rss[seqs] = peak_of(tmp_path, ["trace", "synth", params, "--layers", "64", "--sequences", seqs,
                                                "--context-tokens", "65536", "--block-tokens", "16", "--steps", "1",
                                                "-o", tmp_path / ("t%d.trace" % seqs)])
        assert rc == 0, err
    prompts_grow = 64 * (256 - 64) * 4096 * 4.0
    assert rss[256] - rss[64] < 0.25 * prompts_grow, ((rss[256] - rss[64]) / MiB, prompts_grow / MiB)


def test_pattern_trace_generation_at_its_maxima_is_refused_up_front(tmp_path):
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"kind": "patterns"}))
    rc, err, rss = peak_of(tmp_path, ["trace", "synth", params, "--layers", "4096", "--sequences", "256",
                                      "--context-tokens", "16777216", "--block-tokens", "1", "--steps", "16777216",
                                      "-o", tmp_path / "t.trace"])
    assert rc == 2, err
    line = err.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("kvtier: error: --layers, --sequences, --context-tokens, --block-tokens: "), line
    assert rss < 256 * MiB
    assert not (tmp_path / "t.trace").exists()


def test_a_request_trace_file_is_estimated_from_its_size(kvtier, tmp_path):
    """Serving from a trace file: the request stream is estimated from the
    file's size over its first lines' bytes per line, before it is read."""
    trace = ROOT / "traces" / "data" / "prefix_example.jsonl"
    big = tmp_path / "big.jsonl"
    line = trace.read_text().splitlines()[0]
    with open(big, "w") as f:  # many identical requests at one arrival time: a large, valid trace
        f.write((line + "\n") * 400000)
    cfg = ROOT / "configs" / "systems" / "vllm_swap.json"
    args = ["run", cfg, "--set", 'serving.requests={"kind": "trace", "path": "%s"}' % big]
    p = kvtier(*args, "--max-memory", "100M", "--out", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("kvtier: error: serving.requests.path (%s" % big), err
    assert "(400000 requests x" in err, err
    assert not (tmp_path / "out").exists()
