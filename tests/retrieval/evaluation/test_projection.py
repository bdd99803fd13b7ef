"""The Embeddings view's library: the role sample, UMAP projections cached in the store, cosine
similarities by role and the plotly figures.

Real components only: the demo corpus, the tiny random BERT, FAISS, a real SQLite file and
umap-learn (the first fit compiles numba code unless its disk cache is warm).
"""
from __future__ import annotations

import html
from types import SimpleNamespace

import numpy as np
import pytest

from retrieval.data.readers import load_dataset
from retrieval.evaluation.projection import (
    DOC_ROLES,
    EASY,
    HARD,
    POSITIVE,
    QUERY,
    ROLES,
    cosine_knn,
    project,
    sample_points,
    sample_ranks,
    similarities,
    umap_is_warm,
    umap_layout,
    warm_up,
)
from retrieval.index.encoder import load_encoder
from retrieval.store import Store
from retrieval.workspace import Workspace
from tests.conftest import DEMO, build_tiny_encoder
from ui.present.embeddings import ROLE_STYLE, projection_figure, rank_line, side_by_side_figure, similarity_histogram

N_QUERIES, N_HARD, N_EASY = 12, 3, 3


@pytest.fixture(scope="module")
def demo(tmp_path_factory, tiny_encoder):
    """The demo data set with the tiny encoder, a store file and a 12-query sample of test."""
    path = tmp_path_factory.mktemp("projection") / "store.sqlite3"
    store = Store(path)
    ws = Workspace(load_dataset(DEMO), store, model=tiny_encoder)
    sample = sample_points(ws, "test", n_queries=N_QUERIES, hard_per_query=N_HARD, easy_per_query=N_EASY)
    yield SimpleNamespace(path=path, store=store, ws=ws, ds=ws.dataset, sample=sample)
    store.close()


def by_query(sample) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for p in sample.points:
        roles = out.setdefault(p.query_id, {r: [] for r in ROLES})
        roles[p.role].append(p.doc_id)
    return out


# ---- the sample -----------------------------------------------------------------------------
def test_sample_has_each_role_in_the_asked_numbers(demo):
    qrels = demo.ds.qrels["test"]
    groups = by_query(demo.sample)
    assert len(groups) == N_QUERIES == len(demo.sample.query_ids)
    for qid, roles in groups.items():
        assert roles[QUERY] == [None]
        assert sorted(roles[POSITIVE]) == sorted(d for d, v in qrels[qid].items() if v > 0)
        assert len(roles[POSITIVE]) >= 1
        assert len(roles[HARD]) == N_HARD and len(roles[EASY]) == N_EASY
        docs = roles[POSITIVE] + roles[HARD] + roles[EASY]
        assert len(docs) == len(set(docs))  # one role per document and query
    counts = demo.sample.counts()
    assert counts[QUERY] == N_QUERIES and counts[HARD] == counts[EASY] == N_QUERIES * N_HARD
    assert sum(counts.values()) == len(demo.sample.points)
    assert "dense run" in demo.sample.hard_from and demo.ws.encoder.fingerprint[:12] in demo.sample.hard_from


def test_roles_follow_the_labels_and_the_dense_ranking(demo):
    qrels, queries = demo.ds.qrels["test"], demo.ds.queries
    for qid, roles in by_query(demo.sample).items():
        labels = qrels[qid]
        assert all(labels[d] > 0 for d in roles[POSITIVE])
        assert all(labels.get(d, 0) <= 0 for d in roles[HARD] + roles[EASY])
        # hard negatives: exactly the encoder's own top non-positive hits, in rank order
        hits = demo.ws.dense.search({qid: queries[qid]}, 1000)[qid]
        assert roles[HARD] == [d for d, _ in hits if labels.get(d, 0) <= 0][:N_HARD]
        assert not set(roles[EASY]) & set(roles[HARD])


def test_points_carry_their_text_title_label_and_ranks(demo):
    runs = {s: demo.ws.run(s, "test") for s in ("bm25", "dense", "hybrid")}
    qrels = demo.ds.qrels["test"]
    for p in demo.sample.points:
        if p.role == QUERY:
            assert p.text == demo.ds.queries[p.query_id] and p.doc_id is None
            assert p.ranks == {"bm25": None, "dense": None, "hybrid": None}
            continue
        doc = demo.ds.docs[p.doc_id]
        assert p.text == doc.full_text and p.title == doc.title
        assert p.label == qrels[p.query_id].get(p.doc_id)
        for system, run in runs.items():
            ids = [d for d, _ in run[p.query_id]]
            assert p.ranks[system] == (ids.index(p.doc_id) + 1 if p.doc_id in ids else None)
    hard = [p for p in demo.sample.points if p.role == HARD]
    assert all(p.ranks["dense"] is not None for p in hard)
    # the fine-tuned side can show its own ranks: the same ones for the same workspace
    assert sample_ranks(demo.ws, demo.sample) == [p.ranks for p in demo.sample.points]


