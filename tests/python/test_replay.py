"""kvtier replay, trace stats and trace export end to end, and the capacity plot."""

import csv
import json
import struct

import pytest

from conftest import ROOT

SLICE = ROOT / "tests" / "data" / "mooncake_conversation_head1500.jsonl"
FULL = ROOT / ".." / "shared" / "traces" / "mooncake_conversation_trace.jsonl"
AZURE = ROOT / ".." / "shared" / "traces" / "azure_llm_2023_code.csv"
SYNTH = ROOT / "configs" / "replay" / "synthetic_chat_rag.json"


def lru_oracle(path, capacity, warmup=0, block_tokens=512):
    """Block-semantics LRU over a Mooncake JSONL: (hits, hit tokens, tokens)
    after `warmup` requests."""
    from collections import OrderedDict
    cache, hits, hit_tokens, tokens = OrderedDict(), 0, 0, 0
    with open(path) as f:
        for n, line in enumerate(f):
            req = json.loads(line)
            ids = req["hash_ids"]
            for k, b in enumerate(ids):
                size = block_tokens
                if k == len(ids) - 1 and 0 < req["input_length"] - k * block_tokens <= block_tokens:
                    size = req["input_length"] - k * block_tokens
                hit = b in cache
                if hit:
                    cache.move_to_end(b)
                else:
                    cache[b] = True
                    if len(cache) > capacity:
                        cache.popitem(last=False)
                if n >= warmup:
                    tokens += size
                    hits += hit
                    hit_tokens += size if hit else 0
    return hits, hit_tokens, tokens


