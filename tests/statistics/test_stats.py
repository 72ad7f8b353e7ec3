"""Unit tests of ndcg_mlflow.statistics.inference: bootstrap intervals, paired tests, corrections.

The bootstrap intervals are checked against ``scipy.stats.bootstrap`` fed the very
same resamples. For one sample (or ``paired=True``) and ``batch=None`` scipy draws
its indices as ``rng.integers(0, n, (n_resamples, n))`` (``_bootstrap_resample`` in
scipy/stats/_resampling.py); ``test_scipy_draws_the_indices_we_mirror`` pins that
claim so that a scipy change shows up as a clear failure rather than a mismatch.
"""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats as ss

from ndcg_mlflow.statistics import inference as stats


def _wmean(x, w, axis=-1):
    return (x * w).sum(axis=axis) / w.sum(axis=axis)


def _ours(x, w, idx, method, confidence=0.95):
    boot = stats.bootstrap_means(x, w, resamples=idx.shape[0], rng=None, indices=idx)
    lo, hi = stats.interval(boot, np.asarray(x, float), w, confidence=confidence, method=method)
    return boot, lo, hi


# --------------------------------------------------------------------------- bootstrap vs scipy


def _assert_same_interval(boot, x, w, lo, hi, res, method, confidence):
    """Ours equals scipy's to 1e-12; for BCa, where a resampled mean lies within rounding of the estimate,
    both only have to lie in the band of that mean's two possible sides (see _bca_band)."""
    theirs = (res.confidence_interval.low, res.confidence_interval.high)
    if method.lower() == "bca":
        band_lo, band_hi, near = _bca_band(boot.dist[:, 0], boot.theta[0], x, w, confidence, _rounding_tolerance(x))
        if near:
            for i, ours in enumerate((lo[0], hi[0])):
                assert band_lo[i] - 1e-12 <= ours <= band_hi[i] + 1e-12
                assert band_lo[i] - 1e-12 <= theirs[i] <= band_hi[i] + 1e-12
            return
    assert lo[0] == pytest.approx(theirs[0], abs=1e-12)
    assert hi[0] == pytest.approx(theirs[1], abs=1e-12)


def test_scipy_draws_the_indices_we_mirror():
    """scipy's bootstrap distribution of the mean is x[rng.integers(0, n, (B, n))].mean(1)."""
    x = np.random.default_rng(0).normal(size=17)
    res = ss.bootstrap(
        (x,), np.mean, method="percentile", n_resamples=300, vectorized=True, batch=None, rng=np.random.default_rng(42)
    )
    idx = np.random.default_rng(42).integers(0, x.size, (300, x.size))
    np.testing.assert_array_equal(res.bootstrap_distribution, x[idx].mean(axis=1))


@pytest.mark.parametrize("method", ["percentile", "BCa"])
@pytest.mark.parametrize("seed,n,confidence", [(1, 30, 0.95), (2, 12, 0.9), (3, 75, 0.99)])
def test_interval_equals_scipy_uniform_weights(method, seed, n, confidence):
    data_rng = np.random.default_rng(100 + seed)
    x = data_rng.gamma(2.0, size=n) / 5  # skewed, so BCa differs from percentile
    B = 2000
    res = ss.bootstrap(
        (x,),
        np.mean,
        method=method,
        n_resamples=B,
        vectorized=True,
        batch=None,
        confidence_level=confidence,
        rng=np.random.default_rng(seed),
    )
    idx = np.random.default_rng(seed).integers(0, n, (B, n))
    boot, lo, hi = _ours(x, np.ones(n), idx, method.lower(), confidence)
    np.testing.assert_allclose(boot.dist[:, 0], res.bootstrap_distribution, rtol=0, atol=1e-13)
    _assert_same_interval(boot, x, np.ones(n), lo, hi, res, method, confidence)
    assert boot.dist[:, 0].std(ddof=1) == pytest.approx(res.standard_error, abs=1e-13)
    assert boot.theta[0] == pytest.approx(x.mean(), abs=1e-15)


@pytest.mark.parametrize("method", ["percentile", "BCa"])
@pytest.mark.parametrize("seed,n", [(7, 25), (8, 60)])
def test_interval_equals_scipy_weighted_paired(method, seed, n):
    """Weighted mean as a paired statistic of (x, w): scipy resamples one index array for both."""
    data_rng = np.random.default_rng(200 + seed)
    x = data_rng.beta(0.7, 2.0, size=n)
    w = data_rng.uniform(0.05, 3.0, size=n)
    B = 1500
    res = ss.bootstrap(
        (x, w),
        _wmean,
        paired=True,
        method=method,
        n_resamples=B,
        vectorized=True,
        batch=None,
        rng=np.random.default_rng(seed),
    )
    idx = np.random.default_rng(seed).integers(0, n, (B, n))
    boot, lo, hi = _ours(x, w, idx, method.lower())
    np.testing.assert_allclose(boot.dist[:, 0], res.bootstrap_distribution, rtol=0, atol=1e-13)
    _assert_same_interval(boot, x, w, lo, hi, res, method, 0.95)
    assert boot.dist[:, 0].std(ddof=1) == pytest.approx(res.standard_error, abs=1e-13)


def _bca_band(dist, theta, x, w, confidence, tol):
    """The BCa endpoints over every way of placing the resampled means within ``tol`` of the estimate.

    A resampled mean equal to the estimate in exact arithmetic (a permutation of the sample, or another
    draw with the same weighted sum: common with tied nDCG values) lands on either side of it after
    rounding, differently in scipy (np.mean over an axis) and here (a sparse product). BCa's bias
    correction counts the means below the estimate, so such a mean moves z0 by up to 1 / B and the
    endpoints with it. The endpoints rise with z0, so the two extreme placements bound them: all the
    near-ties above (fewest below) and all below (most below).
    """
    from scipy.special import ndtr, ndtri

    b = dist.size
    alpha = (1 - confidence) / 2
    a = stats.jackknife_acceleration(x, w)[0]
    ends = []
    for below in (np.count_nonzero(dist < theta - tol), np.count_nonzero(dist <= theta + tol)):
        z0 = ndtri(below / b)
        probs = []
        for za in (ndtri(alpha), -ndtri(alpha)):
            n1 = z0 + za
            probs.append(ndtr(z0 + n1 / (1 - a * n1)))
        ends.append(stats.quantiles(dist[:, None], np.array(probs)[:, None])[:, 0])
    return np.minimum(*ends), np.maximum(*ends), np.count_nonzero(np.abs(dist - theta) <= tol)


