"""Fine-tuning the learned sparse model (SPLADE-tiny, the real bundled model) on a slice of the demo:
trained, exported as a SparseEncoder folder, its vectors kept in the store, compared with the base on
SPLADE and the three-way fusion with paired intervals, guarded by the held-out check, offered in
Evaluate and Search (expansion terms before and after) and through the CLI."""
from __future__ import annotations

import json
import random
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval import Workspace
from retrieval.data.dataset import Dataset
from retrieval.index.splade import compare_terms, is_sparse_folder, load_sparse_model
from retrieval.systems import SPARSE_SYSTEMS, SPLADE
from tests.conftest import ROOT, store_copy
from training.finetune import finished_run, run_training
from training.trainer import TrainConfig

QUICK = dict(family="sparse", epochs=1, batch_size=4, max_steps_per_epoch=3, max_seq_length=64, device="cpu")


@pytest.fixture(scope="module")
def small(demo) -> Dataset:
    """The demo's queries over its relevant passages and 40 others (seeded): few passages to encode."""
    relevant = {d for split in demo.qrels.values() for docs in split.values() for d in docs}
    others = sorted(set(demo.docs) - relevant)
    kept = relevant | set(random.Random(7).sample(others, 40))
    return Dataset("demo-slice", {d: demo.docs[d] for d in demo.docs if d in kept}, dict(demo.queries),
                   {split: dict(q) for split, q in demo.qrels.items()})


@pytest.fixture(scope="module")
def trained(small, tiny_encoder, tmp_path_factory, demo_sparse_store):
    """One fine-tuning without the held-out check (so the trained weights are exported), a high
    learning rate so that three steps move them; its result, folder and store (the base's vectors
    in it from the start: ``sparse_store``)."""
    from retrieval.store import Store

    root = tmp_path_factory.mktemp("sparse-training")
    store = Store(store_copy(demo_sparse_store, root / "store.sqlite3"))
    cfg = TrainConfig(**QUICK, lr=1e-3, holdout=0.0)
    result = run_training(small, cfg, root / "model", store=store, encoder=tiny_encoder)
    yield result, root / "model", store
    store.close()


def test_the_config_says_what_a_sparse_model_trains_with():
    TrainConfig(family="sparse").validate()
    for bad, message in ((dict(family="sparse", loss="quadruplet"), "trains with inbatch"),
                         (dict(family="sparse", pretrain="ict"), "dense encoder only"),
                         (dict(family="sparse", negatives="model"), "negatives are bm25 or random"),
                         (dict(family="both"), "unknown model family")):
        with pytest.raises(ValueError, match=message):
            TrainConfig(**bad).validate()


def test_the_sparse_model_is_trained_exported_and_compared_with_its_base(trained, small, tiny_encoder):
    result, folder, store = trained
    assert is_sparse_folder(folder) and not is_sparse_folder(ROOT / "data" / "demo")
    base, tuned = load_sparse_model(), load_sparse_model(str(folder))
    assert tuned.fingerprint != base.fingerprint
    text = small.queries[sorted(small.qrels["test"])[0]]
    (bt, bw), (tt, tw) = base.encode([text], query=True)[0], tuned.encode([text], query=True)[0]
    assert not (np.array_equal(bt, tt) and np.allclose(bw, tw)), "three steps at lr 1e-3 left the vector as it was"
    assert set(result.metrics) == {"base", "fine-tuned"}
    for label in ("base", "fine-tuned"):
        assert set(result.metrics[label]) == set(SPARSE_SYSTEMS)
        low, high = result.metrics[label][SPLADE]["intervals"]["ndcg@10"]
        assert low <= result.metrics[label][SPLADE]["ndcg@10"] <= high
    diff = result.differences[SPLADE]["ndcg@10"]
    assert diff["interval"][0] <= diff["delta"] <= diff["interval"][1]
    assert set(result.per_query[SPLADE]) == set(small.qrels["test"])
    from retrieval.systems.hybrid3 import KEY as HYBRID3
    from retrieval.systems.hybrid3 import mu_for
    from ui.present.tables import training_result_rows

    for label, sparse_model in (("base", None), ("fine-tuned", str(folder))):  # each model's own μ, named
        mu = mu_for(Workspace(small, store, model=tiny_encoder, sparse_model=sparse_model), "test").value
        assert result.metrics[label][HYBRID3]["weights"] == {"μ": mu}
        assert any(row[:2] == [label, f"{HYBRID3} (μ {mu:g})"] for row in training_result_rows(result.to_json()))
    # its vectors are kept under its own fingerprint: a second workspace reads them, encoding nothing
    again = Workspace(small, store, sparse_model=str(folder)).build_sparse()
    assert again.encoded == 0 and again.from_store == len(small.docs)
    card = (folder / "README.md").read_text()
    assert "sparse-encoder" in card and "FLOPS" in card
    assert finished_run(folder, TrainConfig(**QUICK, lr=1e-3, holdout=0.0)) is not None


