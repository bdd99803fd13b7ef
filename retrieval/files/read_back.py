"""Files RankScope wrote and reads again, opened only as what they must be.

A file RankScope keeps beside the store or in its home — a kept FAISS index and its stamp, the
encoder's CPU choices, an uploaded data set's kept files, a fine-tuned model's training record, a
training run's checkpoints and held-out scores — is read again on a later open. Whoever can write
its folder can leave anything under its name: a FIFO (opening one blocks until a writer comes: the
dense build waited for ever), a device (``/dev/zero`` reads without end), a socket, a symbolic
link to any file of the machine, a file of any size. So every read back goes through
``open_read_back``:

1. the file must lie inside its folder once the folder's own links are resolved (a link to
   elsewhere among the folders inside it is refused) and have a name (not ``.`` or ``..``);
2. ``lstat``: it must be a regular file, not a link, of at most ``limit`` bytes — anything else is
   refused before it is opened;
3. it is opened with ``O_NOFOLLOW`` (a link swapped in meanwhile is not followed) and ``O_NONBLOCK``
   (a FIFO swapped in meanwhile opens at once, with no writer), then ``fstat``-ed: the file opened
   must be the one checked (its device and inode), regular and within ``limit``, so nothing can be
   put in its place between the check and the read.

Anything else raises ``NotReadBack`` (``TooBig`` past the limit) naming the file and why; a
missing file raises ``FileNotFoundError`` as ever. The caller treats either as a file not to be
trusted — built or measured again, or left unread — never as one to open another way.
``read_back_bytes`` reads such a file whole, at most ``limit`` bytes of it.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) \
    | getattr(os, "O_CLOEXEC", 0)


class NotReadBack(OSError):
    """A file read back that is not a regular file of its folder within its size."""


class TooBig(NotReadBack):
    """A file read back larger than it may be."""

    def __init__(self, message: str, size: int, limit: int):
        super().__init__(message)
        self.size, self.limit = size, limit


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return kind
    return "not a regular file"


def _checked(path: Path, st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotReadBack(f"{path.name} is {_kind(st.st_mode)}, not a file RankScope wrote: not opened")
    if st.st_size > limit:
        raise TooBig(f"{path.name} is {st.st_size:,} bytes, more than the {limit:,} such a file holds: not read",
                     st.st_size, limit)


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` names an entry of ``folder`` or of a folder inside it, its folders' links
    resolved (the entry's own name is not followed)."""
    path = Path(path)
    if path.name in ("", ".", ".."):
        return False
    home, parent = os.path.realpath(folder), os.path.realpath(path.parent)
    return parent == home or parent.startswith(home.rstrip(os.sep) + os.sep)


def open_read_back(path: str | Path, folder: str | Path, limit: int) -> BinaryIO:
    """``path`` opened for reading (binary), once it is a regular file of at most ``limit`` bytes
    inside ``folder`` (module docstring); ``NotReadBack`` (``TooBig``) otherwise, and
    ``FileNotFoundError`` when there is none."""
    path = Path(path)
    if not inside(path, folder):
        raise NotReadBack(f"{path} is not inside {folder}: not opened")
    checked = os.lstat(path)
    _checked(path, checked, limit)
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise
    except OSError as err:  # a link or a socket put in its place since the check (ELOOP, ENXIO), no access
        raise NotReadBack(f"{path.name} cannot be opened as a file ({err.strerror or err})") from None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise NotReadBack(f"{path.name} was replaced while it was opened: not read")
        _checked(path, opened, limit)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_back_bytes(path: str | Path, folder: str | Path, limit: int) -> bytes:
    """The bytes of ``path`` (``open_read_back``'s checks), at most ``limit``: ``TooBig`` for a file
    that grew past it while it was read."""
    with open_read_back(path, folder, limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooBig(f"{Path(path).name} grew past {limit:,} bytes while it was read: not read", len(data), limit)
    return data
