"""Snapshots of a data set's runs, a baseline among them, and the regression check against it.

A snapshot is a named, timestamped set of runs of one labelled split — each system's whole ranked
lists, kept in the store with the snapshot so that no cache eviction or re-run can change it —
with what they depend on: the data set's content hash, each system's parameters (encoder
fingerprint, BM25 settings, λ, …: ``Workspace.system_params``), the hash of the split's labels,
and a note. Snapshots are kept per corpus (``Dataset.corpus_hash``: adding queries or labels does
not lose them); one per corpus may be marked its baseline.

Snapshots are shared objects with makers (``retrieval.sharing.owners``). On a shared deployment a
snapshot is its session's until published; its name lives in its maker's namespace, so two sessions
may both keep a private ``release-1``, and names meet only when published (``owners.space``). A
name is never reused silently — saving under a name the maker sees (its own, or a published one)
is refused, with a free name suggested from those alone, unless its maker asks to replace it
(``replace``), and never the baseline's; a new name that looks like one the maker sees
(``safe_names.check_new_name``: confusable letters, case, width) is refused; another session's
private snapshot is never named, counted in a suggestion or held against a name. The store keeps
each rule inside the write's transaction (``Store.put_snapshot``: a unique index of look-alike
keys per namespace), so two writers cannot both pass. Marking the baseline is an act of its own,
kept with who did it and when, every move logged (``baseline_moves``); only a published snapshot
can be the baseline (which is everyone's). What one maker may keep is bounded: ``NOTE_CHARS``
characters of note, ``MAX_SNAPSHOTS`` snapshots per corpus each and ``MAX_CORPUS_SNAPSHOTS`` in all,
counted inside the write's transaction too.

``check`` holds the systems as they are now against a snapshot, query by query, on the labels of
now (the baseline's lists are re-evaluated on them, so a labels change is never mixed into the
difference; it is reported as ``labels_changed``): per system the paired difference now −
baseline in the metric with its permutation p-value and the interval the same test gives
(``measures.compare``: the interval excludes 0 exactly when p < 0.05). A system has regressed when
its mean dropped by more than ``max_drop`` and the drop is significant (p < 0.05); a drop by more
than ``max_drop`` that is not significant is a third state, ``dropped``: these queries cannot tell
a real drop from chance, so the gate neither fails nor passes it silently. The queries that moved
most come with their text and both lists.

Where the split's labels were judged in the app (``coverage.from_judging``: a pool of the systems'
top k, judged), each system's judged@10 on the compared queries is measured on the baseline's run
and on today's (``coverage.coverage``). A system whose top 10 today falls below
``coverage.MIN_JUDGED_AT_10`` is in a fourth state, ``unjudged``: its new documents nobody judged
count as not relevant, so a drop may be the pool's, not the system's. It is neither passed nor
called regressed; the report says how many of its top-10 documents to judge
(``Coverage.to_threshold``). A data set's own labels are never gated. The baseline's judged@10 is
reported beside, not gated: an under-judged baseline understates its own mean, which can hide a
drop but not invent one. A data set's own labels that list non-relevant documents are a judged pool
too: where they cover the baseline's top 10 and today's differently beyond noise (``coverage.skew``,
nDCG@10 checks), the two are compared on nDCG'@10, which leaves unjudged documents out, and the
report says which run the labels favour (``SystemCheck.favoured``), judged@10 beside.
"""
from __future__ import annotations

import json
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from retrieval import numbers
from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.intervals import Interval
from retrieval.evaluation.measures import Comparison, compare, evaluate_run, positive_qrels
from retrieval.evaluation.metrics import BPREF, COMPARE_METRICS, NDCG_CONDENSED, PRIMARY, SIGNIFICANCE_LEVEL
from retrieval.judging import seen
from retrieval.judging.coverage import Coverage, condensed_ndcg, coverages, from_judging, skew
from retrieval.judging.judgments import rbo
from retrieval.safe_names import check_name, check_new_name
from retrieval.sharing.owners import OPERATOR, Viewer, describe, free_name, when
from retrieval.store import NameTaken, Store, TooMany, cache_key
from retrieval.stored_rows import left_out
from retrieval.workspace import Workspace

