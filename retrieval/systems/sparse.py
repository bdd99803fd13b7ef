"""Learned sparse retrieval (SPLADE, ``retrieval.index.splade``) as a system: the third family beside BM25
and the dense encoder. Its cache key is the sparse model's fingerprint; its scores are exact dot
products of term weights, so it has exact scores for PNR; and a hit is explained by the terms that
made its score — the query's terms and the expansion terms the model added to either side.

The vectors are cached in the store; the engine keeps the index (in-process: a sparse matrix;
Milvus: a collection with a sparse vector field, searched by inner product).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval.data.run import Run
from retrieval.index.terms import TermScore
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.declared import DOCUMENT_EXPANSION, QUERY_EXPANSION, QUERY_TERM, Capabilities, Citation

if TYPE_CHECKING:
    from retrieval.index.builds import IndexBuild
    from retrieval.systems.reads import SystemWorkspace


class Splade(SystemBase):
    key, label, short = "splade", "Learned sparse (SPLADE)", "SPLADE"
    needs = Needs(sparse=True)
    citation = Citation("Thibault Formal, Benjamin Piwowarski, Stéphane Clinchant", "SPLADE: Sparse Lexical and "
                        "Expansion Model for First Stage Ranking", "SIGIR 2021, arXiv:2107.05720", 2021,
                        "§3, the model's term weights log(1 + ReLU(·)) and their dot product")
    capabilities = Capabilities(exact_scores=True,
                                explanation=frozenset({QUERY_TERM, QUERY_EXPANSION, DOCUMENT_EXPANSION}))

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {"sparse_model": ws.sparse.model.fingerprint}

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        return ws.sparse.search(queries, k)

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        ids, sparse = ws.dataset.doc_ids, ws.sparse
        vecs = dict(zip(rows, sparse.model.encode([queries[q] for q in rows], query=True)))
        return {q: {ids[r]: float(s) for r, s in zip(rs, sparse.index.scores(vecs[q], rs))} for q, rs in rows.items()}

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        rows, scores = ws.sparse.index.top(probe.sparse, k)
        ids = ws.dataset.doc_ids
        return [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> list[TermScore]:
        text = ws.dataset.docs[ws.dataset.doc_ids[row]].full_text  # not ws.corpus: it lists every text
        return ws.sparse.explain(probe.sparse, row, text, query_text=probe.text)

    def waits_for(self, ws: SystemWorkspace) -> tuple[IndexBuild[Any, Any], ...]:
        return (ws.builds["sparse"],)
