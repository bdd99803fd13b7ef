"""The failure gallery and its HTML export: real BM25, real FAISS, a real SQLite store.

Two data sets:

* a ten-document toy built so that every category is certain: the dense side uses
  ``SimilarityEncoder``, a real ``Encoder`` whose embeddings are chosen so that the cosine of
  query i and document d is exactly ``SIMS[d][i]`` (query i embeds as the unit vector e_i, a
  document as its similarities plus one padding dimension that makes it unit length), indexed by
  FAISS like any encoder's output;
* the bundled demo corpus with the tiny random BERT, where the categories are checked against
  the runs (definitions, ranks, evidence), not against expected values.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from html import unescape
from html.parser import HTMLParser
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers import load_dataset
from retrieval.data.run import ranks
from retrieval.evaluation.failure_gallery import FailureCard, failure_gallery, headline
from retrieval.evaluation.failure_rules import CATEGORIES, SPARSE_CATEGORIES
from retrieval.evaluation.intervals import proportion_interval
from retrieval.index.encoder import Encoder, load_encoder
from retrieval.store import Store
from retrieval.systems import SPLADE, TUNED_SYSTEMS, label, shown
from retrieval.systems.hybrid import CLEAR
from retrieval.workspace import Workspace
from tests.conftest import DEMO, build_tiny_encoder, store_copy
from ui.present.evaluation import report_parts
from ui.present.figures import counts_figure
from ui.present.report import Summary, card_html, gallery_html, write_gallery

# ---- the toy data set with known similarities ----------------------------------------------
DOCS = {
    "d1": ("Premiums explained", "What a car insurance premium includes."),
    "d2": ("Feline health", "A checklist for a healthy cat: vaccines and checkups."),
    "d3": ("Kitten wellness", "Keeping a kitten well <script>alert(1)</script> & happy."),
    "d4": ("River bank", "The bank of a river: bank erosion and water rates."),
    "d5": ("Mortgages", "How a mortgage loan is repaid."),
    "d6": ("Photovoltaics", "Output of photovoltaic modules in winter."),
    "d7": ("Solar panel efficiency myths", "Myths about solar panel efficiency."),
    "d8": ("Tidal energy", "Tidal energy comes from the moon."),
    "d9": ("Batteries", "Battery storage for the grid."),
    "d10": ("Power bills", "Energy bills went up this winter."),
}
QUERIES = {
    "q1": 'automobile cover <price> & "fees"',  # shares no word with any document
    "q2": "feline health",
    "q3": "bank loan rates",
    "q4": "solar panel efficiency",
    "q5": "tidal energy storage",
    "q6": "car insurance",  # judged, but nothing relevant: skipped
}
QRELS = {"test": {"q1": {"d1": 2}, "q2": {"d2": 2}, "q3": {"d5": 2, "d4": 0}, "q4": {"d6": 1, "d7": 0},
                  "q5": {"d9": 2, "d8": 0}, "q6": {"d1": 0}}}
# cosine(query, document) under the base encoder; unlisted pairs get 0.001 · (10 − document index)
SIMS = {"d1": {"q1": 0.9, "q6": 0.0}, "d2": {"q2": 0.8}, "d3": {"q2": 0.95}, "d4": {"q3": 0.0},
        "d5": {"q3": 0.9}, "d6": {"q4": 0.5}, "d7": {"q4": 0.7}, "d8": {"q5": 0.02}, "d9": {"q5": 0.85},
        "d10": {"q5": 0.855}}
# the "fine-tuned" encoder: q4's relevant document rises to 1, q1's falls to the bottom
TUNED_SIMS = {**SIMS, "d6": {"q4": 0.9}, "d1": {"q1": 0.0, "q6": 0.0}}
LAMBDA = 0.1  # fixed hybrid λ_test, so the hybrid ranks are known

# what the module docstring's definitions give on this data (top = 1, low = 3, fp_top = 1)
EXPECTED = {
    "vocabulary_mismatch": ["q1"],  # d1: BM25 —, dense 1
    "exact_match_miss": [],  # no relevant document BM25 ranks first that dense ranks below 3
    "semantic_false_positive": ["q2"],  # d3 (unjudged): dense 1, BM25 —
    "lexical_trap": ["q3", "q5"],  # BM25's first (d4, d8) is judged 0; dense ranks them 10, 3
    "both_fail": ["q4", "q5"],  # d7 tops both lists of q4; d8 / d10 top q5's
    "fixed_by_hybrid": ["q5"],  # 0.1·s_lex + s_emb puts d9 first
    "fixed_by_finetuning": ["q4"],
    "broken_by_finetuning": ["q1"],
}
EXPECTED_CARDS = {  # (query, document, headline, gap)
    "vocabulary_mismatch": [("q1", "d1", "BM25 — → dense 1", 1000)],
    "exact_match_miss": [],
    "semantic_false_positive": [("q2", "d3", "BM25 — → dense 1", 1000)],
    "lexical_trap": [("q3", "d4", "BM25 1 → dense 10", 9), ("q5", "d8", "BM25 1 → dense 3", 2)],
    "both_fail": [("q4", "d6", "BM25 — · dense 2", 2), ("q5", "d9", "BM25 2 · dense 2", 2)],
    "fixed_by_hybrid": [("q5", "d9", "BM25 2 · dense 2 → hybrid 1", 1)],
    "fixed_by_finetuning": [("q4", "d6", "dense 2 → fine-tuned dense 1", 1)],
    "broken_by_finetuning": [("q1", "d1", "dense 1 → fine-tuned dense 10", 9)],
}
THRESHOLDS = dict(top=1, low=3, fp_top=1, sparse=False)  # the toy is about BM25 and dense (learned sparse: test_sparse)
DENSE_AND_BM25 = [c for c in CATEGORIES if c not in SPARSE_CATEGORIES]


def toy_dataset(qrels=QRELS) -> Dataset:
    docs = {d: Document(d, title, text) for d, (title, text) in DOCS.items()}
    return Dataset("failure-toy", docs, dict(QUERIES), qrels)


class SimilarityEncoder(Encoder):
    """A real ``Encoder`` with chosen embeddings: cosine(query i, document d) = sims[d][query i]."""

    def __init__(self, sims: dict[str, dict[str, float]], name: str):
        super().__init__(model=None, name=name, normalize=True)
        qids = list(QUERIES)
        self.vectors: dict[str, np.ndarray] = {}
        for i, qid in enumerate(qids):
            self.vectors[QUERIES[qid]] = np.eye(len(qids) + 1, dtype=np.float32)[i]
        for j, (d, (title, text)) in enumerate(DOCS.items()):
            s = [sims.get(d, {}).get(q, 0.001 * (len(DOCS) - j)) for q in qids]
            pad = math.sqrt(1.0 - sum(x * x for x in s))
            self.vectors[Document(d, title, text).full_text] = np.array([*s, pad], dtype=np.float32)

    @property
    def dim(self) -> int:
        return len(QUERIES) + 1

    @property
    def max_seq_length(self) -> int:
        return 128

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.name.encode())
        for text in sorted(self.vectors):
            h.update(text.encode() + self.vectors[text].tobytes())
        return h.hexdigest()

    def vector(self, text: str) -> np.ndarray:
        """The table's vector; any other text (the reliability check's English reference) a unit
        vector seeded by the text, as unrelated passages are to an encoder that reads them."""
        if text in self.vectors:
            return self.vectors[text]
        v = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)).normal(size=self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def encode(self, texts, progress=None, chunk=256) -> np.ndarray:
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("failures") / "store.sqlite3")
    ws = Workspace(toy_dataset(), store, model=SimilarityEncoder(SIMS, "base-table"))
    CLEAR.fix_lambda(ws, LAMBDA, "fixed for the test", "test")
    tuned = ws.with_model(SimilarityEncoder(TUNED_SIMS, "tuned-table"))
    gallery = failure_gallery(ws, "test", tuned_ws=tuned, **THRESHOLDS)
    yield SimpleNamespace(ws=ws, tuned=tuned, gallery=gallery, store=store)
    store.close()


def run_rank(ws: Workspace, system: str, qid: str, doc: str) -> int | None:
    return ranks(ws.run(system, "test").get(qid, [])).get(doc)


# ---- the toy: every category, exactly ------------------------------------------------------
def test_the_toy_runs_are_what_the_categories_assume(toy):
    """Preconditions of EXPECTED, from the real BM25 index, FAISS and the fixed-λ hybrid."""
    bm25 = toy.ws.run("bm25", "test")
    assert bm25["q1"] == []  # no query word occurs in the corpus
    assert [d for d, _ in bm25["q3"]] == ["d4", "d5"]
    assert [d for d, _ in bm25["q5"]] == ["d8", "d9", "d10"]
    assert [d for d, _ in bm25["q4"]] == ["d7"]
    dense = toy.ws.run("dense", "test")
    assert [d for d, _ in dense["q5"][:3]] == ["d10", "d9", "d8"]
    assert dense["q1"][0] == ("d1", pytest.approx(0.9))
    assert [d for d, _ in toy.ws.run("hybrid", "test")["q5"][:3]] == ["d9", "d10", "d8"]
    assert [d for d, _ in toy.tuned.run("dense", "test")["q4"][:2]] == ["d6", "d7"]


def shown_unsparse() -> list[str]:
    """The systems the gallery ranks with learned sparse left out: those shown by default (the registry's)."""
    return [s for s in shown() if s != SPLADE]


def test_counts_and_query_categories_are_exact(toy):
    g = toy.gallery
    assert g.categories == DENSE_AND_BM25  # learned sparse left out (THRESHOLDS)
    assert g.counts == {c: len(qids) for c, qids in EXPECTED.items()}
    assert g.skipped == ["q6"]  # judged, but with no relevant document
    assert sorted(g.query_categories) == ["q1", "q2", "q3", "q4", "q5"]
    assert g.query_categories["q5"] == ["lexical_trap", "both_fail", "fixed_by_hybrid"]
    for c, qids in EXPECTED.items():
        assert sorted(q for q, cs in g.query_categories.items() if c in cs) == qids, c
    assert g.systems == [*shown_unsparse(), "tuned_dense", "tuned_hybrid"]
    assert g.thresholds == {"top": 1, "low": 3, "fp_top": 1, "depth": 1000, "tuned_system": "dense"}


def test_cards_documents_headlines_and_order(toy):
    got = {c: [(k.query_id, k.doc_id, k.headline, k.gap) for k in cards] for c, cards in toy.gallery.cards.items()}
    assert got == EXPECTED_CARDS


def test_card_ranks_agree_with_the_cached_runs(toy):
    for cards in toy.gallery.cards.values():
        for card in cards:
            for s in ("bm25", "dense", "hybrid"):
                assert card.ranks[s] == run_rank(toy.ws, s, card.query_id, card.doc_id), (card.category, s)
            for s in ("dense", "hybrid"):
                assert card.ranks[f"tuned_{s}"] == run_rank(toy.tuned, s, card.query_id, card.doc_id)
    vm = toy.gallery.cards["vocabulary_mismatch"][0]
    assert vm.ranks["bm25"] is None and vm.ranks["dense"] == 1 and vm.label == 2
    assert toy.gallery.cards["semantic_false_positive"][0].label is None  # unjudged
    assert toy.gallery.cards["broken_by_finetuning"][0].ranks["tuned_dense"] == 10


def test_missing_terms_and_bm25_contributions(toy):
    cards = {(c.category, c.query_id): c for cs in toy.gallery.cards.values() for c in cs}
    vm = cards["vocabulary_mismatch", "q1"]
    assert vm.matched_terms == [] and vm.bm25_terms == []
    assert vm.missing_terms == ["automobil", "cover", "price", "fee"]
    assert vm.term_words == {"automobil": "automobile", "cover": "cover", "price": "price", "fee": "fees"}
    trap = cards["lexical_trap", "q3"]
    assert trap.matched_terms == ["bank", "rate"] and trap.missing_terms == ["loan"]
    assert [t for t, _ in trap.bm25_terms] == ["bank", "rate"]
    assert cards["lexical_trap", "q5"].missing_terms == ["storag"]
    assert cards["both_fail", "q4"].missing_terms == ["solar", "panel", "effici"]
    for card in cards.values():
        row = toy.ws.doc_row[card.doc_id]
        total = sum(s for _, s in card.bm25_terms)
        assert total == pytest.approx(float(toy.ws.bm25.scores(card.query)[row]), rel=1e-5, abs=1e-6)
        assert all(s > 0 for _, s in card.bm25_terms)
    # the BM25 score of q3's first document, as the run has it
    assert sum(s for _, s in trap.bm25_terms) == pytest.approx(toy.ws.run("bm25", "test")["q3"][0][1], rel=1e-5)


def test_dense_similarity_is_the_encoders_cosine(toy):
    cards = {(c.category, c.query_id): c for cs in toy.gallery.cards.values() for c in cs}
    assert cards["vocabulary_mismatch", "q1"].dense_similarity == pytest.approx(0.9, abs=1e-6)
    assert cards["vocabulary_mismatch", "q1"].tuned_similarity == pytest.approx(0.0, abs=1e-6)
    assert cards["semantic_false_positive", "q2"].dense_similarity == pytest.approx(0.95, abs=1e-6)
    assert cards["fixed_by_finetuning", "q4"].dense_similarity == pytest.approx(0.5, abs=1e-6)
    assert cards["fixed_by_finetuning", "q4"].tuned_similarity == pytest.approx(0.9, abs=1e-6)
    assert cards["lexical_trap", "q3"].dense_similarity == pytest.approx(0.0, abs=1e-6)


def test_low_is_a_strict_bound(toy):
    """"BM25 ranks it below ``low``" means R_bm25 > low: q3's d5 sits at BM25 2, q5's d10 at BM25 3."""
    def members(g, c):
        return sorted(q for q, cs in g.query_categories.items() if c in cs)

    at_2 = failure_gallery(toy.ws, "test", top=1, low=2, fp_top=1)
    assert members(at_2, "vocabulary_mismatch") == ["q1"]
    assert members(at_2, "semantic_false_positive") == ["q2", "q5"]
    assert [(c.query_id, c.doc_id, c.headline) for c in at_2.cards["semantic_false_positive"]] == [
        ("q2", "d3", "BM25 — → dense 1"), ("q5", "d10", "BM25 3 → dense 1")]
    at_1 = failure_gallery(toy.ws, "test", top=1, low=1, fp_top=1)
    assert members(at_1, "vocabulary_mismatch") == ["q1", "q3"]
    assert [c.headline for c in at_1.cards["vocabulary_mismatch"]] == ["BM25 — → dense 1", "BM25 2 → dense 1"]


def test_without_a_tuned_workspace_there_are_no_finetuning_categories(toy):
    g = failure_gallery(toy.ws, "test", **THRESHOLDS)
    assert g.categories == [c for c in DENSE_AND_BM25 if "finetuning" not in c]
    assert g.systems == shown_unsparse() and g.systems[:3] == ["bm25", "dense", "hybrid"]
    assert all(set(c.ranks) == set(g.systems) and c.tuned_similarity is None
               for cs in g.cards.values() for c in cs)
    assert {c: n for c, n in g.counts.items()} == {c: len(EXPECTED[c]) for c in g.categories}


def test_an_empty_category_and_the_card_cap(toy):
    only_q3 = toy_dataset({"test": {"q3": QRELS["test"]["q3"]}})
    ws = Workspace(only_q3, toy.store, model=toy.ws.encoder)
    CLEAR.fix_lambda(ws, LAMBDA, "fixed for the test", "test")
    g = failure_gallery(ws, "test", **THRESHOLDS)
    assert g.counts == {"vocabulary_mismatch": 0, "exact_match_miss": 0, "semantic_false_positive": 0,
                        "lexical_trap": 1, "both_fail": 0, "fixed_by_hybrid": 0}
    assert g.cards["vocabulary_mismatch"] == [] and g.skipped == []
    assert "No query in this category." in gallery_html(g, counts=False)
    capped = failure_gallery(toy.ws, "test", max_cards_per_category=1, **THRESHOLDS)
    assert capped.counts["lexical_trap"] == 2
    assert [c.query_id for c in capped.cards["lexical_trap"]] == ["q3"]  # the larger move kept
    assert "showing the 1 most dramatic of 2" in gallery_html(capped, counts=False)


def test_bad_arguments_are_refused(toy):
    with pytest.raises(ValueError, match=r"no labels for split 'train' \(it has: test\)"):
        failure_gallery(toy.ws, "train")
    with pytest.raises(ValueError, match="tuned_system must be"):
        failure_gallery(toy.ws, "test", tuned_system="bm25")


def test_headline_text():
    assert headline("vocabulary_mismatch", {"bm25": 989, "dense": 10}) == "BM25 989 → dense 10"
    assert headline("fixed_by_hybrid", {"bm25": None, "dense": 52, "hybrid": 4}) == "BM25 — · dense 52 → hybrid 4"
    assert headline("both_fail", {"bm25": 37, "dense": None}) == "BM25 37 · dense —"
    assert headline("broken_by_finetuning", {"hybrid": 3, "tuned_hybrid": None}, "hybrid") == \
        "hybrid 3 → fine-tuned hybrid —"


def test_gallery_json_round_trips(toy):
    obj = json.loads(json.dumps(toy.gallery.to_json()))
    assert obj["counts"] == toy.gallery.counts
    card = obj["cards"]["vocabulary_mismatch"][0]
    assert card["query_id"] == "q1" and card["query"] == QUERIES["q1"] and card["ranks"]["bm25"] is None
    assert card == json.loads(json.dumps(toy.gallery.cards["vocabulary_mismatch"][0].to_json()))


# ---- HTML ----------------------------------------------------------------------------------
class Tags(HTMLParser):
    """Every start tag with its attributes (script and style bodies are data, not tags)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(doc: str) -> Tags:
    p = Tags()
    p.feed(doc)
    p.close()
    return p


def test_card_html_escapes_and_carries_the_query(toy):
    card = toy.gallery.cards["vocabulary_mismatch"][0]
    frag = card_html(card)
    tags = parse(frag).tags
    article = tags[0]
    assert article[0] == "article" and article[1]["data-query-id"] == "q1"
    assert article[1]["data-category"] == "vocabulary_mismatch" and "rs-card" in article[1]["class"]
    assert QUERIES["q1"] in unescape(frag) and "<price>" not in frag
    assert card.headline in unescape(frag) and "Premiums explained" in frag
    missing = [a.get("title") for t, a in tags if "rs-term-missing" in a.get("class", "")]
    assert missing == ["automobil", "cover", "price", "fee"]  # shown as the query's words
    assert ">automobile</span>" in frag and ">fees</span>" in frag
    assert "relevant (2)" in frag and "Dense similarity 0.900 → fine-tuned 0.000" in unescape(frag)
    trap = card_html(toy.gallery.cards["lexical_trap"][0])
    bars = [a for t, a in parse(trap).tags if a.get("class") == "rs-bar-fill"]
    assert len(bars) == 2 and bars[0]["style"].startswith("width:")
    assert "judged not relevant (0)" in trap
    fp = card_html(toy.gallery.cards["semantic_false_positive"][0])
    assert "<script>" not in fp and "<script>alert(1)</script> & happy" in unescape(fp)
    assert "unjudged" in fp


def test_gallery_html_is_one_self_contained_file(toy, tmp_path):
    extra = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    path = write_gallery(toy.gallery, tmp_path / "out" / "gallery.html", figures=[extra])
    doc = path.read_bytes().decode("utf-8")  # valid UTF-8
    parsed = parse(doc)
    # nothing outside the file: no src at all, only in-page links, no stylesheet links
    assert [a for _, a in parsed.tags if "src" in a] == []
    assert all(a["href"].startswith("#rs-cat-") for _, a in parsed.tags if "href" in a)
    assert not any(t == "link" for t, _ in parsed.tags)
    assert doc.count(get_plotlyjs()) == 1  # plotly.js inlined exactly once
    assert len(re.findall(r'class="plotly-graph-div"', doc)) == 2  # the counts chart and the extra one
    assert '<meta charset="utf-8">' in doc and "<style>" in doc and ".rs-card {" in doc
    # every card, with its query text escaped
    articles = [(a["data-category"], a["data-query-id"], a["data-doc-id"]) for t, a in parsed.tags if t == "article"]
    expected = [(c, q, d) for c, cards in EXPECTED_CARDS.items() for q, d, _, _ in cards]
    assert sorted(articles) == sorted(expected)
    assert QUERIES["q1"] in unescape(doc) and QUERIES["q1"] not in doc
    assert "<script>alert(1)" not in doc
    text = "".join(parsed.text)
    for cards in EXPECTED_CARDS.values():
        for _, _, head, _ in cards:
            assert head in text
    sections = [a["id"] for t, a in parsed.tags if t == "section"]
    assert sections == [f"rs-cat-{c}" for c in DENSE_AND_BM25]


def test_counts_figure_has_one_bar_per_category(toy):
    fig = counts_figure(toy.gallery)
    assert list(fig.data[0].x) == ["Vocabulary mismatch", "Exact-match miss", "Semantic false positive", "Lexical trap",
                                   "Both fail", "Fixed by hybrid", "Fixed by fine-tuning", "Broken by fine-tuning"]
    assert list(fig.data[0].y) == [1, 0, 1, 2, 2, 1, 1, 1]
    # error bars: the 95% (Wilson) interval of each category's share of the analysed queries, in queries
    n = len(toy.gallery.query_categories)
    for k, up, down in zip(fig.data[0].y, fig.data[0].error_y.array, fig.data[0].error_y.arrayminus):
        iv = proportion_interval(k, n)
        assert (k + up, k - down) == pytest.approx((iv.high * n, iv.low * n))


def test_the_report_opens_with_the_systems_metrics_intervals_and_conclusions(toy):
    summary = Summary(["system", "ndcg@10"], [["BM25", "0.5776 [0.420, 0.733]"], ["<b>prod</b>", "0.6 [0.5, 0.7]"]],
                      ["<b>prod</b> and BM25: not separable yet (Δ +0.022 [-0.100, 0.140] ndcg@10, p = 0.700, "
                       "32 queries)"],
                      {"headers": ["kind", "segment", "queries", "BM25", "significantly worse"],
                       "data": [["field <i>tier</i>", "gold", 7, "0.2000 [0.100, 0.300]", "<b>prod</b> below BM25"]]},
                      note="Means over the 32 labelled queries")
    doc = gallery_html(toy.gallery, counts=False, summary=summary)
    parsed = parse(doc)
    assert [a.get("id") for t, a in parsed.tags if t == "section"][0] == "rs-summary"  # before the categories
    assert "<b>prod</b>" not in doc and "&#60;b&#62;prod&#60;/b&#62; and BM25" in doc
    text = unescape("".join(parsed.text))
    assert "0.5776 [0.420, 0.733]" in text and "not separable yet (Δ +0.022 [-0.100, 0.140]" in text
    assert "By kind of query" in text and "field <i>tier</i>" in text and "<i>tier</i>" not in doc
    n = len(toy.gallery.query_categories)  # and the counts table gives each share with its interval
    iv = proportion_interval(2, n)
    assert f"{2 / n:.1%} [{iv.low:.1%}, {iv.high:.1%}]" in text


def test_the_report_header_and_its_tables_list_the_same_systems(toy):
    """The report's header names the systems its cards give a rank for; its metrics table and its table
    by kind of query list those same systems, by the same names (all from the gallery's list: the
    systems shown by default, and the fine-tuned encoder's dense and hybrid), not the three base ones."""
    figures, summary = report_parts(toy.ws, {"": toy.ws, "fine-tuned": toy.tuned}, toy.gallery)
    rows = [row[0] for row in summary.rows]
    base = [s for s in toy.gallery.systems if s not in TUNED_SYSTEMS]
    assert len(base) > 3 and rows == [*(label(s) for s in base), "Dense · fine-tuned", "Hybrid (CLEAR λ) · fine-tuned"]
    assert summary.segments["headers"][3:-1] == rows
    text = unescape("".join(parse(gallery_html(toy.gallery, figures, counts=False, summary=summary)).text))
    assert f"Systems: {', '.join(rows)}; ranks searched" in text
    assert {t.name for f in figures[:1] for t in f.data} >= set(rows)  # the Recall@k curves too


def test_on_labels_judged_in_the_app_the_unjudged_passage_is_counted_apart_not_shown_as_the_failure(tmp_path):
    """The toy's labels, this time made by judging in the app (every labelled pair is a judgment in
    the store): q2's d3, which dense ranks first and nobody judged, is no semantic false positive
    but "unjudged at the top", its card asking for a judgment; the judged-0 lexical traps stay."""
    store = Store(tmp_path / "store.sqlite3")
    try:
        ws = Workspace(toy_dataset(), store, model=SimilarityEncoder(SIMS, "base-table"))
        CLEAR.fix_lambda(ws, LAMBDA, "fixed for the test", "test")
        store.put_judgments(ws.dataset.corpus_hash, [(q, QUERIES[q], d, g, "ann") for q, docs in QRELS["test"].items()
                                                     for d, g in docs.items()])
        g = failure_gallery(ws, "test", **THRESHOLDS)
        assert sorted(g.pooled) == ["q1", "q2", "q3", "q4", "q5"]  # q6 (nothing relevant) is skipped
        assert g.counts["semantic_false_positive"] == 0 and g.counts["unjudged_at_top"] == 1  # before: 1 and —
        (card,) = g.cards["unjudged_at_top"]
        assert (card.query_id, card.doc_id, card.label) == ("q2", "d3", None)
        assert [(c.query_id, c.doc_id) for c in g.cards["lexical_trap"]] == [("q3", "d4"), ("q5", "d8")]
        doc = gallery_html(g, counts=True)
        text = unescape("".join(parse(doc).text))
        assert "Unjudged at the top (judge it first)" in text
        assert "unjudged: judge it before calling it a failure" in text
        assert "Semantic false positive (0)" in text
    finally:
        store.close()


def test_without_figures_no_plotly_is_embedded(toy):
    doc = gallery_html(toy.gallery, counts=False)
    assert "plotly-graph-div" not in doc and get_plotlyjs()[:200] not in doc
    assert [a for _, a in parse(doc).tags if "src" in a] == []


# ---- the demo corpus with the tiny random encoder: definitions hold, evidence is right -------
@pytest.fixture(scope="module")
def demo(tmp_path_factory, tiny_encoder, demo_sparse_store):
    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("failures-demo") / "store.sqlite3"))
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    other = load_encoder(str(build_tiny_encoder(tmp_path_factory.mktemp("tiny-2"), seed=1)), device="cpu")
    tuned = ws.with_model(other)
    for w in (ws, tuned):  # any λ will do here; tuning it on train would only cost time
        CLEAR.fix_lambda(w, 0.05, "fixed for the test", "test")
    gallery = failure_gallery(ws, "test", tuned_ws=tuned)
    rank_of = {(w, s): {q: ranks(hits) for q, hits in ws_.run(s, "test").items()}  # read from the store once
               for w, ws_ in (("base", ws), ("tuned", tuned)) for s in ("bm25", "dense", "hybrid")}
    yield SimpleNamespace(ws=ws, tuned=tuned, gallery=gallery, rank_of=rank_of)
    store.close()


