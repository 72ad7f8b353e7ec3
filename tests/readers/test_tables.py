"""Tables in memory (pyarrow, pandas, polars, DuckDB, nested dicts), Parquet folders and globs, compressed
text files and column mappings: each gives exactly what the same rows in a plain file give."""

from __future__ import annotations

import gzip
import hashlib
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import ndcg_mlflow
from ndcg_mlflow import DataError, SpecError
from ndcg_mlflow.readers import table_from_object

METRIC = {
    "gain": "exponential",
    "cutoffs": [3, 10, "all"],
    "discount": "log2",
    "ties": "displayed_order",
    "ideal": "judged_catalog",
    "empty_ideal": "exclude",
    "unjudged": "zero",
    "missing_queries": "zero",
}
EXTRA = {
    "uncertainty": {"resamples": 200, "confidence": 0.9, "method": "bca", "seed": 3},
    "comparison": {"baseline": "v3", "test": "both", "correction": "holm", "wins_losses": 3, "tie_tolerance": 1e-9},
}


def _qrels_rows() -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(7)
    rows = []
    for q in range(1, 13):
        for d in rng.choice(40, size=8, replace=False):
            rows.append((f"q{q}", f"d{d}", float(rng.integers(0, 4))))
    return rows


def _run_rows(seed: int) -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(1, 12):  # q12 is judged and never returned (missing)
        for d in rng.choice(40, size=12, replace=False):
            rows.append((f"q{q}", f"d{d}", float(rng.integers(0, 5)) / 2))  # many tied scores: row order counts
    return rows


QRELS = _qrels_rows()
RUNS = {"v3": _run_rows(1), "v4": _run_rows(2)}


def _columns(rows, value: str) -> dict[str, list]:
    return {"query_id": [r[0] for r in rows], "doc_id": [r[1] for r in rows], value: [r[2] for r in rows]}


def _as(lib: str, rows, value: str):
    cols = _columns(rows, value)
    if lib == "pyarrow":
        return pa.table(cols)
    if lib == "reader":
        return pa.table(cols).to_reader()
    if lib == "pandas":
        return pd.DataFrame(cols)
    if lib == "polars":
        pl = pytest.importorskip("polars")
        return pl.DataFrame(cols)
    if lib == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        frame = pa.table(cols)  # noqa: F841 (read by name by DuckDB's replacement scan)
        return duckdb.sql("select * from frame")
    if lib == "dict":
        out: dict = {}
        for q, d, v in rows:
            out.setdefault(q, {})[d] = v
        return out
    raise AssertionError(lib)


def _spec(**extra) -> dict:
    return {
        "spec_version": 1,
        "name": "tables",
        "metric": dict(METRIC),
        "queries": {"weights": "uniform"},
        **EXTRA,
        **extra,
    }


def _write_files(folder) -> dict:
    (folder / "qrels.csv").write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},{g:g}\n" for q, d, g in QRELS))
    for name, rows in RUNS.items():
        (folder / f"{name}.csv").write_text("query_id,doc_id,score\n" + "".join(f"{q},{d},{s!r}\n" for q, d, s in rows))
    return {"qrels": "qrels.csv", "systems": {name: f"{name}.csv" for name in RUNS}}


@pytest.fixture
def from_files(tmp_path):
    data = _write_files(tmp_path)
    return ndcg_mlflow.evaluate(_spec(data=data), base_dir=tmp_path)


def _same_result(a, b) -> None:
    pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
    assert a.summary["systems"] == b.summary["systems"]
    assert a.summary["comparisons"] == b.summary["comparisons"]


@pytest.mark.parametrize("lib", ["pyarrow", "reader", "pandas", "polars", "duckdb", "dict"])
def test_each_library_gives_the_per_query_table_of_the_files(from_files, lib):
    result = ndcg_mlflow.evaluate(
        _spec(), qrels=_as(lib, QRELS, "grade"), systems={name: _as(lib, rows, "score") for name, rows in RUNS.items()}
    )
    _same_result(result, from_files)
    assert result.summary["files"]["qrels"]["path"] == "in-memory table"


