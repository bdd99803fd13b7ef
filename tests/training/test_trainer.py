"""The training loop (``training.trainer``): examples and their negatives, every loss lowering its
loss, the two quadruplet stages, checkpoints, the epoch hook, cancel, and ``TrainConfig`` (its
validation and ``from_mapping``), with a real tiny transformer (random weights) and real BM25."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.data.dataset import Dataset
from retrieval.index.bm25_index import BM25Index
from retrieval.index.encoder import Encoder
from training.losses import QuadrupletLoss, ResidualMarginLoss, inbatch_loss, triplet_loss
from training.pairs import Pair, known_positives, labelled_pairs
from training.trainer import Cancelled, TrainConfig, Trainer


def fast(**kw) -> TrainConfig:
    """A CPU config small enough for tests."""
    return TrainConfig(**{"device": "cpu", "batch_size": 2, "lr": 1e-3, "seed": 0, **kw})


# ---- examples: the negatives each pair is trained against ----------------------------------

def test_examples_never_use_the_pairs_own_document_as_negative(toy_dataset):
    d1 = toy_dataset.docs["d1"].full_text
    pairs = labelled_pairs(toy_dataset, "train") + [Pair("warm mat by the fire", d1, None, "d1")]
    trainer = Trainer(fast(loss="triplet", negatives="random"), toy_dataset, pairs)
    text_id = {d.full_text: d.id for d in toy_dataset.docs.values()}
    pool = trainer.pool("random")
    negatives: dict[str, set[str]] = {}
    for _ in range(200):
        for (q, _p, n), _label in trainer.examples([pool]):
            negatives.setdefault(q, set()).add(text_id[n])
    # the pseudo pair has no query id, hence no known positives: only its own document is barred
    assert negatives["warm mat by the fire"] == set(toy_dataset.doc_ids) - {"d1"}
    assert negatives["cat on a mat"] == set(toy_dataset.doc_ids) - {"d1", "d5"}
    assert negatives["why did stocks fall"] == set(toy_dataset.doc_ids) - {"d3", "d6"}


def test_residual_examples_carry_the_bm25_gap(toy_dataset):
    d1 = toy_dataset.docs["d1"]
    pseudo = Pair("cat on a mat", d1.full_text, None, None)  # the text of d1, but not tied to the corpus
    pairs = labelled_pairs(toy_dataset, "train") + [pseudo]
    trainer = Trainer(fast(loss="residual", negatives="random", positives_per_query=0), toy_dataset, pairs)
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


def uneven_dataset() -> Dataset:
    """One broad query with 40 positives beside three narrow ones with one each (NFCorpus's shape)."""
    from retrieval.data.dataset import Document

    docs = {f"d{i}": Document(f"d{i}", "", f"document number {i} about topic {i % 7}") for i in range(60)}
    queries = {"broad": "topic", "n1": "number 41", "n2": "number 42", "n3": "number 43"}
    qrels = {"train": {"broad": {f"d{i}": 1 for i in range(40)}, "n1": {"d41": 1}, "n2": {"d42": 1},
                       "n3": {"d43": 1}}}
    return Dataset("uneven", docs, queries, qrels)


def test_each_epoch_draws_one_positive_per_query():
    ds = uneven_dataset()
    pairs = labelled_pairs(ds, "train")
    assert len(pairs) == 43
    trainer = Trainer(fast(loss="triplet", negatives="random", batch_size=2), ds, pairs)
    assert trainer.steps_per_epoch() == 2  # 4 queries, one positive each, batches of 2
    drawn_broad = set()
    for _ in range(60):
        examples = trainer.examples([trainer.pool("random")])
        queries = [texts[0] for texts, _ in examples]
        assert sorted(queries) == sorted(ds.queries.values())  # every query once, the broad one too
        drawn_broad.update(texts[1] for texts, _ in examples if texts[0] == "topic")
    # over the epochs the broad query's positive changes: all of its positives get their turn
    assert len(drawn_broad) > 30
    # every pair every epoch when asked (the behaviour before per-query drawing)
    every = Trainer(fast(loss="triplet", negatives="random", batch_size=2, positives_per_query=0), ds, pairs)
    assert every.steps_per_epoch() == 22 and len(every.examples([every.pool("random")])) == 43
    three = Trainer(fast(loss="triplet", negatives="random", batch_size=2, positives_per_query=3), ds, pairs)
    assert len(three.examples([three.pool("random")])) == 3 + 1 + 1 + 1


# ---- the loop ------------------------------------------------------------------------------


def test_the_schedule_and_the_progress_count_the_steps_an_epoch_takes(tiny_model_dir):
    """43 pairs in batches of 2 take 21 steps an epoch (a last batch of one has no in-batch negative and
    is skipped), not the 22 counted before negatives are drawn: the progress ends at its total, and the
    learning rate's linear decay reaches 0 at the last step."""
    ds = uneven_dataset()
    seen: list[tuple[int, int]] = []
    trainer = Trainer(fast(loss="inbatch", negatives="random", epochs=2, positives_per_query=0, warmup_ratio=0.1),
                      ds, labelled_pairs(ds, "train"), base_model=str(tiny_model_dir),
                      on_progress=lambda p: seen.append((p.step, p.total)))
    assert trainer.steps_per_epoch() == 22 and trainer.batches(43) == 21 and trainer.batches(44) == 22
    result = trainer.train()
    assert len(result.losses) == 42 and seen[-1] == (42, 42) and {t for _, t in seen} == {42}
    capped = Trainer(fast(positives_per_query=0, max_steps_per_epoch=5), ds, labelled_pairs(ds, "train"))
    assert capped.batches(43) == 5 and capped.batches(3) == 1 and capped.batches(1) == 0


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
               stage1_max_epochs=2, stage1_tol=float("-inf"), model_depth=4, xi=1.0, lambda_train=0.1,
               positives_per_query=0)  # all 4 pairs in each step
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
    from training import checkpoint

    ck = tmp_path / "ck"
    during = []
    trainer = None

    def on_progress(p):
        saved = checkpoint.load(ck, trainer.key)
        during.append((p.epoch, (saved.stage, saved.epoch) if saved else None))

    cfg = fast(loss="triplet", negatives="random", epochs=2, batch_size=4)
    trainer = Trainer(cfg, toy_dataset, labelled_pairs(toy_dataset, "train"), base_model=str(tiny_model_dir),
                      on_progress=on_progress, checkpoint_dir=ck)
    result = trainer.train()
    # during epoch 1 nothing is saved yet; during epoch 2 the epoch-1 checkpoint is there
    assert during == [(1, None), (2, ("triplet", 1))]
    last = checkpoint.load(ck, trainer.key)
    assert (last.stage, last.epoch, last.step) == ("triplet", 2, 2)
    final = result.model.state_dict()
    assert last.model.keys() == final.keys() and all(torch.equal(last.model[k], final[k]) for k in final)
    assert [p.name for p in ck.iterdir()] == ["state.pt"]  # written whole, then renamed into place


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

    cfg = fast(loss="triplet", negatives="random", epochs=3, batch_size=2,
               positives_per_query=0)  # 4 pairs: 2 steps an epoch, 6 in all
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
    ({"positives_per_query": -1}, "positives per query"),
    ({"query_pooling": "max"}, "unknown query pooling 'max'"),
    ({"query_pooling": "poly", "poly_codes": 0}, "at least one context code"),
])
def test_bad_config_is_rejected(toy_dataset, change, message):
    with pytest.raises(ValueError, match=message):
        Trainer(TrainConfig(**change), toy_dataset, labelled_pairs(toy_dataset, "train"))


