"""What a new user meets first on the command line: help, unknown commands,
`kvtier list`, and --out/--timeline problems found before anything runs."""

import json

import pytest

from conftest import DEFAULT_CONFIG, ROOT


def test_kvtier_alone_prints_help(kvtier, tmp_path):
    p = kvtier(cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for cmd in ("run", "sweep", "list", "config", "report"):
        assert cmd in p.stdout


def test_unknown_command_is_named(kvtier, tmp_path):
    p = kvtier("rnu", "configs/default.json", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith("kvtier: error: unknown command 'rnu'") and "run" in p.stderr
    assert len(p.stderr.splitlines()) == 1


def test_list_shows_every_family(kvtier, tmp_path):
    p = kvtier("list", "policies", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for family in ("eviction", "promotion", "placement", "prefetch", "evaluation", "compression"):
        assert "%s policies:" % family in p.stdout, family


def test_config_on_the_command_line_is_found_like_a_preset(kvtier, tmp_path):
    p = kvtier("config", "configs/default.json", cwd=tmp_path)  # tmp_path has no configs/
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["name"] == "default"


def test_set_swaps_a_hardware_preset(kvtier, tmp_path):
    p = kvtier("config", DEFAULT_CONFIG, "--set", "hardware=configs/hardware/a100_80gb_dram_nvme.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    hw = json.loads(p.stdout)["hardware"]
    assert "A100" in hw.get("description", "") or "a100" in json.dumps(hw).lower()


def test_errors_print_numbers_plainly(kvtier, tmp_path):
    p = kvtier("run", DEFAULT_CONFIG, "--out", tmp_path / "o", "--set", "hardware.devices.gpu.capacity_GB=14",
               cwd=tmp_path)
    assert p.returncode == 2
    assert "000000" not in p.stderr, p.stderr


@pytest.mark.parametrize("case", ["out_is_file", "timeline_is_folder", "out_under_file"])
def test_output_problems_found_before_running_and_nothing_left(kvtier, tmp_path, case):
    f = tmp_path / "file"
    f.write_text("x")
    folder = tmp_path / "folder"
    folder.mkdir()
    args = {"out_is_file": ["--out", f, "--timeline", tmp_path / "tl.json"],
            "timeline_is_folder": ["--out", tmp_path / "o", "--timeline", folder],
            "out_under_file": ["--out", f / "sub", "--timeline", tmp_path / "tl.json"]}[case]
    before = sorted(x.name for x in tmp_path.iterdir())
    p = kvtier("run", DEFAULT_CONFIG, *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.splitlines()) == 1 and ("--out" in p.stderr or "--timeline" in p.stderr), p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == before  # no timeline, no *.tmp, no folder
    assert list(folder.iterdir()) == []
