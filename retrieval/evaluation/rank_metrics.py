"""Ranked-list metrics computed straight from a ``Run``, vectorized with numpy: ranx's definitions
(ranx 0.3.21, trec_eval's conventions) without building ranx's numba ``Run`` / ``Qrels`` objects,
which cost seconds per run of 40 queries × 1,000 documents and a numba compile in every process.

Definitions, as ranx computes them (Bassani, "ranx: A Blazing-Fast Python Library for Ranking
Evaluation and Comparison", ECIR 2022, §2): a document is relevant when its integer label is ≥ 1
(> 0); the top k is the first ``min(k, list length)`` of the list (``k`` 0 or absent: the whole
list); R is the number of relevant labelled documents, retrieved or not.

* ``ndcg@k``: linear gain, DCG = Σ_{i ≤ k} label_i / log2(i + 1) over the top k, divided by the same
  sum over the labels sorted best first (Järvelin and Kekäläinen, "Cumulated Gain-Based Evaluation
  of IR Techniques", ACM TOIS 20(4), 2002, §2.2); ``ndcg_burges@k`` with gain 2^label − 1.
* ``mrr@k``: 1 / rank of the first relevant document in the top k, else 0.
* ``recall@k``: relevant in the top k / R. ``precision@k`` (``p@k``): relevant in the top k / k
  (a list shorter than k still divides by k). ``hits@k``: relevant in the top k; ``hit_rate@k``: 1
  when there is one.
* ``map@k`` (``map``: the whole list): Σ over relevant ranks r ≤ k of precision@r, divided by R.

The list is ranked as trec_eval ranks it (``retrieval.data.ranking``): by score, best first, equal
scores by document id, descending (``strcmp``), whatever order the list holds them in; a document
listed twice counts once, with its last score (a ranx run is a ``{doc: score}`` dict built from the
list). So every value here equals trec_eval's (pytrec_eval's, ir_measures') on the run file
``retrieval.files.trec`` writes (``tests/reference/test_trec_agreement.py``). ranx itself orders equal scores
like a stable sort on lists of up to 15 documents and leaves them in an unspecified order on longer
lists (numba's quicksort), so ``ranx_scores`` can differ where a tie straddles a relevant document.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval import numbers
from retrieval.data import ranking
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run

FAMILIES = ("ndcg", "ndcg_burges", "mrr", "recall", "precision", "map", "hits", "hit_rate")
_ALIASES = {"p": "precision"}
_BLOCK = 1024  # queries per block: a block's matrices are queries × longest list


def parse(metric: str) -> tuple[str, int] | None:
    """``("recall", 100)`` for ``"recall@100"``, ``("map", 0)`` for ``"map"`` (0: the whole list);
    None for a name this module does not compute (``bpref``, ``ndcg@10-l2``, ``rbp.95``, ...)."""
    name, _, cutoff = metric.partition("@")
    name = _ALIASES.get(name, name)
    if name not in FAMILIES:
        return None
    if not cutoff:
        return (name, 0) if "@" not in metric else None
    return (name, int(cutoff)) if numbers.is_count(cutoff) else None


def supported(metric: str) -> bool:
    """Whether ``scores`` computes ``metric``."""
    return parse(metric) is not None


def scores(run: Run, qrels: Qrels, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """metric -> query id -> value for every query of ``qrels``; a query whose list is empty or
    absent scores 0, as does one without a relevant label. Raises ``ValueError`` naming a metric
    this module does not compute (``supported``)."""
    metrics = list(metrics)
    parsed = {}
    for m in metrics:
        p = parse(m)
        if p is None:
            raise ValueError(f"metric {m!r} is not one of {', '.join(FAMILIES)} (with an optional @k)")
        parsed[m] = p
    qids = list(qrels)
    out = {m: dict.fromkeys(qids, 0.0) for m in metrics}
    ranked = [q for q in qids if run.get(q)]
    for start in range(0, len(ranked), _BLOCK):
        block = ranked[start:start + _BLOCK]
        gains, lengths = _ranked_labels(run, qrels, block)
        ideal = _ideal_labels(qrels, block)
        for m, (name, k) in parsed.items():
            values = _metric(name, k, gains, lengths, ideal)
            out[m].update(zip(block, values.tolist()))
    return out


def _ranked_labels(run: Run, qrels: Qrels, qids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(queries × longest list matrix of each ranked document's integer label, 0 past a list's end;
    each list's length), the lists in trec_eval's order (``ranking.order``)."""
    labels, scores_, sizes = [], [], []
    docs: list[str] = []
    for q in qids:
        hits = dict(run[q])  # one entry per document, with its last score
        docs.extend(hits)
        judged = {d: int(v) for d, v in qrels.get(q, {}).items()}
        labels.append(np.array([judged.get(d, 0) for d in hits], dtype=np.float64))
        scores_.append(np.fromiter(hits.values(), dtype=np.float64, count=len(hits)))
        sizes.append(len(hits))
    lengths = np.asarray(sizes, dtype=np.int64)
    row = np.repeat(np.arange(len(qids)), lengths)
    order = ranking.order(row, np.concatenate(scores_), docs)  # by query, score descending, then id descending
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    col = np.arange(len(row)) - starts[row]  # rows are grouped already: the place within the query
    matrix = np.zeros((len(qids), int(lengths.max())), dtype=np.float64)
    matrix[row, col] = np.concatenate(labels)[order]
    return matrix, lengths