def test_evaluate_tables_is_the_core_that_evaluate_calls(from_files):
    result = ndcg_mlflow.evaluate_tables(
        _spec(), _as("pandas", QRELS, "grade"), {name: _as("pyarrow", rows, "score") for name, rows in RUNS.items()}
    )
    _same_result(result, from_files)


def test_tables_may_replace_part_of_the_data_section(tmp_path, from_files):
    data = _write_files(tmp_path)
    only_runs = ndcg_mlflow.evaluate(
        _spec(data=data), base_dir=tmp_path, systems={name: _as("polars", rows, "score") for name, rows in RUNS.items()}
    )
    only_qrels = ndcg_mlflow.evaluate(_spec(data=data), base_dir=tmp_path, qrels=_as("dict", QRELS, "grade"))
    _same_result(only_runs, from_files)
    _same_result(only_qrels, from_files)


def test_the_data_section_is_required_unless_both_parts_are_given():
    with pytest.raises(SpecError, match="at key 'data': missing required key"):
        ndcg_mlflow.evaluate(_spec())
    with pytest.raises(SpecError, match="at key 'data'.*only the judgments were given"):
        ndcg_mlflow.evaluate(_spec(), qrels=_as("dict", QRELS, "grade"))
    with pytest.raises(SpecError, match="comparison.baseline"):
        ndcg_mlflow.evaluate(
            _spec(), qrels=_as("dict", QRELS, "grade"), systems={"x": _as("dict", RUNS["v3"], "score")}
        )


def test_integer_ids_are_their_decimal_text(tmp_path):
    qrels = pd.DataFrame({"query_id": [1, 1, 2, 2], "doc_id": [10, 11, 10, 12], "grade": [1, 0, 2, 1]})
    run = pd.DataFrame(
        {"query_id": np.array([1, 1, 2], dtype=np.int32), "doc_id": [11, 10, 12], "score": [3.0, 2.0, 1.0]}
    )
    (tmp_path / "q.csv").write_text("query_id,doc_id,grade\n1,10,1\n1,11,0\n2,10,2\n2,12,1\n")
    (tmp_path / "r.csv").write_text("query_id,doc_id,score\n1,11,3\n1,10,2\n2,12,1\n")
    spec = {**_spec(), "comparison": None, "uncertainty": None}
    spec = {k: v for k, v in spec.items() if v is not None}
    a = ndcg_mlflow.evaluate(spec, qrels=qrels, systems={"v3": run})
    b = ndcg_mlflow.evaluate({**spec, "data": {"qrels": "q.csv", "systems": {"v3": "r.csv"}}}, base_dir=tmp_path)
    pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
    assert list(a.query_ids) == ["1", "2"]


@pytest.mark.parametrize("string_type", ["large_string", "string_view", "dictionary"])
def test_every_arrow_string_type_is_read_as_text(from_files, string_type):
    def typed(rows, value):
        table = pa.table(_columns(rows, value))
        for c in ("query_id", "doc_id"):
            col = table.column(c)
            col = (
                col.cast(pa.large_string())
                if string_type == "large_string"
                else col.cast(pa.string_view())
                if string_type == "string_view"
                else col.dictionary_encode()
            )
            table = table.set_column(table.schema.get_field_index(c), c, col)
        return table

    result = ndcg_mlflow.evaluate(
        _spec(), qrels=typed(QRELS, "grade"), systems={n: typed(rows, "score") for n, rows in RUNS.items()}
    )
    _same_result(result, from_files)


def test_pandas_default_strings_and_polars_views(from_files):
    pl = pytest.importorskip("polars")
    qrels = pd.DataFrame(_columns(QRELS, "grade")).astype({"query_id": "string", "doc_id": "string"})
    runs = {
        n: pl.DataFrame(_columns(rows, "score")).with_columns(pl.col("doc_id").cast(pl.Categorical))
        for n, rows in RUNS.items()
    }
    _same_result(ndcg_mlflow.evaluate(_spec(), qrels=qrels, systems=runs), from_files)


# --------------------------------------------------------------------------- errors name the table and the row


