"""Command line: ``python -m retrieval evaluate|info|search|failures|predict ...``.

    python -m retrieval evaluate DATASET [--split test] [--systems bm25,dense,hybrid,...]
        [--run FILE[=NAME] ...] [--model PATH_OR_ID] [--json FILE] [--run-dir DIR] [--no-ci]

prints a metrics table, each mean with its 95% interval over the queries (percentile bootstrap,
``retrieval.evaluation.intervals``; ``--no-ci`` leaves them out), a paired permutation test of each system
against the first, and every pair of systems in words ("Hybrid beats BM25 by 0.053 [0.029, 0.078]
nDCG@10" or "not separable yet"). The store's judgments of the corpus are labels, as in the app
(``labels.with_stored_judgments``: judged queries in no split are the split ``judged``; ``evaluate``,
``search``, ``failures``, ``snapshot`` and ``check`` all read them). Where the split's labels were
judged in the app (the store holds them as judgments: ``retrieval.judging.coverage``), each system's
judged@10 is printed, and a pair whose
system's top 10 is judged below the threshold gets no verdict, nor a † mark, but how many more of its
documents to judge; writes the metrics, their intervals and the comparisons as JSON
(``metrics_json``) and one TREC run file per system. ``--run`` adds a
run file of another system (TREC or ranx JSON, named NAME, else after its TREC tag or file stem)
beside the built-in ones; what reading it found goes to stderr as warnings.

    python -m retrieval failures DATASET [--split test] [--tuned MODEL] --html REPORT.html

writes the failure gallery as one self-contained HTML file (the app's *Export HTML report*), with a
section on the queries no split labels (a query log added) predicted to fail; a data set without any
labels gets that section alone: its hardest queries by predicted difficulty (``retrieval.qpp``), each
with the systems' top documents, and their ids, difficulty and text printed one a line.

    python -m retrieval predict DATASET [--systems bm25,dense,hybrid] [--queries FILE] [--out FILE.tsv]
        [--labels auto|none] [--k 100]

predicts which queries fail, labels or not (``retrieval.qpp``): every predictor (IDF, SCQ; NQC, WIG,
clarity and coherence on each system's list; the systems' disagreement) and each system's combined
prediction, one row per query, hardest first, as a TSV (``retrieval.files.tabular``) to ``--out`` or
stdout. ``--queries`` predicts the queries of that file (added to the data set's) instead of the data
set's own; ``--labels auto`` fits the combination to nDCG@10 where at least 10 queries are judged.

    python -m retrieval judges DATASET [--store FILE] [--export QRELS --rule median|majority|min|max|JUDGE]

prints how far the judges of the corpus agree (per pair weighted κ with its interval and their
confusion matrix, Krippendorff's α over all) and the pairs to adjudicate; writes the qrels merged
by the rule.

Every command that searches takes ``--engine milvus:PATH.db`` (Milvus Lite) or ``--engine
milvus://HOST:PORT`` to put BM25 and the vectors in Milvus; ``python -m retrieval drop DATASET
--engine SPEC`` removes them there.

Every command that runs systems takes ``--param SYSTEM.NAME=VALUE`` (repeatable) for any parameter a
registered system declares (``retrieval.systems.declared``: ``--param ql.mu=500``, ``--param
bm25.k1=1.2``), read by the declaration's parser, so a value outside its range, an unknown system or
an unknown parameter is one ``error:`` line and exit status 2; ``--help`` lists every declared
parameter with its range, default and what it does. ``--k1`` and ``--b`` are ``--param bm25.k1`` and
``--param bm25.b`` (a ``--param`` of the same name given too wins).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from retrieval import numbers
from retrieval.data.dataset import Dataset
from retrieval.data.language import corpus_tokenizer
from retrieval.data.readers import load_dataset, read_run
from retrieval.evaluation.intervals import LEVEL
from retrieval.evaluation.measures import positive_qrels, significance_marks
from retrieval.evaluation.metric_tables import compared_pairs
from retrieval.evaluation.metrics import PRIMARY, SIGNIFICANCE_LEVEL, SIGNIFICANT, TABLE_METRICS, cell, interval_text
from retrieval.files.terminal import safe_output
from retrieval.files.trec import write_trec
from retrieval.index.encoder import PRECISIONS
from retrieval.index.engines import ENGINE_SPECS, open_engine
from retrieval.judging import seen
from retrieval.judging.coverage import coverages, from_judging, gated_marks, judged_verdict, measurable, pool_depth
from retrieval.judging.labels import with_stored_judgments
from retrieval.judging.staged_writes import MAX_IMPORT_ROWS
from retrieval.safe_names import file_name
from retrieval.store import Store, default_store_path
from retrieval.systems import BASE_SYSTEMS, BM25, HYBRID, builtin, keys, label
from retrieval.systems import shown as shown_by_default
from retrieval.systems.bm25 import check_b, check_k1
from retrieval.systems.clear_lambda import shown
from retrieval.systems.declared import Value, parse
from retrieval.systems.hybrid import CLEAR
from retrieval.systems.identifier_queries import RULE as LOOKUP_RULE
from retrieval.systems.identifier_queries import identifier_lookups
from retrieval.workspace import Workspace

if TYPE_CHECKING:
    from retrieval.judging.pool_verdict import PoolVerdict

LABEL_WIDTH = 24  # the system column of the metrics table, at the least (a longer label widens it)

def _progress(fraction: float, what: str) -> None:
    print(f"\r  {what} ({fraction:.0%})", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)


def _build_dense(ws: Workspace) -> None:
    print(f"encoder {ws.encoder.name} on {ws.encoder.compute}", file=sys.stderr)
    dense = ws.build_dense(progress=_progress)
    also = f"; {dense.repeats:,} documents repeat another's text" if dense.repeats > 0 else ""
    print(f"embeddings: {dense.from_store:,} from the store, {dense.encoded:,} encoded{also}", file=sys.stderr)


def _opened(args: argparse.Namespace, store: Store) -> Store:
    """``store``, closed when ``main`` returns (``args.closing``; a caller that parsed the arguments itself
    closes it as it likes)."""
    if args.closing is not None:
        args.closing.callback(store.close)
    return store


def _open(args: argparse.Namespace) -> tuple[Dataset, Workspace]:
    """The data set with the store's judgments of its corpus as labels (``labels.with_stored_judgments``,
    every judge's: the command line is the store's one local user), opened as a workspace."""
    ds = load_dataset(args.dataset, progress=_progress)
    for w in ds.report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    store = None if args.no_store else _opened(args, Store(args.store or default_store_path()))
    ds, judged = with_stored_judgments(ds, store)
    if judged.pairs:
        print(f"labels: {judged.pairs:,} judgments of {judged.queries:,} queries from the store ({judged.relevant:,} "
              f"with a relevant document; splits {', '.join(f'{s} {len(q):,}' for s, q in ds.qrels.items())})",
              file=sys.stderr)
    tokenizer = corpus_tokenizer([d.full_text for d in ds.docs.values()], args.language)
    engine = open_engine(args.engine, allow_insecure_token=args.allow_insecure_token)
    ws = Workspace(ds, store, model=args.model, index_kind=args.index, device=args.device, tokenizer=tokenizer,
                   precision=args.precision, engine=engine, settings=settings_given(args))
    if engine.where:
        print(f"engine: {engine.name} at {engine.where}", file=sys.stderr)
        ws.build_lexical(progress=_progress)
    return ds, ws


def settings_given(args: argparse.Namespace) -> dict[str, dict[str, Value]]:
    """The parameter values the command line gives, ``{system: {parameter: value}}``: ``--k1`` and
    ``--b`` as BM25's, then each ``--param`` (read already by ``parameter_assignment``)."""
    given: dict[str, dict[str, Value]] = {}
    aliases = {"k1": getattr(args, "k1", None), "b": getattr(args, "b", None)}
    if any(v is not None for v in aliases.values()):
        given[BM25] = {n: v for n, v in aliases.items() if v is not None}
    for system, name, value in getattr(args, "param", None) or []:
        given.setdefault(system, {})[name] = value
    return given


