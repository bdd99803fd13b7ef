"""Readers: every supported format from real files, every kind of bad input, zip safety."""
from __future__ import annotations

import json
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from retrieval.data.readers import detect_role, load_dataset, load_files, load_uploads, read_qrels
from retrieval.data.readers.safezip import SafeZip
from retrieval.errors import DataError
from tests.conftest import SHARED

DOCS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {"url": "x"}},
    {"_id": "d2", "title": "", "text": "Dogs bark."},
    {"_id": "d3", "title": "Birds", "text": "Birds sing.", "extra": [1, 2]},
]
QUERIES = [{"_id": "q1", "text": "purring animals"}, {"_id": "q2", "text": "barking"}]
QRELS = [("q1", "d1", 2), ("q1", "d3", 0), ("q2", "d2", 1)]


def jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def qrels_tsv(rows=QRELS, header=True, eol="\n") -> str:
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    lines += [f"{q}\t{d}\t{s}" for q, d, s in rows]
    return eol.join(lines) + eol


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def make_beir(root: Path, *, header=True, eol="\n", splits=("test",)) -> Path:
    write(root / "corpus.jsonl", jsonl(DOCS))
    write(root / "queries.jsonl", jsonl(QUERIES))
    for split in splits:
        write(root / "qrels" / f"{split}.tsv", qrels_tsv(header=header, eol=eol))
    return root


def zip_folder(folder: Path, dest: Path, top: str | None = None) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                rel = f.relative_to(folder).as_posix()
                zf.write(f, f"{top}/{rel}" if top else rel)
    return dest


