"""``bench/qpp.py`` on the bundled demo with two systems that need no encoder (BM25, query likelihood): each
predictor's and both combinations' Kendall τ and Spearman ρ with the actual nDCG@10, equal to scipy's on
what ``predict`` and the evaluation give, each inside its bootstrap interval, and the last line the
fitted combination's smallest and median τ."""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np
import pytest

from retrieval import Workspace, load_dataset
from retrieval.qpp.predict import predict
from retrieval.store import Store
from tests.conftest import DEMO, ROOT

pytestmark = pytest.mark.bench


def test_the_demo_run_gives_each_predictors_correlation_with_its_interval_and_the_line_last(tmp_path):
    from scipy.stats import kendalltau, spearmanr

    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "qpp.py"), "--sets", "demo", "--systems", "bm25,ql",
                           "--resamples", "50", "--store", str(tmp_path / "store.sqlite3"),
                           "--json", str(tmp_path / "run.json")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "run.json").read_text())["sets"]["demo"]
    ws = Workspace(load_dataset(str(DEMO)), Store(str(tmp_path / "check.sqlite3")))
    ids = sorted(ws.dataset.split_queries("test"))
    fitted = predict(ws, ids, ["bm25", "ql"], labels="auto").by_id()
    free = predict(ws, ids, ["bm25", "ql"], labels="none").by_id()
    taus = []
    for s in ("bm25", "ql"):
        actual = ws.evaluate(s, "test").per_query["ndcg@10"]
        a = np.array([actual[q] for q in ids])
        rows = data["systems"][s]["predictors"]
        for label, by in (("combined (fitted, cross-fitted)", fitted), ("combined (label-free)", free)):
            p = np.array([by[q].predicted[s] for q in ids])
            assert rows[label]["tau"][0] == pytest.approx(kendalltau(p, a).statistic)
            assert rows[label]["rho"][0] == pytest.approx(spearmanr(p, a).statistic)
        nqc = np.array([free[q].post[s]["nqc"] for q in ids])
        assert rows["NQC"]["tau"][0] == pytest.approx(kendalltau(nqc, a).statistic)
        for row in rows.values():
            assert row["tau"][1] <= row["tau"][0] <= row["tau"][2] or not np.isfinite(row["tau"][0])
        assert "disagreement" in rows  # two systems: their disagreement, negated so that positive predicts well
        taus.append(rows["combined (fitted, cross-fitted)"]["tau"][0])
    last = re.fullmatch(r"qpp_tau_min=(-?[\d.]+) qpp_tau_median=(-?[\d.]+)", proc.stdout.strip().splitlines()[-1])
    assert last and float(last[1]) == pytest.approx(min(taus), abs=1e-4)
    assert float(last[2]) == pytest.approx(statistics.median(taus), abs=1e-4)


def test_an_unknown_set_is_refused_by_name():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "qpp.py"), "--sets", "nosuch"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "nosuch" in proc.stderr
