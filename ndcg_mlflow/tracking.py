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
import time
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


def log_evaluation(result: EvaluationResult, out_dir: str | Path, *, tracking_uri: str | None = None,
                   run_name: str | None = None) -> LoggedRuns:
    """Log a finished evaluation whose local outputs are already in ``out_dir``.

    On any failure the runs created so far end FAILED with a tag saying how far
    logging got, and a :class:`TrackingError` names the server, what failed and
    where the local results are.
    """
    import mlflow
    from mlflow.tracking import MlflowClient

    out_dir = Path(out_dir)
    spec = result.spec
    uri = tracking_uri or spec.mlflow.tracking_uri or mlflow.get_tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    stage = "connecting"
    created: list[str] = []
    try:
        stage = "creating the experiment"
        experiment_id = _experiment(client, spec.mlflow.experiment)
        stage = "creating the evaluation run"
        parent = client.create_run(experiment_id, run_name=run_name or spec.mlflow.run_name or spec.name,
                                   tags=_parent_tags(result, out_dir))
        pid = parent.info.run_id
        created.append(pid)
        logged = LoggedRuns(uri, experiment_id, pid)

        stage = "logging params, tags and metrics of the evaluation run"
        params = {k: _param(v) for k, v in spec.resolved().items()}
        system_summary = result.summary["systems"]
        parent_metrics = {f"{name}.{k}": v for name in result.systems
                          for k, v in system_metrics(system_summary[name]).items()}
        if result.analysis is not None:
            parent_metrics.update(comparison_metrics(result.analysis.comparisons))
        parent_metrics["n_queries"] = float(len(result.query_ids))
        _log_batch(client, pid, parent_metrics, params, {})

        for name in result.systems:
            stage = f"logging the run of system '{name}'"
            src = dict(spec.systems)[name]
            child = client.create_run(experiment_id, run_name=name, tags={
                "mlflow.parentRunId": pid,
                f"{TAG_PREFIX}.role": "system",
                f"{TAG_PREFIX}.system": name,
                f"{TAG_PREFIX}.evaluation": spec.name,
                f"{TAG_PREFIX}.spec_sha256": spec.sha256,
                f"{TAG_PREFIX}.definition_sha256": spec.definition_digest(),
                f"{TAG_PREFIX}.run_file_sha256": _file_sha(result, f"system:{name}"),
                f"{TAG_PREFIX}.qrels_sha256": _file_sha(result, "qrels"),
                f"{TAG_PREFIX}.version": __version__,
                "mlflow.note.content": f"nDCG of system '{name}' in evaluation '{spec.name}' "
                                       f"(parent run {pid}).",
            })
            cid = child.info.run_id
            created.append(cid)
            logged.system_run_ids[name] = cid
            child_params = {k: _param(v) for k, v in spec.resolved().items()
                            if k.startswith(("metric.", "queries.", "uncertainty.", "comparison."))
                            or k in ("name", "data.qrels")}
            child_params["system"] = name
            child_params["run_file"] = src.declared
            _log_batch(client, cid, system_metrics(system_summary[name]), child_params, {})
            for suffix in ("per_query.csv", "top.csv"):
                system_file = out_dir / "systems" / f"{name}.{suffix}"
                if system_file.is_file():
                    client.log_artifact(cid, str(system_file))
            client.log_artifact(cid, str(out_dir / "summary.json"))
            client.set_terminated(cid, "FINISHED")

        stage = "logging the artifacts of the evaluation run"
        for fname in ARTIFACTS:
            if (out_dir / fname).is_file():
                client.log_artifact(pid, str(out_dir / fname))
        stage = "logging the figures of the evaluation run"
        _log_figures(client, pid, out_dir)
        mlflow.log_table(data=result.per_query, artifact_file="per_query_table.json", run_id=pid)
        if result.analysis is not None and result.analysis.comparisons:
            mlflow.log_table(data=result.comparisons, artifact_file="comparisons_table.json", run_id=pid)
        if result.sensitivity is not None:
            mlflow.log_table(data=result.sensitivity, artifact_file="sensitivity_table.json", run_id=pid)
        client.set_tag(pid, f"{TAG_PREFIX}.logging", "complete")
        client.set_terminated(pid, "FINISHED")
        return logged
    except Exception as exc:  # any failure of the tracking side: end what was started, keep local results
        _fail_runs(client, created, stage)
        raise TrackingError(
            f"logging to MLflow at {_safe_uri(uri)} failed while {stage}: {type(exc).__name__}: "
            f"{_first_line(exc)}. The complete local results are in {out_dir}.") from exc


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


def _parent_tags(result: EvaluationResult, out_dir: Path) -> dict[str, str]:
    spec = result.spec
    tags = {
        f"{TAG_PREFIX}.role": "evaluation",
        f"{TAG_PREFIX}.evaluation": spec.name,
        f"{TAG_PREFIX}.spec_sha256": spec.sha256,
        f"{TAG_PREFIX}.definition_sha256": spec.definition_digest(),
        f"{TAG_PREFIX}.version": __version__,
        f"{TAG_PREFIX}.systems": ",".join(spec.system_names),
        f"{TAG_PREFIX}.local_output": str(out_dir.resolve()),
        f"{TAG_PREFIX}.logging": "started",
        "mlflow.note.content": (f"nDCG evaluation '{spec.name}' of {len(spec.systems)} system(s) "
                                f"({', '.join(spec.system_names)}) on {len(result.query_ids)} queries; "
                                f"cutoffs {spec.resolved()['metric.cutoffs']}. The spec is the artifact "
                                f"spec.yaml."),
    }
    for f in result.files:
        role = f.role.replace("system:", "system.")
        tags[f"{TAG_PREFIX}.data.{role}.sha256"] = f.sha256
    return tags


def _file_sha(result: EvaluationResult, role: str) -> str:
    return next((f.sha256 for f in result.files if f.role == role), "")


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


def _fail_runs(client, run_ids: list[str], stage: str) -> None:
    for rid in run_ids:
        try:
            client.set_tag(rid, f"{TAG_PREFIX}.logging", f"failed while {stage}")
        except Exception:
            pass
        try:
            client.set_terminated(rid, "FAILED")
        except Exception:
            pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


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
