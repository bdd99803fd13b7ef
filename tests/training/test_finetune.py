"""A whole fine-tuning (``training.finetune``): split planning, then train → export → evaluate against
the base with a real tiny transformer (random weights) on the demo data set, cancel while evaluating,
cold start, and pseudo-pair pretraining."""
from __future__ import annotations

import json
import threading

import pytest

from retrieval.data.dataset import Dataset
from retrieval.evaluation.metrics import SUMMARY_METRICS
from retrieval.index.encoder import Encoder, load_encoder
from retrieval.store import Store
from retrieval.workspace import Workspace
from tests.helpers import count_embeddings, integrity_check
from training.finetune import plan_splits, run_training
from training.pairs import labelled_pairs
from training.trainer import Cancelled, TrainConfig

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
    assert train.isdisjoint(test) and train | test == set(demo.qrels["test"]) and len(train) == 16
    assert (plan.train_split, plan.eval_split) == ("train", "test")
    assert plan.note.startswith("cold-start split of 'test' by query (seed 3): 16 queries train (50%), 16 evaluate")
    # without a fraction: 80/20
    assert len(plan_splits(only_test).dataset.qrels["train"]) == 26
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
                      max_steps_per_epoch=3, xi=0.3, lambda_train=0.02, holdout=0.0)  # one plain run
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
    tuned = Encoder(model, precision=tiny_encoder.precision)  # evaluated like the base: same precision
    assert tuned.fingerprint != tiny_encoder.fingerprint  # the weights moved
    registered = {m["fingerprint"]: json.loads(m["info"]) for m in store.models()}
    assert registered[tuned.fingerprint]["loss"] == "residual"
    assert stages[:3] == ["residual"] * 3 and stages[3] == "evaluating — starting"
    # then the fine-tuned encoder encodes the demo corpus (384 documents), reported as it goes
    assert stages[-1] == "evaluating — fine-tuned: encoding 384/384 documents"
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
                      max_steps_per_epoch=1, xi=0.3, lambda_train=0.02, holdout=0.0)
    # stopped inside the batch it was in (``training.stopping``), saying where and where the model is
    with pytest.raises(Cancelled, match=r"^cancelled during evaluating — fine-tuned: encoding \d+/384 documents "
                                        r"\(\d+/1000\); the model was saved to "):
        run_training(demo, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), store=store,
                     on_progress=on_progress, cancel=cancel)
    base_fp = load_encoder(str(tiny_model_dir), device="cpu").fingerprint
    tuned_fp = load_encoder(str(tmp_path / "ft"), device="cpu").fingerprint
    assert count_embeddings(store, base_fp) >= len(demo.docs)  # the base corpus was cached in full
    assert count_embeddings(store, tuned_fp) == 0  # no half-encoded corpus in the cache
    assert integrity_check(store) == "ok"
    store.close()


def test_run_reports_base_and_fine_tuned_metrics(demo_run, demo):
    result, out, store, _ = demo_run
    assert set(result.metrics) == {"base", "fine-tuned"}
    for label in ("base", "fine-tuned"):
        assert set(result.metrics[label]) == {"dense", "hybrid"}
        for system in ("dense", "hybrid"):
            m = result.metrics[label][system]
            assert all(0.0 <= m[k] <= 1.0 for k in SUMMARY_METRICS), (label, system, m)
        assert 0.0 <= result.metrics[label]["hybrid"]["lambda"] <= 1.0
    assert set(result.significance) == {"dense", "hybrid"}
    assert all(0.0 <= p <= 1.0 for ps in result.significance.values() for p in ps.values())
    # every figure with its 95% interval, and the difference with its paired one
    for label in ("base", "fine-tuned"):
        for system in ("dense", "hybrid"):
            m = result.metrics[label][system]
            assert all(m["intervals"][k][0] <= m[k] <= m["intervals"][k][1] for k in SUMMARY_METRICS)
    for system in ("dense", "hybrid"):
        for k in SUMMARY_METRICS:
            d = result.differences[system][k]
            after, before = result.metrics["fine-tuned"][system][k], result.metrics["base"][system][k]
            assert d["delta"] == pytest.approx(after - before, abs=1e-9)
            assert d["interval"][0] <= d["delta"] <= d["interval"][1]
    # the exported folder, loaded afresh and evaluated without the cache, gives the reported numbers
    reloaded = Workspace(demo, None, model=Encoder(load_encoder(str(out), device="cpu").model))
    ev = reloaded.evaluate("dense", "test")
    for k in SUMMARY_METRICS:
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
            cells = " | ".join(f"{m[k]:.4f} [{m['intervals'][k][0]:.3f}, {m['intervals'][k][1]:.3f}]"
                               for k in ("ndcg@10", "recall@100", "mrr@10"))
            assert f"| {label} | {system} | {cells} |" in card
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
    assert result.plan_note.startswith("cold-start split of 'test' by query (seed 5): 16 queries train (50%)")
    assert result.eval_split == "test" and result.metrics == {}
    assert "cold-start split of 'test'" in (tmp_path / "ft" / "README.md").read_text()
    plan = plan_splits(only_test, None, 0.5, seed=5)  # the same seeded plan the run used
    assert set(plan.dataset.qrels["train"]).isdisjoint(plan.dataset.qrels["test"])


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_pseudo_pairs_then_labelled_stage(tiny_model_dir, store, tmp_path):
    """Multi-stage (Baidu §4): ICT+BFS pseudo pairs first, then the labelled loss, one exported model."""
    from retrieval.data.readers import load_dataset
    from tests.conftest import DEMO
    from training.finetune import run_training
    from training.pairs import pseudo_pairs
    from training.trainer import TrainConfig

    ds = load_dataset(DEMO)
    mixed = pseudo_pairs(ds, "ict+bfs", 40, seed=3)
    assert len(mixed) == 40 and all(p.doc_id is None for p in mixed)
    cfg = TrainConfig(loss="triplet", negatives="bm25", epochs=1, batch_size=8, lr=1e-3, max_steps_per_epoch=2,
                      pretrain="ict+bfs", pretrain_pairs=32, device="cpu", holdout=0.0)
    res = run_training(ds, cfg, tmp_path / "ft", str(tiny_model_dir), store)
    assert res.stages[0] == "pretrain ict+bfs: 32 pseudo pairs (ict 16, bfs 16)"
    assert res.stages[1].startswith("pretrain ict+bfs: inbatch") and res.stages[2].startswith("triplet")
    stages = [s for s, _, _ in res.epoch_losses]
    assert stages == ["pretrain ict+bfs: inbatch", "triplet"]
    assert set(res.metrics) == {"base", "fine-tuned"}


