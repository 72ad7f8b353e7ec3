"""The statistics' results in words: the decision's reasons and statement, the plan's reasons, the segments'
consistency note, the warning of an undetectable margin, the correction family's statement, why studentized
intervals are undefined and which sensitivity alternatives were not computed, built from the numbers the
statistics return.

The statistics (:mod:`ndcg_mlflow.statistics`) return numbers and, where a verdict needs explaining, what
explains it as data (a kind with its numbers); this module writes them, numbers through :mod:`.format`. The texts
stored in the output folder and in MLflow (``summary.json``'s decision, its notes, ``comparison_family``,
``correction_family`` and ``segment_consistency``, ``comparisons.csv``'s ``plan_reason``) are written here when
the output is made (:func:`ndcg_mlflow.result.summary_of`, ``EvaluationResult.comparisons`` and ``all_notes``), so
every place shows the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..rules import corrects, metric_name, non_inferiority, superiority
from .format import distinct, distinct_share, exact, exact_share, number, system_label

# --------------------------------------------------------------------------- the decision


def undefined_reason(reason: Mapping[str, Any]) -> str:
    """Why a t interval of paired values is undefined (``reason``: ``n``, ``df``, ``n_eff`` and ``unit``, the
    singular and plural of what was paired: a query, a group of queries)."""
    one, units = reason.get("unit", ("query", "queries"))
    n = reason["n"]
    if n == 0:
        return f"no {one} is valid for both systems"
    if n == 1:
        return f"only one {one} is valid for both systems (a t interval needs at least 2)"
    return (
        f"the weights of the {n} paired {units} leave {reason['df']:.3g} degrees of freedom (an effective number of "
        f"{units} of {reason['n_eff']:.3g}); a t interval needs at least 1: the mean rests on about one "
        f"{one}"
    )


def _rule_part(part: Mapping[str, Any]) -> str:
    kind = part["kind"]
    if kind == "no_interval":
        return f"no interval at {metric_name(part['key'])}: " + undefined_reason(part)
    if kind == "lower_end":
        a, b = distinct(part["lo"], part["bound"])
        text = f"the interval's lower end {a} is {'' if part['above'] else 'not '}above {b}"
        if part.get("max_p") is not None and part.get("p") is not None:
            text += " and the corrected p-value {} is at most {}".format(
                *distinct(part["p"], part["max_p"], signed=False, least=4)
            )
        return text
    if kind == "p_above":
        return "the corrected p-value {} is above {}".format(*distinct(part["p"], part["max_p"], signed=False, least=4))
    if kind == "no_p":
        return "no corrected p-value"
    raise ValueError(f"no words for a reason of kind {kind!r}")


def _segment_reason(part: Mapping[str, Any]) -> str:
    """A segment's verdict under the segments guardrail."""
    why = part["reason"]
    if why["kind"] == "no_interval":
        return "no interval: " + undefined_reason(why)
    a, b = distinct(why["lo"], why["bound"])
    return f"lower end {a} is {'' if why['above'] else 'not '}above {b}"


def _check_reason(check: Mapping[str, Any]) -> str:
    """A guardrail's verdict, from its numbers (and, for segments, each segment's worded verdict)."""
    if check["guardrail"] == "segments":
        parts = check["segments"]
        failed = [p for p in parts if p["outcome"] == "fail"]
        if failed:
            return "segment " + "; segment ".join(f"'{p['segment']}': {p['reason']}" for p in failed)
        if parts:
            return f"every segment's lower end is above {exact(check['threshold'], signed=True)}"
        return "no segment was compared"
    what = f"queries losing more than {exact(check['delta'])}"
    hi = check["ci_high"]
    if not math.isfinite(hi):
        return f"no interval of the share of {what}"
    return f"the share of {what} is {check['share']:.1%}, at most " + "{} (the interval's upper end), {} {}".format(
        distinct_share(hi, check["max_share"])[0],
        "within" if check["outcome"] == "pass" else "above",
        exact_share(check["max_share"]),
    )


