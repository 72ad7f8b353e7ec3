"""Logging an evaluation to MLflow, and working with what was logged: the only package that imports mlflow
(lazily, inside functions: importing it imports no mlflow).

:mod:`.names` names what is logged (metric keys, params, tags; no mlflow), :mod:`.client` logs an output
folder (the store lock, bounded time, runs left behind) and :mod:`.compare` rebuilds reports from and
compares logged runs.

Layout of what is logged:

* one parent run for the evaluation (experiment ``mlflow.experiment`` of the spec):
  every resolved spec field as a param; tags with the sha256 of the spec, of the
  metric definition and of every data file, and the package version; per-system
  means as ``<system>.ndcg_at_<K>`` metrics and each comparison as
  ``compare.<candidate>.ndcg_at_<K>.<figure>``; artifacts ``spec.yaml``,
  ``summary.json``, ``per_query.csv``, ``comparisons.csv``, ``wins_losses.json``,
  ``wins_losses.md``, and the per-query and comparison tables through
  ``mlflow.log_table`` (``per_query_table.json``, ``comparisons_table.json``).
* one nested child run per system (tag ``mlflow.parentRunId``): metrics
  ``ndcg_at_<K>`` with counts and interval (``ndcg_at_10_ci_low`` ...), the metric
  params, and that system's per-query rows.

Metric keys never contain ``@`` (MLflow rejects it): ``nDCG@10`` is ``ndcg_at_10``.
"""

from .client import (  # noqa: F401 - the CLI and the tests use these
                     CLEANUP_SECONDS,
                     DEFAULT_HTTP,
                     SIGNAL_CLEANUP_SECONDS,
                     TOTAL_TIMEOUT,
                     Bounds,
                     LoggedRuns,
                     Terminated,
                     _literal,
                     _owner,
                     _process_start,
                     _safe_uri,
                     configure_http,
                     log_evaluation,
                     log_folder,
                     redact,
)
from .compare import CompareError, compare_runs, rebuild_report
from .names import ARTIFACTS, COMPARISON_METRICS, TAG_PREFIX, comparison_metrics, system_metrics

__all__ = ["ARTIFACTS", "CLEANUP_SECONDS", "COMPARISON_METRICS", "DEFAULT_HTTP", "SIGNAL_CLEANUP_SECONDS", "TAG_PREFIX",
           "TOTAL_TIMEOUT", "Bounds", "CompareError", "LoggedRuns", "Terminated", "compare_runs", "comparison_metrics",
           "configure_http", "log_evaluation", "log_folder", "rebuild_report", "redact", "system_metrics"]
