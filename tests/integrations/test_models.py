"""Systems that are models: registered pyfunc rankers resolved, loaded and scoring candidates, their metrics
linked to the logged model, the judgments and candidates logged as datasets, evaluations attached to the user's
own runs, and the promotion of an alias on a passing decision. Every test uses a real SQLite store: the models
are logged once per session into a copy of the pre-migrated store, which each test copies again."""

from __future__ import annotations

import json
import math
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ndcg_mlflow import Spark, timings
from ndcg_mlflow.cli import main

pytestmark = pytest.mark.integration

# a ranker logged from code: it scores a feature column (model_config "column"); with "mode" set it misbehaves
# as the tests of bad output need
MODEL_CODE = textwrap.dedent("""
    import numpy as np
    import pandas as pd
    import mlflow


    class FeatureRanker(mlflow.pyfunc.PythonModel):
        def load_context(self, context):
            self.column = context.model_config["column"]
            self.mode = context.model_config.get("mode", "score")

        def predict(self, context, model_input, params=None):
            mode = self.mode
            if mode == "by_row":  # the candidates say how to misbehave
                mode = str(model_input["mode"].iloc[0])
            if mode == "fail":
                raise ValueError("feature store unavailable")
            if mode == "short":
                return model_input[self.column].to_numpy()[:-1]
            if mode == "lists":  # a retriever: one ranked list of doc ids per query row
                return [str(v).split(",") for v in model_input[self.column]]
            scores = model_input[self.column].to_numpy(dtype=float)
            if mode == "column":  # (n, 1), as Keras and many scikit-learn wrappers return
                return scores.reshape(-1, 1)
            if mode == "frame":
                return pd.DataFrame({"prediction": scores})
            if mode == "series":
                return pd.Series(scores)
            if mode == "series_arrays":  # a Series of one-element arrays
                return pd.Series(list(scores.reshape(-1, 1)))
            if mode == "tolist":  # (n, 1) as nested lists
                return scores.reshape(-1, 1).tolist()
            if mode == "wide":  # (n, 2): two numbers per row
                return np.column_stack([-scores, scores])
            if mode == "none":
                return None
            if mode == "scalar":
                return float(scores.sum())
            return model_input[self.column].to_numpy(dtype=float)


    mlflow.models.set_model(FeatureRanker())
""")

N_QUERIES, N_DOCS = 30, 8


def candidates_frame(seed: int = 7) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Judgments and candidates: ``good`` is the grade plus small noise (ranks nearly ideally), ``noise`` is
    unrelated to the grade."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(N_QUERIES):
        grades = rng.integers(0, 4, N_DOCS)
        for d in range(N_DOCS):
            rows.append(
                {
                    "query_id": f"q{q:02d}",
                    "doc_id": f"d{d}",
                    "grade": int(grades[d]),
                    "good": float(grades[d] + rng.uniform(0, 0.5)),
                    "noise": float(rng.uniform(0, 4)),
                }
            )
    frame = pd.DataFrame(rows)
    return frame[["query_id", "doc_id", "grade"]], frame[["query_id", "doc_id", "good", "noise"]]


@pytest.fixture(scope="session")
def model_store(migrated_db, tmp_path_factory) -> dict:
    """A store holding registered model ``ranker`` (v1 scores ``noise``, v2 ``good``; aliases champion -> 1,
    challenger -> 2) and ``odd`` (no signature; misbehaves as its candidates say), logged once."""
    import os

    import mlflow
    from mlflow.models import infer_signature
    from mlflow.tracking import MlflowClient

    from ndcg_mlflow.tracking.registry import using_store

    folder = tmp_path_factory.mktemp("model_store")
    db = folder / "models.db"
    shutil.copy(migrated_db, db)
    code = folder / "feature_ranker.py"
    code.write_text(MODEL_CODE)
    uri = f"sqlite:///{db}"
    old_cwd = os.getcwd()
    os.chdir(folder)  # the artifacts go to folder/mlruns
    try:
        with using_store(uri):
            _, cands = candidates_frame()
            features = cands[["good", "noise"]]
            signature = infer_signature(features, np.zeros(len(features)))
            mlflow.set_experiment("training")
            info = {}
            with mlflow.start_run() as run:
                for version, column in ((1, "noise"), (2, "good")):
                    logged = mlflow.pyfunc.log_model(
                        name=f"ranker_{column}",
                        python_model=str(code),
                        model_config={"column": column},
                        signature=signature,
                        registered_model_name="ranker",
                    )
                    info[version] = logged.model_id
                odd = mlflow.pyfunc.log_model(
                    name="odd",
                    python_model=str(code),
                    model_config={"column": "good", "mode": "by_row"},
                    registered_model_name="odd",
                )
                retriever = mlflow.pyfunc.log_model(
                    name="retriever", python_model=str(code), model_config={"column": "docs", "mode": "lists"}
                )
            client = MlflowClient(uri)
            client.set_registered_model_alias("ranker", "champion", "1")
            client.set_registered_model_alias("ranker", "challenger", "2")
    finally:
        os.chdir(old_cwd)
    return {
        "db": db,
        "model_ids": info,
        "odd": odd.model_id,
        "retriever": retriever.model_id,
        "training_run": run.info.run_id,
    }


@pytest.fixture
def store(model_store, tmp_path, monkeypatch) -> str:
    db = tmp_path / "mlflow.db"
    shutil.copy(model_store["db"], db)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def write_data(folder: Path) -> None:
    qrels, cands = candidates_frame()
    qrels.to_csv(folder / "qrels.csv", index=False)
    cands.to_parquet(folder / "candidates.parquet", index=False)


def model_spec(
    folder: Path, systems: dict, *, decision: str = "", comparison: bool = True, ties: str = "displayed_order"
) -> Path:
    write_data(folder)
    lines = []
    for name, value in systems.items():
        lines.append(f"    {name}: {json.dumps(value)}")
    text = (
        "spec_version: 1\nname: rankers\n"
        f"metric: {{gain: exponential, cutoffs: [5, 10], discount: log2, ties: {ties},\n"
        "         ideal: judged_catalog, empty_ideal: exclude, unjudged: zero, missing_queries: zero}\n"
        "queries: {weights: uniform}\n"
        "data:\n  qrels: qrels.csv\n  systems:\n" + "\n".join(lines) + "\n"
        "mlflow: {experiment: rankers}\n"
    )
    if comparison:
        baseline = next(iter(systems))
        text += (
            "uncertainty: {resamples: 1000, confidence: 0.95, method: percentile, seed: 3}\n"
            f"comparison: {{baseline: {baseline}, test: randomization, correction: holm, wins_losses: 3,\n"
            "             tie_tolerance: 1.0e-9}\n"
        )
    text += decision
    path = folder / "spec.yaml"
    path.write_text(text)
    return path


def ndcg_at(frame: pd.DataFrame, qrels: pd.DataFrame, column: str, k: int) -> float:
    """Mean nDCG@k (exponential gain, log2 discount) of ranking each query's candidates by ``column``, computed
    here from the definition, independently of the tool."""
    grades = qrels.set_index(["query_id", "doc_id"])["grade"]
    values = []
    for q, group in frame.groupby("query_id"):
        order = group.sort_values(column, ascending=False, kind="stable")
        gains = [2.0 ** grades[(q, d)] - 1 for d in order["doc_id"]]
        ideal = sorted((2.0**g - 1 for g in grades[q]), reverse=True)
        dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))
        values.append(dcg / idcg if idcg > 0 else math.nan)
    return float(np.nanmean(values))


# --------------------------------------------------------------------------- scoring registered models


