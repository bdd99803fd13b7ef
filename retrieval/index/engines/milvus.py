"""The Milvus engine: BM25, the document vectors and the learned sparse vectors in Milvus (Milvus
Lite embedded in a file, or a Milvus server or cluster by URI), searched through ``pymilvus``.

What lives where. Up to three collections per corpus, each named after what it holds, so a changed
corpus, BM25 setting, encoder or sparse model never reads another's rows:

* ``rankscope_bm25_<corpus>_<settings>`` — ``doc_id`` (primary key), ``terms`` (the document's
  text analyzed by RankScope's own tokenizer: lowercased, stopwords dropped, stemmed, joined by
  spaces) and ``sparse``, the output of Milvus's BM25 function over ``terms`` (k1 and b as ours).
  Feeding Milvus our analyzed terms gives its BM25 our vocabulary (its own analyzers tokenize and
  stem differently); queries are analyzed the same way before they are sent.
* ``rankscope_dense_<corpus>_<encoder>`` — ``doc_id`` and ``vector`` (inner product; a FLAT index,
  or HNSW from ``HNSW_FROM`` documents like the in-process engine).
* ``rankscope_sparse_<corpus>_<model>`` — ``doc_id`` and ``sparse``, the document's learned sparse
  vector (SPLADE: Formal, Piwowarski, Clinchant, "SPLADE: Sparse Lexical and Expansion Model for
  First Stage Ranking", SIGIR 2021; ``retrieval.index.splade``) as a SPARSE_FLOAT_VECTOR {term id:
  weight}, in a SPARSE_INVERTED_INDEX searched by inner product (exact: no weights dropped). The
  workspace hands the vectors over (encoded, or read from the SQLite store's cache); they are
  inserted once. A document whose vector has no term is left out (Milvus refuses empty sparse
  rows) and scores 0, as it would anyway.

Each collection's properties record the full corpus hash, the settings or encoder fingerprint,
the document count and ``rankscope.complete``. A load inserts in batches and sets ``complete``
last: a collection without it is never searched; opening it again resumes the load (the ids
already there are skipped). A collection of that name holding another corpus is refused.

Scores. Milvus scores BM25 as Σ idf·tf·(k1 + 1)/(tf + k1·(1 − b + b·|d|/avgdl)) with Lucene's idf,
which is ``(k1 + 1)`` times RankScope's ``lucene`` BM25 (``retrieval.index.bm25_index``); scores are divided
by ``(k1 + 1)`` so both engines report the same scale. Milvus Lite reports BM25 distances negated
(the server, positive): the magnitude is taken. Milvus Lite computes idf and avgdl per segment
(a flush ends one; Lite 3.2 also cuts a load into segments of 48,000 rows, so on larger corpora its
BM25 scores drift from the in-process engine's), the server over the whole collection; the load
flushes once, at the end.
A CLEAR hybrid query asks Milvus at most twice: its BM25 list and candidate scores come from
RankScope's own index in this process (``systems.hybrid.lexical_half``), the dense list is one
search, and the vectors of the candidates that list lacks one lookup by primary key, multiplied
here (``MilvusVectors.scores``).
Learned sparse scores are the in-process inverted index's dot products (float32 weights, summed by
Milvus: equal to float noise).
A weighted query (``retrieval.index.terms.WeightedQuery``: analyzed terms with weights, RM3's expanded
query) scores Σ_t w_t · bm25(t, d), as the in-process engine scores it; Milvus's BM25 function takes
only text, so each term is searched as a one-term query and the weighted sum is made here, exactly,
with the threshold algorithm's bound on what the lists have not shown (``MilvusBM25.top``).
The SQLite store keeps caching runs, metrics, judgments and jobs.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data import ranking
from retrieval.data.run import Run
from retrieval.errors import EngineError
from retrieval.index.bm25_settings import BM25Settings
from retrieval.index.dense_index import HNSW_FROM  # noqa: F401 - HNSW_FROM named in the docstring
from retrieval.index.encoder import Encoder
from retrieval.index.engines.base import Capabilities, Corpus, Indexed
from retrieval.index.recent import Recent
from retrieval.index.searchable import SparseVector
from retrieval.index.terms import WeightedQuery
from retrieval.index.tokenize import Tokenizer
from retrieval.index.vectors_via_store import COMMIT_EVERY
from retrieval.store import Store, text_hash

if TYPE_CHECKING:
    from pymilvus import CollectionSchema, MilvusClient

    from retrieval.index.engines.base import MilvusSpec
    from retrieval.progress import Counter

PREFIX = "rankscope_"
MAX_TERMS_BYTES = 65_535  # Milvus's VARCHAR limit: longer analyzed texts are cut at a term boundary
INSERT_BATCH = 2_000  # documents per insert request
SEARCH_BATCH = 64  # queries per search request
IDS_PER_FILTER = 1_000  # ids per "doc_id in [...]" filter
IDS_PER_GET = 4_096  # ids per lookup by primary key (a candidate list of depth ≤ 4,096 in one request)
MAX_LIMIT = 16_384  # Milvus's largest top-k
HNSW = {"M": 32, "efConstruction": 200}
HNSW_EF = 128
RECENT_SEARCHES = 1024  # searches whose results are kept, so scoring their candidates asks Milvus only for the rest




def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _in(ids: Iterable[str]) -> str:
    """A filter selecting these primary keys (JSON string escaping is Milvus's)."""
    return "doc_id in " + json.dumps(list(ids), ensure_ascii=False)


def _terms(vec: SparseVector) -> dict[int, float]:
    """A learned sparse vector as Milvus takes it: {term id: weight}, its zero weights left out."""
    terms, weights = vec
    return {t: w for t, w in zip(np.asarray(terms).tolist(), np.asarray(weights, dtype=np.float32).tolist()) if w}


def analyzed(tokenizer: Tokenizer, text: str) -> str:
    """``text`` as RankScope's tokenizer sees it, space-joined: what Milvus's BM25 function indexes
    (documents) or is asked (queries); cut at a term boundary to Milvus's VARCHAR limit."""
    terms = " ".join(tokenizer(text))
    raw = terms.encode("utf-8")
    if len(raw) <= MAX_TERMS_BYTES:
        return terms
    return raw[:MAX_TERMS_BYTES + 1].decode("utf-8", "ignore").rsplit(" ", 1)[0]


class _Client:
    """A ``pymilvus.MilvusClient`` whose errors are ``EngineError``s naming where Milvus is (a server
    that went away mid-session reads like one that was never there)."""

    def __init__(self, client: MilvusClient, where: str):
        self._client, self._where = client, where

    def __getattr__(self, name: str) -> Any:  # Any: what pymilvus returns (it has no types)
        from pymilvus.exceptions import MilvusException

        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except MilvusException as err:
                raise EngineError(f"Milvus at {self._where}: {err.message}") from err

        return call


class Milvus:
    """BM25, vectors and learned sparse vectors in Milvus, through one ``pymilvus.MilvusClient``."""

    name = "milvus"
    key = {"engine": "milvus"}  # Milvus's runs are cached apart from the in-process engine's
    # Lucene's BM25 only; FAISS's index variants and RankScope's own BM25 stay in-process
    capabilities = Capabilities(index_variants=False, explains=False, bm25_methods=("lucene",))

    def __init__(self, client: MilvusClient, where: str, lite: bool):
        self.client, self.where, self.lite = _Client(client, where), where, lite

    @classmethod
    def connect(cls, spec: MilvusSpec) -> Milvus:
        """The engine at a parsed spec (``engines.MilvusSpec``)."""
        # gRPC logs the embedded server's keep-alive complaints to stderr; failures raise anyway
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
        try:
            from pymilvus import MilvusClient
            from pymilvus.exceptions import MilvusException
        except ImportError as err:
            raise EngineError(f"the Milvus engine needs pymilvus: pip install pymilvus milvus-lite ({err})") from err
        if spec.lite:
            try:
                import milvus_lite  # noqa: F401 - pymilvus starts it for a .db path
            except ImportError as err:
                raise EngineError("milvus:PATH.db runs Milvus Lite, which is not installed: "
                                  "pip install milvus-lite") from err
        try:
            client = MilvusClient(uri=spec.uri, token=spec.token, timeout=30)
            client.list_collections()
        except MilvusException as err:
            raise EngineError(f"cannot reach Milvus at {spec.where}: {err.message}") from err
        return cls(client, spec.where, spec.lite)

    # ---- collections: named by content, checked, loaded to completion ----------------------
    def _collection(self, kind: str, corpus: Corpus, settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        name = f"{PREFIX}{kind}_{corpus.hash[:16]}_{_digest(settings)[:12]}"
        props = {"rankscope.kind": kind, "rankscope.corpus": corpus.hash, "rankscope.settings": _digest(settings),
                 "rankscope.docs": str(len(corpus.doc_ids))}
        return name, props

    def _open(self, name: str, props: dict[str, Any], create: Callable[[str, dict[str, Any]], None]) -> bool:
        """Whether collection ``name`` is complete; created (by ``create``) when absent. One that
        holds something else is an EngineError."""
        if not self.client.has_collection(name):
            create(name, {**props, "rankscope.complete": "0"})
            return False
        found = self.client.describe_collection(name).get("properties", {})
        for key, value in props.items():
            if found.get(key) != value:
                raise EngineError(
                    f"the Milvus collection {name} at {self.where} holds something else ({key} is "
                    f"{found.get(key)!r}, this corpus needs {value!r}); drop it (python -m retrieval drop) "
                    f"or use another Milvus database")
        self.client.load_collection(name)
        return bool(found.get("rankscope.complete") == "1")

    def _present(self, name: str, doc_ids: list[str]) -> set[str]:
        """Which of ``doc_ids`` a collection holds already (a load that was interrupted)."""
        present: set[str] = set()
        for start in range(0, len(doc_ids), IDS_PER_GET):
            rows = self.client.get(name, ids=doc_ids[start:start + IDS_PER_GET], output_fields=["doc_id"])
            present.update(r["doc_id"] for r in rows)
        return present

    def _complete(self, name: str, extra: dict[str, Any] | None = None) -> None:
        """Flush, then mark the collection complete (last, so a crash before leaves it resumable)."""
        self.client.flush(name)
        self.client.alter_collection_properties(name, properties={**(extra or {}), "rankscope.complete": "1"})
        self.client.load_collection(name)

    def _fields(self, schema: CollectionSchema, doc_ids: list[str]) -> None:
        from pymilvus import DataType

        longest = max((len(d.encode()) for d in doc_ids), default=64)
        schema.add_field("doc_id", DataType.VARCHAR, is_primary=True, max_length=max(64, min(65_535, longest)))

    # ---- BM25 ----------------------------------------------------------------------------
    def lexical(self, corpus: Corpus, tokenizer: Tokenizer, bm25: BM25Settings, store: Store | None = None,
                progress: Counter | None = None) -> MilvusBM25:
        """The corpus's BM25 collection, loaded (or its interrupted load resumed) first."""
        if bm25.method != "lucene":
            raise EngineError(f"Milvus scores BM25 with Lucene's idf; method {bm25.method!r} "
                              f"is in-process only")
        k1, b = float(bm25.k1), float(bm25.b)
        name, props = self._collection("bm25", corpus, {"k1": k1, "b": b, "tokenizer": tokenizer.config})

        def create(name: str, properties: dict[str, Any]) -> None:
            from pymilvus import DataType, Function, FunctionType

            schema = self.client.create_schema(auto_id=False, description="RankScope BM25 (analyzed terms)")
            self._fields(schema, corpus.doc_ids)
            # the terms are ours already: Milvus only splits them (standard: \w+; a server: whitespace)
            analyzer = {"tokenizer": "standard" if self.lite else "whitespace"}
            schema.add_field("terms", DataType.VARCHAR, max_length=MAX_TERMS_BYTES, enable_analyzer=True,
                             analyzer_params=analyzer)
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                         input_field_names=["terms"], output_field_names=["sparse"]))
            index = self.client.prepare_index_params()
            tuning = {"bm25_k1": k1, "bm25_b": b}
            # flat keys for the server, the JSON "params" key for Milvus Lite: each reads its own
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                            params={**tuning, "params": tuning})
            self.client.create_collection(name, schema=schema, index_params=index, properties=properties)

        truncated = 0
        if not self._open(name, props, create):
            present = self._present(name, corpus.doc_ids)
            todo = [i for i, d in enumerate(corpus.doc_ids) if d not in present]
            done = len(corpus.doc_ids) - len(todo)
            for start in range(0, len(todo), INSERT_BATCH):
                batch = []
                for i in todo[start:start + INSERT_BATCH]:
                    terms = analyzed(tokenizer, corpus.texts[i])
                    truncated += len(terms.encode("utf-8")) >= MAX_TERMS_BYTES - 64  # cut (or all but)
                    batch.append({"doc_id": corpus.doc_ids[i], "terms": terms})
                self.client.insert(name, batch)
                done += len(batch)
                if progress:
                    progress(done, len(corpus.doc_ids))
            self._complete(name, {"rankscope.truncated": str(truncated)})
        truncated = int(self.client.describe_collection(name).get("properties", {}).get("rankscope.truncated", 0))
        return MilvusBM25(self.client, name, corpus.doc_ids, tokenizer, k1, truncated)

    # ---- vectors -------------------------------------------------------------------------
    def vectors(self, corpus: Corpus, encoder: Encoder, store: Store | None, kind: str, dims: int | None,
                progress: Counter | None = None, indexing: Callable[[], None] | None = None,
                embeddings: np.ndarray | None = None) -> Indexed:
        """The corpus's vector collection for ``encoder``: the documents it lacks are taken from
        the store's embeddings where cached, else encoded, ``COMMIT_EVERY`` distinct texts at a
        time (longest first), each part inserted before the next is encoded."""
        if kind not in ("flat", "hnsw") or dims is not None:
            raise EngineError(f"the Milvus engine serves flat or HNSW indexes of full vectors, not {kind!r}"
                              + (f" reduced to {dims} dimensions" if dims else ""))
        name, props = self._collection("dense", corpus, {"model": encoder.fingerprint, "index": kind})

        def create(name: str, properties: dict[str, Any]) -> None:
            self._create_vectors(name, properties, corpus, encoder, kind)

        from_store = encoded = 0
        if self._open(name, props, create):
            from_store = len(set(corpus.texts))  # distinct texts, as counted when loaded
        else:
            from_store, encoded = self._fill_vectors(name, corpus, encoder, store, progress)
            if indexing:
                indexing()
            self._complete(name)
        index = MilvusVectors(self.client, name, corpus.doc_ids, kind, encoder.dim)
        return Indexed(index, from_store, encoded)

    def _create_vectors(self, name: str, properties: dict[str, Any], corpus: Corpus, encoder: Encoder,
                        kind: str) -> None:
        """An empty vector collection for ``encoder``'s vectors, indexed flat or HNSW (inner product)."""
        from pymilvus import DataType

        schema = self.client.create_schema(auto_id=False, description=f"RankScope vectors of {encoder.name}")
        self._fields(schema, corpus.doc_ids)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=encoder.dim)
        index = self.client.prepare_index_params()
        if kind == "hnsw":
            index.add_index("vector", index_type="HNSW", metric_type="IP", params={**HNSW, "params": HNSW})
        else:
            index.add_index("vector", index_type="FLAT", metric_type="IP")
        self.client.create_collection(name, schema=schema, index_params=index, properties=properties)

    def _fill_vectors(self, name: str, corpus: Corpus, encoder: Encoder, store: Store | None,
                      progress: Counter | None) -> tuple[int, int]:
        """Insert the vectors collection ``name`` lacks: the store's cached embeddings first, then the
        rest encoded ``COMMIT_EVERY`` distinct texts at a time (longest first), each part inserted
        before the next is encoded. Returns (texts present or taken from the store, texts encoded)."""
        n = len(corpus.doc_ids)
        present = self._present(name, corpus.doc_ids)
        rows: dict[str, list[int]] = {}  # text hash -> the rows of the documents lacking it
        for i, d in enumerate(corpus.doc_ids):
            if d not in present:
                rows.setdefault(text_hash(corpus.texts[i]), []).append(i)
        done = n - sum(len(r) for r in rows.values())
        if progress:
            progress(done, n)

        def insert(hashes: list[str], vecs: Sequence[np.ndarray] | np.ndarray) -> None:  # one vector a hash
            batch = [{"doc_id": corpus.doc_ids[i], "vector": np.asarray(v, dtype=np.float32).tolist()}
                     for h, v in zip(hashes, vecs) for i in rows[h]]
            for start in range(0, len(batch), INSERT_BATCH):
                self.client.insert(name, batch[start:start + INSERT_BATCH])

        cached = store.get_embeddings(encoder.fingerprint, list(rows)) if store is not None else {}
        if cached:
            insert(list(cached), list(cached.values()))
            done += sum(len(rows[h]) for h in cached)
            if progress:
                progress(done, n)
        missing = sorted((h for h in rows if h not in cached), key=lambda h: -len(corpus.texts[rows[h][0]]))
        encoded = _encode_parts(missing, rows, corpus.texts, encoder, insert, done, n, progress)
        return len(present) + len(cached), encoded

    # ---- learned sparse vectors ------------------------------------------------------------
    def sparse(self, corpus: Corpus, fingerprint: str, vectors: list[SparseVector], vocab_size: int) -> MilvusSparse:
        """The corpus's learned sparse collection for the model of ``fingerprint``: a complete one is
        searched as it is; otherwise the documents it lacks are inserted from ``vectors`` (aligned
        with ``corpus.doc_ids``), ``INSERT_BATCH`` a request, those without a term left out."""
        if len(vectors) != len(corpus.doc_ids):
            raise ValueError("doc_ids and vectors differ in length")
        name, props = self._collection("sparse", corpus, {"model": fingerprint})

        def create(name: str, properties: dict[str, Any]) -> None:
            from pymilvus import DataType

            schema = self.client.create_schema(auto_id=False, description="RankScope learned sparse vectors")
            self._fields(schema, corpus.doc_ids)
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            index = self.client.prepare_index_params()
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
            self.client.create_collection(name, schema=schema, index_params=index, properties=properties)

        if not self._open(name, props, create):
            present = self._present(name, corpus.doc_ids)
            batch = []
            for doc_id, vec in zip(corpus.doc_ids, vectors):
                terms = _terms(vec)
                if terms and doc_id not in present:
                    batch.append({"doc_id": doc_id, "sparse": terms})
                if len(batch) == INSERT_BATCH:
                    self.client.insert(name, batch)
                    batch = []
            if batch:
                self.client.insert(name, batch)
            self._complete(name)
        return MilvusSparse(self.client, name, corpus.doc_ids, vocab_size)

    # ---- housekeeping --------------------------------------------------------------------
    def collections(self, corpus_hash: str | None = None) -> list[dict[str, Any]]:
        """RankScope's collections here (of one corpus, when given): name, kind, corpus, docs, complete."""
        out = []
        for name in self.client.list_collections():
            if not name.startswith(PREFIX):
                continue
            props = self.client.describe_collection(name).get("properties", {})
            if corpus_hash is None or props.get("rankscope.corpus") == corpus_hash:
                out.append({"name": name, "kind": props.get("rankscope.kind"), "corpus": props.get("rankscope.corpus"),
                            "docs": int(props.get("rankscope.docs", 0)),
                            "complete": props.get("rankscope.complete") == "1"})
        return out

    def drop(self, corpus_hash: str) -> int:
        """Drop every RankScope collection of a corpus; returns how many."""
        names = [c["name"] for c in self.collections(corpus_hash)]
        for name in names:
            self.client.drop_collection(name)
        return len(names)


