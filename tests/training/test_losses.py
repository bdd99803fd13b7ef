"""Training losses pinned to hand-computed values on small explicit tensors, then run through a
real tiny transformer (``forward`` must agree with ``compute_loss_from_embeddings``)."""
from __future__ import annotations

import math
import re

import pytest
import torch

from training.losses import (
    QuadrupletLoss,
    ResidualMarginLoss,
    cosine_distance,
    inbatch_loss,
    margin_mse_loss,
    suggest_scale,
    triplet_loss,
)


def e(degrees: float, length: float = 1.0) -> list[float]:
    """A 2-D vector at ``degrees`` (``length`` ≠ 1 shows the cosine ignores the norm)."""
    r = math.radians(degrees)
    return [length * math.cos(r), length * math.sin(r)]


def t(*rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


@pytest.fixture(scope="module")
def st_model(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model.eval()  # no dropout: two forward passes give the same embeddings
    return model


# Three rows (q, p, n, hn); cosine distance f = 1 − cos depends only on the angle between vectors.
#   row A: q 0°, p 90° (length 3), n 60°, hn 60° (length 2)
#          d_p = 1 − cos 90° = 1,  d_n = 1 − cos 60° = 0.5,  d_h = f(hn, n) = 1 − cos 0° = 0
#   row B: q 30°, p 120°, n 90°, hn 180°
#          d_p = 1 − cos 90° = 1,  d_n = 1 − cos 60° = 0.5,  d_h = 1 − cos 90° = 1
#   row C: q 0°, p 0°, n 180°, hn 0°
#          d_p = 0,                d_n = 1 − cos 180° = 2,   d_h = 1 − cos 180° = 2
Q = t(e(0), e(30), e(0))
P = t(e(90, 3), e(120), e(0))
N = t(e(60), e(90), e(180))
HN = t(e(60, 2), e(180), e(0))


def test_cosine_distance_is_one_minus_cosine_row_by_row():
    # rows A, B, C above: f(q, p) = 1, 1, 0 and f(hn, n) = 0, 1, 2
    assert cosine_distance(Q, P).tolist() == pytest.approx([1.0, 1.0, 0.0], abs=1e-6)
    assert cosine_distance(HN, N).tolist() == pytest.approx([0.0, 1.0, 2.0], abs=1e-6)


def test_quadruplet_stage2_takes_the_larger_of_loss_h_and_loss_n_per_row():
    loss = QuadrupletLoss(model=None, margin=0.1, stage=2, reduction="sum")
    # m = 0.1:
    #   A: loss_h = [1 − 0 + 0.1]₊ = 1.1, loss_n = [1 − 0.5 + 0.1]₊ = 0.6  → 1.1 (loss_h wins)
    #   B: loss_h = [1 − 1 + 0.1]₊ = 0.1, loss_n = [1 − 0.5 + 0.1]₊ = 0.6  → 0.6 (loss_n wins)
    #   C: loss_h = [0 − 2 + 0.1]₊ = 0,   loss_n = [0 − 2 + 0.1]₊ = 0    → 0   (both 0)
    # sum = 1.1 + 0.6 + 0 = 1.7;  mean = 1.7 / 3
    assert loss.compute_loss_from_embeddings([Q, P, N, HN]).item() == pytest.approx(1.7, abs=1e-6)
    loss.reduction = "mean"
    assert loss.compute_loss_from_embeddings([Q, P, N, HN]).item() == pytest.approx(1.7 / 3, abs=1e-6)
    # row by row: each row alone is its own max
    for i, expected in enumerate([1.1, 0.6, 0.0]):
        one = [x[i:i + 1] for x in (Q, P, N, HN)]
        assert loss.compute_loss_from_embeddings(one).item() == pytest.approx(expected, abs=1e-6)


def test_quadruplet_margin_shifts_both_terms():
    loss = QuadrupletLoss(model=None, margin=0.3)  # mean reduction by default
    # m = 0.3:  A: max(1.3, 0.8) = 1.3;  B: max(0.3, 0.8) = 0.8;  C: max([−1.7]₊, [−1.7]₊) = 0
    # mean = (1.3 + 0.8 + 0) / 3 = 0.7
    assert loss.compute_loss_from_embeddings([Q, P, N, HN]).item() == pytest.approx(0.7, abs=1e-6)


def test_quadruplet_stage1_is_loss_n_only():
    # loss_h = 0: per row loss_n = 0.6, 0.6, 0 → sum 1.2, mean 0.4 (the hard negative is ignored)
    stage1 = QuadrupletLoss(model=None, margin=0.1, stage=1, reduction="sum")
    assert stage1.compute_loss_from_embeddings([Q, P, N, HN]).item() == pytest.approx(1.2, abs=1e-6)
    stage1.reduction = "mean"
    assert stage1.compute_loss_from_embeddings([Q, P, N, HN]).item() == pytest.approx(0.4, abs=1e-6)
    # three inputs (no hn) is stage one even when stage=2
    three = QuadrupletLoss(model=None, margin=0.1, stage=2)
    assert three.compute_loss_from_embeddings([Q, P, N]).item() == pytest.approx(0.4, abs=1e-6)
    assert QuadrupletLoss(None, 0.25, 1, "sum").get_config_dict() == {"margin": 0.25, "stage": 1, "reduction": "sum"}


def test_quadruplet_rejects_an_unknown_reduction():
    with pytest.raises(ValueError, match="reduction"):
        QuadrupletLoss(model=None, reduction="max")


# CLEAR, unnormalized vectors and dot-product scores, ξ = 1, λ_train = 0.1:
#   row 1: q (2, 0), d⁺ (1, 1), d⁻ (1, −3): s⁺ = 2, s⁻ = 2, gap = +5  → m_r = 1 − 0.5 = 0.5
#          loss = [0.5 − 2 + 2]₊ = 0.5
#          (with cosines instead: cos⁺ = 2/(2·√2) = 0.7071, cos⁻ = 2/(2·√10) = 0.3162
#           → [0.5 − 0.7071 + 0.3162]₊ = 0.1091, so the score really is the dot product)
#   row 2: q (1, 2), d⁺ (3, 0), d⁻ (0, 1): s⁺ = 3, s⁻ = 2, gap = −10 → m_r = 1 + 1 = 2
#          loss = [2 − 3 + 2]₊ = 1
#   row 3: q (0, 1), d⁺ (0, 4), d⁻ (1, 0): s⁺ = 4, s⁻ = 0, gap = 0   → m_r = 1
#          loss = [1 − 4 + 0]₊ = 0
RQ, RPOS, RNEG = t([2, 0], [1, 2], [0, 1]), t([1, 1], [3, 0], [0, 4]), t([1, -3], [0, 1], [1, 0])
GAPS = torch.tensor([5.0, -10.0, 0.0])


def test_residual_margin_uses_the_bm25_gap_and_dot_products():
    loss = ResidualMarginLoss(model=None, xi=1.0, lambda_train=0.1)
    # mean = (0.5 + 1 + 0) / 3 = 0.5
    assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], GAPS).item() == pytest.approx(0.5, abs=1e-6)
    # the gaps arrive as any numeric tensor (float64, int) and are cast
    assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], GAPS.double()).item() == pytest.approx(0.5, abs=1e-6)
    assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], GAPS.long()).item() == pytest.approx(0.5, abs=1e-6)
    # row 1 alone: 0.5 by dot product, not the 0.1091 cosine would give
    row1 = [RQ[:1], RPOS[:1], RNEG[:1]]
    assert loss.compute_loss_from_embeddings(row1, GAPS[:1]).item() == pytest.approx(0.5, abs=1e-6)


