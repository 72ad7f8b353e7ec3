"""From per-query rows to the result, the same on every engine: the error rules of a system's query statuses, its
means, the result of every system, then its statistics (intervals, comparisons, the decision, sensitivity)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EvaluationError, preview
from ..kernel import STATUS_EMPTY_IDEAL, STATUS_MISSING, QueryResult
from ..readers import Table
from ..result import EvaluationResult, FileInfo, SystemResult, relative
from ..rules import stops
from ..spec import Metric, Spec, outside_paths
from ..statistics.inference import nan_weighted_mean
from ..timings import phase


def finish(
    spec: Spec,
    query_ids: np.ndarray,
    weights: np.ndarray,
    systems: dict[str, SystemResult],
    files: list[FileInfo],
    notes: list[str],
    qrels: Table,
    engine: str = "local",
    segments: np.ndarray | None = None,
) -> EvaluationResult:
    """The result of every system's per-query numbers (before the statistics), whatever engine computed them;
    ``segments``: the evaluated queries' segments (:func:`~ndcg_mlflow.engines.inputs.query_segments`)."""
    for path in outside_paths(spec):
        notes.append(f"data path outside the spec's folder: {path}")
    result = EvaluationResult(spec, query_ids, weights, systems, files, notes, engine=engine, segments=segments)
    result.grades = sorted(set(qrels.value.tolist()))
    return result


def statistics(result: EvaluationResult, progress=None, alternative_ndcg: Any = None) -> EvaluationResult:
    """Intervals and comparisons (the spec's uncertainty section), then sensitivity, on the per-query rows;
    ``alternative_ndcg``: the per-query numbers of sensitivity's alternatives as the engine computed them
    (:data:`~ndcg_mlflow.statistics.sensitivity.AlternativeNdcg`; default: recomputed from the kept rows)."""
    with phase("statistics"):
        return _statistics(result, progress, alternative_ndcg)


def _statistics(result: EvaluationResult, progress, alternative_ndcg: Any) -> EvaluationResult:
    spec = result.spec
    if spec.uncertainty is not None:
        from ..statistics.comparisons import analyze

        if progress:
            progress(f"resampling queries ({spec.uncertainty.resamples} resamples)")
        result.analysis = analyze(result, spec.uncertainty, spec.comparison, spec.decision)
        if spec.decision is not None:
            from ..statistics.decision import decide

            result.decision = decide(
                spec.decision,
                result.analysis.comparisons,
                spec.uncertainty.confidence,
                result.analysis.paired,
                segment_paired=result.analysis.segment_paired,
            )
    if spec.sensitivity:
        from ..statistics.sensitivity import sensitivity

        if progress:
            progress("recomputing under each rule's alternatives (sensitivity)")
        result.sensitivity = sensitivity(result, alternative_ndcg)
    return result


def display_depth(metric: Metric) -> int:
    """How many documents per query are kept for showing wins and losses."""
    finite = [k for k in metric.cutoffs if k is not None]
    return min(max(finite + [10]), 100)


def system_result(
    name: str,
    path: str | Path,
    metric: Metric,
    qr: QueryResult,
    query_ids: np.ndarray,
    weights: np.ndarray,
    notes: list[str],
    run_queries: int,
    unknown: int,
    examples: Any,
    top: Any,
) -> SystemResult:
    """One system's result from its per-query rows (``qr``, of ``query_ids``; ``top``: its top lists), whatever
    engine computed them: :func:`system_checks` (``run_queries``: the run's queries, ``unknown`` of them outside
    the evaluated set, ``examples`` some of them), then the means."""

    def statuses(status: int) -> tuple[int, Any]:
        hit = query_ids[(qr.status == status).any(axis=1)]
        return hit.size, hit[:5]

    returned = bool(qr.n_returned.any())
    system_checks(name, path, metric, len(query_ids), returned, run_queries, unknown, examples, notes, statuses)
    return SystemResult(name, qr, system_means(metric, qr, weights), top)


def system_checks(
    name: str,
    path: str | Path,
    metric: Metric,
    n_queries: int,
    returned: bool,
    run_queries: int,
    unknown: int,
    examples: Any,
    notes: list[str],
    statuses: Callable[[int], tuple[int, Any]],
) -> None:
    """What follows a system's per-query rows on every engine, in this order: a run that returns none of the
    ``n_queries`` evaluated queries (``returned``: whether it returns some) is refused; its ``unknown`` queries
    outside the set get their note; the ``error`` choices of ``missing_queries`` and ``empty_ideal`` are applied
    (``statuses(status)``: how many evaluated queries have that status, and the first five of them, asked only
    under a rule that stops)."""
    if not returned:
        none_returned(name, path, n_queries, run_queries, examples)
    note_unknown_queries(notes, name, unknown)
    for status, rule in ((STATUS_MISSING, metric.missing_queries), (STATUS_EMPTY_IDEAL, metric.empty_ideal)):
        if stops(rule):
            n, first = statuses(status)
            if n:
                stopped_by(metric, status, name, path, n, first)


def none_returned(name: str, path: str | Path, nq: int, run_queries: int, examples: Any) -> None:
    """Raise the error of a run that returns none of the evaluated queries (``examples``: some of its queries)."""
    raise EvaluationError(
        f"system '{name}' ({path}) returns none of the {nq} evaluated queries (its {run_queries} queries, e.g. "
        f"{preview(examples)}, are all outside the set): is it the run of another collection?"
    )


def note_unknown_queries(notes: list[str], name: str, unknown: int) -> None:
    """The note of a run's queries outside the evaluated set (none when there are none)."""
    if unknown:
        notes.append(f"{name}: {unknown} queries of the run are not in the evaluated set and were ignored")


def stopped_by(metric: Metric, status: int, name: str, path: str | Path, n: int, first: Any) -> None:
    """Raise the error of a query status (missing, empty ideal) whose rule is ``error``, when it is: ``n`` queries
    of system ``name`` have it, ``first`` the first of them (every engine words it so)."""
    if status == STATUS_MISSING and stops(metric.missing_queries):
        raise EvaluationError(
            f"system '{name}' ({path}) returns nothing for {n} evaluated "
            f"queries: {preview(first, total=n)}; metric.missing_queries is 'error'."
        )
    if status == STATUS_EMPTY_IDEAL and stops(metric.empty_ideal):
        raise EvaluationError(
            f"system '{name}': {n} queries have an ideal DCG of 0 under "
            f"ideal '{metric.ideal}': {preview(first, total=n)}; metric.empty_ideal is 'error'."
        )


def system_means(metric: Metric, qr: QueryResult, weights: np.ndarray) -> dict[str, dict[str, Any]]:
    out = {}
    rel = relative(weights)  # weights over the largest: no overflow or underflow in the sums
    for j, key in enumerate(metric.keys):
        x = qr.ndcg[:, j]
        ok = ~np.isnan(x)
        w = weights[ok]
        r = rel[ok]
        out[key] = {
            "mean": nan_weighted_mean(x, rel),
            "n_evaluated": int(ok.sum()),
            "n_excluded": int((~ok).sum()),
            "n_missing": int((qr.status[:, j] == STATUS_MISSING).sum()),
            "n_empty_ideal": int((qr.status[:, j] == STATUS_EMPTY_IDEAL).sum()),
            "weight_sum": float(w.sum()),
            "n_eff": float(r.sum() ** 2 / (r**2).sum()) if ok.any() else 0.0,
            "judged_coverage": float(np.nanmean(qr.judged_coverage[:, j]))
            if np.isfinite(qr.judged_coverage[:, j]).any()
            else float("nan"),
        }
    return out
