"""The Spark engine beside a plain Spark SQL plan in one session, and a profile of the engine's run
(``bench_spark.py --case plan`` and ``--case profile``; the measured child process's side).

The plan is what a Spark user would write by hand for nDCG@10 with trec_eval's tie rule and exponential gain
(the ``gdeval`` preset with ``missing_queries: zero``):

    rank_q(d)  = row_number() over (partition by query order by score desc, doc_id desc)
    DCG_q      = sum over rank_q(d) <= 10 of (2^g(d) - 1) / log2(rank_q(d) + 1)     (g: the left-joined grade,
                                                                                    0 when unjudged or <= 0)
    IDCG_q     = the same over the query's judgments ranked by grade desc
    mean       = (1/|Q|) sum over Q of DCG_q / IDCG_q,  Q = the judged queries with IDCG_q > 0
                 (a query of Q the run does not return scores 0)

Järvelin & Kekäläinen (2002) for nDCG; Burges et al. (2005) for the exponential gain.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import threading
import time
from pathlib import Path
from typing import Any

PLAN_SPEC = {
    "spec_version": 1,
    "name": "bench-spark-plan",
    "metric": {"preset": "gdeval", "cutoffs": [10], "missing_queries": "zero"},
    "queries": {"weights": "uniform"},
}
"""The engine's spec for the comparison: gdeval's rules (2^g - 1, ties by score then document id descending,
empty ideals excluded) at cutoff 10, a judged query the run does not return scoring 0."""


def ensure_qrels_parquet(qrels: Path) -> Path:
    """The TREC judgments (query, iteration, doc, grade) as Parquet beside them (query_id, doc_id: strings;
    grade: int64), written once."""
    out = qrels.with_suffix(".qrels.parquet")
    if out.is_file() and out.stat().st_mtime >= qrels.stat().st_mtime:
        return out
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyarrow import csv as pacsv

    tbl = pacsv.read_csv(
        qrels,
        read_options=pacsv.ReadOptions(column_names=["query_id", "iter", "doc_id", "grade"]),
        parse_options=pacsv.ParseOptions(delimiter=" "),
        convert_options=pacsv.ConvertOptions(
            include_columns=["query_id", "doc_id", "grade"],
            column_types={"query_id": pa.string(), "doc_id": pa.string(), "grade": pa.int64()},
        ),
    )
    tmp = out.with_suffix(".tmp")
    pq.write_table(tbl, tmp)
    os.replace(tmp, out)
    return out


PAIR_STATISTICS = {
    "uncertainty": {"resamples": 10000, "confidence": 0.95, "method": "bca", "seed": 20261130},
    "comparison": {
        "baseline": "bench",
        "test": "randomization",
        "correction": "holm",
        "wins_losses": 10,
        "tie_tolerance": 1.0e-9,
    },
}
"""With two systems: the demo's statistics (10,000 BCa bootstrap resamples, a paired randomization test against
the baseline ``bench``, Holm's correction, the 10 largest wins and losses)."""


