"""The entry point: :func:`evaluate` runs a spec on the engine asked for.

Both engines give the same per-query numbers and the same :class:`~ndcg_mlflow.evaluation.EvaluationResult`:
the local engine (:func:`ndcg_mlflow.evaluation.evaluate`, this process) and Apache Spark
(:mod:`ndcg_mlflow.engines.spark`, imported only when asked for). This module sits above both, so neither
imports the other's caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import SpecError
from .evaluation import EvaluationResult
from .evaluation import evaluate as evaluate_local
from .spec import Spec


def evaluate(spec: str | Path | Mapping[str, Any] | Spec, *, qrels: Any = None,
             systems: Mapping[str, Any] | None = None, columns: Mapping[str, str] | None = None,
             base_dir: str | Path | None = None, progress=None, keep_data: bool = False, engine: str = "local",
             spark: Any = None, buckets: int | None = None, prefilter: bool | None = None,
             driver_queries: int | None = None) -> EvaluationResult:
    """Evaluate every system of a spec (a path, a mapping or a :class:`Spec`); touches no tracking server.

    The judgments and the systems' rows come from the spec's ``data`` section, or from tables given here:
    ``qrels`` and each value of ``systems`` (a name -> table mapping) may be anything with the Arrow C stream
    interface (pyarrow, pandas, polars, DuckDB...) or a nested mapping ``{query_id: {doc_id: value}}``; see
    :func:`~ndcg_mlflow.evaluation.evaluate_tables`. Given tables take the place of the data section's entries,
    which may then be left out (only when both the judgments and the systems are given).

    ``keep_data`` keeps each system's joined rows on the result (``result.prepared``),
    for recomputing under other rules without reading the files again.

    ``engine="spark"`` evaluates on Apache Spark (``spark``: the SparkSession, classic or Connect; ``buckets``:
    the number of query buckets; ``prefilter``: the top-K pre-filter before the shuffle, by default applied
    whenever it can be; ``driver_queries``: the evaluated queries whose per-query rows may come back to the
    driver), where ``qrels`` and ``systems`` may also be Spark DataFrames; the per-query
    numbers are the local engine's (see :mod:`ndcg_mlflow.engines.spark`).
    """
    if engine not in ("local", "spark"):
        raise SpecError("engine", f"is 'local' or 'spark', got {engine!r}.")
    if engine == "spark":
        if keep_data:
            raise SpecError("keep_data", "the Spark engine keeps no joined rows on the driver; evaluate with the "
                                         "local engine to keep them.")
        from .engines.spark import evaluate as evaluate_spark

        return evaluate_spark(spec, spark=spark, qrels=qrels, systems=systems, columns=columns, base_dir=base_dir,
                              progress=progress, buckets=buckets, prefilter=prefilter,
                              driver_queries=driver_queries)
    if spark is not None or buckets is not None or prefilter is not None or driver_queries is not None:
        raise SpecError("engine", "spark=, buckets=, prefilter= and driver_queries= apply to engine='spark'.")
    return evaluate_local(spec, qrels=qrels, systems=systems, columns=columns, base_dir=base_dir,
                          progress=progress, keep_data=keep_data)
