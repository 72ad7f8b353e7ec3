"""The Spark engine: the same per-query numbers as the local engine, with the runs' rows processed by Spark.

How it works:

* The judgments are read on the driver, by the local readers (a file in the spec) or collected from a Spark DataFrame,
  and checked exactly as the local engine checks them (a document judged twice with different grades, non-finite
  grades, gains that overflow). From them the driver computes, as the local engine does, the evaluated query set (the
  judged queries, or the spec's ``queries.set``), the weights and the judgments of the evaluated queries. This assumes
  the judgments are small next to the runs (judgments are made by people or sampled; runs list every returned
  document): at most :data:`MAX_JUDGMENTS` rows are accepted, above that the evaluation stops with an error saying so.
  On the grouped path (:func:`evaluate_grouped`, and :func:`evaluate` beyond :data:`MAX_DRIVER_QUERIES`) judgments
  beyond :data:`DRIVER_JUDGMENTS` rows (``driver_judgments=``; 0: always) stay in Spark instead
  (:mod:`.spark_judgments`): a file of the spec is read in Spark as a run is (below; its sha256 still computed on the
  driver, a streaming read), a DataFrame is used as given (an order-independent digest recorded); they are checked
  there as locally (null or empty ids, grades that are not finite, a document judged twice with different grades,
  identical duplicates merged, the gain of every distinct grade, the per-query gain sums), and the evaluated query
  set, the weights (``weight`` and ``rw``, the weight over the largest), the number of evaluated queries, the weight
  sum and the grades are Spark DataFrames and aggregates; errors name the source and the offending ids.
  :func:`evaluate` then counts the evaluated queries in Spark to choose its path (within ``driver_queries`` the
  judgments are read on the driver as above). A query set or weights file larger than
  :data:`~.spark_judgments.DRIVER_SMALL_FILE_BYTES` is read by the local readers in a Spark task.
  ``engine_info.judgments`` records where the judgments were (``driver`` or ``spark``).
* Each run stays in Spark. Its rows and the evaluated judgments are grouped by a bucket of the query id
  (Spark's ``xxhash64`` of the id's UTF-8 text, modulo the bucket count; integer ids are read as their
  decimal text, as locally), so that every query's rows, run and judged, meet in one bucket. The bucket
  count is the run's rows over :data:`ROWS_PER_BUCKET` (about a million rows a bucket), unless given.
* ``groupBy(bucket).cogroup(...).applyInArrow`` calls, once per bucket, the local per-query join and kernel
  (:func:`ndcg_mlflow.join.judgments`, :func:`~ndcg_mlflow.join.join`, :func:`~ndcg_mlflow.join.compute`)
  on the bucket's rows; both are query-local, so a bucket's queries get the numbers the whole would give.
  The call returns one row per evaluated query of the bucket (every number, per cutoff, and the first
  documents of its list) with explicit Arrow types. With ``report.sensitivity`` the same call computes each
  query's nDCG under every alternative of every rule (:func:`ndcg_mlflow.sensitivity.alternatives`) on the
  bucket's joined rows, returned in the query rows (``alt_ndcg``); the driver builds the sensitivity table from
  them in the evaluated-query order (:func:`ndcg_mlflow.sensitivity.sensitivity_table`), as the local engine
  does from its kept rows.
* The per-query rows (one per evaluated query, not per run row) come back to the driver as Arrow and are
  assembled into the same :class:`~ndcg_mlflow.evaluation.EvaluationResult` as the local engine's, so the
  statistics, the report, the output folder and the MLflow logging are those of the local engine.

A TREC, CSV, TSV or JSONL file of the spec is read by the local engine's own reader in a Spark task
(:func:`.spark_sources.local_reader_frame`): the same rows, checks and errors (file and line) as locally, by
construction. Parquet and Delta sources are read by Spark's readers, their paths given literally. The run rows
are checked as strictly as locally: a null or empty id, a non-finite score, a rank that is not an integer, a
document listed twice for a query, a run sharing no query with the evaluated set; errors of the checks made in
Spark name the source and the offending query and document ids. Only DataFrame operations
and Arrow UDFs are used (no ``sparkContext``, RDD or broadcast variable), so the engine runs on Spark Connect.
The executors need ``ndcg_mlflow`` installed (the UDF calls it).

When every cutoff is finite, the run rows are filtered before the shuffle to those that can decide some
query's top K (:func:`prefilter_rows`); beyond :data:`MAX_DRIVER_QUERIES` evaluated queries,
:func:`evaluate_grouped` keeps the per-query rows in Spark (Parquet) and computes the statistics from
per-group sums (:mod:`ndcg_mlflow.engines.grouped`); :func:`evaluate` switches to it when given a
``per_query_path`` (``ndcg-mlflow run`` gives one next to the output folder).

A run without a rank column under ``ties: displayed_order`` (or sensitivity, whose alternatives include it) is
ordered as the local engine reads it: a text file's rows carry their place from the local reader, a Parquet file
Spark reads gets a key of its rows' order (:func:`_in_file_order`:
its block's place among the blocks, its place in its task's rows), an in-memory table its row numbers.

Sensitivity: an alternative whose numbers overflow a float in some bucket is NaN for every query and system
(as locally). With sensitivity a TREC run's rank is read (the local engine then reads it too); for a run that has
no order (a Spark DataFrame or a Delta table without a rank column, a model's scored rows) the
``ties: displayed_order`` alternative is not computed: its rows are left out of the table and a note names the
runs (:func:`computable`). The top-K pre-filter keeps the rows any alternative needs (:func:`prefilter_rows`).

The companion measures (duplicate rate, catalog coverage) are computed by :mod:`.spark_companions`: the
per-query duplicate rates in the buckets (the duplicate groups joined to the run rows before the shuffle), the
coverage from the documents the buckets show, counted in Spark; on both paths.

Not on this engine (refused with an error): ``keep_data`` (it needs every joined row on the driver),
``ties: displayed_order`` for a Spark DataFrame or a Delta table without a rank column and for model systems (no
rows' order to follow), and sensitivity beyond :data:`MAX_DRIVER_QUERIES` (the grouped path:
:func:`check_grouped`).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError, EvaluationError, SpecError
from ...evaluation import (
    EvaluationResult,
    FileInfo,
    SystemResult,
    apply_error_rules,
    display_depth,
    evaluated_query_set,
    finish,
    input_table,
    none_returned,
    note_unknown_queries,
    query_weights,
    read_companions,
    resolve_spec,
    statistics,
    stopped_by,
    system_means,
)
from ...join import index_in, join, judgments, map_gains
from ...kernel import STATUS_EMPTY_IDEAL, STATUS_MISSING, STATUS_NAMES, NonFiniteError, QueryResult
from ...queries import TopLists, UnjudgedError, overflow_message, score_queries, unjudged_message
from ...readers import Ids, Strings, Table, read_qrels, sha256_file
from ...readers.accept import Rows, column_type, empty_id, listed_twice, not_finite, not_integer, null_value
from ...readers.hashing import check_unchanged, read_with_digest
from ...result import summary_of
from ...rules import averages_ties, condenses, keeps_displayed_order, needs_row_order, stops
from ...sensitivity import alternatives as sensitivity_alternatives
from ...sensitivity import collect_alternatives
from ...spec import Metric, Spec
from ..grouped import GROUPS
from . import companions as comps
from .judgments_in_spark import SparkJudgments, judgment_frame, spark_judgments
from .sources import (
    column_type_ok,
    frame_digest,
    is_spark_frame,
    local_reader_frame,
    read_run_file,
    reads_locally,
    source_format,
)

ROWS_PER_BUCKET = 1_000_000
"""Run rows per bucket when the bucket count is chosen from the run's size."""

MAX_JUDGMENTS = 50_000_000
"""Judgments read on the driver at most (the judgments are assumed small next to the runs)."""

DRIVER_JUDGMENTS = MAX_JUDGMENTS
"""Judgments read on the driver at most on the grouped path (:func:`evaluate_grouped`, and :func:`evaluate` beyond
:data:`MAX_DRIVER_QUERIES`); beyond, the judgments, the evaluated query set and the weights stay in Spark
(:mod:`.spark_judgments`). ``driver_judgments=`` overrides it (0: always in Spark)."""

PREFILTER_MAX_JUDGMENTS = 5_000_000
"""The top-K pre-filter joins each run row to its grade before the shuffle by a broadcast join of the evaluated
judgments; above this many evaluated judgments it is not applied."""

PREFILTER_CHUNK_ROWS = 1_000_000
"""Run rows filtered together before the shuffle (the Arrow batches of a partition, concatenated)."""

MAX_DRIVER_QUERIES = 5_000_000
"""Evaluated queries whose per-query rows come back to the driver at most; beyond, :func:`evaluate_grouped`."""

RUN_SCHEMA = "query_id string, doc_id string, score double, rank double, _extra long, _chunk long"
"""A run's rows as they enter the shuffle; ``_extra`` counts rows of the same query that the pre-filter left
out (on one kept row of the query per chunk; 0 elsewhere); ``_chunk`` names the chunk the row was filtered in
(a random 63-bit number; 0 without the pre-filter)."""

ORDERED_RUN_SCHEMA = RUN_SCHEMA + ", _order long"
""":data:`RUN_SCHEMA` with the rows' order in the input (:func:`_in_file_order`)."""

SPLIT_CHECK_MAX = 100_000
"""Queries whose rows the pre-filter saw in more than one chunk, checked for duplicates by their rows (beyond
this many, every row of the run is checked by hash)."""

RESULT_SCHEMA = (
    "kind string, query_id string, n_returned long, dcg array<double>, idcg array<double>, "
    "idcg_candidates array<double>, ndcg array<double>, judged_coverage array<double>, status array<tinyint>, "
    "top_doc array<string>, top_pos array<long>, top_grade array<double>, "
    "code string, doc_id string, value double, count long, examples array<string>, "
    "alt_ndcg array<double>, alt_overflow array<int>, duplicate_rate array<double>"
)
"""One row per evaluated query of a bucket (kind ``query``), one per bucket (``meta``: the run's queries and
those outside the evaluated set) and one per problem found (``error``). With sensitivity (``report.sensitivity``)
a query row's ``alt_ndcg`` holds its nDCG under each alternative computed (alternative by alternative, each at
every cutoff) and the meta row's ``alt_overflow`` the alternatives whose numbers overflow a float in the bucket
(:class:`~ndcg_mlflow.kernel.NonFiniteError`); both are null otherwise. With companions, the ``query`` rows'
``duplicate_rate`` and one ``shown`` row per document shown in the bucket (:mod:`.spark_companions`)."""

# the errors a bucket reports, in the order the local engine checks them
_ERROR_ORDER = (
    "null:query_id",
    "null:doc_id",
    "null:rank",
    "null:score",
    "empty:query_id",
    "empty:doc_id",
    "nonfinite:score",
    "rank",
    "duplicate",
    "unjudged",
    "overflow",
)


