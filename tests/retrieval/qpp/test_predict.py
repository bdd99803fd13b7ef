"""``predict`` on real workspaces: every query predicted, hardest first, with the columns the TSV and the
app read; the corpus scores each family of list is measured against; fitted to nDCG@10 where enough
queries are judged (the labels the project's evaluation gives); cached in the store."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from retrieval import systems as registry
from retrieval.data.readers import load_dataset
from retrieval.qpp import predictors
from retrieval.qpp.combine import MIN_FIT
from retrieval.qpp.predict import _groups, _judged, predict
from retrieval.systems.base import Needs, SystemBase
from retrieval.workspace import Workspace
from tests.conftest import DEMO


@pytest.fixture
def toy_ws(toy_dataset, store, tiny_encoder):
    extra = toy_dataset.with_queries({"u1": "stock market news", "u2": "zebra giraffe"})  # in no split
    return Workspace(extra, store, model=tiny_encoder)


def test_every_query_is_predicted_hardest_first_with_every_column(toy_ws):
    got = predict(toy_ws, systems=("bm25", "dense", "hybrid"))
    assert got.systems == ("bm25", "dense", "hybrid")
    assert {p.query_id for p in got.queries} == {"q1", "q2", "q3", "q4", "u1", "u2"}
    keys = [(-p.difficulty, p.query_id) for p in got.queries]
    assert keys == sorted(keys)
    for p in got.queries:
        assert p.difficulty == pytest.approx(1 - np.mean(list(p.predicted.values())))
        assert all(0 <= v <= 1 for v in p.predicted.values())
    assert all(c.how == "label-free" and c.judged == 0 for c in got.combinations.values())  # 4 judged < MIN_FIT
    rows = got.rows()
    assert [list(r) for r in rows] == [got.columns()] * len(rows)
    assert got.columns()[:6] == ["query_id", "text", "avg_idf", "max_idf", "avg_scq", "max_scq"]
    assert "dense.coherence" in got.columns() and got.columns()[-1] == "difficulty"
    nothing = got.by_id()["u2"]  # no term the corpus holds: BM25 finds nothing, its list's predictors left out
    assert nothing.pre == {k: 0.0 for k in predictors.PRE} and nothing.post["bm25"] == {}
    assert set(nothing.post["dense"]) == {"nqc", "wig", "coherence"}  # clarity needs a query term the corpus holds
    assert got.hardest(2) == list(got.queries[:2])


def test_bm25_lists_are_measured_against_bm25s_score_of_the_corpus_as_one_document(toy_ws):
    got = predict(toy_ws, ["q2"], systems=("bm25",)).by_id()["q2"]
    ws = toy_ws
    whole = "\n".join(d.full_text for d in ws.dataset.docs.values())
    s_d = sum(c.score for c in ws.bm25.explain_text(ws.dataset.queries["q2"], whole))
    scores = np.array([s for _, s in ws.run("bm25", "train", 100)["q2"]])
    assert got.post["bm25"]["nqc"] == pytest.approx(scores.std() / abs(s_d), rel=1e-5)
    n_terms = len(ws.tokenizer(ws.dataset.queries["q2"]))
    assert got.post["bm25"]["wig"] == pytest.approx((scores[:5].mean() - s_d) / np.sqrt(n_terms), rel=1e-5)
    assert got.disagreement == 0.0  # one system


def test_dense_lists_are_measured_against_the_cosine_with_the_corpus_centroid(toy_ws):
    got = predict(toy_ws, ["q1"], systems=("dense",)).by_id()["q1"]
    ws = toy_ws
    centroid = ws.dense.index.embeddings.astype(np.float64).mean(axis=0)
    q = ws.dense.encode_query(ws.dataset.queries["q1"]).astype(np.float64)
    s_d = q @ centroid / (np.linalg.norm(q) * np.linalg.norm(centroid))
    hits = ws.run("dense", "train", 100)["q1"]
    scores = np.array([s for _, s in hits])
    assert got.post["dense"]["nqc"] == pytest.approx(scores.std() / abs(s_d), rel=1e-4)
    vectors = ws.dense.index.embeddings[[ws.doc_row[d] for d, _ in hits[:10]]]
    assert got.post["dense"]["coherence"] == pytest.approx(predictors.coherence(vectors))


def test_a_fusions_list_is_measured_against_its_own_mean(toy_ws):
    got = predict(toy_ws, ["q3"], systems=("bm25", "dense", "rrf")).by_id()["q3"]
    scores = np.array([s for _, s in toy_ws.run("rrf", "test", 100)["q3"]])
    assert got.post["rrf"]["nqc"] == pytest.approx(scores.std() / scores.mean())  # the coefficient of variation
    assert 0 <= got.disagreement <= 1


def test_predictions_are_cached_in_the_store_and_read_back_equal(toy_ws, store):
    first = predict(toy_ws, systems=("bm25", "dense"))
    rows = store.db.execute("select count(*) from metrics where system like 'qpp%'").fetchone()[0]
    assert rows == 3  # one row per system and one shared
    fresh = Workspace(toy_ws.dataset, store, model=toy_ws.encoder)
    assert predict(fresh, systems=("bm25", "dense")) == first
    assert store.db.execute("select count(*) from metrics where system like 'qpp%'").fetchone()[0] == rows
    other = predict(fresh, systems=("bm25", "dense"), k=10)  # another depth: another key
    assert store.db.execute("select count(*) from metrics where system like 'qpp%'").fetchone()[0] == 2 * rows
    assert other.by_id()["q1"].pre == first.by_id()["q1"].pre


@pytest.fixture(scope="module")
def demo_ws():
    return Workspace(load_dataset(DEMO), None)


def test_the_combination_is_fitted_to_ndcg_at_10_where_enough_queries_are_judged(demo_ws):
    ws = demo_ws
    got = predict(ws, systems=("bm25", "ql"))
    judged = {q for split in ws.dataset.qrels.values() for q, docs in split.items()
              if any(g > 0 for g in docs.values())}
    assert len(judged) >= MIN_FIT
    for s in ("bm25", "ql"):
        c = got.combinations[s]
        assert (c.how, c.judged, c.folds) == ("fitted", len(judged), 5)
    free = predict(ws, systems=("bm25", "ql"), labels="none")
    assert {c.how for c in free.combinations.values()} == {"label-free"}
    assert [p.pre for p in sorted(free.queries, key=lambda p: p.query_id)] == \
        [p.pre for p in sorted(got.queries, key=lambda p: p.query_id)]


def test_the_labels_fitted_to_are_the_evaluations_per_query_ndcg_at_10(demo_ws):
    ws = demo_ws
    groups = _groups(ws, list(ws.dataset.queries))
    run = {q: hits for split in groups if split for q, hits in ws.run("bm25", split, 100).items()}
    labels = _judged(ws, run, groups)
    for split in ws.dataset.splits:
        expected = ws.evaluate("bm25", split).per_query["ndcg@10"]
        assert {q: labels[q] for q in expected} == pytest.approx(expected)


def test_bad_arguments_are_one_line_errors(toy_ws):
    with pytest.raises(ValueError, match="not in toy"):
        predict(toy_ws, ["q1", "nope"], systems=("bm25",))
    with pytest.raises(ValueError, match="unknown system"):
        predict(toy_ws, systems=("bm25", "nope"))
    with pytest.raises(ValueError, match="labels is one of"):
        predict(toy_ws, systems=("bm25",), labels="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k is at least 1"):
        predict(toy_ws, systems=("bm25",), k=0)


@pytest.mark.parametrize("damage", [{"avg_idf": {"q1": "x"}}, {}, {"avg_idf": []}])
def test_a_damaged_cached_prediction_is_a_miss_computed_again(toy_ws, store, damage):
    from retrieval.store.keys import pack

    first = predict(toy_ws, systems=("bm25",))
    with store.db.conn:
        store.db.execute("update metrics set per_query = ? where system = 'qpp'", [pack(damage)])
    assert predict(Workspace(toy_ws.dataset, store), systems=("bm25",)) == first
    with store.db.conn:
        store.db.execute("update metrics set per_query = ? where system = 'qpp:bm25'", [b"not zlib"])
    assert predict(Workspace(toy_ws.dataset, store), systems=("bm25",)) == first


class Gated(SystemBase):
    """A system whose index is built in the background, held until ``gate`` is set."""

    key = label = short = "qpp_gated"
    needs = Needs()

    def __init__(self) -> None:
        self.gate = threading.Event()

    def build(self, ws):
        return ws.background_build(self.key, lambda progress, indexing: Held() if self.gate.wait(30) else None,
                                   len(ws.dataset.docs))

    def waits_for(self, ws):
        return (self.build(ws),)

    def params(self, ws, split):
        return {"gated": 1}

    def search(self, ws, queries, k, split):
        self.build(ws).value  # noqa: B018 - answers once built
        return {q: [(d, 1.0 / (i + 1)) for i, d in enumerate(ws.dataset.doc_ids[:k])] for q in queries}


class Held:
    def nbytes(self) -> int:
        return 1


def test_a_system_still_being_built_is_left_out_until_it_is_built(toy_dataset):
    gated = registry.register(Gated())
    try:
        ws = Workspace(toy_dataset, None)
        gated.build(ws).start()
        assert predict(ws, systems=("bm25", gated.key)).systems == ("bm25",)
        with pytest.raises(ValueError, match="no system is ready"):
            predict(ws, systems=(gated.key,))
        gated.gate.set()
        assert gated.build(ws).follow(30, None, 0.05)
        assert predict(ws, systems=("bm25", gated.key)).systems == ("bm25", gated.key)
    finally:
        gated.gate.set()
        registry.unregister(gated.key)


def test_coherence_reads_the_dense_index_once_it_is_built_and_never_builds_it(toy_ws):
    before = predict(toy_ws, ["q1", "q2"], systems=("bm25",))
    assert all("coherence" not in p.post["bm25"] for p in before.queries)
    assert toy_ws.builds["dense"].built is None  # not built for coherence alone
    toy_ws.build_dense()
    after = predict(toy_ws, ["q1", "q2"], systems=("bm25",))  # another key: not the cached predictions
    hits = toy_ws.run("bm25", "train", 100)["q1"]
    vectors = toy_ws.dense.index.embeddings[[toy_ws.doc_row[d] for d, _ in hits[:10]]]
    assert after.by_id()["q1"].post["bm25"]["coherence"] == pytest.approx(predictors.coherence(vectors))
