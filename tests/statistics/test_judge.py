"""Unit tests of ndcg_mlflow.statistics.judge: prediction-powered estimates, the judge's bias, kappa, planning.

Under uniform weights the estimates are pinned against ppi-python 0.2.3 (``ppi_py``); under unequal weights
against the linearised variance written out here term by term, against exact enumeration of every labelled
subset of a tiny population, and against scipy, numpy and scikit-learn for the t-test, correlations and kappa.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.stats as ss
from hypothesis import given
from hypothesis import strategies as st

from ndcg_mlflow.statistics import judge

pytestmark = pytest.mark.filterwarnings("error")  # no numpy warning escapes


def _data(seed, n=40, big_n=300, noise=0.3, shift=0.05):
    rng = np.random.default_rng(seed)
    y = rng.random(n)
    f = y + noise * rng.standard_normal(n) + shift
    fu = rng.random(big_n) + shift + noise * rng.standard_normal(big_n)
    return y, f, fu


def _close(a, b, tol=1e-9):
    return abs(float(np.squeeze(a)) - float(np.squeeze(b))) <= tol


# --------------------------------------------------------------------------- ppi_mean against ppi-python


@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.35])
@pytest.mark.parametrize(("seed", "n", "big_n", "confidence"), [(1, 40, 300, 0.95), (2, 7, 20, 0.9), (3, 200, 50, 0.8)])
def test_ppi_mean_equals_ppi_python_under_uniform_weights(lam, seed, n, big_n, confidence):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = _data(seed, n, big_n)
    ours = judge.ppi_mean(y, f, fu, confidence=confidence, lam=lam, interval="normal")
    lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=1 - confidence, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam)
    assert _close(ours.estimate, point) and _close(ours.ci_low, lo) and _close(ours.ci_high, hi)
    assert ours.n_labelled == n and ours.n_unlabelled == big_n
    if lam is not None:
        assert ours.lam == lam


@pytest.mark.parametrize("lam", [1.0, 0.0, 0.6])
def test_the_p_value_is_ppi_pythons_and_agrees_with_the_interval(lam):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = _data(4, 30, 200, shift=0.0)
    d, fd, fud = y - 0.52, f - 0.52, fu - 0.52  # a mean near 0: a p-value that is neither 0 nor 1
    ours = judge.ppi_mean(d, fd, fud, lam=lam, confidence=0.95, interval="normal")
    theirs = ppi_py.ppi_mean_pval(d, fd, fud, lam=lam)
    assert _close(ours.p_value, theirs, 1e-12)
    assert 1e-6 < ours.p_value < 1
    assert (ours.p_value < 0.05) == (not ours.ci_low <= 0 <= ours.ci_high)


def test_the_tuned_lambda_is_ppi_pythons():
    """ppi_py's lambda (``_calc_lam_glm``): (1/n) cross-covariance on L over 2 (1 + n/N) np.cov of f on L and U,
    clipped to [0, 1]: written out here."""
    y, f, fu = _data(5, 50, 400)
    n, big_n = y.size, fu.size
    cross = np.sum((y - y.mean()) * (f - f.mean())) / n
    pooled = np.cov(np.concatenate([f, fu]))
    expected = min(max(2 * cross / (2 * (1 + n / big_n) * pooled), 0.0), 1.0)
    got = judge.ppi_mean(y, f, fu).lam
    assert 0 < got < 1 and math.isclose(got, expected, rel_tol=1e-12)


def test_human_only_is_the_plain_normal_interval_of_the_labelled_mean():
    y, f, fu = _data(6, 25, 100)
    ours = judge.ppi_mean(y, f, fu, lam=0, confidence=0.9, interval="normal")
    se = np.std(y) / math.sqrt(y.size)  # ddof 0, as ppi-python
    z = ss.norm.ppf(0.95)
    assert math.isclose(ours.estimate, y.mean(), rel_tol=1e-13)
    assert math.isclose(ours.ci_low, y.mean() - z * se, rel_tol=1e-12)
    assert math.isclose(ours.ci_high, y.mean() + z * se, rel_tol=1e-12)
    assert math.isclose(ours.se, se, rel_tol=1e-12)


def test_classic_ppi_is_the_closed_form():
    y, f, fu = _data(7, 30, 90)
    ours = judge.ppi_mean(y, f, fu, lam=1, interval="normal")
    assert math.isclose(ours.estimate, fu.mean() + (y - f).mean(), rel_tol=1e-13)
    assert math.isclose(ours.se**2, np.var(fu) / fu.size + np.var(y - f) / y.size, rel_tol=1e-12)
    assert math.isinf(ours.df)


def test_the_t_interval_of_human_only_is_the_one_sample_t_interval():
    y, f, fu = _data(6, 25, 100)
    ours = judge.ppi_mean(y, f, fu, lam=0, confidence=0.9)
    ci = ss.ttest_1samp(y, 0.0).confidence_interval(0.9)
    assert math.isclose(ours.ci_low, ci.low, rel_tol=1e-12) and math.isclose(ours.ci_high, ci.high, rel_tol=1e-12)
    assert ours.df == 24 and math.isclose(ours.p_value, ss.ttest_1samp(y, 0.0).pvalue, rel_tol=1e-9)


def test_the_t_interval_of_human_only_under_weights_is_the_tools_weighted_t_interval():
    from ndcg_mlflow.statistics.inference import t_interval

    y, f, fu = _data(6, 25, 100)
    w_l = np.random.default_rng(6).lognormal(size=25)
    ours = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=np.ones(100), lam=0)
    low, high, df = t_interval(y, w_l, 0.95)
    assert (ours.ci_low, ours.ci_high, ours.df) == (low, high, df)


def test_the_t_interval_of_classic_ppi_is_welch_satterthwaites():
    """Uniform weights, lambda 1: the two sample variances (ddof 1) over their sizes, and the Welch-Satterthwaite
    degrees of freedom of their sum, written out."""
    y, f, fu = _data(7, 12, 30)
    ours = judge.ppi_mean(y, f, fu, lam=1, confidence=0.95)
    a, b = np.var(y - f, ddof=1) / 12, np.var(fu, ddof=1) / 30
    df = (a + b) ** 2 / (a * a / 11 + b * b / 29)
    half = ss.t.ppf(0.975, df) * math.sqrt(a + b)
    assert math.isclose(ours.df, df, rel_tol=1e-12)
    assert math.isclose(ours.ci_low, ours.estimate - half, rel_tol=1e-12)
    assert math.isclose(ours.ci_high, ours.estimate + half, rel_tol=1e-12)
    assert math.isclose(ours.p_value, 2 * ss.t.sf(abs(ours.estimate) / math.sqrt(a + b), df), rel_tol=1e-9)


# --------------------------------------------------------------------------- weights


def _linearised(x, w):
    """sum w^2 (x - m_w)^2 / (sum w)^2, term by term."""
    total = sum(w)
    m = sum(wi * xi for wi, xi in zip(w, x)) / total
    return sum(wi * wi * (xi - m) ** 2 for wi, xi in zip(w, x)) / total**2


@pytest.mark.parametrize("lam", [1.0, 0.0, 0.45])
def test_weighted_estimate_is_ppi_pythons_and_its_variance_the_linearised_one(lam):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = _data(8, 40, 160)
    rng = np.random.default_rng(8)
    w_l, w_u = rng.lognormal(size=y.size), rng.lognormal(size=fu.size)
    ours = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=w_u, lam=lam)
    assert _close(ours.estimate, ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam, w=w_l, w_unlabeled=w_u))
    var = lam * lam * _linearised(list(fu), list(w_u)) + _linearised(list(y - lam * f), list(w_l))
    ours = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=w_u, lam=lam, interval="normal")
    assert math.isclose(ours.se**2, var, rel_tol=1e-10)


def test_the_weighted_variance_does_not_move_with_the_values_location_and_ppi_pythons_does():
    """Adding a constant to every Y and f moves the estimate by that constant and leaves its variance alone: so
    does the linearised variance. ppi-python's weighted form, std(w x) / sqrt(n), changes: it counts the spread
    of the weights times the mean as if it were spread of the values (docs/judge.md)."""
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = _data(9, 40, 160)
    rng = np.random.default_rng(9)
    w_l, w_u = rng.lognormal(size=y.size), rng.lognormal(size=fu.size)
    widths_ours, widths_theirs = [], []
    for c in (0.0, 0.7):
        ours = judge.ppi_mean(y + c, f + c, fu + c, w_l=w_l, w_u=w_u, lam=1, interval="normal")
        lo, hi = ppi_py.ppi_mean_ci(y + c, f + c, fu + c, alpha=0.05, lam=1, w=w_l, w_unlabeled=w_u)
        widths_ours.append(ours.ci_high - ours.ci_low)
        widths_theirs.append(float(np.squeeze(hi - lo)))
    assert math.isclose(widths_ours[0], widths_ours[1], rel_tol=1e-9)
    assert widths_theirs[1] > 1.1 * widths_theirs[0]


def test_equal_weights_give_the_unweighted_numbers():
    y, f, fu = _data(10, 30, 120)
    plain = judge.ppi_mean(y, f, fu)
    weighted = judge.ppi_mean(y, f, fu, w_l=np.full(y.size, 3.7), w_u=np.full(fu.size, 3.7))
    for a, b in zip(
        (plain.estimate, plain.ci_low, plain.ci_high, plain.lam, plain.rho),
        (weighted.estimate, weighted.ci_low, weighted.ci_high, weighted.lam, weighted.rho),
    ):
        assert math.isclose(a, b, rel_tol=1e-12)


def test_the_weights_of_l_and_u_share_one_scale():
    """A query's weight means the same on either side: doubling the weights of U alone changes the estimate's
    tuning (the pooled variance of f weighs U more)."""
    y, f, fu = _data(11, 30, 120)
    rng = np.random.default_rng(11)
    w_l, w_u = rng.lognormal(size=y.size), rng.lognormal(size=fu.size)
    a = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=w_u)
    b = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=2 * w_u)
    assert a.lam != b.lam


@given(st.integers(0, 2**32 - 1), st.floats(1e-6, 1e6), st.sampled_from([None, 1.0, 0.0]))
def test_the_numbers_do_not_depend_on_the_weights_scale(seed, scale, lam):
    y, f, fu = _data(seed, 12, 30)
    rng = np.random.default_rng(seed)
    w_l, w_u = rng.lognormal(size=y.size), rng.lognormal(size=fu.size)
    a = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=w_u, lam=lam)
    b = judge.ppi_mean(y, f, fu, w_l=w_l * scale, w_u=w_u * scale, lam=lam)
    for x, z in zip((a.estimate, a.ci_low, a.ci_high, a.lam, a.rho), (b.estimate, b.ci_low, b.ci_high, b.lam, b.rho)):
        assert math.isclose(x, z, rel_tol=1e-9, abs_tol=1e-12)


@given(st.integers(0, 2**32 - 1), st.booleans())
def test_the_tuned_lambda_minimises_the_tuning_variance_over_a_grid(seed, weighted):
    """PPI++'s lambda against a brute-force search of [0, 1]: the tuning variance ``lambda^2 s^2 (sum_U g^2 +
    sum_L h^2) - 2 lambda c + V_L(Y)`` (s^2 the variance of f over every query), written out here."""
    rng = np.random.default_rng(seed)
    n, big_n = int(rng.integers(3, 40)), int(rng.integers(2, 80))
    y, f, fu = _data(seed, n, big_n, noise=float(rng.uniform(0.05, 1.0)))
    w_l = rng.lognormal(size=n) if weighted else np.ones(n)
    w_u = rng.lognormal(size=big_n) if weighted else np.ones(big_n)
    h, g = w_l / w_l.sum(), w_u / w_u.sum()
    c = np.sum(h * h * (y - h @ y) * (f - h @ f))
    fa, wa = np.concatenate([f, fu]), np.concatenate([w_l, w_u])
    s2 = np.cov(fa, aweights=wa)  # numpy's unbiased weighted variance (reliability weights)
    v_y = np.sum(h * h * (y - h @ y) ** 2)

    def tuning(lam):
        return lam * lam * s2 * (np.sum(h * h) + np.sum(g * g)) - 2 * lam * c + v_y

    got = judge.ppi_mean(y, f, fu, w_l=None if not weighted else w_l, w_u=None if not weighted else w_u).lam
    grid = np.linspace(0, 1, 1001)
    assert 0 <= got <= 1
    assert tuning(got) <= min(tuning(x) for x in grid) + 1e-12 * max(abs(v_y), 1e-300)


@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0])
def test_the_estimate_is_unbiased_over_every_labelled_subset_of_a_tiny_population(lam):
    """Over all C(7, 3) choices of L in a fixed population of 7 queries (U the rest), the estimate's average is the
    population's mean of Y exactly (a fixed lambda, uniform weights)."""
    rng = np.random.default_rng(12)
    y = rng.random(7)
    f = np.round(y + 0.2 * rng.standard_normal(7), 3)
    estimates = []
    for labelled in itertools.combinations(range(7), 3):
        inl = np.isin(np.arange(7), labelled)
        estimates.append(judge.ppi_mean(y[inl], f[inl], f[~inl], lam=lam).estimate)
    assert math.isclose(np.mean(estimates), y.mean(), rel_tol=1e-12)
    if lam > 0:  # and the judge does carry the estimate: the splits do not all give the same number
        assert np.ptp(estimates) > 0


