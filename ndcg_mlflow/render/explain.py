"""``ndcg-mlflow explain``: every resolved choice in plain words, where it came from, and how other tools differ."""

from __future__ import annotations

import numpy as np

from ..rules import (
    METRIC_FIELDS,
    METRIC_RULES,
    QUERY_SET,
    RULES,
    WEIGHTS,
    Gain,
    fixed_lambda,
    rule_values,
    stratifies_labels,
)
from ..spec import Spec
from ..spec.presets import TOOLS
from .format import exact, exact_share, term_text, text_table


def gain_credit(gain: Gain, grades: list[float]) -> str:
    from ..join import map_gains

    if gain.is_table:
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
    return exact(x)


def _grades(spec: Spec) -> tuple[list[float], str]:
    from ..readers import read_qrels

    try:
        q = read_qrels(spec.qrels.file, spec.qrels.format, spec.qrels.columns, spec.qrels.version)
        return sorted({float(v) for v in np.unique(q.value)}), f"the grades found in {spec.qrels.declared}"
    except Exception:  # the explanation still works without readable data
        return [0.0, 1.0, 2.0, 3.0], "example grades (the qrels file could not be read)"


def field_value(metric, field_name: str) -> str:
    """A metric field's value as ``explain`` shows it: the resolved form, cutoffs separated by ', '."""
    text = RULES[f"metric.{field_name}"].resolve(getattr(metric, field_name))
    return text.replace(",", ", ") if field_name == "cutoffs" else text


def explain(spec: Spec, grades: list[float] | None = None, *, tools: bool = True) -> str:
    """The explanation text; ``grades`` (the qrels' distinct grades) avoids reading the qrels again."""
    m = spec.metric
    if grades is None:
        grades, grade_source = _grades(spec)
    else:
        grade_source = f"the grades found in {spec.qrels.declared}"
    lines = [
        f"Evaluation spec '{spec.name}'" + (f" ({spec.source})" if spec.source else ""),
        f"metric preset: {m.preset or 'none'}",
        "",
    ]

    def line(field_name: str, text: str) -> None:
        lines.append(f"- {field_name}: {field_value(m, field_name)}  [from {m.source_of(field_name)}]")
        lines.append(f"    {text}")

    for rule in METRIC_RULES:
        text = rule.words(getattr(m, rule.name))
        if rule.name == "gain":
            text += f"; {grade_source}: {gain_credit(m.gain, grades)}"
        line(rule.name, text)
    lines.append("")
    values = rule_values(spec)
    lines.append("- queries: " + QUERY_SET.words(values[QUERY_SET.key]))
    lines.append("    weights: " + WEIGHTS.words(values[WEIGHTS.key]))
    if spec.queries.segments is not None:
        lines.append("    " + segments_words(spec))
    if spec.uncertainty:
        u = spec.uncertainty
        lines.append(
            f"- uncertainty: {exact_share(u.confidence)} {u.method} intervals from {u.resamples} bootstrap "
            f"resamples of queries (seed {u.seed})"
            + (
                "; stratified by segment: each resample draws, within every segment, as many queries as it holds"
                if u.stratify
                else ""
            )
        )
    if spec.comparison:
        c = spec.comparison
        lines.append(
            f"- comparison: every other system against '{c.baseline}'; test {c.test}; correction "
            f"{c.correction} over all (candidate, cutoff) pairs"
            + (", overall and in each segment (one family)" if spec.queries.segments is not None else "")
            + f"; {c.wins_losses} largest wins and "
            f"losses; |difference| <= {exact(c.tie_tolerance)} is a tie; {risk_words(c.risk_alpha)}"
        )
    if spec.decision and spec.uncertainty:
        from .words import statement

        lines.append(
            f"- decision: {statement(spec.decision, spec.uncertainty.confidence)} A failed decision exits with code 4."
        )
    if spec.judge is not None:
        lines.append("- " + judge_words(spec))
    if spec.companions:
        comp = spec.companions
        if comp.duplicates:
            lines.append(
                f"- companion: duplicate rate in the top K — the share of the shown top K taken by a "
                f"document whose duplicate group (from {comp.duplicates.declared}) already appeared higher"
            )
        if comp.catalog or comp.catalog_size:
            what = (
                f"the documents listed in {comp.catalog.declared}"
                if comp.catalog
                else f"a catalog of {comp.catalog_size}"
            )
            lines.append(
                f"- companion: catalog coverage at K — distinct documents shown in the top K across the "
                f"evaluated queries, over {what}"
            )
    if not tools:
        return _lines(lines)
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
    lines += text_table(heads, rows, left=len(heads), indent="  ")
    lines.append("")
    for tool in TOOLS:
        lines.append(f"{tool.name}: {tool.title}" + ("" if tool.reproducible else " — not reproducible, see ties"))
        for f in METRIC_FIELDS:
            lines.append(f"    {f}: {tool.notes[f]}")
        for caveat in tool.caveats:
            lines.append(f"    note: {caveat}")
    return _lines(lines)


def _lines(lines: list[str]) -> str:
    """The explanation's text: each line as terminal text (:func:`~.format.term_text`), so that the spec's name,
    a path or a system named in it stays on its line with its control characters shown, in the terminal and in
    ``explanation.txt`` alike."""
    return "\n".join(map(term_text, lines))


def segments_words(spec: Spec) -> str:
    """``queries.segments`` in words."""
    src = spec.queries.segments
    assert src is not None
    return (
        f"segments: from {src.declared}; every evaluated query belongs to exactly one segment, and each segment's "
        f"means and comparisons are reported beside the overall ones"
    )


def judge_words(spec: Spec) -> str:
    """The ``judge`` section in words: which judgments are whose, how the labelled queries were drawn and how the
    two are combined."""
    j = spec.judge
    assert j is not None
    who = f"a model ({j.name})" if j.name is not None else "a model"
    drawn = (
        "drawn at random within each segment of queries.segments (one weight of the judge's labels per segment, "
        "the segments combined by their weight)"
        if stratifies_labels(j.labelled_queries)
        else "a simple random sample of the evaluated queries"
    )
    lam = fixed_lambda(j.estimator)
    how = {
        None: "the judge's labels weighted to minimise the variance (PPI++, power-tuned prediction-powered inference)",
        1.0: "the judge's labels weighted 1 (classic prediction-powered inference)",
        0.0: "the labelled queries alone (the judge's labels are not used; human-only)",
    }[lam]
    return (
        f"judge: the judgments of {j.judgments.declared} come from {who} and cover every evaluated query; those "
        f"of {spec.qrels.declared} are human judgments of the labelled queries (those with at least one), "
        f"{drawn}. Means, intervals and comparisons: {how}, with t intervals (each part's weighted t, "
        f"Welch-Satterthwaite degrees of freedom) at "
        f"{exact_share(spec.uncertainty.confidence) if spec.uncertainty else '?'} confidence; the human-only and "
        f"judge-only views are reported beside them (judge-only is not valid: the judge's bias is not corrected)"
    )


def risk_words(alphas: tuple[float, ...]) -> str:
    """``comparison.risk_alpha`` in words: URisk and TRisk count each query's loss against the baseline
    (1 + alpha) times (Wang, Bennett & Collins-Thompson 2012; Dincer, Macdonald & Ounis 2014)."""
    shown = ", ".join(exact(a) for a in alphas)
    return f"tail risk (URisk, TRisk): each loss against the baseline counts 1 + alpha times, at alpha = {shown}"


def _raw_text(field_name: str, value) -> str:
    if field_name == "cutoffs":
        return ", ".join(str(v) for v in value)
    return str(value)
