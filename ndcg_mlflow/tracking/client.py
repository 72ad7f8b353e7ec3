"""Logging an output folder to MLflow: the store lock, bounded retries and time (a worker thread and its
watchdog), the ending of runs left behind, and the helpers a comparison run shares (:func:`log_batch`,
:func:`log_outputs`, :func:`log_figures`). mlflow is imported lazily, inside the functions."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NdcgError, TrackingError
from ..evaluation import EvaluationResult
from ..uris import store_problem
from .names import (
    ARTIFACTS,
    TAG_PREFIX,
    comparison_metrics,
    evaluation_run_name,
    figure_rows,
    param_value,
    parent_tags,
    system_metrics,
    system_run_name,
    system_tags,
)

MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100


@dataclass
class LoggedRuns:
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    system_run_ids: dict[str, str] = field(default_factory=dict)
    reused: bool = False  # an earlier complete upload of the same result

    def _replace_uri(self, uri: str) -> LoggedRuns:
        self.tracking_uri = uri
        return self


DEFAULT_HTTP = {  # fail within about 30 s against an unreachable server (MLflow's own defaults take minutes)
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "8",
}


def configure_http(timeout: float | None = None, max_retries: int | None = None) -> None:
    """Bounded retries and timeouts: the spec's ``mlflow`` section first, then MLflow's own environment
    variables when the user set them, then these defaults."""
    import os

    if timeout is not None:  # MLflow reads this variable as an integer: whole seconds, at least 1
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, math.ceil(timeout)))
    if max_retries is not None:
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(max_retries)
    for key, value in DEFAULT_HTTP.items():
        os.environ.setdefault(key, value)
    # MLflow prints "View run ... at <tracking URI>" lines, credentials included when the URI has them
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    import logging

    for name in ("mlflow.store.db.utils", "alembic"):  # schema-migration chatter of a new local store
        logging.getLogger(name).setLevel(logging.WARNING)
    # a failing SQL statement is logged with its whole traceback before it is raised; the error that ends
    # logging says what failed in one line (a full disk included)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


class Terminated(BaseException):
    """SIGTERM arrived: the runs being logged end KILLED."""


def log_evaluation(
    result: EvaluationResult,
    out_dir: str | Path,
    *,
    tracking_uri: str | None = None,
    run_name: str | None = None,
    tags: dict[str, str] | None = None,
    run_id: str | None = None,
) -> LoggedRuns:
    """Log a finished evaluation whose local outputs are already in ``out_dir`` (see :func:`log_folder`).

    Inside a run the caller already has open (``mlflow.active_run()``), or with ``run_id``, that run is the
    evaluation's run: the system runs nest under it and no new evaluation run is created."""
    spec = result.spec
    configure_http(spec.mlflow.timeout, spec.mlflow.max_retries)
    uri = tracking_uri or spec.mlflow.tracking_uri
    if run_id is None:
        import mlflow

        active = mlflow.active_run()
        if active is not None:
            run_id = active.info.run_id
            uri = tracking_uri or mlflow.get_tracking_uri()  # the store the active run lives in
    return log_folder(out_dir, tracking_uri=uri, run_name=run_name, tags=tags, run_id=run_id)


def log_folder(
    out_dir: str | Path,
    *,
    tracking_uri: str | None = None,
    run_name: str | None = None,
    tags: dict[str, str] | None = None,
    run_id: str | None = None,
) -> LoggedRuns:
    """Log the output folder of a finished evaluation (see :func:`_log_folder`), holding the folder's lock
    (:func:`ndcg_mlflow.outputs.folder_lock`) throughout: one process at a time writes, logs or uploads a
    folder, so a second upload of it waits and then finds the first one complete. ``tags`` (``--tag``) are set
    on every run, after the spec's ``mlflow.tags``."""
    from ..outputs.folder import folder_lock, refuse_non_folder

    refuse_non_folder(Path(out_dir))
    with folder_lock(out_dir):
        return _log_folder(out_dir, tracking_uri=tracking_uri, run_name=run_name, tags=tags, run_id=run_id)


def _log_folder(
    out_dir: str | Path,
    *,
    tracking_uri: str | None = None,
    run_name: str | None = None,
    tags: dict[str, str] | None = None,
    run_id: str | None = None,
) -> LoggedRuns:
    """Log the output folder of a finished evaluation: everything logged is read from the folder, which
    must be complete and unchanged (its ``manifest.json``) with a valid run key, else a DataError.

    Idempotent: the folder's run key (``run_key.txt``) tags every run; a complete earlier upload is
    reused as it is, and the runs of an incomplete one are deleted before logging again, so one
    complete set of runs remains. On any failure (or SIGINT / SIGTERM) the runs created so far end
    FAILED (or KILLED) with a tag saying how far logging got, and a :class:`TrackingError` names the
    server, what failed and where the local results are. The time is bounded whatever the server does
    (:class:`_Logging`, :class:`Bounds`); a store that does not persist is refused (NdcgError, exit 2).
    """
    import mlflow

    from ..outputs.folder import read_result_folder

    out_dir = Path(out_dir)
    folder = read_result_folder(out_dir)  # complete, unchanged, a valid run key and summary: else DataError
    summary, run_key = folder.summary, folder.run_key
    settings = summary.get("mlflow", {})
    configure_http(settings.get("timeout"), settings.get("max_retries"))
    uri = tracking_uri or settings.get("tracking_uri") or mlflow.get_tracking_uri()
    problem = store_problem(uri)
    if problem:
        raise NdcgError(f"tracking URI: {problem}")
    custom = {**(settings.get("tags") or {}), **(tags or {})}
    state = _Logging(uri, out_dir, summary, run_key, run_name, settings.get("total_timeout"), custom)
    state.attach = run_id
    with _store_lock(uri):
        return state.run()


