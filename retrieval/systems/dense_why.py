"""Why the dense encoder scores a document as it does: which query words carry the score, and which
passages of the document it matches best — for one query and a set of documents, with the workspace's
own encoder, precision and index.

**Query-word occlusion.** The query is cut into the words a person typed (white-space words,
``segments.words``, each kept with its span in the text as typed). A word's *share* is the score of
the document under the full query minus its score under the query with that word removed (the text
before and after it, joined by one space): the drop the index's own score ⟨E(q), d⟩ takes without it.
This is occlusion (Zeiler and Fergus, "Visualizing and Understanding Convolutional Networks", ECCV
2014, arXiv:1311.2901, §4.2, occluding parts of the input and watching the output), applied to the
query's words as in the leave-one-out attributions of NLP (Li, Monroe and Jurafsky, "Understanding
Neural Networks through Representation Erasure", arXiv:1612.08220, §3). A word the score rises
without has a negative share; shares need not add up to the score (a cosine is not additive). A query
of one word is occluded like any other: without it the query is the empty text, which the encoder
embeds as it embeds any text (its special tokens alone), so the word's share is the score minus the
empty query's score. All the leave-one-out queries of a query are encoded in one batch, once, and kept
in memory for every document explained for it (Search's top 10 costs n + 1 query encodings, not
10·(n + 1)). The full score is the index's own (``VectorIndex.scores`` of the query's vector as
``DenseRetriever.encode_query`` gives it): the system's score, a compressed index's decoded one too.

**Per-segment similarity.** The document as the encoder reads it (``Document.full_text``: the title,
then the body) is cut into sentences, a long one into windows (``segments.segments``); each of the first
``MAX_SEGMENTS`` segments is encoded as a document by the same encoder (same precision, same
normalization; its vector kept in the store as the corpus's are, ``passage_vectors``, so a document's
passages are encoded once whatever the query) and scored by its inner product with the query's vector —
the cosine, for a normalizing encoder (the full vector: a PCA-reduced index's projection is not applied
to passages it never held). The rest are counted as cut (``DenseWhy.segments_cut``). A segment that
starts beyond what the encoder reads of the document (``max_seq_length`` tokens with its special tokens:
``read_until``) is marked unread: the document's vector never saw it, which is often why a long
document's relevant passage does not count.

Cached by a key of everything the result depends on (``why_key``: the encoder's fingerprints, the
index's kind, dimensions and engine, the query's text, the document's id and text, the splitter's
version and bounds): in memory for the process, and in the store's evaluations (``Store.put_metrics``,
as the CLEAR hybrid's λ fits are kept) under the system name ``WHY_SYSTEM``. A search of one typed query
(``System.explain_score`` over a ``Probe``) reads the store but writes nothing to it, as it writes no
query vector (a typed query is seldom typed again, and the store would grow with every search); the
failure cards, explained for a data set's queries, write theirs.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.index.recent import Recent
from retrieval.store import cache_key, text_hash
from retrieval.systems.segments import SPLITTER_VERSION, WINDOW_WORDS, Span, segments, words

if TYPE_CHECKING:
    from retrieval.index.encoder import Encoder
    from retrieval.systems.reads import SystemWorkspace

MAX_SEGMENTS = 32  # segments scored per document, in document order; the rest counted as cut
WHY_SYSTEM = "dense why"  # the store's system name of a kept explanation
# what the process keeps, least recently used let go first: explanations (a few kilobytes each, at most
# MAX_SEGMENTS passages: some 8 MB in all), queries' occlusion vectors (a word's vector each: 1.5 kB a
# word at 384 dimensions, some 4 MB for 256 queries of 10 words)
KEPT_IN_MEMORY, QUERIES_KEPT, PASSAGES_KEPT = 2048, 256, 8192  # and passages' vectors: some 12 MB at 384 dimensions
_lock = threading.Lock()
_whys: Recent[str, DenseWhy] = Recent(KEPT_IN_MEMORY)
_occluded: Recent[tuple[str, str], np.ndarray] = Recent(QUERIES_KEPT)
_passages: Recent[tuple[str, str], np.ndarray] = Recent(PASSAGES_KEPT)


@dataclass(frozen=True)
class WordShare:
    """One typed query word and its share of a dense score.

    Attributes:
        word: The word as typed.
        start: Where it starts in the query's text.
        end: Where it ends (``text[start:end]`` is the word).
        share: The score with the word minus the score without it.
    """

    word: str
    start: int
    end: int
    share: float


@dataclass(frozen=True)
class Segment:
    """One passage of a document and how well it matches the query on its own.

    Attributes:
        start: Where it starts in the document's full text (``Document.full_text``).
        end: Where it ends.
        score: Its inner product with the query's vector, encoded alone (the cosine, normalized).
        read_by_encoder: Whether it starts within what the encoder reads of the document.
    """

    start: int
    end: int
    score: float
    read_by_encoder: bool


@dataclass(frozen=True)
class DenseWhy:
    """A dense score explained (module docstring).

    Attributes:
        score: The index's score of the document (the system's).
        words: Each typed query word's share, in query order.
        segments: The document's first ``MAX_SEGMENTS`` segments, in document order, each with its score.
        segments_cut: How many segments beyond those were not scored.
        read_until: The characters of the full text the encoder reads (all of it: its length).
    """

    score: float
    words: tuple[WordShare, ...]
    segments: tuple[Segment, ...]
    segments_cut: int
    read_until: int

    @property
    def ranked_words(self) -> list[WordShare]:
        """The words by share, largest first (query order among equals)."""
        return sorted(self.words, key=lambda w: -w.share)

    def best(self, n: int = 1) -> list[Segment]:
        """The ``n`` best-matching segments, best first (document order among equals)."""
        return sorted(self.segments, key=lambda s: -s.score)[:n]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DenseWhy:
        """An explanation written by ``to_json``.

        Raises:
            ValueError: ``data`` is not one.
        """
        try:
            return cls(float(data["score"]), tuple(WordShare(str(w["word"]), int(w["start"]), int(w["end"]),
                                                             float(w["share"])) for w in data["words"]),
                       tuple(Segment(int(s["start"]), int(s["end"]), float(s["score"]), bool(s["read_by_encoder"]))
                             for s in data["segments"]), int(data["segments_cut"]), int(data["read_until"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a dense explanation: {exc}") from exc


def without(text: str, word: Span) -> str:
    """``text`` with ``word`` taken out: what is before and after it, joined by one space, stripped."""
    return " ".join(part for part in (text[:word.start].strip(), text[word.end:].strip()) if part)


def read_until(encoder: Encoder, text: str) -> int:
    """How many characters of ``text`` the encoder reads: all of them, or up to the end of its last token
    within ``max_seq_length`` (less the special tokens it adds); all where its tokenizer gives no offsets."""
    tokenizer: Any = getattr(encoder.model, "tokenizer", None)
    if tokenizer is None:
        return len(text)
    try:
        budget = encoder.max_seq_length - int(tokenizer.num_special_tokens_to_add(pair=False))
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False,
                            verbose=False)["offset_mapping"]
    except (AttributeError, TypeError, ValueError, KeyError, NotImplementedError):
        return len(text)
    return len(text) if len(offsets) <= budget else int(offsets[max(budget, 1) - 1][1])


def why_key(ws: SystemWorkspace, query: str, doc_id: str, doc_text: str) -> str:
    """The cache key of one explanation: everything it depends on (module docstring)."""
    index = {**ws.engine.key, "model": ws.encoder.fingerprint, "index": ws.index_kind, "dims": ws.index_dims}
    return cache_key(kind=WHY_SYSTEM, index=index,
                     query_model=ws.encoder.for_queries().fingerprint, query=query, doc=doc_id,
                     doc_text=text_hash(doc_text), splitter=SPLITTER_VERSION, window=WINDOW_WORDS,
                     max_segments=MAX_SEGMENTS)


def explain_dense(ws: SystemWorkspace, query: str, rows: Sequence[int],
                  qvec: np.ndarray | None = None, cached: bool = True, keep: bool = True) -> dict[int, DenseWhy]:
    """The dense explanation of each document at ``rows`` for ``query`` (module docstring), from memory,
    the store, or computed now (and kept in both).

    Args:
        ws: The workspace whose encoder and index score.
        query: The query's text.
        rows: Rows of ``ws.dataset.doc_ids``.
        qvec: The query's vector where already encoded (``Probe.vector``); else ``ws.dense.encode_query``.
        cached: Read what memory and the store keep (False: compute every one again, its passages' vectors
            too, and keep them; the occlusion vectors of a query in memory are still reused).
        keep: Write what is computed to the store (False: memory only; Search's typed queries, ``Probe``).

    Returns:
        ``{row: DenseWhy}``.
    """
    ids, docs = ws.dataset.doc_ids, ws.dataset.docs
    keys = {r: why_key(ws, query, ids[r], docs[ids[r]].full_text) for r in dict.fromkeys(int(r) for r in rows)}
    out: dict[int, DenseWhy] = {}
    with _lock:
        for r, key in keys.items():
            if cached and (kept := _whys.get(key)) is not None:
                out[r] = kept
    for r, key in keys.items():
        if cached and r not in out and ws.store is not None and (stored := _stored(ws, key)) is not None:
            out[r] = stored
    missing = [r for r in keys if r not in out]
    if missing:
        computed = _compute(ws, query, missing, ws.dense.encode_query(query) if qvec is None else qvec, cached, keep)
        for r, why in computed.items():
            if ws.store is not None and keep:
                ws.store.put_metrics(keys[r], dataset=ws.dataset.corpus_hash, system=WHY_SYSTEM,
                                     params={"query": query, "doc": ids[r]}, split=None,
                                     metrics={"score": why.score}, per_query={"why": why.to_json()})
        out.update(computed)
    with _lock:
        for r, why in out.items():
            _whys.put(keys[r], why)
    return out


def _stored(ws: SystemWorkspace, key: str) -> DenseWhy | None:
    """An explanation the store keeps under ``key``; None where none is, or a damaged one (computed again)."""
    assert ws.store is not None
    kept = ws.store.get_metrics(key)
    if kept is None:
        return None
    try:
        return DenseWhy.from_json(kept[1]["why"])
    except (KeyError, ValueError):
        return None


def occluded_vectors(ws: SystemWorkspace, query: str) -> np.ndarray:
    """The vectors of ``query`` without each of its words (``without``), in one batch, kept in memory:
    ``(words, dim)``, none for a query of no word."""
    encoder = ws.encoder.for_queries()
    key = (encoder.fingerprint, query)
    with _lock:
        kept = _occluded.get(key)
    if kept is not None:
        return kept
    spans = words(query)
    vecs = encoder.encode([without(query, w) for w in spans]) if spans else np.zeros((0, encoder.dim), np.float32)
    with _lock:
        _occluded.put(key, vecs)
    return vecs


def passage_vectors(ws: SystemWorkspace, passages: list[str], cached: bool = True, keep: bool = True) -> np.ndarray:
    """The document encoder's vectors of ``passages``, ``(len(passages), dim)``, kept in the store as the corpus's
    are (by the encoder's fingerprint and the text's hash), and in memory, so a document's passages are
    encoded once whatever the query (in a search that writes nothing, once in the process). ``cached`` False:
    encoded now whatever the store keeps; ``keep`` False: nothing written."""
    encoder = ws.dense.encoder
    out = np.zeros((len(passages), encoder.dim), np.float32)
    hashes = [text_hash(t) for t in passages]
    known: dict[str, np.ndarray] = {}
    if cached:
        with _lock:
            known = {h: v for h in hashes if (v := _passages.get((encoder.fingerprint, h))) is not None}
        rest = [h for h in hashes if h not in known]
        if rest and ws.store is not None:
            known.update(ws.store.get_embeddings(encoder.fingerprint, rest, dim=encoder.dim))
    todo = [i for i, h in enumerate(hashes) if h not in known]
    for i, h in enumerate(hashes):
        if h in known:
            out[i] = known[h]
    if todo:
        out[todo] = encoder.encode([passages[i] for i in todo])
        if ws.store is not None and keep:
            ws.store.put_embeddings(encoder.fingerprint, {hashes[i]: out[i] for i in todo})
    with _lock:
        for h, v in zip(hashes, out):
            _passages.put((encoder.fingerprint, h), v)
    return out


def _compute(ws: SystemWorkspace, query: str, rows: list[int], qvec: np.ndarray, cached: bool,
             keep: bool) -> dict[int, DenseWhy]:
    index, encoder = ws.dense.index, ws.dense.encoder
    at = np.asarray(rows, dtype=np.int64)
    full = np.asarray(index.scores(qvec, at), dtype=np.float64)
    spans = words(query)
    occluded = occluded_vectors(ws, query)
    dropped = np.asarray([index.scores(v, at) for v in occluded], dtype=np.float64).reshape(len(spans), len(rows))
    texts = [ws.dataset.docs[ws.dataset.doc_ids[r]].full_text for r in rows]
    cut = [segments(t) for t in texts]
    passages = [t[s.start:s.end] for t, spans_of in zip(texts, cut) for s in spans_of[:MAX_SEGMENTS]]
    vecs = passage_vectors(ws, passages, cached, keep)
    cosines = (vecs @ np.asarray(qvec, dtype=np.float32)).astype(np.float64)
    out, at_passage = {}, 0
    for j, (r, t, spans_of) in enumerate(zip(rows, texts, cut)):
        until = read_until(encoder, t)
        kept = spans_of[:MAX_SEGMENTS]
        scored = tuple(Segment(s.start, s.end, float(cosines[at_passage + i]), s.start < until)
                       for i, s in enumerate(kept))
        at_passage += len(kept)
        shares = tuple(WordShare(query[w.start:w.end], w.start, w.end, float(full[j] - dropped[i, j]))
                       for i, w in enumerate(spans))
        out[r] = DenseWhy(float(full[j]), shares, scored, len(spans_of) - len(kept), until)
    return out


def forget() -> None:
    """Empty the process's memory of explanations (the store keeps its own)."""
    with _lock:
        for key, _ in _whys.items():
            _whys.pop(key)
        for kept in (_occluded, _passages):
            for pair, _ in kept.items():
                kept.pop(pair)
