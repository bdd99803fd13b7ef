"""The one text boundary for names and ids (``retrieval.safe_names``) and the values at its edge.

Properties (Hypothesis, arbitrary Unicode, lone surrogates included): the checks raise nothing but a
ValueError in one line, an accepted name or id is NFC and passes again unchanged, the skeleton and the
terminal's escapes never fail. Then hostile cases at every entry point: judge names through the Judge
tab's handlers and the judgments import, query-set and imported-run names, ids in each reader format,
the judging seed, the training status id, Quepid's book layout, the qrels writer, the terminal.
"""
from __future__ import annotations

import html
import io
import json
import math
import os
import re
import unicodedata

import gradio as gr
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import safe_names as names
from retrieval.data.readers import judgment_files, load_dataset, load_files, read_qrels, read_run
from retrieval.data.readers.records import require_id
from retrieval.errors import DataError
from retrieval.files.terminal import SafeStream, terminal_safe
from retrieval.files.trec import write_qrels
from retrieval.judging.judgments import check_judge, store_judge
from retrieval.safe_names import check_name, check_new_name, confusable_with, id_problem, name_key, skeleton
from retrieval.store import Store

# any code point (lone surrogates included), and the ones a hostile name tries more often than chance would
HOSTILE_CHARS = ["\ufffe", "\uffff", "\ufdd0", "\ufdef", "\U0001fffe", "\U0010ffff", "\ud800", "\udfff", "\u202e",
                 "\u200b", "\x1b", "\x00", "\u0430", "\uff41", "\u0301", "\u00a0", "\u2028", "\n", "\r", " ", "a", "A",
                 "\u2800", "\u3164", "\u115f", "\ufe0f", "\u3000"]
ANY_TEXT = st.text(st.one_of(st.characters(codec=None, categories=None), st.sampled_from(HOSTILE_CHARS)), max_size=40)
LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def one_line(message: str) -> bool:
    return not any(c in message for c in LINE_BREAKS)


def refusal(err: Exception) -> str:
    """A refusal as the browser shows it (``ui.notify.refuse`` escapes it)."""
    return html.unescape(getattr(err, "message", None) or str(err))


# ---- properties ----------------------------------------------------------------------------------
@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=400, deadline=None)
@given(ANY_TEXT, st.booleans())
def test_check_name_accepts_nfc_or_refuses_in_one_line(raw, spaces):
    try:
        name = check_name(raw, "judge's name", spaces=spaces)
    except ValueError as err:
        assert one_line(str(err))
        return
    assert unicodedata.is_normalized("NFC", name) and name == name.strip() and 0 < len(name) <= names.NAME_LIMIT
    assert names.hidden_char(name) is None and check_name(name, "judge's name", spaces=spaces) == name
    name.encode("utf-8")  # no lone surrogate left: any file, page or terminal can hold it


def check_id(ident: str, what: str = "id") -> str:
    """An id as the readers keep it (``records.require_id``), outside any file."""
    return require_id(ident, what, None)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_ids_are_checked_and_normalized_without_surprises(raw):
    problem = id_problem(raw)
    try:
        ident = check_id(raw)
    except ValueError as err:
        assert one_line(str(err)) and (problem is not None or not raw)
        return
    assert problem is None and unicodedata.is_normalized("NFC", ident) and check_id(ident) == ident
    assert ident == unicodedata.normalize("NFC", raw)
    ident.encode("utf-8")


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=300, deadline=None)
@given(ANY_TEXT, st.lists(ANY_TEXT, max_size=4))
def test_check_new_name_never_fails_otherwise(raw, existing):
    try:
        name = check_new_name(raw, "snapshot name", existing)
    except ValueError as err:
        assert one_line(str(err))
        return
    assert name in existing or confusable_with(name, existing) is None


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_skeleton_is_total_and_stable(raw):
    once = skeleton(raw)
    assert skeleton(once) == once and unicodedata.is_normalized("NFD", once)
    assert name_key(raw) == name_key(unicodedata.normalize("NFKC", raw).casefold())


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_what_a_terminal_or_a_display_name_gets_is_always_printable(raw):
    terminal_safe(raw).encode("utf-8")
    shown = names.display_name(raw)
    assert check_name(shown, "data set name") == shown


