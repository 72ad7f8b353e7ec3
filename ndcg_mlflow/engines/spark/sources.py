"""How the Spark engine reads a source: a run or judgments file of the spec (Parquet files, folders and globs,
Delta tables at a version, TREC, CSV, TSV, JSONL) or a large query set or weights file as a DataFrame, and the
order-independent content digest of a DataFrame. Text files are read by the local engine's own readers in a Spark
task (:func:`local_reader_frame`), so both engines accept the same files, with the same numbers and messages;
Spark's own readers get Parquet and Delta paths literally (:func:`literal_path`). Imports pyspark lazily, inside
its functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import DataError, SpecError
from ...queries import plain  # (the seam's: one definition of an id column as plain strings)


def with_mapping(source: Any, shared: Mapping[str, str]) -> tuple[Any, dict[str, str]]:
    """A source and its column mapping: ``(table, {column: name})`` given together, over ``shared`` (the columns
    given for every source), else ``shared``."""
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], Mapping):
        return source[0], {**shared, **source[1]}
    return source, dict(shared)


def check_mapping(mapping: Mapping[str, str]) -> None:
    """Refuse a column mapping naming a column the tool does not know (the local engine's message)."""
    unknown = [k for k in mapping if k not in ("query_id", "doc_id", "grade", "score", "rank")]
    if unknown:
        raise SpecError(
            "columns", f"unknown column {unknown[0]!r}; a column mapping names query_id, doc_id, grade, score or rank."
        )


def mapped_columns(df: Any, kind: str, mapping: Mapping[str, str], label: str) -> tuple[Any, dict[str, Any]]:
    """The columns of a DataFrame that the tool reads as a ``kind`` (``run`` or ``qrels``) source under the column
    mapping ``mapping``, by the readers' one rule (:func:`ndcg_mlflow.readers.accept.column_places`: a name the
    mapping gives to another column is not read, names are compared exactly): ``(df, {tool's name: (column, Spark
    type)})``, each column taken by its place. Spark's analyzer reads a dot in a name as a field's and, by default
    (``spark.sql.caseSensitive``), takes ``score`` and ``SCORE`` for one name: a name is quoted, and where two of
    the DataFrame's names differ by case alone its columns are renamed by their places (the ``df`` returned)."""
    from pyspark.sql import functions as F

    from ...readers.accept import column_places, kind_mapping, refusals

    check_mapping(mapping)
    names = list(df.columns)
    with refusals(label):
        places = column_places(kind, names, kind_mapping(kind, mapping))
    types = [t for _, t in df.dtypes]
    if len({n.lower() for n in names}) < len(names):
        df = df.toDF(*[f"_c{i}" for i in range(len(names))])  # (by place: no name is looked up)
        names = list(df.columns)
    quoted = {c: "`" + names[i].replace("`", "``") + "`" for c, i in places.items()}
    return df, {c: (F.col(quoted[c]), types[i]) for c, i in places.items()}


def id_strings(ids: Any, rows: Any = None) -> Any:
    """A table's id column (:class:`~ndcg_mlflow.readers.Ids`: codes into distinct values) as an Arrow string
    array, one id a row (of ``rows``, a mask or indices, when given)."""
    import pyarrow as pa

    codes = ids.codes if rows is None else ids.codes[rows]
    return pa.array(list(ids.values), type=pa.string()).take(pa.array(codes))


def arrow_schema(ddl: str) -> Any:
    """A Spark schema of flat columns (``"query_id string, score double, top array<long>"``: the types string, double,
    long, int, tinyint and arrays of them) as the Arrow schema of the same columns, for the UDFs' record batches."""
    import pyarrow as pa

    types = {"string": pa.string(), "double": pa.float64(), "long": pa.int64(), "int": pa.int32(), "tinyint": pa.int8()}
    fields = [column.split(" ") for column in ddl.split(", ")]
    return pa.schema([(n, pa.list_(types[t[6:-1]]) if t.startswith("array<") else types[t]) for n, t in fields])


def spark_schema(ddl: str) -> Any:
    """The Spark schema of :func:`arrow_schema`'s columns, made in Python: the UDFs' declared return types, without
    the round trip to the JVM's SQL parser that a DDL string costs on each call (about 0.1 s each while the JVM is
    cold)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(ddl))


def is_spark_frame(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.startswith("pyspark.sql") and type(obj).__name__ == "DataFrame"


def frame_digest(df: Any) -> tuple[str, int]:
    """An order-independent content digest of a run DataFrame (the sum of its rows' xxhash64) and its rows."""
    return digest_columns(df, ("query_id", "doc_id", "score", "rank"))


def digest_columns(df: Any, columns: Sequence[str]) -> tuple[str, int]:
    """An order-independent content digest of ``columns`` of a DataFrame (the sum of its rows' xxhash64) and its
    rows."""
    from pyspark.sql import functions as F

    h = F.xxhash64(*columns).cast("decimal(38,0)")
    row = df.agg(F.sum(h).alias("h"), F.count(F.lit(1)).alias("n")).collect()[0]
    total = int(row["h"] or 0) % (1 << 64)
    return f"xxhash64-sum:{total:016x}", int(row["n"])


def column_type_ok(spark_type: str, numeric: bool) -> bool:
    """Whether a column of this Spark type can be read as a number (``numeric``) or as an id (strings or
    integers, read as their decimal text)."""
    if numeric:
        return spark_type in ("tinyint", "smallint", "int", "bigint", "float", "double") or spark_type.startswith(
            "decimal"
        )
    return spark_type in ("string", "tinyint", "smallint", "int", "bigint") or spark_type.startswith("varchar")


def source_format(source: Any) -> tuple[str, list[Path] | None]:
    """A spec source's format as the local readers decide it, and the files of a Parquet folder or glob (None for
    one file)."""
    from ...paths import dataset_files
    from ...readers import detect_format

    files = dataset_files(source.file) if source.format in ("auto", "parquet") else None
    if files is not None:
        return "parquet", files
    return detect_format(source.file, source.format, source.columns), None


def source_files(source: Any) -> list[Path]:
    """The files of a spec source in the order the local readers read them (a Parquet folder's or glob's files
    sorted; else the one file)."""
    from ...paths import dataset_files

    files = dataset_files(source.file) if source.format in ("auto", "parquet") else None
    return files or [Path(source.file)]


# --------------------------------------------------------------------------- a file read by the local readers in a task

TEXT_FORMATS = ("trec", "csv", "tsv", "jsonl")
BATCH_ROWS = 1 << 20  # rows of one Arrow batch a file's task hands to Spark


def literal_path(path: Path) -> str:
    """A local path as Spark's file sources take it literally: absolute (a ':' before the first '/' of a relative
    path would read as a URI scheme), with Hadoop's glob characters escaped (a declared path is that file, never
    a pattern)."""
    import os
    import re

    return re.sub(r"([\\*?\[\]{}])", r"\\\1", os.path.abspath(str(path)))


def spark_can_name(files: Sequence[Path]) -> bool:
    """Whether Spark's own file sources read each of ``files`` as given: not a name Hadoop hides (starting with
    ``_`` or ``.``: skipped, even when named) and no ':' (its checksum file's name would read as a URI)."""
    import os

    return not any(f.name.startswith(("_", ".")) or ":" in os.path.abspath(str(f)) for f in files)


# the columns of each kind of file :func:`local_reader_frame` reads, as the local readers give them
READ_COLUMNS = {
    "run": (("query_id", "string"), ("doc_id", "string"), ("score", "double"), ("rank", "double")),
    "qrels": (("query_id", "string"), ("doc_id", "string"), ("grade", "double")),
    "set": (("query_id", "string"),),
    "weights": (("query_id", "string"), ("weight", "double")),
}
_TASK_COLUMNS = (("_order", "long"), ("_error", "string"), ("_line", "long"), ("_file", "string"))
_SUMMARY = "n long, ranked long, _error string, _line long, _file string"


def _schema(kind: str) -> str:
    """The columns of :func:`local_reader_frame`'s task for a file of ``kind``, as a Spark schema."""
    return ", ".join(f"{name} {type_}" for name, type_ in READ_COLUMNS[kind] + _TASK_COLUMNS)


def local_reader_frame(spark: Any, source: Any, kind: str, rank: bool = False) -> tuple[Any, int, bool]:
    """A file source of the spec read by the local engine's own reader (``read_run``, ``read_qrels``,
    ``read_query_set`` or ``read_weights`` for ``kind`` run, qrels, set or weights: the same lines, fields, numbers,
    checks and messages, with the file and line) in one Spark task, whose rows go to Spark as Arrow batches: the
    columns of :data:`READ_COLUMNS` (a run's ``rank`` NULL where the file has none) and ``_order``, each row's
    place in the file (the local engine's row order). The reader's error is raised on the driver as it is raised
    locally (a DataError). Returns the DataFrame, its rows and whether it has ranks. The executors read the file
    at its absolute path, as Spark's own readers would.

    The rows are counted and the reader's error found by a job of their own, whose task reads the file and
    returns one row (:func:`_file_summary`): the file's rows enter Spark only where the DataFrame is used."""
    import os

    shown = str(source.file)
    opened = os.path.abspath(shown)
    # one partition of spark.range, with no shuffle: a shuffle of a fixed number of partitions (repartition)
    # would keep Spark's adaptive execution from coalescing the later shuffles of the plan
    task = spark.range(0, 1, 1, 1)
    args = (opened, kind, source.format, tuple(source.columns), rank)
    df = task.mapInArrow(_file_rows(*args), spark_schema(_schema(kind)))
    checked = task.mapInArrow(_file_summary(*args), spark_schema(_SUMMARY)).collect()[0]
    if checked["_error"] is not None:
        message, line, file = checked["_error"], checked["_line"], checked["_file"]
        if file == opened:
            file = shown
        raise DataError(file, message, line)
    names = [name for name, _ in READ_COLUMNS[kind]] + ["_order"]
    return df.select(*names), int(checked["n"]), bool(kind == "run" and checked["ranked"])


def _file_rows(path: str, kind: str, fmt: str, columns: tuple[tuple[str, str], ...], rank: bool) -> Any:
    """The function of :func:`local_reader_frame`'s task (one row): the file's rows as Arrow batches, or one row
    holding the reader's error."""

    def rows(batches: Any) -> Any:
        for batch in batches:
            if batch.num_rows:
                yield from file_batches(path, kind, fmt, columns, rank)

    return rows


def _file_summary(path: str, kind: str, fmt: str, columns: tuple[tuple[str, str], ...], rank: bool) -> Any:
    """The function of :func:`local_reader_frame`'s checking task (one row): one row of the file's row count, its
    rows with a rank (a run's) and the reader's error (its message, line and file; null when none)."""

    def summary(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            if not batch.num_rows:
                continue
            n = ranked = 0
            error: list[Any] = [None, None, None]
            for part in file_batches(path, kind, fmt, columns, rank):
                if part.column("_error").null_count < part.num_rows:  # (the reader's error: one row)
                    error = [part.column(c)[0].as_py() for c in ("_error", "_line", "_file")]
                    break
                n += part.num_rows
                ranked += part.num_rows - part.column("rank").null_count if kind == "run" else part.num_rows
            schema = arrow_schema(_SUMMARY)
            cells = [n, ranked, *error]
            yield pa.RecordBatch.from_arrays([pa.array([c], type=f.type) for c, f in zip(cells, schema)], schema=schema)

    return summary


def file_batches(path: str, kind: str, fmt: str, columns: tuple[tuple[str, str], ...], rank: bool) -> Any:
    """A file's rows read by the local readers, as Arrow record batches of :func:`local_reader_frame`'s columns;
    a DataError as one row of its message, line and file."""
    import numpy as np
    import pyarrow as pa

    from ...readers import read_qrels, read_query_set, read_run, read_weights

    schema = arrow_schema(_schema(kind))
    try:
        if kind in ("run", "qrels"):
            table = read_run(path, fmt, rank=rank, columns=columns) if kind == "run" else read_qrels(path, fmt, columns)
            values = [
                id_strings(table.query),
                plain(table.doc.array),
                pa.array(table.value, type=pa.float64()),
            ]
            if kind == "run":
                values.append(
                    pa.nulls(len(table), pa.float64())
                    if table.rank is None
                    else pa.array(table.rank, type=pa.float64())
                )
        elif kind == "set":
            values = [pa.array(read_query_set(path), type=pa.string())]
        else:
            weights = read_weights(path)
            values = [pa.array(list(weights), type=pa.string()), pa.array(list(weights.values()), type=pa.float64())]
    except DataError as exc:
        cells = {"_error": exc.message, "_line": exc.line, "_file": exc.file}
        yield pa.RecordBatch.from_arrays([pa.array([cells.get(f.name)], type=f.type) for f in schema], schema=schema)
        return
    n = len(values[0])
    values += [pa.array(np.arange(n, dtype=np.int64))] + [pa.nulls(n, f.type) for f in list(schema)[-3:]]
    whole = pa.RecordBatch.from_arrays(values, schema=schema)
    for start in range(0, n, BATCH_ROWS):
        yield whole.slice(start, BATCH_ROWS)


def reads_locally(source: Any) -> bool:
    """Whether a file source of the spec is read by the local engine's own reader in a Spark task
    (:func:`local_reader_frame`): a TREC, CSV, TSV or JSONL file (the readers' one definition of lines, fields and
    numbers), or Parquet that Spark's reader cannot name literally (:func:`spark_can_name`) or whose columns it
    cannot tell apart (:func:`spark_tells_apart`)."""
    if source.format == "delta":
        return False
    fmt, files = source_format(source)
    if fmt != "parquet":
        return fmt in TEXT_FORMATS
    files = files or [Path(source.file)]
    return not spark_can_name(files) or not spark_tells_apart(files)


def spark_tells_apart(files: Sequence[Path]) -> bool:
    """Whether Spark's Parquet reader tells each column of ``files`` from the others: no two names of a file that
    differ by case alone (``score`` and ``SCORE``: two columns for the local readers, one name for Spark's
    case-insensitive analyzer, which refuses the file). A file pyarrow cannot open is left to Spark's reader (and
    its message)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for f in files:
        try:
            names = pq.read_schema(str(f)).names
        except (pa.ArrowException, OSError):
            continue
        if len({n.lower() for n in names}) < len(names):
            return False
    return True


def read_run_file(spark: Any, source: Any) -> Any:
    """A source Spark reads itself, its columns as stored: Parquet (a file, folder or glob: the files the local
    readers read, in their order), a Delta table at its version, or JSONL (a model's candidates, whose columns the
    local readers do not keep). Paths are given to Spark literally (:func:`literal_path`)."""
    from ...paths import source_problem

    path = source.file
    fmt, files = source_format(source)
    if fmt == "delta":
        return read_delta(spark, path, source.version)
    problem = source_problem(path)
    if problem is not None:
        raise DataError(path, problem + ".")
    if files is not None:  # a folder or glob: the files the local readers read, in their order
        return spark.read.parquet(*[literal_path(f) for f in files])
    if fmt == "parquet":
        return spark.read.parquet(literal_path(path))
    if fmt == "jsonl":  # one JSON object a line; the schema is inferred (integer ids are read as their text)
        try:
            return spark.read.json(literal_path(path), mode="FAILFAST")
        except Exception as exc:
            raise DataError(
                path, f"a line is not a JSON object (Spark's JSON reader: {str(exc).strip().splitlines()[0][:300]})."
            ) from None
    raise DataError(
        path,
        f"the Spark engine reads this source in Parquet, Delta or JSONL; this one is "
        f"{fmt}: convert it to Parquet or evaluate with the local engine.",
    )


def read_delta(spark: Any, path: Path, version: int) -> Any:
    """Version ``version`` of a Delta table: by Spark's Delta data source where the session has it (time travel,
    ``versionAsOf``), else the snapshot's Parquet files resolved on the driver by ``deltalake`` (which refuses
    tables it cannot read that way) and read by ``spark.read.parquet``."""
    from ...paths import source_problem
    from ...readers.delta import snapshot_files

    problem = source_problem(path, delta=True)
    if problem is not None:
        raise DataError(path, problem + ".")
    try:
        df = spark.read.format("delta").option("versionAsOf", version).load(literal_path(path))
        df.schema  # noqa: B018 (resolves the data source now, on Spark Connect too)
        return df
    except Exception as exc:
        if "DATA_SOURCE_NOT_FOUND" not in str(exc) and "delta" not in str(exc).lower():
            raise
    files = snapshot_files(path, version)
    if not files:
        raise DataError(path, f"version {version} of the Delta table holds no files (no rows).")
    return spark.read.parquet(*[literal_path(f) for f in files])
