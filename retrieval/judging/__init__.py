"""Judging: which pairs to grade and in what order, the judges' grades and who may give them, labels, sampling,
agreement, coverage and settled comparisons.
"""