@pytest.mark.parametrize(
    "change, match",
    [
        (
            lambda df: df.assign(score=df["score"].where(df.index != 4, np.inf)),
            r"systems\['v3'\]: row 5: score must "
            r"be a finite number",
        ),
        (lambda df: df.assign(score=df["score"].where(df.index != 2, None)), r"systems\['v3'\]: row 3: score"),
        (
            lambda df: df.assign(doc_id=df["doc_id"].where(df.index != 6, "")),
            r"systems\['v3'\]: row 7: doc_id is "
            r"empty",
        ),
        (
            lambda df: pd.concat([df, df.iloc[[1]]], ignore_index=True),
            r"systems\['v3'\]: row 133: document 'd\d+' is "
            r"listed twice for query 'q1' \(first at row 2\)",
        ),
        (lambda df: df.assign(score=df["score"].astype(str)), r"systems\['v3'\]: column score must be numeric"),
        (
            lambda df: df.assign(doc_id=df["doc_id"].map(lambda d: 1.5)),
            r"systems\['v3'\]: column doc_id must hold "
            r"strings",
        ),
        (lambda df: df.drop(columns=["score"]), r"systems\['v3'\]: missing column\(s\) score \(or rank\)"),
        (lambda df: df.iloc[0:0], r"systems\['v3'\]: the table has no rows"),
        (lambda df: {}, r"systems\['v3'\]: the table has no rows"),
    ],
    ids=["inf", "null", "empty-id", "duplicate", "text-score", "float-id", "missing-column", "no-rows", "empty-dict"],
)
def test_bad_rows_are_refused_naming_the_table_and_row(change, match):
    run = change(pd.DataFrame(_columns(RUNS["v3"], "score")))
    with pytest.raises(DataError, match=match):
        ndcg_mlflow.evaluate(
            _spec(), qrels=_as("pandas", QRELS, "grade"), systems={"v3": run, "v4": _as("pandas", RUNS["v4"], "score")}
        )


def test_bad_judgments_and_dicts_are_refused_naming_them():
    qrels = pd.DataFrame(_columns(QRELS, "grade"))
    twice = pd.concat([qrels, qrels.iloc[[0]].assign(grade=9.0)], ignore_index=True)
    runs = {n: _as("dict", rows, "score") for n, rows in RUNS.items()}
    with pytest.raises(DataError, match=r"^qrels: row 97: document .* is judged twice with different grades"):
        ndcg_mlflow.evaluate(_spec(), qrels=twice, systems=runs)
    with pytest.raises(
        DataError,
        match=r"^systems\['v4'\]: \['q1'\]\['d3'\]: score must be a finite number, got "
        r"nan",
    ):
        ndcg_mlflow.evaluate(_spec(), qrels=qrels, systems={**runs, "v4": {"q1": {"d3": math.nan}}})
    with pytest.raises(DataError, match=r"systems\['v3'\]: cannot be read as a table \(int\)"):
        ndcg_mlflow.evaluate(_spec(), qrels=qrels, systems={**runs, "v3": 5})


# --------------------------------------------------------------------------- column mappings


def _renamed(rows, value: str, names: dict):
    return pd.DataFrame(_columns(rows, value)).rename(columns=names)


NAMES = {"query_id": "userID", "doc_id": "itemID", "grade": "rating", "score": "prediction"}


def test_a_column_mapping_in_the_api(from_files):
    qrels = _renamed(QRELS, "grade", NAMES)
    runs = {n: _renamed(rows, "score", NAMES) for n, rows in RUNS.items()}
    _same_result(ndcg_mlflow.evaluate(_spec(), qrels=qrels, systems=runs, columns=NAMES), from_files)
    pairs = {
        n: (polars_or_pandas, {"score": "prediction"})
        for n, polars_or_pandas in ((n, _renamed(rows, "score", {"score": "prediction"})) for n, rows in RUNS.items())
    }
    _same_result(
        ndcg_mlflow.evaluate(_spec(), qrels=(qrels, {k: v for k, v in NAMES.items() if k != "score"}), systems=pairs),
        from_files,
    )


def test_a_mapped_name_hides_the_column_it_replaces():
    run = _renamed(RUNS["v3"], "score", {"score": "prediction"}).assign(score="not this one")
    table = table_from_object(run, "run", "systems['v3']", {"score": "prediction"})
    assert table.value.tolist() == [r[2] for r in RUNS["v3"]]


