"""A kept FAISS index is trusted only as far as it is checked.

A ``flat`` or ``hnsw`` index built once is kept in a file beside the store and read back on the
next open (``retrieval.index.engines.local``). That file is outside RankScope's control: another
corpus's index of the same size may be copied under its name, a disk may cut it, and a forged
header can declare a vector block of any length, which FAISS allocates before it reads a byte
(``READVECTOR`` resizes to the declared size first). So beside each kept index a small JSON
*stamp* is written (``write_stamp``, atomically: ``<index>.json``) naming what it must be — its
kind, dimension, vector count, corpus hash, encoder fingerprint, file size and the sha256 of the
whole file — and ``read`` serves the file only when, in this order:

0. the stamp and the file are regular files of the folder within their sizes, opened without
   following a link or waiting on a FIFO (``retrieval.files.read_back``: a FIFO, a device, a socket
   or a link in their place is refused, never opened);
1. the stamp exists, parses, and says what the store, corpus and encoder say the index must be
   (``Stamp``: kind, the encoder's dimension, the corpus's document count and hash, the encoder's
   fingerprint);
2. the file has the size the stamp records;
3. FAISS's own layout, walked here field by field without reading any block (``layout``), has the
   kind's four-character codes, inner-product metric, the dimension and count of the stamp, and
   every length it declares fits in what is left of the file (so ``d × ntotal × 4`` bytes of vectors
   fit before anything is allocated), ending exactly at the end of the file;
4. the sha256 of the bytes FAISS reads (hashed as they pass, through one open file, so the file
   cannot change between the check and the read) equals the stamp's;
5. where the store holds the embeddings the index was built from, a spread of its vectors equals
   them (``spot_rows``): a stamp forged for another corpus's file still does not pass.

Anything else raises ``Untrusted`` naming the file and the mismatch; the caller builds the index
again and replaces both files — a mismatch is never served.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from retrieval.files.part_files import partial
from retrieval.files.read_back import NotReadBack, TooBig, open_read_back, read_back_bytes

STAMP_FORMAT = 1
KEPT_FILES = (".faiss", ".faiss.json")  # how the names of kept indexes and their stamps end (``part_files``)
SPOT_ROWS = 16  # vectors compared with the store's embeddings before a kept index is served
STAMP_BYTES = 64 * 1024  # a stamp is a few hundred bytes
_CHUNK = 1 << 20  # bytes per read while hashing


@dataclass(frozen=True)
class Stamp:
    """What a kept index must be: known from the store, the corpus and the encoder, never from the file."""

    kind: str  # "flat" or "hnsw"
    dim: int  # the encoder's embedding size
    count: int  # the corpus's documents
    corpus: str  # the corpus's content hash
    encoder: str  # the encoder's fingerprint


class Untrusted(ValueError):
    """A kept index file that is not what its stamp and the store say it must be."""


def stamp_path(path: str | Path) -> Path:
    """The stamp beside the kept index ``path``: ``<name>.json``."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_stamp(path: str | Path, written: str | Path, stamp: Stamp) -> Path:
    """Write the stamp of the index file ``written`` (the file about to be moved to ``path``), aside
    then moved into place; returns the stamp's path."""
    import faiss

    written = Path(written)
    record = {"format": STAMP_FORMAT, **asdict(stamp), "bytes": written.stat().st_size,
              "sha256": sha256_of(written), "faiss": faiss.__version__}
    target = stamp_path(path)
    aside = partial(target)
    try:
        aside.write_text(json.dumps(record, sort_keys=True), encoding="utf-8")
        os.replace(aside, target)
    finally:
        aside.unlink(missing_ok=True)
    return target


