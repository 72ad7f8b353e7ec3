"""ndcg_mlflow.format: numbers, missing values and tables, one rule per medium."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ndcg_mlflow.format import (
    EMPTY,
    FILE,
    TERMINAL,
    is_missing,
    listing,
    md_table,
    number,
    p_value,
    share,
    text_table,
)


@pytest.mark.parametrize("x", [None, float("nan"), np.nan, np.float64("nan"), np.float32("nan")])
def test_a_missing_number_is_written_by_the_rule_of_its_medium(x):
    assert is_missing(x)
    assert number(x) == p_value(x) == share(x) == FILE == "–"
    assert number(x, missing=TERMINAL) == p_value(x, missing=TERMINAL) == "undefined"


@pytest.mark.parametrize("x", [0, 0.0, -0.0, 1, math.inf, -math.inf, np.float64(0.5), np.int64(3), False])
def test_a_number_is_never_missing(x):
    assert not is_missing(x)


def test_numbers():
    assert number(0.61814) == "0.6181" and number(0.61815, 3) == "0.618"
    assert number(0.0766, signed=True) == "+0.0766" and number(-0.00004, signed=True) == "-0.0000"
    assert number(np.float64(1 / 3)) == "0.3333" and number(1) == "1.0000"
    assert share(0.1244, signed=True) == "+12.4%" and share(-0.5) == "-50.0%"


@pytest.mark.parametrize("p, text", [(1.0, "1.0000"), (0.0366, "0.0366"), (1e-4, "0.0001"),
                                     (9.99e-5, "1.0e-04"), (2e-5, "2.0e-05"), (0.0, "0.0e+00")])
def test_p_values_keep_one_significant_digit_below_1e_4(p, text):
    assert p_value(p) == text


def test_an_empty_list_is_none():
    assert listing([]) == EMPTY == "none"
    assert listing(["d1", "d2"]) == "d1, d2"


def test_text_table_pads_labels_left_and_numbers_right():
    lines = text_table(["system", "nDCG@10", "n"], [["bm25", "0.6181", "233"], ["reranker-v2", "0.7", "1"]])
    assert lines == ["system       nDCG@10    n",
                     "bm25          0.6181  233",
                     "reranker-v2      0.7    1"]
    assert text_table(["a", "b"], [["xyz", "1"]], left=2, indent="  ") == ["  a    b", "  xyz  1"]


def test_md_table_rows_and_alignment():
    assert md_table(["system", "mean"], [["bm25", "0.6181"], ["", "–"]], "lr") == [
        "| system | mean |", "| --- | ---: |", "| bm25 | 0.6181 |", "|  | – |"]
    assert md_table(["a"], [], "l") == ["| a |", "| --- |"]
    with pytest.raises(ValueError, match="one 'l' or 'r' per column"):
        md_table(["a", "b"], [], "l")
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 columns"):
        md_table(["a", "b"], [["1", "2"], ["3"]], "lr")


def test_no_module_writes_its_own_missing_mark():
    """The missing marks live in format.py: no other module has a string that is one of them, so a new table
    cannot drift from the rule ("none" aside: it is also a spec value, ``correction: none``)."""
    import ast
    from pathlib import Path

    import ndcg_mlflow

    package = Path(ndcg_mlflow.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "format.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("–", "—", "undefined", "n/a"):
                found.append(f"{path.relative_to(package)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("test", ["randomization", "t_test", "both"])
def test_terminal_summary_shows_the_p_values_of_the_declared_tests_and_undefined_ones_as_undefined(tmp_path, test):
    """One query: the t-test is undefined (below 2 queries), written 'undefined'; the column of a test the spec
    does not declare is left out (it was a column of '-')."""
    from helpers import metric_spec, write_qrels, write_run

    import ndcg_mlflow
    from ndcg_mlflow.cli import format_summary

    qrels = write_qrels(tmp_path, {"q1": {"d1": 1, "d2": 2}})
    a = write_run(tmp_path, {"q1": ["d1", "d2"]}, "a.run")
    b = write_run(tmp_path, {"q1": ["d2", "d1"]}, "b.run")
    raw = metric_spec(qrels, {"a": a, "b": b}, name="one", cutoffs=(10,))
    raw["uncertainty"] = {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 1}
    raw["comparison"] = {"baseline": "a", "test": test, "correction": "holm", "wins_losses": 3,
                         "tie_tolerance": 1e-9}
    result = ndcg_mlflow.evaluate(raw, base_dir=tmp_path)
    lines = format_summary(result).splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("candidate"))
    heads = lines[head].split()
    want = {"randomization": ["p_rand"], "t_test": ["p_t"], "both": ["p_rand", "p_t"]}[test]
    assert heads == ["candidate", "cutoff", "delta", "interval", *want, "p_corr", "d_z", "W/T/L"]
    cells = lines[head + 1].split()
    assert cells[:3] == ["b", "10", number(result.mean("b", 10) - result.mean("a", 10), signed=True)]
    cell = dict(zip(heads, cells[:3] + [" ".join(cells[3:5])] + cells[5:]))  # the interval "[lo, hi]" is two words
    assert len(cell) == len(heads) == len(cells) - 1
    if "p_t" in want:  # one query: the t-test is undefined
        assert cell["p_t"] == "undefined"
    if "p_rand" in want:  # the exact randomization test of one difference: both signs give it, p = 1
        assert cell["p_rand"] == "1.0000"
    assert "-" not in cells