def _best_relevant(demo, which, system, qid, labels) -> int:
    r = demo.rank_of[which, system][qid]
    return min((r.get(d, 1001) for d, v in labels.items() if v > 0), default=1001)


@pytest.mark.slow
def test_demo_gallery_follows_the_definitions(demo):
    ws, g = demo.ws, demo.gallery
    qrels = ws.dataset.qrels["test"]
    assert len(g.query_categories) == 32 and g.skipped == []
    # an independent count of the run-level categories (top = 10)
    bm25, dense = ws.run("bm25", "test"), demo.rank_of["base", "dense"]
    traps = sorted(q for q in qrels if bm25[q] and qrels[q].get(bm25[q][0][0], 0) <= 0
                   and dense[q].get(bm25[q][0][0], 1001) > 10)
    best = {(w, s, q): _best_relevant(demo, w, s, q, qrels[q])
            for w in ("base", "tuned") for s in ("bm25", "dense", "hybrid") for q in qrels}
    both = sorted(q for q in qrels if best["base", "bm25", q] > 10 and best["base", "dense", q] > 10)
    hybrid = sorted(q for q in both if best["base", "hybrid", q] <= 10)
    fixed = sorted(q for q in qrels if best["base", "dense", q] > 10 and best["tuned", "dense", q] <= 10)
    broken = sorted(q for q in qrels if best["base", "dense", q] <= 10 and best["tuned", "dense", q] > 10)
    for c, qids in {"lexical_trap": traps, "both_fail": both, "fixed_by_hybrid": hybrid,
                    "fixed_by_finetuning": fixed, "broken_by_finetuning": broken}.items():
        assert sorted(q for q, cs in g.query_categories.items() if c in cs) == qids, c
        assert g.counts[c] == len(qids)
    for c in g.categories:
        assert g.counts[c] == sum(c in cs for cs in g.query_categories.values())
        assert len(g.cards[c]) == min(g.counts[c], 12)
        gaps = [card.gap for card in g.cards[c]]
        assert gaps == sorted(gaps, reverse=True)
    assert sum(g.counts.values()) > 0


