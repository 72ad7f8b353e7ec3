"""The seam (ndcg_mlflow/queries.py) on its own: the raw rows' checks in their declared order, each problem's words
as every engine says them, and its numbers against a brute-force nDCG over random whole queries."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from helpers import examples, metric_spec
from hypothesis import given, settings
from hypothesis import strategies as st

import ndcg_mlflow
from ndcg_mlflow import DataError
from ndcg_mlflow.engines.local.pipeline import display_depth
from ndcg_mlflow.engines.spark.assemble import check_buckets
from ndcg_mlflow.engines.spark.buckets import bucket_rows
from ndcg_mlflow.queries import (
    CHECK_ORDER,
    JUDGMENT_CHECKS,
    OVERFLOW,
    ROW_CHECKS,
    UNJUDGED,
    Problem,
    Seamed,
    first_of,
    first_problem,
    problem_error,
    problem_message,
    raw_query_rows,
)
from ndcg_mlflow.readers.accept import Rows, empty_id, listed_twice, not_finite, not_integer, null_value
from ndcg_mlflow.spec.validate import parse_spec

LABEL = "run.txt"


def _metric(**rules):
    return parse_spec(metric_spec("qrels.txt", "run.txt", name="seam", **rules)).metric


def _run(rows: list[list], rank: bool = True) -> pa.Table:
    columns = {
        "query_id": pa.array([r[0] for r in rows], pa.string()),
        "doc_id": pa.array([r[1] for r in rows], pa.string()),
        "score": pa.array([r[2] for r in rows], pa.float64()),
    }
    if rank:
        columns["rank"] = pa.array([r[3] for r in rows], pa.float64())
    return pa.table(columns)


def _judged(rows: list[tuple[str, str, float]]) -> pa.Table:
    return pa.table(
        {
            "query_id": pa.array([r[0] for r in rows], pa.string()),
            "doc_id": pa.array([r[1] for r in rows], pa.string()),
            "grade": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


# one row of each problem, each in a query of its own (the row check's code -> the row that breaks it)
BROKEN = {
    "null:query_id": [None, "d1", 1.0, 1.0],
    "null:doc_id": ["q2", None, 1.0, 1.0],
    "null:rank": ["q3", "d1", 1.0, None],
    "null:score": ["q4", "d1", None, 1.0],
    "empty:query_id": ["", "d1", 1.0, 1.0],
    "empty:doc_id": ["q6", "", 1.0, 1.0],
    "nonfinite:score": ["q7", "d1", math.inf, 1.0],
    "rank": ["q8", "d1", 1.0, 2.5],
    "duplicate": ["q9", "d1", 1.0, 1.0],
}
FINE = [["q9", "d1", 2.0, 2.0], ["q1", "d1", 1.0, 1.0]]


def test_the_declared_order_is_the_row_checks_then_the_joined_rows():
    """Nulls, empty ids, numbers (a score, then a rank), documents twice; then the joined rows' problems."""
    assert [c.code for c in ROW_CHECKS] == list(BROKEN)
    assert CHECK_ORDER[: len(ROW_CHECKS)] == tuple(BROKEN)
    assert CHECK_ORDER[len(ROW_CHECKS) :] == (UNJUDGED, OVERFLOW)


def test_rows_with_every_problem_report_them_one_after_another_in_the_declared_order():
    """Rows breaking every check: the first problem is the first check's; once its row is mended, the next
    check's, and so on, whatever the rows' order."""
    broken = dict(BROKEN)
    rng = np.random.default_rng(5)
    seen = []
    while broken:
        rows = FINE + list(broken.values())
        rows = [rows[i] for i in rng.permutation(len(rows))]
        problem = first_problem(_run(rows), has_rank=True)
        assert problem is not None
        seen.append(problem.code)
        del broken[problem.code]
    assert first_problem(_run(FINE), has_rank=True) is None
    assert seen == list(BROKEN)


def test_without_ranks_the_rank_checks_do_not_apply():
    assert first_problem(_run([BROKEN["rank"], BROKEN["null:rank"]]), has_rank=True).code == "null:rank"
    assert first_problem(_run([BROKEN["rank"], BROKEN["null:rank"]], rank=False), has_rank=False) is None


def test_the_problem_names_the_smallest_query_and_document_and_counts_every_row():
    rows = [["qb", "d2", math.nan, 1.0], ["qa", "d9", math.inf, 1.0], ["qa", "d3", -math.inf, 1.0]]
    assert first_problem(_run(rows), has_rank=True) == Problem("nonfinite:score", "qa", "d3", 3, -math.inf)


