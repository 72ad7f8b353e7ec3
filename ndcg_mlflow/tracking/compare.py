"""Working with evaluations already logged to MLflow: rebuild a report, compare two systems' runs.

Part of the logging layer: imports mlflow lazily, like :mod:`.client`.

``compare`` reads two systems' child runs (possibly from different evaluations and
experiments), refuses when their metric or query definitions differ (naming each
differing field) unless told otherwise, and produces the same paired statistics,
wins and losses and report as a fresh evaluation, logged as a new run that links both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import NdcgError, TrackingError
from ..rules import DEFINITION_KEYS, cutoff_label, raw_definition
from .client import fail_runs, find_or_create_experiment, first_line, log_batch, log_figures, log_outputs
from .names import TAG_PREFIX, comparison_metrics, param_value


class CompareError(NdcgError):
    """The two runs cannot be compared as asked."""


@dataclass
class SystemRun:
    run: Any  # mlflow Run
    system: str
    per_query: Any  # DataFrame
    top: Any | None  # DataFrame


def _client(uri: str | None):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri) if uri else MlflowClient()


def _get_run(client, run_id: str):
    try:
        return client.get_run(run_id)
    except Exception as exc:
        raise TrackingError(f"cannot read MLflow run {run_id!r}: {type(exc).__name__}: {first_line(exc)}") from None


def evaluation_run_id(client, run_id: str) -> str:
    """The evaluation (parent) run of a run id that names either the evaluation or one of its systems."""
    run = _get_run(client, run_id)
    role = run.data.tags.get(f"{TAG_PREFIX}.role")
    if role == "system":
        return run.data.tags["mlflow.parentRunId"]
    if role in ("evaluation", "comparison"):
        return run_id
    raise CompareError(f"run {run_id} was not logged by ndcg-mlflow (no tag {TAG_PREFIX}.role).")


def download_folder(client, run_id: str, dest: Path) -> Path:
    """Download a logged evaluation's tables (top-level JSON, CSV, text, YAML and markdown artifacts) into
    ``dest``. A failure to reach the server is a :class:`TrackingError` naming the run."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        names = [a.path for a in client.list_artifacts(run_id)]
        for name in names:
            if name.endswith((".json", ".csv", ".txt", ".yaml", ".md")) and not name.startswith("figures"):
                client.download_artifacts(run_id, name, str(dest))
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno is not None:  # the local disk (network errors carry no errno)
            raise
        raise TrackingError(f"cannot download the artifacts of MLflow run {run_id}: {type(exc).__name__}: "
                            f"{first_line(exc)}") from None
    return dest


def rebuild_report(run_id: str, out: str | Path, tracking_uri: str | None = None) -> tuple[Path, Path]:
    """``ndcg-mlflow report RUN_ID``: download a logged evaluation's tables and render its report locally.

    The folder is built beside ``out`` and put in its place whole, with a manifest (kind ``report``), only
    once the report is rendered: ``out`` follows the output-folder contract of :mod:`ndcg_mlflow.outputs`
    (absent, empty or an earlier folder of ndcg-mlflow; anything else is refused; unchanged on failure)."""
    from ..outputs import staged_folder
    from ..report import write_reports

    out = Path(out)
    client = _client(tracking_uri)
    pid = evaluation_run_id(client, run_id)
    try:
        with staged_folder(out, kind="report") as tmp:
            download_folder(client, pid, tmp)
            if not (tmp / "summary.json").is_file():
                raise CompareError(f"run {pid} has no summary.json artifact: it was not logged completely.")
            write_reports(tmp)
    except OSError as exc:
        raise NdcgError(f"cannot write the report to {out}: {exc.strerror or exc}; {out} is unchanged.") from None
    return out / "report.html", out / "report.md"


def _load_system_run(client, run_id: str, dest: Path) -> SystemRun:
    import pandas as pd

    run = _get_run(client, run_id)
    tags = run.data.tags
    if tags.get(f"{TAG_PREFIX}.role") != "system":
        raise CompareError(f"run {run_id} is not a system's run of an ndcg-mlflow evaluation (expected the tag "
                           f"{TAG_PREFIX}.role = system; give the child run of the system, not the evaluation).")
    system = tags[f"{TAG_PREFIX}.system"]
    dest.mkdir(parents=True, exist_ok=True)
    try:
        pq_path = client.download_artifacts(run_id, f"{system}.per_query.csv", str(dest))
    except Exception as exc:
        raise CompareError(f"run {run_id} has no per-query table artifact {system}.per_query.csv "
                           f"({type(exc).__name__}).") from None
    per_query = pd.read_csv(pq_path, dtype={"query_id": str, "system": str, "cutoff": str},
                            keep_default_na=False, na_values=[""])
    top = None
    try:
        top_path = client.download_artifacts(run_id, f"{system}.top.csv", str(dest))
        top = pd.read_csv(top_path, dtype={"query_id": str, "doc_id": str}, keep_default_na=False,
                          na_values=[""])
    except Exception:
        top = None  # wins and losses then list no documents
    return SystemRun(run, system, per_query, top)


