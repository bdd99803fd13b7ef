"""Uploaded data sets kept beside the store (``retrieval.data.kept``) and the browser's token
(``retrieval.sharing.browser_tokens``): an upload reopens in one click after a restart with its
added queries and its grades; on a shared deployment no other browser lists, reopens or forgets it,
and a forged token is refused and handed a new one, naming nothing; kept files and records read back
are checked as input is. Real components: a real store, the upload readers, the app's handlers."""
from __future__ import annotations

import json
import sqlite3

import gradio as gr
import pytest

from retrieval.data import kept
from retrieval.sharing import browser_tokens
from retrieval.store import Store
from tests.flows.test_judged_labels import write_unlabelled
from tests.retrieval.sharing.test_owners import refusal
from ui import data
from ui.registry import Registry


@pytest.fixture
def files(tmp_path):
    corpus, queries = write_unlabelled(tmp_path / "upload")
    return [str(corpus), str(queries)]


def registry_on(path, tiny_model_dir, shared: bool = False) -> Registry:
    return Registry(Store(path), model=str(tiny_model_dir), foreground_s=60, shared=shared)


def test_an_upload_reopens_after_a_restart_with_its_added_queries_and_grades(files, tmp_path, tiny_model_dir):
    path = tmp_path / "s.sqlite3"
    registry = registry_on(path, tiny_model_dir)
    token = registry.identify("ana-page", None)
    loaded = data.load_files(registry, "", files, session="ana-page")
    assert loaded.ok and "Kept beside the store" in loaded.status
    (found,) = kept.listed(registry.store)
    assert (found.name, found.documents, found.queries, found.files) == ("corpus", 32, 4,
                                                                           ("corpus.jsonl", "queries.jsonl"))
    added = data.add_queries(registry, loaded.key, None, "how to descale a kettle", session="ana-page")
    ws = registry.get(added.key)
    new = next(q for q in ws.dataset.queries if q not in registry.get(loaded.key).dataset.queries)
    registry.store.put_judgment(ws.dataset.corpus_hash, new, ws.dataset.queries[new], "bread-1", 2, "ana")
    registry.store.close()

    registry = registry_on(path, tiny_model_dir)  # a restart: nothing open but the store
    assert registry.identify("ana-page-2", token) == token  # the same browser, the same token
    rows, picker = data.kept_rows(registry, "ana-page-2")
    assert rows[0][:3] == ["corpus", 32, 4] and picker["value"] == found.id  # the latest picked: one click
    again = data.reopen(registry, "", picker["value"], session="ana-page-2")
    assert again.ok and again.headline.startswith("Reopened corpus. 1 query added to this corpus before came back")
    labelled = registry.labelled(again.key, "ana-page-2")
    assert new in labelled.dataset.queries and labelled.dataset.qrels["judged"] == {new: {"bread-1": 2}}
    assert registry.kept_of(again.key) == found.id
    registry.store.close()


def test_another_browser_cannot_list_reopen_or_forget_a_kept_data_set(files, tmp_path, tiny_model_dir):
    registry = registry_on(tmp_path / "s.sqlite3", tiny_model_dir, shared=True)
    ana = registry.identify("ana-page", None)
    loaded = data.load_files(registry, "", files, session="ana-page")
    assert "(for this browser only)" in loaded.status
    ana_id = registry.kept_of(loaded.key)
    registry.identify("bo-page", None)  # another browser
    assert data.kept_rows(registry, "bo-page")[0] == []
    other = refusal(lambda: data.reopen(registry, "", ana_id, session="bo-page"))
    assert other == refusal(lambda: data.reopen(registry, "", "f" * 64, session="bo-page")) == kept.NOT_KEPT
    assert refusal(lambda: data.forget_kept(registry, ana_id, session="bo-page")) == kept.NOT_KEPT
    assert data.place_of(registry, {"open": ana_id}, "bo-page") == ""  # bo's page opens on the start
    assert [k.id for k in kept.listed(registry.store, registry.viewer("ana-page"))] == [ana_id]  # still ana's
    # ana's reload: a new session of the same browser finds it, and reopens it
    registry.identify("ana-reloaded", ana)
    assert data.place_of(registry, {"open": ana_id}, "ana-reloaded") == ana_id
    assert data.reopen(registry, "", ana_id, session="ana-reloaded").ok
    assert "Forgot" in data.forget_kept(registry, ana_id, session="ana-reloaded")
    assert kept.listed(registry.store) == [] and not (registry.store.kept_dir / ana_id).exists()
    registry.store.close()