def parameter_assignment(text: str) -> tuple[str, str, Value]:
    """``--param SYSTEM.NAME=VALUE`` read: the registered system, its declared parameter and the value
    by that parameter's declaration (``declared.parse``); a ValueError in one line otherwise."""
    head, eq, value = text.partition("=")
    key, dot, name = head.strip().partition(".")
    if not eq or not dot or not key or not name:
        raise ValueError(f"{numbers.shown(text)} is not SYSTEM.NAME=VALUE (e.g. ql.mu=500)")
    system = builtin(key)
    with_parameters = [k for k in keys() if getattr(builtin(k), "parameters", ())]
    if system is None:
        raise ValueError(f"unknown system {numbers.shown(key)}; systems with parameters: {', '.join(with_parameters)}")
    declared = {p.name: p for p in system.parameters}
    if name not in declared:
        known = ", ".join(f"{key}.{n}" for n in declared) or "none"
        raise ValueError(f"{system.short} has no parameter {numbers.shown(name)} (its parameters: {known})")
    return key, name, parse(declared[name], value, system.short)


def parameters_help() -> str:
    """``--param``'s help: every registered system's declared parameters, each with its range,
    default and what it does (read from the declarations)."""
    lines = []
    for key in keys():
        for p in builtin(key).parameters:  # type: ignore[union-attr]
            lines.append(f"{key}.{p.name}: {p.doc}; {p.range_text} (default {p.default})")
    return ("a declared parameter of a system, SYSTEM.NAME=VALUE (repeatable): " + "; ".join(lines)).replace("%", "%%")


def format_table(results: dict[str, dict[str, float]], marks: dict[str, dict[str, str]],
                 intervals: dict[str, dict[str, Any]] | None = None, pool: int | None = None) -> str:
    """One row per system, one column per metric: "0.6804†", or with ``intervals`` (``{system:
    {metric: Interval}}``) "0.6804 [0.652, 0.709]†"; with ``pool``, the depth labels judged in the app
    were pooled to, a metric that reads deeper is "n/m (pool depth 10)" (``coverage.measurable``)."""
    metrics = [m for m in TABLE_METRICS if any(m in r for r in results.values())]
    width = 24 if intervals else 13
    names = max([LABEL_WIDTH, *(len(label(s)) + 2 for s in results)])  # every label whole, two spaces after
    header = f"{'system':<{names}}" + "".join(f"{m:>{width}}" for m in metrics)
    lines = [header, "-" * len(header)]
    for system, row in results.items():
        bounds = (intervals or {}).get(system, {})
        cells = "".join(f"{cell(row.get(m), marks.get(system, {}).get(m, ''), bounds.get(m)):>{width}}"
                        if measurable(m, pool) else f"{f'n/m (pool depth {pool})':>{width}}" for m in metrics)
        lines.append(f"{label(system):<{names}}{cells}")
    return "\n".join(lines)


