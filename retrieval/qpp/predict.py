"""A predicted difficulty for every query of a workspace, labels or not: every predictor
(``retrieval.qpp.predictors``) on each system's ranked list, combined (``retrieval.qpp.combine``) into
one prediction per system and one difficulty per query.

``predict(ws, query_ids, systems, k, labels)``:

1. The queries (every query of the data set by default) are grouped by the split whose labels hold
   them (``Dataset.query_split``: the data's own splits and the app's judgments, ``labels.JUDGED``,
   where the workspace's data set carries them); a group's lists are the system's cached run of that
   split (``Workspace.run``, ``k`` deep), the queries of no split are searched (``Workspace.search``).
   Systems still being built (``Workspace.pending``) are left out.
2. Pre-retrieval predictors from the query's terms and the corpus's statistics
   (``retrieval.qpp.statistics``); post-retrieval ones from each list, against the system's corpus
   score (``retrieval.qpp.corpus_score``); coherence where the dense index is built (a system asked uses
   it, or it was built before; its vectors in this process), left out otherwise; the systems' disagreement
   (``retrieval.judging.judgments.disagreement``, top 10).
3. Each system's prediction: the label-free combination of the pre-retrieval predictors, its own
   post-retrieval ones and the disagreement; with ``labels="auto"`` and at least ``combine.MIN_FIT``
   queries judged (nDCG@10 defined: a relevant label), the fitted one, cross-fitted, its labels the
   system's nDCG@10 on each judged query (``retrieval.evaluation.measures.evaluate_run``, which equals
   trec_eval's). A query's difficulty is 1 − the mean of its systems' predictions.

The result is cached in the store (``Store.put_metrics``: one row per system and one for what the
systems share), under a key covering the data set's documents and queries, the queries predicted, each
system's parameters (``Workspace.system_params``, per split), ``k``, ``VERSION`` (the predictors'), the
dense system's parameters where coherence reads its vectors, and, with ``labels="auto"``, the labels' keys
(``Dataset.labels_key``) of the splits read.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retrieval.data.run import Run
from retrieval.evaluation.measures import evaluate_run
from retrieval.evaluation.metrics import PRIMARY
from retrieval.judging.judgments import disagreement as rbo_disagreement
from retrieval.qpp import combine, corpus_score, predictors
from retrieval.qpp.predictors import POST, PRE
from retrieval.qpp.statistics import CorpusStatistics, QueryTerms, statistics
from retrieval.store import cache_key
from retrieval.systems import BASE_SYSTEMS, DENSE
from retrieval.workspace import EVAL_DEPTH

if TYPE_CHECKING:
    from retrieval.workspace import Workspace

VERSION = 2  # the predictors' and the combination's: a change that alters a value raises it (a cache miss)
LABELS = ("auto", "none")
SHARED = "shared"  # the cache row of what every system shares (pre-retrieval predictors, disagreement)


@dataclass(frozen=True)
class QueryPrediction:
    """One query's predictors and predictions.

    Attributes:
        query_id: The query.
        text: Its text.
        pre: Pre-retrieval predictor -> value (the same for every system).
        post: System -> post-retrieval predictor -> value (a predictor a list lacks is left out).
        disagreement: 1 − mean pairwise RBO of the systems' top 10 (0 with one system).
        predicted: System -> its combined prediction, higher = better (label-free: a percentile in
            [0, 1] within the query set; fitted: predicted nDCG@10).
        difficulty: 1 − the mean over systems of ``predicted``: higher = more likely to fail.
    """

    query_id: str
    text: str
    pre: dict[str, float]
    post: dict[str, dict[str, float]]
    disagreement: float
    predicted: dict[str, float]
    difficulty: float


@dataclass(frozen=True)
class Combination:
    """How a system's predictions were combined.

    Attributes:
        system: The system.
        how: "label-free" or "fitted".
        judged: Judged queries it was fitted on (0: label-free).
        folds: Cross-fitting folds (0: label-free).
    """

    system: str
    how: Literal["label-free", "fitted"]
    judged: int
    folds: int


@dataclass(frozen=True)
class Predictions:
    """Every query's predictions (``QueryPrediction``), hardest first (difficulty descending, ties by
    query id), and how each system's were combined."""

    systems: tuple[str, ...]
    combinations: dict[str, Combination]
    queries: tuple[QueryPrediction, ...]

    def hardest(self, n: int) -> list[QueryPrediction]:
        """The ``n`` queries predicted hardest."""
        return list(self.queries[:max(0, n)])

    def by_id(self) -> dict[str, QueryPrediction]:
        """Query id -> its prediction."""
        return {p.query_id: p for p in self.queries}

    def columns(self) -> list[str]:
        """The table's columns: query_id, text, each pre-retrieval predictor, ``<system>.<post predictor>``,
        disagreement, ``<system>.predicted``, difficulty."""
        return (["query_id", "text", *PRE] + [f"{s}.{p}" for s in self.systems for p in POST]
                + ["disagreement"] + [f"{s}.predicted" for s in self.systems] + ["difficulty"])

    def rows(self) -> list[dict[str, object]]:
        """One dict per query (hardest first), keys ``columns()``; a predictor a query lacks is None."""
        out: list[dict[str, object]] = []
        for p in self.queries:
            row: dict[str, object] = {"query_id": p.query_id, "text": p.text, **{k: p.pre.get(k) for k in PRE}}
            for s in self.systems:
                row.update({f"{s}.{k}": p.post.get(s, {}).get(k) for k in POST})
            row["disagreement"] = p.disagreement
            row.update({f"{s}.predicted": p.predicted.get(s) for s in self.systems})
            row["difficulty"] = p.difficulty
            out.append(row)
        return out


