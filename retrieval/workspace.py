"""A data set opened for analysis: its indexes, systems, cached runs and evaluations.

This is the one object the CLI, the app and the benchmarks share. Everything expensive is built
lazily and cached: embeddings in the store by (model fingerprint, text hash); runs and metrics by
(data set hash, system, parameters, split, depth).

Its systems (``retrieval.systems``) are the registered built-ins and the runs imported from files
(``add_run``): each is an object that ranks over this workspace's data and indexes, and the
workspace caches what it gives; nothing here depends on which system it is. What a system builds
it keeps in a slot here (``system_state``, per corpus or per workspace: ``retrieval.systems.state``),
an index built in the background included (``background_build``); ``start_builds`` starts every
background build the registered systems wait for. The values of the systems' declared parameters
(``retrieval.systems.declared``: BM25's k1, query likelihood's μ) are the workspace's too, one frozen
mapping per system (``settings_of``; BM25's as ``bm25_settings``), given when it is made
(``with_settings`` makes another).
"""
from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from retrieval import systems
from retrieval.data.dataset import Dataset
from retrieval.data.readers.runs import ImportedRun, match_dataset
from retrieval.data.run import Run
from retrieval.errors import UnknownSplit
from retrieval.evaluation.measures import Evaluation, evaluate_run, scores_from_run
from retrieval.evaluation.metrics import CONDENSED_DEPTH, EVALUATED
from retrieval.index.background_build import EncodingStatus
from retrieval.index.bm25_index import BM25Index
from retrieval.index.bm25_settings import BM25Settings
from retrieval.index.builds import IndexBuild
from retrieval.index.dense_index import DenseIndex, DenseRetriever, index_kind_for
from retrieval.index.encoder import Encoder, load_encoder
from retrieval.index.engines import Corpus, Engine, InProcess, LexicalIndex
from retrieval.index.splade import SparseModel, SparseRetriever, embed_sparse_corpus, load_sparse_model
from retrieval.index.tokenize import Tokenizer
from retrieval.progress import Counter, Progress, counting
from retrieval.safe_names import check_new_name
from retrieval.store import Store, cache_key
from retrieval.systems import BASE_SYSTEMS, BM25, Imported, Probe, System
from retrieval.systems.declared import Settings, settings
from retrieval.systems.state import CORPUS, SCOPES, Slots, State

S = TypeVar("S")  # a system's state (``system_state``)

EVAL_DEPTH = 1000
POLL_S = 0.1  # wait_dense's progress reports: as often as the encoder's batches on a small corpus


def _follow_all(builds: tuple[IndexBuild[Any, Any], ...]) -> None:
    """Wait for each of ``builds`` in turn (what a background build started after them waits for)."""
    for b in builds:
        b.follow(None, None, POLL_S)


def _read_settings(given: Mapping[str, Mapping[str, object]]) -> dict[str, Settings]:
    """Each system's declared parameters' values from ``given`` (``declared.settings``: every value
    read by ``declared.parse``, a name not declared refused), by system key."""
    out = {}
    for key, values in given.items():
        system = systems.builtin(key)
        if system is None:
            raise ValueError(f"unknown system {key!r} in the parameters; choose from {', '.join(systems.keys())}")
        out[key] = settings(system.parameters, values, system.short)
    return out


