"""Table cells: the library's rows written as the app shows them (every metric through
``retrieval.evaluation.metrics.cell``: 4 decimals, the 95% interval and the significance mark), and the
comparisons of systems in words (``retrieval.evaluation.metrics.conclusion``)."""
from __future__ import annotations

from retrieval.evaluation.metrics import (
    METRICS,
    SIGNIFICANCE_LEVEL,
    SIGNIFICANT,
    SUMMARY_METRICS,
    cell,
    conclusion,
    interval_text,
    p_text,
    significance_mark,
)
from retrieval.judging.labels import JUDGED
from retrieval.systems import DENSE, HYBRID, short
from retrieval.systems.clear_lambda import shown
from ui.present.report import Summary


def gate_rule(depth: int = 10) -> str:
    """The coverage gate in words (``coverage.MIN_JUDGED_AT_10``, at the depth it reads)."""
    return f"a verdict needs each system's top {depth} judged on every judged query"


GATE_RULE = gate_rule()


def table_cells(rows: list[dict], metrics=METRICS) -> list[list[str]]:
    """Rows of ``metric_tables.metrics_table`` as text cells: label, then "0.6804 [0.652, 0.709]†" per metric;
    a metric the judgments cannot measure (it reads deeper than the pool judged in the app,
    ``row["measurable"]``) is ``not_measurable``'s "n/m (pool depth 10)", not its value."""
    return [[r["label"], *(cell(r["metrics"][m], r["marks"].get(m, ""), r.get("intervals", {}).get(m))
                           if r.get("measurable", {}).get(m, True) else not_measurable(r.get("pool_depth"))
                           for m in metrics)] for r in rows]


def not_measurable(depth: int | None) -> str:
    """The cell of a metric that reads deeper than the judged pool: "n/m (pool depth 10)" — not
    measurable on these judgments (every document below the pool is unjudged)."""
    return f"n/m (pool depth {depth})" if depth is not None else "n/m"


def report_summary(rows: list[dict], compared: list[dict], metrics=METRICS, segments: dict | None = None,
                   covered: dict | None = None, pool=None) -> Summary:
    """The report's systems section from ``metric_tables.metrics_table`` rows, ``metric_tables.comparisons`` and
    (``segment_cells``) the metrics by kind of query; ``covered`` (``metric_tables.table_coverage``) puts
    each system's judged@10 beside the verdicts; ``pool`` (``metric_tables.judged_pool``, on labels
    judged in the app): the judged pool's verdict and its comparisons on success@10 replace those on
    nDCG@10, which are relative to the relevant documents found so far there."""
    n = max((r.get("queries", 0) for r in rows), default=0)
    depth = next((r["pool_depth"] for r in rows if r.get("pool_depth") is not None), None)
    deep = (f" n/m: not measurable on these judgments, which were pooled to depth {depth}: the metric reads "
            "deeper, where every document is unjudged." if depth is not None else "")
    if pool is not None:
        deep += (" On labels judged in the app nDCG, recall, MAP and bpref are relative to the relevant documents "
                 "found so far: not a verdict.")
    said = ["".join(pool_headline(pool)), *pool_conclusion_lines(pool)] if pool is not None else \
        conclusion_lines(compared)
    return Summary(["system", *metrics], table_cells(rows, metrics), said, segments,
                   f"Means over the {n} labelled queries with their 95% intervals (bootstrap over queries); "
                   f"{SIGNIFICANT} p < {SIGNIFICANCE_LEVEL:g} against BM25 (paired permutation test). Unjudged "
                   f"documents count as not relevant.{deep}", coverage_line(covered or {}))


def segment_cells(rows: list, labels: list[str]) -> dict:
    """``query_kinds.segment_table`` as a table: kind, segment, queries, each system's mean with its 95%
    interval, then the significant differences there ("Dense below Hybrid by 0.105 [0.050, 0.160],
    adjusted p = 0.001"), the segments with one first."""
    data = []
    for r in rows:
        worse = "; ".join(f"{d.worse} below {d.better} by {d.comparison.delta:.3f} "
                          f"{interval_text(d.comparison.interval)}, adjusted p = {d.adjusted_p:.3g}"
                          for d in r.differences)
        data.append([r.kind, r.value, r.queries, *(cell(r.means[lb], "", r.intervals[lb]) for lb in labels), worse])
    return {"headers": segment_headers(labels), "data": data}


