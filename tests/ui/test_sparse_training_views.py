"""The learned sparse model's fine-tuning in the views, called as the app's events call them: the Train
tab queues it with the session's models, Evaluate and Search offer what it made, and Search's
expansion terms refuse anything that is not a learned sparse model fine-tuned here."""
from __future__ import annotations

import shutil

import gradio as gr
import pytest

from retrieval.store import Store
from retrieval.systems import SPLADE
from retrieval.systems.hybrid3 import KEY as HYBRID3
from tests.conftest import store_copy
from training.job import JobQueue
from ui import common, data, evaluate, search, train
from ui.registry import Registry


@pytest.fixture(scope="module")
def app(tmp_path_factory, tiny_model_dir, demo_sparse_store):
    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("sparse-views") / "store.sqlite3"))
    registry = Registry(store, str(tiny_model_dir))
    ws = registry.get(data.load_demo(registry).key)
    for build in ws.builds.values():
        build.follow(None, None, 0.05)
    yield registry, ws
    store.close()


def test_expansion_terms_of_the_base_alone(app):
    registry, ws = app
    out = search.expansion(registry, ws, "does a nasal spray help a cold", "")
    assert out["headers"] == search.EXPANSION_HEADERS and out["data"]
    assert all(row[1] == row[2] for row in out["data"])  # the base compared with itself
    assert {row[0] for row in out["data"] if not row[3]} >= {"nasal", "spray"}  # the query's own words
    assert any(row[3] == "yes" for row in out["data"])  # and words it implies


def test_expansion_refuses_what_is_not_a_learned_sparse_model_fine_tuned_here(app, tmp_path, tiny_model_dir):
    registry, ws = app
    for text, message in (("", "type a query"), ("x" * 100_000, "at most")):
        with pytest.raises(gr.Error, match=message):
            search.expansion(registry, ws, text, "")
    outside = tmp_path / "splade"
    shutil.copytree(tiny_model_dir, outside)
    with pytest.raises(gr.Error, match="is not one this server offers"):
        search.expansion(registry, ws, "cold", str(outside))  # a folder outside the store's models
    with pytest.raises(gr.Error, match="is not one this server offers"):
        search.expansion(registry, ws, "cold", "../../etc")
    dense = registry.store.models_dir / "a-dense-encoder"
    shutil.copytree(tiny_model_dir, dense)
    with pytest.raises(gr.Error, match="does not hold a learned sparse model"):
        search.expansion(registry, ws, "cold", str(dense))


def test_a_sparse_training_with_a_loss_it_cannot_use_is_refused_before_it_is_queued(app):
    registry, ws = app
    jobs = JobQueue(registry.store)
    with pytest.raises(gr.Error, match="trains with inbatch"):
        train.start(registry, jobs, ws, {"family": "sparse", "loss": "residual"}, 0.8)
    assert registry.store.jobs() == []


@pytest.mark.slow
def test_the_train_tab_trains_the_sparse_model_and_every_view_offers_it(app):
    registry, ws = app
    jobs = JobQueue(registry.store)
    values = {"family": "sparse", "loss": "inbatch", "epochs": 1, "batch_size": 4, "max_steps_per_epoch": 3,
              "max_seq_length": 64, "lr": 1e-3, "holdout": 0, "device": "cpu"}
    job = jobs.wait(train.start(registry, jobs, ws, values, 0.8), timeout=900)
    assert job["status"] == "done", job
    assert job["config"]["family"] == "sparse" and job["config"]["encoder"] == ws.model_name
    result = job["result"]
    assert set(result["metrics"]["fine-tuned"]) == {SPLADE, HYBRID3}
    status, _, table, caption, per_query, running = train.poll(jobs, job["id"], ws.dataset.queries)
    assert not running and per_query["headers"][2:4] == ["SPLADE base", "SPLADE fine-tuned"]
    assert any(row[0] == "fine-tuned − base" and row[1] == SPLADE for row in table)
    path = job["model_path"]
    assert (f"fine-tuned SPLADE: inbatch ({job['id']})", path) in evaluate.extras_choices(registry, ws)
    assert all(value != path for _, value in common.encoder_choices(registry, ws))  # not a dense encoder
    note, rows, _ = evaluate.evaluate(ws, "test", [path])
    assert any(str(r[0]).startswith("Learned sparse (SPLADE) · fine-tuned SPLADE") for r in rows)
    terms = search.expansion(registry, ws, ws.dataset.queries[sorted(ws.dataset.qrels["test"])[0]], path)
    assert any(row[1] != row[2] for row in terms["data"])
