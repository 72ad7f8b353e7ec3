"""The report's sections beyond the mean, in ``report.html`` and ``report.md`` alike: the segments (each system's
mean and each candidate's difference per segment, at the headline cutoff), the tail risk and the planning figures
of each comparison, and the sentence that says whether a "not significant" result could have been significant.
Each table is built once as text cells; :func:`html_table` and :func:`~ndcg_mlflow.render.format.md_table` lay it
out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..rules import metric_name
from .bundle import Bundle
from .format import FILE, exact, html_text, is_missing, md_table, md_text, number, p_value, share, wins_ties_losses

Table = tuple[list[str], list[list[str]], str]  # heads, rows, alignment ("l"/"r" per column)


def segment_tables(bundle: Bundle, esc: Callable[[Any], str]) -> tuple[Table, Table] | None:
    """(means by segment, comparisons by segment) at the headline cutoff, every string from the data through
    ``esc``; None without segments."""
    s = bundle.summary
    segs = s.get("segments") or {}
    if not segs:
        return None
    key = bundle.headline
    names = list(s["systems"])
    means: list[list[str]] = []
    for seg, systems in segs.items():
        cells = [esc(seg), str(max((systems.get(n, {}).get(key, {}).get("n", 0) for n in names), default=0))]
        for n in names:
            m = systems.get(n, {}).get(key, {})
            cells.append(f"{number(m.get('mean'))} [{number(m.get('ci_low'))}, {number(m.get('ci_high'))}]")
        means.append(cells)
    comps = [
        [
            esc(c["segment"]),
            esc(bundle.label(c["candidate"])),
            str(c["n_paired"]),
            number(c.get("delta"), signed=True),
            f"[{number(c.get('ci_low'), signed=True)}, {number(c.get('ci_high'), signed=True)}]",
            p_value(c.get("p_corrected")),
            esc(wins_ties_losses(c, "/")),
        ]
        for c in s.get("segment_comparisons") or []
        if c["key"] == key
    ]
    return (
        (["segment", "queries", *(esc(bundle.label(n)) for n in names)], means, "lr" + "r" * len(names)),
        (["segment", "candidate", "paired", "difference", "interval", "p corrected", "W/T/L"], comps, "llrrlrl"),
    )


def risk_table(bundle: Bundle, esc: Callable[[Any], str]) -> Table | None:
    """Each comparison's tail risk and planning figures at the headline cutoff; None without them."""
    comps = [c for c in bundle.summary.get("comparisons") or [] if c["key"] == bundle.headline and "urisk" in c]
    if not comps:
        return None
    alphas = list(comps[0]["urisk"])
    regress = any("regressed_share" in c for c in comps)
    plan = any("queries_needed" in c for c in comps)
    heads = ["candidate", *(f"URisk α={a}" for a in alphas), *(f"TRisk α={a} (p)" for a in alphas)]
    heads += ["regressed share [interval]"] * regress + ["MDE (80% power)"] + ["queries needed", "planned at"] * plan
    rows = []
    for c in comps:
        cells = [esc(bundle.label(c["candidate"]))]
        cells += [number(c["urisk"].get(a), signed=True) for a in alphas]
        cells += [f"{number(c['trisk'][a]['value'], 3, signed=True)} ({p_value(c['trisk'][a]['p'])})" for a in alphas]
        if regress:
            r = c.get("regressed_share") or {}
            cells.append(f"{share(r.get('share'))} [{share(r.get('ci_low'))}, {share(r.get('ci_high'))}]")
        cells.append(number(c.get("mde")))
        if plan:
            q = c.get("queries_needed")
            cells.append(("no plan" if c.get("plan_reason") else FILE) if is_missing(q) else str(q))
            cells.append(planned_at(c))
        rows.append(cells)
    return heads, rows, "l" + "r" * (len(heads) - 1)


def planned_at(c: dict[str, Any]) -> str:
    """The bounds a comparison's plan assumed: sigma's and, under unequal weights, the weights' log-scale sigma's."""
    sd, weights = c.get("plan_sd_bound"), c.get("plan_weights_bound")
    if is_missing(sd):
        return FILE
    text = f"σ {number(sd)}"
    unequal = weights is not None and not is_missing(weights) and weights > 0
    return text + (f", weights' log σ {number(weights, 2)}" if unequal else "")


