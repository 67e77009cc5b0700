"""bench/reproduce_flexgen.py's causes of the gaps: every figure is read
from the results it is given, and the words that compare figures (within,
above, waits or not) follow them. Synthetic results, no simulator run."""

import copy
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import reproduce_flexgen as rf  # noqa: E402


def cell(system, model, ratio=1.0, bound="GPU compute (90% busy)", **kw):
    pub = rf.PUBLISHED[system][model]
    r = {"tokens_per_s": pub * ratio, "prefill_s": 250.0, "decode_s": 310.0, "step_s": 10.0, "bound": bound,
         "prefill_bound": "GPU compute (80% busy)", "batch": 144, "weights_streamed_GB": 0.0, "steps": 31,
         "gpu_batches": 8, "hidden_wait_s": 60.0, "hidden_prefill_s": 55.0, "pin_copy_s": 80.0, "pin_decode_s": 77.5,
         "prefill_write_wait_s": 0.0, "prefill_staging_peak_GB": 0.5}
    r.update(kw)
    return r


def results():
    res = {}
    for cal in rf.CALIBRATIONS:
        for system, _ in rf.SYSTEMS:
            for model, _ in rf.MODELS:
                res[(cal, system, model)] = cell(system, model, 1.1)
    res[("fitted", "flexgen", "opt-30b")]["bound"] = "CPU attention (78% busy)"
    res[("fitted", "flexgen", "opt-175b")] = cell("flexgen", "opt-175b", 0.2, "ssd.read (100% busy)", step_s=1720.0,
                                                  prefill_s=2364.0, batch=256)
    res[("datasheet", "flexgen", "opt-30b")]["bound"] = "pcie_gpu:root->gpu (72% busy)"
    return res


def test_figures_come_from_the_results():
    res = results()
    text = rf.causes(res, list(rf.CALIBRATIONS))
    assert "{" not in text and " - " not in text, text
    assert "55 s in all" in text  # the hidden states' trips in prefill
    assert "0.50 GB of it at most" in text
    assert "2.5 s a step" in text  # 77.5 s of pinning copies over 31 steps
    assert "FlexGen OPT-175B is 5.0x low" in text
    assert "CPU attention at FlexGen's fitted 12.3 GFLOP/s bounds decode" in text
    assert "bound by the weight stream over PCIe (1.1x)" in text
    res[("fitted", "flexgen", "opt-30b")]["hidden_prefill_s"] = 48.0
    assert "48 s in all" in rf.causes(res, list(rf.CALIBRATIONS))


def test_words_follow_the_figures():
    res = results()
    text = rf.causes(res, list(rf.CALIBRATIONS))
    assert "and no layer waits for earlier writes" in text
    moved = copy.deepcopy(res)
    moved[("fitted", "flexgen", "opt-30b")]["prefill_write_wait_s"] = 10.0
    moved[("fitted", "flexgen", "opt-6.7b")]["tokens_per_s"] *= 1.5
    moved[("fitted", "flexgen", "opt-30b")]["prefill_s"] = 150.0  # below the cost model's prefill
    text = rf.causes(moved, list(rf.CALIBRATIONS))
    assert "so part of each layer waits for earlier writes (10 s in all" in text
    assert "FlexGen OPT-6.7B is 65% high, outside" in text
    assert "below the cost model's" in text


def test_missing_timelines_and_one_calibration():
    res = results()
    for r in res.values():
        r.update(bound="-", prefill_bound="-", hidden_prefill_s=None, pin_decode_s=None)
    text = rf.causes(res, list(rf.CALIBRATIONS))
    assert "(- s in all" in text and "bound not read" in text
    fitted = {k: v for k, v in results().items() if k[0] == "fitted"}
    text = rf.causes(fitted, ["fitted"])
    assert "Datasheet calibration" not in text and "datasheet:" not in text
