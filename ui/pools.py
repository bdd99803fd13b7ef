"""Concurrency pools for the app's events. Searches have their own pool, so one user's encoding,
evaluation or projection (HEAVY, a small pool) never queues another user's search; quick updates
share LIGHT; training runs in its own job thread (``training.job``)."""
SEARCH = {"concurrency_id": "search", "concurrency_limit": 8}
HEAVY = {"concurrency_id": "heavy", "concurrency_limit": 2}
LIGHT = {"concurrency_id": "light", "concurrency_limit": 8}
