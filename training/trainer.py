"""The training loop: examples → negatives → loss → optimizer, with progress, cancel and checkpoints.

A plain PyTorch loop over a SentenceTransformer (AdamW, linear warm-up then decay, gradient
clipping at 1.0, bf16/fp16 autocast on CUDA), so that progress can be reported per step and a
cancel request honoured between steps. Negatives are re-sampled every epoch with a seeded RNG.

Schedules:
* ``quadruplet`` — two stages (Peiyang Liu, Sen Wang, Xi Wang, Wei Ye, Shikun Zhang, "QuadrupletBERT:
  An Efficient Model For Embedding-Based Large-Scale Retrieval", NAACL-HLT 2021, §4.1): stage one
  trains (q, p, n) with loss_h = 0 until the epoch loss stops falling (relative improvement <
  ``stage1_tol``, at most ``stage1_max_epochs``); then hard negatives are mined from the stage-one
  model's top ``model_depth`` and stage two trains (q, p, n, hn) with the full loss for ``epochs``
  epochs.
* ``residual`` / ``triplet`` / ``inbatch`` — one stage of ``epochs`` epochs on (q, p, n) with n
  from ``negatives`` (bm25 errors, model top-k, or random). ``residual`` is the margin of CLEAR
  (Luyu Gao, Zhuyun Dai, Tongfei Chen, Zhen Fan, Benjamin Van Durme, Jamie Callan, "Complement
  Lexical Retrieval Model with Semantic Residual Embeddings", ECIR 2021, arXiv:2004.13969, §3.3).
* ``marginmse`` — one stage like those, each example labelled with the teacher's margin (a tuned
  hybrid's scores of p and n, ``Trainer(teacher=…)``): Margin-MSE distillation (Sebastian Hofstätter,
  Sophia Althammer, Michael Schröder, Mete Sertkan, Allan Hanbury, "Improving Efficient Neural
  Ranking Models with Cross-Architecture Knowledge Distillation", arXiv:2010.02666, §3). A pair the
  teacher cannot score (a pseudo document outside the corpus) is left out.

``TrainConfig.pretrain`` adds a first stage on pseudo pairs, the multi-stage paradigm of Yiding Liu,
Guan Huang, Jiaxiang Liu, Weixue Lu, Suqi Cheng, Yukun Li, Daiting Shi, Shuaiqiang Wang,
Zhicong Cheng, Dawei Yin, "Pre-trained Language Model for Web-scale Retrieval in Baidu Search",
KDD 2021 (arXiv:2106.03373), §4 (run by ``finetune.run_training``).
"""
from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from retrieval import numbers
from retrieval.data.dataset import Dataset
from retrieval.index.bm25_index import BM25Index
from retrieval.index.encoder import Encoder, open_model, pick_device, resolve_model
from training import checkpoint
from training.losses import (
    FAMILIES,
    LOSSES,
    SPARSE_LOSSES,
    SPARSE_NEGATIVES,
    TEACHERS,
    QuadrupletLoss,
    ResidualMarginLoss,
    inbatch_loss,
    margin_mse_loss,
    triplet_loss,
)
from training.negatives import SOURCES, CandidatePool, bm25_pool, model_pool, random_pool
from training.pairs import PRETRAIN_TASKS, Pair, known_positives
from training.poly import routed, with_poly_attention

Teacher = Callable[[dict[str, list[int]], dict[str, str]], dict[str, dict[str, float]]]


class Cancelled(Exception):
    """Raised inside the loop when the job's cancel event is set."""


INT_FIELDS = ("epochs", "batch_size", "max_seq_length", "max_steps_per_epoch", "bm25_depth", "model_depth", "seed",
              "stage1_max_epochs", "pretrain_pairs", "positives_per_query", "poly_codes")
