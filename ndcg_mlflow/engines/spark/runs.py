"""A system's run as a Spark DataFrame (:func:`run_frame`): read by Spark or by the local reader in a Spark task
(:mod:`.sources`), or handed over from a table in memory; its columns checked and named as the bucket UDF takes
them, with the rows' order in the input where the numbers need it (:func:`in_file_order`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...errors import DataError, EvaluationError, SpecError
from ...readers import sha256_file
from ...readers.accept import column_type
from ...result import FileInfo
from ...rules import averages_ties, keeps_displayed_order, needs_row_order
from ...spec import IN_MEMORY, Metric, Spec
from ..preparation import input_table
from .parquet_tasks import ParquetTasks, parquet_tasks
from .sources import (
    column_type_ok,
    frame_digest,
    id_strings,
    is_spark_frame,
    local_reader_frame,
    mapped_columns,
    plain,
    read_run_file,
    reads_locally,
    source_files,
    source_format,
    with_mapping,
)
from .text_tasks import TextTask


class RunFrame(NamedTuple):
    """A system's run as :func:`run_frame` gives it: its rows as a DataFrame, its label for errors, its file
    information, whether it has ranks, and, for a Parquet run read by pyarrow in Spark tasks, their plan (the
    DataFrame is then Spark's reader of the same files, for the duplicate check of the rows the pre-filter
    leaves out: :func:`.prefilter.duplicates`), or for a text run the plan of its task; and whether its reader
    already refused a document listed twice (the local reader's check, naming its lines)."""

    df: Any
    label: str
    info: FileInfo
    has_rank: bool
    reader: str
    tasks: ParquetTasks | TextTask | None = None
    duplicates_checked: bool = False


READ_IN_TASKS = "pyarrow in Spark tasks, pre-filtered there"
READ_LOCALLY = "the local reader in a Spark task"
READ_LOCALLY_IN_TASK = "the local reader in a Spark task, pre-filtered there"
READ_FRAME = "a Spark DataFrame"
READ_IN_MEMORY = "a table in memory, checked on the driver"
"""How a run was read (``engine_info.systems.<name>.read_by``; Spark's own readers: ``Spark's <format> reader``)."""


def run_frame(
    spark: Any, spec: Spec, name: str, source: Any, shared: dict[str, str], in_tasks: bool = False
) -> RunFrame:
    """A system's rows as a DataFrame of query_id, doc_id (strings), score and rank (doubles; rank all NULL when
    the source has none), its label for errors, its file information and whether it has ranks.

    With ``in_tasks`` (the pre-filter applies and the evaluated judgments can be shipped with tasks), a Parquet
    file, folder or glob of the spec that Spark's reader would read is read by pyarrow in Spark tasks instead,
    when :func:`.parquet_tasks.parquet_tasks` can plan it (after the same checks of its columns as Spark's
    reader's); its row count is then its footers'."""
    from pyspark.sql import functions as F

    label = f"systems[{name!r}]"
    source, mapping = with_mapping(source, shared)
    version = None
    if is_spark_frame(source):
        df, path, declared = source, "", IN_MEMORY
    elif hasattr(source, "declared") and getattr(source, "path", None) is not None:  # a spec Source
        label = str(source.path)
        if reads_locally(source):
            return _read_locally(spark, spec, name, source, label, in_tasks)
        df = read_run_file(spark, source)
        path, declared, mapping = str(source.path), source.declared, dict(source.columns)
        version = source.version
    else:  # an in-memory table of another library: checked locally, then handed to Spark
        import pyarrow as pa

        t = input_table((source, mapping), "run", label, {})
        cols = {
            "query_id": id_strings(t.query),
            "doc_id": plain(t.doc.array),
            "score": pa.array(t.value, type=pa.float64()),
        }
        if t.rank is not None:
            cols["rank"] = pa.array(t.rank, type=pa.float64())
        elif needs_row_order(spec.metric.ties, spec.sensitivity):  # the rows' order (the shuffle's is not)
            cols["rank"] = pa.array(np.arange(len(t), dtype=np.float64))
        if _keeps_ties_in_order(spec):  # tied rows in the table's order, as locally
            cols["_order"] = pa.array(np.arange(len(t), dtype=np.int64))
        df = spark.createDataFrame(pa.table(cols))
        info = FileInfo(f"system:{name}", "", IN_MEMORY, t.digest or "", len(t))
        return RunFrame(df, label, info, "rank" in cols, READ_IN_MEMORY)

    df, columns = mapped_columns(df, "run", mapping, label)
    value_col = "score" if "score" in columns else None
    rank_col = "rank" if "rank" in columns else None
    selected = []
    for c, (col, t) in columns.items():
        numeric = c not in ("query_id", "doc_id")
        if not column_type_ok(t, numeric=numeric):
            raise DataError(label, column_type(c, t, numeric=numeric))
        selected.append(col.cast("double" if numeric else "string").alias(c))
    # the rows' order in the files: the displayed order, whose key stands in for a missing rank (under ties:
    # displayed_order and for sensitivity's displayed_order alternative), and the order of tied rows (a model's
    # scored rows have no order: Spark's tasks wrote them)
    ordered = version is None and declared != IN_MEMORY and getattr(source, "model", None) is None
    wants_rank = rank_col is None and needs_row_order(spec.metric.ties, spec.sensitivity)
    if in_tasks and ordered and source_format(source)[0] == "parquet":
        names = {
            c: mapping.get(c, c) if c in ("query_id", "doc_id", value_col, rank_col) else None for c in RUN_COLUMNS
        }
        tasks = parquet_tasks(source_files(source), names, wants_rank or _keeps_ties_in_order(spec), wants_rank)
        if tasks is not None:
            df = df.select(*selected)
            if value_col is None:
                df = df.withColumn("score", -F.col("rank"))
            if rank_col is None:
                df = df.withColumn("rank", F.lit(None).cast("double"))
            info = FileInfo(f"system:{name}", path, declared, sha256_file(path, version), tasks.rows)
            return RunFrame(df, label, info, rank_col is not None or wants_rank, READ_IN_TASKS, tasks)
    if ordered and (wants_rank or _keeps_ties_in_order(spec)):
        df = in_file_order(spark, df, selected, source_files(source), label)
        if wants_rank:
            df, rank_col = df.withColumn("rank", F.col("_order").cast("double")), "rank"
    elif keeps_displayed_order(spec.metric.ties) and rank_col is None:
        raise SpecError(
            "metric.ties",
            f"{label} has no rank column, and ties: displayed_order then means the "
            f"rows' order, which Spark keeps only for the files it reads itself "
            f"(not for a DataFrame or a Delta table); give a rank column or "
            f"another tie rule.",
        )
    else:
        df = df.select(*selected)
    if value_col is None:
        df = df.withColumn("score", -F.col("rank"))
    if rank_col is None:
        df = df.withColumn("rank", F.lit(None).cast("double"))
    digest = frame_digest(df) if declared == IN_MEMORY else None
    footers = None if digest or version is not None else footer_rows(source)
    rows = digest[1] if digest else footers if footers is not None else df.count()
    sha = digest[0] if digest else sha256_file(path, version)
    has_rank = rank_col is not None
    reader = READ_FRAME if declared == IN_MEMORY else f"Spark's {source_format(source)[0]} reader"
    return RunFrame(df, label, FileInfo(f"system:{name}", path, declared, sha, rows), has_rank, reader)


def _read_locally(spark: Any, spec: Spec, name: str, source: Any, label: str, in_tasks: bool) -> RunFrame:
    """:func:`run_frame` for a file the local engine's reader reads in a Spark task
    (:func:`.sources.local_reader_frame`): its rows checked as locally, with the local messages; the rank
    is read when some numbers order ties by it (as locally: sensitivity keeps every column); a run without a rank
    column is in its rows' order (``_order``) where that order is the displayed one or orders tied rows. With
    ``in_tasks`` (the evaluated judgments can be shipped with tasks), the plan of a task that reads the file and
    pre-filters its rows where it reads them (:class:`.text_tasks.TextTask`), used when the pre-filter applies."""
    import os

    from pyspark.sql import functions as F

    displayed = needs_row_order(spec.metric.ties, spec.sensitivity)
    df, rows, ranked = local_reader_frame(spark, source, "run", displayed)
    rank_from_order = not ranked and displayed
    keep_order = rank_from_order or _keeps_ties_in_order(spec)
    if rank_from_order:
        df = df.withColumn("rank", F.col("_order").cast("double"))
    elif not keep_order:
        df = df.drop("_order")
    sha = sha256_file(source.file, source.version)
    info = FileInfo(f"system:{name}", str(source.path), source.declared, sha, rows)
    has_rank = ranked or rank_from_order
    if not in_tasks:
        return RunFrame(df, label, info, has_rank, READ_LOCALLY, duplicates_checked=True)
    path = os.path.abspath(str(source.file))
    task = TextTask(path, source.format, tuple(source.columns), displayed, keep_order, rank_from_order)
    return RunFrame(df, label, info, has_rank, READ_LOCALLY_IN_TASK, task, duplicates_checked=True)


RUN_COLUMNS = ("query_id", "doc_id", "score", "rank")


def footer_rows(source: Any) -> int | None:
    """The rows of a Parquet source of the spec (a file, folder or glob) from its files' footers (no Spark job);
    None for another format, or a file pyarrow cannot open (Spark then counts the rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if source_format(source)[0] != "parquet":
        return None
    try:
        return sum(pq.ParquetFile(str(f)).metadata.num_rows for f in source_files(source))
    except (pa.ArrowException, OSError):
        return None


def _keeps_ties_in_order(spec: Spec) -> bool:
    """Whether the order of tied rows shows in the results beyond the tie rule's own order: under ``ties:
    average`` it decides which documents of a tied group a top list shows (and so the companion measures)."""
    return averages_ties(spec.metric.ties)


ORDER_ROW_BITS = 33  # monotonically_increasing_id: a task's row count in its lower 33 bits
ORDER_MAX_BLOCKS = 1 << 20  # blocks of a source ordered exactly (block place * 2^33 + row < 2^53)


def in_file_order(spark: Any, df: Any, selected: list[Any], files: list[Path], label: str) -> Any:
    """``df.select(*selected)`` with a column ``_order``: each row's place in the rows' order in the files (the
    files in the local readers' order, each one's rows in their order), as the local engine reads them: the
    displayed order of a run without a rank column, and the order of tied rows under ``ties: average`` (which of
    a tied group's documents the top lists and the companion measures show).

    Spark splits each file into blocks (at most ``spark.sql.files.maxPartitionBytes``; Parquet at row groups)
    and reads each block whole, in order, in one task, so a row's place is (its block's place among the
    blocks, its place in its task's rows): the blocks' places from their files and starts
    (``_metadata.file_path``, ``_metadata.file_block_start``: one small job), the rows' from
    ``monotonically_increasing_id``, whose lower 33 bits count the task's rows. Both in one integer below 2^53
    (a double holds it exactly, as a rank)."""
    import os
    from urllib.parse import unquote, urlparse

    import pyarrow as pa
    from pyspark.sql import functions as F

    names = df.select(*selected).columns
    meta = df.select(
        *selected,
        F.col("_metadata.file_path").alias("_file"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_seq"),
    )
    place_of = {os.path.realpath(f): i for i, f in enumerate(files)}
    keyed = []
    for r in meta.select("_file", "_block").distinct().collect():
        where = place_of.get(os.path.realpath(unquote(urlparse(r["_file"]).path)))
        if where is None:  # pragma: no cover - Spark reads the files it was given
            raise EvaluationError(f"{label}: Spark read {r['_file']}, which is not one of the source's files.")
        keyed.append((where, int(r["_block"]), r["_file"]))
    keyed.sort()
    if len(keyed) >= ORDER_MAX_BLOCKS:
        raise EvaluationError(
            f"{label} is read by Spark in {len(keyed):,} blocks, more than the "
            f"{ORDER_MAX_BLOCKS:,} whose rows' order stands in for the missing rank column "
            f"(ties: displayed_order): give a rank column, or larger blocks "
            f"(spark.sql.files.maxPartitionBytes)."
        )
    places = spark.createDataFrame(
        pa.table(
            {
                "_file": pa.array([k[2] for k in keyed], type=pa.string()),
                "_block": pa.array([k[1] for k in keyed], type=pa.int64()),
                "_place": pa.array(range(len(keyed)), type=pa.int64()),
            }
        )
    )
    row = F.col("_seq").bitwiseAND(F.lit((1 << ORDER_ROW_BITS) - 1))
    order = F.col("_place") * F.lit(1 << ORDER_ROW_BITS) + row
    return meta.join(F.broadcast(places), ["_file", "_block"]).select(*names, order.alias("_order"))


def computable(alternatives: Sequence[tuple[str, str, Metric]], has_rank: bool) -> list[tuple[str, str, Metric]]:
    """The alternatives (rule, label, metric) the Spark engine computes for a run: all of them, except, for a run
    without a rank column, those ordering ties as displayed (``ties: displayed_order`` then means the rows' line
    order, which Spark does not keep; the local engine would use it)."""
    return [a for a in alternatives if has_rank or not keeps_displayed_order(a[2].ties)]
