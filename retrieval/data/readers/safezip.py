"""Reading user zip archives safely: in memory, never extracted, with limits against bombs.

Everything is checked before a byte is decompressed (entry paths, symlinks, entry count,
declared sizes, compression ratios), and the bytes are counted again while reading,
because the sizes an archive declares can lie.
"""
from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from pathlib import Path

from retrieval.errors import DataError

DEFAULT_MAX_BYTES = 512 * 1024 * 1024  # total uncompressed bytes an archive may hold
DEFAULT_MAX_ENTRIES = 100_000
MAX_RATIO = 200  # uncompressed : compressed, for members over RATIO_MIN_BYTES
RATIO_MIN_BYTES = 1024 * 1024
_CHUNK = 1024 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):,.1f} MiB"


def is_ignored(path: str) -> bool:
    """macOS resource forks (``__MACOSX/``) and hidden files or folders (``.name``)."""
    parts = path.split("/")
    return parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts if p)


def normalize_member(raw: str, archive: str) -> str:
    """The member's path relative to the archive root, or DataError if it could escape it."""
    where = f"{archive}!{raw}"
    name = raw.replace("\\", "/")
    if "\x00" in name:
        raise DataError("entry name contains a NUL byte; refusing the archive", where)
    if name.startswith("/") or _DRIVE.match(name):
        raise DataError("entry has an absolute path; refusing the archive", where)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise DataError("entry path escapes the archive folder ('..'); refusing the archive", where)
    return "/".join(parts)


class SafeZip:
    """A zip archive opened for reading members into memory under fixed limits.

    ``names()`` lists the files (no folders, no ignored entries) in archive order, as
    normalized relative paths; ``read(name)`` returns a member's bytes.
    """

    def __init__(self, path: str | os.PathLike[str], display: str | None = None, *,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.display = display if display is not None else str(path)
        self.max_bytes = max_bytes
        self._read_total = 0
        try:
            self._zf = zipfile.ZipFile(Path(path))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as e:
            raise DataError(f"not a readable zip archive ({e})", self.display) from None
        try:
            self._members = self._check(max_entries)
        except BaseException:
            self._zf.close()
            raise

    def _check(self, max_entries: int) -> dict[str, zipfile.ZipInfo]:
        infos = self._zf.infolist()
        if len(infos) > max_entries:
            raise DataError(f"archive has {len(infos):,} entries, more than the limit of "
                            f"{max_entries:,}; refusing it", self.display)
        members: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in infos:
            name = normalize_member(info.filename, self.display)
            where = f"{self.display}!{info.filename}"
            if stat.S_ISLNK(info.external_attr >> 16):
                raise DataError("entry is a symbolic link; refusing the archive", where)
            if info.is_dir():
                continue
            if not name:
                raise DataError("entry has an empty name; refusing the archive", where)
            if name in members:
                raise DataError("archive holds this path twice; refusing it", where)
            total += info.file_size
            if total > self.max_bytes:
                raise DataError(f"archive declares more than {_mib(self.max_bytes)} of "
                                f"uncompressed data (the limit); refusing it", self.display)
            if (info.file_size > RATIO_MIN_BYTES
                    and info.file_size > MAX_RATIO * max(info.compress_size, 1)):
                raise DataError(f"entry expands from {info.compress_size:,} to {info.file_size:,} "
                                f"bytes (over {MAX_RATIO}:1), which looks like a zip bomb; "
                                f"refusing the archive", where)
            if is_ignored(name):
                continue
            if info.flag_bits & 0x1:
                raise DataError("entry is encrypted; encrypted archives are not supported", where)
            members[name] = info
        return members

    def names(self) -> list[str]:
        return list(self._members)

    def display_of(self, name: str) -> str:
        return f"{self.display}!{name}"

    def read(self, name: str) -> bytes:
        info = self._members[name]
        where = self.display_of(name)
        declared = info.file_size
        buf = bytearray()
        try:
            with self._zf.open(info) as f:
                while True:
                    chunk = f.read(_CHUNK)
                    if not chunk:
                        break
                    buf += chunk
                    n = len(buf)
                    if n > declared:
                        raise DataError("entry holds more data than its declared size; refusing "
                                        "the archive", where)
                    if self._read_total + n > self.max_bytes:
                        raise DataError(f"archive expands to more than {_mib(self.max_bytes)} "
                                        f"(the limit); refusing it", self.display)
                    if n > RATIO_MIN_BYTES and n > MAX_RATIO * max(info.compress_size, 1):
                        raise DataError(f"entry expands over {MAX_RATIO}:1, which looks like a "
                                        f"zip bomb; refusing the archive", where)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
                RuntimeError) as e:
            raise DataError(f"cannot read this archive entry ({e})", where) from None
        self._read_total += len(buf)
        return bytes(buf)

    def close(self) -> None:
        self._zf.close()

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
