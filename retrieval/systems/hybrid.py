"""The hybrids as systems: CLEAR's λ·s_lex + s_emb over the union of both candidate lists (its λ
chosen by ``retrieval.systems.clear_lambda``' policy, tuned and cached here), reciprocal-rank fusion and the
min-max weighted sum (``retrieval.systems.fusion`` computes them all). The λ chosen for each split
is CLEAR's state on the workspace (``Lambdas``, in ``Workspace.system_state``): kept with the data
set and encoder it was chosen for, shared by ``with_run``'s copies only."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retrieval.data.dataset import queries_fingerprint
from retrieval.data.run import Run
from retrieval.judging.labels import FOLDS_SEED, JUDGED, judged_counts, judged_folds
from retrieval.store import cache_key
from retrieval.systems import clear_lambda as lambdas
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.bm25 import lexical_params
from retrieval.systems.clear_lambda import LABEL_FREE_LAMBDA, LEX_ONLY, CrossFold, LambdaChoice, shown
from retrieval.systems.declared import SPLIT_WHY, Capabilities, Citation, Relations
from retrieval.systems.dense import dense_params
from retrieval.systems.fusion import TIE_BREAK, Hybrid, default_lambda, tune_lambda
from retrieval.systems.hybrid_why import HybridWhy, explain_split
from retrieval.systems.identifier_queries import RULE as LOOKUP_RULE
from retrieval.systems.reliability import dense_reliability
from retrieval.systems.state import WORKSPACE, SplitChoices
from retrieval.training_record import LambdaFit

if TYPE_CHECKING:
    from retrieval.index.builds import IndexBuild
    from retrieval.index.searchable import LexicalIndex
    from retrieval.systems.reads import SystemWorkspace


PER_CHOICE = 2_000  # bytes of a LambdaChoice: its value, how, grid and fit (the memory budget's estimate)
PER_QUERY_LAMBDA = 120  # a cross-fitted choice's λ of one query


class Lambdas(SplitChoices[LambdaChoice]):
    """The CLEAR hybrid's state on a workspace: the λ chosen for each split evaluated."""

    def size(self, choice: LambdaChoice) -> int:
        return PER_CHOICE + PER_QUERY_LAMBDA * len(choice.per_query)


def lambdas_of(ws: SystemWorkspace) -> Lambdas:
    """``ws``'s λ state (made empty the first time)."""
    return ws.system_state(HYBRID.key, Lambdas, WORKSPACE)


def query_max_space(ws: SystemWorkspace) -> bool:
    """Whether the CLEAR hybrid divides BM25 by each query's largest possible score: the encoder's
    scores are cosines, so λ lives on ``QUERY_MAX_GRID``."""
    return ws.encoder.normalize


def lexical_half(ws: SystemWorkspace, fusion: str = "clear") -> LexicalIndex:
    """The BM25 a hybrid fuses. RRF and the weighted sum fuse the engine's BM25 list as the BM25
    system ranks it. CLEAR scores every candidate of the union by BM25 exactly, so it takes
    RankScope's own index in this process (``Workspace.bm25``: the engine's own in-process; beside
    Milvus, the same index the query-max normalization and the Search view's explanations read):
    its BM25 list and candidate scores cost no engine call, and use the whole corpus's statistics
    (Milvus Lite scores BM25 per segment). A CLEAR query then asks a vector engine twice: the dense
    list, and the vectors of the candidates that list lacks (``MilvusVectors.scores``)."""
    return ws.bm25 if fusion == "clear" else ws.lexical


def make(ws: SystemWorkspace, fusion: str = "clear", split: str | None = None) -> Hybrid:
    """The fusion of ``ws``'s BM25 and dense index; CLEAR's with the λ chosen for ``split``."""
    h = Hybrid(lexical_half(ws, fusion), ws.dense, depth=ws.depth, fusion=fusion, lookups=fusion == "clear")
    if fusion == "clear":
        choice = lambda_for(ws, split)
        h.lam, h.lam_by_query = choice.value, choice.per_query
        if choice.per_query_max:
            h.lex_norm = ws.bm25.max_score
    return h


