"""Weights are scale-free: every weighted statistic (means, bootstrap intervals, the t-test and its degrees of
freedom, the randomization test, Kish's n_eff, the effect size, the share's interval, URisk and TRisk, planning,
the segments' consistency) gives the same numbers for weights of 1e-250 or 1e250 as for the same ratios near 1,
with no overflow, underflow or numpy warning (a warning is an error here)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats as ss

from ndcg_mlflow.render.words import plan_reason
from ndcg_mlflow.statistics import inference as stats
from ndcg_mlflow.statistics import planning, risk, segments

RNG = np.random.default_rng(20261207)
N = 40
D = RNG.normal(0.02, 0.2, N)
X = RNG.uniform(0.0, 1.0, (N, 2))
W = np.exp(RNG.normal(0.0, 1.0, N))
HOLES = np.where(np.arange(N) % 5 == 0, np.nan, D)


def _interval(w, method):
    boot = stats.bootstrap_means(X, w, resamples=200, rng=np.random.default_rng(1), studentized=method == "studentized")
    return stats.interval(boot, X, w, confidence=0.95, method=method)


STATISTICS = {
    "weighted_mean": lambda w: stats.weighted_mean(X, w),
    "nan_weighted_mean": lambda w: stats.nan_weighted_mean(HOLES, w),
    "weighted_se": lambda w: stats.weighted_se(X, w),
    "bootstrap percentile": lambda w: _interval(w, "percentile"),
    "bootstrap bca": lambda w: _interval(w, "bca"),
    "bootstrap studentized": lambda w: _interval(w, "studentized"),
    "jackknife_acceleration": lambda w: stats.jackknife_acceleration(X, w),
    "effective_n": stats.effective_n,
    "kish_n": stats.kish_n,
    "reaches_n_eff": lambda w: stats.reaches_n_eff(w, 10),
    "share_interval": lambda w: stats.share_interval((D < 0).astype(float), w, 0.95),
    "randomization (Monte Carlo)": lambda w: stats.randomization_test(
        D, w, resamples=500, rng=np.random.default_rng(2)
    ),
    "randomization (exact)": lambda w: stats.randomization_test(
        D[:12], w[:12], resamples=0, rng=np.random.default_rng(2)
    ),
    "weighted_t": lambda w: stats.weighted_t(D, w),
    "t_degrees_of_freedom": stats.t_degrees_of_freedom,
    "t_interval": lambda w: stats.t_interval(D, w, 0.95),
    "paired_t_test": lambda w: stats.paired_t_test(D, w),
    "effect_size_dz": lambda w: stats.effect_size_dz(D, w),
    "urisk": lambda w: risk.urisk(D, w, 1.0),
    "trisk": lambda w: risk.trisk(D, w, 1.0),
    "regressed_share": lambda w: risk.regressed_share(D, w, 0.1, 0.95),
    "risk_entry": lambda w: risk.risk_entry(D, w, [1, 5]),
    "query_sd": lambda w: planning.query_sd(D, w),
    "mde": lambda w: planning.mde(D, w, 0.95),
    "current_power": lambda w: planning.current_power(D, w, 0.95, 0.05),
    "weights_bound": planning.weights_bound,
    "weights_at": lambda w: planning.weights_at(w, 100),
    "queries_needed": lambda w: planning.queries_needed(D, w, 0.95, 0.8, distance=0.05),
    "decision_plan non-inferiority": lambda w: planning.decision_plan(D, w, 0.95, 0.8, "non_inferiority", 0.02),
    "decision_plan superiority": lambda w: planning.decision_plan(D + 0.1, w, 0.95, 0.8, "superiority", 0.0),
    "segments consistency": lambda w: segments.consistency(
        "c", "ndcg_at_10", 0.1, [("a", 0.2, w[0]), ("b", -0.1, w[1]), ("c", -0.3, w[2])]
    ),
}


def _numbers(value):
    """Every number (or other leaf) of a result, in order."""
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _numbers(value[key])]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _numbers(item)]
    if isinstance(value, np.ndarray):
        return [float(v) for v in value.ravel()]
    if isinstance(value, (bool, np.bool_, str)) or value is None:
        return [value]
    return [float(value)]


def _quiet(f, w):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise", under="ignore"):
            return _numbers(f(w))


@pytest.mark.parametrize("scale", [1e250, 1e-250, 2.0**900, 2.0**-900])
@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_statistics_do_not_depend_on_the_weights_scale(name, scale):
    f = STATISTICS[name]
    expected = _quiet(f, W)
    got = _quiet(f, W * scale)
    assert len(got) == len(expected)
    assert any(isinstance(v, (bool, np.bool_)) or math.isfinite(v) for v in expected)  # (something to compare)
    exact = math.frexp(scale)[0] == 0.5  # a power of two: the very same ratios, the very same bits
    for e, g in zip(expected, got):
        if isinstance(e, float) and math.isnan(e):
            assert isinstance(g, float) and math.isnan(g), name
        elif exact or not isinstance(e, float):
            assert g == e, name
        else:
            assert g == pytest.approx(e, rel=1e-12, abs=0.0), name


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_weighted_t_of_equal_extreme_weights_is_the_paired_t_test(scale):
    """Closed forms at the ends of the doubles: equal weights give scipy's paired t-test and n - 1 degrees of
    freedom; Kish's n_eff of weights 1, 1 and 2 (times the scale) is 16 / 6."""
    w = np.full(N, scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m, se, df = stats.weighted_t(D, w)
        p = stats.paired_t_test(D, w)
        n_eff = stats.effective_n(np.array([1.0, 1.0, 2.0]) * scale)
    assert df == N - 1
    assert m == pytest.approx(D.mean(), rel=1e-12)
    assert se == pytest.approx(D.std(ddof=1) / math.sqrt(N), rel=1e-12)
    assert p == pytest.approx(ss.ttest_1samp(D, 0.0).pvalue, rel=1e-9)
    assert n_eff == pytest.approx(16 / 6, rel=1e-15)


def test_a_dominant_extreme_weight_leaves_a_finite_number_of_degrees_of_freedom():
    """The plan's reason for an undefined difference names the weights' degrees of freedom as a number (about
    one query carries the mean), never 'nan degrees of freedom'."""
    w = np.concatenate([[1e300], np.full(N - 1, 1e280)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = planning.decision_plan(D, w, 0.95, 0.8, "non_inferiority", 0.02)
        df = stats.t_degrees_of_freedom(w)
    assert 0 < df < 1
    reason = plan_reason(plan["reason"])
    assert reason is not None and "nan" not in reason
    assert f"{df:.3g} degrees of freedom" in reason
