"""Fine-tuning the learned sparse model (SPLADE) on the same pairs, negatives and held-out guard as
the dense encoder, through sentence-transformers' ``SparseEncoderTrainer``.

The loss is SPLADE's (Thibault Formal, Benjamin Piwowarski, Stéphane Clinchant, "SPLADE: Sparse
Lexical and Expansion Model for First Stage Ranking", SIGIR 2021, §3.2, eq. 5–7; "SPLADE v2", Formal,
Lassance, Piwowarski, Clinchant, arXiv:2109.10086, §2.2): a ranking loss plus the FLOPS
regularizer of each side's vectors,

    L = L_rank + λ_q · L_FLOPS(queries) + λ_d · L_FLOPS(documents),
    L_FLOPS = Σ_j ( (1/N) Σ_i w_j(d_i) )²                         (SPLADE eq. 6, over the batch)

which pushes the average weight of every vocabulary term towards zero, so the vectors stay sparse
(Biswajit Paria, Chih-Kuan Yeh, Ian E.H. Yen, Ning Xu, Pradeep Ravikumar, Barnabás Póczos,
"Minimizing FLOPs to Learn Efficient Sparse Representations", ICLR 2020). L_rank is the in-batch
softmax with one BM25 hard negative per query (SPLADE eq. 5: the positive against the batch's other
documents and the query's BM25 negative), sentence-transformers' ``SpladeLoss`` over
``SparseMultipleNegativesRankingLoss``; λ_q = 5·10⁻⁵ and λ_d = 3·10⁻⁵ are sentence-transformers'
documented values for fine-tuning, where the regularizers' weights rise from 0 over the first third
of the run (its ``SpladeRegularizerWeightSchedulerCallback``: SPLADE §3.2's quadratic warm-up).

The held-out guard is the dense one's (``training.holdout``): a seeded share of the training queries
(at most ``held_out_cap``: the dense guard's 500 where the whole corpus is ranked, whose cost does
not grow with the queries, else ``MAX_SPARSE_HELD_OUT``) is kept out of training; before training
and after every epoch, the model being trained ranks them, and the best epoch is exported only where
it beats the base on them significantly (paired permutation test on nDCG@10, p < 0.05), else the
base itself. The test is needed: on SciFact an epoch 0.023 better than the base on 100 held-out
queries, kept as the best without one, was 0.052 worse on the test split. The check ranks what the
user's search ranks — the whole corpus — wherever the corpus has at most ``CHECK_DOCS`` documents
(all of them are encoded again after every epoch); on a larger corpus it re-ranks each query's
candidates, BM25's and the base model's top ``check_depth`` (as many as fit in ``CHECK_DOCS``). The
base's vectors come from the store where the workspace keeps them (the same fingerprint), so the
base is not encoded twice; the kept epoch's go into it (``keep_vectors``), so the evaluation does not
encode them again. Re-ranking a few candidates misleads: on NFCorpus, 500 held-out queries
re-ranking their top 10 + 10 found epoch 1 better than the base by +0.014 (p 0.0002), yet ranking
the whole corpus the same queries were no better (see bench/README), and on the test split that
model was 0.005 below the base (not separable) and its three-way fusion 0.017 below — a changed
expansion brings up documents from outside the candidates.
There is no refit (the dense recipe's ``refit``): the exported model saw the training share.

Long runs resume: every epoch leaves a checkpoint (the trainer's own) and the held-out scores so far,
so the same run started again over the same output folder goes on from its last finished epoch; the
folder records which run it holds (``training.checkpoint.run_key``), and another run over it starts
afresh.
"""
from __future__ import annotations

import copy
import json
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from retrieval import row_bounds
from retrieval.data.dataset import Dataset, Qrels
from retrieval.evaluation.measures import evaluate_run, paired_permutation_p
from retrieval.evaluation.metrics import SIGNIFICANCE_LEVEL, p_text
from retrieval.files.read_back import read_back_bytes
from retrieval.index.bm25_index import BM25Index
from retrieval.index.searchable import SparseVector
from retrieval.index.splade import SparseIndex, SparseModel, embed_sparse_corpus, load_sparse_model
from retrieval.row_bounds import json_id_bytes
from retrieval.store import Store, text_hash
from training.checkpoint import run_key
from training.holdout import MAX_HELD_OUT, MIN_LABELLED, split_holdout
from training.losses import SPARSE_LOSSES
from training.negatives import bm25_pool, random_pool
from training.pairs import Pair, labelled_pairs
from training.trainer import RANGES, Cancelled, TrainConfig, TrainingProgress, TrainResult, encoding_progress