def _groups(ws: Workspace, query_ids: Sequence[str]) -> dict[str | None, list[str]]:
    """The queries by the split whose labels hold them (None: no split), in their order."""
    groups: dict[str | None, list[str]] = {}
    for q in query_ids:
        groups.setdefault(ws.dataset.query_split(q), []).append(q)
    return groups


def _lists(ws: Workspace, system: str, groups: Mapping[str | None, list[str]], k: int) -> Run:
    """``system``'s lists of every query, ``k`` deep: a split's run as the evaluation keeps it (``Workspace.run``
    at its depth, so predicting stores no second run of the split), or searched for queries of no split."""
    out: Run = {}
    for split, ids in groups.items():
        if split is None:
            out.update(ws.search(system, {q: ws.dataset.queries[q] for q in ids}, k, None))
        else:
            run = ws.run(system, split, max(k, EVAL_DEPTH))
            out.update({q: run.get(q, [])[:k] for q in ids})
    return out


def _judged(ws: Workspace, run: Run, groups: Mapping[str | None, list[str]]) -> dict[str, float]:
    """nDCG@10 of each judged query (one with a relevant label) of ``run``, by its split's labels."""
    out: dict[str, float] = {}
    for split, ids in groups.items():
        if split is None:
            continue
        qrels = ws.dataset.qrels[split]
        labelled = {q: qrels[q] for q in ids if q in qrels}
        if labelled:
            per_query = evaluate_run({q: run.get(q, []) for q in labelled}, labelled, metrics=(PRIMARY,)).per_query
            out.update(per_query.get(PRIMARY, {}))
    return out


def _with_vectors(ws: Workspace, systems: Sequence[str]) -> bool:
    """Whether coherence reads the dense index: a system asked for uses it (so it is built), or it is built
    already; never built for coherence alone."""
    return any(ws.system(s).needs.vectors for s in systems) or ws.builds["dense"].built is not None


def _key(ws: Workspace, query_ids: Sequence[str], systems: Sequence[str], groups: Mapping[str | None, list[str]],
         k: int, labels: str) -> str:
    splits = sorted(s for s in groups if s is not None)
    params = {s: {str(split): ws.system_params(s, split) for split in groups} for s in systems}
    return cache_key(kind="qpp", version=VERSION, dataset=ws.dataset.queries_hash,
                     queries=hashlib.sha256(json.dumps(sorted(query_ids)).encode()).hexdigest(),
                     systems=list(systems), params=params, k=k, labels=labels,
                     labels_keys={s: ws.dataset.labels_key(s) for s in splits} if labels == "auto" else {},
                     vectors=ws.system_params(DENSE) if _with_vectors(ws, systems) else None)


