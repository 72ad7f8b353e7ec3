"""URisk and TRisk (ndcg_mlflow.statistics.risk) against the papers' equal-weight formulas written out here, a 5-query
example worked by hand, weights as repeated queries, and the edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from ndcg_mlflow.statistics import inference as stats
from ndcg_mlflow.statistics.risk import regressed, regressed_share, risk_entry, trisk, urisk

# --------------------------------------------------------------------------- the papers' formulas, equal weights


def urisk_paper(d: list[float], alpha: float) -> float:
    """Wang, Bennett and Collins-Thompson (SIGIR 2012): (1/c) [sum over wins of d + (1 + alpha) sum over losses]."""
    wins = sum(x for x in d if x > 0)
    losses = sum(x for x in d if x < 0)
    return (wins + (1 + alpha) * losses) / len(d)


def trisk_paper(d: list[float], alpha: float) -> tuple[float, float]:
    """Dinçer, Macdonald and Ounis (SIGIR 2014): URisk / SE, SE = s_z / sqrt(c) with s_z the sample standard
    deviation (c - 1) of the risk-adjusted differences; p two-sided from Student's t with c - 1 degrees of
    freedom."""
    c = len(d)
    z = [x if x >= 0 else (1 + alpha) * x for x in d]
    u = sum(z) / c
    s = math.sqrt(sum((x - u) ** 2 for x in z) / (c - 1))
    t = u / (s / math.sqrt(c))
    return t, 2 * st.t.sf(abs(t), c - 1)


def random_cases(count: int = 40):
    rng = np.random.default_rng(2024)
    for i in range(count):
        n = int(rng.integers(2, 60))
        d = rng.normal(rng.normal(0, 0.05), rng.uniform(0.01, 0.4), n)
        if i % 3 == 0:  # ties at 0 and values on the nDCG range
            d[rng.random(n) < 0.3] = 0.0
            d = np.clip(d, -1, 1)
        if np.ptp(d) == 0:
            d[0] += 0.1
        yield d, float(rng.choice([0.0, 0.5, 1.0, 2.0, 5.0, 10.0]))


def test_equal_weights_give_the_papers_urisk_and_trisk():
    for d, alpha in random_cases():
        w = np.ones(d.size)
        assert urisk(d, w, alpha) == pytest.approx(urisk_paper(list(d), alpha), rel=1e-12, abs=1e-15)
        value, p = trisk(d, w, alpha)
        t, p_paper = trisk_paper(list(d), alpha)
        assert value == pytest.approx(t, rel=1e-10)
        assert p == pytest.approx(p_paper, rel=1e-9, abs=1e-300)


def test_a_five_query_example_worked_by_hand():
    # d = 0.2, -0.1, 0.0, 0.3, -0.2 and alpha = 1 (a loss counts twice):
    #   wins 0.2 + 0.3 = 0.5; losses -0.1 - 0.2 = -0.3 (the tie 0.0 counts as neither)
    #   URisk = (0.5 + 2 * (-0.3)) / 5 = -0.1 / 5 = -0.02
    #   z = 0.2, -0.2, 0.0, 0.3, -0.4 (mean -0.02); deviations 0.22, -0.18, 0.02, 0.32, -0.38
    #   squares 0.0484 + 0.0324 + 0.0004 + 0.1024 + 0.1444 = 0.328; s^2 = 0.328 / 4 = 0.082
    #   SE = sqrt(0.082 / 5) = sqrt(0.0164) = 0.128062...; TRisk = -0.02 / 0.128062... = -0.156174...
    #   alpha = 0: URisk = (0.2 - 0.1 + 0.3 - 0.2) / 5 = 0.04
    d, w = [0.2, -0.1, 0.0, 0.3, -0.2], [1.0] * 5
    assert urisk(d, w, 1.0) == pytest.approx(-0.02, abs=1e-15)
    value, p = trisk(d, w, 1.0)
    assert value == pytest.approx(-0.02 / math.sqrt(0.0164), rel=1e-12)
    assert value == pytest.approx(-0.1561737619, abs=1e-9)
    assert p == pytest.approx(2 * st.t.sf(0.02 / math.sqrt(0.0164), 4), rel=1e-12)
    assert 0.88 < p < 0.89  # |TRisk| far below 2: no significant risk
    assert urisk(d, w, 0.0) == pytest.approx(0.04, abs=1e-15)
    # five times the weights: nothing changes
    assert urisk(d, [5.0] * 5, 1.0) == pytest.approx(-0.02, abs=1e-15)
    assert trisk(d, [5.0] * 5, 1.0)[0] == pytest.approx(value, rel=1e-12)


def test_alpha_zero_gives_the_weighted_mean_difference_and_the_paired_t():
    rng = np.random.default_rng(5)
    d = rng.normal(0.01, 0.2, 40)
    w = np.exp(rng.normal(size=40))
    assert urisk(d, w, 0.0) == pytest.approx(float(np.sum(w * d) / np.sum(w)), rel=1e-12)
    b = rng.uniform(0, 1, 40)
    c = np.clip(b + d, 0, 1)
    test = st.ttest_rel(c, b)
    value, p = trisk(c - b, np.ones(40), 0.0)
    assert value == pytest.approx(test.statistic, rel=1e-10)
    assert p == pytest.approx(test.pvalue, rel=1e-9)


def test_urisk_falls_as_alpha_grows_when_the_candidate_loses_somewhere():
    d = [0.3, -0.05, 0.1, -0.2]
    values = [urisk(d, [1.0] * 4, a) for a in (0, 1, 2, 5, 10)]
    assert values == sorted(values, reverse=True) and len(set(values)) == 5
    # slope: the losses' mean, -0.25 / 4, per unit of alpha
    assert values[1] - values[0] == pytest.approx(-0.0625, abs=1e-15)
    assert urisk([0.1, 0.2], [1.0, 1.0], 10.0) == pytest.approx(0.15)  # no loss: alpha changes nothing


# --------------------------------------------------------------------------- weights


def test_a_weight_of_two_is_the_query_listed_twice_for_urisk():
    # dyadic values: every sum is exact, so the two are equal to the last bit
    d = [0.25, -0.125, 0.5, -0.375, 0.0, -0.0625]
    w = [2.0, 1.0, 3.0, 1.0, 1.0, 2.0]
    listed = [x for x, k in zip(d, w) for _ in range(int(k))]
    for alpha in (0.0, 1.0, 5.0):
        assert urisk(d, w, alpha) == urisk_paper(listed, alpha)


def weighted_se(z: np.ndarray, w: np.ndarray) -> float:
    """The bias-corrected weighted standard error, from its formula: sqrt(sum lambda_i (z_i - m)^2), lambda_i =
    h_i^2 / (1 - 2 h_i + sum h^2), h = w / sum w."""
    h = w / w.sum()
    m = float(np.sum(h * z))
    lam = h**2 / (1 - 2 * h + np.sum(h**2))
    return math.sqrt(float(np.sum(lam * (z - m) ** 2)))


def test_trisk_with_weights_is_urisk_over_the_weighted_standard_error_not_the_listed_queries():
    """What holds for TRisk: the numerator is URisk (a weight counts as repeated queries there), the standard error
    is the weighted t's, and a weight is not a repeated query in it: the t statistic counts independent queries."""
    d = np.array([0.25, -0.125, 0.5, -0.375, 0.0, -0.0625, 0.125])
    w = np.array([2.0, 1.0, 3.0, 1.0, 1.0, 2.0, 1.0])
    alpha = 1.0
    z = np.where(d >= 0, d, 2 * d)
    value, p = trisk(d, w, alpha)
    assert value == pytest.approx(urisk(d, w, alpha) / weighted_se(z, w), rel=1e-12)
    assert p == stats.paired_t_test(z, w)  # the weighted t-test of the risk-adjusted differences
    listed = [x for x, k in zip(d, w) for _ in range(int(k))]
    assert value != pytest.approx(trisk_paper(listed, alpha)[0], rel=1e-3)
    # every query listed twice: the same URisk, a TRisk larger by sqrt((2c - 1) / (c - 1)); every weight 2: the
    # paper's TRisk of the list once
    c = d.size
    once = trisk_paper(list(d), alpha)[0]
    assert trisk_paper(list(d) * 2, alpha)[0] == pytest.approx(once * math.sqrt((2 * c - 1) / (c - 1)), rel=1e-12)
    assert trisk(d, np.full(c, 2.0), alpha)[0] == pytest.approx(once, rel=1e-12)
    assert trisk(d, w * 1e6, alpha)[0] == pytest.approx(value, rel=1e-12)  # the scale of the weights does not matter