def test_the_fusion_does_not_tune_mu_on_the_queries_the_sparse_model_trained_on(trained, small, tiny_encoder):
    from retrieval.systems.hybrid3 import SPARSE_PART, mu_for, unseen

    _, folder, store = trained
    tuned = Workspace(small, store, model=tiny_encoder, sparse_model=str(folder))
    assert unseen(tuned, "train").trained == (SPARSE_PART,)
    assert "fine-tuned on the train queries, so μ is not tuned on them" in mu_for(tuned, "test").how
    base = Workspace(small, store, model=tiny_encoder)
    assert unseen(base, "train") is None


def test_the_fusion_tunes_mu_on_the_held_out_queries_the_sparse_model_never_saw(trained, small, tiny_encoder,
                                                                             tmp_path):
    """A sparse model whose record names the train queries its held-out check kept out: the three-way
    fusion's μ is tuned on those queries alone, by the same rule as on a whole split."""
    import shutil

    from retrieval.data.dataset import queries_fingerprint
    from retrieval.index.encoder import TRAINING_RECORD, read_trained_on
    from retrieval.judging.labels import JUDGED
    from retrieval.systems.hybrid3 import mu_fit, mu_for, unseen

    _, folder, store = trained
    copy = tmp_path / "held-out-model"
    shutil.copytree(folder, copy)
    record = json.loads((copy / TRAINING_RECORD).read_text())
    held = sorted(small.qrels["train"])[:5]
    record["trained_on"]["held_out"] = [*held, "no-such-query"]
    (copy / TRAINING_RECORD).write_text(json.dumps(record))
    tuned = Workspace(small, store, model=tiny_encoder, sparse_model=str(copy))
    assert unseen(tuned, "train").queries == held  # ids the split does not label are left out
    choice = mu_for(tuned, "test")
    assert choice.fit is not None and choice.fit.queries == len(held)
    assert choice.how.startswith(f"tuned on {len(held)} held-out train queries the learned sparse model was not")
    from retrieval.evaluation.measures import evaluate_run
    from retrieval.systems.hybrid3 import candidates, rank3

    for mu, value in choice.fit.grid:  # each μ's nDCG@10 is the mean over the held-out queries, not over all of train
        run = rank3(candidates(tuned, {q: small.queries[q] for q in held}), choice.lam, mu, small.doc_ids, 100,
                    choice.lam_by_query)
        mean = evaluate_run(run, {q: small.qrels["train"][q] for q in held}, metrics=("ndcg@10",)).mean["ndcg@10"]
        assert value == pytest.approx(mean, abs=1e-9)
    every = mu_fit(tuned, "train", choice.lam, choice.lam_by_query, 1.0)
    assert every.queries == len(small.qrels["train"]) > len(held)
    # trained on judged queries and evaluated on them: μ is not tuned on any of them; new queries take the fit
    judged = Dataset("demo-judged", small.docs, small.queries, {JUDGED: dict(small.qrels["train"])})
    record["trained_on"].update(split=JUDGED, queries=queries_fingerprint(judged.split_queries(JUDGED)))
    (copy / TRAINING_RECORD).write_text(json.dumps(record))
    again = tmp_path / "judged-model"
    shutil.copytree(copy, again)
    on_judged = Workspace(judged, store, model=tiny_encoder, sparse_model=str(again))
    assert unseen(on_judged, JUDGED).queries == held
    assert mu_for(on_judged, JUDGED).fit is None and "μ is not tuned on them" in mu_for(on_judged, JUDGED).how
    assert mu_for(on_judged, None).fit is not None and mu_for(on_judged, None).fit.queries == len(held)
    for damaged in ("q1", [1, 2], {"q": 1}):  # not a list of ids: the record is not trusted, the model still loads
        record["trained_on"]["held_out"] = damaged
        (copy / TRAINING_RECORD).write_text(json.dumps(record))
        assert read_trained_on(copy) is None


