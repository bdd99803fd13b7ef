"""Imported runs: an analyst's own run files (TREC and ranx JSON) read, checked against a data set,
and evaluated, tabled, searched and stored like the built-in systems; ``evaluate --run`` on the CLI.

Real files in tmp_path, the bundled demo data set, real BM25 and the tiny transformer.
"""
from __future__ import annotations

import json

import pytest
import ranx

from retrieval.data.readers import ImportedRun, load_dataset, match_dataset, read_run
from retrieval.errors import DataError
from retrieval.evaluation.measures import positive_qrels
from retrieval.evaluation.metric_tables import metrics_table
from retrieval.files.trec import write_trec
from retrieval.safe_names import file_name
from retrieval.systems import BASE_SYSTEMS
from retrieval.tracking.history import list_runs
from retrieval.workspace import Workspace
from tests.conftest import DEMO
from tests.retrieval.test_cli import run_cli


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def error(fn, *args, **kwargs) -> str:
    with pytest.raises(DataError) as exc:
        fn(*args, **kwargs)
    return str(exc.value)


def docs_of(run) -> dict[str, list[str]]:
    return {q: [d for d, _ in hits] for q, hits in run.items()}


@pytest.fixture(scope="module")
def bm25_run(demo):
    """BM25's test run on the demo (no encoder needed), the source of the "production" files."""
    return Workspace(demo).run("bm25", "test")


@pytest.fixture
def workspace(demo, store, tiny_encoder):
    return Workspace(demo, store, model=tiny_encoder)


def worse_run(run):
    """BM25's lists with each top 10 moved to the end (scored in that order): clearly worse than BM25."""
    return scored({q: hits[10:] + hits[:10] for q, hits in run.items()})


def scored(run):
    """Scores that decrease down each list (a reordered list keeps its order when read back)."""
    return {q: [(d, float(len(hits) - i)) for i, (d, _) in enumerate(hits)] for q, hits in run.items()}


# ---- reading: the two formats ----------------------------------------------------------------
def test_a_trec_run_reads_back_as_the_same_lists(tmp_path, bm25_run):
    path = write_trec(bm25_run, tmp_path / "prod.trec", "prod")
    imported = read_run(path)
    assert isinstance(imported, ImportedRun)
    assert imported.name == "prod" and imported.format == "trec" and imported.source == str(path)
    assert docs_of(imported.run) == docs_of(bm25_run)
    for q, hits in bm25_run.items():
        assert [s for _, s in imported.run[q]] == pytest.approx([s for _, s in hits], abs=1e-6)
    assert imported.rows == sum(len(h) for h in bm25_run.values())
    assert len(imported.content_hash) == 64
    assert read_run(path, name="elastic").name == "elastic"


@pytest.mark.slow
def test_a_ranx_json_run_reads_back_and_is_named_after_its_file(tmp_path, bm25_run):
    path = tmp_path / "vendor api.json"
    ranx.Run({q: dict(hits) for q, hits in bm25_run.items()}).save(str(path))
    imported = read_run(path)
    assert imported.name == "vendor_api" and imported.format == "json"
    assert {q: dict(hits) for q, hits in imported.run.items()} == {q: dict(hits) for q, hits in bm25_run.items()}
    # the same lists in the other format: the same hash
    trec = write_trec(scored(bm25_run), tmp_path / "a.trec", "a")
    path2 = tmp_path / "b.json"
    path2.write_text(json.dumps({q: dict(hits) for q, hits in scored(bm25_run).items()}))
    assert read_run(trec).content_hash == read_run(path2).content_hash


def test_a_name_must_be_one_word(tmp_path):
    path = write(tmp_path / "r.trec", "q1 Q0 d1 1 2.0 prod\n")
    with pytest.raises(ValueError, match="one word"):
        read_run(path, name="my prod")


# ---- reading: bad input ------------------------------------------------------------------------
@pytest.mark.parametrize("line, problem", [
    ("q1 Q0 d2 2 1.5", "expected 6 columns (qid Q0 docid rank score tag), found 5 (is the score missing?)"),
    ("q1 Q0 d2 2 1.5 prod extra", "expected 6 columns (qid Q0 docid rank score tag), found 7"),
    ("q1 Q0 d2 2 high prod", "score 'high' is not a number"),
    ("q1 Q0 d2 2 nan prod", "score 'nan' is not a finite number"),
    ("q1 Q0 d2 2 -inf prod", "score '-inf' is not a finite number"),
    ("q1 Q0 d2 second 1.5 prod", "rank 'second' is not a number"),
])
def test_a_bad_trec_line_names_file_and_line(tmp_path, line, problem):
    path = write(tmp_path / "r.trec", f"q1 Q0 d1 1 2.0 prod\n\n{line}\nq1 Q0 d3 3 1.0 prod\n")
    assert error(read_run, path) == f"{path}:3: {problem}"


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_file_is_refused(tmp_path, content):
    path = write(tmp_path / "r.trec", content)
    assert error(read_run, path) == f"{path}: file is empty"


