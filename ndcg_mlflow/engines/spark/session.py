"""The SparkSession the engine runs on: one started here (:func:`session`), or the caller's (:func:`active_session`)."""

from __future__ import annotations

from typing import Any

from ...errors import EvaluationError
from ...timings import phase

PANDAS_WARNING = "PySpark does not yet fully support pandas"  # the start of pyspark's FutureWarning

#: how to get the Java a classic session starts (said when it is missing, and when its gateway exits at start)
JAVA_HINT = (
    "the Spark engine needs Java 17 (or 21): install it (Debian and Ubuntu: apt-get install openjdk-17-jre-headless) "
    "or set JAVA_HOME to a Java installation; java -version checks it."
)


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
    if started and not os.environ.get("PYSPARK_GATEWAY_PORT"):  # (a gateway started elsewhere needs no Java here)
        problem = java_problem()
        if problem:
            raise EvaluationError(f"{problem}: {JAVA_HINT}")
    # the tool prints its own progress: no stage bars on the console, nor pyspark's warning about the installed
    # pandas version (on the driver and in the Python workers), which its user cannot act on
    warnings.filterwarnings("ignore", message=PANDAS_WARNING, category=FutureWarning)
    builder = (
        SparkSession.builder.appName("ndcg-mlflow")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYTHONWARNINGS", f"ignore:{PANDAS_WARNING}:FutureWarning")
    )
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        if getattr(exc, "getCondition", lambda: None)() != "JAVA_GATEWAY_EXITED":
            raise
        raise EvaluationError(
            f"Spark's Java process exited as it started (its messages, if any, are above); {JAVA_HINT}"
        ) from None
    if started and not os.environ.get("PYSPARK_PYTHON"):
        sc = spark.sparkContext
        sc.pythonExec = sc.getConf().get("spark.pyspark.python") or sys.executable
    return spark


def java_problem() -> str | None:
    """Why a classic session cannot start its Java here, as Spark's launcher looks for it (``$JAVA_HOME/bin/java``
    when JAVA_HOME is set, else ``java`` on PATH), or None."""
    import os
    import shutil

    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        return None if os.path.isfile(java) and os.access(java, os.X_OK) else f"JAVA_HOME ({home}) has no bin/java"
    return None if shutil.which("java") else "Java is not installed (no java on PATH, and JAVA_HOME is not set)"


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
