"""Evaluation as Evaluate and the offline report draw it: the BM25-vs-dense scatter and the Recall@k
curves, saying no more than the table (on labels judged in the app, no Δ and p for a pair the
coverage gate holds back, no recall past the judged pool's depth), and the report's systems section."""
from __future__ import annotations

from retrieval.evaluation.failure_gallery import Gallery
from retrieval.evaluation.metric_tables import (
    RECALL_KS,
    covered_comparisons,
    judged_pool,
    metrics_table,
    recall_at_ks,
    system_entries,
    versus,
)
from retrieval.evaluation.query_kinds import segment_table
from retrieval.systems import BASE_SYSTEMS, BM25, DENSE, TUNED_OF, label
from ui.present.figures import per_query_scatter, recall_curves
from ui.present.tables import report_summary, segment_cells, shortfall_text


def comparison_figures(ws, workspaces, split: str, systems=BASE_SYSTEMS, compared=None, viewer=None):
    """(the BM25-vs-dense per-query scatter, None where dense is not among ``systems``; the Recall@k
    curves of ``systems`` in every workspace of ``workspaces``). ``compared``: ``covered_comparisons``
    of the same, where the caller has them; ``viewer``: whose judgments count (``Store.judgments``)."""
    rows, _, depth = compared or covered_comparisons(workspaces, split, systems, viewer=viewer)
    ks = tuple(k for k in RECALL_KS if depth is None or k <= max(depth, 1))
    curves = recall_curves(recall_at_ks(workspaces, split, systems, ks=ks), split, ks, judged_depth=depth)
    pair = next((r for r in rows if {r["a"], r["b"]} == {label(BM25), label(DENSE)}), None)
    if pair is None:
        return None, curves
    held = pair["verdict"] if not pair["verdict"].may_conclude else None
    scatter = per_query_scatter(*versus(ws, split), label(BM25), label(DENSE), query_text=ws.dataset.queries,
                                held_back=shortfall_text(held) if held else None)
    return scatter, curves


def report_systems(systems, workspaces: dict) -> dict[str, list[str]]:
    """The failure gallery's systems (``Gallery.systems``: those its cards give a rank for) as the
    report's tables list them, by workspace label (``metric_tables.system_entries``): the first
    workspace (the base) has every one but a fine-tuned encoder's, each other workspace (the
    fine-tuned encoder's) the base systems those stand for (its dense and hybrid)."""
    base_of = {tuned: base for base, tuned in TUNED_OF.items()}
    names = list(workspaces)
    return {name: [s for s in systems if s not in base_of] if i == 0 else [base_of[s] for s in systems if s in base_of]
            for i, name in enumerate(names)}


def report_parts(ws, workspaces, gallery: Gallery, viewer=None):
    """The offline report's figures (Recall@k curves, then the scatter) and its systems section
    (``report_summary``: the metrics table, the comparisons gated on coverage with judged@10 beside,
    nDCG@10 by kind of query) for ``gallery``'s split and systems (``Gallery.systems``, those its
    cards give a rank for: ``report_systems``), so that the report's header and each of its tables
    list the same systems; for the app's export and the CLI's ``failures --html`` alike. ``viewer``:
    whose judgments count (the app's session; None on the command line: every judge's)."""
    split = gallery.split
    workspaces = workspaces if isinstance(workspaces, dict) else {"": workspaces}
    chosen = report_systems(gallery.systems, workspaces)
    compared = covered_comparisons(workspaces, split, chosen, viewer=viewer)
    scatter, curves = comparison_figures(ws, workspaces, split, chosen, compared)
    by_kind = {name: w.evaluate(s, split) for name, w, s in system_entries(workspaces, split, chosen)}
    summary = report_summary(metrics_table(workspaces, split, chosen, viewer=viewer), compared[0],
                             segments=segment_cells(segment_table(by_kind, ws.dataset), list(by_kind)),
                             covered=compared[1], pool=judged_pool(workspaces, split, chosen, viewer=viewer))
    return [f for f in (curves, scatter) if f is not None], summary
