"""The bad-input matrix: every case of cases.json runs kvtier on a malformed
input and must give exactly one line on stderr with the expected fragment,
the expected exit code (2), no new file anywhere in its folder (the working
directory) and no *.tmp left behind.

The binary comes from $KVTIER_BINARY (ctest sets it), else build/kvtier.
"""

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((Path(__file__).parent / "cases.json").read_text())["cases"]
DEEP = 100_000


def binary():
    b = os.environ.get("KVTIER_BINARY") or str(ROOT / "build" / "kvtier")
    return Path(b) if os.path.isabs(b) else ROOT / b


def substitute(v, subs):
    if isinstance(v, str):
        for k, s in subs.items():
            v = v.replace(k, s)
        return v
    if isinstance(v, list):
        return [substitute(x, subs) for x in v]
    if isinstance(v, dict):
        return {substitute(k, subs): substitute(x, subs) for k, x in v.items()}
    return v


def deep(n=DEEP):
    return "[" * n + "]" * n


# Inputs too large or too deep to keep in the repository, made on the spot.
def gen_binary(path):
    path.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(4096)))


def gen_deep_config(path):
    path.write_text('{"preset": "configs/default.json", "workload": {"trace": ' + deep() + "}}")


def gen_deep_sweep(path):
    path.write_text('{"base": "configs/default.json", "grid": ' + deep() + "}")


def gen_deep_mooncake(path):
    path.write_text('{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [' + deep() + "]}\n")


def gen_huge_line(path):
    header = {"format": "kvtier-attention-trace", "version": 1, "layers": 1, "steps": 1, "block_tokens": 64,
              "context_tokens": 512}
    with open(path, "w") as f:
        f.write(json.dumps(header) + "\n")
        chunk = "0," * (1 << 19)
        for _ in range(100):  # 100 MiB
            f.write(chunk)
        f.write("\n")


def gen_damaged_binary(path):
    # The container's magic and version, then a chunk header whose sizes are implausible.
    path.write_bytes(b"KVTATTN\x1a" + (1).to_bytes(4, "little") + b"HEAD" + (1).to_bytes(4, "little") +
                     (0xFFFFFFFF).to_bytes(4, "little") * 2)


def gen_big_config(path):
    # 17 MiB of valid JSON: refused by size before it is parsed.
    path.write_text('{"preset": "configs/default.json", "note": "' + "x" * (17 << 20) + '"}')


def gen_huge_mooncake(path):
    with open(path, "w") as f:
        f.write('{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}\n')
        f.write('{"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [' + "1," * (17 << 19) + "1]}\n")


def gen_many_requests(path):
    # 300,000 short requests (19 MB): a valid trace that a small --max-memory refuses before reading it.
    line = '{"timestamp": 0, "input_length": 16, "output_length": 1, "hash_ids": [1]}\n'
    with open(path, "w") as f:
        f.write(line * 300000)


def gen_deep_trace_header(path):
    path.write_text('{"format": "kvtier-attention-trace", "version": 1, "model": ' + deep() + "}\n")


def gen_unreadable(path):
    path.chmod(0)


def captured_trace_chunks():
    """The captured stories260K trace as its 12-byte start and its chunks (tag, count, raw, payload)."""
    data = (ROOT / "traces" / "data" / "stories260K.trace").read_bytes()
    chunks, pos = [], 12
    while pos < len(data):
        tag, count, raw, comp = data[pos:pos + 4], *(int.from_bytes(data[pos + i:pos + i + 4], "little") for i in (4, 8, 12))
        chunks.append((tag, count, raw, data[pos + 16:pos + 16 + comp]))
        pos += 16 + comp
    return data[:12], chunks


def gen_cut_end(path):
    # A valid trace whose END chunk is cut short: the run needs only its first records.
    path.write_bytes((ROOT / "traces" / "data" / "stories260K.trace").read_bytes()[:-5])


def gen_end_2_40(path):
    # A valid trace whose END chunk promises 2^40 records (a zstd frame holding one raw block).
    start, chunks = captured_trace_chunks()
    frame = bytes.fromhex("28b52ffd") + bytes([0x20, 8]) + (1 | 8 << 3).to_bytes(3, "little") + (1 << 40).to_bytes(8, "little")
    out = bytearray(start)
    for tag, count, raw, payload in chunks:
        if tag == b"END.":
            payload = frame
        out += tag + count.to_bytes(4, "little") + raw.to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload
    path.write_bytes(bytes(out))


GENERATORS = {"binary": gen_binary, "cut_end": gen_cut_end, "end_2_40": gen_end_2_40, "deep_config": gen_deep_config, "deep_sweep": gen_deep_sweep,
              "deep_mooncake": gen_deep_mooncake, "huge_line": gen_huge_line, "damaged_binary": gen_damaged_binary,
              "unreadable": gen_unreadable, "big_config": gen_big_config, "huge_mooncake": gen_huge_mooncake, "many_requests": gen_many_requests,
              "deep_trace_header": gen_deep_trace_header}


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_matrix_is_large_enough():
    assert len(CASES) >= 60
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "case names must be unique"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_input(case, tmp_path):
    if case.get("skip_if_root") and os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    exe = binary()
    assert exe.is_file(), "kvtier binary not found at %s (set KVTIER_BINARY)" % exe
    work = tmp_path / "case"
    work.mkdir()
    out = work / "out-must-not-exist"
    subs = {"{tmp}": str(work), "{out}": str(out), "{src}": str(ROOT)}
    for name, content in case.get("files", {}).items():
        p = work / name
        p.parent.mkdir(parents=True, exist_ok=True)
        content = substitute(content, subs)
        p.write_text(content if isinstance(content, str) else json.dumps(content, indent=1))
    for name, how in case.get("generate", {}).items():
        GENERATORS[how](work / name)
    args = substitute(case["args"], subs)
    # 30,000 deep: past the limit, within what one argument may hold (128 KiB).
    args = ["workload.trace=" + deep(30_000) if a == "@deep_value" else a for a in args]
    before = listing(work)
    r = subprocess.run([str(exe)] + args, cwd=str(work), capture_output=True, text=True, errors="replace", timeout=60)
    for name, how in case.get("generate", {}).items():
        if how == "unreadable":
            (work / name).chmod(0o644)
    expected = substitute(case["error"], subs)
    assert r.returncode == case["rc"], "exit %d, stderr: %s" % (r.returncode, r.stderr[:2000])
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, "stderr is not one line: %r" % r.stderr[:2000]
    assert expected in r.stderr, "expected %r in %r" % (expected, r.stderr[:2000])
    assert len(r.stderr) < 1000, "an error message that long dumps its input"
    assert not out.exists(), "%s was written" % out
    after = listing(work)
    assert after == before, "files appeared or went: %s" % sorted(set(after) ^ set(before))
    assert not list(work.rglob("*.tmp")), "a temporary file was left behind"