def test_margin_mse_is_the_squared_error_of_the_dot_product_margin_against_the_teachers():
    # the residual rows above: s⁺ − s⁻ = 2 − 2 = 0, 3 − 2 = 1, 4 − 0 = 4 (dot products, not cosines);
    # teacher margins 5, −10, 0 → errors −5, 11, 4 → mean of squares (25 + 121 + 16) / 3 = 54
    loss = margin_mse_loss(model=None)
    assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], GAPS).item() == pytest.approx(54.0, abs=1e-5)
    assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], torch.tensor([0.0, 1.0, 4.0])).item() == 0.0


def test_residual_margin_with_lambda_zero_is_a_constant_margin():
    loss = ResidualMarginLoss(model=None, xi=1.0, lambda_train=0.0)
    # m_r = ξ = 1 whatever the gap: row 1 [1 − 2 + 2]₊ = 1, row 2 [1 − 3 + 2]₊ = 0, row 3 [1 − 4]₊ = 0
    # mean = 1/3, the same for any gaps
    for gaps in (GAPS, torch.tensor([-100.0, 7.0, 3.0]), torch.zeros(3)):
        assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], gaps).item() == pytest.approx(1 / 3, abs=1e-6)
    # ξ scales the constant margin: ξ = 2 → [2 − 2 + 2]₊ = 2, [2 − 3 + 2]₊ = 1, [2 − 4]₊ = 0 → mean 1
    loss.xi = 2.0
    assert loss.compute_loss_from_embeddings([RQ, RPOS, RNEG], GAPS).item() == pytest.approx(1.0, abs=1e-6)
    assert loss.get_config_dict() == {"xi": 2.0, "lambda_train": 0.0}