FLOAT_FIELDS = ("lr", "margin", "xi", "lambda_train", "warmup_ratio", "stage1_tol", "holdout")
QUERY_POOLINGS = ("mean", "poly")
DEVICES = ("auto", "cpu", "cuda", "mps")
RANGES = {  # every number a config may hold, inclusive bounds (stage1_tol −∞: stage one never stops early)
    "epochs": (1, 100), "batch_size": (2, 1024), "lr": (1e-8, 1.0), "warmup_ratio": (0.0, 1.0),
    "margin": (0.0, 10.0), "xi": (0.0, 100.0), "lambda_train": (0.0, 100.0), "bm25_depth": (1, 1000),
    "model_depth": (1, 1000), "max_seq_length": (8, 8192), "seed": (0, 2**32 - 1), "stage1_max_epochs": (1, 100),
    "stage1_tol": (float("-inf"), 1e6), "pretrain_pairs": (1, 1_000_000), "max_steps_per_epoch": (1, 1_000_000),
    "positives_per_query": (0, 10_000), "poly_codes": (1, 256), "holdout": (0.0, 0.99),
}
# The work one training may ask for, whoever asks (the app, the API, the command line, a library caller): a
# shared server runs one job at a time, so one job's size is how long everyone else waits. Any sane run fits:
# MS MARCO's 502,939 training queries for 40 epochs, refit included, are 40 million examples.
MAX_EXAMPLES = 50_000_000  # (query, positive, negatives) rows trained on, every epoch of every stage together
MAX_BATCH_TOKENS = 262_144  # batch size × max sequence length: a step's inputs per text column (1024 × 256)
OPTIONAL_FIELDS = ("max_steps_per_epoch", "pretrain")  # None, "" or 0: off (None), not the default


