"""The calibration harness (docs/calibration.md) without a GPU: kvtier_calibrate
skips with exit 77, and kvtier_fit_calibration turns a synthetic measurement
into a calibration file that `kvtier run` accepts."""

import json
import os
import shutil
import subprocess

import pytest

from conftest import DEFAULT_CONFIG, ROOT, kvtier_binary

HARDWARE = ROOT / "configs" / "hardware" / "rtx4090_dram_nvme.json"


def tool(name):
    """build/cuda_validate/<name>, next to the kvtier binary ctest names."""
    return kvtier_binary().parent / "cuda_validate" / name


def run(args, cwd, timeout=120):
    return subprocess.run([str(a) for a in args], cwd=str(cwd), capture_output=True, text=True, timeout=timeout)


def gpu_visible():
    if not shutil.which("nvidia-smi"):
        return False
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return p.returncode == 0 and "GPU " in p.stdout


def synthetic_measurement(latency_us=9.5, h2d_GBps=24.0, d2h_GBps=26.5, launch_us=4.0, kernel_GBps=900.0):
    def copy(gbps):
        samples = []
        s = 4096
        while s <= 1 << 30:
            t = latency_us + s / (gbps * 1e3)
            samples.append({"bytes": s, "median_us": t, "times_us": [t, t * 1.2, t * 0.999]})
            s *= 4
        return {"kind": "copy", "samples": samples}

    kv = [{"bytes": 4096 * 4 ** k, "times_us": [launch_us + 4096 * 4 ** k / (kernel_GBps * 1e3)]} for k in range(11)]
    return {
        "format": "kvtier-measurement",
        "version": 1,
        "date": "2025-01-01T00:00:00Z",
        "host": "testhost",
        "device": {"name": "Synthetic GPU", "driver_version": 13000, "runtime_version": 13000},
        "probes": {"h2d_pinned": copy(h2d_GBps), "d2h_pinned": copy(d2h_GBps),
                   "kv_read": {"kind": "kernel", "samples": kv}},
    }


@pytest.fixture
def fit_tool():
    t = tool("kvtier_fit_calibration")
    if not (t.is_file() and os.access(t, os.X_OK)):
        pytest.skip("kvtier_fit_calibration not built at %s (configured with KVTIER_CUDA=OFF?)" % t)
    return t


