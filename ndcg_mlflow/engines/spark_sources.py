"""How the Spark engine reads a source: a run or judgments file of the spec (Parquet files, folders and globs,
Delta tables at a version, TREC, CSV, TSV, JSONL) as a DataFrame, the refusal of a malformed line, and the
order-independent content digest of a DataFrame. Used by :mod:`.spark` and :mod:`.spark_judgments`; imports pyspark
lazily, inside its functions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import DataError


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


NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


def column_type_ok(spark_type: str, numeric: bool) -> bool:
    """Whether a column of this Spark type can be read as a number (``numeric``) or as an id (strings or
    integers, read as their decimal text)."""
    if numeric:
        return spark_type in ("tinyint", "smallint", "int", "bigint", "float", "double") or \
            spark_type.startswith("decimal")
    return spark_type in ("string", "tinyint", "smallint", "int", "bigint") or spark_type.startswith("varchar")


def source_format(source: Any) -> tuple[str, list[Path] | None]:
    """A spec source's format as the local readers decide it, and the files of a Parquet folder or glob (None for
    one file)."""
    from ..readers import detect_format
    from ..spec import dataset_files

    files = dataset_files(source.file) if source.format in ("auto", "parquet") else None
    if files is not None:
        return "parquet", files
    return detect_format(source.file, source.format, source.columns), None


def whitespace_fields(spark: Any, path: Path) -> Any:
    """The non-blank lines of a text file as ``line``, ``t`` (the line without the spaces and tabs around it) and
    ``f``, its fields split at runs of spaces and tabs (as the local readers split TREC files); :func:`field`
    takes one of them."""
    from pyspark.sql import functions as F

    lines = spark.read.text(str(path))
    text = F.regexp_replace(F.col("value"), r"^[ \t]+|[ \t\r]+$", "")
    lines = lines.select(F.col("value").alias("line"), text.alias("t")).where(F.col("t") != "")
    return lines.select("line", "t", F.split(F.col("t"), "[ \t]+").alias("f"))


def field(i: int) -> Any:
    """Field ``i`` of :func:`whitespace_fields`' lines (NULL beyond the end: ANSI mode refuses an index out of
    bounds)."""
    from pyspark.sql import functions as F

    return F.get(F.col("f"), i)


def read_run_file(spark: Any, source: Any, rank: bool) -> tuple[Any, bool]:
    """A run file read by Spark: Parquet (file, folder or glob), TREC (``qid Q0 docid rank score tag``), CSV
    or TSV with a header; numbers written as the local readers accept them, else an error naming the line.
    A TREC run's rank is read only when ``rank`` (as locally: only ``ties: displayed_order`` uses it); the
    second value says whether a rank column, if any, was read."""
    from pyspark.sql import functions as F

    from ..spec import shown_path, source_problem

    path = source.file
    fmt, files = source_format(source)
    if files is not None:  # a folder or glob: the files the local readers read, in their order
        problem = source_problem(path)
        if problem is not None:
            raise DataError(shown_path(path), problem + ".")
        return spark.read.parquet(*[str(f) for f in files]), True
    if fmt == "parquet":
        return spark.read.parquet(str(path)), True
    if fmt == "delta":
        return read_delta(spark, path, source.version), True
    if fmt == "jsonl":  # one JSON object a line; the schema is inferred (integer ids are read as their text)
        try:
            return spark.read.json(str(path), mode="FAILFAST"), True
        except Exception as exc:
            raise DataError(path, f"a line is not a JSON object (Spark's JSON reader: "
                                  f"{str(exc).strip().splitlines()[0][:300]}).") from None
    if fmt == "trec":
        parsed = whitespace_fields(spark, path)
        bad = (F.size("f") != 6) | ~field(4).rlike(NUMBER)
        if rank:
            bad = bad | ~field(3).rlike(NUMBER)
        refuse_line(parsed.where(bad), path, "a TREC run line has 6 fields: qid Q0 docid rank score tag, with "
                                               "a decimal score" + (" and rank" if rank else ""))
        return parsed.select(field(0).alias("query_id"), field(2).alias("doc_id"),
                             (field(3).cast("double") if rank else F.lit(None).cast("double")).alias("rank"),
                             field(4).cast("double").alias("score")), rank
    if fmt in ("csv", "tsv"):
        df = spark.read.csv(str(path), header=True, sep="\t" if fmt == "tsv" else ",", inferSchema=False,
                            mode="FAILFAST", enforceSchema=False)
        numeric = [c for c in df.columns if dict(source.columns).get("score", "score") == c
                   or dict(source.columns).get("rank", "rank") == c]
        if numeric:
            conds = [F.col(c).isNull() | ~F.trim(F.col(c)).rlike(NUMBER) for c in numeric]
            bad = conds[0] if len(conds) == 1 else conds[0] | conds[1]
            refuse_line(df.where(bad).select(F.concat_ws("," if fmt == "csv" else "\t", *df.columns).alias("line")),
                         path, f"{' and '.join(numeric)} must be decimal numbers")
            df = df.select(*[F.trim(F.col(c)).cast("double").alias(c) if c in numeric else F.col(c)
                             for c in df.columns])
        return df, True
    raise DataError(path, f"the Spark engine reads runs in Parquet, Delta, TREC, CSV, TSV and JSONL; this one is "
                          f"{fmt}: convert it to Parquet or evaluate with the local engine.")


def read_delta(spark: Any, path: Path, version: int) -> Any:
    """Version ``version`` of a Delta table: by Spark's Delta data source where the session has it (time travel,
    ``versionAsOf``), else the snapshot's Parquet files resolved on the driver by ``deltalake`` (which refuses
    tables it cannot read that way) and read by ``spark.read.parquet``."""
    from ..readers.delta import snapshot_files
    from ..spec import shown_path, source_problem

    problem = source_problem(path, delta=True)
    if problem is not None:
        raise DataError(shown_path(path), problem + ".")
    try:
        df = spark.read.format("delta").option("versionAsOf", version).load(str(path))
        df.schema  # noqa: B018 (resolves the data source now, on Spark Connect too)
        return df
    except Exception as exc:
        if "DATA_SOURCE_NOT_FOUND" not in str(exc) and "delta" not in str(exc).lower():
            raise
    files = snapshot_files(path, version)
    if not files:
        raise DataError(path, f"version {version} of the Delta table holds no files (no rows).")
    return spark.read.parquet(*[str(f) for f in files])


def refuse_line(bad: Any, path: Path, what: str) -> None:
    first = bad.select("line").limit(1).collect()
    if first:
        raise DataError(path, f"{what}; found the line {first[0]['line'][:200]!r}.")
