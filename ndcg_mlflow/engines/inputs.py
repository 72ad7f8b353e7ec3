"""What the spec says of each evaluated query beside the runs: which queries are evaluated (the judged ones, or the
declared ``queries.set``), their weights (``queries.weights``) and their segments (``queries.segments``).

Every engine calls these on its driver, in this order, with the judgments read: the same checks and messages
(:mod:`ndcg_mlflow.readers.small`), and each file's sha256 recorded in ``files`` with its role, taken of the
bytes that were read (:func:`~ndcg_mlflow.readers.hashing.read_with_digest`)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DataError
from ..readers import Table, read_query_set, read_segments, read_weights
from ..readers.hashing import read_with_digest
from ..readers.small import unjudged_set_message, unsegmented_message, unweighted_message, weight_sum_message
from ..result import FileInfo
from ..spec import Spec


def evaluated_query_set(spec: Spec, qrels: Table, files: list[FileInfo]) -> np.ndarray:
    """The evaluated query ids in plain string order, as an object array (never a fixed-width ``<U`` copy,
    whose size would be the longest id times the number of queries)."""
    judged_values = qrels.query.values[
        np.flatnonzero(np.bincount(qrels.query.codes, minlength=len(qrels.query.values)))
    ]
    judged = sorted(str(q) for q in judged_values)
    if spec.queries.set is None:
        return object_array(judged)
    src = spec.queries.set
    ids, sha = read_with_digest(src.file, None, lambda: read_query_set(src.file))
    files.append(FileInfo("queries.set", str(src.path), src.declared, sha, len(ids)))
    unknown = sorted(set(ids) - set(judged))
    if unknown:
        raise DataError(src.file, unjudged_set_message(len(unknown), unknown[:5], spec.qrels.declared))
    return object_array(sorted(ids))


def object_array(items: list[str]) -> np.ndarray:
    """Strings as a numpy object array (each item kept as it is)."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def query_weights(spec: Spec, query_ids: np.ndarray, files: list[FileInfo]) -> np.ndarray:
    """The evaluated queries' weights as given (the per-query table shows them); computations use
    :attr:`EvaluationResult.relative_weights`, the weights over the largest one."""
    if spec.queries.weights is None:
        return np.ones(len(query_ids))
    src = spec.queries.weights
    table, sha = read_with_digest(src.file, None, lambda: read_weights(src.file))
    files.append(FileInfo("queries.weights", str(src.path), src.declared, sha, len(table)))
    missing = [q for q in query_ids if q not in table]
    if missing:
        raise DataError(src.file, unweighted_message(len(missing), missing[:5]))
    weights = np.array([table[q] for q in query_ids], dtype=np.float64)
    try:
        total = math.fsum(weights)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total):
        raise DataError(src.file, weight_sum_message(weights.size))
    return weights


def query_segments(spec: Spec, query_ids: np.ndarray, files: list[FileInfo]) -> np.ndarray | None:
    """The evaluated queries' segment labels, aligned with ``query_ids`` (an object array of ``str``), or None when
    the spec declares no ``queries.segments``. Every evaluated query must be in the file, in one segment (else a
    DataError naming the file, how many queries have none and the first of them); queries of the file that are
    not evaluated are ignored, as the weights file's are. The file's sha256 is recorded as ``queries.segments``."""
    src = spec.queries.segments
    if src is None:
        return None
    table, sha = read_with_digest(src.file, None, lambda: read_segments(src.file, src.format, src.columns))
    files.append(FileInfo("queries.segments", str(src.path), src.declared, sha, len(table)))
    missing = [q for q in query_ids if q not in table]
    if missing:
        raise DataError(src.file, unsegmented_message(len(missing), missing[:5]))
    return object_array([table[q] for q in query_ids])
