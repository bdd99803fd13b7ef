"""The CLEAR hybrid's score of a document split into the parts it adds up: λ·s_lex + s_emb (Gao et al.,
"Complement Lexical Retrieval Model with Semantic Residual Embeddings", ECIR 2021, arXiv:2004.13969, §3.4,
eq. 8; ``retrieval.systems.fusion``), where s_lex is BM25 divided by the query's largest possible BM25
score in the query-max space (``Hybrid.lex_norm``) and s_emb the dense index's score.

The lexical part is λ·s_lex; its terms are BM25's per-term contributions (``BM25Index.explain``) each
multiplied by the same factor (λ, over the query's BM25 maximum where BM25 is so divided), so they add
up to the lexical part. The dense part is s_emb, explained by ``dense_why`` (its query words and
passages). Where the hybrid ranks by BM25 alone (λ = ∞: an identifier lookup, or an encoder the
reliability check left out) its score is s_lex + ``TIE_BREAK``·s_emb (``fusion.fused``): the lexical
factor is then 1 (over the maximum) and the dense part is the cosine times ``TIE_BREAK``. Either way
lexical + dense is the hybrid's score as ``fusion.fused`` computes it.

Reciprocal-rank fusion and the min-max weighted sum are not split here: their parts are a rank's
reciprocal and a score normalized by the list it stands in, not a score of the document.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.systems.dense_why import DenseWhy, explain_dense
from retrieval.systems.fusion import TIE_BREAK, fused

if TYPE_CHECKING:
    from retrieval.systems.fusion import Hybrid
    from retrieval.systems.reads import SystemWorkspace


@dataclass(frozen=True)
class HybridWhy:
    """A CLEAR score split into its lexical and dense parts (module docstring).

    Attributes:
        score: The hybrid's score: ``lexical + dense``.
        lam: λ; None where the hybrid ranks by BM25 alone (λ = ∞).
        bm25_max: What BM25 is divided by (the query's largest possible score); None: raw BM25.
        lexical: The lexical part, λ·s_lex (BM25 alone: s_lex).
        terms: Each BM25 term's contribution times the lexical factor, ``(term, part)``; they add up to ``lexical``.
        dense: The dense part, s_emb (BM25 alone: ``TIE_BREAK``·s_emb).
        dense_weight: What s_emb is multiplied by: 1, or ``TIE_BREAK``.
        dense_why: The dense score's own explanation.
    """

    score: float
    lam: float | None
    bm25_max: float | None
    lexical: float
    terms: tuple[tuple[str, float], ...]
    dense: float
    dense_weight: float
    dense_why: DenseWhy

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def explain_split(ws: SystemWorkspace, h: Hybrid, lam: float, query: str, rows: Sequence[int],
                  qvec: np.ndarray | None = None, cached: bool = True, keep: bool = True) -> dict[int, HybridWhy]:
    """The split of the CLEAR score of each document at ``rows`` for ``query``.

    Args:
        ws: The workspace (its BM25 in this process explains the terms; its encoder the dense part).
        h: The hybrid as it ranks (``hybrid.make``): its BM25, its ``lex_norm``, whether ``query`` is a lookup.
        lam: The λ it ranks this query at (``LEX_ONLY``: BM25 alone).
        query: The query's text.
        rows: Rows of ``ws.dataset.doc_ids``.
        qvec: The query's vector where already encoded (``Probe.vector``).
        cached: Whether the dense part's explanation may come from memory or the store (``explain_dense``).
        keep: Whether the dense part's explanation is written to the store (``explain_dense``).

    Returns:
        ``{row: HybridWhy}``.
    """
    at = np.asarray(list(dict.fromkeys(int(r) for r in rows)), dtype=np.int64)
    alone = math.isinf(lam) or h.lex_only(query)
    whys = explain_dense(ws, query, at.tolist(), qvec, cached, keep)
    query_terms = ws.bm25.query_terms(query)  # tokenized once: the ceiling and the terms read it
    # CLEAR's BM25 is this process's (``hybrid.lexical_half``) and its ceiling that BM25's ``max_score`` (``make``)
    norm = max(ws.bm25.max_score(query_terms), 1e-9) if h.lex_norm is not None else None
    s_lex = np.asarray(h.bm25.scores_at(query, at), dtype=np.float64) / (norm if norm is not None else 1.0)
    weight = (1.0 if alone else lam) / (norm if norm is not None else 1.0)
    out = {}
    for r, lx in zip(at.tolist(), s_lex):
        dense = whys[r]
        score = float(fused(math.inf if alone else lam, float(lx), dense.score))
        lexical = float(lx) if alone else float(lam * lx)
        terms = tuple((c.term, c.score * weight) for c in ws.bm25.explain(query_terms, r) if c.score > 0)
        dense_weight = TIE_BREAK if alone else 1.0
        out[r] = HybridWhy(score, None if alone else lam, norm, lexical, terms, score - lexical, dense_weight, dense)
    return out
