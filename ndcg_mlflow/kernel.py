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

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, overload

import numpy as np

from .rules import averages_ties, condenses, empty_ideal_score, ideal_of_catalog, missing_score

STATUS_OK, STATUS_EMPTY_IDEAL, STATUS_MISSING = 0, 1, 2  # QueryResult.status codes
STATUS_NAMES = ("ok", "empty_ideal", "missing")

# A cutoff deeper than any list counts the whole list; clipping to this depth (more rows than any array can
# hold) keeps every cutoff an int64, however large the declared one.
MAX_DEPTH = int(np.iinfo(np.int64).max)


@overload
def depth_of(k: int) -> int: ...
@overload
def depth_of(k: None) -> None: ...
def depth_of(k: int | None) -> int | None:
    """A cutoff as an int64-safe depth: ``None`` stays None, anything deeper than any list is clipped."""
    return None if k is None else min(int(k), MAX_DEPTH)


class NonFiniteError(ArithmeticError):
    """A DCG, an ideal DCG or a defined nDCG came out infinite or NaN (the gains overflow a float).

    The evaluation refuses such gains with a data error before any run is ranked, so
    for the declared metric this is an internal error; ``explain --sensitivity``
    reports an alternative rule that meets it as undefined.
    """

    def __init__(self, what: str, queries: np.ndarray):
        self.what = what
        self.queries = np.asarray(queries)
        super().__init__(
            f"internal error: non-finite {what} for {self.queries.size} queries (query codes "
            f"{self.queries[:5].tolist()}): the gains overflow a float"
        )


@dataclass
class RunRows:
    """One system's returned rows for a set of whole queries.

    ``query``: int codes in ``[0, n_queries)``; ``score``: float64; ``gain``: float64
    (0 where unjudged); ``judged``: bool. ``tiebreak``: given row indices (all in
    tied-score groups), returns keys ordering them ascending — the displayed rank,
    or the doc-id order; None keeps file order. It is only called for tied rows.

    The gains may instead be given for the judged rows only: ``gain`` None and
    ``judged_gain`` the gains of the rows where ``judged``, in row order (every other
    row earns 0). The numbers are the same, bit for bit; a run of millions of rows
    with a few judged ones then needs no row-length gain array.
    """

    query: np.ndarray
    score: np.ndarray
    gain: np.ndarray | None
    judged: np.ndarray
    tiebreak: Callable[[np.ndarray], np.ndarray] | None = None
    judged_gain: np.ndarray | None = None

    def __post_init__(self) -> None:
        if (self.gain is None) == (self.judged_gain is None):
            raise ValueError("RunRows takes either gain (every row) or judged_gain (the judged rows)")

    def full_gain(self) -> np.ndarray:
        """The gain of every row (built from ``judged_gain`` when only that was given)."""
        if self.gain is not None:
            return self.gain
        gain = np.zeros(self.query.size)
        gain[self.judged] = self.judged_gain
        return gain

    def gain_of(self, rows: np.ndarray) -> np.ndarray:
        """The gains of ``rows``, judged rows only when only ``judged_gain`` was given."""
        if self.gain is not None:
            return self.gain[rows]
        assert self.judged_gain is not None  # one of the two is set (__post_init__)
        return self.judged_gain[np.searchsorted(np.flatnonzero(self.judged), rows)]


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
    ranking: Ranking | None = None
    _view_rows: np.ndarray | None = None  # condensed lists: the judged rows in rank order
    _view_pos: np.ndarray | None = None

    @property
    def ranked(self) -> np.ndarray:
        """The ranking the metric saw: row indices by query, then rank (judged rows only when condensed)."""
        if self._view_rows is not None:
            return self._view_rows
        assert self.ranking is not None  # set whenever the lists are not condensed
        return self.ranking.rows(np.arange(self.ranking.n))

    @property
    def position(self) -> np.ndarray:
        """0-based rank of each row of :attr:`ranked` in its query."""
        if self._view_pos is not None:
            return self._view_pos
        assert self.ranking is not None
        return self.ranking.position(np.arange(self.ranking.n))

    def top(self, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, positions) of each query's first ``depth`` ranked rows, without touching the others."""
        if self._view_rows is not None:
            assert self._view_pos is not None  # set together with _view_rows
            sel = self._view_pos < depth
            return self._view_rows[sel], self._view_pos[sel]
        assert self.ranking is not None
        at = self.ranking.top(depth)
        return self.ranking.rows(at), self.ranking.position(at)


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


