"""Planning a comparison: the smallest difference the decision's test detects, and how many queries it needs.

The approach is Sakai's topic set size design ("Topic set size design", Information Retrieval Journal 19, 2016):
from the variance observed in one evaluation, the number of topics a paired t test needs to detect a given
difference with a given power. Here the test is the one the spec's decision reads
(:func:`ndcg_mlflow.statistics.inference.t_interval`): the two-sided weighted t interval at confidence ``C`` (alpha =
1 - C) of the weighted mean of the paired differences ``d_i = candidate_i - baseline_i`` with weights ``w_i``, whose
lower end must clear a threshold (``+margin`` for superiority, ``-margin`` for non-inferiority). With ``se`` and
``df`` the weighted standard error and its degrees of freedom (:func:`ndcg_mlflow.statistics.inference.weighted_t`), the
lower end clears a threshold at ``distance`` below the true difference with probability ``power`` when

    distance = (t_(1 - alpha/2, df) + t_(power, df)) * se

(the t approximation of the power of the t test, which replaces the noncentral t by a shifted central t; at
powers of 0.8 to 0.9 the two differ by less than 0.003 from 10 queries on, by less than 0.001 from 20). That
distance at the current number of queries is the minimum detectable difference (:func:`mde`). For planning, the
per-query standard deviation the observed standard error implies, ``sigma = se * sqrt(n_eff)`` (n_eff = (sum w)^2 /
sum w^2, Kish's effective number of queries; with equal weights sigma is the sample standard deviation of the
differences), is taken for a larger set of queries, and what the observed queries leave unknown is taken on
its safe side: sigma at its 90% upper confidence bound (:func:`sd_bound`), the weights drawn at the upper bound of
their spread (:func:`weights_at`, the power averaged over the draws) and, for superiority, the observed
difference at its 90% lower bound (:func:`distance_bound`); a pilot that cannot show its difference above the
margin is too small to plan from (:func:`pilot_too_small`; :func:`planned_power`, :func:`queries_needed`).

Everything here is numpy/scipy only: the ``plan`` command reads an evaluation's output folder in
:mod:`ndcg_mlflow.outputs.plan_source` and passes its paired differences here.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..rules import DECISION_RULE, superiority
from . import inference as stats
from .inference import kish_n
from .risk import paired_vectors

RULES = DECISION_RULE.choices
#: a plan beyond this many queries is no plan (and beyond it the search would leave exact integers)
MOST_QUERIES = 2**53


def _levels(confidence: float, power: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence!r}")
    if not 0 < power < 1:
        raise ValueError(f"power must lie strictly between 0 and 1; got {power!r}")


def t_sum(confidence: float, power: float, df: float) -> float:
    """``t_(1 - alpha/2, df) + t_(power, df)``, alpha = 1 - confidence: the distance, in standard errors, between
    the true difference and a threshold that the interval's lower end clears with probability ``power``."""
    from scipy import stats as st

    return float(stats.two_sided_quantile(confidence, df) + st.t.ppf(power, df))


Fit = tuple[float, float, float]


def _fit(d: np.ndarray, w: np.ndarray, fit: Fit | None) -> Fit:
    """:func:`ndcg_mlflow.statistics.inference.weighted_t` of ``d, w``, or ``fit`` where the caller computed it
    already (at 100,000 unequal weights each call sorts them twice: :func:`decision_plan` computes it once for all its
    parts)."""
    return stats.weighted_t(d, w) if fit is None else fit


def query_sd(d: Any, w: Any, *, fit: Fit | None = None) -> float:
    """sigma = se * sqrt(n_eff): the per-query standard deviation of the differences that the weighted standard error
    implies (se from :func:`ndcg_mlflow.statistics.inference.weighted_t`, n_eff from :func:`kish_n`). With equal
    weights, the sample standard deviation (denominator n - 1). NaN below 2 queries. ``fit``: ``weighted_t(d, w)`` if
    known."""
    d, w = paired_vectors(d, w)
    if d.size < 2:
        return float("nan")
    _, se, _ = _fit(d, w, fit)
    return se * math.sqrt(kish_n(w))