def definition_differences(a, b) -> list[str]:
    """Each field whose value differs between two system runs' metric and query definitions (the keys the
    definition digest covers, :data:`~ndcg_mlflow.rules.DEFINITION_KEYS`), and the judgments."""
    pa, pb = a.data.params, b.data.params
    keys = sorted(k for k in DEFINITION_KEYS if k in pa or k in pb)
    out = [f"{k}: {pa.get(k, '(absent)')!r} vs {pb.get(k, '(absent)')!r}" for k in keys if pa.get(k) != pb.get(k)]
    ta, tb = a.data.tags, b.data.tags
    qa, qb = ta.get(f"{TAG_PREFIX}.qrels_sha256"), tb.get(f"{TAG_PREFIX}.qrels_sha256")
    if qa != qb:
        out.append(f"judgments (qrels sha256): {qa} vs {qb}")
    return out


def compare_runs(run_a: str, run_b: str, *, tracking_uri: str | None = None, out: str | Path | None = None,
                 allow_spec_mismatch: bool = False, overrides: dict | None = None, log: bool = True,
                 experiment: str | None = None) -> tuple[Any, Path, str | None]:
    """Compare system run B (candidate) with system run A (baseline).

    Returns (result, output folder, new MLflow run id or None). ``overrides`` may set
    ``resamples``, ``confidence``, ``method``, ``seed``, ``test``, ``correction``,
    ``wins_losses``, ``tie_tolerance``; otherwise run A's logged values are used.
    """
    import tempfile

    from ..outputs import new_output_dir, write_outputs
    from ..spec import parse_spec

    client = _client(tracking_uri)
    if run_a == run_b:
        raise CompareError(f"run {run_a} is given twice: compare two different systems' runs.")
    with tempfile.TemporaryDirectory(prefix="ndcg-compare-") as tmp:
        work = Path(tmp)
        a = _load_system_run(client, run_a, work / "a")
        b = _load_system_run(client, run_b, work / "b")
    differences = definition_differences(a.run, b.run)
    if differences and not allow_spec_mismatch:
        raise CompareError("the two runs measure different things, so their difference would be meaningless:\n  "
                           + "\n  ".join(differences) + "\n(--allow-spec-mismatch compares them anyway and says so "
                           "in the report)")
    name_a, name_b = a.system, b.system
    if name_a == name_b:
        name_a, name_b = f"{name_a}-{run_a[:8]}", f"{name_b}-{run_b[:8]}"
    params = a.run.data.params
    settings = {
        "resamples": params.get("uncertainty.resamples"), "confidence": params.get("uncertainty.confidence"),
        "method": params.get("uncertainty.method"), "seed": params.get("uncertainty.seed"),
        "test": params.get("comparison.test"), "correction": params.get("comparison.correction"),
        "wins_losses": params.get("comparison.wins_losses"),
        "tie_tolerance": params.get("comparison.tie_tolerance"),
    }
    settings.update({k: v for k, v in (overrides or {}).items() if v is not None})
    missing = [k for k, v in settings.items() if v is None]
    if missing:
        raise CompareError("run A's evaluation declared no uncertainty/comparison settings; give "
                           + ", ".join(f"--{k.replace('_', '-')}" for k in missing))
    definition = raw_definition(params)  # the metric and queries sections, from run A's logged params
    raw = {
        "spec_version": 1,
        "name": f"compare {name_b} vs {name_a}",
        "metric": definition["metric"],
        "queries": definition["queries"],
        "data": {"qrels": params.get("data.qrels", "qrels"),
                 "systems": {name_a: b_or(params.get("run_file"), "a"),
                             name_b: b_or(b.run.data.params.get("run_file"), "b")}},
        "uncertainty": {"resamples": int(settings["resamples"]), "confidence": float(settings["confidence"]),
                        "method": settings["method"], "seed": int(settings["seed"])},
        "comparison": {"baseline": name_a, "test": settings["test"], "correction": settings["correction"],
                       "wins_losses": int(settings["wins_losses"]),
                       "tie_tolerance": float(settings["tie_tolerance"])},
        "mlflow": {"experiment": experiment or _experiment_name(client, a.run)},
    }
    spec = parse_spec(raw, base_dir=".")
    result = _result_from_tables(spec, [(name_a, a), (name_b, b)])
    result.notes.append(f"compared logged runs: baseline {name_a} = run {run_a}, candidate {name_b} = run {run_b}")
    if differences:
        result.notes.append("THE DEFINITIONS DIFFER (compared with --allow-spec-mismatch): " + "; ".join(differences))
    from ..analysis import analyze

    result.analysis = analyze(result, spec.uncertainty, spec.comparison)
    out_dir = Path(out) if out else new_output_dir(spec.name.replace(" ", "_"))
    write_outputs(result, out_dir)
    new_run = None
    if log:
        new_run = _log_comparison(client, result, out_dir, run_a, run_b, differences)
    return result, out_dir, new_run


