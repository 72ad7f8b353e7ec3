"""The statistics sections of the spec checked and resolved: ``uncertainty`` (the bootstrap), ``comparison`` (the
paired comparisons with a baseline) and ``decision`` (the rule that passes or fails, and its guardrails).

Keys that need the query segments (``uncertainty.stratify: segments``, ``decision.guardrails.segments``) are
refused, naming ``queries.segments`` too, when the spec does not declare them."""

from __future__ import annotations

import math
from typing import Any

from ..errors import did_you_mean
from ..rules import CORRECTION, DECISION_RULE, GUARDRAIL_RULE, INTERVAL_METHOD, STRATIFY, TEST, stratifies
from .checks import Ctx, choice, finite, integer, mapping, number_in
from .types import (
    MAX_RESAMPLES,
    MAX_RISK_ALPHA,
    RISK_ALPHA,
    Comparison,
    Decision,
    Guardrails,
    RegressionGuardrail,
    SegmentGuardrail,
    Uncertainty,
)
from .yamltext import got

NO_SEGMENTS = "queries.segments is not declared"


def uncertainty(ctx: Ctx, value: Any, segments: bool) -> Uncertainty | None:
    """``segments``: whether the spec declares ``queries.segments`` (``stratify: segments`` needs them)."""
    if value is None:
        return None
    u = mapping(ctx, value, "uncertainty", ("resamples", "confidence", "method", "seed"), ("stratify",))
    conf = u["confidence"]
    if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 < conf < 1:
        raise ctx.fail(
            "uncertainty.confidence", f"must be a number strictly between 0 and 1, such as 0.95. {got(conf)}"
        )
    stratify = stratifies(choice(ctx, u.get("stratify", STRATIFY.default), STRATIFY.key, STRATIFY.choices))
    if stratify and not segments:
        raise ctx.fail(
            STRATIFY.key,
            f"is 'segments', but {NO_SEGMENTS}: the bootstrap resamples queries within each segment, so it needs "
            f"the file that puts each query in its segment (declare queries.segments, or set stratify: none).",
        )
    return Uncertainty(
        resamples=integer(ctx, u["resamples"], "uncertainty.resamples", 100, MAX_RESAMPLES),
        confidence=float(conf),
        method=choice(ctx, u["method"], INTERVAL_METHOD.key, INTERVAL_METHOD.choices),
        seed=integer(ctx, u["seed"], "uncertainty.seed", 0, 2**63 - 1),
        stratify=stratify,
    )


def comparison(ctx: Ctx, value: Any, systems: tuple[str, ...], uncertain: Uncertainty | None) -> Comparison | None:
    if value is None:
        return None
    c = mapping(
        ctx, value, "comparison", ("baseline", "test", "correction", "wins_losses", "tie_tolerance"), ("risk_alpha",)
    )
    baseline = c["baseline"]
    if not isinstance(baseline, str) or baseline not in systems:
        hint = did_you_mean(baseline, systems) if isinstance(baseline, str) else ""
        raise ctx.fail(
            "comparison.baseline",
            f"must name one of the systems of data.systems ({', '.join(systems)}){hint}. {got(baseline)}",
        )
    if len(systems) < 2:
        raise ctx.fail("comparison", "comparing needs at least two systems in data.systems.")
    if uncertain is None:
        raise ctx.fail(
            "comparison",
            "needs the uncertainty section too: its resamples and seed drive the "
            "paired intervals and the randomization test.",
        )
    tol = c["tie_tolerance"]
    if (
        isinstance(tol, bool)
        or not isinstance(tol, (int, float))
        or tol < 0
        or (isinstance(tol, float) and not math.isfinite(tol))
        or tol > 1e308
    ):  # an int never overflows here
        raise ctx.fail("comparison.tie_tolerance", f"must be a finite number >= 0, such as 1.0e-9. {got(tol)}")
    return Comparison(
        baseline=baseline,
        test=choice(ctx, c["test"], TEST.key, TEST.choices),
        correction=choice(ctx, c["correction"], CORRECTION.key, CORRECTION.choices),
        wins_losses=integer(ctx, c["wins_losses"], "comparison.wins_losses", 0, 10_000),
        tie_tolerance=float(tol),
        risk_alpha=risk_alpha(ctx, c["risk_alpha"]) if "risk_alpha" in c else RISK_ALPHA,
    )