def metrics_json(split: str, evals: dict[str, Any], results: dict[str, dict[str, float]],
                 pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``evaluate --json`` writes: each system's metrics with their 95% intervals, and every
    pair of systems compared on nDCG@10 (NaN, a metric no query has, written as null)."""
    def num(v: float) -> float | None:
        return None if v != v else v

    named = {label(s): s for s in evals}

    # the coverage gate's word (``gated_verdicts``): whether, and whose top 10 to judge
    def verdict(r: dict[str, Any]) -> dict[str, Any]:
        v = r.get("verdict")
        return {} if v is None else {"may_conclude": v.may_conclude, "judge_more": {
            named.get(s.system, s.system): s.to_threshold for s in v.lacking}}

    return {"split": split, "level": LEVEL, "interval": "percentile bootstrap over queries",
            "difference_interval": "the shifts the paired permutation test does not reject (null: unbounded)",
            "systems": {s: {"queries": len(evals[s].per_query.get(PRIMARY, {})),
                            "metrics": {m: num(v) for m, v in row.items()},
                            "intervals": {m: evals[s].interval(m).to_json() for m in row}}
                        for s, row in results.items()},
            "comparisons": [{"a": r["a"], "b": r["b"], "metric": r["comparison"].metric,
                             "delta": r["comparison"].delta, "interval": r["comparison"].interval.to_json(),
                             "p_value": r["comparison"].p_value, "outcome": r["comparison"].outcome,
                             **verdict(r)}
                            for r in pairs]}


def run_arg(value: str) -> tuple[str, str | None]:
    """``FILE[=NAME]`` as (file, name or None); a file whose own name holds "=" is taken whole."""
    path, sep, name = value.rpartition("=")
    if not sep or Path(value).exists():
        return value, None
    return path, name


def import_runs(ws: Workspace, values: list[str]) -> list[str]:
    """Read each ``--run`` file, print its warnings, register it in ``ws``; the names it got."""
    names = []
    for value in values:
        path, name = run_arg(value)
        imported = read_run(path, ws.dataset, name)
        for w in imported.report.warnings:
            print(f"warning: {w}", file=sys.stderr)
        names.append(ws.add_run(imported))
    return names


def listed_systems(ws: Workspace, listed: str | None, imported: Iterable[str] = ()) -> list[str]:
    """The systems ``--systems`` lists (None: those shown by default, ``retrieval.systems.shown``),
    then the ``imported`` run names not already listed; an unknown name is a ValueError."""
    systems = [s.strip() for s in listed.split(",") if s.strip()] if listed is not None else list(shown_by_default())
    systems += [name for name in imported if name not in systems]
    unknown = [s for s in systems if s not in ws.system_names]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(ws.system_names)}")
    return systems


def evaluated_systems(args: argparse.Namespace, ws: Workspace) -> list[str]:
    """``--systems``, then the ``--run`` names not already listed; an unknown name is a ValueError."""
    return listed_systems(ws, args.systems, import_runs(ws, args.run or []))


def systems_help() -> str:
    """``--systems``' help: the registered systems, and the default (those shown by default)."""
    return f"comma-separated, of {','.join(keys())} (default: {','.join(shown_by_default())})"


def _split_of(ds: Dataset, wanted: str | None) -> str:
    """The labelled split asked for (default: test, else the first); a ValueError naming the ones
    there are (``main`` prints it and exits 2)."""
    split = wanted or ds.default_split()
    if split is None:
        raise ValueError(f"{ds.name} has no relevance labels; nothing to evaluate")
    if split not in ds.qrels:
        raise ValueError(f"no split {split!r} in {ds.name} (it has: {', '.join(ds.splits)})")
    return split


def gated_verdicts(ws: Workspace, split: str, systems: list[str],
                   pairs: list[dict[str, Any]]) -> tuple[dict[str, Any], int | None]:
    """(each system's ``coverage.Coverage`` on the split, by label; the depth the labels judged in
    the app were pooled to), and each row of ``pairs`` (``metric_tables.compared_pairs``) given its
    ``"verdict"`` (``coverage.Verdict``, by label): on labels judged in the app (the store's judgments
    of the corpus) none where a system's top 10 is not judged enough. On the data set's own labels
    every verdict stands: ({}, None), the rows as they were."""
    qrels = ws.dataset.qrels[split]
    judgments = seen.judgments(ws.store, ws.dataset)
    labels = positive_qrels(qrels)
    pooled = from_judging(labels, judgments)
    if not pooled and not any(g <= 0 for docs in labels.values() for g in docs.values()):
        return {}, None  # the data set's own relevant-only labels: nothing gated, every verdict stands
    runs = {label(s): ws.run(s, split) for s in systems}
    covered = coverages(runs, qrels, judgments)  # a data set's own judged pool: not gated, but ``coverage.skew``
    basis = {q: labels[q] for q in pooled} if pooled else labels
    for r in pairs:
        r["verdict"] = judged_verdict(label(r["a"]), label(r["b"]), r["comparison"], covered, runs, basis)
    return covered, pool_depth(runs, qrels, pooled) if pooled else None


def judged_pool_of(ws: Workspace, split: str, systems: list[str]) -> PoolVerdict | None:
    """On labels judged in the app, the judged pool's ``pool_verdict.PoolVerdict`` of the systems (by
    label) over every judged query of the split; None elsewhere."""
    from retrieval.judging.pool_verdict import judged_queries, pool_verdict
    from retrieval.judging.pools import DEPTH

    qrels = ws.dataset.qrels[split]
    ids = judged_queries(qrels, seen.judgments(ws.store, ws.dataset))
    return pool_verdict({label(s): ws.run(s, split) for s in systems}, qrels, ids, DEPTH) if ids else None


def _pool_precision(pv: PoolVerdict, systems: list[str], results: dict[str, Any], intervals: dict[str, Any]) -> None:
    """The table's P@10 as the judged pool fixes it, over every judged query (ranx leaves out the
    queries with nothing relevant found): one P@10 on the page."""
    for s in systems:
        if "p@10" in results[s]:
            results[s]["p@10"] = pv.scores[label(s)].precision
            intervals[s]["p@10"] = pv.scores[label(s)].precision_interval


def print_judged_pool(pv: PoolVerdict) -> None:
    """What the judged pool fixes (``judged_pool_of``): each system's success@10, P@10 and failures
    over every judged query, the queries every system fails on, and the pairs compared on success@10
    once the pool is whole."""
    from ui.present.tables import percent, pool_conclusion_lines, pool_success_line

    n = len(pv.queries)
    state = ("every top-10 document judged: exact" if pv.complete else
             f"provisional: judge {len(pv.unjudged):,} more (the unjudged top-10 documents on the judged queries)")
    print(f"judged pool: {n:,} judged queries, nothing relevant found included ({state})")
    fails = (f"{pv.all_fail:,} of {n:,} ({pv.all_fail / n:.0%} {percent(pv.all_fail_interval)})" if pv.complete
             else f"{pv.all_fail:,}–{pv.all_fail + pv.all_fail_undecided:,} of {n:,}")
    print(f"every system fails on {fails} judged queries (no relevant document in any top 10)")
    print(f"success@10: {pool_success_line(pv)}")
    for s in pv.scores.values():
        print(f"  {s.system}: P@10 " + (f"{s.precision:.4f} {interval_text(s.precision_interval)}" if s.exact
                                       else f"{s.precision:.4f}–{s.precision_high:.4f}")
              + f", fails on {s.failures:,}{'' if s.exact else f'–{s.failures + s.undecided:,}'} of {n:,}")
    lines = pool_conclusion_lines(pv)
    if lines:
        print("conclusions (success@10 over the judged pool):")
        for line in lines:
            print(f"  {line}")
    print("nDCG@10, recall, MAP and bpref above are relative to the relevant documents found so far: not a verdict")


def _print_weights(ws: Workspace, split: str, systems: list[str]) -> None:
    """How the hybrid's λ was chosen (and the queries it leaves to BM25), then each other system's own
    weights and how they were chosen (the three-way fusion's μ), as Evaluate shows them."""
    if HYBRID in systems:
        lam = CLEAR.lambda_for(ws, split)
        print(f"hybrid λ_test = {shown(lam.value)} ({lam.how})")
        lookups = identifier_lookups(ws.dataset.split_queries(split))
        if lookups:
            print(f"hybrid: {len(lookups)} queries look up an identifier ({LOOKUP_RULE})")
    for s in systems:
        for w in (ws.system(s).weights(ws, split) if s in keys() else ()):
            print(f"{s} {w.name} = {shown(w.value)} ({w.how})")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ui.present.tables import conclusion_lines, coverage_line

    ds, ws = _open(args)
    split = _split_of(ds, args.split)
    systems = evaluated_systems(args, ws)
    n_q = len(ds.split_queries(split))
    print(f"{ds.name}: {len(ds.docs)} documents, {n_q} {split} queries", file=sys.stderr)
    if any(ws.system(s).needs.vectors for s in systems):
        _build_dense(ws)
    evals, results, timings = {}, {}, {}
    for s in systems:
        t = time.perf_counter()
        evals[s] = ws.evaluate(s, split)
        timings[s] = time.perf_counter() - t
        results[s] = {m: evals[s].mean[m] for m in TABLE_METRICS if m in evals[s].mean}
    base = systems[0]
    pairs = compared_pairs(evals)
    covered, pool = gated_verdicts(ws, split, systems, pairs)
    gated = any(c.gated for c in covered.values())
    marks = significance_marks(evals, base)
    if gated:  # "differs from the first" is a verdict too
        marks = gated_marks({label(s): m for s, m in marks.items()}, covered, label(base))
        marks = {s: marks[label(s)] for s in systems if label(s) in marks}
    skewed = {name for r in pairs if r.get("verdict") is not None and r["verdict"].favoured
              and label(base) in (r["verdict"].a, r["verdict"].b) for name in (r["verdict"].a, r["verdict"].b)}
    marks = {s: m for s, m in marks.items() if label(s) not in skewed}  # labels that favour one: no nDCG@10 mark
    intervals = {s: {m: evals[s].interval(m) for m in results[s]} for s in systems}
    judged = judged_pool_of(ws, split, systems) if gated else None
    if judged is not None:
        _pool_precision(judged, systems, results, intervals)
    print(format_table(results, marks, intervals if args.ci else None, pool))
    if args.ci:
        print(f"[low, high]: 95% interval over the {split} queries (percentile bootstrap)")
    if gated:
        print(coverage_line(covered) + (f" n/m: not measurable on judgments pooled to depth {pool}: the metric "
                                        "reads deeper, where every document is unjudged." if pool is not None
                                        and not all(measurable(m, pool) for m in TABLE_METRICS) else ""))
    if covered and not gated:
        print(coverage_line(covered))
    if judged is not None:  # the pool's verdict, never one on nDCG there
        print_judged_pool(judged)
    elif len(systems) > 1:
        print(f"{SIGNIFICANT} p < {SIGNIFICANCE_LEVEL:g} against {label(base)} (paired permutation test)")
        by_pair = {(r["a"], r["b"]): r["comparison"] for r in pairs}
        for s in systems[1:]:  # s − base: the pair's comparison, turned round where base was the better
            c = by_pair[(base, s)] if (base, s) in by_pair else by_pair[(s, base)].flipped()
            print(f"{label(s)} vs {label(base)}, nDCG@10 per query: "
                  f"{c.delta:+.4f} mean {interval_text(c.interval)}, {len(c.wins)} wins, {len(c.losses)} losses, "
                  f"{c.ties} ties, p = {c.p_value:.4f}")
        print("conclusions:")
        rows = [{**r, "a": label(r["a"]), "b": label(r["b"])} for r in pairs]
        for line in conclusion_lines(sorted(rows, key=lambda r: "verdict" in r and not r["verdict"].may_conclude)):
            print(f"  {line}")
    _print_weights(ws, split, systems)
    print("seconds: " + ", ".join(f"{s} {t:.1f}" for s, t in timings.items()), file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(metrics_json(split, evals, results, pairs), indent=2))
    if args.run_dir:  # each file named by a slug and hash of data set, split and system: inside --run-dir
        for s in systems:
            tag = s if ws.system(s).needs.run else f"rankscope-{s}"  # an imported run keeps its own name
            path = write_trec(ws.run(s, split), Path(args.run_dir) / file_name(ds.name, split, s, suffix=".trec"), tag)
            print(f"run: {path}", file=sys.stderr)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    ds = load_dataset(args.dataset)
    print(json.dumps(ds.summary(), indent=2))
    for w in ds.report.warnings:
        print(f"warning: {w}")
    return 0


def cmd_judges(args: argparse.Namespace) -> int:
    """How far the judges of the data set's corpus agree; their judgments as qrels, merged by a rule."""
    from retrieval.data.readers import judgment_files
    from retrieval.files.trec import write_qrels
    from retrieval.judging import staged_writes as staging
    from retrieval.judging.agreement import agreement
    from retrieval.judging.judgments import merged_qrels

    ds = load_dataset(args.dataset)
    store = _opened(args, Store(args.store or default_store_path()))
    if args.import_file:  # every row checked before any is stored
        found = judgment_files.read(args.import_file, ds, args.judge, existing=store.judges(ds.corpus_hash))
        staging.check_count(len(found), args.import_file)  # at most MAX_IMPORT_ROWS, all stored or none
        stored = store.put_judgments(ds.corpus_hash, ((j.query_id, j.query_text, j.doc_id, j.grade, j.judge)
                                                      for j in found), source=args.import_file)
        print(f"imported {len(found):,} judgments by {', '.join(sorted({j.judge for j in found}))}: "
              f"{stored.new:,} new, {stored.changed:,} changed, {stored.unchanged:,} unchanged", file=sys.stderr)
    rows = seen.judgments(store, ds)
    if not rows:
        print(f"error: nobody has judged {ds.name}'s corpus in {store.path} yet", file=sys.stderr)
        return 2
    result = agreement(rows)
    print(f"{len(rows):,} judgments by {len(result.judges)} judge(s): {', '.join(result.judges)}")
    a = f"{result.alpha:.3f} {interval_text(result.alpha_interval)}" if result.alpha == result.alpha else "—"
    print(f"Krippendorff's alpha (ordinal), over the {result.items:,} pairs two or more judges graded: {a}")
    for pa in result.pairs:
        k = f"{pa.kappa:.3f} {interval_text(pa.interval)}" if pa.kappa == pa.kappa else "—"
        print(f"{pa.judge_a} / {pa.judge_b}: {pa.shared:,} pairs both graded, weighted kappa {k}, "
              f"same grade on {pa.exact:.0%}")
        print("    " + f"{pa.judge_a} \\ {pa.judge_b}".ljust(24) + "".join(f"{g:>6}" for g in range(3)))
        for g, counts in enumerate(pa.confusion):
            print("    " + str(g).ljust(24) + "".join(f"{c:>6}" for c in counts))
    print(f"{len(result.adjudicate):,} pair(s) to adjudicate (graded differently), the widest spread first:")
    for qid, doc, grades in result.adjudicate[:args.top]:
        print(f"  {qid}  {doc}  " + ", ".join(f"{j}: {g}" for j, g in grades.items()))
    if args.export and args.format in judgment_files.FORMATS:  # each judge's grades, as a spreadsheet
        path = judgment_files.write(rows, args.export, args.format)
        print(f"judgments, each judge's: {path}", file=sys.stderr)
    elif args.export:
        path = write_qrels(merged_qrels(rows, args.rule), args.export, fmt=args.format, split="judged")
        print(f"qrels ({args.rule}): {path}", file=sys.stderr)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    ds, ws = _open(args)
    systems = listed_systems(ws, args.systems)
    if any(ws.system(s).needs.vectors for s in systems):
        _build_dense(ws)
    results = ws.search_one(args.query, systems, k=args.k, eval_split=ds.default_split())
    for system, hits in results.items():
        print(f"\n{label(system)}")
        for rank, (doc, score) in enumerate(hits, 1):
            title = ds.docs[doc].title or ds.docs[doc].text[:60]
            print(f"  {rank:>2}. {score:8.4f}  {doc}  {title[:70]}")
    return 0


def cmd_failures(args: argparse.Namespace) -> int:
    from retrieval.evaluation.failure_gallery import failure_gallery
    from retrieval.qpp.predict import predict
    from ui.present.evaluation import report_parts
    from ui.present.predicted import has_unlabelled, section_html, unlabelled
    from ui.present.report import write_gallery

    ds, ws = _open(args)
    if not ds.qrels and not args.split:  # no labels: the queries predicted to fail, alone
        return _predicted_report(args, ws)
    split = ws.require_split(args.split or ds.default_split())
    _build_dense(ws)
    tuned = ws.with_model(args.tuned) if args.tuned else None
    gallery = failure_gallery(ws, split, tuned_ws=tuned)
    workspaces = {"": ws, **({"fine-tuned": tuned} if tuned is not None else {})}
    figures, summary = report_parts(ws, workspaces, gallery)
    found = None  # queries no split labels (a query log added): predicted to fail, among every query
    if has_unlabelled(ws):
        found = unlabelled(ws, predict(ws, None, BASE_SYSTEMS))
    predicted = section_html(found, labelled=True) if found is not None else ""
    path = write_gallery(gallery, args.html, figures, summary=summary, predicted=predicted)
    for category, count in gallery.counts.items():
        print(f"{category:<26}{count:>6}")
    if found is not None:
        print(f"{'predicted_to_fail':<26}{len(found.queries):>6}")
    print(f"report: {path}", file=sys.stderr)
    return 0


def _predicted_report(args: argparse.Namespace, ws: Workspace) -> int:
    """``failures`` on a data set without labels: the report of the queries predicted to fail (query
    performance prediction), the hardest first, each with the systems' top documents."""
    from retrieval.qpp.predict import predict
    from ui.present.predicted import report_html, unlabelled
    from ui.present.report import GALLERY_CSS, write_html

    if args.tuned:
        raise ValueError("--tuned compares a fine-tuned encoder on labelled queries: this data set has no labels")
    if not ws.dataset.queries:
        raise ValueError(f"{ws.dataset.name} has no queries to predict")
    _build_dense(ws)
    found = unlabelled(ws, predict(ws, None, BASE_SYSTEMS))
    assert found is not None, "a data set without labels has every query unlabelled"
    path = write_html(args.html, report_html(found, ws.dataset.name, GALLERY_CSS))
    for q in found.queries:
        print(f"{q.query_id}\t{q.difficulty:.3f}\t{q.text}")  # escapes shown visibly (``safe_output``)
    print(f"report: {path} (no labels: the {len(found.queries):,} queries predicted to fail of {found.total:,})",
          file=sys.stderr)
    return 0


def _predicted_queries(args: argparse.Namespace, ds: Dataset, ws: Workspace) -> tuple[Workspace, list[str] | None]:
    """``--queries``' file added to the data set (ids and texts as ``add_queries`` reads them: a bad line
    is a ``DataError`` naming the file and line) and its query ids; without it, the workspace as it is and
    None (every query of the data set)."""
    if args.queries is None:
        return ws, None
    from retrieval.data.readers.assembly import add_queries
    from retrieval.data.readers.decode import Text
    from retrieval.data.readers.queries import read_queries
    from retrieval.errors import LoadReport

    path = Path(args.queries)
    with_file = add_queries(ds, path)
    found = read_queries(Text.of_file(path, str(path)), path.name, LoadReport())[0]
    return ws.with_dataset(with_file), list(found)


def cmd_predict(args: argparse.Namespace) -> int:
    from retrieval.files.tabular import dumps
    from retrieval.qpp.predict import predict

    out = _output_path(args.out, "--out")
    ds, ws = _open(args)
    ws, query_ids = _predicted_queries(args, ds, ws)
    if not ws.dataset.queries:
        raise ValueError(f"{ds.name} has no queries to predict: give a file of them with --queries")
    systems = listed_systems(ws, args.systems)
    if any(ws.system(s).needs.vectors for s in systems):
        _build_dense(ws)
    predictions = predict(ws, query_ids, systems, k=args.k, labels=args.labels)
    for s, c in predictions.combinations.items():
        how = (f"fitted to nDCG@10 on {c.judged:,} judged queries, cross-fitted in {c.folds} folds"
               if c.how == "fitted" else "label-free (mean percentile, each family of evidence once)")
        print(f"{label(s)}: {how}", file=sys.stderr)
    columns = predictions.columns()
    text = dumps(columns, ([row[c] for c in columns] for row in predictions.rows()), "tsv")
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text.encode("utf-8"), "--out")
        print(f"predictions of {len(predictions.queries):,} queries: {out}", file=sys.stderr)
    return 0


