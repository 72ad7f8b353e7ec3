"""The top-K pre-filter, before the shuffle: of a run's rows, only those that can decide some query's numbers
at every cutoff go to the buckets (:func:`prefilter_rows`), filtered where Spark reads them. The rows it leaves
out still count in each query's list length (``_extra``), and a document listed twice among them is still
found (:func:`duplicates`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ...errors import SpecError
from ...join import map_gains
from ...kernel import NonFiniteError
from ...queries import DUPLICATE, Problem, first_problem
from ...rules import condenses, stops
from ...spec import Metric
from ..outcome import display_depth
from .buckets import error
from .kinds import RowKind, rows_of
from .sources import arrow_schema, plain, spark_schema

PREFILTER_MAX_JUDGMENTS = 5_000_000
"""The top-K pre-filter joins each run row to its grade before the shuffle by a broadcast join of the evaluated
judgments; above this many evaluated judgments it is not applied."""

PREFILTER_CHUNK_ROWS = 1_000_000
"""Run rows filtered together before the shuffle (the Arrow batches of a partition, concatenated)."""


RUN_SCHEMA = "query_id string, doc_id string, score double, rank double, _extra long, _chunk long"
"""A run's rows as they enter the shuffle; ``_extra`` counts rows of the same query that the pre-filter left
out (on one kept row of the query per chunk; 0 elsewhere); ``_chunk`` names the chunk the row was filtered in
(a random 63-bit number; 0 without the pre-filter)."""

ORDERED_RUN_SCHEMA = RUN_SCHEMA + ", _order long"
""":data:`RUN_SCHEMA` with the rows' order in the input (:func:`.runs.in_file_order`)."""

SPLIT_CHECK_MAX = 100_000
"""Queries whose rows the pre-filter saw in more than one chunk, checked for duplicates by their rows (beyond
this many, every row of the run is checked by hash)."""


def prefilter_plan(metric: Metric, n_judgments: int, wanted: bool | None = None) -> tuple[int | None, str]:
    """The depth of the top-K pre-filter (``None``: not applied) and why.

    It applies when every cutoff is finite (``all`` reads whole lists) and the evaluated judgments are few
    enough to join to the run rows before the shuffle (:data:`PREFILTER_MAX_JUDGMENTS`). The depth L is the
    largest cutoff, or the documents shown per query when more
    (:func:`~ndcg_mlflow.engines.outcome.display_depth`).
    """
    finite = [k for k in metric.cutoffs if k is not None]
    why = None
    if wanted is False:
        why = "not asked for (prefilter=False)"
    elif len(finite) < len(metric.cutoffs):
        why = "the cutoff 'all' needs every returned row"
    elif n_judgments > PREFILTER_MAX_JUDGMENTS:
        why = (
            f"{n_judgments:,} evaluated judgments, more than the {PREFILTER_MAX_JUDGMENTS:,} joined to the run "
            f"rows before the shuffle"
        )
    if why is not None:
        if wanted:
            raise SpecError("prefilter", f"the top-K pre-filter cannot apply: {why}.")
        return None, why
    depth = min(max(finite + [display_depth(metric)]), 1 << 62)
    return depth, f"every cutoff is finite: each query's rows that can reach its top {depth} are shuffled"


def shuffled(
    run_df: Any, judged_df: Any, metric: Metric, depth: int | None, has_rank: bool, alternatives: Sequence[Metric] = ()
) -> Any:
    """A run's rows as they enter the shuffle (:data:`RUN_SCHEMA`): those that can decide some query's top
    ``depth`` (:func:`prefilter_rows`), or every row when the pre-filter does not apply (``depth`` None)."""
    if depth is None:
        from pyspark.sql import functions as F

        zero = F.lit(0).cast("long")
        return run_df.withColumn("_extra", zero).withColumn("_chunk", zero)
    return _filtered(run_df, judged_df, metric, depth, has_rank, alternatives)


def _filtered(
    run_df: Any, judged_df: Any, metric: Metric, depth: int, has_rank: bool, alternatives: Sequence[Metric] = ()
) -> Any:
    """The run rows that can decide some query's top ``depth`` under ``metric`` or any of ``alternatives``
    (:func:`prefilter_rows`), filtered where they are read: each row gets its grade by a broadcast join of the
    evaluated judgments (no shuffle of the run)."""
    from pyspark.sql import functions as F

    ordered = "_order" in run_df.columns
    graded = run_df.join(F.broadcast(judged_df), on=["query_id", "doc_id"], how="left")
    graded = graded.select("query_id", "doc_id", "score", "rank", "grade", *(["_order"] if ordered else []))
    chunk_rows = PREFILTER_CHUNK_ROWS

    def chunks(batches):
        import os

        import pyarrow as pa

        def done(buffered):
            chunk = int.from_bytes(os.urandom(8), "little") >> 1
            return prefilter_rows(pa.Table.from_batches(buffered), metric, depth, has_rank, chunk, alternatives)

        for table in in_chunks(batches, chunk_rows, done):
            yield from table.to_batches()

    return graded.mapInArrow(chunks, spark_schema(ORDERED_RUN_SCHEMA if ordered else RUN_SCHEMA))