def test_calibrate_without_gpu_exits_77_and_writes_nothing(tmp_path):
    t = tool("kvtier_calibrate")
    if not (t.is_file() and os.access(t, os.X_OK)):
        pytest.skip("kvtier_calibrate not built at %s: nvcc was not found when configuring (a CUDA-less build)" % t)
    if gpu_visible():
        pytest.skip("a GPU is visible here: this test checks the no-GPU path (run cuda_validate/run_on_gpu.sh instead)")
    out = tmp_path / "m.json"
    p = run([t, "--out", out], tmp_path)
    assert p.returncode == 77, (p.returncode, p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtier_calibrate: no CUDA device: skipped"), p.stdout
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_run_on_gpu_skips_before_building_without_a_gpu(tmp_path):
    """Without a GPU device the calibration script says it skipped and builds
    nothing: no build folder, exit 0."""
    import glob
    if gpu_visible() or glob.glob("/dev/nvidia[0-9]*"):
        pytest.skip("a GPU device is present: run cuda_validate/run_on_gpu.sh itself")
    env = dict(os.environ, OUT=str(tmp_path / "out"), KVTIER_GPU_BUILD=str(tmp_path / "build-gpu"))
    p = subprocess.run(["bash", str(ROOT / "cuda_validate" / "run_on_gpu.sh")], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert p.stdout.strip().splitlines() == [
        "run_on_gpu: skipped: no GPU on this machine (nvidia-smi lists none, no /dev/nvidia0), nothing built or "
        "measured (this is the expected outcome without a GPU)"], p.stdout
    assert not (tmp_path / "build-gpu").exists()


def test_calibrate_rejects_bad_options(tmp_path):
    t = tool("kvtier_calibrate")
    if not (t.is_file() and os.access(t, os.X_OK)):
        pytest.skip("kvtier_calibrate not built at %s: nvcc was not found when configuring" % t)
    assert run([t, "--out", tmp_path / "m.json", "--reps", "0"], tmp_path).returncode == 2
    assert run([t, "--out", tmp_path / "m.json", "--probes", "h2d_pinned,nope"], tmp_path).returncode == 2
    assert run([t], tmp_path).returncode == 2
    assert not (tmp_path / "m.json").exists()


def test_fit_output_is_accepted_by_kvtier_run(kvtier, fit_tool, tmp_path):
    m = tmp_path / "measurement.json"
    m.write_text(json.dumps(synthetic_measurement()))
    cal = tmp_path / "calibration.json"
    p = run([fit_tool, m, "--out", cal, "--gpu", "gpu", "--link", "pcie_gpu", "--hardware", HARDWARE], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stdout
    c = json.loads(cal.read_text())
    assert str(m) in c["source"] and "Synthetic GPU" in c["source"] and "2025-01-01" in c["source"]
    link = c["links"]["pcie_gpu"]
    big = link["forward_GBps"]["points"][-1]
    assert big[0] == 1 << 30 and big[1] == pytest.approx(24.0, rel=0.01)
    assert link["backward_GBps"]["points"][-1][1] == pytest.approx(26.5, rel=0.01)
    assert link["latency_us"][0][1] == pytest.approx(9.5, rel=0.01)
    assert "attention_us" in c["devices"]["gpu"]
    assert not [f for f in tmp_path.iterdir() if ".tmp." in f.name]

    out = tmp_path / "out"
    r = kvtier("run", DEFAULT_CONFIG, "--out", out, "--set", "hardware.calibration=%s" % cal,
               "--set", "workload.decode_steps=4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "result.json").read_text())
    hw = result["config"]["hardware"]
    assert hw["calibration"] == str(cal)
    assert "forward_GBps" in hw["links"]["pcie_gpu"]["curves"]
    assert "attention_us" in hw["devices"]["gpu"]["curves"]


def expect_fit_error(fit_tool, tmp_path, measurement_text, must_contain):
    m = tmp_path / "measurement.json"
    m.write_text(measurement_text)
    cal = tmp_path / "calibration.json"
    p = run([fit_tool, m, "--out", cal], tmp_path)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvtier_fit_calibration: error: "), p.stderr
    assert str(m) in lines[0], lines[0]
    for s in must_contain:
        assert s in lines[0], (s, lines[0])
    assert not cal.exists()


def test_fit_malformed_json(fit_tool, tmp_path):
    expect_fit_error(fit_tool, tmp_path, '{"format": "kvtier-measurement", ', ["not valid JSON"])


def test_fit_missing_probe(fit_tool, tmp_path):
    m = synthetic_measurement()
    del m["probes"]["kv_read"]
    expect_fit_error(fit_tool, tmp_path, json.dumps(m), ["probes.kv_read", "missing"])


def test_fit_bad_sample(fit_tool, tmp_path):
    m = synthetic_measurement()
    m["probes"]["d2h_pinned"]["samples"][3]["times_us"] = []
    expect_fit_error(fit_tool, tmp_path, json.dumps(m), ["probes.d2h_pinned.samples[3].times_us"])


def test_fit_missing_file(fit_tool, tmp_path):
    p = run([fit_tool, tmp_path / "absent.json", "--out", tmp_path / "c.json"], tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith("kvtier_fit_calibration: error: %s: cannot open" % (tmp_path / "absent.json"))


def test_fit_link_not_in_hardware(fit_tool, tmp_path):
    m = tmp_path / "measurement.json"
    m.write_text(json.dumps(synthetic_measurement()))
    p = run([fit_tool, m, "--out", tmp_path / "c.json", "--link", "pcie_nope", "--hardware", HARDWARE], tmp_path)
    assert p.returncode == 2
    assert "no link named 'pcie_nope'" in p.stderr and len(p.stderr.splitlines()) == 1
