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
from ..paths import shown_path
from ..render.format import md_text
from ..rules import DEFINITION_KEYS, STRATIFY, cutoff_label, raw_definition
from ..uris import first_line, redact, safe_uri
from .client import find_or_create_experiment, log_batch, log_outputs
from .names import DEFAULT_SYSTEM, TAG_PREFIX, comparison_metrics, comparison_run_name, judge_metrics, param_value
from .segment_runs import segment_settings, segments_difference
from .stale import fail_runs


class CompareError(NdcgError):
    """The two runs cannot be compared as asked."""


# compare's settings: the params of a run whose evaluation declared them
SETTINGS = {
    "resamples": "uncertainty.resamples",
    "confidence": "uncertainty.confidence",
    "method": "uncertainty.method",
    "seed": "uncertainty.seed",
    "test": "comparison.test",
    "correction": "comparison.correction",
    "wins_losses": "comparison.wins_losses",
    "tie_tolerance": "comparison.tie_tolerance",
}


# the params of a system run evaluated with a judge (its spec's judge section), compared between two runs
JUDGE_PARAMS = ("judge.estimator", "judge.labelled_queries")


@dataclass
class SystemRun:
    run: Any  # mlflow Run
    system: str
    per_query: Any  # DataFrame
    top: Any | None  # DataFrame
    judge: dict[str, Any] | None = None  # its evaluation's summary.json "judge", when it had a judge

    @property
    def judged(self) -> bool:
        """Whether the run was evaluated with a judge: its per-query table holds the human values beside the
        judge's (``ndcg_human``)."""
        return "ndcg_human" in self.per_query.columns


def _client(uri: str | None):
    """A client of an existing store: reading logged runs never creates one. A local store (a SQLite file, a
    folder of runs) that does not exist is a user error naming the store searched, before MLflow would create
    it (an empty ``mlflow.db`` in the working folder)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = uri or mlflow.get_tracking_uri()
    missing = _missing_local_store(uri)
    if missing:
        raise CompareError(
            f"no MLflow store at {missing} (tracking URI {safe_uri(uri)}): nothing was logged there, "
            f"so no run can be read from it. Give the store that holds the runs with --tracking-uri "
            f"or MLFLOW_TRACKING_URI."
        )
    return MlflowClient(tracking_uri=uri)


def _missing_local_store(uri: str) -> str | None:
    """The path of a local store named by ``uri`` that does not exist (or is an empty file), else None."""
    from urllib.parse import unquote, urlparse

    if uri.startswith("sqlite:"):
        path = uri.split("?", 1)[0][len("sqlite:") :]
        if path.startswith("///"):  # sqlite:///relative.db, sqlite:////absolute.db
            path = unquote(path[3:])
            if not path or path == ":memory:":
                return None
            p = Path(path)
            if not p.is_file() or p.stat().st_size == 0:
                return str(p.resolve()) if p.parent.exists() else str(p)
        return None
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        p = Path(unquote(parsed.path if parsed.scheme == "file" else uri))
        if not p.is_dir():
            return str(p)
    return None


def _store_name(client) -> str | None:
    return safe_uri(str(getattr(client, "tracking_uri", None) or getattr(client, "_tracking_uri", "")))


def _get_run(client, run_id: str):
    try:
        return client.get_run(run_id)
    except Exception as exc:
        code = getattr(exc, "error_code", None)
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise CompareError(
                f"run {run_id!r} not found in the MLflow store {_store_name(client)}: give the id of a "
                f"run logged there, or the store that holds it with --tracking-uri or "
                f"MLFLOW_TRACKING_URI."
            ) from None
        raise TrackingError(
            f"cannot read MLflow run {run_id!r} from {_store_name(client)}: {type(exc).__name__}: {first_line(exc)}"
        ) from None


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
        raise TrackingError(
            f"cannot download the artifacts of MLflow run {run_id}: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    return dest


def rebuild_report(run_id: str, out: str | Path, tracking_uri: str | None = None) -> tuple[Path, Path]:
    """``ndcg-mlflow report RUN_ID``: download a logged evaluation's tables and render its report locally.

    The folder is built beside ``out`` and put in its place whole, with a manifest (kind ``report``), only
    once the report is rendered: ``out`` follows the output-folder contract of :mod:`ndcg_mlflow.outputs`
    (absent, empty or an earlier folder of ndcg-mlflow; anything else is refused; unchanged on failure)."""
    from ..outputs.folder import staged_folder
    from ..render.report import write_reports

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
        shown = shown_path(out)
        raise NdcgError(f"cannot write the report to {shown}: {exc.strerror or exc}; {shown} is unchanged.") from None
    return out / "report.html", out / "report.md"


def download_evaluation(run_id: str, dest: Path, tracking_uri: str | None = None) -> Path:
    """A logged evaluation's tables (``summary.json``, ``per_query.csv``, ...) downloaded into ``dest``, as its output
    folder holds them; ``run_id`` names the evaluation, one of its systems' runs or a comparison run."""
    client = _client(tracking_uri)
    pid = evaluation_run_id(client, run_id)
    download_folder(client, pid, dest)
    if not (dest / "summary.json").is_file():
        raise CompareError(f"run {pid} has no summary.json artifact: it was not logged completely.")
    return dest


