"""Coverage before conclusions: a system whose lists were never pooled is not declared a loser on
labels judged in the app, metrics deeper than the judged pool are not measurable there, and a data
set's own qrels (relevant documents only) are reported but not gated. Real stores, real runs."""
from __future__ import annotations

import math
from html import unescape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.data.dataset import Dataset
from retrieval.evaluation.metrics import NDCG_CONDENSED, VIEW_METRICS
from retrieval.judging.coverage import (
    MIN_JUDGED_AT_10,
    VERDICT_METRIC,
    coverage,
    coverages,
    from_judging,
    gated_marks,
    measurable,
    pool_depth,
    verdicts,
)
from retrieval.judging.judgments import merged_qrels
from retrieval.judging.settled_comparisons import standings
from retrieval.systems import BM25, DENSE
from retrieval.workspace import Workspace
from tests.helpers import judged_at_10
from ui.common import conclusions_note, metrics_rows
from ui.present.tables import conclusion_lines, report_summary, shortfall_text

N = 20  # judged queries


def late_joiner(n: int = N):
    """Hybrid and Dense pooled (their top 10 judged on every query), Hybrid finding the relevant
    document first and Dense third; Learned sparse joined after judging began: its top 10 holds
    the relevant document first too, then nine documents nobody judged."""
    runs = {"Hybrid": {}, "Dense": {}, "Learned sparse": {}}
    judged = {}
    for i in range(n):
        q = f"q{i}"
        filler = [(f"d{i}-{j}", 1.0 - j / 20) for j in range(1, 10)]
        runs["Hybrid"][q] = [(f"rel{i}", 2.0), *filler]
        runs["Dense"][q] = [*filler[:2], (f"rel{i}", 0.9), *filler[2:]]
        runs["Learned sparse"][q] = [(f"rel{i}", 3.0), *((f"s{i}-{j}", 1.0 - j / 20) for j in range(1, 10))]
        judged[q] = {f"rel{i}": 2, **{d: 0 for d, _ in filler}}
    return runs, judged


def as_judgments(qrels) -> list[dict]:
    return [{"query_id": q, "doc_id": d, "grade": g, "judge": "ann"}
            for q, docs in qrels.items() for d, g in docs.items()]


def test_a_system_never_pooled_is_not_declared_the_loser_and_the_note_says_judge_n_more():
    runs, judged = late_joiner()
    rows = {frozenset((r.a, r.b)): r for r in standings(runs, judged)}
    late = [r for pair, r in rows.items() if "Learned sparse" in pair]
    assert late and all(r.blocked and not r.settled for r in late)  # before: "settled: Hybrid beats Learned sparse"
    for r in late:
        (short,) = r.verdict.lacking
        assert short.system == "Learned sparse" and short.judged == pytest.approx(0.1)
        assert short.unjudged == short.to_threshold == 9 * N  # its whole top 10 on every judged query
        text = shortfall_text(r.verdict)
        assert "not enough of Learned sparse's results judged" in text and f"judge {9 * N} more" in text
        assert r.verdict.metric == VERDICT_METRIC and r.verdict.condensed.metric == NDCG_CONDENSED
    pooled = rows[frozenset(("Hybrid", "Dense"))]
    assert pooled.settled and not pooled.blocked and (pooled.a, pooled.b) == ("Dense", "Hybrid")
    assert [r.blocked for r in standings(runs, judged)][-len(late):] == [True] * len(late)  # held back last
    # on the condensed list its nDCG'@10 is the best of the three: what was unjudged no longer counts against it
    cond = {c.system: c.condensed for c in coverages(runs, judged, as_judgments(judged)).values()}
    assert cond["Learned sparse"] == pytest.approx(1.0) and cond["Dense"] < 1.0


def test_coverage_agrees_with_judged_at_10_and_counts_the_pool():
    runs, judged = late_joiner(6)
    shares = judged_at_10(runs, judged)
    for name, run in runs.items():
        c = coverage(name, run, judged)
        assert c.judged == pytest.approx(shares[name][0]) and c.interval == shares[name][1]
    assert coverage("Hybrid", runs["Hybrid"], judged).fully_judged == 1.0
    assert coverage("Learned sparse", runs["Learned sparse"], judged).fully_judged == 0.0
    assert pool_depth(runs, judged) == 10


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 12)), min_size=1, max_size=8))
def test_to_threshold_is_the_fewest_judgments_that_reach_it(lists):
    """Judging ``to_threshold`` of the unjudged top-10 documents (the best chosen) lifts judged@10
    to the threshold; one fewer, chosen as well, does not."""
    run, qrels = {}, {}
    for i, (length, judged_n) in enumerate(lists):
        docs = [f"q{i}d{j}" for j in range(length)]
        run[f"q{i}"] = [(d, 1.0 - j / 100) for j, d in enumerate(docs)]
        qrels[f"q{i}"] = {"rel": 1, **{d: 0 for d in docs[:min(judged_n, length)]}}
    c = coverage("s", run, qrels)

    def judged_after(extra: int) -> float:  # judge ``extra`` more, the largest gains (shortest lists) first
        labels = {q: dict(docs) for q, docs in qrels.items()}
        for q in sorted(run, key=lambda q: len(run[q][:10])):
            for d, _ in run[q][:10]:
                if extra and d not in labels[q]:
                    labels[q][d] = 0
                    extra -= 1
        return coverage("s", run, labels).judged

    assert c.unjudged >= c.to_threshold >= 0
    assert judged_after(c.to_threshold) >= MIN_JUDGED_AT_10 - 1e-9
    if c.to_threshold:
        assert judged_after(c.to_threshold - 1) < MIN_JUDGED_AT_10


