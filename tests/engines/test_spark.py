"""The Spark engine gives the local engine's numbers, exactly, and refuses what the local engine refuses.

The test run's one SparkSession (``spark`` of tests/conftest.py: ``local[2]``, 1 GB driver, 4 shuffle
partitions, no UI); small random data.
Skipped when pyspark or Java is missing.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from helpers import java_problem

import ndcg_mlflow
from ndcg_mlflow import Spark, timings
from ndcg_mlflow.errors import DataError, EvaluationError, SpecError

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")


if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)


# --------------------------------------------------------------------------- random data


def make_data(seed: int, *, int_ids: bool = False, n_queries: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Judgments and a run with everything the rules act on: queries with no relevant judgment (empty ideals),
    judged queries the run leaves out (missing), run queries nobody judged, unjudged documents, tied scores."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(n_queries):
        qid = q * 7 + 3 if int_ids else f"q{q}" + ("é" if q % 5 == 0 else "")
        docs = [f"d{j}" for j in rng.choice(60, size=int(rng.integers(1, 25)), replace=False)]
        judged = docs[: int(rng.integers(0, len(docs) + 1))] + [f"j{j}" for j in range(int(rng.integers(0, 4)))]
        empty = rng.random() < 0.15
        for d in judged:
            qrels.append((qid, d, 0 if empty else int(rng.integers(-1, 4))))
        if not judged:
            qrels.append((qid, "only", 0 if empty else 2))
        if rng.random() < 0.15:  # a judged query the run leaves out
            continue
        scores = rng.integers(0, 6, size=len(docs)) / 2.0  # many ties
        for rank, i in enumerate(rng.permutation(len(docs))):
            run.append((qid, docs[i], float(scores[i]), rank + 1))
    for q in range(3):  # queries nobody judged
        qid = 10_000 + q if int_ids else f"unjudged-{q}"
        run.append((qid, "dx", 1.0, 1))
    qf = pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"])
    rf = pd.DataFrame(run, columns=["query_id", "doc_id", "score", "rank"])
    return qf, rf


def spec_of(
    *,
    ties: str,
    cutoffs=(1, 3, 10, "all"),
    ideal="judged_catalog",
    unjudged="zero",
    missing_queries="zero",
    empty_ideal="exclude",
    gain="exponential",
    queries=None,
) -> dict:
    return {
        "spec_version": 1,
        "name": "spark-equality",
        "metric": {
            "gain": gain,
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": ties,
            "ideal": ideal,
            "empty_ideal": empty_ideal,
            "unjudged": unjudged,
            "missing_queries": missing_queries,
        },
        "queries": queries or {"weights": "uniform"},
    }


def assert_same(local, remote) -> None:
    """Every per-query number, mean, count and top list of the two results is the same, exactly."""
    pd.testing.assert_frame_equal(local.per_query, remote.per_query, check_exact=True)
    assert list(local.query_ids) == list(remote.query_ids)
    np.testing.assert_array_equal(local.weights, remote.weights)
    for name, sr in local.systems.items():
        other = remote.systems[name]
        assert sr.means.keys() == other.means.keys()
        for key, m in sr.means.items():
            for field, value in m.items():
                got = other.means[key][field]
                assert (value == got) or (np.isnan(value) and np.isnan(got)), (name, key, field, value, got)
        a, b = sr.top, other.top
        np.testing.assert_array_equal(a.query, b.query)
        np.testing.assert_array_equal(a.position, b.position)
        assert a.doc == b.doc
        np.testing.assert_array_equal(a.grade, b.grade)
    assert local.notes == remote.notes and local.all_notes == remote.all_notes
    assert remote.engine == "spark" and local.engine == "local"


def both(spark, spec, qrels, systems, *, buckets, base_dir=None):
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems, base_dir=base_dir)
    frames = {name: spark.createDataFrame(df) for name, df in systems.items()}
    remote = ndcg_mlflow.evaluate(
        spec,
        engine=Spark(spark, buckets=buckets),
        qrels=spark.createDataFrame(qrels),
        systems=frames,
        base_dir=base_dir,
    )
    return local, remote


# --------------------------------------------------------------------------- the same numbers

CASES = [
    # (ties, buckets, other rules)
    ("displayed_order", 1, {}),
    ("id_ascending", 3, {"unjudged": "condense"}),
    ("id_descending", 8, {"ideal": "candidates", "missing_queries": "exclude"}),
    ("average", 3, {"empty_ideal": "zero", "gain": "linear"}),
    ("average", 8, {"unjudged": "condense", "ideal": "candidates"}),
    ("displayed_order", 3, {"missing_queries": "exclude", "empty_ideal": "one"}),
    ("id_descending", 1, {"unjudged": "condense", "cutoffs": (5,)}),
    ("id_ascending", 8, {"gain": {-1: 0, 0: 0, 1: 1, 2: 3, 3: 7.5}}),
]


@pytest.mark.parametrize("ties, buckets, rules", CASES, ids=[f"{t}-{b}-{i}" for i, (t, b, _) in enumerate(CASES)])
def test_every_per_query_number_equals_the_local_engine(spark, ties, buckets, rules):
    i = CASES.index((ties, buckets, rules))
    qrels, run = make_data(seed=100 + i, int_ids=i % 2 == 1)
    second = run.sample(frac=0.7, random_state=i).reset_index(drop=True)  # another system: more missing queries
    second["score"] = second["score"][::-1].to_numpy()
    spec = spec_of(ties=ties, **rules)
    local, remote = both(spark, spec, qrels, {"a": run, "b": second}, buckets=buckets)
    statuses = set(local.per_query["status"])
    assert len(statuses) >= 2, statuses  # the data reach more than one rule
    assert_same(local, remote)


def test_buckets_keyed_by_their_index_give_the_same_numbers(spark, monkeypatch):
    """Beyond KEYED_BUCKETS buckets (here lowered to 4) a bucket's index is its key: Spark may put two buckets in
    one partition and leave another empty, and every number is still the local engine's."""
    from ndcg_mlflow.engines.spark import partitions

    monkeypatch.setattr(partitions, "KEYED_BUCKETS", 4)
    qrels, run = make_data(seed=41)
    second = run.sample(frac=0.6, random_state=3).reset_index(drop=True)
    spec = spec_of(ties="id_descending", unjudged="condense")
    local, remote = both(spark, spec, qrels, {"a": run, "b": second}, buckets=7)
    assert remote.engine_info["systems"]["a"]["buckets"] == 7
    assert_same(local, remote)


