"""Library calls made from many threads at once, as the app's worker pool makes them.

Run in a child process: numba aborts the whole process when two threads enter its default
(workqueue) parallel layer at once, which would take pytest down with it.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

SCRIPT = textwrap.dedent("""
    import random, threading
    from retrieval.evaluation.measures import evaluate_run
    from retrieval.systems.fusion import fuse_runs

    rng = random.Random(0)
    docs = [f"d{i}" for i in range(300)]
    qrels = {f"q{i}": {rng.choice(docs): rng.randint(1, 2) for _ in range(3)} for i in range(200)}
    runs = [{q: [(d, rng.random()) for d in rng.sample(docs, 100)] for q in qrels} for _ in range(2)]
    errors = []

    def work(i):
        try:
            for _ in range(15):
                if i % 2:
                    evaluate_run(runs[i % 2], qrels)
                else:
                    fuse_runs(runs, "rrf", k=50)
        except Exception as err:  # reported below: the test wants none
            errors.append(repr(err))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print("errors:", errors)
    assert not errors
    print("ok")
""")


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_metrics_and_fusion_from_eight_threads_at_once():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr[-3000:]
