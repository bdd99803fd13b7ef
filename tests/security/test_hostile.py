"""Hostile input, as a stranger on a shared server would send it: every case asserts the one-line
message a user gets, and that nothing was lost (what was loaded stays loaded, nothing is stored,
no file lands outside its folder, no code runs, no other session notices).

Real components throughout: the readers on real files, a real SQLite store, the tiny BERT, the
registry and handlers the app's events call, Milvus specs parsed as the engines read them, and
the app launched for real and driven by two ``gradio_client`` sessions at the end. The browser
half (payloads rendered in Chromium) is ``tests/security/test_hostile_browser.py``.
"""
from __future__ import annotations

import html
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers import load_dataset, load_uploads, read_run
from retrieval.errors import DataError
from retrieval.files.terminal import SafeStream, terminal_safe
from retrieval.safe_names import NAME_LIMIT, check_name, display_name, file_name, id_problem
from retrieval.store import Store, StoreError
from tests.conftest import DEMO, ROOT

# characters no id may hold: controls, a C1 control, bidi overrides and isolates, zero-width ones
HIDDEN = {
    "nul": "\x00", "escape": "\x1b", "delete": "\x7f", "csi (C1)": "\x9b", "right-to-left override": "\u202e",
    "left-to-right isolate": "\u2066", "zero-width space": "\u200b", "zero-width joiner": "\u200d",
    "byte-order mark": "\ufeff", "soft hyphen": "\u00ad",
}
# what a hostile name looks like: markup, a Markdown image and link, an autolink, a path
PAYLOADS = ['<img/src="http://evil.invalid/i.png"/onerror=alert(document.domain)>',
            "![x](http://evil.invalid/m.png)", "[click](javascript:alert(1))", "http://evil.invalid/auto",
            "`code` **b** $$x$$", "/../../../x"]


