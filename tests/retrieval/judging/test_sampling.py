"""Judging a query log: the queries are sampled (random, by frequency, stratified by the systems'
disagreement), the sample is reproducible and stored, and the judge's queue is kept up to date
grade by grade instead of being rebuilt."""
from __future__ import annotations

from collections import Counter

import pytest

from retrieval import Store, load_dataset
from retrieval.data.dataset import Dataset, Document
from retrieval.judging import sampling
from tests.conftest import DEMO


def log(n: int, counts: bool = True) -> Dataset:
    docs = {"d1": Document("d1", "", "kettle descaling")}
    queries = {f"q{i:05d}": f"query number {i}" for i in range(n)}
    fields = {q: {"Count": str(1000 if i < 10 else 1)} for i, q in enumerate(queries)} if counts else {}
    return Dataset("log", docs, queries, {}, query_fields=fields)


def test_the_default_judges_every_query_of_a_small_set_and_samples_a_log():
    assert sampling.default_method(load_dataset(DEMO)) == "all"
    assert sampling.default_method(log(5000)) == "random"
    everything = sampling.draw(log(50), "random", size=200)
    assert everything.method == "all" and everything.size == 50  # a sample as large as the set: the set


def test_a_random_sample_is_reproducible_and_another_seed_differs():
    ds = log(5000)
    a, b, c = (sampling.draw(ds, "random", 200, seed) for seed in (0, 0, 1))
    assert a.query_ids == b.query_ids and a.id == b.id and len(set(a.query_ids)) == 200
    assert a.query_ids != c.query_ids and a.id != c.id
    with pytest.raises(ValueError, match="unknown sampling method 'nope'"):
        sampling.draw(ds, "nope")


def test_frequency_sampling_draws_head_queries_first():
    ds = log(5000)
    heavy = {f"q{i:05d}" for i in range(10)}  # count 1000 against 1
    sample = sampling.draw(ds, "frequency", 50, seed=3)
    assert len(heavy & set(sample.query_ids)) >= 9  # a uniform draw would hold 0.1 of them
    with pytest.raises(ValueError, match="no count column"):
        sampling.draw(log(5000, counts=False), "frequency", 50)


def test_stratified_sampling_takes_as_many_agreed_as_contested_queries():
    ds = log(5000)
    score = {q: (int(q[1:]) % 100) / 100 for q in ds.queries}  # disagreement from 0 to 0.99
    sample = sampling.draw(ds, "stratified", 100, seed=0, disagreement=lambda ids: {q: score[q] for q in ids})
    quarters = Counter(min(3, int(score[q] * 4)) for q in sample.query_ids)
    assert sample.size == 100 and all(15 <= quarters[i] <= 35 for i in range(4)), quarters


def test_a_sample_is_kept_with_the_corpus(tmp_path):
    ds = log(5000)
    store = Store(tmp_path / "s.sqlite3")
    sample = sampling.draw(ds, "random", 20, seed=4)
    sampling.keep(store, ds, sample)
    again = Store(tmp_path / "s.sqlite3")
    kept = sampling.stored(again, ds)
    assert [(s.id, s.method, s.seed, s.query_ids) for s in kept] == [(sample.id, "random", 4, sample.query_ids)]
    fewer = ds.without_queries(sample.query_ids[:5])
    assert sampling.stored(again, fewer)[0].query_ids == sample.query_ids[5:]  # the queries it still has