def evaluate(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    spark: Any = None,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    buckets: int | None = None,
    prefilter: bool | None = None,
    driver_queries: int | None = None,
    per_query_path: str | Path | None = None,
    groups: int = GROUPS,
    driver_judgments: int | None = None,
) -> EvaluationResult:
    """Evaluate a spec on Spark: ``spark`` is a SparkSession (classic or Spark Connect; by default the active one).

    ``qrels`` and each value of ``systems`` may be Spark DataFrames (or anything :func:`ndcg_mlflow.evaluate`
    takes); sources left out are read from the spec's data section (runs by Spark: Parquet files, folders and
    globs, TREC, CSV and TSV). ``buckets`` fixes the number of query buckets (default: about
    :data:`ROWS_PER_BUCKET` run rows per bucket). ``prefilter``: the top-K pre-filter before the shuffle
    (:func:`prefilter_plan`); ``None`` applies it whenever it can, ``True`` requires it (an error says why it
    cannot apply), ``False`` never applies it. ``driver_queries``: the evaluated queries whose per-query rows
    may come back to the driver (default :data:`MAX_DRIVER_QUERIES`). Beyond it, with ``per_query_path`` (a new
    folder) the evaluation continues as :func:`evaluate_grouped` (``groups`` random groups) and returns its
    result (whose ``per_query_path`` says where the per-query rows are), after :func:`check_grouped` found
    nothing the grouped statistics cannot give; without
    ``per_query_path`` an error points to :func:`evaluate_grouped`. ``driver_judgments``: with ``per_query_path``,
    the judgments read on the driver at most (default :data:`DRIVER_JUDGMENTS`); beyond, they are read and
    checked in Spark, the evaluated queries counted there, and beyond ``driver_queries`` the grouped path uses
    them from Spark (within it, the judgments are read on the driver as always, up to :data:`MAX_JUDGMENTS`).
    """
    if buckets is not None and (isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1):
        raise SpecError("buckets", f"must be a positive integer, got {buckets!r}.")
    spark = _session(spark)
    spec = resolve_spec(spec, qrels, systems, base_dir)
    limit = MAX_DRIVER_QUERIES if driver_queries is None else driver_queries
    if per_query_path is not None and _judgments_beyond(spark, spec, qrels, columns, driver_judgments):
        in_spark = _judged_in_spark(spark, spec, qrels, columns, prefilter)
        assert in_spark.spark_side is not None
        n_evaluated = in_spark.spark_side.n_queries
        if n_evaluated > limit:
            check_grouped(spec)
            if progress:
                progress(
                    f"{n_evaluated:,} evaluated queries (counted in Spark, where the judgments are), more "
                    f"than the {limit:,} whose per-query rows come back to the driver: per-query table to "
                    f"{per_query_path}, statistics from {groups} groups"
                )
            return _evaluate_grouped(
                spark, spec, in_spark, systems, _grouped_target(per_query_path, groups), progress, buckets, groups
            )
        in_spark.release()  # within the limit: the per-query rows come to the driver, the judgments too
    judged = _judged(spark, spec, qrels, columns, prefilter)
    metric, shared, qrels_table, files = spec.metric, judged.shared, judged.qrels_table, judged.files
    query_ids, weights, judged_df, depth = judged.query_ids, judged.weights, judged.judged_df, judged.depth
    assert query_ids is not None and weights is not None and qrels_table is not None
    engine_info: dict[str, Any] = {"prefilter": judged.prefilter_info(), "judgments": "driver", "systems": {}}

    if len(query_ids) > limit and per_query_path is not None:
        check_grouped(spec)  # before any Spark job
        if progress:
            progress(
                f"{len(query_ids):,} evaluated queries, more than the {limit:,} whose per-query rows come back "
                f"to the driver: per-query table to {per_query_path}, statistics from {groups} groups"
            )
        # the judgments already read and prepared go on to the grouped path (read once)
        return _evaluate_grouped(
            spark, spec, judged, systems, _grouped_target(per_query_path, groups), progress, buckets, groups
        )
    if len(query_ids) > limit:
        raise EvaluationError(
            f"{len(query_ids):,} evaluated queries, more than the {limit:,} whose per-query rows "
            f"come back to the driver (engines.spark.MAX_DRIVER_QUERIES, or driver_queries=): "
            f"evaluate with ndcg_mlflow.engines.spark.evaluate_grouped, which writes the "
            f"per-query table to Parquet and computes the statistics from per-group sums."
        )
    systems_out: dict[str, SystemResult] = {}
    notes: list[str] = []
    sources = dict(systems) if systems is not None else dict(spec.systems)
    alts = sensitivity_alternatives(metric)[1:] if spec.sensitivity else []  # the declared numbers are the engine's own
    alt_out: dict[str, tuple[dict[tuple[str, str], np.ndarray], set[tuple[str, str]]]] = {}
    for name, source in sources.items():
        out_df, run_df, label, info, n_buckets, computed = _system_rows(
            spark, spec, name, source, shared, judged_df, depth, buckets, progress, alts, judged.companions
        )
        files.append(info)
        with comps.kept(out_df, judged.companions) as (out_df, rows_df):
            rows = rows_df.toArrow()
            duplicates = _duplicates(spark, run_df, rows) if depth is not None and not _early_error(rows) else None
            systems_out[name], alt_out[name] = _assemble(
                name, label, metric, rows, query_ids, weights, notes, duplicates, [(r, a) for r, a, _ in computed]
            )
            if judged.companions is not None:
                comps.measure(judged.companions, systems_out[name], rows, out_df, spec, query_ids, weights)
        engine_info["systems"][name] = {"rows": info.rows, "rows_shuffled": _rows_seen(rows), "buckets": n_buckets}
    by_alternative = collect_alternatives(alts, systems_out, alt_out, notes) if spec.sensitivity else None
    _files_unchanged(files)
    result = finish(spec, query_ids, weights, systems_out, files, notes, qrels_table, engine="spark")
    result.engine_info = engine_info
    return statistics(result, progress, by_alternative)


@dataclass
class _Judged:
    """The judgments as both Spark paths use them: read, gains mapped, the evaluated queries and their weights, the
    evaluated judgments as a DataFrame, and the pre-filter's depth (``None``: not applied) and why."""

    shared: dict[str, str]  # column names given for every source
    qrels_table: Table | None  # None: the judgments are in Spark (spark_side)
    files: list[FileInfo]
    query_ids: np.ndarray | None  # None: the evaluated queries are in Spark (spark_side.weights_df)
    weights: np.ndarray | None
    judged_df: Any
    depth: int | None
    reason: str
    companions: comps.CompanionFrames | None = None  # the companion files, as Spark DataFrames
    spark_side: SparkJudgments | None = None  # the judgments, evaluated queries and weights kept in Spark

    def prefilter_info(self) -> dict[str, Any]:
        return {"applied": self.depth is not None, "depth": self.depth, "reason": self.reason}

    @property
    def where(self) -> str:
        """Where the judgments were read and checked: ``driver`` or ``spark``."""
        return "driver" if self.spark_side is None else "spark"

    def release(self) -> None:
        if self.spark_side is not None:
            self.spark_side.release()


def _judged(spark: Any, spec: Spec, qrels: Any, columns: Mapping[str, str] | None, prefilter: bool | None) -> _Judged:
    shared = dict(columns or {})
    qrels_table, qrels_info = _judgments(spark, spec, qrels, shared)
    files: list[FileInfo] = [qrels_info]
    map_gains(spec.metric.gain, qrels_table.value, qrels_table)
    query_ids = evaluated_query_set(spec, qrels_table, files)
    weights = query_weights(spec, query_ids, files)
    judged_df, n_judged = _evaluated_judgments(spark, qrels_table, query_ids, spec.metric)
    companions = comps.frames(spark, spec, read_companions(spec, files))  # read as locally, after the judgments
    depth, reason = prefilter_plan(spec.metric, n_judged, prefilter)
    return _Judged(shared, qrels_table, files, query_ids, weights, judged_df, depth, reason, companions)


def _judged_in_spark(
    spark: Any, spec: Spec, qrels: Any, columns: Mapping[str, str] | None, prefilter: bool | None
) -> _Judged:
    """:func:`_judged` with the judgments, the evaluated query set and the weights read, checked and kept in Spark
    (:func:`.spark_judgments.spark_judgments`)."""
    shared = dict(columns or {})
    files: list[FileInfo] = []
    side = spark_judgments(spark, spec, qrels, shared, files)
    try:
        companions = comps.frames(spark, spec, read_companions(spec, files))
        depth, reason = prefilter_plan(spec.metric, side.n_judged, prefilter)
    except BaseException:
        side.release()
        raise
    return _Judged(shared, None, files, None, None, side.judged_df, depth, reason, companions, side)


def _judgments_beyond(
    spark: Any, spec: Spec, qrels: Any, columns: Mapping[str, str] | None, driver_judgments: int | None
) -> bool:
    """Whether the judgments are more than ``driver_judgments`` (default :data:`DRIVER_JUDGMENTS`) rows: they are
    then kept in Spark on the grouped path. A text file of at most that many bytes is within (each judgment
    takes a line); a Parquet file's rows are in its footer; else Spark counts them (up to the limit). An in-memory
    table of another library (pandas, pyarrow...) is on the driver already: never beyond."""
    limit = DRIVER_JUDGMENTS if driver_judgments is None else driver_judgments
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise SpecError("driver_judgments", f"must be a non-negative integer, got {driver_judgments!r}.")
    obj = qrels[0] if isinstance(qrels, tuple) and len(qrels) == 2 and isinstance(qrels[1], Mapping) else qrels
    if obj is not None and not is_spark_frame(obj):
        return False  # an in-memory table of another library is on the driver already
    if limit == 0:
        return True
    if obj is not None:
        return bool(obj.limit(limit + 1).count() > limit)
    q = spec.qrels
    fmt, files = source_format(q)
    if fmt in ("trec", "csv", "tsv", "jsonl"):
        try:
            if Path(q.file).stat().st_size <= limit:
                return False
        except OSError:
            return False  # (the driver's reader names the problem)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(str(f)).metadata.num_rows for f in (files or [Path(q.file)])) > limit
    frame = judgment_frame(spark, spec, None, dict(columns or {}))[0]
    return bool(frame.limit(limit + 1).count() > limit)


