"""The engines an evaluation runs on: an engine is an object the caller chooses, holding its own settings,
checked when it is made.

``ndcg_mlflow.evaluate(spec, ..., engine=Local())`` (the default) evaluates in this process (:mod:`.local`);
``engine=Spark(session, buckets=...)`` evaluates the runs' rows on Apache Spark (:mod:`.spark`, entered by
:func:`.spark.evaluate_on`). Both give the same per-query numbers and an
:class:`~ndcg_mlflow.result.EvaluationResult`, and both are an :class:`Engine`: what the engine refuses for a
spec (:meth:`Engine.refuses`, asked before anything is read) and the evaluation of a spec with its
:class:`Inputs` (:meth:`Engine.evaluate`). Nothing here imports an engine's modules (nor pyspark): an engine's
``evaluate`` imports them when an evaluation runs on it, and the engines may make these objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SpecError
from .settings import Engine, Inputs, LocalSettings, SparkSettings

if TYPE_CHECKING:
    from ..result import EvaluationResult
    from ..spec import Spec

ENGINES = ("local", "spark")


@dataclass(frozen=True)
class Local(LocalSettings):
    """This process: the runs are read one at a time and joined, ranked and summed with numpy (and C).

    ``keep_data`` keeps each system's joined rows on the result (``result.prepared``), for recomputing under other
    rules without reading the files again."""

    def refuses(self, spec: Spec) -> SpecError | None:
        """Nothing: this process evaluates every spec."""
        return None

    def evaluate(self, spec: Spec, inputs: Inputs) -> EvaluationResult:
        from .local import evaluate_on

        return evaluate_on(self, spec, inputs)


@dataclass(frozen=True)
class Spark(SparkSettings):
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

    def evaluate(self, spec: Spec, inputs: Inputs) -> EvaluationResult:
        from .spark import evaluate_on

        return evaluate_on(self, spec, inputs)


def engine_of(engine: Engine | str | None) -> Engine:
    """The engine asked for: an engine object (anything with the :class:`Engine` interface), or its name
    (``"local"``, ``"spark"``: with default settings)."""
    if engine is None or engine == "local":
        return Local()
    if engine == "spark":
        return Spark()
    if isinstance(engine, Engine):
        return engine
    raise SpecError("engine", f"is Local(), Spark(...), 'local' or 'spark', got {engine!r}.")


__all__ = ["ENGINES", "Engine", "Inputs", "Local", "Spark", "engine_of"]
