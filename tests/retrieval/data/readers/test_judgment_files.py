"""Judgments that travel (``retrieval.data.readers.judgment_files``, ``python -m retrieval judges --import`` /
``--format csv|tsv --export``): each judge's grades round-trip through CSV and TSV, Quepid's case
ratings (query text, docid, rating) and book judgements (a column per judge) are read, a formula
cell is written inert and read back exactly (arbitrary ids, query texts with CR/LF/tab, judge names:
a Hypothesis property), and a row that cannot be mapped is refused with file:line before anything
is stored."""
from __future__ import annotations

import html

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers import judgment_files as files
from retrieval.data.readers import load_dataset
from retrieval.errors import DataError
from retrieval.files import tabular
from retrieval.store import Store
from tests.conftest import DEMO
from tests.retrieval.test_cli import cli


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
    # every text cell quoted (retrieval.files.tabular), the header's too
    assert text.splitlines()[0] == ("\t" if suffix == ".tsv" else ",").join(f'"{c}"' for c in files.COLUMNS)
    assert "\"'=bob\"" in text  # a spreadsheet would run "=bob" as a formula
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


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
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
    assert out.read_text().splitlines()[1:] == [f'"{q}","{text}","{d[0]}",2,"cy"', f'"{q}","{text}","{d[1]}",0,"cy"']


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


_VISIBLE = st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"))
_HOSTILE = st.sampled_from(["=", "+", "-", "@", "'", "'=", "''", "-5", "=2+5*cmd|'/C", "=2+5*cmd|' /C calc'!A0",
                            ";=", ",", '"', "\uff1d"])
_IDS = st.builds(lambda a, b: a + b, st.one_of(st.just(""), _HOSTILE), st.text(_VISIBLE, max_size=8)).filter(
    lambda s: s and not any(c.isspace() for c in s))
_JUDGES = st.builds(lambda a, b: a + b, st.one_of(st.just(""), _HOSTILE),
                    st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")), max_size=10)
                    ).map(str.strip).filter(lambda s: 0 < len(s) <= 100)
_TEXTS = st.text(st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from("\r\n\t;,\"'=+-@")), max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(_IDS, min_size=1, max_size=4, unique=True), st.lists(_TEXTS, min_size=4, max_size=4),
       st.lists(_IDS, min_size=1, max_size=4, unique=True), st.lists(_JUDGES, min_size=1, max_size=3, unique=True),
       st.data())
@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_any_judgments_survive_their_export_exactly(qids, texts, docs, judges, data):
    """Export then import gives back exactly the judgments written, in CSV and TSV, whatever ids,
    query texts (a lone CR, LF, tab, ';=') and judge names the name checks let in: ``-5`` and
    ``'-5``, ``=x`` and ``'=x`` stay apart, and no query's text ends its row."""
    import tempfile
    from pathlib import Path

    from retrieval.judging.judgments import check_judge
    from retrieval.safe_names import confusable_with, id_problem

    qids = [q for q in qids if id_problem(q) is None]
    docs = [d for d in docs if id_problem(d) is None]
    def let_in(name: str) -> bool:  # as typed: the name checks keep it unchanged (a blank, a filler: refused)
        try:
            return check_judge(name) == name
        except ValueError:
            return False

    judges = [j for j in judges if let_in(j)]
    judges = [j for i, j in enumerate(judges) if confusable_with(j, judges[:i]) is None]  # lookalikes: refused
    if not (qids and docs and judges):
        return
    dataset = Dataset("hostile", {d: Document(d, "", "text") for d in docs}, dict(zip(qids, texts)))
    cells = data.draw(st.lists(st.tuples(st.sampled_from(qids), st.sampled_from(docs), st.sampled_from(judges)),
                               min_size=1, max_size=8, unique=True))
    rows = [{"query_id": q, "query_text": dataset.queries[q], "doc_id": d, "judge": j, "grade": data.draw(
        st.integers(0, 2))} for q, d, j in cells]
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in files.FORMATS:
            path = files.write(rows, Path(tmp) / f"judged.{fmt}", fmt)
            back = files.read(path, dataset)
            assert sorted((j.query_id, j.doc_id, j.judge, j.grade) for j in back) == \
                sorted((r["query_id"], r["doc_id"], r["judge"], r["grade"]) for r in rows)
            written = tabular.read(path, fmt)
            assert sorted(tuple(r) for r in written[1:]) == sorted(
                (r["query_id"], r["query_text"], r["doc_id"], str(r["grade"]), r["judge"]) for r in rows)


