"""`kvtier search` (docs/sweep.md, Searches): Optuna proposes the trials,
each runs as a sweep point into trials.jsonl, the best feasible trial (or
the Pareto front) is written with a plot; seeded, so the same search gives
the same file, and a re-run reuses the trials it ran."""

import json

import pytest

from conftest import DEFAULT_CONFIG

SEARCH = {
    "name": "tiny_search",
    "base": str(DEFAULT_CONFIG),
    "set": {"workload.decode_steps": 2},
    "space": {
        "policies.prefetch.depth": {"low": 0, "high": 3, "int": True},
        "workload.batch": {"choices": [1, 2, 4]},
        "workload.context_tokens": {"low": 1024, "high": 4096, "step": 512, "int": True},
    },
    "objective": {"metric": "decode_tokens_per_s", "direction": "maximize"},
    "constraints": ["config.workload.batch<=2"],
    "trials": 8,
    "seed": 3,
    "batch": 4,
}


def write(path, doc):
    path.write_text(json.dumps(doc))
    return path


def lines(path):
    return [json.loads(l) for l in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def tiny(kvtier, tmp_path_factory):
    d = tmp_path_factory.mktemp("search")
    f = write(d / "tiny.json", SEARCH)
    p = kvtier("search", f, "-j", "2", "--out", d / "res", cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    return d, f, p


def test_every_trial_is_a_sweep_point_with_its_resolved_config(tiny):
    d, _, p = tiny
    doc = json.loads((d / "res" / "search.json").read_text())
    assert doc["sampler"] == "TPE" and len(doc["trials"]) == 8
    by_key = {l["key"]: l for l in lines(d / "res" / "trials.jsonl")}
    for t in doc["trials"]:
        assert t["state"] == "complete", t
        line = by_key[t["key"]]
        assert line["overrides"] == t["overrides"]
        cfg = line["result"]["config"]
        assert cfg["workload"]["batch"] == t["overrides"]["workload.batch"]
        assert cfg["policies"]["prefetch"]["depth"] == t["overrides"]["policies.prefetch.depth"]
        m = line["result"]["metrics"]
        assert t["values"] == [m["decode_tokens_per_s"]]
        assert t["feasible"] == (cfg["workload"]["batch"] <= 2)


def test_best_is_the_best_feasible_trial(kvtier, tiny):
    d, _, p = tiny
    doc = json.loads((d / "res" / "search.json").read_text())
    feasible = [t for t in doc["trials"] if t["feasible"]]
    assert feasible and len(feasible) < len(doc["trials"]), "the constraint should rule some trials out"
    top = max(t["values"][0] for t in feasible)
    best = [t for t in doc["trials"] if t["trial"] == doc["pareto"][0]][0]
    assert best["values"][0] == top and best["feasible"]
    assert "best decode_tokens_per_s" in p.stdout
    assert (d / "res" / "pareto.png").stat().st_size > 0 and (d / "res" / "pareto.csv").exists()
    # best.json is the trial's resolved configuration: it runs to the same figure.
    r = kvtier("run", d / "res" / "best.json", "--out", d / "best_run", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    got = json.loads((d / "best_run" / "result.json").read_text())["metrics"]["decode_tokens_per_s"]
    assert got == top


def test_same_search_same_file_and_a_rerun_runs_nothing(kvtier, tiny, tmp_path):
    d, f, _ = tiny
    first = (d / "res" / "search.json").read_text()
    n = len(lines(d / "res" / "trials.jsonl"))
    again = kvtier("search", f, "-j", "2", "--out", d / "res", cwd=d, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (d / "res" / "search.json").read_text() == first
    assert len(lines(d / "res" / "trials.jsonl")) == n, "a re-run ran trials again"
    fresh = kvtier("search", f, "-j", "2", "--out", tmp_path / "res", cwd=tmp_path, timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    a, b = json.loads(first), json.loads((tmp_path / "res" / "search.json").read_text())
    a.pop("jsonl"), b.pop("jsonl")
    assert a == b, "the same seeded search gave other trials"


def test_two_objectives_give_a_pareto_front(kvtier, tmp_path):
    doc = dict(SEARCH, name="two", objective=None, trials=6, constraints=[],
               objectives=[{"metric": "decode_tokens_per_s", "direction": "maximize"},
                           {"metric": "config.workload.batch", "direction": "minimize"}])
    del doc["objective"]
    f = write(tmp_path / "two.json", doc)
    p = kvtier("search", f, "-j", "2", "--out", tmp_path / "res", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "res" / "search.json").read_text())
    assert s["sampler"] == "NSGA-II"
    done = {t["trial"]: t for t in s["trials"] if t["state"] == "complete"}
    front = [done[i] for i in s["pareto"]]
    assert front
    for a in front:  # no trial is better in one objective and no worse in the other
        for b in done.values():
            assert not (b["values"][0] >= a["values"][0] and b["values"][1] <= a["values"][1] and
                        b["values"] != a["values"]), (a, b)


@pytest.mark.parametrize("change,must", [
    (dict(space={}), "space"),
    (dict(constraints=["ttft<<2"]), "constraints[0]"),
    (dict(space={"workload.batch": {"low": 4, "high": 1}}), 'space["workload.batch"]'),
    (dict(objective={"metric": "x", "direction": "up"}), "objective.direction"),
    (dict(sapce={}), "sapce"),
    (dict(space={"workload.batch": {"low": 0, "high": 2, "int": True}}), "workload.batch"),
])
def test_bad_search_is_one_line_exit_2(kvtier, tmp_path, change, must):
    f = write(tmp_path / "bad.json", dict(SEARCH, **change))
    p = kvtier("search", f, "--out", tmp_path / "res", cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("kvtier: error:"), p.stderr
    assert str(f) in p.stderr and must in p.stderr, p.stderr
