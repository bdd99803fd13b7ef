"""The analyst's own flow, end to end in Chromium, on data that is not the demo: an unlabelled corpus
and a .txt of queries loaded in the Data tab, two judges ("ana", then "bo") grading with the keyboard
while the learned sparse index is still being built, SPLADE joining the pool half way, the judgments
labels in every view with no click, Evaluate read, then the page reloaded: the corpus is back as it was.

At every step where a verdict can be shown (the Judge tab's settled list, Evaluate's headline and
conclusions) no verdict names a system whose judged@10 on those queries is below 0.9: the system that
joined late is held back ("not enough of … judged — judge N more") until its top 10 is judged; a
metric deeper than the judged pool is "n/m", never a perfect recall@100; one count of judged queries
is written alike by the Judge tab, the data set summary and Evaluate's caption.

The learned sparse build is held by a gate (an ``Event``) on the SPLADE model's document encoding of
this corpus only (the gated encoder of ``test_background`` holds the dense build the same way), so
SPLADE joins while the judging is under way, every time, however fast the machine."""
from __future__ import annotations

import json
import random
import re
import threading

import pytest

from retrieval.systems import label, shown
from tests.browser.test_browser import CHROMIUM, open_tab, served, upload
from tests.conftest import DEMO, store_copy
from tests.helpers import patience

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt install chromium)"),
              pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

LATE = "Learned sparse (SPLADE)"
SYSTEMS = tuple(label(s) for s in shown())  # every system on show by default, SPLADE the last to join
THRESHOLD = 100  # judged@10, in percent, that a verdict needs (retrieval.judging.coverage.MIN_JUDGED_AT_10)
COUNTED = re.compile(r"(\d+) judged quer(?:y|ies) \((\d+) with a relevant document found\)")

TOPICS = {  # topic: its words, then a question about it
    "garden": ("tomato seedlings compost soil watering greenhouse pruning mulch",
               "how often should tomato seedlings be watered in a greenhouse"),
    "bread": ("sourdough starter flour dough proofing oven crust yeast",
              "why does my sourdough dough not rise during proofing"),
    "bike": ("bicycle chain gears derailleur brakes tyre pressure saddle",
             "how do I adjust the derailleur when bicycle gears skip"),
    "sleep": ("insomnia bedtime melatonin caffeine nap circadian snoring pillow",
              "does caffeine in the afternoon cause insomnia at bedtime"),
    "tax": ("income deduction refund invoice receipts pension allowance audit",
            "which receipts do I need to claim an income tax deduction"),
    "piano": ("piano scales chords pedal metronome practice fingering sonata",
              "how long should I practice piano scales with a metronome"),
    "aquarium": ("aquarium filter nitrate algae gravel heater guppies water",
                 "how do I lower nitrate and algae in an aquarium filter"),
    "hiking": ("trail boots blisters backpack altitude map compass summit",
               "how to avoid blisters from new boots on a long trail"),
    "coffee": ("espresso grinder beans crema roast milk frothing barista",
               "why is my espresso bitter with no crema from the grinder"),
    "roof": ("roof shingles gutter leak flashing attic insulation moss",
             "how to find a roof leak near the flashing in the attic"),
}
FILLER = "the a of and with for in on about when after before this that very often some".split()


def write_corpus(folder, per_topic: int = 20, seed: int = 7):
    """A seeded corpus of short passages, ``per_topic`` on each topic (ids ``<topic>-NNN``), no labels,
    and the .txt of one question per topic; returns the two paths and the texts the encoders see."""
    rng = random.Random(seed)
    rows = []
    for topic, (words, _) in TOPICS.items():
        vocab = words.split()
        for i in range(per_topic):
            body = " ".join(rng.choice(vocab) if rng.random() < 0.45 else rng.choice(FILLER) for _ in range(24))
            rows.append({"_id": f"{topic}-{i:03d}", "title": f"Notes {i} on {rng.choice(vocab)}", "text": body})
    rng.shuffle(rows)
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = folder / "questions.txt"
    queries.write_text("".join(q + "\n" for _, q in TOPICS.values()))
    return corpus, queries, {f"{r['title']}. {r['text']}" for r in rows}


