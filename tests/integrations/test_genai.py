"""The GenAI scorer and the comparison of two GenAI evaluation runs (ndcg_mlflow/integrations/genai.py), through
``mlflow.genai.evaluate`` on small local retrievers (Python functions with a RETRIEVER span) against real SQLite
stores: no LLM, no judge, nothing downloaded. The scorer's per-query values equal the engine's on the same
rankings, and the comparison's figures equal those of one evaluation holding both retrievers."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest
from helpers import doc_block

from ndcg_mlflow.api import evaluate
from ndcg_mlflow.errors import DataError, SpecError
from ndcg_mlflow.integrations.genai import (
    SQLITE_MAX_WORKERS,
    compare_genai_runs,
    genai_per_query,
    ndcg_scorer,
    query_id_of,
)

METRIC = {
    "gain": "exponential",
    "cutoffs": [5],
    "discount": "log2",
    "ties": "displayed_order",
    "ideal": "judged_catalog",
    "empty_ideal": "exclude",
    "unjudged": "zero",
    "missing_queries": "zero",
}
STATS = {
    "uncertainty": {"resamples": 1000, "confidence": 0.95, "method": "bca", "seed": 11},
    "comparison": {"baseline": "first", "test": "both", "correction": "holm", "wins_losses": 3, "tie_tolerance": 1e-9},
}

# graded judgments per query: q03 has no relevant document (an empty ideal), q07 is answered by nothing
JUDGED = {f"q{i:02d}": {f"d{i}-{j}": (0 if i == 3 else (i * 7 + j * 3) % 4) for j in range(6)} for i in range(12)}


def _ranking(q: str, shift: int) -> list[str]:
    """A ranking of query q: some judged documents in a rotated order, and an unjudged one."""
    i = int(q[1:])
    if i == 7:
        return []
    docs = [f"d{i}-{(j + shift) % 6}" for j in range(5)]
    docs.insert(2, f"unjudged-{i}")
    return docs


def _retriever(shift: int):
    import mlflow
    from mlflow.entities import Document, SpanType

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(question: str) -> list[Document]:
        return [Document(page_content=f"text of {d}", metadata={"doc_uri": d}) for d in _ranking(question, shift)]

    def app(question: str) -> dict:
        return {"documents": [d.metadata["doc_uri"] for d in retrieve(question)]}

    return app


def _data() -> list[dict]:
    return [
        {"inputs": {"question": q}, "expectations": {"query_id": q, "relevance": grades}}
        for q, grades in JUDGED.items()
    ]


def _engine(shifts: dict[str, int], spec: dict):
    """The engine on every query at once, each retriever's rankings as a run table (ranks 1..n)."""
    qrels = pd.DataFrame(
        [(q, d, g) for q, docs in JUDGED.items() for d, g in docs.items()], columns=["query_id", "doc_id", "grade"]
    )
    systems = {
        name: pd.DataFrame(
            [(q, d, r + 1) for q in JUDGED for r, d in enumerate(_ranking(q, shift))],
            columns=["query_id", "doc_id", "rank"],
        )
        for name, shift in shifts.items()
    }
    return evaluate(spec, qrels=qrels, systems=systems)


def _spec(**extra) -> dict:
    return {
        "spec_version": 1,
        "name": "rag",
        "metric": dict(METRIC),
        "queries": {"weights": "uniform"},
        "mlflow": {"experiment": "rag"},
        **extra,
    }


@pytest.fixture
def genai_store(fluent_store, monkeypatch):
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_SKIP_TRACE_VALIDATION", "true")  # no trial call before the evaluation
    # a SQLite store: MLflow's default parallelism runs out of its connections and drops traces and scores
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_MAX_WORKERS", str(SQLITE_MAX_WORKERS))
    return fluent_store


def _evaluate(shift: int, scorer, run_name: str | None, **kwargs):
    import mlflow

    with mlflow.start_run(run_name=run_name):
        return mlflow.genai.evaluate(data=_data(), predict_fn=_retriever(shift), scorers=[scorer], **kwargs)