def _rounding_tolerance(x):
    """Bound of the rounding error of one weighted mean of n values, for two tools, with a margin of 4:
    each sum of n terms errs by at most about n * eps * max|x| (relative to the sum of weights)."""
    return 8 * x.size * np.finfo(float).eps * float(np.max(np.abs(x)))


@pytest.mark.parametrize("seed", range(40))
def test_bca_equals_scipy_up_to_near_ties_at_small_n(seed):
    """n <= 10 with tied, nDCG-like values: ours and scipy's BCa both lie in the band of the tie placements
    (exactly equal, up to 1e-12, where no resampled mean is within rounding of the estimate)."""
    r = np.random.default_rng(seed)
    n = int(r.integers(3, 11))
    x = r.choice([0.0, 0.25, 0.5, 0.6309297535714575, 1.0], n)
    if np.ptp(x) == 0:
        x[0] = 0.125
    weighted = seed % 2 == 1
    w = r.choice([0.5, 1.0, 2.0], n) if weighted else np.ones(n)
    B = 999
    if weighted:
        res = ss.bootstrap(
            (x, w),
            _wmean,
            paired=True,
            method="BCa",
            n_resamples=B,
            vectorized=True,
            batch=None,
            rng=np.random.default_rng(seed),
        )
    else:
        res = ss.bootstrap(
            (x,), np.mean, method="BCa", n_resamples=B, vectorized=True, batch=None, rng=np.random.default_rng(seed)
        )
    idx = np.random.default_rng(seed).integers(0, n, (B, n))
    boot, lo, hi = _ours(x, w, idx, "bca")
    tol = _rounding_tolerance(x)
    np.testing.assert_allclose(boot.dist[:, 0], res.bootstrap_distribution, rtol=0, atol=tol)
    band_lo, band_hi, near = _bca_band(boot.dist[:, 0], boot.theta[0], x, w, 0.95, tol)
    for ours, theirs, i in ((lo[0], res.confidence_interval.low, 0), (hi[0], res.confidence_interval.high, 1)):
        assert band_lo[i] - 1e-12 <= ours <= band_hi[i] + 1e-12
        assert band_lo[i] - 1e-12 <= theirs <= band_hi[i] + 1e-12
        if near == 0:
            assert ours == pytest.approx(theirs, abs=1e-12)


def test_several_columns_share_one_resampling_and_match_scipy_each():
    n, B, seed = 40, 1000, 11
    data_rng = np.random.default_rng(5)
    x = np.column_stack([data_rng.uniform(size=n), data_rng.beta(0.5, 0.5, size=n), data_rng.normal(size=n)])
    w = data_rng.uniform(0.5, 2.0, size=n)
    idx = np.random.default_rng(seed).integers(0, n, (B, n))
    boot, lo, hi = _ours(x, w, idx, "bca")
    assert boot.dist.shape == (B, 3)
    for c in range(3):
        res = ss.bootstrap(
            (x[:, c], w),
            _wmean,
            paired=True,
            method="BCa",
            n_resamples=B,
            vectorized=True,
            batch=None,
            rng=np.random.default_rng(seed),
        )
        assert lo[c] == pytest.approx(res.confidence_interval.low, abs=1e-12)
        assert hi[c] == pytest.approx(res.confidence_interval.high, abs=1e-12)
    # a column is linear in the data: the difference of two columns' resampled means is
    # the resampled mean of the difference (same resamples)
    boot_d = stats.bootstrap_means(x[:, 1] - x[:, 0], w, resamples=B, rng=None, indices=idx)
    np.testing.assert_allclose(boot_d.dist[:, 0], boot.dist[:, 1] - boot.dist[:, 0], atol=1e-13)


def test_bootstrap_means_with_generator_uses_resample_indices():
    """With a generator, the resamples are the stream of resample_indices: in range, uniform, reproducible."""
    n, B = 23, 777
    x = np.random.default_rng(3).uniform(size=n)
    w = np.random.default_rng(4).uniform(0.5, 2, size=n)
    a = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(9))
    idx = np.vstack(list(stats.resample_indices(np.random.default_rng(9), n, B)))
    assert idx.shape == (B, n) and idx.min() >= 0 and idx.max() <= n - 1
    np.testing.assert_allclose(a.dist[:, 0], (w[idx] * x[idx]).sum(1) / w[idx].sum(1), atol=1e-14)
    b = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(a.dist, b.dist)
    c = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(10))
    assert not np.array_equal(a.dist, c.dist)
    # every query equally likely (chi-square on 23 x 777 draws)
    counts = np.bincount(idx.ravel(), minlength=n)
    assert ss.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize("chunk", [1, 7, 100, 512, 5000])
def test_index_stream_does_not_depend_on_chunk(chunk):
    n, B = 31, 1234
    a = np.vstack(list(stats.resample_indices(np.random.default_rng(1), n, B, chunk=chunk)))
    b = np.vstack(list(stats.resample_indices(np.random.default_rng(1), n, B, chunk=512)))
    assert a.shape == (B, n)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("studentized", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 100, 512, 5000])
def test_bootstrap_distribution_does_not_depend_on_chunk(chunk, studentized):
    n, B = 31, 1234
    data_rng = np.random.default_rng(4)
    x = np.column_stack([data_rng.uniform(size=n), data_rng.uniform(size=n)])
    w = data_rng.uniform(0.1, 2, size=n)
    ref = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(77), chunk=512, studentized=studentized)
    got = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(77), chunk=chunk, studentized=studentized)
    np.testing.assert_allclose(got.dist, ref.dist, rtol=1e-14)
    # "the same seed gives the same numbers whatever the chunk size": bit for bit
    np.testing.assert_array_equal(got.dist, ref.dist)
    if studentized:
        np.testing.assert_array_equal(got.se_dist, ref.se_dist)


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
def test_a_column_does_not_depend_on_the_other_columns(method):
    """Series resampled together (one per system) get the same numbers as alone: adding a
    system must not change another system's interval, not even in the last bit."""
    n, B = 200, 600
    r = np.random.default_rng(0)
    x = r.uniform(size=(n, 5))
    w = np.ones(n)
    alone = stats.bootstrap_means(
        x[:, :1], w, resamples=B, rng=np.random.default_rng(3), studentized=method == "studentized"
    )
    lo1, hi1 = stats.interval(alone, x[:, :1], w, confidence=0.95, method=method)
    for k in (2, 3, 4, 5):
        boot = stats.bootstrap_means(
            x[:, :k], w, resamples=B, rng=np.random.default_rng(3), studentized=method == "studentized"
        )
        lo, hi = stats.interval(boot, x[:, :k], w, confidence=0.95, method=method)
        np.testing.assert_allclose([lo[0], hi[0]], [lo1[0], hi1[0]], rtol=1e-14)
        assert (lo[0], hi[0]) == (lo1[0], hi1[0]), k
        np.testing.assert_array_equal(boot.theta[:1], alone.theta)