def make_zip(dest: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return dest


def error(fn, *args, **kwargs) -> str:
    with pytest.raises(DataError) as exc:
        fn(*args, **kwargs)
    return str(exc.value)


def check_small(ds) -> None:
    assert list(ds.docs) == ["d1", "d2", "d3"]
    assert ds.docs["d1"].title == "Cats" and ds.docs["d1"].text == "Cats purr."
    assert ds.docs["d2"].title == ""
    assert ds.queries == {"q1": "purring animals", "q2": "barking"}
    assert ds.qrels == {"test": {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}}
    assert all(type(v) is int for row in ds.qrels["test"].values() for v in row.values())
    assert not ds.report, ds.report.warnings


# ------------------------------------------------------------------------------------------
# formats


def test_beir_folder(tmp_path):
    ds = load_dataset(make_beir(tmp_path / "tiny"))
    check_small(ds)
    assert ds.name == "tiny"
    assert load_dataset(tmp_path / "tiny", name="other").name == "other"


@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_beir_qrels_with_or_without_header_and_crlf(tmp_path, header, eol):
    check_small(load_dataset(make_beir(tmp_path / "tiny", header=header, eol=eol)))


def test_crlf_everywhere(tmp_path):
    root = tmp_path / "crlf"
    write(root / "corpus.jsonl", jsonl(DOCS).replace("\n", "\r\n"))
    write(root / "queries.jsonl", jsonl(QUERIES).replace("\n", "\r\n"))
    write(root / "qrels" / "test.tsv", qrels_tsv(eol="\r\n"))
    check_small(load_dataset(root))


def test_splits_are_ordered_test_first(tmp_path):
    ds = load_dataset(make_beir(tmp_path / "s", splits=("train", "dev", "test")))
    assert ds.splits == ["test", "dev", "train"]
    assert ds.default_split() == "test"


def test_folder_holding_one_dataset_folder(tmp_path):
    make_beir(tmp_path / "outer" / "tiny")
    check_small(load_dataset(tmp_path / "outer"))


def test_corpus_alone_loads(tmp_path):
    write(tmp_path / "c" / "corpus.jsonl", jsonl(DOCS))
    ds = load_dataset(tmp_path / "c")
    assert len(ds.docs) == 3 and ds.queries == {} and ds.qrels == {}


def test_zip_with_top_folder_and_flat(tmp_path):
    folder = make_beir(tmp_path / "tiny", eol="\r\n")
    top = load_dataset(zip_folder(folder, tmp_path / "scifact.zip", top="scifact"))
    check_small(top)
    assert top.name == "scifact"
    flat = load_dataset(zip_folder(folder, tmp_path / "flat.zip"))
    check_small(flat)


def test_same_content_same_hash_from_folder_and_zip(tmp_path):
    folder = make_beir(tmp_path / "tiny")
    h = load_dataset(folder).content_hash
    assert load_dataset(zip_folder(folder, tmp_path / "a.zip", top="tiny")).content_hash == h
    assert load_dataset(zip_folder(folder, tmp_path / "b.zip")).content_hash == h
    write(folder / "qrels" / "test.tsv", qrels_tsv(rows=QRELS[:2]))
    assert load_dataset(folder).content_hash != h


def test_zip_ignores_macosx_and_dotfiles(tmp_path):
    z = make_zip(tmp_path / "d.zip", {
        "tiny/corpus.jsonl": jsonl(DOCS),
        "tiny/queries.jsonl": jsonl(QUERIES),
        "tiny/qrels/test.tsv": qrels_tsv(),
        "tiny/qrels/.hidden.tsv": "garbage",
        "__MACOSX/tiny/._corpus.jsonl": b"\x00\x05\x16\x07\xff",
        "tiny/.DS_Store": b"\xff\xfe",
    })
    check_small(load_dataset(z))


def test_jsonl_documents_file(tmp_path):
    f = write(tmp_path / "docs.jsonl", '{"id": 7, "text": "seven"}\n\n{"id": "b", "title": null, '
                                       '"text": "bee", "meta": 1}\n')
    ds = load_dataset(f)
    assert ds.name == "docs"
    assert list(ds.docs) == ["7", "b"]
    assert ds.docs["7"].text == "seven" and ds.docs["b"].title == ""
    assert ds.queries == {} and ds.qrels == {}


def test_csv_documents_with_quotes_and_newlines(tmp_path):
    f = write(tmp_path / "docs.csv",
              'doc_id,title,body\n1,One,"first, with a comma"\n'
              '2,,"line one\nline two"\n3,Three,x\n')
    ds = load_dataset(f)
    assert list(ds.docs) == ["1", "2", "3"]
    assert ds.docs["1"].text == "first, with a comma"
    assert ds.docs["2"].text == "line one\nline two"


def test_csv_line_numbers_count_embedded_newlines(tmp_path):
    f = write(tmp_path / "docs.csv", 'id,text\n1,"a\nb"\n1,dup\n')
    msg = error(load_dataset, f)
    assert "docs.csv:4:" in msg and "'1'" in msg and "line 2" in msg


def test_tsv_documents(tmp_path):
    f = write(tmp_path / "docs.tsv", "docid\ttext\n a \tAlpha\r\nb\tBeta\r\n")
    ds = load_dataset(f)
    assert {k: d.text for k, d in ds.docs.items()} == {"a": "Alpha", "b": "Beta"}
    f = write(tmp_path / "docs2.tsv", "_id\tcontents\ttitle\nx\tbody\tTitle\n")
    assert load_dataset(f).docs["x"].title == "Title"


def test_txt_one_document_per_line(tmp_path):
    f = write(tmp_path / "notes.txt", "\ufefffirst line\n\n   \nsecond line  \r\n")
    ds = load_dataset(f)
    assert {k: d.text for k, d in ds.docs.items()} == {"line-1": "first line",
                                                       "line-4": "second line"}
    assert ds.name == "notes"


def test_zip_of_txt_files(tmp_path):
    z = make_zip(tmp_path / "notes.zip", {
        "a.txt": "Alpha text.",
        "sub/b.txt": "Beta text.\nmore",
        "empty.txt": "  \n",
        "notes.csv": "not a document",
        "__MACOSX/._a.txt": b"\xff",
    })
    ds = load_dataset(z)
    assert list(ds.docs) == ["a", "sub/b"]
    assert ds.docs["sub/b"].title == "b" and ds.docs["sub/b"].text == "Beta text.\nmore"
    warnings = " | ".join(ds.report.warnings)
    assert "notes.zip!empty.txt" in warnings and "'empty'" in warnings and "empty text" in warnings
    assert "notes.zip: ignored 1 file that is not .txt, .md or .html (e.g. notes.csv)" in warnings


def test_folder_of_txt_files(tmp_path):
    write(tmp_path / "n" / "x.txt", "X")
    write(tmp_path / "n" / "d" / "y.txt", "Y")
    assert list(load_dataset(tmp_path / "n").docs) == ["d/y", "x"]
    write(tmp_path / "n" / "x.TXT", "again")
    msg = error(load_dataset, tmp_path / "n")
    assert "duplicate document id 'x'" in msg and "x.TXT" in msg and "x.txt" in msg


def test_read_qrels_formats(tmp_path):
    beir = write(tmp_path / "a.tsv", qrels_tsv(header=True))
    bare = write(tmp_path / "b.tsv", qrels_tsv(header=False, eol="\r\n"))
    trec = write(tmp_path / "c.txt", "q1 0 d1 2\nq1 0 d3 0\n\nq2\tQ0\td2\t1\n")
    expected = {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}
    assert read_qrels(beir) == read_qrels(bare) == read_qrels(trec) == expected


def test_read_qrels_errors(tmp_path):
    msg = error(read_qrels, write(tmp_path / "q.tsv", "q1\td1\t1\nq1\td2\thigh\n"))
    assert "q.tsv:2:" in msg and "'high'" in msg and "integer" in msg
    msg = error(read_qrels, write(tmp_path / "q2.tsv", "q1\td1\t1\nq1\td2\n"))
    assert "q2.tsv:2:" in msg and "columns" in msg
    msg = error(read_qrels, write(tmp_path / "q3.tsv", "q1 d1\n"))
    assert "q3.tsv:1:" in msg and "found 2" in msg
    assert read_qrels(write(tmp_path / "q4.tsv", "q1\td1\t1.0\n")) == {"q1": {"d1": 1}}


@pytest.mark.parametrize("first,header", [
    ("query-id\tcorpus-id\tscore", True),  # BEIR's header: its grade column is a word
    ("qid 0 docid rel", True),
    ("qid\tcorpus-id\t2", False),  # a query named "qid", a document named "corpus-id": a label
    ("query-id 0 corpus-id 1", False),
    ("topic\tscore\t0", False),
])
def test_a_qrels_header_is_told_by_its_grade_column(tmp_path, first, header):
    """The first line is a header only when its grade column is not a number: a label is never
    dropped for the words its ids happen to be."""
    width = len(first.split())
    rest = "q9\td9\t1\n" if width == 3 else "q9 0 d9 1\n"
    got = read_qrels(write(tmp_path / "q.tsv", f"{first}\n{rest}"))
    cells = first.split()
    assert got == ({"q9": {"d9": 1}} if header else {cells[0]: {cells[-2]: int(cells[-1])}, "q9": {"d9": 1}})


def test_a_first_line_with_a_bad_grade_is_an_error_not_a_header(tmp_path):
    """A first line whose grade is not a number and whose names are no header's is a bad label, said
    so with its line: never skipped as if it were a header."""
    msg = error(read_qrels, write(tmp_path / "q.tsv", "q1\td1\thigh\nq1\td2\t1\n"))
    assert msg.startswith(f"{tmp_path / 'q.tsv'}:1:") and "'high'" in msg


@pytest.mark.parametrize("name,content,lines", [
    ("beir.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t0\nq1\td2\t1\nq2\td1\t1\nq1\td1\t2\n", (2, 5)),
    ("trec.txt", "q1 0 d1 0\nq1 0 d2 1\nq1 1 d1 2\n", (1, 3)),
])
def test_a_pair_labelled_twice_with_two_grades_is_refused_naming_both_lines(tmp_path, name, content, lines):
    """One pair labelled 0 then 2: which is meant no reader can tell, so the file is refused, naming
    the pair, both grades and both lines (the last label was kept, with a warning in a list of many)."""
    path = write(tmp_path / name, content)
    msg = error(read_qrels, path)
    assert msg == (f"{path}:{lines[1]}: query 'q1' and document 'd1' are labelled 0 on line {lines[0]} and 2 on line "
                   f"{lines[1]}; a pair has one label, so keep one of the lines")
    folder = make_beir(tmp_path / "beir")
    write(folder / "qrels" / "test.tsv", content)
    assert error(load_dataset, folder).endswith(f"on line {lines[1]}; a pair has one label, so keep one of the lines")


def test_a_pair_labelled_twice_far_apart_names_its_first_line(tmp_path):
    """The first line of a pair is found however far above the second it lies."""
    rows = "".join(f"q{i}\td{i}\t1\n" for i in range(20_000))
    msg = error(read_qrels, write(tmp_path / "q.tsv", f"query-id\tcorpus-id\tscore\nq7\td7\t1\n{rows}q7\td7\t0\n"))
    assert "labelled 1 on line 2 and 0 on line 20003" in msg


def test_a_pair_labelled_twice_with_one_grade_is_read_once_and_counted(tmp_path):
    """The same label twice says one thing: read once, the repeat counted in a warning (as a
    judgments file reads a repeated row once)."""
    from retrieval.errors import LoadReport

    report = LoadReport()
    path = write(tmp_path / "q.tsv", "q1\td1\t2\nq1\td2\t0\nq1\td1\t2\nq1\td2\t0.0\n")
    assert read_qrels(path, report) == {"q1": {"d1": 2, "d2": 0}}
    assert report.warnings == [f"{path}: 2 (query, document) pairs labelled again with the same grade; read once"]


def test_a_run_with_a_distinct_tag_per_line_reads_as_fast_as_one_with_one_tag(tmp_path):
    """Each line's own tag (the 6th column) once made every line scan the tags met so far: 40,000
    lines took 77 s. Timed against the same run with one tag, read in the same test, at that size:
    linear, the two take about as long (quadratic, the first took those 77 s, over a hundred times as long)."""
    import time

    from retrieval.data.readers import read_run

    lines = 40_000
    body = [f"q{i // 100} Q0 d{i} {i % 100 + 1} {100 - i % 100}.5" for i in range(lines)]
    many = write(tmp_path / "many.trec", "".join(f"{line} tag-{i}\n" for i, line in enumerate(body)))
    one = write(tmp_path / "one.trec", "".join(f"{line} bm25\n" for line in body))
    took = {}
    for path in (one, many, one, many):  # each twice, the best kept: a shared machine's pauses are not the reader's
        start = time.perf_counter()
        run = read_run(path)
        took[path.name] = min(took.get(path.name, float("inf")), time.perf_counter() - start)
    assert run.name == "tag-0" and sum(len(hits) for hits in run.run.values()) == lines
    assert run.report.warnings[0].startswith(f"{many}: the lines carry 40,000 different tags ('tag-0', 'tag-1', "
                                             "'tag-2', ...)")
    assert took["many.trec"] < 4 * took["one.trec"], took


def test_load_files_with_list_and_dict_of_qrels(tmp_path):
    corpus = write(tmp_path / "up" / "corpus.jsonl", jsonl(DOCS))
    queries = write(tmp_path / "up" / "queries.jsonl", jsonl(QUERIES))
    test = write(tmp_path / "up" / "test.tsv", qrels_tsv())
    train = write(tmp_path / "up" / "train.txt", "q2 0 d1 1\n")
    ds = load_files(corpus, queries, [test, train], name="upload")
    assert ds.name == "upload"
    assert ds.qrels == {"test": {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}},
                        "train": {"q2": {"d1": 1}}}
    ds = load_files(str(corpus), str(queries), {"dev": str(test)})
    assert ds.splits == ["dev"]
    assert load_files(corpus).queries == {}
    other = write(tmp_path / "other" / "test.tsv", "q1\td1\t1\n")
    msg = error(load_files, corpus, queries, [test, other])
    assert "split 'test'" in msg


