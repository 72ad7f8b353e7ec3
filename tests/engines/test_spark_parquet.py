"""Parquet runs read by pyarrow in Spark tasks (:mod:`ndcg_mlflow.engines.spark.parquet_tasks`): the tasks' rows
give the local engine's numbers; each row's grade and place are those of the files; the checks and messages are
those of Spark's reader. The tests without Spark call the tasks' function directly; the others (``integration``)
use the test run's one ``local[2]`` session and are skipped when pyspark or Java is missing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import examples, metric_spec
from hypothesis import given, settings
from hypothesis import strategies as st

import ndcg_mlflow
from ndcg_mlflow.engines.preparation import resolve_spec
from ndcg_mlflow.engines.spark.parquet_tasks import grade_lookup, grades_of, parquet_tasks
from ndcg_mlflow.engines.spark.prefilter import by_query_then_score
from ndcg_mlflow.errors import NdcgError


def long_lists(seed: int, *, n_queries: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Judgments and a run stored query by query: 20-120 documents a query, few judged (grades -1 to 3, some
    judged documents not returned), scores with many ties."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(n_queries):
        docs = [f"d{j}" for j in rng.choice(400, size=int(rng.integers(20, 120)), replace=False)]
        run += [(f"q{q}", d, float(s)) for d, s in zip(docs, rng.integers(0, 8, size=len(docs)) / 4.0)]
        judged = [d for d in docs if rng.random() < 0.25] + [f"x{j}" for j in range(int(rng.integers(0, 3)))]
        qrels += [(f"q{q}", d, int(rng.integers(-1, 4))) for d in judged or ["only"]]
    return pd.DataFrame(qrels, columns=["query_id", "doc_id", "grade"]), pd.DataFrame(
        run, columns=["query_id", "doc_id", "score"]
    )


def spec_of(*, ties: str, cutoffs=(3, 7), unjudged="zero", ideal="judged_catalog") -> dict:
    """The tests' spec without its data section (each test gives its own)."""
    spec = metric_spec("", {}, name="spark-parquet", ties=ties, cutoffs=cutoffs, unjudged=unjudged, ideal=ideal)
    del spec["data"]
    return spec


def _write(folder, run: pd.DataFrame, cuts: list[int], row_group: int, rename: dict[str, str] | None = None) -> list:
    """The run's rows in files ``part-<i>.parquet`` cut at ``cuts`` (written last to first), with row groups of
    ``row_group`` rows; the files in their names' order."""
    folder.mkdir(parents=True, exist_ok=True)
    table = run.rename(columns=rename or {})
    bounds = [0, *cuts, len(run)]
    files = [folder / f"part-{i}.parquet" for i in range(len(bounds) - 1)]
    for i in reversed(range(len(files))):
        part = pa.Table.from_pandas(table.iloc[bounds[i] : bounds[i + 1]], preserve_index=False)
        pq.write_table(part, files[i], row_group_size=row_group)
    return files


def _judged(qrels: pd.DataFrame) -> pa.Table:
    return pa.table(
        {
            "query_id": qrels["query_id"].astype(str).tolist(),
            "doc_id": qrels["doc_id"].astype(str).tolist(),
            "grade": qrels["grade"].astype(float).tolist(),
        }
    )


def _all_tasks(plan, *args, **kwargs) -> pd.DataFrame:
    """Every task's output of the tasks' function, called as Spark calls it (batches of task numbers)."""
    read = plan.reader(*args, **kwargs)
    ids = pa.record_batch({"id": pa.array(range(len(plan.tasks)), type=pa.int64())})
    return pa.Table.from_batches(list(read([ids]))).to_pandas()


