"""Who made a shared object (a snapshot, a query set), who may see it and who may change it.

Snapshots and query sets are kept in the store by corpus, for whoever opens the corpus next. Each
row records its maker (``owner``) and whether it is ``published``:

* an owner id is ``app:`` and a hash of the browser session the app saw (never the session's own
  token, which a client sends and which would let another act as it), or ``cli:`` and the OS user
  on the command line; ``""`` is a row kept before makers were recorded;
* off a shared deployment (a laptop, a team's own server) every row is published as it is made:
  everything is shared by corpus, as before makers were recorded;
* on a shared deployment (``SPACE_ID`` set, or ``app.py --shared``) a row made in one browser
  session is that session's until it publishes it; a published one is everyone's to see, and still
  only its maker may replace or remove it.

Names live in namespaces (``space``): a published row's name in the corpus's one published
namespace (``""``), a private row's in its maker's own. Two sessions may both keep a private
``release-1``; names meet only when published. A private name is unique within its maker's private
names and must not look like a published name (which its maker sees); a published name is unique
among the published. Where a viewer names an object that both it (privately) and the published
namespace hold — someone published the name after the viewer made it — its own wins (``rank``).

``Viewer`` is whoever acts (its owner id, and whether the deployment is shared); ``describe`` says
who an owner id is, as seen by a viewer, without showing any other session's id.
"""
from __future__ import annotations

import getpass
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval.safe_names import name_key

APP, CLI = "app", "cli"


def app_owner(session: str) -> str:
    """The owner id of a browser session of the app: ``app:`` and 16 hex digits of its hash
    (``app`` for a caller outside any session, the start-up load or a test)."""
    if not session:
        return APP
    return f"{APP}:{hashlib.sha256(session.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


def cli_owner() -> str:
    """The owner id of the command line: ``cli:`` and the OS user (``cli`` when it cannot be told)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name, no passwd entry
        return CLI
    return f"{CLI}:{user}" if user else CLI


@dataclass(frozen=True)
class Viewer:
    """Whoever acts on the store: its owner id, and whether the deployment is shared (then it sees
    its own rows and the published ones; else every row)."""

    owner: str
    shared: bool = False

    def sees(self, owner: str | None, published: bool | int | None) -> bool:
        return not self.shared or bool(published) or (owner or "") == self.owner

    @property
    def filter(self) -> str | None:
        """The owner id a store read is restricted to (with the published rows), None for every row."""
        return self.owner if self.shared else None

    def rank(self, owner: str | None, published: bool | int | None) -> int:
        """Which of several rows of one name this viewer means (the lowest wins): 0 its own private one,
        1 a published one, 2 another maker's private one (seen only off a shared deployment)."""
        if not published and (owner or "") == self.owner:
            return 0
        return 1 if published else 2

    def space(self, published: bool) -> str:
        """The namespace a row this viewer makes lives in: ``""`` when published, else its owner id."""
        return space(self.owner, published)


def space(owner: str | None, published: bool | int | None) -> str:
    """The namespace of a row's name: ``""`` (the published one) for a published row, else its maker's id."""
    return "" if published else (owner or "")


def free_name(name: str, taken: Iterable[object]) -> str:
    """``name`` with the first ``-2``, ``-3``, … that looks like no name of ``taken`` (``safe_names.name_key``):
    a suggestion, or a name made free, from the names the asker sees and nothing else."""
    keys = {name_key(t) for t in taken if isinstance(t, str)}
    n = 2
    while name_key(f"{name}-{n}") in keys:
        n += 1
    return f"{name}-{n}"


OPERATOR = Viewer(CLI)  # the library's default: every row (the command line, a test, a local app)


def describe(owner: str | None, viewer: Viewer | None = None) -> str:
    """Who ``owner`` is, in words, for ``viewer``: "this session", "another session of the app",
    "the command line (alice)", or "unknown" for a row kept before makers were recorded."""
    owner = owner or ""
    if viewer is not None and owner and owner == viewer.owner and owner.startswith(APP):
        return "this session"
    if owner == APP:
        return "the app"
    if owner.startswith(f"{APP}:"):
        return "another session of the app"
    if owner == CLI:
        return "the command line"
    if owner.startswith(f"{CLI}:"):
        return f"the command line ({owner[len(CLI) + 1:]})"
    return "unknown (kept before makers were recorded)"


def when(seconds: float | None) -> str:
    """A stored time as "2024-05-01 14:03" (local time), "an unknown time" for none."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "an unknown time"