def _log_body(state: _Logging) -> LoggedRuns:
    """The logging itself, in the worker thread of :meth:`_Logging.run` (which bounds its time)."""
    from mlflow.tracking import MlflowClient

    summary, settings, out_dir, run_key = state.summary, state.summary.get("mlflow", {}), state.out_dir, state.run_key
    state.raw_client = MlflowClient(tracking_uri=state.uri)  # opens (and on first use migrates) a local store
    client = _Guarded(state.raw_client, state)
    attached = None
    if state.attach is not None:
        state.stage = f"reading the run {state.attach} to log into"
        attached = _attachable(client, state.attach, run_key, state.uri)
        _check_params(attached, _evaluation_params(summary))  # before anything is logged into it
        experiment_id = attached.info.experiment_id  # the system runs nest under it, in its experiment
    else:
        state.stage = "creating the experiment"
        experiment_id = find_or_create_experiment(client, settings.get("experiment") or summary["name"])
    state.experiment_id = experiment_id
    state.stage = "ending the runs of earlier uploads that died while logging"
    _end_dead_runs(client, experiment_id, run_key)
    state.stage = "looking for an earlier upload of this result"
    done = _previous_upload(client, experiment_id, run_key)
    if done is not None:
        if state.custom_tags:  # tags given now are set on the runs of the earlier upload too
            state.stage = "setting the tags on the runs of the earlier upload"
            for rid in (done.parent_run_id, *done.system_run_ids.values()):
                log_batch(client, rid, {}, {}, state.custom_tags)
        return done._replace_uri(state.uri)
    state.stage = "creating the evaluation run"
    import datetime as _dt

    now = _dt.datetime.now(_dt.timezone.utc)
    given_name = state.run_name or settings.get("run_name")
    name = given_name or evaluation_run_name(summary, now)
    if attached is not None:  # the caller's run: tagged, never renamed, ended or deleted by this tool
        pid = attached.info.run_id
        tags = {k: v for k, v in parent_tags(summary, out_dir, run_key).items() if k != "mlflow.note.content"}
        state.logging_into = pid  # from here on, a failure is said on the caller's run too
        log_batch(client, pid, {}, {}, {**tags, ATTACHED_TAG: "true"})
    else:
        parent = client.create_run(
            experiment_id, run_name=name, tags={**parent_tags(summary, out_dir, run_key), **state.owner_tags}
        )
        pid = parent.info.run_id
        state.created.append(pid)
    logged = LoggedRuns(state.uri, experiment_id, pid)
    linked = _linked_models(client, summary)
    judgments = judgments_dataset(summary)

    params = _evaluation_params(summary)
    parent_metrics = {
        f"{system}.{k}": v for system, means in summary["systems"].items() for k, v in system_metrics(means).items()
    }
    state.stage = "logging the datasets of the evaluation run"
    models = (summary.get("models") or {}).items()
    log_inputs(client, pid, datasets=[judgments] + [candidates_dataset(n, r, summary) for n, r in models])

    for system, means in summary["systems"].items():
        state.stage = f"logging the run of system '{system}'"
        cid = _log_system(
            client,
            experiment_id,
            pid,
            summary,
            system,
            means,
            out_dir,
            run_key,
            created=state.created,
            owner_tags=state.owner_tags,
            run_name=system_run_name(system, summary, now, given_name),
            custom_tags=state.custom_tags,
            model_id=linked.get(system),
            judgments=judgments,
        )
        logged.system_run_ids[system] = cid

    state.stage = "logging the artifacts, figures, params, tags and metrics of the evaluation run"
    log_outputs(
        client,
        pid,
        out_dir,
        summary,
        metrics=parent_metrics,
        params=params,
        tags=state.custom_tags,
        final_tags={f"{TAG_PREFIX}.logging": "complete"},
    )
    if attached is None:
        client.set_terminated(pid, "FINISHED")
    return logged


ATTACHED_TAG = f"{TAG_PREFIX}.attached"  # "true" on a run the caller owns that an evaluation was logged into


def _attachable(client, run_id: str, run_key: str, uri: str):
    """The caller's run to log into (``--run-id``, or the active run), or an NdcgError (exit 2) saying why not:
    it does not exist, is deleted, or already holds another evaluation (a run holds one evaluation)."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        raise NdcgError(
            f"run {run_id} to log into (--run-id, or the active run): no such run in {safe_uri(uri)} "
            f"({first_line(exc)})."
        ) from None
    if run.info.lifecycle_stage == "deleted":
        raise NdcgError(
            f"run {run_id} to log into (--run-id, or the active run): the run is deleted; restore it "
            f"or log into another run."
        )
    held = run.data.tags.get(f"{TAG_PREFIX}.run_key")
    if held is not None and held != run_key:
        raise NdcgError(
            f"run {run_id} to log into (--run-id, or the active run): the run already holds another "
            f"evaluation (run key {held}); a run holds one evaluation: log this one into a run of its own."
        )
    return run


def _evaluation_params(summary: dict) -> dict[str, str]:
    """The evaluation run's params: every resolved spec field, and the number of queries."""
    params = {k: param_value(v) for k, v in summary["spec"].items()}
    params["n_queries"] = str(summary["n_queries"])
    return params


def _check_params(run, params: dict[str, str]) -> None:
    """MLflow refuses to change a param: a param of the caller's run that the evaluation would log with another
    value is refused before anything is logged (exit 2)."""
    clash = [k for k, v in params.items() if k in run.data.params and run.data.params[k] != v]
    if clash:
        k = clash[0]
        raise NdcgError(
            f"run {run.info.run_id} to log into (--run-id, or the active run): the run has the param "
            f"{k!r} = {run.data.params[k]!r}, and the evaluation logs {k!r} = {params[k]!r}; MLflow does "
            f"not change a param ({len(clash)} such param(s)). Log the evaluation into another run."
        )


