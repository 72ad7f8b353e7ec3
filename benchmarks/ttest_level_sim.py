#!/usr/bin/env python
"""Level of the weighted paired t-test: how often does it reject a true null at nominal 5%?

    python benchmarks/ttest_level_sim.py [--reps 4000] [--seed 11] [--quick]

For each scenario (lognormal weights exp(sigma * z), sigma = 0, 1, 2, 3; n queries) each
repetition draws fresh weights and per-query differences whose weighted mean is 0 in the
population (weights independent of the differences, differences symmetric around 0), and
runs :func:`ndcg_mlflow.statistics.inference.paired_t_test`. Two kinds of differences: standard normal,
and nDCG-like (the difference of two independent Beta(0.6, 1.8) scores, 0 on 30% of the
queries, where both systems return the same list).

The false-positive rate counts an undefined p (below 1 degree of freedom; always when n_eff < 2)
as no rejection, and is also shown among the defined p-values. A scenario PASSes when
the rate is at most the upper end of the binomial 99.9% band around 0.05 for that many
repetitions (the test keeps its level; with very unequal weights it is conservative).

For reference the former test (weighted standard error sqrt(n/(n-1) sum w^2 (d - m)^2) / sum w
without the bias correction, n - 1 degrees of freedom) runs alongside and is expected to FAIL
once weights are unequal. The exit status is 0 when every scenario of the current test
passes. ``--quick`` runs 1500 repetitions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ndcg_mlflow.statistics import inference as stats  # noqa: E402

ALPHA = 0.05
SCENARIOS = ((0.0, 10), (1.0, 30), (2.0, 30), (3.0, 10), (3.0, 30))
DIFFERENCES = ("normal", "ndcg-like")


def draw_differences(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(n)
    d = rng.beta(0.6, 1.8, n) - rng.beta(0.6, 1.8, n)
    d[rng.random(n) < 0.3] = 0.0
    return d


def former_t_test(d: np.ndarray, w: np.ndarray) -> float:
    """The former weighted test: uncorrected weighted standard error, n - 1 degrees of freedom."""
    from scipy import stats as st

    n = d.size
    m = float(w @ d / w.sum())
    se = np.sqrt(n / (n - 1) * np.sum(w**2 * (d - m) ** 2)) / w.sum()
    return float(2 * st.t.sf(abs(m / se), n - 1))


def upper_limit(reps: int, p: float = ALPHA, level: float = 0.999) -> float:
    """Upper end of the central ``level`` binomial acceptance region of a rejection rate ``p``."""
    from scipy.stats import binom

    return float(binom.isf((1 - level) / 2, reps, p) / reps)


def false_positive_rates(sigma: float, n: int, kind: str, reps: int, seed: int = 11) -> dict[str, float]:
    """Rejection rates at ALPHA under the null: current test (NaN p = no rejection), current among defined
    p-values, share of undefined p, and the former test."""
    rng = np.random.default_rng([seed, int(sigma * 10), n, DIFFERENCES.index(kind)])
    rejected = defined = former = 0
    for _ in range(reps):
        w = np.exp(sigma * rng.standard_normal(n))
        d = draw_differences(kind, n, rng)
        p = stats.paired_t_test(d, w)
        if not np.isnan(p):
            defined += 1
            rejected += p < ALPHA
        if np.ptp(d) > 0:
            former += former_t_test(d, w) < ALPHA
    return {
        "rate": rejected / reps,
        "rate_defined": rejected / defined if defined else float("nan"),
        "undefined": 1 - defined / reps,
        "former": former / reps,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000, help="repetitions per scenario (default 4000)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--quick", action="store_true", help="1500 repetitions")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps = 1500
    limit = upper_limit(args.reps)
    print(
        f"{args.reps} repetitions per scenario, nominal level {ALPHA}; PASS when the false-positive rate "
        f"is at most {limit:.4f} (binomial 99.9% band)"
    )
    print(
        f"  {'differences':<11}{'sigma':>6}{'n':>4}{'rate':>8}{'(defined p)':>13}{'undefined':>11}{'former':>8}  result"
    )
    ok = True
    t0 = time.perf_counter()
    for kind in DIFFERENCES:
        for sigma, n in SCENARIOS:
            r = false_positive_rates(sigma, n, kind, args.reps, args.seed)
            passed = r["rate"] <= limit
            ok &= passed
            former = "FAIL (expected)" if r["former"] > limit else "pass"
            print(
                f"  {kind:<11}{sigma:>6g}{n:>4}{r['rate']:>8.4f}{r['rate_defined']:>13.4f}{r['undefined']:>11.3f}"
                f"{r['former']:>8.4f}  {'PASS' if passed else 'FAIL'}; former test: {former}"
            )
    print(f"overall: {'OK' if ok else 'NOT OK'} ({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
