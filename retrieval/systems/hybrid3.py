"""Three-way fusion: BM25, the dense encoder and learned sparse (SPLADE) as one system, ``hybrid3``.

Every candidate of the union of the three top-``depth`` lists is scored exactly by all three models,
and the union is ranked by

    s(q, d) = λ·s_lex(q, d) + s_emb(q, d) + μ·s_sp(q, d)

where λ·s_lex + s_emb is the CLEAR hybrid's score (Gao, Dai, Chen, Fan, Van Durme and Callan,
"Complement Lexical Retrieval Model with Semantic Residual Embeddings", ECIR 2021, arXiv:2004.13969,
§3.4, eq. 8; ``retrieval.systems.fusion``) at the λ that hybrid ranks the split with
(``systems.hybrid.lambda_for``: label-free, tuned on training labels, cross-fitted on judged queries,
or BM25 alone where the encoder fails the reliability check), and s_sp is SPLADE's dot product divided
by the largest SPLADE score among the query's candidates: the theoretical-min-max normalization of
Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023,
arXiv:2210.11934, §4, with SPLADE's theoretical minimum 0 (its weights are log(1 + ReLU(·)) ≥ 0), so
s_sp lies in [0, 1] like s_lex (BM25's share of the query's largest possible score) and the cosine.

μ, the learned sparse model's weight, follows the rule λ follows (``clear_lambda``):

* without labels, μ = 1 (``LABEL_FREE_MU``: each normalized part weighs alike) — unless the sparse
  model cannot read the corpus: an English-only model (the bundled SPLADE-tiny's vocabulary is
  BERT's English word pieces) on a corpus mostly in another language (the reliability check's
  language guess, ``systems.reliability``), where μ = 0 and the system is the CLEAR hybrid;
* with a training split (``systems.hybrid.tuning_split``: ``train``, else the judged queries), the
  grid's best μ (``MU_GRID``, λ fixed at the split's) replaces the label-free μ only where it beats it
  on those queries by a paired permutation test at the 0.05 level (nDCG@10); where the judged queries
  are also the split evaluated, μ stays label-free (it is not cross-fitted as λ is), so no query is
  ranked with a μ tuned on itself; where the learned sparse model was fine-tuned on that training
  split's queries (its folder's training record), μ is tuned by the same rule on the queries its
  held-out check kept out of training only (``unseen``) — a μ tuned on the queries it trained on
  would favour it — against the μ its base was given on the whole split (``base_mu``, written in the
  record when it was trained: tuned there on every labelled query, none of which the base saw), not the
  label-free μ: the few held-out queries rarely separate two μ, so a prior that ignores the split's
  labels would stand where those labels, read through the base, say otherwise (on SciFact the base's
  μ 0.25 on 809 queries against a label-free 1 that 162 held-out queries could not overturn). Where
  there are no held-out queries, μ is the base's; where the judged queries are both the training split
  and the split evaluated, μ is label-free (the base's μ was tuned on those very queries), and so it is
  beside another dense encoder than the one the base's μ was tuned beside (the record names it: a μ
  weighs one dense score against SPLADE's, and another encoder's is another score);
* where the dense encoder was fine-tuned on the training split's queries (its folder's record), μ is
  not tuned on them either — a μ tuned where the encoder has seen the answers leans on the encoder,
  as λ would (``clear_lambda.of_trained``): it is tuned on the queries no fine-tuned part of the fusion
  trained on (``unseen``: each part's held-out queries; an encoder refit on all of them leaves none)
  against μ 0 — the CLEAR hybrid, whose λ the encoder's own held-out check chose — and with none left
  μ is 0: a fine-tuned encoder outranks the parts it was weighed alike with, so the label-free μ is no
  safe default beside it (on SciFact it cost 0.044 against that hybrid on test), and SPLADE is weighed
  in only where queries no fine-tuned part saw show it helps; the base sparse model's μ is the prior
  only where the sparse model alone was fine-tuned (it was given beside the base encoder);
* an identifier lookup (``systems.identifier_queries``) is ranked by BM25 alone, as the CLEAR hybrid
  ranks it, and where λ is ∞ (BM25 alone: the encoder failed the reliability check) the score is
  s_lex + μ·s_sp, the cosine only breaking ties.

What is chosen for each split evaluated is this system's state on the workspace (``Mus``); a fit is
cached in the store under everything it depends on.
"""
from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from retrieval.data.dataset import queries_fingerprint
from retrieval.data.run import Run
from retrieval.evaluation.measures import compare, evaluate_run
from retrieval.evaluation.metrics import METRIC_NAMES
from retrieval.index.searchable import SparseVector
from retrieval.index.splade import BUNDLED
from retrieval.judging.labels import JUDGED
from retrieval.store import cache_key
from retrieval.systems import hybrid as clear
from retrieval.systems.base import Hits, Needs, Probe, SystemBase, Weight
from retrieval.systems.clear_lambda import against_prior, shown
from retrieval.systems.declared import Capabilities, Citation, Relations
from retrieval.systems.fusion import TIE_BREAK, ranked
from retrieval.systems.identifier_queries import is_identifier_lookup
from retrieval.systems.reliability import dense_reliability
from retrieval.systems.state import WORKSPACE, SplitChoices
from retrieval.training_record import LambdaFit, TrainedOn

