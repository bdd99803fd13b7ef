"""A job's cancel honoured inside every model call (``training.stopping``), with a real tiny transformer: an
encoding of many documents stops within the batch it is in, not after the chunk of 256 texts it reports on,
and another thread's encoding with the same model is never stopped by it."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from retrieval.index.encoder import Encoder, open_model
from training.stopping import Doing, cancel_points
from training.trainer import Cancelled, TrainingProgress

TEXTS = [f"passage {i} about retrieval and its many words, number {i}" for i in range(120)]


def batches_of(model, cancel_at: int | None, cancel: threading.Event) -> list[int]:
    """Count the model's batches (its first module's calls) on this thread; set ``cancel`` in batch ``cancel_at``."""
    seen: list[int] = []

    def count(_module, _args):
        seen.append(threading.get_ident())
        if cancel_at is not None and len(seen) == cancel_at:
            cancel.set()

    model[0].register_forward_pre_hook(count)
    return seen


def test_a_cancel_stops_an_encoding_in_the_batch_it_is_set_in_not_at_the_end_of_its_chunk(tiny_model_dir):
    model = open_model(str(tiny_model_dir), "cpu")
    cancel = threading.Event()
    seen = batches_of(model, 3, cancel)
    encoder = Encoder(model, batch_size=4)  # 120 texts: one chunk of the encoder's 256, thirty batches
    doing = Doing(None)
    doing.report(TrainingProgress("held-out check — base encoder", 0, len(TEXTS), float("nan"), 0.0, 0.0))
    with cancel_points(cancel, doing.where), pytest.raises(Cancelled) as stopped:
        encoder.encode(TEXTS)
    assert len(seen) == 3  # the third batch is where the cancel came: it stopped there, no fourth began
    assert str(stopped.value) == f"cancelled during held-out check — base encoder (0/{len(TEXTS)})"
    # outside, the hook is gone: the same set event stops nothing, and the whole encoding runs
    assert encoder.encode(TEXTS).shape == (len(TEXTS), encoder.dim) and len(seen) == 3 + 30


def test_without_the_points_a_cancel_is_met_only_after_the_chunk(tiny_model_dir):
    """What it replaces: the progress check after each chunk sees the cancel only once all thirty batches ran."""
    model = open_model(str(tiny_model_dir), "cpu")
    cancel = threading.Event()
    seen = batches_of(model, 3, cancel)

    def progress(done: int, total: int) -> None:
        if cancel.is_set():
            raise Cancelled(f"cancelled after {done}/{total}")

    with pytest.raises(Cancelled, match=f"after {len(TEXTS)}/{len(TEXTS)}"):
        Encoder(model, batch_size=4).encode(TEXTS, progress=progress)
    assert len(seen) == 30


def test_a_training_step_stops_at_its_next_module_call(tiny_model_dir):
    import torch

    model = open_model(str(tiny_model_dir), "cpu")
    cancel = threading.Event()
    seen = batches_of(model, 2, cancel)  # a step's second column (the positives) sets it
    features = [model.preprocess(["a query", "another"]), model.preprocess(["a passage", "another passage"])]
    with cancel_points(cancel, lambda: "inbatch, step 1/5"), pytest.raises(Cancelled, match="inbatch, step 1/5"):
        vecs = [model(f)["sentence_embedding"] for f in features]
        torch.stack(vecs).sum().backward()
    assert len(seen) == 2


def test_another_threads_encoding_with_the_same_model_is_never_stopped(tiny_model_dir):
    """The app searches with the cached base model on its own threads while a job runs: a job's cancel is its own."""
    model = open_model(str(tiny_model_dir), "cpu")
    cancel = threading.Event()
    cancel.set()
    out: list[np.ndarray] = []
    with cancel_points(cancel, lambda: "evaluating"):
        thread = threading.Thread(target=lambda: out.append(Encoder(model, batch_size=4).encode(TEXTS[:12])))
        thread.start()
        thread.join()
        with pytest.raises(Cancelled):  # while on this thread it stops at once
            Encoder(model, batch_size=4).encode(TEXTS[:12])
    assert out and out[0].shape == (12, Encoder(model).dim)


def test_no_event_hooks_nothing(tiny_model_dir):
    model = open_model(str(tiny_model_dir), "cpu")
    with cancel_points(None, lambda: "anything"):
        assert Encoder(model).encode(TEXTS[:3]).shape[0] == 3
