"""ndcg_mlflow: spec-driven, reproducible nDCG evaluation of ranking systems, logged to MLflow.

``import ndcg_mlflow`` loads the names below when first used (:mod:`.lazy`). mlflow is imported only by
:mod:`ndcg_mlflow.tracking` and :mod:`ndcg_mlflow.integrations`, lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import exports
from .version import __version__

if TYPE_CHECKING:
    from .api import evaluate
    from .engines import Local, Spark
    from .engines.local.pipeline import evaluate_tables
    from .errors import DataError, EvaluationError, NdcgError, SpecError, TrackingError
    from .result import EvaluationResult
    from .spec import Spec, load_spec

__all__ = [
    "__version__",
    "evaluate",
    "evaluate_tables",
    "Local",
    "Spark",
    "load_spec",
    "Spec",
    "EvaluationResult",
    "NdcgError",
    "SpecError",
    "DataError",
    "EvaluationError",
    "TrackingError",
]

__getattr__, __dir__ = exports(
    __name__,
    {
        "evaluate": ".api",
        "evaluate_tables": ".engines.local.pipeline",
        "EvaluationResult": ".result",
        "Local": ".engines",
        "Spark": ".engines",
        "load_spec": ".spec",
        "Spec": ".spec",
        **dict.fromkeys(("NdcgError", "SpecError", "DataError", "EvaluationError", "TrackingError"), ".errors"),
    },
)
