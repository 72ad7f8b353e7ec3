"""Systems that are models: ``data.systems.<name>: {model: URI, candidates: SOURCE}``, what needs no mlflow.

Each model URI is resolved once, when the evaluation starts (an alias becomes the version it points to then,
and that version is what is loaded and recorded: :class:`ResolvedModel`), by
:mod:`ndcg_mlflow.tracking.registry`, which also loads the model and scores the spec's model systems with the
local engine: :func:`score_candidates` scores one model's candidates in bounded batches; the scored rows
(``query_id, doc_id, score``, and ``rank`` for a model that returns ranked lists) are written as Parquet, and that
file is the system's run from then on (:func:`with_scored` points the spec's model system at it). With the Spark
engine, :mod:`ndcg_mlflow.engines.spark.models` scores on Spark's executors instead, after the same resolution and
with the same records. This module imports no mlflow; the spec-level checks of model systems and ``--promote``
(:func:`check_not_itself`, :func:`promotion_problem`) are here too.

What ``predict`` returns is read by :func:`ndcg_mlflow.models.predictions.read_predictions`, the one rule of every
engine: one score per candidate row (a 1-d array, an (n, 1) array, a one-column frame or a Series of finite
numbers), a reranker; or one ranked list of doc ids per input row (a retriever): each input row names a query (its
``query_id``, one row per query) and the list is the order shown, so the rows written carry ``rank`` 1, 2, ... and
the score ``-rank`` (no two equal), whatever the spec's ``ties`` rule. Anything else is refused, naming the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError, NdcgError, SpecError
from ..spec import Source, Spec
from ..uris import first_line

BATCH_ROWS = 50_000  # candidate rows scored per predict call: bounds the memory of one batch
PROGRESS_SECONDS = 2.0  # at most one progress line per this many seconds while scoring


@dataclass(frozen=True)
class ResolvedModel:
    """What a model URI named when the evaluation started (recorded in ``summary.json`` ``models``)."""

    uri: str  # as declared in the spec
    loaded_uri: str  # what was loaded: the version an alias pointed to, never the alias itself
    registered_model: str | None = None
    version: str | None = None
    alias: str | None = None
    source: str | None = None  # the model version's source (models:/m-... or a run's artifact path)
    run_id: str | None = None  # the run that logged the model
    model_id: str | None = None  # the logged model's id (m-...), derived from the source when MLflow has none
    candidates: str | None = None  # the candidates as declared, their sha256 and rows; the scored rows
    candidates_sha256: str | None = None
    candidate_rows: int | None = None
    scored_rows: int | None = None

    def record(self) -> dict[str, Any]:
        return asdict(self)


def model_id_of_source(source: str | None) -> str | None:
    """The logged model id of a model version's source ``models:/m-<id>`` (open-source MLflow leaves
    ``ModelVersion.model_id`` empty while its source names the logged model), else None."""
    if source and source.startswith("models:/m-"):
        return source[len("models:/") :].split("/", 1)[0]
    return None


# --------------------------------------------------------------------------- scoring


def input_columns(model: Any) -> list[str] | None:
    """The model's input column names from its signature, or None when it has no signature (or no names)."""
    try:
        schema = model.metadata.get_input_schema()
    except Exception:  # noqa: BLE001 - a model without metadata has no signature
        return None
    if schema is None or not getattr(schema, "has_input_names", lambda: False)():
        return None
    return list(schema.input_names())