QUERY_REGULARIZER, DOCUMENT_REGULARIZER = 5e-5, 3e-5  # λ_q, λ_d of the FLOPS terms
CHECK_DOCS = 10_000  # the most documents the held-out check encodes after every epoch (the whole corpus up to it)
MIN_CHECK_DEPTH, MAX_CHECK_DEPTH = 10, 100  # a larger corpus: BM25's and the base's top documents per query
RANKED = 100  # how deep the check's whole-corpus ranking goes (nDCG@10 reads its top 10)
PRIMARY = "ndcg@10"
BaseTop = Callable[[dict[str, str], int], dict[str, list[int]]]  # (queries, k) -> {query id: corpus rows}
SELECTION = "selection.json"  # the held-out scores so far, beside the trainer's checkpoints
BEST = "best"  # the best epoch's model so far, beside them
TRAINER = "trainer"  # the trainer's own checkpoints
RUN_KEY = "run.key"  # which run the folder's checkpoints belong to (``claim``)
VERIFIED = 4  # documents the exported model encodes again before the check's vectors of it are kept
MAX_SPARSE_HELD_OUT = 100  # held-out queries at most where they re-rank candidates: fewer, deeper candidates


@dataclass
class SparseSelection:
    """The held-out check's scores (nDCG@10 by epoch, 0 = the base; each query's, and each epoch's
    paired permutation p against the base) and the epoch kept: the best epoch only where it beats
    the base significantly (p < ``SIGNIFICANCE_LEVEL``), else the base."""

    queries: int
    scores: list = field(default_factory=list)  # [[epoch, nDCG@10], …]
    chosen: int = 0
    per_query: dict = field(default_factory=dict)  # {epoch (str): {query id: nDCG@10}}
    p: dict = field(default_factory=dict)  # {epoch (str): p against the base}
    scope: str = ""  # what the queries were ranked over (``SparseHeldOut.scope``)

    def by_epoch(self) -> dict[int, float]:
        return {int(e): s for e, s in self.scores}

    def best(self) -> float:
        return self.by_epoch().get(self.chosen, float("nan"))

    def add(self, epoch: int, per_query: dict[str, float]) -> None:
        """Record an epoch's per-query scores (epoch 0: the base) and choose again."""
        self.per_query[str(epoch)] = per_query
        self.scores.append([epoch, float(np.mean(list(per_query.values()))) if per_query else float("nan")])
        if epoch:
            base = self.per_query["0"]
            diff = np.array([per_query[q] - base[q] for q in base if q in per_query])
            self.p[str(epoch)] = 1.0 if len(diff) < 2 or np.allclose(diff, 0) else paired_permutation_p(diff)
        base_score = self.by_epoch()[0]
        better = [(s, -e) for e, s in self.by_epoch().items()
                  if e and s > base_score and self.p.get(str(e), 1.0) < SIGNIFICANCE_LEVEL]
        self.chosen = -max(better)[1] if better else 0

    def describe(self) -> str:
        """The verdict line: what was kept and why."""
        base = self.by_epoch().get(0)
        shown = ", ".join(f"epoch {e} {s:.4f} ({p_text(self.p.get(str(e), 1.0))})"
                          for e, s in self.by_epoch().items() if e)
        on = f"held-out selection on {self.queries} queries" + (f", {self.scope}" if self.scope else "")
        if self.chosen == 0:
            return (f"{on}: no epoch beat the base model significantly "
                    f"(nDCG@10 {base:.4f}; {shown}): the base is kept")
        return (f"{on}: epoch {self.chosen} kept (nDCG@10 {self.best():.4f} "
                f"against the base's {base:.4f}; {shown})")


@dataclass
class KeptVectors:
    """The kept epoch's vectors of the documents the held-out check ranked (``SparseHeldOut.texts``)."""

    texts: list[str]
    vectors: list[SparseVector]


