"""Hostile names and texts in a real browser: payloads planted in every string a user controls —
document ids, titles and texts, query ids and texts, split, data set, file and model names, a run's
TREC tag, a judge's name, the ids an error message quotes — and every tab driven in Chromium, then
the exported HTML report opened too. The test fails on any dialog (an ``alert`` that ran), any
request to a host the page did not come from (an image or link a payload planted), and any element
a payload became (an ``img``, a link, an event handler) in the page's HTML; and it checks that the
payloads are shown, as text.

Skips when Chromium or Playwright is absent; ``.ci/run`` installs both.
"""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # skipped below
    expect = sync_playwright = None

import app as rankscope_app
from tests.browser.test_browser import ARGS, CHROMIUM, open_tab, upload
from tests.helpers import patience

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt install chromium)"),
              pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
              pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

EVIL = "evil.invalid"
IMG = f'<img src="http://{EVIL}/i.png" onerror="alert(1)">'  # markup in free text
TIGHT = f"<img/src=http://{EVIL}/t.png/onerror=alert(2)>"  # markup with no whitespace: fits in an id or tag
MD = f"![m](http://{EVIL}/m.png)"  # a Markdown image: no whitespace either
LINK = f"[x](http://{EVIL}/l)"
SCRIPT = "<script>alert(3)</script>"
NAME = "<img src=x onerror=alert(4)>"  # a file or folder name (no slash)

WORDS = ["kettle limescale vinegar descale", "bicycle chain lubricant rust", "sourdough starter flour water",
         "tomato blight leaves garden", "mortgage rate interest bank", "laptop battery charge cycles"]


def hostile_dataset(root: Path) -> Path:
    """A BEIR folder, named by a payload, whose ids, titles, texts, queries and splits carry them."""
    folder = root / NAME
    (folder / "qrels").mkdir(parents=True)
    docs, queries = [], []
    for i, words in enumerate(WORDS):
        for j in range(4):
            docs.append({"_id": f"d{i}{j}{TIGHT if j == 0 else MD if j == 1 else ''}",
                         "title": f"{words.split()[0]} {IMG if j % 2 else LINK} {SCRIPT}",
                         "text": f"{words} {MD} {IMG} {LINK} note {j}"})
        queries.append({"_id": f"q{i}{TIGHT if i % 2 else MD}", "text": f"{words} {IMG} {MD}"})
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    test, train = queries[:3], queries[3:]
    (folder / "qrels" / "test.tsv").write_text("".join(f"{q['_id']}\t{docs[4 * i]['_id']}\t2\n"
                                                       f"{q['_id']}\t{docs[4 * i + 1]['_id']}\t1\n"
                                                       for i, q in enumerate(test)))
    (folder / "qrels" / "train.tsv").write_text("".join(f"{q['_id']}\t{docs[4 * (i + 3)]['_id']}\t2\n"
                                                        for i, q in enumerate(train)))
    (folder / "qrels" / f"x {NAME}.tsv").write_text(f"{queries[0]['_id']}\t{docs[0]['_id']}\t1\n")
    return folder


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-browser")
    data = hostile_dataset(root)
    model = root / "models" / NAME  # the encoder's name, shown in the summary, is a payload too
    shutil.copytree(tiny_model_dir, model)
    demo, registry = rankscope_app.create(data, model=str(model), store_path=str(root / "store.sqlite3"))
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store))
    yield demo.local_url, root, registry
    demo.close()


class Watch:
    """Dialogs the page opened and requests it sent to other hosts."""

    def __init__(self, page, origin: str):
        self.dialogs: list[str] = []
        self.foreign: list[str] = []
        host = urlparse(origin).hostname

        def on_dialog(dialog):
            self.dialogs.append(dialog.message)
            dialog.dismiss()

        def on_request(request):
            parsed = urlparse(request.url)
            here = (host, "localhost", "127.0.0.1")
            if parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in here:
                self.foreign.append(request.url)

        page.on("dialog", on_dialog)
        page.on("request", on_request)

    def check(self, page, where: str) -> None:
        time.sleep(0.5)  # an image's request or an onerror has its moment
        assert self.dialogs == [], f"{where}: a payload ran: {self.dialogs}"
        assert self.foreign == [], f"{where}: a payload reached another host: {self.foreign}"
        planted = page.evaluate("""() => {
            const found = [];
            for (const el of document.querySelectorAll('*')) {
                for (const a of el.attributes) {  // text attributes (title, name, value) may hold a payload as text
                    const v = a.value || '';
                    if (a.name.startsWith('on') && /alert/.test(v)) found.push(el.tagName + ' ' + a.name);
                    const fetches = ['src', 'href', 'srcset', 'action', 'formaction', 'xlink:href', 'poster', 'data',
                                     'style', 'background'].includes(a.name);
                    if (fetches && /evil\\.invalid|^javascript:/i.test(v))
                        found.push(el.tagName + ' ' + a.name + '=' + v);
                }
                if (el.tagName === 'IMG' && el.getAttribute('src') === 'x') found.push('img src=x');
                if (el.tagName === 'SCRIPT' && /alert\\(3\\)/.test(el.textContent)) found.push('script');
            }
            return found;
        }""")
        assert planted == [], f"{where}: a payload became markup: {planted}"


