"""numba_guard.import_cached: a package's numba kernels compiled once, then loaded in a new process; the
projection's warm-up never holds a projection up."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from retrieval.evaluation.numba_guard import cache_folder

ROOT = Path(__file__).resolve().parents[3]

# a package whose functions say nothing about caching, except one that refuses it; two dispatchers of one
# function (as umap's layout epoch, with and without parallel=True); a kernel of another package it imports
PACKAGE = '''
import numba
from numba import njit as bound_during_import
import outsider

@numba.njit
def plain(x):
    return x + 1

@numba.njit(fastmath=True)
def with_options(x):
    return x * 2

@numba.njit("f8(f8)")
def eager(x):
    return x - 1

@numba.jit(nopython=True)
def by_jit(x):
    return x + outsider.far(x)

@numba.njit(cache=False)
def refused(x):
    return x

def _later(x):
    return x + 4

def make_later():  # a dispatcher made after the import, by the decorator bound during it
    return bound_during_import(_later)

def _twin(x):
    return x + 3

twin = numba.njit(_twin)
twin_parallel = numba.njit(_twin, parallel=True)

written = {}
exec("def from_text(x):\\n    return x + 6\\n", written)  # no source file: numba has nowhere to cache it
from_text = numba.njit(written["from_text"])
'''
OUTSIDER = '''
import numba

@numba.njit
def far(x):
    return x * 3
'''
NAMES = ("plain", "with_options", "eager", "by_jit", "refused", "twin", "twin_parallel", "from_text")
RUN = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import numba, numba.core.decorators as decorators
    from retrieval.evaluation.numba_guard import import_cached
    kernels = import_cached("cachedpkg")
    import outsider
    made = {{name: getattr(kernels, name) for name in {names!r}}}
    made.update(later=kernels.make_later(), outsider=outsider.far)
    values = [kernel(1.0) for kernel in made.values()]
    stats = {{name: kernel.stats for name, kernel in made.items()}}
    print(json.dumps({{"values": values, "restored": numba.njit is decorators.njit and numba.jit is decorators.jit,
                      "cached": {{n: s.cache_path is not None for n, s in stats.items()}},
                      "hits": {{n: sum(s.cache_hits.values()) for n, s in stats.items()}}}}))
''').format(names=NAMES)


def _fresh_process(packages: Path, cache: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, str(packages)], cwd=ROOT, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two new interpreters importing numba: about 3 s at load 7 on 2 cores
def test_a_package_imported_through_import_cached_compiles_once_and_loads_in_a_new_process(tmp_path):
    packages = tmp_path / "packages"
    (packages / "cachedpkg").mkdir(parents=True)
    (packages / "cachedpkg" / "__init__.py").write_text(PACKAGE)
    (packages / "outsider.py").write_text(OUTSIDER)
    first = _fresh_process(packages, tmp_path / "numba")
    second = _fresh_process(packages, tmp_path / "numba")
    assert first["values"] == second["values"] == [2.0, 2.0, 0.0, 4.0, 1.0, 4.0, 4.0, 7.0, 5.0, 3.0]
    assert first["restored"] and second["restored"]
    ours = {"plain", "with_options", "eager", "by_jit", "twin"}
    # cached: what the package decorated without a word on caching, the first dispatcher of a function only;
    # not: what it refused, the twin (numba's cache keys no options: it would load the other's code), a
    # function with no source file (compiled as before), a dispatcher made after the import (by numba's
    # decorator it bound then), and another package's kernel
    assert {name for name, cached in second["cached"].items() if cached} == ours
    assert first["hits"] == dict.fromkeys(first["hits"], 0)
    assert {name for name, hits in second["hits"].items() if hits} == ours
    assert {path.parent.name.rsplit("_", 1)[0] for path in (tmp_path / "numba").rglob("*.nbi")} == {"cachedpkg"}


def test_import_cached_returns_a_module_already_imported_as_it_is():
    import json as already

    from retrieval.evaluation.numba_guard import import_cached

    assert import_cached("json") is already


def test_a_module_another_thread_is_importing_is_returned_whole(tmp_path, monkeypatch):
    """A caller that comes while another thread imports the module (in ``sys.modules`` already, partly
    initialized) waits for that import and gets the whole module: a projection asked for while the Embeddings
    tab's warm-up imported umap-learn got the partial one, and failed on ``umap.UMAP``."""
    from retrieval.evaluation.numba_guard import import_cached

    (tmp_path / "gate.py").write_text("import threading\nstarted, release = threading.Event(), threading.Event()\n")
    (tmp_path / "slowpkg").mkdir()
    (tmp_path / "slowpkg" / "__init__.py").write_text("import gate\ngate.started.set()\n"
                                                     "assert gate.release.wait(60)\nWHOLE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("gate", "slowpkg"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import gate

    first = threading.Thread(target=import_cached, args=("slowpkg",))
    first.start()
    try:
        assert gate.started.wait(60)  # slowpkg is in sys.modules, its body waiting
        got: list = []  # whether the module was whole when it was returned (the same object is whole later)
        second = threading.Thread(target=lambda: got.append(getattr(import_cached("slowpkg"), "WHOLE", False)))
        second.start()
        second.join(0.5)  # the partial module would be returned by now
    finally:
        gate.release.set()
    first.join(60)
    second.join(60)
    assert got == [True]
    for name in ("gate", "slowpkg"):
        sys.modules.pop(name, None)


@pytest.mark.slow  # imports umap-learn (3 s at load 7 with numba's cache warm) and fits UMAP
def test_the_warm_up_does_not_fit_while_numba_is_in_use_and_fits_after(monkeypatch):
    from retrieval.evaluation import projection
    from retrieval.evaluation.numba_guard import NUMBA_LOCK

    monkeypatch.setattr(projection, "_warm", False)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # a projection or a labelled search's metrics, in another thread
        with NUMBA_LOCK:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(60)
        projection.warm_up()
        assert not projection.umap_is_warm()  # it returned without waiting for the lock
    finally:
        release.set()
        holder.join()
    assert projection.warm_up() > 0 and projection.umap_is_warm()
    assert projection.warm_up() == 0.0


@pytest.mark.slow  # a new interpreter imports umap-learn and fits UMAP (seconds with numba's cache warm)
def test_a_first_start_warms_up_in_a_process_of_its_own_and_leaves_its_mark(tmp_path):
    from retrieval.evaluation.projection import warm_mark, warm_up_elsewhere

    mark = tmp_path / "first start"
    child = warm_up_elsewhere(mark)
    assert child is not None and child.wait(300) == 0 and mark.is_file()
    assert warm_up_elsewhere(mark) is None  # the next start finds the mark: no process
    assert warm_mark().name.startswith("umap-warm-") and warm_mark().parent == cache_folder()
