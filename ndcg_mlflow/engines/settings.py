"""What an evaluation is given besides its spec: the :class:`Inputs`, the :class:`Engine` interface every engine
implements, and each engine's settings (:class:`LocalSettings`, :class:`SparkSettings`), checked when they are
made: a leaf of ``engines/`` that the engines' packages import without importing the engine objects that call them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import SpecError
from ..rules import keeps_displayed_order

if TYPE_CHECKING:
    from ..result import EvaluationResult
    from ..spec import Spec


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
class LocalSettings:
    """The settings of :class:`~ndcg_mlflow.engines.Local` (see there)."""

    keep_data: bool = False

    name = "local"


@dataclass(frozen=True)
class SparkSettings:
    """The settings of :class:`~ndcg_mlflow.engines.Spark` (see there), checked when they are made, and what
    Spark refuses for a spec."""

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
