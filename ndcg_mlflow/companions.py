"""Companion measures reported beside nDCG, as the explainer suggests when the task calls for them.

* duplicate rate in the top K, per query: the share of the shown top K (``min(K, returned)``
  documents, as the metric ranked them) taken by a document whose duplicate group already
  appeared higher in the list. Documents the mapping does not list are groups of their own.
* catalog coverage at K, per system: distinct documents shown in the top K across the evaluated
  queries, over the catalog size (declared number), or the share of a declared catalog file's
  documents that were shown.

numpy and pyarrow only; computed from the joined rows of one system and its ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import DataError, SpecError
from .kernel import depth_of
from .readers.small import small_rows


@dataclass
class DuplicateGroups:
    docs: object  # pyarrow array of doc ids
    group: np.ndarray  # group code of each


def read_duplicate_groups(path) -> DuplicateGroups:
    """``doc_id group`` per line: white space separated, or a CSV/TSV whose header names doc_id and group."""
    import pyarrow as pa

    docs, groups = [], []
    index: dict[str, int] = {}
    seen: dict[str, int] = {}
    for line, (doc, group) in small_rows(path, ("doc_id", "group")):
        if doc in seen:
            raise DataError(path, f"document {doc!r} is listed twice (first at line {seen[doc]}).", line)
        seen[doc] = line
        docs.append(doc)
        groups.append(index.setdefault(group, len(index)))
    if not docs:
        raise DataError(path, "the duplicate-group file is empty.")
    return DuplicateGroups(pa.array(docs, type=pa.string()), np.asarray(groups, dtype=np.int64))


def read_catalog(path) -> object:
    """A catalog file: one doc id per line, or a CSV/TSV whose header names a doc_id column; a pyarrow array."""
    import pyarrow as pa

    ids, seen = [], set()
    for _, (doc,) in small_rows(path, ("doc_id",)):
        if doc not in seen:
            seen.add(doc)
            ids.append(doc)
    if not ids:
        raise DataError(path, "the catalog file is empty.")
    return pa.array(ids, type=pa.string())


def duplicate_rate(
    query: np.ndarray,
    position: np.ndarray,
    doc_group: np.ndarray,
    n_queries: int,
    cutoffs: tuple,
    n_returned: np.ndarray,
) -> np.ndarray:
    """(n_queries, n_cutoffs) share of the shown top K repeating a group already shown; NaN when nothing shown.

    ``doc_group`` is each ranked row's group code, or -1 for a document no group lists.
    """
    out = np.full((n_queries, len(cutoffs)), np.nan)
    for j, k in enumerate(cutoffs):
        sel = position < depth_of(k) if k is not None else np.ones(position.size, dtype=bool)
        q, g = query[sel], doc_group[sel]
        shown = np.bincount(q, minlength=n_queries)
        own = np.bincount(q[g < 0], minlength=n_queries)  # unlisted docs are distinct groups
        listed = g >= 0
        if listed.any():
            pairs = np.unique(q[listed].astype(np.int64) * (int(g.max()) + 1) + g[listed])
            distinct = np.bincount(pairs // (int(g.max()) + 1), minlength=n_queries)
        else:
            distinct = np.zeros(n_queries, dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, j] = np.where(shown > 0, (shown - own - distinct) / np.maximum(shown, 1), np.nan)
    return out


@dataclass(frozen=True)
class CompanionPlan:
    """What the per-query rows carry beside nDCG (:func:`ndcg_mlflow.queries.score_queries`); small, so that the
    Spark engine sends it to its executors."""

    duplicates: bool  # each query's duplicate rate, from each run row's duplicate group
    coverage: bool  # the documents shown, for catalog coverage
    cutoffs: tuple
    shown_depth: int | None  # the deepest finite cutoff, or None (cutoff ``all``): every ranked row

    @staticmethod
    def of(spec: Any, companions: dict[str, Any] | None) -> CompanionPlan | None:
        if companions is None:
            return None
        cutoffs = tuple(spec.metric.cutoffs)
        finite = [depth_of(k) for k in cutoffs if k is not None]
        depth = max(finite) if len(finite) == len(cutoffs) else None
        return CompanionPlan(
            "duplicates" in companions, "catalog" in companions or "catalog_size" in companions, cutoffs, depth
        )


@dataclass
class Shown:
    """The distinct documents a ranking shows within the plan's deepest cutoff, each with the best (0-based)
    position it is shown at."""

    docs: Any  # pyarrow array of doc ids
    best: np.ndarray


def group_codes(groups: DuplicateGroups, docs: Any) -> np.ndarray:
    """Each of ``docs``' duplicate group code, -1 for a document the mapping does not list."""
    import pyarrow.compute as pc

    idx = np.asarray(pc.fill_null(pc.index_in(docs, value_set=groups.docs), -1).to_numpy(zero_copy_only=False))
    return np.where(idx >= 0, groups.group[np.maximum(idx, 0)], -1)


