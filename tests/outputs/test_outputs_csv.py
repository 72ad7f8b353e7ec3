"""The CSV files of an output folder: written column by column, the same bytes as pandas' ``to_csv`` with the
folder's options (``float_format="%.17g"``, ``na_rep=""``, no index)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from helpers import examples, write_spec
from hypothesis import given, settings
from hypothesis import strategies as st

import ndcg_mlflow
from ndcg_mlflow.outputs import csv_lines, top_lines, top_table, write_outputs
from ndcg_mlflow.queries import TopLists

_CR = "\n\x01cr\x01"  # (a stand-in for a carriage return: a line feed, which pandas quotes, and marks)


def pandas_text(frame: pd.DataFrame) -> str:
    """pandas' text of ``frame``, with a field holding a lone carriage return quoted (pandas' writer leaves it bare
    where it ends the line for every CSV reader): written with a stand-in that pandas quotes, then put back."""
    texts = [c for c in frame.columns if frame[c].dtype == object or isinstance(frame[c].dtype, pd.StringDtype)]
    marked = frame.rename(columns=lambda c: str(c).replace("\r", _CR))
    for c in texts:
        name = str(c).replace("\r", _CR)
        marked[name] = frame[c].map(lambda v: v.replace("\r", _CR) if isinstance(v, str) else v).astype(frame[c].dtype)
    buf = io.StringIO()
    marked.to_csv(buf, index=False, float_format="%.17g", na_rep="")
    return buf.getvalue().replace(_CR, "\r")


def test_random_frames_are_written_as_pandas_writes_them():
    rng = np.random.default_rng(11)
    words = ["q1", "a,b", 'say "x"', "line\nbreak", "cr\rhere", "", " padded ", "é中😀", "1e5", "nan", "None"]
    specials = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-300, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3, 2.0]
    for _ in range(30):
        n = int(rng.integers(0, 40))
        floats = rng.choice(specials + list(rng.normal(size=5)), size=n)
        texts = np.asarray(rng.choice(words, size=n), dtype=object)
        texts[rng.random(n) < 0.2] = None
        frame = pd.DataFrame(
            {
                "f": floats.astype(np.float64),
                "i": rng.integers(-5, 10**12, size=n),
                "b": rng.random(n) < 0.5,
                "o": texts,
                "s": pd.array(rng.choice(words, size=n), dtype="str"),
                'w,eird "name"': rng.random(n).astype(np.float32),
            }
        )
        lines = csv_lines(frame)
        assert lines is not None
        assert "".join(lines) == pandas_text(frame)
        assert len(lines) == n + 1


@pytest.mark.parametrize("special", [None, ",", '"', "\n", "\r"])
def test_frames_with_nothing_to_quote_are_joined_and_others_quoted(special):
    """Frames whose fields hold no comma, quote or line end, and frames with one such character anywhere (a value,
    a column name): the same text as pandas' (a lone carriage return quoted)."""
    rng = np.random.default_rng(5)
    words = ["q1", "", " padded ", "é中😀", "1e5", "nan", "None", "a;b", "tab\there", "'single'"]
    for _ in range(20):
        n = int(rng.integers(0, 30))
        texts = np.asarray(rng.choice(words, size=n), dtype=object)
        texts[rng.random(n) < 0.2] = None
        names = ["f", "o", "i"]
        if special is not None and n:
            texts[int(rng.integers(0, n))] = f"x{special}y"
        elif special is not None:
            names[1] = f"o{special}"
        frame = pd.DataFrame({names[0]: rng.normal(size=n), names[1]: texts, names[2]: rng.integers(-5, 5, size=n)})
        assert "".join(csv_lines(frame)) == pandas_text(frame)