def test_load_files_queries_as_tsv(tmp_path):
    corpus = write(tmp_path / "corpus.csv", "id,title,text\nd1,,one\nd2,,two\n")
    plain = write(tmp_path / "q.tsv", "q1\tfirst query\nq2\tsecond\n")
    with_header = write(tmp_path / "q2.csv", "query_id,query\nq1,first query\nq2,second\n")
    qrels = write(tmp_path / "test.tsv", "q1\td2\t1\n")
    for queries in (plain, with_header):
        ds = load_files(corpus, queries, qrels)
        assert ds.queries == {"q1": "first query", "q2": "second"}
        assert ds.qrels == {"test": {"q1": {"d2": 1}}}


def test_qrels_passed_as_corpus_or_queries_is_named(tmp_path):
    q = write(tmp_path / "test.tsv", qrels_tsv())
    msg = error(load_files, q)
    assert "test.tsv:1:" in msg and "qrels" in msg
    corpus = write(tmp_path / "c.jsonl", jsonl(DOCS))
    assert "qrels" in error(load_files, corpus, q)


def test_detect_role(tmp_path):
    folder = make_beir(tmp_path / "tiny")
    assert detect_role(folder) == "dataset"
    assert detect_role(zip_folder(folder, tmp_path / "t.zip")) == "dataset"
    assert detect_role(folder / "corpus.jsonl") == "corpus"
    assert detect_role(folder / "queries.jsonl") == "queries"
    assert detect_role(folder / "qrels" / "test.tsv") == "qrels"
    assert detect_role(write(tmp_path / "t.tsv", qrels_tsv(header=False))) == "qrels"
    assert detect_role(write(tmp_path / "d.csv", "id,text\n1,a\n")) == "corpus"


