"""Where the app writes the files a user downloads (the failure report, judged qrels).

Each export gets a fresh folder of its own under one root in the system's temporary folder, so two
sessions never share a file; the file's name inside it comes from ``retrieval.safe_names.file_name``
(a slug and a hash), never from a user's text as such. Gradio copies what a handler returns into
its own cache, so an export folder is needed only for moments: folders older than ``KEEP_S`` are
removed whenever a new one is made, and repeated exports cannot fill the disk.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

KEEP_S = 3600.0


def root() -> Path:
    return Path(tempfile.gettempdir()) / f"rankscope-exports-{os.getpid()}"


def export_folder(now: float | None = None) -> Path:
    """A new, empty folder for one export; older ones (past ``KEEP_S``) are removed first."""
    base = root()
    base.mkdir(parents=True, exist_ok=True)
    now = time.time() if now is None else now
    for old in base.iterdir():
        try:
            if now - old.stat().st_mtime > KEEP_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:  # removed meanwhile by another export
            continue
    return Path(tempfile.mkdtemp(dir=base))