def _load_system_run(client, run_id: str, dest: Path) -> SystemRun:
    import pandas as pd

    run = _get_run(client, run_id)
    tags = run.data.tags
    one_model = tags.get(f"{TAG_PREFIX}.role") == "evaluation" and f"{TAG_PREFIX}.evaluator" in tags
    if tags.get(f"{TAG_PREFIX}.role") != "system" and not one_model:  # mlflow.models.evaluate's run: one system
        raise CompareError(
            f"run {run_id} is not a system's run of an ndcg-mlflow evaluation (expected the tag "
            f"{TAG_PREFIX}.role = system; give the child run of the system, not the evaluation)."
        )
    system = tags[f"{TAG_PREFIX}.system"]
    from ..spec import system_file_stem

    stem = system_file_stem(system)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        pq_path = client.download_artifacts(run_id, f"{stem}.per_query.csv", str(dest))
    except Exception as exc:
        raise CompareError(
            f"run {run_id} has no per-query table artifact {stem}.per_query.csv ({type(exc).__name__})."
        ) from None
    per_query = pd.read_csv(
        pq_path,
        dtype={"query_id": str, "system": str, "cutoff": str, "segment": str},
        keep_default_na=False,
        na_values=[""],
    )
    top = None
    try:
        top_path = client.download_artifacts(run_id, f"{stem}.top.csv", str(dest))
        top = pd.read_csv(top_path, dtype={"query_id": str, "doc_id": str}, keep_default_na=False, na_values=[""])
    except Exception:
        top = None  # wins and losses then list no documents
    loaded = SystemRun(run, system, per_query, top)
    if loaded.judged:  # the agreement of the two judgments is in its evaluation's summary
        import json

        try:
            path = client.download_artifacts(run_id, "summary.json", str(dest))
            loaded.judge = json.loads(Path(path).read_text(encoding="utf-8")).get("judge")
        except Exception:
            loaded.judge = None  # the agreement is then undefined
    return loaded


def comparison_note(names: tuple[str, str] | list[str], run_a: str, run_b: str, differences: list[str]) -> str:
    """A comparison run's description (Markdown): the systems (baseline ``names[0]``, candidate ``names[1]``) and
    each definition that differs (:func:`definition_differences`, whose values are the runs' params: file names
    among them), every one escaped as text (:func:`~ndcg_mlflow.render.format.md_text`)."""
    return (
        f"Comparison of logged system runs: candidate {md_text(names[1])} (run {run_b}) against "
        f"baseline {md_text(names[0])} (run {run_a}). Every figure is in summary.json and the tables "
        f"figures_table.json and comparisons_table.json."
        + (" The definitions differ: " + "; ".join(map(md_text, differences)) if differences else "")
    )


