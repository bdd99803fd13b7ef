"""λ, the CLEAR hybrid's weight on BM25 (λ·s_lex + s_emb): the grids it is tuned on, the choice a view
shows with its reason, and the policy that makes that choice.

Plain data and rules, no retrieval: the fitting itself (ranking candidates at every λ of a grid,
``retrieval.systems.fusion.fit_lambda``) and the caching (``systems.hybrid.lambda_fit``) live elsewhere, and a
fit on labelled queries (``LambdaFit``) and the training record of a fine-tuned encoder (``TrainedOn``) are the
leaf ``retrieval.training_record``'s, so that this module depends on nothing but that leaf.

The policy (``choose``), for one evaluated split:

* an encoder fine-tuned on the training split's very queries (``TrainedOn`` matches them) takes the
  λ its training chose on held-out queries it never saw (``of_trained``) — a λ tuned on its own
  training queries would favour it — or, without such a fit, the label-free λ;
* else, with a training split, λ is tuned there (``tuned``): the grid's best replaces the label-free
  choice — λ = 1 in the query-max space (cosine scores), ``LEX_ONLY`` where the encoder fails the
  reliability check (the grid then holds λ = ∞ too) — only where it beats it significantly
  (``LambdaFit.chosen``; in the raw space with a reliable encoder there is no prior, the best is taken).
  Without a ``train`` split the judged queries are the training split (``labels.JUDGED``); where they
  are also the split evaluated, λ is cross-fitted (``cross_fitted``): the judged queries are cut in two
  seeded halves (``labels.judged_folds``) and each half is ranked with the λ tuned, by the same rule, on
  the other half, so every judged query is evaluated and none at a λ tuned on itself (the cross-fitting
  of Chernozhukov et al., "Double/debiased machine learning for treatment and structural parameters",
  The Econometrics Journal 21(1), 2018, §3, applied to one hyperparameter); new queries (Search) take
  the λ tuned on all judged queries;
* else, in the query-max space, the label-free λ = 1 (``label_free``); for raw scores, scale
  matching (``scale_matched``) — unless the encoder cannot be trusted on this corpus
  (``reliability``: a language it was not trained on, or documents it maps almost alike): then
  ``LEX_ONLY``, the hybrid is BM25 alone, and the reason says so (``unreliable``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrieval.training_record import LambdaFit, TrainedOn

if TYPE_CHECKING:
    from retrieval.systems.reliability import DenseReliability

LAMBDA_GRID = (0.0, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
               0.2, 0.3, 0.5, 0.75, 1.0)
QUERY_MAX_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0,
                  4.0, 5.0)  # λ over BM25 / its query's largest possible score
LABEL_FREE_LAMBDA = 1.0  # the query-max space's equal weights: the default without labels
LEX_ONLY = math.inf  # λ → ∞: BM25 alone decides (the dense score only breaks its ties)
NO_LABELS = "no training labels: BM25 as a share of the query's best possible score, plus cosine, equal weights"


def grid_for(normalized: bool, prior: float | None) -> tuple[float, ...]:
    """The λ grid of a score space (``QUERY_MAX_GRID`` for cosines over query-max BM25, else
    ``LAMBDA_GRID``), with ``LEX_ONLY`` on it where that is the prior labels must beat."""
    return (QUERY_MAX_GRID if normalized else LAMBDA_GRID) + ((LEX_ONLY,) if prior == LEX_ONLY else ())


def shown(value: float) -> str:
    """λ as written: "1", "0.3", "∞" (``LEX_ONLY``)."""
    return "∞" if math.isinf(value) else f"{value:g}"


@dataclass(frozen=True)
class CrossFold:
    """One half of cross-fitted λ: the queries ranked with it, and the fit on the other half."""

    queries: frozenset[str]  # the queries this half's λ ranks (never ones it was tuned on)
    fit: LambdaFit  # tuned on the other half's queries

    @property
    def value(self) -> float:
        return self.fit.chosen


@dataclass
class LambdaChoice:
    """The λ a hybrid uses, and why, in words a user reads."""

    value: float  # cross-fitted: the λ of any query in no fold (new queries: tuned on all judged ones)
    how: str  # "tuned on <split> …", or NO_LABELS, or "scale-matched default (no training labels)"
    grid: list[tuple[float, float]] = field(default_factory=list)  # the sweep it was chosen on, if any
    per_query_max: bool = False  # BM25 divided by each query's largest possible score (cosine scores)
    folds: tuple[CrossFold, ...] = ()  # cross-fitted: each half's queries with the λ tuned on the other

    def at(self, query_id: str) -> float:
        """The λ that ranks ``query_id``: its fold's, else ``value``."""
        for fold in self.folds:
            if query_id in fold.queries:
                return fold.value
        return self.value

    @property
    def per_query(self) -> dict[str, float]:
        """query id -> λ for the queries of the folds (empty when not cross-fitted)."""
        return {q: fold.value for fold in self.folds for q in sorted(fold.queries)}

    @property
    def values_shown(self) -> str:
        """λ as written: "1", or cross-fitted "1 (half 1) and 0.5 (half 2)"."""
        if not self.folds:
            return shown(self.value)
        return " and ".join(f"{shown(f.value)} (half {i})" for i, f in enumerate(self.folds, 1))

    @property
    def formula(self) -> str:
        if self.lexical_only:
            return "BM25 alone (cosine only breaks ties)"
        return "λ·BM25/BM25max(q) + cosine" if self.per_query_max else "λ·BM25 + cosine"

    @property
    def lexical_only(self) -> bool:
        return math.isinf(self.value)