@pytest.mark.parametrize("seed", range(6))
def test_long_columns_of_few_values_are_written_as_pandas_writes_them(seed):
    """Columns long enough to be formatted by their distinct values (grades, ranks): the same text as pandas',
    -0.0 apart from 0.0, NaN empty, and columns whose values are many in the first rows or only later."""
    from ndcg_mlflow import outputs

    rng = np.random.default_rng(seed)
    n = outputs.FEW_VALUES_MIN_ROWS * 2 + int(rng.integers(0, 100))
    few = np.array([0.0, -0.0, 1.0, 2.5, math.nan, math.inf, -math.inf, 1e17, 3.0, 1 / 3])
    late = rng.choice(few, size=n)
    late[n - n // 3 :] = rng.normal(size=n // 3)  # many values after the first rows
    frame = pd.DataFrame(
        {
            "grade": rng.choice(few, size=n),
            "rank": rng.integers(1, 11, size=n),
            "big": rng.choice(np.array([-(2**63), 2**63 - 1, 0, 7], dtype=np.int64), size=n),
            "flag": rng.random(n) < 0.3,
            "small": rng.choice(few, size=n).astype(np.float32),
            "u8": rng.integers(0, 4, size=n).astype(np.uint8),
            "late": late,
            "many": rng.normal(size=n),
        }
    )
    assert "".join(csv_lines(frame)) == pandas_text(frame)


def _top_result(rng, words):
    n_q, depth = int(rng.integers(1, 30)), int(rng.integers(1, 6))
    ids = np.asarray(
        [f"q{int(v)}" for v in rng.choice(10**6, size=n_q, replace=False)] + ["é", "Z", "a,b"], dtype=object
    )[:n_q]
    rows = [(q, p) for q in range(n_q) for p in range(int(rng.integers(0, depth + 1)))]
    if rng.random() < 0.5:
        rows = [rows[i] for i in rng.permutation(len(rows))]  # (not in query order)
    grade = rng.choice(np.array([0.0, 1.0, 2.0, math.nan, -0.0, 0.5]), size=len(rows))
    top = TopLists(
        depth,
        np.array([q for q, _ in rows], dtype=np.int64),
        np.array([p for _, p in rows], dtype=np.int64),
        list(rng.choice(words, size=len(rows))),
        grade,
    )
    from types import SimpleNamespace

    return SimpleNamespace(query_ids=ids, systems={"s": SimpleNamespace(top=top)})


@pytest.mark.parametrize("seed", range(25))
def test_top_lines_are_the_top_table_as_pandas_writes_it(seed):
    """``systems/<name>.top.csv`` is written from the top lists without a frame: the same text as pandas' CSV of
    ``top_table`` (sorted by query id and rank), with ids that need quoting and rows out of order."""
    rng = np.random.default_rng(seed)
    words = ["d1", "d,2", 'd"3', "", "é中", "nan", "None", "d 4"] if seed % 2 else ["d1", "d2", "é中", "x"]
    result = _top_result(rng, words)
    assert "".join(top_lines(result, "s")) == pandas_text(top_table(result, "s"))


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"only": ["", "x", None]}),  # a row of one empty field
        pd.DataFrame({"a": pd.Series([], dtype=np.float64), "b": pd.Series([], dtype=object)}),
    ],
)
def test_edge_frames(frame):
    assert "".join(csv_lines(frame)) == pandas_text(frame)


def test_a_column_of_another_type_is_left_to_pandas(tmp_path):
    frame = pd.DataFrame({"x": pd.array([1, None], dtype="Int64"), "t": pd.to_datetime(["2026-01-01", None])})
    assert csv_lines(frame) is None


def test_the_folder_files_are_pandas_text(tmp_path):
    """Every CSV of a folder with comparisons, sensitivity and bootstrap distributions, and each system's rows."""
    spec = write_spec(
        tmp_path,
        "csv",
        systems=3,
        extra=(
            "uncertainty: {resamples: 200, confidence: 0.95, method: percentile, seed: 3}\n"
            "comparison: {baseline: s00, test: both, correction: holm, wins_losses: 3, tie_tolerance: 1.0e-9}\n"
            "report: {sensitivity: true}\n"
        ),
    )
    result = ndcg_mlflow.evaluate(spec)
    out = write_outputs(result, tmp_path / "out", reports=False)
    table = result.per_query
    assert (out / "per_query.csv").read_text() == pandas_text(table)
    for name in result.systems:
        assert (out / "systems" / f"{name}.per_query.csv").read_text() == pandas_text(table[table.system == name])
    assert (out / "comparisons.csv").read_text() == pandas_text(result.comparisons)
    assert (out / "sensitivity.csv").read_text() == pandas_text(result.sensitivity)
    written = sorted(p.name for p in out.rglob("*.csv"))
    assert "bootstrap.csv" in written and "s00.top.csv" in written


