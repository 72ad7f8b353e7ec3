"""The per-query join: judgments x run rows of whole queries -> prepared rows.

Everything here is a function of its arguments (no module state): the judgments of a set of
queries and the rows a system returned for them give, per row, the query code, the score, the
grade (NaN where unjudged) and the keys that break score ties. Any partition of whole queries
can be joined on its own and gives the rows the whole would give for those queries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import DataError, preview
from .kernel import NonFiniteError, QueryResult, RunRows, evaluate_rows, native_kernel
from .readers import Table
from .readers.hashing import pair_hashes
from .readers.table import numpy_values, numpy_values_or, pool_array, same_strings, string_buffers, take_rows
from .rules import Gain, id_tiebreak, keeps_displayed_order
from .spec import Metric


def map_gains(gain: Gain, grades: np.ndarray, qrels: Table | None = None) -> np.ndarray:
    """Grades to gains. Negative grades earn 0 under exponential and linear; a table must know every grade.

    An exponential gain 2^g - 1 beyond the largest float (g >= 1024) is refused: a DataError at the
    first such line of ``qrels`` when given, else :class:`~ndcg_mlflow.kernel.NonFiniteError`.
    """
    if gain.is_exponential:
        with np.errstate(over="ignore"):
            gains = np.where(grades > 0, np.exp2(np.maximum(grades, 0)) - 1.0, 0.0)
        over = ~np.isfinite(gains)
        if over.any():
            row = int(np.flatnonzero(over)[0])
            if qrels is None:
                raise NonFiniteError("exponential gain", np.flatnonzero(over))
            raise qrels.error(row, gain_overflow(grades[row], int(over.sum())))
        return gains
    if not gain.is_table:  # linear
        return np.where(grades > 0, grades, 0.0)
    keys = np.array([k for k, _ in gain.table])
    vals = np.array([v for _, v in gain.table])
    idx = np.searchsorted(keys, grades)
    idx_c = np.minimum(idx, keys.size - 1)
    known = keys[idx_c] == grades
    if not known.all():
        row = int(np.flatnonzero(~known)[0])
        message = not_in_gain_table(grades[row], sorted({float(g) for g in grades[~known]}))
        raise qrels.error(row, message) if qrels is not None else DataError("qrels", message)
    return vals[idx_c]


# the messages of the gain rules, also said by the Spark engine, where ``of`` names the example row
def gain_overflow(grade: float, count: int, of: str = "") -> str:
    return (
        f"grade {grade:g}{of}: its exponential gain 2^{grade:g} - 1 overflows a float (metric.gain exponential "
        f"takes grades below 1024; {count} judgments in all). Use gain: linear or a gain table."
    )


def not_in_gain_table(grade: float, missing: list[float], of: str = "") -> str:
    listed = ", ".join(f"{g:g}" for g in missing)
    return f"grade {grade:g}{of} is not in the gain table (metric.gain); grades missing from it: {listed}."


def gain_sums_overflow(query: str, gain: Gain, examples: str, count: int) -> str:
    return (
        f"the gains of query {query!r} (metric.gain {gain.describe()}) sum to more than the largest float "
        f"(1.8e308), so its ideal DCG would overflow ({count} queries in all, e.g. {examples}). Use smaller gains "
        f"(gain: linear, or a gain table with smaller values)."
    )


def check_gain_sums(metric: Metric, catalog: Catalog, query_ids: np.ndarray, qrels: Table, keep: np.ndarray) -> None:
    """Refuse gains whose DCG could overflow a float, naming the query and its first judgment's line.

    Every DCG, ideal DCG and tie-averaged gain of a query is bounded by the sum of the query's
    absolute gains (each discount is at most 1, and a run's judged documents are among the query's
    judgments), so when that sum is finite for every query, no sum the kernel forms overflows.
    """
    gains = np.abs(map_gains(metric.gain, catalog.grade, None))
    with np.errstate(over="ignore", invalid="ignore"):
        sums = np.bincount(catalog.query, weights=gains, minlength=catalog.n_queries)
    over = np.flatnonzero(~np.isfinite(sums))
    if over.size:
        q = int(over[0])
        row = int(np.flatnonzero(keep)[np.flatnonzero(catalog.query == q)[0]])
        message = gain_sums_overflow(str(query_ids[q]), metric.gain, preview(query_ids[over]), over.size)
        raise qrels.error(row, message)


@dataclass
class Catalog:
    """The evaluated judgments: query code and grade of each judged document."""

    query: np.ndarray
    grade: np.ndarray
    n_queries: int


@dataclass
class PreparedRun:
    """One system's rows joined to the judgments, independent of every metric rule.

    From it, :func:`compute` gives the per-query numbers under any :class:`Metric`
    (``explain --sensitivity`` recomputes each rule's alternatives from it without
    reading a file again).
    """

    name: str
    run: Table
    kept: np.ndarray | None  # run rows of evaluated queries (None: all)
    query: np.ndarray
    score: np.ndarray
    judged_grade: np.ndarray  # the grade of each judged row, in row order (a few per query, not one per row)
    judged: np.ndarray

    def original(self, rows: np.ndarray) -> np.ndarray:
        return rows if self.kept is None else self.kept[rows]

    def grade_of(self, rows: np.ndarray) -> np.ndarray:
        """The grades of ``rows`` (NaN where unjudged)."""
        judged_rows = np.flatnonzero(self.judged)
        rows = np.asarray(rows, dtype=np.int64)
        at = np.minimum(np.searchsorted(judged_rows, rows), max(judged_rows.size - 1, 0))
        hit = judged_rows[at] == rows if judged_rows.size else np.zeros(rows.size, dtype=bool)
        out = np.full(rows.size, np.nan)
        out[hit] = self.judged_grade[at[hit]]
        return out

    @property
    def grade(self) -> np.ndarray:
        """Every row's grade (NaN where unjudged): a row-length array, made when asked for."""
        out = np.full(self.query.size, np.nan)
        out[self.judged] = self.judged_grade
        return out


