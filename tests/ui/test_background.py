"""The dense index built in the background: BM25 answers while the corpus is encoded, the views and
the load message say where encoding stands, and dense and the hybrids join when it is done.

The encoder is the real tiny transformer; a gate (an ``Event``) holds its second batch of documents
back, so the test sees the build half way, every time, however fast the machine."""
from __future__ import annotations

import html
import threading
import time

import gradio as gr
import pytest

from retrieval import DenseNotReady, Workspace
from retrieval.data.dataset import Dataset, Document
from retrieval.evaluation.diagnostics import label_health
from retrieval.index.encoder import Encoder
from retrieval.side_by_side import side_by_side
from retrieval.store import text_hash
from retrieval.systems import BASE_SYSTEMS, SPLADE, label, shown
from tests.helpers import patience
from ui import data as data_view
from ui import embeddings as embeddings_view
from ui import evaluate as evaluate_view
from ui import failures as failures_view
from ui.common import metrics_rows, shown_systems
from ui.present.search import side_by_side_html
from ui.registry import Registry
from ui.search import default_columns
from ui.texts import BANNER_FOLLOWS

PART = 64  # documents per committed part (embed_corpus's commit_every)


class GatedEncoder(Encoder):
    """The tiny encoder, whose second and later corpus parts wait for ``gate``; with ``fail_once``
    the second part raises once instead (a crash half way)."""

    def __init__(self, inner: Encoder, fail_once: bool = False):
        super().__init__(inner.model, name=inner.name, precision=inner.precision)
        self.gate, self.calls, self.fail_once = threading.Event(), 0, fail_once

    def encode(self, texts, progress=None):
        if len(texts) > 1:  # a corpus part (a typed query is one text)
            self.calls += 1
            if self.calls == 2:
                if self.fail_once:
                    self.fail_once = False
                    raise RuntimeError("out of memory (simulated on the second part)")
                assert self.gate.wait(60), "the test never opened the gate"
        return super().encode(texts, progress)


def corpus(n: int = 3 * PART) -> Dataset:
    docs = {f"d{i}": Document(f"d{i}", f"title {i}", f"passage {i} about glaciers and rivers number {i * 7}")
            for i in range(n)}
    docs["d5"] = Document("d5", "Glacier", "a glacier carves valleys as it moves")
    queries = {"q1": "how do glaciers carve valleys", "q2": "rivers number 14"}
    return Dataset("bg", docs, queries, {"test": {"q1": {"d5": 2}, "q2": {"d2": 1}}})


@pytest.fixture
def gated(tiny_encoder):
    enc = GatedEncoder(tiny_encoder)
    yield enc
    enc.gate.set()  # never leave a build thread waiting


@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    import retrieval.index.dense_index

    monkeypatch.setattr(retrieval.index.dense_index, "COMMIT_EVERY", PART)


