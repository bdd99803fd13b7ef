"""Training losses, as sentence-transformers-compatible ``nn.Module``s.

Each takes the SentenceTransformer being trained, implements ``forward(sentence_features, labels)``
like the library's own losses (so it also works with ``SentenceTransformerTrainer``), exposes
``compute_loss_from_embeddings(embeddings, labels)`` so tests can pin it to hand-computed values,
and (the two written here) a ``citation`` property with the BibTeX entry of its paper.

* ``QuadrupletLoss`` — Peiyang Liu, Sen Wang, Xi Wang, Wei Ye, Shikun Zhang, "QuadrupletBERT: An
  Efficient Model For Embedding-Based Large-Scale Retrieval", NAACL-HLT 2021, §3.1, eq. 3–4.
* ``ResidualMarginLoss`` — CLEAR: Luyu Gao, Zhuyun Dai, Tongfei Chen, Zhen Fan, Benjamin Van Durme,
  Jamie Callan, "Complement Lexical Retrieval Model with Semantic Residual Embeddings", ECIR 2021
  (arXiv:2004.13969), §3.3, eq. 6–7.
* ``triplet_loss`` — the three-tower Sentence-BERT baseline of QuadrupletBERT (§4.1):
  sentence-transformers' ``TripletLoss`` with cosine distance, ``[f(q,p) − f(q,n) + m]₊``.
* ``inbatch_loss`` — in-batch negatives plus strong negatives (Yiding Liu, Guan Huang, Jiaxiang
  Liu, Weixue Lu, Suqi Cheng, Yukun Li, Daiting Shi, Shuaiqiang Wang, Zhicong Cheng, Dawei Yin,
  "Pre-trained Language Model for Web-scale Retrieval in Baidu Search", KDD 2021, arXiv:2106.03373,
  §3.3–3.4): sentence-transformers' ``MultipleNegativesRankingLoss``, a softmax over the positive,
  the given hard negatives and every other document of the batch.
* ``margin_mse_loss`` — Margin-MSE distillation (Sebastian Hofstätter, Sophia Althammer, Michael
  Schröder, Mete Sertkan, Allan Hanbury, "Improving Efficient Neural Ranking Models with
  Cross-Architecture Knowledge Distillation", arXiv:2010.02666, §3, eq. 1):
  ``MSE(M_s(q, p) − M_s(q, n), M_t(q, p) − M_t(q, n))``, sentence-transformers' ``MarginMSELoss``
  with the dot product as M_s; the labels are the teacher's margins (``TrainConfig.teacher``).
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from retrieval.systems import HYBRID
from retrieval.systems.hybrid3 import KEY as HYBRID3

try:  # sentence-transformers ≥ 6
    from sentence_transformers.sentence_transformer.losses import (
        MarginMSELoss,
        MultipleNegativesRankingLoss,
        TripletDistanceMetric,
        TripletLoss,
    )
except ImportError:  # pragma: no cover - older releases
    from sentence_transformers.losses import (  # type: ignore[import-not-found,no-redef]
        MarginMSELoss,
        MultipleNegativesRankingLoss,
        TripletDistanceMetric,
        TripletLoss,
    )


def match(q: Tensor, d: Tensor) -> Tensor:
    """Row by row, the query–document dot product q·d; for a poly-attention query ``q`` of shape
    (batch, m, dim), max_i P_i·d (Yiding Liu et al., "Pre-trained Language Model for Web-scale
    Retrieval in Baidu Search", KDD 2021, arXiv:2106.03373, §3.2 eq. 3)."""
    if q.dim() == 3:
        return torch.einsum("bmd,bd->bm", q, d).max(dim=1).values
    return (q * d).sum(-1)


def cosine_distance(x: Tensor, y: Tensor) -> Tensor:
    """f(X, Y) = 1 − X·Y / (‖X‖·‖Y‖), row by row (QuadrupletBERT eq. 4); for a poly-attention
    ``x`` (batch, m, dim), 1 − max_i cos(P_i, Y)."""
    if x.dim() == 3:
        return 1.0 - match(F.normalize(x, dim=-1), F.normalize(y, dim=-1))
    return 1.0 - F.cosine_similarity(x, y, dim=-1)


class _EmbeddingLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        """The first input is the query: when the model gives it poly-attention embeddings (P_1 … P_m),
        they stand in for its one vector (normalized when the model normalizes its outputs), and the losses score
        it by ``match`` (training's eq. 3; serving uses their mean, eq. 4)."""
        outputs = [self.model(f) for f in sentence_features]
        embeddings = [o["sentence_embedding"] for o in outputs]
        poly = outputs[0].get("poly_embeddings")
        if poly is not None:
            normalizes = any(type(m).__name__ == "Normalize" for m in self.model)
            embeddings[0] = F.normalize(poly, dim=-1) if normalizes else poly
        return self.compute_loss_from_embeddings(embeddings, labels)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None = None) -> Tensor:
        """The loss of the inputs' embeddings (query first), each subclass's own formula."""
        raise NotImplementedError


