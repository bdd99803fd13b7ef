"""What carries a dense or a fused score, as HTML: the Search view's hits and the failure cards (the app's
Failures tab and the offline report) show it the same way.

A dense score (``retrieval.systems.dense_why.DenseWhy``): the query words as typed with their shares,
largest first (the score's drop without each), and the passage of the document that matches the query
best on its own, with its cosine, marked where it lies beyond what the encoder reads of the document.
A CLEAR score (``hybrid_why.HybridWhy``): its λ-weighted BM25 part with each query word's part, plus its
dense part, explained as above. Every text (the query's words, the passage, a term) goes through
``ui.present.escape``.
"""
from __future__ import annotations

from retrieval.data.dataset import Document
from retrieval.systems.dense_why import DenseWhy
from retrieval.systems.hybrid_why import HybridWhy
from ui.present.escape import text as esc

PASSAGE_CHARS = 320  # a longer best passage is cut at a word near this many characters


def full_text(doc_id: str, title: str, text: str) -> str:
    """The document's text as the encoder read it (``Document.full_text``): the spans of a ``DenseWhy`` index it."""
    return Document(doc_id, title, text).full_text


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "−")


def words_html(why: DenseWhy) -> str:
    """"cold +0.041 · causes +0.030 · the −0.002": each typed word and its share, largest first."""
    return " · ".join(f'<span class="why-word" title="the score without it: {why.score - w.share:.3f}">'
                      f"{esc(w.word)}</span> {_signed(w.share)}" for w in why.ranked_words)


def passage_html(why: DenseWhy, text: str) -> str:
    """The best-matching passage, escaped and quoted, with its cosine; said where the encoder never read it."""
    best = why.best()
    if not best:
        return ""
    seg = best[0]
    passage = text[seg.start:seg.end]
    if len(passage) > PASSAGE_CHARS:
        passage = passage[:PASSAGE_CHARS].rsplit(" ", 1)[0] + " …"
    unread = "" if seg.read_by_encoder else (
        ' <span class="why-unread">— beyond what the encoder reads of the document: its vector never saw this '
        "passage</span>")
    cut = f" (the first {len(why.segments)} passages scored, {why.segments_cut} more not)" if why.segments_cut else ""
    return (f'best passage, cosine {seg.score:.3f}{esc(cut)}: <q class="why-passage">{esc(passage)}</q>{unread}')


def dense_why_html(why: DenseWhy, text: str, cls: str = "why") -> str:
    """The query words carrying a dense score and its best passage, in two ``<div class=cls>``."""
    out = f'<div class="{cls}">Query words carrying the dense score: {words_html(why)}</div>' if why.words else ""
    passage = passage_html(why, text)
    return out + (f'<div class="{cls}">{passage}</div>' if passage else "")


def hybrid_why_html(why: HybridWhy, text: str, words: dict[str, str], cls: str = "why") -> str:
    """A CLEAR score as its BM25 part (each term, shown as the query word typed) plus its dense part, explained."""
    return split_html(why, words, cls) + dense_why_html(why.dense_why, text, cls)


def split_html(why: HybridWhy, words: dict[str, str], cls: str = "why") -> str:
    """The λ split of a CLEAR score alone: its BM25 part with each term's (as the query word typed), its dense part."""
    terms = " · ".join(f'<span title="{esc(term)}">{esc(words.get(term, term))}</span> {part:.3f}'
                       for term, part in why.terms)
    if why.lam is None:
        how = "BM25 alone (the cosine only breaks ties)"
    else:
        scale = f" / the query's best BM25 {why.bm25_max:.2f}" if why.bm25_max is not None else ""
        how = f"λ {why.lam:g} × BM25{scale}"
    dense = "cosine" if why.dense_weight == 1 else f"{why.dense_weight:g} × cosine"
    return (f'<div class="{cls}">Hybrid {why.score:.3f} = lexical {why.lexical:.3f} ({esc(how)}'
            f'{": " + terms if terms else ""}) + dense {why.dense:.3f} ({esc(dense)} {why.dense_why.score:.3f})</div>')


def score_why_html(why: DenseWhy | HybridWhy | None, text: str, words: dict[str, str], cls: str = "why") -> str:
    """Whichever explanation ``why`` is, as HTML; "" for none."""
    if isinstance(why, HybridWhy):
        return hybrid_why_html(why, text, words, cls)
    if isinstance(why, DenseWhy):
        return dense_why_html(why, text, cls)
    return ""
