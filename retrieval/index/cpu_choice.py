"""How the encoder runs on a CPU — precision and batch size — chosen by measurement per CPU class
and remembered.

CPUs differ more than their instruction sets say: on some with AVX-512 BF16 bf16 is the faster by
2.6×, on others (no AMX) slower than fp32; on one with AVX2 only, the batch size that suited the
AVX-512 machines lost to sentence-transformers' own default (bench/README.md, ``encode_speed.py``).
So the first load of a model on a CPU class times the candidates on fixed synthetic passages of
mixed lengths (``choose``, about fifteen seconds for all-MiniLM-L6-v2 on two cores: 32 passages of
16–224 words): fp32 — and bf16 where the CPU computes it natively — each at ``BATCH_SIZES`` texts per
forward pass, every candidate in ``ROUNDS`` interleaved rounds after a warm-up of each (every other round
in reverse order, so a drift hits every candidate alike). A candidate's time is the median of its
rounds, and the rounds' totals must agree within ``SPREAD_BOUND``. The fastest batch size of each
precision is kept; bf16 only where its best is at least ``BF16_GAIN`` faster than fp32's (fp32 is exact).

A busy machine does not decide (``machine_load``): one busy minute would otherwise decide every
later encoding. Where the load is above the cores before the rounds, nothing is measured and the
choice known before (else ``DEFAULT``) is used; where other processes took CPU time during the
rounds, or the rounds' totals disagree by more than ``SPREAD_BOUND``, the measured best is used.
Either is remembered as *provisional* and measured again at the first load ``RETRY_AFTER_S`` later.
A decided choice is then held against what encoding actually achieves (``check_rate``, called by
``Encoder.encode`` after an encoding of ``RATE_CHECK_S`` or more on a quiet machine): tokens a
second, which the length of the texts moves far less than passages a second do; apart by more than
``RECHECK_FACTOR`` either way, the choice is flagged and the next load measures again. An encoder
already loaded keeps its precision (it is part of the fingerprint of every vector it made); a new
choice applies from the next load. ``CpuChoice.how`` says which of these happened.

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
import math
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.files.part_files import partial, remove_orphans
from retrieval.files.read_back import read_back_bytes
from retrieval.index import machine_load

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

# texts a forward pass: on AVX-512 BF16 (Zen 5) SciFact's abstracts encode fastest at 8 (bf16 70 docs/s, 16: 62,
# 64: 51), on AVX2 (Zen 3) at 16; 64 has not won on a corpus since the calibration passages were made as long
BATCH_SIZES = (8, 16, 32)
REMEMBERED = 64  # choices the file keeps (CPU classes × models × thread counts), the latest
CHOICES_BYTES = 1 << 20  # the file's size at most: REMEMBERED records of a few hundred bytes each
BF16_GAIN = 1.1  # bf16 on a CPU only when it encodes at least 10% faster than fp32 (which is exact)
ROUNDS = 3  # interleaved rounds of every candidate, after a warm-up
# the rounds may disagree by at most this, (slowest − fastest) / fastest of their totals (every candidate once):
# past it a round measured something other than the candidates (another process, a frequency change), and no
# choice is remembered. On a quiet 2-core Zen 5 all-MiniLM-L6-v2's rounds (4 s each) spread 1.6%, while one
# candidate's alone (0.3–1.3 s) spread 12–33% from one calibration to the next: a candidate's time is the
# median of its rounds, robust to one such blip, and the totals say whether the rounds agree
SPREAD_BOUND = 0.10
RETRY_AFTER_S = 600  # a provisional choice (or a re-measurement refused) is measured again after this long
# a remembered choice is measured again when encoding on a quiet machine runs this many times faster or slower
# (tokens a second) than its calibration: the length of the texts alone moves the rate by less — on a quiet
# 2-core Zen 5, all-MiniLM-L6-v2 at bf16/8 read 400 documents of SciFact, NFCorpus and Cranfield (190–242 tokens
# each) at 1.36, 1.44 and 1.27 times its calibration's 10,712 tokens/s
RECHECK_FACTOR = 2.0
DEFAULT = ("fp32", 32)  # where nothing could be measured: exact, and sentence-transformers' own batch size
# the instruction flags that change which kernels torch and oneDNN run: part of a CPU's class
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
                "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2")
_CALIBRATION = ("retrieval ranks passages for a query by lexical overlap and dense similarity while "
                "analysts compare failures across systems and judge relevance by hand").split()
# words a calibration passage has, in turn: short and long texts, up to past MiniLM's 256 tokens, as in a corpus
# (the batch size that wins depends on the tokens a batch holds: short passages alone chose 16 where 8 won)
_LENGTHS = (16, 48, 96, 160, 224)


@dataclass(frozen=True)
class CpuChoice:
    """How an encoder runs on this CPU, and the measurement behind it."""

    precision: str  # "fp32" or "bf16"
    batch_size: int
    threads: int  # torch's, at the time of the choice (not changed by it)
    cpu: str  # ``cpu_class().label``
    rates: dict[str, float] = field(default_factory=dict)  # "fp32/16" → passages per second measured
    key: str = ""  # what it is remembered under in ``choices_file()`` (the class, torch, threads, model)
    rounds: int = 0  # interleaved rounds measured (0: none, a default taken while the machine was busy)
    spread: float | None = None  # how far the rounds' totals disagree, (slowest − fastest) / fastest
    token_rate: float = 0.0  # tokens a second of the chosen candidate over the calibration passages
    provisional: str = ""  # why it is not decided (the machine busy, the rounds apart); "" where it is
    measured_at: float = 0.0  # seconds since the epoch of the measurement (or of the last attempt)
    recheck: str = ""  # why it is measured again at the next load: encoding ran apart from the measurement
    remembered: bool = False  # read back from ``choices_file()``, not measured in this call

    @property
    def candidates(self) -> str:
        """The candidates measured, e.g. "fp32 at 8/16/32"."""
        by_precision: dict[str, list[str]] = {}
        for name in self.rates:
            precision, _, batch = name.partition("/")
            by_precision.setdefault(precision, []).append(batch)
        return ", ".join(f"{p} at {'/'.join(b)}" for p, b in by_precision.items())

    @property
    def how(self) -> str:
        """How the choice was made, for the data summary and the CLI: e.g. "fastest of fp32 at 8/16/32
        in 3 interleaved rounds (spread 4%), remembered", or "provisional (the machine was busy: load
        5.2 on 2 cores), measured again at a load after 10 minutes"."""
        if not self.rates:
            measured = "the default fp32, none measured"
        else:
            spread = f", spread {self.spread:.0%}" if self.spread is not None else ""
            rounds = f"in {self.rounds} interleaved rounds" if self.rounds else "in one pass"
            measured = f"fastest of {self.candidates} {rounds}{spread}"
        if self.provisional:
            return (f"provisional ({self.provisional}): {measured}; measured again at a load after "
                    f"{RETRY_AFTER_S // 60} minutes on a quiet machine")
        if self.recheck:
            return f"{measured}; measured again at the next load ({self.recheck})"
        return f"{measured}{', remembered' if self.remembered else ''}"


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