MAX_DROP = 0.01  # the default: a drop larger than this, and significant, is a regression
SHOWN_QUERIES = 10  # the queries that moved most, per system, in a check's report
NOTE_CHARS = 2_000  # characters in a snapshot's note (a 5 MB one made the Runs tab take 21 s for everyone)
MAX_SNAPSHOTS = 50  # snapshots one maker keeps of one corpus
MAX_CORPUS_SNAPSHOTS = 500  # snapshots of one corpus, every maker's together


def gate_metric(metric: str) -> str:
    """``metric`` when the check can compare runs on it: a ranked-list metric ``rank_metrics`` computes
    (``ndcg``, ``mrr``, ``recall``, ``precision``/``p``, ``map``, ``hits``, ``hit_rate``, ``ndcg_burges``)
    with a cutoff of 1 or more, ``map`` (the whole list), ``bpref`` or nDCG'@10; else a ValueError naming
    it. (A cutoff of 0 would read the whole list under another name; judged@k measures the labels, not
    the system.)"""
    from retrieval.evaluation.rank_metrics import parse

    parsed = parse(metric) if isinstance(metric, str) else None
    if metric in (BPREF, NDCG_CONDENSED, "map") or (parsed is not None and parsed[1] > 0):
        return metric
    raise ValueError(f"--metric {numbers.shown(metric)} is not a metric the check can compare on: a ranked-list "
                     f"metric with a cutoff of 1 or more, map, bpref or ndcg'@10 (such as "
                     f"{', '.join(COMPARE_METRICS)})")


def gate_max_drop(max_drop: object) -> float:
    """``max_drop`` (a number, or its text by the one number grammar, ``retrieval.numbers``) when it
    is a finite number ≥ 0; else a ValueError (NaN or a negative drop would turn the gate off or fail
    every change)."""
    try:
        value = numbers.number(max_drop, "--max-drop")
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise ValueError(f"--max-drop must be a finite number of 0 or more, not {numbers.shown(max_drop)}")
    return value


def labels_hash(qrels: Qrels) -> str:
    """A hash of a split's labels (every query, document and grade)."""
    return cache_key(qrels=sorted((q, sorted(docs.items())) for q, docs in qrels.items()))


@dataclass
class Snapshot:
    name: str
    corpus: str  # Dataset.corpus_hash
    dataset: str  # Dataset.content_hash when taken
    dataset_name: str
    split: str
    labels: str  # labels_hash of the split's labels when taken
    systems: dict[str, dict[str, Any]]  # system -> its parameters
    runs: dict[str, Run]
    note: str = ""
    created: float = field(default_factory=time.time)
    baseline: bool = False
    owner: str = ""  # who made it (``retrieval.sharing.owners``; "" kept before makers were recorded)
    published: bool = True  # visible to every session (on a shared deployment, once its maker published it)
    baseline_by: str = ""  # who marked it the baseline ("" unknown, or not the baseline)
    baseline_at: float = 0.0  # when (0: unknown)
    id: int = 0  # the store's id of the row (0: not kept yet); a name is unique only in its namespace


def check_note(note: object) -> str:
    """``note`` as text, or a ValueError in one line past ``NOTE_CHARS`` characters."""
    note = "" if note is None else str(note)
    if len(note) > NOTE_CHARS:
        raise ValueError(f"a snapshot's note has at most {NOTE_CHARS:,} characters, not {len(note):,}")
    return note


def too_many(count: int, mine: bool) -> str:
    """The refusal of a snapshot past ``MAX_SNAPSHOTS`` of the maker's (``mine``) or ``MAX_CORPUS_SNAPSHOTS``."""
    if mine:
        return (f"{count} snapshots of this corpus are yours, the most one maker may keep ({MAX_SNAPSHOTS}): "
                f"replace one of yours instead")
    return (f"this corpus keeps {count} snapshots, the most it may ({MAX_CORPUS_SNAPSHOTS}): replace one of yours "
            f"instead")