def segment_headers(labels: list[str]) -> list[str]:
    """The columns of ``segment_cells``'s table for the systems ``labels``: what Evaluate shows before
    the table is computed."""
    return ["kind", "segment", "queries", *labels, "significantly worse (Benjamini–Hochberg)"]


def conclusion_lines(rows: list[dict]) -> list[str]:
    """``metric_tables.comparisons`` in words, one line per pair (the separable ones first); a pair the
    coverage gate holds back (``row["verdict"]``, ``coverage.Verdict``) says which system's results
    are not judged enough and how many more to judge, never who wins."""
    return [favoured_text(r["verdict"]) if r.get("verdict") is not None and r["verdict"].favoured else
            conclusion(r["a"], r["b"], r["comparison"]) + judged_beside(r.get("verdict"))
            if r.get("verdict") is None or r["verdict"].may_conclude
            else f"{r['b']} and {r['a']}: no verdict, {shortfall_text(r['verdict'])}" for r in rows]


def judged_beside(verdict) -> str:
    """Both systems' judged@10 after a verdict on labels that judge a pool (they list non-relevant
    documents, or were judged in the app): "; judged@10 BM25 100%, Dense 64%"; "" otherwise (a data
    set's relevant-only labels, where it measures the systems, not the labels)."""
    covs = [c for c in (verdict.coverage if verdict is not None else ()) if c is not None and c.queries]
    if not covs or not any(c.gated or c.pooled for c in covs):
        return ""
    return "; judged@10 " + ", ".join(f"{c.system} {c.judged:.0%}" for c in covs)


def favoured_text(verdict) -> str:
    """A pair whose labels cover one system better beyond noise (``coverage.skew``), in words: the
    comparison on nDCG'@10 (unjudged documents left out), and why not nDCG@10's — "the labels cover
    BM25's top 10 better (judged@10 100% against 41%, Δ 0.59 [0.52, 0.66]): nDCG@10 would favour it"."""
    a, b = verdict.a, verdict.b
    skewed = verdict.skew
    covs = {c.system: c for c in verdict.coverage if c is not None}
    low, high = sorted((covs[a], covs[b]), key=lambda c: c.judged)
    why = (f"the labels cover {verdict.favoured}'s top 10 better (judged@10 {high.judged:.0%} against "
           f"{low.judged:.0%} for {low.system}, Δ {abs(skewed.delta):.2f} {interval_text(skewed.interval)}): "
           f"nDCG@10 would favour {verdict.favoured} by the documents nobody judged for the other")
    cond = verdict.condensed
    if not verdict.may_conclude or cond is None:
        return f"{b} and {a}: no verdict — {why}"
    return f"{conclusion(a, b, cond)}; nDCG'@10 leaves unjudged documents out — {why}"


def percent(interval) -> str:
    """A share's 95% interval in percent, "[35%, 47%]" ("" when undefined: one query)."""
    return f"[{interval.low:.0%}, {interval.high:.0%}]" if interval.defined else ""


def shortfall_text(verdict) -> str:
    """Why a pair the coverage gate holds back has no verdict (``coverage.Verdict.lacking``): "not
    enough of Learned sparse (SPLADE)'s results judged (judged@10 6% [2%, 11%]) — judge 160 more of its
    top-10 documents, the unjudged ones on the judged queries", then the pair on nDCG'@10 (unjudged
    documents left out), which is shown beside and does not lift the gate."""
    parts = [f"not enough of {s.system}'s results judged (judged@10 {s.judged:.0%} {percent(s.interval)}".rstrip()
             + f") — judge {s.to_threshold:,} more of its top-10 documents, the unjudged ones on the judged queries"
             for s in verdict.lacking]
    cond = verdict.condensed
    beside = (f"; on nDCG'@10, which leaves unjudged documents out, Δ {cond.delta:+.3f} "
              f"{interval_text(cond.interval)}".rstrip() if cond is not None and cond.queries >= 2 else "")
    return "; ".join(parts) + beside