def engine_arg(parser: argparse.ArgumentParser) -> None:
    """``--engine``: where BM25 and the vectors live (the CLI's, the app's and the benchmarks')."""
    parser.add_argument("--engine", default="in-process", metavar="SPEC",
                        help=f"index engine: {', '.join(ENGINE_SPECS)} (Milvus Lite embedded in that file, or a "
                             f"Milvus server; token in $RANKSCOPE_MILVUS_TOKEN)")
    parser.add_argument("--allow-insecure-token", action="store_true",
                        help="send $RANKSCOPE_MILVUS_TOKEN over plain milvus:// (unencrypted); refused otherwise")


def cmd_drop(args: argparse.Namespace) -> int:
    ds = load_dataset(args.dataset)
    engine = open_engine(args.engine, allow_insecure_token=args.allow_insecure_token, create=False)
    dropped = engine.drop(ds.corpus_hash)
    print(f"{ds.name}: {dropped} collection(s) dropped from the {engine.name} engine", file=sys.stderr)
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from retrieval.sharing.owners import Viewer, cli_owner, describe, when
    from retrieval.tracking import snapshots

    ds, ws = _open(args)
    if ws.store is None:
        raise ValueError("snapshots are kept in the store: drop --no-store")
    me = Viewer(cli_owner())
    corpus = ds.corpus_hash
    if args.list or args.mark_baseline or args.log:
        if args.mark_baseline:
            try:
                move = snapshots.mark_baseline(ws.store, corpus, args.mark_baseline, me)
            except KeyError as err:
                raise ValueError(err.args[0]) from None
            print(f"{args.mark_baseline!r} was the baseline already" if move is None else
                  f"the baseline moved to {move.moved_to!r}"
                  + (f" from {move.moved_from!r}" if move.moved_from else ""), file=sys.stderr)
        if args.list or args.mark_baseline:
            for snap in snapshots.listed(ws.store, corpus):
                print(f"{'*' if snap.baseline else ' '} {snap.name}  {when(snap.created)}  {snap.split}  "
                      f"{', '.join(snap.runs)}  {snap.note}  (taken by {describe(snap.owner, me)})")
            print(snapshots.baseline_line(ws.store, corpus, me))
        if args.log:
            moves = snapshots.baseline_moves(ws.store, corpus)
            for move in moves:
                print(f"{when(move.at)}  {move.moved_from or '(none)'} → {move.moved_to}  by {describe(move.who, me)}")
            if not moves:
                print("the baseline was never marked")
        return 0
    if not args.name:
        raise ValueError("name the snapshot: --name NAME (or --list, --log, --mark-baseline NAME)")
    name = snapshots.admit(ws.store, corpus, args.name, args.note, me, args.replace)  # before any run is computed
    replacing = args.replace and name in ws.store.snapshot_names(corpus, me)
    split = _split_of(ds, args.split)
    systems = evaluated_systems(args, ws)
    if any(ws.system(s).needs.vectors for s in systems):
        _build_dense(ws)
    snap = snapshots.save(ws.store, snapshots.take(ws, split, systems, name, args.note), me, args.replace)
    if args.baseline:
        snapshots.mark_baseline(ws.store, corpus, snap.name, me)
    print(f"snapshot {snap.name!r} of {ds.name} ({split}): {', '.join(systems)}"
          + (" (replaced)" if replacing else "") + ("; the baseline" if args.baseline else ""))
    return 0