def test_a_column_mapping_in_the_spec(tmp_path, from_files):
    _renamed(QRELS, "grade", NAMES).to_csv(tmp_path / "ratings.csv", index=False)
    pq.write_table(
        pa.Table.from_pandas(_renamed(RUNS["v3"], "score", NAMES), preserve_index=False), tmp_path / "v3.parquet"
    )
    _renamed(RUNS["v4"], "score", NAMES).to_json(tmp_path / "v4.jsonl", orient="records", lines=True)
    mapping = {"query_id": "userID", "doc_id": "itemID"}
    data = {
        "qrels": {"path": "ratings.csv", "columns": {**mapping, "grade": "rating"}},
        "systems": {
            "v3": {"path": "v3.parquet", "columns": {**mapping, "score": "prediction"}},
            "v4": {"path": "v4.jsonl", "columns": {**mapping, "score": "prediction"}},
        },
    }
    result = ndcg_mlflow.evaluate(_spec(data=data), base_dir=tmp_path)
    _same_result(result, from_files)
    assert result.spec.resolved()["data.systems.v3.columns"] == "query_id=userID,doc_id=itemID,score=prediction"
    with pytest.raises(SpecError, match=r"data.systems.v3.columns.scor': unknown column \(did you mean 'score'"):
        ndcg_mlflow.evaluate(
            _spec(data={**data, "systems": {"v3": {"path": "v3.parquet", "columns": {"scor": "x"}}}}), base_dir=tmp_path
        )


# --------------------------------------------------------------------------- folders, globs, compressed files


def _parquet_parts(tmp_path):
    whole = {n: pa.table(_columns(rows, "score")) for n, rows in RUNS.items()}
    for n, table in whole.items():
        pq.write_table(table, tmp_path / f"{n}.parquet")
        folder = tmp_path / n
        folder.mkdir()
        for i, start in enumerate(range(0, table.num_rows, 50)):
            pq.write_table(table.slice(start, 50), folder / f"part-{i:03d}.parquet")
    return whole


def test_a_parquet_folder_or_glob_is_its_files_in_sorted_order(tmp_path):
    _parquet_parts(tmp_path)
    (tmp_path / "qrels.csv").write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},{g:g}\n" for q, d, g in QRELS))
    single = ndcg_mlflow.evaluate(
        _spec(data={"qrels": "qrels.csv", "systems": {"v3": "v3.parquet", "v4": "v4.parquet"}}), base_dir=tmp_path
    )
    parts = ndcg_mlflow.evaluate(
        _spec(data={"qrels": "qrels.csv", "systems": {"v3": "v3", "v4": "v4/part-*.parquet"}}), base_dir=tmp_path
    )
    _same_result(parts, single)
    files = sorted((tmp_path / "v3").glob("*.parquet"))
    assert len(files) == 3
    expected = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    assert parts.summary["files"]["system:v3"]["sha256"] == expected


def test_an_empty_folder_or_glob_is_refused(tmp_path):
    (tmp_path / "qrels.csv").write_text("query_id,doc_id,grade\nq1,d1,1\n")
    (tmp_path / "empty").mkdir()
    for path, match in (
        ("empty", "is a directory, not a file, and holds no .parquet files"),
        ("nothing-*.parquet", "the pattern matches no file"),
    ):
        with pytest.raises(SpecError, match=match):
            ndcg_mlflow.evaluate(
                _spec(data={"qrels": "qrels.csv", "systems": {"v3": path, "v4": path}}), base_dir=tmp_path
            )


def _compress(data: bytes, codec: str) -> bytes:
    if codec == "gz":
        return gzip.compress(data)
    return _zstd(data)


