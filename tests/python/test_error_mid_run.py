"""Bad input met in the middle of a simulation, while the stream actors have
transfers between tiers in flight: the run ends as bad input (exit 2, one
line on stderr naming the file and line, nothing written), not in an abort
from the actors being torn down."""

import json

from conftest import ROOT

CONFIG = ROOT / "configs" / "traces" / "stories260K.json"
# A GPU and a DRAM tier too small for the KV, so every step moves blocks between the GPU, DRAM and the SSD.
TIERS = ["hardware.devices.gpu.reserved_GB=0", "hardware.devices.gpu.capacity_GB=0.0016",
         "hardware.devices.dram.capacity_GB=0.0004", "workload.decode_steps=110"]
BAD_STEP = 100


def run(kvtier, tmp_path, trace, out):
    args = ["run", CONFIG, "--out", out, "-q", "--set", "workload.trace.path=%s" % trace]
    for s in TIERS:
        args += ["--set", s]
    return kvtier(*args, cwd=tmp_path)


def test_bad_record_mid_run_is_bad_input(kvtier, tmp_path):
    good = tmp_path / "good.jsonl"
    p = kvtier("trace", "convert", ROOT / "traces" / "data" / "stories260K.trace", "-o", good, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = good.read_text().split("\n")
    bad_line = next(i for i, l in enumerate(lines) if l.startswith('{"step":%d,' % BAD_STEP))
    lines[bad_line] = lines[bad_line].replace('"mass":[', '"mass":["x",', 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines))

    # The control: the intact trace runs, and its KV crosses the SSD's and the GPU's links.
    p = run(kvtier, tmp_path, good, tmp_path / "good_out")
    assert p.returncode == 0, p.stderr
    links = json.loads((tmp_path / "good_out" / "result.json").read_text())["metrics"]["links"]
    assert links["ssd.read"]["bytes"] > 0 and links["pcie_gpu:root->gpu"]["bytes"] > 0

    p = run(kvtier, tmp_path, bad, tmp_path / "bad_out")
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert "%s:%d:" % (bad, bad_line + 1) in err[0]
    assert not (tmp_path / "bad_out").exists()
