"""The judgments, the evaluated query set and the weights kept in Spark (the grouped path, beyond the driver's
limit of judgments: :data:`.judgments.DRIVER_JUDGMENTS`).

The judgments are read by Spark (a file of the spec: TREC qrels, CSV/TSV with a header, Parquet, Delta, JSONL;
or a Spark DataFrame) and checked as the local readers and :mod:`ndcg_mlflow.join` check them, in their words
(:mod:`ndcg_mlflow.readers.accept`, the messages of :mod:`ndcg_mlflow.join`): null or empty ids, null or
non-finite grades (the seam's :data:`~ndcg_mlflow.queries.JUDGMENT_CHECKS`, on each Arrow batch), a document
judged twice with different grades (identical duplicates are merged), the gain mapping of every grade (the
distinct grades are collected: they are few), the evaluated query set (the judged queries, or the spec's
``queries.set``, each of whose queries must be judged), the weights (``queries.weights``: every evaluated query
needs one) and the per-query sums of the gains that could overflow a float. Spark has no
line numbers and no row order: the errors name the source, the rows at fault and the smallest (query,
document) among them. The query set and the weights files are read by the local readers (their grammar,
duplicates and positive finite weights are theirs), then checked against the judgments in Spark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import DataError, SpecError, preview
from ...join import gain_overflow, gain_sums_overflow, map_gains, not_in_gain_table
from ...kernel import NonFiniteError
from ...queries import JUDGMENT_CHECKS, Problem, first_of, first_problem, problem_message
from ...readers import read_query_set, read_weights, sha256_file
from ...readers.accept import NO_ROWS, column_type, judged_twice, no_data_lines
from ...readers.small import unjudged_set_message, unweighted_message, weight_sum_message
from ...result import FileInfo
from ...spec import IN_MEMORY, Spec
from .sources import (
    arrow_schema,
    column_type_ok,
    digest_columns,
    is_spark_frame,
    local_reader_frame,
    mapped_columns,
    read_run_file,
    reads_locally,
    spark_schema,
    with_mapping,
)

MAX_GRADES = 100_000
"""Distinct grades collected to the driver for the gain mapping at most."""

DRIVER_SMALL_FILE_BYTES = 256 << 20
"""A query set or weights file of at most this many bytes is read on the driver by the local readers (line
numbers in their errors); a larger one is read by the same readers in a Spark task
(:func:`.sources.local_reader_frame`): the same checks and messages, its rows kept in Spark."""


@dataclass
class SparkJudgments:
    """The judgments of the evaluated queries (``judged_df``: query_id, doc_id, grade), the evaluated queries with
    their weights (``weights_df``: query_id, weight, rw), and their aggregates, all computed in Spark."""

    judged_df: Any
    weights_df: Any
    n_queries: int
    weight_sum: float
    grades: list[float]
    n_judged: int
    frames: list[Any]  # persisted DataFrames, unpersisted by release()

    def release(self) -> None:
        for df in self.frames:
            try:
                df.unpersist()
            except Exception:  # pragma: no cover - the session may be gone
                pass


def judgment_frame(spark: Any, spec: Spec, qrels: Any, shared: dict[str, str]) -> tuple[Any, str, FileInfo]:
    """The judgments as a DataFrame of query_id, doc_id (strings) and grade (double), unchecked, its label for
    errors and its file information (rows filled in later)."""
    if qrels is None:
        q = spec.qrels
        df, mapping = _read_qrels_file(spark, q)
        label: str = str(q.file)
        info = FileInfo("qrels", str(q.path), q.declared, sha256_file(q.file, q.version), 0)
    else:
        obj, mapping = with_mapping(qrels, shared)
        if not is_spark_frame(obj):
            raise SpecError(
                "qrels",
                f"judgments kept in Spark are a file of the spec or a Spark DataFrame; got {type(obj).__name__}.",
            )
        df, label, info = obj, "qrels", FileInfo("qrels", "", IN_MEMORY, "", 0)
    df, columns = mapped_columns(df, "qrels", mapping, label)
    selected = []
    for c, (col, t) in columns.items():
        if not column_type_ok(t, c == "grade"):
            raise DataError(label, column_type(c, t, numeric=c == "grade"))
        selected.append(col.cast("double" if c == "grade" else "string").alias(c))
    return df.select(*selected), label, info


def _read_qrels_file(spark: Any, q: Any) -> tuple[Any, dict[str, str]]:
    """A judgments file of the spec read in Spark, and the column mapping still to apply: a TREC, CSV, TSV or JSONL
    file read by the local engine's reader in a Spark task (the same checks and messages, naming the line; its
    columns the tool's names), else as a run is read (Parquet, Delta)."""
    if reads_locally(q):
        return local_reader_frame(spark, q, "qrels", False)[0].drop("_order"), {}
    return read_run_file(spark, q), dict(q.columns)