def test_a_data_sets_own_qrels_are_reported_but_not_gated(store):
    """BEIR lists relevant documents only: every system's judged@10 is low, and nothing is blocked."""
    runs, judged = late_joiner()
    beir = {q: {d: g for d, g in docs.items() if g > 0} for q, docs in judged.items()}
    corpus = "beir-corpus"
    assert from_judging(beir, store.judgments(corpus)) == set()
    found = verdicts(runs, beir, store.judgments(corpus))
    assert found and all(v.may_conclude for v in found)
    assert all(not c.gated and c.judged <= 0.1 + 1e-9 for c in coverages(runs, beir, []).values())
    # a few judgments merged into the data's labels keep the data's convention; judged-only queries are gated
    store.put_judgments(corpus, [("q0", "text", "d0-1", 0, "ann")])
    merged = {**beir, "q0": {**beir["q0"], "d0-1": 0}}
    assert from_judging(merged, store.judgments(corpus)) == set()
    store.put_judgments(corpus, [(q, "text", d, g, "ann") for q, docs in judged.items() for d, g in docs.items()])
    assert from_judging(judged, store.judgments(corpus)) == set(judged)
    assert not all(v.may_conclude for v in verdicts(runs, judged, store.judgments(corpus)))


def test_metrics_deeper_than_the_pool_are_not_measurable():
    assert not measurable("recall@100", 10) and not measurable("recall@1000", 10)
    assert not measurable("map", 10) and not measurable("bpref", 100)
    assert measurable("ndcg@10", 3) and measurable("judged@10", 3) and measurable("pnr", 1)
    assert measurable("recall@100", 100) and measurable("map", None)  # None: not judged in the app


# ---- through a real workspace: Evaluate's table and verdicts, and the report -----------------
def judged_in_app(dataset: Dataset, store, ws: Workspace, depth: int = 3) -> Dataset:
    """Judge BM25's top ``depth`` of every query in the store (the first relevant, the rest not),
    and the data set with those judgments as its only labels: a top-3 pool dense was never in."""
    run = ws.run(BM25, "test")
    rows = []
    for q in dataset.queries:
        for rank, (d, _) in enumerate(run.get(q, [])[:depth]):
            rows.append((q, dataset.queries[q], d, 1 if rank == 0 else 0, "ann"))
    store.put_judgments(dataset.corpus_hash, rows)
    labels = merged_qrels(store.judgments(dataset.corpus_hash))
    return Dataset(dataset.name, dataset.docs, dataset.queries, {"test": labels})


@pytest.fixture
def toy_ws(toy_dataset, store, tiny_encoder):
    ds = Dataset(toy_dataset.name, toy_dataset.docs, toy_dataset.queries, {"test": toy_dataset.qrels["test"]})
    return Workspace(ds, store, model=tiny_encoder)


def test_evaluate_on_labels_judged_in_the_app_shows_n_m_and_no_verdict_its_judgments_cannot_carry(
        toy_ws, store, tiny_encoder):
    ds = judged_in_app(toy_ws.dataset, store, toy_ws)
    ws = Workspace(ds, store, model=tiny_encoder)
    rows = metrics_rows(ws, "test", (BM25, DENSE))
    column = dict(zip(VIEW_METRICS, range(1, len(VIEW_METRICS) + 1)))
    for row in rows:  # before: recall@100 "1.0000 [1.000, 1.000]" for every system
        for m in ("recall@100", "map", "bpref"):
            assert row[column[m]].startswith("n/m (pool depth "), (m, row)
        assert row[column["ndcg@10"]][0].isdigit() and row[column["judged@10"]][0].isdigit()
    note = unescape(conclusions_note(ws, "test", (BM25, DENSE)))  # the judged pool's word, never nDCG's
    from retrieval.evaluation.metric_tables import judged_pool

    left = len(judged_pool(ws, "test", (BM25, DENSE)).unjudged)
    assert note.startswith(f"**No verdict yet on the judged pool:** {left:,} of the systems' top-")
    assert " beats " not in note and "not a verdict" in note


