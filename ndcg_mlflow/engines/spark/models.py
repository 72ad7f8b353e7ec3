"""Model systems scored on Spark: ``data.systems.<name>: {model: URI, candidates: SOURCE}`` with the Spark engine.

Every model URI is resolved once, on the driver, before any Spark job, exactly as the local engine resolves it
(:func:`ndcg_mlflow.tracking.registry.resolve_model_systems`: an alias becomes the version it points to, and that
version is what is scored and recorded). The candidates are read by Spark as a run is (a Parquet file, folder or glob, a
Delta table at its version, JSONL; CSV, TSV and TREC are refused: Spark would read the model's input columns as
text) and scored by ``mapInPandas`` on the model's input columns (its signature's; every column without a signature,
as locally): each Python worker loads the model once (``mlflow.pyfunc.load_model``) and reads each batch's output
by :func:`ndcg_mlflow.models.predictions.read_predictions`, the local engine's rule (a refusal is the local engine's
DataError, naming the model and the candidates). The scored rows (``query_id, doc_id, score``) are written by Spark
as a Parquet folder, ``<folder>/systems/<stem>.scored.parquet`` (part files, one per task: no single task gathers
the rows), checked (a score that is NULL, NaN or infinite is refused, naming the query and document), and that
folder is the system's run from then on: the Spark engine reads it as any run folder, and its digest is the
sha256 of its part files in order, as for any Parquet folder.

The model is downloaded once by the driver into a folder beside the scored rows, removed after scoring, and the
executors load it from there (their Python must have the model's dependencies and ``ndcg_mlflow``): the folder is
at a path both the driver and Spark can reach (local mode, a Spark Connect server on the same machine, or a shared
mount). A model returning ranked lists of doc ids (a retriever) is scored by the local engine only. pyspark is
imported lazily, inside the functions; mlflow only by :mod:`ndcg_mlflow.tracking.registry` (the signature, the
download, the load).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import DataError, NdcgError, SpecError
from ...models.systems import (
    ResolvedModel,
    candidate_ids,
    check_input_columns,
    non_finite_message,
    scored_name,
    with_scored,
)
from ...paths import shown_path
from ...spec import Spec
from ...tracking.registry import download_model, local_model, resolve_model_systems, signature_columns
from ...uris import first_line
from .sources import read_run_file, source_format

SPARK_FORMATS = ("parquet", "delta", "jsonl")
"""The candidates' formats scored on Spark (Spark reads the input columns' types from them)."""


def score_model_systems(
    spark: Any,
    spec: Spec,
    folder: str | Path,
    *,
    tracking_uri: str | None = None,
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
        rows = score_candidates(spark, spec, name, resolved[name], target, tracking_uri=tracking_uri, progress=progress)
        spec, resolved[name] = with_scored(
            spec, name, resolved[name], candidate_rows=rows, scored_rows=rows, target=target
        )
        scored[name] = target
    return spec, resolved, scored


def score_candidates(
    spark: Any,
    spec: Spec,
    name: str,
    resolved: ResolvedModel,
    target: Path,
    *,
    tracking_uri: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Score the candidates of model system ``name`` on Spark and write the scored rows to ``target`` (a Parquet
    folder); returns their number (one scored row per candidate row). The model is downloaded once, next to
    ``target``, and loaded by each Python worker; each batch's output is read by
    :func:`ndcg_mlflow.models.predictions.read_predictions` on the executor, the local engine's rule. Errors name the
    model and the candidates: columns the model needs that the candidates lack, a model that fails or returns
    other than one number per row, a score that is not finite."""
    from pyspark.sql import functions as F

    key = f"data.systems.{name}"
    src = dict(spec.systems)[name].candidates
    assert src is not None
    path = src.file
    fmt = source_format(src)[0]
    if fmt not in SPARK_FORMATS:
        raise DataError(
            path,
            f"the Spark engine scores candidates in Parquet (a file, folder or glob), Delta or "
            f"JSONL, which keep the model's input types; these are {fmt}: convert them to Parquet "
            f"or evaluate with the local engine.",
        )
    uri = resolved.loaded_uri
    wanted, listed = signature_columns(uri, f"{key}.model", tracking_uri)
    if listed:
        raise SpecError(
            f"{key}.model",
            f"{uri} returns ranked lists of doc ids (its signature's output is a list): "
            f"a retriever is scored by the local engine only; evaluate without "
            f"engine spark.",
        )
    qcol, dcol = candidate_ids(src)
    if progress:
        progress(f"scoring '{name}' with {uri} on Spark")
    with case_sensitive(spark):
        _score(spark, src, name, resolved, target, uri, wanted, qcol, dcol, key, tracking_uri)
    written = spark.read.parquet(str(target))
    value = F.col("score")
    bad = written.where(value.isNull() | F.isnan(value) | (F.abs(value) == float("inf")))
    first = bad.limit(1).collect()
    if first:
        count = bad.count()
        row = first[0]
        shown = "NULL" if row["score"] is None else repr(row["score"])
        raise DataError(
            path, non_finite_message(uri, shown, row["query_id"], row["doc_id"], count - 1, "(scored on Spark)")
        )
    count = int(written.count())
    if count == 0:
        raise DataError(path, f"the candidates of system '{name}' hold no rows.")
    if progress:
        progress(f"scored '{name}' on Spark: {count:,} candidate rows")
    return count