def _worded(entry: Mapping[str, Any], after: str, key: str, text: str) -> dict[str, Any]:
    """``entry`` with ``key`` set to ``text``: in its place when it has it, else right after ``after``."""
    out: dict[str, Any] = {}
    for k, v in entry.items():
        if k == key:
            continue
        out[k] = v
        if k == after:
            out[key] = text
    return out


def _candidate(row: Mapping[str, Any]) -> dict[str, Any]:
    rule = "; ".join(_rule_part(p) for p in row["reason"])
    if "guardrails" not in row:
        return _worded(row, "outcome", "reason", rule)
    checks = []
    for c in row["guardrails"]:
        if c["guardrail"] == "segments":
            c = {**c, "segments": [_worded(p, "outcome", "reason", _segment_reason(p)) for p in c["segments"]]}
        checks.append(_worded(c, "outcome", "reason", _check_reason(c)))
    failed = [c for c in checks if c["outcome"] == "fail"]
    verdict = "fails" if failed else "passes"
    reason = rule + "; " + "; ".join(f"{c['guardrail']} guardrail {verdict}: {c['reason']}" for c in failed or checks)
    out = _worded(row, "outcome", "reason", reason)
    out["rule_reason"] = rule
    out["guardrails"] = checks
    return out


def decision_record(decision: Mapping[str, Any] | None, declared: Any) -> dict[str, Any] | None:
    """The decision as ``summary.json`` records it: the numbers of
    :func:`~ndcg_mlflow.statistics.decision.decide` with the rule's :func:`statement` after the outcome and each
    candidate's, guardrail's and segment's ``reason`` in words (``declared``: the spec's decision section)."""
    if decision is None:
        return None
    out = _worded(decision, "outcome", "statement", statement(declared, decision["confidence"]))
    out["candidates"] = [_candidate(r) for r in decision["candidates"]]
    return out


def statement(decision: Any, confidence: float) -> str:
    """The rule in words, as the report states it (``decision``: the spec's decision section)."""
    from ..statistics.decision import INTERVAL, rule_threshold, threshold

    label = metric_name(decision.key)
    what = "better than the baseline by more than" if superiority(decision.rule) else "not worse than the baseline by"
    words = (
        f"{decision.rule.replace('_', '-')} at {label}: each candidate passes when the {exact_share(confidence)} "
        f"{INTERVAL} interval of its difference from the baseline lies above "
        f"{exact(threshold(decision), signed=True)} ({what} {exact(decision.margin)})"
    )
    if decision.max_p is not None:
        words += f" and its corrected p-value is at most {exact(decision.max_p)}"
    g = decision.guardrails
    if g.segments is not None:
        t = rule_threshold(g.segments.rule, g.segments.margin)
        words += (
            f"; guardrail: in every segment the interval lies above {exact(t, signed=True)} "
            f"({g.segments.rule.replace('_', '-')})"
        )
    if g.regressions is not None:
        words += (
            f"; guardrail: at most {exact_share(g.regressions.max_share)} of the queries lose more than "
            f"{exact(g.regressions.delta)} (the upper end of the share's interval)"
        )
    return words + "; the decision passes only when every candidate passes."


def summary_line(decision: dict[str, Any], models: Mapping[str, Any] | None = None) -> str:
    """One line for a CI log from ``summary.json``'s decision (:func:`decision_record`): ``decision: FAIL —
    non-inferiority at nDCG@10 ...: cand fail (...)``; a model system named with its model (``models``:
    ``summary.json``'s)."""
    parts = [f"{system_label(r['candidate'], models)} {r['outcome']} ({r['reason']})" for r in decision["candidates"]]
    return (
        f"decision: {decision['outcome'].upper()} — {decision['statement']} "
        + ("; ".join(parts) if parts else "no candidate was compared")
        + "."
    )


def undetectable_notes(comparisons: list[dict[str, Any]], decision: Any) -> list[str]:
    """:func:`undetectable_message` of each candidate's comparison at the decision's key (``decision``: the spec's
    decision section)."""
    out = []
    for c in comparisons:
        if c["key"] == decision.key and "mde" in c:
            text = undetectable_message(c["candidate"], c["n_paired"], c["mde"], decision)
            if text:
                out.append(text)
    return out