def admit(store: Store, corpus: str, name: str, note: str = "", viewer: Viewer = OPERATOR,
          replace: bool = False, baseline: bool = False) -> str:
    """The checked name of a snapshot ``viewer`` may keep of ``corpus`` under ``name`` (stripped),
    before any run is computed; else a ValueError in one line naming the snapshot and the rule:

    * a name ``viewer`` sees already in the namespace it writes to (its own, or a published one),
      unless ``replace`` — which only its maker may ask, and never for the baseline (take a new one
      and mark it);
    * a new name that looks like one of those (``safe_names.check_new_name``); another session's
      private snapshot lives in that session's namespace and is never held against it, nor named;
    * a note over ``NOTE_CHARS`` characters; past ``MAX_SNAPSHOTS`` of the maker's own or
      ``MAX_CORPUS_SNAPSHOTS`` in all;
    * on a shared deployment, marking it the baseline at once (only a published snapshot can be).
    """
    return _admitted(store, corpus, name, note, viewer, replace, baseline)[0]


def _rivals(store: Store, corpus: str, viewer: Viewer) -> list[dict[str, Any]]:
    """The snapshots a new one of ``viewer``'s is held against (``snapshot_index`` rows): the published
    ones and, for a private one (a shared deployment), the maker's own private ones — never another
    maker's private snapshot."""
    private = viewer.shared
    return [r for r in store.snapshot_index(corpus, viewer)
            if r["published"] or (private and r["owner"] == viewer.owner)]


def _admitted(store: Store, corpus: str, name: str, note: str, viewer: Viewer, replace: bool,
              baseline: bool) -> tuple[str, bool]:
    """``admit``'s name, and whether keeping it replaces the maker's snapshot of that name."""
    name = check_name(name, "snapshot name")
    check_note(note)
    rivals = _rivals(store, corpus, viewer)
    same = min((r for r in rivals if r["name"] == name), key=lambda r: viewer.rank(r["owner"], r["published"]),
               default=None)  # its own private one first, then the published one
    if same is not None:
        suggest = free_name(name, [r["name"] for r in rivals])
        made = f"taken by {describe(same['owner'], viewer)} on {when(same['created'])}"
        if not replace:
            raise ValueError(f"a snapshot {name!r} exists already ({made}): choose a new name, e.g. {suggest!r}"
                             + (", or replace it (you made it)" if same["owner"] == viewer.owner and
                                not same["baseline"] else ""))
        if same["owner"] != viewer.owner:
            raise ValueError(f"only its maker can replace the snapshot {name!r} ({made}): choose a new name, e.g. "
                             f"{suggest!r}")
        if same["baseline"]:
            raise ValueError(f"the snapshot {name!r} is the baseline and is never replaced: take a new one, e.g. "
                             f"{suggest!r}, and mark it the baseline")
    else:
        check_new_name(name, "snapshot name", [r["name"] for r in rivals])
        own = store.snapshot_count(corpus, viewer.owner)
        if own >= MAX_SNAPSHOTS:
            raise ValueError(too_many(own, mine=True))
        total = store.snapshot_count(corpus)
        if total >= MAX_CORPUS_SNAPSHOTS:
            raise ValueError(too_many(total, mine=False))
    if baseline and viewer.shared:
        raise ValueError("on a shared deployment only a published snapshot can be the baseline (it is everyone's): "
                         "take it, publish it, then mark it")
    return name, same is not None


def take(ws: Workspace, split: str, systems: list[str], name: str, note: str = "") -> Snapshot:
    """The systems' runs of ``split`` now, as a snapshot called ``name`` (not yet stored)."""
    name, note = check_name(name, "snapshot name"), check_note(note)
    ds = ws.dataset
    if split not in ds.qrels:
        raise ValueError(f"no split {split!r} with labels in {ds.name} (it has: {', '.join(ds.splits) or 'none'})")
    return Snapshot(name=name, corpus=ds.corpus_hash, dataset=ds.content_hash, dataset_name=ds.name, split=split,
                    labels=labels_hash(ds.qrels[split]), note=note,
                    systems={s: ws.system_params(s, split) for s in systems},
                    runs={s: ws.run(s, split) for s in systems})