def _encode_parts(missing: list[str], rows: dict[str, list[int]], texts: list[str], encoder: Encoder,
                  insert: Callable[[list[str], np.ndarray], None], done: int, n: int, progress: Counter | None) -> int:
    """Encode the texts of ``missing`` (hashes) ``COMMIT_EVERY`` at a time, each part inserted before
    the next is encoded, progress counted in documents from ``done`` of ``n``; returns how many."""
    encoded = 0
    for start in range(0, len(missing), COMMIT_EVERY):
        part = missing[start:start + COMMIT_EVERY]
        before = done

        def report(k: int, _total: int, before: int = before, part: list[str] = part) -> None:
            if progress:
                progress(before + sum(len(rows[h]) for h in part[:k]), n)

        vecs = encoder.encode([texts[rows[h][0]] for h in part], progress=report)
        insert(part, vecs)
        encoded += len(part)
        done = before + sum(len(rows[h]) for h in part)
    return encoded


class _TermLists:
    """One weighted query's per-term lists from Milvus, to a depth: each term's best documents and
    their scores, whether the list is exhausted (it holds every document with the term), and the exact
    per-term scores of other documents fetched since (0 where the document lacks the term)."""

    def __init__(self, query: WeightedQuery):
        self.weights = {t: w for t, w in query.terms if w > 0}  # a 0 weight adds nothing: never asked
        self.depth = 0
        self.lists: dict[str, dict[int, float]] = {}  # term -> {row: its one-term score}, as listed
        self.floor: dict[str, float] = {}  # term -> the score at its list's depth (0: exhausted)
        self.fetched: dict[str, dict[int, float]] = {t: {} for t in self.weights}

    def known(self, term: str, row: int) -> float | None:
        """The term's score of the document at ``row`` when known (0 where its exhausted list lacks it)."""
        got = self.lists[term].get(row)
        if got is None:
            got = self.fetched[term].get(row)
        if got is None and self.floor[term] == 0:
            return 0.0
        return got

    @property
    def bound(self) -> float:
        """The most a document in none of the lists can score: Σ_t w_t · (the score at t's depth)."""
        return sum(w * self.floor[t] for t, w in self.weights.items())