# ---- names: what is refused, what is normalized --------------------------------------------------
@pytest.mark.parametrize("bad, code", [
    ("judge\ufffe", "U+FFFE"), ("judge\uffff", "U+FFFF"), ("\ufdd0judge", "U+FDD0"), ("ju\ufdefdge", "U+FDEF"),
    ("judge\U0001fffe", "U+1FFFE"), ("judge\U0010ffff", "U+10FFFF"), ("judge\ud800", "U+D800"),
    ("\udfffjudge", "U+DFFF"), ("ju\udc80dge", "U+DC80"), ("judge\u202e", "U+202E"), ("ju\x1b[31mdge", "U+001B"),
    ("ju\u200bdge", "U+200B"),
])
def test_a_name_holding_a_noncharacter_surrogate_or_control_is_refused_naming_it(bad, code):
    with pytest.raises(ValueError) as err:
        check_name(bad, "judge's name")
    assert code in str(err.value) and one_line(str(err.value)) and str(err.value).startswith("a judge's name")
    with pytest.raises(ValueError, match=code.replace("+", r"\+")):
        check_id(bad.replace(" ", ""), "document id")


def test_names_are_normalized_to_nfc():
    assert check_name("Cafe\u0301 team", "judge's name") == "Caf\u00e9 team"
    assert check_id("e\u0301") == "\u00e9" and names.normal_id("abc") == "abc"


@pytest.mark.parametrize("new, old", [
    ("\u0430lice", "alice"),  # Cyrillic а
    ("\uff41\uff4c\uff49\uff43\uff45", "alice"),  # fullwidth
    ("Alice", "alice"), ("ALICE", "alice"),  # case
    ("a1ice", "alice"),  # 1 looks like l
    ("bum", "burn"),  # m looks like rn
    ("\U0001d41a\U0001d425\U0001d422\U0001d41c\U0001d41e", "alice"),  # mathematical bold
    ("p\u0430yp\u0430l", "paypal"),
    ("\u0391lice", "alice"),  # Greek capital alpha
    ("ali\u0441e", "alice"),  # Cyrillic с
])
def test_a_new_name_that_looks_like_an_existing_one_is_refused_showing_both(new, old):
    with pytest.raises(ValueError) as err:
        check_new_name(new, "judge's name", ["bob", old])
    message = str(err.value)
    assert repr(old) in message and "looks like the existing" in message and one_line(message)
    assert "U+" in message and "use that name or a clearly different one" in message
    assert confusable_with(new, [old]) == old


@pytest.mark.parametrize("new, existing", [("alice", ["alice", "bob"]), ("carol", ["alice"]), ("alice2", ["alice"]),
                                           ("Caf\u00e9", ["Cafe\u0301"])])
def test_the_same_name_again_or_a_clearly_different_one_passes(new, existing):
    assert check_new_name(new, "judge's name", existing) == unicodedata.normalize("NFC", new)


# ---- what a person sees: blanks, fillers, runs of spaces -----------------------------------------
BLANKS = ["\u2800", "\u3164", "\u115f", "\u1160", "\uffa0", "\U0001d159", "\U00016fe4", "\u034f", "\ufe0f",
          "\U000e0100", "\u17b4", "\u180b"]


@pytest.mark.parametrize("blank", BLANKS)
def test_a_name_or_id_holding_a_character_that_shows_as_nothing_is_refused_naming_it(blank):
    code = f"U+{ord(blank):04X}"
    for where in ("release-1" + blank, blank + "ann", "re" + blank + "lease"):
        with pytest.raises(ValueError) as err:
            check_name(where, "snapshot name")
        assert code in str(err.value) and "shows as nothing" in str(err.value) and one_line(str(err.value))
        assert code in id_problem(where)
        with pytest.raises(ValueError, match=code.replace("+", r"\+")):
            check_id(where, "document id")


@pytest.mark.parametrize("bad, says", [
    ("\u3164", "U+3164"), ("\u115f\u1160", "U+115F"), ("\u0301", "only combining marks"),
    (" \u0301\u0302 ", "only combining marks"), ("release  1", "two spaces in a row"),
    ("release\u00a01", "U+00A0"), ("release\u30001", "U+3000"), ("release\u20031", "U+2003"),
    ("ann \u2009 x", "U+2009"),
])
def test_a_name_that_shows_as_nothing_or_as_another_spacing_is_refused(bad, says):
    with pytest.raises(ValueError) as err:
        check_name(bad, "judge's name")
    assert says in str(err.value) and one_line(str(err.value))


