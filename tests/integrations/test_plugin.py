"""The ``ndcg_spec`` model evaluator (ndcg_mlflow/integrations/evaluator.py) through ``mlflow.models.evaluate``
against real local SQLite stores: its numbers equal ``ndcg-mlflow run`` on the same scored rows and closed forms;
it logs the output folder to the evaluation's run; it refuses a Spark DataFrame cut by MLflow, bad configs and
bad model outputs with errors that say what was expected."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO
from helpers import doc_block, run_cli

from ndcg_mlflow.errors import DataError, SpecError
from ndcg_mlflow.integrations.evaluator import NAME, NdcgSpecEvaluator, read_config

pytestmark = pytest.mark.integration  # mlflow stores and processes

METRIC = {
    "gain": "exponential",
    "cutoffs": [3, 10, "all"],
    "discount": "log2",
    "ties": "displayed_order",
    "ideal": "judged_catalog",
    "empty_ideal": "exclude",
    "unjudged": "zero",
    "missing_queries": "zero",
}


@pytest.fixture
def registered(fluent_store):
    """The evaluator in MLflow's registry under its entry-point name (the editable install the tests run from may
    predate the entry point; ``test_entry_point_*`` check the declaration itself)."""
    from mlflow.models.evaluation.evaluator_registry import _model_evaluation_registry as registry

    before = registry._registry.get(NAME)
    registry.register(NAME, NdcgSpecEvaluator)
    yield fluent_store
    if before is None:
        registry._registry.pop(NAME, None)
    else:
        registry.register(NAME, before)


def _data(seed: int = 7, n_queries: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Candidates (query_id, doc_id, a feature x) and graded judgments, with tied x values, unjudged candidates,
    a query without any relevant judgment (empty ideal) and a judged query with no candidate (missing)."""
    rng = np.random.default_rng(seed)
    cands, qrels = [], []
    for q in range(n_queries):
        qid = f"q{q:02d}"
        n = int(rng.integers(4, 16))
        for d in range(n):
            cands.append((qid, f"{qid}-d{d}", float(rng.integers(0, 6))))  # few values: many ties
            if rng.random() < 0.7:
                qrels.append((qid, f"{qid}-d{d}", int(rng.integers(0, 4)) if q != 3 else 0))
        qrels.append((qid, f"{qid}-extra", int(rng.integers(1, 4)) if q != 3 else 0))  # judged, never a candidate
    qrels.append(("unanswered", "unanswered-d0", 2))  # judged, no candidates at all: a missing query
    return (
        pd.DataFrame(cands, columns=["query_id", "doc_id", "x"]),
        pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"]),
    )


def _spec(folder: Path, qrels: pd.DataFrame, *, systems: dict | None = None, extra: dict | None = None) -> Path:
    qrels.to_csv(folder / "qrels.csv", index=False)
    raw = {
        "spec_version": 1,
        "name": "plugin",
        "metric": METRIC,
        "queries": {"weights": "uniform"},
        "data": {"qrels": "qrels.csv", **({"systems": systems} if systems else {})},
        "mlflow": {"experiment": "plugin"},
        **(extra or {}),
    }
    path = folder / ("spec.yaml" if not systems else "spec_run.yaml")
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


UNCERTAINTY = {"uncertainty": {"resamples": 500, "confidence": 0.9, "method": "percentile", "seed": 3}}
COMPARISON = {"baseline": "bm25", "test": "both", "correction": "holm", "wins_losses": 3, "tie_tolerance": 1e-9}


def _cli_summary(folder: Path, scored: pd.DataFrame, qrels: pd.DataFrame, extra: dict | None = None) -> dict:
    """``ndcg-mlflow run`` (a subprocess, no MLflow) on the same rows written as a run file."""
    scored.to_csv(folder / "model.csv", index=False)
    spec = _spec(folder, qrels, systems={"model": "model.csv"}, extra=extra)
    out = run_cli("run", str(spec), "--no-mlflow", "--quiet", "--out", str(folder / "cli_out"), cwd=folder)
    assert out.returncode == 0, out.stderr
    return json.loads((folder / "cli_out" / "summary.json").read_text())["systems"]["model"]


