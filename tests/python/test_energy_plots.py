"""The energy figure (kvtier_plot.py breakdown --energy) and the report's
energy table draw the joules result.json reports, split by device."""
import json
import sys

import pytest

from conftest import PLOTS, read_json

sys.path.insert(0, str(PLOTS))
import kvtier_energy as ke  # noqa: E402


def test_energy_breakdown_bars_add_up_to_joules_per_token(default_run, plot_script, tmp_path):
    out, result = default_run
    p = plot_script("kvtier_plot.py", "breakdown", "--energy", out / "result.json", "-o", tmp_path / "e", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "e.png").stat().st_size > 0 and (tmp_path / "e.pdf").stat().st_size > 0
    rows = ke.energy_rows([result])
    e = result["metrics"]["energy"]
    assert sum(j for _, j in rows[0]["parts"]) == pytest.approx(e["J_per_generated_token"])
    devices = {n for n, _ in rows[0]["parts"]}
    assert "gpu" in devices
    assert all(e["devices"][n]["J"] > 0 for n in devices if n != "links")


def test_energy_breakdown_refuses_a_result_without_energy(plot_script, tmp_path):
    old = {"config": {"name": "old"}, "metrics": {"decode_tokens_per_s": 1.0}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    p = plot_script("kvtier_plot.py", "breakdown", "--energy", tmp_path / "old.json", cwd=tmp_path)
    assert p.returncode != 0
    assert "no energy metrics" in p.stderr
    assert not (tmp_path / "energy.png").exists()
