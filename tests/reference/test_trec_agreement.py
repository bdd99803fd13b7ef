"""Figures the field's tools agree with: every metric RankScope computes from a run equals trec_eval's
(pytrec_eval's, ir_measures') on the run file RankScope writes, ties at a cut included, because
every ranking here follows trec_eval's order (``retrieval.data.ranking``: score descending, then
document id descending by ``strcmp``), which these tests check against the tools themselves."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.data import ranking
from retrieval.data.readers.runs import read_run
from retrieval.evaluation import rank_metrics
from retrieval.evaluation.measures import evaluate_run
from retrieval.files.trec import write_trec
from retrieval.index.top_k import top_k, top_k_each
from retrieval.systems.fusion import fuse_runs
from tests.conftest import shared_dataset

# ids whose code-point and byte orders are both exercised: digits against letters, upper against
# lower case, a prefix against a longer id, two- and three-byte UTF-8 against ASCII
IDS = ["d1", "d10", "d2", "D2", "d", "z", "Z9", "é", "éa", "e", "中", "ÿ", "a-1", "a_1", "0", "9z"]
SCORES = [-1.0, 0.0, 0.5, 1.0, 2.0]  # a small alphabet: most lists hold ties
KS = (1, 2, 3, 5, 10)


def trec_measures(k: int) -> set[str]:
    """pytrec_eval's names of the measures the mapping below reads, at cutoff ``k``."""
    return {f"ndcg_cut.{k}", f"P.{k}", f"recall.{k}", f"map_cut.{k}", f"success.{k}",
            "ndcg", "map", "recip_rank", "num_ret", "num_rel_ret", "num_rel"}


def expected(name: str, k: int, trec: dict[str, float], burges: dict[str, float]) -> float:
    """RankScope's ``name@k`` (``k`` 0: the whole list) from trec_eval's values of one query: the
    mapping from ``rank_metrics.FAMILIES`` to trec_eval's measures, written out. ``burges``: trec_eval's
    values on labels mapped to the gain 2^grade − 1 (trec_eval's nDCG takes a label as its gain)."""
    if name == "ndcg":
        return trec[f"ndcg_cut_{k}"] if k else trec["ndcg"]
    if name == "ndcg_burges":
        return burges[f"ndcg_cut_{k}"] if k else burges["ndcg"]
    if name == "precision":
        return trec[f"P_{k}"] if k else trec["num_rel_ret"] / trec["num_ret"]
    if name == "recall":
        return trec[f"recall_{k}"] if k else (trec["num_rel_ret"] / trec["num_rel"] if trec["num_rel"] else 0.0)
    if name == "map":
        return trec[f"map_cut_{k}"] if k else trec["map"]
    if name == "mrr":  # trec_eval's recip_rank has no cutoff: the first relevant rank is 1 / recip_rank
        rr = trec["recip_rank"]
        return rr if not k or (rr and 1 / rr <= k + 1e-9) else 0.0
    if name == "hit_rate":
        return trec[f"success_{k}"] if k else float(trec["num_rel_ret"] > 0)
    if name == "hits":
        return round(trec[f"P_{k}"] * k) if k else trec["num_rel_ret"]
    raise AssertionError(f"no trec_eval mapping for {name}")


def pytrec_values(path: Path, qrels: dict, measures: set[str]) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values on the run file at ``path`` (read by pytrec_eval's own parser)."""
    import pytrec_eval

    with path.open() as f:
        run = pytrec_eval.parse_run(f)
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


@st.composite
def runs_with_ties(draw):
    """Up to 4 queries, each a list of distinct ids with scores from a 5-value alphabet (or no list),
    labels of grade 0 to 3 on ids retrieved or not (a query may have none relevant)."""
    run, qrels = {}, {}
    for i in range(draw(st.integers(1, 4))):
        q = f"q{i}"
        qrels[q] = draw(st.dictionaries(st.sampled_from(IDS), st.integers(0, 3), min_size=1, max_size=8))
        if draw(st.integers(0, 5)):
            docs = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS)))
            run[q] = [(d, draw(st.sampled_from(SCORES))) for d in docs]
    return run, qrels


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs_with_ties())
def test_every_family_equals_trec_eval_on_the_written_run_file(data):
    run, qrels = data
    metrics = [f"{name}@{k}" for name in rank_metrics.FAMILIES for k in KS] + list(rank_metrics.FAMILIES)
    ours = rank_metrics.scores(run, qrels, metrics)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trec(run, Path(tmp) / "run.trec", "ties")
        measures = set().union(*(trec_measures(k) for k in KS))
        theirs = pytrec_values(path, qrels, measures)
        gains = {q: {d: 2 ** g - 1 for d, g in docs.items()} for q, docs in qrels.items()}
        burges = pytrec_values(path, gains, measures)
    for q in qrels:
        for m in metrics:
            name, _, cut = m.partition("@")
            if q not in theirs:  # trec_eval leaves out a query without a list: RankScope scores it 0
                assert ours[m][q] == 0.0, (m, q)
                continue
            want = expected(name, int(cut or 0), theirs[q], burges[q])
            assert ours[m][q] == pytest.approx(want, abs=1e-9), (m, q, run.get(q), qrels[q])


