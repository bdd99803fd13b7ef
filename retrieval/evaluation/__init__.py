"""Evaluation: the metric vocabulary, metrics, intervals, tables, query kinds, failure rules and the failure
gallery, projections.
"""