def _post(ws: Workspace, system: str, stats: CorpusStatistics, queries: Mapping[str, str],
          terms: Mapping[str, QueryTerms], run: Run, k: int, held: np.ndarray | None) -> dict[str, dict[str, float]]:
    """Each query's post-retrieval predictors on ``system``'s list (a predictor a list lacks left out)."""
    rows = ws.doc_row
    lists = {q: np.array([s for _, s in run.get(q, [])[:k]], dtype=np.float64) for q in queries}
    s_d = corpus_score.corpus_scores(ws, system, stats, queries, terms, lists, k)
    out: dict[str, dict[str, float]] = {}
    for q in queries:
        scores, ids = lists[q], [d for d, _ in run.get(q, [])]
        doc_rows = np.array([rows[d] for d in ids[:predictors.CLARITY_K] if d in rows], dtype=np.int64)
        t = terms[q]
        values: dict[str, float | None] = {
            "nqc": predictors.nqc(scores, s_d[q], k),
            "wig": predictors.wig(scores, s_d[q], t.length),
            "clarity": predictors.clarity(*stats.top_counts(doc_rows, t)) if len(doc_rows) and len(t.ids) else None,
            "coherence": predictors.coherence(held[doc_rows[:predictors.COHERENCE_K]]) if held is not None else None,
        }
        out[q] = {key: v for key, v in values.items() if v is not None}
    return out


def _combined(systems: Sequence[str], query_ids: Sequence[str], pre: Mapping[str, dict[str, float]],
              post: Mapping[str, Mapping[str, dict[str, float]]], disagreement: Mapping[str, float],
              judged: Mapping[str, Mapping[str, float]], labels: str
              ) -> tuple[dict[str, dict[str, float]], dict[str, Combination]]:
    """Each system's prediction of each query, and how it was combined."""
    orientation = {p.key: p.higher_means for p in predictors.PREDICTORS}
    predicted: dict[str, dict[str, float]] = {}
    combinations: dict[str, Combination] = {}
    for s in systems:
        features: dict[str, list[float | None]] = {key: [pre[q].get(key) for q in query_ids] for key in PRE}
        features.update({key: [post[s][q].get(key) for q in query_ids] for key in POST})
        if len(systems) > 1:
            features["disagreement"] = [disagreement[q] for q in query_ids]
        fit = combine.fitted(features, orientation, query_ids, judged[s], families=predictors.FAMILIES) \
            if labels == "auto" else None
        if fit is not None:
            values, combinations[s] = fit.predicted, Combination(s, "fitted", fit.judged, fit.folds)
        else:
            values, combinations[s] = combine.label_free(features, orientation, predictors.FAMILIES), \
                Combination(s, "label-free", 0, 0)
        predicted[s] = dict(zip(query_ids, values.tolist()))
    return predicted, combinations


