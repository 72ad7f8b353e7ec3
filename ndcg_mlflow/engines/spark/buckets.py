"""Per bucket, in the executors: a bucket's run rows and evaluated judgments (Arrow tables) -> one result row per
evaluated query (:data:`RESULT_SCHEMA`), computed by the local engine's join and kernel (:mod:`ndcg_mlflow.queries`),
or the first problem of its rows, in the local engine's order of checks (:func:`run_errors`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...join import index_in, join, judgments
from ...kernel import NonFiniteError, QueryResult
from ...queries import UnjudgedError, score_queries
from ...readers import Ids, Strings, Table
from ...spec import Metric
from ..outcome import display_depth
from . import companion_measures as comps
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

# the errors a bucket reports, in the order the local engine checks them
ERROR_ORDER = (
    "null:query_id",
    "null:doc_id",
    "null:rank",
    "null:score",
    "empty:query_id",
    "empty:doc_id",
    "nonfinite:score",
    "rank",
    "duplicate",
    "unjudged",
    "overflow",
)


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


def error(code: str, query: str | None, doc: str | None, count: int, value: float | None = None) -> dict[str, Any]:
    return {"kind": "error", "code": code, "query_id": query, "doc_id": doc, "count": count, "value": value}


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
    each gets one row, computed by the local join and kernel (and the companion measures of ``companions``,
    :func:`ndcg_mlflow.companions.measure_queries`). Each of ``alternatives`` (sensitivity's other
    metrics) is computed by the same kernel on the same joined rows: its nDCG per query and cutoff goes in
    ``alt_ndcg``; one whose numbers overflow a float is NaN there and listed in the meta row's
    ``alt_overflow`` (the driver then makes it undefined for every query and system, as the local engine
    does)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    run = comps.in_source_order(run)  # with companions: tied rows in the input's order (companions.py)
    split_rows, whole = _split_queries(run)
    errors = run_errors(run, has_rank, whole)
    if errors:
        return pa.concat_tables(
            [
                _result_rows(errors + [{"kind": "meta", "count": 0, "value": 0.0, "n_returned": run.num_rows}]),
                split_rows,
            ]
        )
    q_col = plain(run.column("query_id"))
    run_queries = pc.unique(q_col)
    jq = plain(judged.column("query_id"))
    bucket_ids = np.asarray(sorted(pc.unique(jq).to_pylist()), dtype=object)
    unknown = sorted(set(run_queries.to_pylist()) - set(bucket_ids.tolist()))
    meta = {
        "kind": "meta",
        "count": len(unknown),
        "value": float(len(run_queries)),
        "examples": (unknown or sorted(run_queries.to_pylist()))[:3],
        "n_returned": run.num_rows,
    }
    if not bucket_ids.size:
        return pa.concat_tables([_result_rows([meta]), split_rows])
    qrels = _local_table("qrels", "qrels", jq, judged.column("grade"), None, judged.column("doc_id"))
    rank = run.column("rank") if has_rank else None
    run_table = _local_table(label, "run", q_col, run.column("score"), rank, run.column("doc_id"))
    judged_index = judgments(qrels, bucket_ids, metric)
    prep, _ = join(name, run_table, judged_index)
    try:
        groups = comps.row_groups(run) if companions is not None and companions.duplicates else None
        scored = score_queries(metric, prep, judged_index.catalog, depth, alternatives, companions, groups)
    except UnjudgedError as exc:
        return _result_rows([error("unjudged", exc.query, exc.doc, exc.count)])
    except NonFiniteError as exc:
        return _result_rows([error("overflow", str(bucket_ids[exc.queries[0]]), None, int(exc.queries.size))])
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
        "kind": pa.array(np.full(n, "shown", dtype=object), type=pa.string()),
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
        "kind": pa.array(np.full(n, "query", dtype=object), type=pa.string()),
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


def _local_table(label: str, kind: str, query: Any, value: Any, rank: Any, doc: Any) -> Table:
    """A bucket's rows as the readers' :class:`~ndcg_mlflow.readers.Table` (already checked)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(query)  # (an Array: plain() combined its chunks)
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
    rows = _result_rows([{"kind": "split", "query_id": x} for x in ids.to_pylist()])
    return rows, chunks_per_query[q] <= 1


def run_errors(run: Any, has_rank: bool, checked_twice: Any = None) -> list[dict[str, Any]]:
    """The first problem of a bucket's run rows, by the local engine's order of checks (none: empty list);
    documents twice are looked for among the rows of ``checked_twice`` (a mask; default every row)."""
    import pyarrow.compute as pc

    q = plain(run.column("query_id"))
    d = plain(run.column("doc_id"))

    row = 0

    def first(mask: Any) -> tuple[str | None, str | None, int]:
        nonlocal row
        m = np.asarray(mask, dtype=bool)
        at = np.flatnonzero(m)
        if not at.size:
            return None, None, 0
        # the smallest (query, doc) among the offending rows, so that the error is the same whatever the buckets
        pairs = list(zip(q.take(at).to_pylist(), d.take(at).to_pylist()))
        i = min(
            range(at.size),
            key=lambda k: (pairs[k][0] is not None, pairs[k][0] or "", pairs[k][1] is not None, pairs[k][1] or ""),
        )
        row = int(at[i])  # (the value a message shows is this row's)
        return pairs[i][0], pairs[i][1], int(at.size)

    def null(col):
        return col.is_null().to_numpy(zero_copy_only=False)

    checked = [("query_id", q), ("doc_id", d)] + ([("rank", run.column("rank"))] if has_rank else [])
    for c, col in checked + [("score", run.column("score"))]:
        qq, dd, n = first(null(col))
        if n:
            return [error(f"null:{c}", qq, dd, n)]
    for c, col in (("query_id", q), ("doc_id", d)):
        qq, dd, n = first(pc.fill_null(pc.equal(pc.utf8_length(col), 0), False).to_numpy(zero_copy_only=False))
        if n:
            return [error(f"empty:{c}", qq, dd, n)]
    score = run.column("score").to_numpy(zero_copy_only=False).astype(np.float64)
    bad = ~np.isfinite(score)
    qq, dd, n = first(bad)
    if n:
        return [error("nonfinite:score", qq, dd, n, float(score[row]))]
    if has_rank:
        rank = np.asarray(run.column("rank").to_numpy(zero_copy_only=False), dtype=np.float64)
        qq, dd, n = first(~np.isfinite(rank) | (rank != np.round(rank)))
        if n:
            return [error("rank", qq, dd, n, float(rank[row]))]
    import pyarrow as pa

    from ...readers import duplicate_pairs

    rows = np.arange(len(q)) if checked_twice is None else np.flatnonzero(checked_twice)
    if rows.size:
        table = _local_table(
            "run", "run", q.take(pa.array(rows)), run.column("score").take(pa.array(rows)), None, d.take(pa.array(rows))
        )
        _, later = duplicate_pairs(table)
        if later.size:
            qq, dd, n = first(np.isin(np.arange(len(q)), rows[later]))
            return [error("duplicate", qq, dd, n)]
    return []
