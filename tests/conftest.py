"""Shared fixtures: real components, small enough to be fast.

The tiny encoder is a real BERT (2 layers, 32 dims, random weights, fixed seed) with the bundled
MiniLM tokenizer, saved as a normal sentence-transformers folder.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"
DEMO = ROOT / "data" / "demo"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one compute thread a process: the suite runs two workers on two cores, and a process each of them starts
# (the CLI, a training, a bench) would otherwise run torch's OpenMP threads on both, four spinning threads
# on two cores (a killed encoding's test took 132 s so beside another process, 61 s with one thread each)
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
# what RankScope keeps in its home (the default store, the CPU precision choices) stays out of the user's
if "RANKSCOPE_HOME" not in os.environ:  # made here (xdist's workers inherit it): removed when the run ends
    os.environ["RANKSCOPE_HOME"] = tempfile.mkdtemp(prefix="rankscope-tests-")
    atexit.register(shutil.rmtree, os.environ["RANKSCOPE_HOME"], True)


def pytest_collection_modifyitems(config, items):
    """The tests measured slow (``tests/tiers.py``, ``tests/tiers.json``) are ``slow`` too, and the files
    run longest first (``tiers.in_order``: xdist hands them out in this order)."""
    from tests.tiers import file_seconds, function_id, in_order, slow_functions

    slow = slow_functions()
    for item in items:
        if function_id(item.nodeid) in slow:
            item.add_marker(pytest.mark.slow)
    items[:] = in_order(items, file_seconds())


def pytest_configure(config):
    # the tiny models are faster on one thread, and immune to another process loading the CPU
    import torch

    torch.set_num_threads(1)


def shared_dataset(name: str) -> Path:
    path = SHARED / name
    if not (path / "corpus.jsonl").exists():
        pytest.skip(f"{path} is absent (../shared/datasets not available)")
    return path


def bench_module(name: str):
    """``bench/<name>.py`` imported as a module (the bench folder is scripts, not a package)."""
    import importlib.util
    import sys

    if str(ROOT / "bench") not in sys.path:  # as when the script runs: its folder first, for ``_common``
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_output(module, capsys, command: list) -> str:
    """What ``python bench/<module>.py COMMAND`` prints, the script's ``main`` run in the test's process
    (``bench_module``); it must succeed."""
    capsys.readouterr()  # what came before is not this run's
    assert module.main([str(arg) for arg in command]) == 0
    return str(capsys.readouterr().out)


def build_tiny_encoder(folder: Path, seed: int = 0) -> Path:
    """Write a random-weight 2-layer BERT sentence-transformer to ``folder``; return it."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    from retrieval.index.encoder import default_model_path

    src = Path(default_model_path())
    hf_dir = folder / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, hf_dir / name)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    BertModel(cfg).save_pretrained(hf_dir)
    word = models.Transformer(str(hf_dir), max_seq_length=64)
    dim = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pool = models.Pooling(dim(), "mean")
    st = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
    out = folder / "st"
    st.save(str(out))
    return out


@pytest.fixture(scope="module", autouse=True)
def builds_end_with_their_module():
    """Background builds a module's workspaces left running (an app's registry encoding the demo
    with SPLADE, say) are stopped when the module ends, not left to take the cores from the tests
    of the next one."""
    yield
    from retrieval.index.background_build import running

    builds = running()
    for build in builds:  # every one told first, so none goes on encoding while another is waited for
        build.stop(timeout=0)
    for build in builds:
        build.wait(60)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    from retrieval.index.cpu_choice import choose
    from retrieval.index.encoder import open_model

    folder = build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))
    # not measured on a busy machine, where the faster choice can change from one run to the next:
    # bf16 where the CPU has it (as "auto" always loaded it there), at batch 32
    from tests.helpers import quiet_machine

    choose(open_model(str(folder), "cpu"), timer=lambda precision, batch: (0.5 if precision == "bf16" else 1.0) / batch,
           machine=quiet_machine)
    return folder


@pytest.fixture(scope="session")
def tiny_encoder(tiny_model_dir):
    from retrieval.index.encoder import load_encoder

    return load_encoder(str(tiny_model_dir), device="cpu")


@pytest.fixture
def store(tmp_path):
    from retrieval.store import Store

    s = Store(tmp_path / "store.sqlite3")
    yield s
    s.close()