def _linked_models(client, summary: dict) -> dict[str, str]:
    """system -> the logged model id its metrics are linked to: the models of ``summary.json`` that the store
    holds (a folder uploaded to another store keeps its numbers, without the link)."""
    from mlflow.exceptions import MlflowException

    out = {}
    for system, record in (summary.get("models") or {}).items():
        model_id = record.get("model_id")
        if not model_id:
            continue
        try:
            client.get_logged_model(model_id)
        except MlflowException:
            continue
        out[system] = model_id
    return out


def _dataset(name: str, path: str, sha256: str, rows: int | None, context: str, version: Any = None):
    """An MLflow dataset input for a data file (the name, the first 16 hex digits of its sha256 as the digest,
    its path as the source, with the version read when it is a Delta table): fills the Dataset column of the run
    in the MLflow UI."""
    import json

    from mlflow.entities import Dataset, DatasetInput, InputTag

    source = {"uri": path} if version is None else {"uri": path, "delta_version": version}
    dataset = Dataset(
        name=name,
        digest=sha256[:16],
        source_type="local",
        source=json.dumps(source),
        profile=json.dumps({"num_rows": rows}) if rows is not None else None,
    )
    return DatasetInput(dataset, tags=[InputTag("mlflow.data.context", context)])


def judgments_dataset(summary: dict):
    f = summary.get("files", {}).get("qrels", {})
    return _dataset(
        "judgments",
        f.get("path", ""),
        f.get("sha256", ""),
        f.get("rows"),
        "evaluation",
        summary.get("spec", {}).get("data.qrels.version"),
    )


def candidates_dataset(system: str, record: dict, summary: dict):
    version = summary.get("spec", {}).get(f"data.systems.{system}.candidates.version")
    return _dataset(
        f"candidates {record.get('candidates')}",
        record.get("candidates") or "",
        record.get("candidates_sha256") or "",
        record.get("candidate_rows"),
        "candidates",
        version,
    )


def _log_system(
    client,
    experiment_id: str,
    pid: str,
    summary: dict,
    name: str,
    means: dict,
    out_dir: Path,
    run_key: str,
    *,
    created: list[str] | None = None,
    owner_tags: dict[str, str] | None = None,
    run_name: str | None = None,
    custom_tags: dict[str, str] | None = None,
    model_id: str | None = None,
    judgments: Any = None,
) -> str:
    """One system's run; its id joins ``created`` as soon as it exists (the caller ends it on a failure).

    Metrics: the system's means and intervals and, for a candidate, its comparisons with the baseline
    (``compare.<key>.<figure>``); tables: its per-query rows, its figures and its comparisons."""
    from ..spec import system_file_stem

    files = summary.get("files", {})
    child = client.create_run(
        experiment_id,
        run_name=run_name or name,
        tags={**(owner_tags or {}), **system_tags(summary, name, pid, run_key)},
    )
    cid = child.info.run_id
    if created is not None:
        created.append(cid)
    params = {
        k: param_value(v)
        for k, v in summary["spec"].items()
        if k.startswith(("metric.", "queries.", "uncertainty.", "comparison.")) or k in ("name", "data.qrels")
    }
    params["system"] = name
    params["run_file"] = files.get(f"system:{name}", {}).get("path", "")
    params["n_queries"] = str(summary["n_queries"])
    rows = [c for c in summary.get("comparisons") or [] if c.get("candidate") == name]
    metrics = {**system_metrics(means), **comparison_metrics(rows, summary["spec"].get("comparison.test"))}
    record = (summary.get("models") or {}).get(name)
    if record:
        params["model"] = record["loaded_uri"]
    dataset = (judgments.dataset.name, judgments.dataset.digest) if judgments is not None else None
    inputs = ([judgments] if judgments is not None else []) + (
        [candidates_dataset(name, record, summary)] if record else []
    )
    if inputs or model_id:
        from mlflow.entities import LoggedModelInput

        log_inputs(client, cid, datasets=inputs or None, models=[LoggedModelInput(model_id)] if model_id else None)
    stem = system_file_stem(name)
    files = [out_dir / "systems" / f"{stem}.{suffix}" for suffix in ("per_query.csv", "top.csv", "scored.parquet")]
    tables_tag = _upload(
        client,
        cid,
        [f for f in files if f.exists()] + [out_dir / "summary.json"],
        _tables(out_dir, summary, system=name),
    )
    # the metrics, params and tags with the tag saying the run is complete: one batch, after the artifacts
    log_batch(
        client,
        cid,
        metrics,
        params,
        {**(custom_tags or {}), **tables_tag},
        model_id=model_id,
        dataset=dataset,
        final_tags={f"{TAG_PREFIX}.logging": "complete"},
    )
    client.set_terminated(cid, "FINISHED")
    return cid


def log_outputs(
    client,
    run_id: str,
    out_dir: Path,
    summary: dict | None = None,
    *,
    metrics: dict[str, float] | None = None,
    params: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
    final_tags: dict[str, str] | None = None,
) -> None:
    """A folder's files (those of :data:`ARTIFACTS` present) as artifacts of a run, its tables as MLflow tables
    and its figures (:func:`log_figures`), in one upload; then the tag listing the tables, with ``metrics``,
    ``params`` and ``tags``, in one batch, ``final_tags`` in its last part: what an evaluation run and a
    comparison run both carry."""
    files = [out_dir / fname for fname in ARTIFACTS if (out_dir / fname).is_file()]
    listed = _upload(client, run_id, files, _tables(out_dir, summary), figures_of=out_dir)
    log_batch(client, run_id, metrics or {}, params or {}, {**listed, **(tags or {})}, final_tags=final_tags)