def test_weights_and_query_sets(spark, tmp_path):
    qrels, run = make_data(seed=7)
    ids = sorted(set(qrels["query_id"]))
    rng = np.random.default_rng(7)
    chosen = [q for q in ids if rng.random() < 0.6]
    (tmp_path / "set.txt").write_text("\n".join(chosen) + "\n", encoding="utf-8")
    (tmp_path / "w.txt").write_text("".join(f"{q} {rng.integers(1, 9) / 4}\n" for q in ids), encoding="utf-8")
    spec = spec_of(ties="average", queries={"weights": "w.txt", "set": "set.txt"})
    spec["uncertainty"] = {"resamples": 200, "confidence": 0.9, "method": "percentile", "seed": 7}
    spec["comparison"] = {
        "baseline": "a",
        "test": "both",
        "correction": "holm",
        "wins_losses": 5,
        "tie_tolerance": 1e-9,
    }
    other = run.copy()
    other["score"] = np.random.default_rng(8).permutation(other["score"].to_numpy())
    local, remote = both(spark, spec, qrels, {"a": run, "b": other}, buckets=3, base_dir=tmp_path)
    assert len(local.query_ids) == len(chosen) < len(ids)
    assert len(set(local.weights)) > 1
    assert_same(local, remote)
    assert local.summary["systems"] == remote.summary["systems"]  # the intervals too
    pd.testing.assert_frame_equal(local.comparisons, remote.comparisons, check_exact=True)
    assert local.wins_losses_json == remote.wins_losses_json


def test_the_bucket_count_chosen_from_the_size(spark):
    qrels, run = make_data(seed=11, n_queries=15)
    spec = spec_of(ties="id_descending")
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": run})
    remote = ndcg_mlflow.evaluate(
        spec,
        engine=Spark(spark),
        qrels=qrels,  # pandas judgments too
        systems={"a": spark.createDataFrame(run)},
    )
    assert_same(local, remote)
    assert remote.summary["engine"] == "spark" and local.summary["engine"] == "local"
    assert remote.files[1].sha256.startswith("xxhash64-sum:")


def test_parquet_and_trec_files_read_by_spark(spark, tmp_path):
    qrels, run = make_data(seed=5)
    lines = [f"{q} 0 {d} {g}" for q, d, g in qrels.itertuples(index=False)]
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = tmp_path / "run.parquet"
    folder.mkdir()
    half = len(run) // 2
    run.iloc[:half].to_parquet(folder / "part-0.parquet")
    run.iloc[half:].to_parquet(folder / "part-1.parquet")
    trec = [f"{q}\tQ0 {d}  {r} {s!r} tag" for q, d, s, r in run.itertuples(index=False)]
    (tmp_path / "run.trec").write_text("\n".join(trec) + "\n\n", encoding="utf-8")
    run.sample(frac=1.0, random_state=1).to_csv(tmp_path / "run.csv", index=False)
    spec = spec_of(ties="displayed_order")
    plain = tmp_path / "runs"  # a folder without the .parquet suffix; Spark reads its .parquet files only
    shutil.copytree(folder, plain)
    (plain / "_SUCCESS").write_text("", encoding="utf-8")
    (plain / "notes.txt").write_text("not data\n", encoding="utf-8")
    spec["data"] = {"qrels": "qrels.txt", "systems": {"p": "run.parquet", "t": "run.trec", "c": "run.csv", "f": "runs"}}
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=3), base_dir=tmp_path)
    assert_same(local, remote)
    assert [f.sha256 for f in local.files] == [f.sha256 for f in remote.files]


def _reversed_within_queries(run: pd.DataFrame) -> pd.DataFrame:
    """The same rows, each query's rows in the reverse order (the queries in their order)."""
    return (
        run.assign(_i=np.arange(len(run)))
        .sort_values(["query_id", "_i"], ascending=[True, False], kind="stable")
        .drop(columns="_i")
        .reset_index(drop=True)
    )


