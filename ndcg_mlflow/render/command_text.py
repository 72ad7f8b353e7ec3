"""What the ``plan`` command prints (the plan of each comparison) and the sensitivity table at one cutoff."""

from __future__ import annotations

import math
from typing import Any

from ..rules import cutoff_key, cutoff_of_label, key_label, metric_name
from ..statistics.planning import MOST_QUERIES, SD_LEVEL, WEIGHTS_LEVEL
from .format import TERMINAL, exact, exact_share, number, term_system, term_text, text_table
from .words import plan_reason


def _count(n: int | None, *, beyond: bool = False) -> str:
    """A number of queries; None: ``>MOST_QUERIES`` when ``beyond`` (a finite sigma and a positive margin leave
    only that reason), else undefined."""
    if n is None:
        return f">{MOST_QUERIES:,}" if beyond else TERMINAL
    return f"{n:,}"


def _planned_at(c: dict[str, Any]) -> str:
    """The bounds a declared decision's plan was made at, in words (none when there is no plan)."""
    if c["queries_needed"] is None or not math.isfinite(c["sd_bound"]):
        return ""
    text = f", planned at σ {number(c['sd_bound'])} (its {c['sd_level']:.0%} upper bound)"
    if c["weights_bound"] > 0:
        level = f"{c['weights_level']:.0%}"
        text += f" and the weights' log-scale σ {number(c['weights_bound'], 2)} (its {level} upper bound)"
    return text


def format_plan(plan: dict[str, Any]) -> str:
    """The ``plan`` command's output: the table, what its columns mean, and the declared decision's plan."""
    models = plan["models"]
    power, margin = exact(plan["power"]), exact(plan["margin"])  # (as given: two different margins never print alike)
    lines = [
        f"{term_text(plan['name'])} ({term_text(plan['source'])}) — each candidate against baseline "
        f"{term_system(plan['baseline'], models)}: the {exact_share(plan['confidence'])} two-sided weighted t "
        f"interval the decision reads, power {power}, margin {margin}"
    ]
    heads = ["candidate", "cutoff", "n", "n_eff", "delta", "σ", "σ bound", "mde", f"queries for {margin}"]
    body = [
        [
            term_system(r["candidate"], models),
            key_label(r["key"]),
            str(r["n_paired"]),
            f"{r['n_eff']:.1f}",
            number(r["delta"], signed=True, missing=TERMINAL),
            number(r["sd"], missing=TERMINAL),
            number(r["sd_bound"], missing=TERMINAL),
            number(r["mde"], missing=TERMINAL),
            _count(r["queries_needed"], beyond=math.isfinite(r["sd"])),
        ]
        for r in plan["rows"]
    ]
    lines += text_table(heads, body, left=2)
    lines += [
        "n: queries valid for both systems; n_eff: (Σw)²/Σw²; delta: the weighted mean difference",
        "σ: the per-query standard deviation of the differences that the weighted standard error implies (se·√n_eff)",
        f"σ bound: the upper end of σ's one-sided {SD_LEVEL:.0%} confidence interval from these queries "
        f"(σ·√(ν/χ²_{{{1 - SD_LEVEL:.1f}, ν}}), ν the test's degrees of freedom), which the queries are planned at",
        f"mde: the smallest distance between the true difference and a threshold that the interval's lower end "
        f"clears with power {power} at these n queries",
        f"queries for {margin}: the queries, at σ bound and the same spread of weights, at which it clears a threshold "
        f"{margin} below the true difference with power {power} (a non-inferiority margin of {margin} for a "
        f"candidate as good as the baseline; Sakai's topic set size design)",
    ]
    bounds = [r["weights_bound"] for r in plan["rows"] if r.get("weights_bound", 0) > 0]
    if bounds:
        lines.append(
            f"unequal weights: planned as if the evaluation's weights were lognormal with their logarithms' standard "
            f"deviation at its {WEIGHTS_LEVEL:.0%} upper confidence bound from these queries (up to "
            f"{number(max(bounds), 2)}), or these weights resampled where they are more unequal: a pilot rarely holds "
            f"the heaviest weights of a larger evaluation, and the plan grows fast with their spread"
        )
    decision = plan["decision"]
    if decision:
        lines += [
            "",
            f"the declared decision ({decision['rule'].replace('_', '-')} at {metric_name(decision['key'])}, margin "
            f"{exact(decision['margin'])}), power {power}:",
        ]
        for c in decision["candidates"]:
            reason = plan_reason(c["reason"])
            if reason and c["queries_needed"] is None:
                what = reason
            else:
                what = (
                    f"{'detectable' if c['detectable'] else 'not detectable'} at these queries (mde "
                    f"{number(c['mde'], missing=TERMINAL)} against a distance of {number(c['distance'])}; power now "
                    f"{number(c['current_power'], 2, missing=TERMINAL)}); {_count(c['queries_needed'])} queries for "
                    f"power {power}" + (f" ({reason})" if reason else "") + _planned_at(c)
                )
            lines.append(f"  {term_system(c['candidate'], models)}: {what}")
    return "\n".join(lines)


def format_sensitivity(table, cutoff: str) -> str:
    """Terminal rendering at one cutoff: each system's mean and each comparison's difference per alternative."""
    if table is None or table.empty:
        return "no sensitivity table"
    t = table[table["cutoff"] == cutoff]
    name = metric_name(cutoff_key(cutoff_of_label(cutoff)))
    lines = [f"sensitivity at {name} (one rule changed at a time; declared value first):"]
    columns = []
    for (kind, system, baseline), _ in t.groupby(["kind", "system", "baseline"], sort=False):
        columns.append((kind, system, baseline))
    heads = ["rule", "alternative"] + [s if k == "system" else f"{s}-{b}" for k, s, b in columns]
    body = []
    for (rule, alt), group in t.groupby(["rule", "alternative"], sort=False):
        cells = [rule, alt]
        for kind, system, baseline in columns:
            r = group[(group["kind"] == kind) & (group["system"] == system) & (group["baseline"] == baseline)]
            if r.empty:
                cells.append("")
                continue
            r = r.iloc[0]
            if rule == "declared":
                cells.append(_number(r["value"], signed=kind == "comparison"))
            else:
                mark = " FLIP" if r["sign_flip"] else ""
                cells.append(_number(r["change"], signed=True) + mark)
        body.append(cells)
    lines += text_table(heads, body, left=2)
    flips = t[t["sign_flip"]]
    if flips.empty:
        lines.append("no alternative flips the sign of a comparison at this cutoff.")
    else:
        for _, r in flips.iterrows():
            before, after = _number(r["declared"], signed=True), _number(r["value"], signed=True)
            lines.append(
                f"FLIP: {r['system']} vs {r['baseline']} changes sign under {r['rule']} = "
                f"{r['alternative']} ({before} -> {after})"
            )
    lines.append(
        "(rows after 'declared' show the change from the declared value; 'undefined': no query is left in that mean)"
    )
    return "\n".join(lines)


def _number(x, *, signed: bool) -> str:
    """A mean or change for the terminal; an undefined one (NaN: every query excluded) as 'undefined'."""
    return number(float(x), signed=signed, missing=TERMINAL)
