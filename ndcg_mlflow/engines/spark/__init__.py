"""The Spark engine: the same per-query numbers as the local engine, with the runs' rows processed by Spark.

How it works:

* The judgments are read on the driver, by the local readers (a file in the spec) or collected from a Spark DataFrame,
  and checked exactly as the local engine checks them (a document judged twice with different grades, non-finite
  grades, gains that overflow). From them the driver computes, as the local engine does, the evaluated query set (the
  judged queries, or the spec's ``queries.set``), the weights and the judgments of the evaluated queries. This assumes
  the judgments are small next to the runs (judgments are made by people or sampled; runs list every returned
  document): at most :data:`MAX_JUDGMENTS` rows are accepted, above that the evaluation stops with an error saying so
  (:mod:`.judgments`). On the grouped path (:func:`evaluate_grouped`, and :func:`.driver.evaluate` beyond
  :data:`MAX_DRIVER_QUERIES`) judgments beyond :data:`DRIVER_JUDGMENTS` rows (``driver_judgments=``; 0: always)
  stay in Spark instead (:mod:`.judgments_in_spark`): a file of the spec is read in Spark as a run is (below; its
  sha256 still computed on the driver, a streaming read), a DataFrame is used as given (an order-independent
  digest recorded); they are checked there as locally (null or empty ids, grades that are not finite, a document
  judged twice with different grades, identical duplicates merged, the gain of every distinct grade, the
  per-query gain sums), and the evaluated query set, the weights (``weight`` and ``rw``, the weight over the
  largest), the number of evaluated queries, the weight sum and the grades are Spark DataFrames and aggregates;
  errors name the source and the offending ids.
  :func:`.driver.evaluate` then counts the evaluated queries in Spark to choose its path (within ``driver_queries``
  the judgments are read on the driver as above). A query set or weights file larger than
  :data:`.judgments_in_spark.DRIVER_SMALL_FILE_BYTES` is read by the local readers in a Spark task.
  ``engine_info.judgments`` records where the judgments were (``driver`` or ``spark``).
* Each run stays in Spark. Its rows and the evaluated judgments are grouped by a bucket of the query id
  (Spark's ``xxhash64`` of the id's UTF-8 text, modulo the bucket count; integer ids are read as their
  decimal text, as locally), so that every query's rows, run and judged, meet in one bucket. The bucket
  count is the run's rows over :data:`.assemble.ROWS_PER_BUCKET` (about a million rows a bucket), unless given
  (:mod:`.runs` reads the run, :func:`.assemble.system_rows` makes its job).
* ``groupBy(bucket).cogroup(...).applyInArrow`` calls, once per bucket (:mod:`.buckets`), the seam
  (:func:`ndcg_mlflow.queries.raw_query_rows`: the declared checks of the rows, the join and the kernel) on the
  bucket's rows; it is query-local, so a bucket's queries get the numbers the whole would give. The call returns
  one row per evaluated query of the bucket (every number, per cutoff, and the first documents of its list) with
  explicit Arrow types. With ``report.sensitivity`` the same call computes each query's nDCG under every
  alternative of every rule (:func:`ndcg_mlflow.statistics.sensitivity.alternatives`) on the bucket's joined rows,
  returned in the query rows (``alt_ndcg``); the driver builds the sensitivity table from them in the
  evaluated-query order (:func:`ndcg_mlflow.statistics.sensitivity.sensitivity_table`), as the local engine does
  from its kept rows.
* The per-query rows (one per evaluated query, not per run row) come back to the driver as Arrow and are
  assembled into the same :class:`~ndcg_mlflow.result.EvaluationResult` as the local engine's, so the
  statistics, the report, the output folder and the MLflow logging are those of the local engine
  (:mod:`.assemble`; the buckets' first problem raised in the seam's order and words, :func:`.assemble.check_buckets`).

A TREC, CSV, TSV or JSONL file of the spec is read by the local engine's own reader in a Spark task
(:func:`.sources.local_reader_frame`): the same rows, checks and errors (file and line) as locally, by
construction; when the pre-filter applies and the evaluated judgments ship with tasks, that task yields only the
pre-filter's rows (:mod:`.text_tasks`). Parquet and Delta sources are read by Spark's readers, their paths given
literally; when the top-K pre-filter applies and the evaluated judgments are small enough to ship with tasks, a
Parquet run of the spec is read by pyarrow in Spark tasks instead, which yield only the pre-filter's rows
(:mod:`.parquet_tasks`). The run rows
are checked as strictly as locally: a null or empty id, a non-finite score, a rank that is not an integer, a
document listed twice for a query, a run sharing no query with the evaluated set; errors of the checks made in
Spark name the source and the offending query and document ids. Only DataFrame operations
and Arrow UDFs are used (no ``sparkContext``, RDD or broadcast variable), so the engine runs on Spark Connect.
The executors need ``ndcg_mlflow`` installed (the UDF calls it).

When every cutoff is finite, the run rows are filtered before the shuffle to those that can decide some
query's top K (:func:`.prefilter.prefilter_rows`); beyond :data:`MAX_DRIVER_QUERIES` evaluated queries,
:func:`evaluate_grouped` keeps the per-query rows in Spark (Parquet) and computes the statistics from
per-group sums (:mod:`.grouped`, :mod:`ndcg_mlflow.statistics.group_sums`); :func:`.driver.evaluate` switches to it
when given a ``per_query_path`` (``ndcg-mlflow run`` gives one next to the output folder).

A run without a rank column under ``ties: displayed_order`` (or sensitivity, whose alternatives include it) is
ordered as the local engine reads it: a text file's rows carry their place from the local reader, a Parquet file
Spark reads gets a key of its rows' order (:func:`.runs.in_file_order`:
its block's place among the blocks, its place in its task's rows), an in-memory table its row numbers.

Sensitivity: an alternative whose numbers overflow a float in some bucket is NaN for every query and system
(as locally). With sensitivity a TREC run's rank is read (the local engine then reads it too); for a run that has
no order (a Spark DataFrame or a Delta table without a rank column, a model's scored rows) the
``ties: displayed_order`` alternative is not computed: its rows are left out of the table and a note names the
runs (:func:`.runs.computable`). The top-K pre-filter keeps the rows any alternative needs
(:func:`.prefilter.prefilter_rows`).

The companion measures (duplicate rate, catalog coverage) are computed by :mod:`.companions`: the
per-query duplicate rates in the buckets (the duplicate groups joined to the run rows before the shuffle), the
coverage from the documents the buckets show, counted in Spark; on both paths.

Not on this engine (refused with an error): ``ties: displayed_order`` for a Spark DataFrame or a Delta table
without a rank column and for model systems (no rows' order to follow: :meth:`~ndcg_mlflow.engines.Spark.refuses`
for the models), and, beyond :data:`MAX_DRIVER_QUERIES` (the grouped path: :func:`check_grouped`),
sensitivity, query segments, a stratified bootstrap and the decision's guardrails (they need every query's value
on the driver; within it, the segments are read on the driver by
:func:`ndcg_mlflow.engines.inputs.query_segments`, as locally).

The entry point is :func:`evaluate_on` (:func:`ndcg_mlflow.evaluate` with a :class:`~ndcg_mlflow.engines.Spark`):
model systems are scored first (:mod:`.models`), then :func:`.driver.evaluate` runs. The SparkSession is
:mod:`.session`'s.
"""