def sum_top_k(
    query: np.ndarray, pos: np.ndarray, value: np.ndarray, n_queries: int, cutoffs: tuple[int | None, ...]
) -> np.ndarray:
    """Sums of ``value`` over each query's rows with ``pos < K``, for every cutoff K, in one pass.

    Each row falls in one slice between consecutive finite cutoffs; slice sums are
    accumulated with one ``bincount`` and a cumulative sum across the slices.
    Rows may come in any order. Shape (n_queries, len(cutoffs)); ``None`` is no cutoff.
    """
    finite = np.array(sorted({depth_of(k) for k in cutoffs if k is not None}), dtype=np.int64)
    n_slices = finite.size + 1
    slice_of = np.searchsorted(finite, pos, side="right")
    bins = query.astype(np.int64) * n_slices + slice_of
    sums = np.bincount(bins, weights=value, minlength=n_queries * n_slices).reshape(n_queries, n_slices)
    cum = np.cumsum(sums, axis=1)
    out = np.empty((n_queries, len(cutoffs)))
    for j, k in enumerate(cutoffs):
        out[:, j] = cum[:, -1] if k is None else cum[:, int(np.searchsorted(finite, depth_of(k)))]
    return out


def dcg_by_query(
    query: np.ndarray, pos: np.ndarray, gain: np.ndarray, n_queries: int, cutoffs: tuple[int | None, ...]
) -> np.ndarray:
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


@dataclass
class _Order:
    """A ranking permutation: a full one after a sort, or the identity with a few tied positions
    ``at`` holding rows ``rows`` (a run already in score order only reorders its ties)."""

    n: int
    full: np.ndarray | None = None
    at: np.ndarray | None = None
    rows: np.ndarray | None = None
    block_starts: np.ndarray | None = None  # the first position of each query's block, where already known

    def apply(self, a: np.ndarray, *, same_within_ties: bool = False) -> np.ndarray:
        """``a`` in rank order. ``same_within_ties``: ``a`` is equal across each tied group (query, score)."""
        if self.full is not None:
            return a[self.full]
        if self.at is None or same_within_ties:
            return a
        b = a.copy()
        b[self.at] = a[self.rows]
        return b

    def rows_of(self, positions: np.ndarray) -> np.ndarray:
        if self.full is not None:
            return self.full[positions]
        if self.at is None or positions.size == 0:
            return positions
        out = positions.copy()
        idx = np.minimum(np.searchsorted(self.at, positions), self.at.size - 1)
        hit = self.at[idx] == positions
        assert self.rows is not None  # set together with at
        out[hit] = self.rows[idx[hit]]
        return out


