"""A Parquet run read by pyarrow in Spark tasks, pre-filtered where it is read (:class:`ParquetTasks`): no run row
crosses from Spark's JVM into a Python worker; only the rows the top-K pre-filter keeps enter Spark.

Spark's own reader hands every row from the JVM to the Python workers that run the pre-filter (about 0.9 us a row
of JVM time on the benchmark's machine: ``benchmarks/README.md``). Here:

* the driver reads the files' footers (:func:`parquet_tasks`): each file's row groups and their row counts, and
  each file's schema, checked by the local reader's column checks
  (:func:`ndcg_mlflow.readers.columns.typed_columns`); a file pyarrow cannot open, or a schema those checks
  refuse, leaves the run to Spark's reader (whose checks and messages are the engine's until now). The row
  groups are cut into tasks of at least :data:`.prefilter.PREFILTER_CHUNK_ROWS` rows, in the files' order (the
  local readers' order: :func:`.sources.source_files`); the run's row count is the footers' sum.
* each task (one partition of ``spark.range``) reads its row groups with pyarrow, casts the columns as the local
  reader does (ids to strings, numbers to doubles), gives each row its place in the whole run (``_order``: the
  file's rows before it plus its row in the file, the local engine's row order) where the numbers need it, looks
  up each row's grade in the evaluated judgments shipped with the task (:func:`grades_of`: by position, the rows
  keep their order), and yields only :func:`.prefilter.prefilter_rows`' output, chunk by chunk: the same
  function, checks and kept rows as after Spark's reader.
* a query whose rows follow one another in the files (a run stored query by query) is read whole by one task,
  in one chunk (:func:`owned_rows`, :func:`query_chunks`): a task reads on past its row groups to the end of its
  last query and leaves the rows continuing the previous task's last query to that task, and each chunk is cut
  where the query id changes. Its rows' duplicates are then all checked by the pre-filter of that chunk.

The rows' checks (nulls, empty ids, scores that are not finite, ranks that are not integers, a document listed
twice) stay those of the pre-filter and the buckets, with their messages; the duplicates of queries whose rows
are in more than one chunk (rows of a query scattered in the files) are checked as before
(:func:`.prefilter.duplicates`, on Spark's reader of the same files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...spec import Metric
from . import prefilter
from .prefilter import ORDERED_RUN_SCHEMA, RUN_SCHEMA, prefilter_rows
from .sources import spark_schema

SHIPPED_JUDGMENTS_BYTES = 64 << 20
"""The evaluated judgments are shipped with the tasks that read a Parquet run (as Arrow) up to this size; beyond,
Spark's reader and the broadcast join of the judgments read the run."""

READ_BATCH_ROWS = 1 << 16
"""Rows of one Arrow batch a task reads from a row group (a chunk of the pre-filter gathers many)."""


class PrefilteringTasks:
    """Tasks that read a run and pre-filter its rows where they read them (:class:`ParquetTasks`,
    :class:`.text_tasks.TextTask`): :meth:`prefiltered` runs their :meth:`reader` in one Spark task each."""

    keep_order: bool  # whether the rows carry their place in the run (``_order``)

    @property
    def task_count(self) -> int:
        """The Spark tasks that read the run."""
        raise NotImplementedError

    # (judged, metric, depth, has_rank, alternatives, chunk_rows) -> the tasks' function: batches of task numbers ->
    # the pre-filtered rows of those tasks, as Arrow batches
    reader: Callable[..., Callable[[Iterable[Any]], Iterator[Any]]]

    def prefiltered(
        self,
        spark: Any,
        judged: Any,
        metric: Metric,
        depth: int,
        has_rank: bool,
        alternatives: Sequence[Metric] = (),
    ) -> Any:
        """The run rows that can decide some query's top ``depth`` (:func:`.prefilter.prefilter_rows`), as they
        enter the shuffle (:data:`.prefilter.RUN_SCHEMA`, with ``_order`` when :attr:`keep_order`): a DataFrame
        of one partition per task. ``judged``: the evaluated judgments (an Arrow table of query_id, doc_id,
        grade), shipped with the tasks."""
        n = self.task_count
        read = self.reader(judged, metric, depth, has_rank, alternatives, prefilter.PREFILTER_CHUNK_ROWS)
        schema = spark_schema(ORDERED_RUN_SCHEMA if self.keep_order else RUN_SCHEMA)
        return spark.range(0, n, 1, n).mapInArrow(read, schema)