def mde(d: Any, w: Any, confidence: float, power: float = 0.8, *, fit: Fit | None = None) -> float:
    """The minimum detectable difference of the two-sided weighted paired t at ``confidence`` and ``power``::

    mde = (t_(1 - alpha/2, df) + t_(power, df)) * se,    alpha = 1 - confidence

    with ``se, df`` from :func:`ndcg_mlflow.statistics.inference.weighted_t`: the smallest distance between the true
    difference and a threshold that the interval's lower end (:func:`ndcg_mlflow.statistics.inference.t_interval`)
    clears with probability ``power``, at the current queries. 0 when every difference is equal (the interval is then a
    point); NaN where the interval is undefined (fewer than 2 queries, or weights leaving less than 1 degree of
    freedom). ``fit``: ``weighted_t(d, w)`` if known."""
    d, w = paired_vectors(d, w)
    _levels(confidence, power)
    if d.size < 2:
        return float("nan")
    _, se, df = _fit(d, w, fit)
    if np.ptp(d) == 0:
        return 0.0
    if not df >= 1:
        return float("nan")
    return t_sum(confidence, power, df) * se


def current_power(d: Any, w: Any, confidence: float, distance: float, *, fit: Fit | None = None) -> float:
    """The power of the test at the current queries against a threshold ``distance`` below the true difference,
    in the same approximation as :func:`mde` (its inverse in ``power``)::

        power = F_t(distance / se - t_(1 - alpha/2, df); df)

    with F_t Student's t distribution function. Every difference equal: 1 when ``distance > 0``, else 0. NaN where
    the interval is undefined. ``fit``: ``weighted_t(d, w)`` if known."""
    from scipy import stats as st

    d, w = paired_vectors(d, w)
    _levels(confidence, 0.5)
    if d.size < 2 or not math.isfinite(distance):
        return float("nan")
    _, se, df = _fit(d, w, fit)
    if np.ptp(d) == 0:
        return 1.0 if distance > 0 else 0.0
    if not df >= 1:
        return float("nan")
    return float(st.t.cdf(distance / se - stats.two_sided_quantile(confidence, df), df))


def queries_for(
    sd: float, ratio: float, confidence: float, power: float, distance: float, *, df_share: float = 1.0
) -> int | None:
    """The smallest number of queries ``n >= 2`` with

        (t_(1 - alpha/2, df(n)) + t_(power, df(n))) * sd / sqrt(n_eff(n)) <= distance,
        n_eff(n) = n * ratio,   df(n) = df_share * (n_eff(n) - 1) >= 1

    for a per-query standard deviation ``sd``, a ratio n_eff / n of the weights (1 for equal weights) and the share
    ``df_share`` of Kish's n_eff - 1 that the weighted t's degrees of freedom are (1 for equal weights: n - 1).
    Under unequal weights the test takes fewer than n_eff - 1
    (:func:`ndcg_mlflow.statistics.inference.t_degrees_of_freedom`: the smaller of that and Satterthwaite's, often a
    fifth of it). With sigma, the ratio and the share taken as known this is the plain plan, optimistic from a small
    pilot; :func:`queries_needed` starts its search here and averages the power over their uncertainty
    (:func:`planned_power`).

    The left side decreases with ``n``, so the smallest ``n`` is found exactly: from the normal approximation
    ``n ~ ((z_(1 - alpha/2) + z_power) sd / distance)^2 / ratio`` (a lower bound when ``power >= 0.5``), by
    doubling then bisection. None when ``distance <= 0`` (or not a number), ``sd`` is not a finite number, or
    beyond :data:`MOST_QUERIES` queries."""
    _levels(confidence, power)
    if not (distance > 0 and math.isfinite(sd) and sd >= 0 and 0 < ratio <= 1 and 0 < df_share <= 1):
        return None

    def enough(n: int) -> bool:
        n_eff = n * ratio
        df = df_share * (n_eff - 1)
        if not df >= 1:
            return False
        return t_sum(confidence, power, df) * sd / math.sqrt(n_eff) <= distance

    low = max(2, math.ceil(2 / ratio))
    while not df_share * (low * ratio - 1) >= 1:  # (the first n with one degree of freedom)
        low += 1
    if enough(low):
        return low
    from scipy.special import ndtri

    z = float(stats.two_sided_quantile(confidence) + ndtri(power)) * sd / distance  # inf for a tiny distance
    guess = z * z / ratio  # (not z ** 2: a float power beyond the largest double raises, a product is inf)
    if not guess < MOST_QUERIES:
        return None
    return first_enough(enough, low, max(low + 1, math.ceil(guess)))


