"""An analyst's hard corpus, in Chromium: passages uploaded without labels, questions added as a
.txt, most of them about things the corpus does not hold (nothing relevant in any system's list),
and an oracle judge grading by keyboard in the queue's own order until the pool is judged.

"judge N more" falls by one with every grade; once the pool is judged Evaluate's headline says how
many queries every system fails on and each system's success rate, equal to what the answer key
gives on the systems' own lists; no verdict on nDCG is shown on these labels."""
from __future__ import annotations

import json
import random
import re
import time

import pytest

from retrieval.systems import label
from tests.browser.test_browser import CHROMIUM, open_tab, served, upload
from tests.conftest import DEMO, store_copy
from tests.helpers import patience

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt install chromium)"),
              pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

DEPTH = 3  # the pool depth the analyst sets: each system's top 3 (a small pool the test judges whole)
IN_CORPUS = {  # topic: its words, then a question the corpus answers
    "garden": ("tomato seedlings compost soil watering greenhouse pruning mulch",
               "how often should tomato seedlings be watered in a greenhouse"),
    "bread": ("sourdough starter flour dough proofing oven crust yeast",
              "why does my sourdough dough not rise during proofing"),
    "bike": ("bicycle chain gears derailleur brakes tyre pressure saddle", ""),
    "sleep": ("insomnia bedtime melatonin caffeine nap circadian snoring pillow", ""),
}
ABSENT = {  # questions about what the corpus never mentions: nothing relevant anywhere
    "tax": "which receipts do I need to claim an income tax deduction",
    "piano": "how long should I practice piano scales with a metronome",
    "roof": "how to find a roof leak near the flashing in the attic",
    "visa": "what documents does a work visa application need",
}
FILLER = "the a of and with for in on about when after before this that very often some".split()
PROGRESS = re.compile(r"Judged (\d+) of (\d+) pooled pairs")
LEFT = re.compile(r"judge (\d+) more for exact success@\d+")


def write_corpus(folder, per_topic: int = 10, seed: int = 11):
    rng = random.Random(seed)
    rows = []
    for topic, (words, _) in IN_CORPUS.items():
        vocab = words.split()
        for i in range(per_topic):
            body = " ".join(rng.choice(vocab) if rng.random() < 0.5 else rng.choice(FILLER) for _ in range(20))
            rows.append({"_id": f"{topic}-{i:03d}", "title": f"Notes {i}", "text": body})
    rng.shuffle(rows)
    corpus = folder / "passages.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = [q for _, q in IN_CORPUS.values() if q] + list(ABSENT.values())
    path = folder / "questions.txt"
    path.write_text("".join(q + "\n" for q in questions))
    topic_of = {q: t for t, (_, q) in IN_CORPUS.items() if q} | {q: t for t, q in ABSENT.items()}
    return corpus, path, topic_of


