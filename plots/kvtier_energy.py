"""Energy of kvtier runs split by device: the `breakdown --energy` figure of
kvtier_plot.py and the report's energy table. The joules come from each
result's `energy` metrics (docs/results.md, "Energy and cost"); nothing here
estimates them."""

import kvtier_results as kr


def device_joules(result):
    """[(device, joules)] of one result, largest first, devices that drew
    nothing left out; links together as one "links" entry."""
    e = result["metrics"].get("energy")
    if not isinstance(e, dict) or "devices" not in e:
        raise kr.ResultError("%s: no energy metrics (a result from before kvtier reported energy)" % kr.config_name(result))
    out = [(name, float(d.get("J", 0.0))) for name, d in e["devices"].items()]
    links = sum(float(l.get("J", 0.0)) for l in e.get("links", {}).values())
    if links > 0:
        out.append(("links", links))
    return sorted([p for p in out if p[1] > 0], key=lambda p: -p[1])


def energy_rows(results):
    """One row per run: its label, tokens, and joules per generated token by device."""
    labels = kr.run_labels(results)
    rows = []
    for label, r in zip(labels, results):
        e = r["metrics"].get("energy") or {}
        total = float(e.get("total_J", 0.0))
        per_token = float(e.get("J_per_generated_token", 0.0))
        scale = per_token / total if total > 0 else 0.0
        rows.append({"label": label, "total_J": total, "J_per_token": per_token,
                     "parts": [(n, j * scale) for n, j in device_joules(r)]})
    return rows


def plot_energy_breakdown(rows, plt, width_in, title=None):
    """Stacked bars: joules per generated token of each run, split by device."""
    names = []
    for r in rows:
        for n, _ in r["parts"]:
            if n not in names:
                names.append(n)
    fig, ax = plt.subplots(figsize=(width_in, width_in * 0.75))
    x = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for i, n in enumerate(names):
        h = [dict(r["parts"]).get(n, 0.0) for r in rows]
        ax.bar(x, h, bottom=bottom, width=0.7, label=n, color="C%d" % (i % 10))
        bottom = [b + v for b, v in zip(bottom, h)]
    ax.set_xticks(x)
    ax.set_xticklabels([r["label"] for r in rows], rotation=30 if len(rows) > 2 else 0, ha="right" if len(rows) > 2 else "center")
    ax.set_ylabel("energy per generated token (J)")
    ax.legend(frameon=False, ncol=min(4, max(1, len(names))), fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.3))
    ax.set_title(title or "energy by device")
    fig.tight_layout()
    return fig


def energy_section(result, table_html, fmt):
    """The report's "Energy and cost" section: one row per device, then the
    run's totals (empty when the result has no energy metrics)."""
    m = result["metrics"]
    e, c = m.get("energy"), m.get("cost", {})
    if not isinstance(e, dict) or "devices" not in e:
        return []
    rows = [(n, fmt(d.get("J")), fmt(d.get("idle_J")), fmt(d.get("active_J")), fmt(d.get("traffic_J")), fmt(d.get("mean_W")),
             fmt(d.get("peak_W")))
            for n, d in sorted(e["devices"].items(), key=lambda p: -p[1].get("J", 0)) if d.get("J")]
    links = sum(l.get("J", 0.0) for l in e.get("links", {}).values())
    if links:
        rows.append(("links", fmt(links), "", "", fmt(links), fmt(links / m["simulated_time_s"]) if m.get("simulated_time_s") else "", ""))
    totals = [("energy (J)", fmt(e.get("total_J"))), ("mean power (W)", fmt(e.get("mean_W"))),
              ("peak power (W), over windows of (s)", "%s, %s" % (fmt(e.get("peak_W")), fmt(e.get("peak_window_s")))),
              ("J per generated token", fmt(e.get("J_per_generated_token")))]
    for key, label in (("J_per_prefill_token", "J per prefill token"), ("J_per_request", "J per request")):
        if key in e:
            totals.append((label, fmt(e[key])))
    for key, label in (("usd_per_hour", "US$ per hour"), ("usd_per_million_tokens", "US$ per million tokens"),
                       ("flash_replacement_usd_per_million_tokens", "flash replacement, US$ per million tokens")):
        if key in c:
            totals.append((label, fmt(c[key])))
    if c.get("unpriced_devices"):
        totals.append(("devices without a price", ", ".join(c["unpriced_devices"])))
    return ['<h2>Energy and cost</h2><div id="energy">%s%s</div>'
            % (table_html(["device", "J", "idle J", "active J", "traffic J", "mean W", "peak W"], rows),
               table_html(["figure", "value"], totals))]


def energy_figures(result, figure_html, plt, width_in):
    """The energy-by-device figure for the report (none without energy metrics)."""
    e = result["metrics"].get("energy")
    if not isinstance(e, dict) or not e.get("total_J"):
        return []
    fig = plot_energy_breakdown(energy_rows([result]), plt, width_in)
    return [figure_html("fig-energy", fig, "Energy per generated token, by device")]
