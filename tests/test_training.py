"""Training pairs, negative pools, the training loop and a whole fine-tuning run, with a real tiny
transformer (random weights), real BM25 and the demo data set."""
from __future__ import annotations

import json
import random
import threading

import numpy as np
import pytest
import torch

from retrieval.dataset import Dataset, Document
from retrieval.encoder import Encoder, load_encoder
from retrieval.lexical import BM25Index
from retrieval.readers import load_dataset
from retrieval.store import Store
from retrieval.workspace import Workspace
from training.losses import QuadrupletLoss, ResidualMarginLoss, inbatch_loss, triplet_loss
from training.negatives import CandidatePool, bm25_pool, model_pool, random_pool
from training.pairs import (Pair, bfs_pairs, cold_start_split, ict_pairs, known_positives, labelled_pairs,
                            sentences)
from training.run import REPORT_METRICS, plan_splits, run_training
from training.trainer import Cancelled, TrainConfig, Trainer

from .conftest import DEMO


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DEMO)


def fast(**kw) -> TrainConfig:
    """A CPU config small enough for tests."""
    return TrainConfig(**{"device": "cpu", "batch_size": 2, "lr": 1e-3, "seed": 0, **kw})


# ---- pairs ---------------------------------------------------------------------------------

def test_labelled_pairs_keep_only_relevant_labels(toy_dataset):
    pairs = labelled_pairs(toy_dataset, "train")
    # train: q1 {d1: 2, d4: 0, d5: 1}, q2 {d3: 2, d6: 1} → d4 (label 0) is left out
    assert {(p.query_id, p.doc_id) for p in pairs} == {("q1", "d1"), ("q1", "d5"), ("q2", "d3"), ("q2", "d6")}
    d1 = next(p for p in pairs if p.doc_id == "d1")
    assert d1.query == "cat on a mat" and d1.doc_text == "Cats. The cat sat on the warm mat near the fire."
    assert {(p.query_id, p.doc_id) for p in labelled_pairs(toy_dataset, "train", min_label=2)} == \
        {("q1", "d1"), ("q2", "d3")}
    with pytest.raises(ValueError, match=r"no split 'dev' \(have: train, test\)"):
        labelled_pairs(toy_dataset, "dev")


def test_labelled_pairs_skip_labels_pointing_nowhere(toy_dataset):
    qrels = {"train": {"q1": {"d1": 1, "gone": 2}, "q-missing": {"d2": 1}}}
    ds = Dataset("t", toy_dataset.docs, toy_dataset.queries, qrels)
    assert [(p.query_id, p.doc_id) for p in labelled_pairs(ds, "train")] == [("q1", "d1")]


def test_demo_train_pairs_count_labels_at_least_one(demo):
    expected = sum(1 for docs in demo.qrels["train"].values() for v in docs.values() if v >= 1)
    pairs = labelled_pairs(demo, "train")
    assert len(pairs) == expected == 71  # 81 train labels, 10 of them 0
    assert all(demo.qrels["train"][p.query_id][p.doc_id] >= 1 for p in pairs)


def test_known_positives_cover_every_split(toy_dataset):
    # label > 0 in train or test; label-0 documents (d4, d8) are never positives
    assert known_positives(toy_dataset) == {"q1": {"d1", "d5"}, "q2": {"d3", "d6"},
                                            "q3": {"d7", "d2"}, "q4": {"d5", "d1"}}


def test_cold_start_split_partitions_the_queries(demo):
    test_qids = set(demo.qrels["test"])  # 20 queries
    split = cold_start_split(demo, "test", 0.25, seed=7)
    train, test = set(split.qrels["train"]), set(split.qrels["test"])
    assert split.splits == ["train", "test"]
    assert train.isdisjoint(test) and train | test == test_qids
    assert len(train) == 5 and len(test) == 15  # round(20 · 0.25) = 5
    for q in test_qids:  # labels are carried over unchanged
        assert (split.qrels["train"].get(q) or split.qrels["test"][q]) == demo.qrels["test"][q]
    assert split.docs is demo.docs and split.queries == demo.queries
    assert split.name == "demo[test 25/75 seed 7]"
    # seeded: the same seed gives the same split, another seed another one
    assert set(cold_start_split(demo, "test", 0.25, seed=7).qrels["train"]) == train
    assert set(cold_start_split(demo, "test", 0.25, seed=8).qrels["train"]) != train
    # 0.8 → 16 / 4; a tiny fraction still leaves one query on each side
    assert len(cold_start_split(demo, "test", 0.8).qrels["train"]) == 16
    tiny = cold_start_split(demo, "test", 0.01)
    assert len(tiny.qrels["train"]) == 1 and len(tiny.qrels["test"]) == 19


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.5, 1.5])
def test_cold_start_fraction_must_be_inside_zero_one(demo, fraction):
    with pytest.raises(ValueError, match="between 0 and 1"):
        cold_start_split(demo, "test", fraction)