def test_aliases_resolved_scored_and_recorded(store, model_store, tmp_path):
    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
        },
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    qrels, cands = candidates_frame()
    for name, column in (("champion", "noise"), ("challenger", "good")):
        for k in (5, 10):
            assert summary["systems"][name][f"ndcg_at_{k}"]["mean"] == pytest.approx(
                ndcg_at(cands, qrels, column, k), rel=1e-12
            )
        scored = pd.read_parquet(out / "systems" / f"{name}.scored.parquet")
        assert list(scored.columns) == ["query_id", "doc_id", "score"]
        np.testing.assert_array_equal(scored["score"].to_numpy(), cands[column].to_numpy())
        assert summary["files"][f"system:{name}"]["path"] == f"systems/{name}.scored.parquet"
    champion = summary["models"]["champion"]
    assert champion["alias"] == "champion" and champion["version"] == "1"
    assert champion["loaded_uri"] == "models:/ranker/1"  # the alias resolved once: the version is what loaded
    assert champion["model_id"] == model_store["model_ids"][1]  # derived from the source on SQLite
    assert champion["source"] == f"models:/{model_store['model_ids'][1]}"
    assert champion["run_id"] == model_store["training_run"]
    assert summary["models"]["challenger"]["alias"] is None
    assert summary["models"]["challenger"]["model_id"] == model_store["model_ids"][2]


@pytest.mark.parametrize("decision", ["", "decision: {key: ndcg_at_10, rule: superiority, margin: 0.005}\n"])
def test_the_model_of_a_model_system_is_shown_wherever_it_is_named(store, model_store, tmp_path, capsys, decision):
    """The terminal, report.html and report.md name a model system with its registered model, version and alias,
    as summary.json's models records them: in the lead (the decision or the headline comparison), the tables and
    the wins and losses; the run-file system keeps its bare name."""
    from helpers import HtmlDoc

    from ndcg_mlflow.render.format import md_text

    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
            "logged": {"model": f"models:/{model_store['model_ids'][2]}", "candidates": "candidates.parquet"},
        },
        decision=decision,
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow"]) == 0
    printed = capsys.readouterr().out
    champion, challenger = "champion (ranker v1 @champion)", "challenger (ranker v2)"
    logged = f"logged ({model_store['model_ids'][2]})"
    lines = printed.splitlines()
    if decision:  # the decision leads, each candidate with its model
        assert lines[0] == f"rankers — decision: PASS against baseline {champion}"
        assert lines[1].startswith("  rule: superiority at nDCG@10: each candidate passes when")
        assert lines[2].startswith(f"  {challenger}: PASS — difference +")
        assert lines[3].startswith(f"  {logged}: PASS — difference +")
    else:  # each candidate against the baseline at nDCG@10 leads
        assert lines[0] == f"rankers — each candidate against baseline {champion} at nDCG@10"
        assert lines[2].startswith(challenger) and lines[3].startswith(logged)
    table = lines.index(next(ln for ln in lines if ln.startswith("system ")))
    assert [ln.split("  ")[0] for ln in lines[table + 1 : table + 4]] == [champion, challenger, logged]
    sentence = (
        "Model systems, as resolved when the evaluation started: champion is registered model ranker version 1, "
        "named by the alias @champion; challenger is registered model ranker version 2; logged is the model "
        f"{model_store['model_ids'][2]} (not a registry version)."
    )
    assert sentence in lines
    assert f"{challenger} vs {champion} at nDCG@10: largest wins / losses" in lines

    doc = HtmlDoc((out / "report.html").read_text(encoding="utf-8"))
    assert [r[0] for r in doc.table("system", "nDCG@5")[1:]] == [champion, challenger, logged]
    assert [r[0] for r in doc.table("system", "evaluated")[1:]] == [champion, challenger, logged]
    assert [r[:2] for r in doc.table("candidate", "baseline")[1:3]] == [[challenger, champion]] * 2
    if decision:
        assert challenger in doc.bold and logged in doc.bold
        assert f"<b>Decision: PASS</b> against the baseline {champion}<p" in (out / "report.html").read_text()
    else:
        assert [r[0] for r in doc.table("candidate", "difference")[1:]] == [challenger, logged]
    assert sentence in (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"| {md_text(champion)} | " in md and f"| {md_text(challenger)} | 5 | " in md
    assert md_text(sentence) in md.splitlines()
    if decision:
        assert md.startswith(
            f"# nDCG report — rankers\n\n**Decision: PASS** against the baseline {md_text(champion)} — "
        )
        assert f"- {md_text(challenger)}: PASS, difference +" in md


def _runs(uri: str, experiment: str = "rankers") -> tuple:
    from helpers import client_for, runs_of_experiment

    client = client_for(uri)
    runs = runs_of_experiment(client, experiment, deleted=False)
    parent = [r for r in runs if r.data.tags.get("ndcg_mlflow.role") == "evaluation"]
    children = {r.data.tags["ndcg_mlflow.system"]: r for r in runs if r.data.tags.get("ndcg_mlflow.role") == "system"}
    return client, parent, children


def test_metrics_linked_to_the_logged_model_and_datasets_logged(store, model_store, tmp_path):
    spec = model_spec(
        tmp_path,
        {
            "bm": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "cand": {"model": f"models:/{model_store['model_ids'][2]}", "candidates": "candidates.parquet"},
        },
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    client, parents, children = _runs(store)
    (parent,) = parents
    for name, version in (("bm", 1), ("cand", 2)):
        model_id = model_store["model_ids"][version]
        run = children[name]
        assert run.data.tags["ndcg_mlflow.model.model_id"] == model_id
        assert parent.data.tags[f"ndcg_mlflow.model.{name}.model_id"] == model_id
        assert run.data.params["model"] == summary["models"][name]["loaded_uri"]
        # the metrics are on the logged model's page: its metrics, from this run, with the judgments dataset
        model = client.get_logged_model(model_id)
        mine = {m.key: m for m in model.metrics or [] if m.run_id == run.info.run_id}
        assert mine["ndcg_at_10"].value == pytest.approx(summary["systems"][name]["ndcg_at_10"]["mean"], rel=1e-12)
        assert mine["ndcg_at_10"].dataset_name == "judgments"
        assert mine["ndcg_at_10"].dataset_digest == summary["files"]["qrels"]["sha256"][:16]
        inputs = client.get_run(run.info.run_id).inputs
        names = {d.dataset.name: d for d in inputs.dataset_inputs}
        assert names["judgments"].dataset.digest == summary["files"]["qrels"]["sha256"][:16]
        cand = names["candidates candidates.parquet"]
        assert cand.dataset.digest == summary["models"][name]["candidates_sha256"][:16]
        assert {t.key: t.value for t in cand.tags}["mlflow.data.context"] == "candidates"
        assert [m.model_id for m in inputs.model_inputs] == [model_id]
        files = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert f"{name}.scored.parquet" in files
    assert summary["models"]["cand"]["registered_model"] is None  # a logged model, not a registry version
    assert {d.dataset.name for d in parent.inputs.dataset_inputs} == {"judgments", "candidates candidates.parquet"}


def test_upload_to_a_store_without_the_model(store, migrated_db, tmp_path):
    """The folder is the result: uploaded where the model does not exist, it logs the same numbers and tags,
    without the link to the model."""
    from helpers import client_for

    spec = model_spec(
        tmp_path,
        {
            "bm": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "cand": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
        },
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-mlflow"]) == 0
    other = tmp_path / "other.db"
    shutil.copy(migrated_db, other)
    uri = f"sqlite:///{other}"
    assert main(["upload", str(out), "--quiet", "--tracking-uri", uri]) == 0
    summary = json.loads((out / "summary.json").read_text())
    _, (parent,), children = _runs(uri)
    assert children["cand"].data.metrics["ndcg_at_10"] == pytest.approx(
        summary["systems"]["cand"]["ndcg_at_10"]["mean"], rel=1e-12
    )
    assert children["cand"].data.tags["ndcg_mlflow.model.version"] == "2"
    assert parent.data.tags["ndcg_mlflow.model.bm.alias"] == "champion"
    assert not client_for(uri).get_run(children["cand"].info.run_id).inputs.model_inputs


# --------------------------------------------------------------------------- promotion on a passing decision

DECISION = "decision: {key: ndcg_at_10, rule: superiority, margin: 0.005}\n"


def test_promote_moves_the_alias_to_a_better_candidate(store, tmp_path):
    from helpers import client_for

    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker@challenger", "candidates": "candidates.parquet"},
        },
        decision=DECISION,
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--promote", "champion"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["decision"]["outcome"] == "pass"
    client = client_for(store)
    assert str(client.get_model_version_by_alias("ranker", "champion").version) == "2"
    _, (parent,), _ = _runs(store)
    tags = client.get_model_version("ranker", "2").tags
    assert tags["ndcg_mlflow.previous_version"] == "1"
    assert tags["ndcg_mlflow.evaluation_run"] == parent.info.run_id
    assert tags["ndcg_mlflow.promoted_alias"] == "champion"
    assert "version 2 is now @champion" in client.get_run(parent.info.run_id).data.tags["ndcg_mlflow.promoted"]


def test_promote_leaves_the_alias_when_the_candidate_is_worse(store, tmp_path, capsys):
    from helpers import client_for

    spec = model_spec(
        tmp_path,
        {
            "current": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
            "new": {"model": "models:/ranker/1", "candidates": "candidates.parquet"},
        },
        decision=DECISION,
    )
    assert main(["run", str(spec), "--out", str(tmp_path / "out"), "--quiet", "--promote", "challenger"]) == 4
    assert "not promoted" in capsys.readouterr().err
    client = client_for(store)
    assert str(client.get_model_version_by_alias("ranker", "challenger").version) == "2"
    assert "ndcg_mlflow.evaluation_run" not in client.get_model_version("ranker", "1").tags
    _, (parent,), _ = _runs(store)
    assert parent.data.tags["ndcg_mlflow.decision"] == "fail"
    assert "ndcg_mlflow.promoted" not in parent.data.tags


def _version_3(client) -> str:
    """A third version of ``ranker`` (the logged model of version 2 registered again)."""
    v2 = client.get_model_version("ranker", "2")
    return str(client.create_model_version("ranker", v2.source, run_id=v2.run_id).version)


def _promote_spec(tmp_path: Path) -> Path:
    return model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker@challenger", "candidates": "candidates.parquet"},
        },
        decision=DECISION,
    )