def undetectable_message(candidate: str, n: int, mde: float, decision: Any) -> str | None:
    """The warning when a non-inferiority margin is below what ``n`` paired queries can detect (``mde``: the
    minimum detectable difference at 80% power, :func:`ndcg_mlflow.statistics.planning.mde`); None otherwise."""
    if not non_inferiority(decision.rule) or not math.isfinite(mde) or mde <= decision.margin:
        return None
    return (
        f"{candidate}: the non-inferiority margin {exact(decision.margin)} at {metric_name(decision.key)} is below "
        f"what {n} paired queries can detect (at 80% power the smallest detectable difference is {mde:.4g}): "
        "a candidate as good as the baseline will often fail; more queries, or a wider margin, are needed"
    )


# --------------------------------------------------------------------------- segments


def consistency_note(entry: Mapping[str, Any]) -> str | None:
    """The note of a segments' consistency entry (:func:`ndcg_mlflow.statistics.segments.consistency`) whose
    overall difference disagrees with segments holding more than half of the paired weight; None when it
    agrees."""
    if entry["agrees"]:
        return None
    return (
        f"{entry['candidate']} at {metric_name(entry['key'])}: the overall difference is "
        f"{number(entry['delta'], signed=True)}, but segments holding "
        f"{distinct_share(entry['opposite_weight_share'], 0.5, least=0)[0]} of the paired weight (more than half) "
        f"moved the other way ({', '.join(entry['opposite_segments'])}): a few segments with larger differences "
        f"carry the mean"
    )


