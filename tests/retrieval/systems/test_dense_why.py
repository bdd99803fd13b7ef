"""Dense and CLEAR explanations (``retrieval.systems.dense_why``, ``hybrid_why``) over a real workspace of
the demo corpus (a tiny random-weight encoder, real FAISS, a real store file): their definitions
checked against direct computations with the same encoder and index."""
from __future__ import annotations

import numpy as np
import pytest

from retrieval import Workspace
from retrieval.data.dataset import Dataset, Document
from retrieval.side_by_side import side_by_side
from retrieval.store import Store
from retrieval.systems import builtin
from retrieval.systems.base import Probe
from retrieval.systems.dense_why import MAX_SEGMENTS, WHY_SYSTEM, DenseWhy, explain_dense, forget, why_key, without
from retrieval.systems.hybrid_why import HybridWhy
from retrieval.systems.segments import words

QUERY = "what causes the common cold"


@pytest.fixture(scope="module")
def ws(demo, tiny_encoder, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("why") / "store.sqlite3")
    yield Workspace(demo, store, model=tiny_encoder, index_kind="flat")
    store.close()


def top_rows(ws, query, k=5):
    return [ws.doc_row[d] for d, _ in ws.dense.search({"q": query}, k)["q"]]


def alone(ws, text):
    """``text`` encoded on its own by the workspace's query encoder."""
    return ws.dense.encoder.for_queries().encode([text])[0]


def test_each_share_is_the_drop_without_its_word_and_the_first_drops_most(ws):
    rows = top_rows(ws, QUERY)
    whys = explain_dense(ws, QUERY, rows)
    spans = words(QUERY)
    for r in rows:
        why = whys[r]
        assert [w.word for w in why.words] == QUERY.split()
        assert all(QUERY[w.start:w.end] == w.word for w in why.words)
        dropped = [float(ws.dense.index.scores(alone(ws, without(QUERY, s)), np.asarray([r]))[0]) for s in spans]
        for w, d in zip(why.words, dropped):
            assert w.share == pytest.approx(why.score - d, abs=1e-5)
        first = why.ranked_words[0]
        assert dropped[why.words.index(first)] == pytest.approx(min(dropped), abs=1e-6)  # its removal lowers it most


def test_a_one_word_query_is_measured_against_the_empty_query(ws):
    row = top_rows(ws, "influenza", 1)[0]
    why = explain_dense(ws, "influenza", [row])[row]
    empty = float(ws.dense.index.scores(alone(ws, ""), np.asarray([row]))[0])
    assert [w.word for w in why.words] == ["influenza"]
    assert why.words[0].share == pytest.approx(why.score - empty, abs=1e-5)


def test_segment_scores_are_the_encoders_own_cosines_of_each_segment_alone(ws):
    row = top_rows(ws, QUERY, 1)[0]
    why = explain_dense(ws, QUERY, [row])[row]
    text = ws.dataset.docs[ws.dataset.doc_ids[row]].full_text
    qvec = ws.dense.encode_query(QUERY)
    assert len(why.segments) > 1
    for seg in why.segments:
        vec = ws.dense.encoder.encode([text[seg.start:seg.end]])[0]
        assert abs(float(np.linalg.norm(vec)) - 1) < 1e-4  # normalized, as the corpus's vectors are
        assert seg.score == pytest.approx(float(vec @ qvec), abs=1e-5)
    assert why.best()[0].score == max(s.score for s in why.segments)


@pytest.mark.parametrize("kind", ["flat", "sq8"])
def test_the_full_score_is_the_systems_own_score_of_the_document(ws, kind):
    variant = ws if kind == "flat" else ws.with_index(kind)
    hits = variant.dense.search({"q": QUERY}, 5)["q"]
    rows = [variant.doc_row[d] for d, _ in hits]
    whys = builtin("dense").explain_score(variant, Probe(variant, QUERY, 10), rows, None)
    exact = builtin("dense").exact_scores(variant, "test", {"q": rows}, {"q": QUERY})["q"]
    for (doc, score), r in zip(hits, rows):
        assert whys[r].score == pytest.approx(exact[doc], abs=1e-6) and whys[r].score == pytest.approx(score, abs=1e-5)


def test_a_long_document_marks_what_the_encoder_never_reads_and_cuts_past_the_bound(tiny_encoder):
    long_text = " ".join(f"Sentence {i} tells of colds and fevers." for i in range(MAX_SEGMENTS + 8))
    docs = {"long": Document("long", "Colds", long_text), "short": Document("short", "Flu", "Fever and a cough.")}
    small = Workspace(Dataset("long", docs, {"q": "colds"}, {}), None, model=tiny_encoder, index_kind="flat")
    whys = explain_dense(small, "colds", [0, 1])
    long, short = whys[small.doc_row["long"]], whys[small.doc_row["short"]]
    assert len(long.segments) == MAX_SEGMENTS and long.segments_cut == 9  # the title's "Colds." and 40 sentences
    read = [s.read_by_encoder for s in long.segments]
    assert read[0] and not read[-1] and read == sorted(read, reverse=True)  # read up to the encoder's limit
    assert 0 < long.read_until < len(docs["long"].full_text)
    tokens = small.encoder.model.tokenizer(docs["long"].full_text[:long.read_until], add_special_tokens=False)
    assert len(tokens["input_ids"]) <= small.encoder.max_seq_length - 2
    assert short.read_until == len(docs["short"].full_text) and all(s.read_by_encoder for s in short.segments)


