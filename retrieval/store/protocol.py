"""``StoreProtocol``: what the library's workflow asks of a store, so a store of another kind (a bench's
counting store, a test's) is held to it by type, not by luck.

The workspace caches runs and evaluations through it and registers its data sets and encoders; the
engines and encoders keep BM25 indexes and vectors; the projections keep their layouts; judging reads
and writes grades, judges and samples. The concrete ``retrieval.store.Store`` satisfies it (mypy holds
it to it where the package is defined) and so must anything passed where the library takes a store:
``bench/quality.py``'s ``CountingStore``, a subclass that counts cache hits, is checked against it by
``tests/retrieval/store/test_store_package.py``. The owned tables the views and tracking use (snapshots, query sets,
kept data sets, jobs) are ``Store``'s alone and not listed here.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from retrieval.data.run import Run
    from retrieval.judging.judge_claims import Claim
    from retrieval.judging.staged_writes import Given, JudgmentsStored
    from retrieval.row_bounds import Sizes
    from retrieval.sharing.owners import Viewer

# ``judgments_version``: the judgments' last row id, the corpus's judges, how many are published, the viewer's filter
JudgmentsVersion = tuple[int | None, int, float, str | None]


@runtime_checkable
class StoreProtocol(Protocol):
    """A store as the workspace, the engines and encoders, the projections and judging use it: each
    member is ``retrieval.store.Store``'s of the same name, documented there.

    Attributes:
        path: The store's file (engines keep index files beside it).
        sizes: The largest data set opened on it, what rows read back are bounded by (``row_bounds``).
    """

    path: Path
    sizes: Sizes

    # the workspace's cache of data sets, encoders, runs and evaluations
    def register_dataset(self, content_hash: str, name: str, summary: dict[str, Any]) -> None: ...

    def register_model(self, fingerprint: str, name: str, dim: int, info: dict[str, Any] | None = None) -> None: ...

    def get_run(self, key: str) -> Run | None: ...

    def put_run(self, key: str, *, dataset: str, system: str, params: dict[str, Any], split: str | None,
                k: int, run: Run, owner: str = "") -> None: ...

    def get_metrics(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None: ...

    def put_metrics(self, key: str, *, dataset: str, system: str, params: dict[str, Any], split: str | None,
                    metrics: dict[str, Any], per_query: dict[str, Any]) -> None: ...

    # indexes and vectors (the engines, the encoders)
    def get_bm25(self, key: str) -> bytes | None: ...

    def put_bm25(self, key: str, corpus: str, index: bytes) -> bool: ...

    def get_embeddings(self, model: str, hashes: list[str], dim: int | None = None) -> dict[str, np.ndarray]: ...

    def put_embeddings(self, model: str, vectors: dict[str, np.ndarray]) -> None: ...

    def get_sparse(self, model: str, hashes: list[str],
                   vocab_size: int | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]: ...

    def put_sparse(self, model: str, vectors: dict[str, tuple[np.ndarray, np.ndarray]]) -> None: ...

    # 2-D projections
    def get_projection(self, key: str) -> tuple[np.ndarray, float] | None: ...

    def put_projection(self, key: str, *, sample: str, model: str, params: dict[str, Any], xy: np.ndarray,
                       seconds: float) -> None: ...

    # judging: grades, judges and their makers, samples
    def put_judgments(self, corpus: str, judgments: Iterable[Given], source: str | None = None,
                      claim: Claim | None = None) -> JudgmentsStored: ...

    def judgments(self, corpus: str, judge: str | None = None, query_ids: Iterable[str] | None = None,
                  viewer: Viewer | None = None) -> list[dict[str, Any]]: ...

    def judges(self, corpus: str, viewer: Viewer | None = None) -> list[str]: ...

    def judged_queries(self, corpus: str, viewer: Viewer | None = None) -> list[tuple[str, str]]: ...

    def judgments_version(self, corpus: str, viewer: Viewer | None = None) -> JudgmentsVersion: ...

    def judge_makers(self, corpus: str) -> dict[str, dict[str, Any]]: ...

    def resolve_judges(self, corpus: str, claim: Claim) -> dict[str, str]: ...

    def publish_judge(self, corpus: str, name: str, owner: str) -> bool: ...

    def put_sample(self, corpus: str, sample_id: str, method: str, seed: int, query_ids: list[str],
                   owner: str = "") -> None: ...

    def samples(self, corpus: str, viewer: Viewer | None = None) -> list[dict[str, Any]]: ...