def save(store: Store, snap: Snapshot, viewer: Viewer = OPERATOR, replace: bool = False) -> Snapshot:
    """Keep the snapshot in the store as ``viewer``'s (``admit``'s rules: never under a name it sees
    unless its maker replaces it; private to its session on a shared deployment, published at once
    off one); the snapshot as kept. A ValueError in one line, nothing kept, when a rule refuses it —
    checked first to say why in full, then again by the store inside the write's transaction
    (``Store.put_snapshot``), which another writer of the same moment cannot slip past."""
    _, replace = _admitted(store, snap.corpus, snap.name, snap.note, viewer, replace, False)
    published = not viewer.shared
    try:
        snap.id = store.put_snapshot(snap.corpus, snap.name, {
            "dataset": snap.dataset, "dataset_name": snap.dataset_name, "split": snap.split, "labels": snap.labels,
            "systems": snap.systems, "note": snap.note, "created": snap.created}, snap.runs, owner=viewer.owner,
            published=published, replace=replace, most=MAX_SNAPSHOTS, most_in_corpus=MAX_CORPUS_SNAPSHOTS)
    except NameTaken as err:  # another write of the maker's (or a publication) between the check and the write
        raise ValueError(f"{err}: choose a new name") from None
    except TooMany as err:
        raise ValueError(too_many(err.count, err.mine)) from None
    snap.owner = viewer.owner
    if not replace:
        snap.published = published
    return snap


class DamagedSnapshot(ValueError):
    """A snapshot row in the store that does not parse or does not have the shape ``save`` writes."""


_META: dict[str, type | tuple[type, ...]] = {
    "dataset": str, "dataset_name": str, "split": str, "labels": str, "systems": dict, "note": str,
    "created": (int, float)}


def _shape_problem(row: dict[str, Any]) -> str | None:
    """Why a stored snapshot row is not one ``save`` could have written (None when it is): the
    store is a file anyone may edit or a crash may cut, so what is read back is checked, not trusted."""
    if row.get("damaged"):  # the store could not unpack its runs (``Store.snapshots``)
        return str(row["damaged"])
    if not isinstance(row.get("name"), str) or not isinstance(row.get("corpus"), str):
        return "its name or corpus is not text"
    try:
        meta = json.loads(row["meta"])
    except (TypeError, ValueError) as err:
        return f"its metadata is not JSON ({err})"
    if not isinstance(meta, dict):
        return "its metadata is not a JSON object"
    for key, kind in _META.items():
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            return f"its metadata's {key!r} is missing or not a {kind.__name__ if isinstance(kind, type) else 'number'}"
    if not all(isinstance(k, str) and isinstance(v, dict) for k, v in meta["systems"].items()):
        return "its systems' parameters are not an object per system"
    if not isinstance(row.get("owner", ""), str) or not isinstance(row.get("baseline_by", ""), str) or \
            not isinstance(row.get("baseline_at", 0.0), (int, float)):
        return "its maker or its baseline mark's maker or time is not of the kind kept"
    runs = row.get("runs")
    if not isinstance(runs, dict):
        return "its runs are not an object of systems"
    for system, run in runs.items():
        if not isinstance(run, dict):
            return f"the run of {system!r} is not an object of queries"
        for query, hits in run.items():
            if not isinstance(hits, list) or not all(
                    isinstance(h, (list, tuple)) and len(h) == 2 and isinstance(h[0], str)
                    and isinstance(h[1], (int, float)) and not isinstance(h[1], bool) for h in hits):
                return f"the run of {system!r} for query {query!r} is not a list of [document, score] pairs"
    return None


