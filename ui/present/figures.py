"""Plotly figures of evaluations, λ sweeps, failure counts and training losses.

* ``per_query_scatter`` — one point per query, x = system A's value, y = system B's; points above
  the diagonal are queries B wins.
* ``recall_curves`` — Recall@k against k (log axis) for each system (``metric_tables.recall_at_ks``).

Each draws the data it is given; none computes an evaluation (the views and the CLI do).
* ``lambda_sweep`` — nDCG@10 of the CLEAR hybrid λ_test·s_lex + s_emb over the λ grid on the split
  λ was tuned on, the chosen λ marked; optionally the same sweep on the evaluated split, shown for
  insight only (choosing λ there would tune on the test queries).
* ``counts_figure`` — queries per failure category; ``loss_figure`` — a training job's loss curve.
* ``history_figure`` — a metric of each system across the snapshots, with 95% error bars and each
  snapshot's note on hover.
"""
from __future__ import annotations

import plotly.graph_objects as go

from retrieval.evaluation.failure_gallery import Gallery
from retrieval.evaluation.intervals import proportion_interval
from retrieval.evaluation.measures import Comparison, Evaluation
from retrieval.evaluation.metric_tables import RECALL_KS
from retrieval.evaluation.metrics import interval_text
from retrieval.systems.clear_lambda import LambdaChoice, shown
from ui.present.escape import label as esc
from ui.present.vocabulary import category_label

OUTCOME_COLORS = {"win": "#2ca02c", "tie": "#7f7f7f", "loss": "#d62728"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def per_query_scatter(eval_a: Evaluation, eval_b: Evaluation, cmp: Comparison, label_a: str, label_b: str,
                      query_text: dict[str, str] | None = None, held_back: str | None = None) -> go.Figure:
    """x = A's per-query metric (``cmp.metric``), y = B's, one point per query both were evaluated on.

    Green: B wins, red: B loses, grey: tie; the title gives the mean difference with its 95%
    interval, counts them and gives the paired permutation test's p (``cmp``:
    ``evaluate.compare(eval_a, eval_b, metric)``) — or, where the coverage gate holds the pair back
    (``held_back``: why, ``ui.present.tables.shortfall_text``), says there is no verdict instead.
    """
    metric = cmp.metric
    label_a, label_b = esc(label_a), esc(label_b)
    qa, qb = eval_a.per_query[metric], eval_b.per_query[metric]
    qids = [q for q in qa if q in qb]
    outcome = ["win" if qb[q] > qa[q] else "loss" if qb[q] < qa[q] else "tie" for q in qids]
    text = query_text or {}
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[qa[q] for q in qids], y=[qb[q] for q in qids], mode="markers", name="queries",
        marker=dict(color=[OUTCOME_COLORS[o] for o in outcome], opacity=0.7, size=8),
        customdata=[[esc(q), esc(text.get(q, "")), o] for q, o in zip(qids, outcome)],
        hovertemplate=(f"%{{customdata[0]}}: %{{customdata[1]}}<br>{label_a} %{{x:.3f}} · "
                       f"{label_b} %{{y:.3f}} (%{{customdata[2]}})<extra></extra>")))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="y = x", hoverinfo="skip",
                             line=dict(color="#999", dash="dot")))
    fig.update_layout(
        title=(f"{label_b} vs {label_a}, per-query {metric}<br><sup>"
               + (f"no verdict: {esc(held_back)}" if held_back else
                  f"Δ {cmp.delta:+.3f} {interval_text(cmp.interval)}, {len(cmp.wins)} wins, {cmp.ties} ties, "
                  f"{len(cmp.losses)} losses (p = {cmp.p_value:.3g})") + "</sup>"),
        xaxis_title=f"{label_a} {metric}", yaxis_title=f"{label_b} {metric}", showlegend=False,
        xaxis=dict(range=[-0.02, 1.02]), yaxis=dict(range=[-0.02, 1.02], scaleanchor="x"))
    return fig


