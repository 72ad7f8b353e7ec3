"""The Spark engine: the same per-query numbers as the local engine, with the runs' rows processed by Spark.

How it works:

* The judgments are read on the driver, by the local readers (a file in the spec) or collected from a Spark
  DataFrame, and checked exactly as the local engine checks them (a document judged twice with different
  grades, non-finite grades, gains that overflow). From them the driver computes, as the local engine does,
  the evaluated query set (the judged queries, or the spec's ``queries.set``), the weights and the judgments
  of the evaluated queries. This assumes the judgments are small next to the runs (judgments are made by
  people or sampled; runs list every returned document): at most :data:`MAX_JUDGMENTS` rows are accepted,
  above that the evaluation stops with an error saying so.
* Each run stays in Spark. Its rows and the evaluated judgments are grouped by a bucket of the query id
  (Spark's ``xxhash64`` of the id's UTF-8 text, modulo the bucket count; integer ids are read as their
  decimal text, as locally), so that every query's rows, run and judged, meet in one bucket. The bucket
  count is the run's rows over :data:`ROWS_PER_BUCKET` (about a million rows a bucket), unless given.
* ``groupBy(bucket).cogroup(...).applyInArrow`` calls, once per bucket, the local per-query join and kernel
  (:func:`ndcg_mlflow.join.judgments`, :func:`~ndcg_mlflow.join.join`, :func:`~ndcg_mlflow.join.compute`)
  on the bucket's rows; both are query-local, so a bucket's queries get the numbers the whole would give.
  The call returns one row per evaluated query of the bucket (every number, per cutoff, and the first
  documents of its list) with explicit Arrow types.
* The per-query rows (one per evaluated query, not per run row) come back to the driver as Arrow and are
  assembled into the same :class:`~ndcg_mlflow.evaluation.EvaluationResult` as the local engine's, so the
  statistics, the report, the output folder and the MLflow logging are those of the local engine.

The run rows are checked as strictly as locally: a null or empty id, a non-finite score, a rank that is not
an integer, a document listed twice for a query, a run sharing no query with the evaluated set. Spark has no
line numbers, so errors name the source and the offending query and document ids. Only DataFrame operations
and Arrow UDFs are used (no ``sparkContext``, RDD or broadcast variable), so the engine runs on Spark Connect.
The executors need ``ndcg_mlflow`` installed (the UDF calls it).

Not yet on this engine (refused with an error): companions (duplicates, catalog coverage), sensitivity,
``keep_data``, ``ties: displayed_order`` without a rank column (Spark keeps no file order), JSONL runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, EvaluationError, SpecError, preview
from ..evaluation import (
    EvaluationResult,
    FileInfo,
    SystemResult,
    TopLists,
    apply_error_rules,
    display_depth,
    evaluated_query_set,
    finish,
    input_table,
    query_weights,
    resolve_spec,
    statistics,
    system_means,
)
from ..join import compute, index_in, join, judgments, map_gains
from ..kernel import STATUS_NAMES, NonFiniteError, QueryResult
from ..readers import Ids, Strings, Table, read_qrels, sha256_file
from ..spec import Metric, Spec

ROWS_PER_BUCKET = 1_000_000
"""Run rows per bucket when the bucket count is chosen from the run's size."""

MAX_JUDGMENTS = 50_000_000
"""Judgments read on the driver at most (the judgments are assumed small next to the runs)."""

RESULT_SCHEMA = (
    "kind string, query_id string, n_returned long, dcg array<double>, idcg array<double>, "
    "idcg_candidates array<double>, ndcg array<double>, judged_coverage array<double>, status array<tinyint>, "
    "top_doc array<string>, top_pos array<long>, top_grade array<double>, "
    "code string, doc_id string, value double, count long, examples array<string>"
)
"""One row per evaluated query of a bucket (kind ``query``), one per bucket (``meta``: the run's queries and
those outside the evaluated set) and one per problem found (``error``)."""

