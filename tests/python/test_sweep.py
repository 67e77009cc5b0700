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
    # stdout: only the summary; stderr: nothing when it is not a terminal.
    assert len(p.stdout.splitlines()) == 1 and "4 run" in p.stdout
    assert p.stderr == ""


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
    (dict(SWEEP, zip={"workload.context_tokens": [1024, 2048], "sim.seed": [1]}), ['zip["workload.context_tokens"]', "has 2 values, expected 1"]),
    (dict(SWEEP, zip={"workload.batch": [1, 2]}), ['zip["workload.batch"]', "also in grid"]),
    (dict(SWEEP, zip=[]), ["zip", "expected"]),
    (dict(SWEEP, zip=[{"workload.context_tokens": 5}]), ['zip[0]["workload.context_tokens"]', "array"]),
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


def read_csv(path):
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_csv_and_manifest_beside_the_json_lines(tiny):
    d, sweep, out, p = tiny
    rows = read_csv(out.with_suffix(".csv"))
    lines = sorted(read_lines(out), key=lambda l: l["index"])
    assert [int(r["index"]) for r in rows] == [0, 1, 2, 3]  # sorted by index whatever the completion order
    header = list(rows[0].keys())
    assert header[:4] == ["index", "key", "policies.prefetch.depth", "workload.batch"]
    assert "decode_tokens_per_s" in header and "tiers.gpu.hit_rate" in header
    for r, l in zip(rows, lines):
        assert r["key"] == l["key"]
        assert int(r["workload.batch"]) == l["overrides"]["workload.batch"]
        assert float(r["decode_tokens_per_s"]) == l["result"]["metrics"]["decode_tokens_per_s"]  # exact round trip
    m = json.loads((out.parent / "tiny.manifest.json").read_text())
    assert m["sweep_file"] == str(sweep) and m["sweep_name"] == "tiny"
    assert m["points_total"] == 4 and m["points_done"] == 4 and m["points_failed"] == 0
    assert m["kvtier_version"] and m["simgrid_version"].startswith("3.") and m["git_commit"]
    assert m["host"] and m["started_utc"].endswith("Z") and m["wall_s"] > 0
    r = lines[0]["result"]
    assert r["provenance"]["git_commit"] == m["git_commit"]
    assert r["provenance"]["simgrid_version"] == m["simgrid_version"]