def test_scorer_values_equal_the_engine_query_by_query(genai_store):
    import mlflow

    scorer = ndcg_scorer(_spec(), k=5)
    assert scorer.name == "ndcg_at_5"
    result = _evaluate(0, scorer, "first")
    engine = _engine({"first": 0}, _spec()).per_query.set_index("query_id")
    traces = mlflow.search_traces(run_id=result.run_id, return_type="list")
    assert len(traces) == len(JUDGED)
    values = {}
    for trace in traces:
        (fb,) = [a for a in trace.info.assessments if a.name == "ndcg_at_5"]
        q = fb.metadata["ndcg_mlflow.query_id"]
        values[q] = fb
        assert fb.metadata["ndcg_mlflow.status"] == engine.loc[q, "status"]
        if q == "q03":  # an empty ideal: an error carried by the Feedback, never 0
            assert fb.value is None and "undefined" in fb.error.error_message
            assert math.isnan(engine.loc[q, "ndcg"])
        else:
            assert fb.error is None and fb.value == engine.loc[q, "ndcg"], q  # the engine's value, exactly
            assert float(fb.metadata["ndcg_mlflow.dcg"]) == engine.loc[q, "dcg"]
    assert values["q07"].value == 0.0 and values["q07"].metadata["ndcg_mlflow.status"] == "missing"
    grades = JUDGED["q01"]  # a closed form for one query: d1-0..d1-4 with an unjudged document third
    shown = [grades["d1-0"], grades["d1-1"], 0, grades["d1-2"], grades["d1-3"]]
    dcg = sum((2**g - 1) / math.log2(r + 2) for r, g in enumerate(shown))
    idcg = sum((2**g - 1) / math.log2(r + 2) for r, g in enumerate(sorted(grades.values(), reverse=True)[:5]))
    assert values["q01"].value == pytest.approx(dcg / idcg, rel=1e-12)
    # MLflow's mean leaves the error out, as the engine's mean leaves the excluded query out
    assert result.metrics["ndcg_at_5/mean"] == pytest.approx(_engine({"first": 0}, _spec()).mean("first", 5), rel=1e-12)


def test_two_runs_compared_as_one_evaluation_of_both(genai_store, tmp_path):
    import mlflow

    from ndcg_mlflow.tracking import log_folder

    spec = _spec(**STATS)
    scorer = ndcg_scorer(spec, k=5)
    first = _evaluate(0, scorer, "first")
    second = _evaluate(2, scorer, "second")
    table = genai_per_query(second.run_id, name="ndcg_at_5")
    assert sorted(table["query_id"]) == sorted(JUDGED) and set(table["cutoff"]) == {"5"}
    result = compare_genai_runs(first.run_id, second.run_id, spec, name="ndcg_at_5", out=tmp_path / "out")
    both = _engine({"first": 0, "second": 2}, spec)
    (got,) = result.analysis.comparisons
    (want,) = both.analysis.comparisons
    for key in (
        "delta",
        "ci_low",
        "ci_high",
        "p_randomization",
        "p_t_test",
        "effect_size_dz",
        "n_paired",
        "wins",
        "losses",
    ):
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    assert result.mean("second", 5) == pytest.approx(both.mean("second", 5), rel=1e-12)
    assert (tmp_path / "out" / "report.html").is_file() and (tmp_path / "out" / "comparisons.csv").is_file()
    logged = log_folder(tmp_path / "out", tracking_uri=genai_store)  # what `ndcg-mlflow upload OUT` does
    assert logged.experiment_id == mlflow.get_run(first.run_id).info.experiment_id  # beside the runs (not "rag")
    candidate = mlflow.get_run(logged.system_run_ids["second"])
    assert candidate.data.metrics["compare.ndcg_at_5.delta"] == pytest.approx(want["delta"], rel=1e-12)
    with pytest.raises(SpecError, match="other metric or query rules"):
        compare_genai_runs(
            first.run_id, second.run_id, {**spec, "metric": {**METRIC, "gain": "linear"}}, name="ndcg_at_5"
        )


def test_the_baseline_named_by_the_spec_is_the_baseline(genai_store):
    spec = _spec(**STATS)
    scorer = ndcg_scorer(spec, k=5)
    first, second = _evaluate(0, scorer, "first"), _evaluate(2, scorer, "second")
    (forward,) = compare_genai_runs(first.run_id, second.run_id, spec, name="ndcg_at_5").analysis.comparisons
    flipped = {**spec, "comparison": {**STATS["comparison"], "baseline": "second"}}
    (backward,) = compare_genai_runs(first.run_id, second.run_id, flipped, name="ndcg_at_5").analysis.comparisons
    assert (forward["baseline"], forward["candidate"]) == ("first", "second")
    assert (backward["baseline"], backward["candidate"]) == ("second", "first")
    assert backward["delta"] == pytest.approx(-forward["delta"], rel=1e-12) and forward["delta"] != 0
    by_id = {**spec, "comparison": {**STATS["comparison"], "baseline": second.run_id}}
    (same,) = compare_genai_runs(first.run_id, second.run_id, by_id, name="ndcg_at_5").analysis.comparisons
    assert same["baseline"] == "second"
    nobody = {**spec, "comparison": {**STATS["comparison"], "baseline": "third"}}
    with pytest.raises(SpecError, match=r"comparison\.baseline.*'third'.*neither.*'first'.*'second'"):
        compare_genai_runs(first.run_id, second.run_id, nobody, name="ndcg_at_5")