def test_the_hybrids_parts_add_up_to_its_shown_score(ws):
    result = side_by_side(ws, QUERY, k=10, systems=["dense", "hybrid"])
    for hit in result.systems["hybrid"]:
        why = hit.score_why
        assert isinstance(why, HybridWhy)
        assert why.lexical + why.dense == why.score == pytest.approx(hit.score, abs=1e-6)  # float32 cosines
        assert sum(part for _, part in why.terms) == pytest.approx(why.lexical, rel=1e-4, abs=1e-6)
        assert why.dense == pytest.approx(why.dense_weight * why.dense_why.score, abs=1e-6)
        assert why.lam is not None and why.bm25_max is not None  # cosines: λ over the query's BM25 maximum
    for hit in result.systems["dense"]:
        assert hit.score_why is not None and hit.score_why.score == pytest.approx(hit.score, abs=1e-5)
    assert all(h.score_why is None for h in side_by_side(ws, QUERY, k=3, systems=["bm25"]).systems["bm25"])


def test_an_identifier_lookup_splits_bm25_alone_from_the_tie_break(ws):
    doc = ws.dataset.doc_ids[0]
    result = side_by_side(ws, doc, k=3, systems=["hybrid"])
    for hit in result.systems["hybrid"]:
        why = hit.score_why
        assert why.lam is None and why.dense_weight == pytest.approx(1e-6)
        assert why.lexical + why.dense == why.score == pytest.approx(hit.score, abs=1e-6)


def test_the_cache_gives_the_same_explanation_and_its_key_follows_encoder_and_index(ws, tmp_path):
    from tests.conftest import build_tiny_encoder

    rows = top_rows(ws, QUERY, 3)
    first = explain_dense(ws, QUERY, rows)
    doc = ws.dataset.doc_ids[rows[0]]
    key = why_key(ws, QUERY, doc, ws.dataset.docs[doc].full_text)
    kept = ws.store.get_metrics(key)
    assert kept is not None and DenseWhy.from_json(kept[1]["why"]) == first[rows[0]]
    forget()  # the process's memory emptied: the store answers
    assert explain_dense(ws, QUERY, rows) == first
    assert WHY_SYSTEM not in {r["system"] for r in ws.store.runs()}  # no run listed in the history
    int8 = ws.with_index("sq8")
    assert why_key(int8, QUERY, doc, ws.dataset.docs[doc].full_text) != key
    other = ws.with_model(str(build_tiny_encoder(tmp_path, seed=1)))
    assert why_key(other, QUERY, doc, ws.dataset.docs[doc].full_text) != key
    assert why_key(ws, QUERY + "s", doc, ws.dataset.docs[doc].full_text) != key
    assert why_key(ws, QUERY, doc, ws.dataset.docs[doc].full_text + " more") != key


def test_a_documents_passages_are_encoded_once_whatever_the_query(tiny_encoder, toy_dataset):
    from tests.retrieval.index.test_dense import CountingEncoder

    forget()
    ws = Workspace(toy_dataset, None, model=CountingEncoder(tiny_encoder), index_kind="flat")
    ws.build_dense()
    rows = [0, 1, 2]
    ws.encoder.encoded = 0
    first = explain_dense(ws, "cat on a mat", rows, keep=False)
    passages = sum(len(why.segments) for why in first.values())
    assert passages >= 6 and ws.encoder.encoded == 1 + 4 + passages  # the query, it without each word, the passages
    ws.encoder.encoded = 0
    again = explain_dense(ws, "warm kitten", rows, keep=False)
    assert ws.encoder.encoded == 1 + 2  # the passages' vectors kept in memory: only the new query's own texts
    assert [len(w.segments) for w in again.values()] == [len(w.segments) for w in first.values()]


@pytest.mark.parametrize("damage", [{"why": {"score": 1.0}}, {"why": "not an explanation"}, {"other": 1},
                                    {"why": {"score": "x", "words": [], "segments": [], "segments_cut": 0,
                                             "read_until": 0}}])
def test_a_damaged_stored_explanation_is_a_miss_computed_again(ws, damage):
    rows = top_rows(ws, QUERY, 2)
    first = explain_dense(ws, QUERY, rows)
    doc = ws.dataset.doc_ids[rows[0]]
    key = why_key(ws, QUERY, doc, ws.dataset.docs[doc].full_text)
    ws.store.put_metrics(key, dataset=ws.dataset.corpus_hash, system=WHY_SYSTEM, params={}, split=None,
                         metrics={}, per_query=damage)
    forget()  # the process's memory emptied: the store is read, and its damaged row is not trusted
    again = explain_dense(ws, QUERY, rows)[rows[0]]  # computed again (in another batch: float32 noise apart)
    was = first[rows[0]]
    assert again.score == pytest.approx(was.score, abs=1e-5)
    assert [(w.word, w.start, w.end) for w in again.words] == [(w.word, w.start, w.end) for w in was.words]
    assert [w.share for w in again.words] == pytest.approx([w.share for w in was.words], abs=1e-5)
    assert [(g.start, g.end, g.read_by_encoder) for g in again.segments] == \
        [(g.start, g.end, g.read_by_encoder) for g in was.segments]
    assert DenseWhy.from_json(ws.store.get_metrics(key)[1]["why"]) == again  # and the damaged row written over
