"""The views' handlers called directly, without a server: what each returns on the demo (real BM25,
tiny BERT, FAISS, SQLite; the same functions the app's events call)."""
from __future__ import annotations

import html
import re

import gradio as gr
import pytest

from retrieval.store import Store
from retrieval.systems import label
from tests.conftest import demo_app_state
from training.job import JobQueue
from ui import common, data, evaluate, failures, runs, search, train
from ui.registry import Registry


def shown(status: str) -> str:
    """A status as the browser shows it (user text in it is escaped: ``ui.present.escape``)."""
    return html.unescape(status)


@pytest.fixture(scope="module")
def app_state(tmp_path_factory, tiny_model_dir, demo_sparse_store):
    yield from demo_app_state(tmp_path_factory, tiny_model_dir, demo_sparse_store, "handlers")


@pytest.fixture
def own_builds_end():
    """For a test that opens corpora on a registry of its own: the background builds it started (the
    learned sparse index of the demo's 384 documents, which nothing in it waits for) are stopped when it
    ends, not left encoding beside the module's next tests until the module ends."""
    from retrieval.index.background_build import running

    before = {id(b) for b in running()}
    yield
    mine = [b for b in running() if id(b) not in before]
    for build in mine:  # every one told first, so none goes on encoding while another is waited for
        build.stop(timeout=0)
    for build in mine:
        build.wait(60)


@pytest.fixture(scope="module")
def built_app(app_state):
    """The whole app (``shell.build_app``) over the demo's workspace, built once: the tests that read its
    tables and its events' listeners only read it (what a call of an event does is kept by its session);
    built once the demo's background builds are over, as the ``ws`` fixture leaves them."""
    from ui import shell

    registry, key = app_state
    for build in registry.get(key).builds.values():
        build.follow(None, None, 0.05)
    return shell.build_app(registry, key, JobQueue(registry.store))


@pytest.fixture
def ws(app_state):
    """The demo's workspace, its background builds over (what each view shows does not change mid-test)."""
    registry, key = app_state
    ws = registry.get(key)
    for build in ws.builds.values():
        build.follow(None, None, 0.05)
    return ws


def test_search_free_text_and_by_id(ws):
    html, result = search.search(ws, "leaky faucet washer")
    assert set(result["systems"]) == set(search.default_columns(ws)) and result["query_id"] is None
    assert {"bm25", "dense", "hybrid"} <= set(result["systems"])
    assert html.count('class="hit"') == sum(len(h) for h in result["systems"].values())
    text, html, result = search.search_by_id(ws, "q01")
    assert text == ws.dataset.queries["q01"] and result["query_id"] == "q01"
    assert "Labelled documents for q01" in html
    assert ("[" + result["split"] + "] q01: " + text, "q01") in common.query_choices(ws)
    with pytest.raises(gr.Error, match="type a query"):
        search.search(ws, "  ")


def test_search_says_which_query_words_and_passage_carry_a_dense_hit(ws):
    page, result = search.search(ws, "leaky faucet washer", ["dense", "hybrid"])
    top = result["systems"]["dense"][0]
    why = top["score_why"]
    assert why["score"] == pytest.approx(top["score"], abs=1e-5)
    assert sorted(w["word"] for w in why["words"]) == ["faucet", "leaky", "washer"]
    first = max(why["words"], key=lambda w: w["share"])
    best = max(why["segments"], key=lambda s: s["score"])
    doc = ws.dataset.docs[top["doc_id"]]
    passage = doc.full_text[best["start"]:best["end"]]
    column = page.split('<div class="col">')[1]  # the dense column
    first_hit = column.split('<div class="hit">')[1]
    carried = first_hit.split("Query words carrying the dense score: ")[1].split("</div>")[0]
    without_first = why["score"] - first["share"]
    assert carried.startswith(f'<span class="why-word" title="the score without it: {without_first:.3f}">'
                              f"{first['word']}</span>")  # the word whose removal costs most comes first
    assert f"best passage, cosine {best['score']:.3f}" in first_hit and passage in shown(first_hit)
    hybrid = result["systems"]["hybrid"][0]["score_why"]
    assert hybrid["lexical"] + hybrid["dense"] == pytest.approx(result["systems"]["hybrid"][0]["score"], abs=1e-6)
    assert f"Hybrid {hybrid['score']:.3f} = lexical {hybrid['lexical']:.3f}" in page


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_evaluate_gives_caption_metrics_and_per_query_rows(ws):
    caption, rows, wins = evaluate.evaluate(ws, "test", [])
    assert "tuned on train" in caption
    # the systems shown by default (the registry's), but those whose index is still being built
    shown = [label(s) for s in ws.shown_systems if not ws.pending([s])]
    assert {"BM25", "Dense", "Hybrid (CLEAR λ)"} <= set(shown)
    assert [r[0] for r in rows] == shown
    n_test = len(ws.dataset.split_queries("test"))
    assert wins["headers"] == ["query", "text", *shown, "disagreement"]
    width = len(shown) + 3
    assert len(wins["data"]) == n_test and all(len(r) == width and 0 <= r[-1] <= 1 for r in wins["data"])
    assert any(r[-1] > 0 for r in wins["data"])  # BM25 and the random tiny encoder rank differently
    gains = [max(r[3:-1]) - r[2] for r in wins["data"]]
    assert gains[0] == pytest.approx(max(gains), abs=1e-3)  # the biggest gain of any system over BM25 first
    _, with_int8, _ = evaluate.evaluate(ws, "test", ["int8"])
    assert [r[0] for r in with_int8][-2:] == ["Dense · int8 index", "Hybrid (CLEAR λ) · int8 index"]
    with pytest.raises(gr.Error, match="no relevance labels"):
        evaluate.evaluate(ws, "", [])