def test_cold_start_unknown_split(demo):
    with pytest.raises(ValueError, match="no split 'dev'"):
        cold_start_split(demo, "dev", 0.5)


SENT_DOCS = {  # sentences of at least three words; one single-sentence document, one without title
    "a": Document("a", "Rice", "Rinse the rice twice. Boil the water first. Simmer for eighteen minutes. Let it rest."),
    "b": Document("b", "Bread", "Knead the dough well. Let the dough rise overnight. Bake it very hot."),
    "c": Document("c", "Tea", "Warm the pot first."),
    "d": Document("d", "", "Tides follow the moon. Spring tides are the strongest. Neap tides are weak."),
}
SENT_DS = Dataset("sentences", SENT_DOCS)


def test_sentences_split_on_sentence_ends_and_drop_short_ones():
    assert sentences("Rinse the rice twice. Boil it. Simmer for ten minutes! Serve? Is it done?") == \
        ["Rinse the rice twice.", "Simmer for ten minutes!", "Is it done?"]


def test_ict_query_sentence_is_removed_from_its_document():
    pairs = ict_pairs(SENT_DS, seed=3)
    assert len(pairs) == 3  # "c" has one sentence: no pair
    sources = set()
    for p in pairs:
        # the document is "title. the other sentences in order" of exactly one passage
        matches = []
        for doc in SENT_DOCS.values():
            sents = sentences(doc.text)
            if p.query in sents:
                rest = " ".join(s for s in sents if s != p.query)
                if p.doc_text == (f"{doc.title}. {rest}" if doc.title else rest):
                    matches.append(doc.id)
        assert len(matches) == 1, p
        sources.add(matches[0])
        assert p.query not in p.doc_text and p.query_id is None and p.doc_id is None
    assert sources == {"a", "b", "d"}
    assert ict_pairs(SENT_DS, seed=3) == pairs  # seeded: the same seed, the same pairs
    assert any(ict_pairs(SENT_DS, seed=s) != pairs for s in (4, 5, 6))  # other seeds, other sentences
    assert len(ict_pairs(SENT_DS, n=2, seed=3)) == 2


def test_ict_keep_sentence_one_leaves_the_sentence_in():
    for p in ict_pairs(SENT_DS, seed=3, keep_sentence=1.0):
        doc = next(d for d in SENT_DOCS.values() if p.query in sentences(d.text))
        body = " ".join(sentences(doc.text))
        assert p.doc_text == (f"{doc.title}. {body}" if doc.title else body)
        assert p.query in p.doc_text


def test_ict_on_the_demo_corpus(demo):
    pairs = ict_pairs(demo, seed=1)
    assert len(pairs) == 345  # every demo passage has ≥ 3 sentences
    for p in pairs:
        assert p.query not in p.doc_text
    # each query is a sentence of the passage whose title opens the document
    by_title = {}
    for d in demo.docs.values():
        by_title.setdefault(d.title, []).append(d)
    for p in pairs[:50]:
        title = p.doc_text.split(". ", 1)[0]
        assert any(p.query in sentences(d.text) for d in by_title[title])


def test_bfs_title_queries_a_window_of_the_same_document():
    pairs = bfs_pairs(SENT_DS, seed=5, window=2)
    assert len(pairs) == 4  # "c" (title + one sentence) still has a one-sentence window
    for p in pairs:
        doc = next((d for d in SENT_DOCS.values() if d.title == p.query), None)
        if doc is None:  # no title: the lead sentence is the query, the window comes from the rest
            doc = SENT_DOCS["d"]
            sents = sentences(doc.text)
            assert p.query == sents[0]
            body = sents[1:]
        else:
            body = sentences(doc.text)
        windows = {" ".join(body[i:i + 2]) for i in range(max(1, len(body) - 1))}
        assert p.doc_text in windows, p
    assert {p.query for p in pairs} == {"Rice", "Bread", "Tea", "Tides follow the moon."}
    assert bfs_pairs(SENT_DS, seed=5, window=2) == pairs
    # window 1: a single sentence of the document
    for p in bfs_pairs(SENT_DS, seed=5, window=1):
        doc = next((d for d in SENT_DOCS.values() if d.title == p.query), SENT_DOCS["d"])
        assert p.doc_text in sentences(doc.text) and p.doc_text != p.query


# ---- negatives -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_bm25(demo):
    return BM25Index(demo.doc_ids, [d.full_text for d in demo.docs.values()])