def test_indices_argument_is_chunked_consistently():
    n, B = 19, 1100
    x = np.random.default_rng(8).uniform(size=n)
    idx = np.random.default_rng(1).integers(0, n, (B, n))
    a = stats.bootstrap_means(x, np.ones(n), resamples=B, rng=None, indices=idx, chunk=13)
    b = stats.bootstrap_means(x, np.ones(n), resamples=B, rng=None, indices=idx, chunk=4096)
    np.testing.assert_array_equal(a.dist, b.dist)


def test_counts_from_indices():
    idx = np.array([[0, 0, 2], [1, 2, 1], [2, 2, 2]])
    np.testing.assert_array_equal(stats.counts_from_indices(idx, 3), [[2, 0, 1], [0, 2, 1], [0, 0, 3]])


def _sequential_sums(idx, mat):
    """Each resample's drawn rows added one after another in draw order, from 0.0, in Python floats."""
    out = np.zeros((idx.shape[0], mat.shape[1]))
    for r, row in enumerate(idx.tolist()):
        for q in range(mat.shape[1]):
            total = 0.0
            for j in row:
                total += float(mat[j, q])
            out[r, q] = total
    return out


def _sparse_sums(idx, mat):
    from scipy import sparse

    c, n = idx.shape
    counts = sparse.csr_matrix((np.ones(c * n), idx.ravel(), np.arange(0, c * n + 1, n)), shape=(c, n))
    return np.asarray(counts @ mat)


try:
    from ndcg_mlflow.ckernel import resampled_sums as C_SUMS
except ImportError:  # (the package's C parts are not built)
    C_SUMS = None
needs_c = pytest.mark.skipif(C_SUMS is None, reason="ckernel.c is not built")


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_resampled_sums_add_the_drawn_rows_in_draw_order(seed, pure, monkeypatch):
    """The bootstrap's sums, from indices or from uniforms, in C or through scipy's sparse product: bit for bit
    the drawn rows added in draw order (values over 16 orders of magnitude, so another order would show), and the
    same as scipy's CSR product of a matrix of ones at the drawn indices."""
    if pure:
        monkeypatch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
    elif C_SUMS is None:
        pytest.skip("ckernel.c is not built")
    r = np.random.default_rng(seed)
    n, m, c = int(r.integers(1, 60)), int(r.integers(2, 5)), int(r.integers(1, 9))
    mat = r.standard_normal((n, m)) * 10.0 ** r.integers(-8, 9, (n, m))
    u = r.random((c, n))
    u[0, 0] = np.nextafter(1.0, 0.0)  # the largest draw: index n - 1
    idx = np.minimum(np.floor(u * n).astype(np.int64), n - 1)
    want = _sequential_sums(idx, mat)
    assert _sparse_sums(idx, mat).tobytes() == want.tobytes()
    assert stats.resampled_sums(idx, True, n, mat).tobytes() == want.tobytes()
    assert stats.resampled_sums(u, False, n, mat).tobytes() == want.tobytes()
    np.testing.assert_array_equal(stats.index_of(u, n), idx)


def test_index_of_the_largest_draws():
    """floor(u * n) stays below n for every u below 1; the bound at n - 1 (u = 1, which the generator does not
    draw) holds in both readings of a uniform, numpy's and the C sums'."""
    n = 5
    u = np.array([[0.0, 0.5, np.nextafter(1.0, 0.0), 1.0, 0.999]])
    assert stats.index_of(u, n).tolist() == [[0, 2, 4, 4, 4]]
    mat = 10.0 ** np.arange(n, dtype=np.float64)[:, None] * np.ones((1, 2))
    assert stats.resampled_sums(u, False, n, mat).tolist() == [[1 + 100 + 3 * 10_000] * 2]


@needs_c
def test_native_resampled_sums_refuse_draws_out_of_range():
    mat = np.arange(6, dtype=np.float64).reshape(3, 2)
    out = np.empty((1, 2))
    C_SUMS(np.array([[0, 1, 2]]), True, 3, mat, out)
    assert out.tolist() == [[6.0, 9.0]]
    for bad in ([[0, 3, 1]], [[0, -1, 1]]):
        with pytest.raises(ValueError, match="draws outside"):
            C_SUMS(np.array(bad, dtype=np.int64), True, 3, mat, out)
    for bad_u in (-0.25, np.nan):
        with pytest.raises(ValueError, match="draws outside"):
            C_SUMS(np.array([[0.1, bad_u, 0.2]]), False, 3, mat, out)
    with pytest.raises(ValueError, match="do not agree"):  # 4 draws are not whole resamples of 3
        C_SUMS(np.zeros(4, dtype=np.int64), True, 3, mat, out)
    with pytest.raises(ValueError, match="do not agree"):  # an output of the wrong size
        C_SUMS(np.zeros((2, 3), dtype=np.int64), True, 3, mat, out)
    with pytest.raises(ValueError, match="do not agree"):
        C_SUMS(np.zeros((1, 3), dtype=np.int64), True, 0, mat, out)


@pytest.mark.parametrize("studentized", [False, True])
def test_bootstrap_means_are_the_same_in_c_and_without_it(studentized, monkeypatch):
    """The distribution is the same bit for bit with the C sums, drawn into a reused buffer a resample at a
    time, and without the C parts (scipy's sparse product of freshly drawn chunks)."""
    n, B = 57, 700
    r = np.random.default_rng(21)
    x = np.column_stack([r.uniform(size=n), r.exponential(size=n)])
    w = r.uniform(0.1, 3, size=n)
    with_c = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(5), studentized=studentized)
    monkeypatch.setattr(stats, "UNIFORM_BYTES", 1)  # one resample per chunk
    small = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(5), studentized=studentized)
    monkeypatch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
    pure = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(5), studentized=studentized)
    idx = np.vstack(list(stats.resample_indices(np.random.default_rng(5), n, B)))
    want = _sequential_sums(idx, np.column_stack([w[:, None] * x, w]))
    np.testing.assert_array_equal(pure.dist, want[:, :2] / want[:, 2:])
    np.testing.assert_array_equal(with_c.dist, pure.dist)
    np.testing.assert_array_equal(small.dist, pure.dist)
    if studentized:
        np.testing.assert_array_equal(with_c.se_dist, pure.se_dist)


