"""The app's help texts and choice labels, in one place."""
from __future__ import annotations

from retrieval.systems.identifier_queries import MAX_WORDS

IDENTIFIER_LOOKUP = ("(at most {words} words, half of them with a digit, such as a part number): the encoder splits "
                     "it into word pieces that say nothing of it, so the hybrid ranks {which} by BM25 alone")


def identifier_lookup_why(which: str) -> str:
    """Why the hybrid ranks identifier lookups by BM25 alone; ``which``: "it" or "them"."""
    return IDENTIFIER_LOOKUP.format(words=MAX_WORDS, which=which)


TITLE = "# RankScope\nWhy does first-stage retrieval fail? BM25, dense and hybrid, side by side."
# how far a background build is: said by the banner alone (``data.encoding_banner``, from the build's own
# progress, looked at again every few seconds); a view computed once points at it rather than copy a count
# that would read differently from the banner's a moment later
BANNER_FOLLOWS = "the banner at the top of the page follows it"

TRAIN_HELP = """Fine-tune the dense encoder in the background (one job at a time; the app stays usable).
Data: the train split trains and the test split evaluates; without a train split, a seeded
cold-start split by query is made. When the job ends, the new encoder is evaluated beside the base
and appears in the Search tab's *Dense encoder* list. The defaults are the measured recipe
(in-batch negatives plus a BM25 hard negative per query, lr 1e-4, 5 epochs) with a guard: a fifth
of the training queries (500 at most) is held out, the best epoch on them is kept — or the base
encoder, when no epoch beats it — and that many epochs are trained again on all of train; the
verdict gives the kept epoch's p-value against the base on the held-out queries (*within noise*
when p ≥ 0.05, as it often is with a handful of labels). The new encoder's hybrid uses the λ chosen
on those held-out queries, never one tuned on the queries it trained on. Set the held-out share to 0
to train once on every label (its hybrid then uses the label-free λ). A run that was cancelled,
failed or cut short by a restart keeps a checkpoint after every finished epoch: *Resume* goes on
from there.

*Model to train* → learned sparse (SPLADE) fine-tunes the SPLADE model instead, through
sentence-transformers' sparse trainer: the same pairs and BM25 negatives, in-batch loss with FLOPS
regularization, and the same held-out guard (the best epoch, or the base; no refit). The new model
is evaluated beside the base on SPLADE and the three-way hybrid, and appears in Evaluate's *Also
evaluate* list and in Search's expansion terms."""
FAMILY_HELP = {"dense": "dense encoder (sentence-transformers)",
               "sparse": "learned sparse (SPLADE): in-batch loss + FLOPS regularization"}
LOSS_HELP = {
    "quadruplet": "quadruplet — QuadrupletBERT: (q, p, random n, hard n), two stages",
    "residual": "residual margin — CLEAR: margin shrinks where BM25 already ranks well",
    "triplet": "triplet — three-tower Sentence-BERT baseline, cosine",
    "inbatch": "in-batch — softmax over batch + hard negatives (Baidu)",
    "marginmse": "Margin-MSE — distils the tuned hybrid's score margins (Hofstätter et al.)",
}
NEGATIVES_HELP = {"bm25": "BM25 errors (CLEAR §3.3)", "model": "encoder's own top-k (QuadrupletBERT stage 2)",
                  "random": "random (easy)"}
PRETRAIN_HELP = {"": "none", "ict": "ICT", "bfs": "BFS", "wlp": "WLP (links)", "ict+bfs": "ICT + BFS",
                 "ict+wlp": "ICT + WLP", "bfs+wlp": "BFS + WLP", "ict+bfs+wlp": "ICT + BFS + WLP (the paper's best)"}
WLP_PAIRS = ": WLP up to {links:,} pairs, one per link"
PRETRAIN_INFO_LINKED = ("This corpus's documents hold {links:,} links to each other: WLP pairs a sentence of a "
                        "document's first section with a passage of a document that links to it (Chang et al., "
                        "ICLR 2020, §3).")
PRETRAIN_INFO_UNLINKED = ("WLP is offered where the documents link to each other (a 'links' field of document ids, "
                          "or Markdown or HTML pages with links); this corpus has none.")
POOLING_HELP = {"mean": "mean of the tokens (as the base)",
                "poly": "poly-attention: m context codes over the query's tokens (Baidu §3.2)"}

EVALUATE_INTRO = "Per-query nDCG@10 against BM25: where dense and hybrid win and lose."
EMBEDDINGS_INTRO = ("UMAP (cosine) of queries, their positives, hard negatives (the encoder's own top "
                    "non-relevant hits) and easy negatives (random), for a sample of labelled queries or one "
                    "query and its neighbourhood — base and fine-tuned encoder on the same points, with the "
                    "query–document similarities the quadruplet loss is meant to pull apart.")
