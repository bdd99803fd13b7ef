"""RankScope's retrieval library: data in, BM25 / dense / hybrid out, evaluated and cached.

No Gradio here, and one thread at most: the dense build ``Workspace.start_dense`` runs in the
background (``retrieval.index.background_build``). The app, the CLI and the benchmarks all call this package.

Importing the package imports nothing but this file: each name below is imported from its module
the first time it is asked for (PEP 562's module ``__getattr__``), so ``import
retrieval.evaluation.metrics`` or ``python -m retrieval --help`` does not load FAISS, bm25s or torch.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {  # name -> the module that defines it
    "Dataset": "retrieval.data.dataset", "Document": "retrieval.data.dataset",
    "load_dataset": "retrieval.data.readers", "load_files": "retrieval.data.readers",
    "Run": "retrieval.data.run",
    "DataError": "retrieval.errors", "LoadReport": "retrieval.errors",
    "DenseNotReady": "retrieval.index.background_build", "EncodingStatus": "retrieval.index.background_build",
    "Store": "retrieval.store",
    "SYSTEMS": "retrieval.systems", "Workspace": "retrieval.workspace",
}

__all__ = ["DenseNotReady", "EncodingStatus", "Dataset", "Document", "DataError", "LoadReport", "load_dataset",
           "load_files", "Run", "Store", "SYSTEMS", "Workspace"]


def __getattr__(name: str) -> object:
    """``retrieval.Workspace`` and the other names of ``__all__``, imported on first use."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _keep_compiled() -> None:
    """numba's compiled kernels (ranx, UMAP, bm25s) kept in RankScope's cache folder
    (``evaluation.numba_guard.keep_compiled``): set before anything imports numba."""
    from retrieval.evaluation.numba_guard import keep_compiled

    keep_compiled()


_keep_compiled()


if TYPE_CHECKING:  # what type checkers and editors see
    from retrieval.data.dataset import Dataset, Document
    from retrieval.data.readers import load_dataset, load_files
    from retrieval.data.run import Run
    from retrieval.errors import DataError, LoadReport
    from retrieval.index.background_build import DenseNotReady, EncodingStatus
    from retrieval.store import Store
    from retrieval.systems import SYSTEMS
    from retrieval.workspace import Workspace