def measure_queries(
    plan: CompanionPlan, prep: Any, qr: Any, groups: np.ndarray | None
) -> tuple[np.ndarray | None, Shown | None]:
    """The companion measures of the per-query rows ``qr`` of the prepared rows ``prep``: each query's duplicate
    rate per cutoff (``groups``: each run row's group code), and the documents shown (:class:`Shown`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .readers.table import take_rows

    original = prep.original(qr.ranked)
    rate = None
    if plan.duplicates:
        assert groups is not None
        rate = duplicate_rate(
            prep.query[qr.ranked], qr.position, groups[original], qr.n_returned.size, plan.cutoffs, qr.n_returned
        )
    if not plan.coverage:
        return rate, None
    position = qr.position
    sel = np.flatnonzero(position < plan.shown_depth) if plan.shown_depth is not None else np.arange(position.size)
    enc = pc.dictionary_encode(take_rows(prep.run.doc.array, original[sel]))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    best = np.full(len(enc.dictionary), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, code, np.asarray(position[sel], dtype=np.int64))
    return rate, Shown(enc.dictionary, best)


def shown_counts(shown: Shown, cutoffs: tuple, catalog: Any = None) -> list[int]:
    """Per cutoff, the documents shown above it (of ``catalog``, a pyarrow array of distinct doc ids, when a
    catalog file is declared). The Spark engine counts the same over its buckets' :class:`Shown` rows."""
    import pyarrow.compute as pc

    best = shown.best
    if catalog is not None:
        best = best[np.asarray(pc.is_in(shown.docs, value_set=catalog).to_numpy(zero_copy_only=False), dtype=bool)]
    return [int(best.size) if k is None else int(np.count_nonzero(best < depth_of(k))) for k in cutoffs]


def fill_means(sr: Any, metric: Any, rate: np.ndarray | None, coverage: list[float] | None, weights: Any) -> None:
    """A system's companion fields: its per-query duplicate rates and their weighted means (``weights``: relative
    to the largest), and its catalog coverage per cutoff."""
    from .statistics.inference import nan_weighted_mean

    if rate is not None:
        sr.duplicate_rate = rate
        for j, key in enumerate(metric.keys):
            sr.means[key]["duplicate_rate"] = nan_weighted_mean(rate[:, j], weights)
    if coverage is not None:
        for key, value in zip(metric.keys, coverage):
            sr.means[key]["catalog_coverage"] = float(value)


def coverage_of_counts(
    counts: list[int], cutoffs: tuple, companions: dict[str, Any], system: str = "", source: str | None = None
) -> list[float]:
    """Catalog coverage per cutoff from the counts of shown documents (:func:`shown_counts`): ``counts[j]`` is, at
    cutoff ``cutoffs[j]``, the number of the catalog file's documents shown (over the file's distinct documents),
    else the number of distinct documents shown (over the declared ``catalog_size``). A declared size below the
    documents one system shows cannot be the catalog's size (coverage would pass 100%): a :class:`SpecError` at
    ``companions.catalog``. Every engine divides here, so that the numbers and the refusal are the same."""
    catalog = companions.get("catalog")
    catalog_size = None if catalog is None else len(catalog)
    size = companions.get("catalog_size")
    out = []
    for k, n in zip(cutoffs, counts):
        if catalog_size is not None:
            out.append(n / catalog_size)
            continue
        assert size is not None  # a catalog file or a catalog size is given
        if n > size:
            raise SpecError(
                "companions.catalog",
                f"declares a catalog of {size} documents, but system '{system}' shows {n} "
                f"distinct documents in its {'whole lists' if k is None else f'top {k}'} across the "
                f"evaluated queries: "
                f"the catalog size must be at least the number of distinct documents shown "
                f"(or give a file of the catalog's doc ids).",
                source,
            )
        out.append(n / size)
    return out