def check_kept_rows(kept: pd.DataFrame, run: pd.DataFrame, spec: dict, qrels, from_order: bool, stored: str) -> None:
    """The pre-filtered rows of a whole run (``kept``, read in tasks) against the run: in several chunks, fewer
    than the run's rows, which with the counts of the rest make up the run; a query stored in one stretch in one
    chunk, a scattered one in several; each kept row's ``_order`` its row in the run, and its rank where the
    run's order is its rank (else null); and the local engine's numbers of the whole run from them."""
    assert kept["_chunk"].nunique() > 3 and len(kept) < len(run)
    assert kept["_extra"].sum() + len(kept) == len(run)
    chunks_per_query = kept.groupby("query_id")["_chunk"].nunique()
    assert chunks_per_query.max() == 1 if stored == "by query" else chunks_per_query.max() > 1
    at = kept["_order"].to_numpy()
    assert len(set(at)) == len(at)
    for column in ("query_id", "doc_id", "score"):
        np.testing.assert_array_equal(run[column].to_numpy()[at], kept[column].to_numpy())
    if from_order:
        np.testing.assert_array_equal(kept["rank"].to_numpy(), at.astype(float))
    else:
        assert kept["rank"].isna().all()
    whole = run.assign(rank=np.arange(len(run), dtype=float))
    mine = kept[["query_id", "doc_id", "score", "rank"]]
    cols = ["query_id", "doc_id", "score"] + (["rank"] if from_order else [])
    a = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": whole[cols]}).per_query
    b = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"a": mine[cols]}).per_query
    extra = kept.groupby("query_id")["_extra"].sum()
    b["n_returned"] = b["n_returned"] + b["query_id"].map(extra).fillna(0).astype(b["n_returned"].dtype)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


# --------------------------------------------------------------------------- without Spark


@pytest.mark.parametrize(
    "ties, stored", [("average", "by query"), ("id_descending", "by query"), ("displayed_order", "scattered")]
)
def test_the_tasks_rows_give_the_numbers_of_the_whole_run(tmp_path, monkeypatch, ties, stored):
    """Row groups of 37 and 53 rows over two files, tasks of at least 150 rows, chunks of at least 200: each row
    is read by one task (the kept rows and the counts of the rest make up the run), and they give the local
    engine's numbers of the whole run; each kept row's ``_order`` is its row in the two files read in order, and,
    without a rank column under ``displayed_order``, its rank. A run stored query by query has each query in one
    chunk (no query's duplicates left to check in Spark)."""
    from ndcg_mlflow.engines.spark import prefilter

    qrels, run = long_lists(seed=11)
    if stored == "scattered":
        run = run.sample(frac=1.0, random_state=3).reset_index(drop=True)
    third = len(run) // 3
    files = _write(tmp_path, run, [third], 37, {"query_id": "qid"})
    rest = pa.Table.from_pandas(run.iloc[third:].rename(columns={"query_id": "qid"}), preserve_index=False)
    pq.write_table(rest, files[1], row_group_size=53)
    spec = spec_of(ties=ties, cutoffs=(3, 7))
    metric = resolve_spec(spec, qrels, {"a": run}, None).metric
    from_order = ties == "displayed_order"
    columns = {"query_id": "qid", "doc_id": "doc_id", "score": "score", "rank": None}
    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 150)
    plan = parquet_tasks(files, columns, keep_order=True, rank_from_order=from_order)
    assert plan is not None and plan.rows == len(run) and len(plan.tasks) > 5
    kept = _all_tasks(plan, _judged(qrels), metric, 10, from_order, chunk_rows=200)
    check_kept_rows(kept, run, spec, qrels, from_order, stored)


