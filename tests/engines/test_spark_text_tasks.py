"""Text runs read by the local reader in a Spark task and pre-filtered there
(:mod:`ndcg_mlflow.engines.spark.text_tasks`): the task's rows give the local engine's numbers of the whole file;
each kept row's place is its line's; the checks and messages are those of the path that joins the file's rows to
the judgments in Spark. The tests without Spark call the task's function directly; the others (``integration``)
use the test run's one ``local[2]`` session and are skipped when pyspark or Java is missing.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from test_spark_parquet import _judged, check_kept_rows, long_lists, spec_of
from test_spark_parquet import _spy as spy_on

import ndcg_mlflow
from ndcg_mlflow.engines.preparation import resolve_spec
from ndcg_mlflow.engines.spark import sources
from ndcg_mlflow.engines.spark.prefilter import ORDERED_RUN_SCHEMA, RUN_SCHEMA
from ndcg_mlflow.engines.spark.sources import arrow_schema
from ndcg_mlflow.engines.spark.text_tasks import TextTask
from ndcg_mlflow.errors import NdcgError


def _trec(path, run: pd.DataFrame) -> None:
    """The run as a TREC file, its ranks the rows' places within their query (1, 2, ...)."""
    rank = run.groupby("query_id").cumcount() + 1
    lines = [f"{q} Q0 {d} {r} {s} t" for (q, d, s), r in zip(run.itertuples(index=False, name=None), rank)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _task_rows(task: TextTask, *args, **kwargs) -> pd.DataFrame:
    """The task's output, called as Spark calls it (one batch of one task number)."""
    read = task.reader(*args, **kwargs)
    one = pa.record_batch({"id": pa.array([0], type=pa.int64())})
    schema = arrow_schema(ORDERED_RUN_SCHEMA if task.keep_order else RUN_SCHEMA)
    return pa.Table.from_batches(list(read([one])), schema=schema).to_pandas()


# --------------------------------------------------------------------------- without Spark


@pytest.mark.parametrize(
    "ties, stored, fmt",
    [
        ("average", "by query", "trec"),
        ("id_descending", "scattered", "trec"),
        ("displayed_order", "by query", "csv"),  # no rank column: the lines' order is the rank
        ("displayed_order", "scattered", "csv"),
    ],
)
def test_the_tasks_rows_give_the_numbers_of_the_whole_file(tmp_path, monkeypatch, ties, stored, fmt):
    """The reader's batches of 37 rows, chunks of at least 150 rows: the kept rows and the counts of the rest make
    up the file, and they give the local engine's numbers of the whole file; each kept row's ``_order`` is its row
    in the file and, without a rank column under ``displayed_order``, its rank. A file stored query by query has
    each query in one chunk (none of its duplicates left to check in Spark); a scattered one has queries in
    several."""
    monkeypatch.setattr(sources, "BATCH_ROWS", 37)
    qrels, run = long_lists(seed=11)
    if stored == "scattered":
        run = run.sample(frac=1.0, random_state=3).reset_index(drop=True)
    path = tmp_path / f"run.{fmt}"
    if fmt == "trec":
        _trec(path, run)
    else:
        run.to_csv(path, index=False)
    spec = spec_of(ties=ties, cutoffs=(3, 7))
    metric = resolve_spec(spec, qrels, {"a": run}, None).metric
    from_order = fmt == "csv" and ties == "displayed_order"
    task = TextTask(str(path), fmt, (), ties == "displayed_order", True, from_order)
    kept = _task_rows(task, _judged(qrels), metric, 10, from_order or ties == "displayed_order", chunk_rows=150)
    check_kept_rows(kept, run, spec, qrels, from_order, stored)


def test_a_file_the_reader_now_refuses_gives_no_rows(tmp_path):
    """A file changed since it was checked so that the reader refuses it: the task yields nothing (no row of
    the reader's error row enters the shuffle); the changed digest stops the evaluation."""
    qrels, run = long_lists(seed=2, n_queries=3)
    path = tmp_path / "run.trec"
    path.write_text("q0 Q0 d1 1 not-a-number t\n", encoding="utf-8")
    metric = resolve_spec(spec_of(ties="average"), qrels, {"a": run}, None).metric
    task = TextTask(str(path), "trec", (), False, False, False)
    assert list(task.tables()) == []
    assert _task_rows(task, _judged(qrels), metric, 10, False).empty


# --------------------------------------------------------------------------- on Spark


def _spy(monkeypatch) -> list:
    """The text tasks whose rows were read pre-filtered (their ``prefiltered`` calls)."""
    return spy_on(monkeypatch, TextTask)


CASES = [
    ("average", "trec", {}),
    ("id_descending", "trec", {"unjudged": "condense"}),
    ("displayed_order", "csv", {}),
    ("id_descending", "tsv", {"cutoffs": (1, 10), "ideal": "candidates"}),
]


@pytest.mark.integration
@pytest.mark.parametrize("ties, fmt, rules", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_text_run_pre_filtered_in_its_task_gives_the_local_numbers(spark, tmp_path, monkeypatch, ties, fmt, rules):
    """A text run (TREC with ranks; CSV and TSV without, the lines' order then the displayed one), chunks of at
    least 150 rows: the local engine's per-query numbers, top lists, digests and row counts; the task read it and
    fewer rows than the file's entered the buckets."""
    from test_spark import assert_same

    from ndcg_mlflow import Spark
    from ndcg_mlflow.engines.spark import prefilter

    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 150)
    qrels, run = long_lists(seed=21)
    name = f"run.{fmt}"
    if fmt == "trec":
        _trec(tmp_path / name, run)
    else:
        run.to_csv(tmp_path / name, index=False, sep="," if fmt == "csv" else "\t")
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    spec = spec_of(ties=ties, **rules)
    spec["data"] = {"qrels": "qrels.csv", "systems": {"t": name}}
    calls = _spy(monkeypatch)
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=3), base_dir=tmp_path)
    assert len(calls) == 1
    info = remote.engine_info["systems"]["t"]
    assert info["read_by"] == "the local reader in a Spark task, pre-filtered there"
    assert remote.engine_info["prefilter"]["applied"] and info["rows_shuffled"] < len(run)
    assert_same(local, remote)
    assert [(f.sha256, f.rows) for f in local.files] == [(f.sha256, f.rows) for f in remote.files]