def _ids(rows: list[Any]) -> str:
    return ", ".join(f"query {r['query_id']!r}, document {r['doc_id']!r}" for r in rows)


def check_judgments(spark: Any, df: Any, label: str, spec: Spec) -> tuple[Any, int, list[float]]:
    """The local readers' and gain checks in Spark; the deduplicated judgments (persisted), their count and
    their distinct grades."""
    from pyspark.sql import functions as F

    # the seam's checks of raw judgments, in its order, on each Arrow batch where the rows are (one pass)
    found = df.mapInArrow(_batch_problems, spark_schema(PROBLEM_SCHEMA)).collect()
    problem = first_of([Problem(*r) for r in found], JUDGMENT_CHECKS)
    if problem is not None:
        raise DataError(label, problem_message(problem, spec.metric, label))
    pairs = df.groupBy("query_id", "doc_id").agg(F.min("grade").alias("lo"), F.max("grade").alias("hi"))
    conflicts = pairs.where(F.col("lo") != F.col("hi"))
    n = conflicts.count()
    if n:
        r = conflicts.orderBy("query_id", "doc_id").limit(1).collect()[0]
        detail = f"{r['lo']:g} and {r['hi']:g}; {n} documents judged with different grades in all"
        raise DataError(label, judged_twice(r["doc_id"], r["query_id"], detail))
    deduped = pairs.select("query_id", "doc_id", F.col("lo").alias("grade")).persist()
    n_rows = deduped.count()
    if not n_rows:
        raise DataError(label, no_data_lines("qrels") if label != "qrels" else NO_ROWS)
    distinct = deduped.select("grade").distinct().limit(MAX_GRADES + 1).collect()
    if len(distinct) > MAX_GRADES:
        deduped.unpersist()
        raise DataError(
            label,
            f"more than {MAX_GRADES:,} distinct grades: the gain mapping collects them to the "
            f"driver; round the grades.",
        )
    grades = sorted(float(r["grade"]) for r in distinct)
    gain = spec.metric.gain
    try:
        map_gains(gain, np.asarray(grades, dtype=np.float64))
    except NonFiniteError as exc:
        over = [grades[int(i)] for i in exc.queries]
        bad_rows = deduped.where(F.col("grade").isin(over))
        n = bad_rows.count()
        rows = bad_rows.orderBy("query_id", "doc_id").limit(1).collect()
        deduped.unpersist()
        raise DataError(label, gain_overflow(rows[0]["grade"], n, f" ({_ids(rows)})")) from None
    except DataError:
        keys = {k for k, _ in gain.table}
        missing = [g for g in grades if g not in keys]
        rows = deduped.where(F.col("grade").isin(missing)).orderBy("query_id", "doc_id").limit(1).collect()
        deduped.unpersist()
        raise DataError(label, not_in_gain_table(rows[0]["grade"], missing, f" ({_ids(rows)})")) from None
    return deduped, n_rows, grades


PROBLEM_SCHEMA = "code string, query string, doc string, n long, value double"
"""A :class:`~ndcg_mlflow.queries.Problem` as a row."""


def _batch_problems(batches: Any) -> Any:
    """Each Arrow batch's first problem by the seam's :data:`~ndcg_mlflow.queries.JUDGMENT_CHECKS` (none: no row)."""
    import pyarrow as pa

    for batch in batches:
        problem = first_problem(pa.Table.from_batches([batch]), False, checks=JUDGMENT_CHECKS)
        if problem is not None:
            yield pa.RecordBatch.from_pylist([problem._asdict()], schema=arrow_schema(PROBLEM_SCHEMA))


def _gain_column(spark: Any, spec: Spec, grades: list[float]) -> Any:
    """A DataFrame of grade -> gain for the distinct grades (the local mapping)."""
    import pyarrow as pa

    gains = map_gains(spec.metric.gain, np.asarray(grades, dtype=np.float64))
    return spark.createDataFrame(
        pa.table(
            {
                "grade": pa.array(grades, type=pa.float64()),
                "gain": pa.array(np.asarray(gains, dtype=np.float64), type=pa.float64()),
            }
        )
    )


