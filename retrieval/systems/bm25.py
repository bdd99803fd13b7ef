"""BM25 as a system: the engine's lexical index (``retrieval.index.bm25_index``, or Milvus's), its settings
and tokenizer in the cache key, its exact score of any document for PNR."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from retrieval import numbers
from retrieval.data.run import Run
from retrieval.systems.base import Hits, Needs, Probe, SystemBase

if TYPE_CHECKING:
    from retrieval.workspace import Workspace


def check_k1(value: object) -> float:
    """BM25's k1 (term-frequency saturation): a finite number of 0 or more, by the one number grammar
    (``retrieval.numbers``); a ValueError in one line otherwise (a NaN k1 scores every document 0)."""
    k1 = numbers.number(value, "BM25's k1")
    if k1 < 0:
        raise ValueError(f"BM25's k1 is a finite number of 0 or more, not {numbers.shown(value)}")
    return k1


def check_b(value: object) -> float:
    """BM25's b (length normalization): a number from 0 to 1, by the one number grammar; a
    ValueError in one line otherwise."""
    b = numbers.number(value, "BM25's b")
    if not 0 <= b <= 1:
        raise ValueError(f"BM25's b is a number from 0 to 1, not {numbers.shown(value)}")
    return b


def lexical_params(ws: Workspace) -> dict:
    """What BM25's scores depend on: k1, b, the method and the tokenizer (stemmer, stopwords)."""
    return {"bm25": {**ws.bm25_args, "tokenizer": ws.tokenizer.config}}


class BM25(SystemBase):
    key, label, short = "bm25", "BM25", "BM25"
    needs = Needs(lexical=True)

    def params(self, ws: Workspace, split: str | None) -> dict:
        return {**ws.engine.key, **lexical_params(ws)}

    def search(self, ws: Workspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        return ws.lexical.search(queries, k)

    def exact_scores(self, ws: Workspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        ids = ws.dataset.doc_ids
        scores = {q: ws.lexical.scores_at(queries[q], np.asarray(rs, dtype=np.int64)) for q, rs in rows.items()}
        return {q: {ids[r]: float(s) for r, s in zip(rs, scores[q])} for q, rs in rows.items()}

    def one(self, ws: Workspace, probe: Probe, k: int, split: str | None) -> Hits:
        return probe.lexical[:k]

    def explain(self, ws: Workspace, probe: Probe, row: int) -> None:
        return None  # every hit carries BM25's per-term contributions already (``retrieval.side_by_side``)