def wait_for(condition, seconds: float = 30.0) -> None:
    done = threading.Event()
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        done.wait(0.02)
    raise AssertionError("condition not met in time")


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_bm25_answers_while_dense_waits_then_dense_and_hybrid_join(gated, store):
    ws = Workspace(corpus(), store, model=gated)
    status = ws.start_dense()
    assert status.state == "encoding" and status.total == 3 * PART
    wait_for(lambda: ws.encoding.done == PART)  # the first part is encoded and committed; the second waits
    status = ws.encoding
    assert status.state == "encoding" and status.fraction == pytest.approx(1 / 3)
    assert status.rate and status.rate > 0 and status.seconds_left and status.seconds_left > 0
    assert len(store.get_embeddings(gated.fingerprint, [text_hash(t) for t in ws.corpus.texts])) == PART  # committed
    assert ws.pending(BASE_SYSTEMS) == ["dense", "hybrid"] and ws.pending(["bm25"]) == []
    with pytest.raises(DenseNotReady, match=f"{PART:,} of {3 * PART:,} documents encoded"):
        ws.dense  # noqa: B018
    with pytest.raises(DenseNotReady):
        ws.run("hybrid", "test")

    res = side_by_side(ws, "how do glaciers carve valleys")
    assert list(res.systems) == ["bm25"] and res.waiting == ["dense", "hybrid"]
    assert res.systems["bm25"][0].doc_id == "d5" and res.query_id == "q1"
    assert res.encoding["done"] == PART and res.encoding["total"] == 3 * PART
    html = side_by_side_html(res, ws.tokenizer)
    # how far the build is, the banner says (it looks again every few seconds); a column computed once does not
    assert html.count("Waiting for its index, still being built") == 2 and f"of {3 * PART:,}" not in html
    # columns wait, tables don't; learned sparse has its own index and does not wait for the dense one
    answering = tuple(s for s in shown() if s not in ("dense", "hybrid"))  # BM25, SPLADE, any system without vectors
    assert answering[:2] == ("bm25", SPLADE) and shown_systems(ws) == answering
    assert default_columns(ws) == (*BASE_SYSTEMS, SPLADE)
    assert [r[0] for r in metrics_rows(ws, "test", shown_systems(ws))] == [label(s) for s in answering]
    assert label_health(ws, "test").queries == 2  # from BM25 alone meanwhile
    caption, rows, wins = evaluate_view.evaluate(ws, "test", ["int8", "pca"])  # variants wait too
    assert [r[0] for r in rows] == [label(s) for s in answering]
    assert wins["headers"][2:] == [*(label(s) for s in answering), "disagreement"]
    assert "left out until the corpus is encoded" in caption and f"of {3 * PART:,}" not in caption
    with pytest.raises(gr.Error, match="still being built"):
        failures_view.failures(ws, "test", "")
    with pytest.raises(gr.Error, match=f"{PART:,} of {3 * PART:,} documents encoded"):
        embeddings_view.project_view(ws, "test", 2, "", "")

    gated.gate.set()
    assert ws.wait_dense(30)
    assert ws.pending(BASE_SYSTEMS) == [] and ws.encoding.state == "ready"
    assert ws.dense.encoded == 3 * PART and ws.dense.from_store == 0
    res = side_by_side(ws, "how do glaciers carve valleys")
    assert list(res.systems) == list(BASE_SYSTEMS) and res.waiting == [] and res.encoding is None
    assert shown_systems(ws) == shown() and shown()[:4] == (*BASE_SYSTEMS, SPLADE)


def test_the_parts_encoded_before_a_crash_are_kept_and_a_new_start_resumes(tiny_encoder, store):
    enc = GatedEncoder(tiny_encoder, fail_once=True)
    ws = Workspace(corpus(), store, model=enc)
    ws.start_dense()
    assert ws.wait_dense(30)  # over: failed
    status = ws.encoding
    assert status.state == "failed" and "out of memory" in status.error
    with pytest.raises(RuntimeError, match="out of memory"):
        ws.dense  # noqa: B018
    assert ws.pending(BASE_SYSTEMS) == []  # nothing is coming: the views say it failed instead
    banner, polling = data_view.encoding_banner(ws)
    assert banner.startswith("❌") and "out of memory" in banner and not polling

    enc.gate.set()
    ws.start_dense()  # a failed build is started again; the first part comes from the store
    assert ws.wait_dense(30) and ws.encoding.state == "ready"
    assert ws.dense.from_store == PART and ws.dense.encoded == 2 * PART


def test_a_stopped_build_ends_at_its_next_part_and_the_next_use_resumes_from_the_store(gated, store):
    ws = Workspace(corpus(), store, model=gated)
    ws.start_dense()
    wait_for(lambda: gated.calls == 2)  # the first part is stored, the second waits at the gate
    build = ws.builds["dense"]
    assert not build.stop(timeout=0)  # told, not over: it ends at its next progress report
    gated.gate.set()
    assert build.stop(timeout=30)
    status = ws.encoding
    assert status.state == "failed" and "stopped" in status.error and 0 < status.done < 3 * PART
    assert ws.pending(BASE_SYSTEMS) == []  # nothing is coming any more
    dense = ws.dense  # built again here, from the parts the stopped build stored
    assert dense.from_store >= PART and dense.from_store + dense.encoded == 3 * PART
    assert dense.encoded < 3 * PART and build.built is dense


def test_a_workspace_closed_while_its_corpus_encodes_stops_encoding_it(gated, store):
    from ui.registry import Limits

    registry = Registry(store, model=gated, foreground_s=0.0, limits=Limits(session_workspaces=1))
    key = data_view.open_dataset(registry, corpus(), session="a").key
    first = registry.get(key)
    wait_for(lambda: gated.calls == 2)
    second = data_view.open_dataset(registry, corpus(2 * PART), session="a")  # one workspace a session
    assert second.ok
    with pytest.raises(ValueError, match="closed to free memory"):
        registry.get(key)
    gated.gate.set()
    assert first.wait_dense(30) and first.encoding.state == "failed" and "stopped" in first.encoding.error
    assert first.encoding.done < 3 * PART  # its third part was never encoded
    assert registry.get(second.key).wait_dense(30)  # the open one was not stopped
    assert registry.get(second.key).encoding.state == "ready"


