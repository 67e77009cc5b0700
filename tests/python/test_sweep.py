"""`kvtier sweep` (docs/sweep.md): one JSON line per point keyed by the
resolved configuration, re-runs skip what is done, shards partition the
points, bad sweep files are input errors, and results are deterministic."""

import json
import math

import pytest

from conftest import DEFAULT_CONFIG, ROOT

SWEEP = {
    "name": "tiny",
    "base": str(DEFAULT_CONFIG),
    "set": {"workload.decode_steps": 2},
    "grid": {"policies.prefetch.depth": [0, 1], "workload.batch": [1, 2]},
}


def write_sweep(path, doc=SWEEP):
    path.write_text(json.dumps(doc))
    return path


def read_lines(path):
    text = path.read_text()
    assert text == "" or text.endswith("\n")
    return [json.loads(l) for l in text.splitlines()]


def by_key(lines):
    return {l["key"]: l for l in lines}


@pytest.fixture(scope="module")
def tiny(kvtier, tmp_path_factory):
    """The 2x2 sweep run once with two jobs: (folder, sweep file, output, completed process)."""
    d = tmp_path_factory.mktemp("sweep")
    sweep = write_sweep(d / "tiny.json")
    out = d / "res" / "tiny.jsonl"
    p = kvtier("sweep", sweep, "--out", out, "--jobs", "2", cwd=d)
    assert p.returncode == 0, p.stderr
    return d, sweep, out, p


def test_grid_gives_one_valid_line_per_point(tiny):
    _, _, out, p = tiny
    lines = read_lines(out)
    assert len(lines) == 4
    assert len({l["key"] for l in lines}) == 4
    assert sorted(l["index"] for l in lines) == [0, 1, 2, 3]
    seen = set()
    for l in lines:
        assert isinstance(l["key"], str) and len(l["key"]) == 16
        int(l["key"], 16)
        r = l["result"]
        cfg, m = r["config"], r["metrics"]
        assert r["kvtier_version"] and r["seed"] == 1
        # The point's overrides and the fixed set are in its resolved config.
        assert cfg["workload"]["decode_steps"] == 2
        assert cfg["workload"]["batch"] == l["overrides"]["workload.batch"]
        assert cfg["policies"]["prefetch"]["depth"] == l["overrides"]["policies.prefetch.depth"]
        seen.add((l["overrides"]["policies.prefetch.depth"], l["overrides"]["workload.batch"]))
        for k in ("decode_tokens_per_s", "mean_step_latency_s", "simulated_time_s", "attention_recall"):
            assert isinstance(m[k], (int, float)) and math.isfinite(m[k]) and m[k] >= 0, k
        assert m["decode_tokens_per_s"] > 0
    assert seen == {(0, 1), (0, 2), (1, 1), (1, 2)}
    # stdout: only the summary; stderr: one progress line per point.
    assert len(p.stdout.splitlines()) == 1 and "4 run" in p.stdout
    assert len([l for l in p.stderr.splitlines() if "tokens/s" in l]) == 4


def test_rerun_skips_every_point(kvtier, tiny):
    d, sweep, out, _ = tiny
    before = out.read_bytes()
    p = kvtier("sweep", sweep, "--out", out, cwd=d)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == before
    assert "0 run, 4 already done" in p.stdout
    assert "tokens/s" not in p.stderr


def test_shards_cover_every_point_once(kvtier, tiny, tmp_path):
    _, sweep, out, _ = tiny
    keys = []
    for i in (0, 1):
        o = tmp_path / ("shard%d.jsonl" % i)
        p = kvtier("sweep", sweep, "--shard", "%d/2" % i, "--out", o, "-q", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert p.stdout == "" and p.stderr == ""
        lines = read_lines(o)
        assert all(l["index"] % 2 == i for l in lines)
        keys += [l["key"] for l in lines]
    assert sorted(keys) == sorted(by_key(read_lines(out)))


def test_same_sweep_gives_identical_results(kvtier, tiny, tmp_path):
    _, sweep, out, _ = tiny
    p = kvtier("sweep", sweep, "--out", "again.jsonl", "-q", "-j", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    first, again = by_key(read_lines(out)), by_key(read_lines(tmp_path / "again.jsonl"))
    assert set(first) == set(again)
    for k in first:
        assert first[k] == again[k]


def test_point_matches_a_plain_run(kvtier, tiny, tmp_path):
    _, _, out, _ = tiny
    line = next(l for l in read_lines(out) if l["overrides"] == {"policies.prefetch.depth": 1, "workload.batch": 2})
    p = kvtier("run", DEFAULT_CONFIG, "-q", "--out", tmp_path / "o", "--set", "workload.decode_steps=2",
               "--set", "workload.batch=2", "--set", "policies.prefetch.depth=1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = json.loads((tmp_path / "o" / "result.json").read_text())
    assert r["metrics"] == line["result"]["metrics"]


def test_default_output_and_interrupted_line(kvtier, tmp_path):
    doc = dict(SWEEP, grid={"workload.batch": [1, 2]})
    sweep = write_sweep(tmp_path / "two.json", doc)
    p = kvtier("sweep", sweep, "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out" / "tiny" / "sweep.jsonl"
    lines = out.read_text().splitlines(True)
    assert len(lines) == 2
    # A crash mid-write leaves at most a partial last line: it is dropped and that point runs again.
    out.write_text(lines[0] + lines[1][:100])
    p = kvtier("sweep", sweep, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 run, 1 already done" in p.stdout
    assert sorted(out.read_text().splitlines(True)) == sorted(lines)


@pytest.mark.parametrize("doc,must_contain", [
    (dict(SWEEP, grids={}), ["grids", "grid"]),
    (dict(SWEEP, grid={"workload.batch": 4}), ['grid["workload.batch"]', "array"]),
    (dict(SWEEP, grid={}), ["grid", "empty"]),
    (dict(SWEEP, points=[{"workload.context_tokens": 1024}, 7]), ["points[1]", "object"]),
    (dict(SWEEP, points=[{"workload.batch": 1}]), ['points[0]["workload.batch"]', "also in grid"]),
    ({"grid": {"workload.batch": [1]}}, ["base"]),
    (dict(SWEEP, grid={"workload.batch": [1, 0]}), ['{"workload.batch":0}', "workload.batch"]),
    (dict(SWEEP, grid={"workload.bach": [1]}), ["workload.bach", "batch"]),
])
def test_bad_sweep_file_is_exit_2_naming_it(kvtier, tmp_path, doc, must_contain):
    sweep = write_sweep(tmp_path / "bad_sweep.json", doc)
    p = kvtier("sweep", sweep, "--out", tmp_path / "res.jsonl", cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtier: error:"), p.stderr
    assert str(sweep) in lines[0], lines[0]
    for s in must_contain:
        assert s in lines[0], (s, lines[0])
    assert not (tmp_path / "res.jsonl").exists()


def test_shipped_sweeps_validate(kvtier, tmp_path):
    """The sweep files in configs/sweeps expand and validate (run with a shard that holds no point)."""
    for f in sorted((ROOT / "configs" / "sweeps").glob("*.json")):
        p = kvtier("sweep", f, "--shard", "999/1000", "--out", tmp_path / (f.stem + ".jsonl"), cwd=tmp_path)
        assert p.returncode == 0, (f, p.stderr)
        assert "0 run" in p.stdout, p.stdout
