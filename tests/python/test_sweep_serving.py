"""Sweeps and `kvtier config` over every kind of config: a sweep whose base
is a serving config validates and runs each point on the serving engine
(docs/sweep.md), and every shipped whole config resolves."""

import json

import pytest

from conftest import ROOT

DATA = ROOT / "tests" / "data"
SWEEP = DATA / "serving_prefix_capacity_sweep.json"
CAPACITY = "hardware.devices.dram.capacity_GB"


def read_lines(path):
    return [json.loads(l) for l in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def capacity_sweep(kvtier, tmp_path_factory):
    """The prefix-cache capacity sweep, run once: its JSON lines sorted by capacity."""
    d = tmp_path_factory.mktemp("serving_sweep")
    out = d / "res.jsonl"
    p = kvtier("sweep", SWEEP, "--out", out, "--jobs", "2", cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "5 run" in p.stdout and "0 failed" in p.stdout, p.stdout
    return sorted(read_lines(out), key=lambda l: l["overrides"][CAPACITY])


def test_serving_sweep_runs_every_point_on_the_serving_engine(capacity_sweep):
    assert [l["overrides"][CAPACITY] for l in capacity_sweep] == [8, 32, 128, 512, 1024]
    for l in capacity_sweep:
        r = l["result"]
        assert "serving" in r["config"], "the point ran without its serving section"
        assert r["config"]["hardware"]["devices"]["dram"]["capacity_GB"] == l["overrides"][CAPACITY]
        m = r["metrics"]
        assert m["requests"] == 1500
        assert m["prompt_tokens"] > 0 and 0 <= m["prefix_hit_rate"] <= 1
        # The serving engine's metrics, not the single-batch engine's.
        assert "ttft_s" in m and "p50" in m["ttft_s"] and "decode_tokens_per_s" in m


def test_prefix_hit_rate_grows_with_the_cache(capacity_sweep):
    rates = [l["result"]["metrics"]["prefix_hit_rate"] for l in capacity_sweep]
    assert all(a <= b for a, b in zip(rates, rates[1:])), rates
    assert len(set(rates)) > 1, rates
    # A bigger cache computes fewer prompt tokens.
    computed = [l["result"]["metrics"]["computed_prompt_tokens"] for l in capacity_sweep]
    assert computed[-1] < computed[0], computed


def test_serving_point_matches_a_plain_run(kvtier, capacity_sweep, tmp_path):
    """A sweep point is exactly `kvtier run BASE --set ...`."""
    line = capacity_sweep[2]
    p = kvtier("run", DATA / "serving_prefix_capacity_base.json", "--set",
               "%s=%s" % (CAPACITY, json.dumps(line["overrides"][CAPACITY])), "--out", tmp_path / "o", "-q",
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "o" / "result.json") as f:
        assert json.load(f)["metrics"] == line["result"]["metrics"]


def test_serving_sweep_is_deterministic(kvtier, capacity_sweep, tmp_path):
    out = tmp_path / "again.jsonl"
    p = kvtier("sweep", SWEEP, "--out", out, "--jobs", "1", "-q", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    again = sorted(read_lines(out), key=lambda l: l["overrides"][CAPACITY])
    assert [l["key"] for l in again] == [l["key"] for l in capacity_sweep]
    assert [l["result"]["metrics"] for l in again] == [l["result"]["metrics"] for l in capacity_sweep]


@pytest.mark.parametrize("path, value", [
    ("serving.preemption", "swap"),
    ("serving.time_scale", 2.0),
    ("serving.prefix_cache.enabled", False),
])
def test_serving_parameters_can_be_swept(kvtier, tmp_path, path, value):
    """Serving settings are sweep axes like any other (validated only: a shard with no point)."""
    doc = {"base": str(DATA / "serving_prefix_capacity_base.json"), "grid": {path: [value]}}
    sweep = tmp_path / "s.json"
    sweep.write_text(json.dumps(doc))
    p = kvtier("sweep", sweep, "--shard", "1/2", "--out", tmp_path / "r.jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 point" in p.stdout and "0 run" in p.stdout, p.stdout


def test_bad_serving_point_is_exit_2_naming_the_point(kvtier, tmp_path):
    """A point the serving engine refuses is one line naming the sweep file and the point; nothing is written."""
    doc = {"base": str(DATA / "serving_prefix_capacity_base.json"), "grid": {"serving.preemption": ["swop"]}}
    sweep = tmp_path / "bad.json"
    sweep.write_text(json.dumps(doc))
    p = kvtier("sweep", sweep, "--out", tmp_path / "r.jsonl", cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtier: error: "), p.stderr
    assert str(sweep) in lines[0] and "point 0" in lines[0] and "serving.preemption" in lines[0], lines[0]
    assert not (tmp_path / "r.jsonl").exists()


# Every shipped whole config (hardware and model presets are fragments, and
# configs/replay/ holds request generators for `kvtier replay`, not run configs).
RUN_CONFIGS = sorted(
    str(p.relative_to(ROOT))
    for pattern in ("configs/default.json", "configs/systems/*.json", "configs/serving/*.json",
                    "configs/flexgen/*.json", "configs/sweeps/bases/*.json", "configs/traces/*.json",
                    "configs/cluster/*.json")
    for p in ROOT.glob(pattern))


def test_every_config_kind_is_listed():
    kinds = {c.split("/")[1] for c in RUN_CONFIGS}
    assert {"default.json", "systems", "serving", "flexgen", "sweeps", "traces", "cluster"} <= kinds, kinds


@pytest.mark.parametrize("config", RUN_CONFIGS)
def test_config_resolves_every_shipped_config(kvtier, tmp_path, config):
    p = kvtier("config", ROOT / config, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    cfg = json.loads(p.stdout)
    # Resolved by the engine that runs it: defaults filled in.
    assert "seed" in cfg["sim"] and "out_dir" in cfg["sim"]
    if "serving" in cfg:
        assert "max_running" in cfg["serving"] and "limit" in cfg["serving"]
    else:
        assert "batch" in cfg["workload"] and "decode_steps" in cfg["workload"]