def test_the_same_labels_from_the_data_set_are_measured_and_concluded(toy_ws):
    rows = metrics_rows(toy_ws, "test", (BM25, DENSE))
    assert not any(cell.startswith("n/m") for row in rows for cell in row)
    note = unescape(conclusions_note(toy_ws, "test", (BM25, DENSE)))
    assert "no verdict" not in note and "the data set's own labels" in note


def test_the_reports_verdicts_are_gated_with_judged_at_10_beside(toy_ws, store, tiny_encoder):
    from retrieval.evaluation.metric_tables import covered_comparisons, metrics_table, table_coverage

    ds = judged_in_app(toy_ws.dataset, store, toy_ws)
    ws = Workspace(ds, store, model=tiny_encoder)
    compared = covered_comparisons(ws, "test", (BM25, DENSE))[0]
    summary = report_summary(metrics_table(ws, "test", (BM25, DENSE)), compared,
                             covered=table_coverage(ws, "test", (BM25, DENSE))[0])
    assert summary.conclusions == conclusion_lines(compared)
    assert all("no verdict" in line and "beats" not in line for line in summary.conclusions)
    assert summary.coverage.startswith("Judged@10 (labels judged in the app") and "n/m" in summary.note
    depth = metrics_table(ws, "test", (BM25, DENSE))[0]["pool_depth"]
    assert isinstance(depth, int) and not math.isinf(depth) and depth <= 3
    from retrieval.evaluation.metric_tables import judged_pool

    pool = judged_pool(ws, "test", (BM25, DENSE))  # the report leads with the judged pool's word, never nDCG's
    said = report_summary(metrics_table(ws, "test", (BM25, DENSE)), compared, pool=pool).conclusions
    assert said[0].startswith(f"Provisional — judge {len(pool.unjudged):,} more") and not pool.complete
    assert all(" beats " not in line and "nDCG@10" not in line for line in said)


def test_the_judge_tabs_settled_list_holds_back_the_systems_that_joined_after_judging(toy_ws, store):
    """Judging starts while only BM25 is on show (dense and hybrid still encoding); once they join,
    the settled list names them as not judged enough, with how many to judge, and settles nothing
    about them."""
    from ui import judge

    ws = toy_ws
    ws.pending = lambda names: [s for s in names if s != BM25]  # as while the corpus is being encoded
    q = judge.judging_queue(ws, store, "ann", k=10)
    first: dict[str, str] = {}
    for qid, doc in q.pairs:
        first.setdefault(qid, doc)
    position = q.next_unjudged()
    for _ in range(q.pooled_count):  # BM25's pool judged: each query's first document relevant
        qid, doc = q.pairs[position]
        q, position = judge.grade_pair(ws, store, "ann", qid, doc, 2 if first[qid] == doc else 0, k=10)
    ws.pending = lambda names: [s for s in names if s not in (BM25, DENSE, "hybrid")]  # they have joined
    note = unescape(judge.settled_note(ws, store, 10))
    lines = [line for line in note.splitlines() if line.startswith("- ")]
    assert lines and not any(line.startswith("- **settled:**") for line in lines)
    assert all("no verdict yet" in line for line in lines if "Dense" in line)
    assert "not enough of Dense's results judged" in note and "more of its top-10 documents" in note
    assert "a verdict needs each system's top 10 judged on every judged query" in note


def test_significance_marks_need_both_systems_covered():
    runs, judged = late_joiner(4)
    covered = {name: coverage(name, run, judged) for name, run in runs.items()}
    marks = {"Dense": {"ndcg@10": "†"}, "Learned sparse": {"ndcg@10": "†"}}
    assert gated_marks(marks, covered, "Hybrid") == {"Dense": {"ndcg@10": "†"}}  # before: Learned sparse "†" too
    assert gated_marks(marks, covered, "Learned sparse") == {}  # the base itself not judged enough
    beir = {q: {d: g for d, g in docs.items() if g > 0} for q, docs in judged.items()}
    ungated = {name: coverage(name, run, beir, gated=False) for name, run in runs.items()}
    assert gated_marks(marks, ungated, "Hybrid") == marks


def test_the_condensed_list_reads_a_fixed_depth_whatever_the_run_holds():
    """nDCG'@10 condenses each list's top CONDENSED_DEPTH: the Judge tab's searches of the sample
    and Evaluate's 1,000-deep runs give the same value (they gave +0.488 and −0.010 for one pair)."""
    from retrieval.evaluation.metrics import CONDENSED_DEPTH
    from retrieval.judging.coverage import condensed_ndcg

    judged = {"q": {"rel": 2, "n1": 0}}
    deep = {"q": [*((f"u{i}", 1.0 - i / 2000) for i in range(CONDENSED_DEPTH + 50)), ("rel", 0.01), ("n1", 0.0)]}
    shallow = {"q": deep["q"][:CONDENSED_DEPTH]}
    assert condensed_ndcg(deep, judged).mean["ndcg'@10"] == condensed_ndcg(shallow, judged).mean["ndcg'@10"] == 0.0
    within = {"q": [*deep["q"][:CONDENSED_DEPTH - 1], ("rel", 0.01)]}
    assert condensed_ndcg(within, judged).mean["ndcg'@10"] == pytest.approx(1.0)