def test_rho_and_the_effective_number_of_labelled_queries():
    y, f, fu = _data(13, 30, 270)
    rng = np.random.default_rng(13)
    plain = judge.ppi_mean(y, f, fu)
    rho = np.corrcoef(y, f)[0, 1]
    assert math.isclose(plain.rho, rho, rel_tol=1e-12)
    assert math.isclose(plain.n_effective, 30 / (1 - rho * rho * 270 / 300), rel_tol=1e-12)
    w_l = rng.lognormal(size=30)
    cov = np.cov(y, f, aweights=w_l)
    weighted = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=rng.lognormal(size=270))
    assert math.isclose(weighted.rho, cov[0, 1] / math.sqrt(cov[0, 0] * cov[1, 1]), rel_tol=1e-12)


# --------------------------------------------------------------------------- degenerate inputs


def test_a_single_labelled_query_has_an_estimate_but_no_interval():
    one = judge.ppi_mean([0.4], [0.5], [0.3, 0.6], lam=1)
    assert math.isclose(one.estimate, 0.45 + (0.4 - 0.5))
    assert all(math.isnan(x) for x in (one.ci_low, one.ci_high, one.se, one.p_value))
    none = judge.ppi_mean([], [], [0.3, 0.6])
    assert math.isnan(none.estimate) and none.n_labelled == 0