def test_a_name_keeps_single_spaces_and_marks_on_letters():
    assert check_name("release 1", "snapshot name") == "release 1"
    assert check_name(" Ana Lu\u0301cia ", "judge's name") == "Ana Lúcia"
    assert id_problem("d\u0301") is None and id_problem("\u0301") is not None


@pytest.mark.parametrize("kept, typed", [("release-1", "release-1\u2800"), ("ann", "ann\u115f"),
                                         ("ann", "\u3164ann"), ("release 1", "release  1"),
                                         ("release 1", "release\u30001"), ("release 1", "release\u28001"),
                                         ("ann", "ann\ufe0f"), ("ann", "ann\U0001d159")])
def test_names_that_differ_by_a_blank_or_spacing_share_one_lookalike_key(kept, typed):
    """What the boundary refuses is folded by ``name_key`` too: a name kept before the rule, or one
    that some other path lets through, still collides with the name a person sees."""
    assert name_key(kept) == name_key(typed)
    assert confusable_with(typed, ["bob", kept]) == kept and confusable_with(kept, [typed]) == typed
    assert names.NameIndex(["bob", typed]).conflict(kept) == typed


def test_a_display_name_drops_blanks_and_never_shows_nothing():
    assert names.display_name("release\u28001.csv") == "release 1.csv"
    assert names.display_name("ann\u115f\u200b  x") == "ann x"
    assert names.display_name("\u3164") == "dataset" and names.display_name("\u0301\u0302", "queries") == "queries"


def test_a_judge_named_with_a_filler_is_refused_everywhere_a_judge_is_named(judging, tmp_path):
    from ui import judge

    ws, store = judging
    corpus = ws.dataset.corpus_hash
    store.put_judgment(corpus, "q1", "cat on a mat", "d1", 2, "ann")
    with pytest.raises(ValueError, match=r"U\+115F"):
        store_judge(store, corpus, "ann\u115f")
    with pytest.raises(gr.Error) as err:
        judge.judging_queue(ws, store, "\u3164", k=2)  # a name of only a filler
    assert "U+3164" in refusal(err.value)
    sheet = _sheet(tmp_path, "query_id,doc_id,grade,judge\nq1,d4,1,bob\nq1,d4,1,ann\u115f\n", "sheet.csv")
    with pytest.raises(DataError) as err:
        judgment_files.read(sheet, ws.dataset, existing=store.judges(corpus))
    assert str(err.value).startswith("sheet.csv:3:") and "U+115F" in str(err.value)
    assert store.judges(corpus) == ["ann"]


def test_a_snapshot_or_query_set_named_release_1_with_a_blank_is_not_a_second_release_1(tmp_path, toy_dataset):
    from retrieval.data import query_sets
    from retrieval.tracking import snapshots

    store = Store(tmp_path / "blank.sqlite3")
    try:
        with pytest.raises(ValueError, match=r"U\+2800"):
            snapshots.admit(store, toy_dataset.corpus_hash, "release-1\u2800")
        assert query_sets.keep(store, toy_dataset, toy_dataset.with_queries({"q9": "a ninth"}), "release-1")
        ten = toy_dataset.with_queries({"q10": "a tenth"})
        for blank in ("\u2800", "\u3164", "\u200b\ufe0f"):  # a set's name is a file's: its blanks dropped, not refused
            assert query_sets.keep(store, toy_dataset, ten, "release-1" + blank)
        names = [qs["name"] for qs in query_sets.listed(store, toy_dataset.corpus_hash)]
        assert "release-1" in names and all(n.isascii() and n.isprintable() for n in names)  # no blank kept
        assert len({name_key(n) for n in names}) == len(names)  # none looks like another: "release-1-2" if two
    finally:
        store.close()


