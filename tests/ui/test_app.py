"""The app, launched for real and driven through gradio_client (tiny encoder, temporary store)."""
from __future__ import annotations

import html
import json
import re
import time
import zipfile
from html import unescape as html_unescape

import pytest
from gradio_client import handle_file

import app as rankscope_app
from retrieval.systems import builtin, label
from retrieval.systems import shown as shown_by_default
from tests.conftest import DEMO, store_copy
from tests.helpers import app_client, patience

pytestmark = [pytest.mark.server, pytest.mark.slow]  # starts the real app


def shown(status: str) -> str:
    """A status as the browser shows it (user text in it is escaped: ``ui.present.escape``)."""
    return html.unescape(status)


@pytest.fixture(scope="module")
def running_app(tiny_model_dir, tmp_path_factory, demo_sparse_store):
    # the demo's learned sparse vectors already stored: no SPLADE build runs beside the tests
    store = store_copy(demo_sparse_store, tmp_path_factory.mktemp("app-store") / "store.sqlite3")
    # local use: clients may name any model folder (a test below compares with a second tiny encoder);
    # the closed list of a shared server is tests/security/test_hostile.py's
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store), trust_clients=True)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store, max_upload="1mb"))
    yield demo, registry, store
    demo.close()


@pytest.fixture
def client(running_app):
    return app_client(running_app[0].local_url)


def demo_queries():
    return [json.loads(line) for line in (DEMO / "queries.jsonl").read_text().splitlines()]


