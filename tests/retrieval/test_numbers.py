"""The one number grammar (``retrieval.numbers``): what it accepts is what C's ``strtod`` and
``strtoll`` read (trec_eval's own readers) and reads back from its own text; what Python reads and
they do not (``1_000``, ``+1``, other scripts' digits, ``nan``) is refused in one line saying why.

The C functions are the C library's own, called through ``ctypes``."""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval import numbers

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)
_LIBC.strtod.restype, _LIBC.strtod.argtypes = ctypes.c_double, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
_LIBC.strtoll.restype = ctypes.c_longlong
_LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]


def c_read(function, text: str, *base: int):
    """What a C function reads of ``text``, and whether it read all of it."""
    raw = ctypes.create_string_buffer(text.encode("ascii"))
    end = ctypes.c_char_p()
    value = function(raw, ctypes.byref(end), *base)
    return value, ctypes.cast(end, ctypes.c_void_p).value - ctypes.addressof(raw) == len(text)


def one_line(message: str) -> bool:
    return "\n" not in message and "\r" not in message


NUMBERS = st.from_regex(numbers.NUMBER, fullmatch=True).filter(lambda s: len(s) <= numbers.NUMBER_CHARS)
INTEGERS = st.from_regex(r"-?[0-9]{1,19}", fullmatch=True)
OTHER_DIGITS = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())


@settings(max_examples=500, deadline=None)
@given(NUMBERS)
@example("1e-05")
@example(".5")
@example("1.")
@example("-0.0")
@example("2.5E+3")
@example("4.9e-324")
def test_a_number_the_grammar_accepts_is_what_strtod_reads_and_reads_back_from_its_text(text):
    c_value, whole_text = c_read(_LIBC.strtod, text)
    assert whole_text
    try:
        x = numbers.number(text)
    except ValueError as err:  # only a value past a double's range
        assert not math.isfinite(c_value) and "range" in str(err)
        return
    assert x == c_value and math.copysign(1, x) == math.copysign(1, c_value)
    assert numbers.number(repr(x)) == x and numbers.is_number(repr(x))


@settings(max_examples=500, deadline=None)
@given(INTEGERS)
@example("-9223372036854775808")
@example("9223372036854775807")
@example("007")
def test_an_integer_the_grammar_accepts_is_what_strtoll_reads_and_reads_back_from_its_text(text):
    value = int(text)
    if not numbers.INT_MIN <= value <= numbers.INT_MAX:
        with pytest.raises(ValueError, match="beyond the integers kept"):
            numbers.integer(text)
        return
    c_value, whole_text = c_read(_LIBC.strtoll, text, 10)
    assert whole_text and numbers.integer(text) == c_value == numbers.whole(text)
    assert numbers.integer(str(c_value)) == c_value and numbers.is_integer(text)


@settings(max_examples=300, deadline=None)
@given(st.text("0123456789.-eE", max_size=6), OTHER_DIGITS, st.text("0123456789", max_size=6))
def test_a_number_with_another_scripts_digit_is_refused_naming_it(before, digit, after):
    text = before + digit + after
    for read in (numbers.integer, numbers.number, numbers.whole):
        with pytest.raises(ValueError) as err:
            read(text, "a grade")
        assert one_line(str(err.value)) and str(err.value).startswith("a grade ")
    if set(before) <= set("0123456789"):
        assert f"U+{ord(digit):04X} {unicodedata.name(digit)}" in str(err.value)


@settings(max_examples=300, deadline=None)
@given(INTEGERS.filter(lambda s: not s.startswith("-")), st.sampled_from(["+", "_"]), st.booleans())
def test_a_leading_plus_or_an_underscore_is_refused_though_python_reads_both(digits, mark, inside):
    text = digits[:1] + mark + digits[1:] + "0" if inside and mark == "_" else mark + digits
    for read in (numbers.integer, numbers.number, numbers.whole):
        with pytest.raises(ValueError, match=r"'\+'|'_'"):
            read(text)
    assert not numbers.is_integer(text) and not numbers.is_number(text)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=30), st.text("0123456789+-_.eEnaifty \t\u0661\uff11\u2003", max_size=12)))
