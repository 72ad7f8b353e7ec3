"""Logging an evaluation to MLflow: the only module that imports mlflow (lazily).

Layout of what is logged:

* one parent run for the evaluation (experiment ``mlflow.experiment`` of the spec):
  every resolved spec field as a param; tags with the sha256 of the spec, of the
  metric definition and of every data file, and the package version; per-system
  means as ``<system>.ndcg_at_<K>`` metrics and each comparison as
  ``compare.<candidate>.ndcg_at_<K>.<figure>``; artifacts ``spec.yaml``,
  ``summary.json``, ``per_query.csv``, ``comparisons.csv``, ``wins_losses.json``,
  ``wins_losses.md``, and the per-query and comparison tables through
  ``mlflow.log_table`` (``per_query_table.json``, ``comparisons_table.json``).
* one nested child run per system (tag ``mlflow.parentRunId``): metrics
  ``ndcg_at_<K>`` with counts and interval (``ndcg_at_10_ci_low`` ...), the metric
  params, and that system's per-query rows.

Metric keys never contain ``@`` (MLflow rejects it): ``nDCG@10`` is ``ndcg_at_10``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import __version__
from .errors import TrackingError
from .evaluation import EvaluationResult

TAG_PREFIX = "ndcg_mlflow"
ARTIFACTS = ("spec.yaml", "summary.json", "per_query.csv", "explanation.txt", "comparisons.csv",
             "wins_losses.json", "wins_losses.md", "bootstrap.csv", "sensitivity.csv", "report.html", "report.md")
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100


@dataclass
class LoggedRuns:
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    system_run_ids: dict[str, str] = field(default_factory=dict)
    reused: bool = False  # an earlier complete upload of the same result

    def _replace_uri(self, uri: str) -> "LoggedRuns":
        self.tracking_uri = uri
        return self


def system_metrics(means: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The metrics of one system: ``ndcg_at_K`` with its counts and interval, keyed without ``@``."""
    out: dict[str, float] = {}
    for key, m in means.items():
        out[key] = m["mean"]
        for extra in ("n_evaluated", "n_excluded", "n_missing", "n_empty_ideal", "weight_sum", "n_eff",
                      "ci_low", "ci_high", "std_error"):
            if extra in m:
                out[f"{key}_{extra}"] = m[extra]
        for companion in ("duplicate_rate", "catalog_coverage"):
            if companion in m:
                out[key.replace("ndcg_at_", f"{companion}_at_")] = m[companion]
        out[key.replace("ndcg_at_", "judged_coverage_at_")] = m["judged_coverage"]
    return out


COMPARISON_METRICS = ("delta", "ci_low", "ci_high", "std_error", "p_randomization", "p_t_test", "p_corrected",
                      "relative_delta", "effect_size_dz", "wins", "ties", "losses", "n_paired")


def comparison_metrics(comparisons: list[dict[str, Any]]) -> dict[str, float]:
    """Parent-run metrics of each comparison: ``compare.<candidate>.ndcg_at_10.delta`` and so on."""
    out: dict[str, float] = {}
    for row in comparisons:
        for field_name in COMPARISON_METRICS:
            value = row.get(field_name)
            if value is not None:
                out[f"compare.{row['candidate']}.{row['key']}.{field_name}"] = value
    return out


DEFAULT_HTTP = {  # fail within about 30 s against an unreachable server (MLflow's own defaults take minutes)
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "8",
}


def configure_http(timeout: float | None = None, max_retries: int | None = None) -> None:
    """Bounded retries and timeouts: the spec's ``mlflow`` section first, then MLflow's own environment
    variables when the user set them, then these defaults."""
    import os

    if timeout is not None:
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout)
    if max_retries is not None:
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(max_retries)
    for key, value in DEFAULT_HTTP.items():
        os.environ.setdefault(key, value)
    # MLflow prints "View run ... at <tracking URI>" lines, credentials included when the URI has them
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    import logging

    for name in ("mlflow.store.db.utils", "alembic"):  # schema-migration chatter of a new local store
        logging.getLogger(name).setLevel(logging.WARNING)


class Terminated(BaseException):
    """SIGTERM arrived: the runs being logged end KILLED."""