@pytest.mark.parametrize("make, where", [
    (lambda d: _text(d / "test.tsv", "q1\td1\t1\nq1\td\u2800\t1\n"), "test.tsv:2"),
    (lambda d: _text(d / "test.qrels", "q1 0 d1 1\nq\u3164 0 d1 1\n"), "test.qrels:2"),
])
def test_a_qrels_id_with_a_blank_is_refused_with_file_and_line(tmp_path, make, where):
    path = make(tmp_path)
    with pytest.raises(DataError) as err:
        read_qrels(path)
    assert str(err.value).startswith(str(tmp_path / where)) and "shows as nothing" in str(err.value)


def test_a_run_id_with_a_blank_is_refused_with_file_and_line(tmp_path):
    path = _text(tmp_path / "mine.run", "q1 Q0 d1 1 2.0 mine\nq1 Q0 d1\u2800 2 1.0 mine\n")
    with pytest.raises(DataError) as err:
        read_run(path)
    assert str(err.value).startswith(f"{path}:2:") and "U+2800" in str(err.value) and one_line(str(err.value))


def test_two_ids_that_differ_by_a_filler_never_load_as_two(tmp_path):
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "a"}, {"_id": "d1\u3164", "text": "b"}])
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: .*U\+3164"):
        load_dataset(corpus)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT, st.lists(ANY_TEXT, max_size=6))
def test_a_name_index_answers_as_the_list_does(name, existing):
    assert names.NameIndex(existing).conflict(name) == confusable_with(name, existing)


def test_judge_names_are_held_against_a_map_in_linear_time(tmp_path, toy_dataset, monkeypatch):
    """A judgments file naming n judges computes about n look-alike keys, not one per pair of names
    (8,000 judges took a minute of CPU when each new name was compared with every earlier one)."""
    calls = []
    real = names.name_key
    monkeypatch.setattr(names, "name_key", lambda name: calls.append(name) or real(name))
    n = 3_000
    rows = "".join(f"q1,d1,1,judge{i:05d}\n" for i in range(n))
    found = judgment_files.read(_sheet(tmp_path, "query_id,doc_id,grade,judge\n" + rows), toy_dataset,
                                existing=[f"kept{i}" for i in range(500)])
    assert len({j.judge for j in found}) == n
    assert len(calls) <= 2 * (n + 500), len(calls)  # n + m keys; the pairwise check made n × (n + m) / 2


# ---- ids in each reader format -------------------------------------------------------------------
def _text(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")  # "\ud800" as JSON writes it
    return path


@pytest.mark.parametrize("make, where, code", [
    (lambda d: _jsonl(d / "corpus.jsonl", [{"_id": "ok", "text": "a"}, {"_id": "d\ud800", "text": "b"}]),
     "corpus.jsonl:2", "U+D800"),
    (lambda d: _jsonl(d / "corpus.jsonl", [{"_id": "ok", "text": "a"}, {"_id": "d2", "title": "\udcff", "text": "b"}]),
     "corpus.jsonl:2", "U+DCFF"),
    (lambda d: _jsonl(d / "corpus.jsonl", [{"_id": "ok", "text": "a \udc00 b"}]), "corpus.jsonl:1", "U+DC00"),
    (lambda d: _jsonl(d / "corpus.jsonl", [{"_id": "ok\ufffe", "text": "a"}]), "corpus.jsonl:1", "U+FFFE"),
    (lambda d: _text(d / "corpus.tsv", "id\ttext\nd1\ta\nd\uffff\tb\n"), "corpus.tsv:3", "U+FFFF"),
    (lambda d: _text(d / "corpus.csv", "id,text\n\ufdd0,a\n"), "corpus.csv:2", "U+FDD0"),
])
def test_an_id_or_text_no_file_can_hold_fails_at_load_with_file_and_line(tmp_path, make, where, code):
    path = make(tmp_path)
    with pytest.raises(DataError) as err:
        load_dataset(path)
    assert str(err.value).startswith(str(tmp_path / where)) and code in str(err.value) and one_line(str(err.value))


@pytest.mark.parametrize("queries, where, code", [
    ([{"_id": "q\ud800", "text": "cat"}], "queries.jsonl:1", "U+D800"),
    ([{"_id": "q1", "text": "cat \ud83d"}], "queries.jsonl:1", "U+D83D"),
    ([{"_id": "q1", "text": "cat", "market": "\udfff"}], "queries.jsonl:1", "U+DFFF"),
])
def test_queries_holding_a_lone_surrogate_are_refused_with_file_and_line(tmp_path, queries, where, code):
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "a cat"}])
    with pytest.raises(DataError) as err:
        load_files(corpus, _jsonl(tmp_path / "queries.jsonl", queries))
    assert str(err.value).startswith(str(tmp_path / where)) and code in str(err.value)


