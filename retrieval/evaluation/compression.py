"""Embedding compression: quality and bytes per document of int8 and reduced-dimension indexes.

What the Baidu paper does (Liu et al., "Pre-trained Language Model for Web-scale Retrieval in
Baidu Search", KDD 2021, arXiv:2106.03373, §5.1, appendix 9.2, Table 4):

* **Quantization** — query and document embeddings go from float32 to uint8. From embeddings of
  a validation set it takes each dimension's range (s_i^min, s_i^max), splits it into L = 255
  intervals of length Q_i = (s_i^max − s_i^min) / L, and stores

      QI_i(r_i) = ⌊(r_i − s_i^min) / Q_i⌋,      decoded as   r̃_i = QI_i(r_i)·Q_i + Q_i/2 + s_i^min.

  FAISS's 8-bit scalar quantizer (``IndexScalarQuantizer(d, QT_8bit, METRIC_INNER_PRODUCT)``,
  range statistic ``RS_minmax``) is exactly this: it trains per-dimension min/max, encodes
  ⌊255·(r − min)/(max − min)⌋ and decodes to the middle of the interval. We train the ranges on the
  corpus embeddings themselves (the paper used a validation set), and FAISS keeps the query in
  float32 (asymmetric: ⟨q, d̃⟩; the paper quantizes the query too, to save transmission). Each
  component is off by at most Q_i/2, so |⟨q, d̃⟩ − ⟨q, d⟩| ≤ Σ_i |q_i|·Q_i/2. Paper: 4× less
  storage, PNR unchanged (Table 4: 1024 → 256 bytes per document).
* **Compression** — a fully connected layer trained jointly with the encoders maps the 768-d
  output to 256 dimensions (3× smaller, PNR 2.33 → 2.26 on search logs). We do not retrain the
  encoder, so as our own stand-in for that learned layer we project onto the corpus embeddings'
  top principal axes (``retrieval.index.dense_index.pca_projection``: a linear map from ``faiss.PCAMatrix``,
  without centring), optionally followed by the 8-bit quantizer — the paper's full pipeline.

Every variant is a dense index kind of a ``Workspace`` (``ws.with_index(kind, dims)``), so its
runs, metrics and tuned λ are cached under their own parameters; hybrid re-scores with the
compressed vectors (``DenseIndex.scores``), as a deployment keeping only those could.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.evaluation.intervals import Interval
from retrieval.evaluation.measures import Evaluation, compare
from retrieval.evaluation.metrics import SIGNIFICANT, SUMMARY_METRICS, interval_text
from retrieval.index.dense_index import DenseIndex
from retrieval.systems import ENCODER_SYSTEMS, HYBRID
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace

DEFAULT_VARIANTS = (("flat", None), ("sq8", None), ("flat", 128), ("sq8", 128))


@dataclass
class CompressionRow:
    """One index variant: its size and its quality next to the float32 flat index."""

    label: str  # e.g. "int8 (sq8) · 128 dims"
    kind: str
    dims: int  # dimensions the index stores
    code_bytes: int  # bytes of one document's vector code
    index_bytes_per_doc: float  # serialized FAISS index / documents (adds ranges, projection)
    bytes_ratio: float  # code bytes / the float32 flat index's (4 × the encoder's dimensions)
    metrics: dict[str, dict[str, float]]  # system -> metric -> mean
    delta: dict[str, dict[str, float]]  # system -> metric -> mean − float32 flat's mean
    # "†": differs from flat (metrics.SIGNIFICANCE_LEVEL)
    marks: dict[str, dict[str, str]] = field(default_factory=dict)
    intervals: dict[str, dict[str, Interval]] = field(default_factory=dict)  # of each mean (95%)
    delta_intervals: dict[str, dict[str, Interval]] = field(default_factory=dict)  # of each Δ (paired, 95%)
    hybrid_lambda: float | None = None  # λ_test of this variant's hybrid (tuned with its own index)

    def to_dict(self) -> dict[str, Any]:
        """A flat row for a table: sizes, then "<system> <metric>", its 95% interval, its "Δ" column
        and the Δ's paired 95% interval (``[low, high]`` text; "" where there is none)."""
        row = {"index": self.label, "dims": self.dims, "λ_test": self.hybrid_lambda,
               "bytes/doc (codes)": self.code_bytes,
               "bytes/doc (index)": round(self.index_bytes_per_doc, 1), "× flat bytes": self.bytes_ratio}
        for system, values in self.metrics.items():
            for m, v in values.items():
                row[f"{system} {m}"] = v
                row[f"{system} {m} 95%"] = interval_text(self.intervals.get(system, {}).get(m))
                row[f"{system} {m} Δ"] = self.delta[system][m]
                row[f"{system} {m} Δ 95%"] = interval_text(self.delta_intervals.get(system, {}).get(m))
        return row