def _candidate_batches(
    src: Source, rows: int, id_columns: tuple[str, ...]
) -> tuple[list[str], int | None, Iterator[Any]]:
    """The candidates' column names, their number of rows when the format says it without reading them (Parquet),
    and their rows as pyarrow record batches of at most ``rows`` rows."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from ..paths import dataset_files
    from ..readers.columns import detect_format

    path = src.file
    fmt = src.format if src.format != "auto" else detect_format(path)
    files = dataset_files(path)
    if fmt == "parquet" or files:
        dataset = ds.dataset([str(f) for f in files] if files else str(path), format="parquet")
    elif fmt in ("csv", "tsv"):
        import pyarrow.csv as pacsv

        ids = {c: pa.string() for c in id_columns}  # ids are text, as the readers read them ("007" stays "007")
        dataset = ds.dataset(
            str(path),
            format=ds.CsvFileFormat(
                parse_options=pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ","),
                convert_options=pacsv.ConvertOptions(column_types=ids),
            ),
        )
    elif fmt == "jsonl":
        dataset = ds.dataset(str(path), format="json")
    else:
        raise DataError(path, f"candidates must be a table (parquet, csv, tsv or jsonl); read as {fmt}.")
    total = dataset.count_rows() if fmt == "parquet" or files else None  # from the files' metadata
    return list(dataset.schema.names), total, dataset.to_batches(batch_size=rows)


def score_candidates(
    name: str,
    resolved: ResolvedModel,
    src: Source,
    out_path: Path,
    *,
    key: str,
    load: Callable[[], Any],
    progress: Callable[[str], None] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> tuple[int, int]:
    """Load the model (``load()``, once the candidates are open), score the candidates of ``src`` batch by batch
    and write the scored rows to ``out_path`` (Parquet: ``query_id, doc_id, score`` and, for ranked lists,
    ``rank``); returns the candidate rows read and the scored rows written. Errors name the model, the candidates
    file and the rows: columns the model needs that the candidates lack, output that is not one finite score per
    row (or one list per row), a model that fails."""
    import pyarrow.parquet as pq

    path = src.file
    qcol, dcol = candidate_ids(src)
    names, total, batches = _candidate_batches(src, batch_rows, (qcol, dcol))
    if progress:
        progress(f"loading the model of system '{name}' ({resolved.loaded_uri})")
    model = load()
    wanted = input_columns(model)
    check_input_columns(name, resolved, path, names, wanted, qcol)
    written, start, last, shape = 0, 0, time.monotonic(), None
    seen: set[str] = set()  # the queries of ranked lists so far: one input row each
    writer: Any = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            frame = batch.to_pandas()
            features = frame[wanted] if wanted else frame
            try:
                output = model.predict(features)
            except Exception as exc:  # noqa: BLE001 - the model's own failure, said with the rows it was given
                raise NdcgError(
                    f"at key '{key}': {resolved.loaded_uri} failed on rows {start + 1}-"
                    f"{start + batch.num_rows} of {path}: {type(exc).__name__}: "
                    f"{first_line(exc)}"
                ) from None
            table, shape = scored_rows(output, frame, qcol, dcol, names, shape, path, start, resolved, seen)
            if writer is None:  # the first batch's shape fixes the columns: rank only for ranked lists
                writer = pq.ParquetWriter(str(out_path), table.schema)
            writer.write_table(table)
            written += table.num_rows
            start += batch.num_rows
            if progress and time.monotonic() - last >= PROGRESS_SECONDS:
                of = f" of {total:,} ({start / total:.0%})" if total else ""
                progress(f"scoring '{name}' with {resolved.loaded_uri}: {start:,}{of} candidate rows")
                last = time.monotonic()
    finally:
        if writer is not None:
            writer.close()
    if start == 0:
        raise DataError(path, f"the candidates of system '{name}' hold no rows.")
    if progress:
        progress(f"scored '{name}': {start:,} candidate rows, {written:,} scored rows")
    return start, written


def candidate_ids(src: Source) -> tuple[str, str]:
    """The candidates' columns of query ids and document ids, under their column mapping (one that gives one
    column both purposes, or another's, refused as every reader refuses it)."""
    from ..readers.accept import CANDIDATES, one_purpose, refusals, source_name

    with refusals(src.file):
        one_purpose(CANDIDATES, src.columns)
    return source_name(src.columns, "query_id"), source_name(src.columns, "doc_id")


def check_input_columns(
    name: str, resolved: ResolvedModel, path: Any, names: list[str], wanted: list[str] | None, qcol: str
) -> None:
    """A DataError naming the candidates ``path`` when they lack the query id column ``qcol`` or one of the
    model's input columns ``wanted`` (from its signature; None without one); ``names`` are their columns."""
    missing = [c for c in (wanted or []) if c not in names]
    if qcol not in names:
        missing.insert(0, qcol)
    if missing:
        raise DataError(
            path,
            f"the candidates of system '{name}' lack the column(s) {', '.join(map(repr, missing))}"
            f" (query_id and {resolved.loaded_uri}'s input columns "
            f"{', '.join(wanted) if wanted else '(no signature)'}); they have "
            f"{', '.join(names)}.",
        )