def test_a_query_text_with_a_lone_cr_stays_in_its_cell(tmp_path):
    """The hostile tester's row: a query's text with a lone CR, then a formula. Every CSV reader
    sees one row per judgment, no cell of it a formula, and RankScope reads its export back."""
    import csv

    evil = "flu\r=2+5*cmd|' /C calc'!A0"
    dataset = Dataset("evil", {"-5": Document("-5", "", "a"), "'-5": Document("'-5", "", "b")}, {"q1": evil})
    rows = [{"query_id": "q1", "query_text": evil, "doc_id": "-5", "judge": "=x", "grade": 2},
            {"query_id": "q1", "query_text": evil, "doc_id": "'-5", "judge": "'=x", "grade": 0}]
    for fmt in files.FORMATS:
        path = files.write(rows, tmp_path / f"evil.{fmt}", fmt)
        with path.open(newline="") as f:
            read = list(csv.reader(f, delimiter="\t" if fmt == "tsv" else ","))
        assert len(read) == 3 and all(not c.startswith(("=", "+", "-", "@")) for row in read for c in row)
        assert read[1][1] == "flu\r'=2+5*cmd|' /C calc'!A0"
        back = files.read(path, dataset)
        assert sorted((j.doc_id, j.judge, j.grade) for j in back) == [("'-5", "'=x", 0), ("-5", "=x", 2)]


def test_another_tools_file_keeps_quepids_guard_only(tmp_path, demo):
    """A spreadsheet's own CSV (not RankScope's header) is read as before: a ``'`` before a formula
    character is Quepid's guard and dropped; any other ``'`` is the judge's name."""
    q, d = list(demo.queries)[0], list(demo.docs)[:2]
    path = tmp_path / "sheet.csv"
    path.write_text(f"query_id,doc_id,grade,judge\n{q},{d[0]},1,'=ann\n{q},{d[1]},2,'bob\n")
    assert [j.judge for j in files.read(path, demo)] == ["=ann", "'bob"]


def _twins() -> Dataset:
    """Two queries with one text (a log holds a query twice, under two ids), and one of their own."""
    docs = {d: Document(d, "", "text") for d in ("d1", "d2")}
    return Dataset("twins", docs, {"q1": "flu shot", "q2": "flu shot", "q3": "measles"})


@pytest.mark.parametrize("header", ["query,docid,rating", "query_text,doc_id,grade"])
def test_a_query_text_two_queries_share_is_refused_naming_both(tmp_path, header):
    """A grade given by a query's text goes to no query when two share that text (it went to one of
    them by chance): refused with file:line and both ids; a text of one query is still read."""
    path = tmp_path / "by-text.csv"
    path.write_text(f"{header}\nmeasles,d1,2\nflu shot,d2,1\n")
    with pytest.raises(DataError) as err:
        files.read(path, _twins())
    assert str(err.value) == ("by-text.csv:3: query 'flu shot' is the text of 2 queries of twins ('q1', 'q2'); a grade "
                              "given by the text cannot tell which it is for: give a query_id column")
    path.write_text(f"{header}\nmeasles,d1,2\n")
    assert [(j.query_id, j.grade) for j in files.read(path, _twins())] == [("q3", 2)]
    path.write_text("query_id,query,doc_id,grade\nq2,flu shot,d2,1\n")  # an id column: the text is not read
    assert [(j.query_id, j.grade) for j in files.read(path, _twins())] == [("q2", 1)]


def test_a_pair_a_judge_grades_twice_differently_is_refused_naming_both_lines(tmp_path):
    """One judge's 0 then 2 for one pair: refused naming both lines; the same grade again is read once."""
    path = tmp_path / "twice.csv"
    path.write_text("query_id,doc_id,grade,judge\nq3,d1,0,ann\nq3,d2,1,ann\nq3,d1,0,bob\nq3,d1,2,ann\n")
    with pytest.raises(DataError) as err:
        files.read(path, _twins())
    assert str(err.value) == ("twice.csv:5: judge 'ann' grades query 'q3' and document 'd1' 0 on line 2 and 2 on "
                              "line 5; keep one row")
    path.write_text("query_id,doc_id,grade,judge\nq3,d1,0,ann\nq3,d1,0,ann\n")
    got = files.read(path, _twins())
    assert [(j.query_id, j.doc_id, j.grade, j.line) for j in got] == [("q3", "d1", 0, 2)] and got.duplicates == 1


def test_ids_and_names_that_are_the_headers_words_round_trip(tmp_path):
    """A query named ``query_id`` whose text is ``query``, a document named ``doc_id``, a judge named
    ``judge``: rows below the header, read back as rows."""
    dataset = Dataset("words", {d: Document(d, "", "t") for d in ("doc_id", "grade")},
                      {"query_id": "query", "qid": "query_id"})
    rows = [{"query_id": "query_id", "query_text": "query", "doc_id": "doc_id", "grade": 2, "judge": "judge"},
            {"query_id": "qid", "query_text": "query_id", "doc_id": "grade", "grade": 0, "judge": "grade"}]
    for fmt in files.FORMATS:
        back = files.read(files.write(rows, tmp_path / f"words.{fmt}", fmt), dataset)
        assert sorted((j.query_id, j.query_text, j.doc_id, j.grade, j.judge) for j in back) == \
            sorted(tuple(r.values()) for r in rows)