def shown(message: object) -> str:
    """A message as the browser shows it (the escaping undone)."""
    return html.unescape(str(message))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def beir(folder: Path, docs: dict[str, tuple[str, str]], queries: dict[str, str] | None = None,
         qrels: dict[str, list[tuple[str, str, int]]] | None = None) -> Path:
    """A BEIR folder of ``docs`` (id -> (title, text)), ``queries`` and ``qrels`` (split -> rows)."""
    write(folder / "corpus.jsonl", "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                           for i, (t, x) in docs.items()))
    if queries:
        write(folder / "queries.jsonl", "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    for split, rows in (qrels or {}).items():
        write(folder / "qrels" / f"{split}.tsv",
              "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows))
    return folder


def cli(capsys, *argv) -> SimpleNamespace:
    """``python -m retrieval *argv`` run in this process (``retrieval.cli.main``, which the script calls and
    whose code it exits with): its exit code and what it printed, as ``subprocess.run`` would give them.
    What is checked here is what the command says and writes, not the process around it (the command
    line's own tests start real processes)."""
    from retrieval.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)


# ---- readers: ids that are not ids -----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_a_document_id_with_a_hidden_character_is_refused_with_its_line(name, tmp_path):
    bad = f"d{HIDDEN[name]}2"
    corpus = write(tmp_path / "corpus.jsonl", json.dumps({"_id": "d1", "text": "fine"}) + "\n"
                   + json.dumps({"_id": bad, "text": "hidden"}) + "\n")
    with pytest.raises(DataError) as err:
        load_dataset(corpus)
    message = str(err.value)
    assert message.startswith(f"{corpus}:2: ") and "\n" not in message
    assert f"U+{ord(HIDDEN[name]):04X}" in message or "whitespace" in message


@pytest.mark.parametrize("where", ["queries.jsonl", "qrels", "csv corpus"])
def test_a_right_to_left_override_is_refused_in_queries_labels_and_tables(where, tmp_path):
    rlo = "q\u202e1"
    docs = {"d1": ("T", "text one"), "d2": ("U", "text two")}
    if where == "queries.jsonl":
        folder = beir(tmp_path / "ds", docs, {rlo: "a query"})
        line, file = 1, "queries.jsonl"
    elif where == "qrels":
        folder = beir(tmp_path / "ds", docs, {"q1": "a query"}, {"test": [("q1", "d1", 1), (rlo, "d2", 1)]})
        line, file = 3, "test.tsv"
    else:
        folder = write(tmp_path / "docs.csv", f"id,title,text\nd1,T,one\n{rlo},U,two\n")
        line, file = 3, "docs.csv"
    with pytest.raises(DataError) as err:
        load_dataset(folder)
    assert f"{file}:{line}: " in str(err.value) and "U+202E" in str(err.value)


def test_labels_far_out_of_range_are_refused(tmp_path):
    folder = beir(tmp_path / "ds", {"d1": ("T", "one")}, {"q1": "query"}, {"test": [("q1", "d1", int("9" * 400))]})
    with pytest.raises(DataError, match=r"test\.tsv:2: relevance label '9{20}… \(400 characters\)' is out of range"):
        load_dataset(folder)


def test_a_split_named_with_a_hidden_character_is_refused(tmp_path):
    folder = beir(tmp_path / "ds", {"d1": ("T", "one")}, {"q1": "query"}, {"te\u200bst": [("q1", "d1", 1)]})
    with pytest.raises(DataError, match="split name .* cannot hold U\\+200B"):
        load_dataset(folder)


def test_a_data_set_name_from_a_file_name_is_cleaned_and_capped(tmp_path):
    corpus = write(tmp_path / ("n\x1bame" + "x" * 200 + ".jsonl"), json.dumps({"_id": "d1", "text": "one"}) + "\n")
    ds = load_dataset(corpus)
    assert "\x1b" not in ds.name and len(ds.name) == NAME_LIMIT and ds.name.endswith("…")


def test_upload_errors_name_the_users_file_not_the_servers_folder(tmp_path):
    hidden_folder = tmp_path / "gradio" / "0123456789abcdef"
    bad = write(hidden_folder / "corpus.jsonl", '{"_id": "a", "text": "fine"}\n{"_id": "b", "text": broken\n')
    with pytest.raises(DataError) as err:
        load_uploads([str(bad)])
    assert str(err.value).startswith("corpus.jsonl:2: ") and str(hidden_folder) not in str(err.value)


# ---- run files ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def first_pairs(demo, n=3):
    qids = list(demo.qrels["test"])[:n]
    return [(q, next(iter(demo.qrels["test"][q]))) for q in qids]


@pytest.mark.parametrize("field", ["qid", "docid", "tag"])
@pytest.mark.parametrize("char", ["\x00", "\x1b", "\u202e", "\u200b"])
def test_a_trec_run_with_a_hidden_character_is_refused_with_its_line(field, char, demo, tmp_path):
    (q, d), (q2, d2) = first_pairs(demo, 2)
    values = {"qid": q2, "docid": d2, "tag": "prod"}
    values[field] = values[field] + char
    path = write(tmp_path / "r.trec", f"{q} Q0 {d} 1 2.0 prod\n{values['qid']} Q0 {values['docid']} 1 1.0 "
                                      f"{values['tag']}\n")
    with pytest.raises(DataError) as err:
        read_run(path, demo)
    assert str(err.value).startswith(f"{path}:2: ") and f"U+{ord(char):04X}" in str(err.value)


@pytest.mark.parametrize("score,problem", [
    ("9" * 400, "(400 characters) is not a number (a number has at most 100 characters)"),
    ("1e400", "'1e400' is not a finite number (past a double's range"),
    ("NaN", "is nan, not a finite number"),
    ('"2.5"', "is a string, not a number"),
    ("true", "is a boolean, not a number"),
    ("null", "is null, not a number"),
])
def test_a_json_run_score_that_is_not_a_finite_number_is_refused(score, problem, demo, tmp_path):
    (q, d), = first_pairs(demo, 1)
    path = write(tmp_path / "r.json", f'{{"{q}": {{"{d}": {score}}}}}')
    with pytest.raises(DataError) as err:
        read_run(path, demo)
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("score", ["1e400", "-1e400", "nan", "inf", "abc"])
def test_a_trec_run_score_that_is_not_a_finite_number_is_refused(score, demo, tmp_path):
    (q, d), = first_pairs(demo, 1)
    path = write(tmp_path / "r.trec", f"{q} Q0 {d} 1 {score} prod\n")
    with pytest.raises(DataError, match=r"r\.trec:1: score .* not a (finite )?number"):
        read_run(path, demo)


def test_a_query_listed_twice_in_a_json_run_is_refused(demo, tmp_path):
    (q, d), (_, d2) = first_pairs(demo, 2)
    path = write(tmp_path / "r.json", f'{{"{q}": {{"{d}": 1.0}}, "{q}": {{"{d2}": 2.0}}}}')
    with pytest.raises(DataError, match=f"query '{q}' is listed twice in the JSON object"):
        read_run(path, demo)


@pytest.mark.parametrize("name,problem", [
    ("two words", "must be one word"),
    ("x" * 10_000, f"at most {NAME_LIMIT} characters, not 10,000"),
    ("prod\x1b[31m", "cannot hold U+001B"),
    ("pro\u202ed", "cannot hold U+202E"),
    ("bm25", "a built-in system has that name"),
])
def test_a_run_name_that_cannot_be_a_name_is_refused(name, problem, demo, tmp_path):
    (q, d), = first_pairs(demo, 1)
    path = write(tmp_path / "r.trec", f"{q} Q0 {d} 1 1.0 prod\n")
    from retrieval.workspace import Workspace

    with pytest.raises(ValueError, match=problem.replace("+", r"\+").replace("(", r"\(")):
        Workspace(demo).add_run(read_run(path, demo, name))


def test_a_ten_thousand_character_tag_is_refused_as_a_name(demo, tmp_path):
    (q, d), = first_pairs(demo, 1)
    path = write(tmp_path / "r.trec", f"{q} Q0 {d} 1 1.0 {'t' * 10_000}\n")
    with pytest.raises(ValueError, match=r"run name \(by default its TREC tag or file name\) has at most 100"):
        read_run(path, demo)


def test_a_run_of_only_some_queries_searches_the_others_without_error(demo, tmp_path, tiny_encoder):
    """A run that lacks a labelled query: that query is searched and scored 0 for the run."""
    from retrieval.side_by_side import side_by_side
    from retrieval.workspace import Workspace

    (q, d), (q2, _) = first_pairs(demo, 2)
    ws = Workspace(demo, model=tiny_encoder)
    ws.add_run(read_run(write(tmp_path / "r.trec", f"{q} Q0 {d} 1 1.0 partial\n"), demo))
    res = side_by_side(ws, query_id=q2, systems=("bm25", "partial"))
    assert res.systems["partial"] == [] and res.per_query_metrics["partial"]["ndcg@10"] == 0.0
    assert res.per_query_metrics["bm25"]["ndcg@10"] >= 0.0
    assert ws.evaluate("partial", "test").per_query["ndcg@10"][q2] == 0.0


# ---- names that cannot become paths ------------------------------------------------------------
HOSTILE_NAMES = ["../../../etc/passwd", "/etc/passwd", "..\\..\\windows\\system32", "a/b\\c", "x\x00y", "..",
                 ".", "", "x" * 10_000, "<img src=x>", "CON", "\u202egnp.exe", "名前"]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=[repr(n[:20]) for n in HOSTILE_NAMES])
def test_file_names_from_user_names_stay_in_their_folder(name, tmp_path):
    made = file_name("dataset", name, suffix=".trec")
    assert "/" not in made and "\\" not in made and "\x00" not in made and ".." not in made
    assert len(made) <= 80 and made.endswith(".trec") and not made.startswith(".")
    target = (tmp_path / made).resolve()
    assert target.parent == tmp_path.resolve()
    target.write_text("x")  # the OS takes it
    assert file_name("dataset", name + "!", suffix=".trec") != made  # a different name, a different file


def test_cli_run_dir_files_stay_in_the_folder_whatever_the_tag(demo, tmp_path, capsys):
    (q, d), = first_pairs(demo, 1)
    run = write(tmp_path / "r.trec", f"{q} Q0 {d} 1 1.0 /../../../x\n")
    out = tmp_path / "deep" / "runs"
    proc = cli(capsys, "evaluate", DEMO, "--systems", "bm25", "--run", run, "--run-dir", out, "--no-store")
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in out.iterdir())
    assert len(written) == 2 and all(n.endswith(".trec") for n in written)
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob("x*"))
    assert sorted(p for p in tmp_path.rglob("*.trec")) == sorted([run, *(out / n for n in written)])


