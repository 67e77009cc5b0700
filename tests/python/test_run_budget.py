"""A run's time budget and what every writer leaves behind.

Events: every engine estimates the GPU kernels a run will take before it
starts, refuses (exit 2, one line naming the settings, nothing written) a run
whose estimate passes --max-events, counts the kernels while it runs and
stops one that passes the limit all the same; result.json's `resources`
says estimated_events, events_counted and event_limit. Writers: a trace
being generated, converted or exported leaves nothing (no partial file, no
*.tmp) when SIGTERM, SIGINT or SIGHUP ends it or the disk fills (the file
size limit stands in for a full disk: a write past it fails with EFBIG).
"""
import json
import resource
import signal
import subprocess
import time

import pytest

from conftest import ROOT, kvtier_binary

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
DEFAULT = ROOT / "configs" / "default.json"

ENGINES = {
    "single-batch": (DEFAULT, [["workload.decode_steps=%d" % n, "workload.context_tokens=1024",
                                "workload.block_tokens=64"] for n in (2, 8, 32)]),
    "serving, paged": (VLLM, [["serving.requests.count=%d" % n, "serving.requests.input_tokens=64",
                               "serving.requests.output_tokens=4", "serving.requests.interval_s=0.01"]
                              for n in (4, 16, 64)]),
    # Its requests run in one batch: the iterations grow with the output tokens.
    "serving, KV in tiers": (VLLM, [["serving.kv=tiered", "serving.preemption=recompute",
                                     "serving.requests.count=4", "serving.requests.input_tokens=64",
                                     "serving.requests.output_tokens=%d" % n, "model.max_context_tokens=0"]
                                    for n in (2, 8, 32)]),
}


def run(args, cwd, timeout=120, **kw):
    return subprocess.run([str(kvtier_binary())] + [str(a) for a in args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=timeout, **kw)


def sets(values):
    return [a for v in values for a in ("--set", v)]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_events_estimate_bounds_what_each_engine_counts(tmp_path, engine):
    cfg, sizes = ENGINES[engine]
    counted = []
    for i, values in enumerate(sizes):
        out = tmp_path / ("r%d" % i)
        r = run(["run", cfg, *sets(values), "--out", out, "-q"], tmp_path)
        assert r.returncode == 0, r.stderr
        res = json.load(open(out / "result.json"))["resources"]
        assert res["event_limit"] == 1e8
        assert 0 < res["events_counted"] <= res["estimated_events"], res
        counted.append(res["events_counted"])
    assert counted[0] < counted[1] < counted[2], counted


@pytest.mark.parametrize("cfg,values,knob", [
    (DEFAULT, ["workload.decode_steps=1000"], "workload.decode_steps, model.layers: the run would process"),
    (VLLM, ["serving.requests.count=1000"], "serving.requests, serving.limit: the run would process at least 504"),
])
def test_a_run_past_max_events_is_refused_up_front(tmp_path, cfg, values, knob):
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = run(["run", cfg, *sets(values), "--max-events", "100", "--out", out, "-q"], tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and knob in r.stderr and "--max-events" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 10
    assert not out.exists()


def test_the_default_event_limit_refuses_the_longest_single_batch_run(tmp_path):
    # 2^24 decode steps of 32 layers: days of simulation, refused at once.
    r = run(["run", DEFAULT, *sets(["workload.decode_steps=16777216", "workload.context_tokens=1024",
                                    "policies.eviction.name=streaming_llm"]),
             "--out", tmp_path / "out", "-q"], tmp_path)
    assert r.returncode == 2 and "above the limit of 1e+08 (the default; --max-events sets it)" in r.stderr, r.stderr


def test_a_run_that_passes_max_events_while_it_runs_stops(tmp_path):
    # Preemption by recomputation computes prompts again, which the estimate
    # does not see: the count stops the run at the limit.
    out = tmp_path / "out"
    base = ["serving.kv=tiered", "serving.preemption=recompute", "serving.requests.count=8",
            "serving.requests.input_tokens=64", "serving.requests.output_tokens=3", "model.max_context_tokens=0"]
    r = run(["run", VLLM, *sets(base), "--out", out, "-q"], tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.load(open(out / "result.json"))["resources"]
    limit = str(res["events_counted"] - 1)
    r = run(["run", VLLM, *sets(base), "--max-events", limit, "--out", tmp_path / "o2", "-q"], tmp_path)
    # Either refused up front (estimate above) or stopped while running: exit 2 and one line either way.
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--max-events" in r.stderr, r.stderr
    assert not (tmp_path / "o2").exists()


def test_max_events_not_a_number(tmp_path):
    r = run(["run", DEFAULT, "--max-events", "lots", "--out", tmp_path / "o", "-q"], tmp_path)
    assert r.returncode == 2 and "--max-events: expected a number of events" in r.stderr, r.stderr


def gen_args(out, steps=16777216):
    return ["trace", "gen", "--config", DEFAULT, "--set", "workload.decode_steps=%d" % steps,
            "--set", "workload.context_tokens=1024", "--out", out]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_trace_generation_ended_by_a_signal_leaves_nothing(tmp_path, sig):
    out = tmp_path / "t.jsonl"
    p = subprocess.Popen([str(kvtier_binary())] + [str(a) for a in gen_args(out)], cwd=str(tmp_path),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(f.stat().st_size > 100000 for f in tmp_path.iterdir()):
        time.sleep(0.05)
    assert p.poll() is None, "the generator ended before the signal"
    p.send_signal(sig)
    p.wait(timeout=20)
    assert sorted(f.name for f in tmp_path.iterdir()) == [], "left behind: %s" % list(tmp_path.iterdir())


def small_file_limit():
    # A disk that fills at 2 MB: writes past it fail (EFBIG) instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))


@pytest.mark.parametrize("what", ["gen", "convert", "export"])
def test_a_full_disk_stops_a_writer_with_nothing_left(tmp_path, what):
    if what == "gen":
        args = gen_args(tmp_path / "t.jsonl", steps=4096)
    elif what == "convert":
        args = ["trace", "convert", ROOT / "traces" / "data" / "stories260K.trace", "--out", tmp_path / "t.jsonl"]
    else:
        g = tmp_path / "g.json"
        g.write_text(json.dumps({"requests": 20000}))
        args = ["trace", "export", "--synthetic", g, "--out", tmp_path / "t.bin"]
    before = sorted(f.name for f in tmp_path.iterdir())
    r = run(args, tmp_path, preexec_fn=small_file_limit)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "write" in r.stderr, r.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == before


def test_export_is_held_to_max_memory(tmp_path):
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"requests": 1000000000}))
    t0 = time.monotonic()
    r = run(["trace", "export", "--synthetic", g, "--max-memory", "1G", "--out", tmp_path / "t.bin"], tmp_path)
    assert r.returncode == 2 and "requests (" in r.stderr and "the run would need about" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "t.bin").exists()
