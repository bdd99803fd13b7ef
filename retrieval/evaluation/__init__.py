"""Evaluation: the metric vocabulary, metrics, intervals, tables, query kinds, failure rules and the failure
gallery, projections, and the quality and size of compressed index variants (``compression``).
"""