def log_evaluation(result: EvaluationResult, out_dir: str | Path, *, tracking_uri: str | None = None,
                   run_name: str | None = None) -> LoggedRuns:
    """Log a finished evaluation whose local outputs are already in ``out_dir`` (see :func:`log_folder`)."""
    spec = result.spec
    configure_http(spec.mlflow.timeout, spec.mlflow.max_retries)
    return log_folder(out_dir, tracking_uri=tracking_uri or spec.mlflow.tracking_uri, run_name=run_name)


def log_folder(out_dir: str | Path, *, tracking_uri: str | None = None, run_name: str | None = None) -> LoggedRuns:
    """Log the output folder of a finished evaluation: everything logged is read from the folder.

    Idempotent: the folder's run key (``run_key.txt``) tags every run; a complete earlier upload is
    reused as it is, and the runs of an incomplete one are deleted before logging again, so one
    complete set of runs remains. On any failure (or SIGINT / SIGTERM) the runs created so far end
    FAILED (or KILLED) with a tag saying how far logging got, and a :class:`TrackingError` names the
    server, what failed and where the local results are.
    """
    import json

    import mlflow
    from mlflow.tracking import MlflowClient

    out_dir = Path(out_dir)
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    run_key = (out_dir / "run_key.txt").read_text(encoding="utf-8").strip()
    settings = summary.get("mlflow", {})
    configure_http(settings.get("timeout"), settings.get("max_retries"))
    uri = tracking_uri or settings.get("tracking_uri") or mlflow.get_tracking_uri()
    client = None
    stage = "connecting"
    created: list[str] = []
    try:
        with _store_lock(uri):
            client = MlflowClient(tracking_uri=uri)  # opens (and on first use migrates) a local store
            stage = "creating the experiment"
            experiment_id = _experiment(client, settings.get("experiment") or summary["name"])
            stage = "looking for an earlier upload of this result"
            done = _previous_upload(client, experiment_id, run_key)
            if done is not None:
                return done._replace_uri(uri)
            stage = "creating the evaluation run"
            parent = client.create_run(experiment_id, run_name=run_name or settings.get("run_name")
                                       or summary["name"], tags=_parent_tags(summary, out_dir, run_key))
            pid = parent.info.run_id
            created.append(pid)
            logged = LoggedRuns(uri, experiment_id, pid)

            stage = "logging params, tags and metrics of the evaluation run"
            params = {k: _param(v) for k, v in summary["spec"].items()}
            parent_metrics = {f"{name}.{k}": v for name, means in summary["systems"].items()
                              for k, v in system_metrics(means).items()}
            parent_metrics.update(comparison_metrics(summary.get("comparisons") or []))
            parent_metrics["n_queries"] = float(summary["n_queries"])
            _log_batch(client, pid, parent_metrics, params, {})

            for name, means in summary["systems"].items():
                stage = f"logging the run of system '{name}'"
                cid = _log_system(client, experiment_id, pid, summary, name, means, out_dir, run_key)
                created.append(cid)
                logged.system_run_ids[name] = cid

            stage = "logging the artifacts of the evaluation run"
            for fname in ARTIFACTS:
                if (out_dir / fname).is_file():
                    client.log_artifact(pid, str(out_dir / fname))
            _log_tables(client, pid, out_dir)
            stage = "logging the figures of the evaluation run"
            _log_figures(client, pid, out_dir)
            client.set_tag(pid, f"{TAG_PREFIX}.logging", "complete")
            client.set_terminated(pid, "FINISHED")
            return logged
    except (KeyboardInterrupt, Terminated):
        _fail_runs(client, created, stage, status="KILLED")
        _end_strays(client, run_key, stage, "KILLED")
        raise
    except Exception as exc:  # any failure of the tracking side: end what was started, keep local results
        _fail_runs(client, created, stage)
        _end_strays(client, run_key, stage, "FAILED")
        raise TrackingError(
            f"logging to MLflow at {_safe_uri(uri)} failed while {stage}: {type(exc).__name__}: "
            f"{_first_line(exc)}. The complete local results are in {out_dir}; log them later with "
            f"'ndcg-mlflow upload {out_dir}'.") from exc


