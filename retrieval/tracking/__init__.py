"""Tracking over time: snapshots and their regression check, its report, the history of runs."""