def test_resample_seed_depends_on_seed_and_query_list():
    def draw(seed, ids):
        return np.random.default_rng(stats.resample_seed(seed, ids)).integers(0, 1000, 20)

    ids = ["q1", "q2", "q3"]
    np.testing.assert_array_equal(draw(5, ids), draw(5, list(ids)))
    assert not np.array_equal(draw(5, ids), draw(6, ids))
    assert not np.array_equal(draw(5, ids), draw(5, ["q1", "q2", "q4"]))
    assert not np.array_equal(draw(2**40 + 5, ids), draw(5, ids))  # high bits of the seed count


def test_degenerate_distribution_gives_point_interval():
    x = np.full(15, 0.25)
    w = np.random.default_rng(0).uniform(0.5, 1.5, 15)
    for method in ("percentile", "bca", "studentized"):
        boot = stats.bootstrap_means(
            x, w, resamples=200, rng=np.random.default_rng(0), studentized=method == "studentized"
        )
        with np.errstate(all="ignore"):
            lo, hi = stats.interval(boot, x, w, confidence=0.95, method=method)
        assert lo[0] == pytest.approx(0.25, abs=1e-15) and hi[0] == pytest.approx(0.25, abs=1e-15), method


# --------------------------------------------------------------------------- studentized


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_studentized_interval_is_sane_on_normal_data(seed):
    n, B = 50, 2000
    x = np.random.default_rng(seed).normal(0.5, 0.2, size=n)
    w = np.ones(n)
    boot = stats.bootstrap_means(x, w, resamples=B, rng=np.random.default_rng(seed), studentized=True)
    lo_t, hi_t = stats.interval(boot, x, w, confidence=0.95, method="studentized")
    lo_p, hi_p = stats.interval(boot, x, w, confidence=0.95, method="percentile")
    m = x.mean()
    assert lo_t[0] < m < hi_t[0]
    width_t, width_p = hi_t[0] - lo_t[0], hi_p[0] - lo_p[0]
    assert 0.8 < width_t / width_p < 1.3
    # close to the t interval on normal data
    half = ss.t.ppf(0.975, n - 1) * x.std(ddof=1) / np.sqrt(n)
    assert width_t == pytest.approx(2 * half, rel=0.15)


def test_studentized_se_dist_matches_resampled_weighted_se():
    n, B = 12, 50
    rng_d = np.random.default_rng(3)
    x = rng_d.uniform(size=n)
    w = rng_d.uniform(0.2, 2.0, size=n)
    idx = np.random.default_rng(4).integers(0, n, (B, n))
    boot = stats.bootstrap_means(x, w, resamples=B, rng=None, indices=idx, studentized=True)
    for b in range(B):
        xb, wb = x[idx[b]], w[idx[b]]
        assert boot.dist[b, 0] == pytest.approx(np.sum(wb * xb) / wb.sum(), abs=1e-14)
        assert boot.se_dist[b, 0] == pytest.approx(float(stats.weighted_se(xb, wb)), rel=1e-9, abs=1e-13)


def test_studentized_se_is_two_pass_and_skips_resamples_without_variance():
    """n = 3: each resample's standard error equals weighted_se of its drawn queries computed directly; a
    resample drawing one query three times has none (NaN), not the ~1e-9 a one-pass formula leaves."""
    x = np.array([0.6131471927654584, 0.3868528072345416, 0.75])
    w = np.array([1.0, 2.5, 0.7])
    idx = np.array(list(itertools.product(range(3), repeat=3)))  # every ordered resample
    boot = stats.bootstrap_means(x, w, resamples=idx.shape[0], rng=None, indices=idx, studentized=True)
    for b, row in enumerate(idx):
        if len(set(row)) == 1:
            assert np.isnan(boot.se_dist[b, 0])
        else:
            xb, wb = x[row], w[row]
            assert boot.se_dist[b, 0] == pytest.approx(float(stats.weighted_se(xb, wb)), rel=1e-12)
    lo, hi = stats.interval(boot, x, w, confidence=0.9, method="studentized")
    assert np.isnan(lo[0]) and np.isnan(hi[0])  # below STUDENTIZED_MIN_N_EFF: undefined, stated


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e6])
def test_studentized_interval_moves_with_the_data(offset):
    """Shifting every value shifts the interval: no cancellation in the resampled variances (a one-pass
    sum of squares minus the squared sum loses the variance once the offset dwarfs the spread)."""
    n, B = 20, 800
    r = np.random.default_rng(8)
    x = r.beta(0.6, 1.8, n)
    w = r.uniform(0.3, 3, n)
    idx = np.random.default_rng(9).integers(0, n, (B, n))
    base = stats.bootstrap_means(x, w, resamples=B, rng=None, indices=idx, studentized=True)
    lo0, hi0 = stats.interval(base, x, w, confidence=0.95, method="studentized")
    shifted = stats.bootstrap_means(x + offset, w, resamples=B, rng=None, indices=idx, studentized=True)
    lo1, hi1 = stats.interval(shifted, x + offset, w, confidence=0.95, method="studentized")
    tol = 1e-9 + 1e-13 * offset * n
    np.testing.assert_allclose(shifted.se_dist, base.se_dist, rtol=1e-6, atol=tol)
    assert lo1[0] - offset == pytest.approx(lo0[0], abs=max(tol, 1e-6 * (hi0[0] - lo0[0])))
    assert hi1[0] - offset == pytest.approx(hi0[0], abs=max(tol, 1e-6 * (hi0[0] - lo0[0])))
    assert lo0[0] < base.theta[0] < hi0[0]


# --------------------------------------------------------------------------- closed forms


def test_effective_n_closed_forms():
    assert stats.effective_n(np.ones(17)) == pytest.approx(17)
    assert stats.effective_n(np.array([1.0, 2.0, 3.0])) == pytest.approx(36 / 14)
    assert stats.effective_n(np.array([1.0, 1.0, 2.0, 4.0])) == pytest.approx(64 / 22)
    assert stats.effective_n(np.array([1e6, 1.0, 1.0])) == pytest.approx(1.0, abs=1e-5)
    w = np.random.default_rng(0).uniform(0.1, 5, size=40)
    assert stats.effective_n(w) == pytest.approx(stats.effective_n(3.7 * w))
    assert stats.effective_n(w) < 40
    assert stats.effective_n(np.array([])) == 0.0


def test_weighted_se_closed_forms():
    x = np.random.default_rng(1).normal(size=33)
    s = x.std(ddof=1)
    assert float(stats.weighted_se(x, np.ones(33))) == pytest.approx(s / np.sqrt(33), rel=1e-12)
    assert float(stats.weighted_se(x, np.full(33, 4.2))) == pytest.approx(s / np.sqrt(33), rel=1e-12)
    w = np.random.default_rng(2).uniform(0.1, 3, size=33)
    m = np.sum(w * x) / w.sum()
    expected = np.sqrt(33 / 32 * np.sum(w**2 * (x - m) ** 2)) / w.sum()
    assert float(stats.weighted_se(x, w)) == pytest.approx(expected, rel=1e-12)
    assert float(stats.weighted_se(x, 2 * w)) == pytest.approx(expected, rel=1e-12)
    # columns
    X = np.column_stack([x, 2 * x + 1])
    np.testing.assert_allclose(stats.weighted_se(X, np.ones(33)), [s / np.sqrt(33), 2 * s / np.sqrt(33)])
    assert np.isnan(stats.weighted_se(np.array([0.3]), np.ones(1)))


