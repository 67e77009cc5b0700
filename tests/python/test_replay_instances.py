"""kvtier replay --instances: the prefix caches of several serving instances
(each tier's capacity split equally), requests routed among them, against
one pooled cache of the same total (docs/replay.md)."""

import json
from collections import OrderedDict

import pytest

from conftest import ROOT

SLICE = ROOT / "tests" / "data" / "mooncake_conversation_head1500.jsonl"


def replay(kvtier, tmp_path, *args):
    out = tmp_path / "r.json"
    p = kvtier("replay", SLICE, "-o", out, "-q", *args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text())["runs"][0]


def local_lru_oracle(capacity, n, route):
    """Block-semantics LRU caches of n instances (capacity split, the
    remainder to the first), requests routed in turn or to the longest cached
    prefix among instances within 2 x the least-used one's requests + 1."""
    reqs = [json.loads(l)["hash_ids"] for l in open(SLICE)]
    caches = [OrderedDict() for _ in range(n)]
    cap = [capacity // n + (1 if i < capacity % n else 0) for i in range(n)]
    count, hits, refs = [0] * n, 0, 0
    for k, r in enumerate(reqs):
        if route == "round_robin":
            to = k % n
        else:
            least, best, to = min(count), 0, None
            for i in range(n):
                if count[i] > 2 * least + 1:
                    continue
                h = 0
                while h < len(r) and r[h] in caches[i]:
                    h += 1
                if to is None or h > best or (h == best and count[i] < count[to]):
                    best, to = h, i
        count[to] += 1
        c = caches[to]
        for b in r:
            refs += 1
            if b in c:
                hits += 1
                c.move_to_end(b)
            else:
                c[b] = True
                if len(c) > cap[to]:
                    c.popitem(last=False)
    return hits, refs, count


def test_one_instance_is_the_plain_replay(kvtier, tmp_path):
    plain = replay(kvtier, tmp_path, "-c", "2000")
    one = replay(kvtier, tmp_path, "-c", "2000", "--instances", "1")
    assert one == plain


@pytest.mark.parametrize("route", ["round_robin", "longest_prefix"])
def test_local_caches_match_an_independent_lru_model(kvtier, tmp_path, route):
    run = replay(kvtier, tmp_path, "-c", "2001", "--instances", "4", "--route", route)
    hits, refs, count = local_lru_oracle(2001, 4, route)
    assert run["tiers"][0]["hits"] == hits and run["references"] == refs
    assert run["requests_per_instance"] == count and run["instances"] == 4 and run["route"] == route
    assert run["tiers"][0]["capacity_blocks"] == 2001


def test_local_caches_lose_hits_a_pooled_cache_keeps_and_kv_aware_routing_wins_them_back(kvtier, tmp_path):
    pooled = replay(kvtier, tmp_path, "-c", "2000")
    rr = replay(kvtier, tmp_path, "-c", "2000", "--instances", "8", "--route", "round_robin")
    kv = replay(kvtier, tmp_path, "-c", "2000", "--instances", "8", "--route", "longest_prefix")
    h = {k: r["tiers"][0]["hits"] for k, r in (("pooled", pooled), ("rr", rr), ("kv", kv))}
    assert h["rr"] < h["kv"] and h["rr"] < h["pooled"], h
    assert pooled["references"] == rr["references"] == kv["references"]


@pytest.mark.parametrize("args,expected", [
    (["-c", "2000", "--instances", "0"], "--instances"),
    (["-c", "2000", "--instances", "2", "--route", "random"], "--route: expected round_robin or longest_prefix"),
    (["-c", "2000", "--instances", "2", "--stream"], "--instances: not with --stream"),
    (["-c", "3", "--instances", "4"], "leave some of the 4 instances no block"),
    (["-c", "2000", "--instances", "2", "--warmup", "10"], "--warmup: not with --instances above 1"),
])
def test_bad_instances_are_one_line_and_exit_2(kvtier, tmp_path, args, expected):
    out = tmp_path / "r.json"
    p = kvtier("replay", SLICE, "-o", out, *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert expected in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert not out.exists()
