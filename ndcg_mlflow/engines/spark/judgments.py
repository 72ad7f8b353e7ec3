"""The judgments as both paths use them (:class:`Judged`): read on the driver by the local readers and checked as
locally (:func:`judged_on_driver`, at most :data:`MAX_JUDGMENTS` rows), or, on the grouped path beyond
:data:`DRIVER_JUDGMENTS` rows, read, checked and kept in Spark (:func:`judged_in_spark`, :mod:`.judgments_in_spark`);
with the evaluated query set and weights, the companion files as DataFrames and the top-K pre-filter's plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from ...join import index_in, judgments, map_gains
from ...readers import Table, read_qrels
from ...readers.hashing import read_with_digest
from ...result import FileInfo
from ...spec import IN_MEMORY, Metric, Spec
from ..inputs import evaluated_query_set, query_weights
from ..preparation import input_table, read_companions
from . import companion_measures as comps
from .judgments_in_spark import SparkJudgments, judgment_frame, spark_judgments
from .parquet_tasks import SHIPPED_JUDGMENTS_BYTES
from .prefilter import prefilter_plan
from .sources import id_strings, is_spark_frame, plain, source_format, with_mapping

MAX_JUDGMENTS = 50_000_000
"""Judgments read on the driver at most (the judgments are assumed small next to the runs)."""

DRIVER_JUDGMENTS = MAX_JUDGMENTS
"""Judgments read on the driver at most on the grouped path (:func:`.grouped.evaluate_grouped`, and
:func:`.driver.evaluate` beyond :data:`.driver.MAX_DRIVER_QUERIES`); beyond, the judgments, the evaluated query
set and the weights stay in Spark (:mod:`.judgments_in_spark`). ``driver_judgments=`` overrides it (0: always in
Spark)."""


@dataclass
class Judged:
    """The judgments as both Spark paths use them: read, gains mapped, the evaluated queries and their weights, the
    evaluated judgments as a DataFrame, and the pre-filter's depth (``None``: not applied) and why."""

    shared: dict[str, str]  # column names given for every source
    qrels_table: Table | None  # None: the judgments are in Spark (spark_side)
    files: list[FileInfo]
    query_ids: np.ndarray | None  # None: the evaluated queries are in Spark (spark_side.weights_df)
    weights: np.ndarray | None
    judged_df: Any
    depth: int | None
    reason: str
    companions: comps.CompanionFrames | None = None  # the companion files, as Spark DataFrames
    spark_side: SparkJudgments | None = None  # the judgments, evaluated queries and weights kept in Spark
    judged_table: Any = None  # the evaluated judgments on the driver (Arrow: query_id, doc_id, grade), or None

    def prefilter_info(self) -> dict[str, Any]:
        return {"applied": self.depth is not None, "depth": self.depth, "reason": self.reason}

    @property
    def shipped(self) -> Any:
        """The evaluated judgments as an Arrow table, when the pre-filter applies and they are small enough to
        ship with the tasks that read a Parquet run (:data:`.parquet_tasks.SHIPPED_JUDGMENTS_BYTES`); else None."""
        if self.depth is None or self.judged_table is None or self.judged_table.nbytes > SHIPPED_JUDGMENTS_BYTES:
            return None
        return self.judged_table

    @property
    def where(self) -> str:
        """Where the judgments were read and checked: ``driver`` or ``spark``."""
        return "driver" if self.spark_side is None else "spark"

    @property
    def n_queries(self) -> int:
        """The number of evaluated queries (counted in Spark where the judgments are)."""
        if self.spark_side is not None:
            return self.spark_side.n_queries
        assert self.query_ids is not None
        return len(self.query_ids)

    def release(self) -> None:
        """Unpersist what the judgments keep in Spark (nothing else refers to it)."""
        if self.spark_side is not None:
            self.spark_side.release()


def judged_on_driver(
    spark: Any, spec: Spec, qrels: Any, columns: Mapping[str, str] | None, prefilter: bool | None
) -> Judged:
    """The judgments read and checked on the driver by the local readers (at most :data:`MAX_JUDGMENTS`), the
    evaluated query set and the weights; the evaluated judgments handed to Spark."""
    shared = dict(columns or {})
    qrels_table, qrels_info = _judgments(spark, spec, qrels, shared)
    files: list[FileInfo] = [qrels_info]
    map_gains(spec.metric.gain, qrels_table.value, qrels_table)
    query_ids = evaluated_query_set(spec, qrels_table, files)
    weights = query_weights(spec, query_ids, files)
    judged_table = _evaluated_judgments(qrels_table, query_ids, spec.metric)
    judged_df = spark.createDataFrame(judged_table)
    companions = comps.frames(spark, spec, read_companions(spec, files))  # read as locally, after the judgments
    depth, reason = prefilter_plan(spec.metric, judged_table.num_rows, prefilter)
    return Judged(
        shared, qrels_table, files, query_ids, weights, judged_df, depth, reason, companions, judged_table=judged_table
    )


