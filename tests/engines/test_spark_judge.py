"""An evaluation with a judge on the Spark engine: each system evaluated under both judgments in Spark, the same
judge record and per-query table as the local engine's, number for number."""

from __future__ import annotations

import math

import pytest
import yaml
from helpers import REPO, java_problem

import ndcg_mlflow
from ndcg_mlflow import Spark
from ndcg_mlflow.result import json_safe

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")
if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)

CONFIGS = REPO / "configs"


def test_spark_gives_the_local_engines_judge_record(spark, tmp_path):
    spec = yaml.safe_load((CONFIGS / "demo_judge.yaml").read_text())
    spec["decision"] = {"key": "ndcg_at_10", "rule": "non_inferiority", "margin": 0.02}
    local = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS)
    remote = ndcg_mlflow.evaluate(spec, base_dir=CONFIGS, engine=Spark(spark, buckets=3))
    assert remote.engine == "spark"
    assert json_safe(remote.summary["judge"]) == json_safe(local.summary["judge"])
    assert json_safe(remote.summary["comparisons"]) == json_safe(local.summary["comparisons"])
    assert json_safe(remote.summary["decision"]) == json_safe(local.summary["decision"])
    mine, theirs = local.per_query, remote.per_query
    assert mine.ndcg_human.isna().sum() == theirs.ndcg_human.isna().sum() > 0
    for a, b in zip(mine.ndcg_human.tolist(), theirs.ndcg_human.tolist()):
        assert (math.isnan(a) and math.isnan(b)) or a == b
