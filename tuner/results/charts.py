"""The report's figures as PNG files (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

from tuner.results.errors import need
from tuner.results.plotdata import front_line, label_of, labelled, pareto_data
from tuner.results.summary import Summary

COLOURS = {"front": "#d62728", "feasible": "#1f77b4", "missed-slo": "#b0b0b0"}
LABELS = {"front": "Pareto-optimal", "feasible": "meets the SLOs", "missed-slo": "misses an SLO"}


def _pyplot():
    matplotlib = need("matplotlib", "matplotlib", "tuner report's figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def pareto_png(s: Summary, path: Path) -> Path:
    plt = _pyplot()
    data = pareto_data(s)
    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=110)
    for kind in ("missed-slo", "feasible", "front"):
        pts = [p for p in data.points if p.kind == kind]
        if pts:
            ax.scatter([p.x for p in pts], [p.y for p in pts], c=COLOURS[kind], s=36,
                       label=LABELS[kind], zorder=3, edgecolors="white", linewidths=0.5)
    line = front_line(data)
    if len(line) > 1:
        ax.plot(*zip(*line), color=COLOURS["front"], lw=1, zorder=2)
    for p in labelled(data):
        ax.annotate(label_of(p), (p.x, p.y), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    if data.x_limit is not None:
        ax.axvline(data.x_limit, color="#2ca02c", ls="--", lw=1, label=f"SLO {data.x_limit:g}")
    if data.y_limit is not None:
        ax.axhline(data.y_limit, color="#2ca02c", ls=":", lw=1, label=f"SLO {data.y_limit:g}")
    ax.set_xlabel(data.x_label)
    ax.set_ylabel(data.y_label)
    ax.set_title(f"Pareto front of {s.name}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _save(plt, fig, path)


def hypervolume_png(s: Summary, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.5), dpi=110)
    if s.hypervolume:
        xs, ys = zip(*s.hypervolume)
        ax.step(xs, ys, where="post", color="#9467bd")
        ax.scatter(xs, ys, s=10, color="#9467bd")
    ax.set_xlabel("trial")
    ax.set_ylabel("hypervolume")
    ax.set_title(f"Hypervolume over trials (reference: {s.reference_label})", fontsize=9)
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def effects_png(s: Summary, path: Path) -> Path:
    plt = _pyplot()
    effects = list(s.effects)
    goals = s.spec.objectives
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * max(len(effects), 2) + 1.2), dpi=110)
    height = 0.8 / max(len(goals), 1)
    for i, g in enumerate(goals):
        ys = [k + i * height for k in range(len(effects))]
        ax.barh(ys, [e.spread_pct[i] for e in effects], height=height, label=g.metric)
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(effects))])
    ax.set_yticklabels([e.name for e in effects], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("spread of the group means, % of the overall mean")
    ax.set_title("Which flags matter (measured configurations)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    return _save(plt, fig, path)


def curves_png(s: Summary, path: Path) -> Path:
    """Each front trial's measured latency-vs-load curve: the p99 ITL each level was judged
    on (``Level.judged_p99_itl_ms``) by offered request rate, a filled mark where the level
    held every SLO, the study's p99 ITL SLO as a line. A level stopped early on a certain
    miss is a triangle off the line: its p99 is a shortened run's, a lower bound."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    for row in s.front:
        curve = row.record.curve
        if curve is None or not curve.measured:
            continue
        levels = [lv for lv in curve.measured if lv.judged_p99_itl_ms is not None]
        whole = [lv for lv in levels if not lv.stopped_early]
        line, = ax.plot([lv.offered_rps for lv in whole], [lv.judged_p99_itl_ms for lv in whole],
                        lw=1, marker="", label=f"trial {row.record.number}")
        for lv in levels:
            ax.scatter([lv.offered_rps], [lv.judged_p99_itl_ms], s=28, color=line.get_color(),
                       facecolors=line.get_color() if lv.held else "none", zorder=3,
                       marker="^" if lv.stopped_early else "o")
    if s.spec.slo.p99_itl_ms is not None:
        ax.axhline(s.spec.slo.p99_itl_ms, color="#2ca02c", ls="--", lw=1,
                   label=f"SLO {s.spec.slo.p99_itl_ms:g} ms")
    ax.set_xlabel("offered requests/s (Poisson)")
    ax.set_ylabel("p99 ITL ms (steady requests)")
    ax.set_title("Latency vs load of the front's trials (filled: every SLO held)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _save(plt, fig, path)


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