def test_bm25_pool_is_top_n_minus_positives_of_any_split(demo, demo_bm25):
    pairs = labelled_pairs(demo, "train")
    query_ids = {p.query: p.query_id for p in pairs}
    row = {d: i for i, d in enumerate(demo.doc_ids)}
    # an extra split that labels, for the first query, BM25's best non-relevant document relevant
    q0, qid0 = pairs[0].query, pairs[0].query_id
    train_pos = known_positives(demo)
    top0 = [d for d, _ in demo_bm25.search({"x": q0}, k=20)["x"]]
    extra_doc = next(d for d in top0 if d not in train_pos[qid0])
    ds = Dataset("demo+dev", demo.docs, demo.queries, {**demo.qrels, "dev": {qid0: {extra_doc: 1}}})
    positives = known_positives(ds)
    pool = bm25_pool(demo_bm25, query_ids, positives, depth=20)
    assert pool.source == "bm25" and pool.doc_ids == demo.doc_ids
    run = demo_bm25.search({q: q for q in query_ids}, k=20)
    for q, qid in query_ids.items():
        top = {row[d] for d, _ in run[q]}
        pos = {row[d] for d in positives[qid]}
        assert set(pool.candidates[q]) == top - pos
        assert len(pool.candidates[q]) >= len(top) - len(pos)
    assert row[extra_doc] not in pool.candidates[q0]
    # without the dev label that document would have been a candidate: the check above can fail
    assert row[extra_doc] in bm25_pool(demo_bm25, query_ids, train_pos, depth=20).candidates[q0]


def test_model_pool_is_brute_force_top_k_minus_positives(demo, tiny_encoder):
    pairs = labelled_pairs(demo, "train")
    query_ids = {p.query: p.query_id for p in pairs}
    docs = tiny_encoder.encode([d.full_text for d in demo.docs.values()])
    queries = tiny_encoder.encode(list(query_ids))
    positives = known_positives(demo)
    pool = model_pool(demo.doc_ids, docs, queries, query_ids, positives, depth=10)
    row = {d: i for i, d in enumerate(demo.doc_ids)}
    for i, (q, qid) in enumerate(query_ids.items()):
        scores = [float(np.dot(queries[i], docs[r])) for r in range(len(demo.doc_ids))]
        top10 = sorted(range(len(scores)), key=lambda r: -scores[r])[:10]
        expected = [r for r in top10 if r not in {row[d] for d in positives[qid]}]
        assert pool.candidates[q] == expected  # in score order
    # depth beyond the corpus: every document but the positives
    small = model_pool(demo.doc_ids[:5], docs[:5], queries, query_ids, positives, depth=50)
    for q, qid in query_ids.items():
        assert set(small.candidates[q]) == {r for r in range(5) if demo.doc_ids[r] not in positives[qid]}


def test_random_pool_never_returns_a_positive(toy_dataset):
    rows = {d: i for i, d in enumerate(toy_dataset.doc_ids)}
    pool = random_pool(toy_dataset, {"cat on a mat": "q1", "free text": None}, known_positives(toy_dataset))
    rng = random.Random(0)
    seen = [toy_dataset.doc_ids[pool.sample("cat on a mat", rng)] for _ in range(2000)]
    assert set(seen) == {"d2", "d3", "d4", "d6", "d7", "d8"}  # all but q1's positives d1, d5
    # roughly uniform: 2000 / 6 ≈ 333 each
    assert all(250 < seen.count(d) < 420 for d in set(seen))
    excluded = {pool.sample("cat on a mat", rng, {rows["d2"], rows["d3"]}) for _ in range(500)}
    assert {toy_dataset.doc_ids[r] for r in excluded} == {"d4", "d6", "d7", "d8"}
    # a query without an id has no known positives: any document
    assert {pool.sample("free text", rng) for _ in range(500)} == set(range(8))
    # nothing left to sample
    assert pool.sample("cat on a mat", rng, set(range(8))) is None


def test_candidate_pool_sample_respects_exclusions():
    pool = CandidatePool(["a", "b", "c"], {"q": [0, 2]}, "bm25")
    rng = random.Random(1)
    assert {pool.sample("q", rng) for _ in range(200)} == {0, 2}
    assert {pool.sample("q", rng, {0}) for _ in range(50)} == {2}
    assert pool.sample("q", rng, {0, 2}) is None
    assert pool.sample("unknown", rng) is None