@dataclass(frozen=True)
class ParquetTasks(PrefilteringTasks):
    """A Parquet run's reading plan: the files (absolute paths, in the local readers' order), each task's row
    groups (file index, row group, the place of its first row in the run), the source's names of the tool's
    columns (``None``: absent), and whether the rows carry their place (``_order``) and take it as their rank."""

    files: tuple[str, ...]
    tasks: tuple[tuple[tuple[int, int, int], ...], ...]
    columns: dict[str, str | None]
    rows: int
    keep_order: bool
    rank_from_order: bool

    @property
    def task_count(self) -> int:
        return len(self.tasks)

    def reader(
        self,
        judged: Any,
        metric: Metric,
        depth: int,
        has_rank: bool,
        alternatives: Sequence[Metric] = (),
        chunk_rows: int | None = None,
    ) -> Callable[[Iterable[Any]], Iterator[Any]]:
        """The tasks' function (of :meth:`prefiltered`): Arrow batches of task numbers (one column) -> the
        pre-filtered rows of those tasks' row groups, as Arrow batches, chunk by chunk of at least
        ``chunk_rows`` rows (default :data:`.prefilter.PREFILTER_CHUNK_ROWS`)."""
        chunk_rows = prefilter.PREFILTER_CHUNK_ROWS if chunk_rows is None else chunk_rows
        files, tasks, columns = self.files, self.tasks, self.columns
        keep_order, rank_from_order = self.keep_order, self.rank_from_order
        lookup = grade_lookup(judged)
        names = [n for n in columns.values() if n is not None]

        def read(batches: Iterable[Any]) -> Iterator[Any]:
            import pyarrow.parquet as pq

            opened: dict[int, Any] = {}

            def group_rows(item: tuple[int, int, int]) -> Iterator[Any]:
                file, group, start = item
                if file not in opened:
                    opened[file] = pq.ParquetFile(files[file])
                at = start
                for batch in opened[file].iter_batches(READ_BATCH_ROWS, row_groups=[group], columns=names):
                    yield run_batch(batch, files[file], columns, at if keep_order else None, rank_from_order)
                    at += batch.num_rows

            def last_query(item: tuple[int, int, int]) -> str | None:
                file, group, _ = item
                if file not in opened:
                    opened[file] = pq.ParquetFile(files[file])
                ids = opened[file].read_row_group(group, columns=[columns["query_id"]]).column(0)
                return _query_text(ids.slice(len(ids) - 1))

            for batch in batches:
                for task in batch.column(0).to_pylist():
                    tables = owned_rows(task, tasks, group_rows, last_query)
                    yield from prefiltered_chunks(tables, lookup, metric, depth, has_rank, alternatives, chunk_rows)

        return read


def prefiltered_chunks(
    tables: Iterable[Any],
    lookup: tuple[Any, Any],
    metric: Metric,
    depth: int,
    has_rank: bool,
    alternatives: Sequence[Metric],
    chunk_rows: int,
) -> Iterator[Any]:
    """A task's run rows (consecutive tables of :func:`run_batch`'s columns, in the run's order) -> the rows the
    top-K pre-filter keeps, as Arrow batches: gathered into chunks cut where the query id changes
    (:func:`query_chunks`), each row given its grade from the shipped judgments (:func:`grades_of`), each chunk
    filtered by :func:`.prefilter.prefilter_rows` under a chunk number of its own."""
    import os

    for table in query_chunks(tables, chunk_rows):
        table = table.append_column("grade", grades_of(table, lookup))
        chunk = int.from_bytes(os.urandom(8), "little") >> 1
        yield from prefilter_rows(table, metric, depth, has_rank, chunk, alternatives).to_batches()