def _upload(
    client, run_id: str, files: list[Path], tables: list[tuple[str, Any]], figures_of: Path | None = None
) -> dict[str, str]:
    """``files`` (at the top of the run's artifacts, under their names) and ``tables`` (name, DataFrame) as
    MLflow tables, in one ``log_artifacts`` of a staging folder: one call, where ``log_artifact`` per file
    and ``log_table`` (four requests a table: a listing, the upload, reading the run, setting a tag) took
    dozens. A table is written as ``log_table`` writes it (pandas' JSON, ``orient="split"``); the tag that
    lists a run's tables for the MLflow UI is returned for the caller to set with the run's other tags.
    ``figures_of``: an output folder whose figures go under ``figures/`` in the same upload."""
    import json
    import shutil
    import tempfile

    from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

    with tempfile.TemporaryDirectory(prefix="ndcg-mlflow-artifacts-") as staging:
        for path in files:
            target = Path(staging) / path.name
            if path.is_dir():  # a model's scored rows written by Spark: a folder of Parquet part files
                shutil.copytree(path, target)
                continue
            _link_or_copy(path, target)
        for name, frame in tables:
            (Path(staging) / name).write_text(_table_text(frame), encoding="utf-8")
        if figures_of is not None:
            _stage_figures(figures_of, Path(staging))
        client.log_artifacts(run_id, staging)
    if not tables:
        return {}
    return {MLFLOW_LOGGED_ARTIFACTS: json.dumps([{"path": name, "type": "table"} for name, _ in tables])}


_TABLE_KEY = "ndcg_mlflow.table_key"  # a table's frame.attrs entry: (sha256 of its CSV's bytes, filter column, system)
_TABLE_TEXTS: dict[Any, str] = {}  # the last few tables' JSON by the content of the CSV file they were read from
_TABLE_TEXTS_LOCK = threading.Lock()  # (evaluations may be logged from several threads at once)


def _table_text(frame: Any) -> str:
    """:func:`table_json` of a table, the JSON of a table read from the same bytes (``_tables``: one system's
    rows are the evaluation's, logged to both runs) made once; ``frame`` may be that JSON already (``_tables``
    found it made)."""
    if isinstance(frame, str):
        return frame
    key = frame.attrs.get(_TABLE_KEY)
    if key is None:
        return table_json(frame)
    with _TABLE_TEXTS_LOCK:
        text = _TABLE_TEXTS.get(key)
    if text is None:
        text = table_json(frame)
        with _TABLE_TEXTS_LOCK:
            while len(_TABLE_TEXTS) >= 4:
                _TABLE_TEXTS.pop(next(iter(_TABLE_TEXTS)))
            _TABLE_TEXTS[key] = text
    return text


def table_json(frame: Any) -> str:
    """A DataFrame as an MLflow table's JSON (pandas' ``orient="split"`` without the index: ``{"columns": [...],
    "data": [[...], ...]}``), written column by column: a missing value (NaN, None, NA) and an infinity are
    null, as pandas writes them; a number is written in full (pandas' writer rounds to 10 decimal places)."""
    import json
    import math

    import numpy as np
    import pandas as pd

    na, nat, isfinite = pd.NA, pd.NaT, math.isfinite
    columns = []
    for name in frame.columns:
        column = frame[name]
        kind = column.dtype.kind
        array = column.to_numpy(dtype=None if kind in "fiub" else object)
        values = array.tolist()
        if kind == "f":
            if not np.isfinite(array).all():  # (a column without NaN or infinity is written as it is)
                values = [v if isfinite(v) else None for v in values]
        elif kind not in "iub" and not (isinstance(column.dtype, pd.StringDtype) and not column.isna().any()):
            values = [
                None if v is None or v is na or v is nat or (isinstance(v, float) and not isfinite(v)) else v
                for v in values
            ]
        columns.append(values)
    return json.dumps(
        {"columns": [str(c) for c in frame.columns], "data": [list(row) for row in zip(*columns)]},
        allow_nan=False,
        default=str,
    )


def _tables(out_dir: Path, summary: dict | None, system: str | None = None) -> list[tuple[str, Any]]:
    """The tables as MLflow tables (shown by the MLflow UI), each as (name, DataFrame), or (name, its JSON) when
    the JSON of a table read from the same bytes with the same filter was made before: the per-query rows
    (``per_query_table.json``), every figure of ``summary.json`` (``figures_table.json``), the comparisons
    (``comparisons_table.json``) and the sensitivity table; ``system`` keeps one system's rows (its own run)."""
    import hashlib
    import io

    import pandas as pd

    tables: list[tuple[str, str, str | None]] = []
    if system is None:
        tables.append(("per_query.csv", "per_query_table.json", None))
    else:
        from ..spec import system_file_stem

        tables.append((f"systems/{system_file_stem(system)}.per_query.csv", "per_query_table.json", None))
    tables += [
        ("comparisons.csv", "comparisons_table.json", "candidate"),
        ("sensitivity.csv", "sensitivity_table.json", "system"),
    ]
    out: list[tuple[str, Any]] = []
    for csv_name, table_name, column in tables:
        path = out_dir / csv_name
        if not path.is_file():
            continue
        data = path.read_bytes()
        key = (hashlib.sha256(data).hexdigest(), column, system if column else None)
        with _TABLE_TEXTS_LOCK:
            text = _TABLE_TEXTS.get(key)
        if text is not None:  # a table of these bytes (and this filter) made before: its JSON, not parsed again
            out.append((table_name, text))
            continue
        frame = pd.read_csv(
            io.BytesIO(data),
            dtype={"query_id": str, "cutoff": str, "system": str, "candidate": str, "baseline": str},
            keep_default_na=False,
            na_values=[""],
        )
        if system is not None and column is not None:
            if column not in frame.columns:
                continue
            frame = frame[frame[column] == system]
            if frame.empty:
                continue
        frame.attrs[_TABLE_KEY] = key
        out.append((table_name, frame))
    if summary is not None:
        systems = summary["systems"] if system is None else {system: summary["systems"][system]}
        out.append(("figures_table.json", pd.DataFrame(figure_rows(systems))))
    return out