def test_the_same_seed_draws_the_same_sample(demo):
    again = sample_points(demo.ws, "test", n_queries=N_QUERIES, hard_per_query=N_HARD, easy_per_query=N_EASY)
    assert again.points == demo.sample.points and again.hash == demo.sample.hash
    other = sample_points(demo.ws, "test", n_queries=N_QUERIES, hard_per_query=N_HARD,
                          easy_per_query=N_EASY, seed=1)
    assert other.hash != demo.sample.hash


def test_one_query_and_its_neighbourhood(demo):
    qid = demo.sample.query_ids[0]
    labels = demo.ds.qrels["test"][qid]
    s = sample_points(demo.ws, "test", query_id=qid, neighbours=10, easy_per_query=4)
    assert s.query_ids == [qid]
    near = [d for d, _ in demo.ws.run("dense", "test")[qid][:10]]
    role = {p.doc_id: p.role for p in s.points if p.role != QUERY}
    assert set(near) | set(labels) <= set(role)
    for d, r in role.items():
        if labels.get(d, 0) > 0:
            assert r == POSITIVE
        else:
            assert r == (HARD if d in near else EASY)
    assert len(role) == len(set(near) | set(labels)) + 4  # plus the random easy negatives


def test_bad_split_or_query_is_refused(demo):
    with pytest.raises(ValueError, match=r"no labels for split 'dev' \(it has: "):
        sample_points(demo.ws, "dev")
    with pytest.raises(ValueError, match="not a labelled query of split 'test'"):
        sample_points(demo.ws, "test", query_id="no-such-query")


# ---- projection and cache -------------------------------------------------------------------
def test_projection_is_computed_once_then_read_from_the_store(demo):
    calls: list[tuple[float, str]] = []
    first = project(demo.ws, demo.sample, progress=lambda f, m: calls.append((f, m)))
    n = len(demo.sample.points)
    assert not first.cached and first.xy.shape == (n, 2) and np.isfinite(first.xy).all()
    assert first.model == demo.ws.encoder.fingerprint and first.sample == demo.sample.hash
    assert first.params["metric"] == "cosine" and first.seconds > 0
    messages = [m for _, m in calls]
    assert any(m.startswith("embedding") for m in messages)
    assert any(m.startswith(f"fitting UMAP on {n} points") for m in messages)
    assert calls[-1][0] == 1.0 and [f for f, _ in calls] == sorted(f for f, _ in calls)
    assert umap_is_warm() and warm_up() == 0.0
    assert demo.store.db["projections"].count == 1
    # a second call, and a new Store on the same file (another process), read the cached row
    calls.clear()
    second = project(demo.ws, demo.sample, progress=lambda f, m: calls.append((f, m)))
    assert second.cached and np.array_equal(second.xy, first.xy) and second.seconds == pytest.approx(first.seconds)
    assert calls == [(1.0, f"projection of {n} points read from the cache")]  # no embedding, no fit
    reopened = Store(demo.path)
    ws = Workspace(demo.ds, reopened, model=demo.ws.encoder)
    assert project(ws, demo.sample).cached
    assert demo.store.db["projections"].count == 1
    reopened.close()
    # other UMAP parameters are another entry
    assert not project(demo.ws, demo.sample, n_neighbors=10).cached
    assert demo.store.db["projections"].count == 2


def test_another_encoder_gets_its_own_projection(demo, tmp_path):
    other = demo.ws.with_model(load_encoder(str(build_tiny_encoder(tmp_path, seed=1)), device="cpu"))
    base = project(demo.ws, demo.sample)
    before = demo.store.db["projections"].count
    tuned = project(other, demo.sample)
    assert base.cached and not tuned.cached
    assert tuned.model != base.model and tuned.xy.shape == base.xy.shape
    assert demo.store.db["projections"].count == before + 1
    fig = side_by_side_figure(base, tuned, demo.sample, tuned_ranks=sample_ranks(other, demo.sample))
    assert len(fig.data) == 2 * (1 + len(ROLES))
    assert [t.showlegend for t in fig.data].count(True) == 1 + len(ROLES)  # one legend for both panels
    assert {t.xaxis for t in fig.data} == {"x", "x2"}
    # the fine-tuned panel is only turned to face the base one: its distances are unchanged
    right = np.vstack([np.column_stack([t.x, t.y]) for t in fig.data[1 + 1 + len(ROLES):]])
    rows = np.concatenate([demo.sample.indices(r) for r in ROLES])
    dist = lambda xy: np.linalg.norm(xy[:, None] - xy[None], axis=2)  # noqa: E731
    assert np.allclose(dist(right), dist(tuned.xy[rows]), atol=1e-3)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:precomputed_knn")
