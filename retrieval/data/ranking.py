"""The one order of a ranked list, trec_eval's: score descending, then document id descending.

trec_eval (``trec_eval.c`` 9.0.8, ``form_res_rels.c``'s ``comp_sim_docno``) sorts a query's
retrieved documents by score, highest first, and documents of equal score by
``strcmp(docno2, docno1)``: the document id compared byte by byte, the greater first. The rank
column of a run file is read and ignored. pytrec_eval (Van Gysel and de Rijke, "Pytrec_eval: An
Extremely Fast Python Interface to trec_eval", SIGIR 2018) runs trec_eval's own code, and
ir_measures (MacAvaney, Macdonald and Ounis, "Streamlining Evaluation with ir-measures", ECIR 2022,
§3) hands nDCG, P, R, AP and RR to it, so all three rank a list this way.

RankScope ranks by the same rule wherever a ranked list is made or evaluated — which documents
survive a cut among equal scores (``retrieval.index.top_k``, the fusions, the dense index), the
order a run file's lines are written in (``retrieval.files.trec``) and read back in
(``retrieval.data.readers.runs``), and the order the metrics count (``retrieval.evaluation.
rank_metrics``) — so a figure RankScope reports equals trec_eval's on the run file it writes.

Python compares ``str`` by code point, and UTF-8 keeps code-point order in its bytes (a lead byte
grows with the code point, and a longer encoding starts with a greater lead byte), so comparing
two ids as Python strings is ``strcmp`` of their UTF-8 bytes (an id holds no NUL and no lone
surrogate: ``readers.records.require_id``). numpy's fixed-width ``str_`` arrays compare by code
point too but drop trailing NULs, so ids are ordered here through Python's comparison only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from retrieval.data.run import Run

RULE = "score descending, then document id descending (trec_eval's order: strcmp of the UTF-8 ids)"

Hits = list[tuple[str, float]]


def sorted_hits(hits: Iterable[tuple[str, float]]) -> Hits:
    """``hits`` (``(document id, score)`` pairs) in trec_eval's order: score descending, then
    document id descending. A document listed twice stays twice (the evaluators keep one)."""
    return sorted(((d, float(s)) for d, s in hits), key=_key, reverse=True)


def _key(hit: tuple[str, float]) -> tuple[float, str]:
    return hit[1], hit[0]


def sorted_rows(hits: Iterable[tuple[int, float]], doc_ids: Sequence[str]) -> list[tuple[int, float]]:
    """``hits`` as ``(row, score)`` pairs, ``doc_ids[row]`` each one's document, in trec_eval's order
    (``sorted_hits``, on rows where an index holds them)."""
    return sorted(hits, key=lambda h: (h[1], doc_ids[h[0]]), reverse=True)


def rank(run: Run) -> Run:
    """``run`` with every query's list in trec_eval's order (``sorted_hits``)."""
    return {q: sorted_hits(hits) for q, hits in run.items()}


def tie_rank(doc_ids: Sequence[str]) -> np.ndarray:
    """Each document's place among ``doc_ids`` in trec_eval's tie order (int64, aligned with
    ``doc_ids``): 0 for the greatest id, which ranks first among documents of equal score.

    Computed once per corpus by whoever holds the ids (an index caches it) so that the ranking
    step stays on integer rows: among equal scores, the smaller ``tie_rank`` ranks first. Equal ids
    (a corpus holds none) take consecutive places in their given order."""
    ids = list(doc_ids)
    order = sorted(range(len(ids)), key=ids.__getitem__, reverse=True)
    out = np.empty(len(ids), dtype=np.int64)
    out[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
    return out


def order(group: np.ndarray, scores: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """The permutation that ranks flat lists in trec_eval's order: by ``group`` (a query's index,
    ascending), then score descending, then document id descending — ``ids[i]`` the document of
    entry ``i``.

    The ids are compared only where a group holds equal scores (most lists have few ties), by
    Python's string order over just those entries; everything else is one numeric sort."""
    group = np.asarray(group, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    first = np.lexsort((-scores, group))
    same = (group[first][1:] == group[first][:-1]) & (scores[first][1:] == scores[first][:-1])
    if not same.any():
        return first
    tied = np.zeros(len(first), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    at = first[tied]
    places = tie_rank([ids[i] for i in at.tolist()])
    key = np.zeros(len(first), dtype=np.int64)
    key[at] = places
    return np.lexsort((key, -scores, group))