def test_unlabelled_corpus_trains_on_pseudo_pairs_only(tiny_model_dir, store, tmp_path, toy_dataset):
    from sentence_transformers import SentenceTransformer

    from retrieval.data.dataset import Dataset
    from training.finetune import run_training
    from training.trainer import TrainConfig

    bare = Dataset("bare", toy_dataset.docs)
    with pytest.raises(ValueError, match="no relevance labels"):
        run_training(bare, TrainConfig(device="cpu"), tmp_path / "x", str(tiny_model_dir), store)
    cfg = TrainConfig(batch_size=2, lr=1e-3, pretrain="bfs", device="cpu")
    res = run_training(bare, cfg, tmp_path / "bfs", str(tiny_model_dir), store)
    assert res.metrics == {} and res.epoch_losses and res.stages[0].startswith("pretrain bfs")
    assert SentenceTransformer(str(tmp_path / "bfs"), device="cpu").encode(["x"]).shape == (1, 32)
    with pytest.raises(ValueError, match="^bare has no links between its documents"):  # before anything is loaded
        run_training(bare, TrainConfig(pretrain="wlp", device="cpu"), tmp_path / "wlp", str(tiny_model_dir), store)
    assert not (tmp_path / "wlp").exists()


# ---- Margin-MSE: the tuned hybrid as a teacher ----------------------------------------------

def test_each_example_is_labelled_with_the_hybrids_margin_of_its_positive_over_its_negative(demo, tiny_encoder):
    from training.finetune import distillation_teacher
    from training.trainer import Trainer

    ws = Workspace(demo, None, model=tiny_encoder)
    cfg = TrainConfig(loss="marginmse", negatives="bm25", epochs=1, batch_size=4, device="cpu", holdout=0.0)
    teacher = distillation_teacher(cfg, ws, demo, "train")
    asked: list[dict] = []
    trainer = Trainer(cfg, demo, labelled_pairs(demo, "train"), bm25=ws.bm25,
                      teacher=lambda rows, queries: asked.append(rows) or teacher(rows, queries))
    pool = trainer.pool("bm25")
    examples = trainer.examples([pool])
    assert len(asked) == 1 and examples  # one call for the epoch's documents
    ids = {text: qid for qid, text in demo.queries.items()}
    docs = {d.full_text: d.id for d in demo.docs.values()}
    assert len(docs) == len(demo.docs)  # a text names its document
    hybrid = ws.system("hybrid")
    margins = []
    for (query, positive, negative), label in examples:
        qid = ids[query]
        rows = [ws.doc_row[docs[positive]], ws.doc_row[docs[negative]]]
        scores = hybrid.exact_scores(ws, "train", {qid: rows}, {qid: query})[qid]  # asked anew, on its own
        assert label == pytest.approx(scores[docs[positive]] - scores[docs[negative]], abs=1e-6)
        assert demo.qrels["train"][qid].get(docs[negative], 0) < 1  # the negative is not a positive
        margins.append(label)
    assert min(margins) < 0 < max(margins)  # BM25's mistakes include negatives the hybrid ranks above p
    first = {(q, r) for q, rows in asked[0].items() for r in rows}
    trainer.examples([pool])  # the next epoch: other negatives drawn, the teacher asked for those alone
    again = {(q, r) for rows_ in asked[1:] for q, rows in rows_.items() for r in rows}
    assert again and not again & first


def test_margin_mse_needs_a_teacher_and_a_teacher_the_app_has(demo):
    from training.trainer import Trainer

    with pytest.raises(ValueError, match="needs a teacher"):
        Trainer(TrainConfig(loss="marginmse"), demo, labelled_pairs(demo, "train"))
    with pytest.raises(ValueError, match="unknown teacher 'bm25'; choose from hybrid, hybrid3"):
        TrainConfig.from_mapping({"loss": "marginmse", "teacher": "bm25"})


def test_a_margin_mse_run_distils_the_hybrid_and_says_so(demo, tiny_model_dir, tmp_path):
    cfg = TrainConfig(loss="marginmse", epochs=1, batch_size=8, lr=1e-3, device="cpu", max_steps_per_epoch=3,
                      holdout=0.0)
    result = run_training(demo, cfg, tmp_path / "ft", base_model=str(tiny_model_dir), evaluate=False)
    assert result.stages == ["marginmse with bm25 negatives, the margins of hybrid"]
    assert [s for s, _, _ in result.losses] == ["marginmse"] * 3
    assert all(loss > 0 for _, _, loss in result.losses)
    assert "Margin-MSE distillation of hybrid" in (tmp_path / "ft" / "README.md").read_text()
