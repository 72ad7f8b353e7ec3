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
from typing import Callable

import numpy as np

OK, EMPTY_IDEAL, MISSING = 0, 1, 2
STATUS_NAMES = ("ok", "empty_ideal", "missing")


@dataclass
class RunRows:
    """One system's returned rows for a set of whole queries.

    ``query``: int codes in ``[0, n_queries)``; ``score``: float64; ``gain``: float64
    (0 where unjudged); ``judged``: bool. ``tiebreak``: given row indices (all in
    tied-score groups), returns keys ordering them ascending — the displayed rank,
    or the doc-id order; None keeps file order. It is only called for tied rows.
    """

    query: np.ndarray
    score: np.ndarray
    gain: np.ndarray
    judged: np.ndarray
    tiebreak: Callable[[np.ndarray], np.ndarray] | None = None


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
    ranked: np.ndarray | None = None  # the ranking the metric saw: row indices by query, then rank
    position: np.ndarray | None = None  # 0-based rank of each row of ``ranked`` in its query


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


def sum_top_k(query: np.ndarray, pos: np.ndarray, value: np.ndarray, n_queries: int,
              cutoffs: tuple[int | None, ...]) -> np.ndarray:
    """Sums of ``value`` over each query's rows with ``pos < K``, for every cutoff K, in one pass.

    Each row falls in one slice between consecutive finite cutoffs; slice sums are
    accumulated with one ``bincount`` and a cumulative sum across the slices.
    Rows may come in any order. Shape (n_queries, len(cutoffs)); ``None`` is no cutoff.
    """
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


def dcg_by_query(query: np.ndarray, pos: np.ndarray, gain: np.ndarray, n_queries: int,
                 cutoffs: tuple[int | None, ...]) -> np.ndarray:
    """DCG per query at each cutoff: shape (n_queries, len(cutoffs)); ``pos`` is the 0-based rank."""
    contrib = gain * discounts(int(pos.max()) + 1)[pos] if gain.size else gain
    return sum_top_k(query, pos, contrib, n_queries, cutoffs)


def ideal_dcg(query: np.ndarray, gain: np.ndarray, n_queries: int, cutoffs: tuple[int | None, ...]) -> np.ndarray:
    """IDCG per query: each query's gains sorted descending.

    With no negative gain, rows of gain 0 add nothing wherever they stand, so only
    positive gains are sorted.
    """
    if gain.size and gain.min() >= 0:
        keep = gain > 0
        query, gain = query[keep], gain[keep]
    order = np.lexsort((-gain, query))
    q = query[order]
    return dcg_by_query(q, positions(q), gain[order], n_queries, cutoffs)