def test_a_fine_tuned_sparse_model_s_mu_must_beat_the_base_s_mu_not_the_label_free_one(trained, small, tiny_encoder,
                                                                                      tmp_path):
    """Training records the μ its base was given on the whole train split; the fine-tuned model's μ is
    that μ unless its held-out sweep beats it — and label-free where the judged queries are both the
    training split and the split evaluated (the base's μ was tuned on them)."""
    import shutil

    from retrieval.data.dataset import queries_fingerprint
    from retrieval.index.encoder import TRAINING_RECORD, load_encoder, read_trained_on
    from retrieval.judging.labels import JUDGED
    from retrieval.systems.hybrid3 import BASE_PRIOR, LABEL_FREE_MU, MU_GRID, mu_for
    from retrieval.training_record import LambdaFit
    from tests.conftest import build_tiny_encoder

    _, folder, store = trained
    base = Workspace(small, store, model=tiny_encoder)
    recorded = read_trained_on(folder)
    assert recorded is not None and recorded.base_mu is not None
    assert recorded.base_mu == mu_for(base, "test").fit  # what the base is given, tuned on all of train
    assert recorded.base_mu.queries == len(small.qrels["train"])

    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    record = json.loads((copy / TRAINING_RECORD).read_text())
    grid = [[mu, 0.5] for mu in MU_GRID]
    record["trained_on"]["base_mu"] = {"best": 0.25, "grid": grid, "queries": 99, "prior": 1.0, "p_value": 0.001}
    (copy / TRAINING_RECORD).write_text(json.dumps(record))
    no_held = Workspace(small, store, model=tiny_encoder, sparse_model=str(copy))
    choice = mu_for(no_held, "test")  # no held-out queries: the base's μ, not the label-free 1
    assert choice.value == 0.25 and choice.fit is None
    assert f"μ 0.25, {BASE_PRIOR} (tuned on 99 train queries)" in choice.how

    held = sorted(small.qrels["train"])[:5]
    record["trained_on"]["held_out"] = held
    swept = tmp_path / "held-out"
    shutil.copytree(copy, swept)
    (swept / TRAINING_RECORD).write_text(json.dumps(record))
    choice = mu_for(Workspace(small, store, model=tiny_encoder, sparse_model=str(swept)), "test")
    assert choice.fit is not None and choice.fit.prior == 0.25 and choice.fit.queries == len(held)
    assert choice.value in (0.25, choice.fit.best) and BASE_PRIOR in choice.how
    assert (choice.value == choice.fit.best) == (choice.fit.p_value is not None and choice.fit.p_value < 0.05)

    judged = Dataset("demo-judged", small.docs, small.queries, {JUDGED: dict(small.qrels["train"])})
    record["trained_on"].update(split=JUDGED, queries=queries_fingerprint(judged.split_queries(JUDGED)))
    on_judged = tmp_path / "judged"
    shutil.copytree(copy, on_judged)
    (on_judged / TRAINING_RECORD).write_text(json.dumps(record))
    choice = mu_for(Workspace(judged, store, model=tiny_encoder, sparse_model=str(on_judged)), JUDGED)
    assert choice.value == LABEL_FREE_MU and choice.fit is None and BASE_PRIOR not in choice.how

    # the base's μ was tuned beside the training's dense encoder: beside another one it is no prior
    assert read_trained_on(copy).base_mu_beside == tiny_encoder.fingerprint
    other = load_encoder(str(build_tiny_encoder(tmp_path / "other-encoder", seed=1)), device="cpu")
    assert other.fingerprint != tiny_encoder.fingerprint
    choice = mu_for(Workspace(small, store, model=other, sparse_model=str(copy)), "test")
    assert choice.value == LABEL_FREE_MU and choice.fit is None and BASE_PRIOR not in choice.how
    record["trained_on"]["base_mu_beside"] = 7  # not a fingerprint: not trusted
    (on_judged / TRAINING_RECORD).write_text(json.dumps(record))
    assert read_trained_on(on_judged) is None
    record["trained_on"]["base_mu_beside"] = tiny_encoder.fingerprint

    for damaged in ({"best": "0.25", "grid": grid, "queries": 99, "prior": 1.0, "p_value": 0.001},
                    {"best": 0.25, "grid": [[0.25]], "queries": 99, "prior": 1.0, "p_value": 0.001},
                    {"best": 0.25, "grid": grid, "queries": True, "prior": 1.0, "p_value": 0.001},
                    {"best": 0.25, "grid": grid, "queries": 99, "prior": None},
                    [0.25]):  # not as written: the record is not trusted, the model still loads
        record["trained_on"]["base_mu"] = damaged
        (on_judged / TRAINING_RECORD).write_text(json.dumps(record))
        assert read_trained_on(on_judged) is None
    assert LambdaFit.from_json(recorded.base_mu.to_json()) == recorded.base_mu