def variant_label(kind: str, dims: int | None) -> str:
    name = {"flat": "float32 (flat)", "sq8": "int8 (sq8)", "hnsw": "float32 (hnsw)"}[kind]
    return name if dims is None else f"{name} · {dims} dims"


def compression_table(ws: Workspace, split: str, variants: Sequence[tuple[str, int | None]] = DEFAULT_VARIANTS,
                      systems: Sequence[str] = ENCODER_SYSTEMS,
                      metrics: Sequence[str] = SUMMARY_METRICS) -> list[CompressionRow]:
    """Quality (dense and hybrid) and bytes per document of each (index kind, dims) variant.

    Deltas with their paired 95% intervals and "†" marks (paired permutation test,
    ``measures.compare``) are against the float32 flat index over the full embedding, computed in the
    same call; each mean carries its own 95% interval. Variants asking for at least as
    many dimensions as the encoder has are left out.
    """
    dim = ws.encoder.dim
    kept = [(k, d) for k, d in variants if d is None or d < dim]
    spaces = {v: variant_workspace(ws, *v) for v in dict.fromkeys([("flat", None), *kept])}
    evals = {v: _evaluations(w, split, systems) for v, w in spaces.items()}
    reference = evals[("flat", None)]
    return [_row(spaces[v], evals[v], reference, split, metrics) for v in kept]


def _row(ws: Workspace, ev: dict[str, Evaluation], reference: dict[str, Evaluation], split: str,
         metrics: Sequence[str]) -> CompressionRow:
    index = ws.dense.index
    if not isinstance(index, DenseIndex):
        raise ValueError("index compression is measured on in-process indexes (FAISS), not an engine's")
    compared = {s: {m: compare(reference[s], e, m) for m in metrics} for s, e in ev.items()}
    return CompressionRow(
        variant_label(ws.index_kind, ws.index_dims), ws.index_kind, index.stored.shape[1], index.bytes_per_doc,
        index.index_bytes / max(1, len(index.doc_ids)), index.bytes_per_doc / (4 * index.embeddings.shape[1]),
        metrics={s: {m: e.mean[m] for m in metrics} for s, e in ev.items()},
        delta={s: {m: e.mean[m] - reference[s].mean[m] for m in metrics} for s, e in ev.items()},
        marks={s: {m: SIGNIFICANT for m in metrics if compared[s][m].significant} for s in ev},
        hybrid_lambda=CLEAR.lambda_for(ws, split).value if HYBRID in ev else None,
        intervals={s: {m: e.interval(m) for m in metrics} for s, e in ev.items()},
        delta_intervals={s: {m: compared[s][m].interval for m in metrics} for s in ev})


def variant_workspace(ws: Workspace, kind: str, dims: int | None) -> Workspace:
    """``ws`` itself when its index already is (kind, dims), else ``ws.with_index(kind, dims)``."""
    return ws if (ws.index_kind, ws.index_dims) == (kind, dims) else ws.with_index(kind, dims)


def _evaluations(ws: Workspace, split: str, systems: Iterable[str]) -> dict[str, Evaluation]:
    return {s: ws.evaluate(s, split) for s in systems}


def reduced_dims(dim: int) -> int:
    """The reduced dimensionality offered beside an encoder of ``dim`` dimensions: 128 (a third of
    MiniLM's 384), or half of a smaller encoder's."""
    return 128 if dim > 128 else max(2, dim // 2)


def comparison_workspaces(ws: Workspace, extras: list[str] | None) -> dict[str, Workspace]:
    """``ws`` (label "") and the variants asked for, by label: ``"int8"`` → "int8 index" (FAISS SQ8),
    ``"pca"`` → "PCA <d> dims" (``reduced_dims``), a learned sparse model's folder (``is_sparse_folder``)
    → "fine-tuned SPLADE <folder name>", any other value a fine-tuned encoder's folder or id →
    "fine-tuned <folder name>"."""
    from pathlib import Path

    from retrieval.index.splade import is_sparse_folder

    out = {"": ws}
    for extra in extras or []:
        if extra == "int8":
            out["int8 index"] = ws.with_index("sq8")
        elif extra == "pca":
            dims = reduced_dims(ws.encoder.dim)
            out[f"PCA {dims} dims"] = ws.with_index("flat", dims)
        elif extra and is_sparse_folder(extra):
            out[f"fine-tuned SPLADE {Path(extra).name}"] = ws.with_sparse_model(extra)
        elif extra:
            out[f"fine-tuned {Path(extra).name}"] = ws.with_model(extra)
    return out
