"""The Search view's HTML: one column per system, each hit with its label badge, its rank in the
other lists, the query terms it matches highlighted, its per-term BM25 contributions, its system's
own terms (SPLADE's or RM3's, each marked with its kind: a query term, a query expansion, a document
expansion), what carries a dense or CLEAR score (the query words, the best passage, the λ split:
``ui.present.score_why``) and the query terms it lacks; for a labelled query, a
table of every labelled document's rank per system."""
from __future__ import annotations

from retrieval.evaluation.failure_rules import NOT_RETRIEVED
from retrieval.index.tokenize import Tokenizer
from retrieval.side_by_side import Hit, SideBySide
from retrieval.systems import HYBRID, label, short
from retrieval.systems.identifier_queries import is_identifier_lookup
from ui.present.escape import text as esc
from ui.present.score_why import full_text, score_why_html
from ui.texts import BANNER_FOLLOWS, identifier_lookup_why

LABEL_BADGE = {2: ("rel-2", "relevant (2)"), 1: ("rel-1", "partly relevant (1)"),
               0: ("rel-0", "judged not relevant (0)")}
SNIPPET_CHARS = 420
# how a system's term of each kind (``retrieval.index.terms.TermKind``) is marked: a query term plainly
KIND_ATTRS = {"query term": "",
              "query expansion": ' class="query-expansion" title="query expansion: not in the query, added to it"',
              "document expansion": ' class="expansion" title="document expansion: not in the document, added by the '
                                    'model"'}


def highlight(text: str, tokenizer: Tokenizer, terms: set[str], limit: int = SNIPPET_CHARS) -> str:
    """HTML-escaped ``text`` (cut near ``limit`` chars) with query-term matches in <mark>."""
    cut = text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"
    out, pos = [], 0
    for start, end, token in tokenizer.spans(cut):
        if token in terms:
            out.append(esc(cut[pos:start]))
            out.append(f"<mark>{esc(cut[start:end])}</mark>")
            pos = end
    out.append(esc(cut[pos:]))
    return "".join(out)


def typed_terms(terms, words: dict[str, str]) -> list[tuple[str, list[str]]]:
    """``terms`` (the index's tokens, in query order) as the query words they came from (``words``:
    ``SideBySide.term_words``), each word once with its terms: a word typed whole that the index reads
    as several tokens is shown as typed ("can't" for "can" and "t", never the two apart)."""
    grouped: dict[str, list[str]] = {}
    for term in terms:
        grouped.setdefault(words.get(term, term), []).append(term)
    return list(grouped.items())


def typed_contributions(contributions, words: dict[str, str]) -> list[tuple[str, list[str], float]]:
    """Per-term BM25 contributions ``(term, score)`` by the query word they came from: (the word as
    typed, its terms, the sum of their scores), in query order; the sums add up as the terms' do."""
    grouped: dict[str, tuple[list[str], float]] = {}
    for term, score in contributions:
        terms, total = grouped.get(words.get(term, term), ([], 0.0))
        grouped[words.get(term, term)] = ([*terms, term], total + score)
    return [(word, terms, total) for word, (terms, total) in grouped.items()]


def _hit_html(hit: Hit, system: str, res: SideBySide, tokenizer: Tokenizer) -> str:
    badge = ""
    if hit.label is not None:
        cls, title = LABEL_BADGE.get(hit.label, ("rel-1", f"label {hit.label}"))
        badge = f'<span class="badge {cls}" title="{title}">{hit.label}</span>'
    elsewhere = " · ".join(f"{esc(short(o))} {'#' + str(r) if r else NOT_RETRIEVED}"
                           for o, r in hit.ranks.items() if o != system)
    words = res.term_words  # each stem shown as the query word(s) it came from ("leaky", not "leaki"; "can't")
    why = " · ".join(f'<span title="{esc(" + ".join(terms))}">{esc(word)}</span> {v:.2f}'
                     for word, terms, v in typed_contributions(hit.bm25_terms, words))
    why = f'<div class="why">BM25 terms: {why}</div>' if why else ""
    lacked = ", ".join(word for word, _ in typed_terms(hit.missing_terms, words))
    missing = f'<div class="missing">no exact match: {esc(lacked)}</div>' if hit.missing_terms and res.terms else ""
    own = _system_terms_html(hit, system) + score_why_html(hit.score_why, full_text(hit.doc_id, hit.title, hit.text),
                                                           words)
    return (f'<div class="hit"><div class="hit-head"><span class="rank">{hit.rank}</span>{badge}'
            f'<span class="title">{esc(hit.title or hit.doc_id)}</span>'
            f'<span class="score">{hit.score:.3f}</span></div>'
            f'<div class="meta">{esc(hit.doc_id)}{f" · also: {elsewhere}" if elsewhere else ""}</div>'
            f'<div class="snippet">{highlight(hit.text, tokenizer, set(res.terms))}</div>{why}{own}{missing}</div>')