def _score(
    spark: Any,
    src: Any,
    name: str,
    resolved: ResolvedModel,
    target: Path,
    uri: str,
    wanted: list[str] | None,
    qcol: str,
    dcol: str,
    key: str,
    tracking_uri: str | None,
) -> None:
    """Read the candidates, check their columns and write the model's scores of them to ``target``: the part of
    :func:`score_candidates` that reads the candidates' column names (compared exactly, as the local engine
    compares them: :func:`case_sensitive`)."""
    import shutil
    import tempfile

    path = src.file
    df = read_run_file(spark, src)
    check_input_columns(name, resolved, path, list(df.columns), wanted, qcol)
    if dcol not in df.columns:
        raise DataError(
            path,
            f"the candidates lack the column {dcol!r}: a model returning one score per row "
            f"scores (query_id, doc_id) rows.",
        )
    # with a signature, its input columns in its order; without one, every column by name (as locally)
    features = list(wanted) if wanted else list(df.columns)
    qname, dname = _fresh("query_id", df.columns), _fresh("doc_id", df.columns)
    rows = df.select(
        *[df[c] for c in features], df[qcol].cast("string").alias(qname), df[dcol].cast("string").alias(dname)
    )
    # the model's copy: where the executors see the driver's files, as the scored folder is
    copy = Path(tempfile.mkdtemp(prefix=".model-", dir=target.parent))
    try:
        local = download_model(uri, key, copy, tracking_uri)
        scorer = BatchScorer(local, uri, str(path), features, qname, dname)
        scored = rows.mapInPandas(scorer, "query_id string, doc_id string, score double")
        try:
            scored.write.mode("overwrite").parquet(str(target))
        except Exception as exc:  # noqa: BLE001 - the model's failure inside a Spark task, said in one line
            refused = data_error(str(exc))
            if refused is not None:  # the output rule, applied on an executor
                raise DataError(path, refused.removeprefix(f"{shown_path(path)}: ")) from None
            raise NdcgError(
                f"at key '{key}': {uri} failed on Spark while scoring the candidates {shown_path(path)}: "
                f"{python_error(str(exc))}."
            ) from None
    finally:
        shutil.rmtree(copy, ignore_errors=True)


@contextlib.contextmanager
def case_sensitive(spark: Any) -> Iterator[None]:
    """Spark's analyzer comparing column names exactly (``spark.sql.caseSensitive``) while the candidates are read,
    checked and scored, as the local engine reads them: ``score`` and ``SCORE`` are two columns (by default Spark
    takes them for one name, and its JSON and Parquet readers refuse the file). The session's own setting is put
    back after."""
    conf = "spark.sql.caseSensitive"
    before = spark.conf.get(conf, None)
    spark.conf.set(conf, "true")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(conf)
        else:
            spark.conf.set(conf, before)


def _fresh(name: str, taken: list[str]) -> str:
    """A column name for the ids beside the model's inputs: ``__ndcg_<name>``, with more underscores if taken."""
    fresh = f"__ndcg_{name}"
    while fresh in taken:
        fresh = "_" + fresh
    return fresh


class BatchScorer:
    """The function ``mapInPandas`` runs on the executors: for each batch of candidate rows, the model's output on
    its input columns read by :func:`ndcg_mlflow.models.predictions.read_predictions` (a DataError naming the model for
    any other shape; ranked lists refused, a retriever being scored by the local engine only), and the rows
    ``query_id, doc_id, score``. The model is loaded once per Python worker, from ``model_path``."""

    def __init__(self, model_path: str, uri: str, file: str, features: list[str], qname: str, dname: str):
        self.model_path, self.uri, self.file = model_path, uri, file
        self.features, self.qname, self.dname = features, qname, dname

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        from ...models.predictions import LISTS, read_predictions

        model = local_model(self.model_path)
        for frame in batches:
            if not len(frame):
                continue
            where = f"a batch of {len(frame)} candidate rows of {self.file} (scored on Spark)"
            output = model.predict(frame[self.features])
            predicted = read_predictions(output, frame[self.qname], model=self.uri, where=where, file=self.file)
            if predicted.kind == LISTS:
                raise DataError(
                    self.file,
                    f"{self.uri} returned ranked lists of doc ids for {where}: a retriever "
                    f"is scored by the local engine only; evaluate without engine spark.",
                )
            yield pd.DataFrame(
                {
                    "query_id": frame[self.qname].to_numpy(),
                    "doc_id": frame[self.dname].to_numpy(),
                    "score": predicted.scores,
                }
            )


_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")
_WRAPPERS = (
    "PythonException",
    "Py4JJavaError",
    "SparkException",
    "SparkRuntimeException",
    "org.apache.spark.SparkException",
    "pyspark.errors.exceptions.captured.PythonException",
    "org.apache.spark.api.python.PythonException",
)


_DATA_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?DataError: (.+)$", re.MULTILINE)


def data_error(text: str) -> str | None:
    """The message of the last DataError raised in a failed Spark task (a refusal of the model's output), if any."""
    found = _DATA_ERROR.findall(text)
    return found[-1].strip() if found else None


def python_error(text: str) -> str:
    """The innermost Python error of a failed Spark task's message (``ValueError: ...``), else its first line."""
    found = [m for m in (_ERROR_LINE.match(line) for line in text.splitlines()) if m]
    inner = [m for m in found if m.group(1).rsplit(".", 1)[-1] not in {w.rsplit(".", 1)[-1] for w in _WRAPPERS}]
    if inner:
        return f"{inner[-1].group(1).rsplit('.', 1)[-1]}: {inner[-1].group(2).strip()[:300]}"
    return first_line(text) or "(no message)"
