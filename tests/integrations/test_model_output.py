"""What a model's ``predict`` may return, turned into scored rows (no MLflow:
ndcg_mlflow.models.systems.scored_rows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ndcg_mlflow.errors import DataError
from ndcg_mlflow.models.systems import ResolvedModel, model_id_of_source, scored_rows

MODEL = ResolvedModel("models:/r@a", "models:/r/3")
FRAME = pd.DataFrame({"query_id": [7, 7, 8], "doc_id": ["a", "b", "c"], "f": [0.1, 0.2, 0.3]})
NAMES = list(FRAME.columns)


def rows(output, shape=None, frame=FRAME):
    table, kind = scored_rows(output, frame, "query_id", "doc_id", NAMES, shape, Path("c.parquet"), 100, MODEL)
    return table.to_pydict(), kind


@pytest.mark.parametrize(
    "output",
    [
        np.array([0.5, -1.0, 2.0]),
        pd.Series([0.5, -1.0, 2.0]),
        [0.5, -1, 2],
        pd.DataFrame({"s": [0.5, -1.0, 2.0]}),
        np.array([1, -1, 2], dtype=np.int32),
    ],
)
def test_one_score_per_row(output):
    got, kind = rows(output)
    assert kind == "scores"
    assert got["query_id"] == ["7", "7", "8"]  # integer ids as their decimal text
    assert got["doc_id"] == ["a", "b", "c"]
    assert got["score"] == [float(x) for x in np.asarray(output, dtype=float).ravel()]


def test_ranked_lists_become_ranks_in_displayed_order():
    frame = pd.DataFrame({"query_id": ["q1", "q2"], "docs": ["", ""]})
    table, kind = scored_rows(
        [["d3", "d1", "d2"], np.array(["d9"])],
        frame,
        "query_id",
        "doc_id",
        ["query_id", "docs"],
        None,
        Path("c"),
        0,
        MODEL,
    )
    got = table.to_pydict()
    assert kind == "lists"
    assert got == {
        "query_id": ["q1", "q1", "q1", "q2"],
        "doc_id": ["d3", "d1", "d2", "d9"],
        "score": [-1.0, -2.0, -3.0, -1.0],
        "rank": [1, 2, 3, 1],
    }


@pytest.mark.parametrize(
    "output, expected",
    [
        ([0.1, 0.2], "returned 2 values for 3 input rows (rows 101-103 of c.parquet)"),
        (np.array(["1.5", "2", "3"]), "not numbers for rows 101-103 of c.parquet (such as '1.5', of type str_)"),
        ([True, False, True], "not numbers"),
        ([0.1, np.nan, 0.3], "returned nan for row 102 (query '7', doc 'b')"),
        ([0.1, np.inf, -np.inf], "returned inf for row 102 (query '7', doc 'b') and 1 more non-finite"),
        (pd.DataFrame({"a": [1, 2, 3], "b": [1, 2, 3]}), "returned 2 columns"),
        ([["a"], ["b", None], ["c"]], "returned None at position 2 of the list of query '7'"),
        ([["a"], 0.5, ["c"]], "returned float for query '7'"),
    ],
)
def test_bad_output_refused(output, expected):
    with pytest.raises(DataError, match="models:/r/3") as info:
        rows(output)
    assert expected in str(info.value), str(info.value)


def test_a_change_of_shape_between_batches_is_refused():
    with pytest.raises(DataError, match="returned scores for rows 101-103 of c.parquet but lists before"):
        rows([1.0, 2.0, 3.0], shape="lists")


def test_model_id_of_a_version_source():
    assert model_id_of_source("models:/m-0a1b2c") == "m-0a1b2c"
    assert model_id_of_source("models:/m-0a1b2c/") == "m-0a1b2c"
    assert model_id_of_source("file:///tmp/mlruns/0/abc/artifacts/model") is None
    assert model_id_of_source(None) is None


# --------------------------------------------------------------------------- the one rule of
# ndcg_mlflow.models.predictions

SCORES = np.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize(
    "output",
    [
        SCORES,
        SCORES.reshape(-1, 1),
        pd.DataFrame({"p": SCORES}),
        pd.Series(SCORES),
        list(SCORES),
        SCORES.astype(np.float32).reshape(-1, 1),
    ],
)
def test_the_forms_of_one_score_per_row(output):
    got, kind = rows(output)
    assert kind == "scores"
    assert got["doc_id"] == ["a", "b", "c"]
    assert got["score"] == [0.5, -1.0, 2.0]


def test_ranked_lists_need_one_row_per_query():
    from ndcg_mlflow.models.predictions import LISTS, read_predictions

    got = read_predictions(
        pd.Series([np.array([3, 1]), np.array([7])]), pd.Series(["q1", "q2"]), model="m", where="rows 1-2", file="c"
    )
    assert got.kind == LISTS and got.lists == [["3", "1"], ["7"]]  # integer ids as their decimal text
    seen: set[str] = set()
    read_predictions([["a"]], ["q1"], model="m", where="rows 1-1", file="c", seen=seen)
    with pytest.raises(DataError, match="query 'q1' is on row 1 of rows 2-2 and on an earlier row"):
        read_predictions([["b"]], ["q1"], model="m", where="rows 2-2", file="c", seen=seen)


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            pd.Series([np.array([0.5, 1.0]), np.array([2.0]), np.array([3.0])]),
            "returned the number 0.5 at position 1 of the list of query '7'",
        ),
        (pd.Series([np.array([1]), np.array([2]), np.array([3])]), "query '7' is on rows 1 and 2 of rows 101-103"),
        (np.column_stack([SCORES, SCORES]), "returned an array of shape (3, 2)"),
        (np.zeros((3, 1, 1)), "returned an array of shape (3, 1, 1)"),
        (None, "returned None for rows 101-103 of c.parquet"),
        (1.5, "returned the single value 1.5 (of type float)"),
        (np.float64(1.5), "returned the single value"),
        (np.array(2.0), "returned an array of shape ()"),
        ({"a": 1}, "returned a dict"),
        (SCORES.reshape(-1, 1)[:2], "returned 2 values for 3 input rows"),
        ([0.5, ["a"], 1.0], "returned a list for query '7' (rows 101-103 of c.parquet) among scores"),
    ],
)
def test_outputs_of_no_clear_shape_refused(output, expected):
    with pytest.raises(DataError, match="models:/r/3") as info:
        rows(output)
    assert expected in str(info.value) and str(info.value).startswith("c.parquet: "), str(info.value)


@pytest.mark.parametrize(
    "output",
    [
        pd.Series(list(SCORES.reshape(-1, 1))),
        SCORES.reshape(-1, 1).tolist(),
        [np.array([x]) for x in SCORES],
        [(x,) for x in SCORES.tolist()],
    ],
)
def test_an_n_by_1_output_as_nested_sequences_of_floats_is_one_score_per_row(output):
    """``[[0.5], [-1.0], [2.0]]`` (``.tolist()`` of a column) or a Series of one-element arrays: the (n, 1)
    shape, scores (a float is no doc id), equal to the column's numbers; as ranked lists they were ids "0.5"."""
    from ndcg_mlflow.models.predictions import SCORES as KIND
    from ndcg_mlflow.models.predictions import read_predictions

    got = read_predictions(output, ["7", "7", "8"], model="m", where="rows 101-103", file="c.parquet")
    assert got.kind == KIND
    np.testing.assert_array_equal(got.scores, SCORES)
    ints = read_predictions([[3], [1], [2]], ["7", "7", "8"], model="m", where="rows", file="c", expect=KIND)
    np.testing.assert_array_equal(ints.scores, [3.0, 1.0, 2.0])  # a ranker's integers are scores too