@pytest.fixture
def sparse_gate(monkeypatch):
    """Holds the SPLADE model's encoding of the documents of ``gate.texts`` until ``gate`` is set
    (queries and other corpora pass)."""
    from retrieval.index.splade import SparseModel

    gate = threading.Event()
    gate.texts = set()
    encode = SparseModel.encode

    def gated(self, texts, query=False, progress=None, chunk=256):
        if not query and any(t in gate.texts for t in texts):
            assert gate.wait(300), "the test never opened the gate"
        return encode(self, texts, query=query, progress=progress, chunk=chunk)

    monkeypatch.setattr(SparseModel, "encode", gated)
    yield gate
    gate.set()  # never leave a build thread waiting


def shares(text: str) -> dict[str, int]:
    """Each system's judged@10 (percent) in the settled list's "Judged@10 (…): BM25 40% [..], …" line."""
    line = next(ln for ln in text.splitlines() if ln.startswith("Judged@10"))
    listed = line.split("): ", 1)[1]
    return {name: int(m.group(1)) for name in SYSTEMS if (m := re.search(re.escape(name) + r" (\d+)%", listed))}


def named(line: str) -> list[str]:
    return [name for name in SYSTEMS if name in line]


def check_settled(text: str) -> dict[str, int]:
    """No settled pair, no "beats", naming a system under the threshold; returns the shares."""
    if "Which comparisons are settled" not in text:
        assert "settled:" not in text and " beats " not in text, text
        return {}
    covered = shares(text)
    for line in text.splitlines():
        if "settled:" in line and "Which comparisons" not in line or " beats " in line:
            for name in named(line):
                assert covered[name] >= THRESHOLD, f"a verdict on {name} at judged@10 {covered[name]}%: {line}"
        if line.startswith("no verdict yet:"):
            lacking = re.findall(r"not enough of (.+?)'s results judged \(judged@10 (\d+)%", line)
            assert lacking and all(int(share) < THRESHOLD for _, share in lacking), line
            assert re.search(r"— judge \d+ more of its top-10 documents", line), line
    return covered