def test_replay_json_and_csv(kvtier, tmp_path):
    out, table = tmp_path / "r.json", tmp_path / "r.csv"
    p = kvtier("replay", SLICE, "-p", "lru,belady", "-c", "256,2048", "-o", out, "--csv", table, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["references"] == 41702 and r["distinct_blocks"] == 30634
    assert r["block_tokens"] == 512 and r["model"] == "llama-13b"
    assert r["block_bytes"] == 512 * 819200  # LLaMA-13B: 800 KiB of KV per token
    hits = {(x["tiers"][0]["policy"]["name"], x["tiers"][0]["capacity_blocks"]): x["hits"] for x in r["runs"]}
    # The same counts as libCacheSim (tests/sim/replay_test.cpp).
    assert hits == {("lru", 256): 1555, ("lru", 2048): 1916, ("belady", 256): 3909, ("belady", 2048): 9656}
    # Tokens and bytes count what each block holds: a prompt's last block
    # only its remaining tokens (an LRU of OrderedDict is the oracle).
    lru = {run["tiers"][0]["capacity_blocks"]: run for run in r["runs"] if run["tiers"][0]["policy"]["name"] == "lru"}
    for cap, run in lru.items():
        hits, hit_tokens, tokens = lru_oracle(SLICE, cap)
        t = run["tiers"][0]
        assert t["hits"] == hits
        assert t["prefill_tokens_saved"] == run["prefill_tokens_saved"] == hit_tokens
        assert t["bytes_served"] == hit_tokens * 819200
        assert run["bytes_referenced"] == tokens * 819200
        assert run["miss_ratio"] == pytest.approx(1 - hits / 41702, abs=1e-12)
        assert run["byte_miss_ratio"] == pytest.approx(1 - hit_tokens / tokens, abs=1e-12)
        assert run["byte_miss_ratio"] != pytest.approx(run["miss_ratio"], abs=1e-4)  # partial blocks weigh less
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 4
    assert {(x["policy"], int(x["capacity_blocks"]), int(x["hits"])) for x in rows} == {
        ("lru", 256, 1555), ("lru", 2048, 1916), ("belady", 256, 3909), ("belady", 2048, 9656)}
    for x, run in zip(rows, r["runs"]):
        assert float(x["miss_ratio"]) == pytest.approx(run["miss_ratio"])
        assert float(x["byte_miss_ratio"]) == pytest.approx(run["byte_miss_ratio"])


def test_replay_warmup(kvtier, tmp_path):
    """--warmup N replays N requests before counting; every method agrees."""
    args = ["-c", "500,4000", "--warmup", "300"]
    a = kvtier("replay", SLICE, *args, cwd=tmp_path)
    s = kvtier("replay", SLICE, *args, "--stack-distance", cwd=tmp_path)
    m = kvtier("replay", SLICE, *args, "--stream", cwd=tmp_path)
    assert a.returncode == 0 and s.returncode == 0 and m.returncode == 0, a.stderr + s.stderr + m.stderr
    ra, rs, rm = (json.loads(x.stdout) for x in (a, s, m))
    assert ra["warmup_requests"] == 300
    for cap, run in zip((500, 4000), ra["runs"]):
        hits, hit_tokens, tokens = lru_oracle(SLICE, cap, warmup=300)
        assert run["requests"] == 1200 and run["hits"] == hits and run["prefill_tokens_saved"] == hit_tokens
        assert run["bytes_referenced"] == tokens * 819200
    strip = [{k: v for k, v in run.items() if k != "method"} for run in ra["runs"]]
    assert strip == [{k: v for k, v in run.items() if k != "method"} for run in rs["runs"]]
    assert strip == [{k: v for k, v in run.items() if k != "method"} for run in rm["runs"]]
    # A warm cache misses less than a cold one; 10% is the first 150 requests.
    cold = json.loads(kvtier("replay", SLICE, "-c", "4000", cwd=tmp_path).stdout)["runs"][0]
    assert run["miss_ratio"] < cold["miss_ratio"]
    pct = json.loads(kvtier("replay", SLICE, "-c", "4000", "--warmup", "10%", cwd=tmp_path).stdout)
    assert pct["warmup_requests"] == 150 and pct["runs"][0]["requests"] == 1350


def test_replay_is_deterministic_and_stack_distance_agrees(kvtier, tmp_path):
    a = kvtier("replay", "--synthetic", SYNTH, "-c", "100,1000,5%", cwd=tmp_path)
    b = kvtier("replay", "--synthetic", SYNTH, "-c", "100,1000,5%", cwd=tmp_path)
    s = kvtier("replay", "--synthetic", SYNTH, "-c", "100,1000,5%", "--stack-distance", cwd=tmp_path)
    assert a.returncode == 0 and s.returncode == 0, a.stderr + s.stderr
    assert a.stdout == b.stdout
    ra, rs = json.loads(a.stdout), json.loads(s.stdout)
    assert [x["hits"] for x in ra["runs"]] == [x["hits"] for x in rs["runs"]]
    assert ra["runs"][2]["tiers"][0]["capacity_blocks"] == int(0.05 * ra["distinct_blocks"])


def test_replay_stream_gives_the_same_result(kvtier, tmp_path):
    args = ["-p", "lru,arc,s3fifo,twoq", "-c", "300,3000", "--semantics", "prefix", "--repeat", "2"]
    a = kvtier("replay", SLICE, *args, cwd=tmp_path)
    b = kvtier("replay", SLICE, *args, "--stream", cwd=tmp_path)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    # What each holds differs by design (the stream in memory, or every run's cache at once).
    assert ra.pop("resources")["parts"] != rb.pop("resources")["parts"]
    assert ra == rb
    c = kvtier("replay", SLICE, "-p", "belady", "-c", "300", "--stream", cwd=tmp_path)
    assert c.returncode == 2 and "needs the whole stream" in c.stderr


def test_replay_tiers_in_bytes(kvtier, tmp_path):
    p = kvtier("replay", SLICE, "--tier", "gpu:4GiB:lru", "--tier", "dram:64GiB:s3fifo", "--semantics", "prefix",
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    gpu, dram = r["runs"][0]["tiers"]
    assert gpu["capacity_blocks"] == 4 * 2**30 // (512 * 819200)
    assert dram["policy"]["name"] == "s3fifo" and dram["hits"] > 0
    assert r["semantics"] == "prefix"


def test_trace_stats_request_traces(kvtier, tmp_path):
    p = kvtier("trace", "stats", FULL, "--json", tmp_path / "s.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["requests"] == 12031 and s["block_refs"] == 288500 and s["distinct_blocks"] == 182790
    assert s["unbounded_hits"] == 105710 and abs(s["unbounded_hit_ratio"] - 0.366) < 0.0005
    assert "0.3664" in p.stdout
    a = kvtier("trace", "stats", AZURE, cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    assert "8819" in a.stdout and "none (lengths only)" in a.stdout


def test_trace_export_oracle_general(kvtier, tmp_path):
    out = tmp_path / "slice.oracleGeneral"
    p = kvtier("trace", "export", SLICE, "--format", "oracleGeneral", "--out", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = out.read_bytes()
    assert len(data) == 41702 * 24
    ts, oid, size, nxt = struct.unpack_from("<IQIq", data, 0)
    assert (ts, oid, size) == (0, 0, 1)  # first request, block id 0
    ids = [struct.unpack_from("<Q", data, 24 * i + 4)[0] for i in range(41702)]
    assert nxt > 0 and ids[nxt] == 0


BAD = {
    "truncated.jsonl": ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}\n'
                        '{"timestamp": 5, "input_len', ":2: expected one JSON object"),
    "missing.jsonl": ('{"timestamp": 0, "input_length": 600, "hash_ids": [1]}\n', ':1: missing field "output_length"'),
    "negative.jsonl": ('{"timestamp": 0, "input_length": -6, "output_length": 1, "hash_ids": []}\n',
                       ":1: input_length: expected a non-negative integer"),
    "backwards.jsonl": ('{"timestamp": 9, "input_length": 6, "output_length": 1, "hash_ids": [1]}\n'
                        '{"timestamp": 3, "input_length": 6, "output_length": 1, "hash_ids": [1]}\n',
                        ":2: timestamp 3 ms is before"),
    "toolong.jsonl": ('{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [1, 2]}\n',
                      ":1: hash_ids: 2 blocks, but input_length 6 fills at most 1 blocks"),
    "empty.jsonl": ("", ": empty file"),
    "header.csv": ("time,ctx,gen\n2023-11-16 18:17:03.9,1,1\n", ":1: expected the Azure LLM inference CSV header"),
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("command", ["replay", "export"])
def test_bad_traces_exit_2_with_one_line_and_write_nothing(kvtier, tmp_path, name, command):
    text, expect = BAD[name]
    f = tmp_path / name
    f.write_text(text)
    out = tmp_path / "out.bin"
    if command == "replay":
        p = kvtier("replay", f, "-c", "10", "-o", out, "--csv", tmp_path / "out.csv", cwd=tmp_path)
    else:
        p = kvtier("trace", "export", f, "--out", out, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("kvtier: error: " + str(f)), lines[0]
    assert expect in lines[0], lines[0]
    assert sorted(x.name for x in tmp_path.iterdir()) == [name]


def test_bad_replay_options(kvtier, tmp_path):
    for args, expect in [(["-c", "10", "-p", "lruu"], "unknown eviction policy 'lruu'"),
                         (["-c", "10kg"], "capacity '10kg'"),
                         ([], "give --capacity"),
                         (["-c", "10", "--semantics", "vllm"], "--semantics"),
                         (["-c", "10", "-p", "fifo", "--stack-distance"], "--stack-distance: only for lru"),
                         (["-c", "200%"], "capacity '200%': a percentage of the distinct blocks is at most 100%"),
                         (["-c", "10", "--warmup", "1500"], "--warmup '1500': the input has 1500 requests"),
                         (["-c", "10", "--warmup", "100%"], "--warmup '100%': expected"),
                         (["-c", "10", "--warmup", "ten"], "--warmup 'ten': expected"),
                         (["-c", "10", "-p", "lru", "--policy-param", "lfu.keep_history=false"],
                          "--policy-param 'lfu.keep_history=false': lfu is not a policy of this replay (it runs lru)"),
                         (["-c", "10", "-p", "lfu", "--policy-param", "lfu.keep_histroy=false"],
                          "--policy-param lfu.keep_histroy: unknown key (did you mean 'keep_history'?)"),
                         (["-c", "10", "--tier", "gpu:10:lfu", "--policy-param", "lfu.keep_histroy=false"],
                          "--policy-param lfu.keep_histroy: unknown key (did you mean 'keep_history'?)")]:
        p = kvtier("replay", SLICE, *args, "-o", tmp_path / "o.json", cwd=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.splitlines()) == 1 and expect in p.stderr, (args, p.stderr)
        assert not (tmp_path / "o.json").exists()
    p = kvtier("replay", AZURE, "-c", "10", cwd=tmp_path)
    assert p.returncode == 2 and "carry no block ids" in p.stderr
    # A misspelt input file: the nearest one that exists.
    for args, expect in [(["tests/data/mooncake_conversation_head150.jsonl", "-c", "10"],
                          "(did you mean 'tests/data/mooncake_conversation_head1500.jsonl'?)"),
                         (["--synthetic", "configs/replay/synthetic_chat.json", "-c", "10"],
                          "--synthetic: file 'configs/replay/synthetic_chat.json' not found (did you mean "
                          "'configs/replay/synthetic_chat_rag.json'?)")]:
        p = kvtier("replay", *args, cwd=ROOT)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and expect in p.stderr, p.stderr


def test_capacity_plot(kvtier, plot_script, tmp_path):
    out = tmp_path / "r.json"
    p = kvtier("replay", SLICE, "-p", "lru,s3fifo", "-c", "1%,10%,50%", "-o", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    q = plot_script("capacity.py", out, "-o", tmp_path / "cap.png", cwd=tmp_path)
    assert q.returncode == 0, q.stderr
    assert (tmp_path / "cap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    q = plot_script("capacity.py", bad, "-o", tmp_path / "x.png", cwd=tmp_path)
    assert q.returncode != 0 and "expected the JSON of `kvtier replay --out`" in q.stderr


def test_mrc_plot(kvtier, plot_script, tmp_path):
    """Miss ratio and byte miss ratio curves from replay's JSON and its CSV."""
    out, table = tmp_path / "r.json", tmp_path / "r.csv"
    p = kvtier("replay", SLICE, "-p", "lru,s3fifo", "-c", "1%,10%,50%", "-o", out, "--csv", table, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for src, stem in ((out, "mrc_json"), (table, "mrc_csv")):
        q = plot_script("kvtier_plot.py", "mrc", src, "-o", tmp_path / stem, cwd=tmp_path)
        assert q.returncode == 0, q.stderr
        assert (tmp_path / (stem + ".png")).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / (stem + ".pdf")).read_bytes()[:4] == b"%PDF"
    import sys
    sys.path.insert(0, str(ROOT / "plots"))
    import kvtier_plot as kp
    series, _ = kp.load_mrc(str(out))
    assert sorted(series) == ["lru", "s3fifo"]
    r = json.loads(out.read_text())
    lru = sorted((run["tiers"][0]["capacity_blocks"], run["miss_ratio"], run["byte_miss_ratio"])
                 for run in r["runs"] if run["tiers"][0]["policy"]["name"] == "lru")
    assert series["lru"] == [tuple(float(v) for v in x) for x in lru]
    assert [m for _, m, _ in series["lru"]] == sorted((m for _, m, _ in series["lru"]), reverse=True)
    fig, drawn = kp.plot_mrc(series, title="t")
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 2]
    bad = tmp_path / "old.csv"
    bad.write_text("policy,capacity,hit_ratio\nlru,1,0.5\n")
    q = plot_script("kvtier_plot.py", "mrc", bad, "-o", tmp_path / "x", cwd=tmp_path)
    assert q.returncode == 2 and "missing tier, capacity_blocks, miss_ratio, byte_miss_ratio" in q.stderr, q.stderr
    assert len(q.stderr.strip().splitlines()) == 1
