"""A training job's cancel honoured inside every model call it makes, not only between its steps.

A job checked its cancel event between training steps and after each chunk of texts an encoding
reports (``Encoder.encode``: 256 texts a chunk, four batches of 64): on a busy machine (load 18 on 2
cores, a few passages a second) one chunk took minutes, and the held-out check's or the evaluation's
encoding ran on for all of it after the click. ``cancel_points`` makes every forward call of a module
on the job's thread a point where the cancel is honoured: a PyTorch global forward pre-hook
(``torch.nn.modules.module.register_module_forward_pre_hook``) raises ``Cancelled`` at the next
module a set event meets, whichever model runs (the base encoder, the model in training, the learned
sparse model) and whatever runs it (a training step, ``SentenceTransformer.encode``'s batches,
mining hard negatives, the evaluation's corpus encoding). A cancel then stops the job within one
layer of one batch.

The hook is the process's while the job runs, so it tests the thread first: a search of the app on
another thread, with the same cached base model, is never stopped by a job's cancel (its cost there
is one Python call per module call, microseconds against a batch's milliseconds).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from training.trainer import Cancelled, TrainingProgress


class Doing:
    """What a job is doing, as its progress last said it: what a cancel's message names.

    Args:
        on_progress: Where the job's progress goes on to (None: nowhere).
    """

    def __init__(self, on_progress: Callable[[TrainingProgress], None] | None):
        self.last: TrainingProgress | None = None
        self.note = ""  # what a cancel from now on adds (where the model was saved, say)
        self._on_progress = on_progress

    def report(self, p: TrainingProgress) -> None:
        """Remember ``p`` and pass it on."""
        self.last = p
        if self._on_progress is not None:
            self._on_progress(p)

    def where(self) -> str:
        """"inbatch, step 3/5" during a training step; "held-out check — … (256/1,000)" during an encoding."""
        p = self.last
        if p is None:
            return "the start of the training" + self.note
        return (f"{p.stage}, step {p.step}/{p.total}" if p.loss == p.loss else f"{p.stage} ({p.step}/{p.total})") \
            + self.note


@contextmanager
def cancel_points(cancel: threading.Event | None, where: Callable[[], str]) -> Iterator[None]:
    """While inside, any module's forward call on this thread raises ``Cancelled`` once ``cancel`` is
    set, saying ``f"cancelled during {where()}"`` (what the job was doing, as its progress last said).

    Args:
        cancel: The job's cancel event; None: nothing is hooked.
        where: What the job is doing now, for the message.

    Yields:
        Nothing; the hook is removed on the way out, however it is left.
    """
    if cancel is None:
        yield
        return
    thread = threading.get_ident()

    def check(_module: torch.nn.Module, _args: object) -> None:
        if cancel.is_set() and threading.get_ident() == thread:
            raise Cancelled(f"cancelled during {where()}")

    handle = torch.nn.modules.module.register_module_forward_pre_hook(check)
    try:
        yield
    finally:
        handle.remove()
