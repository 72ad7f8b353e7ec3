"""``run --engine spark`` and ``ndcg_mlflow.evaluate(engine="spark")`` beyond the driver limit: the per-query
rows stay in Spark (Parquet next to the output folder), the statistics come from random groups of queries, and
the output folder, the decision, the reports and the MLflow runs are complete. The limit is forced small here
(``--driver-queries``); the statistics themselves are checked against the per-query method in
``tests/engines/test_spark.py`` (test_grouped_statistics_agree_with_the_per_query_method)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import java_problem

import ndcg_mlflow
from ndcg_mlflow import Spark
from ndcg_mlflow.errors import EvaluationError, SpecError

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")


if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def demo_spec(tmp_path: Path, **changes) -> Path:
    """The demo spec with what the grouped path computes (percentile intervals, the randomization test, no wins
    and losses, no sensitivity), its paths made absolute."""
    spec = yaml.safe_load((CONFIGS / "demo.yaml").read_text(encoding="utf-8"))
    spec["companions"]["duplicates"] = str(CONFIGS / spec["companions"]["duplicates"])
    spec["report"]["sensitivity"] = False
    spec["uncertainty"].update({"method": "percentile", "resamples": 2000})
    spec["comparison"]["wins_losses"] = 0
    data = spec["data"]
    data["qrels"] = str(CONFIGS / data["qrels"])
    data["systems"] = {name: str(CONFIGS / path) for name, path in data["systems"].items()}
    for path, value in changes.items():
        section, key = path.split(".")
        spec.setdefault(section, {})[key] = value
    out = tmp_path / "spec.yaml"
    out.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return out


def test_run_beyond_the_driver_limit_writes_a_complete_folder_and_logs_it(spark, tmp_path, tracking_uri, capsys):
    from mlflow.tracking import MlflowClient

    from ndcg_mlflow.cli import main

    # a decision that fails: no candidate is better by 0.5 (exit 4, as for run on the local engine)
    spec = demo_spec(tmp_path, **{"decision.key": "ndcg_at_10", "decision.rule": "superiority", "decision.margin": 0.5})
    local, out = tmp_path / "local", tmp_path / "grouped"
    assert main(["run", str(spec), "--no-mlflow", "--quiet", "--out", str(local)]) == 4
    capsys.readouterr()
    code = main(["run", str(spec), "--engine", "spark", "--driver-queries", "10", "--out", str(out), "--timings"])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 4
    # --timings: the grouped statistics (per-group sums, intervals, tests, the decision) are their own phase
    table = captured.err.split("where the time went (wall seconds):\n")[1].splitlines()
    phases = [line.split()[0] for line in table]
    assert phases[:4] == ["session", "read", "scoring", "statistics"] and "logging" in phases
    assert "random groups" in printed and "decision: FAIL" in printed
    assert printed.splitlines()[0] == "demo-product-search — decision: FAIL against baseline bm25"  # the answer first

    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    for name in (
        "summary.json",
        "spec.yaml",
        "run_key.txt",
        "manifest.json",
        "explanation.txt",
        "comparisons.csv",
        "report.html",
        "report.md",
        "figures/ndcg_by_cutoff.svg",
    ):
        assert name in files, name
    assert "per_query.csv" not in files and "figures/per_query_differences.svg" not in files

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    ref = json.loads((local / "summary.json").read_text(encoding="utf-8"))
    groups = summary["engine_info"]["statistics"]["groups"]
    assert summary["engine_info"]["statistics"]["method"] == "grouped" and groups == 1000
    # the per-query table, in Parquet next to the folder, is the local engine's
    pq = Path(summary["per_query_path"])
    assert pq.parent == Path(f"{out}.per_query") and pq.is_dir()
    written = pd.read_parquet(pq)
    written["system"] = written["system"].astype(str)
    expected = pd.read_csv(
        local / "per_query.csv",
        dtype={"query_id": str, "system": str, "cutoff": str},
        keep_default_na=False,
        na_values=[""],
    )
    cols = ["system", "query_id", "cutoff", "ndcg", "dcg", "idcg", "n_returned", "weight", "status"]
    a = expected[cols].sort_values(["system", "query_id", "cutoff"]).reset_index(drop=True)
    b = written[cols].sort_values(["system", "query_id", "cutoff"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(
        a.astype({"n_returned": "int64"}), b.astype({"n_returned": "int64"}), check_dtype=False, rtol=1e-12
    )
    # means and counts as on the local engine; intervals of the same width order (the statistics are checked
    # against the per-query method in tests/engines/test_spark.py)
    for name, means in ref["systems"].items():
        for key, m in means.items():
            g = summary["systems"][name][key]
            assert g["mean"] == pytest.approx(m["mean"], rel=1e-12)
            assert (g["n_evaluated"], g["n_missing"]) == (m["n_evaluated"], m["n_missing"])
            assert g["ci_low"] < g["mean"] < g["ci_high"]
            assert 0.5 < (g["ci_high"] - g["ci_low"]) / (m["ci_high"] - m["ci_low"]) < 2.0
    # the decision, applied to the grouped comparisons, fails for each candidate as declared
    d = summary["decision"]
    assert d["outcome"] == "fail" and {r["candidate"] for r in d["candidates"]} == {"reranker-v2", "dense-ties"}
    # the rule reads the weighted t interval over the groups (each group's weighted mean difference, weighted by
    # its weight sum): symmetric about the comparison's difference, of the width order of the per-query t interval
    # the local engine's decision reads
    local_rows = {r["candidate"]: r for r in ref["decision"]["candidates"]}
    for r in d["candidates"]:
        lr = local_rows[r["candidate"]]
        assert r["interval"] == lr["interval"] == "weighted t" and r["df"] > 100
        assert r["ci_low"] + r["ci_high"] == pytest.approx(2 * r["delta"], rel=1e-9)
        assert 0.5 < (r["ci_high"] - r["ci_low"]) / (lr["ci_high"] - lr["ci_low"]) < 2.0
        assert r["outcome"] == ("pass" if r["ci_low"] > 0.5 else "fail")
    for c in summary["comparisons"]:
        lc = next(x for x in ref["comparisons"] if (x["candidate"], x["key"]) == (c["candidate"], c["key"]))
        assert c["delta"] == pytest.approx(lc["delta"], rel=1e-9) and c["n_paired"] == lc["n_paired"]
        assert 0 < c["p_randomization"] <= c["p_corrected"] <= 1 and "wins" not in c
    assert any("random groups" in n and "not computed" in n for n in summary["notes"])

    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    for text in (html, md):
        assert "per-query rows are not in this folder" in text and pq.name in text and "not computed" in text
    assert str(pq) in html
    assert "Decision: FAIL" in html and "per_query_differences" not in html

    # logged: the same numbers as summary.json, the folder's files, the per-query table by path only
    client = MlflowClient(tracking_uri)
    run_key = (out / "run_key.txt").read_text().strip()
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], f"tags.ndcg_mlflow.run_key = '{run_key}'"
    )
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert len(runs) == 1 + len(summary["systems"])
    for name, means in summary["systems"].items():
        for key, m in means.items():
            assert parent.data.metrics[f"{name}.{key}"] == pytest.approx(m["mean"], rel=1e-12)
    child = next(
        r
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
        and r.data.metrics.get("compare.ndcg_at_10.delta") is not None
    )
    cand = next(
        c
        for c in summary["comparisons"]
        if c["key"] == "ndcg_at_10"
        and child.data.metrics["compare.ndcg_at_10.delta"] == pytest.approx(c["delta"], rel=1e-12)
    )
    assert child.data.metrics["compare.ndcg_at_10.p_corrected"] == pytest.approx(cand["p_corrected"])
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"summary.json", "report.html", "comparisons.csv"} <= artifacts and "per_query.csv" not in artifacts
    # the folder is a finished evaluation for upload and report: a second upload finds the first one
    assert main(["upload", str(out), "--quiet"]) == 0
    assert len(client.search_runs([parent.info.experiment_id], f"tags.ndcg_mlflow.run_key = '{run_key}'")) == len(runs)
    # the report rebuilt from the logged artifacts says the same, without per-query sections
    rebuilt = tmp_path / "rebuilt"
    assert main(["report", parent.info.run_id, "--out", str(rebuilt)]) == 0
    again = (rebuilt / "report.html").read_text(encoding="utf-8")
    assert "per-query rows are not in this folder" in again and "Decision: FAIL" in again


def test_the_api_returns_the_grouped_result_beyond_the_limit(spark, tmp_path):
    spec = demo_spec(tmp_path)
    pq = tmp_path / "pq"
    result = ndcg_mlflow.evaluate(str(spec), engine=Spark(spark, driver_queries=10, per_query_path=pq, groups=50))
    assert result.per_query_path == pq and result.summary["engine_info"]["statistics"]["groups"] == 50
    # one result type: it says where its per-query rows are, and answers from its summary
    assert isinstance(result, ndcg_mlflow.EvaluationResult) and not result.systems
    with pytest.raises(EvaluationError, match="stayed in Spark.*Parquet table"):
        _ = result.per_query
    key = next(iter(result.summary["systems"]["bm25"]))
    assert result.mean("bm25", key.removeprefix("ndcg_at_")) == result.summary["systems"]["bm25"][key]["mean"]
    assert set(pd.read_parquet(pq)["system"].astype(str)) == {"bm25", "reranker-v2", "dense-ties"}
    assert result.decision is None
    # within the limit the same call gives the per-query result and writes nothing
    below = ndcg_mlflow.evaluate(str(spec), engine=Spark(spark, per_query_path=tmp_path / "unused"))
    assert len(below.per_query) > 0 and not (tmp_path / "unused").exists()


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("uncertainty.method", "bca", "only 'percentile'"),
        ("uncertainty.method", "studentized", "only 'percentile'"),
        ("comparison.test", "t_test", "only 'randomization'"),
        ("comparison.test", "both", "only 'randomization'"),
        ("comparison.wins_losses", 3, "set it to 0"),
        ("report.sensitivity", True, "sensitivity table is not computed"),
    ],
)
def test_what_the_grouped_path_cannot_give_is_refused_before_the_spark_job(spark, tmp_path, key, value, says, capsys):
    from ndcg_mlflow.cli import main

    spec = demo_spec(tmp_path, **{key: value})
    pq = tmp_path / "pq"
    with pytest.raises(SpecError, match=rf"{key}.*{says}"):
        ndcg_mlflow.evaluate(str(spec), engine=Spark(spark, driver_queries=10, per_query_path=pq))
    assert not pq.exists()
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
                "--no-mlflow",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert key in err and says in err and "Traceback" not in err
    assert not out.exists() and not Path(f"{out}.per_query").exists()


def test_driver_queries_needs_the_spark_engine(tmp_path, capsys):
    from ndcg_mlflow.cli import main

    spec = demo_spec(tmp_path)
    assert main(["run", str(spec), "--driver-queries", "10", "--no-mlflow", "--out", str(tmp_path / "o")]) == 2
    assert "--driver-queries" in capsys.readouterr().err


def test_a_replaced_result_takes_its_per_query_table_with_it(spark, tmp_path, capsys):
    """``OUT.per_query/`` holds the tables results refer to and nothing else: a table goes when the result
    that refers to it is replaced (by a grouped or a local result), and when its evaluation fails."""
    from ndcg_mlflow.cli import main

    spec, out = demo_spec(tmp_path), tmp_path / "out"
    home = Path(f"{out}.per_query")
    grouped = [
        "run",
        str(spec),
        "--engine",
        "spark",
        "--driver-queries",
        "10",
        "--no-mlflow",
        "--quiet",
        "--out",
        str(out),
    ]

    def referred() -> Path:
        return Path(json.loads((out / "summary.json").read_text(encoding="utf-8"))["per_query_path"])

    assert main(grouped) == 0
    first = referred()
    assert first.parent == home and first.is_dir()
    kept = home / "placed-by-someone"  # not a table of a replaced result: left alone
    kept.mkdir()
    assert main(grouped) == 0
    second = referred()
    assert second != first and second.is_dir() and not first.exists() and kept.is_dir()
    kept.rmdir()
    # a local result in place of the grouped one: the grouped one's table goes, and the home with it
    assert main(["run", str(spec), "--no-mlflow", "--quiet", "--out", str(out)]) == 0
    assert (out / "per_query.csv").is_file() and not second.exists() and not home.exists()

    # an evaluation that fails on its second system (a document listed twice) leaves no table behind
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    names = list(data["data"]["systems"])
    lines = Path(data["data"]["systems"][names[1]]).read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "twice.run"
    bad.write_text("\n".join(lines + lines[:1]) + "\n", encoding="utf-8")
    data["data"]["systems"][names[1]] = str(bad)
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    failed = tmp_path / "failed"
    capsys.readouterr()
    assert main(grouped[:-1] + [str(failed)]) == 2
    assert "twice" in capsys.readouterr().err
    assert not failed.exists() and not Path(f"{failed}.per_query").exists()
    # through the API too: the folder the engine made for the table is removed again
    pq = tmp_path / "api-table"
    with pytest.raises(ndcg_mlflow.DataError, match="twice"):
        ndcg_mlflow.evaluate(str(spec), engine=Spark(spark, driver_queries=10, per_query_path=pq))
    assert not pq.exists()


def test_the_grouped_path_states_the_correction_family_as_the_per_query_path(spark, tmp_path):
    """summary.json's family (its sentence and its correction_family) is the per-query path's, the same words and
    members, computed by one function: the grouped path wrote a sentence of its own and no correction_family."""
    spec = demo_spec(tmp_path)
    grouped = ndcg_mlflow.evaluate(str(spec), engine=Spark(spark, driver_queries=10, per_query_path=tmp_path / "pq"))
    local = ndcg_mlflow.evaluate(str(spec))
    assert grouped.summary["comparison_family"] == local.summary["comparison_family"]
    want = {k: v for k, v in local.summary["correction_family"].items() if k != "members"}
    got = {k: v for k, v in grouped.summary["correction_family"].items() if k != "members"}
    assert got == want
    members = lambda s: sorted((m["candidate"], m["key"]) for m in s["correction_family"]["members"])  # noqa: E731
    assert members(grouped.summary) == members(local.summary)
