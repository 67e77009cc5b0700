"""`kvtier trace gen` (format v1, docs/formats.md) and `kvtier list`."""

import json

from conftest import DEFAULT_CONFIG, ROOT


def test_trace_gen_round_trip(kvtier, tmp_path):
    steps = 3
    t = tmp_path / "t.jsonl"
    p = kvtier("trace", "gen", "--config", DEFAULT_CONFIG, "--set", "workload.decode_steps=%d" % steps, "--out", t,
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [l for l in t.read_text().splitlines() if l.strip()]
    header = json.loads(lines[0])
    assert header["format"] == "kvtier-attention-trace"
    assert header["version"] == 1
    assert header["steps"] == steps
    model = json.loads((ROOT / "configs" / "models" / "opt-6.7b.json").read_text())
    assert header["layers"] == model["layers"]
    assert header["block_tokens"] == 128 and header["context_tokens"] == 8192
    records = [json.loads(l) for l in lines[1:]]
    assert len(records) == steps * header["layers"]
    for i, r in enumerate(records):
        # step-major, layer-minor
        assert (r["step"], r["layer"]) == divmod(i, header["layers"])
        assert len(r["blocks"]) == len(r["mass"]) > 0
        assert len(set(r["blocks"])) == len(r["blocks"])
        limit = (header["context_tokens"] + r["step"]) // header["block_tokens"]
        assert all(0 <= b <= limit for b in r["blocks"])
        assert all(m >= 0 for m in r["mass"])
    assert str(len(records)) in p.stdout


def test_replaying_generated_trace_matches_synthetic_run(kvtier, tmp_path):
    """The file written by `trace gen` replays to exactly the synthetic run's metrics."""
    t = tmp_path / "t.jsonl"
    steps = ["--set", "workload.decode_steps=3"]
    assert kvtier("trace", "gen", "--config", DEFAULT_CONFIG, *steps, "--out", t, cwd=tmp_path).returncode == 0
    p = kvtier("run", DEFAULT_CONFIG, "-q", "--out", tmp_path / "syn", *steps, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    trace = json.dumps({"kind": "file", "path": str(t)})
    p = kvtier("run", DEFAULT_CONFIG, "-q", "--out", tmp_path / "file", *steps, "--set", "workload.trace=" + trace,
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    syn = json.loads((tmp_path / "syn" / "result.json").read_text())["metrics"]
    rep = json.loads((tmp_path / "file" / "result.json").read_text())["metrics"]
    assert syn == rep


def test_trace_gen_seed_changes_trace(kvtier, tmp_path):
    texts = []
    for seed in (1, 2):
        t = tmp_path / ("t%d.jsonl" % seed)
        p = kvtier("trace", "gen", "--config", DEFAULT_CONFIG, "--set", "workload.decode_steps=1", "--set",
                   "sim.seed=%d" % seed, "--out", t, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        texts.append(t.read_text().splitlines()[1:])
    assert texts[0] != texts[1]


def test_list_policies_has_lru_with_doc(kvtier, tmp_path):
    p = kvtier("list", "policies", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lru = [l for l in p.stdout.splitlines() if l.strip().startswith("lru:")]
    assert lru, p.stdout
    doc = lru[0].split(":", 1)[1].strip()
    assert doc and "recent" in doc.lower()
    for family in ("eviction", "promotion", "placement", "prefetch", "evaluation"):
        assert family + " policies" in p.stdout


def test_list_hardware_lists_every_preset(kvtier, tmp_path):
    p = kvtier("list", "hardware", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    presets = sorted((ROOT / "configs" / "hardware").glob("*.json"))
    assert presets
    for f in presets:
        assert "configs/hardware/" + f.name in p.stdout, f.name
    assert "(invalid" not in p.stdout


def test_list_unknown_is_bad_input(kvtier, tmp_path):
    p = kvtier("list", "bogus", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith("kvtier: error:")