def _number(value: object, default: float = 0.0) -> float:
    """A finite number read back, else ``default``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


ONE_PASS = "remembered from one pass, without interleaved rounds or a load check"


def _valid(record: object, precisions: tuple[str, ...], threads: int, label: str, key: str) -> CpuChoice | None:
    """The remembered choice, where it names a candidate of this CPU; else None (measured again). The
    class it is shown with is ``label``, this CPU's (the key holds the class): the file's own is not shown.
    Its other fields are read as data of a bounded size and type, a wrong one as absent."""
    if not isinstance(record, dict):
        return None
    precision, batch, stored, rates = (record.get(k) for k in ("precision", "batch_size", "cpu", "rates"))
    if precision not in precisions or batch not in BATCH_SIZES or type(batch) is not int or not isinstance(stored, str):
        return None
    clean = {str(k)[:16]: _number(v) for k, v in rates.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)} if isinstance(rates, dict) else {}
    text = {k: record[k][:200] if isinstance(record.get(k), str) else "" for k in ("provisional", "recheck")}
    rounds = record["rounds"] if type(record.get("rounds")) is int and 0 <= record["rounds"] <= 100 else 0
    spread = record.get("spread")
    if not rounds and not text["provisional"]:
        # a choice decided before the interleaved rounds: one pass, no spread and no load checked
        text["recheck"] = text["recheck"] or ONE_PASS
    return CpuChoice(precision, batch, threads, label, dict(list(clean.items())[:16]), key, rounds,
                     _number(spread) if spread is not None and _number(spread, -1.0) >= 0 else None,
                     max(0.0, _number(record.get("token_rate"))), text["provisional"],
                     _number(record.get("measured_at")), text["recheck"], remembered=True)


def _record(choice: CpuChoice) -> dict[str, Any]:
    """What the file keeps of a choice."""
    return {"precision": choice.precision, "batch_size": choice.batch_size, "cpu": choice.cpu, "rates": choice.rates,
            "rounds": choice.rounds, "spread": choice.spread, "token_rate": choice.token_rate,
            "provisional": choice.provisional, "measured_at": choice.measured_at, "recheck": choice.recheck}


def _remember(key: str, record: dict[str, Any], known: dict[str, Any]) -> None:
    """Write ``record`` under ``key`` beside ``known`` (the file as the caller read it), keeping the
    file's bound: the latest ``REMEMBERED`` choices. Written aside, then moved into place."""
    path = choices_file()
    known = {k: v for k, v in known.items() if k != key}
    kept = dict(list(known.items())[-(REMEMBERED - 1):])  # the file's bound: the latest classes and models
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        aside = partial(path)
        aside.write_text(json.dumps({**kept, key: record}))
        os.replace(aside, path)
    except OSError:
        pass  # a read-only home: measured again next time, the same way