def _system_rows(
    spark: Any,
    spec: Spec,
    name: str,
    source: Any,
    shared: dict[str, str],
    judged_df: Any,
    depth: int | None,
    buckets: int | None,
    progress,
    alternatives: Sequence[tuple[str, str, Metric]] = (),
    companions: comps.CompanionFrames | None = None,
) -> tuple[Any, Any, str, FileInfo, int, list]:
    """One system's bucket rows (:data:`RESULT_SCHEMA`) as a DataFrame, not yet computed; its run DataFrame,
    label, file information, bucket count and which of ``alternatives`` (sensitivity's, without the declared
    metric) the rows hold (:func:`computable`)."""
    if progress:
        progress(f"reading system '{name}' on Spark")
    run_df, label, info, has_rank = _run_frame(spark, spec, name, source, shared)
    n_buckets = buckets or max(1, math.ceil(info.rows / ROWS_PER_BUCKET))
    if progress:
        progress(f"computing nDCG of '{name}' on Spark ({n_buckets} query buckets)")
    alts = computable(alternatives, has_rank)
    metrics = [m for _, _, m in alts]
    shuffled = (
        _prefiltered(run_df, judged_df, spec.metric, depth, has_rank, metrics)
        if depth is not None
        else run_df.withColumn("_extra", _zero()).withColumn("_chunk", _zero())
    )
    shuffled = comps.with_groups(shuffled, companions)
    plan = companions.plan if companions is not None else None
    out = _bucket_results(shuffled, judged_df, n_buckets, name, label, spec.metric, has_rank, metrics, plan)
    return out, run_df, label, info, n_buckets, alts


def computable(alternatives: Sequence[tuple[str, str, Metric]], has_rank: bool) -> list[tuple[str, str, Metric]]:
    """The alternatives (rule, label, metric) the Spark engine computes for a run: all of them, except, for a run
    without a rank column, those ordering ties as displayed (``ties: displayed_order`` then means the rows' line
    order, which Spark does not keep; the local engine would use it)."""
    return [a for a in alternatives if has_rank or not keeps_displayed_order(a[2].ties)]


def prefilter_plan(metric: Metric, n_judgments: int, wanted: bool | None = None) -> tuple[int | None, str]:
    """The depth of the top-K pre-filter (``None``: not applied) and why.

    It applies when every cutoff is finite (``all`` reads whole lists) and the evaluated judgments are few
    enough to join to the run rows before the shuffle (:data:`PREFILTER_MAX_JUDGMENTS`). The depth L is the
    largest cutoff, or the documents shown per query when more (:func:`~ndcg_mlflow.evaluation.display_depth`).
    """
    if wanted is not None and not isinstance(wanted, bool):
        raise SpecError("prefilter", f"is True, False or None, got {wanted!r}.")
    finite = [k for k in metric.cutoffs if k is not None]
    why = None
    if wanted is False:
        why = "not asked for (prefilter=False)"
    elif len(finite) < len(metric.cutoffs):
        why = "the cutoff 'all' needs every returned row"
    elif n_judgments > PREFILTER_MAX_JUDGMENTS:
        why = (
            f"{n_judgments:,} evaluated judgments, more than the {PREFILTER_MAX_JUDGMENTS:,} joined to the run "
            f"rows before the shuffle"
        )
    if why is not None:
        if wanted:
            raise SpecError("prefilter", f"the top-K pre-filter cannot apply: {why}.")
        return None, why
    depth = min(max(finite + [display_depth(metric)]), 1 << 62)
    return depth, f"every cutoff is finite: each query's rows that can reach its top {depth} are shuffled"


def session(remote: str | None = None) -> Any:
    """A SparkSession: on the Spark Connect server ``remote`` (``sc://host:15002``), else the classic session
    that spark-submit or the environment configures (``local[*]`` by default). A session started here runs its
    Python workers on this interpreter (``sys.executable``: the tool's, which imports ``ndcg_mlflow``, where the
    ``python3`` on PATH may not), unless ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` names another."""
    import os
    import sys

    _session(False)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if remote:
        return SparkSession.builder.remote(remote).getOrCreate()
    started = SparkContext._active_spark_context is None
    spark = SparkSession.builder.appName("ndcg-mlflow").getOrCreate()
    if started and not os.environ.get("PYSPARK_PYTHON"):
        sc = spark.sparkContext
        sc.pythonExec = sc.getConf().get("spark.pyspark.python") or sys.executable
    return spark


def _session(spark: Any) -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EvaluationError(
            "the Spark engine needs pyspark: pip install 'ndcg-mlflow[spark]' (and Java 17; check with java -version)."
        ) from None
    if spark is False:  # only checking that pyspark is there
        return None
    if callable(spark):  # a function making the session, called once Spark is needed (a session is not callable)
        spark = spark()
    if spark is None:
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise EvaluationError(
                "the Spark engine needs a SparkSession: pass spark=session (or start one before evaluating)."
            )
    return spark


def active_session(spark: Any = None) -> Any:
    """``spark``, or the active SparkSession; an error saying what is missing when pyspark or a session is."""
    return _session(spark)


def read_source(spark: Any, source: Any) -> Any:
    """A data source of the spec read by Spark as a run is (a Parquet file, folder or glob, a Delta table at its
    version, JSONL), its columns as stored: the candidates of a model system scored on Spark."""
    return read_run_file(spark, source)


# --------------------------------------------------------------------------- judgments, on the driver


def _judgments(spark: Any, spec: Spec, qrels: Any, shared: dict[str, str]) -> tuple[Table, FileInfo]:
    from ...spec import IN_MEMORY

    if qrels is None:
        q = spec.qrels
        table, sha = read_with_digest(q.file, q.version, lambda: read_qrels(q.file, q.format, q.columns, q.version))
        _check_judgment_count(len(table), q.declared)
        return table, FileInfo("qrels", str(q.path), q.declared, sha, len(table))
    obj, mapping = qrels, shared
    if isinstance(qrels, tuple) and len(qrels) == 2 and isinstance(qrels[1], Mapping):
        obj, mapping = qrels[0], {**shared, **qrels[1]}
    if is_spark_frame(obj):
        n = obj.limit(MAX_JUDGMENTS + 1).count()
        _check_judgment_count(n, "qrels")
        obj = obj.toArrow()
    table = input_table((obj, mapping), "qrels", "qrels", {})
    _check_judgment_count(len(table), "qrels")
    return table, FileInfo("qrels", "", IN_MEMORY, table.digest or "", len(table))


def _check_judgment_count(n: int, label: str) -> None:
    if n > MAX_JUDGMENTS:
        raise DataError(
            label,
            f"more than {MAX_JUDGMENTS:,} judgments: the Spark engine reads the judgments on "
            f"the driver (it assumes they are small next to the runs); this many is beyond "
            f"that limit.",
        )


def _evaluated_judgments(spark: Any, qrels: Table, query_ids: np.ndarray, metric: Metric) -> tuple[Any, int]:
    """The judgments of the evaluated queries as a Spark DataFrame (query_id, doc_id, grade) and their count,
    after the local checks of the whole (gains whose sums overflow stop here, naming the query and line)."""
    import pyarrow as pa

    judgments(qrels, query_ids, metric)  # the checks of the local engine, on all the evaluated judgments
    keep = index_in(qrels.query.values, query_ids)[qrels.query.codes] >= 0
    values = pa.array(list(qrels.query.values), type=pa.string())
    table = pa.table(
        {
            "query_id": values.take(pa.array(qrels.query.codes[keep], type=pa.int32())),
            "doc_id": _plain(qrels.doc.array.filter(pa.array(keep))),
            "grade": pa.array(qrels.value[keep], type=pa.float64()),
        }
    )
    return spark.createDataFrame(table), int(keep.sum())


def _plain(array: Any) -> Any:
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.cast(pa.string())


# --------------------------------------------------------------------------- runs, in Spark


def _run_frame(
    spark: Any, spec: Spec, name: str, source: Any, shared: dict[str, str]
) -> tuple[Any, str, FileInfo, bool]:
    """A system's rows as a DataFrame of query_id, doc_id (strings), score and rank (doubles; rank all NULL when
    the source has none), its label for errors, its file information and whether it has ranks."""
    from pyspark.sql import functions as F

    from ...readers.accept import refusals, required_columns
    from ...spec import IN_MEMORY

    label = f"systems[{name!r}]"
    mapping = shared
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], Mapping):
        source, mapping = source[0], {**shared, **source[1]}
    version = None
    if is_spark_frame(source):
        df, path, declared = source, "", IN_MEMORY
    elif hasattr(source, "declared") and getattr(source, "path", None) is not None:  # a spec Source
        label = str(source.path)
        if reads_locally(source):
            return _locally_read_run(spark, spec, name, source, label)
        df = read_run_file(spark, source)
        path, declared, mapping = str(source.path), source.declared, dict(source.columns)
        version = source.version
    else:  # an in-memory table of another library: checked locally, then handed to Spark
        import pyarrow as pa

        t = input_table((source, mapping), "run", label, {})
        cols = {
            "query_id": pa.array(list(t.query.values), type=pa.string()).take(pa.array(t.query.codes)),
            "doc_id": _plain(t.doc.array),
            "score": pa.array(t.value, type=pa.float64()),
        }
        if t.rank is not None:
            cols["rank"] = pa.array(t.rank, type=pa.float64())
        elif needs_row_order(spec.metric.ties, spec.sensitivity):  # the rows' order (the shuffle's is not)
            cols["rank"] = pa.array(np.arange(len(t), dtype=np.float64))
        if _keeps_ties_in_order(spec):  # tied rows in the table's order, as locally
            cols["_order"] = pa.array(np.arange(len(t), dtype=np.int64))
        df = spark.createDataFrame(pa.table(cols))
        return df, label, FileInfo(f"system:{name}", "", IN_MEMORY, t.digest or "", len(t)), "rank" in cols

    unknown = [k for k in mapping if k not in ("query_id", "doc_id", "grade", "score", "rank")]
    if unknown:
        raise SpecError(
            "columns", f"unknown column {unknown[0]!r}; a column mapping names query_id, doc_id, grade, score or rank."
        )
    inverse = {v: k for k, v in mapping.items() if k in ("query_id", "doc_id", "score", "rank")}
    present = [inverse.get(c, c) for c in df.columns]
    with refusals(label):
        value_col, rank_col = required_columns("run", present)
    types = dict(df.dtypes)
    selected = []
    for c in ("query_id", "doc_id", value_col, rank_col):
        if c is None:
            continue
        src = mapping.get(c, c)
        t = types[src]
        if c in ("query_id", "doc_id"):
            if not column_type_ok(t, numeric=False):
                raise DataError(label, column_type(c, t, numeric=False))
            selected.append(F.col(src).cast("string").alias(c))
        else:
            if not column_type_ok(t, numeric=True):
                raise DataError(label, column_type(c, t, numeric=True))
            selected.append(F.col(src).cast("double").alias(c))
    # the rows' order in the files: the displayed order, whose key stands in for a missing rank (under ties:
    # displayed_order and for sensitivity's displayed_order alternative), and the order of tied rows (a model's
    # scored rows have no order: Spark's tasks wrote them)
    ordered = version is None and declared != IN_MEMORY and getattr(source, "model", None) is None
    wants_rank = rank_col is None and needs_row_order(spec.metric.ties, spec.sensitivity)
    if ordered and (wants_rank or _keeps_ties_in_order(spec)):
        df = _in_file_order(spark, df, selected, _source_files(source), label)
        if wants_rank:
            df, rank_col = df.withColumn("rank", F.col("_order").cast("double")), "rank"
    elif keeps_displayed_order(spec.metric.ties) and rank_col is None:
        raise SpecError(
            "metric.ties",
            f"{label} has no rank column, and ties: displayed_order then means the "
            f"rows' order, which Spark keeps only for the files it reads itself "
            f"(not for a DataFrame or a Delta table); give a rank column or "
            f"another tie rule.",
        )
    else:
        df = df.select(*selected)
    if value_col is None:
        df = df.withColumn("score", -F.col("rank"))
    if rank_col is None:
        df = df.withColumn("rank", F.lit(None).cast("double"))
    digest = frame_digest(df) if declared == IN_MEMORY else None
    rows = digest[1] if digest else df.count()
    sha = digest[0] if digest else sha256_file(path, version)
    has_rank = rank_col is not None
    return df, label, FileInfo(f"system:{name}", path, declared, sha, rows), has_rank


