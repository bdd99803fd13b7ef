"""What RankScope reads back is checked before it is used: a kept FAISS index that is foreign,
cut, forged or of another dimension is built again and replaced, never served; the ``.part`` files a
killed writer left are removed; rows of the store that are not of the shape RankScope writes are
left out with a warning (or, for a cached run or evaluation, computed again). Every case tampers a
real file or a real store row, as a person or a crash would."""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import resource
import sqlite3
import struct
import subprocess
import sys
import time
import warnings
import zipfile
import zlib
from pathlib import Path

import faiss
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.dataset import Dataset, Document
from retrieval.files import part_files
from retrieval.index import kept_index
from retrieval.index.dense_index import DenseIndex
from retrieval.index.kept_index import Stamp, stamp_path
from retrieval.judging.judgments import judgments_to_qrels, merged_qrels
from retrieval.store import Store
from retrieval.workspace import Workspace
from tests.conftest import DEMO, ROOT
from tests.helpers import quiet_machine


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
    from retrieval.index.engines.local import evict

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
    script = (f"import os, faiss, sys; sys.path.insert(0, {str(ROOT)!r}); "
              "from retrieval.files.part_files import partial; "
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


def test_the_cpu_choices_file_folder_loses_its_orphans(tiny_encoder, tmp_path, monkeypatch):
    from retrieval.index.cpu_choice import choices_file, choose

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    orphan = choices_file().with_name(f"{choices_file().name}.{_dead_pid()}.part")
    orphan.write_text("{")
    assert choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, batch: 1.0).precision in ("bf16", "fp32")
    assert not orphan.exists() and choices_file().exists()


def test_the_cpu_choices_file_keeps_the_latest_choices_within_its_bound(tiny_encoder, tmp_path, monkeypatch):
    import json

    from retrieval.index.cpu_choice import REMEMBERED, choices_file, choose

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    old = {f"other-{i}": {"precision": "fp32", "batch_size": 32, "cpu": "elsewhere"} for i in range(REMEMBERED + 10)}
    choices_file().write_text(json.dumps(old))
    choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, batch: 1.0)
    kept = json.loads(choices_file().read_text())
    assert len(kept) == REMEMBERED and f"other-{REMEMBERED + 9}" in kept and "other-0" not in kept
    assert sum(not k.startswith("other-") for k in kept) == 1  # this CPU's, the latest


@pytest.mark.parametrize("record", [
    "not a mapping", {"precision": "fp8", "batch_size": 16, "cpu": "x"},
    {"precision": "fp32", "batch_size": 7, "cpu": "x"},
    {"precision": "fp32", "batch_size": True, "cpu": "x"}, {"precision": "fp32", "batch_size": 16.0, "cpu": "x"},
    {"precision": "fp32", "batch_size": 16}, {"precision": "bf16x", "batch_size": 32, "cpu": "x", "rates": {}}])
def test_a_remembered_cpu_choice_that_names_no_candidate_is_measured_again(tiny_encoder, tmp_path, monkeypatch,
                                                                           record):
    """The choices file is read back, not trusted: a record naming no candidate (or not a record)
    is measured again and replaced; rates that are not numbers are dropped from a valid one."""
    import json

    from retrieval.index.cpu_choice import choices_file, choose

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    first = choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, batch: 1.0 / batch)  # 32 fastest
    (key,) = json.loads(choices_file().read_text())
    choices_file().write_text(json.dumps({key: record}))
    calls = []
    again = choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, b: calls.append(b) or 1.0 / b)
    assert calls and again.batch_size == first.batch_size == 32
    assert json.loads(choices_file().read_text())[key]["batch_size"] == 32
    choices_file().write_text(json.dumps({key: {"precision": "fp32", "batch_size": 16, "cpu": "<b>x</b>", "rounds": 3,
                                                "rates": {"fp32/16": "fast", "fp32/32": 3.5, "fp32/64": True}}}))
    kept = choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, batch: 1 / 0)  # valid: not measured
    assert (kept.batch_size, kept.rates) == (16, {"fp32/32": 3.5})
    # a choice an earlier version decided in one pass (no rounds: no spread, no load checked) is measured again
    choices_file().write_text(json.dumps({key: {"precision": "fp32", "batch_size": 16, "cpu": "x",
                                                "rates": {"fp32/16": 9.0, "fp32/32": 3.5}}}))
    calls.clear()
    redone = choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, b: calls.append(b) or 1.0 / b)
    assert calls and redone.batch_size == 32 and redone.rounds >= 1 and "in one pass" not in redone.how
    assert json.loads(choices_file().read_text())[key]["rounds"] == redone.rounds
    # how it was measured, read as data of a bounded size and type: a wrong field is as if absent
    choices_file().write_text(json.dumps({key: {
        "precision": "fp32", "batch_size": 32, "cpu": "x", "rounds": "3", "spread": -1, "token_rate": float("nan"),
        "provisional": "<b>" * 5000, "measured_at": time.time(), "recheck": ["x"]}}))
    odd = choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, batch: 1 / 0)  # provisional, recent
    assert (odd.rounds, odd.spread, odd.token_rate, len(odd.provisional), odd.recheck) == (0, None, 0.0, 200, "")


# ---- rows of the store ---------------------------------------------------------------------------
CORPUS = "c" * 64


@pytest.fixture
def judged(tmp_path):
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    store.put_judgments(CORPUS, [("q1", "cats", "d1", 2, "ana"), ("q1", "cats", "d2", 1, "ana"),
                                 ("q1", "cats", "d3", 0, "ben")])
    yield store, path
    store.close()


def tamper(path: Path, sql: str, *args) -> None:
    with sqlite3.connect(path) as db:
        assert db.execute(sql, args).rowcount >= 1
    db.close()


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("column, value, said", [
    ("grade", 7, "grade 7 is not one of 0, 1, 2"),
    ("grade", -1, "grade -1"),
    ("grade", "two", "grade 'two'"),
    ("grade", b"\x02", "grade b'\\x02'"),
    ("grade", 1.5, "grade 1.5"),
    ("grade", None, "grade None"),
    ("judge", None, "its judge is NoneType, not text"),
    ("judge", "", "a judge's name cannot be empty"),
    ("judge", b"ana", "its judge is bytes, not text"),
    ("judge", "ana\u202e", "RIGHT-TO-LEFT OVERRIDE"),
    ("judge", "x" * 101, "at most 100 characters"),
    ("doc_id", "d 2", "contains whitespace"),
    ("doc_id", "d\x002", "U+0000"),
    ("doc_id", b"d2", "its doc id is bytes"),
    ("query_id", "", "its query id is empty"),
    ("query_id", "q\u200b1", "ZERO WIDTH SPACE"),
    ("query_text", b"\xff", "its query text is not text"),
    ("time", "yesterday", "its time is not a number"),
])
def test_a_tampered_judgment_is_left_out_of_every_reader(judged, caplog, column, value, said):
    store, path = judged
    tamper(path, f"update judgments set {column} = ? where doc_id = 'd2'", value)
    rows = store.judgments(CORPUS)
    assert [(r["doc_id"], r["grade"]) for r in rows] == [("d1", 2), ("d3", 0)]
    assert any("judgments: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text
    assert [r["doc_id"] for r in store.judgments(CORPUS, "ana")] == ["d1"]
    assert judgments_to_qrels(rows) == {"q1": {"d1": 2, "d3": 0}}


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)  # what SQLite can hold as text
_VALUE = st.one_of(st.integers(-2, 9), st.booleans(), st.floats(allow_nan=False), _TEXT, st.binary(max_size=3),
                   st.none())


def _accepted_on_input(row: dict, scratch: Store) -> bool:
    """Whether RankScope would have written this row: the ids the readers accept, the grade and
    judge ``put_judgments`` accepts (into a scratch store)."""
    from retrieval.safe_names import id_problem

    if not all(isinstance(row[k], str) and row[k] and id_problem(row[k]) is None for k in ("query_id", "doc_id")):
        return False
    if not isinstance(row["query_text"], (str, type(None))) or not isinstance(row["time"], (int, float)):
        return False
    try:
        scratch.put_judgments("scratch", [(row["query_id"], row["query_text"], row["doc_id"], row["grade"],
                                           row["judge"])])
    except (ValueError, TypeError):
        return False
    with scratch.db.conn:  # each row alone: no judge is held against another's name
        scratch.db.execute("delete from judgments")
    return True


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries({"query_id": st.one_of(_TEXT, _VALUE), "doc_id": st.one_of(_TEXT, _VALUE),
                                       "judge": st.one_of(_TEXT, _VALUE), "grade": _VALUE, "query_text": _VALUE,
                                       "time": st.one_of(st.floats(0, 1e9), _VALUE)}), max_size=8))
@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_store_reads_back_exactly_the_judgments_input_would_accept(rows):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "store.sqlite3"
        store, scratch = Store(path), Store(Path(folder) / "scratch.sqlite3")
        with sqlite3.connect(path) as db:  # written around RankScope, as another program would
            db.executemany("insert or replace into judgments (corpus, query_id, doc_id, judge, grade, query_text, "
                           "time) values ('c', :query_id, :doc_id, :judge, :grade, :query_text, :time)", rows)
            raw = [dict(zip(("query_id", "doc_id", "judge", "grade", "query_text", "time"), r)) for r in db.execute(
                "select query_id, doc_id, judge, grade, query_text, time from judgments")]  # as SQLite kept them
        db.close()
        read = {(r["query_id"], r["doc_id"], r["judge"]) for r in store.judgments("c")}
        assert read == {(r["query_id"], r["doc_id"], r["judge"]) for r in raw if _accepted_on_input(r, scratch)}
        store.close()
        scratch.close()