Timer = Callable[[str, int], float]  # (precision, batch size) → seconds to encode the calibration passages
Machine = Callable[[], machine_load.Reading]  # the machine now (``machine_load.read``; a fixed one in tests)


def _key(model: SentenceTransformer, klass: CpuClass, threads: int) -> str:
    import torch

    parameters = sum(p.numel() for p in model.parameters())
    arch: list[str | int] = [type(m).__name__ for m in model] + [parameters]
    digest = hashlib.sha256(json.dumps([klass.vendor, klass.family, klass.model, klass.name, klass.flags,
                                        cpu_bf16_instructions(), torch.__version__, threads, arch]).encode())
    return digest.hexdigest()[:24]


def calibration_texts(model: SentenceTransformer) -> list[str]:
    """The passages a choice is measured on: as many as the largest batch, so every candidate batch
    size runs full batches; fewer for a model past 25M parameters (seconds, not minutes), where the
    largest batches tie and the smaller wins."""
    parameters = sum(p.numel() for p in model.parameters())
    n = max(8, min(max(BATCH_SIZES), int(max(BATCH_SIZES) * 25e6 / max(parameters, 1))))
    return [" ".join(_CALIBRATION[(i * 7 + j) % len(_CALIBRATION)] for j in range(_LENGTHS[i % len(_LENGTHS)]))
            for i in range(n)]


def count_tokens(model: SentenceTransformer, texts: list[str]) -> int:
    """Tokens the model reads of ``texts`` (each cut at its ``max_seq_length``), padding not counted."""
    prepare = getattr(model, "preprocess", None) or model.tokenize
    features = prepare(texts)
    return int(features["attention_mask"].sum())


