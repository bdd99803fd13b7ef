"""Files written aside and moved into place, and the pieces a killed writer leaves behind.

A file RankScope keeps (a FAISS index beside the store, the CPU precision choices) is written to
``<name>.<pid>.part`` in its own folder, then renamed over ``<name>`` (``os.replace``): a crash never
leaves half a file under the name. A process killed while it writes leaves the ``.part`` file,
which nothing reads: ``remove_orphans`` removes those whose writer is gone (no process has the pid)
or that nothing has written to for ``ORPHAN_AGE`` seconds (a pid the system has since given to
another process), whenever the folder is next written or opened.
"""
from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

log = logging.getLogger(__name__)
ORPHAN_AGE = 3600.0  # seconds without a write after which a .part file is an orphan whatever its pid
_PART = re.compile(r"(.+)\.(\d{1,10})\.part")


def partial(path: str | Path) -> Path:
    """Where this process writes ``path`` before moving it into place: ``<name>.<pid>.part`` beside it."""
    path = Path(path)
    return path.with_name(f"{path.name}.{os.getpid()}.part")


def _alive(pid: int) -> bool:
    if not 0 < pid < 2 ** 31:  # no process has such a pid
        return False
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, the pid is only looked up
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_orphans(folder: str | Path, ends: tuple[str, ...], max_age: float = ORPHAN_AGE,
                   now: float | None = None) -> list[Path]:
    """Remove the ``<name>.<pid>.part`` files in ``folder`` of a ``<name>`` ending in one of ``ends``
    (RankScope's own: a folder may hold others' files) whose writer no longer runs, or that were
    last written over ``max_age`` seconds ago (this process's own only then: another of its threads
    may be writing one). Returns those removed; a folder that does not exist or cannot be listed
    removes nothing."""
    folder = Path(folder)
    now = time.time() if now is None else now
    gone: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return gone
    for entry in entries:
        found = _PART.fullmatch(entry.name)
        if found is None or not found.group(1).endswith(ends):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
            pid = int(found.group(2))
            if age <= max_age and (pid == os.getpid() or _alive(pid)):
                continue
            os.unlink(entry.path)
        except OSError as err:  # gone already (its writer finished), or not ours to remove
            log.debug("left %s (%s)", entry.path, err)
            continue
        log.warning("removed %s, left by a writer that stopped (pid %s)", entry.path, found.group(2))
        gone.append(Path(entry.path))
    return gone
