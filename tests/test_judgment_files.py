"""Judgments that travel (``retrieval.readers.judgments``, ``python -m retrieval judges --import`` /
``--format csv|tsv --export``): each judge's grades round-trip through CSV and TSV, Quepid's case
ratings (query text, docid, rating) and book judgements (a column per judge) are read, a formula
cell is written inert and read back, and a row that cannot be mapped is refused with file:line
before anything is stored."""
from __future__ import annotations

import html

import pytest

from retrieval.errors import DataError
from retrieval.readers import judgments as files
from retrieval.readers import load_dataset
from retrieval.store import Store

from .conftest import DEMO
from .test_cli import cli


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def _triples(rows) -> set:
    return {(r["query_id"], r["doc_id"], r["judge"], r["grade"]) for r in rows}


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_each_judges_grades_round_trip(tmp_path, demo, suffix):
    store = Store(tmp_path / "a.sqlite3")
    q1, q2 = list(demo.queries)[:2]
    d1, d2 = list(demo.docs)[:2]
    for q, d, g, judge in ((q1, d1, 2, "ann"), (q1, d1, 1, "=bob"), (q1, d2, 0, "ann"), (q2, d2, 1, "bob, jr")):
        store.put_judgment(demo.corpus_hash, q, demo.queries[q], d, g, judge)
    path = files.write(store.judgments(demo.corpus_hash), tmp_path / f"judged{suffix}", suffix[1:])
    text = path.read_text()
    assert text.splitlines()[0] == ("\t" if suffix == ".tsv" else ",").join(files.COLUMNS)
    assert "'=bob" in text  # a spreadsheet would run "=bob" as a formula
    back = files.read(path, demo)
    assert {(j.query_id, j.doc_id, j.judge, j.grade) for j in back} == _triples(store.judgments(demo.corpus_hash))
    assert {j.line for j in back} == {2, 3, 4, 5}


def test_quepid_exports_are_read(tmp_path, demo):
    q1, q2 = list(demo.queries)[:2]
    d1, d2 = list(demo.docs)[:2]
    ratings = tmp_path / "quepid-case.csv"  # Quepid's case ratings export: query text, docid, rating
    ratings.write_text(f"query,docid,rating\n\"{demo.queries[q1]}\",{d1},2\n{demo.queries[q2]},{d2},0\n")
    got = files.read(ratings, demo, judge="quepid team")
    assert [(j.query_id, j.doc_id, j.grade, j.judge) for j in got] == \
        [(q1, d1, 2, "quepid team"), (q2, d2, 0, "quepid team")]
    book = tmp_path / "quepid-book.csv"  # Quepid's book export: a column per judge, empty where not graded
    book.write_text(f"query,docid,Ann,Bob\n{demo.queries[q1]},{d1},1,2\n{demo.queries[q2]},{d2},,0\n")
    got = files.read(book, demo)
    assert [(j.query_id, j.judge, j.grade, j.line) for j in got] == [(q1, "Ann", 1, 2), (q1, "Bob", 2, 2),
                                                                    (q2, "Bob", 0, 3)]


@pytest.mark.parametrize("row, problem", [
    ("{q},nope,1", "demo.csv:3: document 'nope' is not in demo"),
    ("{q},{d},3", "demo.csv:3: "),
    ("missing,{d},1", "demo.csv:3: query id 'missing' is not in demo"),
])
def test_a_row_that_cannot_be_mapped_is_refused_with_its_line(tmp_path, demo, row, problem):
    q, d = list(demo.queries)[0], list(demo.docs)[0]
    path = tmp_path / "demo.csv"
    path.write_text(f"query_id,doc_id,grade,judge\n{q},{d},1,ann\n" + row.format(q=q, d=d) + ",ann\n")
    with pytest.raises(DataError) as err:
        files.read(path, demo)
    assert str(err.value).startswith(problem)


def test_the_cli_imports_all_or_nothing_and_exports_each_judge(tmp_path, demo):
    store = tmp_path / "s.sqlite3"
    q, d = list(demo.queries)[0], list(demo.docs)[:2]
    bad = tmp_path / "bad.csv"
    bad.write_text(f"query_id,doc_id,grade,judge\n{q},{d[0]},1,ann\n{q},nope,1,ann\n")
    failed = cli("judges", DEMO, "--import", bad, "--store", store, tmp_path=tmp_path)
    assert failed.returncode == 2 and "bad.csv:3: document 'nope' is not in demo" in failed.stderr
    assert Store(store).judgments(demo.corpus_hash) == []  # the good first row was not stored either
    good = tmp_path / "good.tsv"
    good.write_text(f"qid\tdocid\trating\n{q}\t{d[0]}\t2\n{q}\t{d[1]}\t0\n")
    out = tmp_path / "out" / "all.csv"
    done = cli("judges", DEMO, "--import", good, "--judge", "cy", "--format", "csv", "--export", out,
               "--store", store, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "imported 2 judgments by cy" in done.stderr and "2 judgments by 1 judge(s): cy" in done.stdout
    text = demo.queries[q]
    assert out.read_text().splitlines()[1:] == [f"{q},{text},{d[0]},2,cy", f"{q},{text},{d[1]},0,cy"]


def test_the_judge_tab_imports_and_exports_each_judges_grades(tmp_path, demo, monkeypatch):
    from retrieval.workspace import Workspace
    from ui import judge

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path / "home"))  # where exports go
    store = Store(tmp_path / "ui.sqlite3")
    ws = Workspace(demo, store)
    q, d = list(demo.queries)[0], list(demo.docs)[:2]
    upload = tmp_path / "upload-123" / "ratings.csv"  # as Gradio hands an upload over
    upload.parent.mkdir()
    upload.write_text(f"query,docid,Ann,Bob\n{demo.queries[q]},{d[0]},2,1\n{demo.queries[q]},{d[1]},,0\n")
    assert judge.import_judgments(ws, store, str(upload)) == ("Read 3 judgments by Ann, Bob: 3 new, 0 changed a "
                                                              "grade, 0 unchanged (stored already).")
    broken = upload.parent / "broken.csv"
    broken.write_text(f"query_id,doc_id,grade\n{q},{d[0]},7\n")
    with pytest.raises(Exception) as err:  # the file's own name and line, not the upload path
        judge.import_judgments(ws, store, str(broken), "cy")
    assert html.unescape(str(err.value)).startswith("'broken.csv:2: a grade is 0, 1 or 2")
    assert len(store.judgments(demo.corpus_hash)) == 3  # nothing of the broken file
    path = judge.export_qrels(ws, store, "tsv")
    assert path.endswith(".tsv") and files.read(path, demo)[0].judge in ("Ann", "Bob")
    assert _triples(store.judgments(demo.corpus_hash)) == {(j.query_id, j.doc_id, j.judge, j.grade)
                                                          for j in files.read(path, demo)}