class QuadrupletLoss(_EmbeddingLoss):
    """QuadrupletBERT §3.1, eq. (3) with the cosine distance of eq. (4). Inputs (q, p, n[, hn]):

        d_p = f(q, p),  d_n = f(q, n),  d_h = f(hn, n)
        loss_h = [d_p − d_h + m]₊,   loss_n = [d_p − d_n + m]₊
        loss = Σ_i max(loss_h_i, loss_n_i)

    n is a random ("simple") negative, hn a hard negative mined with the stage-one model.
    ``reduction="mean"`` (default) divides the paper's sum by the batch size, so the learning
    rate does not depend on it; ``"sum"`` is the paper's form. Stage one of the two-stage schedule
    (§4.1: "we firstly train our model with loss_h = 0 until the loss is converged") is ``stage=1``, or simply passing
    three inputs; then loss_h is 0 and max(0, loss_n) = loss_n.
    """

    def __init__(self, model, margin: float = 0.1, stage: int = 2, reduction: str = "mean"):
        super().__init__(model)
        if reduction not in ("mean", "sum"):
            raise ValueError("reduction must be 'mean' or 'sum'")
        self.margin, self.stage, self.reduction = margin, stage, reduction

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None = None) -> Tensor:
        q, p, n = embeddings[:3]
        d_p, d_n = cosine_distance(q, p), cosine_distance(q, n)
        loss_n = F.relu(d_p - d_n + self.margin)
        if self.stage == 1 or len(embeddings) < 4:
            per_example = loss_n  # loss_h = 0 and loss_n ≥ 0
        else:
            d_h = cosine_distance(embeddings[3], n)
            loss_h = F.relu(d_p - d_h + self.margin)
            per_example = torch.maximum(loss_h, loss_n)
        return per_example.mean() if self.reduction == "mean" else per_example.sum()

    def get_config_dict(self) -> dict:
        return {"margin": self.margin, "stage": self.stage, "reduction": self.reduction}

    @property
    def citation(self) -> str:
        return """
@inproceedings{liu-etal-2021-quadrupletbert,
    title = "{Q}uadruplet{BERT}: An Efficient Model For Embedding-Based Large-Scale Retrieval",
    author = "Liu, Peiyang and Wang, Sen and Wang, Xi and Ye, Wei and Zhang, Shikun",
    booktitle = "Proceedings of the 2021 Conference of the North American Chapter of the Association for Computational Linguistics: Human Language Technologies",
    year = "2021",
    publisher = "Association for Computational Linguistics",
    pages = "3734--3739",
    url = "https://aclanthology.org/2021.naacl-main.292",
    doi = "10.18653/v1/2021.naacl-main.292"
}
"""  # noqa: E501 - the proceedings' full title


