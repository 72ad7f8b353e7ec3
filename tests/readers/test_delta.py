"""Delta tables (``{format: delta, path: ..., version: N}``): the files of one version, read by the local engine
(the Spark engine's reading is in test_spark.py). The tables are written by ``deltalake``."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

import ndcg_mlflow
from ndcg_mlflow.errors import DataError, SpecError

deltalake = pytest.importorskip("deltalake", reason="deltalake is not installed (pip install 'ndcg-mlflow[spark]')")

QRELS = pd.DataFrame(
    {"query_id": ["q1", "q1", "q1", "q2", "q2"], "doc_id": ["a", "b", "c", "a", "d"], "grade": [2, 1, 0, 1, 3]}
)
V0 = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2"], "doc_id": ["a", "b", "c", "a"], "score": [3.0, 2.0, 1.0, 1.0]})
V1 = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2"], "doc_id": ["c", "a", "d", "a"], "score": [3.0, 2.0, 2.0, 1.0]})


def spec_for(source, cutoffs=(1, 3, "all")) -> dict:
    return {
        "spec_version": 1,
        "name": "delta",
        "metric": {
            "gain": "exponential",
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": "id_ascending",
            "ideal": "judged_catalog",
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": "qrels.csv", "systems": {"r": source}},
    }


@pytest.fixture
def table(tmp_path):
    """A Delta table written twice (the second write overwrites the first), and the judgments."""
    QRELS.to_csv(tmp_path / "qrels.csv", index=False)
    deltalake.write_deltalake(str(tmp_path / "run"), pa.Table.from_pandas(V0, preserve_index=False))
    deltalake.write_deltalake(str(tmp_path / "run"), pa.Table.from_pandas(V1, preserve_index=False), mode="overwrite")
    return tmp_path


def test_each_version_reads_its_own_rows(table):
    """Version 0 and version 1 give the numbers of their own rows (the folder holds both versions' files)."""
    for version, rows in ((0, V0), (1, V1)):
        got = ndcg_mlflow.evaluate(spec_for({"path": "run", "format": "delta", "version": version}), base_dir=table)
        want = ndcg_mlflow.evaluate(spec_for("run.csv"), base_dir=table, qrels=QRELS, systems={"r": rows})
        pd.testing.assert_frame_equal(got.per_query, want.per_query, check_exact=True)
        assert got.files[1].rows == len(rows)
        assert got.spec.resolved()["data.systems.r.version"] == version
    assert len(list((table / "run").glob("*.parquet"))) == 2  # both versions' files are there


def test_the_digest_is_of_the_version_read(table):
    import hashlib

    digests = [
        ndcg_mlflow.evaluate(spec_for({"path": "run", "format": "delta", "version": v}), base_dir=table).files[1].sha256
        for v in (0, 1)
    ]
    assert digests[0] != digests[1]
    files = deltalake.DeltaTable(str(table / "run"), version=1).file_uris()
    assert len(files) == 1
    with open(files[0].removeprefix("file://"), "rb") as fh:
        assert digests[1] == hashlib.sha256(b"delta version 1\n" + fh.read()).hexdigest()


def test_a_delta_table_must_be_declared_with_its_version(table):
    with pytest.raises(SpecError, match=r"data\.systems\.r\.version.*missing required key"):
        ndcg_mlflow.evaluate(spec_for({"path": "run", "format": "delta"}), base_dir=table)
    with pytest.raises(SpecError, match="is a Delta table.*format: delta, version: N"):
        ndcg_mlflow.evaluate(spec_for("run"), base_dir=table)
    with pytest.raises(SpecError, match="version is read from a Delta table"):
        ndcg_mlflow.evaluate(spec_for({"path": "run.csv", "format": "csv", "version": 0}), base_dir=table)
    with pytest.raises(SpecError, match=r"data\.systems\.r\.version"):
        ndcg_mlflow.evaluate(spec_for({"path": "run", "format": "delta", "version": -1}), base_dir=table)
    with pytest.raises(DataError, match="cannot open version 5 of the Delta table \\(its latest version is 1\\)"):
        ndcg_mlflow.evaluate(spec_for({"path": "run", "format": "delta", "version": 5}), base_dir=table)
    with pytest.raises(SpecError, match="not a Delta table"):
        ndcg_mlflow.evaluate(spec_for({"path": "qrels.csv", "format": "delta", "version": 0}), base_dir=table)


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("deletion_vectors", "deletion vectors"),
        ("column_mapping", "column mapping"),
        ("partitioned", "partitioned by p"),
    ],
)
def test_tables_this_reader_cannot_honour_are_refused(tmp_path, kind, expected):
    QRELS.to_csv(tmp_path / "qrels.csv", index=False)
    rows = pa.Table.from_pandas(V0, preserve_index=False)
    path = str(tmp_path / "run")
    if kind == "deletion_vectors":
        deltalake.write_deltalake(path, rows, configuration={"delta.enableDeletionVectors": "true"})
    elif kind == "column_mapping":
        deltalake.write_deltalake(path, rows, configuration={"delta.columnMapping.mode": "name"})
    else:
        deltalake.write_deltalake(path, rows.append_column("p", pa.array(["x"] * len(V0))), partition_by=["p"])
    with pytest.raises(DataError, match=expected) as info:
        ndcg_mlflow.evaluate(spec_for({"path": "run", "format": "delta", "version": 0}), base_dir=tmp_path)
    assert path in str(info.value)


def test_delta_judgments(table):
    deltalake.write_deltalake(str(table / "qrels"), pa.Table.from_pandas(QRELS, preserve_index=False))
    spec = spec_for("run.csv")
    spec["data"]["qrels"] = {"path": "qrels", "format": "delta", "version": 0}
    V0.to_csv(table / "run.csv", index=False)
    got = ndcg_mlflow.evaluate(spec, base_dir=table)
    want = ndcg_mlflow.evaluate(spec_for("run.csv"), base_dir=table)
    pd.testing.assert_frame_equal(got.per_query, want.per_query, check_exact=True)
    assert got.spec.resolved()["data.qrels.version"] == 0


def test_the_judgments_dataset_names_the_delta_version(table, tracking_uri):
    """The evaluation run's Dataset input for Delta judgments carries the version read, beside its path."""
    import json

    import yaml
    from helpers import client_for, runs_of_key

    from ndcg_mlflow.cli import main

    qrels = pa.Table.from_pandas(QRELS, preserve_index=False)
    deltalake.write_deltalake(str(table / "qrels"), qrels)
    deltalake.write_deltalake(str(table / "qrels"), qrels.slice(0, 3), mode="overwrite")  # version 1: fewer rows
    V0.to_csv(table / "run.csv", index=False)
    spec = spec_for("run.csv")
    spec["data"]["qrels"] = {"path": "qrels", "format": "delta", "version": 0}
    spec["mlflow"] = {"experiment": "delta"}
    (table / "delta.yaml").write_text(yaml.safe_dump(spec))
    out = table / "out"
    assert main(["run", str(table / "delta.yaml"), "--out", str(out), "--quiet"]) == 0
    (run,) = [
        r
        for r in runs_of_key(client_for(tracking_uri), (out / "run_key.txt").read_text().strip())
        if r.data.tags["ndcg_mlflow.role"] == "evaluation"
    ]
    (judgments,) = [d.dataset for d in run.inputs.dataset_inputs if d.dataset.name == "judgments"]
    assert json.loads(judgments.source) == {"uri": "qrels", "delta_version": 0}
    assert json.loads(judgments.profile) == {"num_rows": len(QRELS)}  # version 0's rows, not version 1's
