#!/usr/bin/env python
"""Hybrid fusion without labels, on corpora of every kind a label-free default has to survive:
every label-free way of fusing BM25 and dense (and learned sparse), against the better single system.

    python bench/fusion_nolabels.py [--sets demo,scifact,nfcorpus,cranfield]
        [--kinds "as is,transliterated,codes,half withheld,withheld"] [--select] [--store FILE] [--json FILE]
        [--precision auto|fp32|bf16]

Data sets: the bundled demo and the shared SciFact, NFCorpus and Cranfield (skipped where
``../shared`` is absent), each on its test split, in five kinds (``bench/_kinds.py``): as it is
(BM25 and dense close), transliterated into Greek letters (a language the encoder does not read:
BM25 far better), known-item lookup by part numbers (codes: BM25 far better), and with half of,
or all, the query's words withheld from its relevant documents (paraphrase: dense better, far
better). The labels are used only to score the final lists: each set is opened with its test
labels alone (no train split), so the hybrid the app and the CLI give
(``Workspace.run("hybrid", "test")``) is the label-free default: BM25 over the query's largest
possible BM25 score, plus the cosine (λ = 1, i.e. α = 0.5), unless the reliability check
(``retrieval/systems/reliability.py``: the corpus's language, the encoder's spread on it) finds the
encoder unreliable, where it is BM25 alone; and a query that looks up an identifier
(``retrieval/systems/identifier_queries.py``: at most three words, half of them with a digit) is ranked by BM25 alone.

Beside the default, on the same candidates (the union of BM25's and dense's top 1000, scored exactly
by all three systems): the same combination without the reliability check and the identifier-lookup
rule; query-max combinations for α = 0.3 … 0.9; CLEAR with the paper's λ = 0.5; RRF (k = 60) of BM25
and dense, and of all three; the z-score sum; min-max and TMM (Bruch et al., TOIS 2023) at α = 0.5;
and two weightings estimated without judgments from the agreement between the three systems
(Soboroff, Nicholas, Cahan, SIGIR 2001: systems that agree with the others are the better ones; S.
Wu, "Data Fusion in Information Retrieval", Springer 2012, ch. 5: weights from such estimates). A
system's agreement is its mean rank-biased overlap (RBO_EXT, Webber, Moffat, Zobel, TOIS 2010, of
the top 20s, p = 0.9: ``retrieval.judging.judgments.rbo``) with the other two over the queries;
"agreement-weighted" fuses the three normalized scores with weights proportional to it;
"agreement-chosen α" gives dense the share of the BM25–dense pair's agreement that is dense's.
"cosine floored" counts a cosine no higher than the query's 95th percentile over 1,000 seeded random
documents as that level (what an unrelated document reaches is no evidence). SPLADE's own row is its
own top 100; on the fusions it contributes its scores on the candidates.

How the default was chosen without the reported labels: ``--select`` prints the same table on
the other splits (demo train, SciFact train, NFCorpus dev) and the normalization and α with the best
worst case there were taken; Cranfield has no other split and was not looked at before.

Last line: ``worst_gap_vs_best_single=<x> mean_gain_vs_best_single=<y>``: the default's nDCG@10
minus the better of BM25 and dense, the worst and the mean over every set and kind reported.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np

from _common import DEMO, SHARED, recorded, store_arg, write_json  # first: it puts the checkout on sys.path
from _kinds import KINDS, TOLERANCE
from retrieval import Store, Workspace, load_dataset
from retrieval.evaluation.measures import evaluate_run
from retrieval.index.encoder import PRECISIONS, load_encoder
from retrieval.judging.judgments import rbo
from retrieval.store import default_store_path
from retrieval.systems.clear_lambda import LEX_ONLY, shown
from retrieval.systems.fusion import Candidates, Hybrid, fused
from retrieval.systems.hybrid import CLEAR
from retrieval.systems.identifier_queries import is_identifier_lookup
from retrieval.systems.reliability import dense_reliability

SETS = {"demo": (DEMO, "test", "train"), "scifact": (SHARED / "scifact", "test", "train"),
        "nfcorpus": (SHARED / "nfcorpus", "test", "dev"), "cranfield": (SHARED / "cranfield", "test", None)}
ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
SIGNALS = {"no word": "dense's top document holds no word of the query (share of queries)",
           "BM25 ratio": "BM25's mean score on dense's top 10 over its mean on its own top 10",
           "RBO": "rank-biased overlap of BM25's and dense's top 20s",
           "cos gap": "cosine of dense's top document minus that of BM25's top document"}
DEFAULT = "default (the app's hybrid)"
RBO_P, RBO_DEPTH = 0.9, 20
FLOOR_Q, FLOOR_SAMPLE = 0.95, 1000


class Scored(Candidates):
    """One query's candidates with the learned sparse score too, and the query's BM25 maximum."""

    def __init__(self, c: Candidates, s_sparse: np.ndarray, lex_max: float, background: float, lookup: bool):
        super().__init__(c.rows, c.s_lex, c.s_emb, lex_only=lookup)
        self.s_sparse, self.lex_max = s_sparse, max(lex_max, 1e-9)
        self.background = background  # the FLOOR_Q quantile of the query's cosines to random documents

    def lex(self) -> np.ndarray:  # the query-max space
        return self.s_lex / self.lex_max

    def sparse(self) -> np.ndarray:
        top = self.s_sparse.max() if len(self.s_sparse) else 0.0
        return self.s_sparse / top if top > 0 else self.s_sparse


def agreement(cands: dict[str, Scored]) -> dict[str, float]:
    """Each system's mean RBO with the other two over the queries (its top of the candidates)."""
    pairs = {("bm25", "dense"): [], ("bm25", "splade"): [], ("dense", "splade"): []}
    for c in cands.values():
        top = {"bm25": c.rows[np.argsort(-c.s_lex, kind="stable")][:RBO_DEPTH] if c.s_lex.max() > 0 else c.rows[:0],
               "dense": c.rows[np.argsort(-c.s_emb, kind="stable")][:RBO_DEPTH],
               "splade": c.rows[np.argsort(-c.s_sparse, kind="stable")][:RBO_DEPTH] if c.s_sparse.max() > 0
               else c.rows[:0]}
        for a, b in pairs:
            pairs[(a, b)].append(rbo(top[a].tolist(), top[b].tolist(), RBO_P))
    mean = {k: float(np.mean(v)) if v else 0.0 for k, v in pairs.items()}
    return {s: np.mean([v for k, v in mean.items() if s in k]) for s in ("bm25", "dense", "splade")}