def test_residual_margin_needs_labels():
    with pytest.raises(ValueError, match="BM25 score gaps"):
        ResidualMarginLoss(model=None).compute_loss_from_embeddings([RQ, RPOS, RNEG], None)


def test_triplet_loss_is_the_cosine_hinge(st_model):
    loss = triplet_loss(st_model, margin=0.2)
    # rows A, B, C (q, p, n): [d_p − d_n + 0.2]₊ = [1 − 0.5 + 0.2]₊ = 0.7, 0.7, [0 − 2 + 0.2]₊ = 0
    # mean = 1.4 / 3
    assert loss.compute_loss_from_embeddings([Q, P, N], None).item() == pytest.approx(1.4 / 3, abs=1e-6)


def test_inbatch_loss_is_cross_entropy_over_in_batch_and_hard_negatives(st_model):
    s = math.log(2)  # scale = ln 2 so that exp(s·cos) = 2^cos: cos 1 → 2, 0 → 1, −1 → 1/2
    loss = inbatch_loss(st_model, scale=s)
    q = t(e(0), e(90))
    p = t(e(0), e(90, 3))        # each query's positive (length 3: only the angle counts)
    hn = t(e(180), e(0, 2))      # hard negatives; row 2's (0°) is a perfect match for query 1
    # Candidates for every query: [p1, p2, hn1, hn2].
    #   q1 (0°):  cos = [1, 0, −1, 1]  → exp = [2, 1, 1/2, 2]; −log(2 / 5.5) = ln 2.75
    #   q2 (90°): cos = [0, 1, 0, 0]   → exp = [1, 2, 1, 1];   −log(2 / 5)   = ln 2.5
    # mean = (ln 2.75 + ln 2.5) / 2
    expected = (math.log(2.75) + math.log(2.5)) / 2
    assert loss.compute_loss_from_embeddings([q, p, hn], None).item() == pytest.approx(expected, abs=1e-6)
    # pairs only (no hard negatives): q1 exp [2, 1] → ln 1.5; q2 exp [1, 2] → ln 1.5
    assert loss.compute_loss_from_embeddings([q, p], None).item() == pytest.approx(math.log(1.5), abs=1e-6)
    # the default scale is 20: q1 → −log(e^20 / (e^20 + e^0 + e^−20 + e^20)) = log(2 + e^−20 + e^−40) ≈ ln 2
    assert inbatch_loss(st_model).compute_loss_from_embeddings([q, p, hn], None).item() == pytest.approx(
        (math.log(2 + math.exp(-20) + math.exp(-40)) + math.log(1 + 3 * math.exp(-20))) / 2, abs=1e-6)


TEXTS = [  # columns: query, positive, negative, hard negative
    ["how long to cook rice", "why is the sky blue", "train a puppy"],
    ["Simmer rice for 18 minutes with the lid on.", "Rayleigh scattering makes the sky blue.",
     "Reward a puppy with treats for good behaviour."],
    ["The stock market fell after the decision.", "Bake the bread at 220 degrees.",
     "Rain is expected tomorrow afternoon."],
    ["Brown rice needs more water than white rice.", "Sunsets are red because light travels further.",
     "Dogs bark at strangers."],
]