class SparseHeldOut:
    """Scores a sparse model on held-out queries: one encoding of the documents the check ranks per
    epoch — the whole corpus (``candidates`` None), or the union of each query's fixed candidates,
    which each query's ranking is then limited to."""

    def __init__(self, dataset: Dataset, held: Qrels, candidates: dict[str, list[int]] | None = None):
        self.dataset, self.held = dataset, held
        self.queries = {q: dataset.queries[q] for q in held if q in dataset.queries}
        self.whole = candidates is None
        self.rows = (list(range(len(dataset.doc_ids))) if candidates is None
                     else sorted({r for rows in candidates.values() for r in rows}))
        self.candidates = None if candidates is None else {q: candidates.get(q, []) for q in self.queries}
        self.texts = [dataset.docs[dataset.doc_ids[r]].full_text for r in self.rows]  # the documents ranked

    @property
    def scope(self) -> str:
        """What each query is ranked over (plain data for the verdict line and the run key)."""
        if self.candidates is None:
            return f"ranking the whole corpus ({len(self.rows):,} documents)"
        return f"re-ranking {len(self.rows):,} candidates (BM25's and the base model's top documents)"

    def score(self, model, between: Callable[[int, int], None] | None = None,
              store: Store | None = None) -> dict[str, float]:
        """Each held-out query's nDCG@10 under ``model`` (a ``SparseEncoder``); ``store``: where its
        document vectors are read from (under its fingerprint) and kept — the base's, which the
        workspace's index of the corpus keeps there too; None for an epoch's, which are not kept."""
        return self.scored(model, between, store)[0]

    def scored(self, model, between: Callable[[int, int], None] | None = None,
               store: Store | None = None) -> tuple[dict[str, float], list[SparseVector]]:
        """``score``'s scores, and the vectors of the documents ranked (``texts``' order)."""
        wrapped = SparseModel(model, "training")
        ids = self.dataset.doc_ids
        try:
            vectors = embed_sparse_corpus(wrapped, self.texts, store, between).vectors
            index = SparseIndex([ids[r] for r in self.rows], vectors, wrapped.vocab_size)
            queries = wrapped.encode(list(self.queries.values()), query=True)
        finally:
            model.train()
        return self._ranked(index, queries), vectors

    def _ranked(self, index: SparseIndex, queries: list[SparseVector]) -> dict[str, float]:
        ids = self.dataset.doc_ids
        at = {r: i for i, r in enumerate(self.rows)}
        run = {}
        for q, vec in zip(self.queries, queries):
            if self.candidates is None:
                local, scores = index.top(vec, RANKED)
                hits = [(ids[self.rows[i]], float(s)) for i, s in zip(local, scores)]
            else:
                mine = self.candidates[q]
                scores = index.scores(vec, [at[r] for r in mine]) if mine else np.zeros(0)
                hits = sorted(((ids[r], float(s)) for r, s in zip(mine, scores)), key=lambda h: -h[1])
            run[q] = hits
        return dict(evaluate_run(run, self.held, metrics=(PRIMARY,)).per_query.get(PRIMARY, {}))


def held_out_cap(documents: int, budget: int = CHECK_DOCS) -> int:
    """How many training queries the check holds out at most: where it ranks the whole corpus its cost
    is one encoding of the corpus an epoch however many queries it ranks, so as many as the dense
    guard holds out (``training.holdout.MAX_HELD_OUT``: the more, the smaller a difference it can
    separate from noise); where it re-ranks candidates, ``MAX_SPARSE_HELD_OUT``, so that each query's
    candidates stay deep (``check_depth``)."""
    return MAX_HELD_OUT if documents <= budget else MAX_SPARSE_HELD_OUT