def test_a_system_shown_on_request_is_evaluated_when_picked_with_its_weights_and_why(app_state, ws):
    from retrieval.systems import keys

    registry, _ = app_state
    requested = [s for s in keys() if s not in ws.shown_systems]
    choices = evaluate.extras_choices(registry, ws)
    assert requested and choices[:len(requested)] == [(label(s), s) for s in requested]
    weighed = [s for s in requested if ws.system(s).weights(ws, "test")]
    assert weighed, "no system shown on request has weights of its own"
    caption, rows, wins = evaluate.evaluate(ws, "test", weighed)
    assert [r[0] for r in rows][-len(weighed):] == [label(s) for s in weighed]
    assert wins["headers"][-1 - len(weighed):-1] == [label(s) for s in weighed]
    for s in weighed:
        for w in ws.system(s).weights(ws, "test"):
            assert f"**{label(s)}**: {w.name} = " in shown(caption) and w.how in shown(caption)
    plain, rows, _ = evaluate.evaluate(ws, "test", [])
    assert not any(label(s) in r[0] for s in weighed for r in rows) and "**: μ" not in shown(plain)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_failures_cards_and_picks_name_query_ids(ws):
    _, cards_html, picks, gallery = failures.failures(ws, "test", "")
    n_cards = sum(len(c) for c in gallery["cards"].values())
    assert cards_html.count('class="rs-card"') == n_cards > 0
    ids = {value for _, value in picks["choices"]}
    assert ids == {c["query_id"] for cards in gallery["cards"].values() for c in cards} <= set(ws.dataset.queries)
    report = failures.export(ws, "test", "")
    assert open(report, encoding="utf-8").read().count('class="rs-card"') == n_cards


def test_loading_a_broken_file_names_the_line_and_keeps_the_data_set(app_state, tmp_path):
    registry, key = app_state
    bad = tmp_path / "corpus.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "text": broken\n')
    loaded = data.load_files(registry, key, [str(bad)])
    assert not loaded.ok and loaded.key == key
    assert "corpus.jsonl:2:" in shown(loaded.status) and "previous data set is still loaded" in shown(loaded.status)
    assert registry.get(key).dataset.name == "demo"
    with pytest.raises(gr.Error, match="choose one or more files"):
        data.load_files(registry, key, [])


def test_runs_compare_refuses_unknown_keys(app_state, ws):
    registry, _ = app_state
    evaluate.evaluate(ws, "test", [])
    rows, choices, _ = runs.runs(registry.store, ws)
    keys = [value for _, value in choices["choices"]]
    note, table = runs.compare(registry.store, ws, keys[0], keys[0], "ndcg@10")
    assert "p = 1" in note and all(r[4] == 0 for r in table)
    with pytest.raises(gr.Error, match="unknown run"):
        runs.compare(registry.store, ws, keys[0], "not-a-run", "ndcg@10")


def test_training_form_values_are_checked_before_a_job_is_queued(app_state, ws):
    registry, _ = app_state
    jobs = JobQueue(registry.store)
    with pytest.raises(gr.Error, match="batch size"):
        train.start(registry, jobs, ws, {"loss": "triplet", "batch_size": 1}, 0.8)
    assert registry.store.jobs() == []