def _zstd(data: bytes) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(data)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("codec", ["gz", "zst"])
def test_compressed_text_files_equal_the_plain_ones(tmp_path, codec):
    data = _write_files(tmp_path)
    trec = "".join(f"{q} Q0 {d} {i + 1} {s!r} t\n" for i, (q, d, s) in enumerate(RUNS["v4"]))
    (tmp_path / "v4.run").write_text(trec)
    plain = ndcg_mlflow.evaluate(_spec(data={**data, "systems": {"v3": "v3.csv", "v4": "v4.run"}}), base_dir=tmp_path)
    for name in ("qrels.csv", "v3.csv", "v4.run"):
        (tmp_path / f"{name}.{codec}").write_bytes(_compress((tmp_path / name).read_bytes(), codec))
    packed = ndcg_mlflow.evaluate(
        _spec(data={"qrels": f"qrels.csv.{codec}", "systems": {"v3": f"v3.csv.{codec}", "v4": f"v4.run.{codec}"}}),
        base_dir=tmp_path,
    )
    _same_result(packed, plain)
    digest = hashlib.sha256((tmp_path / f"qrels.csv.{codec}").read_bytes()).hexdigest()
    assert packed.summary["files"]["qrels"]["sha256"] == digest  # the file as stored


@pytest.mark.parametrize("codec", ["gz", "zst"])
def test_the_line_reader_names_the_line_of_a_compressed_file(tmp_path, codec):
    from ndcg_mlflow.readers import read_run

    text = "q1 Q0 d1 1 2.0 t\nq1\tQ0 d2 2 1.0 t\nq1 Q0 d3 3 x t\n"  # tabs and spaces: the line-by-line reader
    (tmp_path / f"r.run.{codec}").write_bytes(_compress(text.encode(), codec))
    with pytest.raises(DataError, match=rf"r.run.{codec}:3: score must be a number"):
        read_run(tmp_path / f"r.run.{codec}")
    (tmp_path / f"bad.run.{codec}").write_bytes(b"not compressed at all\n")
    with pytest.raises(DataError, match=r"not readable as (gzip|zstd) data"):
        read_run(tmp_path / f"bad.run.{codec}")


# --------------------------------------------------------------------------- digests


@pytest.mark.parametrize("lib", ["pyarrow", "pandas", "polars", "duckdb", "dict"])
def test_the_digest_is_the_same_in_every_library(lib):
    reference = table_from_object(_as("pyarrow", RUNS["v3"], "score"), "run", "r").digest
    assert table_from_object(_as(lib, RUNS["v3"], "score"), "run", "r").digest == reference


def test_the_digest_changes_with_the_content_and_is_recorded():
    base = table_from_object(_as("pandas", RUNS["v3"], "score"), "run", "r").digest
    changed = [list(RUNS["v3"]) for _ in range(3)]
    changed[0][0] = (changed[0][0][0], changed[0][0][1], changed[0][0][2] + 0.5)  # a score
    changed[1][0] = (changed[1][0][0], changed[1][0][1] + "x", changed[1][0][2])  # a doc id
    changed[2][0], changed[2][1] = changed[2][1], changed[2][0]  # row order (orders ties)
    digests = {table_from_object(_as("pandas", rows, "score"), "run", "r").digest for rows in changed}
    assert len(digests | {base}) == 4
    one = ndcg_mlflow.evaluate(
        _spec(),
        qrels=_as("pandas", QRELS, "grade"),
        systems={n: _as("pandas", rows, "score") for n, rows in RUNS.items()},
    )
    other = ndcg_mlflow.evaluate(
        _spec(),
        qrels=_as("pandas", QRELS[:-1], "grade"),
        systems={n: _as("polars", rows, "score") for n, rows in RUNS.items()},
    )
    assert one.summary["files"]["system:v3"]["sha256"] == base
    assert one.summary["files"]["system:v4"]["sha256"] == other.summary["files"]["system:v4"]["sha256"]
    assert one.summary["files"]["qrels"]["sha256"] != other.summary["files"]["qrels"]["sha256"]


# --------------------------------------------------------------------------- the join on parts of the queries


def test_the_join_of_a_partition_of_queries_gives_the_rows_of_the_whole():
    from ndcg_mlflow.join import compute, join, judgments
    from ndcg_mlflow.spec import InMemory, load_spec

    spec = load_spec(_spec(), tables=InMemory(True, ("v3", "v4")))
    qrels = table_from_object(_as("pyarrow", QRELS, "grade"), "qrels", "qrels")
    run = table_from_object(_as("pyarrow", RUNS["v3"], "score"), "run", "v3")
    ids = np.array(sorted({q for q, _, _ in QRELS}), dtype=object)
    whole = compute(spec.metric, *_joined(join, judgments, qrels, run, ids, spec))
    for part in (ids[::2], ids[1::2]):
        got = compute(spec.metric, *_joined(join, judgments, qrels, run, part, spec))
        rows = np.searchsorted(ids, part)
        np.testing.assert_array_equal(got.ndcg, whole.ndcg[rows])


