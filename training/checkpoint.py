"""Resumable training: everything a run needs to go on from its last finished epoch.

After each epoch ``Trainer`` writes one file, ``state.pt``, in its checkpoint folder: the weights,
the optimizer, learning-rate schedule and loss-scaler states, the step count, the Python, NumPy
and torch random states, the losses so far, the hard-negative pool mined between quadruplet
stages, and the state of an epoch hook (the held-out selector's scores and kept weights). A run
started again with the same configuration, the same training pairs and the same starting model
reads it, skips the finished epochs and ends with the weights an uninterrupted run would have
had. A checkpoint of another run (another key) is ignored and replaced.

The file is written to a temporary name and renamed, so a kill while writing leaves the previous
epoch's checkpoint whole. It is read back only as a regular file of its folder of at most
``STATE_BYTES`` (``retrieval.files.read_back``): a link, a FIFO, a device or a larger file in its
place is not opened, and the run starts again.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import cast

import numpy as np
import torch

from retrieval.files.read_back import open_read_back

STATE_FILE = "state.pt"
# a checkpoint's size at most: the weights, two optimizer moments and the best weights kept of a model of
# about 500M parameters (the models trained here have 4M to 110M)
STATE_BYTES = 8 * 2**30


def run_key(config, pairs, start: str, stage_prefix: str = "") -> str:
    """What identifies one training run: its configuration (the device aside: a run may go on
    elsewhere), its training pairs, what it starts from (a base model's name, or a description of
    the model passed in) and its stage prefix."""
    cfg = {k: v for k, v in asdict(config).items() if k != "device"}
    h = hashlib.sha1(json.dumps(cfg, sort_keys=True, default=str).encode())
    for pair in pairs:
        h.update(f"\x1f{pair.query_id}\x1e{pair.query}\x1e{pair.doc_id}".encode())
    h.update(f"\x1d{start}\x1d{stage_prefix}".encode())
    return h.hexdigest()


def random_states() -> dict:
    kind, keys, pos, has_gauss, cached = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state())
    return {"python": random.getstate(), "torch": torch.get_rng_state(),
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached]}


def set_random_states(states: dict) -> None:
    random.setstate(_tuples(states["python"]))
    torch.set_rng_state(states["torch"])
    kind, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))


def _tuples(value):
    # random.setstate wants tuples; a saved state may come back with lists
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass
class Checkpoint:
    key: str
    stage: str  # the stage the last finished epoch belongs to (without the trainer's prefix)
    epoch: int
    step: int  # optimizer steps taken in that stage
    done_stages: list[str]  # stages finished before ``stage`` (skipped on resume)
    model: dict
    optimizer: dict
    scheduler: dict
    scaler: dict
    rng: dict  # the trainer's own random.Random state, and the global ones (``random_states``)
    previous_loss: float | None  # the stage's last epoch loss (stage one's convergence test)
    converged: bool  # stage one stopped on its convergence test after this epoch
    losses: list = field(default_factory=list)
    epoch_losses: list = field(default_factory=list)
    seconds: float = 0.0  # training time before the interruption
    pools: dict = field(default_factory=dict)  # name → (source, {query: [rows]}) mined inside the run
    hook: dict | None = None  # the epoch hook's ``state_dict()``
    total: int = 0  # the stage's optimizer steps in all, as its schedule was built (0: not kept, older checkpoints)


def save(directory: Path, checkpoint: Checkpoint) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.unlink(missing_ok=True)  # whatever is in its place (a FIFO would hold the write): written anew
    torch.save({f.name: getattr(checkpoint, f.name) for f in fields(checkpoint)}, tmp)  # no deep copy
    os.replace(tmp, directory / STATE_FILE)


def load(directory: Path | None, key: str) -> Checkpoint | None:
    """The checkpoint in ``directory`` when it belongs to the run ``key``; None when there is
    none, it is another run's, it is not a regular file within ``STATE_BYTES``, or it cannot be read
    or lacks a field (a run then starts from the beginning). Read with ``weights_only``: tensors and
    plain values only, no object is unpickled."""
    if directory is None or not os.path.lexists(directory / STATE_FILE):
        return None
    try:
        with open_read_back(directory / STATE_FILE, directory, STATE_BYTES) as f:  # a regular file within its size
            data = torch.load(f, map_location="cpu", weights_only=True)
    except Exception:  # not a file to read back, damaged, or not of tensors and plain values
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    try:
        return Checkpoint(**data)
    except TypeError:  # the run's key, but fields missing or unknown: not this code's checkpoint
        return None