def test_any_text_is_a_number_by_the_grammar_or_a_one_line_refusal(text):
    for read, grammar in ((numbers.integer, numbers.INTEGER), (numbers.number, numbers.NUMBER),
                          (numbers.whole, numbers.NUMBER)):
        try:
            read(text, "the depth")
        except ValueError as err:
            assert one_line(str(err)) and str(err).startswith("the depth ")
            continue
        assert grammar.fullmatch(text.strip(" \t\r\n\x0b\x0c"))


@pytest.mark.parametrize("text", ["1_000", "+1", "\u0661", "\uff11", "\u0967", " \u2003 7", "nan", "-inf", "Infinity",
                                  "1" * 5_000, "0x10", "1e999"])
def test_what_python_reads_and_the_grammar_refuses(text):
    """Python's ``float`` (and ``int`` for the first ones) reads each of these; the grammar does not."""
    with pytest.raises(ValueError) as err:
        numbers.number(text, "score")
    assert one_line(str(err.value)) and len(str(err.value)) < 200  # 5,000 digits are not echoed


@pytest.mark.parametrize("value, expected", [(2, 2), ("2", 2), ("2.0", 2), (2.0, 2), ("1e2", 100), (" -3 ", -3)])
def test_a_whole_number_may_be_written_as_an_integral_number(value, expected):
    assert numbers.whole(value) == expected


@pytest.mark.parametrize("value, problem", [(True, "bool"), (None, "NoneType"), (2.5, "not a whole number"),
                                            (math.nan, "not a finite number"), (10**30, "beyond the integers kept"),
                                            ("9" * 20, "at most 19 digits")])
def test_an_api_value_is_held_to_the_same_bounds(value, problem):
    with pytest.raises(ValueError, match=problem):
        numbers.whole(value, "the seed")


