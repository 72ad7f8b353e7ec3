"""Evaluation engines beyond the local one: :mod:`.spark` evaluates the runs on Apache Spark.

Nothing here imports pyspark until an engine is used.
"""

ENGINES = ("local", "spark")

__all__ = ["ENGINES"]
