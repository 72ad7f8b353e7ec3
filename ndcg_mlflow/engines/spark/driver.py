"""An evaluation whose per-query rows come back to the driver (:func:`evaluate`): one row per evaluated query and
system, assembled into the local engine's :class:`~ndcg_mlflow.result.EvaluationResult`, whose
statistics are then the local engine's. Beyond :data:`MAX_DRIVER_QUERIES` evaluated queries it continues on the grouped
path (:mod:`.grouped`) when given a folder for the per-query table."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import EvaluationError
from ...result import EvaluationResult, SystemResult
from ...spec import Spec
from ...statistics.group_sums import GROUPS
from ...statistics.sensitivity import alternatives as sensitivity_alternatives
from ...statistics.sensitivity import collect_alternatives
from ...timings import phase
from ..inputs import query_segments
from ..outcome import finish, statistics
from ..settings import Inputs, SparkSettings
from . import companion_measures as comps
from .assemble import assemble, files_unchanged, rows_seen, system_info, system_rows, unchecked_duplicates
from .grouped import check_grouped, grouped_result, grouped_target
from .judgments import judged_in_spark, judged_on_driver, judgments_beyond
from .session import active_session

MAX_DRIVER_QUERIES = 5_000_000
"""Evaluated queries whose per-query rows come back to the driver at most; beyond, the grouped path."""


def evaluate(engine: SparkSettings, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """Evaluate a spec on Spark with the settings of ``engine`` (a :class:`~ndcg_mlflow.engines.Spark`: its
    session, classic or Spark Connect, by default the active one) and its ``inputs`` (their ``tracking_uri`` and
    ``scored_dir`` are for model systems, scored before: :func:`.evaluate_on`), ``spec`` resolved with them
    (:func:`~ndcg_mlflow.engines.preparation.resolve_spec`, called once by :func:`ndcg_mlflow.evaluate`).

    ``qrels`` and each value of ``systems`` may be Spark DataFrames (or anything :func:`ndcg_mlflow.evaluate`
    takes); sources left out are read from the spec's data section (runs by Spark: Parquet files, folders and
    globs, TREC, CSV and TSV). Beyond the engine's ``driver_queries`` evaluated queries (default
    :data:`MAX_DRIVER_QUERIES`), with its ``per_query_path`` (a new folder), the evaluation continues on the
    grouped path (:func:`.grouped.grouped_result`) and returns its result (whose ``per_query_path`` says where
    the per-query rows are), after :func:`.grouped.check_grouped` found nothing the grouped statistics cannot
    give; without ``per_query_path`` an error points to the grouped path. With ``per_query_path``, beyond
    ``driver_judgments`` judgments (default :data:`.judgments.DRIVER_JUDGMENTS`) they are read and checked in
    Spark, the evaluated queries counted there, and beyond ``driver_queries`` the grouped path uses them from
    Spark (within it, the judgments are read on the driver as always, up to :data:`.judgments.MAX_JUDGMENTS`).
    """
    systems, progress = inputs.systems, inputs.progress
    spark = active_session(engine.session)
    limit = MAX_DRIVER_QUERIES if engine.driver_queries is None else engine.driver_queries
    with phase("read"):
        judged, where = _judged(spark, spec, inputs, engine, limit)
    if judged.n_queries > limit and engine.per_query_path is not None:
        check_grouped(spec)  # before any Spark job
        if progress:
            progress(
                f"{judged.n_queries:,} evaluated queries{where}, more than the {limit:,} whose per-query rows come "
                f"back to the driver: per-query table to {engine.per_query_path}, statistics from "
                f"{GROUPS if engine.groups is None else engine.groups} groups"
            )
        # the judgments already read and prepared go on to the grouped path (read once)
        with phase("scoring"):
            return grouped_result(spark, spec, judged, inputs, engine, grouped_target(engine.per_query_path))
    if judged.n_queries > limit:
        raise EvaluationError(
            f"{judged.n_queries:,} evaluated queries, more than the {limit:,} whose per-query rows "
            f"come back to the driver (engines.spark.MAX_DRIVER_QUERIES, or driver_queries=): "
            f"evaluate with ndcg_mlflow.engines.spark.evaluate_grouped, which writes the "
            f"per-query table to Parquet and computes the statistics from per-group sums."
        )
    metric, qrels_table, files = spec.metric, judged.qrels_table, judged.files
    query_ids, weights, companions = judged.query_ids, judged.weights, judged.companions
    assert query_ids is not None and weights is not None and qrels_table is not None
    with phase("read"):  # (after the companion files, as the local engine reads them)
        segments = query_segments(spec, query_ids, files)
    engine_info: dict[str, Any] = {"prefilter": judged.prefilter_info(), "judgments": "driver", "systems": {}}
    systems_out: dict[str, SystemResult] = {}
    notes: list[str] = []
    sources = dict(systems) if systems is not None else dict(spec.systems)
    alts = sensitivity_alternatives(metric)[1:] if spec.sensitivity else []  # the declared numbers are the engine's own
    alt_out: dict[str, tuple[dict[tuple[str, str], np.ndarray], set[tuple[str, str]]]] = {}
    for name, source in sources.items():
        with phase("read"):  # the run's footers, row count and digest; its rows are read by the scoring job
            job = system_rows(spark, spec, judged, name, source, engine.buckets, progress, alts)
        files.append(job.info)
        with comps.kept(job.out_df, companions) as (out_df, rows_df), phase("scoring"):
            rows = rows_df.toArrow()
            duplicates = unchecked_duplicates(spark, judged, job, rows)
            computed = [(r, a) for r, a, _ in job.alternatives]
            systems_out[name], alt_out[name] = assemble(
                name, job.label, metric, rows, query_ids, weights, notes, duplicates, computed
            )
            if companions is not None:
                comps.measure(companions, systems_out[name], rows, out_df, spec, query_ids, weights)
        engine_info["systems"][name] = system_info(job, rows_seen(rows))
    by_alternative, left_out = collect_alternatives(alts, systems_out, alt_out) if spec.sensitivity else (None, [])
    with phase("read"):
        files_unchanged(files)
    result = finish(spec, query_ids, weights, systems_out, files, notes, qrels_table, "spark", segments)
    result.engine_info, result.sensitivity_left_out = engine_info, left_out
    return statistics(result, progress, by_alternative)


def _judged(spark: Any, spec: Spec, inputs: Inputs, engine: SparkSettings, limit: int) -> tuple[Any, str]:
    """The judgments read and checked: in Spark when the engine has a per-query folder, there are more than its
    ``driver_judgments`` and more evaluated queries than ``limit``, else on the driver; and how the evaluated
    queries were counted, for the progress line."""
    qrels, columns = inputs.qrels, inputs.columns
    if engine.per_query_path is not None and judgments_beyond(spark, spec, qrels, columns, engine.driver_judgments):
        judged = judged_in_spark(spark, spec, qrels, columns, engine.prefilter)
        if judged.n_queries > limit:
            return judged, " (counted in Spark, where the judgments are)"
        judged.release()  # the per-query rows come to the driver, the judgments too
    return judged_on_driver(spark, spec, qrels, columns, engine.prefilter), ""