def _log_ranker(name: str, noise: np.ndarray | None = None) -> str:
    """A registered pyfunc ranker whose score is its input x, plus ``noise`` row by row (so the test knows every
    score); a new version of the model ``name`` each time."""
    import mlflow

    class XRanker(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):
            x = model_input["x"].to_numpy() * 1.0
            return x if noise is None else x + noise[: len(x)]

    with mlflow.start_run():
        info = mlflow.pyfunc.log_model(
            name="ranker", python_model=XRanker(), pip_requirements=[], registered_model_name=name
        )
    return f"models:/{name}/{info.registered_model_version}"


def test_ranker_from_the_registry_equals_the_cli_and_logs_the_folder(registered, tmp_path):
    import mlflow

    cands, qrels = _data()
    spec = _spec(tmp_path, qrels, extra=UNCERTAINTY)
    uri = _log_ranker("xranker")
    with mlflow.start_run() as run:
        result = mlflow.models.evaluate(
            uri, data=cands, model_type="ranker", evaluators="ndcg_spec", evaluator_config={"spec": str(spec)}
        )
    cli = _cli_summary(tmp_path, cands.rename(columns={"x": "score"}), qrels, extra=UNCERTAINTY)
    for key in ("ndcg_at_3", "ndcg_at_10", "ndcg_at_all"):
        assert result.metrics[key] == cli[key]["mean"], key  # the same engine: equal, not close
        assert result.metrics[f"{key}.ci_low"] == cli[key]["ci_low"]
        assert result.metrics[f"{key}.ci_high"] == cli[key]["ci_high"]
    assert cli["ndcg_at_10"]["n_empty_ideal"] == 1 and cli["ndcg_at_10"]["n_missing"] == 1  # the rules acted
    logged = mlflow.get_run(run.info.run_id)
    assert logged.data.metrics["ndcg_at_10"] == result.metrics["ndcg_at_10"]
    assert logged.data.params["metric.ties"] == "displayed_order" and logged.data.tags["ndcg_mlflow.system"] == "model"
    assert logged.data.tags["ndcg_mlflow.role"] == "evaluation"
    assert logged.data.tags["ndcg_mlflow.logging"] == "complete"
    files = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {
        "per_query.csv",
        "summary.json",
        "report.html",
        "report.md",
        "spec.yaml",
        "per_query_table.json",
        "figures",
    } <= files
    per_query = pd.read_csv(result.artifacts["per_query"].uri, dtype={"query_id": str, "cutoff": str})
    assert len(per_query) == 31 * 3 and set(per_query["status"]) == {"ok", "empty_ideal", "missing"}
    assert (
        "plugin"
        in Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="report.md")).read_text()
    )


def _closed_form(grades_in_order: list[int], all_grades: list[int], k: int) -> float:
    dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(grades_in_order[:k]))
    ideal = sorted(all_grades, reverse=True)
    return dcg / sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal[:k]))


def test_retriever_function_equals_closed_forms(registered, tmp_path):
    import mlflow

    qrels = pd.DataFrame(
        [("a", "d1", 3), ("a", "d2", 1), ("a", "d3", 2), ("b", "e1", 1), ("b", "e9", 2)],
        columns=["query_id", "doc_id", "grade"],
    )
    spec = _spec(tmp_path, qrels)
    retrieved = {"a": ["d2", "x", "d1", "d3"], "b": ["e1"]}

    def retrieve(frame: pd.DataFrame) -> list[list[str]]:
        return [retrieved[q] for q in frame["query_id"]]

    data = pd.DataFrame({"query_id": ["a", "b"], "text": ["first", "second"]})
    with mlflow.start_run():
        result = mlflow.models.evaluate(
            retrieve,
            data=data,
            model_type="retriever",
            evaluators="ndcg_spec",
            evaluator_config={"spec": str(spec), "system": "bm25"},
        )
    a3 = _closed_form([1, 0, 3], [3, 1, 2], 3)
    b3 = _closed_form([1], [1, 2], 3)
    assert result.metrics["ndcg_at_3"] == pytest.approx((a3 + b3) / 2, rel=1e-12)
    a_all = _closed_form([1, 0, 3, 2], [3, 1, 2], 10)
    assert result.metrics["ndcg_at_all"] == pytest.approx((a_all + b3) / 2, rel=1e-12)


