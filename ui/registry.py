"""The workspaces the app has open, shared by every session; each session holds the key of its own
(a ``gr.State``), so one user's upload never changes another's view, and no session can close the
workspace another is using.

Workspaces are shared by content: two sessions that open the same data set with the same encoder
(and the same imported runs) get the same key, and one workspace. The registry counts which
sessions hold which key (``hold``, when a session switches; ``release``, when its page closes) and
closes a workspace only when nobody uses it: no live session holds it, it is not the start page's,
and it is the least recently used such one. A session counts as live while it holds a key it used
within ``Limits.idle_s`` (an API client never says it left; a browser tab does, on unload).

What the registry may hold is bounded by a memory budget (``Limits.budget_bytes``; every shared part
counted once, ``retrieval.sharing.memory_budget``) and a number of workspaces; past either, the least recently
used unheld workspaces are closed, and when every one is in use, opening another is refused
(``ServerBusy``) instead of closing someone's. Per session, ``Limits`` bounds the imported runs a
workspace carries, the query sets added to one data set, and the workspaces one session keeps open
(past it, its own oldest unused one is closed first, so one session cannot flush the others').
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import gradio as gr

from retrieval import Store, Workspace, numbers
from retrieval.data.dataset import Dataset
from retrieval.data.language import corpus_tokenizer
from retrieval.index.recent import Recent
from retrieval.judging.judgments import PREFER
from retrieval.judging.labels import JudgedCounts, with_stored_judgments
from retrieval.progress import Progress
from retrieval.sharing import browser_tokens
from retrieval.sharing import memory_budget as footprint
from retrieval.sharing.model_policy import ModelPolicy
from retrieval.sharing.owners import Viewer, app_owner
from training.job import JobQueue
from ui.notify import refuse

FOREGROUND_S = 15.0  # a load waits this long for its encoding; a longer one goes on in the background
ANONYMOUS = ""  # the session of a caller that gave none (tests, the start-up load)
ASKED_KEPT = 1024  # sessions whose last query asked for is remembered (the latest); others' results are not refreshed
LABELLED_KEPT = 4  # labelled copies of one workspace kept (sessions counting other judges, label versions)
IDENTITIES_KEPT = 65_536  # sessions whose browser is remembered (the latest): older ones are their own maker again
KEPT_KEYS = 1024  # workspace keys whose kept data set is remembered (what a reload reopens: ``kept_of``)


def budget_mb(value: object, what: str = "the memory budget (MiB)") -> float:
    """A memory budget in MiB: a number by the one number grammar (``retrieval.numbers``) above 0
    and at most 2^40 MiB; a ValueError in one line otherwise."""
    mb = numbers.number(value, what)
    if not 0 < mb <= 2**40:
        raise ValueError(f"{what} is a number of MiB above 0 and at most {2**40:,}, not {numbers.shown(value)}")
    return mb


def _budget_from_env() -> int:
    """``$RANKSCOPE_MEMORY_BUDGET_MB`` in bytes, else the default (``Limits.budget_bytes``)."""
    value = os.environ.get("RANKSCOPE_MEMORY_BUDGET_MB")
    return int(budget_mb(value, "$RANKSCOPE_MEMORY_BUDGET_MB") * 2**20) if value else 4 * 2**30


@dataclass(frozen=True)
class Limits:
    """What the registry holds for everyone, and what one session may take of it."""

    budget_bytes: int = field(default_factory=_budget_from_env)  # every open workspace, shared parts once
    workspaces: int = 32  # open workspaces in all
    idle_s: float = 2 * 3600.0  # a session unused this long no longer protects its workspace
    runs: int = 8  # imported runs in one session's workspace
    query_sets: int = 20  # query sets (files or typed batches) added to one data set by one session
    session_workspaces: int = 4  # workspaces one session keeps open (its own oldest unused closed first)


class SessionLimit(ValueError):
    """A session asked for more than ``Limits`` lets one session have."""


class ServerBusy(ValueError):
    """Opening another workspace would pass the memory budget, and every open one is in use."""


@dataclass
class _Entry:
    ws: Workspace
    opener: str  # the session that opened it
    used: float  # monotonic time of its last use
    # its labelled copies (``Registry.labelled``): (whose judges, which label wins, judgments' version) -> copy
    labelled: OrderedDict[tuple, tuple[Workspace, JudgedCounts]] = field(default_factory=OrderedDict)


@dataclass
class _Session:
    key: str = ""  # the workspace it holds
    seen: float = 0.0
    query_sets: int = 0  # added to the data set it holds (since it last loaded one)
    prefer: str = "imported"  # where the data's own label and a judgment label one pair, which wins


class Registry:
    """Opened workspaces, shared by content key, closed only when nobody uses them."""

    def __init__(self, store: Store, model: str | None, language: str = "auto", precision: str = "auto",
                 foreground_s: float | None = FOREGROUND_S, engine=None, limits: Limits | None = None,
                 policy: ModelPolicy | None = None, shared: bool = False):
        self.store, self.model, self.language = store, model, language
        self.shared = shared  # a shared deployment: query sets and snapshots are their session's until published
        self.engine = engine  # retrieval.index.engines: None is the in-process one
        self.precision, self.foreground_s = precision, foreground_s
        self.limits = limits or Limits()
        self.policy = policy or ModelPolicy.create(model if isinstance(model, str) else None, store.models_dir)
        self._items: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._sessions: dict[str, _Session] = {}
        self._asked: Recent[str, str] = Recent(ASKED_KEPT)  # each session's last query asked for: ``ask``
        self._identities: Recent[str, str] = Recent(IDENTITIES_KEPT)  # session -> its browser's maker: ``identify``
        self._kept: Recent[str, str] = Recent(KEPT_KEYS)  # workspace key -> the kept data set it holds
        self._key: bytes | None = None  # the store's key for browser tokens: ``_token_key``
        self._pinned: set[str] = set()
        self._lock = threading.RLock()

    # ---- opening ---------------------------------------------------------------------------
    def open(self, dataset: Dataset, progress: Progress | None = None, model: str | None = None,
             session: str = ANONYMOUS, budgeted: bool = True) -> str:
        """Open ``dataset`` with ``model`` (default: the app's encoder; a client's choice must have
        passed ``allowed_model``) and BM25 (stemmer and stopwords of the corpus's language,
        detected or the app's ``language`` setting) built, and the dense index built in the
        background: the call waits for it up to ``foreground_s`` seconds (reporting progress)
        unless it will clearly take longer, then returns while encoding goes on; returns the key.
        ``ServerBusy`` when there is no room for it and every open workspace is in use (unless not
        ``budgeted``: the operator's own start-up data set)."""
        model = model or self.model
        key = f"{dataset.content_hash}:{model or ''}"
        with self._lock:
            entry = self._items.get(key)
            same_corpus = next((e.ws for k, e in reversed(self._items.items())
                                if k.endswith(f":{model or ''}") and e.ws.dataset.corpus_hash == dataset.corpus_hash),
                               None)
            ws = entry.ws if entry is not None else None
        if ws is None and same_corpus is not None:  # queries or labels added: the indexes are reused
            ws = same_corpus.with_dataset(dataset)
        if ws is None:
            if budgeted:
                self._make_room(footprint.estimate_new(dataset, self._dim(model)))
            tokenizer = corpus_tokenizer([d.full_text for d in dataset.docs.values()], self.language)
            ws = Workspace(dataset, self.store, model=model, tokenizer=tokenizer, precision=self.precision,
                           engine=self.engine)
        ws.build_lexical(progress)  # now, so the first search is fast (loaded into the engine if it is not)
        ws.bm25  # noqa: B018 - and the explanations' statistics (the same index in-process)
        ws.start_builds()  # dense, learned sparse, any system's own: each column fills when its index is done
        self._wait(ws, progress)
        self._keep(key, ws, session)
        return key

    def _dim(self, model) -> int:
        """The vector size of ``model``'s encoder when a workspace has it loaded, else MiniLM's 384."""
        with self._lock:
            for key, entry in self._items.items():
                encoder = getattr(entry.ws, "_encoder", None)
                if encoder is not None and key.endswith(f":{model or ''}"):
                    return encoder.dim
        return 384

    def pin(self, key: str) -> None:
        """Never close ``key`` (the workspace every new page starts on)."""
        with self._lock:
            self._pinned.add(key)

    def _wait(self, ws: Workspace, progress: Progress | None) -> None:
        """Wait for ``ws``'s dense build up to ``foreground_s`` seconds, or less once the rate so far
        says it will not be done by then."""
        if self.foreground_s is None:
            ws.wait_dense(None, progress)
            return
        deadline = time.monotonic() + self.foreground_s
        while not ws.wait_dense(min(1.0, max(0.0, deadline - time.monotonic())), progress):
            left = deadline - time.monotonic()
            status = ws.encoding
            if left <= 0 or (status is not None and (status.seconds_left or 0.0) > left):
                return

    def add_run(self, key: str, imported, session: str = ANONYMOUS) -> str:
        """The session's workspace ``key`` with an imported run added, under a key of its own (the
        workspace other sessions share keeps its systems); returns that key. The run is its maker's
        (``Registry.viewer``): the key names the maker, so two sessions importing runs under one
        name never share a workspace, and its cached lists are listed only to it on a shared
        deployment (``Workspace.add_run``). ``SessionLimit`` past ``Limits.runs`` runs in one workspace."""
        ws = self.get(key)
        if len(ws.imported) >= self.limits.runs:
            raise SessionLimit(f"this workspace already holds {len(ws.imported)} imported runs, the most one session "
                               f"may have side by side; load the data set again to start over without them")
        owner = self.viewer(session).owner
        ws = ws.with_run(imported, owner)
        new_key = f"{key}+{imported.name}:{imported.content_hash[:12]}@{owner}"
        self._keep(new_key, ws, session)
        return new_key

    def carry_runs(self, key: str, before: Workspace, session: str = ANONYMOUS) -> str:
        """``key``'s workspace with the imported runs of ``before`` (the session's previous one) added
        again: a session keeps its runs when it moves to other queries, labels or an encoder."""
        for imported in before.imported.values():
            key = self.add_run(key, imported, session)
        return key

    def viewer(self, session: str) -> Viewer:
        """Who ``session`` is to the store's shared objects (``retrieval.sharing.owners``): its owner id
        (its browser's, once the page said who it is: ``identify``; else the session's own), and
        whether this deployment is shared."""
        with self._lock:
            owner = self._identities.get(session)
        return Viewer(owner or app_owner(session), self.shared)

    def identify(self, session: str, token: object) -> str:
        """``session`` is the browser holding ``token`` (``retrieval.sharing.browser_tokens``): its maker
        from now on, for every page of that browser. A token the app did not hand out (forged,
        altered, another store's, none) is refused and a new one made, naming nothing yet. Returns the
        token the browser keeps. Remembered for the ``IDENTITIES_KEPT`` sessions that said so last."""
        key = self._token_key()
        token_id = browser_tokens.verify(key, token)
        if token_id is None:
            token = browser_tokens.mint(key)
            token_id = browser_tokens.verify(key, token)
        assert token_id is not None  # just made
        with self._lock:
            self._identities.put(session, browser_tokens.owner_of(token_id))
        return str(token)

    @property
    def page_secret(self) -> str:
        """What the page's browser state is obscured with (``browser_tokens.page_secret``)."""
        return browser_tokens.page_secret(self._token_key())

    def _token_key(self) -> bytes:
        """The store's key for browser tokens (``Store.secret``), read once."""
        with self._lock:
            if self._key is None:
                self._key = self.store.secret(browser_tokens.KEY)
            return self._key

    def note_kept(self, key: str, kept_id: str | None) -> None:
        """Workspace ``key`` holds the kept data set ``kept_id`` (``retrieval.data.kept``), or none."""
        with self._lock:
            self._kept.put(key, kept_id or "")

    def kept_of(self, key: str) -> str:
        """The kept data set workspace ``key`` was opened from ("" for none, or not known here)."""
        with self._lock:
            return self._kept.get(key) or ""

    def allowed_model(self, choice: str | None) -> str | None:
        """The encoder a client's ``choice`` names, if the model policy offers it ("" or None: the
        app's own), else ``ModelRefused`` (``retrieval.sharing.model_policy``)."""
        return self.policy.check(choice)

    def count_query_set(self, session: str) -> None:
        """One more query set added by ``session`` to its data set; ``SessionLimit`` past
        ``Limits.query_sets``."""
        with self._lock:
            state = self._sessions.setdefault(session, _Session())
            if state.query_sets >= self.limits.query_sets:
                raise SessionLimit(f"{state.query_sets} query sets were added to this data set, the most one session "
                                   f"may add; load the data set again with all its queries in one file")
            state.query_sets += 1

    # ---- who uses what -----------------------------------------------------------------------
    def hold(self, session: str, key: str, fresh: bool = False) -> None:
        """``session`` now shows ``key`` (and no longer its previous workspace); ``fresh``: a data
        set was loaded anew, so its query-set count starts again."""
        with self._lock:
            state = self._sessions.setdefault(session, _Session())
            if state.key != key and session in self._asked:  # another workspace: its Search tab shows no results
                self._asked.put(session, "")
            state.key, state.seen = key, time.monotonic()
            if fresh:
                state.query_sets = 0
            if key in self._items:
                self._items[key].used = state.seen
            self._trim_session(session, self._in_use(state.seen))

    def holding(self, session: str) -> str | None:
        """The key of the workspace ``session`` shows now (None: it has not loaded one yet)."""
        with self._lock:
            state = self._sessions.get(session)
            return (state.key or None) if state is not None else None

    def ask(self, session: str, query: str) -> None:
        """``session`` asked for ``query``'s results (a search, a labelled query picked): the last one
        asked is what its page shows once they arrive. Kept for the ``ASKED_KEPT`` sessions that
        asked last (a typed query is at most ``ui.data.QUERY_CHARS`` characters)."""
        with self._lock:
            self._asked.put(session, query)

    def asked(self, session: str) -> str:
        """The query ``session`` last asked for in the workspace it shows ("" for none): a refresh of
        the results on show (``ask``) reruns it, and keeps its output only where it is still the one."""
        with self._lock:
            return self._asked.get(session) or ""

    def release(self, session: str) -> None:
        """``session`` has gone (its page closed): its workspace is no longer protected by it."""
        with self._lock:
            self._sessions.pop(session, None)
            self._identities.pop(session)

    # ---- labels: the data set's own and the store's judgments ----------------------------------
    def labelled(self, key: str, session: str = ANONYMOUS) -> Workspace:
        """Workspace ``key`` with the judgments ``session`` counts as labels, as they stand now
        (``retrieval.judging.labels.with_stored_judgments``: on a shared deployment its own judges'
        and the published ones), the data's own label winning a pair both have unless the session
        chose otherwise (``prefer``). What every view that reads labels evaluates with: a grade
        stored by any session or process is a label at the next view, with no reload. Looked up by
        the judgments' version (``Store.judgments_version``, one indexed query); a new version makes
        a copy of the workspace (``Workspace.with_labels``: the indexes and cached runs shared)."""
        return self._labels(key, session)[0]

    def judged(self, key: str, session: str = ANONYMOUS) -> JudgedCounts:
        """How many judgments ``labelled`` took as labels of workspace ``key`` for ``session``."""
        return self._labels(key, session)[1]

    def _labels(self, key: str, session: str) -> tuple[Workspace, JudgedCounts]:
        base = self.get(key)
        viewer, prefer = self.viewer(session), self.prefer(session)
        tag = (viewer.filter, prefer, self.store.judgments_version(base.dataset.corpus_hash, viewer))
        with self._lock:
            entry = self._items.get(key)
            if entry is not None and (found := entry.labelled.get(tag)) is not None:
                entry.labelled.move_to_end(tag)
                return found
        dataset, counts = with_stored_judgments(base.dataset, self.store, viewer, prefer)
        made = (base if dataset is base.dataset else base.with_labels(dataset), counts)
        with self._lock:
            entry = self._items.get(key)
            if entry is not None and entry.ws is base:
                made = entry.labelled.setdefault(tag, made)
                while len(entry.labelled) > LABELLED_KEPT:
                    entry.labelled.popitem(last=False)
        return made

    def prefer(self, session: str) -> str:
        """Which label wins a pair both the data and a judgment label, for ``session``: "imported"
        (the data's own, by default) or "judgments"."""
        with self._lock:
            state = self._sessions.get(session)
            return state.prefer if state is not None else "imported"

    def set_prefer(self, session: str, prefer: str) -> None:
        """``session``'s choice of ``prefer``; a ValueError for anything but the two."""
        if prefer not in PREFER:
            raise ValueError(f"keep the data's own labels or the judgments ({', '.join(PREFER)}), not "
                             f"{str(prefer)[:40]!r}")
        with self._lock:
            state = self._sessions.setdefault(session, _Session())
            state.prefer, state.seen = prefer, time.monotonic()

    def get(self, key: str) -> Workspace:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                entry.used = time.monotonic()
                self._items.move_to_end(key)
        if entry is None:
            raise refuse("this data set was closed to free memory; load it again on the Data tab")
        return entry.ws

    def _in_use(self, now: float) -> set[str]:
        """Keys no eviction may close: pinned, or held by a session that used them lately. Sessions
        idle past ``Limits.idle_s`` (API clients never say they left) are forgotten here."""
        idle = self.limits.idle_s

        def last_use(state: _Session) -> float:
            entry = self._items.get(state.key)
            return max(state.seen, entry.used if entry is not None else 0.0)

        for name in [n for n, state in self._sessions.items() if now - last_use(state) >= idle]:
            del self._sessions[name]
        return {state.key for state in self._sessions.values() if state.key in self._items} | self._pinned

    def _keep(self, key: str, ws: Workspace, session: str) -> None:
        """Hold ``ws`` under ``key`` as the most recently used (its opener ``session``), then close
        what the limits say must go."""
        with self._lock:
            now = time.monotonic()
            entry = self._items.get(key)
            if entry is None:
                self._items[key] = _Entry(ws, session, now)
            else:
                entry.used = now
            self._items.move_to_end(key)
            self._sessions.setdefault(session, _Session()).seen = now
            keep = self._in_use(now) | {key}
            self._trim_session(session, keep)
            self._trim(keep, 0)

    def _trim_session(self, session: str, keep: set[str]) -> None:
        """Close ``session``'s own least recently used workspaces outside ``keep`` while it has
        more than ``Limits.session_workspaces`` open (the anonymous caller has no share)."""
        if session == ANONYMOUS:
            return
        mine = [k for k, e in self._items.items() if e.opener == session]
        excess = len(mine) - self.limits.session_workspaces
        for old in [k for k in mine if k not in keep][:max(0, excess)]:
            self._close(old)

    def _make_room(self, needed: int) -> None:
        """Close unused workspaces until ``needed`` more bytes fit the budget (and one more the
        count); ``ServerBusy`` when even closing every unused one would not make room."""
        if needed > self.limits.budget_bytes:
            raise ServerBusy(f"this corpus needs about {needed / 2**20:,.0f} MiB of memory, more than the server's "
                             f"budget for all data sets ({self.limits.budget_bytes / 2**20:,.0f} MiB)")
        with self._lock:
            now = time.monotonic()
            if not self._trim(self._in_use(now), needed, extra=1):
                raise ServerBusy(
                    f"the server holds as many data sets as its memory budget allows "
                    f"({self.limits.budget_bytes / 2**30:.1f} GiB), all in use by open sessions; try again later, or "
                    f"with a smaller corpus")

    def _trim(self, keep: set[str], needed: int, extra: int = 0) -> bool:
        """Close the least recently used workspaces outside ``keep`` while the held bytes plus
        ``needed`` pass the budget or the count plus ``extra`` passes ``Limits.workspaces``; True
        when what is left fits."""
        def fits() -> bool:
            held = footprint.total({k: footprint.parts(e.ws) for k, e in self._items.items()})
            return held + needed <= self.limits.budget_bytes and len(self._items) + extra <= self.limits.workspaces

        while not fits():
            victim = next((k for k in self._items if k not in keep), None)
            if victim is None:
                return False
            self._close(victim)
        return True

    def _close(self, key: str) -> None:
        """Drop workspace ``key`` and stop the background builds no open workspace shares: a closed
        workspace's encoding would go on holding cores and memory the budget no longer counts."""
        closed = self._items.pop(key).ws
        shared = {id(b) for e in self._items.values() for b in e.ws.builds.values()}
        for build in closed.builds.values():
            if id(build) not in shared:
                build.stop(timeout=0)  # told, not joined: the registry's lock is held

    def memory(self) -> dict:
        """What the registry holds: workspaces, sessions holding one, estimated bytes, the budget."""
        with self._lock:
            held = footprint.total({k: footprint.parts(e.ws) for k, e in self._items.items()})
            return {"workspaces": len(self._items), "sessions": len(self._sessions), "bytes": held,
                    "budget_bytes": self.limits.budget_bytes}


def session_of(request: gr.Request | None) -> str:
    """The Gradio session a request comes from (``ANONYMOUS`` outside a request, e.g. in tests)."""
    return getattr(request, "session_hash", None) or ANONYMOUS


@dataclass
class Context:
    """What every view's ``build`` needs: the registry, the training queue, the session's key
    (a ``gr.State``) and the workspace the page opens on."""

    registry: Registry
    jobs: JobQueue
    key: gr.State
    start: Workspace

    def workspace(self, key: str) -> Workspace:
        """The session's workspace ``key`` as opened: its data's own labels (the Judge view pools and
        queues over it)."""
        return self.registry.get(key)

    def labelled(self, key: str, request: gr.Request | None) -> Workspace:
        """The session's workspace ``key`` with the judgments it counts as labels, as they stand now
        (``Registry.labelled``): what every view that reads labels evaluates with."""
        return self.registry.labelled(key, session_of(request))

    def labelled_split(self, key: str, split: str | None, request: gr.Request | None) -> tuple[Workspace, str | None]:
        """``labelled``, and the split asked; none picked (a page whose split picker was filled before
        the first grade) is the labels' default split, so a view never says "no labels" while
        judgments are labels."""
        ws = self.labelled(key, request)
        return ws, split or ws.dataset.default_split()

    def allowed_model(self, choice: str | None) -> str:
        """A client's choice of a fine-tuned (or other) encoder to compare, "" for none; one the
        model policy does not offer is refused in one line (``Registry.allowed_model``)."""
        if not (choice or "").strip():
            return ""
        try:
            return self.registry.allowed_model(choice) or ""
        except ValueError as err:
            raise refuse(err) from err
