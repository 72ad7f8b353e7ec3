"""Planning (ndcg_mlflow.statistics.planning): the minimum detectable difference against its closed form with scipy's t
quantiles, the queries needed against a brute-force loop written here, monotonicity, and the decision's plan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st
from scipy.special import ndtri

from ndcg_mlflow.render.words import plan_reason
from ndcg_mlflow.statistics import inference as stats
from ndcg_mlflow.statistics.planning import (
    MOST_QUERIES,
    current_power,
    decision_plan,
    mde,
    queries_for,
    queries_needed,
    query_sd,
)


def brute_force(
    sd: float, ratio: float, confidence: float, power: float, distance: float, limit: int = 200_000, share: float = 1.0
):
    """The first n = 2, 3, ... with n_eff = n ratio, df = share (n_eff - 1) >= 1 and
    (t_(1 - alpha/2, df) + t_(power, df)) sd / sqrt(n_eff) <= distance."""
    for n in range(2, limit):
        n_eff = n * ratio
        df = share * (n_eff - 1)
        if df < 1:
            continue
        if (st.t.ppf(1 - (1 - confidence) / 2, df) + st.t.ppf(power, df)) * sd / math.sqrt(n_eff) <= distance:
            return n
    raise AssertionError("no n below the limit")


def kish(w: np.ndarray) -> float:
    return float(w.sum() ** 2 / (w**2).sum())


def bias_corrected_se(d: np.ndarray, w: np.ndarray) -> float:
    """sqrt(sum lambda_i (d_i - m)^2), lambda_i = h_i^2 / (1 - 2 h_i + sum h^2), h = w / sum w."""
    h = w / w.sum()
    m = float(np.sum(h * d))
    lam = h**2 / (1 - 2 * h + np.sum(h**2))
    return math.sqrt(float(np.sum(lam * (d - m) ** 2)))


# --------------------------------------------------------------------------- mde


@pytest.mark.parametrize("confidence, power", [(0.95, 0.8), (0.9, 0.9), (0.99, 0.5)])
def test_mde_with_equal_weights_is_the_closed_form(confidence, power):
    d = np.random.default_rng(3).normal(0.01, 0.25, 30)
    se = np.std(d, ddof=1) / math.sqrt(30)
    expected = (st.t.ppf(1 - (1 - confidence) / 2, 29) + st.t.ppf(power, 29)) * se
    assert mde(d, np.ones(30), confidence, power) == pytest.approx(expected, rel=1e-12)
    assert mde(d, np.full(30, 7.0), confidence, power) == pytest.approx(expected, rel=1e-12)


def test_mde_of_five_queries_worked_by_hand():
    # d = 0.01, 0.02, 0.03, 0.04, 0.05: mean 0.03, s^2 = (4 + 1 + 0 + 1 + 4) 1e-4 / 4 = 2.5e-4, se = sqrt(2.5e-4 / 5)
    # = sqrt(5e-5) = 0.0070711; t_(0.975, 4) = 2.776445, t_(0.8, 4) = 0.940965: mde = 3.717410 * 0.0070711 = 0.026286
    d = [0.01, 0.02, 0.03, 0.04, 0.05]
    # (the quantiles as a table prints them, to 6 decimals)
    assert mde(d, [1.0] * 5, 0.95, 0.8) == pytest.approx((2.776445 + 0.940965) * math.sqrt(5e-5), rel=2e-7)
    assert mde(d, [1.0] * 5, 0.95, 0.8) == pytest.approx(0.026286, abs=1e-6)
    assert query_sd(d, [1.0] * 5) == pytest.approx(math.sqrt(2.5e-4), rel=1e-12)


def test_mde_with_weights_reads_the_weighted_t():
    rng = np.random.default_rng(8)
    d, w = rng.normal(0, 0.2, 50), np.exp(rng.normal(size=50))
    from ndcg_mlflow.statistics.inference import weighted_t

    _, se, df = weighted_t(d, w)
    assert se == pytest.approx(bias_corrected_se(d, w), rel=1e-12)
    assert 1 <= df <= kish(w) - 1
    assert mde(d, w, 0.95, 0.8) == pytest.approx((st.t.ppf(0.975, df) + st.t.ppf(0.8, df)) * se, rel=1e-12)
    assert query_sd(d, w) == pytest.approx(bias_corrected_se(d, w) * math.sqrt(kish(w)), rel=1e-12)


def test_current_power_is_the_t_approximation_and_inverts_mde():
    rng = np.random.default_rng(4)
    d = rng.normal(0.02, 0.3, 40)
    se = np.std(d, ddof=1) / math.sqrt(40)
    for distance in (0.01, 0.05, 0.2):
        expected = st.t.cdf(distance / se - st.t.ppf(0.975, 39), 39)
        assert current_power(d, np.ones(40), 0.95, distance) == pytest.approx(expected, rel=1e-12)
    assert current_power(d, np.ones(40), 0.95, mde(d, np.ones(40), 0.95, 0.9)) == pytest.approx(0.9, rel=1e-10)


# --------------------------------------------------------------------------- queries needed


@pytest.mark.parametrize(
    "sd, distance, confidence, power",
    [
        (0.2, 0.05, 0.95, 0.8),
        (0.2, 0.2, 0.95, 0.8),  # small n: the t quantiles matter
        (0.3, 0.02, 0.95, 0.9),
        (0.1, 0.25, 0.9, 0.8),  # the first n with a degree of freedom already suffices
        (0.35, 0.1, 0.99, 0.95),
        (0.25, 0.04, 0.95, 0.3),  # a power below one half
    ],
)
def test_queries_needed_is_the_brute_force_answer(sd, distance, confidence, power):
    """Equal weights: the first n whose power reaches the target with sigma at the upper end of its one-sided 90%
    confidence interval from the pilot's sd on nu = 59 degrees of freedom, sd sqrt(59 / chi2_(0.1, 59))."""
    rng = np.random.default_rng(11)
    d = rng.normal(0, 1, 60)
    d = (d - d.mean()) / np.std(d, ddof=1) * sd  # sample standard deviation exactly sd (up to rounding)
    w = np.ones(60)
    assert query_sd(d, w) == pytest.approx(sd, rel=1e-12)
    bound = sd * math.sqrt(59 / st.chi2.ppf(0.1, 59))
    got = queries_needed(d, w, confidence, power, distance=distance)
    assert got == brute_force(bound, 1.0, confidence, power, distance)
    assert got >= brute_force(sd, 1.0, confidence, power, distance)  # never fewer than the plain plan
    assert queries_needed(d, np.full(60, 3.0), confidence, power, distance=distance) == got


