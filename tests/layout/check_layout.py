#!/usr/bin/env python3
"""sim/ by ownership: each folder includes only the folders it may
(docs/architecture.md), SimGrid only in sim/platform/, CLI11 and
fork/exec only in sim/app/. Prints every breach and exits 1 if any;
with --graph, prints the folder-level include graph instead."""
import pathlib
import re
import sys

ALLOWED = {
    "app": {"app", "cluster", "serving", "engine", "kv", "platform", "replay", "core"},
    "cluster": {"cluster", "serving", "engine", "kv", "platform", "replay", "core"},
    "serving": {"serving", "engine", "kv", "platform", "replay", "core"},
    "engine": {"engine", "kv", "platform", "core"},
    "kv": {"kv", "core"},
    "platform": {"platform", "core"},
    "replay": {"replay"},
    "core": {"core"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SIMGRID = re.compile(r'^\s*#\s*include\s*[<"](simgrid/|xbt/)')
# A SimGrid name in code (sg4:: is platform.h's alias): the header alone
# would not stop a call through another header's include.
SIMGRID_CALL = re.compile(r'\b(sg4|simgrid)::')
CLI11 = re.compile(r'^\s*#\s*include\s*[<"]CLI/')
FORK = re.compile(r'\b(fork|execv|execvp|execve|posix_spawn|waitpid)\s*\(')


def main():
    root = pathlib.Path(__file__).resolve().parents[2]
    sim = root / "sim"
    breaches, edges = [], {}
    loose = [p for p in sim.iterdir() if p.is_file()]
    for p in loose:
        breaches.append(f"{p.relative_to(root)}: a file of sim/ outside its folders")
    for p in sorted(sim.rglob("*")):
        if p.suffix not in (".h", ".cpp") or p.parent == sim:
            continue
        folder = p.relative_to(sim).parts[0]
        rel = p.relative_to(root)
        if folder not in ALLOWED:
            breaches.append(f"{rel}: sim/{folder}/ is not one of its folders")
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1).startswith("sim/"):
                to = m.group(1).split("/")[1]
                edges.setdefault(folder, set()).add(to)
                if to not in ALLOWED[folder]:
                    breaches.append(f"{rel}:{n}: sim/{folder}/ may not include {m.group(1)}")
            if SIMGRID.match(line) and folder != "platform":
                breaches.append(f"{rel}:{n}: SimGrid header outside sim/platform/")
            if SIMGRID_CALL.search(line.split("//")[0]) and folder != "platform":
                breaches.append(f"{rel}:{n}: SimGrid call outside sim/platform/")
            if CLI11.match(line) and folder != "app":
                breaches.append(f"{rel}:{n}: CLI11 outside sim/app/")
            if FORK.search(line.split("//")[0]) and folder != "app":
                breaches.append(f"{rel}:{n}: process creation outside sim/app/")
    if "--graph" in sys.argv:
        for f in ALLOWED:
            print(f"{f} -> {', '.join(sorted(edges.get(f, set()) - {f})) or '(nothing)'}")
        return 0
    for b in breaches:
        print(b)
    print(f"check_layout: {len(breaches)} breach(es)")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