def test_no_pairs_is_rejected(toy_dataset):
    with pytest.raises(ValueError, match="no training pairs"):
        Trainer(TrainConfig(), toy_dataset, [])


# ---- TrainConfig.from_mapping: what the app's form and the CLI hand over ----------------------

def test_from_mapping_coerces_form_values():
    # a UI form: numbers as floats (3.0) or strings, a dropdown's string
    cfg = TrainConfig.from_mapping({"loss": "triplet", "epochs": 3.0, "batch_size": "8", "max_seq_length": 64.0,
                                    "seed": "7", "bm25_depth": 200.0, "lr": "2e-4", "xi": 1, "margin": "0.2",
                                    "lambda_train": 0, "warmup_ratio": "0", "max_steps_per_epoch": 5.0,
                                    "stage1_max_epochs": "2", "stage1_tol": 0.5, "pretrain": "bfs",
                                    "pretrain_pairs": 100.0})
    assert cfg == TrainConfig(loss="triplet", epochs=3, batch_size=8, max_seq_length=64, seed=7, bm25_depth=200,
                              lr=2e-4, xi=1.0, margin=0.2, lambda_train=0.0, warmup_ratio=0.0, max_steps_per_epoch=5,
                              stage1_max_epochs=2, stage1_tol=0.5, pretrain="bfs", pretrain_pairs=100)
    ints = ("epochs", "batch_size", "max_seq_length", "seed", "bm25_depth", "max_steps_per_epoch",
            "stage1_max_epochs", "pretrain_pairs")
    assert all(type(getattr(cfg, name)) is int for name in ints)
    assert all(type(getattr(cfg, name)) is float for name in ("lr", "xi", "margin", "lambda_train", "warmup_ratio"))
    # argparse's values pass through unchanged
    assert TrainConfig.from_mapping({"epochs": 2, "lr": 5e-5, "device": "cpu"}) == \
        TrainConfig(epochs=2, lr=5e-5, device="cpu")