def _locally_read_run(spark: Any, spec: Spec, name: str, source: Any, label: str) -> tuple[Any, str, FileInfo, bool]:
    """:func:`_run_frame` for a file the local engine's reader reads in a Spark task
    (:func:`.spark_sources.local_reader_frame`): its rows checked as locally, with the local messages; the rank
    is read when some numbers order ties by it (as locally: sensitivity keeps every column); a run without a rank
    column is in its rows' order (``_order``) where that order is the displayed one or orders tied rows."""
    from pyspark.sql import functions as F

    displayed = needs_row_order(spec.metric.ties, spec.sensitivity)
    df, rows, has_rank = local_reader_frame(spark, source, "run", displayed)
    if not has_rank and displayed:
        df, has_rank = df.withColumn("rank", F.col("_order").cast("double")), True
    elif not _keeps_ties_in_order(spec):
        df = df.drop("_order")
    sha = sha256_file(source.file, source.version)
    return df, label, FileInfo(f"system:{name}", str(source.path), source.declared, sha, rows), has_rank


def _keeps_ties_in_order(spec: Spec) -> bool:
    """Whether the order of tied rows shows in the results beyond the tie rule's own order: under ``ties:
    average`` it decides which documents of a tied group a top list shows (and so the companion measures)."""
    return averages_ties(spec.metric.ties)


def _source_files(source: Any) -> list[Path]:
    """The files of a spec source in the order the local readers read them (a Parquet folder's or glob's files
    sorted; else the one file)."""
    from ...paths import dataset_files

    files = dataset_files(source.file) if source.format in ("auto", "parquet") else None
    return files or [Path(source.file)]


ORDER_ROW_BITS = 33  # monotonically_increasing_id: a task's row count in its lower 33 bits
ORDER_MAX_BLOCKS = 1 << 20  # blocks of a source ordered exactly (block place * 2^33 + row < 2^53)


def _in_file_order(spark: Any, df: Any, selected: list[Any], files: list[Path], label: str) -> Any:
    """``df.select(*selected)`` with a column ``_order``: each row's place in the rows' order in the files (the
    files in the local readers' order, each one's rows in their order), as the local engine reads them: the
    displayed order of a run without a rank column, and the order of tied rows under ``ties: average`` (which of
    a tied group's documents the top lists and the companion measures show).

    Spark splits each file into blocks (at most ``spark.sql.files.maxPartitionBytes``; Parquet at row groups)
    and reads each block whole, in order, in one task, so a row's place is (its block's place among the
    blocks, its place in its task's rows): the blocks' places from their files and starts
    (``_metadata.file_path``, ``_metadata.file_block_start``: one small job), the rows' from
    ``monotonically_increasing_id``, whose lower 33 bits count the task's rows. Both in one integer below 2^53
    (a double holds it exactly, as a rank)."""
    import os
    from urllib.parse import unquote, urlparse

    import pyarrow as pa
    from pyspark.sql import functions as F

    names = df.select(*selected).columns
    meta = df.select(
        *selected,
        F.col("_metadata.file_path").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_seq"),
    )
    place_of = {os.path.realpath(f): i for i, f in enumerate(files)}
    keyed = []
    for r in meta.select("_file", "_block").distinct().collect():
        where = place_of.get(os.path.realpath(unquote(urlparse(r["_file"]).path)))
        if where is None:  # pragma: no cover - Spark reads the files it was given
            raise EvaluationError(f"{label}: Spark read {r['_file']}, which is not one of the source's files.")
        keyed.append((where, int(r["_block"]), r["_file"]))
    keyed.sort()
    if len(keyed) >= ORDER_MAX_BLOCKS:
        raise EvaluationError(
            f"{label} is read by Spark in {len(keyed):,} blocks, more than the "
            f"{ORDER_MAX_BLOCKS:,} whose rows' order stands in for the missing rank column "
            f"(ties: displayed_order): give a rank column, or larger blocks "
            f"(spark.sql.files.maxPartitionBytes)."
        )
    places = spark.createDataFrame(
        pa.table(
            {
                "_file": pa.array([k[2] for k in keyed], type=pa.string()),
                "_block": pa.array([k[1] for k in keyed], type=pa.int64()),
                "_place": pa.array(range(len(keyed)), type=pa.int64()),
            }
        )
    )
    row = F.col("_seq").bitwiseAND(F.lit((1 << ORDER_ROW_BITS) - 1))
    order = F.col("_place") * F.lit(1 << ORDER_ROW_BITS) + row
    return meta.join(F.broadcast(places), ["_file", "_block"]).select(*names, order.alias("_order"))


# --------------------------------------------------------------------------- the top-K pre-filter, before the shuffle


def _zero() -> Any:
    from pyspark.sql import functions as F

    return F.lit(0).cast("long")


def _prefiltered(
    run_df: Any, judged_df: Any, metric: Metric, depth: int, has_rank: bool, alternatives: Sequence[Metric] = ()
) -> Any:
    """The run rows that can decide some query's top ``depth`` under ``metric`` or any of ``alternatives``
    (:func:`prefilter_rows`), filtered where they are read: each row gets its grade by a broadcast join of the
    evaluated judgments (no shuffle of the run)."""
    from pyspark.sql import functions as F

    ordered = "_order" in run_df.columns
    graded = run_df.join(F.broadcast(judged_df), on=["query_id", "doc_id"], how="left")
    graded = graded.select("query_id", "doc_id", "score", "rank", "grade", *(["_order"] if ordered else []))
    chunk_rows = PREFILTER_CHUNK_ROWS

    def chunks(batches):
        import os

        import pyarrow as pa

        def done(buffered):
            chunk = int.from_bytes(os.urandom(8), "little") >> 1
            return prefilter_rows(
                pa.Table.from_batches(buffered), metric, depth, has_rank, chunk, alternatives
            ).to_batches()

        buffered: list[Any] = []
        n = 0
        for batch in batches:
            buffered.append(batch)
            n += batch.num_rows
            if n >= chunk_rows:
                yield from done(buffered)
                buffered, n = [], 0
        if buffered:
            yield from done(buffered)

    return graded.mapInArrow(chunks, ORDERED_RUN_SCHEMA if ordered else RUN_SCHEMA)


def _run_type(ordered: bool = False) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("query_id", pa.string()),
            ("doc_id", pa.string()),
            ("score", pa.float64()),
            ("rank", pa.float64()),
            ("_extra", pa.int64()),
            ("_chunk", pa.int64()),
            *([("_order", pa.int64())] if ordered else []),
        ]
    )


def _within(query: np.ndarray, value: np.ndarray, mask: np.ndarray, depth: int, distinct: bool = False) -> np.ndarray:
    """Rows of ``mask`` with fewer than ``depth`` rows of ``mask`` of the same query holding a strictly larger
    ``value`` (every row tied with the depth-th value is kept); with ``distinct``, the first ``depth`` rows of
    each query by ``value`` (ties in any order)."""
    keep = np.zeros(query.size, dtype=bool)
    at = np.flatnonzero(mask)
    if not at.size:
        return keep
    order = at[np.lexsort((-value[at], query[at]))]
    q, v = query[order], value[order]
    new_query = np.r_[True, q[1:] != q[:-1]]
    pos = np.arange(q.size) - np.maximum.accumulate(np.where(new_query, np.arange(q.size), 0))
    if not distinct:  # a row's count of larger values is the position of the first row of its tie
        new_tie = new_query | np.r_[True, v[1:] != v[:-1]]
        pos = pos[np.maximum.accumulate(np.where(new_tie, np.arange(q.size), 0))]
    keep[order[pos < depth]] = True
    return keep


