"""``bench/linked_corpus.py`` and the WLP rows of ``bench/few_labels.py``: the demo linked by its titles' BM25
matches (read back with its links, deterministic, never from a query or a label), then a run with WLP first
stages on it with a tiny encoder, each row with its interval."""
from __future__ import annotations

import json

import pytest

from tests.conftest import DEMO, bench_module, bench_output

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """The demo's linked copy, as ``python bench/linked_corpus.py data/demo --out DIR`` writes it (its ``main`` in
    this process; capsys is the tests', so what it prints is read by the test that runs it again)."""
    out = tmp_path_factory.mktemp("linked") / "demo-linked"
    module = bench_module("linked_corpus")
    assert module.main([str(DEMO), "--out", str(out)]) == 0
    return out


def test_the_linked_copy_holds_the_demo_and_three_links_to_each_titled_document(linked):
    from retrieval.data.readers import load_dataset

    demo, copy = load_dataset(DEMO), load_dataset(linked)
    assert copy.queries == demo.queries and copy.qrels == demo.qrels
    assert {d: (doc.title, doc.text) for d, doc in copy.docs.items()} == \
        {d: (doc.title, doc.text) for d, doc in demo.docs.items()}
    into: dict[str, int] = {}
    for doc in copy.docs.values():
        assert doc.id not in doc.links
        for target in doc.links:
            into[target] = into.get(target, 0) + 1
    titled = {d for d, doc in demo.docs.items() if doc.title.strip()}
    assert set(into) <= titled and all(n == 3 for n in into.values()) and len(into) > 0.9 * len(titled)
    assert copy.link_count == sum(into.values()) and copy.report.warnings == []


def test_the_same_data_set_gives_the_same_links(linked, tmp_path, capsys):
    printed = bench_output(bench_module("linked_corpus"), capsys, [DEMO, "--out", tmp_path / "again"])
    assert (tmp_path / "again" / "corpus.jsonl").read_bytes() == (linked / "corpus.jsonl").read_bytes()
    last = printed.strip().splitlines()[-1]
    assert last.startswith("documents=384 links=") and " linked_documents=" in last


@pytest.mark.slow
def test_few_labels_trains_wlp_first_stages_on_the_linked_copy(linked, capsys, tiny_model_dir, tmp_path):
    out = tmp_path / "few.json"
    printed = bench_output(bench_module("few_labels"), capsys, [
        linked, "--fractions", "0", "--pretrain", "wlp,ict+bfs+wlp", "--pretrain-pairs", "24", "--model",
        tiny_model_dir, "--store", tmp_path / "s.sqlite3", "--out-dir", tmp_path / "models", "--json", out])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["fraction"], r["first_stage"]) for r in rows] == [(0, "none"), (0, "wlp"), (0, "ict+bfs+wlp")]
    for r in rows:
        for system in ("dense", "hybrid"):
            low, high = r[system]["ndcg@10_ci"]
            assert low <= r[system]["ndcg@10"] <= high
    assert "links between its documents" in printed.splitlines()[0]
    assert f"[{rows[1]['hybrid']['ndcg@10_ci'][0]:.3f}, " in printed
    record = json.loads((tmp_path / "models" / "pretrain-ict+bfs+wlp" / "rankscope_training.json").read_text())
    assert "pretrain ict+bfs+wlp: 24 pseudo pairs (ict 8, bfs 8, wlp 8)" in record["result"]["stages"]
    assert printed.strip().splitlines()[-1] == "best_few_label_recipe=none gain_at_1pct=nan gain_at_5pct=nan"