def test_from_mapping_blanks_take_the_defaults():
    assert TrainConfig.from_mapping({}) == TrainConfig()
    blanks = {"loss": None, "negatives": "", "epochs": None, "lr": "", "xi": None, "lambda_train": "",
              "max_seq_length": None, "device": ""}
    assert TrainConfig.from_mapping(blanks) == TrainConfig()
    # no step limit and no pretraining: None, "" and 0 all mean off
    for off in (None, "", 0, 0.0):
        cfg = TrainConfig.from_mapping({"max_steps_per_epoch": off, "pretrain": off})
        assert cfg.max_steps_per_epoch is None and cfg.pretrain is None
    # the recipe the app and the CLI share
    d = TrainConfig()
    assert (d.loss, d.negatives, d.lr, d.epochs, d.xi, d.lambda_train, d.max_seq_length) == \
        ("inbatch", "bm25", 1e-4, 5, 0.3, 0.019, 128)


def test_from_mapping_names_unknown_keys():
    with pytest.raises(ValueError, match=r"^unknown training parameters: dataset, learning_rate$"):
        TrainConfig.from_mapping({"learning_rate": 1e-4, "epochs": 1, "dataset": "scifact"})
    with pytest.raises(ValueError, match=r"^unknown training parameter: ξ$"):
        TrainConfig.from_mapping({"ξ": 0.3})


@pytest.mark.parametrize("values,message", [
    ({"epochs": 2.5}, r"^epochs 2\.5 is not a whole number$"),
    ({"batch_size": "sixteen"}, r"^batch_size 'sixteen' is not a whole number$"),
    ({"lr": "fast"}, r"^lr 'fast' is not a number$"),
    ({"max_steps_per_epoch": "1.5"}, r"^max_steps_per_epoch '1\.5' is not a whole number"),
    ({"xi": [0.3]}, r"^xi is list, not a number"),
    ({"seed": True}, r"^seed is bool, not a whole number"),
    ({"epochs": "1_0"}, r"^epochs '1_0' is not a whole number \(write the digits without '_'\)$"),
    ({"lr": "\u0661e-4"}, r"U\+0661 ARABIC-INDIC DIGIT ONE"),
    ({"lr": "nan"}, r"^lr 'nan' is not a finite number$"),
    ({"batch_size": 1.0}, "batch size must be ≥ 2"),  # converted, then validated
    ({"loss": "hinge"}, "unknown loss 'hinge'"),
    ({"pretrain": "wlp+ict"}, r"unknown pretraining task 'wlp\+ict'; choose from ict, bfs, wlp, ict\+bfs, ict\+wlp, "
                              r"bfs\+wlp, ict\+bfs\+wlp$"),
])
def test_from_mapping_rejects_bad_values(values, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_mapping(values)


# ---- the work one training may ask for: a ceiling in the config itself -------------------------

def test_ten_thousand_epochs_are_refused_wherever_a_config_is_made(capsys, tmp_path):
    """The ceiling is the config's own: made directly, from a form or the command line's values, or
    changed by ``replace``, 10,000 epochs are one line naming the range, and the command line exits 2
    before anything is written."""
    from dataclasses import replace

    from training.cli import main

    said = r"^epochs must be between 1 and 100, not 10000$"
    for make in (lambda: TrainConfig(epochs=10_000), lambda: TrainConfig.from_mapping({"epochs": "10000"}),
                 lambda: replace(TrainConfig(), epochs=10_000)):
        with pytest.raises(ValueError, match=said):
            make()
    with pytest.raises(ValueError, match=r"^stage1_max_epochs must be between 1 and 100, not 10000$"):
        TrainConfig(loss="quadruplet", stage1_max_epochs=10_000)
    with pytest.raises(SystemExit) as exited:  # the flag is read by the config's own range
        main(["train", "tests/data/none", "--epochs", "10000", "--out", str(tmp_path / "out")])
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].endswith("error: argument --epochs: epochs must be between 1 and 100, not 10000")
    assert not (tmp_path / "out").exists()


