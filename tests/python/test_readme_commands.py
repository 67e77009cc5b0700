"""Every command of README.md (each sh block, the Use section's included)
runs as written, in order, in a fresh folder laid out like a clone
(configs, traces, plots, bench, docs and the built binary; ../shared beside
it), and writes what it says it writes.

The slow ones run on a smaller input, each with its reason (SHRINK); the
few that cannot run here are skipped with theirs (SKIP). A command that
neither list names runs exactly as the README has it, so a new line in the
Use section is tested the day it is written.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SANITIZED, kvtier_binary

# (pattern the command matches, what is appended to it, why).
SHRINK = [
    (r"^build/kvtier run configs/serving/mooncake\.json", "--set serving.limit=1500",
     "the first 1,500 of the trace's 12,031 requests: the whole trace takes 8-25 s"),
    (r"^build/kvtier sweep configs/sweeps/mooncake_load\.json", "--set serving.limit=400",
     "eight points of the whole trace take about a minute; 400 requests each"),
    (r"^build/kvtier sweep configs/sweeps/prefetch_depth\.json", "--set workload.decode_steps=4",
     "its points at 4 decode steps instead of 64"),
    (r"capture\.py", None, "8 decode steps instead of 224 (numpy forward passes)"),
    (r"^python3 bench/judge_predictors\.py", "--doc out/policies.md",
     "writes its table to out/ instead of docs/policies.md"),
    (r"^build/kvtier sweep configs/sweeps/mooncake_prefix_cache\.json", "--set serving.limit=400",
     "five points of the whole trace take about a minute; 400 requests each"),
    (r"^python3 bench/reproduce_distserve\.py", "--requests 100 --doc out/reproductions.md",
     "100 requests a rate instead of 1,000, its section written to out/ instead of docs/reproductions.md"),
    (r"^build/kvtier run configs/cluster/", "--set serving.limit=300",
     "the first 300 of the trace's requests: the whole trace on several tensor-parallel instances takes about a minute"),
]
SKIP = [
    (r"^python3 bench/reproduce\.py", "about 3 minutes on 2 cores; `ctest -L repro` holds the orderings it reports"),
    (r"^ctest ", "ctest is what runs this suite: the README's test command and its labels"),
    (r"bench/engine_speed\.py", "times the engine on this host; a benchmark, run by hand"),
    (r"^build/kvtier validate", "measures this host's disk and memory for minutes; a benchmark, run by hand"),
    (r"^cuda_validate/run_on_gpu\.sh", "needs a GPU; tests/python/test_cuda_validate.py checks its no-GPU path"),
    (r"^\.ci/setup", "installs packages and builds: what gave this suite its binary"),
    (r"^cmake ", "builds; the suite runs on the binary it built"),
    (r"^tests/fuzz/run\.sh", "the fuzz targets, built and run by .ci/run after the suite"),
    (r"bench/serving_checks\.py", "runs the Mooncake trace layer by layer and twice more (about a minute); a benchmark"),
]
# Folders a clone has that the commands read (bench/ finds the repository from its own path).
TREE = ["configs", "traces", "plots", "bench", "models", "policies", "tests/data"]


def readme_commands():
    """Every sh block's commands in README order, continuation lines joined, comments cut."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)
    assert blocks, "README.md has no sh blocks"
    cmds, cur = [], ""
    for block in blocks:
        for line in block.splitlines():
            cur += line.rstrip()
            if cur.endswith("\\"):
                cur = cur[:-1] + " "
                continue
            cmd = re.sub(r"\s+#.*$", "", cur).strip()
            if cmd:
                cmds.append(re.sub(r"\s+", " ", cmd))
            cur = ""
    return cmds


# Left to the release build under the sanitizers, each with its reason.
SKIP_SANITIZED = [
    (r"^python3 bench/reproduce_distserve\.py",
     "dozens of cluster runs whatever the requests per point (about 3 minutes under the sanitizers); "
     "tests/python/test_cluster.py runs the disaggregated cluster under them"),
]