def test_weighted_mean():
    x = np.array([0.1, 0.5, 0.9])
    w = np.array([1.0, 2.0, 1.0])
    assert float(stats.weighted_mean(x, w)) == pytest.approx(2.0 / 4)
    np.testing.assert_allclose(stats.weighted_mean(np.column_stack([x, 1 - x]), w), [0.5, 0.5])


def test_nan_weighted_mean_closed_forms():
    nan = np.nan
    # a NaN value leaves out its weight: (3 * 1 + 1 * 0) / (3 + 1), not / (3 + 100 + 1)
    assert stats.nan_weighted_mean(np.array([1.0, nan, 0.0]), np.array([3.0, 100.0, 1.0])) == 0.75
    # exact fractions: (1/2 * 1/4 + 2 * 1/8) / (1/2 + 2) = (1/8 + 1/4) / (5/2) = 3/20
    x, w = np.array([0.25, nan, 0.125]), np.array([0.5, 1.0, 2.0])
    assert stats.nan_weighted_mean(x, w) == pytest.approx(float(Fraction(3, 20)), rel=1e-15)
    # uniform weights: the plain mean of the values that are there
    assert stats.nan_weighted_mean(np.array([nan, 0.2, 0.4, nan, 0.9]), np.ones(5)) == pytest.approx(0.5)
    # a single value is its own mean, whatever its weight
    assert stats.nan_weighted_mean(np.array([nan, 0.3]), np.array([7.0, 1e-300])) == 0.3
    # nothing left, or nothing at all: NaN, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(stats.nan_weighted_mean(np.array([nan, nan]), np.array([1.0, 2.0])))
        assert np.isnan(stats.nan_weighted_mean(np.zeros(0), np.zeros(0)))
        assert np.isnan(stats.nan_weighted_mean(np.array([0.5, nan]), np.array([0.0, 1.0])))  # total weight 0
    assert isinstance(stats.nan_weighted_mean(np.array([0.5]), np.ones(1)), float)


def test_nan_weighted_mean_is_the_bootstrap_point_estimate_bit_for_bit():
    rng = np.random.default_rng(7)
    x = rng.random(501)
    x[rng.random(501) < 0.2] = np.nan
    w = rng.random(501) + 0.01
    ok = ~np.isnan(x)
    boot = stats.bootstrap_means(x[ok], w[ok], resamples=3, rng=np.random.default_rng(1))
    assert stats.nan_weighted_mean(x, w) == float(boot.theta[0])
    # a strided column (a cutoff of an (n x k) table) gives the same bits as a contiguous copy
    table = np.column_stack([x, 1 - x, x])
    assert stats.nan_weighted_mean(table[:, 2], w) == stats.nan_weighted_mean(x.copy(), w)


def test_effect_size_dz():
    d = np.array([0.1, 0.3, -0.05, 0.2, 0.0])
    assert stats.effect_size_dz(d, np.ones(5)) == pytest.approx(d.mean() / d.std(ddof=1))
    assert stats.effect_size_dz(np.zeros(6), np.ones(6)) == 0.0
    assert stats.effect_size_dz(np.full(6, 0.25), np.ones(6)) == np.inf
    assert stats.effect_size_dz(np.full(6, -0.25), np.ones(6)) == -np.inf
    # the same with a value that is not a binary fraction: sd is 0, so d_z is infinite, not ~1e16
    assert stats.effect_size_dz(np.full(6, 0.1), np.ones(6)) == np.inf
    assert stats.effect_size_dz(np.full(6, -0.1), np.ones(6)) == -np.inf
    assert np.isnan(stats.effect_size_dz(np.array([0.1]), np.ones(1)))


# --------------------------------------------------------------------------- t test


@pytest.mark.parametrize("seed,n", [(0, 5), (1, 30), (2, 200)])
def test_paired_t_test_equals_scipy_ttest_rel(seed, n):
    r = np.random.default_rng(seed)
    a = r.uniform(size=n)
    b = np.clip(a + r.normal(0.03, 0.1, size=n), 0, 1)
    p = stats.paired_t_test(a - b, np.ones(n))
    assert p == pytest.approx(ss.ttest_rel(a, b).pvalue, rel=1e-10)
    # equal weights of any size give the same test
    assert stats.paired_t_test(a - b, np.full(n, 0.3)) == pytest.approx(p, rel=1e-10)


def test_paired_t_test_degenerate():
    assert stats.paired_t_test(np.zeros(8), np.ones(8)) == 1.0
    # a constant non-zero difference: scipy says t = inf, p = 0
    assert stats.paired_t_test(np.full(8, 0.25), np.ones(8)) == 0.0
    assert stats.paired_t_test(np.full(8, 0.2), np.ones(8)) < 1e-100
    assert np.isnan(stats.paired_t_test(np.array([0.2]), np.ones(1)))


def test_weighted_t_test_is_invariant_to_weight_scale():
    r = np.random.default_rng(9)
    d = r.normal(0.05, 0.2, size=25)
    w = r.uniform(0.1, 2, size=25)
    assert stats.paired_t_test(d, w) == pytest.approx(stats.paired_t_test(d, 10 * w), rel=1e-12)


def test_all_zero_differences_give_p_one_where_scipy_gives_nan():
    """A deliberate difference from ttest_rel: identical systems on every paired query are no evidence of a
    difference (p = 1, d_z = 0, as the randomization test's p = 1), where scipy's 0 / 0 gives NaN."""
    a = np.random.default_rng(0).uniform(size=9)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ss.ttest_rel(a, a).pvalue
    assert np.isnan(theirs)
    for w in (np.ones(9), np.random.default_rng(1).uniform(0.2, 3, 9)):
        assert stats.paired_t_test(a - a, w) == 1.0
        assert stats.effect_size_dz(a - a, w) == 0.0
        assert stats.randomization_test(a - a, w, resamples=100, rng=np.random.default_rng(0))[0] == 1.0


