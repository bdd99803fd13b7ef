"""The one reader of judgments for a view: a viewer's grades of the data set's own queries, by judge name.

Every view, export and command that reads judgments reads them here, never from ``Store.judgments``
with a filter of its own:

* **whose**: with ``viewer`` on a shared deployment, the published judges' grades and its own private
  judges' (``Store.judgments``'s viewer; ``judge_owners``); the command line (``viewer`` None) reads
  every judge's;
* **which queries**: a grade belongs to the query it was given for, and a query is its id *and* its
  text (the text is kept beside each grade): a grade counts for a query of ``dataset`` only when the
  data set has that id with that text. So another session's private query ``q1`` (a query set of its
  own, another queries file) and the grades a published judge gave it are never labels of this data
  set's ``q1``, and no export carries a query text the viewer's data set does not hold. A grade kept
  without its query's text (an older store's) counts by its id;
* **by name**: each row's ``judge`` is the judge's name (a private judge's key holds its maker:
  ``grades.private_key``). Where a viewer keeps a private judge of a name a published judge also has
  (published after the private one was made), the published one reads as ``"<name> (published)"``;
  to the command line, which reads every maker's, several makers' private judges of one name read as
  ``"<name> (<maker's owner id>)"``.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from retrieval.judging import judge_owners
from retrieval.judging.grades import judge_name

if TYPE_CHECKING:
    from retrieval.data.dataset import Dataset
    from retrieval.sharing.owners import Viewer
    from retrieval.store import StoreProtocol

PUBLISHED_TWIN = "{name} (published)"  # a published judge whose name the viewer's own private judge has
OPERATOR_TWIN = "{name} ({owner})"  # to the command line, each of several makers' private judges of one name


def names(makers: dict[str, dict[str, Any]], viewer: Viewer | None = None) -> dict[str, str]:
    """Each judge key of ``makers`` (``Store.judge_makers``) -> the name its rows read as to ``viewer``."""
    mine = ({m["name"] for m in makers.values() if m["space"] == viewer.owner}
            if viewer is not None and viewer.shared else set())
    out, taken = {}, Counter(m["name"] for m in makers.values())
    for key, made in makers.items():
        name = made["name"]
        if made["space"] == "" and name in mine:
            out[key] = PUBLISHED_TWIN.format(name=name)
        elif viewer is None and taken[name] > 1 and made["space"]:  # the operator sees every maker's
            out[key] = OPERATOR_TWIN.format(name=name, owner=made["owner"])
        else:
            out[key] = name
    return out


def judgments(store: StoreProtocol | None, dataset: Dataset, viewer: Viewer | None = None, judge: str | None = None,
              query_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """``dataset``'s judgments ``viewer`` sees (module docstring), oldest first, as ``Store.judgments``
    gives them with each ``judge`` its name; only ``judge``'s (the judge ``viewer`` means by that name:
    ``judge_owners.key_of``), only those of ``query_ids``, when given. None: ``[]``.

    Args:
        store: The store, or None.
        dataset: The data set whose queries the grades must be of (``Dataset``).
        viewer: Whose judges count (``owners.Viewer``); None: every judge's.
        judge: Only this judge's.
        query_ids: Only these queries'.

    Returns:
        One dict per judgment.
    """
    if store is None:
        return []
    corpus = dataset.corpus_hash
    makers = store.judge_makers(corpus)  # read once: the judge asked for, and every row's name
    key = judge_owners.key_of(makers, judge, viewer) if judge is not None else None
    rows = store.judgments(corpus, judge=key, query_ids=query_ids, viewer=viewer)
    queries, shown = dataset.queries, names(makers, viewer)
    out = []
    for r in rows:
        text = queries.get(r["query_id"])
        if text is None or (r["query_text"] and r["query_text"] != text):
            continue
        r["judge"] = shown.get(r["judge"]) or judge_name(r["judge"])
        out.append(r)
    return out


def judged_query_ids(store: StoreProtocol | None, dataset: Dataset, viewer: Viewer | None = None) -> list[str]:
    """The ids of ``dataset``'s queries with a grade ``viewer`` sees (as ``judgments``), sorted; each
    judged (query, text) read once, not each grade."""
    if store is None:
        return []
    queries = dataset.queries
    return sorted({q for q, text in store.judged_queries(dataset.corpus_hash, viewer)
                   if q in queries and (not text or queries[q] == text)})