def test_the_held_out_check_ranks_the_whole_corpus_as_search_does_where_it_fits(small, tiny_encoder, store):
    """Within ``CHECK_DOCS`` the check scores each held-out query exactly as the SPLADE system ranks it
    over the whole corpus; past it, it re-ranks BM25's and the base's top documents, within the budget."""
    from retrieval.evaluation.measures import evaluate_run
    from training import sparse
    from training.holdout import MAX_HELD_OUT, split_holdout

    ws = Workspace(small, store, model=tiny_encoder)
    index = ws.build_sparse()
    _, held = split_holdout(small, "train", 0.3, 42, sparse.held_out_cap(len(small.doc_ids)))
    queries = {q: small.queries[q] for q in held}

    def base_top(qs, k):
        return {q: [ws.doc_row[d] for d, _ in hits] for q, hits in index.search(qs, k).items()}

    whole = sparse.held_out_check(small, held, ws.bm25, base_top)
    assert whole.candidates is None and len(whole.rows) == len(small.docs) and "whole corpus" in whole.scope
    scored = whole.score(load_sparse_model().model)
    searched = evaluate_run(index.search(queries, 100), held, metrics=("ndcg@10",)).per_query["ndcg@10"]
    assert scored == pytest.approx(dict(searched), abs=1e-6)
    base = sparse.fresh_copy(None, "cpu")  # the copy training starts from: the store holds its vectors already
    assert base.fingerprint == load_sparse_model().fingerprint
    encode, calls = base.model.encode_document, []
    base.model.encode_document = lambda texts, **kw: calls.append(len(texts)) or encode(texts, **kw)
    assert whole.score(base.model, store=store) == pytest.approx(dict(searched), abs=1e-6)
    assert calls == [], "the base's document vectors are read from the store, not encoded again"
    assert whole.score(base.model) == pytest.approx(dict(searched), abs=1e-6) and sum(calls) == len(small.docs)
    budget = len(small.docs) - 1
    part = sparse.held_out_check(small, held, ws.bm25, base_top, budget=budget)
    depth = sparse.check_depth(len(queries), budget)
    assert part.candidates is not None and len(part.rows) <= min(budget, 2 * depth * len(queries))
    assert all(len(c) <= 2 * depth for c in part.candidates.values()) and "candidates" in part.scope
    assert [sparse.check_depth(n) for n in (1, 100, 500, 10_000)] == [100, 50, 10, 10]
    # ranking the whole corpus costs the same however many queries: as many held out as the dense guard's
    assert sparse.held_out_cap(len(small.docs)) == MAX_HELD_OUT
    assert sparse.held_out_cap(len(small.docs), budget) == sparse.MAX_SPARSE_HELD_OUT < MAX_HELD_OUT