def _of(row: dict[str, Any]) -> Snapshot:
    problem = _shape_problem(row)
    if problem is not None:
        raise DamagedSnapshot(f"the snapshot {row.get('name')!r} in the store is damaged: {problem}")
    meta = json.loads(row["meta"])
    return Snapshot(name=row["name"], corpus=row["corpus"], runs=row["runs"], baseline=bool(row["baseline"]),
                    owner=str(row.get("owner") or ""), published=bool(row.get("published", 1)),
                    baseline_by=str(row.get("baseline_by") or ""), baseline_at=float(row.get("baseline_at") or 0),
                    id=int(row.get("id") or 0),
                    **{k: meta[k] for k in ("dataset", "dataset_name", "split", "labels", "systems", "note",
                                            "created")})


def _rows(store: Store, corpus: str, what: str, viewer: Viewer = OPERATOR, name: str | None = None,
          baseline: bool = False) -> list[dict[str, Any]]:
    """``store.snapshots``; a row whose runs do not unpack is a ``DamagedSnapshot`` naming ``what``."""
    from retrieval.store import StoreError

    try:
        return store.snapshots(corpus, viewer, name, baseline)
    except StoreError:
        raise
    except (zlib.error, ValueError, TypeError) as err:  # a cut or edited blob: zlib's, JSON's or UTF-8's error
        raise DamagedSnapshot(f"{what} in the store is damaged: its runs do not unpack ({err})") from None


def listed(store: Store, corpus: str, viewer: Viewer = OPERATOR) -> list[Snapshot]:
    """The corpus's snapshots ``viewer`` sees (``owners.Viewer``; ``Store.snapshots``), oldest first; a
    damaged one (``DamagedSnapshot``) is left out with a warning naming it, so one bad row hides no other."""
    out, damaged = [], []
    for row in _rows(store, corpus, "a snapshot of this corpus", viewer=viewer):
        try:
            out.append(_of(row))
        except DamagedSnapshot as err:
            damaged.append(str(err))
    left_out("snapshots", damaged)
    return out


def load(store: Store, corpus: str, name: str, viewer: Viewer = OPERATOR) -> Snapshot:
    """The corpus's snapshot called ``name`` that ``viewer`` means: its own private one, else the
    published one (``Viewer.rank``); a KeyError naming the ones it sees when there is none it sees
    (another session's unpublished snapshot is as if it did not exist)."""
    found = _rows(store, corpus, f"the snapshot {name!r}", viewer=viewer, name=name)
    if not found:
        there = ", ".join(store.snapshot_names(corpus, viewer)) or "none yet"
        raise KeyError(f"no snapshot {name!r} of this corpus (there are: {there})")
    return _of(found[0])


@dataclass
class BaselineMove:
    """One move of a corpus's baseline mark: from which snapshot (None: none), to which, by whom, when."""

    moved_from: str | None
    moved_to: str
    who: str
    at: float


def mark_baseline(store: Store, corpus: str, name: str, viewer: Viewer = OPERATOR) -> BaselineMove | None:
    """Make the existing published snapshot ``name`` the corpus's baseline, as ``viewer``'s deliberate
    act: kept with who set it and when, the move logged (``baseline_moves``); the move, or None when
    it was the baseline already (nothing logged). Only a published snapshot can be the baseline
    (it is everyone's), so the name is looked up among the published first (a private one of the
    viewer's of the same name does not hide it). A KeyError for a snapshot ``viewer`` does not see,
    a ValueError for one not published."""
    published = [r for r in _rows(store, corpus, f"the snapshot {name!r}", viewer=viewer, name=name) if r["published"]]
    snap = _of(published[0]) if published else load(store, corpus, name, viewer)
    if snap.baseline:
        return None
    if not snap.published:
        raise ValueError(f"the snapshot {name!r} is not published: the baseline is everyone's, so publish it first")
    store.mark_baseline(corpus, snap.id, viewer.owner)
    return baseline_moves(store, corpus)[-1]


def baseline_moves(store: Store, corpus: str) -> list[BaselineMove]:
    """Every move of the corpus's baseline mark, oldest first."""
    return [BaselineMove(r["moved_from"], r["moved_to"], r["who"] or "", r["at"] or 0.0)
            for r in store.baseline_log(corpus)]


def baseline(store: Store, corpus: str) -> Snapshot | None:
    """The corpus's baseline snapshot, None without one."""
    found = _rows(store, corpus, "the baseline snapshot of this corpus", baseline=True)
    return _of(found[0]) if found else None


