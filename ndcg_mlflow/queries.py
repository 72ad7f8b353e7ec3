"""The seam every engine meets: one system's rows of a set of whole queries, joined to those queries' judgments
(:func:`ndcg_mlflow.join.join`), become their per-query rows here.

:func:`score_queries` checks the joined rows (``unjudged: error``), ranks and sums them under the declared metric
(:func:`ndcg_mlflow.join.compute`), recomputes them under sensitivity's alternatives when asked, takes each
query's first documents, and measures the companions (:mod:`ndcg_mlflow.companions`) on the ranking it made.
The local engine calls it once per system over every evaluated query; the Spark engine once per bucket of whole
queries, in its executors. Both are query-local, so a bucket's queries get the numbers
the whole would give. What happens before (reading, the readers' checks, the join) and after (the error rules
that name queries across the whole set, means, statistics) is the callers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .companions import CompanionPlan, Shown, measure_queries
from .errors import EvaluationError
from .join import Catalog, PreparedRun, compute
from .kernel import NonFiniteError, QueryResult
from .rules import stops
from .spec import Metric


@dataclass
class TopLists:
    """The first ``depth`` documents each query showed, as the metric ranked them (for wins and losses), ordered by
    query then position."""

    depth: int
    query: np.ndarray  # evaluated query code of each entry
    position: np.ndarray  # 0-based rank
    doc: list  # doc id of each entry
    grade: np.ndarray  # its grade, NaN where unjudged

    def of(self, query: int, k: int | None = None) -> list[dict[str, Any]]:
        sel = np.flatnonzero((self.query == query) & (self.position < (k if k is not None else self.depth)))
        sel = sel[np.argsort(self.position[sel], kind="stable")]
        return [
            {
                "rank": int(self.position[i]) + 1,
                "doc_id": self.doc[i],
                "grade": None if np.isnan(self.grade[i]) else _num(self.grade[i]),
            }
            for i in sel
        ]


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


class UnjudgedError(EvaluationError):
    """A returned document without a judgment under ``unjudged: error``: the first such row (``row``, of the run
    table), its query and document ids, and how many there are in all."""

    def __init__(self, where: str, query: str, doc: str, count: int, row: int):
        self.query, self.doc, self.count, self.row = query, doc, count, row
        super().__init__(unjudged_message(where, query, doc, count))


def unjudged_message(where: str, query: Any, doc: Any, count: int) -> str:
    """The words of :class:`UnjudgedError` (``where``: the run and, when known, the line)."""
    return (
        f"{where}: document {doc!r} returned for query {query!r} has no judgment, and metric.unjudged is 'error' "
        f"({count} unjudged returned documents in all)."
    )


def overflow_message(query: Any, metric: Metric) -> str:
    """The words of a query whose nDCG (a ratio of finite sums) overflows a float."""
    return (
        f"the nDCG of query {str(query)!r} (its DCG over its ideal DCG) overflows a float: the gains of metric.gain "
        f"{metric.gain.describe()} differ too much in size."
    )


@dataclass
class QueryRows:
    """One system's per-query rows of a set of whole queries."""

    result: QueryResult  # the declared metric's numbers, one row per query of the set
    top: TopLists
    # sensitivity: each query's nDCG under each alternative, (queries, alternatives, cutoffs); an alternative whose
    # numbers overflow a float is NaN here and listed in ``overflowed`` (it is then undefined for every query)
    alternatives: np.ndarray | None = None
    overflowed: list[int] = field(default_factory=list)
    duplicate_rate: np.ndarray | None = None  # each query's duplicate rate per cutoff, (queries, cutoffs)
    shown: Shown | None = None  # the documents shown, for catalog coverage


def check_unjudged(metric: Metric, prep: PreparedRun) -> None:
    """``unjudged: error``: refuse a returned document without a judgment, naming the first (its line, when the
    run has lines)."""
    if stops(metric.unjudged) and not prep.judged.all():
        bad = np.flatnonzero(~prep.judged)
        first = int(prep.original(bad[:1])[0])
        run = prep.run
        raise UnjudgedError(run.at(first), run.query.row(first), run.doc.row(first), int(bad.size), first)


def score_queries(
    metric: Metric,
    prep: PreparedRun,
    catalog: Catalog,
    depth: int,
    alternatives: Sequence[Metric] = (),
    companions: CompanionPlan | None = None,
    groups: np.ndarray | None = None,
) -> QueryRows:
    """The per-query rows of ``prep`` (one system's rows joined to the judgments of a set of whole queries, whose
    ``catalog`` it is), with the companion measures of ``companions`` (``groups``: each run row's duplicate group
    code, :func:`~ndcg_mlflow.companions.group_codes`). Raises :class:`UnjudgedError` under ``unjudged: error``, and
    :class:`~ndcg_mlflow.kernel.NonFiniteError` when the declared metric's numbers overflow a float."""
    check_unjudged(metric, prep)
    qr = compute(metric, prep, catalog)
    alt: np.ndarray | None = None
    overflowed: list[int] = []
    if alternatives:
        alt = np.empty((qr.ndcg.shape[0], len(alternatives), qr.ndcg.shape[1]))
        for i, other in enumerate(alternatives):
            try:
                alt[:, i, :] = compute(other, prep, catalog).ndcg
            except NonFiniteError:  # this alternative's gains overflow a float (e.g. 2^g - 1 of a grade >= 1024)
                alt[:, i, :] = np.nan
                overflowed.append(i)
    rows, pos = qr.top(depth)
    query = prep.query[rows]
    order = np.lexsort((pos, query))
    rows, pos, query = rows[order], pos[order], query[order]
    top = TopLists(depth, query, pos, prep.run.doc.take(prep.original(rows)), prep.grade_of(rows))
    rate, shown = measure_queries(companions, prep, qr, groups) if companions is not None else (None, None)
    return QueryRows(qr, top, alt, overflowed, rate, shown)
