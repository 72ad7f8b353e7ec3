#!/usr/bin/env python
"""The decision gate under the null: how often does ``superiority`` with margin 0 pass when nothing changed?

    python benchmarks/gate_sim.py [--reps 2000] [--resamples 1000] [--seed 3] [--ties T] [--no-bootstrap]
                                  [--part both|gate|regressions] [--quick]

Two exchangeable systems: on each query both systems' nDCG follow the same law, a Beta(0.6, 1.8) score (mean
0.25, skewed like nDCG) of a normal score that mixes a query difficulty shared by both systems (correlation
0.7) with each system's own noise; on a share ``--ties`` of the queries both return the same list (a
difference of exactly 0). The per-query differences are then symmetric about 0 and the true difference is 0.
Query weights are 1 (uniform) or lognormal exp(sigma z), sigma = 1 or 2, independent of the scores. For each
setting (n = 15, 30, 100 queries x the three weightings), each repetition draws fresh queries and weights and
applies the spec's decision (:func:`ndcg_mlflow.statistics.decision.decide`, ``superiority`` at margin 0, confidence
0.95) to them, as ``run`` does.

Printed per setting: the gate's pass rate (a false pass: the candidate is no better), which a 95% two-sided
interval's lower end promises to keep at 2.5%; the coverage of the interval the gate reads (the weighted t);
and, for the reported bootstrap intervals (BCa, percentile: :func:`ndcg_mlflow.statistics.inference.interval` on the
same queries), their coverage and the pass rate a gate on their lower end would have (the gate before it read the t
interval). A setting PASSes when the gate's pass rate is at most the upper end of the binomial 99% band around
2.5% for that many repetitions. Exit status 0 when every setting passes. ``--quick``: 500 repetitions and 500
resamples; ``--no-bootstrap``: the gate only.

The regressions guardrail (``decision.guardrails.regressions``) at the edge of what it allows: each query regresses
(loses more than ``delta`` = 0.1) with probability exactly ``max_share`` (0.05, 0.10, 0.25), independently of its
weight; the others lose nothing (a tie, d = 0, on ``--ties`` of them, 0.3 unless given), lose exactly ``delta``
(10%: not more than ``delta``, so not regressed) or take a value uniform in (-delta, 1). For n = 5 and 10 (the
size of a tiny segment), 30, 100 and 300 queries and weights 1 or lognormal (σ = 1, 2), each repetition reads
the share's interval (:func:`ndcg_mlflow.statistics.risk.regressed_share`) and applies the decision with that guardrail
(:func:`ndcg_mlflow.statistics.decision.decide`): the guardrail's pass rate is a false-pass rate (the true share is not
below ``max_share``), promised at most 2.5%, with the same PASS rule as the gate. Beside it, with the bootstrap,
the pass rate of the rule it replaced: the upper end of the percentile bootstrap interval of the share.
``--part gate`` or ``--part regressions``: one of the two tables.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ndcg_mlflow.spec import Decision, Guardrails, RegressionGuardrail  # noqa: E402
from ndcg_mlflow.statistics import inference as stats  # noqa: E402
from ndcg_mlflow.statistics.decision import decide  # noqa: E402
from ndcg_mlflow.statistics.risk import regressed, regressed_share  # noqa: E402

CONFIDENCE = 0.95
PROMISE = (1 - CONFIDENCE) / 2  # a two-sided interval's lower end lies above the truth this often
QUERIES = (15, 30, 100)
SIGMAS = (0.0, 1.0, 2.0)  # 0: uniform weights
BETA_A, BETA_B = 0.6, 1.8
DIFFICULTY = 0.7  # correlation of the two systems' normal scores through the shared query difficulty
KEY = "ndcg_at_10"
GATE = Decision(KEY, "superiority", 0.0)
#: the comparison the decision reads (its bootstrap ends are not what the rule reads; the paired values are)
ROWS = [{"candidate": "cand", "baseline": "base", "key": KEY, "p_corrected": float("nan"), "n_paired": 0}]


def draw(n: int, sigma: float, reps: int, rng: np.random.Generator, ties: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(reps x n) paired differences of two exchangeable systems and (reps x n) weights."""
    from scipy.special import ndtr
    from scipy.stats import beta

    shared = rng.standard_normal((reps, n))
    own = math.sqrt(1 - DIFFICULTY**2)
    a = beta.ppf(ndtr(DIFFICULTY * shared + own * rng.standard_normal((reps, n))), BETA_A, BETA_B)
    b = beta.ppf(ndtr(DIFFICULTY * shared + own * rng.standard_normal((reps, n))), BETA_A, BETA_B)
    d = a - b
    if ties > 0:
        d[rng.random((reps, n)) < ties] = 0.0
    w = np.exp(sigma * rng.standard_normal((reps, n))) if sigma > 0 else np.ones((reps, n))
    return d, w / w.max(axis=1, keepdims=True)  # over the largest, as the evaluation passes them