def test_judged_queries_train_in_one_step_and_base_and_trained_are_compared_on_the_judged_rest(app_state, ws):
    from retrieval.data.dataset import Dataset
    from retrieval.judging.labels import JUDGED

    registry, _ = app_state
    demo = ws.dataset
    judged = Dataset("demo-judged", demo.docs, demo.queries, {JUDGED: demo.qrels["test"]})  # no train split
    few = Dataset("demo-few", demo.docs, demo.queries, {JUDGED: dict(list(demo.qrels["test"].items())[:6])})
    jobs = JobQueue(registry.store)
    values = {"loss": "inbatch", "epochs": 1, "batch_size": 4, "max_steps_per_epoch": 1, "device": "cpu"}
    few_ws = registry.get(data.open_dataset(registry, few).key)
    with pytest.raises(gr.Error, match="a part would hold fewer than 5; judge more queries"):
        train.start(registry, jobs, few_ws, values, 0.5, on=JUDGED)
    with pytest.raises(gr.Error, match="no judged queries with a relevant document yet"):
        train.start(registry, jobs, ws, values, 0.5, on=JUDGED)  # the demo has train and test, nothing judged
    assert registry.store.jobs() == []
    judged_ws = registry.get(data.open_dataset(registry, judged).key)
    job = jobs.wait(train.start(registry, jobs, judged_ws, values, 0.5, on=JUDGED), timeout=300)
    assert job["status"] == "done", job
    result = job["result"]
    n = len(demo.qrels["test"])
    assert result["plan_note"] == (f"cold-start split of '{JUDGED}' by query (seed 42): {n // 2} queries train (50%), "
                                   f"{n - n // 2} evaluate")
    base, tuned = result["metrics"]["base"]["dense"], result["metrics"]["fine-tuned"]["dense"]
    for side in (base, tuned):
        low, high = side["intervals"]["ndcg@10"]
        assert low <= side["ndcg@10"] <= high
    assert "interval" in result["differences"]["dense"]["ndcg@10"]


def test_an_encoder_that_will_not_load_is_a_clear_error_and_changes_nothing(app_state, ws, tmp_path):
    from retrieval.errors import EncoderLoadError
    from retrieval.index.encoder import load_encoder

    registry, key = app_state
    with pytest.raises(EncoderLoadError, match="as a local folder") as err:
        load_encoder(str(tmp_path))  # a folder, but no sentence-transformers model in it
    assert err.value.name == str(tmp_path)
    with pytest.raises(gr.Error, match="is not one this server offers"):  # not offered to a client at all
        search.use_encoder(registry, ws, str(tmp_path))
    broken = registry.store.models_dir / "broken"  # offered (a trained model's place), but no model
    broken.mkdir(parents=True, exist_ok=True)
    (broken / "modules.json").write_text("{")
    with pytest.raises(gr.Error, match="could not load encoder"):
        search.use_encoder(registry, ws, str(broken))
    assert registry.get(key) is ws


def test_an_unknown_split_is_its_own_error(ws):
    from retrieval.errors import UnknownSplit

    with pytest.raises(UnknownSplit) as err:
        ws.evaluate("bm25", "dev")
    assert err.value.splits == ws.dataset.splits and "it has: " in str(err.value)


def test_adding_queries_from_a_txt_file_and_typed_text(app_state, tmp_path):
    from retrieval.data.readers.queries import stable_query_id

    registry, key = app_state
    before = registry.get(key).dataset
    log = tmp_path / "log.txt"
    log.write_text("why is my tap dripping\n\nbest way to clean an oven\nwhy is my tap dripping\n")
    loaded = data.add_queries(registry, key, [str(log)], "descale a kettle\n")
    assert loaded.ok and loaded.key != key and "Added 3 queries" in shown(loaded.status)
    assert "1 repeated query kept once (e.g. line 4)" in shown(loaded.status)
    after = registry.get(loaded.key).dataset
    assert len(after.queries) == len(before.queries) + 3 and after.corpus_hash == before.corpus_hash
    assert after.queries[stable_query_id("descale a kettle")] == "descale a kettle"
    assert registry.get(key).dataset is before  # the session's previous workspace is untouched
    _, result = search.search(registry.get(loaded.key), "descale a kettle")
    assert result["query_id"] == stable_query_id("descale a kettle") and result["relevant"] == []
    clash = tmp_path / "clash.jsonl"
    clash.write_text('{"_id": "q01", "text": "something else entirely"}\n')
    refused = data.add_queries(registry, loaded.key, [str(clash)])
    assert not refused.ok and refused.key == loaded.key and "clash.jsonl" in shown(refused.status)
    assert "already in 'demo' with another text" in shown(refused.status)
    with pytest.raises(gr.Error, match="upload a queries file or type queries"):
        data.add_queries(registry, key, [], "  \n")
    # the set added is in Search's query-set picker, and picking it lists its queries
    ws = registry.get(loaded.key)
    options = search.query_set_options(registry, ws, registry.viewer(""))
    assert options[0] == ("labelled queries", search.LABELLED)
    added = next(value for name, value in options if name.startswith("log.txt, typed (3 queries)"))
    assert [qid for _, qid in search.set_queries(registry, ws, added, registry.viewer(""))] == [
        stable_query_id(t) for t in ("why is my tap dripping", "best way to clean an oven", "descale a kettle")]
    assert search.set_queries(registry, ws, search.LABELLED, registry.viewer("")) == common.query_choices(ws)
    assert search.query_set_choices(registry, ws, registry.viewer(""))["value"] == search.LABELLED
    with pytest.raises(gr.Error, match="no longer kept"):
        search.set_queries(registry, ws, "nope", registry.viewer(""))