def test_a_new_user_judges_an_unlabelled_corpus_with_two_judges_while_splade_joins(
        tiny_model_dir, demo_sparse_store, sparse_gate, tmp_path, shots):
    expect = pytest.importorskip("playwright.sync_api").expect

    corpus, questions, texts = write_corpus(tmp_path)
    sparse_gate.texts |= texts
    topic_of = {q: t for t, (_, q) in TOPICS.items()}
    try:
        with served(DEMO, str(tiny_model_dir), store_copy(demo_sparse_store, tmp_path / "s.sqlite3"),
                    foreground_s=60) as (page, _):
            expect.set_options(timeout=patience(30_000))
            summary, banner = page.locator("#dataset-summary"), page.locator("#encoding-status")

            # 1. Data: the corpus, then the questions, no labels
            open_tab(page, "Data")
            upload(page, "upload", corpus)
            page.locator("#load-button").click()
            expect(page.locator("#load-status")).to_contain_text("Loaded corpus", timeout=patience(90_000))
            upload(page, "query-upload", questions)
            page.locator("#add-queries-button").click()
            expect(page.locator("#load-status")).to_contain_text(f"Added {len(TOPICS)} queries")
            expect(summary).to_contain_text("200 documents")
            expect(summary).to_contain_text("No relevance labels")
            expect(banner).to_contain_text("Learned sparse index (SPLADE)")  # still being built: held
            page.screenshot(path=str(shots / "flow-data.png"), full_page=False)

            # 2. Judge as ana while BM25, dense and the hybrid are on show
            open_tab(page, "Judge")
            progress, settled = page.locator("#judge-progress"), page.locator("#judge-settled")
            judged = 0

            def start(name: str) -> None:
                page.locator("#judge-name textarea").fill(name)
                page.locator("#judge-panel").click()  # leave the text box: the keys now grade
                page.locator("#judge-start").click()
                expect(progress).to_contain_text(re.compile(r"Judged \d+ of \d+"))
                page.locator("body").click(position={"x": 5, "y": 5})

            def grade(n: int, name: str, late: bool = False) -> None:
                """``n`` pairs graded with the keys as a judge would: 2 for a passage on the
                question's topic, else 0 (bo gives 1 to some); the settled list checked each time."""
                nonlocal judged
                for i in range(n):
                    query = page.locator("#judge-panel .judge-query b").inner_text()
                    doc_id = page.locator("#judge-panel .judge-meta").inner_text().split(" · ")[0]
                    if late:  # the documents of the system that joined come first
                        expect(page.locator("#judge-panel .judge-by")).to_contain_text(LATE)
                    on_topic = doc_id.split("-")[0] == topic_of[query]
                    key = ("1" if name == "bo" and i % 2 else "2") if on_topic else "0"
                    done = int(re.search(r"Judged (\d+) of", progress.inner_text()).group(1))
                    page.keyboard.press(key)
                    expect(progress).to_contain_text(re.compile(rf"Judged {done + 1} of \d+"))
                    judged += 1
                    check_settled(settled.inner_text())

            start("ana")
            expect(progress).to_contain_text("Judged 0 of")
            grade(12, "ana")
            expect(settled).to_contain_text("Which comparisons are settled")
            covered = check_settled(settled.inner_text())
            assert LATE not in covered  # not on show yet: not in the pool, in no comparison
            expect(settled).not_to_contain_text("processing")  # the shot after the last grade's list
            page.screenshot(path=str(shots / "flow-judge-before.png"), full_page=True)

            # SPLADE's index is built: it joins while ana judges, its unjudged top 10 next
            sparse_gate.set()
            expect(banner).to_contain_text("Learned sparse index (SPLADE) ready", timeout=patience(120_000))
            page.locator("#judge-reveal input").check()
            page.locator("body").click(position={"x": 5, "y": 5})  # off the checkbox: the keys grade again
            grade(1, "ana")  # the pair on screen when it joined
            expect(progress).to_contain_text(re.compile(re.escape(LATE) + r" joined: its \d+ unjudged top-10 "
                                                        r"documents come first, with the rest of the judged queries'"))
            expect(settled).to_contain_text(LATE)
            grade(6, "ana")  # the judged queries' pools made whole first: the joined system's pairs there too
            text = settled.inner_text()
            covered = check_settled(text)
            assert covered[LATE] < THRESHOLD
            assert re.search(r"no verdict yet:.*not enough of " + re.escape(LATE)
                             + r"'s results judged \(judged@10 \d+%.*— judge \d+ more", text), text
            expect(settled).not_to_contain_text("processing")  # the shot after the last grade's list
            page.screenshot(path=str(shots / "flow-judge-joined.png"), full_page=True)

            ana = judged
            # a second judge
            start("bo")
            expect(progress).to_contain_text("Judged 0 of")
            grade(5, "bo")
            check_settled(settled.inner_text())
            head = COUNTED.search(settled.inner_text())
            assert head, settled.inner_text()
            expect(summary).to_contain_text("judged:")  # every grade is a label at once: no button
            expect(summary).to_contain_text(head.group(0))  # the Judge tab's count, word for word

            # 3. Evaluate computes as its tab opens, on the judged split: a headline, a glance table and
            # conclusions the judgments can carry
            open_tab(page, "Evaluate")
            glance = page.locator("#eval-glance")
            expect(glance).to_contain_text(LATE, timeout=patience(90_000))
            note = page.locator("#eval-note")
            expect(note).to_contain_text(head.group(0))
            check_evaluate(page, expect)
            page.screenshot(path=str(shots / "flow-evaluate.png"), full_page=True)

            # Failures: a document nobody judged is counted apart, never called a false positive or a trap
            open_tab(page, "Failures")
            page.locator("#failures-button").click()
            page.locator("#failures-cards .rs-card").first.wait_for(timeout=90_000)
            cards = page.evaluate("""() => Array.from(document.querySelectorAll('#failures-cards .rs-card')).map(
                c => [c.dataset.category, !!c.querySelector('.rs-label-unjudged')])""")
            assert cards  # the judged queries' pools were made whole first: an unjudged document is rare there
            assert not [c for c, unjudged in cards if unjudged and c in ("semantic_false_positive", "lexical_trap")]

            # 4. A reload reopens the corpus the page had open, with its queries and the judgments as
            # labels, with no upload and no click
            page.reload()
            page.get_by_role("tab", name="Search").wait_for()
            expect(summary).to_contain_text("200 documents", timeout=patience(120_000))
            expect(summary).to_contain_text(f"{len(TOPICS)} queries")
            expect(summary).to_contain_text(head.group(0))
            expect(summary).not_to_contain_text("No relevance labels")
            open_tab(page, "Evaluate")  # computes when its tab opens
            expect(page.locator("#eval-glance")).to_contain_text(LATE, timeout=patience(90_000))
            expect(page.locator("#eval-note")).to_contain_text(head.group(0))
            check_evaluate(page, expect)
            page.screenshot(path=str(shots / "flow-reloaded.png"), full_page=True)
            open_tab(page, "Judge")  # ana goes on where she was, and the settled list counts alike
            start("ana")
            expect(progress).to_contain_text(f"Judged {ana} of")
            expect(settled).to_contain_text(head.group(0))
            check_settled(settled.inner_text())
    finally:
        sparse_gate.set()


