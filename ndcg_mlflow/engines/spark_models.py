"""Model systems scored on Spark: ``data.systems.<name>: {model: URI, candidates: SOURCE}`` with the Spark engine.

Every model URI is resolved once, on the driver, before any Spark job, exactly as the local engine resolves it
(:func:`ndcg_mlflow.models.resolve_model_systems`: an alias becomes the version it points to, and that version
is what is scored and recorded). The candidates are read by Spark as a run is (a Parquet file, folder or glob, a
Delta table at its version, JSONL; CSV, TSV and TREC are refused: Spark would read the model's input columns as
text) and scored by ``mlflow.pyfunc.spark_udf(spark, uri, env_manager="local", result_type="double")`` on the
model's input columns (its signature's; every column without a signature, as locally). The scored rows
(``query_id, doc_id, score``) are written by Spark as a Parquet folder, ``<folder>/systems/<stem>.scored.parquet``
(part files, one per task: no single task gathers the rows), checked (a score that is NULL, NaN or infinite is
refused, naming the query and document), and that folder is the system's run from then on: the Spark engine
reads it as any run folder, and its digest is the sha256 of its part files in order, as for any Parquet folder.

The executors load the model from the copy ``spark_udf`` ships with the job (``env_manager="local"``: the
executors' Python must have the model's dependencies), and the folder is written at a path both the driver and
Spark can reach (local mode, a Spark Connect server on the same machine, or a shared mount). A model returning
ranked lists of doc ids (a retriever) is scored by the local engine only. mlflow and pyspark are imported
lazily, inside the functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import DataError, NdcgError, SpecError
from ..models import ResolvedModel, check_input_columns, resolve_model_systems, scored_name, using_store, with_scored
from ..spec import Spec

SPARK_FORMATS = ("parquet", "delta", "jsonl")
"""The candidates' formats scored on Spark (Spark reads the input columns' types from them)."""


def score_model_systems(spark: Any, spec: Spec, folder: str | Path, *, tracking_uri: str | None = None,
                        progress: Callable[[str], None] | None = None,
                        resolved: dict[str, ResolvedModel] | None = None,
                        ) -> tuple[Spec, dict[str, ResolvedModel], dict[str, Path]]:
    """Score every model system of ``spec`` on Spark into ``folder/systems/<stem>.scored.parquet`` (a folder of
    Parquet part files); returns the spec whose model systems read those folders, what each URI resolved to
    (``resolved`` when given: the URIs already resolved, else resolved here before any Spark job), and the
    folders."""
    names = [name for name, src in spec.systems if src.unscored]
    if not names:
        return spec, {}, {}
    if resolved is None:
        resolved = resolve_model_systems(spec, tracking_uri)
    resolved = dict(resolved)
    scored: dict[str, Path] = {}
    for name in names:
        target = Path(folder) / scored_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        rows = score_candidates(spark, spec, name, resolved[name], target, tracking_uri=tracking_uri,
                                progress=progress)
        spec, resolved[name] = with_scored(spec, name, resolved[name], candidate_rows=rows, scored_rows=rows,
                                           target=target)
        scored[name] = target
    return spec, resolved, scored


def signature_columns(uri: str, key: str, tracking_uri: str | None) -> tuple[list[str] | None, bool]:
    """The model's input column names from its signature (None without one, or without names), and whether its
    signature declares a list output (a retriever); read from the model's metadata, without loading it."""
    from mlflow.models import get_model_info

    try:
        with using_store(tracking_uri):
            info = get_model_info(uri)
    except Exception as exc:  # noqa: BLE001 - any failure to read the model's metadata is the model's
        raise NdcgError(f"at key '{key}': cannot read the metadata of {uri}: {type(exc).__name__}: "
                        f"{_first_line(str(exc))}") from None
    sig = info.signature
    if sig is None:
        return None, False
    names = list(sig.inputs.input_names()) if sig.inputs is not None and sig.inputs.has_input_names() else None
    outputs = getattr(sig.outputs, "inputs", None) or []
    listed = any(type(getattr(c, "type", None)).__name__ == "Array" for c in outputs)
    return names, listed


