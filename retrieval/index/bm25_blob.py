"""A stored BM25 index (``lexical.BM25Index.to_bytes``) read back without trusting it.

The blob is an uncompressed zip RankScope wrote: bm25s's saved files (``bm25s.BM25.save``: the score
matrix as three ``.npy`` arrays in compressed-sparse-column form, the vocabulary and the settings as
JSON) and ``rankscope.npz`` (document lengths and frequencies). The store is a file anyone can edit,
so nothing in it is extracted, unpickled or allowed to size an allocation:

* the zip (and the ``.npz`` inside it) must hold only the members RankScope writes, each once, each
  stored (not compressed: a small blob cannot expand into a large one), their sizes within the blob
  and their CRC-32 right (``zipfile``'s check on read);
* each array is read in memory (``numpy.frombuffer``, never ``np.load`` or pickle) after its ``.npy``
  header is checked: one dimension, the kind of number RankScope writes, and a declared length
  whose bytes are exactly those that follow the header;
* then the whole must be an index of this corpus under these settings: the settings asked for, one
  score column per term (``indptr`` holds vocabulary + 1 offsets, rising from 0 to the number of
  scores), document numbers below the corpus's size, finite scores, the vocabulary a numbering of
  its terms (bm25s's empty token last), document frequencies of those terms within 1..N and a
  finite, non-negative length for each document; and a spread of documents, tokenized again, has the
  lengths and terms the index says (another corpus's index of the same size is caught).

Any failure is ``DamagedIndex`` naming the problem; the engine then builds the index again and
writes it over (``engines.local.InProcess.lexical``).
"""
from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib import format as npy

SCORES = {"data.csc.index.npy": "f4", "indices.csc.index.npy": "i", "indptr.csc.index.npy": "i"}
SETTINGS, VOCABULARY, EXTRA = "params.index.json", "vocab.index.json", "rankscope.npz"
MEMBERS = (*SCORES, SETTINGS, VOCABULARY, EXTRA)  # what to_bytes writes, each once
EXTRA_MEMBERS = ("doc_len.npy", "df_terms.npy", "df_counts.npy")  # what np.savez writes in rankscope.npz
PARAMS = ("k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype", "num_docs", "version", "backend")
SPOTS = 32  # documents tokenized again to tell this corpus's index from another's of its size
JSON_LIMIT = 1 << 30  # bytes of settings or vocabulary JSON (a vocabulary of millions of terms is far less)


class DamagedIndex(ValueError):
    """A stored BM25 index that is not one RankScope wrote for this corpus and these settings."""


def members(blob: object, names: tuple[str, ...], what: str = "the index") -> dict[str, bytes]:
    """The members of the stored zip ``blob`` (``names``, each once, uncompressed), refused before
    any is read when it holds another name, more members, a compressed or encrypted one, or sizes
    past the blob's."""
    if not isinstance(blob, (bytes, bytearray)):
        raise DamagedIndex(f"{what} is {type(blob).__name__}, not bytes")
    try:
        archive = zipfile.ZipFile(io.BytesIO(blob))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise DamagedIndex(f"{what} is not a zip ({err})") from None
    infos = archive.infolist()
    if len(infos) > len(names):
        raise DamagedIndex(f"{what} holds {len(infos):,} members; RankScope writes {len(names)}")
    seen: set[str] = set()
    total = 0
    for info in infos:
        if info.filename not in names:
            raise DamagedIndex(f"{what} holds a member {info.filename[:80]!r} RankScope does not write")
        if info.filename in seen:
            raise DamagedIndex(f"{what} holds {info.filename!r} twice")
        seen.add(info.filename)
        if info.compress_type != zipfile.ZIP_STORED:
            raise DamagedIndex(f"{what}'s {info.filename} is compressed (method {info.compress_type}); "
                               "RankScope stores members uncompressed")
        if info.flag_bits & 0x1:
            raise DamagedIndex(f"{what}'s {info.filename} is encrypted")
        if info.file_size != info.compress_size:
            raise DamagedIndex(f"{what}'s {info.filename} says {info.file_size:,} bytes stored in "
                               f"{info.compress_size:,}")
        total += info.file_size
    if total > len(blob):
        raise DamagedIndex(f"{what}'s members declare {total:,} bytes in a blob of {len(blob):,}")
    missing = [n for n in names if n not in seen]
    if missing:
        raise DamagedIndex(f"{what} lacks {', '.join(missing)}")
    try:
        return {name: archive.read(name) for name in names}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:  # a bad CRC-32, a cut member
        raise DamagedIndex(f"{what} does not read ({err})") from None