@pytest.mark.slow
def test_the_held_out_check_keeps_the_base_where_training_hurts(small, tiny_encoder, tmp_path, sparse_store):
    """A learning rate that wrecks the model: no epoch beats the base on the held-out queries, and
    the exported model is the base itself."""
    cfg = TrainConfig(**QUICK, lr=0.5, holdout=0.3)
    result = run_training(small, cfg, tmp_path / "model", store=sparse_store, evaluate=False, encoder=tiny_encoder)
    assert "the base is kept" in result.verdict
    assert result.selection["chosen"] == 0 and result.selection["scores"][0][0] == 0
    assert load_sparse_model(str(tmp_path / "model"), cached=False).fingerprint == load_sparse_model().fingerprint
    record = json.loads((tmp_path / "model" / "rankscope_training.json").read_text())
    assert record["trained_on"] is None  # the base saw no query
    assert not (tmp_path / "model" / "checkpoints").exists()


def test_evaluate_offers_the_fine_tuned_sparse_model_beside_the_base(trained, small, tiny_encoder):
    from retrieval.evaluation.compression import comparison_workspaces
    from retrieval.evaluation.metric_tables import metrics_table
    from retrieval.systems import BM25, DENSE

    _, folder, store = trained
    ws = Workspace(small, store, model=tiny_encoder)
    shown = comparison_workspaces(ws, [str(folder)])
    assert list(shown) == ["", f"fine-tuned SPLADE {folder.name}"]
    rows = metrics_table(shown, "test", (BM25, DENSE, SPLADE))
    labels = [r["label"] for r in rows]
    assert labels.count("Dense") == 1, "the dense encoder is the same: listed once"
    assert any(lab.startswith("Learned sparse (SPLADE) · fine-tuned SPLADE") for lab in labels)


def test_search_shows_the_querys_terms_before_and_after(trained, small):
    _, folder, _ = trained
    text = small.queries[sorted(small.qrels["test"])[0]]
    rows = compare_terms(load_sparse_model(), load_sparse_model(str(folder)), text)
    assert rows and any(r.base != r.tuned for r in rows)
    assert all(not r.expansion for r in rows if r.term in text.lower().split())
    same = compare_terms(load_sparse_model(), load_sparse_model(), text)
    assert all(r.base == r.tuned for r in same)


def test_the_cli_refuses_a_loss_the_sparse_model_cannot_use(tmp_path, capsys):
    from training.cli import main

    assert main(["train", str(ROOT / "data" / "demo"), "--family", "sparse", "--loss", "quadruplet",
                 "--out", str(tmp_path / "m")]) == 2
    assert "the learned sparse model trains with inbatch" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("negatives", ["bm25", "random"])
def test_each_triple_pairs_a_positive_with_a_document_its_query_is_not_labelled_with(small, negatives):
    from training.pairs import labelled_pairs
    from training.sparse import training_rows

    cfg = TrainConfig(family="sparse", negatives=negatives, positives_per_query=0)
    pairs = labelled_pairs(small, "train")
    rows = training_rows(small, pairs, Workspace(small).bm25, cfg)
    assert len(rows["query"]) == len(pairs)  # 0: every pair
    positives: dict[str, set[str]] = {}
    for p in pairs:
        positives.setdefault(p.query, set()).add(p.doc_text)
    assert all(n not in positives[q] for q, n in zip(rows["query"], rows["negative"]))
    one = training_rows(small, pairs, Workspace(small).bm25, TrainConfig(family="sparse", negatives=negatives))
    assert len(one["query"]) == len(positives)  # one positive per query
    assert one == training_rows(small, pairs, Workspace(small).bm25, TrainConfig(family="sparse", negatives=negatives))


CANCELLED = TrainConfig(**{**QUICK, "epochs": 2, "max_steps_per_epoch": 2}, lr=1e-4, holdout=0.3)


