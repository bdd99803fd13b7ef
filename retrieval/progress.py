"""The one progress callback of the library: ``progress(fraction done, what is happening)``.

Long loops report counts (``done, total``, e.g. ``Encoder.encode``); ``counting`` turns a
``Progress`` into such a counter, ``scaled`` maps a sub-task onto part of a larger task's bar.
"""
from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[float, str], None]  # (fraction done in [0, 1], what is happening)
Counter = Callable[[int, int], None]  # (done, total): what long loops report


def counting(progress: Progress | None, message: str) -> Counter | None:
    """``(done, total) -> progress(done / total, message.format(done=done, total=total))``, e.g.
    ``message = "encoding {done}/{total} documents"``; None stays None."""
    if progress is None:
        return None
    return lambda done, total: progress(done / max(total, 1), message.format(done=done, total=total))


def scaled(progress: Progress | None, start: float, end: float, prefix: str = "") -> Progress | None:
    """A sub-task's progress mapped onto ``[start, end]`` of the whole, its messages prefixed."""
    if progress is None:
        return None
    return lambda fraction, what: progress(start + (end - start) * fraction, prefix + what)
