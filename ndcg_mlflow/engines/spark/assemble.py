"""Back on the driver: one system's Spark job (:func:`system_rows`: its run read, pre-filtered and cut into query
buckets), the buckets' rows checked as the local engine checks (:func:`check_buckets`, raising the error it would
raise first, in its words) and assembled into the same :class:`~ndcg_mlflow.result.SystemResult`
(:func:`assemble`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ...errors import EvaluationError
from ...join import index_in
from ...kernel import QueryResult
from ...queries import CHECK_ORDER, DUPLICATE, Problem, TopLists, problem_error
from ...readers.hashing import check_unchanged
from ...result import FileInfo, SystemResult
from ...spec import Metric, Spec
from ..outcome import display_depth, system_result
from . import companion_measures as comps
from .buckets import bucket_results
from .judgments import Judged
from .kinds import RowKind, rows_of
from .prefilter import duplicates, shuffled
from .runs import computable, run_frame

ROWS_PER_BUCKET = 1_000_000
"""Run rows per bucket when the bucket count is chosen from the run's size."""


class SystemJob(NamedTuple):
    """One system's Spark job as :func:`system_rows` makes it, not yet run."""

    out_df: Any  # the buckets' rows (:data:`.buckets.RESULT_SCHEMA`)
    run_df: Any  # the run's rows (Spark's reader, for the duplicate check of the rows the pre-filter left out)
    label: str
    info: FileInfo
    n_buckets: int
    alternatives: list  # which of sensitivity's alternatives the rows hold (:func:`.runs.computable`)
    read_by: str  # how the run was read (:class:`.runs.RunFrame`'s ``reader``)
    duplicates_checked: bool  # its reader refused a document listed twice (:class:`.runs.RunFrame`)


def system_info(job: SystemJob, shuffled: int) -> dict[str, Any]:
    """A system's entry of ``engine_info.systems``: its run's rows, the rows its buckets received (``shuffled``,
    :func:`rows_seen`), its bucket count and how its run was read."""
    return {"rows": job.info.rows, "rows_shuffled": shuffled, "buckets": job.n_buckets, "read_by": job.read_by}


def system_rows(
    spark: Any,
    spec: Spec,
    judged: Judged,
    name: str,
    source: Any,
    buckets: int | None,
    progress,
    alternatives: Sequence[tuple[str, str, Metric]] = (),
) -> SystemJob:
    """One system's bucket rows (:data:`.buckets.RESULT_SCHEMA`) as a DataFrame, not yet computed; its run
    DataFrame, label, file information, bucket count, which of ``alternatives`` (sensitivity's, without the
    declared metric) the rows hold (:func:`.runs.computable`) and how the run was read."""
    if progress:
        progress(f"reading system '{name}' on Spark")
    shipped = judged.shipped
    run_df, label, info, has_rank, reader, tasks, checked = run_frame(
        spark, spec, name, source, judged.shared, shipped is not None
    )
    n_buckets = buckets or max(1, math.ceil(info.rows / ROWS_PER_BUCKET))
    if progress:
        progress(f"computing nDCG of '{name}' on Spark ({n_buckets} query buckets)")
    alts = computable(alternatives, has_rank)
    metrics = [m for _, _, m in alts]
    if tasks is not None and judged.depth is not None:  # a Parquet or text run read and pre-filtered in Spark tasks
        rows = tasks.prefiltered(spark, shipped, spec.metric, judged.depth, has_rank, metrics)
    else:
        rows = shuffled(run_df, judged.judged_df, spec.metric, judged.depth, has_rank, metrics)
    rows = comps.with_groups(rows, judged.companions)
    plan = judged.companions.plan if judged.companions is not None else None
    out = bucket_results(rows, judged.judged_df, n_buckets, name, label, spec.metric, has_rank, metrics, plan)
    return SystemJob(out, run_df, label, info, n_buckets, alts, reader, checked)


def unchecked_duplicates(
    spark: Any, judged: Judged, job: SystemJob, rows: Any
) -> tuple[list[dict[str, Any]], bool] | None:
    """With the pre-filter, the duplicate check of the rows the buckets did not see (:func:`.prefilter.duplicates`),
    unless a bucket found a problem that the local engine reports before duplicates, or the run was read by the
    local reader (which refused a document listed twice, naming its lines, before any job read the rows); else
    None."""

    if job.duplicates_checked:
        return None
    codes = rows_of(rows, RowKind.ERROR).column("code").to_pylist()
    if judged.depth is None or any(CHECK_ORDER.index(c) < CHECK_ORDER.index(DUPLICATE) for c in codes):
        return None
    return duplicates(spark, job.run_df, rows)


def rows_seen(rows: Any) -> int:
    """The run rows the buckets received (after the pre-filter, when it applies)."""
    import pyarrow.compute as pc

    meta = rows_of(rows, RowKind.META)
    return int(pc.sum(meta.column("n_returned")).as_py() or 0)


