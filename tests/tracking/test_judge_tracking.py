"""An evaluation with a judge in MLflow: the judge's params, the other views and the judge's bias as metrics of each
system run, ``judge.csv`` as an artifact and the table ``judge_table.json``; and ``compare`` of two logged judged
runs, which keeps the declared estimator (the joint evaluation's numbers), and of a judged and a plain run, whose
numbers are different estimators (refused, or compared and said)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from helpers import REPO, client_for

from ndcg_mlflow.cli import main

pytestmark = pytest.mark.integration  # every test logs to or reads from an MLflow store

SETTINGS = ["--test", "randomization", "--correction", "holm", "--wins-losses", "10", "--tie-tolerance", "1e-9"]
VIEWS = ("estimate", "ci_low", "ci_high", "std_error", "p_value", "lambda", "rho", "n_effective", "n_labelled")


def _spec(name: str, systems: list[str], *, judge: bool = True) -> dict:
    spec = yaml.safe_load((REPO / "configs" / "demo_judge.yaml").read_text(encoding="utf-8"))
    spec["name"] = name
    spec["data"]["systems"] = {k: v for k, v in spec["data"]["systems"].items() if k in systems}
    if len(systems) == 1:
        spec.pop("comparison")
    if not judge:  # the human judgments alone, as a plain evaluation
        spec.pop("judge")
        spec["data"].pop("judge_qrels")
    spec["mlflow"] = {"experiment": f"judge-{name}"}
    return spec


@pytest.fixture(scope="module")
def store(tmp_path_factory, migrated_db):
    root = tmp_path_factory.mktemp("judge_tracking")
    configs = root / "configs"
    shutil.copytree(REPO / "configs", configs, ignore=shutil.ignore_patterns("__pycache__"))
    specs = {
        "joint": _spec("joint", ["bm25", "reranker-v2", "dense-ties"]),
        "a": _spec("a", ["bm25"]),
        "b": _spec("b", ["reranker-v2"]),
        "plain_b": _spec("plain-b", ["reranker-v2"], judge=False),
    }
    db = root / "mlflow.db"
    shutil.copy(migrated_db, db)
    uri = f"sqlite:///{db}"
    ns = SimpleNamespace(root=root, uri=uri, client=None, out={}, parent={}, child={})
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # before the client: a SQLite store puts new experiments' artifacts under ./mlruns
        client = ns.client = client_for(uri)
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        for key, spec in specs.items():
            path = configs / f"{key}.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
            out = root / f"out_{key}"
            assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0, key
            ns.out[key] = out
            exp = client.get_experiment_by_name(spec["mlflow"]["experiment"])
            runs = client.search_runs([exp.experiment_id])
            ns.parent[key] = next(r for r in runs if r.data.tags["ndcg_mlflow.role"] == "evaluation")
            ns.child[key] = {
                r.data.tags["ndcg_mlflow.system"]: r for r in runs if r.data.tags["ndcg_mlflow.role"] == "system"
            }
    return ns


@pytest.fixture
def cli(store, monkeypatch, capsys):
    monkeypatch.chdir(store.root)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)

    def run(*args: str):
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def _table(client, run_id: str, name: str, tmp: Path) -> pd.DataFrame:
    path = Path(client.download_artifacts(run_id, name, str(tmp)))
    table = json.loads(path.read_text(encoding="utf-8"))
    return pd.DataFrame(table["data"], columns=table["columns"])


def test_the_judge_is_logged_with_its_params_metrics_and_table(store, tmp_path):
    summary = _summary(store.out["joint"])
    judge = summary["judge"]
    parent, children = store.parent["joint"], store.child["joint"]
    expected = {
        "judge.estimator": "ppi++",
        "judge.labelled_queries": "random",
        "judge.name": "demo-judge",
        "data.judge_qrels": "demo/judge_qrels.tsv",
        "data.qrels": "demo/human_qrels.tsv",
    }
    for run in (parent, *children.values()):
        assert {k: run.data.params.get(k) for k in expected} == expected
        assert run.data.tags["ndcg_mlflow.data.judge_qrels.sha256"] == summary["files"]["judge_qrels"]["sha256"]
    for name, run in children.items():
        m = run.data.metrics
        for key, e in judge["systems"][name].items():
            assert m[key] == pytest.approx(e["estimate"], rel=1e-12)  # the mean is the declared estimator's
            assert m[f"judge.{key}.human_only"] == pytest.approx(e["human_only"]["estimate"], rel=1e-12)
            assert m[f"judge.{key}.judge_only"] == pytest.approx(e["judge_only"]["estimate"], rel=1e-12)
            for figure in ("lambda", "rho", "n_effective"):
                assert m[f"judge.{key}.{figure}"] == pytest.approx(e[figure], rel=1e-12)
        comps = [c for c in judge["comparisons"] if c["candidate"] == name]
        assert bool(comps) == (name != "bm25")
        assert any(k.startswith("compare.") for k in m) == bool(comps)
        for c in comps:
            key = c["key"]
            assert m[f"compare.{key}.delta"] == pytest.approx(c["estimate"], rel=1e-12)
            assert m[f"compare.{key}.judge_bias"] == pytest.approx(c["judge_bias"]["estimate"], rel=1e-12)
            assert m[f"compare.{key}.judge_bias_p"] == pytest.approx(c["judge_bias"]["p_value"], rel=1e-12)
            assert m[f"compare.{key}.judge_only_delta"] == pytest.approx(c["judge_only"]["estimate"], rel=1e-12)
            assert m[f"compare.{key}.human_only_delta"] == pytest.approx(c["human_only"]["estimate"], rel=1e-12)
        # its rows of the judge's table: its means and its comparisons
        rows = _table(store.client, run.info.run_id, "judge_table.json", tmp_path / name)
        assert set(rows["system"]) == {name}
        assert sorted(rows["kind"]) == ["comparison"] * len(comps) + ["system"] * 3
    # the evaluation run: judge.csv as written locally, and its table whole
    local = pd.read_csv(store.out["joint"] / "judge.csv", dtype={"cutoff": str})
    logged = pd.read_csv(store.client.download_artifacts(parent.info.run_id, "judge.csv", str(tmp_path / "csv")))
    assert logged.shape == local.shape == (9 + 6, 26)
    table = _table(store.client, parent.info.run_id, "judge_table.json", tmp_path / "parent")
    assert list(table.columns) == list(local.columns)
    for (_, got), (_, want) in zip(table.iterrows(), local.iterrows()):
        assert (got["kind"], got["system"], got["key"]) == (want["kind"], want["system"], want["key"])
        for column in ("estimate", "human_only", "judge_only", "lambda", "judge_bias", "judge_bias_p"):
            if pd.isna(want[column]):
                assert got[column] is None or pd.isna(got[column])
            else:
                assert got[column] == pytest.approx(want[column], rel=1e-12)
    # the evaluation run's description says which labels the verdict rests on, as the report does
    page = (store.out["joint"] / "report.md").read_text(encoding="utf-8")
    first = next(line for line in page.splitlines() if line.startswith("The verdict rests on"))
    assert "demo-judge's judgments of 180 more" in first
    assert first in parent.data.tags["mlflow.note.content"]
    c = next(c for c in judge["comparisons"] if c["candidate"] == "dense-ties" and c["key"] == "ndcg_at_all")
    row = local[(local["kind"] == "comparison") & (local["system"] == "dense-ties") & (local["cutoff"] == "all")]
    assert row["judge_bias_ci_high"].item() == pytest.approx(c["judge_bias"]["ci_high"], rel=1e-12)


def test_compare_of_two_judged_runs_is_the_joint_judged_evaluation(store, cli, tmp_path):
    out = tmp_path / "cmp"
    a, b = store.child["a"]["bm25"].info.run_id, store.child["b"]["reranker-v2"].info.run_id
    code, printed, err = cli("compare", a, b, "--out", str(out), *SETTINGS)
    assert code == 0, err
    joint, cmp_ = _summary(store.out["joint"])["judge"], _summary(out)["judge"]
    assert cmp_["estimator"] == "ppi++" and cmp_["name"] == "demo-judge"
    assert (cmp_["n_labelled"], cmp_["n_unlabelled"]) == (joint["n_labelled"], joint["n_unlabelled"])
    assert cmp_["agreement"] == joint["agreement"]
    want = [c for c in joint["comparisons"] if c["candidate"] == "reranker-v2"]
    assert [c["key"] for c in cmp_["comparisons"]] == [c["key"] for c in want]
    for got, c in zip(cmp_["comparisons"], want):
        for field in VIEWS:
            assert got[field] == pytest.approx(c[field], rel=1e-9), field
        for view in ("human_only", "judge_only", "judge_bias"):
            assert got[view] == pytest.approx(c[view], rel=1e-9), view
    for name in ("bm25", "reranker-v2"):
        for key, e in joint["systems"][name].items():
            assert cmp_["systems"][name][key]["estimate"] == pytest.approx(e["estimate"], rel=1e-9)
    rows = {c["key"]: c for c in _summary(out)["comparisons"]}
    assert rows["ndcg_at_10"]["p_judged"] == pytest.approx(want[1]["p_value"], rel=1e-9)
    assert "ppi++ estimator's" in " ".join(_summary(out)["notes"])
    assert (out / "judge.csv").is_file() and "id='judge-lead'" in (out / "report.html").read_text(encoding="utf-8")
    # the comparison run records the views as a candidate's system run does
    exps = [e.experiment_id for e in store.client.search_experiments()]
    run = next(r for r in store.client.search_runs(exps) if r.data.tags.get("ndcg_mlflow.baseline_run") == a)
    assert run.data.metrics["compare.ndcg_at_10.judge_bias"] == pytest.approx(want[1]["judge_bias"]["estimate"])
    assert run.data.metrics["compare.ndcg_at_10.judge_only_delta"] == pytest.approx(want[1]["judge_only"]["estimate"])


def test_compare_of_a_judged_and_a_plain_run_says_they_are_different_estimators(store, cli, tmp_path):
    a, b = store.child["a"]["bm25"].info.run_id, store.child["plain_b"]["reranker-v2"].info.run_id
    # the same human judgments: without the judge in view, nothing else tells the runs apart
    assert (
        store.child["a"]["bm25"].data.tags["ndcg_mlflow.data.qrels.sha256"]
        == (store.child["plain_b"]["reranker-v2"].data.tags["ndcg_mlflow.data.qrels.sha256"])
    )
    code, _, err = cli("compare", a, b, "--out", str(tmp_path / "refused"), "--no-mlflow", *SETTINGS)
    assert code == 2
    assert f"run {a} was evaluated with a judge and run {b} without: their numbers are different estimators" in err
    assert "Traceback" not in err and not (tmp_path / "refused").exists()
    out = tmp_path / "allowed"
    code, _, err = cli("compare", a, b, "--out", str(out), "--no-mlflow", "--allow-spec-mismatch", *SETTINGS)
    assert code == 0, err
    summary = _summary(out)
    assert "judge" not in summary
    notes = " ".join(summary["notes"])
    assert "THE DEFINITIONS DIFFER" in notes and "different estimators" in notes


def test_the_report_rebuilt_from_the_logged_run_is_the_local_one(store, cli, tmp_path):
    out = tmp_path / "rebuilt"
    code, _, err = cli("report", store.parent["joint"].info.run_id, "--out", str(out))
    assert code == 0, err
    local = store.out["joint"]
    assert (out / "judge.csv").read_bytes() == (local / "judge.csv").read_bytes()
    assert (out / "report.html").read_bytes() == (local / "report.html").read_bytes()
    assert (out / "report.md").read_bytes() == (local / "report.md").read_bytes()
    svg = "figures/judge_views.svg"
    assert (out / svg).read_bytes() == (local / svg).read_bytes()
