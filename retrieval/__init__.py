"""RankScope's retrieval library: data in, BM25 / dense / hybrid out, evaluated and cached.

No Gradio here, and one thread at most: the dense build ``Workspace.start_dense`` runs in the
background (``retrieval.index.background_build``). The app, the CLI and the benchmarks all call this package.
"""
from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers import load_dataset, load_files
from retrieval.data.run import Run
from retrieval.errors import DataError, LoadReport
from retrieval.index.background_build import DenseNotReady, EncodingStatus
from retrieval.store import Store
from retrieval.workspace import SYSTEMS, Workspace

__all__ = ["DenseNotReady", "EncodingStatus", "Dataset", "Document", "DataError", "LoadReport", "load_dataset",
           "load_files", "Run", "Store", "SYSTEMS", "Workspace"]