def check_evaluate(page, expect) -> None:
    """Evaluate's headline and conclusions name no winner whose judged@10 is under the threshold,
    the late system is held back with how many more to judge, and recall@100 is not measurable."""
    # the judged pool's table leads once the summary is computed on the labels as they stand (a grade or a
    # build that ends meanwhile computes the results again)
    expect(page.locator("#eval-glance table.rs-pool")).to_have_count(1, timeout=patience(90_000))
    table = page.evaluate("""() => Array.from(document.querySelectorAll('#eval-glance table:not(.rs-pool) tr')).map(
        r => Array.from(r.querySelectorAll('th,td')).map(c => c.innerText.trim()))""")
    header = [h.replace("ⓘ", "").strip() for h in table[0]]
    rows = {r[0]: dict(zip(header[1:], r[1:])) for r in table[1:]}
    assert set(rows) == set(SYSTEMS), rows
    judged_at_10 = {name: float(re.match(r"[\d.]+", cells["judged@10"]).group(0)) for name, cells in rows.items()}
    recall = next(h for h in header if h.lower().startswith("recall@100"))
    for name, cells in rows.items():
        assert cells[recall].startswith("n/m"), (name, cells)  # the pool is 10 deep: recall@100 cannot be told
    assert "1.0000 [1.000, 1.000]" not in page.locator("#eval-glance").inner_text()
    headline = page.locator("#eval-headline").inner_text()
    if "is the best system" in headline:
        assert all(v >= THRESHOLD / 100 for v in judged_at_10.values()), (headline, judged_at_10)
    assert re.search(r"Provisional — judge \d+ more|No single best system yet|Every system fails|is the best system",
                     headline), headline
    assert "nDCG" not in headline  # on labels judged in the app, the pool's measures speak
    note = page.locator("#eval-note").inner_text()
    for line in note.splitlines():
        if " beats " in line:
            assert all(judged_at_10[n] >= THRESHOLD / 100 for n in named(line)), (line, judged_at_10)
    pool = page.evaluate("""() => Array.from(document.querySelectorAll('#eval-glance table.rs-pool tr')).slice(1)
        .map(r => Array.from(r.querySelectorAll('th,td')).map(c => c.innerText.trim()))""")
    assert {r[0] for r in pool} == set(SYSTEMS)
    for name, *_, figures in pool:  # exact where its top 10 is judged on every judged query, else provisional
        assert (figures == "exact") == (judged_at_10[name] >= THRESHOLD / 100), (name, figures, judged_at_10)
    if all(v >= THRESHOLD / 100 for v in judged_at_10.values()):  # the judged queries' pool is whole
        assert "What the judged pool lets you conclude" in note and "Provisional" not in headline, note
    else:
        assert re.search(r"No verdict yet on the judged pool: \d+ of the systems' top-10 documents on the \d+ "
                         r"judged queries are unjudged", note), note