@pytest.fixture(scope="module")
def cancelled(small, tiny_encoder, tmp_path_factory, demo_sparse_store):
    """A run of ``CANCELLED`` cancelled at the first step of its second epoch: its output folder, the
    checkpoints and held-out scores it left in it. The tests that go on from it each start over a copy of
    the folder (and a store holding the base's vectors, as this run's did: ``sparse_store``)."""
    import threading

    from retrieval.store import Store
    from training.trainer import Cancelled

    root = tmp_path_factory.mktemp("cancelled-sparse-training")
    store = Store(store_copy(demo_sparse_store, root / "store.sqlite3"))
    cancel = threading.Event()

    def on_progress(p):
        if p.stage.startswith("sparse:") and p.step == 3:  # the first step of the second epoch
            cancel.set()

    try:
        with pytest.raises(Cancelled, match="checkpoint is kept"):
            run_training(small, CANCELLED, root / "model", store=store, evaluate=False, encoder=tiny_encoder,
                         on_progress=on_progress, cancel=cancel)
    finally:
        store.close()
    return root / "model"


@pytest.mark.slow
def test_a_sparse_training_cancelled_half_way_resumes_from_its_last_checkpoint(small, tiny_encoder, tmp_path,
                                                                               sparse_store, cancelled):
    import shutil

    shutil.copytree(cancelled, tmp_path / "model")
    checkpoints = tmp_path / "model" / "checkpoints"
    kept = json.loads((checkpoints / "selection.json").read_text())
    assert [e for e, _ in kept["scores"]] == [0, 1]  # the base and the first epoch were scored before the cancel
    steps: list[int] = []
    result = run_training(small, CANCELLED, tmp_path / "model", store=sparse_store, evaluate=False,
                          encoder=tiny_encoder,
                          on_progress=lambda p: steps.append(p.step) if p.stage.startswith("sparse:") else None)
    assert "(resumed)" in result.stages[0]
    assert [e for e, _ in result.selection["scores"]] == [0, 1, 2]
    assert result.selection["scores"][:2] == kept["scores"]  # read back, not scored again
    assert min(steps) == 3, "the first epoch was not trained again, the second was trained from its start"
    assert not checkpoints.exists()


@pytest.mark.slow
def test_another_run_over_a_cancelled_runs_folder_starts_afresh(small, tiny_encoder, tmp_path, sparse_store,
                                                                cancelled):
    """The checkpoints left by a cancelled run are only resumed by the same run: another configuration
    over the same output folder trains from its first step, with its own held-out scores."""
    import shutil

    shutil.copytree(cancelled, tmp_path / "model")
    assert (tmp_path / "model" / "checkpoints" / "selection.json").exists()
    other = TrainConfig(**{**QUICK, "epochs": 1, "max_steps_per_epoch": 2}, lr=5e-5, holdout=0.3)
    steps: list[int] = []
    result = run_training(small, other, tmp_path / "model", store=sparse_store, evaluate=False, encoder=tiny_encoder,
                          on_progress=lambda p: steps.append(p.step) if p.stage.startswith("sparse:") else None)
    assert "(resumed)" not in result.stages[0]
    assert min(steps) == 1 and [e for e, _ in result.selection["scores"]] == [0, 1]


def test_a_checkpoint_folder_is_kept_for_its_own_run_only(tmp_path):
    from training.sparse import BEST, RUN_KEY, SELECTION, TRAINER, claim

    folder = tmp_path / "checkpoints"
    claim(folder, "run-a")
    (folder / TRAINER / "checkpoint-2").mkdir(parents=True)
    (folder / SELECTION).write_text("{}")
    (folder / BEST).mkdir()
    claim(folder, "run-a")  # the same run again: everything stays to resume from
    assert (folder / TRAINER / "checkpoint-2").is_dir() and (folder / SELECTION).exists() and (folder / BEST).is_dir()
    claim(folder, "run-b")  # another run: nothing of run-a's is resumed
    assert sorted(p.name for p in folder.iterdir()) == [RUN_KEY]
    assert (folder / RUN_KEY).read_text() == "run-b"


