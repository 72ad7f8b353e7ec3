"""The Spark engine's grouped path with the judgments, the evaluated query set and the weights kept in Spark
(``driver_judgments=0`` forces it on small data): the per-query table and the means equal the local engine's,
and every refusal is the local engine's (same error type, naming the source and the offending ids)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import java_problem

import ndcg_mlflow
from ndcg_mlflow import Spark
from ndcg_mlflow.errors import DataError

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")

if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)

from ndcg_mlflow.engines.spark import evaluate_grouped, judgments_in_spark  # noqa: E402


@pytest.fixture(params=["driver", "spark"])
def small_files(request, monkeypatch):
    """The query set and weights files read on the driver (local readers), or by Spark (as large ones are)."""
    if request.param == "spark":
        monkeypatch.setattr(judgments_in_spark, "DRIVER_SMALL_FILE_BYTES", -1)
    return request.param


def random_data(seed: int, int_ids: bool = False):
    """Judgments (with identical duplicates, all-zero queries: empty ideals), two runs (missing queries, unjudged
    documents, queries outside the set), a query set and weights."""
    rng = np.random.default_rng(seed)
    nq = 40
    qid = (lambda i: 1000 + i) if int_ids else (lambda i: f"q{i:03d}")
    did = (lambda j: 50_000 + j) if int_ids else (lambda j: f"d{j}")
    qrels = []
    for i in range(nq):
        docs = rng.choice(60, size=int(rng.integers(1, 12)), replace=False)
        zero = i % 7 == 3  # every grade 0: an empty ideal
        for j in docs:
            qrels.append((qid(i), did(int(j)), 0 if zero else int(rng.integers(0, 4))))
    qrels += qrels[:5]  # identical duplicates, merged
    qrels_df = pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"])
    runs = {}
    for name in ("a", "b"):
        rows = []
        for i in range(nq + 3):  # queries beyond the judged ones are outside the set
            if rng.random() < 0.15:  # a missing query
                continue
            docs = rng.choice(80, size=int(rng.integers(1, 15)), replace=False)  # some unjudged
            for r, j in enumerate(docs):
                rows.append((qid(i), did(int(j)), float(rng.integers(0, 5)), r + 1))
        runs[name] = pd.DataFrame(rows, columns=["query_id", "doc_id", "score", "rank"])
    judged = sorted({str(q) for q in qrels_df["query_id"]})
    query_set = [q for k, q in enumerate(judged) if k % 5 != 1]
    weights = {q: float(rng.uniform(0.5, 3.0)) for q in judged}
    return qrels_df, runs, query_set, weights


def write_inputs(tmp: Path, qrels: pd.DataFrame, runs, query_set, weights, qrels_format: str) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    if qrels_format == "trec":
        path = tmp / "qrels.txt"
        path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels.itertuples(index=False)), encoding="utf-8")
    elif qrels_format == "csv":
        path = tmp / "qrels.csv"
        qrels.to_csv(path, index=False)
    else:  # a Parquet folder of two files
        path = tmp / "qrels_parquet"
        path.mkdir()
        half = len(qrels) // 2
        qrels.iloc[:half].to_parquet(path / "part-0.parquet", index=False)
        qrels.iloc[half:].to_parquet(path / "part-1.parquet", index=False)
    systems = {}
    for name, df in runs.items():
        run_path = tmp / f"{name}.parquet"
        df.to_parquet(run_path, index=False)
        systems[name] = str(run_path)
    (tmp / "set.txt").write_text("".join(f"{q}\n" for q in query_set), encoding="utf-8")
    text = "".join(f"{q}\t{w if isinstance(w, str) else repr(w)}\n" for q, w in weights.items())
    (tmp / "weights.tsv").write_text(text, encoding="utf-8")
    return {"qrels": str(path), "systems": systems}


def make_spec(
    data: dict, tmp: Path, *, query_set: bool = True, weights: bool = True, gain="exponential", **metric
) -> dict:
    return {
        "spec_version": 1,
        "name": "spark-judgments",
        "metric": {
            "gain": gain,
            "cutoffs": [3, 10, "all"],
            "discount": "log2",
            "ties": "average",
            "ideal": "judged_catalog",
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
            **metric,
        },
        "queries": {
            "weights": str(tmp / "weights.tsv") if weights else "uniform",
            "set": str(tmp / "set.txt") if query_set else None,
        },
        "data": data,
        "uncertainty": {"resamples": 200, "confidence": 0.95, "method": "percentile", "seed": 7},
        "comparison": {
            "baseline": "a",
            "test": "randomization",
            "correction": "holm",
            "wins_losses": 0,
            "tie_tolerance": 1e-9,
        },
        "mlflow": {"experiment": "spark-judgments"},
    }


def grouped(spark, spec, tmp: Path, **kwargs):
    return evaluate_grouped(
        spec, per_query_path=tmp / "per_query", spark=spark, driver_judgments=0, groups=4, buckets=3, **kwargs
    )


def check_same(local, result) -> None:
    """The Parquet per-query table equals the local engine's per-query numbers exactly; the means to 1e-12."""
    assert result.summary["engine_info"]["judgments"] == "spark"
    mine = pd.read_parquet(result.per_query_path)
    mine["system"] = mine["system"].astype(str)
    theirs = local.per_query.copy()
    key = ["system", "query_id", "cutoff"]
    cols = ["ndcg", "dcg", "idcg", "status"]
    theirs = theirs.assign(
        query_id=theirs["query_id"].astype(str),
        cutoff=theirs["cutoff"].astype(str),
        status=theirs["status"].astype(str),
    )
    a = mine[key + cols].sort_values(key).reset_index(drop=True)
    b = theirs[key + cols].sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) and len(a) > 0
    pd.testing.assert_frame_equal(a[key], b[key])
    assert (a["status"].to_numpy() == b["status"].to_numpy()).all()
    for c in ("ndcg", "dcg", "idcg"):
        x, y = a[c].to_numpy(dtype=float), b[c].to_numpy(dtype=float)
        assert ((x == y) | (np.isnan(x) & np.isnan(y))).all(), c
    summary = result.summary
    assert summary["n_queries"] == len(local.query_ids)
    assert math.isclose(summary["weight_sum"], float(local.weights.sum()), rel_tol=1e-12)
    assert summary["grades"] == list(local.grades)
    for f in local.files:  # the files' sha256 (a streaming read on the driver) and rows, as locally
        if (
            f.role in ("qrels", "queries.set", "queries.weights")
            and f.sha256
            and not summary["files"][f.role]["sha256"].startswith("xxhash64-sum:")
        ):
            assert summary["files"][f.role] == {"path": f.declared, "sha256": f.sha256, "rows": f.rows}, f.role
    for name, sr in local.systems.items():
        for key_, entry in sr.means.items():
            got = summary["systems"][name][key_]["mean"]
            assert math.isclose(got, entry["mean"], rel_tol=0, abs_tol=1e-12), (name, key_)
            assert summary["systems"][name][key_]["n_evaluated"] == entry["n_evaluated"]