def test_promote_leaves_an_alias_moved_during_the_evaluation(store, tmp_path, capsys, monkeypatch):
    """@champion is moved to version 3 by another process while the evaluation of version 2 against version 1
    runs (here, as the results are logged): version 2 was compared with version 1 only, so @champion stays on 3,
    exit 4, the message says where it points now and who moved it."""
    from helpers import client_for

    from ndcg_mlflow import tracking

    client = client_for(store)
    v3 = _version_3(client)
    real = tracking.log_evaluation

    def log_then_someone_promotes(*args, **kwargs):
        logged = real(*args, **kwargs)
        client.set_registered_model_alias("ranker", "champion", v3)
        client.set_model_version_tag("ranker", v3, "ndcg_mlflow.promoted_alias", "champion")
        client.set_model_version_tag("ranker", v3, "ndcg_mlflow.evaluation_run", "0123abcd")
        return logged

    monkeypatch.setattr(tracking, "log_evaluation", log_then_someone_promotes)
    out = tmp_path / "out"
    assert main(["run", str(_promote_spec(tmp_path)), "--out", str(out), "--quiet", "--promote", "champion"]) == 4
    err = capsys.readouterr().err
    assert (
        "not promoted: @champion of ranker pointed to version 1 when the evaluation started and now points to "
        f"version {v3} (promoted by the evaluation run 0123abcd" in err
    ), err
    assert json.loads((out / "summary.json").read_text())["decision"]["outcome"] == "pass"
    assert str(client.get_model_version_by_alias("ranker", "champion").version) == v3
    assert "ndcg_mlflow.promoted_alias" not in client.get_model_version("ranker", "2").tags
    _, (parent,), _ = _runs(store)
    assert "ndcg_mlflow.promoted" not in client.get_run(parent.info.run_id).data.tags


def test_promote_reports_an_alias_moved_as_it_is_set(store, tmp_path, capsys, monkeypatch):
    """Another process sets @champion at the same moment (just after this one): the read after the move shows
    it, exit 4, nothing tagged as promoted."""
    from helpers import client_for
    from mlflow.tracking import MlflowClient

    client = client_for(store)
    v3 = _version_3(client)
    real = MlflowClient.set_registered_model_alias

    def set_and_lose_the_race(self, name, alias, version):
        real(self, name, alias, version)
        real(self, name, alias, v3)

    monkeypatch.setattr(MlflowClient, "set_registered_model_alias", set_and_lose_the_race)
    assert (
        main(["run", str(_promote_spec(tmp_path)), "--out", str(tmp_path / "out"), "--quiet", "--promote", "champion"])
        == 4
    )
    err = capsys.readouterr().err
    assert f"was moved to version 2, and at once by another process: it now points to version {v3}" in err, err
    assert "ndcg_mlflow.promoted_alias" not in client.get_model_version("ranker", "2").tags


def test_promote_creates_an_alias_that_held_no_version(store, tmp_path):
    from helpers import client_for

    assert (
        main(["run", str(_promote_spec(tmp_path)), "--out", str(tmp_path / "out"), "--quiet", "--promote", "gold"]) == 0
    )
    client = client_for(store)
    assert str(client.get_model_version_by_alias("ranker", "gold").version) == "2"
    assert client.get_model_version("ranker", "2").tags["ndcg_mlflow.previous_version"] == "none"


@pytest.mark.parametrize("promote", [[], ["--promote", "champion"]])
def test_a_candidate_resolving_to_the_baselines_version_is_refused_up_front(
    store, tmp_path, capsys, monkeypatch, promote
):
    """@challenger moved to version 1, the version of @champion: refused before anything is scored (exit 2),
    not compared with itself and failed by the rule."""
    from helpers import client_for

    from ndcg_mlflow.tracking import registry

    client_for(store).set_registered_model_alias("ranker", "challenger", "1")
    monkeypatch.setattr(registry, "score_candidates", lambda *a, **k: pytest.fail("a model was scored"))
    out = tmp_path / "out"
    assert main(["run", str(_promote_spec(tmp_path)), "--out", str(out), "--quiet", *promote]) == 2
    err = capsys.readouterr().err
    assert (
        "at key 'data.systems.challenger.model': models:/ranker@challenger resolves to models:/ranker/1, the "
        "model the baseline 'champion' (models:/ranker@champion) resolves to, on the same candidates" in err
    ), err
    assert not out.exists() and not _runs_logged(store)
    assert str(client_for(store).get_model_version_by_alias("ranker", "champion").version) == "1"


def _runs_logged(uri: str) -> bool:
    from helpers import client_for

    client = client_for(uri)
    experiment = client.get_experiment_by_name("rankers")
    return experiment is not None and bool(client.search_runs([experiment.experiment_id]))


@pytest.mark.parametrize(
    "systems, decision, expected",
    [
        (
            {
                "a": {"model": "models:/ranker/1", "candidates": "candidates.parquet"},
                "b": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
            },
            "",
            "needs the spec's decision",
        ),
        (
            {
                "a": {"model": "models:/ranker/1", "candidates": "candidates.parquet"},
                "b": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
                "c": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
            },
            DECISION,
            "has 2 candidates",
        ),
        (
            {
                "a": {"model": "models:/ranker/1", "candidates": "candidates.parquet"},
                "b": {"model": "models:/m-0123abc", "candidates": "candidates.parquet"},
            },
            DECISION,
            "not a registered model version",
        ),
    ],
)
def test_promote_refused_before_any_work(store, tmp_path, capsys, systems, decision, expected):
    spec = model_spec(tmp_path, systems, decision=decision)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--promote", "champion"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "--promote" in err
    assert not out.exists()


