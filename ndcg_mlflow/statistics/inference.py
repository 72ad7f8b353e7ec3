"""Statistics over per-query scores: bootstrap intervals, paired tests, multiple-comparison corrections.

numpy/scipy only. Every function takes an explicit seed or generator; nothing
uses global random state.

Bootstrap: queries are resampled with replacement, each keeping its weight, so
a resampled weighted mean is ``sum(c_i w_i x_i) / sum(c_i w_i)`` with ``c`` the
resample counts. Each resample's sums add the drawn rows of a few (n x k) columns
at once, in draw order — one pass per chunk for every system and comparison sharing
the queries (in C where the package's C parts are built; else a sparse matrix of ones
at the drawn indices times those columns, which adds the same numbers in the same order).

The index stream depends only on the seed and on the ordered list of query ids
being resampled (:func:`resample_seed`): the same seed gives the same numbers
whatever the chunk size or the number of systems evaluated alongside.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..rules import bca_interval, benjamini_hochberg, bonferroni, corrects, holm, percentile_interval, studentizes

DEFAULT_CHUNK = 512
UNIFORM_BYTES = 1 << 22  # the bootstrap's uniform draws, at most this many bytes at a time (but one resample)
#: below this many effective queries (Kish's n_eff, :func:`effective_n`; n itself under uniform weights) the
#: studentized (bootstrap-t) interval is undefined (NaN). With few queries many resamples draw only two or
#: three distinct queries, whose tiny standard errors make the resampled t explode: even with an exact
#: variance, intervals of nDCG means wider than 1 are common below about 8 queries (at n = 2 every resample's
#: t is 0 or undefined, giving a zero-width interval). Unequal weights do the same with more queries: the mean
#: then rests on about n_eff of them (15 queries with lognormal weights of sigma 1 and n_eff 3.78 gave the
#: interval [-0.146, 0.970] of a mean nDCG), so the rule reads n_eff, not n.
STUDENTIZED_MIN_N_EFF = 10
#: the relative rounding :func:`reaches_n_eff` allows: n_eff does not depend on the weights' scale, but Kish's
#: formula on the same weights over another largest one (5 and 1, or 1 and 0.2) differs in the last bits
N_EFF_RTOL = 1e-12


def scale_free(w: Any) -> np.ndarray:
    """The weights ``w`` (float64) times the power of two that brings the largest into [0.5, 1): the same ratios,
    exactly (a power of two scales without rounding), so that a weighted statistic, whose numbers depend on the
    ratios only, gives the same numbers, bit for bit, at any scale of the weights, and its sums of weights and of
    their squares neither overflow (weights of 1e300) nor underflow (1e-300). Every public function of this module
    that takes weights applies it first (as do :mod:`ndcg_mlflow.risk` and :mod:`ndcg_mlflow.planning`); weights
    already of that scale are unchanged. Weights without a finite positive largest one are returned as they are
    (for the caller's own checks)."""
    w = np.asarray(w, dtype=np.float64)
    if w.size == 0:
        return w
    top = float(np.max(w))
    if not (math.isfinite(top) and top > 0):
        return w
    return np.ldexp(w, -math.frexp(top)[1])


# --------------------------------------------------------------------------- resampling


def resample_seed(seed: int, query_ids: Sequence[str]) -> np.random.SeedSequence:
    """A seed sequence fixed by the user's seed and the exact list of resampled queries."""
    h = hashlib.sha256("\x1f".join(map(str, query_ids)).encode("utf-8")).digest()
    words = [int.from_bytes(h[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(seed) >> 32 & 0xFFFFFFFF] + words)


def resample_uniforms(
    rng: np.random.Generator, n: int, resamples: int, chunk: int = DEFAULT_CHUNK, *, reuse: bool = False
) -> Iterator[np.ndarray]:
    """Chunks of (rows x n) uniform draws in [0, 1), one per resampled query: :func:`index_of` makes each an
    index. The stream does not depend on ``chunk``. ``reuse``: each chunk is drawn into the same buffer (a chunk
    is then valid until the next one is drawn), whose pages are touched once."""
    done = 0
    buffer = np.empty((min(chunk, resamples), n)) if reuse else None
    while done < resamples:
        c = min(chunk, resamples - done)
        yield rng.random((c, n)) if buffer is None else rng.random((c, n), out=buffer[:c])
        done += c


def index_of(u: np.ndarray, n: int) -> np.ndarray:
    """The indices ``floor(u * n)`` (at most ``n - 1``) of uniform draws ``u`` in [0, 1)."""
    return np.minimum((u * n).astype(np.int64), n - 1)


def resample_indices(
    rng: np.random.Generator, n: int, resamples: int, chunk: int = DEFAULT_CHUNK
) -> Iterator[np.ndarray]:
    """Chunks of (rows x n) indices drawn with replacement; the stream does not depend on ``chunk``.

    Each index comes from one 64-bit uniform draw (``floor(u * n)``): bounded-integer
    draws buffer half-words across a call, so their stream would change with the chunk size.
    """
    for u in resample_uniforms(rng, n, resamples, chunk):
        yield index_of(u, n)


def counts_from_indices(idx: np.ndarray, n: int) -> np.ndarray:
    """(rows x n) resample counts from (rows x n) indices."""
    rows = idx.shape[0]
    flat = (np.arange(rows, dtype=np.int64)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


@dataclass
class BootstrapDistribution:
    """Resampled weighted means of several series sharing one resampling of the same queries."""

    theta: np.ndarray  # (k,) observed weighted means
    dist: np.ndarray  # (resamples, k) resampled weighted means
    se_dist: np.ndarray | None  # (resamples, k) per-resample standard errors (studentized only)


def weighted_mean(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted mean of each column of ``x`` (n x k) or of a vector, column by column (so that a
    column's value never depends on which other columns are computed with it). Each column is summed
    as a contiguous vector, exactly as the evaluation sums the reported mean (a strided dot product
    rounds differently), so the bootstrap's point estimate is the reported mean bit for bit."""
    w = scale_free(w)
    if x.ndim == 1:
        return np.float64(w @ np.ascontiguousarray(x)) / w.sum()
    return np.array([w @ np.ascontiguousarray(x[:, c]) for c in range(x.shape[1])]) / w.sum()


def nan_weighted_mean(x: np.ndarray, w: np.ndarray) -> float:
    """The weighted mean of per-query values ``x`` (a vector) with weights ``w``, NaN meaning "no value".

    The one rule for every weighted mean over queries (a system's mean nDCG, the mean duplicate rate, the means
    and differences of ``sensitivity``):

    - a query whose value is NaN is left out together with its weight: ``sum(w x) / sum(w)`` over the others;
    - no value left (every value NaN, or no query at all): NaN;
    - a total weight over the values left that is not positive (0 / 0): NaN, never a warning (weights are
      positive, so only an empty selection meets it);
    - otherwise :func:`weighted_mean` of the values left: one contiguous dot product over one sum, the same bits
      as the bootstrap's point estimate.

    The weights are taken at their scale-free size (:func:`scale_free`): no overflow or underflow in the sums.

    >>> nan_weighted_mean(np.array([1.0, np.nan, 0.0]), np.array([3.0, 100.0, 1.0]))
    0.75
    """
    w = scale_free(w)
    ok = ~np.isnan(x)
    if not ok.any():
        return float("nan")
    wk = w[ok]
    if not wk.sum() > 0:
        return float("nan")
    return float(weighted_mean(x[ok], wk))


def weighted_se(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Standard error of a weighted mean: sqrt(n/(n-1) * sum w^2 (x - m)^2) / sum w.

    With equal weights this is the usual s / sqrt(n).
    """
    w = scale_free(w)
    n = x.shape[0]
    if n < 2:
        return np.full(x.shape[1:] if x.ndim > 1 else (), np.nan)
    m = weighted_mean(x, w)
    r2 = (x - m) ** 2
    w2 = w**2
    ss = w2 @ r2 if x.ndim == 1 else np.array([w2 @ r2[:, c] for c in range(x.shape[1])])
    return np.sqrt(n / (n - 1) * ss) / w.sum()


def bootstrap_means(
    x: np.ndarray,
    w: np.ndarray,
    *,
    resamples: int,
    rng: np.random.Generator,
    studentized: bool = False,
    chunk: int = DEFAULT_CHUNK,
    indices: np.ndarray | None = None,
    index_chunks: Iterable[np.ndarray] | None = None,
) -> BootstrapDistribution:
    """Bootstrap distribution of the weighted means of the columns of ``x`` (n x k).

    ``indices`` (resamples x n) replaces the generator, to feed the exact resamples of another tool;
    ``index_chunks`` does the same a chunk of rows at a time (the stratified draw,
    :func:`ndcg_mlflow.statistics.segments.stratified_indices`).
    Every resampled sum adds that resample's own drawn rows of the few (n x k) columns of weighted
    values in draw order (:func:`resampled_sums`), so the numbers are bit-for-bit the same whatever
    ``chunk`` (how many resamples are drawn at a time) and whatever other columns are resampled
    alongside.
    """
    w = scale_free(w)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    n, k = x.shape
    mat = np.ascontiguousarray(np.hstack([w[:, None] * x, w[:, None]]))
    w2 = w**2
    dist = np.empty((resamples, k))
    se = np.empty((resamples, k)) if studentized else None
    if index_chunks is not None:
        source: Iterator[tuple[np.ndarray, bool]] = ((idx, True) for idx in index_chunks)
    elif indices is not None:
        source = ((indices[i : i + chunk], True) for i in range(0, resamples, chunk))
    elif studentized:  # (the standard errors take the indices)
        source = ((idx, True) for idx in resample_indices(rng, n, resamples, chunk))
    else:  # (a few MB at a time, drawn into one buffer: the sums read each chunk before the next is drawn)
        rows = max(1, min(chunk, UNIFORM_BYTES // (8 * n)))
        source = ((u, False) for u in resample_uniforms(rng, n, resamples, rows, reuse=True))
    row = 0
    for draws, are_indices in source:
        c = draws.shape[0]
        s = resampled_sums(draws, are_indices, n, mat)
        sw = s[:, k : k + 1]
        means = s[:, :k] / sw
        dist[row : row + c] = means
        if se is not None:  # studentized: the draws are indices
            se[row : row + c] = _resampled_se(x, w2, draws, means, sw[:, 0])
        row += c
    theta = weighted_mean(x, w)
    # a series whose values are all equal has a point distribution: every resampled mean is the mean
    # itself (summed in another order it would differ from it in the last bits, and look like a spread)
    constant = np.ptp(x, axis=0) == 0
    if constant.any():
        dist[:, constant] = theta[constant]
        if se is not None:
            se[:, constant] = 0.0
    return BootstrapDistribution(theta, dist, se)


def resampled_sums(draws: np.ndarray, indices: bool, n: int, mat: np.ndarray) -> np.ndarray:
    """(c x m): row r is the sum of the rows ``mat[j]`` (``mat`` is (n x m), C-contiguous float64) over the n
    draws j of resample r (``draws[r]``: indices, or uniforms that :func:`index_of` makes indices), added in draw
    order from 0.0.

    In C where the package's C parts are built (``ckernel.resampled_sums``); else a sparse matrix of ones at the
    drawn indices times ``mat``, whose product (scipy's CSR times a dense matrix) adds each row's entries in
    their order: the same numbers, bit for bit (``tests/statistics/test_stats.py``)."""
    from ..kernel import native_kernel

    c = draws.shape[0]
    fast = native_kernel()
    if fast is not None:
        out = np.empty((c, mat.shape[1]))
        fast.resampled_sums(
            np.ascontiguousarray(draws, dtype=np.int64 if indices else np.float64), indices, n, mat, out
        )
        return out
    from scipy import sparse

    idx = draws if indices else index_of(draws, n)
    counts = sparse.csr_matrix((np.ones(c * n), idx.ravel(), np.arange(0, c * n + 1, n)), shape=(c, n))
    return np.asarray(counts @ mat)


def _resampled_se(x: np.ndarray, w2: np.ndarray, idx: np.ndarray, means: np.ndarray, sw: np.ndarray) -> np.ndarray:
    """Weighted standard error of each resample's mean (``weighted_se`` of the drawn queries), two-pass:
    the squared deviations from that resample's own mean, so no cancellation leaves a spurious variance.

    A resample whose drawn values are all equal (one query drawn n times, say) has no within-resample
    variance: its standard error is NaN and the studentized interval leaves it out (its t is 0 / 0).
    """
    c, n = idx.shape
    out = np.full((c, x.shape[1]), np.nan)
    if n < 2:
        return out
    step = max(1, (1 << 20) // n)  # rows at a time: a few MB of temporaries whatever the chunk
    for a in range(0, c, step):
        rows = slice(a, min(a + step, c))
        part = idx[rows]
        wv2 = w2[part]
        for col in range(x.shape[1]):
            xv = x[part, col]
            dev = xv - means[rows, col : col + 1]
            ss = np.sum(wv2 * dev * dev, axis=1)
            spread = xv.max(axis=1) > xv.min(axis=1)
            out[rows, col] = np.where(spread, np.sqrt(n / (n - 1) * ss) / sw[rows], np.nan)
    return out


# --------------------------------------------------------------------------- intervals


def _ndtri(p: Any) -> Any:
    from scipy.special import ndtri

    return ndtri(p)


def _ndtr(z: Any) -> Any:
    from scipy.special import ndtr

    return ndtr(z)


def quantiles(dist: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantiles of each column of ``dist`` at per-column probabilities (2 x k)."""
    s = np.sort(dist, axis=0)
    b = s.shape[0]
    pos = probs * (b - 1)
    lo = np.clip(np.floor(pos).astype(np.int64), 0, b - 1)
    hi = np.clip(lo + 1, 0, b - 1)
    frac = pos - lo
    cols = np.arange(s.shape[1])
    return s[lo, cols] * (1 - frac) + s[hi, cols] * frac


def jackknife_acceleration(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """BCa acceleration of the weighted mean from the closed-form leave-one-out means (column by column)."""
    w = scale_free(w)
    x = x if x.ndim > 1 else x[:, None]
    total_w = w.sum()
    denom = total_w - w
    out = np.zeros(x.shape[1])
    for c in range(x.shape[1]):
        col = x[:, c]
        with np.errstate(divide="ignore", invalid="ignore"):
            loo = ((w @ col) - w * col) / denom
        loo = loo[denom > 0]
        if loo.size == 0:
            continue
        u = loo.mean() - loo
        den = np.sum(u**2) ** 1.5
        out[c] = np.sum(u**3) / (6 * den) if den > 0 else 0.0
    return out


def interval(
    boot: BootstrapDistribution,
    x: np.ndarray,
    w: np.ndarray,
    *,
    confidence: float,
    method: str,
    bounds: tuple[Any, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided (low, high) per column; [theta, theta] where the distribution is degenerate (every value
    equal). Studentized: undefined (NaN) below :data:`STUDENTIZED_MIN_N_EFF` effective queries (Kish's n_eff of
    ``w``); resamples without within-resample variance (NaN standard error) are left out of the t quantiles.

    ``bounds``: (low, high), scalars or one per column, the range the series' mean cannot leave ([0, 1] for a
    mean nDCG, [-1, 1] for a difference of two): an interval's ends are clipped to it. Percentile and BCa ends are
    resampled means, always inside; a studentized end, theta -/+ t se, is not."""
    w = scale_free(w)
    x = x if x.ndim > 1 else x[:, None]
    alpha = (1 - confidence) / 2
    theta = boot.theta
    dist = boot.dist
    k = dist.shape[1]
    if percentile_interval(method):
        probs = np.tile(np.array([[alpha], [1 - alpha]]), (1, k))
        lo, hi = quantiles(dist, probs)
    elif bca_interval(method):
        b = dist.shape[0]
        frac = (np.count_nonzero(dist < theta, axis=0) + np.count_nonzero(dist <= theta, axis=0)) / (2 * b)
        z0 = _ndtri(frac)
        a = jackknife_acceleration(x, w)
        za = _ndtri(alpha)
        n1 = z0 + za
        n2 = z0 - za
        with np.errstate(divide="ignore", invalid="ignore"):
            p1 = _ndtr(z0 + n1 / (1 - a * n1))
            p2 = _ndtr(z0 + n2 / (1 - a * n2))
        probs = np.vstack([p1, p2])
        probs = np.where(np.isfinite(probs), probs, np.nan)
        lo, hi = quantiles(dist, np.nan_to_num(probs, nan=0.5))
        lo = np.where(np.isnan(probs[0]), np.nan, lo)
        hi = np.where(np.isnan(probs[1]), np.nan, hi)
    elif studentizes(method):
        se_hat = np.where(reaches_n_eff(w, STUDENTIZED_MIN_N_EFF), weighted_se(x, w), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (dist - theta) / boot.se_dist
        t = np.where(np.isfinite(t), t, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: degenerate, handled below
            tq = np.vstack([np.nanquantile(t, 1 - alpha, axis=0), np.nanquantile(t, alpha, axis=0)])
        lo = theta - tq[0] * se_hat
        hi = theta - tq[1] * se_hat
    else:  # pragma: no cover - the spec validates the method
        raise ValueError(method)
    if bounds is not None:  # (NaN ends stay NaN)
        lo = np.minimum(np.maximum(lo, bounds[0]), bounds[1])
        hi = np.minimum(np.maximum(hi, bounds[0]), bounds[1])
    point = degenerate(boot, x)
    lo = np.where(point, theta, lo)
    hi = np.where(point, theta, hi)
    return lo, hi


def degenerate(boot: BootstrapDistribution, x: np.ndarray) -> np.ndarray:
    """Columns whose bootstrap distribution is a point: every value equal (or every resampled mean)."""
    x = x if x.ndim > 1 else x[:, None]
    return (np.ptp(x, axis=0) == 0) | (np.ptp(boot.dist, axis=0) == 0)


def standard_error(boot: BootstrapDistribution, x: np.ndarray) -> np.ndarray:
    """The standard deviation of the bootstrap distribution per column; exactly 0 where it is a point."""
    return np.where(degenerate(boot, x), 0.0, boot.dist.std(axis=0, ddof=1))


def effective_n(w: np.ndarray) -> float:
    """Kish's effective number of queries: (sum w)^2 / sum w^2."""
    w = scale_free(w)
    return float(w.sum() ** 2 / (w**2).sum()) if w.size else 0.0


def kish_n(w: np.ndarray) -> float:
    """Kish's effective number of queries (sum w)^2 / sum w^2; exactly the number of queries when the weights are
    equal (as :func:`weighted_t` takes n - 1 degrees of freedom there)."""
    w = scale_free(w)
    if w.size and np.ptp(w) == 0:
        return float(w.size)
    return effective_n(w)


def share_interval(x: np.ndarray, w: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(share, lower end, upper end): the weighted share ``p = sum(w x) / sum(w)`` of the queries where the 0/1
    indicator ``x`` is 1, and its two-sided Clopper-Pearson interval at ``confidence`` on Kish's effective number
    of queries ``m = n_eff`` (:func:`kish_n`) with ``p m`` of them marked (Korn and Graubard's form for a weighted
    proportion, 1998)::

        lower = B(alpha/2; p m, m - p m + 1),   upper = B(1 - alpha/2; p m + 1, m - p m),   alpha = 1 - confidence

    with B(q; a, b) the q-quantile of a Beta(a, b) law (lower 0 when p = 0, upper 1 when p = 1). With equal weights
    this is the exact binomial interval of k marked queries out of n (scipy's ``binomtest(k, n)
    .proportion_ci(method="exact")``): its upper end lies below the true share at most alpha/2 of the time, at any n
    and share; with no marked query it is 1 - (alpha/2)^(1/n), not 0. Unequal weights (independent of ``x``) shrink
    the information to that of n_eff queries (Var p = p (1 - p) / n_eff), which the interval takes in place of n.
    The level under lognormal weights, ties and small n is measured in ``benchmarks/gate_sim.py``. NaN for no
    query."""
    from scipy.stats import beta

    x = np.asarray(x, dtype=np.float64)
    w = scale_free(w)
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    m = kish_n(w)
    marked = int(np.count_nonzero(x))
    share = marked / x.size  # k marked queries out of n, exactly (or none, or all)
    if np.ptp(w) > 0 and 0 < marked < x.size:
        share = float(np.clip(weighted_mean(x, w), 0.0, 1.0))
    k = float(marked) if np.ptp(w) == 0 else share * m
    a = (1 - confidence) / 2
    lo = 0.0 if share == 0 else float(beta.ppf(a, k, m - k + 1))
    hi = 1.0 if share == 1 else float(beta.isf(a, k + 1, m - k))
    return share, lo, hi


def reaches_n_eff(w: np.ndarray, minimum: float) -> bool:
    """Whether Kish's n_eff of ``w`` is at least ``minimum``, whatever the weights' scale: up to the rounding of
    :func:`effective_n` (:data:`N_EFF_RTOL`), so 1 query of weight 5 and 15 of weight 1 (n_eff 10 exactly) reach
    10 over their largest too (1 and 0.2, where the formula gives 9.999999999999998)."""
    w = scale_free(w)
    return effective_n(w) >= minimum * (1 - N_EFF_RTOL)


# --------------------------------------------------------------------------- paired tests


def randomization_test(
    d: np.ndarray,
    w: np.ndarray,
    *,
    resamples: int,
    rng: np.random.Generator,
    exact_max: int = 20,
    chunk: int | None = None,
) -> tuple[float, bool]:
    """Two-sided paired sign-flip test of the weighted mean difference (one series; see
    :func:`randomization_tests`). Returns (p, exact)."""
    p, exact = randomization_tests(
        np.asarray(d, dtype=np.float64)[:, None], w, resamples=resamples, rng=rng, exact_max=exact_max, chunk=chunk
    )
    return float(p[0]), exact


def randomization_tests(
    d: np.ndarray,
    w: np.ndarray,
    *,
    resamples: int,
    rng: np.random.Generator,
    exact_max: int = 20,
    chunk: int | None = None,
) -> tuple[np.ndarray, bool]:
    """Two-sided paired sign-flip tests of the weighted mean differences of the columns of ``d`` (n x m),
    all sharing one stream of sign vectors.

    Exact (all 2^n sign vectors) when n <= ``exact_max``: p = count / 2^n. Otherwise Monte-Carlo:
    p = (1 + count) / (resamples + 1). "count" counts |T*| >= |T| up to a relative tolerance of 1e-12
    (floating-point sums of equal values differ in the last bits). The sign vectors come from one
    64-bit draw per entry, in a buffer reused across chunks of about 2 million entries, so neither the
    chunk size nor the number of columns changes a p-value. Returns (p per column, exact).
    """
    w = scale_free(w)
    n, m = d.shape
    if n == 0:
        return np.full(m, np.nan), True
    v = (w[:, None] * d) / w.sum()
    observed = np.abs(np.array([v[:, c].sum() for c in range(m)]))
    tol = 1e-12 * np.maximum(np.array([np.abs(v[:, c]).sum() for c in range(m)]), 1e-300)
    threshold = observed - tol
    count = np.zeros(m, dtype=np.int64)
    if n <= exact_max:
        total = 1 << n
        bits = np.arange(n, dtype=np.int64)
        for start in range(0, total, 1 << 16):
            codes = np.arange(start, min(start + (1 << 16), total), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            count += np.count_nonzero(np.abs(signs @ v) >= threshold, axis=0)
        return count / total, True
    rows = chunk or max(1, (1 << 21) // n)
    buf = np.empty((rows, n))
    mask = np.empty((rows, n), dtype=bool)
    done = 0
    while done < resamples:
        c = min(rows, resamples - done)
        u, b = buf[:c], mask[:c]
        rng.random(out=u)
        np.less(u, 0.5, out=b)
        np.multiply(b, 2.0, out=u)  # +1 where the draw is below 0.5, -1 elsewhere
        u -= 1.0
        count += np.count_nonzero(np.abs(u @ v) >= threshold, axis=0)
        done += c
    return (1 + count) / (resamples + 1), False


def _sum_of_others(w: np.ndarray) -> np.ndarray:
    """sum(w) - w_i for each i, as a sum of the other weights (no cancellation when one weight dominates)."""
    order = np.argsort(w, kind="stable")
    ws = w[order]
    before = np.concatenate([[0.0], np.cumsum(ws)[:-1]])
    after = np.concatenate([np.cumsum(ws[::-1])[::-1][1:], [0.0]])
    out = np.empty_like(w)
    out[order] = before + after
    return out


def weighted_t(d: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """(mean, standard error, degrees of freedom) of the weighted paired t-test.

    Equal weights: the paired t-test (s / sqrt(n), n - 1). Unequal weights: the standard error of the
    weighted mean m = sum(w d) / W is sqrt(sum lambda_i (d_i - m)^2) with lambda_i = h_i^2 / (1 - 2 h_i +
    sum h^2), h = w / W: each squared residual divided by its expected share, so that its expectation is
    exactly Var(m) = sigma^2 sum h^2 when the differences share one variance, whatever the weights (the
    uncorrected sum_i h_i^2 (d_i - m)^2 underestimates it most where one weight dominates: its own residual
    is then ~0). The standard error is computed from sums of positive terms (the sum of the other weights),
    so a dominant weight leaves no cancellation. Degrees of freedom: :func:`t_degrees_of_freedom` (n - 1
    under equal weights; fewer than Kish's n_eff - 1 under unequal ones).
    """
    w = scale_free(w)
    n = d.size
    m = float(weighted_mean(d, w))
    if n < 2:
        return m, float("nan"), float("nan")
    if np.ptp(w) == 0:
        return m, float(weighted_se(d, w)), float(n - 1)
    others = _sum_of_others(w)
    w2 = w**2
    others2 = _sum_of_others(w2)
    lam = w2 / (others**2 + others2)  # h_i^2 / (1 - 2 h_i + sum h^2), times W^2 / W^2
    r = d - m
    se = float(np.sqrt(np.sum(lam * r * r)))
    return m, se, t_degrees_of_freedom(w, lam)


def t_degrees_of_freedom(w: np.ndarray, lam: np.ndarray | None = None) -> float:
    """Degrees of freedom of the weighted t: the smaller of Kish's n_eff - 1 (n_eff = W^2 / sum w^2, the queries
    the mean rests on) and Satterthwaite's for the standard error (as Bell and McCaffrey give them for such an
    estimator): tr(A)^2 / tr(A^2), where se^2 = d' A d is the estimator of :func:`weighted_t` as a quadratic
    form of the differences, A = M' diag(lambda) M and M = I - 1 h' (the residuals r = M d). tr(A) = sum h^2, and

        tr(A^2) = sum_ij lambda_i lambda_j P_ij^2,   P = M M',   P_ij = [i = j] - h_i - h_j + sum h^2,

    written with O(n) sums: sum h^4 on the diagonal (lambda_i P_ii = h_i^2), and off it, with a_i = sum h^2 / 2
    - h_i, sum_(i != j) lambda_i lambda_j (a_i + a_j)^2 = 2 L sum lambda a^2 + 2 (sum lambda a)^2 - 4 sum lambda^2
    a^2 (L = sum lambda). Both are n - 1 under equal weights. Under unequal ones Satterthwaite's is nearly always
    the smaller: n_eff - 1 alone made the t too liberal (a 95% interval's lower end above the truth up to 3% of
    the time instead of 2.5%, for normal differences with lognormal weights: ``benchmarks/gate_sim.py``); n_eff
    - 1 bounds it where one query dominates (Satterthwaite's then stays near 1 while the mean rests on that one
    query). Depends on the weights only. ``lam``: the lambda_i of :func:`weighted_t` when already computed."""
    w = scale_free(w)
    n = w.size
    if n < 2:
        return float("nan")
    if np.ptp(w) == 0:
        return float(n - 1)
    h = w / w.sum()
    s2 = float(np.sum(h * h))
    if lam is None:
        others = _sum_of_others(w)
        w2 = w**2
        lam = w2 / (others**2 + _sum_of_others(w2))
    a = s2 / 2 - h
    la = lam * a
    off = 2 * lam.sum() * float(la @ a) + 2 * float(la.sum()) ** 2 - 4 * float(la @ la)
    tr2 = float(np.sum(h**4)) + max(off, 0.0)
    kish = float(np.sum(w * _sum_of_others(w)) / np.sum(w**2))  # (W^2 - sum w^2) / sum w^2 = n_eff - 1
    return min(s2 * s2 / tr2, kish)


def two_sided_quantile(confidence: float, df: Any = math.inf) -> Any:
    """``t_(1 - alpha/2, df)``, alpha = 1 - confidence (the normal's with ``df`` infinite; ``df`` may be an array):
    the two-sided interval's multiplier of the standard error. Computed from the upper tail ``alpha / 2`` (exact in
    floating point for any confidence in [0.5, 1)), not from ``0.5 + confidence / 2``, which rounds to 1 (an
    infinite quantile) for a confidence within 2^-53 of 1 and loses digits well before."""
    from scipy import stats as st

    a = (1 - confidence) / 2
    return st.norm.isf(a) if isinstance(df, (int, float)) and math.isinf(df) else st.t.isf(a, df)


def t_interval(d: np.ndarray, w: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(low, high, degrees of freedom): the two-sided weighted t interval m -/+ t_(1 - alpha/2, df) se of the
    weighted mean of ``d`` (:func:`weighted_t`), alpha = 1 - confidence: the interval the spec's decision reads.

    Differences all equal (n >= 2): the point interval [m, m]. Undefined (NaN ends) below 2 values or below 1
    degree of freedom (a mean that rests on about one query)."""

    d = np.asarray(d, dtype=np.float64)
    w = scale_free(w)
    if d.size < 2:
        return float("nan"), float("nan"), float("nan")
    m, se, df = weighted_t(d, w)
    if np.ptp(d) == 0:
        return m, m, df
    if not df >= 1:
        return float("nan"), float("nan"), df
    q = float(two_sided_quantile(confidence, df))
    return m - q * se, m + q * se, df


def paired_t_test(d: np.ndarray, w: np.ndarray) -> float:
    """Two-sided t-test of the weighted mean difference (see :func:`weighted_t`): p < 1 - confidence exactly
    when :func:`t_interval` at that confidence leaves out 0.

    With equal weights it is exactly the paired t-test (scipy.stats.ttest_rel), except that differences
    all 0 give p = 1 (no difference on any query; scipy gives NaN for its 0 / 0), and a constant non-zero
    difference gives p = 0 (as scipy). Undefined (NaN) below 2 queries or, with weights, below 1 degree of
    freedom (:func:`t_degrees_of_freedom`).
    """
    from scipy import stats as st

    w = scale_free(w)
    n = d.size
    if n < 2:
        return float("nan")
    m, se, df = weighted_t(d, w)
    if np.ptp(d) == 0:  # every difference equal: no variance at all
        return 1.0 if m == 0 else 0.0
    if not df >= 1:
        return float("nan")
    t = m / se
    return float(2 * st.t.sf(abs(t), df))


def correct(pvalues: Sequence[float], method: str) -> np.ndarray:
    """Family-wise (holm, bonferroni) or false-discovery-rate (benjamini_hochberg) adjusted p-values over the
    family of all ``pvalues``, as declared.

    An undefined p-value (NaN: a comparison without paired queries, or one its test cannot test) stays a member
    of the family and counts as p = 1 there (ranked last): the family's size is ``len(pvalues)``, never only the
    members that have a p-value, so a comparison that could not be tested never makes the others' corrections
    smaller. Its own corrected p-value stays NaN. Bonferroni: min(1, m p); Holm: the step-down
    max over ranks j <= i of min(1, (m - j + 1) p_(j)); Benjamini-Hochberg: the step-up min over ranks j >= i of
    min(1, m p_(j) / j); m the family's size.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    m = p.size  # the whole family: an undefined p-value counts as 1 (ranked after every defined one)
    if q.size == 0 or not corrects(method):
        out[ok] = q
        return out
    order = np.argsort(q, kind="stable")
    ranked = q[order]
    rank = np.arange(q.size)  # 0-based ranks of the defined p-values, which precede every undefined one
    if bonferroni(method):
        adj = np.minimum(ranked * m, 1.0)
    elif holm(method):
        adj = np.minimum(np.maximum.accumulate(ranked * (m - rank)), 1.0)
    elif benjamini_hochberg(method):
        # the undefined members' own terms (1 * m / j >= 1) are capped at 1 and never lower a defined one's
        adj = ranked * m / (rank + 1)
        adj = np.minimum(np.minimum.accumulate(adj[::-1])[::-1], 1.0)
    else:  # pragma: no cover - validated by the spec
        raise ValueError(method)
    res = np.empty(q.size)
    res[order] = adj
    out[ok] = res
    return out


def effect_size_dz(d: np.ndarray, w: np.ndarray) -> float:
    """Standardized paired effect d_z = mean(d) / sd(d), both weighted.

    sd^2 = sum w (d - m)^2 / (W - sum w^2 / W), W = sum w: the weighted variance that is unbiased for the
    differences' variance whatever the weights ("reliability" weights); with equal weights the usual
    sample variance (n - 1 in the denominator). Differences all equal: 0 when they are 0, else +-inf.
    """
    w = scale_free(w)
    n = d.size
    if n < 2:
        return float("nan")
    m = float(weighted_mean(d, w))
    if np.ptp(d) == 0:  # every difference equal: no variance at all
        return 0.0 if m == 0 else float(np.copysign(np.inf, m))
    if np.ptp(w) == 0:
        var = float(n / (n - 1) * (w @ (d - m) ** 2) / w.sum())
    else:  # W sum w r^2 / (W^2 - sum w^2), the denominator as a sum of positive terms
        var = float(w.sum() * (w @ (d - m) ** 2) / np.sum(w * _sum_of_others(w)))
    return m / np.sqrt(var)