# --------------------------------------------------------------------------- edge cases


def test_edge_cases_follow_the_paired_t_tests_conventions():
    assert math.isnan(urisk([], [], 1.0))
    assert all(math.isnan(x) for x in trisk([0.1], [1.0], 1.0))
    assert urisk([0.1], [1.0], 1.0) == pytest.approx(0.1)
    assert trisk([0.1, 0.1, 0.1], [1.0, 2.0, 1.0], 1.0) == (math.inf, 0.0)
    assert trisk([-0.1, -0.1], [1.0, 1.0], 1.0) == (-math.inf, 0.0)
    value, p = trisk([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], 5.0)
    assert math.isnan(value) and p == 1.0
    # weights that leave less than one degree of freedom: the statistic, no p-value
    value, p = trisk([0.3, -0.1, 0.2], [1.0, 1e-9, 1e-9], 1.0)
    assert math.isfinite(value) and math.isnan(p)


@pytest.mark.parametrize(
    "d, w, alpha, match",
    [
        ([0.1, 0.2], [1.0], 1.0, "one paired difference per weight"),
        ([0.1, float("nan")], [1.0, 1.0], 1.0, "finite paired differences"),
        ([0.1, 0.2], [1.0, 0.0], 1.0, "positive query weights"),
        ([0.1, 0.2], [1.0, -1.0], 1.0, "positive query weights"),
        ([0.1, 0.2], [1.0, 1.0], -0.5, r"alpha must be a number in \[0, 1e\+06\]"),
        ([0.1, 0.2], [1.0, 1.0], float("inf"), "alpha must be"),
        ([0.1, 0.2], [1.0, 1.0], 1e6 * (1 + 1e-15), r"alpha must be a number in \[0, 1e\+06\]"),
    ],
)
def test_bad_input_is_refused_saying_what_was_expected(d, w, alpha, match):
    for f in (urisk, trisk):
        with pytest.raises(ValueError, match=match):
            f(d, w, alpha)