def definition_differences(a, b) -> list[str]:
    """Each field whose value differs between two system runs' metric and query definitions (the keys the
    definition digest covers, :data:`~ndcg_mlflow.rules.DEFINITION_KEYS`), and the judgments."""
    pa, pb = a.data.params, b.data.params
    keys = sorted(k for k in DEFINITION_KEYS if k in pa or k in pb)
    out = [f"{k}: {pa.get(k, '(absent)')!r} vs {pb.get(k, '(absent)')!r}" for k in keys if pa.get(k) != pb.get(k)]
    qa, qb = qrels_digest(a), qrels_digest(b)
    if qa != qb:
        out.append(f"judgments (qrels sha256): {qa} vs {qb}")
    ja, jb = (r.data.tags.get(f"{TAG_PREFIX}.data.judge_qrels.sha256") for r in (a, b))
    if ja != jb and ja is not None and jb is not None:
        out.append(f"the judge's judgments (judge_qrels sha256): {ja} vs {jb}")
    out += [f"{k}: {pa[k]!r} vs {pb[k]!r}" for k in JUDGE_PARAMS if k in pa and k in pb and pa[k] != pb[k]]
    return out


def judge_difference(a: SystemRun, b: SystemRun, ids: tuple[str, str]) -> str | None:
    """When one run was evaluated with a judge and the other not, what that means (their numbers are different
    estimators: the judged run's per-query values are its judge's labels); None when both or neither were."""
    if a.judged == b.judged:
        return None
    judged, plain = (ids[0], ids[1]) if a.judged else (ids[1], ids[0])
    return (
        f"run {judged} was evaluated with a judge and run {plain} without: their numbers are different estimators "
        f"(the judged run's means are a judge estimator's, its per-query values the judge's labels: judge-only, "
        f"not valid where the judge is biased)"
    )


def settings_differences(pa: dict[str, str], pb: dict[str, str], overrides: dict[str, Any]) -> list[str]:
    """Each uncertainty or comparison setting that both runs' evaluations declared, with different values, and
    that no flag (``overrides``) settles, with the flag that does: the comparison computes one value of each, so
    it would not be what one of them declared. ``uncertainty.stratify`` (no flag) is compared when both declared
    the section (an evaluation without segments stratifies nothing); the tail-risk alphas are not: the
    comparison computes every alpha either declared."""
    out = [
        f"{p}: {pa[p]!r} vs {pb[p]!r} (give --{k.replace('_', '-')} to compare with one of them)"
        for k, p in SETTINGS.items()
        if p in pa and p in pb and pa[p] != pb[p] and overrides.get(k) is None
    ]
    if "uncertainty.method" in pa and "uncertainty.method" in pb:
        sa, sb = (x.get(STRATIFY.key, STRATIFY.default) for x in (pa, pb))
        if sa != sb:
            out.append(f"uncertainty.stratify: {sa!r} vs {sb!r} (intervals resampled within segments or not)")
    return out


def qrels_digest(run) -> str | None:
    """The judgments' sha256 of a logged run (tag ``ndcg_mlflow.data.qrels.sha256``; ``ndcg_mlflow.qrels_sha256``
    on system runs logged by earlier versions)."""
    tags = run.data.tags
    return tags.get(f"{TAG_PREFIX}.data.qrels.sha256") or tags.get(f"{TAG_PREFIX}.qrels_sha256")


def system_label(client, system: SystemRun) -> str:
    """The name of a run's system in a comparison: a system run's own name; for the run of ``mlflow.models.evaluate``
    (one model), the model it evaluated (:func:`model_label`), else the system named in ``evaluator_config``, else
    the run's name."""
    tags = system.run.data.tags
    if tags.get(f"{TAG_PREFIX}.role") == "system":
        return system.system

    named = system.system if system.system != DEFAULT_SYSTEM else tags.get("mlflow.runName")
    return model_label(client, system.run) or (named if _usable(named) else system.system)


