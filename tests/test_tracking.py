"""End to end: the CLI evaluates the demo and logs it to a real local SQLite MLflow store; read it all back."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import client_for, runs_of_experiment

from ndcg_mlflow.cli import main


def _runs(uri, experiment="demo-product-search"):
    return runs_of_experiment(client_for(uri), experiment, deleted=False)


@pytest.mark.integration
def test_demo_run_logs_everything(tracking_uri, demo_copy, tmp_path, capsys):
    out = tmp_path / "out"
    spec_path = demo_copy / "demo.yaml"
    assert main(["run", str(spec_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nDCG@10" in printed and "evaluation run:" in printed
    assert "against baseline 'bm25'" in printed and "largest wins / losses" in printed

    summary = json.loads((out / "summary.json").read_text())
    spec_sha = hashlib.sha256(spec_path.read_bytes()).hexdigest()
    assert summary["spec_sha256"] == spec_sha
    assert (out / "spec.yaml").read_bytes() == spec_path.read_bytes()

    runs = _runs(tracking_uri)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["ndcg_mlflow.spec_sha256"] == spec_sha
    assert parent.data.tags["ndcg_mlflow.logging"] == "complete"
    for name, rel in (("qrels", "demo/qrels.tsv"), ("system.bm25", "demo/bm25.run")):
        expected = hashlib.sha256((demo_copy / rel).read_bytes()).hexdigest()
        assert parent.data.tags[f"ndcg_mlflow.data.{name}.sha256"] == expected
    assert parent.data.tags["ndcg_mlflow.version"]

    params = parent.data.params
    assert params["metric.gain"] == "exponential"
    assert params["metric.cutoffs"] == "5,10,all"
    assert params["metric.ties"] == "displayed_order"
    assert params["metric.empty_ideal"] == "exclude"
    assert params["metric.missing_queries"] == "zero"
    assert params["queries.weights"] == "uniform"
    assert params["data.systems.reranker-v2"] == "demo/reranker_v2.run"

    by_name = {c.data.tags["ndcg_mlflow.system"]: c for c in children}
    assert set(by_name) == {"bm25", "reranker-v2", "dense-ties"}
    for name, child in by_name.items():
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED"
        for key in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all"):
            expected = summary["systems"][name][key]["mean"]
            assert child.data.metrics[key] == pytest.approx(expected, rel=1e-12)
            assert parent.data.metrics[f"{name}.{key}"] == pytest.approx(expected, rel=1e-12)
            assert child.data.metrics[f"{key}_n_missing"] == summary["systems"][name][key]["n_missing"]
    assert by_name["reranker-v2"].data.metrics["ndcg_at_10_n_missing"] == 1
    for name, child in by_name.items():
        entry = summary["systems"][name]["ndcg_at_10"]
        assert entry["ci_low"] <= entry["mean"] <= entry["ci_high"]
        for extra in ("ci_low", "ci_high", "std_error", "n_eff"):
            assert child.data.metrics[f"ndcg_at_10_{extra}"] == pytest.approx(entry[extra], rel=1e-12)

    comparisons = summary["comparisons"]
    assert {(c["candidate"], c["key"]) for c in comparisons} == {
        (c, k) for c in ("reranker-v2", "dense-ties") for k in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all")}
    for c in comparisons:
        for figure in ("delta", "ci_low", "ci_high", "p_randomization", "p_corrected", "effect_size_dz", "wins",
                       "ties", "losses", "n_paired"):
            key = f"compare.{c['candidate']}.{c['key']}.{figure}"
            assert parent.data.metrics[key] == pytest.approx(c[figure], rel=1e-12), key

    client = client_for(tracking_uri)
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"spec.yaml", "summary.json", "per_query.csv", "per_query_table.json", "comparisons_table.json",
            "comparisons.csv", "wins_losses.json", "wins_losses.md"} <= names
    local = Path(client.download_artifacts(parent.info.run_id, "spec.yaml", str(tmp_path / "dl")))
    assert local.read_bytes() == spec_path.read_bytes()
    table_file = Path(client.download_artifacts(parent.info.run_id, "per_query_table.json", str(tmp_path / "dl2")))
    table = json.loads(table_file.read_text())
    assert len(table["data"]) == 3 * 240 * 3
    child_files = {a.path for a in client.list_artifacts(by_name["bm25"].info.run_id)}
    assert "bm25.per_query.csv" in child_files

    per_query = pd.read_csv(out / "per_query.csv", dtype={"cutoff": str})
    for col in ("system", "query_id", "cutoff", "ndcg", "dcg", "idcg", "idcg_candidates", "judged_coverage",
                "weight", "status"):
        assert col in per_query.columns
    bm25_10 = per_query[(per_query.system == "bm25") & (per_query.cutoff == "10")]
    assert bm25_10.ndcg.mean() == pytest.approx(summary["systems"]["bm25"]["ndcg_at_10"]["mean"], rel=1e-12)
    assert bm25_10.ndcg.isna().sum() == summary["systems"]["bm25"]["ndcg_at_10"]["n_excluded"]


@pytest.mark.integration
def test_bad_spec_exits_without_traceback_or_run(tracking_uri, demo_copy, capsys):
    text = (demo_copy / "demo.yaml").read_text().replace("cutoffs:", "cuttoffs:")
    bad = demo_copy / "bad.yaml"
    bad.write_text(text)
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "metric.cuttoffs" in err and "did you mean 'cutoffs'" in err
    assert "Traceback" not in err
    assert _runs(tracking_uri) == []
    assert not Path("ndcg_reports").exists()


@pytest.mark.integration
def test_bad_data_file_exits_without_run(tracking_uri, demo_copy, capsys):
    run = demo_copy / "demo" / "bm25.run"
    lines = run.read_text().splitlines()
    lines[41] = lines[41].rsplit(" ", 2)[0] + " nan bm25"
    run.write_text("\n".join(lines) + "\n")
    assert main(["run", str(demo_copy / "demo.yaml")]) == 2
    err = capsys.readouterr().err
    assert "bm25.run:42:" in err and "score" in err
    assert "Traceback" not in err
    assert _runs(tracking_uri) == []


@pytest.mark.integration
def test_unreachable_server_keeps_local_results(demo_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    out = tmp_path / "out"
    code = main(["run", str(demo_copy / "demo.yaml"), "--out", str(out), "--tracking-uri", "http://127.0.0.1:9"])
    assert code == 3
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err and str(out) in err
    summary = json.loads((out / "summary.json").read_text())
    assert not math.isnan(summary["systems"]["bm25"]["ndcg_at_10"]["mean"])
    assert (out / "per_query.csv").is_file()


def test_validate_command(demo_copy, capsys):
    assert main(["validate", str(demo_copy / "demo.yaml")]) == 0
    assert "valid spec 'demo-product-search'" in capsys.readouterr().out
    (demo_copy / "demo" / "bm25.run").unlink()
    assert main(["validate", str(demo_copy / "demo.yaml")]) == 2
    err = capsys.readouterr().err
    assert "data.systems.bm25" in err and "file not found" in err


def test_no_mlflow_option_writes_local_only(demo_copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec_path = demo_copy / "demo.yaml"
    spec_path.write_text(spec_path.read_text().replace("resamples: 10000", "resamples: 200"))
    assert main(["run", str(demo_copy / "demo.yaml"), "--no-mlflow", "--out", "o", "--quiet"]) == 0
    assert (tmp_path / "o" / "summary.json").is_file()
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.integration
def test_runs_are_found_by_spec_digest_system_and_dataset_digest(tracking_uri, demo_copy, tmp_path):
    import mlflow

    spec_path = demo_copy / "demo.yaml"
    text = spec_path.read_text().replace("resamples: 10000", "resamples: 200").replace(
        "sensitivity: true", "sensitivity: false")
    spec_path.write_text(text)
    assert main(["run", str(spec_path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    qrels_sha = summary["files"]["qrels"]["sha256"]
    by_spec = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                 filter_string=f"tags.`ndcg_mlflow.spec_sha256` = '{summary['spec_sha256']}'")
    assert len(by_spec) == 4  # the evaluation and its three systems
    by_system = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                   filter_string="tags.`ndcg_mlflow.system` = 'reranker-v2'")
    assert [r.data.tags["ndcg_mlflow.role"] for r in by_system] == ["system"]
    by_data = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                 filter_string=f"tags.`ndcg_mlflow.qrels_sha256` = '{qrels_sha}'")
    assert len(by_data) == 3
    parent = [r for r in by_spec if r.data.tags["ndcg_mlflow.role"] == "evaluation"][0]
    assert "nDCG evaluation 'demo-product-search'" in parent.data.tags["mlflow.note.content"]
    assert all(r.data.tags.get("mlflow.note.content") for r in by_spec)


def test_progress_goes_to_a_terminal_only(capsys, monkeypatch):
    import io
    import logging

    from ndcg_mlflow import cli

    cli._configure_logging(quiet=False)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    cli._progress(quiet=False)("reading system 'x'")
    assert "reading system 'x'" in tty.getvalue()
    tty.truncate(0)
    tty.seek(0)
    cli._progress(quiet=True)("resampling queries")
    assert tty.getvalue() == ""
    pipe = io.StringIO()  # not a terminal: progress is only logged at DEBUG
    monkeypatch.setattr("sys.stderr", pipe)
    cli._progress(quiet=False)("computing nDCG")
    assert pipe.getvalue() == ""
    assert logging.getLogger("ndcg_mlflow").level == logging.INFO
