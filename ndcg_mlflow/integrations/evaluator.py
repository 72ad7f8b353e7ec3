"""The ``mlflow.model_evaluator`` entry point ``ndcg_spec``: ``mlflow.models.evaluate`` under an evaluation spec.

::

    mlflow.models.evaluate(model_uri, data=candidates, model_type="ranker", evaluators="ndcg_spec",
                           evaluator_config={"spec": "eval.yaml"})

* ``model_type="ranker"``: ``data`` holds one row per (query, candidate document) with the columns ``query_id``
  and ``doc_id`` and the model's inputs; the model returns one score per row (higher ranks first; equal scores
  follow the spec's tie rule, ``displayed_order`` meaning the rows' order).
* ``model_type="retriever"``: ``data`` holds one row per query (``query_id`` and the model's inputs); the model
  returns, per row, the list of document ids it retrieved, best first (their order is the ranking).

The model receives every column of ``data`` (a model logged with a signature receives the columns its signature
names; MLflow drops the others). Without a model, ``predictions=`` names the column of ``data`` holding the
scores (ranker) or the lists of ids (retriever). The spec's ``data.qrels`` gives the judgments; its
``data.systems`` may be left out (the model's rows are the one system, named ``evaluator_config["system"]``,
default ``model``); its comparison section is not applied, its settings are recorded (:func:`load_plugin_spec`).
The evaluation is the local engine's (:func:`~ndcg_mlflow.engines.local.pipeline.evaluate_tables`), so the numbers are
those ``ndcg-mlflow run`` gives for the same scored rows.

Logged to the evaluation's run: the system's metrics under the keys of a system run (``ndcg_at_10``,
``ndcg_at_10.ci_low`` ...), the spec's metric, query, uncertainty and comparison fields as params (what
``ndcg-mlflow compare`` reads), the tags of an evaluation run, the output folder's files (``per_query.csv``,
``summary.json``, ``report.html`` ...) and tables as artifacts. The folder is written locally first
(``evaluator_config["out"]``, else a temporary folder removed after logging).

MLflow hands a Spark DataFrame over cut to its first 10,000 rows, which cuts through queries: a Spark DataFrame
that reached that limit is refused (evaluate it with ``ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(session))``).

mlflow is imported inside the methods only: MLflow's registry loads this class by its entry point and calls
:meth:`NdcgSpecEvaluator.can_evaluate` and :meth:`NdcgSpecEvaluator.evaluate`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, SpecError, did_you_mean, preview
from ..tracking.names import DEFAULT_SYSTEM

NAME = "ndcg_spec"  # the entry-point name (pyproject.toml, [project.entry-points."mlflow.model_evaluator"])
RANKER, RETRIEVER = "ranker", "retriever"
MODEL_TYPES = (RANKER, RETRIEVER)
CONFIG_KEYS = ("spec", "system", "out")
SPARK_ROW_LIMIT = 10_000  # MLflow 3's EvaluationDataset.SPARK_DATAFRAME_LIMIT, read from MLflow where it has it
PREDICTIONS = "the model's predictions"


@dataclass(frozen=True)
class Config:
    spec: str | Path | Mapping[str, Any]
    system: str
    out: Path | None


def read_config(evaluator_config: Any) -> Config:
    """``evaluator_config`` checked: ``spec`` (a path or a mapping) is required; ``system`` and ``out`` are
    optional; any other key is an error naming it."""
    if not isinstance(evaluator_config, Mapping):
        raise SpecError(
            "evaluator_config", f"must be a mapping with the key 'spec', got {type(evaluator_config).__name__}."
        )
    for key in evaluator_config:
        if key not in CONFIG_KEYS:
            raise SpecError(
                f"evaluator_config.{key}",
                f"unknown key{did_you_mean(str(key), CONFIG_KEYS)}; the "
                f"{NAME} evaluator reads {', '.join(CONFIG_KEYS)}.",
            )
    if "spec" not in evaluator_config:
        raise SpecError(
            "evaluator_config.spec",
            "missing: give the evaluation spec, as a path to its YAML file or as "
            "a mapping (evaluator_config={'spec': 'eval.yaml'}).",
        )
    spec = evaluator_config["spec"]
    if not isinstance(spec, (str, Path, Mapping)):
        raise SpecError(
            "evaluator_config.spec", f"is a path to the spec's YAML file or a mapping, got {type(spec).__name__}."
        )
    system = evaluator_config.get("system", DEFAULT_SYSTEM)
    if not isinstance(system, str) or not system:
        raise SpecError(
            "evaluator_config.system", f"is the system name of the model's rows (a non-empty string), got {system!r}."
        )
    out = evaluator_config.get("out")
    if out is not None and not isinstance(out, (str, Path)):
        raise SpecError("evaluator_config.out", f"is a folder path, got {type(out).__name__}.")
    return Config(spec, system, Path(out) if out is not None else None)


def load_plugin_spec(config: Config) -> tuple[Any, dict[str, Any]]:
    """The spec as applied to the model's rows (its systems being those rows: ``data.systems`` may be left out), and
    the params that record its comparison settings. A comparison section is not applied (one model is evaluated):
    its test, correction, wins_losses and tie_tolerance are recorded as the run's ``comparison.*`` params, which
    ``ndcg-mlflow compare`` of two such runs uses; its baseline names another system than the model's rows. A
    decision section is refused (there is no candidate to decide on)."""
    import dataclasses

    from ..spec import InMemory, load_spec

    def one_model(source: str | None) -> SpecError:
        return SpecError(
            "comparison",
            f"the {NAME} evaluator evaluates one model, so there is no baseline to "
            f"compare it with here: comparison.baseline names another system than the model's rows "
            f"({config.system!r}); the section's other settings are recorded for ndcg-mlflow compare.",
            source,
        )

    try:
        spec = load_spec(config.spec, tables=InMemory(qrels=False, systems=(config.system,)))
    except SpecError as exc:
        if not exc.path.startswith("comparison"):
            raise
        baseline = _declared_baseline(config.spec)  # the spec was read: its baseline names no system here
        if baseline is None or baseline == config.system:
            raise one_model(exc.source) from None
        spec = load_spec(config.spec, tables=InMemory(qrels=False, systems=(config.system, baseline)))
    if spec.decision is not None:
        raise SpecError(
            "decision",
            f"the {NAME} evaluator evaluates one model, so there is no candidate to decide on here; leave the "
            f"decision section out of this spec (ndcg-mlflow run decides between systems).",
            str(spec.source) if spec.source else None,
        )
    if spec.judge is not None:
        raise SpecError(
            "judge",
            f"the {NAME} evaluator logs one model's metrics under one source of judgments; a judge's judgments are "
            f"combined with the human ones by ndcg_mlflow.evaluate (or ndcg-mlflow run) on the model's scored "
            f"rows: leave the judge section out of this spec.",
            str(spec.source) if spec.source else None,
        )
    params = {k: v for k, v in spec.resolved().items() if k.startswith("comparison.") and k != "comparison.baseline"}
    return dataclasses.replace(spec, systems=spec.systems[:1], comparison=None), params


def _declared_baseline(spec: Any) -> str | None:
    """``comparison.baseline`` as a spec that was read once already declares it (None if it is not a name)."""
    from ..spec.yamltext import safe_yaml

    raw = spec if isinstance(spec, Mapping) else safe_yaml(Path(spec).read_text(encoding="utf-8-sig"), str(spec))
    comparison = raw.get("comparison") if isinstance(raw, Mapping) else None
    baseline = comparison.get("baseline") if isinstance(comparison, Mapping) else None
    return baseline if isinstance(baseline, str) else None


class NdcgSpecEvaluator:
    """The ``ndcg_spec`` model evaluator (MLflow's ``ModelEvaluator`` interface)."""

    name = NAME

    @classmethod
    def can_evaluate(cls, *, model_type, evaluator_config, **kwargs) -> bool:
        """Every ranker (no evaluator of MLflow's own takes that model type, so a config without a spec, or with
        a misspelt key, gets this evaluator's error naming it); a retriever when the config is meant for this
        evaluator (a ``spec`` key, or a key close to one of its keys): with ``evaluators=None`` MLflow runs every
        evaluator that says yes, and its own retriever evaluation stays untouched."""
        if model_type == RANKER:
            return True
        if model_type != RETRIEVER or not isinstance(evaluator_config, Mapping):
            return False
        return any(key in CONFIG_KEYS or did_you_mean(str(key), CONFIG_KEYS) for key in evaluator_config)

    def evaluate(
        self,
        *,
        model_type,
        dataset,
        run_id,
        evaluator_config,
        model=None,
        extra_metrics=None,
        custom_artifacts=None,
        predictions=None,
        **kwargs,
    ):
        from mlflow.models.evaluation import EvaluationResult as MlflowResult

        if model_type not in MODEL_TYPES:
            raise SpecError(
                "model_type", f"the {NAME} evaluator evaluates model_type 'ranker' or 'retriever', got {model_type!r}."
            )
        if extra_metrics or custom_artifacts:
            raise SpecError(
                "extra_metrics",
                f"the {NAME} evaluator computes the spec's metrics only; evaluate "
                f"extra metrics or custom artifacts with another evaluator.",
            )
        config = read_config(evaluator_config)
        spec, recorded = load_plugin_spec(config)
        frame = dataset.features_data
        refuse_cut_spark_frame(dataset, run_id)
        output = model_output(model, frame, dataset, predictions)
        table = system_table(model_type, frame, output)
        return MlflowResult(*log_to_run(spec, config, table, run_id, recorded))


def refuse_cut_spark_frame(dataset: Any, run_id: str) -> None:
    """MLflow passes the evaluator the first 10,000 rows of a Spark DataFrame (``limit(10000).toPandas()``), which
    cuts through queries and would give a wrong mean. Data of fewer rows arrived whole. Data of that many rows are
    evaluated only when the run's logged dataset input (matched by digest) shows them whole: a pandas profile
    whose ``num_rows`` is the number of rows received. A Spark profile (``approx_count``), a profile Spark Connect
    could not compute, or no logged input at all is refused (a DataError pointing to the Spark engine)."""
    import json

    from mlflow.tracking import MlflowClient

    try:
        from mlflow.data.evaluation_dataset import EvaluationDataset

        limit = int(EvaluationDataset.SPARK_DATAFRAME_LIMIT)
    except (ImportError, AttributeError):
        limit = SPARK_ROW_LIMIT
    rows = len(dataset.features_data)
    if rows < limit:
        return
    digest = getattr(dataset, "digest", None)
    inputs = MlflowClient().get_run(run_id).inputs
    name, count = getattr(dataset, "name", None) or "data", None
    for entry in (inputs.dataset_inputs if inputs is not None else None) or []:
        ds = entry.dataset
        if digest is None or ds.digest != digest:
            continue
        name = ds.name
        try:
            profile = json.loads(ds.profile) if ds.profile else None
        except ValueError:
            profile = None
        if isinstance(profile, dict) and profile.get("num_rows") == rows and "approx_count" not in profile:
            return  # a pandas DataFrame, every row of it
        if isinstance(profile, dict) and isinstance(profile.get("approx_count"), int):
            count = profile["approx_count"]
    size = f"about {count} rows" if count is not None else "a size MLflow did not record"
    raise DataError(
        f"dataset '{name}'",
        (
            f"{rows} rows arrived, MLflow's limit for a Spark DataFrame, whose rows beyond it ({size}) MLflow does not "
            f"hand to an evaluator (it passes the first {limit} rows): a cut through queries, whose candidates beyond "
            f"it would be missing, a wrong nDCG. Evaluate Spark data with the Spark engine: score the rows on Spark, "
            f"then ndcg_mlflow.evaluate(spec, systems={{'model': scored_df}}, engine=ndcg_mlflow.Spark(spark));"
            f" or pass "
            f"mlflow.models.evaluate a pandas DataFrame of every row."
        ),
    )


def model_output(model: Any, frame: Any, dataset: Any, predictions: str | None) -> Any:
    """The model's predictions on ``frame`` (every column of the data), or the data's own predictions column
    when no model is given."""
    if model is None:
        if not getattr(dataset, "has_predictions", False):
            raise DataError(
                PREDICTIONS,
                "no model and no predictions: give mlflow.models.evaluate a model, or "
                "predictions='<column>' naming the column of data holding them.",
            )
        return dataset.predictions_data
    output = model.predict(frame)
    import pandas as pd

    if isinstance(output, pd.DataFrame):
        if predictions is not None:
            if predictions not in output.columns:
                raise DataError(
                    PREDICTIONS,
                    f"predictions={predictions!r} names no column of the model's output "
                    f"(its columns: {preview(list(output.columns))}).",
                )
            return output[predictions]
        if output.shape[1] != 1:
            raise DataError(
                PREDICTIONS,
                f"the model returned {output.shape[1]} columns "
                f"({preview(list(output.columns))}); name the one to evaluate with "
                f"predictions='<column>'.",
            )
        return output.iloc[:, 0]
    return output


def _id_column(frame: Any, column: str, model_type: str) -> Any:
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise DataError(
            "data", f"a {model_type}'s data is a DataFrame with a {column!r} column, got {type(frame).__name__}."
        )
    if column not in frame.columns:
        what = (
            "one row per query and candidate document: query_id, doc_id and the model's inputs"
            if model_type == RANKER
            else "one row per query: query_id and the model's inputs"
        )
        raise DataError(
            "data",
            f"no {column!r} column (its columns: {preview([str(c) for c in frame.columns])}); "
            f"a {model_type}'s data holds {what}.",
        )
    return frame[column]


def system_table(model_type: str, frame: Any, output: Any) -> Any:
    """The model's rows as a run table: ``query_id, doc_id, score`` (ranker) or ``query_id, doc_id, rank``
    (retriever, ranks 1.. in the order returned). The output is read by
    :func:`ndcg_mlflow.models.predictions.read_predictions`, the rule of ``ndcg-mlflow run``; a ranker's output must be
    scores, a retriever's ranked lists."""
    import pandas as pd

    from ..models.predictions import LISTS, SCORES, read_predictions

    ranker = model_type == RANKER
    query = _id_column(frame, "query_id", model_type)
    doc = _id_column(frame, "doc_id", RANKER) if ranker else None
    predicted = read_predictions(
        output,
        query,
        model="the model",
        where=f"the {len(frame)} rows of data",
        file=PREDICTIONS,
        expect=SCORES if ranker else LISTS,
    )
    if ranker:
        assert doc is not None
        return pd.DataFrame({"query_id": query.to_numpy(), "doc_id": doc.to_numpy(), "score": predicted.scores})
    lists = predicted.lists
    assert lists is not None
    n = np.fromiter((len(docs) for docs in lists), dtype=np.int64, count=len(lists))
    if n.sum() == 0:
        raise DataError(PREDICTIONS, "the model retrieved no document for any query.")
    docs = [d for row in lists for d in row]  # ids as text: 7 and "7" are one id
    rank = np.concatenate([np.arange(1, k + 1, dtype=np.int64) for k in n if k])
    return pd.DataFrame(
        {"query_id": np.repeat(query.to_numpy(), n), "doc_id": pd.array(docs, dtype=object), "rank": rank}
    )


def log_to_run(
    spec: Any, config: Config, table: Any, run_id: str, recorded: dict[str, Any]
) -> tuple[dict[str, float], dict[str, Any], str]:
    """Evaluate the model's rows, write the output folder, log it to ``run_id`` (with the ``recorded`` params of
    :func:`load_plugin_spec`); the metrics, the artifacts (name -> MLflow EvaluationArtifact) and the run id, as
    MLflow's EvaluationResult takes them."""
    from ..engines.local.pipeline import evaluate_tables

    result = evaluate_tables(spec, None, {config.system: table})
    if config.out is not None:
        return _write_and_log(result, config, config.out, run_id, recorded)
    with tempfile.TemporaryDirectory(prefix="ndcg-mlflow-evaluate-") as tmp:
        return _write_and_log(result, config, Path(tmp) / "out", run_id, recorded)


def _write_and_log(result: Any, config: Config, out: Path, run_id: str, recorded: dict[str, Any]):
    import json

    from mlflow.models.evaluation.artifacts import CsvEvaluationArtifact, JsonEvaluationArtifact, TextEvaluationArtifact
    from mlflow.tracking import MlflowClient
    from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

    from ..outputs.write import write_outputs
    from ..spec import system_file_stem
    from ..tracking.client import log_batch, log_outputs
    from ..tracking.names import TAG_PREFIX, common_tags, data_tags, param_value, system_metrics

    write_outputs(result, out)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    run_key = (out / "run_key.txt").read_text(encoding="utf-8").strip()
    metrics = system_metrics(result.summary["systems"][config.system])  # means with their intervals
    # the definition as a system run's params (what compare reads); the run is the user's, so no generic key
    # (name, system) that the user's own params could hold: those are tags here
    params = {
        k: param_value(v)
        for k, v in {**summary["spec"], **recorded}.items()
        if k.startswith(("metric.", "queries.", "uncertainty.", "comparison.")) or k == "data.qrels"
    }
    tags = {
        **common_tags(summary, run_key),
        **data_tags(summary.get("files", {})),
        f"{TAG_PREFIX}.role": "evaluation",
        f"{TAG_PREFIX}.systems": param_value(config.system),
        f"{TAG_PREFIX}.system": config.system,
        f"{TAG_PREFIX}.evaluator": NAME,
        **dict(result.spec.mlflow.tags),
    }
    client = MlflowClient()
    earlier = client.get_run(run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS)
    log_batch(client, run_id, metrics, params, tags)
    log_outputs(client, run_id, out, summary)  # (the figures with the folder's other files)
    stem = system_file_stem(config.system)  # the system's own files, as a system run has them (for compare)
    for suffix in ("per_query.csv", "top.csv"):
        if (out / "systems" / f"{stem}.{suffix}").is_file():
            client.log_artifact(run_id, str(out / "systems" / f"{stem}.{suffix}"))
    if earlier:  # the tables another evaluator logged to this run stay listed beside ours
        ours = json.loads(client.get_run(run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS) or "[]")
        listed = json.loads(earlier) + [t for t in ours if t not in json.loads(earlier)]
        client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps(listed))
    client.set_tag(run_id, f"{TAG_PREFIX}.logging", "complete")
    root = client.get_run(run_id).info.artifact_uri.rstrip("/")
    artifacts = {
        "per_query": CsvEvaluationArtifact(f"{root}/per_query.csv"),
        "summary": JsonEvaluationArtifact(f"{root}/summary.json"),
        "report_html": TextEvaluationArtifact(f"{root}/report.html"),
        "report_md": TextEvaluationArtifact(f"{root}/report.md"),
    }
    return metrics, artifacts, run_id
