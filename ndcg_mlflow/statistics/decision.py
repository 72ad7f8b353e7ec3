"""The declared decision: does every candidate pass the spec's rule against the baseline?

The spec's ``decision`` section names a compared key, a rule and a margin ``m`` (and optionally a bound on the
corrected p-value). Each candidate is judged on its paired differences candidate − baseline at that key, on the
queries valid for both: ``[lo, hi]`` is the weighted t interval of their weighted mean at the spec's confidence
(:func:`ndcg_mlflow.statistics.inference.t_interval`: the bias-corrected weighted standard error, the smaller of
Satterthwaite's and Kish's degrees of freedom), whatever ``uncertainty.method`` the reported intervals use. Under the
null (two exchangeable systems) its lower end lies above 0 at most (1 - confidence) / 2 of the time, within simulation
error, for 15 to 100 queries and lognormal weights up to σ = 2; the bootstrap intervals, BCa above all, did not
(``benchmarks/gate_sim.py``).

- ``superiority``: the candidate passes when ``lo > m``: the whole interval lies above the margin, so the
  candidate is better by more than ``m``.
- ``non_inferiority``: the candidate passes when ``lo > -m``: the whole interval lies above ``-m``, so the
  candidate is worse by less than ``m``, if at all.
- ``max_p`` (optional): the candidate also needs a corrected p-value (the comparison's ``p_corrected``, after the
  declared correction over the whole family) at or below it. For non-inferiority the p-value tests a difference of
  0, not the margin, so ``max_p`` is a further requirement there, not the test of the rule.

A candidate whose interval is undefined fails, saying why (no query valid for both; one query; weights that
leave less than one degree of freedom). The decision passes only when every candidate passes: with several
candidates, one failing candidate fails the evaluation.

The paired values are per query (the local engine), or per random group of queries (the grouped Spark path: each
group's weighted mean difference, weighted by the group's weight sum), through the same function.

Guardrails (``decision.guardrails``), each judged per candidate beside the main rule:

- ``segments: {rule, margin}``: the rule above, with its own margin, in every declared segment: each segment's
  weighted t interval (on its paired queries at the decision's key) must lie above the threshold. A segment whose
  interval is undefined (one paired query, say) fails: nothing shows it did not lose.
- ``regressions: {delta, max_share}``: the weighted share of paired queries that lose more than ``delta``
  (``candidate - baseline < -delta``) must be at most ``max_share``, read at the upper end of its interval at the
  spec's confidence (:func:`ndcg_mlflow.statistics.risk.regressed_share`: Clopper-Pearson on Kish's n_eff, above 0 even
  when no query regressed). At a true share equal to ``max_share`` it passed at most 2.4% of the time for a promised
  2.5%, from 5 to 300 queries, uniform to lognormal σ = 2 weights (``benchmarks/gate_sim.py``).

A candidate passes only when the main rule and every guardrail pass. This is an intersection-union test (Berger,
1982): each part is a one-sided test at level (1 - confidence) / 2 and the decision passes only when all of them
reject, so the chance of passing a candidate that fails any one part is at most that level without any
adjustment of alpha. The price is power: the chance of passing is at most the smallest of the parts' chances, so a
spec with guardrails needs more queries to pass a candidate that is in fact good.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..render.format import distinct, distinct_share, exact, exact_share, system_label
from ..rules import metric_name, non_inferiority, superiority
from ..spec import Decision
from . import inference as stats

PASS, FAIL = "pass", "fail"
INTERVAL = "weighted t"  # the interval the rule reads (stats.t_interval), as summary.json names it


def threshold(decision: Decision) -> float:
    """The value the lower end of the interval must exceed: ``+margin`` or ``-margin``."""
    return rule_threshold(decision.rule, decision.margin)


def rule_threshold(rule: str, margin: float) -> float:
    """The threshold of a rule with a margin (the decision's, or a segments guardrail's): ``+margin`` under
    superiority, ``-margin`` under non-inferiority."""
    return margin if superiority(rule) else -margin


def decide(
    decision: Decision,
    comparisons: list[dict[str, Any]],
    confidence: float,
    paired: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]],
    *,
    unit: tuple[str, str] = ("query", "queries"),
    segment_paired: Mapping[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] | None = None,
) -> dict[str, Any]:
    """The decision as recorded in ``summary.json``: the rule, each candidate's numbers and verdict, the outcome.

    ``paired[(candidate, key)]``: the paired differences and their weights (one per ``unit``, singular and plural:
    a query, or a group of queries) whose :func:`~ndcg_mlflow.statistics.inference.t_interval` the rule reads; a
    comparison without them has none. ``segment_paired[(candidate, key, segment)]``: the same per segment (the segments
    guardrail)."""
    bound = threshold(decision)
    label = metric_name(decision.key)
    rows = []
    empty = np.empty(0)
    for c in comparisons:
        if c["key"] != decision.key:
            continue
        d, w = paired.get((c["candidate"], decision.key), (empty, empty))
        lo, hi, df = stats.t_interval(d, w, confidence)
        p = c.get("p_corrected")
        reasons = []
        if not math.isfinite(lo):
            reasons.append(f"no interval at {label}: " + undefined_reason(d, w, df, unit))
        elif not lo > bound:
            a, b = distinct(lo, bound)
            reasons.append(f"the interval's lower end {a} is not above {b}")
        if decision.max_p is not None and (p is None or not math.isfinite(p) or not p <= decision.max_p):
            reasons.append(
                "the corrected p-value {} is above {}".format(*distinct(p, decision.max_p, signed=False, least=4))
                if p is not None and math.isfinite(p)
                else "no corrected p-value"
            )
        if not reasons:
            a, b = distinct(lo, bound)
            why = f"the interval's lower end {a} is above {b}" + (
                " and the corrected p-value {} is at most {}".format(
                    *distinct(p, decision.max_p, signed=False, least=4)
                )
                if decision.max_p is not None and p is not None
                else ""
            )
        rows.append(
            {
                "candidate": c["candidate"],
                "baseline": c["baseline"],
                "delta": c.get("delta"),
                "ci_low": lo,
                "ci_high": hi,
                "df": df,
                "interval": INTERVAL,
                "p_corrected": p,
                "n_paired": c.get("n_paired"),
                "threshold": bound,
                "outcome": FAIL if reasons else PASS,
                "reason": "; ".join(reasons) if reasons else why,
            }
        )
        if decision.guardrails.segments is not None or decision.guardrails.regressions is not None:
            _guard(rows[-1], decision, c, confidence, segment_paired or {})
    outcome = PASS if rows and all(r["outcome"] == PASS for r in rows) else FAIL
    extra = {"guardrails": guardrails_record(decision)} if "guardrails" in (rows[0] if rows else {}) else {}
    return {
        "key": decision.key,
        "rule": decision.rule,
        "margin": decision.margin,
        "max_p": decision.max_p,
        "confidence": confidence,
        "threshold": bound,
        "interval": INTERVAL,
        "outcome": outcome,
        "statement": statement(decision, confidence),
        "candidates": rows,
        **extra,
    }


def _guard(
    row: dict[str, Any],
    decision: Decision,
    comparison: Mapping[str, Any],
    confidence: float,
    segment_paired: Mapping[tuple[str, str, str], tuple[np.ndarray, np.ndarray]],
) -> None:
    """Judge the candidate's guardrails; the row's ``outcome`` becomes the main rule's and theirs together (the
    rule's own in ``rule_outcome`` and ``rule_reason``)."""
    g = decision.guardrails
    checks: list[dict[str, Any]] = []
    if g.segments is not None:
        bound = rule_threshold(g.segments.rule, g.segments.margin)
        parts = []
        for (cand, key, segment), (d, w) in segment_paired.items():
            if cand != row["candidate"] or key != decision.key:
                continue
            lo, hi, df = stats.t_interval(d, w, confidence)
            if not math.isfinite(lo):
                why, ok = "no interval: " + undefined_reason(d, w, df), False
            else:
                ok = lo > bound
                a, b = distinct(lo, bound)
                why = f"lower end {a} is {'' if ok else 'not '}above {b}"
            parts.append(
                {
                    "segment": segment,
                    "delta": float(stats.weighted_mean(d, w)) if d.size else float("nan"),
                    "ci_low": lo,
                    "ci_high": hi,
                    "df": df,
                    "n_paired": int(d.size),
                    "outcome": PASS if ok else FAIL,
                    "reason": why,
                }
            )
        failed = [p for p in parts if p["outcome"] == FAIL]
        checks.append(
            {
                "guardrail": "segments",
                "rule": g.segments.rule,
                "margin": g.segments.margin,
                "threshold": bound,
                "outcome": FAIL if failed or not parts else PASS,
                "reason": (
                    "segment " + "; segment ".join(f"'{p['segment']}': {p['reason']}" for p in failed)
                    if failed
                    else f"every segment's lower end is above {exact(bound, signed=True)}"
                    if parts
                    else "no segment was compared"
                ),
                "segments": parts,
            }
        )
    if g.regressions is not None:
        share = comparison.get("regressed_share") or {}
        hi = share.get("ci_high", float("nan"))
        ok = math.isfinite(hi) and hi <= g.regressions.max_share
        what = f"queries losing more than {exact(g.regressions.delta)}"
        checks.append(
            {
                "guardrail": "regressions",
                "delta": g.regressions.delta,
                "max_share": g.regressions.max_share,
                "share": share.get("share", float("nan")),
                "ci_low": share.get("ci_low", float("nan")),
                "ci_high": hi,
                "outcome": PASS if ok else FAIL,
                "reason": (
                    f"no interval of the share of {what}"
                    if not math.isfinite(hi)
                    else f"the share of {what} is {share['share']:.1%}, at most "
                    + "{} (the interval's upper end), {} {}".format(
                        distinct_share(hi, g.regressions.max_share)[0],
                        "within" if ok else "above",
                        exact_share(g.regressions.max_share),
                    )
                ),
            }
        )
    row["rule_outcome"], row["rule_reason"] = row["outcome"], row["reason"]
    row["guardrails"] = checks
    failed = [c for c in checks if c["outcome"] == FAIL]
    if failed:
        row["outcome"] = FAIL
        row["reason"] += "; " + "; ".join(f"{c['guardrail']} guardrail fails: {c['reason']}" for c in failed)
    else:
        row["reason"] += "; " + "; ".join(f"{c['guardrail']} guardrail passes: {c['reason']}" for c in checks)


