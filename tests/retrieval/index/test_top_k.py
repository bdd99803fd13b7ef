"""The one ranking step of the whole-corpus indexes: one row at a time (``top_k``) and a matrix of
rows at once (``top_k_each``) rank alike, ties by document order, zero and negative scores left out."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from retrieval.index.top_k import top_k, top_k_each

# few distinct values: ties at the cut, runs of zeros and negative scores are common
SCORES = arrays(np.float32, st.tuples(st.integers(0, 6), st.integers(1, 40)),
                elements=st.sampled_from([-1.0, 0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 3.25]))


@settings(max_examples=300, deadline=None)
@given(SCORES, st.integers(0, 45))
def test_a_matrix_ranks_as_its_rows_one_by_one(scores, k):
    got = top_k_each(scores, k)
    assert len(got) == len(scores)
    for row, (rows, top) in zip(scores, got):
        want_rows, want_top = top_k(row, k)
        assert rows.tolist() == want_rows.tolist() and top.tolist() == want_top.tolist()


def test_ties_at_the_cut_go_by_document_order_and_zeros_stay_out():
    scores = np.array([[1, 3, 1, 1, 0, 2], [0, 0, 5, 0, 0, 0]], dtype=np.float32)
    (rows_a, top_a), (rows_b, top_b) = top_k_each(scores, 3)
    assert rows_a.tolist() == [1, 5, 0] and top_a.tolist() == [3, 2, 1]
    assert rows_b.tolist() == [2] and top_b.tolist() == [5]


@settings(max_examples=300, deadline=None)
@given(arrays(np.float32, st.integers(1, 40), elements=st.sampled_from([-1.0, 0.0, 0.5, 1.0, 1.0, 2.0])),
       st.integers(0, 45), st.booleans())
def test_one_row_keeps_the_first_rows_of_a_tie_at_the_cut(scores, k, all_rows):
    """Against the definition: sort every candidate by (score descending, row), keep the first k."""
    candidates = np.arange(len(scores)) if all_rows else np.flatnonzero(scores > 0)
    want = sorted(candidates.tolist(), key=lambda r: (-scores[r], r))[:k]
    rows, top = top_k(scores, k, candidates if all_rows else None)
    assert rows.tolist() == want and top.tolist() == scores[want].tolist()
