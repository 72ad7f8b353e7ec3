#!/usr/bin/env python
"""Benchmark: bootstrap intervals and paired comparisons, ndcg_mlflow.statistics.inference against
scipy.stats.bootstrap.

    python benchmarks/bench_bootstrap.py [--queries 7000] [--resamples 10000] [--systems 3]
                                         [--method bca] [--batch 500] [--repeat N]
                                         [--ours-mode analyze|direct] [--profile]

Synthetic per-query nDCG values (``queries x systems``, in [0, 1], with exact 0s
and 1s, correlated across systems through a shared query difficulty; uniform
weights) are built from a fixed seed in each child, so both tools see the same
data. Each tool runs in its own fresh interpreter (``--child`` mode):

* ours: what :func:`ndcg_mlflow.statistics.comparisons.analyze` does for one cutoff: intervals of
  every system plus every paired comparison against the first system, i.e. one
  :func:`stats.bootstrap_means` over the stacked columns (shared resampling),
  :func:`stats.interval`, and per comparison :func:`stats.randomization_test`,
  :func:`stats.paired_t_test`, effect size, wins/losses and the correction.
  ``--ours-mode analyze`` (default) calls ``analyze`` itself on a minimal stand-in
  result object; ``direct`` calls the ``stats`` functions in the same way.
* scipy: ``scipy.stats.bootstrap(..., batch=B)`` once per system for the mean, and
  once per comparison (``paired=True``) for the mean difference; same method,
  resamples and confidence.

Measured in the child after imports and data creation: wall time of the work,
the child's peak RSS (VmHWM over the whole process), and the extra peak above the
RSS just before the work (VmHWM is reset through /proc/self/clear_refs when the
kernel allows it). Target: under half of scipy's time, under 200 MB extra peak.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KEY = "ndcg_at_10"
TARGET_TIME_RATIO = 0.5
TARGET_EXTRA_MB = 200.0


# --------------------------------------------------------------------------- memory


def _status_kb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _peak_mb() -> tuple[float, str]:
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb / 1024.0, "VmHWM"
    import resource

    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (kb / 1024.0 / 1024.0 if sys.platform == "darwin" else kb / 1024.0), "ru_maxrss"


def _rss_mb() -> float | None:
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024.0


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False when not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------- data


def make_data(n: int, systems: int, seed: int):
    """(n x systems) per-query nDCG-like values in [0, 1], weights, query ids. numpy only."""
    import numpy as np

    rng = np.random.default_rng(seed)
    difficulty = rng.standard_normal(n)  # shared by all systems: the correlation
    x = np.empty((n, systems))
    for j in range(systems):
        latent = 0.9 * difficulty + 0.45 * rng.standard_normal(n) + 0.06 * j - 0.1
        v = 1.0 / (1.0 + np.exp(-1.7 * latent))
        v[latent < -1.4] = 0.0  # queries with nothing relevant retrieved
        v[latent > 1.8] = 1.0  # perfect rankings
        x[:, j] = v
    w = np.ones(n)
    ids = np.array([f"q{i}" for i in range(n)], dtype=object)
    return x, w, ids


def system_names(systems: int) -> list[str]:
    return ["baseline"] + [f"cand{j}" for j in range(1, systems)]


# --------------------------------------------------------------------------- children


class _FakeTop:
    """Stand-in for evaluation.TopLists: a few documents per query (for wins and losses)."""

    depth = 10

    def of(self, query: int, k: int | None = None) -> list[dict]:
        return [{"doc_id": f"d{query}_{r}", "grade": float(r % 2), "position": r} for r in range(3)]


def fake_result(x, w, ids):
    """The attributes of an EvaluationResult that analysis.analyze reads, for one cutoff (10)."""
    import numpy as np

    metric = SimpleNamespace(keys=(KEY,), cutoffs=(10,))
    systems = {
        name: SimpleNamespace(result=SimpleNamespace(ndcg=np.ascontiguousarray(x[:, [j]])), top=_FakeTop())
        for j, name in enumerate(system_names(x.shape[1]))
    }
    return SimpleNamespace(
        spec=SimpleNamespace(metric=metric), query_ids=ids, weights=w, relative_weights=w / w.max(), systems=systems
    )


def ours_analyze(x, w, ids, args) -> list[list[float]]:
    from ndcg_mlflow.statistics import comparisons as analysis

    # the spec's Uncertainty and Comparison sections, as the attributes analyze reads
    u = SimpleNamespace(resamples=args.resamples, confidence=args.confidence, method=args.method, seed=args.seed)
    c = SimpleNamespace(baseline="baseline", test="both", correction="holm", wins_losses=5, tie_tolerance=1e-9)
    a = analysis.analyze(fake_result(x, w, ids), u, c)
    names = system_names(x.shape[1])
    out = [[a.intervals[nm][KEY]["ci_low"], a.intervals[nm][KEY]["ci_high"]] for nm in names]
    out += [[row["ci_low"], row["ci_high"]] for row in a.comparisons]
    return out


def ours_direct(x, w, ids, args) -> list[list[float]]:
    """The same calls analysis.analyze makes, without the stand-in result object."""
    import numpy as np

    from ndcg_mlflow.statistics import inference as stats

    k = x.shape[1]
    deltas = x[:, 1:] - x[:, [0]]
    cols = np.column_stack([x, deltas])
    rng = np.random.default_rng(stats.resample_seed(args.seed, ids))
    boot = stats.bootstrap_means(cols, w, resamples=args.resamples, rng=rng, studentized=args.method == "studentized")
    lo, hi = stats.interval(boot, cols, w, confidence=args.confidence, method=args.method)
    se = stats.standard_error(boot, cols)  # noqa: F841 - analyze reports it
    n_eff = stats.effective_n(w)  # noqa: F841
    pvals = []
    for j in range(1, k):
        d = deltas[:, j - 1]
        stats.weighted_mean(x[:, 0], w)
        stats.weighted_mean(x[:, j], w)
        rng_r = np.random.default_rng(stats.resample_seed(args.seed, ["randomization", *ids]))
        p_rand, _ = stats.randomization_test(d, w, resamples=args.resamples, rng=rng_r)
        stats.paired_t_test(d, w)
        stats.effect_size_dz(d, w)
        np.count_nonzero(d > 1e-9), np.count_nonzero(d < -1e-9)
        np.lexsort((ids.astype(str), -d)), np.lexsort((ids.astype(str), d))
        pvals.append(p_rand)
    stats.correct(pvals, "holm")
    return [[float(a), float(b)] for a, b in zip(lo, hi)]


def scipy_bootstrap(x, w, ids, args) -> list[list[float]]:
    import numpy as np
    from scipy import stats as st

    if args.method == "studentized":
        raise SystemExit("scipy.stats.bootstrap has no studentized interval; use --method bca or percentile")
    method = "BCa" if args.method == "bca" else "percentile"

    def mean(a, axis=-1):
        return np.mean(a, axis=axis)

    def mean_diff(a, b, axis=-1):
        return np.mean(a - b, axis=axis)

    seed = np.random.SeedSequence(args.seed)
    kw = dict(
        n_resamples=args.resamples, batch=args.batch, vectorized=True, confidence_level=args.confidence, method=method
    )
    import inspect

    rng_kw = "rng" if "rng" in inspect.signature(st.bootstrap).parameters else "random_state"  # scipy < 1.15
    out = []
    streams = seed.spawn(2 * x.shape[1])
    for j in range(x.shape[1]):
        r = st.bootstrap((x[:, j],), mean, **kw, **{rng_kw: np.random.default_rng(streams[j])})
        out.append([float(r.confidence_interval.low), float(r.confidence_interval.high)])
    for j in range(1, x.shape[1]):
        r = st.bootstrap(
            (x[:, j], x[:, 0]), mean_diff, paired=True, **kw, **{rng_kw: np.random.default_rng(streams[x.shape[1] + j])}
        )
        out.append([float(r.confidence_interval.low), float(r.confidence_interval.high)])
    return out


def _time_stats_functions() -> dict[str, float]:
    """Wrap the heavy ndcg_mlflow.statistics.inference functions (analysis calls them through the module) to time
    them."""
    from ndcg_mlflow.statistics import inference as stats

    parts: dict[str, float] = {}
    for name in ("bootstrap_means", "interval", "randomization_test"):
        original = getattr(stats, name)

        def timed(*a, _f=original, _name=name, **kw):
            t = time.perf_counter()
            try:
                return _f(*a, **kw)
            finally:
                parts[_name] = parts.get(_name, 0.0) + time.perf_counter() - t

        setattr(stats, name, timed)
    return parts


def child_main(args: argparse.Namespace) -> None:
    t_start = time.perf_counter()
    import numpy as np  # noqa: F401
    import scipy.special  # noqa: F401 - stats.py imports these lazily; keep imports out of the timing
    import scipy.stats  # noqa: F401

    if args.child == "ours":
        import ndcg_mlflow.statistics.comparisons  # noqa: F401
        import ndcg_mlflow.statistics.inference  # noqa: F401
    x, w, ids = make_data(args.queries, args.systems, args.seed)
    setup_s = time.perf_counter() - t_start
    hwm_before, source = _peak_mb()
    base_rss = _rss_mb()
    reset = _reset_peak() if base_rss is not None else False

    fn = {"scipy": scipy_bootstrap, "ours": ours_analyze if args.ours_mode == "analyze" else ours_direct}[args.child]
    parts = _time_stats_functions() if args.child == "ours" else {}
    t0, c0 = time.perf_counter(), time.process_time()
    intervals = fn(x, w, ids, args)
    seconds, cpu_s = time.perf_counter() - t0, time.process_time() - c0

    hwm_after, _ = _peak_mb()
    if reset:
        extra = hwm_after - base_rss
        peak = max(hwm_before, hwm_after)
    else:  # VmHWM could not be reset: extra over the pre-work high-water mark (a lower bound)
        extra = hwm_after - (hwm_before if base_rss is None else max(hwm_before, base_rss))
        peak = hwm_after
    out = {
        "tool": args.child,
        "seconds": seconds,
        "cpu_s": cpu_s,
        "setup_s": setup_s,
        "peak_rss_mb": peak,
        "baseline_rss_mb": base_rss if base_rss is not None else hwm_before,
        "extra_mb": max(extra, 0.0),
        "rss_source": source,
        "hwm_reset": reset,
        "intervals": intervals,
        "parts": parts,
        "theta": [float(v) for v in np.concatenate([x.mean(axis=0), (x[:, 1:] - x[:, [0]]).mean(axis=0)])],
    }
    print("BENCH_RESULT " + json.dumps(out), flush=True)


# --------------------------------------------------------------------------- driver


def child_args(args: argparse.Namespace, tool: str) -> list[str]:
    return [
        "--child",
        tool,
        "--queries",
        str(args.queries),
        "--resamples",
        str(args.resamples),
        "--systems",
        str(args.systems),
        "--method",
        args.method,
        "--batch",
        str(args.batch),
        "--seed",
        str(args.seed),
        "--confidence",
        str(args.confidence),
        "--ours-mode",
        args.ours_mode,
    ]


def run_child(args: argparse.Namespace, tool: str, profile: Path | None = None) -> dict:
    from _child import run_child as run

    return run(__file__, child_args(args, tool), tool, profile)


def print_profile(path: Path, limit: int = 20) -> None:
    import pstats

    print(f"\n--- cProfile of the ndcg_mlflow child ({path}) ---")
    st = pstats.Stats(str(path))
    st.sort_stats("cumulative").print_stats(r"ndcg_mlflow", limit)
    st.sort_stats("tottime").print_stats(limit)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=7000)
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--systems", type=int, default=3, help="systems; the first is the baseline")
    ap.add_argument("--method", choices=("bca", "percentile"), default="bca")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--batch", type=int, default=500, help="scipy.stats.bootstrap batch")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=1, help="measure each tool N times, report the best")
    ap.add_argument(
        "--ours-mode",
        choices=("analyze", "direct"),
        default="analyze",
        help="call analysis.analyze on a stand-in result (default) or the stats functions directly",
    )
    ap.add_argument("--profile", action="store_true", help="also run the ours child under cProfile")
    ap.add_argument("--child", choices=("ours", "scipy"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.systems < 2:
        ap.error("--systems must be at least 2 (a baseline and a candidate)")
    if args.child:
        child_main(args)
        return 0

    comps = args.systems - 1
    print(
        f"data: {args.queries:,} queries x {args.systems} systems, uniform weights; {args.resamples:,} resamples, "
        f"method {args.method}, confidence {args.confidence}; {args.systems} intervals + {comps} paired "
        f"comparisons; ours = {args.ours_mode}, scipy batch = {args.batch}",
        flush=True,
    )
    best: dict[str, dict] = {}
    for i in range(max(1, args.repeat)):
        order = ("scipy", "ours") if i % 2 == 0 else ("ours", "scipy")  # alternate against drifting load
        for tool in order:
            r = run_child(args, tool)
            print(
                f"  [{i + 1}/{args.repeat}] {tool:<6} {r['seconds']:7.2f} s  peak {r['peak_rss_mb']:6.0f} MB  "
                f"extra {r['extra_mb']:6.0f} MB",
                flush=True,
            )
            b = best.setdefault(tool, dict(r, _parts_seconds=r["seconds"]))
            if r["seconds"] <= b["_parts_seconds"]:
                b["parts"], b["_parts_seconds"] = r.get("parts"), r["seconds"]
            for key in ("seconds", "cpu_s", "process_s", "peak_rss_mb", "extra_mb"):
                b[key] = min(b[key], r[key])

    o, s = best["ours"], best["scipy"]
    t_ratio = o["seconds"] / s["seconds"]
    print()
    print(
        f"best of {args.repeat}; seconds = wall time of the work only (after imports and data), cpu s = its CPU "
        f"time (all threads), process s = whole child; "
        f"peak = {o['rss_source']}; extra = peak above the RSS just before the work"
        f"{'' if o['hwm_reset'] else ' (VmHWM not resettable: lower bound)'}"
    )
    header = f"{'tool':<16}{'seconds':>9}{'cpu s':>8}{'process s':>11}{'peak RSS MB':>13}{'extra MB':>10}{'base MB':>9}"
    print(header)
    print("-" * len(header))
    for label, r in (("ndcg_mlflow", o), ("scipy.bootstrap", s)):
        print(
            f"{label:<16}{r['seconds']:>9.2f}{r['cpu_s']:>8.2f}{r['process_s']:>11.2f}{r['peak_rss_mb']:>13.0f}"
            f"{r['extra_mb']:>10.0f}{r['baseline_rss_mb']:>9.0f}"
        )
    m_ratio = o["peak_rss_mb"] / s["peak_rss_mb"]
    e_ratio = o["extra_mb"] / s["extra_mb"] if s["extra_mb"] > 0 else float("inf")
    print(
        f"{'ours/scipy':<16}{t_ratio:>9.2f}{o['cpu_s'] / s['cpu_s']:>8.2f}{o['process_s'] / s['process_s']:>11.2f}"
        f"{m_ratio:>13.2f}"
        f"{e_ratio:>10.2f}"
    )
    parts = o.get("parts") or {}
    if parts:
        rest = o["_parts_seconds"] - sum(parts.values())
        print(
            "ours, where the time went (fastest run): "
            + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
            + f", rest {rest:.2f} s"
        )
    print()

    # same quantities? the intervals must agree up to Monte Carlo noise (different random streams)
    labels = system_names(args.systems) + [f"{nm} - baseline" for nm in system_names(args.systems)[1:]]
    print(
        f"{'interval':<20}{'mean':>10}{'ours low':>11}{'ours high':>11}{'scipy low':>11}{'scipy high':>11}"
        f"{'|diff|/width':>14}"
    )
    worst = 0.0
    for lab, th, (ol, oh), (sl, sh) in zip(labels, o["theta"], o["intervals"], s["intervals"]):
        width = max(sh - sl, 1e-300)
        rel = max(abs(ol - sl), abs(oh - sh)) / width
        worst = max(worst, rel)
        print(f"{lab:<20}{th:>10.5f}{ol:>11.5f}{oh:>11.5f}{sl:>11.5f}{sh:>11.5f}{rel:>14.3f}")
    tolerance = max(0.1, 5.0 / args.resamples**0.5)  # endpoints carry Monte Carlo error ~ 1/sqrt(resamples)
    agree = worst < tolerance
    print(
        f"largest endpoint difference: {worst:.3f} of the interval width (tolerance {tolerance:.2f}; "
        f"{'Monte Carlo noise' if agree else 'TOO LARGE: the two tools do not compute the same interval'})"
    )
    print()

    ok_time = t_ratio < TARGET_TIME_RATIO
    ok_mem = o["extra_mb"] < TARGET_EXTRA_MB
    verdict = "PASS" if ok_time and ok_mem and agree else "FAIL"
    print(
        f"verdict: {verdict} - time {t_ratio:.2f}x of scipy.stats.bootstrap (target < {TARGET_TIME_RATIO:.2f}: "
        f"{'met' if ok_time else 'missed'}), extra peak memory {o['extra_mb']:.0f} MB "
        f"(target < {TARGET_EXTRA_MB:.0f} MB: {'met' if ok_mem else 'missed'})"
        f"{'' if agree else ', AND THE INTERVALS DISAGREE'}"
    )
    print(
        "note: ours also runs the randomization test (same resamples), the t-test, effect sizes and wins/losses "
        "for each comparison; scipy only the bootstrap intervals."
    )

    if args.profile:
        prof = HERE / "_data" / "profile_bootstrap_ours.pstats"
        prof.parent.mkdir(parents=True, exist_ok=True)
        run_child(args, "ours", profile=prof)
        print_profile(prof)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