def _output_path(value: str | None, flag: str) -> Path | None:
    """``--junit`` / ``--summary``'s file, checked before the work: not a folder, not a read-only file,
    in a folder that can be written to — made when missing, as a CI job's ``reports/`` often is (as
    pytest's ``--junitxml`` does); else a ValueError naming it (exit 2)."""
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise ValueError(f"{flag} {value}: is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {value}: the file is read-only")
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"{flag} {value}: its folder {str(folder)!r} cannot be made ({err.strerror or err})") from None
    if not folder.is_dir():
        raise ValueError(f"{flag} {value}: {str(folder)!r} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {value}: its folder {str(folder)!r} cannot be written to")
    return path


def write_atomic(path: Path, data: bytes, flag: str) -> None:
    """``data`` as the file ``path``, whole or not at all: written to a temporary file in the same
    folder, flushed to disk, then renamed over ``path`` (``os.replace``); a failed write (a full
    disk, no permission) removes the temporary file, leaves ``path`` as it was and is a ValueError
    naming it (exit 2)."""
    import tempfile

    target = Path(os.path.realpath(path))  # through a symbolic link ($GITHUB_STEP_SUMMARY may be one): the file
    tmp = None
    try:
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as err:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ValueError(f"{flag} {path}: could not be written ({err.strerror or err}); left as it was") from None