if TYPE_CHECKING:
    from retrieval.index.builds import IndexBuild
    from retrieval.systems.reads import SystemWorkspace

KEY = "hybrid3"
LABEL_FREE_MU = 1.0
MU_GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
ENGLISH_ONLY_SPARSE = {BUNDLED}  # the bundled SPLADE-tiny: BERT's English word pieces
METRIC = "ndcg@10"


@dataclass
class Candidates3:
    """One query's union of candidates with the three exact scores, each normalized (module docstring)."""

    rows: np.ndarray
    s_lex: np.ndarray
    s_emb: np.ndarray
    s_sp: np.ndarray
    lex_only: bool = False  # an identifier lookup: BM25 alone
    sp_max: float = 0.0  # the largest raw SPLADE score among the candidates (what s_sp is divided by)


@dataclass
class MuChoice:
    """μ for one split evaluated, and why (plain data; ``how`` in the words ``clear_lambda`` uses for λ)."""

    value: float
    how: str
    fit: LambdaFit | None = None  # the sweep it was chosen on, if any (a ``LambdaFit`` over ``MU_GRID``)
    lam: float = LABEL_FREE_MU  # the CLEAR λ it was chosen with (fixed while μ is tuned)
    lam_by_query: dict[str, float] = field(default_factory=dict)


class Mus(SplitChoices[MuChoice]):
    """This system's state on a workspace: the μ chosen for each split evaluated."""

    def size(self, choice: MuChoice) -> int:
        return 2_000 + 120 * len(choice.lam_by_query)


def fused3(lam: float, mu: float, c: Candidates3) -> np.ndarray:
    """The score of every candidate of ``c`` (module docstring)."""
    if c.lex_only:
        return c.s_lex + TIE_BREAK * c.s_emb
    if math.isinf(lam):
        return c.s_lex + mu * c.s_sp + TIE_BREAK * c.s_emb
    fused: np.ndarray = lam * c.s_lex + c.s_emb + mu * c.s_sp
    return fused


def rank3(cands: dict[str, Candidates3], lam: float, mu: float, doc_ids: list[str], k: int,
          lam_by_query: dict[str, float] | None = None) -> Run:
    """Each query's candidates ranked by ``fused3`` (a query in ``lam_by_query`` at its own λ)."""
    by_query = lam_by_query or {}
    return ranked(cands, lambda qid, c: fused3(by_query.get(qid, lam), mu, c), doc_ids, k)


