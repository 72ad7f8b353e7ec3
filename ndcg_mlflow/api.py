"""The entry point: :func:`evaluate` runs a spec on the engine asked for.

Both engines give the same per-query numbers and the same :class:`~ndcg_mlflow.evaluation.EvaluationResult`:
the local engine (:func:`ndcg_mlflow.evaluation.evaluate`, this process) and Apache Spark
(:mod:`ndcg_mlflow.engines.spark`, imported only when asked for). This module sits above both, so neither
imports the other's caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SpecError
from .evaluation import EvaluationResult
from .evaluation import evaluate as evaluate_local
from .spec import Spec

if TYPE_CHECKING:
    from .engines.spark import GroupedResult


def evaluate(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    keep_data: bool = False,
    engine: str = "local",
    spark: Any = None,
    buckets: int | None = None,
    prefilter: bool | None = None,
    driver_queries: int | None = None,
    per_query_path: str | Path | None = None,
    groups: int | None = None,
    tracking_uri: str | None = None,
    scored_dir: str | Path | None = None,
    driver_judgments: int | None = None,
) -> EvaluationResult | GroupedResult:
    """Evaluate every system of a spec (a path, a mapping or a :class:`Spec`); logs nothing (a system that is a
    model is looked up in the model registry and loaded, see below).

    The judgments and the systems' rows come from the spec's ``data`` section, or from tables given here:
    ``qrels`` and each value of ``systems`` (a name -> table mapping) may be anything with the Arrow C stream
    interface (pyarrow, pandas, polars, DuckDB...) or a nested mapping ``{query_id: {doc_id: value}}``; see
    :func:`~ndcg_mlflow.evaluation.evaluate_tables`. Given tables take the place of the data section's entries,
    which may then be left out (only when both the judgments and the systems are given).

    ``keep_data`` keeps each system's joined rows on the result (``result.prepared``),
    for recomputing under other rules without reading the files again.

    ``engine="spark"`` evaluates on Apache Spark (``spark``: the SparkSession, classic or Connect, or a function
    returning one, called only once Spark is needed: after model URIs resolve; ``buckets``:
    the number of query buckets; ``prefilter``: the top-K pre-filter before the shuffle, by default applied
    whenever it can be; ``driver_queries``: the evaluated queries whose per-query rows may come back to the
    driver), where ``qrels`` and ``systems`` may also be Spark DataFrames; the per-query
    numbers are the local engine's (see :mod:`ndcg_mlflow.engines.spark`). Beyond ``driver_queries`` evaluated
    queries, with ``per_query_path`` (a new folder) the per-query table is written there as Parquet and the
    statistics come from ``groups`` random groups of queries: the result is then a
    :class:`~ndcg_mlflow.engines.spark.GroupedResult` (a summary, no per-query table on the driver); there, beyond
    ``driver_judgments`` judgments (default ``engines.spark.DRIVER_JUDGMENTS``; 0: always) the judgments, the
    evaluated query set and the weights are read, checked and kept in Spark.

    A system declared as a model (``{model: URI, candidates: SOURCE}``, :mod:`ndcg_mlflow.models`) is resolved
    against the registry of ``tracking_uri`` (default: the spec's ``mlflow.tracking_uri``, then MLflow's own
    default) and scored first; its scored rows are written to ``scored_dir/systems/<name>.scored.parquet``
    (default: a new temporary folder, removed when the result is garbage collected) and evaluated as its run
    (``result.scored``, ``result.models``). With ``engine="spark"`` the candidates are scored on
    Spark's executors and the scored rows are a Parquet folder written by Spark
    (:mod:`ndcg_mlflow.engines.spark_models`); beyond the driver's limit of queries, with ``per_query_path``, the
    scored rows are evaluated on the grouped path and the :class:`~ndcg_mlflow.engines.spark.GroupedResult`
    carries the models and the scored folders as an :class:`~ndcg_mlflow.evaluation.EvaluationResult` does.
    """
    if engine not in ("local", "spark"):
        raise SpecError("engine", f"is 'local' or 'spark', got {engine!r}.")
    if systems is None:
        from .spec import InMemory, load_spec

        given = InMemory(qrels=True) if qrels is not None else None
        loaded = spec if isinstance(spec, Spec) else load_spec(spec, base_dir=base_dir, tables=given)
        if any(src.unscored for _, src in loaded.systems):
            if engine == "spark":
                _refuse_keep_data(keep_data)
                return _evaluate_models_spark(
                    loaded,
                    spark=spark,
                    qrels=qrels,
                    columns=columns,
                    progress=progress,
                    tracking_uri=tracking_uri,
                    scored_dir=scored_dir,
                    buckets=buckets,
                    prefilter=prefilter,
                    driver_queries=driver_queries,
                    per_query_path=per_query_path,
                    groups=groups,
                    driver_judgments=driver_judgments,
                )
            return _evaluate_models(
                loaded,
                qrels=qrels,
                columns=columns,
                progress=progress,
                keep_data=keep_data,
                tracking_uri=tracking_uri,
                scored_dir=scored_dir,
            )
    if engine == "spark":
        _refuse_keep_data(keep_data)
        from .engines.grouped import GROUPS
        from .engines.spark import evaluate as evaluate_spark

        return evaluate_spark(
            spec,
            spark=spark,
            qrels=qrels,
            systems=systems,
            columns=columns,
            base_dir=base_dir,
            progress=progress,
            buckets=buckets,
            prefilter=prefilter,
            driver_queries=driver_queries,
            per_query_path=per_query_path,
            driver_judgments=driver_judgments,
            groups=GROUPS if groups is None else groups,
        )
    if (
        spark is not None
        or buckets is not None
        or prefilter is not None
        or driver_queries is not None
        or per_query_path is not None
        or groups is not None
        or driver_judgments is not None
    ):
        raise SpecError(
            "engine",
            "spark=, buckets=, prefilter=, driver_queries=, per_query_path=, groups= and "
            "driver_judgments= apply to engine='spark'.",
        )
    return evaluate_local(
        spec, qrels=qrels, systems=systems, columns=columns, base_dir=base_dir, progress=progress, keep_data=keep_data
    )


def _evaluate_models(
    spec: Spec,
    *,
    qrels: Any,
    columns: Mapping[str, str] | None,
    progress,
    keep_data: bool,
    tracking_uri: str | None,
    scored_dir: str | Path | None,
) -> EvaluationResult:
    import tempfile

    from .evaluation import resolve_spec
    from .tracking.registry import score_model_systems

    spec = resolve_spec(spec, None, None)  # the candidates files are checked before any model is loaded
    folder = Path(scored_dir) if scored_dir is not None else Path(tempfile.mkdtemp(prefix="ndcg-mlflow-scored-"))
    scored_spec, resolved, scored = score_model_systems(
        spec, folder, progress=progress, tracking_uri=tracking_uri or spec.mlflow.tracking_uri
    )
    result = evaluate_local(scored_spec, qrels=qrels, columns=columns, progress=progress, keep_data=keep_data)
    result.models, result.scored = resolved, scored
    if scored_dir is None:
        _remove_with(result, folder)
    return result


def _remove_with(result: Any, folder: Path) -> None:
    """A scoring folder of our own lives as long as the result that names its files."""
    import shutil
    import weakref

    weakref.finalize(result, shutil.rmtree, folder, True)


def _refuse_keep_data(keep_data: bool) -> None:
    if keep_data:
        raise SpecError(
            "keep_data",
            "the Spark engine keeps no joined rows on the driver; evaluate with the local engine to keep them.",
        )


def _evaluate_models_spark(
    spec: Spec,
    *,
    spark: Any,
    qrels: Any,
    columns: Mapping[str, str] | None,
    progress,
    tracking_uri: str | None,
    scored_dir: str | Path | None,
    buckets: int | None,
    prefilter: bool | None,
    driver_queries: int | None,
    per_query_path: str | Path | None = None,
    groups: int | None = None,
    driver_judgments: int | None = None,
) -> EvaluationResult | GroupedResult:
    """Model systems scored on Spark, then evaluated there: within the driver's limit an
    :class:`~ndcg_mlflow.evaluation.EvaluationResult`; beyond it, with ``per_query_path``, a
    :class:`~ndcg_mlflow.engines.spark.GroupedResult` whose summary records the models as ``summary.json`` does."""
    import tempfile

    from .engines.spark import active_session
    from .engines.spark import evaluate as evaluate_spark
    from .engines.spark_models import score_model_systems
    from .evaluation import resolve_spec, said_of_candidates
    from .tracking.registry import resolve_model_systems

    spec = resolve_spec(spec, None, None)  # the candidates sources are checked before any model is resolved
    if spec.metric.ties == "displayed_order":
        raise SpecError(
            "metric.ties",
            "is displayed_order, but the rows a model scores on Spark have no displayed "
            "order (Spark's tasks write them in no fixed order); choose another tie "
            "rule, or evaluate with the local engine, which keeps the candidates' order.",
        )
    uri = tracking_uri or spec.mlflow.tracking_uri
    resolved = resolve_model_systems(spec, uri)  # on the driver, before any Spark job: a missing alias stops here
    spark = active_session(spark)
    folder = Path(scored_dir) if scored_dir is not None else Path(tempfile.mkdtemp(prefix="ndcg-mlflow-scored-"))
    scored_spec, resolved, scored = score_model_systems(
        spark, spec, folder, tracking_uri=uri, progress=progress, resolved=resolved
    )
    from .engines.grouped import GROUPS

    try:
        with said_of_candidates(src for _, src in scored_spec.systems):
            result = evaluate_spark(
                scored_spec,
                spark=spark,
                qrels=qrels,
                columns=columns,
                progress=progress,
                buckets=buckets,
                prefilter=prefilter,
                driver_queries=driver_queries,
                per_query_path=per_query_path,
                groups=GROUPS if groups is None else groups,
                driver_judgments=driver_judgments,
            )
    except BaseException:
        if scored_dir is None:  # nothing names the scored rows: the folder of our own goes
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
        raise
    result.models, result.scored = resolved, scored
    if not isinstance(result, EvaluationResult):  # the grouped path: its summary is summary.json's
        result.summary["models"] = {name: m.record() for name, m in resolved.items()}
    if scored_dir is None:
        _remove_with(result, folder)
    return result