def test_promote_refuses_a_run_file_candidate(store, tmp_path, capsys):
    write_data(tmp_path)
    (tmp_path / "b.run").write_text("q00 Q0 d1 1 2.0 x\n")
    spec = model_spec(
        tmp_path,
        {"a": {"model": "models:/ranker/1", "candidates": "candidates.parquet"}, "b": "b.run"},
        decision=DECISION,
    )
    assert main(["run", str(spec), "--quiet", "--promote", "champion"]) == 2
    assert "candidate 'b' is a run file" in capsys.readouterr().err


# --------------------------------------------------------------------------- the caller's own runs


def test_run_id_nests_the_system_runs_under_the_callers_run(store, model_store, tmp_path):
    from helpers import client_for

    client = client_for(store)
    experiment = client.create_experiment("training-2")
    training = client.create_run(experiment, run_name="train", tags={"team": "search"})
    client.log_param(training.info.run_id, "lr", "0.1")
    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
        },
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--run-id", training.info.run_id]) == 0
    run = client.get_run(training.info.run_id)
    assert run.info.status == "RUNNING"  # the caller ends its own run
    assert run.data.tags["ndcg_mlflow.role"] == "evaluation" and run.data.tags["ndcg_mlflow.attached"] == "true"
    assert run.data.tags["ndcg_mlflow.logging"] == "complete" and run.data.params["lr"] == "0.1"
    summary = json.loads((out / "summary.json").read_text())
    assert run.data.metrics["challenger.ndcg_at_10"] == pytest.approx(
        summary["systems"]["challenger"]["ndcg_at_10"]["mean"], rel=1e-12
    )
    assert {"spec.yaml", "summary.json", "report.html"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    children = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert sorted(c.data.tags["ndcg_mlflow.system"] for c in children) == ["challenger", "champion"]
    assert client.get_experiment_by_name("rankers") is None  # no evaluation run of its own was created
    # uploading the same folder again reuses the runs, and never deletes the caller's run
    assert main(["upload", str(out), "--quiet"]) == 0
    assert client.get_run(training.info.run_id).info.lifecycle_stage == "active"
    assert len(client.search_runs([experiment], "")) == 3


def test_active_run_is_the_parent_in_python(store, tmp_path, monkeypatch):
    import mlflow
    import mlflow.tracking.fluent

    import ndcg_mlflow
    from ndcg_mlflow.outputs import write_outputs
    from ndcg_mlflow.tracking import log_evaluation

    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
        },
        comparison=False,
    )
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)  # restored after the test
    mlflow.set_experiment("notebook")
    with mlflow.start_run() as active:
        result = ndcg_mlflow.evaluate(spec, scored_dir=tmp_path / "scored")
        write_outputs(result, tmp_path / "out")
        logged = log_evaluation(result, tmp_path / "out")
    assert logged.parent_run_id == active.info.run_id
    client = mlflow.MlflowClient()
    assert client.get_run(active.info.run_id).info.status == "FINISHED"
    children = client.search_runs([active.info.experiment_id], f"tags.`mlflow.parentRunId` = '{active.info.run_id}'")
    assert len(children) == 2 and all(c.info.status == "FINISHED" for c in children)
    assert (tmp_path / "scored" / "systems" / "champion.scored.parquet").is_file()


def test_scored_rows_without_a_folder_live_as_long_as_the_result(store, tmp_path):
    import gc

    import ndcg_mlflow
    from ndcg_mlflow.outputs import write_outputs

    spec = model_spec(
        tmp_path,
        {"champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"}},
        comparison=False,
    )
    result = ndcg_mlflow.evaluate(spec)
    scored = Path(result.scored["champion"])
    assert scored.is_file()
    write_outputs(result, tmp_path / "out")  # the scored rows are copied into the output folder
    kept = tmp_path / "out" / "systems" / "champion.scored.parquet"
    assert kept.read_bytes() == scored.read_bytes()
    del result
    gc.collect()
    assert not scored.exists() and kept.is_file()


def test_run_id_refusals(store, tmp_path, capsys):
    from helpers import client_for

    client = client_for(store)
    experiment = client.create_experiment("elsewhere")
    clash = client.create_run(experiment)
    client.log_param(clash.info.run_id, "name", "another")
    spec = model_spec(
        tmp_path, {"champion": {"model": "models:/ranker/1", "candidates": "candidates.parquet"}}, comparison=False
    )
    assert main(["run", str(spec), "--quiet", "--run-id", "0123456789abcdef0123456789abcdef"]) == 2
    assert "no such run" in capsys.readouterr().err
    assert main(["run", str(spec), "--quiet", "--run-id", clash.info.run_id]) == 2
    assert "the run has the param 'name' = 'another'" in capsys.readouterr().err
    refused = client.get_run(clash.info.run_id)
    assert refused.info.status == "RUNNING"
    assert not [k for k in refused.data.tags if k.startswith("ndcg_mlflow.")]  # nothing was logged into it
    held = client.create_run(experiment)
    assert main(["run", str(spec), "--quiet", "--run-id", held.info.run_id]) == 0
    assert main(["run", str(spec), "--quiet", "--run-id", held.info.run_id]) == 2
    assert "already holds another evaluation" in capsys.readouterr().err
    after = client.get_run(held.info.run_id)  # the first evaluation's run, untouched by the refused one
    assert after.data.tags["ndcg_mlflow.logging"] == "complete" and after.info.status == "RUNNING"
    assert main(["run", str(spec), "--quiet", "--no-mlflow", "--run-id", held.info.run_id]) == 2


# --------------------------------------------------------------------------- bad models, bad candidates


def odd_spec(tmp_path: Path, frame: pd.DataFrame, model: str = "models:/odd/1") -> Path:
    spec = model_spec(tmp_path, {"odd": {"model": model, "candidates": "odd.parquet"}}, comparison=False)
    frame.to_parquet(tmp_path / "odd.parquet", index=False)
    return spec


def test_a_missing_alias_version_or_model_names_the_key(store, tmp_path, capsys):
    for uri, expected in (
        ("models:/ranker@gold", "registered model 'ranker' has no alias 'gold' (its aliases are challenger, champion)"),
        ("models:/ranker/9", "not found"),
        ("models:/nothing@x", "'nothing' does not exist"),
        ("models:/m-00000000000000000000000000000000", "not found"),
    ):
        spec = model_spec(tmp_path, {"x": {"model": uri, "candidates": "candidates.parquet"}}, comparison=False)
        assert main(["run", str(spec), "--quiet", "--no-mlflow"]) == 2
        err = capsys.readouterr().err
        assert "at key 'data.systems.x.model'" in err and expected in err, err


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("short", "returned 7 values for 8 input rows (rows 1-8 of"),
        ("fail", "failed on rows 1-8 of"),
        ("nan", "returned nan for row 3"),
    ],
)
def test_bad_model_output_is_refused(store, tmp_path, capsys, mode, expected):
    _, cands = candidates_frame()
    frame = cands[cands["query_id"] == "q00"].copy()
    frame["mode"] = mode
    if mode == "nan":
        frame.loc[frame.index[2], "good"] = np.nan
    spec = odd_spec(tmp_path, frame)
    assert main(["run", str(spec), "--quiet", "--no-mlflow", "--set", "mlflow.experiment=odd"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "models:/odd/1" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("mode", ["score", "column", "frame", "series", "series_arrays", "tolist"])
def test_every_form_of_one_score_per_row_gives_the_same_numbers(store, tmp_path, mode):
    """(n,), (n, 1) as an array, nested lists or a Series of one-element arrays, a one-column frame, a Series of
    floats: scores, each row's own, and the nDCG of ranking by
    them computed here from the definition (an (n, 1) array was once read as ranked lists of ids "0.1", "3.2"...,
    every query scoring 0)."""
    qrels, cands = candidates_frame()
    spec = odd_spec(tmp_path, cands.assign(mode=mode))
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-mlflow"]) == 0
    scored = pd.read_parquet(out / "systems" / "odd.scored.parquet")
    assert list(scored.columns) == ["query_id", "doc_id", "score"]
    np.testing.assert_array_equal(scored["score"].to_numpy(), cands["good"].to_numpy())
    assert list(scored["doc_id"]) == list(cands["doc_id"])
    summary = json.loads((out / "summary.json").read_text())
    for k in (5, 10):
        assert summary["systems"]["odd"][f"ndcg_at_{k}"]["mean"] == pytest.approx(
            ndcg_at(cands, qrels, "good", k), rel=1e-12
        )


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("wide", "returned an array of shape (8, 2)"),
        ("none", "returned None"),
        ("scalar", "returned the single value"),
        ("short", "returned 7 values for 8 input rows (rows 1-8 of"),
    ],
)
def test_outputs_of_no_clear_shape_are_refused_naming_the_model(store, tmp_path, capsys, mode, expected):
    _, cands = candidates_frame()
    spec = odd_spec(tmp_path, cands[cands["query_id"] == "q00"].assign(mode=mode))
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "models:/odd/1" in err and "odd.parquet" in err, err
    assert "Traceback" not in err and not out.exists()


