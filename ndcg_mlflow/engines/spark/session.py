"""The SparkSession the engine runs on: one started here (:func:`session`), or the caller's (:func:`active_session`)."""

from __future__ import annotations

from typing import Any

from ...errors import EvaluationError
from ...timings import phase

PANDAS_WARNING = "PySpark does not yet fully support pandas"  # the start of pyspark's FutureWarning


def session(remote: str | None = None) -> Any:
    """A SparkSession: on the Spark Connect server ``remote`` (``sc://host:15002``), else the classic session
    that spark-submit or the environment configures (``local[*]`` by default). A session started here runs its
    Python workers on this interpreter (``sys.executable``: the tool's, which imports ``ndcg_mlflow``, where the
    ``python3`` on PATH may not), unless ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` names another."""
    with phase("session start"):
        return _start(remote)


def _start(remote: str | None) -> Any:
    import os
    import sys
    import warnings

    SparkSession = _session_type()
    from pyspark import SparkContext

    if remote:
        return SparkSession.builder.remote(remote).getOrCreate()
    started = SparkContext._active_spark_context is None
    # the tool prints its own progress: no stage bars on the console, nor pyspark's warning about the installed
    # pandas version (on the driver and in the Python workers), which its user cannot act on
    warnings.filterwarnings("ignore", message=PANDAS_WARNING, category=FutureWarning)
    spark = (
        SparkSession.builder.appName("ndcg-mlflow")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYTHONWARNINGS", f"ignore:{PANDAS_WARNING}:FutureWarning")
        .getOrCreate()
    )
    if started and not os.environ.get("PYSPARK_PYTHON"):
        sc = spark.sparkContext
        sc.pythonExec = sc.getConf().get("spark.pyspark.python") or sys.executable
    return spark


def active_session(spark: Any = None) -> Any:
    """``spark`` (a session, or a function making one, called once Spark is needed: a session is not callable), or
    the active SparkSession; an error saying what is missing when pyspark or a session is."""
    SparkSession = _session_type()
    if callable(spark):
        spark = spark()
    if spark is None:
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise EvaluationError(
                "the Spark engine needs a SparkSession: pass spark=session (or start one before evaluating)."
            )
    return spark


def _session_type() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EvaluationError(
            "the Spark engine needs pyspark: pip install 'ndcg-mlflow[spark]' (and Java 17; check with java -version)."
        ) from None
    return SparkSession