@pytest.mark.slow
def test_warnings_name_broken_labels_an_english_only_encoder_and_an_untuned_lambda(tiny_encoder, tmp_path,
                                                                                   demo_sparse_store):
    from retrieval.data.dataset import Dataset, Document
    from retrieval.data.readers import load_dataset
    from retrieval.index.encoder import Encoder
    from retrieval.workspace import Workspace
    from tests.conftest import DEMO, store_copy
    from tests.retrieval.data.test_language import FRENCH

    # the demo's SPLADE vectors stored already: the learned sparse system on show is read, not encoded again
    store = Store(store_copy(demo_sparse_store, tmp_path / "w.sqlite3"))
    demo = load_dataset(DEMO)
    ids = demo.doc_ids
    shifted = {q: {ids[(ids.index(d) + 170) % len(ids)]: v for d, v in labels.items()}
               for q, labels in demo.qrels["test"].items()}
    broken = Workspace(Dataset("shifted", demo.docs, demo.queries, {"test": shifted}), store, model=tiny_encoder)
    caption, _, _ = evaluate.evaluate(broken, "test", [])
    assert "The <code>test</code> labels look broken" in shown(caption) and "λ is the label-free default" in caption
    assert "about 50 judged queries" in caption  # what fixes a corpus no label-free signal reads
    assert "look broken" in data.dataset_summary(broken)
    french = Dataset("fr", {f"f{i}": Document(f"f{i}", "", t) for i, t in enumerate(FRENCH)}, {"x": "robinet"})
    minilm_named = Encoder(tiny_encoder.model, name="all-MiniLM-L6-v2")
    notes = data.warnings(Workspace(french, store, model=minilm_named))
    assert any("`fr`" in n and "trained on English only" in n for n in notes)
    assert any("No relevance labels" in n and "judged queries can tune λ" in n for n in notes)
    assert data.warnings(Workspace(demo, store, model=tiny_encoder)) == []


@pytest.mark.slow  # calls ranx itself: its numba kernels compile on a fresh install
def test_an_imported_run_stands_beside_the_others_in_search_and_evaluate(app_state, tmp_path):
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate as ranx_evaluate

    from retrieval.files.trec import write_trec

    registry, key = app_state
    ws = registry.get(key)
    # the analyst's "production system": here BM25's test run, written as a TREC file under another tag
    path = write_trec(ws.run("bm25", "test"), tmp_path / "prod.trec", "prod")
    loaded = data.import_run(registry, key, str(path), "")
    assert loaded.ok and "Imported run prod:" in shown(loaded.status)
    mine = registry.get(loaded.key)
    assert "prod" in mine.system_names and "prod" not in registry.get(key).system_names  # others unaffected
    caption, rows, wins = evaluate.evaluate(mine, "test", [])
    prod = next(r for r in rows if r[0] == "prod")
    qrels = {q: dict(v) for q, v in mine.dataset.qrels["test"].items()}
    expected = ranx_evaluate(RQrels(qrels), RRun.from_file(str(path), kind="trec"), "ndcg@10")
    assert float(prod[1].split()[0]) == pytest.approx(expected, abs=1e-4)
    assert wins["headers"][-2:] == ["prod", "disagreement"]
    text, html, result = search.search_by_id(mine, "q02", ["bm25", "dense", "hybrid", "prod"])
    assert list(result["systems"]) == ["bm25", "dense", "hybrid", "prod"] and html.count('class="col"') == 4
    assert [h["doc_id"] for h in result["systems"]["prod"]] == [h["doc_id"] for h in result["systems"]["bm25"]]
    _, free = search.search(mine, "leaky faucet washer", ["prod", "bm25"])  # typed: no run holds it
    assert free["systems"]["prod"] == [] and free["systems"]["bm25"]  # an imported run has no list for it
    # prod is BM25's run: "prod finds, Dense misses" is the exact-match miss, the reverse the vocabulary mismatch
    _, cards_html, _, gallery = failures.failures(mine, "test", "", failures.chosen_pair("dense", "prod"))
    assert tuple(gallery["pair"]) == ("dense", "prod")
    assert gallery["counts"]["pair_b_finds"] == gallery["counts"]["exact_match_miss"] > 0  # the random tiny encoder
    assert gallery["counts"]["pair_a_finds"] == gallery["counts"]["vocabulary_mismatch"]
    assert "prod finds, Dense misses" in cards_html
    assert failures.chosen_pair("prod", "prod") is None
    switched, *_ = search.use_encoder(registry, mine, "")  # another encoder: the session keeps its run
    assert "prod" in registry.get(switched).imported
    bad = tmp_path / "bad.trec"
    bad.write_text("q02 Q0 fin-001 1 0.9 prod\nq02 Q0 fin-002 2 high prod\n")
    refused = data.import_run(registry, loaded.key, str(bad), "other")
    assert not refused.ok and "bad.trec:2:" in shown(refused.status)


