"""Evaluation views: the metrics table with significance, and plotly figures (no Gradio here).

* ``metrics_table`` — every system of one or more workspaces (base, fine-tuned, compressed
  indexes), with "†" where a system differs from BM25 at p < 0.05 (paired permutation test,
  ``evaluate.significance_marks``).
* ``per_query_scatter`` — one point per query, x = system A's value, y = system B's; points above
  the diagonal are queries B wins.
* ``recall_curves`` — Recall@k = |relevant ∩ top k| / |relevant|, averaged over queries, for k from
  1 to 1000, computed by ranx from the cached runs.
* ``lambda_sweep`` — nDCG@10 of the CLEAR hybrid λ_test·s_lex + s_emb over the λ grid on the split
  λ was tuned on, the chosen λ marked; optionally the same sweep on the evaluated split, shown for
  insight only (choosing λ there would tune on the test queries).
"""
from __future__ import annotations

import json

import plotly.graph_objects as go

from .evaluate import METRICS, Evaluation, compare, evaluate_run, significance_marks
from .workspace import SYSTEM_LABELS, Workspace

RECALL_KS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
TABLE_SYSTEMS = ("bm25", "dense", "hybrid")
OUTCOME_COLORS = {"win": "#2ca02c", "tie": "#7f7f7f", "loss": "#d62728"}
Entry = tuple[str, Workspace, str]  # (label shown, workspace, system name)


def system_entries(workspaces: Workspace | dict[str, Workspace], split: str, systems) -> list[Entry]:
    """(label, workspace, system) for each system of each workspace, BM25 first and only once.

    ``workspaces``: one workspace, or ``{label: workspace}`` (e.g. base, fine-tuned, int8) whose
    systems are labelled "Dense · int8". A system whose parameters repeat an earlier one (BM25
    shared by ``with_model`` / ``with_index`` siblings) is listed once.
    """
    named = workspaces if isinstance(workspaces, dict) else {"": workspaces}
    entries, seen = [], set()
    for ws_label, ws in named.items():
        for s in ("bm25", *[s for s in systems if s != "bm25"]):
            key = json.dumps([s, ws.system_params(s, split)], sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            label = SYSTEM_LABELS[s] if s == "bm25" or not ws_label else f"{SYSTEM_LABELS[s]} · {ws_label}"
            entries.append((label, ws, s))
    return entries


# ---- metrics table --------------------------------------------------------------------------
def metrics_table(ws_by_label: Workspace | dict[str, Workspace], split: str, systems=TABLE_SYSTEMS,
                  metrics=METRICS) -> list[dict]:
    """One row per system: ``{"label", "system", "metrics": {m: mean}, "marks": {m: "†"}}``.

    BM25 always comes first: it is the base of the significance marks.
    """
    entries = system_entries(ws_by_label, split, systems)
    evals = {label: ws.evaluate(s, split) for label, ws, s in entries}
    base = entries[0][0]
    marks = significance_marks(evals, base, metrics)
    return [{"label": label, "system": s, "metrics": {m: evals[label].mean.get(m, float("nan")) for m in metrics},
             "marks": marks.get(label, {})} for label, _, s in entries]


def table_cells(rows: list[dict], metrics=METRICS) -> list[list[str]]:
    """Rows of ``metrics_table`` as text cells: label, then "0.6804†" per metric."""
    return [[r["label"], *(f"{r['metrics'][m]:.4f}{r['marks'].get(m, '')}" for m in metrics)] for r in rows]


# ---- per-query scatter ----------------------------------------------------------------------
def per_query_scatter(eval_a: Evaluation, eval_b: Evaluation, label_a: str, label_b: str,
                      metric: str = "ndcg@10", query_text: dict[str, str] | None = None) -> go.Figure:
    """x = A's per-query ``metric``, y = B's, one point per query both were evaluated on.

    Green: B wins, red: B loses, grey: tie; the title counts them and gives the paired
    permutation test's p (``evaluate.compare``).
    """
    cmp = compare(eval_a, eval_b, metric)
    qa, qb = eval_a.per_query[metric], eval_b.per_query[metric]
    qids = [q for q in qa if q in qb]
    outcome = ["win" if qb[q] > qa[q] else "loss" if qb[q] < qa[q] else "tie" for q in qids]
    text = query_text or {}
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[qa[q] for q in qids], y=[qb[q] for q in qids], mode="markers", name="queries",
        marker=dict(color=[OUTCOME_COLORS[o] for o in outcome], opacity=0.7, size=8),
        customdata=[[q, text.get(q, ""), o] for q, o in zip(qids, outcome)],
        hovertemplate=(f"%{{customdata[0]}}: %{{customdata[1]}}<br>{label_a} %{{x:.3f}} · "
                       f"{label_b} %{{y:.3f}} (%{{customdata[2]}})<extra></extra>")))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="y = x", hoverinfo="skip",
                             line=dict(color="#999", dash="dot")))
    fig.update_layout(
        title=(f"{label_b} vs {label_a}, per-query {metric}: {len(cmp.wins)} wins, {cmp.ties} ties, "
               f"{len(cmp.losses)} losses (p = {cmp.p_value:.3g})"),
        xaxis_title=f"{label_a} {metric}", yaxis_title=f"{label_b} {metric}", showlegend=False,
        xaxis=dict(range=[-0.02, 1.02]), yaxis=dict(range=[-0.02, 1.02], scaleanchor="x"))
    return fig


