"""Tail risk of a candidate against the baseline: how much its losses weigh against its wins, query by query.

numpy/scipy only. Every function takes the paired differences ``d_i = candidate_i - baseline_i`` of the queries
valid for both systems and their weights ``w_i > 0`` (the weights' scale does not matter, only their ratios).

- :func:`urisk`: URisk of Wang, Bennett and Collins-Thompson ("Robust ranking models via risk-sensitive
  optimization", SIGIR 2012), the mean difference with every loss counted ``1 + alpha`` times;
- :func:`trisk`: TRisk of Dinçer, Macdonald and Ounis ("Hypothesis testing for the risk-sensitive evaluation of
  retrieval systems", SIGIR 2014), URisk over its standard error: the paired t statistic of the risk-adjusted
  differences, with its two-sided p-value;
- :func:`regressed`: which queries lose more than a given amount (the share of regressed queries is its weighted
  mean), and :func:`regressed_share`: that share with its interval (the regressions guardrail's bound);
- :func:`risk_entry`: URisk and TRisk at several values of alpha, keyed for JSON.

The risk-adjusted difference of a query is ``z_i = d_i`` when ``d_i >= 0`` and ``(1 + alpha) d_i`` when
``d_i < 0``: a loss weighs ``1 + alpha`` times a win of the same size. alpha = 0 gives the plain mean difference;
the TREC 2013 and 2014 Web tracks reported alpha = 1, 5 and 10.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..rules import shortest_text
from ..spec.types import MAX_RISK_ALPHA
from . import inference as stats


def paired_vectors(d: Any, w: Any) -> tuple[np.ndarray, np.ndarray]:
    """``d`` and ``w`` as float64 vectors of one length: finite differences, finite positive weights, these at their
    scale-free size (:func:`ndcg_mlflow.stats.scale_free`: the same ratios, the same numbers at any scale)."""
    d = np.asarray(d, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if d.ndim != 1 or w.shape != d.shape:
        raise ValueError(
            f"expected one paired difference per weight, as two vectors of one length; got shapes {d.shape} "
            f"and {w.shape}"
        )
    if not np.isfinite(d).all():
        raise ValueError("expected finite paired differences (the queries valid for both systems); got NaN or inf")
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("expected finite positive query weights; got a weight that is 0, negative, NaN or inf")
    return d, stats.scale_free(w)


def _alpha(alpha: float) -> float:
    a = float(alpha)
    if not (math.isfinite(a) and 0 <= a <= MAX_RISK_ALPHA):
        raise ValueError(
            f"alpha must be a number in [0, {MAX_RISK_ALPHA:g}] (a loss weighs 1 + alpha times); got {alpha!r}"
        )
    return a


def risk_adjusted(d: np.ndarray, alpha: float) -> np.ndarray:
    """The risk-adjusted differences ``z_i = d_i`` if ``d_i >= 0``, else ``(1 + alpha) d_i``."""
    return np.where(d >= 0, d, (1 + alpha) * d)


def urisk(d: Any, w: Any, alpha: float) -> float:
    """URisk (Wang, Bennett and Collins-Thompson, SIGIR 2012), weighted::

        URisk = (sum_i w_i d_i + alpha sum_(d_i < 0) w_i d_i) / sum_i w_i = sum_i w_i z_i / sum_i w_i

    With equal weights it is the paper's ``(1/c) [sum_(Q+) d_i + (1 + alpha) sum_(Q-) d_i]`` over the ``c``
    queries, Q+ the wins and Q- the losses. Negative: the candidate's losses, counted ``1 + alpha`` times, outweigh
    its wins. alpha = 0 gives the weighted mean difference. An integer weight counts its query that many times:
    a weight of 2 gives the URisk of the list with that query listed twice. NaN without any query.

    >>> urisk([0.2, -0.1], [1.0, 1.0], 1.0)
    0.0
    """
    d, w = paired_vectors(d, w)
    a = _alpha(alpha)
    if d.size == 0:
        return float("nan")
    return float(stats.weighted_mean(risk_adjusted(d, a), w))


def trisk(d: Any, w: Any, alpha: float) -> tuple[float, float]:
    """(TRisk, p): TRisk of Dinçer, Macdonald and Ounis (SIGIR 2014) and its two-sided p-value.

    TRisk = URisk / SE(URisk): the paired t statistic of the risk-adjusted differences ``z`` (:func:`urisk`). With
    equal weights, SE = s_z / sqrt(c) with s_z the sample standard deviation of the ``z`` (denominator c - 1, as
    the authors' own implementation, jforests' ``TRiskAwareSAROEval.getEstimates``; some tools divide by c,
    which makes TRisk larger by sqrt(c / (c - 1))). With weights, SE and the degrees of freedom are those of the
    weighted paired t (:func:`ndcg_mlflow.statistics.inference.weighted_t` of ``z``: the bias-corrected weighted
    standard error, the smaller of Satterthwaite's and Kish's degrees of freedom), which equal weights reduce to the
    paper's.

    p is two-sided, from Student's t with those degrees of freedom
    (:func:`ndcg_mlflow.statistics.inference.paired_t_test` of ``z``); the paper reads |TRisk| > 2 as significant (about
    p < 0.05). TRisk < 0: the candidate's risk-weighted losses outweigh its wins beyond chance.

    Conventions, as :func:`~ndcg_mlflow.statistics.inference.paired_t_test` for constant differences: every ``z`` equal
    (SE 0) gives TRisk +inf or -inf with p = 0, or NaN with p = 1 when they are all 0; fewer than 2 queries give (NaN,
    NaN); weights that leave less than 1 degree of freedom give the statistic with p NaN.

    A weight is not a repeated query here: the t statistic counts independent queries, so a query of weight 2
    weighs twice in the mean and its standard error, but is one query, not two (listing it twice would add a
    degree of freedom and shrink the standard error). Scaling every weight changes nothing.
    """
    d, w = paired_vectors(d, w)
    a = _alpha(alpha)
    if d.size < 2:
        return float("nan"), float("nan")
    z = risk_adjusted(d, a)
    m, se, _ = stats.weighted_t(z, w)
    p = stats.paired_t_test(z, w)
    if np.ptp(z) == 0:
        return (float("nan") if m == 0 else math.copysign(math.inf, m)), p
    return m / se, p


def regressed(d: Any, delta: float) -> np.ndarray:
    """The 0/1 indicator (float64) of the queries that lose more than ``delta``: ``d_i < -delta``, ``delta >= 0``.
    Its weighted mean is the (weighted) share of regressed queries.

    >>> regressed([0.3, -0.05, -0.2], 0.1).tolist()
    [0.0, 0.0, 1.0]
    """
    d = np.asarray(d, dtype=np.float64)
    x = float(delta)
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"delta must be a finite number at or above 0 (a loss larger than delta); got {delta!r}")
    return (d < -x).astype(np.float64)


def regressed_share(d: Any, w: Any, delta: float, confidence: float) -> dict[str, float]:
    """The weighted share of the queries that lose more than ``delta`` (:func:`regressed`) and its interval at
    ``confidence`` (:func:`ndcg_mlflow.statistics.inference.share_interval`: Clopper-Pearson on Kish's n_eff), as
    ``summary.json`` records it and the regressions guardrail reads it (the upper end)::

        {"delta": delta, "share": ..., "ci_low": ..., "ci_high": ...}

    NaN share and ends for no query."""
    d, w = paired_vectors(d, w)
    share, lo, hi = stats.share_interval(regressed(d, delta), w, confidence)
    return {"delta": float(delta), "share": share, "ci_low": lo, "ci_high": hi}


def alpha_text(alpha: float) -> str:
    """An alpha as the JSON keys and the table columns write it: ``f"{alpha:g}"`` (``1``, ``0.5``, ``10``) where
    that reads back as the same number, else the shortest text that does (:func:`~ndcg_mlflow.rules.shortest_text`:
    ``1.0000001``): two different alphas never share a key."""
    a = float(alpha) + 0.0  # (-0.0 is 0)
    short = f"{a:g}"
    return short if float(short) == a else shortest_text(a)


def risk_entry(d: Any, w: Any, alphas: Sequence[float]) -> dict[str, dict[str, Any]]:
    """URisk and TRisk at each alpha, keyed by :func:`alpha_text`::

        {"urisk": {"1": -0.01, ...}, "trisk": {"1": {"value": -0.42, "p": 0.67}, ...}}

    The same alpha twice (1 and 1.0) is one key: refused."""
    d, w = paired_vectors(d, w)
    texts = [alpha_text(_alpha(a)) for a in alphas]
    if len(set(texts)) != len(texts):
        raise ValueError(f"alphas written alike: {texts} (each alpha is a JSON key, alpha_text)")
    out: dict[str, dict[str, Any]] = {"urisk": {}, "trisk": {}}
    for a, text in zip(alphas, texts):
        out["urisk"][text] = urisk(d, w, a)
        value, p = trisk(d, w, a)
        out["trisk"][text] = {"value": value, "p": p}
    return out
