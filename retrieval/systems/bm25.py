"""BM25 as a system: the engine's lexical index (``retrieval.index.bm25_index``, or Milvus's), its settings
(declared: k1, b and the variant; a workspace holds them as ``BM25Settings``) and tokenizer in the cache
key, its exact score of any document for PNR."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data.run import Run
from retrieval.index.bm25_index import BM25Index
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.declared import CHOICE, FLOAT, Capabilities, Citation, Parameter, parse

if TYPE_CHECKING:
    from retrieval.systems.reads import SystemWorkspace


K1 = Parameter("k1", FLOAT, 0.9, "term-frequency saturation", low=0)
B = Parameter("b", FLOAT, 0.4, "length normalization", low=0, high=1)
METHOD = Parameter("method", CHOICE, "lucene", "the variant, as bm25s names it (idf and saturation)",
                   choices=BM25Index.METHODS)


def check_k1(value: object) -> float:
    """BM25's k1 (term-frequency saturation) as its declaration reads it (``declared.parse``: a finite
    number of 0 or more, by the one number grammar); a ValueError in one line otherwise (a NaN k1
    scores every document 0)."""
    return float(parse(K1, value, BM25.short))


def check_b(value: object) -> float:
    """BM25's b (length normalization) as its declaration reads it: a number from 0 to 1."""
    return float(parse(B, value, BM25.short))


def lexical_params(ws: SystemWorkspace) -> dict[str, Any]:
    """What BM25's scores depend on: k1, b, the method and the tokenizer (stemmer, stopwords)."""
    return {"bm25": {**ws.bm25_settings.as_key(), "tokenizer": ws.tokenizer.config}}


class BM25(SystemBase):
    key, label, short = "bm25", "BM25", "BM25"
    needs = Needs(lexical=True)
    parameters = (K1, B, METHOD)
    citation = Citation("Chris Kamphuis, Arjen P. de Vries, Leonid Boytsov, Jimmy Lin",
                        "Which BM25 Do You Mean? A Large-Scale Reproducibility Study of Scoring Variants",
                        "ECIR 2020", 2020, "§2, the variants (Lucene's the default)")
    capabilities = Capabilities(exact_scores=True)

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {**ws.engine.key, **lexical_params(ws)}

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        return ws.lexical.search(queries, k)

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        ids = ws.dataset.doc_ids
        scores = {q: ws.lexical.scores_at(queries[q], np.asarray(rs, dtype=np.int64)) for q, rs in rows.items()}
        return {q: {ids[r]: float(s) for r, s in zip(rs, scores[q])} for q, rs in rows.items()}

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        return probe.lexical[:k]

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> None:
        return None  # every hit carries BM25's per-term contributions already (``retrieval.side_by_side``)
