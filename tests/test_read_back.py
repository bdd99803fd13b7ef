"""What RankScope reads back is checked before it is used: a kept FAISS index that is foreign,
cut, forged or of another dimension is built again and replaced, never served; the ``.part`` files a
killed writer left are removed. Every case tampers a real file, as a person or a crash would."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import pytest

from retrieval import kept_index, part_files
from retrieval.dataset import Dataset, Document
from retrieval.dense import DenseIndex
from retrieval.kept_index import Stamp, stamp_path
from retrieval.store import Store
from retrieval.workspace import Workspace

from .conftest import ROOT


# ---- kept FAISS indexes ------------------------------------------------------------------------
class Kept:
    """A corpus whose dense index was built once and kept beside its store, and ways to reopen it."""

    def __init__(self, dataset, encoder, folder: Path, kind: str):
        self.dataset, self.encoder, self.folder, self.kind = dataset, encoder, folder, kind
        self.store_path = folder / "store.sqlite3"
        self.built = self.workspace().build_dense()
        (self.index,) = (folder / "indexes").glob("*.faiss")
        self.stamp = stamp_path(self.index)
        self.original = self.index.read_bytes()

    def workspace(self, **kwargs) -> Workspace:
        return Workspace(self.dataset, Store(self.store_path), model=self.encoder, index_kind=self.kind, **kwargs)

    def reopen(self, caplog) -> tuple:
        """(the dense retriever a new process would build, the warnings it logged)."""
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            dense = self.workspace().build_dense()
        return dense, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    def restamp(self, **changes) -> None:
        """Forge a stamp that matches the file as it is now (its size and checksum), with ``changes``."""
        record = json.loads(self.stamp.read_text())
        data = self.index.read_bytes()
        record.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), **changes)
        self.stamp.write_text(json.dumps(record))

    def patch(self, offset: int, fmt: str, value) -> None:
        data = bytearray(self.index.read_bytes())
        struct.pack_into("<" + fmt, data, offset, value)
        self.index.write_bytes(bytes(data))


@pytest.fixture(params=["flat", "hnsw"])
def kept(request, toy_dataset, tiny_encoder, tmp_path) -> Kept:
    return Kept(toy_dataset, tiny_encoder, tmp_path, request.param)


@pytest.fixture
def flat(toy_dataset, tiny_encoder, tmp_path) -> Kept:
    return Kept(toy_dataset, tiny_encoder, tmp_path, "flat")


def other_corpus(dataset: Dataset) -> Dataset:
    """A corpus of the same size and ids, other texts: its index fits every count the first one has."""
    docs = {d: Document(d, doc.title, f"{doc.text} about something else entirely, number {i}")
            for i, (d, doc) in enumerate(reversed(list(dataset.docs.items())))}
    return Dataset("other", dict(zip(dataset.docs, docs.values())), dataset.queries, dataset.qrels)


def assert_rebuilt(kept: Kept, dense, warned: list[str], said: str) -> None:
    """The kept file was refused for ``said``, built again from the store and replaced: the index
    served holds the corpus's own vectors, and the next open serves the new file without a word."""
    said = (said,) if isinstance(said, str) else said  # what the refusal says (for a flat or an HNSW file)
    assert any(str(kept.index) in w and any(s in w for s in said) for w in warned), warned
    np.testing.assert_array_equal(np.asarray(dense.index.embeddings), np.asarray(kept.built.index.embeddings))
    assert dense.index.index.d == kept.encoder.dim
    record = json.loads(kept.stamp.read_text())
    assert record["sha256"] == hashlib.sha256(kept.index.read_bytes()).hexdigest()


def test_a_kept_index_with_its_stamp_is_served_without_a_word(kept, caplog):
    dense, warned = kept.reopen(caplog)
    assert warned == [] and dense.encoded == 0
    record = json.loads(kept.stamp.read_text())
    assert (record["kind"], record["dim"], record["count"], record["corpus"], record["encoder"]) == (
        kept.kind, kept.encoder.dim, len(kept.dataset.docs), kept.dataset.corpus_hash, kept.encoder.fingerprint)
    assert record["bytes"] == len(kept.original) and record["sha256"] == hashlib.sha256(kept.original).hexdigest()