def native_kernel() -> Any:
    """The C passes (``ckernel.c``: the code mapping and key probe of the join, the ranking's order check, the
    bootstrap's sums), built when the package is installed where a C compiler is; None when not built or turned
    off by ``NDCG_MLFLOW_PURE_PYTHON=1`` (numpy and scipy then make the same passes)."""
    import os

    if os.environ.get("NDCG_MLFLOW_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from .ckernel import group_order, map_codes, probe, rank_check, resampled_sums
    except ImportError:
        return None
    return SimpleNamespace(
        map_codes=map_codes, probe=probe, rank_check=rank_check, group_order=group_order, resampled_sums=resampled_sums
    )


def _rank(
    query: np.ndarray,
    score: np.ndarray,
    tiebreak: Callable[[np.ndarray], np.ndarray] | None,
    n_queries: int | None = None,
) -> _Order:
    """Only rows in tied-score groups are passed to ``tiebreak``; a run file that lists each query's
    rows together by descending score (the usual layout) is not sorted at all."""
    n = query.size
    if n < 2:
        return _Order(n)
    fast = native_kernel() if n_queries is not None else None
    if (
        fast is not None
        and n_queries is not None
        and query.dtype == np.int32
        and score.dtype == np.float64
        and query.flags.c_contiguous
        and score.flags.c_contiguous
    ):
        tied = np.empty(n, dtype=np.int64)  # (pages are touched only where a tie is written)
        starts = np.empty(max(n_queries, 1), dtype=np.int64)
        n_tied, n_blocks = fast.rank_check(query, score, n_queries, tied, starts)
        if n_tied >= 0:  # in order: only the ties are ranked (the same rows as below, in one pass)
            order = (
                _Order(n) if tiebreak is None or n_tied == 0 else _order_ties(tied[:n_tied].copy(), n, tiebreak, None)
            )
            order.block_starts = starts[:n_blocks].copy()  # (ties are reordered within a query's block)
            return order
    change = query[1:] != query[:-1]
    heads = query[np.r_[0, np.flatnonzero(change) + 1]]  # the query of each block of equal queries
    contiguous = bool((np.bincount(heads) <= 1).all())  # (each query in one block)
    if contiguous and not np.any(~change & (score[1:] > score[:-1])):
        full = None
        s = score
    else:
        full = np.lexsort((-score, query))  # stable: equal scores keep file order
        q = query[full]
        s = score[full]
        change = q[1:] != q[:-1]
    if tiebreak is None:
        return _Order(n, full)
    tied_next = np.flatnonzero(~change & (s[1:] == s[:-1]))
    if not tied_next.size:
        return _Order(n, full)
    return _order_ties(tied_next, n, tiebreak, full)


def _order_ties(
    tied_next: np.ndarray, n: int, tiebreak: Callable[[np.ndarray], np.ndarray], full: np.ndarray | None
) -> _Order:
    """The ranking of ``n`` rows with each tied group (``tied_next``: the ranked positions i tied with i + 1,
    ascending) in ``tiebreak`` order; ``full``: the rows by ranked position (None: the identity), changed in
    place."""
    # a tied group is a run of consecutive positions i tied with i + 1, and the position after the run's last
    opens = np.r_[True, tied_next[1:] != tied_next[:-1] + 1]
    heads = tied_next[opens]
    sizes = np.diff(np.r_[np.flatnonzero(opens), tied_next.size]) + 1
    group = np.repeat(np.arange(heads.size), sizes)
    at = np.repeat(heads, sizes) + (np.arange(group.size) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    rows = at if full is None else full[at]
    within = getattr(tiebreak, "within_groups", None)  # each row's place in its group, when it can say so
    place = within(rows, sizes) if within is not None else None
    if place is not None:
        reordered = np.empty_like(rows)
        reordered[np.repeat(np.cumsum(sizes) - sizes, sizes) + place] = rows
    else:
        keys = np.asarray(tiebreak(rows))
        reordered = rows[np.lexsort((keys, group))]
    if full is None:
        return _Order(n, None, at, reordered)
    full[at] = reordered
    return _Order(n, full)


class Ranking:
    """Rows in rank order, as query blocks: positions are computed only for the rows asked for."""

    def __init__(self, order: _Order, query_sorted: np.ndarray):
        self.order = order
        n = query_sorted.size
        self.n = n
        if n and order.block_starts is not None and order.full is None:  # (positions keep their queries)
            self.starts = order.block_starts
        elif n:  # (no row-length concatenation: a fresh array that size costs more than the comparison)
            change = np.flatnonzero(query_sorted[1:] != query_sorted[:-1])
            self.starts = np.empty(change.size + 1, dtype=np.int64)
            self.starts[0] = 0
            np.add(change, 1, out=self.starts[1:])
        else:
            self.starts = np.zeros(0, dtype=np.int64)
        self.block_query = query_sorted[self.starts] if n else np.zeros(0, dtype=np.int64)
        self.lengths = np.diff(np.r_[self.starts, n]) if n else np.zeros(0, dtype=np.int64)

    def rows(self, at: np.ndarray) -> np.ndarray:
        """Original row indices of ranked positions ``at``."""
        return self.order.rows_of(at)

    def position(self, at: np.ndarray) -> np.ndarray:
        """0-based rank within its query of each ranked position in ``at``."""
        block = np.searchsorted(self.starts, at, side="right") - 1
        return at - self.starts[block]

    def top(self, depth: int) -> np.ndarray:
        """Ranked positions of each query's first ``depth`` rows, in rank order."""
        if self.n == 0:
            return np.zeros(0, dtype=np.int64)
        take = np.minimum(self.lengths, depth)
        offsets = np.arange(int(take.sum())) - np.repeat(np.cumsum(take) - take, take)
        return np.repeat(self.starts, take) + offsets


def evaluate_rows(
    run: RunRows,
    catalog_query: np.ndarray,
    catalog_gain: np.ndarray,
    n_queries: int,
    *,
    cutoffs: tuple[int | None, ...],
    ties: str,
    unjudged: str,
    ideal: str,
    empty_ideal: str,
    missing_queries: str,
) -> QueryResult:
    """Per-query DCG, IDCG (both ideals), nDCG, judged coverage and status.

    ``ties``: ``average`` averages gains over tied-score groups; any other value
    ranks ties by ``run.tiebreak``. ``unjudged``: ``condense`` drops unjudged rows
    before ranks are counted; ``zero`` keeps them with gain 0. ``empty_ideal`` and
    ``missing_queries`` in their ``error`` forms are applied by the caller (who can
    name the queries); here they behave as ``exclude``.

    Rows of gain 0 add nothing to a DCG, so after ranking, the sums run over the
    few rows that carry gain (judged rows, for coverage): millions of returned rows
    cost one ranking pass, and positions are only computed for the rows that count.
    """
    averaged = averages_ties(ties)
    order = _rank(run.query, run.score, None if averaged else run.tiebreak, n_queries)
    ranked = order.apply
    q = ranked(run.query, same_within_ties=True)
    rk = Ranking(order, q)
    n_returned = np.zeros(n_queries, dtype=np.int64)
    n_returned[rk.block_query] = rk.lengths
    judged = ranked(run.judged)
    j_at = np.flatnonzero(judged)

    if averaged and q.size:
        # like the gains, a tied group's judged share is spread over its positions, so a cutoff that
        # cuts the group does not depend on the order of the group's lines in the file
        score = ranked(run.score, same_within_ties=True)
        share = _tie_average(q, score, judged.astype(np.float64))
        some = np.flatnonzero(share != 0)
        coverage_count = sum_top_k(q[some], rk.position(some), share[some], n_queries, cutoffs)
    else:
        coverage_count = sum_top_k(q[j_at], rk.position(j_at), np.ones(j_at.size), n_queries, cutoffs)
    shown = np.empty((n_queries, len(cutoffs)))
    for j, k in enumerate(cutoffs):
        shown[:, j] = n_returned if k is None else np.minimum(n_returned, depth_of(k))
    with np.errstate(divide="ignore", invalid="ignore"):
        coverage = np.where(shown > 0, coverage_count / np.maximum(shown, 1), np.nan)

    view_rows: np.ndarray | None
    view_pos: np.ndarray | None
    if condenses(unjudged):  # only judged rows remain; their ranks are counted among themselves
        rows = rk.rows(j_at)
        cq, cgain = run.query[rows], run.gain_of(rows)
        cpos = positions(cq)
        shown_gain = _tie_average(cq, run.score[rows], cgain) if averaged and cq.size else cgain
        carry = shown_gain != 0
        dcg = dcg_by_query(cq[carry], cpos[carry], shown_gain[carry], n_queries, cutoffs)
        idcg_cand = ideal_dcg(cq, cgain, n_queries, cutoffs)
        view_rows, view_pos = rows, cpos
    else:
        # unjudged rows earn 0: without tie averaging, only the judged rows' gains enter the sums, which
        # then see the same nonzero terms in the same order (adding a 0 changes no float sum); a negative
        # gain ranks after the zeros in the ideal list, so it takes every row's gain
        j_gain = None if run.gain is not None or averaged else run.gain_of(rk.rows(j_at))
        if j_gain is not None and (j_gain.size == 0 or j_gain.min() >= 0):
            carry = np.flatnonzero(j_gain != 0)
            dcg = dcg_by_query(q[j_at[carry]], rk.position(j_at[carry]), j_gain[carry], n_queries, cutoffs)
            idcg_cand = ideal_dcg(q[j_at], j_gain, n_queries, cutoffs)
        else:
            gain = ranked(run.full_gain())
            shown_gain = _tie_average(q, score, gain) if averaged and q.size else gain
            carry = np.flatnonzero(shown_gain != 0)
            dcg = dcg_by_query(q[carry], rk.position(carry), shown_gain[carry], n_queries, cutoffs)
            idcg_cand = ideal_dcg(q, gain, n_queries, cutoffs)
        view_rows = view_pos = None
    idcg_cat = ideal_dcg(catalog_query, catalog_gain, n_queries, cutoffs)

    ideal_arr = idcg_cat if ideal_of_catalog(ideal) else idcg_cand
    status = np.full((n_queries, len(cutoffs)), STATUS_OK, dtype=np.int8)
    empty = ideal_arr <= 0
    status[empty] = STATUS_EMPTY_IDEAL
    status[n_returned == 0, :] = STATUS_MISSING

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # overflow: check_finite
        ndcg = np.where(status == STATUS_OK, dcg / np.where(empty, 1.0, ideal_arr), np.nan)
    ndcg[status == STATUS_EMPTY_IDEAL] = empty_ideal_score(empty_ideal)
    ndcg[status == STATUS_MISSING] = missing_score(missing_queries)
    check_finite(dcg=dcg, idcg=idcg_cat, idcg_candidates=idcg_cand, ndcg=np.where(status == STATUS_OK, ndcg, 0.0))
    return QueryResult(
        dcg=dcg,
        idcg=idcg_cat,
        idcg_candidates=idcg_cand,
        ndcg=ndcg,
        judged_coverage=coverage,
        status=status,
        n_returned=n_returned,
        ranking=rk,
        _view_rows=view_rows,
        _view_pos=view_pos,
    )


def check_finite(**arrays: np.ndarray) -> None:
    """The invariant: every DCG and ideal DCG, and every nDCG marked ``ok``, is a finite number.

    An overflowing sum (gains near the largest float) would otherwise give inf or NaN
    rows that silently leave the mean. Raises :class:`NonFiniteError` naming the query codes.
    """
    for what, a in arrays.items():
        bad = ~np.isfinite(a)
        if bad.any():
            raise NonFiniteError(what, np.flatnonzero(bad.reshape(a.shape[0], -1).any(axis=1)))


def _tie_average(q: np.ndarray, score: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """Each row's gain replaced by the mean gain of its (query, equal score) group; rows are ranked."""
    new_group = np.r_[True, (q[1:] != q[:-1]) | (score[1:] != score[:-1])]
    group = np.cumsum(new_group) - 1
    sums = np.bincount(group, weights=gain)
    counts = np.bincount(group)
    return (sums / counts)[group]
