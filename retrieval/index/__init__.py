"""Indexes and encoders: tokenizing, BM25, the dense encoder and its FAISS index, learned sparse (SPLADE),
compression, the engines that hold them and their background builds.
"""
