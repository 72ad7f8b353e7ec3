#!/usr/bin/env python
"""Benchmark: nDCG@10 of one MS MARCO-sized TREC run, ndcg_mlflow against pytrec_eval.

    python benchmarks/bench_ndcg.py [--queries 6980] [--docs 1000] [--workdir benchmarks/_data]
                                    [--repeat N] [--seed 42] [--profile]

1. Generates (once per parameter set, deterministically) a TREC run of
   ``queries x docs`` lines and a graded qrels file in ``--workdir``.
2. Times each tool in its own fresh interpreter (``--child`` mode of this
   script): wall time from just before the tool's import to the mean in hand,
   and the child's peak resident memory (VmHWM from /proc/self/status, which
   is per address space and starts afresh at exec; ru_maxrss as a fallback).
3. Prints one table with the ratios ours / pytrec_eval and a verdict against
   the target: at most half of pytrec_eval's time, with no more peak memory.

``--profile`` additionally runs the ndcg_mlflow child under cProfile and
prints the heaviest functions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
GENERATOR_VERSION = 1
SYSTEM = "bench"
TAG = "bench"
DOC_POOL = 8_841_823  # MS MARCO passage collection size
QID_SPACE = 1_102_400  # MS MARCO query ids are integers below this


# --------------------------------------------------------------------------- child measurements


def _peak_rss_mb() -> tuple[float, str]:
    """Peak resident set of this process in MB: VmHWM if /proc has it, else ru_maxrss."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0, "VmHWM"
    except OSError:
        pass
    import resource

    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (kb / 1024.0 / 1024.0 if sys.platform == "darwin" else kb / 1024.0), "ru_maxrss"


def _maxrss_mb() -> float:
    import resource

    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 / 1024.0 if sys.platform == "darwin" else kb / 1024.0


def _simple_parse(path: str, kind: str) -> dict:
    out: dict = {}
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if not parts:
                continue
            if kind == "qrels":
                qid, _, doc, rel = parts
                out.setdefault(qid, {})[doc] = int(rel)
            else:
                qid, _, doc, _, score, _ = parts
                out.setdefault(qid, {})[doc] = float(score)
    return out


def child_pytrec(run: str, qrels: str) -> dict:
    t0 = time.perf_counter()
    import pytrec_eval

    t_import = time.perf_counter()
    if hasattr(pytrec_eval, "parse_qrel") and hasattr(pytrec_eval, "parse_run"):
        with open(qrels) as fh:
            qrel = pytrec_eval.parse_qrel(fh)
        with open(run) as fh:
            runs = pytrec_eval.parse_run(fh)
        parser = "pytrec_eval.parse_qrel/parse_run"
    else:
        qrel = _simple_parse(qrels, "qrels")
        runs = _simple_parse(run, "run")
        parser = "python dict parser"
    t_read = time.perf_counter()
    evaluator = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut.10"})
    res = evaluator.evaluate(runs)
    values = [m["ndcg_cut_10"] for m in res.values()]
    import math

    mean = math.fsum(values) / len(values) if values else float("nan")
    t_end = time.perf_counter()
    return {"tool": "pytrec_eval", "mean": mean, "n_queries": len(values), "parser": parser,
            "import_s": t_import - t0, "read_s": t_read - t_import, "compute_s": t_end - t_read,
            "seconds": t_end - t0}


