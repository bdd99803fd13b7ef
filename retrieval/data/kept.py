"""Uploaded data sets kept beside the store, so that a reload, another visit or a restart reopens one
with its added queries (``query_sets``) and its judgments (kept by corpus in the store) as it was
left, without uploading it again.

* ``keep`` — after an upload opened, copy its files to ``Store.kept_dir``/<id>/<n>/<name> (each
  file's own name kept, so reading them again sorts and names them as the upload was) and record the
  data set for its maker; the id is the data set's ``content_hash``;
* ``listed`` — the kept data sets a viewer sees, the most recently opened first;
* ``reopen`` — the files read again by the upload readers (``readers.load_uploads``: every check an
  upload gets), and the data set only when it is the one kept (its content hash), never another;
  before that, each file must be a regular file of the data set's folder, never a link, a FIFO or
  a device, and together they may hold no more than ``MAX_BYTES`` (``retrieval.files.read_back``),
  else none is read;
* ``forget`` — a kept data set's record, and its files once no record names them.

Each record has a maker (``retrieval.sharing.owners``). Off a shared deployment every record is
everyone's, as it is kept. On a shared one (``SPACE_ID``, ``app.py --shared``) a record is its
browser's (the browser's token, ``retrieval.sharing.browser_tokens``): no other session lists it,
reopens it or forgets it, and naming its id is answered as naming none. What is kept is bounded:
``MAX_PER_MAKER`` data sets per maker (its least recently opened forgotten first), ``MAX_KEPT`` data
sets and ``MAX_BYTES`` bytes of files in all (the least recently opened forgotten first); a data set
larger than that, or whose file names cannot be kept as they came, is opened but not kept.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.data.dataset import Dataset
from retrieval.data.readers import load_uploads
from retrieval.files.read_back import NotReadBack, open_read_back
from retrieval.progress import Progress
from retrieval.safe_names import file_name_problem, shown
from retrieval.sharing.owners import OPERATOR, Viewer
from retrieval.store import Store
from retrieval.stored_rows import KEPT_FILES

MAX_PER_MAKER = 10  # data sets one maker keeps (its least recently opened forgotten first)
MAX_KEPT = 100  # data sets kept in all
MAX_BYTES = 4 * 2**30  # bytes of kept files in all
NOT_KEPT = "no such data set is kept (Data → data sets kept lists the ones you can reopen)"


@dataclass(frozen=True)
class Kept:
    """A kept data set as a viewer sees it."""

    id: str  # the data set's content hash when it was kept
    name: str
    corpus: str
    documents: int
    queries: int
    owner: str
    published: bool
    created: float
    opened: float
    files: tuple[str, ...]
    bytes: int


def _kept(row: dict[str, Any]) -> Kept:
    return Kept(row["id"], row["name"], row["corpus"], row["documents"], row["queries"], row["owner"],
                row["published"], row["created"], row["opened"], tuple(row["files"]), row["bytes"])


def listed(store: Store | None, viewer: Viewer = OPERATOR) -> list[Kept]:
    """The kept data sets ``viewer`` sees, each once, the most recently opened first."""
    if store is None:
        return []
    seen: dict[str, Kept] = {}
    for row in store.kept(viewer.filter):
        seen.setdefault(row["id"], _kept(row))
    return list(seen.values())


def _folder(store: Store, kept_id: str) -> Path:
    return store.kept_dir / kept_id


def _paths(store: Store, kept_id: str, files: Iterable[str]) -> list[Path]:
    return [_folder(store, kept_id) / str(n) / name for n, name in enumerate(files)]


def keep(store: Store | None, dataset: Dataset, paths: list[str], viewer: Viewer = OPERATOR) -> Kept | None:
    """Keep the files ``paths`` an upload of ``dataset`` was read from, for ``viewer`` (private to it on
    a shared deployment); the record, or None without a store. A ValueError in one line, nothing
    kept, for a file name that cannot be kept as it came (``safe_names.file_name_problem``), more than
    ``KEPT_FILES`` files, or files larger than ``MAX_BYTES`` in all; past the bounds (module docstring)
    the least recently opened are forgotten."""
    if store is None:
        return None
    files = [Path(p).name for p in paths]
    if not 0 < len(files) <= KEPT_FILES:
        raise ValueError(f"an upload of {len(files)} files is not kept (at most {KEPT_FILES})")
    for name in files:
        problem = file_name_problem(name)
        if problem is not None:
            raise ValueError(f"the file name {shown(name)} {problem}: the data set is not kept")
    size = sum(os.path.getsize(p) for p in paths)
    if size > MAX_BYTES:
        raise ValueError(f"its files hold {size / 2**20:,.0f} MiB, more than the {MAX_BYTES / 2**20:,.0f} MiB "
                         "kept in all: the data set is not kept")
    kept_id = dataset.content_hash
    try:
        _write(store, kept_id, paths, files)
    except OSError as err:  # a full disk, a folder that cannot be written
        raise ValueError(f"its files could not be kept beside the store ({err.strerror or err})") from None
    now = time.time()
    before = next((k for k in listed(store, viewer) if k.id == kept_id and k.owner == viewer.owner), None)
    store.put_kept({"owner": viewer.owner, "id": kept_id, "corpus": dataset.corpus_hash, "name": dataset.name,
                    "files": json.dumps(files), "documents": len(dataset.docs), "queries": len(dataset.queries),
                    "bytes": size, "published": int(not viewer.shared),
                    "created": before.created if before else now, "opened": now})
    _bound(store, viewer, kept_id)
    return next(k for k in listed(store, viewer) if k.id == kept_id)


def _write(store: Store, kept_id: str, paths: list[str], files: list[str]) -> None:
    """The files copied to the data set's folder, written aside and moved into place (a folder
    that holds them already, as these names say, is kept as it is)."""
    folder = _folder(store, kept_id)
    if all(p.is_file() for p in _paths(store, kept_id, files)):
        return
    store.kept_dir.mkdir(parents=True, exist_ok=True)
    aside = store.kept_dir / f".{kept_id}.{os.getpid()}.{secrets.token_hex(4)}.part"
    try:
        for n, (path, name) in enumerate(zip(paths, files, strict=True)):
            (aside / str(n)).mkdir(parents=True)
            shutil.copyfile(path, aside / str(n) / name)
        old = None
        if folder.exists():  # the same data set uploaded as other files: the new ones replace them
            old = store.kept_dir / f".{kept_id}.{os.getpid()}.{secrets.token_hex(4)}.old"
            folder.rename(old)
        aside.rename(folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _bound(store: Store, viewer: Viewer, just: str) -> None:
    """Forget what passes the bounds (module docstring), never the data set ``just`` kept."""
    own = [k for k in listed(store, viewer) if k.owner == viewer.owner]
    for k in own[MAX_PER_MAKER:]:
        if k.id != just:
            store.forget_kept(k.id, viewer.owner)
    everyone = listed(store)  # the most recently opened first
    total, count = 0, 0
    for k in everyone:
        total, count = total + k.bytes, count + 1
        if k.id != just and (count > MAX_KEPT or total > MAX_BYTES):
            store.forget_kept(k.id)
    _sweep(store)


def _sweep(store: Store) -> None:
    """Remove the folders of data sets no record names any more (and files left aside by a copy that
    died an hour ago or more)."""
    if not store.kept_dir.is_dir():
        return
    named = store.kept_names()
    for entry in store.kept_dir.iterdir():
        if entry.name.startswith("."):
            try:
                stale = time.time() - entry.stat().st_mtime > 3600
            except OSError:
                continue
            if stale:
                shutil.rmtree(entry, ignore_errors=True)
        elif entry.name not in named:
            shutil.rmtree(entry, ignore_errors=True)


def find(store: Store | None, kept_id: object, viewer: Viewer = OPERATOR) -> Kept:
    """The kept data set ``kept_id`` as ``viewer`` sees it; ``KeyError`` (``NOT_KEPT``, the same
    words whether another maker keeps it or none does) for one it does not see."""
    found = next((k for k in listed(store, viewer) if k.id == kept_id), None) if isinstance(kept_id, str) else None
    if found is None:
        raise KeyError(NOT_KEPT)
    return found


def reopen(store: Store | None, kept_id: object, viewer: Viewer = OPERATOR,
           progress: Progress | None = None) -> Dataset:
    """The kept data set ``kept_id`` read again from its files, as an upload is (``load_uploads``);
    ``KeyError`` for one ``viewer`` does not see (``find``), a ValueError when its files are gone or
    no longer hold the data set kept (then it is not opened); ``DataError`` as an upload's."""
    found = find(store, kept_id, viewer)
    assert store is not None  # find found it in the store
    paths = _paths(store, found.id, found.files)
    _check_files(store, found, paths)
    dataset = load_uploads([str(p) for p in paths], progress)
    if dataset.content_hash != found.id:
        raise ValueError(f"the files kept of {shown(found.name)} no longer hold the data set that was kept (changed "
                         "on disk): not opened; upload it again")
    store.open_kept(found.owner, found.id)
    return dataset