def cmd_check(args: argparse.Namespace) -> int:
    """The regression gate; exit 2 for any failure to decide, never the 1 of a regression: a ValueError
    says what (``main``), and anything else unforeseen is one line too, no traceback."""
    try:
        return _check(args)
    except ValueError:
        raise
    except Exception as err:
        raise ValueError(f"the check could not decide: {type(err).__name__}: {err}") from None


def _check(args: argparse.Namespace) -> int:
    from retrieval.tracking import check_report, snapshots

    metric, max_drop = snapshots.gate_metric(args.metric), snapshots.gate_max_drop(args.max_drop)
    junit, summary = _output_path(args.junit, "--junit"), _output_path(args.summary, "--summary")
    ds, ws = _open(args)
    if ws.store is None:
        raise ValueError("the baseline is kept in the store: drop --no-store")
    try:
        snap = (snapshots.load(ws.store, ds.corpus_hash, args.baseline) if args.baseline
                else snapshots.baseline(ws.store, ds.corpus_hash))
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    if snap is None:
        raise ValueError("no baseline marked for this corpus: --baseline NAME, or snapshot --mark-baseline NAME")
    split = _split_of(ds, args.split or snap.split)
    imported = import_runs(ws, args.run or [])
    listed = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else \
        [s for s in snap.runs if s in ws.system_names]
    systems = listed + [name for name in imported if name not in listed]
    unknown = [s for s in systems if s not in ws.system_names]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(ws.system_names)}")
    for name in snap.runs:
        if name in systems:
            continue
        if args.systems:  # left out on purpose: --systems chose
            print(f"warning: the baseline's system {name!r} is not checked (not in --systems)", file=sys.stderr)
        else:  # a run renamed, or not given: passing without it would pass what was never checked
            raise ValueError(f"the baseline's system {name!r} has no run today: renamed or removed? (give it with "
                             f"--run FILE={name}, or choose the systems with --systems)")
    if any(ws.system(s).needs.vectors for s in systems):
        _build_dense(ws)
    result = snapshots.check(ws, snap, systems, metric, max_drop, split)
    xml = check_report.junit_xml(result, strict=args.strict) if junit else None
    markdown = check_report.markdown_summary(result, strict=args.strict) if summary else None
    print(check_report.text_report(result, strict=args.strict))
    if junit and xml is not None:
        write_atomic(junit, xml, "--junit")
    # appended to, as GitHub's $GITHUB_STEP_SUMMARY is: what was there, then this, in one rename
    if summary and markdown is not None:
        before = summary.read_bytes() if summary.exists() else b""
        write_atomic(summary, before + markdown.encode("utf-8", "backslashreplace"), "--summary")
    return 1 if result.fails(args.strict) else 0