FAILURES_INTRO = ("Where and why retrieval fails, query by query: vocabulary mismatch (BM25 misses a "
                  "relevant document dense finds), semantic false positives (dense invents a topically "
                  "related wrong one), lexical traps, both fail, fixed by hybrid, and — with a fine-tuned "
                  "encoder — fixed or broken by fine-tuning. Queries without labels (a query log) follow as the "
                  "queries predicted to fail, each with the systems' top documents; a data set without labels "
                  "shows them alone.")
RUNS_INTRO = ("Every run computed on this data set, from the store (nothing is computed twice). "
              "Pick two to compare them query by query on their split's labels.")
SNAPSHOTS_HELP = ("A snapshot keeps the runs of the systems on show (on the labelled split) with a note, so that a "
                  "later change can be held against it: here as a metric's history and as two snapshots side by "
                  "side, and in CI with `python -m retrieval check` against the snapshot marked the baseline. "
                  "Every point is evaluated on today's labels, with its 95% interval.")
DATA_INTRO = ("Load a BEIR folder as a .zip, or separate files: documents (JSONL, CSV/TSV "
              "with id/title/text, or .txt), queries (JSONL) and labels (BEIR .tsv or TREC qrels). "
              "A broken file is reported with its line; the current data set stays loaded.")
ADD_QUERIES_HELP = ("Real queries from your logs, with or without labels: JSONL (`_id`, `text`), CSV/TSV with a "
                    "`query` (or `text`) column and an optional id column, or .txt with one query per line. "
                    "Queries without ids get stable ids from their text (`q-` and a hash), so the same query "
                    "keeps its id in every upload.")
SAMPLE_HELP = ("With more than 1,000 queries (a query log), *automatic* judges a random sample of the size below "
               "instead of every query. *By frequency* draws head queries more often, weighted by the queries "
               "file's count column (`count`, `frequency`, `clicks`…); *stratified* draws equally from queries the "
               "systems agree on and those they disagree on. *The queries predicted to fail first* takes the "
               "sample's size of queries with the highest predicted difficulty (query performance prediction: no "
               "labels needed; the table *Queries by predicted difficulty* lists them) and opens them hardest "
               "first, each query's pool before the next, so the first grades go where failures are likeliest. A "
               "sample is kept with the corpus, so the same seed gives every judge the same queries.")
SAMPLE_METHODS = {"all": "every query", "random": "random", "frequency": "by frequency (count column)",
                  "stratified": "stratified by disagreement", "predicted": "the queries predicted to fail first"}
DIFFICULTY_HELP = ("Every query's predicted difficulty, labelled or not (query performance prediction): how widely "
                   "each system's scores spread over its top documents, how far they stand above the corpus, how "
                   "specific the query's words are, and how far the systems disagree, each turned into a percentile "
                   "within the query set and averaged, each kind of evidence weighing once — or, where enough "
                   "queries are judged, fitted to their nDCG@10. It ranks queries, it does not grade them: a query "
                   "predicted hard is worth a look, and judging tells whether it fails. Computed in the background "
                   "the first time the table is opened.")
SEGMENTS_HELP = ("Each row is one kind of query: its length, whether it has digits (codes, part numbers, years), "
                 "a question or keywords, its detected language, and every extra field of your queries file "
                 "(a JSONL record's other values or `metadata`, a CSV/TSV file's other columns) that takes 2 to 20 "
                 "values. Segments with fewer than 5 queries are left out. A difference counts as significant when "
                 "its paired test stays below 0.05 after the Benjamini–Hochberg correction over every test in the "
                 "table, and its 95% interval excludes 0.")
QUERY_SETS_HELP = ("Queries added to a corpus are kept with it in the store, and come back whenever the corpus "
                   "is opened again: after a reload, a restart, or in another browser. Removing a set takes its "
                   "queries out of this data set (labelled ones stay); judgments made on them stay in the store "
                   "and come back if the queries are added again.")
QUERY_SETS_SHARED = ("**This is a shared deployment:** the query sets you add are this browser session's — other "
                     "visitors do not get them, nor their names — until you publish one; a published set's name must "
                     "not be one another published set has. Only the session that added a set can remove it, "
                     "published or not.")
JUDGES_SHARED = ("**This is a shared deployment:** a judge you name here is this browser session's own (another "
                 "session may keep a judge of the same name, with grades of its own), and its grades count only in "
                 "this session's views — Judge, Evaluate, Runs, Failures, the labels applied — until you publish the "
                 "judge; then they count in everyone's, and only you grade under it.")
