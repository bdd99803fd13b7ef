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
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

NUMBA_LOCK = threading.RLock()
CACHE_ENV = "NUMBA_CACHE_DIR"


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
