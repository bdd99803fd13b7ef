"""Held-out epoch selection: keep the epoch that ranks best on labelled queries kept out of training,
and the base encoder when no epoch beats it.

A recipe measured on one corpus need not transfer (NFCorpus's weak, indirect labels pull the
SciFact recipe's encoder below the base), so with ``TrainConfig.holdout`` a seeded share of the
training queries is set aside. Before training and after every epoch of the labelled stage, each
held-out query's candidates — BM25's top ``depth`` and the base encoder's top ``depth`` (their
union is fixed once, so it costs one encoding of those documents per epoch, not of the corpus) —
are scored by the model being trained, and ranked both by the cosine alone (dense) and by
CLEAR's λ·s_lex + s_emb at the best λ of the grid (hybrid; ``retrieval.systems.fusion.fit_lambda``; s_lex
divided by the query's largest possible BM25 score, as the app's hybrid does for cosine scores).
The epoch with the best held-out hybrid nDCG@10 is kept (the earlier one on a tie); epoch 0 is
the base encoder itself. Unlike the learned sparse model's guard (``training.sparse``), a best epoch
need not beat the base significantly — its p is said beside it: in-domain fine-tuning of the dense
encoder mostly helps, and on the demo (8 held-out queries) a best epoch at p 0.375 was the better model
on test (dense +0.040 [−0.005, 0.085], hybrid +0.015 [−0.002, 0.033]), which requiring the test would
have thrown away. The kept epoch's λ, chosen there as the app chooses λ with labels (the
grid's best only where it beats the label-free λ significantly), goes with the exported encoder
(``retrieval.training_record.TrainedOn``): a λ tuned on the queries the encoder trained on would favour it.
Re-ranking a fixed candidate set reads the fine-tuned dense model only where BM25 or the base
looked: enough to choose among epochs, not a measurement of dense recall. With
``TrainConfig.refit`` the kept number of epochs is then trained again on all of train
(``training.finetune``).

Like for like, and nothing encoded twice: every model the check scores, the base and each epoch, reads
the same texts at the same precision and at the same length, the base encoder's ``max_seq_length``
(``HeldOutSelector(max_seq_length=…)``), which is the length the exported encoder reads at
(``finetune.run_training`` gives it the base's). ``TrainConfig.max_seq_length`` (64, say) is an economy of
the training steps alone: an epoch read at 64 tokens and the base at 256 would compare two different
readings, and the epoch kept would be chosen for a length it is never used at. Read at the base's length,
the base's vectors are the very ones its dense index and the store hold (the encoder's fingerprint covers
its weights, length, normalization and precision), so the base is scored from them (``start_from``) and
only the epochs, whose weights are new, are encoded.
"""
from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from retrieval.data.dataset import Dataset, Qrels
from retrieval.evaluation.measures import Evaluation, compare, evaluate_run
from retrieval.evaluation.metrics import SIGNIFICANCE_LEVEL
from retrieval.index.bm25_index import BM25Index
from retrieval.index.encoder import Encoder
from retrieval.systems.clear_lambda import LABEL_FREE_LAMBDA, LAMBDA_GRID, QUERY_MAX_GRID
from retrieval.systems.fusion import Candidates, fit_lambda, rank_candidates

PRIMARY = "ndcg@10"


MAX_HELD_OUT = 500  # held-out queries at most: each costs an encoding of up to 2 × depth candidates per epoch
MIN_LABELLED = 2  # labelled queries a held-out split needs: one held out, one left to train on


def split_holdout(dataset: Dataset, split: str, fraction: float, seed: int = 42,
                  max_queries: int = MAX_HELD_OUT) -> tuple[Dataset, Qrels]:
    """(``dataset`` with ``split`` cut to the training share, the held-out queries' labels): a
    seeded ``fraction`` of ``split``'s queries (at least one, at most ``max_queries``, and one left
    to train on). The cap bounds the check's cost on large label sets, where every held-out query's
    candidates are encoded again after each epoch (NFCorpus's 2,590 train queries set 500 aside)."""
    if not 0 < fraction < 1:
        raise ValueError("the held-out fraction must be between 0 and 1")
    qids = sorted(dataset.qrels[split])
    if len(qids) < MIN_LABELLED:
        raise ValueError(f"a held-out selection needs at least {MIN_LABELLED} labelled queries in '{split}', "
                         f"not {len(qids)}")
    random.Random(seed).shuffle(qids)
    n = min(len(qids) - 1, max_queries, max(1, round(len(qids) * fraction)))
    held = {q: dataset.qrels[split][q] for q in qids[:n]}
    kept = {q: v for q, v in dataset.qrels[split].items() if q not in held}
    return Dataset(dataset.name, dataset.docs, dataset.queries, {**dataset.qrels, split: kept}, dataset.report), held


