"""Held-out epoch selection (``training.holdout``) with a real tiny transformer, real BM25 and FAISS:
the held-out scores equal a full evaluation when the candidates cover the corpus, the kept epoch is
the best one, and a run whose every epoch is worse exports the base encoder unchanged."""
from __future__ import annotations

import copy
import html
from pathlib import Path

import numpy as np
import pytest
import torch

from retrieval.data.dataset import Dataset
from retrieval.evaluation.measures import Evaluation, compare
from retrieval.index.encoder import Encoder, load_encoder
from retrieval.store import Store
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from training.finetune import run_training
from training.holdout import HeldOutSelector, split_holdout
from training.trainer import TrainConfig


def test_split_is_seeded_disjoint_and_leaves_test_alone(demo):
    kept, held = split_holdout(demo, "train", 0.25, seed=3)
    assert set(held) and set(kept.qrels["train"]) and not set(held) & set(kept.qrels["train"])
    assert set(held) | set(kept.qrels["train"]) == set(demo.qrels["train"])
    assert kept.qrels["test"] == demo.qrels["test"]
    assert split_holdout(demo, "train", 0.25, seed=3)[1] == held
    with pytest.raises(ValueError, match="between 0 and 1"):
        split_holdout(demo, "train", 1.0)
    one = Dataset("one", demo.docs, demo.queries, {"train": dict(list(demo.qrels["train"].items())[:1])})
    with pytest.raises(ValueError, match="at least 2 labelled queries"):
        split_holdout(one, "train", 0.5)
    # a large label set holds out at most max_queries: the first of the same seeded order
    capped = split_holdout(demo, "train", 0.5, seed=3, max_queries=4)[1]
    assert len(capped) == 4 and set(capped) <= set(split_holdout(demo, "train", 0.5, seed=3)[1])


def test_the_default_check_steps_aside_for_a_single_labelled_query(demo, tiny_model_dir, tmp_path):
    """The defaults hold a share out; with one labelled training query there is none to spare, so it
    trains on that query and says the check was not made, instead of refusing to train."""
    qid = sorted(demo.qrels["train"])[0]
    one = Dataset(demo.name, demo.docs, demo.queries, {"train": {qid: demo.qrels["train"][qid]},
                                                       "test": demo.qrels["test"]})
    cfg = TrainConfig(epochs=1, batch_size=2, device="cpu", max_steps_per_epoch=1, lr=1e-3)
    assert cfg.holdout > 0 and cfg.refit  # the check is on by default
    store = Store(tmp_path / "s.sqlite3")
    result = run_training(one, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), store=store, evaluate=False)
    store.close()
    assert result.selection is None
    assert result.verdict == "no held-out check: 1 labelled training query, none to hold out" == result.stages[-1]
    assert (Path(result.model_path) / "model.safetensors").exists()


def test_scores_equal_a_full_evaluation_when_the_candidates_are_the_corpus(demo, tiny_encoder, store):
    held = demo.qrels["test"]
    ws = Workspace(Dataset(demo.name, demo.docs, demo.queries, {"train": held}), store, model=tiny_encoder)
    ws.build_dense()
    n = len(demo.doc_ids)
    queries = {q: demo.queries[q] for q in held}
    _, rows = ws.dense.index.search_vectors(ws.dense.encode_queries(queries), n)
    sel = HeldOutSelector(demo, held, ws.bm25, {q: rows[i] for i, q in enumerate(queries)},
                          tiny_encoder.precision, depth=n, query_max=CLEAR.query_max_space(ws))
    assert len(sel.union) == n  # the whole corpus: nothing is left out of the ranking
    got = sel.score(tiny_encoder.model)
    assert got["dense"] == pytest.approx(ws.evaluate("dense", "train").mean["ndcg@10"], abs=1e-6)
    fit = CLEAR.lambda_fit(ws, "train")  # the workspace's own λ search over the same candidates
    assert got["lambda"] == fit.best and got["hybrid"] == pytest.approx(max(s for _, s in fit.grid), abs=1e-6)