def coverage_line(covered: dict) -> str:
    """Each system's judged@10 with its interval (``coverage.coverages``), and whether the labels
    came from judging in the app (then verdicts need ``GATE_RULE``): "" without any."""
    if not covered:
        return ""
    gated = any(c.gated for c in covered.values())
    shares = ", ".join(f"{name} {c.judged:.0%} {percent(c.interval)}".rstrip() for name, c in covered.items()
                       if c.queries)
    if not shares:
        return ""
    pool = any(c.pooled for c in covered.values())
    rule = (f"labels judged in the app: {GATE_RULE}" if gated
            else "the data set's own labels, a judged pool (they list non-relevant documents too): where they cover "
                 "one system's top 10 better beyond noise, its comparisons are made on nDCG'@10" if pool
            else "the data set's own labels: an unlisted document is not relevant by their convention")
    return f"Judged@10 ({rule}): {shares}."


def rounded(value, digits: int = 4):
    """A number cell: floats rounded to ``digits``, anything else as it is."""
    return round(value, digits) if isinstance(value, float) else value


def training_result_rows(result: dict, metrics=SUMMARY_METRICS) -> list[list[str]]:
    """A finished job's base and fine-tuned metrics, each with its 95% interval: [encoder, system,
    *metrics], † on the fine-tuned rows where the paired permutation test against the base is
    significant, then per system the difference "fine-tuned − base" with its paired interval; a
    hybrid row names the λ it was scored at (each encoder's own, ``CLEAR.lambda_for``), any other
    system the weights it chose (``SystemBase.weights``: the three-way fusion's μ, each sparse model's own)."""
    pvalues = result.get("significance") or {}
    rows = []
    for encoder, systems in (result.get("metrics") or {}).items():
        for system, values in systems.items():
            marks = [significance_mark(pvalues.get(system, {}).get(m, 1.0)) if encoder == "fine-tuned" else ""
                     for m in metrics]
            bounds = values.get("intervals") or {}
            chosen = {"λ": values.get("lambda"), **(values.get("weights") or {})}
            weights = [f"{weight} {shown(value)}" for weight, value in chosen.items()
                       if isinstance(value, int | float) and not isinstance(value, bool)]
            name = f"{system} ({', '.join(weights)})" if weights else system
            rows.append([encoder, name, *(cell(values.get(m), mark, bounds.get(m)) for m, mark in zip(metrics, marks))])
    for system, diffs in (result.get("differences") or {}).items():
        rows.append(["fine-tuned − base", system,
                     *(cell_signed(diffs[m]["delta"], diffs[m]["interval"]) if m in diffs else "—" for m in metrics)])
    return rows


def cell_signed(delta: float, interval) -> str:
    """A difference with its sign and interval: "+0.0123 [-0.010, 0.034]"."""
    return f"{delta:+.4f} {interval_text(interval)}".rstrip()


def _compared(result: dict) -> tuple[str, str, dict, dict]:
    """The two systems a finished job compared base against fine-tuned on (dense and hybrid for an
    encoder, SPLADE and the three-way fusion for a learned sparse model), with their per-query scores."""
    pq = result.get("per_query") or {}
    first, second = ([*pq, DENSE, HYBRID] if pq else [DENSE, HYBRID])[:2]
    return first, second, pq.get(first, {}), pq.get(second, {})


def per_query_change_headers(result: dict) -> list[str]:
    """The per-query table's columns: each compared system's base, fine-tuned and change."""
    first, second, _, _ = _compared(result)
    return ["query", "text", *(f"{short(s)} {what}" for s in (first,) for what in ("base", "fine-tuned")),
            f"Δ {short(first)}", *(f"{short(second)} {what}" for what in ("base", "fine-tuned")), f"Δ {short(second)}"]


def per_query_change_rows(result: dict, queries: dict[str, str]) -> list[list]:
    """The evaluated queries whose nDCG@10 fine-tuning changed (on either compared system: dense and
    hybrid, or SPLADE and the three-way fusion), before and after, with the changes, biggest gains of
    the second (the fusion) first; a query scored alike by both models is left out (when the
    held-out check kept the base, every query)."""
    _, _, one, two = _compared(result)
    rows = []
    for q in sorted(set(one) | set(two)):
        d, h = one.get(q, [0.0, 0.0]), two.get(q, [0.0, 0.0])
        if d[0] == d[1] and h[0] == h[1]:
            continue
        rows.append([q, queries.get(q, "")[:80], d[0], d[1], round(d[1] - d[0], 4), h[0], h[1], round(h[1] - h[0], 4)])
    return sorted(rows, key=lambda r: (-r[7], -r[4], r[0]))


