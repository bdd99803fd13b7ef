"""RankScope — the Gradio app's entry point.

    python app.py [--data PATH] [--model ID_OR_FOLDER] [--store FILE] [--engine SPEC] [--shared] [--host H] [--port P]

Opens the bundled demo corpus (already indexed at start-up) unless ``--data`` names another data
set. BM25 is built before the page opens; a corpus whose encoding takes longer than a few seconds
goes on encoding in the background, and the page shows how far it is. The views live in ``ui/``
(one module per tab, assembled by ``ui.shell``); the named API endpoints are listed in docs/app.md.

A browser is one session across reloads (a token it keeps: ``retrieval.sharing.browser_tokens``),
and an uploaded data set's files are kept beside the store, so a reload reopens it
(``retrieval.data.kept``). A shared deployment (``--shared``, or on Hugging Face Spaces,
``SPACE_ID`` set: ``shared``) keeps the uploads a browser kept its own, and the query sets and
snapshots made in a browser session that session's until it publishes them
(``retrieval.sharing.owners``), and a judge's name the session's that first grades under it, its grades
counted in other sessions' views only once published (``retrieval.judging.judge_owners``); elsewhere they
are everyone's who opens the corpus.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from retrieval import Store, load_dataset, numbers
from retrieval.evaluation.projection import warm_up_elsewhere
from retrieval.files.terminal import terminal_safe
from retrieval.index.encoder import PRECISIONS
from retrieval.index.engines import open_engine
from retrieval.sharing.model_policy import ModelPolicy, on_spaces
from training.job import JobLimits, JobQueue
from ui.boundary import guard
from ui.data import DEMO
from ui.present.report import GALLERY_CSS
from ui.registry import FOREGROUND_S, Limits, Registry, budget_mb
from ui.shell import build_app

ROOT = Path(__file__).resolve().parent
CSS_PATH = ROOT / "assets" / "style.css"
MAX_UPLOAD = os.environ.get("RANKSCOPE_MAX_UPLOAD", "200mb")


def create(data: str | Path | None = None, model: str | None = None, store_path: str | None = None,
           language: str = "auto", precision: str = "auto", foreground_s: float | None = FOREGROUND_S,
           engine: str | None = None, allow_models: tuple[str, ...] = (), trust_clients: bool = False,
           limits: Limits | None = None, allow_insecure_token: bool = False, shared: bool = False):
    """Open the store, the index engine (``retrieval.index.engines``: in-process unless ``engine`` names
    Milvus) and the starting data set, and build the Blocks (used by main and tests); encoding that
    takes longer than ``foreground_s`` goes on in the background. Clients may switch to the
    encoders ``ModelPolicy`` offers: the base, the bundled one, those trained here and
    ``allow_models`` (any, with ``trust_clients``, except on Hugging Face Spaces). ``shared`` (always on
    Spaces: ``is_shared``): query sets, snapshots and judges are their browser session's until published."""
    store = Store(store_path) if store_path else Store()
    index_engine = open_engine(engine, allow_insecure_token=allow_insecure_token)
    if index_engine.where:
        print(f"engine: {index_engine.name} at {index_engine.where}", file=sys.stderr)
    policy = ModelPolicy.create(model, store.models_dir, allow_models, trust_clients)
    if trust_clients and not policy.trust_clients:
        print("--trust-clients is ignored on Hugging Face Spaces: clients choose among the offered encoders",
              file=sys.stderr)
    registry = Registry(store, model, language=language, precision=precision, foreground_s=foreground_s,
                        engine=index_engine, limits=limits, policy=policy, shared=is_shared(shared))
    def report(fraction: float, what: str) -> None:
        print(f"\r{what} ({fraction:.0%})", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)

    dataset = load_dataset(data or DEMO, progress=report)

    key = registry.open(dataset, progress=report, budgeted=False)  # the operator's choice, whatever its size
    registry.pin(key)  # every new page starts on it: never closed
    status = registry.get(key).encoding
    if status is not None and status.state in ("encoding", "indexing"):
        print(f"\nencoding goes on in the background ({status.done:,} of {status.total:,} documents done): "
              "BM25 answers at once, dense and the hybrids join when it is done", file=sys.stderr, flush=True)
    jobs = JobQueue(store, JobLimits.for_deployment(registry.shared))  # per client address where strangers share it
    return guard(build_app(registry, key, jobs)), registry


def is_shared(flag: bool = False) -> bool:
    """Whether this deployment is shared by strangers: ``--shared``, or on Hugging Face Spaces."""
    return bool(flag) or on_spaces()