def test_judging_a_hard_corpus_converges_on_every_system_fails(tiny_model_dir, demo_sparse_store, tmp_path, shots):
    from ui import judge

    expect = pytest.importorskip("playwright.sync_api").expect
    corpus, questions, topic_of = write_corpus(tmp_path)
    with served(DEMO, str(tiny_model_dir), store_copy(demo_sparse_store, tmp_path / "s.sqlite3"),
                foreground_s=60) as (page, registry):
        expect.set_options(timeout=patience(60_000))
        open_tab(page, "Data")
        upload(page, "upload", corpus)
        page.locator("#load-button").click()
        expect(page.locator("#load-status")).to_contain_text("Loaded passages", timeout=patience(120_000))
        upload(page, "query-upload", questions)
        page.locator("#add-queries-button").click()
        expect(page.locator("#load-status")).to_contain_text(f"Added {len(topic_of)} queries")
        ws = max((e.ws for e in registry._items.values() if len(e.ws.dataset.docs) == 40),
                 key=lambda w: len(w.dataset.queries))  # the corpus with its questions
        for _ in range(600):  # every system on show before judging starts (none joins the pool later)
            if not ws.pending(ws.shown_systems):
                break
            time.sleep(0.5)
        assert not ws.pending(ws.shown_systems)

        open_tab(page, "Judge")
        progress = page.locator("#judge-progress")
        page.locator("#judge-name textarea").fill("oracle")
        page.locator("#judge-panel").click()
        depth = page.get_by_label("Pool depth (each system's top k)")
        depth.fill(str(DEPTH))
        page.locator("#judge-start").click()
        expect(progress).to_contain_text(PROGRESS)
        page.locator("body").click(position={"x": 5, "y": 5})  # off the text boxes: the keys grade
        done, pooled = (int(g) for g in PROGRESS.search(progress.inner_text()).groups())
        left = int(LEFT.search(progress.inner_text()).group(1))
        assert done == 0 and left == pooled
        grades = 0
        while left:
            query = page.locator("#judge-panel .judge-query b").inner_text()
            doc_id = page.locator("#judge-panel .judge-meta").inner_text().split(" · ")[0]
            page.keyboard.press("2" if doc_id.split("-")[0] == topic_of[query] else "0")
            grades += 1
            expect(progress).to_contain_text(f"Judged {grades} of {pooled}")
            text = progress.inner_text()
            now = int(LEFT.search(text).group(1)) if LEFT.search(text) else 0
            assert now == left - 1, (left, text)  # "judge N more" falls by one with every grade
            left = now
        expect(progress).to_contain_text("every pooled pair is judged")
        assert grades == pooled

        # what the answer key gives on the systems' own top 3 (the lists the pool was made of)
        ids = {text: qid for qid, text in ws.dataset.queries.items() if text in topic_of}
        runs = judge.pool_runs(ws, DEPTH, list(ids.values()))
        found = {label(s): {q for text, q in ids.items()
                            if any(d.split("-")[0] == topic_of[text] for d, _ in run.get(q, [])[:DEPTH])}
                 for s, run in runs.items()}
        assert len(ids) == len(topic_of), ids
        everyone_fails = sum(all(q not in hits for hits in found.values()) for q in ids.values())
        assert everyone_fails >= len(ABSENT)  # the questions the corpus cannot answer, at least

        open_tab(page, "Evaluate")
        page.locator("#evaluate-button").click()
        headline = page.locator("#eval-headline")
        expect(headline).to_contain_text(f"Every system fails on {everyone_fails} of {len(ids)} judged queries",
                                         timeout=120_000)
        shown = headline.inner_text()
        for name, hits in found.items():
            assert f"{name} {len(hits)} of {len(ids)} (" in shown, (name, len(hits), shown)
        assert "nDCG" not in shown and "Provisional" not in shown
        pool_rows = page.evaluate("""() => Array.from(document.querySelectorAll('#eval-glance table.rs-pool tr'))
            .slice(1).map(r => Array.from(r.querySelectorAll('th,td')).map(c => c.innerText.trim()))""")
        assert {r[0]: r[1].split(" (")[0] for r in pool_rows} == {n: f"{len(h)} of {len(ids)}"
                                                                  for n, h in found.items()}
        assert all(r[-1] == "exact" for r in pool_rows)
        note = page.locator("#eval-note")
        expect(note).to_contain_text("What the judged pool lets you conclude")
        assert not [line for line in note.inner_text().splitlines() if " beats " in line and "nDCG" in line]
        page.screenshot(path=str(shots / "hard-corpus-evaluate.png"), full_page=True)

        page.reload()  # the data set the page had open comes back, its judgments labels: the same verdict
        page.get_by_role("tab", name="Search").wait_for()
        expect(page.locator("#dataset-summary")).to_contain_text("40 documents", timeout=patience(120_000))
        open_tab(page, "Evaluate")  # computes when its tab opens
        expect(page.locator("#eval-headline")).to_contain_text(
            f"Every system fails on {everyone_fails} of {len(ids)} judged queries", timeout=patience(120_000))