def test_duplicates_are_looked_for_only_among_the_whole_queries_given():
    rows = [["qa", "d1", 1.0, 1.0], ["qa", "d1", 2.0, 2.0], ["qb", "d1", 1.0, 1.0], ["qb", "d1", 2.0, 2.0]]
    whole = np.array([False, False, True, True])
    assert first_problem(_run(rows), has_rank=True) == Problem("duplicate", "qa", "d1", 2)
    assert first_problem(_run(rows), has_rank=True, whole=whole) == Problem("duplicate", "qb", "d1", 1)


@settings(max_examples=examples(200))
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["qa", "qb", "", None]),
            st.sampled_from(["d1", "d2", "", None]),
            st.sampled_from([0.0, 1.0, 2.0, math.nan, math.inf, None]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_judgments_checked_in_parts_give_the_problem_of_the_whole(rows, data):
    """The Spark engine checks judgments it keeps batch by batch (each batch's first problem, then
    :func:`first_of`): the problem is the whole's, whatever the cut."""
    whole = pa.table(
        {
            "query_id": pa.array([r[0] for r in rows], pa.string()),
            "doc_id": pa.array([r[1] for r in rows], pa.string()),
            "grade": pa.array([r[2] for r in rows], pa.float64()),
        }
    )
    cuts = sorted(data.draw(st.sets(st.integers(1, len(rows) - 1), max_size=4)) if len(rows) > 1 else [])
    bounds = [0, *cuts, len(rows)]
    parts = [whole.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]
    found = [p for p in (first_problem(t, False, checks=JUDGMENT_CHECKS) for t in parts) if p is not None]
    expected = first_problem(whole, False, checks=JUDGMENT_CHECKS)
    got = first_of(found, JUDGMENT_CHECKS)
    assert (got is None) == (expected is None)
    if expected is not None:
        assert got is not None and got[:4] == expected[:4]
        assert got.value == expected.value or (math.isnan(got.value) and math.isnan(expected.value))


def test_a_problem_of_the_judgments_is_said_in_the_readers_words():
    table = _judged([("qa", "d1", 1.0), ("qa", "d2", math.nan), ("qb", "d0", -math.inf)])
    problem = first_problem(table, False, checks=JUDGMENT_CHECKS)
    assert problem == Problem("nonfinite:grade", "qa", "d2", 2, problem.value) and math.isnan(problem.value)
    assert problem_message(problem, _metric(), "qrels") == not_finite("grade", math.nan, Rows(2, "qa", "d2"))
    table = _judged([("qa", "d1", 1.0), ("qb", "", 1.0)])
    assert problem_message(first_problem(table, False, checks=JUDGMENT_CHECKS), _metric(), "qrels") == empty_id(
        "doc_id", Rows(1, "qb", "")
    )


# each row check: the readers' words (readers/accept.py), without and with the rows at fault
WORDS = {
    "null:query_id": lambda rows: null_value("query_id", rows),
    "null:doc_id": lambda rows: null_value("doc_id", rows),
    "null:rank": lambda rows: null_value("rank", rows),
    "null:score": lambda rows: null_value("score", rows),
    "empty:query_id": lambda rows: empty_id("query_id", rows),
    "empty:doc_id": lambda rows: empty_id("doc_id", rows),
    "nonfinite:score": lambda rows: not_finite("score", math.inf, rows),
    "rank": lambda rows: not_integer("rank", 2.5, rows),
}


@pytest.mark.parametrize("code", list(BROKEN))
def test_each_problem_is_said_in_the_readers_words_by_the_seam_the_spark_buckets_and_the_local_engine(code):
    """The seam's message of each row check is the readers' words with the rows at fault; the Spark engine's
    buckets (their rows checked on the driver as the engine checks them) raise that message; the local engine
    (its reader, a table in memory) refuses the same row with the same words, naming its row."""
    metric = _metric()
    bad = BROKEN[code]
    rows = [["q1", "d1", 1.0, 1.0], bad] + ([["q9", "d1", 2.0, 2.0]] if code == "duplicate" else [])
    judged = _judged([("q1", "d1", 1.0)] + [(q, "d1", 1.0) for q in ("q2", "q3", "q4", "q6", "q7", "q8", "q9")])
    problem = raw_query_rows(metric, judged, _run(rows), "sys", LABEL, display_depth(metric), True)
    assert isinstance(problem, Problem) and problem.code == code
    if code == "duplicate":
        expected = listed_twice("d1", "q9", "1 repeated rows in all")
    else:
        expected = WORDS[code](Rows(1, bad[0], bad[1]))
    assert problem_message(problem, metric, LABEL) == expected
    error = problem_error(problem, "sys", LABEL, metric)
    assert isinstance(error, DataError) and str(error) == f"{LABEL}: {expected}"

    out = bucket_rows(_run(rows), judged, "sys", LABEL, metric, display_depth(metric), True)
    with pytest.raises(DataError) as spark_error:
        check_buckets("sys", LABEL, metric, out)
    assert str(spark_error.value) == str(error)

    table = _run(rows)
    with pytest.raises(DataError) as local_error:
        ndcg_mlflow.evaluate(
            dict(metric_spec("q", "r", name="seam", ties="displayed_order"), data={}),
            qrels=_judged([("q1", "d1", 1.0)]),
            systems={"sys": table},
        )
    said = str(local_error.value)
    if code == "duplicate":
        assert "document 'd1' is listed twice for query 'q9' (" in said
    else:
        assert said == f"systems['sys']: row 2: {WORDS[code](None)}"


def test_an_unjudged_document_is_the_problem_after_the_row_checks_and_before_the_numbers():
    metric = _metric(unjudged="error")
    judged = _judged([("q1", "d1", 1.0), ("q2", "d1", 1.0)])
    rows = [["q1", "d1", 1.0, 1.0], ["q2", "d7", 1.0, 1.0], ["q2", "d5", 1.0, 2.0]]
    problem = raw_query_rows(metric, judged, _run(rows), "sys", LABEL, display_depth(metric), True)
    assert problem == Problem(UNJUDGED, "q2", "d7", 2)
    error = problem_error(problem, "sys", LABEL, metric)
    assert str(error).startswith(f"{LABEL}: document 'd7' returned for query 'q2' has no judgment")
    rows.append(["q1", None, 1.0, 1.0])
    assert raw_query_rows(metric, judged, _run(rows), "sys", LABEL, 10, True).code == "null:doc_id"


# --------------------------------------------------------------------------- the numbers, against brute force


def _brute_ndcg(run: list[tuple[str, str, float]], qrels: dict[str, dict[str, float]], k: int) -> dict[str, float]:
    """nDCG@k with exponential gains, log2 discount, tied scores in descending doc id order, unjudged documents
    gaining 0, the ideal from every judgment of the query, a query returning nothing scoring 0: written out."""
    out = {}
    for q, judged in qrels.items():
        mine = [(d, s) for qq, d, s in run if qq == q]
        mine.sort(key=lambda r: r[0], reverse=True)
        mine.sort(key=lambda r: -r[1])  # stable: ties keep descending doc ids
        dcg = sum((2.0 ** judged.get(d, 0.0) - 1.0) / math.log2(i + 2) for i, (d, _) in enumerate(mine[:k]))
        ideal = sorted((2.0**g - 1.0 for g in judged.values()), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        out[q] = 0.0 if not mine else dcg / idcg if idcg > 0 else math.nan
    return out


@st.composite
def _whole_queries(draw):
    n_queries = draw(st.integers(1, 6))
    qrels: dict[str, dict[str, float]] = {}
    run: list[tuple[str, str, float]] = []
    for i in range(n_queries):
        q = f"q{i}"
        docs = [f"d{j}" for j in range(draw(st.integers(1, 12)))]
        judged = draw(st.lists(st.sampled_from(docs), unique=True, min_size=1))
        qrels[q] = {d: float(draw(st.integers(0, 3))) for d in judged}
        returned = draw(st.lists(st.sampled_from(docs), unique=True))
        run += [(q, d, float(draw(st.integers(0, 4)))) for d in returned]  # few scores: ties
    run += [("outside", "d0", 1.0)] * draw(st.integers(0, 1))
    order = draw(st.permutations(range(len(run))))
    return [run[i] for i in order], qrels


@settings(max_examples=examples(300))
@given(_whole_queries(), st.sampled_from([1, 3, 10]))
def test_the_seam_gives_the_brute_force_ndcg_of_random_whole_queries(case, k):
    run, qrels = case
    metric = _metric(cutoffs=(k,), ties="id_descending", empty_ideal="exclude", missing_queries="zero")
    judged = _judged([(q, d, g) for q, docs in qrels.items() for d, g in docs.items()])
    rows = _run([[q, d, s, 0.0] for q, d, s in run], rank=False)
    seamed = raw_query_rows(metric, judged, rows, "sys", LABEL, display_depth(metric), False)
    assert isinstance(seamed, Seamed) and seamed.rows is not None
    assert list(seamed.query_ids) == sorted(qrels)
    assert seamed.unknown == (1 if any(q == "outside" for q, _, _ in run) else 0)
    expected = _brute_ndcg(run, qrels, k)
    got = seamed.rows.result.ndcg[:, 0]
    want = np.array([expected[q] for q in seamed.query_ids])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
    returned = {q: sum(1 for qq, _, _ in run if qq == q) for q in qrels}
    assert seamed.rows.result.n_returned.tolist() == [returned[q] for q in seamed.query_ids]