def unlabelled(tmp_path, tiny_model_dir, queries: int = 8):
    """A store, a registry, and the key of the demo's documents loaded without labels with
    ``queries`` of its questions added from a .txt (that file's path last)."""
    import json

    from tests.conftest import DEMO

    store = Store(tmp_path / "judge.sqlite3")
    registry = Registry(store, str(tiny_model_dir))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text((DEMO / "corpus.jsonl").read_text())
    loaded = data.load_files(registry, "", [str(corpus)])
    log = tmp_path / "log.txt"
    lines = (DEMO / "queries.jsonl").read_text().splitlines()[:queries]
    log.write_text("\n".join(json.loads(line)["text"] for line in lines))
    return store, registry, data.add_queries(registry, loaded.key, [str(log)]).key, log


def test_judging_an_unlabelled_corpus_gives_labels_every_view_uses(tiny_model_dir, tmp_path, own_builds_end):

    from retrieval.data.readers import read_qrels
    from retrieval.judging.labels import judged_counts
    from retrieval.judging.order import discounts
    from ui import judge
    from ui.present.counts import queries_counted

    store, registry, key, log = unlabelled(tmp_path, tiny_model_dir)
    again = data.add_queries(registry, key, [str(log)])  # the same file twice: nothing new, and it says so
    assert "No new queries for corpus: every one given is there already." in shown(again.status)
    key = again.key
    ws = registry.get(key)
    assert ws.dataset.qrels == {} and "No relevance labels" in data.dataset_summary(ws)
    q = judge.judging_queue(ws, store, "ana", k=2)
    assert q.judged_count == 0 and 8 <= q.pooled_count <= 8 * 3 * 2
    # aimed at one comparison: the first pair handed out is a document BM25 and dense rank differently
    assert judge.aim_choices(ws)[:2] == [("every pair of the systems on show", ""), ("BM25 vs Dense", "bm25|dense")]
    aimed = judge.judging_queue(ws, store, "ana", k=2, aim="bm25|dense")
    qid, doc = aimed.pairs[aimed.next_unjudged()]
    runs = judge.pool_runs(ws, 2, aimed.sample.query_ids)
    assert discounts(runs["bm25"], qid, 2).get(doc, 0) != discounts(runs["dense"], qid, 2).get(doc, 0)
    with pytest.raises(Exception, match="no pair of systems on show called"):
        judge.judging_queue(ws, store, "ana", k=2, aim="bm25|nope")
    first = {}
    for qid, doc in q.pairs:
        first.setdefault(qid, doc)
    position = q.next_unjudged()
    for _ in range(q.pooled_count):  # grade every pooled pair: each query's first pooled document 2, the rest 0
        qid, doc = q.pairs[position]
        q, position = judge.grade_pair(ws, store, "ana", qid, doc, 2 if first[qid] == doc else 0, k=2)
    assert position is None and q.judged_count == q.pooled_count
    note = judge.settled_note(ws, store, 2)
    assert "Which comparisons are settled" in note and "Judged@2" in note and "success@2" in note
    ws.pending = lambda names: [s for s in names if s != "bm25"]  # as while the corpus is still being encoded
    alone = judge.settled_note(ws, store, 2)
    waiting = ", ".join(label(s) for s in ws.shown_systems if s != "bm25")
    assert html.unescape(alone) == (  # the Markdown writer escapes (, ) and + as entities
        f"Only BM25 on show so far: a comparison needs two systems ({waiting} join once the corpus is encoded).")
    assert "Dense, Hybrid (CLEAR λ)" in waiting
    del ws.pending
    share = re.search(r"BM25 (\d+)% \[(\d+)%, (\d+)%\]", note)  # with its 95% interval over the judged queries
    assert int(share.group(1)) == 100  # a depth-2 pool judged whole: every system's top 2 (the gate reads that deep)
    assert int(share.group(2)) <= int(share.group(1)) <= int(share.group(3))
    first = next(line for line in judge.settled_note(ws, store, 2, aim="dense|hybrid").splitlines()
                 if line.startswith("- "))
    assert "Dense" in first and "Hybrid" in first and "BM25" not in first  # the comparison aimed at first
    progress, _, at = judge.show(ws, q, None)
    assert f"Judged {q.pooled_count} of {q.pooled_count}" in progress and at["position"] is None
    assert len(store.judgments(ws.dataset.corpus_hash, "ana")) == q.pooled_count  # each written when made
    trec = judge.export_qrels(ws, store, "trec")
    assert sum(len(v) for v in read_qrels(trec).values()) == q.pooled_count
    beir = judge.export_qrels(ws, store, "beir")
    assert beir.endswith("qrels/judged.tsv") and read_qrels(beir) == read_qrels(trec)
    ws2 = registry.labelled(key)  # every grade is a label at once, with no click
    assert set(ws2.dataset.splits) == {"judged"}  # every judged query evaluated, none held back
    assert ws2.bm25 is ws.bm25 and registry.get(key) is ws  # the same workspace's indexes; the session keeps its key
    applied = data.apply_judgments(registry, key, "judgments")  # which label wins a pair both label
    assert applied.ok and applied.key == key and registry.labelled(key).dataset.qrels == ws2.dataset.qrels
    caption, rows, _ = evaluate.evaluate(ws2, "judged", [])
    assert "cross-fitted: each half evaluated with λ tuned on the other half" in shown(caption)
    assert [r[0] for r in rows] == [label(s) for s in ws2.shown_systems if not ws2.pending([s])]
    assert [r[0] for r in rows][:3] == ["BM25", "Dense", "Hybrid (CLEAR λ)"]
    # one count of the judged queries, saying what it counts, in the Judge panel, the summary and Evaluate
    counts = judged_counts(ws2.dataset.qrels["judged"])
    assert (counts.queries, counts.relevant, counts.pairs) == (8, 8, q.pooled_count)
    said = queries_counted(counts)
    assert said == "8 judged queries (8 with a relevant document found)"
    assert said in judge.settled_note(ws, store, 2) and said in data.dataset_summary(ws2)
    assert said in shown(caption) and said in shown(applied.status)
    _, cards, _, gallery = failures.failures(ws2, "judged", "")
    assert gallery["split"] == "judged"
    store.close()


