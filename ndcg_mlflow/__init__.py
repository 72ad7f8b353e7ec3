"""ndcg_mlflow: spec-driven, reproducible nDCG evaluation of ranking systems, logged to MLflow.

``import ndcg_mlflow`` does not import mlflow; only :mod:`ndcg_mlflow.tracking` does, lazily.
"""

from .api import evaluate  # noqa: E402
from .engines import Local, Spark  # noqa: E402
from .errors import DataError, EvaluationError, NdcgError, SpecError, TrackingError  # noqa: E402
from .evaluation import EvaluationResult, evaluate_tables  # noqa: E402
from .spec import Spec, load_spec  # noqa: E402
from .version import __version__  # noqa: E402

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