def run(demo, tiny_model_dir, tmp_path, **cfg):
    store = Store(tmp_path / "s.sqlite3")
    config = TrainConfig(**{"loss": "residual", "negatives": "bm25", "epochs": 2, "batch_size": 8, "device": "cpu",
                            "max_steps_per_epoch": 2, "xi": 0.3, "lambda_train": 0.02, "holdout": 0.3, "refit": False,
                            **cfg})
    stages = []
    result = run_training(demo, config, tmp_path / "ft", base_model=str(tiny_model_dir), store=store,
                          on_progress=lambda p: stages.append(p.stage))
    store.close()
    return result, stages


@pytest.fixture(scope="module")
def held_out_run(demo, tiny_model_dir, tmp_path_factory):
    """``run`` at lr 1e-3 with the held-out check and no refit (two epochs): its result and stages. The tests
    that read it only read it (its folder, its record, its weights), so the module trains it once."""
    return run(demo, tiny_model_dir, tmp_path_factory.mktemp("held-out-run"), lr=1e-3)


@pytest.fixture(scope="module")
def refit_run(demo, tiny_model_dir, tmp_path_factory):
    """The same run with the refit: the kept number of epochs trained again on all of train; read only, as above."""
    return run(demo, tiny_model_dir, tmp_path_factory.mktemp("refit-run"), lr=1e-3, refit=True)


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_best_epoch_is_the_one_exported(demo, tiny_encoder, held_out_run):
    result, stages = held_out_run
    sel = result.selection
    assert [(s["stage"], s["epoch"]) for s in sel["scores"]] == [("base", 0), ("residual", 1), ("residual", 2)]
    best = max(sel["scores"], key=lambda s: s["hybrid"])  # the earliest on a tie
    assert sel["chosen"] == best
    assert any(s.startswith("held-out check — base encoder: ") for s in stages)
    assert any(s.startswith("held-out check — residual epoch 2: encoding ") for s in stages)
    assert result.stages[-1].startswith(f"held-out selection on {sel['queries']} queries")
    # the exported model scores on the held-out queries what the chosen epoch scored
    _, held = split_holdout(demo, "train", 0.3, seed=42)
    assert len(held) == sel["queries"]
    ws = Workspace(demo, None, model=tiny_encoder)
    queries = {q: demo.queries[q] for q in held}
    _, rows = ws.dense.index.search_vectors(ws.dense.encode_queries(queries), 100)
    again = HeldOutSelector(demo, held, ws.bm25, {q: rows[i] for i, q in enumerate(queries)}, tiny_encoder.precision)
    exported = load_encoder(result.model_path, device="cpu", precision=tiny_encoder.precision)
    assert again.score(exported.model)["hybrid"] == pytest.approx(sel["chosen"]["hybrid"], abs=1e-6)
    # the verdict gives the kept epoch's paired test against the base on the same held-out queries
    assert sel["chosen"]["epoch"] > 0, "the tiny model's lr 1e-3 epochs beat its base on the demo"
    _, before = again.score_per_query(tiny_encoder.model)
    _, after = again.score_per_query(exported.model)
    p = compare(Evaluation({}, {"ndcg@10": before}), Evaluation({}, {"ndcg@10": after})).p_value
    assert sel["p_value"] == pytest.approx(p) and f"p {p:.3f}" in result.verdict
    assert ("within noise" in result.verdict) == (p >= 0.05)