def model_label(client, run) -> str | None:
    """The model a run evaluated, as MLflow records it (the run's model inputs, the models of its ``mlflow.datasets``
    tag): ``<registered name> v<version>`` when that one logged model is one registered version, else the logged
    model's name; None when the run names no model, several, or one the store does not hold."""
    import json

    from mlflow.exceptions import MlflowException

    from ..render.format import model_label as model_words

    ids = {m.model_id for m in getattr(run.inputs, "model_inputs", None) or []}
    try:
        ids |= {d["model"] for d in json.loads(run.data.tags.get("mlflow.datasets") or "[]") if d.get("model")}
        if len(ids) != 1:
            return None
        model = client.get_logged_model(ids.pop())
        versions = json.loads(model.tags.get("mlflow.modelVersions") or "[]")
        one = {"registered_model": versions[0]["name"], "version": versions[0]["version"]} if len(versions) == 1 else {}
        label = model_words(one) or model.name
    except (MlflowException, ValueError, TypeError, KeyError, AttributeError):
        return None
    return label if _usable(label) else None


def user_run_name(run) -> str | None:
    """The run's name when someone gave it: not one MLflow made up (``<adjective>-<noun>-<number>``)."""
    import re

    name = run.data.tags.get("mlflow.runName")
    parts = re.fullmatch(r"([a-z]+)-([a-z]+)-\d+", name or "")
    if parts is not None:
        from mlflow.utils import name_utils

        adjectives = getattr(name_utils, "_GENERATOR_PREDICATES", None) or ()  # (private: a shape alone if gone)
        nouns = getattr(name_utils, "_GENERATOR_NOUNS", None) or ()
        if not (adjectives and nouns) or (parts[1] in adjectives and parts[2] in nouns):
            return None
    return name if _usable(name) else None


def _usable(name: str | None) -> bool:
    from ..spec.mlflow_names import system_name_problem

    return bool(name) and system_name_problem(name) is None


