"""Fixtures of the flows: the bundled demo's vectors under the encoder RankScope ships with, encoded once a run."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DEMO, made_once, run_folder, store_copy


@pytest.fixture(scope="session")
def demo_minilm_store(tmp_path_factory, demo_sparse_store) -> Path:
    """A store file holding the demo's vectors under the encoder RankScope ships with (all-MiniLM-L6-v2, loaded
    as a ``Workspace`` given no model loads it) beside the bundled SPLADE's (a copy of ``demo_sparse_store``),
    encoded once a run and shared by xdist's workers. ``test_demo`` and the README's library example
    (``test_docs``) each start from a copy (``store_copy``), so the 384 passages go through the real encoder once
    a run, not once per module: the vectors are the encoder's own, read back as the store reads any (keyed by the
    encoder's fingerprint, its precision included, and the text's hash: a vector of another encoder is never
    read)."""

    def make(part: Path) -> None:
        from retrieval.data.readers import load_dataset
        from retrieval.store import Store
        from retrieval.workspace import Workspace

        store = Store(store_copy(demo_sparse_store, part))
        Workspace(load_dataset(DEMO), store).dense  # noqa: B018 - the dense index built: every vector stored
        store.close()

    return made_once(run_folder(tmp_path_factory) / "demo-minilm.sqlite3", make)