def test_demo_cards_evidence_matches_the_indexes(demo):
    ws, g = demo.ws, demo.gallery
    tok = ws.tokenizer
    every = [card for cards in g.cards.values() for card in cards]
    qvecs = dict(zip([c.query for c in every], ws.encoder.encode([c.query for c in every])))
    for cards in g.cards.values():
        for card in cards:
            assert isinstance(card, FailureCard)
            labels = ws.dataset.qrels["test"][card.query_id]
            assert card.label == labels.get(card.doc_id)
            for s in ("bm25", "dense", "hybrid"):
                assert card.ranks[s] == demo.rank_of["base", s][card.query_id].get(card.doc_id)
            for s in ("dense", "hybrid"):
                assert card.ranks[f"tuned_{s}"] == demo.rank_of["tuned", s][card.query_id].get(card.doc_id)
            doc_terms = set(tok(ws.dataset.docs[card.doc_id].full_text))
            terms = list(dict.fromkeys(tok(card.query)))
            assert card.missing_terms == [t for t in terms if t not in doc_terms]
            assert card.matched_terms == [t for t in terms if t in doc_terms]
            row = ws.doc_row[card.doc_id]
            assert sum(s for _, s in card.bm25_terms) == pytest.approx(
                float(ws.bm25.scores(card.query)[row]), rel=1e-5, abs=1e-6)
            expected = float(ws.dense.index.embeddings[row] @ qvecs[card.query])
            assert card.dense_similarity == pytest.approx(expected, abs=1e-5)
            top, low = 10, 100
            r = {s: (v if v is not None else 1001) for s, v in card.ranks.items()}
            if card.category == "vocabulary_mismatch":
                assert card.label and card.label > 0 and r["dense"] <= top and r["bm25"] > low
            elif card.category == "semantic_false_positive":
                assert not (card.label and card.label > 0) and r["dense"] <= 3 and r["bm25"] > low
                assert card.gap == r["bm25"] - r["dense"]
            elif card.category == "lexical_trap":
                assert r["bm25"] == 1 and not (card.label and card.label > 0) and r["dense"] > top
                assert card.headline == f"BM25 1 → dense {card.ranks['dense']}"
            elif card.category == "fixed_by_hybrid":
                assert r["hybrid"] <= top < min(r["bm25"], r["dense"])