def test_an_epoch_is_kept_only_where_it_beats_the_base_significantly(tmp_path):
    from training.sparse import BEST, SELECTION, SparseSelection, read_selection

    base = {f"q{i}": 0.5 for i in range(40)}
    noisy = {q: v + (0.05 if i % 2 else -0.04) for i, (q, v) in enumerate(base.items())}  # +0.005 on average
    better = {q: v + 0.2 for q, v in base.items()}
    s = SparseSelection(40)
    s.add(0, base)
    s.add(1, noisy)
    assert s.chosen == 0 and s.p["1"] > 0.05 and "the base is kept" in s.describe()
    s.add(2, better)
    assert s.chosen == 2 and s.p["2"] < 0.05 and s.describe().startswith("held-out selection on 40 queries: epoch 2")
    s.add(3, noisy)
    assert s.chosen == 2
    (tmp_path / SELECTION).write_text(json.dumps(asdict(s)))
    (tmp_path / BEST).mkdir()  # epoch 2's model, saved beside its scores
    again = read_selection(tmp_path / SELECTION, base)  # as a resumed run reads it back
    assert again == s
    again.add(4, {q: v + 0.3 for q, v in base.items()})
    assert again.chosen == 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.floats(0, 1), min_size=6, max_size=6), min_size=1, max_size=4))
def test_the_held_out_scores_a_resumed_run_reads_back_are_the_ones_it_wrote(tmp_path, epochs):
    """Round trip: what a run wrote is read back as the same selection (means, p values and the kept
    epoch computed again from the per-query scores)."""
    from training.sparse import BEST, SELECTION, SparseSelection, read_selection

    queries = [f"q{i}" for i in range(6)]
    written = SparseSelection(len(queries), scope="ranking the whole corpus (9 documents)")
    for epoch, values in enumerate(epochs):
        written.add(epoch, dict(zip(queries, values)))
    (tmp_path / SELECTION).write_text(json.dumps(asdict(written)))
    (tmp_path / BEST).mkdir(exist_ok=True)
    assert read_selection(tmp_path / SELECTION, queries, written.scope) == written


def test_the_checks_vectors_are_kept_only_where_the_exported_model_gives_them_again(small, store):
    """``keep_vectors`` stores the held-out check's vectors under the model's fingerprint only after the
    model encodes a sample of them to the same terms and weights: other vectors are never kept."""
    from retrieval.store import text_hash
    from training.sparse import KeptVectors, keep_vectors

    model = load_sparse_model()
    texts = [d.full_text for d in list(small.docs.values())[:6]]
    vectors = model.encode(texts)
    hashes = [text_hash(t) for t in texts]
    doubled = KeptVectors(texts, [(t, w * 2) for t, w in vectors])  # another model's, say
    assert keep_vectors(store, model, doubled) == 0
    assert store.get_sparse(model.fingerprint, hashes) == {}
    assert keep_vectors(None, model, KeptVectors(texts, vectors)) == 0 and keep_vectors(store, model, None) == 0
    assert keep_vectors(store, model, KeptVectors(texts, vectors)) == len(texts)
    assert len(store.get_sparse(model.fingerprint, hashes, model.vocab_size)) == len(texts)