def baseline_line(store: Store, corpus: str, viewer: Viewer = OPERATOR) -> str:
    """"baseline: NAME, set by WHO on WHEN" (who as ``viewer`` sees it), or "no baseline yet"."""
    rows = [r for r in store.snapshot_index(corpus, viewer) if r["baseline"]]  # published: everyone sees it
    if not rows:
        return "no baseline yet"
    row = rows[0]
    return f"baseline: {row['name']}, set by {describe(row['baseline_by'], viewer)} on {when(row['baseline_at'])}"


def publish(store: Store, corpus: str, name: str, viewer: Viewer) -> Snapshot:
    """Make ``viewer``'s snapshot ``name`` visible to every session (it cannot be taken back); a
    KeyError for one it does not see, a ValueError for one another made, one already published, or
    one whose name a published snapshot has (or one like it: checked inside the publication's
    transaction, ``Store.publish_snapshot``, naming only the published one)."""
    snap = load(store, corpus, name, viewer)
    if snap.owner != viewer.owner:
        raise ValueError(f"only its maker can publish the snapshot {name!r} (taken by {describe(snap.owner, viewer)})")
    if snap.published:
        raise ValueError(f"the snapshot {name!r} is published already")
    try:
        if not store.publish_snapshot(corpus, snap.id, viewer.owner):
            raise KeyError(f"no snapshot {name!r} of this corpus is yours to publish")
    except NameTaken as err:
        raise ValueError(f"{err}: yours stays private (take it again under another name to publish it)") from None
    snap.published = True
    return snap


@dataclass
class Moved:
    """One query's metric before and now, both top lists, and its text."""

    query_id: str
    before: float
    now: float
    before_top: list[str]
    now_top: list[str]
    query: str = ""  # the query's text ("" where the data set has none for the id)


@dataclass
class SystemCheck:
    system: str
    comparison: Comparison | None  # now − baseline; None: the baseline has no run of this system
    # the 95% intervals of the baseline's and today's means (None with no baseline run)
    intervals: tuple[Interval, Interval] | None
    regressed: bool  # dropped by more than max_drop, significantly
    moved: list[Moved]  # the queries that dropped most first
    params_before: dict[str, Any] | None
    params_now: dict[str, Any]
    dropped: bool = False  # dropped by more than max_drop, not significantly: too few queries to tell
    coverage: tuple[Coverage | None, Coverage | None] = (None, None)  # judged@10 of the baseline's run, today's
    favoured: str | None = None  # "baseline" or "today": the data set's judged pool covers its top 10 better
    # beyond noise (``coverage.skew``), so the comparison is on nDCG'@10, which leaves unjudged documents out

    @property
    def gated(self) -> bool:
        """Whether the compared labels were judged in the app: judged@10 is reported and gates the verdict."""
        return any(c is not None and c.gated for c in self.coverage)

    @property
    def unjudged(self) -> bool:
        """Today's top 10 is judged below ``coverage.MIN_JUDGED_AT_10`` on labels judged in the app:
        no verdict (module docstring); never set for a system the baseline has no run of."""
        now = self.coverage[1]
        return self.comparison is not None and now is not None and not now.sufficient

    @property
    def state(self) -> str:
        """``"new"`` (no baseline run), ``"unjudged"`` (today's top 10 not judged enough for a verdict),
        ``"regressed"``, ``"dropped"`` (not significantly) or ``"ok"``."""
        if self.comparison is None:
            return "new"
        if self.unjudged:
            return "unjudged"
        return "regressed" if self.regressed else "dropped" if self.dropped else "ok"