def risk_legend(bundle: Bundle) -> str:
    """What the risk and planning columns mean."""
    comps = bundle.summary.get("comparisons") or []
    delta = next((c["regressed_share"]["delta"] for c in comps if "regressed_share" in c), None)
    words = (
        "URisk (Wang et al., 2012) is the weighted mean difference with each loss counted 1 + α times: negative when "
        "the candidate's losses, so amplified, outweigh its wins. TRisk (Dinçer et al., 2014) is URisk over its "
        "standard error, a t statistic (p two-sided; |TRisk| > 2 is the paper's reading of a significant risk). "
    )
    if delta is not None:
        words += (
            f"The regressed share is the weighted share of queries that lose more than {exact(delta)}, with its "
            "interval (Clopper-Pearson on the effective number of queries, whose upper end the guardrail reads). "
        )
    words += (
        "MDE is the smallest difference this evaluation's queries detect at 80% power with the two-sided weighted "
        "paired t at the spec's confidence; queries needed is how many queries (with the same spread and weights) "
        "would decide the declared margin at that power."
    )
    level = next((c["plan_bound_level"] for c in comps if not is_missing(c.get("plan_bound_level"))), None)
    if level is not None:
        words += (
            f" Planned at (on the safe side of these queries): σ, the per-query standard deviation of the "
            f"differences, at its {level:.0%} upper confidence bound, and under unequal weights the standard "
            f"deviation of the weights' logarithms at its {level:.0%} upper bound."
        )
    reasons = [
        (c["candidate"], c["plan_reason"])
        for c in comps
        if c["key"] == bundle.headline and is_missing(c.get("queries_needed")) and c.get("plan_reason")
    ]
    for candidate, reason in reasons:
        words += f" No plan for {bundle.label(candidate)}: {reason}."
    return words


def detection_note(bundle: Bundle, candidate: str) -> str:
    """Beside a candidate that failed the decision's rule, or whose difference is not significant at the headline
    key without a decision: whether this evaluation could have detected the margin (or any difference of its size)
    at all."""
    s = bundle.summary
    d = s.get("decision") or {}
    key = d.get("key") or bundle.headline
    c = next((c for c in s.get("comparisons") or [] if c["candidate"] == candidate and c["key"] == key), None)
    if c is None or is_missing(c.get("mde")):
        return ""
    mde = number(c["mde"])
    row: dict[str, Any] = next((r for r in d.get("candidates", []) if r["candidate"] == candidate), {})
    if d and c.get("detectable") is False and row.get("rule_outcome", row.get("outcome")) == "fail":
        need = c.get("queries_needed")
        return (
            f"With {c['n_paired']} paired queries this evaluation could not have decided the margin: the smallest "
            f"difference it detects at 80% power is {mde}"
            + (f"; about {need} queries would" if not is_missing(need) else "")
            + "."
        )
    p = c.get("p_corrected")
    if not d and not is_missing(p) and p > 1 - float(s.get("spec", {}).get("uncertainty.confidence", 0.95)):
        return f"Not significant; the smallest difference this evaluation detects at 80% power is {mde}."
    return ""


def html_table(table: Table) -> str:
    heads, rows, align = table
    cls = [" class='l'" if a == "l" else "" for a in align]
    head = "".join(f"<th{c}>{h}</th>" for c, h in zip(cls, heads))
    body = "".join("<tr>" + "".join(f"<td{c}>{v}</td>" for c, v in zip(cls, row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


_e = html_text  # every string shown in the page


def html_sections(bundle: Bundle) -> str:
    """``report.html``'s segment and risk sections (empty when the summary has neither)."""
    parts = []
    head = metric_name(bundle.headline)
    tables = segment_tables(bundle, _e)
    if tables is not None:
        means, comps = tables
        parts.append(
            f"<h2 id='segments'>Segments</h2><p class='muted'>Each system's mean at {_e(head)} in each segment, "
            "with its interval (the same method and seed rule as the overall one).</p>"
        )
        parts.append(html_table(means))
        parts.append(
            f"<p class='muted'>Each candidate's difference from the baseline at {_e(head)} per segment; p corrected "
            f"over the whole family ({_e(bundle.summary.get('comparison_family', ''))}).</p>"
        )
        parts.append(html_table(comps))
        parts += [f"<p>{_e(c['note'])}</p>" for c in bundle.summary.get("segment_consistency") or [] if "note" in c]
    risk = risk_table(bundle, _e)
    if risk is not None:
        parts.append(f"<h2 id='risk'>Tail risk and planning at {_e(head)}</h2>")
        parts.append(html_table(risk))
        parts.append(f"<p class='muted'>{_e(risk_legend(bundle))}</p>")
    return "".join(parts)


def md_sections(bundle: Bundle) -> list[str]:
    """``report.md``'s segment and risk sections (no lines when the summary has neither)."""
    lines: list[str] = []
    head = metric_name(bundle.headline, md_text)
    tables = segment_tables(bundle, md_text)
    if tables is not None:
        means, comps = tables
        lines += ["", f"Segments at {head}:", "", *md_table(*means), "", *md_table(*comps)]
        lines += [f"- {md_text(c['note'])}" for c in bundle.summary.get("segment_consistency") or [] if "note" in c]
    risk = risk_table(bundle, md_text)
    if risk is not None:
        lines += ["", f"Tail risk and planning at {head}:", "", *md_table(*risk), "", md_text(risk_legend(bundle))]
    return lines