# --------------------------------------------------------------------------- regressions and the JSON entry


def test_regressed_marks_the_queries_that_lose_more_than_delta():
    d = [0.3, -0.05, -0.1, -0.2, 0.0]
    assert regressed(d, 0.1).tolist() == [0.0, 0.0, 0.0, 1.0, 0.0]  # -0.1 loses exactly delta: not more
    assert regressed(d, 0.0).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    w = np.array([1.0, 1.0, 1.0, 3.0, 1.0])
    assert stats.weighted_mean(regressed(d, 0.1), w) == pytest.approx(3 / 7)
    with pytest.raises(ValueError, match="delta must be a finite number at or above 0"):
        regressed(d, -0.1)


@pytest.mark.parametrize("n", [1, 2, 5, 30, 101])
def test_regressed_share_with_equal_weights_is_the_exact_binomial_interval(n):
    """k regressed queries out of n: scipy's exact (Clopper-Pearson) interval, whose upper end is the guardrail's
    bound; with none, 1 - (alpha/2)^(1/n) (0.116 at n = 30), never 0; never below 0."""
    for k in sorted({0, 1, n // 3, n - 1, n}):
        d = np.r_[np.full(k, -0.5), np.zeros(n - k)]
        for w in (np.ones(n), np.full(n, 0.37)):
            got = regressed_share(d, w, 0.1, 0.95)
            ci = st.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
            assert got["share"] == k / n and got["delta"] == 0.1
            assert got["ci_low"] == pytest.approx(ci.low, rel=1e-7, abs=1e-15)  # (scipy finds it by root search)
            assert got["ci_high"] == pytest.approx(ci.high, rel=1e-7)
            assert 0 <= got["ci_low"] <= k / n <= got["ci_high"] <= 1
        if k == 0:
            assert got["ci_high"] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12)
    assert regressed_share([0.2, 0.0] * 15, [1.0] * 30, 0.1, 0.95)["ci_high"] == pytest.approx(0.1157, abs=1e-4)
    got = regressed_share(np.r_[-0.5, np.zeros(29)], np.ones(30), 0.1, 0.95)
    assert got["ci_low"] > 0  # one regressed query of 30: a positive share, at both ends


def test_regressed_share_under_unequal_weights_takes_kish_n_eff():
    """Weights (1 x 9, 3): n_eff = 12^2 / 18 = 8. Regressed: the heavy query and three light ones, a weighted share
    of 6 / 12: the exact interval of 4 out of 8. None regressed: 1 - (alpha/2)^(1/8); all: (alpha/2)^(1/8) below."""
    w = np.r_[np.ones(9), 3.0]
    d = np.r_[np.full(3, -0.3), np.zeros(6), -0.3]
    got = regressed_share(d, w, 0.2, 0.9)
    ci = st.binomtest(4, 8).proportion_ci(confidence_level=0.9, method="exact")
    assert got["share"] == pytest.approx(0.5)
    assert (got["ci_low"], got["ci_high"]) == (pytest.approx(ci.low, rel=1e-9), pytest.approx(ci.high, rel=1e-9))
    none = regressed_share(np.zeros(10), w, 0.2, 0.9)
    assert (none["share"], none["ci_low"]) == (0, 0) and none["ci_high"] == pytest.approx(1 - 0.05 ** (1 / 8))
    every = regressed_share(np.full(10, -0.5), w, 0.2, 0.9)
    assert every["ci_high"] == 1 and every["ci_low"] == pytest.approx(0.05 ** (1 / 8))
    empty = regressed_share([], [], 0.2, 0.9)
    assert all(math.isnan(empty[k]) for k in ("share", "ci_low", "ci_high"))


def test_risk_entry_keys_each_alpha_as_written():
    d = [0.2, -0.1, 0.0, 0.3, -0.2]
    entry = risk_entry(d, [1.0] * 5, [0, 1, 0.5, 10.0])
    assert list(entry) == ["urisk", "trisk"]
    assert list(entry["urisk"]) == list(entry["trisk"]) == ["0", "1", "0.5", "10"]
    assert entry["urisk"]["1"] == pytest.approx(-0.02)
    assert entry["urisk"]["10"] == pytest.approx(urisk_paper(d, 10.0))
    t, p = trisk_paper(d, 0.5)
    assert entry["trisk"]["0.5"] == {"value": pytest.approx(t), "p": pytest.approx(p)}
    with pytest.raises(ValueError, match="alphas written alike"):
        risk_entry(d, [1.0] * 5, [1, 1.0])


def test_alphas_that_differ_beyond_six_digits_get_keys_of_their_own():
    """An alpha is keyed by its short form (``1``, ``1e+06``) only where that reads back as the same number: two
    alphas six-digit formatting would write alike are two keys, each holding its own numbers."""
    d = [0.2, -0.1, 0.0, 0.3, -0.2]
    entry = risk_entry(d, [1.0] * 5, [1, 1.0000001, 1e6])
    assert list(entry["urisk"]) == ["1", "1.0000001", "1e+06"]
    assert entry["urisk"]["1.0000001"] == pytest.approx(urisk_paper(d, 1.0000001), rel=1e-12)
    assert entry["urisk"]["1.0000001"] != entry["urisk"]["1"]
    assert entry["urisk"]["1e+06"] == pytest.approx(urisk_paper(d, 1e6), rel=1e-12)
    t, p = trisk_paper(d, 1e6)
    assert entry["trisk"]["1e+06"] == {"value": pytest.approx(t, rel=1e-9), "p": pytest.approx(p, rel=1e-9)}