def score_candidates(spark: Any, spec: Spec, name: str, resolved: ResolvedModel, target: Path, *,
                     tracking_uri: str | None = None, progress: Callable[[str], None] | None = None) -> int:
    """Score the candidates of model system ``name`` with ``spark_udf`` and write the scored rows to ``target``
    (a Parquet folder); returns their number (one scored row per candidate row). Errors name the model and the
    candidates: columns the model needs that the candidates lack, a model that fails or returns other than one
    number per row, a score that is not finite."""
    import mlflow.pyfunc
    from pyspark.sql import functions as F

    from ..readers import detect_format
    from .spark import read_source

    key = f"data.systems.{name}"
    src = dict(spec.systems)[name].candidates
    assert src is not None
    path = src.file
    fmt = "parquet" if src.format in ("auto", "parquet") and _is_dataset(path) else \
        detect_format(path, src.format, src.columns)
    if fmt not in SPARK_FORMATS:
        raise DataError(path, f"the Spark engine scores candidates in Parquet (a file, folder or glob), Delta or "
                              f"JSONL, which keep the model's input types; these are {fmt}: convert them to Parquet "
                              f"or evaluate with the local engine.")
    uri = resolved.loaded_uri
    wanted, listed = signature_columns(uri, f"{key}.model", tracking_uri)
    if listed:
        raise SpecError(f"{key}.model", f"{uri} returns ranked lists of doc ids (its signature's output is a list): "
                                        f"a retriever is scored by the local engine only; evaluate without "
                                        f"engine spark.")
    mapping = dict(src.columns)
    qcol, dcol = mapping.get("query_id", "query_id"), mapping.get("doc_id", "doc_id")
    if progress:
        progress(f"scoring '{name}' with {uri} on Spark (mlflow.pyfunc.spark_udf)")
    df = read_source(spark, src)
    check_input_columns(name, resolved, path, list(df.columns), wanted, qcol)
    if dcol not in df.columns:
        raise DataError(path, f"the candidates lack the column {dcol!r}: a model returning one score per row "
                              f"scores (query_id, doc_id) rows.")
    try:
        with using_store(tracking_uri):
            udf = mlflow.pyfunc.spark_udf(spark, uri, env_manager="local", result_type="double")
    except Exception as exc:  # noqa: BLE001 - any failure to load is the model's
        raise NdcgError(f"at key '{key}': cannot load {uri} for Spark: {type(exc).__name__}: "
                        f"{_first_line(str(exc))}") from None
    # with a signature, its input columns in its order; without one, every column by name (as one struct: the
    # model gets a frame with the candidates' column names, as locally)
    score = udf(*[F.col(c) for c in wanted]) if wanted else udf(F.struct(*[F.col(c) for c in df.columns]))
    scored = df.select(F.col(qcol).cast("string").alias("query_id"), F.col(dcol).cast("string").alias("doc_id"),
                       score.alias("score"))
    try:
        scored.write.mode("overwrite").parquet(str(target))
    except Exception as exc:  # noqa: BLE001 - the model's failure inside a Spark task, said in one line
        raise NdcgError(f"at key '{key}': {uri} failed on Spark while scoring the candidates {path}: "
                        f"{python_error(str(exc))} (a ranker returns one finite score per row; a retriever's "
                        f"ranked lists are scored by the local engine only).") from None
    written = spark.read.parquet(str(target))
    value = F.col("score")
    bad = written.where(value.isNull() | F.isnan(value) | (F.abs(value) == float("inf")))
    first = bad.limit(1).collect()
    if first:
        count = bad.count()
        row = first[0]
        shown = "NULL" if row["score"] is None else repr(row["score"])
        raise DataError(path, f"{uri} returned {shown} for query {row['query_id']!r}, doc {row['doc_id']!r} and "
                              f"{count - 1} more non-finite scores (scored on Spark); every score must be a finite "
                              f"number.")
    rows = int(written.count())
    if rows == 0:
        raise DataError(path, f"the candidates of system '{name}' hold no rows.")
    if progress:
        progress(f"scored '{name}' on Spark: {rows:,} candidate rows")
    return rows


def _is_dataset(path: Path) -> bool:
    from ..spec import dataset_files

    return dataset_files(path) is not None


_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")
_WRAPPERS = ("PythonException", "Py4JJavaError", "SparkException", "SparkRuntimeException",
             "org.apache.spark.SparkException", "pyspark.errors.exceptions.captured.PythonException",
             "org.apache.spark.api.python.PythonException")


def python_error(text: str) -> str:
    """The innermost Python error of a failed Spark task's message (``ValueError: ...``), else its first line."""
    found = [m for m in (_ERROR_LINE.match(line) for line in text.splitlines()) if m]
    inner = [m for m in found if m.group(1).rsplit(".", 1)[-1] not in {w.rsplit(".", 1)[-1] for w in _WRAPPERS}]
    if inner:
        return f"{inner[-1].group(1).rsplit('.', 1)[-1]}: {inner[-1].group(2).strip()[:300]}"
    return _first_line(text)


def _first_line(text: str) -> str:
    from ..uris import redact

    lines = redact(text).strip().splitlines()
    return lines[0][:300] if lines else "(no message)"