def recall_curves(recall: dict[str, dict[str, list[float]]], split: str, ks=RECALL_KS,
                  judged_depth: int | None = None) -> go.Figure:
    """Recall@k against k (log axis), one line per system of ``recall`` (``metric_tables.recall_at_ks``),
    each in a shaded band: its 95% interval over the queries. On labels judged in the app
    (``judged_depth``: the depth their pool was judged to) the curve stops there, and the title
    says why: deeper, every document is unjudged and recall is not measurable."""
    fig = go.Figure()
    for i, (name, curve) in enumerate(recall.items()):
        color = PALETTE[i % len(PALETTE)]
        band = [v if v == v else None for v in curve["high"]] + [v if v == v else None for v in curve["low"]][::-1]
        fig.add_trace(go.Scatter(x=list(ks) + list(ks)[::-1], y=band, fill="toself", fillcolor=_tint(color),
                                 line=dict(width=0), hoverinfo="skip", showlegend=False,
                                 name=f"{esc(name)} 95% interval"))
        fig.add_trace(go.Scatter(
            x=list(ks), y=curve["mean"], mode="lines+markers", name=esc(name), line=dict(color=color),
            customdata=list(zip(curve["low"], curve["high"])),
            hovertemplate=f"{esc(name)}: Recall@%{{x}} %{{y:.3f}} [%{{customdata[0]:.3f}}, "
                          "%{customdata[1]:.3f}]<extra></extra>"))
    deeper = (f"<br><sup>judged in the app to depth {judged_depth}: recall deeper is not measurable on these "
              "judgments</sup>" if judged_depth is not None else "")
    fig.update_layout(title=f"Recall@k on {esc(split)} (bands: 95% intervals over queries){deeper}",
                      xaxis=dict(type="log", title="k"), yaxis=dict(title="Recall@k", range=[0, 1.02]))
    return fig


