"""One process-wide lock around every numba-parallel library call (ranx metrics and fusion, UMAP).

numba's default threading layer ("workqueue") is not thread-safe: two threads entering
``parallel=True`` code at once make numba abort the whole process ("Numba workqueue threading
layer is terminating: Concurrent access has been detected"). The app serves several users from
a thread pool, so a labelled-query search (ranx per-query metrics) next to an evaluation or a
UMAP projection would kill the server. Holding this lock around those calls serializes them;
ranx calls take milliseconds, a UMAP fit a few seconds. (tbb/omp layers are thread-safe but not
installed everywhere, so the lock is the portable fix.)
"""
from __future__ import annotations

import threading

NUMBA_LOCK = threading.RLock()
