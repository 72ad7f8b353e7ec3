"""The local engine: every run read, joined, ranked and summed in this process
(:mod:`ndcg_mlflow.engines.local.pipeline`), one run in memory at a time; model systems scored here first
(:mod:`ndcg_mlflow.tracking.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...result import EvaluationResult
from ...timings import phase
from ..preparation import remove_with, resolve_spec, scoring_folder
from .pipeline import evaluate as evaluate_files


def evaluate(
    spec: Any,
    *,
    qrels: Any = None,
    systems: Mapping[str, Any] | None = None,
    columns: Mapping[str, str] | None = None,
    base_dir: str | Path | None = None,
    progress: Any = None,
    keep_data: bool = False,
    tracking_uri: str | None = None,
    scored_dir: str | Path | None = None,
) -> EvaluationResult:
    """:func:`ndcg_mlflow.evaluate` on this process."""
    if systems is None:  # the spec's own systems: loaded once here, its files checked
        spec = resolve_spec(spec, qrels, None, base_dir)
    if systems is not None or not any(src.unscored for _, src in spec.systems):
        return evaluate_files(
            spec,
            qrels=qrels,
            systems=systems,
            columns=columns,
            base_dir=base_dir,
            progress=progress,
            keep_data=keep_data,
        )
    from ...tracking.registry import score_model_systems

    folder = scoring_folder(scored_dir)
    with phase("models"):
        scored_spec, resolved, scored = score_model_systems(
            spec, folder, progress=progress, tracking_uri=tracking_uri or spec.mlflow.tracking_uri
        )
    result = evaluate_files(scored_spec, qrels=qrels, columns=columns, progress=progress, keep_data=keep_data)
    result.models, result.scored = resolved, scored
    if scored_dir is None:
        remove_with(result, folder)
    return result