def test_candidates_missing_the_models_inputs(store, tmp_path, capsys):
    _, cands = candidates_frame()
    spec = model_spec(tmp_path, {"x": {"model": "models:/ranker/2", "candidates": "few.csv"}}, comparison=False)
    cands.drop(columns=["noise"]).to_csv(tmp_path / "few.csv", index=False)
    assert main(["run", str(spec), "--quiet", "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert "lack the column(s) 'noise'" in err and "few.csv" in err and "good, noise" in err, err


def test_a_retriever_returning_ranked_lists(store, model_store, tmp_path):
    qrels, cands = candidates_frame()
    lists = {q: list(g.sort_values("good", ascending=False)["doc_id"])[::-1] for q, g in cands.groupby("query_id")}
    frame = pd.DataFrame({"query_id": list(lists), "docs": [",".join(v) for v in lists.values()]})
    spec = odd_spec(tmp_path, frame, model=f"models:/{model_store['retriever']}")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-mlflow"]) == 0
    scored = pd.read_parquet(out / "systems" / "odd.scored.parquet")
    assert list(scored.columns) == ["query_id", "doc_id", "score", "rank"]
    first = scored[scored["query_id"] == "q00"]
    assert list(first["doc_id"]) == lists["q00"] and list(first["rank"]) == list(range(1, N_DOCS + 1))
    summary = json.loads((out / "summary.json").read_text())
    # the lists are the good ranking reversed: the same as ranking by -good
    reversed_ = cands.assign(bad=-cands["good"])
    assert summary["systems"]["odd"]["ndcg_at_5"]["mean"] == pytest.approx(
        ndcg_at(reversed_, qrels, "bad", 5), rel=1e-12
    )


def test_model_systems_shape_in_the_spec(tmp_path):
    from ndcg_mlflow.errors import SpecError
    from ndcg_mlflow.spec import load_spec

    base = {
        "spec_version": 1,
        "name": "x",
        "metric": {"preset": "trec_eval", "cutoffs": [10]},
        "queries": {"weights": "uniform"},
        "data": {"qrels": "q.tsv", "systems": {}},
    }
    for value, expected in (
        ({"model": "models:/r/Production", "candidates": "c.parquet"}, "stages such as"),
        ({"model": "s3://bucket/model", "candidates": "c.parquet"}, "must be a model URI"),
        ({"model": "models:/r/1"}, "data.systems.a.candidates': missing required key"),
        ({"model": "models:/r/1", "candidates": "c", "cand": 1}, "unknown key"),
        ({"model": "models:/r/1", "candidates": {"path": "c", "format": "trec"}}, "not TREC text"),
    ):
        base["data"]["systems"] = {"a": value}
        with pytest.raises(SpecError, match="data.systems.a") as info:
            load_spec(base, base_dir=tmp_path)
        assert expected in str(info.value), str(info.value)
    base["data"]["systems"] = {
        "a": {"model": "models:/r@champion", "candidates": {"path": "c.csv", "columns": {"query_id": "user"}}}
    }
    spec = load_spec(base, base_dir=tmp_path)
    resolved = spec.resolved()
    assert resolved["data.systems.a.model"] == "models:/r@champion"
    assert resolved["data.systems.a.candidates"] == "c.csv"
    assert resolved["data.systems.a.candidates.columns"] == "query_id=user"


def test_csv_candidates_keep_ids_as_text(store, tmp_path):
    qrels = pd.DataFrame(
        {"query_id": ["007"] * 3 + ["010"] * 3, "doc_id": ["01", "02", "03"] * 2, "grade": [0, 1, 3, 2, 0, 0]}
    )
    cands = qrels[["query_id", "doc_id"]].assign(good=[0.1, 0.2, 0.3, 0.3, 0.2, 0.1], noise=0.0)
    spec = model_spec(tmp_path, {"x": {"model": "models:/ranker/2", "candidates": "c.csv"}}, comparison=False)
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    cands.to_csv(tmp_path / "c.csv", index=False)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-mlflow"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["systems"]["x"]["ndcg_at_5"]["mean"] == pytest.approx(1.0)  # "007" matched "007", not 7
    assert summary["systems"]["x"]["ndcg_at_5"]["n_missing"] == 0
    assert set(pd.read_parquet(out / "systems" / "x.scored.parquet")["query_id"]) == {"007", "010"}


def test_a_failure_while_logging_into_the_callers_run(store, tmp_path, monkeypatch, capsys):
    """The runs the tool created end FAILED; the caller's run stays RUNNING, tagged with how far logging got;
    upload --run-id then logs the folder into it completely."""
    from helpers import client_for

    from ndcg_mlflow.tracking import client as tracking_client

    client = client_for(store)
    experiment = client.create_experiment("train")
    rid = client.create_run(experiment).info.run_id
    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker/1", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
        },
    )
    out = tmp_path / "out"
    real, calls = tracking_client.log_batch, []

    def flaky(client_, run_id, *args, **kwargs):
        calls.append(run_id)
        if len(calls) == 4:  # the caller's run: 1 tags, 2 metrics and params; the first system: 3 metrics, 4 tags
            raise ConnectionError("simulated: connection reset by peer")
        return real(client_, run_id, *args, **kwargs)

    monkeypatch.setattr(tracking_client, "log_batch", flaky)
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--run-id", rid]) == 3
    assert f"--run-id {rid}" in capsys.readouterr().err
    monkeypatch.setattr(tracking_client, "log_batch", real)
    run = client.get_run(rid)
    assert run.info.status == "RUNNING" and run.data.tags["ndcg_mlflow.logging"].startswith("failed while logging")
    children = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{rid}'")
    assert children and all(c.info.status == "FAILED" for c in children)
    assert main(["upload", str(out), "--quiet", "--run-id", rid]) == 0
    run = client.get_run(rid)
    assert run.info.status == "RUNNING" and run.data.tags["ndcg_mlflow.logging"] == "complete"
    children = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{rid}'")
    assert sorted(c.data.tags["ndcg_mlflow.system"] for c in children) == ["challenger", "champion"]
    assert all(c.info.status == "FINISHED" for c in children)