# ---- every reader and API value: numbers other tools read otherwise ------------------------------
OTHERWISE = ["1_0", "+1", "\u0661", "\uff11", "9" * 5_000]  # Python reads each (5,000 digits: with its own message)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("label", OTHERWISE)
@pytest.mark.parametrize("layout", ["beir", "trec"])
def test_a_qrels_label_other_tools_read_otherwise_is_refused_with_file_and_line(tmp_path, label, layout):
    from retrieval.data.readers import read_qrels
    from retrieval.errors import DataError

    body = f"q1\td1\t1\nq1\td2\t{label}\n" if layout == "beir" else f"q1 0 d1 1\nq1 0 d2 {label}\n"
    path = _write(tmp_path / "test.tsv", body)
    with pytest.raises(DataError) as err:
        read_qrels(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: relevance label ") and one_line(message) and len(message) < 300
    assert "'_'" in message or "'+'" in message or "U+" in message or "out of range" in message


@pytest.mark.parametrize("where", ["score", "rank"])
@pytest.mark.parametrize("value", OTHERWISE + ["nan", "1e999"])
def test_a_trec_run_number_other_tools_read_otherwise_is_refused_with_file_and_line(tmp_path, where, value):
    from retrieval.data.readers import read_run
    from retrieval.errors import DataError

    line = f"q1 Q0 d2 2 {value} mine\n" if where == "score" else f"q1 Q0 d2 {value} 1.0 mine\n"
    path = _write(tmp_path / "mine.run", "q1 Q0 d1 1 2.0 mine\n" + line)
    with pytest.raises(DataError) as err:
        read_run(path)
    assert str(err.value).startswith(f"{path}:2: {where} ") and one_line(str(err.value)) and len(str(err.value)) < 300


@pytest.mark.parametrize("score", ["9" * 5_000, "1" + "0" * 400, "1e999", "0." + "1" * 200])
def test_a_json_run_score_past_the_grammar_names_its_query_and_document(tmp_path, score):
    from retrieval.data.readers import read_run
    from retrieval.errors import DataError

    path = _write(tmp_path / "mine.json", '{"q1": {"d1": 1.5, "d2": ' + score + "}}")
    with pytest.raises(DataError) as err:
        read_run(path)
    assert str(err.value).startswith(f"{path}: query 'q1': the score of document 'd2' ") and len(str(err.value)) < 300


@pytest.mark.parametrize("field", ['"_id": %s, "text": "a"', '"_id": "d2", "text": "b", "year": %s'])
def test_a_corpus_integer_of_thousands_of_digits_is_refused_with_file_and_line(tmp_path, field):
    from retrieval.data.readers import load_dataset
    from retrieval.errors import DataError

    path = _write(tmp_path / "corpus.jsonl", '{"_id": "d1", "text": "a"}\n{' + field % ("9" * 5_000) + "}\n")
    with pytest.raises(DataError) as err:
        load_dataset(path)
    assert str(err.value).startswith(f"{path}:2: a JSON integer ") and "at most 19 digits" in str(err.value)
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("grade", ["+1", "\u0661", "\uff11", "1_0", "9" * 5_000, "nan"])
def test_a_judgments_file_grade_other_tools_read_otherwise_is_refused_with_file_and_line(tmp_path, toy_dataset, grade):
    from retrieval.data.readers import judgment_files
    from retrieval.errors import DataError

    path = _write(tmp_path / "sheet.csv", f"query_id,doc_id,grade,judge\nq1,d1,2,ann\nq1,d4,{grade},ann\n")
    with pytest.raises(DataError) as err:
        judgment_files.read(path, toy_dataset)
    assert str(err.value).startswith("sheet.csv:3: a grade is 0, 1 or 2") and len(str(err.value)) < 300
    assert [j.grade for j in judgment_files.read(_write(path, "query_id,doc_id,grade,judge\nq1,d1,2.0,ann\n"),
                                                 toy_dataset)] == [2]


def test_api_values_read_the_same_grammar():
    from retrieval.judging import sampling
    from retrieval.judging.grades import parse_grade
    from retrieval.judging.judgments import check_depth
    from training.trainer import TrainConfig

    for bad in OTHERWISE:
        for check in (parse_grade, check_depth, sampling.check_seed):
            with pytest.raises(ValueError) as err:
                check(bad)
            assert one_line(str(err.value)) and len(str(err.value)) < 200
        with pytest.raises(ValueError):
            TrainConfig.from_mapping({"epochs": bad})
    assert (parse_grade(" 2 "), parse_grade(2.0), check_depth("10"), sampling.check_seed("7.0")) == (2, 2, 10, 7)
    assert TrainConfig.from_mapping({"epochs": "3", "lr": "1e-05"}).epochs == 3


def test_a_queries_count_reads_the_grammar_and_counts_one_otherwise(toy_dataset):
    from dataclasses import replace

    from retrieval.judging import sampling

    counted = replace(toy_dataset, query_fields={"q1": {"count": "1,200"}, "q2": {"count": "1_200"},
                                                 "q3": {"count": "\u0661\u0662"}, "q4": {"count": "7"}})
    assert sampling.counts_of(counted) == {"q1": 1200.0, "q2": 1.0, "q3": 1.0, "q4": 7.0}


def test_the_judge_tab_refuses_a_sample_size_or_seed_other_tools_read_otherwise(tmp_path, toy_dataset, tiny_encoder):
    import gradio as gr

    from retrieval.store import Store
    from retrieval.workspace import Workspace
    from ui import judge

    store = Store(tmp_path / "judge.sqlite3")
    try:
        ws = Workspace(toy_dataset, store, model=tiny_encoder)
        for size, seed in (("\u0661\u0660", 0), ("1_0", 0), (2, "+5"), (2, "\uff15")):
            with pytest.raises(gr.Error):
                judge.judging_queue(ws, store, "ana", k=2, method="random", size=size, seed=seed)
        with pytest.raises(gr.Error, match="a grade is 0, 1 or 2"):
            judge.grade_pair(ws, store, "ana", "q1", "d4", "\u0662", k=2)
        assert store.judgments(toy_dataset.corpus_hash) == []
    finally:
        store.close()


@pytest.mark.parametrize("metric", ["ndcg@\u0661\u0660", "ndcg@\u00b2", "p@\uff15", "recall@+10",
                                    "ndcg@" + "1" * 5_000])
def test_a_metrics_cutoff_is_ascii_digits_as_every_number(metric):
    """``str.isdigit`` takes ``١٠`` (read as 10) and ``²`` (then ``int`` fails with Python's message)."""
    from retrieval.evaluation.measures import is_incomplete_metric
    from retrieval.evaluation.rank_metrics import parse
    from retrieval.tracking.snapshots import gate_metric

    assert parse(metric) is None and not is_incomplete_metric(metric)
    with pytest.raises(ValueError, match="is not a metric the check can compare on") as err:
        gate_metric(metric)
    assert len(str(err.value)) < 300
    assert parse("ndcg@10") == ("ndcg", 10) and numbers.is_count("10") and not numbers.is_count("\u0661\u0660")
