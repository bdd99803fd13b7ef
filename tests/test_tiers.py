"""The suite's own tiers (``tests/tiers.py``): slow functions and file seconds written from a durations
log, and the files handed to xdist longest first."""
from __future__ import annotations

import json
from types import SimpleNamespace

from tests import tiers


def test_a_durations_log_gives_the_slow_functions_and_each_files_seconds(tmp_path, monkeypatch):
    log = tmp_path / "durations.jsonl"
    rows = [("tests/a.py::test_x[1]", "call", 2.0), ("tests/a.py::test_x[2]", "call", 4.0),
            ("tests/a.py::test_y", "setup", 0.5), ("tests/b.py::test_z", "call", 1.0),
            ("tests/b.py::test_z", "teardown", 2.5)]
    log.write_text("".join(json.dumps({"nodeid": n, "when": w, "seconds": s}) + "\n" for n, w, s in rows))
    out = tmp_path / "tiers.json"
    monkeypatch.setattr(tiers, "TIERS", out)
    assert tiers.main([str(log), "--threshold", "3", "--machine", "test"]) == 0
    written = json.loads(out.read_text())
    assert written["slow"] == ["tests/a.py::test_x", "tests/b.py::test_z"]  # 4.0 and 1.0 + 2.5, over 3 s
    assert tiers.file_seconds(out) == {"tests/a.py": 6.5, "tests/b.py": 3.5}
    assert tiers.file_seconds(tmp_path / "absent.json") == {}


def test_files_run_longest_first_each_in_its_own_order_an_unmeasured_one_first_of_all():
    ids = ["tests/a.py::t1", "tests/b.py::t1", "tests/a.py::t2", "tests/c.py::t1", "tests/b.py::t2",
           "tests/new.py::t1"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    ordered = [i.nodeid for i in tiers.in_order(items, {"tests/a.py": 1.0, "tests/b.py": 9.0, "tests/c.py": 1.0})]
    assert ordered == ["tests/new.py::t1", "tests/b.py::t1", "tests/b.py::t2", "tests/a.py::t1", "tests/a.py::t2",
                       "tests/c.py::t1"]  # a and c tie: collected order
