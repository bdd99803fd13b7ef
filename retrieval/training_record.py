"""The training record a fine-tuned model carries: the queries it trained on and the hybrid's weights fitted
for it (``TrainedOn``), and a weight's fit on labelled queries (``LambdaFit``: λ of the CLEAR hybrid, μ of the
three-way fusion).

Plain data, read and written as JSON: ``training.finetune`` writes the record beside the model
(``retrieval.index.encoder.TRAINING_RECORD``), the encoders read it back where a model is opened
(``retrieval.index.encoder.read_trained_on``, ``retrieval.index.splade``), and the hybrids' policy
(``retrieval.systems.clear_lambda.choose``, ``retrieval.systems.hybrid3``) uses it. A leaf, so that an index may
hold the record without importing a system: it imports the significance level and nothing else of RankScope.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.evaluation.metrics import SIGNIFICANCE_LEVEL


@dataclass
class LambdaFit:
    """λ_test tuned on labelled queries: the grid's best, and whether it beat the prior."""

    best: float  # the grid's best λ (the smaller on a tie)
    grid: list[tuple[float, float]]  # (λ, metric) over the grid
    queries: int  # labelled queries tuned on
    prior: float | None = None  # the λ kept unless ``best`` beats it significantly (None: no prior)
    p_value: float | None = None  # paired permutation test, ``best`` vs ``prior`` on those queries

    @property
    def chosen(self) -> float:
        """``best`` where there is no prior or it beats the prior at the 0.05 level, else the prior."""
        if self.prior is None or (self.p_value is not None and self.p_value < SIGNIFICANCE_LEVEL):
            return self.best
        return self.prior

    def to_json(self) -> dict[str, Any]:
        return {"best": self.best, "grid": [list(r) for r in self.grid], "queries": self.queries,
                "prior": self.prior, "p_value": self.p_value}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LambdaFit:
        """A fit read back (a training record, the store): every field checked, a ``ValueError`` if not as written."""
        best, grid, queries, prior, p = obj["best"], obj["grid"], obj["queries"], obj["prior"], obj["p_value"]
        if not (_number(best) and isinstance(grid, list) and isinstance(queries, int) and not isinstance(queries, bool)
                and all(isinstance(r, list | tuple) and len(r) == 2 and all(_number(v) for v in r) for r in grid)
                and (prior is None or _number(prior)) and (p is None or _number(p))):
            raise ValueError("a weight's fit is not as written: best, grid, queries, prior, p_value")
        return cls(float(best), [(float(w), float(m)) for w, m in grid], queries,
                   None if prior is None else float(prior), None if p is None else float(p))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class TrainedOn:
    """The labelled queries a fine-tuned encoder was trained on, and the hybrid's λ fitted for it on
    held-out queries it never saw (written beside the model, ``retrieval.index.encoder.TRAINING_RECORD``).

    A λ tuned on the encoder's own training queries favours the encoder, which ranks those queries
    better than any new one, so ``retrieval.systems.clear_lambda.choose`` uses this instead.
    """

    split: str  # the split whose queries it trained on
    queries: str  # ``dataset.queries_fingerprint`` of that split's labelled queries
    fit: LambdaFit | None = None  # λ fitted on the held-out queries (None: no held-out check was made)
    per_query_max: bool = True  # the λ space: BM25 over the query's largest possible score, or raw
    held_out: tuple[str, ...] = ()  # the split's queries its held-out check kept out of training
    # a fine-tuned learned sparse model: the three-way fusion's μ its base was given on that split (tuned on all
    # of its labelled queries, none of which the base saw; ``hybrid3.base_mu``), the prior of its own μ
    base_mu: LambdaFit | None = None
    base_mu_beside: str = ""  # the fingerprint of the dense encoder that μ was tuned beside ("" unknown)

    def to_json(self) -> dict[str, Any]:
        return {"split": self.split, "queries": self.queries, "per_query_max": self.per_query_max,
                "fit": self.fit.to_json() if self.fit else None, "held_out": list(self.held_out),
                "base_mu": self.base_mu.to_json() if self.base_mu else None, "base_mu_beside": self.base_mu_beside}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TrainedOn:
        fit, held, base_mu = obj.get("fit"), obj.get("held_out") or [], obj.get("base_mu")
        if not isinstance(held, list) or not all(isinstance(q, str) for q in held):
            raise ValueError("the training record's held-out queries are not a list of query ids")
        per_query_max, beside = obj.get("per_query_max", True), obj.get("base_mu_beside", "")
        if not (isinstance(obj["split"], str) and isinstance(obj["queries"], str) and isinstance(per_query_max, bool)
                and isinstance(beside, str)):
            raise ValueError("the training record's split, queries, λ space or encoder is not as written")
        return cls(obj["split"], obj["queries"], LambdaFit.from_json(fit) if fit else None, per_query_max, tuple(held),
                   LambdaFit.from_json(base_mu) if base_mu else None, beside)