def _tint(hex_color: str, alpha: float = 0.15) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def lambda_sweep(choice: LambdaChoice, split: str, eval_grid: list[tuple[float, float]] | None = None) -> go.Figure:
    """nDCG@10 against λ_test: on the split λ was tuned on (``choice``'s grid, the chosen λ starred)
    and, when given, ``split``'s own sweep (``eval_grid``: ``CLEAR.lambda_fit(ws, split).grid``) —
    labelled as not used for choosing λ; cross-fitted (``choice.folds``), each half's sweep on the
    other half with its λ starred, ``split``'s own sweep giving new queries' λ. λ values are
    categories written as ``clear_lambda.shown`` writes them (∞: BM25 alone)."""
    fig = go.Figure()
    for i, fold in enumerate(choice.folds, 1):  # cross-fitted: each half's λ, chosen on the other half's sweep
        lams, values = zip(*fold.fit.grid)
        fig.add_trace(go.Scatter(x=[shown(lam) for lam in lams], y=list(values), mode="lines+markers",
                                 name=f"tuned on the other half's {fold.fit.queries} queries, for half {i}"))
        fig.add_trace(go.Scatter(x=[shown(fold.value)], y=[dict(fold.fit.grid).get(fold.value)], mode="markers",
                                 name=f"half {i}: λ = {shown(fold.value)}",
                                 marker=dict(symbol="star", size=16)))
    if choice.folds:
        fig.add_annotation(text="cross-fitted: each half evaluated with λ tuned on the other half", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=1.05)
    elif choice.grid:
        lams, values = zip(*choice.grid)
        fig.add_trace(go.Scatter(x=[shown(lam) for lam in lams], y=list(values), mode="lines+markers",
                                 name=esc(choice.how)))
        chosen = dict(choice.grid).get(choice.value)
        if chosen is not None:
            fig.add_trace(go.Scatter(x=[shown(choice.value)], y=[chosen], mode="markers",
                                     name=f"chosen λ = {shown(choice.value)}",
                                     marker=dict(symbol="star", size=16, color="#d62728")))
    else:
        fig.add_annotation(text=f"λ = {shown(choice.value)}: {esc(choice.how)} — no sweep to choose it from",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=1.05)
    if eval_grid:
        lams, values = zip(*eval_grid)
        fig.add_trace(go.Scatter(x=[shown(lam) for lam in lams], y=list(values), mode="lines+markers",
                                 name=f"all of {esc(split)} — λ for new queries, not for these" if choice.folds
                                 else f"{esc(split)} — shown for insight, not used to choose λ",
                                 line=dict(dash="dash"), opacity=0.7))
    fig.update_layout(title=f"Hybrid nDCG@10 against λ_test (evaluating {esc(split)})",
                      xaxis=dict(type="category", title="λ_test"), yaxis=dict(title="nDCG@10"),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def counts_figure(gallery: Gallery) -> go.Figure:
    """Bar chart: number of queries per failure category, with the 95% interval (Wilson) of each
    category's share of the analysed queries as error bars."""
    labels = [esc(category_label(c, gallery.pair)) for c in gallery.categories]
    counts = [gallery.counts[c] for c in gallery.categories]
    n = len(gallery.query_categories)
    bounds = [proportion_interval(k, n) for k in counts]
    low = [k - b.low * n if b.defined else 0 for k, b in zip(counts, bounds)]
    high = [b.high * n - k if b.defined else 0 for k, b in zip(counts, bounds)]
    shares = [f"{k / n:.1%} [{b.low:.1%}, {b.high:.1%}]" if n and b.defined else "" for k, b in zip(counts, bounds)]
    fig = go.Figure(go.Bar(x=labels, y=counts, text=counts, textposition="outside", marker_color="#6366f1",
                           error_y=dict(type="data", symmetric=False, array=high, arrayminus=low, color="#444"),
                           customdata=shares,
                           hovertemplate="%{x}: %{y} queries, %{customdata} of the analysed<extra></extra>"))
    fig.update_layout(title=(f"Failure categories on {esc(gallery.dataset)} ({esc(gallery.split)}): "
                             f"{n} labelled queries (bars: 95% interval of the share)"),
                      yaxis=dict(title="queries", rangemode="tozero"), margin=dict(t=60, b=40))
    return fig


def loss_figure(losses: list) -> go.Figure:
    """A training job's loss per step, one line per stage (``losses``: [stage, step, loss] rows)."""
    fig = go.Figure()
    by_stage: dict[str, list] = {}
    for i, (stage, _, value) in enumerate(losses or []):
        by_stage.setdefault(stage, []).append((i + 1, value))
    for stage, points in by_stage.items():
        fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="lines", name=esc(stage)))
    fig.update_layout(xaxis_title="step", yaxis_title="training loss", height=300, margin=dict(l=40, r=10, t=10, b=40))
    return fig


def history_figure(points, metric: str) -> go.Figure:
    """``snapshots.history``'s points: one line per system over the snapshots (oldest first), each
    mean with its 95% interval as an error bar, the snapshot's note on hover."""
    fig = go.Figure()
    order = list(dict.fromkeys(p.snapshot for p in points))
    systems = list(dict.fromkeys(p.system for p in points))
    for i, system in enumerate(systems):
        mine = sorted((p for p in points if p.system == system), key=lambda p: order.index(p.snapshot))
        fig.add_trace(go.Scatter(
            x=[esc(p.snapshot) for p in mine], y=[p.mean for p in mine], mode="lines+markers", name=esc(system),
            line=dict(color=PALETTE[i % len(PALETTE)]),
            error_y=dict(type="data", symmetric=False, array=[p.interval.high - p.mean for p in mine],
                         arrayminus=[p.mean - p.interval.low for p in mine]),
            customdata=[[p.interval.low, p.interval.high, esc(p.note or "(no note)"), p.queries] for p in mine],
            hovertemplate=(f"{esc(system)} · %{{x}}<br>{esc(metric)} %{{y:.4f}} [%{{customdata[0]:.3f}}, "
                           "%{customdata[1]:.3f}] over %{customdata[3]} queries<br>%{customdata[2]}<extra></extra>")))
    fig.update_layout(title=f"{esc(metric)} across snapshots (bars: 95% intervals over queries; today's labels)",
                      xaxis=dict(title="snapshot", type="category", categoryorder="array",
                                 categoryarray=[esc(n) for n in order]),
                      yaxis=dict(title=esc(metric)))
    return fig
