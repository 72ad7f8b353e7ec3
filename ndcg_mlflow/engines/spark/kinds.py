"""The kinds of the rows a bucket returns (:data:`.buckets.RESULT_SCHEMA`'s ``kind`` column), declared once, with
the predicates that select them on the driver (Arrow) and in Spark."""

from __future__ import annotations

from typing import Any


class RowKind:
    """The kinds of a bucket's rows (its ``kind`` column), declared once with the predicates that select them:
    :func:`rows_of` (the rows on the driver, Arrow) and :func:`where_kind` (the rows in Spark)."""

    QUERY = "query"  # an evaluated query's numbers
    META = "meta"  # one a bucket: the run's queries in it and those outside the evaluated set
    ERROR = "error"  # the first problem of the bucket's rows (:class:`~ndcg_mlflow.queries.Problem`)
    SHOWN = "shown"  # a document shown, with its best position (companions)
    SPLIT = "split"  # a query whose rows came from more than one pre-filter chunk


def rows_of(table: Any, *kinds: str) -> Any:
    """The rows of ``table`` (Arrow, :data:`RESULT_SCHEMA`) of the given kinds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return table.filter(pc.is_in(table.column("kind"), value_set=pa.array(kinds, type=pa.string())))


def where_kind(df: Any, *kinds: str, but: bool = False) -> Any:
    """The rows of ``df`` (a Spark DataFrame, :data:`RESULT_SCHEMA`) of the given kinds (``but``: of the others)."""
    from pyspark.sql import functions as F

    of = F.col("kind").isin(*kinds)
    return df.where(~of if but else of)
