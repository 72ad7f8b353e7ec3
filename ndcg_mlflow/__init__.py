"""ndcg_mlflow: spec-driven, reproducible nDCG evaluation of ranking systems, logged to MLflow.

``import ndcg_mlflow`` does not import mlflow; only :mod:`ndcg_mlflow.tracking` does, lazily.
"""

__version__ = "0.1.0"

from .errors import DataError, EvaluationError, NdcgError, SpecError, TrackingError  # noqa: E402
from .spec import Spec, load_spec  # noqa: E402
from .evaluation import EvaluationResult, evaluate  # noqa: E402

__all__ = ["__version__", "evaluate", "load_spec", "Spec", "EvaluationResult", "NdcgError", "SpecError",
           "DataError", "EvaluationError", "TrackingError"]
