"""Systems that are models: ``data.systems.<name>: {model: URI, candidates: SOURCE}``.

Each model URI is resolved once, when the evaluation starts (an alias becomes the version it points to then,
and that version is what is loaded and recorded); the model is loaded with ``mlflow.pyfunc.load_model`` and
scores its candidates in bounded batches; the scored rows (``query_id, doc_id, score``, and ``rank`` for a
model that returns ranked lists) are written as Parquet, and that file is the system's run from then on
(:func:`score_model_systems` returns the spec with each model system pointing at it). With the Spark engine,
:mod:`ndcg_mlflow.engines.spark_models` scores on Spark's executors instead, after the same
resolution (:func:`resolve_model_systems`) and with the same records (:func:`with_scored`). mlflow is imported
lazily, inside the functions: importing this module imports no mlflow.

What ``predict`` returns is read by :func:`ndcg_mlflow.predictions.read_predictions`, the one rule of every
engine: one score per candidate row (a 1-d array, an (n, 1) array, a one-column frame or a Series of finite
numbers), a reranker; or one ranked list of doc ids per input row (a retriever): each input row names a query (its
``query_id``, one row per query) and the list is the order shown, so the rows written carry ``rank`` 1, 2, ... and
the score ``-rank`` (no two equal), whatever the spec's ``ties`` rule. Anything else is refused, naming the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import DataError, NdcgError, SpecError
from .spec import Source, Spec

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


def resolve(uri: str, key: str, client: Any) -> ResolvedModel:
    """Resolve a model URI once against the registry and tracking store of ``client``; a missing model, version,
    alias or run is a SpecError naming ``key`` (the spec key of the URI)."""
    from mlflow.exceptions import MlflowException

    try:
        if uri.startswith("models:/m-"):
            model_id = uri[len("models:/") :].rstrip("/")
            lm = client.get_logged_model(model_id)
            return ResolvedModel(
                uri, f"models:/{model_id}", source=lm.model_uri, run_id=lm.source_run_id, model_id=model_id
            )
        if uri.startswith("models:/"):
            rest = uri[len("models:/") :].rstrip("/")
            alias: str | None = None
            if "@" in rest:
                name, _, alias = rest.rpartition("@")
                mv = _alias_version(client, name, alias, key, uri)
            else:
                name, _, version = rest.rpartition("/")
                mv = client.get_model_version(name, version)
            mid = getattr(mv, "model_id", None) or model_id_of_source(mv.source)
            run_id = mv.run_id
            if run_id is None and mid is not None:
                run_id = client.get_logged_model(mid).source_run_id
            return ResolvedModel(
                uri,
                f"models:/{name}/{mv.version}",
                registered_model=name,
                version=str(mv.version),
                alias=alias,
                source=mv.source,
                run_id=run_id,
                model_id=mid,
            )
        run_id, _, path = uri[len("runs:/") :].partition("/")
        run = client.get_run(run_id)
        path = path.strip("/")
        found = client.search_logged_models(
            experiment_ids=[run.info.experiment_id],
            filter_string=f"source_run_id = '{run_id}' AND name = '{path}'"
            if "'" not in path
            else f"source_run_id = '{run_id}'",
        )
        ids = [m.model_id for m in found if m.name == path]
        return ResolvedModel(uri, uri, source=uri, run_id=run_id, model_id=ids[0] if len(ids) == 1 else None)
    except SpecError:
        raise
    except MlflowException as exc:
        code = getattr(exc, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            raise SpecError(key, f"{uri}: {_first_line(exc)}") from None
        raise NdcgError(f"at key '{key}': the registry could not resolve {uri}: {_first_line(exc)}") from None


def _alias_version(client: Any, name: str, alias: str, key: str, uri: str) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        try:
            aliases = sorted(client.get_registered_model(name).aliases)
        except MlflowException:
            raise SpecError(key, f"{uri}: registered model {name!r} does not exist ({_first_line(exc)}).") from None
        known = f"its aliases are {', '.join(aliases)}" if aliases else "it has no aliases"
        raise SpecError(key, f"{uri}: registered model {name!r} has no alias {alias!r} ({known}).") from None


def _first_line(exc: BaseException) -> str:
    from .uris import redact

    lines = redact(str(exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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

    from .paths import dataset_files
    from .readers.columns import detect_format

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


@contextmanager
def using_store(uri: str | None) -> Iterator[None]:
    """MLflow's global tracking URI (which also names the registry, unless one is set apart) set to ``uri`` for
    the duration: ``mlflow.pyfunc.load_model`` has no argument for it."""
    if uri is None:
        yield
        return
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with _use_tracking_uri(uri):
        yield


def score_candidates(
    name: str,
    resolved: ResolvedModel,
    src: Source,
    out_path: Path,
    *,
    key: str,
    tracking_uri: str | None = None,
    progress: Callable[[str], None] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> tuple[int, int]:
    """Load the model, score the candidates of ``src`` batch by batch and write the scored rows to
    ``out_path`` (Parquet: ``query_id, doc_id, score`` and, for ranked lists, ``rank``); returns the candidate
    rows read and the scored rows written. Errors name the model, the candidates file and the rows: columns
    the model needs that the candidates lack, output that is not one finite score per row (or one list per
    row), a model that fails."""
    import mlflow.pyfunc
    import pyarrow.parquet as pq

    path = src.file
    mapping = dict(src.columns)
    qcol, dcol = mapping.get("query_id", "query_id"), mapping.get("doc_id", "doc_id")
    names, total, batches = _candidate_batches(src, batch_rows, (qcol, dcol))
    if progress:
        progress(f"loading the model of system '{name}' ({resolved.loaded_uri})")
    try:
        with using_store(tracking_uri):
            model = mlflow.pyfunc.load_model(resolved.loaded_uri)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the model's
        raise NdcgError(
            f"at key '{key}': cannot load {resolved.loaded_uri}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
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
                    f"{_first_line(exc)}"
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


def signature_columns(uri: str, key: str, tracking_uri: str | None) -> tuple[list[str] | None, bool]:
    """The model's input column names from its signature (None without one, or without names), and whether its
    signature declares a list output (a retriever); read from the model's metadata, without loading it."""
    from mlflow.models import get_model_info

    try:
        with using_store(tracking_uri):
            info = get_model_info(uri)
    except Exception as exc:  # noqa: BLE001 - any failure to read the model's metadata is the model's
        raise NdcgError(
            f"at key '{key}': cannot read the metadata of {uri}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    sig = info.signature
    if sig is None:
        return None, False
    names = list(sig.inputs.input_names()) if sig.inputs is not None and sig.inputs.has_input_names() else None
    outputs = getattr(sig.outputs, "inputs", None) or []
    listed = any(type(getattr(c, "type", None)).__name__ == "Array" for c in outputs)
    return names, listed


def download_model(uri: str, key: str, folder: Path, tracking_uri: str | None) -> str:
    """The files of the model ``uri`` downloaded into ``folder`` (for Spark's executors to load: the folder is where
    they see the driver's files); their absolute path. A failure is an NdcgError naming ``key``."""
    from mlflow.artifacts import download_artifacts

    try:
        with using_store(tracking_uri):
            local = download_artifacts(artifact_uri=uri, dst_path=str(folder))
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is the model's
        raise NdcgError(
            f"at key '{key}': cannot load {uri} for Spark: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    return str(Path(local).resolve())


_LOADED: dict[str, Any] = {}  # in a process (a Spark Python worker): the model last loaded, by path


def local_model(path: str) -> Any:
    """The model at ``path`` loaded by ``mlflow.pyfunc.load_model``, once per process (the last one kept)."""
    if path not in _LOADED:
        import mlflow.pyfunc

        _LOADED.clear()
        _LOADED[path] = mlflow.pyfunc.load_model(path)
    return _LOADED[path]


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
    ``predict`` returned, read by :func:`ndcg_mlflow.predictions.read_predictions`: ``("scores", query_id, doc_id,
    score)`` or ``("lists", ... score = -rank, rank)``; a DataError for anything else, for the other shape than the
    earlier batches' (``shape``), or for a score that is not finite. ``seen``: the queries of earlier batches of
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
            f"{resolved.loaded_uri} returned {scores[i]} for row {start + i + 1} (query {query!r}, "
            f"doc {doc!r}) and {bad.size - 1} more non-finite scores in {where}; every score must be "
            f"a finite number.",
        )
    return pa.table(
        {"query_id": _ids(pa.array(frame[qcol])), "doc_id": _ids(pa.array(frame[dcol])), "score": pa.array(scores)}
    ), kind


# --------------------------------------------------------------------------- the spec's model systems


def model_systems(spec: Spec) -> list[str]:
    return [name for name, src in spec.systems if src.unscored]


def scored_name(name: str) -> str:
    """The scored rows' file inside an output folder: ``systems/<stem>.scored.parquet``."""
    from .spec import system_file_stem

    return f"systems/{system_file_stem(name)}.scored.parquet"


def resolve_model_systems(spec: Spec, tracking_uri: str | None) -> dict[str, ResolvedModel]:
    """Every model URI of the spec resolved once against the registry of ``tracking_uri`` (all of them before any
    scoring, so a missing alias stops the evaluation first), by system name."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    resolved = {}
    for name, src in spec.systems:
        if src.unscored:
            assert src.model is not None
            resolved[name] = resolve(src.model, f"data.systems.{name}.model", client)
    check_not_itself(spec, resolved)
    return resolved


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

    from .readers import sha256_file

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


def score_model_systems(
    spec: Spec,
    folder: str | Path,
    *,
    tracking_uri: str | None = None,
    progress: Callable[[str], None] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> tuple[Spec, dict[str, ResolvedModel], dict[str, Path]]:
    """Resolve every model URI of the spec (all of them first, so a missing alias stops the evaluation before any
    scoring), then score each model's candidates into ``folder/systems/<stem>.scored.parquet``. Returns the spec
    whose model systems read those files, what each URI resolved to, and the files."""
    names = model_systems(spec)
    if not names:
        return spec, {}, {}
    resolved = resolve_model_systems(spec, tracking_uri)
    scored: dict[str, Path] = {}
    folder = Path(folder)
    for name in names:
        src = dict(spec.systems)[name]
        assert src.candidates is not None
        target = folder / scored_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        rows, written = score_candidates(
            name,
            resolved[name],
            src.candidates,
            target,
            key=f"data.systems.{name}",
            tracking_uri=tracking_uri,
            progress=progress,
            batch_rows=batch_rows,
        )
        spec, resolved[name] = with_scored(
            spec, name, resolved[name], candidate_rows=rows, scored_rows=written, target=target
        )
        scored[name] = target
    return spec, resolved, scored


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


def alias_version(client: Any, name: str, alias: str) -> str | None:
    """The version ``alias`` of registered model ``name`` points to now, or None when it points to none."""
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException as exc:
        if getattr(exc, "error_code", "") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            return None
        raise


def alias_at_start(spec: Spec, alias: str, tracking_uri: str | None) -> str | None:
    """``--promote ALIAS``: the version the alias points to when the evaluation starts (None: none), read before
    the model URIs are resolved; the alias moves at the end only if it still points there."""
    from mlflow.tracking import MlflowClient

    baseline = spec.comparison.baseline if spec.comparison else None
    uri = next(s.model for n, s in spec.systems if n != baseline)
    assert uri is not None
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    try:
        return alias_version(client, registered_name(uri), alias)
    except Exception as exc:  # noqa: BLE001 - any registry failure, before any work
        raise NdcgError(
            f"--promote {alias}: the registry could not be read for {uri}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None


class AliasMoved(NdcgError):
    """``--promote``: the alias was moved by someone else during the evaluation (or as it was moved); it is left
    where it is (exit 4: evaluated and logged, not promoted)."""

    exit_code = 4


def promote(
    summary: dict, alias: str, evaluation_run_id: str, tracking_uri: str | None, expected: str | None
) -> dict[str, Any]:
    """Move ``alias`` of the candidate's registered model to the candidate's version (the one resolved when the
    evaluation started) and tag that version with the previous holder and the evaluation run, only if the alias
    still points to ``expected``, the version it pointed to when the evaluation started (None: no version).
    MLflow has no compare-and-set of an alias: it is read again just before the move and just after it; an
    alias that moved before is left where it is, and one that moved as it was set is reported (both
    :class:`AliasMoved`, naming the version it points to). The caller calls it only when the decision passed
    and logging completed. Returns what was done."""
    from mlflow.tracking import MlflowClient

    baseline = summary["spec"]["comparison.baseline"]
    candidate = next(n for n in summary["systems"] if n != baseline)
    record = summary["models"][candidate]
    name, version = record["registered_model"], str(record["version"])
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)

    def holder(v: str | None) -> str:
        if v is None:
            return "no version"
        try:
            tags = client.get_model_version(name, v).tags or {}
        except Exception:  # noqa: BLE001 - the version's tags only add who moved it
            tags = {}
        run = tags.get("ndcg_mlflow.evaluation_run") if tags.get("ndcg_mlflow.promoted_alias") == alias else None
        return f"version {v}" + (
            f" (promoted by the evaluation run {run}, its tag ndcg_mlflow.evaluation_run)"
            if run
            else " (its tags do not say who moved it)"
        )

    started = "no version" if expected is None else f"version {expected}"
    for other, rec in summary["models"].items():  # an alias of the spec, resolved to another version than read
        if rec.get("registered_model") == name and rec.get("alias") == alias and str(rec["version"]) != expected:
            raise AliasMoved(
                f"@{alias} of {name} pointed to {started} when the evaluation started, and to version "
                f"{rec['version']} when '{other}' resolved it: it moved during the evaluation, so it "
                f"stays where it is; evaluate again."
            )
    previous = alias_version(client, name, alias)
    if previous != expected:
        raise AliasMoved(
            f"@{alias} of {name} pointed to {started} when the evaluation started and now points to "
            f"{holder(previous)}: it moved during the evaluation, so it stays there (version {version} "
            f"was compared with the baseline of the start); evaluate again."
        )
    client.set_registered_model_alias(name, alias, version)
    after = alias_version(client, name, alias)
    if after != version:
        raise AliasMoved(
            f"@{alias} of {name} was moved to version {version}, and at once by another process: it now "
            f"points to {holder(after)} (a race: MLflow cannot set an alias only if unchanged); it is "
            f"left there, and version {version} was not tagged as promoted."
        )
    for key, value in (
        ("ndcg_mlflow.promoted_alias", alias),
        ("ndcg_mlflow.previous_version", "none" if previous is None else str(previous)),
        ("ndcg_mlflow.evaluation_run", evaluation_run_id),
    ):
        client.set_model_version_tag(name, version, key, value)
    client.set_tag(
        evaluation_run_id,
        "ndcg_mlflow.promoted",
        f"{name} version {version} is now @{alias} (before: "
        f"{'no version' if previous is None else 'version ' + str(previous)})",
    )
    return {
        "registered_model": name,
        "alias": alias,
        "version": str(version),
        "previous_version": None if previous is None else str(previous),
        "evaluation_run": evaluation_run_id,
    }