def test_named_endpoints(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/search", "/evaluate", "/load_dataset"} <= names


def test_no_event_outputs_a_layout_block(running_app):
    """Gradio's page re-reads every component an event has output, with everything inside it, each
    time any event starts or ends: an event whose output is the tabs (or any block holding others)
    would make every later round trip in the page pay for the whole app."""
    config = running_app[0].get_config_file()
    kinds = {c["id"]: c["type"] for c in config["components"]}
    holders = {"tabs", "tabitem", "row", "column", "group", "accordion", "form", "sidebar"}
    layout_outputs = [(d.get("api_name"), kinds.get(o)) for d in config["dependencies"] for o in d["outputs"]
                      if kinds.get(o) in holders]
    assert layout_outputs == []


def test_search_free_text_returns_three_ranked_lists(client):
    html, result = client.predict("leaky faucet washer", api_name="/search")
    # the Search view's default columns: the first four systems shown by default (the learned sparse
    # index is built already: the store holds its vectors)
    assert list(result["systems"]) == list(shown_by_default()[:4]) == ["bm25", "dense", "hybrid", "splade"]
    assert result["query_id"] is None  # not a labelled query: no relevance marks
    for system, hits in result["systems"].items():
        assert 1 <= len(hits) <= 10
        assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
        assert all(h["label"] is None for h in hits)
        for h in hits:
            assert h["ranks"][system] == h["rank"]  # its own rank, and the others' ranks beside it
    for h in result["systems"]["bm25"]:  # why each BM25 hit scored: its per-term contributions
        assert h["matched_terms"]
        assert sum(v for _, v in h["bm25_terms"]) == pytest.approx(h["score"], rel=1e-3)
        assert {t for t, _ in h["bm25_terms"]} == set(h["matched_terms"])
    assert "<mark>" in html and 'class="sbs"' in html and "BM25 terms:" in html
    for h in result["systems"]["dense"]:  # what carries a dense score: the query words, the passages
        why = h["score_why"]
        assert why["score"] == pytest.approx(h["score"], abs=1e-5) and len(why["words"]) == 3 and why["segments"]
    for h in result["systems"]["hybrid"]:  # the hybrid's score, split into its parts
        assert h["score_why"]["lexical"] + h["score_why"]["dense"] == pytest.approx(h["score"], abs=1e-5)
    assert html.count("Query words carrying the dense score:") == len(result["systems"]["dense"]) + len(
        result["systems"]["hybrid"]) and "best passage, cosine" in html


def test_search_labelled_query_marks_relevance(client):
    q = next(q for q in demo_queries() if q["_id"] == "q01")  # vocabulary mismatch query
    labels = {}
    for split in ("train", "test"):
        for line in (DEMO / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
            qid, doc, rel = line.split("\t")
            if qid == "q01":
                labels[doc] = int(rel)
    html, result = client.predict(q["text"], api_name="/search")
    assert result["query_id"] == "q01"
    assert {r["doc_id"]: r["label"] for r in result["relevant"]} == labels
    for hits in result["systems"].values():
        for h in hits:
            assert h["label"] == labels.get(h["doc_id"])
    best = max(labels, key=labels.get)
    bm25_rank = next(r for r in result["relevant"] if r["doc_id"] == best)["ranks"]["bm25"]
    assert bm25_rank is None  # the mismatch query shares no term with its answer: BM25 never retrieves it
    assert list(result["per_query_metrics"]) == list(shown_by_default()[:4])
    assert "Labelled documents for q01" in html


def test_empty_query_is_a_clear_error(client):
    with pytest.raises(Exception, match="type a query"):
        client.predict("   ", api_name="/search")


def test_segments_endpoint(client):
    table = client.predict("test", api_name="/segments")
    assert table["headers"][:3] == ["kind", "segment", "queries"] and "BM25" in table["headers"]
    kinds = {row[0] for row in table["data"]}
    assert {"length", "form"} <= kinds  # the demo's test queries: every kind with 5 queries or more
    for row in table["data"]:
        assert row[2] >= 5 and re.fullmatch(r"\d\.\d{4} \[\d\.\d{3}, \d\.\d{3}\]", row[3])


def test_evaluate_endpoint(client):
    caption, table, wins = client.predict("test", [], api_name="/evaluate")
    rows = {r[0]: r for r in table["data"]}
    # the systems shown by default (retrieval.systems.shown); learned sparse once its background build is done
    assert {"BM25", "Dense", "Hybrid (CLEAR λ)"} <= set(rows) <= {label(s) for s in shown_by_default()}
    assert "tuned on train" in caption
    for row in rows.values():  # "0.5776 [0.420, 0.733]†": the mean, its 95% interval, the mark
        value, low, high = map(float, re.fullmatch(r"(\S+) \[(\S+), (\S+)\]†?", row[1]).groups())
        assert 0.0 <= low <= value + 5e-4 and value <= high + 5e-4 <= 1.0005
    assert "What the table lets you conclude" in caption  # every pair of systems, in words
    pairs = len(rows) * (len(rows) - 1) // 2
    assert sum(" beats " in line or "not separable yet" in line for line in caption.splitlines()) == pairs
    n_test = len((DEMO / "qrels" / "test.tsv").read_text().splitlines()) - 1
    assert 0 < len(wins["data"]) <= n_test


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_evaluate_with_an_int8_and_a_reduced_index(client, running_app):
    _, table, _ = client.predict("test", ["int8", "pca"], api_name="/evaluate")
    labels = [r[0] for r in table["data"]]
    # the systems shown by default once (BM25 the base of the † marks), then each dense and hybrid system of
    # each index
    base = [x for x in labels if " · " not in x]
    assert base[:3] == ["BM25", "Dense", "Hybrid (CLEAR λ)"] and set(base) <= {label(s) for s in shown_by_default()}
    encoded = [label(s) for s in shown_by_default() if builtin(s).needs.vectors]  # those an index changes
    assert encoded[:2] == ["Dense", "Hybrid (CLEAR λ)"]
    assert labels[len(base):] == ([f"{x} · int8 index" for x in encoded]
                                  + [f"{x} · PCA 16 dims" for x in encoded])  # the tiny encoder: 32 dims
    flat = {r[0]: r for r in table["data"]}
    assert flat["Dense · int8 index"][1] != "" and flat["Dense"][1] != ""


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_compression_endpoint_gives_sizes_and_quality(client):
    table = client.predict("test", api_name="/compression")
    rows = {r[0]: dict(zip(table["headers"], r)) for r in table["data"]}
    assert set(rows) == {"float32 (flat)", "int8 (sq8)", "float32 (flat) · 16 dims", "int8 (sq8) · 16 dims"}
    assert rows["float32 (flat)"]["bytes/doc (codes)"] == 128 and rows["float32 (flat)"]["dense ndcg@10 Δ"] == 0
    assert rows["int8 (sq8)"]["bytes/doc (codes)"] == 32  # one byte per dimension, against 4 × 32 float32
    assert rows["int8 (sq8)"]["× flat bytes"] == 0.25
    assert rows["int8 (sq8) · 16 dims"]["bytes/doc (codes)"] == 16
    for row in rows.values():
        assert 0.0 <= row["dense ndcg@10"] <= 1.0 and 0.0 <= row["hybrid ndcg@10"] <= 1.0


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_runs_history_and_comparing_two_runs(client):
    client.predict("test", [], api_name="/evaluate")  # makes sure BM25 and dense test runs are stored
    rows, a_choices, _ = client.predict(api_name="/runs")
    by_summary = {r[1].split(" · ")[0] + ":" + r[2]: r[4] for r in rows["data"]}
    bm25, dense = by_summary["bm25:test"], by_summary["dense:test"]
    note, table = client.predict(bm25, dense, "ndcg@10", api_name="/compare_runs")
    assert "B − A on test, nDCG@10" in note and "p = " in note
    deltas = {r[0]: r[4] for r in table["data"]}
    assert len(deltas) == len({q for q, *_ in (line.split("\t") for line in
                                                (DEMO / "qrels" / "test.tsv").read_text().splitlines()[1:])})
    assert all(abs(r[3] - r[2] - r[4]) < 1e-3 for r in table["data"])
    assert abs(deltas[table["data"][0][0]]) >= abs(table["data"][-1][4])  # biggest differences first
    note_same, table_same = client.predict(bm25, bm25, "ndcg@10", api_name="/compare_runs")
    assert all(r[4] == 0 for r in table_same["data"]) and "p = 1" in note_same
    with pytest.raises(Exception, match="not in the list of choices|unknown run"):
        client.predict(bm25, "not-a-run", "ndcg@10", api_name="/compare_runs")


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_failures_endpoint_and_the_offline_report(client):
    figure, cards_html, picks, gallery = client.predict("test", "", api_name="/failures")
    assert gallery["split"] == "test" and set(gallery["counts"]) >= {"vocabulary_mismatch", "lexical_trap",
                                                                      "both_fail", "fixed_by_hybrid"}
    n_cards = sum(len(c) for c in gallery["cards"].values())
    assert cards_html.count('class="rs-card"') == n_cards
    for cards in gallery["cards"].values():
        for card in cards:
            assert f'data-query-id="{card["query_id"]}"' in cards_html
            assert set(card["ranks"]) >= {"bm25", "dense", "hybrid"}
            assert card["dense_why"]["segments"] and card["hybrid_why"]["dense_why"] == card["dense_why"]
    assert cards_html.count("Query words carrying the dense score:") == n_cards
    assert cards_html.count('class="rs-terms rs-why">Hybrid ') == n_cards
    # the report: one HTML file, nothing fetched from elsewhere, every card in it
    path = client.predict("test", "", api_name="/export_failures")
    report = open(path, encoding="utf-8").read()
    assert report.startswith("<!DOCTYPE html>") and report.count('class="rs-card"') == n_cards
    assert report.count("Query words carrying the dense score:") == n_cards
    assert "<script src=" not in report and "<link " not in report
    assert report.count("Plotly.newPlot") >= 2  # the counts chart and the recall curves at least


@pytest.mark.slow
def test_project_endpoint_base_beside_fine_tuned(client, running_app, tmp_path):
    status, figure, hist, summary = client.predict("test", 10, "", "", api_name="/project")
    counts = summary["counts"]
    assert counts["query"] == 10 and counts["hard negative"] == 30 and counts["easy negative"] == 30
    assert summary["points"] == sum(counts.values())
    assert "fitted in" in status or "from the cache" in status
    again = client.predict("test", 10, "", "", api_name="/project")[3]
    assert again["cached"] == [True]  # the same sample and encoder: read from the store
    # beside a second encoder (another tiny random BERT standing in for a fine-tuned one)
    from tests.conftest import build_tiny_encoder

    other = str(build_tiny_encoder(tmp_path, seed=1))
    status2, _, _, both = client.predict("test", 10, "", other, api_name="/project")
    assert len(both["cached"]) == 2 and both["cached"][0] is True and both["cached"][1] is False
    assert set(both["mean_similarity"]) == {"base", "fine-tuned"}
    assert both["mean_similarity"]["base"] == summary["mean_similarity"]["base"]


@pytest.mark.slow
def test_project_one_query_and_its_neighbourhood(client):
    q = next(q for q in demo_queries() if q["_id"] == "q01")
    _, _, _, summary = client.predict("test", 10, q["text"], "", api_name="/project")
    assert summary["counts"]["query"] == 1 and summary["points"] > 10


def write_beir_zip(path, corpus_lines, queries=None, qrels=None):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mini/corpus.jsonl", "\n".join(corpus_lines) + "\n")
        if queries:
            z.writestr("mini/queries.jsonl", "\n".join(json.dumps(q) for q in queries) + "\n")
        if qrels:
            z.writestr("mini/qrels/test.tsv", "query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    return path


def test_bad_upload_reports_line_and_keeps_previous_data_set(client, tmp_path):
    bad = tmp_path / "corpus.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "text": broken\n')
    out = client.predict([handle_file(str(bad))], api_name="/load_dataset")
    status = out[0]  # session state is not part of the API's outputs
    assert "corpus.jsonl:2:" in shown(status) and "previous data set is still loaded" in status
    _, result = client.predict("leaky faucet washer", api_name="/search")
    assert any(h["doc_id"].startswith("home-") for h in result["systems"]["bm25"])  # still the demo


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_upload_switches_data_set_for_this_session_only(running_app, client, tmp_path):
    docs = [json.dumps({"_id": f"m{i}", "title": f"Mini {i}", "text": t}) for i, t in enumerate(
        ["glaciers carve valleys slowly", "volcanoes erupt molten rock", "rivers erode canyons over time",
         "deserts receive little rain", "tides follow the moon"])]
    path = write_beir_zip(tmp_path / "mini.zip", docs, [{"_id": "g1", "text": "how do glaciers shape land"}],
                          ["g1\tm0\t2", "g1\tm2\t1"])
    out = client.predict([handle_file(str(path))], api_name="/load_dataset")
    assert "Loaded" in out[0] and "mini" in out[1]
    _, result = client.predict("how do glaciers shape land", api_name="/search")
    assert result["query_id"] == "g1"
    assert {h["doc_id"] for h in result["systems"]["dense"]} <= {f"m{i}" for i in range(5)}
    other = app_client(running_app[0].local_url)  # a second user still sees the demo
    _, theirs = other.predict("leaky faucet washer", api_name="/search")
    assert any(h["doc_id"].startswith("home-") for h in theirs["systems"]["bm25"])


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_loading_reports_encoding_progress(client, tmp_path):
    corpus = tmp_path / "progress.jsonl"
    corpus.write_text("\n".join(json.dumps({"_id": f"x{i}", "text": f"passage {i} about item {i * 7} " * 10})
                                for i in range(1200)) + "\n")
    job = client.submit([handle_file(str(corpus))], api_name="/load_dataset")
    updates = []
    while not job.done():
        status = job.status()
        updates += [(p.desc, p.progress) for p in (status.progress_data or [])]
        time.sleep(0.02)
    assert "Loaded" in job.result()[0]
    encoding = [(d, f) for d, f in updates if d and d.startswith("encoding")]
    assert encoding, f"no encoding progress seen in {updates[:5]}"
    assert all(0 < f <= 1 for _, f in encoding)
    assert any("/1200 documents" in d for d, _ in encoding)


@pytest.mark.slow
def test_training_runs_in_background_and_search_can_switch_encoder(client):
    # a short schedule: 2 steps per epoch on the demo train split, tiny encoder
    out = client.predict("triplet", "bm25", 1, 8, 1e-3, 64, 2, 0.1, 0.3, 0.01, "cpu", 0.8, api_name="/train")
    assert "queued" in out[0]
    job_id = out[0].split("`")[1]
    _, searched = client.predict("leaky faucet washer", api_name="/search")  # the app keeps serving
    assert searched["systems"]["bm25"]
    deadline = time.time() + patience(240)
    while True:
        job = client.predict(job_id, api_name="/training_status")
        if job["status"] in ("done", "failed", "cancelled") or time.time() > deadline:
            break
        time.sleep(0.5)
    assert job["status"] == "done", job.get("error")
    # the default held-out check: 8 of the 39 train queries; refit on all 39 only when the epoch beat the base
    verdict = job["result"]["verdict"]
    assert verdict.startswith("held-out selection on 8 queries: "), verdict
    refit = "refit on all 39 train queries for 1 epoch" in verdict
    assert refit == ("the base is kept" not in verdict)
    assert [step for _, step, _ in job["losses"]] == [1, 2] * (2 if refit else 1)  # max 2 steps per epoch
    assert job["progress"]["stage"].startswith("evaluating")
    metrics = job["result"]["metrics"]
    assert set(metrics) == {"base", "fine-tuned"} and set(metrics["fine-tuned"]) == {"dense", "hybrid"}
    model_path = job["model_path"]
    out = client.predict(model_path, api_name="/use_encoder")
    assert model_path in shown(out[0])  # the summary names the encoder now in use
    _, result = client.predict("leaky faucet washer", api_name="/search")
    assert len(result["systems"]["dense"]) == 10


def test_the_server_serves_no_file_outside_its_cache(running_app):
    import urllib.error
    import urllib.request

    demo, registry, store = running_app
    for path in ("/etc/passwd", str(rankscope_app.ROOT / "app.py"), str(store),
                 str(rankscope_app.ROOT / "data" / "demo" / "corpus.jsonl")):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{demo.local_url}gradio_api/file={path}")
        assert err.value.code in (403, 404), path


def test_uploads_over_the_size_limit_are_refused(running_app, tmp_path):
    import requests

    demo = running_app[0]
    big = tmp_path / "corpus.jsonl"
    big.write_bytes(b'{"_id": "d", "text": "' + b"x" * (2 * 1024 * 1024) + b'"}\n')
    with big.open("rb") as f:
        r = requests.post(f"{demo.local_url}gradio_api/upload", files={"files": f})
    assert r.status_code == 413, r.text
    small = tmp_path / "small.jsonl"
    small.write_text('{"_id": "d", "text": "fine"}\n')
    with small.open("rb") as f:
        r = requests.post(f"{demo.local_url}gradio_api/upload", files={"files": f})
    assert r.status_code == 200
    # what Gradio cached is served (so the refusals above are the blocking, not a dead route)
    served = requests.get(f"{demo.local_url}gradio_api/file={r.json()[0]}")
    assert served.status_code == 200 and served.text == small.read_text()


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_add_queries_endpoint_takes_a_txt_file_and_typed_lines(client, tmp_path):
    log = tmp_path / "queries.txt"
    log.write_text("why is my tap dripping\nbest way to clean an oven\n")
    out = client.predict([handle_file(str(log))], "descale a kettle", api_name="/add_queries")
    assert "Added 3 queries" in shown(out[0]) and "74 queries" in out[1]  # the demo's 71, and three more
    _, result = client.predict("descale a kettle", api_name="/search")
    assert result["query_id"].startswith("q-") and result["relevant"] == []  # no labels yet
    bad = tmp_path / "bad.csv"
    bad.write_text("query,notes\nok query,fine\nbroken,row,here\n")
    out = client.predict([handle_file(str(bad))], "", api_name="/add_queries")
    assert "bad.csv:3:" in shown(out[0]) and "unchanged" in out[0]


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_import_run_endpoint_puts_the_run_beside_the_others(client, running_app, tmp_path):
    from retrieval.data.ranking import sorted_hits
    from retrieval.data.readers import load_dataset
    from retrieval.files.trec import write_trec

    demo = load_dataset(DEMO)
    # an "oracle" system: each test query's labelled documents, best label first
    oracle = {q: [(d, float(v)) for d, v in sorted(labels.items(), key=lambda kv: -kv[1])]
              for q, labels in demo.qrels["test"].items()}
    path = write_trec(oracle, tmp_path / "vendor.trec", "vendor")
    out = client.predict(handle_file(str(path)), "", api_name="/import_run")
    assert "Imported run vendor:" in shown(out[0])
    caption, table, wins = client.predict("test", [], api_name="/evaluate")
    vendor = next(r for r in table["data"] if r[0] == "vendor")
    assert vendor[1] == "1.0000 [1.000, 1.000]†"  # the ideal nDCG@10 on every query: no spread
    assert wins["headers"][-2:] == ["vendor", "disagreement"]
    _, result = client.predict(demo.queries["q02"], api_name="/search")
    assert list(result["systems"]) == ["bm25", "dense", "hybrid", "vendor"]  # put beside them after import
    # read in as trec_eval reads the file: equal labels ranked by document id, descending
    assert [h["doc_id"] for h in result["systems"]["vendor"]] == [d for d, _ in sorted_hits(oracle["q02"])]
    _, theirs = app_client(running_app[0].local_url).predict("leaky faucet", api_name="/search")
    assert "vendor" not in theirs["systems"]  # another session does not see it


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_judging_endpoints_queue_judge_export_and_use(client, tmp_path):
    from retrieval.data.readers import read_qrels

    progress, html, shown = client.predict("bea", 2, False, api_name="/judge_queue")
    assert "Judged 0 of" in progress and shown["query_id"] and shown["doc_id"] and "judge-pair" in html
    pooled = shown["pooled"]
    progress, _, nxt = client.predict("bea", shown["query_id"], shown["doc_id"], 2, 2, False, api_name="/judge")
    assert f"Judged 1 of {pooled}" in progress
    assert (nxt["query_id"], nxt["doc_id"]) != (shown["query_id"], shown["doc_id"])
    client.predict("bea", shown["query_id"], shown["doc_id"], 1, 2, False, api_name="/judge")  # changed later
    path = client.predict("trec", False, "median", api_name="/export_qrels")
    assert read_qrels(path) == {shown["query_id"]: {shown["doc_id"]: 1}}
    out = client.predict("imported", api_name="/use_judgments")
    assert "Every view uses 1 judgment of 1 query" in html_unescape(out[0])
    settled = client.predict(2, "auto", 200, 0, api_name="/settled")  # one judged query: nothing settles yet
    assert "Which comparisons are settled" in settled and "too few queries to compare" in settled
    note, rules = client.predict(api_name="/agreement")
    assert "1 judge so far" in note
    client.predict("cal", shown["query_id"], shown["doc_id"], 0, 2, False, api_name="/judge")  # a second judge
    note, rules = client.predict(api_name="/agreement")
    assert "bea / cal" in note and "Krippendorff" in note and "1 pair(s) graded differently" in note
    path = client.predict("trec", False, "cal", api_name="/export_qrels")  # one judge's grades alone
    assert read_qrels(path) == {shown["query_id"]: {shown["doc_id"]: 0}}


def test_the_query_table_sorts_by_predicted_difficulty_and_judging_starts_with_the_hardest(client):
    """Search's query table through its endpoint (computed in the background: asked again until it is
    ready), hardest first and easiest first; the judging option "the queries predicted to fail first"
    opens a queue over the hardest queries, the same ones the table lists first."""
    def table(order: str) -> str:
        for _ in range(600):
            shown, _timer = client.predict(order, api_name="/query_difficulty")
            if "data-query-id" in shown:
                return shown
            time.sleep(0.5)
        raise AssertionError("the query table never filled")

    def rows(shown: str) -> list[tuple[str, float]]:
        return [(html.unescape(q), float(d)) for q, d in re.findall(
            r'<tr data-query-id="([^"]*)".*?</td><td>.*?</td><td class=rs-count>([0-9.]+)</td>', shown)]

    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert "/query_difficulty" in names and not any("on_show" in n for n in names)  # Judge's table: no endpoint
    hardest, easiest = rows(table("hardest")), rows(table("easiest"))
    assert len(hardest) == len(demo_queries()) and [d for _, d in hardest] == sorted((d for _, d in hardest),
                                                                                      reverse=True)
    assert easiest == list(reversed(hardest))
    progress, pair, shown = client.predict("dee", 2, False, "predicted", 5, 0, "", api_name="/judge_queue")
    assert "queries predicted to fail first, hardest first" in html.unescape(progress)
    assert shown["query_id"] in {q for q, _ in hardest[:5]}