# ---- names ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,problem", [
    ("", "cannot be empty"), ("   ", "cannot be empty"), ("j" * 101, "at most 100 characters"),
    ("ann\x00", "U+0000"), ("ann\u202e", "U+202E"), ("ann\u2028x", "U+2028"), (42, "must be text"),
])
def test_judge_names_are_checked(value, problem):
    from retrieval.judging.judgments import check_judge

    with pytest.raises(ValueError, match=problem.replace("+", r"\+")):
        check_judge(value)


def test_id_problem_accepts_plain_and_foreign_ids():
    for ident in ("d1", "MED-10", "doc/1#a", "文書-1", "ü-ß", "<x>"):
        assert id_problem(ident) is None
    assert "whitespace" in id_problem("a b") and "U+200B" in id_problem("a\u200bb")
    assert display_name("\u202e\x1b  report ") == "report" and display_name("\x00") == "dataset"
    assert check_name("  alice ", "judge's name") == "alice"


# ---- judging -------------------------------------------------------------------------------------
@pytest.fixture
def judged_store(tmp_path):
    store = Store(tmp_path / "store.sqlite3")
    yield store
    store.close()


@pytest.mark.parametrize("grade", [3, -1, 1.5, "text", "", None, True, 10**400, float("nan"), "2.5"])
def test_a_grade_outside_0_1_2_is_refused_and_nothing_stored(grade, judged_store, toy_dataset, tiny_encoder):
    import gradio as gr

    from retrieval.workspace import Workspace
    from ui.judge import grade_pair

    ws = Workspace(toy_dataset, judged_store, model=tiny_encoder)
    with pytest.raises(gr.Error) as err:
        grade_pair(ws, judged_store, "ann", "q1", "d1", grade)
    assert "a grade is 0, 1 or 2" in shown(err.value.message)
    assert judged_store.judgments(toy_dataset.corpus_hash) == []


@pytest.mark.parametrize("grade,stored", [(2, 2), ("1", 1), (0.0, 0), (" 2 ", 2)])
def test_integral_grades_are_taken(grade, stored, judged_store, toy_dataset, tiny_encoder):
    from retrieval.workspace import Workspace
    from ui.judge import grade_pair

    ws = Workspace(toy_dataset, judged_store, model=tiny_encoder)
    grade_pair(ws, judged_store, "ann", "q1", "d1", grade)
    assert [r["grade"] for r in judged_store.judgments(toy_dataset.corpus_hash)] == [stored]


@pytest.mark.parametrize("judge,depth,problem", [
    ("ann\x1b", 10, "U+001B"), ("x" * 500, 10, "at most 100"), ("ann", 0, "pool depth"), ("ann", 10**9, "pool depth"),
    ("ann", 2.5, "pool depth"),
])
def test_judging_refuses_bad_names_and_depths(judge, depth, problem, judged_store, toy_dataset, tiny_encoder):
    import gradio as gr

    from retrieval.workspace import Workspace
    from ui.judge import grade_pair, judging_queue

    ws = Workspace(toy_dataset, judged_store, model=tiny_encoder)
    for call in (lambda: judging_queue(ws, judged_store, judge, depth),
                 lambda: grade_pair(ws, judged_store, judge, "q1", "d1", 1, depth)):
        with pytest.raises(gr.Error) as err:
            call()
        assert problem in shown(err.value.message)
    assert judged_store.judgments(toy_dataset.corpus_hash) == []


@pytest.mark.parametrize("qid,doc", [("nope", "d1"), ("q1", "nope"), ("q1\x00", "d1"), (["q1"], "d1")])
def test_judging_a_pair_outside_the_data_set_is_refused(qid, doc, judged_store, toy_dataset, tiny_encoder):
    import gradio as gr

    from retrieval.workspace import Workspace
    from ui.judge import grade_pair

    ws = Workspace(toy_dataset, judged_store, model=tiny_encoder)
    with pytest.raises(gr.Error, match="in this data set"):
        grade_pair(ws, judged_store, "ann", qid, doc, 1)
    assert judged_store.judgments(toy_dataset.corpus_hash) == []


def test_the_store_refuses_a_float_grade_itself(judged_store):
    with pytest.raises(ValueError, match="a grade is one of 0, 1, 2"):
        judged_store.put_judgment("c", "q", "text", "d", 1.5, "ann")
    assert judged_store.judgments("c") == []


# ---- store paths ---------------------------------------------------------------------------------
def test_a_store_path_that_is_a_folder_is_one_line(tmp_path):
    with pytest.raises(StoreError, match="is a folder: name the cache file itself"):
        Store(tmp_path)


def test_a_store_file_that_is_not_sqlite_is_one_line_and_left_alone(tmp_path):
    bad = write(tmp_path / "notes.sqlite3", "these are my notes\n" * 100)
    with pytest.raises(StoreError, match="file is not a database"):
        Store(bad)
    assert bad.read_text() == "these are my notes\n" * 100


def test_a_store_under_a_file_is_one_line(tmp_path):
    f = write(tmp_path / "afile", "x")
    with pytest.raises(StoreError, match="is a file, not a folder"):
        Store(f / "store.sqlite3")


