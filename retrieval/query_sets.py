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
"""
from __future__ import annotations

from .dataset import Dataset
from .errors import LoadReport
from .labels import JUDGED
from .names import check_new_name, display_name
from .store import Store, cache_key


def set_id(queries: dict[str, str]) -> str:
    """A set's id: a hash of its (id, text) pairs, so adding the same queries again is one set."""
    return cache_key(queries=sorted(queries.items()))[:16]


def keep(store: Store | None, before: Dataset, after: Dataset, name: str) -> str | None:
    """Store the queries ``after`` has and ``before`` did not, as one set named ``name``; its id, or
    None when nothing was added (or there is no store). A ValueError in one line, nothing stored, for a
    name (made from file names, so made plain by ``names.display_name`` rather than refused) that looks
    like another set's without being it (``names.check_new_name``)."""
    added = {q: t for q, t in after.queries.items() if q not in before.queries}
    if store is None or not added:
        return None
    sid = set_id(added)
    name = check_new_name(display_name(name, "queries"), "query set's name",  # made from file names: cut, not refused
                          [qs["name"] for qs in listed(store, after.corpus_hash) if qs["id"] != sid])
    store.put_query_set(after.corpus_hash, sid, name, added)
    return sid


def listed(store: Store | None, corpus_hash: str) -> list[dict]:
    """The corpus's stored sets (``id, name, n, created, queries``), oldest first."""
    return store.query_sets(corpus_hash) if store is not None else []


def restore(store: Store | None, dataset: Dataset) -> Dataset:
    """``dataset`` with the queries of every set stored for its corpus added (the same object when
    there is none to add); an id that a set gives another text than the data set has is skipped and
    named in a warning."""
    sets = listed(store, dataset.corpus_hash)
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


def drop(store: Store | None, dataset: Dataset, sid: str) -> Dataset:
    """Forget the stored set ``sid`` of the data set's corpus; the data set without the queries only
    that set had (a query the data set's own labels label, or one another set keeps, stays; one judged
    in the app goes, its grades kept in the store). ``KeyError`` for an unknown set."""
    sets = {qs["id"]: qs for qs in listed(store, dataset.corpus_hash)}
    if sid not in sets:
        raise KeyError(f"no query set {sid!r} is stored for this corpus")
    store.delete_query_set(dataset.corpus_hash, sid)
    kept = {q for other, qs in sets.items() if other != sid for q in qs["queries"]}
    # the data set's own labels keep a query; grades made in the app on the set's queries do not (the
    # "judged" split): they stay in the store and come back with the queries if the set is added again
    labelled = {q for split, labels in dataset.qrels.items() if split != JUDGED for q in labels}
    gone = [q for q in sets[sid]["queries"] if q not in kept and q not in labelled]
    return dataset.without_queries(gone)