def chosen_alpha(agree: dict[str, float]) -> float:
    """Dense's share of the BM25–dense pair's agreement (0.5 where neither agrees with anything)."""
    pair = agree["bm25"] + agree["dense"]
    return agree["dense"] / pair if pair > 0 else 0.5


def fusions(agree: dict[str, float]) -> dict[str, Callable[[Scored], np.ndarray]]:
    """Label-free fusions as functions of one query's scored candidates."""
    def mm(x):
        return (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)

    def z(x):
        return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)

    def rank(x):
        r = np.empty(len(x))
        r[np.argsort(-x, kind="stable")] = np.arange(1, len(x) + 1)
        return r

    def rrf(c, three=False):
        out = (c.s_lex > 0) / (60 + rank(c.s_lex)) + 1 / (60 + rank(c.s_emb))
        return out + (c.s_sparse > 0) / (60 + rank(c.s_sparse)) if three else out

    total = sum(agree.values()) or 1.0
    w = {s: v / total for s, v in agree.items()}
    a_agree = chosen_alpha(agree)
    out = {"query max α 0.5, no reliability or lookup rule": lambda c: 0.5 * c.s_emb + 0.5 * c.lex(),
           "query max α 0.5, lookups by BM25 alone": lambda c: fused(LEX_ONLY if c.lex_only else 1.0, c.lex(), c.s_emb),
           "CLEAR λ 0.5 (paper)": lambda c: 0.5 * c.s_lex + c.s_emb, "RRF k 60": rrf,
           "RRF k 60, three systems": lambda c: rrf(c, three=True),
           "z-score sum": lambda c: z(c.s_emb) + z(c.s_lex),
           "min-max α 0.5": lambda c: 0.5 * mm(c.s_emb) + 0.5 * mm(c.s_lex),
           "TMM α 0.5": lambda c: 0.5 * (c.s_emb + 1) / (c.s_emb.max() + 1) + 0.5 * c.lex() / max(c.lex().max(), 1e-9),
           "agreement-chosen α": lambda c: a_agree * c.s_emb + (1 - a_agree) * c.lex(),
           "α 0.5, cosine floored at random docs' q95": lambda c: 0.5 * np.maximum(c.s_emb, c.background)
           + 0.5 * c.lex(),
           "agreement-weighted, three systems": lambda c: w["bm25"] * c.lex() + w["dense"] * c.s_emb
           + w["splade"] * c.sparse()}
    for a in ALPHAS:
        out[f"query max α {a}"] = lambda c, a=a: a * c.s_emb + (1 - a) * c.lex()
    return out