def test_examples_never_use_the_pairs_own_document_as_negative(toy_dataset):
    d1 = toy_dataset.docs["d1"].full_text
    pairs = labelled_pairs(toy_dataset, "train") + [Pair("warm mat by the fire", d1, None, "d1")]
    trainer = Trainer(fast(loss="triplet", negatives="random"), toy_dataset, pairs)
    text_id = {d.full_text: d.id for d in toy_dataset.docs.values()}
    pool = trainer.pool("random")
    negatives: dict[str, set[str]] = {}
    for _ in range(200):
        for (q, p, n), _label in trainer.examples([pool]):
            negatives.setdefault(q, set()).add(text_id[n])
    # the pseudo pair has no query id, hence no known positives: only its own document is barred
    assert negatives["warm mat by the fire"] == set(toy_dataset.doc_ids) - {"d1"}
    assert negatives["cat on a mat"] == set(toy_dataset.doc_ids) - {"d1", "d5"}
    assert negatives["why did stocks fall"] == set(toy_dataset.doc_ids) - {"d3", "d6"}


def test_residual_examples_carry_the_bm25_gap(toy_dataset):
    d1 = toy_dataset.docs["d1"]
    pseudo = Pair("cat on a mat", d1.full_text, None, None)  # the text of d1, but not tied to the corpus
    pairs = labelled_pairs(toy_dataset, "train") + [pseudo]
    trainer = Trainer(fast(loss="residual", negatives="random"), toy_dataset, pairs)
    row = {d.full_text: i for i, d in enumerate(toy_dataset.docs.values())}
    examples = trainer.examples([trainer.pool("random")])
    assert len(examples) == 5
    for (q, p, n), label in examples:
        scores = trainer.bm25.scores(q)
        # gap = s_lex(q, d⁺) − s_lex(q, d⁻); the pseudo document is scored with the corpus statistics,
        # which for d1's own text is d1's score
        assert label == pytest.approx(float(scores[row[p]] - scores[row[n]]), abs=1e-4)
    assert any(label != 0 for _, label in examples)
    # other losses carry no label
    assert {lab for _, lab in Trainer(fast(loss="triplet"), toy_dataset, pairs).examples(
        [trainer.pool("random")])} == {0.0}


# ---- the loop ------------------------------------------------------------------------------

def fixed_rows(dataset: Dataset):
    """Every (q, p, n, hn) of the train split: each non-relevant n, hn the next non-relevant one."""
    bm25 = BM25Index(dataset.doc_ids, [d.full_text for d in dataset.docs.values()])
    positives = known_positives(dataset)
    out = []
    for p in labelled_pairs(dataset, "train"):
        negs = [d for d in dataset.doc_ids if d not in positives[p.query_id]]
        scores = bm25.scores(p.query)
        for i, n in enumerate(negs):
            hn = negs[(i + 1) % len(negs)]
            gap = float(scores[dataset.doc_ids.index(p.doc_id)] - scores[dataset.doc_ids.index(n)])
            out.append((p.query, p.doc_text, dataset.docs[n].full_text, dataset.docs[hn].full_text, gap))
    return out


def fixed_batch_loss(model, name: str, rows) -> float:
    loss = {"quadruplet": lambda: QuadrupletLoss(model, 0.1),
            "residual": lambda: ResidualMarginLoss(model, 1.0, 0.1),
            "triplet": lambda: triplet_loss(model, 0.1),
            "inbatch": lambda: inbatch_loss(model)}[name]()
    columns = [list(c) for c in zip(*[r[:4 if name == "quadruplet" else 3] for r in rows])]
    model.eval()
    with torch.no_grad():
        emb = [model.encode(c, convert_to_tensor=True) for c in columns]
        return loss.compute_loss_from_embeddings(emb, torch.tensor([r[4] for r in rows])).item()


@pytest.mark.parametrize("name", ["quadruplet", "residual", "triplet", "inbatch"])
def test_a_few_steps_lower_the_loss_on_a_fixed_batch(toy_dataset, tiny_model_dir, name):
    from sentence_transformers import SentenceTransformer

    rows = fixed_rows(toy_dataset)  # 4 pairs × 6 non-relevant documents = 24 rows
    assert len(rows) == 24
    before = fixed_batch_loss(SentenceTransformer(str(tiny_model_dir), device="cpu"), name, rows)
    # 4 train pairs, batch 4: one AdamW step per epoch at lr 1e-3; quadruplet 2 + 2 epochs, others 4
    cfg = fast(loss=name, negatives="bm25", epochs=2 if name == "quadruplet" else 4, batch_size=4,
               stage1_max_epochs=2, stage1_tol=float("-inf"), model_depth=4)
    result = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir)).train()
    assert len(result.losses) == 4
    after = fixed_batch_loss(result.model, name, rows)
    # after/before measured over seeds 0–9: quadruplet (0.103 before) 0.48–0.66, residual (0.906)
    # 0.96–0.98, triplet (0.076) 0.64–0.78, in-batch (3.67) 0.97–0.98
    assert after < 0.99 * before, (before, after)