class Workspace:
    """A data set opened for analysis (module docstring): its systems, indexes, runs and evaluations.

    Args:
        dataset: The data set (``retrieval.data.readers.load_dataset``).
        store: Where embeddings, runs and metrics are cached and judgments kept; None caches nothing
            beyond this process.
        model: The dense encoder: a sentence-transformers id or folder, a loaded ``Encoder``, or None
            for the default (all-MiniLM-L6-v2). Loaded when first needed.
        k1: BM25's term-frequency saturation: a finite number of 0 or more (its declared parameter ``k1``).
        b: BM25's length normalization: a number from 0 to 1 (``b``).
        bm25_method: BM25's variant as bm25s names it ("lucene" by default; ``method``).
        tokenizer: How BM25 analyzes text (default: ``Tokenizer()``).
        index_kind: The dense index: "flat", "hnsw", "sq8", or "auto" (flat, HNSW on a large corpus).
        depth: How deep each system's candidate lists go for fusion and probes.
        device: Where the encoders run: "auto", "cpu", "cuda" or "mps".
        index_dims: Reduce the dense vectors to this many dimensions (PCA) before indexing; None keeps them.
        precision: The encoder's precision: "auto", "fp32", "bf16" or "fp16".
        engine: Where BM25 and the vectors live (``retrieval.index.engines``); None: in this process.
        sparse_model: The learned sparse model; None: the bundled SPLADE-tiny.
        settings: The values of systems' declared parameters, ``{system key: {parameter: value}}``
            (text or values, each read by ``declared.parse``), over their defaults; BM25's over
            ``k1``, ``b`` and ``bm25_method``.

    Raises:
        ValueError: An unknown system or parameter, or a value outside its declared range, in one line.
    """

    def __init__(self, dataset: Dataset, store: Store | None = None, model: str | Encoder | None = None,
                 k1: object = 0.9, b: object = 0.4, bm25_method: str = "lucene",
                 tokenizer: Tokenizer | None = None, index_kind: str = "auto", depth: int = 1000,
                 device: str | None = "auto", index_dims: int | None = None, precision: str | None = "auto",
                 engine: Engine | None = None, sparse_model: str | None = None,
                 settings: Mapping[str, Mapping[str, object]] | None = None):
        self.dataset, self.store = dataset, store
        self.engine = engine or InProcess()  # where BM25 and the vectors live (retrieval.index.engines)
        self._model_arg, self._device, self._precision = model, device, precision
        given = {**(settings or {})}
        given[BM25] = {"k1": k1, "b": b, "method": bm25_method, **given.get(BM25, {})}
        self._settings = _read_settings(given)
        self.tokenizer = tokenizer or Tokenizer()
        self.index_kind = index_kind_for(len(dataset.docs), index_kind)  # "auto": flat, or HNSW when big
        self.index_dims, self.depth = index_dims, depth
        self._embeddings_from: Workspace | None = None  # with_index: reuse that one's embeddings
        self._lock = threading.RLock()
        n = len(dataset.docs)
        self._dense_build = IndexBuild(lambda: self.encoder, self._build_dense, n, "rankscope-dense-build")
        self.sparse_model = sparse_model  # None: the bundled SPLADE-tiny (``retrieval.index.splade``)
        self._sparse_build = IndexBuild(lambda: load_sparse_model(sparse_model), self._build_sparse, n,
                                        "rankscope-sparse-build")
        self._bm25: BM25Index | None = None  # in-process: explanations, training (the engine's own when in-process)
        self._lexical: LexicalIndex | None = None  # the engine's BM25 (what ranks)
        self._encoder: Encoder | None = model if isinstance(model, Encoder) else None
        self._corpus_states = Slots()  # systems' per-corpus states: shared with every sibling
        self._workspace_states = Slots()  # systems' per-workspace states (λ): shared with with_run's copies
        self.doc_row = {d: i for i, d in enumerate(dataset.doc_ids)}
        self._imported: dict[str, ImportedRun] = {}  # shared with with_model / with_index siblings
        self._run_owners: dict[str, str] = {}  # imported run -> its maker ("": everyone's), as ``_imported``
        if store is not None:
            store.register_dataset(dataset.queries_hash, dataset.name, dataset.summary())
            store.sizes.see(dataset)  # what the rows kept of it may hold when read back (``row_bounds``)

    @property
    def model_name(self) -> str | None:
        """The encoder as given by name or folder (None: the default, or an in-memory encoder)."""
        return self._model_arg if isinstance(self._model_arg, str) else None

    def with_model(self, model: str | Encoder | None) -> Workspace:
        """The same data set with another encoder, sharing this workspace's BM25 index.

        Args:
            model: The other encoder, as ``Workspace``'s ``model``.

        Returns:
            A new workspace over the same data set, store and engine.
        """
        return self._sibling(model, self.index_kind, self.index_dims, self.sparse_model)

    def with_sparse_model(self, sparse_model: str | None) -> Workspace:
        """The same data set and dense encoder with another learned sparse model (a fine-tuned SPLADE
        folder, say), sharing BM25, the encoder and its dense index.

        Args:
            sparse_model: The other sparse model, as ``Workspace``'s ``sparse_model``.

        Returns:
            A new workspace over the same data set, store and engine.
        """
        other = self._sibling(self._model_arg, self.index_kind, self.index_dims, sparse_model)
        other._encoder, other._dense_build, other._embeddings_from = self._encoder, self._dense_build, \
            self._embeddings_from
        return other

    def with_index(self, kind: str, dims: int | None = None) -> Workspace:
        """The same data set and encoder over another dense index (``kind``, optionally reduced to
        ``dims`` dimensions), sharing BM25, the encoder and the corpus embeddings; its runs, metrics
        and λ are cached under its own parameters. In-process only (the variants are FAISS's).

        Args:
            kind: The dense index: "flat", "hnsw" or "sq8".
            dims: Reduce the vectors to this many dimensions (PCA); None keeps them.

        Returns:
            A new workspace sharing this one's BM25, encoder and embeddings.

        Raises:
            ValueError: The engine serves its own index only.
        """
        if not self.engine.capabilities.index_variants:
            raise ValueError(f"index variants (int8, PCA) are built in-process; the {self.engine.name} engine "
                             f"serves its own flat or HNSW index only")
        other = self._sibling(self._model_arg, kind, dims, self.sparse_model)
        other._encoder = self.encoder
        other._embeddings_from = self
        return other

    def with_run(self, imported: ImportedRun, owner: str = "") -> Workspace:
        """This workspace with one more imported run, as a copy of its own: the indexes, encoder,
        embeddings and λ are shared, the imported runs are not, so a workspace other sessions hold
        is left as it was.

        Args:
            imported: The run to add (``retrieval.data.readers.runs``), under its name.
            owner: Its maker (``add_run``).

        Returns:
            The copy holding the run.
        """
        other = copy.copy(self)
        other._imported, other._run_owners = dict(self._imported), dict(self._run_owners)
        other.add_run(imported, owner)
        return other

    def with_dataset(self, dataset: Dataset) -> Workspace:
        """The same corpus with other queries or labels (``dataset.corpus_hash`` must match): the
        BM25 and dense indexes, the encoder and the imported runs are shared, while runs, metrics
        and λ are the new data set's own (they are keyed by its content hash).

        Args:
            dataset: The same documents with other queries or labels.

        Returns:
            A copy of this workspace over ``dataset``.

        Raises:
            ValueError: ``dataset`` holds other documents.
        """
        if dataset.corpus_hash != self.dataset.corpus_hash:
            raise ValueError("with_dataset needs the same documents (corpus hash)")
        other = copy.copy(self)
        other.dataset, other._workspace_states = dataset, Slots()
        other._imported, other._run_owners = dict(self._imported), dict(self._run_owners)
        if self.store is not None:
            self.store.register_dataset(dataset.queries_hash, dataset.name, dataset.summary())
            self.store.sizes.see(dataset)
        return other

    def with_labels(self, dataset: Dataset) -> Workspace:
        """The same documents and queries with other labels (the store's judgments merged in, say):
        everything is shared but the weights systems tune on labels (λ, μ: the per-workspace state);
        every run cached is this one's too (``data_key``), while evaluations and tuned weights are
        the new labels' own. Not recorded among the store's data sets: its runs are listed as this
        workspace's.

        Args:
            dataset: The same documents and queries with other labels.

        Returns:
            A copy of this workspace over ``dataset``.

        Raises:
            ValueError: ``dataset`` holds other documents or queries.
        """
        if dataset.queries_hash != self.dataset.queries_hash:
            raise ValueError("with_labels needs the same documents and queries (queries_hash)")
        other = copy.copy(self)
        other.dataset, other._workspace_states = dataset, Slots()
        other._imported, other._run_owners = dict(self._imported), dict(self._run_owners)
        return other

    def _sibling(self, model: str | Encoder | None, index_kind: str, index_dims: int | None, sparse_model: str | None,
                 values: dict[str, Settings] | None = None) -> Workspace:
        """A workspace over the same data set sharing BM25 (and the sparse index when its model is
        the same), with this one's parameter values or ``values``; BM25 and the per-corpus states are
        shared only where BM25's settings are the same."""
        other = Workspace(self.dataset, self.store, model=model, tokenizer=self.tokenizer, index_kind=index_kind,
                          depth=self.depth, device=self._device, index_dims=index_dims,
                          precision=self._precision, engine=self.engine,
                          sparse_model=sparse_model, settings=self._settings if values is None else values)
        if other.bm25_settings != self.bm25_settings:  # another BM25: its own index and per-corpus states
            other._imported, other._run_owners = self._imported, self._run_owners
            return other
        other._bm25, other._lexical = self._bm25, self.lexical
        if other.sparse_model == self.sparse_model:  # the same corpus and sparse model: the same index
            other._sparse_build = self._sparse_build
        other._imported, other._run_owners = self._imported, self._run_owners  # the same data set: the same runs
        other._corpus_states = self._corpus_states  # the same corpus and lexical settings
        return other

    def with_settings(self, changes: Mapping[str, Mapping[str, object]]) -> Workspace:
        """The same data set, encoder and store with other values of systems' declared parameters
        (``--param``, a view's knobs): what does not depend on them is shared (the encoder, the dense and
        sparse indexes, the imported runs; BM25 and the per-corpus states where BM25's settings stay),
        and every run is cached under its own values (``System.params``).

        Args:
            changes: ``{system key: {parameter: value}}``, over this workspace's values.

        Returns:
            A new workspace (this one itself where nothing changes).

        Raises:
            ValueError: An unknown system or parameter, or a value outside its range, in one line.
        """
        merged = {key: {**values, **changes.get(key, {})} for key, values in self._settings.items()}
        merged.update({key: dict(values) for key, values in changes.items() if key not in merged})
        values = _read_settings(merged)
        if values == self._settings:
            return self
        other = self._sibling(self._model_arg, self.index_kind, self.index_dims, self.sparse_model, values)
        other._encoder, other._dense_build, other._embeddings_from = self._encoder, self._dense_build, \
            self._embeddings_from
        return other

    def settings_of(self, key: str) -> Settings:
        """The values of system ``key``'s declared parameters here, by name (its defaults unless the
        workspace was given others; empty for a system without parameters or unknown)."""
        if key in self._settings:
            return self._settings[key]
        system = systems.builtin(key)
        return settings(system.parameters, {}, system.short) if system is not None else settings((), {}, key)

    @property
    def bm25_settings(self) -> BM25Settings:
        """BM25's settings (its declared parameters' values) as the engines take them."""
        values = self.settings_of(BM25)
        return BM25Settings(float(values["k1"]), float(values["b"]), str(values["method"]))

    # ---- systems: the built-in ones and the imported runs --------------------------------
    @property
    def imported(self) -> dict[str, ImportedRun]:
        """The imported runs by name (a copy; ``add_run`` adds one)."""
        return dict(self._imported)

    @property
    def system_names(self) -> tuple[str, ...]:
        """Every system this workspace can run: the registered built-ins, then the imported runs."""
        return (*systems.keys(), *self._imported)

    @property
    def shown_systems(self) -> tuple[str, ...]:
        """The systems listed unless the analyst picks others: the built-ins shown by default
        (``System.shown_by_default``, in the order they registered), then the imported runs."""
        return (*systems.shown(), *self._imported)

    def system_state(self, key: str, make: Callable[[], S], scope: str = CORPUS) -> S:
        """The state a system keeps under ``key`` (an index over the corpus, λ), made by ``make()``
        the first time it is asked for in its ``scope`` (``retrieval.systems.state``: ``CORPUS``,
        shared with every workspace made from this one; ``WORKSPACE``, with ``with_run``'s copies).
        The state must have ``nbytes()``: the memory budget counts it.

        Args:
            key: The state's name, unique among the systems (the system's key, say).
            make: Makes the state, called once per scope.
            scope: ``CORPUS`` or ``WORKSPACE``.

        Returns:
            The state, made now or earlier.
        """
        return self._slots(scope).get(key, make)

    def background_build(self, key: str, make: Callable[[Counter | None, Callable[[], None] | None], Any], total: int,
                         expected_bytes: int = 0, scope: str = CORPUS) -> IndexBuild[Any, Any]:
        """A system's index built in the background (``retrieval.index.builds.IndexBuild``), kept as its
        state under ``key``: ``make(progress, indexing)`` builds it (``progress(done, total)`` as it
        goes); ``start_builds`` starts it after the encoders' builds, and the system, naming it in
        ``waits_for``, is ``pending`` until it is done. Asked for before, it is built in the caller's
        thread, as the dense index is.

        Args:
            key: The state's name (as ``system_state``).
            make: ``make(progress, indexing)`` builds the index and returns it.
            total: The count ``progress`` counts to (the corpus's documents, say).
            expected_bytes: What the index will hold, counted by the memory budget while it is built.
            scope: ``CORPUS`` or ``WORKSPACE``.

        Returns:
            The build; ``get()`` or ``value`` gives the index.
        """
        return self.system_state(key, lambda: IndexBuild(lambda: None, lambda _, progress, indexing:
                                                         make(progress, indexing), total, f"rankscope-{key}-build",
                                                         expected_bytes), scope)

    def system_states(self) -> dict[tuple[int, str], State]:
        """Every system state made so far, by a key the workspaces sharing it share (its slots' and
        its own), for the memory budget.

        Returns:
            ``{(slots id, key): state}``.
        """
        return {(id(slots), key): state for slots in (self._corpus_states, self._workspace_states)
                for key, state in slots.items()}

    def _slots(self, scope: str) -> Slots:
        if scope not in SCOPES:
            raise ValueError(f"unknown state scope {scope!r}; choose from {', '.join(SCOPES)}")
        return self._corpus_states if scope == CORPUS else self._workspace_states

    def add_run(self, imported: ImportedRun, owner: str = "") -> str:
        """Register an imported run as a system under its name (matched to this data set's ids
        first when it was read without it); a name already taken, or one that looks like a system's
        without being it (``safe_names.check_new_name``: ``bm２5``, ``Dense``), is a ValueError.
        Imported run names live in the workspace that holds them: the app gives each session's runs
        a workspace copy of its own (``with_run``), so names are per maker, and the runs it caches
        in the store are its maker's (``run_owner``): on a shared deployment another session's
        history never lists them (``Store.runs``).

        Args:
            imported: The run read from a file (``retrieval.data.readers.runs``).
            owner: Its maker (``retrieval.sharing.owners``); ``""``: everyone's (the command line).

        Returns:
            The name it is registered under.

        Raises:
            ValueError: The name is a built-in's, taken, or looks like another system's.
        """
        name = imported.name
        if systems.is_reserved(name):
            raise ValueError(f"an imported run cannot be named {name!r}: a built-in system has that name")
        with self._lock:
            if name in self._imported:
                raise ValueError(f"an imported run named {name!r} is already there; give this one another name")
            check_new_name(name, "run's name", self.system_names, spaces=False)
            if imported.dataset != self.dataset.content_hash:
                imported = match_dataset(imported, self.dataset)
            self._imported[name] = imported
            self._run_owners[name] = owner
        return name

    def run_owner(self, system: str) -> str:
        """The maker of the imported run ``system`` (``add_run``); ``""`` for a built-in system (its runs
        are everyone's: anyone can compute them) or a run imported for everyone."""
        return self._run_owners.get(system, "") if system in self._imported else ""

    # ---- components (lazy) ---------------------------------------------------------------
    @property
    def corpus(self) -> Corpus:
        return Corpus(self.dataset.corpus_hash, self.dataset.doc_ids, [d.full_text for d in self.dataset.docs.values()])

    @property
    def lexical(self) -> LexicalIndex:
        """The engine's BM25 (``retrieval.index.engines``): what the BM25 system and the hybrids rank with."""
        return self.build_lexical()

    def build_lexical(self, progress: Progress | None = None) -> LexicalIndex:
        """The engine's BM25, built (or loaded into the engine) now if it is not yet; reports
        progress where the engine loads documents one batch at a time.

        Args:
            progress: ``progress(fraction, message)`` as documents are indexed, or None.

        Returns:
            The engine's lexical index (``retrieval.index.engines.LexicalIndex``).
        """
        with self._lock:
            if self._lexical is None:
                self._lexical = self.engine.lexical(self.corpus, self.tokenizer, self.bm25_settings, self.store,
                                                    progress=counting(progress,
                                                                      "indexing {done}/{total} documents for BM25"))
            return self._lexical

    @property
    def bm25(self) -> BM25Index:
        """BM25 in this process, for what an engine does not answer: per-term explanations, document
        lengths, training margins. The in-process engine's own index; beside another engine, the
        same index over the same analyzed terms, built (or read from the store) on first use."""
        if self.engine.capabilities.explains:  # the engine's own index is RankScope's BM25Index
            return cast(BM25Index, self.lexical)  # explains: the in-process engine, whose index is a BM25Index
        with self._lock:
            if self._bm25 is None:
                self._bm25 = InProcess().lexical(self.corpus, self.tokenizer, self.bm25_settings, self.store)
            return self._bm25

    @property
    def built_lexical(self) -> tuple[LexicalIndex, ...]:
        """The BM25 indexes this workspace holds built (the engine's, and the in-process one beside
        another engine); builds nothing."""
        return tuple(i for i in (self._lexical, self._bm25) if i is not None)

    @property
    def loaded_encoder(self) -> Encoder | None:
        """The encoder if it is loaded, else None; loads nothing."""
        return self._encoder

    @property
    def encoder(self) -> Encoder:
        """The dense encoder, loaded now if it is not yet."""
        with self._lock:
            if self._encoder is None:
                self._encoder = load_encoder(self.model_name, device=self._device, precision=self._precision)
            return self._encoder

    def build_dense(self, progress: Progress | None = None) -> DenseRetriever:
        """Embed the corpus (from the store where cached) and index it; reports progress. A build
        under way in the background (``start_dense``) is waited for instead.

        Args:
            progress: ``progress(fraction, message)`` as documents are encoded, or None.

        Returns:
            The dense retriever (the encoder and its index).
        """
        return self._dense_build.get(counting(progress, "encoding {done}/{total} documents"))

    def _build_dense(self, enc: Encoder, progress: Counter | None = None,
                     indexing: Callable[[], None] | None = None) -> DenseRetriever:
        if self.store is not None:
            self.store.register_model(enc.fingerprint, enc.name, enc.dim, {"max_seq_length": enc.max_seq_length})
        if self._embeddings_from:
            source = self._embeddings_from.build_dense()
            held = source.index.embeddings if isinstance(source.index, DenseIndex) else None  # an engine's: encoded
            built = self.engine.vectors(self.corpus, enc, self.store, self.index_kind, self.index_dims,
                                        indexing=indexing, embeddings=held)
            return DenseRetriever(enc, built.index, self.store, source.from_store, source.encoded)
        built = self.engine.vectors(self.corpus, enc, self.store, self.index_kind, self.index_dims,
                                    progress=progress, indexing=indexing)
        return DenseRetriever(enc, built.index, self.store, built.from_store, built.encoded)

    def build_sparse(self, progress: Progress | None = None) -> SparseRetriever:
        """Encode the corpus with the learned sparse model (from the store where cached) and index
        it, reporting progress; a build under way in the background is waited for instead.

        Args:
            progress: ``progress(fraction, message)`` as documents are encoded, or None.

        Returns:
            The learned sparse retriever (the model and its index).
        """
        return self._sparse_build.get(counting(progress, "encoding {done}/{total} documents"))

    def _build_sparse(self, model: SparseModel, progress: Counter | None = None,
                      indexing: Callable[[], None] | None = None) -> SparseRetriever:
        emb = embed_sparse_corpus(model, self.corpus.texts, self.store, progress)
        if indexing:
            indexing()
        return SparseRetriever(model, self.engine.sparse(self.corpus, model.fingerprint, emb.vectors, model.vocab_size),
                               emb.from_store, emb.encoded)

    def start_dense(self) -> EncodingStatus | None:
        """Build the dense index in a background thread (``retrieval.index.background_build``) unless it is
        built or being built; returns where that build stands (None: built already, in the
        foreground). Meanwhile ``dense`` and the systems that need it raise ``DenseNotReady``,
        and BM25 answers.

        Returns:
            Where the build stands, or None when it is built.
        """
        return self._dense_build.start()

    def start_sparse(self) -> EncodingStatus | None:
        """The learned sparse index's build, in the background (as ``start_dense``), once a dense
        build under way is over: one encoder at a time has the cores.

        Returns:
            Where the build stands, or None when it is built.
        """
        return self._sparse_build.start(after=lambda: self._dense_build.follow(None, None, POLL_S))

    def wait_dense(self, timeout: float | None = None, progress: Progress | None = None) -> bool:
        """Wait at most ``timeout`` seconds (None: as long as it takes) for the background dense
        build, reporting it to ``progress`` every ``POLL_S``; True when the dense index is ready or
        nothing builds it in the background.

        Args:
            timeout: The most seconds to wait; None waits until it is done.
            progress: ``progress(fraction, message)`` as documents are encoded, or None.

        Returns:
            Whether the dense index is ready (or nothing builds it in the background).
        """
        return self._dense_build.follow(timeout, counting(progress, "encoding {done}/{total} documents"), POLL_S)

    @property
    def encoding(self) -> EncodingStatus | None:
        """Where the background dense build stands (None: there was none)."""
        return self._dense_build.status

    @property
    def builds(self) -> dict[str, IndexBuild[Any, Any]]:
        """Every index this workspace may build in the background, by kind ("dense", "sparse", and
        the key of each system's own ``background_build`` asked for so far)."""
        own = {key: s for key, s in self._corpus_states.items() + self._workspace_states.items()
               if isinstance(s, IndexBuild)}
        return {"dense": self._dense_build, "sparse": self._sparse_build, **own}

    def start_builds(self) -> None:
        """Start every background build the registered systems wait for (``System.waits_for``): the
        dense index, then the learned sparse one, then the systems' own, one after the other (one
        encoder at a time has the cores)."""
        self.start_dense()
        self.start_sparse()
        started: list[IndexBuild[Any, Any]] = [self._dense_build, self._sparse_build]
        for key in systems.keys():
            for build in self.system(key).waits_for(self):
                if all(build is not b for b in started):
                    build.start(after=functools.partial(_follow_all, tuple(started)))
                    started.append(build)

    def pending(self, names: Iterable[str]) -> list[str]:
        """Those of the systems ``names`` that cannot answer yet: an index they wait for
        (``System.waits_for``: the dense one, the learned sparse one, a system's own) is still being
        built in the background (BM25 and imported runs never wait).

        Args:
            names: System names (``system_names``).

        Returns:
            Those of ``names`` that wait, in their order.
        """
        return [s for s in names if any(b.pending for b in self.system(s).waits_for(self))]

    @property
    def dense(self) -> DenseRetriever:
        """The dense retriever, built now when nothing builds it in the background; while a
        background build runs, ``DenseNotReady`` (a failed one raises its error)."""
        return self._dense_build.value

    @property
    def sparse(self) -> SparseRetriever:
        """The learned sparse retriever (SPLADE, ``retrieval.index.splade``), built as ``dense`` is."""
        return self._sparse_build.value

    # ---- systems ---------------------------------------------------------------------------
    def system(self, name: str) -> System:
        """The system ``name`` names: a built-in (``retrieval.systems``) or an imported run.

        Args:
            name: A system's key or an imported run's name.

        Returns:
            The system (``retrieval.systems.System``).

        Raises:
            ValueError: No system has that name.
        """
        if name in self._imported:
            return Imported(self._imported[name])
        found = systems.builtin(name)
        if found is None:
            raise ValueError(f"unknown system {name!r}; choose from {', '.join(self.system_names)}")
        return found

    def system_params(self, name: str, eval_split: str | None = None) -> dict[str, Any]:
        """What a system's runs and metrics are cached under (beside the data set, split and depth).

        Args:
            name: The system.
            eval_split: The split evaluated (λ depends on it); None for queries of no split.

        Returns:
            The system's parameters, as JSON-able values.
        """
        return self.system(name).params(self, eval_split)

    def data_key(self, split: str | None, labels: bool = False) -> dict[str, str]:
        """What a computation on ``split`` reads of the data set, as parts of its cache key: the
        documents and queries (``Dataset.queries_hash``) and which of them the split holds; with
        ``labels``, the split's labels too. A run reads no label (the hybrid's λ, which does, is in
        its parameters), so a grade judged in the app leaves every cached run valid; an evaluation,
        or a weight tuned on a split, reads that split's labels, so a new grade there is a miss.

        Args:
            split: The split (None: every query).
            labels: Whether the computation reads the split's labels.

        Returns:
            ``{"dataset": …, "queries": …}`` (and ``"labels"``), for ``store.cache_key``.
        """
        parts = {"dataset": self.dataset.queries_hash, "queries": self.dataset.split_key(split)}
        if labels and split is not None:
            parts["labels"] = self.dataset.labels_key(split)
        return parts

    def _key(self, system: str, params: dict[str, Any], split: str | None, k: int = 0, labels: bool = False,
             owner: str = "") -> str:
        return cache_key(**self.data_key(split, labels), system=system, params=params, split=split, k=k,
                         **({"owner": owner} if owner else {}))

    # ---- runs and evaluations ------------------------------------------------------------
    def run(self, system: str, split: str, k: int = EVAL_DEPTH) -> Run:
        """The system's run on a split's queries, from the store when it was computed before (an
        imported run: its lists of those queries cut to ``k``, ``[]`` where it has none).

        Args:
            system: The system.
            split: The split whose queries are searched.
            k: How many documents each list keeps.

        Returns:
            ``{query id: [(document id, score), …]}``, best first.
        """
        params, owner = self.system_params(system, split), self.run_owner(system)
        key = self._key(system, params, split, k, owner=owner)  # an imported run's: its maker's row
        if self.store is not None:
            self.store.sizes.deepen(k)  # a run this deep reads back as one
            cached = self.store.get_run(key)
            if cached is not None:
                return cached
        run = self.search(system, self.dataset.split_queries(split), k, split)
        if self.store is not None:
            self.store.put_run(key, dataset=self.dataset.queries_hash, system=system, params=params,
                               split=split, k=k, run=run, owner=owner)
        return run

    def search(self, system: str, queries: dict[str, str], k: int, split: str | None = None) -> Run:
        """``system``'s ranked lists of ``queries`` (not cached).

        Args:
            system: The system.
            queries: ``{query id: text}``.
            k: How many documents each list keeps.
            split: The split evaluated (λ depends on it); None for queries of no split.

        Returns:
            ``{query id: [(document id, score), …]}``, best first.
        """
        return self.system(system).search(self, queries, k, split)

    def _exact_scores(self, system: str, split: str) -> dict[str, dict[str, float]] | None:
        """Exact scores of every judged document (for PNR) where the system defines one."""
        queries = self.dataset.split_queries(split)
        rows = {q: [self.doc_row[d] for d in docs if d in self.doc_row]
                for q, docs in self.dataset.qrels[split].items() if q in queries}
        return self.system(system).exact_scores(self, split, rows, queries)

    def evaluate(self, system: str, split: str) -> Evaluation:
        """The system's metrics on a split (``EVALUATED``, PNR from its exact scores where it has them),
        from the store when computed before.

        Args:
            system: The system.
            split: A split with labels.

        Returns:
            The mean of each metric and its per-query values.

        Raises:
            UnknownSplit: The data set has no labels for ``split``.
        """
        self.require_split(split)
        params = self.system_params(system, split)
        measured = {"metrics": EVALUATED, "condensed_depth": CONDENSED_DEPTH}  # nDCG'@10 reads that deep
        key = self._key("eval:" + system, {**params, **measured}, split, EVAL_DEPTH, labels=True)
        if self.store is not None:
            cached = self.store.get_metrics(key)
            if cached is not None:
                return Evaluation(cached[0], cached[1])
        run = self.run(system, split)
        qrels = self.dataset.qrels[split]
        exact = self._exact_scores(system, split)
        ev = evaluate_run(run, qrels, metrics=EVALUATED,
                          pnr_scores=exact if exact is not None else scores_from_run(run, qrels))
        if self.store is not None:
            self.store.put_metrics(key, dataset=self.dataset.queries_hash, system=system, params=params,
                                   split=split, metrics=ev.mean, per_query=ev.per_query)
        return ev

    def require_split(self, split: str | None) -> str:
        """``split`` itself when the data set has labels for it, else ``UnknownSplit``.

        Args:
            split: A split's name, or None.

        Returns:
            ``split``.

        Raises:
            UnknownSplit: The data set has no labels for ``split``.
        """
        if split not in self.dataset.qrels:
            raise UnknownSplit(self.dataset.name, split, self.dataset.splits)
        return split

    def search_one(self, text: str, systems: Iterable[str] = BASE_SYSTEMS, k: int = 10, eval_split: str | None = None,
                   query_id: str | None = None, probe: Probe | None = None) -> dict[str, list[tuple[str, float]]]:
        """Ranked lists of every system for one free-text query, in one pass (not cached): the query
        goes through one ``systems.Probe`` (BM25 searched, the query encoded and the vector index
        searched, each once, to ``max(k, depth)``, and only when a system asks) and each system cuts
        or fuses its list from it. An imported run gives its list of the data set's query
        ``query_id`` (default: the one with exactly this text, ``Dataset.find_query``), else ``[]``.

        Args:
            text: The query's text.
            systems: The systems asked.
            k: How many documents each list keeps.
            eval_split: The split whose λ the CLEAR hybrid uses; None: the default split's.
            query_id: The data set's query this text is, for imported runs.
            probe: A probe made already for this text (searched once for every system).

        Returns:
            ``{system: [(document id, score), …]}``, best first.
        """
        chosen = [self.system(s) for s in systems]
        if query_id is None and any(s.needs.run for s in chosen):
            query_id = self.dataset.find_query(text)[0]
        probe = probe or Probe(self, text, max(k, self.depth), query_id)
        return {s.key: s.one(self, probe, k, eval_split) for s in chosen}
