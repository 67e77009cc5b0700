"""A search file (docs/sweep.md, Searches): the space, the objectives and
the constraints of `kvtier search`, read and checked. Bad input raises
SearchError with one line naming the file and the JSON path."""

import json
import math
import os
import re

KEYS = {"name", "base", "set", "space", "objective", "objectives", "constraints", "trials", "seed", "batch",
        "description", "note", "source"}
CONSTRAINT = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*(\S+)\s*$")
DIRECTIONS = ("minimize", "maximize")


class SearchError(Exception):
    pass


def metric_path(text):
    """ttft_s.p99 and metrics.ttft_s.p99 name the same metric; config.PATH is
    a value of the trial's resolved configuration (a capacity to minimise)."""
    return text[len("metrics."):] if text.startswith("metrics.") else text


def metric_value(result, path):
    """The number at a dotted path of a result's metrics (or, for config.PATH,
    of its resolved configuration); None when absent."""
    v = result.get("metrics", {})
    if path.startswith("config."):
        v, path = result.get("config", {}), path[len("config."):]
    for k in path.split("."):
        if not isinstance(v, dict) or k not in v:
            return None
        v = v[k]
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class Axis:
    """One searched path: numbers in [low, high] (int, step, log) or a list of choices."""

    def __init__(self, f, path, spec):
        where = '%s: space["%s"]' % (f, path)
        if not isinstance(spec, dict):
            raise SearchError(where + ': expected {"low": L, "high": H} or {"choices": [...]}')
        self.path = path
        self.choices = spec.get("choices")
        if self.choices is not None:
            if not isinstance(self.choices, list) or not self.choices or set(spec) - {"choices"}:
                raise SearchError(where + ": expected a non-empty list of choices (and nothing else)")
            self.texts = [json.dumps(c, sort_keys=True) for c in self.choices]
            return
        unknown = set(spec) - {"low", "high", "int", "step", "log"}
        if unknown:
            raise SearchError("%s: %s: unknown key (expected low, high, int, step, log, or choices)" %
                              (where, sorted(unknown)[0]))
        lo, hi = spec.get("low"), spec.get("high")
        num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not (num(lo) and num(hi)) or lo > hi:
            raise SearchError(where + ": expected numbers low <= high")
        self.low, self.high = lo, hi
        self.int = bool(spec.get("int", False))
        self.step = spec.get("step")
        self.log = bool(spec.get("log", False))
        if self.step is not None and (not num(self.step) or self.step <= 0):
            raise SearchError(where + ".step: expected a positive number")
        if self.log and (lo <= 0 or self.step is not None):
            raise SearchError(where + ".log: needs low > 0 and no step")
        if self.int and not (float(lo).is_integer() and float(hi).is_integer()):
            raise SearchError(where + ": int axis: expected integer low and high")

    def suggest(self, trial):
        if self.choices is not None:
            return json.loads(trial.suggest_categorical(self.path, self.texts))
        if self.int:
            return trial.suggest_int(self.path, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.path, self.low, self.high, step=self.step, log=self.log)


class Search:
    def __init__(self, path):
        self.file = path
        try:
            with open(path) as fh:
                doc = json.load(fh)
        except OSError as e:
            raise SearchError("%s: cannot read: %s" % (path, e.strerror))
        except ValueError as e:
            raise SearchError("%s: not JSON: %s" % (path, e))
        if not isinstance(doc, dict):
            raise SearchError(path + ": expected a JSON object at the top level")
        for k in doc:
            if k not in KEYS and not k.startswith("_"):
                raise SearchError("%s: %s: unknown key in a search file (expected %s)" %
                                  (path, k, ", ".join(sorted(KEYS - {"description", "note", "source"}))))
        self.name = doc.get("name", os.path.splitext(os.path.basename(path))[0])
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise SearchError(path + ": name: expected a non-empty string usable as a folder name")
        self.base = self._base(doc)
        self.set = doc.get("set", {})
        if not isinstance(self.set, dict):
            raise SearchError(path + ': set: expected an object {"dotted.path": value}')
        space = doc.get("space")
        if not isinstance(space, dict) or not space:
            raise SearchError(path + ': space: required, an object {"dotted.path": {"low": L, "high": H} | {"choices": [...]}}')
        self.axes = [Axis(path, p, s) for p, s in sorted(space.items())]
        self.objectives = self._objectives(doc)
        self.constraints = [self._constraint(i, c) for i, c in enumerate(self._list(doc, "constraints"))]
        self.trials = self._count(doc, "trials", 20)
        self.seed = self._count(doc, "seed", 1, low=0)
        self.batch = self._count(doc, "batch", 0, low=0)

    def _base(self, doc):
        b = doc.get("base")
        if not isinstance(b, str):
            raise SearchError(self.file + ": base: required, a config file name (as a sweep's base)")
        here = os.path.dirname(os.path.abspath(self.file))
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for cand in (b, os.path.join(here, b), os.path.join(root, b)):
            if os.path.isfile(cand):
                return os.path.abspath(cand)
        raise SearchError("%s: base: file '%s' not found (looked in the current directory, next to %s and in %s)" %
                          (self.file, b, self.file, root))

    def _list(self, doc, key):
        v = doc.get(key, [])
        if not isinstance(v, list):
            raise SearchError("%s: %s: expected a list" % (self.file, key))
        return v

    def _count(self, doc, key, default, low=1):
        v = doc.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise SearchError("%s: %s: expected an integer >= %d" % (self.file, key, low))
        return v

    def _objectives(self, doc):
        if ("objective" in doc) == ("objectives" in doc):
            raise SearchError(self.file + ': objective: give one objective {"metric": M, "direction": "maximize"} '
                              "or a list of them as objectives")
        objs = [doc["objective"]] if "objective" in doc else doc["objectives"]
        if not isinstance(objs, list) or not objs:
            raise SearchError(self.file + ": objectives: expected a non-empty list")
        out = []
        for i, o in enumerate(objs):
            where = "%s: %s" % (self.file, "objective" if "objective" in doc else "objectives[%d]" % i)
            if not isinstance(o, dict) or not isinstance(o.get("metric"), str) or set(o) - {"metric", "direction"}:
                raise SearchError(where + ': expected {"metric": "dotted.metric", "direction": "minimize" | "maximize"}')
            d = o.get("direction", "minimize")
            if d not in DIRECTIONS:
                raise SearchError(where + ".direction: expected minimize or maximize")
            out.append((metric_path(o["metric"]), d))
        return out

    def _constraint(self, i, c):
        m = CONSTRAINT.match(c) if isinstance(c, str) else None
        try:
            bound = float(m.group(3)) if m else None
        except ValueError:
            bound = None
        if bound is None or not math.isfinite(bound):
            raise SearchError('%s: constraints[%d]: expected "metric<=number" (or >=, <, >), e.g. "ttft_s.p99<=2"' %
                              (self.file, i))
        return metric_path(m.group(1)), m.group(2), bound

    def violation(self, result):
        """Optuna's constraint values (<= 0 where met), one per constraint; a missing metric violates."""
        out = []
        for path, op, bound in self.constraints:
            v = metric_value(result, path)
            if v is None:
                out.append(1.0)
            elif op in ("<=", "<"):
                out.append(v - bound if op == "<=" or v != bound else 1e-12)
            else:
                out.append(bound - v if op == ">=" or v != bound else 1e-12)
        return out