def _system_terms_html(hit: Hit, system: str) -> str:
    """The ranking system's own account of the score (SPLADE: the terms and their w(q)·w(d); RM3: the
    expanded query's terms and their weighted BM25); an expansion, of the query or of the document, is
    shown apart."""
    return f'<div class="why">{esc(short(system))} terms: {term_scores_html(hit.system_terms)}</div>' \
        if hit.system_terms else ""


def term_scores_html(terms) -> str:
    """A system's term contributions, "term 1.23 · …", each marked by its kind (``TermScore``, ``KIND_ATTRS``)."""
    return " · ".join(f'<span{KIND_ATTRS[t.kind]}>{esc(t.term)}</span> {t.score:.2f}' for t in terms)


def _labelled_table(res: SideBySide) -> str:
    rows = "".join(
        f"<tr><td>{esc(r['doc_id'])}</td><td>{esc(r['title'] or '')}</td><td>{r['label']}</td>"
        + "".join(f"<td>{r['ranks'][s] or NOT_RETRIEVED}</td>" for s in res.systems) + "</tr>"
        for r in res.relevant)
    return (f'<details open class="judged"><summary>Labelled documents for {esc(res.query_id)} '
            f'({esc(res.split or "")} split): rank under each system</summary>'
            f'<table><tr><th>doc</th><th>title</th><th>label</th>'
            + "".join(f"<th>{esc(label(s))}</th>" for s in res.systems) + f"</tr>{rows}</table></details>")


def _waiting_text() -> str:
    """What a column says while the index it needs is being built: how far that build is, the banner
    says (``BANNER_FOLLOWS``); the column is filled when it is done (the shell searches again)."""
    return f"Waiting for its index, still being built ({BANNER_FOLLOWS}): this column fills in when it is done."


def side_by_side_html(res: SideBySide, tokenizer: Tokenizer) -> str:
    """The columns (one per system) and, for a labelled query, the labelled documents' ranks."""
    cols = []
    for system, hits in res.systems.items():
        head = esc(label(system))
        metric = res.per_query_metrics.get(system, {})
        if metric:
            head += f' <span class="qmetric">nDCG@10 {metric.get("ndcg@10", 0):.3f}</span>'
        cards = "".join(_hit_html(h, system, res, tokenizer) for h in hits) or "<p>no document matches</p>"
        cols.append(f'<div class="col"><h3>{head}</h3>{cards}</div>')
    for system in res.waiting:
        cols.append(f'<div class="col waiting"><h3>{esc(label(system))}</h3><p>{_waiting_text()}</p></div>')
    summary = _labelled_table(res) if res.query_id else ""
    agree = (f'<p class="disagree">The systems disagree on this query: {res.disagreement:.2f} '
             f"(1 − mean rank-biased overlap of their top {max((len(h) for h in res.systems.values()), default=0)})</p>"
             if len(res.systems) > 1 else "")
    if HYBRID in res.systems and is_identifier_lookup(res.query):
        agree += f"<p>This query looks up an identifier {esc(identifier_lookup_why('it'))}.</p>"
    return f'{agree}<div class="sbs" style="--columns: {max(1, len(cols))}">{"".join(cols)}</div>{summary}'