def random_doc_cosines(ws: Workspace, queries: dict[str, str]) -> dict[str, float]:
    """{query: the FLOOR_Q quantile of its cosines to FLOOR_SAMPLE seeded random documents}: the
    cosine a document unrelated to the query still reaches (the floor row counts nothing below it)."""
    n = len(ws.dataset.doc_ids)
    rows = np.sort(np.random.default_rng(0).choice(n, min(FLOOR_SAMPLE, n), replace=False))
    qvecs = ws.dense.encode_queries(queries)
    return {qid: float(np.quantile(ws.dense.index.scores(qvecs[i], rows), FLOOR_Q)) for i, qid in enumerate(queries)}


def signals(cands: dict[str, Scored]) -> dict[str, float]:
    """Label-free signals of how BM25 and dense relate on a corpus, each a mean over the queries."""
    zero, endorse, overlap, gap = [], [], [], []
    for c in cands.values():
        if not len(c.rows) or c.s_lex.max() <= 0:
            continue
        d, b = np.argsort(-c.s_emb, kind="stable")[:RBO_DEPTH], np.argsort(-c.s_lex, kind="stable")[:RBO_DEPTH]
        zero.append(float(c.s_lex[d[0]] == 0))
        endorse.append(c.s_lex[d[:10]].mean() / c.s_lex[b[:10]].mean())
        overlap.append(rbo(c.rows[d].tolist(), c.rows[b].tolist(), RBO_P))
        gap.append(c.s_emb[d[0]] - c.s_emb[b[0]])
    return {name: float(np.mean(v)) if v else 0.0 for name, v in zip(SIGNALS, (zero, endorse, overlap, gap))}


def one(ws: Workspace, split: str, signals_: dict | None = None) -> dict[str, float]:
    """{fusion: nDCG@10} for one workspace (one data set of one kind) on ``split``; the corpus's
    label-free ``signals`` into ``signals_`` where given."""
    ds = ws.dataset
    queries, qrels, ids = ds.split_queries(split), ds.qrels[split], ds.doc_ids
    ws.build_dense()
    sparse = ws.sparse
    plain = Hybrid(ws.lexical, ws.dense, depth=ws.depth).candidates(queries)
    qvecs = dict(zip(queries, sparse.model.encode(list(queries.values()), query=True)))
    background = random_doc_cosines(ws, queries)
    cands = {qid: Scored(c, np.asarray(sparse.index.scores(qvecs[qid], c.rows)) if len(c.rows) else np.zeros(0),
                         ws.bm25.max_score(queries[qid]), background[qid], is_identifier_lookup(queries[qid]))
             for qid, c in plain.items()}

    def ndcg(run):
        return evaluate_run(run, qrels, metrics=("ndcg@10",)).mean["ndcg@10"]

    row = {s: ws.evaluate(s, split).mean["ndcg@10"] for s in ("bm25", "dense", "splade")}
    row[DEFAULT] = ws.evaluate("hybrid", split).mean["ndcg@10"]
    agree = agreement(cands)
    if signals_ is not None:
        signals_.update(signals(cands))
    for fusion, score in fusions(agree).items():
        run = {}
        for qid, c in cands.items():
            s = score(c)
            order = np.argsort(-s, kind="stable")[:100]
            run[qid] = [(ids[c.rows[j]], float(s[j])) for j in order]
        row[fusion] = ndcg(run)
    check, choice = dense_reliability(ws), CLEAR.lambda_for(ws, split)
    spread = f"{check.spread:.2f}/{check.reference_spread:.2f}" if check.reference_spread else "n/a"
    print(f"  language {check.language} ({check.language_share:.0%}), spread {spread}; agreement "
          + ", ".join(f"{s} {v:.2f}" for s, v in agree.items())
          + f" (agreement-chosen α {chosen_alpha(agree):.2f})"
          + f"; hybrid λ = {shown(choice.value)}: {choice.how}", file=sys.stderr)
    return row


