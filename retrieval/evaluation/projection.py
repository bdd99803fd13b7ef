"""Where queries, positives and negatives lie in an encoder's space: samples, embeddings, UMAP.

QuadrupletBERT (Liu, Wang, Wang, Ye and Zhang, "QuadrupletBERT: An Efficient Model For
Embedding-Based Large-Scale Retrieval", NAACL-HLT 2021) trains an encoder so that a query sits
close to its positive documents, and both the hard negatives (literally related, yet not relevant) and the
simple negatives are pushed away by a margin (§3.1, eq. 3–4). This module shows whether an
encoder has that geometry, on a fixed sample of labelled queries:

* ``sample_points`` — the sample. Roles, after §3.1 and §4.1:
  *query*; *positive* — a document labelled > 0 for it; *hard negative* — a document the
  encoder itself ranks high that is not a known positive (§4.1: "retrieve a candidate set with
  the trained model, sample hn from it"), here the highest-ranked non-positives of the sampling
  workspace's dense run; *easy negative* — a random non-positive document (§4.1's "randomly
  select a sentence not containing the answer", the paper's simple negative n).
  The sample is drawn once, with the BASE workspace, so the base and the fine-tuned encoder are
  shown on the very same points.
* ``embed_sample`` / ``project`` — embeddings (from the store where cached) and a 2-D UMAP layout
  with the cosine metric, cached in the store by (sample hash, encoder fingerprint, UMAP
  parameters).
* ``similarities`` — cos(q, d) of each query with its positive, hard and easy documents: the
  loss wants the first high and the other two low.
* ``align`` — a second layout turned to face the first (orthogonal Procrustes), so base and
  fine-tuned projections can be drawn side by side (``ui.present.embeddings``).

Formulas. Cosine similarity cos(u, v) = ⟨u, v⟩ / (‖u‖·‖v‖); QuadrupletBERT's distance is
f = 1 − cos (eq. 4). UMAP's ``metric="cosine"`` is that same distance, 1 − cos, which is what
its k-nearest-neighbour graph is built from.

Speed. For fewer than 4,096 points umap-learn computes all pairwise distances with its numba
cosine called once per pair through scikit-learn, most of a fit's time. We compute the same exact
k-nearest neighbours with one matrix product (``cosine_knn``) and hand them to UMAP as
``precomputed_knn`` with ``metric="cosine"``; the fuzzy graph it builds is the same (to float32
rounding) and the fit takes a third of the time (``bench/README.md``, ``projection_speed.py``).
Duplicate texts (a document that is a hard negative of one query and an easy negative of another)
are fitted once and share their place.

First use. The first fit in a process needs UMAP's numba code (``umap_is_warm``, ``warm_up``). umap-learn
is imported through ``numba_guard.import_cached``, so its kernels are compiled once per installation
and loaded from numba's cache afterwards (``bench/README.md``, ``first_use.py``). ``n_jobs=1`` makes
UMAP set numba's threads to one for the fit (thread-local): its ``parallel=True`` kernels run on the
calling thread, with no team of threads spinning on a busy machine for a fit of a few hundred points.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data.run import Run, rank_maps
from retrieval.evaluation.numba_guard import NUMBA_LOCK, cache_folder, import_cached
from retrieval.index.dense_index import embed_texts
from retrieval.progress import Progress, counting
from retrieval.store import cache_key, text_hash
from retrieval.systems import BASE_SYSTEMS, DENSE
from retrieval.workspace import Workspace

QUERY, POSITIVE, HARD, EASY = "query", "positive", "hard negative", "easy negative"
ROLES = (QUERY, POSITIVE, HARD, EASY)
DOC_ROLES = (POSITIVE, HARD, EASY)
RANK_DEPTH = 1000
MIN_DISTINCT = 5  # fewer distinct texts than this give no meaningful layout

_warm = False  # a UMAP fit has completed in this process: numba code is compiled


# ---- the sample -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    role: str
    query_id: str
    doc_id: str | None  # None for the query itself
    text: str  # what is embedded: the query, or the document as the retrievers see it
    title: str  # the document's title (its opening words if it has none), or the query text
    label: int | None  # graded label of (query, document) in the split; None if not judged
    ranks: dict[str, int | None] = field(default_factory=dict)  # system -> rank (None: not retrieved)


@dataclass
class Sample:
    """Points to project, with what defined them. ``hash`` keys cached projections."""

    dataset: str  # the data set's content hash
    split: str
    points: list[Point]
    hard_from: str  # which encoder's dense run gave the hard negatives
    params: dict[str, Any]

    @property
    def hash(self) -> str:
        return cache_key(kind="projection-sample",
                         points=[(p.role, p.query_id, p.doc_id, text_hash(p.text)) for p in self.points])

    @property
    def query_ids(self) -> list[str]:
        return [p.query_id for p in self.points if p.role == QUERY]

    def indices(self, role: str) -> list[int]:
        return [i for i, p in enumerate(self.points) if p.role == role]

    def counts(self) -> dict[str, int]:
        return {role: len(self.indices(role)) for role in ROLES}


def sample_points(ws: Workspace, split: str, n_queries: int = 50, hard_per_query: int = 3,
                  easy_per_query: int = 3, seed: int = 0, query_id: str | None = None,
                  neighbours: int = 20) -> Sample:
    """A seeded sample of labelled queries of ``split`` and their documents, by role.

    Without ``query_id``: ``n_queries`` queries drawn at random among those with at least one
    label > 0 (kept in the data set's order), each with all its positives, its
    ``hard_per_query`` highest-ranked non-positive documents in ``ws``'s dense run and
    ``easy_per_query`` random documents that are neither. With ``query_id``: that query, every
    document labelled for it, its ``neighbours`` nearest documents (the dense run's top) and
    ``easy_per_query`` random ones; a document's role then follows its label (> 0: positive)
    and, for the others, whether the encoder puts it in the neighbourhood (hard) or not (easy).
    Each point carries its ranks under BM25, dense and hybrid (depth 1000) for its query.
    """
    ds = ws.dataset
    ws.require_split(split)
    queries = ds.split_queries(split)
    qrels = {q: {d: v for d, v in labels.items() if d in ds.docs} for q, labels in ds.qrels[split].items()}
    runs = _runs(ws, split)
    dense = runs[DENSE]
    rng = np.random.default_rng(seed)
    if query_id is None:
        labelled = [q for q in queries if any(v > 0 for v in qrels[q].values())]
        chosen = sorted(rng.choice(len(labelled), size=min(n_queries, len(labelled)), replace=False))
        roles = {labelled[i]: _sampled_roles(qrels[labelled[i]], dense.get(labelled[i], []),
                                             hard_per_query, easy_per_query, rng, ds.doc_ids)
                 for i in chosen}
    else:
        if query_id not in queries:
            raise ValueError(f"query {query_id!r} is not a labelled query of split {split!r}")
        roles = {query_id: _neighbourhood_roles(qrels[query_id], dense.get(query_id, []), neighbours,
                                                easy_per_query, rng, ds.doc_ids)}
    maps = rank_maps(runs, list(roles))
    points = []
    for qid, docs in roles.items():
        points.append(Point(QUERY, qid, None, queries[qid], queries[qid], None, _ranks_of(maps, qid, None)))
        for doc_id, role in docs:
            doc = ds.docs[doc_id]
            points.append(Point(role, qid, doc_id, doc.full_text, doc.title or doc.text[:80],
                                qrels[qid].get(doc_id), _ranks_of(maps, qid, doc_id)))
    enc = ws.encoder
    return Sample(ds.content_hash, split, points,
                  hard_from=f"the dense run of {enc.name} (encoder {enc.fingerprint[:12]})",
                  params={"n_queries": n_queries, "hard_per_query": hard_per_query,
                          "easy_per_query": easy_per_query, "seed": seed, "query_id": query_id,
                          "neighbours": neighbours})


def _sampled_roles(labels: dict[str, int], dense_hits: list[tuple[str, float]], n_hard: int, n_easy: int,
                   rng: np.random.Generator,
                   doc_ids: list[str]) -> list[tuple[str, str]]:
    positives = _positives(labels)
    hard = [d for d, _ in dense_hits if labels.get(d, 0) <= 0][:n_hard]
    easy = _random_docs(doc_ids, n_easy, set(positives) | set(hard), rng)
    return [(d, POSITIVE) for d in positives] + [(d, HARD) for d in hard] + [(d, EASY) for d in easy]


def _neighbourhood_roles(labels: dict[str, int], dense_hits: list[tuple[str, float]], neighbours: int,
                         n_easy: int, rng: np.random.Generator,
                         doc_ids: list[str]) -> list[tuple[str, str]]:
    near = [d for d, _ in dense_hits[:neighbours]]
    docs = list(dict.fromkeys([*_positives(labels), *near, *labels]))
    docs += _random_docs(doc_ids, n_easy, set(docs), rng)
    near_set = set(near)
    return [(d, POSITIVE if labels.get(d, 0) > 0 else HARD if d in near_set else EASY) for d in docs]


def _positives(labels: dict[str, int]) -> list[str]:
    """Documents labelled > 0, highest label first."""
    return [d for d, v in sorted(labels.items(), key=lambda kv: -kv[1]) if v > 0]


def _random_docs(doc_ids: list[str], n: int, exclude: set[str], rng: np.random.Generator) -> list[str]:
    """``n`` distinct documents drawn uniformly from those not in ``exclude`` (fewer if none left)."""
    size = min(len(doc_ids), n + len(exclude))
    drawn = (doc_ids[i] for i in rng.choice(len(doc_ids), size=size, replace=False))
    return [d for d in drawn if d not in exclude][:n]


def _runs(ws: Workspace, split: str) -> dict[str, Run]:
    """system -> the workspace's run on the split, depth 1000 (from the store when cached)."""
    return {s: ws.run(s, split, RANK_DEPTH) for s in BASE_SYSTEMS}


def _ranks_of(maps: dict[str, dict[str, dict[str, int]]], qid: str, doc_id: str | None) -> dict[str, int | None]:
    return {s: (maps[s][qid].get(doc_id) if doc_id is not None else None) for s in BASE_SYSTEMS}


def sample_ranks(ws: Workspace, sample: Sample) -> list[dict[str, int | None]]:
    """Each point's ranks under another workspace's systems (e.g. the fine-tuned encoder's)."""
    maps = rank_maps(_runs(ws, sample.split), sample.query_ids)
    return [_ranks_of(maps, p.query_id, p.doc_id) for p in sample.points]


# ---- embeddings and similarities ------------------------------------------------------------
def embed_sample(ws: Workspace, sample: Sample, progress: Progress | None = None) -> np.ndarray:
    """``(len(points), dim)`` embeddings by ``ws``'s encoder, read from the store where cached."""
    cb = counting(progress, "embedding {done}/{total} texts")
    queries = ws.encoder.for_queries()
    if queries is ws.encoder:
        return embed_texts(ws.encoder, [p.text for p in sample.points], ws.store, progress=cb)
    # an asymmetric encoder: query points through the query route, documents through the other
    rows = {role: [i for i, p in enumerate(sample.points) if (p.role == QUERY) == (role == QUERY)]
            for role in (QUERY, "document")}
    out = np.zeros((len(sample.points), ws.encoder.dim), dtype=np.float32)
    done = 0
    for role, encoder in ((QUERY, queries), ("document", ws.encoder)):
        def step(n: int, _total: int, offset: int = done) -> None:
            if cb:
                cb(offset + n, len(sample.points))
        out[rows[role]] = embed_texts(encoder, [sample.points[i].text for i in rows[role]], ws.store, progress=step)
        done += len(rows[role])
    return out


def cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """cos(u, v) = ⟨u, v⟩ / (‖u‖·‖v‖), row by row."""
    u, v = np.atleast_2d(u).astype(np.float64), np.atleast_2d(v).astype(np.float64)
    cos: np.ndarray = np.einsum("ij,ij->i", u, v) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    return cos


def similarities(ws: Workspace, sample: Sample, vectors: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """role -> cos(query, document) for every document point of that role, in sample order.

    ``vectors``: the sample's embeddings if already at hand (else ``embed_sample``).
    """
    vectors = embed_sample(ws, sample) if vectors is None else vectors
    query_row = {p.query_id: i for i, p in enumerate(sample.points) if p.role == QUERY}
    out = {}
    for role in DOC_ROLES:
        rows = sample.indices(role)
        qrows = [query_row[sample.points[i].query_id] for i in rows]
        out[role] = cosine(vectors[qrows], vectors[rows]) if rows else np.zeros(0)
    return out


# ---- UMAP -----------------------------------------------------------------------------------
@dataclass
class Projection:
    xy: np.ndarray  # (len(sample.points), 2)
    params: dict[str, Any]
    seconds: float  # how long the fit took (when it was computed, also for a cached one)
    cached: bool  # read from the store, no fit in this call
    model: str  # encoder fingerprint
    sample: str  # sample hash

    @property
    def x(self) -> np.ndarray:
        return self.xy[:, 0]

    @property
    def y(self) -> np.ndarray:
        return self.xy[:, 1]


def umap_is_warm() -> bool:
    """True once a UMAP fit has completed in this process (numba's code is compiled)."""
    return _warm


def warm_up(seed: int = 0) -> float:
    """Import umap-learn and fit a tiny UMAP so later fits find numba's code compiled (or loaded from
    its cache); seconds it took (0 if warm).

    It never keeps a projection waiting longer than it would have without it: the fit is skipped when
    ``NUMBA_LOCK`` is held (a projection or a metric is running: a projection compiles what it needs
    itself), and a projection that comes while the warm-up fits waits only for the compilation it
    needs too (numba compiles a kernel once per process), then for a fit of 64 points.
    """
    if _warm:
        return 0.0
    start = time.perf_counter()
    umap_module()  # importing compiles (or loads) pynndescent's eagerly typed kernels: outside the lock
    if not NUMBA_LOCK.acquire(blocking=False):
        return time.perf_counter() - start
    try:
        rng = np.random.default_rng(seed)
        centres = rng.normal(size=(4, 16))
        umap_layout((centres[rng.integers(0, 4, 64)] + 0.3 * rng.normal(size=(64, 16))).astype(np.float32))
    finally:
        NUMBA_LOCK.release()
    return time.perf_counter() - start


def warm_mark() -> Path:
    """The file a finished ``warm_up`` leaves in numba's cache folder: UMAP's kernels are there for these
    versions of umap-learn, pynndescent, numba and Python (a new version compiles them again)."""
    versions = "-".join(version(package) for package in ("umap-learn", "pynndescent", "numba"))
    return cache_folder() / f"umap-warm-{versions}-py{sys.version_info[0]}.{sys.version_info[1]}"


def warm_up_elsewhere(mark: Path | None = None) -> subprocess.Popen[bytes] | None:
    """At an app's first start (``mark``, default ``warm_mark()``, absent): ``warm_up`` in a process of
    its own, at low priority, which fills numba's cache and then leaves the mark; the process, or
    None when the mark is there.

    A process, not a thread: compiling holds the GIL and the warm-up's fit holds ``NUMBA_LOCK``, which
    would slow the app's start and its first requests; at ``nice`` 10 it takes only CPU time the app
    leaves. A projection asked for before it is done compiles in the app as it would without it.
    """
    mark = mark or warm_mark()
    if mark.exists():
        return None
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds the retrieval package
    code = ("import os, pathlib, sys\n"
            "if hasattr(os, 'nice'): os.nice(10)\n"
            "from retrieval.evaluation.projection import warm_up\n"
            "warm_up()\n"
            "mark = pathlib.Path(sys.argv[1]); mark.parent.mkdir(parents=True, exist_ok=True); mark.touch()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    return subprocess.Popen([sys.executable, "-c", code, str(mark)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def umap_module() -> Any:
    """umap-learn, imported with its numba kernels (and pynndescent's) cached (``numba_guard.import_cached``)."""
    return import_cached("umap", ("pynndescent",))


def umap_params(seed: int = 42, n_neighbors: int = 15, min_dist: float = 0.1) -> dict[str, Any]:
    return {"method": "umap", "metric": "cosine", "n_components": 2, "n_neighbors": n_neighbors,
            "min_dist": min_dist, "seed": seed, "umap-learn": version("umap-learn")}


def project(ws: Workspace, sample: Sample, seed: int = 42, n_neighbors: int = 15, min_dist: float = 0.1,
            progress: Progress | None = None) -> Projection:
    """2-D UMAP layout of the sample's embeddings by ``ws``'s encoder, from the store when cached.

    Keyed by (sample hash, encoder fingerprint, UMAP parameters and version). ``progress(fraction,
    message)`` is told about embedding (0–0.3), fitting (0.3) and the end (1.0).
    """
    report = progress or (lambda fraction, message: None)
    params = umap_params(seed, n_neighbors, min_dist)
    model = ws.encoder.fingerprint
    key = cache_key(kind="projection", sample=sample.hash, model=model, params=params)
    hit = ws.store.get_projection(key) if ws.store is not None else None
    if hit is not None:
        report(1.0, f"projection of {len(sample.points)} points read from the cache")
        return Projection(hit[0], params, hit[1], True, model, sample.hash)
    vectors = embed_sample(ws, sample, lambda f, m: report(0.3 * f, m))
    report(0.3, f"fitting UMAP on {len(sample.points)} points")
    start = time.perf_counter()
    xy = umap_layout(vectors, n_neighbors, min_dist, seed)
    seconds = time.perf_counter() - start
    if ws.store is not None:
        ws.store.put_projection(key, sample=sample.hash, model=model, params=params, xy=xy, seconds=seconds)
    report(1.0, f"projected {len(sample.points)} points in {seconds:.1f} s")
    return Projection(xy, params, seconds, False, model, sample.hash)


def umap_layout(vectors: np.ndarray, n_neighbors: int = 15, min_dist: float = 0.1,
                seed: int = 42) -> np.ndarray:
    """``(n, 2)`` float32 UMAP coordinates (cosine metric); equal rows get the same place."""
    global _warm
    umap = umap_module()  # slow to import (numba, pynndescent): only when a projection is made
    distinct, inverse = np.unique(np.asarray(vectors, dtype=np.float32), axis=0, return_inverse=True)
    if len(distinct) < MIN_DISTINCT:
        raise ValueError(f"a projection needs at least {MIN_DISTINCT} distinct texts, not {len(distinct)}")
    k = min(n_neighbors, len(distinct) - 1)
    knn = cosine_knn(distinct, k)
    reducer = umap.UMAP(n_components=2, metric="cosine", n_neighbors=k, min_dist=min_dist,
                        random_state=seed, n_jobs=1, precomputed_knn=knn)
    with NUMBA_LOCK, warnings.catch_warnings():  # numba-parallel code: one thread at a time
        warnings.simplefilter("ignore")  # UMAP's notes on seeds, knn search indexes and graphs
        layout = reducer.fit_transform(distinct)
    _warm = True
    return np.asarray(layout, dtype=np.float32)[inverse.reshape(-1)]


def cosine_knn(vectors: np.ndarray, k: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours under the cosine distance 1 − cos(u, v), each row's own index
    first (distance 0), as UMAP's small-data path finds them: (indices, distances), each (n, k)."""
    unit = np.asarray(vectors, dtype=np.float64)
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    n = len(unit)
    indices, dists = np.empty((n, k), dtype=np.int64), np.empty((n, k), dtype=np.float32)
    for start in range(0, n, block):
        d = np.clip(1.0 - unit[start:start + block] @ unit.T, 0.0, 2.0)
        rows = np.arange(len(d))
        d[rows, start + rows] = 0.0
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, axis=1), axis=1, kind="stable")
        indices[start:start + len(d)] = np.take_along_axis(part, order, axis=1)
        dists[start:start + len(d)] = np.take_along_axis(d, indices[start:start + len(d)], axis=1)
    return indices, dists


def align(xy: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``xy`` rotated / reflected and moved to best match ``reference`` (orthogonal Procrustes).

    Distances within ``xy`` are unchanged; two UMAP fits then face the same way side by side.
    """
    from scipy.linalg import orthogonal_procrustes

    mu, mu_ref = xy.mean(axis=0), reference.mean(axis=0)
    rotation, _ = orthogonal_procrustes(xy - mu, reference - mu_ref)
    turned: np.ndarray = ((xy - mu) @ rotation + mu_ref).astype(np.float32)  # scipy is untyped: Any
    return turned
