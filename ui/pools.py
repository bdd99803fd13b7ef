"""Concurrency pools for the app's events. Searches have their own pool, so one user's encoding,
evaluation or projection (HEAVY, a small pool) never queues another user's search; quick updates
share LIGHT; training runs in its own job thread (``training.job``). Each pool is the keyword
arguments an event listener takes (``btn.click(…, **SEARCH)``), typed so the type check reads them."""
from typing import TypedDict


class Pool(TypedDict):
    """Gradio's ``concurrency_id`` and ``concurrency_limit`` of an event listener."""

    concurrency_id: str
    concurrency_limit: int


SEARCH: Pool = {"concurrency_id": "search", "concurrency_limit": 8}
HEAVY: Pool = {"concurrency_id": "heavy", "concurrency_limit": 2}
LIGHT: Pool = {"concurrency_id": "light", "concurrency_limit": 8}