def compute(metric: Metric, prep: PreparedRun, catalog: Catalog) -> QueryResult:
    """Per-query results of one prepared run under ``metric`` (the ``error`` forms act as ``exclude``)."""
    judged_gain = map_gains(metric.gain, prep.judged_grade)  # the judged rows' gains only
    rows = RunRows(
        query=prep.query,
        score=prep.score,
        gain=None,
        judged=prep.judged,
        tiebreak=tiebreak(metric.ties, prep),
        judged_gain=judged_gain,
    )
    cat_gain = map_gains(metric.gain, catalog.grade)
    return evaluate_rows(
        rows,
        catalog.query,
        cat_gain,
        catalog.n_queries,
        cutoffs=metric.cutoffs,
        ties=metric.ties,
        unjudged=metric.unjudged,
        ideal=metric.ideal,
        empty_ideal=metric.empty_ideal,
        missing_queries=metric.missing_queries,
    )


def index_in(values: np.ndarray, universe: np.ndarray) -> np.ndarray:
    """Position of each of ``values`` in ``universe`` (distinct ids), -1 where absent; a hash lookup, with no
    fixed-width string copy of either array."""
    position = {str(u): i for i, u in enumerate(universe)}
    return np.fromiter((position.get(str(v), -1) for v in values), dtype=np.int64, count=len(values))


@dataclass
class ExactIndex:
    """The evaluated judgments' (query, doc) pairs as exact integer keys, for the join that compares ids."""

    doc_values: Any  # pyarrow array of the distinct judged doc ids
    keys: np.ndarray  # sorted int64 keys: query * n_docs + doc
    gain_rows: np.ndarray  # position in the catalog arrays, aligned with keys
    n_docs: int