def compare_runs(
    run_a: str,
    run_b: str,
    *,
    tracking_uri: str | None = None,
    out: str | Path | None = None,
    allow_spec_mismatch: bool = False,
    overrides: dict | None = None,
    log: bool = True,
    experiment: str | None = None,
    tags: dict[str, str] | None = None,
) -> tuple[Any, Path, str | None]:
    """Compare system run B (candidate) with system run A (baseline).

    Returns (result, output folder, new MLflow run id or None). ``overrides`` may set
    ``resamples``, ``confidence``, ``method``, ``seed``, ``test``, ``correction``,
    ``wins_losses``, ``tie_tolerance``; otherwise run A's logged values are used, else run B's (a CompareError
    names a section neither run's evaluation declared, and the settings both declared with different values:
    :func:`settings_differences`). Each system is named by :func:`system_label`. ``tags``
    (``--tag``) are set on the new run.
    """
    import tempfile

    from ..outputs.write import new_output_dir, write_outputs
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
        raise CompareError(
            "the two runs measure different things, so their difference would be meaningless:\n  "
            + "\n  ".join(differences)
            + "\n(--allow-spec-mismatch compares them anyway and says so "
            "in the report)"
        )
    one_judged = judge_difference(a, b, (run_a, run_b))
    if one_judged is not None:
        if not allow_spec_mismatch:
            raise CompareError(
                f"{one_judged}. (--allow-spec-mismatch compares the per-query values each run holds anyway, the "
                f"judged run's under its judge's labels, and says so in the report)"
            )
        differences.append(f"{one_judged}: compared on each run's per-query values, without the judge")
    judged = a.judged and b.judged
    segments = segments_difference((run_a, a.run), (run_b, b.run))
    if segments is not None:
        if not allow_spec_mismatch:
            raise CompareError(
                f"{segments} (--allow-spec-mismatch compares them anyway, without segments, and says so in the report)."
            )
        differences.append(f"{segments}: compared without segments")
    name_a, name_b = system_label(client, a), system_label(client, b)
    if name_a == name_b:
        name_a, name_b = f"{name_a}-{run_a[:8]}", f"{name_b}-{run_b[:8]}"
    conflicts = settings_differences(a.run.data.params, b.run.data.params, overrides or {})
    if conflicts:
        raise CompareError(
            "the two runs' evaluations declared different statistics, and a comparison computes one of each:\n  "
            + "\n  ".join(conflicts)
        )
    params = a.run.data.params
    settings: dict[str, Any] = {  # run A's, else run B's (an evaluation without the section records none)
        key: next((r.run.data.params[p] for r in (a, b) if p in r.run.data.params), None) for key, p in SETTINGS.items()
    }
    settings.update({k: v for k, v in (overrides or {}).items() if v is not None})
    missing = [k for k, v in settings.items() if v is None]
    if missing:
        sections = list(dict.fromkeys(SETTINGS[k].split(".")[0] for k in missing))
        why = f"no {sections[0]} section" if len(sections) == 1 else "neither section"
        raise CompareError(
            f"neither run records the {' and '.join(sections)} settings (its evaluation's spec had {why}); give "
            + ", ".join(f"--{k.replace('_', '-')}" for k in missing)
        )
    definition = raw_definition(params)  # the metric and queries sections, from run A's logged params
    raw: dict[str, Any] = {
        "spec_version": 1,
        "name": f"compare {name_b} vs {name_a}",
        "metric": definition["metric"],
        "queries": definition["queries"],
        "data": {
            "qrels": params.get("data.qrels", "qrels"),
            "systems": {
                name_a: b_or(params.get("run_file"), "a"),
                name_b: b_or(b.run.data.params.get("run_file"), "b"),
            },
        },
        "uncertainty": {
            "resamples": int(settings["resamples"]),
            "confidence": float(settings["confidence"]),
            "method": settings["method"],
            "seed": int(settings["seed"]),
        },
        "comparison": {
            "baseline": name_a,
            "test": settings["test"],
            "correction": settings["correction"],
            "wins_losses": int(settings["wins_losses"]),
            "tie_tolerance": float(settings["tie_tolerance"]),
        },
        "mlflow": {"experiment": experiment or _experiment_name(client, a.run)},
    }
    if judged:
        raw["data"]["judge_qrels"] = params.get("data.judge_qrels", "judge_qrels")
        raw["judge"] = {k.split(".", 1)[1]: params[k] for k in JUDGE_PARAMS if k in params}
        if params.get("judge.name") not in (None, "None"):
            raw["judge"]["name"] = params["judge.name"]
    undoable = segment_settings(raw, a.run.data.params, b.run.data.params, segments=segments is None)
    if undoable is not None:
        raise CompareError(f"{undoable}; compare runs whose evaluations declared the same segments file.")
    spec = parse_spec(raw, base_dir=".")
    result = result_from_tables(spec, [(name_a, a), (name_b, b)], segments is None)
    result.notes.append(f"compared logged runs: baseline {name_a} = run {run_a}, candidate {name_b} = run {run_b}")
    if differences:
        result.notes.append("THE DEFINITIONS DIFFER (compared with --allow-spec-mismatch): " + "; ".join(differences))
    if judged:
        _judge_views(result, [(name_a, a), (name_b, b)])
        estimator = raw["judge"]["estimator"]
        result.notes.append(
            f"both runs were evaluated with a judge: the comparison is the {estimator} estimator's, from each query's "
            f"values under the human and the judge's judgments in the runs' per-query tables; the agreement of the "
            f"two judgments is run {run_a}'s"
        )
    else:
        from ..statistics.comparisons import analyze

        result.analysis = analyze(result, spec.uncertainty, spec.comparison)
    out_dir = Path(out) if out else new_output_dir(spec.name.replace(" ", "_"))
    write_outputs(result, out_dir)
    new_run = None
    if log:
        new_run = _log_comparison(client, result, out_dir, (run_a, a), (run_b, b), differences, tags or {})
    return result, out_dir, new_run


def b_or(value: str | None, fallback: str) -> str:
    return value if value else fallback


def _experiment_name(client, run) -> str:
    try:
        return client.get_experiment(run.info.experiment_id).name
    except Exception:
        return "ndcg-mlflow-comparisons"


