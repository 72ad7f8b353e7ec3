"""Vectorized DCG / nDCG kernels: numpy arrays in, per-query arrays out.

Everything here works on integer query codes and flat per-row arrays, one row
per returned (run) or judged (catalog) document. There is no loop over queries
and nothing here reads files or knows about MLflow.

The kernel is *query-local*: the rows of a query determine that query's
numbers, whatever other queries are passed with it, so it can be called on any
partition of whole queries and give the same rows.

Definitions (as in the nDCG explainer this tool follows):

* gain of a row: the mapped grade (unjudged rows earn 0 or are removed first)
* rank i (1-based) discounts by ``1 / log2(i + 1)``
* ``DCG@K = sum_{i <= K} gain_i / log2(i + 1)``; cutoff ``None`` means the whole list
* ``IDCG@K``: the same over the gains sorted descending — of every judged document
  of the query (``judged_catalog``) or of the returned documents (``candidates``)
* ``average`` ties: every row of a tied-score group takes the group's mean gain at
  each of its positions (McSherry & Najork 2008), also when a cutoff cuts the group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OK, EMPTY_IDEAL, MISSING = 0, 1, 2
STATUS_NAMES = ("ok", "empty_ideal", "missing")


@dataclass
class RunRows:
    """One system's returned rows for a set of whole queries.

    ``query``: int codes in ``[0, n_queries)``; ``score``: float64; ``gain``: float64
    (0 where unjudged); ``judged``: bool; ``tiebreak``: int64 key ordering equal
    scores ascending (display order, or doc-id order), or None for file order.
    """

    query: np.ndarray
    score: np.ndarray
    gain: np.ndarray
    judged: np.ndarray
    tiebreak: np.ndarray | None = None


@dataclass
class QueryResult:
    """Per-query, per-cutoff arrays of shape (n_queries, n_cutoffs)."""

    dcg: np.ndarray
    idcg: np.ndarray  # judged catalog
    idcg_candidates: np.ndarray
    ndcg: np.ndarray  # NaN where undefined/excluded
    judged_coverage: np.ndarray  # NaN where nothing returned
    status: np.ndarray  # int8 codes, see STATUS_NAMES
    n_returned: np.ndarray  # (n_queries,)


def discounts(n: int) -> np.ndarray:
    """``1 / log2(i + 1)`` for ranks i = 1..n."""
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def positions(group: np.ndarray) -> np.ndarray:
    """0-based position of each row within its run of equal consecutive ``group`` values."""
    n = group.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    lengths = np.diff(np.r_[starts, n])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)


def dcg_by_query(query: np.ndarray, pos: np.ndarray, gain: np.ndarray, n_queries: int,
                 cutoffs: tuple[int | None, ...]) -> np.ndarray:
    """DCG per query at each cutoff in one pass: shape (n_queries, len(cutoffs)).

    Rows may come in any order; ``pos`` is each row's 0-based rank in its query.
    Each row falls in one slice between consecutive finite cutoffs; slice sums
    are accumulated with one ``bincount`` and a cumulative sum across slices.
    """
    contrib = gain * discounts(int(pos.max()) + 1)[pos] if gain.size else gain
    return sum_top_k(query, pos, contrib, n_queries, cutoffs)


def ideal_dcg(query: np.ndarray, gain: np.ndarray, n_queries: int, cutoffs: tuple[int | None, ...]) -> np.ndarray:
    """IDCG per query: the gains of each query sorted descending."""
    order = np.lexsort((-gain, query))
    q = query[order]
    return dcg_by_query(q, positions(q), gain[order], n_queries, cutoffs)


def rank_rows(query: np.ndarray, score: np.ndarray, tiebreak: np.ndarray | None) -> np.ndarray:
    """Row order: by query, score descending, then ``tiebreak`` ascending, then file order.

    Returns a permutation; skips sorting when the rows already are in that order
    (the usual layout of a run file).
    """
    n = query.size
    if n < 2:
        return np.arange(n)
    dq = np.diff(query)
    ds = np.diff(score)
    ordered = (dq > 0) | ((dq == 0) & (ds < 0))
    if tiebreak is not None:
        ordered |= (dq == 0) & (ds == 0) & (np.diff(tiebreak) >= 0)
    else:
        ordered |= (dq == 0) & (ds == 0)
    if ordered.all():
        return np.arange(n)
    keys = (np.arange(n),) + ((tiebreak,) if tiebreak is not None else ()) + (-score, query)
    return np.lexsort(keys)


def evaluate_rows(run: RunRows, catalog_query: np.ndarray, catalog_gain: np.ndarray, n_queries: int, *,
                  cutoffs: tuple[int | None, ...], ties: str, unjudged: str, ideal: str,
                  empty_ideal: str, missing_queries: str) -> QueryResult:
    """Per-query DCG, IDCG (both ideals), nDCG, judged coverage and status.

    ``ties``: ``average`` averages gains over tied-score groups; any other value
    ranks by ``run.tiebreak``. ``unjudged``: ``condense`` drops unjudged rows
    before ranking positions are counted; ``zero`` keeps them with gain 0.
    ``empty_ideal`` / ``missing_queries`` in their ``error`` forms are applied by
    the caller (who can name the queries); here they behave as ``exclude``.
    """
    order = rank_rows(run.query, run.score, None if ties == "average" else run.tiebreak)
    q = run.query[order]
    score = run.score[order]
    gain = run.gain[order]
    judged = run.judged[order]

    n_returned = np.bincount(q, minlength=n_queries)
    coverage = _judged_coverage(q, judged, n_queries, cutoffs, n_returned)

    if unjudged == "condense":
        q, score, gain = q[judged], score[judged], gain[judged]
    shown_gain = _tie_average(q, score, gain) if ties == "average" and q.size else gain

    dcg = dcg_by_query(q, positions(q), shown_gain, n_queries, cutoffs)
    idcg_cat = ideal_dcg(catalog_query, catalog_gain, n_queries, cutoffs)
    idcg_cand = ideal_dcg(q, gain, n_queries, cutoffs)

    ideal_arr = idcg_cat if ideal == "judged_catalog" else idcg_cand
    status = np.full((n_queries, len(cutoffs)), OK, dtype=np.int8)
    empty = ideal_arr <= 0
    status[empty] = EMPTY_IDEAL
    missing = n_returned == 0
    status[missing, :] = MISSING

    with np.errstate(divide="ignore", invalid="ignore"):
        ndcg = np.where(status == OK, dcg / np.where(empty, 1.0, ideal_arr), np.nan)
    ndcg[status == EMPTY_IDEAL] = {"zero": 0.0, "one": 1.0}.get(empty_ideal, np.nan)
    ndcg[status == MISSING] = 0.0 if missing_queries == "zero" else np.nan
    return QueryResult(dcg=dcg, idcg=idcg_cat, idcg_candidates=idcg_cand, ndcg=ndcg,
                       judged_coverage=coverage, status=status, n_returned=n_returned)


def _tie_average(q: np.ndarray, score: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """Each row's gain replaced by the mean gain of its (query, equal score) group; rows are ranked."""
    new_group = np.r_[True, (q[1:] != q[:-1]) | (score[1:] != score[:-1])]
    group = np.cumsum(new_group) - 1
    sums = np.bincount(group, weights=gain)
    counts = np.bincount(group)
    return (sums / counts)[group]


