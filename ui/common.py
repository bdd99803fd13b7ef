"""What several views show or need: the systems on show, the labelled queries, the metrics caption
and table, the encoders the policy offers, the split picker, and the ``View`` protocol the shell
refreshes every view through when a session opens another data set."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import gradio as gr

from retrieval import DenseNotReady, Workspace
from retrieval.evaluation.metric_tables import covered_comparisons, judged_pool, metrics_table
from retrieval.evaluation.metrics import NDCG_CONDENSED, PRIMARY, SIGNIFICANCE_LEVEL, SIGNIFICANT, VIEW_METRICS
from retrieval.index.encoder import DEFAULT_MODEL
from retrieval.sharing.owners import Viewer
from retrieval.systems import BASE_SYSTEMS, DENSE, HYBRID, keys, label
from retrieval.systems.clear_lambda import shown
from retrieval.systems.hybrid import CLEAR
from retrieval.systems.identifier_queries import identifier_lookups
from retrieval.tracking.history import trained_encoders
from ui import texts
from ui.data import waiting_note
from ui.notify import refuse
from ui.present.counts import split_counted
from ui.present.escape import text
from ui.present.tables import conclusion_lines, coverage_line, pool_note, table_cells
from ui.registry import Registry


class View(Protocol):
    """A tab whose components depend on the open data set: ``outputs()`` lists them, ``refresh(ws,
    viewer)`` gives their updates for a newly opened workspace, in that order (``viewer``: the
    session's, whose judgments count: ``Registry.viewer``)."""

    def outputs(self) -> list: ...  # noqa: E704

    def refresh(self, ws: Workspace, viewer: Viewer | None = None) -> tuple: ...  # noqa: E704


def shown_systems(ws: Workspace) -> tuple[str, ...]:
    """The systems every view shows by default: the registered ones shown by default
    (``Workspace.shown_systems``: BM25, dense, hybrid, learned sparse (SPLADE) …), then the imported
    runs, each only once its index is built (``Workspace.pending``)."""
    systems = ws.shown_systems
    waiting = ws.pending(systems)
    return tuple(s for s in systems if s not in waiting)


def query_choices(ws: Workspace) -> list[tuple[str, str]]:
    """Every labelled query as (label "[split] id: text", query id), each query once."""
    out: dict[str, str] = {}
    for split, qrels in ws.dataset.qrels.items():
        for qid in qrels:
            if qid in ws.dataset.queries and qid not in out:
                out[qid] = f"[{split}] {qid}: {ws.dataset.queries[qid]}"
    return [(text, qid) for qid, text in out.items()]


def metrics_caption(ws: Workspace, split: str | None) -> str:
    if not split:
        return texts.NO_LABELS
    counted = split_counted(split, ws.dataset.qrels[split])
    if ws.pending((HYBRID,)):
        return (f"Split **{text(split)}**: {counted}. {waiting_note(ws)} "
                "Unjudged documents count as not relevant.")
    lam = CLEAR.lambda_for(ws, split)
    queries = ws.dataset.split_queries(split)
    lookups = len(identifier_lookups(queries))
    lookup_note = (f" {lookups} of these queries look up an identifier {texts.identifier_lookup_why('them')}."
                   if lookups else "")
    untuned = "" if lam.grid or ws.encoder.trained_on else (  # a fine-tuned encoder's λ.how says why
        " λ is the label-free default: labelled train queries (a train split, or judged queries) tune it, and a "
        "tuned λ replaces it where it does significantly better." + ("" if lam.lexical_only else (
            " Where the documents that answer a query say it in other words (paraphrase), equal weights can fall "
            "well below dense alone, and nothing in the corpus shows it without labels: about 50 judged queries "
            "let λ follow such a corpus.")))
    mix = ("The hybrid ranks by BM25 alone, dense only breaking ties" if lam.lexical_only else
           "The hybrid adds dense's score to BM25's, weighted by λ")
    return (f"Split **{text(split)}**: {counted}. {mix} (λ = {lam.values_shown}: {text(lam.how)})."
            f"{lookup_note}{untuned} "
            "Each figure is the mean over the split's labelled queries with its 95% interval (bootstrap over "
            f"queries); {SIGNIFICANT} p < {SIGNIFICANCE_LEVEL:g} against BM25, paired permutation test. Unjudged "
            "documents count as not relevant; judged@10 is the share of a system's top 10 that is labelled, and bpref "
            "leaves unlabelled documents out.")


def weights_note(ws: Workspace, split: str | None, systems: tuple[str, ...]) -> str:
    """Each system's own weights for ``split`` and how they were chosen (``System.weights``: the
    three-way hybrid's μ, say), one line each; "" when none of ``systems`` has any."""
    if not split:
        return ""
    lines = [f"**{text(label(s))}**: {w.name} = {text(shown(w.value))} ({text(w.how)})."
             for s in systems if s in keys() and not ws.pending((s,)) for w in ws.system(s).weights(ws, split)]
    return "\n\n".join(lines)


def metrics_formulas(ws: Workspace, split: str | None) -> str:
    """What Evaluate keeps behind its "How the figures are made" toggle (Markdown): the hybrid's
    formula, the statistical rule every comparison follows, and each metric in words."""
    parts = []
    if split and not ws.pending((HYBRID,)):
        lam = CLEAR.lambda_for(ws, split)
        parts.append(f"**Hybrid score:** {text(lam.formula)}, λ = {text(lam.values_shown)}"
                     + ("" if lam.lexical_only or not lam.per_query_max else
                        " (BM25max(q): the largest BM25 score the query can reach, so both parts lie in [0, 1])") + ".")
    parts.append(f"**Comparisons:** {text(texts.STATISTICS_RULE)}")
    parts.append("**The metrics:**\n\n" + "\n".join(f"- {text(help_)}" for m, help_ in texts.METRIC_HELP.items()
                                                     if m in (*VIEW_METRICS, NDCG_CONDENSED)))
    return "\n\n".join(parts)


def metrics_rows(ws: Workspace | dict[str, Workspace], split: str, systems=BASE_SYSTEMS,
                 viewer: Viewer | None = None) -> list[list[str]]:
    """The metrics table (``systems`` of every workspace given), † = differs from BM25; "n/m (pool
    depth k)" where labels judged in the app cannot measure a metric (``coverage.measurable``);
    ``viewer``: whose judgments count (the session's, ``Registry.viewer``)."""
    return table_cells(metrics_table(ws, split, systems, metrics=VIEW_METRICS, viewer=viewer), VIEW_METRICS)


def conclusions_note(ws: Workspace | dict[str, Workspace], split: str, systems=BASE_SYSTEMS,
                     metric: str = PRIMARY, viewer: Viewer | None = None) -> str:
    """Every pair of the shown systems compared on ``metric``, in words (Markdown, escaped): what the
    table lets one conclude, the separable pairs first; on labels judged in the app a pair whose
    systems' top 10 is not judged enough gets no verdict (``coverage.verdict``), and each system's
    judged@10 is shown beside."""
    pool = judged_pool(ws, split, systems, viewer=viewer)
    if pool is not None:  # labels judged in the app: the pool's verdict on success@10, never one on nDCG
        return pool_note(pool)
    compared, covered, _ = covered_comparisons(ws, split, systems, metric, viewer=viewer)
    lines = conclusion_lines(compared)
    if not lines:
        return ""
    said = coverage_line(covered)
    return (f"**What the table lets you conclude** ({text(metric)}, Δ with its 95% interval, paired permutation "
            "test):\n\n" + "\n".join(f"- {text(line)}" for line in lines) + (f"\n\n{text(said)}" if said else ""))


def encoder_choices(registry: Registry, ws: Workspace) -> list[tuple[str, str]]:
    """The base encoder, every fine-tuned encoder trained on this data set that still exists, and
    the encoders the operator allowed (``--allow-model``): what the model policy offers."""
    out = [(f"base: {registry.model if isinstance(registry.model, str) else DEFAULT_MODEL}", "")]
    out += [(f"fine-tuned: {e.loss} ({e.job_id})", e.path)
            for e in trained_encoders(registry.store, ws.dataset.content_hash)]
    out += [(f"allowed: {m}", m) for m in registry.policy.offered()]
    if ws.model_name:
        out.append((ws.model_name, ws.model_name))
    return list({value: (name, value) for name, value in reversed(out)}.values())[::-1]  # each value once, first kept


def sparse_choices(registry: Registry, ws: Workspace) -> list[tuple[str, str]]:
    """Every learned sparse model fine-tuned on this data set that still exists (its folder the value)."""
    return [(f"fine-tuned SPLADE: {e.loss} ({e.job_id})", e.path)
            for e in trained_encoders(registry.store, ws.dataset.content_hash, family="sparse")
            if e.path != ws.sparse_model]


def require_dense(ws: Workspace) -> None:
    """For a view that needs the dense index: while it is being built in the background, a message
    saying how far it is, before any work starts."""
    status = ws.encoding
    if ws.pending((DENSE,)) and status is not None:
        raise refuse(DenseNotReady(status))


def split_dropdown(ws: Workspace) -> gr.Dropdown:
    """A view's split picker: the workspace's labelled splits, its default split chosen."""
    return gr.Dropdown(choices=ws.dataset.splits, value=ws.dataset.default_split(), label="Split", scale=1)


@dataclass
class SplitView:
    """A view whose only data-set-dependent input is its split picker (``refresh`` on a new data set)."""

    split: gr.Dropdown

    def outputs(self) -> list:
        return [self.split]

    def refresh(self, ws: Workspace, viewer: Viewer | None = None) -> tuple:
        """The new workspace's labelled splits, its default chosen."""
        return (gr.update(choices=ws.dataset.splits, value=ws.dataset.default_split()),)
