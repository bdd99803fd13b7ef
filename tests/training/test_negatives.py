"""Negative pools (``training.negatives``): BM25's top N, the encoder's top k and random, never a
known positive; real BM25, a real tiny encoder and the demo data set."""
from __future__ import annotations

import random

import numpy as np
import pytest

from retrieval.data.dataset import Dataset
from retrieval.index.bm25_index import BM25Index
from training.negatives import CandidatePool, bm25_pool, model_pool, random_pool
from training.pairs import known_positives, labelled_pairs


@pytest.fixture(scope="module")
def demo_bm25(demo):
    return BM25Index(demo.doc_ids, [d.full_text for d in demo.docs.values()])


def test_bm25_pool_is_top_n_minus_positives_of_any_split(demo, demo_bm25):
    pairs = labelled_pairs(demo, "train")
    query_ids = {p.query: p.query_id for p in pairs}
    row = {d: i for i, d in enumerate(demo.doc_ids)}
    # an extra split that labels, for the first query, BM25's best non-relevant document relevant
    q0, qid0 = pairs[0].query, pairs[0].query_id
    train_pos = known_positives(demo)
    top0 = [d for d, _ in demo_bm25.search({"x": q0}, k=20)["x"]]
    extra_doc = next(d for d in top0 if d not in train_pos[qid0])
    ds = Dataset("demo+dev", demo.docs, demo.queries, {**demo.qrels, "dev": {qid0: {extra_doc: 1}}})
    positives = known_positives(ds)
    pool = bm25_pool(demo_bm25, query_ids, positives, depth=20)
    assert pool.source == "bm25" and pool.doc_ids == demo.doc_ids
    run = demo_bm25.search({q: q for q in query_ids}, k=20)
    for q, qid in query_ids.items():
        top = {row[d] for d, _ in run[q]}
        pos = {row[d] for d in positives[qid]}
        assert set(pool.candidates[q]) == top - pos
        assert len(pool.candidates[q]) >= len(top) - len(pos)
    assert row[extra_doc] not in pool.candidates[q0]
    # without the dev label that document would have been a candidate: the check above can fail
    assert row[extra_doc] in bm25_pool(demo_bm25, query_ids, train_pos, depth=20).candidates[q0]


def test_model_pool_is_brute_force_top_k_minus_positives(demo, tiny_encoder):
    pairs = labelled_pairs(demo, "train")
    query_ids = {p.query: p.query_id for p in pairs}
    docs = tiny_encoder.encode([d.full_text for d in demo.docs.values()])
    queries = tiny_encoder.encode(list(query_ids))
    positives = known_positives(demo)
    pool = model_pool(demo.doc_ids, docs, queries, query_ids, positives, depth=10)
    row = {d: i for i, d in enumerate(demo.doc_ids)}
    for i, (q, qid) in enumerate(query_ids.items()):
        scores = [float(np.dot(queries[i], docs[r])) for r in range(len(demo.doc_ids))]
        top10 = sorted(range(len(scores)), key=lambda r: -scores[r])[:10]
        expected = [r for r in top10 if r not in {row[d] for d in positives[qid]}]
        assert pool.candidates[q] == expected  # in score order
    # depth beyond the corpus: every document but the positives
    small = model_pool(demo.doc_ids[:5], docs[:5], queries, query_ids, positives, depth=50)
    for q, qid in query_ids.items():
        assert set(small.candidates[q]) == {r for r in range(5) if demo.doc_ids[r] not in positives[qid]}


def test_random_pool_never_returns_a_positive(toy_dataset):
    rows = {d: i for i, d in enumerate(toy_dataset.doc_ids)}
    pool = random_pool(toy_dataset, {"cat on a mat": "q1", "free text": None}, known_positives(toy_dataset))
    rng = random.Random(0)
    seen = [toy_dataset.doc_ids[pool.sample("cat on a mat", rng)] for _ in range(2000)]
    assert set(seen) == {"d2", "d3", "d4", "d6", "d7", "d8"}  # all but q1's positives d1, d5
    # roughly uniform: 2000 / 6 ≈ 333 each
    assert all(250 < seen.count(d) < 420 for d in set(seen))
    excluded = {pool.sample("cat on a mat", rng, {rows["d2"], rows["d3"]}) for _ in range(500)}
    assert {toy_dataset.doc_ids[r] for r in excluded} == {"d4", "d6", "d7", "d8"}
    # a query without an id has no known positives: any document
    assert {pool.sample("free text", rng) for _ in range(500)} == set(range(8))
    # nothing left to sample
    assert pool.sample("cat on a mat", rng, set(range(8))) is None


def test_candidate_pool_sample_respects_exclusions():
    pool = CandidatePool(["a", "b", "c"], {"q": [0, 2]}, "bm25")
    rng = random.Random(1)
    assert {pool.sample("q", rng) for _ in range(200)} == {0, 2}
    assert {pool.sample("q", rng, {0}) for _ in range(50)} == {2}
    assert pool.sample("q", rng, {0, 2}) is None
    assert pool.sample("unknown", rng) is None