def _lex_scores(ws: SystemWorkspace, text: str, rows: np.ndarray) -> np.ndarray:
    lex = np.asarray(ws.bm25.scores_at(text, rows), dtype=np.float64)
    if clear.query_max_space(ws):
        lex = lex / max(ws.bm25.max_score(text), 1e-9)
    return lex


class Encoded(NamedTuple):
    """Queries through both encoders once: their embeddings, the dense index's top rows, their sparse vectors."""

    vectors: np.ndarray
    dense_rows: np.ndarray
    sparse: list[SparseVector]


def encode(ws: SystemWorkspace, queries: dict[str, str]) -> Encoded:
    qvecs = ws.dense.encode_queries(queries)
    _, dense_rows = ws.dense.index.search_vectors(qvecs, ws.depth)
    return Encoded(qvecs, dense_rows, ws.sparse.model.encode(list(queries.values()), query=True))


def union3(ws: SystemWorkspace, text: str, qvec: np.ndarray, dense_rows: np.ndarray, svec: SparseVector) -> Candidates3:
    """One query's candidates: BM25's top ``depth`` with a positive score, the dense index's top
    ``depth`` (``-1`` = no hit) and SPLADE's top ``depth`` (non-zero scores), each scored by all three."""
    depth = ws.depth
    lex_top, _ = ws.bm25.top(text, depth)
    sp_top, sp_scores = ws.sparse.index.top(svec, depth)
    dense_rows = np.asarray(dense_rows[:depth])
    rows = np.union1d(np.union1d(lex_top, dense_rows[dense_rows >= 0]), sp_top).astype(np.int64)
    return scored(ws, text, qvec, svec, rows, float(sp_scores[0]) if len(sp_scores) else 0.0)


def sp_max(ws: SystemWorkspace, svec: SparseVector) -> float:
    """The largest SPLADE score of any document for the query: SPLADE's own top 1, so the largest of
    any candidate union, which holds SPLADE's top list (0 where no document shares a term)."""
    _, top = ws.sparse.index.top(svec, 1)
    return float(top[0]) if len(top) else 0.0


def scored(ws: SystemWorkspace, text: str, qvec: np.ndarray, svec: SparseVector, rows: np.ndarray,
           top: float) -> Candidates3:
    """The documents at ``rows`` scored by all three models; SPLADE's divided by ``top`` (``sp_max``)."""
    sp = np.asarray(ws.sparse.index.scores(svec, rows), dtype=np.float64)
    emb = np.asarray(ws.dense.index.scores(qvec, rows), dtype=np.float64)
    return Candidates3(rows, _lex_scores(ws, text, rows), emb, sp / top if top > 0 else sp,
                       is_identifier_lookup(text), top)


def candidates(ws: SystemWorkspace, queries: dict[str, str]) -> dict[str, Candidates3]:
    """``union3`` of every query (one batch through each encoder)."""
    if not queries:
        return {}
    enc = encode(ws, queries)
    return {qid: union3(ws, text, enc.vectors[i], enc.dense_rows[i], enc.sparse[i])
            for i, (qid, text) in enumerate(queries.items())}


def sparse_unreliable(ws: SystemWorkspace) -> str | None:
    """Why the sparse model cannot read this corpus (an English-only model, a corpus mostly in
    another language), or None."""
    check = dense_reliability(ws)
    name = ws.sparse.model.name
    if name in ENGLISH_ONLY_SPARSE and check.language != "en" and check.language_share >= 0.5:
        return (f"the learned sparse model {name} reads English word pieces and {check.language_share:.0%} of a "
                f"sample of this corpus is detected as {check.language!r}")
    return None


