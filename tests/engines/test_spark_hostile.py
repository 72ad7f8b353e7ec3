"""Hostile paths on the Spark engine: declared paths read literally (never as Hadoop globs or URIs, names Hadoop
hides read all the same), with the local engine's numbers, digests and messages; the CLI's Spark workers run the
CLI's own interpreter; a run replaced after its digest. (Hostile file contents, on every reader and on Spark:
tests/readers/test_hostile_corpus.py.)

The test run's one SparkSession (``local[2]``, tests/conftest.py); tiny files. Skipped when pyspark or Java is missing.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import java_problem

import ndcg_mlflow
from ndcg_mlflow import Spark
from ndcg_mlflow.errors import DataError, NdcgError

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")

if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]

QRELS = b"q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq2 0 d1 1\nq2 0 d4 3\n"
# the ideal ranking of both queries: nDCG 1.0 at every cutoff
RUN = b"q1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d5 3 1.0 t\nq2 Q0 d4 1 2.0 t\nq2 Q0 d1 2 1.0 t\n"
# the worst: a file a glob would pick instead of the declared one gives other numbers
WORST = b"q1 Q0 d3 1 3.0 t\nq1 Q0 d5 2 2.0 t\nq2 Q0 d9 1 2.0 t\n"

SPEC = {
    "spec_version": 1,
    "name": "hostile-spark",
    "metric": {
        "gain": "linear",
        "cutoffs": [2, "all"],
        "discount": "log2",
        "ties": "average",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    },
    "queries": {"weights": "uniform"},
}

# (case, file name, bytes): paths the local engine refuses (each its message, naming the file)
REFUSED = [
    ("missing", "missing.txt", None),
    ("glob-matching-nothing", "nothing*.txt", None),
]

# (case, file name, bytes): files the local engine reads, whose names Hadoop hides or reads as globs or URIs
ACCEPTED = [
    ("hidden-underscore", "_x.run", RUN),
    ("hidden-dot", ".x.run", RUN),
    ("brackets", "run[1].txt", RUN),
    ("braces", "{a}.txt", RUN),
    ("question-mark", "run?.txt", RUN),
    ("star", "run*.txt", RUN),
    ("colon", "a:b.txt", RUN),
    ("csv-colon-brackets", "x:[1].csv", b"query_id,doc_id,score\nq1,d1,3\nq1,d2,2\nq2,d4,1\nq2,d1,0\n"),
]
DECOYS = {"run1.txt": WORST, "a.txt": WORST, "runs.txt": WORST, "x.txt": WORST}  # what a glob would read instead


def _write(folder: Path, files: dict[str, bytes | None]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels.txt").write_bytes(QRELS)
    for name, data in {**DECOYS, **files}.items():
        if data is not None:
            (folder / name).write_bytes(data)


def _outcome(spec: dict, folder: Path, **engine) -> Any:
    """The evaluation's result, or its user error's message."""
    try:
        result = ndcg_mlflow.evaluate(spec, base_dir=folder, **engine)
    except NdcgError as exc:
        return str(exc)
    return result


@pytest.mark.parametrize("case, name, data", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_file_the_local_engine_refuses_is_refused_on_spark_with_its_message(spark, tmp_path, case, name, data):
    _write(tmp_path, {name: data})
    spec = {**SPEC, "data": {"qrels": "qrels.txt", "systems": {"s": name}}}
    local = _outcome(spec, tmp_path)
    assert isinstance(local, str), f"{case}: the local engine read it"
    assert str(tmp_path / name) in local, local
    remote = _outcome(spec, tmp_path, engine=Spark(spark))
    assert remote == local


def test_files_the_local_engine_reads_give_its_numbers_and_digests_on_spark(spark, tmp_path):
    """Names Hadoop hides (``_x``, ``.x``) or reads as globs (``[1]``, ``{a}``, ``?``, ``*``) or as a URI (``a:b``):
    each is that file, with nDCG 1.0 (a decoy a glob would match gives less), on both engines, with the same
    sha256."""
    _write(tmp_path, {name: data for _, name, data in ACCEPTED})
    systems = {case: name for case, name, _ in ACCEPTED}
    # Parquet: Spark's reader given the name literally, or (a name it would skip) the local reader
    rows = [line.split() for line in RUN.decode().splitlines()]
    frame = pd.DataFrame(
        {"query_id": [r[0] for r in rows], "doc_id": [r[2] for r in rows], "score": [float(r[4]) for r in rows]}
    )
    worst = [line.split() for line in WORST.decode().splitlines()]
    decoy = pd.DataFrame(
        {"query_id": [r[0] for r in worst], "doc_id": [r[2] for r in worst], "score": [float(r[4]) for r in worst]}
    )
    (tmp_path / "folder").mkdir()
    for name, table in (
        ("p[1].parquet", frame),
        ("p1.parquet", decoy),
        ("_p.parquet", frame),
        ("folder/_a.parquet", frame.iloc[:3]),
        ("folder/b.parquet", frame.iloc[3:]),
    ):
        table.to_parquet(tmp_path / name)
    systems.update({"parquet-brackets": "p[1].parquet", "parquet-hidden": "_p.parquet", "parquet-folder": "folder"})
    spec = {**SPEC, "data": {"qrels": "qrels.txt", "systems": systems}}
    local = _outcome(spec, tmp_path)
    assert not isinstance(local, str), local
    remote = _outcome(spec, tmp_path, engine=Spark(spark, buckets=2))
    assert not isinstance(remote, str), remote
    pd.testing.assert_frame_equal(local.per_query, remote.per_query, check_exact=True)
    assert set(remote.per_query["ndcg"]) == {1.0}
    assert [(f.declared, f.sha256, f.rows) for f in local.files] == [
        (f.declared, f.sha256, f.rows) for f in remote.files
    ]
    for case, name, data in ACCEPTED:  # the declared file's digest, not a decoy's
        info = next(f for f in remote.files if f.declared == name)
        assert info.sha256 == hashlib.sha256(data).hexdigest(), case


def test_judgments_kept_in_spark_are_read_by_the_local_reader(spark, tmp_path):
    """Beyond the driver's limit of judgments (here 0) the judgments file is read in Spark: a file named ``[1].txt``
    with a decoy ``1.txt`` is that file, with the local numbers and sha256."""
    from ndcg_mlflow.engines.spark import evaluate_grouped

    spec = {**SPEC, "data": {"qrels": "[1].txt", "systems": {"s": "run.txt"}}}
    _write(tmp_path, {"run.txt": RUN, "[1].txt": QRELS, "1.txt": b"q9 0 d9 1\n"})
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    remote = evaluate_grouped(
        spec, per_query_path=tmp_path / "per_query", spark=spark, driver_judgments=0, base_dir=tmp_path
    )
    assert remote.summary["engine_info"]["judgments"] == "spark"
    mine = pd.read_parquet(remote.per_query_path)
    assert sorted(mine["ndcg"]) == sorted(local.per_query["ndcg"]) == [1.0] * 4
    assert [(f.declared, f.sha256) for f in remote.files] == [(f.declared, f.sha256) for f in local.files]


def _python3_shim(folder: Path) -> Path:
    """A folder whose ``python3`` is not the interpreter running the tests (it fails), put first on PATH."""
    folder.mkdir()
    shim = folder / "python3"
    shim.write_text("#!/bin/sh\necho 'not the interpreter of the tool' >&2\nexit 1\n", encoding="utf-8")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def test_the_cli_runs_spark_workers_on_its_own_interpreter_and_exits_2_on_bad_input(tmp_path):
    """``ndcg-mlflow run --engine spark`` started by an interpreter that is not the ``python3`` on PATH (a venv or
    pipx install): the session the tool starts runs its workers on the tool's interpreter, and the run succeeds;
    a file with CR-only line ends is exit 2 with the local message."""
    _write(tmp_path, {"run.txt": RUN, "cr.txt": RUN.replace(b"\n", b"\r")})
    import yaml

    good = tmp_path / "good.yaml"
    good.write_text(
        yaml.safe_dump(
            {**SPEC, "data": {"qrels": "qrels.txt", "systems": {"s": "run.txt"}}, "mlflow": {"experiment": "x"}}
        ),
        encoding="utf-8",
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {**SPEC, "data": {"qrels": "qrels.txt", "systems": {"s": "cr.txt"}}, "mlflow": {"experiment": "x"}}
        ),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{_python3_shim(tmp_path / 'bin')}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    script = (
        "import sys; from ndcg_mlflow.cli import main; "
        "code = main(sys.argv[1:]); "
        "from pyspark.sql import SparkSession; s = SparkSession.getActiveSession(); "
        "print('workers:', s.sparkContext.pythonExec if s else None); sys.exit(code)"
    )
    for spec, out in ((good, "good"), (bad, "bad")):
        args = [
            sys.executable,
            "-c",
            script,
            "run",
            str(spec),
            "--engine",
            "spark",
            "--no-mlflow",
            "--quiet",
            "--out",
            str(tmp_path / out),
        ]
        done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        if spec is good:
            assert done.returncode == 0, done.stderr[-3000:]
            assert f"workers: {sys.executable}" in done.stdout
            per_query = pd.read_csv(tmp_path / out / "per_query.csv")
            assert set(per_query["ndcg"]) == {1.0}
        else:
            assert done.returncode == 2, done.stderr[-3000:]
            assert "Traceback" not in done.stderr
            assert f"{tmp_path / 'cr.txt'}:1: " in done.stderr and "carriage return" in done.stderr


def test_a_run_replaced_after_its_digest_is_refused_on_spark(spark, tmp_path, monkeypatch):
    """Spark reads a run when its jobs need the rows, after the run's sha256 is taken: a file renamed over in
    between gives numbers of one file and the digest of another, so it is refused, naming the file, as on the
    local engine."""
    from ndcg_mlflow.engines.spark import runs as engine

    _write(tmp_path, {"run.txt": RUN})
    spec = {**SPEC, "data": {"qrels": "qrels.txt", "systems": {"s": "run.txt"}}}
    real = engine.sha256_file

    def replacing(path, *args, **kwargs):
        digest = real(path, *args, **kwargs)
        if Path(path).name == "run.txt":
            (tmp_path / "new.txt").write_bytes(WORST)
            os.replace(tmp_path / "new.txt", tmp_path / "run.txt")
        return digest

    monkeypatch.setattr(engine, "sha256_file", replacing)
    with pytest.raises(DataError, match=r"run\.txt: the file changed while it was read"):
        ndcg_mlflow.evaluate(spec, base_dir=tmp_path, engine=Spark(spark))
