"""The one TREC writer (``retrieval.files.trec``): any run or qrels it writes reads back as the same
lists, scores and grades (Hypothesis over any id a reader accepts and any finite score), and what no
TREC file can hold is refused before a byte is written."""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from retrieval.data.readers import read_qrels, read_run
from retrieval.files.trec import write_qrels, write_trec
from retrieval.safe_names import id_problem, normal_id

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

HIDDEN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")  # what ids may not hold, mostly: filtered less
ids = st.text(st.characters(codec="utf-8", exclude_categories=HIDDEN), min_size=1, max_size=12) \
    .filter(lambda s: id_problem(s) is None).map(normal_id)
scores = st.floats(allow_nan=False, allow_infinity=False, width=64)


@SETTINGS
@given(run=st.dictionaries(ids, st.lists(st.tuples(ids, scores), min_size=1, max_size=6,
                                         unique_by=lambda h: h[0]), min_size=1, max_size=5))
def test_any_run_reads_back_as_the_same_lists(run, tmp_path):
    """In trec_eval's order, whatever order the lists held: score descending, then id descending."""
    ordered = {q: sorted(sorted(hits, key=lambda h: h[0].encode(), reverse=True), key=lambda h: -h[1])
               for q, hits in run.items()}
    path = write_trec(run, tmp_path / "any.trec", "tag")
    back = read_run(path).run
    assert {q: [d for d, _ in hits] for q, hits in back.items()} == {q: [d for d, _ in h] for q, h in ordered.items()}
    assert {q: [s for _, s in hits] for q, hits in back.items()} == {q: [s for _, s in h] for q, h in ordered.items()}


@SETTINGS
@given(qrels=st.dictionaries(ids, st.dictionaries(ids, st.integers(0, 3), min_size=1, max_size=5), min_size=1,
                             max_size=5), fmt=st.sampled_from(["trec", "beir"]))
def test_any_qrels_read_back_exactly(qrels, fmt, tmp_path):
    path = write_qrels(qrels, tmp_path / ("q.txt" if fmt == "trec" else "beir"), fmt=fmt, split="judged")
    assert read_qrels(path) == qrels


def test_scores_keep_every_digit_and_ties_keep_their_order(tmp_path):
    run = {"q": [("b", 0.1 + 0.2), ("a", 0.30000000000000004), ("c", 1e-300), ("d", -5e300)]}
    back = read_run(write_trec(run, tmp_path / "r.trec", "t")).run
    assert back["q"] == run["q"]  # 6 decimals made 0.1+0.2 and 1e-300 ties with their neighbours


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_a_score_no_run_file_can_hold_is_refused_and_nothing_written(score, tmp_path):
    with pytest.raises(ValueError, match="no run file can hold"):
        write_trec({"q": [("d", score)]}, tmp_path / "r.trec", "t")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("run,tag,problem", [
    ({"q 1": [("d", 1.0)]}, "t", "whitespace"),
    ({"q": [("d\u202e", 1.0)]}, "t", "U+202E"),
    ({"q": [("d\ufffe", 1.0)]}, "t", "U+FFFE"),
    ({"q": [("d\ud800", 1.0)]}, "t", "U+D800"),
    ({"": [("d", 1.0)]}, "t", "empty query id"),
    ({"q": [("d", 1.0)]}, "two words", "one word"),
    ({"q": [("d", 1.0)]}, "t\x1b[31m", "U+001B"),
])
def test_what_no_run_file_can_hold_is_refused_before_writing(run, tag, problem, tmp_path):
    with pytest.raises(ValueError, match=problem.replace("+", r"\+")):
        write_trec(run, tmp_path / "r.trec", tag)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    import os

    path = write_trec({"q": [("d", 1.0)]}, tmp_path / "r.trec", "old")
    before = path.read_bytes()

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        write_trec({"q": [("e", 2.0)]}, path, "new")
    monkeypatch.undo()
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["r.trec"]


@pytest.mark.parametrize("qid", ["{", "[", "{}", "[1]", "#", "Q0"])
def test_ids_that_look_like_another_format_read_back(qid, tmp_path):
    """A query id a JSON or header sniffer could take for something else is still read as TREC."""
    run = {qid: [("d1", 2.0), ("d2", 1.0)]}
    assert read_run(write_trec(run, tmp_path / "r.trec", "t")).run == run
    for fmt in ("trec", "beir"):
        qrels = {qid: {"d1": 1}}
        assert read_qrels(write_qrels(qrels, tmp_path / fmt / "q.txt" if fmt == "trec" else tmp_path / fmt,
                                      fmt=fmt, split="s")) == qrels


HEADER_WORDS = ("qid", "query-id", "query_id", "queryid", "query", "topic", "corpus-id", "docid", "score", "rel",
                "relevance", "label", "grade", "0", "Q0", "iter")
header_like_ids = st.one_of(st.sampled_from(HEADER_WORDS), ids)


@SETTINGS
@given(qrels=st.dictionaries(header_like_ids, st.dictionaries(header_like_ids, st.integers(-100, 100), min_size=1,
                                                              max_size=4), min_size=1, max_size=4),
       fmt=st.sampled_from(["trec", "beir"]))
@example(qrels={"qid": {"corpus-id": 2}}, fmt="trec")  # the hostile tester's row, first in its file
@example(qrels={"query-id": {"corpus-id": 0}, "score": {"query-id": 1}}, fmt="beir")
def test_any_qrels_with_ids_named_like_a_header_read_back_exactly(qrels, fmt, tmp_path):
    """Ids that are the words of a header (``qid``, ``query-id``, ``corpus-id``, ``score``), any grade a
    qrels file holds: every row the writer writes is read back, none taken for a header."""
    path = write_qrels(qrels, tmp_path / ("q.txt" if fmt == "trec" else "beir"), fmt=fmt, split="judged")
    assert read_qrels(path) == qrels


@pytest.mark.parametrize("fmt,qid,doc", [("trec", "qid", "corpus-id"), ("trec", "query-id", "corpus-id"),
                                         ("trec", "topic", "docid"), ("beir", "query-id", "corpus-id"),
                                         ("beir", "qid", "score")])
def test_a_label_whose_ids_are_header_words_is_not_dropped_as_a_header(fmt, qid, doc, tmp_path):
    """The hostile tester's row ``qid 0 corpus-id 2``: first in its file, it is a label (its grade is a
    number), not a header."""
    qrels = {qid: {doc: 2}, "zz": {"d": 0}}
    path = write_qrels(qrels, tmp_path / ("q.txt" if fmt == "trec" else "beir"), fmt=fmt, split="s")
    first = path.read_text().splitlines()[0 if fmt == "trec" else 1]
    assert first.split() == ([qid, "0", doc, "2"] if fmt == "trec" else [qid, doc, "2"])
    assert read_qrels(path) == qrels


@pytest.mark.parametrize("grade", [101, -101, 10**30, 1.5, True, "2", None, math.nan])
def test_a_grade_no_qrels_reader_takes_is_refused_before_writing(grade, tmp_path):
    """A grade the qrels reader would refuse (not an integer, beyond ±100) is never written."""
    for fmt in ("trec", "beir"):
        with pytest.raises(ValueError, match="a qrels file holds integers from -100 to 100"):
            write_qrels({"q": {"a": 1, "b": grade}}, tmp_path / fmt, fmt=fmt)
    assert list(tmp_path.iterdir()) == []
