"""Prediction-powered inference (PPI, PPI++) of a mean nDCG or a paired difference judged mostly by a model.

Notation, per query q: ``Y_q`` the value (a system's nDCG, or a paired difference candidate - baseline) under
human labels, known on the labelled queries L (n of them, a random subset of the evaluated queries); ``f_q`` the
same value under the judge's labels, known on every query; U the evaluated queries not in L (N of them); ``w_q``
the query weights (positive; uniform = 1). Weighted means are ratio means ``mean_S(x) = sum_S w x / sum_S w``.

The estimate of the weighted mean of Y, for a tuning parameter lambda in [0, 1]::

    theta = lambda mean_U(f) + mean_L(Y - lambda f)
    var   = lambda^2 V_U(f) + V_L(Y - lambda f),    V_S(x) = sum_S w^2 (x - mean_S(x))^2 / (sum_S w)^2

``V_S`` is the linearised variance of a ratio mean whose weights are fixed per query; under uniform weights it is
``np.var(x) / |S|`` (ddof 0), the form of ppi-python 0.2.3, whose normal intervals ``interval="normal"`` equals
there. The default, ``interval="t"``, takes each part's variance and degrees of freedom from the tool's weighted
t (:func:`ndcg_mlflow.statistics.inference.weighted_t`: ddof 1 under uniform weights, each squared residual
divided by its expected share under unequal ones) and their Welch-Satterthwaite combination for the quantile:
the normal form covers too rarely on few labelled queries (``benchmarks/judge_sim.py``, ``docs/judge.md``).
lambda = 1 is classic PPI, lambda = 0 the labelled queries alone; PPI++ tunes it (:func:`tuned_lambda`).
Everything here is numpy/scipy only: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .decision import rule_threshold
from .inference import kish_n, paired_t_test, scale_free, t_interval, two_sided_quantile, weighted_mean, weighted_t
from .planning import MOST_EXTRAPOLATION, SD_LEVEL, assumption, distance_bound, first_enough, sd_bound, t_sum

#: the intervals of :func:`ppi_mean`: the t interval (the default) or ppi-python's large-sample normal one
INTERVALS = ("t", "normal")
#: the grades a weighted kappa weighs disagreements by: the rank distance between two categories, or its square
KAPPA_WEIGHTS = ("linear", "quadratic")


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered estimate of a weighted mean and its normal interval.

    ``p_value`` tests a mean of 0 (two-sided): meaningful for a paired difference. ``rho`` is the weighted
    correlation of Y and f on the labelled queries (NaN when either is constant there). ``n_effective`` is
    ``n / (1 - rho^2 N / (n + N))``: the labelled queries that alone would give the same variance, with lambda
    at its optimum. ``df``: the degrees of freedom of the interval's t quantile (infinite for the normal one).
    The interval, ``se``, ``df`` and ``p_value`` are NaN below 2 labelled queries."""

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    df: float
    p_value: float
    lam: float
    rho: float
    n_effective: float
    n_labelled: int
    n_unlabelled: int


@dataclass(frozen=True)
class StratifiedPPIEstimate:
    """Strata (segments) estimated one by one and combined by their share of the total weight.

    ``unlabelled_strata``: the strata without a labelled query, which cannot be estimated; when there is any, the
    combined numbers are NaN and the caller names them in its error."""

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    df: float
    p_value: float
    strata: tuple[Hashable, ...]
    shares: tuple[float, ...]
    per_stratum: tuple[PPIEstimate | None, ...]
    unlabelled_strata: tuple[Hashable, ...]


@dataclass(frozen=True)
class JudgeBias:
    """The weighted mean over the labelled queries of ``Y - f`` with its t interval and two-sided p-value."""

    estimate: float
    ci_low: float
    ci_high: float
    p_value: float


def _vector(x: Any, name: str) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"{name} must be a vector of per-query values; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must hold finite values; got {float(v[~np.isfinite(v)][0])!r}")
    return v