def per_query_change_caption(result: dict) -> str:
    """What the per-query table lists: how many evaluated queries changed, how many of them the
    second compared system (the fusion) ranks better and worse; or that none changed, and why when
    the base model was kept."""
    _, second, one, two = _compared(result)
    evaluated = set(one) | set(two)
    changed = [q for q in evaluated if any(v[0] != v[1] for v in (one.get(q, [0, 0]), two.get(q, [0, 0])))]
    head = "Per query (nDCG@10 on the evaluated split)"
    if not evaluated:
        return f"{head}: nothing was evaluated."
    if not changed:
        kept = "the base is kept" in (result.get("verdict") or "")
        why = " — the held-out check kept the base model" if kept else ""
        return f"{head}: no query's score changed{why}."
    better = sum(two.get(q, [0, 0])[1] > two.get(q, [0, 0])[0] for q in changed)
    worse = sum(two.get(q, [0, 0])[1] < two.get(q, [0, 0])[0] for q in changed)
    return (f"{head}: {len(changed)} of {len(evaluated)} queries changed ({short(second)} better on {better}, worse "
            f"on {worse}); what fine-tuning fixed first, what it broke last. Unchanged queries are not listed.")


def headline_text(h, covered: dict | None = None, split: str = "", names: dict[str, str] | None = None) -> str:
    """``metric_tables.Headline`` as the one line Evaluate opens with (Markdown, escaped): who is best and
    by how much over the nearest rival with its interval and p, or why no system can be called the
    best yet; each named system's judged@10 beside (``covered``: ``metric_tables.table_coverage``)."""
    from ui.present.escape import text

    if h is None:
        return ""
    c = h.against["comparison"]
    other = h.against["a"] if h.against["b"] == h.best else h.against["b"]
    mean = cell(h.row["metrics"][h.metric], "", h.row.get("intervals", {}).get(h.metric))
    where = f" on {split}" if split else ""
    metric = (names or {}).get(h.metric, h.metric)
    judged = ", ".join(f"{n} {covered[n].judged:.0%}" for n in (h.best, other)
                       if covered and n in covered and covered[n].queries)
    judged = f"; judged@10 {judged}" if judged else ""
    basis = f"{c.queries} queries{judged}"
    if h.state == "coverage":  # the least covered system of the pair, in one line (the conclusions give the rest)
        s = min(h.against["verdict"].lacking, key=lambda x: x.judged)
        return (f"**No verdict yet{text(where)}:** not enough of {text(s.system)}'s results are judged (judged@10 "
                f"{s.judged:.0%}; {GATE_RULE}) — judge {s.to_threshold:,} more of its "
                f"top-10 documents to compare it with {text(other if s.system != other else h.best)}.")
    if h.state == "open":
        return (f"**No single best system yet{text(where)}:** {text(h.best)} leads on {text(metric)} with {mean}, "
                f"but {text(other)} is not separable from it (Δ {c.delta:+.3f} {text(interval_text(c.interval))}, "
                f"{text(p_text(c.p_value))}; {text(basis)}).")
    return (f"**{text(h.best)} is the best system{text(where)}:** {text(metric)} {mean}, ahead of the nearest, "
            f"{text(other)}, by {c.delta:.3f} {text(interval_text(c.interval))} ({text(p_text(c.p_value))}; "
            f"{text(basis)}).")