@pytest.mark.parametrize("lines, code", [("q1\td1\t1\nq1\td\ufffe\t1", "U+FFFE"),
                                         ("q1 0 d1 1\nq\uffff 0 d1 1", "U+FFFF"),
                                         ("q1\td1\t1\nq1\t\U0002fffe\t1", "U+2FFFE")])
def test_qrels_ids_pass_the_same_boundary(tmp_path, lines, code):
    path = _text(tmp_path / "test.tsv", lines + "\n")
    with pytest.raises(DataError) as err:
        read_qrels(path)
    assert str(err.value).startswith(f"{path}:2") and code in str(err.value)


def _toy_files(tmp_path, doc_id="d\u00e9", query_id="q1"):
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": doc_id, "text": "a cat"}, {"_id": "d2", "text": "a dog"}])
    queries = _jsonl(tmp_path / "queries.jsonl", [{"_id": query_id, "text": "cat"}])
    return corpus, queries


@pytest.mark.parametrize("body, code", [
    ("q1 Q0 d\ufffe 1 2.0 run\n", "U+FFFE"), ("q1 Q0 d2 1 2.0 r\U0010fffe\n", "U+10FFFE"),
    (json.dumps({"q1": {"d\ud800": 1.0}}), "U+D800"), (json.dumps({"q\udbff": {"d2": 1.0}}), "U+DBFF"),
])
def test_run_ids_pass_the_same_boundary(tmp_path, body, code):
    path = tmp_path / "mine.run"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_run(path)
    assert str(err.value).startswith(str(path)) and code in str(err.value) and one_line(str(err.value))


def test_an_id_written_decomposed_matches_the_corpus_in_every_file(tmp_path):
    """Ids are normalized to NFC wherever they enter, so a run, a qrels file or a judgments file that
    writes ``é`` as ``e`` + U+0301 (as macOS writes file names) still meets the corpus's ``é``."""
    corpus, queries = _toy_files(tmp_path)
    qrels = tmp_path / "test.tsv"
    qrels.write_text("q1\tde\u0301\t2\n", encoding="utf-8")
    ds = load_files(corpus, queries, [qrels])
    assert ds.qrels == {"test": {"q1": {"d\u00e9": 2}}}
    run = tmp_path / "mine.run"
    run.write_text("q1 Q0 de\u0301 1 2.0 mine\nq1 Q0 d2 2 1.0 mine\n", encoding="utf-8")
    assert [d for d, _ in read_run(run, ds).run["q1"]] == ["d\u00e9", "d2"]
    sheet = tmp_path / "judged.csv"
    sheet.write_text("query_id,doc_id,grade,judge\nq1,de\u0301,1,ann\n", encoding="utf-8")
    assert [j.doc_id for j in judgment_files.read(sheet, ds)] == ["d\u00e9"]


def test_two_ids_that_differ_only_by_normalization_are_one_duplicate_id(tmp_path):
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": "d\u00e9", "text": "a"}, {"_id": "de\u0301", "text": "b"}])
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: duplicate document id .* \(first on line 1\)"):
        load_dataset(corpus)


@pytest.mark.skipif(os.name != "posix", reason="a file name that is not UTF-8 needs a POSIX file system")
def test_a_txt_file_name_that_is_not_utf8_is_refused_naming_it(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "fine.txt").write_text("a cat", encoding="utf-8")
    with open(os.path.join(os.fsencode(folder), b"bad\xff.txt"), "w") as f:
        f.write("a dog")
    with pytest.raises(DataError) as err:
        load_dataset(folder)
    assert "U+DCFF" in str(err.value) and "rename the file" in str(err.value)
    terminal_safe(str(err.value)).encode("utf-8")