def mu_fit(ws: SystemWorkspace, split: str, lam: float, lam_by_query: dict[str, float], prior: float,
           only: Collection[str] | None = None) -> LambdaFit:
    """μ tuned on ``split``'s labelled queries (those of them in ``only``, if given) over ``MU_GRID``
    at the CLEAR λ given, against ``prior`` (paired permutation test on nDCG@10); cached in the store."""
    params = {**Hybrid3.base_params(ws), "lambda": lam if math.isfinite(lam) else shown(lam),
              "lambda_by_query": queries_fingerprint({q: f"{v!r}" for q, v in sorted(lam_by_query.items())}),
              "grid": list(MU_GRID), "prior": prior, "metric": METRIC,
              "mean": "over the queries tuned on"}  # fits kept before averaged a subset over the whole split
    tuned_on = {q: t for q, t in ws.dataset.split_queries(split).items()
                if q in ws.dataset.qrels[split] and (only is None or q in only)}
    params["queries"] = queries_fingerprint(tuned_on)
    key = cache_key(**ws.data_key(split, labels=True), system="hybrid3_mu", params=params, split=split, k=0)
    cached = ws.store.get_metrics(key) if ws.store else None
    if cached:
        return LambdaFit.from_json(cached[1]["fit"])
    if not tuned_on:
        raise ValueError(f"no labelled {split} queries to tune μ on")
    qrels, ids = {q: ws.dataset.qrels[split][q] for q in tuned_on}, ws.dataset.doc_ids  # the mean over these alone
    cands = candidates(ws, tuned_on)
    evals = {mu: evaluate_run(rank3(cands, lam, mu, ids, 100, lam_by_query), qrels, metrics=(METRIC,))
             for mu in MU_GRID}
    table = [(mu, ev.mean[METRIC]) for mu, ev in evals.items()]
    best = max(table, key=lambda row: (row[1], -abs(row[0] - prior)))[0]  # a tie: nearer the prior
    p = 1.0 if best == prior else compare(evals[prior], evals[best], METRIC).p_value
    fit = LambdaFit(best, table, len(tuned_on), prior, p)
    if ws.store:
        ws.store.put_metrics(key, dataset=ws.dataset.queries_hash, system="hybrid3_mu", params=params, split=split,
                             metrics={"best": fit.best, "chosen": fit.chosen}, per_query={"fit": fit.to_json()})
    return fit


def _seen(record: TrainedOn | None, ws: SystemWorkspace, split: str) -> bool:
    """Whether a model's training ``record`` says it was fine-tuned on ``split``'s labelled queries as
    they are now: μ tuned on them would favour it."""
    if record is None or record.split != split or split not in ws.dataset.qrels:
        return False
    return record.queries == queries_fingerprint(ws.dataset.split_queries(split))


def _held(record: TrainedOn | None, ws: SystemWorkspace, split: str) -> list[str]:
    """The labelled ``split`` queries a model's held-out check kept out of its training (its record), sorted."""
    labelled = ws.dataset.qrels.get(split, {})
    return sorted(q for q in (record.held_out if record is not None else ()) if q in labelled)


class Unseen(NamedTuple):
    """The training split's labelled queries that no fine-tuned part of the fusion trained on, and which
    parts were fine-tuned on that split (``trained``: names, in the fusion's order)."""

    queries: list[str]
    trained: tuple[str, ...]


SPARSE_PART, DENSE_PART = "the learned sparse model", "the dense encoder"


def unseen(ws: SystemWorkspace, split: str) -> Unseen | None:
    """``split``'s labelled queries neither fine-tuned model of the fusion trained on — the queries each
    one's held-out check kept out of its training (a dense encoder refit on all of them keeps none) —
    or None where neither was fine-tuned on ``split``."""
    parts = [(DENSE_PART, ws.encoder.trained_on), (SPARSE_PART, ws.sparse.model.trained_on)]
    trained = [(name, rec) for name, rec in parts if _seen(rec, ws, split)]
    if not trained:
        return None
    left = set(ws.dataset.qrels[split])
    for _, rec in trained:
        left &= set(_held(rec, ws, split))
    return Unseen(sorted(left), tuple(name for name, _ in trained))


