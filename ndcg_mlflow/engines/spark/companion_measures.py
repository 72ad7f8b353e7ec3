"""The companion measures (:mod:`ndcg_mlflow.companions`) on the Spark engine, with the local engine's numbers.

* The duplicate-group file and the catalog file are read on the driver by the local readers
  (:func:`ndcg_mlflow.engines.inputs.read_companions`: the same checks, and the files' digests in ``files``).
* Duplicate rate: the mapping (doc id -> group code) goes to Spark as a DataFrame and is joined to the run rows
  after the pre-filter, before the shuffle (a broadcast join on doc_id: the run is not shuffled for it;
  documents the mapping does not list get no group, as locally). In each bucket the local
  :func:`~ndcg_mlflow.companions.duplicate_rate` runs on the ranking the kernel made, and each query's rates
  (one per cutoff) come back in the ``duplicate_rate`` column of its row; the driver takes the weighted means
  as the local engine does.
* Catalog coverage: each bucket returns the distinct documents its queries show in the deepest top K (every
  ranked row with the cutoff ``all``), each with the best position it is shown at (``shown`` rows: ``doc_id``,
  position in ``count``). Spark keeps the best position of each document over the buckets and counts, per
  cutoff, the documents shown above it (joined to the catalog file's documents, when a file is declared); only
  these counts come to the driver, which divides them by
  :func:`~ndcg_mlflow.companions.coverage_of_counts` (the local engine's division and its refusal of a declared
  size below the documents shown).

The shown top K is the one the metric ranked (tie rules included); the top-K pre-filter keeps every row that
can enter it (it keeps each query's top ``L`` rows, L at least the largest cutoff, in every tie order).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...companions import CompanionPlan, coverage_of_counts, fill_means
from ...kernel import depth_of
from .kinds import RowKind, rows_of, where_kind


@dataclass
class CompanionFrames:
    """The driver's side of a plan: the companion files as Spark DataFrames, made once per evaluation."""

    plan: CompanionPlan
    companions: dict[str, Any]
    groups: Any = None  # doc_id, _group
    catalog: Any = None  # doc_id (distinct)


def frames(spark: Any, spec: Any, companions: dict[str, Any] | None) -> CompanionFrames | None:
    import pyarrow as pa

    plan = CompanionPlan.of(spec, companions)
    if plan is None or companions is None:
        return None
    out = CompanionFrames(plan, companions)
    if plan.duplicates:
        dup = companions["duplicates"]
        out.groups = spark.createDataFrame(
            pa.table({"doc_id": dup.docs, "_group": pa.array(dup.group, type=pa.int64())})
        )
    if "catalog" in companions:
        out.catalog = spark.createDataFrame(pa.table({"doc_id": companions["catalog"]}))
    return out


def with_groups(rows: Any, comp: CompanionFrames | None) -> Any:
    """The run rows as they enter the shuffle (after the pre-filter), with what the companion measures need:

    * ``_order``: the rows' order where they are read (``monotonically_increasing_id``: the partition, then the
      row within it; the pre-filter keeps the rows' order within a partition). The buckets put their rows back in
      this order before ranking (:func:`in_source_order`), so that tied rows keep the order they have in the
      input, as the local engine's stable sort keeps the file's, whatever order the shuffle delivers them in:
      under ``ties: average`` it decides which documents of a tied group a cutoff shows.
    * ``_group``: each document's duplicate group (null when the mapping does not list it), by a broadcast join
      (no shuffle of the run; the rows keep their partitions and their order).
    """
    if comp is None:
        return rows
    from pyspark.sql import functions as F

    if "_order" not in rows.columns:  # (a file's or a table's rows carry their order: runs.in_file_order)
        rows = rows.withColumn("_order", F.monotonically_increasing_id())
    if not comp.plan.duplicates:
        return rows
    return rows.join(F.broadcast(comp.groups), on="doc_id", how="left").select(*rows.columns, "_group")


def in_source_order(run: Any) -> Any:
    """A bucket's run rows (a pyarrow Table) in their ``_order`` (:func:`with_groups`); as given without it."""
    import pyarrow as pa

    if "_order" not in run.column_names or run.num_rows < 2:
        return run
    order = np.asarray(run.column("_order").to_numpy(zero_copy_only=False), dtype=np.int64)
    if (order[1:] >= order[:-1]).all():
        return run
    return run.take(pa.array(np.argsort(order, kind="stable"), type=pa.int64()))


