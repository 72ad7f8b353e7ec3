"""Logging an evaluation to MLflow, and working with what was logged: the only package that imports mlflow
(lazily, inside functions: importing it imports no mlflow).

:mod:`.names` names what is logged (metric keys, params, tags; no mlflow), :mod:`.client` logs an output
folder (the store lock, bounded time, runs left behind) and :mod:`.compare` rebuilds reports from and
compares logged runs.

Layout of what is logged (the README's "What is logged to MLflow" in full; :mod:`.names` names it):

* one parent run for the evaluation (experiment ``mlflow.experiment`` of the spec): each system's means and
  intervals as ``<system>.ndcg_at_<K>``, ``<system>.ndcg_at_<K>.ci_low`` / ``.ci_high`` metrics; every
  resolved spec field as a param; the folder's files as artifacts and its tables as MLflow tables
  (``per_query_table.json``, ``figures_table.json``, ``comparisons_table.json``).
* one nested child run per system (tag ``mlflow.parentRunId``): ``ndcg_at_<K>`` and its interval, a candidate's
  comparisons with the baseline as ``compare.ndcg_at_<K>.<figure>``, and its own rows of those tables.
* a comparison run per ``ndcg-mlflow compare``: ``compare.ndcg_at_<K>.<figure>`` metrics, its tables.

Every kind carries the same tags for the same meaning (role, spec, definition and judgments digests, each
system's run-file digest, the version), and the custom tags of ``mlflow.tags`` and ``--tag``.
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
    configure_http,
    filter_literal,
    log_evaluation,
    log_folder,
    owner_id,
    process_start,
    redact,
    safe_uri,
)
from .compare import CompareError, compare_runs, rebuild_report
from .names import ARTIFACTS, COMPARISON_METRICS, TAG_PREFIX, comparison_metrics, system_metrics

__all__ = [
    "ARTIFACTS",
    "CLEANUP_SECONDS",
    "COMPARISON_METRICS",
    "DEFAULT_HTTP",
    "SIGNAL_CLEANUP_SECONDS",
    "TAG_PREFIX",
    "TOTAL_TIMEOUT",
    "Bounds",
    "CompareError",
    "LoggedRuns",
    "Terminated",
    "compare_runs",
    "comparison_metrics",
    "configure_http",
    "log_evaluation",
    "log_folder",
    "rebuild_report",
    "redact",
    "system_metrics",
]