def _kept(fit: LambdaFit, prior_is: str = "the label-free") -> str:
    """How a μ fit was kept (after "tuned on …"): on how many queries, and whether the grid's best beat
    the prior μ (``clear_lambda.against_prior``, λ's wording)."""
    return f" ({METRIC_NAMES[METRIC]}, {fit.queries} queries)" + against_prior(fit, "μ", prior_is)


BASE_PRIOR = "the base sparse model's"  # whose μ a fine-tuned sparse model's sweep must beat (``base_mu``)
# whose μ a sweep beside a fine-tuned dense encoder must beat: 0, the CLEAR hybrid its held-out check chose λ for —
# measured on SciFact (2026-12-01): the label-free μ 1 beside it was 0.044 [0.020, 0.068] below that hybrid on test
ENCODER_PRIOR = "the fine-tuned encoder's"


def base_mu(ws: SystemWorkspace, train_split: str, eval_split: str | None) -> LambdaFit | None:
    """The μ fit the workspace's (base) sparse model is given on ``train_split`` when ``eval_split`` is
    evaluated — what a model fine-tuned from it on that split records as the prior of its own μ — or
    None where μ is not tuned there for it (no labelled queries to tune on, ``eval_split`` tuned on
    another split, the judged queries both tuned on and evaluated, a sparse model that cannot read
    the corpus)."""
    if eval_split is None or clear.tuning_split(ws, eval_split) != train_split or sparse_unreliable(ws):
        return None
    return mu_for(ws, eval_split).fit


def mu_for(ws: SystemWorkspace, split: str | None) -> MuChoice:
    """μ (and the CLEAR λ it goes with) when ``split`` is evaluated: the policy of the module docstring."""
    state = ws.system_state(KEY, Mus, WORKSPACE)
    with state.lock:
        if split not in state.by_split:
            state.by_split[split] = _choose(ws, split)
        return state.by_split[split]


def _choose(ws: SystemWorkspace, split: str | None) -> MuChoice:
    lam_choice = clear.lambda_for(ws, split)
    lam, by_query = lam_choice.value, lam_choice.per_query
    why_not = sparse_unreliable(ws)
    prior = 0.0 if why_not else LABEL_FREE_MU
    train = clear.tuning_split(ws, split)
    if train is None or (train == JUDGED and split == JUDGED):
        how = (f"μ 0: {why_not}, so the system is the CLEAR hybrid" if why_not else
               "μ 1, label-free: each part's score normalized to [0, 1] and weighed alike" +
               (" (the judged queries are the split evaluated: μ is not tuned on them)" if train else ""))
        return MuChoice(prior, how, None, lam, by_query)
    left = unseen(ws, train)
    if left is None:  # no part of the fusion was fine-tuned on the training split's queries
        fit = mu_fit(ws, train, lam, by_query, prior)
        return MuChoice(fit.chosen, f"tuned on {train}" + _kept(fit), fit, lam, by_query)
    # the prior: beside a fine-tuned encoder, μ 0 — the CLEAR hybrid, whose λ the encoder's held-out check chose;
    # a sparse model fine-tuned alone, its base's μ (tuned on every train query, none of which the base saw),
    # where it was tuned beside the dense encoder fused now (else the label-free μ: a μ beside another encoder
    # weighs another dense score)
    seen = ws.sparse.model.trained_on
    dense = DENSE_PART in left.trained
    base = (seen.base_mu if not dense and not why_not and seen is not None
            and seen.base_mu_beside == ws.encoder.fingerprint else None)
    prior_is = ENCODER_PRIOR if dense else BASE_PRIOR if base is not None else "the label-free"
    prior = 0.0 if dense else base.chosen if base is not None else prior
    who = " nor ".join(left.trained)
    if left.queries:
        fit = mu_fit(ws, train, lam, by_query, prior, only=left.queries)
        which = f"neither {who} was" if len(left.trained) > 1 else f"{who} was not"
        return MuChoice(fit.chosen, f"tuned on {fit.queries} held-out {train} queries {which} fine-tuned on" +
                        _kept(fit, prior_is), fit, lam, by_query)
    whose = (f"{ENCODER_PRIOR}, the CLEAR hybrid" if dense else
             f"{BASE_PRIOR} (tuned on {base.queries} {train} queries)" if base is not None else
             "label-free" if not why_not else f"0: {why_not}")
    trained = " and ".join(left.trained)
    return MuChoice(prior, f"μ {shown(prior)}, {whose}: {trained} {'were' if len(left.trained) > 1 else 'was'} "
                    f"fine-tuned on the {train} queries, so μ is not tuned on them", None, lam, by_query)


