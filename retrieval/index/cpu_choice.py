"""How the encoder runs on a CPU — precision and batch size — chosen by measurement per CPU class
and remembered.

CPUs differ more than their instruction sets say: on some with AVX-512 BF16 bf16 is the faster by
2.6×, on others (no AMX) slower than fp32; on one with AVX2 only, the batch size that suited the
AVX-512 machines lost to sentence-transformers' own default (bench/README.md, ``encode_speed.py``).
So the first load of a model on a CPU class times the candidates on fixed synthetic passages of
mixed lengths (``choose``, about ten seconds for all-MiniLM-L6-v2 on two cores: 64 passages of 16–96
words): fp32 — and bf16
where the CPU computes it natively — each at ``BATCH_SIZES`` texts per forward pass, every
candidate twice in alternating rounds after a warm-up. The fastest batch size of each precision is
kept; bf16 only where its best is at least ``BF16_GAIN`` faster than fp32's (fp32 is exact).

The choice is remembered under the CPU's class (``cpu_class``: vendor, family, model, name and the
instruction flags that change the kernels), torch's version, the thread count and the model's
architecture (``cpu_choices.json`` in ``$RANKSCOPE_HOME`` or the user's cache folder): a choice made
on one class is never reused on another, and a record read back is used only where it names a
candidate (anything else is measured again). The file is read back only as a regular file of its
folder of at most ``CHOICES_BYTES`` (``retrieval.files.read_back``): a link, a FIFO, a device or a
larger file in its place is never opened or read whole — the choice is measured again and the
file written over. Threads are torch's (the physical cores) and are not
changed here — the setting is process-wide and training or a second session share it — but a
choice made at one thread count is not reused at another. Length bucketing is not a choice: texts
are always encoded longest first (``Encoder.encode``), so a batch pads little.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.files.part_files import partial, remove_orphans
from retrieval.files.read_back import read_back_bytes

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

BATCH_SIZES = (16, 32, 64)
REMEMBERED = 64  # choices the file keeps (CPU classes × models × thread counts), the latest
CHOICES_BYTES = 1 << 20  # the file's size at most: REMEMBERED records of a few hundred bytes each
BF16_GAIN = 1.1  # bf16 on a CPU only when it encodes at least 10% faster than fp32 (which is exact)
# the instruction flags that change which kernels torch and oneDNN run: part of a CPU's class
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
                "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2")
_CALIBRATION = ("retrieval ranks passages for a query by lexical overlap and dense similarity while "
                "analysts compare failures across systems and judge relevance by hand").split()
_LENGTHS = (16, 32, 48, 64, 96)  # words a calibration passage has, in turn: short and long texts, as in a corpus


@dataclass(frozen=True)
class CpuChoice:
    """How an encoder runs on this CPU, and the measurement behind it."""

    precision: str  # "fp32" or "bf16"
    batch_size: int
    threads: int  # torch's, at the time of the choice (not changed by it)
    cpu: str  # ``cpu_class().label``
    rates: dict[str, float] = field(default_factory=dict)  # "fp32/16" → passages per second measured

    @property
    def candidates(self) -> str:
        """The candidates measured, e.g. "fp32 at 16/32/64"."""
        by_precision: dict[str, list[str]] = {}
        for name in self.rates:
            precision, _, batch = name.partition("/")
            by_precision.setdefault(precision, []).append(batch)
        return ", ".join(f"{p} at {'/'.join(b)}" for p, b in by_precision.items())


@dataclass(frozen=True)
class CpuClass:
    """What a choice is remembered under: the CPU's name and the flags that change its kernels."""

    vendor: str
    family: str
    model: str
    name: str
    flags: tuple[str, ...]

    @property
    def label(self) -> str:
        """e.g. "AMD EPYC (family 25, model 1; avx2 fma)"."""
        where = ", ".join(x for x in (f"family {self.family}" if self.family else "",
                                      f"model {self.model}" if self.model else "") if x)
        flags = " ".join(self.flags) or "no vector extensions known"
        return f"{self.name or self.vendor or 'unknown CPU'} ({where + '; ' if where else ''}{flags})"

    @property
    def slug(self) -> str:
        """One word for a bench line, e.g. "amd-epyc-f25-m1-avx2": the name, family, model and the
        widest vector unit (amx, avx512-bf16, avx512, avx2, …)."""
        units = (("amx_tile", "amx"), ("avx512_bf16", "avx512-bf16"), ("avx512f", "avx512"), ("avx2", "avx2"),
                 ("sve", "sve"), ("asimd", "neon"))
        widest = next((w for f, w in units if f in self.flags), "scalar")
        name = re.sub(r"\((r|tm)\)|@.*$|\b(cpu|processor|\d+-core)\b", " ", (self.name or self.vendor).lower())
        name = re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:40].strip("-") or "cpu"
        fam = f"-f{self.family}" if self.family.isdigit() else ""
        mod = f"-m{self.model}" if self.model.isdigit() else ""
        return f"{name}{fam}{mod}-{widest}"


def cpu_class(cpuinfo: str | None = None) -> CpuClass:
    """This CPU's class from ``/proc/cpuinfo`` (Linux; ``cpuinfo`` in tests), else from ``platform``."""
    import platform

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    first = cpuinfo.split("\n\n")[0]
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in first.splitlines())}
    present = set((fields.get("flags") or fields.get("Features") or "").split())
    if not fields:
        return CpuClass("", "", "", platform.processor() or platform.machine(), ())
    return CpuClass(fields.get("vendor_id", ""), fields.get("cpu family", ""), fields.get("model", ""),
                    fields.get("model name", ""), tuple(f for f in KERNEL_FLAGS if f in present))


