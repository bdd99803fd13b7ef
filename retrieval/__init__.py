"""RankScope's retrieval library: data in, BM25 / dense / hybrid out, evaluated and cached.

No Gradio and no threads here; the app, the CLI and the benchmarks all call this package.
"""
from .dataset import Dataset, Document
from .errors import DataError, LoadReport
from .readers import load_dataset, load_files
from .run import Run
from .store import Store
from .workspace import SYSTEMS, Workspace

__all__ = ["Dataset", "Document", "DataError", "LoadReport", "load_dataset", "load_files", "Run",
           "Store", "SYSTEMS", "Workspace"]