# the errors a bucket reports, in the order the local engine checks them
_ERROR_ORDER = ("null:query_id", "null:doc_id", "null:rank", "null:score", "empty:query_id", "empty:doc_id",
                "nonfinite:score", "rank", "duplicate", "unjudged", "overflow")


def evaluate(spec: str | Path | Mapping[str, Any] | Spec, *, spark: Any = None, qrels: Any = None,
             systems: Mapping[str, Any] | None = None, columns: Mapping[str, str] | None = None,
             base_dir: str | Path | None = None, progress=None, buckets: int | None = None) -> EvaluationResult:
    """Evaluate a spec on Spark: ``spark`` is a SparkSession (classic or Spark Connect; by default the active one).

    ``qrels`` and each value of ``systems`` may be Spark DataFrames (or anything :func:`ndcg_mlflow.evaluate`
    takes); sources left out are read from the spec's data section (runs by Spark: Parquet files, folders and
    globs, TREC, CSV and TSV). ``buckets`` fixes the number of query buckets (default: about
    :data:`ROWS_PER_BUCKET` run rows per bucket).
    """
    if buckets is not None and (isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1):
        raise SpecError("buckets", f"must be a positive integer, got {buckets!r}.")
    spark = _session(spark)
    spec = resolve_spec(spec, qrels, systems, base_dir)
    _refuse_unsupported(spec)
    metric = spec.metric
    shared = dict(columns or {})

    qrels_table, qrels_info = _judgments(spark, spec, qrels, shared)
    files: list[FileInfo] = [qrels_info]
    map_gains(metric.gain, qrels_table.value, qrels_table)
    query_ids = evaluated_query_set(spec, qrels_table, files)
    weights = query_weights(spec, query_ids, files)
    judged_df = _evaluated_judgments(spark, qrels_table, query_ids, metric)

    systems_out: dict[str, SystemResult] = {}
    notes: list[str] = []
    sources = dict(systems) if systems is not None else dict(spec.systems)
    for name, source in sources.items():
        if progress:
            progress(f"reading system '{name}' on Spark")
        run_df, label, info, has_rank = _run_frame(spark, spec, name, source, shared)
        files.append(info)
        n_buckets = buckets or max(1, math.ceil(info.rows / ROWS_PER_BUCKET))
        if progress:
            progress(f"computing nDCG of '{name}' on Spark ({n_buckets} query buckets)")
        rows = _bucket_results(run_df, judged_df, n_buckets, name, label, metric, has_rank)
        systems_out[name] = _assemble(name, label, metric, rows, query_ids, weights, notes)
    result = finish(spec, query_ids, weights, systems_out, files, notes, qrels_table, engine="spark")
    return statistics(result, progress)


def session(remote: str | None = None) -> Any:
    """A SparkSession: on the Spark Connect server ``remote`` (``sc://host:15002``), else the classic session
    that spark-submit or the environment configures (``local[*]`` by default)."""
    _session(False)
    from pyspark.sql import SparkSession

    if remote:
        return SparkSession.builder.remote(remote).getOrCreate()
    return SparkSession.builder.appName("ndcg-mlflow").getOrCreate()


def _session(spark: Any) -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EvaluationError("the Spark engine needs pyspark: pip install 'ndcg-mlflow[spark]' (and Java 17; "
                              "check with java -version).") from None
    if spark is False:  # only checking that pyspark is there
        return None
    if spark is None:
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise EvaluationError("the Spark engine needs a SparkSession: pass spark=session (or start one "
                                  "before evaluating).")
    return spark


def _refuse_unsupported(spec: Spec) -> None:
    if spec.companions is not None:
        raise SpecError("companions", "companions (duplicates, catalog coverage) are not computed by the Spark "
                                      "engine yet; evaluate this spec with the local engine.")
    if spec.sensitivity:
        raise SpecError("report.sensitivity", "sensitivity is not computed by the Spark engine yet; evaluate this "
                                              "spec with the local engine.")


