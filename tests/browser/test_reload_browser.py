"""The flow keeps its place (project issue 58), in Chromium: an analyst uploads a small unlabelled
corpus, adds a query, grades one pair — the summary and Evaluate count the judged query with no
button pressed — then reloads the page and finds the same corpus, its queries and the grade; after
the app is restarted on the same store, the Data tab reopens the corpus in one click."""
from __future__ import annotations

import re

import pytest

from tests.browser.test_browser import ARGS, CHROMIUM, open_tab, upload
from tests.conftest import DEMO, store_copy
from tests.flows.test_judged_labels import write_unlabelled
from tests.helpers import patience

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt install chromium)"),
              pytest.mark.browser, pytest.mark.server, pytest.mark.slow]


def launched(model, store):
    import app as rankscope_app

    app, registry = rankscope_app.create(DEMO, model=model, store_path=str(store), foreground_s=60)
    app.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                       **rankscope_app.launch_kwargs(registry.store))
    return app


def test_a_reload_finds_the_corpus_its_queries_and_grades_and_a_restart_reopens_it_in_one_click(
        tiny_model_dir, demo_sparse_store, tmp_path, shots):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    expect = pytest.importorskip("playwright.sync_api").expect

    corpus, _ = write_unlabelled(tmp_path / "upload")
    store = store_copy(demo_sparse_store, tmp_path / "s.sqlite3")  # the demo's SPLADE vectors read, not encoded
    app = launched(str(tiny_model_dir), store)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_context().new_page()
            page.set_default_timeout(60_000)
            expect.set_options(timeout=patience(60_000))
            page.goto(app.local_url)
            page.get_by_role("tab", name="Search").wait_for()
            summary = page.locator("#dataset-summary")

            open_tab(page, "Data")
            upload(page, "upload", corpus)
            page.locator("#load-button").click()
            status = page.locator("#load-status")
            expect(status).to_contain_text("Loaded corpus", timeout=patience(120_000))
            expect(status).to_contain_text("Kept beside the store")
            page.locator("#query-text textarea").fill("how to descale a kettle")
            page.locator("#add-queries-button").click()
            expect(status).to_contain_text("Added 1 query")
            expect(summary).to_contain_text(re.compile(r"32 documents, 1 quer"))
            expect(summary).to_contain_text("No relevance labels")

            open_tab(page, "Judge")
            page.locator("#judge-name textarea").fill("ana")
            page.locator("#judge-panel").click()
            page.locator("#judge-start").click()
            progress = page.locator("#judge-progress")
            expect(progress).to_contain_text("Judged 0 of")
            pair = page.locator("#judge-panel .judge-meta").inner_text().split(" · ")[0]
            page.locator("body").click(position={"x": 5, "y": 5})
            page.keyboard.press("2")
            expect(progress).to_contain_text("Judged 1 of")
            # no button: the summary counts the judged query, and Evaluate computes on it as its tab opens
            counted = "1 judged query (1 with a relevant document found)"
            expect(summary).to_contain_text(counted)
            expect(summary).not_to_contain_text("No relevance labels")
            open_tab(page, "Evaluate")
            expect(page.locator("#eval-note")).to_contain_text(counted, timeout=patience(120_000))
            expect(page.locator("#eval-glance")).to_contain_text("BM25")
            page.screenshot(path=str(shots / "reload-before.png"), full_page=False)

            page.reload()  # the same corpus, its added query and the grade, with no upload
            page.get_by_role("tab", name="Search").wait_for()
            expect(summary).to_contain_text(re.compile(r"\*?corpus\*? — 32 documents, 1 quer"),
                                            timeout=patience(120_000))
            expect(summary).to_contain_text(counted)
            open_tab(page, "Judge")
            page.locator("#judge-name textarea").fill("ana")
            page.locator("#judge-panel").click()
            page.locator("#judge-start").click()
            expect(progress).to_contain_text("Judged 1 of")
            page.locator("body").click(position={"x": 5, "y": 5})
            page.keyboard.press("ArrowLeft")
            meta = page.locator("#judge-panel .judge-meta")
            expect(meta).to_contain_text(pair)
            expect(meta).to_contain_text("graded 2 (highly relevant)")
            page.screenshot(path=str(shots / "reload-after.png"), full_page=False)
            browser.close()
    finally:
        app.close()

    app = launched(str(tiny_model_dir), store)  # a restart on the same store
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_context().new_page()
            page.set_default_timeout(60_000)
            page.goto(app.local_url)
            page.get_by_role("tab", name="Search").wait_for()
            open_tab(page, "Data")
            expect(page.locator("#kept-table")).to_contain_text("corpus")
            page.locator("#reopen-button").click()  # the latest kept data set is picked: one click
            expect(page.locator("#load-status")).to_contain_text("Reopened corpus", timeout=patience(120_000))
            expect(page.locator("#dataset-summary")).to_contain_text(re.compile(r"32 documents, 1 quer"))
            expect(page.locator("#dataset-summary")).to_contain_text("1 judged query")
            browser.close()
    finally:
        app.close()
