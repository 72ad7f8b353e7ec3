"""The declared decision: does every candidate pass the spec's rule against the baseline?

The spec's ``decision`` section names a compared key, a rule and a margin ``m`` (and optionally a bound on the
corrected p-value). Each candidate is judged on its paired comparison with the baseline at that key
(:mod:`ndcg_mlflow.analysis`): ``[lo, hi]`` is the bootstrap interval of the weighted mean of the per-query
differences candidate − baseline, at the spec's confidence, on the queries valid for both.

- ``superiority``: the candidate passes when ``lo > m``: the whole interval lies above the margin, so the
  candidate is better by more than ``m``.
- ``non_inferiority``: the candidate passes when ``lo > -m``: the whole interval lies above ``-m``, so the
  candidate is worse by less than ``m``, if at all.
- ``max_p`` (optional): the candidate also needs a corrected p-value (the comparison's ``p_corrected``, after the
  declared correction over the whole family) at or below it. For non-inferiority the p-value tests a difference of
  0, not the margin, so ``max_p`` is a further requirement there, not the test of the rule.

A candidate whose interval is undefined (no query valid for both) fails, saying so. The decision passes only
when every candidate passes: with several candidates, one failing candidate fails the evaluation.
"""

from __future__ import annotations

import math
from typing import Any

from .rules import metric_name
from .spec import Decision

PASS, FAIL = "pass", "fail"


def threshold(decision: Decision) -> float:
    """The value the lower end of the interval must exceed: ``+margin`` or ``-margin``."""
    return decision.margin if decision.rule == "superiority" else -decision.margin


def decide(decision: Decision, comparisons: list[dict[str, Any]], confidence: float) -> dict[str, Any]:
    """The decision as recorded in ``summary.json``: the rule, each candidate's numbers and verdict, the outcome."""
    bound = threshold(decision)
    label = metric_name(decision.key)
    rows = []
    for c in comparisons:
        if c["key"] != decision.key:
            continue
        lo, hi, p = c.get("ci_low"), c.get("ci_high"), c.get("p_corrected")
        reasons = []
        if lo is None or not math.isfinite(lo):
            reasons.append(f"no interval at {label}: no query is valid for both systems")
        elif not lo > bound:
            reasons.append(f"the interval's lower end {lo:.6g} is not above {bound:+.6g}")
        if decision.max_p is not None and (p is None or not math.isfinite(p) or not p <= decision.max_p):
            reasons.append(f"the corrected p-value {p:.4g} is above {decision.max_p:g}"
                           if p is not None and math.isfinite(p) else "no corrected p-value")
        rows.append({"candidate": c["candidate"], "baseline": c["baseline"], "delta": c.get("delta"),
                     "ci_low": lo, "ci_high": hi, "p_corrected": p, "n_paired": c.get("n_paired"),
                     "threshold": bound, "outcome": FAIL if reasons else PASS,
                     "reason": "; ".join(reasons) if reasons else
                     f"the interval's lower end {lo:.6g} is above {bound:+.6g}"
                     + (f" and the corrected p-value {p:.4g} is at most {decision.max_p:g}"
                        if decision.max_p is not None else "")})
    outcome = PASS if rows and all(r["outcome"] == PASS for r in rows) else FAIL
    return {"key": decision.key, "rule": decision.rule, "margin": decision.margin, "max_p": decision.max_p,
            "confidence": confidence, "threshold": bound, "outcome": outcome,
            "statement": statement(decision, confidence), "candidates": rows}


def statement(decision: Decision, confidence: float) -> str:
    """The rule in words, as the report states it."""
    label = metric_name(decision.key)
    what = ("better than the baseline by more than" if decision.rule == "superiority"
            else "not worse than the baseline by")
    words = (f"{decision.rule.replace('_', '-')} at {label}: each candidate passes when the {confidence:.0%} "
             f"interval of its difference from the baseline lies above {threshold(decision):+g} "
             f"({what} {decision.margin:g})")
    if decision.max_p is not None:
        words += f" and its corrected p-value is at most {decision.max_p:g}"
    return words + "; the decision passes only when every candidate passes."


def summary_line(decision: dict[str, Any]) -> str:
    """One line for terminals and reports: ``decision: FAIL (non-inferiority at nDCG@10 ...): cand ...``."""
    parts = [f"{r['candidate']} {r['outcome']} ({r['reason']})" for r in decision["candidates"]]
    return (f"decision: {decision['outcome'].upper()} — {decision['statement']} "
            + ("; ".join(parts) if parts else "no candidate was compared") + ".")