def row_groups(run: Any) -> np.ndarray:
    """A bucket's run rows' duplicate group codes (the ``_group`` column of :func:`with_groups`), -1 where the
    mapping does not list the document, as :func:`~ndcg_mlflow.companions.group_codes` gives locally."""
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(run.column("_group"), -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def shown_counts(comp: CompanionFrames, out_df: Any) -> list[int]:
    """Per cutoff, the documents a system shows in its top K across the evaluated queries (of the catalog file,
    when one is declared), from the buckets' ``shown`` rows of ``out_df`` (a DataFrame, persisted by the caller:
    this is one more Spark job over it)."""
    from pyspark.sql import functions as F

    plan = comp.plan
    shown = where_kind(out_df, RowKind.SHOWN).groupBy("doc_id").agg(F.min("count").alias("_pos"))
    if comp.catalog is not None:
        shown = shown.join(comp.catalog, on="doc_id", how="inner")
    counts = shown.agg(
        *[
            (F.count(F.lit(1)) if k is None else F.count(F.when(F.col("_pos") < depth_of(k), 1))).alias(f"c{j}")
            for j, k in enumerate(plan.cutoffs)
        ]
    ).collect()[0]
    return [int(counts[f"c{j}"]) for j in range(len(plan.cutoffs))]


def coverage(comp: CompanionFrames, counts: list[int], name: str, spec: Any) -> list[float]:
    """A system's catalog coverage at each cutoff from :func:`shown_counts`, divided as locally (a declared size
    below the documents shown is the local engine's :class:`~ndcg_mlflow.errors.SpecError`)."""
    return coverage_of_counts(counts, comp.plan.cutoffs, comp.companions, name, str(spec.source or "") or None)


def fill(
    comp: CompanionFrames,
    sr: Any,
    rows: Any,
    query_ids: np.ndarray,
    weights: np.ndarray,
    metric: Any,
    cover: list[float] | None,
) -> None:
    """The companion fields of a system's result, as the local engine fills them
    (:func:`ndcg_mlflow.engines.local.pipeline._companion_measures`): the per-query duplicate rates (from the buckets'
    ``query`` rows ``rows``, a pyarrow Table) and their weighted means, then the coverage."""
    import pyarrow.compute as pc

    from ...join import index_in
    from ...result import relative

    rate = None
    if comp.plan.duplicates:
        rows = rows_of(rows, RowKind.QUERY)
        at = index_in(np.asarray(rows.column("query_id").to_pylist(), dtype=object), query_ids)
        nc = len(metric.cutoffs)
        rate = np.empty((len(query_ids), nc))
        flat = np.asarray(
            pc.list_flatten(rows.column("duplicate_rate")).to_numpy(zero_copy_only=False), dtype=np.float64
        )
        rate[at] = flat.reshape(len(at), nc)
    fill_means(sr, metric, rate, cover, relative(weights))


@contextmanager
def kept(out_df: Any, comp: CompanionFrames | None) -> Iterator[tuple[Any, Any]]:
    """(the buckets' rows, those of them that come to the driver): with catalog coverage the rows are persisted
    while the block runs (the coverage is one more Spark job over them) and the ``shown`` rows stay in Spark."""
    if comp is None or not comp.plan.coverage:
        yield out_df, out_df
        return

    out_df = out_df.persist()
    try:
        yield out_df, where_kind(out_df, RowKind.SHOWN, but=True)
    finally:
        out_df.unpersist()


def measure(
    comp: CompanionFrames, sr: Any, rows: Any, out_df: Any, spec: Any, query_ids: np.ndarray, weights: np.ndarray
) -> None:
    """A system's companion measures into its result ``sr`` (after its checks, as locally): ``rows`` are the
    buckets' rows on the driver, ``out_df`` all of them in Spark (:func:`kept`)."""
    cover = coverage(comp, shown_counts(comp, out_df), sr.name, spec) if comp.plan.coverage else None
    fill(comp, sr, rows, query_ids, weights, spec.metric, cover)


__all__ = [
    "CompanionPlan",
    "CompanionFrames",
    "frames",
    "with_groups",
    "in_source_order",
    "row_groups",
    "kept",
    "shown_counts",
    "coverage",
    "fill",
    "measure",
]