def check_depth(queries: int, budget: int = CHECK_DOCS) -> int:
    """How many of BM25's and of the base model's top documents each of ``queries`` held-out queries
    re-ranks on a corpus larger than ``budget``: as many as keep the documents encoded within it."""
    return max(MIN_CHECK_DEPTH, min(MAX_CHECK_DEPTH, budget // max(1, 2 * queries)))


def held_out_check(dataset: Dataset, held: Qrels, bm25: BM25Index, base_top: BaseTop,
                   budget: int = CHECK_DOCS) -> SparseHeldOut:
    """The held-out check: the whole corpus where it has at most ``budget`` documents, else each
    query's candidates, BM25's top ``check_depth`` and the base model's (``base_top(queries, depth)``:
    corpus rows, best first, from the base's index of the corpus)."""
    if len(dataset.doc_ids) <= budget:
        return SparseHeldOut(dataset, held)
    queries = {q: dataset.queries[q] for q in held if q in dataset.queries}
    depth = check_depth(len(queries), budget)
    run = bm25.search(queries, k=depth)
    row_of = {d: i for i, d in enumerate(dataset.doc_ids)}
    by_base = base_top(queries, depth)
    return SparseHeldOut(dataset, held, {q: list(dict.fromkeys([*(row_of[d] for d, _ in run.get(q, []) if d in row_of),
                                                                 *by_base.get(q, [])])) for q in queries})


def training_rows(dataset: Dataset, pairs: list[Pair], bm25: BM25Index, cfg: TrainConfig) -> dict[str, list[str]]:
    """(query, positive, negative) columns: ``cfg.positives_per_query`` positives per query (0: every
    pair), each with one non-relevant document — of BM25's top ``cfg.bm25_depth`` (``negatives``
    "bm25"; a random one where BM25 found none) or of the whole corpus ("random") — seeded; at most
    ``max_steps_per_epoch`` batches of them."""
    rng = random.Random(cfg.seed)
    by_query: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_query.setdefault(pair.query, []).append(pair)
    chosen = [p for ps in by_query.values()
              for p in (rng.sample(ps, min(len(ps), cfg.positives_per_query)) if cfg.positives_per_query else ps)]
    rng.shuffle(chosen)
    if cfg.max_steps_per_epoch:
        chosen = chosen[:cfg.max_steps_per_epoch * cfg.batch_size]
    positives: dict[str, set[str]] = {}
    for p in pairs:
        positives.setdefault(p.query_id or "", set()).add(p.doc_id or "")
    query_ids = {p.query: p.query_id for p in chosen}
    pool = bm25_pool(bm25, query_ids, positives, cfg.bm25_depth) if cfg.negatives == "bm25" else None
    anywhere = random_pool(dataset, query_ids, positives)
    ids = dataset.doc_ids
    columns: dict[str, list[str]] = {"query": [], "positive": [], "negative": []}
    for p in chosen:
        row = pool.sample(p.query, rng) if pool is not None else None
        if row is None:
            row = anywhere.sample(p.query, rng)
        if row is None:  # every document is one of its positives: no negative to give it
            continue
        columns["query"].append(p.query)
        columns["positive"].append(p.doc_text)
        columns["negative"].append(dataset.docs[ids[row]].full_text)
    return columns


def claim(checkpoints: Path, key: str) -> None:
    """Make ``checkpoints`` the folder of the run ``key`` (``training.checkpoint.run_key``): what another
    run left there (another configuration, other pairs or held-out queries, another base model) is
    removed, so that only the same run resumes from it."""
    checkpoints.mkdir(parents=True, exist_ok=True)
    mark = checkpoints / RUN_KEY
    try:  # a regular file of the folder, of a key's size (``read_back``): a FIFO or a link in its place is not read
        if read_back_bytes(mark, checkpoints, 1024).decode("utf-8", errors="replace").strip() == key:
            return
    except OSError:  # none, or not a file to read back
        pass
    clear(checkpoints)
    mark.unlink(missing_ok=True)  # whatever was in its place: written anew, not through it
    mark.write_text(key, encoding="utf-8")


def clear(checkpoints: Path) -> None:
    """Remove a run's checkpoints, held-out scores and best model from ``checkpoints``: it starts afresh."""
    for name in (TRAINER, SELECTION, BEST):
        path = checkpoints / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):  # a file, or a link, a FIFO … in its place: the entry itself goes
            path.unlink()


def selection_bytes(queries: Collection[str]) -> int:
    """The most bytes ``SparseSelection`` of ``queries`` is written in: each epoch's (as many as a
    configuration may ask, ``trainer.RANGES``, and the base's) score, p and nDCG@10 per query, an id
    as JSON writes its longest."""
    per_epoch = len(queries) * (json_id_bytes(queries) + 2 + row_bounds.SCORE) + 4 * row_bounds.SCORE + 64
    return (int(RANGES["epochs"][1]) + 1) * per_epoch + 64 * 1024


def read_selection(path: Path, queries: Collection[str], scope: str = "") -> SparseSelection | None:
    """The held-out scores a resumed run had finished, rebuilt from what is read back: only each
    epoch's nDCG@10 per query is read (numbers within [0, 1], for ``queries`` alone, the base's epoch 0
    among them); the means, p values and the epoch kept are computed again (``scope``: the check's,
    ``SparseHeldOut.scope``). None where the file is missing or damaged, or where the epoch it keeps
    has no saved model beside it: the run then starts afresh. The file is read back only as a regular
    file of its folder within the size those scores take (``selection_bytes``; ``read_back``)."""
    try:
        saved = json.loads(read_back_bytes(path, path.parent, selection_bytes(queries)).decode("utf-8"))
        per_query = saved["per_query"]
        if not isinstance(per_query, dict):
            return None
        epochs = sorted((int(e), e) for e in per_query)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, RecursionError):
        return None
    if not epochs or epochs[0][0] != 0 or any(str(e) != key for e, key in epochs):
        return None
    known = set(queries)
    rebuilt = SparseSelection(len(known), scope=scope)
    for epoch, key in epochs:
        scores = per_query[key]
        if (not isinstance(scores, dict) or not scores or not set(scores) <= known
                or not all(type(v) in (int, float) and 0.0 <= v <= 1.0 for v in scores.values())):
            return None
        rebuilt.add(epoch, {q: float(v) for q, v in scores.items()})
    if rebuilt.chosen and not (path.parent / BEST).is_dir():
        return None
    return rebuilt


