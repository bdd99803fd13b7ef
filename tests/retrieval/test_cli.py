"""``python -m retrieval`` as a user runs it, over the demo data set: each command through ``main`` in this
process (``run_cli``: its exit status, its stdout and stderr), what it prints and writes being what is
tested here. The process itself (``python -m retrieval``'s exit status, its exit at once, no traceback) is
``cli``'s, a real subprocess, held by ``test_process_exit``, ``test_check_exit`` and ``test_cli_flags``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from retrieval.data.readers import load_dataset, read_run
from retrieval.evaluation.measures import evaluate_run
from retrieval.safe_names import file_name
from retrieval.store import Store
from retrieval.workspace import Workspace
from tests.conftest import DEMO, ROOT, store_copy

SYSTEM_ROWS = {"bm25": "BM25", "dense": "Dense", "hybrid": "Hybrid (CLEAR λ)"}
DEFAULTS = {}  # BM25 as the CLI runs it by default (k1 0.9, b 0.4, stemmer detected)
MIS_SET = {"k1": 5.0, "b": 1.0, "language": "none"}  # HARMFUL's BM25
TABLE_METRICS = ["ndcg@10", "mrr@10", "recall@10", "recall@100", "recall@1000", "map", "p@10", "pnr"]


def cli(*args, tmp_path, timeout=300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONIOENCODING": "utf-8", "RANKSCOPE_HOME": str(tmp_path / "home")}
    env.pop("RANKSCOPE_STORE", None)
    return subprocess.run([sys.executable, "-m", "retrieval", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout)


def run_cli(*args, tmp_path) -> subprocess.CompletedProcess:
    """``python -m retrieval ARGS`` run in this process (``retrieval.cli.main``): its exit status and what
    it printed, as ``cli`` gives them, for a test about what a command does rather than about its process
    (``cli`` starts one, importing torch and the rest anew: seconds before the command begins). The
    environment is ``cli``'s: no ``$RANKSCOPE_STORE`` of the caller's, the default store a file of the
    test's own (``$RANKSCOPE_STORE`` pointed where ``cli``'s ``$RANKSCOPE_HOME`` would put it; the home
    itself stays the run's, so the tiny encoder's CPU choice is the one the fixture made, never measured
    again on a busy machine). A ``SystemExit`` (argparse's error: 2) is its status, as the process's would be."""
    import contextlib
    import io

    from retrieval.cli import main

    out, err = io.StringIO(), io.StringIO()
    kept = os.environ.get("RANKSCOPE_STORE")
    os.environ["RANKSCOPE_STORE"] = str(tmp_path / "home" / "rankscope.sqlite3")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exit_:
                code = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
    finally:
        if kept is None:
            del os.environ["RANKSCOPE_STORE"]
        else:
            os.environ["RANKSCOPE_STORE"] = kept
    return subprocess.CompletedProcess(["python", "-m", "retrieval", *map(str, args)], code, out.getvalue(),
                                       err.getvalue())


def judge_pools(folder, store_path, *configs) -> dict[str, dict[str, int]]:
    """Judge the top 10 of each BM25 configuration (``Workspace`` keywords, "language" its
    stemmer as the CLI's --language) on the test queries of the demo copy in ``folder``, as a
    judge in the app would: the data's grade where it lists the document, else 0. The judgments go
    to the store at ``store_path`` and become the split's labels (as `judges --export` writes them):
    labels judged in the app, so the coverage gate applies."""
    from retrieval.data.language import corpus_tokenizer

    ds = load_dataset(folder)
    truth = ds.qrels["test"]
    labels: dict[str, dict[str, int]] = {}
    for config in configs:
        config = dict(config)
        tokenizer = corpus_tokenizer([d.full_text for d in ds.docs.values()], config.pop("language", "auto"))
        run = Workspace(ds, None, tokenizer=tokenizer, **config).run("bm25", "test")
        for q in truth:
            for d, _ in run.get(q, [])[:10]:
                labels.setdefault(q, {})[d] = truth[q].get(d, 0)
    store = Store(store_path)
    store.put_judgments(ds.corpus_hash, [(q, ds.queries[q], d, g, "ann") for q, docs in labels.items()
                                         for d, g in docs.items()])
    store.close()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, docs in labels.items() for d, g in docs.items()))
    return labels


@pytest.mark.slow
def test_evaluate_prints_table_and_writes_json_and_trec_runs(tmp_path, tiny_model_dir):
    out_json, run_dir = tmp_path / "out" / "metrics.json", tmp_path / "runs"
    res = run_cli("evaluate", DEMO, "--model", tiny_model_dir, "--store", tmp_path / "s.sqlite3", "--systems",
                  "bm25,dense,hybrid", "--json", out_json, "--run-dir", run_dir, tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "demo: 384 documents, 32 test queries" in res.stderr

    # JSON: each system's metrics with their 95% intervals, and every pair compared
    out = json.loads(out_json.read_text())
    assert out["split"] == "test" and out["level"] == 0.95
    results = {s: row["metrics"] for s, row in out["systems"].items()}
    assert list(results) == ["bm25", "dense", "hybrid"]
    for system, row in results.items():
        assert list(row) == TABLE_METRICS, system
        assert all(0.0 <= row[m] <= 1.0 for m in TABLE_METRICS if m != "pnr")
        assert row["pnr"] >= 0.0
        assert out["systems"][system]["queries"] == 32
        for m in TABLE_METRICS:  # every mean inside its own interval (a point where every query scores alike)
            low, high = out["systems"][system]["intervals"][m]
            assert low <= row[m] <= high, (system, m)
        low, high = out["systems"][system]["intervals"]["ndcg@10"]
        assert high - low > 0.05  # 32 queries: nDCG@10 is far from settled
    assert len(out["comparisons"]) == 3  # every pair, the better one as b
    for c in out["comparisons"]:
        assert c["delta"] >= 0 and c["interval"][0] <= c["delta"] <= c["interval"][1]
        assert c["outcome"] in ("b", "open") and (c["outcome"] == "b") == (c["p_value"] < 0.05 and c["interval"][0] > 0)

    # the table: a header, then one row per system whose cells are the JSON values to 4 decimals and
    # their intervals
    lines = res.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("system"))
    assert lines[header].split()[1:] == TABLE_METRICS
    rows = {line[:24].strip(): line[24:] for line in lines[header + 2:header + 5]}
    assert set(rows) == set(SYSTEM_ROWS.values())
    for system, label in SYSTEM_ROWS.items():
        cells = re.findall(r"(\d\.\d{4}) \[(\d\.\d{3}), (\d\.\d{3})\]", rows[label])
        assert [float(v) for v, _, _ in cells] == pytest.approx([results[system][m] for m in TABLE_METRICS], abs=5.1e-5)
        for (_, low, high), m in zip(cells, TABLE_METRICS):
            assert [float(low), float(high)] == pytest.approx(out["systems"][system]["intervals"][m], abs=5.1e-4)
    conclusions = lines[lines.index("conclusions:") + 1:lines.index("conclusions:") + 4]
    assert all(" beats " in c or "not separable yet" in c for c in conclusions)
    assert any(line.startswith("hybrid λ_test = ") and "tuned on train" in line for line in lines)
    n_test = 32  # the demo's test split, as the stderr line above says
    for label in ("Dense", "Hybrid (CLEAR λ)"):  # per-query deltas against BM25, one line each
        line = next(ln for ln in lines if ln.startswith(f"{label} vs BM25, nDCG@10 per query:"))
        wins, losses, ties = (int(line.split(f" {w}")[0].rsplit(" ", 1)[1]) for w in ("wins", "losses", "ties"))
        assert wins + losses + ties == n_test

    # one TREC run per system: qid Q0 docid rank score tag, ranks 1, 2, ... in score order
    ds = load_dataset(DEMO)
    test_qids = set(ds.split_queries("test"))
    for system in SYSTEM_ROWS:
        path = run_dir / file_name("demo", "test", system, suffix=".trec")
        per_query: dict[str, list[tuple[int, float]]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            qid, q0, doc, rank, score, tag = line.split()
            assert q0 == "Q0" and tag == f"rankscope-{system}" and doc in ds.docs
            per_query.setdefault(qid, []).append((int(rank), float(score)))
        assert set(per_query) <= test_qids and len(per_query) >= len(test_qids) - 1
        for qid, hits in per_query.items():
            assert [r for r, _ in hits] == list(range(1, len(hits) + 1)), (system, qid)
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        if system == "dense":  # depth 1000 > 384 documents: the whole corpus for every query
            assert set(per_query) == test_qids
            assert all(len(h) == len(ds.docs) for h in per_query.values())
        # the file alone reproduces the reported nDCG@10
        ev = evaluate_run(read_run(path, ds).run, ds.qrels["test"], metrics=("ndcg@10",))
        assert ev.mean["ndcg@10"] == pytest.approx(results[system]["ndcg@10"], abs=1e-9)


@pytest.mark.slow  # the three-way fusion's μ tuned on the demo's train split
def test_evaluate_says_how_each_system_chose_its_own_weights(tmp_path, tiny_model_dir, demo_sparse_store):
    """The three-way fusion's μ is printed with how it was chosen, as Evaluate shows it. The store holds the
    demo's SPLADE vectors already (``demo_sparse_store``): read, not encoded again (``test_sparse``'s)."""
    store = store_copy(demo_sparse_store, tmp_path / "s.sqlite3")
    res = run_cli("evaluate", DEMO, "--model", tiny_model_dir, "--store", store, "--systems", "bm25,hybrid3",
                  tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    (mu,) = [line for line in lines if line.startswith("hybrid3 μ = ")]
    assert re.fullmatch(r"hybrid3 μ = [\d.]+ \(tuned on train \(nDCG@10, 39 queries\).*\)", mu), mu
    assert not any(line.startswith("bm25 ") for line in lines)  # BM25 has no weight of its own to choose


def test_unknown_split_names_the_available_ones(tmp_path):
    res = run_cli("evaluate", DEMO, "--split", "nope", "--store", tmp_path / "s.sqlite3", tmp_path=tmp_path)
    assert res.returncode == 2
    assert "no split 'nope'" in res.stderr and "(it has: test, train)" in res.stderr
    assert "Traceback" not in res.stderr


def test_malformed_corpus_line_is_reported(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "ok", "text": "fine"}\n{"_id": "d2", "text": "broken\n'
        '{"_id": "d3", "text": "never read"}\n', encoding="utf-8")
    res = run_cli("evaluate", folder / "corpus.jsonl", "--store", tmp_path / "s.sqlite3", tmp_path=tmp_path)
    assert res.returncode == 2
    assert "corpus.jsonl:2:" in res.stderr and "invalid JSON" in res.stderr
    assert "Traceback" not in res.stderr


def test_info_prints_the_summary(tmp_path):
    res = run_cli("info", DEMO, tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout[:res.stdout.rindex("}") + 1])
    assert summary["name"] == "demo" and summary["documents"] == 384 and summary["queries"] == 71
    assert summary["splits"] == {"test": {"queries": 32, "labels": 66}, "train": {"queries": 39, "labels": 90}}
    assert summary["warnings"] == 0


def test_judges_reports_agreement_and_exports_merged_qrels(tmp_path):
    from retrieval import Store
    from retrieval.data.readers import read_qrels

    ds = load_dataset(DEMO)
    store = Store(tmp_path / "s.sqlite3")
    qid = next(iter(ds.queries))
    docs = ds.doc_ids[:6]
    for i, d in enumerate(docs):
        store.put_judgment(ds.corpus_hash, qid, ds.queries[qid], d, i % 3, "ann")
        store.put_judgment(ds.corpus_hash, qid, ds.queries[qid], d, (i % 3) if i < 4 else 0, "bob")
    store.close()
    out = tmp_path / "merged.qrels"
    res = run_cli("judges", DEMO, "--store", tmp_path / "s.sqlite3", "--export", out, "--rule", "max",
                  tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "12 judgments by 2 judge(s): ann, bob"
    assert lines[1].startswith("Krippendorff's alpha (ordinal), over the 6 pairs two or more judges graded: 0.")
    assert re.match(r"ann / bob: 6 pairs both graded, weighted kappa 0\.\d{3} \[-?\d\.\d{3}, \d\.\d{3}\], "
                    r"same grade on 67%", lines[2])
    assert "2 pair(s) to adjudicate (graded differently), the widest spread first:" in res.stdout
    assert read_qrels(out) == {qid: {d: i % 3 for i, d in enumerate(docs)}}  # max: ann's higher grades win
    empty = run_cli("judges", DEMO, "--store", tmp_path / "none.sqlite3", tmp_path=tmp_path)
    assert empty.returncode == 2 and "nobody has judged" in empty.stderr


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_evaluate_on_labels_judged_in_the_app_gives_no_verdict_a_pool_cannot_carry(tmp_path):
    """The demo's labels a judged BM25 pool; the mis-set BM25 given as a run file, never pooled
    (judged@10 0.74 over the 32 judged queries). Before, evaluate printed "BM25 beats misset by 0.175"
    and marked it †; now it prints each system's judged@10, the judged pool's figures (success@10
    and P@10 over every judged query, misset's as ranges, how many pairs are left to judge), no
    verdict on nDCG, no †, and n/m for the metrics that read deeper than the pool; the JSON says the
    pair may not be concluded. The same labels arriving as the data set's own are a pool of BM25's
    results too: the comparison is said to favour BM25 and is made on nDCG'@10, judged@10 beside."""
    import shutil

    from retrieval.data.language import corpus_tokenizer
    from retrieval.files.trec import write_trec

    folder = tmp_path / "demo"
    shutil.copytree(DEMO, folder)
    store = tmp_path / "s.sqlite3"
    judge_pools(folder, store, DEFAULTS)
    ds = load_dataset(folder)
    mis_set = Workspace(ds, None, tokenizer=corpus_tokenizer([d.full_text for d in ds.docs.values()], "none"),
                        k1=5.0, b=1.0)
    run_file = write_trec(mis_set.run("bm25", "test"), tmp_path / "misset.trec", "misset")
    out_json = tmp_path / "metrics.json"
    res = run_cli("evaluate", folder, "--systems", "bm25", "--run", f"{run_file}=misset", "--store", store,
                  "--json", out_json, tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert re.search(r"^Judged@10 \(labels judged in the app: a verdict needs each system's top 10 judged on every "
                     r"judged query\): BM25 100% \[100%, 100%\], misset 74% \[\d+%, \d+%\]\.", res.stdout,
                     re.M), res.stdout
    assert ("judged pool: 32 judged queries, nothing relevant found included (provisional: judge 83 more (the "
            "unjudged top-10 documents on the judged queries))") in lines
    assert "success@10: BM25 23 of 32 (72% [55%, 84%]), misset 19–32 of 32" in lines
    assert "  BM25: P@10 0.0969 [0.069, 0.128], fails on 9 of 32" in lines
    assert " beats " not in res.stdout and "conclusions:" not in lines
    row = next(line for line in lines if line.startswith("misset"))
    assert "†" not in row and row.count("n/m (pool depth 10)") == 3  # recall@100, recall@1000, map
    (pair,) = json.loads(out_json.read_text())["comparisons"]
    assert pair["outcome"] == "b" and pair["p_value"] < 0.05  # the test alone would have said BM25 wins
    assert pair["may_conclude"] is False and pair["judge_more"] == {"misset": 83}
    # the same labels as the data set's own (the store holds no judgments): measured and concluded
    plain = run_cli("evaluate", folder, "--systems", "bm25", "--run", f"{run_file}=misset", "--store",
                    tmp_path / "other.sqlite3", tmp_path=tmp_path)
    assert "BM25 beats misset by 0.175" not in plain.stdout and "n/m" not in plain.stdout
    assert re.search(r"^Judged@10 \(the data set's own labels, a judged pool .*\): BM25 100% \[100%, 100%\], misset "
                     r"80%", plain.stdout, re.M), plain.stdout
    (said,) = [ln for ln in plain.stdout.splitlines() if "the labels cover BM25's top 10 better" in ln]
    assert said.strip().startswith("BM25 beats misset by 0.128 [0.038, 0.220] nDCG'@10")
    assert "nDCG@10 would favour" in said
    assert "†" not in next(ln for ln in plain.stdout.splitlines() if ln.startswith("misset"))  # a verdict on nDCG@10


@pytest.mark.slow  # a real process that encodes the demo corpus
def test_failures_on_a_data_set_without_labels_writes_the_queries_predicted_to_fail(tmp_path, tiny_model_dir):
    """A query log without labels: the report is the section "Queries predicted to fail" (the hardest
    first, each with the systems' top documents, every text escaped) instead of an error, and the
    queries are printed hardest first."""
    folder = tmp_path / "log"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text((DEMO / "corpus.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    queries = [json.loads(line) for line in (DEMO / "queries.jsonl").read_text().splitlines()[:30]]
    queries.append({"_id": "evil", "text": "<script>alert(1)</script> <img src=x onerror=alert(2)> faucet"})
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    res = run_cli("failures", folder, "--model", tiny_model_dir, "--store", tmp_path / "s.sqlite3", "--html",
                  tmp_path / "r.html", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Queries predicted to fail" in page and page.count("rs-predicted-card") == 20
    assert "<script" not in page and "<img" not in page and "the 20 hardest of 31 queries" in page
    printed = [line.split("\t") for line in res.stdout.splitlines()]
    assert len(printed) == 20 and {q for q, *_ in printed} <= {q["_id"] for q in queries}
    difficulty = [float(d) for _, d, _ in printed]
    assert difficulty == sorted(difficulty, reverse=True)
    assert "no labels: the 20 queries predicted to fail of 31" in res.stderr