def tuning_split(ws: SystemWorkspace, split: str | None) -> str | None:
    """The split λ is tuned on when evaluating ``split`` (None: the queries of no split, e.g. Search):
    ``train`` where the data set has one (never for ``train`` itself); else the judged queries
    (``labels.JUDGED``) where some have a relevant document — where ``judged`` is the split
    evaluated, at least two, one for each half λ is cross-fitted on (``lambda_for``); else None."""
    qrels = ws.dataset.qrels
    if "train" in qrels:
        return "train" if split != "train" else None
    relevant = judged_counts(qrels[JUDGED]).relevant if JUDGED in qrels else 0
    return JUDGED if relevant >= (2 if split == JUDGED else 1) else None


def lambda_for(ws: SystemWorkspace, split: str | None) -> LambdaChoice:
    """λ_test for evaluating ``split``: the training split's (``tuning_split``), chosen by
    ``clear_lambda.choose`` — a fine-tuned encoder's own held-out λ, else λ tuned on the training split
    against the label-free prior, else the label-free λ — and kept on the workspace. Where the
    training split is the judged queries and they are the split evaluated, λ is cross-fitted:
    each seeded half (``labels.judged_folds``) is ranked with the λ ``lambda_fit`` tunes on the
    other half, so no query is ranked with a λ tuned on itself; the λ of any other query (Search)
    is tuned on all of them."""
    state = lambdas_of(ws)
    with state.lock:
        if split not in state.by_split:
            train = tuning_split(ws, split)
            normalized = query_max_space(ws)

            def cross(on: str) -> LambdaChoice:
                halves = judged_folds(ws.dataset.qrels[on])
                folds = (CrossFold(halves[0], lambda_fit(ws, on, halves[1])),
                         CrossFold(halves[1], lambda_fit(ws, on, halves[0])))
                return lambdas.cross_fitted(folds, lambda_fit(ws, on), on, normalized)

            def trained(on: str) -> LambdaChoice | None:
                fingerprint = queries_fingerprint(ws.dataset.split_queries(on))
                return lambdas.of_trained(ws.encoder.trained_on, on, fingerprint, normalized)

            def scale() -> float:
                queries = ws.dataset.split_queries(split) if split else ws.dataset.queries
                sample = dict(list(queries.items())[:200])
                if not sample:
                    return 0.0
                return default_lambda(Hybrid(lexical_half(ws), ws.dense, depth=ws.depth).candidates(sample))

            state.by_split[split] = lambdas.choose(train, normalized, trained, lambda on: lambda_fit(ws, on), scale,
                                               lambda: dense_reliability(ws),
                                               cross if train == JUDGED and split == JUDGED else None)
        return state.by_split[split]


def lambda_fit(ws: SystemWorkspace, split: str, queries: frozenset[str] | None = None) -> LambdaFit:
    """λ_test tuned on a labelled split (only its ``queries`` when given: a half λ is cross-fitted
    on) over the grid of the hybrid's score space, against the label-free choice as the prior
    (``label_free_prior``); cached in the store. ``lambda_for`` calls it on the training split to
    choose λ; on any other split it only shows how λ would have done."""
    with lambdas_of(ws).lock:
        normalized = query_max_space(ws)
        prior = label_free_prior(ws, normalized)
        params = {**HYBRID.params(ws, None), "metric": "ndcg@10"}
        if normalized:
            params.update(bm25_scale="query max")
        if prior is not None:  # λ = ∞ (BM25 alone) in the key as written: its grid holds ∞ too
            params.update(prior=prior if math.isfinite(prior) else shown(prior))
        tuned_on = ws.dataset.split_queries(split)
        if queries is not None:
            tuned_on = {q: t for q, t in tuned_on.items() if q in queries}
            params.update(queries=queries_fingerprint(tuned_on))
        key = cache_key(**ws.data_key(split, labels=True), system="lambda", params=params, split=split, k=0)
        cached = ws.store.get_metrics(key) if ws.store else None
        if cached:
            return LambdaFit.from_json(cached[1]["fit"])
        h = Hybrid(lexical_half(ws), ws.dense, depth=ws.depth, lex_norm=ws.bm25.max_score if normalized else None,
                   lookups=True)
        fit = tune_lambda(h, tuned_on, ws.dataset.qrels[split],
                          grid=lambdas.grid_for(normalized, prior), prior=prior)
        if ws.store:
            ws.store.put_metrics(key, dataset=ws.dataset.queries_hash, system="lambda", params=params,
                                 split=split, metrics={"best": fit.best, "chosen": fit.chosen},
                                 per_query={"fit": fit.to_json()})
        return fit