def test_a_step_too_large_or_a_step_cap_past_the_ceiling_is_refused_in_one_line():
    from training.trainer import MAX_BATCH_TOKENS, MAX_EXAMPLES

    assert TrainConfig(batch_size=1024, max_seq_length=256).batch_size * 256 == MAX_BATCH_TOKENS  # the edge fits
    with pytest.raises(ValueError, match=r"^batch size × max sequence length is at most 262,144 .*not 1024 × 8192$"):
        TrainConfig(batch_size=1024, max_seq_length=8192)
    # a cap of steps is a promise of work whatever the data: 5 epochs, refit, 1,000,000 steps of 64
    with pytest.raises(ValueError, match=r"^this training asks for up to 640,000,000 examples \(10 epochs of "
                                         r"64,000,000 pairs\), more than one job may \(50,000,000\)"):
        TrainConfig(max_steps_per_epoch=1_000_000, batch_size=64)
    fits = TrainConfig(max_steps_per_epoch=10_000, batch_size=64, epochs=10, refit=False)
    assert fits.examples_asked(10**12) == 10 * 10_000 * 64 <= MAX_EXAMPLES


@settings(max_examples=300, deadline=None)
@given(epochs=st.integers(1, 100), stage1=st.integers(1, 100), batch=st.integers(2, 1024),
       seq=st.integers(8, 8192), steps=st.none() | st.integers(1, 1_000_000),
       loss=st.sampled_from(["inbatch", "triplet", "quadruplet", "residual"]), holdout=st.sampled_from([0.0, 0.2]),
       refit=st.booleans(), pretrain=st.none() | st.just("ict"), pretrain_pairs=st.integers(1, 1_000_000),
       per_epoch=st.integers(0, 10**9))
def test_any_config_made_asks_for_no_more_than_the_ceiling(epochs, stage1, batch, seq, steps, loss, holdout, refit,
                                                            pretrain, pretrain_pairs, per_epoch):
    """Whatever the numbers: the config is refused in one line, or a step fits ``MAX_BATCH_TOKENS`` and
    (with a step cap) every run of it, whatever its data, fits ``MAX_EXAMPLES``; and on any data the
    check refuses exactly the runs past the ceiling, counted as every epoch of every stage."""
    from training.trainer import MAX_BATCH_TOKENS, MAX_EXAMPLES

    try:
        cfg = TrainConfig(epochs=epochs, stage1_max_epochs=stage1, batch_size=batch, max_seq_length=seq,
                          max_steps_per_epoch=steps, loss=loss, holdout=holdout, refit=refit, pretrain=pretrain,
                          pretrain_pairs=pretrain_pairs)
    except ValueError as err:
        assert "\n" not in str(err) and str(err)
        return
    assert cfg.batch_size * cfg.max_seq_length <= MAX_BATCH_TOKENS
    if steps is not None:
        assert cfg.examples_asked(10**12) <= MAX_EXAMPLES
    stages = (epochs + (stage1 if loss == "quadruplet" else 0)) * (2 if holdout and refit else 1)
    epoch = min(per_epoch, steps * batch) if steps else per_epoch
    asked = stages * epoch + ((min(pretrain_pairs, steps * batch) if steps else pretrain_pairs) if pretrain else 0)
    assert cfg.examples_asked(per_epoch) == asked
    if asked > MAX_EXAMPLES:
        with pytest.raises(ValueError, match=r"^this training asks for up to [\d,]+ examples \(\d+ epochs of "):
            cfg.check_examples(per_epoch)
    else:
        cfg.check_examples(per_epoch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # read only
@given(k=st.integers(0, 4), seed=st.integers(0, 2**16), extra=st.dictionaries(
    st.sampled_from(["q1", "q2", "q3", "q4"]), st.dictionaries(st.sampled_from(["d1", "d2", "d3", "d5", "d7", "dx"]),
                                                               st.integers(-1, 2), max_size=5), max_size=4))
def test_the_pairs_counted_for_the_ceiling_are_at_least_those_an_epoch_draws(toy_dataset, k, seed, extra):
    """The count the ceiling is checked with (``most_pairs_per_epoch``) is never below what the real
    trainer draws an epoch, whichever split trains (labels of every grade, unknown documents among them)."""
    from training.pairs import most_pairs_per_epoch

    ds = Dataset("toy+", toy_dataset.docs, toy_dataset.queries, {**toy_dataset.qrels, "extra": extra})
    counted = most_pairs_per_epoch(ds, k)
    for split in ds.qrels:
        pairs = labelled_pairs(ds, split)
        if pairs:
            trainer = Trainer(fast(positives_per_query=k, seed=seed), ds, pairs)
            assert len(trainer.epoch_pairs()) <= counted
    assert counted == max(sum(min(n, k) if k else n for n in
                              [sum(1 for p in labelled_pairs(ds, s) if p.query_id == q) for q in ds.qrels[s]])
                          for s in ds.qrels)
