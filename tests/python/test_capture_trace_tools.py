"""`kvtier trace convert | stats | fit | synth | check` end to end on the
committed stories260K trace: round trips, statistics, the fit, bad input
(one line naming the file, exit 2, nothing written) and streaming reads in
bounded memory."""

import json
import os
import subprocess

import pytest

from conftest import ROOT, kvtier_binary

COMMITTED = ROOT / "traces" / "data" / "stories260K.trace"


def test_convert_round_trip_is_byte_identical(kvtier, tmp_path):
    j, b, j2 = tmp_path / "a.jsonl", tmp_path / "b.trace", tmp_path / "c.jsonl"
    for src, dst in [(COMMITTED, j), (j, b), (b, j2)]:
        p = kvtier("trace", "convert", src, "-o", dst, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    assert b.read_bytes() == COMMITTED.read_bytes()
    assert j.read_bytes() == j2.read_bytes()
    header = json.loads(j.read_text().split("\n", 1)[0])
    assert header["version"] == 2 and header["sequences"] == 4 and header["has_prompt"] is True
    q = tmp_path / "q.trace"
    p = kvtier("trace", "convert", COMMITTED, "-o", q, "--mass", "f16", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert q.stat().st_size < 0.6 * COMMITTED.stat().st_size


def test_stats_of_the_committed_trace(kvtier, tmp_path):
    out = tmp_path / "s.json"
    p = kvtier("trace", "stats", COMMITTED, "--json", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "decode.top_20pct" in p.stdout and "layer 4.reuse" in p.stdout
    s = json.loads(out.read_text())
    d = s["decode"]
    assert s["trace"]["records"] == 224 * 5 * 4
    assert 0 < d["top_1pct"] <= d["top_5pct"] <= d["top_20pct"] <= 1
    assert 0 <= d["sink"] <= 1 and 0 <= d["window"] <= 1 and 0 < d["heavy_fraction"] < 1
    assert 0 < d["reuse"] <= 1 and d["mean_span_blocks"] >= 1
    assert len(s["decode_per_layer"]) == 5 and "prompt" in s


def test_fit_then_synth_at_another_shape(kvtier, tmp_path):
    params = tmp_path / "fit.json"
    p = kvtier("trace", "fit", COMMITTED, "-o", params, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "captured" in p.stdout and "fitted" in p.stdout
    f = json.loads(params.read_text())
    assert f["kind"] == "patterns" and len(f["heavy_fraction"]) == 5
    big = tmp_path / "big.trace"
    p = kvtier("trace", "synth", params, "--layers", "12", "--context-tokens", "8192", "--steps", "20",
               "--block-tokens", "64", "--sequences", "3", "-o", big, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = kvtier("trace", "check", big, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "12 layers, 20 steps, 3 sequences" in p.stdout and "720 records" in p.stdout


def _one_line_exit_2(p, *names):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    for n in names:
        assert str(n) in p.stderr, p.stderr


def test_bad_input_names_the_file_exits_2_and_writes_nothing(kvtier, tmp_path):
    data = COMMITTED.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[:len(data) // 2])
    out = tmp_path / "out.jsonl"
    _one_line_exit_2(kvtier("trace", "convert", cut, "-o", out, cwd=tmp_path), cut, "truncated")
    assert not out.exists() and not (tmp_path / "out.jsonl.tmp").exists()
    bad = bytearray(data)
    bad[8] = 7
    ver = tmp_path / "ver.trace"
    ver.write_bytes(bytes(bad))
    _one_line_exit_2(kvtier("trace", "check", ver, cwd=tmp_path), ver, "container version 7")
    # A damaged byte near the end of the first record chunk: its checksum fails.
    j = tmp_path / "j.jsonl"
    assert kvtier("trace", "convert", COMMITTED, "-o", j, cwd=tmp_path).returncode == 0
    lines = j.read_text().splitlines(True)
    lines[30] = lines[30].replace('"blocks":[0,', '"blocks":[900,', 1)
    past = tmp_path / "past.jsonl"
    past.write_text("".join(lines))
    _one_line_exit_2(kvtier("trace", "stats", past, cwd=tmp_path), "%s:31:" % past, "does not exist")
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    _one_line_exit_2(kvtier("trace", "stats", other, cwd=tmp_path), other)
    _one_line_exit_2(kvtier("trace", "fit", tmp_path / "none.trace", "-o", tmp_path / "f.json", cwd=tmp_path),
                     "none.trace")
    assert not (tmp_path / "f.json").exists()


def _peak_rss_kb(args):
    proc = subprocess.Popen([str(kvtier_binary())] + [str(a) for a in args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read()
    return usage.ru_maxrss


@pytest.mark.host_timing
@pytest.mark.parametrize("fmt", ["jsonl", "binary"])
def test_streaming_reads_in_bounded_memory(kvtier, tmp_path, fmt):
    """Ten times the steps: peak memory of reading every record stays the same."""
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"kind": "patterns", "background_mass": 0.05}))  # every block listed
    rss = {}
    for steps in (100, 1000):
        t = tmp_path / ("t%d.%s" % (steps, "jsonl" if fmt == "jsonl" else "trace"))
        p = kvtier("trace", "synth", params, "--layers", "8", "--context-tokens", "16384", "--steps", steps,
                   "--block-tokens", "64", "-o", t, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        p = kvtier("trace", "check", t, cwd=tmp_path)
        entries = int(p.stdout.split(" block entries")[0].rsplit(" ", 1)[1])
        rss[steps] = (_peak_rss_kb(["trace", "check", t]), entries)
    (short, _), (long, entries) = rss[100], rss[1000]
    # Kept in memory, the records would take 8 bytes per entry (index and mass), far past the margin below.
    assert entries * 8 > 12 << 20
    assert long - short < 3 * 1024, rss
