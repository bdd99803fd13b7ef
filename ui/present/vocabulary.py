"""What the failure categories are called and how each is defined, as users read them (the rules
themselves are ``retrieval.evaluation.failure_rules``)."""
from __future__ import annotations

from dataclasses import asdict

from retrieval.evaluation.failure_rules import PAIR_CATEGORIES, Thresholds
from retrieval.systems import label

CATEGORY_LABELS = {
    "vocabulary_mismatch": "Vocabulary mismatch",
    "exact_match_miss": "Exact-match miss",
    "semantic_false_positive": "Semantic false positive",
    "lexical_trap": "Lexical trap",
    "unjudged_at_top": "Unjudged at the top (judge it first)",
    "bridged_by_expansion": "Bridged by expansion",
    "both_fail": "Both fail",
    "fixed_by_hybrid": "Fixed by hybrid",
    "fixed_by_finetuning": "Fixed by fine-tuning",
    "broken_by_finetuning": "Broken by fine-tuning",
}
# filled with Thresholds' fields by ``describe``
CATEGORY_DEFINITIONS = {
    "vocabulary_mismatch": "a relevant document dense ranks in its top {top} that BM25 ranks below "
                           "{low} or does not retrieve (CLEAR Table 3)",
    "exact_match_miss": "a relevant document BM25 ranks in its top {top} that dense ranks below {low} or "
                        "does not retrieve: a shared code, name, number or acronym the embedding misses",
    "semantic_false_positive": "a non-relevant or unjudged document dense ranks in its top {fp_top} that "
                               "BM25 ranks below {low} or does not retrieve (CLEAR Table 4)",
    "lexical_trap": "BM25's first document is not relevant and dense ranks it below {top}: shared words, "
                    "wrong meaning",
    "unjudged_at_top": "on a query judged in the app, a document nobody judged that dense ranks in its top {fp_top} "
                       "(BM25 below {low}) or BM25 ranks first (dense below {top}): not a failure until judged",
    "bridged_by_expansion": "a relevant document learned sparse (SPLADE) ranks in its top {top} that BM25 ranks "
                            "below {low} or does not retrieve: the terms the model added matched",
    "both_fail": "neither BM25's nor dense's top {top} holds a relevant document",
    "fixed_by_hybrid": "both fail, but the hybrid's top {top} holds a relevant document",
    "fixed_by_finetuning": "the base {tuned_system}'s top {top} holds no relevant document, the "
                           "fine-tuned one's does",
    "broken_by_finetuning": "the base {tuned_system}'s top {top} holds a relevant document, the "
                            "fine-tuned one's does not",
}


def _pair_roles(category: str, pair) -> tuple[str, str]:
    """(the system that misses, the system that finds), by label."""
    a, b = (label(s) for s in pair)
    return (a, b) if category == PAIR_CATEGORIES[0] else (b, a)


def category_label(category: str, pair=None) -> str:
    """What a category is called; a pair category names its two systems ("prod finds, BM25 misses")."""
    if category in PAIR_CATEGORIES:
        missed_by, found_by = _pair_roles(category, pair)
        return f"{found_by} finds, {missed_by} misses"
    return CATEGORY_LABELS[category]


def describe(category: str, thresholds: Thresholds, pair=None) -> str:
    """The category's definition with the thresholds (and a pair's systems) filled in."""
    if category in PAIR_CATEGORIES:
        missed_by, found_by = _pair_roles(category, pair)
        return (f"a relevant document {found_by} ranks in its top {thresholds.top} that {missed_by} ranks below "
                f"{thresholds.low} or does not retrieve")
    return CATEGORY_DEFINITIONS[category].format(**asdict(thresholds))