@dataclass
class TrainConfig:
    """One training's parameters; the defaults are the measured recipe, used by the app and the CLI.

    In-batch negatives plus one BM25 hard negative per query (a softmax over the batch's documents;
    Yiding Liu, Guan Huang et al., "Pre-trained Language Model for Web-scale Retrieval in Baidu Search",
    KDD 2021, arXiv:2106.03373, §3.3–3.4), lr 1e-4, 5 epochs, with the held-out check and refit
    (``holdout``, ``refit``): a fifth of the training queries (500 at most) is set aside, the best epoch
    on them is kept, or the base encoder when no epoch beats it, and the kept number of epochs is
    trained again on all of train. It was chosen over CLEAR's residual margin (the default before
    2026-11-25) on the held-out part of SciFact's and NFCorpus's training queries, where in-batch was
    better at every epoch (the figures: ``bench/README.md``). ξ = 0.3 and λ_train =
    0.019 (residual loss only) are CLEAR's margin rescaled for a normalizing encoder
    (``losses.suggest_scale`` on the BM25 score gaps of SciFact's training pairs), not the paper's ξ =
    1, λ_train = 0.1 for unnormalized dot products. ``max_seq_length`` applies to training inputs only:
    the exported encoder keeps the base's length. One positive per query per epoch
    (``positives_per_query``).
    """

    loss: str = "inbatch"
    negatives: str = "bm25"  # for residual / triplet / inbatch; quadruplet uses random n + model hn
    epochs: int = 5
    batch_size: int = 16
    lr: float = 1e-4
    warmup_ratio: float = 0.1
    margin: float = 0.1  # quadruplet and triplet (QuadrupletBERT Table 2: best 0.1–0.2)
    xi: float = 0.3  # CLEAR ξ
    lambda_train: float = 0.019  # CLEAR λ_train (0 = the constant-margin ablation)
    bm25_depth: int = 100  # N of "BM25's top N" for error-based negatives
    model_depth: int = 50  # k of the encoder's top k for hard negatives
    max_seq_length: int = 128  # training inputs only
    device: str = "auto"
    seed: int = 42
    stage1_max_epochs: int = 3
    stage1_tol: float = 0.02
    pretrain: str | None = None  # one of PRETRAIN_TASKS: a first stage on pseudo pairs (Baidu §4)
    pretrain_pairs: int = 2000
    max_steps_per_epoch: int | None = None  # shorter schedules for small machines and tests
    positives_per_query: int = 1  # labelled positives drawn per query each epoch; 0: every pair every epoch
    query_pooling: str = "mean"  # "poly": poly-attention over the query's tokens (``training.poly``)
    poly_codes: int = 16  # m, the number of context codes (Baidu §6: 16)
    holdout: float = 0.2  # share of the training queries held out to keep the best epoch (``training.holdout``); 0: off
    refit: bool = True  # with holdout: train again on all of train for the kept number of epochs
    teacher: str = "hybrid"  # marginmse: the system whose score margins the encoder learns (one of TEACHERS)
    family: str = "dense"  # "sparse": fine-tune the learned sparse model (``training.sparse``) instead

    def validate(self) -> None:
        """A ValueError in one line for a choice that is not offered, a number out of its range
        (``RANGES``: the bounds a shared server can afford, a NaN or an infinity included), or more work
        than one job may ask for: a step's inputs past ``MAX_BATCH_TOKENS``, or, with
        ``max_steps_per_epoch``, a run past ``MAX_EXAMPLES`` whatever the data (``check_examples`` says
        the same once the data's pairs are known: ``training.finetune.check_work``). Run on construction."""
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; choose from {', '.join(LOSSES)}")
        self._validate_family()
        if self.teacher not in TEACHERS:
            raise ValueError(f"unknown teacher {self.teacher!r}; choose from {', '.join(TEACHERS)}")
        if self.pretrain is not None and self.pretrain not in PRETRAIN_TASKS:
            raise ValueError(f"unknown pretraining task {self.pretrain!r}; choose from {', '.join(PRETRAIN_TASKS)}")
        if self.negatives not in SOURCES:
            raise ValueError(f"unknown negatives {self.negatives!r}; choose from {', '.join(SOURCES)}")
        if self.batch_size < 2 or self.epochs < 1 or self.lr <= 0:
            raise ValueError("batch size must be ≥ 2, epochs ≥ 1 and the learning rate > 0")
        if self.query_pooling not in QUERY_POOLINGS:
            raise ValueError(f"unknown query pooling {self.query_pooling!r}; choose from {', '.join(QUERY_POOLINGS)}")
        if self.poly_codes < 1:
            raise ValueError("poly-attention needs at least one context code")
        if not 0 <= self.holdout < 1:
            raise ValueError("the held-out share must be at least 0 and below 1")
        if self.positives_per_query < 0:
            raise ValueError("positives per query must be ≥ 0 (0: every labelled pair)")
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if value is not None and not (low <= value <= high):  # NaN fails both comparisons
                raise ValueError(f"{name} must be between {low:g} and {high:g}, not {value!r}")
        if self.device not in DEVICES and not re.fullmatch(r"cuda:\d{1,2}", self.device):
            raise ValueError(f"unknown device {self.device!r}; choose from {', '.join(DEVICES)}")
        if self.batch_size * self.max_seq_length > MAX_BATCH_TOKENS:
            raise ValueError(f"batch size × max sequence length is at most {MAX_BATCH_TOKENS:,} (e.g. 1024 × 256, "
                             f"512 × 512), not {self.batch_size} × {self.max_seq_length}")
        if self.max_steps_per_epoch:
            self.check_examples(self.max_steps_per_epoch * self.batch_size)

    def __post_init__(self) -> None:
        self.validate()  # no config out of range exists: the app, the API, the command line and a caller alike

    def epochs_asked(self) -> int:
        """The most epochs over the labelled pairs this config may train: ``epochs``, quadruplet's stage
        one (``stage1_max_epochs``) before them, and as many again where the held-out check's kept epoch
        is refit on all of train (the dense encoder's ``refit``; the learned sparse model never refits)."""
        epochs = self.epochs + (self.stage1_max_epochs if self.loss == "quadruplet" else 0)
        return epochs * (2 if self.holdout and self.refit and self.family == "dense" else 1)

    def examples_asked(self, per_epoch: int) -> int:
        """The most training examples this config may ask for when an epoch draws ``per_epoch`` labelled
        pairs: each epoch of ``epochs_asked`` at most ``max_steps_per_epoch`` batches, and the pseudo-pair
        first stage's one epoch of ``pretrain_pairs``."""
        pseudo = self._capped(self.pretrain_pairs) if self.pretrain else 0
        return self.epochs_asked() * self._capped(per_epoch) + pseudo

    def _capped(self, examples: int) -> int:
        """An epoch of ``examples`` pairs as trained: at most ``max_steps_per_epoch`` batches of them."""
        return min(examples, self.max_steps_per_epoch * self.batch_size) if self.max_steps_per_epoch else examples

    def check_examples(self, per_epoch: int) -> None:
        """A ValueError in one line when an epoch of ``per_epoch`` labelled pairs makes this config ask
        for more than ``MAX_EXAMPLES`` training examples (``examples_asked``)."""
        asked = self.examples_asked(per_epoch)
        if asked > MAX_EXAMPLES:
            pseudo = f" and {self._capped(self.pretrain_pairs):,} pseudo pairs" if self.pretrain else ""
            raise ValueError(f"this training asks for up to {asked:,} examples ({self.epochs_asked()} epochs of "
                             f"{self._capped(per_epoch):,} pairs{pseudo}), more than one job may "
                             f"({MAX_EXAMPLES:,}): ask for fewer epochs, positives per query or steps per epoch")

    def _validate_family(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"unknown model family {self.family!r}; choose from {', '.join(FAMILIES)}")
        if self.family == "sparse" and self.loss not in SPARSE_LOSSES:
            raise ValueError(f"the learned sparse model trains with {', '.join(SPARSE_LOSSES)}, not {self.loss!r}")
        if self.family == "sparse" and self.negatives not in SPARSE_NEGATIVES:
            raise ValueError(f"the learned sparse model's negatives are {' or '.join(SPARSE_NEGATIVES)}, not "
                             f"{self.negatives!r}")
        if self.family == "sparse" and (self.pretrain or self.query_pooling != "mean"):
            raise ValueError("pseudo-pair pretraining and poly-attention train the dense encoder only")

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> TrainConfig:
        """A validated config from user-facing values: a UI form's strings, floats and Nones, or
        ``vars(argparse.Namespace)``. A value of None or "" takes the default (for
        ``max_steps_per_epoch`` and ``pretrain``, None, "" and 0 mean off); integer fields accept
        integral floats (3.0 → 3). Unknown keys and values that do not convert raise ValueError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown training parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
        kwargs: dict[str, Any] = {}  # each value converted and checked by the dataclass as it is made
        for name, value in values.items():
            if name in OPTIONAL_FIELDS and value in (None, "", 0):
                kwargs[name] = None
            elif value is None or value == "":
                continue
            elif name in INT_FIELDS:
                kwargs[name] = _as_int(name, value)
                if name in OPTIONAL_FIELDS and kwargs[name] == 0:
                    kwargs[name] = None
            elif name in FLOAT_FIELDS:
                kwargs[name] = _as_float(name, value)
            else:
                kwargs[name] = value
        return cls(**kwargs)  # validated as it is made


def check_number(name: str, value: object) -> int | float:
    """One number of a config (``INT_FIELDS``, ``FLOAT_FIELDS``) as a form or a command line gives
    it: read by the one number grammar (``retrieval.numbers``; a whole number for an integer field),
    then held to its ``RANGES`` as ``TrainConfig.validate`` holds it (0 passes for
    ``OPTIONAL_FIELDS``: off). A ValueError in one line otherwise."""
    number: int | float = _as_int(name, value) if name in INT_FIELDS else _as_float(name, value)
    low, high = RANGES[name]
    if not (low <= number <= high or (name in OPTIONAL_FIELDS and number == 0)):
        raise ValueError(f"{name} must be between {low:g} and {high:g}, not {number!r}")
    return number


def _as_float(name: str, value: object) -> float:
    """A form's or a command line's number (``retrieval.numbers.number``: ASCII digits, finite)."""
    return numbers.number(value, name)


def _as_int(name: str, value: object) -> int:
    """A form's or a command line's whole number (``retrieval.numbers.whole``: 3 or 3.0, not 3.5)."""
    return numbers.whole(value, name)


@dataclass
class TrainingProgress:
    """One report of the loop: which stage, step of total, the step's loss, speed and time left."""

    stage: str
    step: int
    total: int
    loss: float
    examples_per_s: float
    eta_s: float
    epoch: int = 0