SNAPSHOTS_SHARED = ("**This is a shared deployment:** your snapshots are this browser session's until you publish "
                    "one, and so are their names: another session may keep one of the same name, unseen. Names meet "
                    "when published — a published name must be free among the published, and yours is refused if it "
                    "looks like a published one. Where yours and a published one share a name, the name means yours "
                    "(the table says which is which). Only a published snapshot can be the baseline, which is "
                    "everyone's.")
IMPORT_RUN_HELP = ("A run of your production system (Elasticsearch, a vendor API, a reranker) for this data "
                   "set's queries: TREC lines `qid Q0 docid rank score tag`, or the JSON `{qid: {docid: score}}` "
                   "ranx writes. It becomes a system like BM25, dense and hybrid: in Search's columns, in "
                   "Evaluate with significance marks, and in the runs history. Unknown ids are counted and "
                   "left out; a run for another data set is refused. Its name (default: its TREC tag) is one "
                   "word of at most 100 characters; up to 8 runs stand side by side.")
JUDGE_HELP = ("Make relevance labels here. Every system on show (BM25, dense, hybrid, your imported runs) "
              "pools its top k for each query; the pairs come one at a time, each the one expected to settle "
              "the comparisons of the systems on show most (or of the pair you aim at): documents the "
              "systems rank differently, of the kind that has turned out relevant so far. System names "
              "stay hidden so they do not sway you. Keys: **0**, "
              "**1**, **2** grade, **s** skips, **←** / **→** move. Each grade is saved the moment you give "
              "it and can be changed later; it is a label in every view at once (the summary above, Evaluate, "
              "Failures, Embeddings, Runs, Train; unjudged documents count as not relevant), in every session "
              "of the corpus that counts its judge (on a shared deployment, your own until you publish it), "
              "and whenever it is opened again (a reload, a restart). A system that joins the "
              "ones on show (its index built, a run imported) joins the pool at once: its unjudged documents "
              "come next.")
KEPT_HELP = ("An uploaded data set's files are kept beside the store, so it comes back as you left it — its "
             "added queries and its judgments with it — when the page is reloaded (the browser remembers which "
             "one it had open), on another visit, or after the app is restarted: pick it (the latest is picked) "
             "and *Reopen*. The ten a browser opened last are kept, a hundred in all (4 GiB of files); *Forget* "
             "removes one and its files.")
KEPT_HELP_SHARED = (KEPT_HELP + " On this shared server a kept data set is this browser's alone: no other "
                    "session lists it or can reopen it.")
NO_LABELS = "_No relevance labels: metrics need a qrels file._"
STATISTICS_RULE = ("How two systems are compared: on the queries both were evaluated on, the paired permutation "
                   "test (each query's two scores swapped at random) gives the p-value, and the 95% interval of the "
                   "difference is every shift the same test does not reject. So the interval excludes 0 exactly "
                   "when p < 0.05, and only then is one system called the better; otherwise the two are not "
                   "separable yet on these queries. A single system's mean carries a bootstrap interval.")

# what each metric means, in words: the Evaluate table's hover text and its glossary
METRIC_HELP = {
    "ndcg@10": "nDCG@10: how good the top 10 is, from 0 to 1. A relevant document counts more the higher it "
               "ranks (and a highly relevant one more than a relevant one); 1 is the best order possible.",
    "mrr@10": "MRR@10: how high the first relevant document ranks: 1 at rank 1, 1/2 at rank 2, … 0 when none is "
              "in the top 10.",
    "recall@10": "Recall@10: the share of a query's relevant documents found in the top 10.",
    "recall@100": "Recall@100: the share of a query's relevant documents found in the top 100 — what a re-ranker "
                  "placed after this system could still find.",
    "recall@1000": "Recall@1000: the share of a query's relevant documents found in the top 1,000.",
    "map": "MAP: mean average precision over the whole list; rewards every relevant document found, earlier "
           "better.",
    "p@10": "P@10: the share of the top 10 that is relevant.",
    "pnr": "PNR (positive-negative ratio): over pairs of judged documents with different grades, how many pairs "
           "the system puts in the right order for each pair it puts in the wrong one. 1 means as many right as "
           "wrong; 2 means twice as many right. It is not a share, so it can be above 1 (Baidu, KDD 2021).",
    "bpref": "bpref: how often judged relevant documents rank above judged non-relevant ones; documents nobody "
             "judged are left out instead of counted as not relevant.",
    "judged@10": "judged@10: the share of the top 10 that has a label. Low judged@10 means the other figures rest "
                 "on unjudged documents counted as not relevant, which understates the system.",
    "ndcg'@10": "nDCG'@10 (condensed list): nDCG@10 after removing unjudged documents from the list, so a system "
                "is not penalised for documents nobody judged (Sakai, SIGIR 2007).",
}
AT_A_GLANCE = ("ndcg@10", "judged@10", "recall@100", "mrr@10")  # Evaluate's table; the rest behind "All metrics"