def test_static_predictions_column_without_a_model(registered, tmp_path):
    import mlflow

    cands, qrels = _data(seed=11, n_queries=12)
    spec = _spec(tmp_path, qrels)
    with mlflow.start_run():
        result = mlflow.models.evaluate(
            data=cands.rename(columns={"x": "score"}),
            predictions="score",
            model_type="ranker",
            evaluators="ndcg_spec",
            evaluator_config={"spec": str(spec)},
        )
    cli = _cli_summary(tmp_path, cands.rename(columns={"x": "score"}), qrels)
    assert result.metrics["ndcg_at_10"] == cli["ndcg_at_10"]["mean"]


def test_refusals_name_what_was_expected(registered, tmp_path):
    import mlflow

    cands, qrels = _data(n_queries=5)
    spec = _spec(tmp_path, qrels)
    with mlflow.start_run():
        with pytest.raises(DataError, match="no 'doc_id' column"):
            mlflow.models.evaluate(
                lambda f: f["x"],
                data=cands.drop(columns="doc_id"),
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(spec)},
            )
        with pytest.raises(
            DataError,
            match=r"returned 3 values for (\d+) input rows \(the \1 rows of data\); a ranker "
            r"returns one score per row",
        ):
            mlflow.models.evaluate(
                lambda f: np.ones(3),
                data=cands,
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(spec)},
            )
        with pytest.raises(DataError, match="returned str for query .*a retriever returns, per row, a list of doc ids"):
            mlflow.models.evaluate(
                lambda f: ["d1"] * len(f),
                data=cands[["query_id"]].drop_duplicates(),
                model_type="retriever",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(spec)},
            )
        with pytest.raises(SpecError, match=r"evaluator_config\.sepc.*did you mean 'spec'"):
            mlflow.models.evaluate(
                lambda f: f["x"],
                data=cands,
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"sepc": str(spec)},
            )
        own = _spec(tmp_path, qrels, extra={**UNCERTAINTY, "comparison": {**COMPARISON, "baseline": "model"}})
        with pytest.raises(SpecError, match="at key 'comparison'.*evaluates one model.*another system"):
            mlflow.models.evaluate(  # the baseline is the model's own rows
                lambda f: f["x"],
                data=cands,
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(own)},
            )
        decision = {"key": "ndcg_at_10", "rule": "superiority", "margin": 0.0}
        decided = _spec(tmp_path, qrels, extra={**UNCERTAINTY, "comparison": COMPARISON, "decision": decision})
        with pytest.raises(SpecError, match="at key 'decision'.*no candidate to decide on"):
            mlflow.models.evaluate(
                lambda f: f["x"],
                data=cands,
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(decided)},
            )


def test_can_evaluate_only_rankers_and_retrievers_given_a_spec():
    assert NdcgSpecEvaluator.can_evaluate(model_type="ranker", evaluator_config={"spec": "s.yaml"})
    assert NdcgSpecEvaluator.can_evaluate(model_type="retriever", evaluator_config={"spec": "s.yaml"})
    assert NdcgSpecEvaluator.can_evaluate(model_type="retriever", evaluator_config={"sepc": "s.yaml"})  # a typo
    assert NdcgSpecEvaluator.can_evaluate(model_type="ranker", evaluator_config={})  # then refused, naming 'spec'
    # evaluators=None runs every evaluator that says yes: MLflow's own retriever evaluation is left alone
    assert not NdcgSpecEvaluator.can_evaluate(model_type="retriever", evaluator_config={})
    assert not NdcgSpecEvaluator.can_evaluate(model_type="retriever", evaluator_config={"retriever_k": 5})
    assert not NdcgSpecEvaluator.can_evaluate(model_type="classifier", evaluator_config={"spec": "s.yaml"})
    with pytest.raises(SpecError, match="evaluator_config.spec.*missing"):
        read_config({"system": "m"})