@pytest.mark.slow
def test_a_run_worse_than_the_base_exports_the_base(demo, tmp_path):
    """The bundled MiniLM (its hybrid clearly beats BM25 alone on the demo); each epoch's weights are
    then wiped, the way a collapsed encoder ranks (every document alike), before the check reads them."""
    import torch

    from retrieval.index.encoder import load_encoder as load

    def collapse(model, stage, epoch):
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()

    store = Store(tmp_path / "s.sqlite3")
    cfg = TrainConfig(epochs=1, batch_size=8, device="cpu", max_steps_per_epoch=1, holdout=0.3)
    result = run_training(demo, cfg, tmp_path / "ft", store=store, on_epoch=collapse)
    store.close()
    sel = result.selection
    assert sel["chosen"]["epoch"] == 0 and sel["scores"][1]["hybrid"] < sel["scores"][0]["hybrid"]
    assert "no epoch beat the base encoder" in result.stages[-1]
    base = load(None, device="cpu")
    exported = Encoder(load(result.model_path, device="cpu").model, precision=base.precision)
    assert exported.fingerprint == base.fingerprint  # the base's weights, unchanged
    assert load(result.model_path, device="cpu").trained_on is None  # it saw no query: λ is tuned on train
    assert result.metrics["fine-tuned"]["dense"] == result.metrics["base"]["dense"]
    # the Train tab's per-query table lists no query, and its caption says why
    from ui.present.tables import per_query_change_caption, per_query_change_rows

    shown = result.to_json()
    assert shown["per_query"]["hybrid"] and per_query_change_rows(shown, demo.queries) == []
    caption = per_query_change_caption(shown)
    assert caption.endswith("no query's score changed — the held-out check kept the base model.")


def test_the_train_tab_states_the_verdict(demo, held_out_run):
    from ui.train import job_markdown

    result, _ = held_out_run
    job = {"id": "j1", "status": "done", "device": "cpu", "model_path": result.model_path,
           "result": {k: v for k, v in result.to_json().items() if k != "losses"}}
    text = html.unescape(job_markdown(job))  # as the page shows it (the data set's name in it is escaped)
    assert result.stages[-1] in text and "held-out selection on" in text
    # the per-query table lists exactly the queries whose nDCG@10 moved, and its caption counts them
    from ui.present.tables import per_query_change_caption, per_query_change_rows

    pq = result.per_query
    moved = {q for system in ("dense", "hybrid") for q, (a, b) in pq[system].items() if a != b}
    rows = per_query_change_rows(job["result"], demo.queries)
    assert {r[0] for r in rows} == moved and all(r[4] or r[7] for r in rows)
    assert [r[7] for r in rows] == sorted((r[7] for r in rows), reverse=True)  # biggest hybrid gain first
    better = sum(pq["hybrid"][q][1] > pq["hybrid"][q][0] for q in moved)
    assert f"{len(moved)} of {len(pq['hybrid'])} queries changed (hybrid better on {better}," in \
        per_query_change_caption(job["result"])
    assert result.verdict == result.stages[-1]
    del job["result"]["verdict"]  # a job stored before results had the field: read from its stages
    assert result.stages[-1] in html.unescape(job_markdown(job))
    job["result"].update(selection=None, verdict="", stages=result.stages[:-1])  # a run without the check
    assert "held-out selection" not in job_markdown(job)


