"""Queries added to a corpus, kept with it: each addition is a named set in the store, keyed by the
corpus (``Dataset.corpus_hash``), so a reload, a restart or a second browser opening the same
corpus gets the queries back — and with them every judgment made on them (judgments are stored by
corpus and query id).

* ``keep`` — after queries were added (a file, typed lines), store the ones the data set did not
  have as one set named after where they came from;
* ``restore`` — a data set with every stored set of its corpus added (a query id a set shares with
  another text is left out, with a warning, never overwritten);
* ``drop`` — forget a set, and the data set without its queries (queries the data's own files
  have, or another set keeps, stay).

Each set has a maker (``retrieval.sharing.owners``). Off a shared deployment every set is everyone's, as
it is made. On a shared one (``SPACE_ID``, ``app.py --shared``) a set is its browser session's
until published (``publish``): other sessions neither get its queries back nor see it listed, and
only its maker may remove it, published or not. A private set's id (``set_id``) and name live in
its maker's namespace (``owners.space``): two sessions' sets never share an id, and their names meet
only when published. A name is unique in its namespace by its look-alike key, and a private one
does not look like a published one — kept by the store inside the write's transaction
(``Store.put_query_set``), so two writers cannot both pass. What one maker stores is bounded:
``MAX_QUERIES`` queries and ``MAX_CHARS`` characters per set, ``MAX_SETS`` sets per corpus (counted
inside the write's transaction too).
"""
from __future__ import annotations

from typing import Any

from retrieval.data.dataset import Dataset
from retrieval.errors import LoadReport
from retrieval.judging.labels import JUDGED
from retrieval.safe_names import check_new_name, display_name
from retrieval.sharing.owners import OPERATOR, Viewer, describe, free_name
from retrieval.store import NameTaken, Store, TooMany, cache_key

MAX_QUERIES = 10_000  # queries in one set (300,000 added by one client came back for every visitor)
MAX_CHARS = 5_000_000  # characters of query text in one set
MAX_SETS = 50  # sets one maker keeps with one corpus


def set_id(queries: dict[str, str], owner: str = "") -> str:
    """A set's id: a hash of its (id, text) pairs (and of its maker's id, given for a private set),
    so adding the same queries again is one set, and two sessions' private sets never share an id."""
    return cache_key(queries=sorted(queries.items()), **({"owner": owner} if owner else {}))[:16]


def check_bounds(queries: dict[str, str]) -> None:
    """A ValueError in one line when ``queries`` are more than one set may keep."""
    if len(queries) > MAX_QUERIES:
        raise ValueError(f"a query set keeps at most {MAX_QUERIES:,} queries, not {len(queries):,}: add them in "
                         f"smaller files")
    chars = sum(len(q) + len(t) for q, t in queries.items())
    if chars > MAX_CHARS:
        raise ValueError(f"a query set keeps at most {MAX_CHARS:,} characters of ids and text, not {chars:,}")


def keep(store: Store | None, before: Dataset, after: Dataset, name: str, viewer: Viewer = OPERATOR) -> str | None:
    """Store the queries ``after`` has and ``before`` did not, as one set named ``name`` made by
    ``viewer`` (private to it on a shared deployment); its id, or None when nothing was added (or
    there is no store). The name is made from file names, so made plain (``safe_names.display_name``)
    and, where a set ``viewer`` sees in its namespace has it already, made free (``-2``, ``-3``, …:
    ``owners.free_name``) rather than refused; a name that looks like another set's without being it
    (``safe_names.check_new_name``) is refused. Another session's private set is never held against
    it, nor named. A ValueError in one line, nothing stored, past ``MAX_QUERIES``, ``MAX_CHARS`` or
    the maker's ``MAX_SETS``, or for that look-alike name."""
    added = {q: t for q, t in after.queries.items() if q not in before.queries}
    if not added:
        return None
    check_bounds(added)
    if store is None:
        return None
    sid = set_id(added, viewer.owner if viewer.shared else "")
    names = [qs["name"] for qs in _rivals(store, after.corpus_hash, viewer) if qs["id"] != sid]
    name = display_name(name, "queries")  # made from file names: cut, not refused
    name = check_new_name(free_name(name, names) if name in names else name, "query set's name", names)
    own = store.query_set_count(after.corpus_hash, viewer.owner, but=sid)
    if own >= MAX_SETS:
        raise ValueError(_too_many(own))
    try:
        store.put_query_set(after.corpus_hash, sid, name, added, owner=viewer.owner, published=not viewer.shared,
                            most=MAX_SETS)
    except NameTaken as err:  # another write of the maker's (or a publication) between the check and the write
        raise ValueError(f"{err}: add the queries again to keep them under a free name") from None
    except TooMany as err:
        raise ValueError(_too_many(err.count)) from None
    return sid


def _too_many(count: int) -> str:
    return (f"{count} query sets of this corpus are yours, the most one maker may keep ({MAX_SETS}): "
            f"remove one first (Data → query sets)")


def listed(store: Store | None, corpus_hash: str, viewer: Viewer = OPERATOR) -> list[dict[str, Any]]:
    """The corpus's stored sets ``viewer`` sees (``id, name, n, created, owner, published,
    queries``), oldest first: ``Store.query_sets``, the one accessor."""
    return store.query_sets(corpus_hash, viewer) if store is not None else []