def first_enough(enough: Callable[[int], bool], low: int, high: int) -> int | None:
    """The first number of queries above ``low`` (which fails ``enough``) that meets ``enough``, a condition that
    holds from some n on: ``high`` is doubled until it meets it, then the gap is halved. None beyond
    :data:`MOST_QUERIES`."""
    while not enough(high):
        low, high = high, 2 * high
        if high > MOST_QUERIES:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid
    return high


#: the draws of the weights at a planned n that :func:`planned_power` averages over
WEIGHT_DRAWS = 16
#: beyond this many queries the weights' draws are not made again: n_eff / n and the degrees of freedom's share
#: of n_eff - 1 at this n are taken for more queries
SIMULATED_QUERIES = 8192
_WEIGHTS_CACHE: dict[tuple[bytes, int], tuple[np.ndarray, np.ndarray]] = {}


#: the one-sided level of the upper confidence bound on the weights' log-scale dispersion that the plan draws its
#: weights at (:func:`weights_bound`)
WEIGHTS_LEVEL = 0.9


def weights_bound(w: Any) -> float:
    """The upper end of the one-sided :data:`WEIGHTS_LEVEL` confidence interval for the standard deviation of the
    weights' logarithms, from the m pilot weights ``w`` (s their logarithms' sample standard deviation)::

        s_up = s * sqrt((m - 1) / chi2_(1 - level, m - 1))

    (the law (m - 1) s^2 / sigma_w^2 ~ chi^2(m - 1) of normal logarithms: lognormal weights). 0 for equal weights;
    NaN below 2 weights. A pilot rarely holds the heaviest weights of a larger evaluation: a plan read off the
    pilot's own weights (or s itself) promises too much."""
    from scipy import stats as st

    w = stats.scale_free(w)
    if w.size < 2:
        return float("nan")
    if np.ptp(w) == 0:
        return 0.0
    s = float(np.std(np.log(w), ddof=1))
    return s * math.sqrt((w.size - 1) / float(st.chi2.ppf(1 - WEIGHTS_LEVEL, w.size - 1)))


#: the one-sided level of the upper confidence bound on the per-query standard deviation that the plan is made at
#: (:func:`sd_bound`)
SD_LEVEL = WEIGHTS_LEVEL


def sd_bound(sd: float, nu: float) -> float:
    """The upper end of the one-sided :data:`SD_LEVEL` confidence interval for the per-query standard deviation
    sigma, from its estimate ``sd`` on ``nu`` degrees of freedom::

        sd_up = sd * sqrt(nu / chi2_(1 - level, nu))

    (the law nu sd^2 / sigma^2 ~ chi^2(nu) of a sample variance of normal differences). The plan is made at sd_up:
    a plan at sd itself falls short of its power about half the time, more where ties or a skewed law make sd
    vary more than that law says (a pilot of 20 nDCG-like queries, 30% of them tied, planned at sigma's law
    averaged reached 0.75 for 0.8: ``benchmarks/power_sim.py --pilots``). NaN when ``sd`` is not a number or
    ``nu`` is below 1 (or not a number); ``sd`` when ``nu`` is infinite."""
    from scipy import stats as st

    if not (math.isfinite(sd) and nu >= 1):
        return float("nan")
    if math.isinf(nu):
        return float(sd)
    return float(sd * math.sqrt(nu / float(st.chi2.ppf(1 - SD_LEVEL, nu))))


