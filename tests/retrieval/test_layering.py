"""The library's layering, held: a leaf or the CLI's help imports nothing heavy (each checked in a
fresh interpreter, as a user starts one), the package's names still import, the import contracts
(``.importlinter``) pass, no import circle anywhere (between modules, and into and out of the packages that are
layers: the indexes, the systems), counting every import (inside a function or under ``if TYPE_CHECKING:``: an
annotation is a dependency too), and numba keeps its kernels in RankScope's cache folder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("faiss", "torch", "bm25s", "sentence_transformers", "transformers", "numba", "ranx", "sqlite_utils",
         "scipy.stats", "umap", "gradio")


def fresh(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a new interpreter at the checkout's root; the JSON it prints last."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = f"import json, sys; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"


@pytest.mark.parametrize("leaf", ["retrieval.evaluation.metrics", "retrieval.evaluation.intervals",
                                  "retrieval.evaluation.failure_rules", "retrieval.safe_names", "retrieval.numbers",
                                  "retrieval.errors", "retrieval.judging.grades", "retrieval.data.run"])
def test_a_leaf_imports_nothing_heavy(leaf):
    assert fresh(f"import {leaf}\n{LOADED}") == []


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_the_command_lines_help_imports_nothing_heavy():
    code = ("import contextlib, io\nfrom retrieval.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            "assert 'evaluate' in out.getvalue()\n"
            "for command in ('evaluate', 'check', 'judges'):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main([command, '--help'])\n" + LOADED)
    assert fresh(code) == []


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_python_m_retrieval_help_prints_the_commands():
    done = subprocess.run([sys.executable, "-m", "retrieval", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "evaluate" in done.stdout and "check" in done.stdout


def test_the_packages_names_import_on_first_use():
    import retrieval
    from retrieval import SYSTEMS, DataError, Dataset, Run, Store, Workspace, load_dataset
    from retrieval.data.readers import load_dataset as from_readers
    from retrieval.store import Store as from_store

    assert load_dataset is from_readers and Store is from_store and "bm25" in SYSTEMS
    assert Workspace.__name__ == "Workspace" and issubclass(DataError, ValueError) and Dataset and Run
    assert set(retrieval.__all__) <= set(dir(retrieval))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        retrieval.Nothing  # noqa: B018 - the lookup itself is the test


def test_the_failure_rules_name_the_systems_by_their_registered_keys():
    from retrieval import systems
    from retrieval.evaluation import failure_rules as rules

    assert (rules.BM25, rules.DENSE, rules.HYBRID, rules.SPLADE) == (systems.BM25, systems.DENSE, systems.HYBRID,
                                                                       systems.SPLADE)
    assert rules.TUNED_OF == systems.TUNED_OF and rules.ENCODER_SYSTEMS == systems.ENCODER_SYSTEMS


def test_the_import_contracts_hold():
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (requirements-dev.txt)")
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "0 broken" in done.stdout


ROOTS = ("retrieval", "ui", "training")
# packages each of which is one unit in the graph: no import leaves one and comes back into it through any chain.
# Not here: ``retrieval`` (its command line writes through ``ui.present``), ``retrieval.evaluation`` (its metric
# vocabulary sits below the systems, its views over a workspace above it), ``retrieval.data`` and
# ``retrieval.judging`` (the readers, query sets and kept sets read the store, which checks judgments' grades).
UNITS = ("retrieval.index", "retrieval.index.engines", "retrieval.systems", "retrieval.data.readers",
         "retrieval.files", "retrieval.sharing", "retrieval.tracking", "training", "ui", "ui.present")


@pytest.fixture(scope="module")
def imports():
    """The import graph of RankScope's own packages as ``.importlinter`` reads it: every import counts, one inside
    a function (a lazy import is still a dependency) and one under ``if TYPE_CHECKING:`` (an annotation names what
    it imports: the systems read the workspace through ``retrieval.systems.reads``' Protocol, not its class)."""
    grimp = pytest.importorskip("grimp")  # installed with import-linter (requirements-dev.txt)
    return grimp.build_graph(*ROOTS, include_external_packages=False, exclude_type_checking_imports=False,
                             cache_dir=None)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, or of one node importing itself, each sorted
    (Tarjan, "Depth-first search and linear graph algorithms", SIAM Journal on Computing 1(2), 1972; iterative,
    so a deep chain does not reach Python's recursion limit)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in order:
            continue
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(edges[root])))]
        while work:
            node, rest = work[-1]
            for nxt in rest:
                if nxt not in order:
                    order[nxt] = low[nxt] = len(order)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges.get(node, ()):
                        found.append(sorted(component))
    return found