def test_systems_are_named_by_the_model_evaluated_else_the_run_name_given_else_the_run_id(genai_store):
    import mlflow

    spec = _spec(**STATS)
    scorer = ndcg_scorer(spec, k=5)
    app = mlflow.create_external_model(name="rag-app")
    mlflow.register_model(f"models:/{app.model_id}", "rag-app-registered")  # version 1
    versioned = _evaluate(0, scorer, "named-but-a-model", model_id=app.model_id)
    unnamed = _evaluate(2, scorer, None)  # MLflow makes a name up: not a name of the system
    assert mlflow.get_run(unnamed.run_id).info.run_name  # (it has one)
    by_id = {**spec, "comparison": {**STATS["comparison"], "baseline": "rag-app-registered v1"}}
    result = compare_genai_runs(versioned.run_id, unnamed.run_id, by_id, name="ndcg_at_5")
    assert list(result.systems) == ["rag-app-registered v1", unnamed.run_id]
    plain = mlflow.create_external_model(name="rag-app-v2")
    with_model = _evaluate(2, scorer, None, model_id=plain.model_id)
    named = _evaluate(0, scorer, "my-baseline")
    result = compare_genai_runs(
        with_model.run_id,
        named.run_id,
        {**spec, "comparison": {**STATS["comparison"], "baseline": "my-baseline"}},
        name="ndcg_at_5",
    )
    assert list(result.systems) == ["my-baseline", "rag-app-v2"]


def test_missing_scores_are_reported_as_missing_not_as_a_wrong_name(genai_store):
    import mlflow
    from mlflow.tracking import MlflowClient

    spec = _spec(**STATS)
    scorer = ndcg_scorer(spec, k=5)
    first, second = _evaluate(0, scorer, "first"), _evaluate(2, scorer, "second")
    client = MlflowClient()
    traces = {
        a.metadata["ndcg_mlflow.query_id"]: t
        for t in mlflow.search_traces(run_id=second.run_id, return_type="list")
        for a in t.info.assessments
        if a.name == "ndcg_at_5"
    }
    # what MLflow leaves when it fails to write (it only warns): a trace without its score, a row without a trace
    unscored, lost = traces["q04"], traces["q09"]
    for a in unscored.info.assessments:
        if a.name == "ndcg_at_5":
            mlflow.delete_assessment(unscored.info.trace_id, a.assessment_id)
    client.delete_traces(lost.info.experiment_id, trace_ids=[lost.info.trace_id])
    with pytest.raises(DataError, match="2 of its 12 rows have no 'ndcg_at_5' score") as got:
        genai_per_query(second.run_id, name="ndcg_at_5")
    assert unscored.info.trace_id in str(got.value) and "MLFLOW_GENAI_EVAL_MAX_WORKERS=" in str(got.value)
    assert "name the scorer logged" not in str(got.value)
    with pytest.raises(DataError, match=f"run {second.run_id}: 2 of its 12 rows") as got:
        compare_genai_runs(first.run_id, second.run_id, spec, name="ndcg_at_5")
    assert f"queries scored in run {first.run_id} but not here: 'q04', 'q09'" in str(got.value)
    assert first.run_id + ":" not in str(got.value)  # the complete run is not blamed
    with pytest.raises(DataError, match="no trace has an assessment 'ndcg_at_10'.*carry 'ndcg_at_5'"):
        genai_per_query(first.run_id, name="ndcg_at_10")  # a wrong name is a wrong name


def test_tie_rules_a_trace_cannot_express_are_refused_when_the_scorer_is_made():
    for ties in ("average", "id_ascending", "id_descending"):
        with pytest.raises(SpecError, match=r"at key 'metric\.ties'.*without scores.*displayed_order"):
            ndcg_scorer(_spec(metric={**METRIC, "ties": ties}), k=5)
    with pytest.raises(SpecError, match="queries.weights must be"):
        ndcg_scorer({**_spec(), "queries": {"weights": "w.tsv"}}, k=5)
    with pytest.raises(SpecError, match="queries.segments absent"):
        ndcg_scorer({**_spec(), "queries": {"weights": "uniform", "segments": "s.tsv"}}, k=5)
    with pytest.raises(SpecError, match="at key 'k'"):
        ndcg_scorer(_spec(), k=0)


def test_the_query_id_is_given_or_the_inputs_as_json():
    assert query_id_of({"question": "x"}, {"query_id": 7}) == "7"
    assert query_id_of({"b": 1, "a": "é"}, {"relevance": {}}) == '{"a": "é", "b": 1}'


