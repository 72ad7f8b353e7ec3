#!/usr/bin/env python
"""Is the planned power achieved? The queries ``planning.queries_needed`` plans, against simulated evaluations.

    python benchmarks/power_sim.py [--reps 2000] [--seed 17] [--quick] [--pilots [--every K]] [--timing]

For each setting (a law of the per-query differences, a margin, equal or lognormal weights, a target power of 0.8
or 0.9), a large pilot evaluation (100,000 queries of the setting's law and weights) gives sigma and the ratio
n_eff / n that :func:`ndcg_mlflow.statistics.planning.queries_needed` reads, and with them the planned number of queries
n at which a threshold ``margin`` below the true difference is cleared with the target power. Then each repetition
draws a fresh evaluation of n queries whose true (weighted) mean difference is ``margin``, and applies the test
the spec's decision reads: the lower end of the two-sided 95% weighted t interval
(:func:`ndcg_mlflow.statistics.inference.t_interval`) above 0 (that is, a non-inferiority gate at ``margin`` for a
candidate as good as the baseline, shifted by ``margin``). The share of repetitions that pass is the empirical power,
printed with its Monte-Carlo standard error sqrt(p (1 - p) / reps) beside the target.

Laws of the differences:

- ``normal``: d ~ N(margin, sigma^2). With equal weights the exact power of the t test is known (the noncentral t:
  P(T' > t_(0.975, n - 1)), T' ~ t(n - 1, margin sqrt(n) / sigma), with the law's sigma), printed as ``exact``.
- ``nDCG-like``: bounded and skewed, with ties: per query a shared difficulty s ~ N(0, 1); the baseline's score
  K(Phi(0.7 s + 0.714 e1)) and the candidate's K(Phi(0.7 s + 0.714 e2 + shift)) with K the inverse distribution
  function of a Kumaraswamy(0.7, 2) law (scores in [0, 1], mean about 0.28, skewed like nDCG); on 30% of the
  queries both return the same list (a difference of exactly 0). ``shift`` is solved so that the mean difference
  is ``margin`` (on a fixed sample of 400,000 queries).

Weights: 1 (equal), or exp(z), z ~ N(0, 1) (lognormal, sigma 1: n_eff / n about exp(-1) = 0.37), independent of
the differences. A setting PASSes when the empirical power is at least the target minus 2.58 Monte-Carlo standard
errors (the planned power is reached within simulation error), else it is LOW. Under unequal weights the test
takes Satterthwaite's degrees of freedom, far fewer than Kish's n_eff - 1 (the ``df`` column: their mean over the
repetitions), which the plan reads off draws of the weights at the planned n. Exit status 0 when every
equal-weight setting passes. ``--quick``: 400 repetitions.

``--pilots``: plans from pilots smaller than the plan (20, 50, 100 nDCG-like queries, lognormal weights σ = 0, 1,
2; non-inferiority for a candidate as good as the baseline and superiority for one better than the margin), each
repetition drawing a fresh pilot, planning through ``planning.decision_plan`` and through the ``plan`` command's
code path (``plan_source.plan_evaluation`` on a folder of the pilot's tables), then drawing a fresh evaluation of the
planned size: the power reached among the pilots that give a plan, with its Monte-Carlo standard error (default
400 repetitions with ``--pilots``; a setting passes when power + 2 se reaches the target; exit status 0 when every
setting passes). ``no plan``: the share of pilots the plan refuses (too small to plan from, less than one degree of
freedom). ``--every k``: the ``plan`` command's
path on every k-th repetition only (its power on those; ``differ`` counts the repetitions where it planned another
n); ``--sigmas``, ``--rules``, ``--sizes``: some settings only. A plan beyond 2,000,000 queries is not simulated
(its evaluation would not fit in memory): such plans are counted apart and left out of the power.

``--timing``: the seconds ``planning.decision_plan`` takes per comparison (as ``run`` plans each comparison and
segment of a declared decision) for evaluations of 100 to 100,000 queries, equal and lognormal weights.
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

from ndcg_mlflow.statistics import inference as stats  # noqa: E402
from ndcg_mlflow.statistics.planning import kish_n, queries_needed, query_sd  # noqa: E402

CONFIDENCE = 0.95
PILOT = 100_000
RHO = 0.7  # correlation of the two systems' normal scores through the shared difficulty
TIES = 0.3
KUMARASWAMY = (0.7, 2.0)
CHUNK = 1_000_000  # values drawn at a time

#: (law, sigma of the normal law, margin, weights, target power)
SETTINGS = [
    ("normal", 0.2, 0.2, "equal", 0.8),
    ("normal", 0.2, 0.2, "equal", 0.9),
    ("normal", 0.25, 0.05, "equal", 0.8),
    ("normal", 0.25, 0.05, "equal", 0.9),
    ("normal", 0.25, 0.1, "lognormal", 0.8),
    ("normal", 0.25, 0.05, "lognormal", 0.8),
    ("normal", 0.25, 0.05, "lognormal", 0.9),
    ("nDCG-like", None, 0.03, "equal", 0.8),
    ("nDCG-like", None, 0.03, "equal", 0.9),
    ("nDCG-like", None, 0.05, "lognormal", 0.8),
    ("nDCG-like", None, 0.05, "lognormal", 0.9),
]


def kumaraswamy_ppf(u: np.ndarray) -> np.ndarray:
    a, b = KUMARASWAMY
    return (1 - (1 - u) ** (1 / b)) ** (1 / a)


def ndcg_like(shape: tuple[int, ...], shift: float, rng: np.random.Generator) -> np.ndarray:
    """Differences candidate - baseline of nDCG-like scores (see the module's docstring)."""
    from scipy.special import ndtr

    own = math.sqrt(1 - RHO**2)
    shared = RHO * rng.standard_normal(shape)
    base = kumaraswamy_ppf(ndtr(shared + own * rng.standard_normal(shape)))
    cand = kumaraswamy_ppf(ndtr(shared + own * rng.standard_normal(shape) + shift))
    d = cand - base
    d[rng.random(shape) < TIES] = 0.0
    return d


def solve_shift(margin: float, seed: int) -> float:
    """The shift of the candidate's normal score that makes the mean difference ``margin`` (bisection on a fixed
    sample: common random numbers make the mean a monotone function of the shift)."""
    low, high = -1.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        if ndcg_like((400_000,), mid, np.random.default_rng(seed)).mean() < margin:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def weights(shape: tuple[int, ...], kind: str, rng: np.random.Generator) -> np.ndarray:
    return np.ones(shape) if kind == "equal" else np.exp(rng.standard_normal(shape))


def draw(law: str, sigma: float | None, margin: float, shift: float, shape, rng) -> np.ndarray:
    if law == "normal":
        assert sigma is not None
        return margin + sigma * rng.standard_normal(shape)
    return ndcg_like(shape, shift, rng)


def exact_power(n: int, sigma: float, margin: float) -> float:
    """The t test's power with equal weights and normal differences: the noncentral t."""
    from scipy import stats as st

    return float(st.nct.sf(st.t.ppf(0.5 + CONFIDENCE / 2, n - 1), n - 1, margin * math.sqrt(n) / sigma))


def simulate(setting, reps: int, seed: int) -> dict:
    law, sigma, margin, kind, power = setting
    rng = np.random.default_rng([seed, int(margin * 1000), int((sigma or 0) * 1000), int(power * 10), len(kind)])
    shift = solve_shift(margin, seed) if law == "nDCG-like" else 0.0
    pilot_d = draw(law, sigma, margin, shift, (PILOT,), rng)
    pilot_w = weights((PILOT,), kind, rng)
    n = queries_needed(pilot_d, pilot_w, CONFIDENCE, power, distance=margin)
    assert n is not None
    sd = query_sd(pilot_d, pilot_w)
    ratio = kish_n(pilot_w) / PILOT
    from scipy.special import ndtri

    normal = math.ceil((float(ndtri(0.5 + CONFIDENCE / 2) + ndtri(power)) * sd / margin) ** 2 / ratio)
    passed = undefined = 0
    n_eff, dfs = [], []
    rows = max(1, CHUNK // n)
    for start in range(0, reps, rows):
        c = min(rows, reps - start)
        d = draw(law, sigma, margin, shift, (c, n), rng)
        w = weights((c, n), kind, rng)
        for r in range(c):
            lo, _, df = stats.t_interval(d[r], w[r], CONFIDENCE)
            passed += lo > 0
            undefined += math.isnan(lo)
            n_eff.append(kish_n(w[r]))
            dfs.append(df)
    rate = passed / reps
    return {
        "n": n,
        "normal": normal,
        "sd": sd,
        "n_eff": float(np.mean(n_eff)),
        "df": float(np.mean(dfs)),
        "rate": rate,
        "se": math.sqrt(rate * (1 - rate) / reps),
        "undefined": undefined / reps,
        "exact": exact_power(n, sigma, margin) if sigma is not None and kind == "equal" else float("nan"),
    }


PILOTS = (20, 50, 100)
PILOT_SIGMAS = (0.0, 1.0, 2.0)
#: (rule, margin, true difference): non-inferiority for a candidate as good as the baseline; superiority for one
#: better by 0.06 against a margin of 0.01
PILOT_RULES = (("non_inferiority", 0.05, 0.0), ("superiority", 0.01, 0.06))
TARGET = 0.8
#: the plan command's path counts toward PASS from this many planned repetitions on (``--every``)
MOST_SHOWN = 50
#: a plan beyond this many queries is not simulated (its evaluation would not fit in memory): counted apart
LARGEST_DRAWN = 2_000_000


def lognormal(shape, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return np.exp(sigma * rng.standard_normal(shape)) if sigma > 0 else np.ones(shape)


def plan_command(folder: Path, d: np.ndarray, w: np.ndarray, rule: str, margin: float) -> tuple[int | None, ...]:
    """The queries the ``plan`` command's code path plans for a pilot (``plan_source.plan_evaluation`` on an output
    folder holding its ``per_query.csv`` and ``summary.json``): (the table's row at ``--margin``, the declared
    decision's)."""
    import json

    from ndcg_mlflow.outputs.plan_source import plan_evaluation

    ids = [f"q{i}" for i in range(d.size)]
    base = (1 - d) / 2  # (and the candidate's (1 + d) / 2: both in [0, 1], their difference d)
    lines = ["system,query_id,cutoff,ndcg,weight"]
    lines += [f"base,{q},10,{float(b)!r},{float(x)!r}" for q, b, x in zip(ids, base, w)]
    lines += [f"cand,{q},10,{float(b + y)!r},{float(x)!r}" for q, b, y, x in zip(ids, base, d, w)]
    (folder / "per_query.csv").write_text("\n".join(lines) + "\n")
    summary = {
        "name": "pilot",
        "spec": {"uncertainty.confidence": CONFIDENCE},
        "comparisons": [{"baseline": "base", "candidate": "cand", "key": "ndcg_at_10"}],
        "decision": {"key": "ndcg_at_10", "rule": rule, "margin": margin},
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    plan = plan_evaluation(folder, margin=margin, power=TARGET)
    return plan["rows"][0]["queries_needed"], plan["decision"]["candidates"][0]["queries_needed"]


def pilot_setting(
    pilot: int, sigma: float, rule: str, margin: float, truth: float, reps: int, seed: int, folder, every: int = 1
):
    """Each repetition: a pilot of ``pilot`` nDCG-like queries (30% ties) with lognormal(sigma) weights; the
    queries planned from it for the rule (``planning.decision_plan`` through ``queries_needed``, and the
    ``plan`` command's code path); a fresh evaluation of that many queries and weights; the decision's test on
    it. The ``plan`` command's path plans every ``every``-th repetition (its power: on those). Returns the pass
    rates (among the pilots that give a plan) and the share that give none."""
    from ndcg_mlflow.statistics.planning import decision_plan

    rng = np.random.default_rng([seed, pilot, int(sigma * 10), len(rule)])
    shift = solve_shift(truth, seed) if truth else 0.0
    threshold = margin if rule == "superiority" else -margin
    out = {"direct": [], "command": [], "n": [], "none": 0, "differ": 0, "huge": 0}
    for rep in range(reps):
        d = ndcg_like((pilot,), shift, rng)
        w = lognormal((pilot,), sigma, rng)
        n = decision_plan(d, w / w.max(), CONFIDENCE, TARGET, rule, margin)["queries_needed"]
        command = rep % every == 0
        if command:
            row, declared = plan_command(folder, d, w, rule, margin)
            m = declared if rule == "superiority" else row
        if n is None:
            out["none"] += 1
            continue
        out["n"].append(n)
        if n > LARGEST_DRAWN:  # (not drawn: counted apart, left out of the power)
            out["huge"] += 1
            continue
        e = ndcg_like((n,), shift, rng)
        lo = stats.t_interval(e, lognormal((n,), sigma, rng), CONFIDENCE)[0]
        out["direct"].append(lo > threshold)
        if not command:
            continue
        out["differ"] += m != n
        if m == n:
            out["command"].append(lo > threshold)
        elif m is not None:
            e = ndcg_like((m,), shift, rng)
            out["command"].append(stats.t_interval(e, lognormal((m,), sigma, rng), CONFIDENCE)[0] > threshold)
    return out


def pilots_main(args) -> int:
    import tempfile

    load = os.getloadavg()
    print(
        f"pilots of {', '.join(map(str, PILOTS))} nDCG-like queries (30% ties), lognormal weights; {args.reps} "
        f"repetitions per setting (a fresh pilot and a fresh evaluation each; the plan command's path every "
        f"{args.every}); target power {TARGET}; load average {load[0]:.2f} on {os.cpu_count()} cores"
    )
    print(
        "power: the share of the planned evaluations that pass (among the pilots that give a plan), through "
        "queries_needed and through the plan command's code path; ± the Monte-Carlo standard error; differ: "
        "repetitions where the two planned different n; PASS when power + 2 se reaches the target (the plan "
        f"command's path counted from {MOST_SHOWN} planned repetitions on; no plan at all: nothing promised)"
    )
    print(
        f"{'rule':>16}{'pilot':>7}{'σ':>5}{'median n':>10}{'no plan':>9}{'power':>8}{'± se':>7}{'plan cmd':>10}"
        f"{'± se':>7}{'differ':>7}  result"
    )
    ok = True
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="power-sim-") as tmp:
        for rule, margin, truth in PILOT_RULES:
            if args.rules and rule not in args.rules:
                continue
            for pilot in args.sizes or PILOTS:
                for sigma in args.sigmas or PILOT_SIGMAS:
                    r = pilot_setting(pilot, sigma, rule, margin, truth, args.reps, args.seed, Path(tmp), args.every)
                    cells = []
                    passed = True
                    for key in ("direct", "command"):
                        k = len(r[key])
                        rate = sum(r[key]) / k if k else float("nan")
                        se = math.sqrt(rate * (1 - rate) / k) if k else float("nan")
                        if key == "direct" or k >= MOST_SHOWN:  # (a refusal everywhere passes: no promise made)
                            passed &= not k or rate + 2 * se >= TARGET
                        cells.append(f"{rate:>8.4f}{se:>7.4f}" if key == "direct" else f"{rate:>10.4f}{se:>7.4f}")
                    ok &= passed
                    if r["huge"]:
                        print(f"  ({r['huge']} plans beyond {LARGEST_DRAWN:,} queries not simulated)")
                    median = int(np.median(r["n"])) if r["n"] else 0
                    print(
                        f"{rule:>16}{pilot:>7}{sigma:>5g}{median:>10}{r['none'] / args.reps:>9.3f}{cells[0]}{cells[1]}"
                        f"{r['differ']:>7}  {'PASS' if passed else 'LOW'}",
                        flush=True,
                    )
    print(f"overall: {'OK' if ok else 'NOT OK'} ({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


def timing_main() -> int:
    """The time ``planning.decision_plan`` takes per comparison (what ``run`` spends on each comparison and segment
    of a declared decision), each with weights never seen before (no cache): equal weights (no draws) and lognormal
    σ = 1, 2 weights, evaluations of 100 to 100,000 queries, non-inferiority and superiority."""
    from ndcg_mlflow.statistics.planning import decision_plan

    load = os.getloadavg()
    print(f"seconds per decision_plan call (median of 5, fresh weights each); load average {load[0]:.2f}")
    print(f"{'queries':>9}{'σ':>5}{'non-inferiority':>17}{'superiority':>13}")
    rng = np.random.default_rng(5)
    shift = solve_shift(0.06, 17)
    for n in (100, 1_000, 10_000, 100_000):
        for sigma in PILOT_SIGMAS:
            cells = []
            for rule, margin, _ in PILOT_RULES:
                times = []
                for _ in range(5):
                    d = ndcg_like((n,), shift, rng)
                    w = lognormal((n,), sigma, rng)
                    t0 = time.perf_counter()
                    decision_plan(d, w / w.max(), CONFIDENCE, TARGET, rule, margin)
                    times.append(time.perf_counter() - t0)
                cells.append(float(np.median(times)))
            print(f"{n:>9,}{sigma:>5g}{cells[0]:>17.3f}{cells[1]:>13.3f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="repetitions per setting (default 2000)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--quick", action="store_true", help="400 repetitions")
    ap.add_argument(
        "--pilots", action="store_true", help="plans from small pilots (20, 50, 100 queries) instead; default 400 reps"
    )
    ap.add_argument("--every", type=int, default=1, help="with --pilots: the plan command's path every k-th repetition")
    ap.add_argument("--sigmas", type=float, nargs="*", help="with --pilots: these weights' sigmas only")
    ap.add_argument("--sizes", type=int, nargs="*", help="with --pilots: these pilot sizes only")
    ap.add_argument("--rules", nargs="*", choices=[r[0] for r in PILOT_RULES], help="with --pilots: these rules only")
    ap.add_argument("--timing", action="store_true", help="the time planning takes per comparison instead")
    args = ap.parse_args(argv)
    if args.timing:
        return timing_main()
    if args.pilots:
        if "--reps" not in (argv if argv is not None else sys.argv):
            args.reps = 400
        return pilots_main(args)
    if args.quick:
        args.reps = 400
    load = os.getloadavg()
    print(
        f"{args.reps} repetitions per setting; the test: the {CONFIDENCE:.0%} two-sided weighted t interval's lower "
        f"end above 0, true difference = margin; load average {load[0]:.2f} on {os.cpu_count()} cores"
    )
    print(
        "a setting PASSes when the empirical power is at least the target minus 2.58 Monte-Carlo standard errors "
        "(else LOW); df: the test's mean degrees of freedom; exact: the noncentral t's power"
    )
    head = (
        f"{'law':>10}{'σ':>7}{'margin':>8}{'weights':>11}{'target':>8}{'n':>6}{'normal n':>10}{'n_eff':>8}"
        f"{'df':>7}{'power':>8}{'± se':>8}{'exact':>8}  result"
    )
    print(head)
    t0 = time.perf_counter()
    ok = True
    for setting in SETTINGS:
        law, _, margin, kind, power = setting
        out = simulate(setting, args.reps, args.seed)
        passed = out["rate"] >= power - 2.58 * out["se"]
        ok &= passed or kind != "equal"
        exact = "–" if math.isnan(out["exact"]) else f"{out['exact']:.4f}"
        print(
            f"{law:>10}{out['sd']:>7.3f}{margin:>8g}{kind:>11}{power:>8g}{out['n']:>6}{out['normal']:>10}"
            f"{out['n_eff']:>8.1f}{out['df']:>7.1f}{out['rate']:>8.4f}{out['se']:>8.4f}{exact:>8}  "
            f"{'PASS' if passed else 'LOW'}" + (f" ({out['undefined']:.3f} undefined)" if out["undefined"] else ""),
            flush=True,
        )
    print(f"overall: {'OK' if ok else 'NOT OK'} ({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
