"""Judgments are labels the moment they are stored (project issue 58, "labels that are not labels
yet"): an analyst uploads a corpus without labels, grades pooled pairs through the app's API, and
Evaluate, asked with no split picked and no other button pressed, reports the judged split; a second
session that opened the same corpus before the first grade reports it too, and so does
``python -m retrieval evaluate`` on the same store. The app runs for real (tiny encoder, a real
store) and is driven through ``gradio_client``."""
from __future__ import annotations

import json
import random
import re
from html import unescape

import pytest

from retrieval.store import Store
from tests.conftest import DEMO, store_copy
from tests.helpers import app_client
from tests.retrieval.test_cli import cli

pytestmark = [pytest.mark.server, pytest.mark.slow]  # starts the real app

TOPICS = {
    "garden": ("tomato seedlings compost soil watering greenhouse", "how often to water tomato seedlings"),
    "bread": ("sourdough starter flour dough proofing oven crust", "why does sourdough dough not rise"),
    "bike": ("bicycle chain gears derailleur brakes tyre saddle", "adjust the derailleur when gears skip"),
    "coffee": ("espresso grinder beans crema roast milk frothing", "espresso bitter with no crema"),
}
COUNTED = re.compile(r"(\d+) judged quer(?:y|ies) \((\d+) with a relevant document found\)")


def write_unlabelled(folder, per_topic: int = 8):
    """A corpus of ``per_topic`` passages on each topic (ids ``<topic>-N``) and one query per topic
    (ids the topics), no labels: ``corpus.jsonl`` and ``queries.jsonl`` in ``folder``."""
    rng = random.Random(3)
    rows = [{"_id": f"{t}-{i}", "title": f"{t} notes {i}",
             "text": " ".join(rng.choice(words.split()) for _ in range(12))}
            for t, (words, _) in TOPICS.items() for i in range(per_topic)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": t, "text": q}) + "\n"
                                                  for t, (_, q) in TOPICS.items()))
    return folder / "corpus.jsonl", folder / "queries.jsonl"


@pytest.fixture(scope="module")
def live(tiny_model_dir, tmp_path_factory, demo_sparse_store):
    import app as rankscope_app

    store = store_copy(demo_sparse_store, tmp_path_factory.mktemp("labels-store") / "store.sqlite3")
    demo, registry = rankscope_app.create(DEMO, model=str(tiny_model_dir), store_path=str(store), foreground_s=60)
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True,
                        **rankscope_app.launch_kwargs(registry.store))
    yield demo.local_url, registry, store
    demo.close()


@pytest.mark.slow
def test_grades_are_labels_in_every_session_and_the_command_line_with_no_click(live, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    url, registry, store = live
    corpus, queries = write_unlabelled(tmp_path / "kitchen")
    ana, bo = app_client(url), app_client(url)
    for client in (ana, bo):  # both open the corpus before any grade
        status, summary, *_ = client.predict([handle_file(corpus), handle_file(queries)], api_name="/load_dataset")
        assert "Loaded corpus" in unescape(status) and "No relevance labels" in unescape(summary)
    with pytest.raises(AppError, match="no relevance labels"):  # nothing judged yet
        ana.predict(None, [], api_name="/evaluate")

    # ana grades as a judge would: 2 for a passage on the query's topic, else 0
    progress, _, shown = ana.predict("ana", 5, False, api_name="/judge_queue")
    graded = 0
    while shown["query_id"] is not None and graded < 16:
        grade = 2 if shown["doc_id"].split("-")[0] == shown["query_id"] else 0
        progress, _, shown = ana.predict("ana", shown["query_id"], shown["doc_id"], str(grade), 5, False,
                                         api_name="/judge")
        graded += 1
    assert f"Judged {graded} of" in progress
    rows = Store(store).judgments(registry.get(registry.holding(ana.session_hash)).dataset.corpus_hash)
    relevant = {r["query_id"] for r in rows if r["grade"] > 0}
    assert len(rows) == graded and len(relevant) >= 2

    # no button pressed: Evaluate, with no split picked (the picker was filled before the first grade),
    # evaluates on the judged split, in ana's session and in bo's, which only opened the corpus
    counted = None
    for client in (ana, bo):
        note, table, _ = client.predict(None, [], api_name="/evaluate")
        note = unescape(note)
        assert "Split **judged**" in note or "Split judged" in note, note
        found = COUNTED.search(note)
        assert found and int(found.group(1)) == len({r["query_id"] for r in rows}), note
        assert int(found.group(2)) == len(relevant)
        assert [r[0] for r in table["data"]][:2] == ["BM25", "Dense"]
        assert counted in (None, found.group(0))
        counted = found.group(0)

    # the command line reads the store's judgments as the app does: the judged split is evaluated
    res = cli("evaluate", corpus.parent, "--systems", "bm25", "--store", store, tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    judged = len({r["query_id"] for r in rows})
    assert f"labels: {graded} judgments of {judged} queries from the store" in res.stderr, res.stderr
    assert f"kitchen: 32 documents, {judged} judged queries" in res.stderr, res.stderr
    assert "95% interval over the judged queries" in res.stdout
    assert re.search(r"^BM25\s+\d\.\d{4}", res.stdout, re.M), res.stdout
