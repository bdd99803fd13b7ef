"""Command line: ``python -m retrieval evaluate|info|search|failures ...``.

    python -m retrieval evaluate DATASET [--split test] [--systems bm25,dense,hybrid]
        [--run FILE[=NAME] ...] [--model PATH_OR_ID] [--json FILE] [--run-dir DIR]

prints a metrics table (with a paired permutation test of each system against the first),
writes ``{system: {metric: value}}`` as JSON and one TREC run file per system. ``--run`` adds a
run file of another system (TREC or ranx JSON, named NAME, else after its TREC tag or file stem)
beside the built-in ones; what reading it found goes to stderr as warnings.

    python -m retrieval failures DATASET [--split test] [--tuned MODEL] --html REPORT.html

writes the failure gallery as one self-contained HTML file (the app's *Export HTML report*).
Every command that searches takes ``--engine milvus:PATH.db`` (Milvus Lite) or ``--engine
milvus://HOST:PORT`` to put BM25 and the vectors in Milvus; ``python -m retrieval drop DATASET
--engine SPEC`` removes them there.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .dataset import Dataset
from .encoder import PRECISIONS
from .engines import ENGINE_SPECS, open_engine
from .evaluate import compare, significance_marks
from .lambdas import shown
from .language import corpus_tokenizer
from .metrics import PRIMARY, SIGNIFICANCE_LEVEL, SIGNIFICANT, TABLE_METRICS, cell
from .names import file_name
from .readers import load_dataset, read_run
from .run import write_trec
from .store import Store, default_store_path
from .systems import BM25, DENSE, HYBRID, SYSTEMS, label
from .terminal import safe_output
from .workspace import Workspace


def _progress(fraction: float, what: str) -> None:
    print(f"\r  {what} ({fraction:.0%})", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)


def _build_dense(ws: Workspace) -> None:
    print(f"encoder {ws.encoder.name} on {ws.encoder.compute}", file=sys.stderr)
    dense = ws.build_dense(progress=_progress)
    also = f"; {dense.repeats:,} documents repeat another's text" if dense.repeats > 0 else ""
    print(f"embeddings: {dense.from_store:,} from the store, {dense.encoded:,} encoded{also}", file=sys.stderr)


def _open(args) -> tuple[Dataset, Workspace]:
    ds = load_dataset(args.dataset, progress=_progress)
    for w in ds.report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    store = None if args.no_store else Store(args.store or default_store_path())
    tokenizer = corpus_tokenizer([d.full_text for d in ds.docs.values()], args.language)
    engine = open_engine(args.engine, allow_insecure_token=args.allow_insecure_token)
    ws = Workspace(ds, store, model=args.model, k1=args.k1, b=args.b, index_kind=args.index,
                   device=args.device, tokenizer=tokenizer, precision=args.precision, engine=engine)
    if engine.where:
        print(f"engine: {engine.name} at {engine.where}", file=sys.stderr)
        ws.build_lexical(progress=_progress)
    return ds, ws


def format_table(results: dict[str, dict[str, float]], marks: dict[str, dict[str, str]]) -> str:
    metrics = [m for m in TABLE_METRICS if any(m in r for r in results.values())]
    header = f"{'system':<24}" + "".join(f"{m:>13}" for m in metrics)
    lines = [header, "-" * len(header)]
    for system, row in results.items():
        cells = "".join(f"{cell(row.get(m), marks.get(system, {}).get(m, '')):>13}" for m in metrics)
        lines.append(f"{label(system):<24}{cells}")
    return "\n".join(lines)


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


def evaluated_systems(args, ws: Workspace) -> list[str]:
    """``--systems``, then the ``--run`` names not already listed; an unknown name is a ValueError."""
    imported = import_runs(ws, args.run or [])
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    systems += [name for name in imported if name not in systems]
    unknown = [s for s in systems if s not in ws.system_names]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(ws.system_names)}")
    return systems


def cmd_evaluate(args) -> int:
    ds, ws = _open(args)
    split = args.split or ds.default_split()
    if split is None:
        print(f"error: {ds.name} has no relevance labels; nothing to evaluate", file=sys.stderr)
        return 2
    if split not in ds.qrels:
        print(f"error: no split {split!r} in {ds.name} (it has: {', '.join(ds.splits)})", file=sys.stderr)
        return 2
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
    marks = significance_marks(evals, base)
    print(format_table(results, marks))
    if len(systems) > 1:
        print(f"{SIGNIFICANT} p < {SIGNIFICANCE_LEVEL:g} against {label(base)} (paired permutation test)")
        for s in systems[1:]:
            c = compare(evals[base], evals[s], PRIMARY)
            print(f"{label(s)} vs {label(base)}, nDCG@10 per query: "
                  f"{c.delta:+.4f} mean, {len(c.wins)} wins, {len(c.losses)} losses, {c.ties} ties, "
                  f"p = {c.p_value:.4f}")
    if HYBRID in systems:
        lam = ws.lambda_for(split)
        print(f"hybrid λ_test = {shown(lam.value)} ({lam.how})")
    print("seconds: " + ", ".join(f"{s} {t:.1f}" for s, t in timings.items()), file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        clean = {s: {m: (None if v != v else v) for m, v in row.items()} for s, row in results.items()}
        Path(args.json).write_text(json.dumps(clean, indent=2))  # NaN (no positive labels) → null
    if args.run_dir:  # each file named by a slug and hash of data set, split and system: inside --run-dir
        for s in systems:
            tag = s if ws.system(s).needs.run else f"rankscope-{s}"  # an imported run keeps its own name
            path = write_trec(ws.run(s, split), Path(args.run_dir) / file_name(ds.name, split, s, suffix=".trec"), tag)
            print(f"run: {path}", file=sys.stderr)
    return 0


def cmd_info(args) -> int:
    ds = load_dataset(args.dataset)
    print(json.dumps(ds.summary(), indent=2))
    for w in ds.report.warnings:
        print(f"warning: {w}")
    return 0


def cmd_search(args) -> int:
    ds, ws = _open(args)
    _build_dense(ws)
    results = ws.search_one(args.query, k=args.k, eval_split=ds.default_split())
    for system, hits in results.items():
        print(f"\n{label(system)}")
        for rank, (doc, score) in enumerate(hits, 1):
            title = ds.docs[doc].title or ds.docs[doc].text[:60]
            print(f"  {rank:>2}. {score:8.4f}  {doc}  {title[:70]}")
    return 0


def cmd_failures(args) -> int:
    from ui.present.figures import per_query_scatter, recall_curves
    from ui.present.report import write_gallery

    from .failures import failure_gallery
    from .tables import recall_at_ks, versus

    ds, ws = _open(args)
    split = ws.require_split(args.split or ds.default_split())
    _build_dense(ws)
    tuned = ws.with_model(args.tuned) if args.tuned else None
    gallery = failure_gallery(ws, split, tuned_ws=tuned)
    workspaces = {"": ws, **({"fine-tuned": tuned} if tuned is not None else {})}
    figures = [recall_curves(recall_at_ks(workspaces, split), split),
               per_query_scatter(*versus(ws, split), label(BM25), label(DENSE), query_text=ws.dataset.queries)]
    path = write_gallery(gallery, args.html, figures)
    for category, count in gallery.counts.items():
        print(f"{category:<26}{count:>6}")
    print(f"report: {path}", file=sys.stderr)
    return 0


def engine_arg(parser) -> None:
    """``--engine``: where BM25 and the vectors live (the CLI's, the app's and the benchmarks')."""
    parser.add_argument("--engine", default="in-process", metavar="SPEC",
                        help=f"index engine: {', '.join(ENGINE_SPECS)} (Milvus Lite embedded in that file, or a "
                             f"Milvus server; token in $RANKSCOPE_MILVUS_TOKEN)")
    parser.add_argument("--allow-insecure-token", action="store_true",
                        help="send $RANKSCOPE_MILVUS_TOKEN over plain milvus:// (unencrypted); refused otherwise")


def cmd_drop(args) -> int:
    ds = load_dataset(args.dataset)
    engine = open_engine(args.engine, allow_insecure_token=args.allow_insecure_token, create=False)
    dropped = engine.drop(ds.corpus_hash)
    print(f"{ds.name}: {dropped} collection(s) dropped from the {engine.name} engine", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m retrieval", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, store=True):
        sp.add_argument("dataset", help="BEIR folder or .zip, a JSONL/CSV/TSV/txt corpus")
        if store:
            sp.add_argument("--model", default=None, help="sentence-transformers id or folder "
                            "(default: bundled all-MiniLM-L6-v2)")
            sp.add_argument("--k1", type=float, default=0.9)
            sp.add_argument("--b", type=float, default=0.4)
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

    ev = sub.add_parser("evaluate", help="metrics of BM25 / dense / hybrid on a labelled split")
    common(ev)
    ev.add_argument("--split", default=None, help="labels split (default: test, else the first)")
    ev.add_argument("--systems", default="bm25,dense,hybrid", help=f"comma-separated: {','.join(SYSTEMS)}")
    ev.add_argument("--run", action="append", metavar="FILE[=NAME]",
                    help="a run file of another system (TREC 'qid Q0 docid rank score tag' or ranx JSON), "
                         "evaluated beside the others under NAME (default: its TREC tag or file stem); repeatable")
    ev.add_argument("--json", default=None, help="write {system: {metric: value}} here")
    ev.add_argument("--run-dir", default=None, help="write one TREC run file per system here")
    ev.set_defaults(func=cmd_evaluate)

    info = sub.add_parser("info", help="load a data set and report its contents and warnings")
    common(info, store=False)
    info.set_defaults(func=cmd_info)

    se = sub.add_parser("search", help="one query, every system side by side")
    common(se)
    se.add_argument("query")
    se.add_argument("-k", type=int, default=10)
    se.set_defaults(func=cmd_search)
    fa = sub.add_parser("failures", help="the failure gallery as one self-contained HTML report")
    common(fa)
    fa.add_argument("--split", default=None, help="labels split (default: test, else the first)")
    fa.add_argument("--tuned", default=None, help="a fine-tuned encoder to compare (adds fixed/broken by fine-tuning)")
    fa.add_argument("--html", required=True, help="write the report here")
    fa.set_defaults(func=cmd_failures)
    dr = sub.add_parser("drop", help="remove what an engine holds for a data set's corpus "
                                     "(its BM25 and vector collections)")
    common(dr, store=False)
    engine_arg(dr)
    dr.set_defaults(func=cmd_drop)
    return p


def main(argv=None) -> int:
    with safe_output():  # ids, tags and file names may hold terminal escapes: printed visibly, never obeyed
        args = build_parser().parse_args(argv)
        try:
            return args.func(args)
        except ValueError as err:  # DataError included: bad input is a message, not a traceback
            print(f"error: {err}", file=sys.stderr)
            return 2
