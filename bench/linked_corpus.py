#!/usr/bin/env python
"""A linked copy of a BEIR data set, for the Wiki Link Prediction benchmarks: generated, not a real link graph.

    python bench/linked_corpus.py ../shared/datasets/scifact --out /tmp/scifact-linked [--per-page 3]

No corpus with relevance labels and links between its documents ships offline (the shared BEIR sets
have none, and no installed package holds one), so this script makes one: the data set's own
documents, queries and labels, and links added as a page's mentions of another would add them. A
document B is linked to from the ``--per-page`` documents that its title, searched with BM25 over
the corpus, ranks highest (B itself aside): the pages whose text mentions B's subject most, as a
Wikipedia article links the pages it mentions. The rule reads the documents' texts alone, never a
query or a label. Deterministic: the same data set gives the same links.

Writes ``corpus.jsonl`` (each document with its ``links`` field), ``queries.jsonl`` and ``qrels/`` to
``--out`` (read back with ``retrieval.load_dataset``, as the benchmarks read it); last line
``documents=<n> links=<n> linked_documents=<n>``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from _common import dataset_arg, recorded  # first: it puts the checkout on sys.path
from retrieval import load_dataset


def links_by_mention(titles: list[str], texts: list[str], per_page: int) -> list[list[int]]:
    """For each document A, the documents B it links to: those whose title ranks A among its
    ``per_page`` best BM25 matches (bm25s, English stop words), B ≠ A."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    asked = [i for i, t in enumerate(titles) if t.strip()]
    found, _ = retriever.retrieve(bm25s.tokenize([titles[i] for i in asked], stopwords="en", show_progress=False),
                                  k=min(per_page + 1, len(texts)), show_progress=False)
    out: list[list[int]] = [[] for _ in texts]
    for b, hits in zip(asked, found, strict=True):
        for a in [int(h) for h in hits if int(h) != b][:per_page]:
            out[a].append(b)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dataset_arg(ap)
    ap.add_argument("--out", required=True, help="the folder the linked copy is written to")
    ap.add_argument("--per-page", type=int, default=3, help="documents that link to each document")
    args = ap.parse_args(argv)

    ds = load_dataset(args.dataset)
    docs = list(ds.docs.values())
    links = links_by_mention([d.title for d in docs], [d.full_text for d in docs], args.per_page)
    out = Path(args.out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for doc, linked in zip(docs, links, strict=True):
            record = {"_id": doc.id, "title": doc.title, "text": doc.text}
            if linked:
                record["links"] = [docs[b].id for b in linked]
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        for qid, text in ds.queries.items():
            f.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    for qrels in sorted(Path(args.dataset, "qrels").glob("*.tsv")):
        shutil.copyfile(qrels, out / "qrels" / qrels.name)
    linked = load_dataset(out)  # read back as every benchmark reads it
    print(f"{linked.name}: {len(linked.docs):,} documents, {linked.link_count:,} links "
          f"(each document linked to from the {args.per_page} its title ranks highest with BM25)")
    print(f"documents={len(linked.docs)} links={linked.link_count} "
          f"linked_documents={sum(1 for d in linked.docs.values() if d.links)}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