def in_chunks(parts: Iterable[Any], rows: int, done: Callable[[list[Any]], Any]) -> Iterator[Any]:
    """``done`` of the consecutive ``parts`` (Arrow batches or tables, in order) gathered into chunks of at least
    ``rows`` rows (the last one: what remains): the pre-filter's chunks of a task's rows."""
    buffered: list[Any] = []
    n = 0
    for part in parts:
        buffered.append(part)
        n += part.num_rows
        if n >= rows:
            yield done(buffered)
            buffered, n = [], 0
    if buffered:
        yield done(buffered)


def _within(
    query: np.ndarray,
    value: np.ndarray,
    mask: np.ndarray,
    depth: int,
    distinct: bool = False,
    by_value: np.ndarray | None = None,
) -> np.ndarray:
    """Rows of ``mask`` with fewer than ``depth`` rows of ``mask`` of the same query holding a strictly larger
    ``value`` (every row tied with the depth-th value is kept); with ``distinct``, the first ``depth`` rows of
    each query by ``value`` (ties in any order). ``by_value``: every row's place sorted by (query, -value), when
    the caller sorted them once (the rows of ``mask`` in that order are sorted so too)."""
    keep = np.zeros(query.size, dtype=bool)
    if by_value is None:
        at = np.flatnonzero(mask)
        order = at[np.lexsort((-value[at], query[at]))]
    else:
        order = by_value[mask[by_value]]
    if not order.size:
        return keep
    q, v = query[order], value[order]
    new_query = np.r_[True, q[1:] != q[:-1]]
    pos = np.arange(q.size) - np.maximum.accumulate(np.where(new_query, np.arange(q.size), 0))
    if not distinct:  # a row's count of larger values is the position of the first row of its tie
        new_tie = new_query | np.r_[True, v[1:] != v[:-1]]
        pos = pos[np.maximum.accumulate(np.where(new_tie, np.arange(q.size), 0))]
    keep[order[pos < depth]] = True
    return keep


def by_query_then_score(query: np.ndarray, score: np.ndarray) -> np.ndarray:
    """``np.lexsort((-score, query))``: the rows' places sorted by query code, then by score descending, tied
    rows in their order. Rows already so (a run stored query by query in rank order, its query codes given in
    order of appearance) are their own order, found in one pass instead of a sort."""
    if query.size < 2:
        return np.arange(query.size)
    same = query[1:] == query[:-1]
    if bool(np.all((query[1:] > query[:-1]) | (same & (score[1:] <= score[:-1])))):
        return np.arange(query.size)
    return np.lexsort((-score, query))