def _weighted_t_by_matrices(d, w):
    """The weighted test written with n x n matrices, independently of stats.weighted_t."""
    n = d.size
    h = w / w.sum()
    M = np.eye(n) - np.outer(np.ones(n), h)  # residuals r = M d
    S = M @ M.T  # Cov(r) / sigma^2
    lam = h**2 / np.diag(S)  # each squared residual over its expected share
    r = M @ d
    se = np.sqrt(np.sum(lam * r**2))
    A = M.T @ np.diag(lam) @ M  # se^2 = d' A d
    # Satterthwaite's degrees of freedom of d' A d, bounded by Kish's n_eff - 1
    df = min(np.trace(A) ** 2 / np.trace(A @ A), w.sum() ** 2 / np.sum(w**2) - 1)
    return float(h @ d), se, df, lam, S


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_weighted_t_test_closed_form_and_unbiased_standard_error(seed):
    r = np.random.default_rng(seed)
    n = int(r.integers(5, 40))
    d = r.normal(0.02, 0.1, n)
    w = np.exp(r.normal(0, 1.5, n))
    m, se, df, lam, S = _weighted_t_by_matrices(d, w)
    m2, se2, df2 = stats.weighted_t(d, w)
    assert m2 == pytest.approx(m, rel=1e-12)
    assert se2 == pytest.approx(se, rel=1e-9)
    assert df2 == pytest.approx(df, rel=1e-9)
    # E[se^2] = sigma^2 sum(lam_i S_ii) equals Var(m) = sigma^2 sum h^2 for equal-variance differences
    h = w / w.sum()
    assert np.sum(lam * np.diag(S)) == pytest.approx(np.sum(h**2), rel=1e-12)
    # the uncorrected weighted standard error of the former test does not
    assert np.sum(h**2 * np.diag(S)) < 0.999 * np.sum(h**2)
    p = stats.paired_t_test(d, w)
    if df >= 1:
        assert p == pytest.approx(2 * ss.t.sf(abs(m / se), df), rel=1e-8)
    else:
        assert np.isnan(p)


def test_weighted_t_test_with_uniform_weights_is_ttest_rel_bit_for_bit_with_any_scale():
    r = np.random.default_rng(4)
    a, b = r.uniform(size=23), r.uniform(size=23)
    p = stats.paired_t_test(a - b, np.ones(23))
    assert p == pytest.approx(ss.ttest_rel(a, b).pvalue, rel=1e-12)
    assert stats.weighted_t(a - b, np.full(23, 0.37))[2] == 22.0  # n - 1 degrees of freedom, exactly
    # continuous in the weights: almost-equal weights give almost the same p
    assert stats.paired_t_test(a - b, 1 + 1e-9 * r.uniform(size=23)) == pytest.approx(p, rel=1e-6)


def test_weighted_t_test_with_one_dominant_weight_is_undefined_and_d_z_sane():
    """Weights [1e12, 1 x 7]: the mean rests on one query (n_eff = 1): no test (p NaN, not 3e-74), and d_z
    uses the weighted sd sum w (d - m)^2 / (W - sum w^2 / W), which stays of the order of the spread."""
    d = np.array([0.3, -0.1, 0.05, 0.2, -0.2, 0.0, 0.1, -0.05])
    w = np.array([1e12] + [1.0] * 7)
    assert stats.effective_n(w) == pytest.approx(1.0)
    assert np.isnan(stats.paired_t_test(d, w))
    dz = stats.effect_size_dz(d, w)
    m = float(w @ d / w.sum())
    # W sum w (d - m)^2 / (W^2 - sum w^2) with W^2 - sum w^2 = 2 * (1e12 * 7 + 21) written out exactly
    var = w.sum() * np.sum(w * (d - m) ** 2) / (2 * (1e12 * 7 + 21))
    assert dz == pytest.approx(m / np.sqrt(var), rel=1e-6)
    assert 0.5 < abs(dz) < 5
    # two effective queries: one degree of freedom, a defined p
    w2 = np.array([1e12, 1e12] + [1.0] * 6)
    assert stats.weighted_t(d, w2)[2] == pytest.approx(1.0, rel=1e-9)
    assert 0 < stats.paired_t_test(d, w2) <= 1