def test_a_spec_without_systems_is_refused_by_run(tmp_path):
    _, qrels = _data(n_queries=3)
    spec = _spec(tmp_path, qrels)
    out = run_cli("run", str(spec), "--no-mlflow", "--quiet", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert out.returncode == 2 and "data.systems" in out.stderr and "missing required key" in out.stderr


def test_entry_point_is_declared_and_loads():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    target = declared["mlflow.model_evaluator"][NAME]
    assert target == "ndcg_mlflow.integrations.evaluator:NdcgSpecEvaluator"
    code = (
        "import importlib.metadata as m; "
        "eps = [e for e in m.entry_points(group='mlflow.model_evaluator') if e.name == 'ndcg_spec']; "
        "print(eps[0].value if eps else '')\n"
        "if eps:\n"
        "    from mlflow.models.evaluation import list_evaluators\n"
        "    from mlflow.models.evaluation.evaluator_registry import _model_evaluation_registry as r\n"
        "    print('ndcg_spec' in list_evaluators(), r.get_evaluator('ndcg_spec').__class__.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    if lines[0]:  # the installed metadata (pip install -e . after this entry point) names the class MLflow loads
        assert lines[0] == target
        assert lines[1] == "True NdcgSpecEvaluator"


def test_a_spark_dataframe_cut_by_mlflow_is_refused(registered, tmp_path, spark):
    import mlflow

    _, qrels = _data(n_queries=3)
    spec = _spec(tmp_path, qrels)
    n = 12_000  # MLflow would pass the first 10,000 rows: query q1199's candidates (and more) cut off
    big = pd.DataFrame(
        {
            "query_id": [f"q{i // 10}" for i in range(n)],
            "doc_id": [f"d{i}" for i in range(n)],
            "x": np.arange(n, dtype=float),
        }
    )
    # the size is MLflow's approximate count of the frame when its profile got one in time (load-dependent)
    refused = r"10000 rows arrived.*\((about 12000 rows|a size MLflow did not record)\).*first 10000 rows.*Spark engine"
    with mlflow.start_run(), pytest.raises(DataError, match=refused):
        mlflow.models.evaluate(
            lambda f: f["x"],
            data=spark.createDataFrame(big),
            model_type="ranker",
            evaluators="ndcg_spec",
            evaluator_config={"spec": str(spec)},
        )
    cands, qrels = _data(seed=5, n_queries=8)
    spec = _spec(tmp_path, qrels)
    with mlflow.start_run():  # a small Spark DataFrame arrives whole: evaluated, the same numbers as pandas
        result = mlflow.models.evaluate(
            lambda f: f["x"],
            data=spark.createDataFrame(cands),
            model_type="ranker",
            evaluators="ndcg_spec",
            evaluator_config={"spec": str(spec)},
        )
    cli = _cli_summary(tmp_path, cands.rename(columns={"x": "score"}), qrels)
    assert result.metrics["ndcg_at_10"] == cli["ndcg_at_10"]["mean"]


def test_the_documented_evaluator_example_runs(registered, tmp_path):
    cands, qrels = _data(seed=21)
    shutil.copy(_spec(tmp_path, qrels), tmp_path / "eval.yaml")  # the documented names, in the working folder
    _log_ranker("ranker")
    namespace = {"candidates": cands}
    exec(doc_block("integrations.md", "## `mlflow.models.evaluate`: the `ndcg_spec` evaluator"), namespace)
    cli = _cli_summary(tmp_path, cands.rename(columns={"x": "score"}), qrels)
    assert namespace["result"].metrics["ndcg_at_10"] == cli["ndcg_at_10"]["mean"]


def test_two_evaluator_runs_compare_as_one_evaluation_of_both(registered, tmp_path):
    import mlflow

    from ndcg_mlflow.api import evaluate
    from ndcg_mlflow.tracking import compare_runs, rebuild_report

    cands, qrels = _data(seed=31, n_queries=25)
    spec = _spec(tmp_path, qrels, extra=UNCERTAINTY)
    noise = np.random.default_rng(5).normal(0, 2, len(cands))
    models = {"first": lambda f: f["x"], "second": lambda f: f["x"] + noise[: len(f)]}
    runs = {}
    for name, fn in models.items():
        with mlflow.start_run() as run:
            mlflow.models.evaluate(
                fn,
                data=cands,
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(spec), "system": name},
            )
        runs[name] = run.info.run_id
    settings = {"test": "both", "correction": "holm", "wins_losses": 3, "tie_tolerance": 1e-9}
    result, _, _ = compare_runs(runs["first"], runs["second"], out=tmp_path / "cmp", log=False, overrides=settings)
    raw = yaml.safe_load(spec.read_text())
    raw["comparison"] = {"baseline": "first", **settings}
    both = evaluate(
        raw,
        base_dir=tmp_path,
        systems={"first": cands.assign(score=cands["x"]), "second": cands.assign(score=cands["x"] + noise)},
    )
    for got, want in zip(result.analysis.comparisons, both.analysis.comparisons, strict=True):
        assert (got["key"], got["candidate"], got["baseline"]) == (want["key"], "second", "first")  # systems named
        for key in ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test", "n_paired", "wins", "losses"):
            assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), (got["key"], key)
    assert any(abs(c["delta"]) > 1e-3 for c in both.analysis.comparisons)  # the two models differ
    html, _ = rebuild_report(runs["second"], tmp_path / "report")  # `ndcg-mlflow report RUN_ID` reads it too
    assert "second" in html.read_text(encoding="utf-8")


