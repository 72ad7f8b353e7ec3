"""The entry point: :func:`evaluate` runs a spec on the engine asked for.

Both engines give the same per-query numbers and the same :class:`~ndcg_mlflow.result.EvaluationResult`:
the local engine (:class:`~ndcg_mlflow.engines.Local`, this process, the default) and Apache Spark
(:class:`~ndcg_mlflow.engines.Spark`, whose package is imported only when an evaluation runs on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .engines import Engine, Inputs, engine_of
from .engines.preparation import resolve_spec
from .result import EvaluationResult
from .spec import Spec


def evaluate(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress=None,
    engine: Engine | str | None = None,
    tracking_uri: str | None = None,
    scored_dir: str | Path | None = None,
) -> EvaluationResult:
    """Evaluate every system of a spec (a path, a mapping or a :class:`Spec`); logs nothing (a system that is a
    model is looked up in the model registry and loaded, see below).

    The judgments and the systems' rows come from the spec's ``data`` section, or from tables given here:
    ``qrels`` and each value of ``systems`` (a name -> table mapping) may be anything with the Arrow C stream
    interface (pyarrow, pandas, polars, DuckDB...) or a nested mapping ``{query_id: {doc_id: value}}``; see
    :func:`~ndcg_mlflow.engines.local.pipeline.evaluate_tables`. Given tables take the place of the data section's
    entries, which may then be left out (only when both the judgments and the systems are given).

    ``engine``: where the evaluation runs, :class:`~ndcg_mlflow.engines.Local` (the default;
    ``Local(keep_data=True)`` keeps each system's joined rows on the result, ``result.prepared``, for recomputing
    under other rules without reading the files again) or :class:`~ndcg_mlflow.engines.Spark` with its own settings
    (``Spark(session, buckets=...)``; ``"local"`` and ``"spark"`` name them with their defaults). What the engine
    cannot do for the spec (:meth:`~ndcg_mlflow.engines.Engine.refuses`) is refused before anything is read. On
    Spark, ``qrels`` and ``systems`` may also be Spark DataFrames; the per-query numbers are the local engine's
    (see :mod:`ndcg_mlflow.engines.spark`). Beyond the engine's ``driver_queries`` evaluated queries, with its
    ``per_query_path``, the per-query table is written there as Parquet and the statistics come from random groups
    of queries: the result's ``per_query_path`` then says where its per-query rows are, and its summary holds the
    means, intervals and comparisons (no per-query arrays on the driver).

    A system declared as a model (``{model: URI, candidates: SOURCE}``, :mod:`ndcg_mlflow.models.systems`) is resolved
    against the registry of ``tracking_uri`` (default: the spec's ``mlflow.tracking_uri``, then MLflow's own
    default) and scored first; its scored rows are written to ``scored_dir/systems/<name>.scored.parquet``
    (default: a new temporary folder, removed when the result is garbage collected) and evaluated as its run
    (``result.scored``, ``result.models``). On Spark the candidates are scored on Spark's executors and the
    scored rows are a Parquet folder written by Spark (:mod:`ndcg_mlflow.engines.spark.models`).
    """
    chosen = engine_of(engine)
    inputs = Inputs(qrels, systems, columns, base_dir, progress, tracking_uri, scored_dir)
    loaded = resolve_spec(spec, qrels, systems, base_dir)  # the spec, its files checked: nothing read yet
    refusal = chosen.refuses(loaded)
    if refusal is not None:
        raise refusal
    if loaded.judge is not None:  # the engine evaluates every system under both judgments (what a judge cannot do
        from .engines.with_judge import evaluate as evaluate_judged  # is refused there, before anything is read)

        return evaluate_judged(chosen, loaded, inputs)
    return chosen.evaluate(loaded, inputs)