def test_each_row_is_read_by_the_task_holding_the_first_row_of_its_stretch():
    """Hand-made tasks of row groups (query ids per group): a stretch of one query over three groups and two tasks,
    a task all of whose rows continue an earlier task's stretch, a null id; each task reads the rows whose stretch
    starts in it, and every row is read once."""
    from ndcg_mlflow.engines.spark.parquet_tasks import owned_rows, query_chunks

    groups = [["a", "a"], ["a", "b"], ["b", "b"], ["b", "c"], [None, "c"], ["c", "d"]]
    tasks = [[0, 1], [2], [3, 4], [5]]  # the groups of each task
    items = {g: (0, g, 2 * g) for g in range(len(groups))}

    def group_rows(item):
        _, g, start = item
        yield pa.table({"query_id": pa.array(groups[g], pa.string()), "row": [start, start + 1]})

    def last_query(item):
        return groups[item[1]][-1]

    plan = [[items[g] for g in t] for t in tasks]
    got = [
        [row for table in owned_rows(t, plan, group_rows, last_query) for row in table.column("row").to_pylist()]
        for t in range(len(tasks))
    ]
    assert got == [[0, 1, 2, 3, 4, 5, 6], [], [7, 8, 9, 10], [11]]
    # chunks of at least 3 rows, cut where the query changes
    table = pa.table({"query_id": ["a", "a", "b", "b", "b", "c", None, "d"], "row": list(range(8))})
    chunks = [c.column("row").to_pylist() for c in query_chunks([table.slice(i, 1) for i in range(8)], 3)]
    assert chunks == [[0, 1], [2, 3, 4], [5, 6], [7]]


@settings(max_examples=examples(300), deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([-1.0, 0.0, 0.25, 0.5, 2.0])), max_size=40),
    stored=st.sampled_from(["as drawn", "query by query in rank order", "query by query, scores ascending"]),
)
def test_the_rows_sorted_by_query_then_score_are_numpys_lexsort(rows, stored):
    """The pre-filter's order of a chunk (query, then score descending, ties in the rows' order) is numpy's
    stable ``lexsort`` whether the rows come sorted (a run stored query by query in rank order: the places in
    order, found without sorting) or not."""
    if stored != "as drawn":
        sign = 1 if stored == "query by query in rank order" else -1
        rows = sorted(rows, key=lambda r: (r[0], -sign * r[1]))  # stable: ties keep their order
    codes: dict[int, int] = {}
    query = np.array([codes.setdefault(q, len(codes)) for q, _ in rows], dtype=np.int64)  # order of appearance
    score = np.array([s for _, s in rows], dtype=np.float64)
    got = by_query_then_score(query, score)
    assert got.tolist() == np.lexsort((-score, query)).tolist()