def test_a_system_picked_in_evaluate_while_its_index_is_built_is_said_to_wait(gated, store):
    from retrieval.systems import keys

    ws = Workspace(corpus(), store, model=gated)
    ws.start_builds()
    asked = [s for s in keys() if s not in ws.shown_systems and ws.system(s).waits_for(ws)]
    assert asked and ws.pending(asked) == asked
    caption, rows, _ = evaluate_view.evaluate(ws, "test", asked)
    for s in asked:
        assert f"⏳ {label(s)} waits for its index, still being built" in html.unescape(caption)
        assert all(r[0] != label(s) for r in rows)
    gated.gate.set()


def test_wait_dense_reports_progress_and_gives_up_at_its_timeout(gated, store):
    ws = Workspace(corpus(), store, model=gated)
    ws.start_dense()
    seen = []
    assert ws.wait_dense(0.5, lambda f, what: seen.append((f, what))) is False
    assert seen and seen[-1] == (pytest.approx(1 / 3), f"encoding {PART}/{3 * PART} documents")
    gated.gate.set()
    assert ws.wait_dense(None) is True
    assert Workspace(corpus(), store, model=gated).wait_dense(0) is True  # nothing builds in the background


def test_the_app_loads_a_big_corpus_at_once_and_the_banner_follows_the_encoding(gated, store):
    registry = Registry(store, model=gated, foreground_s=0.3)
    ds = corpus()
    loaded = data_view.open_dataset(registry, ds)  # returns after foreground_s: encoding goes on
    ws = registry.get(loaded.key)
    assert loaded.ok and "BM25 is ready" in loaded.status and BANNER_FOLLOWS in loaded.status
    assert f"of {3 * PART:,}" not in loaded.status  # a count here would be out of date beside the banner's
    assert "embeddings from the store" not in loaded.status
    summary = data_view.dataset_summary(registry.get(loaded.key))  # label checks from BM25 alone meanwhile
    assert "bg" in summary

    banner, polling = data_view.encoding_banner(ws)
    assert polling and banner.startswith("**Encoding the corpus in the background**")
    assert f"of {3 * PART:,} documents" in banner
    assert "Learned sparse index (SPLADE)**: 192 documents, waits for the build before it" in banner  # both builds
    gated.gate.set()
    ws.wait_dense(30)
    wait_for(lambda: not ws.pending([SPLADE]), 120)  # the learned sparse index follows the dense one
    ready, polling = data_view.encoding_banner(ws, shown=banner)
    assert not polling and ready.startswith("✅") and f"{3 * PART:,} documents" in ready
    assert "Dense index ready" in ready and "Learned sparse index (SPLADE) ready" in ready
    assert data_view.encoding_banner(ws, shown="") == ("", False)  # a page opened after it was done: nothing
    assert data_view.encoding_banner(Workspace(ds, store, model=gated)) == ("", False)