@pytest.mark.slow
def test_the_judge_queue_is_kept_up_to_date_grade_by_grade(tmp_path, tiny_encoder):
    from retrieval import Workspace
    from ui import judge

    ds = load_dataset(DEMO)
    store = Store(tmp_path / "s.sqlite3")
    ws = Workspace(ds, store, model=tiny_encoder)
    ws.build_dense()
    q = judge.judging_queue(ws, store, "ann", 2, "random", 10, 0, fresh=True)
    assert q.sample.method == "random" and len({qid for qid, _ in q.pairs}) == 10
    first = q.next_unjudged()
    qid, doc = q.pairs[first]
    again, nxt = judge.grade_pair(ws, store, "ann", qid, doc, 2, 2, "random", 10, 0)
    assert again is q  # the same queue, the grade noted in it: nothing rebuilt
    assert q.grade(first) == 2 and q.judged_count == 1 and nxt == q.next_unjudged(first)
    rebuilt = judge.judging_queue(ws, store, "ann", 2, "random", 10, 0, fresh=True)  # from the store: the same
    assert rebuilt is not q and set(rebuilt.pairs) == set(q.pairs)
    assert rebuilt.pairs[0] == q.pairs[first] and rebuilt.grade(0) == 2  # the grade made before comes first
    assert rebuilt.pairs[rebuilt.next_unjudged()] == q.pairs[nxt]  # and the same pair comes next
    progress, _, _ = judge.show(ws, rebuilt, nxt)
    assert "from a random sample of 10 of the 71 queries (seed 0; kept with the corpus)" in progress
    assert [s.query_ids for s in sampling.stored(store, ds)] == [q.sample.query_ids]


def test_the_stored_sample_comes_back_after_queries_were_added(tmp_path):
    ds = log(5000)
    store = Store(tmp_path / "s.sqlite3")
    first = sampling.sample_for(store, ds, "random", 30, seed=2)
    grown = ds.with_queries({f"new-{i}": f"a new query {i}" for i in range(500)})
    assert sampling.draw(grown, "random", 30, seed=2).query_ids != first.query_ids  # a fresh draw would differ
    again = sampling.sample_for(store, grown, "random", 30, seed=2)
    assert again.query_ids == first.query_ids and again.id == first.id  # the stored one: the same queries
    other = sampling.sample_for(store, grown, "random", 30, seed=3)
    assert other.query_ids != first.query_ids and len(sampling.stored(store, grown)) == 2


def test_on_a_shared_deployment_a_sample_is_its_drawers(tmp_path):
    """ana's sample holds her private queries' ids: bo, judging the same corpus with the same method,
    size and seed, gets a draw of his own queries, as if ana had drawn nothing (which of his queries
    her sample keeps would tell of hers); off a shared deployment the stored one is everyone's."""
    from retrieval.sharing.owners import Viewer

    ds = log(5000)
    store = Store(tmp_path / "s.sqlite3")
    ana, bo = Viewer("app:ana", shared=True), Viewer("app:bo", shared=True)
    hers = ds.with_queries({f"private-{i}": f"ana's own query {i}" for i in range(5000)})
    first = sampling.sample_for(store, hers, "random", 30, seed=2, viewer=ana)
    assert any(q.startswith("private-") for q in first.query_ids)
    his = sampling.sample_for(store, ds, "random", 30, seed=2, viewer=bo)
    assert his.query_ids == sampling.draw(ds, "random", 30, seed=2).query_ids and his.drawn == 30
    assert sampling.stored(store, hers, ana)[-1].query_ids == first.query_ids  # hers comes back to her
    assert [s.query_ids for s in sampling.stored(store, ds, bo)] == [his.query_ids]
    local = Viewer("app:ana", shared=False)
    assert sampling.sample_for(store, ds, "random", 30, seed=9, viewer=local).id in \
        {s.id for s in sampling.stored(store, ds, Viewer("app:bo", shared=False))}


def predicted_by(scores: dict[str, float], key: str = "predictions-a", asked: list[str] | None = None
                 ) -> sampling.Difficulty:
    """A difficulty over ``scores``, noting in ``asked`` the queries it was asked about (a stored sample asks none)."""
    def of(ids: list[str]) -> dict[str, float]:
        (asked if asked is not None else []).extend(ids)
        return {q: scores[q] for q in ids if q in scores}

    return sampling.Difficulty(key, of)