def risk_alpha(ctx: Ctx, value: Any, path: str = "comparison.risk_alpha") -> tuple[float, ...]:
    """A non-empty list of distinct numbers in [0, :data:`.types.MAX_RISK_ALPHA`], in the order written."""
    if not isinstance(value, list) or not value:
        raise ctx.fail(
            path,
            f"must be a non-empty list of distinct finite numbers >= 0 (at most {MAX_RISK_ALPHA:,.0f}), such as "
            f"[1, 5]. {got(value)}",
        )
    out: list[float] = []
    for i, item in enumerate(value):
        alpha = finite(ctx, item, f"{path}[{i}]", "an alpha") + 0.0  # (-0.0 as 0.0)
        if alpha < 0:
            raise ctx.fail(f"{path}[{i}]", f"an alpha must be >= 0. {got(item)}")
        if alpha > MAX_RISK_ALPHA:
            raise ctx.fail(
                f"{path}[{i}]",
                f"an alpha must be at most {MAX_RISK_ALPHA:,.0f} (a loss then weighs a million times a win; a "
                f"larger alpha only scales the losses' part further). {got(item)}",
            )
        if alpha in out:
            raise ctx.fail(f"{path}[{i}]", f"alpha {item!r} is listed twice (first at {path}[{out.index(alpha)}]).")
        out.append(alpha)
    return tuple(out)


def decision(
    ctx: Ctx, value: Any, compared: Comparison | None, keys: tuple[str, ...], segments: bool
) -> Decision | None:
    """``segments``: whether the spec declares ``queries.segments`` (a segments guardrail needs them)."""
    if value is None:
        return None
    d = mapping(ctx, value, "decision", ("key", "rule", "margin"), ("max_p", "guardrails"))
    if compared is None:
        raise ctx.fail(
            "decision",
            "needs the comparison section: the decision is read off the paired interval of "
            "each candidate against comparison.baseline.",
        )
    key = d["key"]
    if not isinstance(key, str) or key not in keys:
        hint = did_you_mean(key, keys) if isinstance(key, str) else ""
        raise ctx.fail(
            "decision.key",
            f"must be one of the compared keys ({', '.join(keys)}: one per cutoff of metric.cutoffs){hint}. {got(key)}",
        )
    rule = choice(ctx, d["rule"], DECISION_RULE.key, DECISION_RULE.choices)
    margin = ndcg_margin(ctx, d["margin"], "decision.margin", "0.005")
    max_p = d.get("max_p")
    if max_p is not None and (
        isinstance(max_p, bool) or not isinstance(max_p, (int, float)) or not math.isfinite(max_p) or not 0 < max_p <= 1
    ):
        raise ctx.fail(
            "decision.max_p",
            f"must be a number in (0, 1], such as 0.05 (a bound on the corrected "
            f"p-value), or be left out. {got(max_p)}",
        )
    return Decision(
        key,
        rule,
        margin,
        None if max_p is None else float(max_p),
        guardrails(ctx, d.get("guardrails"), segments),
    )


def ndcg_margin(ctx: Ctx, value: Any, path: str, example: str) -> float:
    """A decision rule's margin (``decision.margin``, ``decision.guardrails.segments.margin``): a difference of
    nDCG in [0, 1)."""
    return number_in(ctx, value, path, 0, 1, what="a difference of nDCG", example=example)


def guardrails(ctx: Ctx, value: Any, segments: bool) -> Guardrails:
    """``decision.guardrails``: ``segments`` (every segment's comparison passes a rule) and ``regressions`` (a bound
    on the share of queries that lose more than a delta), each optional; absent or null: none."""
    path = "decision.guardrails"
    if value is None:
        return Guardrails()
    g = mapping(ctx, value, path, (), ("segments", "regressions"))
    per_segment = None
    if g.get("segments") is not None:
        s = mapping(ctx, g["segments"], f"{path}.segments", ("rule", "margin"))
        if not segments:
            raise ctx.fail(
                f"{path}.segments",
                f"is declared, but {NO_SEGMENTS}: the guardrail compares the systems within each segment, so it "
                f"needs the file that puts each query in its segment (declare queries.segments, or remove "
                f"{path}.segments).",
            )
        margin = ndcg_margin(ctx, s["margin"], f"{path}.segments.margin", "0.02")
        per_segment = SegmentGuardrail(choice(ctx, s["rule"], GUARDRAIL_RULE.key, GUARDRAIL_RULE.choices), margin)
    regressions = None
    if g.get("regressions") is not None:
        r = mapping(ctx, g["regressions"], f"{path}.regressions", ("delta", "max_share"))
        delta = number_in(
            ctx,
            r["delta"],
            f"{path}.regressions.delta",
            0,
            1,
            low_open=True,
            what="a loss of nDCG",
            example="0.1",
            why="nDCG lies in [0, 1], so no query loses 1 or more: the guardrail could never fail.",
        )
        share = number_in(
            ctx,
            r["max_share"],
            f"{path}.regressions.max_share",
            0,
            1,
            low_open=True,
            what="a share of the evaluated queries",
            example="0.10",
            why="Its bound is the upper end of the share's interval, above 0 at any number of queries: a share "
            "of 0 could never pass.",
        )
        regressions = RegressionGuardrail(delta, float(share))
    return Guardrails(per_segment, regressions)