def spark_judgments(
    spark: Any, spec: Spec, qrels: Any, shared: dict[str, str], files: list[FileInfo]
) -> SparkJudgments:
    """The judgments read and checked in Spark, the evaluated query set, the weights and the checks of the gain
    sums, as :func:`.judgments.judged_on_driver` does on the driver (``files`` gets the qrels', query
    set's and weights' information)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    raw, label, info = judgment_frame(spark, spec, qrels, shared)
    deduped, n_rows, grades = check_judgments(spark, raw, label, spec)
    frames = [deduped]
    try:
        if not info.sha256:  # a DataFrame: an order-independent digest of its (deduplicated) judgments
            info.sha256 = digest_columns(deduped, ("query_id", "doc_id", "grade"))[0]
        info.rows = n_rows
        files.append(info)
        judged_queries = deduped.select("query_id").distinct()
        if spec.queries.set is None:
            evaluated = judged_queries
        else:
            src = spec.queries.set
            if _large(src.file):
                read, n_set, _ = local_reader_frame(spark, src, "set")
                evaluated = read.select("query_id").persist()
                frames.append(evaluated)
            else:
                ids = read_query_set(src.file)
                n_set = len(ids)
                evaluated = spark.createDataFrame(pa.table({"query_id": pa.array(ids, type=pa.string())}))
            files.append(FileInfo("queries.set", str(src.path), src.declared, sha256_file(src.file), n_set))
            unknown = evaluated.join(judged_queries, "query_id", "left_anti")
            n = unknown.count()
            if n:
                first = [r["query_id"] for r in unknown.orderBy("query_id").limit(5).collect()]
                qrels_name = spec.qrels.declared if spec.qrels is not None else "qrels"
                raise DataError(src.file, unjudged_set_message(n, first, qrels_name))
        if spec.queries.weights is None:
            weights_df = evaluated.select("query_id", F.lit(1.0).alias("weight"))
        else:
            src = spec.queries.weights
            if _large(src.file):
                read, n_weights, _ = local_reader_frame(spark, src, "weights")
                given = read.select("query_id", "weight").persist()
                frames.append(given)
            else:
                table = read_weights(src.file)
                n_weights = len(table)
                given = spark.createDataFrame(
                    pa.table(
                        {
                            "query_id": pa.array(list(table), type=pa.string()),
                            "weight": pa.array(list(table.values()), type=pa.float64()),
                        }
                    )
                )
            files.append(FileInfo("queries.weights", str(src.path), src.declared, sha256_file(src.file), n_weights))
            missing = evaluated.join(given, "query_id", "left_anti")
            n = missing.count()
            if n:
                first = [r["query_id"] for r in missing.orderBy("query_id").limit(5).collect()]
                raise DataError(src.file, unweighted_message(n, first))
            weights_df = evaluated.join(given, "query_id")
        agg = weights_df.agg(
            F.count(F.lit(1)).alias("n"), F.sum("weight").alias("s"), F.max("weight").alias("m")
        ).collect()[0]
        n_queries, weight_sum, top = int(agg["n"]), float(agg["s"] or 0.0), float(agg["m"] or 1.0)
        if not math.isfinite(weight_sum):
            raise DataError(
                spec.queries.weights.file if spec.queries.weights is not None else label,
                weight_sum_message(n_queries),
            )
        weights_df = weights_df.select("query_id", "weight", (F.col("weight") / F.lit(top)).alias("rw")).persist()
        frames.append(weights_df)
        judged_df = deduped.join(weights_df.select("query_id"), "query_id").select("query_id", "doc_id", "grade")
        judged_df = judged_df.persist()
        frames.append(judged_df)
        n_judged = judged_df.count()
        # the gains of a query could sum beyond a float (join.check_gain_sums): every DCG would then overflow
        gains = _gain_column(spark, spec, grades)
        sums = judged_df.join(F.broadcast(gains), "grade").groupBy("query_id").agg(F.sum(F.abs("gain")).alias("s"))
        over = sums.where(F.col("s").isin(float("inf")) | F.isnan("s"))
        n = over.count()
        if n:
            first = [r["query_id"] for r in over.orderBy("query_id").limit(5).collect()]
            raise DataError(label, gain_sums_overflow(first[0], spec.metric.gain, preview(first, total=n), n))
        return SparkJudgments(judged_df, weights_df, n_queries, weight_sum, grades, n_judged, frames)
    except BaseException:  # nothing refers to the cached frames: they go
        SparkJudgments(None, None, 0, 0.0, [], 0, frames).release()
        raise


def _large(path: Any) -> bool:
    from pathlib import Path

    return Path(path).stat().st_size > DRIVER_SMALL_FILE_BYTES
