"""Systems own their state: a slot on the workspace (per corpus or per workspace, shared by the
workspaces that may share it), counted by the memory budget through the state's ``nbytes()``; a
background build a system asks for, which ``pending`` and the views follow; the lists every view and
the CLI show, taken from the registry (a system registered here shows in each with no other edit);
the CLI table wide enough for any label."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from retrieval import Workspace
from retrieval import systems as registry
from retrieval.data.run import Run
from retrieval.sharing import memory_budget
from retrieval.store import Store
from retrieval.systems.base import Hits, Needs, Probe, SystemBase
from retrieval.systems.hybrid import CLEAR, Lambdas, lambdas_of
from retrieval.systems.state import CORPUS, WORKSPACE, Slots
from tests.conftest import store_copy


class Held:
    """A state of a known size."""

    def __init__(self, size: int = 12_345):
        self.size = size

    def nbytes(self) -> int:
        return self.size


class Built:
    """What the toy system's background build makes: every document's row, scored by its length."""

    def __init__(self, ws: Workspace):
        self.scores = np.array([float(len(d.text)) for d in ws.dataset.docs.values()])

    def nbytes(self) -> int:
        return int(self.scores.nbytes)


class Toy(SystemBase):
    """A system that builds its index in the background (released by ``gate``), with a long label."""

    needs = Needs()

    def __init__(self, key: str, shown: bool = True):
        self.key, self.short, self.shown_by_default = key, key, shown
        self.label = f"A toy system whose label is long ({key})"
        self.gate = threading.Event()

    def build(self, ws: Workspace):
        def make(progress, indexing):
            assert self.gate.wait(30)
            return Built(ws)

        return ws.background_build(self.key, make, len(ws.dataset.docs), expected_bytes=777)

    def waits_for(self, ws: Workspace):
        return (self.build(ws),)

    def params(self, ws: Workspace, split: str | None) -> dict:
        return {"toy": 1}

    def search(self, ws: Workspace, queries: dict[str, str], k: int, split: str | None) -> Run:
        built, ids = self.build(ws).value, ws.dataset.doc_ids
        order = np.argsort(-built.scores, kind="stable")[:k]
        return {q: [(ids[r], float(built.scores[r])) for r in order] for q in queries}

    def one(self, ws: Workspace, probe: Probe, k: int, split: str | None) -> Hits:
        return self.search(ws, {"q": probe.text}, k, split)["q"]


@pytest.fixture
def toy():
    """A system registered for one test (and taken off the registry after it)."""
    system = registry.register(Toy("toy_bg"))
    hidden = registry.register(Toy("toy_hidden", shown=False))
    yield system
    system.gate.set()
    hidden.gate.set()
    registry.unregister("toy_bg")
    registry.unregister("toy_hidden")


@pytest.fixture(scope="module")
def sparse_store(tmp_path_factory, demo_sparse_store):
    """A store holding the demo's learned sparse vectors already (``demo_sparse_store``): a workspace that
    starts every build (``start_builds``: the dense index, the learned sparse one, then the toy's) reads
    them, where it would otherwise encode the corpus with SPLADE before the toy's build may begin."""
    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp("state") / "store.sqlite3"))
    yield store
    store.close()


@pytest.fixture
def ws(demo, tiny_encoder, sparse_store):
    return Workspace(demo, sparse_store, model=tiny_encoder)


def test_a_state_is_made_once_and_shared_as_its_scope_says(ws, tiny_encoder):
    made = []

    def make():
        made.append(1)
        return Held()

    corpus, own = ws.system_state("c", make, CORPUS), ws.system_state("w", make, WORKSPACE)
    assert ws.system_state("c", make) is corpus and ws.system_state("w", make, WORKSPACE) is own and len(made) == 2
    other_data = ws.with_dataset(ws.dataset.with_queries({"extra": "a query of its own"}))
    other_model = ws.with_model(tiny_encoder)
    for sibling in (other_data, other_model):  # the same corpus and settings: the same index
        assert sibling.system_state("c", make) is corpus
        assert sibling.system_state("w", make, WORKSPACE) is not own  # other queries, or another encoder
    with pytest.raises(ValueError, match="unknown state scope 'nope'"):
        ws.system_state("x", make, "nope")
    with pytest.raises(TypeError, match="has no nbytes"):
        ws.system_state("bad", dict)