@pytest.mark.parametrize("obj, problem", [
    ({}, "the run holds no ranked document"),
    ({"q1": {}}, "the run holds no ranked document"),
    ({"q1": [["d1", 1.0]]}, "query 'q1': expected an object {document id: score}, found an array"),
    ({"q1": {"d1": "1.0"}}, "query 'q1': the score of document 'd1' is a string, not a number"),
    ({"q1": {"d1": True}}, "query 'q1': the score of document 'd1' is a boolean, not a number"),
    ({"q1": {"d1": None}}, "query 'q1': the score of document 'd1' is null, not a number"),
    ({"q1": {"d1": float("nan")}}, "query 'q1': the score of document 'd1' is nan, not a finite number"),
    ({"q1": {"a b": 1.0}}, "query 'q1': document id 'a b' contains whitespace, which TREC run and qrels "
                           "files cannot hold"),
    ({"q 1": {"d1": 1.0}}, "query id 'q 1' contains whitespace, which TREC run and qrels files cannot hold"),
    ({"q1": {"": 1.0}}, "query 'q1': document id is empty"),
])
def test_json_that_is_not_an_object_of_objects_of_numbers_names_the_query(tmp_path, obj, problem):
    path = write(tmp_path / "r.json", json.dumps(obj))
    assert error(read_run, path) == f"{path}: {problem}"


def test_json_that_is_no_object_or_broken_is_refused(tmp_path):
    path = write(tmp_path / "r.json", '{"q1": {"d1": 1.0,\n  "d2": }\n}')
    assert error(read_run, path).startswith(f"{path}:2: invalid JSON: ")
    path = write(tmp_path / "a.trec", '[{"q1": {"d1": 1.0}}]')  # content decides, not the extension
    assert error(read_run, path) == (f"{path}: expected one JSON object {{query id: {{document id: score}}}}, "
                                     f"found an array")


def test_a_repeated_document_keeps_its_highest_score(tmp_path):
    path = write(tmp_path / "r.trec", "q1 Q0 d1 1 2.0 prod\nq1 Q0 d2 2 1.0 prod\nq1 Q0 d2 3 3.0 prod\n"
                                      "q2 Q0 d3 1 1.0 prod\nq2 Q0 d3 2 0.5 prod\n")
    imported = read_run(path)
    assert imported.run == {"q1": [("d2", 3.0), ("d1", 2.0)], "q2": [("d3", 1.0)]}
    assert imported.duplicates == 2 and imported.rows == 3
    assert imported.report.warnings == [f"{path}: 2 documents are listed more than once for a query (e.g. 'd2' for "
                                        f"query 'q1' on line 3); the highest score was kept"]
    path = write(tmp_path / "r.json", '{"q1": {"d1": 1.0, "d1": 4.0, "d2": 2.0}}')
    imported = read_run(path)
    assert imported.run == {"q1": [("d1", 4.0), ("d2", 2.0)]} and imported.duplicates == 1


def test_ties_are_broken_as_trec_eval_breaks_them_whatever_the_rank_column_says(tmp_path):
    """trec_eval ranks equal scores by document id, descending (strcmp), and reads no rank column."""
    path = write(tmp_path / "r.trec", "q1 Q0 b 1 2.0 prod\nq1 Q0 a 2 2.0 prod\nq1 Q0 c 2 2.0 prod\n"
                                      "q1 Q0 z 4 9.0 prod\n")
    imported = read_run(path)
    assert docs_of(imported.run) == {"q1": ["z", "c", "b", "a"]} and imported.ties == 2
    said = "2 documents share the score of the one ranked just above; ties are broken by document id, descending, " \
        "as trec_eval breaks them"
    assert imported.report.warnings == [f"{path}: {said}"]
    path = write(tmp_path / "r.json", '{"q1": {"b": 2.0, "c": 2.0, "a": 2.0, "z": 9.0}}')
    imported = read_run(path)
    assert docs_of(imported.run) == {"q1": ["z", "c", "b", "a"]} and imported.ties == 2
    assert imported.report.warnings == [f"{path}: {said}"]