@dataclass
class JudgedIndex:
    """The evaluated judgments, for joining run rows to their gains: their (query, doc) pair hashes, sorted, and
    (made when first needed) their exact keys."""

    qrels_doc: Any  # the judgments' doc ids (Arrow strings), every qrels row
    catalog_rows: np.ndarray  # the qrels row of each catalog row
    catalog_query: np.ndarray  # the evaluated query code of each catalog row
    pair_keys: np.ndarray | None = None  # sorted pair_hashes of the catalog rows (None: some are equal)
    pair_rows: np.ndarray | None = None  # catalog row of each of pair_keys
    pair_filter: np.ndarray | None = None  # bool by the top bits of a key: whether some catalog key has them
    pair_bits: np.ndarray | None = None  # pair_filter packed, a bit a key prefix (uint8, bit order little)
    pair_starts: np.ndarray | None = None  # int32: pair_keys[s[p]:s[p + 1]] the keys of 16-bit prefix p
    _exact: ExactIndex | None = None

    def exact(self) -> ExactIndex:
        """The exact keys (Arrow's hash of the doc ids): made once, by the first join the pair hashes do not
        settle (judgments sharing a hash, or a run row whose hash matches a judgment of other ids)."""
        if self._exact is None:
            import pyarrow.compute as pc

            doc_values = pc.unique(self.qrels_doc)
            if hasattr(doc_values, "combine_chunks"):
                doc_values = doc_values.combine_chunks()
            d = doc_codes(self.qrels_doc, doc_values)[self.catalog_rows]
            n_docs = max(len(doc_values), 1)
            keys = self.catalog_query.astype(np.int64) * n_docs + d
            order = np.argsort(keys, kind="stable")
            self._exact = ExactIndex(doc_values, keys[order], order, n_docs)
        return self._exact


def doc_codes(strings: Any, value_set: Any) -> np.ndarray:
    """Position of each id in ``value_set`` (a pyarrow array; int32), -1 where absent (Arrow's hash lookup)."""
    import pyarrow.compute as pc

    return numpy_values_or(pc.index_in(strings, value_set=value_set), np.int32, -1)


PAIR_FILTER_BITS = 22  # 4 MB of flags (512 KB as bits): a few percent of a run's rows pass for ~60k judgments
PROBE_PREFIX_BITS = 16  # (ckernel.c's PREFIX_BITS) the C probe's table of where each 16-bit prefix's keys start


def pair_index(qrels: Table, keep: np.ndarray, cat_q: np.ndarray) -> JudgedIndex:
    """Index of the evaluated judgments (catalog rows are the qrels rows where ``keep``)."""
    index = JudgedIndex(qrels.doc.array, np.flatnonzero(keep), cat_q)
    hashed = pair_hashes(qrels)[keep]
    pair_order = np.argsort(hashed, kind="stable")
    sorted_keys = hashed[pair_order]
    if not (sorted_keys[1:] == sorted_keys[:-1]).any():  # (equal keys of unequal pairs: the exact join only)
        flags = np.zeros(1 << PAIR_FILTER_BITS, dtype=bool)
        flags[sorted_keys >> np.uint64(64 - PAIR_FILTER_BITS)] = True
        index.pair_keys, index.pair_rows, index.pair_filter = sorted_keys, pair_order, flags
        if native_kernel() is not None:
            index.pair_bits, index.pair_starts = probe_tables(sorted_keys, flags)
    return index