def test_the_load_message_says_where_the_vectors_came_from(tmp_path, tiny_model_dir, own_builds_end):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(f'{{"_id": "d{i}", "text": "passage {i} on topic {i % 5}"}}\n' for i in range(30)))
    path = tmp_path / "store.sqlite3"
    first = data.load_files(Registry(Store(path), str(tiny_model_dir)), "", [str(corpus)])
    assert "0 embeddings from the store, 30 encoded (cpu, " in shown(first.status)
    registry = Registry(Store(path), str(tiny_model_dir))  # a new start on the same store
    again = data.load_files(registry, "", [str(corpus)])
    assert "30 embeddings from the store, 0 encoded" in shown(again.status)
    reload = data.load_files(registry, again.key, [str(corpus)])  # the same corpus, already open
    assert "30 embeddings already in memory" in shown(reload.status)
    twins = tmp_path / "twins.jsonl"  # 30 documents, 10 texts each written three times
    twins.write_text("".join(f'{{"_id": "t{i}", "text": "twin text {i % 10}"}}\n' for i in range(30)))
    repeated = data.load_files(registry, reload.key, [str(twins)])
    assert "0 embeddings from the store, 10 encoded" in shown(repeated.status)
    assert "20 documents repeat another's text and share its vector" in shown(repeated.status)


def test_stored_judgments_are_the_labels_of_a_new_page_and_after_a_restart(tiny_model_dir, tmp_path, own_builds_end):
    """Judgments stored for a corpus are its labels in every view the moment they are stored, with no
    click: on the page open (the same workspace), after a reload, a load of the same files, and after a
    restart (a new registry on the same store)."""
    from retrieval.data.readers import load_uploads
    from tests.conftest import DEMO

    files = []
    for name in ("corpus.jsonl", "queries.jsonl"):  # the demo without its labels
        (tmp_path / name).write_text((DEMO / name).read_text())
        files.append(str(tmp_path / name))
    path = tmp_path / "s.sqlite3"
    store = Store(path)
    registry = Registry(store, str(tiny_model_dir))
    start = registry.open(load_uploads(files))  # as the app opens its data set at start-up
    ws = registry.get(start)
    assert ws.dataset.qrels == {} and data.restored_start(registry, start) is None  # nothing stored yet
    queries, docs = list(ws.dataset.queries)[:3], list(ws.dataset.docs)[:2]
    store.put_judgments(ws.dataset.corpus_hash, [(q, ws.dataset.queries[q], d, 2 if d == docs[0] else 0, "ann")
                                                 for q in queries for d in docs])

    page = registry.labelled(start)  # the page open, or reloaded: the same workspace, labelled now
    assert page.dataset.splits == ["judged"] and set(page.dataset.qrels["judged"]) == set(queries)
    assert data.restored_start(registry, start) is None  # nothing to reopen: the key stays
    assert "No relevance labels" not in data.dataset_summary(page)
    assert [r[0] for r in evaluate.evaluate(page, "judged", [])[1]][:1] == ["BM25"]
    loaded = data.load_files(registry, start, files)  # a load of the same files: the same workspace and labels
    assert loaded.key == start and "6 stored judgments of this corpus are its labels" in shown(loaded.status)
    store.close()

    store = Store(path)  # a restart
    registry = Registry(store, str(tiny_model_dir))
    start = registry.open(load_uploads(files))
    assert set(registry.labelled(start).dataset.qrels["judged"]) == set(queries)
    store.close()


