"""What ``python -m retrieval check`` writes: the terminal report, JUnit XML (one test case per
system; a regression is a failure, a drop too large to ignore but not significant is skipped with
its reason — a failure with ``strict``) and a Markdown summary a CI system can show (GitHub's job
summary, GitLab's and Jenkins' test reports read the XML). Each system is in one of five states
(``SystemCheck.state``): ok, regressed, dropped but not significantly (too few queries to tell), not
enough of its results judged (labels judged in the app, today's judged@10 below the threshold: how
many more to judge), or new; on labels judged in the app each verdict has both runs' judged@10
beside it. The queries that dropped most are named with their text. User-supplied names and texts in the
Markdown pass through the library's Markdown writer (``markdown``: the source stays readable);
ElementTree escapes the XML, and every attribute and text the XML holds is first made a character
XML 1.0 allows (``xml_text``: a name or query may hold U+FFFE or a NUL, which no XML parser
accepts), so the file always parses; it is parsed back before it is returned."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from retrieval.evaluation.measures import Comparison
from retrieval.evaluation.metrics import interval_text
from retrieval.judging.coverage import Coverage
from retrieval.systems import label
from retrieval.tracking.snapshots import CheckResult, Moved, SystemCheck

# XML 1.0 §2.2 Char: tab, LF, CR, U+0020–U+D7FF, U+E000–U+FFFD, U+10000–U+10FFFF; the rest cannot be written
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # no UTF-8 terminal can print one: written as its escape
DROPPED = "dropped, not significant — too few queries to tell"
UNJUDGED = "not enough of its results judged"
QUERY_WIDTH = 80  # characters of a query's text shown beside its id


def short(query: str, width: int = QUERY_WIDTH) -> str:
    """A query's text on one line, cut at a word boundary to at most ``width`` characters ("…" where cut)."""
    one = re.sub(r"\s+", " ", query).strip()
    if len(one) <= width:
        return one
    cut = one[:width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip() + "…"


def _today(s: SystemCheck) -> Coverage:
    """Today's judged@10 of a system held back for too few judged results (``SystemCheck.unjudged``)."""
    now = s.coverage[1]
    if now is None:
        raise ValueError(f"{label(s.system)} has no judged@10 today, so no shortfall")
    return now


def _named(query_id: str, query: str) -> str:
    return f"{query_id} “{short(query)}”" if query else query_id


def verdict(s: SystemCheck, result: CheckResult) -> str:
    if s.comparison is None:
        return "new: the baseline has no run of this system" + (f"; judged@10 {judged(s.coverage[1])}" if s.gated
                                                               else "")
    c = s.comparison
    before, now = s.intervals or (None, None)
    means = f" ({c.mean_a:.4f} {interval_text(before)} → {c.mean_b:.4f} {interval_text(now)})"
    return (_verdict(s, c) + means + (f"; judged@10 {judged_change(s)}" if s.gated or s.favoured else "")
            + favoured_note(s))


def favoured_note(s: SystemCheck) -> str:
    """Why a system's check is on nDCG'@10 (``SystemCheck.favoured``): "; on nDCG'@10: the data set's judged
    pool covers the baseline's top 10 better than today's beyond noise, so nDCG@10 would favour it by the
    documents nobody judged"; "" where it is on the metric asked."""
    if not s.favoured:
        return ""
    which, other = ("the baseline's", "today's") if s.favoured == "baseline" else ("today's", "the baseline's")
    return (f"; on nDCG'@10: the data set's judged pool covers {which} top 10 better than {other} beyond noise, so "
            f"nDCG@10 would favour {'the baseline' if s.favoured == 'baseline' else 'today'} by the documents nobody "
            "judged")


def judged(cov: Coverage | None) -> str:
    """One run's judged@10 on the compared queries: "0.80 [0.713, 0.874]" ("—" without it)."""
    if cov is None or not cov.queries:
        return "—"
    return f"{cov.judged:.2f} {interval_text(cov.interval)}".rstrip()


def judged_change(s: SystemCheck) -> str:
    """The baseline run's judged@10 and today's: "1.00 → 0.80 [0.713, 0.874]"."""
    before, now = s.coverage
    return f"{judged(before)} → {judged(now)}"


def shortfall(s: SystemCheck) -> str:
    """Why an ``unjudged`` system has no verdict: "⚠ not enough of its results judged (judged@10 0.80
    [0.713, 0.874]) — judge 47 more of its top-10 documents, the unjudged ones on the judged queries"."""
    now = _today(s)
    return (f"⚠ {UNJUDGED} (judged@10 {judged(now)}) — judge {now.to_threshold:,} more of its top-10 documents, "
            "the unjudged ones on the judged queries")


def _verdict(s: SystemCheck, c: Comparison) -> str:
    change = f"{c.delta:+.4f} {interval_text(c.interval)}, p = {c.p_value:.4f}"
    if s.unjudged:
        return f"{shortfall(s)}; no verdict on {change}"
    if s.regressed:
        return f"REGRESSED: {change}"
    if s.dropped:
        return f"⚠ {DROPPED}: {change}"
    return f"ok: {change}"


def warnings(result: CheckResult) -> list[str]:
    out = []
    if result.labels_changed:
        out.append(f"the {result.split} labels changed since {result.baseline.name!r}: both sides are evaluated on "
                   "today's labels")
    if result.corpus_changed:
        out.append(f"the corpus changed since {result.baseline.name!r}: its lists may name documents that are gone")
    return out


def _leaves(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changed_params(s: SystemCheck) -> str:
    """The system's parameters that differ from the baseline's ("bm25.b 0.4 → 0.0; lambda 0.8 → 0.7")."""
    if not s.params_before:
        return ""
    before, now = _leaves(s.params_before), _leaves(s.params_now)
    return "; ".join(f"{k} {before.get(k)!r} → {now.get(k)!r}" for k in sorted(set(before) | set(now))
                     if before.get(k) != now.get(k))


def _dropped_most(s: SystemCheck, shown: int) -> list[Moved]:
    return [m for m in s.moved if m.now < m.before][:shown]


def tally(result: CheckResult, strict: bool = False) -> str:
    """"1 of 3 system(s) regressed: BM25; 1 dropped, not significant — too few queries to tell: Dense;
    1 not enough of its results judged: Hybrid (judge 24 more)"."""
    regressed, dropped, unjudged = result.regressed, result.dropped, result.unjudged
    line = f"{len(regressed)} of {len(result.systems)} system(s) regressed" + \
        (": " + ", ".join(label(s.system) for s in regressed) if regressed else "")
    if dropped:
        line += f"; {len(dropped)} {DROPPED}: " + ", ".join(label(s.system) for s in dropped)
    if unjudged:
        line += f"; {len(unjudged)} {UNJUDGED}: " + ", ".join(
            f"{label(s.system)} (judge {_today(s).to_threshold:,} more)" for s in unjudged)
    if dropped or unjudged:
        line += " (a failure with --strict)" if strict else " (not a failure; --strict makes it one)"
    return line


def text_report(result: CheckResult, shown: int = 10, strict: bool = False) -> str:
    """What the terminal shows; a lone surrogate (a name decoded from a file name's bytes) as ``\\uXXXX``."""
    snap = result.baseline
    lines = [f"baseline {snap.name!r} ({snap.dataset_name}, {snap.split}; max drop {result.max_drop:g} "
             f"{result.metric}, significance p < 0.05)"]
    lines += [f"warning: {w}" for w in warnings(result)]
    for s in result.systems:
        lines.append(f"{label(s.system)}: {verdict(s, result)}")
        if changed := changed_params(s):
            lines.append(f"  changed: {changed}")
        if s.regressed or s.dropped or s.unjudged:
            lines.append(f"  the queries that dropped most ({result.metric} baseline → now; top 5 of each):")
            for m in _dropped_most(s, shown):
                lines.append(f"  {_named(m.query_id, m.query)}: {m.before:.4f} → {m.now:.4f}")
                for rank in range(5):
                    left = m.before_top[rank] if rank < len(m.before_top) else ""
                    right = m.now_top[rank] if rank < len(m.now_top) else ""
                    lines.append(f"      {rank + 1:>2}. {left:<32} {right}")
    lines.append(tally(result, strict))
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04X}", "\n".join(lines))  # a name from a file name's bytes


def xml_text(value: str) -> str:
    """``value`` with each character XML 1.0 forbids (C0 controls but tab, LF and CR; U+FFFE, U+FFFF;
    a lone surrogate) written as its escape ``\\uXXXX``, visible, so the XML parses and shows it."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04X}", value)


def _clean(element: ET.Element) -> None:
    for el in element.iter():
        el.attrib = {xml_text(k): xml_text(v) for k, v in el.attrib.items()}
        el.text = None if el.text is None else xml_text(el.text)
        el.tail = None if el.tail is None else xml_text(el.tail)


def junit_xml(result: CheckResult, strict: bool = False) -> bytes:
    """One test case per system: a regression is a ``<failure>``; a drop beyond ``max_drop`` that is
    not significant, or a top 10 not judged enough for a verdict, is ``<skipped>`` with its reason (a
    ``<failure>`` with ``strict``); the queries that dropped most, with their text, are the failure's
    text or the case's ``<system-out>``."""
    failing = [s.regressed or (strict and (s.dropped or s.unjudged)) for s in result.systems]
    skipped = [not fail and (s.comparison is None or s.dropped or s.unjudged)
               for s, fail in zip(result.systems, failing)]
    suite = ET.Element("testsuite", name=f"rankscope check against {result.baseline.name}",
                       tests=str(len(result.systems)), failures=str(sum(failing)), skipped=str(sum(skipped)))
    for s, fail, skip in zip(result.systems, failing, skipped):
        case = ET.SubElement(suite, "testcase", classname=f"rankscope.{result.metric}", name=s.system)
        queries = "\n".join(f"{_named(m.query_id, m.query)}: {m.before:.4f} -> {m.now:.4f}"
                            for m in s.moved if m.now < m.before)
        if fail:
            failure = ET.SubElement(case, "failure", message=verdict(s, result))
            failure.text = queries
        elif skip:
            ET.SubElement(case, "skipped", message=verdict(s, result))
            if s.dropped or s.unjudged:
                ET.SubElement(case, "system-out").text = queries
    _clean(suite)
    out: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    ET.fromstring(out)  # parsed back: a ParseError here is a bug, never a file a CI system cannot read
    return out


def headline(result: CheckResult, strict: bool = False) -> str:
    """"❌ regression"; else ⚠️ (❌ with ``strict``) naming a drop not significant or a top 10 not
    judged enough; "✅ no regression" only when every system has a verdict and none dropped."""
    if result.regressed:
        return "❌ regression"
    flagged = [w for w, found in ((DROPPED, result.dropped), (UNJUDGED, result.unjudged)) if found]
    if flagged:
        return f"{'❌' if strict else '⚠️'} {'; '.join(flagged)}"
    return "✅ no regression"


def _word(s: SystemCheck) -> str:
    """The Markdown table's verdict cell."""
    if s.unjudged:
        return f"⚠️ {UNJUDGED}: judge {_today(s).to_threshold:,} more of its top-10 documents"
    return {"regressed": "**regressed**", "dropped": f"⚠️ {DROPPED}", "ok": "ok"}[s.state]


def markdown_summary(result: CheckResult, shown: int = 10, strict: bool = False) -> str:
    from retrieval.files.markdown import code, text

    snap = result.baseline
    lines = [f"### RankScope check: {headline(result, strict)}", "",
             f"Against the baseline {code(snap.name)} ({text(snap.dataset_name)}, split {text(result.split)}): "
             f"a system regresses when its mean {result.metric} drops by more than {result.max_drop:g} and the "
             "drop is significant (paired permutation test, p < 0.05; Δ's 95% interval is the shifts that test "
             "does not reject, so it excludes 0 exactly when p < 0.05). A larger drop that is not significant "
             f"is flagged ⚠️: these queries are too few to tell it from chance"
             f"{' (it fails: --strict)' if strict else ''}."
             + (" The labels were judged in the app: a system whose top 10 today is not judged on every judged "
                "query (judged@10 below 1) gets no verdict, ⚠️ with how many more of its documents to judge."
                if result.gated else ""), ""]
    lines += [f"> ⚠️ {text(w)}" for w in warnings(result)]
    gated = result.gated
    lines += ["| system | baseline [95%] | now [95%] | Δ [95%] | p |" + (" judged@10 [95%] |" if gated else "")
              + " verdict |", "|---|---:|---:|---:|---:|" + ("---|" if gated else "") + "---|"]
    for s in result.systems:
        c = s.comparison
        covered = f" {judged_change(s)} |" if gated else ""
        if c is None:
            lines.append(f"| {text(label(s.system))} | — | — | — | — |{covered} new |")
            continue
        before, now = s.intervals or (None, None)
        lines.append(f"| {text(label(s.system))} | {c.mean_a:.4f} {interval_text(before)} | "
                     f"{c.mean_b:.4f} {interval_text(now)} | {c.delta:+.4f} "
                     f"{interval_text(c.interval)} | {c.p_value:.4f} |{covered} {_word(s)} |")
    for s in [s for s in result.systems if s.regressed or s.dropped or s.unjudged]:
        lines += ["", f"**{text(label(s.system))}**: the queries that dropped most ({result.metric})", "",
                  "| query | text | baseline | now | baseline top 3 | now top 3 |", "|---|---|---:|---:|---|---|"]
        for m in _dropped_most(s, shown):
            tops = [", ".join(code(d) for d in top[:3]) for top in (m.before_top, m.now_top)]
            lines.append(f"| {code(m.query_id)} | {text(short(m.query))} | {m.before:.4f} | {m.now:.4f} | "
                         f"{tops[0]} | {tops[1]} |")
    return "\n".join(lines) + "\n"