def test_the_cli_names_the_file_and_line_never_a_codec(tmp_path, capsys):
    from retrieval.cli import main

    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "a"}, {"_id": "\ud800", "text": "b"}])
    assert main(["judges", str(corpus), "--store", str(tmp_path / "s.sqlite3")]) == 2
    err = capsys.readouterr().err
    assert "corpus.jsonl:2:" in err and "U+D800" in err and "codec" not in err and "Traceback" not in err


# ---- qrels writer and terminal -------------------------------------------------------------------
@pytest.mark.parametrize("qrels, kwargs, problem", [
    ({"q\ud800": {"d1": 1}}, {}, "U+D800"), ({"q1": {"d\ufffe": 1}}, {}, "U+FFFE"),
    ({"q1": {"d 1": 1}}, {}, "whitespace"), ({"q1": {"d1": 1}}, {"fmt": "beir", "split": "../../x"}, "split name"),
    ({"q1": {"d1": 1}}, {"fmt": "beir", "split": ".hidden"}, "split name"),
])
def test_write_qrels_refuses_what_no_qrels_file_can_hold_before_writing(tmp_path, qrels, kwargs, problem):
    target = tmp_path / "out" / "x.qrels"
    with pytest.raises(ValueError, match=re.escape(problem)):
        write_qrels(qrels, target, **kwargs)
    assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()


def test_write_qrels_writes_ids_as_they_are_kept(tmp_path):
    path = write_qrels({"q1": {"de\u0301": 2, "d2": 0}}, tmp_path / "x.qrels")
    assert path.read_text(encoding="utf-8") == "q1 0 d2 0\nq1 0 d\u00e9 2\n"


def test_the_terminal_prints_lone_surrogates_and_noncharacters_as_escapes():
    assert terminal_safe("run\ud800\ufffe\n") == "run\\ud800\\ufffe\n"
    out = io.StringIO()
    SafeStream(out).write("judge \udcff\r")
    assert out.getvalue() == "judge \\udcff\r"


# ---- the judging seed and the training status ----------------------------------------------------
@pytest.fixture
def judging(tmp_path, toy_dataset, tiny_encoder):
    from retrieval.workspace import Workspace

    store = Store(tmp_path / "judge.sqlite3")
    yield Workspace(toy_dataset, store, model=tiny_encoder), store
    store.close()


@pytest.mark.parametrize("seed", [2**63, 2**64 + 5, -1, math.nan, math.inf, 1.5, "x", 10**400])
def test_a_seed_out_of_range_is_one_line_naming_the_range(judging, seed):
    from ui import judge

    ws, store = judging
    with pytest.raises(gr.Error) as err:
        judge.judging_queue(ws, store, "ana", k=2, method="random", size=2, seed=seed)
    message = refusal(err.value)
    assert "from 0 to 9,223,372,036,854,775,807" in message and one_line(message)
    with pytest.raises(gr.Error, match="seed"):
        judge.settled_note(ws, store, 2, "random", 2, seed)


def test_the_largest_seed_is_accepted(judging):
    from retrieval.judging import sampling

    ws, store = judging
    assert sampling.check_seed(2**63 - 1) == 2**63 - 1 and sampling.check_seed("7") == 7
    sample = sampling.sample_for(store, ws.dataset, "random", 2, 2**63 - 1)
    assert sample.seed == 2**63 - 1 and len(sample.query_ids) == 2


@pytest.mark.parametrize("job_id, shown", [("x" * 1_000_000, "is not a training job's id"),
                                           ("../../etc/passwd", "is not a training job's id"),
                                           ("20260101-120000-abcdef", "no training job"),
                                           (None, "NoneType is not")])
def test_training_status_never_echoes_a_long_id(tmp_path, job_id, shown):
    from training.job import JobQueue
    from ui import train

    store = Store(tmp_path / "jobs.sqlite3")
    try:
        with pytest.raises(gr.Error) as err:
            train.job_status(JobQueue(store), job_id)
    finally:
        store.close()
    message = refusal(err.value)
    assert shown in message and len(message) < 200 and one_line(message)


def test_a_submitted_jobs_id_has_the_shape_the_status_endpoint_accepts():
    import time
    import uuid

    from ui import train

    made = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]  # training.job.JobQueue.submit
    assert train.JOB_ID.fullmatch(made)
    import inspect

    from training.job import JobQueue
    assert 'time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]' in inspect.getsource(JobQueue.submit)