def rank_rows(query: np.ndarray, score: np.ndarray,
              tiebreak: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """The ranking: row indices grouped by query, by score descending, ties by ``tiebreak``
    then file order.

    A run file usually lists each query's rows together, by descending score; then
    no sort happens. Only rows in tied-score groups are passed to ``tiebreak``.
    """
    n = query.size
    if n < 2:
        return np.arange(n)
    change = query[1:] != query[:-1]
    contiguous = np.count_nonzero(change) + 1 == np.count_nonzero(np.bincount(query))
    if contiguous and not np.any(~change & (score[1:] > score[:-1])):
        order = np.arange(n)
        q, s = query, score
    else:
        order = np.lexsort((-score, query))  # stable: equal scores keep file order
        q, s = query[order], score[order]
    if tiebreak is None:
        return order
    tied_next = (q[1:] == q[:-1]) & (s[1:] == s[:-1])
    if not tied_next.any():
        return order
    in_tie = np.zeros(n, dtype=bool)
    in_tie[:-1] |= tied_next
    in_tie[1:] |= tied_next
    at = np.flatnonzero(in_tie)
    group = np.cumsum(np.r_[True, ~tied_next])[at]
    rows = order[at]
    keys = np.asarray(tiebreak(rows))
    order[at] = rows[np.lexsort((keys, group))]
    return order


def evaluate_rows(run: RunRows, catalog_query: np.ndarray, catalog_gain: np.ndarray, n_queries: int, *,
                  cutoffs: tuple[int | None, ...], ties: str, unjudged: str, ideal: str,
                  empty_ideal: str, missing_queries: str) -> QueryResult:
    """Per-query DCG, IDCG (both ideals), nDCG, judged coverage and status.

    ``ties``: ``average`` averages gains over tied-score groups; any other value
    ranks ties by ``run.tiebreak``. ``unjudged``: ``condense`` drops unjudged rows
    before ranks are counted; ``zero`` keeps them with gain 0. ``empty_ideal`` and
    ``missing_queries`` in their ``error`` forms are applied by the caller (who can
    name the queries); here they behave as ``exclude``.

    Rows of gain 0 add nothing to a DCG, so after ranking, the sums run over the
    few rows that carry gain: millions of returned rows cost one ranking pass.
    """
    order = rank_rows(run.query, run.score, None if ties == "average" else run.tiebreak)
    q = run.query[order]
    pos = positions(q)
    n_returned = np.bincount(run.query, minlength=n_queries)
    judged = run.judged[order]

    jq, jpos = q[judged], pos[judged]
    if ties == "average" and q.size:
        # like the gains, a tied group's judged share is spread over its positions, so a cutoff that
        # cuts the group does not depend on the order of the group's lines in the file
        share = _tie_average(q, run.score[order], judged.astype(np.float64))
        some = share != 0
        coverage_count = sum_top_k(q[some], pos[some], share[some], n_queries, cutoffs)
    else:
        coverage_count = sum_top_k(jq, jpos, np.ones(jq.size), n_queries, cutoffs)
    shown = np.empty((n_queries, len(cutoffs)))
    for j, k in enumerate(cutoffs):
        shown[:, j] = n_returned if k is None else np.minimum(n_returned, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        coverage = np.where(shown > 0, coverage_count / np.maximum(shown, 1), np.nan)

    gain = run.gain[order]
    ranked = order
    if unjudged == "condense":
        q, gain = jq, gain[judged]
        score = run.score[order][judged]
        pos = positions(q)
        ranked = order[judged]
    elif ties == "average":
        score = run.score[order]
    if ties == "average" and q.size:
        shown_gain = _tie_average(q, score, gain)
    else:
        shown_gain = gain
    carry = shown_gain != 0
    dcg = dcg_by_query(q[carry], pos[carry], shown_gain[carry], n_queries, cutoffs)
    idcg_cat = ideal_dcg(catalog_query, catalog_gain, n_queries, cutoffs)
    idcg_cand = ideal_dcg(q, gain, n_queries, cutoffs)

    ideal_arr = idcg_cat if ideal == "judged_catalog" else idcg_cand
    status = np.full((n_queries, len(cutoffs)), OK, dtype=np.int8)
    empty = ideal_arr <= 0
    status[empty] = EMPTY_IDEAL
    status[n_returned == 0, :] = MISSING

    with np.errstate(divide="ignore", invalid="ignore"):
        ndcg = np.where(status == OK, dcg / np.where(empty, 1.0, ideal_arr), np.nan)
    ndcg[status == EMPTY_IDEAL] = {"zero": 0.0, "one": 1.0}.get(empty_ideal, np.nan)
    ndcg[status == MISSING] = 0.0 if missing_queries == "zero" else np.nan
    return QueryResult(dcg=dcg, idcg=idcg_cat, idcg_candidates=idcg_cand, ndcg=ndcg,
                       judged_coverage=coverage, status=status, n_returned=n_returned,
                       ranked=ranked, position=pos)


def _tie_average(q: np.ndarray, score: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """Each row's gain replaced by the mean gain of its (query, equal score) group; rows are ranked."""
    new_group = np.r_[True, (q[1:] != q[:-1]) | (score[1:] != score[:-1])]
    group = np.cumsum(new_group) - 1
    sums = np.bincount(group, weights=gain)
    counts = np.bincount(group)
    return (sums / counts)[group]
