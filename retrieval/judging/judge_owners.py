"""Judges with makers: who may grade under a judge's name, and whose grades a session's views count.

A judge's grades are kept by corpus (``Store.judgments``) under the judge's key, which nobody
authenticates. So each judge has a maker (``retrieval.sharing.owners``: the browser session, or the command
line, that first stored a grade under it for the corpus; the ``judges`` table) and is published or
not:

* off a shared deployment nothing changes: every judge is published as it is made, anyone may grade
  under any name, and every view counts every judge's grades;
* on a shared deployment (``SPACE_ID``, or ``app.py --shared``) a new judge is its maker's private
  one, in its maker's own space (``judge_claims``): another session may keep a private judge of the
  same name — two judges, two sets of grades, neither told of the other. A judge's grades count only
  in its maker's views until it is published (``publish``), then in everyone's, and only its maker
  grades under a published name. ``seen.judgments`` is the one reader of judgments for a viewer: every
  view reads through it with the session's viewer (the command line passes none and reads every judge's).

The name is taken in the transaction that stores the judge's first grades (``Store.put_judgments``
with ``claim``): ``check`` only says early what that write would refuse.

A judge kept before makers were recorded (an existing store), or by the command line, has grades
everyone counts, and no session of a shared deployment may add to them.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from retrieval.judging.judge_claims import Claim, JudgeTaken, whose
from retrieval.sharing.owners import Viewer

if TYPE_CHECKING:
    from retrieval.store import StoreProtocol

__all__ = ["JudgeTaken", "check", "claim", "key_of", "own", "publish", "whose"]


def claim(viewer: Viewer | None, names: Iterable[str]) -> Claim | None:
    """What a write of grades under ``names`` claims for ``viewer`` (``Store.put_judgments``'s ``claim``):
    None for the command line or the library (``viewer`` None: grades kept under the names as given)."""
    if viewer is None:
        return None
    return Claim(viewer.owner, viewer.shared, tuple(sorted(set(names))))


def check(store: StoreProtocol, corpus: str, name: str, viewer: Viewer | None) -> str:
    """The key ``viewer``'s grades under ``name`` would be kept under, claiming nothing; on a shared
    deployment ``JudgeTaken`` for another's published judge or past the maker's limit of judges, and a
    ``ValueError`` for a look-alike of a judge ``viewer`` sees (the write checks again: ``judge_claims``)."""
    made = claim(viewer, [name])
    if made is None:
        return name
    return store.resolve_judges(corpus, made)[name]


def key_of(makers: dict[str, dict[str, Any]], name: str, viewer: Viewer | None) -> str:
    """The key of the judge ``viewer`` means by ``name`` among the corpus's judges (``Store.judge_makers``):
    its own private judge of that name where it keeps one, else the published one (the name itself)."""
    if viewer is None or not viewer.shared:
        return name
    return next((key for key, made in makers.items() if made["space"] == viewer.owner and made["name"] == name),
                name)


def publish(store: StoreProtocol, corpus: str, name: str, viewer: Viewer) -> None:
    """Make ``viewer``'s judge ``name`` count in every session's views. One line (``ValueError``,
    ``KeyError`` for a judge the viewer does not keep), nothing changed: off a shared deployment,
    a judge with no grades yet, one published already, a published judge that looks like it."""
    if not viewer.shared:
        raise ValueError("every judge's grades count for everyone on this deployment already: nothing to publish")
    mine = {m["name"]: m for m in store.judge_makers(corpus).values() if m["owner"] == viewer.owner}
    if name not in mine:
        raise KeyError(f"no judge {name!r} of this session has graded this corpus")
    if mine[name]["published"] or not store.publish_judge(corpus, name, viewer.owner):
        raise ValueError(f"the judge {name!r} is published already: its grades count for everyone")


def own(store: StoreProtocol, corpus: str, viewer: Viewer) -> list[dict[str, Any]]:
    """``viewer``'s judges of the corpus (``judge``: the name, ``published``), by name."""
    return sorted(({"judge": m["name"], "published": m["published"]} for m in store.judge_makers(corpus).values()
                   if m["owner"] == viewer.owner), key=lambda r: r["judge"])