def test_each_row_gets_its_own_grade_in_the_rows_order():
    """Grades by position: each row's (query, document) looked up exactly, rows in their order, null where not
    judged; pairs whose texts joined would be equal (``'a\\x00'`` + ``'b'``, ``'a'`` + ``'\\x00b'``) are apart."""
    judged = pa.table(
        {
            "query_id": ["q1", "q1", "q2", "a\x00", "a", "q10"],
            "doc_id": ["d1", "d2", "d1", "b", "\x00b", "d"],
            "grade": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    rows = pa.table(
        {
            "query_id": ["q2", "q1", "q1", "q3", "a", "a\x00", "q1", "q1", "q10"],
            "doc_id": ["d1", "d2", "d9", "d1", "\x00b", "b", "0d", "d1", "d"],
        }
    )
    expected = {(q, d): g for q, d, g in zip(*[judged.column(c).to_pylist() for c in judged.column_names])}
    got = grades_of(rows, grade_lookup(judged)).to_pylist()
    assert got == [expected.get(p) for p in zip(rows.column(0).to_pylist(), rows.column(1).to_pylist())]
    assert got == [3.0, 2.0, None, None, 5.0, 4.0, None, 1.0, 6.0]


def test_a_run_the_tasks_cannot_read_is_left_to_sparks_reader(tmp_path):
    """No plan (Spark's reader then reads the run, with its checks) for a file pyarrow cannot open, a missing
    column, a column type the local reader refuses (a decimal score), a run without rows; integer ids and a
    rank column are planned, row groups cut into tasks of at least the pre-filter's chunk rows."""
    from decimal import Decimal

    from ndcg_mlflow.engines.spark import prefilter

    columns = {"query_id": "query_id", "doc_id": "doc_id", "score": "score", "rank": None}
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not a parquet file")
    assert parquet_tasks([tmp_path / "bad.parquet"], columns, False, False) is None
    pq.write_table(pa.table({"query_id": ["q"], "doc_id": ["d"]}), tmp_path / "noscore.parquet")
    assert parquet_tasks([tmp_path / "noscore.parquet"], columns, False, False) is None
    decimal = pa.table({"query_id": ["q"], "doc_id": ["d"], "score": pa.array([Decimal("1.5")], pa.decimal128(4, 2))})
    pq.write_table(decimal, tmp_path / "decimal.parquet")
    assert parquet_tasks([tmp_path / "decimal.parquet"], columns, False, False) is None
    pq.write_table(pa.table({"query_id": pa.array([], pa.string()), "doc_id": [], "score": []}), tmp_path / "e.parquet")
    assert parquet_tasks([tmp_path / "e.parquet"], columns, False, False) is None
    ints = pa.table({"query_id": np.arange(10), "doc_id": np.arange(10) * 7, "score": np.ones(10), "rank": np.ones(10)})
    pq.write_table(ints, tmp_path / "ints.parquet", row_group_size=3)
    with_rank = {**columns, "rank": "rank"}
    plan = parquet_tasks([tmp_path / "ints.parquet"], with_rank, False, False)
    assert plan is not None and plan.rows == 10 and len(plan.tasks) == 1
    saved = prefilter.PREFILTER_CHUNK_ROWS
    prefilter.PREFILTER_CHUNK_ROWS = 5
    try:
        plan = parquet_tasks([tmp_path / "ints.parquet"], with_rank, False, False)
    finally:
        prefilter.PREFILTER_CHUNK_ROWS = saved
    assert plan is not None
    assert plan.tasks == (((0, 0, 0), (0, 1, 3)), ((0, 2, 6), (0, 3, 9)))  # (file, row group, first row)


# --------------------------------------------------------------------------- on Spark


def _spy(monkeypatch, kind: type | None = None) -> list:
    """The plans whose rows the tasks read (their ``prefiltered`` calls), of ``kind`` (default ParquetTasks)."""
    from ndcg_mlflow.engines.spark.parquet_tasks import ParquetTasks

    kind = kind or ParquetTasks
    calls: list = []
    real = kind.prefiltered

    def spied(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(kind, "prefiltered", spied)
    return calls


CASES = [
    ("average", {"cutoffs": (5, 10)}),
    ("displayed_order", {"cutoffs": (3,), "unjudged": "condense"}),
    ("id_descending", {"cutoffs": (1, 10), "ideal": "candidates"}),
]


@pytest.mark.integration
@pytest.mark.parametrize("ties, rules", CASES, ids=[c[0] for c in CASES])
def test_a_parquet_run_read_in_tasks_gives_the_local_numbers(spark, tmp_path, monkeypatch, ties, rules):
    """A folder of three Parquet files (a query's rows across two of them), row groups of 41 rows, tasks and
    chunks of at least 150 rows, its columns named otherwise (a mapping): the local engine's per-query numbers,
    top lists, digests and row counts; the tasks read it."""
    from test_spark import assert_same

    from ndcg_mlflow import Spark
    from ndcg_mlflow.engines.spark import prefilter

    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 150)
    qrels, run = long_lists(seed=21)
    _write(tmp_path / "run", run, [len(run) // 3 + 5, 2 * len(run) // 3], 41, {"doc_id": "item"})
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    spec = spec_of(ties=ties, **rules)
    spec["data"] = {
        "qrels": "qrels.csv",
        "systems": {"p": {"path": "run", "format": "parquet", "columns": {"doc_id": "item"}}},
    }
    calls = _spy(monkeypatch)
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=3), base_dir=tmp_path)
    assert len(calls) == 1 and len(calls[0].tasks) > 1
    assert remote.engine_info["prefilter"]["applied"]
    assert remote.engine_info["systems"]["p"]["rows_shuffled"] < len(run)
    assert_same(local, remote)
    assert [(f.sha256, f.rows) for f in local.files] == [(f.sha256, f.rows) for f in remote.files]


def _outcome(spark, spec, folder, **engine) -> str:
    from ndcg_mlflow import Spark

    try:
        ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2, **engine), base_dir=folder)
    except NdcgError as exc:
        return str(exc)
    raise AssertionError("the run was accepted")