def test_unequal_weights_are_planned_at_their_n_eff_at_the_planned_n():
    """The weights at n are drawn from the pilot's: n_eff / n and the degrees of freedom's share of n_eff - 1 fall
    as n grows, so the plan needs at least the plain plan's queries (the pilot's ratio and share at any n)."""
    from ndcg_mlflow.statistics.planning import weights_at

    rng = np.random.default_rng(12)
    assert [a.tolist() for a in weights_at(np.ones(9), 40)] == [[40.0] * 16, [39.0] * 16]
    w = np.exp(rng.normal(0, 1.5, 50))
    ratios = [float(np.mean(weights_at(w, n)[0])) / n for n in (50, 500, 5000)]
    assert ratios[0] > ratios[1] > ratios[2]
    d = rng.normal(0, 0.25, 50)
    share = stats.t_degrees_of_freedom(w) / (kish(w) - 1)
    sd_w = bias_corrected_se(d, w) * math.sqrt(kish(w))
    plain = brute_force(sd_w, kish(w) / 50, 0.95, 0.8, 0.05, share=share)
    assert queries_needed(d, w, 0.95, 0.8, distance=0.05) > plain


def test_queries_needed_exceeds_the_normal_approximation_where_it_matters():
    # sd 0.2, distance 0.2: ((1.96 + 0.84) 0.2 / 0.2)^2 = 7.85 -> 8 queries by the normal approximation; the t
    # quantiles at 7 degrees of freedom are 2.365 + 0.896: 8 queries give power below 0.8
    normal = math.ceil((ndtri(0.975) + ndtri(0.8)) ** 2)
    assert normal == 8
    needed = queries_for(0.2, 1.0, 0.95, 0.8, 0.2)
    assert needed == brute_force(0.2, 1.0, 0.95, 0.8, 0.2) == 10
    assert queries_for(0.2, 1.0, 0.95, 0.8, 0.02) == brute_force(0.2, 1.0, 0.95, 0.8, 0.02)  # ~787


