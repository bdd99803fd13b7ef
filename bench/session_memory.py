#!/usr/bin/env python
"""What an open workspace costs in memory: the app's estimate (``retrieval.sharing.memory_budget``, which its
memory budget counts) against what the process really gains.

    python bench/session_memory.py [--docs 2000,20000] [--seed 0] [--dim 384] [--model ID_OR_FOLDER]
        [--datasets scifact,nfcorpus] [--warm-up-docs 300]

Each measurement runs in a fresh Python process, so one corpus's memory does not hide another's:
the process opens a small other corpus first (``--warm-up-docs`` synthetic passages) through the
app's ``Registry`` (so the encoder, every library and the buffers a first encoding and search
allocate are in memory already: they are the process's, not a workspace's, and the budget does not
count them), reads the corpus, then opens it
(BM25 built, every document embedded and indexed in FAISS, then embedded by the bundled learned sparse
model and put in its inverted index, as a user's load does) and reports how
much its resident memory grew (``/proc/self/statm``, after a garbage collection and glibc's
``malloc_trim``: what the allocator keeps for reuse after a build's peak is not held) beside how much
``Registry.memory()``'s estimate grew.

Corpora: seeded synthetic passages (a Zipf vocabulary of 50,000 words, 30–200 words a passage,
a title of 3–8 words) of each ``--docs`` size, written once under a temporary folder; and the
shared BEIR sets named by ``--datasets`` where ``../shared/datasets`` exists. The encoder is a
random-weight one-layer BERT of ``--dim`` dimensions with MiniLM's tokenizer (the vectors cost what
MiniLM's do at 384 dimensions, the encoding takes seconds instead of minutes), or ``--model``.

Two growths: ``held`` (after ``malloc_trim``: what the workspace keeps) and ``untrimmed`` (what the
operating system sees right after the build, with the allocator's cache of the build's transient
peak, which the next build reuses). Last line: ``held_over_estimated_max=<x>
untrimmed_over_estimated_max=<x>`` — the largest ratio of each to the estimate over the corpora
(below 1: the budget counts more than is held).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import SHARED, json_arg, recorded  # first: it puts the checkout on sys.path


def synthetic(folder: Path, n: int, seed: int) -> Path:
    """A BEIR corpus of ``n`` seeded passages (written once, reused)."""
    path = folder / f"synthetic-{n}-seed{seed}"
    if (path / "corpus.jsonl").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    with (path / "corpus.jsonl").open("w") as f:
        for i in range(n):
            title = " ".join(rng.choices(vocab, weights, k=rng.randint(3, 8)))
            text = " ".join(rng.choices(vocab, weights, k=rng.randint(30, 200)))
            f.write(json.dumps({"_id": f"doc-{i}", "title": title, "text": text}) + "\n")
    return path


def model_folder(folder: Path, dim: int) -> Path:
    """A random-weight one-layer BERT sentence-transformer of ``dim`` dimensions (written once)."""
    out = folder / f"bert-1x{dim}" / "st"
    if (out / "modules.json").exists():
        return out
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    from retrieval.index.encoder import default_model_path

    hf = out.parent / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        src = Path(default_model_path()) / name
        if src.exists():
            (hf / name).write_bytes(src.read_bytes())
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=dim, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=dim, max_position_embeddings=512)).save_pretrained(hf)
    word = models.Transformer(str(hf), max_seq_length=64)
    SentenceTransformer(modules=[word, models.Pooling(dim, "mean"), models.Normalize()], device="cpu").save(str(out))
    return out


def rss(trim: bool = True) -> int:
    """Resident bytes after a garbage collection and, with ``trim``, glibc's ``malloc_trim`` (so memory
    the allocator keeps for reuse after a build's transient peak does not count as held)."""
    gc.collect()
    if trim:
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc: the figure includes the allocator's cache
            pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settled(ws) -> None:
    """Wait for ``ws``'s background builds: the learned sparse index follows the dense one."""
    from retrieval.systems import SPLADE

    while ws.pending([SPLADE]):
        time.sleep(0.5)
    ws.sparse  # noqa: B018


def measure(data: str, model: str, store: str, warm_up: str) -> dict:
    """In this process: the encoder loaded and a small corpus opened first (every library imported,
    every pool and buffer a first search or encoding allocates), the corpus read; then the growth of
    resident memory, and of the registry's estimate, as the workspace opens."""
    from retrieval.data.readers import load_dataset
    from retrieval.store import Store
    from ui.registry import Registry

    registry = Registry(Store(store), model, precision="fp32", foreground_s=None)
    warm = registry.get(registry.open(load_dataset(warm_up), budgeted=False))
    settled(warm)  # the learned sparse model loaded and a first sparse encoding done: the process's too
    dataset = load_dataset(data)
    before, estimated = rss(), registry.memory()["bytes"]
    settled(registry.get(registry.open(dataset, budgeted=False)))
    untrimmed = rss(trim=False)
    return {"docs": len(dataset.docs), "held": rss() - before, "untrimmed": untrimmed - before,
            "estimated": registry.memory()["bytes"] - estimated}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", default="2000,20000")  # 100,000: add it (SPLADE-tiny encodes ~70 passages/s on 2 cores)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--model", default=None)
    p.add_argument("--datasets", default="scifact,nfcorpus")
    p.add_argument("--warm-up-docs", type=int, default=300,
                   help="passages of the corpus each process opens before the measured one (its libraries, encoder "
                   "and a first encoding's buffers in memory: the process's, not the workspace's)")
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rankscope-session-memory"))
    p.add_argument("--one", nargs=4, metavar=("DATA", "MODEL", "STORE", "WARM_UP"), help=argparse.SUPPRESS)  # a child
    json_arg(p)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(*args.one)))
        return 0
    work = Path(args.work)
    model = args.model or str(model_folder(work, args.dim))
    warm_up = synthetic(work, args.warm_up_docs, args.seed + 1)
    corpora = [(f"synthetic {int(n):,}", synthetic(work, int(n), args.seed)) for n in args.docs.split(",") if n]
    corpora += [(name, SHARED / name) for name in args.datasets.split(",") if name and (SHARED / name).exists()]
    print(f"encoder: {model}\n{'corpus':<20}{'docs':>9}{'estimated MiB':>15}{'held MiB':>10}{'ratio':>7}"
          f"{'untrimmed MiB':>15}{'ratio':>7}")
    held, peak = [], []
    for label, data in corpora:
        store = work / f"store-{data.name}.sqlite3"
        out = subprocess.run([sys.executable, __file__, "--one", str(data), model, str(store), str(warm_up)],
                             capture_output=True,
                             text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            return 1
        row = json.loads(out.stdout.strip().splitlines()[-1])
        held.append(row["held"] / row["estimated"])
        peak.append(row["untrimmed"] / row["estimated"])
        mib = {k: row[k] / 2**20 for k in ("estimated", "held", "untrimmed")}
        print(f"{label:<20}{row['docs']:>9,}{mib['estimated']:>15.1f}{mib['held']:>10.1f}{held[-1]:>7.2f}"
              f"{mib['untrimmed']:>15.1f}{peak[-1]:>7.2f}")
    print(f"held_over_estimated_max={max(held):.2f} untrimmed_over_estimated_max={max(peak):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
