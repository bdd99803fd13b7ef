"""RankScope's retrieval library: data in, BM25 / dense / hybrid out, evaluated and cached.

No Gradio here, and one thread at most: the dense build ``Workspace.start_dense`` runs in the
background (``retrieval.background``). The app, the CLI and the benchmarks all call this package.
"""
from .background import DenseNotReady, EncodingStatus
from .dataset import Dataset, Document
from .errors import DataError, LoadReport
from .readers import load_dataset, load_files
from .run import Run
from .store import Store
from .workspace import SYSTEMS, Workspace

__all__ = ["DenseNotReady", "EncodingStatus", "Dataset", "Document", "DataError", "LoadReport", "load_dataset",
           "load_files", "Run", "Store", "SYSTEMS", "Workspace"]
