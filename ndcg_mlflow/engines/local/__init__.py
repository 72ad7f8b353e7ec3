"""The local engine: every run read, joined, ranked and summed in this process
(:mod:`ndcg_mlflow.engines.local.pipeline`), one run in memory at a time; model systems scored here first
(:mod:`ndcg_mlflow.tracking.registry`)."""

from __future__ import annotations

from dataclasses import replace

from ...result import EvaluationResult
from ...spec import Spec
from ...timings import phase
from ..preparation import remove_with, scoring_folder
from ..settings import Inputs, LocalSettings
from .pipeline import evaluate


def evaluate_on(engine: LocalSettings, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """:func:`ndcg_mlflow.evaluate` on this process, with the settings of ``engine`` (a
    :class:`~ndcg_mlflow.engines.Local`) and its ``inputs``, ``spec`` resolved with them (loaded, its files
    checked: :func:`ndcg_mlflow.evaluate` did it): model systems are scored first
    (:func:`~ndcg_mlflow.tracking.registry.score_model_systems`), then every run is evaluated by
    :func:`.pipeline.evaluate`."""
    systems, progress = inputs.systems, inputs.progress
    if systems is not None or not any(src.unscored for _, src in spec.systems):
        return evaluate(engine, spec, inputs)
    from ...tracking.registry import score_model_systems

    folder = scoring_folder(inputs.scored_dir)
    with phase("models"):
        scored_spec, resolved, scored = score_model_systems(
            spec, folder, progress=progress, tracking_uri=inputs.tracking_uri or spec.mlflow.tracking_uri
        )
    scored_inputs = replace(inputs, systems=None, base_dir=None, tracking_uri=None, scored_dir=None)
    result = evaluate(engine, scored_spec, scored_inputs)
    result.models, result.scored = resolved, scored
    if inputs.scored_dir is None:
        remove_with(result, folder)
    return result
