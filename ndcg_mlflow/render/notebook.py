"""How an evaluation result shows itself in a notebook (Jupyter, IPython): a short text (``repr``) and a few HTML
tables (``_repr_html_``): the means with their intervals, the comparisons against the baseline and the decision.

The repr is a few lines whatever the evaluation's size (names cut at :data:`NAME_WIDTH` characters, lists after
:data:`SHOWN` items). The HTML shows at most :data:`ROWS` rows per table (the DataFrames ``result.means`` and
``result.comparisons`` hold them all); every string from the data or the spec (system names, the spec name, paths,
the decision's words) is HTML-escaped, and it has no style sheet or script of its own. Numbers are written as the
report writes them (:mod:`ndcg_mlflow.render.format`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import preview
from ..rules import key_label, metric_name
from .format import exact_share, html_text, is_missing, number, p_value, system_label

NAME_WIDTH = 40  # a name longer than this is cut in the repr, ending in "…"
SHOWN = 10  # systems and cutoffs listed in the repr before "and N more"
ROWS = 50  # rows of each HTML table before "and N more"


def _short(text: Any) -> str:
    text = str(text)
    return text if len(text) <= NAME_WIDTH else text[: NAME_WIDTH - 1] + "…"


def _listed(items: Sequence[str]) -> str:
    rest = len(items) - SHOWN
    return ", ".join(items[:SHOWN]) + (f" and {rest} more" if rest > 0 else "")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _queries(result: Any) -> str:
    n = int(result.grouped_summary["n_queries"] if result.grouped_summary is not None else len(result.query_ids))
    return _count(n, "query", "queries")


def result_repr(result: Any) -> str:
    """``<EvaluationResult 'name': engine local, 240 queries, cutoffs 5, 10, all`` and the systems, the baseline,
    the decision's outcome and, when they stayed in Spark, where the per-query rows are."""
    spec = result.spec
    names = result.system_names
    cutoffs = _listed([key_label(k) for k in spec.metric.keys])
    lines = [
        f"<EvaluationResult {_short(spec.name)!r}: engine {result.engine}, {_queries(result)}, cutoffs {cutoffs}",
        f" {_count(len(names), 'system', 'systems')}: {preview([_short(n) for n in names], limit=SHOWN)}",
    ]
    if spec.comparison is not None:
        lines[-1] += f"; baseline {_short(spec.comparison.baseline)!r}"
    if result.decision is not None:
        lines[-1] += f"; decision {result.decision['outcome']}"
    if result.per_query_path is not None:
        lines.append(f" per-query rows: the Parquet table {result.per_query_path}")
    return "\n".join(lines) + ">"


def system_repr(system: Any) -> str:
    """``<SystemResult 'bm25': 240 queries; nDCG@5 0.6102, nDCG@10 0.6295, nDCG@all 0.7041>``."""
    means = _listed([f"{metric_name(key)} {number(m['mean'])}" for key, m in system.means.items()])
    queries = _count(system.result.ndcg.shape[0], "query", "queries")
    return f"<SystemResult {_short(system.name)!r}: {queries}; {means}>"


# --------------------------------------------------------------------------- HTML


_e = html_text  # every string shown in the page


def _table(caption: str, heads: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A table whose cells are already escaped; the first cell of each row is its heading."""
    out = [f"<table><caption>{caption}</caption>", "<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for row in rows[:ROWS]:
        out.append(f"<tr><th>{row[0]}</th>" + "".join(f"<td>{c}</td>" for c in row[1:]) + "</tr>")
    out.append("</table>")
    if len(rows) > ROWS:
        out.append(f"<p>… and {len(rows) - ROWS} more rows.</p>")
    return out


def _interval(low: Any, high: Any, *, signed: bool = False) -> str:
    if is_missing(low) and is_missing(high):
        return ""
    return f"[{number(low, signed=signed)}, {number(high, signed=signed)}]"


def result_html(result: Any) -> str:
    """The result as HTML: a line of what was evaluated, the systems × cutoffs table of means with their intervals,
    the comparisons against the baseline (difference, interval, corrected p, wins/ties/losses) and the decision."""
    spec = result.spec
    keys = spec.metric.keys
    head = f"<b>{_e(spec.name)}</b>: engine {_e(result.engine)}, {_queries(result)}"
    if result.per_query_path is not None:
        head += f"; per-query rows: the Parquet table <code>{_e(result.per_query_path)}</code>"
    out = ["<div>", f"<p>{head}</p>"]

    models = {name: m.record() for name, m in result.models.items()}
    means = {(m["system"], m["key"]): m for m in result.means.to_dict("records")}
    confidence = f" [{exact_share(spec.uncertainty.confidence)} interval]" if spec.uncertainty is not None else ""
    rows = []
    for name in result.system_names:
        cells = [_e(system_label(name, models))]
        for key in keys:
            m = means[(name, key)]
            cells.append(_e(f"{number(m['mean'])} {_interval(m['ci_low'], m['ci_high'])}".strip()))
        rows.append(cells)
    out += _table(f"Mean nDCG{_e(confidence)}", ["system", *(_e(metric_name(k)) for k in keys)], rows)

    comparisons = result.comparisons
    if len(comparisons):
        rows = []
        for c in comparisons.to_dict("records"):
            wtl = "/".join(str(c[f]) for f in ("wins", "ties", "losses")) if "wins" in c else number(None)
            rows.append(
                [
                    _e(system_label(c["candidate"], models)),
                    _e(key_label(c["key"])),
                    _e(number(c["delta"], signed=True)),
                    _e(_interval(c["ci_low"], c["ci_high"], signed=True)),
                    _e(p_value(c.get("p_corrected"))),
                    _e(wtl),
                ]
            )
        first = comparisons.iloc[0]
        baseline = system_label(first["baseline"], models)
        caption = f"Against the baseline {_e(baseline)} (p corrected: {_e(first.get('correction', ''))})"
        out += _table(caption, ["candidate", "cutoff", "difference", "interval", "p corrected", "W/T/L"], rows)

    from .words import decision_record

    decision = decision_record(result.decision, result.spec.decision)
    if decision is not None:
        out.append(f"<p>Decision: <b>{_e(decision['outcome'])}</b>. {_e(decision['statement'])}</p><ul>")
        out += [
            f"<li>{_e(system_label(r['candidate'], models))}: <b>{_e(r['outcome'])}</b>, {_e(r['reason'])}</li>"
            for r in decision["candidates"][:ROWS]
        ]
        out.append("</ul>")
    out.append("</div>")
    return "\n".join(out)