@pytest.mark.parametrize("fmt,int_ids", [("trec", False), ("csv", True), ("parquet", False), ("parquet", True)])
def test_judgments_in_spark_match_the_local_engine(spark, tmp_path, fmt, int_ids):
    qrels, runs, query_set, weights = random_data(11 + len(fmt) + int_ids, int_ids)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, fmt)
    spec = make_spec(data, tmp_path / "in")
    local = ndcg_mlflow.evaluate(spec)
    check_same(local, grouped(spark, spec, tmp_path))


def test_judgments_as_a_spark_dataframe_uniform_weights(spark, tmp_path):
    qrels, runs, query_set, weights = random_data(5)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, "csv")
    spec = make_spec(data, tmp_path / "in", query_set=False, weights=False, gain="linear")
    local = ndcg_mlflow.evaluate(spec)
    result = grouped(spark, spec, tmp_path, qrels=spark.createDataFrame(qrels))
    check_same(local, result)
    assert result.summary["files"]["qrels"]["sha256"].startswith("xxhash64-sum:")


def test_evaluate_switches_to_the_grouped_path_counting_in_spark(spark, tmp_path):
    qrels, runs, query_set, weights = random_data(9)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, "trec")
    spec = make_spec(data, tmp_path / "in")
    local = ndcg_mlflow.evaluate(spec)
    engine = Spark(spark, driver_judgments=0, driver_queries=3, per_query_path=tmp_path / "pq", groups=4)
    result = ndcg_mlflow.evaluate(spec, engine=engine)
    assert result.per_query_path is not None and not result.systems
    check_same(local, result)
    # within the driver limit of queries, the judgments are read on the driver, as before
    within = ndcg_mlflow.evaluate(spec, engine=Spark(spark, driver_judgments=0, per_query_path=tmp_path / "pq2"))
    assert within.engine_info["judgments"] == "driver"