def test_a_forged_token_is_refused_and_handed_a_new_one_naming_nothing(files, tmp_path, tiny_model_dir):
    registry = registry_on(tmp_path / "s.sqlite3", tiny_model_dir, shared=True)
    ana = registry.identify("ana-page", None)
    ana_id = registry.kept_of(data.load_files(registry, "", files, session="ana-page").key)
    token_id, mac = ana.split(".")
    other_last = "B" if token_id.endswith("A") else "A"  # one character changed, whatever the last one was
    other_key = browser_tokens.mint(b"k" * 32)  # a token of another app's key: well formed, not this one's
    one_changed = f"{token_id[:-1]}{other_last}.{mac}"
    for forged in ("forged", f"{token_id}.{'0' * 32}", one_changed, other_key, "x" * 1_000_000, 7,
                   {"token": ana}, None):
        handed = registry.identify("mallory", forged)
        assert handed != ana and browser_tokens.verify(registry._token_key(), handed)
        assert registry.viewer("mallory").owner != registry.viewer("ana-page").owner
        assert data.place_of(registry, {"open": ana_id}, "mallory") == ""
        assert data.kept_rows(registry, "mallory")[0] == []
    # the store keeps the makers' hashes, never a token
    with sqlite3.connect(registry.store.path) as db:
        dump = "\n".join(db.iterdump())
    assert token_id not in dump and ana not in dump
    registry.store.close()


def test_kept_files_that_changed_on_disk_are_never_opened(files, tmp_path, tiny_model_dir):
    registry = registry_on(tmp_path / "s.sqlite3", tiny_model_dir)
    key = data.load_files(registry, "", files).key
    (found,) = kept.listed(registry.store)
    corpus = registry.store.kept_dir / found.id / "0" / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("garden", "gardin", 1))
    again = data.reopen(registry, key, found.id)
    assert not again.ok and again.key == key and "no longer hold the data set that was kept" in again.status
    corpus.unlink()
    assert "no longer kept beside the store" in data.reopen(registry, key, found.id).status
    registry.store.close()


def test_a_tampered_kept_record_is_left_out(files, tmp_path, tiny_model_dir, caplog):
    registry = registry_on(tmp_path / "s.sqlite3", tiny_model_dir)
    data.load_files(registry, "", files)
    (row,) = registry.store.kept()
    row = {**row, "files": json.dumps(row["files"]), "published": int(row["published"])}
    for column, value, said in (("files", json.dumps(["../../etc/passwd"]), "holds a path separator"),
                                ("files", "[", "its files are not JSON"), ("id", "x", "its id is not a hash"),
                                ("documents", "many", "is not a whole number")):
        with sqlite3.connect(registry.store.path) as db:
            db.execute("delete from kept_datasets")
        registry.store.put_kept(row)
        assert len(kept.listed(registry.store)) == 1
        with sqlite3.connect(registry.store.path) as db:
            db.execute(f"update kept_datasets set {column} = ?", [value])
        assert kept.listed(registry.store) == []
        assert said in caplog.text
        with pytest.raises(gr.Error, match="no such data set is kept"):
            data.reopen(registry, "", "x")
    registry.store.close()


def test_what_is_kept_is_bounded(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr(kept, "MAX_PER_MAKER", 2)
    registry = registry_on(tmp_path / "s.sqlite3", tiny_model_dir)
    ids = []
    for n in range(3):
        corpus = tmp_path / f"c{n}" / "corpus.jsonl"
        corpus.parent.mkdir()
        corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"text {n} {i}"}) + "\n" for i in range(5)))
        ids.append(registry.kept_of(data.load_files(registry, "", [str(corpus)], session="ana").key))
    assert [k.id for k in kept.listed(registry.store)] == ids[:0:-1]  # the oldest forgotten, its files too
    assert not (registry.store.kept_dir / ids[0]).exists()
    monkeypatch.setattr(kept, "MAX_BYTES", 10)
    corpus = tmp_path / "c3.jsonl"
    corpus.write_text(json.dumps({"_id": "d0", "text": "a corpus too large to keep"}) + "\n")
    loaded = data.load_files(registry, "", [str(corpus)], session="ana")
    assert loaded.ok and "is not kept" in loaded.status
    registry.store.close()


def test_the_kept_files_are_never_served(tmp_path):
    import app as rankscope_app

    store = Store(tmp_path / "s.sqlite3")
    assert str(store.kept_dir.resolve()) in rankscope_app.launch_kwargs(store)["blocked_paths"]
    store.close()