def label_free_prior(ws: SystemWorkspace, normalized: bool) -> float | None:
    """The λ labels must beat significantly to replace it: what the hybrid is without labels —
    BM25 alone (``LEX_ONLY``) where the encoder fails the reliability check, else the query-max
    space's equal weights (None in the raw space, which has no label-free λ of its own)."""
    if not dense_reliability(ws).reliable:
        return LEX_ONLY
    return LABEL_FREE_LAMBDA if normalized else None


def fix_lambda(ws: SystemWorkspace, value: float, how: str, split: str | None = None) -> None:
    """Use λ_test = ``value`` when evaluating ``split`` (chosen elsewhere, e.g. on a held-out split,
    in the space ``lambda_fit`` tunes in)."""
    state = lambdas_of(ws)
    with state.lock:
        state.by_split[split] = lambdas.fixed(value, how, query_max_space(ws))


class _Fusion(SystemBase):
    """What the three hybrids share: both indexes, their parameters and the candidate depth."""

    key = label = short = fusion = ""
    needs = Needs(lexical=True, vectors=True)
    relations = Relations(("bm25", "dense"), "BM25 and dense, fused")

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        return {**ws.engine.key, **lexical_params(ws), **dense_params(ws), "depth": ws.depth}

    def search(self, ws: SystemWorkspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        return make(ws, self.fusion, split).search(queries, k)

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]] | None:
        return None  # a fused rank or a normalized sum scores a list, not a document

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        return make(ws, self.fusion).fuse({"q": probe.lexical[:ws.depth]}, {"q": probe.dense[:ws.depth]}, k)["q"]

    def explain(self, ws: SystemWorkspace, probe: Probe, row: int) -> None:
        return None

    def waits_for(self, ws: SystemWorkspace) -> tuple[IndexBuild[Any, Any], ...]:
        return (ws.builds["dense"],)


