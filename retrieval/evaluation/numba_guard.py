"""numba, where RankScope still calls code compiled by it (ranx's metrics beyond ``rank_metrics``,
UMAP's projection, bm25s): one lock around it, and one folder that keeps what it compiled.

The lock. numba's default threading layer ("workqueue") is not thread-safe: two threads entering
``parallel=True`` code at once make numba abort the whole process ("Numba workqueue threading
layer is terminating: Concurrent access has been detected"). The app serves several users from
a thread pool, so a labelled-query search (ranx per-query metrics) next to an evaluation or a
UMAP projection would kill the server. Holding ``NUMBA_LOCK`` around those calls serializes them;
ranx calls take milliseconds, a UMAP fit a few seconds. (tbb/omp layers are thread-safe but not
installed everywhere, so the lock is the portable fix.)

The cache. ranx's and UMAP's kernels are compiled with ``cache=True``: numba keeps the machine code
and a later process loads it instead of compiling again (seconds instead of minutes). By default it
writes beside the library's source, or where that is read-only (a system or container install) in
a folder of its own. ``keep_compiled`` points it at ``numba/`` in RankScope's cache folder (the
user cache directory, ``platformdirs``) unless ``NUMBA_CACHE_DIR`` says otherwise, so every install
keeps its kernels in one place the user can find and clear; ``retrieval/__init__.py`` calls it
before anything imports numba. (``RANKSCOPE_HOME`` does not move it: a test run's temporary home
would compile every kernel again.)

Kernels that are not ours. numba caches only what is decorated ``cache=True``, and umap-learn (0.5)
asks it for one function: ``smooth_knn_dist``, ``compute_membership_strengths`` (both
``parallel=True``), the layout's epoch and its helpers were compiled again in every process, 3–4 s
quiet and minutes on a busy machine, before the first projection. ``import_cached`` imports such a
package with numba's ``jit`` and ``njit`` defaulting to ``cache=True`` for the functions its own
modules decorate (``cache`` said by the package is kept; any other caller is untouched), so they are
compiled once per installation and then loaded (``bench/first_use.py`` measures it). Two
dispatchers made of one Python function (umap's layout epoch, with and without ``parallel=True``)
would share one cache entry, since numba keys its index by the function's code and the signature, not
by options: only the first made is cached. A function numba cannot cache (dynamic globals, lifted
loops) is compiled as before; the warning numba gives for it is silenced for that package's files only.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

NUMBA_LOCK = threading.RLock()
CACHE_ENV = "NUMBA_CACHE_DIR"
_IMPORTING = threading.Lock()  # one ``import_cached`` at a time: each swaps numba's decorators


def cache_folder() -> Path:
    """Where numba keeps compiled kernels: ``$NUMBA_CACHE_DIR`` when set, else ``numba/`` in the
    user cache directory's ``rankscope`` folder."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("rankscope")) / "numba"


def keep_compiled() -> Path:
    """Make ``cache_folder()`` numba's cache (``NUMBA_CACHE_DIR``, which numba reads when it is
    imported; already imported, its configuration is set too), unless the user chose one; the folder."""
    folder = cache_folder()
    if not os.environ.get(CACHE_ENV):
        os.environ[CACHE_ENV] = str(folder)
        config = sys.modules.get("numba.core.config")
        if config is not None:
            config.__dict__["CACHE_DIR"] = str(folder)  # numba's configuration module, set at run time
    return folder