@dataclass
class CheckResult:
    baseline: Snapshot
    split: str
    metric: str
    max_drop: float
    labels_changed: bool
    corpus_changed: bool
    systems: list[SystemCheck]

    @property
    def regressed(self) -> list[SystemCheck]:
        return [s for s in self.systems if s.regressed]

    @property
    def dropped(self) -> list[SystemCheck]:
        """The systems whose drop beyond ``max_drop`` is not significant (``SystemCheck.dropped``)."""
        return [s for s in self.systems if s.dropped]

    @property
    def unjudged(self) -> list[SystemCheck]:
        """The systems whose top 10 today is not judged enough for a verdict (``SystemCheck.unjudged``)."""
        return [s for s in self.systems if s.unjudged]

    @property
    def gated(self) -> bool:
        """Whether the compared labels were judged in the app (judged@10 reported, verdicts gated)."""
        return any(s.gated for s in self.systems)

    def fails(self, strict: bool = False) -> bool:
        """Whether the gate fails: a system regressed, or with ``strict`` one dropped not significantly
        or not judged enough to tell."""
        return bool(self.regressed or (strict and (self.dropped or self.unjudged)))


def check(ws: Workspace, snap: Snapshot, systems: list[str], metric: str = PRIMARY, max_drop: float = MAX_DROP,
          split: str | None = None, viewer: Viewer | None = None) -> CheckResult:
    """Each of ``systems`` now against ``snap``'s run of the same name (module docstring); a metric
    or ``max_drop`` the gate cannot decide on is a ValueError (``gate_metric``, ``gate_max_drop``).
    ``viewer``: whose judgments tell which labels were judged in the app (``Store.judgments``; None,
    every judge's, as on the command line)."""
    metric, max_drop = gate_metric(metric), gate_max_drop(max_drop)
    split = split or snap.split
    ds = ws.dataset
    if split not in ds.qrels:
        raise ValueError(f"no split {split!r} with labels in {ds.name} (it has: {', '.join(ds.splits) or 'none'})")
    qrels = ds.qrels[split]
    judgments = seen.judgments(ws.store, ds, viewer)
    gated = bool(from_judging(positive_qrels(qrels), judgments))  # else the data's own labels: no coverage asked
    # the data's own labels that list non-relevant documents: a judged pool, whose cover of the two runs is compared
    pool = not gated and metric == PRIMARY and any(g <= 0 for docs in qrels.values() for g in docs.values())

    def judged(name: str, run: Run) -> Coverage | None:
        return coverages({name: run}, qrels, judgments)[name] if gated or pool else None

    out = []
    for s in systems:
        now_run = ws.run(s, split)
        now = evaluate_run(now_run, qrels, metrics=(metric,))
        params = ws.system_params(s, split)
        cov_now = judged(s, now_run)
        if s not in snap.runs:
            out.append(SystemCheck(s, None, None, False, [], None, params, coverage=(None, cov_now)))
            continue
        before_run = {q: snap.runs[s].get(q, []) for q in now_run}
        covered = (judged(s, before_run), cov_now)
        before = evaluate_run(before_run, qrels, metrics=(metric,))
        skewed = skew(covered[0], cov_now) if pool and covered[0] is not None and cov_now is not None else None
        favoured, used = None, metric
        if skewed is not None:  # compared on the condensed lists: neither run's unjudged documents count
            favoured, used = ("today" if skewed.delta > 0 else "baseline"), NDCG_CONDENSED
            before, now = condensed_ndcg(before_run, qrels), condensed_ndcg(now_run, qrels)
        cmp = compare(before, now, used)
        beyond = cmp.delta < -max_drop and (cov_now is None or cov_now.sufficient)  # not judged enough: no verdict
        regressed = beyond and cmp.p_value < SIGNIFICANCE_LEVEL
        a, b = before.per_query.get(used, {}), now.per_query.get(used, {})
        moved = sorted((Moved(q, a[q], b[q], [d for d, _ in before_run.get(q, [])[:10]],
                              [d for d, _ in now_run.get(q, [])[:10]], ds.queries.get(q, ""))
                        for q in a if q in b and a[q] != b[q]),
                       key=lambda m: (m.now - m.before, m.query_id))
        out.append(SystemCheck(s, cmp, (before.interval(used), now.interval(used)), regressed, moved,
                               snap.systems.get(s), params, dropped=beyond and not regressed,
                               coverage=covered if gated or favoured else (None, None), favoured=favoured))
    return CheckResult(snap, split, metric, max_drop, labels_hash(qrels) != snap.labels,
                       ds.corpus_hash != snap.corpus, out)