def bench_spec(run: str, qrels: str) -> dict:
    return {
        "spec_version": 1,
        "name": "bench-ndcg",
        "metric": {
            "gain": "linear",
            "cutoffs": [10],
            "discount": "log2",
            "ties": "id_descending",  # trec_eval breaks score ties by doc id, descending
            "ideal": "judged_catalog",
            "empty_ideal": "zero",
            "unjudged": "zero",
            "missing_queries": "exclude",  # trec_eval only scores queries present in the run
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": Path(qrels).name, "systems": {SYSTEM: Path(run).name}},
    }


def child_ours(run: str, qrels: str) -> dict:
    t0 = time.perf_counter()
    import ndcg_mlflow

    t_import = time.perf_counter()
    marks: dict[str, float] = {}

    def progress(msg: str) -> None:
        marks[msg.split()[0]] = time.perf_counter()

    res = ndcg_mlflow.evaluate(bench_spec(run, qrels), base_dir=str(Path(run).parent), progress=progress)
    mean = res.mean(SYSTEM, 10)
    n = res.systems[SYSTEM].means["ndcg_at_10"]["n_evaluated"]
    t_end = time.perf_counter()
    t_reading = marks.get("reading", t_import)
    t_computing = marks.get("computing", t_reading)
    return {"tool": "ndcg_mlflow", "mean": mean, "n_queries": n,
            "import_s": t_import - t0,
            "qrels_s": t_reading - t_import,  # spec + qrels read + judged index
            "read_s": t_computing - t_reading,  # run read + sha256 + join to judgments
            "compute_s": t_end - t_computing,  # kernel + means
            "seconds": t_end - t0}


def child_main(args: argparse.Namespace) -> None:
    if args.child == "pytrec":
        out = child_pytrec(args.run, args.qrels)
    else:
        out = child_ours(args.run, args.qrels)
    out["peak_rss_mb"], out["rss_source"] = _peak_rss_mb()
    out["ru_maxrss_mb"] = _maxrss_mb()
    print("BENCH_RESULT " + json.dumps(out), flush=True)


# --------------------------------------------------------------------------- data generation


def dataset_paths(workdir: Path, queries: int, docs: int, seed: int) -> tuple[Path, Path, Path]:
    stem = f"msmarco_like_q{queries}_d{docs}_s{seed}"
    return workdir / f"{stem}.run", workdir / f"{stem}.qrels", workdir / f"{stem}.json"


def _params(queries: int, docs: int, seed: int) -> dict:
    return {"generator_version": GENERATOR_VERSION, "queries": queries, "docs": docs, "seed": seed,
            "doc_pool": DOC_POOL}


def ensure_data(workdir: Path, queries: int, docs: int, seed: int) -> tuple[Path, Path, dict]:
    run_path, qrels_path, manifest_path = dataset_paths(workdir, queries, docs, seed)
    params = _params(queries, docs, seed)
    if manifest_path.is_file() and run_path.is_file() and qrels_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError:
            manifest = {}
        if (manifest.get("params") == params and manifest.get("run_bytes") == run_path.stat().st_size
                and manifest.get("qrels_bytes") == qrels_path.stat().st_size):
            print(f"data: reusing {run_path.name} ({manifest['run_lines']:,} lines) and {qrels_path.name} "
                  f"({manifest['qrels_lines']:,} lines)")
            return run_path, qrels_path, manifest
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    stats = generate(run_path, qrels_path, queries, docs, seed)
    manifest = {"params": params, "run_bytes": run_path.stat().st_size,
                "qrels_bytes": qrels_path.stat().st_size, **stats,
                "generated_in_s": round(time.perf_counter() - t0, 2)}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"data: generated {run_path.name} ({stats['run_lines']:,} lines, {manifest['run_bytes'] / 1e6:.0f} MB) "
          f"and {qrels_path.name} ({stats['qrels_lines']:,} lines) in {manifest['generated_in_s']:.1f} s")
    return run_path, qrels_path, manifest


def _strcmp_key(n):
    """An int64 key ordering non-negative integers (< 10**7) as their decimal strings compare (strcmp)."""
    import numpy as np

    ndig = np.ones(n.shape, dtype=np.int64)
    for p in range(1, 8):
        ndig += n >= 10 ** p
    return n * 10 ** (7 - ndig) * 8 + ndig


def _write_joined(fh, columns) -> None:
    """Write rows whose fields are Arrow string arrays/scalars, one space between fields."""
    import numpy as np
    import pyarrow.compute as pc

    lines = pc.binary_join_element_wise(*columns, " ")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    data = lines.buffers()[2]
    start, stop = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    fh.write(memoryview(data)[start:stop])


def _int_strings(values):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pa.array(np.ascontiguousarray(values, dtype=np.int64)), pa.string())


