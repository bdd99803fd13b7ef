"""Indexes and encoders: tokenizing, BM25, the dense encoder and its FAISS index (compressed too: int8, PCA),
learned sparse (SPLADE), the engines that hold them and their background builds. What a compressed index costs
in quality is evaluation's (``retrieval.evaluation.compression``): nothing here imports a system or the workspace.
"""
