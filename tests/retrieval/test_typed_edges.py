"""What the type check (mypy on retrieval/) found: calls Python 3.10 lacks, which requires-python
allows, and values that may be missing, each now handled where it was used unchecked."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import sys

import pytest

from retrieval.evaluation import failure_rules
from retrieval.index import kept_index
from retrieval.judging import staged_writes
from retrieval.store import _max_value_length
from retrieval.systems.clear_lambda import against_prior
from retrieval.training_record import LambdaFit


def test_sqlites_value_limit_is_asked_where_python_can_and_its_default_taken_where_it_cannot(monkeypatch):
    conn = sqlite3.connect(":memory:")
    try:
        if hasattr(conn, "getlimit"):  # Python 3.11 and later
            assert _max_value_length(conn) == conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
        assert _max_value_length(conn) == 1_000_000_000  # SQLite's compiled-in default
    finally:
        conn.close()


def test_the_busy_code_is_sqlites_own():
    assert staged_writes.SQLITE_BUSY == 5
    if hasattr(sqlite3, "SQLITE_BUSY"):  # Python 3.11 and later
        assert staged_writes.SQLITE_BUSY == sqlite3.SQLITE_BUSY


def test_a_kept_index_file_is_hashed_whole_in_chunks(tmp_path):
    data = os.urandom(2 * kept_index._CHUNK + 12_345)  # more than two reads, the last one short
    path = tmp_path / "index.faiss"
    path.write_bytes(data)
    assert kept_index.sha256_of(path) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert kept_index.sha256_of(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()


def test_a_lambda_fit_without_its_test_says_so_instead_of_failing():
    untested = LambdaFit(best=0.3, grid=[(0.3, 0.5), (0.5, 0.4)], queries=4, prior=0.5, p_value=None)
    assert untested.chosen == 0.5  # not tested: the prior is kept
    assert against_prior(untested).endswith("significantly (not tested), so λ 0.5 is kept")
    assert against_prior(LambdaFit(best=0.3, grid=[], queries=4)) == ""  # no prior: nothing to say
    tested = LambdaFit(best=0.3, grid=[], queries=40, prior=0.5, p_value=0.0004)
    assert "(p < 0.001)" in against_prior(tested)


def test_a_pair_category_without_a_pair_is_refused_by_name():
    with pytest.raises(ValueError, match="pair_b_finds compares a pair of systems"):
        failure_rules._pair_order("pair_b_finds", None)
    assert failure_rules._pair_order("pair_b_finds", ("bm25", "ql")) == ("bm25", "ql")
    assert failure_rules._pair_order("pair_a_finds", ("bm25", "ql")) == ("ql", "bm25")
