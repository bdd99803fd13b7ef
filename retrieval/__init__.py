"""RankScope's retrieval library: data in, BM25 / dense / hybrid out, evaluated and cached.

No Gradio here, and one thread at most: the dense build ``Workspace.start_dense`` runs in the
background (``retrieval.background``). The app, the CLI and the benchmarks all call this package.
"""
from retrieval.background import DenseNotReady, EncodingStatus
from retrieval.dataset import Dataset, Document
from retrieval.errors import DataError, LoadReport
from retrieval.readers import load_dataset, load_files
from retrieval.run import Run
from retrieval.store import Store
from retrieval.workspace import SYSTEMS, Workspace

__all__ = ["DenseNotReady", "EncodingStatus", "Dataset", "Document", "DataError", "LoadReport", "load_dataset",
           "load_files", "Run", "Store", "SYSTEMS", "Workspace"]