class Hybrid3(SystemBase):
    key, label, short = KEY, "Hybrid (BM25 + dense + SPLADE)", "hybrid3"
    needs = Needs(lexical=True, vectors=True, sparse=True)
    shown_by_default = False  # on request until it is measured at least as good as the CLEAR hybrid it extends
    citation = Citation("Sebastian Bruch, Siyu Gai, Amir Ingber", "An Analysis of Fusion Functions for Hybrid "
                        "Retrieval", "ACM TOIS 42(1), arXiv:2210.11934", 2023, "§4, theoretical-min-max "
                        "normalization of each part")
    relations = Relations(("hybrid", "splade"), "the CLEAR hybrid plus μ·SPLADE over the three lists")
    capabilities = Capabilities(exact_scores=True)

    @staticmethod
    def base_params(ws: SystemWorkspace, split: str | None = None) -> dict[str, Any]:
        """The CLEAR hybrid's parameters for ``split`` and the sparse model's: what μ is tuned under."""
        return {**clear.HYBRID.params(ws, split), "sparse_model": ws.sparse.model.fingerprint,
                "sparse_scale": "list max"}

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        p = self.base_params(ws, split)
        if split is not None:
            p["mu"] = mu_for(ws, split).value
        return p

    def weights(self, ws: SystemWorkspace, split: str | None) -> list[Weight]:
        """μ for ``split`` and how it was chosen (λ is the CLEAR hybrid's, shown with it)."""
        choice = mu_for(ws, split)
        return [Weight("μ", choice.value, choice.how)]

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        choice = mu_for(ws, split)
        return rank3(candidates(ws, queries), choice.lam, choice.value, ws.dataset.doc_ids, k, choice.lam_by_query)

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]] | None:
        """The fused score of chosen documents, retrieved or not; s_sp divided by the largest SPLADE
        score of the query's candidate list, as its ranking divides it."""
        choice = mu_for(ws, split)
        asked = {q: queries[q] for q in rows}
        enc = encode(ws, asked) if asked else None
        ids, out = ws.dataset.doc_ids, {}
        for i, (qid, rs) in enumerate(rows.items()):
            assert enc is not None
            at = np.asarray(rs, dtype=np.int64)
            c = scored(ws, asked[qid], enc.vectors[i], enc.sparse[i], at, sp_max(ws, enc.sparse[i]))
            s = fused3(choice.lam_by_query.get(qid, choice.lam), choice.value, c)
            out[qid] = {ids[r]: float(v) for r, v in zip(at.tolist(), s.tolist())}
        return out

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        choice = mu_for(ws, split)
        lam = choice.lam_by_query.get(probe.query_id, choice.lam) if probe.query_id else choice.lam
        cands = {"q": union3(ws, probe.text, probe.vector, probe.dense_rows, probe.sparse)}
        return rank3(cands, lam, choice.value, ws.dataset.doc_ids, k)["q"]

    def waits_for(self, ws: SystemWorkspace) -> tuple[IndexBuild[Any, Any], ...]:
        return (ws.builds["dense"], ws.builds["sparse"])
