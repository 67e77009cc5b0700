#!/usr/bin/env python3
"""`kvtier search SEARCH.json`: the best configuration of a space under
constraints, for a budget of trials (docs/sweep.md, Searches).

Optuna proposes the trials: TPE for one objective, NSGA-II for several,
both seeded and told each constraint's violation (Optuna's constraints_func),
so the search is deterministic. Each round of trials is a sweep: a sweep
file of `points` (one per trial) over the search's base and set, run by
`kvtier sweep` into OUT/trials.jsonl, locally or on Slurm, so every trial is
a sweep point with its resolved configuration in its line and a re-run
finds the trials it already ran. Writes OUT/search.json (every trial, the
best or the Pareto front), OUT/pareto.csv, OUT/best.json (the best feasible
trial's resolved configuration, runnable with kvtier run) and
OUT/pareto.png (plots/kvtier_plot.py pareto).
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import warnings

from search_file import Search, SearchError, metric_value

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROG = "kvtier"


def die(msg, code=2):
    sys.stderr.write("%s: error: %s\n" % (PROG, msg.replace("\n", " ")))
    sys.exit(code)


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def make_study(s):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    cons = (lambda t: t.user_attrs["constraints"]) if s.constraints else None
    if len(s.objectives) == 1:
        sampler = optuna.samplers.TPESampler(seed=s.seed, n_startup_trials=min(10, max(1, s.trials // 3)),
                                             constraints_func=cons)
    else:
        sampler = optuna.samplers.NSGAIISampler(seed=s.seed, population_size=min(50, max(4, s.trials // 4)),
                                                constraints_func=cons)
    return optuna.create_study(sampler=sampler, directions=[d for _, d in s.objectives])


class Trials:
    """The sweep lines of the search's trials, found by their overrides."""

    def __init__(self, path):
        self.path, self.at, self.by = path, 0, {}

    def find(self, overrides):
        if os.path.exists(self.path):
            with open(self.path) as f:
                f.seek(self.at)
                for line in f:
                    if not line.endswith("\n"):
                        break
                    self.at += len(line.encode())
                    j = json.loads(line)
                    self.by[json.dumps(j.get("overrides"), sort_keys=True)] = j
        return self.by.get(json.dumps(json.loads(json.dumps(overrides)), sort_keys=True))


def sweep_error(p, sweep_file, search_file, what):
    """kvtier sweep's one-line error, naming the search file instead of its generated sweep."""
    sys.stderr.write(p.stderr.replace(sweep_file, "%s (%s)" % (search_file, what)))
    sys.exit(2)