def undetectable_notes(comparisons: list[dict[str, Any]], decision: Decision) -> list[str]:
    """:func:`undetectable_message` of each candidate's comparison at the decision's key."""
    out = []
    for c in comparisons:
        if c["key"] == decision.key and "mde" in c:
            text = undetectable_message(c["candidate"], c["n_paired"], c["mde"], decision)
            if text:
                out.append(text)
    return out


def undetectable_message(candidate: str, n: int, mde: float, decision: Decision) -> str | None:
    """The warning when a non-inferiority margin is below what ``n`` paired queries can detect (``mde``: the
    minimum detectable difference at 80% power, :func:`ndcg_mlflow.statistics.planning.mde`); None otherwise."""
    if not non_inferiority(decision.rule) or not math.isfinite(mde) or mde <= decision.margin:
        return None
    return (
        f"{candidate}: the non-inferiority margin {exact(decision.margin)} at {metric_name(decision.key)} is below "
        f"what {n} paired queries can detect (at 80% power the smallest detectable difference is {mde:.4g}): "
        "a candidate as good as the baseline will often fail; more queries, or a wider margin, are needed"
    )


def guardrails_record(decision: Decision) -> dict[str, Any]:
    """The declared guardrails and how they combine with the rule, as ``summary.json`` records them."""
    g = decision.guardrails
    return {
        "segments": None if g.segments is None else {"rule": g.segments.rule, "margin": g.segments.margin},
        "regressions": None
        if g.regressions is None
        else {"delta": g.regressions.delta, "max_share": g.regressions.max_share},
        "multiplicity": (
            "an intersection-union test: a candidate passes only when the rule and every guardrail pass, each at "
            "the spec's confidence, so no adjustment of alpha is needed; power is at most the smallest of the "
            "parts' (more queries are needed to pass a good candidate)"
        ),
    }


def undefined_reason(d: np.ndarray, w: np.ndarray, df: float, unit: tuple[str, str] = ("query", "queries")) -> str:
    """Why :func:`~ndcg_mlflow.statistics.inference.t_interval` of these paired values is undefined, in words."""
    one, units = unit
    if d.size == 0:
        return f"no {one} is valid for both systems"
    if d.size == 1:
        return f"only one {one} is valid for both systems (a t interval needs at least 2)"
    return (
        f"the weights of the {d.size} paired {units} leave {df:.3g} degrees of freedom (an effective number of "
        f"{units} of {stats.effective_n(w):.3g}); a t interval needs at least 1: the mean rests on about one "
        f"{one}"
    )


def statement(decision: Decision, confidence: float) -> str:
    """The rule in words, as the report states it."""
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
    """One line for a CI log: ``decision: FAIL — non-inferiority at nDCG@10 ...: cand fail (...)``; a model
    system named with its model (``models``: ``summary.json``'s)."""
    parts = [f"{system_label(r['candidate'], models)} {r['outcome']} ({r['reason']})" for r in decision["candidates"]]
    return (
        f"decision: {decision['outcome'].upper()} — {decision['statement']} "
        + ("; ".join(parts) if parts else "no candidate was compared")
        + "."
    )