def test_the_queries_predicted_to_fail_come_hardest_first_ties_by_id():
    ds = log(300)
    scores = {q: (int(q[1:]) * 37 % 101) / 100 for q in ds.queries}  # 0 to 1, three queries per value
    sample = sampling.draw(ds, "predicted", 20, seed=0, difficulty=predicted_by(scores))
    expected = sorted(ds.queries, key=lambda q: (-scores[q], q))[:20]
    assert sample.method == "predicted" and sample.in_order and sample.query_ids == expected
    assert [scores[q] for q in sample.query_ids] == sorted((scores[q] for q in sample.query_ids), reverse=True)
    everything = sampling.draw(ds, "predicted", 1000, difficulty=predicted_by(scores))
    assert everything.method == "predicted" and everything.size == 300  # every query, still hardest first
    assert everything.query_ids[:20] == expected
    with pytest.raises(ValueError, match="needs their predicted difficulty"):
        sampling.draw(ds, "predicted", 20)
    with pytest.raises(ValueError, match="at least 1 query"):
        sampling.draw(ds, "predicted", 0, difficulty=predicted_by(scores))
    assert not sampling.draw(ds, "random", 20).in_order


def test_a_predicted_samples_id_covers_the_predictions_key_and_the_query_ids():
    ds = log(300)
    scores = {q: (int(q[1:]) % 7) / 7 for q in ds.queries}
    a, b = (sampling.draw(ds, "predicted", 20, difficulty=predicted_by(scores)) for _ in range(2))
    assert a.id == b.id and a.query_ids == b.query_ids  # the same inputs: the same sample
    other_systems = sampling.draw(ds, "predicted", 20, difficulty=predicted_by(scores, "predictions-b"))
    assert other_systems.query_ids == a.query_ids and other_systems.id != a.id
    grown = ds.with_queries({"new": "a new query"})
    assert sampling.draw(grown, "predicted", 20, difficulty=predicted_by({**scores, "new": 0.0})).id != a.id


def test_a_predicted_sample_is_stored_and_read_back_in_its_order(tmp_path):
    ds = log(300)
    store = Store(tmp_path / "s.sqlite3")
    scores = {q: (int(q[1:]) * 13 % 29) / 29 for q in ds.queries}
    first = sampling.sample_for(store, ds, "predicted", 25, difficulty=predicted_by(scores))
    again = Store(tmp_path / "s.sqlite3")
    kept = sampling.stored(again, ds)
    assert [(s.id, s.method, s.query_ids) for s in kept] == [(first.id, "predicted", first.query_ids)]
    asked: list[str] = []
    asking = predicted_by({q: -v for q, v in scores.items()}, asked=asked)  # other values under the same key
    back = sampling.sample_for(again, ds, "predicted", 25, difficulty=asking)
    assert back.query_ids == first.query_ids and back.in_order and asked == []  # nothing predicted again
    moved = sampling.sample_for(again, ds, "predicted", 25, difficulty=predicted_by(scores, "predictions-b"))
    assert moved.id != first.id and len(sampling.stored(again, ds)) == 2  # other systems: drawn anew, kept too


def test_the_queue_over_a_predicted_sample_opens_its_queries_hardest_first():
    from retrieval.judging.judgments import queue

    ds = log(6)
    scores = {"q00003": 0.9, "q00001": 0.7, "q00005": 0.5, "q00000": 0.3, "q00002": 0.2, "q00004": 0.1}
    sample = sampling.draw(ds, "predicted", 4, difficulty=predicted_by(scores))
    runs = {s: {q: [(f"{s}-{q}-{r}", 1.0 / r) for r in range(1, 3)] for q in ds.queries} for s in ("a", "b")}
    q = queue(runs, sample.query_ids, {}, k=2, sample=sample)
    opened: list[str] = []
    position = q.next_unjudged()
    while position is not None:
        qid, doc = q.pairs[position]
        opened.append(qid)
        q.record(qid, doc, 0)  # every pair graded in turn: the queue hands out the next
        position = q.next_unjudged(position, wrap=False)
    assert len(opened) == 16  # 4 queries × 2 systems × 2 documents, each pair once
    assert list(dict.fromkeys(opened)) == ["q00003", "q00001", "q00005", "q00000"]  # hardest first