def test_a_run_imported_while_judging_joins_the_judges_queue(app_state, tmp_path):
    from retrieval.files.trec import write_trec
    from retrieval.judging.judgments import top_ids
    from ui import judge

    registry, key = app_state
    ws, store = registry.get(key), registry.store
    q = judge.judging_queue(ws, store, "zed", k=2)
    q, _ = judge.grade_pair(ws, store, "zed", *q.pairs[q.next_unjudged()], 1, k=2)
    before = q.pairs[:q.handed]
    ids = q.sample.query_ids
    deep = ws.search("bm25", {i: ws.dataset.queries[i] for i in ids}, 30)
    prod = {i: [(d, float(r)) for r, (d, _) in enumerate(hits[::-1][:5], 1)][::-1] for i, hits in deep.items()}
    loaded = data.import_run(registry, key, str(write_trec(prod, tmp_path / "late.trec", "late")), "")
    mine = registry.get(loaded.key)
    joined = judge.judging_queue(mine, store, "zed", k=2)  # the session's new workspace: the same judging goes on
    assert joined is q and q.joined.systems == ("late",) and q.pairs[:len(before)] == before
    theirs = {(i, d) for i in ids for d in top_ids(mine.imported["late"].run, i, 2)} - set(before)
    assert q.joined.pairs == len(theirs) > 0
    graded = before[0][0]  # the graded query's pool is made whole first: the pairs the coverage gate counts
    first_up = theirs | {pair for pair in q.pairs if pair[0] == graded} - set(before)
    at, handed = len(before) - 1, []
    for _ in first_up:
        at = q.next_unjudged(at, wrap=False)
        handed.append(q.pairs[at])
    assert set(handed) == first_up


def test_the_settled_list_never_projects_more_judging_than_the_sample_can_give(tiny_model_dir, tmp_path,
                                                                               own_builds_end):
    """After a few judged queries of an 8-query set, no comparison is offered "about N more judgments
    (≈ M queries)" with M beyond the queries left to judge, nor "out of reach: the two score alike"
    on too few queries to tell."""
    from ui import judge

    store, registry, key, _ = unlabelled(tmp_path, tiny_model_dir)
    ws = registry.get(key)
    q = judge.judging_queue(ws, store, "ana", k=10)
    chosen = list(dict.fromkeys(qid for qid, _ in q.pairs))[:3]
    graded: set[str] = set()
    for qid, doc in [pair for pair in q.pairs if pair[0] in chosen]:  # three queries' whole top-10 pools
        q, _ = judge.grade_pair(ws, store, "ana", qid, doc, 2 if qid not in graded else 0, k=10)
        graded.add(qid)
    note = html.unescape(judge.settled_note(ws, store, 10))
    assert "- **open:**" in note  # covered pairs that are not settled: the projection is what is tested
    left = 8 - len(graded)
    for asked in re.findall(r"≈ ([\d,]+) queries", note):
        assert int(asked.replace(",", "")) <= left, note
    assert "the two score alike" not in note
    assert "settled:" not in note


def test_every_table_names_its_columns_before_it_is_computed(built_app, ws):
    """Gradio numbers the columns of a table made without headers ("1 | 2 | 3"): every table of the
    app names its own from the start, and again when an event empties it (sets it to None); the
    table by kind of query names the systems on show, and a newly opened data set gets its own."""
    from ui.present.tables import segment_headers

    app = built_app
    tables = {c["props"].get("elem_id") or c["id"]: c for c in app.get_config_file()["components"]
              if c["type"] == "dataframe"}
    assert len(tables) >= 13 and {"eval-segments", "compress-table", "eval-table", "query-sets"} <= set(tables)
    for name, c in tables.items():
        emptied = app.blocks[c["id"]].postprocess(None).headers
        for headers in (c["props"]["headers"], c["props"]["value"]["headers"], emptied):
            assert headers and not any(str(h).strip().isdigit() for h in headers), (name, headers)
    on_show = [label(s) for s in common.shown_systems(ws)]
    assert tables["eval-segments"]["props"]["headers"] == segment_headers(on_show)
    assert tables["compress-table"]["props"]["value"]["data"] == [[evaluate.COMPRESSION_WAITS]]
    view = evaluate.EvaluateView(None, [None] * 7)
    *_, by_kind, compressed = view.refresh(ws)
    assert by_kind == {"headers": segment_headers(on_show), "data": []}
    assert compressed == {"headers": ["index"], "data": [[evaluate.COMPRESSION_WAITS]]}