def probe_tables(sorted_keys: np.ndarray, flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The C probe's tables (``ckernel.probe``) of ascending distinct keys and their prefix flags (a bool per
    value of a key's top bits, at least 16 of them): the flags as bits (uint8, bit order little), and where each
    16-bit prefix's keys start (int32, 2^16 + 1: ``sorted_keys[s[p]:s[p + 1]]`` have prefix p)."""
    prefixes = np.arange(1 << PROBE_PREFIX_BITS, dtype=np.uint64) << np.uint64(64 - PROBE_PREFIX_BITS)
    starts = np.append(np.searchsorted(sorted_keys, prefixes), sorted_keys.size).astype(np.int32)
    return np.packbits(flags, bitorder="little"), starts


def judged_rows(
    run: Table, keys: np.ndarray, q: np.ndarray, kept: np.ndarray | None, judged: JudgedIndex, catalog: Catalog
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, catalog rows) of the run rows (numbered as ``q``, the evaluated query code of each kept row) that
    are judged, in row order, and their judgments.

    Each row's (query, doc) key is looked up among the judgments' keys (a flag per key prefix first, so that
    most rows are passed over at once); the ids of every match are then compared. A match of unequal ids (two
    pairs with one key), or judgments sharing keys, sends the run to the exact join of the doc ids to the
    judged ones (Arrow's hash lookup), which gives the same rows."""
    if (
        judged.pair_keys is not None
        and judged.pair_keys.size
        and judged.pair_filter is not None
        and judged.pair_rows is not None
    ):
        if kept is not None:
            keys = keys[kept]
        fast = native_kernel()
        if (
            fast is not None
            and keys.dtype == np.uint64
            and judged.pair_bits is not None
            and judged.pair_starts is not None
        ):  # the same rows, in one pass
            found, at = np.empty(keys.size, dtype=np.int64), np.empty(keys.size, dtype=np.int64)  # (pages touched
            k = fast.probe(
                np.ascontiguousarray(keys),
                judged.pair_bits,
                64 - PAIR_FILTER_BITS,  # only where a key
                judged.pair_keys,
                judged.pair_starts,
                found,
                at,
            )  # matched)
            rows, cat_rows = found[:k].copy(), judged.pair_rows[at[:k]]
            del found, at
        else:
            step, shift = 1 << 20, np.uint64(64 - PAIR_FILTER_BITS)  # a slice at a time: no row-length temporary
            cand = np.concatenate(
                [np.flatnonzero(judged.pair_filter[keys[a : a + step] >> shift]) + a for a in range(0, keys.size, step)]
                or [np.zeros(0, dtype=np.int64)]
            )
            ck = keys[cand]
            at = np.minimum(np.searchsorted(judged.pair_keys, ck), judged.pair_keys.size - 1)
            hit = judged.pair_keys[at] == ck
            rows, cat_rows = cand[hit], judged.pair_rows[at[hit]]
        same_query = bool((catalog.query[cat_rows] == q[rows]).all())
        if same_query and same_strings(
            take_rows(run.doc.array, rows if kept is None else kept[rows]),
            take_rows(judged.qrels_doc, judged.catalog_rows[cat_rows]),
        ):
            return rows, cat_rows
    exact = judged.exact()
    d = doc_codes(run.doc.array, exact.doc_values)
    if kept is not None:
        d = d[kept]
    cand = np.flatnonzero(d >= 0)
    pairs = q[cand].astype(np.int64) * exact.n_docs + d[cand]
    at = np.minimum(np.searchsorted(exact.keys, pairs), max(exact.keys.size - 1, 0))
    hit = exact.keys[at] == pairs if exact.keys.size else np.zeros(cand.size, dtype=bool)
    return cand[hit], exact.gain_rows[at[hit]]


def prepare_run(
    name: str, run: Table, query_ids: np.ndarray, judged: JudgedIndex, catalog: Catalog
) -> tuple[PreparedRun, int]:
    """Join one run to the judgments: evaluated rows only, each with its grade and judged flag.

    Returns the prepared rows and the number of the run's queries outside the evaluated set. Takes the run's
    ``pair_keys`` (the table no longer holds them), or computes them.
    """
    q_map = index_in(run.query.values, query_ids)
    unknown_queries = int(np.count_nonzero(q_map < 0))
    fast = native_kernel()
    if fast is not None:  # the same gather, in one pass
        q = pool_array(len(run.query.codes), np.int32)
        fast.map_codes(np.ascontiguousarray(run.query.codes, dtype=np.int32), q_map.astype(np.int32), q)
    else:
        q = q_map.astype(np.int32)[run.query.codes]  # (int32 codes: 4 bytes a row)
    kept = None if unknown_queries == 0 else np.flatnonzero(q >= 0)
    if kept is not None:
        q = q[kept]
    keys = run.pair_keys if run.pair_keys is not None else pair_hashes(run)
    run.pair_keys = None
    rows, cat_rows = judged_rows(run, keys, q, kept, judged, catalog)
    del keys
    is_judged = np.zeros(q.size, dtype=bool)
    is_judged[rows] = True
    score = run.value if kept is None else run.value[kept]
    return PreparedRun(name, run, kept, q, score, catalog.grade[cat_rows], is_judged), unknown_queries


def tiebreak(ties: str, prep: PreparedRun) -> Callable[[np.ndarray], np.ndarray] | None:
    """Keys ordering tied rows: the displayed rank, or the doc id (only tied rows are ever looked up)."""
    if keeps_displayed_order(ties):
        if prep.run.rank is None:
            return None
        rank = prep.run.rank if prep.kept is None else prep.run.rank[prep.kept]
        return lambda rows: rank[rows]
    descending = id_tiebreak(ties)
    return None if descending is None else IdOrder(prep, descending=descending)


class IdOrder:
    """Tied rows ordered by document id (code point order), ascending or descending: keys for any rows, or
    (in C, where built) each row's place within its tied group."""

    def __init__(self, prep: PreparedRun, descending: bool):
        self.prep, self.descending = prep, descending

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        ranks = string_ranks(take_rows(self.prep.run.doc.array, self.prep.original(rows)))
        return -ranks if self.descending else ranks

    def within_groups(self, rows: np.ndarray, sizes: np.ndarray) -> np.ndarray | None:
        """Each row's place in its group (``sizes``: the lengths of the consecutive groups of ``rows``), as
        ``numpy.lexsort((self(rows), group))`` orders them; None where the C part is not built."""
        fast = native_kernel()
        if fast is None:
            return None
        _, offsets, data = string_buffers(take_rows(self.prep.run.doc.array, self.prep.original(rows)))
        place = np.empty(offsets.size - 1, dtype=np.int64)
        fast.group_order(offsets, data, np.ascontiguousarray(sizes, dtype=np.int64), self.descending, place)
        return place


def string_ranks(values: Any) -> np.ndarray:
    """Rank of each string of an Arrow string array in plain (code point) string order: Arrow's stable sort of
    the UTF-8 bytes, whose order is the code points' (Python's comparison); no Python string is made."""
    import pyarrow.compute as pc

    order = numpy_values(pc.sort_indices(values), np.uint64).astype(np.int64)
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.arange(len(values))
    return ranks


@dataclass
class Judgments:
    """The judgments of the evaluated queries, ready for joining runs to them."""

    query_ids: np.ndarray  # evaluated query ids (object array), in evaluated order
    catalog: Catalog
    index: JudgedIndex


def judgments(qrels: Table, query_ids: np.ndarray, metric: Metric) -> Judgments:
    """Index the judgments of ``query_ids`` (every other query of ``qrels`` is left out).

    Refuses gains whose DCG could overflow a float, naming the query and its first judgment.
    """
    q_of_value = index_in(qrels.query.values, query_ids)
    cat_q_all = q_of_value[qrels.query.codes]
    keep = cat_q_all >= 0
    catalog = Catalog(cat_q_all[keep], qrels.value[keep], len(query_ids))
    check_gain_sums(metric, catalog, query_ids, qrels, keep)
    return Judgments(query_ids, catalog, pair_index(qrels, keep, catalog.query))


def join(name: str, run: Table, judged: Judgments) -> tuple[PreparedRun, int]:
    """One system's rows of the evaluated queries joined to their grades (rows of other queries are left out).

    Returns the prepared rows and the number of the run's queries outside the evaluated set.
    """
    return prepare_run(name, run, judged.query_ids, judged.index, judged.catalog)
