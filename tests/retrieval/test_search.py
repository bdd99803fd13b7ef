"""One search, one pass: the query is encoded, BM25-scored and searched in FAISS once, each distinct
document explained once (its BM25 terms; a dense explanation's passages encoded once, the query without
each of its words once), nothing written to the store; labelled queries by id (real BM25, tiny BERT,
FAISS, SQLite)."""
from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.data.readers import load_dataset
from retrieval.side_by_side import side_by_side
from retrieval.store import Store
from retrieval.systems.dense_why import forget
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from tests.conftest import DEMO, store_copy
from tests.retrieval.index.test_dense import CountingEncoder


class Calls:
    """Counts calls to methods of real objects, passing every call through."""

    def __init__(self):
        self.n: dict[str, int] = {}

    def wrap(self, monkeypatch, obj, name: str, label: str) -> None:
        real = getattr(obj, name)

        def counted(*args, **kwargs):
            self.n[label] = self.n.get(label, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(obj, name, counted)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory, tiny_encoder, demo_sparse_store) -> Path:
    """A store file holding what a workspace of the demo computes before its first search, made once for
    the module: the learned sparse vectors (``demo_sparse_store``), the tiny encoder's passage vectors and
    λ tuned on train (with the train queries' embeddings). Each test opens a copy of its own."""
    path = store_copy(demo_sparse_store, tmp_path_factory.mktemp("search") / "store.sqlite3")
    store = Store(path)
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    ws.build_dense()
    CLEAR.lambda_for(ws, "test")
    store.close()
    return path


@pytest.fixture
def demo_ws(tmp_path, tiny_encoder, demo_store):
    """The demo's workspace over a copy of ``demo_store``: its dense index and λ read back, as a workspace
    reopened on a store finds them, so a search is all the test counts."""
    store = Store(store_copy(demo_store, tmp_path / "store.sqlite3"))
    ws = Workspace(load_dataset(DEMO), store, model=CountingEncoder(tiny_encoder))
    ws.build_dense()
    CLEAR.lambda_for(ws, "test")  # λ is tuned once per workspace (and cached): not part of a search
    yield ws
    store.close()


def explanation_encodings(res) -> int:
    """The texts a search's dense explanations encode (``dense_why``): the query without each of its words,
    once, and the passages of each distinct document the dense and hybrid columns show, once."""
    whys = {h.doc_id: h.score_why for h in res.systems.get("dense", [])}
    for h in res.systems.get("hybrid", []):
        whys.setdefault(h.doc_id, h.score_why.dense_why)
    passages = sum(len(why.segments) for why in whys.values())
    return len(res.query.split()) + passages


def counted_search(ws, monkeypatch, **kwargs):
    forget()  # explanations the process keeps from another test's search: none
    calls = Calls()
    calls.wrap(monkeypatch, ws.dense.index, "search_vectors", "faiss")
    calls.wrap(monkeypatch, ws.bm25, "scores", "bm25")
    calls.wrap(monkeypatch, ws.bm25, "explain", "explain")
    calls.wrap(monkeypatch, ws.bm25, "query_terms", "tokenize")
    ws.encoder.encoded = 0
    writes = ws.store.db.conn.total_changes
    res = side_by_side(ws, **kwargs)
    calls.n["encoded"] = ws.encoder.encoded
    calls.n["store writes"] = ws.store.db.conn.total_changes - writes
    return res, calls.n


def test_one_search_encodes_the_query_once_and_writes_nothing(demo_ws, monkeypatch):
    res, n = counted_search(demo_ws, monkeypatch, text="leaky faucet washer")
    shown = {h.doc_id for hits in res.systems.values() for h in hits}
    hybrid = len(res.systems["hybrid"])
    # the query's terms are read three times: for the explanations, for the hybrid's BM25 ceiling (BM25 ÷ the
    # query's largest possible score, ``BM25Index.max_score``) and for the hybrid's split (``hybrid_why``),
    # which explains its own hits' BM25 terms again, scaled by λ over that ceiling
    assert n == {"encoded": 1 + explanation_encodings(res), "faiss": 1, "bm25": 1, "tokenize": 3,
                 "explain": len(shown) + hybrid, "store writes": 0}
    assert len(shown) < sum(len(h) for h in res.systems.values())  # documents shared by lists: explained once
    assert 0 < res.disagreement < 1  # the lists overlap in part


def test_a_labelled_query_by_id_gets_its_labels_in_the_same_single_pass(demo_ws, monkeypatch):
    res, n = counted_search(demo_ws, monkeypatch, query_id="q01")
    assert res.query_id == "q01" and res.query == demo_ws.dataset.queries["q01"] and res.split
    assert {r["doc_id"] for r in res.relevant} == set(demo_ws.dataset.qrels[res.split]["q01"])
    # q01 is a train query: tuning λ on train cached its embedding, so the search reads it, encodes nothing
    assert n["encoded"] == explanation_encodings(res) and n["faiss"] == 1 and n["bm25"] == 1 and n["store writes"] == 0
    by_text, _ = counted_search(demo_ws, monkeypatch, text=res.query)  # the same query typed
    assert by_text.to_json() == res.to_json()