@dataclass
class Selection:
    """The held-out scores of every candidate (``(stage, epoch)``; epoch 0 is the base) and the one kept."""

    queries: int
    scores: list[dict] = field(default_factory=list)  # {"stage", "epoch", "hybrid", "dense", "lambda"}
    chosen: dict | None = None
    p_value: float | None = None  # paired permutation test of the kept epoch's held-out hybrid against the base's
    lambda_fit: dict | None = None  # the kept epoch's λ on the held-out queries (``lambdas.LambdaFit.to_json``)


class HeldOutSelector:
    """Scores models on held-out queries and remembers the best weights (``on_epoch`` of ``Trainer``)."""

    def __init__(self, dataset: Dataset, held: Qrels, bm25: BM25Index, base_dense_rows: dict[str, np.ndarray],
                 precision: str = "fp32", depth: int = 100, query_max: bool = True, max_seq_length: int | None = None):
        """``base_dense_rows``: each held-out query's top corpus rows under the base encoder (``-1``
        for no hit), e.g. from the workspace's dense index; ``precision``: the base's, so every
        epoch is read as the base is; ``query_max``: BM25 divided by the query's largest possible
        score, λ on ``QUERY_MAX_GRID`` (``CLEAR.query_max_space``), else raw on ``LAMBDA_GRID``;
        ``max_seq_length``: the length every model is read at here, the base's (the exported encoder's),
        whatever length it trains at (None: each model's own)."""
        self.doc_ids, self.held, self.precision = dataset.doc_ids, held, precision
        self.max_seq_length = max_seq_length
        self.queries = {q: dataset.queries[q] for q in held if q in dataset.queries}
        texts = [d.full_text for d in dataset.docs.values()]
        self.rows: dict[str, np.ndarray] = {}
        for qid, text in self.queries.items():
            lex, _ = bm25.top(text, depth)
            dense = np.asarray(base_dense_rows.get(qid, []), dtype=np.int64)[:depth]
            self.rows[qid] = np.union1d(lex, dense[dense >= 0]).astype(np.int64)
        scale = {q: max(bm25.max_score(t), 1e-9) if query_max else 1.0 for q, t in self.queries.items()}
        self.lex = {q: np.asarray(bm25.scores_at(self.queries[q], r), dtype=np.float64) / scale[q]
                    for q, r in self.rows.items()}
        self.grid = QUERY_MAX_GRID if query_max else LAMBDA_GRID
        self.prior = LABEL_FREE_LAMBDA if query_max else None  # as ``CLEAR.lambda_fit`` tunes λ
        self.union = sorted({int(r) for rows in self.rows.values() for r in rows})
        self.texts = [texts[r] for r in self.union]
        self.selection = Selection(len(self.queries))
        self.best_state: dict | None = None  # None: the base is the best so far
        self.base_per_query: dict[str, float] = {}  # the base's held-out hybrid nDCG@10 per query, for the test

    def score(self, model, progress: Callable[[int, int], None] | None = None) -> dict:
        """Held-out dense and hybrid nDCG@10 (hybrid at its best λ on the grid) of ``model``;
        ``progress(done, total)`` after each chunk of candidate documents encoded (it may raise)."""
        row, _ = self.score_per_query(model, progress)
        return row

    def score_per_query(self, model, progress=None) -> tuple[dict, dict[str, float]]:
        """``score``'s row and the hybrid's nDCG@10 per held-out query at that λ."""
        row, per_query, _ = self._ranked(model, progress)
        return row, per_query

    def _ranked(self, model, progress=None):
        """``score_per_query``'s two, and λ's fit on the held-out queries (``fusion.fit_lambda``)."""
        return self._rank(*self.vectors(model, progress))

    def vectors(self, model, progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``model``'s vectors of the candidates (``texts``, in ``union``'s order) and of the held-out
        queries, read at ``precision`` and ``max_seq_length``; the model is left in the mode and at the
        length it came in."""
        train_mode, length = model.training, model.max_seq_length
        try:
            if self.max_seq_length is not None:
                model.max_seq_length = self.max_seq_length
            enc = Encoder(model, precision=self.precision)
            doc_vecs = enc.encode(self.texts, progress=progress)
            q_vecs = enc.for_queries().encode(list(self.queries.values()))
        finally:
            model.train(train_mode)
            model.max_seq_length = length
        return doc_vecs, q_vecs

    def _rank(self, doc_vecs: np.ndarray, q_vecs: np.ndarray):
        """``_ranked`` from the candidates' and the queries' vectors."""
        at = {r: i for i, r in enumerate(self.union)}
        cands = {}
        for i, (qid, rows) in enumerate(self.rows.items()):
            emb = doc_vecs[[at[int(r)] for r in rows]] @ q_vecs[i]
            cands[qid] = Candidates(rows, self.lex[qid], emb.astype(np.float64))
        dense = evaluate_run(rank_candidates(cands, 0.0, self.doc_ids, 100), self.held, metrics=(PRIMARY,))
        fit = fit_lambda(cands, self.held, self.doc_ids, PRIMARY, self.grid, self.prior)
        hybrid = evaluate_run(rank_candidates(cands, fit.best, self.doc_ids, 100), self.held, metrics=(PRIMARY,))
        row = {"hybrid": float(hybrid.mean[PRIMARY]), "dense": float(dense.mean[PRIMARY]), "lambda": fit.best}
        return row, hybrid.per_query[PRIMARY], fit

    def start(self, base_model, progress: Callable[[int, int], None] | None = None) -> dict:
        """Score the base encoder (epoch 0), encoding the candidates with it: the one to beat."""
        return self.start_from(*self.vectors(base_model, progress))

    def start_from(self, doc_vecs: np.ndarray, q_vecs: np.ndarray) -> dict:
        """``start`` from the base's vectors already made: of the candidates (``texts``, in ``union``'s
        order) and of the held-out queries (``queries``' order), as the base encoder makes them at
        ``precision`` and ``max_seq_length`` (its dense index's and the store's)."""
        if doc_vecs.shape[0] != len(self.union) or q_vecs.shape[0] != len(self.queries):
            raise ValueError(f"the base's vectors are {doc_vecs.shape[0]} candidates and {q_vecs.shape[0]} queries, "
                             f"not {len(self.union)} and {len(self.queries)}")
        row, self.base_per_query, _ = self._rank(doc_vecs, q_vecs)
        self.selection.scores.append({"stage": "base", "epoch": 0, **row})
        self.selection.chosen = self.selection.scores[-1]
        return self.selection.chosen

    def on_epoch(self, model, stage: str, epoch: int, progress: Callable[[int, int], None] | None = None) -> None:
        scores, per_query, fit = self._ranked(model, progress)
        row = {"stage": stage, "epoch": epoch, **scores}
        self.selection.scores.append(row)
        if self.selection.chosen is None:
            raise RuntimeError("the base encoder is scored (start) before any epoch")
        if row["hybrid"] > self.selection.chosen["hybrid"]:
            self.selection.chosen, self.best_state = row, {k: copy.deepcopy(v.detach()).cpu()
                                                           for k, v in model.state_dict().items()}
            self.selection.p_value = compare(Evaluation({}, {PRIMARY: self.base_per_query}),
                                             Evaluation({}, {PRIMARY: per_query}), PRIMARY).p_value
            self.selection.lambda_fit = fit.to_json()

    def state_dict(self) -> dict:
        """What a resumed training needs back (``Trainer``'s ``hook_state``): every score so far and
        the kept epoch's weights."""
        return {"scores": list(self.selection.scores), "chosen": self.selection.chosen, "best": self.best_state,
                "base_per_query": self.base_per_query, "p_value": self.selection.p_value,
                "lambda_fit": self.selection.lambda_fit}

    def load_state_dict(self, state: dict) -> None:
        self.selection.scores, self.selection.chosen = list(state["scores"]), state["chosen"]
        self.best_state = state["best"]
        self.base_per_query, self.selection.p_value = state.get("base_per_query", {}), state.get("p_value")
        self.selection.lambda_fit = state.get("lambda_fit")

    @property
    def started(self) -> bool:
        """Whether the base encoder has been scored (``start``), here or before an interruption."""
        return bool(self.selection.scores)

    def describe(self) -> str:
        """One line: which epoch was kept and why (data, for the model card and the job's stages)."""
        c, base = self.selection.chosen or self.selection.scores[0], self.selection.scores[0]
        n = self.selection.queries
        if self.best_state is None:
            return (f"held-out selection on {n} queries: no epoch beat the base encoder (hybrid nDCG@10 "
                    f"{base['hybrid']:.4f}); the base is kept")
        p = self.selection.p_value
        test = "" if p is None else (f", p {p:.3f}" + ("" if p < SIGNIFICANCE_LEVEL else ": within noise"))
        return (f"held-out selection on {n} queries: kept {c['stage']} epoch {c['epoch']} (hybrid nDCG@10 "
                f"{c['hybrid']:.4f}, base {base['hybrid']:.4f}{test})")

    def restore_best(self, model) -> bool:
        """Put the kept epoch's weights back into ``model``; False when the base is the one kept."""
        if self.best_state is None:
            return False
        model.load_state_dict(self.best_state)
        return True

