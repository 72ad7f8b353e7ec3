"""Per bucket, in the executors: a bucket's run rows and evaluated judgments (Arrow tables) -> one result row per
evaluated query (:data:`RESULT_SCHEMA`), computed by the seam (:func:`ndcg_mlflow.queries.raw_query_rows`), or the first
problem of its rows, in the seam's order of checks (:data:`ndcg_mlflow.queries.CHECK_ORDER`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...join import index_in
from ...kernel import QueryResult
from ...queries import OVERFLOW, UNJUDGED, Problem, raw_query_rows
from ...spec import Metric
from ..outcome import display_depth
from . import companion_measures as comps
from .kinds import RowKind
from .partitions import bucket_column
from .sources import arrow_schema, plain, spark_schema

RESULT_SCHEMA = (
    "kind string, query_id string, n_returned long, dcg array<double>, idcg array<double>, "
    "idcg_candidates array<double>, ndcg array<double>, judged_coverage array<double>, status array<tinyint>, "
    "top_doc array<string>, top_pos array<long>, top_grade array<double>, "
    "code string, doc_id string, value double, count long, examples array<string>, "
    "alt_ndcg array<double>, alt_overflow array<int>, duplicate_rate array<double>"
)
"""One row per evaluated query of a bucket (kind ``query``), one per bucket (``meta``: the run's queries and
those outside the evaluated set) and one per problem found (``error``). With sensitivity (``report.sensitivity``)
a query row's ``alt_ndcg`` holds its nDCG under each alternative computed (alternative by alternative, each at
every cutoff) and the meta row's ``alt_overflow`` the alternatives whose numbers overflow a float in the bucket
(:class:`~ndcg_mlflow.kernel.NonFiniteError`); both are null otherwise. With companions, the ``query`` rows'
``duplicate_rate`` and one ``shown`` row per document shown in the bucket (:mod:`.companions`)."""


def bucket_results(
    run_df: Any,
    judged_df: Any,
    n_buckets: int,
    name: str,
    label: str,
    metric: Metric,
    has_rank: bool,
    alternatives: Sequence[Metric] = (),
    companions: comps.CompanionPlan | None = None,
) -> Any:
    """Every evaluated query's numbers (one row per query; with ``alternatives``, its nDCG under each of them
    too), error and meta rows: a DataFrame."""
    from pyspark.sql import functions as F

    def bucketed(df):  # a query's bucket, keyed so that each bucket is a partition of its own (.partitions)
        return df.withColumn("_bucket", bucket_column(F.col("query_id"), n_buckets)).repartition(n_buckets, "_bucket")

    depth = display_depth(metric)

    def per_bucket(run, judged):
        return bucket_rows(run, judged, name, label, metric, depth, has_rank, alternatives, companions)

    return (
        bucketed(run_df)
        .groupBy("_bucket")
        .cogroup(bucketed(judged_df).groupBy("_bucket"))
        .applyInArrow(per_bucket, spark_schema(RESULT_SCHEMA))
    )


def _result_rows(records: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    schema = arrow_schema(RESULT_SCHEMA)
    return pa.Table.from_pylist([{f: r.get(f) for f in schema.names} for r in records], schema=schema)


def error(problem: Problem) -> dict[str, Any]:
    """A problem's ``error`` row."""
    code, query, doc, count, value = problem
    return {"kind": RowKind.ERROR, "code": code, "query_id": query, "doc_id": doc, "count": count, "value": value}