def _compute(ws: Workspace, query_ids: Sequence[str], systems: Sequence[str], groups: Mapping[str | None, list[str]],
             k: int, labels: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(shared: pre-retrieval predictors and disagreement by query; per system: post-retrieval
    predictors, predictions and combination), as the cache keeps them."""
    stats = statistics(ws)
    queries = {q: ws.dataset.queries[q] for q in query_ids}
    terms = {q: stats.query(text) for q, text in queries.items()}
    pre = {q: predictors.pre_retrieval(stats.n, t.df, t.cf) for q, t in terms.items()}
    runs = {s: _lists(ws, s, groups, k) for s in systems}
    held = corpus_score.vectors(ws) if _with_vectors(ws, systems) else None
    post = {s: _post(ws, s, stats, queries, terms, runs[s], k, held) for s in systems}
    disagreement = {q: rbo_disagreement(runs, q, predictors.DISAGREEMENT_K) for q in query_ids}
    judged = {s: _judged(ws, runs[s], groups) for s in systems} if labels == "auto" else {s: {} for s in systems}
    predicted, combinations = _combined(systems, query_ids, pre, post, disagreement, judged, labels)
    shared = {"pre": pre, "disagreement": disagreement}
    per_system = {s: {"post": post[s], "predicted": predicted[s], "combination": combinations[s]} for s in systems}
    return shared, per_system


def _save(ws: Workspace, key: str, shared: dict[str, Any], per_system: dict[str, dict[str, Any]]) -> None:
    """Keep the predictions in the store (one metrics row per system, one shared)."""
    store = ws.store
    if store is None:
        return
    pre, dis = shared["pre"], shared["disagreement"]
    columns: dict[str, dict[str, float]] = {key_: {q: v[key_] for q, v in pre.items()} for key_ in PRE}
    columns["disagreement"] = dict(dis)
    store.put_metrics(cache_key(qpp=key, part=SHARED), dataset=ws.dataset.queries_hash, system="qpp",
                      params={"qpp": key}, split=None, metrics={}, per_query=columns)
    for s, part in per_system.items():
        cols = {p: {q: v[p] for q, v in part["post"].items() if p in v} for p in POST}
        cols["predicted"] = dict(part["predicted"])
        c: Combination = part["combination"]
        store.put_metrics(cache_key(qpp=key, part=s), dataset=ws.dataset.queries_hash, system="qpp:" + s,
                          params={"qpp": key}, split=None, metrics={"judged": c.judged, "folds": c.folds},
                          per_query=cols)


def _load(ws: Workspace, key: str, query_ids: Sequence[str], systems: Sequence[str]
          ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """What ``_save`` kept under ``key``, or None when any part is missing or incomplete."""
    store = ws.store
    if store is None:
        return None
    got = store.get_metrics(cache_key(qpp=key, part=SHARED))
    if got is None:
        return None
    columns = got[1]
    try:
        pre = {q: {p: float(columns[p][q]) for p in PRE} for q in query_ids}
        dis = {q: float(columns["disagreement"][q]) for q in query_ids}
        per_system: dict[str, dict[str, Any]] = {}
        for s in systems:
            row = store.get_metrics(cache_key(qpp=key, part=s))
            if row is None:
                return None
            metrics, cols = row
            post = {q: {p: float(cols[p][q]) for p in POST if q in cols.get(p, {})} for q in query_ids}
            judged, folds = int(metrics["judged"]), int(metrics["folds"])
            how: Literal["label-free", "fitted"] = "fitted" if judged else "label-free"
            per_system[s] = {"post": post, "predicted": {q: float(cols["predicted"][q]) for q in query_ids},
                             "combination": Combination(s, how, judged, folds)}
    except (KeyError, TypeError, ValueError):  # a row of another shape: computed again
        return None
    return {"pre": pre, "disagreement": dis}, per_system


def predict(ws: Workspace, query_ids: Sequence[str] | None = None, systems: Sequence[str] = BASE_SYSTEMS,
            k: int = 100, labels: Literal["auto", "none"] = "auto") -> Predictions:
    """Every predictor and the combined prediction of each query (module docstring).

    Args:
        ws: The workspace.
        query_ids: The queries (None: every query of the data set), each one of the data set's.
        systems: The systems whose lists are read; those still being built are left out.
        k: How deep each list is read (NQC's depth; WIG reads 5, clarity 50, coherence 10).
        labels: "auto": fitted where at least ``combine.MIN_FIT`` queries are judged; "none":
            label-free always.

    Returns:
        The predictions (``Predictions``), hardest first.

    Raises:
        ValueError: An unknown query or system, ``k`` below 1, ``labels`` neither, or no system ready.
    """
    if labels not in LABELS:
        raise ValueError(f"labels is one of {', '.join(LABELS)}, not {str(labels)[:40]!r}")
    if k < 1:
        raise ValueError(f"k is at least 1, not {k}")
    ids = list(dict.fromkeys(ws.dataset.queries if query_ids is None else query_ids))
    unknown = [q for q in ids if q not in ws.dataset.queries]
    if unknown:
        raise ValueError(f"{len(unknown):,} query id(s) not in {ws.dataset.name}, first {unknown[0][:60]!r}")
    for s in systems:
        ws.system(s)  # an unknown name: its ValueError
    waiting = set(ws.pending(systems))
    ready = [s for s in dict.fromkeys(systems) if s not in waiting]
    if not ready:
        raise ValueError(f"no system is ready yet ({', '.join(systems) or 'none asked'}): wait for the index builds")
    groups = _groups(ws, ids)
    key = _key(ws, ids, ready, groups, k, labels)
    found = _load(ws, key, ids, ready)
    if found is None:
        found = _compute(ws, ids, ready, groups, k, labels)
        _save(ws, key, *found)
    shared, per_system = found
    out = []
    for q in ids:
        predicted = {s: per_system[s]["predicted"][q] for s in ready}
        out.append(QueryPrediction(q, ws.dataset.queries[q], dict(shared["pre"][q]),
                                   {s: dict(per_system[s]["post"][q]) for s in ready},
                                   float(shared["disagreement"][q]), predicted,
                                   1.0 - sum(predicted.values()) / len(predicted)))
    out.sort(key=lambda p: (-round(p.difficulty, 12), p.query_id))
    return Predictions(tuple(ready), {s: per_system[s]["combination"] for s in ready}, tuple(out))