def test_load_uploads_single_zip_loads_whole(tmp_path):
    z = zip_folder(make_beir(tmp_path / "tiny"), tmp_path / "scifact.zip", top="scifact")
    ds = load_uploads([str(z)])
    check_small(ds)
    assert ds.name == "scifact"


def test_load_uploads_sorts_separate_files_into_roles(tmp_path):
    corpus = write(tmp_path / "corpus.jsonl", jsonl(DOCS))
    queries = write(tmp_path / "queries.jsonl", jsonl(QUERIES))
    test = write(tmp_path / "test.tsv", qrels_tsv())
    ds = load_uploads([str(test), str(queries), str(corpus)])  # order does not matter
    assert list(ds.docs) == ["d1", "d2", "d3"] and ds.docs["d1"].title == "Cats"
    assert ds.queries == {"q1": "purring animals", "q2": "barking"}
    assert ds.qrels == {"test": {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}}
    assert ds.name == "corpus"
    assert not ds.report, ds.report.warnings


def test_load_uploads_two_documents_files_is_an_error(tmp_path):
    a = write(tmp_path / "corpus.jsonl", jsonl(DOCS))
    b = write(tmp_path / "more.jsonl", jsonl(DOCS))
    msg = error(load_uploads, [str(a), str(b)])
    assert "exactly one documents file" in msg and "found 2" in msg
    assert "corpus.jsonl" in msg and "more.jsonl" in msg