def unseen(store: Store | None, dataset: Dataset, viewer: Viewer = OPERATOR) -> set[str]:
    """The ids of ``dataset``'s queries that only sets ``viewer`` does not see keep (on a shared
    deployment, another session's private ones): what a view listing or counting the data set's queries
    leaves out, whatever workspace it was handed; empty off a shared deployment."""
    if store is None or not viewer.shared:
        return set()
    sets = listed(store, dataset.corpus_hash)
    seen = {qs["id"] for qs in listed(store, dataset.corpus_hash, viewer)}
    theirs = {qid for qs in sets if qs["id"] not in seen for qid in qs["queries"]}
    ours = {qid for qs in sets if qs["id"] in seen for qid in qs["queries"]}
    return {qid for qid in theirs - ours if qid in dataset.queries}


def seen_queries(store: Store | None, dataset: Dataset, viewer: Viewer = OPERATOR) -> list[str]:
    """The ids of ``dataset``'s queries ``viewer`` may see (``unseen`` left out), sorted."""
    hidden = unseen(store, dataset, viewer)
    return sorted(q for q in dataset.queries if q not in hidden)


def _rivals(store: Store, corpus_hash: str, viewer: Viewer) -> list[dict[str, Any]]:
    """The sets a new one of ``viewer``'s is held against: the published ones and, for a private one
    (a shared deployment), the maker's own private ones — never another maker's private set."""
    return [qs for qs in listed(store, corpus_hash, viewer)
            if qs["published"] or (viewer.shared and qs["owner"] == viewer.owner)]


def restore(store: Store | None, dataset: Dataset, viewer: Viewer = OPERATOR) -> Dataset:
    """``dataset`` with the queries of every set stored for its corpus that ``viewer`` sees added
    (the same object when there is none to add); an id that a set gives another text than the data
    set has is skipped and named in a warning."""
    sets = listed(store, dataset.corpus_hash, viewer)
    added: dict[str, str] = {}
    clashes: list[str] = []
    for qs in sets:
        for qid, text in qs["queries"].items():
            have = dataset.queries.get(qid, added.get(qid))
            if have is None:
                added[qid] = text
            elif have.strip() != text.strip():
                clashes.append(qid)
    if not added and not clashes:
        return dataset
    warnings = [f"{len(clashes)} stored quer{'y' if len(clashes) == 1 else 'ies'} left out: the id is already used "
                f"for another text (e.g. {clashes[0]!r})"] if clashes else []
    return dataset.with_queries(added, LoadReport(warnings))


def drop(store: Store | None, dataset: Dataset, sid: str, viewer: Viewer = OPERATOR) -> Dataset:
    """Forget the stored set ``sid`` of the data set's corpus; the data set without the queries only
    that set had (a query the data set's own labels label, or one another set keeps, stays; one judged
    in the app goes, its grades kept in the store). ``KeyError`` for a set ``viewer`` does not see; on
    a shared deployment a ValueError, nothing removed, for one another session made."""
    sets = {qs["id"]: qs for qs in listed(store, dataset.corpus_hash, viewer)}
    if store is None or sid not in sets:  # no store: no set
        raise KeyError(f"no query set {sid!r} is stored for this corpus")
    if viewer.shared and sets[sid]["owner"] != viewer.owner:
        raise ValueError(f"the query set {sets[sid]['name']!r} was added by {describe(sets[sid]['owner'], viewer)}: "
                         f"only its maker can remove it")
    if not store.delete_query_set(dataset.corpus_hash, sid, viewer.owner if viewer.shared else None):
        raise KeyError(f"no query set {sid!r} is stored for this corpus")
    kept = {q for other, qs in sets.items() if other != sid for q in qs["queries"]}
    # the data set's own labels keep a query; grades made in the app on the set's queries do not (the
    # "judged" split): they stay in the store and come back with the queries if the set is added again
    labelled = {q for split, labels in dataset.qrels.items() if split != JUDGED for q in labels}
    gone = [q for q in sets[sid]["queries"] if q not in kept and q not in labelled]
    return dataset.without_queries(gone)


def publish(store: Store | None, corpus_hash: str, sid: str, viewer: Viewer) -> dict[str, Any]:
    """Make ``viewer``'s set ``sid`` visible to every session (for good); the set. ``KeyError`` for one
    it does not see, a ValueError for one another made, one published already, or one whose name a
    published set has (or one like it: checked inside the publication's transaction,
    ``Store.publish_query_set``, naming only the published one)."""
    found = next((qs for qs in listed(store, corpus_hash, viewer) if qs["id"] == sid), None)
    if store is None or found is None:  # no store: no set
        raise KeyError(f"no query set {sid!r} is stored for this corpus")
    if found["owner"] != viewer.owner:
        raise ValueError(f"only its maker can publish the query set {found['name']!r}")
    if found["published"]:
        raise ValueError(f"the query set {found['name']!r} is published already")
    try:
        if not store.publish_query_set(corpus_hash, sid, viewer.owner):
            raise KeyError(f"no query set {sid!r} of this corpus is yours to publish")
    except NameTaken as err:
        raise ValueError(f"{err}: yours stays private") from None
    return {**found, "published": True}