# ---- judge names in the Judge tab ----------------------------------------------------------------
@pytest.mark.parametrize("lookalike", ["\u0430na", "ANA", "\uff41\uff4e\uff41", "An\u0430"])
def test_the_judge_queue_refuses_a_name_like_a_judge_the_corpus_has(judging, lookalike):
    from ui import judge

    ws, store = judging
    store.put_judgment(ws.dataset.corpus_hash, "q1", "cat on a mat", "d1", 2, "ana")
    with pytest.raises(gr.Error) as err:
        judge.judging_queue(ws, store, lookalike, k=2)
    message = refusal(err.value)
    assert "looks like the existing 'ana'" in message and one_line(message)
    with pytest.raises(gr.Error, match="looks like the existing"):  # /judge stores nothing for it
        judge.grade_pair(ws, store, lookalike, "q1", "d4", 1, k=2)
    assert {r["judge"] for r in store.judgments(ws.dataset.corpus_hash)} == {"ana"}


def test_a_judge_goes_on_under_their_own_name_and_it_is_checked_once(judging):
    ws, store = judging
    corpus = ws.dataset.corpus_hash
    store.put_judgment(corpus, "q1", "cat on a mat", "d1", 2, "ana")
    assert store_judge(store, corpus, "ana") == "ana" and store_judge(store, corpus, "bob") == "bob"
    assert store.judges(corpus) == ["ana"]
    with pytest.raises(ValueError, match="looks like the existing 'ana'"):
        store_judge(store, corpus, "Ana")
    assert check_judge("Ana") == "Ana"  # without the corpus's judges: only the name's own rules


# ---- the judgments import: Quepid's book layout and its duplicates --------------------------------
def _sheet(tmp_path, text, name="book.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text, expected", [
    ("rank,query,docid,Ann\n1,cat on a mat,d1,2\n", "unknown column 'rank' (column 1)"),
    ("query,docid,title,Ann\ncat on a mat,d1,Cats,2\n", "unknown column 'title' (column 3)"),
    ("query,docid,Ann,notes\ncat on a mat,d1,2,\n", "unknown column 'notes' (column 4)"),
    ("query,docid,Ann,Ann\ncat on a mat,d1,2,1\n", "names one column twice: 'Ann' (column 3) and 'Ann' (column 4)"),
    ("query_id,doc_id,grade,Grade\nq1,d1,2,1\n", "names one column twice: 'grade' (column 3) and 'Grade'"),
    ("query,docid,query\ncat on a mat,d1,cat on a mat\n", "names one column twice"),
    ("query,docid,alice,\u0430lice\ncat on a mat,d1,2,1\n", "looks like the existing 'alice'"),
    ("query,docid,Ann,\ncat on a mat,d1,2,1\n", "book.csv:2: a value in column 4, which the header names no judge"),
    ("query,docid,\x1bAnn\ncat on a mat,d1,2\n", "U+001B"),
    ("query,docid,Ann\ufffe\ncat on a mat,d1,2\n", "U+FFFE"),
])
def test_the_book_layout_reads_judges_only(tmp_path, toy_dataset, text, expected):
    with pytest.raises(DataError) as err:
        judgment_files.read(_sheet(tmp_path, text), toy_dataset)
    assert expected in str(err.value) and one_line(str(err.value))


def test_a_pair_graded_twice_differently_is_refused_naming_both_lines(tmp_path, toy_dataset):
    text = "query_id,doc_id,grade,judge\nq1,d1,2,ann\nq1,d4,0,ann\nq1,d1,1,ann\n"
    with pytest.raises(DataError) as err:
        judgment_files.read(_sheet(tmp_path, text, "sheet.csv"), toy_dataset)
    assert str(err.value).startswith("sheet.csv:4:") and "2 on line 2 and 1 on line 4" in str(err.value)
    book = "query,docid,Ann,Bob\ncat on a mat,d1,2,1\ncat on a mat,d1,2,0\n"
    with pytest.raises(DataError, match="'Bob' grades .* 1 on line 2 and 0 on line 3"):
        judgment_files.read(_sheet(tmp_path, book), toy_dataset)