def plan(cmd):
    """(command to run, reason it differs or is skipped, skipped?)."""
    for pat, why in SKIP + (SKIP_SANITIZED if SANITIZED else []):
        if re.search(pat, cmd):
            return cmd, why, True
    for pat, extra, why in SHRINK:
        if re.search(pat, cmd):
            if "capture.py" in cmd:
                return cmd.replace("--steps 224", "--steps 8"), why, False
            return cmd + " " + extra, why, False
    return cmd, None, False


def outputs_named(cmd):
    """Files and folders the command names as its outputs."""
    args = shlex.split(cmd)
    out = []
    for flag in ("--out", "-o", "--table", "--timeline", "--json"):
        for i, a in enumerate(args[:-1]):
            if a == flag:
                out.append(args[i + 1])
    return out


COMMANDS = readme_commands()


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A folder laid out as a clone: the repository's inputs linked, docs copied
    (bench scripts rewrite tables there), build/kvtier the binary under test."""
    base = tmp_path_factory.mktemp("readme")
    repo = base / "kvtier"
    repo.mkdir()
    for d in TREE:
        (repo / d).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(ROOT / d, repo / d)
    shutil.copytree(ROOT / "docs", repo / "docs")
    (repo / "build").mkdir()
    os.symlink(kvtier_binary(), repo / "build" / "kvtier")
    os.symlink(ROOT.parent / "shared", base / "shared")
    UNTRACKED_BEFORE.update(untracked_files())
    return repo


UNTRACKED_BEFORE = set()


def untracked_files():
    """Files in the source tree git would list as new (not ignored): the
    inputs are linked into the clone, so what a command writes beside them
    lands here."""
    p = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
                       capture_output=True, text=True)
    assert p.returncode == 0, "the tests run in a git checkout (a clone): %s" % p.stderr
    return {l[3:] for l in p.stdout.splitlines() if l.startswith("?? ")}


def test_readme_commands_are_found():
    use = re.search(r"^## Use\n+```sh\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    assert use and "build/kvtier run configs/default.json" in COMMANDS and len(COMMANDS) >= 40


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=[c.split("#")[0][:60] for c in COMMANDS])
def test_readme_command(clone, index):
    cmd, why, skipped = plan(COMMANDS[index])
    if skipped:
        pytest.skip("README command not run: %s (%s)" % (COMMANDS[index][:60], why))
    if "../shared/" in cmd and not (ROOT.parent / "shared" / "traces").is_dir():
        pytest.fail("../shared/traces is missing beside the repository: the README's request-trace commands need it")
    env = dict(os.environ, KVTIER_BINARY=str(clone / "build" / "kvtier"))
    # The README says python3 and /usr/bin/python3: both mean the interpreter with matplotlib here.
    run = re.sub(r"^(/usr/bin/)?python3 ", shlex.quote(sys.executable) + " ", cmd)
    p = subprocess.run(["bash", "-c", run], cwd=str(clone), capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, "%s\nexit %d\n%s" % (cmd, p.returncode, (p.stderr or p.stdout)[-2000:])
    for out in outputs_named(cmd):
        assert (clone / out).exists(), "%s: %s not written" % (cmd, out)
    for wrote in re.findall(r"wrote (?:\d+ [\w ]+?(?:\([^)]*\) )?to )?(\S+)", p.stdout + p.stderr):
        path = wrote.rstrip(".,:;")
        if not os.path.isabs(path):
            path = str(clone / path)
        assert os.path.exists(path), "%s: says it wrote %s, which is not there" % (cmd, wrote)


def test_readme_commands_leave_nothing_outside_out(clone):
    """What the commands write goes under out/ (which .gitignore covers), never
    beside the sources; runs after every command above."""
    expected = {"out", "build", "docs"} | {d.split("/")[0] for d in TREE}
    stray = sorted(p.name for p in clone.iterdir() if p.name not in expected)
    assert not stray, "README commands wrote into the repository's top folder: %s" % ", ".join(stray)
    assert "out/" in (ROOT / ".gitignore").read_text().split()
    # Beside the linked inputs: whatever they wrote there, .gitignore covers.
    new = sorted(untracked_files() - UNTRACKED_BEFORE)
    assert not new, "README commands wrote files .gitignore does not cover: %s" % ", ".join(new[:20])
