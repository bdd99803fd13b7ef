"""Poly-attention (``retrieval.index.poly_attention``, ``training.poly``): the paper's eq. 2–4 against hand
computation, documents embedded exactly as by the base, training through both of our losses, and
an exported model that loads in RankScope (query route, own cache key) and in plain
sentence-transformers with ``trust_remote_code``, with a real tiny transformer."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from retrieval.index.encoder import POLY_FILE, POLY_REF, Encoder, foreign_modules, load_encoder
from retrieval.index.poly_attention import PolyAttention
from retrieval.workspace import Workspace
from training.losses import QuadrupletLoss, ResidualMarginLoss, cosine_distance, match
from training.pairs import labelled_pairs
from training.poly import has_poly_attention, make_portable, routed, with_poly_attention
from training.trainer import TrainConfig, Trainer, load_trainable

QUERIES = ["cat on a mat", "why did stocks fall"]
DOCS = ["The cat sat on the warm mat near the fire.", "Bond yields climbed as rates rose."]


def test_eq_2_to_4_by_hand():
    torch.manual_seed(0)
    poly = PolyAttention(4, num_codes=3, init_std=1.0)
    tokens = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        out = poly({"token_embeddings": tokens, "attention_mask": mask}, task="query")
    for b in range(2):
        n = int(mask[b].sum())
        for i in range(3):
            w = torch.softmax(tokens[b, :n] @ poly.codes[i], dim=0)  # eq. 2: c_i · (C, F_1 … F_N)
            assert torch.allclose(out["poly_embeddings"][b, i], w @ tokens[b, :n], atol=1e-6)
        assert torch.allclose(out["sentence_embedding"][b], out["poly_embeddings"][b].mean(0), atol=1e-6)  # eq. 4
    with torch.no_grad():
        doc = poly({"token_embeddings": tokens, "attention_mask": mask}, task="document")
    assert torch.allclose(doc["sentence_embedding"][1], tokens[1, :3].mean(0), atol=1e-6)  # mean pooling
    assert "poly_embeddings" not in doc
    # training score, eq. 3: max_i P_i · C'
    d = torch.randn(2, 4)
    expected = torch.tensor([max(float(out["poly_embeddings"][b, i] @ d[b]) for i in range(3)) for b in range(2)])
    assert torch.allclose(match(out["poly_embeddings"], d), expected, atol=1e-5)
    cos = torch.stack([max(F.cosine_similarity(out["poly_embeddings"][b, i], d[b], dim=0) for i in range(3))
                       for b in range(2)])
    assert torch.allclose(cosine_distance(out["poly_embeddings"], d), 1 - cos, atol=1e-5)


def test_documents_embed_as_the_base_and_queries_start_near_it(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    base = SentenceTransformer(str(tiny_model_dir), device="cpu")
    poly = load_trainable(str(tiny_model_dir), "cpu", 64, "poly", 4)
    assert has_poly_attention(poly) and not has_poly_attention(base)
    assert with_poly_attention(poly, 8) is poly  # never stacked twice
    np.testing.assert_array_equal(poly.encode(DOCS), base.encode(DOCS))
    q_base, q_poly = base.encode(QUERIES), poly.encode_query(QUERIES)
    assert not np.array_equal(q_base, q_poly)
    assert float((q_base * q_poly).sum(1).min()) > 0.99  # small codes: near-uniform attention


def test_poly_rejects_an_encoder_that_does_not_mean_pool(tiny_model_dir):
    from sentence_transformers import SentenceTransformer, models

    base = SentenceTransformer(str(tiny_model_dir), device="cpu")
    cls = SentenceTransformer(modules=[base[0], models.Pooling(base[0].get_embedding_dimension(), "cls")],
                              device="cpu")
    with pytest.raises(ValueError, match="replaces mean pooling"):
        with_poly_attention(cls)


@pytest.mark.parametrize("loss", ["residual", "quadruplet"])
def test_training_moves_the_codes_with_the_max_over_codes_score(toy_dataset, tiny_model_dir, loss):
    cfg = TrainConfig(loss=loss, negatives="bm25", epochs=2, batch_size=2, lr=1e-2, device="cpu", seed=0,
                      query_pooling="poly", poly_codes=4, stage1_max_epochs=1, model_depth=4, xi=1.0,
                      lambda_train=0.1)
    trainer = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir))
    start = load_trainable(str(tiny_model_dir), "cpu", 64, "poly", 4)  # the same seed: the same codes
    result = trainer.train()
    assert has_poly_attention(result.model)
    moved = (result.model[1].codes - start[1].codes).abs().max()
    assert moved > 1e-4  # the codes are trained, through eq. 3's max


def test_the_loss_sees_p_i_not_p_avg(tiny_model_dir):
    torch.manual_seed(0)
    model = load_trainable(str(tiny_model_dir), "cpu", 64, "poly", 3)
    with torch.no_grad():
        model[1].codes.normal_(0, 3.0)  # far from uniform: P_i differ
    feats = [routed(model, model.preprocess(QUERIES), "query"), routed(model, model.preprocess(DOCS), "document"),
             routed(model, model.preprocess(DOCS[::-1]), "document")]
    loss = ResidualMarginLoss(model, 1.0, 0.0)
    model.eval()
    with torch.no_grad():
        got = float(loss(feats, torch.zeros(2)))
        q = model({k: v for k, v in feats[0].items()})
        p, n = (model(dict(f))["sentence_embedding"] for f in feats[1:])
        pi = F.normalize(q["poly_embeddings"], dim=-1)
        expected = F.relu(1.0 - match(pi, p) + match(pi, n)).mean()
        averaged = F.relu(1.0 - (q["sentence_embedding"] * p).sum(-1) + (q["sentence_embedding"] * n).sum(-1)).mean()
    assert got == pytest.approx(float(expected), abs=1e-5)
    assert abs(got - float(averaged)) > 1e-4
    quad = QuadrupletLoss(model, 0.5, stage=1)
    with torch.no_grad():
        assert float(quad(feats)) == pytest.approx(float(F.relu(cosine_distance(pi, p) - cosine_distance(pi, n)
                                                                + 0.5).mean()), abs=1e-5)


@pytest.fixture(scope="module")
def exported(tiny_model_dir, tmp_path_factory):
    torch.manual_seed(1)
    model = load_trainable(str(tiny_model_dir), "cpu", 64, "poly", 4)
    with torch.no_grad():
        model[1].codes.normal_(0, 1.0)
    out = tmp_path_factory.mktemp("poly") / "model"
    model.save(str(out))
    make_portable(out)
    return model, out


def test_export_loads_in_plain_sentence_transformers(exported):
    from sentence_transformers import SentenceTransformer

    model, out = exported
    types = [m["type"] for m in json.loads((out / "modules.json").read_text())]
    assert POLY_REF in types and (out / POLY_FILE).exists()
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(out), device="cpu")  # custom code is never run unasked
    plain = SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(plain.encode_query(QUERIES), model.encode_query(QUERIES), atol=1e-6)
    np.testing.assert_allclose(plain.encode_document(DOCS), model.encode(DOCS), atol=1e-6)


def test_rankscope_loads_it_and_searches_with_the_query_route(exported, toy_dataset, store):
    model, out = exported
    assert foreign_modules(out) == []  # sentence-transformers' modules and our poly-attention only
    enc = load_encoder(str(out), device="cpu", precision="fp32")
    assert enc.asymmetric and not load_encoder(None, device="cpu", precision="fp32").asymmetric
    queries = enc.for_queries()
    assert queries.fingerprint != enc.fingerprint  # query vectors have a cache key of their own
    assert enc.for_queries() is queries  # made once: a search does not hash the weights again
    np.testing.assert_allclose(queries.encode(QUERIES), model.encode_query(QUERIES, normalize_embeddings=True),
                               atol=1e-6)
    ws = Workspace(toy_dataset, store, model=enc)
    run = ws.run("dense", "train", 8)
    docs = model.encode([d.full_text for d in toy_dataset.docs.values()], normalize_embeddings=True)
    for qid, hits in run.items():
        q = model.encode_query([toy_dataset.queries[qid]], normalize_embeddings=True)[0]
        expected = {d: float(s) for d, s in zip(toy_dataset.doc_ids, docs @ q)}
        for doc_id, score in hits:
            assert score == pytest.approx(expected[doc_id], abs=1e-5)
    # the query a user types goes the same way
    typed = ws.dense.encode_query("kitten care")
    np.testing.assert_allclose(typed, model.encode_query(["kitten care"], normalize_embeddings=True)[0], atol=1e-6)


def test_the_folders_copy_of_the_module_is_never_run(exported, tmp_path):
    """RankScope resolves the poly-attention type to the class it ships: a tampered copy of the
    module's file in the folder is never imported, and the model loads as before."""
    model, out = exported
    copy = tmp_path / "tampered"
    shutil.copytree(out, copy)
    marker = tmp_path / "ran"
    (copy / POLY_FILE).write_text(f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit('ran')\n")
    enc = load_encoder(str(copy), device="cpu", precision="fp32")
    assert not marker.exists()
    assert type(enc.model[1]).__module__ == "retrieval.index.poly_attention"
    np.testing.assert_allclose(enc.for_queries().encode(QUERIES),
                               model.encode_query(QUERIES, normalize_embeddings=True),
                               atol=1e-6)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_finetune_exports_poly_and_evaluates_it(demo, tiny_model_dir, tmp_path):
    from retrieval.store import Store
    from training.finetune import run_training

    store = Store(tmp_path / "s.sqlite3")
    cfg = TrainConfig(loss="residual", negatives="bm25", epochs=1, batch_size=8, lr=1e-3, device="cpu",
                      max_steps_per_epoch=2, xi=0.3, lambda_train=0.02, query_pooling="poly", poly_codes=4,
                      holdout=0.0)  # trained weights exported whatever a held-out check would keep
    result = run_training(demo, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), store=store)
    store.close()
    assert POLY_REF in (tmp_path / "ft" / "modules.json").read_text() and (tmp_path / "ft" / POLY_FILE).exists()
    assert set(result.metrics["fine-tuned"]) >= {"dense", "hybrid"}
    card = (tmp_path / "ft" / "README.md").read_text()
    assert '"query_pooling": "poly"' in card
    assert isinstance(Encoder(load_encoder(str(tmp_path / "ft"), device="cpu").model).dim, int)


def test_projection_embeds_query_points_by_the_query_route(exported, toy_dataset, store):
    from retrieval.evaluation.projection import QUERY, embed_sample, sample_points

    model, out = exported
    ws = Workspace(toy_dataset, store, model=load_encoder(str(out), device="cpu", precision="fp32"))
    ws.build_dense()
    sample = sample_points(ws, "train", n_queries=2, hard_per_query=1, easy_per_query=1)
    seen = []
    vecs = embed_sample(ws, sample, progress=lambda fraction, what: seen.append(fraction))
    for point, vec in zip(sample.points, vecs):
        encode = model.encode_query if point.role == QUERY else model.encode
        np.testing.assert_allclose(vec, encode([point.text], normalize_embeddings=True)[0], atol=1e-5)
    assert {p.role for p in sample.points} > {QUERY} and seen and seen[-1] == pytest.approx(1.0)