def test_displayed_order_without_a_rank_column_is_the_rows_order(spark, tmp_path):
    """A run without a rank column under ``ties: displayed_order``: tied rows keep the order of the files' rows
    (Parquet files in the folder's order, also when Spark cuts the files into many blocks and packs several into
    one task; CSV and JSONL lines, as the local reader that reads them in a task gives them), as the local engine
    reads them; and an in-memory table keeps its rows' order. The data decide: the same rows in another order give
    other numbers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    qrels, run = make_data(seed=41)
    run = run.drop(columns="rank")
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    folder = tmp_path / "run.parquet"
    folder.mkdir()
    cuts = np.linspace(0, len(run), 11).astype(int) + 1  # queries' rows split across files
    cuts[0], cuts[-1] = 0, len(run)
    for i in reversed(range(10)):  # written last to first: the folder's order is the names'
        pq.write_table(
            pa.Table.from_pandas(run.iloc[cuts[i] : cuts[i + 1]], preserve_index=False),
            folder / f"part-{i}.parquet",
            row_group_size=16,
        )
    run.to_csv(tmp_path / "run.csv", index=False)
    _reversed_within_queries(run).to_json(tmp_path / "run.jsonl", orient="records", lines=True)
    spec = spec_of(ties="displayed_order")
    spec["data"] = {"qrels": "qrels.csv", "systems": {"p": "run.parquet", "c": "run.csv", "j": "run.jsonl"}}
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    pqt = local.per_query
    assert not np.array_equal(
        pqt[pqt.system == "c"]["ndcg"].to_numpy(), pqt[pqt.system == "j"]["ndcg"].to_numpy(), equal_nan=True
    )  # the order decides some queries' numbers
    # blocks of at most 8 kB: the CSV and JSONL files are cut into several, the small Parquet files packed
    conf = {"spark.sql.files.maxPartitionBytes": "8000", "spark.sql.files.openCostInBytes": "0"}
    before = {k: spark.conf.get(k) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=3, prefilter=False), base_dir=tmp_path)
        filtered = ndcg_mlflow.evaluate(
            {**spec, "metric": {**spec["metric"], "cutoffs": [1, 3]}}, engine=Spark(spark, buckets=2), base_dir=tmp_path
        )
        # the key itself: the rows sorted by it are the files' rows in their order, every key distinct
        from pyspark.sql import functions as F

        from ndcg_mlflow.engines.spark.runs import in_file_order
        from ndcg_mlflow.engines.spark.sources import local_reader_frame, read_run_file, source_files
        from ndcg_mlflow.spec import load_spec

        loaded = load_spec(spec, base_dir=tmp_path)
        expected = {"p": run, "c": run, "j": _reversed_within_queries(run)}
        for name, source in loaded.systems:
            if name != "p":  # text files: read by the local reader in a task, each row's key its row in the file
                keyed = local_reader_frame(spark, source, "run", False)[0].toPandas()
                assert keyed["_order"].is_unique
                got = keyed.sort_values("_order")[["query_id", "doc_id"]].reset_index(drop=True)
                pd.testing.assert_frame_equal(
                    got, expected[name][["query_id", "doc_id"]].astype(str).reset_index(drop=True)
                )
                continue
            df = read_run_file(spark, source)
            cols = [
                F.col(c).cast("string" if c.endswith("_id") else "double").alias(c)
                for c in ("query_id", "doc_id", "score")
            ]
            keyed = in_file_order(spark, df, cols, source_files(source), name).toPandas()
            per_task = (
                df.select(
                    F.spark_partition_id().alias("task"),
                    F.col("_metadata.file_path").alias("f"),
                    F.col("_metadata.file_block_start").alias("b"),
                )
                .distinct()
                .groupBy("task")
                .count()
            )
            counts = [r["count"] for r in per_task.collect()]
            sizes = sorted(p.stat().st_size for p in tmp_path.rglob("run*") if p.is_file())
            assert sum(counts) > 1, (counts, sizes)  # several blocks
            assert max(counts) > 1, counts  # some read by one task together
            assert keyed["_order"].is_unique
            got = keyed.sort_values("_order")[["query_id", "doc_id"]].reset_index(drop=True)
            pd.testing.assert_frame_equal(
                got, expected[name][["query_id", "doc_id"]].astype(str).reset_index(drop=True)
            )
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    assert_same(local, remote)
    assert filtered.engine_info["prefilter"]["applied"]
    assert_same(
        ndcg_mlflow.evaluate({**spec, "metric": {**spec["metric"], "cutoffs": [1, 3]}}, base_dir=tmp_path), filtered
    )
    # in memory: the rows' order of the pandas frame
    flipped = _reversed_within_queries(run)
    local = ndcg_mlflow.evaluate(spec_of(ties="displayed_order"), qrels=qrels, systems={"a": run, "b": flipped})
    remote = ndcg_mlflow.evaluate(
        spec_of(ties="displayed_order"), engine=Spark(spark, buckets=3), qrels=qrels, systems={"a": run, "b": flipped}
    )
    assert_same(local, remote)


# --------------------------------------------------------------------------- errors


def _spark_error(spark, run, exc=DataError, **rules):
    """The error of a run (a pandas frame, or rows of query_id, doc_id, score) on the Spark engine."""
    qrels = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "a"], "grade": [1, 2, 0]})
    spec = spec_of(ties=rules.pop("ties", "average"), **rules)
    frame = (
        spark.createDataFrame(run)
        if isinstance(run, pd.DataFrame)
        else spark.createDataFrame(run, "query_id string, doc_id string, score double")
    )
    with pytest.raises(exc) as info:
        ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2), qrels=qrels, systems={"v3": frame})
    return str(info.value)


def test_a_document_listed_twice_is_refused(spark):
    run = pd.DataFrame(
        {"query_id": ["q1", "q1", "q2", "q1"], "doc_id": ["a", "b", "a", "a"], "score": [1.0, 2.0, 3.0, 0.5]}
    )
    msg = _spark_error(spark, run)
    assert "systems['v3']" in msg and "document 'a' is listed twice for query 'q1'" in msg


def test_non_finite_scores_nulls_and_empty_ids_are_refused(spark):
    for bad in (float("nan"), float("inf")):
        msg = _spark_error(spark, [("q1", "a", 1.0), ("q1", "b", bad), ("q2", "a", 3.0)])
        assert f"score must be a finite number, got {bad}" in msg and "'q1', document 'b'" in msg
    msg = _spark_error(spark, [("q1", "a", 1.0), ("q1", "b", None), ("q2", "a", 3.0)])
    assert "score is null in 1 rows" in msg and "document 'b'" in msg
    run = pd.DataFrame({"query_id": ["q1", None, "q2"], "doc_id": ["a", "b", "a"], "score": [1.0, 2.0, 3.0]})
    msg = _spark_error(spark, run)
    assert "query_id is null in 1 rows" in msg and "document 'b'" in msg
    run = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "", "a"], "score": [1.0, 2.0, 3.0]})
    assert "doc_id is empty in 1 rows" in _spark_error(spark, run)


def test_ranks_that_are_null_or_not_integers_are_refused(spark):
    qrels = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["a", "b"], "grade": [1, 2]})
    for rank, expected in ((None, "rank is null in 1 rows"), (1.5, "rank must be an integer")):
        frame = spark.createDataFrame(
            [("q1", "a", 1.0, 1.0), ("q1", "b", 2.0, rank)], "query_id string, doc_id string, score double, rank double"
        )
        with pytest.raises(DataError, match=expected) as info:
            ndcg_mlflow.evaluate(spec_of(ties="average"), engine=Spark(spark), qrels=qrels, systems={"v3": frame})
        assert "document 'b'" in str(info.value)


def test_a_run_of_another_collection_and_the_error_rules(spark):
    other = pd.DataFrame({"query_id": ["x1", "x2"], "doc_id": ["a", "b"], "score": [1.0, 2.0]})
    msg = _spark_error(spark, other, EvaluationError)
    assert "returns none of the 2 evaluated queries" in msg and "'x1'" in msg
    run = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["a", "zz"], "score": [1.0, 2.0]})
    msg = _spark_error(spark, run, EvaluationError, unjudged="error")
    assert "document 'zz' returned for query 'q1' has no judgment" in msg
    msg = _spark_error(spark, run, EvaluationError, missing_queries="error")
    assert "returns nothing for 1 evaluated queries" in msg and "q2" in msg


def test_unsupported_requests_are_refused_before_any_work(spark):
    run = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "score": [1.0]})
    msg = _spark_error(spark, run, SpecError, ties="displayed_order")
    assert "no rank column" in msg
    with pytest.raises(SpecError, match="'local' or 'spark'"):
        ndcg_mlflow.evaluate(
            spec_of(ties="average"), engine="dask", qrels={"q": {"a": 1}}, systems={"s": {"q": {"a": 1.0}}}
        )


CONNECT_SCRIPT = """
import os, shutil, sys, tempfile
from pyspark.sql import SparkSession
spark = (SparkSession.builder.remote("local[2]").config("spark.driver.memory", "1g")
         .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false").getOrCreate())
# the executors import the package under test: shipped to the server as a Python artifact
folder = tempfile.mkdtemp()
spark.addArtifacts(shutil.make_archive(os.path.join(folder, "pkg"), "zip", sys.argv[1], "ndcg_mlflow"), pyfile=True)
import ndcg_mlflow
# this module by its folder: a dependency may install a package named "tests" (ppi-python does)
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "engines"))
from test_spark import assert_same, make_data, spec_of
qrels, run = make_data(seed=21, int_ids=True)
spec = spec_of(ties="id_descending", unjudged="condense", missing_queries="exclude")
local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": run})
remote = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark, buckets=3), qrels=spark.createDataFrame(qrels),
                              systems={"a": spark.createDataFrame(run)})
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
assert_same(local, remote)
spec = spec_of(ties="id_ascending", cutoffs=(3, 10), unjudged="condense")  # the top-K pre-filter
spec["report"] = {"sensitivity": True}  # and the alternatives computed in the buckets
local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": run})
remote = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark, buckets=3, prefilter=True),
                              qrels=spark.createDataFrame(qrels), systems={"a": spark.createDataFrame(run)})