def _joined(join, judgments, qrels, run, ids, spec):
    judged = judgments(qrels, ids, spec.metric)
    prep, _ = join("v3", run, judged)
    return prep, judged.catalog


# --------------------------------------------------------------------------- tracking


def test_in_memory_digests_are_the_tags_and_compare_refuses_other_judgments(tracking_uri, tmp_path):
    from ndcg_mlflow.errors import NdcgError
    from ndcg_mlflow.outputs import write_outputs
    from ndcg_mlflow.tracking import compare_runs, log_evaluation

    spec = {k: v for k, v in _spec().items() if k != "comparison"}
    logged = {}
    for label, qrels in (("all", QRELS), ("fewer", QRELS[:-1])):
        result = ndcg_mlflow.evaluate(
            spec,
            qrels=_as("pandas", qrels, "grade"),
            systems={n: _as("polars", rows, "score") for n, rows in RUNS.items()},
        )
        out = write_outputs(result, tmp_path / label, reports=False)
        logged[label] = (result, log_evaluation(result, out, tracking_uri=tracking_uri))
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri)
    runs = client.search_runs(
        [client.get_experiment_by_name("tables").experiment_id], filter_string="tags.`ndcg_mlflow.role` = 'system'"
    )
    by_tag = {(r.data.tags["ndcg_mlflow.data.qrels.sha256"], r.data.tags["ndcg_mlflow.system"]): r for r in runs}
    for result, _ in logged.values():
        files = result.summary["files"]
        run = by_tag[(files["qrels"]["sha256"], "v3")]
        assert run.data.tags["ndcg_mlflow.data.system.v3.sha256"] == files["system:v3"]["sha256"]
    first, second = (
        by_tag[(logged[k][0].summary["files"]["qrels"]["sha256"], "v3")].info.run_id for k in ("all", "fewer")
    )
    with pytest.raises(NdcgError, match=r"judgments \(qrels sha256\)"):
        compare_runs(first, second, tracking_uri=tracking_uri, out=tmp_path / "cmp", log=False)


@given(
    st.lists(st.lists(st.one_of(st.text(max_size=3), st.just("é" * 3)), max_size=6), min_size=1, max_size=6),
    st.data(),
    st.booleans(),
    st.integers(0, 2),
    st.booleans(),
    st.sampled_from([1, 4, 1 << 20]),
    st.booleans(),
)
def test_take_rows_is_arrows_take_of_the_whole_column(chunks, data, wide, cut, nulls, step, pure):
    """``take_rows`` (a chunked column's rows gathered chunk by chunk from their buffers) gives what Arrow's take of
    the column made one array gives, for rows in any order, repeated, across empty chunks, from chunks that are
    slices (their offsets not at 0), of strings or large strings, and with nulls (Arrow's take then), the ids
    copied by C or in numpy slices of any size, or taken by Arrow; an out-of-range row is an IndexError."""
    from ndcg_mlflow.readers import table as readers_table
    from ndcg_mlflow.readers.table import take_rows

    kind = pa.large_string() if wide else pa.string()
    if nulls:
        chunks = [c + [None] for c in chunks]
    column = pa.chunked_array([pa.array(["pad"] * cut + c, type=kind).slice(cut) for c in chunks], type=kind)
    n = len(column)
    rows = data.draw(st.lists(st.integers(0, n - 1), max_size=20)) if n else []
    expected = pa.array([column[i].as_py() for i in rows], type=kind)
    with pytest.MonkeyPatch.context() as patch:  # (ids copied a few bytes at a time: rows across the slices)
        patch.setattr(readers_table, "GATHER_BYTES", step)
        if pure:  # (the copy in numpy, where C copies a row at a time)
            patch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
        if step == 4:  # (Arrow's take, for more rows than take_rows gathers itself)
            patch.setattr(readers_table, "GATHER_ROWS", 0)
        got = take_rows(column, np.array(rows, dtype=np.int64))
    assert got.type == kind and got.equals(expected)
    assert take_rows(column.combine_chunks(), np.array(rows, dtype=np.int64)).equals(expected)
    for bad in (n, -1):
        with pytest.raises(IndexError):
            take_rows(column, np.array([bad], dtype=np.int64))