def judged_in_spark(
    spark: Any, spec: Spec, qrels: Any, columns: Mapping[str, str] | None, prefilter: bool | None
) -> Judged:
    """:func:`judged_on_driver` with the judgments, the evaluated query set and the weights read, checked and kept
    in Spark (:func:`.judgments_in_spark.spark_judgments`)."""
    shared = dict(columns or {})
    files: list[FileInfo] = []
    side = spark_judgments(spark, spec, qrels, shared, files)
    try:
        companions = comps.frames(spark, spec, read_companions(spec, files))
        depth, reason = prefilter_plan(spec.metric, side.n_judged, prefilter)
    except BaseException:
        side.release()
        raise
    return Judged(shared, None, files, None, None, side.judged_df, depth, reason, companions, side)


def judgments_beyond(
    spark: Any, spec: Spec, qrels: Any, columns: Mapping[str, str] | None, driver_judgments: int | None
) -> bool:
    """Whether the judgments are more than ``driver_judgments`` (default :data:`DRIVER_JUDGMENTS`) rows: they are
    then kept in Spark on the grouped path. A text file of at most that many bytes is within (each judgment
    takes a line); a Parquet file's rows are in its footer; else Spark counts them (up to the limit). An in-memory
    table of another library (pandas, pyarrow...) is on the driver already: never beyond."""
    limit = DRIVER_JUDGMENTS if driver_judgments is None else driver_judgments
    obj = with_mapping(qrels, {})[0]
    if obj is not None and not is_spark_frame(obj):
        return False  # an in-memory table of another library is on the driver already
    if limit == 0:
        return True
    if obj is not None:
        return bool(obj.limit(limit + 1).count() > limit)
    q = spec.qrels
    fmt, files = source_format(q)
    if fmt in ("trec", "csv", "tsv", "jsonl"):
        try:
            if Path(q.file).stat().st_size <= limit:
                return False
        except OSError:
            return False  # (the driver's reader names the problem)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(str(f)).metadata.num_rows for f in (files or [Path(q.file)])) > limit
    frame = judgment_frame(spark, spec, None, dict(columns or {}))[0]
    return bool(frame.limit(limit + 1).count() > limit)


def _judgments(spark: Any, spec: Spec, qrels: Any, shared: dict[str, str]) -> tuple[Table, FileInfo]:
    if qrels is None:
        q = spec.qrels
        table, sha = read_with_digest(q.file, q.version, lambda: read_qrels(q.file, q.format, q.columns, q.version))
        _check_judgment_count(len(table), q.declared)
        return table, FileInfo("qrels", str(q.path), q.declared, sha, len(table))
    obj, mapping = with_mapping(qrels, shared)
    if is_spark_frame(obj):
        n = obj.limit(MAX_JUDGMENTS + 1).count()
        _check_judgment_count(n, "qrels")
        obj = obj.toArrow()
    table = input_table((obj, mapping), "qrels", "qrels", {})
    _check_judgment_count(len(table), "qrels")
    return table, FileInfo("qrels", "", IN_MEMORY, table.digest or "", len(table))


def _check_judgment_count(n: int, label: str) -> None:
    if n > MAX_JUDGMENTS:
        raise DataError(
            label,
            f"more than {MAX_JUDGMENTS:,} judgments: the Spark engine reads the judgments on "
            f"the driver (it assumes they are small next to the runs); this many is beyond "
            f"that limit.",
        )


def _evaluated_judgments(qrels: Table, query_ids: np.ndarray, metric: Metric) -> Any:
    """The judgments of the evaluated queries as an Arrow table (query_id, doc_id, grade), after the local checks
    of the whole (gains whose sums overflow stop here, naming the query and line)."""
    import pyarrow as pa

    judgments(qrels, query_ids, metric)  # the checks of the local engine, on all the evaluated judgments
    keep = index_in(qrels.query.values, query_ids)[qrels.query.codes] >= 0
    table = pa.table(
        {
            "query_id": id_strings(qrels.query, keep),
            "doc_id": plain(qrels.doc.array.filter(pa.array(keep))),
            "grade": pa.array(qrels.value[keep], type=pa.float64()),
        }
    )
    return table