def test_a_runs_uri_resolves_to_its_logged_model(store, model_store, tmp_path):
    spec = model_spec(
        tmp_path,
        {"x": {"model": f"runs:/{model_store['training_run']}/ranker_good", "candidates": "candidates.parquet"}},
        comparison=False,
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    record = summary["models"]["x"]
    assert record["model_id"] == model_store["model_ids"][2] and record["run_id"] == model_store["training_run"]
    qrels, cands = candidates_frame()
    assert summary["systems"]["x"]["ndcg_at_10"]["mean"] == pytest.approx(ndcg_at(cands, qrels, "good", 10), rel=1e-12)
    client, _, children = _runs(store)
    linked = client.get_logged_model(record["model_id"]).metrics or []
    assert any(m.run_id == children["x"].info.run_id and m.key == "ndcg_at_10" for m in linked)


# --------------------------------------------------------------------------- scored on Spark (mlflow.pyfunc.spark_udf)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["system", "query_id", "cutoff"]).reset_index(drop=True)


def test_spark_scores_model_systems_with_the_local_engines_numbers(store, model_store, tmp_path, spark):
    """The same model versions and candidates (a Parquet folder of two files): every per-query number of the
    Spark engine equals the local engine's exactly, and both equal the definition computed here."""
    import ndcg_mlflow

    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "cands"},
            "challenger": {"model": "models:/ranker/2", "candidates": "cands"},
        },
        ties="average",
    )
    qrels, cands = candidates_frame()
    (tmp_path / "cands").mkdir()
    half = len(cands) // 2 + 3  # a query split across the two files
    cands.iloc[:half].to_parquet(tmp_path / "cands" / "a.parquet", index=False)
    cands.iloc[half:].to_parquet(tmp_path / "cands" / "b.parquet", index=False)
    with timings.recording() as local_times:
        local = ndcg_mlflow.evaluate(spec, tracking_uri=store, scored_dir=tmp_path / "local")
    with timings.recording() as spark_times:
        on_spark = ndcg_mlflow.evaluate(spec, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "spark")
    # --timings: the models' resolution and scoring are their own phase on both engines, before the runs' read
    for recorded in (local_times, spark_times):
        assert recorded.seconds["models"] > 0 and {"read", "scoring", "statistics"} <= set(recorded.seconds)
    assert on_spark.summary["engine"] == "spark"
    pd.testing.assert_frame_equal(_sorted(on_spark.per_query), _sorted(local.per_query), check_exact=True)
    for name, column, version in (("champion", "noise", "1"), ("challenger", "good", "2")):
        for k in (5, 10):
            assert on_spark.summary["systems"][name][f"ndcg_at_{k}"]["mean"] == pytest.approx(
                ndcg_at(cands, qrels, column, k), rel=1e-12
            )
        folder = on_spark.scored[name]
        assert folder == tmp_path / "spark" / "systems" / f"{name}.scored.parquet" and folder.is_dir()
        scored = pd.read_parquet(folder).merge(cands, on=["query_id", "doc_id"])
        assert len(scored) == len(cands)
        np.testing.assert_array_equal(scored["score"].to_numpy(), scored[column].to_numpy())
        record = on_spark.summary["models"][name]
        assert record["version"] == version and record["loaded_uri"] == f"models:/ranker/{version}"
        assert record["candidate_rows"] == record["scored_rows"] == len(cands)
        assert record["candidates_sha256"] == local.summary["models"][name]["candidates_sha256"]
        assert record["model_id"] == model_store["model_ids"][int(version)]
    assert on_spark.summary["models"]["champion"]["alias"] == "champion"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_candidates_naming_score_and_SCORE_are_read_alike_on_both_engines(store, tmp_path, spark, fmt):
    """Candidates holding columns whose names differ by case alone (``score`` and ``SCORE``, beside the model's
    inputs): two columns for the local engine, which scores them; Spark's analyzer, case-insensitive by default,
    refused them as one name written twice. Both engines now score them, with the same numbers, and the
    session's setting is left as it was."""
    import ndcg_mlflow

    qrels, cands = candidates_frame()
    cands = cands.assign(score=-cands["good"], SCORE=cands["noise"])
    if fmt == "jsonl":
        cands.to_json(tmp_path / "cands.jsonl", orient="records", lines=True)
    else:
        cands.to_parquet(tmp_path / "cands.parquet", index=False)
    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": f"cands.{fmt}"},
            "challenger": {"model": "models:/ranker/2", "candidates": f"cands.{fmt}"},
        },
        ties="average",
    )
    before = spark.conf.get("spark.sql.caseSensitive")
    local = ndcg_mlflow.evaluate(spec, tracking_uri=store, scored_dir=tmp_path / "local")
    on_spark = ndcg_mlflow.evaluate(spec, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "spark")
    assert spark.conf.get("spark.sql.caseSensitive") == before
    pd.testing.assert_frame_equal(_sorted(on_spark.per_query), _sorted(local.per_query), check_exact=True)
    assert on_spark.summary["systems"]["challenger"]["ndcg_at_10"]["mean"] == pytest.approx(
        ndcg_at(cands, qrels, "good", 10), rel=1e-12
    )


def test_spark_cli_run_records_the_version_and_the_scored_folder(store, model_store, tmp_path, spark, monkeypatch):
    """``run --engine spark``: the alias resolved once and recorded (summary.json, the system run's param and
    model link), the scored rows a Parquet folder in the output folder, its digest that of its part files."""
    import hashlib

    import ndcg_mlflow
    from ndcg_mlflow.readers import sha256_file
    from ndcg_mlflow.tracking import registry

    resolutions = []
    real_resolve = registry.resolve_model_systems
    monkeypatch.setattr(
        registry, "resolve_model_systems", lambda *a, **k: resolutions.append(1) or real_resolve(*a, **k)
    )

    deltalake = pytest.importorskip("deltalake", reason="deltalake is not installed")
    qrels, cands = candidates_frame()
    deltalake.write_deltalake(str(tmp_path / "cands"), cands)  # version 0: the candidates
    deltalake.write_deltalake(str(tmp_path / "cands"), cands.assign(good=-cands["good"]), mode="overwrite")
    delta = {"path": "cands", "format": "delta", "version": 0}
    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker@challenger", "candidates": delta},
        },
        ties="average",
    )
    out = tmp_path / "out"
    assert main(["run", str(spec), "--engine", "spark", "--out", str(out), "--quiet"]) == 0
    assert len(resolutions) == 1  # the registry asked once: what is scored and recorded is that answer
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "spark"
    assert summary["models"]["challenger"]["version"] == "2"
    assert summary["models"]["challenger"]["loaded_uri"] == "models:/ranker/2"
    assert summary["models"]["challenger"]["candidate_rows"] == len(cands)
    assert summary["systems"]["challenger"]["ndcg_at_10"]["mean"] == pytest.approx(  # version 0 was read
        ndcg_at(cands, qrels, "good", 10), rel=1e-12
    )
    folder = out / "systems" / "challenger.scored.parquet"
    parts = sorted(folder.glob("*.parquet"))
    assert folder.is_dir() and parts and not list(folder.glob(".*.crc"))
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes())
    assert summary["files"]["system:challenger"]["sha256"] == h.hexdigest() == sha256_file(folder)
    client, _, children = _runs(store)
    run = children["challenger"]
    assert run.data.params["model"] == "models:/ranker/2"
    names = {f.path for f in client.list_artifacts(run.info.run_id, "challenger.scored.parquet")}
    assert names and all(n.endswith(".parquet") or n.endswith("_SUCCESS") for n in names), names
    assert run.data.tags["ndcg_mlflow.model.version"] == "2"
    # the folder is a run for the local engine too: the same numbers without the model
    again = tmp_path / "again"
    again.mkdir()
    rerun = ndcg_mlflow.evaluate(model_spec(again, {"challenger": str(folder)}, comparison=False, ties="average"))
    assert (
        rerun.summary["systems"]["challenger"]["ndcg_at_10"]["mean"]
        == summary["systems"]["challenger"]["ndcg_at_10"]["mean"]
    )