def test_a_judge_constant_on_the_labelled_queries_gets_no_weight():
    y, _, fu = _data(14, 20, 50)
    f = np.full(20, 0.5)
    tuned = judge.ppi_mean(y, f, fu)
    human = judge.ppi_mean(y, f, fu, lam=0)
    assert tuned.lam == 0 and (tuned.estimate, tuned.ci_low, tuned.ci_high) == (
        human.estimate,
        human.ci_low,
        human.ci_high,
    )
    assert math.isnan(tuned.rho)


@pytest.mark.parametrize("lam", [None, 1.0])
@pytest.mark.parametrize("f_u", [[], [0.3]])
def test_fewer_than_two_unlabelled_queries_is_human_only(lam, f_u):
    y, f, _ = _data(15, 20, 5)
    got = judge.ppi_mean(y, f, f_u, lam=lam)
    human = judge.ppi_mean(y, f, f_u, lam=0)
    assert got.lam == 0 and got.estimate == human.estimate and got.ci_low == human.ci_low
    assert math.isclose(got.n_effective, 20 / (1 - got.rho**2 * len(f_u) / (20 + len(f_u))))


def test_all_equal_values_give_a_point_interval_and_p_one_at_zero():
    zeros = judge.ppi_mean(np.zeros(10), np.zeros(10), np.zeros(30))
    assert (zeros.estimate, zeros.ci_low, zeros.ci_high, zeros.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert math.isnan(zeros.rho)
    shifted = judge.ppi_mean(np.full(10, 0.1), np.zeros(10), np.zeros(30), lam=1)
    assert math.isclose(shifted.estimate, 0.1) and shifted.p_value == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": 1.0}, "confidence must lie strictly between 0 and 1"),
        ({"lam": 1.5}, "lam must be None or lie in"),
        ({"lam": float("nan")}, "lam must be None or lie in"),
        ({"w_l": [1.0, 0.0, 1.0]}, "w_l must be positive"),
        ({"w_u": [1.0]}, "w_u has 1 weights for 2 queries"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        judge.ppi_mean([0.1, 0.2, 0.3], [0.1, 0.2, 0.4], [0.3, 0.2], **kwargs)


def test_bad_vectors_are_refused():
    with pytest.raises(ValueError, match="f_l has 2 values for 3 labelled queries"):
        judge.ppi_mean([0.1, 0.2, 0.3], [0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="y_l must hold finite values"):
        judge.ppi_mean([0.1, float("nan")], [0.1, 0.2], [0.3])


# --------------------------------------------------------------------------- strata


def test_one_stratum_is_ppi_mean():
    y, f, fu = _data(16, 30, 100)
    rng = np.random.default_rng(16)
    w_l, w_u = rng.lognormal(size=30), rng.lognormal(size=100)
    one = judge.stratified_ppi_mean(y, f, fu, ["a"] * 30, ["a"] * 100, w_l=w_l, w_u=w_u, confidence=0.9)
    plain = judge.ppi_mean(y, f, fu, w_l=w_l, w_u=w_u, confidence=0.9)
    assert one.strata == ("a",) and one.shares == (1.0,) and not one.unlabelled_strata
    for a, b in zip(
        (one.estimate, one.ci_low, one.ci_high, one.se), (plain.estimate, plain.ci_low, plain.ci_high, plain.se)
    ):
        assert math.isclose(a, b, rel_tol=1e-12)


def test_two_strata_with_a_fixed_lambda_are_the_closed_form():
    """Strata a and b, lambda 0.5, by hand: theta_s = 0.5 mean_U,s(f) + mean_L,s(Y - 0.5 f), combined by each
    stratum's share of the total weight; the variance is the shares squared times each stratum's variance."""
    y = np.array([0.2, 0.5, 0.9, 0.4, 0.1, 0.7])
    f = np.array([0.3, 0.4, 0.8, 0.6, 0.2, 0.5])
    s_l = ["a", "a", "a", "b", "b", "b"]
    w_l = np.array([1.0, 2.0, 1.0, 3.0, 1.0, 1.0])
    fu = np.array([0.5, 0.6, 0.1, 0.3, 0.9])
    s_u = ["b", "a", "b", "a", "b"]
    w_u = np.array([2.0, 1.0, 1.0, 4.0, 2.0])
    lam = 0.5
    est, var = {}, {}
    for s in "ab":
        il = [i for i, x in enumerate(s_l) if x == s]
        iu = [i for i, x in enumerate(s_u) if x == s]
        wl, wu = w_l[il], w_u[iu]
        r = y[il] - lam * f[il]
        est[s] = lam * np.sum(wu * fu[iu]) / wu.sum() + np.sum(wl * r) / wl.sum()
        var[s] = lam**2 * _linearised(list(fu[iu]), list(wu)) + _linearised(list(r), list(wl))
    total = w_l.sum() + w_u.sum()
    share = {"a": (1 + 2 + 1 + 1 + 4) / total, "b": (3 + 1 + 1 + 2 + 1 + 2) / total}
    got = judge.stratified_ppi_mean(y, f, fu, s_l, s_u, w_l=w_l, w_u=w_u, confidence=0.95, lam=lam, interval="normal")
    assert got.strata == ("a", "b")
    assert math.isclose(got.estimate, share["a"] * est["a"] + share["b"] * est["b"], rel_tol=1e-12)
    se = math.sqrt(share["a"] ** 2 * var["a"] + share["b"] ** 2 * var["b"])
    assert math.isclose(got.se, se, rel_tol=1e-12)
    assert math.isclose(got.ci_high - got.ci_low, 2 * ss.norm.ppf(0.975) * se, rel_tol=1e-12)


def test_two_strata_in_the_t_form_are_welch_satterthwaites_over_every_part():
    """Uniform weights, lambda 0.5: each stratum's two parts (ddof 1 variances over their sizes, with n - 1
    degrees of freedom) weighted by the stratum's share squared, and the Welch-Satterthwaite degrees of freedom
    of the sum of all four parts, written out."""
    rng = np.random.default_rng(18)
    y, f = rng.random(14), rng.random(14)
    fu = rng.random(20)
    s_l = ["a"] * 6 + ["b"] * 8
    s_u = ["a"] * 12 + ["b"] * 8
    share = {"a": 18 / 34, "b": 16 / 34}
    parts, estimate = [], 0.0
    for s, il, iu in (("a", slice(0, 6), slice(0, 12)), ("b", slice(6, 14), slice(12, 20))):
        r = y[il] - 0.5 * f[il]
        estimate += share[s] * (0.5 * fu[iu].mean() + r.mean())
        parts.append((share[s] ** 2 * np.var(r, ddof=1) / r.size, r.size - 1))
        parts.append((share[s] ** 2 * 0.25 * np.var(fu[iu], ddof=1) / fu[iu].size, fu[iu].size - 1))
    var = sum(v for v, _ in parts)
    df = var**2 / sum(v * v / d for v, d in parts)
    got = judge.stratified_ppi_mean(y, f, fu, s_l, s_u, w_l=None, w_u=None, confidence=0.9, lam=0.5)
    assert math.isclose(got.estimate, estimate, rel_tol=1e-12)
    assert math.isclose(got.se, math.sqrt(var), rel_tol=1e-12) and math.isclose(got.df, df, rel_tol=1e-12)
    assert math.isclose(got.ci_high - got.ci_low, 2 * ss.t.ppf(0.95, df) * math.sqrt(var), rel_tol=1e-12)


def test_a_stratum_without_labelled_queries_is_named():
    got = judge.stratified_ppi_mean(
        [0.1, 0.2, 0.3],
        [0.2, 0.2, 0.3],
        [0.5, 0.4, 0.1],
        ["a", "a", "a"],
        ["a", "c", "c"],
        w_l=None,
        w_u=None,
        confidence=0.95,
    )
    assert got.unlabelled_strata == ("c",) and math.isnan(got.estimate) and math.isnan(got.ci_low)
    assert got.per_stratum[1] is None and got.per_stratum[0] is not None


# --------------------------------------------------------------------------- the judge's bias


def test_judge_bias_is_the_one_sample_t_test_under_uniform_weights():
    rng = np.random.default_rng(17)
    y = rng.random(25)
    f = y - 0.03 + 0.05 * rng.standard_normal(25)
    got = judge.judge_bias(y, f, confidence=0.9)
    ref = ss.ttest_1samp(y - f, 0.0)
    ci = ref.confidence_interval(0.9)
    assert math.isclose(got.estimate, np.mean(y - f), rel_tol=1e-12)
    assert math.isclose(got.p_value, ref.pvalue, rel_tol=1e-9)
    assert math.isclose(got.ci_low, ci.low, rel_tol=1e-12) and math.isclose(got.ci_high, ci.high, rel_tol=1e-12)


def test_judge_bias_weighs_the_queries():
    y = np.array([0.1, 0.5, 0.9, 0.3])
    f = np.array([0.0, 0.5, 0.7, 0.3])
    got = judge.judge_bias(y, f, w_l=[1.0, 1.0, 3.0, 1.0])
    assert math.isclose(got.estimate, (0.1 + 0 + 3 * 0.2 + 0) / 6)
    assert got.ci_low < got.estimate < got.ci_high


# --------------------------------------------------------------------------- kappa


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_kappa_is_scikit_learns(weights, seed):
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    grades = np.array([0, 1, 2, 4])  # a gap: grade 3 never given
    human = rng.choice(grades, 200)
    judge_grades = np.where(rng.random(200) < 0.6, human, rng.choice(grades, 200))
    expected = cohen_kappa_score(human, judge_grades, weights=weights)
    assert math.isclose(judge.weighted_kappa(human, judge_grades, weights=weights), expected, rel_tol=1e-12)


def test_weighted_kappa_of_one_category_is_undefined():
    assert math.isnan(judge.weighted_kappa([2, 2, 2], [2, 2, 2]))
    assert math.isnan(judge.weighted_kappa([], []))
    assert judge.weighted_kappa([0, 1, 2], [0, 1, 2]) == 1.0
    with pytest.raises(ValueError, match="weights must be one of linear, quadratic"):
        judge.weighted_kappa([0, 1], [0, 1], weights="cubic")
    with pytest.raises(ValueError, match="integer grades"):
        judge.weighted_kappa([0.5, 1], [0, 1])


# --------------------------------------------------------------------------- planning


@pytest.mark.parametrize(
    ("distance", "sigma", "rho", "big_n", "power", "confidence"),
    [
        (0.02, 0.1, 0.7, 2000, 0.8, 0.95),
        (0.01, 0.15, 0.9, 500, 0.9, 0.95),
        (0.05, 0.2, 0.0, 1000, 0.8, 0.9),
        (0.03, 0.1, -0.4, 300, 0.8, 0.95),
        (0.02, 0.1, 1.0, 100, 0.8, 0.95),
        (0.02, 0.1, 0.8, 0, 0.8, 0.95),
        (0.5, 0.01, 0.5, 100, 0.8, 0.95),
    ],
)
def test_labelled_needed_is_the_smallest_n_the_variance_accepts(distance, sigma, rho, big_n, power, confidence):
    z = ss.norm.ppf(1 - (1 - confidence) / 2) + ss.norm.ppf(power)
    r = max(rho, 0.0)

    def detects(n):
        var = sigma**2 / n * (1 - r * r * big_n / (n + big_n))
        return z * math.sqrt(var) <= distance

    brute = next(n for n in range(2, 10**6) if detects(n))
    got = judge.labelled_needed(
        distance, sigma_y=sigma, rho=rho, n_unlabelled=big_n, power=power, confidence=confidence
    )
    assert got == brute


def test_a_better_judge_needs_fewer_labelled_queries():
    needs = [judge.labelled_needed(0.02, sigma_y=0.1, rho=r, n_unlabelled=2000) for r in (0.0, 0.5, 0.9)]
    assert needs[0] > needs[1] > needs[2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="distance must be positive"):
            judge.labelled_needed(0.0, sigma_y=0.1, rho=0.5, n_unlabelled=10)


@pytest.mark.parametrize(
    ("distance", "sigma", "rho", "big_n", "power", "confidence", "share"),
    [
        (0.02, 0.1, 0.7, 2000, 0.8, 0.95, 1.0),
        (0.3, 0.1, 0.7, 2000, 0.8, 0.95, 1.0),
        (0.05, 0.2, 0.0, 1000, 0.8, 0.9, 0.4),
        (0.2, 0.2, 0.8, 50, 0.9, 0.95, 0.25),
        (0.1, 0.2, 0.5, 100, 0.3, 0.95, 1.0),
    ],
)
def test_labelled_needed_in_the_t_form_is_the_smallest_n_scipys_t_accepts(
    distance, sigma, rho, big_n, power, confidence, share
):
    r = max(rho, 0.0)

    def detects(n):
        df = share * (n - 1)
        if df < 1:
            return False
        t = ss.t.ppf(1 - (1 - confidence) / 2, df) + ss.t.ppf(power, df)
        return t * math.sqrt(sigma**2 / n * (1 - r * r * big_n / (n + big_n))) <= distance

    brute = next(n for n in range(2, 10**6) if detects(n))
    got = judge.labelled_needed(
        distance, sigma_y=sigma, rho=rho, n_unlabelled=big_n, power=power, confidence=confidence, df_share=share
    )
    assert got == brute
    normal = judge.labelled_needed(
        distance, sigma_y=sigma, rho=rho, n_unlabelled=big_n, power=power, confidence=confidence
    )
    if power >= 0.5:  # (the t's quantiles exceed the normal's)
        assert got >= normal


def test_rho_bound_is_fishers_z_lower_end():
    got = judge.rho_bound(0.6, 40.0)
    assert math.isclose(got, np.tanh(np.arctanh(0.6) - ss.norm.ppf(0.9) / np.sqrt(37.0)), rel_tol=1e-12)
    assert got < 0.6
    assert math.isnan(judge.rho_bound(0.6, 3.0))
    assert math.isnan(judge.rho_bound(float("nan"), 40.0))
    assert judge.rho_bound(1.0, 40.0) == pytest.approx(1.0)


def _pilot(seed, n=40, big_n=400, advantage=0.08, weights=False):
    rng = np.random.default_rng(seed)
    y = advantage + 0.1 * rng.standard_normal(n)
    f = y + 0.03 + 0.05 * rng.standard_normal(n)
    fu = advantage + 0.03 + 0.11 * rng.standard_normal(big_n)
    if not weights:
        return y, f, fu, None, None
    return y, f, fu, rng.lognormal(0, 1, n), rng.lognormal(0, 1, big_n)


@pytest.mark.parametrize("weights", [False, True])
def test_labelled_plan_is_labelled_needed_at_the_bounds_written_out(weights):
    """sigma_y at its chi-square upper bound, rho at Fisher's z lower bound, the distance at its t lower bound, each at
    one-sided 90%, from the pilot's numbers computed here (scipy's t interval under uniform weights; the weighted
    standard error and degrees of freedom of the tool's t otherwise), and labelled_needed called on them."""
    from ndcg_mlflow.statistics.inference import kish_n, weighted_t

    y, f, fu, wl, wu = _pilot(3, weights=weights)
    plan = judge.labelled_plan(y, f, fu, w_l=wl, w_u=wu, confidence=0.95, power=0.8, rule="superiority", margin=0.01)
    est = judge.ppi_mean(y, f, fu, w_l=wl, w_u=wu, confidence=0.95)
    n = y.size
    if weights:
        _, se, nu = weighted_t(y, np.asarray(wl))
        sigma = se * math.sqrt(n)
        n_eff = kish_n(np.asarray(wl))
        rho = est.rho
    else:
        sigma, nu, n_eff = float(np.std(y, ddof=1)), n - 1, n
        rho = float(np.corrcoef(y, f)[0, 1])
        assert est.rho == pytest.approx(rho, abs=1e-12)
    sigma_up = sigma * math.sqrt(nu / ss.chi2.ppf(0.1, nu))
    rho_low = math.tanh(math.atanh(rho) - ss.norm.ppf(0.9) / math.sqrt(n_eff - 3))
    distance_low = est.estimate - 0.01 - ss.t.ppf(0.9, est.df) * est.se
    assert (plan["sigma_y_bound"], plan["rho_bound"], plan["distance_bound"]) == pytest.approx(
        (sigma_up, rho_low, distance_low), rel=1e-9
    )
    assert plan["reason"] is None
    expected = judge.labelled_needed(
        distance_low,
        sigma_y=sigma_up,
        rho=rho_low,
        n_unlabelled=fu.size,
        power=0.8,
        confidence=0.95,
        df_share=min(1.0, nu / (n - 1)),
    )
    assert plan["labelled_needed"] == expected
    at_estimates = judge.labelled_needed(
        est.estimate - 0.01, sigma_y=sigma, rho=rho, n_unlabelled=fu.size, power=0.8, confidence=0.95
    )
    assert expected > at_estimates  # the bounds cost labelled queries: the point plan is optimistic


@pytest.mark.parametrize("advantage", [0.08, -0.05])
def test_a_non_inferiority_plan_assumes_no_difference_at_the_margin(advantage):
    """Non-inferiority is planned as the plan without a judge plans it (statistics.planning.decision_plan): a
    candidate as good as the baseline, at distance = margin exactly, whatever the estimate (here well above the
    threshold, or below it), with sigma_y and rho at their bounds written out."""
    y, f, fu, _, _ = _pilot(3, advantage=advantage)
    plan = judge.labelled_plan(y, f, fu, confidence=0.95, power=0.8, rule="non_inferiority", margin=0.02)
    n = y.size
    sigma_up = float(np.std(y, ddof=1)) * math.sqrt((n - 1) / ss.chi2.ppf(0.1, n - 1))
    rho_low = math.tanh(math.atanh(float(np.corrcoef(y, f)[0, 1])) - ss.norm.ppf(0.9) / math.sqrt(n - 3))
    assert (plan["assumed_difference"], plan["distance"], plan["threshold"]) == (0.0, 0.02, -0.02)
    assert math.isnan(plan["distance_bound"]) and plan["reason"] is None
    assert (plan["sigma_y_bound"], plan["rho_bound"]) == pytest.approx((sigma_up, rho_low), rel=1e-9)
    assert plan["labelled_needed"] == judge.labelled_needed(
        0.02, sigma_y=sigma_up, rho=rho_low, n_unlabelled=fu.size, power=0.8, confidence=0.95, df_share=1.0
    )


def test_labelled_plan_says_why_it_cannot_plan():
    y, f, fu, _, _ = _pilot(5)

    def reason(**kw):
        args = {"y_l": y, "f_l": f, "f_u": fu, "confidence": 0.95, "power": 0.8, "rule": "superiority", "margin": 0.0}
        plan = judge.labelled_plan(**{**args, **kw})
        return plan["labelled_needed"], (plan["reason"] or {}).get("kind")

    assert reason()[1] is None and reason()[0] >= 2
    assert reason(margin=0.5) == (None, "difference_within_threshold")
    assert reason(rule="non_inferiority", margin=0.0) == (None, "zero_margin")
    # an estimate above the threshold that its lower bound does not show: the pilot is too small
    est = judge.ppi_mean(y, f, fu).estimate
    assert reason(margin=est - 0.001) == (None, "pilot_too_small")
    with pytest.raises(ValueError, match="rule must be one of"):
        reason(rule="better")
    with pytest.raises(ValueError, match="margin must be a finite number"):
        reason(margin=-0.01)
    assert reason(lam=1.0) == (None, "estimator")
    assert reason(y_l=y[:3], f_l=f[:3]) == (None, "labelled")
    assert reason(f_l=np.full(y.size, 0.1)) == (None, "rho")
    human = judge.labelled_plan(y, f, fu, confidence=0.95, power=0.8, rule="superiority", margin=0.0, lam=0.0)
    assert human["rho_bound"] == 0.0
    assert human["labelled_needed"] == judge.labelled_needed(
        human["distance_bound"], sigma_y=human["sigma_y_bound"], rho=0.0, n_unlabelled=fu.size, df_share=1.0
    )


@pytest.mark.slow
@pytest.mark.parametrize(("weighting", "rule"), [("uniform", "non_inferiority"), ("lognormal", "superiority")])
def test_the_planned_labelled_queries_reach_the_power_in_a_reduced_benchmark(weighting, rule):
    """A reduced run of benchmarks/judge_plan_sim.py (150 pilots of 40 labelled queries among 400, one cell): the
    fresh evaluations of the planned size pass at least 0.8 of the time, within 3.3 standard errors."""
    import importlib.util
    import sys
    from pathlib import Path

    name = "_judge_plan_sim_under_test"
    if name not in sys.modules:
        script = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_plan_sim.py"
        spec = importlib.util.spec_from_file_location(name, script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    sim = sys.modules[name]
    rng = np.random.default_rng(5)
    pop = sim.population(weighting, rng, sim.DIFFERENCE[rule])
    planned, passed, sizes, _ = sim.run_cell(pop, 400, 40, rule, sim.RULES[rule], 150, rng)
    assert planned >= 50 and min(sizes) >= 2
    p = passed / planned
    assert p + 3.3 * math.sqrt(0.8 * 0.2 / planned) >= 0.8