def test_several_tags_warn_and_the_first_names_the_run(tmp_path):
    path = write(tmp_path / "r.trec", "q1 Q0 d1 1 2.0 es\nq1 Q0 d2 2 1.0 vendor\n")
    imported = read_run(path)
    assert imported.name == "es"
    assert imported.report.warnings == [f"{path}: the lines carry 2 different tags ('es', 'vendor'); they are "
                                        f"read as one run, named after the first unless a name is given"]


# ---- reading against a data set -----------------------------------------------------------------
def test_unknown_ids_are_counted_and_left_out(tmp_path, demo, bm25_run):
    qids = list(bm25_run)
    run = {q: bm25_run[q][:5] for q in qids}
    run["nope-1"] = [("fin-003", 1.0)]
    run[qids[0]] = run[qids[0]] + [("ghost-1", -1.0), ("ghost-2", -2.0)]
    path = write_trec(run, tmp_path / "r.trec", "prod")
    imported = read_run(path, demo)
    assert imported.unknown_queries == 1 and imported.unknown_docs == 2
    assert docs_of(imported.run) == docs_of({q: bm25_run[q][:5] for q in qids})
    assert imported.dataset == demo.content_hash
    assert imported.report.warnings[-2:] == [  # after any ties BM25's scores have
        f"{path}: 1 query id is not among the data set's queries (e.g. 'nope-1'); their 1 row left out",
        f"{path}: 2 rows name a document that is not in the corpus (e.g. 'ghost-1', 'ghost-2'); left out"]
    # matched later, the same
    assert match_dataset(read_run(path), demo).run == imported.run


@pytest.mark.parametrize("what", ["queries", "documents"])
def test_a_run_of_another_data_set_is_refused(tmp_path, demo, bm25_run, what):
    qids = list(bm25_run)[:4]
    run = {q: bm25_run[q][:4] for q in qids}
    if what == "queries":  # 3 of 4 queries unknown: 75% of the query ids, 75% of the rows
        run = {f"other-{i}" if i else q: hits for i, (q, hits) in enumerate(run.items())}
    else:  # every query known, 3 of 4 documents of each unknown
        run = {q: [(f"x{j}" if j else d, s) for j, (d, s) in enumerate(hits)] for q, hits in run.items()}
    path = write_trec(run, tmp_path / "r.trec", "prod")
    share_q = "75%" if what == "queries" else "0%"
    assert error(read_run, path, demo) == (
        f"{path}: this run looks like it belongs to another data set: {share_q} of its query ids and 75% of "
        f"its (query, document) rows are unknown to data set 'demo'")


def test_a_data_set_without_queries_takes_no_run(tmp_path, demo):
    from retrieval.data.dataset import Dataset

    corpus_only = Dataset("corpus", demo.docs)
    path = write(tmp_path / "r.trec", "q1 Q0 fin-003 1 2.0 prod\n")
    assert error(read_run, path, corpus_only) == (f"{path}: data set 'corpus' has no queries for the run's "
                                                  f"lists to belong to")


# ---- a system like the others ------------------------------------------------------------------
@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
def test_its_metrics_equal_ranx_on_the_same_file(tmp_path, demo, workspace, bm25_run):
    path = write_trec(worse_run(bm25_run), tmp_path / "prod.trec", "prod")
    assert workspace.add_run(read_run(path, demo)) == "prod"
    ev = workspace.evaluate("prod", "test")
    qrels = ranx.Qrels(positive_qrels(demo.qrels["test"]))
    expected = ranx.evaluate(qrels, ranx.Run.from_file(str(path), kind="trec"), ["ndcg@10", "recall@100", "map"],
                             make_comparable=True)
    for metric in ("ndcg@10", "recall@100", "map"):
        assert ev.mean[metric] == pytest.approx(expected[metric], abs=1e-9), metric
    assert 0.0 <= ev.mean["pnr"]  # from the run's own scores


