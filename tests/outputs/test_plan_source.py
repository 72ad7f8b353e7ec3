"""The ``plan`` command's source read back from an output folder: the paired differences of a comparison, the one
definition ``plan`` and the report's figure of the per-query differences share."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ndcg_mlflow.errors import DataError
from ndcg_mlflow.outputs.plan_source import paired
from ndcg_mlflow.render import figures


def table(weights: list[float] | None) -> pd.DataFrame:
    """Two systems at cutoff 10 (and a row at 5 that must be left out); q2 undefined for the baseline, q4 only
    in the candidate's rows."""
    rows = [
        ("base", "q1", "10", 0.5),
        ("base", "q2", "10", math.nan),
        ("base", "q3", "10", 0.25),
        ("base", "q1", "5", 0.0),
        ("cand", "q3", "10", 0.75),
        ("cand", "q1", "10", 0.375),
        ("cand", "q2", "10", 0.5),
        ("cand", "q4", "10", 1.0),
    ]
    frame = pd.DataFrame(rows, columns=["system", "query_id", "cutoff", "ndcg"])
    if weights is not None:
        by_query = dict(zip(["q1", "q2", "q3", "q4"], weights))
        frame["weight"] = frame["query_id"].map(by_query)
    return frame


def test_paired_weighs_every_query_alike_without_a_weight_column():
    """q1 and q3 are valid for both (the baseline's order): 0.375 - 0.5 and 0.75 - 0.25, each of weight 1."""
    d, w = paired(table(None), "base", "cand", "ndcg_at_10")
    assert d.tolist() == [-0.125, 0.5]
    assert w.tolist() == [1.0, 1.0]


def test_paired_takes_the_weights_over_the_largest_when_the_table_has_them():
    d, w = paired(table([2.0, 1.0, 8.0, 4.0]), "base", "cand", "ndcg_at_10")
    assert d.tolist() == [-0.125, 0.5]
    assert w.tolist() == [0.25, 1.0]  # (2 and 8 over the table's largest, 8)


def test_paired_names_the_table_for_a_system_without_rows():
    with pytest.raises(DataError, match="no row of system 'other' at cutoff 10"):
        paired(table(None), "base", "other", "ndcg_at_10")


def test_the_figure_of_per_query_differences_draws_the_paired_differences():
    """The figure's points are the paired differences sorted, with or without a weight column."""
    summary = {
        "systems": {s: {"ndcg_at_10": {"mean": 0.5}} for s in ("base", "cand")},
        "comparisons": [{"candidate": "cand", "baseline": "base", "key": "ndcg_at_10"}],
    }
    drawn = [figures.per_query_differences(summary, table(w)) for w in (None, [2.0, 1.0, 8.0, 4.0])]
    assert drawn[0] is not None and drawn[0] == drawn[1]
    d, _ = paired(table(None), "base", "cand", "ndcg_at_10")
    assert "polyline" in drawn[0] and np.sort(d).tolist() == [-0.125, 0.5]