def test_the_current_queries_are_needed_for_the_current_mde():
    """With equal weights, mde at n queries and the plain plan (queries_for, sigma taken as known) at that distance
    are one equation read both ways; the plan, which takes sigma as estimated from these 45 queries, needs more."""
    d = np.random.default_rng(9).normal(0.0, 0.2, 45)
    w = np.ones(45)
    m = mde(d, w, 0.95, 0.8)
    assert queries_for(query_sd(d, w), 1.0, 0.95, 0.8, m * (1 + 1e-9)) == 45
    assert queries_for(query_sd(d, w), 1.0, 0.95, 0.8, m * (1 - 1e-6)) == 46
    assert queries_needed(d, w, 0.95, 0.8, distance=m * (1 + 1e-9)) > 45


def test_queries_needed_moves_the_right_way():
    d = np.random.default_rng(12).normal(0.0, 0.25, 80)
    w = np.ones(80)
    by_distance = [queries_needed(d, w, 0.95, 0.8, distance=x) for x in (0.01, 0.02, 0.05, 0.1, 0.3)]
    assert by_distance == sorted(by_distance, reverse=True) and by_distance[0] > by_distance[-1]
    by_power = [queries_needed(d, w, 0.95, p, distance=0.05) for p in (0.5, 0.8, 0.9, 0.99)]
    assert by_power == sorted(by_power) and len(set(by_power)) == 4
    by_level = [queries_needed(d, w, c, 0.8, distance=0.05) for c in (0.8, 0.9, 0.95, 0.99)]
    assert by_level == sorted(by_level) and len(set(by_level)) == 4
    # halving the distance takes about four times the queries
    assert by_distance[1] / by_distance[0] == pytest.approx(0.25, rel=0.01)
    # the same differences under half as many effective queries per query need twice the queries
    twice = queries_for(0.25, 0.5, 0.95, 0.8, 0.02)
    once = queries_for(0.25, 1.0, 0.95, 0.8, 0.02)
    assert twice is not None and once is not None and abs(twice - 2 * once) <= 2


def test_a_tiny_distance_needs_more_queries_than_any_plan():
    """A margin of 1e-200 (or the smallest double) is no overflow: more than MOST_QUERIES queries, said so."""
    d, w = [0.1, 0.3, -0.2], [1.0, 1.0, 1.0]
    for distance in (1e-200, 5e-324):
        assert queries_for(0.3, 1.0, 0.95, 0.8, distance) is None
        assert queries_for(0.3, 0.01, 0.95, 0.8, distance, df_share=0.2) is None
        assert queries_needed(d, w, 0.95, 0.8, distance=distance) is None
        plan = decision_plan(d, w, 0.95, 0.8, "non_inferiority", distance)
        assert plan["queries_needed"] is None and plan["detectable"] is False
        assert plan_reason(plan["reason"]) == f"more than {MOST_QUERIES:,} queries would be needed"
    assert queries_for(0.0, 1.0, 0.95, 0.8, 1e-200) == 2  # no spread: any distance is detected at 2 queries


def test_queries_needed_edge_cases():
    d, w = [0.1, 0.3, -0.2], [1.0, 1.0, 1.0]
    assert queries_needed(d, w, 0.95, 0.8, distance=0.0) is None
    assert queries_needed(d, w, 0.95, 0.8, distance=-0.1) is None
    assert queries_needed(d, w, 0.95, 0.8, distance=float("nan")) is None
    assert queries_needed([0.1], [1.0], 0.95, 0.8, distance=0.1) is None  # no standard deviation from one query
    assert queries_needed([0.1, 0.1, 0.1], w, 0.95, 0.8, distance=0.01) == 2  # no spread: 2 queries, 1 df
    assert queries_for(0.3, 1.0, 0.95, 0.8, 1e-12) is None  # beyond 2^53 queries: no plan
    for tiny in (1e-160, 1e-300, 5e-324):  # (z sd / distance)^2 beyond the largest double: no plan, no OverflowError
        assert queries_for(0.3, 1.0, 0.95, 0.8, tiny) is None
        assert queries_needed(d, w, 0.95, 0.8, distance=tiny) is None
    assert queries_for(0.0, 0.25, 0.95, 0.8, 0.1) == 8  # n_eff = n / 4 must reach 2 (one degree of freedom)
    assert mde([0.1], [1.0], 0.95) != mde([0.1], [1.0], 0.95)  # NaN
    assert mde([0.1, 0.1, 0.1], w, 0.95) == 0.0
    assert math.isnan(mde([0.3, -0.1, 0.2], [1.0, 1e-9, 1e-9], 0.95))  # less than one degree of freedom
    for bad in (dict(confidence=1.0, power=0.8), dict(confidence=0.95, power=0.0), dict(confidence=0.95, power=1)):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            mde(d, w, **bad)
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            queries_needed(d, w, **bad, distance=0.1)