def _at_least(least: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer by the one number grammar (``retrieval.numbers``) of ``least``
    or more; anything else is argparse's one ``error:`` line and exit status 2."""

    def read(text: str) -> int:
        value = numbers.integer(text, what)
        if value < least:
            raise ValueError(f"{what} is an integer of {least} or more, not {value}")
        return value

    return numbers.flag(read)


def _max_drop(text: str) -> float:
    """``--max-drop`` as the check itself holds it (``snapshots.gate_max_drop``: finite, 0 or more)."""
    from retrieval.tracking.snapshots import gate_max_drop

    return gate_max_drop(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m retrieval", description=__doc__.split("\n")[0])
    p.set_defaults(closing=None)  # main's: what the command opened, closed when it returns
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, store: bool = True) -> None:
        sp.add_argument("dataset", help="BEIR folder or .zip, a JSONL/CSV/TSV/txt corpus")
        if store:
            sp.add_argument("--model", default=None, help="sentence-transformers id or folder "
                            "(default: bundled all-MiniLM-L6-v2)")
            sp.add_argument("--k1", type=numbers.flag(check_k1), default=None,
                            help="BM25's term-frequency saturation: --param bm25.k1 (default 0.9)")
            sp.add_argument("--b", type=numbers.flag(check_b), default=None,
                            help="BM25's length normalization: --param bm25.b (default 0.4)")
            sp.add_argument("--param", action="append", metavar="SYSTEM.NAME=VALUE",
                            type=numbers.flag(parameter_assignment), help=parameters_help())
            sp.add_argument("--index", choices=("auto", "flat", "hnsw", "sq8"), default="auto",
                            help="dense index: auto (flat, HNSW from 500,000 documents), flat, hnsw or sq8")
            sp.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
            sp.add_argument("--precision", default="auto", choices=PRECISIONS,
                            help="encoder arithmetic: auto (bf16 on CPUs with AVX-512 BF16 or AMX, fp16 on "
                                 "CUDA, else fp32) or forced")
            sp.add_argument("--language", default="auto", help="BM25's stemmer and stopwords: auto (detected on "
                            "a sample of the corpus) or an ISO 639-1 code such as en, fr, de")
            sp.add_argument("--store", default=None,
                            help="cache file (default: $RANKSCOPE_STORE or the user cache dir)")
            sp.add_argument("--no-store", action="store_true", help="compute everything, cache nothing")
            engine_arg(sp)

    ev = sub.add_parser("evaluate", help="metrics of the systems (BM25, dense, hybrid, ...) on a labelled split")
    common(ev)
    ev.add_argument("--split", default=None, help="labels split (default: test, else the first)")
    ev.add_argument("--systems", default=None, help=systems_help())
    ev.add_argument("--run", action="append", metavar="FILE[=NAME]",
                    help="a run file of another system (TREC 'qid Q0 docid rank score tag' or ranx JSON), "
                         "evaluated beside the others under NAME (default: its TREC tag or file stem); repeatable")
    ev.add_argument("--json", default=None, help="write each system's metrics with their 95%% intervals and "
                    "every pair's comparison here")
    ev.add_argument("--ci", action=argparse.BooleanOptionalAction, default=True,
                    help="each metric with its 95%% interval over the queries (percentile bootstrap; default on)")
    ev.add_argument("--run-dir", default=None, help="write one TREC run file per system here")
    ev.set_defaults(func=cmd_evaluate)

    info = sub.add_parser("info", help="load a data set and report its contents and warnings")
    common(info, store=False)
    info.set_defaults(func=cmd_info)

    ju = sub.add_parser("judges", help="how far the judges agree (weighted kappa, Krippendorff's alpha), the "
                                       "pairs to adjudicate, and the judgments as qrels")
    common(ju, store=False)
    ju.add_argument("--store", default=None, help="cache file (default: $RANKSCOPE_STORE or the user cache dir)")
    ju.add_argument("--top", type=_at_least(0, "--top"), default=20, help="pairs to adjudicate to list")
    ju.add_argument("--export", default=None, help="write the judgments as qrels here")
    ju.add_argument("--rule", default="median", help="how several judges' grades of a pair are merged: median (the "
                    "lower median), majority, min, max, or a judge's name (that judge's grades alone)")
    ju.add_argument("--format", default="trec", choices=("trec", "beir", "csv", "tsv"),
                    help="trec or beir: qrels merged by --rule; csv or tsv: every judge's grades, one a row")
    ju.add_argument("--import", dest="import_file", default=None, metavar="FILE",
                    help="add the judgments of a CSV/TSV (query_id or query, doc_id or docid, grade or rating, judge; "
                         "or Quepid's exports) first; nothing is stored unless every row maps; at most "
                         f"{MAX_IMPORT_ROWS:,} judgments a file")
    ju.add_argument("--judge", default="imported", help="the judge of an imported file without a judge column")
    ju.set_defaults(func=cmd_judges)

    se = sub.add_parser("search", help="one query, every system side by side")
    common(se)
    se.add_argument("query")
    se.add_argument("-k", type=_at_least(1, "-k"), default=10, help="documents listed per system")
    se.add_argument("--systems", default=None, help=systems_help())
    se.set_defaults(func=cmd_search)
    fa = sub.add_parser("failures", help="the failure gallery as one self-contained HTML report (without labels: "
                                         "the queries predicted to fail)")
    common(fa)
    fa.add_argument("--split", default=None, help="labels split (default: test, else the first)")
    fa.add_argument("--tuned", default=None, help="a fine-tuned encoder to compare (adds fixed/broken by fine-tuning)")
    fa.add_argument("--html", required=True, help="write the report here")
    fa.set_defaults(func=cmd_failures)
    pr = sub.add_parser("predict", help="which queries are likely to fail, labels or not: every query performance "
                                        "predictor and each system's combined prediction as a TSV, hardest first")
    common(pr)
    pr.add_argument("--systems", default=None, help=systems_help())
    pr.add_argument("--queries", default=None, metavar="FILE", help="predict the queries of this file (JSONL, "
                    "CSV/TSV, or .txt one a line) instead of the data set's")
    pr.add_argument("--out", default=None, metavar="FILE.tsv", help="write the TSV here (default: stdout)")
    pr.add_argument("--labels", choices=("auto", "none"), default="auto", help="auto: fit the combination to "
                    "nDCG@10 where at least 10 queries are judged (cross-fitted); none: label-free always")
    pr.add_argument("-k", "--k", type=_at_least(1, "--k"), default=100, help="how deep each list is read (NQC's "
                    "depth; default 100)")
    pr.set_defaults(func=cmd_predict)
    sn = sub.add_parser("snapshot", help="keep the systems' runs of a labelled split as a named snapshot "
                                         "(or list the snapshots, or mark one the baseline)")
    common(sn)
    sn.add_argument("--name", default=None, help="the snapshot's name: a new one (a name in use, or one that looks "
                    "like it, is refused), or with --replace one the command line took")
    sn.add_argument("--note", default="", help="a note kept with it (what changed; at most 2,000 characters)")
    sn.add_argument("--replace", action="store_true", help="replace the snapshot --name that the command line took "
                    "(never another maker's, never the baseline)")
    sn.add_argument("--split", default=None, help="labels split (default: test, else the first)")
    sn.add_argument("--systems", default=None, help=systems_help())
    sn.add_argument("--run", action="append", metavar="FILE[=NAME]", help="a run file to keep too (repeatable)")
    sn.add_argument("--baseline", action="store_true", help="mark this snapshot the corpus's baseline")
    sn.add_argument("--list", action="store_true", help="list the corpus's snapshots (* the baseline, who took "
                    "each) and who set the baseline when")
    sn.add_argument("--log", action="store_true", help="every move of the baseline: from, to, by whom, when")
    sn.add_argument("--mark-baseline", default=None, metavar="NAME", help="mark an existing snapshot the baseline")
    sn.set_defaults(func=cmd_snapshot)
    ck = sub.add_parser("check", help="the regression gate: the systems now against a baseline snapshot, query by "
                                      "query; exit 0 nothing regressed, 1 something did, 2 could not decide; a drop "
                                      "beyond --max-drop that is not significant, or (labels judged in the app) a "
                                      "system whose top 10 is judged below 0.9, is flagged, exit 0 (1 with --strict)")
    common(ck)
    ck.add_argument("--baseline", default=None, metavar="NAME", help="the snapshot to hold against (default: the "
                                                                      "one marked the baseline)")
    ck.add_argument("--split", default=None, help="labels split (default: the baseline's)")
    ck.add_argument("--systems", default=None, help="comma-separated (default: the baseline's systems)")
    ck.add_argument("--run", action="append", metavar="FILE[=NAME]",
                    help="a run file, checked against the baseline's run of the same name (repeatable)")
    ck.add_argument("--metric", default=PRIMARY, help="the metric compared (default: ndcg@10)")
    ck.add_argument("--max-drop", type=numbers.flag(_max_drop), default=0.01,
                    help="a drop larger than this, and significant, fails")
    ck.add_argument("--strict", action="store_true", help="fail (exit 1) on a drop larger than --max-drop that is "
                    "not significant too (too few queries to tell it from chance), and on a system whose top 10 "
                    "is not judged enough for a verdict (labels judged in the app)")
    ck.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML here")
    ck.add_argument("--summary", default=None, metavar="FILE", help="append a Markdown summary here "
                                                                   "(e.g. $GITHUB_STEP_SUMMARY)")
    ck.set_defaults(func=cmd_check)
    dr = sub.add_parser("drop", help="remove what an engine holds for a data set's corpus "
                                     "(its BM25 and vector collections)")
    common(dr, store=False)
    engine_arg(dr)
    dr.set_defaults(func=cmd_drop)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. What it opened (the store) is closed when it returns: its
    writes are in the file, no connection is left to the interpreter's exit."""
    with safe_output():  # ids, tags and file names may hold terminal escapes: printed visibly, never obeyed
        args = build_parser().parse_args(argv)
        with contextlib.ExitStack() as args.closing:
            try:
                code: int = args.func(args)
                return code
            except ValueError as err:  # DataError included: bad input is a message, not a traceback
                print(f"error: {err}", file=sys.stderr)
                return 2


def entry_point(argv: Sequence[str] | None = None) -> NoReturn:
    """``python -m retrieval`` and the ``rankscope`` script: ``main``, then the process ends with its
    exit code as soon as the command has decided.

    ``main`` has closed the store by then, so nothing the command wrote is left unsaved. What the
    interpreter's normal exit would still do is work nobody waits for, CPU-bound, growing with the
    corpus and slowed by the machine's load: freeing the loaded corpus, its indexes and runs (held in
    reference cycles: the cyclic collector frees them, at exit at the latest), and the exit hooks of
    the libraries the command loaded (a Milvus Lite engine first drains the compaction and index build
    that loading the corpus started). So once stdout and stderr are flushed the process leaves at once
    (``os._exit``): no exit hook runs, no thread is waited for, and a CI job waiting for the exit code
    gets it when the verdict is printed."""
    code = main(argv)
    if "logging" in sys.modules:  # a library's log handlers write out what they hold
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said there
            stream.flush()
    os._exit(code)