# --------------------------------------------------------------------------- refusals, as the local engine's


def refusal(
    spark, tmp_path, qrels: pd.DataFrame, fmt="parquet", spec_changes=None, query_set=None, weights=None, as_frame=False
):
    """The local engine's error and the Spark engine's (judgments in Spark) for the same input."""
    _, runs, qs, ws = random_data(3)
    qs = query_set if query_set is not None else sorted({str(q) for q in qrels["query_id"]})
    ws = weights if weights is not None else {q: 1.0 for q in sorted({str(q) for q in qrels["query_id"]})}
    data = write_inputs(tmp_path / "in", qrels, runs, qs, ws, fmt)
    spec = make_spec(data, tmp_path / "in", **(spec_changes or {}))
    with pytest.raises(Exception) as local:
        ndcg_mlflow.evaluate(spec)
    with pytest.raises(Exception) as mine:
        grouped(spark, spec, tmp_path, **({"qrels": spark.createDataFrame(qrels)} if as_frame else {}))
    assert type(mine.value) is type(local.value), (local.value, mine.value)
    return str(local.value), str(mine.value)


def base_qrels() -> pd.DataFrame:
    return pd.DataFrame(
        {"query_id": ["q1", "q1", "q2", "q3"], "doc_id": ["d1", "d2", "d1", "d5"], "grade": [1.0, 2.0, 0.0, 3.0]}
    )


def test_refuses_a_document_judged_twice_with_different_grades(spark, tmp_path):
    q = pd.concat([base_qrels(), pd.DataFrame({"query_id": ["q2"], "doc_id": ["d1"], "grade": [2.0]})])
    local, mine = refusal(spark, tmp_path, q, "trec")
    assert "judged twice with different grades" in local
    assert "judged twice with different grades" in mine and "'d1'" in mine and "'q2'" in mine and "qrels.txt" in mine


def test_refuses_a_non_finite_grade(spark, tmp_path):
    q = base_qrels().astype({"grade": object})
    q.loc[2, "grade"] = "1e999"  # beyond the range of a double
    local, mine = refusal(spark, tmp_path, q, "trec")
    assert "qrels.txt:3: grade must be a finite number" in local
    assert mine == local  # the local reader's message, read in a Spark task


def test_refuses_an_empty_id(spark, tmp_path):
    q = base_qrels()
    q.loc[3, "doc_id"] = ""
    local, mine = refusal(spark, tmp_path, q, "csv")
    assert "qrels.csv:5: doc_id is empty" in local
    assert mine == local  # the local reader's message, read in a Spark task


def test_refuses_a_grade_missing_from_the_gain_table(spark, tmp_path):
    local, mine = refusal(spark, tmp_path, base_qrels(), spec_changes={"gain": {0: 0, 1: 1, 2: 3}})
    assert "is not in the gain table" in local
    assert "grade 3 " in mine and "not in the gain table" in mine and "'q3'" in mine and "'d5'" in mine


def test_refuses_an_exponential_gain_that_overflows(spark, tmp_path):
    q = base_qrels()
    q.loc[1, "grade"] = 1024.0
    local, mine = refusal(spark, tmp_path, q, as_frame=True)
    assert "overflows a float" in local
    assert "2^1024 - 1 overflows a float" in mine and "'q1'" in mine and "'d2'" in mine and mine.startswith("qrels")


def test_refuses_gain_sums_that_overflow(spark, tmp_path):
    q = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d1"], "grade": [1e308, 1e308, 1.0]})
    local, mine = refusal(spark, tmp_path, q, spec_changes={"gain": "linear"})
    assert "sum to more than the largest float" in local
    assert "gains of query 'q1'" in mine and "sum to more than the largest float" in mine