# --------------------------------------------------------------------------- Parquet query ids as dictionaries


def _rows_of(table) -> dict:
    return {
        "query": [str(table.query.values[c]) for c in table.query.codes],
        "codes": table.query.codes.tolist(),
        "values": list(table.query.values),
        "doc": table.doc.array.to_pylist(),
        "score": table.value.tolist(),
    }


@settings(derandomize=True, database=None, deadline=None, max_examples=examples(60))
@given(
    queries=st.lists(st.sampled_from(["q1", "q2", "10", "é", "q 3", "x" * 70]), min_size=1, max_size=40),
    group=st.integers(1, 9),
    kind=st.sampled_from(["string", "large_string", "categorical", "int"]),
)
def test_parquet_query_ids_read_as_dictionaries_are_the_text_files_rows(tmp_path_factory, queries, group, kind):
    """Row groups of a few rows (a dictionary each, the same ids in several, in any order), query ids stored as
    strings, large strings, a pandas categorical (unused and empty categories included) or integers: the rows,
    codes and values of the same rows read from a CSV file."""
    from ndcg_mlflow.readers import read_run

    folder = tmp_path_factory.mktemp("dictionary")
    if kind == "int":
        queries = [str(len(q)) for q in queries]
    docs = [f"d{i}" for i in range(len(queries))]
    scores = [float(len(queries) - i) for i in range(len(queries))]
    if kind == "categorical":
        query_col = pa.array(pd.Categorical(queries, categories=sorted(set(queries)) + ["", "unused"]))
    elif kind == "int":
        query_col = pa.array([int(q) for q in queries], type=pa.int64())
    else:
        query_col = pa.array(queries, type=getattr(pa, kind)())
    path = folder / "run.parquet"
    pq.write_table(pa.table({"query_id": query_col, "doc_id": docs, "score": scores}), path, row_group_size=group)
    text = folder / "run.csv"
    pd.DataFrame({"query_id": queries, "doc_id": docs, "score": scores}).to_csv(text, index=False)
    got = read_run(path, rank=False)
    assert _rows_of(got) == _rows_of(read_run(text, rank=False))


@pytest.mark.parametrize("bad, message", [(None, "row 3: query_id is null"), ("", "row 3: query_id is empty")])
def test_a_null_or_empty_query_id_in_a_parquet_dictionary_is_refused_naming_the_row(tmp_path, bad, message):
    from ndcg_mlflow.readers import read_run

    path = tmp_path / "run.parquet"
    table = pa.table(
        {"query_id": pa.array(["q1", "q1", bad, "q2"]), "doc_id": ["a", "b", "c", "d"], "score": [4.0, 3.0, 2.0, 1.0]}
    )
    pq.write_table(table, path, row_group_size=2)
    with pytest.raises(DataError, match=message):
        read_run(path, rank=False)


def test_a_parquet_folder_of_dictionary_and_integer_query_ids_reads_as_one_table(tmp_path):
    """One file's query ids are strings (read as dictionaries), another's integers (read as their text)."""
    from ndcg_mlflow.readers import read_run

    folder = tmp_path / "run"
    folder.mkdir()
    pq.write_table(
        pa.table({"query_id": ["7", "7", "8"], "doc_id": ["a", "b", "a"], "score": [3.0, 2.0, 1.0]}),
        folder / "part-0.parquet",
    )
    pq.write_table(
        pa.table({"query_id": pa.array([9, 7], type=pa.int64()), "doc_id": ["c", "c"], "score": [2.0, 1.0]}),
        folder / "part-1.parquet",
    )
    got = read_run(folder, rank=False)
    assert _rows_of(got)["query"] == ["7", "7", "8", "9", "7"]
    assert list(got.query.values) == ["7", "8", "9"] and got.query.codes.tolist() == [0, 0, 1, 2, 0]