def test_the_single_pass_gives_each_systems_own_lists(demo_ws):
    text = "how do I stop my nose running in winter"
    res = side_by_side(demo_ws, text, k=10)
    runs = {"bm25": demo_ws.bm25.search({"q": text}, 10)["q"],
            "dense": demo_ws.dense.search({"q": text}, 10)["q"],
            "hybrid": demo_ws.search("hybrid", {"q": text}, 10, demo_ws.dataset.default_split())["q"]}
    for system, hits in runs.items():
        assert [h.doc_id for h in res.systems[system]] == [d for d, _ in hits]
        assert [h.score for h in res.systems[system]] == pytest.approx([s for _, s in hits], rel=1e-5)


def test_unknown_query_id_and_empty_text_are_errors(demo_ws):
    with pytest.raises(KeyError, match="no query 'nope'"):
        side_by_side(demo_ws, query_id="nope")
    with pytest.raises(ValueError, match="type a query"):
        side_by_side(demo_ws, "   ")


def test_an_imported_run_gives_the_list_of_the_query_asked_for_even_when_texts_repeat(tmp_path, tiny_encoder,
                                                                                      toy_dataset, store):
    from retrieval.data.readers.runs import read_run
    from retrieval.files.trec import write_trec

    twins = toy_dataset.with_queries({"q5": toy_dataset.queries["q4"]})  # q4 and q5: the same text
    path = write_trec({"q4": [("d5", 2.0)], "q5": [("d1", 2.0)]}, tmp_path / "prod.trec", "prod")
    ws = Workspace(twins, store, model=tiny_encoder).with_run(read_run(str(path), twins))
    systems = ("bm25", "prod")
    assert [h.doc_id for h in side_by_side(ws, query_id="q5", systems=systems).systems["prod"]] == ["d1"]
    assert [h.doc_id for h in side_by_side(ws, query_id="q4", systems=systems).systems["prod"]] == ["d5"]
    assert [h.doc_id for h in side_by_side(ws, "kitten care", systems=systems).systems["prod"]] == ["d5"]  # the first


def test_an_identifier_lookup_typed_in_search_is_ranked_by_bm25_alone_and_says_so(demo_ws):
    from ui.present.search import side_by_side_html

    text = "WPW10348265"  # a demo part number
    res = side_by_side(demo_ws, text, k=10)
    bm25 = demo_ws.bm25.search({"q": text}, 10)["q"]
    assert bm25 and [h.doc_id for h in res.systems["hybrid"]][:len(bm25)] == [d for d, _ in bm25]
    assert "looks up an identifier" in side_by_side_html(res, demo_ws.tokenizer)
    other = side_by_side(demo_ws, "leaky faucet washer", k=10)
    assert "looks up an identifier" not in side_by_side_html(other, demo_ws.tokenizer)


def test_bm25_terms_are_shown_as_the_query_words_not_their_stems(demo_ws):
    """The Search view names a matched or missing term by the word typed ("leaky"), keeping the
    stem ("leaki") only as the hover title."""
    from ui.present.search import side_by_side_html

    res = side_by_side(demo_ws, text="leaky faucets dripping", k=5)
    assert res.term_words == {"leaki": "leaky", "faucet": "faucets", "drip": "dripping"}
    html = side_by_side_html(res, demo_ws.tokenizer)
    assert 'title="leaki">leaky</span>' in html or "no exact match: leaky" in html
    assert ">leaki<" not in html and "no exact match: leaki" not in html


def test_a_contraction_is_listed_as_typed_not_as_its_tokens(demo_ws):
    """"can't" is matched as the index's tokens "can" and "t", and every term list of the Search view
    (the terms a document lacks, its BM25 terms) shows it as typed: "can't", never "can" and "t"."""
    import re
    from html import unescape

    from ui.present.search import side_by_side_html

    res = side_by_side(demo_ws, text="Why can't my faucet stop dripping", k=10)
    assert {"can", "t"} <= set(res.terms) and res.term_words["can"] == res.term_words["t"] == "can't"
    page = unescape(side_by_side_html(res, demo_ws.tokenizer))
    listed = [w for found in re.findall(r"no exact match: ([^<]*)</div>", page) for w in found.split(", ")]
    listed += re.findall(r'<span title="[^"]*">([^<]*)</span> -?\d', page)
    assert "can't" in listed and not {"can", "t"} & set(listed)
    assert set(listed) <= {"why", "can't", "my", "faucet", "stop", "dripping"}


def test_the_metrics_caption_counts_the_systems_on_show(demo_ws):
    """Search's metrics are captioned with the number of systems they list, counted (a fifth system
    shown by default, or an imported run, is one more), not a number written once as a word."""
    from ui.common import metrics_rows, shown_systems
    from ui.search import metrics_note

    on_show = shown_systems(demo_ws)
    note = metrics_note(demo_ws, "test")
    assert note.startswith(f"**{len(on_show)} systems on show:** BM25, ") and len(on_show) > 3
    assert len(metrics_rows(demo_ws, "test", on_show)) == len(on_show)
    assert "three" not in note.split("\n")[0]