def fresh_copy(base: str | None, device: str) -> SparseModel:
    """A copy of the base sparse model to train (never the cached instance the app searches with)."""
    loaded = load_sparse_model(base, device)
    return SparseModel(copy.deepcopy(loaded.model), loaded.name)


class _Report:
    """The trainer's callback: progress and losses out, the job's cancel in, the held-out check
    after every epoch (its best model saved beside the checkpoints)."""

    def __init__(self, stage: str, on_progress, cancel: threading.Event | None, batch: int,
                 on_epoch: Callable[[object, int], None] | None):
        from transformers import TrainerCallback

        self.stage, self.on_progress, self.cancel = stage, on_progress, cancel
        self.batch, self.on_epoch = batch, on_epoch
        self.losses: list[tuple[str, int, float]] = []
        self.cancelled = False
        self.started = time.perf_counter()
        report = self

        class Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                # a checkpoint saved as a cancel stopped the run keeps its stop flag: resumed, it would stop at once
                control.should_training_stop = control.should_epoch_stop = False
                return control

            def on_step_end(self, args, state, control, **kwargs):
                if report.cancel is not None and report.cancel.is_set():
                    report.cancelled, control.should_training_stop = True, True
                return control

            def on_log(self, args, state, control, logs=None, **kwargs):
                loss = (logs or {}).get("loss")
                if loss is None:
                    return control
                report.losses.append((report.stage, int(state.global_step), float(loss)))
                if report.on_progress:
                    spent = time.perf_counter() - report.started
                    rate = state.global_step * report.batch / spent if spent > 0 else 0.0
                    left = (state.max_steps - state.global_step) * report.batch / rate if rate > 0 else 0.0
                    report.on_progress(TrainingProgress(report.stage, int(state.global_step), int(state.max_steps),
                                                        float(loss), rate, left, int(round(state.epoch or 0))))
                return control

            def on_epoch_end(self, args, state, control, model=None, **kwargs):
                if report.cancelled:  # no checkpoint of an epoch the held-out check has not scored: it is trained again
                    control.should_save = False
                elif report.on_epoch is not None:
                    report.on_epoch(model, int(round(state.epoch or 0)))
                return control

        self.callback = Callback()


def _batch_samplers():
    """sentence-transformers' ``BatchSamplers``, from where its release keeps it."""
    try:  # sentence-transformers ≥ 6
        from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    except ImportError:  # pragma: no cover - older releases
        from sentence_transformers.training_args import BatchSamplers  # type: ignore[import-not-found]
    return BatchSamplers