def array(data: bytes, name: str, kind: str) -> np.ndarray:
    """The one-dimensional array the ``.npy`` bytes ``data`` hold, over those bytes (read-only, no
    copy): ``kind`` "f4" (float32), "f8" (float64), "i" (a 4- or 8-byte integer) or "U" (text). The
    header's length must be exactly the bytes that follow it, so a forged one allocates nothing."""
    stream = io.BytesIO(data)
    try:
        version = npy.read_magic(stream)
        read = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
        if read is None:
            raise DamagedIndex(f"{name} is .npy format {version}; RankScope writes 1.0 or 2.0")
        shape, fortran, dtype = read(stream)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as err:
        raise DamagedIndex(f"{name} has no .npy header ({str(err)[:120]})") from None
    native = dtype.byteorder in ("=", "|", "<" if np.little_endian else ">")
    fits = {"f4": dtype == np.float32, "f8": dtype == np.float64,
            "i": dtype.kind == "i" and dtype.itemsize in (4, 8), "U": dtype.kind == "U"}[kind]
    if not (fits and native and not dtype.hasobject):
        raise DamagedIndex(f"{name} holds {dtype.str}, not the {kind} RankScope writes")
    if len(shape) != 1 or fortran:
        raise DamagedIndex(f"{name} has shape {shape}; RankScope writes one dimension")
    count, start = shape[0], stream.tell()
    if count < 0 or count * dtype.itemsize != len(data) - start:
        raise DamagedIndex(f"{name} declares {count:,} items of {dtype.itemsize} bytes "
                           f"({count * dtype.itemsize:,} bytes) and holds {len(data) - start:,} bytes")
    return np.frombuffer(data, dtype=dtype, count=count, offset=start)


def _json(data: bytes, name: str, kind: type[dict[str, Any]]) -> dict[str, Any]:
    if len(data) > JSON_LIMIT:
        raise DamagedIndex(f"{name} is {len(data):,} bytes, past {JSON_LIMIT:,}")
    from bm25s.utils.json_functions import loads  # the decoder bm25s.BM25.load uses (orjson where installed)

    try:
        value = loads(data)
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, nested too deep
        raise DamagedIndex(f"{name} is not JSON ({str(err)[:120]})") from None
    if not isinstance(value, kind):
        raise DamagedIndex(f"{name} is not a JSON {'object' if kind is dict else kind.__name__}")
    return value


def _settings(params: dict[str, Any], n_docs: int, k1: float, b: float, method: str) -> None:
    if set(params) != set(PARAMS):
        raise DamagedIndex(f"its settings hold {sorted(params)[:12]}, not the {len(PARAMS)} bm25s writes")
    if type(params["num_docs"]) is not int or params["num_docs"] != n_docs:
        raise DamagedIndex(f"the saved BM25 index is for another corpus: it holds {params['num_docs']!r:.40} "
                           f"documents, this one {n_docs:,}")
    want = {"k1": k1, "b": b, "method": method, "idf_method": method, "dtype": "float32", "int_dtype": "int32",
            "backend": "numpy"}
    for key, value in want.items():
        if params[key] != value or type(params[key]) is bool:
            raise DamagedIndex(f"its {key} is {params[key]!r:.40}, the index asked for has {value!r}")
    delta = params["delta"]
    if not isinstance(delta, (int, float)) or isinstance(delta, bool) or not math.isfinite(delta):
        raise DamagedIndex(f"its delta {delta!r:.40} is not a finite number")
    if not isinstance(params["version"], str):
        raise DamagedIndex("its bm25s version is not text")


def _scores(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_docs: int) -> int:
    """The number of terms the compressed-sparse-column score matrix holds, once it is one."""
    if len(indptr) == 0 or indptr[0] != 0:
        raise DamagedIndex("its score matrix's offsets do not start at 0")
    if len(data) != len(indices) or indptr[-1] != len(data):
        raise DamagedIndex(f"its score matrix holds {len(data):,} scores, {len(indices):,} document numbers and "
                           f"offsets ending at {int(indptr[-1]):,}")
    if len(indptr) > 1 and np.diff(indptr).min() < 0:
        raise DamagedIndex("its score matrix's offsets go backwards")
    low, high = (int(indices.min()), int(indices.max())) if len(indices) else (0, 0)
    if low < 0 or high >= n_docs:
        raise DamagedIndex(f"its score matrix names document {low if low < 0 else high:,} of a corpus of {n_docs:,}")
    if not np.isfinite(data).all():
        raise DamagedIndex("its score matrix holds a score that is not finite")
    return len(indptr) - 1


def _vocabulary(vocab: dict[str, Any], terms: int) -> set[int]:
    """bm25s's numbering: the corpus's ``terms`` terms numbered 0..terms-1, its empty token after them
    (the set of numbers, which the engine keeps)."""
    empty = vocab.get("", None)
    if len(vocab) - (empty is not None) != terms or (empty is not None and (type(empty) is not int or empty != terms)):
        raise DamagedIndex(f"its vocabulary of {len(vocab):,} entries does not number the score matrix's {terms:,} "
                           "terms")
    kinds = set(map(type, vocab.values()))
    if kinds - {int}:
        raise DamagedIndex(f"its vocabulary numbers a term with a {sorted(k.__name__ for k in kinds - {int})[0]}, "
                           "not a whole number")
    distinct = set(vocab.values())
    if len(distinct) != len(vocab) or (distinct and (min(distinct) != 0 or max(distinct) != len(vocab) - 1)):
        raise DamagedIndex(f"its vocabulary does not number its {terms:,} terms 0 to {terms - 1:,} each once")
    return distinct