def check_buckets(
    name: str, label: str, metric: Metric, table: Any, duplicates: tuple[list[dict[str, Any]], bool] | None = None
) -> list[dict[str, Any]]:
    """Raise the error the local engine would raise first, from the buckets' ``error`` rows (``duplicates``: the
    duplicate check of the rows the buckets did not check, :func:`.prefilter.duplicates`); the ``meta`` rows."""
    errors = rows_of(table, RowKind.ERROR).to_pylist()
    if duplicates is not None:
        found, every = duplicates
        errors = [e for e in errors if not every or e["code"] != DUPLICATE] + found
    if errors:
        errors.sort(key=lambda e: (CHECK_ORDER.index(e["code"]), e["query_id"] or "", e["doc_id"] or ""))
        e = errors[0]
        count = sum(x["count"] for x in errors if x["code"] == e["code"])
        raise problem_error(Problem(e["code"], e["query_id"], e["doc_id"], count, e["value"]), name, label, metric)
    return rows_of(table, RowKind.META).to_pylist()


def assemble(
    name: str,
    label: str,
    metric: Metric,
    table: Any,
    query_ids: np.ndarray,
    weights: np.ndarray,
    notes: list[str],
    duplicates: tuple[list[dict[str, Any]], bool] | None = None,
    alternatives: Sequence[tuple[str, str]] = (),
) -> tuple[SystemResult, tuple[dict[tuple[str, str], np.ndarray], set[tuple[str, str]]]]:
    """One system's :class:`SystemResult` from the buckets' rows, checked as the local engine checks;
    ``duplicates``: the duplicate check over every row, when the buckets saw only the pre-filtered rows. With
    ``alternatives`` (the (rule, label) of each alternative the buckets computed, in their order), also each
    one's per-query nDCG in the evaluated-query order, and those that overflowed a float in some bucket."""
    import pyarrow.compute as pc

    meta = check_buckets(name, label, metric, table, duplicates)
    rows = rows_of(table, RowKind.QUERY)
    nq, nc = len(query_ids), len(metric.cutoffs)
    got = rows.column("query_id").to_pylist()
    at = index_in(np.asarray(got, dtype=object), query_ids)
    if len(got) != nq or (at < 0).any() or np.unique(at).size != nq:
        raise EvaluationError(
            f"internal error: the Spark buckets gave {len(got)} query rows for {nq} evaluated "
            f"queries of system '{name}'."
        )

    def flat(col: str, dtype: Any) -> np.ndarray:
        return np.asarray(pc.list_flatten(rows.column(col)).to_numpy(zero_copy_only=False), dtype=dtype)

    def matrix(col: str, dtype: Any) -> np.ndarray:
        out = np.empty((nq, nc), dtype=dtype)
        out[at] = flat(col, dtype).reshape(len(got), nc)
        return out

    n_returned = np.empty(nq, dtype=np.int64)
    n_returned[at] = rows.column("n_returned").to_numpy(zero_copy_only=False)
    qr = QueryResult(
        dcg=matrix("dcg", np.float64),
        idcg=matrix("idcg", np.float64),
        idcg_candidates=matrix("idcg_candidates", np.float64),
        ndcg=matrix("ndcg", np.float64),
        judged_coverage=matrix("judged_coverage", np.float64),
        status=matrix("status", np.int8),
        n_returned=n_returned,
    )
    run_queries = int(sum(m["value"] for m in meta))
    unknown = int(sum(m["count"] for m in meta))
    examples = sorted(x for m in meta for x in (m["examples"] or []))[:3]
    lengths = np.asarray(pc.list_value_length(rows.column("top_pos")).to_numpy(zero_copy_only=False), dtype=np.int64)
    q_all = np.repeat(at, lengths)
    pos_all = flat("top_pos", np.int64)
    order = np.lexsort((pos_all, q_all))
    docs = pc.list_flatten(rows.column("top_doc")).take(order).to_pylist()
    top = TopLists(display_depth(metric), q_all[order], pos_all[order], docs, flat("top_grade", np.float64)[order])
    by_alt: dict[tuple[str, str], np.ndarray] = {}
    overflowed: set[tuple[str, str]] = set()
    if alternatives:
        na = len(alternatives)
        values = np.empty((nq, na, nc), dtype=np.float64)
        values[at] = flat("alt_ndcg", np.float64).reshape(len(got), na, nc)
        by_alt = {key: values[:, i, :] for i, key in enumerate(alternatives)}  # views: no copy
        overflowed = {alternatives[i] for m in meta for i in (m["alt_overflow"] or [])}
    result = system_result(name, label, metric, qr, query_ids, weights, notes, run_queries, unknown, examples, top)
    return result, (by_alt, overflowed)


def files_unchanged(files: list[FileInfo]) -> None:
    """Spark reads a file when a job needs its rows, as often as the jobs do: once they are done, each file must
    still be the one its sha256 was taken of (a file replaced meanwhile is refused, naming it)."""
    for f in files:
        if f.path:
            check_unchanged(f.path, f.sha256)
