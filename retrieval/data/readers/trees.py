"""File trees: a folder on disk or a zip archive read in memory, behind one interface.

:class:`Tree` lists, reads and names the files of either, so the data set readers need not
know which they have; :func:`beir_root` finds where in a tree a BEIR data set lies.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path

from retrieval.data.readers.decode import Text, read_file
from retrieval.data.readers.safezip import SafeZip
from retrieval.errors import DataError
from retrieval.progress import Progress

CORPUS_NAMES = ("corpus.jsonl", "corpus.csv", "corpus.tsv")
QUERY_NAMES = ("queries.jsonl", "queries.csv", "queries.tsv")


class Tree(ABC):
    """A folder or a zip archive seen alike: files by relative posix path, bytes, display names."""

    display: str

    @abstractmethod
    def files(self) -> list[str]:
        """Relative posix paths, ignored ones left out."""

    @abstractmethod
    def read(self, rel: str) -> bytes: ...

    @abstractmethod
    def text(self, rel: str, progress: Progress | None = None) -> Text:
        """The file read as a stream."""

    @abstractmethod
    def display_of(self, rel: str) -> str: ...

    @abstractmethod
    def is_file(self, rel: str) -> bool: ...

    @abstractmethod
    def children(self, rel: str) -> tuple[list[str], list[str]]:
        """(dirs, files) directly under ``rel``."""


class FolderTree(Tree):
    def __init__(self, root: Path, display: str, max_entries: int):
        self.root = root
        self.display = display
        self.max_entries = max_entries

    def display_of(self, rel: str) -> str:
        return os.path.join(self.display, *rel.split("/"))

    def read(self, rel: str) -> bytes:
        return read_file(self.root.joinpath(*rel.split("/")), self.display_of(rel))

    def text(self, rel: str, progress: Progress | None = None) -> Text:
        return Text.of_file(self.root.joinpath(*rel.split("/")), self.display_of(rel), progress)

    def is_file(self, rel: str) -> bool:
        return self.root.joinpath(*rel.split("/")).is_file()

    def children(self, rel: str) -> tuple[list[str], list[str]]:
        base = self.root.joinpath(*rel.split("/")) if rel else self.root
        dirs: list[str] = []
        files: list[str] = []
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return [], []
        for e in entries:
            if e.name.startswith(".") or e.name == "__MACOSX":
                continue
            (dirs if e.is_dir() else files).append(e.name)
        return dirs, files

    def files(self) -> list[str]:
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__MACOSX")
            rel = Path(dirpath).relative_to(self.root).as_posix()
            for f in sorted(filenames):
                if not f.startswith("."):
                    out.append(f if rel == "." else f"{rel}/{f}")
            if len(out) > self.max_entries:
                raise DataError(f"folder holds more than {self.max_entries:,} files; point to "
                                f"the data set's own folder", self.display)
        return sorted(out)


class PagesTree(Tree):
    """Pages uploaded side by side (each a file of its own, wherever the upload stored it), seen as one
    folder of them by their names: a page's link to another's name resolves as in a folder."""

    def __init__(self, paths: dict[str, Path], display: str):
        self.paths = paths  # name -> where the file is
        self.display = display

    def files(self) -> list[str]:
        return sorted(self.paths)

    def read(self, rel: str) -> bytes:
        return read_file(self.paths[rel], rel)

    def text(self, rel: str, progress: Progress | None = None) -> Text:
        return Text.of_file(self.paths[rel], rel, progress)

    def display_of(self, rel: str) -> str:
        return rel

    def is_file(self, rel: str) -> bool:
        return rel in self.paths

    def children(self, rel: str) -> tuple[list[str], list[str]]:
        return ([], self.files()) if not rel else ([], [])


class ZipTree(Tree):
    def __init__(self, zf: SafeZip):
        self.zf = zf
        self.display = zf.display
        self._names = zf.names()
        self._set = set(self._names)

    def files(self) -> list[str]:
        return list(self._names)

    def read(self, rel: str) -> bytes:
        return self.zf.read(rel)

    def text(self, rel: str, progress: Progress | None = None) -> Text:
        """The member, read whole under the archive's limits (``SafeZip``), then decoded as a stream."""
        return Text.of_bytes(self.zf.read(rel), self.display_of(rel))

    def display_of(self, rel: str) -> str:
        return self.zf.display_of(rel)

    def is_file(self, rel: str) -> bool:
        return rel in self._set

    def children(self, rel: str) -> tuple[list[str], list[str]]:
        prefix = f"{rel}/" if rel else ""
        dirs: dict[str, None] = {}
        files = []
        for n in self._names:
            if n.startswith(prefix):
                head, sep, _ = n[len(prefix):].partition("/")
                if sep:
                    dirs[head] = None
                else:
                    files.append(head)
        return list(dirs), files


def join(base: str, name: str) -> str:
    """A path inside a tree: ``base/name``, or ``name`` at the top."""
    return f"{base}/{name}" if base else name


def first_file(tree: Tree, base: str, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is a file in folder ``base`` of the tree."""
    return next((join(base, n) for n in names if tree.is_file(join(base, n))), None)


def beir_root(tree: Tree) -> str | None:
    """The folder holding the corpus: the top, or the only sub-folder that has one."""
    if first_file(tree, "", CORPUS_NAMES):
        return ""
    found = [d for d in tree.children("")[0] if first_file(tree, d, CORPUS_NAMES)]
    if len(found) > 1:
        raise DataError(f"holds several data sets ({', '.join(found)}); load one of them",
                        tree.display)
    return found[0] if found else None
