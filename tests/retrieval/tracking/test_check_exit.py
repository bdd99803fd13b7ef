"""``python -m retrieval check`` never lies with its exit code: 0 unchanged, 1 regressed, 2 for any
failure to decide — a --max-drop that is NaN, infinite or negative, a metric the comparison cannot
compute, an output file that cannot be written, a damaged snapshot in the store, a baseline system
with no run today — each with one line on stderr naming the problem and no traceback. A failed write
leaves the file as it was. And the JUnit XML always parses, whatever a name, id or query holds."""
from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.cli import main
from retrieval.data.readers import load_dataset
from retrieval.evaluation.measures import Evaluation, compare
from retrieval.files.trec import write_trec
from retrieval.tracking import snapshots
from retrieval.tracking.check_report import junit_xml, markdown_summary, text_report, xml_text
from retrieval.workspace import Workspace
from tests.conftest import DEMO
from tests.retrieval.test_cli import cli

BM25_ONLY = ("--systems", "bm25")


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """A demo copy and a store whose baseline holds BM25 and an imported run 'prod' (BM25's own lists)."""
    root = tmp_path_factory.mktemp("gate")
    demo = root / "demo"
    shutil.copytree(DEMO, demo)
    write_trec(Workspace(load_dataset(demo), None).run("bm25", "test"), root / "prod.trec", "prod")
    store = root / "gate.sqlite3"
    assert main(["snapshot", str(demo), "--systems", "bm25", "--run", f"{root / 'prod.trec'}=prod", "--name",
                 "before", "--baseline", "--store", str(store)]) == 0
    return demo, store, root / "prod.trec"


