"""Shared fixtures for kvtier's Python tests.

The binary comes from $KVTIER_BINARY (ctest sets it), else build/kvtier under
the repository root. Every command runs in a pytest tmp_path so nothing lands
in the repository.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "configs" / "default.json"
PLOTS = ROOT / "plots"


def pytest_configure(config):
    # Tests that hold a measurement of this host (wall time, resident memory) to a
    # tolerance. ctest runs them alone as "python: host timing" (other tests would
    # take the CPUs they measure); the asan preset leaves that test out, since a
    # sanitizer slows and inflates the measured side by its own factor.
    config.addinivalue_line("markers", "host_timing: holds a wall-time or memory measurement of this host")


# Set by ctest for a build under the sanitizers (the asan preset), which run
# every case several times slower: the cases that run a whole study of many
# points, or hundreds of requests to compare two modes, run a smaller one
# there (each says what); the release build runs them whole.
SANITIZED = os.environ.get("KVTIER_SANITIZED") == "1"


def kvtier_binary():
    b = os.environ.get("KVTIER_BINARY") or str(ROOT / "build" / "kvtier")
    return Path(b) if os.path.isabs(b) else ROOT / b


@pytest.fixture(scope="session")
def kvtier():
    """Run kvtier with args (strings or Paths) in cwd; returns CompletedProcess."""
    binary = kvtier_binary()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        pytest.fail("kvtier binary not found at %s: build it (cmake --build build) or set KVTIER_BINARY" % binary)

    def run(*args, cwd, timeout=120):
        return subprocess.run([str(binary)] + [str(a) for a in args], cwd=str(cwd), capture_output=True, text=True,
                              timeout=timeout)

    return run


@pytest.fixture(scope="session")
def plot_script():
    """Run plots/<name> with the interpreter running the tests (Debian's python3 with matplotlib)."""

    def run(name, *args, cwd, timeout=120):
        return subprocess.run([sys.executable, str(PLOTS / name)] + [str(a) for a in args], cwd=str(cwd),
                              capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def default_run(kvtier, tmp_path_factory):
    """One full run of configs/default.json with steps.csv: (out_dir, result dict)."""
    d = tmp_path_factory.mktemp("default_run")
    p = kvtier("run", DEFAULT_CONFIG, "--out", d / "out", "--set", "sim.step_csv=true", cwd=d)
    assert p.returncode == 0, p.stderr
    with open(d / "out" / "result.json") as f:
        return d / "out", json.load(f)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def run_metrics(kvtier, tmp_path, name, config, *sets):
    """`kvtier run config --set ...` into tmp_path/name: its metrics and folder."""
    out = tmp_path / name
    args = ["run", config, "--out", out, "-q"]
    for s in sets:
        args += ["--set", s]
    p = kvtier(*args, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "result.json").read_text())["metrics"], out


def flat(d, prefix=""):
    """A nested dict's leaves keyed by their dotted paths."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out
