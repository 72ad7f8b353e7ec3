"""What ``report.html`` and ``report.md`` say of an evaluation with a judge (``summary.json``'s ``judge``): the
sentences beside the verdict (which labels it rests on, how far the judge-only view is from the declared estimate
and what the judge's bias test says, :func:`lead`) and the section "Judgments from a model" (each comparison and
each system's mean under the three views, the estimator's figures, the judge's bias and the agreement). Each table
is built once as text cells (:data:`~.sections.Table`) and laid out by the medium; every name from the data goes
through the medium's escaping (``esc``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..rules import metric_name, stratifies_labels
from .bundle import Bundle
from .format import exact_share, html_text, is_missing, md_table, md_text, number, p_value
from .sections import Table, html_table

NOT_VALID = "not valid: the judge's bias is not corrected"


def _who(judge: dict[str, Any]) -> str:
    """Whose judgments the unlabelled queries carry: the judge's recorded name, else "a model"."""
    name = judge.get("name")
    return "a model" if name in (None, "") else str(name)


def _queries(n: int) -> str:
    return f"{n} {'query' if n == 1 else 'queries'}"


def _interval(view: dict[str, Any] | None) -> str:
    v = view or {}
    return f"[{number(v.get('ci_low'), signed=True)}, {number(v.get('ci_high'), signed=True)}]"


def headline_comparisons(bundle: Bundle) -> list[dict[str, Any]]:
    """The judge's comparisons the verdict reads: at the decision's key when the spec declares a decision, else at
    the headline cutoff."""
    s = bundle.summary
    key = (s.get("decision") or {}).get("key") or bundle.headline
    return [c for c in (s.get("judge") or {}).get("comparisons") or [] if c["key"] == key]


def summary_lead(summary: dict[str, Any]) -> list[str]:
    """:func:`lead` of a ``summary.json`` alone (the MLflow evaluation run's description)."""
    from pathlib import Path

    return lead(Bundle(Path("."), summary, None, None, None, None, ""))


def lead(bundle: Bundle) -> list[str]:
    """The sentences beside the verdict (plain text: escape them for the medium): which labels it rests on, with
    the estimator's weight of the judge's labels; then, for each headline comparison, how far the judge-only view
    is from the declared estimate and what the test of the judge's bias says. None without a judge."""
    judge = bundle.summary.get("judge")
    if not judge:
        return []
    comps = headline_comparisons(bundle)
    estimator = judge.get("estimator")
    if comps:
        key = metric_name(comps[0]["key"])
        weights = [(f"{bundle.label(c['candidate'])} − {bundle.label(c['baseline'])}", c.get("lambda")) for c in comps]
    else:
        key = metric_name(bundle.headline)
        weights = [
            (bundle.label(name), (keys.get(bundle.headline) or {}).get("lambda"))
            for name, keys in (judge.get("systems") or {}).items()
        ]
    if all(is_missing(lam) for _, lam in weights):
        lam_text = "λ per segment" if any("segments" in c for c in comps) else "λ undefined"
    elif len(weights) == 1:
        lam_text = f"λ = {number(weights[0][1])} at {key}"
    else:
        lam_text = "λ = " + ", ".join(f"{number(lam)} for {what}" for what, lam in weights) + f" at {key}"
    n, m = int(judge.get("n_labelled", 0)), int(judge.get("n_unlabelled", 0))
    lines = [
        f"The verdict rests on human judgments of {_queries(n)} and {_who(judge)}'s judgments of {m} more "
        f"(estimator {estimator}: {lam_text})."
    ]
    confidence = judge.get("confidence", 0.95)
    alpha = 1 - float(confidence)
    for c in comps:
        pair = f"{bundle.label(c['candidate'])} − {bundle.label(c['baseline'])}"
        delta: Any = c.get("estimate")
        judge_only: Any = (c.get("judge_only") or {}).get("estimate")
        bias = c.get("judge_bias") or {}
        p: Any = bias.get("p_value")
        if is_missing(p):
            verdict = "undefined (too few labelled queries)"
        elif p < alpha:
            verdict = (
                f"the judge is biased on this difference at the {exact_share(confidence)} level: the judge-only "
                f"view would mislead, the {estimator} estimate corrects it"
            )
        else:
            verdict = f"no bias detected at the {exact_share(confidence)} level"
        gap = None if is_missing(delta) or is_missing(judge_only) else judge_only - delta
        lines.append(
            f"{pair} at {metric_name(c['key'])}: {estimator} {number(delta, signed=True)} {_interval(c)}; judge-only "
            f"{number(judge_only, signed=True)} ({NOT_VALID}), {number(gap, signed=True)} from the {estimator} "
            f"estimate; human-only {number((c.get('human_only') or {}).get('estimate'), signed=True)}. The judge's "
            f"bias (human minus judge difference, over the {int(c.get('n_labelled', 0))} labelled queries): "
            f"{number(bias.get('estimate'), signed=True)} {_interval(bias)}, p {p_value(p)}: {verdict}."
        )
    return lines


def _view_cells(entry: dict[str, Any], signed: bool) -> list[str]:
    """The three views of one mean or difference, with their intervals."""
    cells = []
    for view in (entry, entry.get("human_only"), entry.get("judge_only")):
        v = view or {}
        cells.append(f"{number(v.get('estimate'), signed=signed)} {_interval(v) if signed else _plain(v)}")
    return cells


