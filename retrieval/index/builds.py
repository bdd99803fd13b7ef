"""One index of a workspace (the dense index, the learned sparse one, a system's own:
``Workspace.background_build``), built once: in the caller's thread when someone needs it, or in
a background thread started early (``start``), whichever comes first; while the background build
runs, asking for it raises ``DenseNotReady`` with how far it is, and the systems that need it wait
(``Workspace.pending``).

``prepare()`` resolves what the build needs (the encoder, say) before the build's own lock is
taken, in the calling thread: the build may then take the workspace's lock without another thread
holding that lock waiting for this one.

As a system's state (``retrieval.systems.state``) it tells the memory budget its size (``nbytes``):
the built index's own ``nbytes()``, or while it is being built the size it will have.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from retrieval.index.background_build import STOP_WAIT_S, BackgroundBuild, EncodingStatus, check_stopping
from retrieval.progress import Counter

T = TypeVar("T")
A = TypeVar("A")


class IndexBuild(Generic[A, T]):
    def __init__(self, prepare: Callable[[], A], make: Callable[[A, Counter | None, Callable[[], None] | None], T],
                 total: int, name: str, expected_bytes: int = 0):
        self._prepare, self._make, self.total, self.name = prepare, make, total, name
        self.expected_bytes = expected_bytes  # what the index will hold, counted while it is built
        self._value: T | None = None
        self._background: BackgroundBuild[T] | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> T | None:
        """The index if it is built (in whichever thread), else None; never builds."""
        if self._value is None and self._background is not None and self._background.finished \
                and self._background.status().state == "ready":
            self._value = self._background.result()
        return self._value

    def get(self, progress: Counter | None = None) -> T:
        """The index, built now if it is not (a background build under way is waited for; one that
        was stopped is done again here, from what it stored)."""
        if self._background is not None:
            self._background.wait()
            if not self._background.stopped:
                return self.value
        arg = self._prepare()
        with self._lock:
            if self._value is None:
                self._value = self._make(arg, progress, None)
            return self._value

    @property
    def value(self) -> T:
        """The index: built now when nothing builds it in the background; while a background build
        runs, ``DenseNotReady`` (a failed one raises its error)."""
        if self._value is None and self._background is not None and not self._background.stopped:
            self._value = self._background.result()
        return self._value if self._value is not None else self.get()

    def stop(self, timeout: float | None = STOP_WAIT_S) -> bool:
        """Stop a background build under way (``BackgroundBuild.stop``); the next ``get`` or
        ``start`` builds it again, from what it had stored. True when nothing runs any more."""
        return self._background is None or self._background.stop(timeout)

    def start(self, after: Callable[[], object] | None = None) -> EncodingStatus | None:
        """Build it in a background thread unless it is built or being built; where that build
        stands (None: built already, in the foreground). ``after``, called first in that thread,
        waits for what should finish before (another build: two at once share the same cores)."""
        if self._value is None and (self._background is None or self._failed()):
            arg = self._prepare()

            def build(progress: Counter, indexing: Callable[[], None]) -> T:
                if after is not None:
                    after()
                    check_stopping()
                with self._lock:  # after a foreground build under way, if any
                    return self._value or self._make(arg, progress, indexing)

            self._background = BackgroundBuild(build, total=self.total, name=self.name, waiting=after is not None)
        return self.status

    def follow(self, timeout: float | None, report: Callable[[int, int], None] | None, poll: float) -> bool:
        """Wait for the background build at most ``timeout`` seconds, reporting as it goes; True
        when it is ready or nothing builds in the background."""
        return self._background is None or self._background.follow(timeout, report, poll)

    def _failed(self) -> bool:
        b = self._background
        return b is not None and b.finished and b.status().state == "failed"

    @property
    def status(self) -> EncodingStatus | None:
        """Where the background build stands (None: there was none)."""
        return self._background.status() if self._background is not None else None

    @property
    def pending(self) -> bool:
        """Whether a background build is still running (the index cannot answer yet)."""
        return self._value is None and self._background is not None and not self._background.finished

    @property
    def finished(self) -> bool:
        """Whether a background build was started and is over (ready or failed): what the views
        showed while it ran is out of date."""
        return self._background is not None and self._background.finished

    def nbytes(self) -> int:
        """Bytes the index holds (its own ``nbytes()``), ``expected_bytes`` while it is being built,
        0 before anything built it."""
        built = self.built
        if built is not None:
            size = getattr(built, "nbytes", None)
            return int(size()) if callable(size) else 0
        return self.expected_bytes if self._background is not None else 0

    @property
    def identity(self) -> int:
        """Stable while the index lives, shared by the workspaces sharing it (``memory_budget``'s key)."""
        return id(self)