def train_sparse(dataset: Dataset, train_split: str, cfg: TrainConfig, bm25: BM25Index, base: str | None,
                 base_top: BaseTop, checkpoints: Path, on_progress=None, cancel: threading.Event | None = None,
                 store: Store | None = None) -> tuple[TrainResult, SparseSelection | None, str, KeptVectors | None]:
    """Train a copy of the ``base`` sparse model on ``train_split``'s pairs with the held-out check
    (``cfg.holdout``; ``base_top``: the base model's top documents, as ``held_out_check`` takes them;
    ``store``: where the base's document vectors are read from); (what was trained: its model the one
    to export, the selection or None, the verdict line, the kept epoch's vectors of the documents the
    check ranked where they were computed in this run, else None: ``keep_vectors``)."""
    from datasets import Dataset as Rows
    from sentence_transformers.sparse_encoder import (
        SparseEncoderTrainer,
        SparseEncoderTrainingArguments,
        losses,
    )
    BatchSamplers = _batch_samplers()
    from transformers.trainer_callback import PrinterCallback
    from transformers.trainer_utils import get_last_checkpoint

    from retrieval.index.encoder import pick_device

    if cfg.loss not in SPARSE_LOSSES:
        raise ValueError(f"a learned sparse model trains with {', '.join(SPARSE_LOSSES)}, not {cfg.loss!r}")
    device = pick_device(cfg.device)
    trained = fresh_copy(base, device)
    model, full_length = trained.model, trained.max_seq_length
    labelled = len(dataset.qrels.get(train_split, {}))
    check = bool(cfg.holdout) and labelled >= MIN_LABELLED
    train_data, selection, held_out = dataset, None, None
    held: dict[str, dict[str, int]] = {}
    if check:
        train_data, held = split_holdout(dataset, train_split, cfg.holdout, cfg.seed,
                                         held_out_cap(len(dataset.doc_ids)))
    pairs = labelled_pairs(train_data, train_split)
    if not pairs:
        raise ValueError("no training pairs: the training split has no relevant labels")
    if check:
        held_out = held_out_check(dataset, held, bm25, base_top)
    scope = held_out.scope if held_out is not None else ""
    ranked = "" if held_out is None else f"{'whole' if held_out.whole else 'candidates'}:{len(held_out.rows)}"
    claim(checkpoints, run_key(cfg, pairs, f"sparse|{base}|held:{','.join(sorted(held))}|check:{ranked}"))
    kept = checkpoints / SELECTION
    if held_out is not None:
        selection = read_selection(kept, held_out.queries, scope)  # a resumed run: the scores of the epochs it finished
        if selection is None:
            clear(checkpoints)  # none, or not to be trusted: the run starts afresh
            selection = SparseSelection(len(held_out.queries), scope=scope)
            base_progress = encoding_progress("held-out check — base model", on_progress, cancel)
            selection.add(0, held_out.score(model, base_progress, store))
            kept.write_text(json.dumps(asdict(selection)))
    columns = training_rows(dataset, pairs, bm25, cfg)
    model.max_seq_length = min(cfg.max_seq_length, full_length)  # training inputs only

    kept_vectors: list[KeptVectors | None] = [None]  # the chosen epoch's, while it was scored in this run

    def on_epoch(m, epoch: int) -> None:
        if held_out is None or selection is None:
            return
        m.max_seq_length = full_length  # scored, and saved, reading as far as the base
        try:
            epoch_progress = encoding_progress(f"held-out check — epoch {epoch}", on_progress, cancel)
            scores, vectors = held_out.scored(m, epoch_progress)
            selection.add(epoch, scores)
            if selection.chosen == epoch:
                m.save(str(checkpoints / BEST))
                kept_vectors[0] = KeptVectors(held_out.texts, vectors)
        finally:
            m.max_seq_length = min(cfg.max_seq_length, full_length)
        kept.write_text(json.dumps(asdict(selection)))

    stage = f"sparse: in-batch + {'BM25' if cfg.negatives == 'bm25' else 'random'} negative (SPLADE)"
    steps = -(-len(columns["query"]) // cfg.batch_size)  # a (rounded up) epoch's batches
    report = _Report(stage, on_progress, cancel, cfg.batch_size, on_epoch)
    use_cuda = device.startswith("cuda")
    import torch

    bf16 = use_cuda and torch.cuda.is_bf16_supported()
    args = SparseEncoderTrainingArguments(
        output_dir=str(checkpoints / TRAINER), num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size, learning_rate=cfg.lr,
        warmup_steps=int(cfg.warmup_ratio * cfg.epochs * steps),
        seed=cfg.seed, data_seed=cfg.seed, batch_sampler=BatchSamplers.NO_DUPLICATES, logging_steps=1,
        save_strategy="epoch", save_total_limit=1, report_to="none", disable_tqdm=True, use_cpu=device == "cpu",
        bf16=bf16, fp16=use_cuda and not bf16, dataloader_num_workers=0, max_grad_norm=1.0)
    loss = losses.SpladeLoss(model, loss=losses.SparseMultipleNegativesRankingLoss(model),
                             query_regularizer_weight=QUERY_REGULARIZER,
                             document_regularizer_weight=DOCUMENT_REGULARIZER)
    trainer = SparseEncoderTrainer(model=model, args=args, train_dataset=Rows.from_dict(columns), loss=loss,
                                   callbacks=[report.callback])
    trainer.remove_callback(PrinterCallback)  # progress goes to ``on_progress``, not printed
    last = get_last_checkpoint(str(checkpoints / TRAINER)) if (checkpoints / TRAINER).is_dir() else None
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=last)
    if report.cancelled:
        raise Cancelled(f"cancelled during {stage} (the last finished epoch's checkpoint is kept)")
    seconds = time.perf_counter() - started
    model.max_seq_length = full_length
    stages = [f"{stage}: {cfg.epochs} epoch{'s' if cfg.epochs != 1 else ''}, {len(columns['query'])} triples"
              + (" (resumed)" if last else "")]
    verdict = ""
    if selection is not None:
        verdict = selection.describe() + ("; not refit (a learned sparse model keeps the kept epoch's weights)"
                                          if cfg.refit and selection.chosen else "")
        if selection.chosen == 0:
            model = fresh_copy(base, device).model
        elif selection.chosen != cfg.epochs:
            model = load_sparse_model(str(checkpoints / BEST), device, cached=False).model
        model.max_seq_length = full_length  # the exported model reads as far as the base, whichever epoch it is
        stages.append(verdict)
    elif cfg.holdout:
        verdict = f"no held-out check: {labelled} labelled training query, none to hold out"
        stages.append(verdict)
    epoch_losses = _epoch_losses(report.losses, steps, stage)
    vectors = kept_vectors[0] if selection is not None and selection.chosen else None
    return TrainResult(model, device, seconds, report.losses, epoch_losses, stages), selection, verdict, vectors