@settings(max_examples=100, deadline=None)
@given(runs_with_ties())
def test_the_file_lists_each_query_in_trec_eval_order_and_reads_back_so(data):
    """The rank column says where trec_eval ranks each line; the reader keeps that order."""
    run, _ = data
    run = {q: hits for q, hits in run.items() if hits}
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trec(run, Path(tmp) / "run.trec", "ties")
        lines = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
        back = read_run(path).run if run else {}
    for q, hits in run.items():
        written = [(d, float(s), int(r)) for qid, _, d, r, s, _ in lines if qid == q]
        trec_order = sorted(written, key=lambda w: w[0].encode(), reverse=True)  # strcmp, descending ...
        trec_order.sort(key=lambda w: -w[1])  # ... under score, descending (a stable sort)
        assert [w[0] for w in written] == [w[0] for w in trec_order]
        assert [w[2] for w in written] == list(range(1, len(hits) + 1))
        assert back[q] == [(d, s) for d, s, _ in written]


def test_a_file_read_in_is_ranked_by_score_then_id_whatever_its_rank_column_says(tmp_path):
    path = tmp_path / "theirs.trec"
    path.write_text("q Q0 a 1 2.0 t\nq Q0 b 2 2.0 t\nq Q0 c 3 5.0 t\nq Q0 B 4 2.0 t\n", encoding="utf-8")
    imported = read_run(path)
    assert imported.run["q"] == [("c", 5.0), ("b", 2.0), ("a", 2.0), ("B", 2.0)]  # 'b' > 'a' > 'B' by strcmp
    assert any("trec_eval" in w for w in imported.report.warnings)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]), min_size=1, max_size=40), st.integers(0, 12),
       st.randoms(use_true_random=False))
def test_top_k_keeps_among_ties_at_the_cut_those_trec_eval_ranks_first(values, k, rnd):
    ids = [f"doc{i:03d}" for i in range(len(values))]
    rnd.shuffle(ids)  # rows and ids in unrelated orders
    scores = np.asarray(values, dtype=np.float32)
    want = [d for d, s in ranking.sorted_hits(zip(ids, scores.tolist())) if s > 0][:k]
    tie_rank = ranking.tie_rank(ids)
    rows, top = top_k(scores, k, tie_rank=tie_rank)
    assert [ids[r] for r in rows] == want
    assert top.tolist() == [float(scores[r]) for r in rows]
    matrix = np.stack([scores, scores[::-1].copy()])
    each = top_k_each(matrix, k, tie_rank)
    assert [ids[r] for r in each[0][0]] == want
    reversed_ = [d for d, s in ranking.sorted_hits(zip(ids, matrix[1].tolist())) if s > 0][:k]
    assert [ids[r] for r in each[1][0]] == reversed_


def test_top_k_among_equal_scores_takes_the_greatest_ids():
    ids = ["a", "c", "b", "e", "d"]
    rows, _ = top_k(np.array([1.0, 1.0, 1.0, 1.0, 2.0]), 3, tie_rank=ranking.tie_rank(ids))
    assert [ids[r] for r in rows] == ["d", "e", "c"]  # d scores more; then e and c, the greatest ids


def test_tie_rank_orders_ids_as_strcmp_does():
    ids = ["é", "z", "Z", "a", "ab", "中", "ÿ", ""]
    by_bytes = sorted(ids, key=lambda d: d.encode("utf-8"), reverse=True)
    place = ranking.tie_rank(ids)
    assert [ids[i] for i in np.argsort(place)] == by_bytes