@pytest.mark.integration
def test_the_checks_and_messages_are_those_of_sparks_reader(spark, tmp_path, monkeypatch):
    """Runs the checks refuse (a document twice, below the cut, in another task or next to the query's rows; a
    score that is not finite; a null document; a rank that is not an integer): read in tasks, the message is the
    one of Spark's reader with the broadcast join (the tasks turned off) and names the same rows."""
    from ndcg_mlflow.engines.spark import judgments, prefilter

    monkeypatch.setattr(prefilter, "PREFILTER_CHUNK_ROWS", 100)
    qrels, run = long_lists(seed=9, n_queries=6)
    run = run.assign(rank=run.groupby("query_id").cumcount().astype(float) + 1)
    low = run.sort_values("score").groupby("query_id").head(2)
    bad = {
        "twice-far": pd.concat([run, low], ignore_index=True),
        "twice-near": pd.concat([run, low]).sort_values("query_id", kind="stable").reset_index(drop=True),
        "nan-score": run.assign(score=np.where(np.arange(len(run)) == 40, np.nan, run["score"])),
        "null-doc": run.assign(doc_id=np.where(np.arange(len(run)) == 7, None, run["doc_id"])),
        "half-rank": run.assign(rank=np.where(np.arange(len(run)) == 70, 2.5, run["rank"])),
    }
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    calls = _spy(monkeypatch)
    for case, frame in bad.items():
        _write(tmp_path / case, frame, [len(frame) // 2], 64)
        spec = spec_of(ties="average", cutoffs=(3,))
        spec["data"] = {"qrels": "qrels.csv", "systems": {"s": case}}
        before = len(calls)
        mine = _outcome(spark, spec, tmp_path)
        assert len(calls) == before + 1, case
        with monkeypatch.context() as m:
            m.setattr(judgments, "SHIPPED_JUDGMENTS_BYTES", -1)  # Spark's reader, the judgments joined
            theirs = _outcome(spark, spec, tmp_path)
        assert len(calls) == before + 1, case
        assert mine == theirs, case
        assert str(tmp_path / case) in mine, case


@pytest.mark.integration
def test_engine_info_says_how_each_run_was_read(spark, tmp_path):
    """``engine_info.systems.<name>.read_by``: a Parquet folder pre-filtered in tasks, or read by Spark's reader
    when the pre-filter is off; a TREC file by the local reader in a task, pre-filtered there unless the pre-filter
    is off; a DataFrame as given. The numbers are
    the local engine's either way."""
    from test_spark import assert_same

    from ndcg_mlflow import Spark

    qrels, run = long_lists(seed=4, n_queries=8)
    _write(tmp_path / "run", run, [len(run) // 2], 50)
    lines = [f"{q} Q0 {d} {i + 1} {s} t" for i, (q, d, s) in enumerate(run.itertuples(index=False, name=None))]
    (tmp_path / "run.trec").write_text("\n".join(lines) + "\n")
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    spec = spec_of(ties="id_descending", cutoffs=(3, 7))
    spec["data"] = {"qrels": "qrels.csv", "systems": {"p": "run", "t": "run.trec"}}
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path)
    on = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2), base_dir=tmp_path)
    off = ndcg_mlflow.evaluate(spec, engine=Spark(spark, buckets=2, prefilter=False), base_dir=tmp_path)
    framed = ndcg_mlflow.evaluate(
        spec, engine=Spark(spark, buckets=2), base_dir=tmp_path, systems={"p": spark.createDataFrame(run)}
    )
    read_by = [{n: s["read_by"] for n, s in r.engine_info["systems"].items()} for r in (on, off, framed)]
    parquet_tasks_read = "pyarrow in Spark tasks, pre-filtered there"
    assert read_by == [
        {"p": parquet_tasks_read, "t": "the local reader in a Spark task, pre-filtered there"},
        {"p": "Spark's parquet reader", "t": "the local reader in a Spark task"},
        {"p": "a Spark DataFrame"},
    ]
    assert_same(local, on)
    assert_same(local, off)


# --------------------------------------------------------------------------- column names, by the readers' rule

# (case, the file, its columns beyond query_id and doc_id: the values' column and a decoy, the mapping)
NAMED = [
    ("run-s-and-score", "run", ("s", "score"), {"score": "s"}),
    ("run-score-and-SCORE", "run", ("score", "SCORE"), {}),
    ("run-SCORE-mapped", "run", ("SCORE", "score"), {"score": "SCORE"}),
    ("qrels-g-and-grade", "qrels", ("g", "grade"), {"grade": "g"}),
    ("qrels-grade-and-GRADE", "qrels", ("grade", "GRADE"), {}),
]


def _named_files(folder, kind: str, names: tuple[str, str], mapping: dict) -> dict:
    """Judgments and a run whose ``kind`` file is Parquet with its values under ``names[0]`` and a decoy (other
    values, which give other numbers) under ``names[1]``; the other file CSV with the tool's names. Returns the
    spec's data section and the same data as plain tables (the expected numbers' input)."""
    qrels, run = long_lists(seed=5, n_queries=8)
    value = "score" if kind == "run" else "grade"
    frame = run if kind == "run" else qrels
    decoy = frame[value].to_numpy()[::-1].copy()
    stored = frame.drop(columns=[value]).assign(**{names[0]: frame[value], names[1]: decoy})
    pq.write_table(pa.Table.from_pandas(stored, preserve_index=False), folder / f"{kind}.parquet", row_group_size=40)
    other = "qrels" if kind == "run" else "run"
    (qrels if kind == "run" else run).to_csv(folder / f"{other}.csv", index=False)
    source = {"path": f"{kind}.parquet", "columns": mapping} if mapping else f"{kind}.parquet"
    files = {"run": source if kind == "run" else "run.csv", "qrels": source if kind == "qrels" else "qrels.csv"}
    return {"data": {"qrels": files["qrels"], "systems": {"p": files["run"]}}, "qrels": qrels, "run": run}


@pytest.mark.integration
@pytest.mark.parametrize("case, kind, names, mapping", NAMED, ids=[c[0] for c in NAMED])
def test_a_parquet_files_columns_are_the_local_readers_on_spark(spark, tmp_path, case, kind, names, mapping):
    """A column the mapping replaces (``{score: s}`` beside a ``score`` column) is not read, and names that differ
    by case alone (``score`` and ``SCORE``) are two columns, as the local readers read them: Spark gives the
    numbers of the same data in plain tables, read in tasks, by Spark's reader (no pre-filter), and, for
    judgments, kept in Spark (the grouped path) - where it refused the file or took the decoy."""
    from ndcg_mlflow import Spark
    from ndcg_mlflow.engines.spark import evaluate_grouped

    made = _named_files(tmp_path, kind, names, mapping)
    spec = {**spec_of(ties="average", cutoffs=(3, 10)), "data": made["data"]}
    expected = ndcg_mlflow.evaluate(spec, qrels=made["qrels"], systems={"p": made["run"]}).per_query
    local = ndcg_mlflow.evaluate(spec, base_dir=tmp_path).per_query
    pd.testing.assert_frame_equal(local, expected, check_exact=True)
    for engine in (Spark(spark, buckets=2), Spark(spark, buckets=2, prefilter=False)):
        remote = ndcg_mlflow.evaluate(spec, engine=engine, base_dir=tmp_path).per_query
        pd.testing.assert_frame_equal(remote, expected, check_exact=True)
    if kind == "qrels":
        result = evaluate_grouped(
            spec, per_query_path=tmp_path / "grouped", base_dir=tmp_path, spark=spark, driver_judgments=0
        )

        def rows(table: pd.DataFrame) -> list[tuple]:
            return sorted((q, str(c), float(v).hex()) for q, c, v in table[["query_id", "cutoff", "ndcg"]].to_numpy())

        assert rows(pd.read_parquet(result.per_query_path)) == rows(expected)


@pytest.mark.integration
def test_a_spark_dataframe_with_names_that_differ_by_case(spark, tmp_path):
    """A run DataFrame with ``score`` and ``SCORE`` (and ``s``, mapped): its columns taken by the readers' rule,
    by their place, as a table in memory is read locally."""
    from ndcg_mlflow import Spark

    qrels, run = long_lists(seed=6, n_queries=6)
    decoy = run["score"].to_numpy()[::-1].copy()
    table = pa.table({"query_id": run["query_id"], "doc_id": run["doc_id"], "score": run["score"], "SCORE": decoy})
    spec = spec_of(ties="average", cutoffs=(3,))
    expected = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"p": run}).per_query
    for frame, mapping in ((table, {}), (table.rename_columns(["query_id", "doc_id", "s", "score"]), {"score": "s"})):
        local = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"p": (frame, mapping)}).per_query
        pd.testing.assert_frame_equal(local, expected, check_exact=True)
        df = spark.createDataFrame(frame)
        remote = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"p": (df, mapping)}, engine=Spark(spark)).per_query
        pd.testing.assert_frame_equal(remote, expected, check_exact=True)


