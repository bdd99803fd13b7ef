"""Judges with makers: who may grade under a judge's name, and whose grades a session's views count.

A judge's grades are kept by corpus (``Store.judgments``) under the judge's name, which nobody
authenticates. So each name has a maker (``retrieval.sharing.owners``: the browser session, or the command
line, that first stored a grade under it for the corpus; the ``judges`` table) and is published or
not:

* off a shared deployment nothing changes: every judge is published as it is made, anyone may grade
  under any name, and every view counts every judge's grades;
* on a shared deployment (``SPACE_ID``, or ``app.py --shared``) a name is its maker's: another
  session that judges or imports under it is refused in one line and nothing is stored; and a
  judge's grades count only in its maker's views until it is published (``publish``), then in
  everyone's. ``Store.judgments(..., viewer=...)`` is the one place that leaves the others out:
  every view that reads judgments passes the session's viewer (the command line passes none and
  reads every judge's).

A judge kept before makers were recorded (an existing store), or by the command line, has grades
everyone counts, and no session of a shared deployment may add to them.
"""
from __future__ import annotations

from collections.abc import Iterable

from retrieval.sharing.owners import APP, CLI, Viewer


class JudgeTaken(ValueError):
    """A judge's name that is another's (on a shared deployment): nothing was stored."""


def whose(owner: str) -> str:
    """Whose a judge is, as the refusal says it to another session: never the maker's id."""
    if owner == APP or owner.startswith(f"{APP}:"):
        return "is another session's"
    if owner == CLI or owner.startswith(f"{CLI}:"):
        return "is the command line's"
    return "was kept before judges had makers and is no session's to add to"


def _refused(name: str, owner: str) -> JudgeTaken:
    return JudgeTaken(f"the judge {name!r} {whose(owner)}; choose another name")


def claim(store, corpus: str, names: Iterable[str], viewer: Viewer | None) -> tuple[str, ...]:
    """Make ``viewer`` the maker of each judge of ``names`` that has none (published unless the
    deployment is shared) before its grades are stored; the names it made ``viewer``'s (to
    ``release`` if the grades are not stored after all). On a shared deployment ``JudgeTaken`` when
    any is another's, and then none is claimed. ``viewer`` None (the command line, the library):
    nothing recorded, nothing refused."""
    if viewer is None:
        return ()
    done = store.claim_judges(corpus, names, viewer.owner, published=not viewer.shared, refuse=viewer.shared)
    if viewer.shared and done.taken:
        name = min(done.taken)
        raise _refused(name, done.taken[name])
    return done.new


def check(store, corpus: str, name: str, viewer: Viewer | None) -> None:
    """``JudgeTaken`` when, on a shared deployment, ``name`` is a judge another made (nothing
    claimed: a judge's name becomes a session's with its first grade, ``claim``)."""
    if viewer is None or not viewer.shared:
        return
    maker = store.judge_makers(corpus).get(name)
    if maker is not None:
        if maker["owner"] != viewer.owner:
            raise _refused(name, maker["owner"])
    elif name in store.judges(corpus):  # grades kept without a maker
        raise _refused(name, "")


def release(store, corpus: str, names: Iterable[str], viewer: Viewer | None) -> None:
    """Undo ``claim`` for the names whose grades were not stored after all (none kept under them)."""
    names = list(names)
    if viewer is not None and names:
        store.release_judges(corpus, names, viewer.owner)


def publish(store, corpus: str, name: str, viewer: Viewer) -> None:
    """Make ``viewer``'s judge ``name`` count in every session's views. One line (``ValueError``,
    ``KeyError`` for a judge the viewer does not know), nothing changed: off a shared deployment,
    a judge with no grades yet, another's, one published already."""
    if not viewer.shared:
        raise ValueError("every judge's grades count for everyone on this deployment already: nothing to publish")
    maker = store.judge_makers(corpus).get(name)
    if maker is None or (maker["owner"] != viewer.owner and not maker["published"]):
        raise KeyError(f"no judge {name!r} of this session has graded this corpus")
    if maker["owner"] != viewer.owner:
        raise ValueError(f"the judge {name!r} {whose(maker['owner'])}: only its maker publishes it")
    if maker["published"] or not store.publish_judge(corpus, name, viewer.owner):
        raise ValueError(f"the judge {name!r} is published already: its grades count for everyone")


def own(store, corpus: str, viewer: Viewer) -> list[dict]:
    """``viewer``'s judges of the corpus (``judge``, ``published``), by name."""
    return [{"judge": j, "published": m["published"]} for j, m in store.judge_makers(corpus).items()
            if m["owner"] == viewer.owner]