def parquet_tasks(
    files: Sequence[Path], columns: dict[str, str | None], keep_order: bool, rank_from_order: bool
) -> ParquetTasks | None:
    """The reading plan of a Parquet run whose files are ``files`` (in the local readers' order) and whose columns
    are ``columns`` (the tool's name -> the files' name; ``None``: absent), from the footers; ``None`` when a file
    is one pyarrow cannot open, lacks a column, holds one the local reader's column checks refuse, or the run has
    no row (Spark's reader then reads it, with its checks)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ...errors import DataError
    from ...readers.columns import typed_columns

    places: list[tuple[int, int, int, int]] = []  # (file, row group, first row's place, rows)
    names = {c: n for c, n in columns.items() if n is not None}
    start = 0
    for i, f in enumerate(files):
        try:
            meta = pq.ParquetFile(str(f))
            schema = meta.schema_arrow
            if any(schema.get_field_index(n) < 0 for n in names.values()):  # absent, or named twice
                return None
            empty = pa.table({c: pa.array([], type=schema.field(n).type) for c, n in names.items()})
            typed_columns(empty, str(f), "score" if "score" in names else None, "rank" if "rank" in names else None)
            for group in range(meta.metadata.num_row_groups):
                n = meta.metadata.row_group(group).num_rows
                if n:
                    places.append((i, group, start, n))
                start += n
        except (pa.ArrowException, OSError, DataError):
            return None
    if not places:
        return None
    tasks: list[tuple[tuple[int, int, int], ...]] = []
    current: list[tuple[int, int, int]] = []
    rows = 0
    for file, group, first, n in places:
        current.append((file, group, first))
        rows += n
        if rows >= prefilter.PREFILTER_CHUNK_ROWS:
            tasks.append(tuple(current))
            current, rows = [], 0
    if current:
        tasks.append(tuple(current))
    absolute = tuple(os.path.abspath(str(f)) for f in files)
    return ParquetTasks(absolute, tuple(tasks), dict(columns), start, keep_order, rank_from_order)


def run_batch(batch: Any, path: str, columns: dict[str, str | None], start: int | None, rank_from_order: bool) -> Any:
    """A record batch of a Parquet run as the pre-filter takes it (query_id, doc_id: strings; score, rank: doubles,
    the rank null when the run has none), cast by the local reader's column checks
    (:func:`~ndcg_mlflow.readers.columns.typed_columns`); with ``start`` (the place of the batch's first row in the
    run), ``_order``, each row's place, which is also its rank with ``rank_from_order``. No score column: the
    score is minus the rank (rank 1 scores highest), as locally."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...readers.columns import typed_columns

    named = pa.table({c: batch.column(n) for c, n in columns.items() if n is not None})
    value = "score" if columns.get("score") else None
    rank_col = "rank" if columns.get("rank") else None
    ids, nums = typed_columns(named, path, value, rank_col)
    n = batch.num_rows
    order = None if start is None else pa.array(np.arange(start, start + n, dtype=np.int64))
    if rank_col is not None:
        rank = nums["rank"]
    elif rank_from_order and order is not None:
        rank = order.cast(pa.float64())
    else:
        rank = pa.nulls(n, pa.float64())
    score = nums["score"] if value is not None else pc.negate(rank)
    out = {"query_id": ids["query_id"], "doc_id": ids["doc_id"], "score": score, "rank": rank}
    if order is not None:
        out["_order"] = order
    return pa.table(out)


def owned_rows(
    task: int,
    tasks: Sequence[Sequence[tuple[int, int, int]]],
    group_rows: Callable[[tuple[int, int, int]], Iterator[Any]],
    last_query: Callable[[tuple[int, int, int]], str | None],
) -> Iterator[Any]:
    """The rows task ``task`` owns, as tables of :func:`run_batch`, in the run's order: a query whose rows follow
    one another in the files (a run stored query by query) is read whole by the task holding its first row.

    With the run's rows in order (the tasks' row groups one after the other), a *stretch* is a longest run of
    consecutive rows of one query id (a null id is a stretch of its own). The task skips its first rows while
    they continue the stretch of the row before them (the last row of the previous task's last row group:
    ``last_query``), and reads on past its last row group, into the next tasks' row groups, while the rows
    continue the stretch of its last row (unless it skipped all its rows: that stretch is then an earlier
    task's). So each row is read by exactly one task: the one holding the first row of its stretch."""
    previous = last_query(tasks[task - 1][-1]) if task > 0 else None
    last: str | None = None
    own = False
    for item in tasks[task]:
        for table in group_rows(item):
            if not own:
                start = 0 if previous is None else _stretch_end(table.column("query_id"), previous)
                if start == table.num_rows:
                    continue
                table, own = table.slice(start), True
            yield table
            last = _query_text(table.column("query_id").slice(table.num_rows - 1))
    if not own or last is None:
        return
    for following in tasks[task + 1 :]:
        for item in following:
            for table in group_rows(item):
                end = _stretch_end(table.column("query_id"), last)
                if end:
                    yield table.slice(0, end)
                if end < table.num_rows:
                    return