def test_the_documented_genai_example_runs(genai_store, tmp_path, monkeypatch):
    import yaml

    stats = {**STATS, "comparison": {**STATS["comparison"], "baseline": "app-v1"}}
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump({**_spec(**stats), "metric": {**METRIC, "cutoffs": [10]}}))
    shown = {"wool socks": (["sku-3", "sku-7", "sku-1"], ["sku-7", "sku-3"]), "rain jacket": (["sku-9"], ["sku-4"])}

    def app(version: int):
        import mlflow
        from mlflow.entities import Document, SpanType

        @mlflow.trace(span_type=SpanType.RETRIEVER)
        def retrieve(question: str) -> list[Document]:
            return [Document(page_content=d, metadata={"doc_uri": d}) for d in shown[question][version]]

        return lambda question: {"documents": [d.page_content for d in retrieve(question)]}

    namespace = {"app_v1": app(0), "app_v2": app(1)}
    monkeypatch.delenv("MLFLOW_GENAI_EVAL_MAX_WORKERS")  # the example bounds MLflow's parallelism itself
    exec(doc_block("integrations.md", "## `mlflow.genai.evaluate`: a retriever scorer"), namespace)
    assert os.environ["MLFLOW_GENAI_EVAL_MAX_WORKERS"] == str(SQLITE_MAX_WORKERS)
    (row,) = namespace["result"].analysis.comparisons
    ideal1 = 3 / math.log2(2) + 1 / math.log2(3)  # q1: sku-7 (grade 2, gain 3), sku-3 (grade 1, gain 1)
    first = (1 / math.log2(2) + 3 / math.log2(3)) / ideal1  # v1: sku-3, sku-7, sku-1 (q2: sku-9 first, 1.0)
    assert row["baseline_mean"] == pytest.approx((first + 1.0) / 2, rel=1e-12)
    assert row["candidate_mean"] == pytest.approx((1.0 + 0.0) / 2, rel=1e-12)  # v2: q1 ideal, q2 sku-4 (grade 0)
    assert (tmp_path / "rag-comparison" / "report.html").is_file()


@pytest.mark.integration  # imports mlflow (the Feedback)
def test_bad_retrievals_give_feedback_errors_never_a_number():
    from types import SimpleNamespace

    from ndcg_mlflow.integrations.genai import load_scorer_spec, score_trace

    def trace(*uris):
        span = SimpleNamespace(name="retrieve", outputs=[{"metadata": {"doc_uri": u}} for u in uris])
        return SimpleNamespace(info=SimpleNamespace(trace_id="tr-1"), search_spans=lambda span_type=None: [span])

    scorer = SimpleNamespace(relevance="relevance", doc_id="doc_uri", span_name=None)
    judged = {"query_id": "q", "relevance": {"a": 2, "b": 0}}

    def score(metric=None, expectations=judged, *uris):
        spec = load_scorer_spec(_spec(metric={**METRIC, **(metric or {})}), 5)
        return score_trace(spec, scorer, {"question": "q"}, expectations, trace(*uris))

    twice = score(None, judged, "a", "b", "a")
    assert twice.value is None and "twice" in twice.error.error_message
    assert score({"missing_queries": "exclude"}, judged).error is not None  # nothing retrieved, left out
    assert score({"missing_queries": "zero"}, judged).value == 0.0
    assert "unjudged" in score({"unjudged": "error"}, judged, "a", "x").error.error_message
    assert score(None, {"query_id": "q", "relevance": {}}, "a").error is not None  # no judgments: undefined
    assert score({"empty_ideal": "zero"}, {"relevance": {"a": 0}}, "a").value == 0.0  # the spec's rule: 0
    assert score(None, judged, "b", "a").value == pytest.approx(3 / math.log2(3) / 3, rel=1e-12)


def test_traces_logged_earlier_are_scored_with_their_logged_expectations(genai_store):
    import mlflow
    from mlflow.entities import Document, SpanType

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(question: str) -> list[Document]:
        return [Document(page_content=d, metadata={"doc_uri": d}) for d in ("a", "b", "c")]

    @mlflow.trace
    def app(question: str) -> list[str]:
        return [d.page_content for d in retrieve(question)]

    app("hello")
    trace_id = mlflow.get_last_active_trace_id()
    mlflow.flush_trace_async_logging()
    mlflow.log_expectation(trace_id=trace_id, name="relevance", value={"a": 1, "b": 2, "z": 3})
    mlflow.log_expectation(trace_id=trace_id, name="query_id", value="q-hello")
    scorer = ndcg_scorer(_spec(metric={**METRIC, "gain": "linear"}), k=5)
    result = mlflow.genai.evaluate(data=mlflow.search_traces(return_type="list"), scorers=[scorer])
    dcg = 1 + 2 / math.log2(3)  # a (1), b (2), c unjudged
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert result.metrics["ndcg_at_5/mean"] == pytest.approx(dcg / idcg, rel=1e-12)
    assert genai_per_query(result.run_id, name="ndcg_at_5")["query_id"].tolist() == ["q-hello"]