def filter_literal(value: str) -> str:
    """``value`` as a string literal of an MLflow search filter. MLflow strips the quotes without
    unescaping anything, so the value is quoted with a quote character it does not contain; a value
    holding both quote characters or a backslash cannot be written and is refused (run keys are hex)."""
    for quote in ("'", '"'):
        if quote not in value and "\\" not in value:
            return f"{quote}{value}{quote}"
    raise ValueError(f"{value!r} cannot be used in an MLflow search filter")


def _previous_upload(client, experiment_id: str, run_key: str) -> LoggedRuns | None:
    """A complete earlier upload of the same folder, or None after deleting the runs of an incomplete one."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`{TAG_PREFIX}.run_key` = {filter_literal(run_key)}", max_results=1000
    )
    parents = [r for r in runs if r.data.tags.get(f"{TAG_PREFIX}.role") == "evaluation"]
    complete = [
        r
        for r in parents
        if r.data.tags.get(f"{TAG_PREFIX}.logging") == "complete"
        and (r.info.status == "FINISHED" or r.data.tags.get(ATTACHED_TAG) == "true")
    ]
    if complete:
        parent = complete[0]
        children = {
            r.data.tags.get(f"{TAG_PREFIX}.system"): r.info.run_id
            for r in runs
            if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
        }
        logged = LoggedRuns("", experiment_id, parent.info.run_id, children)
        logged.reused = True
        return logged
    for r in runs:  # an incomplete earlier upload: end its runs, then delete them (never the caller's own run)
        if r.data.tags.get(ATTACHED_TAG) == "true":
            continue
        if r.info.status in ("RUNNING", "SCHEDULED"):
            client.set_tag(r.info.run_id, f"{TAG_PREFIX}.logging", "superseded by a later upload")
            client.set_terminated(r.info.run_id, "FAILED")
        client.delete_run(r.info.run_id)
    return None


def log_figures(client, run_id: str, out_dir: Path) -> None:
    """The report's figures as SVG files (``figures/<name>.svg``; MLflow's artifact viewer shows them as
    images): those of the output folder, or, for a folder written without them, drawn from its files
    (:func:`log_outputs` uploads them with the folder's other files)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ndcg-mlflow-figures-") as tmp:
        _stage_figures(out_dir, Path(tmp))
        client.log_artifacts(run_id, str(Path(tmp) / "figures"), "figures")


def _stage_figures(out_dir: Path, staging: Path) -> None:
    """``staging/figures/<name>.svg``: the output folder's figures (linked where a link will do), or, for a
    folder written without them, drawn from its files."""
    from ..report import figures, load_bundle, write_figures

    folder = out_dir / "figures"  # holds the figures' SVG files only
    drawn = sorted(folder.glob("*.svg")) if folder.is_dir() else []
    if not drawn:
        write_figures(str(staging), figures(load_bundle(out_dir)))
        return
    (staging / "figures").mkdir()
    for path in drawn:
        _link_or_copy(path, staging / "figures" / path.name)


def _link_or_copy(path: Path, target: Path) -> None:
    """``target``: the file as it is at ``path``, not copied where a link will do (a staging folder's entry)."""
    import shutil

    try:
        os.link(path, target)
    except OSError:
        shutil.copyfile(path, target)


def find_or_create_experiment(client, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            raise RuntimeError(f"experiment '{name}' is deleted; restore it or choose another mlflow.experiment")
        return exp.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:
        exp = client.get_experiment_by_name(name)  # created concurrently by another evaluation
        if exp is None:
            raise
        return exp.experiment_id


def log_inputs(client, run_id: str, **inputs: Any) -> None:
    """``client.log_inputs``, once more when the store refuses it: a store creates an experiment's dataset by
    looking it up, then inserting it, so two evaluations logging the same judgments at once can collide on the
    insert; the second try finds the dataset the other one made (an input already on the run is not added twice)."""
    import time

    from mlflow.exceptions import MlflowException

    try:
        client.log_inputs(run_id, **inputs)
    except MlflowException:
        time.sleep(0.2)
        client.log_inputs(run_id, **inputs)


def log_batch(
    client,
    run_id: str,
    metrics: dict[str, float],
    params: dict[str, str],
    tags: dict[str, str],
    *,
    model_id: str | None = None,
    dataset: tuple[str, str] | None = None,
    final_tags: dict[str, str] | None = None,
) -> None:
    """Metrics, params and tags in batches of MLflow's limits; the metrics linked to the logged model
    ``model_id`` (shown on its page) and to the dataset ``(name, digest)`` when given. ``final_tags`` (the tag
    saying logging is complete) go in the last batch, once everything else is logged: in the one batch when all
    fits in one. Every param and tag value is logged without credentials (:func:`redact`)."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    name, digest = dataset if dataset is not None else (None, None)
    m = [
        Metric(
            k,
            float(v) if v is not None else math.nan,
            now,
            0,
            model_id=model_id,
            dataset_name=name,
            dataset_digest=digest,
        )
        for k, v in metrics.items()
    ]
    p = [Param(k, _logged(v)) for k, v in params.items()]
    t = [RunTag(k, _logged(v)) for k, v in tags.items()]
    last = [RunTag(k, _logged(v)) for k, v in (final_tags or {}).items()]
    chunks = list(_chunks(m, p, t))
    if last and chunks and len(chunks[-1][2]) + len(last) <= MAX_TAGS:
        chunks[-1] = (chunks[-1][0], chunks[-1][1], chunks[-1][2] + last)
    elif last:
        chunks.append(([], [], last))
    for chunk_m, chunk_p, chunk_t in chunks:
        client.log_batch(run_id, metrics=chunk_m, params=chunk_p, tags=chunk_t)


def _logged(value: Any) -> Any:
    """A param or tag value as logged: a string without credentials (:func:`redact`)."""
    return redact(value) if isinstance(value, str) else value


def _chunks(m: list, p: list, t: list) -> Iterable[tuple[list, list, list]]:
    while m or p or t:
        yield m[:MAX_METRICS], p[:MAX_PARAMS], t[:MAX_TAGS]
        m, p, t = m[MAX_METRICS:], p[MAX_PARAMS:], t[MAX_TAGS:]


def fail_runs(client, run_ids: list[str], stage: str, status: str = "FAILED") -> None:
    """End ``run_ids`` with ``status`` and the tag ``ndcg_mlflow.logging`` saying how far logging got (best
    effort: stops at the first request that fails, as the ones after it would fail the same way)."""
    if client is None:
        return
    from mlflow.entities import RunTag

    word = "killed" if status == "KILLED" else "failed"
    for rid in run_ids:
        try:
            client.log_batch(rid, tags=[RunTag(f"{TAG_PREFIX}.logging", f"{word} while {stage}")])
            client.set_terminated(rid, status)
        except _Abandoned:
            return
        except Exception:  # noqa: BLE001 - cleanup must not hide the original error
            continue


@contextmanager
def _store_lock(uri: str):
    """Serialize writers of one local SQLite store (its first-use migration and concurrent writes race);
    a tracking server serializes its own writes."""
    import fcntl

    path = _sqlite_path(uri)
    if path is None:
        yield
        return
    lock = Path(str(path) + ".ndcg-mlflow.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+")  # noqa: SIM115 (entered below, once the open's error is reported)
    except OSError as exc:
        raise TrackingError(f"cannot open the MLflow store {safe_uri(uri)}: {exc.strerror or exc} ({lock}).") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:"):
        return None
    rest = uri[len("sqlite:") :]
    if rest.startswith("////"):
        return Path(rest[3:])
    if rest.startswith("///"):
        return Path(rest[3:])
    return None


def _end_strays(client, run_key: str, stage: str, status: str, experiment_id: str | None = None) -> None:
    """End runs of this upload that a request created but whose id never came back (an interrupted
    create_run): found by the run key, best effort (the server may be gone)."""
    if client is None:
        return
    try:
        exps = [experiment_id] if experiment_id else [e.experiment_id for e in client.search_experiments()]
        runs = client.search_runs(
            exps,
            filter_string=f"tags.`{TAG_PREFIX}.run_key` = {filter_literal(run_key)} and attributes.status = 'RUNNING'",
            max_results=1000,
        )
    except Exception:  # noqa: BLE001 - cleanup must not hide the original error
        return
    fail_runs(client, [r.info.run_id for r in runs if r.data.tags.get(ATTACHED_TAG) != "true"], stage, status=status)


# --------------------------------------------------------------------------- bounded time

TOTAL_TIMEOUT = 600.0  # default of mlflow.total_timeout: seconds for the whole logging phase
CLEANUP_SECONDS = 5.0  # the best-effort ending of runs after a failure, on top of any bound
SIGNAL_CLEANUP_SECONDS = 3.0  # the same after SIGINT / SIGTERM: the process ends within about this
UPLOAD_RATE = 1 << 20  # bytes per second granted to a request for the body it uploads
CLOCK_SKEW = 120.0  # seconds allowed between this machine's clock and another's (stray runs)
_SLACK = 2.0


class _Abandoned(RuntimeError):
    """Logging was given up (a deadline, a signal): the abandoned thread makes no further request."""


@dataclass(frozen=True)
class Bounds:
    """The time bounds of logging to a tracking server (seconds), from the spec's ``mlflow`` section and
    MLflow's HTTP variables (:func:`configure_http` sets them)."""

    timeout: float  # per attempt of a request (MLFLOW_HTTP_REQUEST_TIMEOUT)
    retries: int  # MLFLOW_HTTP_REQUEST_MAX_RETRIES
    backoff: float  # MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR
    jitter: float  # MLFLOW_HTTP_REQUEST_BACKOFF_JITTER
    total: float  # mlflow.total_timeout: the whole logging phase
    cleanup: float = CLEANUP_SECONDS

    @classmethod
    def current(cls, total: float | None = None) -> Bounds:
        def number(name: str, default: float) -> float:
            try:
                value = float(os.environ.get(name, default))
            except ValueError:
                return default
            return value if math.isfinite(value) and value >= 0 else default

        return cls(
            timeout=number("MLFLOW_HTTP_REQUEST_TIMEOUT", 120) or 120.0,
            retries=int(number("MLFLOW_HTTP_REQUEST_MAX_RETRIES", 7)),
            backoff=number("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", 2),
            jitter=number("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", 1),
            total=float(total) if total else TOTAL_TIMEOUT,
        )

    def request(self, upload_bytes: int = 0) -> float:
        """Longest one request may take, all its attempts and backoff sleeps included, however the server
        behaves (a silent, trickling or frozen server included): (retries + 1) x timeout + the backoff
        sleeps + 2 s, plus 1 s per MiB it uploads."""
        sleeps = sum(min(self.backoff * 2**i, 120.0) + self.jitter for i in range(self.retries))
        return (self.retries + 1) * self.timeout + sleeps + _SLACK + upload_bytes / UPLOAD_RATE

    def worst_failure(self) -> float:
        """Longest a failing logging takes against a server that stops answering: one request's bound, then
        the cleanup's budget."""
        return self.request() + self.cleanup


class _Ctx:
    """What bounds the HTTP requests of one thread (the logging worker, or a cleanup)."""

    def __init__(self, bounds: Bounds, deadline: float, cancelled, *, cleanup: bool = False):
        self.bounds, self.deadline, self.cancelled, self.cleanup = bounds, deadline, cancelled, cleanup
        self.request: tuple[float, float, str] | None = None  # (started, limit, what) of the request under way

    def http(self, real, args, kwargs):
        if self.cancelled is not None and self.cancelled.is_set():
            raise _Abandoned("logging was given up")
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no time left for another request")
        timeout = kwargs.get("timeout") or self.bounds.timeout
        kwargs["timeout"] = max(0.5, min(float(timeout), remaining))
        if self.cleanup and kwargs.get("max_retries") is None:
            kwargs["max_retries"] = 0
        method = args[2] if len(args) > 2 else kwargs.get("method", "")
        endpoint = args[1] if len(args) > 1 else kwargs.get("endpoint", "")
        limit = self.bounds.request(_body_size(kwargs.get("data")))
        self.request = (time.monotonic(), limit, f"{method} {endpoint}".strip())
        try:
            return real(*args, **kwargs)
        finally:
            self.request = None


_LOCAL = __import__("threading").local()


def _body_size(data) -> int:
    if data is None:
        return 0
    if isinstance(data, (bytes, bytearray, str)):
        return len(data)
    try:
        return os.fstat(data.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        return 0


def _install_http_bounds() -> None:
    """Route MLflow's HTTP requests through :class:`_Ctx` in the threads that set one (elsewhere they pass
    through unchanged): each request gets a timeout cut to the time left, and the watchdog of
    :meth:`_Logging.run` knows which request is under way and since when."""
    import importlib

    for module_name in ("mlflow.utils.rest_utils", "mlflow.store.artifact.http_artifact_repo"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        real = getattr(module, "http_request", None)
        if real is None or getattr(real, "_ndcg_bounded", False):
            continue

        def bounded(*args, _real=real, **kwargs):
            ctx = getattr(_LOCAL, "ctx", None)
            if ctx is None:
                return _real(*args, **kwargs)
            return ctx.http(_real, args, kwargs)

        bounded._ndcg_bounded = True  # type: ignore[attr-defined]
        setattr(module, "http_request", bounded)  # noqa: B010 (mlflow's module, patched at run time)


class _Guarded:
    """An MlflowClient whose calls refuse to start once logging was given up."""

    def __init__(self, client, state: _Logging):
        self._client, self._state = client, state

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self._state.cancelled.is_set():
                raise _Abandoned("logging was given up")
            return attr(*args, **kwargs)

        return call


_ACTIVE_KEYS: set[str] = set()  # run keys being logged by this process


class _Logging:
    """One logging of an output folder, run in a worker thread that the calling thread can abandon.

    The calling thread waits and watches: the whole logging within ``mlflow.total_timeout``, each HTTP
    request within :meth:`Bounds.request`. When a bound is passed, or SIGINT / SIGTERM arrives (they are
    handled in the calling thread, never blocked by the network), the worker is abandoned (it makes no
    further request) and a cleanup with its own small budget ends the runs created so far.
    """

    def __init__(
        self,
        uri: str,
        out_dir: Path,
        summary: dict,
        run_key: str,
        run_name: str | None,
        total: float | None,
        custom_tags: dict[str, str] | None = None,
    ):
        import threading

        self.uri, self.out_dir, self.summary, self.run_key, self.run_name = uri, out_dir, summary, run_key, run_name
        self.custom_tags = dict(custom_tags or {})
        self.bounds = Bounds.current(total)
        self.stage = "connecting"
        self.created: list[str] = []
        self.raw_client: Any = None  # the MlflowClient, once created
        self.experiment_id: str | None = None
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.result: LoggedRuns | None = None
        self.error: BaseException | None = None
        deadline_epoch = int(time.time() + self.bounds.total + self.bounds.cleanup + 1)
        self.owner_tags = {f"{TAG_PREFIX}.owner": owner_id(), f"{TAG_PREFIX}.logging_deadline": str(deadline_epoch)}
        self.ctx: _Ctx | None = None
        self.attach: str | None = None  # the caller's run to log into, instead of a new evaluation run
        self.logging_into: str | None = None  # that run, once it was checked and logging into it began

    def _work(self) -> None:
        _LOCAL.ctx = self.ctx
        try:
            self.result = _log_body(self)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self.error = exc
        finally:
            self.done.set()

    def _overdue(self) -> str | None:
        """Why the worker is to be abandoned now, or None."""
        assert self.ctx is not None  # set by run() before the worker starts
        now = time.monotonic()
        if now >= self.ctx.deadline:
            return (
                f"logging did not finish within mlflow.total_timeout = {self.bounds.total:g} s (the server "
                f"answers too slowly, or not at all)"
            )
        request = self.ctx.request
        if request is not None and now - request[0] > request[1]:
            return (
                f"the server did not answer within {request[1]:.0f} s ({request[2]}; mlflow.timeout "
                f"{self.bounds.timeout:g} s per attempt, {self.bounds.retries} retries)"
            )
        return None

    def run(self) -> LoggedRuns:
        import threading

        _install_http_bounds()
        self.ctx = _Ctx(self.bounds, time.monotonic() + self.bounds.total, self.cancelled)
        worker = threading.Thread(target=self._work, name="ndcg-mlflow-logging", daemon=True)
        _ACTIVE_KEYS.add(self.run_key)
        try:
            worker.start()
            overdue = None
            while not self.done.wait(0.1):
                overdue = self._overdue()
                if overdue:
                    break
        except (KeyboardInterrupt, Terminated):
            self._give_up("KILLED")
            raise
        finally:
            _ACTIVE_KEYS.discard(self.run_key)
        if overdue and not self.done.is_set():
            self._give_up("FAILED")
            raise TrackingError(self._message(overdue))
        error = self.error
        if error is None:
            assert self.result is not None  # set by the worker when it raised nothing
            return self.result
        if isinstance(error, (KeyboardInterrupt, Terminated)):
            self._give_up("KILLED")
            raise error
        self._give_up("FAILED")
        if isinstance(error, NdcgError):
            raise error
        if not isinstance(error, Exception):
            raise error
        raise TrackingError(self._message(_describe(error, self.uri))) from error

    def _message(self, what: str) -> str:
        return (
            f"logging to MLflow at {safe_uri(self.uri)} failed while {self.stage}: {what}. The complete "
            f"local results are in {self.out_dir}; log them later with 'ndcg-mlflow upload {self.out_dir}"
            + (f" --run-id {self.attach}" if self.attach else "")
            + "'."
        )

    def _give_up(self, status: str) -> None:
        """Abandon the worker, then end the runs it created (and any run of this key left RUNNING) within the
        cleanup budget, in a thread of its own: the network cannot hold this thread longer."""
        import threading

        self.cancelled.set()
        stage = self.stage
        budget = self.bounds.cleanup if status == "FAILED" else min(self.bounds.cleanup, SIGNAL_CLEANUP_SECONDS)
        ctx = _Ctx(self.bounds, time.monotonic() + budget, None, cleanup=True)

        def cleanup() -> None:
            _LOCAL.ctx = ctx
            client = self.raw_client
            try:
                if client is None:
                    from mlflow.tracking import MlflowClient

                    client = MlflowClient(tracking_uri=self.uri)
                fail_runs(client, list(self.created), stage, status=status)
                if self.logging_into is not None:  # the caller's run says how far logging got, and stays as it was
                    word = "killed" if status == "KILLED" else "failed"
                    client.set_tag(self.logging_into, f"{TAG_PREFIX}.logging", f"{word} while {stage}")
                _end_strays(client, self.run_key, stage, status, self.experiment_id)
            except BaseException:  # noqa: BLE001 - best effort
                pass

        helper = threading.Thread(target=cleanup, name="ndcg-mlflow-cleanup", daemon=True)
        helper.start()
        helper.join(budget)


def _describe(exc: BaseException, uri: str) -> str:
    """One line saying what went wrong; a full disk under a local store is named as such."""
    import errno

    seen, chain = set(), []
    item: BaseException | None = exc
    while item is not None and id(item) not in seen:
        seen.add(id(item))
        chain.append(item)
        item = item.__cause__ or item.__context__
    for item in chain:
        text = str(item).lower()
        if (
            getattr(item, "errno", None) == errno.ENOSPC
            or "no space left on device" in text
            or "database or disk is full" in text
        ):
            return "no space left on device: the store (or its artifact folder) is full, nothing more can be written"
    return f"{type(exc).__name__}: {first_line(exc)}"


def owner_id() -> str:
    """``host|pid-namespace|pid|process start``: tells whether the process logging a run is still alive."""
    return f"{_this_machine()}|{os.getpid()}|{process_start(os.getpid())}"


def _this_machine() -> str:
    """``host|pid-namespace``: the processes whose pids this process can check."""
    import socket

    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = "-"
    return f"{socket.gethostname()}|{namespace}"


def process_start(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks since boot
    except (OSError, IndexError):
        return "-"


def _owner_gone(owner: str | None, run_key: str | None, deadline: str | None, now: float) -> bool:
    """Whether the process that logged a run can no longer end it (see :func:`_end_dead_runs`)."""
    try:
        if deadline is not None and now > float(deadline) + CLOCK_SKEW:
            return True
    except ValueError:
        pass
    parts = (owner or "").split("|")
    if len(parts) != 4 or "|".join(parts[:2]) != _this_machine():
        return False  # another machine, or not tagged: only its logging deadline tells
    try:
        pid = int(parts[2])
    except ValueError:
        return False
    if pid == os.getpid():
        return parts[3] != process_start(pid) or run_key not in _ACTIVE_KEYS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    except OSError:
        return False
    started = process_start(pid)
    return started != "-" and parts[3] != "-" and started != parts[3]  # the pid now belongs to another process


def _end_dead_runs(client, experiment_id: str, run_key: str) -> list[str]:
    """End (FAILED) the runs of this experiment that an earlier logging left RUNNING and can no longer end.

    A run is ended when it carries this tool's role tag, its ``ndcg_mlflow.logging`` is not ``complete``,
    its status is RUNNING, it is not of the folder being logged now (its own upload handles those), and
    either its logging deadline (tag ``ndcg_mlflow.logging_deadline``, the time by which its logging has
    ended or given up) passed more than 2 minutes ago, or it was logged on this machine (same host name
    and process namespace, tag ``ndcg_mlflow.owner``) by a process that is no longer running. A live
    concurrent logging is never touched.
    """
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`{TAG_PREFIX}.logging` != 'complete'",
        max_results=1000,
    )
    now = time.time()
    dead = [
        r.info.run_id
        for r in runs
        if r.data.tags.get(f"{TAG_PREFIX}.role") in ("evaluation", "system")
        and r.data.tags.get(f"{TAG_PREFIX}.run_key") != run_key
        and _owner_gone(
            r.data.tags.get(f"{TAG_PREFIX}.owner"),
            r.data.tags.get(f"{TAG_PREFIX}.run_key"),
            r.data.tags.get(f"{TAG_PREFIX}.logging_deadline"),
            now,
        )
    ]
    for rid in dead:
        from mlflow.entities import RunTag

        client.log_batch(
            rid,
            tags=[RunTag(f"{TAG_PREFIX}.logging", "abandoned: the process logging it ended before it was complete")],
        )
        client.set_terminated(rid, "FAILED")
    return dead


def redact(text: str) -> str:
    """Text without credentials (see :func:`ndcg_mlflow.uris.redact`)."""
    from ..uris import redact as _redact

    return _redact(text)


def first_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip().splitlines()
    if not text:
        return ""
    line = text[0]
    return line if len(line) <= 500 else line[:500].rsplit(" ", 1)[0] + " …"


def safe_uri(uri: str) -> str:
    """The tracking URI without any credentials embedded in it."""
    return redact(str(uri))