class ResidualMarginLoss(_EmbeddingLoss):
    """CLEAR §3.3, eq. (6)–(7). Inputs (q, d⁺, d⁻); ``labels`` holds s_lex(q,d⁺) − s_lex(q,d⁻) per row:

        m_r = ξ − λ_train · (s_lex(q,d⁺) − s_lex(q,d⁻))
        loss = mean_i [m_r − s_emb(q,d⁺) + s_emb(q,d⁻)]₊,   s_emb = dot product

    A pair BM25 already ranks right (large positive gap) gets a small margin; a BM25 mistake
    (negative gap) a large one. ``lambda_train = 0`` is the constant-margin ablation. ξ = 1 and
    λ_train = 0.1 are the paper's values (§4) for unnormalized BERT dot products and MS MARCO BM25
    scores; with a normalizing encoder (dot = cosine ∈ [−1, 1]) rescale them (``suggest_scale``).
    """

    def __init__(self, model, xi: float = 1.0, lambda_train: float = 0.1):
        super().__init__(model)
        self.xi, self.lambda_train = xi, lambda_train

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None = None) -> Tensor:
        q, pos, neg = embeddings[:3]
        if labels is None:
            raise ValueError("ResidualMarginLoss needs the BM25 score gaps as labels")
        gap = labels.to(q.dtype).to(q.device)
        margin = self.xi - self.lambda_train * gap
        s_pos, s_neg = match(q, pos), match(q, neg)
        return F.relu(margin - s_pos + s_neg).mean()

    def get_config_dict(self) -> dict:
        return {"xi": self.xi, "lambda_train": self.lambda_train}

    @property
    def citation(self) -> str:
        return """
@inproceedings{gao2021complement,
    title={Complement Lexical Retrieval Model with Semantic Residual Embeddings},
    author={Luyu Gao and Zhuyun Dai and Tongfei Chen and Zhen Fan and Benjamin Van Durme and Jamie Callan},
    booktitle={Advances in Information Retrieval (ECIR 2021)},
    year={2021},
    doi={10.1007/978-3-030-72113-8_10},
    eprint={2004.13969},
    archivePrefix={arXiv},
    primaryClass={cs.IR}
}
"""


def suggest_scale(gaps, normalized: bool = True) -> tuple[float, float]:
    """(ξ, λ_train) for a corpus: ξ a fraction of the dot-product range, λ_train·spread(gaps) ≈ ξ.

    The paper's ξ = 1 against unnormalized BERT dot products is about a tenth of their spread;
    for cosine scores (range 2) we keep ξ = 0.3 and set λ_train so that one standard deviation
    of the BM25 gap moves the margin by ξ/2, clipped to [0.001, 0.1].
    """
    import numpy as np

    gaps = np.asarray(list(gaps), dtype=np.float64)
    xi = 0.3 if normalized else 1.0
    spread = float(gaps.std()) if len(gaps) > 1 else 0.0
    lam = 0.1 if spread == 0 else float(np.clip(xi / 2 / spread, 0.001, 0.1))
    return xi, round(lam, 4)


def triplet_loss(model, margin: float = 0.1) -> TripletLoss:
    """Three-tower baseline: [f(q,p) − f(q,n) + m]₊ with cosine distance f (mean over the batch)."""
    return TripletLoss(model, distance_metric=TripletDistanceMetric.COSINE, triplet_margin=margin)


def inbatch_loss(model, scale: float = 20.0) -> MultipleNegativesRankingLoss:
    """Softmax cross-entropy over (positive, hard negatives, other in-batch documents); s = scale·cos."""
    return MultipleNegativesRankingLoss(model, scale=scale)


def margin_mse_loss(model) -> MarginMSELoss:
    """(q, p, n) with the teacher's margin M_t(q, p) − M_t(q, n) as the label: the squared error of
    the student's margin q·p − q·n against it, averaged over the batch (Hofstätter et al. eq. 1)."""
    return MarginMSELoss(model)


LOSSES = ("quadruplet", "residual", "triplet", "inbatch", "marginmse")
FAMILIES = ("dense", "sparse")  # what a training trains: the dense encoder, or the learned sparse model (SPLADE)
SPARSE_LOSSES = ("inbatch",)  # the losses the learned sparse model trains with (``training.sparse``)
SPARSE_NEGATIVES = ("bm25", "random")  # and where its negatives come from
DENSE_ONLY = ("margin", "xi", "lambda_train", "pretrain", "query_pooling", "poly_codes", "refit",
              "teacher")  # ``TrainConfig`` fields the learned sparse model's training does not read
TEACHERS = (HYBRID, HYBRID3)  # the systems Margin-MSE may distil (their scores of any document: exact_scores)