def _ids(values: Any) -> Any:
    """Ids as text: integers as their decimal text, as the readers read them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.array(values) if not isinstance(values, (pa.Array, pa.ChunkedArray)) else values
    return arr if pa.types.is_string(arr.type) else pc.cast(arr, pa.string())


def non_finite_message(
    uri: str, value: Any, query: str, doc: str, more: int, where: str, row: int | None = None
) -> str:
    """The words of a model's score that is not a finite number (``row``: its 1-based row, when known)."""
    at = f"row {row} (query {query!r}, doc {doc!r})" if row is not None else f"query {query!r}, doc {doc!r}"
    return f"{uri} returned {value} for {at} and {more} more non-finite scores {where}; every score must be finite."


def scored_rows(
    output: Any,
    frame: Any,
    qcol: str,
    dcol: str,
    names: list[str],
    shape: str | None,
    path: Path,
    start: int,
    resolved: ResolvedModel,
    seen: set[str] | None = None,
) -> tuple[Any, str]:
    """The rows written for one batch of candidates (``frame``, its first row the ``start``-th + 1) from what
    ``predict`` returned, read by :func:`ndcg_mlflow.models.predictions.read_predictions`: ``("scores", query_id,
    doc_id, score)`` or ``("lists", ... score = -rank, rank)``; a DataError for anything else, for the other shape than
    the earlier batches' (``shape``), or for a score that is not finite. ``seen``: the queries of earlier batches of
    ranked lists."""
    import numpy as np
    import pyarrow as pa

    from .predictions import LISTS, read_predictions

    n = len(frame)
    where = f"rows {start + 1}-{start + n} of {path}"
    predicted = read_predictions(output, frame[qcol], model=resolved.loaded_uri, where=where, file=path, seen=seen)
    kind = predicted.kind
    if shape is not None and kind != shape:
        raise DataError(path, f"{resolved.loaded_uri} returned {kind} for {where} but {shape} before.")
    if kind == LISTS:
        assert predicted.lists is not None
        counts = np.fromiter((len(docs) for docs in predicted.lists), dtype=np.int64, count=n)
        rank = (
            np.concatenate([np.arange(1, k + 1, dtype=np.int64) for k in counts]) if n else np.zeros(0, dtype=np.int64)
        )
        queries = np.repeat(np.asarray([str(q) for q in frame[qcol].tolist()], dtype=object), counts)
        docs = [d for docs_q in predicted.lists for d in docs_q]
        return pa.table(
            {
                "query_id": pa.array(queries.tolist(), pa.string()),
                "doc_id": pa.array(docs, pa.string()),
                "score": pa.array(-rank.astype(np.float64)),
                "rank": pa.array(rank),
            }
        ), kind
    if dcol not in names:
        raise DataError(
            path,
            f"the candidates lack the column {dcol!r}: a model returning one score per row "
            f"scores (query_id, doc_id) rows.",
        )
    scores = predicted.scores
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        i = int(bad[0])
        query, doc = str(frame[qcol].iloc[i]), str(frame[dcol].iloc[i])
        raise DataError(
            path,
            non_finite_message(resolved.loaded_uri, scores[i], query, doc, bad.size - 1, f"in {where}", start + i + 1),
        )
    return pa.table(
        {"query_id": _ids(pa.array(frame[qcol])), "doc_id": _ids(pa.array(frame[dcol])), "score": pa.array(scores)}
    ), kind


# --------------------------------------------------------------------------- the spec's model systems


def model_systems(spec: Spec) -> list[str]:
    return [name for name, src in spec.systems if src.unscored]


def scored_name(name: str) -> str:
    """The scored rows' file inside an output folder: ``systems/<stem>.scored.parquet``."""
    from ..spec import system_file_stem

    return f"systems/{system_file_stem(name)}.scored.parquet"