def generate(run_path: Path, qrels_path: Path, n_queries: int, n_docs: int, seed: int) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if n_docs > DOC_POOL // 4:
        raise SystemExit(f"--docs must be at most {DOC_POOL // 4}")
    if n_queries > QID_SPACE:
        raise SystemExit(f"--queries must be at most {QID_SPACE}")
    rng = np.random.default_rng(seed)
    qids = np.sort(rng.choice(QID_SPACE, size=n_queries, replace=False)).astype(np.int64)

    # documents: n_docs distinct passage ids per query
    docs = rng.integers(0, DOC_POOL, size=(n_queries, n_docs), dtype=np.int64)
    for _ in range(100):
        srt = np.sort(docs, axis=1)
        bad_rows = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
        if not bad_rows.size:
            break
        for r in bad_rows:
            docs[r] = rng.choice(DOC_POOL, size=n_docs, replace=False)
    del srt

    # scores: descending, 6 decimals (as integer micro-units), a few exact ties
    top = rng.uniform(18.0, 40.0, size=(n_queries, 1))
    steps = rng.exponential(12.0 / max(n_docs, 1), size=(n_queries, n_docs))
    steps[rng.random(size=steps.shape) < 0.01] = 0.0  # ~1% exact ties, as BM25 runs have
    micro = np.rint((top - np.cumsum(steps, axis=1)) * 1e6).astype(np.int64)
    micro = np.maximum(micro, 1)
    del steps
    # file order = trec_eval's order: score descending, then doc id (as a string) descending
    skey = _strcmp_key(docs)
    order = np.argsort(-micro * (1 << 27) - skey, axis=1, kind="stable")
    docs = np.take_along_axis(docs, order, axis=1)
    micro = np.take_along_axis(micro, order, axis=1)
    del skey, order
    n_ties = int(np.count_nonzero(micro[:, 1:] == micro[:, :-1]))

    # judgments: 1-40 per query, ~85% among the run's documents (biased to the top), grades 0-3
    n_judged = np.minimum(rng.geometric(0.12, size=n_queries), 40)
    qrel_q, qrel_d, qrel_g = [], [], []
    outside = 0
    for i in range(n_queries):
        k = int(n_judged[i])
        from_run = int(rng.binomial(k, 0.85))
        pos = np.unique(np.minimum(rng.exponential(60.0, size=from_run).astype(np.int64), n_docs - 1))
        in_run = docs[i, pos]
        extra = rng.integers(0, DOC_POOL, size=k - pos.size)
        extra = np.setdiff1d(np.unique(extra), docs[i], assume_unique=False)
        outside += extra.size
        chosen = np.concatenate([in_run, extra])
        top_bias = np.concatenate([pos < 10, np.zeros(extra.size, dtype=bool)])
        grades = np.where(top_bias, rng.choice(4, size=chosen.size, p=[0.15, 0.3, 0.3, 0.25]),
                          rng.choice(4, size=chosen.size, p=[0.4, 0.3, 0.2, 0.1]))
        shuffle = rng.permutation(chosen.size)  # file order unrelated to rank
        chosen, grades = chosen[shuffle], grades[shuffle]
        qrel_q.append(np.full(chosen.size, qids[i]))
        qrel_d.append(chosen)
        qrel_g.append(grades)
    qrel_q, qrel_d, qrel_g = (np.concatenate(x) for x in (qrel_q, qrel_d, qrel_g))

    tmp_run = run_path.with_suffix(".run.tmp")
    chunk = max(1, 400_000 // max(n_docs, 1))
    qid_s = np.asarray(_int_strings(qids).to_pylist(), dtype=object)
    ranks_s = _int_strings(np.arange(1, n_docs + 1))
    with open(tmp_run, "wb", buffering=1 << 22) as fh:
        for a in range(0, n_queries, chunk):
            b = min(a + chunk, n_queries)
            rows = (b - a) * n_docs
            m = micro[a:b].ravel()
            score = pc.binary_join_element_wise(_int_strings(m // 1_000_000),
                                                pc.utf8_lpad(_int_strings(m % 1_000_000), width=6, padding="0"),
                                                ".")
            q = pa.array(np.repeat(qid_s[a:b], n_docs), type=pa.string())
            rank = pa.concat_arrays([ranks_s] * (b - a)) if b > a else ranks_s
            assert len(q) == rows
            _write_joined(fh, [q, "Q0", _int_strings(docs[a:b].ravel()), rank, score, TAG + "\n"])
    os.replace(tmp_run, run_path)

    tmp_qrels = qrels_path.with_suffix(".qrels.tmp")
    with open(tmp_qrels, "wb") as fh:
        _write_joined(fh, [_int_strings(qrel_q), "0", _int_strings(qrel_d),
                           pc.binary_join_element_wise(_int_strings(qrel_g), "\n", "")])
    os.replace(tmp_qrels, qrels_path)
    return {"run_lines": n_queries * n_docs, "qrels_lines": int(qrel_q.size),
            "qrels_outside_run": int(outside), "run_score_ties": n_ties,
            "queries_all_zero_grades": int(n_queries - np.unique(qrel_q[qrel_g > 0]).size)}


# --------------------------------------------------------------------------- driver


def run_child(tool: str, run: Path, qrels: Path, profile: bool = False) -> dict:
    from _child import run_child as run_fresh

    return run_fresh(__file__, ["--child", tool, "--run", str(run), "--qrels", str(qrels)], tool,
                     run.parent / f"profile_{tool}.pstats" if profile else None)


def _warm_cache(*paths: Path) -> None:
    for p in paths:
        with open(p, "rb") as fh:
            while fh.read(1 << 24):
                pass


def print_profile(path: Path, limit: int = 25) -> None:
    import pstats

    print(f"\n--- cProfile of the ndcg_mlflow child ({path}) ---")
    stats = pstats.Stats(str(path))
    stats.sort_stats("cumulative").print_stats(r"ndcg_mlflow", limit)
    stats.sort_stats("tottime").print_stats(limit)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=6980)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--workdir", type=Path, default=HERE / "_data")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=1, help="measure each tool N times, report the best")
    ap.add_argument("--profile", action="store_true", help="also run the ndcg_mlflow child under cProfile")
    ap.add_argument("--child", choices=("pytrec", "ours"), help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--qrels", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(args)
        return 0

    workdir = args.workdir if args.workdir.is_absolute() else Path.cwd() / args.workdir
    run, qrels, manifest = ensure_data(workdir, args.queries, args.docs, args.seed)
    print(f"data: {manifest.get('qrels_outside_run', '?')} judged docs not in the run, "
          f"{manifest.get('run_score_ties', '?')} tied adjacent scores, "
          f"{manifest.get('queries_all_zero_grades', '?')} queries with no relevant doc")
    _warm_cache(run, qrels)

    best: dict[str, dict] = {}
    for i in range(max(1, args.repeat)):
        for tool in ("pytrec", "ours"):
            r = run_child(tool, run, qrels)
            print(f"  [{i + 1}/{args.repeat}] {r['tool']:<12} {r['seconds']:7.2f} s  "
                  f"{r['peak_rss_mb']:7.0f} MB  mean={r['mean']:.12f}", flush=True)
            b = best.setdefault(tool, dict(r))
            for key in ("seconds", "process_s", "peak_rss_mb"):
                b[key] = min(b[key], r[key])
            if r["seconds"] <= b.get("_best_seconds", float("inf")):
                b["_best_seconds"] = r["seconds"]
                for key in ("import_s", "read_s", "compute_s", "qrels_s"):
                    if key in r:
                        b[key] = r[key]

    p, o = best["pytrec"], best["ours"]
    t_ratio = o["seconds"] / p["seconds"]
    m_ratio = o["peak_rss_mb"] / p["peak_rss_mb"]
    print()
    print(f"nDCG@10, {args.queries:,} queries x {args.docs:,} docs "
          f"(best of {args.repeat}; seconds = import + read + compute inside a fresh interpreter; "
          f"peak RSS = {o['rss_source']})")
    header = f"{'tool':<14}{'seconds':>10}{'process s':>11}{'peak RSS MB':>13}   breakdown"
    print(header)
    print("-" * len(header) + "-" * 40)
    print(f"{'pytrec_eval':<14}{p['seconds']:>10.2f}{p['process_s']:>11.2f}{p['peak_rss_mb']:>13.0f}   "
          f"import {p['import_s']:.2f} / parse {p['read_s']:.2f} / evaluate {p['compute_s']:.2f}")
    print(f"{'ndcg_mlflow':<14}{o['seconds']:>10.2f}{o['process_s']:>11.2f}{o['peak_rss_mb']:>13.0f}   "
          f"import {o['import_s']:.2f} / qrels {o['qrels_s']:.2f} / run {o['read_s']:.2f} / "
          f"compute {o['compute_s']:.2f}")
    print(f"{'ours/pytrec':<14}{t_ratio:>10.2f}{o['process_s'] / p['process_s']:>11.2f}{m_ratio:>13.2f}")
    print()
    diff = abs(o["mean"] - p["mean"])
    print(f"mean nDCG@10: pytrec_eval {p['mean']:.15f} over {p['n_queries']} queries; "
          f"ndcg_mlflow {o['mean']:.15f} over {o['n_queries']} queries; |diff| = {diff:.3g}")
    agree = diff <= 1e-9 and p["n_queries"] == o["n_queries"]
    if not agree:
        print("!" * 78)
        print("!!! MISMATCH: the two means (or query counts) do NOT agree to 1e-9 !!!")
        print("!" * 78)
    ok_time, ok_mem = t_ratio <= 0.5, m_ratio <= 1.0
    verdict = "PASS" if ok_time and ok_mem else "FAIL"
    print(f"verdict: {verdict} - time {t_ratio:.2f}x of pytrec_eval (target <= 0.50: "
          f"{'met' if ok_time else 'missed'}), peak memory {m_ratio:.2f}x (target <= 1.00: "
          f"{'met' if ok_mem else 'missed'}){'' if agree else ', AND THE MEANS DISAGREE'}")

    if args.profile:
        run_child("ours", run, qrels, profile=True)
        print_profile(workdir / "profile_ours.pstats")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