@pytest.mark.slow
@pytest.mark.parametrize("sigma, n", [(1.0, 30), (2.0, 30), (3.0, 10)])
def test_weighted_t_test_keeps_its_level_under_skewed_weights(sigma, n):
    """Under the null, lognormal weights exp(sigma z): the false-positive rate at 5% stays within the binomial
    99.9% band's upper end (benchmarks/ttest_level_sim.py; fixed seed). The former test exceeded it."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ttest_level_sim.py"
    spec = importlib.util.spec_from_file_location("_ttest_level_sim", path)
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    reps = 2000
    limit = sim.upper_limit(reps)
    for kind in sim.DIFFERENCES:
        r = sim.false_positive_rates(sigma, n, kind, reps, seed=11)
        assert r["rate"] <= limit, (kind, r, limit)
        defined = round(reps * (1 - r["undefined"]))
        assert r["rate_defined"] <= sim.upper_limit(defined), (kind, r)  # also among the defined p-values
        if kind == "normal":
            assert r["former"] > limit, (kind, r)  # the check tells the former test apart


# --------------------------------------------------------------------------- randomization test


def _brute_force_p(d, w):
    """Exact sign-flip p-value in rational arithmetic: share of sign vectors with |T*| >= |T|.

    Values are taken as the decimals they print as (0.1 is 1/10), so sign vectors
    whose sums are equal in decimal count as ties, as the documented tolerance intends.
    """
    fd = [Fraction(repr(float(v))) for v in d]
    fw = [Fraction(repr(float(v))) for v in w]
    observed = abs(sum(a * b for a, b in zip(fw, fd)))
    count = 0
    for signs in itertools.product((-1, 1), repeat=len(d)):
        if abs(sum(s * a * b for s, a, b in zip(signs, fw, fd))) >= observed:
            count += 1
    return count / 2 ** len(d)


@pytest.mark.parametrize(
    "case",
    [
        # generic values, uniform weights
        ([0.12, -0.05, 0.3, 0.07, -0.2, 0.15, 0.01, 0.22], None),
        # generic values with weights
        ([0.12, -0.05, 0.3, 0.07, -0.2, 0.15, 0.01, 0.22, -0.11, 0.04], [1, 2, 0.5, 3, 1, 1, 0.25, 2, 1.5, 1]),
        # many exact ties between sign vectors (values on a grid), with zeros
        ([0.25, -0.25, 0.5, 0.0, 0.25, 0.75, -0.5, 0.25, 0.0, 0.5, 0.25], None),
        ([0.25, -0.25, 0.5, 0.0, 0.25, 0.75, -0.5], [2, 1, 1, 4, 2, 1, 1]),
        # decimal values whose float sums are not exact
        ([0.1, 0.2, -0.3, 0.1, 0.2, 0.3, -0.1, 0.4, 0.1, -0.2, 0.3, 0.1], None),
        ([0.1, 0.2, -0.3, 0.3, 0.1, -0.1], [0.1, 0.2, 0.3, 0.1, 0.6, 0.3]),
        # all positive: only the identity and its mirror reach |T|
        ([0.3, 0.1, 0.2, 0.05, 0.4, 0.15], None),
    ],
)
def test_randomization_exact_equals_brute_force(case):
    d, w = case
    d = np.asarray(d, float)
    w = np.ones(d.size) if w is None else np.asarray(w, float)
    p, exact = stats.randomization_test(d, w, resamples=1000, rng=np.random.default_rng(0))
    assert exact is True
    assert p == pytest.approx(_brute_force_p(d, w), abs=1e-15)


def test_randomization_random_cases_equal_brute_force():
    r = np.random.default_rng(123)
    for n in (1, 2, 3, 9, 12):
        d = np.round(r.normal(0, 0.2, size=n), 2)
        w = np.round(r.uniform(0.1, 2, size=n), 1)
        p, exact = stats.randomization_test(d, w, resamples=1000, rng=np.random.default_rng(0))
        assert exact
        assert p == pytest.approx(_brute_force_p(d, w), abs=1e-15), (n, d, w)


def test_randomization_all_positive_small_n_closed_form():
    for n in (3, 10, 20):
        d = np.linspace(0.1, 0.5, n)
        p, exact = stats.randomization_test(d, np.ones(n), resamples=1000, rng=np.random.default_rng(0))
        assert exact and p == pytest.approx(2 / 2**n)


@pytest.mark.parametrize("n", [5, 20, 21, 40])
def test_randomization_identical_systems_give_p_one(n):
    p, exact = stats.randomization_test(np.zeros(n), np.ones(n), resamples=500, rng=np.random.default_rng(1))
    assert p == 1.0
    assert exact is (n <= 20)


def test_randomization_switches_to_monte_carlo_above_twenty():
    d = np.linspace(-0.1, 0.3, 21)
    _, exact20 = stats.randomization_test(d[:20], np.ones(20), resamples=100, rng=np.random.default_rng(0))
    _, exact21 = stats.randomization_test(d, np.ones(21), resamples=100, rng=np.random.default_rng(0))
    assert exact20 is True and exact21 is False


@pytest.mark.parametrize("resamples", [100, 999, 5000])
def test_randomization_clearly_better_gives_minimum_p(resamples):
    n = 30
    d = np.random.default_rng(0).uniform(0.1, 0.4, size=n)
    w = np.random.default_rng(1).uniform(0.5, 2, size=n)
    p, exact = stats.randomization_test(d, w, resamples=resamples, rng=np.random.default_rng(2))
    assert not exact
    assert p == 1 / (resamples + 1)
    p, _ = stats.randomization_test(-d, w, resamples=resamples, rng=np.random.default_rng(2))
    assert p == 1 / (resamples + 1)  # two-sided


def test_randomization_monte_carlo_approximates_exact():
    r = np.random.default_rng(5)
    n = 14
    d = r.normal(0.03, 0.15, size=n)
    w = r.uniform(0.5, 2, size=n)
    p_exact, _ = stats.randomization_test(d, w, resamples=100, rng=None)
    R = 20000
    p_mc, exact = stats.randomization_test(d, w, resamples=R, rng=np.random.default_rng(3), exact_max=0)
    assert not exact
    assert abs(p_mc - p_exact) < 4 * np.sqrt(p_exact * (1 - p_exact) / R) + 1 / R
    # the same seed gives the same p, another seed a slightly different one
    again, _ = stats.randomization_test(d, w, resamples=R, rng=np.random.default_rng(3), exact_max=0)
    other, _ = stats.randomization_test(d, w, resamples=R, rng=np.random.default_rng(4), exact_max=0)
    assert again == p_mc
    assert other != p_mc and abs(other - p_mc) < 0.03


def test_randomization_is_invariant_to_weight_scale():
    d = np.array([0.2, -0.1, 0.05, 0.3, -0.2, 0.1, 0.15])
    w = np.array([1.0, 2.0, 3.0, 0.5, 1.0, 1.5, 2.0])
    a, _ = stats.randomization_test(d, w, resamples=100, rng=None)
    b, _ = stats.randomization_test(d, 7 * w, resamples=100, rng=None)
    assert a == b


def test_randomization_monte_carlo_does_not_depend_on_chunk():
    """The module promises the same numbers whatever the chunk size; the sign-flip draws too."""
    r = np.random.default_rng(6)
    n = 25
    d = r.normal(0.02, 0.2, size=n)
    w = np.ones(n)
    ref, _ = stats.randomization_test(d, w, resamples=3001, rng=np.random.default_rng(8))
    for chunk in (4096, 1000, 7, 1):
        got, _ = stats.randomization_test(d, w, resamples=3001, rng=np.random.default_rng(8), chunk=chunk)
        assert got == ref, chunk


def test_randomization_empty():
    p, exact = stats.randomization_test(np.array([]), np.array([]), resamples=100, rng=None)
    assert np.isnan(p)


# --------------------------------------------------------------------------- corrections


P4 = [0.01, 0.04, 0.03, 0.005]


def test_bonferroni():
    np.testing.assert_allclose(stats.correct(P4, "bonferroni"), [0.04, 0.16, 0.12, 0.02])
    np.testing.assert_allclose(stats.correct([0.3, 0.6, 0.01], "bonferroni"), [0.9, 1.0, 0.03])


def test_holm():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(1*0.04, 0.06)
    np.testing.assert_allclose(stats.correct(P4, "holm"), [0.03, 0.06, 0.06, 0.02])
    # monotone step-down and capping at 1
    np.testing.assert_allclose(stats.correct([0.04, 0.5, 0.02], "holm"), [0.08, 0.5, 0.06])
    np.testing.assert_allclose(stats.correct([0.4, 0.6, 0.5], "holm"), [1.0, 1.0, 1.0])
    # ties
    np.testing.assert_allclose(stats.correct([0.01, 0.01, 0.2], "holm"), [0.03, 0.03, 0.2])


def test_benjamini_hochberg():
    # sorted ranks: 0.005*4/1, 0.01*4/2, 0.03*4/3, 0.04*4/4 -> step-up minimum
    np.testing.assert_allclose(stats.correct(P4, "benjamini_hochberg"), [0.02, 0.04, 0.04, 0.02])
    ps = [
        0.001,
        0.008,
        0.039,
        0.041,
        0.042,
        0.06,
        0.074,
        0.205,
        0.212,
        0.216,
        0.222,
        0.251,
        0.269,
        0.275,
        0.34,
        0.341,
        0.384,
        0.569,
        0.594,
        0.696,
        0.762,
        0.94,
        0.942,
        0.975,
        0.986,
    ]  # Benjamini & Hochberg 1995
    np.testing.assert_allclose(
        stats.correct(ps, "benjamini_hochberg"), ss.false_discovery_control(ps, method="bh"), rtol=1e-12
    )
    shuffled = np.random.default_rng(0).permutation(ps)
    np.testing.assert_allclose(
        stats.correct(shuffled, "benjamini_hochberg"), ss.false_discovery_control(shuffled, method="bh"), rtol=1e-12
    )


def test_correction_none_and_single():
    np.testing.assert_array_equal(stats.correct(P4, "none"), P4)
    for method in ("holm", "bonferroni", "benjamini_hochberg", "none"):
        np.testing.assert_allclose(stats.correct([0.03], method), [0.03])


def _written_out(p: np.ndarray, method: str) -> np.ndarray:
    """Bonferroni, Holm's step-down and Benjamini-Hochberg's step-up adjusted p-values, as statsmodels'
    multipletests defines them, one rank at a time over the whole array."""
    m = p.size
    order = sorted(range(m), key=lambda i: p[i])
    adj = np.empty(m)
    if method == "bonferroni":
        return np.minimum(1.0, m * p)
    if method == "holm":
        running = 0.0
        for r, i in enumerate(order):
            running = max(running, min(1.0, (m - r) * p[i]))
            adj[i] = running
        return adj
    running = 1.0
    for r in range(m - 1, -1, -1):  # Benjamini-Hochberg
        i = order[r]
        running = min(running, m * p[i] / (r + 1))
        adj[i] = min(1.0, running)
    return adj


@pytest.mark.parametrize("method", ["holm", "bonferroni", "benjamini_hochberg", "none"])
def test_correction_counts_an_undefined_p_value_as_one(method):
    """A comparison without a p-value stays NaN but stays in the family, as p = 1: the others are corrected over
    the family's whole size, as the written-out formulas over the family with 1 in its place give them."""
    ps = np.array([0.01, np.nan, 0.04, np.nan, 0.03, 0.005, 0.2, np.nan])
    with_nan = stats.correct(ps, method)
    defined = ~np.isnan(ps)
    assert np.isnan(with_nan[~defined]).all()
    want = ps if method == "none" else _written_out(np.where(defined, ps, 1.0), method)
    np.testing.assert_allclose(with_nan[defined], want[defined], rtol=1e-15)
    if method == "bonferroni":
        np.testing.assert_allclose(with_nan[defined], np.minimum(1, ps.size * ps[defined]), rtol=1e-15)
    assert np.isnan(stats.correct([np.nan, np.nan], method)).all()
    assert stats.correct([], method).shape == (0,)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "benjamini_hochberg"])
