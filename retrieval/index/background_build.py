"""Building the dense index in a background thread, and where that build stands.

Encoding a corpus takes minutes to hours on a CPU (``bench/encode_speed.py`` measures the rate), while
BM25 is ready in seconds. ``Workspace.start_dense`` hands the dense build to a ``BackgroundBuild``:
BM25 answers at once, and whatever needs the dense index meanwhile gets ``DenseNotReady`` (with
the build's ``EncodingStatus``: documents done, rate, time left) instead of waiting.

A process that exits while a build runs stops it first: at exit every running build is told to
stop at its next progress report (between two batches) and joined, so no model is left computing
while the interpreter tears down (which aborts the process). One build is stopped the same way by
``stop`` (a workspace closed while its index was being built: what it encoded is in the store, and
starting it again resumes from there).
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_RUNNING: weakref.WeakSet[BackgroundBuild[Any]] = weakref.WeakSet()
_STOPPING = threading.Event()
STOP_WAIT_S = 60.0  # at exit, how long a build may take to reach its next progress report


class BuildStopped(RuntimeError):
    """The process is exiting: a background build stops between two batches."""


def check_stopping() -> None:
    """``BuildStopped`` once the process is exiting (a build calls it between its steps)."""
    if _STOPPING.is_set():
        raise BuildStopped("the process is exiting")


@atexit.register
def _stop_builds() -> None:
    _STOPPING.set()
    for build in list(_RUNNING):
        build.wait(STOP_WAIT_S)


def running() -> list[BackgroundBuild[Any]]:
    """The builds of this process still running."""
    return [b for b in list(_RUNNING) if not b.finished]

STATES = ("waiting", "encoding", "indexing", "ready", "failed")  # waiting: for another build to finish first


@dataclass(frozen=True)
class EncodingStatus:
    """A background build's progress: ``done`` of ``total`` documents have a vector (read from the
    store or encoded), ``rate`` documents encoded per second since encoding began (None before the
    first batch), ``state`` one of ``STATES`` ("waiting": for a build that must finish first, e.g. the
    learned sparse index for the dense one); ``error`` says why a failed build failed."""

    state: str
    done: int
    total: int
    rate: float | None
    elapsed_s: float
    error: str | None = None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    @property
    def seconds_left(self) -> float | None:
        """Time left to encode the rest at the rate so far (None while the rate is unknown)."""
        if self.state != "encoding" or not self.rate:
            return None
        return (self.total - self.done) / self.rate

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds_left": self.seconds_left}


def duration(seconds: float) -> str:
    """"45 s", "12 min", "2 h 05 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class DenseNotReady(ValueError):
    """The dense index is still being built in the background: the systems that need it (dense and
    every fusion) cannot answer yet. ``status`` says how far the build is."""

    def __init__(self, status: EncodingStatus):
        self.status = status
        if status.state == "indexing":
            where = f"all {status.total:,} documents are encoded, the index is being built"
        else:
            rate = f", {status.rate:,.0f} per second" if status.rate else ""
            left = status.seconds_left
            where = (f"{status.done:,} of {status.total:,} documents encoded{rate}"
                     + (f", about {duration(left)} left" if left is not None else ""))
        super().__init__(f"the dense index is still being built ({where}); BM25 answers now, dense and the "
                         "hybrids when it is done")


class BackgroundBuild(Generic[T]):
    """Runs ``build(progress)`` once in a daemon thread; ``progress(done, total)`` counts documents
    and the build calls ``indexing()`` (passed as ``build``'s second argument) when encoding is over.

    ``result()`` is the built value, or ``DenseNotReady`` while the build runs, or the build's own
    exception when it failed; ``wait(timeout)`` joins it.
    """

    def __init__(self, build: Callable[[Callable[[int, int], None], Callable[[], None]], T], total: int,
                 name: str = "rankscope-dense-build", waiting: bool = False):
        self.total = total
        self._build = build
        self._lock = threading.Lock()
        self._state, self._done = ("waiting" if waiting else "encoding"), 0  # waiting: until its first report
        self._started = time.monotonic()
        self._first: tuple[float, int] | None = None  # (time, documents done) at the first report
        self._last: tuple[float, int] | None = None
        self._ended: float | None = None
        self._value: T | None = None
        self._error: BaseException | None = None
        self._stop = threading.Event()  # ``stop``: end at the next progress report
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        _RUNNING.add(self)
        self._thread.start()

    def _progress(self, done: int, total: int) -> None:
        check_stopping()
        if self._stop.is_set():
            raise BuildStopped("the build was stopped")
        now = time.monotonic()
        with self._lock:
            self._done, self.total = done, total
            if self._state == "waiting":
                self._state = "encoding"
            if self._first is None:  # the first report counts the vectors the store already had
                self._first = (now, done)
            self._last = (now, done)

    def _indexing(self) -> None:
        with self._lock:
            self._state, self._done = "indexing", self.total

    def _run(self) -> None:
        try:
            value = self._build(self._progress, self._indexing)
        except BaseException as err:
            with self._lock:
                self._error, self._state, self._ended = err, "failed", time.monotonic()
            return
        with self._lock:
            self._value, self._state, self._done, self._ended = value, "ready", self.total, time.monotonic()

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive()

    def status(self) -> EncodingStatus:
        with self._lock:
            rate = None
            if self._first and self._last and self._last[0] > self._first[0] and self._last[1] > self._first[1]:
                rate = (self._last[1] - self._first[1]) / (self._last[0] - self._first[0])
            end = self._ended if self._ended is not None else time.monotonic()
            error = f"{type(self._error).__name__}: {self._error}" if self._error is not None else None
            return EncodingStatus(self._state, self._done, self.total, rate, end - self._started, error)

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` ended it before it was done (it is "failed" with ``BuildStopped``)."""
        return self.finished and isinstance(self._error, BuildStopped)

    def stop(self, timeout: float | None = STOP_WAIT_S) -> bool:
        """Tell the build to stop at its next progress report (between two batches) and join it for
        at most ``timeout`` seconds; True when it is over (stopped, or done before it could be)."""
        self._stop.set()
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Join the build for at most ``timeout`` seconds (None: until done); True when it is done."""
        self._thread.join(timeout)
        return self.finished

    def follow(self, timeout: float | None, report: Callable[[int, int], None] | None, poll: float) -> bool:
        """``wait`` for at most ``timeout`` seconds (None: until done), telling ``report(done,
        total)`` every ``poll`` seconds while documents are encoded; True when the build is done."""
        deadline = None if timeout is None else time.monotonic() + timeout
        shown = 0
        while True:
            status = self.status()
            if report and status.state == "encoding" and status.done > shown:
                report(status.done, status.total)
                shown = status.done
            left = None if deadline is None else deadline - time.monotonic()
            if self.wait(poll if left is None else max(0.0, min(poll, left))):
                if report and shown:
                    report(status.total, status.total)
                return True
            if left is not None and left <= poll:
                return False

    def result(self) -> T:
        if not self.finished:
            raise DenseNotReady(self.status())
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
