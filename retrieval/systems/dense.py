"""The dense encoder as a system: FAISS (or the engine's) index over the corpus's vectors. A
fine-tuned encoder, an int8 or a PCA-reduced index are this same system over a sibling workspace
(``Workspace.with_model``, ``with_index``): parameters of it, told apart by its cache key."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data.run import Run
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.declared import DENSE_WHY, Capabilities, Citation
from retrieval.systems.dense_why import DenseWhy, explain_dense

if TYPE_CHECKING:
    from retrieval.index.builds import IndexBuild
    from retrieval.systems.reads import SystemWorkspace


def dense_params(ws: SystemWorkspace) -> dict[str, Any]:
    """What the dense scores depend on: the encoder's fingerprint (weights, precision, route), the
    index kind and, for a compressed index, its dimensions and that scores come from its codes."""
    p: dict[str, Any] = {"model": ws.encoder.fingerprint, "index": ws.index_kind}
    if ws.index_dims is not None:
        p["dims"] = ws.index_dims
    if ws.index_kind == "sq8" or ws.index_dims is not None:
        p["scores"] = "decoded"  # re-scored with the compressed vectors, not the float32 ones
    return p


class Dense(SystemBase):
    key, label, short = "dense", "Dense", "dense"
    needs = Needs(vectors=True)
    citation = Citation("Nils Reimers, Iryna Gurevych", "Sentence-BERT: Sentence Embeddings using Siamese "
                        "BERT-Networks", "EMNLP-IJCNLP 2019, arXiv:1908.10084", 2019,
                        "§3, the bi-encoder and its cosine")
    capabilities = Capabilities(exact_scores=True, explains_score=DENSE_WHY)

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {**ws.engine.key, **dense_params(ws)}

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        return ws.dense.search(queries, k)

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        ids = ws.dataset.doc_ids
        qv = ws.dense.encode_queries({q: queries[q] for q in rows})
        scores = [ws.dense.index.scores(qv[i], np.asarray(rs, dtype=np.int64)) for i, rs in enumerate(rows.values())]
        return {q: {ids[r]: float(s) for r, s in zip(rs, scores[i])} for i, (q, rs) in enumerate(rows.items())}

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        return probe.dense[:k]

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> None:
        return None  # a cosine has no terms to show: ``explain_score`` says which words and passages carry it

    def explain_score(self, ws: SystemWorkspace, probe: Probe, rows: Sequence[int],
                      split: str | None) -> dict[int, DenseWhy]:
        return explain_dense(ws, probe.text, rows, probe.vector, keep=False)  # a search writes nothing (``Probe``)

    def waits_for(self, ws: SystemWorkspace) -> tuple[IndexBuild[Any, Any], ...]:
        return (ws.builds["dense"],)