def test_refuses_a_query_of_the_set_without_judgments(spark, tmp_path, small_files):
    local, mine = refusal(spark, tmp_path, base_qrels(), query_set=["q1", "q2", "q9"])
    assert "have no judgments" in local
    assert "1 queries of the declared set have no judgments" in mine and "'q9'" in mine and "set.txt" in mine


def test_refuses_a_missing_weight(spark, tmp_path, small_files):
    local, mine = refusal(spark, tmp_path, base_qrels(), weights={"q1": 1.0, "q2": 2.0})
    assert "have no weight" in local
    assert "1 evaluated queries have no weight: 'q3'" in mine and "weights.tsv" in mine


def test_refuses_a_bad_weight(spark, tmp_path, small_files):
    local, mine = refusal(spark, tmp_path, base_qrels(), weights={"q1": 1.0, "q2": -2.0, "q3": 1.0})
    assert "must be a finite number > 0" in local
    assert "weight of query 'q2' must be a finite number > 0" in mine and "weights.tsv" in mine


def test_within_the_judgment_limit_nothing_changes(spark, tmp_path):
    qrels, runs, query_set, weights = random_data(2)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, "trec")
    spec = make_spec(data, tmp_path / "in")
    result = evaluate_grouped(spec, per_query_path=tmp_path / "pq", spark=spark, groups=4)
    assert result.summary["engine_info"]["judgments"] == "driver"
    with pytest.raises(DataError):
        evaluate_grouped(
            spec,
            per_query_path=tmp_path / "pq3",
            spark=spark,
            groups=4,
            qrels=spark.createDataFrame(qrels.assign(grade=float("nan"))),
            driver_judgments=0,
        )


def test_refuses_a_query_listed_twice_in_the_set(spark, tmp_path, small_files):
    local, mine = refusal(spark, tmp_path, base_qrels(), query_set=["q1", "q2", "q1"])
    assert "listed twice" in local
    assert "query 'q1' is listed twice" in mine and "set.txt" in mine


def test_refuses_a_weight_that_is_not_a_number(spark, tmp_path, small_files):
    local, mine = refusal(spark, tmp_path, base_qrels(), weights={"q1": 1.0, "q2": "0x10", "q3": 1.0})
    assert "must be a number" in local
    assert "weight of query 'q2' must be a number, got '0x10'" in mine and "weights.tsv" in mine


def test_query_set_and_weights_read_by_spark_match_the_local_engine(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(judgments_in_spark, "DRIVER_SMALL_FILE_BYTES", -1)
    qrels, runs, query_set, weights = random_data(21)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, "parquet")
    spec = make_spec(data, tmp_path / "in")
    local = ndcg_mlflow.evaluate(spec)
    check_same(local, grouped(spark, spec, tmp_path))


def test_an_in_memory_table_of_another_library_stays_on_the_driver(spark, tmp_path):
    qrels, runs, query_set, weights = random_data(4)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, "trec")
    spec = make_spec(data, tmp_path / "in")
    result = grouped(spark, spec, tmp_path, qrels=qrels)
    assert result.summary["engine_info"]["judgments"] == "driver"


def test_run_with_driver_judgments_records_them_in_spark(spark, tmp_path):
    import json

    import yaml

    from ndcg_mlflow.cli import main

    qrels, runs, query_set, weights = random_data(8)
    data = write_inputs(tmp_path / "in", qrels, runs, query_set, weights, "trec")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(make_spec(data, tmp_path / "in")), encoding="utf-8")
    local = ndcg_mlflow.evaluate(str(spec_path))
    out = tmp_path / "out"
    code = main(
        [
            "run",
            str(spec_path),
            "--engine",
            "spark",
            "--driver-queries",
            "3",
            "--driver-judgments",
            "0",
            "--no-mlflow",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code in (0, 4)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["engine_info"]["judgments"] == "spark"
    for name, sr in local.systems.items():
        for key, entry in sr.means.items():
            assert math.isclose(summary["systems"][name][key]["mean"], entry["mean"], rel_tol=0, abs_tol=1e-12)
