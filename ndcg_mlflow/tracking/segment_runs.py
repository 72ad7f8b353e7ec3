"""The segments of logged runs, for ``compare``: whether two system runs' evaluations declared the same segments
file (by its sha256, tag ``ndcg_mlflow.data.queries.segments.sha256``), and the comparison's spec given the
segments and the settings that go with them. No mlflow import: it reads the runs it is given."""

from __future__ import annotations

from typing import Any

from ..rules import STRATIFY, stratifies, stratify_text
from .names import TAG_PREFIX


def segments_difference(a: tuple[str, Any], b: tuple[str, Any]) -> str | None:
    """Why two system runs (``(run id, mlflow Run)``) cannot be compared segment by segment: their evaluations
    declared different segments files (tag ``ndcg_mlflow.data.queries.segments.sha256``), or one declared
    ``queries.segments`` and the other none; None when both declared the same file, or neither."""
    key = f"{TAG_PREFIX}.data.queries.segments.sha256"
    if a[1].data.tags.get(key) == b[1].data.tags.get(key):
        return None
    said = [
        f"run {run_id} has queries.segments {run.data.params.get('queries.segments', '?')!r} (sha256 {digest})"
        if (digest := run.data.tags.get(key))
        else f"run {run_id} declared no queries.segments"
        for run_id, run in (a, b)
    ]
    return (
        f"the two runs put their queries in different segments: {said[0]}, {said[1]}. Compare runs whose "
        f"evaluations declared the same segments file, or neither"
    )


def segment_settings(raw: dict[str, Any], *params: dict[str, str], segments: bool = True) -> str | None:
    """The comparison's spec ``raw`` with the logged runs' segments and the statistics they declared put in
    place: ``queries.segments`` as declared (with ``segments``: the same file on both sides);
    ``uncertainty.stratify`` of the first run whose evaluation had the section (as the other settings) and
    ``comparison.risk_alpha``: every alpha either run's evaluation declared, whether or not the segments are
    compared. Returns why the comparison cannot compute what was declared (that run's intervals stratified by
    segments, compared without segments), else None."""
    declared = next((p["queries.segments"] for p in params if "queries.segments" in p), None)
    if segments and declared is not None:
        raw["queries"]["segments"] = declared
    uncertainty = next((p for p in params if "uncertainty.method" in p), None)
    if uncertainty is not None and stratifies(uncertainty.get(STRATIFY.key)):
        if not segments or declared is None:
            return (
                "the evaluation whose settings the comparison takes declared uncertainty.stratify: segments (each "
                "interval resampled within segments), which a comparison without segments cannot compute"
            )
        raw["uncertainty"]["stratify"] = stratify_text(True)
    alphas = [float(a) for p in params if "comparison.risk_alpha" in p for a in p["comparison.risk_alpha"].split(",")]
    if alphas:  # every alpha either evaluation declared, in the order declared
        raw["comparison"]["risk_alpha"] = list(dict.fromkeys(alphas))
    return None
