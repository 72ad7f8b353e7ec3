"""Query buckets one to a Spark partition (:mod:`ndcg_mlflow.engines.spark.partitions`): the hash Spark gives a
64-bit integer, computed on the driver, is Spark's own (``pyspark.sql.functions.hash``), and the key of bucket
``b`` of ``n`` is put by Spark's hash partitioning into partition ``b``; and the UDFs' return schemas, made in
Python from their column lists, are what Spark's own parser makes of the same lists. Spark is the independent
reference; the tests are skipped when pyspark or Java is missing."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import java_problem

from ndcg_mlflow.engines.spark.partitions import bucket_keys, murmur3_long, spark_partition

pytest.importorskip("pyspark")
if java_problem():
    pytest.skip(java_problem() or "", allow_module_level=True)

BUCKET_COUNTS = (1, 2, 3, 7, 8, 16, 50, 203)


def test_the_hash_of_a_long_is_sparks(spark):
    rng = np.random.default_rng(11)
    values = [0, 1, -1, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63)]
    values += [int(v) for v in rng.integers(-(2**63), 2**63 - 1, size=3000, dtype=np.int64)]
    values += list(range(-500, 500))
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(v, i) for i, v in enumerate(values)], "v long, i long")
    got = {row["i"]: row["h"] for row in df.select("i", F.hash("v").alias("h")).collect()}
    mismatched = [v for i, v in enumerate(values) if murmur3_long(v) != got[i]]
    assert not mismatched, mismatched[:5]


@pytest.mark.parametrize("n", BUCKET_COUNTS)
def test_each_bucket_key_lands_in_the_partition_of_its_bucket(spark, n):
    from pyspark.sql import functions as F

    keys = bucket_keys(n)
    assert len(keys) == n and len(set(keys)) == n
    df = spark.createDataFrame([(k, b) for b, k in enumerate(keys)], "_bucket long, b int")
    placed = df.repartition(n, "_bucket").select("b", F.spark_partition_id().alias("p")).collect()
    assert sorted((row["b"], row["p"]) for row in placed) == [(b, b) for b in range(n)]


def test_each_bucket_key_is_the_smallest_in_its_partition():
    for n in BUCKET_COUNTS:
        for b, key in enumerate(bucket_keys(n)):
            assert spark_partition(key, n) == b
            assert all(spark_partition(v, n) != b for v in range(key))


def test_a_bucket_count_below_one_is_refused():
    with pytest.raises(ValueError, match="a positive number of buckets, got 0"):
        bucket_keys(0)


def test_the_udf_schemas_made_in_python_are_sparks_parse_of_the_same_columns(spark):
    from pyspark.sql.types import _parse_datatype_string

    from ndcg_mlflow.engines.spark.buckets import RESULT_SCHEMA
    from ndcg_mlflow.engines.spark.prefilter import ORDERED_RUN_SCHEMA, RUN_SCHEMA
    from ndcg_mlflow.engines.spark.sources import READ_COLUMNS, _schema, spark_schema

    ddls = [RESULT_SCHEMA, RUN_SCHEMA, ORDERED_RUN_SCHEMA, *(_schema(kind) for kind in READ_COLUMNS)]
    for ddl in ddls:
        assert spark_schema(ddl) == _parse_datatype_string(ddl), ddl