def prefilter_rows(
    rows: Any, metric: Metric, depth: int, has_rank: bool, chunk: int = 0, alternatives: Sequence[Metric] = ()
) -> Any:
    """A chunk of run rows (query_id, doc_id, score, rank, grade: null when unjudged) -> the rows that can decide
    their query's numbers at every cutoff up to ``depth`` (:data:`RUN_SCHEMA`), whatever the other chunks hold.

    Every rule decides a query's numbers from its top ``depth`` rows, so a row is kept when, in its query
    within this chunk (and so in the whole, which has at least as many rows above it):

    * fewer than ``depth`` rows score strictly higher (the top ``depth`` under every tie rule, with the whole
      tied group at the cut, which ``average`` spreads; judged coverage is over these rows);
    * under ``unjudged: condense``, it is judged and fewer than ``depth`` judged rows score higher;
    * its gain is not 0 and fewer than ``depth`` rows have a larger gain (the ideal of the returned documents,
      ``idcg_candidates``); among the rows of gain 0 (judged or not; judged only under ``condense``) the first
      ``depth`` by score are kept, as the ideal list only counts them;
    * under ``unjudged: error``, it is unjudged (the error counts them all).

    The rows left out are counted on a kept row of their query (``_extra``), so that ``n_returned`` is the
    whole list's length. A chunk with a row the checks refuse (null or empty ids, a score that is not finite,
    a rank that is not an integer, a document twice) is passed whole, so that the checks after the shuffle
    find every such row, as without the filter. Every row carries ``chunk``: a query whose rows all come from
    one chunk had all its rows checked for duplicates here; the others are checked in Spark
    (:func:`_duplicates`).

    ``alternatives``: other metrics whose numbers are computed from the same rows (sensitivity's alternatives);
    a row is kept when any of them, or ``metric``, needs it by the rules above (the tie rules, the ideals and
    the rules of excluded queries need no other rows; the gain and the unjudged rule pick them). Keeping more
    rows than one metric needs changes none of its numbers, as the rows kept by other chunks do not.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows.num_rows
    passed = rows.select(["query_id", "doc_id", "score", "rank"])
    ordered = "_order" in rows.column_names  # the rows' order in the input, passed on
    order = [rows.column("_order").cast(pa.int64())] if ordered else []
    if n == 0 or _run_errors(rows, has_rank):
        return pa.table(
            [
                *[_plain(c) if i < 2 else c.cast(pa.float64()) for i, c in enumerate(passed.columns)],
                pa.array(np.zeros(n, dtype=np.int64)),
                pa.array(np.full(n, chunk, dtype=np.int64)),
                *order,
            ],
            schema=_run_type(ordered),
        )
    enc = pc.dictionary_encode(_plain(rows.column("query_id")))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    query = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    score = np.asarray(pc.cast(rows.column("score"), pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    grade = rows.column("grade")
    judged = np.asarray(grade.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    grades = (
        np.asarray(pc.cast(grade, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        if judged.any()
        else np.zeros(n, dtype=np.float64)
    )
    keep = _within(query, score, np.ones(n, dtype=bool), depth)
    seen: list[tuple[Any, str]] = []
    for i, m in enumerate([metric, *alternatives]):
        if (m.gain, m.unjudged) in seen:  # the rows kept depend on these two rules only
            continue
        seen.append((m.gain, m.unjudged))
        gain = np.zeros(n, dtype=np.float64)
        if judged.any():
            try:
                gain[judged] = map_gains(m.gain, grades[judged])
            except NonFiniteError:
                if i == 0:
                    raise
                continue  # an alternative whose gains overflow: undefined everywhere, whatever the rows
        condense = condenses(m.unjudged)
        zero = gain == 0
        keep |= _within(query, gain, ~zero & judged, depth)
        keep |= _within(query, score, zero & judged if condense else zero, depth, distinct=True)
        if condense:
            keep |= _within(query, score, judged, depth)
    if stops(metric.unjudged):
        keep |= ~judged
    dropped = np.bincount(query[~keep], minlength=len(enc.dictionary))
    extra = np.zeros(n, dtype=np.int64)
    kept = np.flatnonzero(keep)
    first = np.full(len(enc.dictionary), -1, dtype=np.int64)
    first[query[kept[::-1]]] = kept[::-1]  # the first kept row of each query (every query keeps one)
    has = dropped > 0
    extra[first[has]] = dropped[has]
    mask = pa.array(keep)
    return pa.table(
        [
            _plain(passed.column("query_id").filter(mask)),
            _plain(passed.column("doc_id").filter(mask)),
            pc.cast(passed.column("score").filter(mask), pa.float64()),
            pc.cast(passed.column("rank").filter(mask), pa.float64()),
            pa.array(extra[kept]),
            pa.array(np.full(kept.size, chunk, dtype=np.int64)),
            *[c.filter(mask) for c in order],
        ],
        schema=_run_type(ordered),
    )


def _duplicates(spark: Any, run_df: Any, rows: Any) -> tuple[list[dict[str, Any]], bool]:
    """Documents listed twice for a query among the rows the buckets did not check (the pre-filter leaves
    rows out): the queries whose rows were filtered in more than one chunk (the buckets' ``split`` rows; the
    rest were checked whole, in their chunk and bucket), checked in Spark on their rows; beyond
    :data:`SPLIT_CHECK_MAX` such queries, every row, grouped by a 64-bit hash of (query, document) with the few
    hashes seen twice checked on the rows themselves. The error of the smallest such (query, document) with
    the count of its repeated rows, and whether it replaces the buckets' own duplicate errors (every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    split = rows.filter(pc.equal(rows.column("kind"), "split")).column("query_id")
    if len(split) == 0:
        return [], False
    every = len(split) > SPLIT_CHECK_MAX
    if every:
        keyed = run_df.select("query_id", "doc_id", F.xxhash64("query_id", "doc_id").alias("_h"))
        twice = keyed.groupBy("_h").count().where(F.col("count") > 1).select("_h")
        pairs = keyed.join(F.broadcast(twice), on="_h")
    else:
        ids = spark.createDataFrame(pa.table({"query_id": _plain(split)}))
        pairs = run_df.select("query_id", "doc_id").join(F.broadcast(ids), on="query_id")
    pairs = pairs.groupBy("query_id", "doc_id").count().where(F.col("count") > 1)
    found = pairs.agg(
        F.min(F.struct("query_id", "doc_id")).alias("first"), F.sum(F.col("count") - 1).alias("repeated")
    ).collect()[0]
    if found["first"] is None:
        return [], every
    return [_error("duplicate", found["first"]["query_id"], found["first"]["doc_id"], int(found["repeated"]))], every


def _early_error(rows: Any) -> bool:
    """Whether a bucket found a problem that the local engine reports before duplicates."""
    import pyarrow.compute as pc

    codes = rows.filter(pc.equal(rows.column("kind"), "error")).column("code").to_pylist()
    return any(_ERROR_ORDER.index(c) < _ERROR_ORDER.index("duplicate") for c in codes)


def _rows_seen(rows: Any) -> int:
    """The run rows the buckets received (after the pre-filter, when it applies)."""
    import pyarrow.compute as pc

    meta = rows.filter(pc.equal(rows.column("kind"), "meta"))
    return int(pc.sum(meta.column("n_returned")).as_py() or 0)


# --------------------------------------------------------------------------- per bucket, in the executors


def _bucket_results(
    run_df: Any,
    judged_df: Any,
    n_buckets: int,
    name: str,
    label: str,
    metric: Metric,
    has_rank: bool,
    alternatives: Sequence[Metric] = (),
    companions: comps.CompanionPlan | None = None,
) -> Any:
    """Every evaluated query's numbers (one row per query; with ``alternatives``, its nDCG under each of them
    too), error and meta rows: a DataFrame."""
    from pyspark.sql import functions as F

    def bucketed(df):
        return df.withColumn("_bucket", F.pmod(F.xxhash64(F.col("query_id")), F.lit(n_buckets)))

    depth = display_depth(metric)

    def per_bucket(run, judged):
        return bucket_rows(run, judged, name, label, metric, depth, has_rank, alternatives, companions)

    return (
        bucketed(run_df)
        .groupBy("_bucket")
        .cogroup(bucketed(judged_df).groupBy("_bucket"))
        .applyInArrow(per_bucket, RESULT_SCHEMA)
    )


def _result_type() -> Any:
    import pyarrow as pa

    d = pa.list_(pa.float64())
    return pa.schema(
        [
            ("kind", pa.string()),
            ("query_id", pa.string()),
            ("n_returned", pa.int64()),
            ("dcg", d),
            ("idcg", d),
            ("idcg_candidates", d),
            ("ndcg", d),
            ("judged_coverage", d),
            ("status", pa.list_(pa.int8())),
            ("top_doc", pa.list_(pa.string())),
            ("top_pos", pa.list_(pa.int64())),
            ("top_grade", d),
            ("code", pa.string()),
            ("doc_id", pa.string()),
            ("value", pa.float64()),
            ("count", pa.int64()),
            ("examples", pa.list_(pa.string())),
            ("alt_ndcg", d),
            ("alt_overflow", pa.list_(pa.int32())),
            ("duplicate_rate", d),
        ]
    )


def _rows(records: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    schema = _result_type()
    return pa.Table.from_pylist([{f: r.get(f) for f in schema.names} for r in records], schema=schema)


def _error(code: str, query: str | None, doc: str | None, count: int, value: float | None = None) -> dict[str, Any]:
    return {"kind": "error", "code": code, "query_id": query, "doc_id": doc, "count": count, "value": value}


def bucket_rows(
    run: Any,
    judged: Any,
    name: str,
    label: str,
    metric: Metric,
    depth: int,
    has_rank: bool,
    alternatives: Sequence[Metric] = (),
    companions: comps.CompanionPlan | None = None,
) -> Any:
    """One bucket: its run rows and evaluated judgments (pyarrow Tables) -> result rows (:data:`RESULT_SCHEMA`).

    The bucket's evaluated queries are the queries of its judgments (every evaluated query is judged);
    each gets one row, computed by the local join and kernel (and the companion measures of ``companions``,
    :func:`.spark_companions.bucket_measures`). Each of ``alternatives`` (sensitivity's other
    metrics) is computed by the same kernel on the same joined rows: its nDCG per query and cutoff goes in
    ``alt_ndcg``; one whose numbers overflow a float is NaN there and listed in the meta row's
    ``alt_overflow`` (the driver then makes it undefined for every query and system, as the local engine
    does)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    run = comps.in_source_order(run)  # with companions: tied rows in the input's order (spark_companions)
    split_rows, whole = _split_queries(run)
    errors = _run_errors(run, has_rank, whole)
    if errors:
        return pa.concat_tables(
            [_rows(errors + [{"kind": "meta", "count": 0, "value": 0.0, "n_returned": run.num_rows}]), split_rows]
        )
    q_col = _plain(run.column("query_id"))
    run_queries = pc.unique(q_col)
    jq = _plain(judged.column("query_id"))
    bucket_ids = np.empty(0, dtype=object)
    if judged.num_rows:
        bucket_ids = np.asarray(sorted(pc.unique(jq).to_pylist()), dtype=object)
    unknown = sorted(set(run_queries.to_pylist()) - set(bucket_ids.tolist()))
    meta = {
        "kind": "meta",
        "count": len(unknown),
        "value": float(len(run_queries)),
        "examples": (unknown or sorted(run_queries.to_pylist()))[:3],
        "n_returned": run.num_rows,
    }
    if not bucket_ids.size:
        return pa.concat_tables([_rows([meta]), split_rows])
    qrels = _local_table("qrels", "qrels", jq, judged.column("grade"), None, judged.column("doc_id"))
    rank = run.column("rank") if has_rank else None
    run_table = _local_table(label, "run", q_col, run.column("score"), rank, run.column("doc_id"))
    judged_index = judgments(qrels, bucket_ids, metric)
    prep, _ = join(name, run_table, judged_index)
    try:
        scored = score_queries(metric, prep, judged_index.catalog, depth, alternatives)
    except UnjudgedError as exc:
        return _rows([_error("unjudged", exc.query, exc.doc, exc.count)])
    except NonFiniteError as exc:
        return _rows([_error("overflow", str(bucket_ids[exc.queries[0]]), None, int(exc.queries.size))])
    qr = scored.result
    if "_extra" in run.column_names:  # rows the pre-filter left out still count in the list's length
        extra = np.asarray(run.column("_extra").to_numpy(zero_copy_only=False), dtype=np.int64)
        some = np.flatnonzero(extra)
        if some.size:
            at = index_in(np.asarray(q_col.take(pa.array(some)).to_pylist(), dtype=object), bucket_ids)
            np.add.at(qr.n_returned, at[at >= 0], extra[some][at >= 0])
    alt_ndcg = None
    if scored.alternatives is not None:  # (queries, alternatives x cutoffs)
        alt_ndcg = scored.alternatives.reshape(scored.alternatives.shape[0], -1)
        if scored.overflowed:
            meta["alt_overflow"] = scored.overflowed
    rate, shown = None, _rows([])
    if companions is not None:
        rate, shown_docs, shown_pos = comps.bucket_measures(companions, run, prep, qr, bucket_ids.size)
        if shown_docs is not None and shown_pos is not None:
            shown = _shown_rows(shown_docs, shown_pos)
    top = scored.top
    bounds = np.searchsorted(top.query, np.arange(bucket_ids.size + 1))
    return pa.concat_tables(
        [
            _rows([meta]),
            _query_rows(bucket_ids, qr, top.doc, top.position, top.grade, bounds, alt_ndcg, rate),
            split_rows,
            shown,
        ]
    )


def _shown_rows(docs: Any, best: np.ndarray) -> Any:
    """The ``shown`` rows of a bucket: each document shown (``doc_id``) and its best position (``count``)."""
    import pyarrow as pa

    n = len(docs)
    columns = {
        "kind": pa.array(np.full(n, "shown", dtype=object), type=pa.string()),
        "doc_id": _plain(docs),
        "count": pa.array(best, type=pa.int64()),
    }
    schema = _result_type()
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, type=f.type)) for f in schema}, schema=schema)


def _query_rows(
    ids: np.ndarray,
    qr: QueryResult,
    docs: list[str],
    pos: np.ndarray,
    grades: np.ndarray,
    bounds: np.ndarray,
    alt_ndcg: np.ndarray | None = None,
    duplicate_rate: np.ndarray | None = None,
) -> Any:
    """The ``query`` rows of a bucket, built column by column (no Python object per query); ``alt_ndcg``: each
    query's nDCG under the alternatives, (queries, alternatives x cutoffs)."""
    import pyarrow as pa

    n, nc = qr.ndcg.shape
    per_cutoff = pa.array(np.arange(0, n * nc + 1, nc, dtype=np.int32))
    top_at = pa.array(bounds.astype(np.int32))

    def cut(values: np.ndarray, dtype: Any) -> Any:
        return pa.ListArray.from_arrays(per_cutoff, pa.array(np.ascontiguousarray(values).ravel(), type=dtype))

    columns = {
        "kind": pa.array(np.full(n, "query", dtype=object), type=pa.string()),
        "query_id": pa.array(list(ids), type=pa.string()),
        "n_returned": pa.array(qr.n_returned.astype(np.int64)),
        "dcg": cut(qr.dcg, pa.float64()),
        "idcg": cut(qr.idcg, pa.float64()),
        "idcg_candidates": cut(qr.idcg_candidates, pa.float64()),
        "ndcg": cut(qr.ndcg, pa.float64()),
        "judged_coverage": cut(qr.judged_coverage, pa.float64()),
        "status": cut(qr.status.astype(np.int8), pa.int8()),
        "top_doc": pa.ListArray.from_arrays(top_at, pa.array(docs, type=pa.string())),
        "top_pos": pa.ListArray.from_arrays(top_at, pa.array(pos.astype(np.int64))),
        "top_grade": pa.ListArray.from_arrays(top_at, pa.array(grades.astype(np.float64))),
    }
    if alt_ndcg is not None:
        width = alt_ndcg.shape[1]
        columns["alt_ndcg"] = pa.ListArray.from_arrays(
            pa.array(np.arange(0, n * width + 1, width, dtype=np.int32)),
            pa.array(np.ascontiguousarray(alt_ndcg).ravel(), type=pa.float64()),
        )
    if duplicate_rate is not None:
        columns["duplicate_rate"] = cut(duplicate_rate, pa.float64())
    schema = _result_type()
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, type=f.type)) for f in schema}, schema=schema)