def weights(path):
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_a_refit_trains_again_on_all_of_train_for_the_kept_epochs(demo, tiny_model_dir, tmp_path, refit_run,
                                                                  held_out_run):
    result, _ = refit_run
    kept = result.selection["chosen"]
    assert kept["stage"] == "residual" and kept["epoch"] >= 1, result.selection  # an epoch beat the base
    assert result.stages[-1].startswith("held-out selection on ")  # the verdict, last, says the refit too
    epochs = f"{kept['epoch']} epoch" + ("s" if kept["epoch"] > 1 else "")
    assert result.stages[-1].endswith(f"; refit on all {len(demo.qrels['train'])} train queries for {epochs}")
    # the export is the same training on every train query for that many epochs, without the check
    direct, _ = run(demo, tiny_model_dir, tmp_path / "b", lr=1e-3, holdout=0.0, epochs=kept["epoch"])
    mine, theirs = weights(Path(result.model_path)), weights(Path(direct.model_path))
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    not_refit = held_out_run[0]  # the same run without the refit
    held_out_only = weights(Path(not_refit.model_path))
    assert any(not torch.equal(mine[k], held_out_only[k]) for k in mine)  # trained on more queries: other weights
    # the record names the queries the exported encoder never trained on: none after a refit, else the check's
    assert load_encoder(result.model_path, device="cpu").trained_on.held_out == ()
    _, held = split_holdout(demo, "train", 0.3, TrainConfig().seed)  # run()'s share
    assert load_encoder(not_refit.model_path, device="cpu").trained_on.held_out == tuple(sorted(held))
    assert not (Path(result.model_path) / "checkpoints").exists()


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_a_fine_tuned_encoders_hybrid_takes_the_lambda_chosen_on_held_out_queries(demo, tmp_path, refit_run):
    """λ tuned on the queries the encoder trained on would favour it: the export records the λ its
    held-out check chose, and every workspace over the same train queries uses that one."""
    import json

    from retrieval.systems.clear_lambda import LABEL_FREE_LAMBDA
    from retrieval.training_record import LambdaFit

    result, _ = refit_run
    sel = result.selection
    assert sel["chosen"]["epoch"] > 0, sel
    fit = LambdaFit.from_json(sel["lambda_fit"])  # the kept epoch's, on the held-out queries
    assert fit.best == sel["chosen"]["lambda"] and fit.queries == sel["queries"] and fit.prior == LABEL_FREE_LAMBDA
    record = json.loads((Path(result.model_path) / "rankscope_training.json").read_text())["trained_on"]
    saved = LambdaFit.from_json(record["fit"])
    assert (record["split"], saved.chosen, saved.best, saved.queries) == ("train", fit.chosen, fit.best, sel["queries"])
    exported = load_encoder(result.model_path, device="cpu")
    assert exported.trained_on is not None and exported.trained_on.to_json() == record
    store = Store(tmp_path / "s.sqlite3")
    ws_tuned = Workspace(demo, store, model=exported)
    choice = CLEAR.lambda_for(ws_tuned, "test")
    assert choice.value == fit.chosen and choice.per_query_max
    assert choice.how.startswith(f"chosen on {sel['queries']} held-out train queries the encoder was not trained on")
    assert choice.grid == fit.grid  # the Evaluate tab's sweep draws the held-out curve λ was chosen on
    from ui.common import metrics_caption
    assert "λ is the label-free default" not in metrics_caption(ws_tuned, "test")
    assert result.metrics["fine-tuned"]["hybrid"]["lambda"] == fit.chosen  # the job's own evaluation used it
    # other train queries (one dropped): not the ones it trained on, so λ is tuned on them as for any encoder
    qrels = dict(demo.qrels["train"])
    qrels.pop(sorted(qrels)[0])
    other = Dataset(demo.name, demo.docs, demo.queries, {**demo.qrels, "train": qrels})
    assert CLEAR.lambda_for(Workspace(other, store, model=exported), "test").how.startswith("tuned on train")
    store.close()


def test_without_a_check_the_trained_on_queries_give_the_label_free_lambda(demo, tiny_model_dir, tmp_path):
    result, _ = run(demo, tiny_model_dir, tmp_path, lr=1e-3, holdout=0.0, epochs=1)
    exported = load_encoder(result.model_path, device="cpu")
    assert exported.trained_on is not None and exported.trained_on.fit is None
    ws_tuned = Workspace(demo, None, model=exported)
    choice = CLEAR.lambda_for(ws_tuned, "test")
    assert choice.value == 1.0 and "trained on the train queries, so λ is not tuned on them" in choice.how
    from ui.common import metrics_caption
    caption = metrics_caption(ws_tuned, "test")  # says why λ is not tuned, not that train queries would tune it
    assert "so λ is not tuned on them" in caption and "labelled train queries (a train split" not in caption