# --------------------------------------------------------------------------- the decision's plan


def test_non_inferiority_assumes_no_difference_and_the_margin_as_distance():
    rng = np.random.default_rng(21)
    d = rng.normal(0.03, 0.2, 100)
    w = np.ones(100)
    m = mde(d, w, 0.95, 0.8)  # about (1.98 + 0.85) 0.2 / 10 = 0.057
    wide = decision_plan(d, w, 0.95, 0.8, "non_inferiority", 0.08)
    assert wide["assumed_difference"] == 0.0 and wide["distance"] == 0.08
    assert wide["mde"] == m and wide["power"] == 0.8
    assert wide["queries_needed"] == queries_needed(d, w, 0.95, 0.8, distance=0.08) < 100
    assert wide["detectable"] is True and wide["reason"] is None
    assert wide["current_power"] > 0.8
    narrow = decision_plan(d, w, 0.95, 0.8, "non_inferiority", 0.02)
    assert narrow["detectable"] is False and narrow["current_power"] < 0.8
    assert narrow["queries_needed"] == queries_needed(d, w, 0.95, 0.8, distance=0.02)
    assert narrow["queries_needed"] >= brute_force(query_sd(d, w), 1.0, 0.95, 0.8, 0.02) > 100
    zero = decision_plan(d, w, 0.95, 0.8, "non_inferiority", 0.0)
    assert (
        zero["queries_needed"] is None and "margin is 0" in plan_reason(zero["reason"]) and zero["detectable"] is False
    )


def test_superiority_assumes_the_observed_difference():
    rng = np.random.default_rng(22)
    d = rng.normal(0.0, 0.2, 100)
    d = d - d.mean() + 0.05  # observed weighted mean 0.05 (equal weights)
    w = np.ones(100)
    plan = decision_plan(d, w, 0.95, 0.9, "superiority", 0.01)
    assert plan["assumed_difference"] == pytest.approx(0.05)
    assert plan["distance"] == pytest.approx(0.04)
    # the distance is read off the observed difference: its uncertainty is planned for too
    needed = queries_needed(d, w, 0.95, 0.9, distance=plan["distance"], observed=True)
    assert plan["queries_needed"] == needed > queries_needed(d, w, 0.95, 0.9, distance=plan["distance"])
    assert needed > brute_force(query_sd(d, w), 1.0, 0.95, 0.9, plan["distance"])
    assert plan["detectable"] == (plan["mde"] <= plan["distance"])
    above = decision_plan(d, w, 0.95, 0.8, "superiority", 0.06)
    assert above["queries_needed"] is None and above["detectable"] is False
    assert plan_reason(above["reason"]) == "the observed difference does not exceed the margin"
    assert above["distance"] == pytest.approx(-0.01)


def test_decision_plan_says_why_it_cannot_plan():
    one = decision_plan([0.1], [1.0], 0.95, 0.8, "non_inferiority", 0.05)
    assert one["queries_needed"] is None and math.isnan(one["mde"]) and one["detectable"] is False
    assert plan_reason(one["reason"]) == "only one query is valid for both systems"
    none = decision_plan([], [], 0.95, 0.8, "superiority", 0.05)
    assert plan_reason(none["reason"]) == "no query is valid for both systems" and math.isnan(none["distance"])
    few = decision_plan([0.3, -0.1, 0.2], [1.0, 1e-9, 1e-9], 0.95, 0.8, "non_inferiority", 0.05)
    assert plan_reason(few["reason"]) == "the weights leave 4e-09 degrees of freedom: the interval needs at least 1"
    assert few["queries_needed"] is None  # (sigma is not known from them)
    with pytest.raises(ValueError, match="rule must be one of"):
        decision_plan([0.1, 0.2], [1.0, 1.0], 0.95, 0.8, "equivalence", 0.05)
    with pytest.raises(ValueError, match="margin must be"):
        decision_plan([0.1, 0.2], [1.0, 1.0], 0.95, 0.8, "superiority", -0.05)