class Recording(Trainer):
    """The real trainer, remembering which pools built each epoch's examples."""

    def examples(self, pools):
        out = super().examples(pools)
        self.calls = getattr(self, "calls", []) + [([p.source for p in pools], {len(t) for t, _ in out})]
        return out


def test_quadruplet_trains_stage_one_then_mines_then_stage_two(toy_dataset, tiny_model_dir):
    seen = []
    # stage1_tol −∞: no improvement is ever "too small", so stage one runs all stage1_max_epochs
    cfg = fast(loss="quadruplet", epochs=2, batch_size=4, stage1_max_epochs=3, stage1_tol=float("-inf"),
               model_depth=3)
    trainer = Recording(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir),
                        on_progress=lambda p: seen.append(p.stage))
    result = trainer.train()
    assert result.stages == ["stage 1: loss_h = 0 (q, p, random n)",
                             "stage 2: full loss (q, p, random n, hn from the stage-1 model's top 3)"]
    assert [(s, e) for s, e, _ in result.epoch_losses] == [("stage 1", 1), ("stage 1", 2), ("stage 1", 3),
                                                           ("stage 2", 1), ("stage 2", 2)]
    assert all(loss >= 0 for _, _, loss in result.epoch_losses)
    # stage one: (q, p, random n); stage two: (q, p, random n, model hard negative)
    assert trainer.calls == [(["random"], {3})] * 3 + [(["random", "model"], {4})] * 2
    # progress: the stage-1 steps, the mining, then the stage-2 steps
    assert seen == ["stage 1"] * 3 + ["mining hard negatives"] * 3 + ["stage 2"] * 2  # start, docs, queries
    assert [(s, n) for s, n, _ in result.losses] == [("stage 1", 1), ("stage 1", 2), ("stage 1", 3),
                                                     ("stage 2", 1), ("stage 2", 2)]
    assert result.device == "cpu" and result.seconds > 0 and not result.model.training


def test_stage_one_stops_when_the_loss_stops_falling(toy_dataset, tiny_model_dir):
    cfg = fast(loss="quadruplet", epochs=1, batch_size=4, stage1_max_epochs=4, stage1_tol=10.0, model_depth=3)
    result = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir)).train()
    # tol 10: epoch 2 would have to improve on epoch 1 by more than 10× its loss, impossible for a
    # loss ≥ 0, so stage one ends after its second epoch of at most 4 (with tol −∞, the test above,
    # it runs all of stage1_max_epochs); stage two still runs
    assert [(s, e) for s, e, _ in result.epoch_losses] == [("stage 1", 1), ("stage 1", 2), ("stage 2", 1)]


def test_checkpoint_after_every_epoch(toy_dataset, tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    ck = tmp_path / "ck"
    marker = ck / "last" / "CHECKPOINT"
    during = []

    def on_progress(p):
        during.append((p.epoch, marker.read_text() if marker.exists() else None))

    cfg = fast(loss="triplet", negatives="random", epochs=2, batch_size=4)
    result = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir),
                     on_progress=on_progress, checkpoint_dir=ck).train()
    # during epoch 1 nothing is saved yet; during epoch 2 the epoch-1 checkpoint is there
    assert during == [(1, None), (2, "triplet epoch 1\n")]
    assert marker.read_text() == "triplet epoch 2\n"
    saved = SentenceTransformer(str(ck / "last"), device="cpu")
    assert Encoder(saved).fingerprint == Encoder(result.model).fingerprint  # the final weights


def test_on_epoch_sees_each_epochs_weights_and_training_resumes_after_it(toy_dataset, tiny_model_dir):
    calls, modes = [], []
    trainer = None

    def on_epoch(model, stage, epoch):
        # what an early-stopping hook does: encode with the model as it stands (eval mode)
        vec = Encoder(model).encode(["cat on a mat"])
        calls.append((stage, epoch, Encoder(model).fingerprint, vec))

    def on_progress(p):
        modes.append((p.stage, p.epoch, trainer.model_in_training.training))

    cfg = fast(loss="quadruplet", epochs=2, batch_size=4, stage1_max_epochs=1, model_depth=3)

    class Watching(Trainer):
        def _run_epochs(self, model, *a, **kw):
            self.model_in_training = model
            return super()._run_epochs(model, *a, **kw)

    trainer = Watching(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir),
                       on_epoch=on_epoch, on_progress=on_progress)
    result = trainer.train()
    assert [(s, e) for s, e, _, _ in calls] == [("stage 1", 1), ("stage 2", 1), ("stage 2", 2)]
    prints = [f for _, _, f, _ in calls]
    assert len(set(prints)) == 3 and prints[-1] == Encoder(result.model).fingerprint
    assert not np.allclose(calls[1][3], calls[2][3])  # the weights moved between the calls
    # every step after a hook ran in train mode (the hook's encode had switched to eval)
    assert [m for s, _, m in modes if s.startswith("stage")] and all(m for s, _, m in modes if s.startswith("stage"))