assert_same(local, remote)
assert remote.engine_info["prefilter"]["applied"]
import pandas as pd
pd.testing.assert_frame_equal(local.sensitivity, remote.sensitivity, check_exact=True)
# files Spark reads: a Parquet folder without a rank column (its rows' order: the file-order key), companions under
# ties: average (tied rows in that order), judgments read and checked in Spark on the grouped path
import numpy as np
from pathlib import Path
qrels, run = make_data(seed=22)
run = run.drop(columns="rank")
Path("run.parquet").mkdir()
for i, part in enumerate(np.array_split(np.arange(len(run)), 3)):
    run.iloc[part].to_parquet(f"run.parquet/part-{i}.parquet", index=False)
qrels.to_csv("qrels.csv", index=False)
Path("groups.tsv").write_text("doc_id\\tgroup\\n" + "".join(f"d{j}\\tG{j % 4}\\n" for j in range(0, 60, 2)))
for ties in ("displayed_order", "average"):
    spec = spec_of(ties=ties, cutoffs=(1, 3, 10))
    spec["data"] = {"qrels": "qrels.csv", "systems": {"p": "run.parquet"}}
    spec["companions"] = {"duplicates": "groups.tsv", "catalog": 500}
    local = ndcg_mlflow.evaluate(spec, base_dir=".")
    remote = ndcg_mlflow.evaluate(spec, engine=ndcg_mlflow.Spark(spark, buckets=3), base_dir=".")
    assert_same(local, remote)
    np.testing.assert_array_equal(local.systems["p"].duplicate_rate, remote.systems["p"].duplicate_rate)