def _local_table(label: str, kind: str, query: Any, value: Any, rank: Any, doc: Any = None) -> Table:
    """A bucket's rows as the readers' :class:`~ndcg_mlflow.readers.Table` (already checked)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(query):
        enc = pc.dictionary_encode(query)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        ids = Ids(
            enc.indices.to_numpy(zero_copy_only=False).astype(np.int32),
            np.asarray(enc.dictionary.to_pylist(), dtype=object),
        )
    else:
        ids = Ids(np.zeros(0, dtype=np.int32), np.empty(0, dtype=object))
    docs = Strings(_plain(doc)) if doc is not None else Strings(pa.array([], type=pa.string()))
    numbers = np.asarray(pc.cast(value, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    ranks = (
        None
        if rank is None
        else np.asarray(pc.cast(rank, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    )
    return Table(label, kind, ids, docs, numbers, ranks, "table")


def _split_queries(run: Any) -> tuple[Any, Any]:
    """The ``split`` rows of the queries whose rows come from more than one pre-filter chunk, and the mask of
    the rows of the other queries (all of whose rows are here, so their duplicates can be checked here)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = run.num_rows
    if "_chunk" not in run.column_names or n == 0 or run.column("query_id").null_count:  # nulls: refused anyway
        return _rows([]), np.ones(n, dtype=bool)
    enc = pc.dictionary_encode(_plain(run.column("query_id")))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    q = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    chunk = np.asarray(run.column("_chunk").to_numpy(zero_copy_only=False), dtype=np.int64)
    order = np.lexsort((chunk, q))
    qs, cs = q[order], chunk[order]
    new_pair = np.r_[True, (qs[1:] != qs[:-1]) | (cs[1:] != cs[:-1])]
    chunks_per_query = np.bincount(qs[new_pair], minlength=len(enc.dictionary))
    split = np.flatnonzero(chunks_per_query > 1)
    if not split.size:
        return _rows([]), np.ones(n, dtype=bool)
    ids = enc.dictionary.take(pa.array(split))
    rows = _rows([{"kind": "split", "query_id": x} for x in ids.to_pylist()])
    return rows, chunks_per_query[q] <= 1


def _run_errors(run: Any, has_rank: bool, checked_twice: Any = None) -> list[dict[str, Any]]:
    """The first problem of a bucket's run rows, by the local engine's order of checks (none: empty list);
    documents twice are looked for among the rows of ``checked_twice`` (a mask; default every row)."""
    import pyarrow.compute as pc

    q = _plain(run.column("query_id"))
    d = _plain(run.column("doc_id"))

    row = 0

    def first(mask: Any) -> tuple[str | None, str | None, int]:
        nonlocal row
        m = np.asarray(mask, dtype=bool)
        at = np.flatnonzero(m)
        if not at.size:
            return None, None, 0
        # the smallest (query, doc) among the offending rows, so that the error is the same whatever the buckets
        pairs = list(zip(q.take(at).to_pylist(), d.take(at).to_pylist()))
        i = min(
            range(at.size),
            key=lambda k: (pairs[k][0] is not None, pairs[k][0] or "", pairs[k][1] is not None, pairs[k][1] or ""),
        )
        row = int(at[i])  # (the value a message shows is this row's)
        return pairs[i][0], pairs[i][1], int(at.size)

    def null(col):
        return col.is_null().to_numpy(zero_copy_only=False)

    checked = [("query_id", q), ("doc_id", d)] + ([("rank", run.column("rank"))] if has_rank else [])
    for c, col in checked + [("score", run.column("score"))]:
        qq, dd, n = first(null(col))
        if n:
            return [_error(f"null:{c}", qq, dd, n)]
    for c, col in (("query_id", q), ("doc_id", d)):
        qq, dd, n = first(pc.fill_null(pc.equal(pc.utf8_length(col), 0), False).to_numpy(zero_copy_only=False))
        if n:
            return [_error(f"empty:{c}", qq, dd, n)]
    score = run.column("score").to_numpy(zero_copy_only=False).astype(np.float64)
    bad = ~np.isfinite(score)
    qq, dd, n = first(bad)
    if n:
        return [_error("nonfinite:score", qq, dd, n, float(score[row]))]
    if has_rank:
        rank = np.asarray(run.column("rank").to_numpy(zero_copy_only=False), dtype=np.float64)
        qq, dd, n = first(~np.isfinite(rank) | (rank != np.round(rank)))
        if n:
            return [_error("rank", qq, dd, n, float(rank[row]))]
    import pyarrow as pa

    from ...readers import duplicate_pairs

    rows = np.arange(len(q)) if checked_twice is None else np.flatnonzero(checked_twice)
    if rows.size:
        table = _local_table(
            "run", "run", q.take(pa.array(rows)), run.column("score").take(pa.array(rows)), None, d.take(pa.array(rows))
        )
        _, later = duplicate_pairs(table)
        if later.size:
            qq, dd, n = first(np.isin(np.arange(len(q)), rows[later]))
            return [_error("duplicate", qq, dd, n)]
    return []


# --------------------------------------------------------------------------- back on the driver


def _message(
    code: str, query: str | None, doc: str | None, count: int, value: float | None, metric: Metric, label: str
) -> str:
    """A bucket error's message: the local engine's words (:mod:`~ndcg_mlflow.readers.accept`), where a row's line
    would be the count of rows and the smallest (query, document) among them."""
    rows = Rows(count, query, doc)
    if code.startswith(("null:", "empty:")):
        problem, column = code.split(":")
        return null_value(column, rows) if problem == "null" else empty_id(column, rows)
    if code == "nonfinite:score":
        return not_finite("score", float("nan") if value is None else value, rows)
    if code == "rank":
        x = float("nan") if value is None else value
        return not_integer("rank", x, rows) if math.isfinite(x) else not_finite("rank", x, rows)
    if code == "duplicate":
        return listed_twice(doc, query, f"{count} repeated rows in all")
    if code == "unjudged":
        return unjudged_message(label, query, doc, count)
    return overflow_message(query, metric)


def check_buckets(
    name: str, label: str, metric: Metric, table: Any, duplicates: tuple[list[dict[str, Any]], bool] | None = None
) -> list[dict[str, Any]]:
    """Raise the error the local engine would raise first, from the buckets' ``error`` rows (``duplicates``: the
    duplicate check of the rows the buckets did not check, :func:`_duplicates`); the ``meta`` rows."""
    import pyarrow.compute as pc

    errors = table.filter(pc.equal(table.column("kind"), "error")).to_pylist()
    if duplicates is not None:
        found, every = duplicates
        errors = [e for e in errors if not every or e["code"] != "duplicate"] + found
    if errors:
        errors.sort(key=lambda e: (_ERROR_ORDER.index(e["code"]), e["query_id"] or "", e["doc_id"] or ""))
        e = errors[0]
        count = sum(x["count"] for x in errors if x["code"] == e["code"])
        message = _message(e["code"], e["query_id"], e["doc_id"], count, e["value"], metric, label)
        if e["code"] in ("unjudged", "overflow"):
            raise (
                EvaluationError(message)
                if e["code"] == "unjudged"
                else DataError("qrels", f"system '{name}': {message}")
            )
        raise DataError(label, message)
    return table.filter(pc.equal(table.column("kind"), "meta")).to_pylist()


