"""User-supplied text made inert, for everything the browser renders: the one helper every HTML
fragment, Markdown line, notice and figure label RankScope builds passes user text through.

Everything a user supplies is text: document and query ids and texts, titles, run names and TREC
tags, data set, split and file names, judge names, model names, and the error messages that quote
them. ``text`` writes each character that means something to HTML (``& < > " '``), to Markdown
(emphasis, links and images, code spans, tables, headings, escapes, LaTeX), or that starts an
automatic link (``:`` of ``http://``, ``@`` of an address, ``.`` of ``www.``) as a numeric character
reference. Every renderer the app uses decodes those back to the character and none of them reads
them as markup: the browser's HTML parser (``gr.HTML``, the offline report), Gradio's Markdown
(marked, then DOMPurify) and its notices (sanitized HTML), and plotly's labels (which decode
numeric references, but not ``&quot;``). So one function serves every place, and a name such as
``<img src=x onerror=alert(1)>`` or ``![x](http://host/p.png)`` shows as those characters.

``code`` puts user text in ``<code>``: a Markdown code span (backticks) would show the character
references as typed and let a backtick in the text end the span. ``label`` is for plotly's labels
(titles, legends, axis ticks, hover text), which read no Markdown: only ``& < >`` start markup
there (its few tags and its entities), so only they are written as references, and a label with
none of them reaches an API client's figure JSON unchanged.
"""
from __future__ import annotations

# HTML's five, Markdown's punctuation (CommonMark + GFM tables and strikethrough, Gradio's $ LaTeX),
# and what starts an automatic link (scheme colon, e-mail at, www dot)
SPECIAL = "&<>\"'`*_[](){}!#|~\\$:@.+-=^%"
_TABLE = {ord(c): f"&#{ord(c)};" for c in SPECIAL}
_LABEL = {ord(c): f"&#{ord(c)};" for c in "&<>"}


def text(value: object) -> str:
    """``value`` as text that renders as exactly its characters in HTML, Markdown and plotly."""
    return str(value).translate(_TABLE)


def code(value: object) -> str:
    """``value`` as inline code (``<code>``), inert like ``text``."""
    return f"<code>{text(value)}</code>"


def label(value: object) -> str:
    """``value`` for a plotly label: its ``& < >`` as references, so plotly draws no tag or link."""
    return str(value).translate(_LABEL)