from __future__ import annotations

import shutil
from dataclasses import replace

from ...result import EvaluationResult
from ...spec import Spec
from ...timings import phase
from ..preparation import remove_with, said_of_candidates, scoring_folder
from ..settings import Inputs, SparkSettings
from .driver import MAX_DRIVER_QUERIES, evaluate
from .grouped import check_grouped, evaluate_grouped
from .judgments import DRIVER_JUDGMENTS, MAX_JUDGMENTS
from .models import score_model_systems
from .session import active_session, session


def evaluate_on(engine: SparkSettings, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """:func:`ndcg_mlflow.evaluate` on Spark, with the settings of ``engine`` (a :class:`~ndcg_mlflow.engines.Spark`,
    checked when it was made) and its ``inputs``, ``spec`` resolved with them and what the engine refuses for it
    (:meth:`~ndcg_mlflow.engines.Spark.refuses`) asked, once, by :func:`ndcg_mlflow.evaluate`: model systems are
    resolved on the driver and scored on Spark's executors first (:func:`.models.score_model_systems`), then every
    run is evaluated by :func:`.driver.evaluate`."""
    progress, scored_dir = inputs.progress, inputs.scored_dir
    if inputs.systems is not None or not any(src.unscored for _, src in spec.systems):
        return evaluate(engine, spec, inputs)
    loaded = spec
    from ...tracking.registry import resolve_model_systems

    uri = inputs.tracking_uri or loaded.mlflow.tracking_uri
    with phase("models"):  # on the driver, before any Spark job: a missing alias stops here
        resolved = resolve_model_systems(loaded, uri)
    spark = active_session(engine.session)
    folder = scoring_folder(scored_dir)
    with phase("models"):
        scored_spec, resolved, scored = score_model_systems(
            spark, loaded, folder, tracking_uri=uri, progress=progress, resolved=resolved
        )
    try:
        with said_of_candidates(src for _, src in scored_spec.systems):
            scored_inputs = replace(inputs, systems=None, base_dir=None, tracking_uri=None, scored_dir=None)
            result = evaluate(replace(engine, session=spark), scored_spec, scored_inputs)
    except BaseException:
        if scored_dir is None:  # nothing names the scored rows: the folder of our own goes
            shutil.rmtree(folder, ignore_errors=True)
        raise
    result.models, result.scored = resolved, scored
    if result.grouped_summary is not None:  # the grouped path: its summary is summary.json's
        result.summary["models"] = {name: m.record() for name, m in resolved.items()}
    if scored_dir is None:
        remove_with(result, folder)
    return result


__all__ = [
    "evaluate_on",
    "evaluate",
    "evaluate_grouped",
    "check_grouped",
    "session",
    "active_session",
    "MAX_DRIVER_QUERIES",
    "MAX_JUDGMENTS",
    "DRIVER_JUDGMENTS",
]
