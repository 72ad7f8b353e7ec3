"""Segments, a stratified bootstrap, guardrails and tail risk on the Spark engine: the same summary as the local
engine's, number for number; the grouped path (per-query rows beyond the driver) refuses what needs every query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import java_problem
from helpers import segments_data as _data
from helpers import segments_spec as _spec

import ndcg_mlflow
from ndcg_mlflow import Spark
from ndcg_mlflow.errors import SpecError
from ndcg_mlflow.result import json_safe

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")
if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)


DECISION = {
    "key": "ndcg_at_10",
    "rule": "non_inferiority",
    "margin": 0.05,
    "guardrails": {
        "segments": {"rule": "non_inferiority", "margin": 0.1},
        "regressions": {"delta": 0.1, "max_share": 0.4},
    },
}


def test_spark_gives_the_local_summary_with_segments_guardrails_and_risk(spark, tmp_path: Path) -> None:
    _data(tmp_path, tail_loss=0.5)
    spec = _spec(
        tmp_path,
        uncertainty__stratify="segments",
        comparison__risk_alpha=[0, 2],
        decision=DECISION,
        uncertainty__resamples=500,
    )
    local = ndcg_mlflow.evaluate(spec)
    remote = ndcg_mlflow.evaluate(spec, engine=Spark(spark))
    assert remote.engine == "spark"
    for key in (
        "systems",
        "comparisons",
        "segments",
        "segment_comparisons",
        "segment_consistency",
        "correction_family",
        "decision",
        "notes",
    ):
        assert json.dumps(json_safe(local.summary[key])) == json.dumps(json_safe(remote.summary[key])), key
    assert local.summary["segments"] and local.summary["decision"]["candidates"][0]["guardrails"]


def test_the_grouped_path_refuses_segments(spark, tmp_path: Path) -> None:
    _data(tmp_path)
    with pytest.raises(SpecError, match="segments"):
        ndcg_mlflow.evaluate(
            _spec(tmp_path, uncertainty__resamples=200),
            engine=Spark(spark, driver_queries=5, per_query_path=str(tmp_path / "pq")),
        )