@pytest.mark.parametrize("seed", range(5))
def test_correction_against_the_written_out_formulas(method, seed):
    r = np.random.default_rng(seed)
    ps = r.uniform(0, 0.3, size=15) ** 2
    ps[r.random(15) < 0.3] = np.nan
    defined = ~np.isnan(ps)
    want = _written_out(np.where(defined, ps, 1.0), method)
    np.testing.assert_allclose(stats.correct(ps, method)[defined], want[defined], rtol=1e-14)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "benjamini_hochberg"])
def test_correction_properties(method):
    p = np.random.default_rng(1).uniform(0, 0.2, size=12)
    adj = stats.correct(p, method)
    assert np.all(adj >= p - 1e-15) and np.all(adj <= 1)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= -1e-15)  # order preserved


# --------------------------------------------------------------------------- the decision's interval


def test_t_interval_with_uniform_weights_is_the_paired_t_interval():
    """Uniform weights: mean -/+ t_(0.975, n - 1) s / sqrt(n), as scipy.stats.t.interval gives it."""
    d = np.array([0.12, -0.03, 0.2, 0.05, 0.0, 0.31, -0.1, 0.07, 0.15])
    lo, hi, df = stats.t_interval(d, np.full(d.size, 0.4), 0.95)
    want = ss.t.interval(0.95, d.size - 1, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(d.size))
    assert df == d.size - 1
    assert (lo, hi) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_t_interval_and_t_test_are_one_rule(seed):
    """p < 1 - confidence exactly when the interval at that confidence leaves out 0: at the confidence
    1 - p the interval's nearer end is 0."""
    r = np.random.default_rng(seed)
    d = r.normal(0.03, 0.1, 25)
    w = np.exp(r.normal(0, 1, 25))
    p = stats.paired_t_test(d, w)
    lo, hi, _ = stats.t_interval(d, w, 1 - p)
    assert min(abs(lo), abs(hi)) == pytest.approx(0, abs=1e-12)


def test_t_degrees_of_freedom_against_matrices_with_a_dominant_weight():
    """The O(n) sums against tr(A)^2 / tr(A^2) from n x n matrices in extended precision, where one weight
    dominates (the off-diagonal sums cancel most there)."""
    for w in (np.array([1e3, 1, 1, 1]), np.array([50.0, 2, 1, 1, 0.5, 0.1]), np.array([1e6] + [1.0] * 7)):
        lw = w.astype(np.longdouble)
        h = lw / lw.sum()
        n = w.size
        M = np.eye(n, dtype=np.longdouble) - np.outer(np.ones(n, dtype=np.longdouble), h)
        lam = h**2 / np.diag(M @ M.T)
        A = M.T @ np.diag(lam) @ M
        want = min(float(np.trace(A) ** 2 / np.trace(A @ A)), float(lw.sum() ** 2 / np.sum(lw**2) - 1))
        assert stats.t_degrees_of_freedom(w) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("confidence", [0.9999999999999999, 1 - 1e-12, 0.95])
def test_t_interval_near_a_confidence_of_one_is_the_closed_form(confidence):
    # df = 2 (three queries, equal weights): t_(1 - a, 2) = (1 - 2a) / sqrt(2a (1 - a)), a = (1 - confidence) / 2.
    # 0.5 + confidence / 2 rounds to 1 at the first level (an infinite interval) and loses digits at the second.
    d = np.array([0.1, -0.3, 0.5])
    w = np.ones(3)
    a = (1 - confidence) / 2
    q = (1 - 2 * a) / math.sqrt(2 * a * (1 - a))
    m = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(3))
    lo, hi, df = stats.t_interval(d, w, confidence)
    assert df == 2
    assert lo == pytest.approx(m - q * se, rel=1e-9)
    assert hi == pytest.approx(m + q * se, rel=1e-9)
