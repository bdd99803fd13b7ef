"""Poly-attention pooling: m learned context codes attend over the query's token outputs.

Yiding Liu, Guan Huang, Jiaxiang Liu, Weixue Lu, Suqi Cheng, Yukun Li, Daiting Shi, Shuaiqiang
Wang, Zhicong Cheng, Dawei Yin, "Pre-trained Language Model for Web-scale Retrieval in Baidu
Search", KDD 2021 (arXiv:2106.03373), §3.2, after the poly-encoder of Humeau et al. (2019):

    P_i = w_0^(i)·C + Σ_j w_j^(i)·F_j,   (w_0^(i), …, w_N^(i)) = Softmax(c_i·C, c_i·F_1, …, c_i·F_N)   (2)
    training:  f(q, d) = max_i P_i·C'                                                             (3)
    serving:   f(q, d) = P_avg·C',  P_avg = (1/m) Σ_i P_i                                         (4)

This module takes the place of the Pooling module of a sentence-transformers model. For a query
(``task="query"``: ``encode_query``, or ``features["task"] == "query"`` in training) it returns
``sentence_embedding`` = P_avg (eq. 4, so the document index is unchanged) and ``poly_embeddings``
= (P_1 … P_m) for the training score of eq. 3. Everything else (documents, and plain ``encode``) is
mean-pooled over the tokens as the base model was, so documents embed exactly as before.

The codes start small (normal, std ``init_std``): every softmax is then near uniform and P_avg
near the base model's mean pooling, so training starts from the pre-trained encoder's behaviour.

The file depends only on torch and sentence-transformers: an exported model carries a copy of it
and loads in plain sentence-transformers with ``trust_remote_code=True``.
"""
from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.base.modules.module import Module
from torch import Tensor


class PolyAttention(Module):
    config_keys = ["embedding_dimension", "num_codes", "init_std"]
    forward_kwargs = {"task"}

    def __init__(self, embedding_dimension: int, num_codes: int = 16, init_std: float = 0.02):
        super().__init__()  # type: ignore[no-untyped-call]  # sentence-transformers' Module.__init__ is unannotated
        if num_codes < 1:
            raise ValueError("poly-attention needs at least one context code")
        self.embedding_dimension, self.num_codes, self.init_std = embedding_dimension, num_codes, init_std
        self.codes = torch.nn.Parameter(torch.randn(num_codes, embedding_dimension) * init_std)

    def forward(self, features: dict[str, Tensor], task: str | None = None, **kwargs: object) -> dict[str, Tensor]:
        tokens, mask = features["token_embeddings"], features["attention_mask"]
        if task is None:
            given = features.get("task")  # the task rides in the features as text, never a tensor
            task = given if isinstance(given, str) else None
        valid = mask.unsqueeze(-1).to(tokens.dtype)  # (B, L, 1)
        if task != "query":
            features["sentence_embedding"] = (tokens * valid).sum(1) / valid.sum(1).clamp(min=1e-9)
            return features
        logits = torch.einsum("md,bld->bml", self.codes.to(tokens.dtype), tokens)  # c_i · F_j
        logits = logits.masked_fill(mask.unsqueeze(1) == 0, torch.finfo(logits.dtype).min)
        weights = torch.softmax(logits, dim=-1)  # (B, m, L): eq. 2's w^(i)
        poly = torch.einsum("bml,bld->bmd", weights, tokens)  # P_1 … P_m
        features["poly_embeddings"] = poly
        features["sentence_embedding"] = poly.mean(1)  # P_avg, eq. 4
        return features

    def get_embedding_dimension(self) -> int:
        return self.embedding_dimension

    get_sentence_embedding_dimension = get_embedding_dimension

    def save(self, output_path: str, *args: object, safe_serialization: bool = True, **kwargs: object) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             init_defaults: dict[str, Any] | None = None, **kwargs: object) -> PolyAttention:
        hub: dict[str, Any] = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder,
                               "revision": revision, "local_files_only": local_files_only}
        config = cls.load_config(model_name_or_path, **hub)
        for key, value in (init_defaults or {}).items():  # as Module.load: the saved config wins
            config.setdefault(key, value)
        module = cls(**config)
        loaded: PolyAttention = cls.load_torch_weights(model_name_or_path=model_name_or_path, model=module, **hub)
        return loaded
