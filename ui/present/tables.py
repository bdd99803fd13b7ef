"""Table cells: the library's rows written as the app shows them (every metric through
``retrieval.metrics.cell``: 4 decimals and the significance mark)."""
from __future__ import annotations

from retrieval.lambdas import shown
from retrieval.metrics import METRICS, SUMMARY_METRICS, cell, significance_mark
from retrieval.systems import DENSE, HYBRID


def table_cells(rows: list[dict], metrics=METRICS) -> list[list[str]]:
    """Rows of ``tables.metrics_table`` as text cells: label, then "0.6804†" per metric."""
    return [[r["label"], *(cell(r["metrics"][m], r["marks"].get(m, "")) for m in metrics)] for r in rows]


def rounded(value, digits: int = 4):
    """A number cell: floats rounded to ``digits``, anything else as it is."""
    return round(value, digits) if isinstance(value, float) else value


def training_result_rows(result: dict, metrics=SUMMARY_METRICS) -> list[list[str]]:
    """A finished job's base and fine-tuned metrics: [encoder, system, *metrics], † on the fine-tuned
    rows where the paired permutation test against the base is significant; a hybrid row names the
    λ it was scored at (each encoder's own, ``Workspace.lambda_for``)."""
    pvalues = result.get("significance") or {}
    rows = []
    for encoder, systems in (result.get("metrics") or {}).items():
        for system, values in systems.items():
            marks = [significance_mark(pvalues.get(system, {}).get(m, 1.0)) if encoder == "fine-tuned" else ""
                     for m in metrics]
            name = f"{system} (λ {shown(values['lambda'])})" if values.get("lambda") is not None else system
            rows.append([encoder, name, *(cell(values.get(m), mark) for m, mark in zip(metrics, marks))])
    return rows


def per_query_change_rows(result: dict, queries: dict[str, str]) -> list[list]:
    """The evaluated queries whose nDCG@10 fine-tuning changed (dense or hybrid), before and after,
    with the changes, biggest hybrid gains first; a query scored alike by both encoders is left out
    (when the held-out check kept the base, every query)."""
    pq = result.get("per_query") or {}
    dense, hybrid = pq.get(DENSE, {}), pq.get(HYBRID, {})
    rows = []
    for q in sorted(set(dense) | set(hybrid)):
        d, h = dense.get(q, [0.0, 0.0]), hybrid.get(q, [0.0, 0.0])
        if d[0] == d[1] and h[0] == h[1]:
            continue
        rows.append([q, queries.get(q, "")[:80], d[0], d[1], round(d[1] - d[0], 4), h[0], h[1], round(h[1] - h[0], 4)])
    return sorted(rows, key=lambda r: (-r[7], -r[4], r[0]))


def per_query_change_caption(result: dict) -> str:
    """What the per-query table lists: how many evaluated queries changed, how many of them the
    hybrid ranks better and worse; or that none changed, and why when the base encoder was kept."""
    pq = result.get("per_query") or {}
    dense, hybrid = pq.get(DENSE, {}), pq.get(HYBRID, {})
    evaluated = set(dense) | set(hybrid)
    changed = [q for q in evaluated if any(v[0] != v[1] for v in (dense.get(q, [0, 0]), hybrid.get(q, [0, 0])))]
    head = "Per query (nDCG@10 on the evaluated split)"
    if not evaluated:
        return f"{head}: nothing was evaluated."
    if not changed:
        kept = "the base is kept" in (result.get("verdict") or "")
        why = " — the held-out check kept the base encoder" if kept else ""
        return f"{head}: no query's score changed{why}."
    better = sum(hybrid.get(q, [0, 0])[1] > hybrid.get(q, [0, 0])[0] for q in changed)
    worse = sum(hybrid.get(q, [0, 0])[1] < hybrid.get(q, [0, 0])[0] for q in changed)
    return (f"{head}: {len(changed)} of {len(evaluated)} queries changed (hybrid better on {better}, worse on "
            f"{worse}); what fine-tuning fixed first, what it broke last. Unchanged queries are not listed.")
