"""A bounded map that keeps the most recently used entries: the process's loaded models and Milvus's
latest searches. Not locked: its owner serializes access where threads share it."""
from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``size`` entries; a ``get`` or ``put`` makes its entry the newest, and a ``put`` past
    the bound drops the least recently used (whoever still holds it keeps it; the map lets go)."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a bounded map holds at least one entry, not {size}")
        self._items: OrderedDict[K, V] = OrderedDict()
        self.size = size

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, key: K) -> V | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def pop(self, key: K) -> V | None:
        """Forget ``key``'s entry; its value, or None when there was none."""
        return self._items.pop(key, None)

    def items(self) -> list[tuple[K, V]]:
        """The entries, least recently used first (a copy)."""
        return list(self._items.items())

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)