def table(sets: dict, kinds: list[str], store: Store | None, model=None, select: bool = False,
          signals_: dict | None = None) -> dict[str, dict[str, float]]:
    """{"set|kind": {fusion: nDCG@10}} (``select``: on each set's other split instead); each column's
    label-free signals into ``signals_`` where given."""
    results = {}
    for name, (folder, test, other) in sets.items():
        split = other if select else test
        if split is None:
            continue
        if not folder.exists():
            print(f"{name}: {folder} is absent, skipped", file=sys.stderr)
            continue
        full = load_dataset(folder)
        for kind in kinds:
            ds = KINDS[kind](full, split)
            print(f"{name}, {kind} ({split}: {len(ds.docs):,} documents, {len(ds.split_queries(split))} queries)",
                  file=sys.stderr)
            col = f"{name}|{kind}"
            results[col] = one(Workspace(ds, store, model=model), split,
                               signals_.setdefault(col, {}) if signals_ is not None else None)
    return results


def gaps(results: dict[str, dict[str, float]]) -> dict[str, tuple[float, float]]:
    """{fusion: (worst gap, mean gap)} against the better of BM25 and dense, over the columns."""
    fusions_ = list(next(iter(results.values())))
    out = {}
    for f in fusions_:
        g = [r[f] - max(r["bm25"], r["dense"]) for r in results.values()]
        out[f] = (min(g), float(np.mean(g)))
    return out


def alphas_within(row: dict[str, float]) -> list[float]:
    """The query-max α (no rules) within ``TOLERANCE`` of the better of BM25 and dense on a column."""
    best = max(row["bm25"], row["dense"])
    return [a for a in ALPHAS if row[f"query max α {a}"] >= best - TOLERANCE]


def show(results: dict[str, dict[str, float]], signals_: dict[str, dict[str, float]] | None = None
         ) -> dict[str, tuple[float, float]]:
    """Print one block of columns per kind, then every fusion's worst and mean gap, then (given
    ``signals_``) each column's label-free signals beside the α that meet the target there; return
    the gaps."""
    kinds = list(dict.fromkeys(c.split("|")[1] for c in results))
    w = max(40, *(len(f) + 2 for f in next(iter(results.values()))))
    for kind in kinds:
        cols = [c for c in results if c.split("|")[1] == kind]
        print(f"\n{kind}")
        print(f"{'nDCG@10':<{w}}" + "".join(f"{c.split('|')[0]:>11}" for c in cols))
        for f in results[cols[0]]:
            print(f"{f:<{w}}" + "".join(f"{results[c][f]:>11.4f}" for c in cols))
    g = gaps(results)
    print(f"\n{'gap to the better of BM25 and dense':<{w}}{'worst':>11}{'mean':>11}")
    for f, (worst, mean) in g.items():
        print(f"{f:<{w}}{worst:>+11.4f}{mean:>+11.4f}")
    if signals_:
        print(f"\nlabel-free signals (means over the queries), and the query-max α within {TOLERANCE} of the better "
              "single system")
        for name, what in SIGNALS.items():
            print(f"  {name}: {what}")
        print(f"{'':<26}" + "".join(f"{n:>12}" for n in SIGNALS) + "   α within")
        for col, sig in signals_.items():
            within = " ".join(f"{a:g}" for a in alphas_within(results[col])) or "none"
            print(f"{col:<26}" + "".join(f"{sig[n]:>12.3f}" for n in SIGNALS) + f"   {within}")
    return g


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    store_arg(p, "the usual store; embeddings reused")
    p.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    p.add_argument("--select", action="store_true", help="the selection table (other splits) instead")
    p.add_argument("--json", default=None)
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="the encoder's arithmetic (auto: as the app picks it; vectors are stored per precision)")
    args = p.parse_args(argv)
    sets = {s.strip(): SETS[s.strip()] for s in args.sets.split(",") if s.strip() in SETS}
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip() in KINDS]
    if not sets or not kinds:
        p.error(f"choose sets from {', '.join(SETS)} and kinds from {', '.join(KINDS)}")
    store = Store(args.store or default_store_path())
    sig: dict[str, dict[str, float]] = {}
    results = table(sets, kinds, store, load_encoder(None, precision=args.precision), select=args.select, signals_=sig)
    g = show(results, sig)
    write_json(args.json, {"ndcg@10": results, "signals": sig})
    worst, mean = g[DEFAULT]
    print(f"worst_gap_vs_best_single={worst:.4f} mean_gain_vs_best_single={mean:.4f}")


if __name__ == "__main__":
    sys.exit(recorded(main, __file__))
