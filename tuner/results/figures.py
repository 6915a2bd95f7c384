"""The dashboard's extra figures as plotly graph objects (optuna-dashboard shows them on
the study page): the Pareto front with the SLO lines, hypervolume over trials, and which
flags matter. Plotly is imported only here."""

from __future__ import annotations

from tuner.results.errors import need
from tuner.results.flagdiff import changed_flags, flag_words
from tuner.results.plotdata import front_line, label_of, labelled, pareto_data
from tuner.results.summary import Summary

COLOURS = {"front": "#d62728", "feasible": "#1f77b4", "missed-slo": "#a0a0a0"}
NAMES = {"front": "Pareto-optimal", "feasible": "meets the SLOs", "missed-slo": "misses an SLO"}


def _go():
    return need("plotly.graph_objects", "plotly", "tuner dashboard's figures")


def pareto_figure(s: Summary):
    go = _go()
    data = pareto_data(s)
    flags = {r.number: flag_words(changed_flags(r.flags, s.space.defaults)) for r in s.records}
    shown = {p.number for p in labelled(data)}
    fig = go.Figure()
    for kind in ("missed-slo", "feasible", "front"):
        pts = [p for p in data.points if p.kind == kind]
        if not pts:
            continue
        fig.add_trace(go.Scatter(
            x=[p.x for p in pts], y=[p.y for p in pts], mode="markers+text", name=NAMES[kind],
            marker={"color": COLOURS[kind], "size": 9},
            text=[label_of(p) if p.number in shown else "" for p in pts],
            textposition="top right",
            hovertext=[f"trial {p.number}<br>{flags.get(p.number, '')}" for p in pts],
            hoverinfo="text+x+y"))
    line = front_line(data)
    if len(line) > 1:
        fig.add_trace(go.Scatter(x=[x for x, _ in line], y=[y for _, y in line], mode="lines",
                                 line={"color": COLOURS["front"], "width": 1},
                                 showlegend=False, hoverinfo="skip"))
    if data.x_limit is not None:
        fig.add_vline(x=data.x_limit, line_dash="dash", line_color="#2ca02c",
                      annotation_text=f"SLO {data.x_limit:g}")
    if data.y_limit is not None:
        fig.add_hline(y=data.y_limit, line_dash="dot", line_color="#2ca02c",
                      annotation_text=f"SLO {data.y_limit:g}")
    fig.update_layout(title=f"Pareto front with the SLOs ({len(s.front)} optimal)",
                      xaxis_title=data.x_label, yaxis_title=data.y_label, template="none")
    return fig


def hypervolume_figure(s: Summary):
    go = _go()
    xs = [n for n, _ in s.hypervolume]
    ys = [v for _, v in s.hypervolume]
    fig = go.Figure(go.Scatter(x=xs, y=ys, mode="lines+markers", line_shape="hv",
                               name="hypervolume", line={"color": "#9467bd"}))
    fig.update_layout(title=f"Hypervolume over trials (reference: {s.reference_label})",
                      xaxis_title="trial", yaxis_title="hypervolume", template="none")
    return fig


def effects_figure(s: Summary):
    go = _go()
    effects = list(s.effects)
    fig = go.Figure()
    for i, g in enumerate(s.spec.objectives):
        fig.add_trace(go.Bar(
            y=[e.name for e in effects], x=[e.spread_pct[i] for e in effects], orientation="h",
            name=g.metric,
            hovertext=["; ".join(f"{gr.label}: n={gr.n}, mean {gr.means[i]:,.1f}"
                                 for gr in e.groups) for e in effects]))
    fig.update_layout(title="Which flags matter: spread of the group means, % of the mean",
                      barmode="group", yaxis={"autorange": "reversed"}, template="none",
                      margin={"l": 180})
    return fig