spec = spec_of(ties="average", cutoffs=(3, 10))
spec["data"] = {"qrels": "qrels.csv", "systems": {"p": "run.parquet"}}
from ndcg_mlflow.engines.spark import evaluate_grouped
local = ndcg_mlflow.evaluate(spec, base_dir=".")
grouped = evaluate_grouped(spec, per_query_path="per_query", spark=spark, base_dir=".", driver_judgments=0)
assert grouped.summary["engine_info"]["judgments"] == "spark"
table = pd.read_parquet("per_query").astype({"cutoff": str}).sort_values(["query_id", "cutoff"])
mine = local.per_query.astype({"cutoff": str}).sort_values(["query_id", "cutoff"])
assert len(table) == len(mine)
np.testing.assert_array_equal(table["ndcg"].to_numpy(dtype=float), mine["ndcg"].to_numpy(dtype=float))
print("same numbers on Spark Connect")
"""


def test_the_same_numbers_through_spark_connect(tmp_path):
    """Spark Connect (``remote("local[2]")``, the server jars ship inside pyspark 4), in its own process."""
    import os
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    # the script imports this module, which imports tests/helpers.py
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", CONNECT_SCRIPT, str(repo)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    if (
        out.returncode != 0
        and "SparkConnect" in out.stderr
        and "same numbers" not in out.stdout
        and ("ClassNotFound" in out.stderr or "cannot start" in out.stderr.lower())
    ):
        pytest.skip(f"Spark Connect cannot start here: {out.stderr.strip()[-300:]}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "same numbers on Spark Connect" in out.stdout


def test_the_cli_runs_the_demo_on_spark_with_the_local_results(spark, tmp_path):
    """``run --engine spark`` (on the session already started) writes the local engine's per-query table,
    sensitivity table (``report.sensitivity``) and summary, companion measures included; only the engine
    differs."""
    import json
    from pathlib import Path

    import yaml

    from ndcg_mlflow.cli import main

    configs = Path(__file__).resolve().parents[2] / "configs"
    spec = yaml.safe_load((configs / "demo.yaml").read_text(encoding="utf-8"))
    assert spec["report"]["sensitivity"] is True  # the sensitivity table is computed by both engines
    assert spec["companions"]["duplicates"] and spec["companions"]["catalog"]  # and the companion measures
    spec["companions"]["duplicates"] = str(configs / spec["companions"]["duplicates"])
    spec["uncertainty"]["resamples"] = 2000
    data = spec["data"]
    data["qrels"] = str(configs / data["qrels"])
    data["systems"] = {name: str(configs / path) for name, path in data["systems"].items()}
    demo = tmp_path / "demo.yaml"
    demo.write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert main(["run", str(demo), "--no-mlflow", "--quiet", "--out", str(tmp_path / "local")]) == 0
    assert (
        main(["run", str(demo), "--engine", "spark", "--no-mlflow", "--quiet", "--out", str(tmp_path / "spark")]) == 0
    )
    a, b = tmp_path / "local", tmp_path / "spark"
    assert (a / "per_query.csv").read_bytes() == (b / "per_query.csv").read_bytes()
    assert (a / "sensitivity.csv").read_bytes() == (b / "sensitivity.csv").read_bytes()
    assert len(pd.read_csv(b / "sensitivity.csv")) > 50
    sa, sb = json.loads((a / "summary.json").read_text()), json.loads((b / "summary.json").read_text())
    assert (sa.pop("engine"), sb.pop("engine")) == ("local", "spark")
    assert sa.pop("engine_info") == {} and sb.pop("engine_info")["prefilter"]["applied"] is False  # cutoff 'all'
    assert sa == sb
    assert pd.read_csv(b / "per_query.csv")["duplicate_rate"].notna().any()  # the companions were computed
    assert "companions.duplicates" in sb["files"]
    assert all(
        "duplicate_rate" in m and "catalog_coverage" in m for means in sb["systems"].values() for m in means.values()
    )
    from ndcg_mlflow.tracking.names import parent_tags

    assert parent_tags({**sb, "engine": "spark"}, b, "key")["ndcg_mlflow.engine"] == "spark"


def test_spark_remote_needs_the_spark_engine(tmp_path, capsys):
    from pathlib import Path

    from ndcg_mlflow.cli import main

    demo = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    code = main(
        ["run", str(demo), "--no-mlflow", "--spark-remote", "sc://localhost:15002", "--out", str(tmp_path / "o")]
    )
    assert code != 0 and "--engine spark" in capsys.readouterr().err


def test_judgments_beyond_the_driver_limit_are_refused(spark, monkeypatch):
    from ndcg_mlflow.engines.spark import judgments

    monkeypatch.setattr(judgments, "MAX_JUDGMENTS", 2)
    qrels = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "a"], "grade": [1, 2, 0]})
    with pytest.raises(DataError, match="more than 2 judgments"):
        ndcg_mlflow.evaluate(
            spec_of(ties="average"),
            engine=Spark(spark),
            qrels=spark.createDataFrame(qrels),
            systems={"s": {"q1": {"a": 1.0}}},
        )


def test_a_malformed_trec_line_is_refused_naming_it(spark, tmp_path):
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq1 0 b 0\n", encoding="utf-8")
    (tmp_path / "run.trec").write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 x0.25 t\n", encoding="utf-8")
    spec = spec_of(ties="average")
    spec["data"] = {"qrels": "qrels.txt", "systems": {"t": "run.trec"}}
    with pytest.raises(DataError) as info:
        ndcg_mlflow.evaluate(spec, engine=Spark(spark), base_dir=tmp_path)
    assert str(info.value) == f"{tmp_path / 'run.trec'}:2: score must be a number, got 'x0.25'."


def test_importing_the_package_and_the_engine_imports_neither_pyspark_nor_mlflow():
    import sys

    code = (
        "import sys, ndcg_mlflow, ndcg_mlflow.engines.spark; "
        "print(sorted(m for m in ('pyspark', 'mlflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the top-K pre-filter


def long_lists(seed: int, *, n_queries: int = 30, gain_ties: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs of 20-120 documents a query, few judged, scores with many ties (ties straddle every cutoff); a
    query's rows are together (as in a TREC run), in random order."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(n_queries):
        qid = f"q{q}"
        n = int(rng.integers(20, 120))
        docs = [f"d{j}" for j in rng.choice(400, size=n, replace=False)]
        scores = rng.integers(0, 8, size=n) / 4.0
        for d, s in zip(docs, scores):
            run.append((qid, d, float(s)))
        judged = [d for d in docs if rng.random() < 0.25] + [f"x{j}" for j in range(int(rng.integers(0, 3)))]
        for d in judged or ["only"]:
            qrels.append((qid, d, int(rng.integers(-1, 4)) if not gain_ties else 1))
    qf = pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"])
    rf = pd.DataFrame(run, columns=["query_id", "doc_id", "score"]).sample(frac=1.0, random_state=seed)
    return qf, rf.sort_values("query_id", kind="stable").reset_index(drop=True)  # a query's rows together


PREFILTER_CASES = [
    ("average", {"cutoffs": (5, 10)}),
    ("id_ascending", {"cutoffs": (3,), "unjudged": "condense"}),
    ("id_descending", {"cutoffs": (1, 10), "ideal": "candidates"}),
    ("average", {"cutoffs": (4,), "unjudged": "condense", "ideal": "candidates"}),
    ("id_ascending", {"cutoffs": (2, 20), "gain": {-1: -2.5, 0: 0, 1: 1, 2: 3, 3: 7}}),  # negative gains
    ("average", {"cutoffs": (5,), "gain": {-1: -1, 0: 0, 1: 0, 2: 3, 3: 7}, "ideal": "candidates"}),
]


@pytest.mark.parametrize("ties, rules", PREFILTER_CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(PREFILTER_CASES)])
def test_the_prefilter_gives_the_local_numbers_and_shuffles_fewer_rows(spark, monkeypatch, ties, rules):
    from ndcg_mlflow.engines.spark import prefilter

    i = PREFILTER_CASES.index((ties, rules))
    qrels, run = long_lists(seed=300 + i, gain_ties=i == 2)
    spec = spec_of(ties=ties, **rules)
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": run})
    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 300)  # several chunks per partition
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        frame = spark.createDataFrame(run)  # 2 partitions of 100-row batches, filtered 300 rows at a time
        remote = ndcg_mlflow.evaluate(
            spec, engine=Spark(spark, buckets=3, prefilter=True), qrels=qrels, systems={"a": frame}
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert_same(local, remote)
    info = remote.engine_info
    depth = max([k for k in spec["metric"]["cutoffs"]] + [10])
    assert info["prefilter"]["applied"] and info["prefilter"]["depth"] == depth
    seen = info["systems"]["a"]
    assert seen["rows"] == len(run) and seen["rows_shuffled"] < 0.75 * len(run), seen
    assert remote.summary["engine_info"] == info
    # n_returned counts the rows left out
    assert (remote.per_query["n_returned"] >= 20).all()


def test_prefilter_rows_keeps_every_row_that_decides_the_top():
    """Without Spark: on random chunks of a run, the kept rows (with the counts of the rest) give the numbers of
    the whole list, for each tie rule, both unjudged rules and both ideals."""
    import pyarrow as pa

    from ndcg_mlflow.engines.preparation import resolve_spec
    from ndcg_mlflow.engines.spark.prefilter import prefilter_rows

    qrels, run = long_lists(seed=5)
    grades = {(q, d): g for q, d, g in qrels.itertuples(index=False)}
    run = run.assign(rank=np.nan, grade=[grades.get((q, d)) for q, d in zip(run["query_id"], run["doc_id"])])
    for ties in ("average", "id_ascending"):
        for rules in ({"unjudged": "condense"}, {"ideal": "candidates"}, {"unjudged": "error"}):
            spec = spec_of(ties=ties, cutoffs=(3, 7), **rules)
            metric = resolve_spec(spec, qrels, {"a": run}, None).metric
            cuts = [0, 333, 700, 1200, len(run)]
            parts = [run.iloc[a:b] for a, b in zip(cuts, cuts[1:])]
            kept = pd.concat(
                [
                    prefilter_rows(pa.Table.from_pandas(p, preserve_index=False), metric, 10, False).to_pandas()
                    for p in parts
                ],
                ignore_index=True,
            )
            assert len(kept) < len(run)
            if rules.get("unjudged") == "error":
                assert kept["doc_id"].isin(run.loc[run["grade"].isna(), "doc_id"]).any()
                continue
            whole = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": run[["query_id", "doc_id", "score"]]})
            part = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": kept[["query_id", "doc_id", "score"]]})
            extra = kept.groupby("query_id")["_extra"].sum()
            a, b = whole.per_query, part.per_query.copy()
            b["n_returned"] = b["n_returned"] + b["query_id"].map(extra).fillna(0).astype(b["n_returned"].dtype)
            pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_prefilter_rows_with_alternatives_keeps_what_each_alternative_needs():
    """Without Spark: the rows kept for the declared rules and sensitivity's alternatives give every
    alternative's numbers of the whole list (the local sensitivity table of the kept rows is that of all rows);
    the declared rules alone keep too few for some alternative."""
    import pyarrow as pa

    from ndcg_mlflow.engines.preparation import resolve_spec
    from ndcg_mlflow.engines.spark.prefilter import prefilter_rows
    from ndcg_mlflow.statistics.sensitivity import alternatives

    qrels, run = long_lists(seed=8)
    grades = {(q, d): g for q, d, g in qrels.itertuples(index=False)}
    run = run.assign(rank=np.nan, grade=[grades.get((q, d)) for q, d in zip(run["query_id"], run["doc_id"])])
    spec = spec_of(ties="average", cutoffs=(3, 7), gain={-1: 0, 0: 0, 1: 0, 2: 3, 3: 7})
    spec["report"] = {"sensitivity": True}
    metric = resolve_spec(spec, qrels, {"a": run}, None).metric
    others = [m for _, _, m in alternatives(metric)[1:]]
    cuts = [0, 333, 700, 1200, len(run)]
    parts = [pa.Table.from_pandas(run.iloc[a:b], preserve_index=False) for a, b in zip(cuts, cuts[1:])]

    def table(rows):
        return ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": rows[["query_id", "doc_id", "score"]]}).sensitivity

    whole = table(run)
    kept = pd.concat(
        [prefilter_rows(p, metric, 10, False, alternatives=others).to_pandas() for p in parts], ignore_index=True
    )
    assert len(kept) < len(run)
    pd.testing.assert_frame_equal(whole, table(kept), check_exact=True)
    declared_only = pd.concat([prefilter_rows(p, metric, 10, False).to_pandas() for p in parts], ignore_index=True)
    assert len(declared_only) < len(kept)
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(whole, table(declared_only), check_exact=True)


@pytest.mark.parametrize("where", ["other chunk", "same chunk"])
def test_with_the_prefilter_a_document_twice_is_still_refused(spark, monkeypatch, where):
    """Repeated rows below the cut (the pre-filter leaves them out): in another chunk than the query's other rows
    (the query's rows are then checked in Spark), or next to them in the same chunk (the chunk is passed whole
    and checked after the shuffle). The local engine's message, naming the smallest repeated pair."""
    from ndcg_mlflow.engines.spark import prefilter

    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 1_000_000 if where == "same chunk" else 300)
    qrels, run = long_lists(seed=9, n_queries=6)
    low = run.sort_values("score").groupby("query_id").head(2)  # the lowest rows of each query, twice
    if where == "other chunk":
        bad = pd.concat([run, low], ignore_index=True)
    else:
        bad = pd.concat([run, low]).sort_values("query_id", kind="stable").reset_index(drop=True)
    spec = spec_of(ties="average", cutoffs=(3,))
    with pytest.raises(DataError, match="listed twice"):
        ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": bad})
    with pytest.raises(DataError) as remote:
        ndcg_mlflow.evaluate(
            spec, engine=Spark(spark, buckets=2, prefilter=True), qrels=qrels, systems={"a": spark.createDataFrame(bad)}
        )
    q, d = min(zip(low["query_id"], low["doc_id"]))  # Spark names the smallest repeated (query, document)
    assert f"systems['a']: document {d!r} is listed twice for query {q!r} ({len(low)} repeated rows in all)" in str(
        remote.value
    )


