#!/usr/bin/env python
"""Judge plan simulation: do the labelled queries ``statistics.judge.labelled_plan`` plans reach the planned power?

    python benchmarks/judge_plan_sim.py [--reps 1000] [--seed 23] [--quick]

A finite population of 200,000 queries stands for "all queries", built as in ``benchmarks/judge_sim.py``: each has a
baseline's and a candidate's true nDCG-like value in [0, 1] (the baseline Phi(z + 0.5 e), z the query's difficulty;
the candidate the baseline plus a + 0.1 e', clipped), the same value on 30% of the queries (a tie: a difference
of exactly 0 under any labels), and a weight: 1 (uniform) or lognormal exp(s), s a standard normal correlated (0.5)
with z. Humans label the true values: Y = candidate - baseline. The judge labels each system's value with noise (sd
0.05, clipped to [0, 1]) and overrates the candidate by a planted +0.03 (on a tie it gives both the same value): f =
the judge's candidate - baseline. The true difference theta is the population's weighted mean of Y. Each rule is
simulated at the true difference its plan assumes (:func:`ndcg_mlflow.statistics.planning.assumption`): superiority
with a candidate better by a = 0.04, non-inferiority with a candidate exactly as good as the baseline (a found by
bisection so that theta = 0, on the same draws).

Each repetition draws a pilot: M queries (400 or 1500) with replacement, n of them (20, 40 or 80) labelled at
random (L, the rest U: N = M - n judge-only queries), and plans with
:func:`ndcg_mlflow.statistics.judge.labelled_plan` (PPI++, 95% confidence, power 0.8) the decision's rule:

- ``superiority`` at margin 0 (the rule passes when the interval's lower end is above 0);
- ``non_inferiority`` at margin 0.01 (the lower end above -0.01).

When the pilot gives a plan of n' labelled queries, a fresh labelled sample of n' queries is drawn from the
population, the pilot's N judge-only queries are kept, and the rule is read off the tool's own PPI++ t interval
(:func:`ndcg_mlflow.statistics.judge.ppi_mean`, ``interval="t"``). The power reached is the share of planned pilots
whose fresh evaluation passes, with its Monte-Carlo standard error; a cell PASSes when power + 2 SE reaches 0.80.
``refused`` is the share of pilots without a plan, by reason (under superiority mostly ``pilot_too_small``: the pilot
cannot show its difference above the threshold at the bound's level). ``n at the true values``:
:func:`labelled_needed` (normal form) at the population's own distance (the margin under non-inferiority), sigma_y
(with the weights' design effect: sqrt(E[w^2 (Y - theta)^2]) / E[w]) and weighted correlation rho, what a plan that
knew them would ask for.

Prints a markdown table and the timing; the exit status is 0 when every cell passes. ``--quick``: 200 repetitions.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scipy.special import ndtr  # noqa: E402

from ndcg_mlflow.statistics.decision import rule_threshold  # noqa: E402
from ndcg_mlflow.statistics.judge import (  # noqa: E402
    labelled_needed,
    labelled_plan,
    ppi_mean,
    weighted_correlation,
)
from ndcg_mlflow.statistics.planning import assumption  # noqa: E402

POPULATION = 200_000
CONFIDENCE = 0.95
POWER = 0.8
TIES = 0.3
NOISE = 0.05
BIAS = 0.03
ADVANTAGE = 0.04
SIZES = (400, 1500)
PILOTS = (20, 40, 80)
WEIGHTINGS = ("uniform", "lognormal")
#: the rules and their margins (the lower end of the interval must lie above statistics.decision.rule_threshold)
RULES = {"superiority": 0.0, "non_inferiority": 0.01}
#: the true difference each rule is simulated at: the one its plan assumes (None: the candidate's advantage ADVANTAGE)
DIFFERENCE = {"superiority": None, "non_inferiority": 0.0}


def population(
    weighting: str, rng: np.random.Generator, difference: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y, f, w) of the population; the candidate's advantage ADVANTAGE, or with ``difference`` the advantage at
    which the weighted mean of Y is ``difference`` (by bisection: the mean grows with the advantage)."""
    m = POPULATION
    z = rng.standard_normal(m)
    base = ndtr(z + 0.5 * rng.standard_normal(m))
    e = rng.standard_normal(m)
    tie = rng.random(m) < TIES
    noise = rng.standard_normal((2, m))
    w = np.ones(m) if weighting == "uniform" else np.exp(0.5 * z + math.sqrt(0.75) * rng.standard_normal(m))

    def candidate(advantage: float) -> np.ndarray:
        cand = np.clip(base + advantage + 0.1 * e, 0.0, 1.0)
        cand[tie] = base[tie]
        return cand

    advantage = ADVANTAGE
    if difference is not None:
        low, high = -0.5, 0.5
        for _ in range(100):
            advantage = (low + high) / 2
            if float(w @ (candidate(advantage) - base) / w.sum()) < difference:
                low = advantage
            else:
                high = advantage
    cand = candidate(advantage)
    judge_base = np.clip(base + NOISE * noise[0], 0.0, 1.0)
    judge_cand = np.clip(cand + BIAS + NOISE * noise[1], 0.0, 1.0)
    judge_cand[tie] = judge_base[tie]
    return cand - base, judge_cand - judge_base, w