def against_prior(fit: LambdaFit, weight: str = "λ", prior_is: str = "the label-free") -> str:
    """How a ``weight`` (λ, or the three-way fusion's μ) fitted with a prior (``prior_is``: whose — the
    label-free weight, or a base model's) was kept: the grid's best beat the prior, or not ("" for a fit
    without a prior)."""
    if fit.prior is None:
        return ""
    p = "not tested" if fit.p_value is None else "p < 0.001" if fit.p_value < 0.001 else f"p {fit.p_value:.3f}"
    prior = f"{weight} {shown(fit.prior)}" + (" (BM25 alone: the encoder failed the reliability check)"
                                              if math.isinf(fit.prior) else "")
    if fit.best == fit.prior:
        return f": the grid's best is {prior_is} {prior} itself"
    if fit.chosen == fit.best:
        return f": {weight} {shown(fit.best)} beats {prior_is} {prior} ({p})"
    return (f": the grid's best {weight} {shown(fit.best)} does not beat {prior_is} {prior} significantly "
            f"({p}), so {weight} {shown(fit.prior)} is kept")


def tuned(fit: LambdaFit, split: str, normalized: bool) -> LambdaChoice:
    """λ tuned on ``split``'s labelled queries (the grid's best, or the prior it did not beat)."""
    how = f"tuned on {split} (nDCG@10, {fit.queries} queries)"
    if fit.prior is not None:
        how += against_prior(fit)
    return LambdaChoice(fit.chosen, how, fit.grid, per_query_max=normalized)


def cross_fitted(folds: tuple[CrossFold, CrossFold], everything: LambdaFit, split: str,
                 normalized: bool) -> LambdaChoice:
    """λ cross-fitted on ``split``'s labelled queries (module docstring): each of the two ``folds``
    ranks its queries with the λ tuned on the other; ``everything``, the fit on all of them, gives
    the λ of new queries."""
    halves = []
    for i, fold in enumerate(folds, 1):
        text = (f"half {i} ({len(fold.queries)} queries) with λ {shown(fold.value)}, tuned on the other half's "
                f"{fold.fit.queries} queries")
        halves.append(text + (against_prior(fold.fit) if fold.fit.prior is not None else ""))
    how = (f"cross-fitted: each half evaluated with λ tuned on the other half — {'; '.join(halves)}; "
           f"new queries (Search) take λ {shown(everything.chosen)}, tuned on all {everything.queries} {split} "
           "queries (nDCG@10)")
    return LambdaChoice(everything.chosen, how, everything.grid, per_query_max=normalized, folds=tuple(folds))