def launch_kwargs(store: Store | None = None, max_upload: str = MAX_UPLOAD) -> dict:
    """Server settings: upload size limit, and nothing served outside Gradio's own cache.

    Gradio serves only its upload/output cache (no ``allowed_paths``, no static paths); the code
    folder, the store file, the trained models and the kept uploads are blocked outright on top of that.
    """
    blocked = [str(ROOT)]
    if store is not None:
        db = Path(store.path).resolve()
        blocked += [str(db), f"{db}-wal", f"{db}-shm", str(store.models_dir.resolve()), str(store.kept_dir.resolve())]
    return {"css_paths": [CSS_PATH] if CSS_PATH.exists() else None, "css": GALLERY_CSS, "max_file_size": max_upload,
            "blocked_paths": blocked, "allowed_paths": []}


def port(text: str) -> int:
    """``--port`` (and ``$GRADIO_SERVER_PORT``): a TCP port, an integer from 1 to 65535 by the one
    number grammar (``retrieval.numbers``)."""
    value = numbers.integer(text, "the port")
    if not 1 <= value <= 65535:
        raise ValueError(f"the port is an integer from 1 to 65535, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """``python app.py``'s flags (SECURITY.md names each)."""
    p = argparse.ArgumentParser(description="RankScope: compare BM25, dense and hybrid retrieval.")
    p.add_argument("--data", default=None, help="data set to open (default: the bundled demo)")
    p.add_argument("--model", default=None, help="sentence-transformers id or folder (default: all-MiniLM-L6-v2)")
    p.add_argument("--store", default=None, help="cache file (default: $RANKSCOPE_STORE or the user cache dir)")
    p.add_argument("--language", default="auto", help="BM25's stemmer and stopwords: auto (detected per corpus) "
                   "or an ISO 639-1 code such as en, fr, de")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="encoder arithmetic: auto (bf16 on CPUs with AVX-512 BF16 or AMX, fp16 on CUDA, else fp32) "
                   "or forced, e.g. fp32")
    p.add_argument("--engine", default=os.environ.get("RANKSCOPE_ENGINE", "in-process"), metavar="SPEC",
                   help="where BM25 and the vectors live: in-process (default), milvus:PATH.db (Milvus Lite, "
                   "embedded) or milvus://HOST:PORT (a Milvus server; token in $RANKSCOPE_MILVUS_TOKEN)")
    p.add_argument("--allow-model", action="append", default=[], metavar="PATH_OR_ID",
                   help="an encoder clients may switch to, besides the base, the bundled one and those trained "
                   "here (repeatable)")
    p.add_argument("--trust-clients", action="store_true",
                   help="let clients load any model folder or Hugging Face id (a laptop only; never on Spaces)")
    p.add_argument("--memory-budget-mb", type=numbers.flag(budget_mb), default=None, metavar="MB",
                   help="memory the open data sets may take, all sessions together (default: "
                   "$RANKSCOPE_MEMORY_BUDGET_MB or 4096)")
    p.add_argument("--allow-insecure-token", action="store_true",
                   help="send $RANKSCOPE_MILVUS_TOKEN over plain milvus:// (unencrypted); refused otherwise")
    p.add_argument("--shared", action="store_true",
                   help="a deployment strangers share (always so on Hugging Face Spaces, SPACE_ID set): the query "
                   "sets, snapshots and judges a browser session makes are its own until it publishes them (only "
                   "their maker removes a set or grades under a judge's name)")
    p.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    p.add_argument("--port", type=numbers.flag(port), default=os.environ.get("GRADIO_SERVER_PORT", "7860"))
    return p


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    limits = Limits(budget_bytes=int(args.memory_budget_mb * 2**20)) if args.memory_budget_mb else None
    try:
        app, registry = create(args.data, args.model, args.store, args.language, args.precision, engine=args.engine,
                               allow_models=tuple(args.allow_model), trust_clients=args.trust_clients, limits=limits,
                               allow_insecure_token=args.allow_insecure_token, shared=args.shared)
    except ValueError as err:  # a bad data set, store or engine: the message, not a traceback
        sys.exit(f"error: {terminal_safe(str(err))}")
    warm_up_elsewhere()  # first start: UMAP's numba kernels compiled and cached, in a process of its own
    app.queue(default_concurrency_limit=2).launch(server_name=args.host, server_port=args.port,
                                                  **launch_kwargs(registry.store))


if __name__ == "__main__":
    main()