def test_the_base_is_scored_from_the_vectors_the_store_holds_and_every_model_at_the_base_length(demo, tiny_model_dir,
                                                                                                  tmp_path):
    """The app built the dense index (and evaluated the train split) before the training: the store holds the
    base's vectors of every document and query, so the held-out check encodes nothing with the base, and says
    so; its base score is what encoding the candidates with the base gives, and an epoch trained at 16 tokens
    is read, as the base and the exported encoder are, at the base's 64."""
    store = Store(tmp_path / "s.sqlite3")
    base = load_encoder(str(tiny_model_dir), device="cpu")  # the instance the training loads too (kept per process)
    ws = Workspace(demo, store, model=base)
    ws.build_dense()
    ws.evaluate("dense", "train")  # the train split's queries are in the store too
    lengths: list[int] = []  # each batch the base encodes: its tokens
    hook = base.model[0].register_forward_pre_hook(lambda _m, args: lengths.append(args[0]["input_ids"].shape[1]))
    epoch_lengths: list[int] = []
    epochs: list = []  # the epoch's model as the check met it
    stages: list[str] = []
    cfg = TrainConfig(epochs=1, batch_size=8, device="cpu", max_steps_per_epoch=1, max_seq_length=16, holdout=0.3,
                      refit=False, lr=1e-3)
    try:
        result = run_training(demo, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), store=store, evaluate=False,
                              on_progress=lambda p: stages.append(p.stage),
                              on_epoch=lambda model, stage, epoch: epoch_lengths.append(model.max_seq_length) or
                              epochs.append(copy.deepcopy(model)))
    finally:
        hook.remove()
    assert lengths == []  # no document, no query encoded by the base
    n = len(demo.doc_ids)
    assert f"held-out check — the corpus under the base encoder: {n:,} of {n:,} documents read from the store, " \
           "0 encoded (not in it)" in stages
    said = [s for s in stages if s.startswith("held-out check — base encoder: ")]
    assert len(said) == 1 and said[0].endswith("candidate documents read from its dense index (nothing encoded)")
    assert epoch_lengths == [16]  # the epoch trained at 16 tokens …
    # … and was scored at 64, as the base: its score is the exported encoder's (it reads at the base's length)
    _, held = split_holdout(demo, "train", 0.3, seed=42)
    queries = {q: demo.queries[q] for q in held}
    _, rows = ws.dense.index.search_vectors(ws.dense.encode_queries(queries), 100)
    again = HeldOutSelector(demo, held, ws.bm25, {q: rows[i] for i, q in enumerate(queries)}, base.precision,
                            query_max=CLEAR.query_max_space(ws), max_seq_length=base.max_seq_length)
    sel = result.selection
    assert again.score(base.model)["hybrid"] == pytest.approx(sel["scores"][0]["hybrid"], abs=1e-6)  # encoded
    (epoch,) = epochs
    assert epoch.max_seq_length == 16 and again.score(epoch)["dense"] == pytest.approx(sel["scores"][1]["dense"],
                                                                                      abs=1e-6)
    store.close()


def test_the_check_reads_a_model_at_its_length_and_leaves_it_at_its_own(demo, tiny_encoder, tiny_model_dir):
    from training.trainer import load_trainable

    ws = Workspace(demo, None, model=tiny_encoder)
    _, held = split_holdout(demo, "train", 0.3, seed=42)
    queries = {q: demo.queries[q] for q in held}
    _, rows = ws.dense.index.search_vectors(ws.dense.encode_queries(queries), 20)
    sel = HeldOutSelector(demo, held, ws.bm25, {q: rows[i] for i, q in enumerate(queries)}, tiny_encoder.precision,
                          depth=20, max_seq_length=64)
    short = load_trainable(str(tiny_model_dir), "cpu", 16)
    short.train()
    docs, _ = sel.vectors(short)
    assert short.max_seq_length == 16 and short.training  # as it came in
    full = Encoder(load_trainable(str(tiny_model_dir), "cpu", 64), precision=tiny_encoder.precision)
    assert np.allclose(docs, full.encode(sel.texts), atol=1e-5)  # read at 64 tokens, not its 16
    assert np.allclose(docs, ws.dense.index.embeddings[sel.union], atol=1e-5)  # the base's vectors, as indexed
    with pytest.raises(ValueError, match="the base's vectors are 1 candidates"):
        sel.start_from(docs[:1], docs[:1])
