"""How prompts share iterations with decode steps (serving.batching,
docs/serving.md): "mixed" batches them together; "prefill_first" (vLLM V0)
computes an iteration's new prompts alone while the running sequences'
decode steps wait. A prompt arriving during another's decode then delays
that decode by exactly its own prefill."""

import csv
import json

import pytest

from conftest import ROOT, run_metrics as run

VLLM = ROOT / "configs" / "systems" / "vllm_swap.json"
SETS = ["model=%s" % (ROOT / "configs" / "models" / "opt-13b.json"),
        "hardware=%s" % (ROOT / "configs" / "hardware" / "a100x4_pcie.json")]


def trace(tmp_path, name, rows):
    path = tmp_path / (name + ".jsonl")
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": [k]}) + "\n"
                            for k, (t, i, o) in enumerate(rows)))
    return 'serving.requests={"kind": "trace", "path": "%s"}' % path


def rows(out):
    with open(out / "requests.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("batching", ["mixed", "prefill_first"])
def test_a_prompt_arriving_during_a_decode_delays_it_by_its_prefill_when_prefills_go_first(kvtier, tmp_path, batching):
    # r1: 512 tokens in, 64 out; r2: 512 in, 1 out (its prefill is its whole
    # life), 0.3 s later, while r1 decodes.
    mode = 'serving.batching="%s"' % batching
    _, a1 = run(kvtier, tmp_path, "r1", VLLM, *SETS, mode, trace(tmp_path, "r1", [(0, 512, 64)]))
    _, a2 = run(kvtier, tmp_path, "r2", VLLM, *SETS, mode, trace(tmp_path, "r2", [(0, 512, 1)]))
    _, both = run(kvtier, tmp_path, "both", VLLM, *SETS, mode, "sim.step_csv=true",
                  trace(tmp_path, "both", [(0, 512, 64), (300, 512, 1)]))
    r1_alone, r2_alone = rows(a1)[0], rows(a2)[0]
    r1, r2 = rows(both)
    delay = float(r1["e2e_s"]) - float(r1_alone["e2e_s"])
    assert float(r2["ttft_s"]) > float(r2_alone["ttft_s"])  # it waits for r1's step in flight
    steps = list(csv.DictReader(open(both / "iterations.csv")))
    mixed = [s for s in steps if int(s["prefill_tokens"]) > 0 and int(s["decode_tokens"]) > 0]
    if batching == "prefill_first":
        assert delay == pytest.approx(float(r2_alone["ttft_s"]), rel=1e-12)
        assert not mixed
    else:
        assert 0 < delay < float(r2_alone["ttft_s"])
        assert len(mixed) == 1


def test_mixed_is_the_default(kvtier, tmp_path):
    req = ('serving.requests={"kind": "synthetic", "requests": 200, "arrival": {"rate_per_s": 6}, '
           '"input": {"mean": 400, "max": 1500}, "output": {"mean": 100, "max": 500}}')
    a, _ = run(kvtier, tmp_path, "default", VLLM, *SETS, req)
    b, _ = run(kvtier, tmp_path, "mixed", VLLM, *SETS, req, 'serving.batching="mixed"')
    assert a == b


def test_prefills_first_hold_decode_back_as_the_load_grows(kvtier, tmp_path):
    # The same Poisson stream: decode steps that wait behind prefill-only
    # iterations give a longer TPOT tail than those batched with them.
    req = ('serving.requests={"kind": "synthetic", "requests": 400, "seed": 1, "arrival": {"rate_per_s": 8}, '
           '"input": {"kind": "constant", "mean": 512}, "output": {"kind": "constant", "mean": 64}}')
    mixed, _ = run(kvtier, tmp_path, "m", VLLM, *SETS, req)
    first, _ = run(kvtier, tmp_path, "f", VLLM, *SETS, req, 'serving.batching="prefill_first"')
    assert first["tpot_s"]["p90"] > mixed["tpot_s"]["p90"]
    assert first["requests"] == mixed["requests"] == 400
    assert first["output_tokens"] == mixed["output_tokens"]
