"""Where a system keeps what it builds per corpus or per workspace (an index, the CLEAR hybrid's λ):
slots on the workspace (``Workspace.system_state``), shared by the workspaces that may share it.

Two scopes, by what the state depends on:

* ``CORPUS`` — the documents and the lexical settings (tokenizer, BM25's k1 and b): an index over
  the corpus. Shared by every workspace made from another (``with_run``, ``with_dataset``,
  ``with_model``, ``with_index``): they hold the same documents under the same settings.
* ``WORKSPACE`` — the queries and labels, or the encoder: λ, tuned on a split with the dense
  index. Shared by ``with_run``'s copies only (the same data set and encoder, one more run).

Every state object says how many bytes it holds with ``nbytes()``: the memory budget
(``retrieval.sharing.memory_budget``) counts each slot through it, once however many workspaces
share it. An ``IndexBuild`` is a state too (``Workspace.background_build``): a system whose index
is built in the background waits for it (``System.waits_for``).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, runtime_checkable

CORPUS, WORKSPACE = "corpus", "workspace"
SCOPES = (CORPUS, WORKSPACE)

S = TypeVar("S")
T = TypeVar("T")


class SplitChoices(Generic[T]):
    """A system's state on a workspace: what it chose for each split evaluated (a weight such as the
    CLEAR hybrid's λ; the key None: the queries of no split), and the lock making a choice holds
    (tuning is slow: one thread tunes, the others wait for its answer). ``size(choice)``: the bytes
    one choice holds."""

    def __init__(self) -> None:
        self.by_split: dict[str | None, T] = {}
        self.lock = threading.RLock()

    def size(self, choice: T) -> int:
        raise NotImplementedError

    def nbytes(self) -> int:
        return sum(self.size(c) for c in list(self.by_split.values()))


@runtime_checkable
class State(Protocol):
    def nbytes(self) -> int: ...  # noqa: E704 - bytes it holds in this process


class Slots:
    """The states of one scope, by key, each made once (``get``) however many threads ask: a
    state being made blocks only those asking for it, not the other slots."""

    def __init__(self) -> None:
        self._values: dict[str, State] = {}
        self._making: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: str, make: Callable[[], S]) -> S:
        """The state under ``key``, made by ``make()`` the first time; it must have ``nbytes()``."""
        with self._lock:
            if key in self._values:
                return self._values[key]  # type: ignore[return-value]
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                if key in self._values:
                    return self._values[key]  # type: ignore[return-value]
            value = make()
            if not isinstance(value, State):
                raise TypeError(f"the state of {key!r} ({type(value).__name__}) has no nbytes() for the memory budget")
            with self._lock:
                self._values[key] = value
            return value

    def peek(self, key: str) -> object | None:
        """The state under ``key`` if it was made, else None; never makes it."""
        with self._lock:
            return self._values.get(key)

    def items(self) -> list[tuple[str, State]]:
        """Every state made so far, by key."""
        with self._lock:
            return list(self._values.items())
