"""Metrics by kind of query: each segment with its intervals, the segments where a system is
significantly worse first, and segment fields read from the queries file."""
from __future__ import annotations

import json

from retrieval import load_dataset
from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers.assembly import add_queries
from retrieval.evaluation.measures import Evaluation
from retrieval.evaluation.query_kinds import MIN_QUERIES, digits_of, form_of, length_of, segment_table, segment_values
from tests.conftest import DEMO
from ui.present.tables import segment_cells


def test_the_built_in_kinds():
    assert [length_of(t) for t in ("kettle", "descale a kettle", "how do I descale an old kettle")] == \
        ["1–2 words", "3–5 words", "6+ words"]
    assert digits_of("part QX-4471") == "with digits" and digits_of("kettle") == "without digits"
    assert [form_of(t) for t in ("How do I descale?", "kettle limescale", "descale kettle?", "Is it safe")] == \
        ["question", "keywords", "question", "question"]


def corpus(queries: dict[str, str], fields: dict[str, dict[str, str]] | None = None) -> Dataset:
    docs = {"d1": Document("d1", "", "a document")}
    return Dataset("t", docs, queries, {}, query_fields=fields or {})


def test_a_system_significantly_worse_on_one_kind_of_query_is_named_first():
    codes = {f"c{i}": f"XQ-{1000 + i}" if i < 6 else f"part number XQ-{1000 + i}" for i in range(12)}
    words = {f"w{i}": f"how do I clean a kettle number {'abcdefghijkl'[i]}" for i in range(12)}
    tiers = {q: {"tier": "gold" if i % 2 else "free", "id_like": q} for i, q in enumerate([*codes, *words])}
    ds = corpus({**codes, **words}, tiers)
    rng_a = {q: 0.6 + 0.01 * (i % 5) for i, q in enumerate([*codes, *words])}
    bm25 = Evaluation({}, {"ndcg@10": rng_a})
    dense = Evaluation({}, {"ndcg@10": {q: (0.05 + 0.01 * (i % 3) if q in codes else rng_a[q] + 0.01 * (i % 2))
                                        for i, q in enumerate(rng_a)}})
    rows = segment_table({"BM25": bm25, "Dense": dense}, ds)
    flagged = [r for r in rows if r.differences]
    assert rows[:len(flagged)] == flagged  # the segments where a system is significantly worse come first
    first = next(r for r in flagged if r.kind == "digits")
    assert (first.value, first.queries) == ("with digits", 12)
    d = first.differences[0]
    assert (d.worse, d.better) == ("Dense", "BM25") and d.comparison.delta > 0.5 and d.adjusted_p < 0.05
    assert d.comparison.interval.low > 0.5
    for r in rows:  # every mean with its interval; no segment under MIN_QUERIES queries
        assert r.queries >= MIN_QUERIES
        assert all(r.intervals[s].low <= r.means[s] <= r.intervals[s].high for s in r.means)
    without = next(r for r in rows if r.value == "without digits")
    assert all(d.worse == "BM25" for d in without.differences)  # dense is slightly better on the word queries
    kinds = {r.kind for r in rows}
    assert "field tier" in kinds and "field id_like" not in kinds  # 24 distinct values: not a segment
    cells = segment_cells(rows, ["BM25", "Dense"])
    assert cells["headers"][:5] == ["kind", "segment", "queries", "BM25", "Dense"]
    row = cells["data"][rows.index(first)]
    assert row[:3] == ["digits", "with digits", 12]
    assert row[-1].startswith("Dense below BM25 by ") and "adjusted p = " in row[-1]


def test_noise_gives_no_significant_segment():
    qs = {f"q{i}": f"query words {i} here" if i % 2 else f"a longer query with its words {i} here" for i in range(40)}
    a = Evaluation({}, {"ndcg@10": {q: (i * 37 % 11) / 10 for i, q in enumerate(qs)}})
    b = Evaluation({}, {"ndcg@10": {q: (i * 53 % 13) / 12 for i, q in enumerate(qs)}})
    rows = segment_table({"A": a, "B": b}, corpus(qs))
    assert rows and not any(r.differences for r in rows)


def test_segment_fields_come_from_the_queries_file(tmp_path):
    ds = load_dataset(DEMO)
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in [
        {"_id": "l1", "text": "descale kettle", "market": "fr", "metadata": {"device": "mobile", "nested": {"x": 1}}},
        {"_id": "l2", "text": "oven cleaning", "market": "de", "count": 12},
    ]) + "\n")
    with_jsonl = add_queries(ds, jsonl)
    assert with_jsonl.query_fields["l1"] == {"market": "fr", "device": "mobile"}
    assert with_jsonl.query_fields["l2"] == {"market": "de", "count": "12"}
    csv = tmp_path / "log.csv"
    csv.write_text("id,query,segment,clicks\nc1,grout cleaner,pro,3\nc2,sofa stains,home,\n")
    both = add_queries(with_jsonl, csv)
    assert both.query_fields["c1"] == {"segment": "pro", "clicks": "3"}
    assert both.query_fields["c2"] == {"segment": "home"}  # an empty cell: no value
    values = segment_values(both, ["l1", "l2", "c1", "c2"])
    assert values["field market"] == {"l1": "fr", "l2": "de"} and values["field segment"] == {"c1": "pro", "c2": "home"}
    assert both.without_queries(["c1"]).query_fields.keys() == {"l1", "l2", "c2"}
    log = tmp_path / "log-without-ids.csv"  # a query log: the text and a count, no id column
    log.write_text("query,count\nkettle limescale,120\nsofa stains,3\nkettle limescale,5\n")
    counted = add_queries(ds, log)
    from retrieval.data.readers.queries import stable_query_id
    assert counted.query_fields[stable_query_id("kettle limescale")] == {"count": "120"}  # the first, kept once
    assert counted.query_fields[stable_query_id("sofa stains")] == {"count": "3"}


def test_a_kind_every_query_shares_is_not_a_row():
    """On questions all of one length and language, "6+ words", "without digits", "question" and
    "en" would each repeat the overall means: only kinds that split the queries are rows."""
    qs = {f"q{i}": f"how do I clean the old kettle number {'abcdefghijkl'[i % 12]} well?" for i in range(12)}
    qs.update({f"r{i}": f"descale kettle {'abcdefghijkl'[i % 12]}?" for i in range(6)})
    a = Evaluation({}, {"ndcg@10": {q: (i * 37 % 11) / 10 for i, q in enumerate(qs)}})
    b = Evaluation({}, {"ndcg@10": {q: (i * 53 % 13) / 12 for i, q in enumerate(qs)}})
    rows = segment_table({"A": a, "B": b}, corpus(qs))
    assert rows and all(r.queries < len(qs) for r in rows)
    assert "length" in {r.kind for r in rows}
    assert not {"digits", "form"} & {r.kind for r in rows}  # every query is a question without digits