def test_a_row_repeated_exactly_is_read_once_and_counted(tmp_path, toy_dataset):
    text = "query_id,doc_id,grade,judge\nq1,d1,2,ann\nq1,d1,2,ann\nq1,d4,0,ann\nq1,d1,2,ann\n"
    found = judgment_files.read(_sheet(tmp_path, text, "sheet.csv"), toy_dataset)
    assert [(j.doc_id, j.line) for j in found] == [("d1", 2), ("d4", 4)] and found.duplicates == 2


def test_quepids_book_layout_still_reads_a_column_per_judge(tmp_path, toy_dataset):
    book = "query,docid,Ann,Bob\ncat on a mat,d1,2,\nwhy did stocks fall,d3,,1\n"
    found = judgment_files.read(_sheet(tmp_path, book), toy_dataset)
    assert [(j.query_id, j.doc_id, j.judge, j.grade) for j in found] == [("q1", "d1", "Ann", 2), ("q2", "d3", "Bob", 1)]


@pytest.mark.parametrize("text", ["query_id,doc_id,grade,judge\nq1,d1,2,\u0430nn\n",
                                  "query,docid,ANN\ncat on a mat,d1,2\n"])
def test_an_imported_judge_like_one_the_corpus_has_is_refused(tmp_path, toy_dataset, text):
    with pytest.raises(DataError, match="looks like the existing 'ann'"):
        judgment_files.read(_sheet(tmp_path, text), toy_dataset, existing=["ann"])
    assert len(judgment_files.read(_sheet(tmp_path, text), toy_dataset, existing=["bob"])) == 1


def test_the_judge_tab_import_holds_new_judges_against_the_stored_ones(judging, tmp_path):
    from ui import judge

    ws, store = judging
    store.put_judgment(ws.dataset.corpus_hash, "q1", "cat on a mat", "d1", 2, "ann")
    sheet = _sheet(tmp_path, "query_id,doc_id,grade,judge\nq1,d4,1,\u0430nn\n", "sheet.csv")
    with pytest.raises(gr.Error, match="looks like the existing"):
        judge.import_judgments(ws, store, str(sheet))
    assert len(store.judgments(ws.dataset.corpus_hash)) == 1


# ---- query-set and imported-run names ------------------------------------------------------------
def test_a_query_set_named_like_another_is_refused(tmp_path, toy_dataset):
    from retrieval.data import query_sets

    store = Store(tmp_path / "sets.sqlite3")
    try:
        one = toy_dataset.with_queries({"q9": "a ninth query"})
        assert query_sets.keep(store, toy_dataset, one, "queries.csv")
        two = toy_dataset.with_queries({"q10": "a tenth query"})
        with pytest.raises(ValueError, match="looks like the existing 'queries.csv'"):
            query_sets.keep(store, toy_dataset, two, "Queries.csv")
        with pytest.raises(ValueError, match="looks like the existing 'queries.csv'"):
            query_sets.keep(store, toy_dataset, two, "queri\u0435s.csv")  # Cyrillic е
        assert query_sets.keep(store, toy_dataset, two, "queries.csv")  # the same name: made free, not refused
        assert query_sets.keep(store, toy_dataset, toy_dataset.with_queries({"q11": "x"}), "log\ud800.txt")
        assert {qs["name"] for qs in query_sets.listed(store, toy_dataset.corpus_hash)} == \
            {"queries.csv", "queries.csv-2", "log.txt"}
    finally:
        store.close()


@pytest.mark.parametrize("name, like", [("BM25", "bm25"), ("bm\uff125", "bm25"), ("D\u0435nse", "dense"),
                                        ("mine", "mine"), ("M\u0456ne", "mine")])
def test_an_imported_run_named_like_a_system_is_refused(tmp_path, toy_dataset, name, like):
    from retrieval.workspace import Workspace

    ws = Workspace(toy_dataset, None, model="unused")
    path = tmp_path / "mine.run"
    path.write_text("q1 Q0 d1 1 2.0 mine\nq2 Q0 d3 1 1.0 mine\n", encoding="utf-8")
    ws.add_run(read_run(path, toy_dataset))
    with pytest.raises(ValueError) as err:
        ws.add_run(read_run(path, toy_dataset, name))
    assert repr(like) in str(err.value) and one_line(str(err.value))
