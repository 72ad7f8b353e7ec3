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

from ..rules import superiority
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
    intervals: Mapping[tuple[str, str], tuple[float, float, float]] | None = None,
    interval: str = INTERVAL,
) -> dict[str, Any]:
    """The decision's numbers: the rule, each candidate's numbers and verdict, the outcome; each ``reason`` as data
    (a list of parts, each a ``kind`` with its numbers), which :func:`ndcg_mlflow.render.words.decision_record`
    words, with the rule's statement, for ``summary.json``.

    ``paired[(candidate, key)]``: the paired differences and their weights (one per ``unit``, singular and plural:
    a query, or a group of queries) whose :func:`~ndcg_mlflow.statistics.inference.t_interval` the rule reads; a
    comparison without them has none. ``segment_paired[(candidate, key, segment)]``: the same per segment (the segments
    guardrail). ``intervals[(candidate, key)]``: the interval the rule reads instead, as ``(low, high, degrees of
    freedom)`` (with a judge: the declared estimator's normal interval, infinite degrees of freedom), named
    ``interval``."""
    bound = threshold(decision)
    rows = []
    empty = np.empty(0)
    for c in comparisons:
        if c["key"] != decision.key:
            continue
        d, w = paired.get((c["candidate"], decision.key), (empty, empty))
        if intervals is not None:
            lo, hi, df = intervals.get((c["candidate"], decision.key), (math.nan, math.nan, math.nan))
        else:
            lo, hi, df = stats.t_interval(d, w, confidence)
        p = c.get("p_corrected")
        reasons: list[dict[str, Any]] = []
        if not math.isfinite(lo):
            reasons.append({"kind": "no_interval", "key": decision.key, **undefined(d, w, df, unit)})
        elif not lo > bound:
            reasons.append({"kind": "lower_end", "lo": lo, "bound": bound, "above": False})
        if decision.max_p is not None and (p is None or not math.isfinite(p) or not p <= decision.max_p):
            reasons.append(
                {"kind": "p_above", "p": p, "max_p": decision.max_p}
                if p is not None and math.isfinite(p)
                else {"kind": "no_p"}
            )
        why = reasons or [
            {"kind": "lower_end", "lo": lo, "bound": bound, "above": True, "p": p, "max_p": decision.max_p}
        ]
        rows.append(
            {
                "candidate": c["candidate"],
                "baseline": c["baseline"],
                "delta": c.get("delta"),
                "ci_low": lo,
                "ci_high": hi,
                "df": df,
                "interval": interval,
                "p_corrected": p,
                "n_paired": c.get("n_paired"),
                "threshold": bound,
                "outcome": FAIL if reasons else PASS,
                "reason": why,
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
        "interval": interval,
        "outcome": outcome,
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
    rule's own in ``rule_outcome`` and ``rule_reason``). Each verdict's ``reason`` is data: a segment's, its
    ``kind`` with its numbers; a guardrail's, None (its words are made from its numbers)."""
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
                why, ok = {"kind": "no_interval", **undefined(d, w, df)}, False
            else:
                ok = lo > bound
                why = {"kind": "lower_end", "lo": lo, "bound": bound, "above": ok}
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
                "reason": None,
                "segments": parts,
            }
        )
    if g.regressions is not None:
        share = comparison.get("regressed_share") or {}
        hi = share.get("ci_high", float("nan"))
        ok = math.isfinite(hi) and hi <= g.regressions.max_share
        checks.append(
            {
                "guardrail": "regressions",
                "delta": g.regressions.delta,
                "max_share": g.regressions.max_share,
                "share": share.get("share", float("nan")),
                "ci_low": share.get("ci_low", float("nan")),
                "ci_high": hi,
                "outcome": PASS if ok else FAIL,
                "reason": None,
            }
        )
    row["rule_outcome"], row["rule_reason"] = row["outcome"], row["reason"]
    row["guardrails"] = checks
    if any(c["outcome"] == FAIL for c in checks):
        row["outcome"] = FAIL


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


def undefined(d: np.ndarray, w: np.ndarray, df: float, unit: tuple[str, str] = ("query", "queries")) -> dict[str, Any]:
    """What says why :func:`~ndcg_mlflow.statistics.inference.t_interval` of these paired values is undefined:
    ``n`` (fewer than 2), else ``df`` below 1 with Kish's ``n_eff``; ``unit``: what was paired (singular, plural).
    :func:`ndcg_mlflow.render.words.undefined_reason` words it."""
    return {"n": int(d.size), "df": df, "n_eff": stats.effective_n(w) if d.size >= 2 else float("nan"), "unit": unit}
