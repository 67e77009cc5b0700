"""What a serving run writes per request and per iteration: requests.csv's
finish time and SLO flags agree with the metrics, and iterations.csv
(sim.step_csv) adds up to the run's totals without changing them."""

import csv
import json

from conftest import ROOT

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"


def run(kvtier, d, config, *sets):
    d.mkdir(parents=True, exist_ok=True)
    args = ["run", config, "--out", d / "out", "-q"]
    for s in sets:
        args += ["--set", s]
    p = kvtier(*args, cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(d / "out" / "result.json") as f:
        return json.load(f)["metrics"]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_requests_csv_has_finish_time_and_slo_flags(kvtier, tmp_path):
    # A TTFT limit between the fastest and the slowest request: some meet it, some do not.
    base = run(kvtier, tmp_path / "a", VLLM)
    ttft = sorted(float(r["ttft_s"]) for r in rows(tmp_path / "a" / "out" / "requests.csv"))
    limit = (ttft[0] + ttft[-1]) / 2
    tpot_limit = base["tpot_s"]["p50"]
    m = run(kvtier, tmp_path / "b", VLLM, "serving.slo.ttft_s=%r" % limit, "serving.slo.tpot_s=%r" % tpot_limit)
    req = rows(tmp_path / "b" / "out" / "requests.csv")
    assert len(req) == m["requests"]
    for r in req:
        assert abs(float(r["finish_s"]) - (float(r["arrival_s"]) + float(r["e2e_s"]))) <= 1e-9 * float(r["finish_s"])
        assert r["ttft_slo_met"] == ("1" if float(r["ttft_s"]) <= limit else "0")
        tpot_ok = int(r["output_tokens"]) < 2 or float(r["tpot_s"]) <= tpot_limit
        assert r["tpot_slo_met"] == ("1" if tpot_ok else "0")
        assert r["slo_met"] == ("1" if r["ttft_slo_met"] == r["tpot_slo_met"] == "1" else "0")
    met = sum(int(r["slo_met"]) for r in req)
    assert 0 < sum(int(r["ttft_slo_met"]) for r in req) < len(req)
    assert met / len(req) == m["slo_attainment"]
    assert max(float(r["finish_s"]) for r in req) == m["simulated_time_s"]
    # No SLO: every request meets it.
    assert all(r["slo_met"] == "1" for r in rows(tmp_path / "a" / "out" / "requests.csv"))


def test_iterations_csv_adds_up_to_the_run(kvtier, tmp_path):
    plain = run(kvtier, tmp_path / "a", VLLM)
    assert not (tmp_path / "a" / "out" / "iterations.csv").exists()
    m = run(kvtier, tmp_path / "b", VLLM, "sim.step_csv=true")
    assert m == plain, "iterations.csv changed the metrics"
    it = rows(tmp_path / "b" / "out" / "iterations.csv")
    assert len(it) == m["iterations"]
    assert list(it[0])[:9] == ["iteration", "start_s", "end_s", "batch", "prefill_tokens", "decode_tokens", "running",
                               "waiting", "swapped"]
    assert [c for c in it[0] if c.startswith("kv_bytes_")] == ["kv_bytes_gpu", "kv_bytes_dram"]
    prev_end = 0.0
    for n, r in enumerate(it):
        assert int(r["iteration"]) == n
        assert prev_end <= float(r["start_s"]) <= float(r["end_s"])
        prev_end = float(r["end_s"])
        assert 1 <= int(r["batch"]) <= int(r["running"])
    assert float(it[-1]["end_s"]) == m["simulated_time_s"]
    # Tokens: prefill computes every prompt token; each decode item one output token after the first.
    assert sum(int(r["prefill_tokens"]) for r in it) == m["computed_prompt_tokens"]
    assert sum(int(r["decode_tokens"]) for r in it) == m["output_tokens"] - m["requests"]
    # 15 of the 16 requests run at once, one waits (configs/systems/vllm_swap.json).
    assert max(int(r["running"]) for r in it) == 15
    assert int(it[0]["waiting"]) == 1
    assert max(float(r["kv_bytes_gpu"]) for r in it) == m["tiers"]["gpu"]["peak_bytes"]


def test_iterations_csv_path_that_is_a_folder_is_refused_before_the_run(kvtier, tmp_path):
    (tmp_path / "out" / "iterations.csv").mkdir(parents=True)
    p = kvtier("run", VLLM, "--out", tmp_path / "out", "--set", "sim.step_csv=true", cwd=tmp_path)
    assert p.returncode == 2 and "iterations.csv is a folder" in p.stderr, p.stderr
    assert not (tmp_path / "out" / "result.json").exists()
