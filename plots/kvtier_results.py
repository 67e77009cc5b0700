"""Shared helpers for the kvtier plotting scripts: loading results, naming
runs, classifying links, and writing output files atomically.

A kvtier result is the JSON object that `kvtier run` writes to result.json:
{"kvtier_version", "seed", "config" (fully resolved), "metrics"}. The metric
names are the contract in docs/results.md.
"""

import csv
import json
import math
import os
import sys
import tempfile

try:
    import matplotlib
except ImportError:  # e.g. a pyenv python3 first on PATH
    sys.stderr.write("%s: error: matplotlib is not installed for %s; run with /usr/bin/python3 "
                     "(Debian: apt install python3-matplotlib)\n" % (os.path.basename(sys.argv[0]), sys.executable))
    sys.exit(1)

matplotlib.use("Agg")  # never a display: these scripts run in CI and over ssh

# Device kinds whose media links count as SSD traffic.
STORAGE_KINDS = {"nvme", "smartssd", "ssd"}
# Config keys that do not change what a run computes (kept out of run labels).
IGNORED_CONFIG_KEYS = {"sim.out_dir", "sim.timeline", "sim.step_csv"}


class ResultError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


def die(prog, err):
    """Print one error line and exit with status 2 (bad input)."""
    msg = " ".join(str(err).split())  # exactly one line
    sys.stderr.write("%s: error: %s\n" % (prog, msg))
    sys.exit(2)


def check_result(obj, where):
    if not isinstance(obj, dict) or not isinstance(obj.get("metrics"), dict):
        raise ResultError('%s: not a kvtier result (no "metrics" object)' % where)
    return obj


def load_result(path):
    """One result.json."""
    return check_result(_load_json(path), path)


def _read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise ResultError("%s: no such file" % path)
    except IsADirectoryError:
        raise ResultError("%s: is a folder, expected a file" % path)
    except UnicodeDecodeError as e:
        raise ResultError("%s: byte %d: not UTF-8 text (expected a kvtier result, JSON lines or CSV)" % (path, e.start))
    except OSError as e:
        raise ResultError("%s: cannot read: %s" % (path, e.strerror or e))


def json_loads(text, where):
    """json.loads with every failure as a ResultError naming `where`: invalid
    JSON, and numbers Python will not parse (an integer past its digit limit)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ResultError("%s:%d:%d: invalid JSON: %s" % (where, e.lineno, e.colno, e.msg))
    except (ValueError, RecursionError) as e:
        raise ResultError("%s: cannot read its JSON: %s" % (where, " ".join(str(e).split())[:200]))


def _load_json(path):
    return json_loads(_read_text(path), path)


def load_results(path):
    """A result.json (one JSON object) or a sweep's JSON-lines file (one result
    object per line; a line may also wrap it as {"result": {...}}). Returns a
    list of (label_hint, result) where label_hint names the source."""
    text = _read_text(path)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        obj = None
    except (ValueError, RecursionError) as e:
        raise ResultError("%s: cannot read its JSON: %s" % (path, " ".join(str(e).split())[:200]))
    if obj is not None:
        return [(path, check_result(_unwrap(obj), path))]
    out, order = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = "%s:%d" % (path, n)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ResultError("%s:%d: invalid JSON: %s" % (where, e.colno, e.msg))
        except (ValueError, RecursionError) as e:
            raise ResultError("%s: cannot read its JSON: %s" % (where, " ".join(str(e).split())[:200]))
        out.append((where, check_result(_unwrap(obj), where)))
        order.append(obj.get("index") if isinstance(obj, dict) else None)
    if not out:
        raise ResultError("%s: empty file" % path)
    # A sweep's lines come in completion order; its points in index order.
    if all(isinstance(i, int) for i in order):
        out = [x for _, x in sorted(zip(order, out), key=lambda p: p[0])]
    return out


def _unwrap(obj):
    if isinstance(obj, dict) and "metrics" not in obj and isinstance(obj.get("result"), dict):
        return obj["result"]
    return obj


def config_name(result, default="run"):
    cfg = result.get("config")
    if isinstance(cfg, dict) and isinstance(cfg.get("name"), str) and cfg["name"]:
        return cfg["name"]
    return default


def metric(result, key, default=float("nan")):
    v = result["metrics"].get(key, default)
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def is_serving(result):
    """A serving run (a config with a `serving` section): per-request metrics."""
    return "serving" in result.get("config", {})


def time_per_token_s(result, stat="mean"):
    """Time per output token: a single-batch run's decode step time (every
    sequence of the batch gets a token per step), a serving run's per-request
    TPOT distribution (`stat`: mean, p50, p90, p99)."""
    if is_serving(result):
        v = result["metrics"].get("tpot_s", {})
        return metric({"metrics": v}, stat)
    return metric(result, "mean_step_latency_s" if stat == "mean" else stat + "_step_latency_s")


def ttft_s(result):
    """Time to first token: single-batch, the batch's; serving, the mean over requests (queueing included)."""
    if is_serving(result):
        return metric({"metrics": result["metrics"].get("ttft_s", {})}, "mean")
    return metric(result, "ttft_s")


def _flatten(obj, prefix=""):
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, prefix + k + "."))
    else:
        out[prefix[:-1]] = json.dumps(obj, sort_keys=True)
    return out