def gate(d: np.ndarray, w: np.ndarray) -> tuple[bool, float, float]:
    """The spec's decision on one set of paired differences: (passes, the interval's ends)."""
    out = decide(GATE, ROWS, CONFIDENCE, {("cand", KEY): (d, w)})
    row = out["candidates"][0]
    return out["outcome"] == "pass", row["ci_low"], row["ci_high"]


def simulate(
    n: int, sigma: float, reps: int, *, seed: int = 3, resamples: int = 1000, ties: float = 0.0, bootstrap: bool = True
) -> dict[str, float]:
    """Rates over ``reps`` repetitions: ``gate`` (pass), ``t_cover``, ``undefined`` (the t interval), and with
    ``bootstrap`` ``<method>_pass`` / ``<method>_cover`` for bca and percentile."""
    rng = np.random.default_rng([seed, n, int(sigma * 10), int(ties * 100)])
    d, w = draw(n, sigma, reps, rng, ties)
    counts = dict.fromkeys(
        ("gate", "t_cover", "undefined", "bca_pass", "bca_cover", "percentile_pass", "percentile_cover"), 0
    )
    for r in range(reps):
        passed, lo, hi = gate(d[r], w[r])
        counts["gate"] += passed
        counts["undefined"] += math.isnan(lo)
        counts["t_cover"] += lo <= 0 <= hi
        if bootstrap:
            x = d[r][:, None]
            boot = stats.bootstrap_means(x, w[r], resamples=resamples, rng=rng)
            for method in ("bca", "percentile"):
                blo, bhi = stats.interval(boot, x, w[r], confidence=CONFIDENCE, method=method)
                counts[f"{method}_pass"] += blo[0] > 0
                counts[f"{method}_cover"] += blo[0] <= 0 <= bhi[0]
    out = {k: v / reps for k, v in counts.items()}
    out["n_eff"] = float(np.mean(w.sum(axis=1) ** 2 / (w**2).sum(axis=1)))  # Kish's, averaged over the draws
    return out


REGRESSION_QUERIES = (5, 10, 30, 100, 300)
MAX_SHARES = (0.05, 0.10, 0.25)
DELTA = 0.1
EXACT_LOSS = 0.1  # the share of the queries not regressed that lose exactly DELTA (not more: not regressed)


def draw_regressions(
    n: int, sigma: float, share: float, reps: int, rng: np.random.Generator, ties: float
) -> tuple[np.ndarray, np.ndarray]:
    """(reps x n) paired differences of which a share ``share`` (in law) lose more than :data:`DELTA`, and
    (reps x n) weights independent of them."""
    lost = rng.random((reps, n)) < share
    u = rng.random((reps, n))
    kind = rng.random((reps, n))
    d = np.where(kind < ties, 0.0, np.where(kind < ties + EXACT_LOSS, -DELTA, -DELTA + u * (1 + DELTA)))
    d = np.where(lost, -DELTA - (1 - DELTA) * (1 - u), d)  # in [-1, -DELTA): more than DELTA lost
    w = np.exp(sigma * rng.standard_normal((reps, n))) if sigma > 0 else np.ones((reps, n))
    return d, w / w.max(axis=1, keepdims=True)


def guardrail(d: np.ndarray, w: np.ndarray, share: float) -> bool:
    """Whether the regressions guardrail at ``max_share = share`` passes (the main rule passes whatever d is)."""
    rule = Decision(KEY, "non_inferiority", 0.99, None, Guardrails(None, RegressionGuardrail(DELTA, share)))
    rows = [dict(ROWS[0], regressed_share=regressed_share(d, w, DELTA, CONFIDENCE))]
    row = decide(rule, rows, CONFIDENCE, {("cand", KEY): (np.zeros(2), np.ones(2))})["candidates"][0]
    return row["guardrails"][0]["outcome"] == "pass"


def simulate_regressions(
    n: int, sigma: float, share: float, reps: int, *, seed: int, ties: float, resamples: int, bootstrap: bool
) -> dict[str, float]:
    """Rates over ``reps`` repetitions: ``pass`` (the guardrail), ``boot_pass`` (the percentile bootstrap's upper
    end at most ``share``: the rule before), ``none`` (no regressed query drawn), and the mean ``n_eff``."""
    rng = np.random.default_rng([seed, n, int(sigma * 10), int(share * 1000), int(ties * 100), 7])
    d, w = draw_regressions(n, sigma, share, reps, rng, ties)
    passed = boot = 0
    for r in range(reps):
        passed += guardrail(d[r], w[r], share)
        if bootstrap:
            x = regressed(d[r], DELTA)[:, None]
            dist = stats.bootstrap_means(x, w[r], resamples=resamples, rng=rng)
            boot += stats.interval(dist, x, w[r], confidence=CONFIDENCE, method="percentile")[1][0] <= share
    return {
        "pass": passed / reps,
        "boot_pass": boot / reps if bootstrap else float("nan"),
        "none": float(np.mean(~(d < -DELTA).any(axis=1))),
        "n_eff": float(np.mean(w.sum(axis=1) ** 2 / (w**2).sum(axis=1))),
    }


