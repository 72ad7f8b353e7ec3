#!/usr/bin/env python
"""Soak test: many consecutive evaluations in ONE process, each evaluated, written and logged to one SQLite
MLflow store, watching the process for leaks.

    python benchmarks/soak.py [--iterations 50] [--queries 60] [--systems 2] [--workdir DIR] [--keep]

Each iteration runs the Python API exactly as ``ndcg-mlflow run`` does:
``ndcg_mlflow.evaluate`` -> ``ndcg_mlflow.outputs.write_outputs`` -> ``ndcg_mlflow.tracking.log_evaluation``
(bootstrap intervals, a paired comparison, the report and its figures included), on small demo-like data
generated deterministically into the work folder. After each iteration (and a ``gc.collect()``) it prints
the resident set size (VmRSS), the number of open file descriptors (``/proc/self/fd``) and of threads.

Verdict: the mean of the last 10 iterations against the mean of iterations 10-20 (after warm-up: imports,
the store's first use). RSS may grow by at most max(16 MB, 5 %) and file
descriptors and threads by at most 2; the exit status is 1 when any of them grows more.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def threads() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def make_data(folder: Path, n_queries: int, n_systems: int, seed: int = 7) -> Path:
    """Demo-like data: graded judgments (0-3) of 8-30 documents per query, and ``n_systems`` runs of 50
    documents per query whose quality rises with the system index; a spec with intervals and a comparison."""
    import numpy as np

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    qrels, runs = [], [[] for _ in range(n_systems)]
    for q in range(1, n_queries + 1):
        qid = f"q{q:04d}"
        n_judged = int(rng.integers(8, 31))
        docs = rng.choice(5000, size=n_judged + 60, replace=False)
        judged, others = docs[:n_judged], docs[n_judged:]
        grades = rng.choice([0, 1, 2, 3], size=n_judged, p=[0.5, 0.25, 0.15, 0.1])
        qrels += [f"{qid} 0 P-{d:05d} {g}" for d, g in zip(judged, grades)]
        for s in range(n_systems):
            pool = np.concatenate([judged, others])[:50]
            skill = 0.5 + 0.5 * s / max(n_systems - 1, 1)
            score = skill * np.r_[grades, np.zeros(pool.size - n_judged)] + rng.normal(0, 1, pool.size)
            order = np.argsort(-score, kind="stable")
            runs[s] += [f"{qid} Q0 P-{pool[i]:05d} {r} {score[i]:.6f} sys{s}" for r, i in enumerate(order, 1)]
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
    systems = []
    for s, lines in enumerate(runs):
        (folder / f"sys{s}.run").write_text("\n".join(lines) + "\n")
        systems.append(f"    sys{s}: sys{s}.run")
    spec = folder / "soak.yaml"
    spec.write_text(
        "spec_version: 1\nname: soak\n"
        "metric: {gain: exponential, cutoffs: [5, 10, all], discount: log2, ties: displayed_order,\n"
        "         ideal: judged_catalog, empty_ideal: exclude, unjudged: zero, missing_queries: zero}\n"
        "queries: {weights: uniform}\n"
        "data:\n  qrels: qrels.txt\n  systems:\n" + "\n".join(systems) + "\n"
        "uncertainty: {resamples: 1000, confidence: 0.95, method: bca, seed: 1}\n"
        "comparison: {baseline: sys0, test: both, correction: holm, wins_losses: 5, tie_tolerance: 1.0e-9}\n"
        "mlflow: {experiment: soak}\n"
    )
    return spec


def verdict(name: str, series: list[float], allowed: float) -> tuple[bool, str]:
    base = statistics.mean(series[9:20])  # iterations 10..20
    last = statistics.mean(series[-10:])
    growth = last - base
    ok = growth <= allowed
    return ok, (
        f"{name:<8} iterations 10-20: {base:9.2f}   last 10: {last:9.2f}   growth {growth:+8.2f} "
        f"(allowed {allowed:.2f})  {'ok' if ok else 'GROWS'}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--systems", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    if args.iterations < 30:
        parser.error("--iterations must be at least 30 (the verdict compares iterations 10-20 with the last 10)")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="ndcg-soak-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    for key in [k for k in os.environ if k.startswith("MLFLOW_TRACKING_")]:
        del os.environ[key]
    os.chdir(work)  # the SQLite store's default artifact root (./mlruns) lands here too
    spec = make_data(work / "data", args.queries, args.systems)
    uri = f"sqlite:///{work / 'soak.db'}"

    import ndcg_mlflow
    from ndcg_mlflow.outputs import write_outputs
    from ndcg_mlflow.tracking import log_evaluation

    print(
        f"soak: {args.iterations} evaluations of {args.systems} systems x {args.queries} queries -> {uri}", flush=True
    )
    print(f"{'iter':>4} {'seconds':>8} {'rss_MB':>8} {'fds':>5} {'threads':>7}  parent run", flush=True)
    rss, fds, ths, secs = [], [], [], []
    for i in range(1, args.iterations + 1):
        start = time.perf_counter()
        result = ndcg_mlflow.evaluate(spec)
        out = write_outputs(result, work / "out" / f"{i:03d}")
        logged = log_evaluation(result, out, tracking_uri=uri)
        del result
        gc.collect()
        secs.append(time.perf_counter() - start)
        rss.append(rss_mb())
        fds.append(open_fds())
        ths.append(threads())
        print(f"{i:4d} {secs[-1]:8.2f} {rss[-1]:8.1f} {fds[-1]:5d} {ths[-1]:7d}  {logged.parent_run_id}", flush=True)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("soak")
    runs = client.search_runs([exp.experiment_id], max_results=10_000)
    finished = sum(r.info.status == "FINISHED" for r in runs)
    print(f"\nstore: {len(runs)} runs ({finished} FINISHED), expected {args.iterations * (1 + args.systems)}")
    print(
        f"time per iteration: first {secs[0]:.2f} s, median {statistics.median(secs):.2f} s, "
        f"last 10 mean {statistics.mean(secs[-10:]):.2f} s"
    )

    base_rss = statistics.mean(rss[9:20])
    results = [verdict("rss_MB", rss, max(16.0, 0.05 * base_rss)), verdict("fds", fds, 2), verdict("threads", ths, 2)]
    for _, line in results:
        print(line)
    ok = all(r[0] for r in results) and len(runs) == args.iterations * (1 + args.systems)
    print(
        "verdict:",
        "no growth: no leak of memory, file descriptors or threads across evaluations"
        if ok
        else "GROWTH or missing runs: see above",
    )
    if not args.keep and args.workdir is None:
        os.chdir("/")
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