def run_cell(
    pop: tuple[np.ndarray, np.ndarray, np.ndarray],
    size: int,
    pilot: int,
    rule: str,
    margin: float,
    reps: int,
    rng: np.random.Generator,
) -> tuple[int, int, list[int], Counter]:
    """(planned, passed, the planned sizes, the reasons of the refusals) over ``reps`` pilots."""
    y_all, f_all, w_all = pop
    threshold = rule_threshold(rule, margin)
    uniform = bool(np.ptp(w_all) == 0)
    planned = passed = 0
    sizes: list[int] = []
    reasons: Counter = Counter()
    for _ in range(reps):
        idx = rng.integers(0, POPULATION, size)
        lab, unl = idx[:pilot], idx[pilot:]  # (a random sample: the first n of M draws are a random subset)
        wl = None if uniform else w_all[lab]
        wu = None if uniform else w_all[unl]
        plan = labelled_plan(
            y_all[lab],
            f_all[lab],
            f_all[unl],
            w_l=wl,
            w_u=wu,
            confidence=CONFIDENCE,
            power=POWER,
            rule=rule,
            margin=margin,
        )
        needed = plan["labelled_needed"]
        if needed is None:
            reasons[plan["reason"]["kind"]] += 1
            continue
        fresh = rng.integers(0, POPULATION, needed)
        est = ppi_mean(
            y_all[fresh],
            f_all[fresh],
            f_all[unl],
            w_l=None if uniform else w_all[fresh],
            w_u=wu,
            confidence=CONFIDENCE,
            interval="t",
        )
        planned += 1
        passed += bool(est.ci_low > threshold)
        sizes.append(needed)
    return planned, passed, sizes, reasons


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    reps = 200 if args.quick else args.reps
    t_all, cpu_all = time.perf_counter(), time.process_time()
    rows = []
    ok = True
    seeds = np.random.SeedSequence(args.seed)
    for weighting in WEIGHTINGS:
        pseed, cseed = seeds.spawn(2)
        crng = np.random.default_rng(cseed)
        for rule, margin in RULES.items():
            pop = population(weighting, np.random.default_rng(pseed), DIFFERENCE[rule])  # (the same draws)
            y_all, f_all, w_all = pop
            theta = float(w_all @ y_all / w_all.sum())
            rho = weighted_correlation(y_all, f_all, w_all)
            # the per-query sd whose square over n is the variance of the weighted mean of n queries (design effect)
            sigma = math.sqrt(float(np.mean(w_all**2 * (y_all - theta) ** 2)) / float(np.mean(w_all)) ** 2)
            threshold = rule_threshold(rule, margin)
            for size in SIZES:
                for pilot in PILOTS:
                    t0 = time.perf_counter()
                    planned, passed, sizes, reasons = run_cell(pop, size, pilot, rule, margin, reps, crng)
                    refused = 1 - planned / reps
                    why = ", ".join(f"{k} {v / reps:.3f}" for k, v in reasons.most_common())
                    known = labelled_needed(
                        assumption(rule, margin, theta).distance,
                        sigma_y=sigma,
                        rho=rho,
                        n_unlabelled=size - pilot,
                        power=POWER,
                    )
                    if planned:
                        p = passed / planned
                        se = math.sqrt(max(p * (1 - p), 1e-12) / planned)
                        good = p + 2 * se >= POWER
                        ok &= good
                        q = np.percentile(sizes, [10, 50, 90])
                        power = f"{p:.3f} ± {se:.3f}" + ("" if good else " LOW")
                        n_text = f"{q[1]:.0f} ({q[0]:.0f}–{q[2]:.0f})"
                    else:
                        power, n_text = "–", "–"
                    shown = round(theta, 4) + 0.0  # (no -0.0000)
                    rows.append(
                        f"| {weighting} | {rule} | {threshold:+.2f} | {shown:.4f} | {size} | {pilot} | {known} "
                        f"| {n_text} | {refused:.3f} | {why or '–'} | {power} |"
                    )
                    print(
                        f"  {weighting} {rule} M={size} pilot={pilot}: {time.perf_counter() - t0:.1f} s",
                        file=sys.stderr,
                    )
    print(
        f"{reps} pilots per row; PPI++ t intervals at 95%, planned power {POWER}; the fresh evaluation keeps the "
        f"pilot's N = M - n judge-only queries.\n"
    )
    head = [
        "weights",
        "rule",
        "threshold",
        "true difference",
        "M",
        "pilot n",
        "n at the true values",
        "planned n: median (10%–90%)",
        "refused",
        "why",
        "power reached ± SE",
    ]
    print(f"| {' | '.join(head)} |")
    print("|" + "---|" * len(head))
    print("\n".join(rows))
    wall, cpu = time.perf_counter() - t_all, time.process_time() - cpu_all
    print(f"\n{wall:.0f} s in all ({cpu:.0f} s of CPU); {'every' if ok else 'NOT every'} cell reaches the power")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
