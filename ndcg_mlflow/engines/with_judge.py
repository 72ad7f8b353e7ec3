"""An evaluation whose judgments come from two sources (the spec's ``judge`` section), on any engine: the engine
evaluates every system twice, under the judge's labels (``data.judge_qrels``: every evaluated query, with the spec's
query set, weights and segments) and under the human labels (``data.qrels``: the queries they judge), with the same
metric rules; the labelled queries are the evaluated queries the humans judged. The two per-query tables are then
combined by :mod:`ndcg_mlflow.statistics.judged` (the declared estimator's means, intervals and comparisons, and
the human-only and judge-only views beside them), and the decision reads the declared estimator's interval."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DataError, SpecError
from ..kernel import STATUS_NAMES
from ..readers import read_qrels
from ..result import EvaluationResult
from ..spec import Queries, Spec
from ..timings import phase

if TYPE_CHECKING:
    from ..statistics.judged import JudgeViews
    from .settings import Engine, Inputs


def refuses(spec: Spec) -> SpecError | None:
    """What an evaluation with a judge cannot do (yet), naming the key."""
    if spec.judge is None:
        return None
    unscored = [name for name, src in spec.systems if src.unscored]
    if unscored:
        return SpecError(
            f"data.systems.{unscored[0]}",
            "is a model; with a judge every system is evaluated under both judgments, which needs its rows: score "
            "the model first ('ndcg-mlflow run' without the judge section writes them) and give its scored rows.",
        )
    if spec.sensitivity:
        return SpecError(
            "report.sensitivity",
            "recomputes the means under other rules with one source of judgments; with a judge, evaluate the rules "
            "one spec at a time (report.sensitivity: false).",
        )
    if spec.decision is not None and (
        spec.decision.guardrails.segments is not None or spec.decision.guardrails.regressions is not None
    ):
        return SpecError(
            "decision.guardrails",
            "are read from each query's difference under one source of judgments; with a judge the decision reads "
            "the declared estimator's interval alone: remove the guardrails.",
        )
    return None


def evaluate(engine: Engine, spec: Spec, inputs: Inputs) -> EvaluationResult:
    """Every system of ``spec`` (with a ``judge`` section) evaluated on ``engine`` under both judgments and
    combined."""
    judge = spec.judge
    assert judge is not None
    refusal = refuses(spec)
    if refusal is not None:
        raise refusal
    bare = dataclasses.replace(spec, judge=None, uncertainty=None, comparison=None, decision=None, report=None)
    by_judge = dataclasses.replace(bare, qrels=judge.judgments)
    by_humans = dataclasses.replace(bare, queries=Queries(weights=None, set=None, segments=None), companions=None)
    progress = inputs.progress
    if progress:
        progress(f"evaluating under the judge's judgments ({judge.judgments.declared})")
    result = engine.evaluate(by_judge, dataclasses.replace(inputs, qrels=None))
    if progress:
        progress(f"evaluating under the human judgments ({spec.qrels.declared})")
    human = engine.evaluate(by_humans, inputs)
    for r in (result, human):
        if r.per_query_path is not None:
            raise SpecError(
                "judge",
                "combines each query's values under both judgments on the driver; this evaluation has more queries "
                "than the engine's driver_queries: raise it (Spark(driver_queries=...)).",
            )
    with phase("statistics"):
        return _combine(spec, result, human, inputs)


def _combine(spec: Spec, result: EvaluationResult, human: EvaluationResult, inputs: Inputs) -> EvaluationResult:
    from ..statistics.decision import decide

    judge = spec.judge
    assert judge is not None
    where = {q: i for i, q in enumerate(result.query_ids.tolist())}
    rows = np.array([where.get(q, -1) for q in human.query_ids.tolist()], dtype=np.int64)
    inside = rows >= 0
    source = spec.qrels.path if spec.qrels.path is not None else spec.qrels.declared
    if not inside.any():
        raise DataError(
            source,
            f"none of the {human.query_ids.size} queries the humans judged is an evaluated query (those the judge's "
            f"judgments in {judge.judgments.declared} cover"
            + (", in queries.set" if spec.queries.set is not None else "")
            + "): the estimate needs human values of some evaluated queries.",
        )
    labelled = np.zeros(result.query_ids.size, dtype=bool)
    labelled[rows[inside]] = True
    values: dict[str, np.ndarray] = {}
    for name, sr in result.systems.items():
        y = np.full(sr.result.ndcg.shape, np.nan)
        hr = human.systems[name].result
        y[rows[inside]] = hr.ndcg[inside]
        _check_both_defined(name, spec, result, sr.result.ndcg, y, labelled, hr.status[inside], rows[inside])
        values[name] = y
    first = {f.role: f for f in result.files}
    for f in human.files:
        seen = first.get(f.role)
        if seen is not None and f.role != "qrels" and seen.sha256 != f.sha256:
            raise DataError(
                f.path,
                f"changed while it was read: its sha256 was {seen.sha256} under the judge's judgments and "
                f"{f.sha256} under the human judgments; evaluate it again once nothing writes it.",
            )
    outside = int((~inside).sum())
    if outside:
        result.notes.append(
            f"{outside} queries judged by humans are not evaluated queries and were ignored (first: "
            f"{human.query_ids[~inside][0]!r})"
        )
    result.files = [dataclasses.replace(f, role="judge_qrels") if f.role == "qrels" else f for f in result.files] + [
        f for f in human.files if f.role == "qrels"
    ]
    result.spec = spec
    grades = _shared_grades(spec, result.query_ids[labelled], inputs)
    views = judged_result(result, values, labelled, grades)
    if spec.decision is not None and spec.uncertainty is not None:
        result.decision = decide(
            spec.decision,
            views.analysis.comparisons,
            spec.uncertainty.confidence,
            views.analysis.paired,
            intervals=views.intervals,
            interval=f"weighted t, Welch-Satterthwaite ({judge.estimator})",
        )
    return result


def judged_result(
    result: EvaluationResult, values: dict[str, np.ndarray], labelled: np.ndarray, grades: tuple[np.ndarray, np.ndarray]
) -> JudgeViews:
    """``result`` (each system's values under the judge's labels; its spec has the judge section) made the judged
    evaluation's: its record (``summary.json``'s ``judge``), the human values (``values``, NaN outside the
    ``labelled`` queries), the declared estimator's analysis and means (``judged_statistics``); for an evaluation's
    engines and for ``compare`` of two logged runs alike."""
    from ..statistics.judged import judged_statistics

    views = judged_statistics(result, values, labelled, grades)
    result.judged = views.record
    result.human_ndcg = values
    result.analysis = views.analysis
    for name, sr in result.systems.items():
        for key in result.spec.metric.keys:
            sr.means[key]["mean"] = views.estimates[(name, key, None)]
    return views


def _check_both_defined(
    name: str,
    spec: Spec,
    result: EvaluationResult,
    f: np.ndarray,
    y: np.ndarray,
    labelled: np.ndarray,
    human_status: np.ndarray,
    rows: np.ndarray,
) -> None:
    """A labelled query must have a value under both judgments or under neither: a query the human labels leave
    out (an ideal DCG of 0 under ``empty_ideal: exclude``) that the judge's keep, or the reverse, would estimate
    two different sets of queries."""
    differs = labelled[:, None] & (np.isnan(f) != np.isnan(y))
    if not differs.any():
        return
    i, j = np.argwhere(differs)[0]
    query = result.query_ids[i]
    key = spec.metric.keys[j]
    if np.isnan(y[i, j]):
        hr = int(np.flatnonzero(rows == i)[0])
        why = f"left out under the human judgments ({STATUS_NAMES[human_status[hr, j]]})"
    else:
        why = "left out under the judge's judgments"
    raise DataError(
        spec.qrels.path if spec.qrels.path is not None else spec.qrels.declared,
        f"system '{name}': labelled query {query!r} at {key} is {why} but not under the other; the estimate needs "
        f"both values of every labelled query (metric.empty_ideal: exclude leaves out a query whose judgments are "
        f"all 0: set it to zero or one, or judge the query alike).",
    )


def _shared_grades(spec: Spec, labelled_ids: np.ndarray, inputs: Inputs) -> tuple[np.ndarray, np.ndarray]:
    """The human and judge grades of the documents both judged, of the labelled queries (Cohen's kappa)."""
    judge = spec.judge
    assert judge is not None
    src = judge.judgments
    judged = read_qrels(src.file, src.format, src.columns, src.version)
    if spec.qrels.in_memory:
        from .preparation import input_table

        humans = input_table(inputs.qrels, "qrels", "qrels", dict(inputs.columns or {}))
    else:
        humans = read_qrels(spec.qrels.file, spec.qrels.format, spec.qrels.columns, spec.qrels.version)

    def pairs(t) -> dict[tuple[str, str], float]:  # the labelled queries' rows only (the judge's may be many)
        rows = np.flatnonzero(np.isin(np.asarray(t.query.values, dtype=object), labelled_ids)[t.query.codes])
        q = np.asarray(t.query.values, dtype=object)[t.query.codes[rows]]
        return {(a, b): float(v) for a, b, v in zip(q.tolist(), t.doc.take(rows), t.value[rows].tolist())}

    h, j = pairs(humans), pairs(judged)
    both = [k for k in h if k in j]
    return np.array([h[k] for k in both]), np.array([j[k] for k in both])
