"""The one writer of TREC files: runs (``qid Q0 docid rank score tag``, trec_eval's run format) and
qrels (``qid 0 docid grade``, or BEIR's ``query-id<TAB>corpus-id<TAB>score`` TSV).

Both columns formats separate fields by whitespace, so what goes into a line passes the id
boundary first (``readers.records.require_id``: no whitespace, control, invisible or noncharacter,
no lone surrogate; written in NFC), and a run's tag is one plain word (``safe_names.check_name``). A
score is written as the shortest text that reads back as the same float (``repr``), so a file read
back by ``readers.read_run`` gives the same ranked lists, ties and all; a NaN or infinite score is
refused, since no reader takes one. A qrels file's grade is an integer within the reader's range
(``readers.qrels.MAX_GRADE``), and every line written is read back as a label, whatever its ids (a
header is told by its grade column, never a number: ``qid 0 corpus-id 2`` is a label). Each file is
written aside and moved into place (``os.replace``), so a failure never leaves half a file under the
name.

A run's lines are written in trec_eval's order (``retrieval.data.ranking``: score descending, then
document id descending), whatever order a list holds them in, so the rank column says the rank
trec_eval (which reads the scores and ignores that column) evaluates each document at, and every
figure RankScope reports of the run equals trec_eval's on the file.
"""
from __future__ import annotations

import math
import operator
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

from retrieval.data import ranking
from retrieval.data.dataset import Qrels
from retrieval.data.readers.qrels import MAX_GRADE
from retrieval.data.readers.records import require_id
from retrieval.data.run import Run
from retrieval.safe_names import check_name

QRELS_FORMATS = ("trec", "beir")


def _atomic(path: Path, lines: Iterable[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with aside.open("w", encoding="utf-8", newline="\n") as f:
            f.writelines(lines)
        os.replace(aside, path)
    finally:
        aside.unlink(missing_ok=True)
    return path


def write_trec(run: Run, path: str | Path, tag: str) -> Path:
    """Write ``run`` as ``qid Q0 docid rank score tag`` lines, each query's list in trec_eval's order
    (rank 1 first: ``ranking.sorted_hits``); returns the file. Ids, the tag and every score are
    checked before anything is written (a ``ValueError`` naming the first that cannot be)."""
    path = Path(path)
    tag = check_name(tag, "run's tag", spaces=False)
    lines = []
    for qid, hits in run.items():
        q = require_id(qid, "query id", str(path)) if qid else _empty("query id", path)
        checked = []
        for doc, score in hits:
            d = require_id(doc, "document id", str(path)) if doc else _empty("document id", path)
            value = float(score)
            if not math.isfinite(value):
                raise ValueError(f"{path}: the score of document {doc[:80]!r} for query {qid[:80]!r} is {value}, "
                                 "which no run file can hold")
            checked.append((d, value))
        ranked = ranking.sorted_hits(checked)  # the ids as written (NFC): what trec_eval compares
        lines += [f"{q} Q0 {d} {rank} {value!r} {tag}\n" for rank, (d, value) in enumerate(ranked, 1)]
    return _atomic(path, lines)


def write_qrels(qrels: Qrels, path: str | Path, fmt: str = "trec", split: str = "test") -> Path:
    """Write labels as a qrels file; returns the file written.

    ``"trec"``: ``path`` is the file, one ``qid 0 docid grade`` line per label (trec_eval's
    format). ``"beir"``: ``path`` is a BEIR data set folder, written to ``qrels/<split>.tsv`` under
    it with the ``query-id<TAB>corpus-id<TAB>score`` header. Lines are sorted by query id, then
    document id. Ids go through the boundary every id enters by (``readers.records.require_id``):
    an empty id or one holding whitespace, a control or invisible character, a noncharacter or a
    lone surrogate is refused (a ``ValueError`` naming it) before anything is written, as is a grade
    that is not an integer from ``-MAX_GRADE`` to ``MAX_GRADE`` (what the reader takes) and a split
    name that is not one plain word (it names the file); an id is written in its NFC form.
    """
    if fmt not in QRELS_FORMATS:
        raise ValueError(f"unknown qrels format {fmt!r}; choose from {', '.join(QRELS_FORMATS)}")
    if fmt == "beir":
        split = check_name(split, "split name", spaces=False)
        if any(c in split for c in "/\\:") or split.startswith("."):
            raise ValueError(f"a split name names a file: it cannot start with '.' or hold '/', '\\' or ':', "
                             f"not {split[:80]!r}")
    path = Path(path) / "qrels" / f"{split}.tsv" if fmt == "beir" else Path(path)
    written: dict[tuple[str, str], int] = {}
    for qid, docs in qrels.items():
        for doc, grade in docs.items():
            ids = []
            for ident, what in ((qid, "query id"), (doc, "document id")):
                if not isinstance(ident, str) or not ident:
                    _empty(what, path)
                ids.append(require_id(ident, what, str(path)))
            pair = (ids[0], ids[1])
            value = _grade(grade, qid, doc, path)
            if pair in written and written[pair] != value:
                raise ValueError(f"{path}: query {qid[:80]!r} and document {doc[:80]!r} are one pair in NFC with "
                                 "another of a different grade")
            written[pair] = value
    rows = sorted((qid, doc, grade) for (qid, doc), grade in written.items())
    head = ["query-id\tcorpus-id\tscore\n"] if fmt == "beir" else []
    return _atomic(path, head + [f"{q}\t{d}\t{g}\n" if fmt == "beir" else f"{q} 0 {d} {g}\n" for q, d, g in rows])


def _grade(grade: object, qid: str, doc: str, path: Path) -> int:
    """``grade`` as the integer written, or a ValueError naming the pair: a grade the qrels reader
    would refuse (not an integer, or beyond ``readers.qrels.MAX_GRADE``) is never written."""
    value = None
    if isinstance(grade, float) and grade.is_integer():
        value = int(grade)
    elif not isinstance(grade, bool):
        try:
            value = operator.index(grade)  # type: ignore[arg-type]  # an int, or numpy's: anything else refused
        except TypeError:
            value = None
    if value is None or abs(value) > MAX_GRADE:
        raise ValueError(f"{path}: the grade of query {qid[:80]!r} and document {doc[:80]!r} is {repr(grade)[:80]}; "
                         f"a qrels file holds integers from {-MAX_GRADE} to {MAX_GRADE}")
    return value


def _empty(what: str, path: Path) -> NoReturn:
    raise ValueError(f"{path}: an empty {what} cannot be written")