@pytest.mark.parametrize("confidence", [0.9999999999999999, 1 - 1e-12])
def test_mde_near_a_confidence_of_one_is_the_closed_form(confidence):
    # df = 2: t_(p, 2) = (2p - 1) / sqrt(2 p (1 - p)); the level's quantile from a = (1 - confidence) / 2 as
    # (1 - 2a) / sqrt(2a (1 - a)), which 0.5 + confidence / 2 made infinite (or inexact)
    d = np.array([0.1, -0.3, 0.5])
    a = (1 - confidence) / 2
    power = 0.8
    q = (1 - 2 * a) / math.sqrt(2 * a * (1 - a)) + (2 * power - 1) / math.sqrt(2 * power * (1 - power))
    se = float(d.std(ddof=1) / math.sqrt(3))
    assert mde(d, np.ones(3), confidence, power) == pytest.approx(q * se, rel=1e-9)
    assert current_power(d, np.ones(3), confidence, q * se) == pytest.approx(power, rel=1e-6)


def test_queries_for_near_a_confidence_of_one_is_the_brute_force():
    # the normal guess's quantile from 0.5 + confidence / 2 was infinite: no plan (None) for any margin
    confidence = 0.9999999999999999
    n = queries_for(0.3, 1.0, confidence, 0.8, 0.3)
    assert n is not None
    first = next(
        k for k in range(3, 1000) if (st.t.isf((1 - confidence) / 2, k - 1) + st.t.ppf(0.8, k - 1)) / math.sqrt(k) <= 1
    )
    assert n == first


def test_weights_bound_covers_the_log_weights_sigma_at_its_level():
    """The upper bound on the weights' log-scale dispersion is at or above the lognormal law's sigma in
    WEIGHTS_LEVEL of the pilots (brute force over 2,000 pilots of 20 weights; 3 standard errors)."""
    from ndcg_mlflow.statistics.planning import WEIGHTS_LEVEL, weights_bound

    rng = np.random.default_rng(41)
    covered = [weights_bound(np.exp(2.0 * rng.standard_normal(20))) >= 2.0 for _ in range(2000)]
    assert abs(np.mean(covered) - WEIGHTS_LEVEL) <= 3 * math.sqrt(WEIGHTS_LEVEL * (1 - WEIGHTS_LEVEL) / 2000)
    assert weights_bound(np.full(5, 2.0)) == 0.0 and math.isnan(weights_bound([1.0]))


def test_weights_at_does_not_promise_the_pilots_lighter_tail():
    """A pilot of 20 lognormal weights (sigma 2) rarely holds the heavy weights that 2,000 queries meet: the plan's
    n_eff / n at n = 2,000 is at most the law's own (a brute-force mean over 400 sets of 2,000 lognormal weights) for
    nearly every pilot (the bound's level, 0.9, less noise), where the pilot's weights resampled promise more."""
    from ndcg_mlflow.statistics.planning import weights_at

    rng = np.random.default_rng(43)
    law = np.exp(2.0 * rng.standard_normal((400, 2000)))
    truth = float(np.mean(law.sum(axis=1) ** 2 / (law**2).sum(axis=1))) / 2000
    safe = []
    for _ in range(60):
        w = np.exp(2.0 * rng.standard_normal(20))
        safe.append(float(np.mean(weights_at(w, 2000)[0])) / 2000 <= truth)
    assert np.mean(safe) >= 0.8


def test_weights_at_with_few_distinct_weights_is_no_lighter_than_their_law():
    """Weights of two values (a tie each): the plan's n_eff / n is at most the closed form (E w)^2 / E w^2 of the
    pilot's two-point law, to which its weights resampled tend."""
    from ndcg_mlflow.statistics.planning import weights_at

    for light, heavy, k in ((1.0, 10.0, 10), (1.0, 1000.0, 1), (1.0, 3.0, 5)):
        w = np.array([light] * (20 - k) + [heavy] * k)
        p = k / 20
        closed = ((1 - p) * light + p * heavy) ** 2 / ((1 - p) * light**2 + p * heavy**2)
        assert float(np.mean(weights_at(w / heavy, 3000)[0])) / 3000 <= closed * 1.02


