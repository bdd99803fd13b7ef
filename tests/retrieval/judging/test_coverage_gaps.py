"""Coverage of a run that has no list for some judged queries (an imported run file that skipped
them): measured, never a crash (before: ZeroDivisionError in ``coverage.coverage``, which took down
``python -m retrieval evaluate --run`` with any run file missing a labelled query)."""
from __future__ import annotations

from retrieval.judging.coverage import coverage


def test_a_query_the_run_has_no_list_for_counts_as_nothing_judged():
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 1}}
    c = coverage("partial", {"q1": [("a", 2.0), ("x", 1.0)]}, qrels)
    assert c.queries == 2 and c.judged == 0.25 and c.unjudged == 1 and not c.sufficient  # q1 half, q2 none
