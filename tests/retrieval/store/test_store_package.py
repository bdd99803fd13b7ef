"""The store as a package (``retrieval.store``): the one helper of owned rows (``retrieval.store.owned``)
read against the rule it writes in SQL, on a real SQLite table; publishing held to one rule for both
tables that publish by it; and ``StoreProtocol``, which the store and the bench's counting store satisfy,
signature for signature."""
from __future__ import annotations

import inspect
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.store import NameTaken, Store, StoreProtocol, owned
from tests.conftest import bench_module

MAKERS = ["", "ana", "bo"]
rows = st.lists(st.tuples(st.sampled_from(MAKERS), st.booleans()), max_size=12)


def owned_table(kept: list[tuple[str, bool]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table t (id integer primary key, corpus text, owner text not null default '', "
                 "published integer not null default 1)")
    conn.executemany("insert into t (corpus, owner, published) values ('c', ?, ?)", [(o, int(p)) for o, p in kept])
    return conn


def read(conn: sqlite3.Connection, where: str, args: list) -> set[int]:
    return {r[0] for r in conn.execute(f"select id from t where {where}", args)}


@settings(max_examples=60, deadline=None)
@given(kept=rows, viewer=st.sampled_from([None, *MAKERS[1:]]))
def test_a_viewer_reads_exactly_the_rows_the_owner_rule_gives_it(kept, viewer):
    """``seen``: a viewer's own rows and the published ones (every row for the operator, None);
    ``everyones_or_own``: everyone's rows (no maker) and its own — whatever rows the table holds."""
    conn = owned_table(kept)
    ids = range(1, len(kept) + 1)
    assert read(conn, *owned.seen(viewer, "corpus = ?", ["c"])) == \
        {i for i, (o, p) in zip(ids, kept) if viewer is None or p or o == viewer}
    assert read(conn, *owned.everyones_or_own(viewer, "corpus = ?", ["c"])) == \
        {i for i, (o, _) in zip(ids, kept) if viewer is None or o in ("", viewer)}
    assert read(conn, *owned.seen(viewer, "corpus = ?", ["other"])) == set()


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store.sqlite3")
    yield s
    s.close()


def private(store: Store, kind: str, name: str, owner: str) -> object:
    """A private row of ``kind`` named ``name`` made by ``owner``; its id."""
    if kind == "snapshots":
        return store.put_snapshot("c", name, {"created": 1.0}, {}, owner=owner, published=False)
    set_id = f"set-{owner}-{name}"
    store.put_query_set("c", set_id, name, {"q1": "text"}, owner=owner, published=False)
    return set_id


def publish(store: Store, kind: str, row_id: object, owner: str) -> bool:
    if kind == "snapshots":
        return store.publish_snapshot("c", int(str(row_id)), owner)
    return store.publish_query_set("c", str(row_id), owner)


@pytest.mark.parametrize("kind", ["snapshots", "query_sets"])
def test_publishing_is_one_rule_for_snapshots_and_query_sets(store, kind):
    """Both publish through ``owned.publish``: only the maker's unpublished row moves; a name the
    published namespace has, or one like it, is refused naming the published one, and nothing moves."""
    ana = private(store, kind, "Release-1", "ana")
    bo = private(store, kind, "RELEASE-1", "bo")  # two private namespaces: both kept
    assert not publish(store, kind, ana, "bo")  # not bo's
    assert publish(store, kind, ana, "ana")
    assert not publish(store, kind, ana, "ana")  # published already
    with pytest.raises(NameTaken, match="looks like the published 'Release-1'"):
        publish(store, kind, bo, "bo")
    rows = store.snapshot_index("c") if kind == "snapshots" else store.query_sets("c")
    assert sorted((r["name"], bool(r["published"])) for r in rows) == [("RELEASE-1", False), ("Release-1", True)]


def same_signature(defined, declared) -> list[str]:
    """How ``defined`` (a method) differs from ``declared`` (the protocol's): parameters' names, kinds,
    whether each has a default, and each annotation the method gives."""
    got, want = inspect.signature(defined), inspect.signature(declared)
    problems = []
    if [(p.name, p.kind, p.default is p.empty) for p in got.parameters.values()] != \
            [(p.name, p.kind, p.default is p.empty) for p in want.parameters.values()]:
        problems.append(f"parameters {got} are not {want}")
    for p in got.parameters.values():
        if p.annotation is not p.empty and p.name in want.parameters and \
                p.annotation != want.parameters[p.name].annotation:
            problems.append(f"{p.name}: {p.annotation} is not {want.parameters[p.name].annotation}")
    if got.return_annotation is not got.empty and got.return_annotation != want.return_annotation:
        problems.append(f"returns {got.return_annotation}, not {want.return_annotation}")
    return problems


def protocol_methods() -> list[str]:
    return [n for n, v in vars(StoreProtocol).items() if inspect.isfunction(v) and not n.startswith("_")]


def test_the_store_and_the_benchs_counting_store_are_stores(tmp_path):
    """``Store`` and ``bench/quality.py``'s ``CountingStore`` are ``StoreProtocol``s, and every method the
    counting store defines over the store's keeps the protocol's signature."""
    counting_class = bench_module("quality").CountingStore
    counting = counting_class(tmp_path / "store.sqlite3", recompute=True)
    try:
        assert isinstance(counting, StoreProtocol)
        overridden = [n for n in protocol_methods() if n in vars(counting_class)]
        assert overridden  # get_run, get_metrics, get_embeddings
        assert {n: same_signature(getattr(counting_class, n), getattr(StoreProtocol, n)) for n in overridden} == \
            {n: [] for n in overridden}
        assert counting.get_run("k") is None and counting.misses == 1  # what it overrides still answers
    finally:
        counting.close()
    assert {n: same_signature(getattr(Store, n), getattr(StoreProtocol, n)) for n in protocol_methods()} == \
        {n: [] for n in protocol_methods()}


def test_something_short_of_a_store_is_not_one():
    """The runtime check is no formality: an object missing the judging half is no ``StoreProtocol``."""

    class CacheOnly:
        path = sizes = None

        def get_run(self, key: str) -> None:
            return None

    assert not isinstance(CacheOnly(), StoreProtocol)