# --------------------------------------------------------------------------- the bounds the plan is made at


def test_sd_bound_is_the_chi_square_closed_form_and_covers_sigma_at_its_level():
    """sd sqrt(nu / chi2_(1 - level, nu)): at nu = 2, chi2_(q, 2) = -2 ln(1 - q), so the bound is
    sd / sqrt(-ln level); over 4,000 pilots of 20 normal differences it lies at or above sigma in SD_LEVEL of them
    (3 standard errors)."""
    from ndcg_mlflow.statistics.planning import SD_LEVEL, sd_bound

    assert SD_LEVEL == 0.9
    assert sd_bound(0.3, 2) == pytest.approx(0.3 / math.sqrt(-math.log(SD_LEVEL)), rel=1e-12)
    rng = np.random.default_rng(51)
    sds = np.std(rng.normal(0.0, 0.25, (4000, 20)), axis=1, ddof=1)
    covered = np.mean([sd_bound(float(s), 19) >= 0.25 for s in sds])
    assert abs(covered - SD_LEVEL) <= 3 * math.sqrt(SD_LEVEL * (1 - SD_LEVEL) / 4000)
    assert math.isnan(sd_bound(float("nan"), 5)) and math.isnan(sd_bound(0.3, 0.5)) and sd_bound(0.3, math.inf) == 0.3


def test_distance_bound_is_the_one_sided_t_bound_and_covers_the_distance_at_its_level():
    """distance - t_(level, nu) se: at nu = 1, t_(q, 1) = tan(pi (q - 1/2)); over 4,000 pilots of 20 normal
    differences the bound of observed - margin lies at or below the true distance in SD_LEVEL of them."""
    from ndcg_mlflow.statistics.planning import SD_LEVEL, distance_bound

    assert distance_bound(0.05, 0.02, 1) == pytest.approx(0.05 - math.tan(math.pi * (SD_LEVEL - 0.5)) * 0.02)
    rng = np.random.default_rng(52)
    d = rng.normal(0.06, 0.25, (4000, 20))
    se = np.std(d, axis=1, ddof=1) / math.sqrt(20)
    covered = np.mean([distance_bound(m - 0.01, s, 19) <= 0.05 for m, s in zip(d.mean(axis=1), se)])
    assert abs(covered - SD_LEVEL) <= 3 * math.sqrt(SD_LEVEL * (1 - SD_LEVEL) / 4000)


def _pilot(mean: float, sd: float, n: int, seed: int) -> np.ndarray:
    d = np.random.default_rng(seed).normal(0, 1, n)
    return (d - d.mean()) / np.std(d, ddof=1) * sd + mean  # mean and sample standard deviation exactly these


def test_superiority_is_planned_at_the_distances_lower_bound_and_sigmas_upper_bound():
    """Equal weights: the first n whose t power reaches 0.8 at the distance observed - margin - t_(0.9, 39) se and
    sigma sd sqrt(39 / chi2_(0.1, 39)) (brute force)."""
    d = _pilot(0.12, 0.2, 40, 53)
    se = 0.2 / math.sqrt(40)
    low = 0.12 - 0.01 - st.t.ppf(0.9, 39) * se
    plan = decision_plan(d, np.ones(40), 0.95, 0.8, "superiority", 0.01)
    assert plan["reason"] is None
    assert plan["queries_needed"] == brute_force(0.2 * math.sqrt(39 / st.chi2.ppf(0.1, 39)), 1.0, 0.95, 0.8, low)
    assert plan["sd_bound"] == pytest.approx(0.2 * math.sqrt(39 / st.chi2.ppf(0.1, 39)), rel=1e-12)
    assert plan["sd_level"] == plan["weights_level"] == 0.9 and plan["weights_bound"] == 0.0


def _first_pilot(sd: float, distance: float) -> int:
    """The pilot size (equal weights) at which t_(0.9, n - 1) sd / sqrt(n) <= distance: brute force."""
    return next(n for n in range(2, 10**6) if st.t.ppf(0.9, n - 1) * sd / math.sqrt(n) <= distance)