def test_two_evaluator_runs_compare_without_flags_named_by_their_models(registered, tmp_path, capsys):
    """The spec's comparison settings are recorded on each run, so `ndcg-mlflow compare A B` needs no flag; each
    system is named by the registered model version the run evaluated."""
    import mlflow

    from ndcg_mlflow.api import evaluate
    from ndcg_mlflow.cli import main

    cands, qrels = _data(seed=41, n_queries=25)
    spec = _spec(tmp_path, qrels, extra={**UNCERTAINTY, "comparison": COMPARISON})
    noise = np.random.default_rng(6).normal(0, 2, len(cands))
    runs = []
    for uri in (_log_ranker("xranker"), _log_ranker("xranker", noise)):
        with mlflow.start_run() as run:
            mlflow.models.evaluate(
                uri, data=cands, model_type="ranker", evaluators="ndcg_spec", evaluator_config={"spec": str(spec)}
            )
        runs.append(run.info.run_id)
    params = mlflow.get_run(runs[0]).data.params
    assert {k: params[k] for k in params if k.startswith("comparison.")} == {
        "comparison.test": "both",
        "comparison.correction": "holm",
        "comparison.wins_losses": "3",
        "comparison.tie_tolerance": "1e-09",
    }  # the baseline (bm25) is not the model's: compare's run A is
    assert main(["compare", *runs, "--out", str(tmp_path / "cmp"), "--no-mlflow", "--quiet"]) == 0
    got = json.loads((tmp_path / "cmp" / "summary.json").read_text())["comparisons"]
    raw = yaml.safe_load(spec.read_text())
    raw["comparison"] = {**COMPARISON, "baseline": "xranker v1"}
    scored = {"xranker v1": cands.assign(score=cands["x"]), "xranker v2": cands.assign(score=cands["x"] + noise)}
    want = evaluate(raw, base_dir=tmp_path, systems=scored).analysis.comparisons
    assert [(c["candidate"], c["baseline"]) for c in got] == [("xranker v2", "xranker v1")] * 3
    for g, w in zip(got, want, strict=True):
        for key in ("delta", "ci_low", "ci_high", "p_randomization", "p_t_test", "p_corrected", "wins", "losses"):
            assert g[key] == pytest.approx(w[key], rel=1e-12, abs=1e-15), (g["key"], key)

    plain = _spec(tmp_path, qrels, extra=UNCERTAINTY)  # no comparison section: nothing to compare with
    for uri in ("models:/xranker/1", "models:/xranker/2"):
        with mlflow.start_run() as run:
            mlflow.models.evaluate(
                uri, data=cands, model_type="ranker", evaluators="ndcg_spec", evaluator_config={"spec": str(plain)}
            )
        runs.append(run.info.run_id)
    capsys.readouterr()
    assert main(["compare", *runs[2:], "--out", str(tmp_path / "cmp2"), "--no-mlflow", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "neither run records the comparison settings" in err and "no comparison section" in err
    assert "--test, --correction, --wins-losses, --tie-tolerance" in err and "--resamples" not in err
    assert main(["compare", runs[2], runs[1], "--out", str(tmp_path / "cmp3"), "--no-mlflow", "--quiet"]) == 0

    spec = _spec(tmp_path, qrels, extra={**UNCERTAINTY, "comparison": COMPARISON})  # (the same file name)
    for name in ("alpha", "beta"):  # no model MLflow knows, the default system name: the run's name
        with mlflow.start_run(run_name=name) as run:
            mlflow.models.evaluate(
                lambda f: f["x"],
                data=cands,
                model_type="ranker",
                evaluators="ndcg_spec",
                evaluator_config={"spec": str(spec)},
            )
        runs.append(run.info.run_id)
    assert main(["compare", *runs[4:], "--out", str(tmp_path / "cmp4"), "--no-mlflow", "--quiet"]) == 0
    systems = json.loads((tmp_path / "cmp4" / "summary.json").read_text())["systems"]
    assert list(systems) == ["alpha", "beta"]


def test_a_retrievers_lists_become_ranked_rows():
    from ndcg_mlflow.integrations.evaluator import system_table

    table = system_table("retriever", pd.DataFrame({"query_id": [1, 2, 3]}), [[7, "8"], [], np.array(["x"])])
    assert table["query_id"].tolist() == [1, 1, 3] and table["doc_id"].tolist() == ["7", "8", "x"]
    assert table["rank"].tolist() == [1, 2, 1]
    with pytest.raises(DataError, match="query '1' is on rows 1 and 2 of the 2 rows of data"):
        system_table("retriever", pd.DataFrame({"query_id": [1, 1]}), [["a"], ["b"]])


def test_a_pandas_dataframe_beyond_the_spark_limit_is_evaluated_whole(registered, tmp_path):
    import mlflow

    cands, qrels = _data(seed=41, n_queries=1500)  # about 14,000 rows: more than MLflow passes of a Spark frame
    assert len(cands) > 10_000
    spec = _spec(tmp_path, qrels)
    with mlflow.start_run():
        result = mlflow.models.evaluate(
            lambda f: f["x"],
            data=cands,
            model_type="ranker",
            evaluators="ndcg_spec",
            evaluator_config={"spec": str(spec)},
        )
    cli = _cli_summary(tmp_path, cands.rename(columns={"x": "score"}), qrels)
    assert result.metrics["ndcg_at_10"] == cli["ndcg_at_10"]["mean"]


def test_importing_the_integrations_imports_no_mlflow():
    code = (
        "import sys, ndcg_mlflow.integrations.evaluator, ndcg_mlflow.integrations.genai; print('mlflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.stdout.strip() == "False"


def test_a_rankers_output_read_by_the_rule_of_run():
    from ndcg_mlflow.integrations.evaluator import system_table

    frame = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": ["a", "b", "c"]})
    scores = np.array([0.5, 2.0, -1.0])
    for output in (
        scores,
        scores.reshape(-1, 1),
        pd.DataFrame({"p": scores}),
        pd.Series(scores),
        pd.Series(list(scores.reshape(-1, 1))),
        scores.reshape(-1, 1).tolist(),
    ):
        assert system_table("ranker", frame, output)["score"].tolist() == [0.5, 2.0, -1.0]
    for output, expected in (
        (pd.Series([np.array([0.5, 1.0]), np.array([2.0]), np.array([-1.0])]), "returned a list for query '1'"),
        (np.column_stack([scores, scores]), "returned an array of shape (3, 2)"),
        (None, "returned None"),
        (np.array(["0.5", "2", "-1"]), "not numbers"),
    ):
        with pytest.raises(DataError) as info:
            system_table("ranker", frame, output)
        assert expected in str(info.value), str(info.value)