def read_stamp(path: str | Path) -> dict[str, Any]:
    """The stamp beside ``path`` as written by ``write_stamp``; ``Untrusted`` when it is missing,
    unreadable, or not of that shape."""
    where = stamp_path(path)
    try:
        raw = read_back_bytes(where, where.parent, STAMP_BYTES)
    except FileNotFoundError:
        raise Untrusted(f"{Path(path).name}: no stamp ({where.name}) says what it holds") from None
    except TooBig as err:
        raise Untrusted(f"{where.name}: a stamp is under 64 KB, this one has {err.size:,} bytes") from None
    except OSError as err:  # NotReadBack among them: a folder, a FIFO, a link in its place
        raise Untrusted(f"{Path(path).name}: its stamp cannot be read ({err})") from None
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise Untrusted(f"{where.name}: not a JSON stamp ({err})") from None
    fields = {"format": int, "kind": str, "dim": int, "count": int, "corpus": str, "encoder": str, "bytes": int,
              "sha256": str}
    if not isinstance(record, dict):
        raise Untrusted(f"{where.name}: not a JSON object")
    for key, kind in fields.items():
        if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
            what = "text" if kind is str else "a whole number"
            raise Untrusted(f"{where.name}: its {key!r} is missing or not {what}")
    if record["format"] != STAMP_FORMAT:
        raise Untrusted(f"{where.name}: stamp format {record['format']}, not {STAMP_FORMAT}")
    return record


def check_stamp(path: str | Path, record: dict[str, Any], expected: Stamp) -> None:
    """``Untrusted`` naming the first field where the stamp differs from what the index must be."""
    said_by = {"kind": "the index asked for", "dim": "the encoder", "count": "the corpus", "corpus": "the corpus",
               "encoder": "the encoder"}
    for key, want in asdict(expected).items():
        if record[key] != want:
            shown = (lambda v: f"{v:,}") if isinstance(want, int) else repr
            raise Untrusted(f"{Path(path).name}: its stamp says {key} {shown(record[key])}, {said_by[key]} "
                            f"needs {shown(want)}")


# ---- FAISS's layout (faiss/impl/index_write.cpp: write_index_header, write_HNSW, the flat codes) ----
_FOURCC = {"flat": b"IxFI", "hnsw": b"IHNf"}  # IndexFlatIP; IndexHNSWFlat (whose storage is an IndexFlatIP)
_METRIC_INNER_PRODUCT = 0


class _Walk:
    """Reads the fixed-size fields of a FAISS file and steps over its blocks, each checked to fit."""

    def __init__(self, f: BinaryIO, size: int, name: str):
        self.f, self.size, self.name, self.pos = f, size, name, 0

    def take(self, n: int) -> bytes:
        if n > self.size - self.pos:
            raise Untrusted(f"{self.name}: cut short at byte {self.pos:,} (a {n}-byte field; {self.size:,} bytes "
                            "in all)")
        data = self.f.read(n)
        if len(data) != n:
            raise Untrusted(f"{self.name}: changed while it was read")
        self.pos += n
        return data

    def field(self, fmt: str) -> int:
        """One integer field (``fmt``: a struct code of an integer)."""
        value: int = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def block(self, what: str, item: int, want: int | None = None) -> int:
        """Step over a vector FAISS writes as (size_t n, n items); its n, checked to fit the file."""
        n = self.field("Q")
        if want is not None and n != want:
            raise Untrusted(f"{self.name}: its {what} holds {n:,} items where {want:,} are due")
        if n * item > self.size - self.pos:
            raise Untrusted(f"{self.name}: its {what} declares {n:,} items ({n * item:,} bytes) and only "
                            f"{self.size - self.pos:,} bytes are left")
        self.pos += n * item
        self.f.seek(self.pos)
        return n

    def header(self, fourcc: bytes) -> tuple[int, int]:
        got = self.take(4)
        if got != fourcc:
            raise Untrusted(f"{self.name}: a {got!r} index where {fourcc!r} is due")
        d, ntotal = self.field("i"), self.field("q")
        self.take(16)  # two unused 64-bit fields
        self.take(1)  # is_trained
        metric = self.field("i")
        if metric > 1:
            self.take(4)  # metric_arg
        if metric != _METRIC_INNER_PRODUCT:
            raise Untrusted(f"{self.name}: metric {metric}, not inner product")
        if d <= 0 or ntotal < 0:
            raise Untrusted(f"{self.name}: dimension {d:,} and {ntotal:,} vectors")
        if d * ntotal * 4 > self.size:
            raise Untrusted(f"{self.name}: declares {ntotal:,} vectors of {d:,} floats ({d * ntotal * 4:,} bytes) in a "
                            f"file of {self.size:,} bytes")
        return d, ntotal

    def flat(self) -> tuple[int, int]:
        d, ntotal = self.header(_FOURCC["flat"])
        self.block("vector block", 4, d * ntotal)
        return d, ntotal