def test_a_small_corpus_is_ready_when_the_load_returns(tiny_encoder, store):
    registry = Registry(store, model=tiny_encoder, foreground_s=30)
    ds = corpus(40)
    loaded = data_view.open_dataset(registry, ds)
    assert "40 encoded" in loaded.status
    assert registry.get(loaded.key).pending(BASE_SYSTEMS) == []


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.server
def test_in_the_browser_the_banner_follows_the_encoding_and_dense_joins(tiny_encoder, tmp_path):
    import json

    from tests.browser.test_browser import CHROMIUM, served

    expect = pytest.importorskip("playwright.sync_api").expect
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt install chromium)")
    ds = corpus()
    folder = tmp_path / "bg"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": d.title, "text": d.text}) + "\n"
                                                 for i, d in ds.docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                  for q, t in ds.queries.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td5\t2\nq2\td2\t1\n")
    gated = GatedEncoder(tiny_encoder)
    try:
        with served(folder, gated, tmp_path / "s.sqlite3", foreground_s=0) as (page, _):
            page.set_default_timeout(30_000)
            banner = page.locator("#encoding-status")
            # the first page of an app started late in a long run (two workers on two cores) may take longer
            # than Playwright's default: the banner's first words get 90 s
            expect(banner).to_contain_text(f"{PART:,} of {3 * PART:,} documents", timeout=patience(90_000))
            expect(banner).to_contain_text("BM25 answers now")
            table = page.locator("#metrics-table")
            expect(table).to_contain_text("BM25")
            expect(table).not_to_contain_text("Hybrid")
            page.locator("#query-box textarea").fill("how do glaciers carve valleys")
            page.locator("#search-button").click()
            # dense, hybrid and learned sparse (whose build follows the dense one's) wait
            expect(page.locator("#results .col.waiting")).to_have_count(3)
            expect(page.locator("#results")).to_contain_text("Glacier")  # BM25's first hit

            gated.gate.set()
            # what follows the gate (the banner's next poll, the metrics computed again) waits behind the other
            # tests' work on a loaded machine: 60 s, not Playwright's 5
            expect(banner).to_contain_text("Dense index ready", timeout=patience(60_000))
            # the metrics computed again with every system
            expect(table).to_contain_text("Hybrid", timeout=patience(60_000))
            deadline = time.monotonic() + 120
            while True:  # the learned sparse index takes a few seconds more
                page.locator("#search-button").click()
                page.wait_for_timeout(1000)
                if page.locator("#results .col.waiting").count() == 0 or time.monotonic() > deadline:
                    break
            expect(page.locator("#results .col.waiting")).to_have_count(0)
            expect(page.locator("#results .sbs .col")).to_have_count(4)
            expect(banner).to_contain_text("Learned sparse index (SPLADE) ready", timeout=patience(60_000))
            expect(table).to_contain_text("Learned sparse", timeout=patience(60_000))
            # a page opened now, on content the app built while both were encoding: computed again by itself
            later = page.context.browser.new_page(viewport={"width": 1400, "height": 1000})
            later.set_default_timeout(30_000)
            later.goto(page.url)
            # its first poll
            expect(later.locator("#metrics-table")).to_contain_text("Hybrid", timeout=patience(60_000))
            expect(later.locator("#metrics-table")).to_contain_text("Learned sparse", timeout=patience(60_000))
            expect(later.get_by_text("left out until the corpus is encoded")).to_have_count(0)
            later.get_by_role("tab", name="Evaluate").click()  # Evaluate computes when its tab opens
            expect(later.locator("#eval-glance")).to_contain_text("Learned sparse", timeout=patience(60_000))
    finally:
        gated.gate.set()


def test_a_build_that_waits_for_another_says_so_then_shows_its_rate_and_time_left():
    from retrieval.index.builds import IndexBuild

    first_done, step = threading.Event(), threading.Event()

    def make(_, progress, indexing):
        for done in (10, 20):
            progress(done, 100)
            time.sleep(0.05)
        assert step.wait(30)
        indexing()
        return "index"

    build = IndexBuild(lambda: None, make, 100, "test-build")
    status = build.start(after=lambda: first_done.wait(30))
    assert status.state == "waiting" and status.done == 0 and status.seconds_left is None and build.pending
    first_done.set()
    wait_for(lambda: build.status.done == 20)
    status = build.status
    assert status.state == "encoding" and status.rate > 0 and status.seconds_left == pytest.approx(80 / status.rate)
    assert not build.finished
    step.set()
    assert build.follow(30, None, 0.01) and build.finished and build.built == "index"


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_a_page_built_while_the_corpus_encodes_is_computed_again_when_any_build_is_over(gated, store):
    """The page's content (Search's metrics, made when the page was built) is out of date once the
    dense build is over, and again once the learned sparse one is: each time the banner's look finds
    it, bumps the counter, and the views are computed with the systems that joined (a page opened
    after a build finished included: what it was built with is its starting point)."""
    from training.job import JobQueue
    from ui import shell
    from ui.registry import Context

    registry = Registry(store, model=gated, foreground_s=0.3)
    key = data_view.open_dataset(registry, corpus()).key
    ws = registry.get(key)
    app = shell.build_app(registry, key, JobQueue(store))  # a page built now: BM25 alone in its metrics
    was = next(b.value for b in app.blocks.values()
               if isinstance(b, gr.State) and isinstance(b.value, str) and b.value.startswith(key + "|"))
    ctx = Context(registry, None, None, ws)
    assert was == f"{key}|"
    text, kept, timer, bump, now = shell.follow(ctx, key, "", 0, was)
    assert text.startswith("**Encoding the corpus in the background**") and timer.active and bump == gr.skip()
    assert "left out until the corpus is encoded" in shell.arrival(ctx, key, "")[1]

    gated.gate.set()
    assert ws.wait_dense(30)
    text, kept, timer, bump, now = shell.follow(ctx, key, text, 0, was)
    assert bump == 1 and now in (f"{key}|dense", f"{key}|dense,sparse")
    summary, caption, rows, aim = shell.arrival(ctx, key, "")
    assert "left out until the corpus is encoded" not in caption and "λ" in caption
    assert {"BM25", "Dense", "Hybrid (CLEAR λ)"} <= {r[0] for r in rows}
    assert ("BM25 vs Dense", "bm25|dense") in aim["choices"]

    wait_for(lambda: not ws.pending([SPLADE]), 120)
    text, kept, timer, bump, now = shell.follow(ctx, key, text, 1, was)  # a page opened now, built before
    assert bump == 2 and now == f"{key}|dense,sparse" and not timer.active
    assert "Learned sparse (SPLADE)" in {r[0] for r in shell.arrival(ctx, key, "")[2]}
    assert shell.follow(ctx, key, text, 2, now)[3] == gr.skip()  # up to date: nothing computed again