def bucket_rows(
    run: Any,
    judged: Any,
    name: str,
    label: str,
    metric: Metric,
    depth: int,
    has_rank: bool,
    alternatives: Sequence[Metric] = (),
    companions: comps.CompanionPlan | None = None,
) -> Any:
    """One bucket: its run rows and evaluated judgments (pyarrow Tables) -> result rows (:data:`RESULT_SCHEMA`).

    The bucket's evaluated queries are the queries of its judgments (every evaluated query is judged);
    each gets one row, computed by the seam (:func:`ndcg_mlflow.queries.raw_query_rows`: the checks of the rows,
    the join and the kernel, and the companion measures of ``companions``), or the bucket gets the ``error`` row
    of the first problem. Each of ``alternatives`` (sensitivity's other
    metrics) is computed by the same kernel on the same joined rows: its nDCG per query and cutoff goes in
    ``alt_ndcg``; one whose numbers overflow a float is NaN there and listed in the meta row's
    ``alt_overflow`` (the driver then makes it undefined for every query and system, as the local engine
    does)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    run = comps.in_source_order(run)  # with companions: tied rows in the input's order (companions.py)
    split_rows, whole = _split_queries(run)
    groups = (lambda: comps.row_groups(run)) if companions is not None and companions.duplicates else None
    seamed = raw_query_rows(metric, judged, run, name, label, depth, has_rank, alternatives, companions, groups, whole)
    if isinstance(seamed, Problem):
        if seamed.code in (UNJUDGED, OVERFLOW):
            return _result_rows([error(seamed)])
        meta_row = {"kind": RowKind.META, "count": 0, "value": 0.0, "n_returned": run.num_rows}
        return pa.concat_tables([_result_rows([error(seamed), meta_row]), split_rows])
    q_col = plain(run.column("query_id"))
    run_queries = pc.unique(q_col)
    bucket_ids = seamed.query_ids
    unknown = sorted(set(run_queries.to_pylist()) - set(bucket_ids.tolist()))
    meta = {
        "kind": RowKind.META,
        "count": len(unknown),
        "value": float(len(run_queries)),
        "examples": (unknown or sorted(run_queries.to_pylist()))[:3],
        "n_returned": run.num_rows,
    }
    scored = seamed.rows
    if scored is None:
        return pa.concat_tables([_result_rows([meta]), split_rows])
    qr = scored.result
    if "_extra" in run.column_names:  # rows the pre-filter left out still count in the list's length
        extra = np.asarray(run.column("_extra").to_numpy(zero_copy_only=False), dtype=np.int64)
        some = np.flatnonzero(extra)
        if some.size:
            at = index_in(np.asarray(q_col.take(pa.array(some)).to_pylist(), dtype=object), bucket_ids)
            np.add.at(qr.n_returned, at[at >= 0], extra[some][at >= 0])
    alt_ndcg = None
    if scored.alternatives is not None:  # (queries, alternatives x cutoffs)
        alt_ndcg = scored.alternatives.reshape(scored.alternatives.shape[0], -1)
        if scored.overflowed:
            meta["alt_overflow"] = scored.overflowed
    shown = _result_rows([]) if scored.shown is None else _shown_rows(scored.shown.docs, scored.shown.best)
    top = scored.top
    bounds = np.searchsorted(top.query, np.arange(bucket_ids.size + 1))
    return pa.concat_tables(
        [
            _result_rows([meta]),
            _query_rows(bucket_ids, qr, top.doc, top.position, top.grade, bounds, alt_ndcg, scored.duplicate_rate),
            split_rows,
            shown,
        ]
    )


def _shown_rows(docs: Any, best: np.ndarray) -> Any:
    """The ``shown`` rows of a bucket: each document shown (``doc_id``) and its best position (``count``)."""
    import pyarrow as pa

    n = len(docs)
    columns = {
        "kind": pa.array(np.full(n, RowKind.SHOWN, dtype=object), type=pa.string()),
        "doc_id": plain(docs),
        "count": pa.array(best, type=pa.int64()),
    }
    schema = arrow_schema(RESULT_SCHEMA)
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, type=f.type)) for f in schema}, schema=schema)


def _query_rows(
    ids: np.ndarray,
    qr: QueryResult,
    docs: list[str],
    pos: np.ndarray,
    grades: np.ndarray,
    bounds: np.ndarray,
    alt_ndcg: np.ndarray | None = None,
    duplicate_rate: np.ndarray | None = None,
) -> Any:
    """The ``query`` rows of a bucket, built column by column (no Python object per query); ``alt_ndcg``: each
    query's nDCG under the alternatives, (queries, alternatives x cutoffs)."""
    import pyarrow as pa

    n, nc = qr.ndcg.shape
    per_cutoff = pa.array(np.arange(0, n * nc + 1, nc, dtype=np.int32))
    top_at = pa.array(bounds.astype(np.int32))

    def cut(values: np.ndarray, dtype: Any) -> Any:
        return pa.ListArray.from_arrays(per_cutoff, pa.array(np.ascontiguousarray(values).ravel(), type=dtype))

    columns = {
        "kind": pa.array(np.full(n, RowKind.QUERY, dtype=object), type=pa.string()),
        "query_id": pa.array(list(ids), type=pa.string()),
        "n_returned": pa.array(qr.n_returned.astype(np.int64)),
        "dcg": cut(qr.dcg, pa.float64()),
        "idcg": cut(qr.idcg, pa.float64()),
        "idcg_candidates": cut(qr.idcg_candidates, pa.float64()),
        "ndcg": cut(qr.ndcg, pa.float64()),
        "judged_coverage": cut(qr.judged_coverage, pa.float64()),
        "status": cut(qr.status.astype(np.int8), pa.int8()),
        "top_doc": pa.ListArray.from_arrays(top_at, pa.array(docs, type=pa.string())),
        "top_pos": pa.ListArray.from_arrays(top_at, pa.array(pos.astype(np.int64))),
        "top_grade": pa.ListArray.from_arrays(top_at, pa.array(grades.astype(np.float64))),
    }
    if alt_ndcg is not None:
        width = alt_ndcg.shape[1]
        columns["alt_ndcg"] = pa.ListArray.from_arrays(
            pa.array(np.arange(0, n * width + 1, width, dtype=np.int32)),
            pa.array(np.ascontiguousarray(alt_ndcg).ravel(), type=pa.float64()),
        )
    if duplicate_rate is not None:
        columns["duplicate_rate"] = cut(duplicate_rate, pa.float64())
    schema = arrow_schema(RESULT_SCHEMA)
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, type=f.type)) for f in schema}, schema=schema)


def _split_queries(run: Any) -> tuple[Any, Any]:
    """The ``split`` rows of the queries whose rows come from more than one pre-filter chunk, and the mask of
    the rows of the other queries (all of whose rows are here, so their duplicates can be checked here)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = run.num_rows
    if "_chunk" not in run.column_names or n == 0 or run.column("query_id").null_count:  # nulls: refused anyway
        return _result_rows([]), np.ones(n, dtype=bool)
    enc = pc.dictionary_encode(plain(run.column("query_id")))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    q = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    chunk = np.asarray(run.column("_chunk").to_numpy(zero_copy_only=False), dtype=np.int64)
    order = np.lexsort((chunk, q))
    qs, cs = q[order], chunk[order]
    new_pair = np.r_[True, (qs[1:] != qs[:-1]) | (cs[1:] != cs[:-1])]
    chunks_per_query = np.bincount(qs[new_pair], minlength=len(enc.dictionary))
    split = np.flatnonzero(chunks_per_query > 1)
    if not split.size:
        return _result_rows([]), np.ones(n, dtype=bool)
    ids = enc.dictionary.take(pa.array(split))
    rows = _result_rows([{"kind": RowKind.SPLIT, "query_id": x} for x in ids.to_pylist()])
    return rows, chunks_per_query[q] <= 1
