#!/usr/bin/env python
"""Judge simulation: do the prediction-powered 95% intervals of ndcg_mlflow.statistics.judge cover a paired difference?

    python benchmarks/judge_sim.py [--reps 2000] [--seed 11] [--quick]

A finite population of 200,000 queries stands for "all queries". Each has a baseline's and a candidate's true
nDCG-like value in [0, 1] (correlated through the query's difficulty z: the baseline is Phi(z + 0.5 e), the
candidate the baseline plus 0.02 + 0.1 e', clipped), the same value on 30% of the queries (a tie: the two
systems rank alike, so their difference is exactly 0 under any labels), and a weight: 1 (uniform) or lognormal
exp(s), s a standard normal correlated (0.5) with z, so that the weighted and the plain means differ. Humans
label the true values: Y = candidate - baseline. The judge labels each system's value with noise (sd 0.05,
clipped to [0, 1]) and, in the biased scenarios, overrates the candidate: by +0.03 ("+0.03"), or by 0.06 times
the baseline's value, which depends on the query ("by query"); on a tie it gives both systems the same value.
f = the judge's candidate - baseline. The target is the population's weighted mean of Y, known exactly.

Each repetition draws M queries (400 or 1500) with replacement, labels a random 10%, 20% or 30% of them (L, the
rest U), and computes the 95% intervals of ppi++ (lambda tuned), ppi (lambda 1) and human_only (lambda 0) with
:func:`ndcg_mlflow.statistics.judge.ppi_mean` (its default t interval), the same for ppi++ and human_only in ppi-
python's large-sample normal form (``interval="normal"``, for comparison), and the judge-only interval: the
weighted t interval of the mean of f over all M queries, as if the judge were a human. Coverage is the share of
repetitions whose interval holds the target (PASS when at least 0.94 - 2 SE, SE its binomial standard error). The
mean width is set beside the closed-form one, ``2 z sqrt(var)`` with var the population's variance of the estimate
(lambda at its population optimum for ppi++). The judge-bias test (:func:`ndcg_mlflow.statistics.judge.judge_bias`,
alpha 0.05) runs on L: its rejection rate is its level without a planted bias and its power with one.

Prints two markdown tables and the timing; the exit status is 0 when every ppi++, ppi and human_only interval
passes. ``--quick`` runs 300 repetitions.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scipy.special import ndtr  # noqa: E402

from ndcg_mlflow.statistics.inference import t_interval, two_sided_quantile  # noqa: E402
from ndcg_mlflow.statistics.judge import judge_bias, ppi_mean  # noqa: E402

POPULATION = 200_000
CONFIDENCE = 0.95
TIES = 0.3
NOISE = 0.05
SCENARIOS = ("none", "+0.03", "by query")
SIZES = (400, 1500)
FRACTIONS = (0.1, 0.2, 0.3)
WEIGHTINGS = ("uniform", "lognormal")
ESTIMATORS = {"ppi++": None, "ppi": 1.0, "human_only": 0.0}
#: ppi-python's large-sample form of two of them (interval="normal"), shown beside for comparison
NORMAL = {"ppi++ normal": None, "human_only normal": 0.0}
SHOWN = (*ESTIMATORS, *NORMAL, "judge_only")


@dataclass
class Population:
    y: np.ndarray  # human difference
    f: np.ndarray  # judge difference
    w: np.ndarray

    @property
    def target(self) -> float:
        return float(self.w @ self.y / self.w.sum())

    def moments(self, lam: float) -> tuple[float, float]:
        """(E[w^2 (Y - lam f - c)^2], E[w^2 (f - m)^2]) / E[w]^2: the per-query variances of the two ratio means."""
        ew = self.w.mean()
        r = self.y - lam * self.f
        cr = self.w @ r / self.w.sum()
        cf = self.w @ self.f / self.w.sum()
        return float(np.mean(self.w**2 * (r - cr) ** 2) / ew**2), float(np.mean(self.w**2 * (self.f - cf) ** 2) / ew**2)

    def variance(self, lam: float, n: int, big_n: int) -> float:
        vr, vf = self.moments(lam)
        return lam * lam * vf / big_n + vr / n

    def best_lambda(self, n: int, big_n: int) -> float:
        """The lambda in [0, 1] that minimises :meth:`variance` (a quadratic in lambda)."""
        v0 = self.variance(0.0, n, big_n)
        v1 = self.variance(1.0, n, big_n)
        vh = self.variance(0.5, n, big_n)
        a = 2 * (v1 + v0 - 2 * vh)  # v(l) = a l^2 + b l + v0
        b = v1 - v0 - a
        return float(np.clip(-b / (2 * a), 0.0, 1.0)) if a > 0 else 0.0


def population(scenario: str, weighting: str, rng: np.random.Generator) -> Population:
    m = POPULATION
    z = rng.standard_normal(m)
    base = ndtr(z + 0.5 * rng.standard_normal(m))
    cand = np.clip(base + 0.02 + 0.1 * rng.standard_normal(m), 0.0, 1.0)
    tie = rng.random(m) < TIES
    cand[tie] = base[tie]
    if scenario == "none":
        bias = np.zeros(m)
    elif scenario == "+0.03":
        bias = np.full(m, 0.03)
    else:
        bias = 0.06 * base
    judge_base = np.clip(base + NOISE * rng.standard_normal(m), 0.0, 1.0)
    judge_cand = np.clip(cand + bias + NOISE * rng.standard_normal(m), 0.0, 1.0)
    judge_cand[tie] = judge_base[tie]
    if weighting == "uniform":
        w = np.ones(m)
    else:
        w = np.exp(0.5 * z + math.sqrt(0.75) * rng.standard_normal(m))
    return Population(cand - base, judge_cand - judge_base, w)


@dataclass
class Cell:
    covered: dict[str, int]
    width: dict[str, float]
    lam: float = 0.0
    rejected: int = 0
    reps: int = 0


def run_cell(pop: Population, size: int, fraction: float, reps: int, rng: np.random.Generator) -> Cell:
    cell = Cell({k: 0 for k in SHOWN}, {k: 0.0 for k in SHOWN})
    target = pop.target
    n = round(fraction * size)
    uniform = bool(np.ptp(pop.w) == 0)
    for _ in range(reps):
        idx = rng.integers(0, POPULATION, size)
        y, f, w = pop.y[idx], pop.f[idx], pop.w[idx]
        lab = np.zeros(size, dtype=bool)
        lab[rng.choice(size, n, replace=False)] = True
        wl, wu = (None, None) if uniform else (w[lab], w[~lab])
        for name, lam in ESTIMATORS.items():
            r = ppi_mean(y[lab], f[lab], f[~lab], w_l=wl, w_u=wu, confidence=CONFIDENCE, lam=lam)
            cell.covered[name] += r.ci_low <= target <= r.ci_high
            cell.width[name] += r.ci_high - r.ci_low
            if lam is None:
                cell.lam += r.lam
        for name, lam in NORMAL.items():
            r = ppi_mean(y[lab], f[lab], f[~lab], w_l=wl, w_u=wu, confidence=CONFIDENCE, lam=lam, interval="normal")
            cell.covered[name] += r.ci_low <= target <= r.ci_high
        lo, hi, _ = t_interval(f, w, CONFIDENCE)
        cell.covered["judge_only"] += lo <= target <= hi
        cell.width["judge_only"] += hi - lo
        cell.rejected += judge_bias(y[lab], f[lab], w_l=wl, confidence=CONFIDENCE).p_value < 1 - CONFIDENCE
        cell.reps += 1
    return cell


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    reps = 300 if args.quick else args.reps
    z = float(two_sided_quantile(CONFIDENCE))
    t_all, cpu_all = time.perf_counter(), time.process_time()
    cover_rows, width_rows = [], []
    ok = True
    seeds = np.random.SeedSequence(args.seed)
    for scenario in SCENARIOS:
        for weighting in WEIGHTINGS:
            prng, crng = (np.random.default_rng(s) for s in seeds.spawn(2))
            pop = population(scenario, weighting, prng)
            rho = float(np.corrcoef(pop.y, pop.f)[0, 1])
            for size in SIZES:
                for fraction in FRACTIONS:
                    t0 = time.perf_counter()
                    c = run_cell(pop, size, fraction, reps, crng)
                    n = round(fraction * size)
                    big_n = size - n
                    marks = []
                    for name in SHOWN:
                        cov = c.covered[name] / reps
                        se = math.sqrt(max(cov * (1 - cov), 1e-12) / reps)
                        if name in ESTIMATORS:
                            passed = cov >= 0.94 - 2 * se
                            ok &= passed
                            marks.append(f"{cov:.3f}" + ("" if passed else " FAIL"))
                        else:
                            marks.append(f"{cov:.3f}")
                    closed = {
                        "ppi++": 2 * z * math.sqrt(pop.variance(pop.best_lambda(n, big_n), n, big_n)),
                        "ppi": 2 * z * math.sqrt(pop.variance(1.0, n, big_n)),
                        "human_only": 2 * z * math.sqrt(pop.variance(0.0, n, big_n)),
                    }
                    widths = [f"{c.width[k] / reps:.4f} ({closed[k]:.4f})" for k in ESTIMATORS]
                    label = f"| {scenario} | {weighting} | {size} | {n} |"
                    cover_rows.append(f"{label} {' | '.join(marks)} |")
                    width_rows.append(
                        f"{label} {' | '.join(widths)} | {c.width['judge_only'] / reps:.4f} | {c.lam / reps:.2f} "
                        f"| {rho:.2f} | {c.rejected / reps:.3f} |"
                    )
                    print(f"  {scenario} {weighting} M={size} n={n}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(f"{reps} repetitions per row; 95% intervals; target: the population's weighted mean human difference.\n")
    head = ["judge bias", "weights", "M", "n labelled", *SHOWN]
    print(f"| {' | '.join(head)} |")
    print("|" + "---|" * len(head))
    print("\n".join(cover_rows))
    print()
    print(
        "| judge bias | weights | M | n labelled | width ppi++ (closed form) | width ppi (closed form) "
        "| width human_only (closed form) | width judge_only | mean lambda | rho | bias test rejects |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(width_rows))
    wall, cpu = time.perf_counter() - t_all, time.process_time() - cpu_all
    print(f"\n{wall:.0f} s in all ({cpu:.0f} s of CPU); {'every' if ok else 'NOT every'} interval passes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
