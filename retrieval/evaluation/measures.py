"""Evaluation: standard metrics as ranx defines them, metrics for incomplete labels as ir-measures
does, PNR by hand, per-query deltas and significance.

Metrics (ranx's definitions, trec_eval conventions: linear gain nDCG, a label > 0 is relevant;
computed from the run with numpy in ``rank_metrics``, which says how equal scores are ranked):
``ndcg@10, mrr@10, recall@10, recall@100, recall@1000, map, p@10``. Only queries with at least one
relevant label are evaluated; a query the system returns nothing for scores 0. A document without
a label counts as non-relevant: with few labels (judging has just begun) these metrics understate
every system, most of all the ones whose lists were not pooled.

For incomplete labels (ir-measures 0.4.3: ``Bpref`` through pytrec_eval, ``Judged@k`` as its
"judged" provider computes it, with numpy in ``rank_metrics.judged``), beside nDCG:

* ``bpref`` (Buckley and Voorhees, "Retrieval Evaluation with Incomplete Information", SIGIR 2004,
  pp. 25-32), as trec_eval computes it: over the R relevant and N judged non-relevant documents,
  (1/R) Σ_{relevant r retrieved} (1 − min(n_r, R) / min(R, N)), n_r the judged non-relevant ones
  ranked above r; unjudged documents are skipped, not counted non-relevant. Evaluated on the
  queries with a relevant label. Not ranx's ``bpref``: ranx 0.3.21 divides by min(R, N) even when
  N = 0 and returns NaN for a query without a judged non-relevant document (BEIR qrels, which list
  relevant documents only; a query whose pool was all relevant), where trec_eval counts each
  relevant document retrieved before any non-relevant one as 1.
* ``judged@k``: the share of a system's top k that carries a label of any grade, 0 included (a
  documented ir-measures behaviour: a list shorter than k is divided by its length). Evaluated on
  every query with a label, relevant or not; a query the system returns nothing for scores 0.

PNR, the positive-negative ratio (Liu et al., "Pre-trained Language Model for Web-scale Retrieval
in Baidu Search", KDD 2021, arXiv:2106.03373, §6.2, eq. 8), per query q
over its judged documents D_q with graded labels y and model scores f:

    PNR_q = Σ_{d_i,d_j ∈ D_q} 1(y_i > y_j)·1(f(q,d_i) > f(q,d_j))
            / Σ_{d_i,d_j ∈ D_q} 1(y_i > y_j)·1(f(q,d_i) < f(q,d_j))

reported as the mean over queries. Ties in f count on neither side. The paper leaves two cases
open; we (1) skip queries whose judged documents all share one label (no pairs), and (2) divide
by max(1, discordant) so a query with no discordant pair contributes its concordant count. PNR
needs a score for every judged document, not only for those a run retrieved: pass exact scores
(``pnr_scores``) where the system can give them; otherwise judged documents missing from the run
are taken to score below everything it retrieved.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from retrieval import numbers
from retrieval.data import ranking
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.intervals import Interval, mean_interval, sign_flip_test
from retrieval.evaluation.metrics import (
    BPREF,
    CONDENSED_DEPTH,
    METRICS,
    NDCG_CONDENSED,
    PRIMARY,
    SIGNIFICANCE_LEVEL,
    SIGNIFICANT,
    SUMMARY_METRICS,
)


@dataclass
class Evaluation:
    """Mean metrics and per-query values for one run on one set of labels."""

    mean: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> qid -> value
    _intervals: dict[str, Interval] = field(default_factory=dict, repr=False, compare=False)

    def interval(self, metric: str) -> Interval:
        """The 95% interval of the mean ``metric`` over the evaluated queries (``intervals``:
        percentile bootstrap over queries, seeded); undefined with fewer than 2 queries."""
        if metric not in self._intervals:
            self._intervals[metric] = mean_interval(self.per_query.get(metric, {}).values())
        return self._intervals[metric]

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "per_query": self.per_query}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Evaluation:
        return cls(obj["mean"], obj["per_query"])


def positive_qrels(qrels: Qrels) -> Qrels:
    """Labels of the queries that have at least one relevant (> 0) document."""
    return {q: docs for q, docs in qrels.items() if any(v > 0 for v in docs.values())}


def evaluate_run(run: Run, qrels: Qrels, metrics: Sequence[str] = METRICS,
                 pnr_scores: dict[str, dict[str, float]] | None = None) -> Evaluation:
    """Mean and per-query metrics of ``run`` against ``qrels`` (plus ``pnr`` for graded labels).

    ``metrics``: ranx names (``METRICS``), ``bpref`` and ``judged@k`` (see the module's docstring);
    a metric no query can be evaluated on has a NaN mean and no per-query values.
    """
    incomplete = [m for m in metrics if is_incomplete_metric(m)]
    per_query = _ranx_scores(run, qrels, [m for m in metrics if m not in incomplete])
    per_query.update(_incomplete_scores(run, qrels, incomplete))
    mean = {m: float(np.mean(list(per_query[m].values()))) if m in per_query else float("nan")
            for m in metrics}
    pnr_mean, pnr_per_query = pnr(qrels, pnr_scores if pnr_scores is not None else scores_from_run(run, qrels))
    if pnr_per_query:
        mean["pnr"] = pnr_mean
        per_query["pnr"] = pnr_per_query
    return Evaluation(mean, per_query)


def is_incomplete_metric(metric: str) -> bool:
    """Whether ``metric`` is one of those for incomplete labels: ``bpref``, ``judged@k`` or nDCG'@10."""
    cutoff = metric[len("judged@"):] if metric.startswith("judged@") else ""
    return metric in (BPREF, NDCG_CONDENSED) or (numbers.is_count(cutoff) and int(cutoff) > 0)


def _ranx_scores(run: Run, qrels: Qrels, metrics: list[str]) -> dict[str, dict[str, float]]:
    """metric -> query id -> value over the queries with a relevant label: ranx's ranked-list
    metrics computed from the run with numpy (``rank_metrics``), any other ranx name by ranx."""
    from retrieval.evaluation.rank_metrics import ranx_scores, scores, supported

    evaluated = positive_qrels(qrels)
    if not evaluated or not metrics:
        return {}
    ours = [m for m in metrics if supported(m)]
    out = scores(run, evaluated, ours) if ours else {}
    rest = [m for m in metrics if m not in out]
    if rest:
        out.update(ranx_scores(run, evaluated, rest))
    return {m: out[m] for m in metrics}


def _incomplete_scores(run: Run, qrels: Qrels, metrics: list[str]) -> dict[str, dict[str, float]]:
    """metric -> query id -> value of ``bpref`` (by ir-measures) / ``judged@k`` (``rank_metrics.judged``,
    ir-measures' definition): the module's docstring."""
    from retrieval.evaluation.rank_metrics import judged

    out: dict[str, dict[str, float]] = {}
    for m in metrics:
        if m == NDCG_CONDENSED:  # nDCG@10 of each list's top CONDENSED_DEPTH without its unjudged documents
            labels = positive_qrels(qrels)
            top = {q: ranking.sorted_hits(run.get(q, []))[:CONDENSED_DEPTH] for q in labels}  # trec_eval's top
            kept = {q: [(d, s) for d, s in top[q] if d in labels[q]] for q in labels}
            if labels:
                out[m] = _ranx_scores(kept, labels, [PRIMARY])[PRIMARY]
            continue
        if m != BPREF:
            labels = {q: docs for q, docs in qrels.items() if docs}
            if labels:
                out[m] = judged(run, labels, int(m[len("judged@"):]))
            continue
        import ir_measures

        labels = positive_qrels(qrels)
        if not labels:
            continue
        # ir-measures skips a query without a list
        lists = {q: {d: float(s) for d, s in run[q]} for q in labels if run.get(q)}
        values = dict.fromkeys(labels, 0.0)
        if lists:
            values.update({r.query_id: float(r.value)
                           for r in ir_measures.pytrec_eval.iter_calc([ir_measures.Bpref], labels, lists)})
        out[m] = values
    return out


def scores_from_run(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """Scores of judged documents from a run; a judged document missing from it gets -inf."""
    out = {}
    for q, docs in qrels.items():
        got = dict(run.get(q, []))
        out[q] = {d: float(got.get(d, float("-inf"))) for d in docs}
    return out


def pnr(qrels: Qrels, scores: dict[str, dict[str, float]]) -> tuple[float, dict[str, float]]:
    """Mean PNR over queries with at least one pair of differently-labelled judged documents."""
    per_query: dict[str, float] = {}
    for q, labels in qrels.items():
        if len(set(labels.values())) < 2:
            continue
        docs = list(labels)
        y = np.array([labels[d] for d in docs], dtype=np.float64)
        f = np.array([scores.get(q, {}).get(d, float("-inf")) for d in docs], dtype=np.float64)
        better = y[:, None] > y[None, :]
        # -inf vs -inf compares as neither greater nor smaller: a tie, as documented
        concordant = int(np.sum(better & (f[:, None] > f[None, :])))
        discordant = int(np.sum(better & (f[:, None] < f[None, :])))
        per_query[q] = concordant / max(1, discordant)
    if not per_query:
        return float("nan"), {}
    return float(np.mean(list(per_query.values()))), per_query


@dataclass
class Comparison:
    """System B against system A on one metric, query by query."""

    metric: str
    mean_a: float
    mean_b: float
    delta: float
    p_value: float
    test: str
    wins: list[str]  # queries where B beats A
    losses: list[str]  # queries where A beats B
    ties: int
    # of the mean per-query B − A, by the same test as p_value (``compare``): it excludes 0 exactly
    # when p < SIGNIFICANCE_LEVEL
    interval: Interval = field(default_factory=Interval.undefined)

    @property
    def significant(self) -> bool:
        return bool(self.p_value < SIGNIFICANCE_LEVEL)

    @property
    def queries(self) -> int:
        return len(self.wins) + len(self.losses) + self.ties

    def flipped(self) -> Comparison:
        """The same comparison as A − B (the p-value is two-sided: unchanged)."""
        iv = self.interval
        return Comparison(self.metric, self.mean_b, self.mean_a, -self.delta, self.p_value, self.test,
                          list(self.losses), list(self.wins), self.ties, Interval(-iv.high, -iv.low, iv.level))

    @property
    def same(self) -> bool:
        """B and A scored the same on every one of at least two queries compared (to rounding,
        ``compare``): nothing to separate, which more of these queries would not change."""
        return self.queries >= 2 and self.interval.defined and self.interval.low == 0.0 == self.interval.high

    @property
    def outcome(self) -> str:
        """``"b"`` when B is better (p < 0.05, its interval above 0), ``"a"`` when A is (below 0),
        else ``"open"``: not separable on these queries yet. With the permutation test the two
        conditions are one (``intervals.sign_flip_test``)."""
        if self.significant and self.interval.excludes(0.0):
            return "b" if self.interval.low > 0 else "a"
        return "open"


def compare(a: Evaluation, b: Evaluation, metric: str = "ndcg@10", test: str = "permutation",
            n_resamples: int = 10_000, seed: int = 0) -> Comparison:
    """Paired significance test of B − A over the queries both were evaluated on, with the 95%
    interval of the mean difference that the same test gives, so that the interval excludes 0
    exactly when p < 0.05.

    ``permutation``: paired randomization (sign-flip) test of the mean difference (the test CLEAR
    uses, Gao et al., "Complement Lexical Retrieval Model with Semantic Residual Embeddings", ECIR
    2021, arXiv:2004.13969, §4), and as the interval the shifts it does not reject
    (``intervals.sign_flip_test``; ``paired_permutation_p`` is its p);
    ``ttest``: paired two-sided Student t-test (``scipy.stats.ttest_rel``) and its t interval.
    """
    qa, qb = a.per_query.get(metric, {}), b.per_query.get(metric, {})
    qids = [q for q in qa if q in qb]
    xa = np.array([qa[q] for q in qids], dtype=np.float64)
    xb = np.array([qb[q] for q in qids], dtype=np.float64)
    diff = xb - xa
    if test not in ("permutation", "ttest"):
        raise ValueError(f"unknown test {test!r}; choose 'permutation' or 'ttest'")
    if len(qids) < 2:
        p, interval = 1.0, Interval.undefined()
    elif np.allclose(diff, 0):  # rounding noise is no difference
        p, interval = 1.0, Interval(0.0, 0.0)
    elif test == "ttest":
        from scipy import stats  # scipy.stats takes a second to import: here, where the t-test is asked for

        result = stats.ttest_rel(xb, xa)
        ci = result.confidence_interval(1 - SIGNIFICANCE_LEVEL)
        p, interval = float(result.pvalue), Interval(float(ci.low), float(ci.high))
    else:
        flip = sign_flip_test(diff, 1 - SIGNIFICANCE_LEVEL, n_resamples, seed)
        p, interval = flip.p_value, flip.interval
    return Comparison(metric, float(xa.mean()) if len(xa) else float("nan"),
                      float(xb.mean()) if len(xb) else float("nan"), float(diff.mean()) if len(diff) else 0.0,
                      p, test, [q for q, d in zip(qids, diff) if d > 0],
                      [q for q, d in zip(qids, diff) if d < 0], int(np.sum(diff == 0)), interval)


def compare_pairs(evals: dict[str, Evaluation], metric: str = "ndcg@10",
                  pairs: list[tuple[str, str]] | None = None) -> list[tuple[str, str, Comparison]]:
    """Every pair of ``evals`` (or the ``pairs`` of their names asked for) compared on ``metric``
    (``compare``), as (worse, better, better − worse): B the better on the mean, A first on a tie."""
    names = list(evals)
    out = []
    for a, b in pairs or [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]:
        cmp = compare(evals[a], evals[b], metric)
        out.append((a, b, cmp) if cmp.delta >= 0 else (b, a, cmp.flipped()))
    return out


def paired_permutation_p(diff: ArrayLike, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired randomization test of the mean difference: each query's
    difference keeps or flips its sign at random (swapping its two systems), and p is the share of
    the ``n_resamples`` sign patterns whose mean is at least as far from 0 as the observed one, as
    ``scipy.stats.permutation_test(..., permutation_type="samples")`` computes it — every pattern
    when there are at most ``n_resamples`` (exact), else random ones with the +1 adjustment, and
    twice the smaller tail. Written out (``intervals.sign_flip_test``, which inverts the same test
    into the difference's interval) because scipy's general routine is slow for a test every table
    runs dozens of (``bench/eval_speed.py`` times a table); ``tests/retrieval/evaluation/test_evaluate.py`` checks the
    two agree."""
    return sign_flip_test(diff, n_resamples=n_resamples, seed=seed).p_value


def significance_marks(evals: dict[str, Evaluation], base: str,
                       metrics: Sequence[str] = SUMMARY_METRICS) -> dict[str, dict[str, str]]:
    """``{system: {metric: "†"}}`` where the system differs from ``base`` at p < ``SIGNIFICANCE_LEVEL``
    (``compare``)."""
    marks: dict[str, dict[str, str]] = {}
    for system, ev in evals.items():
        if system == base:
            continue
        for m in metrics:
            if compare(evals[base], ev, m).significant:
                marks.setdefault(system, {})[m] = SIGNIFICANT
    return marks