def cpu_bf16_instructions() -> str | None:
    """"AMX" or "AVX-512 BF16" when this CPU computes bf16 natively, else None."""
    import torch

    cpu = getattr(torch, "cpu", None)
    for check, name in (("_is_amx_tile_supported", "AMX"), ("_is_avx512_bf16_supported", "AVX-512 BF16")):
        try:
            if getattr(cpu, check)():
                return name
        except (AttributeError, RuntimeError):
            continue
    return None


def choices_file() -> Path:
    """Where the CPU choices are remembered."""
    import platformdirs

    return Path(os.environ.get("RANKSCOPE_HOME") or platformdirs.user_cache_dir("rankscope")) / "cpu_choices.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        known = json.loads(read_back_bytes(path, path.parent, CHOICES_BYTES))
    except (OSError, ValueError, RecursionError):  # none, not a regular file within its size, not JSON
        return {}
    return known if isinstance(known, dict) else {}


def _valid(record: object, precisions: tuple[str, ...], threads: int, label: str) -> CpuChoice | None:
    """The remembered choice, where it names a candidate of this CPU; else None (measured again). The
    class it is shown with is ``label``, this CPU's (the key holds the class): the file's own is not shown."""
    if not isinstance(record, dict):
        return None
    precision, batch, stored, rates = (record.get(k) for k in ("precision", "batch_size", "cpu", "rates"))
    if precision not in precisions or batch not in BATCH_SIZES or type(batch) is not int or not isinstance(stored, str):
        return None
    clean = {str(k)[:16]: float(v) for k, v in rates.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)} if isinstance(rates, dict) else {}
    return CpuChoice(precision, batch, threads, label, dict(list(clean.items())[:16]))


Timer = Callable[[str, int], float]  # (precision, batch size) → seconds to encode the calibration passages


def choose(model: SentenceTransformer, timer: Timer | None = None,
           encode: Callable[[str, int, list[str]], object] | None = None) -> CpuChoice:
    """The precision and batch size ``model`` encodes with on this CPU: remembered for its class, or
    measured now and remembered. The measurement times ``encode(precision, batch size, texts)`` (the
    encoder as ``load_encoder`` makes it, at each candidate); ``timer`` (tests) replaces it."""
    import torch

    klass = cpu_class()
    threads = torch.get_num_threads()
    precisions = ("fp32", "bf16") if cpu_bf16_instructions() else ("fp32",)
    parameters = sum(p.numel() for p in model.parameters())
    arch: list[str | int] = [type(m).__name__ for m in model] + [parameters]
    digest = hashlib.sha256(json.dumps([klass.vendor, klass.family, klass.model, klass.name, klass.flags,
                                        cpu_bf16_instructions(), torch.__version__, threads, arch]).encode())
    key = digest.hexdigest()[:24]
    path = choices_file()
    remove_orphans(path.parent, (path.name,))  # pieces of the file a killed process left (written aside, then moved)
    known = _read(path)
    remembered = _valid(known.get(key), precisions, threads, klass.label)
    if remembered is not None:
        return remembered

    # as many passages as the largest batch, so every candidate batch size runs full batches; fewer for a
    # model past 25M parameters (seconds, not minutes), where the largest batches tie and the smaller wins
    n = max(8, min(max(BATCH_SIZES), int(max(BATCH_SIZES) * 25e6 / max(parameters, 1))))
    texts = [" ".join(_CALIBRATION[(i * 7 + j) % len(_CALIBRATION)] for j in range(_LENGTHS[i % len(_LENGTHS)]))
             for i in range(n)]

    def seconds(precision: str, batch_size: int) -> float:
        import time

        if encode is None:
            raise ValueError("choose measures through encode(precision, batch size, texts): none was given")
        start = time.perf_counter()
        encode(precision, batch_size, texts)
        return time.perf_counter() - start

    timer = timer or seconds
    candidates = [(p, b) for p in precisions for b in BATCH_SIZES]
    for p in precisions:
        timer(p, BATCH_SIZES[len(BATCH_SIZES) // 2])  # warm-up: kernels chosen, caches filled
    spent = dict.fromkeys(candidates, 0.0)
    for round_ in range(2):  # alternating rounds, the second in reverse: drift hits every candidate alike
        for c in candidates if round_ == 0 else candidates[::-1]:
            spent[c] += timer(*c)
    best = {p: min((c for c in candidates if c[0] == p), key=lambda c: (spent[c], c[1])) for p in precisions}
    chosen = best["fp32"]
    if "bf16" in best and spent[best["bf16"]] * BF16_GAIN <= spent[best["fp32"]]:
        chosen = best["bf16"]
    rates = {f"{p}/{b}": round(2 * n / max(spent[(p, b)], 1e-9), 1) for p, b in candidates}
    choice = CpuChoice(chosen[0], chosen[1], threads, klass.label, rates)
    kept = dict(list(known.items())[-(REMEMBERED - 1):])  # the file's bound: the latest classes and models
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        aside = partial(path)
        aside.write_text(json.dumps({**kept, key: {"precision": choice.precision, "batch_size": choice.batch_size,
                                                    "cpu": choice.cpu, "rates": rates}}))
        os.replace(aside, path)
    except OSError:
        pass  # a read-only home: measured again next time, the same way
    return choice