@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_no_view_contradicts_the_banner_about_a_build(gated, store):
    """One account of a build: the banner's, from its progress. Views computed while it runs say which
    systems wait for it, never a count of their own; what they were computed with is taken before
    them, so a build that ends while they are computed is found by the banner's next look and they
    are computed again, Search's count of its systems with them, and Evaluate's results too."""
    from ui import search as search_view
    from ui import shell
    from ui.registry import Context

    registry = Registry(store, model=gated, foreground_s=0.3)
    loaded = data_view.open_dataset(registry, corpus())
    key, ws = loaded.key, registry.get(loaded.key)
    ctx = Context(registry, None, None, ws)
    waiting = shown_systems(ws)
    note = search_view.metrics_note(ws, "test")
    assert note.startswith(f"**{len(waiting)} systems on show:** BM25, ") and "left out until" in note
    caption, rows, _ = evaluate_view.evaluate(ws, "test", [])
    assert "left out until the corpus is encoded" in caption and len(rows) == len(waiting)
    assert not evaluate_view.out_of_date(ws, "test", rows, empty=False)  # what is on show can be
    banner, _ = data_view.encoding_banner(ws)
    assert f"of {3 * PART:,} documents" in banner
    for said in (loaded.status, note, caption):
        assert f"of {3 * PART:,}" not in said

    class EndsTheBuild:  # a view whose refresh takes as long as the build's rest: it ends meanwhile
        def outputs(self) -> list:
            return []

        def refresh(self, ws_, viewer=None) -> tuple:
            gated.gate.set()
            assert ws_.wait_dense(30)
            return ("computed",)

    before, updates = shell.refreshed(key, ws, [EndsTheBuild()])
    assert updates == ["computed"] and before == f"{key}|"  # seen before the views: the build was running
    text, _, _, bump, now = shell.follow(ctx, key, banner, 0, before)
    assert "Dense index ready" in text and bump == 1 and now.startswith(f"{key}|dense")  # computed again
    _, note, rows_now, _ = shell.arrival(ctx, key, "")
    on_show = shown_systems(ws)
    assert len(on_show) > len(waiting) and note.startswith(f"**{len(on_show)} systems on show:**")
    assert "left out until" not in note and len(rows_now) == len(on_show)
    assert evaluate_view.out_of_date(ws, "test", rows, empty=False)  # Evaluate's, computed before: again
    assert "left out until" not in evaluate_view.evaluate(ws, "test", [])[0]
    assert not evaluate_view.out_of_date(ws, "test", [], empty=False)  # none computed: none made

class HeldQueries(Encoder):
    """The tiny encoder, whose typed queries wait for ``gate`` once ``holding`` is set (``entered``
    says one is waiting): a search still running when the user asks for something else."""

    def __init__(self, inner: Encoder):
        super().__init__(inner.model, name=inner.name, precision=inner.precision)
        self.holding, self.entered, self.gate = False, threading.Event(), threading.Event()

    def encode(self, texts, progress=None):
        if len(texts) == 1 and self.holding:
            self.entered.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return super().encode(texts, progress)