def _ideal_labels(qrels: Qrels, qids: list[str]) -> np.ndarray:
    """Queries × most relevant documents matrix of the relevant labels, best first (0 past the end)."""
    rel = [sorted((int(v) for v in qrels.get(q, {}).values() if int(v) >= 1), reverse=True) for q in qids]
    matrix = np.zeros((len(qids), max((len(r) for r in rel), default=0)), dtype=np.float64)
    for i, r in enumerate(rel):
        matrix[i, :len(r)] = r
    return matrix


def _discount(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def _metric(name: str, k: int, labels: np.ndarray, lengths: np.ndarray, ideal: np.ndarray) -> np.ndarray:
    top = labels[:, :k] if k else labels  # past a list's end the labels are 0: nothing counts there
    relevant = top >= 1
    n_relevant = (ideal >= 1).sum(axis=1)
    if name in ("ndcg", "ndcg_burges"):
        def gain(g: np.ndarray) -> np.ndarray:
            return np.exp2(g) - 1.0 if name == "ndcg_burges" else g

        dcg: np.ndarray = (np.where(relevant, gain(top), 0.0) * _discount(top.shape[1])).sum(axis=1)
        best = ideal[:, :k] if k else ideal
        idcg = (gain(best) * _discount(best.shape[1])).sum(axis=1)
        return dcg / np.where(idcg == 0.0, 1.0, idcg)
    if name == "mrr":
        first = relevant.argmax(axis=1)
        return np.where(relevant.any(axis=1), 1.0 / (first + 1), 0.0)
    hits: np.ndarray = relevant.sum(axis=1).astype(np.float64)
    if name == "hits":
        return np.where(n_relevant > 0, hits, 0.0)
    if name == "hit_rate":
        return (hits > 0).astype(np.float64)
    if name == "precision":
        depth = np.full(len(lengths), float(k)) if k else lengths.astype(np.float64)
        return np.where(depth > 0, hits / np.maximum(depth, 1.0), 0.0)
    per_rank = np.cumsum(relevant, axis=1) / np.arange(1, top.shape[1] + 1)
    numerator = hits if name == "recall" else np.where(relevant, per_rank, 0.0).sum(axis=1)  # "map"
    return np.where(n_relevant > 0, numerator / np.maximum(n_relevant, 1), 0.0)


def judged(run: Run, qrels: Qrels, k: int) -> dict[str, float]:
    """query id -> judged@k for every query of ``qrels``: the share of the top k that carries a
    label of any grade, 0 included, divided by ``min(k, list length)``; 0 for an empty or absent list.

    As ir-measures 0.4.3's "judged" provider computes it (after OpenNIR's), a repeated document
    once with its last score, but the list ranked by the one rule every other metric here counts
    its top k by (trec_eval's: equal scores by document id descending, ``ranking``), so the top k
    judged@k measures is the top k nDCG@k counts and a judging pool holds. ir-measures orders equal
    scores by document id ascending, so its value differs where a tie straddles the cut.
    """
    if k < 1:
        raise ValueError(f"judged@k needs k ≥ 1, not {k}")
    out = dict.fromkeys(qrels, 0.0)
    ranked = [q for q in qrels if run.get(q)]
    if not ranked:
        return out
    docs: list[str] = []
    scores_, sizes = [], []
    for q in ranked:
        hits = dict(run[q])
        docs.extend(hits)
        scores_.append(np.fromiter(hits.values(), dtype=np.float64, count=len(hits)))
        sizes.append(len(hits))
    lengths = np.asarray(sizes, dtype=np.int64)
    row = np.repeat(np.arange(len(ranked)), lengths)
    order = ranking.order(row, np.concatenate(scores_), docs)  # by query, score descending, then id descending
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    top = order[(np.arange(len(order)) - starts[row]) < k]  # rows stay grouped: the first k of each
    labelled = np.fromiter((docs[i] in qrels[ranked[row[i]]] for i in top.tolist()),
                           dtype=bool, count=len(top))
    counts = np.bincount(row[top], weights=labelled, minlength=len(ranked))
    out.update(zip(ranked, (counts / np.minimum(lengths, k)).tolist()))
    return out


def ranx_scores(run: Run, qrels: Qrels, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """metric -> query id -> value by ranx itself (any name ranx knows; ``p@k`` as ``precision@k``),
    for every query of ``qrels``, a query with an empty or absent list scoring 0: what ``scores``
    reproduces, and the path for the names it does not compute."""
    from retrieval.evaluation.numba_guard import NUMBA_LOCK, import_cached

    import_cached("ranx")  # its kernels compiled once, then loaded, the few it leaves uncached too (numba_guard)
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate

    metrics = list(metrics)
    names = ["precision" + m[1:] if m == "p" or m.startswith("p@") else m for m in metrics]
    # a query the run retrieved nothing for scores 0 on every ranked-list metric; ranx is not asked
    # about it (a run of nothing but empty lists makes it fail)
    ranked = {q: docs for q, docs in qrels.items() if run.get(q)}
    got: dict[str, dict[str, float]] = {name: {} for name in names}
    if ranked and metrics:
        with NUMBA_LOCK:  # ranx runs numba-parallel code: one thread at a time (see numba_guard)
            rq = RQrels({q: {d: int(v) for d, v in docs.items()} for q, docs in ranked.items()})
            rr = RRun({q: {d: float(s) for d, s in run[q]} for q in ranked})
            evaluate(rq, rr, names, save_results_in_run=True, make_comparable=True)
        got = rr.scores
    return {m: {q: float(got[name].get(q, 0.0)) for q in qrels} for m, name in zip(metrics, names)}