def test_when_the_prefilter_applies(spark):
    qrels, run = long_lists(seed=3, n_queries=5)
    frame = spark.createDataFrame(run)
    spec = spec_of(ties="average", cutoffs=(5, "all"))
    result = ndcg_mlflow.evaluate(spec, engine=Spark(spark), qrels=qrels, systems={"a": frame})
    assert not result.engine_info["prefilter"]["applied"]
    assert "'all'" in result.engine_info["prefilter"]["reason"]
    assert result.engine_info["systems"]["a"]["rows_shuffled"] == len(run)
    with pytest.raises(SpecError, match="cannot apply: the cutoff 'all'"):
        ndcg_mlflow.evaluate(spec, engine=Spark(spark, prefilter=True), qrels=qrels, systems={"a": frame})
    off = ndcg_mlflow.evaluate(
        spec_of(ties="average", cutoffs=(5,)), engine=Spark(spark, prefilter=False), qrels=qrels, systems={"a": frame}
    )
    assert off.engine_info["prefilter"] == {
        "applied": False,
        "depth": None,
        "reason": "not asked for (prefilter=False)",
    }


# --------------------------------------------------------------------------- Delta tables and JSONL runs


def test_delta_versions_and_jsonl_runs_read_by_spark(spark, tmp_path):
    """A Delta table written twice (overwrite): version 0 and 1 each give their own rows' numbers on Spark (the
    snapshot's files, resolved by deltalake), as on the local engine; a JSONL run (integer ids) too."""
    deltalake = pytest.importorskip("deltalake", reason="deltalake is not installed")
    import pyarrow as pa

    qrels, run = make_data(seed=31, int_ids=True)
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    other = run.copy()
    other["score"] = other["score"][::-1].to_numpy()
    deltalake.write_deltalake(str(tmp_path / "runs"), pa.Table.from_pandas(run, preserve_index=False))
    deltalake.write_deltalake(
        str(tmp_path / "runs"), pa.Table.from_pandas(other, preserve_index=False), mode="overwrite"
    )
    run.to_json(tmp_path / "run.jsonl", orient="records", lines=True)
    spec = spec_of(ties="displayed_order")
    spec["data"] = {
        "qrels": "qrels.csv",
        "systems": {
            "v0": {"path": "runs", "format": "delta", "version": 0},
            "v1": {"path": "runs", "format": "delta", "version": 1},
            "j": "run.jsonl",
        },
    }
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2), base_dir=tmp_path)
    assert_same(local, remote)
    assert [f.sha256 for f in local.files] == [f.sha256 for f in remote.files]
    pq = local.per_query
    assert (
        not pq[pq.system == "v0"]["ndcg"]
        .reset_index(drop=True)
        .equals(pq[pq.system == "v1"]["ndcg"].reset_index(drop=True))
    )  # the two versions differ
    pd.testing.assert_frame_equal(
        pq[pq.system == "v0"].drop(columns="system").reset_index(drop=True),
        pq[pq.system == "j"].drop(columns="system").reset_index(drop=True),
    )


def test_a_malformed_jsonl_run_is_refused(spark, tmp_path):
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\n", encoding="utf-8")
    (tmp_path / "run.jsonl").write_text(
        '{"query_id": "q1", "doc_id": "a", "score": 1}\n{"query_id": "q1", "doc\n', encoding="utf-8"
    )
    spec = spec_of(ties="average")
    spec["data"] = {"qrels": "qrels.txt", "systems": {"j": "run.jsonl"}}
    with pytest.raises(DataError) as info:
        ndcg_mlflow.evaluate(spec, engine=Spark(spark), base_dir=tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'run.jsonl'}:2: not valid JSON: ")


# --------------------------------------------------------------------------- beyond the driver: per-group sums


def grouped_data(seed: int, n: int = 3000) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """n queries of 10 documents; system b improves on a a little (p of a few percent), c only adds noise."""
    rng = np.random.default_rng(seed)
    q = np.repeat([f"q{i}" for i in range(n)], 10)
    d = np.tile([f"d{j}" for j in range(10)], n)
    g = rng.choice(4, size=n * 10, p=[0.5, 0.25, 0.15, 0.1])
    a = rng.random(n * 10)
    keep = rng.random(n * 10) < 0.9
    runs = {
        "a": a,
        "b": a + 0.0006 * g * rng.random(n * 10) - 0.0006 * rng.random(n * 10),
        "c": a + 0.003 * (rng.random(n * 10) - 0.5),
    }
    qrels = pd.DataFrame({"query_id": q, "doc_id": d, "grade": g})
    return qrels, {k: pd.DataFrame({"query_id": q[keep], "doc_id": d[keep], "score": v[keep]}) for k, v in runs.items()}