def test_cosine_knn_matches_brute_force_and_umap_builds_the_same_graph():
    import umap

    rng = np.random.default_rng(3)
    x = rng.normal(size=(150, 24)).astype(np.float32)
    idx, dist = cosine_knn(x, 8, block=64)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    full = 1.0 - unit.astype(np.float64) @ unit.T.astype(np.float64)
    np.fill_diagonal(full, 0.0)
    assert (idx[:, 0] == np.arange(150)).all() and np.allclose(dist[:, 0], 0.0)
    assert (idx == np.argsort(full, axis=1)[:, :8]).all()
    assert np.allclose(dist, np.sort(full, axis=1)[:, :8], atol=1e-6)
    # the fuzzy graph UMAP builds from these neighbours is the one its own cosine search gives
    ours = umap.UMAP(metric="cosine", n_neighbors=8, random_state=0, n_jobs=1, precomputed_knn=(idx, dist),
                     n_epochs=10).fit(x)
    theirs = umap.UMAP(metric="cosine", n_neighbors=8, random_state=0, n_jobs=1, n_epochs=10).fit(x)
    assert abs(ours.graph_ - theirs.graph_).max() < 1e-4


def test_equal_texts_share_their_place():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 16)).astype(np.float32)
    xy = umap_layout(np.vstack([x, x[:5]]), n_neighbors=10)
    assert xy.shape == (45, 2) and np.array_equal(xy[40:], xy[:5])
    with pytest.raises(ValueError, match="at least 5 distinct texts"):
        umap_layout(np.vstack([x[:2]] * 10))


# ---- similarities and figures ---------------------------------------------------------------
def test_similarities_are_the_cosine_of_query_and_document(demo):
    sims = similarities(demo.ws, demo.sample)
    assert set(sims) == set(DOC_ROLES)
    for role in DOC_ROLES:
        assert len(sims[role]) == demo.sample.counts()[role]
        assert np.all(np.abs(sims[role]) <= 1.0 + 1e-6)
    p = demo.sample.points[demo.sample.indices(POSITIVE)[0]]
    q, d = demo.ws.encoder.encode([demo.ds.queries[p.query_id], demo.ds.docs[p.doc_id].full_text])
    assert sims[POSITIVE][0] == pytest.approx(float(q @ d / (np.linalg.norm(q) * np.linalg.norm(d))), abs=1e-5)
    fig = similarity_histogram({"base": sims, "fine-tuned": sims})
    assert [t.name for t in fig.data] == list(DOC_ROLES) * 2
    assert all(t.type == "histogram" for t in fig.data)
    assert f"{POSITIVE} {np.mean(sims[POSITIVE]):.2f}" in fig.layout.annotations[0].text


def test_projection_figure_has_a_trace_per_role_lines_and_hover_ranks(demo):
    proj = project(demo.ws, demo.sample)
    fig = projection_figure(proj, demo.sample, title="base")
    assert [t.name for t in fig.data] == ["query → document", *ROLES]
    markers = fig.data[1:]
    assert len({t.marker.symbol for t in markers}) == len({t.marker.color for t in markers}) == len(ROLES)
    assert all(t.marker.symbol == ROLE_STYLE[t.name]["symbol"] for t in markers)
    n_docs = len(demo.sample.points) - len(demo.sample.query_ids)
    lines = fig.data[0]
    assert len(lines.x) == 3 * n_docs and lines.x[2::3] == (None,) * n_docs
    # hover: the document's title and its three ranks
    hard = fig.data[1 + ROLES.index(HARD)]
    i = hard.customdata[0]
    p = demo.sample.points[i]
    assert (hard.x[0], hard.y[0]) == (proj.xy[i, 0], proj.xy[i, 1])
    assert html.escape(p.title) in hard.text[0]
    ranks = "—" if p.ranks["bm25"] is None else p.ranks["bm25"]
    assert f"BM25 {ranks} · dense {p.ranks['dense']} · hybrid " in hard.text[0]
    assert rank_line(p.ranks) in hard.text[0]
    assert rank_line({"bm25": 3, "dense": 12, "hybrid": None}) == "BM25 3 · dense 12 · hybrid —"
    query = fig.data[1]
    assert html.escape(demo.ds.queries[demo.sample.query_ids[0]]) in query.text[0]
