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
    parameters = inspect.signature(ndcg_mlflow.evaluate).parameters
    keywords = [p for p in parameters if p != "spec"]
    for setting in ("spark", "buckets", "prefilter", "driver_queries", "per_query_path", "groups", "keep_data"):
        assert setting not in keywords
        with pytest.raises(TypeError):
            ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, **{setting: 1})
    assert "engine" in keywords and len(parameters) <= 9


def test_keep_data_is_a_setting_of_the_local_engine():
    kept = ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, engine=Local(keep_data=True))
    plain = ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN})
    assert set(kept.prepared) == {"s"} and plain.prepared == {}
    with pytest.raises(TypeError):
        Spark(keep_data=True)  # the joined rows stay in Spark


class _Recording:
    """An engine of its own: what it refuses, and the evaluations asked of it."""

    name = "recording"

    def __init__(self, refusal=None):
        self.refusal, self.asked, self.refused = refusal, [], []

    def refuses(self, spec):
        self.refused.append(spec)
        return self.refusal

    def evaluate(self, spec, inputs):
        self.asked.append((spec, inputs))
        return Local().evaluate(spec, inputs)


def test_evaluate_runs_any_engine_through_its_interface():
    from ndcg_mlflow.engines import Engine, Inputs
    from ndcg_mlflow.spec import Spec

    engine = _Recording()
    assert isinstance(engine, Engine) and isinstance(Local(), Engine) and isinstance(Spark(), Engine)
    progress = []
    result = ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, engine=engine, progress=progress.append)
    assert result.mean("s", 2) == ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}).mean("s", 2)
    [(spec, inputs)] = engine.asked
    assert engine.refused == [spec] and isinstance(spec, Spec) and spec.system_names == ("s",)
    assert inputs == Inputs(qrels=QRELS, systems={"s": RUN}, progress=progress.append)


def test_what_an_engine_refuses_stops_the_evaluation_before_it_runs(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 a 1 1.0 r\n", encoding="utf-8")
    spec = {**SPEC, "data": {"qrels": str(qrels), "systems": {"s": str(run)}}}
    engine = _Recording(SpecError("metric.ties", "is refused here."))
    with pytest.raises(SpecError, match="at key 'metric.ties': is refused here") as info:
        ndcg_mlflow.evaluate(spec, engine=engine)
    assert info.value.path == "metric.ties" and engine.asked == [] and len(engine.refused) == 1


def test_a_model_system_under_displayed_order_is_refused_on_spark_before_any_session_is_asked_for(tmp_path):
    def no_session():
        raise AssertionError("the session was asked for")

    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\n", encoding="utf-8")
    candidates = tmp_path / "candidates.csv"
    candidates.write_text("query_id,doc_id\nq1,a\n", encoding="utf-8")
    system = {"model": "models:/ranker/1", "candidates": str(candidates)}
    spec = {
        **SPEC,
        "metric": {**METRIC, "ties": "displayed_order"},
        "data": {"qrels": str(qrels), "systems": {"m": system}},
    }
    with pytest.raises(
        SpecError, match="at key 'metric.ties': is displayed_order, but the rows a model scores on Spark"
    ):
        ndcg_mlflow.evaluate(spec, engine=Spark(no_session))
    assert Spark().refuses(ndcg_mlflow.load_spec({**spec, "metric": METRIC})) is None


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


def test_making_a_spark_engine_imports_no_pyspark():
    code = "import sys, ndcg_mlflow; ndcg_mlflow.Spark(buckets=4); print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _counted(monkeypatch, function):
    """The calls of ``function`` (a module-level function of the package) from wherever the package's modules bound
    it, counted: each binding replaced by a wrapper that records the spec it was given and calls the function."""
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0])
        return function(*args, **kwargs)

    bound = [
        module
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "ndcg_mlflow" and getattr(module, function.__name__, None) is function
    ]
    assert bound, f"nothing binds {function.__name__}"
    for module in bound:
        monkeypatch.setattr(module, function.__name__, counting)
    return calls


def _resolutions(monkeypatch, *engine_modules):
    """The calls of ``resolve_spec`` and of the files' check beneath it, counted, with the engines' modules (and
    those of ``engine_modules``) imported first, so that every module that could resolve a spec is counted."""
    import importlib

    from ndcg_mlflow.engines import preparation

    for name in ("ndcg_mlflow.api", "ndcg_mlflow.engines.local", "ndcg_mlflow.engines.local.pipeline", *engine_modules):
        importlib.import_module(name)
    return _counted(monkeypatch, preparation.resolve_spec), _counted(monkeypatch, preparation.check_files)


def _files_spec(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    run = tmp_path / "run.txt"
    lines = [f"{q} Q0 {d} 1 {s} r\n" for q, docs in RUN.items() for d, s in docs.items()]
    run.write_text("".join(lines))
    return {**SPEC, "data": {"qrels": str(qrels), "systems": {"s": str(run)}}}


def test_the_local_engine_resolves_the_spec_once(tmp_path, monkeypatch):
    """A spec is loaded and its files checked once per evaluation, by :func:`ndcg_mlflow.evaluate`: the engine takes
    the resolved spec (files of the spec, and tables given in memory)."""
    resolved, checked = _resolutions(monkeypatch)
    expected = ((1 + 3 / np.log2(3)) / (3 + 1 / np.log2(3)) + 1) / 2
    from_files = ndcg_mlflow.evaluate(_files_spec(tmp_path))
    assert from_files.mean("s", 2) == pytest.approx(expected, rel=1e-15)
    assert len(resolved) == 1 and len(checked) == 1
    resolved.clear(), checked.clear()
    in_memory = ndcg_mlflow.evaluate(SPEC, qrels=QRELS, systems={"s": RUN}, engine=Local(keep_data=True))
    assert in_memory.mean("s", 2) == pytest.approx(expected, rel=1e-15)
    assert len(resolved) == 1 and len(checked) == 1


@pytest.mark.integration
def test_the_spark_engine_resolves_the_spec_once(tmp_path, monkeypatch, spark):
    resolved, checked = _resolutions(monkeypatch, "ndcg_mlflow.engines.spark", "ndcg_mlflow.engines.spark.driver")
    result = ndcg_mlflow.evaluate(_files_spec(tmp_path), engine=Spark(spark))
    expected = ((1 + 3 / np.log2(3)) / (3 + 1 / np.log2(3)) + 1) / 2
    assert result.mean("s", 2) == pytest.approx(expected, rel=1e-15)
    assert len(resolved) == 1 and len(checked) == 1