@dataclass
class TrainResult:
    model: Any  # the trained SentenceTransformer (or SparseEncoder)
    device: str
    seconds: float
    losses: list[tuple[str, int, float]] = field(default_factory=list)  # (stage, step, loss)
    epoch_losses: list[tuple[str, int, float]] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)


def encoding_progress(stage: str, on_progress, cancel, cancelled: str | None = None) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` for an encoding inside training: reported as a stage without a
    loss, and the job's cancel honoured between chunks (``cancelled``: what the cancel then says)."""
    def step(done: int, total: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled(cancelled or f"cancelled during {stage} ({done}/{total} documents encoded)")
        if on_progress:
            on_progress(TrainingProgress(stage, done, total, float("nan"), 0.0, 0.0))
    return step


def load_trainable(base_model: str | None, device: str, max_seq_length: int, query_pooling: str = "mean",
                   poly_codes: int = 16):
    """A fresh copy of the base encoder (never the cached instance the app searches with); with
    ``query_pooling="poly"`` its pooling replaced by poly-attention (``training.poly``)."""
    target = resolve_model(base_model)
    model = open_model(target, device)
    model.max_seq_length = min(max_seq_length, model.max_seq_length or max_seq_length)
    if query_pooling == "poly":
        model = with_poly_attention(model, poly_codes)
    return model


def _to_device(features: dict, device: str) -> dict:
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in features.items()}


def _embed(model, texts: list[str], between: Callable[[int, int], None] | None = None,
           task: str | None = None) -> np.ndarray:
    """The training model's embeddings of ``texts`` (as it outputs them, not re-normalized), encoded in
    chunks by ``Encoder.encode`` (``task="query"``: by the query route of an asymmetric model);
    ``between(done, total)`` runs after each (progress, cancel)."""
    try:
        encoder = Encoder(model, normalize=False)
        encoder = encoder.for_queries() if task == "query" else encoder
        return encoder.encode(texts, progress=between, chunk=512)
    finally:
        model.train()  # encoding switched the model to eval mode


class Trainer:
    def __init__(self, config: TrainConfig, dataset: Dataset, pairs: list[Pair], base_model: str | None = None,
                 bm25: BM25Index | None = None, on_progress: Callable[[TrainingProgress], None] | None = None,
                 cancel: threading.Event | None = None, checkpoint_dir: str | Path | None = None,
                 model=None, stage_prefix: str = "",
                 on_epoch: Callable[[object, str, int], None] | None = None, hook_state=None,
                 teacher: Teacher | None = None):
        """``model``: continue training this SentenceTransformer instead of loading ``base_model``.
        ``on_epoch(model, stage, epoch)`` runs after each epoch, before its checkpoint (e.g. a
        held-out evaluation for early stopping); it may encode with the model (the loop puts it
        back in train mode) but must not change its weights. ``hook_state``: an object with
        ``state_dict()`` and ``load_state_dict(state)`` (the hook's memory), saved with each
        checkpoint and given back on resume.

        ``checkpoint_dir``: where each finished epoch's state is kept (``training.checkpoint``); a
        checkpoint of the same run found there is resumed from.

        ``teacher(rows, queries)`` (``marginmse``, required there): the teacher's score of chosen
        documents, ``{query id: {document id: score}}`` for ``rows`` ``{query id: [document row, …]}``
        and ``queries`` ``{query id: text}`` (a system's ``exact_scores``)."""
        config.validate()
        if config.loss == "marginmse" and teacher is None:
            raise ValueError("Margin-MSE distillation needs a teacher's scores")
        self.teacher = teacher
        self._taught: dict[tuple[str, int], float] = {}  # the teacher's scores asked for so far
        if not pairs:
            raise ValueError("no training pairs: the training split has no relevant labels")
        self.cfg, self.dataset, self.pairs = config, dataset, pairs
        self.by_query: dict[str, list[Pair]] = {}
        for pair in pairs:
            self.by_query.setdefault(pair.query, []).append(pair)
        self.base_model = base_model
        self.on_progress, self.cancel = on_progress, cancel or threading.Event()
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.hook_state = hook_state
        self.resumed: checkpoint.Checkpoint | None = None
        self.key = ""
        self._started = time.perf_counter()  # set anew by train, with what it has done and mined
        self._done: list = []
        self._mined: dict = {}
        self.device = pick_device(config.device)
        self.rng = random.Random(config.seed)
        torch.manual_seed(config.seed)
        np.random.seed(config.seed)
        self._bm25 = bm25
        self.model, self.stage_prefix = model, stage_prefix
        self.on_epoch = on_epoch
        self.positives = known_positives(dataset)
        self.query_ids = {p.query: p.query_id for p in pairs}
        self.row_of = {d: i for i, d in enumerate(dataset.doc_ids)}
        self.texts = [d.full_text for d in dataset.docs.values()]

    @property
    def bm25(self) -> BM25Index:
        if self._bm25 is None:
            self._bm25 = BM25Index(self.dataset.doc_ids, self.texts)
        return self._bm25

    # ---- negatives ------------------------------------------------------------------------
    def pool(self, source: str, model=None) -> CandidatePool:
        if source == "random":
            return random_pool(self.dataset, self.query_ids, self.positives)
        if source == "bm25":
            return bm25_pool(self.bm25, self.query_ids, self.positives, self.cfg.bm25_depth)
        stage = self.stage_prefix + "mining hard negatives"
        n_docs, n_all = len(self.texts), len(self.texts) + len(self.query_ids)

        def between(offset: int):
            def step(done: int, total: int) -> None:  # cancellable between chunks of the corpus
                if self.cancel.is_set():
                    raise Cancelled(f"cancelled during {stage} ({offset + done}/{n_all} texts encoded)")
                self._report(stage, offset + done, n_all, float("nan"), 0.0, 0.0)
            return step

        self._report(stage, 0, n_all, float("nan"), 0.0, 0.0)
        docs = _embed(model, self.texts, between=between(0))
        queries = _embed(model, list(self.query_ids), between=between(n_docs), task="query")
        return model_pool(self.dataset.doc_ids, docs, queries, self.query_ids, self.positives, self.cfg.model_depth)

    def _sample(self, pool: CandidatePool, pair: Pair) -> int | None:
        own = {self.row_of[pair.doc_id]} if pair.doc_id in self.row_of else set()
        return pool.sample(pair.query, self.rng, own)

    def epoch_pairs(self) -> list[Pair]:
        """The pairs of one epoch: ``positives_per_query`` of each query's positives, drawn anew each
        epoch (seeded), or every pair when it is 0.

        Labelled splits can be very uneven: NFCorpus's train split has 110,575 pairs over 2,590
        queries, the largest 10% of queries holding 56% of them (one has 1,363 positives). Drawing
        pairs uniformly then trains mostly on a few broad queries, repeats a query within a batch,
        and pulls hundreds of documents onto one query vector: the encoder collapsed (dense nDCG@10
        0.317 → 0.03). Drawing per query, as DPR-style trainers do (one positive per question per
        epoch), keeps every query equally weighted.
        """
        k = self.cfg.positives_per_query
        if not k:
            return list(self.pairs)
        out = []
        for group in self.by_query.values():
            out.extend(group if len(group) <= k else self.rng.sample(group, k))
        return out

    def steps_per_epoch(self) -> int:
        k = self.cfg.positives_per_query
        n = sum(min(k, len(g)) for g in self.by_query.values()) if k else len(self.pairs)
        steps = math.ceil(n / self.cfg.batch_size)
        return min(steps, self.cfg.max_steps_per_epoch) if self.cfg.max_steps_per_epoch else steps

    def batches(self, examples: int) -> int:
        """The optimizer steps an epoch of ``examples`` examples takes: full batches, and a last one of at
        least two (a batch of one has no in-batch negative and is skipped), at most ``max_steps_per_epoch``.
        ``steps_per_epoch`` is the bound before negatives are drawn; the schedule and the progress's total
        count these, so that the learning rate's linear decay ends at the last step."""
        bs = self.cfg.batch_size
        steps = examples // bs + (1 if examples % bs >= 2 else 0)
        return min(steps, self.cfg.max_steps_per_epoch) if self.cfg.max_steps_per_epoch else steps

    def examples(self, pools: list[CandidatePool]) -> list[tuple[list[str], float]]:
        """One epoch of (texts, label) examples: [q, p, n₁, …] per pair of ``epoch_pairs``,
        label = BM25 gap (``residual``), the teacher's margin (``marginmse``), else 0."""
        out = []
        lex_cache: dict[str, np.ndarray] = {}
        drawn = [(pair, [self._sample(pool, pair) for pool in pools]) for pair in self.epoch_pairs()]
        if self.cfg.loss == "marginmse":
            drawn = [(pair, rows) for pair, rows in drawn if pair.doc_id in self.row_of]  # the teacher's documents
            self._teach(drawn)
        for pair, maybe_rows in drawn:
            rows = [r for r in maybe_rows if r is not None]
            if len(rows) < len(maybe_rows):
                continue
            label = 0.0
            if self.cfg.loss == "marginmse":
                qid, doc_id = self.query_ids[pair.query], pair.doc_id
                assert qid is not None and doc_id is not None  # labelled pairs of the teacher's documents only
                label = self._taught[qid, self.row_of[doc_id]] - self._taught[qid, rows[0]]
            if self.cfg.loss == "residual":
                scores = lex_cache.get(pair.query)
                if scores is None:
                    scores = lex_cache[pair.query] = self.bm25.scores(pair.query)
                pos = float(scores[self.row_of[pair.doc_id]]) if pair.doc_id is not None and \
                    pair.doc_id in self.row_of else float(self._lex_of_text(pair))
                label = pos - float(scores[rows[0]])
            out.append(([pair.query, pair.doc_text] + [self.texts[r] for r in rows], label))
        self.rng.shuffle(out)
        return out

    def _teach(self, drawn: list[tuple[Pair, list[int | None]]]) -> None:
        """Ask the teacher, once, for its scores of the positives and negatives drawn not asked for before."""
        rows: dict[str, set[int]] = {}
        for pair, negatives in drawn:
            qid, doc_id = self.query_ids[pair.query], pair.doc_id
            assert qid is not None and doc_id is not None  # labelled pairs of the teacher's documents only
            for row in (self.row_of[doc_id], *negatives):
                if row is not None and (qid, row) not in self._taught:
                    rows.setdefault(qid, set()).add(int(row))
        if not rows or self.teacher is None:
            return
        queries = {qid: text for text, qid in self.query_ids.items() if qid in rows}
        scores = self.teacher({q: sorted(r) for q, r in rows.items()}, queries)
        for qid, wanted in rows.items():
            for row in wanted:
                self._taught[qid, row] = float(scores[qid][self.dataset.doc_ids[row]])

    def _lex_of_text(self, pair: Pair) -> float:
        # a pseudo document (not in the corpus): score it with the corpus statistics
        return sum(c.score for c in self.bm25.explain_text(pair.query, pair.doc_text))

    # ---- loop -----------------------------------------------------------------------------
    def _report(self, stage, step, total, loss, rate, eta, epoch=0) -> None:
        if self.on_progress:
            self.on_progress(TrainingProgress(stage, step, total, loss, rate, eta, epoch))

    def _run_epochs(self, model, loss_fn, pools, stage: str, epochs: int, result: TrainResult,
                    until_converged: bool = False) -> None:
        cfg = self.cfg
        stage = self.stage_prefix + stage
        resumed = self.resumed
        if resumed is not None and stage in resumed.done_stages:
            return  # finished before the interruption: its weights are in the checkpoint's
        per_epoch = self.steps_per_epoch()
        step, first, previous, total = 0, 1, None, 0
        same_stage = resumed is not None and resumed.stage == stage
        if resumed is not None and same_stage:
            step, first, previous = resumed.step, resumed.epoch + 1, resumed.previous_loss
            self.rng.setstate(checkpoint._tuples(resumed.rng["trainer"]))
            checkpoint.set_random_states(resumed.rng["global"])
            if resumed.converged:
                first = epochs + 1
            total = resumed.total or per_epoch * epochs  # a checkpoint from before ``total`` was kept: as it was
        drawn = self.examples(pools) if first <= epochs else []  # the first epoch to train: its examples
        if not total:  # the steps an epoch takes, those pairs with no negative to draw left out
            total = self.batches(len(drawn)) * epochs
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        warmup = int(total * cfg.warmup_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda s: (s + 1) / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
        use_amp = self.device == "cuda"
        amp_dtype = torch.bfloat16 if use_amp and torch.cuda.is_bf16_supported() else torch.float16
        scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
        if resumed is not None and same_stage:
            optimizer.load_state_dict(resumed.optimizer)
            scheduler.load_state_dict(resumed.scheduler)
            if resumed.scaler and scaler.is_enabled():
                scaler.load_state_dict(resumed.scaler)
        started, seen, taken = time.perf_counter(), 0, 0  # examples and steps since this start
        model.train()
        for epoch in range(first, epochs + 1):
            batch_losses = []
            data = drawn if epoch == first else self.examples(pools)
            for start in range(0, min(len(data), per_epoch * cfg.batch_size), cfg.batch_size):
                if self.cancel.is_set():
                    raise Cancelled(f"cancelled during {stage}, step {step}/{total}")
                batch = data[start:start + cfg.batch_size]
                if len(batch) < 2:
                    continue
                columns = list(zip(*(texts for texts, _ in batch)))
                features = [_to_device(routed(model, model.preprocess(list(col)), "query" if i == 0 else "document"),
                                       self.device) for i, col in enumerate(columns)]
                labels = torch.tensor([lab for _, lab in batch], device=self.device)
                with torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=use_amp):
                    loss = loss_fn(features, labels)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                step, taken = step + 1, taken + 1
                seen += len(batch)
                value = float(loss.detach())
                batch_losses.append(value)
                result.losses.append((stage, step, value))
                elapsed = time.perf_counter() - started
                rate = seen / elapsed if elapsed else 0.0
                self._report(stage, step, total, value, rate, (total - step) * elapsed / taken, epoch)
            mean = float(np.mean(batch_losses)) if batch_losses else float("nan")
            result.epoch_losses.append((stage, epoch, mean))
            if self.on_epoch:
                self.on_epoch(model, stage, epoch)
                model.train()
            # stage one's convergence test: the epoch loss stopped falling
            converged = until_converged and previous is not None and previous - mean <= cfg.stage1_tol * abs(previous)
            previous = mean
            if self.checkpoint_dir:
                checkpoint.save(self.checkpoint_dir, checkpoint.Checkpoint(
                    self.key, stage, epoch, step, list(self._done), model.state_dict(), optimizer.state_dict(),
                    scheduler.state_dict(), scaler.state_dict() if scaler.is_enabled() else {},
                    {"trainer": self.rng.getstate(), "global": checkpoint.random_states()}, previous, converged,
                    list(result.losses), list(result.epoch_losses), self._elapsed(),
                    {name: (pool.source, {q: [int(r) for r in rows] for q, rows in pool.candidates.items()})
                     for name, pool in self._mined.items()},
                    self.hook_state.state_dict() if self.hook_state is not None else None, total))
            if converged:
                break
        self._done.append(stage)

    def _elapsed(self) -> float:
        before = self.resumed.seconds if self.resumed is not None else 0.0
        return before + time.perf_counter() - self._started

    def resume(self) -> checkpoint.Checkpoint | None:
        """The checkpoint of this very run in ``checkpoint_dir``, if there is one (read once; the
        hook's state is given back to ``hook_state`` then). ``train`` calls it; call it first to
        know whether the hook's own preparation (e.g. scoring the base encoder) is still needed."""
        if self.key or self.checkpoint_dir is None:
            return self.resumed
        start = f"model {Encoder(self.model).fingerprint}" if self.model is not None else \
            str(resolve_model(self.base_model))
        self.key = checkpoint.run_key(self.cfg, self.pairs, start, self.stage_prefix)
        self.resumed = checkpoint.load(self.checkpoint_dir, self.key)
        if self.resumed is not None and self.hook_state is not None and self.resumed.hook is not None:
            self.hook_state.load_state_dict(self.resumed.hook)
        return self.resumed

    def train(self) -> TrainResult:
        cfg = self.cfg
        self._started, self._done, self._mined = time.perf_counter(), [], {}
        resumed = self.resume()
        if self.model is None:
            model = load_trainable(self.base_model, self.device, cfg.max_seq_length, cfg.query_pooling,
                                   cfg.poly_codes)
        elif cfg.query_pooling == "poly":  # a model passed in (after pretraining)
            model = with_poly_attention(self.model, cfg.poly_codes)
        else:
            model = self.model
        result = TrainResult(model, self.device, 0.0)
        if resumed is not None:
            model.load_state_dict(resumed.model)
            result.losses = [tuple(row) for row in resumed.losses]
            result.epoch_losses = [tuple(row) for row in resumed.epoch_losses]
            result.stages.append(f"resumed after {resumed.stage} epoch {resumed.epoch} from {self.checkpoint_dir}")
        if cfg.loss == "quadruplet":
            easy = self.pool("random")
            result.stages.append("stage 1: loss_h = 0 (q, p, random n)")
            self._run_epochs(model, QuadrupletLoss(model, cfg.margin, stage=1), [easy], "stage 1",
                             cfg.stage1_max_epochs, result, until_converged=True)
            hard = self._mined["hard"] = self._saved_pool("hard") or self.pool("model", model)
            result.stages.append(f"stage 2: full loss (q, p, random n, hn from the stage-1 model's "
                                 f"top {cfg.model_depth})")
            self._run_epochs(model, QuadrupletLoss(model, cfg.margin, stage=2), [easy, hard], "stage 2",
                             cfg.epochs, result)
        else:
            if cfg.negatives == "model":  # mined with the starting weights: kept for a resume
                pool = self._mined["negatives"] = self._saved_pool("negatives") or self.pool("model", model)
            else:
                pool = self.pool(cfg.negatives, model)
            loss_fn = {"residual": lambda: ResidualMarginLoss(model, cfg.xi, cfg.lambda_train),
                       "triplet": lambda: triplet_loss(model, cfg.margin),
                       "inbatch": lambda: inbatch_loss(model),
                       "marginmse": lambda: margin_mse_loss(model)}[cfg.loss]()
            taught = f", the margins of {cfg.teacher}" if cfg.loss == "marginmse" else ""
            result.stages.append(f"{self.stage_prefix}{cfg.loss} with {cfg.negatives} negatives{taught}")
            self._run_epochs(model, loss_fn, [pool], cfg.loss, cfg.epochs, result)
        model.eval()
        result.seconds = self._elapsed()
        return result

    def _saved_pool(self, name: str) -> CandidatePool | None:
        """A pool mined before the interruption (``train`` records them in ``_mined``)."""
        if self.resumed is None or name not in self.resumed.pools:
            return None
        source, candidates = self.resumed.pools[name]
        return CandidatePool(self.dataset.doc_ids, candidates, source)