def _stamp(**changes):
    def tamper(kept: Kept) -> None:
        record = json.loads(kept.stamp.read_text())
        record.update(changes)
        kept.stamp.write_text(json.dumps(record))
    return tamper


def _stamp_text(text: str):
    return lambda kept: kept.stamp.write_text(text)


def _no_stamp(kept: Kept) -> None:
    kept.stamp.unlink()


def _stamp_folder(kept: Kept) -> None:
    kept.stamp.unlink()
    kept.stamp.mkdir()


def _cut(restamp: bool):
    def tamper(kept: Kept) -> None:
        kept.index.write_bytes(kept.original[:len(kept.original) // 2])
        if restamp:
            kept.restamp()
    return tamper


def _random(restamp: bool):
    def tamper(kept: Kept) -> None:
        kept.index.write_bytes(np.random.default_rng(0).bytes(len(kept.original)))
        if restamp:
            kept.restamp()
    return tamper


def _appended(kept: Kept) -> None:
    kept.index.write_bytes(kept.original + b"\0" * 64)
    kept.restamp()


def _flipped(restamp: bool):
    def tamper(kept: Kept) -> None:
        data = bytearray(kept.original)
        data[-3] ^= 0x40  # in the last vector: the file still parses
        kept.index.write_bytes(bytes(data))
        if restamp:
            kept.restamp()
    return tamper


def _header(offset: int, fmt: str, value):
    def tamper(kept: Kept) -> None:
        kept.patch(offset, fmt, value)
        kept.restamp()
    return tamper


def _replaced_by(make):
    """The kept file replaced by the index ``make(kept)`` builds, its stamp forged to match it."""
    def tamper(kept: Kept) -> None:
        faiss.write_index(make(kept), str(kept.index))
        kept.restamp()
    return tamper


def _l2(kept: Kept):
    index = faiss.IndexFlatL2(kept.encoder.dim)
    index.add(np.asarray(kept.built.index.embeddings))
    return index


def _flat_for_hnsw(kept: Kept):
    index = faiss.IndexFlatIP(kept.encoder.dim)
    index.add(np.asarray(kept.built.index.embeddings))
    return index


N_DOCS = 8  # the toy corpus's documents
HOSTILE_STAMPS = [
    ("no stamp (kept before stamps)", _no_stamp, "no stamp"),
    ("stamp not JSON", _stamp_text("{cut"), "not a JSON stamp"),
    ("stamp not UTF-8", lambda k: k.stamp.write_bytes(b"\xff\xfe{"), "not a JSON stamp"),
    ("stamp a list", _stamp_text("[1, 2]"), "not a JSON object"),
    ("stamp without checksum", _stamp(sha256=None), "'sha256' is missing"),
    ("stamp count a boolean", _stamp(count=True), "'count' is missing or not a whole number"),
    ("stamp of a later format", _stamp(format=2), "stamp format 2"),
    ("stamp of 100 KB", _stamp(note="x" * 100_000), "a stamp is under 64 KB"),
    ("stamp of another corpus", _stamp(corpus="0" * 64), "its stamp says corpus"),
    ("stamp of another encoder", _stamp(encoder="another-model"), "its stamp says encoder"),
    ("stamp of another dimension", _stamp(dim=16), "its stamp says dim 16, the encoder needs 32"),
    ("stamp of another count", _stamp(count=9), "its stamp says count 9, the corpus needs 8"),
    ("stamp of another kind", lambda k: _stamp(kind="hnsw" if k.kind == "flat" else "flat")(k), "its stamp says kind"),
]
HOSTILE_FILES = [
    ("cut in half", _cut(False), "bytes, its stamp says"),
    ("cut in half, stamp forged", _cut(True), ("declares 8 vectors of 32 floats (1,024 bytes) in a file of",
                                               "its neighbours declares")),
    ("random bytes", _random(False), "index where"),
    ("random bytes, stamp forged", _random(True), "index where"),
    ("bytes appended, stamp forged", _appended, "64 bytes past the end"),
    ("a vector byte flipped", _flipped(False), "its sha256 is not its stamp's"),
    ("a vector byte flipped, stamp forged", _flipped(True), "is not the stored embedding of that document"),
    ("dimension 0", _header(4, "i", 0), "dimension 0"),
    ("another dimension in the header", _header(4, "i", 16), ("its vector block holds 256 items where 128 are due",
                                                               "its graph and its vectors differ")),
    ("negative count", _header(8, "q", -5), "-5 vectors"),
    ("an L2 index", _replaced_by(_l2), "index where"),
]


@pytest.mark.parametrize("case, tamper, said", HOSTILE_STAMPS + HOSTILE_FILES, ids=lambda v: v if isinstance(v, str)
                         and " " in v else "")
def test_a_kept_index_that_is_not_what_it_must_be_is_built_again_never_served(kept, caplog, case, tamper, said):
    tamper(kept)
    dense, warned = kept.reopen(caplog)
    assert_rebuilt(kept, dense, warned, said)
    _, again = kept.reopen(caplog)
    assert again == []  # replaced: the next open serves it


def test_a_folder_in_place_of_the_stamp_is_refused_and_the_index_served_from_memory(flat, caplog):
    _stamp_folder(flat)
    dense, warned = flat.reopen(caplog)
    assert any("its stamp cannot be read" in w for w in warned) and any("could not keep" in w for w in warned)
    np.testing.assert_array_equal(np.asarray(dense.index.embeddings), np.asarray(flat.built.index.embeddings))
    assert not list(flat.index.parent.glob("*.part"))  # nothing written aside is left behind


def test_a_flat_file_under_an_hnsw_name_is_refused(toy_dataset, tiny_encoder, tmp_path, caplog):
    kept = Kept(toy_dataset, tiny_encoder, tmp_path, "hnsw")
    _replaced_by(_flat_for_hnsw)(kept)
    dense, warned = kept.reopen(caplog)
    assert_rebuilt(kept, dense, warned, "b'IxFI' index where b'IHNf' is due")
    assert dense.index.kind == "hnsw" and isinstance(dense.index.index, faiss.IndexHNSWFlat)


def test_another_corpus_index_of_the_same_size_is_never_served_and_search_agrees_with_evaluate(
        toy_dataset, tiny_encoder, tmp_path, caplog):
    ours = Kept(toy_dataset, tiny_encoder, tmp_path / "ours", "flat")
    ws = ours.workspace()
    evaluated = ws.run("dense", "test")  # the cached run Evaluate reads from now on
    theirs = Kept(other_corpus(toy_dataset), tiny_encoder, tmp_path / "theirs", "flat")
    for copied in (theirs.index, theirs.stamp):  # their index and its own stamp, under our name
        (ours.folder / "indexes" / copied.name.replace(theirs.index.name, ours.index.name)).write_bytes(
            copied.read_bytes())
    dense, warned = ours.reopen(caplog)
    assert_rebuilt(ours, dense, warned, "its stamp says corpus")
    again = ours.workspace()
    queries = toy_dataset.split_queries("test")
    assert again.search("dense", queries, 100) == evaluated == again.run("dense", "test")


def test_another_corpus_index_with_a_stamp_forged_for_ours_is_caught_by_its_vectors(
        toy_dataset, tiny_encoder, tmp_path, caplog):
    ours = Kept(toy_dataset, tiny_encoder, tmp_path / "ours", "hnsw")
    theirs = Kept(other_corpus(toy_dataset), tiny_encoder, tmp_path / "theirs", "hnsw")
    ours.index.write_bytes(theirs.original)
    ours.restamp()  # size and checksum of their file, every other field ours
    dense, warned = ours.reopen(caplog)
    assert_rebuilt(ours, dense, warned, "is not the stored embedding of that document (another corpus's index?)")


def test_an_index_of_another_dimension_is_refused_and_dense_search_works(flat, caplog):
    rng = np.random.default_rng(1)
    narrow = DenseIndex(list(flat.dataset.docs), rng.standard_normal((N_DOCS, 16)).astype(np.float32))
    narrow.write(flat.index, Stamp("flat", 16, N_DOCS, flat.dataset.corpus_hash, flat.encoder.fingerprint))
    dense, warned = flat.reopen(caplog)
    assert_rebuilt(flat, dense, warned, "its stamp says dim 16, the encoder needs 32")
    flat.restamp(dim=flat.encoder.dim)  # now rebuilt; forge the narrow one again with a stamp claiming 32
    narrow.write(flat.index, Stamp("flat", 16, N_DOCS, flat.dataset.corpus_hash, flat.encoder.fingerprint))
    flat.restamp(dim=flat.encoder.dim)
    dense, warned = flat.reopen(caplog)
    assert_rebuilt(flat, dense, warned, "holds 8 vectors of 16 floats, the corpus and encoder need 8 of 32")
    ws = flat.workspace()
    hits = ws.search("dense", {"q": "a cat on a mat"}, 3)["q"]
    assert len(hits) == 3 and ws.search("hybrid", {"q": "a cat on a mat"}, 3)["q"]


class ReadSpy:
    """Counts calls of ``faiss.read_index`` (and passes them on): a forged header must stop before it."""

    def __init__(self, monkeypatch):
        self.calls, real = 0, faiss.read_index

        def counted(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(faiss, "read_index", counted)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


HUGE_HEADERS = [  # (kind, offset, struct format, value, what the refusal says)
    ("flat", 8, "q", 2 ** 40, "declares 1,099,511,627,776 vectors"),  # ntotal: 140 TB of vectors
    ("flat", 4, "i", 2 ** 30, "declares 8 vectors of 1,073,741,824 floats"),  # d
    ("flat", 0x25, "Q", 2 ** 37, "its vector block holds 137,438,953,472 items where 256 are due"),
    ("hnsw", 8, "q", 2 ** 40, "declares 1,099,511,627,776 vectors"),
    ("hnsw", 0x25, "Q", 2 ** 40, "its level probabilities declares 1,099,511,627,776 items"),
]


@pytest.mark.parametrize("kind, offset, fmt, value, said", HUGE_HEADERS)
def test_a_forged_huge_header_is_refused_before_faiss_allocates_anything(
        toy_dataset, tiny_encoder, tmp_path, caplog, monkeypatch, kind, offset, fmt, value, said):
    kept = Kept(toy_dataset, tiny_encoder, tmp_path, kind)
    _header(offset, fmt, value)(kept)  # its stamp forged to match: only the header walk can tell
    spy, before = ReadSpy(monkeypatch), _peak_mb()
    with pytest.raises(kept_index.Untrusted, match=said):
        kept_index.read(kept.index, Stamp(kind, kept.encoder.dim, N_DOCS, toy_dataset.corpus_hash,
                                          tiny_encoder.fingerprint))
    assert spy.calls == 0 and _peak_mb() - before < 64
    dense, warned = kept.reopen(caplog)  # and the workspace builds it again
    assert_rebuilt(kept, dense, warned, said)
    assert spy.calls == 0 and _peak_mb() - before < 256  # built again from the store's vectors, not read


def test_the_hnsw_graph_lengths_are_checked_too(toy_dataset, tiny_encoder, tmp_path):
    kept = Kept(toy_dataset, tiny_encoder, tmp_path, "hnsw")
    with open(kept.index, "rb") as f:  # where the neighbours' length is: after four blocks of the graph
        walk = kept_index._Walk(f, len(kept.original), kept.index.name)
        walk.header(b"IHNf")
        for item in (8, 4, 4, 8):  # level probabilities, neighbours per level, levels, offsets
            walk.block("", item)
        at = walk.pos
    _header(at, "Q", 2 ** 38)(kept)
    with pytest.raises(kept_index.Untrusted, match="its neighbours declares 274,877,906,944 items"):
        kept_index.read(kept.index, Stamp("hnsw", kept.encoder.dim, N_DOCS, toy_dataset.corpus_hash,
                                          tiny_encoder.fingerprint))


def test_a_600_kb_file_declaring_a_huge_vector_length_never_reaches_faiss(tmp_path, monkeypatch):
    """The issue's case: a file of 600 KB whose header declares a vector block of terabytes."""
    path = tmp_path / "forged.faiss"
    header = b"IxFI" + struct.pack("<iqqq?i", 384, 300, 1 << 20, 1 << 20, True, 0) + struct.pack("<Q", 2 ** 42)
    path.write_bytes(header + bytes(600_000 - len(header)))
    kept_index.write_stamp(path, path, Stamp("flat", 384, 300, "c", "e"))
    spy, before = ReadSpy(monkeypatch), _peak_mb()
    with pytest.raises(kept_index.Untrusted, match="its vector block holds 4,398,046,511,104 items where 115,200"):
        kept_index.read(path, Stamp("flat", 384, 300, "c", "e"))
    assert spy.calls == 0 and _peak_mb() - before < 64


def test_evict_removes_each_index_with_its_stamp(flat):
    from retrieval.engines.local import evict

    corpus = flat.index.name.split("-", 1)[0]
    old = flat.index.with_name(f"{corpus}-old.faiss")
    old.write_bytes(b"x")
    stamp_path(old).write_text("{}")
    os.utime(old, (1, 1))
    assert evict(flat.index, keep=1) == [old]
    assert not old.exists() and not stamp_path(old).exists() and flat.stamp.exists()


# ---- .part files a killed writer left -----------------------------------------------------------
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_real_orphan_of_a_killed_writer_is_removed_when_the_folder_is_opened(flat, caplog):
    script = (f"import os, faiss, sys; sys.path.insert(0, {str(ROOT)!r}); from retrieval.part_files import partial; "
              f"p = partial({str(flat.index)!r}); faiss.write_index(faiss.IndexFlatIP(4), str(p)); os._exit(9)")
    got = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert got.returncode == 9
    (orphan,) = (flat.folder / "indexes").glob("*.part")  # what the killed writer left: never renamed
    _, warned = flat.reopen(caplog)
    assert not orphan.exists() and any(orphan.name in w for w in warned)


@pytest.mark.parametrize("case, pid, age, removed", [
    ("a writer that is gone", "dead", 0, True),
    ("a live writer's, fresh", "parent", 0, False),
    ("a live writer's, untouched for two hours", "parent", 7200, True),
    ("this process's own, fresh (another thread may write it)", "self", 0, False),
    ("this process's own, untouched for two hours", "self", 7200, True),
    ("a pid no process can have", "9999999999", 0, True),
])
def test_part_files_go_when_their_writer_is_gone_or_they_are_old(tmp_path, case, pid, age, removed):
    pid = {"dead": _dead_pid(), "parent": os.getppid(), "self": os.getpid()}.get(pid, pid)
    part = tmp_path / f"abc-def.faiss.{pid}.part"
    part.write_bytes(b"half")
    os.utime(part, (time.time() - age,) * 2)
    others = [f"video.{_dead_pid()}.part", "notes.part", "x.faiss.abc.part", f"x.faiss.{os.getpid()}.partial",
              "x.faiss"]  # not a piece of a kept index: another program's, or no pid
    kept = [tmp_path / n for n in others]
    for f in kept:
        f.write_bytes(b"x")
        os.utime(f, (1, 1))
    assert part_files.remove_orphans(tmp_path, kept_index.KEPT_FILES) == ([part] if removed else [])
    assert part.exists() is not removed and all(f.exists() for f in kept)


def test_a_new_kept_index_clears_the_folder_of_orphans_first(flat):
    orphan = flat.index.with_name(f"{flat.index.name}.{_dead_pid()}.part")
    orphan.write_bytes(b"half")
    DenseIndex(list(flat.dataset.docs), np.asarray(flat.built.index.embeddings)).write(
        flat.index, Stamp("flat", flat.encoder.dim, N_DOCS, flat.dataset.corpus_hash, flat.encoder.fingerprint))
    assert not orphan.exists() and not list(flat.index.parent.glob("*.part"))


def test_the_precision_file_folder_loses_its_orphans(tiny_encoder, tmp_path, monkeypatch):
    from retrieval.encoder import cpu_precision, precision_file

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    orphan = precision_file().with_name(f"{precision_file().name}.{_dead_pid()}.part")
    orphan.write_text("{")
    assert cpu_precision(tiny_encoder.model, timer=lambda bf16: 1.0) in ("bf16", "fp32")
    assert not orphan.exists() and precision_file().exists()