# ---- Recall@k curves ------------------------------------------------------------------------
def recall_at_ks(workspaces: Workspace | dict[str, Workspace], split: str, systems=TABLE_SYSTEMS,
                 ks=RECALL_KS) -> dict[str, list[float]]:
    """``{label: [mean Recall@k for k in ks]}`` from each system's cached run, by ranx."""
    metrics = tuple(f"recall@{k}" for k in ks)
    out = {}
    for label, ws, s in system_entries(workspaces, split, systems):
        ev = evaluate_run(ws.run(s, split), ws.dataset.qrels[split], metrics=metrics)
        out[label] = [ev.mean[m] for m in metrics]
    return out


def recall_curves(workspaces: Workspace | dict[str, Workspace], split: str, systems=TABLE_SYSTEMS,
                  ks=RECALL_KS) -> go.Figure:
    """Recall@k against k (log axis) for each system."""
    fig = go.Figure()
    for label, values in recall_at_ks(workspaces, split, systems, ks).items():
        fig.add_trace(go.Scatter(x=list(ks), y=values, mode="lines+markers", name=label))
    fig.update_layout(title=f"Recall@k on {split}", xaxis=dict(type="log", title="k"),
                      yaxis=dict(title="Recall@k", range=[0, 1.02]))
    return fig


# ---- λ sweep --------------------------------------------------------------------------------
def lambda_sweep(ws: Workspace, split: str, show_eval_split: bool = True) -> go.Figure:
    """nDCG@10 against λ_test: on the split λ was tuned on (the chosen λ starred) and, if asked, on
    ``split`` itself — labelled as not used for choosing λ."""
    choice = ws.lambda_for(split)
    fig = go.Figure()
    if choice.grid:
        lams, values = zip(*choice.grid)
        fig.add_trace(go.Scatter(x=list(lams), y=list(values), mode="lines+markers", name=choice.how))
        chosen = dict(choice.grid).get(choice.value)
        if chosen is not None:
            fig.add_trace(go.Scatter(x=[choice.value], y=[chosen], mode="markers", name=f"chosen λ = {choice.value:g}",
                                     marker=dict(symbol="star", size=16, color="#d62728")))
    else:
        fig.add_annotation(text=f"λ = {choice.value:g}: {choice.how} — no sweep to choose it from",
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=1.05)
    if show_eval_split:
        _, grid = ws.lambda_grid(split)
        lams, values = zip(*grid)
        fig.add_trace(go.Scatter(x=list(lams), y=list(values), mode="lines+markers",
                                 name=f"{split} — shown for insight, not used to choose λ",
                                 line=dict(dash="dash"), opacity=0.7))
    fig.update_layout(title=f"Hybrid nDCG@10 against λ_test (evaluating {split})",
                      xaxis=dict(type="category", title="λ_test"), yaxis=dict(title="nDCG@10"),
                      legend=dict(orientation="h", y=-0.2))
    return fig