def import_cached(name: str, packages: tuple[str, ...] = ()) -> ModuleType:
    """Import ``name`` with numba's ``jit`` and ``njit`` defaulting to ``cache=True`` for the functions
    decorated by the modules of ``name``'s top-level package and of ``packages`` (its numba-compiled
    dependencies, e.g. ``pynndescent`` for ``umap``); the module.

    Only while it is imported, under a lock, and only where the decorating code did not say ``cache``;
    of several dispatchers made of one function only the first is cached. Already imported, the module
    is returned as it is (its decorators ran then). ``keep_compiled`` is called first, so the kernels
    go to RankScope's cache folder.

    A module another thread is still importing is in ``sys.modules`` already, partly initialized: it is
    asked of ``importlib.import_module``, which waits on Python's own lock of that module until its
    import ends and returns the whole module, never the partial one (a projection asked for while the
    Embeddings tab's warm-up imported umap-learn failed on ``umap.UMAP``).
    """
    if name in sys.modules:  # imported, or being imported by another thread: whole once that import returns
        return importlib.import_module(name)
    keep_compiled()
    scope = (name.split(".")[0], *packages)
    with _IMPORTING:
        if name in sys.modules:  # imported meanwhile
            return importlib.import_module(name)
        _quiet_uncachable(scope)
        with _cache_by_default(scope):
            return importlib.import_module(name)


def _quiet_uncachable(scope: tuple[str, ...]) -> None:
    """Silence numba's "Cannot cache compiled function" warning for functions defined in ``scope``'s
    files (numba gives it with the function's source file as its module), and no other."""
    from numba.core.errors import NumbaWarning

    folders = "|".join(re.escape(package) for package in scope)
    warnings.filterwarnings("ignore", message="Cannot cache compiled function", category=NumbaWarning,
                            module=rf".*[/\\]({folders})[/\\]")


@contextmanager
def _cache_by_default(scope: tuple[str, ...]) -> Iterator[None]:
    """numba's ``jit`` and ``njit`` replaced by ``_defaulting`` ones for the duration, then restored."""
    import numba

    originals = numba.jit, numba.njit
    seen: set[Any] = set()  # Python functions a dispatcher was made of (while active)
    active = [True]  # a module that bound the replacement (``from numba import njit``) keeps it, inert
    numba.jit, numba.njit = (_defaulting(decorator, scope, seen, active) for decorator in originals)
    try:
        yield
    finally:
        active[0] = False
        numba.jit, numba.njit = originals


def _defaulting(decorator: Callable[..., Any], scope: tuple[str, ...], seen: set[Any],
                active: list[bool]) -> Callable[..., Any]:
    """``decorator`` (numba's ``jit`` or ``njit``) with ``cache=True`` unless told, for callers in
    ``scope`` while ``active``: called with the function (``njit(f, fastmath=True)``) or returning the
    decorator that will be (``@njit(parallel=True)``, ``@njit("f4(f4[::1])")``). Any other call is
    passed on as it is."""
    from numba.core import sigutils

    is_signature: Callable[[Any], bool] = sigutils.is_signature  # a str, a tuple or a typing Signature

    @functools.wraps(decorator)
    def wrapped(*args: Any, **options: Any) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if (not active[0] or "cache" in options or "signature_or_function" in options or len(args) > 1
                or caller.split(".")[0] not in scope):  # (jit(f, locals) positionally: not a form they use)
            return decorator(*args, **options)
        first = args[0] if args else None
        if first is None or isinstance(first, list) or is_signature(first):  # as numba tells the two apart
            return lambda function: _compiled(decorator, function, args, options, seen)
        if not inspect.isfunction(first):  # numba's own error for what is not a function
            return decorator(*args, **options)
        return _compiled(decorator, first, (), options, seen)

    return wrapped


def _compiled(decorator: Callable[..., Any], function: Any, signature: tuple[Any, ...], options: dict[str, Any],
              seen: set[Any]) -> Any:
    """``function``'s dispatcher by ``decorator(*signature, **options)``, with ``cache=True`` if it is the
    first made of ``function`` and numba can locate its source for a cache."""
    if not inspect.isfunction(function) or function in seen:  # numba's own error; a second dispatcher of one
        return decorator(*signature, **options)(function)  # function would share the first's cache entries
    seen.add(function)
    try:
        return decorator(*signature, cache=True, **options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available" (no source file on disk)
        return decorator(*signature, **options)(function)
