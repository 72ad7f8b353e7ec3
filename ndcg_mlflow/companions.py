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

import numpy as np

from .errors import DataError, SpecError
from .kernel import depth_of
from .readers.hashing import string_hashes
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


def catalog_coverage(
    position: np.ndarray,
    docs,
    cutoffs: tuple,
    *,
    size: int | None = None,
    catalog=None,
    system: str = "",
    source: str | None = None,
) -> list[float]:
    """Per cutoff: distinct shown documents over the catalog size, or the shown share of a catalog file.

    A declared size below the number of distinct documents one system shows cannot be the
    catalog's size (coverage would pass 100%): a :class:`SpecError` at ``companions.catalog``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    counts = []
    for k in cutoffs:
        sel = np.flatnonzero(position < depth_of(k)) if k is not None else np.arange(position.size)
        shown = docs.take(pa.array(sel, type=pa.int64()))
        if catalog is not None:
            idx = pc.fill_null(pc.index_in(shown, value_set=catalog), -1).to_numpy(zero_copy_only=False)
            counts.append(int(np.unique(idx[idx >= 0]).size))
        else:
            counts.append(int(np.unique(string_hashes(shown)).size))
    return coverage_of_counts(
        counts, cutoffs, size=size, catalog_size=None if catalog is None else len(catalog), system=system, source=source
    )


def coverage_of_counts(
    counts: list[int],
    cutoffs: tuple,
    *,
    size: int | None = None,
    catalog_size: int | None = None,
    system: str = "",
    source: str | None = None,
) -> list[float]:
    """Catalog coverage per cutoff from the counts of shown documents: ``counts[j]`` is, at cutoff ``cutoffs[j]``,
    the number of the catalog file's documents shown (``catalog_size``: the file's distinct documents), else the
    number of distinct documents shown (over the declared ``size``; refused as :func:`catalog_coverage` says).
    Every engine divides here, so that the numbers and the refusal are the same."""
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