def test_grouped_statistics_agree_with_the_per_query_method(spark, tmp_path):
    """The same data through both paths: the per-query table written to Parquet holds the local engine's
    numbers; the means agree to rounding; the group-bootstrap percentile intervals and the group sign-flip
    p-values agree with the per-query ones within Monte-Carlo error.

    Tolerances: with 4000 resamples an endpoint of a 95% percentile interval has a Monte-Carlo standard deviation
    of about sqrt(0.025 * 0.975 / 4000) / phi(1.96) = 0.043 standard errors, so about 0.06 for the difference of
    two independent ones; resampling G = 300 groups instead of 3000 queries estimates the variance with a
    relative error of about sqrt(2 / 300) = 8%, moving the endpoints by about 0.08 standard errors: 0.4 standard
    errors is more than 4 of those deviations combined. A p-value p has a Monte-Carlo deviation of
    sqrt(p (1 - p) / 4000) <= 0.008 and the group test another of the order of the variance error: 0.05.
    """
    from ndcg_mlflow.engines.spark import evaluate_grouped

    qrels, runs = grouped_data(seed=1)
    spec = spec_of(ties="id_ascending", cutoffs=(5, 10), empty_ideal="exclude")
    spec["uncertainty"] = {"resamples": 4000, "confidence": 0.95, "method": "percentile", "seed": 5}
    spec["comparison"] = {
        "baseline": "a",
        "test": "randomization",
        "correction": "holm",
        "wins_losses": 0,
        "tie_tolerance": 1e-9,
    }
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=runs)
    frames = {k: spark.createDataFrame(v) for k, v in runs.items()}
    out = tmp_path / "per_query"
    with timings.recording() as recorded:
        grouped = evaluate_grouped(
            spec, per_query_path=out, spark=spark, qrels=qrels, systems=frames, groups=300, buckets=2
        )
    assert {"read", "scoring", "statistics"} <= set(recorded.seconds)  # --timings' phases, as through evaluate
    written = pd.read_parquet(out)
    written["system"] = written["system"].astype(str)
    cols = [
        "system",
        "query_id",
        "cutoff",
        "ndcg",
        "dcg",
        "idcg",
        "idcg_candidates",
        "judged_coverage",
        "n_returned",
        "weight",
        "status",
    ]
    a = local.per_query[cols].astype({"cutoff": str}).sort_values(["system", "query_id", "cutoff"])
    b = written[cols].astype({"cutoff": str}).sort_values(["system", "query_id", "cutoff"])
    pd.testing.assert_frame_equal(
        a.reset_index(drop=True).astype({"n_returned": "int64"}),
        b.reset_index(drop=True).astype({"n_returned": "int64"}),
        check_exact=True,
        check_dtype=False,
    )
    ls, gs = local.summary["systems"], grouped.summary["systems"]
    for name in runs:
        for key, m in ls[name].items():
            g = gs[name][key]
            for field in ("n_evaluated", "n_excluded", "n_missing", "n_empty_ideal"):
                assert g[field] == m[field], (name, key, field)
            assert g["mean"] == pytest.approx(m["mean"], rel=1e-12, abs=1e-15)
            assert g["weight_sum"] == pytest.approx(m["weight_sum"], rel=1e-12)
            se = m["std_error"]
            assert g["std_error"] == pytest.approx(se, rel=0.25)
            assert abs(g["ci_low"] - m["ci_low"]) < 0.4 * se and abs(g["ci_high"] - m["ci_high"]) < 0.4 * se
    lc = local.comparisons.set_index(["candidate", "key"])
    moderate = 0
    for c in grouped.summary["comparisons"]:
        row = lc.loc[(c["candidate"], c["key"])]
        se = (row["ci_high"] - row["ci_low"]) / (2 * 1.96)
        assert c["delta"] == pytest.approx(row["delta"], rel=1e-9, abs=1e-15)
        assert abs(c["ci_low"] - row["ci_low"]) < 0.4 * se and abs(c["ci_high"] - row["ci_high"]) < 0.4 * se
        assert abs(c["p_randomization"] - row["p_randomization"]) < 0.05, (c, row["p_randomization"])
        assert c["n_paired"] == row["n_paired"]
        moderate += 0.01 < row["p_randomization"] < 0.9
    assert moderate >= 2  # the p-values compared are not all at the floor or near 1
    assert grouped.summary["engine_info"]["statistics"] == {"method": "grouped", "groups": 300}
    with pytest.raises(SpecError, match="not an empty folder"):
        evaluate_grouped(spec, per_query_path=out, spark=spark, qrels=qrels, systems=frames)
    with pytest.raises(EvaluationError, match="evaluate_grouped"):
        ndcg_mlflow.evaluate(spec, engine=Spark(spark, driver_queries=100), qrels=qrels, systems=frames)


# --------------------------------------------------------------------------- sensitivity (report.sensitivity)


def sensitivity_spec(*, comparison: bool, **rules) -> dict:
    spec = spec_of(**rules)
    spec["report"] = {"sensitivity": True}
    if comparison:
        spec["uncertainty"] = {"resamples": 200, "confidence": 0.9, "method": "percentile", "seed": 3}
        spec["comparison"] = {
            "baseline": "a",
            "test": "randomization",
            "correction": "holm",
            "wins_losses": 3,
            "tie_tolerance": 1e-9,
        }
    return spec


def sensitivity_systems(run: pd.DataFrame, seed: int, n: int) -> dict[str, pd.DataFrame]:
    """``a``; ``b``: 70% of its rows, scores reversed (more missing queries); ``c``: its scores shuffled."""
    b = run.sample(frac=0.7, random_state=seed).reset_index(drop=True)
    b["score"] = b["score"][::-1].to_numpy()
    c = run.copy()
    c["score"] = np.random.default_rng(seed).permutation(c["score"].to_numpy())
    return dict(list({"a": run, "b": b, "c": c}.items())[:n])


def assert_same_sensitivity(local, remote) -> None:
    """The two engines' sensitivity tables, exactly: every row, value, count and flag (NaN where NaN)."""
    assert local.engine == "local" and remote.engine == "spark"
    assert local.sensitivity is not None and remote.sensitivity is not None
    pd.testing.assert_frame_equal(local.sensitivity, remote.sensitivity, check_exact=True)