def ensure_second_run(run: Path, seed: int = 5) -> Path:
    """A second system beside the Parquet run (``<stem>.b.parquet``): the same rows in the same order, each score
    moved by N(0, 0.5) noise and rounded as the first (3 decimals), written once."""
    out = run.with_name(run.stem + ".b.parquet")
    if out.is_file() and out.stat().st_mtime >= run.stat().st_mtime:
        return out
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(run)
    score = table.column("score").to_numpy()
    moved = np.round(score + np.random.default_rng(seed).normal(0.0, 0.5, size=score.size), 3)
    table = table.set_column(table.schema.get_field_index("score"), "score", pa.array(moved))
    tmp = out.with_suffix(".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)
    return out


def session(driver_memory: str) -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark-plan")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def plan_mean(spark: Any, run: str, qrels: str, k: int = 10) -> float:
    """The plain Spark SQL plan's mean nDCG@k (the module docstring's formulas), read from the Parquet files."""
    from pyspark.sql import functions as F

    return float(plan_per_query(spark, run, qrels, k).agg(F.avg("ndcg")).collect()[0][0])


def plan_pair(spark: Any, runs: list[str], qrels: str, k: int = 10) -> list[float]:
    """Two systems in one plain plan: each one's per-query nDCG@k, joined by query; the two means and the mean
    paired difference (second less first), in one job."""
    from pyspark.sql import functions as F

    a = plan_per_query(spark, runs[0], qrels, k).withColumnRenamed("ndcg", "a")
    b = plan_per_query(spark, runs[1], qrels, k).withColumnRenamed("ndcg", "b")
    row = a.join(b, "query_id").agg(F.avg("a"), F.avg("b"), F.avg(F.col("b") - F.col("a"))).collect()[0]
    return [float(x) for x in row]


def plan_per_query(spark: Any, run: str, qrels: str, k: int = 10) -> Any:
    """The plain plan's per-query nDCG@k (``query_id``, ``ndcg``) over the judged queries with an ideal above 0."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def gain(g: Any) -> Any:
        return F.when(g > 0, F.pow(F.lit(2.0), g) - 1).otherwise(F.lit(0.0))

    def discount(rank: Any) -> Any:
        return F.log2(rank + 1)

    r = spark.read.parquet(run).select("query_id", "doc_id", "score")
    j = spark.read.parquet(qrels).select("query_id", "doc_id", F.col("grade").cast("double").alias("grade"))
    by_score = Window.partitionBy("query_id").orderBy(F.desc("score"), F.desc("doc_id"))
    top = r.withColumn("rank", F.row_number().over(by_score)).where(F.col("rank") <= k)
    dcg = (
        top.join(j, ["query_id", "doc_id"], "left")
        .groupBy("query_id")
        .agg(F.sum(gain(F.coalesce(F.col("grade"), F.lit(0.0))) / discount(F.col("rank"))).alias("dcg"))
    )
    by_grade = Window.partitionBy("query_id").orderBy(F.desc("grade"))
    ideal = (
        j.withColumn("rank", F.row_number().over(by_grade))
        .where(F.col("rank") <= k)
        .groupBy("query_id")
        .agg(F.sum(gain(F.col("grade")) / discount(F.col("rank"))).alias("idcg"))
        .where(F.col("idcg") > 0)
    )
    return ideal.join(dcg, "query_id", "left").select(
        "query_id", (F.coalesce(F.col("dcg"), F.lit(0.0)) / F.col("idcg")).alias("ndcg")
    )


def engine_mean(spark: Any, run: str, qrels: str) -> tuple[float, Any]:
    import ndcg_mlflow

    spec = dict(PLAN_SPEC, data={"qrels": qrels, "systems": {"bench": run}})
    result = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark))
    return float(result.mean("bench", 10)), result


def engine_pair(spark: Any, runs: list[str], qrels: str) -> list[float]:
    """The engine on two systems with :data:`PAIR_STATISTICS`: the two means and the mean paired difference."""
    import ndcg_mlflow

    spec = dict(PLAN_SPEC, **PAIR_STATISTICS, data={"qrels": qrels, "systems": {"bench": runs[0], "other": runs[1]}})
    result = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark))
    (row,) = result.analysis.comparisons
    return [float(result.mean("bench", 10)), float(result.mean("other", 10)), float(row["delta"])]


# --------------------------------------------------------------------------- CPU time of the process tree


class CpuSampler:
    """CPU seconds (user + system, from /proc/<pid>/stat) of this process (the driver's Python), the JVM and
    the Python workers (``pyspark.daemon`` and the workers it forks), sampled every 0.1 s: a process's time is
    its largest cumulative value seen, so a worker that exits between two samples loses at most 0.1 s."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._tick = os.sysconf("SC_CLK_TCK")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.1)

    def sample(self) -> None:
        me = os.getpid()
        children: dict[int, list[int]] = {}
        stats: dict[int, list[str]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    rest = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            stats[int(entry)] = rest
            children.setdefault(int(rest[1]), []).append(int(entry))
        todo = [me]
        while todo:
            pid = todo.pop()
            todo += children.get(pid, [])
            rest = stats.get(pid)
            if rest is None:
                continue
            seconds = (int(rest[11]) + int(rest[12])) / self._tick
            group = self.seen.get(pid, (None, 0.0))[0]
            if group is None:
                try:
                    exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                except OSError:
                    continue
                group = "driver" if pid == me else "jvm" if exe.endswith("java") else "workers"
            self.seen[pid] = (group, max(seconds, self.seen.get(pid, (group, 0.0))[1]))

    def totals(self) -> dict[str, float]:
        self.sample()
        out = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
        for group, seconds in self.seen.values():
            out[group] += seconds
        return out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 2) for k in before}


# --------------------------------------------------------------------------- stages, from the status tracker


class StagePoller:
    """Each stage's first and last sight among the active stages (``statusTracker``, polled every 0.05 s), its
    name and task count: the stages' wall times to 0.05 s, with the Spark UI off."""

    def __init__(self, spark: Any) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.stages: dict[int, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            for sid in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(sid)
                if info is None:
                    continue
                s = self.stages.setdefault(sid, {"first": now, "name": info.name, "tasks": info.numTasks})
                s["last"] = now
            self._stop.wait(0.05)

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join()
        return [
            {"stage": sid, "name": s["name"], "tasks": s["tasks"], "seconds": round(s["last"] - s["first"], 2)}
            for sid, s in sorted(self.stages.items())
        ]


# --------------------------------------------------------------------------- the two children


def compare(args: Any) -> dict[str, Any]:
    """Plan and engine alternated in one session, twice each: their times, best of two, and means."""
    t0 = time.perf_counter()
    spark = session(args.driver_memory)
    started = time.perf_counter() - t0
    times: dict[str, list[float]] = {"plan": [], "engine": []}
    cpu: dict[str, list[dict[str, float]]] = {"plan": [], "engine": []}
    means: dict[str, float] = {}
    runs = args.run.split(",")
    sampler = CpuSampler()
    for _ in range(2):
        for name in ("plan", "engine"):
            before = sampler.totals()
            t = time.perf_counter()
            if len(runs) == 2:
                means[name] = (plan_pair if name == "plan" else engine_pair)(spark, runs, args.qrels)
            elif name == "plan":
                means[name] = plan_mean(spark, args.run, args.qrels)
            else:
                means[name], _ = engine_mean(spark, args.run, args.qrels)
            times[name].append(time.perf_counter() - t)
            cpu[name].append(cpu_delta(before, sampler.totals()))
    sampler.stop()
    spark.stop()
    return {"session_s": started, "times": times, "means": means, "cpu": cpu}


def profile(args: Any) -> dict[str, Any]:
    """One engine run after a warm-up run, with timers around the driver's steps, the stages' wall times,
    CPU by process group, the plans of the engine's DataFrames, the costs of its parts run alone (written to
    Spark's ``noop`` sink) and a cProfile of the driver's Python."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.dataframe import DataFrame

    from ndcg_mlflow.engines.spark import assemble as asm
    from ndcg_mlflow.engines.spark import driver as drv
    from ndcg_mlflow.engines.spark.parquet_tasks import ParquetTasks

    spark = session(args.driver_memory)
    engine_mean(spark, args.run, args.qrels)  # warm-up: the JVM's code, the workers started, the files cached
    steps: dict[str, float] = {}
    frames: dict[str, Any] = {}

    def timed(module: Any, name: str, label: str, keep: str | None = None) -> None:
        original = getattr(module, name)

        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            out = original(*a, **kw)
            steps[label] = steps.get(label, 0.0) + time.perf_counter() - t
            if keep is not None:
                frames[keep] = out[0] if isinstance(out, tuple) else out
                frames[keep + "_args"] = a
            return out

        setattr(module, name, wrapper)

    timed(drv, "judged_on_driver", "judgments read and checked on the driver", keep="judged")
    timed(drv, "system_rows", "run read, counted and hashed; the job's plan built (system_rows)")
    timed(asm, "run_frame", "  within it: run_frame (read, count, sha256)", keep="run")
    timed(asm, "shuffled", "  within it: the pre-filter's frame (Spark's reader, broadcast join)", keep="shuffled")
    timed(ParquetTasks, "prefiltered", "  within it: the pre-filter's frame (Parquet read in tasks)", keep="tasks")
    timed(DataFrame, "toArrow", "the bucket job (toArrow of the query rows)")
    timed(drv, "unchecked_duplicates", "duplicate check of the rows the buckets did not see")
    timed(drv, "assemble", "assemble the per-query rows")
    timed(drv, "files_unchanged", "sha256 of the files again (unchanged)")
    timed(drv, "finish", "finish (the result)")
    timed(drv, "statistics", "statistics")
    sampler = CpuSampler()
    poller = StagePoller(spark)
    before = sampler.totals()
    t = time.perf_counter()
    mean, _ = engine_mean(spark, args.run, args.qrels)
    total = time.perf_counter() - t
    stages = poller.stop()
    cpu = cpu_delta(before, sampler.totals())
    out: dict[str, Any] = {"total_s": total, "mean": mean, "steps": dict(steps), "stages": stages, "cpu": cpu}
    if "shuffled" not in frames:  # the run read by pyarrow in tasks: (self, spark, judged, metric, depth, ...)
        frames["shuffled"] = frames["tasks"]
        frames["shuffled_args"] = frames["tasks_args"][1:]
    explain_path = Path(args.qrels).parent / "engine_explain.txt"
    with explain_path.open("w") as fh:
        for key in ("run", "shuffled"):
            fh.write(f"==== {key}\n{explain(frames[key])}\n")
    out["explain"] = str(explain_path)
    parts: dict[str, Any] = {}
    metric, depth = frames["shuffled_args"][2], frames["shuffled_args"][3]
    in_python = python_prefilter(spark, args.run, frames["judged"].judged_df, metric, depth)
    engine_kept = frames["shuffled"].agg(F.count(F.lit(1)), F.sum("_extra")).collect()[0]
    python_kept = in_python.agg(F.count(F.lit(1)), F.sum("_extra")).collect()[0]
    out["kept"] = {"engine": list(engine_kept), "python_read": list(python_kept)}
    out["same_query_rows"] = same_query_rows(frames["shuffled"], in_python, frames["judged"].judged_df, metric)
    for label, df in [
        *alone(frames["run"], frames["judged"].judged_df, frames["shuffled"]),
        ("Parquet read by pyarrow in tasks + grades + pre-filter", in_python),
    ]:
        with explain_path.open("a") as fh:
            fh.write(f"==== {label}\n{explain(df)}\n")
        before = sampler.totals()
        t = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        parts[label] = {"seconds": round(time.perf_counter() - t, 2), "cpu": cpu_delta(before, sampler.totals())}
    before = sampler.totals()
    t = time.perf_counter()
    plan_mean(spark, args.run, args.qrels)
    parts["the plain plan"] = {"seconds": round(time.perf_counter() - t, 2), "cpu": cpu_delta(before, sampler.totals())}
    out["parts"] = parts
    sampler.stop()
    prof = cProfile.Profile()
    prof.enable()
    engine_mean(spark, args.run, args.qrels)
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("tottime").print_stats(15)
    stats.sort_stats("cumulative").print_stats(30)
    prof_path = Path(args.qrels).parent / "engine_cprofile.txt"
    prof_path.write_text(text.getvalue())
    out["cprofile"] = str(prof_path)
    spark.stop()
    return out


def alone(run: Any, judged: Any, shuffled: Any) -> list[tuple[str, Any]]:
    """The engine's parts, and JVM-only candidates for its pre-filter, as DataFrames to run alone: the read, the
    broadcast join of the judgments, the rows' crossing into Python workers and back (an identity ``mapInArrow``,
    of the id strings and of their 64-bit hashes), the pre-filter; in the JVM, the top 10 by score (ties kept:
    ``rank``), and a cut that keeps a superset of what the pre-filter keeps under every rule (every judged row,
    and the unjudged rows of the 10 best distinct scores: ``dense_rank() <= 11`` over a key that ties every
    judged row at the top), the rows per query, and the (query, document) hashes seen twice."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    graded = run.join(F.broadcast(judged), on=["query_id", "doc_id"], how="left")
    schema = "query_id string, doc_id string, score double, rank double"
    crossed = run.mapInArrow(lambda batches: batches, schema)
    hashes = run.select(F.xxhash64("query_id").alias("q"), F.xxhash64("doc_id").alias("d"), "score").mapInArrow(
        lambda batches: batches, "q long, d long, score double"
    )
    by_score = Window.partitionBy("query_id").orderBy(F.desc("score"))
    cut = graded.withColumn("_r", F.rank().over(by_score)).where(F.col("_r") <= 10)
    key = F.when(F.col("grade").isNotNull(), F.lit(float("inf"))).otherwise(F.col("score"))
    by_key = Window.partitionBy("query_id").orderBy(key.desc())
    superset = graded.withColumn("_r", F.dense_rank().over(by_key)).where(F.col("_r") <= 11)
    counts = run.groupBy("query_id").count()
    twice = run.select(F.xxhash64("query_id", "doc_id").alias("_h")).groupBy("_h").count().where(F.col("count") > 1)
    return [
        ("read the run (Parquet scan, the engine's columns)", run),
        ("read + broadcast join of the judgments", graded),
        ("read + identity mapInArrow (rows to Python and back)", crossed),
        ("read + identity mapInArrow of 2 id hashes + score", hashes),
        ("read + join + pre-filter (mapInArrow), the engine's", shuffled),
        ("read + join + rank() <= 10 in the JVM", cut),
        ("read + join + judged or dense_rank() <= 11, JVM", superset),
        ("read + rows per query (groupBy count)", counts),
        ("read + (query, doc) hashes seen twice (groupBy)", twice),
    ]


def python_prefilter(spark: Any, path: str, judged_df: Any, metric: Any, depth: int) -> Any:
    """A prototype: the run's Parquet row groups read by pyarrow in Spark tasks (no run row passes through the
    JVM before the pre-filter), each row's grade looked up in the evaluated judgments (shipped with the task), then
    the engine's own :func:`~ndcg_mlflow.engines.spark.prefilter.prefilter_rows`; only the kept rows enter the
    JVM. Row order within a chunk is not kept (enough for ties by document id)."""
    import pyarrow.parquet as pq

    from ndcg_mlflow.engines.spark.prefilter import RUN_SCHEMA, prefilter_rows

    judged = judged_df.toArrow()
    groups = pq.ParquetFile(path).num_row_groups
    items = spark.createDataFrame([(i,) for i in range(groups)], "rg int").repartition(2)

    def task(batches: Any) -> Any:
        import os

        import pyarrow as pa
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        for batch in batches:
            for rg in batch.column(0).to_pylist():
                t = f.read_row_group(rg, columns=["query_id", "doc_id", "score"])
                t = t.append_column("rank", pa.nulls(t.num_rows, pa.float64()))
                t = t.join(judged, keys=["query_id", "doc_id"], join_type="left outer")
                chunk = int.from_bytes(os.urandom(8), "little") >> 1
                yield from prefilter_rows(t, metric, depth, False, chunk).to_batches()

    return items.mapInArrow(task, RUN_SCHEMA)


def same_query_rows(engine_rows: Any, python_rows: Any, judged_df: Any, metric: Any) -> list[str]:
    """The columns in which the engine's bucket UDF (:func:`~ndcg_mlflow.engines.spark.buckets.bucket_results`)
    gives some query other numbers from the prototype's pre-filtered rows than from the engine's (bit for bit, a
    NaN equal to a NaN); empty: the same query rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ndcg_mlflow.engines.spark.buckets import bucket_results

    def query_rows(rows: Any) -> Any:
        out = bucket_results(rows, judged_df, 7, "bench", "bench", metric, False).toArrow()
        out = out.filter(pc.equal(out.column("kind"), "query"))
        return out.take(pc.sort_indices(out, [("query_id", "ascending")]))

    def values(col: Any) -> np.ndarray:
        col = col.combine_chunks()
        if pa.types.is_list(col.type):
            col = pc.list_flatten(col)
        return np.asarray(col.to_numpy(zero_copy_only=False))

    a, b = query_rows(engine_rows), query_rows(python_rows)
    if a.num_rows != b.num_rows:
        return ["the number of query rows"]
    columns = ("query_id", "n_returned", "dcg", "idcg", "idcg_candidates", "ndcg", "judged_coverage", "status")
    differ = []
    for c in columns:
        x, y = values(a.column(c)), values(b.column(c))
        if x.dtype.kind == "f":
            same = x.shape == y.shape and np.array_equal(x.view(np.int64), y.view(np.int64))  # bit for bit
        else:
            same = x.shape == y.shape and bool((x == y).all())
        if not same:
            differ.append(c)
    return differ


def explain(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def child(args: Any) -> None:
    out = compare(args) if args.child == "plan" else profile(args)
    print("RESULT " + json.dumps(out), flush=True)
