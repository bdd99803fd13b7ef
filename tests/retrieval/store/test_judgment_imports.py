"""A re-import of judgments says what it changed: new grades, changed grades and grades the store
held already are counted against the store, per corpus and judge, in one transaction."""
from __future__ import annotations

import pytest

from retrieval.store import JudgmentsStored, Store


def test_put_judgments_counts_new_changed_and_unchanged_per_judge(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    first = [("q1", "text", "d1", 2, "ann"), ("q1", "text", "d2", 0, "ann"), ("q2", "other", "d1", 1, "bob")]
    assert store.put_judgments("c", first) == JudgmentsStored(3, 0, 0)
    times = {(r["query_id"], r["doc_id"], r["judge"]): r["time"] for r in store.judgments("c")}
    again = [("q1", "text", "d1", 2, "ann"), ("q1", "text", "d2", 1, "ann"), ("q2", "other", "d1", 1, "ann"),
             ("q2", "other", "d1", 1, "bob")]
    assert store.put_judgments("c", again) == JudgmentsStored(new=1, changed=1, unchanged=2)  # ann's q2 is hers alone
    rows = {(r["query_id"], r["doc_id"], r["judge"]): r for r in store.judgments("c")}
    assert rows[("q1", "d2", "ann")]["grade"] == 1 and len(rows) == 4
    assert rows[("q1", "d1", "ann")]["time"] == times[("q1", "d1", "ann")]  # an unchanged grade is left as it was
    assert store.put_judgments("other corpus", first[:1]) == JudgmentsStored(1, 0, 0)  # counted per corpus
    assert store.put_judgments("c", [("q1", "t", "d1", 0, "ann"), ("q1", "t", "d1", 2, "ann")]) == \
        JudgmentsStored(0, 0, 1)  # a pair given twice counts once, its last grade
    with pytest.raises(ValueError, match="a grade is one of"):
        store.put_judgments("c", [("q9", "t", "d9", 2, "ann"), ("q9", "t", "d8", 5, "ann")])
    assert len(store.judgments("c")) == 4  # nothing of a bad import


def test_the_judge_tab_reports_what_an_import_changed(tmp_path, demo):
    from retrieval.workspace import Workspace
    from ui import judge

    store = Store(tmp_path / "ui.sqlite3")
    ws = Workspace(demo, store)
    q, d = list(demo.queries)[0], list(demo.docs)[:2]
    upload = tmp_path / "ratings.csv"
    upload.write_text(f"query_id,doc_id,grade\n{q},{d[0]},2\n{q},{d[1]},0\n")
    assert "2 new, 0 changed a grade, 0 unchanged" in judge.import_judgments(ws, store, str(upload), "ann")
    assert "0 new, 0 changed a grade, 2 unchanged" in judge.import_judgments(ws, store, str(upload), "ann")
    upload.write_text(f"query_id,doc_id,grade\n{q},{d[0]},2\n{q},{d[1]},1\n")
    assert "0 new, 1 changed a grade, 1 unchanged" in judge.import_judgments(ws, store, str(upload), "ann")