def test_spark_model_systems_beyond_the_driver_limit(store, model_store, tmp_path, spark):
    """Beyond ``--driver-queries``, model systems are scored on Spark and evaluated on the grouped path: the output
    folder holds their scored rows and records the versions resolved, every per-query number is the local
    engine's, the decision applies and ``--promote`` moves the alias."""
    from helpers import client_for

    import ndcg_mlflow
    from ndcg_mlflow.readers import sha256_file

    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker@challenger", "candidates": "candidates.parquet"},
        },
        decision=DECISION,
        ties="average",
    )
    spec.write_text(spec.read_text().replace("wins_losses: 3", "wins_losses: 0"))  # (not computed when grouped)
    local = ndcg_mlflow.evaluate(spec, tracking_uri=store, scored_dir=tmp_path / "local")
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(spec),
                "--engine",
                "spark",
                "--driver-queries",
                "10",
                "--out",
                str(out),
                "--quiet",
                "--promote",
                "champion",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine_info"]["statistics"]["method"] == "grouped"
    table = Path(summary["per_query_path"])
    assert table.is_dir() and table.parent == Path(f"{out}.per_query")
    assert not (out / "per_query.csv").exists()
    for name, version, column in (("champion", "1", "noise"), ("challenger", "2", "good")):
        record = summary["models"][name]
        assert record["version"] == version and record["loaded_uri"] == f"models:/ranker/{version}"
        assert record["model_id"] == model_store["model_ids"][int(version)]
        for k in (5, 10):
            assert summary["systems"][name][f"ndcg_at_{k}"]["mean"] == pytest.approx(
                local.summary["systems"][name][f"ndcg_at_{k}"]["mean"], rel=1e-12
            )
        folder = out / "systems" / f"{name}.scored.parquet"
        assert folder.is_dir() and summary["files"][f"system:{name}"]["sha256"] == sha256_file(folder)
        scored = pd.read_parquet(folder).merge(candidates_frame()[1], on=["query_id", "doc_id"])
        np.testing.assert_array_equal(scored["score"].to_numpy(), scored[column].to_numpy())
    grouped = pd.read_parquet(table)
    grouped["system"] = grouped["system"].astype(str)
    mine = local.per_query[["system", "query_id", "cutoff", "ndcg"]].astype({"cutoff": str})
    both = mine.merge(grouped.astype({"cutoff": str}), on=["system", "query_id", "cutoff"], suffixes=("", "_g"))
    assert len(both) == len(mine) == len(grouped)
    np.testing.assert_array_equal(both["ndcg"].to_numpy(dtype=float), both["ndcg_g"].to_numpy(dtype=float))
    assert summary["decision"]["outcome"] == "pass"
    client = client_for(store)
    assert str(client.get_model_version_by_alias("ranker", "champion").version) == "2"
    _, (parent,), children = _runs(store)
    assert client.get_model_version("ranker", "2").tags["ndcg_mlflow.evaluation_run"] == parent.info.run_id
    run = children["challenger"]
    assert run.data.tags["ndcg_mlflow.model.version"] == "2" and run.data.params["model"] == "models:/ranker/2"
    assert client.list_artifacts(run.info.run_id, "challenger.scored.parquet")
    linked = client.get_logged_model(model_store["model_ids"][2]).metrics or []
    assert any(m.run_id == run.info.run_id and m.key == "ndcg_at_10" for m in linked)


def test_spark_refuses_a_missing_alias_before_spark(store, tmp_path, capsys, monkeypatch):
    """Resolution comes first: with a session that fails on any use, and in the CLI before a session starts."""
    import ndcg_mlflow
    from ndcg_mlflow.engines import spark as engine
    from ndcg_mlflow.errors import SpecError

    spec = model_spec(
        tmp_path,
        {"x": {"model": "models:/ranker@gold", "candidates": "candidates.parquet"}},
        comparison=False,
        ties="average",
    )

    class NoSpark:
        def __getattr__(self, name):
            raise AssertionError(f"Spark used: {name}")

    with pytest.raises(SpecError, match="has no alias 'gold'"):
        ndcg_mlflow.evaluate(spec, engine=Spark(NoSpark()), tracking_uri=store)

    def no_session(remote=None):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(engine, "session", no_session)
    assert main(["run", str(spec), "--quiet", "--no-mlflow", "--engine", "spark"]) == 2
    err = capsys.readouterr().err
    assert "at key 'data.systems.x.model'" in err and "has no alias 'gold'" in err, err
    # scored rows have no displayed order on Spark: refused before the registry or Spark is asked
    ordered = model_spec(
        tmp_path, {"x": {"model": "models:/ranker@gold", "candidates": "candidates.parquet"}}, comparison=False
    )
    with pytest.raises(SpecError, match="metric.ties.*no displayed order"):
        ndcg_mlflow.evaluate(ordered, engine=Spark(NoSpark()), tracking_uri=store)


def test_spark_refuses_bad_candidates_and_bad_scores(store, model_store, tmp_path, spark):
    """Missing input columns (the local engine's message), a non-finite score (naming query and doc), a model
    that fails inside a task, a retriever, and CSV candidates: each a clear error, nothing scored silently."""
    import ndcg_mlflow
    from ndcg_mlflow.errors import DataError, NdcgError

    _, cands = candidates_frame()
    spec = model_spec(
        tmp_path, {"x": {"model": "models:/ranker/2", "candidates": "few.parquet"}}, comparison=False, ties="average"
    )
    cands.drop(columns=["noise"]).to_parquet(tmp_path / "few.parquet", index=False)
    with pytest.raises(DataError, match=r"lack the column\(s\) 'noise'.*good, noise"):
        ndcg_mlflow.evaluate(spec, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "s1")

    frame = cands[cands["query_id"].isin(["q00", "q01"])].copy()
    frame["mode"] = "score"
    frame.loc[frame.index[9], "good"] = np.inf
    frame.loc[frame.index[11], "good"] = np.nan
    odd = odd_spec(tmp_path, frame)
    odd.write_text(odd.read_text().replace("ties: displayed_order", "ties: average"))
    with pytest.raises(DataError, match=r"returned .* for query 'q01', doc 'd[0-9]' and 1 more non-finite scores"):
        ndcg_mlflow.evaluate(odd, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "s2")

    frame["good"] = 1.0
    frame["mode"] = "fail"
    frame.to_parquet(tmp_path / "odd.parquet", index=False)
    with pytest.raises(NdcgError, match="models:/odd/1 failed on Spark .*ValueError: feature store unavailable"):
        ndcg_mlflow.evaluate(odd, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "s3")

    lists = pd.DataFrame({"query_id": ["q00"], "doc_id": ["-"], "docs": ["d1,d2"]})
    retriever = odd_spec(tmp_path, lists, model=f"models:/{model_store['retriever']}")
    retriever.write_text(retriever.read_text().replace("ties: displayed_order", "ties: average"))
    with pytest.raises(
        DataError, match="returned ranked lists of doc ids .*a retriever is scored by the local engine only"
    ):
        ndcg_mlflow.evaluate(retriever, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "s4")

    cands.to_csv(tmp_path / "c.csv", index=False)
    csv = model_spec(
        tmp_path, {"x": {"model": "models:/ranker/2", "candidates": "c.csv"}}, comparison=False, ties="average"
    )
    with pytest.raises(DataError, match="Parquet .* Delta or JSONL.*these are csv"):
        ndcg_mlflow.evaluate(csv, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / "s5")