class MilvusBM25:
    """BM25 top-k and exact candidate scores from a Milvus BM25 collection (``retrieval.index.engines``),
    for a text or a weighted query."""

    def __init__(self, client: _Client, name: str, doc_ids: list[str], tokenizer: Tokenizer, k1: float,
                 truncated: int = 0):
        self.client, self.name, self.doc_ids = client, name, doc_ids
        self.tokenizer, self.scale = tokenizer, 1.0 / (k1 + 1.0)
        self.truncated = truncated  # documents whose analyzed text was cut to Milvus's VARCHAR limit
        self.row = {d: i for i, d in enumerate(doc_ids)}
        self._recent: Recent[str | WeightedQuery, tuple[int, list[tuple[int, float]]]] = Recent(RECENT_SEARCHES)

    def _search(self, texts: list[str], k: int, where: str = "") -> list[list[tuple[int, float]]]:
        """(row, score) hits per analyzed text, best first; an empty text matches nothing."""
        out: list[list[tuple[int, float]]] = [[] for _ in texts]
        asked = [i for i, t in enumerate(texts) if t]
        for start in range(0, len(asked), SEARCH_BATCH):
            part = asked[start:start + SEARCH_BATCH]
            hits = self.client.search(self.name, data=[texts[i] for i in part], anns_field="sparse",
                                      limit=min(k, MAX_LIMIT), filter=where, output_fields=["doc_id"],
                                      search_params={"metric_type": "BM25"})
            for i, found in zip(part, hits):
                out[i] = [(self.row[h["doc_id"]], abs(float(h["distance"])) * self.scale) for h in found]
        return out

    def top(self, query: str | WeightedQuery, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the ``k`` best documents, best first (documents matching no term left out);
        from the last search of this query when it went as deep (a hybrid asks after the BM25 list).

        A weighted query's top ``k`` is Fagin's threshold algorithm over its terms' lists (Fagin, Lotem,
        Naor, "Optimal Aggregation Algorithms for Middleware", PODS 2001, §4): each distinct term is
        searched as its own one-term query (one batched request), a listed document's missing per-term
        scores are fetched exactly (searches filtered to it, as ``scores_at``) where it could still
        reach the top ``k``, and a document in no list scores at most Σ_t w_t · s_t(depth), the
        weighted scores at the lists' depth; the lists are deepened (doubled) until the ``k``-th best
        exceeds that bound or every list is exhausted. Past ``MAX_LIMIT`` (Milvus's largest top-k) a
        list cannot be deepened: the answer is then the exact top ``k`` of the documents in some
        list's first ``MAX_LIMIT``, and a document outside all of them (scoring at most the bound) can
        be missing from it; on RM3's twenty-odd terms this needs a term held by more than 16,384
        documents whose k-th best stays below the bound."""
        depth, hits = self._recent.get(query) or (0, [])
        if depth < k:
            return self._top_many([query], k)[0]
        hits = hits[:k]
        return np.array([r for r, _ in hits], dtype=np.int64), np.array([s for _, s in hits], dtype=np.float32)

    def _top_many(self, queries: list[str | WeightedQuery], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        texts = [analyzed(self.tokenizer, q) if isinstance(q, str) else "" for q in queries]
        found = self._text_top(texts, k)
        weighted = [i for i, q in enumerate(queries) if isinstance(q, WeightedQuery)]
        for i, hits in zip(weighted, self._weighted_top([q for q in queries if isinstance(q, WeightedQuery)], k)):
            found[i] = hits
        out = []
        for query, hits in zip(queries, found):  # each in trec_eval's order already (_text_top, _exact_top)
            self._recent.put(query, (k, hits))
            out.append((np.array([r for r, _ in hits], dtype=np.int64),
                        np.array([s for _, s in hits], dtype=np.float32)))
        return out

    def _text_top(self, texts: list[str], k: int) -> list[list[tuple[int, float]]]:
        """Each analyzed text's top ``k`` as (row, score), ties at the cut kept as trec_eval ranks them
        (``retrieval.data.ranking``): which of several equal scores Milvus keeps at its own cut is its
        choice, so each list is asked one deeper than ``k`` and deepened (doubled, up to ``MAX_LIMIT``)
        while the ``k``-th score equals the last one listed; past ``MAX_LIMIT`` the tie is cut where Milvus
        cut it."""
        out: list[list[tuple[int, float]]] = [[] for _ in texts]
        pending, depth = ([i for i, t in enumerate(texts) if t] if k > 0 else []), k + 1
        while pending:
            limit, still = min(depth, MAX_LIMIT), []
            for i, found in zip(pending, self._search([texts[i] for i in pending], limit)):
                hits = ranking.sorted_rows(found, self.doc_ids)
                if len(hits) == limit > k and hits[k - 1][1] == hits[-1][1] and limit < MAX_LIMIT:
                    still.append(i)  # the k-th score's tie may go on past what was listed
                else:
                    out[i] = hits[:k]
            pending, depth = still, depth * 2
        return out

    def _weighted_top(self, queries: list[WeightedQuery], k: int) -> list[list[tuple[int, float]]]:
        """Each weighted query's top ``k`` as (row, score) (``top``: the threshold algorithm)."""
        k = min(k, len(self.doc_ids))
        state = [_TermLists(q) for q in queries]
        out: list[list[tuple[int, float]]] = [[] for _ in queries]
        pending = [i for i, s in enumerate(state) if s.weights and k > 0]
        depth = min(max(k, 1), MAX_LIMIT)
        while pending:
            asked = [(i, t) for i in pending for t in state[i].weights]
            for (i, t), hits in zip(asked, self._search([t for _, t in asked], depth)):
                state[i].lists[t] = dict(hits)
                # the list's lowest score bounds what it has not shown; fewer hits: every document with t
                state[i].floor[t] = min(s for _, s in hits) if len(hits) == depth else 0.0
            still = []
            for i in pending:
                state[i].depth = depth
                out[i] = self._exact_top(state[i], k)
                kth = out[i][k - 1][1] if len(out[i]) >= k else 0.0
                if state[i].bound > 0 and not kth > state[i].bound and depth < MAX_LIMIT:
                    still.append(i)
            pending, depth = still, min(2 * depth, MAX_LIMIT)
        return out

    def _exact_top(self, lists: _TermLists, k: int) -> list[tuple[int, float]]:
        """The top ``k`` (row, Σ_t w_t · s_t) of the documents in the lists, best first, scored exactly:
        a document's unknown per-term scores are fetched where its upper bound (the known part plus
        each unknown term's weighted floor) reaches the ``k``-th best known part, and a document whose
        upper bound does not cannot be in the top ``k``."""
        rows = sorted({r for hits in lists.lists.values() for r in hits})
        lower = {r: sum(w * (lists.known(t, r) or 0.0) for t, w in lists.weights.items()) for r in rows}
        unknown = {r: [t for t in lists.weights if lists.known(t, r) is None] for r in rows}
        upper = {r: lower[r] + sum(lists.weights[t] * lists.floor[t] for t in unknown[r]) for r in rows}
        ranked = sorted(lower.values(), reverse=True)
        kth = ranked[k - 1] if len(ranked) >= k else 0.0
        ask: dict[str, list[int]] = {}
        for r in rows:
            if unknown[r] and upper[r] >= kth:
                for t in unknown[r]:
                    ask.setdefault(t, []).append(r)
        for term, wanted in ask.items():
            for start in range(0, len(wanted), IDS_PER_FILTER):
                part = wanted[start:start + IDS_PER_FILTER]
                got = dict(self._search([term], len(part), _in(self.doc_ids[r] for r in part))[0])
                lists.fetched[term].update({r: got.get(r, 0.0) for r in part})
        scored = []
        for r in rows:
            parts = [(w, lists.known(t, r)) for t, w in lists.weights.items()]
            if all(p is not None for _, p in parts):
                total = float(np.float32(sum(w * (p or 0.0) for w, p in parts)))
                if total > 0:
                    scored.append((r, total))
        return ranking.sorted_rows(scored, self.doc_ids)[:k]

    def scores_at(self, query: str | WeightedQuery, rows: np.ndarray) -> np.ndarray:
        """Exact BM25 scores of ``query`` for the documents at ``rows`` (0 where no term matches):
        from the last search of this query where it returned them, else a search filtered to them (a
        weighted query: one such search per term, in one request, their scores weighted and summed)."""
        rows = np.asarray(rows, dtype=np.int64)
        known = dict((self._recent.get(query) or (0, []))[1])
        out = np.array([known.get(int(r), np.nan) for r in rows], dtype=np.float64)
        ask = [int(r) for r in rows[np.isnan(out)]]
        if isinstance(query, WeightedQuery):
            terms = [(t, w) for t, w in query.terms if w > 0]
        else:
            text = analyzed(self.tokenizer, query)
            terms = [(text, 1.0)] if text else []
        found: dict[int, float] = {}
        for start in range(0, len(ask), IDS_PER_FILTER) if terms else ():
            part = ask[start:start + IDS_PER_FILTER]
            per_term = [dict(hits) for hits in self._search([t for t, _ in terms], len(part),
                                                            _in(self.doc_ids[r] for r in part))]
            for r in part:
                found[r] = sum(w * hits.get(r, 0.0) for (_, w), hits in zip(terms, per_term))
        for j in np.flatnonzero(np.isnan(out)):
            out[j] = found.get(int(rows[j]), 0.0)
        return out.astype(np.float32)

    def search(self, queries: Mapping[str, str | WeightedQuery], k: int = 100) -> Run:
        qids, texts = list(queries), list(queries.values())
        ids = self.doc_ids
        return {qid: [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]
                for qid, (rows, scores) in zip(qids, self._top_many(texts, k))}


class MilvusVectors:
    """Vector search and exact inner products from a Milvus vector collection, in the shape of
    ``retrieval.index.dense_index.DenseIndex`` (``doc_ids``, ``search_vectors``, ``scores``)."""

    def __init__(self, client: _Client, name: str, doc_ids: list[str], kind: str, dim: int):
        self.client, self.name, self.doc_ids, self.kind, self.dim = client, name, doc_ids, kind, dim
        self.dims = None
        self.row = {d: i for i, d in enumerate(doc_ids)}
        self._recent: Recent[bytes, dict[int, float]] = Recent(RECENT_SEARCHES)  # query vector -> scores

    @property
    def embeddings(self) -> np.ndarray:
        raise EngineError("the document vectors live in Milvus; this needs the in-process engine")

    def search_vectors(self, qvecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), each (queries, k), best first; rows ``-1`` and scores −inf past the hits."""
        qvecs = np.ascontiguousarray(qvecs, dtype=np.float32)
        k = min(k, len(self.doc_ids), MAX_LIMIT)
        scores = np.full((len(qvecs), k), -np.inf, dtype=np.float32)
        rows = np.full((len(qvecs), k), -1, dtype=np.int64)
        params = self._params(k)
        for start in range(0, len(qvecs), SEARCH_BATCH):
            part = qvecs[start:start + SEARCH_BATCH]
            hits = self.client.search(self.name, data=part.tolist(), anns_field="vector", limit=k,
                                      output_fields=["doc_id"], search_params=params)
            for i, found in enumerate(hits):
                q = start + i
                # ties (documents with the same vector) in trec_eval's order (ranking), as the in-process index has them
                ranked = ranking.sorted_rows(((self.row[h["doc_id"]], float(h["distance"])) for h in found[:k]),
                                             self.doc_ids)
                for j, (row, score) in enumerate(ranked):
                    rows[q, j], scores[q, j] = row, score
                valid = rows[q] >= 0
                self._recent.put(qvecs[q].tobytes(), dict(zip(rows[q][valid].tolist(), scores[q][valid].tolist())))
        return scores, rows

    def scores(self, qvec: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Inner products of one query vector with the documents at ``rows``: from the last search
        of this vector where it returned them; the others' stored vectors fetched by primary key
        (one request per ``IDS_PER_GET`` documents: a lookup, not a filtered search, which Milvus
        Lite evaluates row by row) and multiplied here, as the engine multiplies them."""
        q = np.asarray(qvec, dtype=np.float32)
        rows = np.arange(len(self.doc_ids)) if rows is None else np.asarray(rows, dtype=np.int64)
        known = dict(self._recent.get(q.tobytes()) or {})
        ask = np.array(sorted({int(r) for r in rows if int(r) not in known}), dtype=np.int64)
        if len(ask):
            known.update(zip(ask.tolist(), (self.vectors_of(ask) @ q).tolist()))
        return np.array([known[int(r)] for r in rows], dtype=np.float32)

    def _params(self, k: int) -> dict[str, Any]:
        return {"metric_type": "IP"} | ({"params": {"ef": max(HNSW_EF, k)}} if self.kind == "hnsw" else {})

    def vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The stored vectors of the documents at ``rows`` (float32, in that order)."""
        out = np.zeros((len(rows), self.dim), dtype=np.float32)
        where: dict[str, list[int]] = {}
        for j, r in enumerate(rows.tolist()):
            where.setdefault(self.doc_ids[r], []).append(j)
        ids = list(where)
        for start in range(0, len(ids), IDS_PER_GET):
            for hit in self.client.get(self.name, ids=ids[start:start + IDS_PER_GET], output_fields=["vector"]):
                out[where[hit["doc_id"]]] = np.asarray(hit["vector"], dtype=np.float32)
        return out


class MilvusSparse:
    """Learned sparse top-k, exact scores and term contributions from a Milvus sparse collection, in
    the shape of ``retrieval.index.splade.SparseIndex`` (``doc_ids``, ``nbytes``, ``scores``, ``top``,
    ``contributions``). Milvus sums the products of the query's and the document's weights; a query
    with no term is never sent (it matches nothing)."""

    def __init__(self, client: _Client, name: str, doc_ids: list[str], vocab_size: int):
        self.client, self.name, self.doc_ids, self.vocab_size = client, name, doc_ids, vocab_size
        self.row = {d: i for i, d in enumerate(doc_ids)}
        self._recent: Recent[bytes, tuple[dict[int, float], bool]] = Recent(RECENT_SEARCHES)

    @property
    def nbytes(self) -> int:
        return 0  # the vectors live in Milvus

    def _search(self, query: dict[int, float], limit: int, where: str = "") -> dict[int, float]:
        """{row: score} of the ``limit`` best documents (among those ``where`` selects) that share a
        term with the query."""
        hits = self.client.search(self.name, data=[query], anns_field="sparse", limit=limit, filter=where,
                                  output_fields=["doc_id"], search_params={"metric_type": "IP"})[0]
        return {self.row[h["doc_id"]]: float(h["distance"]) for h in hits if float(h["distance"]) > 0}

    def top(self, query: SparseVector, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the ``k`` best documents (at most ``MAX_LIMIT``), best first; zero scores
        left out, ties in trec_eval's order (``retrieval.data.ranking``) among those Milvus returned."""
        terms = _terms(query)
        k = min(k, len(self.doc_ids), MAX_LIMIT)
        if not terms or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        found = self._search(terms, k)
        hits = ranking.sorted_rows(found.items(), self.doc_ids)
        # every document that scores above 0 is among the hits when fewer than k came back
        self._recent.put(_key(query), (found, len(hits) < k))
        return np.array([r for r, _ in hits], dtype=np.int64), np.array([s for _, s in hits], dtype=np.float32)

    def scores(self, query: SparseVector, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Σ_j w_j(q)·w_j(d) of every document (or of those at ``rows``): from the last search of this
        query where it returned them (or returned every match), else from searches filtered to the
        others (0 where they share no term)."""
        rows = np.arange(len(self.doc_ids)) if rows is None else np.asarray(rows, dtype=np.int64)
        terms = _terms(query)
        if not terms:
            return np.zeros(len(rows), dtype=np.float32)
        known, whole = self._recent.get(_key(query)) or ({}, False)
        ask = [] if whole else [int(r) for r in dict.fromkeys(rows.tolist()) if int(r) not in known]
        if len(ask) > IDS_PER_FILTER:  # many documents: one unfiltered search may find every match
            limit = min(len(self.doc_ids), MAX_LIMIT)
            found = self._search(terms, limit)
            known, whole = {**known, **found}, len(found) < limit
            ask = [] if whole else [r for r in ask if r not in known]
        known = dict(known)
        for start in range(0, len(ask), IDS_PER_FILTER):
            part = ask[start:start + IDS_PER_FILTER]
            known.update(self._search(terms, len(part), _in(self.doc_ids[r] for r in part)))
        return np.array([known.get(int(r), 0.0) for r in rows], dtype=np.float32)

    def contributions(self, query: SparseVector, row: int) -> list[tuple[int, float, float, float]]:
        """The terms a document shares with the query: (term id, query weight, document weight,
        their product), largest product first; the document's vector read back from Milvus."""
        terms, weights = query
        if len(terms) == 0:
            return []
        stored = self.client.get(self.name, ids=[self.doc_ids[row]], output_fields=["sparse"])
        doc = {int(t): w for t, w in stored[0]["sparse"].items()} if stored else {}
        out = []
        for t, w in zip(np.asarray(terms).tolist(), np.asarray(weights, dtype=np.float32)):
            d = np.float32(doc.get(t, 0.0))
            if d > 0:
                out.append((int(t), float(w), float(d), float(w * d)))
        return sorted(out, key=lambda c: -c[3])


def _key(query: SparseVector) -> bytes:
    terms, weights = query
    return np.asarray(terms, dtype=np.int64).tobytes() + b"|" + np.asarray(weights, dtype=np.float32).tobytes()