def test_a_refused_training_says_why_in_its_status_not_a_bare_error(app_state, built_app, ws):
    """Gradio marks the outputs of a failed event with a bare "Error" that stays once the notice has
    faded: the Train tab's status is written by the event's failure listener instead, saying what
    failed and why (an API client still gets the error itself)."""
    _, key = app_state
    app = built_app
    fns = list(app.fns.values())
    for name, what in (("train", "Could not start the training"), ("resume_training", "Could not resume the training")):
        event = next(f for f in fns if f.api_name == name)
        (listener,) = [f for f in fns if f.trigger_after == event._id and f.trigger_only_on_failure]
        status = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "train-status")
        assert [o._id for o in listener.outputs] == [status._id]
        request = gr.Request(session_hash=f"refused-{name}")
        args = ([key, "triplet", "bm25", 1, 1, 1e-3, 64, 0, 0.1, 0.3, 0.01, "cpu", 0.8] if name == "train"
                else [key])
        with pytest.raises(gr.Error) as refused:
            event.fn(*args, request=request)
        line = listener.fn(request=request)
        assert line.startswith(f"❌ **{what}:** ") and line.endswith(str(refused.value.message))
        assert ("batch size" if name == "train" else "no cancelled, failed or interrupted training") in shown(line)
        assert "unexpected" in listener.fn(request=request)  # read once: a later failure is not said to be this one
        assert "unexpected" in listener.fn(request=gr.Request(session_hash="never-refused"))  # said so, in words


def test_a_training_job_loads_the_workspaces_precision_and_a_resume_while_one_stops_is_refused(app_state, ws,
                                                                                                 tmp_path):
    """The job reads the base encoder at the precision the app's dense index was built with (its vectors are
    keyed by a fingerprint that covers it); a Resume click while a job of the session's stops after its cancel
    names that job instead of resuming an older one."""
    from dataclasses import asdict

    from training.trainer import TrainConfig

    registry, _ = app_state
    jobs = JobQueue(registry.store)
    values = {"loss": "triplet", "negatives": "random", "epochs": 1, "batch_size": 2, "max_steps_per_epoch": 1,
              "device": "cpu", "holdout": 0.0}
    job = jobs.wait(train.start(registry, jobs, ws, values, 0.8, session="prec"), timeout=300)
    assert job["status"] == "done", job
    assert job["config"]["precision"] == ws.loaded_encoder.precision
    stopping = "20260101-120000-abcdef"  # as the queue leaves a running job whose cancel was asked
    (tmp_path / "checkpoints").mkdir()
    registry.store.put_job({"id": stopping, "status": "cancelling", "kind": "train",
                            "owner": registry.viewer("prec").owner, "dataset": ws.dataset.content_hash,
                            "dataset_name": ws.dataset.name,
                            "model_path": str(tmp_path), "progress": {"stage": "triplet", "step": 1, "total": 1},
                            "config": {**asdict(TrainConfig.from_mapping(values)), "base_model": ws.model_name},
                            "losses": [], "error": "", "result": {}})
    with pytest.raises(gr.Error) as refused:
        train.resume(registry, jobs, ws, session="prec")
    assert html.unescape(str(refused.value)).strip("'") == \
        f"job {stopping} is still stopping after its cancel: resume it once it says cancelled"
    registry.store.put_job({"id": stopping, "status": "cancelled"})
    assert train.resume(registry, jobs, ws, session="prec") == stopping  # stopped: it resumes
    assert jobs.wait(stopping, timeout=300)["status"] == "done"  # from no checkpoint: it trains anew


def test_a_finished_jobs_line_says_how_many_pseudo_pairs_each_task_made():
    """The Train tab's status of a job with a first stage says how many pairs each task made (as the command
    line does), and where it resumed; not each stage's losses."""
    import html

    from training.finetune import noted_stages
    from ui.train import job_markdown

    stages = ["pretrain ict+bfs+wlp: 24 pseudo pairs (ict 8, bfs 8, wlp 8)", "pretrain ict+bfs+wlp: inbatch 1 epoch",
              "resumed after triplet epoch 1 from /x/checkpoints", "triplet: 2 epochs"]
    job = {"id": "20260101-120000-a1b2c3", "status": "done", "device": "cpu", "model_path": "/x",
           "result": {"plan_note": "trained", "seconds": 3.0, "stages": stages}}
    shown = html.unescape(job_markdown(job))  # as the page shows it (Markdown's characters are escaped)
    assert noted_stages(stages) == stages[::2]
    assert "pretrain ict+bfs+wlp: 24 pseudo pairs (ict 8, bfs 8, wlp 8)" in shown and "resumed after" in shown
    assert "inbatch 1 epoch" not in shown and "triplet: 2 epochs" not in shown