@pytest.fixture
def toy_dataset():
    """Eight short documents, four queries, graded labels in a train and a test split."""
    from retrieval.data.dataset import Dataset, Document

    docs = {
        "d1": Document("d1", "Cats", "The cat sat on the warm mat near the fire."),
        "d2": Document("d2", "Dogs", "Dogs bark at the mailman every single morning."),
        "d3": Document("d3", "Stocks", "The stock market fell sharply after the rate decision."),
        "d4": Document("d4", "Cat food", "Cat food prices rose again this year in most shops."),
        "d5": Document("d5", "Kittens", "Young felines need warmth, milk and a lot of sleep."),
        "d6": Document("d6", "Bonds", "Bond yields climbed as the central bank raised interest rates."),
        "d7": Document("d7", "Puppies", "A puppy should be trained with patience and treats."),
        "d8": Document("d8", "Weather", "Heavy rain and strong winds are expected tomorrow."),
    }
    queries = {"q1": "cat on a mat", "q2": "why did stocks fall", "q3": "training a young dog",
               "q4": "kitten care"}
    qrels = {"train": {"q1": {"d1": 2, "d4": 0, "d5": 1}, "q2": {"d3": 2, "d6": 1}},
             "test": {"q3": {"d7": 2, "d2": 1, "d8": 0}, "q4": {"d5": 2, "d1": 1, "d4": 0}}}
    return Dataset("toy", docs, queries, qrels)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where browser tests save their screenshots: ``$RANKSCOPE_SCREENSHOTS``, else a temporary folder."""
    folder = Path(os.environ.get("RANKSCOPE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_folder(tmp_path_factory) -> Path:
    """The folder every process of this run shares: the run's base temporary folder (each xdist
    worker's own is one level below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(path: Path, make) -> Path:
    """``path``, written by ``make(part)`` into a part file and renamed, by whichever process of
    the run asks first (the others wait on a lock, then read it)."""
    from filelock import FileLock

    with FileLock(f"{path}.lock"):
        if not path.exists():
            part = path.with_name(f"{path.name}.part")
            make(part)
            part.rename(path)
    return path


@pytest.fixture(scope="session")
def demo_sparse_store(request, tmp_path_factory) -> Path:
    """A store file holding the bundled SPLADE-tiny's vectors of the demo corpus and nothing else,
    encoded once a run and shared by xdist's workers. A module that builds the demo's learned
    sparse index on a store starts from a copy (``store_copy``), so the 384 passages go through
    SPLADE once a run, not once per module and worker: the vectors are the model's own, read back
    as the store reads any (``test_sparse`` holds that round trip and the encoding itself).

    Between runs the file is kept in pytest's cache folder, under a key of the model's files, the
    demo corpus and the encoding code: the next run of the edit-test loop copies it instead of
    encoding again (a stale file could only cost time: the store keys vectors by the model's
    fingerprint and the text's hash)."""
    import hashlib

    from retrieval.index.splade import bundled_path

    cache = getattr(request.config, "cache", None)  # absent with -p no:cacheprovider
    model = bundled_path()
    digest = hashlib.sha256()
    for file in sorted([*model.rglob("*"), DEMO / "corpus.jsonl", ROOT / "retrieval" / "index" / "splade.py",
                        *(ROOT / "retrieval" / "store").glob("*.py")]):
        if file.is_file():
            digest.update(f"{file.relative_to(file.anchor)} {file.stat().st_size}\n".encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    kept = Path(cache.mkdir("demo-sparse")) / f"{digest.hexdigest()[:24]}.sqlite3" if cache is not None else None

    def make(part: Path) -> None:
        if kept is not None and kept.exists():
            shutil.copyfile(kept, part)
            return
        from retrieval.data.readers import load_dataset
        from retrieval.index.splade import embed_sparse_corpus, load_sparse_model
        from retrieval.store import Store

        store = Store(part)
        texts = [d.full_text for d in load_dataset(DEMO).docs.values()]
        embed_sparse_corpus(load_sparse_model(), texts, store)
        store.close()
        if kept is not None:
            for old in kept.parent.glob("*.sqlite3"):  # one kept file: the others are of older keys
                old.unlink()
            shutil.copyfile(part, kept.with_suffix(".part"))
            kept.with_suffix(".part").rename(kept)

    return made_once(run_folder(tmp_path_factory) / "demo-sparse.sqlite3", make)


def store_copy(source: Path, path: Path) -> Path:
    """``source`` (a closed store file) copied to ``path``; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, path)
    return path


@pytest.fixture
def sparse_store(tmp_path, demo_sparse_store):
    """An open store over a copy of ``demo_sparse_store``: the bundled SPLADE-tiny's vectors of the demo's
    passages there already, read as a store's vectors are read where a test would otherwise encode the
    384 passages again (``test_sparse`` holds the encoding and that round trip)."""
    from retrieval.store import Store

    s = Store(store_copy(demo_sparse_store, tmp_path / "sparse-store.sqlite3"))
    yield s
    s.close()


def demo_app_state(tmp_path_factory, tiny_model_dir: Path, demo_sparse_store: Path, name: str):
    """The app's registry over a copy of the demo's store (its SPLADE vectors there already: the learned sparse
    index is read, not encoded) with the demo loaded: yields (registry, the demo's key), closes the store after.
    A module's ``app_state`` fixture is ``yield from demo_app_state(...)``."""
    from retrieval.store import Store
    from ui import data
    from ui.registry import Registry

    store = Store(store_copy(demo_sparse_store, tmp_path_factory.mktemp(name) / "store.sqlite3"))
    registry = Registry(store, str(tiny_model_dir))
    key = data.load_demo(registry).key
    yield registry, key
    store.close()


@pytest.fixture(scope="module")
def demo():
    """The bundled demo data set (384 passages, train and test splits), loaded once per module."""
    from retrieval.data.readers import load_dataset

    return load_dataset(DEMO)
