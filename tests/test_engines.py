"""The engine an evaluation runs on is an object the caller chooses, holding its own settings."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

import ndcg_mlflow
from ndcg_mlflow import Local, Spark, SpecError

QRELS = {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"a": 1}}
RUN = {"q1": {"c": 0.9, "a": 0.5, "b": 0.1}, "q2": {"a": 0.3}}
METRIC = {
    "gain": "exponential",
    "cutoffs": [2],
    "discount": "log2",
    "ties": "id_ascending",
    "ideal": "judged_catalog",
    "empty_ideal": "exclude",
    "unjudged": "zero",
    "missing_queries": "zero",
}
SPEC = {"spec_version": 1, "name": "engines", "metric": METRIC, "queries": {"weights": "uniform"}}


def test_local_is_the_default_and_each_name_means_its_engine():
    default = ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN})
    for engine in (Local(), "local"):
        again = ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, engine=engine)
        np.testing.assert_array_equal(default.systems["s"].result.ndcg, again.systems["s"].result.ndcg)
    # q1: DCG of (c: 1, a: 3) = 1 + 3/log2(3) over the ideal (a, c) = 3 + 1/log2(3); q2: 1
    expected = ((1 + 3 / np.log2(3)) / (3 + 1 / np.log2(3)) + 1) / 2
    assert default.mean("s", 2) == pytest.approx(expected, rel=1e-15)
    assert default.summary["engine"] == "local"


def test_the_engine_settings_live_on_the_engine_not_on_evaluate():
    keywords = [p for p in inspect.signature(ndcg_mlflow.evaluate).parameters if p != "spec"]
    for setting in ("spark", "buckets", "prefilter", "driver_queries", "per_query_path", "groups"):
        assert setting not in keywords
        with pytest.raises(TypeError):
            ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, **{setting: 1})
    assert "engine" in keywords and len(keywords) <= 10


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("buckets", 0, "positive integer"),
        ("buckets", True, "positive integer"),
        ("buckets", 2.5, "positive integer"),
        ("driver_queries", -1, "0 or more"),
        ("groups", "7", "0 or more"),
        ("driver_judgments", -3, "0 or more"),
        ("prefilter", "yes", "None, True or False"),
    ],
)
def test_spark_settings_are_checked_when_the_engine_is_made(setting, value, words):
    with pytest.raises(SpecError, match=words) as info:
        Spark(**{setting: value})
    assert info.value.path == setting


def test_an_unknown_engine_is_refused_naming_the_choices():
    with pytest.raises(SpecError, match="Local\\(\\), Spark\\(...\\), 'local' or 'spark', got 'dask'"):
        ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, engine="dask")


def test_keep_data_is_refused_on_spark_before_any_session_is_asked_for():
    def no_session():
        raise AssertionError("the session was asked for")

    with pytest.raises(SpecError, match="keeps no joined rows"):
        ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, engine=Spark(no_session), keep_data=True)


def test_making_a_spark_engine_imports_no_pyspark():
    code = "import sys, ndcg_mlflow; ndcg_mlflow.Spark(buckets=4); print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
