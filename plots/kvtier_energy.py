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