def _assemble(
    name: str,
    label: str,
    metric: Metric,
    table: Any,
    query_ids: np.ndarray,
    weights: np.ndarray,
    notes: list[str],
    duplicates: tuple[list[dict[str, Any]], bool] | None = None,
    alternatives: Sequence[tuple[str, str]] = (),
) -> tuple[SystemResult, tuple[dict[tuple[str, str], np.ndarray], set[tuple[str, str]]]]:
    """One system's :class:`SystemResult` from the buckets' rows, checked as the local engine checks;
    ``duplicates``: the duplicate check over every row, when the buckets saw only the pre-filtered rows. With
    ``alternatives`` (the (rule, label) of each alternative the buckets computed, in their order), also each
    one's per-query nDCG in the evaluated-query order, and those that overflowed a float in some bucket."""
    import pyarrow.compute as pc

    meta = check_buckets(name, label, metric, table, duplicates)
    rows = table.filter(pc.equal(table.column("kind"), "query"))
    nq, nc = len(query_ids), len(metric.cutoffs)
    got = rows.column("query_id").to_pylist()
    at = index_in(np.asarray(got, dtype=object), query_ids)
    if len(got) != nq or (at < 0).any() or np.unique(at).size != nq:
        raise EvaluationError(
            f"internal error: the Spark buckets gave {len(got)} query rows for {nq} evaluated "
            f"queries of system '{name}'."
        )

    def flat(col: str, dtype: Any) -> np.ndarray:
        return np.asarray(pc.list_flatten(rows.column(col)).to_numpy(zero_copy_only=False), dtype=dtype)

    def matrix(col: str, dtype: Any) -> np.ndarray:
        out = np.empty((nq, nc), dtype=dtype)
        out[at] = flat(col, dtype).reshape(len(got), nc)
        return out

    n_returned = np.empty(nq, dtype=np.int64)
    n_returned[at] = rows.column("n_returned").to_numpy(zero_copy_only=False)
    qr = QueryResult(
        dcg=matrix("dcg", np.float64),
        idcg=matrix("idcg", np.float64),
        idcg_candidates=matrix("idcg_candidates", np.float64),
        ndcg=matrix("ndcg", np.float64),
        judged_coverage=matrix("judged_coverage", np.float64),
        status=matrix("status", np.int8),
        n_returned=n_returned,
    )
    run_queries = int(sum(m["value"] for m in meta))
    unknown = int(sum(m["count"] for m in meta))
    if not n_returned.any():
        none_returned(name, label, nq, run_queries, sorted(x for m in meta for x in (m["examples"] or []))[:3])
    note_unknown_queries(notes, name, unknown)
    apply_error_rules(name, Path(label), metric, qr, query_ids)
    lengths = np.asarray(pc.list_value_length(rows.column("top_pos")).to_numpy(zero_copy_only=False), dtype=np.int64)
    q_all = np.repeat(at, lengths)
    pos_all = flat("top_pos", np.int64)
    order = np.lexsort((pos_all, q_all))
    docs = pc.list_flatten(rows.column("top_doc")).take(order).to_pylist()
    top = TopLists(display_depth(metric), q_all[order], pos_all[order], docs, flat("top_grade", np.float64)[order])
    by_alt: dict[tuple[str, str], np.ndarray] = {}
    overflowed: set[tuple[str, str]] = set()
    if alternatives:
        na = len(alternatives)
        values = np.empty((nq, na, nc), dtype=np.float64)
        values[at] = flat("alt_ndcg", np.float64).reshape(len(got), na, nc)
        by_alt = {key: values[:, i, :] for i, key in enumerate(alternatives)}  # views: no copy
        overflowed = {alternatives[i] for m in meta for i in (m["alt_overflow"] or [])}
    return SystemResult(name, qr, system_means(metric, qr, weights), top), (by_alt, overflowed)


# --------------------------------------------------------------------------- beyond the driver: per-group sums


GROUPED_NOT_COMPUTED = (
    "BCa and studentized intervals",
    "t-tests",
    "effect sizes",
    "relative differences",
    "wins, ties and losses",
    "the per-query figures",
)
"""What the grouped statistics do not give (they need every query's value on the driver)."""


def check_grouped(spec: Spec) -> None:
    """Refuse (SpecError naming the key) a spec asking for what the grouped statistics cannot give: a declared
    choice is never replaced by another."""
    u, c = spec.uncertainty, spec.comparison
    beyond = "the per-query rows stay in Spark (more evaluated queries than the driver limit), where"
    if u is not None and u.method != "percentile":
        raise SpecError(
            "uncertainty.method",
            f"is {u.method!r}, but {beyond} the intervals come from a bootstrap "
            f"over groups of queries: only 'percentile' is computed there.",
        )
    if c is not None and c.test != "randomization":
        raise SpecError(
            "comparison.test",
            f"is {c.test!r}, but {beyond} the paired test is a sign-flip test over "
            f"groups of queries: only 'randomization' is computed there.",
        )
    if c is not None and c.wins_losses > 0:
        raise SpecError(
            "comparison.wins_losses",
            f"is {c.wins_losses}, but {beyond} the largest wins and losses are not listed: set it to 0.",
        )
    if spec.sensitivity:
        raise SpecError(
            "report.sensitivity",
            f"is true, but {beyond} the sensitivity table is not computed: set it "
            f"to false, or evaluate within the driver limit.",
        )


def evaluate_grouped(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    per_query_path: str | Path,
    spark: Any = None,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    buckets: int | None = None,
    prefilter: bool | None = None,
    groups: int = GROUPS,
    driver_judgments: int | None = None,
) -> EvaluationResult:
    """Evaluate on Spark without bringing the per-query rows to the driver: the per-query table (the columns of
    ``per_query.csv``) is written by Spark as Parquet into ``per_query_path`` (a new folder), and the means,
    intervals and paired tests are computed from per-group sums (:mod:`ndcg_mlflow.engines.grouped`: ``groups``
    random groups of queries; percentile intervals by resampling groups, sign-flip tests flipping groups).
    The checks are those of :func:`evaluate`. Beyond ``driver_judgments`` judgments (default
    :data:`DRIVER_JUDGMENTS`; 0: always) the judgments, the evaluated query set and the weights are read, checked
    and kept in Spark (:mod:`.spark_judgments`), with the local engine's checks and numbers."""
    out_path = _grouped_target(per_query_path, groups)
    spark = _session(spark)
    spec = resolve_spec(spec, qrels, systems, base_dir)
    check_grouped(spec)
    judged = (
        _judged_in_spark(spark, spec, qrels, columns, prefilter)
        if _judgments_beyond(spark, spec, qrels, columns, driver_judgments)
        else _judged(spark, spec, qrels, columns, prefilter)
    )
    return _evaluate_grouped(spark, spec, judged, systems, out_path, progress, buckets, groups)