def graph_of(imports, unit: str | None = None) -> dict[str, set[str]]:
    """Module -> the modules it imports; with ``unit``, that package's modules drawn as the one node ``unit``."""
    def node(module: str) -> str:
        return unit if unit and (module == unit or module.startswith(unit + ".")) else module

    edges: dict[str, set[str]] = {}
    for module in imports.modules:
        for imported in imports.find_modules_directly_imported_by(module):
            if node(module) != node(imported):
                edges.setdefault(node(module), set()).add(node(imported))
        edges.setdefault(node(module), set())
    return edges


def arrows(imports, members: list[str], unit: str | None = None) -> list[str]:
    """The imports between the members of one circle, "importer -> imported (l.N)"; with ``unit``, only those
    that cross its border (the ways out of it and back in)."""
    inside = set(members)

    def node(module: str) -> str:
        return unit if unit and (module == unit or module.startswith(unit + ".")) else module

    out = []
    for module in sorted(imports.modules):
        for imported in sorted(imports.find_modules_directly_imported_by(module)):
            ends = node(module), node(imported)
            if set(ends) <= inside and ends[0] != ends[1] and (unit is None or unit in ends):
                lines = sorted(d["line_number"] for d in imports.get_import_details(importer=module, imported=imported))
                out.append(f"{module} -> {imported} (l.{', '.join(map(str, lines))})")
    return out


def test_the_circle_finder_finds_a_circle_and_a_self_import():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert sorted(circles(edges)) == [["a", "b", "c"], ["e"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    chain = {str(i): {str(i + 1)} for i in range(5000)} | {"5000": {"0"}}  # deeper than the recursion limit
    assert [len(c) for c in circles(chain)] == [5001]


def test_no_module_takes_part_in_an_import_circle(imports):
    found = circles(graph_of(imports))
    assert not found, "import circles (each: its modules, then the imports that close it):\n" + "\n".join(
        " ↔ ".join(c) + "\n    " + "\n    ".join(arrows(imports, c)) for c in found)


@pytest.mark.parametrize("unit", UNITS)
def test_a_layer_package_takes_part_in_no_import_circle(imports, unit):
    assert unit in imports.modules, f"{unit} is no package of {ROOTS}: UNITS names one that is gone"
    found = [c for c in circles(graph_of(imports, unit)) if unit in c]
    assert not found, f"{unit} leaves itself and comes back through:\n    " + "\n    ".join(
        arrows(imports, found[0], unit))


def test_the_contracts_count_type_checking_imports_as_the_circle_tests_do():
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter", encoding="utf-8")
    assert config.getboolean("importlinter", "exclude_type_checking_imports") is False


def test_no_system_module_imports_the_workspace_even_for_annotations(imports):
    importers = imports.find_modules_that_directly_import("retrieval.workspace")
    assert not {m for m in importers if m == "retrieval.systems" or m.startswith("retrieval.systems.")}
    assert "retrieval.systems.reads" in imports.find_modules_directly_imported_by("retrieval.systems.base")


def test_the_workspace_offers_everything_a_system_reads(toy_dataset):
    from retrieval import Workspace
    from retrieval.systems.reads import SystemWorkspace

    members = [name for name in vars(SystemWorkspace) if not name.startswith("_")]
    assert {"dataset", "settings_of", "system_state", "background_build"} <= set(members)
    offered = set(dir(Workspace(toy_dataset)))  # dir reads no property: nothing is built
    assert [m for m in members if m not in offered] == []


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_numba_keeps_its_kernels_in_rankscopes_cache_folder():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    code = ("import json, os, platformdirs, retrieval, numba\n"
            "print(json.dumps([os.environ['NUMBA_CACHE_DIR'], numba.config.CACHE_DIR, "
            "platformdirs.user_cache_dir('rankscope')]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    variable, numbas, home = json.loads(done.stdout.strip().splitlines()[-1])
    assert variable == numbas == os.path.join(home, "numba")


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_a_numba_cache_the_user_chose_is_kept(tmp_path):
    chosen = str(tmp_path / "mine")
    got = fresh("import json, os, retrieval, numba\n"
                "print(json.dumps([os.environ['NUMBA_CACHE_DIR'], numba.config.CACHE_DIR]))",
                env={"NUMBA_CACHE_DIR": chosen})
    assert got == [chosen, chosen]


@pytest.mark.slow  # over about 5 s on a 2-core AVX2-only AMD EPYC
def test_numba_imported_first_is_pointed_at_the_folder_too():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    code = ("import json, numba, platformdirs, retrieval, os\n"
            "print(json.dumps([numba.config.CACHE_DIR, platformdirs.user_cache_dir('rankscope')]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    numbas, home = json.loads(done.stdout.strip().splitlines()[-1])
    assert numbas == os.path.join(home, "numba")