def run_check(gate, *args, store=None, capsys):
    demo, stored, prod = gate
    code = main(["check", str(demo), "--store", str(store or stored), "--run", f"{prod}=prod", *args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(got, said: str) -> None:
    code, out, err = got
    assert code == 2, (code, out, err)
    assert said in err and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [next(
        line for line in err.splitlines() if said in line)], err  # one line names it


def test_an_unchanged_system_passes_and_the_files_are_written_whole(gate, tmp_path, capsys):
    junit, summary = tmp_path / "check.xml", tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    code, out, err = run_check(gate, "--junit", str(junit), "--summary", str(summary), capsys=capsys)
    assert code == 0, out + err
    assert [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")] == ["bm25", "prod"]
    assert summary.read_text().startswith("earlier step\n### RankScope check: ✅ no regression")  # appended
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.xml", "summary.md"]  # no temporary file left


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.01", "1_0", "+0.1", "\u0660.1"])
def test_a_max_drop_that_would_disable_the_gate_is_refused(gate, value, capsys):
    """Refused as the command line is read (the check's own rule, ``snapshots.gate_max_drop``): one
    ``error:`` line, exit status 2, nothing computed."""
    with pytest.raises(SystemExit) as exit_:
        run_check(gate, f"--max-drop={value}", capsys=capsys)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if "error:" in line] == [
        f"python -m retrieval check: error: argument --max-drop: --max-drop must be a finite number of 0 or more, "
        f"not {value!r}"]


@pytest.mark.parametrize("metric", ["ndcg@0", "foo@10", "ndcg@-1", "judged@10", "ndcg", "ndcg@\u0661\u0660",
                                    "ndcg@\u00b2"])
def test_a_metric_the_comparison_cannot_compute_is_refused(gate, metric, capsys):
    refused(run_check(gate, f"--metric={metric}", capsys=capsys), f"--metric {metric!r} is not a metric the check")


def test_another_metric_the_comparison_computes_is_checked(gate, capsys):
    code, out, err = run_check(gate, "--metric", "recall@100", capsys=capsys)
    assert code == 0 and "0 of 2 system(s) regressed" in out, out + err


def test_an_output_that_cannot_be_written_is_refused_before_the_work(gate, tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    for flag in ("--junit", "--summary"):
        refused(run_check(gate, flag, str(tmp_path), capsys=capsys), f"{flag} {tmp_path}: is a folder, not a file")
        under_a_file = tmp_path / "a-file" / "out.xml"
        refused(run_check(gate, flag, str(under_a_file), capsys=capsys), "a-file' cannot be made")


def test_a_missing_output_folder_is_made_as_a_ci_jobs_reports_folder_often_is(gate, tmp_path, capsys):
    report = tmp_path / "reports" / "nested" / "check.xml"
    code, out, err = run_check(gate, "--junit", str(report), capsys=capsys)
    assert code == 0 and report.exists(), out + err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_output_is_refused(gate, tmp_path, capsys):
    summary = tmp_path / "summary.md"
    summary.write_text("kept\n")
    summary.chmod(0o444)
    refused(run_check(gate, "--summary", str(summary), capsys=capsys), "the file is read-only")
    assert summary.read_text() == "kept\n"


def test_a_full_disk_leaves_the_file_as_it_was_and_exits_2(gate, tmp_path, capsys, monkeypatch):
    summary, junit = tmp_path / "summary.md", tmp_path / "check.xml"
    summary.write_text("kept\n")

    def full(fd):  # the disk filled while the file was written: the OS's error, as a real disk gives it
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    refused(run_check(gate, "--junit", str(junit), "--summary", str(summary), capsys=capsys),
            f"--junit {junit}: could not be written (No space left on device); left as it was")
    assert summary.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def _damaged(gate, tmp_path, **columns):
    store = tmp_path / "damaged.sqlite3"
    for suffix in ("", "-wal", "-shm"):  # the store keeps a write-ahead log
        if Path(f"{gate[1]}{suffix}").exists():
            shutil.copy(f"{gate[1]}{suffix}", f"{store}{suffix}")
    with sqlite3.connect(store) as db:
        for column, value in columns.items():
            db.execute(f"update snapshots set {column} = ?", [value])
    db.close()
    return store


@pytest.mark.parametrize("columns, said", [
    ({"runs": b"not zlib"}, "the snapshot 'before' in the store is damaged: its runs do not unpack"),
    ({"runs": zlib.compress(b"{not json")}, "its runs do not unpack"),
    ({"runs": zlib.compress(json.dumps({"bm25": ["d1", "d2"]}).encode())},
     "the snapshot 'before' in the store is damaged: the run of 'bm25' is not an object of queries"),
    ({"runs": zlib.compress(json.dumps({"bm25": {"q1": [["d1"]]}}).encode())},
     "the run of 'bm25' for query 'q1' is not a list of [document, score] pairs"),
    ({"meta": "{cut"}, "the snapshot 'before' in the store is damaged: its metadata is not JSON"),
    ({"meta": json.dumps({"split": "test"})}, "its metadata's 'dataset' is missing"),
])
def test_a_damaged_snapshot_in_the_store_is_refused(gate, tmp_path, columns, said, capsys):
    refused(run_check(gate, store=_damaged(gate, tmp_path, **columns), capsys=capsys), said)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_a_damaged_snapshot_exits_2_without_a_traceback_in_a_real_process(gate, tmp_path):
    demo, _, prod = gate
    store = _damaged(gate, tmp_path, runs=b"not zlib")
    got = cli("check", demo, "--run", f"{prod}=prod", "--store", store, tmp_path=tmp_path)
    assert got.returncode == 2 and "is damaged: its runs do not unpack" in got.stderr
    assert "Traceback" not in got.stderr, got.stderr


def test_a_baseline_system_with_no_run_today_is_named_never_skipped(gate, capsys):
    demo, store, prod = gate
    said = "the baseline's system 'prod' has no run today: renamed or removed?"
    for args in ([], ["--run", f"{prod}=prod2"], ["--run", f"{prod}=рrod"]):  # not given, renamed, a lookalike
        code = main(["check", str(demo), "--store", str(store), *args])
        out, err = capsys.readouterr()
        refused((code, out, err), said)
    code = main(["check", str(demo), "--store", str(store), *BM25_ONLY])  # left out on purpose: a warning
    out, err = capsys.readouterr()
    assert code == 0 and "the baseline's system 'prod' is not checked (not in --systems)" in err, out + err


def test_the_library_refuses_what_the_gate_cannot_decide_on(tmp_path):
    ws = Workspace(load_dataset(DEMO), None)
    snap = snapshots.take(ws, "test", ["bm25"], "s")
    for kwargs in ({"max_drop": float("nan")}, {"max_drop": -1.0}, {"metric": "ndcg@0"}, {"metric": "x@3"}):
        with pytest.raises(ValueError, match="--max-drop|--metric"):
            snapshots.check(ws, snap, ["bm25"], **kwargs)


# ---- the JUnit XML always parses -----------------------------------------------------------------
def _result(name: str, query_id: str, query: str, dataset: str, system: str = "hybrid"):
    before = Evaluation({}, {"ndcg@10": {f"q{i}": 0.9 for i in range(12)}})
    now = Evaluation({}, {"ndcg@10": {f"q{i}": 0.9 - (0.5 if i < 10 else 0) for i in range(12)}})
    cmp = compare(before, now)
    moved = [snapshots.Moved(query_id, 0.9, 0.4, [query_id], ["d2"], query)]
    regressed = snapshots.SystemCheck(system, cmp, (cmp.interval, cmp.interval), True, moved, {}, {})
    dropped = snapshots.SystemCheck(query_id, cmp, (cmp.interval, cmp.interval), False, moved, {}, {},
                                    dropped=True)
    snap = snapshots.Snapshot(name, "c", "d", dataset, "test", "l", {}, {})
    return snapshots.CheckResult(snap, "test", "ndcg@10", 0.01, False, False, [regressed, dropped])


def test_a_name_xml_forbids_is_shown_escaped_and_the_file_parses():
    result = _result("release\ufffe1", "q\uffff", "what\x00 is \ud800 bm25?\x1b[31m", "data\x01set")
    suite = ET.fromstring(junit_xml(result))
    assert suite.get("name") == "rankscope check against release\\uFFFE1"
    cases = list(suite.iter("testcase"))
    assert cases[1].get("name") == "q\\uFFFF"
    assert "q\\uFFFF “what\\u0000 is \\uD800 bm25?\\u001B[31m”: 0.9000 -> 0.4000" in cases[0].find("failure").text
    assert xml_text("tab\tLF\nCR\r é λ 😀") == "tab\tLF\nCR\r é λ 😀"  # what XML allows stays as it is


# any code point, surrogates included, and often one XML or Markdown cannot take as it is
_ANY = st.text(st.one_of(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
                         st.sampled_from("\ufffe\uffff\x00\x1b\ud800\udfff\r\n\t|<&`*")), min_size=1, max_size=30)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_ANY, query_id=_ANY, query=_ANY, dataset=_ANY, system=_ANY)
def test_every_junit_file_parses_and_shows_the_names_whatever_they_hold(name, query_id, query, dataset, system):
    from markdown_it import MarkdownIt

    from retrieval.files.markdown import text
    from retrieval.systems import label
    from retrieval.tracking.check_report import short

    def as_written(value: str) -> str:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")

    result = _result(name, query_id, query, dataset, system)
    for strict in (False, True):
        suite = ET.fromstring(junit_xml(result, strict=strict))
        assert suite.get("name") == xml_text(f"rankscope check against {name}")
        assert [c.get("name") for c in suite.iter("testcase")] == [xml_text(system), xml_text(query_id)]
        def lf(value: str) -> str:  # a parser reads CR LF and CR as LF in an element's text (XML 1.0 §2.11)
            return value.replace("\r\n", "\n").replace("\r", "\n")

        assert lf(xml_text(query_id)) in (suite.find("testcase/failure").text or "")
    text_report(result).encode("utf-8")  # a terminal can print it: no lone surrogate left
    md = markdown_summary(result).encode("utf-8", "backslashreplace").decode("utf-8")  # as the CLI writes it
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    assert md.startswith("### RankScope check: ❌ regression")
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 1 + 2 + 2 * 2  # the systems' table (header, 2 rows), each system's dropped queries
    assert as_written(text(label(system))) in md  # the name as text: controls as U+FFFD, Markdown's own escaped
    assert as_written(text(short(query))) in md
