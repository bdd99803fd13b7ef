"""``bench/lambda_labels.py`` on the demo with a tiny encoder: its label-free column is the app's
hybrid without labels, its last row's choice is the app's λ tuned on all of train, and five drawn
queries never overturn the label-free λ."""
from __future__ import annotations

import pytest

from retrieval import Workspace
from retrieval.data.readers import load_dataset
from retrieval.systems.hybrid import CLEAR
from tests.conftest import DEMO, bench_module

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def bench():
    return bench_module("lambda_labels")


def test_the_columns_are_the_apps_choices(bench, tiny_encoder, store):
    res = bench.study(DEMO, store, [5, 20], 3, model=tiny_encoder)  # asserts the last row is the app's λ
    rows = res["rows"]
    assert [r["n"] for r in rows] == [5, 20, 39] and [len(r[bench.WAYS[0]]) for r in rows] == [3, 3, 1]
    app, free = bench.WAYS[2], bench.WAYS[3]
    # the label-free column is what the app's hybrid gives where no split has labels to tune on
    no_train = bench.load_dataset(DEMO)
    no_train = type(no_train)(no_train.name, no_train.docs, no_train.queries, {"test": no_train.qrels["test"]})
    label_free = Workspace(no_train, store, model=tiny_encoder).evaluate("hybrid", "test").mean["ndcg@10"]
    assert all(x == pytest.approx(label_free, abs=1e-9) for r in rows for _, x in r[free])
    # five queries: a permutation test of 2^5 sign flips cannot reach p < 0.05, so λ stays 1
    assert rows[0][app] == rows[0][free]
    again = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    assert CLEAR.lambda_for(again, "test").value == rows[-1][app][0][0]
    worst, gain = bench.show({"demo|as is": res})
    gaps = [x - y for r in rows for (_, x), (_, y) in zip(r[app], r[free])]
    assert worst == pytest.approx(min(0.0, *gaps))
    raw = bench.WAYS[0]
    assert gain == pytest.approx(sum(sum(x for _, x in r[app]) / len(r[app]) - sum(x for _, x in r[raw]) / len(r[raw])
                                     for r in rows) / len(rows))


def test_a_withheld_corpus_is_studied_with_the_words_gone_for_train_and_test_alike(bench, tiny_encoder, store, capsys):
    res = bench.study(DEMO, store, [5], 2, model=tiny_encoder, kind="withheld")
    assert res["systems"]["bm25"] == 0.0  # no relevant document holds a word of its query
    bench.show({"demo|withheld": res})
    out = capsys.readouterr().out
    assert "app − better single" in out and "withheld: the app's λ is" in out