def _judged_coverage(q: np.ndarray, judged: np.ndarray, n_queries: int, cutoffs: tuple[int | None, ...],
                     n_returned: np.ndarray) -> np.ndarray:
    """Fraction of the returned top K (before any condensing) that is judged; NaN when nothing returned."""
    pos = positions(q)
    judged_at = sum_top_k(q, pos, judged.astype(np.float64), n_queries, cutoffs)
    shown = np.empty((n_queries, len(cutoffs)))
    for j, k in enumerate(cutoffs):
        shown[:, j] = n_returned if k is None else np.minimum(n_returned, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(shown > 0, judged_at / np.maximum(shown, 1), np.nan)


def sum_top_k(query: np.ndarray, pos: np.ndarray, value: np.ndarray, n_queries: int,
              cutoffs: tuple[int | None, ...]) -> np.ndarray:
    """Sums of ``value`` over each query's rows with ``pos < K``, for every cutoff K, in one pass."""
    finite = np.array(sorted(k for k in cutoffs if k is not None), dtype=np.int64)
    n_slices = finite.size + 1
    slice_of = np.searchsorted(finite, pos, side="right")
    bins = query.astype(np.int64) * n_slices + slice_of
    sums = np.bincount(bins, weights=value, minlength=n_queries * n_slices).reshape(n_queries, n_slices)
    cum = np.cumsum(sums, axis=1)
    out = np.empty((n_queries, len(cutoffs)))
    for j, k in enumerate(cutoffs):
        out[:, j] = cum[:, -1] if k is None else cum[:, int(np.searchsorted(finite, k))]
    return out
