"""Whether the dense encoder can be trusted on a corpus, without labels — so that the label-free
hybrid does not let an encoder that cannot read the corpus pull BM25 down.

Two checks, either of which marks the encoder unreliable:

* **language** — an English-only encoder on a corpus mostly in another language
  (``language.encoder_mismatch`` on a seeded sample, py3langid);
* **collapse** — the encoder maps the corpus's documents almost alike. Its *spread* on a text set,
  1 − the mean cosine between the embeddings of distinct documents of a seeded sample, is held
  against its spread on English reference text (the bundled demo corpus, a sample of the same
  size): an encoder that reads the corpus spreads its documents about as far apart as it spreads
  English ones; one that sees strings of unknown word pieces (a script or language it was not
  trained on, transliterated text, tables of codes) packs them into a narrow cone, where every
  cosine is nearly the same and the ranking is noise. The comparison is with the encoder's own
  spread, not a fixed cosine, because encoders differ: all-MiniLM-L6-v2 puts unrelated English
  passages near cosine 0, E5-style encoders near 0.7. Collapsed below ``COLLAPSE_RATIO`` of the
  reference spread (MiniLM: 0.94 on English, 0.10 on the demo written in Greek letters).

The sample's embeddings are the corpus's own (the dense index's vectors, or the store's, where the
dense build put them: ``corpus_sample_vectors``), so the check costs a few hundred dot products once the
corpus is encoded; the reference sample is encoded once per encoder and cached in the store too.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retrieval.data.language import detect_language, encoder_mismatch

if TYPE_CHECKING:
    from retrieval.systems.reads import SystemWorkspace

SAMPLE = 200  # documents sampled from the corpus, and from the reference text
COLLAPSE_RATIO = 0.3  # spread on the corpus below this share of the spread on English: collapsed
REFERENCE = Path(__file__).resolve().parents[2] / "data" / "demo" / "corpus.jsonl"  # the repository's data/demo
_checks: dict[tuple[str, str], DenseReliability] = {}  # (corpus hash, encoder fingerprint) -> the checks


@dataclass(frozen=True)
class DenseReliability:
    """What the checks found (plain data: ``clear_lambda`` words the reason where λ is shown)."""

    encoder: str
    language: str  # the corpus's detected language (ISO 639-1)
    language_share: float  # of the sampled documents detected as that language
    language_mismatch: bool  # an English-only encoder, a corpus mostly in another language
    spread: float | None  # 1 − mean cosine between distinct sampled documents of the corpus
    reference_spread: float | None  # the same on English reference text (None: not available)

    @property
    def collapsed(self) -> bool:
        return (self.spread is not None and self.reference_spread is not None and self.reference_spread > 0
                and self.spread < COLLAPSE_RATIO * self.reference_spread)

    @property
    def reliable(self) -> bool:
        return not (self.language_mismatch or self.collapsed)


def spread(vectors: np.ndarray) -> float:
    """1 − the mean cosine between distinct rows (0: every row points the same way)."""
    v = np.asarray(vectors, dtype=np.float64)
    n = len(v)
    if n < 2:
        return 1.0
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    total = v.sum(axis=0)
    mean_cos = (float(total @ total) - n) / (n * (n - 1))  # Σ_{i≠j} cos / (n(n−1)), in O(n·d)
    return 1.0 - mean_cos


def sample_rows(texts: list[str], n: int = SAMPLE, seed: int = 0) -> list[int]:
    """The rows of a seeded sample of the non-empty texts, in corpus order."""
    rows = [i for i, t in enumerate(texts) if t.strip()]
    if len(rows) <= n:
        return rows
    picked = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in picked]


def sample(texts: list[str], n: int = SAMPLE, seed: int = 0) -> list[str]:
    """A seeded sample of the non-empty texts, in corpus order."""
    return [texts[i] for i in sample_rows(texts, n, seed)]


def corpus_sample_vectors(ws: SystemWorkspace) -> np.ndarray:
    """The encoder's vectors of the corpus's sample (``sample_rows``). Read from the dense index where it
    holds them (``DenseRetriever.held_vectors``: nothing encoded, with or without a store); else from the
    store, where the dense build put them, encoding what it lacks (another engine's index without a store)."""
    from retrieval.index.dense_index import embed_texts

    corpus, dense = ws.corpus, ws.dense
    rows = sample_rows(corpus.texts)
    held = dense.held_vectors(corpus.doc_ids, rows) if dense.encoder.fingerprint == ws.encoder.fingerprint else None
    return held if held is not None else embed_texts(ws.encoder, [corpus.texts[i] for i in rows], ws.store)


def reference_texts(n: int = SAMPLE) -> list[str]:
    """English reference passages: a seeded sample of the bundled demo corpus (empty if absent)."""
    import json

    if not REFERENCE.exists():
        return []
    docs = [json.loads(line) for line in REFERENCE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sample([f"{d.get('title', '')}. {d.get('text', '')}" if d.get("title") else d.get("text", "")
                   for d in docs], n)


def dense_reliability(ws: SystemWorkspace) -> DenseReliability:
    """Both checks for ``ws``'s encoder on ``ws``'s corpus (the corpus must be encoded: ``ws.dense``),
    made once per corpus and encoder: the label-free λ and the prior of a tuned one both ask."""
    from retrieval.index.dense_index import embed_texts

    encoder = ws.encoder
    key = (ws.corpus.hash, encoder.fingerprint)
    if key not in _checks:
        guess = detect_language(ws.corpus.texts)
        corpus = corpus_sample_vectors(ws)
        reference = reference_texts()
        ref = spread(embed_texts(encoder, reference, ws.store)) if len(reference) > 1 else None
        _checks[key] = DenseReliability(encoder.name, guess.code, guess.share, encoder_mismatch(guess, encoder.name),
                                        spread(corpus), ref)
    return _checks[key]