def glance_html(rows: list[dict], metrics, help_texts: dict[str, str], names: dict[str, str] | None = None) -> str:
    """The metrics table as Evaluate shows it first: the chosen ``metrics`` only, so it fits the
    page, each header explained on hover (``help_texts``), and a metric the judgments cannot
    measure written "n/m" with the reason on hover."""
    from ui.present.escape import text

    names = names or {}
    head = "".join(f'<th title="{text(help_texts.get(m, m))}">{text(names.get(m, m))} <span class="help">ⓘ</span></th>'
                   for m in metrics)
    deeper = "not measurable on these judgments: the metric reads deeper than the pool that was judged"
    body = []
    for cells in table_cells(rows, metrics):
        tds = "".join(f'<td title="{text(deeper if v.startswith("n/m") else help_texts.get(m, m))}">{text(v)}</td>'
                      for m, v in zip(metrics, cells[1:]))
        body.append(f"<tr><th scope=\"row\">{text(cells[0])}</th>{tds}</tr>")
    return (f'<table class="rs-glance"><thead><tr><th>system</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _share(count: int, total: int, interval=None) -> str:
    """"2 of 11 (18% [5%, 48%])"."""
    bounds = f" {percent(interval)}" if interval is not None and interval.defined else ""
    return f"{count:,} of {total:,} ({count / total:.0%}{bounds})" if total else "0 of 0"


def _range(low: int, high: int) -> str:
    """"2" when exact, else "2–4"."""
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def pool_success_line(pv) -> str:
    """Each system's success@k on the judged queries, the best first: "BM25 2 of 11 (18% [5%, 48%])";
    while its top k is not judged on every one, the range the pool still allows ("BM25 2–4 of 11")."""
    n = len(pv.queries)
    ranked = sorted(pv.scores.values(), key=lambda s: (-s.successes, -s.undecided, s.system))
    return ", ".join(f"{s.system} {_share(s.successes, n, s.success_interval)}" if s.exact else
                     f"{s.system} {_range(s.successes, s.successes + s.undecided)} of {n:,}" for s in ranked)


def pool_headline(pv, split: str = "") -> tuple[str, str]:
    """What the judged pool says (``pool_verdict.PoolVerdict``) as plain text, (the verdict, what
    follows it): while the pool of the judged queries is not whole, how many pairs are left to judge
    for exact figures and the ranges the pool allows so far; once it is, the count of queries every
    system fails on with its interval, the best system where success@k separates one, and each
    system's success rate. Evaluate's headline and the report's summary write it."""
    n, k = len(pv.queries), pv.k
    where = f" on {split}" if split and split != JUDGED else ""  # "judged queries on judged" says it twice
    names = len(pv.scores)
    rates = pool_success_line(pv)
    if not pv.complete:
        return (f"Provisional{where} — judge {len(pv.unjudged):,} more",
                f" (the unjudged top-{k} documents of the {names} systems on the {n:,} judged queries) for exact "
                f"figures. So far every system fails on {_range(pv.all_fail, pv.all_fail + pv.all_fail_undecided)} "
                f"of the {n:,} judged queries; success@{k} (a relevant document in the top {k}): {rates}.")
    if pv.everyone_fails:
        return (f"Every system fails on all {n:,} judged queries{where}:",
                f" none of the {names} systems has a relevant document in its top {k} on any of them (every "
                f"top-{k} document judged).")
    fails = (f"every system fails on {_share(pv.all_fail, n, pv.all_fail_interval)} judged queries"
             if pv.all_fail else f"on each of the {n:,} judged queries some system finds a relevant document")
    best = pv.best()
    if best is not None:
        a, b, c = min((t for t in pv.comparisons if best in t[:2]), key=lambda t: abs(t[2].delta))
        other = a if b == best else b
        return (f"{best} is the best system{where}",
                f" on success@{k}, ahead of the nearest, {other}, by {c.delta:.3f} {interval_text(c.interval)} "
                f"({p_text(c.p_value)}; {n:,} judged queries, every top-{k} document judged); {fails}. "
                f"Success@{k}: {rates}.")
    settle = pool_settle_text(pv)
    if pv.all_fail:
        return (f"Every system fails on {pv.all_fail:,} of {n:,} judged queries{where}",
                f" ({pv.all_fail / n:.0%} {percent(pv.all_fail_interval)}; every top-{k} document judged). "
                f"Success@{k}: {rates}. {settle}".rstrip())
    return (f"No single best system yet{where}",
            f" ({fails}; every top-{k} document judged). Success@{k}: {rates}. {settle}".rstrip())


def pool_headline_text(pv, split: str = "") -> str:
    """``pool_headline`` as the one line Evaluate opens with on labels judged in the app (Markdown,
    escaped, the verdict in bold)."""
    from ui.present.escape import text

    head, rest = pool_headline(pv, split)
    return f"**{text(head)}**{text(rest)}"


def pool_settle_text(pv) -> str:
    """Why no system is the best on a whole pool, and what would settle it: the closest pair of the
    leader not separable on success@k, with how many more judged queries a difference that size
    needs (``pool_verdict.beyond_pool``) — a deeper pool would not change success@k."""
    from retrieval.judging.pool_verdict import beyond_pool

    if not pv.comparisons:
        return ""
    leader = max(pv.scores.values(), key=lambda s: (s.success, s.precision)).system
    mine = [t for t in pv.comparisons if leader in t[:2] and t[2].outcome == "open"]
    if not mine:
        return ""
    a, b, c = min(mine, key=lambda t: (t[2].same, abs(t[2].delta)))  # the nearest rival that differs at all
    other = a if b == leader else b
    if c.same:
        return (f"{leader} and {other} succeed on the same queries: no number of judged queries of this kind "
                f"would tell them apart on success@{pv.k}.")
    more = beyond_pool(c)
    need = (f"about {more:,} more judged queries would separate a difference this size if it holds"
            if more is not None else "the two score alike")
    return (f"{leader} and {other} are not separable on success@{pv.k} (Δ {c.delta:+.3f} {interval_text(c.interval)}, "
            f"{p_text(c.p_value)}): {need} — judging deeper would not, success@{pv.k} reads the top {pv.k} alone.")


RELATIVE = ("ndcg@10", "mrr@10", "recall@10", "recall@100", "recall@1000", "map", "bpref", "ndcg'@10")


def relative_names() -> dict[str, str]:
    """Each metric's name as a table on labels judged in the app heads it: those normalised by the
    relevant documents found so far (``RELATIVE``) named "(relative)"."""
    from retrieval.evaluation.metrics import METRIC_NAMES

    return {**METRIC_NAMES, **{m: f"{METRIC_NAMES.get(m, m)} (relative)" for m in RELATIVE}}


def pool_conclusion_lines(pv) -> list[str]:
    """Every pair of systems on success@k over the whole judged pool, in words (``conclusion``); none
    while the pool is not whole (its figures are ranges then)."""
    return [conclusion(a, b, c) for a, b, c in pv.comparisons] if pv.complete else []


def pool_table_html(pv) -> str:
    """Each system's success@k, P@k and the judged queries it fails on, as Evaluate shows them first on
    labels judged in the app: exact figures with their 95% intervals where its top k is judged on every
    judged query, else the range the pool allows, marked provisional."""
    from ui.present.escape import text

    n, k = len(pv.queries), pv.k
    body = []
    for s in sorted(pv.scores.values(), key=lambda s: (-s.successes, -s.precision, s.system)):
        if s.exact:
            cells = [_share(s.successes, n, s.success_interval), cell(s.precision, "", s.precision_interval),
                     f"{s.failures:,} of {n:,}", "exact"]
        else:
            cells = [f"{_range(s.successes, s.successes + s.undecided)} of {n:,}",
                     f"{s.precision:.4f}–{s.precision_high:.4f}",
                     f"{_range(s.failures, s.failures + s.undecided)} of {n:,}",
                     f"provisional: {s.queries - s.complete:,} of its top-{k} lists not wholly judged"]
        body.append(f"<tr><th scope=\"row\">{text(s.system)}</th>"
                    + "".join(f"<td>{text(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{text(h)}</th>" for h in
                   ("system", f"success@{k}", f"P@{k}", "fails on (nothing relevant in its top 10)", "figures"))
    return (f'<table class="rs-glance rs-pool"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f'<p class="rs-pool-note">Over every judged query ({n:,}), those with nothing relevant found included. '
            f"The measures below (nDCG, recall, MAP, bpref) are relative to the relevant documents found so far and "
            "count only the queries with one: provisional, not a verdict.</p>")


def pool_note(pv) -> str:
    """What Evaluate's note concludes on labels judged in the app (Markdown, escaped): every pair of
    systems on success@k over the whole judged pool, or, while it is not whole, how many pairs are
    left; nDCG and the other relative measures are never a verdict there."""
    from ui.present.escape import text

    k = pv.k
    if not pv.complete:
        return (f"**No verdict yet on the judged pool:** {len(pv.unjudged):,} of the systems' top-{k} documents on "
                f"the {len(pv.queries):,} judged queries are unjudged; judge them (the Judge tab serves them first) "
                f"for exact success@{k} and P@{k}. nDCG and the other measures normalised by the relevant documents "
                "are relative to those found so far: not a verdict.")
    lines = pool_conclusion_lines(pv)
    return (f"**What the judged pool lets you conclude** (success@{k} over the {len(pv.queries):,} judged queries, "
            f"every top-{k} document judged; Δ with its 95% interval, paired permutation test):\n\n"
            + "\n".join(f"- {text(line)}" for line in lines)
            + "\n\nnDCG and the other measures normalised by the relevant documents are relative to those found "
              "so far: not a verdict.")