@pytest.mark.parametrize("name", ["quadruplet", "residual", "triplet", "inbatch", "marginmse"])
def test_forward_through_the_model_matches_the_embedding_formula(st_model, name):
    build = {"quadruplet": lambda m: QuadrupletLoss(m, margin=1.0),
             "residual": lambda m: ResidualMarginLoss(m, xi=1.0, lambda_train=0.1),
             "triplet": lambda m: triplet_loss(m, margin=1.0),
             "inbatch": lambda m: inbatch_loss(m),
             "marginmse": lambda m: margin_mse_loss(m)}[name]
    loss = build(st_model)
    columns = TEXTS if name == "quadruplet" else TEXTS[:3]
    labels = torch.tensor([2.5, -1.0, 0.0])
    features = [st_model.preprocess(col) for col in columns]
    with torch.no_grad():
        through_model = loss(features, labels).item()
        # embeddings computed independently, by SentenceTransformer.encode
        embeddings = [st_model.encode(col, convert_to_tensor=True) for col in columns]
        from_embeddings = loss.compute_loss_from_embeddings(embeddings, labels).item()
    assert through_model == pytest.approx(from_embeddings, rel=1e-4, abs=1e-6)
    assert from_embeddings > 0  # a random model violates margin 1 / the softmax: the check is not 0 == 0


def test_suggest_scale():
    # normalized (cosine scores): ξ = 0.3, λ = ξ/2 / std(gaps), clipped to [0.001, 0.1]
    # gaps [0, 10]: population std = 5 → λ = 0.15 / 5 = 0.03
    assert suggest_scale([0, 10]) == (0.3, 0.03)
    # gaps [1, 3]: std = 1 → 0.15 → clipped to 0.1
    assert suggest_scale([1, 3]) == (0.3, 0.1)
    # gaps [0, 1000]: std = 500 → 0.0003 → clipped to 0.001
    assert suggest_scale([0, 1000]) == (0.3, 0.001)
    # unnormalized: ξ = 1; gaps [0, 20]: std 10 → λ = 0.5 / 10 = 0.05
    assert suggest_scale([0, 20], normalized=False) == (1.0, 0.05)
    # gaps [2, 4, 4, 4, 5, 5, 7, 9]: mean 5, std 2 → λ = 0.15 / 2 = 0.075 (any iterable works)
    assert suggest_scale(iter([2, 4, 4, 4, 5, 5, 7, 9])) == (0.3, 0.075)
    # no spread (one gap, or all equal): the paper's 0.1
    assert suggest_scale([3.0]) == (0.3, 0.1)
    assert suggest_scale([2.0, 2.0, 2.0], normalized=False) == (1.0, 0.1)


@pytest.mark.parametrize("loss,title,arxiv", [
    (QuadrupletLoss(None), "QuadrupletBERT: An Efficient Model For Embedding-Based Large-Scale Retrieval", None),
    (ResidualMarginLoss(None), "Complement Lexical Retrieval Model with Semantic Residual Embeddings", "2004.13969"),
])
def test_each_loss_cites_its_paper_as_bibtex(loss, title, arxiv):
    entry = loss.citation.strip()
    # one BibTeX entry, as sentence-transformers' own losses give it: @type{key, field = value, ...}
    assert re.fullmatch(r"@inproceedings\{[\w-]+,\n(\s+\w+\s*=\s*[{\"].*[}\"],?\n)+\}", entry), entry
    assert entry.count("@") == 1 and entry.count("{") == entry.count("}")
    fields = dict(re.findall(r"^\s+(\w+)\s*=\s*[{\"](.*)[}\"],?$", entry, flags=re.MULTILINE))
    assert {"title", "author", "booktitle", "year"} <= set(fields)
    assert fields["title"].replace("{", "").replace("}", "") == title
    assert fields["year"] == "2021"
    if arxiv:
        assert fields["eprint"] == arxiv
