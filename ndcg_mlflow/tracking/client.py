"""Logging an output folder to MLflow: what is logged (the runs, their metrics, params, tags, datasets, artifacts
and tables) and the reuse of an earlier upload, run by :class:`.worker.Logging` within the bounds of
:mod:`.bounds`; and the helpers a comparison run shares (:func:`log_batch`, :func:`log_outputs`,
:func:`log_figures`). mlflow is imported lazily, inside the functions."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NdcgError
from ..result import EvaluationResult
from ..uris import first_line, redact, safe_uri, store_problem
from .bounds import configure_http
from .names import (
    ARTIFACTS,
    ATTACHED_TAG,
    TAG_PREFIX,
    comparison_metrics,
    evaluation_run_name,
    judge_metrics,
    param_value,
    parent_metrics,
    parent_tags,
    run_name_text,
    system_metrics,
    system_run_name,
    system_tags,
)
from .stale import earlier_upload, end_dead_runs
from .tables import folder_tables, table_text
from .worker import Logging, store_lock

MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100


@dataclass
class LoggedRuns:
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    system_run_ids: dict[str, str] = field(default_factory=dict)
    reused: bool = False  # an earlier complete upload of the same result


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


def default_tracking_uri() -> str:
    """The tracking URI used when none is given: ``MLFLOW_TRACKING_URI``, else MLflow's own (its global one, or
    its default store)."""
    import mlflow

    return os.environ.get("MLFLOW_TRACKING_URI") or mlflow.get_tracking_uri()


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
    (:class:`.worker.Logging`, :class:`.bounds.Bounds`); a store that does not persist is refused (NdcgError, exit 2).
    """
    import mlflow

    from ..outputs.folder import read_result_folder, snapshot_folder

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
    state = Logging(uri, out_dir, summary, run_key, run_name, settings.get("total_timeout"), custom)
    state.attach = run_id
    with tempfile.TemporaryDirectory(prefix="ndcg-mlflow-upload-") as tmp:
        # every file logged is read from a copy of the verified folder, made following no link and checked
        # against the manifest as it was read: a file replaced or rewritten since the check is refused, not logged
        state.source = snapshot_folder(out_dir, folder.manifest, Path(tmp) / "folder")
        with store_lock(uri):
            return state.run(_log_body)


def _log_body(state: Logging) -> LoggedRuns:
    """The logging itself, in the worker thread of :meth:`.worker.Logging.run` (which bounds its time)."""
    from mlflow.tracking import MlflowClient

    summary, settings, out_dir, run_key = state.summary, state.summary.get("mlflow", {}), state.out_dir, state.run_key
    client = state.client(MlflowClient(tracking_uri=state.uri))  # opens (and on first use migrates) a local store
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
    end_dead_runs(client, experiment_id, run_key)
    state.stage = "looking for an earlier upload of this result"
    done = earlier_upload(client, experiment_id, run_key)
    if done is not None:
        if state.custom_tags:  # tags given now are set on the runs of the earlier upload too
            state.stage = "setting the tags on the runs of the earlier upload"
            for rid in (done[0], *done[1].values()):
                log_batch(client, rid, {}, {}, state.custom_tags)
        return LoggedRuns(state.uri, experiment_id, *done, reused=True)
    state.stage = "creating the evaluation run"
    import datetime as _dt

    now = _dt.datetime.now(_dt.timezone.utc)
    given_name = state.run_name or settings.get("run_name")
    name = run_name_text(given_name) if given_name else evaluation_run_name(summary, now)
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
    metrics = parent_metrics(summary)
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
            state.source,
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
        state.source,
        summary,
        metrics=metrics,
        params=params,
        tags=state.custom_tags,
        final_tags={f"{TAG_PREFIX}.logging": "complete"},
    )
    if attached is None:
        client.set_terminated(pid, "FINISHED")
    return logged


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
    (``compare.<key>.<figure>``), with a judge the other views (:func:`~.names.judge_metrics`); tables: its
    per-query rows, its figures, its comparisons and its rows of the judge's table."""
    from ..spec import system_file_stem

    files = summary.get("files", {})
    child = client.create_run(
        experiment_id,
        run_name=run_name or run_name_text(name),
        tags={**(owner_tags or {}), **system_tags(summary, name, pid, run_key)},
    )
    cid = child.info.run_id
    if created is not None:
        created.append(cid)
    params = {
        k: param_value(v)
        for k, v in summary["spec"].items()
        if k.startswith(("metric.", "queries.", "uncertainty.", "comparison.", "judge."))
        or k in ("name", "data.qrels", "data.judge_qrels")
    }
    params["system"] = name
    params["run_file"] = files.get(f"system:{name}", {}).get("path", "")
    params["n_queries"] = str(summary["n_queries"])
    rows = [c for c in summary.get("comparisons") or [] if c.get("candidate") == name]
    metrics = {
        **system_metrics(means),
        **comparison_metrics(rows, summary["spec"].get("comparison.test")),
        **judge_metrics(summary.get("judge"), name),
    }
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
        folder_tables(out_dir, summary, system=name),
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
    listed = _upload(client, run_id, files, folder_tables(out_dir, summary), figures_of=out_dir)
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
            (Path(staging) / name).write_text(table_text(frame), encoding="utf-8")
        if figures_of is not None:
            _stage_figures(figures_of, Path(staging))
        client.log_artifacts(run_id, staging)
    if not tables:
        return {}
    return {MLFLOW_LOGGED_ARTIFACTS: json.dumps([{"path": name, "type": "table"} for name, _ in tables])}


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
    from ..render.report import figures, load_bundle, write_figures

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