def _log_system(client, experiment_id: str, pid: str, summary: dict, name: str, means: dict, out_dir: Path,
                run_key: str) -> str:
    files = summary.get("files", {})
    child = client.create_run(experiment_id, run_name=name, tags={
        "mlflow.parentRunId": pid,
        f"{TAG_PREFIX}.role": "system",
        f"{TAG_PREFIX}.system": name,
        f"{TAG_PREFIX}.evaluation": summary["name"],
        f"{TAG_PREFIX}.run_key": run_key,
        f"{TAG_PREFIX}.spec_sha256": summary["spec_sha256"],
        f"{TAG_PREFIX}.definition_sha256": summary["definition_sha256"],
        f"{TAG_PREFIX}.run_file_sha256": files.get(f"system:{name}", {}).get("sha256", ""),
        f"{TAG_PREFIX}.qrels_sha256": files.get("qrels", {}).get("sha256", ""),
        f"{TAG_PREFIX}.version": summary.get("ndcg_mlflow_version", __version__),
        f"{TAG_PREFIX}.logging": "started",
        "mlflow.note.content": f"nDCG of system '{name}' in evaluation '{summary['name']}' (parent run {pid}).",
    })
    cid = child.info.run_id
    try:
        params = {k: _param(v) for k, v in summary["spec"].items()
                  if k.startswith(("metric.", "queries.", "uncertainty.", "comparison.")) or k in ("name", "data.qrels")}
        params["system"] = name
        params["run_file"] = files.get(f"system:{name}", {}).get("path", "")
        _log_batch(client, cid, system_metrics(means), params, {})
        for suffix in ("per_query.csv", "top.csv"):
            system_file = out_dir / "systems" / f"{name}.{suffix}"
            if system_file.is_file():
                client.log_artifact(cid, str(system_file))
        client.log_artifact(cid, str(out_dir / "summary.json"))
        client.set_tag(cid, f"{TAG_PREFIX}.logging", "complete")
        client.set_terminated(cid, "FINISHED")
    except BaseException:
        _fail_runs(client, [cid], f"logging the run of system '{name}'",
                   status="KILLED" if not isinstance(sys.exc_info()[1], Exception) else "FAILED")
        raise
    return cid


def _log_tables(client, pid: str, out_dir: Path) -> None:
    """The CSV tables as MLflow tables (shown by the MLflow UI), through this client's tracking URI."""
    import pandas as pd

    for csv_name, table_name in (("per_query.csv", "per_query_table.json"),
                                 ("comparisons.csv", "comparisons_table.json"),
                                 ("sensitivity.csv", "sensitivity_table.json")):
        path = out_dir / csv_name
        if path.is_file():
            frame = pd.read_csv(path, dtype={"query_id": str, "cutoff": str, "system": str},
                                keep_default_na=False, na_values=[""])
            client.log_table(pid, data=frame, artifact_file=table_name)


def _previous_upload(client, experiment_id: str, run_key: str) -> "LoggedRuns | None":
    """A complete earlier upload of the same folder, or None after deleting the runs of an incomplete one."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{TAG_PREFIX}.run_key` = '{run_key}'",
                              max_results=1000)
    parents = [r for r in runs if r.data.tags.get(f"{TAG_PREFIX}.role") == "evaluation"]
    complete = [r for r in parents if r.data.tags.get(f"{TAG_PREFIX}.logging") == "complete"
                and r.info.status == "FINISHED"]
    if complete:
        parent = complete[0]
        children = {r.data.tags.get(f"{TAG_PREFIX}.system"): r.info.run_id for r in runs
                    if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
        logged = LoggedRuns("", experiment_id, parent.info.run_id, children)
        logged.reused = True
        return logged
    for r in runs:  # an incomplete earlier upload: end its runs, then delete them
        if r.info.status in ("RUNNING", "SCHEDULED"):
            client.set_tag(r.info.run_id, f"{TAG_PREFIX}.logging", "superseded by a later upload")
            client.set_terminated(r.info.run_id, "FAILED")
        client.delete_run(r.info.run_id)
    return None


def _log_figures(client, run_id: str, out_dir: Path) -> None:
    """The report's figures as PNG images (``figures/<name>.png``)."""
    import matplotlib.pyplot as plt

    from .report import figures, load_bundle

    for name, fig in figures(load_bundle(out_dir)).items():
        try:
            client.log_figure(run_id, fig, f"figures/{name}.png")
        finally:
            plt.close(fig)


def _experiment(client, name: str) -> str:
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