def _grouped_target(per_query_path: str | Path, groups: int) -> Path:
    """The folder the grouped path writes the per-query table into (new or empty), ``groups`` checked."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 2:
        raise SpecError("groups", f"must be an integer of at least 2, got {groups!r}.")
    out_path = Path(per_query_path)
    if out_path.exists() and (not out_path.is_dir() or any(out_path.iterdir())):
        raise SpecError(
            "per_query_path",
            f"{out_path} exists and is not an empty folder; the per-query table is written into a new folder.",
        )
    return out_path


def _evaluate_grouped(
    spark: Any,
    spec: Spec,
    judged: _Judged,
    systems: Mapping[str, Any] | None,
    out_path: Path,
    progress,
    buckets: int | None,
    groups: int,
) -> EvaluationResult:
    """:func:`evaluate_grouped` once the spec is resolved and checked and the judgments are prepared. The
    folder ``out_path`` (new or empty: :func:`_grouped_target`) is removed again when the evaluation fails: a
    per-query table of some systems, no result refers to, is not left behind."""
    existed = out_path.exists()
    try:
        result = _evaluate_grouped_into(spark, spec, judged, systems, out_path, progress, buckets, groups)
        judged.release()
        return result
    except BaseException:
        judged.release()
        if existed:  # an empty folder the caller made: emptied again
            for child in list(out_path.iterdir()) if out_path.is_dir() else []:
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        else:
            shutil.rmtree(out_path, ignore_errors=True)
        raise


def _evaluate_grouped_into(
    spark: Any,
    spec: Spec,
    judged: _Judged,
    systems: Mapping[str, Any] | None,
    out_path: Path,
    progress,
    buckets: int | None,
    groups: int,
) -> EvaluationResult:
    import pyarrow as pa
    from pyspark.sql import functions as F

    from ...evaluation import relative
    from ...rules import cutoff_key, cutoff_label, cutoff_of_key, cutoff_of_label
    from ...stats import correct
    from ..grouped import group_counts, group_interval, group_sign_flip, group_sums_spark, group_units

    metric, shared, qrels_table, files = spec.metric, judged.shared, judged.qrels_table, judged.files
    query_ids, weights, judged_df, depth = judged.query_ids, judged.weights, judged.judged_df, judged.depth
    side = judged.spark_side
    if side is not None:  # the judgments, evaluated queries and weights are in Spark
        weights_df, nq, weight_sum, grades = side.weights_df, side.n_queries, side.weight_sum, side.grades
    else:
        assert query_ids is not None and weights is not None and qrels_table is not None
        weights_df = spark.createDataFrame(
            pa.table(
                {
                    "query_id": pa.array(list(query_ids), type=pa.string()),
                    "weight": pa.array(weights, type=pa.float64()),
                    "rw": pa.array(relative(weights), type=pa.float64()),
                }
            )
        )
        nq, weight_sum = len(query_ids), float(weights.sum())
        grades = sorted({float(g) for g in np.unique(qrels_table.value)})
    labels = F.array(*[F.lit(cutoff_label(k)) for k in metric.cutoffs])
    engine_info: dict[str, Any] = {
        "prefilter": judged.prefilter_info(),
        "judgments": judged.where,
        "systems": {},
        "statistics": {"method": "grouped", "groups": groups},
    }
    notes: list[str] = []
    sources = dict(systems) if systems is not None else dict(spec.systems)
    comp = judged.companions
    duplicate_rates = comp is not None and comp.plan.duplicates
    coverages: dict[str, list[float]] = {}
    for name, source in sources.items():
        out_df, run_df, label, info, n_buckets, _ = _system_rows(
            spark, spec, name, source, shared, judged_df, depth, buckets, progress, (), comp
        )
        files.append(info)
        out_df = out_df.persist()
        counts = None
        try:
            small = out_df.where(~F.col("kind").isin("query", "shown")).toArrow()
            duplicates = _duplicates(spark, run_df, small) if depth is not None and not _early_error(small) else None
            meta = check_buckets(name, label, metric, small, duplicates)
            zipped = F.arrays_zip(
                "ndcg",
                "dcg",
                "idcg",
                "idcg_candidates",
                "judged_coverage",
                "status",
                *(["duplicate_rate"] if duplicate_rates else []),
            )
            rows = (
                out_df.where(F.col("kind") == "query")
                .join(weights_df, "query_id")
                .select(
                    F.lit(name).alias("system"),
                    "query_id",
                    "n_returned",
                    "weight",
                    "rw",
                    F.posexplode(zipped).alias("_j", "_v"),
                )
            )
            status = F.element_at(F.array(*[F.lit(x) for x in STATUS_NAMES]), F.col("_v.status").cast("int") + 1)
            table = rows.select(
                "system",
                "query_id",
                F.element_at(labels, F.col("_j") + 1).alias("cutoff"),
                F.when(F.isnan("_v.ndcg"), None).otherwise(F.col("_v.ndcg")).alias("ndcg"),
                F.col("_v.dcg").alias("dcg"),
                F.col("_v.idcg").alias("idcg"),
                F.col("_v.idcg_candidates").alias("idcg_candidates"),
                F.when(F.isnan("_v.judged_coverage"), None)
                .otherwise(F.col("_v.judged_coverage"))
                .alias("judged_coverage"),
                "n_returned",
                "weight",
                status.alias("status"),
                *(
                    [
                        F.when(F.isnan("_v.duplicate_rate"), None)
                        .otherwise(F.col("_v.duplicate_rate"))
                        .alias("duplicate_rate")
                    ]
                    if duplicate_rates
                    else []
                ),
                "rw",
            )
            # Hive-style folders: readers of the whole folder get the system column from the folder names
            table.drop("rw", "system").write.mode("append").parquet(str(out_path / f"system={_part(name)}"))
            if comp is not None and comp.plan.coverage:
                counts = comps.shown_counts(comp, out_df)
        finally:
            out_df.unpersist()
        run_queries = int(sum(m["value"] or 0 for m in meta))
        unknown = int(sum(m["count"] or 0 for m in meta))
        per = spark.read.parquet(str(out_path / f"system={_part(name)}"))
        _grouped_rules(name, label, metric, per, nq, run_queries, meta)
        if counts is not None and comp is not None:  # refused as locally, after the system's other checks
            coverages[name] = comps.coverage(comp, counts, name, spec)
        if unknown:
            notes.append(f"{name}: {unknown} queries of the run are not in the evaluated set and were ignored")
        engine_info["systems"][name] = {"rows": info.rows, "rows_shuffled": _rows_seen(small), "buckets": n_buckets}

    def per_query(name: str) -> Any:
        return spark.read.parquet(str(out_path / f"system={_part(name)}")).join(
            weights_df.select("query_id", "rw"), "query_id"
        )

    summary_systems: dict[str, Any] = {}
    series = []
    for name in sources:
        p = per_query(name)
        counts = (
            p.groupBy("cutoff")
            .agg(
                F.count(F.col("ndcg")).alias("n_evaluated"),
                F.count(F.lit(1)).alias("n"),
                F.count(F.when(F.col("status") == "missing", 1)).alias("n_missing"),
                F.count(F.when(F.col("status") == "empty_ideal", 1)).alias("n_empty_ideal"),
                F.sum(F.when(F.col("ndcg").isNotNull(), F.col("weight"))).alias("weight_sum"),
                F.sum(F.when(F.col("ndcg").isNotNull(), F.col("rw"))).alias("r1"),
                F.sum(F.when(F.col("ndcg").isNotNull(), F.col("rw") * F.col("rw"))).alias("r2"),
                F.avg("judged_coverage").alias("judged_coverage"),
            )
            .collect()
        )
        summary_systems[name] = {}
        for c in counts:
            key = cutoff_key(cutoff_of_label(c["cutoff"]))
            summary_systems[name][key] = {
                "n_evaluated": int(c["n_evaluated"]),
                "n_excluded": int(c["n"] - c["n_evaluated"]),
                "n_missing": int(c["n_missing"]),
                "n_empty_ideal": int(c["n_empty_ideal"]),
                "weight_sum": float(c["weight_sum"] or 0.0),
                "n_eff": float(c["r1"] ** 2 / c["r2"]) if c["r2"] else 0.0,
                "judged_coverage": float("nan") if c["judged_coverage"] is None else float(c["judged_coverage"]),
            }
        series.append(
            p.select(
                F.concat(F.lit(f"system\0{name}\0"), F.col("cutoff")).alias("key"),
                "query_id",
                F.col("rw").alias("weight"),
                F.col("ndcg").alias("x"),
            )
        )
        if duplicate_rates:  # the weighted mean of the per-query duplicate rates, from the same per-group sums
            series.append(
                p.select(
                    F.concat(F.lit(f"duplicates\0{name}\0"), F.col("cutoff")).alias("key"),
                    "query_id",
                    F.col("rw").alias("weight"),
                    F.col("duplicate_rate").alias("x"),
                )
            )
    comparison = spec.comparison
    if comparison is not None:
        base = per_query(comparison.baseline).select("query_id", "cutoff", F.col("ndcg").alias("b"), "rw")
        for name in sources:
            if name == comparison.baseline:
                continue
            cand = per_query(name).select("query_id", "cutoff", F.col("ndcg").alias("c"))
            both = base.join(cand, ["query_id", "cutoff"])
            series.append(
                both.select(
                    F.concat(F.lit(f"compare\0{name}\0"), F.col("cutoff")).alias("key"),
                    "query_id",
                    F.col("rw").alias("weight"),
                    (F.col("c") - F.col("b")).alias("x"),
                )
            )
    seed = spec.uncertainty.seed if spec.uncertainty is not None else 0
    union = series[0]
    for other in series[1:]:
        union = union.unionByName(other)
    sums = group_sums_spark(union, groups, seed)
    for name in sources:
        for key, entry in summary_systems[name].items():
            s = sums.get(f"system\0{name}\0{cutoff_label(cutoff_of_key(key))}")
            entry["mean"] = s.mean if s is not None else float("nan")
            if duplicate_rates:
                d = sums.get(f"duplicates\0{name}\0{cutoff_label(cutoff_of_key(key))}")
                entry["duplicate_rate"] = d.mean if d is not None else float("nan")
            if name in coverages:
                entry["catalog_coverage"] = float(coverages[name][list(metric.keys).index(key)])
    comparisons: list[dict[str, Any]] = []
    paired: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    u = spec.uncertainty
    if u is not None:
        rng = np.random.default_rng(u.seed)
        counts_matrix = group_counts(groups, u.resamples, rng)
        for name in sources:
            for key, entry in summary_systems[name].items():
                s = sums.get(f"system\0{name}\0{cutoff_label(cutoff_of_key(key))}")
                if s is not None:
                    entry.update(
                        {k: v for k, v in group_interval(s, counts_matrix, u.confidence).items() if k != "mean"}
                    )
        if comparison is not None:
            flips = np.random.default_rng([u.seed, 1])
            for name in sources:
                if name == comparison.baseline:
                    continue
                for k in metric.cutoffs:
                    label = cutoff_label(k)
                    s = sums.get(f"compare\0{name}\0{label}")
                    if s is None:
                        continue
                    ci = group_interval(s, counts_matrix, u.confidence)
                    paired[(name, cutoff_key(k))] = group_units(s)
                    comparisons.append(
                        {
                            "baseline": comparison.baseline,
                            "candidate": name,
                            "key": cutoff_key(k),
                            "cutoff": label,
                            "delta": ci["mean"],
                            "ci_low": ci["ci_low"],
                            "ci_high": ci["ci_high"],
                            "n_paired": int(s.count.sum()),
                            "p_randomization": group_sign_flip(s, u.resamples, flips),
                        }
                    )
            if comparisons:
                corrected = correct([c["p_randomization"] for c in comparisons], comparison.correction)
                for c, p in zip(comparisons, corrected):
                    c.update(
                        {
                            "p_corrected": float(p),
                            "corrected_test": "randomization",
                            "correction": comparison.correction,
                        }
                    )
    decision = None
    if spec.decision is not None and u is not None:
        from ...decision import decide

        decision = decide(
            spec.decision, comparisons, u.confidence, paired, unit=("group of queries", "groups of queries")
        )
    notes.append(
        f"statistics from {groups} random groups of queries (the per-query rows stay in Spark): "
        f"percentile intervals from a bootstrap over the groups, sign-flip tests flipping whole groups; "
        f"not computed: {', '.join(GROUPED_NOT_COMPUTED)}"
    )
    family = (
        f"{len(comparisons)} comparisons against baseline '{comparison.baseline}'; correction {comparison.correction}"
        if comparison is not None
        else ""
    )
    summary = summary_of(
        spec,
        n_queries=nq,
        weight_sum=weight_sum,
        files=files,
        systems=summary_systems,
        grades=grades,
        comparisons=comparisons,
        family=family,
        decision=decision,
        notes=notes,
        engine="spark",
        tail={"engine_info": engine_info, "per_query_path": str(out_path)},
    )
    _files_unchanged(files)
    return EvaluationResult(
        spec,
        np.empty(0, dtype=object),
        np.empty(0),
        {},
        files,
        notes,
        engine="spark",
        decision=decision,
        engine_info=engine_info,
        per_query_path=out_path,
        grouped_summary=summary,
    )


def _files_unchanged(files: list[FileInfo]) -> None:
    """Spark reads a file when a job needs its rows, as often as the jobs do: once they are done, each file must
    still be the one its sha256 was taken of (a file replaced meanwhile is refused, naming it)."""
    for f in files:
        if f.path:
            check_unchanged(f.path, f.sha256)


def _part(name: str) -> str:
    """A system name as a folder name (``/`` written as ``~``, as the per-system files are)."""
    return name.replace("/", "~")


def _grouped_rules(
    name: str, label: str, metric: Metric, per: Any, nq: int, run_queries: int, meta: list[dict[str, Any]]
) -> None:
    """The checks of :func:`_assemble` on the per-query table written by Spark."""
    from pyspark.sql import functions as F

    returned = per.where(F.col("n_returned") > 0).select("query_id").distinct().limit(1).count()
    if not returned:
        none_returned(name, label, nq, run_queries, sorted(x for m in meta for x in (m["examples"] or []))[:3])
    for status, rule in ((STATUS_MISSING, metric.missing_queries), (STATUS_EMPTY_IDEAL, metric.empty_ideal)):
        if not stops(rule):
            continue
        bad = per.where(F.col("status") == STATUS_NAMES[status]).select("query_id").distinct()
        n = bad.count()
        if n:
            first = [r["query_id"] for r in bad.orderBy("query_id").limit(5).collect()]
            stopped_by(metric, status, name, label, n, first)


__all__ = [
    "evaluate",
    "evaluate_grouped",
    "GROUPED_NOT_COMPUTED",
    "check_grouped",
    "check_buckets",
    "bucket_rows",
    "MAX_DRIVER_QUERIES",
    "ROWS_PER_BUCKET",
    "MAX_JUDGMENTS",
    "DRIVER_JUDGMENTS",
    "RESULT_SCHEMA",
    "STATUS_NAMES",
]
