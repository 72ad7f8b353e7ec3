"""``ndcg-mlflow explain``: every resolved choice in plain words, where it came from, and how other tools differ."""

from __future__ import annotations

import numpy as np

from .presets import TOOLS
from .spec import METRIC_FIELDS, Gain, Spec, cutoff_label

WORDS = {
    "discount": {"log2": "rank i counts 1 / log2(i + 1): rank 1 keeps all its gain, rank 2 about 0.631, rank 3 0.5"},
    "ties": {
        "displayed_order": "equal scores keep the order the run shows them in (its rank column, else its line "
                           "order)",
        "id_ascending": "equal scores are ordered by document id, ascending plain string order ('d10' before 'd9')",
        "id_descending": "equal scores are ordered by document id, descending plain string order "
                         "(as trec_eval does)",
        "average": "each group of equal scores earns its mean gain at each of its positions (McSherry & Najork "
                   "2008), also when a cutoff cuts the group",
    },
    "ideal": {
        "judged_catalog": "the ideal is the best ordering of every judged document of the query: a relevant "
                          "document the system never returned lowers the score",
        "candidates": "the ideal is the best ordering of the documents the system returned: the score measures "
                      "ordering only, not what retrieval missed",
    },
    "empty_ideal": {
        "exclude": "a query whose ideal DCG is 0 has no nDCG: empty in the table, left out of the mean, counted",
        "zero": "a query whose ideal DCG is 0 scores 0 and is averaged in",
        "one": "a query whose ideal DCG is 0 scores 1 and is averaged in",
        "error": "a query whose ideal DCG is 0 stops the evaluation, naming the queries",
    },
    "unjudged": {
        "zero": "a returned document without a judgment earns 0 and keeps its position",
        "condense": "a returned document without a judgment is removed before cutting at K (condensed lists, "
                    "trec_eval -J)",
        "error": "a returned document without a judgment stops the evaluation",
    },
    "missing_queries": {
        "zero": "a query of the evaluated set that a run does not return at all scores 0",
        "exclude": "a query of the evaluated set that a run does not return at all is left out and counted",
        "error": "a query of the evaluated set that a run does not return at all stops the evaluation",
    },
}


def gain_credit(gain: Gain, grades: list[float]) -> str:
    from .join import map_gains

    if gain.kind == "table":
        table = dict(gain.table)
        pairs = [(g, table[g]) for g in grades if g in table]
        extra = [(g, v) for g, v in gain.table if g not in set(grades)]
        text = ", ".join(f"grade {_n(g)} earns {_n(v)}" for g, v in pairs)
        if extra:
            text += "; the table also lists " + ", ".join(f"grade {_n(g)} (earns {_n(v)})" for g, v in extra)
        return text
    pairs = [(g, float(map_gains(gain, np.array([g]))[0])) for g in grades]
    return ", ".join(f"grade {_n(g)} earns {_n(v)}" for g, v in pairs)


def _n(x: float) -> str:
    return f"{x:g}"


def _grades(spec: Spec) -> tuple[list[float], str]:
    from .readers import read_qrels

    try:
        q = read_qrels(spec.qrels.file, spec.qrels.format, spec.qrels.columns)
        return sorted({float(v) for v in np.unique(q.value)}), f"the grades found in {spec.qrels.declared}"
    except Exception:  # the explanation still works without readable data
        return [0.0, 1.0, 2.0, 3.0], "example grades (the qrels file could not be read)"


def field_value(metric, field_name: str):
    value = getattr(metric, field_name)
    if field_name == "gain":
        return value.describe()
    if field_name == "cutoffs":
        return ", ".join(cutoff_label(k) for k in value)
    return value