def extra(blob: bytes, n_docs: int, vocab: dict[str, Any]) -> tuple[np.ndarray, dict[str, int]]:
    """(document lengths, document frequencies) from ``rankscope.npz``, checked against the corpus
    and the vocabulary."""
    parts = members(blob, EXTRA_MEMBERS, EXTRA)
    doc_len = array(parts["doc_len.npy"], "doc_len", "f8")
    terms, counts = array(parts["df_terms.npy"], "df_terms", "U"), array(parts["df_counts.npy"], "df_counts", "i")
    if len(doc_len) != n_docs:
        raise DamagedIndex(f"the saved BM25 index is for another corpus: it holds {len(doc_len):,} document "
                           f"lengths, this one {n_docs:,} documents")
    if len(doc_len) and not (np.isfinite(doc_len).all() and doc_len.min() >= 0):
        raise DamagedIndex("its document lengths hold one that is negative or not finite")
    if len(terms) != len(counts):
        raise DamagedIndex(f"its document frequencies name {len(terms):,} terms with {len(counts):,} counts")
    if len(counts) and (counts.min() < 1 or counts.max() > n_docs):
        raise DamagedIndex(f"its document frequencies hold a count outside 1..{n_docs:,}")
    df = dict(zip(terms.tolist(), counts.tolist()))
    if len(df) != len(terms) or len(df) != len(vocab) - ("" in vocab) or "" in df or not df.keys() <= vocab.keys():
        raise DamagedIndex("its document frequencies are not of its vocabulary's terms, each once")
    return doc_len, df


def spot_check(vocab: dict[str, Any], doc_len: np.ndarray, df: dict[str, Any], indices: np.ndarray, indptr: np.ndarray,
               texts: Sequence[str], tokenizer: Callable[[str], list[str]], spots: int = SPOTS) -> None:
    """A spread of ``spots`` documents, tokenized now, must have the length the index holds, terms all
    in its vocabulary, and be in the score column of their rarest term: another corpus's index of the
    same size and settings, stored under this corpus's key, is consistent in itself and caught here."""
    n = len(texts)
    for row in sorted(set(np.linspace(0, n - 1, min(spots, n)).astype(int).tolist())):
        tokens = tokenizer(texts[row])
        if len(tokens) != doc_len[row] or any(t not in df for t in tokens):
            raise DamagedIndex(f"document {row:,} has {len(tokens):,} terms, not the {doc_len[row]:g} of the index "
                               "(another corpus's index?)")
        if tokens:
            column = vocab[min(tokens, key=df.__getitem__)]
            if not (indices[indptr[column]:indptr[column + 1]] == row).any():
                raise DamagedIndex(f"document {row:,} is not scored for its rarest term (another corpus's index?)")


def read(blob: object, texts: Sequence[str], tokenizer: Callable[[str], list[str]], k1: float, b: float,
         method: str) -> tuple[Any, np.ndarray, dict[str, int]]:  # Any: a bm25s.BM25 (bm25s has no types)
    """(a ``bm25s.BM25`` as ``bm25s.BM25.load`` makes it, document lengths, document frequencies)
    from a stored index of the corpus ``texts`` (tokenized by ``tokenizer``); ``DamagedIndex``
    naming the first problem."""
    import bm25s

    n_docs = len(texts)
    parts = members(blob, MEMBERS)
    params = _json(parts[SETTINGS], SETTINGS, dict)
    _settings(params, n_docs, k1, b, method)
    data = array(parts["data.csc.index.npy"], "data.csc.index.npy", "f4")
    indices = array(parts["indices.csc.index.npy"], "indices.csc.index.npy", "i")
    indptr = array(parts["indptr.csc.index.npy"], "indptr.csc.index.npy", "i")
    terms = _scores(data, indices, indptr, n_docs)
    vocab = _json(parts[VOCABULARY], VOCABULARY, dict)
    numbers = _vocabulary(vocab, terms)
    doc_len, df = extra(parts[EXTRA], n_docs, vocab)
    spot_check(vocab, doc_len, df, indices, indptr, texts, tokenizer)
    # as bm25s.BM25.load builds it (0.3): the checked settings, the vocabulary, the three arrays
    engine = bm25s.BM25(**{k: params[k] for k in PARAMS if k not in ("num_docs", "version")})
    engine.vocab_dict = vocab
    engine._original_version = params["version"]
    engine.unique_token_ids_set = numbers
    engine.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}
    engine.nonoccurrence_array = None  # only bm25l and bm25+ have one, and RankScope offers neither
    return engine, doc_len, df
