"""Label health and the language check on real workspaces (demo, tiny encoder, real BM25 and FAISS)."""
from __future__ import annotations

from retrieval.data.dataset import Dataset
from retrieval.data.readers import load_dataset
from retrieval.evaluation.diagnostics import label_health, language_check
from retrieval.workspace import Workspace
from tests.conftest import DEMO


def test_the_demo_labels_are_healthy(tmp_path, tiny_encoder, store):
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    health = label_health(ws, "test")
    assert health.queries == 32 and health.empty_targets == 0 and not health.looks_broken
    assert health.found_by_none < 10


def test_labels_shifted_to_other_documents_look_broken(store, tiny_encoder):
    ds = load_dataset(DEMO)
    ids = ds.doc_ids
    # every relevant label moved to a document three topics away: what a qrels file for another
    # corpus (or with shifted ids) does
    shifted = {q: {ids[(ids.index(d) + 170) % len(ids)]: v for d, v in labels.items()}
               for q, labels in ds.qrels["test"].items()}
    broken = Dataset("shifted", ds.docs, ds.queries, {"test": shifted})
    health = label_health(Workspace(broken, store, model=tiny_encoder), "test", depth=10)
    assert health.looks_broken and health.found_by_none * 2 > health.queries


def test_language_check_names_the_encoder(store, tiny_encoder):
    check = language_check(Workspace(load_dataset(DEMO), store, model=tiny_encoder))
    assert check.guess.code == "en" and not check.mismatch and check.encoder == tiny_encoder.name


def test_a_label_on_a_document_with_no_indexable_word_is_flagged(store, tiny_encoder, toy_dataset):
    from retrieval.data.dataset import Document

    docs = {**toy_dataset.docs, "d9": Document("d9", "", "and the of it")}  # stopwords only
    qrels = {"test": {**toy_dataset.qrels["test"], "q4": {"d5": 2, "d9": 1}}}
    ws = Workspace(Dataset("toy", docs, toy_dataset.queries, qrels), store, model=tiny_encoder)
    health = label_health(ws, "test")
    assert health.empty_targets == 1 and health.looks_broken
