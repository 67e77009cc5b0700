"""`kvtier run --timeline` against the trace-event rules Perfetto applies
(complete slices nest per track, timestamps in order per track, metadata for
every track and process, counters in time order) on every system preset."""

import json
from collections import defaultdict

import pytest

from conftest import DEFAULT_CONFIG, ROOT

PRESETS = [DEFAULT_CONFIG] + sorted((ROOT / "configs" / "systems").glob("*.json"))


def ns(us):
    """A timestamp in microseconds as whole nanoseconds; fails if it is not whole."""
    v = round(us * 1000)
    assert abs(v - us * 1000) < 1e-3, "timestamp %r is not a whole number of nanoseconds" % us
    return v


def check_trace_rules(doc):
    """Asserts the trace-event rules; returns (slices by track, counters by name, track names)."""
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)
    procs, names, sort_index = {}, {}, {}
    slices = defaultdict(list)
    counters = defaultdict(list)
    for e in doc["traceEvents"]:
        assert isinstance(e.get("name"), str) and e["name"], e
        assert isinstance(e.get("pid"), int), e
        ph = e.get("ph")
        if ph == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index"), e
            if e["name"] == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                key = (e["pid"], e["tid"])
                assert key not in names, "track %s named twice" % (key,)
                names[key] = e["args"]["name"]
            elif e["name"] == "thread_sort_index":
                sort_index[(e["pid"], e["tid"])] = e["args"]["sort_index"]
        elif ph == "X":
            assert isinstance(e.get("tid"), int), e
            t0, d = ns(e["ts"]), ns(e["dur"])
            assert t0 >= 0 and d >= 0, e
            slices[(e["pid"], e["tid"])].append((t0, t0 + d, e))
        elif ph == "C":
            assert isinstance(e.get("args"), dict) and len(e["args"]) == 1, e
            (v,) = e["args"].values()
            assert isinstance(v, (int, float)) and v >= 0, e
            counters[e["name"]].append((ns(e["ts"]), v))
        else:
            pytest.fail("unexpected event phase %r: %r" % (ph, e))

    for key, xs in slices.items():
        assert key in names, "track %s has slices but no thread_name" % (key,)
        assert key[0] in procs, "process %d has no process_name" % key[0]
        # In file order, starts never go back (monotonic per track) and a slice
        # starts at or after the previous one's end: no overlap, so certainly
        # no improper nesting, which Perfetto would drop.
        for (a0, a1, a), (b0, b1, b) in zip(xs, xs[1:]):
            assert b0 >= a0, "track %s: timestamps go back: %r then %r" % (names[key], a, b)
            assert b0 >= a1, "track %s: %r overlaps %r" % (names[key], a, b)
    for key in names:
        assert slices.get(key), "track %s (%s) is empty" % (key, names[key])
    for name, cs in counters.items():
        ts = [t for t, _ in cs]
        assert ts == sorted(ts), "counter %s: timestamps go back" % name
        assert len(set(ts)) == len(ts), "counter %s: two values at one time" % name
    return slices, counters, names


@pytest.mark.parametrize("config", PRESETS, ids=lambda p: p.stem)
def test_timeline_follows_trace_event_rules(kvtier, tmp_path, config):
    tl = tmp_path / "tl.json"
    # Three measured steps whatever warm-up a preset asks for.
    # Serving presets: their first three requests.
    short = (["--set", "serving.limit=3"] if "serving" in json.loads(config.read_text()) else
             ["--set", "workload.decode_steps=3", "--set", "workload.warmup_steps=0"])
    p = kvtier("run", config, "-q", "--out", tmp_path / "out", "--timeline", tl, *short, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out", "tl.json"]  # no temporary file left
    doc = json.loads(tl.read_text())
    slices, counters, names = check_trace_rules(doc)
    metrics = json.loads((tmp_path / "out" / "result.json").read_text())["metrics"]

    # Every link that carried bytes has slices and a throughput counter; links
    # that carried nothing have no track.
    link_tracks = {n.split(" #")[0] for (pid, _), n in names.items() if pid == 2}
    for link, m in metrics["links"].items():
        if m["bytes"] > 0:
            assert link in link_tracks, link
            cs = counters[link + " throughput"]
            assert cs and max(v for _, v in cs) > 0 and cs[-1][1] == 0, link
        else:
            assert link not in link_tracks, link
    # The bytes on a link's slices add up to its metric.
    for link in link_tracks:
        total = sum(e["args"]["bytes"] for (pid, tid), xs in slices.items() if pid == 2
                    and names[(pid, tid)].split(" #")[0] == link for _, _, e in xs)
        assert total == pytest.approx(metrics["links"][link]["bytes"], rel=1e-9), link
    # Transfer slices say what moves where.
    for (pid, _), xs in slices.items():
        for _, _, e in xs:
            if pid == 2:
                assert {"from", "to", "bytes", "stream"} <= set(e["args"]), e
                assert e["name"].startswith(e["args"].get("stream", "")) or "->" in e["name"], e
    # The GPU computes: its track exists and is busy as long as the metric says.
    gpu = [k for k, n in names.items() if k[0] == 1 and n.endswith(" compute")]
    assert gpu


def test_concurrent_transfers_get_lanes_not_nesting(kvtier, tmp_path):
    """With background demotion and fetches on one link, some transfers overlap;
    they must land on lanes "<link> #2"... rather than overlapping on one track."""
    tl = tmp_path / "tl.json"
    p = kvtier("run", DEFAULT_CONFIG, "-q", "--out", tmp_path / "out", "--timeline", tl, "--set",
               "workload.decode_steps=3", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    slices, _, names = check_trace_rules(json.loads(tl.read_text()))
    lanes = [n for (pid, _), n in names.items() if pid == 2 and " #" in n]
    assert lanes, "expected at least one link with overlapping transfers in the default run"


def test_back_to_back_slices_touch(kvtier, tmp_path):
    """GPU compute slices follow each other without a gap or an overlap of a nanosecond."""
    tl = tmp_path / "tl.json"
    p = kvtier("run", ROOT / "configs" / "systems" / "dram_offload.json", "-q", "--out", tmp_path / "out",
               "--timeline", tl, "--set", "workload.decode_steps=3", "--set", "workload.warmup_steps=0", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    slices, _, names = check_trace_rules(json.loads(tl.read_text()))
    (gpu,) = [k for k, n in names.items() if k[0] == 1 and n.endswith(" compute")]
    xs = slices[gpu]
    touching = sum(1 for a, b in zip(xs, xs[1:]) if b[0] == a[1])
    assert touching >= 10  # prefill layers and unstalled decode layers follow each other exactly


def test_every_tier_has_an_occupancy_counter_within_its_capacity(kvtier, tmp_path):
    cfg = ROOT / "configs" / "systems" / "hillinfer.json"
    tl = tmp_path / "tl.json"
    p = kvtier("run", cfg, "--out", tmp_path / "out", "--timeline", tl, "--set", "workload.decode_steps=4",
               "--set", "workload.warmup_steps=0", "--set", "workload.context_tokens=4096", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    with open(tl) as f:
        doc = json.load(f)
    with open(tmp_path / "out" / "result.json") as f:
        tiers = json.load(f)["metrics"]["tiers"]
    seen = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "C" and e["name"].endswith(" occupancy"):
            seen[e["name"][: -len(" occupancy")]].append(e["args"]["bytes"])
    assert set(seen) == set(tiers)
    for name, values in seen.items():
        assert max(values) <= tiers[name]["capacity_bytes"], name
        assert max(values) <= tiers[name]["peak_bytes"], name
    assert max(seen["gpu"]) > 0  # the hot pool fills
