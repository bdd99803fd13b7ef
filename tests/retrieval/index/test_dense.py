"""Encoder, embedding cache and FAISS indexes with a real tiny transformer and a real SQLite file."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from retrieval.index.dense_index import DenseIndex, DenseRetriever, embed_texts
from retrieval.index.encoder import Encoder, cpu_bf16_instructions, load_encoder, pick_precision
from retrieval.index.recent import Recent
from retrieval.store import Store
from tests.helpers import count_embeddings, integrity_check, quiet_machine


class CountingEncoder(Encoder):
    """The real encoder, counting how many texts it actually encodes."""

    def __init__(self, inner: Encoder):
        super().__init__(inner.model, inner.name, inner.normalize, inner.batch_size, inner.precision)
        self.encoded = 0

    def encode(self, texts, progress=None, chunk=256):
        self.encoded += len(texts)
        return super().encode(texts, progress, chunk)


def test_encoder_outputs_normalized_deterministic_vectors(tiny_encoder):
    a = tiny_encoder.encode(["hello world", "a cat on a mat"])
    b = tiny_encoder.encode(["hello world", "a cat on a mat"])
    assert a.shape == (2, 32) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    assert not np.allclose(a[0], a[1])


def test_fingerprint_depends_on_weights_and_settings(tiny_model_dir, tmp_path):
    from tests.conftest import build_tiny_encoder

    a = load_encoder(str(tiny_model_dir), device="cpu")
    other = load_encoder(str(build_tiny_encoder(tmp_path, seed=1)), device="cpu")
    unnormalized = Encoder(a.model, normalize=False, precision=a.precision)
    assert len({a.fingerprint, other.fingerprint, unnormalized.fingerprint}) == 3
    assert a.fingerprint == Encoder(a.model, precision=a.precision).fingerprint


def test_a_model_that_declares_no_dimension_or_length_is_refused_by_name():
    import torch
    from sentence_transformers import SentenceTransformer

    bare = Encoder(SentenceTransformer(modules=[torch.nn.Identity()], device="cpu"), name="bare")
    with pytest.raises(ValueError, match="'bare' declares no embedding dimension"):
        _ = bare.dim
    with pytest.raises(ValueError, match="'bare' declares no maximum sequence length"):
        _ = bare.max_seq_length


def test_precision_is_chosen_by_device_or_forced():
    assert pick_precision("cuda") == pick_precision("cuda:1") == "fp16"
    assert pick_precision("mps") == "fp32"
    assert pick_precision("cpu") == ("bf16" if cpu_bf16_instructions() else "fp32")
    for forced in ("fp32", "bf16", "fp16"):
        assert pick_precision("cpu", forced) == pick_precision("cuda", forced) == forced
    with pytest.raises(ValueError, match="precision must be one of"):
        pick_precision("cpu", "int4")


def test_the_cpu_choice_is_the_fastest_measured_with_bf16_only_where_it_gains_and_is_remembered(
        tiny_encoder, tiny_model_dir, tmp_path, monkeypatch):
    import json

    from retrieval.index import cpu_choice as cpu_choice_module
    from retrieval.index import encoder as encoder_module
    from retrieval.index import machine_load
    from retrieval.index.cpu_choice import BATCH_SIZES, BF16_GAIN, ROUNDS, choices_file, choose

    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path))
    monkeypatch.setattr(cpu_choice_module, "cpu_bf16_instructions", lambda: "AVX-512 BF16")  # both precisions run
    calls = []

    def timer_with(seconds: dict):
        def timer(precision: str, batch: int) -> float:
            calls.append((precision, batch))
            return seconds[(precision, batch)]
        return timer

    flat = {(p, b): 1.0 for p in ("fp32", "bf16") for b in BATCH_SIZES}
    model = tiny_encoder.model
    choice = choose(model, timer_with(flat), machine=quiet_machine)
    assert (choice.precision, choice.batch_size) == ("fp32", 8)  # no faster: fp32 (exact), the smallest batch on a tie
    assert len(calls) == (1 + ROUNDS) * 6 and calls[:2] == [("fp32", 8), ("fp32", 16)]  # a warm-up each, the rounds
    assert all(calls[6:].count(c) == ROUNDS for c in flat) and set(choice.rates) == {f"{p}/{b}" for p, b in flat}
    assert not choice.provisional and choice.spread == 0 and "in 3 interleaved rounds, spread 0%" in choice.how
    remembered = choose(model, timer_with({}))  # remembered: not measured again (nor the machine read)
    assert remembered == replace(choice, remembered=True) and len(calls) == (1 + ROUNDS) * 6
    choices_file().write_text("{not json")  # a damaged file: measured again, and rewritten
    faster = {**flat, ("bf16", 32): 0.99 / BF16_GAIN}  # fp32's best 1.0: bf16 at 32 is 10% ahead of it
    assert choose(model, timer_with(faster), machine=quiet_machine).precision == "bf16"
    assert choose(model).batch_size == 32
    assert list(json.loads(choices_file().read_text()).values())[0]["precision"] == "bf16"
    slower = {**flat, ("bf16", 32): 0.95, ("fp32", 32): 0.99}  # bf16's best not 10% ahead: fp32 at its best batch
    choices_file().unlink()
    assert (lambda c: (c.precision, c.batch_size))(choose(model, timer_with(slower), machine=quiet_machine)) == \
        ("fp32", 32)
    # a choice made on one CPU class is not reused on another
    other = "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 207\nmodel name : Xeon\nflags : avx2 avx512f\n"
    read = cpu_choice_module.cpu_class
    monkeypatch.setattr(cpu_choice_module, "cpu_class", lambda: read(other))
    before = len(calls)
    there = choose(model, timer_with(faster), machine=quiet_machine)
    assert len(calls) > before and there.cpu.startswith("Xeon (family 6, model 207; avx2 avx512f)")
    assert len(json.loads(choices_file().read_text())) == 2

    monkeypatch.undo()
    monkeypatch.setenv("RANKSCOPE_HOME", str(tmp_path / "fresh"))
    # loaded anew, not from this process's earlier loads
    monkeypatch.setattr(encoder_module, "_cache", Recent(encoder_module.MODELS_KEPT))
    monkeypatch.setattr(machine_load, "read", quiet_machine)  # timed for real, the machine taken as quiet
    auto = load_encoder(str(tiny_model_dir))  # measured for real
    saved = list(json.loads(choices_file().read_text()).values())
    assert [(s["precision"], s["batch_size"]) for s in saved] == [(auto.precision, auto.batch_size)]
    assert auto.precision == ("fp32" if not cpu_bf16_instructions() else auto.precision) and auto.cpu_choice.rates
    # (decided, or provisional where another process's work made its tiny rounds disagree)
    assert f"batch {auto.batch_size} (" in auto.compute and "fastest of fp32 at 8/16/32" in auto.compute
    forced = load_encoder(str(tiny_model_dir), precision="fp32")  # asked for: the fastest fp32 batch measured
    rates = {b: auto.cpu_choice.rates[f"fp32/{b}"] for b in BATCH_SIZES}
    assert forced.batch_size == max(rates, key=rates.__getitem__) and len(saved) == 1


def test_a_cpu_class_is_read_from_cpuinfo_with_the_flags_that_change_kernels():
    from retrieval.index.cpu_choice import cpu_class

    xeon = cpu_class("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) "
                     "Platinum 8581C CPU @ 2.10GHz\nflags\t\t: fpu sse avx2 fma avx512f avx512_bf16 amx_tile\n\n"
                     "processor\t: 1\n")
    assert xeon.flags == ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")
    assert xeon.slug == "intel-xeon-platinum-8581c-f6-m207-amx"
    assert xeon.label == "Intel(R) Xeon(R) Platinum 8581C CPU @ 2.10GHz (family 6, model 207; avx2 fma avx512f " \
        "avx512_bf16 amx_tile)"
    epyc = cpu_class("vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 1\nmodel name : AMD EPYC\nflags : avx2 fma\n")
    assert epyc.slug == "amd-epyc-f25-m1-avx2" and epyc != xeon
    assert cpu_class("").slug.endswith("-scalar")


TEXTS = [f"passage {i}: " + "the quick brown fox jumps over the lazy dog " * (1 + i % 9) for i in range(40)]


def test_fp32_encoding_equals_the_model_in_input_order(tiny_encoder):
    """Longest-first batching must hand every vector back to its own text."""
    fp32 = Encoder(tiny_encoder.model, precision="fp32")
    ours = fp32.encode(TEXTS, chunk=7)
    stock = tiny_encoder.model.encode(TEXTS, batch_size=64, normalize_embeddings=True)
    np.testing.assert_allclose(ours, stock, rtol=1e-5, atol=1e-6)


def test_bf16_encoding_stays_within_rounding_of_fp32(tiny_encoder):
    fp32 = Encoder(tiny_encoder.model, precision="fp32").encode(TEXTS)
    bf16 = Encoder(tiny_encoder.model, precision="bf16").encode(TEXTS, chunk=7)
    assert bf16.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(bf16, axis=1), 1.0, rtol=1e-5)
    cosine = (fp32 * bf16).sum(axis=1)
    assert cosine.min() > 0.999 and not np.array_equal(fp32, bf16)  # bf16 really ran


def test_vectors_of_one_precision_are_never_served_as_another(tiny_encoder, tmp_path):
    fp32 = CountingEncoder(Encoder(tiny_encoder.model, precision="fp32"))
    bf16 = CountingEncoder(Encoder(tiny_encoder.model, precision="bf16"))
    assert fp32.fingerprint != bf16.fingerprint
    assert fp32.fingerprint == Encoder(tiny_encoder.model).fingerprint  # fp32 keeps its old cache
    store = Store(tmp_path / "cache.sqlite3")
    embed_texts(fp32, TEXTS, store)
    embed_texts(bf16, TEXTS, store)
    assert (fp32.encoded, bf16.encoded) == (40, 40)
    assert fp32.compute == "cpu, fp32" and bf16.compute.startswith("cpu, bf16")


def test_embeddings_come_from_the_store_after_first_encoding(tiny_encoder, tmp_path):
    path = tmp_path / "cache.sqlite3"
    texts = [f"document number {i} about topic {i % 7}" for i in range(50)] + ["document number 0 about topic 0"]
    enc = CountingEncoder(tiny_encoder)
    seen = []
    first = embed_texts(enc, texts, Store(path), progress=lambda d, t: seen.append((d, t)))
    assert enc.encoded == 50  # the duplicate text is encoded once
    assert seen[-1] == (51, 51)
    reopened = Store(path)  # a new process would open the file like this
    again = embed_texts(enc, texts, reopened)
    assert enc.encoded == 50
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, tiny_encoder.encode(texts), rtol=1e-5, atol=1e-6)
    embed_texts(enc, texts[:10] + ["a brand new text"], reopened)
    assert enc.encoded == 51
    assert count_embeddings(reopened, enc.fingerprint) == 51
    assert integrity_check(reopened) == "ok"


def test_flat_index_is_exact(tiny_encoder):
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(300, 32)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    ids = [f"d{i}" for i in range(300)]
    index = DenseIndex(ids, emb)
    q = emb[:5] + 0.01
    scores, rows = index.search_vectors(q, 10)
    brute = q @ emb.T
    for i in range(5):
        expected = np.argsort(-brute[i])[:10]
        assert list(rows[i]) == list(expected)
        np.testing.assert_allclose(scores[i], brute[i][expected], rtol=1e-5)
        np.testing.assert_allclose(index.scores(q[i], rows[i]), brute[i][rows[i]], rtol=1e-5)


@pytest.mark.parametrize("kind,min_overlap", [("hnsw", 0.9), ("sq8", 0.8)])
def test_approximate_indexes_agree_with_flat(kind, min_overlap):
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(2000, 32)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    ids = [f"d{i}" for i in range(2000)]
    flat, approx = DenseIndex(ids, emb), DenseIndex(ids, emb, kind=kind)
    q = rng.normal(size=(20, 32)).astype(np.float32)
    _, exact = flat.search_vectors(q, 10)
    _, got = approx.search_vectors(q, 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, got)])
    assert overlap >= min_overlap
    assert approx.bytes_per_doc == (32 if kind == "sq8" else 128)


def test_retriever_search_shape(tiny_encoder, toy_dataset, store):
    texts = [d.full_text for d in toy_dataset.docs.values()]
    index = DenseIndex(toy_dataset.doc_ids, embed_texts(tiny_encoder, texts, store))
    run = DenseRetriever(tiny_encoder, index, store).search(toy_dataset.queries, k=3)
    assert set(run) == set(toy_dataset.queries)
    for hits in run.values():
        assert len(hits) == 3
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        assert all(d in toy_dataset.docs for d, _ in hits)


def test_a_storeless_retriever_encodes_a_query_set_once_and_shares_it_read_only(tiny_encoder, toy_dataset,
                                                                                  monkeypatch):
    """``evaluate --no-store``: dense search, the hybrid's candidates and its exact scores all ask for a
    split's queries; the retriever encodes them once, keeps the last ``QUERY_SETS`` sets, and hands out
    an array no caller can change under another."""
    import retrieval.index.dense_index as dense_index

    texts = [d.full_text for d in toy_dataset.docs.values()]
    retriever = DenseRetriever(tiny_encoder, DenseIndex(toy_dataset.doc_ids, embed_texts(tiny_encoder, texts)))
    asked: list[list[str]] = []
    real = dense_index.embed_texts
    monkeypatch.setattr(dense_index, "embed_texts", lambda enc, t, store=None: asked.append(list(t)) or real(enc, t))
    first = retriever.search(toy_dataset.queries, k=3)
    again = retriever.encode_queries(toy_dataset.queries)
    assert retriever.search(toy_dataset.queries, k=3) == first and len(asked) == 1
    assert np.array_equal(again, tiny_encoder.encode(list(toy_dataset.queries.values())))
    with pytest.raises(ValueError):
        again[0, 0] = 1.0
    for i in range(dense_index.QUERY_SETS):  # other sets push the oldest out: encoded again when asked
        retriever.encode_queries({"x": f"query {i}"})
    retriever.encode_queries(toy_dataset.queries)
    assert len(asked) == dense_index.QUERY_SETS + 2


def test_unknown_index_kind():
    with pytest.raises(ValueError, match="index kind"):
        DenseIndex(["a"], np.ones((1, 4), dtype=np.float32), kind="ivfpq")


def test_bad_model_name_gives_clear_error(tmp_path):
    with pytest.raises(ValueError, match="could not load encoder"):
        load_encoder(str(tmp_path / "no-such-model"), device="cpu")


def test_auto_index_is_flat_for_small_corpora_and_hnsw_past_the_threshold(toy_dataset, tiny_encoder, monkeypatch):
    from retrieval.index import dense_index as dense
    from retrieval.index.dense_index import index_kind_for
    from retrieval.workspace import Workspace

    assert index_kind_for(dense.HNSW_FROM - 1) == "flat" and index_kind_for(dense.HNSW_FROM) == "hnsw"
    assert index_kind_for(10, "sq8") == "sq8" and index_kind_for(10**7, "flat") == "flat"
    with pytest.raises(ValueError, match="unknown index kind"):
        index_kind_for(10, "ivf")
    small = Workspace(toy_dataset, None, model=tiny_encoder)
    assert small.index_kind == "flat" and small.system_params("dense")["index"] == "flat"
    monkeypatch.setattr(dense, "HNSW_FROM", len(toy_dataset.docs))  # the toy corpus counts as big
    big = Workspace(toy_dataset, None, model=tiny_encoder)
    assert big.index_kind == "hnsw" and big.dense.index.kind == "hnsw"
    ids = lambda run: {q: [d for d, _ in hits] for q, hits in run.items()}  # noqa: E731
    assert ids(big.run("dense", "test", k=3)) == ids(small.run("dense", "test", k=3))  # a tiny graph is exact


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_built_index_is_kept_beside_the_store_and_read_back_on_reopen(toy_dataset, tiny_encoder, tmp_path, kind):
    from retrieval.workspace import Workspace

    path = tmp_path / "store.sqlite3"
    first = Workspace(toy_dataset, Store(path), model=tiny_encoder, index_kind=kind)
    built = first.build_dense()
    kept = list((tmp_path / "indexes").glob("*.faiss"))
    assert len(kept) == 1 and built.encoded > 0 and not list((tmp_path / "indexes").glob("*.part"))
    counting = CountingEncoder(tiny_encoder)
    again = Workspace(toy_dataset, Store(path), model=counting, index_kind=kind)  # a new process, in effect
    reopened = again.build_dense()
    distinct = len({d.full_text for d in toy_dataset.docs.values()})
    assert (reopened.from_store, reopened.encoded, counting.encoded) == (distinct, 0, 0)
    np.testing.assert_array_equal(reopened.index.embeddings, built.index.embeddings)
    queries = toy_dataset.split_queries("test")
    assert reopened.search(queries, 5) == built.search(queries, 5)  # the graph read back answers alike
    if kind == "hnsw":  # the search breadth is set on the graph read back, not kept in it or its name
        from retrieval.index.dense_index import EF_SEARCH

        assert reopened.index.index.hnsw.efSearch == built.index.index.hnsw.efSearch == EF_SEARCH
    kept[0].write_bytes(b"not a faiss index")  # damaged: built again from the store, the file replaced
    third = Workspace(toy_dataset, Store(path), model=tiny_encoder, index_kind=kind).build_dense()
    np.testing.assert_array_equal(third.index.embeddings, built.index.embeddings)
    assert kept[0].stat().st_size > 100
    other = Workspace(toy_dataset, Store(path), model=tiny_encoder, index_kind="sq8").build_dense()
    assert other.index.kind == "sq8" and len(list((tmp_path / "indexes").glob("*.faiss"))) == 1  # sq8 is not kept


def test_kept_indexes_beyond_three_per_corpus_go_least_recently_used_first(toy_dataset, tiny_encoder, tmp_path):
    import os

    from retrieval.index.engines.local import evict
    from retrieval.workspace import Workspace

    path = tmp_path / "store.sqlite3"
    Workspace(toy_dataset, Store(path), model=tiny_encoder, index_kind="flat").build_dense()
    (flat,) = (tmp_path / "indexes").glob("*.faiss")
    assert flat.name.startswith(toy_dataset.corpus_hash[:16] + "-")
    os.utime(flat, (1, 1))  # unused since long ago: a reopen that reads it renews it
    Workspace(toy_dataset, Store(path), model=tiny_encoder, index_kind="flat").build_dense()
    assert flat.stat().st_mtime > 1
    corpus = flat.name.split("-", 1)[0]
    older = []
    for i, age in enumerate((400, 300, 200)):  # other encoders' indexes of this corpus, oldest first
        f = flat.with_name(f"{corpus}-other{i}.faiss")
        f.write_bytes(b"x")
        os.utime(f, (flat.stat().st_mtime - age,) * 2)
        older.append(f)
    foreign = flat.with_name("0123456789abcdef-another-corpus.faiss")
    foreign.write_bytes(b"x")
    os.utime(foreign, (1, 1))
    gone = evict(flat)
    assert gone == [older[0]]  # the least recently used; three of the corpus stay
    assert flat.exists() and older[1].exists() and older[2].exists() and foreign.exists()
    Workspace(toy_dataset, Store(path), model=tiny_encoder, index_kind="hnsw").build_dense()  # a new kept index
    left = sorted(f.name for f in (tmp_path / "indexes").glob(f"{corpus}-*.faiss"))
    assert len(left) == 3 and older[2].name in left and flat.name in left and not older[1].exists()


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_vectors_read_back_are_the_index_memory_and_keep_it_alive(kind, tmp_path):
    import gc

    import faiss

    from retrieval.index.dense_index import DenseIndex, held_vectors

    vecs = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)  # unit vectors: each its own best inner product
    DenseIndex([f"d{i}" for i in range(300)], vecs, kind=kind).write(tmp_path / "i.faiss")
    index = faiss.read_index(str(tmp_path / "i.faiss"))
    held = held_vectors(index)
    assert not held.flags.writeable and not held.flags.owndata  # FAISS's memory, not a copy
    with pytest.raises(ValueError):
        held[0, 0] = 1.0  # read-only: writing would change what the index searches
    part = held[100:110]
    del index, held
    gc.collect()
    np.testing.assert_array_equal(part, vecs[100:110])  # the index is alive while a slice of it is
    read = DenseIndex.from_faiss([f"d{i}" for i in range(300)], faiss.read_index(str(tmp_path / "i.faiss")), kind)
    np.testing.assert_array_equal(read.embeddings, vecs)
    assert read.search_vectors(vecs[:3], 1)[1][:, 0].tolist() == [0, 1, 2]
