"""What ``python -m retrieval check`` writes: the terminal report, JUnit XML (one test case per
system; a regression is a failure) and a Markdown summary a CI system can show (GitHub's job
summary, GitLab's and Jenkins' test reports read the XML). User-supplied names in the Markdown pass
through the app's one escaping helper; ElementTree escapes the XML."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from .metrics import interval_text
from .snapshots import CheckResult, SystemCheck
from .systems import label


def verdict(s: SystemCheck, result: CheckResult) -> str:
    if s.comparison is None:
        return "new: the baseline has no run of this system"
    c = s.comparison
    means = f" ({c.mean_a:.4f} {interval_text(s.intervals[0])} → {c.mean_b:.4f} {interval_text(s.intervals[1])})"
    return _verdict(s, result, c) + means


def _verdict(s: SystemCheck, result: CheckResult, c) -> str:
    if s.regressed:
        return f"REGRESSED: {c.delta:+.4f} {interval_text(c.interval)}, p = {c.p_value:.4f}"
    if c.delta < -result.max_drop:
        return f"dropped {c.delta:+.4f} {interval_text(c.interval)}, but not significantly (p = {c.p_value:.4f})"
    return f"ok: {c.delta:+.4f} {interval_text(c.interval)}, p = {c.p_value:.4f}"


def warnings(result: CheckResult) -> list[str]:
    out = []
    if result.labels_changed:
        out.append(f"the {result.split} labels changed since {result.baseline.name!r}: both sides are evaluated on "
                   "today's labels")
    if result.corpus_changed:
        out.append(f"the corpus changed since {result.baseline.name!r}: its lists may name documents that are gone")
    return out


def _leaves(params: dict, prefix: str = "") -> dict:
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


def text_report(result: CheckResult, shown: int = 10) -> str:
    snap = result.baseline
    lines = [f"baseline {snap.name!r} ({snap.dataset_name}, {snap.split}; max drop {result.max_drop:g} "
             f"{result.metric}, significance p < 0.05)"]
    lines += [f"warning: {w}" for w in warnings(result)]
    for s in result.systems:
        lines.append(f"{label(s.system)}: {verdict(s, result)}")
        if changed := changed_params(s):
            lines.append(f"  changed: {changed}")
        if s.regressed:
            lines.append(f"  the queries that dropped most ({result.metric} baseline → now; top 5 of each):")
            for m in [m for m in s.moved if m.now < m.before][:shown]:
                lines.append(f"  {m.query_id}: {m.before:.4f} → {m.now:.4f}")
                for rank in range(5):
                    left = m.before_top[rank] if rank < len(m.before_top) else ""
                    right = m.now_top[rank] if rank < len(m.now_top) else ""
                    lines.append(f"      {rank + 1:>2}. {left:<32} {right}")
    regressed = result.regressed
    lines.append(f"{len(regressed)} of {len(result.systems)} system(s) regressed" +
                 (": " + ", ".join(label(s.system) for s in regressed) if regressed else ""))
    return "\n".join(lines)


def junit_xml(result: CheckResult) -> bytes:
    suite = ET.Element("testsuite", name=f"rankscope check against {result.baseline.name}",
                       tests=str(len(result.systems)), failures=str(len(result.regressed)))
    for s in result.systems:
        case = ET.SubElement(suite, "testcase", classname=f"rankscope.{result.metric}", name=s.system)
        if s.regressed:
            failure = ET.SubElement(case, "failure", message=verdict(s, result))
            failure.text = "\n".join(f"{m.query_id}: {m.before:.4f} -> {m.now:.4f}"
                                     for m in s.moved if m.now < m.before)
        elif s.comparison is None:
            ET.SubElement(case, "skipped", message=verdict(s, result))
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="utf-8", xml_declaration=True)


def markdown_summary(result: CheckResult, shown: int = 10) -> str:
    from ui.present.escape import code, text

    snap = result.baseline
    regressed = result.regressed
    head = "❌ regression" if regressed else "✅ no regression"
    lines = [f"### RankScope check: {head}", "",
             f"Against the baseline {code(snap.name)} ({text(snap.dataset_name)}, split {text(result.split)}): "
             f"a system regresses when its mean {result.metric} drops by more than {result.max_drop:g} and the "
             "drop is significant (paired permutation test, p < 0.05).", ""]
    lines += [f"> ⚠️ {text(w)}" for w in warnings(result)]
    lines += ["| system | baseline [95%] | now [95%] | Δ [95%] | p | verdict |", "|---|---:|---:|---:|---:|---|"]
    for s in result.systems:
        c = s.comparison
        if c is None:
            lines.append(f"| {text(label(s.system))} | — | — | — | — | new |")
            continue
        lines.append(f"| {text(label(s.system))} | {c.mean_a:.4f} {interval_text(s.intervals[0])} | "
                     f"{c.mean_b:.4f} {interval_text(s.intervals[1])} | {c.delta:+.4f} "
                     f"{interval_text(c.interval)} | {c.p_value:.4f} | "
                     f"{'**regressed**' if s.regressed else 'ok'} |")
    for s in regressed:
        lines += ["", f"**{text(label(s.system))}**: the queries that dropped most ({result.metric})", "",
                  "| query | baseline | now | baseline top 3 | now top 3 |", "|---|---:|---:|---|---|"]
        for m in [m for m in s.moved if m.now < m.before][:shown]:
            tops = [", ".join(code(d) for d in top[:3]) for top in (m.before_top, m.now_top)]
            lines.append(f"| {code(m.query_id)} | {m.before:.4f} | {m.now:.4f} | {tops[0]} | {tops[1]} |")
    return "\n".join(lines) + "\n"