def test_a_damaged_held_out_record_is_not_trusted_and_the_run_starts_afresh(small, tiny_encoder, tmp_path):
    """Whatever is in a run's ``selection.json`` — not JSON, another shape, numbers out of range,
    queries the check does not hold out, no base, an epoch kept with no model saved — is read back as
    None (the run starts afresh) and never raises; ``clear`` leaves nothing of the run to resume."""
    from training.sparse import BEST, SELECTION, TRAINER, SparseSelection, clear, read_selection

    queries = [f"q{i}" for i in range(1, 9)]
    good = SparseSelection(len(queries))
    good.add(0, {q: i / 10 for i, q in enumerate(queries)})
    good.add(1, {q: 0.9 for q in queries})
    assert good.chosen == 1
    path = tmp_path / SELECTION
    damaged = [b"\xff\xfe", b"not json", b"[]", b'"per_query"', b"{}", b'{"per_query": "012"}',
               b'{"per_query": []}', b'{"per_query": {}}', b'{"per_query": {"1": {"q1": 0.5}}}',
               b'{"per_query": {"0": {"q1": 1.5}}}', b'{"per_query": {"0": {"q1": NaN}}}',
               b'{"per_query": {"0": {"q1": true}}}', b'{"per_query": {"0": {"q1": "0.5"}}}',
               b'{"per_query": {"0": {"elsewhere": 0.5}}}', b'{"per_query": {"0": {}}}',
               b'{"per_query": {"00": {"q1": 0.5}}}', b'{"per_query": {"0": {"q1": 0.5}, "1_0": {"q1": 0.5}}}',
               b'{"per_query": {"0": [0.5]}}', ("{" * 100_000).encode(),
               json.dumps(asdict(good)).encode()]  # epoch 1 kept, but no model saved beside it
    for content in damaged:
        path.write_bytes(content)
        assert read_selection(path, queries) is None, content[:60]
    assert read_selection(tmp_path / "missing.json", queries) is None
    (tmp_path / BEST).mkdir()
    assert read_selection(path, queries) == good  # the same record with its model beside it
    (tmp_path / TRAINER / "checkpoint-4").mkdir(parents=True)
    clear(tmp_path)
    assert not any((tmp_path / name).exists() for name in (SELECTION, BEST, TRAINER))


@pytest.mark.slow
def test_the_exported_model_is_the_kept_epoch_as_it_was_scored(small, tiny_encoder, tmp_path, sparse_store,
                                                               monkeypatch):
    """An earlier epoch kept is exported as the held-out check scored it: reading as far as the base,
    not cut to the training length (an exported SciFact model once read 128 tokens of each abstract)."""
    import training.sparse as sparse
    from training.holdout import split_holdout

    monkeypatch.setattr(sparse, "SIGNIFICANCE_LEVEL", 1.01)  # any epoch better than the base is kept
    cfg = TrainConfig(**{**QUICK, "epochs": 3, "max_steps_per_epoch": None}, lr=1e-4, holdout=0.3)
    result = run_training(small, cfg, tmp_path / "model", store=sparse_store, evaluate=False, encoder=tiny_encoder)
    chosen = result.selection["chosen"]
    assert 0 < chosen < 3, result.selection  # an earlier epoch: the one saved on the way
    exported = load_sparse_model(str(tmp_path / "model"), cached=False)
    assert exported.max_seq_length == load_sparse_model().max_seq_length
    ws = Workspace(small, sparse_store, model=tiny_encoder)
    index = ws.build_sparse()
    _, held = split_holdout(small, "train", 0.3, cfg.seed, sparse.held_out_cap(len(small.doc_ids)))
    check = sparse.held_out_check(small, held, ws.bm25, lambda qs, k: {
        q: [ws.doc_row[d] for d, _ in hits] for q, hits in index.search(qs, k).items()})
    again = check.score(exported.model)
    assert np.mean(list(again.values())) == pytest.approx(dict(result.selection["scores"])[chosen], abs=1e-9)
    record = json.loads((tmp_path / "model" / "rankscope_training.json").read_text())
    assert record["trained_on"]["held_out"] == sorted(held)  # the fusion's μ is tuned on these
    # the check's vectors of the kept epoch are in the store under the exported model's fingerprint: the
    # evaluation reads them instead of encoding the corpus again, and they are what the model encodes
    from retrieval.store import text_hash

    texts = [d.full_text for d in small.docs.values()]
    stored = sparse_store.get_sparse(exported.fingerprint, [text_hash(t) for t in texts], exported.vocab_size)
    assert len(stored) == len(set(texts))
    for text, (terms, weights) in zip(texts[:3], exported.encode(texts[:3])):
        assert np.array_equal(stored[text_hash(text)][0], terms)
        assert np.allclose(stored[text_hash(text)][1], weights, rtol=1e-4, atol=1e-5)