def _is_spark_frame(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.startswith("pyspark.sql") and type(obj).__name__ == "DataFrame"


# --------------------------------------------------------------------------- judgments, on the driver


def _judgments(spark: Any, spec: Spec, qrels: Any, shared: dict[str, str]) -> tuple[Table, FileInfo]:
    from ..spec import IN_MEMORY

    if qrels is None:
        table = read_qrels(spec.qrels.file, spec.qrels.format, spec.qrels.columns)
        _check_judgment_count(len(table), spec.qrels.declared)
        return table, FileInfo("qrels", str(spec.qrels.path), spec.qrels.declared, sha256_file(spec.qrels.file),
                               len(table))
    obj, mapping = qrels, shared
    if isinstance(qrels, tuple) and len(qrels) == 2 and isinstance(qrels[1], Mapping):
        obj, mapping = qrels[0], {**shared, **qrels[1]}
    if _is_spark_frame(obj):
        n = obj.limit(MAX_JUDGMENTS + 1).count()
        _check_judgment_count(n, "qrels")
        obj = obj.toArrow()
    table = input_table((obj, mapping), "qrels", "qrels", {})
    _check_judgment_count(len(table), "qrels")
    return table, FileInfo("qrels", "", IN_MEMORY, table.digest or "", len(table))


def _check_judgment_count(n: int, label: str) -> None:
    if n > MAX_JUDGMENTS:
        raise DataError(label, f"more than {MAX_JUDGMENTS:,} judgments: the Spark engine reads the judgments on "
                               f"the driver (it assumes they are small next to the runs); this many is beyond "
                               f"that limit.")


def _evaluated_judgments(spark: Any, qrels: Table, query_ids: np.ndarray, metric: Metric) -> Any:
    """The judgments of the evaluated queries as a Spark DataFrame (query_id, doc_id, grade), after the local
    checks of the whole (gains whose sums overflow stop here, naming the query and line)."""
    import pyarrow as pa

    judgments(qrels, query_ids, metric)  # the checks of the local engine, on all the evaluated judgments
    keep = index_in(qrels.query.values, query_ids)[qrels.query.codes] >= 0
    values = pa.array(list(qrels.query.values), type=pa.string())
    table = pa.table({
        "query_id": values.take(pa.array(qrels.query.codes[keep], type=pa.int32())),
        "doc_id": _plain(qrels.doc.array.filter(pa.array(keep))),
        "grade": pa.array(qrels.value[keep], type=pa.float64()),
    })
    return spark.createDataFrame(table)


def _plain(array: Any) -> Any:
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.cast(pa.string())


# --------------------------------------------------------------------------- runs, in Spark


def _run_frame(spark: Any, spec: Spec, name: str, source: Any,
               shared: dict[str, str]) -> tuple[Any, str, FileInfo, bool]:
    """A system's rows as a DataFrame of query_id, doc_id (strings), score and rank (doubles; rank all NULL when
    the source has none), its label for errors, its file information and whether it has ranks."""
    from pyspark.sql import functions as F

    from ..readers.columns import required_columns
    from ..spec import IN_MEMORY

    label = f"systems[{name!r}]"
    mapping = shared
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], Mapping):
        source, mapping = source[0], {**shared, **source[1]}
    ranked = True  # the source's rank column, when it has one, is read
    if _is_spark_frame(source):
        df, path, declared = source, "", IN_MEMORY
    elif hasattr(source, "declared") and getattr(source, "path", None) is not None:  # a spec Source
        df, ranked = _read_run_file(spark, source, spec.metric.ties == "displayed_order")
        label = str(source.path)
        path, declared, mapping = str(source.path), source.declared, dict(source.columns)
    else:  # an in-memory table of another library: checked locally, then handed to Spark
        import pyarrow as pa

        t = input_table((source, mapping), "run", label, {})
        cols = {"query_id": pa.array(list(t.query.values), type=pa.string()).take(pa.array(t.query.codes)),
                "doc_id": _plain(t.doc.array), "score": pa.array(t.value, type=pa.float64())}
        if t.rank is not None:
            cols["rank"] = pa.array(t.rank, type=pa.float64())
        df = spark.createDataFrame(pa.table(cols))
        return df, label, FileInfo(f"system:{name}", "", IN_MEMORY, t.digest or "", len(t)), t.rank is not None

    unknown = [k for k in mapping if k not in ("query_id", "doc_id", "grade", "score", "rank")]
    if unknown:
        raise SpecError("columns", f"unknown column {unknown[0]!r}; a column mapping names query_id, doc_id, "
                                   f"grade, score or rank.")
    inverse = {v: k for k, v in mapping.items() if k in ("query_id", "doc_id", "score", "rank")}
    present = [inverse.get(c, c) for c in df.columns]
    value_col, rank_col, _ = required_columns("run", present, label, None)
    types = dict(df.dtypes)
    selected = []
    for c in ("query_id", "doc_id", value_col, rank_col):
        if c is None:
            continue
        src = mapping.get(c, c)
        t = types[src]
        if c in ("query_id", "doc_id"):
            if t not in ("string", "tinyint", "smallint", "int", "bigint") and not t.startswith("varchar"):
                raise DataError(label, f"column {c} must hold strings (or integers), found {t}.")
            selected.append(F.col(src).cast("string").alias(c))
        else:
            if t not in ("tinyint", "smallint", "int", "bigint", "float", "double") and not t.startswith("decimal"):
                raise DataError(label, f"column {c} must be numeric (an integer or floating-point type), found {t}.")
            selected.append(F.col(src).cast("double").alias(c))
    df = df.select(*selected)
    if value_col is None:
        df = df.withColumn("score", -F.col("rank"))
    if spec.metric.ties == "displayed_order" and rank_col is None:
        raise SpecError("metric.ties", f"{label} has no rank column, and ties: displayed_order then means the "
                                       f"rows' order, which Spark does not keep; give a rank column or another "
                                       f"tie rule.")
    if rank_col is None:
        df = df.withColumn("rank", F.lit(None).cast("double"))
    digest = _digest(df) if declared == IN_MEMORY else None
    rows = digest[1] if digest else df.count()
    sha = digest[0] if digest else sha256_file(path)
    has_rank = rank_col is not None and ranked
    return df, label, FileInfo(f"system:{name}", path, declared, sha, rows), has_rank