def layout(f: BinaryIO, size: int, kind: str, name: str) -> tuple[int, int]:
    """(dimension, vector count) of the FAISS index of ``kind`` in the open binary file ``f`` of
    ``size`` bytes, read field by field: nothing the file declares is allocated, every block is
    checked to fit in the bytes left, and the walk must end exactly at the end of the file;
    ``Untrusted`` otherwise. ``f`` is left at its start."""
    walk = _Walk(f, size, name)
    f.seek(0)
    if kind == "flat":
        d, ntotal = walk.flat()
    elif kind == "hnsw":
        d, ntotal = walk.header(_FOURCC["hnsw"])
        walk.block("level probabilities", 8)
        walk.block("neighbours per level", 4)
        walk.block("levels", 4, ntotal)
        walk.block("offsets", 8, ntotal + 1)
        walk.block("neighbours", 4)
        walk.take(20)  # entry point, max level, efConstruction, efSearch, an unused int
        if walk.flat() != (d, ntotal):
            raise Untrusted(f"{name}: its graph and its vectors differ in dimension or count")
    else:
        raise Untrusted(f"{name}: {kind!r} indexes are not kept")
    if walk.pos != size:
        raise Untrusted(f"{name}: {size - walk.pos:,} bytes past the end of the index")
    f.seek(0)
    return d, ntotal


def spot_rows(count: int, n: int = SPOT_ROWS) -> list[int]:
    """Up to ``n`` rows spread over ``count`` (the first and the last among them)."""
    return sorted({int(r) for r in np.linspace(0, count - 1, min(n, count))}) if count else []


def read(path: str | Path, expected: Stamp, stored: Callable[[list[int]], dict[int, np.ndarray]] | None = None
         ) -> Any:  # a faiss.Index (faiss's bindings declare no types for it)
    """The FAISS index kept in ``path`` once every check of the module docstring passed; ``Untrusted``
    naming the file and the first mismatch otherwise (a damaged file FAISS itself refuses included).
    ``stored(rows)`` gives the store's embeddings of those document rows (the ones it holds)."""
    import faiss

    path = Path(path)
    record = read_stamp(path)
    check_stamp(path, record, expected)
    try:
        opened = open_read_back(path, path.parent, record["bytes"])
    except TooBig as err:
        raise Untrusted(f"{path.name}: {err.size:,} bytes, its stamp says {record['bytes']:,}") from None
    except NotReadBack as err:
        raise Untrusted(str(err)) from None
    with opened as f:
        size = os.fstat(f.fileno()).st_size
        if size != record["bytes"]:
            raise Untrusted(f"{path.name}: {size:,} bytes, its stamp says {record['bytes']:,}")
        d, ntotal = layout(f, size, expected.kind, path.name)
        if (d, ntotal) != (expected.dim, expected.count):
            raise Untrusted(f"{path.name}: holds {ntotal:,} vectors of {d:,} floats, the corpus and encoder need "
                            f"{expected.count:,} of {expected.dim:,}")
        digest = hashlib.sha256()

        def hashed(n: int) -> bytes:
            data = f.read(n)
            digest.update(data)
            return data

        try:
            # faiss's stubs (1.15) leave out its Python-callback reader, which it has
            index = faiss.read_index(faiss.PyCallbackIOReader(hashed, _CHUNK))  # type: ignore[attr-defined]
        except RuntimeError as err:
            raise Untrusted(f"{path.name}: FAISS cannot read it ({str(err).strip().splitlines()[-1]})") from None
        hashed(size)  # anything FAISS left unread counts too
    if digest.hexdigest() != record["sha256"]:
        raise Untrusted(f"{path.name}: its sha256 is not its stamp's (changed since it was written)")
    if index.d != expected.dim or index.ntotal != expected.count:
        raise Untrusted(f"{path.name}: FAISS read {index.ntotal:,} vectors of {index.d:,} floats")
    if stored is not None:
        rows = spot_rows(expected.count)
        known = stored(rows)
        for row, vector in known.items():
            if vector.shape != (expected.dim,) or not np.allclose(index.reconstruct(row), vector, rtol=0, atol=1e-6):
                raise Untrusted(f"{path.name}: its vector {row:,} is not the stored embedding of that document "
                                "(another corpus's index?)")
    return index