def _plain(v: dict[str, Any]) -> str:
    return f"[{number(v.get('ci_low'))}, {number(v.get('ci_high'))}]"


def _figures(entry: dict[str, Any]) -> list[str]:
    return [number(entry.get("lambda")), number(entry.get("rho")), number(entry.get("n_effective"), 1)]


def tables(bundle: Bundle, esc: Callable[[Any], str]) -> tuple[Table | None, Table]:
    """(the comparisons at each key, the systems' means at each key) under the three views, every string from
    the data through ``esc``; the comparisons' table is None without a comparison."""
    judge = bundle.summary["judge"]
    estimator = esc(judge.get("estimator"))
    views = [f"{estimator} (declared)", "human-only", "judge-only (not valid)", "λ", "ρ", "n<sub>eff</sub>"]
    comps = judge.get("comparisons") or []
    comp_table = None
    if comps:
        rows = []
        for c in comps:
            bias = c.get("judge_bias") or {}
            rows.append(
                [
                    esc(bundle.label(c["candidate"])),
                    esc(bundle.label(c["baseline"])),
                    esc(metric_name(c["key"])),
                    *_view_cells(c, True),
                    *_figures(c),
                    f"{number(bias.get('estimate'), signed=True)} {_interval(bias)}",
                    p_value(bias.get("p_value")),
                ]
            )
        heads = ["candidate", "baseline", "cutoff", *views, "judge bias [interval]", "p (bias)"]
        comp_table = (heads, rows, "lll" + "r" * 8)
    rows = [
        [esc(bundle.label(name)), esc(metric_name(key)), *_view_cells(e, False), *_figures(e)]
        for name, keys in (judge.get("systems") or {}).items()
        for key, e in keys.items()
    ]
    return comp_table, (["system", "cutoff", *views], rows, "ll" + "r" * 6)


def about(bundle: Bundle) -> str:
    """The section's opening words (plain text): whose labels, how many queries, the agreement and the views."""
    judge = bundle.summary["judge"]
    agreement = judge.get("agreement") or {}
    n, m = int(judge.get("n_labelled", 0)), int(judge.get("n_unlabelled", 0))
    drawn = "within each segment" if stratifies_labels(str(judge.get("labelled_queries"))) else "at random"
    kappa = agreement.get("weighted_kappa")
    return (
        f"Human judgments of {_queries(n)} (drawn {drawn}) and {_who(judge)}'s judgments of these and {m} more. "
        f"Agreement of the two on the {agreement.get('n_documents', 0)} documents both judged: Cohen's "
        f"{agreement.get('kappa_weights', 'quadratic')}-weighted κ = {number(kappa, 3)}. The means, intervals, "
        f"comparisons and decision of this report are the {judge.get('estimator')} estimator's "
        f"({exact_share(judge.get('confidence', 0.95))} t intervals, each part's weighted t at their "
        f"Welch-Satterthwaite degrees of freedom); human-only is the labelled queries "
        f"alone; judge-only treats the judge's labels as the truth and is {NOT_VALID}. λ is the weight of the "
        f"judge's labels, ρ the correlation of the human and judge values over the labelled queries, n_eff the "
        f"number of human-labelled queries the estimate is worth; the judge's bias is the mean over the labelled "
        f"queries of the human difference minus the judge's, with its interval and p-value."
    )


def html_lead(bundle: Bundle) -> str:
    """``report.html``'s sentences beside the verdict ("" without a judge)."""
    lines = lead(bundle)
    if not lines:
        return ""
    return "<div class='lead' id='judge-lead'>" + "".join(f"<p>{html_text(t)}</p>" for t in lines) + "</div>"


def html_section(bundle: Bundle) -> str:
    """``report.html``'s section "Judgments from a model" ("" without a judge)."""
    if not bundle.summary.get("judge"):
        return ""
    comps, means = tables(bundle, html_text)
    parts = [f"<h2 id='judge'>Judgments from a model</h2><p class='muted'>{html_text(about(bundle))}</p>"]
    if comps is not None:
        parts += ["<h3>Differences from the baseline</h3>", html_table(comps)]
    parts += ["<h3>System means</h3>", html_table(means)]
    return "".join(parts)


def md_lead(bundle: Bundle) -> list[str]:
    """``report.md``'s sentences beside the verdict, each followed by an empty line (none without a judge)."""
    return [line for t in lead(bundle) for line in (md_text(t), "")]


def md_section(bundle: Bundle) -> list[str]:
    """``report.md``'s section "Judgments from a model" (no lines without a judge)."""
    if not bundle.summary.get("judge"):
        return []
    comps, means = tables(bundle, md_text)
    lines = ["", "Judgments from a model:", "", md_text(about(bundle))]
    if comps is not None:
        heads, rows, align = comps
        lines += ["", "Differences from the baseline:", "", *md_table(_md_heads(heads), rows, align)]
    heads, rows, align = means
    lines += ["", "System means:", "", *md_table(_md_heads(heads), rows, align)]
    return lines


def _md_heads(heads: list[str]) -> list[str]:
    return [h.replace("n<sub>eff</sub>", "n_eff") for h in heads]
