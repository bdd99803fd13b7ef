"""The workspaces the app has open, shared by every session; each session holds the key of its own
(a ``gr.State``), so one user's upload never changes another's view."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import gradio as gr

from retrieval import DenseNotReady, Store, Workspace
from retrieval.dataset import Dataset
from retrieval.language import corpus_tokenizer
from retrieval.progress import Progress
from training.job import JobQueue


FOREGROUND_S = 15.0  # a load waits this long for its encoding; a longer one goes on in the background


class Registry:
    """Opened workspaces, at most ``size`` kept, the least recently opened dropped first."""

    def __init__(self, store: Store, model: str | None, size: int = 8, language: str = "auto",
                 precision: str = "auto", foreground_s: float | None = FOREGROUND_S, engine=None):
        self.store, self.model, self.size, self.language = store, model, size, language
        self.engine = engine  # retrieval.engines: None is the in-process one
        self.precision, self.foreground_s = precision, foreground_s
        self._items: OrderedDict[str, Workspace] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, dataset: Dataset, progress: Progress | None = None, model: str | None = None) -> str:
        """Open ``dataset`` with ``model`` (default: the app's encoder) and BM25 (stemmer and
        stopwords of the corpus's language, detected or the app's ``language`` setting) built, and
        the dense index built in the background: the call waits for it up to ``foreground_s``
        seconds (reporting progress) unless it will clearly take longer, then returns while
        encoding goes on; returns the session key."""
        model = model or self.model
        key = f"{dataset.content_hash}:{model or ''}"
        with self._lock:
            ws = self._items.get(key)
            same_corpus = next((w for k, w in reversed(self._items.items())
                                if k.endswith(f":{model or ''}") and w.dataset.corpus_hash == dataset.corpus_hash), None)
        if ws is None and same_corpus is not None:  # queries or labels added: the indexes are reused
            ws = same_corpus.with_dataset(dataset)
        if ws is None:
            tokenizer = corpus_tokenizer([d.full_text for d in dataset.docs.values()], self.language)
            ws = Workspace(dataset, self.store, model=model, tokenizer=tokenizer, precision=self.precision,
                           engine=self.engine)
        ws.build_lexical(progress)  # now, so the first search is fast (loaded into the engine if it is not)
        ws.bm25  # noqa: B018 - and the explanations' statistics (the same index in-process)
        ws.start_dense()
        self._wait(ws, progress)
        self._keep(key, ws)
        return key

    def _wait(self, ws: Workspace, progress: Progress | None) -> None:
        """Wait for ``ws``'s dense build up to ``foreground_s`` seconds, or less once the rate so far
        says it will not be done by then."""
        if self.foreground_s is None:
            ws.wait_dense(None, progress)
            return
        deadline = time.monotonic() + self.foreground_s
        while not ws.wait_dense(min(1.0, max(0.0, deadline - time.monotonic())), progress):
            left = deadline - time.monotonic()
            if left <= 0 or (ws.encoding.seconds_left or 0.0) > left:
                return

    def add_run(self, key: str, imported) -> str:
        """The session's workspace ``key`` with an imported run added, under a key of its own (the
        workspace other sessions share keeps its systems); returns that key."""
        ws = self.get(key).with_run(imported)
        new_key = f"{key}+{imported.name}:{imported.content_hash[:12]}"
        self._keep(new_key, ws)
        return new_key

    def carry_runs(self, key: str, before: Workspace) -> str:
        """``key``'s workspace with the imported runs of ``before`` (the session's previous one) added
        again: a session keeps its runs when it moves to other queries, labels or an encoder."""
        for imported in before.imported.values():
            key = self.add_run(key, imported)
        return key

    def _keep(self, key: str, ws: Workspace) -> None:
        """Hold ``ws`` under ``key`` as the most recent, dropping the least recent past ``size``."""
        with self._lock:
            self._items[key] = ws
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def get(self, key: str) -> Workspace:
        with self._lock:
            ws = self._items.get(key)
        if ws is None:
            raise gr.Error("this data set was closed to free memory; load it again on the Data tab")
        return ws


@dataclass
class Context:
    """What every view's ``build`` needs: the registry, the training queue, the session's key
    (a ``gr.State``) and the workspace the page opens on."""

    registry: Registry
    jobs: JobQueue
    key: gr.State
    start: Workspace

    def workspace(self, key: str) -> Workspace:
        return self.registry.get(key)


def require_dense(ws: Workspace) -> None:
    """For a view that needs the dense index: while it is being built in the background, a message
    saying how far it is, before any work starts."""
    if ws.pending(("dense",)):
        raise gr.Error(str(DenseNotReady(ws.encoding)))


def split_dropdown(ws: Workspace) -> gr.Dropdown:
    """A view's split picker: the workspace's labelled splits, its default split chosen."""
    return gr.Dropdown(choices=ws.dataset.splits, value=ws.dataset.default_split(), label="Split", scale=1)


@dataclass
class SplitView:
    """A view whose only data-set-dependent input is its split picker (``refresh`` on a new data set)."""

    split: gr.Dropdown

    def outputs(self) -> list:
        return [self.split]

    def refresh(self, ws: Workspace) -> tuple:
        """The new workspace's labelled splits, its default chosen."""
        return (gr.update(choices=ws.dataset.splits, value=ws.dataset.default_split()),)
