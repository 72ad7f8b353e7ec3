"""Statistics from per-group sufficient statistics, for per-query tables too large for the driver.

The per-query method (:mod:`ndcg_mlflow.statistics.comparisons`) resamples queries: it needs every query's nDCG on one
machine. Here the queries are put in ``G`` groups at random (Spark's ``xxhash64`` of the query id and a seed,
modulo ``G``), and Spark sums, per group, system and cutoff, the weighted nDCG and the weights of the queries
in the mean (``A_g = Σ w·x``, ``B_g = Σ w``), and per comparison the weighted differences and weights of the
queries valid for both systems (``D_g = Σ w·d``, ``W_g = Σ w``). Only these ``G`` sums come to the driver:

* the mean is ``Σ A_g / Σ B_g`` (the per-query weighted mean, summed in another order: equal up to rounding);
* the interval is the percentile interval of the group bootstrap: ``G`` groups drawn with replacement
  (counts ``c``), each resampled mean ``Σ c·A / Σ c·B``;
* the paired test flips the sign of each group's difference sum: ``T* = Σ ε·D / Σ W``, two-sided,
  ``p = (1 + #{|T*| >= |T|}) / (resamples + 1)``.

Assumptions: the queries are independent draws (as for the per-query bootstrap and sign-flip test). The groups
are then independent and identically distributed, so resampling groups estimates the same sampling variance of
the (ratio) mean as resampling queries, with ``G`` draws instead of ``n``: the interval is close to the per-query
percentile interval when ``G`` is large (hundreds; the relative error of the variance is about sqrt(2 / G)).
Under the null hypothesis of the sign-flip test (each query's difference symmetric about 0), a group's sum of
independent symmetric differences is symmetric too, so flipping groups is an exact test; its power nears the
per-query test's as ``G`` grows. BCa and studentized intervals, t-tests and the largest wins and losses need
per-query values: a spec declaring them is refused on this path
(:func:`ndcg_mlflow.engines.spark.grouped.check_grouped`). The sums themselves are Spark's
(:func:`ndcg_mlflow.engines.spark.grouped.group_sums_spark`); this module is their arithmetic, numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GROUPS = 1000
"""Random groups of queries (``G``)."""


@dataclass
class GroupSums:
    """Per-group sums of one series (a system's nDCG at a cutoff, or a paired difference): ``value`` = Σ w·x and
    ``weight`` = Σ w over the group's queries in the series, ``count`` the queries."""

    value: np.ndarray
    weight: np.ndarray
    count: np.ndarray

    @property
    def mean(self) -> float:
        total = float(self.weight.sum())
        return float(self.value.sum()) / total if total > 0 else float("nan")


def group_counts(groups: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples x groups) counts of the groups drawn with replacement, ``groups`` draws per resample."""
    idx = rng.integers(0, groups, size=(resamples, groups))
    counts = np.zeros((resamples, groups))
    np.add.at(counts, (np.repeat(np.arange(resamples), groups), idx.ravel()), 1.0)
    return counts


def group_interval(sums: GroupSums, counts: np.ndarray, confidence: float) -> dict[str, float]:
    """Mean, percentile interval and bootstrap standard error from the group bootstrap ``counts``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = (counts @ sums.value) / (counts @ sums.weight)
    dist = dist[np.isfinite(dist)]
    alpha = (1.0 - confidence) / 2.0
    if not dist.size:
        return {"mean": sums.mean, "ci_low": float("nan"), "ci_high": float("nan"), "std_error": float("nan")}
    low, high = np.quantile(dist, [alpha, 1.0 - alpha])
    return {"mean": sums.mean, "ci_low": float(low), "ci_high": float(high), "std_error": float(dist.std(ddof=1))}


def group_units(sums: GroupSums) -> tuple[np.ndarray, np.ndarray]:
    """The groups as the paired units of the decision's weighted t interval: each non-empty group's weighted mean
    ``value / weight`` with the weight ``weight``. Their weighted mean is the series' mean, and, the groups being
    independent and identically distributed, the t interval's standard error over them estimates the mean's."""
    keep = sums.weight > 0
    return sums.value[keep] / sums.weight[keep], sums.weight[keep]


def group_sign_flip(sums: GroupSums, resamples: int, rng: np.random.Generator) -> float:
    """Two-sided sign-flip test of the weighted mean difference, flipping whole groups."""
    total = float(sums.weight.sum())
    if total <= 0:
        return float("nan")
    v = sums.value / total
    observed = abs(float(v.sum()))
    threshold = observed - 1e-12 * max(float(np.abs(v).sum()), 1e-300)
    signs = np.where(rng.random((resamples, v.size)) < 0.5, 1.0, -1.0)
    count = int(np.count_nonzero(np.abs(signs @ v) >= threshold))
    return (1 + count) / (resamples + 1)


__all__ = [
    "GROUPS",
    "GroupSums",
    "group_counts",
    "group_interval",
    "group_sign_flip",
    "group_units",
]