def check_corners(s, a):
    """Every corner of the space (each number axis at low and high, every
    choice) validated as a sweep before anything is written: a space that
    reaches invalid configurations is bad input."""
    import tempfile
    grid = {ax.path: ax.choices if ax.choices is not None else
            sorted({int(ax.low) if ax.int else ax.low, int(ax.high) if ax.int else ax.high}) for ax in s.axes}
    with tempfile.TemporaryDirectory(prefix="kvtier-search-") as tmp:
        f = os.path.join(tmp, "corners.json")
        with open(f, "w") as fh:
            json.dump({"name": s.name, "base": s.base, "set": s.set, "grid": grid}, fh)
        p = subprocess.run([a.kvtier, "sweep", f, "--dry-run", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if p.returncode != 0:
            sweep_error(p, f, a.search, "the space's corners")


def run_round(s, a, out, number, points):
    """One round's trials as a sweep into OUT/trials.jsonl; exits 2 on bad input."""
    rounds = os.path.join(out, "rounds")
    os.makedirs(rounds, exist_ok=True)
    f = os.path.join(rounds, "round-%03d.json" % number)
    write_atomic(f, json.dumps({"name": s.name, "base": s.base, "set": s.set, "points": points}, indent=1) + "\n")
    cmd = [a.kvtier, "sweep", f, "--out", os.path.join(out, "trials.jsonl"), "-q"]
    if a.jobs:
        cmd += ["--jobs", str(a.jobs)]
    cmd += a.sweep_args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode == 2:
        sweep_error(p, f, a.search, "round %d of trials" % number)
    if p.returncode not in (0, 1):
        die("search %s: kvtier sweep %s exited %d: %s" % (s.name, f, p.returncode, p.stderr.strip()[-400:]), 1)
    if not a.quiet and p.returncode == 1:
        sys.stderr.write(p.stderr)


def search(s, a, out):
    import optuna
    study, lines, records = make_study(s), Trials(os.path.join(out, "trials.jsonl")), []
    batch = s.batch or a.jobs or os.cpu_count() or 1
    number = 0
    while len(records) < s.trials:
        asked = [study.ask() for _ in range(min(batch, s.trials - len(records)))]
        points = [{ax.path: ax.suggest(t) for ax in s.axes} for t in asked]
        run_round(s, a, out, number, points)
        number += 1
        for t, o in zip(asked, points):
            line = lines.find(o)
            result = (line or {}).get("result", {})
            values = [metric_value(result, m) for m, _ in s.objectives]
            rec = {"trial": t.number, "overrides": o, "key": line and line["key"], "metrics": {}}
            if line is None or None in values:
                rec["state"] = "failed"
                study.tell(t, state=optuna.trial.TrialState.FAIL)
            else:
                viol = s.violation(result)
                t.set_user_attr("constraints", viol)
                study.tell(t, values)
                rec.update(state="complete", values=values, feasible=all(v <= 0 for v in viol))
                for m in [m for m, _ in s.objectives] + [c[0] for c in s.constraints]:
                    rec["metrics"][m] = metric_value(result, m)
            records.append(rec)
    return records, lines


def dominates(a, b, dirs):
    better = [(x > y) if d == "maximize" else (x < y) for x, y, d in zip(a, b, dirs)]
    worse = [(x < y) if d == "maximize" else (x > y) for x, y, d in zip(a, b, dirs)]
    return any(better) and not any(worse)


def front(records, s):
    """The feasible trials no other feasible trial dominates, by the first objective."""
    dirs = [d for _, d in s.objectives]
    ok = [r for r in records if r.get("feasible")]
    best = [r for r in ok if not any(dominates(o["values"], r["values"], dirs) for o in ok)]
    seen, uniq = set(), []
    for r in sorted(best, key=lambda r: (r["values"][0] * (-1 if dirs[0] == "maximize" else 1), r["trial"])):
        if r["key"] not in seen:
            seen.add(r["key"])
            uniq.append(r)
    return uniq


def pareto_csv(s, best):
    f = io.StringIO()
    w = csv.writer(f, lineterminator="\n")
    mets = [m for m, _ in s.objectives] + [c[0] for c in s.constraints if c[0] not in [m for m, _ in s.objectives]]
    w.writerow(["trial", "key"] + [ax.path for ax in s.axes] + mets)
    for r in best:
        w.writerow([r["trial"], r["key"]] + [json.dumps(r["overrides"][ax.path]) if ax.choices else
                                            repr(r["overrides"][ax.path]) for ax in s.axes] +
                   [repr(r["metrics"].get(m)) for m in mets])
    return f.getvalue()


def write_outputs(s, a, out, records, lines):
    best = front(records, s)
    doc = {"search_file": a.search, "name": s.name, "base": s.base, "set": s.set, "seed": s.seed,
           "sampler": "TPE" if len(s.objectives) == 1 else "NSGA-II",
           "objectives": [{"metric": m, "direction": d} for m, d in s.objectives],
           "constraints": ["%s%s%r" % c for c in s.constraints], "space": [ax.path for ax in s.axes],
           "trials": records, "pareto": [r["trial"] for r in best],
           "feasible": sum(1 for r in records if r.get("feasible")), "jsonl": os.path.join(out, "trials.jsonl")}
    write_atomic(os.path.join(out, "search.json"), json.dumps(doc, indent=1) + "\n")
    write_atomic(os.path.join(out, "pareto.csv"), pareto_csv(s, best))
    if best:
        cfg = dict(lines.find(best[0]["overrides"])["result"]["config"])
        cfg["name"] = s.name + "_best"
        write_atomic(os.path.join(out, "best.json"), json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "plots", "kvtier_plot.py"), "pareto",
                        os.path.join(out, "search.json"), "-o", os.path.join(out, "pareto")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        die("search %s: the Pareto plot failed: %s" % (s.name, p.stderr.strip()[-300:]), 1)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("search")
    ap.add_argument("--kvtier", required=True)
    ap.add_argument("--trials", type=int, help="the budget (default: the file's trials)")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--out", help="folder (default out/<search name>)")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("sweep_args", nargs=argparse.REMAINDER, help="after --: passed to each round's kvtier sweep")
    a = ap.parse_args()
    a.sweep_args = [x for x in a.sweep_args if x != "--"]
    try:
        s = Search(a.search)
    except SearchError as e:
        die(str(e))
    if a.trials is not None:
        if a.trials < 1:
            die("--trials %d: expected at least 1" % a.trials)
        s.trials = a.trials
    out = a.out or os.path.join("out", s.name)
    check_corners(s, a)
    os.makedirs(out, exist_ok=True)
    records, lines = search(s, a, out)
    best = write_outputs(s, a, out, records, lines)
    if not a.quiet:
        feas = sum(1 for r in records if r.get("feasible"))
        print("%s: search %s: %d trials, %d feasible, %d failed; %s" % (
            PROG, s.name, len(records), feas, sum(1 for r in records if r["state"] == "failed"),
            ("best " + ", ".join("%s %.6g" % (m, v) for (m, _), v in zip(s.objectives, best[0]["values"])) +
             " at " + json.dumps(best[0]["overrides"]) + ("; Pareto front of %d" % len(best) if len(best) > 1 else ""))
            if best else "no feasible trial"))
        print("%s: wrote %s, %s, %s" % (PROG, os.path.join(out, "search.json"), os.path.join(out, "pareto.csv"),
                                        os.path.join(out, "pareto.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