def prefilter_rows(
    rows: Any, metric: Metric, depth: int, has_rank: bool, chunk: int = 0, alternatives: Sequence[Metric] = ()
) -> Any:
    """A chunk of run rows (query_id, doc_id, score, rank, grade: null when unjudged) -> the rows that can decide
    their query's numbers at every cutoff up to ``depth`` (:data:`RUN_SCHEMA`), whatever the other chunks hold.

    Every rule decides a query's numbers from its top ``depth`` rows, so a row is kept when, in its query
    within this chunk (and so in the whole, which has at least as many rows above it):

    * fewer than ``depth`` rows score strictly higher (the top ``depth`` under every tie rule, with the whole
      tied group at the cut, which ``average`` spreads; judged coverage is over these rows);
    * under ``unjudged: condense``, it is judged and fewer than ``depth`` judged rows score higher;
    * its gain is not 0 and fewer than ``depth`` rows have a larger gain (the ideal of the returned documents,
      ``idcg_candidates``); among the rows of gain 0 (judged or not; judged only under ``condense``) the first
      ``depth`` by score are kept, as the ideal list only counts them;
    * under ``unjudged: error``, it is unjudged (the error counts them all).

    The rows left out are counted on a kept row of their query (``_extra``), so that ``n_returned`` is the
    whole list's length. A chunk with a row the checks refuse (null or empty ids, a score that is not finite,
    a rank that is not an integer, a document twice) is passed whole, so that the checks after the shuffle
    find every such row, as without the filter. Every row carries ``chunk``: a query whose rows all come from
    one chunk had all its rows checked for duplicates here; the others are checked in Spark
    (:func:`duplicates`).

    ``alternatives``: other metrics whose numbers are computed from the same rows (sensitivity's alternatives);
    a row is kept when any of them, or ``metric``, needs it by the rules above (the tie rules, the ideals and
    the rules of excluded queries need no other rows; the gain and the unjudged rule pick them). Keeping more
    rows than one metric needs changes none of its numbers, as the rows kept by other chunks do not.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows.num_rows
    passed = rows.select(["query_id", "doc_id", "score", "rank"])
    ordered = "_order" in rows.column_names  # the rows' order in the input, passed on
    order = [rows.column("_order").cast(pa.int64())] if ordered else []
    if n == 0 or first_problem(rows, has_rank) is not None:
        return pa.table(
            [
                *[plain(c) if i < 2 else c.cast(pa.float64()) for i, c in enumerate(passed.columns)],
                pa.array(np.zeros(n, dtype=np.int64)),
                pa.array(np.full(n, chunk, dtype=np.int64)),
                *order,
            ],
            schema=arrow_schema(ORDERED_RUN_SCHEMA if ordered else RUN_SCHEMA),
        )
    enc = pc.dictionary_encode(plain(rows.column("query_id")))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    query = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    score = np.asarray(pc.cast(rows.column("score"), pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    grade = rows.column("grade")
    judged = np.asarray(grade.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    grades = (
        np.asarray(pc.cast(grade, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        if judged.any()
        else np.zeros(n, dtype=np.float64)
    )
    by_score = by_query_then_score(query, score)  # sorted once, for every cut by score below
    keep = _within(query, score, np.ones(n, dtype=bool), depth, by_value=by_score)
    seen: list[tuple[Any, str]] = []
    for i, m in enumerate([metric, *alternatives]):
        if (m.gain, m.unjudged) in seen:  # the rows kept depend on these two rules only
            continue
        seen.append((m.gain, m.unjudged))
        gain = np.zeros(n, dtype=np.float64)
        if judged.any():
            try:
                gain[judged] = map_gains(m.gain, grades[judged])
            except NonFiniteError:
                if i == 0:
                    raise
                continue  # an alternative whose gains overflow: undefined everywhere, whatever the rows
        condense = condenses(m.unjudged)
        zero = gain == 0
        keep |= _within(query, gain, ~zero & judged, depth)
        keep |= _within(query, score, zero & judged if condense else zero, depth, distinct=True, by_value=by_score)
        if condense:
            keep |= _within(query, score, judged, depth, by_value=by_score)
    if stops(metric.unjudged):
        keep |= ~judged
    dropped = np.bincount(query[~keep], minlength=len(enc.dictionary))
    extra = np.zeros(n, dtype=np.int64)
    kept = np.flatnonzero(keep)
    first = np.full(len(enc.dictionary), -1, dtype=np.int64)
    first[query[kept[::-1]]] = kept[::-1]  # the first kept row of each query (every query keeps one)
    has = dropped > 0
    extra[first[has]] = dropped[has]
    mask = pa.array(keep)
    return pa.table(
        [
            plain(passed.column("query_id").filter(mask)),
            plain(passed.column("doc_id").filter(mask)),
            pc.cast(passed.column("score").filter(mask), pa.float64()),
            pc.cast(passed.column("rank").filter(mask), pa.float64()),
            pa.array(extra[kept]),
            pa.array(np.full(kept.size, chunk, dtype=np.int64)),
            *[c.filter(mask) for c in order],
        ],
        schema=arrow_schema(ORDERED_RUN_SCHEMA if ordered else RUN_SCHEMA),
    )


def duplicates(spark: Any, run_df: Any, rows: Any) -> tuple[list[dict[str, Any]], bool]:
    """Documents listed twice for a query among the rows the buckets did not check (the pre-filter leaves
    rows out): the queries whose rows were filtered in more than one chunk (the buckets' ``split`` rows; the
    rest were checked whole, in their chunk and bucket), checked in Spark on their rows; beyond
    :data:`SPLIT_CHECK_MAX` such queries, every row, grouped by a 64-bit hash of (query, document) with the few
    hashes seen twice checked on the rows themselves. The error of the smallest such (query, document) with
    the count of its repeated rows, and whether it replaces the buckets' own duplicate errors (every row)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    split = rows_of(rows, RowKind.SPLIT).column("query_id")
    if len(split) == 0:
        return [], False
    every = len(split) > SPLIT_CHECK_MAX
    if every:
        keyed = run_df.select("query_id", "doc_id", F.xxhash64("query_id", "doc_id").alias("_h"))
        twice = keyed.groupBy("_h").count().where(F.col("count") > 1).select("_h")
        pairs = keyed.join(F.broadcast(twice), on="_h")
    else:
        ids = spark.createDataFrame(pa.table({"query_id": plain(split)}))
        pairs = run_df.select("query_id", "doc_id").join(F.broadcast(ids), on="query_id")
    pairs = pairs.groupBy("query_id", "doc_id").count().where(F.col("count") > 1)
    found = pairs.agg(
        F.min(F.struct("query_id", "doc_id")).alias("first"), F.sum(F.col("count") - 1).alias("repeated")
    ).collect()[0]
    if found["first"] is None:
        return [], every
    first = found["first"]
    return [error(Problem(DUPLICATE, first["query_id"], first["doc_id"], int(found["repeated"])))], every