class Clear(_Fusion):
    key, label, short, fusion = "hybrid", "Hybrid (CLEAR λ)", "hybrid", "clear"
    citation = Citation("Luyu Gao, Zhuyun Dai, Tongfei Chen, Zhen Fan, Benjamin Van Durme, Jamie Callan",
                        "Complement Lexical Retrieval Model with Semantic Residual Embeddings",
                        "ECIR 2021, arXiv:2004.13969", 2021, "§3.4, eq. 8")
    relations = Relations(("bm25", "dense"), "λ·BM25 (a share of the query's best score) + cosine, over both lists")
    capabilities = Capabilities(exact_scores=True, explains_score=SPLIT_WHY)

    def cache_params(self, ws: SystemWorkspace, split: str | None) -> dict[str, Any]:
        p = super().cache_params(ws, split)
        if not ws.engine.capabilities.explains:  # candidates scored by the in-process BM25 (lexical_half)
            p["bm25_scores"] = "in-process"
        p["identifier_lookups"] = LOOKUP_RULE
        p["bm25_alone"] = f"BM25 + {TIE_BREAK:g} × cosine"  # how λ = ∞ and the lookups score (hybrid.fused)
        if split is not None:
            choice = lambda_for(ws, split)
            p["lambda"] = choice.value
            if choice.per_query_max:
                p["bm25_scale"] = "query max"
            if choice.folds:  # cross-fitted: each half's queries and λ (and the seed that dealt them)
                p["cross_fitted"] = {"seed": FOLDS_SEED, "folds": [
                    [queries_fingerprint({q: ws.dataset.queries[q] for q in f.queries}), f.value
                     if math.isfinite(f.value) else shown(f.value)] for f in choice.folds]}
        return p

    def exact_scores(self, ws: SystemWorkspace, split: str, rows: dict[str, list[int]],
                     queries: dict[str, str]) -> dict[str, dict[str, float]]:
        return make(ws, "clear", split).exact_scores(lambda_for(ws, split).value, rows, queries)

    # ---- λ: what the views, the CLI and the benches ask of the CLEAR hybrid (the module's functions) ----
    def query_max_space(self, ws: SystemWorkspace) -> bool:
        """Whether λ weighs BM25 over the query's largest possible score on ``ws`` (cosine scores).

        Args:
            ws: The workspace it ranks over.

        Returns:
            True in the query-max space (``QUERY_MAX_GRID``), False for raw BM25 scores.
        """
        return query_max_space(ws)

    def lambda_for(self, ws: SystemWorkspace, split: str | None) -> LambdaChoice:
        """λ when ``split`` is evaluated on ``ws`` (the module's ``lambda_for``).

        Args:
            ws: The workspace it ranks over.
            split: The split evaluated; None for queries of no split (Search).

        Returns:
            The λ, how it was chosen, and its tuning grid where it was tuned.
        """
        return lambda_for(ws, split)

    def lambda_fit(self, ws: SystemWorkspace, split: str, queries: frozenset[str] | None = None) -> LambdaFit:
        """λ tuned on ``split``'s labelled queries against the label-free prior (the module's ``lambda_fit``).

        Args:
            ws: The workspace it ranks over.
            split: A split with labels.
            queries: Tune on these of its queries only; None: all.

        Returns:
            The grid's best λ, the prior, and the test between them.
        """
        return lambda_fit(ws, split, queries)

    def fix_lambda(self, ws: SystemWorkspace, value: float, how: str, split: str | None = None) -> None:
        """Use λ = ``value`` on ``ws`` when evaluating ``split`` (the module's ``fix_lambda``).

        Args:
            ws: The workspace it ranks over.
            value: The λ.
            how: Why it is this value, shown beside it.
            split: The split it applies to; None for queries of no split.
        """
        fix_lambda(ws, value, how, split)

    def one(self, ws: SystemWorkspace, probe: Probe, k: int, split: str | None) -> Hits:
        """A query of the data set at the λ its evaluation ranks it with (cross-fitted: its half's),
        any other at the split's λ (cross-fitted: tuned on all judged queries)."""
        h, lam = self._probed(ws, probe, split)
        cands = {"q": h.union(probe.text, probe.vector, probe.dense_rows)}
        return h.rank(cands, lam if lam is not None else default_lambda(cands), k)["q"]

    def explain_score(self, ws: SystemWorkspace, probe: Probe, rows: Sequence[int],
                      split: str | None) -> dict[int, HybridWhy]:
        """Each document's score at the λ ``one`` ranks it with, split into its lexical and dense parts
        (``hybrid_why``); kept in memory, never written (a search writes nothing: ``Probe``)."""
        h, lam = self._probed(ws, probe, split)
        if lam is None:
            lam = default_lambda({"q": h.union(probe.text, probe.vector, probe.dense_rows)})
        return explain_split(ws, h, lam, probe.text, rows, probe.vector, keep=False)

    def _probed(self, ws: SystemWorkspace, probe: Probe, split: str | None) -> tuple[Hybrid, float | None]:
        """The hybrid ``one`` ranks ``probe`` with and the λ of this query (None: scale-matched on its candidates)."""
        h = make(ws, "clear", split)
        lam = h.lam_by_query.get(probe.query_id, h.lam) if probe.query_id else h.lam
        h.lam_by_query = {}  # the probe's one list is named "q", whatever the query's id
        return h, lam


class RRF(_Fusion):
    key, label, short, fusion = "rrf", "Hybrid (RRF)", "RRF", "rrf"
    citation = Citation("Gordon V. Cormack, Charles L. A. Clarke, Stefan Büttcher", "Reciprocal Rank Fusion "
                        "outperforms Condorcet and individual Rank Learning Methods", "SIGIR 2009", 2009,
                        "§2, Σ 1/(k + rank) with k = 60")
    relations = Relations(("bm25", "dense"), "reciprocal-rank fusion of the BM25 and dense lists")
    shown_by_default = False  # CLEAR is the hybrid on show; RRF and the weighted sum on request


class WeightedSum(_Fusion):
    key, label, short, fusion = "wsum", "Hybrid (weighted sum)", "weighted sum", "wsum"
    citation = Citation("Sebastian Bruch, Siyu Gai, Amir Ingber", "An Analysis of Fusion Functions for Hybrid "
                        "Retrieval", "ACM TOIS 42(1), arXiv:2210.11934", 2023, "§4, convex combination of "
                        "min-max normalized scores")
    relations = Relations(("bm25", "dense"), "min-max normalized weighted sum of the BM25 and dense lists")
    shown_by_default = False


HYBRID = CLEAR = Clear()  # the CLEAR hybrid: what λ is asked of (``CLEAR.lambda_for(ws, split)``)