# ---- history across snapshots, and two snapshots side by side ------------------------------------
@dataclass
class Point:
    """One system's metric in one snapshot, on today's labels, with its 95% interval."""

    snapshot: str
    created: float
    note: str
    system: str
    mean: float
    interval: Interval
    queries: int


def history(store: Store, ws: Workspace, split: str, metric: str = PRIMARY, viewer: Viewer = OPERATOR,
            snaps: list[Snapshot] | None = None) -> list[Point]:
    """Every system of every snapshot of the corpus ``viewer`` sees (or of ``snaps``, read already)
    taken on ``split``, oldest first, evaluated on today's labels of that split (so a labels change
    moves every point alike)."""
    qrels = ws.dataset.qrels.get(split, {})
    out = []
    for snap in (snaps if snaps is not None else listed(store, ws.dataset.corpus_hash, viewer)):
        if snap.split != split or not qrels:
            continue
        for system, run in snap.runs.items():
            ev = evaluate_run({q: run.get(q, []) for q in qrels}, qrels, metrics=(metric,))
            out.append(Point(snap.name, snap.created, snap.note, system, ev.mean[metric], ev.interval(metric),
                             len(ev.per_query.get(metric, {}))))
    return out


@dataclass
class QueryDiff:
    """A query in two snapshots of one system: the metric in each, what entered and left the top 10,
    and how alike the two top 10s are (rank-biased overlap: 1 the same list, 0 nothing shared)."""

    query_id: str
    a: float
    b: float
    entered: list[str]  # in B's top 10, not in A's
    left: list[str]  # in A's top 10, not in B's
    top_a: list[str]
    top_b: list[str]
    overlap: float  # RBO_EXT of the two top 10s (p 0.9, ``judgments.rbo``)


def diff(a: Snapshot, b: Snapshot, system: str, qrels: Qrels, metric: str = PRIMARY,
         k: int = 10) -> tuple[Comparison, tuple[Interval, Interval], list[QueryDiff]]:
    """``system`` in snapshot ``b`` against ``a``, query by query on ``qrels``: the paired comparison
    (B − A), the 95% intervals of A's and B's means, and every query whose metric or top ``k``
    changed, the largest move first, then the least alike lists: DiffIR's contrastive ranking of
    queries (Jose, Nguyen, MacAvaney, Dalton and Yates, SIGIR 2021 demo), supervised by the metric
    and, where it did not move (unjudged documents swapped), unsupervised by the lists' rank-biased
    overlap (Webber, Moffat and Zobel, TOIS 2010). DiffIR's unsupervised contrast is a rank
    correlation (τ_AP, Yilmaz, Aslam and Robertson, SIGIR 2008); RBO is used here because it is
    defined for top-k lists that share only part of their documents."""
    if system not in a.runs or system not in b.runs:
        missing = a.name if system not in a.runs else b.name
        raise ValueError(f"snapshot {missing!r} has no run of {system!r}")
    ra, rb = a.runs[system], b.runs[system]
    ea = evaluate_run({q: ra.get(q, []) for q in qrels}, qrels, metrics=(metric,))
    eb = evaluate_run({q: rb.get(q, []) for q in qrels}, qrels, metrics=(metric,))
    pa, pb = ea.per_query.get(metric, {}), eb.per_query.get(metric, {})
    out = []
    for q in qrels:
        ta, tb = [d for d, _ in ra.get(q, [])[:k]], [d for d, _ in rb.get(q, [])[:k]]
        va, vb = pa.get(q, 0.0), pb.get(q, 0.0)
        if ta != tb or va != vb:
            out.append(QueryDiff(q, va, vb, [d for d in tb if d not in ta], [d for d in ta if d not in tb], ta, tb,
                                 rbo(ta, tb)))
    out.sort(key=lambda d: (-abs(d.b - d.a), d.overlap, d.query_id))
    return compare(ea, eb, metric), (ea.interval(metric), eb.interval(metric)), out