def _digest(df: Any) -> tuple[str, int]:
    """An order-independent content digest of a run DataFrame (the sum of its rows' xxhash64) and its rows."""
    from pyspark.sql import functions as F

    h = F.xxhash64("query_id", "doc_id", "score", "rank").cast("decimal(38,0)")
    row = df.agg(F.sum(h).alias("h"), F.count(F.lit(1)).alias("n")).collect()[0]
    total = int(row["h"] or 0) % (1 << 64)
    return f"xxhash64-sum:{total:016x}", int(row["n"])


_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


def _read_run_file(spark: Any, source: Any, rank: bool) -> tuple[Any, bool]:
    """A run file read by Spark: Parquet (file, folder or glob), TREC (``qid Q0 docid rank score tag``), CSV
    or TSV with a header; numbers written as the local readers accept them, else an error naming the line.
    A TREC run's rank is read only when ``rank`` (as locally: only ``ties: displayed_order`` uses it); the
    second value says whether a rank column, if any, was read."""
    from pyspark.sql import functions as F

    from ..readers import detect_format

    path = source.file
    fmt = detect_format(path, source.format, source.columns)
    if fmt == "parquet":
        return spark.read.parquet(str(path)), True
    if fmt == "trec":
        lines = spark.read.text(str(path))
        text = F.regexp_replace(F.col("value"), r"^[ \t]+|[ \t\r]+$", "")
        lines = lines.select(F.col("value").alias("line"), text.alias("t")).where(F.col("t") != "")
        fields = F.split(F.col("t"), "[ \t]+")
        parsed = lines.select("line", fields.alias("f"))
        def field(i):  # NULL beyond the end (ANSI mode refuses an index out of bounds)
            return F.get(F.col("f"), i)

        bad = (F.size("f") != 6) | ~field(4).rlike(_NUMBER)
        if rank:
            bad = bad | ~field(3).rlike(_NUMBER)
        _refuse_line(parsed.where(bad), path, "a TREC run line has 6 fields: qid Q0 docid rank score tag, with "
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
            conds = [F.col(c).isNull() | ~F.trim(F.col(c)).rlike(_NUMBER) for c in numeric]
            bad = conds[0] if len(conds) == 1 else conds[0] | conds[1]
            _refuse_line(df.where(bad).select(F.concat_ws("," if fmt == "csv" else "\t", *df.columns).alias("line")),
                         path, f"{' and '.join(numeric)} must be decimal numbers")
            df = df.select(*[F.trim(F.col(c)).cast("double").alias(c) if c in numeric else F.col(c)
                             for c in df.columns])
        return df, True
    raise DataError(path, f"the Spark engine reads runs in Parquet, TREC, CSV and TSV; this one is {fmt}: convert "
                          f"it to Parquet or evaluate with the local engine.")


def _refuse_line(bad: Any, path: Path, what: str) -> None:
    first = bad.select("line").limit(1).collect()
    if first:
        raise DataError(path, f"{what}; found the line {first[0]['line'][:200]!r}.")


# --------------------------------------------------------------------------- per bucket, in the executors


def _bucket_results(run_df: Any, judged_df: Any, n_buckets: int, name: str, label: str, metric: Metric,
                    has_rank: bool) -> Any:
    """Every evaluated query's numbers (one Arrow row per query), error and meta rows, collected."""
    from pyspark.sql import functions as F

    def bucketed(df):
        return df.withColumn("_bucket", F.pmod(F.xxhash64(F.col("query_id")), F.lit(n_buckets)))

    depth = display_depth(metric)

    def per_bucket(run, judged):
        return bucket_rows(run, judged, name, label, metric, depth, has_rank)

    out = bucketed(run_df).groupBy("_bucket").cogroup(bucketed(judged_df).groupBy("_bucket")).applyInArrow(
        per_bucket, RESULT_SCHEMA)
    return out.toArrow()


def _result_type() -> Any:
    import pyarrow as pa

    d = pa.list_(pa.float64())
    return pa.schema([("kind", pa.string()), ("query_id", pa.string()), ("n_returned", pa.int64()), ("dcg", d),
                      ("idcg", d), ("idcg_candidates", d), ("ndcg", d), ("judged_coverage", d),
                      ("status", pa.list_(pa.int8())), ("top_doc", pa.list_(pa.string())),
                      ("top_pos", pa.list_(pa.int64())), ("top_grade", d), ("code", pa.string()),
                      ("doc_id", pa.string()), ("value", pa.float64()), ("count", pa.int64()),
                      ("examples", pa.list_(pa.string()))])


def _rows(records: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    schema = _result_type()
    return pa.Table.from_pylist([{f: r.get(f) for f in schema.names} for r in records], schema=schema)


def _error(code: str, query: str | None, doc: str | None, count: int, value: float | None = None) -> dict[str, Any]:
    return {"kind": "error", "code": code, "query_id": query, "doc_id": doc, "count": count, "value": value}


def bucket_rows(run: Any, judged: Any, name: str, label: str, metric: Metric, depth: int, has_rank: bool) -> Any:
    """One bucket: its run rows and evaluated judgments (pyarrow Tables) -> result rows (:data:`RESULT_SCHEMA`).

    The bucket's evaluated queries are the queries of its judgments (every evaluated query is judged);
    each gets one row, computed by the local join and kernel."""
    import pyarrow as pa
    import pyarrow.compute as pc

    errors = _run_errors(run, has_rank)
    if errors:
        return _rows(errors)
    q_col = _plain(run.column("query_id"))
    run_queries = pc.unique(q_col)
    jq = _plain(judged.column("query_id"))
    bucket_ids = np.empty(0, dtype=object)
    if judged.num_rows:
        bucket_ids = np.asarray(sorted(pc.unique(jq).to_pylist()), dtype=object)
    unknown = sorted(set(run_queries.to_pylist()) - set(bucket_ids.tolist()))
    meta = {"kind": "meta", "count": len(unknown), "value": float(len(run_queries)),
            "examples": (unknown or sorted(run_queries.to_pylist()))[:3]}
    if not bucket_ids.size:
        return _rows([meta])
    qrels = _local_table("qrels", "qrels", jq, judged.column("grade"), None, judged.column("doc_id"))
    rank = run.column("rank") if has_rank else None
    run_table = _local_table(label, "run", q_col, run.column("score"), rank, run.column("doc_id"))
    judged_index = judgments(qrels, bucket_ids, metric)
    prep, _ = join(name, run_table, judged_index)
    if metric.unjudged == "error" and not prep.judged.all():
        bad = np.flatnonzero(~prep.judged)
        first = int(prep.original(bad[:1])[0])
        return _rows([_error("unjudged", run_table.query.row(first), run_table.doc.row(first), int(bad.size))])
    try:
        qr = compute(metric, prep, judged_index.catalog)
    except NonFiniteError as exc:
        return _rows([_error("overflow", str(bucket_ids[exc.queries[0]]), None, int(exc.queries.size))])
    rows_top, pos_top = qr.top(depth)
    tq = prep.query[rows_top]
    order = np.lexsort((pos_top, tq))
    tq, tr, tp = tq[order], rows_top[order], pos_top[order]
    docs = prep.run.doc.take(prep.original(tr))
    grades = prep.grade[tr]
    bounds = np.searchsorted(tq, np.arange(bucket_ids.size + 1))
    return pa.concat_tables([_rows([meta]), _query_rows(bucket_ids, qr, docs, tp, grades, bounds)])


def _query_rows(ids: np.ndarray, qr: QueryResult, docs: list[str], pos: np.ndarray, grades: np.ndarray,
                bounds: np.ndarray) -> Any:
    """The ``query`` rows of a bucket, built column by column (no Python object per query)."""
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
        "dcg": cut(qr.dcg, pa.float64()), "idcg": cut(qr.idcg, pa.float64()),
        "idcg_candidates": cut(qr.idcg_candidates, pa.float64()), "ndcg": cut(qr.ndcg, pa.float64()),
        "judged_coverage": cut(qr.judged_coverage, pa.float64()), "status": cut(qr.status.astype(np.int8), pa.int8()),
        "top_doc": pa.ListArray.from_arrays(top_at, pa.array(docs, type=pa.string())),
        "top_pos": pa.ListArray.from_arrays(top_at, pa.array(pos.astype(np.int64))),
        "top_grade": pa.ListArray.from_arrays(top_at, pa.array(grades.astype(np.float64))),
    }
    schema = _result_type()
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, type=f.type)) for f in schema}, schema=schema)


