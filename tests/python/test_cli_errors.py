"""Bad input: exit status 2, exactly one line on stderr starting with
"kvtier: error:" that names the file or config path, and no result.json."""

import json

import pytest

from conftest import DEFAULT_CONFIG, ROOT


def expect_bad_input(kvtier, tmp_path, config, *sets_and_args, must_contain=()):
    out = tmp_path / "out"
    p = kvtier("run", config, "--out", out, *sets_and_args, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("kvtier: error:"), lines[0]
    for s in must_contain:
        assert s in lines[0], (s, lines[0])
    assert not (out / "result.json").exists()
    assert not out.exists() or not any(out.iterdir())
    return lines[0]


def sets(*assignments):
    out = []
    for a in assignments:
        out += ["--set", a]
    return out


def hardware_link_name():
    hw = json.loads((ROOT / "configs" / "hardware" / "rtx4090_dram_nvme.json").read_text())
    return sorted(hw["links"])[0]


def test_malformed_json_names_file_line_col(kvtier, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "name": "bad",\n  "hardware": ,\n  "model": "configs/models/opt-6.7b.json"\n}\n')
    line = expect_bad_input(kvtier, tmp_path, bad, must_contain=[str(bad) + ":3:"])
    # file:line:col
    rest = line.split(str(bad) + ":3:", 1)[1]
    assert rest.split(":", 1)[0].isdigit(), line


def test_unknown_key_suggests_nearest(kvtier, tmp_path):
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets("workload.bach=4"),
                     must_contain=["workload.bach", "batch"])


@pytest.mark.parametrize("value", ["-1", "0"])
def test_bad_link_bandwidth_names_path(kvtier, tmp_path, value):
    path = "hardware.links.%s.bandwidth_GBps" % hardware_link_name()
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets("%s=%s" % (path, value)), must_contain=[path])


def test_negative_pcie_link_bandwidth_names_path(kvtier, tmp_path):
    path = "hardware.links.pcie_gpu.bandwidth_GBps"
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets(path + "=-1"), must_contain=[path])


@pytest.mark.parametrize("value", ["0", "-5"])
def test_bad_capacity_names_path(kvtier, tmp_path, value):
    path = "hardware.devices.dram.capacity_GB"
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets("%s=%s" % (path, value)), must_contain=[path])


def test_tier_smaller_than_a_block(kvtier, tmp_path):
    line = expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets("hardware.devices.dram.capacity_GB=1e-6"),
                            must_contain=["dram"])
    assert "block" in line


def test_unknown_policy_lists_known_ones(kvtier, tmp_path):
    line = expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets("policies.eviction.name=nosuch"),
                            must_contain=["policies.eviction", "nosuch"])
    assert "lru" in line


def test_missing_trace_file_names_path(kvtier, tmp_path):
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG,
                     *sets('workload.trace={"kind":"file","path":"/nonexistent.jsonl"}'),
                     must_contain=["/nonexistent.jsonl"])


def gen_trace(kvtier, tmp_path, steps=2):
    t = tmp_path / "trace.jsonl"
    p = kvtier("trace", "gen", "--config", DEFAULT_CONFIG, "--set", "workload.decode_steps=%d" % steps, "--out", t,
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return t


@pytest.mark.parametrize("bad_line", [
    '{"step": 0, "layer": 3, "blocks": [1,2], "mass": [0.1]}',  # mass shorter than blocks
    'this is not JSON',
])
def test_malformed_trace_names_file_and_line(kvtier, tmp_path, bad_line):
    t = gen_trace(kvtier, tmp_path)
    lines = t.read_text().splitlines()
    lines[4] = bad_line  # line 5 of the file
    t.write_text("\n".join(lines) + "\n")
    trace = json.dumps({"kind": "file", "path": str(t)})
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, *sets("workload.decode_steps=2", "workload.trace=" + trace),
                     must_contain=[str(t) + ":5:"])


def test_valid_trace_file_runs(kvtier, tmp_path):
    # The control for the test above: the uncorrupted file replays fine.
    t = gen_trace(kvtier, tmp_path)
    trace = json.dumps({"kind": "file", "path": str(t)})
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "out", "-q",
               *sets("workload.decode_steps=2", "workload.trace=" + trace), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "result.json").is_file()


def test_missing_config_file(kvtier, tmp_path):
    expect_bad_input(kvtier, tmp_path, tmp_path / "nope.json", must_contain=[str(tmp_path / "nope.json")])


def test_unwritable_timeline_path_is_bad_input(kvtier, tmp_path):
    (tmp_path / "afile").write_text("")
    expect_bad_input(kvtier, tmp_path, DEFAULT_CONFIG, "--timeline", tmp_path / "afile" / "tl.json",
                     *sets("workload.decode_steps=2"), must_contain=[str(tmp_path / "afile")])


def test_out_dir_that_is_a_file_is_bad_input(kvtier, tmp_path):
    (tmp_path / "afile").write_text("")
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "afile", "-q", *sets("workload.decode_steps=2"), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtier: error:") and str(tmp_path / "afile") in lines[0]


@pytest.mark.parametrize("as_object", [False, True])
def test_policy_preset_under_a_top_level_preset_replaces_the_base_policy(kvtier, tmp_path, as_object):
    # Merged into the base's {"name": "lru"}, the preset's own name was overridden.
    (tmp_path / "pol.json").write_text(json.dumps({"name": "h2o", "recent": 3}))
    ev = {"preset": "pol.json"} if as_object else "pol.json"
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"preset": str(DEFAULT_CONFIG), "policies": {"eviction": ev}}))
    p = kvtier("config", cfg, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["policies"]["eviction"]["name"] == "h2o"
    assert json.loads(p.stdout)["policies"]["eviction"]["recent"] == 3


def test_step_csv_failure_leaves_no_result(kvtier, tmp_path):
    # steps.csv cannot be written (a folder of that name): result.json must not appear either.
    out = tmp_path / "out"
    (out / "steps.csv").mkdir(parents=True)
    p = kvtier("run", DEFAULT_CONFIG, "--out", out, "--set", "workload.decode_steps=2", "--set", "sim.step_csv=true",
               "--timeline", tmp_path / "tl" / "t.json", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["steps.csv"]
    assert not (tmp_path / "tl").exists()
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_misspelt_attention_trace_gets_the_nearest_name(kvtier, tmp_path):
    (tmp_path / "captured.trace").write_bytes(b"")
    p = kvtier("trace", "stats", "captured.trac", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "captured.trac: no such attention trace file (did you mean 'captured.trace'?)" in p.stderr, p.stderr