SENSITIVITY_CASES = [
    # (id, buckets, prefilter, comparison, systems, rules)
    ("average-all", 3, None, True, 3, {"ties": "average", "cutoffs": (1, 3, 10, "all")}),
    (
        "table-condense-candidates-topk",
        1,
        True,
        True,
        2,
        {
            "ties": "id_descending",
            "cutoffs": (3, 5),
            "gain": {-1: 0, 0: 0, 1: 1, 2: 3, 3: 7.5},
            "unjudged": "condense",
            "ideal": "candidates",
        },
    ),
    (
        "displayed-linear-topk",
        3,
        True,
        False,
        2,
        {
            "ties": "displayed_order",
            "cutoffs": (2, 10),
            "gain": "linear",
            "missing_queries": "exclude",
            "empty_ideal": "one",
        },
    ),
    (
        "ascending-all-empty-zero",
        1,
        None,
        True,
        3,
        {"ties": "id_ascending", "cutoffs": (5, "all"), "empty_ideal": "zero", "missing_queries": "exclude"},
    ),
]


@pytest.mark.parametrize("case", SENSITIVITY_CASES, ids=[c[0] for c in SENSITIVITY_CASES])
def test_the_sensitivity_table_equals_the_local_engine(spark, case):
    """On the random data (ties, empty ideals, missing queries, unjudged documents), with and without a
    comparison, with the cutoff 'all' (no pre-filter) and with finite cutoffs (the pre-filter keeps what every
    alternative needs), in 1 and 3 buckets."""
    i = SENSITIVITY_CASES.index(case)
    _, buckets, prefilter, comparison, n_systems, rules = case
    qrels, run = make_data(seed=500 + i, int_ids=i % 2 == 1)
    systems = sensitivity_systems(run, seed=i, n=n_systems)
    spec = sensitivity_spec(comparison=comparison, **rules)
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems)
    frames = {name: spark.createDataFrame(df) for name, df in systems.items()}
    remote = ndcg_mlflow.evaluate(
        spec,
        engine=Spark(spark, buckets=buckets, prefilter=prefilter),
        qrels=spark.createDataFrame(qrels),
        systems=frames,
    )
    assert_same(local, remote)
    assert_same_sensitivity(local, remote)
    table = remote.sensitivity
    assert set(table["kind"]) == ({"system", "comparison"} if comparison else {"system"})
    assert set(table["rule"]) >= {"declared", "ties", "ideal", "empty_ideal", "unjudged", "missing_queries"}
    assert (table["change"].abs() > 1e-6).sum() > 10  # the alternatives move the numbers on this data
    assert remote.engine_info["prefilter"]["applied"] is bool(prefilter)
    if prefilter:
        seen = remote.engine_info["systems"]["a"]
        assert seen["rows_shuffled"] < seen["rows"], seen


def test_the_prefilter_keeps_the_rows_every_alternative_needs(spark, monkeypatch):
    """Long lists, a small cutoff, several chunks: the declared rules (linear gain, unjudged zero, the judged
    catalog) keep fewer rows than unjudged: condense, the exponential gain or the candidates' ideal need; the
    table is still the local engine's."""
    from ndcg_mlflow.engines.spark import prefilter

    qrels, run = long_lists(seed=41, n_queries=30)
    run["rank"] = run.groupby("query_id").cumcount() + 1  # every alternative computed (displayed_order too)
    second = run.copy()
    second["score"] = np.random.default_rng(2).permutation(second["score"].to_numpy())
    systems = {"a": run, "b": second}
    spec = sensitivity_spec(comparison=True, ties="id_ascending", cutoffs=(3,), gain="linear")
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems)
    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 300)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        remote = ndcg_mlflow.evaluate(
            spec,
            engine=Spark(spark, buckets=3, prefilter=True),
            qrels=qrels,
            systems={k: spark.createDataFrame(v) for k, v in systems.items()},
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert_same(local, remote)
    assert_same_sensitivity(local, remote)
    seen = remote.engine_info["systems"]["a"]
    assert seen["rows_shuffled"] < 0.75 * seen["rows"], seen
    condensed = remote.sensitivity[remote.sensitivity["alternative"] == "condense"]
    assert (condensed["change"].abs() > 1e-6).any()


def test_an_alternative_whose_gains_overflow_is_undefined_as_locally(spark):
    """Declared linear gain with a grade of 1100: the exponential alternative's gain 2^1100 - 1 overflows in the
    bucket holding that query; every system's numbers under it are NaN (undefined), as locally."""
    qrels, run = make_data(seed=61)
    q = run["query_id"].iloc[0]
    qrels = pd.concat([qrels, pd.DataFrame({"query_id": [q], "doc_id": ["huge"], "grade": [1100]})], ignore_index=True)
    systems = sensitivity_systems(run, seed=1, n=2)
    spec = sensitivity_spec(comparison=True, ties="average", cutoffs=(3, 10), gain="linear")
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems)
    remote = ndcg_mlflow.evaluate(
        spec,
        engine=Spark(spark, buckets=3),
        qrels=qrels,
        systems={k: spark.createDataFrame(v) for k, v in systems.items()},
    )
    assert_same_sensitivity(local, remote)
    t = remote.sensitivity
    over = t[t["rule"] == "gain"]
    assert len(over) and over["value"].isna().all() and (over["n_used"] == 0).all()
    assert t.loc[t["rule"] != "gain", "value"].notna().any()


def test_without_a_rank_column_the_displayed_order_alternative_is_left_out_and_said(spark):
    """A run without a rank column: ``ties: displayed_order`` means its line order, which Spark does not keep.
    Its rows are left out of the table, with a note; every other row is the local engine's."""
    qrels, run = make_data(seed=71)
    systems = {k: v.drop(columns="rank") for k, v in sensitivity_systems(run, seed=2, n=2).items()}
    spec = sensitivity_spec(comparison=True, ties="average", cutoffs=(5, "all"))
    local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems=systems)
    remote = ndcg_mlflow.evaluate(
        spec,
        engine=Spark(spark, buckets=3),
        qrels=qrels,
        systems={k: spark.createDataFrame(v) for k, v in systems.items()},
    )
    lt = local.sensitivity
    displayed = (lt["rule"] == "ties") & (lt["alternative"] == "displayed_order")
    assert displayed.any()
    pd.testing.assert_frame_equal(lt[~displayed].reset_index(drop=True), remote.sensitivity, check_exact=True)
    notes = [n for n in remote.all_notes if n.startswith("sensitivity:")]
    assert len(notes) == 1 and "ties = displayed_order" in notes[0] and "a, b have no rank column" in notes[0]
    assert not any(n.startswith("sensitivity:") for n in local.all_notes)
    # tables of another library keep their rows' order (their row numbers stand in for the rank): the whole table
    ordered = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=3), qrels=qrels, systems=systems)
    pd.testing.assert_frame_equal(lt, ordered.sensitivity, check_exact=True)
    assert not any(n.startswith("sensitivity:") for n in ordered.all_notes)
