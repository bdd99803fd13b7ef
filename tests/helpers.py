"""What only the tests ask of the library: counts and checks of a store's file, a judgment deleted
behind the app's back, and judged@10 computed the plain way (through ``evaluate_run``), the figure
the coverage gate's own must agree with."""
from __future__ import annotations

import os

from retrieval.data.dataset import Qrels
from retrieval.data.run import Run
from retrieval.evaluation.intervals import Interval
from retrieval.evaluation.measures import evaluate_run
from retrieval.evaluation.metrics import JUDGED_AT_10
from retrieval.store import Store


def count_embeddings(store: Store, model: str | None = None) -> int:
    """How many vectors the store holds (``model``'s only, by its fingerprint, when given)."""
    if model is None:
        return store.db.execute("select count(*) from embeddings").fetchone()[0]
    return store.db.execute("select count(*) from embeddings where model = ?", [model]).fetchone()[0]


def integrity_check(store: Store) -> str:
    """SQLite's ``pragma integrity_check`` of the store's file: "ok", or its first complaint."""
    return store.db.execute("pragma integrity_check").fetchone()[0]


def delete_judgment(store: Store, corpus: str, query_id: str, doc_id: str, judge: str) -> bool:
    """Remove one judge's grade of a pair, as another process would; True when there was one."""
    with store.db.conn:
        cur = store.db.execute("delete from judgments where corpus = ? and query_id = ? and doc_id = ? "
                               "and judge = ?", [corpus, query_id, doc_id, judge])
    return cur.rowcount > 0


def judged_at_10(runs: dict[str, Run], judged: Qrels) -> dict[str, tuple[float, Interval]]:
    """Each system's judged@10 over the ``judged`` queries with a relevant label, with its 95%
    interval over those queries (``evaluate_run``'s)."""
    relevant = {q: docs for q, docs in judged.items() if any(g > 0 for g in docs.values())}
    out = {}
    for name, run in (runs.items() if relevant else ()):
        ev = evaluate_run({q: run.get(q, []) for q in relevant}, relevant, metrics=(JUDGED_AT_10,))
        out[name] = (ev.mean[JUDGED_AT_10], ev.interval(JUDGED_AT_10))
    return out


def quiet_machine():
    """A reading of a machine no other process uses, for timings a test makes up (``cpu_choice.choose``'s
    ``machine``): load 0, and no CPU time but this process's."""
    import time

    from retrieval.index.machine_load import Reading

    return Reading(time.monotonic(), 0.0, 2, 0.0, 0.0)


CLIENT_TIMEOUT_S = 300.0  # a real app on a busy machine answers in seconds, not in httpx's default five


def app_client(url: str, headers: dict[str, str] | None = None):
    """A ``gradio_client`` client of the app at ``url`` (a new session) that waits for the server as
    long as a busy machine needs: what a test asserts never depends on the machine's load."""
    from gradio_client import Client

    return Client(url, verbose=False, headers=headers, httpx_kwargs={"timeout": CLIENT_TIMEOUT_S})


# how many times longer than on a quiet machine a test waits before it calls something hung: a wait is for
# an event (a job's status, a page's text, an app's URL), and the limit only stops a test that would hang;
# at load 18 on 2 cores things took 10–20 times their quiet time (RANKSCOPE_TEST_PATIENCE to change it)
PATIENCE = float(os.environ.get("RANKSCOPE_TEST_PATIENCE", "5"))


def patience(seconds: float) -> float:
    """``seconds`` (what a wait takes at most on a quiet machine) stretched by ``PATIENCE``."""
    return seconds * PATIENCE
