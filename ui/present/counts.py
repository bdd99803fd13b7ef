"""Counts of judged queries in words, each saying what it counts: the Judge panel, the data set
summary and the Evaluate caption write them alike, from ``retrieval.judging.labels.judged_counts``."""
from __future__ import annotations

from retrieval.judging.labels import JUDGED, JudgedCounts, judged_counts


def queries_counted(counts: JudgedCounts, what: str = "judged") -> str:
    """ "24 judged queries (19 with a relevant document found)"; ``what`` qualifies the queries ("" for
    none). Success@10 and P@10 are evaluated on all of them, nDCG and the measures normalised by the
    relevant documents on the 19."""
    noun = "query" if counts.queries == 1 else "queries"
    return f"{counts.queries:,} {what + ' ' if what else ''}{noun} ({counts.relevant:,} with a relevant document found)"


def split_counted(split: str, labels) -> str:
    """A split's queries counted: its judged queries for ``labels.JUDGED``, else its labelled ones."""
    return queries_counted(judged_counts(labels), "judged" if split == JUDGED else "labelled")
