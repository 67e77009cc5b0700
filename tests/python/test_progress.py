"""Progress of a long run: a line on the terminal while it runs, rewritten in
place and cleared at the end; nothing when stderr is not a terminal or with
-q, and the same result.json either way."""

import json
import os
import pty
import select
import subprocess
import time

from conftest import DEFAULT_CONFIG, ROOT, kvtier_binary

# A short run, with the line drawn from the start (KVTIER_PROGRESS_AFTER_S=0)
# instead of after 2 s, so that the test is quick even under a sanitizer.
LONG = ["--set", "workload.decode_steps=400", "--set", "workload.warmup_steps=1"]
ENV = dict(os.environ, KVTIER_PROGRESS_AFTER_S="0")


def run_in_terminal(args, cwd):
    """Runs kvtier with stdout and stderr on a pseudo-terminal; returns (rc, text)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(kvtier_binary())] + args, cwd=cwd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL,
                         env=ENV)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1.0)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=60)
    os.close(master)
    return rc, out.decode("utf-8", "replace")


def test_a_long_run_shows_progress_on_a_terminal_and_clears_it(tmp_path):
    rc, text = run_in_terminal(["run", str(DEFAULT_CONFIG), "--out", "a"] + LONG, tmp_path)
    assert rc == 0, text
    assert "kvtier: decode " in text and "% (" in text and " of 400 steps)" in text, text[-2000:]
    assert "\r\x1b[K" in text  # the line is cleared before the summary
    assert "kvtier: wrote" in text


def test_no_progress_when_piped_or_quiet(tmp_path):
    r = subprocess.run([str(kvtier_binary()), "run", str(DEFAULT_CONFIG), "--out", "b"] + LONG, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=ENV)
    assert r.returncode == 0, r.stderr
    assert "kvtier: decode" not in r.stderr and "\r" not in r.stderr
    rc, text = run_in_terminal(["run", str(DEFAULT_CONFIG), "--out", "c", "-q"] + LONG, tmp_path)
    assert rc == 0 and text == "", text[-2000:]
    # What a run writes does not depend on where its progress went.
    b = json.loads((tmp_path / "b" / "result.json").read_text())
    c = json.loads((tmp_path / "c" / "result.json").read_text())
    assert b["metrics"] == c["metrics"]


def test_validate_shows_its_stages_on_a_terminal(tmp_path):
    """`kvtier validate` shows the stage it is at (measurement, held-out
    paths, storage, each pipeline scenario) and clears the line; piped, not."""
    m = ROOT / "configs" / "hardware" / "measurements" / "host_vm_2026-12-01.json"
    rc, text = run_in_terminal(["validate", "--paths-only", "--measurement", str(m), "--out", "v"], tmp_path)
    assert rc in (0, 1), text[-2000:]  # 1: a path past --path-tolerance; the progress is what is checked
    assert "kvtier: validate " in text and " of 1 stages)" in text, text[-2000:]
    assert "\r\x1b[K" in text
    r = subprocess.run([str(kvtier_binary()), "validate", "--paths-only", "--measurement", str(m), "--out", "w"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=ENV)
    assert "kvtier: validate" not in r.stderr and "\r" not in r.stderr, r.stderr


def test_serving_shows_its_way_through_the_arrivals_simulated_time(tmp_path):
    mooncake = ROOT / "configs" / "serving" / "mooncake.json"
    rc, text = run_in_terminal(["run", str(mooncake), "--out", "s", "--set", "serving.limit=300"], tmp_path)
    assert rc == 0, text
    assert "kvtier: serving " in text and "simulated seconds of arrivals)" in text, text[-2000:]
    assert "\r\x1b[K" in text and "kvtier: wrote" in text