def run_labels(results):
    """A short, distinct label per result: the config name, plus the config
    values that set apart runs of the same name (e.g. a sweep's points)."""
    names = [config_name(r) for r in results]
    labels = list(names)
    for name in set(names):
        idx = [i for i, n in enumerate(names) if n == name]
        if len(idx) < 2:
            continue
        flats = [_flatten(results[i].get("config", {})) for i in idx]
        flats = [dict(f, seed=json.dumps(results[i].get("seed"))) for f, i in zip(flats, idx)]
        # Keys every run has (a policy's own parameters come with its name).
        keys = sorted(set.intersection(*[set(f) for f in flats]) - IGNORED_CONFIG_KEYS)
        diff = [k for k in keys if len({f[k] for f in flats}) > 1]
        diff.sort(key=lambda k: (not k.startswith("policies."), not k.endswith(".name")))
        for i, f in zip(idx, flats):
            parts = ["%s=%s" % (".".join(k.split(".")[-2:]), _short(f[k])) for k in diff[:4]]
            labels[i] = "%s (%s)" % (name, ", ".join(parts)) if parts else name
    # Still identical (the same config twice): number them.
    counts = {lab: labels.count(lab) for lab in labels}
    seen = {}
    for i, lab in enumerate(labels):
        if counts[lab] > 1:
            seen[lab] = seen.get(lab, 0) + 1
            labels[i] = "%s #%d" % (lab, seen[lab])
    return labels


def _short(v):
    try:
        x = json.loads(v)
    except ValueError:
        return v
    return x if isinstance(x, str) else v


def _hw(result):
    cfg = result.get("config")
    hw = cfg.get("hardware") if isinstance(cfg, dict) else None
    return hw if isinstance(hw, dict) else {}


def link_base(name):
    """'pcie_gpu:root->gpu' -> 'pcie_gpu'; 'ssd.read' -> 'ssd' (a device's media link)."""
    if ":" in name:
        return name.split(":", 1)[0]
    for suf in (".read", ".write", ".media"):
        if name.endswith(suf):
            return name[: -len(suf)]
    return name


def is_pcie_link(result, name):
    """A PCIe link: its hardware entry names a "pcie" generation/width (or,
    without the config, its name starts with "pcie")."""
    base = name.split(":", 1)[0]
    spec = _hw(result).get("links", {}).get(base)
    if isinstance(spec, dict):
        return "pcie" in spec
    return base.lower().startswith("pcie")


def is_ssd_media_link(result, name):
    if not name.endswith((".read", ".write", ".media")):
        return False
    dev = _hw(result).get("devices", {}).get(link_base(name))
    if isinstance(dev, dict):
        return str(dev.get("kind", "")).lower() in STORAGE_KINDS
    return "ssd" in link_base(name).lower()


def link_bytes(result):
    links = result["metrics"].get("links", {})
    out = {}
    for name, v in links.items():
        b = v.get("bytes") if isinstance(v, dict) else None
        if isinstance(b, (int, float)) and math.isfinite(b):
            out[name] = float(b)
    return out


def pcie_bytes(result):
    return sum(b for n, b in link_bytes(result).items() if is_pcie_link(result, n))


def ssd_bytes(result):
    return sum(b for n, b in link_bytes(result).items() if is_ssd_media_link(result, n))


def ordered_tiers(result):
    """metrics.tiers as a dict in the hardware's tier order (top tier first)."""
    tiers = result["metrics"].get("tiers")
    if not isinstance(tiers, dict):
        return {}
    order = _hw(result).get("tiers")
    order = [t for t in order if t in tiers] if isinstance(order, list) else []
    order += [t for t in tiers if t not in order]
    return {t: tiers[t] for t in order if isinstance(tiers[t], dict)}


def read_steps_csv(path):
    """steps.csv (step,start_s,end_s,latency_s) -> (steps, latencies) or None."""
    if not os.path.isfile(path):
        return None
    steps, lat = [], []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                steps.append(int(row["step"]))
                lat.append(float(row["latency_s"]))
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise ResultError("%s: not a kvtier steps.csv (%s)" % (path, e))
    return steps, lat


def human_bytes(b):
    if b is None or not math.isfinite(b):
        return "n/a"
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(b) < 1000 or unit == "PB":
            return ("%.0f %s" if unit == "B" else "%.3g %s") % (b, unit)
        b /= 1000.0


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def save_figure(fig, path, dpi=None):
    """Write the figure to path atomically: a temporary file in the same
    folder, then os.replace, so a reader never sees half a file. `dpi`:
    dots per inch of a raster format (default 110)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="." + fmt, dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=fmt, dpi=dpi or 110)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_writable(path, flag):
    """The output file's folder exists or can be made, and can be written: checked
    before any work, so that a bad -o costs nothing and leaves nothing."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ResultError("%s %s: is a folder; expected a file name" % (flag, path))
    probe = d
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise ResultError("%s %s: %s is not a folder" % (flag, path, probe))
    # A file made and removed at once: access() says yes to root where nothing can be written (/proc).
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise ResultError("%s %s: cannot write in %s: %s" % (flag, path, probe, e.strerror or e))


def write_text_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
