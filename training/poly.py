"""Poly-attention as a training option: attach it to a base encoder, route training batches, export.

The module itself (``retrieval.index.poly_attention.PolyAttention``, Yiding Liu et al., "Pre-trained
Language Model for Web-scale Retrieval in Baidu Search", KDD 2021, arXiv:2106.03373, §3.2) takes
the place of the base model's mean pooling. Training scores a query against a document by
max_i P_i·C' (eq. 3; ``losses.match``), serving by P_avg·C' (eq. 4), so the document index is the
base model's kind of index. Only the losses written here (residual, quadruplet) score by eq. 3;
sentence-transformers' triplet and in-batch losses (and the ICT/BFS first stage, which uses
in-batch) see the query's one vector, P_avg, i.e. they train the serving form. An exported model
carries a copy of the module's file, so that it loads in plain sentence-transformers with
``trust_remote_code=True`` (``SentenceTransformer(path, trust_remote_code=True).encode_query(...)``);
RankScope loads it without that flag, with the class it ships, never running the folder's copy
(``retrieval.index.encoder.open_model``).
"""
from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

from retrieval.index.encoder import POLY_FILE, POLY_REF
from retrieval.index.poly_attention import PolyAttention


def has_poly_attention(model) -> bool:
    """By name: a model loaded from an exported folder holds the folder's copy of the class."""
    return any(type(m).__name__ == PolyAttention.__name__ for m in model.modules())


def with_poly_attention(model, num_codes: int = 16):
    """``model`` with its mean pooling replaced by a ``PolyAttention`` of ``num_codes`` codes (the
    same model back when it has one already). Raises ValueError for a model that does not pool by
    the mean of its tokens: its documents would no longer embed as before."""
    from sentence_transformers import SentenceTransformer

    if has_poly_attention(model):
        return model
    modules = list(model)
    pooling = [i for i, m in enumerate(modules) if type(m).__name__ == "Pooling"]
    if len(pooling) != 1 or getattr(modules[pooling[0]], "pooling_mode", None) not in ("mean", ("mean",)):
        raise ValueError("poly-attention replaces mean pooling; this encoder does not pool by the mean "
                         "of its tokens")
    dim = modules[pooling[0]].get_embedding_dimension()
    modules[pooling[0]] = PolyAttention(dim, num_codes).to(model.device)
    poly = SentenceTransformer(modules=modules, device=str(model.device))
    poly.max_seq_length = model.max_seq_length
    return poly


def routed(model, features: dict, task: str) -> dict:
    """Training features marked with their route ("query" or "document") for a poly-attention
    model, which reads ``features["task"]``; unchanged for any other model."""
    if has_poly_attention(model):
        features["task"] = task
    return features


def make_portable(folder: str | Path) -> None:
    """Make a saved poly-attention model load without RankScope: copy the module's file into the
    folder and point modules.json at it (``POLY_REF``), the form sentence-transformers imports
    with ``trust_remote_code=True``."""
    folder = Path(folder)
    modules_json = folder / "modules.json"
    modules = json.loads(modules_json.read_text())
    ours = f"{PolyAttention.__module__}.{PolyAttention.__name__}"
    for entry in modules:
        if entry.get("type") == ours:
            entry["type"] = POLY_REF
    modules_json.write_text(json.dumps(modules, indent=2))
    source = Path(inspect.getfile(PolyAttention))
    shutil.copyfile(source, folder / POLY_FILE)