def of_trained(seen: TrainedOn | None, split: str, fingerprint: str, normalized: bool) -> LambdaChoice | None:
    """λ for an encoder fine-tuned on ``split``'s queries (``seen`` names that split, those queries
    — by ``fingerprint`` — and this λ space), else None."""
    if seen is None or seen.split != split or seen.per_query_max != normalized or seen.queries != fingerprint:
        return None
    if seen.fit is not None:
        fit = seen.fit
        how = f"chosen on {fit.queries} held-out {split} queries the encoder was not trained on"
        if fit.prior is not None and fit.p_value is not None:
            how += against_prior(fit)
        return LambdaChoice(fit.chosen, how, fit.grid, per_query_max=normalized)
    if normalized:
        return LambdaChoice(LABEL_FREE_LAMBDA, f"the encoder was trained on the {split} queries, so λ is not "
                            f"tuned on them: {NO_LABELS}", per_query_max=True)
    return None


def label_free() -> LambdaChoice:
    """The query-max space's equal weights, without labels."""
    return LambdaChoice(LABEL_FREE_LAMBDA, NO_LABELS, per_query_max=True)


def unreliable(check: DenseReliability, normalized: bool) -> LambdaChoice:
    """BM25 alone, because the dense encoder cannot be trusted on this corpus (``check`` says why)."""
    why = []
    if check.language_mismatch:
        why.append(f"the encoder {check.encoder} was trained on English and {check.language_share:.0%} of a sample "
                   f"of this corpus is detected as {check.language!r}")
    if check.collapsed:
        why.append(f"the encoder maps this corpus's documents almost alike (spread {check.spread:.2f} against "
                   f"{check.reference_spread:.2f} on English text: 1 − mean cosine between documents)")
    return LambdaChoice(LEX_ONLY, f"no training labels, and {'; and '.join(why)}: its cosines would only pull "
                        "BM25 down, so the hybrid is BM25 alone", per_query_max=normalized)


def scale_matched(value: float) -> LambdaChoice:
    """Raw scores without labels: λ matching the two scores' spreads (``fusion.default_lambda``)."""
    return LambdaChoice(value, "scale-matched default (no training labels)")


def fixed(value: float, how: str, normalized: bool) -> LambdaChoice:
    """A λ chosen elsewhere (e.g. on a held-out split), in the space the hybrid scores in."""
    return LambdaChoice(float(value), how, per_query_max=normalized)


def choose(train: str | None, normalized: bool, trained: Callable[[str], LambdaChoice | None],
           fit: Callable[[str], LambdaFit], scale: Callable[[], float],
           reliability: Callable[[], DenseReliability] | None = None,
           cross: Callable[[str], LambdaChoice] | None = None) -> LambdaChoice:
    """The policy (module docstring): ``train`` the training split (None: there is none),
    ``normalized`` whether the hybrid scores in the query-max space; ``trained(train)`` the choice a
    fine-tuned encoder brings, ``fit(train)`` the λ tuned there, ``cross(train)`` λ cross-fitted
    there (given only where ``train`` is the split evaluated), ``scale()`` the scale-matched λ,
    ``reliability()`` the dense encoder's checks on this corpus — each called only when the policy
    needs it."""
    if train:
        return trained(train) or (cross(train) if cross else tuned(fit(train), train, normalized))
    check = reliability() if reliability is not None else None
    if check is not None and not check.reliable:
        return unreliable(check, normalized)
    return label_free() if normalized else scale_matched(scale())