def test_one_systems_rows_file_is_the_whole_tables_text(tmp_path):
    """With one system its rows are the table's: its file has the whole file's bytes, which are pandas' text."""
    result = ndcg_mlflow.evaluate(write_spec(tmp_path, "csv", systems=1))
    out = write_outputs(result, tmp_path / "out", reports=False)
    text = pandas_text(result.per_query)
    assert (out / "per_query.csv").read_text() == text
    assert (out / "systems" / "s00.per_query.csv").read_text() == text and len(result.per_query) > 1


def test_an_mlflow_table_is_pandas_split_json_with_the_numbers_in_full():
    """``tracking.tables.table_json`` against pandas' ``to_json(orient="split", index=False)`` (what
    ``mlflow.log_table`` writes): the same columns, rows and missing values; numbers equal to pandas' 10 places."""
    import json

    import pandas as pd

    from ndcg_mlflow.tracking.tables import table_json

    frame = pd.DataFrame(
        {
            "system": ["a", "b,c", 'q"x', "é"],
            "ndcg": [0.1234567890123, np.nan, np.inf, -0.0],
            "dcg": [1.5, 2.0, 1e-300, -3.25],
            "label": pd.array(["x", "y", "z", ""], dtype="string"),
            "n": np.array([1, 2, 3, 4], dtype=np.int64),
            "ok": [True, False, True, True],
            "status": pd.array(["ok", None, "missing", "ok"], dtype="string"),
            "any": [None, "x", -np.inf, np.nan],
        }
    )
    ours, theirs = json.loads(table_json(frame)), json.loads(frame.to_json(orient="split", index=False))
    assert ours["columns"] == theirs["columns"] and len(ours["data"]) == len(theirs["data"])
    for mine, pandas_row in zip(ours["data"], theirs["data"]):
        for a, b in zip(mine, pandas_row):
            if isinstance(b, float):
                assert a == pytest.approx(b, abs=1e-10)
            else:
                assert a == b
    assert ours["data"][0][1] == 0.1234567890123  # (in full)
    assert [row[2] for row in ours["data"]] == [1.5, 2.0, 1e-300, -3.25]  # (a column of finite numbers as it is)
    assert [row[3] for row in ours["data"]] == ["x", "y", "z", ""]  # (strings without a missing value as they are)
    assert [row[6] for row in ours["data"]] == ["ok", None, "missing", "ok"]
    assert [row[7] for row in ours["data"]] == [None, "x", None, None]


def test_the_mlflow_tables_of_a_folder_are_its_csv_files_json_made_once_for_equal_files(tmp_path):
    """``folder_tables`` reads the folder's CSV files (a system's own rows for its run); the JSON of a table read from
    the same bytes as one before (one system: its rows are the evaluation's) is that one's, and a table of other
    bytes gets its own."""
    import json

    from ndcg_mlflow.tracking import tables

    (tmp_path / "systems").mkdir()
    rows = "system,query_id,cutoff,ndcg\na,q1,10,0.5\na,q2,10,\n"
    (tmp_path / "per_query.csv").write_text(rows)
    (tmp_path / "systems" / "a.per_query.csv").write_text(rows)
    (tmp_path / "comparisons.csv").write_text("candidate,baseline,key,diff\na,b,ndcg_at_10,0.1\nc,b,ndcg_at_10,0.2\n")
    tables._TEXTS.clear()  # (another test's tables of the same bytes would be found made)
    whole = dict(tables.folder_tables(tmp_path, None))
    own = dict(tables.folder_tables(tmp_path, None, system="a"))
    texts = {name: tables.table_text(frame) for name, frame in whole.items()}
    assert json.loads(texts["per_query_table.json"]) == json.loads(tables.table_json(whole["per_query_table.json"]))
    assert tables.table_text(own["per_query_table.json"]) is texts["per_query_table.json"]  # (made once)
    again = dict(tables.folder_tables(tmp_path, None, system="a"))  # found made: the JSON itself, the CSV not parsed
    assert again["per_query_table.json"] is texts["per_query_table.json"]
    assert tables.table_text(again["comparisons_table.json"]) is tables.table_text(own["comparisons_table.json"])
    mine = json.loads(tables.table_text(own["comparisons_table.json"]))
    assert [r[0] for r in mine["data"]] == ["a"]  # the system's own comparisons, not the whole file's
    assert [r[0] for r in json.loads(texts["comparisons_table.json"])["data"]] == ["a", "c"]
    (tmp_path / "systems" / "a.per_query.csv").write_text(rows.replace("0.5", "0.25"))
    changed = dict(tables.folder_tables(tmp_path, None, system="a"))["per_query_table.json"]
    assert json.loads(tables.table_text(changed))["data"][0][3] == 0.25