def keep_vectors(store: Store | None, model: SparseModel, kept: KeptVectors | None) -> int:
    """Keep the kept epoch's document vectors, computed by the held-out check, in ``store`` under the
    exported ``model``'s fingerprint, so that evaluating it does not encode those documents again — only
    where ``model`` encodes ``VERIFIED`` of them (seeded) to the same terms and weights: else nothing is
    kept, and the evaluation encodes them. Returns how many were kept."""
    if store is None or kept is None or not kept.texts:
        return 0
    sample = random.Random(0).sample(range(len(kept.texts)), min(VERIFIED, len(kept.texts)))
    again = model.encode([kept.texts[i] for i in sample])
    for i, (terms, weights) in zip(sample, again):
        saved_terms, saved_weights = kept.vectors[i]
        if not (np.array_equal(terms, saved_terms) and np.allclose(weights, saved_weights, rtol=1e-4, atol=1e-5)):
            return 0
    store.put_sparse(model.fingerprint, {text_hash(t): v for t, v in zip(kept.texts, kept.vectors)})
    return len(kept.texts)


def _epoch_losses(losses: list[tuple[str, int, float]], steps: int, stage: str) -> list[tuple[str, int, float]]:
    out: dict[int, list[float]] = {}
    for _, step, loss in losses:
        out.setdefault((step - 1) // max(steps, 1) + 1, []).append(loss)
    return [(stage, epoch, sum(v) / len(v)) for epoch, v in sorted(out.items())]


def export(trained: TrainResult, out_dir: Path) -> None:
    """Save the trained sparse model as a sentence-transformers ``SparseEncoder`` folder."""
    trained.model.save(str(out_dir))


def register(store: Store | None, model: SparseModel, out_dir: Path, base: str, dataset: Dataset) -> None:
    """Record the fine-tuned sparse model in the store (its vectors are kept under its fingerprint)."""
    if store is not None:
        store.register_model(model.fingerprint, str(out_dir), model.vocab_size,
                             {"base": base, "family": "sparse", "dataset": dataset.content_hash})