def distance_bound(distance: float, se: float, nu: float) -> float:
    """The lower end of the one-sided :data:`SD_LEVEL` confidence interval for a distance read off a pilot's
    observed difference (superiority: the observed difference minus the margin), ``se`` its standard error on
    ``nu`` degrees of freedom::

        distance_low = distance - t_(level, nu) se

    A plan at the observed distance itself falls short of its power whenever the pilot overstated the
    difference, and the pilots that give a superiority plan are those that overstate it (a plan from 20-query
    pilots, averaged over the distance's law, reached 0.54 for 0.8: ``benchmarks/power_sim.py --pilots``)."""
    from scipy import stats as st

    return float(distance - float(st.t.ppf(SD_LEVEL, nu)) * se)


def weights_at(w: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Kish's n_eff and the weighted t's degrees of freedom
    (:func:`ndcg_mlflow.statistics.inference.t_degrees_of_freedom`) of :data:`WEIGHT_DRAWS` sets of ``n`` weights as a
    larger evaluation may hold them, on the safe side of the pilot's ``w``: lognormal weights exp(s_up z), z standard
    normal, at the upper bound s_up of the logarithms' dispersion (:func:`weights_bound`); or, where they are the more
    unequal (weights with few distinct values, a heavy one among them), the pilot's weights resampled. Of the two sets,
    the one with the smaller mean n_eff. Equal weights: n and n - 1 exactly. The draws are made at the size of
    :func:`_grid_above` ``n`` (at most :data:`SIMULATED_QUERIES`) and scaled to ``n`` (n_eff in proportion, the degrees
    of freedom as the same share of n_eff - 1). Seeded by that size alone: the same answer every time."""
    w = stats.scale_free(w)
    if np.ptp(w) == 0:
        return np.full(WEIGHT_DRAWS, float(n)), np.full(WEIGHT_DRAWS, float(n - 1))
    m = min(_grid_above(n), SIMULATED_QUERIES)
    key = (hashlib.blake2b(w.tobytes(), digest_size=16).digest(), m)
    if key not in _WEIGHTS_CACHE:
        rng = np.random.default_rng([0x706C616E, m])
        z = rng.standard_normal((WEIGHT_DRAWS, m))
        lognormal = np.exp(weights_bound(w) * (z - z.max(axis=1, keepdims=True)))  # (the largest 1: no overflow)
        resampled = w[rng.integers(0, w.size, (WEIGHT_DRAWS, m))]
        candidates = []
        for draws in (lognormal, resampled):
            n_eff = draws.sum(axis=1) ** 2 / (draws * draws).sum(axis=1)
            candidates.append((n_eff, draws))
        n_eff, draws = min(candidates, key=lambda c: float(np.mean(c[0])))
        if len(_WEIGHTS_CACHE) > 4096:
            _WEIGHTS_CACHE.clear()
        _WEIGHTS_CACHE[key] = (
            np.array([kish_n(row) for row in draws]),
            np.array([stats.t_degrees_of_freedom(row) for row in draws]),
        )
    n_eff, df = _WEIGHTS_CACHE[key]
    if n != m:
        share = df / (n_eff - 1)
        n_eff = n_eff * (n / m)
        df = share * (n_eff - 1)
    return n_eff, df


def _grid_above(n: int) -> int:
    """The smallest of 2, 3, ... 16 and then the integers nearest 2^(k/8) that is at least ``n``: the sizes the
    weights are drawn at (n_eff / n and the share of the degrees of freedom fall as n grows, so scaling from the
    size above is on the safe side)."""
    if n <= 16:
        return max(2, n)
    return math.ceil(2 ** (math.ceil(8 * math.log2(n) - 1e-9) / 8))


def planned_power(n: int, w: Any, sigma: float, confidence: float, distance: float) -> float:
    """The power of the decision's test at ``n`` queries against a threshold ``distance`` below the true difference,
    at a per-query standard deviation ``sigma`` (the plan passes :func:`sd_bound` of the pilot's), averaged over
    the weights ``n`` queries may have after a pilot of weights ``w`` (:func:`weights_at`). Each draw's power is
    the t approximation of :func:`current_power`::

        F_t(distance sqrt(n_eff) / sigma - t_(1 - alpha/2, df); df)

    averaged over the :data:`WEIGHT_DRAWS` draws (0 where a draw leaves less than one degree of freedom)."""
    from scipy import stats as st

    n_eff, df = weights_at(w, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = distance * np.sqrt(n_eff) / sigma if sigma > 0 else np.full(n_eff.size, np.inf)
    p = st.t.cdf(z - stats.two_sided_quantile(confidence, df), df)
    return float(np.mean(np.where(df >= 1, p, 0.0)))


def queries_needed(
    d: Any,
    w: Any,
    confidence: float,
    power: float,
    *,
    distance: float,
    observed: bool = False,
    fit: Fit | None = None,
) -> int | None:
    """The smallest number of queries at which the decision's test, against a threshold at ``distance`` from the
    assumed true difference, has at least ``power`` by :func:`planned_power`: with sigma at :func:`sd_bound` of
    :func:`query_sd` of the observed differences on their degrees of freedom, the weights at n drawn on the safe
    side of the observed ones (:func:`weights_at`), and, with ``observed`` (superiority: the distance is the
    observed difference minus the margin), the distance at :func:`distance_bound`. Sigma and the distance
    estimated from few queries, and the weights' n_eff / n and degrees of freedom falling as n grows, each make
    the plain plan (:func:`queries_for` with the pilot's figures) optimistic; this plan takes each at its bound
    (``benchmarks/power_sim.py``). ``fit``: ``weighted_t(d, w)`` if known.

    None when ``distance <= 0`` (with ``observed``: its bound), sigma is undefined (fewer than 2 queries, or
    weights leaving less than one degree of freedom), or beyond :data:`MOST_QUERIES` queries."""
    d, w = paired_vectors(d, w)
    _levels(confidence, power)
    if d.size < 2:
        return None
    fit = _fit(d, w, fit)
    _, se, nu = fit
    sd = query_sd(d, w, fit=fit)
    if observed and math.isfinite(se) and nu >= 1:
        distance = distance_bound(distance, se, nu)
    if not (distance > 0 and math.isfinite(sd) and nu >= 1):
        return None
    if sd == 0:
        return 2
    sigma = sd_bound(sd, nu)

    def enough(n: int) -> bool:
        return planned_power(n, w, sigma, confidence, distance) >= power

    n_eff = kish_n(w)
    share = min(1.0, nu / (n_eff - 1)) if np.ptp(w) > 0 and n_eff > 1 else 1.0
    start = queries_for(sigma, n_eff / d.size, confidence, power, distance, df_share=share)
    if start is None:
        return None
    return first_enough(enough, 1, max(2, start))


class Assumption(NamedTuple):
    """What a plan of a decision assumes (:func:`assumption`): the true ``difference``, its ``distance`` from the
    rule's threshold and whether that distance is ``estimated`` (read off the pilot: planned at its lower bound,
    :func:`distance_bound`, and a pilot that cannot show it is too small to plan from)."""

    difference: float
    distance: float
    estimated: bool


def assumption(rule: str, margin: float, observed: float) -> Assumption:
    """The true difference a plan of the rule assumes, from the ``margin`` and the ``observed`` difference, for every
    planner of a decision (:func:`decision_plan`; with a judge,
    :func:`ndcg_mlflow.statistics.judge.labelled_plan`):

    - ``non_inferiority``: 0 (a candidate as good as the baseline must pass), at ``distance = margin`` exactly,
      not estimated (a margin of 0 leaves no plan);
    - ``superiority``: the observed difference, at ``distance = observed - margin``, estimated.

    A rule it does not know, or a margin that is not a finite number at or above 0, is refused (ValueError)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}; got {rule!r}")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number at or above 0; got {margin!r}")
    if superiority(rule):
        return Assumption(observed, observed - margin, True)
    return Assumption(0.0, margin, False)


