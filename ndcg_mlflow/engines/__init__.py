"""The engines an evaluation runs on: an engine is an object the caller chooses, holding its own settings,
checked when it is made.

``ndcg_mlflow.evaluate(spec, ..., engine=Local())`` (the default) evaluates in this process (:mod:`.local`);
``engine=Spark(session, buckets=...)`` evaluates the runs' rows on Apache Spark (:mod:`.spark`, entered by
:func:`.spark.evaluate_on`). Both give the same per-query numbers and an
:class:`~ndcg_mlflow.result.EvaluationResult`. Nothing here imports an engine's modules (nor pyspark):
:func:`ndcg_mlflow.evaluate` imports the one an evaluation runs on, and the engines may make these objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError

ENGINES = ("local", "spark")


@dataclass(frozen=True)
class Local:
    """This process: the runs are read one at a time and joined, ranked and summed with numpy (and C)."""

    name = "local"


@dataclass(frozen=True)
class Spark:
    """Apache Spark: the runs' rows stay in Spark, grouped into buckets of whole queries, each bucket evaluated by
    the local engine's own join and kernel in the executors (:mod:`ndcg_mlflow.engines.spark`).

    ``session``: a SparkSession (classic or Spark Connect), or a function returning one, called only once Spark is
    needed (after the model URIs of model systems resolve); by default the active session. ``buckets``: the number
    of query buckets (default: about a million run rows a bucket). ``prefilter``: the top-K pre-filter before the
    shuffle; None applies it whenever it can, True requires it (an error says why it cannot apply), False never
    applies it. ``driver_queries``: the evaluated queries whose per-query rows may come back to the driver
    (default 5,000,000). Beyond it, with ``per_query_path`` (a new folder), the per-query table is written there
    as Parquet and the statistics come from ``groups`` random groups of queries; there, beyond
    ``driver_judgments`` judgments (0: always) the judgments, the evaluated query set and the weights are read,
    checked and kept in Spark.
    """

    session: Any = None
    buckets: int | None = None
    prefilter: bool | None = None
    driver_queries: int | None = None
    per_query_path: str | Path | None = None
    groups: int | None = None
    driver_judgments: int | None = None

    name = "spark"

    def __post_init__(self) -> None:
        b = self.buckets
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise SpecError("buckets", f"must be a positive integer, got {b!r}.")
        for key in ("driver_queries", "driver_judgments", "groups"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise SpecError(key, f"must be a number (0 or more), got {value!r}.")
        if self.groups is not None and self.groups < 2:
            raise SpecError("groups", f"must be an integer of at least 2, got {self.groups!r}.")
        if self.prefilter not in (None, True, False):
            raise SpecError("prefilter", f"is None, True or False, got {self.prefilter!r}.")


Engine = Local | Spark


def engine_of(engine: Engine | str | None) -> Engine:
    """The engine asked for: an engine object, or its name (``"local"``, ``"spark"``: with default settings)."""
    if engine is None or engine == "local":
        return Local()
    if engine == "spark":
        return Spark()
    if isinstance(engine, (Local, Spark)):
        return engine
    raise SpecError("engine", f"is Local(), Spark(...), 'local' or 'spark', got {engine!r}.")


__all__ = ["ENGINES", "Engine", "Local", "Spark", "engine_of"]