def test_the_condensed_ndcg_is_a_column_of_every_metrics_table(toy_ws, store, tiny_encoder):
    """nDCG'@10 is computed with every evaluation (Workspace.evaluate) and shown beside nDCG@10, so
    the coverage-robust figure is in the table, not only in the verdicts' words."""
    ds = judged_in_app(toy_ws.dataset, store, toy_ws)
    ws = Workspace(ds, store, model=tiny_encoder)
    column = dict(zip(VIEW_METRICS, range(1, len(VIEW_METRICS) + 1)))
    rows = {row[0]: row for row in metrics_rows(ws, "test", (BM25, DENSE))}
    for name in ("BM25", "Dense"):
        assert rows[name][column[NDCG_CONDENSED]][0].isdigit()  # a value with its interval, never n/m
    cond = {c.system: c.condensed for c in coverages({s: ws.run(s, "test") for s in (BM25, DENSE)},
                                                      ds.qrels["test"], store.judgments(ds.corpus_hash)).values()}
    assert ws.evaluate(DENSE, "test").mean[NDCG_CONDENSED] == pytest.approx(cond[DENSE])


def test_the_stored_evaluation_is_keyed_by_the_condensed_depth(toy_ws, store, tiny_encoder, monkeypatch):
    """nDCG'@10 depends on how deep the list is condensed: another depth is another stored evaluation."""
    import retrieval.evaluation.measures
    import retrieval.workspace

    ds = judged_in_app(toy_ws.dataset, store, toy_ws)
    ws = Workspace(ds, store, model=tiny_encoder)
    deep = ws.evaluate(DENSE, "test").per_query[NDCG_CONDENSED]
    again = Workspace(ds, store, model=tiny_encoder)
    monkeypatch.setattr(again, "run", lambda *a, **k: pytest.fail("the depth-100 evaluation was not kept"))
    assert again.evaluate(DENSE, "test").per_query[NDCG_CONDENSED] == deep  # the same depth: read back
    for module in (retrieval.evaluation.measures, retrieval.workspace):
        monkeypatch.setattr(module, "CONDENSED_DEPTH", 1)
    shallow = Workspace(ds, store, model=tiny_encoder).evaluate(DENSE, "test").per_query[NDCG_CONDENSED]
    assert shallow != deep  # not the deeper value read back from the store


def test_labels_pooled_from_one_systems_results_favour_it_and_the_pair_is_said_on_the_condensed_list():
    """Production qrels are often one system's judged top 10. Given such labels (non-relevant
    documents listed), the better-covered system is named as favoured and the verdict is nDCG'@10's;
    labels that cover both alike, or relevant-only lists where the better system simply finds more,
    are not flagged."""
    rng = __import__("random").Random(5)
    runs: dict[str, dict] = {"BM25": {}, "Dense": {}}
    key = {}
    for i in range(40):
        q, docs = f"q{i}", [f"q{i}d{j}" for j in range(40)]
        key[q] = set(rng.sample(docs, 5))
        for s in runs:
            runs[s][q] = [(d, 1 - j / 100) for j, d in enumerate(rng.sample(docs, 20))]
    bm25_pool = {q: {d: int(d in key[q]) for d, _ in runs["BM25"][q][:10]} | {next(iter(key[q])): 1} for q in key}
    (v,) = verdicts(runs, bm25_pool, [])
    assert v.favoured == "BM25" and v.metric == NDCG_CONDENSED and v.skew is not None and v.skew.outcome != "open"
    line = conclusion_lines([{"a": v.a, "b": v.b, "comparison": v.comparison, "verdict": v}])[0]
    assert "the labels cover BM25's top 10 better" in line and "nDCG@10 would favour BM25" in line
    both = {q: {d: int(d in key[q]) for s in runs for d, _ in runs[s][q][:10]} for q in key}  # a pool of both
    assert all(v.favoured is None for v in verdicts(runs, both, []))
    better = {q: [(d, 2.0) for d in sorted(key[q])] + hits for q, hits in runs["Dense"].items()}  # finds them all
    relevant_only = {q: {d: 1 for d in key[q]} for q in key}
    assert all(v.favoured is None for v in verdicts({"BM25": runs["BM25"], "Dense": better}, relevant_only, []))