def decision_plan(d: Any, w: Any, confidence: float, power: float, rule: str, margin: float) -> dict[str, Any]:
    """What the declared decision could detect at the current queries, and the queries it would need.

    - ``non_inferiority`` (passes when the interval's lower end is above ``-margin``): the assumed true difference
      is 0 (a candidate as good as the baseline must pass), at ``distance = margin`` from the threshold;
    - ``superiority`` (passes when the lower end is above ``+margin``): the assumed true difference is the
      observed weighted mean difference, at ``distance = observed - margin``; when that is not positive no number
      of queries makes the candidate pass with that power (``queries_needed`` None, and the reason says so)

    (:func:`assumption`).

    Returns ``{"mde", "power", "queries_needed", "assumed_difference", "distance", "reason", "detectable",
    "current_power", "sd"}``: :func:`mde` at ``power`` (the power planned for, as given); :func:`queries_needed`
    at ``distance``; ``reason``: why ``queries_needed`` (or ``mde``) is undefined, else None, as a list of parts
    (a ``kind`` with its numbers; :func:`ndcg_mlflow.render.words.plan_reason` words it); ``detectable``:
    whether the current queries detect the distance with that power (``mde <= margin`` for non-inferiority,
    ``mde <= distance`` for superiority, with a positive distance); ``current_power``: the power at the current
    queries against that distance (:func:`current_power`); ``sd``: :func:`query_sd`."""
    d, w = paired_vectors(d, w)
    _levels(confidence, power)
    fit = stats.weighted_t(d, w) if d.size else (float("nan"),) * 3  # (once: each part reads it)
    observed = float(stats.weighted_mean(d, w)) if d.size else float("nan")
    assumed, distance, estimated = assumption(rule, margin, observed)
    smallest = mde(d, w, confidence, power, fit=fit)
    needed = queries_needed(d, w, confidence, power, distance=distance, observed=estimated, fit=fit)
    sd = query_sd(d, w, fit=fit)
    too_small = None
    if estimated and d.size >= 2 and math.isfinite(smallest) and distance > 0 and fit[1] > 0:
        too_small = pilot_too_small(d, w, confidence, power, margin, fit, needed)
        if too_small is not None:
            needed = None
    reasons: list[dict[str, Any]] = []
    if d.size < 2:
        reasons.append({"kind": "paired", "n": int(d.size)})
    else:
        if not math.isfinite(smallest):
            reasons.append({"kind": "degrees_of_freedom", "df": stats.weighted_t(d, w)[2]})
        if estimated and not distance > 0:
            reasons.append({"kind": "difference_within_margin"})
        elif not distance > 0:
            reasons.append({"kind": "zero_margin"})
        elif needed is None and not math.isfinite(smallest):
            pass  # (said above)
        elif too_small is not None:
            reasons.append(too_small)
        elif needed is None and sd == 0:
            pass  # (every difference equal: the interval is a point)
        elif needed is None:
            reasons.append({"kind": "beyond", "queries": MOST_QUERIES})
    return {
        "mde": smallest,
        "power": power,
        "queries_needed": needed,
        "assumed_difference": assumed,
        "distance": distance,
        "reason": reasons or None,
        "detectable": bool(math.isfinite(smallest) and distance > 0 and smallest <= distance),
        "current_power": current_power(d, w, confidence, distance, fit=fit) if d.size >= 2 else float("nan"),
        "sd": sd,
        **plan_bounds(w, sd, fit[2] if d.size >= 2 else float("nan")),
    }