def test_zip_moves_linked_paths_together(kvtier, tmp_path):
    doc = dict(SWEEP, grid={"workload.batch": [1, 2]},
               zip={"policies.prefetch.depth": [0, 1, 2], "workload.context_tokens": [1024, 2048, 4096]})
    out = tmp_path / "z.jsonl"
    p = kvtier("sweep", write_sweep(tmp_path / "z.json", doc), "--out", out, "-j", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = sorted((l["index"], l["overrides"]["workload.batch"], l["overrides"]["policies.prefetch.depth"],
                  l["overrides"]["workload.context_tokens"]) for l in read_lines(out))
    # grid paths first, the zip axis varying fastest; a zip axis is one dimension.
    assert got == [(0, 1, 0, 1024), (1, 1, 1, 2048), (2, 1, 2, 4096), (3, 2, 0, 1024), (4, 2, 1, 2048),
                   (5, 2, 2, 4096)]
    for l in read_lines(out):
        cfg = l["result"]["config"]
        assert cfg["policies"]["prefetch"]["depth"] == l["overrides"]["policies.prefetch.depth"]
        assert cfg["workload"]["context_tokens"] == l["overrides"]["workload.context_tokens"]


def test_progress_on_a_terminal(kvtier, tmp_path):
    import os
    import pty
    import subprocess
    from conftest import kvtier_binary
    master, slave = pty.openpty()
    sweep = write_sweep(tmp_path / "tiny.json")
    p = subprocess.run([str(kvtier_binary()), "sweep", str(sweep), "--out", str(tmp_path / "t.jsonl"), "-j", "2"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=slave, timeout=120)
    os.close(slave)
    text = b""
    try:
        while True:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            text += chunk
    except OSError:
        pass
    os.close(master)
    assert p.returncode == 0
    text = text.decode()
    assert "4/4 done" in text and "points/s" in text and "elapsed" in text, text
    assert "left" in text, text


def _processes_mentioning(s):
    import os
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if s.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("sig", ["TERM", "KILL"])
def test_killed_sweep_takes_its_runs_with_it(tmp_path, sig):
    import os
    import signal
    import subprocess
    import time
    from conftest import kvtier_binary
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    doc = dict(SWEEP, set={"workload.decode_steps": 4000}, grid={"workload.batch": [1, 2, 3, 4, 5, 6]})
    sweep = write_sweep(tmp_path / "slow.json", doc)
    env = dict(os.environ, TMPDIR=str(scratch))
    p = subprocess.Popen([str(kvtier_binary()), "sweep", str(sweep), "--out", str(tmp_path / "s.jsonl"), "-j", "2"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline and len(_processes_mentioning(str(scratch))) < 2:
        time.sleep(0.05)
    assert _processes_mentioning(str(scratch)), "no point started"
    p.send_signal(getattr(signal, "SIG" + sig))
    p.communicate(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and _processes_mentioning(str(scratch)):
        time.sleep(0.05)
    assert _processes_mentioning(str(scratch)) == [], "a point's run outlived the sweep"
    if sig == "TERM":
        assert p.returncode == 128 + signal.SIGTERM
        assert list(scratch.iterdir()) == [], "scratch folder left behind"
        m = json.loads((tmp_path / "s.manifest.json").read_text())
        assert m["interrupted_by_signal"] == signal.SIGTERM and m["points_done"] < 6


def test_sweep_killed_again_and_again_resumes_to_every_point_once(tmp_path):
    """SIGKILL at random (seeded) moments, then resume: every point exactly
    once, no torn line or file, no run outliving its sweep, no *.tmp left."""
    import os
    import random
    import signal
    import subprocess
    import time
    from conftest import kvtier_binary
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    doc = dict(SWEEP, set={"workload.decode_steps": 200}, grid={"workload.batch": [1, 2, 3, 4], "sim.seed": [1, 2, 3]})
    sweep = write_sweep(tmp_path / "killed.json", doc)
    out = tmp_path / "res" / "killed.jsonl"
    cmd = [str(kvtier_binary()), "sweep", str(sweep), "--out", str(out), "-j", "2", "-q"]
    env = dict(os.environ, TMPDIR=str(scratch))
    rng = random.Random(20261201)
    for _ in range(5):
        p = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.5))  # while points are validated, run or written
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        deadline = time.time() + 10
        while time.time() < deadline and _processes_mentioning(str(scratch)):
            time.sleep(0.05)
        assert _processes_mentioning(str(scratch)) == [], "a point's run outlived its killed sweep"
        if out.exists():
            text = out.read_text()
            whole = text[: text.rfind("\n") + 1]
            for line in whole.splitlines():
                json.loads(line)  # every finished line is whole JSON (a torn last line is cut off on resume)
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = read_lines(out)
    assert sorted(l["index"] for l in lines) == list(range(12)), "every point exactly once"
    assert len({l["key"] for l in lines}) == 12
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"
    assert list(scratch.iterdir()) == [], "the killed sweeps' scratch folders were not cleared"
    csv_rows = (out.parent / "killed.csv").read_text().splitlines()
    assert len(csv_rows) == 13
    m = json.loads((out.parent / "killed.manifest.json").read_text())
    assert m["points_done"] == 12 and m["points_failed"] == 0


def test_a_full_disk_stops_the_sweep_with_exit_2_and_keeps_what_finished(kvtier, tiny, tmp_path):
    """A result line that cannot be written (here: a file-size limit just
    above one line, the way a full disk refuses the next write) ends the
    sweep with one line and exit 2; the points written before it stay, the
    CSV and manifest list them, and a re-run without the limit finishes."""
    import resource
    import signal
    import subprocess
    from conftest import kvtier_binary

    line = max(len(l) for l in (tiny[2]).read_text().splitlines()) + 1
    sweep = write_sweep(tmp_path / "tiny.json")
    out = tmp_path / "res" / "tiny.jsonl"

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(line * 1.5), int(line * 1.5)))

    p = subprocess.run([str(kvtier_binary()), "sweep", str(sweep), "--out", str(out), "--jobs", "1"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert p.returncode == 2, p.stderr
    err = [l for l in p.stderr.splitlines() if "error" in l]
    assert len(err) == 1 and "tiny.jsonl: write failed" in err[0] and "1 finished points kept" in err[0], p.stderr
    assert "internal error" not in p.stderr
    assert len(read_lines(out)) == 1  # the point that failed to write left no partial line
    manifest = json.loads((tmp_path / "res" / "tiny.manifest.json").read_text())
    assert manifest["points_done"] == 1
    csv = (tmp_path / "res" / "tiny.csv").read_text().splitlines()
    assert len(csv) == 2  # header and the kept point
    again = kvtier("sweep", sweep, "--out", out, "--jobs", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert by_key(read_lines(out)) == by_key(read_lines(tiny[2]))
