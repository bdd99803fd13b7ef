#!/usr/bin/env python
"""The Judge tab's views after a large import: how long ``/settled`` (run after every grade) and
``/agreement`` take once the corpus holds ``--judgments`` grades by several judges.

    python bench/judging_views.py [--judgments 200000] [--judges 3] [--queries 1000] [--seed 0]
        [--model ID_OR_FOLDER] [--repeat 3]

Writes the bundled demo's corpus with ``--queries`` queries (its own, then seeded log-like ones of
1–6 words from its vocabulary: up to 1,000 queries the Judge tab judges every one, the worst case),
opens it in-process through the app's ``Registry`` (the default encoder unless ``--model``; a fresh
store), and imports a seeded CSV of ``--judgments`` rows through the Judge tab's import
(``ui.judge.import_judgments``): every judge grades the same pairs (each query's share of the
demo's documents), the second and later judges agreeing with the first on about 70% of them, so
every pair is one the agreement statistics read.

Then times, best of ``--repeat``: ``settled_note`` once its pools are searched (what a grade waits
for; the first call, which searches the pools, is printed beside it), ``agreement_note`` and the
table of pairs to adjudicate the click fills after it (``disagreement_rows``). Last line:
``settled_s=<x> agreement_s=<y>`` (the budgets: 1 s and 2 s; the table's seconds are printed above).
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, best_of, json_arg, recorded, timed  # first: it puts the checkout on sys.path


def corpus_folder(n_queries: int, seed: int, folder: Path) -> Path:
    """The demo corpus with ``n_queries`` queries (its own first), as a BEIR folder without labels."""
    import json

    demo = ROOT / "data" / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text((demo / "corpus.jsonl").read_text())
    own = [json.loads(line) for line in (demo / "queries.jsonl").read_text().splitlines() if line.strip()]
    words = sorted({w.lower().strip(".,;:!?()\"'") for line in (demo / "corpus.jsonl").read_text().splitlines()
                    for w in json.loads(line)["text"].split() if w.isalpha() and len(w) > 3})
    rng = random.Random(seed)
    rows = [{"_id": q["_id"], "text": q["text"]} for q in own][:n_queries]
    texts = {r["text"] for r in rows}
    while len(rows) < n_queries:
        text = " ".join(rng.sample(words, rng.randint(1, 6)))
        if text not in texts:
            texts.add(text)
            rows.append({"_id": f"log-{len(rows)}", "text": text})
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def judgments_file(path: Path, query_ids: list[str], doc_ids: list[str], n: int, judges: int, seed: int) -> int:
    """A CSV of about ``n`` judgments (query_id, doc_id, grade, judge): every judge grades the same
    pairs, the others agreeing with the first on about 70%; returns the rows written."""
    rng = random.Random(seed)
    per_query = max(1, min(len(doc_ids), round(n / judges / len(query_ids))))
    written = 0
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["query_id", "doc_id", "grade", "judge"])
        for qid in query_ids:
            for doc in rng.sample(doc_ids, per_query):
                first = rng.choices((0, 1, 2), (6, 3, 1))[0]
                for j in range(judges):
                    grade = first if j == 0 or rng.random() < 0.7 else rng.randrange(3)
                    out.writerow([qid, doc, grade, f"judge-{j}"])
                    written += 1
                    if written >= n:
                        return written
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--judgments", type=int, default=200_000)
    p.add_argument("--judges", type=int, default=3)
    p.add_argument("--queries", type=int, default=1_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default=None)
    p.add_argument("--repeat", type=int, default=3)
    json_arg(p)
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from retrieval import Store, load_dataset
    from ui import judge
    from ui.registry import Registry

    work = Path(tempfile.mkdtemp(prefix="rankscope-judging-views-"))
    data = corpus_folder(args.queries, args.seed, work / "data")
    registry = Registry(Store(work / "store.sqlite3"), args.model, foreground_s=None)
    ws = registry.get(registry.open(load_dataset(data), budgeted=False))
    from retrieval.systems import BASE_SYSTEMS, SPLADE

    while ws.pending((*BASE_SYSTEMS, SPLADE)):  # the views compare every system on show: wait for their indexes
        time.sleep(0.5)
    upload = work / "judgments.csv"
    rows = judgments_file(upload, list(ws.dataset.queries), list(ws.dataset.docs), args.judgments, args.judges,
                          args.seed)
    said, import_s = timed(lambda: judge.import_judgments(ws, registry.store, str(upload)))
    print(f"{len(ws.dataset.queries):,} queries over the demo's {len(ws.dataset.docs):,} documents; "
          f"{rows:,} judgments by {args.judges} judges imported in {import_s:.1f} s: {said}")
    store = registry.store
    _, first_s = timed(lambda: judge.settled_note(ws, store))
    settled_s, note = best_of(lambda: judge.settled_note(ws, store), args.repeat)
    agreement_s, (agree, _) = best_of(lambda: judge.agreement_note(ws, store), args.repeat)
    table_s, table = best_of(lambda: judge.disagreement_rows(ws, store), args.repeat)
    print(f"  /settled    first {first_s:6.2f} s (pools searched)   then {settled_s:6.2f} s (best of {args.repeat})")
    print(f"  /agreement  {agreement_s:6.2f} s (best of {args.repeat}); then its table of pairs to adjudicate "
          f"{table_s:6.2f} s ({len(table):,} rows)")
    print("  " + next((line for line in note.splitlines() if line.startswith("**")), "")[:300])
    print("  " + agree.splitlines()[0][:300])
    print(f"settled_s={settled_s:.3f} agreement_s={agreement_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