def check_not_itself(spec: Spec, resolved: dict[str, ResolvedModel]) -> None:
    """A SpecError naming the candidate's key when a candidate and the baseline resolve to the same model (the
    same registry version, logged model or run artifact, or two of them holding one logged model) and score the
    same candidates: the comparison would be of a version with itself (two aliases that point to one version,
    say), said before anything is scored."""
    if spec.comparison is None or spec.comparison.baseline not in resolved:
        return
    baseline = spec.comparison.baseline
    systems = dict(spec.systems)

    def rows(name: str) -> tuple:
        src = systems[name].candidates
        assert src is not None
        return src.path.resolve() if src.path else None, src.format, src.columns, src.version

    base = resolved[baseline]
    for name, model in resolved.items():
        same = model.loaded_uri == base.loaded_uri or (model.model_id is not None and model.model_id == base.model_id)
        if name == baseline or not same or rows(name) != rows(baseline):
            continue
        via = [f"{m.uri} -> {m.loaded_uri}" for m in (model, base) if m.uri != m.loaded_uri]
        raise SpecError(
            f"data.systems.{name}.model",
            f"{model.uri} resolves to {model.loaded_uri}, the model the baseline '{baseline}' "
            f"({base.uri}) resolves to, on the same candidates: the comparison would be of a version "
            f"with itself{' (' + '; '.join(via) + ')' if via else ''}. Nothing was scored; point one of "
            f"them at another version.",
        )


def with_scored(
    spec: Spec, name: str, resolved: ResolvedModel, *, candidate_rows: int, scored_rows: int, target: Path
) -> tuple[Spec, ResolvedModel]:
    """The spec whose model system ``name`` reads its scored rows at ``target`` (Parquet: a file, or a folder of
    part files), and the resolution with the candidates' declared source, digest and rows recorded."""
    import dataclasses

    from ..readers import sha256_file

    src = dict(spec.systems)[name]
    assert src.candidates is not None
    record = dataclasses.replace(
        resolved,
        candidates=src.candidates.declared,
        candidates_sha256=sha256_file(src.candidates.file, src.candidates.version),
        candidate_rows=candidate_rows,
        scored_rows=scored_rows,
    )
    systems = tuple(
        (
            n,
            dataclasses.replace(s, path=target, declared=scored_name(name), format="parquet", columns=(), version=None)
            if n == name
            else s,
        )
        for n, s in spec.systems
    )
    return dataclasses.replace(spec, systems=systems), record


# --------------------------------------------------------------------------- promotion

ALIAS = r"[A-Za-z0-9_\-]+"  # MLflow's alias names: letters, digits, '_' and '-' (not 'latest', not 'v<digits>')


def promotion_problem(spec: Spec, alias: str) -> str | None:
    """Why ``--promote ALIAS`` cannot apply to this spec, or None: it needs the decision section, exactly one
    candidate (a system other than the baseline), and that candidate a registered model version
    (``models:/name/version`` or ``models:/name@alias``). Checked before any work."""
    import re

    if not re.fullmatch(ALIAS, alias) or alias.lower() == "latest" or re.fullmatch(r"[vV]\d+", alias):
        return (
            f"--promote {alias!r}: an alias holds letters, digits, '_' and '-', and is neither 'latest' nor v<number>."
        )
    if spec.decision is None or spec.comparison is None:
        return (
            "--promote needs the spec's decision section: the alias moves only when the declared rule passes "
            "(and the decision needs the comparison section)."
        )
    candidates = [(n, s) for n, s in spec.systems if n != spec.comparison.baseline]
    if len(candidates) != 1:
        return (
            f"--promote moves one alias to one model version, and the spec has {len(candidates)} candidates "
            f"({', '.join(n for n, _ in candidates)}) besides the baseline '{spec.comparison.baseline}'."
        )
    name, src = candidates[0]
    uri = src.model
    if uri is None or not uri.startswith("models:/") or uri.startswith("models:/m-"):
        what = "a run file" if uri is None else uri
        return (
            f"--promote: the candidate '{name}' is {what}, not a registered model version (data.systems."
            f"{name}.model: models:/<name>/<version> or models:/<name>@<alias>); only a registry version "
            f"can take an alias."
        )
    return None


def registered_name(uri: str) -> str:
    """The registered model of ``models:/<name>/<version>`` or ``models:/<name>@<alias>``."""
    rest = uri[len("models:/") :].rstrip("/")
    return rest.rpartition("@")[0] if "@" in rest else rest.rpartition("/")[0]
