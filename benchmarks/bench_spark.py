#!/usr/bin/env python
"""Benchmark: the Spark engine on ``local[2]`` against the local engine, and a run beyond the local engine's budget.

    python benchmarks/bench_spark.py [--case 7m|50m|plan|profile|cli|all] [--workdir benchmarks/_data]
                                     [--driver-memory 1g] [--queries-50m 100000] [--docs-50m 500] [--keep]
                                     [--systems 1|2] [--java-options OPTIONS] [--cds]

* ``7m``: the 7M-line MS MARCO-like run of ``bench_ndcg.py`` (6,980 queries x 1,000 documents, generated once
  into ``--workdir``, as Parquet): nDCG@10 by the local engine, then by the Spark engine on ``local[2]`` with
  the top-K pre-filter and without it (``prefilter=False``), and with the pre-filter on the same run as TREC
  text (the local reader in a Spark task, pre-filtered there), each in a fresh process. The numbers of the four
  must be equal (the script stops otherwise).
* ``50m``: a Parquet folder of ``queries x docs`` rows (default 100,000 x 500 = 50M rows) and its judgments,
  generated on disk, evaluated by the Spark engine with ``spark.driver.memory`` bounded (``--driver-memory``);
  deleted afterwards unless ``--keep``.
* ``plan``: the 7M-row run as Parquet and its judgments as Parquet, in one ``local[2]`` session (driver 2 GB
  unless ``--driver-memory`` says otherwise, 8 shuffle partitions, UI off): a plain Spark SQL plan with window
  functions and ``ndcg_mlflow.evaluate(spec, engine=Spark(session))`` with gdeval's rules at cutoff 10
  (exponential gain, ties by document id descending, empty ideals excluded, missing queries 0), alternated, twice
  each: the best time of each, their ratio, the two means and their difference, and the CPU seconds of the
  driver's Python, the JVM and the Python workers in each (``_spark_plan.py``). With ``--systems 2``, a second
  run beside the first (its scores moved by N(0, 0.5) noise) and both systems in each: in the plan, the per-query
  nDCG of each joined by query (the two means and the mean paired difference, one job); in the engine, the demo's
  statistics (10,000 BCa bootstrap resamples, a paired randomization test against the first, Holm's correction).
* ``cli``: ``ndcg-mlflow run configs/demo.yaml --timings`` with ``--engine local`` and ``--engine spark``
  (``spark``: the classic session the command starts), each in a fresh process, alternated, twice each, logging
  into one SQLite store migrated beforehand: the phases of the faster of each engine's two runs (session start,
  read, scoring, statistics, outputs, logging, other) side by side, and the ratio of the Spark run's own part
  (its total less the session start) to the local run's total; alternated with them, twice, a plain Spark SQL plan
  of the demo's numbers in a fresh process and session (each run by Spark's CSV reader, its per-query nDCG@5, @10
  and @all by window functions, to the driver as Arrow; its means of nDCG@10 checked against the local engine's):
  its session start, its seconds beyond it, and the ratios of the engine's part to it and of it to the local run;
  and alternated with them, twice, a fresh session's first job alone (``spark.range(1).count()``), the least any
  Spark program pays beyond its session start. ``--java-options`` gives every Spark JVM measured those options
  (``PYSPARK_SUBMIT_ARGS``). With ``--cds`` an unmeasured run of the Spark command writes the classes its JVM
  loaded to a class-data-sharing archive (``-XX:ArchiveClassesAtExit``, Java 17's dynamic archive), and every
  Spark JVM measured starts from it (``-XX:SharedArchiveFile``): the engine's, the plain plan's, the first job's.
* ``profile``: the engine's run on that data, after a warm-up run: the driver's steps timed, the stages' wall
  times (``statusTracker``), CPU by process, the read and the pre-filter run alone, a cProfile of the driver
  (written to ``--workdir``, with the physical plans).

For each measured process: wall time from the start of the process to the result in hand, and the peak resident
memory of its process tree sampled every 0.2 s: the Python driver, the JVM (on ``local[2]`` the driver and the
executors share it) and the Python workers the executors start (``pyspark.daemon``), each a peak of the sum over
its processes. For Spark, the shuffle written (bytes and records, over every stage, from Spark's REST status
API) and the run rows the query buckets received (``engine_info``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SPEC = {
    "spec_version": 1,
    "name": "bench-spark",
    "metric": {
        "gain": "linear",
        "cutoffs": [10],
        "discount": "log2",
        "ties": "id_descending",
        "ideal": "judged_catalog",
        "empty_ideal": "zero",
        "unjudged": "zero",
        "missing_queries": "zero",
    },
    "queries": {"weights": "uniform"},
}


# --------------------------------------------------------------------------- the measured process


def child(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    sys.path.insert(0, str(REPO))
    import ndcg_mlflow

    spec = dict(SPEC, data={"qrels": args.qrels, "systems": {"bench": args.run}})
    out: dict = {}
    if args.child == "local":
        result = ndcg_mlflow.evaluate(spec)
    else:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("bench-spark")
            .config("spark.driver.memory", args.driver_memory)
            .config("spark.ui.enabled", "true")
            .config("spark.ui.port", "4321")
            .config("spark.port.maxRetries", "50")
            .config("spark.sql.shuffle.partitions", "8")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        result = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark, prefilter=args.child == "spark"))
        out["engine_info"] = result.engine_info
        out.update(_shuffle(spark))
    out.update(
        seconds=time.perf_counter() - t0,
        mean=result.mean("bench", 10),
        n_queries=len(result.query_ids),
        per_query_sha=_digest(result),
    )
    print("RESULT " + json.dumps(out), flush=True)


def _digest(result) -> str:
    import hashlib

    pq = result.per_query
    return hashlib.sha256(pq.to_csv(index=False).encode()).hexdigest()


def _shuffle(spark) -> dict:
    """Shuffle bytes and records written over every stage of the application (Spark's REST status API)."""
    import urllib.request

    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    stages = json.loads(urllib.request.urlopen(url, timeout=30).read())
    return {
        "shuffle_write_bytes": sum(s.get("shuffleWriteBytes", 0) for s in stages),
        "shuffle_write_records": sum(s.get("shuffleWriteRecords", 0) for s in stages),
    }


# --------------------------------------------------------------------------- memory of a process tree


def _tree(root: int) -> list[tuple[int, str, int]]:
    """(pid, command line, resident kB) of ``root`` and its descendants, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        todo += parents.get(pid, [])
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
        out.append((pid, cmd, rss))
    return out


def measure(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Run this script's child mode with ``argv`` (in ``env``, else this process's environment) and sample its
    tree's memory; its RESULT line, with peaks."""
    proc = subprocess.Popen(
        [sys.executable, __file__, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    peaks = {"driver_python_mb": 0.0, "jvm_mb": 0.0, "python_workers_mb": 0.0, "total_mb": 0.0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            groups = {"driver_python_mb": 0, "jvm_mb": 0, "python_workers_mb": 0}
            for pid, cmd, rss in _tree(proc.pid):
                key = (
                    "driver_python_mb"
                    if pid == proc.pid
                    else "jvm_mb"
                    if "java" in cmd.split(" ")[0]
                    else "python_workers_mb"
                )
                groups[key] += rss
            for key, kb in groups.items():
                peaks[key] = max(peaks[key], kb / 1024)
            peaks["total_mb"] = max(peaks["total_mb"], sum(groups.values()) / 1024)
            done.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    stdout, stderr = proc.communicate()
    done.set()
    thread.join()
    lines = [x for x in stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the measured process failed ({proc.returncode}):\n{stderr[-3000:]}")
    return {**json.loads(lines[-1][len("RESULT ") :]), **peaks}


def show(name: str, r: dict) -> None:
    extra = ""
    if "shuffle_write_bytes" in r:
        info = r["engine_info"]["systems"]["bench"]
        extra = (
            f"  shuffle {r['shuffle_write_bytes'] / 1e6:8.1f} MB, {r['shuffle_write_records']:,} records; "
            f"rows into the buckets {info['rows_shuffled']:,} of {info['rows']:,}; read by {info['read_by']}"
        )
    print(
        f"  {name:<22} {r['seconds']:7.1f} s  peak: total {r['total_mb']:6.0f} MB (driver Python "
        f"{r['driver_python_mb']:5.0f}, JVM {r['jvm_mb']:5.0f}, Python workers {r['python_workers_mb']:5.0f})"
        f"{extra}",
        flush=True,
    )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- the cases


def case_7m(workdir: Path, driver_memory: str) -> None:
    sys.path.insert(0, str(HERE))
    from bench_ndcg import ensure_data, ensure_parquet

    run, qrels, _ = ensure_data(workdir, 6980, 1000, 42)
    parquet = ensure_parquet(run)
    print(f"7M-line run ({parquet.name}), nDCG@10; load average {load()}")
    results = {}
    for name, mode, source in (
        ("local engine", "local", parquet),
        ("spark local[2] prefilter", "spark", parquet),
        ("spark local[2] full", "spark-full", parquet),
        ("spark, TREC text", "spark", run),
    ):
        results[name] = r = measure(
            ["--child", mode, "--run", str(source), "--qrels", str(qrels), "--driver-memory", driver_memory]
        )
        show(name, r)
    digests = {r["per_query_sha"] for r in results.values()}
    if len(digests) != 1:
        raise SystemExit("the per-query tables differ between the engines")
    print(
        f"  the same per-query table on the {len(results)} (mean {results['local engine']['mean']:.12f}); "
        f"load average {load()}"
    )


def generate_large(folder: Path, qrels: Path, n_queries: int, n_docs: int, seed: int = 7) -> int:
    """A Parquet folder of n_queries x n_docs run rows (a query's rows together, 20 files) and judgments (about
    12 per query, most among the run's top documents) as Parquet."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = 20
    per_file = -(-n_queries // files)
    jq, jd, jg = [], [], []
    for f in range(files):
        a, b = f * per_file, min((f + 1) * per_file, n_queries)
        if a >= b:
            break
        n = b - a
        q = np.repeat(np.arange(a, b, dtype=np.int64), n_docs)
        docs = rng.integers(0, 50_000_000, size=(n, n_docs), dtype=np.int64)
        docs = docs + (np.arange(n_docs, dtype=np.int64) * 50_000_000)[None, :]  # distinct within a query
        score = np.round(30 - np.cumsum(rng.exponential(0.05, size=(n, n_docs)), axis=1), 3)
        table = pa.table(
            {
                "query_id": pc.cast(pa.array(q), pa.string()),
                "doc_id": pc.cast(pa.array(docs.ravel()), pa.string()),
                "score": pa.array(score.ravel()),
            }
        )
        pq.write_table(table, folder / f"part-{f:03d}.parquet")
        k = 12
        pos = np.minimum(rng.exponential(40.0, size=(n, k)).astype(np.int64), n_docs - 1)
        pos = np.sort(pos, axis=1)
        keep = np.c_[np.ones(n, dtype=bool), pos[:, 1:] != pos[:, :-1]]
        rows = np.repeat(np.arange(n), k)[keep.ravel()]
        jq.append(rows + a)
        jd.append(docs[rows, pos[keep]])
        jg.append(rng.choice(4, size=rows.size, p=[0.3, 0.3, 0.25, 0.15]))
    qt = pa.table(
        {
            "query_id": pc.cast(pa.array(np.concatenate(jq)), pa.string()),
            "doc_id": pc.cast(pa.array(np.concatenate(jd)), pa.string()),
            "grade": pa.array(np.concatenate(jg).astype(np.int64)),
        }
    )
    pq.write_table(qt, qrels)
    return qt.num_rows


def case_50m(workdir: Path, driver_memory: str, n_queries: int, n_docs: int, keep: bool) -> None:
    folder = workdir / f"large_q{n_queries}_d{n_docs}"
    qrels = workdir / f"large_q{n_queries}_d{n_docs}.qrels.parquet"
    free = shutil.disk_usage(workdir if workdir.exists() else workdir.parent).free
    print(f"{n_queries * n_docs:,} rows as Parquet; {free / 1e9:.0f} GB free; load average {load()}")
    if not folder.is_dir() or not qrels.is_file():
        t0 = time.perf_counter()
        n_judged = generate_large(folder, qrels, n_queries, n_docs)
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(
            f"  generated in {time.perf_counter() - t0:.0f} s: {size / 1e9:.2f} GB of Parquet, {n_judged:,} judgments"
        )
    try:
        r = measure(["--child", "spark", "--run", str(folder), "--qrels", str(qrels), "--driver-memory", driver_memory])
        show(f"spark local[2] ({driver_memory} driver)", r)
        print(f"  {r['n_queries']:,} queries, mean nDCG@10 {r['mean']:.6f}; load average {load()}")
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
            qrels.unlink(missing_ok=True)


def case_plan(workdir: Path, driver_memory: str, mode: str, systems: int = 1) -> None:
    sys.path.insert(0, str(HERE))
    from _spark_plan import ensure_qrels_parquet, ensure_second_run
    from bench_ndcg import ensure_data, ensure_parquet

    run, qrels, _ = ensure_data(workdir, 6980, 1000, 42)
    parquet, qrels_parquet = ensure_parquet(run), ensure_qrels_parquet(qrels)
    runs = str(parquet) if systems == 1 else f"{parquet},{ensure_second_run(parquet)}"
    what = "one system" if systems == 1 else "two systems, intervals and a paired comparison"
    print(f"7M-row runs and judgments as Parquet, nDCG@10 (gdeval rules), {what}; load average {load()}", flush=True)
    r = measure(["--child", mode, "--run", runs, "--qrels", str(qrels_parquet), "--driver-memory", driver_memory])
    peaks = (
        f"peak: total {r['total_mb']:.0f} MB (driver Python {r['driver_python_mb']:.0f}, JVM {r['jvm_mb']:.0f}, "
        f"Python workers {r['python_workers_mb']:.0f})"
    )
    if mode == "plan":
        plan, engine = min(r["times"]["plan"]), min(r["times"]["engine"])
        print(f"  session start {r['session_s']:.1f} s (driver {driver_memory}, local[2], 8 shuffle partitions)")
        for name in ("plan", "engine"):
            runs = ", ".join(f"{t:.2f} s" for t in r["times"][name])
            cpu = "; ".join(
                f"driver {c['driver']:.1f}, JVM {c['jvm']:.1f}, workers {c['workers']:.1f}" for c in r["cpu"][name]
            )
            print(f"  {name:<7} runs {runs} (best {min(r['times'][name]):.2f} s); CPU s: {cpu}")
        print(f"  engine / plan: {engine / plan:.2f}x (best of two each)")
        m = r["means"]
        if systems == 1:
            diff = m["engine"] - m["plan"]
            print(f"  mean nDCG@10: plan {m['plan']!r}, engine {m['engine']!r}, difference {diff:.3g}")
        else:
            for i, label in enumerate(("mean nDCG@10, first", "mean nDCG@10, second", "mean paired difference")):
                diff = m["engine"][i] - m["plan"][i]
                print(f"  {label}: plan {m['plan'][i]!r}, engine {m['engine'][i]!r}, difference {diff:.3g}")
    else:
        print(f"  engine run {r['total_s']:.2f} s (after a warm-up run), mean {r['mean']!r}")
        print("  driver steps:")
        for label, seconds in r["steps"].items():
            print(f"    {label:<66} {seconds:6.2f} s")
        print("  stages (wall time, from the status tracker):")
        for s in r["stages"]:
            print(f"    {s['stage']:>4} {s['name'][:60]:<60} {s['tasks']:>4} tasks {s['seconds']:6.2f} s")
        print(f"  CPU s: {r['cpu']}")
        print("  parts run alone (noop sink):")
        for label, p in r["parts"].items():
            print(f"    {label:<52} {p['seconds']:6.2f} s  CPU s {p['cpu']}")
        print(
            f"  rows kept (count, sum of _extra): {r['kept']}; "
            f"query rows differing in: {r['same_query_rows'] or 'none'}"
        )
        print(f"  plans: {r['explain']}; driver cProfile: {r['cprofile']}")
    print(f"  {peaks}; load average {load()}")


def jvm_env(java_options: str | None) -> dict[str, str]:
    """This process's environment, with the package on the path and ``java_options`` (if any) given to the driver
    JVM of a session pyspark starts (``PYSPARK_SUBMIT_ARGS``)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if java_options:
        env["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options '{java_options}' pyspark-shell"
    return env


def cli_run(workdir: Path, engine: str, java_options: str | None = None) -> dict[str, float]:
    """``ndcg-mlflow run configs/demo.yaml --timings --quiet --engine ENGINE`` in a fresh process, in ``workdir``
    (its store and output folders there): the phases it printed, in seconds, with ``total``. ``java_options``: the
    driver JVM's options of the session the command starts (``PYSPARK_SUBMIT_ARGS``)."""
    env = jvm_env(java_options)
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "ndcg_mlflow", "run", str(REPO / "configs" / "demo.yaml"), "--timings", "--quiet"]
    cmd += ["--engine", engine, "--tracking-uri", uri, "--out", str(workdir / f"out-{engine}")]
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ndcg-mlflow run --engine {engine} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    lines = proc.stderr.splitlines()
    start = lines.index("where the time went (wall seconds):")
    phases = {}
    for line in lines[start + 1 :]:
        name, _, seconds = line.strip().rpartition(" ")
        phases[name.strip()] = float(seconds)
    return phases


def demo_plan_child() -> None:
    """The plain Spark SQL plan on the demo, in a fresh process and a session started as the command line starts
    it: each system's run read by Spark's CSV reader, its per-query nDCG@5, @10 and @all (the demo's rules:
    2^g - 1, the displayed order, the judged catalog's ideal, empty ideals left out, missing queries 0) by window
    functions, and its rows brought to the driver as Arrow, as the engine brings its per-query rows. Prints the
    session start, the seconds beyond it and each system's mean nDCG@10."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(REPO))
    from ndcg_mlflow.engines.spark import session

    spark = session()
    t1 = time.perf_counter()
    import yaml
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    data = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text(encoding="utf-8"))["data"]
    cutoffs = {"5": 5, "10": 10, "all": None}

    def sums(df: Any, value: Any, prefix: str) -> Any:
        def cut(k: int | None) -> Any:
            return value if k is None else F.when(F.col("rank") <= k, value).otherwise(F.lit(0.0))

        return df.groupBy("query_id").agg(*[F.sum(cut(k)).alias(prefix + c) for c, k in cutoffs.items()])

    def gain(g: Any) -> Any:
        return F.when(g > 0, F.pow(F.lit(2.0), g) - 1).otherwise(F.lit(0.0))

    qrels = spark.read.csv(
        str(REPO / "configs" / data["qrels"]),
        sep="\t",
        header=True,
        schema="query_id string, doc_id string, grade double",
    )
    by_grade = Window.partitionBy("query_id").orderBy(F.desc("grade"))
    ranked = qrels.withColumn("rank", F.row_number().over(by_grade))
    ideal = sums(ranked, gain(F.col("grade")) / F.log2(F.col("rank") + 1), "i").where(F.col("iall") > 0)
    means = {}
    for name, path in data["systems"].items():
        run = spark.read.csv(
            str(REPO / "configs" / path),
            sep=" ",
            schema="query_id string, q0 string, doc_id string, rank long, score double, tag string",
        )
        # the displayed order: the file's order, which its ranks follow
        joined = run.join(qrels, ["query_id", "doc_id"], "left")
        dcg = sums(joined, gain(F.coalesce(F.col("grade"), F.lit(0.0))) / F.log2(F.col("rank") + 1), "d")
        per_query = ideal.join(dcg, "query_id", "left").select(
            "query_id",
            *[(F.coalesce(F.col("d" + c), F.lit(0.0)) / F.col("i" + c)).alias("ndcg" + c) for c in cutoffs],
        )
        rows = per_query.toArrow()
        means[name] = float(sum(rows.column("ndcg10").to_pylist()) / rows.num_rows)
    t2 = time.perf_counter()
    print("RESULT " + json.dumps({"session start": t1 - t0, "beyond": t2 - t1, "means": means}), flush=True)


def first_job_child() -> None:
    """A fresh session started as the command line starts it, and its first job, the least a Spark program runs:
    ``spark.range(1).count()``. Prints the session start and the seconds beyond it."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(REPO))
    from ndcg_mlflow.engines.spark import session

    spark = session()
    t1 = time.perf_counter()
    spark.range(1).count()
    t2 = time.perf_counter()
    print("RESULT " + json.dumps({"session start": t1 - t0, "beyond": t2 - t1}), flush=True)


def _options(*options: str | None) -> str | None:
    return " ".join(o for o in options if o) or None


def case_cli(workdir: Path, java_options: str | None = None, cds: bool = False) -> None:
    import tempfile

    jvm = f" (Spark's driver JVM: {java_options})" if java_options else ""
    cds_said = ", every JVM from a class-data-sharing archive" if cds else ""
    print(
        f"ndcg-mlflow run configs/demo.yaml --timings, local and Spark engines{jvm}{cds_said}; load average {load()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-spark-cli-", dir=workdir if workdir.is_dir() else None) as tmp:
        home = Path(tmp)
        cli_run(home, "local")  # the store created and migrated, the files cached: not measured
        if cds:
            # the classes an unmeasured run of the Spark command loads, written at its exit (Java 17's dynamic
            # archive), then mapped by every Spark process measured: the command's, the plain plan's, the first job's
            archive = home / "spark-classes.jsa"
            cli_run(home, "spark", _options(java_options, f"-XX:ArchiveClassesAtExit={archive} -Xlog:cds=off"))
            if not archive.is_file():
                raise SystemExit(f"the JVM wrote no class-data-sharing archive ({archive}): Java 17 or later?")
            java_options = _options(java_options, f"-XX:SharedArchiveFile={archive}")
        runs: dict[str, list[dict[str, float]]] = {"local": [], "spark": []}
        plans, firsts = [], []
        for _ in range(2):
            for engine in ("local", "spark"):
                runs[engine].append(cli_run(home, engine, java_options if engine == "spark" else None))
            plans.append(measure(["--child", "demo-plan"], jvm_env(java_options)))
            firsts.append(measure(["--child", "first-job"], jvm_env(java_options)))
    best = {engine: min(r, key=lambda p: p["total"]) for engine, r in runs.items()}
    sys.path.insert(0, str(REPO))
    from ndcg_mlflow.timings import PHASES

    names = (*[p for p in PHASES if any(p in best[e] for e in best)], "other", "total")  # the phases that ran
    print(f"  {'phase (s)':<16} {'local':>8} {'spark':>8}")
    for name in names:
        cells = [f"{best[e][name]:8.2f}" if name in best[e] else f"{'-':>8}" for e in ("local", "spark")]
        print(f"  {name:<16} {cells[0]} {cells[1]}")
    totals = {e: ", ".join(f"{r['total']:.2f} s" for r in runs[e]) for e in runs}
    print(f"  totals: local {totals['local']}; spark {totals['spark']} (the faster of each shown)")
    own = best["spark"]["total"] - best["spark"].get("session start", 0.0)
    print(
        f"  Spark's own part (total less session start) / local total: {own:.2f} / {best['local']['total']:.2f} s"
        f" = {own / best['local']['total']:.2f}x; load average {load()}"
    )
    plan = min(plans, key=lambda p: p["beyond"])
    import ndcg_mlflow

    result = ndcg_mlflow.evaluate(REPO / "configs" / "demo.yaml")
    differ = max(abs(mean - result.mean(name, 10)) for name, mean in plan["means"].items())
    beyond = ", ".join(f"{p['beyond']:.2f}" for p in plans)
    print(
        f"  the plain Spark SQL plan on the demo in a fresh session (its three runs by Spark's CSV reader, nDCG@5,"
        f" @10 and @all per query to the driver; means of nDCG@10 within {differ:.1e} of the engine's):"
        f" session start {plan['session start']:.2f} s, beyond it {beyond} s"
    )
    print(
        f"  Spark's own part / the plain plan's part beyond the session start: {own:.2f} / {plan['beyond']:.2f} s"
        f" = {own / plan['beyond']:.2f}x; the plain plan's part / local total:"
        f" {plan['beyond'] / best['local']['total']:.2f}x"
    )
    first = min(firsts, key=lambda p: p["beyond"])
    first_beyond = ", ".join(f"{p['beyond']:.2f}" for p in firsts)
    print(
        f"  a fresh session's first job alone (spark.range(1).count(), session started as the command starts it):"
        f" session start {first['session start']:.2f} s, beyond it {first_beyond}"
        f" s = {first['beyond'] / best['local']['total']:.2f}x the local total"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("7m", "50m", "plan", "profile", "cli", "all"), default="all")
    ap.add_argument("--workdir", type=Path, default=HERE / "_data")
    ap.add_argument("--driver-memory", help="spark.driver.memory (default: 1g, 2g for plan and profile)")
    ap.add_argument("--queries-50m", type=int, default=100_000)
    ap.add_argument("--docs-50m", type=int, default=500)
    ap.add_argument("--keep", action="store_true", help="keep the generated 50M-row data")
    ap.add_argument(
        "--java-options",
        help="cli: the driver JVM's options of the Spark runs (e.g. '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC')",
    )
    ap.add_argument(
        "--cds",
        action="store_true",
        help="cli: every Spark JVM measured starts from a class-data-sharing archive of the classes an unmeasured"
        " run of the Spark command loaded (-XX:SharedArchiveFile, Java 17's dynamic archive)",
    )
    ap.add_argument(
        "--systems",
        type=int,
        choices=(1, 2),
        default=1,
        help="plan: one system, or two with intervals and a paired comparison (a second run: the scores moved)",
    )
    ap.add_argument(
        "--child",
        choices=("local", "spark", "spark-full", "plan", "profile", "demo-plan", "first-job"),
        help=argparse.SUPPRESS,
    )
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--qrels", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child in ("plan", "profile"):
        sys.path[:0] = [str(REPO), str(HERE)]
        from _spark_plan import child as plan_child

        plan_child(args)
        return 0
    if args.child == "demo-plan":
        demo_plan_child()
        return 0
    if args.child == "first-job":
        first_job_child()
        return 0
    if args.child:
        child(args)
        return 0
    workdir = args.workdir.resolve()
    print(f"machine: {os.cpu_count()} cores, load average {load()}")
    if args.case in ("plan", "profile"):
        case_plan(workdir, args.driver_memory or "2g", args.case, args.systems)
        return 0
    if args.case == "cli":
        case_cli(workdir, args.java_options, args.cds)
        return 0
    args.driver_memory = args.driver_memory or "1g"
    if args.case in ("7m", "all"):
        case_7m(workdir, args.driver_memory)
    if args.case in ("50m", "all"):
        case_50m(workdir, args.driver_memory, args.queries_50m, args.docs_50m, args.keep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