def explain(spec: Spec, grades: list[float] | None = None, *, tools: bool = True) -> str:
    """The explanation text; ``grades`` (the qrels' distinct grades) avoids reading the qrels again."""
    m = spec.metric
    if grades is None:
        grades, grade_source = _grades(spec)
    else:
        grade_source = f"the grades found in {spec.qrels.declared}"
    lines = [f"Evaluation spec '{spec.name}'" + (f" ({spec.source})" if spec.source else ""),
             f"metric preset: {m.preset or 'none'}", ""]

    def line(field_name: str, text: str) -> None:
        lines.append(f"- {field_name}: {field_value(m, field_name)}  [from {m.source_of(field_name)}]")
        lines.append(f"    {text}")

    if m.gain.kind == "exponential":
        gain_text = "a grade g earns 2^g - 1 (negative grades earn 0)"
    elif m.gain.kind == "linear":
        gain_text = "a grade g earns g (negative grades earn 0)"
    else:
        gain_text = "each grade earns the gain the table declares; a grade the table lacks is an error"
    line("gain", f"{gain_text}; {grade_source}: {gain_credit(m.gain, grades)}")
    cut_words = []
    for k in m.cutoffs:
        cut_words.append("all: DCG over the whole returned list against the ideal over every judged (or returned) "
                         "document" if k is None else f"{k}: DCG of the top {k} against the ideal top {k}")
    line("cutoffs", "; ".join(cut_words))
    for f in ("discount", "ties", "ideal", "empty_ideal", "unjudged", "missing_queries"):
        line(f, WORDS[f][getattr(m, f)])
    lines.append("")
    q = spec.queries
    lines.append("- queries: " + (f"the declared set in {q.set.declared}" if q.set else "every judged query"))
    lines.append("    weights: " + (f"from {q.weights.declared}; the mean is sum(w * nDCG) / sum(w) over the "
                                    f"queries not excluded" if q.weights else
                                    "uniform: the mean is the plain average over the queries not excluded"))
    if spec.uncertainty:
        u = spec.uncertainty
        lines.append(f"- uncertainty: {u.confidence:.0%} {u.method} intervals from {u.resamples} bootstrap "
                     f"resamples of queries (seed {u.seed})")
    if spec.comparison:
        c = spec.comparison
        lines.append(f"- comparison: every other system against '{c.baseline}'; test {c.test}; correction "
                     f"{c.correction} over all (candidate, cutoff) pairs; {c.wins_losses} largest wins and "
                     f"losses; |difference| <= {c.tie_tolerance:g} is a tie")
    if spec.companions:
        comp = spec.companions
        if comp.duplicates:
            lines.append(f"- companion: duplicate rate in the top K — the share of the shown top K taken by a "
                         f"document whose duplicate group (from {comp.duplicates.declared}) already appeared higher")
        if comp.catalog or comp.catalog_size:
            what = (f"the documents listed in {comp.catalog.declared}" if comp.catalog
                    else f"a catalog of {comp.catalog_size}")
            lines.append(f"- companion: catalog coverage at K — distinct documents shown in the top K across the "
                         f"evaluated queries, over {what}")
    if not tools:
        return "\n".join(lines)
    lines.append("")
    lines.append("How other tools' nDCG differs from this spec ('=' same; otherwise the tool's choice):")
    heads = ["field", "this spec"] + [t.name for t in TOOLS]
    rows = []
    for f in METRIC_FIELDS:
        mine = str(field_value(m, f))
        row = [f, mine]
        for tool in TOOLS:
            theirs = tool.values.get(f)
            if theirs is None:
                row.append("unspecified")
                continue
            text = _raw_text(f, theirs)
            row.append("=" if text == mine else text)
        rows.append(row)
    widths = [max(len(r[i]) for r in rows + [heads]) for i in range(len(heads))]
    for r in [heads] + rows:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)))
    lines.append("")
    for tool in TOOLS:
        lines.append(f"{tool.name}: {tool.title}" + ("" if tool.reproducible else " — not reproducible, see ties"))
        for f in METRIC_FIELDS:
            lines.append(f"    {f}: {tool.notes[f]}")
        for caveat in tool.caveats:
            lines.append(f"    note: {caveat}")
    return "\n".join(lines)


def _raw_text(field_name: str, value) -> str:
    if field_name == "cutoffs":
        return ", ".join(str(v) for v in value)
    return str(value)