def test_cancel_between_steps(toy_dataset, tiny_model_dir):
    cancel = threading.Event()
    steps = []

    def on_progress(p):
        steps.append(p.step)
        if p.step == 2:
            cancel.set()

    cfg = fast(loss="triplet", negatives="random", epochs=3, batch_size=2)  # 2 steps an epoch, 6 in all
    trainer = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir),
                      on_progress=on_progress, cancel=cancel)
    with pytest.raises(Cancelled, match=r"cancelled during triplet, step 2/6"):
        trainer.train()
    assert steps == [1, 2]


def test_cancel_while_mining_hard_negatives(toy_dataset, tiny_model_dir):
    cancel = threading.Event()
    seen = []

    def on_progress(p):
        seen.append((p.stage, p.step, p.total))
        if p.stage == "mining hard negatives":
            cancel.set()  # asked while the corpus is being encoded by the stage-1 model

    cfg = fast(loss="quadruplet", epochs=1, batch_size=2, stage1_max_epochs=1)
    trainer = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir),
                      on_progress=on_progress, cancel=cancel)
    with pytest.raises(Cancelled, match=r"cancelled during mining hard negatives \(8/10 texts encoded\)"):
        trainer.train()
    assert ("mining hard negatives", 0, 10) in seen  # 8 documents + 2 training queries to encode
    assert not any(stage == "stage 2" for stage, _, _ in seen)  # it stopped before stage two


@pytest.mark.parametrize("change,message", [
    ({"loss": "contrastive"}, "unknown loss 'contrastive'"),
    ({"negatives": "dense"}, "unknown negatives 'dense'"),
    ({"batch_size": 1}, "batch size must be"),
    ({"epochs": 0}, "epochs"),
    ({"lr": 0.0}, "learning rate"),
])
def test_bad_config_is_rejected(toy_dataset, change, message):
    with pytest.raises(ValueError, match=message):
        Trainer(TrainConfig(**change), toy_dataset, labelled_pairs(toy_dataset, "train"))


def test_no_pairs_is_rejected(toy_dataset):
    with pytest.raises(ValueError, match="no training pairs"):
        Trainer(TrainConfig(), toy_dataset, [])


# ---- split planning ------------------------------------------------------------------------

def test_plan_uses_the_train_split_and_evaluates_on_test(demo):
    plan = plan_splits(demo)
    assert (plan.train_split, plan.eval_split) == ("train", "test") and plan.dataset is demo
    assert set(plan.dataset.qrels["train"]).isdisjoint(plan.dataset.qrels["test"])
    assert plan.note == "trained on the 'demo' train split, evaluated on its 'test' split"


def test_plan_cold_start_when_there_is_no_train_split(demo):
    only_test = Dataset("demo-test", demo.docs, demo.queries, {"test": demo.qrels["test"]})
    plan = plan_splits(only_test, cold_start=0.5, seed=3)
    train, test = set(plan.dataset.qrels["train"]), set(plan.dataset.qrels["test"])
    assert train.isdisjoint(test) and train | test == set(demo.qrels["test"]) and len(train) == 10
    assert (plan.train_split, plan.eval_split) == ("train", "test")
    assert plan.note.startswith("cold-start split of 'test' by query (seed 3): 10 queries train (50%), 10 evaluate")
    # without a fraction: 80/20
    assert len(plan_splits(only_test).dataset.qrels["train"]) == 16
    # evaluating on the train split itself: cold start of that split, never train on what is evaluated
    on_train = plan_splits(demo, eval_split="train")
    assert set(on_train.dataset.qrels["train"]).isdisjoint(on_train.dataset.qrels["test"])
    assert set(on_train.dataset.qrels["train"]) | set(on_train.dataset.qrels["test"]) == set(demo.qrels["train"])