def test_spark_reads_the_models_output_by_the_local_rule(store, tmp_path, spark):
    """The executors read each batch's output by the local engine's rule: an (n, 1) array or a one-column frame
    or a Series of one-element arrays of floats gives the local engine's scores and numbers; (n, 2), None and a
    single value are refused with the local engine's message (Spark once took the first of two columns, a wrong
    number and exit 0)."""
    import ndcg_mlflow
    from ndcg_mlflow.errors import DataError

    qrels, cands = candidates_frame()
    for mode in ("column", "frame", "series_arrays"):
        spec = odd_spec(tmp_path, cands.assign(mode=mode))
        spec.write_text(spec.read_text().replace("ties: displayed_order", "ties: average"))
        on_spark = ndcg_mlflow.evaluate(
            spec, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / f"s-{mode}"
        )
        scored = pd.read_parquet(on_spark.scored["odd"]).merge(cands, on=["query_id", "doc_id"])
        assert len(scored) == len(cands)
        np.testing.assert_array_equal(scored["score"].to_numpy(), scored["good"].to_numpy())
        assert on_spark.summary["systems"]["odd"]["ndcg_at_10"]["mean"] == pytest.approx(
            ndcg_at(cands, qrels, "good", 10), rel=1e-12
        )
    for mode, expected in (
        ("wide", "returned an array of shape (8, 2)"),
        ("none", "returned None"),
        ("scalar", "returned the single value"),
    ):
        spec = odd_spec(tmp_path, cands[cands["query_id"] == "q00"].assign(mode=mode))
        spec.write_text(spec.read_text().replace("ties: displayed_order", "ties: average"))
        with pytest.raises(DataError) as info:
            ndcg_mlflow.evaluate(spec, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / f"s-{mode}")
        message = str(info.value)
        assert message.startswith(f"{tmp_path / 'odd.parquet'}: models:/odd/1 ") and expected in message, message
        assert "(scored on Spark)" in message and "Traceback" not in message


CONNECT_SCRIPT = """
import os, shutil, sys, tempfile
from pyspark.sql import SparkSession
repo, spec, uri, out = sys.argv[1:5]
spark = (SparkSession.builder.remote("local[2]").config("spark.driver.memory", "1g")
         .config("spark.sql.shuffle.partitions", "4").getOrCreate())
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
folder = tempfile.mkdtemp()  # the executors import the package under test: shipped as a Python artifact
spark.addArtifacts(shutil.make_archive(os.path.join(folder, "pkg"), "zip", repo, "ndcg_mlflow"), pyfile=True)
import json
import ndcg_mlflow
scored = os.path.join(out, "s")
result = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark), tracking_uri=uri, scored_dir=scored)
result.per_query.to_parquet(os.path.join(out, "per_query.parquet"))
with open(os.path.join(out, "models.json"), "w") as fh:
    json.dump(result.summary["models"], fh)
print("scored on Spark Connect")
"""


def test_spark_connect_scores_model_systems_with_the_local_numbers(store, tmp_path):
    """Spark Connect (``remote("local[2]")``, in its own process): ``spark_udf`` scores there too, with the
    local engine's per-query numbers."""
    import os
    import subprocess
    import sys

    import ndcg_mlflow

    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")
    if shutil.which("java") is None:
        pytest.skip("Java 17 is not available (the Spark engine needs it: java -version)")
    spec = model_spec(
        tmp_path,
        {
            "champion": {"model": "models:/ranker@champion", "candidates": "candidates.parquet"},
            "challenger": {"model": "models:/ranker/2", "candidates": "candidates.parquet"},
        },
        ties="average",
    )
    local = ndcg_mlflow.evaluate(spec, tracking_uri=store, scored_dir=tmp_path / "local")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", CONNECT_SCRIPT, str(repo), str(spec), store, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    if (
        out.returncode != 0
        and "SparkConnect" in out.stderr
        and "scored on Spark Connect" not in out.stdout
        and ("ClassNotFound" in out.stderr or "cannot start" in out.stderr.lower())
    ):
        pytest.skip(f"Spark Connect cannot start here: {out.stderr.strip()[-300:]}")
    assert out.returncode == 0, out.stderr[-3000:]
    # (a Parquet file keeps the cutoffs' values, not their ordered categorical type: compared as text)
    remote = pd.read_parquet(tmp_path / "per_query.parquet").astype({"cutoff": str})
    pd.testing.assert_frame_equal(_sorted(remote), _sorted(local.per_query.astype({"cutoff": str})), check_exact=True)
    models = json.loads((tmp_path / "models.json").read_text())
    assert models["champion"]["loaded_uri"] == "models:/ranker/1" and models["champion"]["alias"] == "champion"


@pytest.mark.parametrize("bad", ["empty doc", "pair twice"])
def test_a_problem_in_the_scored_rows_names_the_candidates_file(store, tmp_path, capsys, bad):
    """The scored rows are a file of the output folder being made: a problem in them (an empty doc id, a pair
    listed twice) is said of the candidates file, with its row and the model, never of an internal file."""
    _, cands = candidates_frame()
    frame = cands.copy()
    if bad == "empty doc":
        frame.loc[frame.index[4], "doc_id"] = ""
    else:
        frame = pd.concat([frame.iloc[:3], frame.iloc[:1], frame.iloc[3:]], ignore_index=True)
    spec = model_spec(tmp_path, {"x": {"model": "models:/ranker/2", "candidates": "bad.csv"}}, comparison=False)
    frame.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["run", str(spec), "--quiet", "--no-mlflow", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'bad.csv'}" in err and "models:/ranker/2" in err, err
    assert "scored.parquet" not in err and ".partial" not in err, err
    assert ("row 5" in err) if bad == "empty doc" else ("'d0'" in err), err
    assert "Traceback" not in err


def test_a_problem_in_the_rows_scored_on_spark_names_the_candidates_file(store, tmp_path, spark):
    """On Spark too, a problem found in the scored rows (here an empty doc id, a pair twice) is said of the
    candidates file and the model, not of the folder of scored rows."""
    import ndcg_mlflow
    from ndcg_mlflow.errors import DataError

    _, cands = candidates_frame()
    for bad, frame in (
        ("empty", cands.assign(doc_id=["", *cands.doc_id[1:]])),
        ("twice", pd.concat([cands.iloc[:3], cands.iloc[:1], cands.iloc[3:]], ignore_index=True)),
    ):
        spec = model_spec(
            tmp_path,
            {"x": {"model": "models:/ranker/2", "candidates": f"{bad}.parquet"}},
            comparison=False,
            ties="average",
        )
        frame.to_parquet(tmp_path / f"{bad}.parquet", index=False)
        with pytest.raises(DataError) as info:
            ndcg_mlflow.evaluate(spec, engine=Spark(spark), tracking_uri=store, scored_dir=tmp_path / bad)
        message = str(info.value)
        assert message.startswith(f"{tmp_path / f'{bad}.parquet'}: ") and "models:/ranker/2" in message, message
        assert "scored.parquet" not in message
        assert ("doc_id is empty" in message) if bad == "empty" else ("'d0' is listed twice" in message), message


@pytest.mark.parametrize(
    "mapping, column",
    [({"query_id": "doc_id"}, "doc_id"), ({"doc_id": "query_id"}, "query_id"), ({"query_id": "x", "doc_id": "x"}, "x")],
)
def test_a_candidates_mapping_giving_one_column_two_purposes_is_refused(tmp_path, mapping, column):
    """The candidates' ids under a mapping that reads one column as both the query ids and the document ids (the
    other left to the column of its own name, or both named): refused naming the candidates file, on both engines
    (they share :func:`ndcg_mlflow.models.systems.candidate_ids`); a mapping to two columns gives them."""
    from ndcg_mlflow.errors import DataError
    from ndcg_mlflow.models.systems import candidate_ids
    from ndcg_mlflow.spec import Source

    path = tmp_path / "candidates.parquet"
    with pytest.raises(DataError) as err:
        candidate_ids(Source(path=path, declared="candidates.parquet", columns=tuple(mapping.items())))
    assert err.value.file == str(path) and "each source column serves one purpose" in err.value.message
    assert repr(column) in err.value.message
    plain = Source(path=path, declared="candidates.parquet", columns=(("query_id", "user"), ("doc_id", "item")))
    assert candidate_ids(plain) == ("user", "item")
