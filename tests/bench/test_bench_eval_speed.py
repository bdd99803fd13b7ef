"""``bench/eval_speed.py``'s corpus: seeded, a BEIR folder RankScope reads, every test query labelled
with one passage it was drawn from."""
from __future__ import annotations

import pytest

from tests.conftest import bench_module

pytestmark = pytest.mark.bench


def test_the_corpus_is_seeded_and_every_query_has_the_passage_it_was_drawn_from(tmp_path):
    from retrieval.data.readers import load_dataset

    bench = bench_module("eval_speed")
    ds = load_dataset(bench.synthetic(tmp_path / "a", 300, 8, seed=3))
    again = load_dataset(bench.synthetic(tmp_path / "b", 300, 8, seed=3))
    assert len(ds.docs) == 300 and ds.content_hash == again.content_hash
    test = ds.qrels["test"]
    assert len(test) == 8
    for q, labels in test.items():
        assert sorted(labels.values())[-1] == 2 and 0 in labels.values()
        best = next(d for d, grade in labels.items() if grade == 2)
        assert set(ds.queries[q].split()) <= set(ds.docs[best].text.split())


def test_per_system_reads_the_cli_seconds_line():
    bench = bench_module("eval_speed")
    assert bench.per_system("encoder x\nseconds: bm25 1.2, dense 0.4\n") == "bm25 1.2, dense 0.4"
    assert bench.per_system("nothing") == "?"