def result_from_tables(spec, systems: list[tuple[str, SystemRun]], segments: bool = True):
    """An EvaluationResult rebuilt from logged per-query tables (no data files are read); with ``segments``, the
    queries' segments from the tables' ``segment`` column, when they have it."""
    from ..engines.outcome import display_depth, system_means
    from ..kernel import STATUS_NAMES, QueryResult
    from ..queries import TopLists
    from ..result import EvaluationResult, SystemResult

    labels = [cutoff_label(k) for k in spec.metric.cutoffs]
    ids = sorted(set().union(*[set(s.per_query["query_id"]) for _, s in systems]))
    query_ids = np.asarray(ids, dtype=object)
    index = {q: i for i, q in enumerate(ids)}
    weights = np.full(len(ids), np.nan)
    labels_of = np.full(len(ids), None, dtype=object)
    out = {}
    status_code = {name: i for i, name in enumerate(STATUS_NAMES)}
    for name, s in systems:
        pq = s.per_query
        nq, nc = len(ids), len(labels)
        arrays = {
            col: np.full((nq, nc), np.nan) for col in ("ndcg", "dcg", "idcg", "idcg_candidates", "judged_coverage")
        }
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
        if segments and "segment" in pq.columns:
            given = pq["segment"].to_numpy(dtype=object)
            known = np.asarray([v is not None for v in labels_of[rows]])
            if np.any(known & (labels_of[rows] != given)):
                raise CompareError("the two runs put their shared queries in different segments.")
            labels_of[rows] = given
        qr = QueryResult(
            dcg=arrays["dcg"],
            idcg=arrays["idcg"],
            idcg_candidates=arrays["idcg_candidates"],
            ndcg=arrays["ndcg"],
            judged_coverage=arrays["judged_coverage"],
            status=status,
            n_returned=n_returned,
        )
        top = None
        if s.top is not None:
            t = s.top[s.top["query_id"].isin(index)]
            grade = pd_to_float(t["grade"])
            top = TopLists(
                display_depth(spec.metric),
                t["query_id"].map(index).to_numpy(),
                t["rank"].to_numpy() - 1,
                t["doc_id"].tolist(),
                grade,
            )
        else:
            top = TopLists(
                display_depth(spec.metric), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [], np.zeros(0)
            )
        out[name] = (qr, top)
    weights = np.where(np.isnan(weights), 1.0, weights)
    systems_out = {
        name: SystemResult(name, qr, system_means(spec.metric, qr, weights), top) for name, (qr, top) in out.items()
    }
    result = EvaluationResult(spec, query_ids, weights, systems_out, [], [])
    if any(v is not None for v in labels_of):
        if any(v is None for v in labels_of):
            raise CompareError("one run's per-query table gives each query's segment, the other's does not.")
        result.segments = labels_of
    return result


def _judge_views(result, systems: list[tuple[str, SystemRun]]) -> None:
    """``result`` (rebuilt from two judged runs' per-query tables: each query's value under the judge's labels)
    made a judged evaluation's (:func:`~ndcg_mlflow.engines.with_judge.judged_result`), with each query's human
    value from the tables' ``ndcg_human`` (the labelled queries are those with one) and run A's agreement of the
    two judgments (its evaluation's, of the same judgments)."""
    from ..engines.with_judge import judged_result

    labels = [cutoff_label(k) for k in result.spec.metric.cutoffs]
    index = {q: i for i, q in enumerate(result.query_ids.tolist())}
    values = {}
    for name, s in systems:
        pq = s.per_query
        y = np.full((len(index), len(labels)), np.nan)
        rows = pq["query_id"].map(index).to_numpy()
        cols = pq["cutoff"].map({c: j for j, c in enumerate(labels)}).to_numpy()
        y[rows, cols] = pq["ndcg_human"].to_numpy(dtype=float)
        values[name] = y
    labelled = np.zeros(len(index), dtype=bool)
    for y in values.values():
        labelled |= ~np.isnan(y).all(axis=1)
    judged_result(result, values, labelled, (np.zeros(0), np.zeros(0)))
    agreement = (systems[0][1].judge or {}).get("agreement")
    if agreement is not None:
        result.judged["agreement"] = agreement


def pd_to_float(series) -> np.ndarray:
    return series.astype(float).to_numpy()