def test_states_are_made_once_however_many_threads_ask():
    slots, made = Slots(), []
    started = threading.Barrier(8)

    def make():
        made.append(1)
        return Held()

    def ask(out):
        started.wait()
        out.append(slots.get("k", make))

    got: list = []
    threads = [threading.Thread(target=ask, args=(got,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len({id(g) for g in got}) == 1


def test_the_clear_hybrids_lambda_is_its_own_state_shared_with_with_runs_copies(ws, demo):
    from retrieval.data.readers.runs import ImportedRun, run_hash

    CLEAR.fix_lambda(ws, 0.25, "fixed for the test", "test")
    state = lambdas_of(ws)
    assert isinstance(state, Lambdas) and state.by_split["test"].value == 0.25
    assert not hasattr(ws, "_lambda")  # nowhere else
    run = {q: [(demo.doc_ids[0], 1.0)] for q in demo.split_queries("test")}
    copy = ws.with_run(ImportedRun("mine", run, "mine.trec", run_hash(run), dataset=demo.content_hash))
    assert CLEAR.lambda_for(copy, "test").value == 0.25 and lambdas_of(copy) is state
    other = ws.with_dataset(demo.with_queries({"extra": "glaciers"}))
    assert "test" not in lambdas_of(other).by_split  # another data set: λ is chosen again
    assert state.nbytes() > 0


def test_the_memory_budget_counts_each_state_once_through_its_nbytes(ws, demo):
    from retrieval.data.readers.runs import ImportedRun, run_hash

    before = memory_budget.parts(ws)
    ws.system_state("index", lambda: Held(12_345))
    ws.system_state("own", lambda: Held(678), WORKSPACE)
    parts = memory_budget.parts(ws)
    added = {k: v for k, v in parts.items() if k not in before}
    assert sorted(added.values()) == [678, 12_345] and all(k[0] == "state" for k in added)
    run = {q: [(demo.doc_ids[0], 1.0)] for q in demo.split_queries("test")}
    copy = ws.with_run(ImportedRun("mine", run, "mine.trec", run_hash(run), dataset=demo.content_hash))
    other = ws.with_dataset(demo.with_queries({"extra": "glaciers"}))
    other.system_state("own", lambda: Held(5), WORKSPACE)
    together = memory_budget.total({"a": parts, "b": memory_budget.parts(copy), "c": memory_budget.parts(other)})
    alone = memory_budget.total({"a": parts})
    run_bytes = memory_budget.PER_RUN_ROW * sum(len(h) for h in run.values())
    other_data = sum(v for k, v in memory_budget.dataset_parts(other.dataset).items() if k[0] == "queries")
    assert together == alone + run_bytes + 5 + other_data  # the shared index once, each own λ-like state once


@pytest.mark.slow
def test_a_system_asks_for_a_background_build_and_every_view_waits_for_it(ws, toy):
    from ui.common import shown_systems

    ws.start_builds()
    build = ws.builds["toy_bg"]
    assert ws.pending(["bm25", "toy_bg"]) == ["toy_bg"] and "toy_bg" not in shown_systems(ws)
    key = next(k for k in memory_budget.parts(ws) if k[0] == "state" and k[2] == "toy_bg")
    assert memory_budget.parts(ws)[key] == 777  # counted at the size it will have while it builds
    toy.gate.set()
    assert build.follow(300, None, 0.05) and ws.pending(["toy_bg"]) == []
    assert "toy_bg" in shown_systems(ws) and "toy_hidden" not in shown_systems(ws)
    assert memory_budget.parts(ws)[key] == 8 * len(ws.dataset.docs)  # the built index's own nbytes()
    assert ws.run("toy_bg", "test", 5)  # answers from what it built


@pytest.mark.slow
def test_every_list_comes_from_the_registry(ws, toy):
    """A registered system shows in Search (its choices, the default columns' order), Evaluate, Judge
    and Runs (``shown_systems``), the Failures picker and the failure gallery, and the CLI's default
    ``--systems``; one not shown by default is listed where the analyst picks systems only."""
    from retrieval.cli import listed_systems
    from ui.common import shown_systems
    from ui.failures import pair_choices
    from ui.search import MAX_COLUMNS, default_columns, system_choices

    toy.gate.set()
    ws.start_builds()
    assert ws.builds["toy_bg"].follow(300, None, 0.05)
    shown = registry.shown()
    assert "toy_bg" in shown and "toy_hidden" not in shown and "rrf" not in shown
    assert shown_systems(ws) == tuple(s for s in shown if not ws.pending([s]))
    assert default_columns(ws) == shown[:MAX_COLUMNS]
    for key in ("toy_bg", "toy_hidden"):
        assert key in [k for _, k in system_choices(ws)] and key in [k for _, k in pair_choices(ws)]
    assert listed_systems(ws, None) == list(shown) and listed_systems(ws, "bm25,toy_hidden") == ["bm25", "toy_hidden"]
    with pytest.raises(ValueError, match="unknown system"):
        listed_systems(ws, "bm25,nope")


def test_the_cli_table_is_as_wide_as_its_longest_label():
    from retrieval.cli import LABEL_WIDTH, format_table
    from retrieval.evaluation.metrics import TABLE_METRICS

    long = registry.register(Toy("toy_wide"))
    try:
        row = dict.fromkeys(TABLE_METRICS, 0.5)
        lines = format_table({"bm25": row, "toy_wide": row}, {}).splitlines()
        width = len(long.label) + 2
        assert width > LABEL_WIDTH and lines[0].startswith("system" + " " * (width - 6))
        rows = {line[:width].strip(): line[width:] for line in lines[2:]}
        assert set(rows) == {"BM25", long.label}  # the label whole, not cut at 24 characters
        assert rows["BM25"] == rows[long.label] and rows["BM25"].split()[0] == "0.5000"
    finally:
        registry.unregister("toy_wide")