def _parent_tags(summary: dict, out_dir: Path, run_key: str) -> dict[str, str]:
    systems = list(summary["systems"])
    tags = {
        f"{TAG_PREFIX}.role": "evaluation",
        f"{TAG_PREFIX}.evaluation": summary["name"],
        f"{TAG_PREFIX}.run_key": run_key,
        f"{TAG_PREFIX}.spec_sha256": summary["spec_sha256"],
        f"{TAG_PREFIX}.definition_sha256": summary["definition_sha256"],
        f"{TAG_PREFIX}.version": summary.get("ndcg_mlflow_version", __version__),
        f"{TAG_PREFIX}.systems": ",".join(systems),
        f"{TAG_PREFIX}.local_output": str(out_dir.resolve()),
        f"{TAG_PREFIX}.logging": "started",
        "mlflow.note.content": (f"nDCG evaluation '{summary['name']}' of {len(systems)} system(s) "
                                f"({', '.join(systems)}) on {summary['n_queries']} queries; cutoffs "
                                f"{summary['spec'].get('metric.cutoffs')}. The spec is the artifact spec.yaml, "
                                f"the report report.html."),
    }
    for role, f in summary.get("files", {}).items():
        tags[f"{TAG_PREFIX}.data.{role.replace('system:', 'system.')}.sha256"] = f["sha256"]
    outside = summary.get("paths_outside_spec_folder") or []
    if outside:
        tags[f"{TAG_PREFIX}.paths_outside_spec_folder"] = _param(", ".join(outside))
    return tags


def _param(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5990] + "...[cut]"


def _log_batch(client, run_id: str, metrics: dict[str, float], params: dict[str, str],
               tags: dict[str, str]) -> None:
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    m = [Metric(k, float(v) if v is not None else math.nan, now, 0) for k, v in metrics.items()]
    p = [Param(k, v) for k, v in params.items()]
    t = [RunTag(k, v) for k, v in tags.items()]
    for chunk_m, chunk_p, chunk_t in _chunks(m, p, t):
        client.log_batch(run_id, metrics=chunk_m, params=chunk_p, tags=chunk_t)


def _chunks(m: list, p: list, t: list) -> Iterable[tuple[list, list, list]]:
    while m or p or t:
        yield m[:MAX_METRICS], p[:MAX_PARAMS], t[:MAX_TAGS]
        m, p, t = m[MAX_METRICS:], p[MAX_PARAMS:], t[MAX_TAGS:]


def _fail_runs(client, run_ids: list[str], stage: str, status: str = "FAILED") -> None:
    if client is None:
        return
    word = "killed" if status == "KILLED" else "failed"
    for rid in run_ids:
        try:
            client.set_tag(rid, f"{TAG_PREFIX}.logging", f"{word} while {stage}")
        except Exception:
            pass
        try:
            client.set_terminated(rid, status)
        except Exception:
            pass


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
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:"):
        return None
    rest = uri[len("sqlite:"):]
    if rest.startswith("////"):
        return Path(rest[3:])
    if rest.startswith("///"):
        return Path(rest[3:])
    return None


def _end_strays(client, run_key: str, stage: str, status: str) -> None:
    """End runs of this upload that a request created but whose id never came back (an interrupted
    create_run): found by the run key, best effort (the server may be gone)."""
    if client is None:
        return
    try:
        exps = [e.experiment_id for e in client.search_experiments()]
        runs = client.search_runs(exps, filter_string=f"tags.`{TAG_PREFIX}.run_key` = '{run_key}' and "
                                                      f"attributes.status = 'RUNNING'", max_results=1000)
    except BaseException:  # noqa: BLE001 - cleanup must not hide the original error
        return
    _fail_runs(client, [r.info.run_id for r in runs], stage, status=status)


_CREDENTIALS = None


def redact(text: str) -> str:
    """Text without credentials embedded in URLs (``scheme://user:secret@host`` -> ``scheme://host``)."""
    import re

    global _CREDENTIALS
    if _CREDENTIALS is None:
        _CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")
    return _CREDENTIALS.sub(r"\1", text)


def _first_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip().splitlines()
    if not text:
        return ""
    line = text[0]
    return line if len(line) <= 500 else line[:500].rsplit(" ", 1)[0] + " …"


def _safe_uri(uri: str) -> str:
    """The tracking URI without any credentials embedded in it."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    return uri


def default_tracking_uri() -> str:
    import mlflow

    return os.environ.get("MLFLOW_TRACKING_URI") or mlflow.get_tracking_uri()