def test_load_uploads_two_queries_files_is_an_error(tmp_path):
    corpus = write(tmp_path / "corpus.jsonl", jsonl(DOCS))
    q1 = write(tmp_path / "queries.jsonl", jsonl(QUERIES))
    q2 = write(tmp_path / "topics.jsonl", jsonl(QUERIES))
    msg = error(load_uploads, [str(corpus), str(q1), str(q2)])
    assert "more than one queries file" in msg
    assert "queries.jsonl" in msg and "topics.jsonl" in msg


# ------------------------------------------------------------------------------------------
# bad input: errors name file, line and problem


def test_malformed_json_names_file_line_and_error(tmp_path):
    root = make_beir(tmp_path / "bad")
    lines = jsonl(DOCS).splitlines()
    lines[2] = '{"_id": "d3", "text": "oops"'
    write(root / "corpus.jsonl", "\n".join(lines) + "\n")
    msg = error(load_dataset, root)
    assert "corpus.jsonl:3:" in msg and "JSON" in msg and "column" in msg


def test_json_in_zip_member_names_archive_and_member(tmp_path):
    z = make_zip(tmp_path / "data.zip",
                 {"scifact/corpus.jsonl": '{"_id": "a", "text": "x"}\n[1]\n'})
    msg = error(load_dataset, z)
    assert "data.zip!scifact/corpus.jsonl:2:" in msg and "JSON object" in msg


@pytest.mark.parametrize("line,field", [('{"text": "no id"}', "_id"), ('{"_id": "x"}', "text"),
                                        ('{"_id": "x", "text": 5}', "text"),
                                        ('{"_id": 1.5, "text": "x"}', "_id")])
def test_missing_or_bad_field_is_named(tmp_path, line, field):
    f = write(tmp_path / "corpus.jsonl", '{"_id": "ok", "text": "fine"}\n' + line + "\n")
    msg = error(load_dataset, f)
    assert "corpus.jsonl:2:" in msg and f"'{field}'" in msg


def test_missing_column_is_named(tmp_path):
    msg = error(load_dataset, write(tmp_path / "d.csv", "id,title,abstract\n1,t,a\n"))
    assert "d.csv:1:" in msg and "'text'" in msg and "abstract" in msg
    msg = error(load_dataset, write(tmp_path / "e.tsv", "name\ttext\n1\tt\n"))
    assert "e.tsv:1:" in msg and "'_id'" in msg
    msg = error(load_dataset, write(tmp_path / "f.csv", "id,text\n1,a,extra\n"))
    assert "f.csv:2:" in msg and "columns" in msg


WHITESPACE = "contains whitespace, which TREC run and qrels files cannot hold"


@pytest.mark.parametrize("name, content, line, ident", [
    ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "a b", "text": "b"}\n', 2, "'a b'"),
    ("corpus.jsonl", '{"_id": "d\\t1", "text": "a"}\n', 1, "'d\\t1'"),
    ("d.csv", 'id,text\nd1,a\nd2,b\n"d 3",c\n', 4, "'d 3'"),
    ("d.tsv", "id\ttext\nd 1\ta\n", 2, "'d 1'"),
])
def test_a_document_id_with_whitespace_is_refused(tmp_path, name, content, line, ident):
    f = write(tmp_path / name, content)
    assert error(load_dataset, f) == f"{f}:{line}: id {ident} {WHITESPACE}"


def test_a_query_id_with_whitespace_is_refused(tmp_path):
    root = make_beir(tmp_path / "q")
    f = write(root / "queries.jsonl", jsonl(QUERIES + [{"_id": "q 3", "text": "x"}]))
    assert error(load_dataset, root) == f"{f}:3: id 'q 3' {WHITESPACE}"
    docs = write(tmp_path / "docs.jsonl", jsonl(DOCS))
    queries = write(tmp_path / "queries.tsv", "id\tquery\nq1\tcats\nq 2\tdogs\n")
    assert error(load_files, docs, queries) == f"{queries}:3: id 'q 2' {WHITESPACE}"
    # surrounding spaces are no part of an id: stripped, as before
    f = write(tmp_path / "c.jsonl", '{"_id": " d1 ", "text": "a"}\n')
    assert list(load_dataset(f).docs) == ["d1"]


def test_duplicate_ids_name_id_and_both_lines(tmp_path):
    f = write(tmp_path / "corpus.jsonl", jsonl(DOCS + [{"_id": "d2", "text": "again"}]))
    msg = error(load_dataset, f)
    assert "corpus.jsonl:4:" in msg and "'d2'" in msg and "line 2" in msg and "duplicate" in msg
    root = make_beir(tmp_path / "q")
    write(root / "queries.jsonl", jsonl(QUERIES + [{"_id": "q1", "text": "x"}]))
    msg = error(load_dataset, root)
    assert "queries.jsonl:3:" in msg and "'q1'" in msg and "line 1" in msg


