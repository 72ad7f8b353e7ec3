"""The local engine: every run read, joined, ranked and summed in this process (:mod:`ndcg_mlflow.evaluation`),
one run in memory at a time; model systems scored here first (:mod:`ndcg_mlflow.tracking.registry`)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..evaluation import EvaluationResult, resolve_spec
from ..evaluation import evaluate as evaluate_files
from ..spec import Spec
from ..timings import phase
from . import Inputs, Local


def evaluate(engine: Local, spec: Any, inputs: Inputs) -> EvaluationResult:
    """:func:`ndcg_mlflow.evaluate` on this process, with the settings of ``engine``."""
    qrels, systems, progress = inputs.qrels, inputs.systems, inputs.progress
    if systems is None:  # the spec's own systems: loaded once here, its files checked
        spec = resolve_spec(spec, qrels, None, inputs.base_dir)
    if systems is not None or not any(src.unscored for _, src in spec.systems):
        return evaluate_files(spec, inputs, keep_data=engine.keep_data)
    from ..tracking.registry import score_model_systems

    folder = scoring_folder(inputs.scored_dir)
    with phase("models"):
        scored_spec, resolved, scored = score_model_systems(
            spec, folder, progress=progress, tracking_uri=inputs.tracking_uri or spec.mlflow.tracking_uri
        )
    scored_inputs = Inputs(qrels=qrels, columns=inputs.columns, progress=progress)
    result = evaluate_files(scored_spec, scored_inputs, keep_data=engine.keep_data)
    result.models, result.scored = resolved, scored
    if inputs.scored_dir is None:
        remove_with(result, folder)
    return result


def model_spec(spec: Any, qrels: Any, systems: Mapping[str, Any] | None, base_dir: str | Path | None) -> Spec | None:
    """The spec, its files checked, when some of its systems are models to score first (their candidates' files
    are checked before any model is loaded); None when every system is a run (or the runs are given)."""
    if systems is not None:
        return None
    loaded = resolve_spec(spec, qrels, None, base_dir)
    return loaded if any(src.unscored for _, src in loaded.systems) else None


def scoring_folder(scored_dir: str | Path | None) -> Path:
    """Where a model's scored rows are written: the caller's folder, else a new temporary one."""
    return Path(scored_dir) if scored_dir is not None else Path(tempfile.mkdtemp(prefix="ndcg-mlflow-scored-"))


def remove_with(result: Any, folder: Path) -> None:
    """A scoring folder of our own lives as long as the result that names its files."""
    import shutil
    import weakref

    weakref.finalize(result, shutil.rmtree, folder, True)