def query_chunks(tables: Iterable[Any], rows: int) -> Iterator[Any]:
    """Consecutive tables of run rows gathered into chunks of at least ``rows`` rows (the last one: what remains),
    each cut where the query id changes (the rows of the last query wait for the next chunk; a chunk of one query
    grows until another query starts): a query stored in one stretch is in one chunk, whose pre-filter then
    checked all its rows for duplicates."""
    import pyarrow as pa

    buffered: list[Any] = []
    n = 0
    for table in tables:
        buffered.append(table)
        n += table.num_rows
        if n < rows:
            continue
        whole = pa.concat_tables(buffered)
        q = whole.column("query_id")
        tail = _stretch_start(q, _query_text(q.slice(n - 1)))
        if tail == 0:  # one query so far
            buffered = [whole]
            continue
        yield whole.slice(0, tail)
        buffered, n = [whole.slice(tail)], n - tail
    if n:
        yield pa.concat_tables(buffered)


def _query_text(one: Any) -> str | None:
    """The query id of a one-row slice of a query id column (read as its text), None when null."""
    from .sources import plain

    return plain(one)[0].as_py()


def _differs(ids: Any, query: str) -> Any:
    """Whether each row's query id (read as its text) differs from ``query`` (a null id differs), as numpy."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .sources import plain

    same = pc.fill_null(pc.equal(plain(ids), pa.scalar(query, pa.string())), False)
    return ~np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)


def _stretch_end(ids: Any, query: str) -> int:
    """The number of first rows of ``ids`` whose query id is ``query``."""
    import numpy as np

    at = np.flatnonzero(_differs(ids, query))
    return int(at[0]) if at.size else len(ids)


def _stretch_start(ids: Any, query: str | None) -> int:
    """Where the last rows of ``ids`` whose query id is ``query`` start (``len(ids)`` for a null ``query``: a null
    id is a stretch of its own, and is cut after)."""
    import numpy as np

    if query is None:
        return len(ids)
    at = np.flatnonzero(_differs(ids, query))
    return int(at[-1]) + 1 if at.size else 0


def grade_lookup(judged: Any) -> tuple[Any, Any]:
    """The evaluated judgments (an Arrow table of query_id, doc_id, grade; each (query, document) once, as the
    local readers leave them) as the keys :func:`grades_of` looks run rows up in, and their grades."""
    return _pair_keys(judged.column("query_id"), judged.column("doc_id")), judged.column("grade")


def grades_of(rows: Any, lookup: tuple[Any, Any]) -> Any:
    """Each run row's grade (null when its (query, document) is not among the evaluated judgments), in the rows'
    order: the position of its (query, document) key among the judgments' keys (``pyarrow.compute.index_in``, as
    :func:`ndcg_mlflow.join.index_in` finds positions), then the grade at that position. A key is the query id's
    length in bytes, the query id and the document id, joined by NUL: two different pairs never share one."""
    import pyarrow.compute as pc

    keys, grades = lookup
    at = pc.index_in(_pair_keys(rows.column("query_id"), rows.column("doc_id")), value_set=keys)
    return grades.take(at)


def _pair_keys(query: Any, doc: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    from .sources import plain

    q, d = plain(query), plain(doc)
    return pc.binary_join_element_wise(pc.cast(pc.binary_length(q), pa.string()), q, d, "\x00")