def test_empty_texts_warn_and_skip(tmp_path):
    root = make_beir(tmp_path / "e")
    write(root / "corpus.jsonl", jsonl(DOCS + [{"_id": "d4", "title": "", "text": "  "},
                                               {"_id": "d5", "title": "Only a title", "text": ""}]))
    write(root / "queries.jsonl", jsonl(QUERIES + [{"_id": "q3", "text": ""}]))
    write(root / "qrels" / "test.tsv", qrels_tsv(rows=QRELS + [("q1", "d4", 1), ("q3", "d1", 1)]))
    ds = load_dataset(root)
    assert "d4" not in ds.docs and ds.docs["d5"].title == "Only a title"  # a title alone is text
    assert "q3" not in ds.queries
    assert ds.qrels["test"] == {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}
    w = ds.report.warnings
    assert any("corpus.jsonl:4:" in x and "'d4'" in x and "empty" in x for x in w), w
    assert any("queries.jsonl:3:" in x and "'q3'" in x for x in w), w
    assert any("test.tsv" in x and "1 label points to documents skipped" in x for x in w), w
    assert any("test.tsv" in x and "1 label belongs to queries skipped" in x for x in w), w


def test_many_empty_texts_are_counted_in_one_warning(tmp_path):
    rows = [{"_id": "ok", "text": "x"}] + [{"_id": f"e{i}", "text": ""} for i in range(50)]
    ds = load_dataset(write(tmp_path / "c.jsonl", jsonl(rows)))
    assert len(ds.docs) == 1
    assert len(ds.report.warnings) == 1 and "50 documents" in ds.report.warnings[0]


def test_no_documents_left_is_an_error(tmp_path):
    msg = error(load_dataset, write(tmp_path / "c.jsonl", jsonl([{"_id": "a", "text": " "}])))
    assert "c.jsonl" in msg and "no documents" in msg


def test_unknown_ids_are_counted_and_dropped(tmp_path):
    root = make_beir(tmp_path / "u")
    extra = [("q1", "nope1", 1), ("q1", "nope2", 1), ("q2", "nope3", 1),
             ("ghost", "d1", 1), ("ghost", "d2", 1), ("q9", "d1", 1), ("q2x", "zzz", 1)]
    write(root / "queries.jsonl", jsonl(QUERIES + [{"_id": "q2x", "text": "only unknown docs"}]))
    write(root / "qrels" / "test.tsv", qrels_tsv(rows=QRELS + extra))
    ds = load_dataset(root)
    assert ds.qrels == {"test": {"q1": {"d1": 2, "d3": 0}, "q2": {"d2": 1}}}  # q2x dropped
    assert "q2x" in ds.queries  # the query itself stays; it has no label in this split
    w = " | ".join(ds.report.warnings)
    assert "3 labels point to query ids" in w and "'ghost'" in w and "'q9'" in w
    assert "4 labels point to document ids" in w and "'nope1'" in w
    assert "1 query with no label left dropped from split 'test'" in w


def test_labels_without_any_queries_are_dropped_with_a_warning(tmp_path):
    root = tmp_path / "nq"
    write(root / "corpus.jsonl", jsonl(DOCS))
    write(root / "qrels" / "test.tsv", qrels_tsv())
    ds = load_dataset(root)
    assert ds.qrels == {} and len(ds.docs) == 3
    assert any("no queries were loaded" in w and "3 labels" in w for w in ds.report.warnings)


def test_non_utf8_names_file_line_and_offset(tmp_path):
    data = b'{"_id": "a", "text": "fine"}\n{"_id": "b", "text": "caf\xe9"}\n'
    msg = error(load_dataset, write(tmp_path / "corpus.jsonl", data))
    offset = data.index(b"\xe9")
    assert "corpus.jsonl:2:" in msg and "UTF-8" in msg and f"byte offset {offset}" in msg


def test_invalid_utf8_far_into_a_big_file_names_its_line_and_offset(tmp_path):
    good = "".join(json.dumps({"_id": f"d{i}", "text": f"passage {i} " * 40}) + "\n" for i in range(20_000))
    data = good.encode() + b'{"_id": "bad", "text": "na\xefve"}\n'  # past the first buffers read
    msg = error(load_dataset, write(tmp_path / "corpus.jsonl", data))
    offset = data.index(b"\xef")
    assert "corpus.jsonl:20001:" in msg and f"byte offset {offset}" in msg