def test_a_refresh_of_the_results_shows_the_query_last_asked_for_and_never_an_older_one(tiny_encoder, store):
    """After a build, the results on show are computed again for the query the session last asked for
    (not the query box's text); a refresh still running when the user asks for another query, a
    session that asked for none, and one showing another data set now, change nothing."""
    from ui import shell
    from ui.registry import Context

    enc = HeldQueries(tiny_encoder)
    registry = Registry(store, model=enc, foreground_s=None)
    key = data_view.open_dataset(registry, corpus()).key
    ws = registry.get(key)
    assert ws.wait_dense(60)
    ctx = Context(registry, None, None, ws)
    everything = ["bm25", "dense"]  # the learned sparse model aside: not needed here
    assert shell.rerun(ctx, key, everything, "ana") == (gr.skip(), gr.skip())  # nothing asked for: nothing shown
    registry.hold("ana", key)
    registry.ask("ana", "glacier carving a valley")
    page, raw = shell.rerun(ctx, key, everything, "ana")
    assert raw["query"] == "glacier carving a valley" and "Glacier" in page

    enc.holding = True  # the refresh is encoding its query when the user picks another
    result: list = []
    late = threading.Thread(target=lambda: result.append(shell.rerun(ctx, key, everything, "ana")))
    late.start()
    assert enc.entered.wait(30)
    registry.ask("ana", "rivers number 14")
    enc.gate.set()
    late.join(60)
    assert result == [(gr.skip(), gr.skip())]  # the older query's results are not put over the newer one's
    enc.holding = False
    assert shell.rerun(ctx, key, everything, "ana")[1]["query"] == "rivers number 14"

    other = data_view.open_dataset(registry, corpus(PART)).key
    registry.hold("ana", other)  # another data set loaded: its Search tab shows no results, nothing to refresh
    assert registry.asked("ana") == ""
    assert shell.rerun(ctx, key, everything, "ana") == (gr.skip(), gr.skip())
    assert shell.rerun(ctx, other, everything, "ana") == (gr.skip(), gr.skip())

    from ui.registry import ASKED_KEPT  # what sessions asked for is bounded: the latest sessions' kept
    registry.ask("bo", "rivers number 14")
    for n in range(ASKED_KEPT):
        registry.ask(f"client-{n}", "x" * 10_000)
    assert registry.asked("bo") == "" and registry.asked(f"client-{ASKED_KEPT - 1}") == "x" * 10_000
    assert registry.asked("client-0") == "x" * 10_000  # the oldest of the latest ASKED_KEPT


def test_the_judging_queue_gains_the_systems_whose_index_arrives_and_puts_their_documents_first(gated, store):
    from retrieval.judging.judgments import top_ids
    from ui import judge

    registry = Registry(store, model=gated, foreground_s=0.3)
    ws = registry.get(data_view.open_dataset(registry, corpus()).key)
    q = judge.judging_queue(ws, store, "ann", k=3)  # dense and learned sparse are still being built
    assert q.systems == shown_systems(ws) and q.systems[0] == "bm25"  # and any system with nothing to wait for
    assert not {"dense", "hybrid", SPLADE} & set(q.systems)
    at = q.next_unjudged()
    first = q.pairs[at]
    q, _ = judge.grade_pair(ws, store, "ann", *first, 1, k=3)

    gated.gate.set()
    assert ws.wait_dense(30)
    joined = judge.judging_queue(ws, store, "ann", k=3)
    assert joined is q and {"bm25", "dense", "hybrid"} <= set(q.systems)  # the same queue, not rebuilt
    assert q.pairs[0] == first and q.grade(0) == 1  # the grade and the position handed out stay
    runs = judge.pool_runs(ws, 3, q.sample.query_ids)
    before = q.pairs[:q.handed]  # the graded pair, and the one grade_pair handed out next
    theirs = {(qid, d) for qid in q.sample.query_ids for s in q.joined.systems
              for d in top_ids(runs[s], qid, 3)} - set(before)
    progress, _, _ = judge.show(ws, q, None)
    assert f"joined: their {len(theirs)} unjudged top-3 documents come first" in progress
    first_up = theirs | {pair for pair in q.pairs if pair[0] == first[0]} - set(before)  # the graded query whole
    handed, at = [], len(before) - 1
    for _ in first_up:
        at = q.next_unjudged(at, wrap=False)
        handed.append(q.pairs[at])
    assert set(handed) == first_up  # before any other pair
    assert "joined" not in judge.show(ws, q, None)[0]  # said while they go first