def test_plan_never_trains_on_an_evaluated_query(toy_dataset):
    # a user's data set whose train and test splits share a query (q4)
    qrels = {"train": {**toy_dataset.qrels["train"], "q4": {"d5": 1}}, "test": toy_dataset.qrels["test"]}
    ds = Dataset("overlap", toy_dataset.docs, toy_dataset.queries, qrels)
    plan = plan_splits(ds)
    assert plan.eval_split == "test" and set(plan.dataset.qrels["test"]) == {"q3", "q4"}
    assert set(plan.dataset.qrels["train"]) == {"q1", "q2"}
    assert {p.query_id for p in labelled_pairs(plan.dataset, plan.train_split)} == {"q1", "q2"}
    assert plan.note.endswith("(1 query labelled in both left out of training)")


def test_plan_without_labels(demo):
    with pytest.raises(ValueError, match="no relevance labels"):
        plan_splits(Dataset("bare", demo.docs))


# ---- a whole run ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_run(demo, tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    store = Store(folder / "store.sqlite3")
    stages = []
    cfg = TrainConfig(loss="residual", negatives="bm25", epochs=1, batch_size=8, lr=1e-3, device="cpu",
                      max_steps_per_epoch=3, xi=0.3, lambda_train=0.02)
    result = run_training(demo, cfg, folder / "ft", base_model=str(tiny_model_dir), store=store,
                          on_progress=lambda p: stages.append(p.stage))
    yield result, folder / "ft", store, stages
    store.close()


def test_run_exports_a_loadable_fine_tuned_model(demo_run, tiny_encoder):
    from sentence_transformers import SentenceTransformer

    result, out, store, stages = demo_run
    assert result.model_path == str(out) and result.eval_split == "test" and result.device == "cpu"
    assert not (out / "checkpoints").exists()
    model = SentenceTransformer(str(out), device="cpu")
    emb = model.encode(["how do I fix a dripping tap"], normalize_embeddings=True)
    assert emb.shape == (1, tiny_encoder.dim)
    tuned = Encoder(model)
    assert tuned.fingerprint != tiny_encoder.fingerprint  # the weights moved
    registered = {m["fingerprint"]: json.loads(m["info"]) for m in store.models()}
    assert registered[tuned.fingerprint]["loss"] == "residual"
    assert stages[:3] == ["residual"] * 3 and stages[3] == "evaluating — starting"
    # then the fine-tuned encoder encodes the demo corpus (345 documents), reported as it goes
    assert stages[-1] == "evaluating — fine-tuned: encoding 345/345 documents"
    assert [s for s, _, _ in result.losses] == ["residual"] * 3
    assert result.stages == ["residual with bm25 negatives"]


def test_cancel_while_evaluating_stops_before_anything_is_stored(demo, tiny_model_dir, tmp_path):
    from retrieval.store import Store

    store = Store(tmp_path / "store.sqlite3")
    cancel = threading.Event()

    def on_progress(p):
        if p.stage.startswith("evaluating — fine-tuned: encoding"):
            cancel.set()  # the fine-tuned encoder has started on the corpus

    cfg = TrainConfig(loss="residual", negatives="bm25", epochs=1, batch_size=8, max_seq_length=32, device="cpu",
                      max_steps_per_epoch=1, xi=0.3, lambda_train=0.02)
    with pytest.raises(Cancelled, match="cancelled while evaluating"):
        run_training(demo, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), store=store,
                     on_progress=on_progress, cancel=cancel)
    base_fp = load_encoder(str(tiny_model_dir), device="cpu").fingerprint
    tuned_fp = load_encoder(str(tmp_path / "ft"), device="cpu").fingerprint
    assert store.count_embeddings(base_fp) >= len(demo.docs)  # the base corpus was cached in full
    assert store.count_embeddings(tuned_fp) == 0  # no half-encoded corpus in the cache
    assert store.integrity_check() == "ok"
    store.close()


def test_run_reports_base_and_fine_tuned_metrics(demo_run, demo):
    result, out, store, _ = demo_run
    assert set(result.metrics) == {"base", "fine-tuned"}
    for label in ("base", "fine-tuned"):
        assert set(result.metrics[label]) == {"dense", "hybrid"}
        for system in ("dense", "hybrid"):
            m = result.metrics[label][system]
            assert all(0.0 <= m[k] <= 1.0 for k in REPORT_METRICS), (label, system, m)
        assert 0.0 <= result.metrics[label]["hybrid"]["lambda"] <= 1.0
    assert set(result.significance) == {"dense", "hybrid"}
    assert all(0.0 <= p <= 1.0 for ps in result.significance.values() for p in ps.values())
    # the exported folder, loaded afresh and evaluated without the cache, gives the reported numbers
    reloaded = Workspace(demo, None, model=Encoder(load_encoder(str(out), device="cpu").model))
    ev = reloaded.evaluate("dense", "test")
    for k in REPORT_METRICS:
        assert ev.mean[k] == pytest.approx(result.metrics["fine-tuned"]["dense"][k], abs=1e-6)
    # per query: every evaluated query, base and fine-tuned nDCG@10 (their means are the table's)
    for system in ("dense", "hybrid"):
        pq = result.per_query[system]
        assert set(pq) == set(demo.qrels["test"])
        for i, label in enumerate(("base", "fine-tuned")):
            mean = sum(v[i] for v in pq.values()) / len(pq)
            assert mean == pytest.approx(result.metrics[label][system]["ndcg@10"], abs=1e-3)
    assert {q: v[1] for q, v in result.per_query["dense"].items()} == \
        pytest.approx(ev.per_query["ndcg@10"], abs=1e-4)