def _local_table(label: str, kind: str, query: Any, value: Any, rank: Any, doc: Any = None) -> Table:
    """A bucket's rows as the readers' :class:`~ndcg_mlflow.readers.Table` (already checked)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(query):
        enc = pc.dictionary_encode(query)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        ids = Ids(enc.indices.to_numpy(zero_copy_only=False).astype(np.int32),
                  np.asarray(enc.dictionary.to_pylist(), dtype=object))
    else:
        ids = Ids(np.zeros(0, dtype=np.int32), np.empty(0, dtype=object))
    docs = Strings(_plain(doc)) if doc is not None else Strings(pa.array([], type=pa.string()))
    numbers = np.asarray(pc.cast(value, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    ranks = None if rank is None else np.asarray(pc.cast(rank, pa.float64()).to_numpy(zero_copy_only=False),
                                                 dtype=np.float64)
    return Table(label, kind, ids, docs, numbers, ranks, "table")


def _run_errors(run: Any, has_rank: bool) -> list[dict[str, Any]]:
    """The first problem of a bucket's run rows, by the local engine's order of checks (none: empty list)."""
    import pyarrow.compute as pc

    q = _plain(run.column("query_id"))
    d = _plain(run.column("doc_id"))

    def first(mask: Any) -> tuple[str | None, str | None, int]:
        m = np.asarray(mask, dtype=bool)
        at = np.flatnonzero(m)
        if not at.size:
            return None, None, 0
        # the smallest (query, doc) among the offending rows, so that the error is the same whatever the buckets
        pairs = sorted(zip(q.take(at).to_pylist(), d.take(at).to_pylist()), key=lambda p: (p[0] is not None,
                       p[0] or "", p[1] is not None, p[1] or ""))
        return pairs[0][0], pairs[0][1], int(at.size)

    def null(col):
        return col.is_null().to_numpy(zero_copy_only=False)

    checked = [("query_id", q), ("doc_id", d)] + ([("rank", run.column("rank"))] if has_rank else [])
    for c, col in checked + [("score", run.column("score"))]:
        qq, dd, n = first(null(col))
        if n:
            return [_error(f"null:{c}", qq, dd, n)]
    for c, col in (("query_id", q), ("doc_id", d)):
        qq, dd, n = first(pc.fill_null(pc.equal(pc.utf8_length(col), 0), False).to_numpy(zero_copy_only=False))
        if n:
            return [_error(f"empty:{c}", qq, dd, n)]
    score = run.column("score").to_numpy(zero_copy_only=False).astype(np.float64)
    bad = ~np.isfinite(score)
    qq, dd, n = first(bad)
    if n:
        value = float(score[np.flatnonzero(bad)[0]])
        return [_error("nonfinite:score", qq, dd, n, value)]
    if has_rank:
        rank = np.asarray(run.column("rank").to_numpy(zero_copy_only=False), dtype=np.float64)
        qq, dd, n = first(~np.isfinite(rank) | (rank != np.round(rank)))
        if n:
            return [_error("rank", qq, dd, n)]
    from ..readers import duplicate_pairs

    table = _local_table("run", "run", q, run.column("score"), None, d)
    _, later = duplicate_pairs(table)
    if later.size:
        qq, dd, n = first(np.isin(np.arange(len(q)), later))
        return [_error("duplicate", qq, dd, n)]
    return []


# --------------------------------------------------------------------------- back on the driver


def _message(code: str, query: str | None, doc: str | None, count: int, value: float | None, metric: Metric) -> str:
    where = f"query {query!r}, document {doc!r}"
    if code.startswith("null:"):
        c = code.split(":")[1]
        return (f"{c} is null in {count} rows (e.g. the row of {where}); every row needs a {c} (nulls are refused "
                f"in every format).")
    if code.startswith("empty:"):
        c = code.split(":")[1]
        return f"{c} is empty in {count} rows (e.g. the row of {where}); every row needs a {c}."
    if code == "nonfinite:score":
        return (f"score must be a finite number, got {value} for {where} (NaN, an infinity, or a value beyond the "
                f"range of a double; {count} rows in all).")
    if code == "rank":
        return f"rank must be an integer, not so for {where} ({count} rows in all)."
    if code == "duplicate":
        return (f"document {doc!r} is listed twice for query {query!r} ({count} repeated rows in all); a ranking "
                f"holds each document once.")
    if code == "unjudged":
        return (f"document {doc!r} returned for query {query!r} has no judgment, and metric.unjudged is 'error' "
                f"({count} unjudged returned documents in all).")
    return (f"the nDCG of query {query!r} (its DCG over its ideal DCG) overflows a float: the gains of metric.gain "
            f"{metric.gain.describe()} differ too much in size.")


def _assemble(name: str, label: str, metric: Metric, table: Any, query_ids: np.ndarray, weights: np.ndarray,
              notes: list[str]) -> SystemResult:
    """One system's :class:`SystemResult` from the buckets' rows, checked as the local engine checks."""
    import pyarrow.compute as pc

    errors = table.filter(pc.equal(table.column("kind"), "error")).to_pylist()
    if errors:
        errors.sort(key=lambda e: (_ERROR_ORDER.index(e["code"]), e["query_id"] or "", e["doc_id"] or ""))
        e = errors[0]
        count = sum(x["count"] for x in errors if x["code"] == e["code"])
        message = _message(e["code"], e["query_id"], e["doc_id"], count, e["value"], metric)
        if e["code"] in ("unjudged", "overflow"):
            raise EvaluationError(f"{label}: {message}") if e["code"] == "unjudged" else \
                DataError("qrels", f"system '{name}': {message}")
        raise DataError(label, message)
    meta = table.filter(pc.equal(table.column("kind"), "meta")).to_pylist()
    rows = table.filter(pc.equal(table.column("kind"), "query"))
    nq, nc = len(query_ids), len(metric.cutoffs)
    got = rows.column("query_id").to_pylist()
    at = index_in(np.asarray(got, dtype=object), query_ids)
    if len(got) != nq or (at < 0).any() or np.unique(at).size != nq:
        raise EvaluationError(f"internal error: the Spark buckets gave {len(got)} query rows for {nq} evaluated "
                              f"queries of system '{name}'.")

    def flat(col: str, dtype: Any) -> np.ndarray:
        return np.asarray(pc.list_flatten(rows.column(col)).to_numpy(zero_copy_only=False), dtype=dtype)

    def matrix(col: str, dtype: Any) -> np.ndarray:
        out = np.empty((nq, nc), dtype=dtype)
        out[at] = flat(col, dtype).reshape(len(got), nc)
        return out

    n_returned = np.empty(nq, dtype=np.int64)
    n_returned[at] = rows.column("n_returned").to_numpy(zero_copy_only=False)
    qr = QueryResult(dcg=matrix("dcg", np.float64), idcg=matrix("idcg", np.float64),
                     idcg_candidates=matrix("idcg_candidates", np.float64), ndcg=matrix("ndcg", np.float64),
                     judged_coverage=matrix("judged_coverage", np.float64), status=matrix("status", np.int8),
                     n_returned=n_returned)
    run_queries = int(sum(m["value"] for m in meta))
    unknown = int(sum(m["count"] for m in meta))
    if not n_returned.any():
        examples = sorted(x for m in meta for x in (m["examples"] or []))[:3]
        raise EvaluationError(
            f"system '{name}' ({label}) returns none of the {nq} evaluated queries (its {run_queries} queries, e.g. "
            f"{preview(examples)}, are all outside the set): is it the run of another collection?")
    if unknown:
        notes.append(f"{name}: {unknown} queries of the run are not in the evaluated set and were ignored")
    apply_error_rules(name, Path(label), metric, qr, query_ids)
    lengths = np.asarray(pc.list_value_length(rows.column("top_pos")).to_numpy(zero_copy_only=False), dtype=np.int64)
    q_all = np.repeat(at, lengths)
    pos_all = flat("top_pos", np.int64)
    order = np.lexsort((pos_all, q_all))
    docs = pc.list_flatten(rows.column("top_doc")).take(order).to_pylist()
    top = TopLists(display_depth(metric), q_all[order], pos_all[order], docs, flat("top_grade", np.float64)[order])
    return SystemResult(name, qr, system_means(metric, qr, weights), top)


__all__ = ["evaluate", "bucket_rows", "ROWS_PER_BUCKET", "MAX_JUDGMENTS", "RESULT_SCHEMA", "STATUS_NAMES"]
