"""Links between documents in JSONL and CSV/TSV files (``retrieval.data.readers.links``): read, checked at the
name boundary, bounded, resolved once every document has loaded, and what is dropped reported with file:line;
hostile input (a link to itself, to a missing id, a cycle, a million links) included."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.dataset import Dataset, Document
from retrieval.data.readers import links as links_module
from retrieval.data.readers import load_dataset
from retrieval.errors import DataError


def jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def error(path) -> str:
    with pytest.raises(DataError) as exc:
        load_dataset(path)
    return str(exc.value)


def test_jsonl_links_resolve_to_the_documents_that_loaded_and_are_counted(tmp_path):
    f = jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "text": "Alpha.", "links": ["b", "c", "b"]},  # b twice: one link
        {"_id": "b", "text": "Beta.", "links": ["a"]},  # a cycle: a → b → a, both kept
        {"_id": "c", "text": "Gamma.", "links": []},
        {"_id": "d", "text": "Delta.", "links": None},
        {"_id": 7, "text": "Seven.", "links": [7, "a"]},  # integer ids, as ids may be; 7 → itself
        {"_id": "e", "text": "Epsilon."},
    ])
    ds = load_dataset(f)
    assert {d.id: d.links for d in ds.docs.values()} == {"a": ("b", "c"), "b": ("a",), "c": (), "d": (), "7": ("a",),
                                                         "e": ()}
    assert ds.link_count == 4 and ds.summary()["links"] == 4
    assert ds.report.warnings == [f"{f}:5: link '7' of document '7' is to the document itself and was dropped"]
    assert ds.docs["a"].links[0] is ds.docs["b"].id  # the document's own id string, not a copy per link


def test_a_link_to_no_document_is_dropped_and_reported_with_its_line_never_guessed(tmp_path):
    f = jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "text": "Alpha.", "links": ["B", "gone", "empty"]},  # ids are case-sensitive: B is not b
        {"_id": "b", "text": "Beta."},
        {"_id": "empty", "text": " ", "links": ["a"]},  # skipped for its empty text, with its links
    ])
    ds = load_dataset(f)
    assert ds.docs["a"].links == () and set(ds.docs) == {"a", "b"}
    warnings = ds.report.warnings
    assert f"{f}:1: link 'B' of document 'a' names no document that loaded and was dropped (no such document)" \
        in warnings
    assert f"{f}:1: link 'empty' of document 'a' names no document that loaded and was dropped (a document " \
           "skipped for its empty text)" in warnings


def test_many_dropped_links_are_counted_in_one_warning_with_the_first_examples(tmp_path):
    f = jsonl(tmp_path / "c.jsonl", [{"_id": f"d{i}", "text": "x.", "links": [f"missing{i}"]} for i in range(50)])
    ds = load_dataset(f)
    assert ds.report.warnings == [
        "50 links were dropped, each a link to no document that loaded (e.g. 'missing0' in "
        f"{f}:1 (no such document), 'missing1' in {f}:2 (no such document), 'missing2' in {f}:3 (no such document))"]


def test_a_links_column_of_a_table_holds_ids_separated_by_white_space(tmp_path):
    f = tmp_path / "c.tsv"
    f.write_text("id\ttext\tlinks\na\tAlpha.\tb  c\nb\tBeta.\t\nc\tGamma.\ta\n", encoding="utf-8")
    ds = load_dataset(f)
    assert {d.id: d.links for d in ds.docs.values()} == {"a": ("b", "c"), "b": (), "c": ("a",)}
    csv = tmp_path / "c.csv"
    csv.write_text('id,text,links\na,Alpha.,"b c"\nb,Beta.,a\nc,Gamma.,\n', encoding="utf-8")
    assert load_dataset(csv).docs["a"].links == ("b", "c")


@pytest.mark.parametrize("links, message", [
    ("b", "field 'links' must be a list of document ids"),
    ({"to": "b"}, "field 'links' must be a list of document ids"),
    (["b", 1.5], "link 2 of field 'links' must be a string or an integer"),
    (["b", True], "link 2 of field 'links' must be a string or an integer"),
    (["b", ["c"]], "link 2 of field 'links' must be a string or an integer"),
    (["  "], "link 1 of field 'links' is empty"),
    (["a b"], "link 1 'a b' contains whitespace, which TREC run and qrels files cannot hold"),
    (["b\u202ec"], "link 1 'b\\u202ec' contains U+202E (RIGHT-TO-LEFT OVERRIDE), a character ids cannot hold"),
    (["b\x1b[31m"], "link 1 'b\\x1b[31m' contains U+001B (a control character), a character ids cannot hold"),
])
def test_a_link_that_cannot_be_an_id_is_refused_naming_the_file_line_and_link(tmp_path, links, message):
    f = jsonl(tmp_path / "c.jsonl", [{"_id": "b", "text": "Beta."}, {"_id": "a", "text": "Alpha.", "links": links}])
    assert error(f).startswith(f"{f}:2: {message}")


def test_a_link_id_is_kept_in_its_nfc_form_and_finds_the_document(tmp_path):
    f = jsonl(tmp_path / "c.jsonl", [{"_id": "caf\u00e9", "text": "Cafe."},
                                     {"_id": "a", "text": "Alpha.", "links": ["cafe\u0301"]}])  # decomposed é
    assert load_dataset(f).docs["a"].links == ("caf\u00e9",)


def test_a_table_link_that_cannot_be_an_id_is_refused_too(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("id,text,links\na,Alpha.,b\u200bc\n", encoding="utf-8")
    assert error(f) == f"{f}:2: link 1 'b\\u200bc' contains U+200B (ZERO WIDTH SPACE), a character ids cannot hold"


def test_more_links_than_a_document_may_hold_are_refused_naming_the_line(tmp_path):
    many = [f"d{i}" for i in range(links_module.MAX_LINKS_PER_DOCUMENT + 1)]
    f = jsonl(tmp_path / "c.jsonl", [{"_id": "a", "text": "Alpha."}, {"_id": "b", "text": "Beta.", "links": many}])
    assert error(f) == (f"{f}:2: document 'b' has 10,001 links; at most 10,000 are read per document")
    csv = tmp_path / "c.tsv"
    csv.write_text("id\ttext\tlinks\nb\tBeta.\t" + " ".join(many) + "\n", encoding="utf-8")
    assert error(csv) == f"{csv}:2: document 'b' has 10,001 links; at most 10,000 are read per document"


def test_a_million_links_load_in_one_pass_and_past_the_corpus_bound_are_refused(tmp_path, monkeypatch):
    """1,000 documents each linking to 1,000 others: a million links, each resolved once (a reader
    quadratic in them would not end); past ``MAX_LINKS`` the file is refused at the line that passes it."""
    n = 1000
    f = jsonl(tmp_path / "c.jsonl", [{"_id": f"d{i}", "text": f"Document {i}.",
                                      "links": [f"d{(i + k) % n}" for k in range(1, n + 1)]} for i in range(n)])
    ds = load_dataset(f)  # each document's last link is to itself
    assert ds.link_count == n * (n - 1) and ds.docs["d5"].links[:2] == ("d6", "d7")
    assert ds.report.warnings == [f"1,000 links were dropped, each a link to the document itself (e.g. 'd0' in "
                                  f"{f}:1, 'd1' in {f}:2, 'd2' in {f}:3)"]
    monkeypatch.setattr(links_module, "MAX_LINKS", 2500)
    assert error(f) == f"{f}:3: more than 2,500 links in the corpus; at most 2,500 are read"


def test_a_corpus_without_links_hashes_as_it_did_before_documents_had_links(tmp_path):
    plain = Dataset("p", {"a": Document("a", "T", "Alpha."), "b": Document("b", "", "Beta.")})
    # the hash a corpus had before links: its documents as [id, title, text] JSON arrays
    import hashlib

    before = hashlib.sha256(b'["a", "T", "Alpha."]["b", "", "Beta."]').hexdigest()
    assert plain.corpus_hash == before
    f = jsonl(tmp_path / "c.jsonl", [{"_id": "a", "title": "T", "text": "Alpha.", "links": []},
                                     {"_id": "b", "text": "Beta.", "links": ["gone"]}])
    assert load_dataset(f).corpus_hash == before  # no link kept: the same corpus
    linked = jsonl(tmp_path / "l.jsonl", [{"_id": "a", "title": "T", "text": "Alpha.", "links": ["b"]},
                                          {"_id": "b", "text": "Beta."}])
    assert load_dataset(linked).corpus_hash != before  # a link is content: what is cached under it differs


ids = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S")), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ids, st.lists(st.integers(0, 12), max_size=8)), min_size=1, max_size=10,
                unique_by=lambda r: r[0]))
def test_links_written_to_jsonl_read_back_as_the_graph_minus_self_links_and_repeats(tmp_path_factory, rows):
    from retrieval.safe_names import normal_id

    kept = {normal_id(i): i for i, _ in rows}
    if len(kept) < len(rows):  # two ids one in NFC: a duplicate id, not this property's subject
        return
    names = [i for i, _ in rows]
    f = jsonl(tmp_path_factory.mktemp("links") / "c.jsonl",
              [{"_id": i, "text": "Some text.", "links": [names[t] if t < len(names) else f"missing-{t}" for t in to]}
               for i, to in rows])
    ds = load_dataset(f)
    for i, to in rows:
        want = list(dict.fromkeys(normal_id(names[t]) for t in to if t < len(names) and names[t] != i))
        assert list(ds.docs[normal_id(i)].links) == want