def test_run_writes_a_model_card_and_the_config(demo_run):
    result, out, _, _ = demo_run
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: sentence-transformers\n")
    assert "- Loss: **residual** (CLEAR residual margin); negatives: bm25" in card
    assert "trained on the 'demo' train split, evaluated on its 'test' split" in card
    assert "| encoder | system | nDCG@10 | Recall@100 | MRR@10 |" in card
    for label in ("base", "fine-tuned"):
        for system in ("dense", "hybrid"):
            m = result.metrics[label][system]
            assert f"| {label} | {system} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {m['mrr@10']:.4f} |" in card
    saved = json.loads((out / "rankscope_training.json").read_text())
    assert saved["config"]["loss"] == "residual" and saved["config"]["xi"] == 0.3
    assert saved["result"]["metrics"] == json.loads(json.dumps(result.metrics))
    assert "losses" not in saved["result"]


def test_cold_start_run_trains_on_one_half(demo, tiny_model_dir, tmp_path):
    only_test = Dataset("demo-test", demo.docs, demo.queries, {"test": demo.qrels["test"]})
    cfg = TrainConfig(loss="triplet", negatives="random", epochs=1, batch_size=4, device="cpu",
                      max_steps_per_epoch=1, seed=5)
    result = run_training(only_test, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), cold_start=0.5,
                          evaluate=False)
    assert result.plan_note.startswith("cold-start split of 'test' by query (seed 5): 10 queries train (50%)")
    assert result.eval_split == "test" and result.metrics == {}
    assert "cold-start split of 'test'" in (tmp_path / "ft" / "README.md").read_text()
    plan = plan_splits(only_test, None, 0.5, seed=5)  # the same seeded plan the run used
    assert set(plan.dataset.qrels["train"]).isdisjoint(plan.dataset.qrels["test"])


def test_pseudo_pairs_then_labelled_stage(tiny_model_dir, store, tmp_path):
    """Multi-stage (Baidu §4): ICT+BFS pseudo pairs first, then the labelled loss, one exported model."""
    from retrieval.readers import load_dataset
    from training.pairs import pseudo_pairs
    from training.run import run_training
    from training.trainer import TrainConfig

    from .conftest import DEMO

    ds = load_dataset(DEMO)
    mixed = pseudo_pairs(ds, "ict+bfs", 40, seed=3)
    assert len(mixed) == 40 and all(p.doc_id is None for p in mixed)
    cfg = TrainConfig(loss="triplet", negatives="bm25", batch_size=8, lr=1e-3, max_steps_per_epoch=2,
                      pretrain="ict+bfs", pretrain_pairs=32, device="cpu")
    res = run_training(ds, cfg, tmp_path / "ft", str(tiny_model_dir), store)
    assert res.stages[0].startswith("pretrain ict+bfs: inbatch") and res.stages[1].startswith("triplet")
    stages = [s for s, _, _ in res.epoch_losses]
    assert stages == ["pretrain ict+bfs: inbatch", "triplet"]
    assert set(res.metrics) == {"base", "fine-tuned"}


def test_unlabelled_corpus_trains_on_pseudo_pairs_only(tiny_model_dir, store, tmp_path, toy_dataset):
    from retrieval.dataset import Dataset
    from sentence_transformers import SentenceTransformer
    from training.run import run_training
    from training.trainer import TrainConfig

    bare = Dataset("bare", toy_dataset.docs)
    with pytest.raises(ValueError, match="no relevance labels"):
        run_training(bare, TrainConfig(device="cpu"), tmp_path / "x", str(tiny_model_dir), store)
    cfg = TrainConfig(batch_size=2, lr=1e-3, pretrain="bfs", device="cpu")
    res = run_training(bare, cfg, tmp_path / "bfs", str(tiny_model_dir), store)
    assert res.metrics == {} and res.epoch_losses and res.stages[0].startswith("pretrain bfs")
    assert SentenceTransformer(str(tmp_path / "bfs"), device="cpu").encode(["x"]).shape == (1, 32)