def _weights(w: Any, size: int, name: str) -> np.ndarray:
    if w is None:
        return np.ones(size)
    v = _vector(w, name)
    if v.size != size:
        raise ValueError(f"{name} has {v.size} weights for {size} queries")
    if not np.all(v > 0):
        raise ValueError(f"{name} must be positive; got {float(v[~(v > 0)][0])!r}")
    return v


def _level(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1; got {confidence!r}")


def _inputs(
    y_l: Any, f_l: Any, f_u: Any, w_l: Any, w_u: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arrays checked, and the weights of L and U scaled together (one scale for every query)."""
    y = _vector(y_l, "y_l")
    f = _vector(f_l, "f_l")
    fu = _vector(f_u, "f_u")
    if f.size != y.size:
        raise ValueError(f"f_l has {f.size} values for {y.size} labelled queries")
    both = scale_free(np.concatenate([_weights(w_l, y.size, "w_l"), _weights(w_u, fu.size, "w_u")]))
    return y, f, fu, both[: y.size], both[y.size :]


def ratio_variance(x: np.ndarray, w: np.ndarray) -> float:
    """``sum w^2 (x - m)^2 / (sum w)^2`` with m the weighted mean: the linearised variance of the ratio mean
    ``sum w x / sum w`` over queries whose weights are fixed; ``np.var(x) / n`` under uniform weights."""
    if x.size == 0:
        return float("nan")
    w = scale_free(w)
    h = w / w.sum()
    r = x - float(weighted_mean(x, w))
    return float(np.sum((h * r) ** 2))


def tuning_terms(y: np.ndarray, f: np.ndarray, fu: np.ndarray, w_l: np.ndarray, w_u: np.ndarray) -> tuple[float, float]:
    """(c, v): the tuning variance ``lambda^2 v - 2 lambda c + V_L(Y)`` that :func:`tuned_lambda` minimises.

    ``c = sum_L h^2 (Y - mean_L Y)(f - mean_L f)``, h = w / sum_L w: the covariance of the two ratio means on L.
    ``v = s^2 (sum_L h^2 + sum_U g^2)``, g = w / sum_U w, with s^2 the variance of f estimated once from every
    query (f is known on all of them): ``W sum w (f - mean f)^2 / (W^2 - sum w^2)`` over L and U, W = sum w,
    unbiased whatever the weights and ``np.cov`` (ddof 1) under uniform ones. Under uniform weights
    ``c / v = cov_L(Y, f) / ((1 + n / N) s^2)``: ppi-python's lambda (``_calc_lam_glm``)."""
    h = w_l / w_l.sum()
    c = float(np.sum(h * h * (y - float(weighted_mean(y, w_l))) * (f - float(weighted_mean(f, w_l)))))
    fa = np.concatenate([f, fu])
    wa = np.concatenate([w_l, w_u])
    big_w = float(wa.sum())
    denom = big_w * big_w - float(np.sum(wa * wa))
    if not denom > 0:
        return c, 0.0
    s2 = big_w * float(wa @ (fa - float(weighted_mean(fa, wa))) ** 2) / denom
    g2 = float(np.sum((w_u / w_u.sum()) ** 2)) if fu.size else 0.0
    return c, s2 * (float(np.sum(h * h)) + g2)


def tuned_lambda(y: np.ndarray, f: np.ndarray, fu: np.ndarray, w_l: np.ndarray, w_u: np.ndarray) -> float:
    """PPI++'s lambda: ``c / v`` of :func:`tuning_terms`, the minimiser of the tuning variance, clipped to [0, 1].

    0 when nothing can be tuned: fewer than 2 labelled queries, no unlabelled query, or a judge constant on L
    (c = 0) or everywhere (v = 0)."""
    if y.size < 2 or fu.size == 0:
        return 0.0
    c, v = tuning_terms(y, f, fu, w_l, w_u)
    if not (v > 0 and c > 0):
        return 0.0
    return float(min(c / v, 1.0))


def weighted_correlation(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The correlation of ``x`` and ``y`` with query weights ``w``; NaN when either is constant (or n < 2): equal
    values, not a rounding residue of their weighted mean."""
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    w = scale_free(w)
    rx = x - float(weighted_mean(x, w))
    ry = y - float(weighted_mean(y, w))
    sxx = float(w @ (rx * rx))
    syy = float(w @ (ry * ry))
    if not (sxx > 0 and syy > 0):
        return float("nan")
    return float(np.clip(float(w @ (rx * ry)) / math.sqrt(sxx * syy), -1.0, 1.0))


def p_value(estimate: float, se: float, df: float) -> float:
    """Two-sided p-value of a mean of 0 from an estimate, its standard error and the degrees of freedom of its t
    (infinite: normal): 1 for an exact 0 and 0 for a non-zero estimate without error; NaN where undefined."""
    from scipy import stats as st

    if not (math.isfinite(estimate) and math.isfinite(se)):
        return float("nan")
    if se == 0:
        return 1.0 if estimate == 0 else 0.0
    if math.isinf(df):
        return float(2 * st.norm.sf(abs(estimate) / se))
    return float(2 * st.t.sf(abs(estimate) / se, df)) if df >= 1 else float("nan")


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """The Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates, each given as
    (variance, its degrees of freedom): ``(sum v)^2 / sum v^2 / df``; parts of zero variance count for nothing,
    an infinite df is a known variance. NaN when the sum is 0 (a point estimate has no t)."""
    total = sum(v for v, _ in parts)
    if not total > 0:
        return float("nan")
    denom = sum(v * v / df for v, df in parts if v > 0)
    return total * total / denom if denom > 0 else math.inf


def interval_of(estimate: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    """``estimate -/+ t_(1 - alpha/2, df) se`` (the normal quantile for an infinite df); a point for se = 0; NaN
    below 1 degree of freedom."""
    if se == 0:
        return estimate, estimate
    if not df >= 1:
        return float("nan"), float("nan")
    q = float(two_sided_quantile(confidence, df))
    return estimate - q * se, estimate + q * se


def part_variance(x: np.ndarray, w: np.ndarray, interval: str) -> tuple[float, float]:
    """(variance, degrees of freedom) of the weighted mean of ``x`` (at least 2 values): :func:`ratio_variance`
    and an infinite df for the "normal" interval, the square of :func:`ndcg_mlflow.statistics.inference.weighted_t`'s
    standard error and its df for "t". Exactly 0 when the values are all equal (not a rounding residue)."""
    if interval == "normal":
        return (0.0 if np.ptp(x) == 0 else ratio_variance(x, w)), math.inf
    _, se, df = weighted_t(x, w)
    return (0.0 if np.ptp(x) == 0 else se * se), df


def ppi_mean(
    y_l: Any,
    f_l: Any,
    f_u: Any,
    *,
    w_l: Any = None,
    w_u: Any = None,
    confidence: float = 0.95,
    lam: float | None = None,
    interval: str = "t",
) -> PPIEstimate:
    """The prediction-powered estimate of the weighted mean of Y over the evaluated queries (L and U).

    ``lam``: None tunes it (PPI++, :func:`tuned_lambda`); 1 is classic PPI; 0 uses the labelled queries alone.
    With fewer than 2 unlabelled queries lambda is 0 whatever ``lam`` (one query's f has no variance to
    estimate). Below 2 labelled queries the estimate exists (NaN for none) but the interval, the standard
    error and the p-value are NaN.

    ``interval``: "t" (the default) adds the two parts' :func:`ndcg_mlflow.statistics.inference.weighted_t`
    variances and takes the t quantile at their Welch-Satterthwaite degrees of freedom (:func:`satterthwaite`);
    lambda = 0 then gives the tool's weighted t interval of ``mean_L(Y)``. "normal" is ppi-python's large-sample
    form, ``V_U`` and ``V_L`` of the module's docstring (ddof 0) and the normal quantile: under uniform weights
    its estimate and interval equal ppi-python's ``ppi_mean_pointestimate`` and ``ppi_mean_ci``, and lambda = 0
    gives the normal interval of ``mean_L(Y)``. Under unequal weights neither takes ppi-python's ``std(w x) /
    sqrt(n)`` (``docs/judge.md``)."""
    _level(confidence)
    if lam is not None and not (math.isfinite(lam) and 0 <= lam <= 1):
        raise ValueError(f"lam must be None or lie in [0, 1]; got {lam!r}")
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}; got {interval!r}")
    y, f, fu, w_l, w_u = _inputs(y_l, f_l, f_u, w_l, w_u)
    n, big_n = y.size, fu.size
    rho = weighted_correlation(y, f, w_l)
    nan = float("nan")
    if n == 0:
        return PPIEstimate(nan, nan, nan, nan, nan, nan, 0.0, rho, 0.0, 0, big_n)
    if big_n < 2:
        lam_used = 0.0
    elif lam is None:
        lam_used = tuned_lambda(y, f, fu, w_l, w_u)
    else:
        lam_used = float(lam)
    rect = y - lam_used * f
    estimate = float(weighted_mean(rect, w_l))
    if lam_used != 0:
        estimate += lam_used * float(weighted_mean(fu, w_u))
    n_eff = nan if math.isnan(rho) else n / (1 - rho * rho * big_n / (n + big_n))
    if n < 2:
        return PPIEstimate(estimate, nan, nan, nan, nan, nan, lam_used, rho, n_eff, n, big_n)
    parts = [part_variance(rect, w_l, interval)]
    if lam_used != 0:
        v_u, df_u = part_variance(fu, w_u, interval)
        parts.append((lam_used * lam_used * v_u, df_u))
    var = sum(v for v, _ in parts)
    se = math.sqrt(var)
    df = math.inf if interval == "normal" else satterthwaite(parts)
    low, high = interval_of(estimate, se, df, confidence)
    return PPIEstimate(estimate, low, high, se, df, p_value(estimate, se, df), lam_used, rho, n_eff, n, big_n)


def stratified_ppi_mean(
    y_l: Any,
    f_l: Any,
    f_u: Any,
    strata_l: Sequence[Hashable],
    strata_u: Sequence[Hashable],
    *,
    w_l: Any,
    w_u: Any,
    confidence: float,
    lam: float | None = None,
    interval: str = "t",
) -> StratifiedPPIEstimate:
    """:func:`ppi_mean` in each stratum (its own lambda), combined as ``sum_s p_s theta_s`` with variance ``sum_s
    p_s^2 se_s^2``, ``p_s`` the stratum's share of the total weight over L and U, and (``interval="t"``) the
    Welch-Satterthwaite degrees of freedom of that sum. The strata are listed in their order of first
    appearance (L, then U). A stratum without a labelled query makes every combined number NaN and is named in
    ``unlabelled_strata``; one with a single labelled query makes the interval NaN."""
    _level(confidence)
    y, f, fu, wl, wu = _inputs(y_l, f_l, f_u, w_l, w_u)
    sl = list(strata_l)
    su = list(strata_u)
    if len(sl) != y.size or len(su) != fu.size:
        raise ValueError(f"strata_l and strata_u must name the stratum of each query ({y.size} and {fu.size})")
    order = list(dict.fromkeys(sl + su))
    code = {name: k for k, name in enumerate(order)}
    lab_l = np.array([code[s] for s in sl], dtype=np.int64)
    lab_u = np.array([code[s] for s in su], dtype=np.int64)
    total = float(wl.sum() + wu.sum())
    shares: list[float] = []
    parts: list[PPIEstimate | None] = []
    missing: list[Hashable] = []
    for k, name in enumerate(order):
        inl, inu = lab_l == k, lab_u == k
        shares.append(float(wl[inl].sum() + wu[inu].sum()) / total)
        if not inl.any():
            missing.append(name)
            parts.append(None)
            continue
        parts.append(
            ppi_mean(
                y[inl], f[inl], fu[inu], w_l=wl[inl], w_u=wu[inu], confidence=confidence, lam=lam, interval=interval
            )
        )
    nan = float("nan")
    if missing or not order:
        return StratifiedPPIEstimate(
            nan, nan, nan, nan, nan, nan, tuple(order), tuple(shares), tuple(parts), tuple(missing)
        )
    found = [p for p in parts if p is not None]
    estimate = float(sum(s * p.estimate for s, p in zip(shares, found)))
    pieces = [(s * s * p.se * p.se, p.df) for s, p in zip(shares, found)]
    se = math.sqrt(sum(v for v, _ in pieces))
    df = math.inf if interval == "normal" else satterthwaite(pieces)
    low, high = interval_of(estimate, se, df, confidence)
    return StratifiedPPIEstimate(
        estimate,
        low,
        high,
        se,
        df,
        p_value(estimate, se, df),
        tuple(order),
        tuple(shares),
        tuple(parts),
        (),
    )


def judge_bias(y_l: Any, f_l: Any, *, w_l: Any = None, confidence: float = 0.95) -> JudgeBias:
    """Whether the judge is biased: the weighted mean over L of ``Y - f`` (for a comparison, the human difference
    minus the judge's: does the judge favour one system?), with the weighted t interval and paired t-test of the
    tool's paired comparisons (:func:`ndcg_mlflow.statistics.inference.t_interval`,
    :func:`ndcg_mlflow.statistics.inference.paired_t_test`): the one-sample t-test under uniform weights."""
    _level(confidence)
    y = _vector(y_l, "y_l")
    f = _vector(f_l, "f_l")
    if f.size != y.size:
        raise ValueError(f"f_l has {f.size} values for {y.size} labelled queries")
    w = scale_free(_weights(w_l, y.size, "w_l"))
    if y.size == 0:
        nan = float("nan")
        return JudgeBias(nan, nan, nan, nan)
    d = y - f
    low, high, _ = t_interval(d, w, confidence)
    return JudgeBias(float(weighted_mean(d, w)), low, high, paired_t_test(d, w))


def weighted_kappa(human: Any, judge: Any, *, weights: str = "quadratic") -> float:
    """Cohen's weighted kappa of the grades of the documents judged by both (integer grades, one pair a document).

    The categories are the grades seen in either list, in order; two categories lie as far apart as their ranks
    among them (as scikit-learn's ``cohen_kappa_score``, so a grade nobody gave leaves no gap): ``|i - j|``
    (linear) or ``(i - j)^2`` (quadratic). kappa = 1 - sum W O / sum W E, O the observed and E the expected
    (product of the margins) joint shares. NaN when it is undefined: no document, or a single category (both
    sides always gave the same grade: no disagreement is possible, so chance agreement is complete)."""
    if weights not in KAPPA_WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(KAPPA_WEIGHTS)}; got {weights!r}")
    a = np.asarray(human)
    b = np.asarray(judge)
    if a.ndim != 1 or b.ndim != 1 or a.size != b.size:
        raise ValueError(f"human and judge must be vectors of the same length; got {a.shape} and {b.shape}")
    if a.size and not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
        raise ValueError("human and judge must hold integer grades")
    cats, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    k = cats.size
    if a.size == 0 or k < 2:
        return float("nan")
    observed = np.bincount(codes[: a.size] * k + codes[a.size :], minlength=k * k).reshape(k, k) / a.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    dist = np.abs(np.arange(k)[:, None] - np.arange(k)[None, :]).astype(np.float64)
    wmat = dist if weights == "linear" else dist * dist
    return float(1 - np.sum(wmat * observed) / np.sum(wmat * expected))


def ppi_variance_at_optimum(n: int, sigma_y: float, rho: float, n_unlabelled: int) -> float:
    """``sigma_y^2 / n (1 - rho+^2 N / (n + N))``, rho+ = max(rho, 0): the variance of the PPI++ estimate with
    lambda at its optimum ``rho+ sigma_y / sigma_f N / (n + N)`` (assumed at most 1, where the clip does not bind)."""
    r = max(rho, 0.0)
    return sigma_y * sigma_y / n * (1 - r * r * n_unlabelled / (n + n_unlabelled))


def labelled_needed(
    distance: float,
    *,
    sigma_y: float,
    rho: float,
    n_unlabelled: int,
    power: float = 0.8,
    confidence: float = 0.95,
    df_share: float | None = None,
) -> int:
    """How many human-labelled queries (at least 2) a PPI++ interval at ``confidence`` needs to detect a paired
    difference of ``distance`` with probability ``power``, the N judge-only queries held fixed.

    Normal approximation of a two-sided test whose other tail is ignored: the smallest n with
    ``(z_(1 - alpha/2) + z_power) sqrt(var(n)) <= distance``, var(n) of :func:`ppi_variance_at_optimum` (lambda at
    its optimum, known). With ``K = ((z_(1 - alpha/2) + z_power) sigma_y / distance)^2`` that is the positive root
    of ``n^2 + (N - K) n - K N (1 - rho+^2) = 0``, rounded up (``K`` itself when N = 0 or rho <= 0).

    ``df_share``: the t form instead, the smallest n with ``(t_(1 - alpha/2, df) + t_(power, df)) sqrt(var(n)) <=
    distance`` at ``df = df_share (n - 1)`` (at least 1: the degrees of freedom of the labelled part of the interval,
    ``weighted_t``'s share of n - 1; 1 under equal weights), found from the normal n up (the t quantiles exceed the
    normal ones at a power of at least 0.5) as :func:`ndcg_mlflow.statistics.planning.queries_for` does."""
    from scipy.special import ndtri

    _level(confidence)
    if not 0 < power < 1:
        raise ValueError(f"power must lie strictly between 0 and 1; got {power!r}")
    if not (math.isfinite(distance) and distance > 0):
        raise ValueError(f"distance must be positive; got {distance!r}")
    if not (math.isfinite(sigma_y) and sigma_y >= 0):
        raise ValueError(f"sigma_y must be a finite standard deviation; got {sigma_y!r}")
    if not -1 <= rho <= 1:
        raise ValueError(f"rho must lie in [-1, 1]; got {rho!r}")
    if n_unlabelled < 0:
        raise ValueError(f"n_unlabelled must not be negative; got {n_unlabelled!r}")
    if df_share is not None and not 0 < df_share <= 1:
        raise ValueError(f"df_share must lie in (0, 1]; got {df_share!r}")
    z = float(two_sided_quantile(confidence) + ndtri(power))
    limit = (distance / z) ** 2
    k = (z * sigma_y / distance) ** 2
    big_n = float(n_unlabelled)
    c = k * big_n * (1 - max(rho, 0.0) ** 2)
    b = big_n - k
    disc = math.sqrt(b * b + 4 * c)
    root = (disc - b) / 2 if b <= 0 else (2 * c / (disc + b) if disc + b > 0 else 0.0)
    if not math.isfinite(root) or root > 2**53:
        raise ValueError(f"no number of labelled queries detects {distance!r} (sigma_y {sigma_y!r})")
    n = max(2, math.ceil(root))
    # the root in floating point may land a query off: step to the smallest n the variance itself accepts
    while n > 2 and ppi_variance_at_optimum(n - 1, sigma_y, rho, n_unlabelled) <= limit:
        n -= 1
    while ppi_variance_at_optimum(n, sigma_y, rho, n_unlabelled) > limit:
        n += 1
    if df_share is None or sigma_y == 0:
        return n
    share = df_share

    def enough(m: int) -> bool:
        df = share * (m - 1)
        if not df >= 1:
            return False
        return (
            t_sum(confidence, power, df) * math.sqrt(ppi_variance_at_optimum(m, sigma_y, rho, n_unlabelled)) <= distance
        )

    if enough(n):  # (the t quantiles exceed the normal ones from a power of 0.5 on: below, search from 2)
        return n if power >= 0.5 else (first_enough(enough, 1, n) or n)
    found = first_enough(enough, n, 2 * n)
    if found is None:
        raise ValueError(f"no number of labelled queries detects {distance!r} (sigma_y {sigma_y!r})")
    return found


def rho_bound(rho: float, n_eff: float) -> float:
    """The lower end of the one-sided :data:`~ndcg_mlflow.statistics.planning.SD_LEVEL` confidence interval for a
    correlation ``rho`` estimated on ``n_eff`` (Kish's effective number of) queries, by Fisher's z::

        rho_low = tanh(atanh(rho) - z_level / sqrt(n_eff - 3))

    NaN when ``rho`` is not a number or ``n_eff`` is at most 3 (the z has no variance to speak of)."""
    from scipy.special import ndtri

    if not (math.isfinite(rho) and n_eff > 3):
        return float("nan")
    r = min(max(rho, -1 + 1e-15), 1 - 1e-15)
    return float(math.tanh(math.atanh(r) - float(ndtri(SD_LEVEL)) / math.sqrt(n_eff - 3)))


#: the fewest labelled queries (Kish's n_eff of their weights) :func:`labelled_plan` plans from: Fisher's z of the
#: correlation needs more than 3
FEWEST_LABELLED = 4


def labelled_plan(
    y_l: Any,
    f_l: Any,
    f_u: Any,
    *,
    w_l: Any = None,
    w_u: Any = None,
    confidence: float,
    power: float,
    rule: str,
    margin: float,
    lam: float | None = None,
) -> dict[str, Any]:
    """How many labelled queries the decision's rule needs to pass with probability ``power``, the N judge-only
    queries held fixed, from a pilot: the labelled queries' human values ``y_l`` and judge's ``f_l``, the judge's
    values ``f_u`` of the others, and the declared estimator's ``lam`` (None: PPI++; 0: the labelled queries alone).

    The ``rule`` passes when the lower end of the estimator's interval (:func:`ppi_mean`, t form) lies above its
    threshold (``+margin`` for superiority, ``-margin`` for non-inferiority). The assumed true difference is the
    one every plan of a decision assumes (:func:`~ndcg_mlflow.statistics.planning.assumption`): for
    non-inferiority 0, at ``distance = margin`` (not estimated: no bound); for superiority the observed estimate,
    at ``distance = estimate - margin``. What the pilot leaves unknown is taken on its safe side, each at the
    one-sided :data:`~ndcg_mlflow.statistics.planning.SD_LEVEL` bound of :mod:`~ndcg_mlflow.statistics.planning`:

    - sigma_y, the per-query standard deviation of Y that the labelled queries' weighted standard error implies
      (``se sqrt(n)``, ``se`` and its degrees of freedom nu from ``weighted_t``: under unequal weights it carries
      their design effect), at :func:`~ndcg_mlflow.statistics.planning.sd_bound`;
    - superiority's distance at :func:`~ndcg_mlflow.statistics.planning.distance_bound` of the estimate's standard
      error and degrees of freedom;
    - rho (PPI++ only; 0 for the labelled queries alone) at :func:`rho_bound`, on Kish's n_eff of the labelled
      weights;

    and :func:`labelled_needed` at those bounds, in its t form at the share ``nu / (n - 1)`` of the degrees of freedom.

    Returns ``labelled_needed`` (None when there is no plan) and what it assumed: ``estimate``, ``threshold``,
    ``assumed_difference``, ``distance``, ``distance_bound`` (NaN under non-inferiority), ``sigma_y``,
    ``sigma_y_bound``, ``rho``, ``rho_bound``, ``df_share``, ``n_labelled``, ``n_unlabelled``, ``power``,
    ``confidence``, ``bound_level`` and ``reason``: None, or why there is no plan, as data (a ``kind`` with its
    numbers): ``estimator`` (classic PPI, lambda fixed at 1: not planned), ``labelled`` (fewer than
    :data:`FEWEST_LABELLED` effective labelled queries, or less than one degree of freedom), ``rho`` (the correlation
    is undefined: Y or f constant on the labelled queries), ``zero_margin`` (non-inferiority at a margin of 0),
    ``difference_within_threshold`` (superiority: the estimate does not clear the threshold), ``pilot_too_small``
    (superiority: its lower bound does not, or the plan is more than
    :data:`~ndcg_mlflow.statistics.planning.MOST_EXTRAPOLATION` times the one at the observed values: the plan would
    rest on the pilot's uncertainty, not on the difference) or ``beyond`` (no number of labelled queries)."""
    _level(confidence)
    if not 0 < power < 1:
        raise ValueError(f"power must lie strictly between 0 and 1; got {power!r}")
    assumption(rule, margin, float("nan"))  # (refuses a rule or margin it does not know, whatever the pilot)
    threshold = rule_threshold(rule, margin)
    y, f, fu, wl, wu = _inputs(y_l, f_l, f_u, w_l, w_u)
    n, big_n = y.size, fu.size
    nan = float("nan")
    plan: dict[str, Any] = {
        "labelled_needed": None,
        "power": power,
        "confidence": confidence,
        "bound_level": SD_LEVEL,
        "threshold": threshold,
        "estimate": nan,
        "assumed_difference": nan,
        "distance": nan,
        "distance_bound": nan,
        "sigma_y": nan,
        "sigma_y_bound": nan,
        "rho": nan,
        "rho_bound": nan,
        "df_share": nan,
        "n_labelled": n,
        "n_unlabelled": big_n,
        "reason": None,
    }
    if lam is not None and lam != 0:
        plan["reason"] = {"kind": "estimator", "lambda": lam}
        return plan
    n_eff = kish_n(wl) if n else 0.0
    if n < 2 or not n_eff >= FEWEST_LABELLED:
        plan["reason"] = {"kind": "labelled", "n": n, "n_eff": n_eff, "fewest": FEWEST_LABELLED}
        return plan
    est = ppi_mean(y, f, fu, w_l=wl, w_u=wu, confidence=confidence, lam=lam, interval="t")
    _, se_y, nu = weighted_t(y, wl)
    plan["estimate"] = est.estimate
    plan["rho"] = est.rho
    if not (nu >= 1 and est.df >= 1):
        plan["reason"] = {"kind": "labelled", "n": n, "n_eff": n_eff, "fewest": FEWEST_LABELLED}
        return plan
    sigma = se_y * math.sqrt(n)
    share = min(1.0, nu / (n - 1))
    plan.update(sigma_y=sigma, sigma_y_bound=sd_bound(sigma, nu), df_share=share)
    if lam is None:
        if math.isnan(est.rho):
            plan["reason"] = {"kind": "rho"}
            return plan
        plan["rho_bound"] = rho_bound(est.rho, n_eff)
    else:
        plan["rho_bound"] = 0.0
    assumed, distance, estimated = assumption(rule, margin, est.estimate)
    plan.update(assumed_difference=assumed, distance=distance)
    if not distance > 0:
        if estimated:
            plan["reason"] = {"kind": "difference_within_threshold", "estimate": est.estimate, "threshold": threshold}
        else:
            plan["reason"] = {"kind": "zero_margin"}
        return plan
    low = distance_bound(distance, est.se, est.df) if estimated else distance
    if estimated:
        plan["distance_bound"] = low
    if not low > 0:
        plan["reason"] = {
            "kind": "pilot_too_small",
            "estimate": est.estimate,
            "threshold": threshold,
            "low": low + threshold,
        }
        return plan
    try:
        needed = labelled_needed(
            low,
            sigma_y=plan["sigma_y_bound"],
            rho=plan["rho_bound"],
            n_unlabelled=big_n,
            power=power,
            confidence=confidence,
            df_share=share,
        )
        known = (
            labelled_needed(
                distance,
                sigma_y=sigma,
                rho=0.0 if lam is not None else est.rho,
                n_unlabelled=big_n,
                power=power,
                confidence=confidence,
                df_share=share,
            )
            if estimated
            else needed
        )
    except ValueError:
        plan["reason"] = {"kind": "beyond"}
        return plan
    if needed > MOST_EXTRAPOLATION * known:
        plan["reason"] = {
            "kind": "pilot_too_small",
            "estimate": est.estimate,
            "threshold": threshold,
            "low": low + threshold,
            "needed": needed,
            "known": known,
        }
        return plan
    plan["labelled_needed"] = needed
    return plan