def _check_files(store: Store, found: Kept, paths: list[Path]) -> None:
    """A ValueError, nothing read, unless every one of ``paths`` is a regular file of
    the data set's folder (``read_back``: no link, FIFO, device or socket in its place) and together
    they hold no more than ``MAX_BYTES``, the most kept in all."""
    size = 0
    try:
        for path in paths:
            with open_read_back(path, _folder(store, found.id), MAX_BYTES) as f:
                size += os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        raise ValueError(f"the files of {shown(found.name)} are no longer kept beside the store: upload it "
                         "again") from None
    except NotReadBack as err:
        raise ValueError(f"the files kept of {shown(found.name)} are not the files kept ({err}): not opened; upload "
                         "it again") from None
    if size > MAX_BYTES:
        raise ValueError(f"the files kept of {shown(found.name)} hold {size / 2**20:,.0f} MiB, more than the "
                         f"{MAX_BYTES / 2**20:,.0f} MiB kept in all (changed on disk): not opened; upload it again")


def forget(store: Store | None, kept_id: object, viewer: Viewer = OPERATOR) -> Kept:
    """Forget the kept data set ``kept_id`` (off a shared deployment everyone's record of it; on a
    shared one ``viewer``'s own), and its files once no record names them; the record forgotten.
    ``KeyError`` (``find``) for one ``viewer`` does not see."""
    found = find(store, kept_id, viewer)
    assert store is not None
    store.forget_kept(found.id, viewer.owner if viewer.shared else None)
    _sweep(store)
    return found
