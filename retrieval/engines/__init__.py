"""Index engines: where a corpus's BM25 index and document vectors live and are searched.

A ``Workspace`` asks its engine for two indexes and never looks inside them:

* ``lexical(corpus, tokenizer, bm25_args, store, progress)`` — BM25 over the corpus, with
  ``doc_ids``, ``top(query, k) -> (rows, scores)`` (best first, zero scores left out),
  ``scores_at(query, rows)`` (the exact BM25 score of chosen documents, 0 where no term
  matches: CLEAR's hybrid scores the union of both candidate lists with it) and
  ``search(queries, k) -> Run``;
* ``vectors(corpus, encoder, store, kind, dims, progress, indexing)`` — the document vectors,
  an ``Indexed(index, from_store, encoded)`` whose index has ``doc_ids``,
  ``search_vectors(qvecs, k) -> (scores, rows)`` and ``scores(qvec, rows)`` (exact inner
  products), the shape of ``retrieval.dense.DenseIndex``;

and ``drop(corpus_hash)`` removes what it holds for a corpus. ``key`` goes into every cached
run's parameters, so a run one engine computed is never served as another's.

Engines: ``InProcess`` (bm25s + FAISS, BM25 index and embeddings cached in the SQLite store; the
default) and ``Milvus`` (``retrieval.engines.milvus``: Milvus Lite embedded in a file, or a Milvus
server or cluster by URI). ``open_engine(spec)`` turns a command-line spec into one.
"""
from __future__ import annotations

from typing import NamedTuple

from .local import InProcess, Indexed

ENGINE_SPECS = ("in-process", "milvus:PATH.db", "milvus://HOST:PORT")


class Corpus(NamedTuple):
    """What an engine indexes: the documents' ids and texts (title and body), and the corpus hash
    (``Dataset.corpus_hash``) that keys what it stores."""

    hash: str
    doc_ids: list[str]
    texts: list[str]


def open_engine(spec: str | None):
    """The engine a spec names: None, "" or "in-process" → ``InProcess``; ``milvus:PATH.db`` →
    Milvus Lite embedded in that file; ``milvus://HOST:PORT`` (or ``milvus+https://HOST:PORT``) →
    a Milvus server, with the token in ``$RANKSCOPE_MILVUS_TOKEN`` when it needs one. A ValueError
    names what is wrong (an unknown spec, Milvus not installed, the server unreachable)."""
    if spec in (None, "", "in-process"):
        return InProcess()
    if spec.startswith("milvus"):
        from .milvus import Milvus

        return Milvus.from_spec(spec)
    raise ValueError(f"unknown engine {spec!r}; choose from {', '.join(ENGINE_SPECS)}")


__all__ = ["Corpus", "ENGINE_SPECS", "InProcess", "Indexed", "open_engine"]