def test_fusion_breaks_equal_fused_scores_by_id_descending():
    lex = {"q": [("a", 3.0), ("b", 1.0)]}
    emb = {"q": [("b", 5.0), ("a", 1.0)]}  # a and b fuse to the same RRF score
    assert [d for d, _ in fuse_runs([lex, emb], "rrf")["q"]] == ["b", "a"]
    assert [d for d, _ in fuse_runs([emb, lex], "rrf")["q"]] == ["b", "a"]


def test_dense_index_keeps_the_tied_documents_trec_eval_ranks_first():
    """Repeated vectors tie; FAISS keeps an arbitrary few of those at the cut."""
    from retrieval.index.dense_index import DenseIndex

    rng = np.random.default_rng(0)
    base = rng.normal(size=(3, 8)).astype(np.float32)
    vectors = np.concatenate([np.repeat(base[:1], 30, axis=0), base[1:]])
    ids = [f"d{i:02d}" for i in range(len(vectors))]
    index = DenseIndex(ids, vectors, kind="flat")
    query = base[:1]
    scores, rows = index.search_vectors(query, 5)
    got = [ids[r] for r in rows[0]]
    full = ranking.sorted_hits(zip(ids, index.scores(query[0]).tolist()))
    assert got == [d for d, _ in full][:5]
    assert scores.shape == rows.shape == (1, 5)


def test_judged_counts_the_top_k_nDCG_counts():
    run = {"q": [("b", 1.0), ("a", 1.0), ("c", 2.0)]}
    assert rank_metrics.judged(run, {"q": {"b": 0}}, 2) == {"q": 0.5}  # c, then b before a
    assert rank_metrics.judged(run, {"q": {"a": 1}}, 2) == {"q": 0.0}


@pytest.mark.slow  # a BM25 and a QL index over NFCorpus, 323 queries: 5–10 s each on 2 cores
@pytest.mark.parametrize("system", ["bm25", "ql"])
def test_a_real_run_with_ties_evaluates_as_trec_eval_and_ir_measures_evaluate_its_file(system, tmp_path):
    """NFCorpus's test queries by BM25 and by query likelihood at depth 100: ties at cuts are common
    (short documents matching the same terms), and every figure agrees with the tools on the file."""
    import ir_measures
    from ir_measures import AP, R, nDCG

    from retrieval.data.readers import load_dataset

    ds = load_dataset(shared_dataset("nfcorpus"))
    qrels = ds.qrels["test"]
    queries = {q: ds.queries[q] for q in qrels}
    if system == "bm25":
        from retrieval.index.bm25_index import BM25Index

        ids = list(ds.docs)
        index = BM25Index(ids, [ds.docs[d].full_text for d in ids])
        run = index.search(queries, 100)
    else:
        from retrieval.index.tokenize import Tokenizer
        from retrieval.systems.ql import QLIndex

        ids = list(ds.docs)
        ql = QLIndex([ds.docs[d].full_text for d in ids], Tokenizer(), ids)
        run = {}
        for q, text in queries.items():
            rows, scores = ql.top(text, 100)
            run[q] = [(ids[r], float(s)) for r, s in zip(rows.tolist(), scores.tolist())]
    tied = sum(1 for hits in run.values() for a, b in zip(hits, hits[1:]) if a[1] == b[1])
    assert tied > 0, "the run should hold ties for this test to mean anything"
    assert all(hits == ranking.sorted_hits(hits) for hits in run.values())  # made in trec_eval's order
    path = write_trec(run, tmp_path / f"{system}.trec", system)
    ev = evaluate_run(run, qrels, metrics=("ndcg@10", "recall@100", "map"))
    trec = pytrec_values(path, {q: dict(d) for q, d in qrels.items()}, {"ndcg_cut.10", "recall.100", "map"})
    names = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "map": "map"}
    for m, name in names.items():
        for q, value in ev.per_query[m].items():
            assert value == pytest.approx(trec[q][name] if q in trec else 0.0, abs=1e-9), (m, q)
    measured: dict = {}
    for m in ir_measures.iter_calc([nDCG @ 10, R @ 100, AP], qrels, ir_measures.read_trec_run(str(path))):
        measured.setdefault(str(m.measure), {})[m.query_id] = m.value
    for m, measure in {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "map": AP}.items():
        theirs = measured[str(measure)]
        assert set(ev.per_query[m]) <= set(theirs)  # every query RankScope evaluates retrieved something
        for q, value in ev.per_query[m].items():
            assert value == pytest.approx(theirs[q], abs=1e-9), (m, q)
        assert ev.mean[m] == pytest.approx(float(np.mean([theirs[q] for q in ev.per_query[m]])), abs=1e-12)