@pytest.mark.integration
def test_segments_and_judgments_mappings_giving_a_column_two_purposes_are_refused_on_spark(spark, tmp_path):
    """``{segment: query_id}`` and ``{grade: doc_id}``: refused on Spark in the local engine's words, naming the
    file."""
    from ndcg_mlflow import Spark

    made = _named_files(tmp_path, "run", ("score", "SCORE"), {})
    qrels = made["qrels"]
    pq.write_table(
        pa.table({"query_id": qrels["query_id"].unique(), "segment": ["s"] * qrels["query_id"].nunique()}),
        tmp_path / "seg.parquet",
    )
    base = {**spec_of(ties="average", cutoffs=(3,)), "data": made["data"]}
    segments = {**base, "queries": {"weights": "uniform", "segments": {"path": "seg.parquet", "columns": {}}}}
    segments["queries"]["segments"]["columns"] = {"segment": "query_id"}
    judged = {**base, "data": {**base["data"], "qrels": {"path": "qrels.csv", "columns": {"grade": "doc_id"}}}}
    for spec, file in ((segments, "seg.parquet"), (judged, "qrels.csv")):
        words = []
        for engine in (None, Spark(spark, buckets=2)):
            with pytest.raises(NdcgError) as err:
                ndcg_mlflow.evaluate(spec, base_dir=tmp_path, **({"engine": engine} if engine else {}))
            assert file in str(err.value) and "serves one purpose" in str(err.value), str(err.value)
            words.append(str(err.value))
        assert words[0] == words[1]


@pytest.mark.integration
def test_a_mapping_given_for_every_table_maps_each_tables_own_columns_on_spark(spark):
    """``columns={"grade": "score"}`` for judgments whose grades are in a ``score`` column, given for every table:
    a run's ``score`` column stays its score, on Spark as locally (its DataFrame is not read as having a grade and
    no score)."""
    from ndcg_mlflow import Spark

    qrels, run = long_lists(seed=8, n_queries=5)
    spec = spec_of(ties="average", cutoffs=(3,))
    expected = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"p": run}).per_query
    stored = qrels.rename(columns={"grade": "score"})
    local = ndcg_mlflow.evaluate(spec, qrels=stored, systems={"p": run}, columns={"grade": "score"}).per_query
    pd.testing.assert_frame_equal(local, expected, check_exact=True)
    frames = {"qrels": spark.createDataFrame(stored), "systems": {"p": spark.createDataFrame(run)}}
    remote = ndcg_mlflow.evaluate(spec, **frames, columns={"grade": "score"}, engine=Spark(spark)).per_query
    pd.testing.assert_frame_equal(remote, expected, check_exact=True)