def plan_bounds(w: Any, sd: float, nu: float) -> dict[str, float]:
    """What the plan assumed beyond the pilot, as ``plan``, the report and ``summary.json`` state it: ``sd_bound``
    (:func:`sd_bound` at :data:`SD_LEVEL`, ``sd_level``) and ``weights_bound`` (:func:`weights_bound` at
    :data:`WEIGHTS_LEVEL`, ``weights_level``; 0 for equal weights)."""
    w = np.asarray(w, dtype=np.float64)
    return {
        "sd_bound": sd_bound(sd, nu),
        "sd_level": SD_LEVEL,
        "weights_bound": weights_bound(w) if w.size else float("nan"),
        "weights_level": WEIGHTS_LEVEL,
    }


#: a superiority plan more than this many times the queries it would need at the pilot's observed difference rests
#: on the pilot's uncertainty about that difference rather than on the difference: the pilot is too small to plan
#: from (:func:`pilot_too_small`)
MOST_EXTRAPOLATION = 100


def pilot_too_small(
    d: Any, w: Any, confidence: float, power: float, margin: float, fit: Fit, needed: int | None
) -> dict[str, Any] | None:
    """Why a pilot of differences ``d`` (weights ``w``, ``fit`` = their
    :func:`ndcg_mlflow.statistics.inference.weighted_t`) cannot support a superiority plan at ``margin``, with what
    would help, as a reason of :func:`decision_plan` (kind ``pilot_too_small``: the ``observed`` difference, the
    ``margin``, the lower bound ``low``, the queries of a ``pilot`` that would tell, and when the bound clears the
    margin the plan ``needed`` against the queries ``known`` at the observed difference); None when it can.
    ``needed``: :func:`queries_needed` of the superiority plan (at :func:`distance_bound`). The rule:

    1. the pilot must show its difference above the margin: the lower end of the one-sided :data:`SD_LEVEL` confidence
    interval of the difference (observed - t_(level, nu) se) above the margin, the distance the plan is made at
    (:func:`distance_bound`) above 0; 2. the plan must be at most :data:`MOST_EXTRAPOLATION` times the queries the
    observed difference would need (:func:`queries_needed` at the observed distance): a plan far larger is bought by the
    pilot's uncertainty about the difference (the plan grows without bound as the bound nears the margin), not by the
    difference.

    What would help: a pilot of the queries (with the same spread and weights) at which the observed difference would
    stand that far above the margin (:func:`queries_for` at power 0.5 and one-sided level :data:`SD_LEVEL`)."""
    d, w = paired_vectors(d, w)
    observed, se, nu = fit
    sd = se * math.sqrt(kish_n(w))
    n_eff = kish_n(w)
    share = min(1.0, nu / (n_eff - 1)) if np.ptp(w) > 0 and n_eff > 1 else 1.0
    distance = observed - margin
    low = margin + distance_bound(distance, se, nu)  # (the difference's lower bound: observed - t se)
    n = queries_for(sd, n_eff / d.size, 2 * SD_LEVEL - 1, 0.5, distance, df_share=share)
    if not low > margin:
        return {"kind": "pilot_too_small", "observed": observed, "margin": margin, "low": low, "pilot": n}
    known = queries_needed(d, w, confidence, power, distance=distance, fit=fit)
    if needed is not None and known is not None and needed <= MOST_EXTRAPOLATION * known:
        return None
    return {
        "kind": "pilot_too_small",
        "observed": observed,
        "margin": margin,
        "low": low,
        "pilot": n,
        "needed": needed,
        "known": known,
    }