def choose(model: SentenceTransformer, timer: Timer | None = None,
           encode: Callable[[str, int, list[str]], object] | None = None,
           machine: Machine | None = None, now: Callable[[], float] = time.time) -> CpuChoice:
    """The precision and batch size ``model`` encodes with on this CPU: remembered for its class, or
    measured now. The measurement times ``encode(precision, batch size, texts)`` (the encoder as
    ``load_encoder`` makes it, at each candidate); ``timer`` (tests) replaces it, ``machine`` reads the
    machine's load (``machine_load.read``) and ``now`` the clock.

    A decided choice is remembered and used from then on, unless encoding flagged it (``check_rate``):
    then it is measured again. No choice is decided while the machine is busy (its load above its
    cores before the rounds, or other processes' CPU time during them: ``machine_load``) or while the
    rounds' totals disagree by more than ``SPREAD_BOUND``: the measured best (or, busy before any
    round, the choice known before, else ``DEFAULT``) is used as a provisional choice, remembered as
    one, and measured again at a load ``RETRY_AFTER_S`` later."""
    import torch

    machine = machine or machine_load.read
    klass = cpu_class()
    threads = torch.get_num_threads()
    precisions = ("fp32", "bf16") if cpu_bf16_instructions() else ("fp32",)
    key = _key(model, klass, threads)
    path = choices_file()
    remove_orphans(path.parent, (path.name,))  # pieces of the file a killed process left (written aside, then moved)
    stored = _read(path)
    known = _valid(stored.get(key), precisions, threads, klass.label, key)
    if known is not None and not known.provisional and not known.recheck:
        return known
    if known is not None and now() - known.measured_at < RETRY_AFTER_S:
        return known  # provisional, or flagged: tried again later, not at every load
    before = machine()
    busy = machine_load.busy_at(before)
    if busy is not None:  # not measured at all: the choice known before, or the default, until a quiet load
        if known is not None:  # provisional or flagged (a decided one returned above): used as it is, and why
            return replace(known, provisional=f"the machine was busy: {busy}")
        default = CpuChoice(DEFAULT[0], DEFAULT[1], threads, klass.label, key=key,
                            provisional=f"the machine was busy: {busy}", measured_at=now())
        _remember(key, _record(default), stored)  # tried again later, not at every load
        return default

    texts = calibration_texts(model)

    def seconds(precision: str, batch_size: int) -> float:
        if encode is None:
            raise ValueError("choose measures through encode(precision, batch size, texts): none was given")
        start = time.perf_counter()
        encode(precision, batch_size, texts)
        return time.perf_counter() - start

    timer = timer or seconds
    candidates = [(p, b) for p in precisions for b in BATCH_SIZES]
    for c in candidates:  # warm-up: every candidate's kernels made for its shapes (oneDNN's are made on first use)
        timer(*c)
    first = machine()
    spent: dict[tuple[str, int], list[float]] = {c: [] for c in candidates}
    for round_ in range(ROUNDS):  # interleaved, every other round reversed: drift hits every candidate alike
        for c in candidates if round_ % 2 == 0 else candidates[::-1]:
            spent[c].append(timer(*c))
    busy = machine_load.busy_between(first, machine())
    typical = {c: statistics.median(times) for c, times in spent.items()}
    totals = [sum(times[r] for times in spent.values()) for r in range(ROUNDS)]
    spread = (max(totals) - min(totals)) / max(min(totals), 1e-9)
    best = {p: min((c for c in candidates if c[0] == p), key=lambda c: (typical[c], c[1])) for p in precisions}
    chosen = best["fp32"]
    if "bf16" in best and typical[best["bf16"]] * BF16_GAIN <= typical[best["fp32"]]:
        chosen = best["bf16"]
    n = len(texts)
    rates = {f"{p}/{b}": round(n / max(typical[(p, b)], 1e-9), 1) for p, b in candidates}
    tokens = count_tokens(model, texts) if timer is seconds else 0
    why = (f"the machine was busy: {busy}" if busy else
           f"its rounds disagreed by {spread:.0%}, more than {SPREAD_BOUND:.0%}" if spread > SPREAD_BOUND else "")
    choice = CpuChoice(chosen[0], chosen[1], threads, klass.label, rates, key, ROUNDS, round(spread, 4),
                       round(tokens / max(typical[chosen], 1e-9), 1), why, now())
    if why and known is not None and not known.provisional:
        # a decided choice flagged for re-measurement stays until a measurement can replace it: used as it
        # is, and why it was not replaced (not remembered as provisional: it stays the decided one)
        kept = replace(known, measured_at=now())
        _remember(key, _record(kept), stored)
        return replace(kept, provisional=why)
    _remember(key, _record(choice), stored)
    return choice


def check_rate(choice: CpuChoice, tokens: int, seconds: float, first: machine_load.Reading,
               last: machine_load.Reading) -> str | None:
    """After an encoding at ``choice`` of ``tokens`` tokens in ``seconds`` between two readings of the
    machine: where the machine was quiet and the rate differs from the calibration's by more than
    ``RECHECK_FACTOR`` either way, the choice is flagged in ``choices_file()`` to be measured again at
    the next load; returns why (data), else None. A busy machine's rate says nothing of the choice."""
    if not choice.token_rate or not choice.key or seconds <= 0 or tokens <= 0 or choice.provisional:
        return None
    if machine_load.busy_between(first, last) is not None:
        return None
    seen = tokens / seconds
    if 1 / RECHECK_FACTOR <= seen / choice.token_rate <= RECHECK_FACTOR:
        return None
    why = f"encoding ran at {seen:,.0f} tokens/s, the calibration at {choice.token_rate:,.0f}"
    stored = _read(choices_file())
    record = stored.get(choice.key)
    if isinstance(record, dict):
        _remember(choice.key, {**record, "recheck": why, "measured_at": 0.0}, stored)
    return why