def consistency_record(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``summary.json``'s ``segment_consistency``: each entry with its :func:`consistency_note` last, when it has
    one."""
    return [{**e, "note": note} if (note := consistency_note(e)) is not None else e for e in entries]


# --------------------------------------------------------------------------- the statistics' notes and the family


def studentized_note(too_few: Mapping[str | None, float]) -> str:
    """Why studentized intervals are undefined (empty, –): the scopes (None: all queries, else a segment's label)
    whose resampled queries fall short of :data:`~ndcg_mlflow.statistics.inference.STUDENTIZED_MIN_N_EFF`
    effective ones, each with its smallest n_eff (``Analysis.too_few``)."""
    from ..statistics.inference import STUDENTIZED_MIN_N_EFF

    where = "; ".join(
        f"{'all queries' if scope is None else f'segment {scope!r}'} (n_eff {n_eff:.3g})"
        for scope, n_eff in too_few.items()
    )
    return (
        f"studentized intervals are undefined with fewer than {STUDENTIZED_MIN_N_EFF} effective queries "
        f"(Kish's n_eff; the number of queries under uniform weights): {where}; the other methods (bca, percentile) "
        "give intervals there"
    )


def left_out_note(entry: Mapping[str, Any]) -> str:
    """The note of a sensitivity alternative the engine could not compute (an entry of the result's
    ``sensitivity_left_out``: :func:`ndcg_mlflow.statistics.sensitivity.collect_alternatives`)."""
    lacking = entry["systems"]
    return (
        f"sensitivity: {entry['rule']} = {entry['alternative']} is not computed on the Spark engine: "
        f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no rank column, and "
        f"Spark keeps no order of the rows (locally, their line order); give a rank column to "
        f"see this alternative"
    )


def statistics_notes(result: Any) -> list[str]:
    """What the statistics of ``result`` (an :class:`~ndcg_mlflow.result.EvaluationResult`) found that its readers
    need told, in words, after the engine's notes: the sensitivity alternatives not computed, the scopes without a
    studentized interval, the segments whose differences disagree with the overall one, and (with a decision) each
    non-inferiority margin below what the paired queries can detect."""
    out = [left_out_note(e) for e in result.sensitivity_left_out]
    a = result.analysis
    if a is None:
        return out
    if a.too_few:
        out.append(studentized_note(a.too_few))
    out += [n for c in a.consistency if (n := consistency_note(c)) is not None]
    if result.decision is not None and result.spec.decision is not None:
        out += undetectable_notes(a.comparisons, result.spec.decision)
    return out


def family_statement(family: Mapping[str, Any] | None) -> str:
    """The sentence that states the correction's family (``Analysis.correction_family``:
    :func:`ndcg_mlflow.statistics.comparisons.correction_family`); empty without one."""
    if family is None:
        return ""
    units = f" x (1 + {family['segments']} segments)" if family["segments"] else ""
    statement = (
        f"{family['size']} comparisons: each of {family['candidates']} candidate(s) against baseline "
        f"'{family['baseline']}' at each of {family['cutoffs']} cutoff(s){units}; correction {family['correction']}"
    )
    if family["without_p_value"] and corrects(family["correction"]):
        statement += f" ({family['without_p_value']} without a p-value, each counted as p = 1)"
    return statement


def family_record(family: Mapping[str, Any]) -> dict[str, Any]:
    """``summary.json``'s ``correction_family``: the family's size, correction, test, statement (in words:
    :func:`family_statement`), the members without a p-value and the members."""
    return {
        "size": family["size"],
        "correction": family["correction"],
        "test": family["test"],
        "statement": family_statement(family),
        "without_p_value": family["without_p_value"],
        "members": family["members"],
    }


# --------------------------------------------------------------------------- planning


def _plan_part(part: Mapping[str, Any]) -> str:
    from ..statistics.planning import MOST_EXTRAPOLATION, MOST_QUERIES, SD_LEVEL

    kind = part["kind"]
    if kind == "paired":
        return "no query is valid for both systems" if part["n"] == 0 else "only one query is valid for both systems"
    if kind == "degrees_of_freedom":
        return f"the weights leave {part['df']:.3g} degrees of freedom: the interval needs at least 1"
    if kind == "difference_within_margin":
        return "the observed difference does not exceed the margin"
    if kind == "zero_margin":
        return "the margin is 0: no number of queries detects a distance of 0"
    if kind == "beyond":
        return f"more than {part['queries']:,} queries would be needed"
    if kind != "pilot_too_small":
        raise ValueError(f"no words for a plan's reason of kind {kind!r}")
    n, low = part["pilot"], number(part["low"], signed=True)
    pilot = f"a pilot of about {n:,} queries" if n is not None else f"a pilot of more than {MOST_QUERIES:,} queries"
    shown = (
        f"its difference ({number(part['observed'], signed=True)}) does not stand clear of the margin "
        f"({exact(part['margin'])})"
    )
    if "known" not in part:
        return (
            f"the pilot is too small to plan from: {shown}: the lower end of its one-sided {SD_LEVEL:.0%} "
            f"confidence interval is {low}; {pilot} with the same spread would tell whether the difference exceeds "
            f"the margin"
        )
    needed = part["needed"]
    plan = f"{needed:,} queries" if needed is not None else f"more than {MOST_QUERIES:,} queries"
    return (
        f"the pilot is too small to plan from: {shown} by enough: at the lower end of its one-sided "
        f"{SD_LEVEL:.0%} confidence interval ({low}) the plan would be {plan}, more than "
        f"{MOST_EXTRAPOLATION} times the {part['known']:,} that the observed difference would need; {pilot} with the "
        f"same spread would tell whether the difference exceeds the margin"
    )


def plan_reason(reason: list[Mapping[str, Any]] | None) -> str | None:
    """Why a plan has no number of queries (the ``reason`` of
    :func:`~ndcg_mlflow.statistics.planning.decision_plan`), in words; None when it has one."""
    return "; ".join(_plan_part(p) for p in reason) if reason else None


def comparisons_record(comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparisons as ``summary.json`` and ``comparisons.csv`` record them: ``plan_reason`` in words."""
    return [{**c, "plan_reason": plan_reason(c["plan_reason"])} if "plan_reason" in c else c for c in comparisons]