def test_a_big_file_is_read_as_a_stream_with_progress_by_bytes(tmp_path):
    """Memory holds the documents, not the file: each record carries a 20 KB field the reader
    drops, so the file is 60 MB while the documents are well under 1 MB."""
    import tracemalloc

    from retrieval.data.readers import decode

    filler = "x" * 20_000
    path = write(tmp_path / "corpus.jsonl", "".join(
        json.dumps({"_id": f"d{i}", "text": f"passage {i}", "metadata": {"raw": filler}}) + "\n"
        for i in range(3_000)))
    size = path.stat().st_size
    seen = []
    tracemalloc.start()
    try:
        ds = load_dataset(path, progress=lambda f, what: seen.append((f, what)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(ds.docs) == 3_000 and ds.docs["d2999"].text == "passage 2999"
    assert peak < size / 10, f"peak {peak / 1e6:.1f} MB reading a {size / 1e6:.0f} MB file"
    fractions = [f for f, _ in seen]
    assert len(seen) >= size // decode.REPORT_EVERY and fractions == sorted(fractions) and fractions[-1] == 1.0
    assert all(what == f"reading {path}" for _, what in seen)


def test_csv_rows_spanning_lines_keep_their_first_line_in_errors(tmp_path):
    rows = "id,text\n" + "".join(f'{i},"line one\nline two of {i}"\n' for i in range(5000)) + "bad\n"
    msg = error(load_dataset, write(tmp_path / "docs.csv", rows))
    assert "docs.csv:10002:" in msg and "expected 2 columns" in msg
    ds = load_dataset(write(tmp_path / "ok.csv", rows.removesuffix("bad\n")))
    assert ds.docs["4999"].text == "line one\nline two of 4999"


def test_bom_is_ignored(tmp_path):
    ds = load_dataset(write(tmp_path / "c.jsonl", b"\xef\xbb\xbf" + jsonl(DOCS).encode()))
    assert list(ds.docs) == ["d1", "d2", "d3"]
    ds = load_dataset(write(tmp_path / "c.csv", "\ufeffid,text\n1,x\n"))
    assert list(ds.docs) == ["1"]


@pytest.mark.parametrize("content", [b"", b"  \n\r\n\t", b"\xef\xbb\xbf\n"])
def test_empty_file(tmp_path, content):
    for name in ("corpus.jsonl", "docs.csv", "notes.txt", "a.zip"):
        msg = error(load_dataset, write(tmp_path / name, content))
        assert name in msg and "file is empty" in msg
    root = make_beir(tmp_path / "b")
    write(root / "queries.jsonl", content)
    msg = error(load_dataset, root)
    assert "queries.jsonl" in msg and "file is empty" in msg


def test_missing_path_and_unrecognised_folder(tmp_path):
    msg = error(load_dataset, tmp_path / "nowhere")
    assert "nowhere" in msg and "no such file" in msg
    write(tmp_path / "odd" / "queries.jsonl", jsonl(QUERIES))
    write(tmp_path / "odd" / "image.png", b"\x89PNG")
    msg = error(load_dataset, tmp_path / "odd")
    assert "odd" in msg and "corpus.jsonl" in msg and ".txt" in msg and "image.png" in msg


# ------------------------------------------------------------------------------------------
# zip safety


@pytest.mark.parametrize("bad", ["../evil.txt", "/etc/evil.txt", "a/../../evil.txt",
                                 "C:/evil.txt", "..\\evil.txt"])
def test_zip_slip_is_refused(tmp_path, bad):
    z = make_zip(tmp_path / "slip.zip", {"corpus.jsonl": jsonl(DOCS), bad: "pwned"})
    msg = error(load_dataset, z)
    assert "slip.zip!" in msg and "evil.txt" in msg and "refusing" in msg
    assert not (tmp_path.parent / "evil.txt").exists()


def test_zip_symlink_is_refused(tmp_path):
    z = tmp_path / "link.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("corpus.jsonl", jsonl(DOCS))
        info = zipfile.ZipInfo("notes.txt")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    msg = error(load_dataset, z)
    assert "link.zip!notes.txt" in msg and "symbolic link" in msg


def test_zip_bomb_ratio_is_refused(tmp_path):
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("corpus.jsonl", b"\0" * (3 * 1024 * 1024))  # ~1000:1
    assert z.stat().st_size < 20_000
    msg = error(load_dataset, z)
    assert "bomb.zip!corpus.jsonl" in msg and "zip bomb" in msg


def test_zip_over_max_bytes_is_refused(tmp_path):
    line = json.dumps({"_id": "x", "text": "zero " * 40}) + "\n"
    z = make_zip(tmp_path / "big.zip", {"big/corpus.jsonl": line * 1500})  # ~300 KB, 50:1
    msg = error(load_dataset, z, max_bytes=100_000)
    assert "big.zip" in msg and "limit" in msg
    folder = make_beir(tmp_path / "ok")
    assert len(load_dataset(zip_folder(folder, tmp_path / "ok.zip"), max_bytes=10_000).docs) == 3


def test_zip_lying_about_sizes_is_refused(tmp_path):
    z = tmp_path / "liar.zip"
    body = (jsonl(DOCS) * 2000).encode()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("corpus.jsonl", body)
    raw = bytearray(z.read_bytes())
    local, central = raw.index(b"PK\x03\x04"), raw.index(b"PK\x01\x02")
    struct.pack_into("<I", raw, local + 22, 1000)  # declared uncompressed sizes: 1000 bytes
    struct.pack_into("<I", raw, central + 24, 1000)
    z.write_bytes(bytes(raw))
    msg = error(load_dataset, z)
    assert "liar.zip!corpus.jsonl" in msg


def test_zip_entry_count_limit(tmp_path):
    z = make_zip(tmp_path / "many.zip", {f"{i}.txt": "x" for i in range(10)})
    assert "entries" in error(load_dataset, z, max_entries=5)
    assert len(load_dataset(z, max_entries=10).docs) == 10


def test_not_a_zip_and_safezip_reads_in_memory(tmp_path):
    msg = error(load_dataset, write(tmp_path / "fake.zip", "not a zip at all"))
    assert "fake.zip" in msg and "zip" in msg
    z = make_zip(tmp_path / "m.zip", {"x/a.txt": "A", "x/.hidden": "H"})
    with SafeZip(z) as zf:
        assert zf.names() == ["x/a.txt"] and zf.read("x/a.txt") == b"A"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.zip", "m.zip"]  # nothing extracted


# ------------------------------------------------------------------------------------------
# the shared BEIR data sets (counts from ../shared/datasets/README.md)


def shared(name: str) -> Path:
    path = SHARED / name
    if not (path / "corpus.jsonl").is_file():
        pytest.skip(f"{path} is not available")
    return path


def labels(ds, split: str) -> tuple[int, int]:
    return len(ds.qrels[split]), sum(len(row) for row in ds.qrels[split].values())


def test_shared_scifact():
    ds = load_dataset(shared("scifact"))
    assert ds.name == "scifact"
    assert len(ds.docs) == 5183 and len(ds.queries) == 1109
    assert ds.splits == ["test", "train"]
    assert labels(ds, "test") == (300, 339) and labels(ds, "train") == (809, 919)
    assert not ds.report, ds.report.warnings


def test_shared_nfcorpus():
    ds = load_dataset(shared("nfcorpus"))
    assert len(ds.docs) == 3633 and len(ds.queries) == 3237
    assert ds.splits == ["test", "dev", "train"]
    assert labels(ds, "test") == (323, 12334)
    assert labels(ds, "train") == (2590, 110575)
    assert labels(ds, "dev") == (324, 11385)
    assert {v for row in ds.qrels["train"].values() for v in row.values()} == {1}  # README
    assert not ds.report, ds.report.warnings


def test_shared_cranfield_skips_its_two_empty_documents():
    ds = load_dataset(shared("cranfield"))
    assert len(ds.docs) == 1400 - 2 and "471" not in ds.docs and "995" not in ds.docs
    assert len(ds.queries) == 225
    # 1,837 labels; the one on empty doc 995 (query 125) is dropped with a warning
    assert labels(ds, "test") == (225, 1836)
    assert "995" not in ds.qrels["test"]["125"]
    assert 0 in {v for row in ds.qrels["test"].values() for v in row.values()}  # 0s kept
    w = ds.report.warnings
    assert any("corpus.jsonl:471:" in x and "'471'" in x for x in w), w
    assert any("corpus.jsonl:995:" in x and "'995'" in x for x in w), w
    assert any("test.tsv" in x and "1 label points to documents skipped" in x for x in w), w
    assert len(w) == 3


def test_the_corpus_hash_is_the_sha256_of_each_documents_json_whatever_its_characters():
    """Documents are hashed as JSON arrays (id, title, text); the fast path that skips the encoder
    where nothing needs escaping gives the same bytes as json.dumps on every kind of text."""
    import hashlib
    import json

    from retrieval.data.dataset import Dataset, Document

    texts = ["plain words", 'a "quoted" word', "back\\slash", "two\nlines\tand a tab", "bell \x07 and \x1f",
             "delete \x7f", "café, 東京, emoji 🎉", "line\u2028separator", "nbsp\u00a0here", "zero\u200bwidth", ""]
    docs = {f"d{i}": Document(f"d{i}", f"title {i} \"q\"" if i % 3 == 0 else f"title {i}", t)
            for i, t in enumerate(texts)}
    ds = Dataset("tricky", docs)
    h = hashlib.sha256()
    for d in docs.values():
        h.update(json.dumps([d.id, d.title, d.text], ensure_ascii=False).encode())
    assert ds.corpus_hash == h.hexdigest()
    assert ds.content_hash != ds.corpus_hash and Dataset("tricky", docs).content_hash == ds.content_hash