def test_a_grade_7_is_never_exported_or_evaluated(tmp_path):
    from retrieval.cli import main
    from retrieval.data.readers import load_dataset

    ds = load_dataset(DEMO)
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    qid = next(iter(ds.qrels["test"]))
    docs = list(ds.docs)[:3]
    store.put_judgments(ds.corpus_hash, [(qid, ds.queries[qid], d, 1, "ana") for d in docs])
    tamper(path, "update judgments set grade = 7 where doc_id = ?", docs[0])
    assert main(["judges", str(DEMO), "--store", str(path), "--export", str(tmp_path / "j.csv"),
                 "--format", "csv"]) == 0
    exported = (tmp_path / "j.csv").read_text()
    assert docs[1] in exported and docs[0] not in exported and "7" not in exported.split("\n", 1)[1]
    assert main(["judges", str(DEMO), "--store", str(path), "--export", str(tmp_path / "q.tsv")]) == 0
    assert docs[0] not in (tmp_path / "q.tsv").read_text()
    assert merged_qrels(store.judgments(ds.corpus_hash)) == {qid: {docs[1]: 1, docs[2]: 1}}
    store.close()


@pytest.fixture
def kept_rows(tmp_path):
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    store.put_query_set(CORPUS, "s1", "mine", {"q1": "cats", "q2": "dogs"})
    store.put_query_set(CORPUS, "s2", "theirs", {"q3": "birds"})
    store.put_sample(CORPUS, "a1", "random", 7, ["q1", "q2"])
    store.put_sample(CORPUS, "a2", "random", 8, ["q3"])
    yield store, path
    store.close()


def packed(obj) -> bytes:
    return zlib.compress(json.dumps(obj).encode())


@pytest.mark.parametrize("column, value, said", [
    ("queries", b"not zlib", "its queries do not unpack"),
    ("queries", zlib.compress(b"{cut"), "its queries do not unpack"),
    ("queries", zlib.compress(b"\xff\xfe"), "its queries do not unpack"),
    ("queries", "text, not bytes", "its queries are str, not packed bytes"),
    ("queries", packed(["q1", "q2"]), "its queries are not an object of ids and texts"),
    ("queries", packed({"q 1": "cats"}), "contains whitespace"),
    ("queries", packed({"q1": 5}), "the text of query 'q1' is not text"),
    ("n", 99, "it says 99 queries and holds 2"),
    ("name", None, "its name is not text"),
])
def test_a_tampered_query_set_is_left_out(kept_rows, caplog, column, value, said):
    store, path = kept_rows
    tamper(path, f"update query_sets set {column} = ? where id = 's1'", value)
    assert [s["id"] for s in store.query_sets(CORPUS)] == ["s2"]
    assert any("query sets: left out 1 damaged row: query set 's1'" in w and said in w for w in warnings_of(caplog))


@pytest.mark.parametrize("column, value, said", [
    ("query_ids", b"\x78\x9c broken", "its query ids do not unpack"),
    ("query_ids", packed({"q1": 1}), "its query ids are not a list"),
    ("query_ids", packed(["q1", 2]), "its query id is int"),
    ("query_ids", packed(["q1", "q\t2"]), "contains whitespace"),
    ("seed", "seven", "its seed is not a whole number"),
    ("method", None, "its method is not text"),
])
def test_a_tampered_judging_sample_is_left_out(kept_rows, caplog, column, value, said):
    store, path = kept_rows
    tamper(path, f"update judging_samples set {column} = ? where id = 'a1'", value)
    assert [s["id"] for s in store.samples(CORPUS)] == ["a2"]
    assert any("judging samples: left out 1 damaged row: sample 'a1'" in w and said in w
               for w in warnings_of(caplog))


