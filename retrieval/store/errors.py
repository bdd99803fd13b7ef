"""What the store refuses: a path that is not a store, a name its namespace has, a maker or corpus at its
bound. Raised by the repositories (``retrieval.store``'s modules) and caught by the callers by these names."""
from __future__ import annotations


class StoreError(ValueError):
    """A store path that cannot be used (a folder, a file that is not a store, no write access)."""


class NameTaken(ValueError):
    """A name its namespace has already, or one like it (``Store.put_snapshot``, ``Store.put_query_set``,
    publishing either), or no snapshot of the writer's to replace."""


class TooMany(ValueError):
    """A maker (``mine``) or a whole corpus keeps as many rows of a kind as it may: ``count`` of ``most``
    (counted inside the write's transaction: ``Store.put_snapshot``, ``Store.put_query_set``)."""

    def __init__(self, count: int, most: int, mine: bool):
        super().__init__(f"{count} kept, the most {'one maker' if mine else 'the corpus'} may keep ({most})")
        self.count, self.most, self.mine = count, most, mine
