"""How an interval is written (``metrics.interval_text``): a difference's interval on 5 queries or
fewer, which the sign-flip test leaves unbounded, is said in words wherever a table or a report
shows it, never "[-inf, inf]"."""
from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from retrieval.evaluation.intervals import Interval
from retrieval.evaluation.measures import Evaluation, compare
from retrieval.evaluation.metrics import NUMERIC_ZERO, UNBOUNDED, cell, conclusion, interval_text


def pair(n: int):
    before = Evaluation({}, {"m": {f"q{i}": 0.2 + i / 100 for i in range(n)}})
    after = Evaluation({}, {"m": {f"q{i}": 0.6 + i / 50 for i in range(n)}})
    return compare(before, after, "m")


def test_a_difference_on_five_queries_or_fewer_is_unbounded_in_words():
    for n in (2, 5):
        cmp = pair(n)
        assert math.isinf(cmp.interval.width)  # the test accepts every shift
        assert interval_text(cmp.interval) == UNBOUNDED == "[unbounded: ≤ 5 queries]"  # before: "[-inf, inf]"
        assert "inf" not in cell(cmp.delta, "", cmp.interval).replace("unbounded", "")
        assert "6 queries" in conclusion("A", "B", cmp)  # conclusion() says the same in its words
    six = pair(6)
    assert interval_text(six.interval).startswith("[0.") and "unbounded" not in interval_text(six.interval)


def test_the_check_report_writes_a_five_query_difference_in_words():
    from retrieval.tracking import snapshots
    from retrieval.tracking.check_report import markdown_summary, text_report

    cmp = pair(4)
    system = snapshots.SystemCheck("bm25", cmp, (cmp.interval, cmp.interval), False, [], {}, {})
    snap = snapshots.Snapshot("b", "c", "d", "demo", "test", "l", {}, {})
    result = snapshots.CheckResult(snap, "test", "m", 0.01, False, False, [system])
    for report in (text_report(result), markdown_summary(result)):
        assert UNBOUNDED in report and "inf]" not in report


def _three(x: float) -> str:
    """3 decimals; zero, −0.0 included, is "0.000" ("-0.000" would read as an end just below 0)."""
    return f"{x:.3f}" if x != 0 else "0.000"


@given(st.floats(-1, 1).filter(lambda x: x == 0 or abs(x) >= 0.0005), st.floats(0, 1))
@example(-0.0, 0.0)  # failed by chance once, when the test wrote −0.0 as "-0.000"
def test_a_bounded_interval_keeps_three_decimals(low, width):
    high = low + width
    if high != 0 and abs(high) < 0.0005:
        return
    assert interval_text(Interval(low, high)) == f"[{_three(low)}, {_three(high)}]"
    assert interval_text((low, math.inf)) == f"[{_three(low)}, ∞]" and interval_text(None) == ""


@given(st.floats(-0.0005, 0.0005, exclude_min=True, exclude_max=True))
def test_an_end_just_off_zero_keeps_its_sign_and_first_digit(end):
    """"[-0.000, 0.008]" would read as an interval that touches 0 from above; an end within
    floating-point noise of 0 (a difference of equal scores summed in another order) is 0."""
    low = interval_text((end, 0.5))[1:].split(",")[0]
    if abs(end) < NUMERIC_ZERO:
        assert low == "0.000"
        return
    places = len(low.split(".")[1])
    assert 3 < places <= 6 and low == f"{end:.{places}f}"  # the value, rounded to its first significant digit
    assert float(low) != 0 and (float(low) < 0) == (end < 0) and float(f"{end:.{places - 1}f}") == 0
    assert interval_text((-0.0004, 0.008)) == "[-0.0004, 0.008]" and interval_text((-1e-12, 0.0)) == "[0.000, 0.000]"