@pytest.fixture
def read_only_store(tmp_path):
    """A store on a file system mounted read-only after the store was made (what a read-only file
    is to a user without write access, and to root too). Skipped where mounting is not allowed."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a file system here (not root, or no mount in this sandbox)")
    try:
        Store(mount / "store.sqlite3").close()
        assert subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True).returncode == 0
        yield mount / "store.sqlite3"
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_a_read_only_store_is_one_line(read_only_store):
    before = read_only_store.read_bytes()
    with pytest.raises(StoreError) as err:
        Store(read_only_store)
    assert "it is read-only" in str(err.value) and "\n" not in str(err.value)
    assert read_only_store.read_bytes() == before


def test_the_cli_says_a_bad_store_in_one_line(tmp_path, capsys):
    proc = cli(capsys, "search", DEMO, "x", "--store", tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: the store ")


# ---- Milvus specs --------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,problem", [
    ("milvusx:a.db", "unknown engine"), ("MILVUS:a.db", "unknown engine"), ("milvus+http://h:1", "unknown engine"),
    ("milvus:a.txt", "ending in .db"), ("milvus:.db", "ending in .db"),
    ("milvus:/no/such/folder/a.db", "does not exist"),
    ("milvus://", "HOST:PORT"), ("milvus://h:99999", "HOST:PORT"), ("milvus://h:1/path", "HOST:PORT"),
    ("milvus://bad host:1", "HOST:PORT"), ("milvus+https://", "HOST:PORT"),
])
def test_engine_specs_are_read_strictly(spec, problem):
    from retrieval.index.engines import open_engine

    with pytest.raises(ValueError, match=problem):
        open_engine(spec)


def test_a_token_is_never_sent_over_plain_milvus(monkeypatch):
    from retrieval.index.engines import parse_milvus

    monkeypatch.setenv("RANKSCOPE_MILVUS_TOKEN", "root:secret")
    with pytest.raises(ValueError, match="would send it unencrypted: use milvus\\+https://h:19530"):
        parse_milvus("milvus://h:19530")
    assert parse_milvus("milvus://h:19530", allow_insecure_token=True).token == "root:secret"
    assert parse_milvus("milvus+https://h:19530").uri == "https://h:19530"
    monkeypatch.delenv("RANKSCOPE_MILVUS_TOKEN")
    assert parse_milvus("milvus://h:19530").token == ""


def test_drop_never_creates_a_milvus_lite_file(tmp_path, capsys):
    target = tmp_path / "absent.db"
    proc = cli(capsys, "drop", DEMO, "--engine", f"milvus:{target}")
    assert proc.returncode == 2 and "nothing to drop" in proc.stderr and not target.exists()
    assert not list(tmp_path.iterdir())


# ---- terminal output -----------------------------------------------------------------------------
def test_terminal_escapes_are_shown_not_obeyed():
    raw = "tag\x1b[2J\x1b]0;pwned\x07 \u202eevil\u200b\x9b31m\nnext\tcol"
    safe = terminal_safe(raw)
    assert safe == "tag\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil\\u200b\\x9b31m\nnext\tcol"

    class Sink:
        written = ""

        def write(self, text):
            Sink.written += text
            return len(text)

    SafeStream(Sink()).write("\r  reading (50%)\x1b[31m")
    assert Sink.written == "\r  reading (50%)\\x1b[31m"


def test_the_cli_prints_a_file_names_escape_codes_visibly(tmp_path, capsys):
    run = write(tmp_path / "evil\x1b[2J.trec", "q1 Q0 d1 1 1.0 prod\n")
    proc = cli(capsys, "evaluate", DEMO, "--systems", "bm25", "--run", run, "--no-store")
    assert "\x1b" not in proc.stdout + proc.stderr and "\\x1b[2J" in proc.stderr


# ---- model loading -------------------------------------------------------------------------------
def planted_model(base: Path, folder: Path, marker: Path, module_type: str = "evil.Evil") -> Path:
    """``base`` (a saved sentence-transformer) with our poly-attention file, an ``evil.py`` that
    writes ``marker`` when imported, and a modules.json listing ``module_type`` between the
    Transformer and the Pooling module: the attack of the issue that asked for this suite."""
    from retrieval.index.encoder import POLY_FILE

    shutil.copytree(base, folder)
    shutil.copy(ROOT / "retrieval" / "index" / "poly_attention.py", folder / POLY_FILE)
    write(folder / "evil.py", f"open({str(marker)!r}, 'w').write('ran')\nclass Evil:\n    pass\n")
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(1, {"idx": 1, "name": "1b", "path": "", "type": module_type})
    modules.append({"idx": 9, "name": "9", "path": "", "type": "poly_attention.PolyAttention"})
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder


@pytest.mark.parametrize("module_type", ["evil.Evil", "os.system", "subprocess.Popen", "sentence_transformersX.Evil"])
def test_a_model_folder_naming_foreign_code_is_refused_before_anything_runs(module_type, tiny_model_dir, tmp_path):
    from retrieval.errors import EncoderLoadError
    from retrieval.index.encoder import load_encoder

    marker = tmp_path / "ran"
    folder = planted_model(tiny_model_dir, tmp_path / "model", marker, module_type)
    with pytest.raises(EncoderLoadError) as err:
        load_encoder(str(folder), device="cpu", precision="fp32")
    assert module_type in str(err.value) and "never runs a model's own code" in str(err.value)
    assert "\n" not in str(err.value) and not marker.exists()


def test_a_models_own_transformers_code_is_never_trusted(tiny_model_dir, tmp_path):
    """An ``auto_map`` in the Transformer's config.json (Hugging Face remote code): refused, not run."""
    from retrieval.errors import EncoderLoadError
    from retrieval.index.encoder import load_encoder

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    marker = tmp_path / "ran"
    config_dir = next(p.parent for p in folder.rglob("config.json") if "bert" in p.read_text())
    write(config_dir / "modeling_evil.py", f"open({str(marker)!r}, 'w').write('ran')\n")
    config = json.loads((config_dir / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel", "AutoConfig": "modeling_evil.EvilConfig"}
    (config_dir / "config.json").write_text(json.dumps(config))
    try:
        load_encoder(str(folder), device="cpu", precision="fp32")
    except EncoderLoadError:
        pass  # refusing is fine; running it is not
    assert not marker.exists()


@pytest.fixture
def policy(tmp_path, tiny_model_dir):
    from retrieval.sharing.model_policy import ModelPolicy

    models = tmp_path / "store" / "models"
    shutil.copytree(tiny_model_dir, models / "20260101-000000-abcdef")
    allowed = tmp_path / "allowed-model"
    shutil.copytree(tiny_model_dir, allowed)
    return ModelPolicy.create(None, models, [str(allowed), "org/allowed-id"]), models, allowed


@pytest.mark.parametrize("choice", ["/etc", "/no/such/folder", "../../", "sentence-transformers/all-mpnet-base-v2",
                                    "x\x00y", "~", "x" * 5000])
def test_the_model_policy_refuses_anything_not_offered_in_the_same_words(choice, policy):
    from retrieval.sharing.model_policy import ModelRefused

    p, _, _ = policy
    with pytest.raises(ModelRefused) as err:
        p.check(choice)
    message = str(err.value)
    assert "is not one this server offers" in message and "exist" not in message and "\n" not in message
    generic = message.replace(repr(choice if len(choice) <= 120 else choice[:120] + "…"), "X")
    with pytest.raises(ModelRefused) as other:
        p.check("/definitely/absent")
    assert generic == str(other.value).replace(repr("/definitely/absent"), "X")  # exists or not: one line


def test_the_model_policy_offers_the_base_bundled_trained_and_allowed(policy, tmp_path):
    from retrieval.sharing.model_policy import ModelPolicy, ModelRefused

    p, models, allowed = policy
    trained = models / "20260101-000000-abcdef"
    for choice in ("", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", str(trained),
                   str(models / "20260101-000000-abcdef" / ".." / "20260101-000000-abcdef"), str(allowed),
                   "org/allowed-id"):
        p.check(choice)
    (models / "escape").symlink_to(allowed.parent)  # a link out of models/ leads nowhere offered
    with pytest.raises(ModelRefused):
        p.check(str(models / "escape" / "allowed-model" / ".." / "store"))
    with pytest.raises(ModelRefused):
        p.check(str(models))  # the folder itself is not a model
    assert ModelPolicy.create(None, models, trust_clients=True).check("/anything") == "/anything"


def test_on_spaces_clients_are_never_trusted(monkeypatch, tmp_path):
    from retrieval.sharing.model_policy import ModelPolicy, ModelRefused

    monkeypatch.setenv("SPACE_ID", "someone/rankscope")
    p = ModelPolicy.create(None, tmp_path, trust_clients=True)
    assert not p.trust_clients
    with pytest.raises(ModelRefused):
        p.check("/anything")


# ---- escaping: every HTML we build ---------------------------------------------------------------
class Elements(HTMLParser):
    """The tags and attributes an HTML string really holds (what a browser would build)."""

    def __init__(self, markup: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def assert_inert(markup: str) -> None:
    """No payload became markup: no img, no script, no link, no event handler, no evil URL."""
    for tag, attrs in Elements(markup).tags:
        assert tag not in ("img", "script", "iframe", "svg", "object", "embed"), (tag, attrs)
        assert tag != "a" or (attrs.get("href") or "").startswith("#"), attrs  # our own in-page anchors only
        assert not any(k.startswith("on") for k in attrs), attrs
        assert not any("evil.invalid" in (v or "") or "javascript:" in (v or "") for v in attrs.values()), attrs
    assert "](" not in markup and "http://" not in markup and "$$" not in markup  # no Markdown link, autolink, LaTeX


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_encoder):
    """A data set whose every id, title, text, query, split and name carries a payload, with an
    imported run named by one, over the tiny encoder."""
    from retrieval.data.readers.runs import ImportedRun, run_hash
    from retrieval.workspace import Workspace

    ids = [f"d{i}<img/src=x/onerror=alert({i})>" for i in range(6)]
    docs = {d: Document(d, f"{PAYLOADS[i % len(PAYLOADS)]} title", f"{PAYLOADS[(i + 1) % len(PAYLOADS)]} cat text {i}")
            for i, d in enumerate(ids)}
    queries = {f"q{i}<b>": f"cat {PAYLOADS[i]}" for i in range(3)}
    qrels = {"te<i>st": {q: {ids[i]: 2, ids[i + 1]: 0} for i, q in enumerate(queries)}}
    ds = Dataset(PAYLOADS[0] + " data", docs, queries, qrels)
    ws = Workspace(ds, model=tiny_encoder)
    run = {q: [(ids[i], 2.0), (ids[5], 1.0)] for i, q in enumerate(queries)}
    ws.add_run(ImportedRun('<img/src="http://evil.invalid/t.png"/onerror=alert(1)>', run, "r.trec", run_hash(run),
                           dataset=ds.content_hash))
    return ws


def test_the_search_columns_escape_every_payload(hostile):
    from retrieval.side_by_side import side_by_side
    from ui.present.search import side_by_side_html

    systems = ("bm25", "dense", *hostile.imported)
    for qid in hostile.dataset.queries:
        res = side_by_side(hostile, query_id=qid, systems=systems)
        markup = side_by_side_html(res, hostile.tokenizer)
        assert_inert(markup)
        assert "evil.invalid/t.png" in html.unescape(markup)  # the run's name is shown, as text


def test_the_failure_cards_and_the_report_escape_every_payload(hostile):
    from retrieval.evaluation.failure_gallery import failure_gallery
    from ui.present.figures import counts_figure
    from ui.present.report import card_html, gallery_fragment, gallery_html

    run_name = next(iter(hostile.imported))
    gallery = failure_gallery(hostile, "te<i>st", pair=("bm25", run_name))
    assert_inert(gallery_fragment(gallery))
    assert all(assert_inert(card_html(c, gallery.pair)) is None for cards in gallery.cards.values() for c in cards)
    report = gallery_html(gallery, counts=False)
    head, body = report.split("<body>", 1)
    assert_inert(body)
    assert_plot_inert(counts_figure(gallery))  # plotly labels: escaped too


def test_a_best_passage_with_a_script_and_quotes_comes_out_inert_in_search_and_the_report(tiny_encoder):
    """A document whose one passage (so its best) carries a script, quotes and an image, searched by a
    query that carries them too: the dense hit's words and passage, the hybrid's split and the failure
    card's explanation show them as text."""
    from retrieval.evaluation.failure_gallery import FailureCard
    from retrieval.side_by_side import side_by_side
    from retrieval.systems import builtin
    from retrieval.systems.base import Probe
    from retrieval.systems.dense_why import explain_dense
    from retrieval.workspace import Workspace
    from ui.present.report import card_html
    from ui.present.search import side_by_side_html

    passage = """<script>alert("x")</script> the cat's "purr" <img src=x onerror='alert(1)'>"""
    docs = {"d<1>": Document("d<1>", "", passage), "d2": Document("d2", "", "Dogs bark at the cat."),
            "d3": Document("d3", "", "Fish swim.")}
    query = """cat "purr" <script>"""
    ws = Workspace(Dataset("x", docs, {"q": query}, {}), model=tiny_encoder)
    res = side_by_side(ws, query, k=3, systems=("dense", "hybrid"))
    markup = side_by_side_html(res, ws.tokenizer)
    assert_inert(markup)
    assert "<script>" not in markup and html.unescape(markup).count(passage) >= 2  # the passage, as text, twice
    assert '<span class="why-word" title="the score without it: ' in markup and "&#60;script&#62;" in markup
    row = ws.doc_row["d<1>"]
    probe = Probe(ws, query, ws.depth)
    card = FailureCard("semantic_false_positive", "q", query, "d<1>", "", passage, None, {"dense": 1}, "dense 1", 1,
                       [], [], [], {}, 0.5, dense_why=explain_dense(ws, query, [row])[row],
                       hybrid_why=builtin("hybrid").explain_score(ws, probe, [row], None)[row])
    report = card_html(card)
    assert_inert(report)
    assert "<script>" not in report and passage in html.unescape(report) and "Hybrid " in report


def test_the_judge_panel_escapes_every_payload(hostile, tmp_path):
    from ui.judge import judging_queue, show

    store = Store(tmp_path / "s.sqlite3")
    q = judging_queue(hostile, store, "<b>judge</b>", 10)
    for position in range(len(q)):
        progress, markup, _ = show(hostile, q, position, reveal=True)
        assert_inert(markup)
    store.close()


def test_status_lines_and_notices_escape_every_payload(hostile):
    import gradio as gr

    from ui.common import metrics_caption
    from ui.data import dataset_summary, failed
    from ui.notify import refuse

    for markdown in (dataset_summary(hostile), metrics_caption(hostile, "te<i>st"),
                     failed("k", "Could not load", DataError(PAYLOADS[1], PAYLOADS[0] + ".jsonl", 3), "kept").status):
        assert_inert(markdown)
    error = refuse(f"no such file {PAYLOADS[0]} {PAYLOADS[1]}")
    assert isinstance(error, gr.Error)
    assert_inert(error.message)
    assert shown(error.message) == f"no such file {PAYLOADS[0]} {PAYLOADS[1]}"


def plot_strings(obj):
    """Every string of a figure's data and layout (plotly's template left out)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if key != "template":
                yield from plot_strings(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from plot_strings(value)
    elif hasattr(obj, "tolist"):
        yield from plot_strings(obj.tolist())


def assert_plot_inert(figure) -> None:
    """No payload of the ``hostile`` data set reached a plotly label as markup plotly would draw."""
    strings = list(plot_strings(figure.to_plotly_json()))
    assert strings
    for s in strings:
        assert not any(bad in s for bad in ("<img", "<i>", "q0<b>", "q1<b>", "q2<b>", "<a ")), s


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_figures_escape_every_payload(hostile):
    from retrieval.evaluation.metric_tables import recall_at_ks, versus
    from retrieval.evaluation.projection import project, sample_points
    from ui.present.embeddings import projection_figure
    from ui.present.figures import per_query_scatter, recall_curves

    curves = recall_curves(recall_at_ks(hostile, "te<i>st", ("bm25", *hostile.imported)), "te<i>st")
    scatter = per_query_scatter(*versus(hostile, "te<i>st"), "BM25", "<b>x</b>", query_text=hostile.dataset.queries)
    for figure in (curves, scatter):
        assert_plot_inert(figure)
    assert any("evil.invalid/t.png" in html.unescape(s) for s in plot_strings(curves.to_plotly_json()))
    sample = sample_points(hostile, "te<i>st", n_queries=3, hard_per_query=1, easy_per_query=1)
    assert_plot_inert(projection_figure(project(hostile, sample), sample, "<img src=x>"))


# ---- sessions ----------------------------------------------------------------------------------
@pytest.fixture
def registry(tmp_path, tiny_model_dir):
    from ui.registry import Registry

    store = Store(tmp_path / "store.sqlite3")
    yield Registry(store, str(tiny_model_dir))
    store.close()


def small_corpus(folder: Path, n: int) -> Path:
    return write(folder / f"corpus{n}.jsonl", "".join(json.dumps({"_id": f"d{i}", "text": f"text {n} {i}"}) + "\n"
                                                      for i in range(20)))


def test_a_session_importing_and_loading_never_closes_anothers_workspace(registry, tmp_path):
    from ui import data, search
    from ui.registry import Limits

    registry.limits = Limits(workspaces=6, session_workspaces=3, runs=3)
    bob = data.load_demo(registry, session="bob").key
    registry.hold("bob", bob)
    alice = bob
    q, d = next((q, next(iter(docs))) for q, docs in registry.get(bob).dataset.qrels["test"].items())
    refused = 0
    for i in range(20):
        run = write(tmp_path / f"run{i}.trec", f"{q} Q0 {d} 1 1.0 r{i}\n")
        loaded = data.import_run(registry, alice, str(run), session="alice")
        if loaded.ok:
            registry.hold("alice", loaded.key)
            alice = loaded.key
        else:
            refused += 1
            assert "the most one session may have side by side" in shown(loaded.status)
        if i % 5 == 4:  # and loads of other corpora, then the demo again, between imports
            for loaded in (data.load_files(registry, alice, [str(small_corpus(tmp_path, i))], session="alice"),
                           data.load_demo(registry, session="alice", key=alice)):
                assert loaded.ok
                registry.hold("alice", loaded.key, fresh=True)
                alice = loaded.key
        _, result = search.search(registry.get(bob), "leaky faucet")  # bob's page goes on as if alone
        assert result["systems"]["bm25"]
    assert refused > 0 and registry.get(alice) and registry.get(bob)  # the limit was reached, and said
    assert len(registry._items) <= 6


def test_the_runs_one_workspace_holds_are_limited(registry, tmp_path):
    from ui import data
    from ui.registry import Limits

    registry.limits = Limits(runs=2)
    key = data.load_demo(registry, session="s").key
    q, d = next((q, next(iter(docs))) for q, docs in registry.get(key).dataset.qrels["test"].items())
    for i in range(3):
        loaded = data.import_run(registry, key, str(write(tmp_path / f"r{i}.trec", f"{q} Q0 {d} 1 1.0 r{i}\n")),
                                 session="s")
        if i < 2:
            assert loaded.ok
            key = loaded.key
    assert not loaded.ok and loaded.key == key
    assert "2 imported runs, the most one session may have" in shown(loaded.status)
    assert set(registry.get(key).imported) == {"r0", "r1"}


def test_query_sets_added_by_one_session_are_limited(registry):
    from ui import data
    from ui.registry import Limits

    registry.limits = Limits(query_sets=2)
    key = data.load_demo(registry, session="s").key
    registry.hold("s", key, fresh=True)
    for i in range(3):
        loaded = data.add_queries(registry, key, None, f"new query number {i}", session="s")
        if loaded.ok:
            key = loaded.key
            registry.hold("s", key)
    assert not loaded.ok and "2 query sets were added to this data set" in shown(loaded.status)
    assert len(registry.get(key).dataset.queries) == len(load_dataset(DEMO).queries) + 2
    loaded = data.load_demo(registry, session="s")
    registry.hold("s", loaded.key, fresh=True)  # a fresh load starts the count again
    assert data.add_queries(registry, loaded.key, None, "one more", session="s").ok


def test_typed_queries_are_bounded(registry):
    from ui import data

    key = data.load_demo(registry).key
    for text, problem in (("x" * 10_001, "typed query on line 1 has 10,001 characters"),
                          ("\n".join(f"q {i}" for i in range(10_001)), "10,001 typed queries")):
        loaded = data.add_queries(registry, key, None, text)
        assert not loaded.ok and problem in shown(loaded.status) and loaded.key == key


def test_past_the_budget_what_nobody_uses_goes_and_what_someone_uses_stays(registry, tmp_path):
    from ui import data
    from ui.registry import Limits, ServerBusy

    first = data.load_files(registry, "", [str(small_corpus(tmp_path, 1))], session="a")
    registry.hold("a", first.key)
    # room for two small corpora, not three: counted in workspaces, as the byte budget is by the same trim
    # (a workspace's bytes grow as its builds finish, so a byte budget here would hang on the machine's speed)
    registry.limits = Limits(workspaces=2)
    second = data.load_files(registry, "", [str(small_corpus(tmp_path, 2))], session="b")
    assert second.ok
    for build in registry.get(second.key).builds.values():  # a build still running holds its workspace open
        build.follow(None, None, 0.05)
    third = data.load_files(registry, "", [str(small_corpus(tmp_path, 3))], session="c")
    assert third.ok  # b never held its workspace (its page switched away): it was closed for c's
    registry.get(first.key)  # a's is kept
    registry.hold("c", third.key)
    fourth = data.load_files(registry, "kept", [str(small_corpus(tmp_path, 4))], session="d")
    assert not fourth.ok and fourth.key == "kept"
    assert "all in use by open sessions" in shown(fourth.status)
    registry.get(first.key), registry.get(third.key)
    registry.release("a")  # a's tab closed: its workspace may go now
    assert data.load_files(registry, "", [str(small_corpus(tmp_path, 4))], session="d").ok
    with pytest.raises(Exception, match="closed to free memory"):
        registry.get(first.key)
    assert isinstance(ServerBusy("x"), ValueError)


def test_a_corpus_larger_than_the_whole_budget_is_refused_up_front(registry, tmp_path):
    from ui import data
    from ui.registry import Limits

    registry.limits = Limits(budget_bytes=10_000)
    loaded = data.load_files(registry, "k", [str(small_corpus(tmp_path, 1))], session="a")
    assert not loaded.ok and "more than the server's budget" in shown(loaded.status)


def test_a_session_idle_past_the_limit_no_longer_protects_its_workspace(registry, tmp_path):
    from ui import data
    from ui.registry import Limits

    first = data.load_files(registry, "", [str(small_corpus(tmp_path, 1))], session="a")
    registry.hold("a", first.key)
    registry.limits = Limits(workspaces=1, idle_s=0.0)
    assert data.load_files(registry, "", [str(small_corpus(tmp_path, 2))], session="b").ok


def test_the_start_workspace_is_never_closed(registry, tmp_path):
    from ui import data
    from ui.registry import Limits

    start = data.load_demo(registry).key
    registry.pin(start)
    registry.limits = Limits(workspaces=2)
    for i in range(4):
        assert data.load_files(registry, "", [str(small_corpus(tmp_path, i))], session=f"s{i}").ok
    registry.get(start)


def test_one_session_keeps_only_its_share_of_workspaces(registry, tmp_path):
    from ui import data
    from ui.registry import Limits

    registry.limits = Limits(session_workspaces=2)
    others = data.load_files(registry, "", [str(small_corpus(tmp_path, 99))], session="other").key
    for i in range(5):
        key = data.load_files(registry, "", [str(small_corpus(tmp_path, i))], session="greedy").key
        registry.hold("greedy", key)
    assert sum(e.opener == "greedy" for e in registry._items.values()) == 2
    registry.get(others)  # another session's workspace, though unheld, was not the one to go


# ---- the app, two clients ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_app(tiny_model_dir, tmp_path_factory, demo_sparse_store):
    import app as rankscope_app
    from tests.conftest import store_copy

    # the demo's SPLADE vectors stored already: no learned sparse build of the demo runs beside the clients
    store = store_copy(demo_sparse_store, tmp_path_factory.mktemp("hostile-store") / "store.sqlite3")
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store, max_upload="2mb"))
    yield demo, registry
    demo.close()


def client_of(shared_app):
    from tests.helpers import app_client

    return app_client(shared_app[0].local_url)


def error_of(call) -> str:
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as err:
        call()
    return shown(err.value)


@pytest.mark.slow
@pytest.mark.server
def test_two_clients_one_imports_and_loads_again_and_again_the_other_keeps_searching(shared_app, tmp_path):
    """One client imports runs and loads a corpus and the demo again, eight times in all: each makes a
    workspace of its session (and each refreshes every view of its page), twice the four one session keeps
    (``Limits.session_workspaces``), so its own older ones are closed as it goes. The other client searches
    all along (a search every quarter second, as a person would, not a loop that takes a core from the
    server): every search answers, and every load either loads or says the session's limit."""
    import threading

    from gradio_client import handle_file

    searcher, loader = client_of(shared_app), client_of(shared_app)
    q, d = next((q, next(iter(docs))) for q, docs in load_dataset(DEMO).qrels["test"].items())
    errors: list[str] = []
    done = threading.Event()

    def keep_searching():
        while not done.is_set():
            try:
                _, result = searcher.predict("leaky faucet washer", api_name="/search")
                assert result["systems"]["bm25"]
            except Exception as err:
                errors.append(repr(err))
            done.wait(0.25)

    thread = threading.Thread(target=keep_searching)
    thread.start()
    try:
        statuses = []
        for i in range(8):
            if i % 4 == 3:
                corpus = handle_file(str(small_corpus(tmp_path, i)))
                statuses.append(loader.predict([corpus], api_name="/load_dataset")[0])
                statuses.append(loader.predict(api_name="/load_demo")[0])
            else:
                run = write(tmp_path / f"run{i}.trec", f"{q} Q0 {d} 1 1.0 r{i}\n")
                statuses.append(loader.predict(handle_file(str(run)), "", api_name="/import_run")[0])
    finally:
        done.set()
        thread.join(timeout=120)
    assert errors == []
    assert all(s.startswith("✅") or "the most one session may have" in shown(s) for s in statuses), statuses
    _, result = searcher.predict("descale a kettle", api_name="/search")
    assert result["systems"]["bm25"]


@pytest.mark.parametrize("grade", ["3", "-1", "text", "1.5", "+1", "\u0661", "\uff12", "1_0", "9" * 5_000])
@pytest.mark.server
@pytest.mark.slow
def test_the_judge_endpoint_refuses_bad_grades_in_one_line(grade, shared_app):
    client = client_of(shared_app)
    q, d = next((q, next(iter(docs))) for q, docs in load_dataset(DEMO).qrels["test"].items())
    message = error_of(lambda: client.predict("ann", q, d, grade, 10, False, api_name="/judge"))
    assert "a grade is 0, 1 or 2" in message
    store = shared_app[1].store
    assert store.judgments(load_dataset(DEMO).corpus_hash, "ann") == []


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@pytest.mark.server
def test_the_encoder_endpoint_refuses_paths_alike_whether_they_exist_or_not(shared_app, tmp_path):
    client = client_of(shared_app)
    real = error_of(lambda: client.predict(str(ROOT), api_name="/use_encoder"))
    absent = error_of(lambda: client.predict(str(tmp_path / "absent"), api_name="/use_encoder"))
    assert "is not one this server offers" in real
    assert real.replace(repr(str(ROOT)), "X") == absent.replace(repr(str(tmp_path / "absent")), "X")
    hub = error_of(lambda: client.predict("sentence-transformers/all-mpnet-base-v2", api_name="/use_encoder"))
    assert "is not one this server offers" in hub
    for endpoint, args in (("/failures", ("test", str(ROOT))), ("/project", ("test", 5, "", str(ROOT)))):
        assert "is not one this server offers" in error_of(lambda a=args, e=endpoint: client.predict(*a, api_name=e))
    # /evaluate's extras are a checkbox group: Gradio itself refuses a value it does not list
    assert "is not in the list of choices" in error_of(lambda: client.predict("test", [str(ROOT)],
                                                                              api_name="/evaluate"))
    _, result = client.predict("leaky faucet", api_name="/search")  # the session still works
    assert result["systems"]["dense"]


@pytest.mark.server
@pytest.mark.slow
def test_a_client_cannot_load_a_server_file_it_did_not_upload(shared_app):
    """A raw API call naming a path on the server (not an upload) is refused by Gradio's own check,
    and the session's data set stays the demo."""
    import requests

    url = shared_app[0].local_url
    session = "hostile-session"
    r = requests.post(f"{url}gradio_api/call/load_dataset", timeout=30, json={
        "data": [[{"path": str(ROOT / "README.md"), "meta": {"_type": "gradio.FileData"}}]], "session_hash": session})
    assert r.status_code == 200
    events = requests.get(f"{url}gradio_api/call/load_dataset/{r.json()['event_id']}", timeout=60).text
    assert "event: error" in events and "RankScope" not in events
    client = client_of(shared_app)
    _, result = client.predict("leaky faucet washer", api_name="/search")
    assert result["systems"]["bm25"]


@pytest.mark.server
@pytest.mark.slow
def test_overlong_queries_and_out_of_range_numbers_are_one_line(shared_app):
    client = client_of(shared_app)
    assert "a query has at most 10,000 characters" in error_of(lambda: client.predict("x" * 20_000, api_name="/search"))
    message = error_of(lambda: client.predict("triplet", "bm25", 10**5, 8, 1e-3, 64, 2, 0.1, 0.3, 0.01, "cpu", 0.8,
                                              api_name="/train"))
    assert "epochs must be between 1 and 100," in message
    message = error_of(lambda: client.predict("triplet", "bm25", 1, 8, -1.0, 64, 2, 0.1, 0.3, 0.01, "cpu",
                                              0.8, api_name="/train"))
    assert "the learning rate > 0" in message
    message = error_of(lambda: client.predict("ann", 10**9, False, api_name="/judge_queue"))
    assert "pool depth" in message or "maximum" in message


@pytest.mark.server
@pytest.mark.slow
def test_an_imported_runs_payload_tag_comes_back_escaped(shared_app, tmp_path):
    from gradio_client import handle_file

    client = client_of(shared_app)
    q, d = next((q, next(iter(docs))) for q, docs in load_dataset(DEMO).qrels["test"].items())
    run = write(tmp_path / "payload.trec", f'{q} Q0 {d} 1 1.0 <img/src="http://evil.invalid/x"/onerror=alert(1)>\n')
    status = client.predict(handle_file(str(run)), "", api_name="/import_run")[0]
    assert status.startswith("✅") and "<img" not in status and "evil.invalid" in shown(status)
    html_, _ = client.predict(PAYLOADS[0], api_name="/search")
    assert_inert(html_)
