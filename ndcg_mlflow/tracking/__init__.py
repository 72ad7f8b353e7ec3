"""Logging an evaluation to MLflow, and working with what was logged: the only package that imports mlflow
(lazily, inside functions: importing it imports no mlflow).

:mod:`.names` names what is logged (metric keys, params, tags; no mlflow); :mod:`.client` logs an output
folder, with :mod:`.tables` (its tables as MLflow tables), within the bounds of :mod:`.bounds` (MLflow's HTTP
settings, the bound of a request and of the whole logging) kept by :mod:`.worker` (the store lock, the worker
thread, its watchdog and the cleanup after a failure); :mod:`.stale` ends the runs of loggings that are over;
:mod:`.compare` rebuilds reports from and compares logged runs; :mod:`.registry` resolves, loads and promotes
the models of model systems.

Layout of what is logged (docs/mlflow.md in full; :mod:`.names` names it):

* one parent run for the evaluation (experiment ``mlflow.experiment`` of the spec): each system's means as
  ``<system>.ndcg_at_<K>`` metrics, each candidate's headline comparison as
  ``<candidate>.compare.ndcg_at_<K>.<figure>`` (:func:`.names.parent_metrics`), the verdict first in its
  description (:func:`.names.parent_note`); every
  resolved spec field as a param; the folder's files as artifacts and its tables as MLflow tables
  (``per_query_table.json``, ``figures_table.json``, ``comparisons_table.json``).
* one nested child run per system (tag ``mlflow.parentRunId``): ``ndcg_at_<K>`` and its interval, a candidate's
  comparisons with the baseline as ``compare.ndcg_at_<K>.<figure>``, and its own rows of those tables.
* a comparison run per ``ndcg-mlflow compare``: ``compare.ndcg_at_<K>.<figure>`` metrics, its tables.

Every kind carries the same tags for the same meaning (role, spec, definition and judgments digests, each
system's run-file digest, the version), and the custom tags of ``mlflow.tags`` and ``--tag``.
Metric keys never contain ``@`` (MLflow rejects it): ``nDCG@10`` is ``ndcg_at_10``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from ..uris import redact, safe_uri
    from .bounds import CLEANUP_SECONDS, DEFAULT_HTTP, SIGNAL_CLEANUP_SECONDS, TOTAL_TIMEOUT, Bounds, configure_http
    from .client import LoggedRuns, default_tracking_uri, log_evaluation, log_folder
    from .compare import CompareError, compare_runs, rebuild_report
    from .names import ARTIFACTS, COMPARISON_METRICS, TAG_PREFIX, comparison_metrics, system_metrics
    from .stale import filter_literal, owner_id, process_start
    from .worker import Terminated

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
    "default_tracking_uri",
    "filter_literal",
    "log_evaluation",
    "log_folder",
    "owner_id",
    "process_start",
    "rebuild_report",
    "redact",
    "safe_uri",
    "system_metrics",
]

__getattr__, __dir__ = exports(
    __name__,
    {
        "redact": "..uris",
        "safe_uri": "..uris",
        "CLEANUP_SECONDS": ".bounds",
        "DEFAULT_HTTP": ".bounds",
        "SIGNAL_CLEANUP_SECONDS": ".bounds",
        "TOTAL_TIMEOUT": ".bounds",
        "Bounds": ".bounds",
        "configure_http": ".bounds",
        "LoggedRuns": ".client",
        "default_tracking_uri": ".client",
        "log_evaluation": ".client",
        "log_folder": ".client",
        "CompareError": ".compare",
        "compare_runs": ".compare",
        "rebuild_report": ".compare",
        "ARTIFACTS": ".names",
        "COMPARISON_METRICS": ".names",
        "TAG_PREFIX": ".names",
        "comparison_metrics": ".names",
        "system_metrics": ".names",
        "filter_literal": ".stale",
        "owner_id": ".stale",
        "process_start": ".stale",
        "Terminated": ".worker",
    },
)
