"""What the failure categories are called and how each is defined, as users read them (the rules
themselves are ``retrieval.failure_rules``)."""
from __future__ import annotations

from dataclasses import asdict

from retrieval.failure_rules import Thresholds

CATEGORY_LABELS = {
    "vocabulary_mismatch": "Vocabulary mismatch",
    "exact_match_miss": "Exact-match miss",
    "semantic_false_positive": "Semantic false positive",
    "lexical_trap": "Lexical trap",
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
    "both_fail": "neither BM25's nor dense's top {top} holds a relevant document",
    "fixed_by_hybrid": "both fail, but the hybrid's top {top} holds a relevant document",
    "fixed_by_finetuning": "the base {tuned_system}'s top {top} holds no relevant document, the "
                           "fine-tuned one's does",
    "broken_by_finetuning": "the base {tuned_system}'s top {top} holds a relevant document, the "
                            "fine-tuned one's does not",
}


def describe(category: str, thresholds: Thresholds) -> str:
    """The category's definition with the thresholds filled in."""
    return CATEGORY_DEFINITIONS[category].format(**asdict(thresholds))