def b_or(value: str | None, fallback: str) -> str:
    return value if value else fallback


def _experiment_name(client, run) -> str:
    try:
        return client.get_experiment(run.info.experiment_id).name
    except Exception:
        return "ndcg-mlflow-comparisons"


def _result_from_tables(spec, systems: list[tuple[str, SystemRun]]):
    """An EvaluationResult rebuilt from logged per-query tables (no data files are read)."""
    from ..evaluation import EvaluationResult, SystemResult, TopLists, _means, display_depth
    from ..kernel import STATUS_NAMES, QueryResult

    labels = [cutoff_label(k) for k in spec.metric.cutoffs]
    ids = sorted(set().union(*[set(s.per_query["query_id"]) for _, s in systems]))
    query_ids = np.asarray(ids, dtype=object)
    index = {q: i for i, q in enumerate(ids)}
    weights = np.full(len(ids), np.nan)
    out = {}
    status_code = {name: i for i, name in enumerate(STATUS_NAMES)}
    for name, s in systems:
        pq = s.per_query
        nq, nc = len(ids), len(labels)
        arrays = {col: np.full((nq, nc), np.nan) for col in ("ndcg", "dcg", "idcg", "idcg_candidates",
                                                             "judged_coverage")}
        status = np.full((nq, nc), status_code["missing"], dtype=np.int8)
        n_returned = np.zeros(nq, dtype=np.int64)
        rows = pq["query_id"].map(index).to_numpy()
        cols = pq["cutoff"].map({c: j for j, c in enumerate(labels)}).to_numpy()
        for col in arrays:
            arrays[col][rows, cols] = pq[col].to_numpy(dtype=float)
        status[rows, cols] = pq["status"].map(status_code).to_numpy()
        n_returned[rows] = pq["n_returned"].to_numpy()
        w = np.full(nq, np.nan)
        w[rows] = pq["weight"].to_numpy(dtype=float)
        known = ~np.isnan(w)
        if np.any(known & ~np.isnan(weights) & (weights != w)):
            raise CompareError("the two runs weight their shared queries differently.")
        weights = np.where(np.isnan(weights), w, weights)
        qr = QueryResult(dcg=arrays["dcg"], idcg=arrays["idcg"], idcg_candidates=arrays["idcg_candidates"],
                         ndcg=arrays["ndcg"], judged_coverage=arrays["judged_coverage"], status=status,
                         n_returned=n_returned)
        top = None
        if s.top is not None:
            t = s.top[s.top["query_id"].isin(index)]
            grade = pd_to_float(t["grade"])
            top = TopLists(display_depth(spec.metric), t["query_id"].map(index).to_numpy(),
                           t["rank"].to_numpy() - 1, t["doc_id"].tolist(), grade)
        else:
            top = TopLists(display_depth(spec.metric), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                           [], np.zeros(0))
        out[name] = (qr, top)
    weights = np.where(np.isnan(weights), 1.0, weights)
    systems_out = {name: SystemResult(name, qr, _means(spec.metric, qr, weights), top)
                   for name, (qr, top) in out.items()}
    return EvaluationResult(spec, query_ids, weights, systems_out, [], [])


def pd_to_float(series) -> np.ndarray:
    return series.astype(float).to_numpy()


def _log_comparison(client, result, out_dir: Path, run_a: str, run_b: str, differences: list[str]) -> str:
    from ..version import __version__

    spec = result.spec
    stage = "creating the comparison run"
    created = []
    try:
        exp_id = find_or_create_experiment(client, spec.mlflow.experiment)
        run = client.create_run(exp_id, run_name=spec.name, tags={
            f"{TAG_PREFIX}.role": "comparison",
            f"{TAG_PREFIX}.compared_runs": f"{run_a},{run_b}",
            f"{TAG_PREFIX}.baseline_run": run_a,
            f"{TAG_PREFIX}.candidate_run": run_b,
            f"{TAG_PREFIX}.definition_sha256": spec.definition_digest(),
            f"{TAG_PREFIX}.spec_mismatch": "true" if differences else "false",
            f"{TAG_PREFIX}.version": __version__,
            "mlflow.note.content": (f"Comparison of logged system runs: candidate {run_b} against baseline {run_a}."
                                    + (" The definitions differ: " + "; ".join(differences) if differences else "")),
        })
        rid = run.info.run_id
        created.append(rid)
        stage = "logging the comparison"
        params = {k: param_value(v) for k, v in spec.resolved().items() if not k.startswith("data.")}
        log_batch(client, rid, comparison_metrics(result.analysis.comparisons), params, {})
        log_outputs(client, rid, out_dir)
        log_figures(client, rid, out_dir)
        client.set_terminated(rid, "FINISHED")
        return rid
    except Exception as exc:
        fail_runs(client, created, stage)
        raise TrackingError(f"logging the comparison failed while {stage}: {type(exc).__name__}: {first_line(exc)}. "
                            f"The local results are in {out_dir}.") from exc