def _log_comparison(
    client,
    result,
    out_dir: Path,
    baseline: tuple[str, SystemRun],
    candidate: tuple[str, SystemRun],
    differences: list[str],
    custom_tags: dict[str, str],
) -> str:
    """The comparison run, with the tags an evaluation's runs carry (one meaning per key): the spec, definition
    and judgments digests of run A's evaluation (whose definition and settings the comparison uses), the
    candidate's spec digest, each system's run-file digest; and the candidate's comparisons as
    ``compare.<key>.<figure>`` metrics (the keys of a candidate's system run)."""
    import datetime as _dt
    import json

    from ..version import __version__

    spec = result.spec
    (run_a, a), (run_b, b) = baseline, candidate
    names = list(result.systems)  # baseline, candidate
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    tags = {
        f"{TAG_PREFIX}.role": "comparison",
        f"{TAG_PREFIX}.evaluation": spec.name,
        f"{TAG_PREFIX}.run_key": (out_dir / "run_key.txt").read_text(encoding="utf-8").strip(),
        f"{TAG_PREFIX}.definition_sha256": spec.definition_digest(),
        f"{TAG_PREFIX}.version": __version__,
        f"{TAG_PREFIX}.baseline": names[0],
        f"{TAG_PREFIX}.candidate": names[1],
        f"{TAG_PREFIX}.systems": param_value(",".join(names)),
        f"{TAG_PREFIX}.compared_runs": f"{run_a},{run_b}",
        f"{TAG_PREFIX}.baseline_run": run_a,
        f"{TAG_PREFIX}.candidate_run": run_b,
        f"{TAG_PREFIX}.spec_mismatch": "true" if differences else "false",
        "mlflow.note.content": comparison_note(names, run_a, run_b, differences),
    }
    spec_a, spec_b = (r.run.data.tags.get(f"{TAG_PREFIX}.spec_sha256") for r in (a, b))
    qrels_a, qrels_b = qrels_digest(a.run), qrels_digest(b.run)
    for key, value, shown in (
        (f"{TAG_PREFIX}.spec_sha256", spec_a, True),
        (f"{TAG_PREFIX}.candidate.spec_sha256", spec_b, spec_b != spec_a),
        (f"{TAG_PREFIX}.data.qrels.sha256", qrels_a, True),
        (f"{TAG_PREFIX}.candidate.data.qrels.sha256", qrels_b, qrels_b != qrels_a),
    ):
        if value and shown:
            tags[key] = value
    for name, run in zip(names, (a, b)):
        digest = run.run.data.tags.get(f"{TAG_PREFIX}.data.system.{run.system}.sha256") or run.run.data.tags.get(
            f"{TAG_PREFIX}.run_file_sha256"
        )
        if digest:
            tags[f"{TAG_PREFIX}.data.system.{name}.sha256"] = digest
    tags.update({key: redact(value) for key, value in custom_tags.items()})
    stage = "creating the comparison run"
    created = []
    try:
        exp_id = find_or_create_experiment(client, spec.mlflow.experiment)
        run = client.create_run(
            exp_id, run_name=comparison_run_name(names[1], names[0], _dt.datetime.now(_dt.timezone.utc)), tags=tags
        )
        rid = run.info.run_id
        created.append(rid)
        stage = "logging the comparison"
        params = {k: param_value(v) for k, v in spec.resolved().items() if not k.startswith("data.")}
        params["n_queries"] = str(summary["n_queries"])
        rows = [c for c in result.analysis.comparisons if c["candidate"] == names[1]]
        metrics = {
            **comparison_metrics(rows, spec.comparison.test if spec.comparison else None),
            **judge_metrics(summary.get("judge"), names[1]),
        }
        log_batch(client, rid, metrics, params, {})
        log_outputs(client, rid, out_dir, summary)  # (the figures with the folder's other files)
        client.set_terminated(rid, "FINISHED")
        return rid
    except Exception as exc:
        fail_runs(client, created, stage)
        raise TrackingError(
            f"logging the comparison failed while {stage}: {type(exc).__name__}: {first_line(exc)}. "
            f"The local results are in {out_dir}."
        ) from exc
