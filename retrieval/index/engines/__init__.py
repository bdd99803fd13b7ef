"""Index engines: where a corpus's BM25 index, document vectors and learned sparse vectors live
and are searched.

A ``Workspace`` asks its engine for three indexes and never looks inside them:

* ``lexical(corpus, tokenizer, bm25, store, progress)`` — BM25 over the corpus, with
  ``doc_ids``, ``top(query, k) -> (rows, scores)`` (best first, zero scores left out),
  ``scores_at(query, rows)`` (the exact BM25 score of chosen documents, 0 where no term
  matches: CLEAR's hybrid scores the union of both candidate lists with it) and
  ``search(queries, k) -> Run``, a query being a text or a ``WeightedQuery`` (analyzed terms
  with weights, ``retrieval.index.terms``: RM3's expanded query);
* ``vectors(corpus, encoder, store, kind, dims, progress, indexing)`` — the document vectors,
  an ``Indexed(index, from_store, encoded)`` whose index has ``doc_ids``,
  ``search_vectors(qvecs, k) -> (scores, rows)`` and ``scores(qvec, rows)`` (exact inner
  products), the shape of ``retrieval.index.dense_index.DenseIndex``;
* ``sparse(corpus, fingerprint, vectors, vocab_size)`` — the learned sparse (SPLADE) document
  vectors of the model of ``fingerprint`` (computed, or read from the store, by the caller), with
  ``doc_ids``, ``nbytes`` (what it holds in this process), ``top(query, k) -> (rows, scores)``
  (best first, zero scores left out, ties by row), ``scores(query, rows)`` (exact dot products)
  and ``contributions(query, row)`` (the shared terms' products, for explanations), the shape of
  ``retrieval.index.splade.SparseIndex``;

and ``drop(corpus_hash)`` removes what it holds for a corpus. ``key`` goes into every cached
run's parameters, so a run one engine computed is never served as another's; ``where`` names where
it keeps them (None: this process), ``capabilities`` what it does beyond that (``base``: the
engine's ``typing.Protocol`` and ``Capabilities``; the three indexes' Protocols in ``retrieval.index.searchable``,
below the engines, so that the retrievers that search them need not import an engine).

Engines: ``InProcess`` (bm25s + FAISS + a sparse inverted index in memory, the BM25 index and
both kinds of vectors cached in the SQLite store; the default) and ``Milvus``
(``retrieval.index.engines.milvus``: Milvus Lite embedded in a file, or a Milvus server or cluster by
URI; the learned sparse vectors in a SPARSE_FLOAT_VECTOR collection). ``open_engine(spec)`` turns
a command-line spec into one.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from retrieval.errors import EngineError
from retrieval.index.engines.base import Capabilities, Corpus, Engine, Indexed, MilvusSpec
from retrieval.index.engines.local import InProcess
from retrieval.index.searchable import LexicalIndex, SparseVectorIndex, VectorIndex

ENGINE_SPECS = ("in-process", "milvus:PATH.db", "milvus://HOST:PORT", "milvus+https://HOST:PORT")
TOKEN_ENV = "RANKSCOPE_MILVUS_TOKEN"
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?")


def parse_milvus(spec: str, *, allow_insecure_token: bool = False, create: bool = True) -> MilvusSpec:
    """A Milvus engine spec, read strictly (a ValueError naming what is wrong):

    * ``milvus:PATH.db`` — Milvus Lite in that file, in a folder that exists; with ``create``
      false (``drop``) the file must exist too: nothing is ever created to be dropped;
    * ``milvus://HOST:PORT`` — a server over plain HTTP; ``$RANKSCOPE_MILVUS_TOKEN``, when set, is
      refused there (it would cross the network in clear) unless ``allow_insecure_token``;
    * ``milvus+https://HOST:PORT`` — a server over TLS, with the token when set.
    """
    token = os.environ.get(TOKEN_ENV, "")
    for scheme, http in (("milvus+https://", "https"), ("milvus://", "http")):
        if spec.startswith(scheme):
            host = spec[len(scheme):]
            match = _HOST.fullmatch(host)
            if not match or (match.group(1) and not 0 < int(match.group(1)) < 65536):
                raise EngineError(f"a Milvus server is named {scheme}HOST:PORT (a host name or address, a port from "
                                 f"1 to 65535), not {spec!r}")
            if token and http == "http" and not allow_insecure_token:
                raise EngineError(f"${TOKEN_ENV} is set, and {spec!r} would send it unencrypted: use "
                                 f"milvus+https://{host}, or --allow-insecure-token where the network is private")
            return MilvusSpec(f"{http}://{host}", spec, False, token)
    if not spec.startswith("milvus:") or spec.startswith("milvus://"):
        raise EngineError(f"unknown engine {spec!r}; choose from {', '.join(ENGINE_SPECS)}")
    path = Path(spec[len("milvus:"):]).expanduser()
    if path.suffix != ".db" or not path.stem:
        raise EngineError(f"Milvus Lite keeps its data in a file ending in .db: use milvus:PATH.db, not {spec!r}")
    if not path.parent.is_dir():
        raise EngineError(f"cannot use {path}: the folder {path.parent} does not exist")
    if not create and not path.exists():
        raise EngineError(f"there is no Milvus Lite file {path}: nothing to drop")
    return MilvusSpec(str(path), str(path), True)


def open_engine(spec: str | None, *, allow_insecure_token: bool = False, create: bool = True) -> Engine:
    """The engine a spec names: None, "" or "in-process" → ``InProcess``; ``milvus:PATH.db`` →
    Milvus Lite embedded in that file; ``milvus://HOST:PORT`` (or ``milvus+https://HOST:PORT``) →
    a Milvus server, with the token in ``$RANKSCOPE_MILVUS_TOKEN`` when it needs one (``parse_milvus``
    reads the spec, strictly). A ValueError names what is wrong (an unknown spec, Milvus not
    installed, the server unreachable, a token over plain HTTP)."""
    if spec in (None, "", "in-process"):
        return InProcess()
    where = parse_milvus(spec, allow_insecure_token=allow_insecure_token, create=create)
    from retrieval.index.engines.milvus import Milvus

    return Milvus.connect(where)


__all__ = ["Capabilities", "Corpus", "ENGINE_SPECS", "Engine", "EngineError", "InProcess", "Indexed", "LexicalIndex",
           "MilvusSpec", "SparseVectorIndex", "VectorIndex", "open_engine", "parse_milvus"]