def _outcome(spark, spec, folder) -> str:
    from ndcg_mlflow import Spark

    try:
        ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2), base_dir=folder)
    except NdcgError as exc:
        return str(exc)
    raise AssertionError("the run was accepted")


@pytest.mark.integration
def test_the_checks_and_messages_are_those_of_the_join_in_spark(spark, tmp_path, monkeypatch):
    """Text runs the checks refuse. The reader's own refusals (a document twice, far from or next to its query's
    other rows; a score that is not a number) stop the evaluation before any task reads the file, with the local
    engine's message (file and line). The refusals made after the reader (a run sharing no query with the
    judgments; an unjudged document under ``unjudged: error``), pre-filtered in the task: the message of the
    file's rows joined to the judgments in Spark (the tasks turned off), naming the file."""
    from ndcg_mlflow.engines.spark import judgments, prefilter

    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 100)
    qrels, run = long_lists(seed=9, n_queries=6)
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    low = run.sort_values("score").groupby("query_id").head(2)
    read = {
        "twice-far": pd.concat([run, low], ignore_index=True),
        "twice-near": pd.concat([run, low]).sort_values("query_id", kind="stable").reset_index(drop=True),
        "bad-score": run,
    }
    after = {"unknown-queries": (run.assign(query_id="nobody-" + run["query_id"]), "zero"), "unjudged": (run, "error")}
    calls = _spy(monkeypatch)
    for case, frame in read.items():
        _trec(tmp_path / f"{case}.trec", frame)
        if case == "bad-score":
            lines = (tmp_path / f"{case}.trec").read_text(encoding="utf-8").splitlines()
            lines[4] = lines[4].rsplit(" ", 2)[0] + " x0.5 t"
            (tmp_path / f"{case}.trec").write_text("\n".join(lines) + "\n", encoding="utf-8")
        spec = spec_of(ties="average", cutoffs=(3,))
        spec["data"] = {"qrels": "qrels.csv", "systems": {"s": f"{case}.trec"}}
        with pytest.raises(NdcgError) as local:
            ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
        assert _outcome(spark, spec, tmp_path) == str(local.value), case
        assert f"{tmp_path / case}.trec:" in str(local.value), case
    assert calls == []
    for case, (frame, unjudged) in after.items():
        _trec(tmp_path / f"{case}.trec", frame)
        spec = spec_of(ties="average", cutoffs=(3,), unjudged=unjudged)
        spec["data"] = {"qrels": "qrels.csv", "systems": {"s": f"{case}.trec"}}
        before = len(calls)
        mine = _outcome(spark, spec, tmp_path)
        assert len(calls) == before + 1, case
        with monkeypatch.context() as m:
            m.setattr(judgments, "SHIPPED_JUDGMENTS_BYTES", -1)  # the file's rows joined to the judgments in Spark
            theirs = _outcome(spark, spec, tmp_path)
        assert len(calls) == before + 1, case
        assert mine == theirs, case
        assert f"{case}.trec" in mine, case


@pytest.mark.integration
def test_a_scattered_text_run_needs_no_second_duplicate_check(spark, tmp_path, monkeypatch):
    """A TREC file whose queries' rows are scattered (a query's rows in several chunks of the task): the local
    reader already refused any document listed twice, so no Spark job reads the file again to check the queries
    split across chunks; the numbers are the local engine's."""
    from test_spark import assert_same

    from ndcg_mlflow import Spark
    from ndcg_mlflow.engines.spark import assemble, prefilter

    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 150)
    checks: list = []
    real = assemble.duplicates

    def spied(*args, **kwargs):
        checks.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(assemble, "duplicates", spied)
    qrels, run = long_lists(seed=5, n_queries=12)
    _trec(tmp_path / "run.trec", run.sample(frac=1.0, random_state=8).reset_index(drop=True))
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    spec = spec_of(ties="id_descending", cutoffs=(3, 7))
    spec["data"] = {"qrels": "qrels.csv", "systems": {"t": "run.trec"}}
    calls = _spy(monkeypatch)
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2), base_dir=tmp_path)
    assert len(calls) == 1 and checks == []
    assert remote.engine_info["systems"]["t"]["rows_shuffled"] < len(run)
    assert_same(local, remote)