# text a label or an id may hold: line ends of every kind, quotes, commas, tabs, NUL, other control characters,
# text that reads as a number or a missing value, and characters beyond the Basic Multilingual Plane
_PIECES = st.sampled_from(["\r", "\n", "\r\n", '"', "'", ",", "\t", "\x00", "\x1b", " ", "NA", "nan", "1e5", "é中😀"])
_TEXT = st.lists(st.one_of(_PIECES, st.text(min_size=1, max_size=3)), min_size=1, max_size=6).map("".join)


def _read_back(lines: list[str]) -> tuple[list[list[str]], pd.DataFrame]:
    """The rows as Python's CSV reader reads them, and the frame as the project's readers read it (pandas, the
    text columns as strings, an empty field missing)."""
    import csv

    text = "".join(lines)
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    frame = pd.read_csv(io.StringIO(text, newline=""), dtype=str, keep_default_na=False, na_values=[""])
    return rows, frame


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=8), _TEXT)
def test_any_text_reads_back_as_written_by_every_csv_writer(pairs, name):
    """Random labels and ids (line ends, quotes, commas, tabs, NUL, ...) written by ``csv_lines`` (a text column
    of objects, of pandas strings, of categories, and as a column's name) and by ``top_lines`` read back, with
    Python's CSV reader and with pandas, as the same strings, row for row."""
    firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
    frame = pd.DataFrame(
        {
            "segment": pd.Series(firsts, dtype=object),
            name: pd.array(seconds, dtype="string"),
            "cat": pd.Categorical(seconds),
            "x": np.arange(len(pairs), dtype=np.float64) / 3,
        }
    )
    rows, back = _read_back(csv_lines(frame))
    assert rows[0] == ["segment", name, "cat", "x"]
    assert [r[:3] for r in rows[1:]] == [[a, b, b] for a, b in pairs]
    assert back.columns.tolist() == ["segment", name, "cat", "x"]
    assert back["segment"].tolist() == firsts and back.iloc[:, 1].tolist() == seconds
    assert back["cat"].tolist() == seconds
    lone, _ = _read_back(csv_lines(pd.DataFrame({name: firsts})))  # (a table of one column)
    assert lone == [[name], *([a] for a in firsts)]

    rng = np.random.default_rng(len(pairs))
    query_ids = np.asarray(list(dict.fromkeys(firsts)), dtype=object)
    n = len(pairs)
    top = TopLists(n, rng.integers(0, len(query_ids), size=n), np.arange(n, dtype=np.int64), seconds, np.ones(n))
    from types import SimpleNamespace

    result = SimpleNamespace(query_ids=query_ids, systems={"s": SimpleNamespace(top=top)})
    rows, back = _read_back(top_lines(result, "s"))
    expected = top_table(result, "s")
    assert [(r[0], r[2]) for r in rows[1:]] == list(zip(expected["query_id"], expected["doc_id"]))
    assert back["query_id"].tolist() == expected["query_id"].tolist()
    assert back["doc_id"].tolist() == expected["doc_id"].tolist()