def upper_limit(reps: int, p: float = PROMISE, level: float = 0.99) -> float:
    """Upper end of the central ``level`` binomial band of a pass rate ``p`` over ``reps`` repetitions."""
    from scipy.stats import binom

    return float(binom.isf((1 - level) / 2, reps, p) / reps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="repetitions per setting (default 2000)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument(
        "--ties",
        type=float,
        default=None,
        help="share of queries where both systems tie (default 0; 0.3 for the regressions guardrail)",
    )
    ap.add_argument("--part", choices=("both", "gate", "regressions"), default="both", help="the tables to run")
    ap.add_argument("--no-bootstrap", action="store_true", help="the gate only")
    ap.add_argument("--quick", action="store_true", help="500 repetitions and 500 resamples")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.resamples = 500, 500
    limit = upper_limit(args.reps)
    ok = True
    t0 = time.perf_counter()
    if args.part != "regressions":
        ok &= gate_table(args, limit)
    if args.part != "gate":
        ok &= regressions_table(args, limit)
    print(f"overall: {'OK' if ok else 'NOT OK'} ({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


def regressions_table(args: argparse.Namespace, limit: float) -> bool:
    ties = 0.3 if args.ties is None else args.ties
    load = os.getloadavg()
    print(
        f"the regressions guardrail, delta {DELTA:g}, true share = max_share; {args.reps} repetitions per setting, "
        f"confidence {CONFIDENCE}; ties {ties:g}; {'no bootstrap' if args.no_bootstrap else f'{args.resamples} '}"
        f"{'' if args.no_bootstrap else 'bootstrap resamples'}; load average {load[0]:.2f} on {os.cpu_count()} cores"
    )
    print(f"a setting PASSes when the guardrail passes at most {limit:.4f} of the time")
    head = f"  {'n':>4}{'weights':>10}{'n_eff':>7}{'max_share':>11}{'no loss':>9}{'pass':>8}"
    print(head + ("" if args.no_bootstrap else f"{'boot pass':>11}") + "  result")
    ok = True
    for n in REGRESSION_QUERIES:
        for sigma in SIGMAS:
            for share in MAX_SHARES:
                r = simulate_regressions(
                    n,
                    sigma,
                    share,
                    args.reps,
                    seed=args.seed,
                    ties=ties,
                    resamples=args.resamples,
                    bootstrap=not args.no_bootstrap,
                )
                passed = r["pass"] <= limit
                ok &= passed
                line = (
                    f"  {n:>4}{'uniform' if sigma == 0 else f'σ = {sigma:g}':>10}{r['n_eff']:>7.1f}{share:>11g}"
                    f"{r['none']:>9.3f}{r['pass']:>8.4f}" + ("" if args.no_bootstrap else f"{r['boot_pass']:>11.4f}")
                )
                print(line + f"  {'PASS' if passed else 'FAIL'}", flush=True)
    return ok


def gate_table(args: argparse.Namespace, limit: float) -> bool:
    ties = 0.0 if args.ties is None else args.ties
    load = os.getloadavg()
    print(
        f"{args.reps} repetitions per setting, superiority at margin 0, confidence {CONFIDENCE}; ties "
        f"{ties:g}; {'no bootstrap' if args.no_bootstrap else f'{args.resamples} bootstrap resamples'}; "
        f"load average {load[0]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"a setting PASSes when the gate passes at most {limit:.4f} of the time (the binomial 99% band's upper "
        f"end around {PROMISE:g}); an undefined t interval (below 1 degree of freedom) fails the gate and "
        f"counts as not covering"
    )
    head = f"  {'n':>4}{'weights':>10}{'n_eff':>7}{'gate pass':>11}{'t cover':>9}{'undef':>7}"
    if not args.no_bootstrap:
        head += f"{'BCa pass':>10}{'BCa cover':>11}{'pct pass':>10}{'pct cover':>11}"
    print(head + "  result")
    ok = True
    for n in QUERIES:
        for sigma in SIGMAS:
            r = simulate(
                n,
                sigma,
                args.reps,
                seed=args.seed,
                resamples=args.resamples,
                ties=ties,
                bootstrap=not args.no_bootstrap,
            )
            passed = r["gate"] <= limit
            ok &= passed
            line = (
                f"  {n:>4}{'uniform' if sigma == 0 else f'σ = {sigma:g}':>10}{r['n_eff']:>7.1f}{r['gate']:>11.4f}"
                f"{r['t_cover']:>9.4f}{r['undefined']:>7.3f}"
            )
            if not args.no_bootstrap:
                line += (
                    f"{r['bca_pass']:>10.4f}{r['bca_cover']:>11.4f}{r['percentile_pass']:>10.4f}"
                    f"{r['percentile_cover']:>11.4f}"
                )
            print(line + f"  {'PASS' if passed else 'FAIL'}", flush=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