@pytest.mark.parametrize("value, said", [
    (b"not zlib", "its hits do not unpack"),
    (packed([["d1", 1.0]]), "its hits are not an object of queries"),
    (packed({"q3": {"d1": 1.0}}), "the hits of query 'q3' are not a list"),
    (packed({"q3": [["d1"]]}), "is not a [document, score] pair"),
    (packed({"q3": [["d1", "high"]]}), "is not a [document, score] pair"),
    (packed({"q3": [[1, 0.5]]}), "is not a [document, score] pair"),
    (packed({"q3": [["d1", True]]}), "is not a [document, score] pair"),
])
def test_a_tampered_cached_run_is_a_miss_computed_again(toy_dataset, tmp_path, caplog, value, said):
    path = tmp_path / "store.sqlite3"
    first = Workspace(toy_dataset, Store(path)).run("bm25", "test")
    tamper(path, "update runs set hits = ?", value)
    again = Workspace(toy_dataset, Store(path))
    assert again.run("bm25", "test") == first
    assert any("runs: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text
    caplog.clear()
    assert Workspace(toy_dataset, Store(path)).run("bm25", "test") == first and warnings_of(caplog) == []


@pytest.mark.parametrize("column, value, said", [
    ("metrics", "{cut", "its metrics are not JSON"),
    ("metrics", "[0.5]", "its metrics are not an object of numbers"),
    ("metrics", json.dumps({"ndcg@10": "high"}), "its metrics are not an object of numbers"),
    ("per_query", b"not zlib", "its per-query values do not unpack"),
    ("per_query", packed({"ndcg@10": 0.5}), "its per-query values are not an object of objects"),
])
def test_a_tampered_cached_evaluation_is_a_miss_computed_again(toy_dataset, tmp_path, caplog, column, value, said):
    path = tmp_path / "store.sqlite3"
    first = Workspace(toy_dataset, Store(path)).evaluate("bm25", "test")
    tamper(path, f"update metrics set {column} = ?", value)
    again = Workspace(toy_dataset, Store(path)).evaluate("bm25", "test")
    assert again.mean == first.mean and again.per_query == first.per_query
    assert any("metrics: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text


@pytest.mark.parametrize("column, value, said", [
    ("config", "{cut", "a JSON field does not decode"),
    ("config", "[1, 2]", "its config is not an object"),
    ("losses", json.dumps({"a": 1}), "its losses is not a list"),
    ("status", None, "its status is not text"),
    ("model_path", b"/x", "its model_path is not text"),
    ("owner", b"app:x", "its owner is not text"),  # who may resume or cancel it on a shared deployment
])
def test_a_tampered_training_job_is_left_out(tmp_path, caplog, column, value, said):
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    for job in ("j1", "j2"):
        store.put_job({"id": job, "status": "done", "kind": "train", "dataset": "d", "config": {"loss": "mnrl"},
                       "losses": [1.0, 0.5], "model_path": str(tmp_path / job), "owner": "app:0123456789abcdef"})
    tamper(path, f"update jobs set {column} = ? where id = 'j1'", value)
    assert [j["id"] for j in store.jobs()] == ["j2"] and store.get_job("j1") is None
    assert store.get_job("j2")["config"] == {"loss": "mnrl"}
    assert any("training jobs: left out 1 damaged row: job 'j1'" in w and said in w for w in warnings_of(caplog))
    store.close()


@pytest.fixture
def snapshotted(tmp_path):
    """The demo's BM25 run of the test split kept as two snapshots, 'good' and 'bad'."""
    from retrieval.data.readers import load_dataset
    from retrieval.tracking import snapshots

    ds = load_dataset(DEMO)
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    ws = Workspace(ds, store)
    for name in ("good", "bad"):
        snapshots.save(store, snapshots.take(ws, "test", ["bm25"], name))
    return ds, store, path


@pytest.mark.parametrize("column, value, said", [
    ("runs", b"not zlib", "its runs do not unpack"),
    ("runs", packed({"bm25": {"q1": [["d1"]]}}), "is not a list of [document, score] pairs"),
    ("meta", "{cut", "its metadata is not JSON"),
    ("name", b"bad", "its name or corpus is not text"),
])
def test_one_damaged_snapshot_leaves_the_others_listed(snapshotted, caplog, column, value, said):
    from retrieval.tracking import snapshots

    ds, store, path = snapshotted
    tamper(path, f"update snapshots set {column} = ? where name = 'bad'", value)
    assert [s.name for s in snapshots.listed(store, ds.corpus_hash)] == ["good"]
    assert any("snapshots: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text
    assert "good" in store.snapshot_names(ds.corpus_hash)
    assert snapshots.load(store, ds.corpus_hash, "good").runs["bm25"]


def test_snapshot_list_in_a_real_process_lists_the_good_and_warns_of_the_damaged(snapshotted, tmp_path):
    ds, store, path = snapshotted
    tamper(path, "update snapshots set runs = ? where name = 'bad'", b"not zlib")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONIOENCODING": "utf-8",
           "RANKSCOPE_HOME": str(tmp_path / "home")}
    got = subprocess.run([sys.executable, "-m", "retrieval", "snapshot", str(DEMO), "--list", "--store", str(path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert got.returncode == 0, got.stderr
    assert " good " in got.stdout and "bad" not in got.stdout
    assert "the snapshot 'bad' in the store is damaged: its runs do not unpack" in got.stderr
    assert "Traceback" not in got.stderr


# ---- stored BM25 indexes ---------------------------------------------------------------------------
class StoredBM25:
    """A corpus whose BM25 index was built once and kept in its store, and ways to forge the row."""

    def __init__(self, dataset, folder: Path):
        self.dataset, self.path = dataset, folder / "store.sqlite3"
        ws = Workspace(dataset, Store(self.path))
        self.built = ws.bm25
        self.expected = ws.search("bm25", dataset.queries, 10)
        with sqlite3.connect(self.path) as db:
            self.key, self.blob = db.execute("select key, [index] from bm25_indexes").fetchone()
        db.close()
        with zipfile.ZipFile(io.BytesIO(self.blob)) as z:
            self.members = {name: z.read(name) for name in z.namelist()}

    def store(self, blob) -> None:
        tamper(self.path, "update bm25_indexes set [index] = ?", blob)

    def reopen(self, caplog) -> tuple[Workspace, list[str]]:
        """(a new process's workspace with its BM25 index read, the warnings that took)."""
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            ws = Workspace(self.dataset, Store(self.path))
            assert ws.bm25 is not None
        return ws, warnings_of(caplog)

    def stored(self) -> bytes:
        with sqlite3.connect(self.path) as db:
            (blob,) = db.execute("select [index] from bm25_indexes where key = ?", [self.key]).fetchone()
        db.close()
        return blob


@pytest.fixture
def bm25_kept(toy_dataset, tmp_path) -> StoredBM25:
    return StoredBM25(toy_dataset, tmp_path)


def zipped(members, compress: dict[str, int] | None = None) -> bytes:
    """A zip of ``members`` (name -> bytes, or (name, bytes) pairs: a name may come twice), stored
    unless ``compress`` names a member's method."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name"
        for name, data in (members.items() if isinstance(members, dict) else members):
            z.writestr(name, data, compress_type=(compress or {}).get(name, zipfile.ZIP_STORED))
    return buf.getvalue()


def npy(array, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def loaded(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data))


def _member(name: str, change):
    """The blob with member ``name`` replaced by ``change(its bytes)``."""
    def forge(kept: StoredBM25) -> bytes:
        return zipped({**kept.members, name: change(kept.members[name])})
    return forge


def _params(**changes):
    def change(data: bytes) -> bytes:
        return json.dumps({**json.loads(data), **changes}).encode()
    return _member("params.index.json", change)


def _array(name: str, change):
    """Member ``name`` (a .npy) replaced by the array ``change(its array)``, a well-formed .npy."""
    return _member(name, lambda data: npy(change(loaded(data).copy())))


def _setting_item(array: np.ndarray, index: int, value) -> np.ndarray:
    array[index] = value
    return array


def _extra(change):
    """rankscope.npz rewritten with ``change({name: array})``."""
    def forge(kept: StoredBM25) -> bytes:
        with np.load(io.BytesIO(kept.members["rankscope.npz"])) as extra:
            arrays = {k: extra[k].copy() for k in extra.files}
        buf = io.BytesIO()
        np.savez(buf, **change(arrays))
        return zipped({**kept.members, "rankscope.npz": buf.getvalue()})
    return forge


def _vocab(change):
    return _member("vocab.index.json", lambda data: json.dumps(change(json.loads(data))).encode())


def _raw(make):
    return lambda kept: make(kept)


def _huge_header(name: str, dtype: str, count: int):
    """A .npy header declaring ``count`` items, followed by a few bytes: only the header says more."""
    def change(_data: bytes) -> bytes:
        header = {"descr": dtype, "fortran_order": False, "shape": (count,)}
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        return buf.getvalue() + b"\0" * 64
    return _member(name, change)


def _flip_crc(kept: StoredBM25) -> bytes:
    data = bytearray(kept.blob)
    at = kept.blob.index(kept.members["data.csc.index.npy"]) + len(kept.members["data.csc.index.npy"]) - 2
    data[at] ^= 0x10  # a score changed, its CRC-32 left as it was
    return bytes(data)


def _encrypted(kept: StoredBM25) -> bytes:
    """The stored blob with params.index.json marked encrypted (bit 0 of its flags, in its local header
    and in the central directory), as an encrypting zip tool writes it."""
    data = bytearray(kept.blob)
    with zipfile.ZipFile(io.BytesIO(kept.blob)) as z:
        info = z.getinfo("params.index.json")
    data[info.header_offset + 6] |= 0x1  # the local header's flags
    central = kept.blob.index(b"PK\x01\x02")
    while not kept.blob[central + 46:].startswith(b"params.index.json"):
        central = kept.blob.index(b"PK\x01\x02", central + 4)
    data[central + 8] |= 0x1  # the central directory's
    return bytes(data)


def _duplicate(kept: StoredBM25) -> bytes:
    members = list(kept.members.items())
    members[-1] = ("params.index.json", kept.members["params.index.json"])  # rankscope.npz's place
    return zipped(members)


def _other_corpus_index(kept: StoredBM25) -> bytes:
    """The same ids and settings, other texts: an index consistent in itself, for another corpus."""
    from retrieval.index.bm25_index import BM25Index

    other = other_corpus(kept.dataset)
    return BM25Index(list(other.docs), [d.full_text for d in other.docs.values()]).to_bytes()


def _other_k1_index(kept: StoredBM25) -> bytes:
    from retrieval.index.bm25_index import BM25Index

    return BM25Index(list(kept.dataset.docs), [d.full_text for d in kept.dataset.docs.values()], k1=2.0).to_bytes()


class Payload:
    """Pickles as a call writing ``marker``: a pickle in the store would run it on load."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


HOSTILE_BM25 = [  # (case, forge(kept) -> the blob stored instead, what the warning says)
    ("random bytes", _raw(lambda k: np.random.default_rng(0).bytes(len(k.blob))), "is not a zip"),
    ("cut in half", _raw(lambda k: k.blob[:len(k.blob) // 2]), "is not a zip"),
    ("empty", _raw(lambda k: b""), "is not a zip"),
    ("a zip of another program", _raw(lambda k: zipped({"readme.txt": b"hello"})), "RankScope does not write"),
    ("a member with a path", _raw(lambda k: zipped({**k.members, "../../evil.py": b"x"})), "holds 7 members"),
    ("a member renamed into a folder", _raw(lambda k: zipped(
        {("x/" + n if n == "vocab.index.json" else n): d for n, d in k.members.items()})),
     "a member 'x/vocab.index.json' RankScope does not write"),
    ("a member named '..'", _raw(lambda k: zipped({**{n: d for n, d in k.members.items() if n != "rankscope.npz"},
                                                   "..": b"x"})), "a member '..' RankScope does not write"),
    ("a member missing", _raw(lambda k: zipped({n: d for n, d in k.members.items() if n != "vocab.index.json"})),
     "lacks vocab.index.json"),
    ("a member twice", _duplicate, "holds 'params.index.json' twice"),
    ("a compressed member", _raw(lambda k: zipped(k.members, {"vocab.index.json": zipfile.ZIP_DEFLATED})),
     "vocab.index.json is compressed"),
    ("an encrypted member", _encrypted, "params.index.json is encrypted"),
    ("a score changed under its CRC", _flip_crc, "Bad CRC-32"),
    ("settings not JSON", _member("params.index.json", lambda d: b"{cut"), "params.index.json is not JSON"),
    ("settings nested 100,000 deep", _member("params.index.json", lambda d: b"[" * 100_000 + b"]" * 100_000),
     "params.index.json is not JSON"),
    ("settings a list", _member("params.index.json", lambda d: b"[1]"), "is not a JSON object"),
    ("settings of another k1", _params(k1=2.0), "its k1 is 2.0, the index asked for has 0.9"),
    ("settings of another method", _params(method="bm25+", idf_method="bm25+"), "its method is 'bm25+'"),
    ("settings asking for numba", _params(backend="numba"), "its backend is 'numba'"),
    ("settings with a key bm25s does not write", _params(corpus=["x"]), "its settings hold"),
    ("settings of another corpus size", _params(num_docs=9), "another corpus: it holds 9 documents, this one 8"),
    ("an index of the same corpus with another k1", _other_k1_index, "its k1 is 2.0"),
    ("vocabulary a list", _member("vocab.index.json", lambda d: b"[]"), "vocab.index.json is not a JSON object"),
    ("vocabulary numbering a term twice", _vocab(lambda v: {**v, next(iter(v)): 1, list(v)[1]: 1}),
     "does not number its"),
    ("vocabulary numbering a term with text", _vocab(lambda v: {**v, next(iter(v)): "0"}),
     "numbers a term with a str"),
    ("vocabulary numbering a term with true", _vocab(lambda v: {**v, next(iter(v)): True}),
     "numbers a term with a bool"),
    ("vocabulary missing a term", _vocab(lambda v: dict(list(v.items())[1:])), "does not number the score matrix"),
    ("vocabulary with its empty token elsewhere", _vocab(lambda v: {**v, "": 0, next(iter(v)): v[""]}),
     "does not number the score matrix"),
    ("a NaN score", _array("data.csc.index.npy", lambda a: _setting_item(a, 0, np.nan)), "not finite"),
    ("an infinite score", _array("data.csc.index.npy", lambda a: _setting_item(a, -1, np.inf)), "not finite"),
    ("scores in float64", _array("data.csc.index.npy", lambda a: a.astype(np.float64)), "holds <f8, not the f4"),
    ("a document number past the corpus", _array("indices.csc.index.npy", lambda a: _setting_item(a, 0, 10 ** 6)),
     "names document 1,000,000 of a corpus of 8"),
    ("a negative document number", _array("indices.csc.index.npy", lambda a: _setting_item(a, 0, -3)),
     "names document -3"),
    ("offsets going backwards", _array("indptr.csc.index.npy", lambda a: _setting_item(a, 2, a[1] - 1)),
     "offsets go backwards"),
    ("offsets not starting at 0", _array("indptr.csc.index.npy", lambda a: _setting_item(a, 0, 1)),
     "do not start at 0"),
    ("offsets past the scores", _array("indptr.csc.index.npy", lambda a: _setting_item(a, -1, a[-1] + 5)),
     "offsets ending at"),
    ("a score array of two dimensions", _array("data.csc.index.npy", lambda a: a.reshape(1, -1)), "has shape (1,"),
    ("a .npy header declaring 2^40 scores", _huge_header("data.csc.index.npy", "<f4", 2 ** 40),
     "declares 1,099,511,627,776 items"),
    ("a .npy header declaring 2^40 offsets", _huge_header("indptr.csc.index.npy", "<i8", 2 ** 40),
     "declares 1,099,511,627,776 items"),
    ("a .npy of Python objects (a pickle)", _member("indices.csc.index.npy", lambda d: npy(
        np.array([{"x": 1}], dtype=object), allow_pickle=True)), "holds |O"),
    ("a .npy that is not one", _member("indptr.csc.index.npy", lambda d: b"PK\x03\x04 not numpy"),
     "has no .npy header"),
    ("document lengths of another corpus", _extra(lambda a: {**a, "doc_len": np.ones(9)}),
     "another corpus: it holds 9 document lengths"),
    ("a negative document length", _extra(lambda a: {**a, "doc_len": -a["doc_len"]}), "negative or not finite"),
    ("a NaN document length", _extra(lambda a: {**a, "doc_len": _setting_item(a["doc_len"], 0, np.nan)}),
     "negative or not finite"),
    ("a document frequency of 0", _extra(lambda a: {**a, "df_counts": _setting_item(a["df_counts"], 0, 0)}),
     "a count outside 1..8"),
    ("a document frequency past the corpus", _extra(lambda a: {**a, "df_counts": a["df_counts"] + 100}),
     "a count outside 1..8"),
    ("frequencies of other terms", _extra(lambda a: {**a, "df_terms": np.array([t + "x" for t in a["df_terms"]])}),
     "not of its vocabulary's terms"),
    ("frequencies of a term twice", _extra(lambda a: {**a, "df_terms": _setting_item(a["df_terms"], 1,
                                                                                     a["df_terms"][0])}),
     "not of its vocabulary's terms"),
    ("frequencies with a term count missing", _extra(lambda a: {**a, "df_counts": a["df_counts"][1:]}),
     "name 53 terms with 52 counts"),
    ("a compressed rankscope.npz", _raw(lambda k: zipped({**k.members, "rankscope.npz": _savez_compressed(k)})),
     "rankscope.npz's doc_len.npy is compressed"),
    ("a rankscope.npz with another member", _extra(lambda a: {**a, "evil": np.zeros(1)}),
     "rankscope.npz holds 4 members"),
    ("another corpus's index of the same size, under this one's key", _other_corpus_index,
     "another corpus's index?"),
]


def _savez_compressed(kept: StoredBM25) -> bytes:
    with np.load(io.BytesIO(kept.members["rankscope.npz"])) as extra:
        arrays = {k: extra[k] for k in extra.files}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def assert_bm25_rebuilt(kept: StoredBM25, ws: Workspace, warned: list[str], said: str) -> None:
    """The stored index was refused for ``said`` (one warning), built again and written over: the
    workspace ranks as the built index did, and the next open reads the new row without a word."""
    refusals = [w for w in warned if "the stored BM25 index" in w]
    assert len(refusals) == 1 and kept.key[:12] in refusals[0] and said in refusals[0], warned
    assert ws.search("bm25", kept.dataset.queries, 10) == kept.expected
    for q in kept.dataset.queries.values():
        np.testing.assert_array_equal(ws.bm25.scores(q), kept.built.scores(q))
    assert ws.bm25.df == kept.built.df and ws.bm25.avgdl == kept.built.avgdl


@pytest.mark.parametrize("case, forge, said", HOSTILE_BM25, ids=[c for c, _, _ in HOSTILE_BM25])
def test_a_stored_bm25_index_that_is_not_this_corpus_s_is_built_again_never_served(bm25_kept, caplog, case, forge,
                                                                                     said):
    bm25_kept.store(forge(bm25_kept))
    ws, warned = bm25_kept.reopen(caplog)
    assert_bm25_rebuilt(bm25_kept, ws, warned, said)
    replaced = bm25_kept.stored()
    _, again = bm25_kept.reopen(caplog)
    assert again == [] and bm25_kept.stored() == replaced  # written over: the next open reads it as it is


def _bomb(kept: StoredBM25, megabytes: int = 256) -> bytes:
    """The stored blob with its scores replaced by a deflated .npy of ``megabytes`` MB of zeros (a
    blob of a few hundred KB): extracting it writes, and loading it allocates, all of them."""
    count = megabytes * (1 << 20) // 4
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in kept.members.items():
            if name != "data.csc.index.npy":
                z.writestr(name, data)
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w") as out:  # streamed: the test holds 1 MB at a time
                header = io.BytesIO()
                np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                              "shape": (count,)})
                out.write(header.getvalue())
                zeros = bytes(1 << 20)
                for _ in range(megabytes):
                    out.write(zeros)
    return buf.getvalue()


def _peak_during(call) -> float:
    """MB Python and numpy allocated at most while ``call()`` ran (tracemalloc sees numpy's arrays)."""
    import tracemalloc

    tracemalloc.start()
    try:
        call()
    except Exception:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / (1 << 20)


@pytest.mark.parametrize("case", ["zip bomb", "huge header"])
def test_a_stored_bm25_index_never_sizes_an_allocation(bm25_kept, caplog, case):
    """A deflated member expanding to 256 MB, or a .npy header declaring 4 TB, is refused from the zip's
    directory or the header, before anything is read: the refusal allocates next to nothing."""
    from retrieval.index.bm25_blob import DamagedIndex
    from retrieval.index.bm25_index import BM25Index

    blob = _bomb(bm25_kept) if case == "zip bomb" else _huge_header("data.csc.index.npy", "<f4", 2 ** 40)(bm25_kept)
    assert len(blob) < 2 << 20
    texts = [d.full_text for d in bm25_kept.dataset.docs.values()]

    def load():
        with pytest.raises(DamagedIndex, match="is compressed" if case == "zip bomb" else "declares"):
            BM25Index.from_bytes(blob, list(bm25_kept.dataset.docs), texts)
    assert _peak_during(load) < 16
    load()
    bm25_kept.store(blob)
    ws, warned = bm25_kept.reopen(caplog)
    assert_bm25_rebuilt(bm25_kept, ws, warned, "is compressed" if case == "zip bomb" else "declares")


def test_a_pickle_in_a_stored_index_never_runs(bm25_kept, caplog, tmp_path):
    marker = tmp_path / "ran"
    bm25_kept.store(_member("indices.csc.index.npy", lambda d: npy(np.array([Payload(marker)], dtype=object),
                                                                   allow_pickle=True))(bm25_kept))
    ws, warned = bm25_kept.reopen(caplog)
    assert_bm25_rebuilt(bm25_kept, ws, warned, "holds |O")
    assert not marker.exists()


def test_a_value_of_another_kind_in_the_index_column_is_a_miss(bm25_kept, caplog):
    bm25_kept.store("a text, not an index")
    ws, warned = bm25_kept.reopen(caplog)
    assert any("bm25 indexes: left out 1 damaged row" in w and "it is str, not bytes" in w for w in warned), warned
    assert ws.search("bm25", bm25_kept.dataset.queries, 10) == bm25_kept.expected
    assert isinstance(bm25_kept.stored(), bytes)


def test_a_stored_index_reads_back_as_bm25s_would_load_it(bm25_kept, tmp_path):
    """What RankScope builds in memory is what ``bm25s.BM25.load`` makes of the same files (the same
    settings, vocabulary and arrays): a later bm25s that lays them out otherwise fails here."""
    import bm25s

    from retrieval.index.bm25_index import BM25Index

    for name, data in bm25_kept.members.items():
        (tmp_path / name).write_bytes(data)
    theirs = bm25s.BM25.load(tmp_path, mmap=False, show_progress=False)
    ours = BM25Index.from_bytes(bm25_kept.blob, list(bm25_kept.dataset.docs),
                                [d.full_text for d in bm25_kept.dataset.docs.values()])._engine
    skip = {"scores"}
    assert {k: v for k, v in vars(ours).items() if k not in skip} == {k: v for k, v in vars(theirs).items()
                                                                       if k not in skip}
    for part in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(ours.scores[part], theirs.scores[part])
        assert ours.scores[part].dtype == theirs.scores[part].dtype
    assert ours.scores["num_docs"] == theirs.scores["num_docs"]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_a_stored_bm25_index_changed_anywhere_is_refused_or_reads_as_written(data):
    """Any byte of a stored index changed, or the blob cut anywhere: ``from_bytes`` either refuses it
    (``DamagedIndex``, nothing else) or reads an index scoring exactly as the one written."""
    from retrieval.index.bm25_blob import DamagedIndex
    from retrieval.index.bm25_index import BM25Index

    blob, ids, texts, built = _property_index()
    if data.draw(st.booleans(), "cut"):
        changed = blob[:data.draw(st.integers(0, len(blob) - 1), "cut at")]
    else:
        at = data.draw(st.integers(0, len(blob) - 1), "byte")
        changed = blob[:at] + bytes([blob[at] ^ data.draw(st.integers(1, 255), "xor")]) + blob[at + 1:]
    try:
        index = BM25Index.from_bytes(changed, ids, texts)
    except DamagedIndex:
        return
    for q in ("cat on a mat", "stocks fell", "young dog"):
        np.testing.assert_array_equal(index.scores(q), built.scores(q))
    assert index.df == built.df and index.avgdl == built.avgdl


_PROPERTY_INDEX: list = []


def _property_index():
    if not _PROPERTY_INDEX:
        from retrieval.index.bm25_index import BM25Index

        texts = ["The cat sat on the warm mat.", "Dogs bark every morning.", "The stock market fell sharply.",
                 "Cat food prices rose.", "A young dog needs patience and treats."]
        ids = [f"d{i}" for i in range(len(texts))]
        built = BM25Index(ids, texts)
        _PROPERTY_INDEX.append((built.to_bytes(), ids, texts, built))
    return _PROPERTY_INDEX[0]


# ---- stored vectors: embeddings, learned sparse vectors, 2-D projections ----------------------------
TEXTS = ["The cat sat on the warm mat.", "Dogs bark at the mailman.", "The stock market fell sharply."]


def floats(*values) -> bytes:
    return np.array(values, dtype=np.float32).tobytes()


@pytest.fixture
def embedded(tiny_encoder, tmp_path):
    """TEXTS embedded by the tiny encoder into a store: (the store's path, the vectors)."""
    from retrieval.index.dense_index import embed_corpus

    path = tmp_path / "store.sqlite3"
    store = Store(path)
    vectors = embed_corpus(tiny_encoder, TEXTS, store).vectors
    store.close()
    return path, vectors


def _vector(row: int) -> bytes:
    """A well-formed vector of the tiny encoder's 32 dimensions, ``row`` 0 or 1 of an identity-ish set."""
    v = np.zeros(32, dtype=np.float32)
    v[row] = 1
    return v.tobytes()


HOSTILE_EMBEDDINGS = [  # (dim stored, vector stored, what the warning says)
    (16, floats(*range(16)), "its vector has 16 dimensions, the model's have 32"),
    (64, floats(*range(64)), "its vector has 64 dimensions, the model's have 32"),
    (32, b"\x00" * 10, "its vector is 10 bytes where its dim 32 needs 128"),
    (32, floats(*range(31)), "its vector is 124 bytes where its dim 32 needs 128"),
    (32, floats(np.nan, *range(31)), "it holds NaN or infinity"),
    (32, floats(*range(31), np.inf), "it holds NaN or infinity"),
    (32, floats(*range(31), -np.inf), "it holds NaN or infinity"),
    (32, "text, not a vector", "its vector is str, not bytes"),
    (32, None, "its vector is NoneType, not bytes"),
    (0, b"", "its dim 0 is not a positive whole number"),
    ("thirty-two", floats(*range(32)), "its dim 'thirty-two' is not a positive whole number"),
    (2 ** 40, b"\x00" * 16, "its vector is 16 bytes where its dim 1,099,511,627,776 needs"),
]


@pytest.mark.parametrize("dim, vector, said", HOSTILE_EMBEDDINGS, ids=[s for *_, s in HOSTILE_EMBEDDINGS])
def test_a_tampered_embedding_is_encoded_again_never_served(embedded, tiny_encoder, caplog, dim, vector, said):
    from retrieval.index.dense_index import embed_corpus
    from retrieval.store import text_hash

    path, vectors = embedded
    tamper(path, "update embeddings set dim = ?, vector = ? where text_hash = ?", dim, vector, text_hash(TEXTS[1]))
    store = Store(path)
    again = embed_corpus(tiny_encoder, TEXTS, store)
    assert (again.from_store, again.encoded) == (2, 1)
    np.testing.assert_allclose(again.vectors, vectors, rtol=1e-5, atol=1e-6)
    assert any("embeddings: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text
    caplog.clear()
    assert embed_corpus(tiny_encoder, TEXTS, store).from_store == 3 and warnings_of(caplog) == []  # written over
    store.close()


def test_a_vector_of_another_dimension_than_the_registered_model_s_is_a_miss(tmp_path, caplog):
    """Read without the dimension (as the kept-index check and the Milvus engine do), the models
    table's is held: a 16-float row under a 32-dimensional model is not served."""
    store = Store(tmp_path / "store.sqlite3")
    store.register_model("m" * 64, "tiny", 32)
    store.put_embeddings("m" * 64, {"a": np.ones(32, np.float32), "b": np.ones(16, np.float32)})
    assert list(store.get_embeddings("m" * 64, ["a", "b"])) == ["a"]
    assert any("its vector has 16 dimensions, the model's have 32" in w for w in warnings_of(caplog))
    assert list(store.get_embeddings("m" * 64, ["a", "b"], dim=16)) == ["b"]  # the caller's dimension first
    store.close()


def test_a_cached_query_vector_of_another_dimension_is_encoded_again(toy_dataset, tiny_encoder, tmp_path, caplog):
    """A search reads the query's vector from the store when an evaluation cached it: one of 16
    floats, forged under the query encoder's fingerprint (no models row holds its dimension), is
    encoded again instead of reaching FAISS."""
    from retrieval.store import text_hash

    path = tmp_path / "store.sqlite3"
    ws = Workspace(toy_dataset, Store(path), model=tiny_encoder)
    queries = toy_dataset.split_queries("test")
    expected = ws.search("dense", queries, 5)
    query = ws.encoder.for_queries().fingerprint
    for text in queries.values():
        tamper(path, "update embeddings set dim = 16, vector = ? where model = ? and text_hash = ?",
               floats(*range(16)), query, text_hash(text))
    again = Workspace(toy_dataset, Store(path), model=tiny_encoder)
    assert again.search("dense", queries, 5) == expected
    assert again.search_one(next(iter(queries.values())), ["dense"], 5)
    assert any("its vector has 16 dimensions, the model's have 32" in w for w in warnings_of(caplog))


SPARSE = {"a": (np.array([1, 5, 9], np.int32), np.array([0.5, 1.0, 2.0], np.float32)),
          "b": (np.array([2, 3], np.int32), np.array([1.5, 0.25], np.float32))}


def ints(*values) -> bytes:
    return np.array(values, dtype=np.int32).tobytes()


HOSTILE_SPARSE = [  # (terms stored, weights stored, what the warning says)
    (ints(2, 3, 4), floats(1.5, 0.25), "its terms are 12 bytes and its weights 8"),
    (b"\x01\x02\x03", b"\x01\x02\x03", "its terms are 3 bytes and its weights 3"),
    (ints(2, 30_000), floats(1.5, 0.25), "a term id outside 0..99"),
    (ints(2, -1), floats(1.5, 0.25), "a term id outside 0..99"),
    (ints(2, 3), floats(np.nan, 0.25), "a weight that is not finite"),
    (ints(2, 3), floats(1.5, np.inf), "a weight that is not finite"),
    ("2 3", floats(1.5, 0.25), "its terms or weights are str and bytes, not bytes"),
    (ints(2, 3), None, "its terms or weights are bytes and NoneType, not bytes"),
]


@pytest.mark.parametrize("terms, weights, said", HOSTILE_SPARSE, ids=[s for *_, s in HOSTILE_SPARSE])
def test_a_tampered_sparse_vector_is_a_miss(tmp_path, caplog, terms, weights, said):
    """The sparse index is built from what ``get_sparse`` returns: a vector it could not hold (a
    term past the vocabulary, as many weights as terms, NaN) is a miss, encoded again, not served."""
    from retrieval.index.splade import SparseIndex

    store = Store(tmp_path / "store.sqlite3")
    store.put_sparse("s" * 64, SPARSE)
    tamper(tmp_path / "store.sqlite3", "update sparse_vectors set terms = ?, weights = ? where text_hash = 'b'",
           terms, weights)
    got = store.get_sparse("s" * 64, ["a", "b"], 100)
    assert list(got) == ["a"] and [v.tolist() for v in got["a"]] == [v.tolist() for v in SPARSE["a"]]
    assert any("sparse vectors: left out 1 damaged row: sparse vector b" in w and said in w
               for w in warnings_of(caplog)), caplog.text
    index = SparseIndex(["a"], [got["a"]], 100)
    assert index.scores((np.array([5], np.int32), np.array([1.0], np.float32))).tolist() == [1.0]
    store.close()


def test_a_sparse_vector_past_the_model_s_vocabulary_is_encoded_again(tmp_path, caplog):
    """Through the real SPLADE model: a cached vector naming a term past its vocabulary is encoded
    again, and the index builds."""
    from retrieval.index.splade import SparseIndex, embed_sparse_corpus, load_sparse_model
    from retrieval.store import text_hash

    model = load_sparse_model()
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    first = embed_sparse_corpus(model, TEXTS, store).vectors
    tamper(path, "update sparse_vectors set terms = ?, weights = ? where text_hash = ?",
           ints(1, model.vocab_size + 7), floats(1.0, 1.0), text_hash(TEXTS[0]))
    again = embed_sparse_corpus(model, TEXTS, Store(path))
    assert (again.from_store, again.encoded) == (2, 1)
    assert [t.tolist() for t, _ in again.vectors] == [t.tolist() for t, _ in first]
    assert SparseIndex(["a", "b", "c"], again.vectors, model.vocab_size).nbytes > 0
    assert any(f"a term id outside 0..{model.vocab_size - 1:,}" in w for w in warnings_of(caplog))
    store.close()


@pytest.fixture
def projected(tmp_path):
    path = tmp_path / "store.sqlite3"
    store = Store(path)
    xy = np.arange(10, dtype=np.float32).reshape(5, 2)
    store.put_projection("p" * 64, sample="s", model="m", params={}, xy=xy, seconds=1.5)
    yield store, path, xy
    store.close()


HOSTILE_PROJECTIONS = [  # (column, value, what the warning says)
    ("points", 6, "its coordinates are 40 bytes where 6 points need 48 bytes"),
    ("points", 2 ** 40, "where 1,099,511,627,776 points need"),
    ("points", 0, "its point count 0 is not a positive whole number"),
    ("points", -5, "its point count -5"),
    ("points", "five", "its point count 'five'"),
    ("points", 5.5, "its point count 5.5"),
    ("xy", floats(*range(9)), "its coordinates are 36 bytes where 5 points need 40 bytes"),
    ("xy", floats(np.nan, *range(9)), "its coordinates hold NaN or infinity"),
    ("xy", floats(*range(9), -np.inf), "its coordinates hold NaN or infinity"),
    ("xy", "0,0 1,1", "its coordinates are str where 5 points need 40 bytes"),
    ("seconds", "fast", "its fit time is not a number"),
]


@pytest.mark.parametrize("column, value, said", HOSTILE_PROJECTIONS, ids=[s for *_, s in HOSTILE_PROJECTIONS])
def test_a_tampered_projection_is_a_miss(projected, caplog, column, value, said):
    store, path, xy = projected
    got = store.get_projection("p" * 64)
    assert np.array_equal(got[0], xy) and got[1] == 1.5
    tamper(path, f"update projections set {column} = ?", value)
    assert store.get_projection("p" * 64) is None  # a miss: project() fits the layout again and writes it over
    assert any("projections: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text


# ---- judges, models and data sets --------------------------------------------------------------------
@pytest.mark.parametrize("value, said", [
    (None, "its judge is NoneType, not text"),
    (b"ana", "its judge is bytes, not text"),
    ("ana\u202e", "RIGHT-TO-LEFT OVERRIDE"),
    ("x" * 101, "at most 100 characters"),
    ("", "cannot be empty"),
])
def test_a_judge_s_name_input_refuses_is_not_a_judge(judged, caplog, value, said):
    """``Store.judges`` (what a new judge's name is held against) leaves out the names the judgments'
    readers leave out, so a tampered name neither shows as a judge nor breaks the next judge's check."""
    from retrieval.judging.judgments import check_judge

    store, path = judged
    tamper(path, "update judgments set judge = ? where judge = 'ben'", value)
    assert store.judges(CORPUS) == ["ana"]
    assert any("judges: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text
    assert check_judge("carl", store.judges(CORPUS)) == "carl"
    with pytest.raises(ValueError, match="looks like"):
        check_judge("Ana", store.judges(CORPUS))


@pytest.mark.parametrize("column, value, said", [
    ("info", "{cut", "its info is not JSON"),
    ("info", "[1, 2]", "its info is not a JSON object"),
    ("info", None, "its info is NoneType, not JSON text"),
    ("dim", 32.5, "its dim 32.5 is not a positive whole number"),
    ("dim", -1, "its dim -1"),
    ("name", None, "its name is not text"),
    ("created", "today", "its time is not a number"),
])
def test_a_tampered_model_row_is_left_out(tmp_path, caplog, column, value, said):
    from retrieval.tracking.history import list_runs

    path = tmp_path / "store.sqlite3"
    store = Store(path)
    store.register_model("a" * 64, "good", 32, {"max_seq_length": 64})
    store.register_model("b" * 64, "bad", 32, {"max_seq_length": 64})
    tamper(path, f"update models set {column} = ? where name = 'bad' or fingerprint = ?", value, "b" * 64)
    assert [m["name"] for m in store.models()] == ["good"]
    assert [json.loads(m["info"]) for m in store.models()] == [{"max_seq_length": 64}]
    assert any("models: left out 1 damaged row: fingerprint 'bbbb" in w and said in w for w in warnings_of(caplog))
    assert list_runs(store) == []
    store.close()


@pytest.mark.parametrize("column, value, said", [
    ("summary", "{cut", "its summary is not JSON"),
    ("summary", "7", "its summary is not a JSON object"),
    ("summary", b"{}", "its summary is bytes, not JSON text"),
    ("name", None, "its name is not text"),
    ("hash", b"\x05", "its hash is not text"),
])
def test_a_tampered_dataset_row_is_left_out_and_history_still_lists_runs(toy_dataset, tmp_path, caplog, column, value,
                                                                         said):
    from retrieval.tracking.history import list_runs

    path = tmp_path / "store.sqlite3"
    ws = Workspace(toy_dataset, Store(path))
    ws.run("bm25", "test")
    ws.store.register_dataset("f" * 64, "other", {"docs": 1})
    tamper(path, f"update datasets set {column} = ? where name = 'toy'", value)
    assert [d["name"] for d in ws.store.datasets()] == ["other"]
    assert any("datasets: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text
    (row,) = list_runs(ws.store)
    assert row["system"] == "bm25" and row["dataset"] == toy_dataset.queries_hash[:12]  # shown by its hash


@pytest.mark.parametrize("column,value,said", [
    ("params", "{not json", "its parameters is not JSON"),
    ("params", "[1, 2]", "its parameters is not a JSON object"),
    ("params", '{"bm25": 5}', "not of the shape RankScope writes"),
    ("params", '{"model": 7}', "not of the shape RankScope writes"),
    ("params", '{"index": ["flat"]}', "not of the shape RankScope writes"),
    ("params", '{"imported": true}', "not of the shape RankScope writes"),
    ("k", "deep", "is not a whole number"),
    ("system", None, "its system is not text"),
    ("created", "yesterday", "its time is not a number"),
])
def test_a_tampered_run_row_is_left_out_of_the_history(toy_dataset, tmp_path, caplog, column, value, said):
    """The Runs tab's history (``history.list_runs``) lists the runs it can read and says which it
    left out, instead of failing for every session on one edited row."""
    from retrieval.tracking.history import list_runs

    path = tmp_path / "store.sqlite3"
    ws = Workspace(toy_dataset, Store(path))
    ws.run("bm25", "test")
    ws.run("bm25", "test", k=50)  # a second row, which stays listed
    first = sorted(r["key"] for r in ws.store.runs())[0]
    tamper(path, f"update runs set {column} = ? where key = ?", value, first)
    listed = list_runs(ws.store)
    assert [r["key"] for r in listed] == [r["key"] for r in ws.store.runs() if r["key"] != first]
    assert any("runs: left out 1 damaged row" in w and said in w for w in warnings_of(caplog)), caplog.text


# ---- no row is read past its size (``row_bounds``) ------------------------------------------------
BOMB_MIB = 768  # the row: 0.8 MB of zlib, 768 MiB of zeros inflated


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """0.8 MB of zlib that inflates to ``BOMB_MIB`` MiB of zeros (made once: a few seconds)."""
    packer, zeros = zlib.compressobj(9), bytes(1 << 24)
    return b"".join(packer.compress(zeros) for _ in range(BOMB_MIB // 16)) + packer.flush()


def _json_bomb(item: bytes, mib: int, head: bytes = b"{", tail: bytes = b"}") -> bytes:
    """zlib of valid JSON: ``item`` repeated to about ``mib`` MiB between ``head`` and ``tail``."""
    packer = zlib.compressobj(9)
    block = item * ((1 << 20) // len(item))
    return packer.compress(head) + b"".join(packer.compress(block) for _ in range(mib)) \
        + packer.compress(tail) + packer.flush()


@pytest.mark.parametrize("table, column, where, said", [
    ("query_sets", "queries", "id = 's1'", "query sets: left out 1 damaged row: query set 's1': its queries do not "
                                           "unpack (inflate past"),
    ("judging_samples", "query_ids", "id = 'a1'", "judging samples: left out 1 damaged row: sample 'a1': its query "
                                                  "ids do not unpack (inflate past"),
])
def test_a_row_inflating_past_its_ceiling_is_left_out_holding_one_piece_of_it(kept_rows, bomb, caplog, table, column,
                                                                              where, said):
    """The issue's case: a 0.8 MB row of 768 MiB inflated. It is refused as a damaged row while
    RankScope holds one megabyte of it, not the 768 MiB (nor its kind's ceiling: measured first)."""
    store, path = kept_rows
    assert len(bomb) < 800_000
    tamper(path, f"update {table} set {column} = ? where {where}", bomb)
    read = store.query_sets if table == "query_sets" else store.samples
    started, before = time.perf_counter(), _peak_mb()
    peak = _peak_during(lambda: read(CORPUS))
    assert peak < 8 and _peak_mb() - before < 50  # MB: tracemalloc's peak, and the process's resident peak
    assert time.perf_counter() - started < 10
    assert [r["id"] for r in read(CORPUS)] == (["s2"] if table == "query_sets" else ["a2"])
    assert any(said in w for w in warnings_of(caplog)), caplog.text


def test_a_snapshot_inflating_past_its_ceiling_is_left_out_and_refused_by_name(snapshotted, bomb, caplog):
    from retrieval.tracking import snapshots

    ds, store, path = snapshotted
    tamper(path, "update snapshots set runs = ? where name = 'bad'", bomb)
    before = _peak_mb()
    assert _peak_during(lambda: snapshots.listed(store, ds.corpus_hash)) < 8 and _peak_mb() - before < 50
    assert [s.name for s in snapshots.listed(store, ds.corpus_hash)] == ["good"]
    assert any("the snapshot 'bad' in the store is damaged: its runs do not unpack (inflate past" in w
               for w in warnings_of(caplog)), caplog.text
    with pytest.raises(snapshots.DamagedSnapshot, match="inflate past"):
        snapshots.load(store, ds.corpus_hash, "bad")


@pytest.mark.parametrize("kind, blob", [  # JSON that parses, of the row's own shape, larger than the data can be
    ("queries", lambda: _json_bomb(b'"q":"x",', 80, tail=b'"q":"x"}')),
    ("hits", lambda: _json_bomb(b'["d1",0.5],', 16, b'{"q3":[', b'["d1",0.5]]}')),
    ("runs", lambda: _json_bomb(b'["d1",0.5],', 64, b'{"bm25":{"q3":[', b'["d1",0.5]]}}')),
])
def test_a_row_of_its_own_shape_larger_than_its_data_can_be_is_never_parsed(toy_dataset, tmp_path, caplog, kind,
                                                                             blob):
    """Valid JSON of the row's shape is still refused past the ceiling: a query set past what
    ``query_sets`` lets a set hold, a run or a snapshot past what the data sets opened can make
    (the toy corpus: 4 queries, 8 documents). Nothing of it is parsed into objects."""
    from retrieval.tracking import snapshots

    path = tmp_path / "store.sqlite3"
    ws = Workspace(toy_dataset, Store(path))
    first = ws.run("bm25", "test")
    ws.store.put_query_set(CORPUS, "s1", "mine", {"q1": "cats"})
    snapshots.save(ws.store, snapshots.take(ws, "test", ["bm25"], "good"))
    table, column = {"queries": ("query_sets", "queries"), "hits": ("runs", "hits"),
                     "runs": ("snapshots", "runs")}[kind]
    tamper(path, f"update {table} set {column} = ?", blob())
    if kind == "queries":
        call = lambda: ws.store.query_sets(CORPUS)  # noqa: E731
    elif kind == "hits":
        call = lambda: ws.store.get_run(next(r["key"] for r in ws.store.runs()))  # noqa: E731
    else:
        call = lambda: snapshots.listed(ws.store, toy_dataset.corpus_hash)  # noqa: E731
    assert _peak_during(call) < 8
    assert call() in ([], None)
    assert any(f"its {kind} do not unpack (inflate past" in w for w in warnings_of(caplog)), caplog.text
    if kind == "hits":
        assert ws.run("bm25", "test") == first  # a miss: computed again, and written over


def _widest_dataset() -> Dataset:
    """Ids as long as JSON can make them (characters outside the BMP: 12 bytes each) and a corpus
    deeper than a run: the largest rows a data set of its size can have."""
    docs = {f"{'😀' * 40}{i:04}": Document(f"{'😀' * 40}{i:04}", "", f"text {i}") for i in range(1_200)}
    queries = {f"{'𝔮' * 30}{i}": f"query {i}" for i in range(3)}
    return Dataset("wide", docs, queries, {"test": {q: {next(iter(docs)): 1} for q in queries}})


def test_the_largest_rows_the_writers_write_read_back(tmp_path):
    """Every ceiling holds what its writer can write at its largest: a query set at the writer's
    bounds (``query_sets``: 10,000 queries, 5,000,000 characters, each 12 bytes in JSON), and a run,
    a snapshot, an evaluation's per-query values and a sample as large as the data set can make
    them (its longest ids, 1,000 hits per query, the longest scores)."""
    from retrieval import row_bounds
    from retrieval.data import query_sets
    from retrieval.evaluation.metrics import EVALUATED
    from retrieval.systems import SYSTEMS
    from retrieval.workspace import EVAL_DEPTH

    assert (row_bounds.QUERY_SET_QUERIES, row_bounds.QUERY_SET_CHARS) == (query_sets.MAX_QUERIES, query_sets.MAX_CHARS)
    assert row_bounds.DEPTH == EVAL_DEPTH and row_bounds.SNAPSHOT_SYSTEMS >= 2 * len(SYSTEMS)
    assert row_bounds.METRICS_KEPT >= len(EVALUATED) + 1
    store = Store(tmp_path / "store.sqlite3")
    width = query_sets.MAX_CHARS // query_sets.MAX_QUERIES  # characters of id and text a query
    largest = {f"{i:05}": "😀" * (width - 5) for i in range(query_sets.MAX_QUERIES)}
    query_sets.check_bounds(largest)  # the writer takes it
    store.put_query_set(CORPUS, "big", "big", largest)
    assert store.query_sets(CORPUS)[0]["queries"] == largest

    ds = _widest_dataset()
    Workspace(ds, store)  # opened: what its rows may hold is known
    score = -2.2250738585072014e-308  # the longest text of a float
    run = {q: [(d, score) for d in list(ds.docs)[:EVAL_DEPTH]] for q in ds.queries}
    store.put_run("r" * 64, dataset=ds.queries_hash, system="bm25", params={}, split="test", k=EVAL_DEPTH, run=run)
    assert store.get_run("r" * 64) == run
    store.put_snapshot(ds.corpus_hash, "all", {"created": 1.0}, {f"{'𝔰' * 99}{i}": run for i in range(len(SYSTEMS))})
    assert len(store.snapshots(ds.corpus_hash)[0]["runs"]) == len(SYSTEMS)
    per_query = {f"metric{m}": {q: [score, score] for q in ds.queries} for m in range(len(EVALUATED) + 1)}
    store.put_metrics("m" * 64, dataset=ds.queries_hash, system="bm25", params={}, split="test", metrics={},
                      per_query=per_query)
    assert store.get_metrics("m" * 64) == ({}, per_query)
    store.put_sample(ds.corpus_hash, "s", "all", 0, list(ds.queries))
    assert store.samples(ds.corpus_hash)[0]["query_ids"] == list(ds.queries)
    store.close()


def _long_object(characters: int) -> str:
    return '{"a": "' + "x" * (characters - 9) + '"}'


@pytest.mark.parametrize("table, column, said", [
    ("jobs", "config", "its config is 2,097,152 characters, past the"),
    ("jobs", "progress", "its progress is 2,097,152 characters, past the"),
    ("models", "info", "its info is 2,097,152 characters, past the"),
    ("snapshots", "meta", "its metadata is 2,097,152 characters, past the"),
])
def test_a_json_column_past_its_size_is_measured_not_parsed(tmp_path, caplog, monkeypatch, table, column, said):
    """A plain JSON column (settings, counts, a snapshot's note) is measured before it is parsed: 2 MiB
    where RankScope writes a few KB is a damaged row, and the parser never sees it."""
    from retrieval.tracking import snapshots

    store = Store(tmp_path / "store.sqlite3")
    store.put_job({"id": "j1", "status": "done", "kind": "train", "config": {}, "progress": {}, "losses": []})
    store.register_model("f" * 64, "m", 4, {})
    store.put_snapshot(CORPUS, "s", {"created": 1.0}, {})
    tamper(tmp_path / "store.sqlite3", f"update {table} set {column} = ?", _long_object(2 * 2**20))
    parsed: list[int] = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda s, *a, **k: parsed.append(len(s)) or real(s, *a, **k))
    read = {"jobs": store.jobs, "models": store.models,
            "snapshots": lambda: snapshots.listed(store, CORPUS)}[table]
    assert read() == []
    assert all(n < 2**20 for n in parsed)  # the long text never reached the parser
    assert any(said in w for w in warnings_of(caplog)), caplog.text
    store.close()


_PACKED = st.one_of(
    st.binary(max_size=64),  # not zlib at all
    st.binary(max_size=3000).map(zlib.compress),  # whole streams
    st.tuples(st.binary(max_size=3000).map(zlib.compress), st.integers(1, 40)).map(lambda c: c[0][:-c[1]]),  # cut
    st.tuples(st.binary(max_size=3000).map(zlib.compress), st.binary(min_size=1, max_size=8)).map(
        lambda c: c[0] + c[1]),  # something after the stream
    st.integers(1, 200_000).map(lambda n: zlib.compress(bytes(n), 9)),  # zeros: up to 1,000 to 1
)


@given(blob=_PACKED, limit=st.one_of(st.integers(0, 4096), st.integers(0, 1 << 22)))
@settings(max_examples=300, deadline=None)
def test_inflate_gives_what_zlib_gives_within_the_limit_and_refuses_the_rest(blob, limit):
    """``row_bounds.inflate`` against zlib itself: the same bytes where they fit the limit (whatever
    follows a whole stream left, as zlib leaves it), ``TooLarge`` where they do not, zlib's error
    where zlib has one — by either path (measured first, or not)."""
    from retrieval import row_bounds

    try:
        want = zlib.decompress(blob)
    except zlib.error:
        want = None
    try:
        got = row_bounds.inflate(blob, limit)
    except row_bounds.TooLarge:
        assert want is None or len(want) > limit
    except zlib.error:
        assert want is None
    else:
        assert got == want and len(got) <= limit


# ---- files read back (``retrieval/files/read_back.py``) -------------------------------------------
def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _socket(path: Path):
    """A listening Unix socket at ``path`` (bound in a short folder, then moved: a socket's path is short)."""
    import socket
    import tempfile

    short = Path(tempfile.mkdtemp()) / "s"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(short))
    os.replace(short, path)
    short.parent.rmdir()
    return sock


def _link(target) -> object:
    def make(path: Path) -> None:
        to = target(path) if callable(target) else target
        path.unlink(missing_ok=True)
        path.symlink_to(to)
    return make


def _elsewhere(path: Path) -> Path:
    """A copy of ``path`` outside its folder (a link to it passes every check but the link's)."""
    copy = path.parent.parent / f"elsewhere-{path.name}"
    copy.write_bytes(path.read_bytes())
    return copy


def _in_time(call, seconds: float = 60.0, unblock: Path | None = None):
    """``call()``'s value, or a failure when it has not returned within ``seconds`` (a FIFO it waits
    on is then opened for writing, so that the thread ends)."""
    import threading

    done: dict = {}

    def run() -> None:
        try:
            done["value"] = call()
        except BaseException as err:  # raised again in the test's own thread
            done["error"] = err

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if unblock is not None:
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still waiting after {seconds:.0f} s")
    if "error" in done:
        raise done["error"]
    return done.get("value")


HOSTILE_ENTRIES = [  # (what is put in place of the kept file or its stamp, what the refusal says)
    ("a FIFO", _fifo, "is a FIFO"),
    ("a socket", _socket, "is a socket"),
    ("a link to /dev/zero", _link("/dev/zero"), "is a symbolic link"),
    ("a link to a copy elsewhere", _link(_elsewhere), "is a symbolic link"),
    ("a link to a FIFO", _link(lambda p: (_fifo(p.with_name("x.fifo")), p.with_name("x.fifo"))[1]),
     "is a symbolic link"),
]


@pytest.mark.parametrize("which", ["index", "stamp"])
@pytest.mark.parametrize("case, make, said", HOSTILE_ENTRIES, ids=[c for c, _, _ in HOSTILE_ENTRIES])
def test_a_fifo_device_socket_or_link_in_place_of_a_kept_index_is_built_again_never_opened(flat, caplog, which, case,
                                                                                           make, said):
    """The issue's case: a FIFO in place of a kept FAISS file hung the dense build for ever. Now
    neither the index nor its stamp is opened unless it is a regular file of the folder: the build
    finishes at once, builds the index again and writes a regular file over the entry."""
    path = flat.index if which == "index" else flat.stamp
    held = make(path)
    started = time.perf_counter()
    dense, warned = _in_time(lambda: flat.reopen(caplog), unblock=path if case == "a FIFO" else None)
    assert time.perf_counter() - started < 30
    assert any(str(flat.index) in w and said in w for w in warned), warned
    np.testing.assert_array_equal(np.asarray(dense.index.embeddings), np.asarray(flat.built.index.embeddings))
    assert path.is_file() and not path.is_symlink()  # written over: the next open reads a file of its own
    _, again = flat.reopen(caplog)
    assert again == []
    if held is not None:
        held.close()


CHOICES_ENTRIES = [  # (what is put in place of cpu_choices.json, what must hold of it afterwards)
    ("a FIFO", _fifo),
    ("a link to /dev/zero", _link("/dev/zero")),
    ("a link to a FIFO", _link(lambda p: (_fifo(p.with_name("x.fifo")), p.with_name("x.fifo"))[1])),
    ("a link to a large file", _link(lambda p: _sparse(p.with_name("large.json"), 256 << 20))),
    ("a file of 256 MiB", lambda p: _sparse(p, 256 << 20)),
]


def _sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes (``{`` and zeros; sparse: made at once, read whole it is ``size``)."""
    with open(path, "wb") as f:
        f.write(b"{")
        f.truncate(size)
    return path


@pytest.mark.parametrize("case, make", CHOICES_ENTRIES, ids=[c for c, _ in CHOICES_ENTRIES])
def test_the_cpu_choices_file_is_read_back_only_as_a_small_file_of_its_folder(tiny_encoder, tmp_path, monkeypatch,
                                                                              case, make):
    """``cpu_choices.json`` was read whole whatever it was: a FIFO hung the encoder's load, a link to
    /dev/zero or a large file read until memory ran out. Now anything but a regular file of
    ``$RANKSCOPE_HOME`` within ``CHOICES_BYTES`` is not opened (or not read): the choice is
    measured again and written as a file of its own, the link's target left as it was."""
    from retrieval.index.cpu_choice import CHOICES_BYTES, choices_file, choose

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    path = choices_file()
    make(path)
    target = os.path.realpath(path) if path.is_symlink() else None
    before = (os.stat(target).st_size, os.stat(target).st_mtime_ns) if target and os.path.isfile(target) else None
    calls: list[int] = []
    def measure():
        return choose(tiny_encoder.model, machine=quiet_machine, timer=lambda p, b: calls.append(b) or 1.0)

    peak = _peak_during(lambda: _in_time(measure, unblock=path if case == "a FIFO" else None))
    assert calls and peak < 16  # measured again; never more than a few MB held
    assert path.is_file() and not path.is_symlink() and os.path.getsize(path) < CHOICES_BYTES
    assert list(json.loads(path.read_text()).values())[0]["batch_size"] == 8  # a tie: the smallest batch
    if before is not None:
        assert (os.stat(target).st_size, os.stat(target).st_mtime_ns) == before


def test_read_back_refuses_every_entry_but_a_regular_file_of_its_folder(tmp_path, monkeypatch):
    """``open_read_back`` alone: what it refuses, and that it refuses it before reading a byte —
    also when a FIFO is put in place of the file between its check and its open."""
    from retrieval.files import read_back
    from retrieval.files.read_back import NotReadBack, TooBig, open_read_back, read_back_bytes

    folder = tmp_path / "home"
    (folder / "inner").mkdir(parents=True)
    good = folder / "inner" / "good.json"
    good.write_bytes(b"{}")
    assert read_back_bytes(good, folder, 2) == b"{}"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_bytes(b"{}")
    (folder / "out").symlink_to(outside)  # a folder inside that is a link out of it
    (folder / "dir").mkdir()
    sock = _socket(folder / "sock")
    _fifo(folder / "fifo")
    (folder / "link").symlink_to(good)
    for path, limit, said in [
        (folder / "out" / "x.json", 10, "is not inside"), (folder / "inner" / "..", 10, "is not inside"),
        (folder / "dir", 10, "is a folder"), (folder / "sock", 10, "is a socket"), (folder / "fifo", 10, "is a FIFO"),
        (folder / "link", 10, "is a symbolic link"), (good, 1, "is 2 bytes, more than the 1"),
    ]:
        with pytest.raises(NotReadBack, match=said):
            _in_time(lambda p=path, n=limit: open_read_back(p, folder, n), 10)
    with pytest.raises(TooBig):
        read_back_bytes(good, folder, 1)
    with pytest.raises(FileNotFoundError):
        read_back_bytes(folder / "none", folder, 10)
    # a FIFO put in place between the lstat and the open: opened without waiting, then refused
    checked = os.lstat(good)
    monkeypatch.setattr(read_back.os, "lstat", lambda p: checked)
    with pytest.raises(NotReadBack, match="replaced while it was opened|is a FIFO"):
        _in_time(lambda: open_read_back(folder / "fifo", folder, 10), 10)
    sock.close()


def test_kept_files_that_are_links_fifos_or_devices_are_never_opened(toy_dataset, tmp_path):
    """An uploaded data set's kept files are read again only as regular files of its folder: a link
    to a file of the machine, a FIFO or a link to a device in their place refuses the reopen in one
    line, reading nothing, and the data set reopens once its files are back."""
    from retrieval.data import kept
    from retrieval.data.readers import load_uploads

    upload = tmp_path / "upload"
    upload.mkdir()
    corpus = upload / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "title": doc.title, "text": doc.text}) + "\n"
                              for d, doc in toy_dataset.docs.items()), encoding="utf-8")
    dataset = load_uploads([str(corpus)])
    store = Store(tmp_path / "store.sqlite3")
    found = kept.keep(store, dataset, [str(corpus)])
    (path,) = [store.kept_dir / found.id / "0" / "corpus.jsonl"]
    original = path.read_bytes()
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(original)
    for make, said in [(_link(secret), "is a symbolic link"), (_fifo, "is a FIFO"), (_link("/dev/zero"),
                                                                                       "is a symbolic link")]:
        make(path)
        with pytest.raises(ValueError, match=f"corpus.jsonl {said}.*not opened"):
            _in_time(lambda: kept.reopen(store, found.id), 30, unblock=path if make is _fifo else None)
    path.unlink()
    path.write_bytes(original)
    assert kept.reopen(store, found.id).content_hash == found.id
    store.close()


def test_a_fifo_named_as_input_is_refused_in_one_line_not_waited_on(tmp_path):
    """Files a user names are inputs, not read back, but a FIFO or a device among them is refused
    before anything opens it (an open would wait for a writer, a device never ends)."""
    from retrieval.data.readers import load_dataset, load_files
    from retrieval.errors import DataError

    fifo = tmp_path / "corpus.jsonl"
    _fifo(fifo)
    for call in (lambda: load_dataset(fifo), lambda: load_files(str(DEMO / "corpus.jsonl"), str(fifo))):
        with pytest.raises(DataError, match="corpus.jsonl: is not a regular file"):
            _in_time(call, 30, unblock=fifo)


def test_training_files_read_back_are_only_regular_files_of_their_folder(tmp_path):
    """A run's checkpoint (``state.pt``), a learned sparse run's held-out scores (``selection.json``)
    and its run mark, and a fine-tuned model's training record: a FIFO or a link in their place is
    never opened — the run starts afresh (a new mark written over the entry), the record is not
    trusted — and nothing waits."""
    from retrieval.index.encoder import TRAINING_RECORD, read_trained_on, read_training_record
    from training import checkpoint
    from training.sparse import RUN_KEY, SELECTION, claim, read_selection

    folder = tmp_path / "run"
    folder.mkdir()
    _fifo(folder / checkpoint.STATE_FILE)
    assert _in_time(lambda: checkpoint.load(folder, "key"), 30, unblock=folder / checkpoint.STATE_FILE) is None
    _fifo(folder / SELECTION)
    assert _in_time(lambda: read_selection(folder / SELECTION, ["q1"]), 30, unblock=folder / SELECTION) is None
    _fifo(folder / RUN_KEY)
    _in_time(lambda: claim(folder, "a-run"), 30, unblock=folder / RUN_KEY)
    assert (folder / RUN_KEY).read_text() == "a-run" and not (folder / SELECTION).exists()
    secret = tmp_path / "record.json"
    secret.write_text(json.dumps({"trained_on": {"split": "train", "queries": "x"}, "result": {}}))
    (folder / TRAINING_RECORD).symlink_to(secret)
    assert read_training_record(folder) is None and read_trained_on(folder) is None
    (folder / TRAINING_RECORD).unlink()
    (folder / TRAINING_RECORD).write_text(secret.read_text())
    assert read_trained_on(folder) is not None  # the same record, as a file of its own
