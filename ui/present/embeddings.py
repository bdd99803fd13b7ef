"""The Embeddings view's figures: UMAP scatter of queries, positives, hard and easy negatives (base
and fine-tuned side by side), and histograms of query–document cosine similarity by role.

One colour and symbol per role (they read apart in grey print too), a line from each query to each
of its documents, and hover text with the document's title, its label and its ranks.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from retrieval.evaluation.failure_rules import NOT_RETRIEVED
from retrieval.evaluation.projection import (
    DOC_ROLES,
    EASY,
    HARD,
    POSITIVE,
    QUERY,
    ROLES,
    Point,
    Projection,
    Sample,
    align,
)
from retrieval.systems import BASE_SYSTEMS, short
from ui.present.escape import label as esc

ROLE_STYLE = {  # colour and symbol differ per role, so the roles read apart in grey print too
    QUERY: {"color": "#222222", "symbol": "star", "size": 13},
    POSITIVE: {"color": "#2ca02c", "symbol": "circle", "size": 8},
    HARD: {"color": "#d62728", "symbol": "x", "size": 8},
    EASY: {"color": "#1f77b4", "symbol": "diamond", "size": 7},
}
COMPILE_NOTE = ("the first projection in this process loads and compiles UMAP's numba code once, "
                "which takes longer than later projections (longest while numba's disk cache is empty)")


def rank_line(ranks_by_system: dict[str, int | None]) -> str:
    """"BM25 3 · dense 12 · hybrid —" (— = not in the top 1000)."""
    return " · ".join(f"{short(s)} {NOT_RETRIEVED if ranks_by_system.get(s) is None else ranks_by_system[s]}"
                      for s in BASE_SYSTEMS)


def hover_text(point: Point, ranks_by_system: dict[str, int | None] | None = None) -> str:
    if point.role == QUERY:
        return f"<b>query {esc(point.query_id)}</b><br>{esc(point.text)}"
    label = "not judged" if point.label is None else f"label {point.label}"
    return (f"<b>{esc(point.title)}</b><br>{point.role} of query {esc(point.query_id)} "
            f"({label})<br>{rank_line(point.ranks if ranks_by_system is None else ranks_by_system)}")


def _traces(projection: Projection, sample: Sample, ranks=None, showlegend: bool = True) -> list:
    """The query→document lines, then one marker trace per role (drawn over the lines)."""
    xy, points = projection.xy, sample.points
    if len(xy) != len(points):
        raise ValueError(f"projection has {len(xy)} points, the sample {len(points)}")
    query_row = {p.query_id: i for i, p in enumerate(points) if p.role == QUERY}
    line_x, line_y = [], []
    for i, p in enumerate(points):
        if p.role != QUERY:
            q = query_row[p.query_id]
            line_x += [float(xy[q, 0]), float(xy[i, 0]), None]
            line_y += [float(xy[q, 1]), float(xy[i, 1]), None]
    traces = [go.Scatter(x=line_x, y=line_y, mode="lines", name="query → document", hoverinfo="skip",
                         line=dict(color="rgba(120,120,120,0.25)", width=0.7), legendgroup="lines",
                         showlegend=showlegend)]
    for role in ROLES:
        rows = sample.indices(role)
        style = ROLE_STYLE[role]
        traces.append(go.Scatter(
            x=xy[rows, 0], y=xy[rows, 1], mode="markers", name=role, legendgroup=role,
            showlegend=showlegend, customdata=rows, hovertemplate="%{text}<extra></extra>",
            text=[hover_text(points[i], None if ranks is None else ranks[i]) for i in rows],
            marker=dict(color=style["color"], symbol=style["symbol"], size=style["size"],
                        line=dict(width=0.5, color="white"))))
    return traces


def projection_figure(projection: Projection, sample: Sample, title: str = "",
                      ranks: list[dict] | None = None) -> go.Figure:
    """Scatter of one projection. ``ranks``: per-point ranks to show instead of the sample's own
    (e.g. ``sample_ranks(tuned_ws, sample)``)."""
    fig = go.Figure(_traces(projection, sample, ranks))
    fig.update_layout(title=esc(title), xaxis=dict(showticklabels=False, title="UMAP 1"),
                      yaxis=dict(showticklabels=False, title="UMAP 2"), hovermode="closest")
    return fig


def side_by_side_figure(base: Projection, tuned: Projection, sample: Sample,
                        titles: tuple[str, str] = ("base encoder", "fine-tuned encoder"),
                        tuned_ranks: list[dict] | None = None, align_tuned: bool = True) -> go.Figure:
    """Base and fine-tuned projections of the same sample in two panels (one shared legend).

    ``align_tuned`` turns the fine-tuned layout to face the base one (``align``); ``tuned_ranks``
    shows the fine-tuned workspace's ranks in its panel's hover text.
    """
    if align_tuned:
        tuned = Projection(align(tuned.xy, base.xy), tuned.params, tuned.seconds, tuned.cached,
                           tuned.model, tuned.sample)
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.04)
    for col, (proj, ranks_) in enumerate(((base, None), (tuned, tuned_ranks)), 1):
        for trace in _traces(proj, sample, ranks_, showlegend=col == 1):
            fig.add_trace(trace, row=1, col=col)
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False)
    fig.update_layout(hovermode="closest", title=f"{len(sample.query_ids)} queries, {len(sample.points)} points")
    return fig


def similarity_histogram(sims_by_encoder: dict[str, dict[str, np.ndarray]], bin_size: float = 0.025) -> go.Figure:
    """One panel per encoder: overlaid histograms of cos(query, document) per role.

    Each role's histogram is normalized to sum to 1 (roles have different counts); the panel's
    title gives the means. The quadruplet loss wants positives to the right of both negatives.
    """
    labels = list(sims_by_encoder)
    titles = [f"{label}: " + " · ".join(f"{role} {_mean(sims.get(role)):.2f}" for role in DOC_ROLES)
              for label, sims in sims_by_encoder.items()]
    fig = make_subplots(rows=1, cols=max(len(labels), 1), shared_yaxes=True, subplot_titles=titles,
                        horizontal_spacing=0.04)
    bins = dict(start=-1.0, end=1.0, size=bin_size)
    for col, label in enumerate(labels, 1):
        for role in DOC_ROLES:
            values = np.asarray(sims_by_encoder[label].get(role, []), dtype=float)
            fig.add_trace(go.Histogram(x=values, name=role, legendgroup=role, showlegend=col == 1,
                                       histnorm="probability", xbins=bins, opacity=0.6,
                                       marker_color=ROLE_STYLE[role]["color"]), row=1, col=col)
        fig.update_xaxes(title_text="cos(query, document)", row=1, col=col)
    fig.update_layout(barmode="overlay", yaxis_title="share of the role's pairs",
                      title="Query–document cosine similarity by role (mean in each title)")
    return fig


def _mean(values) -> float:
    return float(np.mean(values)) if values is not None and len(values) else float("nan")
