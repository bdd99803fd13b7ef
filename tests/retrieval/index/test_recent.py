"""The bounded map behind the process's loaded models: a property test against a plain list model,
and the encoder and sparse-model caches held to their bound with real (tiny) models."""
from __future__ import annotations

import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.index.recent import Recent

operations = st.lists(st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 6), st.integers()), max_size=60)


@given(size=st.integers(1, 4), ops=operations)
def test_it_keeps_the_most_recently_used_entries(size, ops):
    kept, order = Recent(size), []  # order: the reference, least recently used first
    values = {}
    for op, key, value in ops:
        if op == "put":
            kept.put(key, value)
            values[key] = value
            order = [k for k in order if k != key] + [key]
            order = order[-size:]
        else:
            got = kept.get(key)
            if key in order:
                assert got == values[key]
                order = [k for k in order if k != key] + [key]
            else:
                assert got is None
        assert len(kept) == len(order) <= size
        assert all(k in kept for k in order)


def test_a_bound_below_one_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        Recent(0)


def test_the_encoder_cache_lets_go_of_the_least_recently_used_model(tiny_model_dir, tmp_path, monkeypatch):
    from retrieval.index import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_cache", Recent(2))
    folders = [shutil.copytree(tiny_model_dir, tmp_path / f"copy-{i}") for i in range(3)]
    first = encoder_module.load_encoder(str(folders[0]), device="cpu")
    assert encoder_module.load_encoder(str(folders[0]), device="cpu") is first  # kept
    encoder_module.load_encoder(str(folders[1]), device="cpu")
    encoder_module.load_encoder(str(folders[2]), device="cpu")
    assert len(encoder_module._cache) == 2
    assert encoder_module.load_encoder(str(folders[0]), device="cpu") is not first  # let go, loaded anew


def test_the_sparse_model_cache_is_bounded_too(tmp_path, monkeypatch):
    from retrieval.index import splade

    monkeypatch.setattr(splade, "_cache", Recent(1))
    base = splade.load_sparse_model()
    assert splade.load_sparse_model() is base
    other = splade.load_sparse_model(str(shutil.copytree(splade.bundled_path(), tmp_path / "copy")))
    assert other is not base and other.fingerprint == base.fingerprint  # the same weights, another folder
    assert len(splade._cache) == 1 and splade.load_sparse_model() is not base  # let go, loaded anew