def test_metrics_table_history_and_search_list_it(tmp_path, demo, workspace, store, bm25_run):
    imported = read_run(write_trec(worse_run(bm25_run), tmp_path / "p.trec", "prod"), demo)
    workspace.add_run(imported)
    rows = metrics_table(workspace, "test", systems=(*BASE_SYSTEMS, "prod"))
    assert [r["system"] for r in rows] == ["bm25", "dense", "hybrid", "prod"]
    prod = rows[-1]
    assert prod["label"] == "prod" and prod["marks"].get("ndcg@10") == "†"  # clearly worse than BM25
    assert prod["metrics"]["ndcg@10"] < rows[0]["metrics"]["ndcg@10"]

    history = [r for r in list_runs(store, demo.queries_hash) if r["system"] == "prod"]
    assert len(history) == 1
    assert history[0]["params"] == {"imported": "prod", "hash": imported.content_hash}
    assert history[0]["split"] == "test" and history[0]["k"] == 1000

    qid = next(iter(demo.qrels["test"]))
    got = workspace.search_one(demo.queries[qid], systems=("bm25", "prod"), k=5)
    assert got["prod"] == imported.run[qid][:5] and len(got["bm25"]) == 5
    assert workspace.search_one("a query nobody ran", systems=("prod",), k=5) == {"prod": []}


def test_its_run_is_cut_to_k_and_empty_for_queries_it_never_ran(tmp_path, demo, workspace, bm25_run):
    first = next(iter(bm25_run))
    path = write_trec({first: bm25_run[first]}, tmp_path / "one.trec", "one")
    workspace.add_run(read_run(path, demo))
    run = workspace.run("one", "test", k=3)
    assert set(run) == set(demo.split_queries("test"))
    assert docs_of({first: run[first]}) == docs_of({first: bm25_run[first][:3]})
    assert all(hits == [] for q, hits in run.items() if q != first)


def test_names_clash_and_siblings_keep_imported_runs(tmp_path, demo, workspace, bm25_run):
    path = write_trec(bm25_run, tmp_path / "p.trec", "prod")
    with pytest.raises(ValueError, match="a built-in system has that name"):
        workspace.add_run(read_run(path, demo, name="bm25"))
    workspace.add_run(read_run(path))  # read without the data set: matched to it on adding
    assert workspace.imported["prod"].dataset == demo.content_hash
    with pytest.raises(ValueError, match="already there"):
        workspace.add_run(read_run(path, demo))
    assert workspace.system_names[-1] == "prod" and workspace.system("prod").key == "prod"
    system = workspace.system("prod")  # a system like the others, its needs only its lists
    assert system.needs.run and not system.needs.lexical and system.label == "prod"
    assert system.exact_scores(workspace, "test", {}, {}) is None
    with pytest.raises(ValueError, match="unknown system 'nope'; choose from bm25, .*, prod"):
        workspace.evaluate("nope", "test")
    assert "prod" in workspace.with_index("sq8").imported
    assert "prod" in workspace.with_model(workspace.encoder).imported
    other = load_dataset(DEMO)
    assert "prod" not in Workspace(other).imported


# ---- the command line ----------------------------------------------------------------------------
@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_cli_evaluates_a_run_file_beside_bm25(tmp_path, bm25_run):
    run = worse_run(bm25_run)
    run[next(iter(run))].append(("ghost", -5.0))
    path = write_trec(run, tmp_path / "prod.trec", "es-prod")
    out_json, run_dir = tmp_path / "m.json", tmp_path / "runs"
    res = run_cli("evaluate", DEMO, "--systems", "bm25", "--run", f"{path}=prod", "--json", out_json,
                  "--run-dir", run_dir, "--store", tmp_path / "s.sqlite3", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"warning: {path}: 1 row names a document that is not in the corpus (e.g. 'ghost'); left out" in res.stderr
    assert any(line.startswith("prod ") for line in res.stdout.splitlines())
    assert "prod vs BM25, nDCG@10 per query:" in res.stdout
    results = {s: row["metrics"] for s, row in json.loads(out_json.read_text())["systems"].items()}
    assert list(results) == ["bm25", "prod"] and results["prod"]["ndcg@10"] < results["bm25"]["ndcg@10"]
    lines = (run_dir / file_name("demo", "test", "prod", suffix=".trec")).read_text().splitlines()
    assert lines and all(line.split()[5] == "prod" for line in lines)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_cli_reports_a_broken_run_file_with_its_line(tmp_path):
    path = write(tmp_path / "bad.trec", "q1 Q0 d1 1 2.0 prod\nq1 Q0 d2 2 prod\n")
    res = run_cli("evaluate", DEMO, "--systems", "bm25", "--run", path, "--store", tmp_path / "s.sqlite3",
                  tmp_path=tmp_path)
    assert res.returncode == 2
    assert f"error: {path}:2: expected 6 columns" in res.stderr and "Traceback" not in res.stderr
