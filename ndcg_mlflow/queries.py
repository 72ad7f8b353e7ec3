"""The seam every engine meets: the judgments and one system's rows of a set of whole queries become their
per-query rows here, or the first problem of those rows.

:func:`query_rows` joins a system's rows to the judgments (:func:`ndcg_mlflow.join.join`), checks the joined rows
(``unjudged: error``), ranks and sums them under the declared metric (:func:`ndcg_mlflow.join.compute`),
recomputes them under sensitivity's alternatives when asked, takes each query's first documents, and measures the
companions (:mod:`ndcg_mlflow.companions`) on the ranking it made. :func:`raw_query_rows` is the same from raw
rows (Arrow tables, as a Spark bucket receives them): the checks of :data:`ROW_CHECKS` first, in their declared
order, then :func:`query_rows`. The local engine calls :func:`query_rows` once per system over every evaluated
query (its readers have applied the same rules to each line, naming it); the Spark engine calls
:func:`raw_query_rows` once per bucket of whole queries, in its executors, and :func:`first_problem` (the same
checks) on a task's rows before the shuffle. Both are query-local, so a bucket's queries get the numbers the whole
would give. Nothing else joins or calls the kernel. What happens after (the error rules that name queries across
the whole set, means, statistics) is :func:`ndcg_mlflow.engines.outcome.system_result`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .companions import CompanionPlan, Shown, measure_queries
from .errors import DataError, EvaluationError, NdcgError
from .join import Catalog, Judgments, PreparedRun, compute, join, judgments
from .kernel import NonFiniteError, QueryResult
from .readers import Ids, Strings, Table
from .readers.accept import Rows, empty_id, listed_twice, not_finite, not_integer, null_value
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


# --------------------------------------------------------------------------- the seam from raw rows

UNJUDGED = "unjudged"
OVERFLOW = "overflow"
RANK = "rank"  # the code of a rank that is not an integer
DUPLICATE = "duplicate"  # the code of a document listed twice for a query


class Problem(NamedTuple):
    """The first problem of a set of rows: its check's code (:data:`CHECK_ORDER`), the smallest (query, document)
    among the rows at fault (so that it is the same whatever the partition of the queries), how many rows, and the
    value refused (a score or a rank), where the message shows one."""

    code: str
    query: str | None
    doc: str | None
    n: int
    value: float | None = None


class RowCheck(NamedTuple):
    """One check of a set of raw run rows: its code, the column it reads (a ``rank`` check applies only when the
    rows have ranks), the rows it refuses (``refused(rows, column, among)``: a bool per row; ``among``: the rows
    whose whole query is at hand) and whether the message shows the refused value."""

    code: str
    column: str
    refused: Callable[[Any, str, np.ndarray], np.ndarray]
    shows_value: bool = False


def _null(rows: Any, column: str, among: np.ndarray) -> np.ndarray:
    return np.asarray(rows.column(column).is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _empty(rows: Any, column: str, among: np.ndarray) -> np.ndarray:
    import pyarrow.compute as pc

    col = plain(rows.column(column))
    return np.asarray(pc.fill_null(pc.equal(pc.utf8_length(col), 0), False).to_numpy(zero_copy_only=False), bool)


def _values(rows: Any, column: str) -> np.ndarray:
    return np.asarray(rows.column(column).to_numpy(zero_copy_only=False), dtype=np.float64)


def _not_finite(rows: Any, column: str, among: np.ndarray) -> np.ndarray:
    return ~np.isfinite(_values(rows, column))


def _not_integer(rows: Any, column: str, among: np.ndarray) -> np.ndarray:
    rank = _values(rows, column)
    return ~np.isfinite(rank) | (rank != np.round(rank))


def _twice(rows: Any, column: str, among: np.ndarray) -> np.ndarray:
    """The later rows of a (query, document) pair listed twice, among the rows of ``among``."""
    import pyarrow as pa

    from .readers import duplicate_pairs

    at = np.flatnonzero(among)
    out = np.zeros(rows.num_rows, dtype=bool)
    if at.size:
        take = pa.array(at)
        q, d = plain(rows.column("query_id")).take(take), plain(rows.column(column)).take(take)
        _, later = duplicate_pairs(arrow_table("run", "run", q, rows.column("score").take(take), None, d))
        out[at[later]] = True
    return out


ROW_CHECKS = (
    RowCheck("null:query_id", "query_id", _null),
    RowCheck("null:doc_id", "doc_id", _null),
    RowCheck("null:rank", "rank", _null),
    RowCheck("null:score", "score", _null),
    RowCheck("empty:query_id", "query_id", _empty),
    RowCheck("empty:doc_id", "doc_id", _empty),
    RowCheck("nonfinite:score", "score", _not_finite, True),
    RowCheck(RANK, "rank", _not_integer, True),
    RowCheck(DUPLICATE, "doc_id", _twice),
)
"""The checks of a set of raw run rows, in the order the seam applies them: the first that refuses a row is the
problem. (The readers apply the same rules to each line as they read it, with :mod:`ndcg_mlflow.readers.accept`'s
words.)"""

JUDGMENT_CHECKS = (
    RowCheck("null:query_id", "query_id", _null),
    RowCheck("null:doc_id", "doc_id", _null),
    RowCheck("null:grade", "grade", _null),
    RowCheck("empty:query_id", "query_id", _empty),
    RowCheck("empty:doc_id", "doc_id", _empty),
    RowCheck("nonfinite:grade", "grade", _not_finite, True),
)
"""The same checks of a set of raw judgments (where they are not read by a reader that checks each line), in the
order the seam applies them. (A document judged twice with different grades, and the gains, are the judgments'
own checks.)"""

CHECK_ORDER = tuple(c.code for c in ROW_CHECKS) + (UNJUDGED, OVERFLOW)
"""The codes of every problem the seam reports, in its order: the row checks, then the joined rows' (a document
without a judgment under ``unjudged: error``, a query whose nDCG overflows a float)."""


def first_problem(
    rows: Any, has_rank: bool, whole: np.ndarray | None = None, checks: Sequence[RowCheck] = ROW_CHECKS
) -> Problem | None:
    """The first problem of raw run rows (a pyarrow Table of ``query_id``, ``doc_id``, ``score`` and, with
    ``has_rank``, ``rank``) by :data:`ROW_CHECKS`, or None; documents twice are looked for among the rows of
    ``whole`` (a mask of the rows whose query's every row is here; default every row). ``checks``: other
    declared checks (:data:`JUDGMENT_CHECKS`, of judgments)."""
    among = np.ones(rows.num_rows, dtype=bool) if whole is None else np.asarray(whole, dtype=bool)
    for check in checks:
        if check.column == "rank" and not has_rank:
            continue
        at = np.flatnonzero(check.refused(rows, check.column, among))
        if at.size:
            q = plain(rows.column("query_id")).take(at).to_pylist()
            d = plain(rows.column("doc_id")).take(at).to_pylist()
            i = min(range(at.size), key=lambda k: (q[k] is not None, q[k] or "", d[k] is not None, d[k] or ""))
            value = float(_values(rows, check.column)[at[i]]) if check.shows_value else None
            return Problem(check.code, q[i], d[i], int(at.size), value)
    return None


def first_of(problems: Sequence[Problem], checks: Sequence[RowCheck]) -> Problem | None:
    """The first problem of rows checked in parts (each part's :func:`first_problem` by ``checks``): the earliest
    check's, with the rows at fault in every part and the smallest (query, document) among them."""
    order = [c.code for c in checks]
    if not problems:
        return None
    code = min((p.code for p in problems), key=order.index)
    same = [p for p in problems if p.code == code]
    first = min(same, key=lambda p: (p.query is not None, p.query or "", p.doc is not None, p.doc or ""))
    return first._replace(n=sum(p.n for p in same))


def problem_message(problem: Problem, metric: Metric, label: str) -> str:
    """A problem's message: the readers' words (:mod:`~ndcg_mlflow.readers.accept`) where a row's line would be the
    count of rows and the smallest (query, document) among them; ``label``: the run."""
    code, query, doc, count, value = problem
    rows = Rows(count, query, doc)
    if code.startswith(("null:", "empty:")):
        column = code.split(":")[1]
        return (null_value if code.startswith("null:") else empty_id)(column, rows)
    if code.startswith("nonfinite:"):
        return not_finite(code.split(":")[1], float("nan") if value is None else value, rows)
    if code == RANK:
        x = float("nan") if value is None else value
        return not_integer("rank", x, rows) if math.isfinite(x) else not_finite("rank", x, rows)
    if code == DUPLICATE:
        return listed_twice(doc, query, f"{count} repeated rows in all")
    if code == UNJUDGED:
        return unjudged_message(label, query, doc, count)
    return overflow_message(query, metric)


def problem_error(problem: Problem, name: str, label: str, metric: Metric, qrels: str = "qrels") -> NdcgError:
    """The error of a problem of system ``name``'s rows (``label``: its run, ``qrels``: the judgments)."""
    message = problem_message(problem, metric, label)
    if problem.code == UNJUDGED:
        return EvaluationError(message)
    if problem.code == OVERFLOW:
        return DataError(qrels, f"system '{name}': {message}")
    return DataError(label, message)


@dataclass
class Seamed:
    """The seam's output for one system and a set of whole queries: the evaluated queries (of the set), the
    per-query rows (None when none of them is judged here), the joined rows and how many of the run's queries
    are outside the set."""

    query_ids: np.ndarray
    rows: QueryRows | None
    prep: PreparedRun | None
    unknown: int


def query_rows(
    metric: Metric,
    judged: Judgments,
    name: str,
    run: Table,
    depth: int,
    alternatives: Sequence[Metric] = (),
    companions: CompanionPlan | None = None,
    groups: np.ndarray | None = None,
    joined: Callable[[], None] | None = None,
) -> Seamed:
    """One system's rows (``run``, read and checked by a reader) joined to the judgments of the evaluated queries
    and scored (:func:`score_queries`; ``joined`` is called between the two). Raises :class:`UnjudgedError` and
    :class:`~ndcg_mlflow.kernel.NonFiniteError` as :func:`score_queries` does."""
    prep, unknown = join(name, run, judged)
    if joined is not None:
        joined()
    rows = score_queries(metric, prep, judged.catalog, depth, alternatives, companions, groups)
    return Seamed(judged.query_ids, rows, prep, unknown)


def raw_query_rows(
    metric: Metric,
    judged: Any,
    run: Any,
    name: str,
    label: str,
    depth: int,
    has_rank: bool,
    alternatives: Sequence[Metric] = (),
    companions: CompanionPlan | None = None,
    groups: Callable[[], np.ndarray | None] | None = None,
    whole: np.ndarray | None = None,
) -> Seamed | Problem:
    """:func:`query_rows` from raw rows: the judgments of a set of whole queries (a pyarrow Table of ``query_id``,
    ``doc_id``, ``grade``: every query of the set is judged, each judgment checked) and a system's rows of those
    queries (a pyarrow Table, unchecked). Their per-query rows (the evaluated queries sorted), or the first
    problem in :data:`CHECK_ORDER` (``whole``: :func:`first_problem`'s); ``groups``: the run rows' duplicate group
    codes, made when the rows pass the checks."""
    import pyarrow.compute as pc

    problem = first_problem(run, has_rank, whole)
    if problem is not None:
        return problem
    q_col = plain(run.column("query_id"))
    jq = plain(judged.column("query_id"))
    query_ids = np.asarray(sorted(pc.unique(jq).to_pylist()), dtype=object)
    if not query_ids.size:
        return Seamed(query_ids, None, None, len(pc.unique(q_col)))
    qrels = arrow_table("qrels", "qrels", jq, judged.column("grade"), None, judged.column("doc_id"))
    rank = run.column("rank") if has_rank else None
    table = arrow_table(label, "run", q_col, run.column("score"), rank, run.column("doc_id"))
    index = judgments(qrels, query_ids, metric)
    try:
        codes = groups() if groups is not None else None
        return query_rows(metric, index, name, table, depth, alternatives, companions, codes)
    except UnjudgedError as exc:
        return Problem(UNJUDGED, exc.query, exc.doc, exc.count)
    except NonFiniteError as exc:
        return Problem(OVERFLOW, str(query_ids[exc.queries[0]]), None, int(exc.queries.size))


def ndcg_under(metric: Metric, prep: PreparedRun, catalog: Catalog) -> np.ndarray:
    """Each query's nDCG under ``metric`` from joined rows kept earlier (sensitivity's recomputation)."""
    return compute(metric, prep, catalog).ndcg


def plain(array: Any) -> Any:
    """An Arrow array of ids (chunked or not, any string or integer type) as one plain string array."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.cast(pa.string())


def arrow_table(label: str, kind: str, query: Any, value: Any, rank: Any, doc: Any) -> Table:
    """Arrow columns of rows that passed the checks as the readers' :class:`~ndcg_mlflow.readers.Table`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(plain(query))
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    ids = Ids(codes, np.asarray(enc.dictionary.to_pylist(), dtype=object))
    docs = Strings(plain(doc))
    numbers = np.asarray(pc.cast(value, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    ranks = (
        None
        if rank is None
        else np.asarray(pc.cast(rank, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    )
    return Table(label, kind, ids, docs, numbers, ranks, "table")