def test_a_pilot_whose_difference_does_not_clear_the_margin_is_too_small_to_plan_from():
    """The difference's one-sided 90% lower bound (0.03 - t_(0.9, 19) 0.2 / sqrt(20) = -0.0294) is not above the
    margin: no plan, in words, with the pilot size at which a difference of 0.03 would clear a margin of 0.01."""
    d = _pilot(0.03, 0.2, 20, 54)
    plan = decision_plan(d, np.ones(20), 0.95, 0.8, "superiority", 0.01)
    low = 0.03 - st.t.ppf(0.9, 19) * 0.2 / math.sqrt(20)
    assert plan["queries_needed"] is None
    assert plan_reason(plan["reason"]) == (
        f"the pilot is too small to plan from: its difference (+0.0300) does not stand clear of the margin (0.01): "
        f"the lower end of its one-sided 90% confidence interval is {low:+.4f}; a pilot of about "
        f"{_first_pilot(0.2, 0.02):,} queries with the same spread would tell whether the difference exceeds the margin"
    )


def test_a_plan_far_beyond_what_the_observed_difference_needs_is_refused():
    """The lower bound barely clears the margin: the plan at it is more than 100 times the plan at the observed
    difference (which the pilot barely supports): refused, in words. A little further above, planned."""
    se = 0.2 / math.sqrt(20)
    edge = 0.01 + st.t.ppf(0.9, 19) * se
    d = _pilot(edge + 0.0005, 0.2, 20, 55)
    plan = decision_plan(d, np.ones(20), 0.95, 0.8, "superiority", 0.01)
    at_bound = queries_needed(d, np.ones(20), 0.95, 0.8, distance=plan["distance"], observed=True)
    at_observed = queries_needed(d, np.ones(20), 0.95, 0.8, distance=plan["distance"])
    assert at_bound > 100 * at_observed and plan["queries_needed"] is None
    assert plan_reason(plan["reason"]) == (
        f"the pilot is too small to plan from: its difference ({edge + 0.0005:+.4f}) does not stand clear of the "
        f"margin (0.01) by enough: at the lower end of its one-sided 90% confidence interval (+0.0105) the plan "
        f"would be {at_bound:,} queries, more than 100 times the {at_observed:,} that the observed difference "
        f"would need; a pilot of about {_first_pilot(0.2, edge + 0.0005 - 0.01):,} queries with the same spread "
        f"would tell whether the difference exceeds the margin"
    )
    clear = decision_plan(_pilot(edge + 0.03, 0.2, 20, 55), np.ones(20), 0.95, 0.8, "superiority", 0.01)
    assert clear["reason"] is None and clear["queries_needed"] is not None


def test_decision_plan_computes_the_weighted_t_once(monkeypatch):
    """Its five parts (mde, sigma, the plan, the current power, the bounds) read one weighted t of the pilot."""
    from ndcg_mlflow.statistics import planning

    calls = []
    real = stats.weighted_t

    def counted(d, w):
        calls.append(d.size)
        return real(d, w)

    monkeypatch.setattr(planning.stats, "weighted_t", counted)
    rng = np.random.default_rng(56)
    d, w = rng.normal(0.05, 0.2, 3000), np.exp(rng.standard_normal(3000))
    for rule in ("non_inferiority", "superiority"):
        calls.clear()
        decision_plan(d, w / w.max(), 0.95, 0.8, rule, 0.01)
        assert calls == [3000]


@pytest.mark.parametrize("rule", ["non_inferiority", "superiority"])
def test_both_planners_assume_one_difference_per_rule(rule):
    """decision_plan and the judge's labelled_plan (the labelled queries alone, lambda 0: its estimate is their mean)
    assume the same true difference and distance: non-inferiority 0 at the margin, superiority the observed mean at
    the mean minus the margin."""
    from ndcg_mlflow.statistics.judge import labelled_plan

    rng = np.random.default_rng(11)
    d = 0.08 + 0.1 * rng.standard_normal(60)
    f = d + 0.05 * rng.standard_normal(60)
    mean = float(np.mean(d))
    expected = (0.0, 0.03) if rule == "non_inferiority" else (mean, mean - 0.03)
    plain = decision_plan(d, np.ones(60), 0.95, 0.8, rule, 0.03)
    judged = labelled_plan(d, f, f[:10], confidence=0.95, power=0.8, rule=rule, margin=0.03, lam=0.0)
    for plan in (plain, judged):
        assert (plan["assumed_difference"], plan["distance"]) == pytest.approx(expected, rel=1e-12, abs=1e-15)