@pytest.fixture(scope="module")
def browser_page(served):
    url = served[0]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(60_000)
        expect.set_options(timeout=patience(30_000))
        watch = Watch(page, url)
        page.goto(url)
        page.get_by_role("tab", name="Search").wait_for()
        yield page, watch, context
        browser.close()


def test_every_tab_shows_the_payloads_as_text_and_runs_none(browser_page, served, tmp_path, shots):
    page, watch, context = browser_page
    root = served[1]
    watch.check(page, "start page")
    summary = page.locator("#dataset-summary").inner_text()
    assert NAME in summary  # the data set and encoder names, shown as typed

    # Search: typed text, then a labelled query picked by id
    open_tab(page, "Search")
    page.locator("#query-box textarea").fill(f"kettle descale {IMG} {MD} {LINK}")
    page.locator("#search-button").click()
    page.locator("#results .sbs .col").first.wait_for()
    assert "<img" in page.locator("#results").inner_text() or MD in page.locator("#results").inner_text()
    page.locator("#query-picker input").click()
    page.get_by_role("option").first.click()
    page.locator("#results .judged").wait_for()
    assert TIGHT in page.locator("#results").inner_text() or MD in page.locator("#results").inner_text()
    watch.check(page, "Search")

    # Data: a run whose tag is a payload, from a file named by one; a broken file quoting a payload id
    run = tmp_path / f"{NAME}.trec"
    qid = f"q0{MD}"
    run.write_text(f"{qid} Q0 d00{TIGHT} 1 2.0 {TIGHT}\n{qid} Q0 d01{MD} 2 1.0 {TIGHT}\n")
    open_tab(page, "Data")
    upload(page, "run-upload", run)
    page.locator("#import-run-button").click()
    expect(page.locator("#load-status")).to_contain_text("Imported run")
    assert TIGHT in page.locator("#load-status").inner_text()
    broken = tmp_path / f"{NAME}.jsonl"
    broken.write_text(json.dumps({"_id": MD, "text": "a"}) + "\n" + json.dumps({"_id": MD, "text": "b"}) + "\n")
    upload(page, "upload", broken)
    page.locator("#load-button").click()
    expect(page.locator("#load-status")).to_contain_text("Could not load")
    status = page.locator("#load-status").inner_text()
    assert f"duplicate document id '{MD}'" in status and ".jsonl:2: " in status and str(tmp_path) not in status
    page.locator("#query-text textarea").fill(f"garden tomato {IMG} {MD}")
    page.locator("#add-queries-button").click()
    expect(page.locator("#load-status")).to_contain_text("Added 1 query")
    watch.check(page, "Data")

    # Search again: the run's column, its name a payload, beside the others
    open_tab(page, "Search")
    page.locator("#query-picker input").click()
    page.get_by_role("option").filter(has_text="q0").first.click()
    expect(page.locator("#results .sbs .col")).to_have_count(4)
    assert TIGHT in page.locator("#results .sbs .col h3").nth(3).inner_text()
    watch.check(page, "Search with the run")
    page.screenshot(path=str(shots / "hostile-search.png"), full_page=False)

    # Judge: a judge named by a payload, systems revealed (the run's name among them), a grade
    open_tab(page, "Judge")
    page.locator("#judge-name textarea").fill(f"{IMG}{MD}")
    page.locator("#judge-reveal input").check()
    page.locator("#judge-start").click()
    expect(page.locator("#judge-progress")).to_contain_text("Judged")
    page.locator("#judge-2").click()
    expect(page.locator("#judge-progress")).to_contain_text("Judged 1 of")
    page.get_by_text("Export the judgments; judges who disagree").click()
    page.locator("#export-qrels").click()
    expect(page.locator("#qrels-file")).to_contain_text(".qrels")
    assert NAME not in page.locator("#qrels-file").inner_text()  # the file's name is a slug, never the name
    watch.check(page, "Judge")

    # Evaluate: tables and plots (split names, run names and query texts in them)
    open_tab(page, "Evaluate")
    page.locator("#evaluate-button").click()
    expect(page.locator("#eval-glance")).to_contain_text(TIGHT, timeout=patience(60_000))
    page.locator("#eval-all").get_by_text("All metrics").click()  # the full table, behind its toggle
    expect(page.locator("#eval-table")).to_contain_text(TIGHT, timeout=patience(60_000))
    for plot in ("#eval-scatter", "#eval-recall", "#eval-sweep"):
        page.locator(f"{plot} .js-plotly-plot").wait_for()
    point = page.locator("#eval-scatter .js-plotly-plot .scatterlayer .point").first
    point.scroll_into_view_if_needed()  # below the table and its conclusions: the mouse reaches the viewport only
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # a hover label: the query's text
    expect(page.locator("#eval-scatter .hoverlayer")).to_contain_text("q", timeout=patience(10_000))
    watch.check(page, "Evaluate")

    # Embeddings: the projection's hover texts hold titles and ids
    open_tab(page, "Embeddings")
    page.locator("#project-button").click()
    expect(page.locator("#emb-status")).to_contain_text(re.compile("fitted in|from the cache"),
                                                        timeout=patience(120_000))
    page.locator("#emb-plot .js-plotly-plot").wait_for()
    watch.check(page, "Embeddings")

    # Failures: cards, a pair with the run, the report exported and opened
    open_tab(page, "Failures")
    page.locator("#pair-a input").click()
    page.get_by_role("option", name="BM25", exact=True).click()
    page.locator("#pair-b input").click()
    page.get_by_role("option").filter(has_text="onerror").first.click()
    page.locator("#failures-button").click()
    page.locator("#failures-counts .js-plotly-plot").wait_for()
    page.locator("#export-button").click()
    link = page.locator("#export-file a").first
    expect(link).to_be_visible(timeout=60_000)
    assert NAME not in link.inner_text()
    watch.check(page, "Failures")
    page.screenshot(path=str(shots / "hostile-failures.png"), full_page=False)
    with page.expect_download() as download:
        link.click()
    report = tmp_path / "report.html"
    download.value.save_as(report)
    offline = context.new_page()
    report_watch = Watch(offline, "file:///")
    offline.goto(report.as_uri())
    offline.locator(".rs-gallery").wait_for()
    report_watch.check(offline, "the exported report")
    assert NAME in offline.locator("h1").inner_text()
    offline.close()

    # Runs: the stored runs, two compared
    open_tab(page, "Runs")
    expect(page.locator("#runs-table")).to_contain_text("bm25")
    page.locator("#run-a input").click()
    first = page.get_by_role("option").first
    split = first.inner_text().rsplit(" — ", 1)[1].rsplit(" (", 1)[0]  # "summary — split (when)"
    first.click()
    page.locator("#run-b input").click()  # another run of the same split (Failures' predictions stored some)
    page.get_by_role("option").filter(has_text=f" — {split} (").nth(1).click()
    page.locator("#compare-runs-button").click()
    expect(page.locator("#compare-note")).to_contain_text("B − A")
    watch.check(page, "Runs")

    # Train: a one-step job; its results table lists queries by id and text
    open_tab(page, "Train")
    page.locator("#train-steps input").fill("1")
    page.get_by_role("spinbutton", name="Epochs", exact=True).fill("1")
    page.locator("#train-holdout input").fill("0")
    page.locator("#train-button").click()
    status = page.locator("#train-status")
    expect(status).to_contain_text("done", timeout=patience(240_000))
    expect(page.locator("#train-results")).to_contain_text("fine-tuned")
    watch.check(page, "Train")

    # a notice quoting a payload: an encoder this server does not offer, typed into the box
    open_tab(page, "Search")
    box = page.locator("#encoder-picker input")
    box.click()
    box.fill(f"{root}/{NAME}{MD}")
    box.press("Enter")
    expect(page.get_by_text("is not one this server offers").first).to_be_visible(timeout=30_000)
    watch.check(page, "an encoder refused")
    # Search's query table by predicted difficulty: every query and id a payload, shown as text
    page.locator("#search-difficulty-box").get_by_text("Queries by predicted difficulty").first.click()
    page.locator("#search-difficulty tr[data-query-id]").first.wait_for(timeout=180_000)
    table_text = page.locator("#search-difficulty").inner_text()
    assert IMG in table_text and (TIGHT in table_text or MD in table_text)
    watch.check(page, "Search's query table")


def test_a_closed_tab_no_longer_holds_its_workspace(browser_page, served, tmp_path):
    """Gradio's unload event reaches the registry: the session a closed page held is released."""
    url, _, registry = served
    context = browser_page[2]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"{w} {i}"}) + "\n" for i, w in enumerate(WORDS)))
    page = context.new_page()  # a page of its own: a session of its own
    page.goto(url)
    open_tab(page, "Data")
    upload(page, "upload", corpus)
    page.locator("#load-button").click()
    expect(page.locator("#load-status")).to_contain_text("Loaded corpus", timeout=patience(60_000))

    def holders() -> int:  # sessions holding the workspace of the corpus this page loaded
        loaded = {k for k, e in list(registry._items.items()) if e.ws.dataset.name == "corpus"}
        return sum(state.key in loaded for state in list(registry._sessions.values()))

    assert holders() == 1
    page.close()
    deadline = time.time() + patience(60)
    while holders() and time.time() < deadline:
        time.sleep(0.5)
    assert holders() == 0
