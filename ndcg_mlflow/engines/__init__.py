"""The engines an evaluation runs on: an engine is an object the caller chooses, holding its own settings,
checked when it is made.

``ndcg_mlflow.evaluate(spec, ..., engine=Local())`` (the default) evaluates in this process (:mod:`.local`);
``engine=Spark(session, buckets=...)`` evaluates the runs' rows on Apache Spark (:mod:`.spark`, entered by
:func:`.spark.evaluate_on`). Both give the same per-query numbers and an
:class:`~ndcg_mlflow.evaluation.EvaluationResult`, and both are an :class:`Engine`: what the engine refuses for a
spec (:meth:`Engine.refuses`, asked before anything is read) and the evaluation of a spec with its
:class:`Inputs` (:meth:`Engine.evaluate`). Nothing here imports an engine's modules (nor pyspark): an engine's
``evaluate`` imports them when an evaluation runs on it, and the engines may make these objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import SpecError
from ..rules import keeps_displayed_order

if TYPE_CHECKING:
    from ..evaluation import EvaluationResult
    from ..spec import Spec

ENGINES = ("local", "spark")


@dataclass(frozen=True)
class Inputs:
    """What an evaluation takes besides its spec and its engine (the arguments of :func:`ndcg_mlflow.evaluate`):
    ``qrels`` and ``systems`` (tables given in place of the spec's data entries), ``columns`` (their column
    mapping), ``base_dir`` (the folder the spec's relative paths start from), ``progress`` (a function given each
    progress line), ``tracking_uri`` (the registry model systems are resolved against) and ``scored_dir`` (where a
    model's scored rows are written)."""

    qrels: Any = None
    systems: Mapping[str, Any] | None = None
    columns: Mapping[str, str] | None = None
    base_dir: str | Path | None = None
    progress: Any = None
    tracking_uri: str | None = None
    scored_dir: str | Path | None = None


@runtime_checkable
class Engine(Protocol):
    """Where an evaluation runs."""

    name: str

    def refuses(self, spec: Spec) -> SpecError | None:
        """Why this engine cannot evaluate ``spec`` (loaded, its files checked, nothing read yet), naming the key;
        None when it can."""
        ...

    def evaluate(self, spec: Spec, inputs: Inputs) -> EvaluationResult:
        """Every system of ``spec`` evaluated with ``inputs`` (after :meth:`refuses` found nothing)."""
        ...


@dataclass(frozen=True)
class Local:
    """This process: the runs are read one at a time and joined, ranked and summed with numpy (and C).

    ``keep_data`` keeps each system's joined rows on the result (``result.prepared``), for recomputing under other
    rules without reading the files again."""

    keep_data: bool = False

    name = "local"

    def refuses(self, spec: Spec) -> SpecError | None:
        """Nothing: this process evaluates every spec."""
        return None

    def evaluate(self, spec: Spec, inputs: Inputs) -> EvaluationResult:
        from .local import evaluate

        return evaluate(self, spec, inputs)


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

    def refuses(self, spec: Spec) -> SpecError | None:
        """A model system under ``ties: displayed_order``: the rows a model scores on Spark have no displayed
        order."""
        if keeps_displayed_order(spec.metric.ties) and any(src.unscored for _, src in spec.systems):
            return SpecError(
                "metric.ties",
                "is displayed_order, but the rows a model scores on Spark have no displayed "
                "order (Spark's tasks write them in no fixed order); choose another tie "
                "rule, or evaluate with the local engine, which keeps the candidates' order.",
            )
        return None

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
