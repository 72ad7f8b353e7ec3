"""What a model's ``predict`` returned, read by one rule: one score per input row, or one ranked list of doc ids
per query. Every place that scores a model reads its output here: the local engine (:mod:`ndcg_mlflow.models.systems`),
the Spark engine's executors (:mod:`ndcg_mlflow.engines.spark.models`) and the ``ndcg_spec`` evaluator
(:mod:`ndcg_mlflow.integrations.evaluator`). numpy and pandas only.

* **Scores**: a 1-d array, a 2-d array of one column (``(n, 1)``, as Keras and many scikit-learn wrappers
  return), a one-column frame, a Series or a list, of numbers (integers or floats; not booleans, not text), one
  per input row; an ``(n, 1)`` output as nested sequences too (``[[0.1], [0.7]]``, ``.tolist()`` of a column, or a
  Series of one-element arrays) when each holds one float (a float is no doc id).
* **Ranked lists**: a list, tuple, Series or 1-d object array holding, for each input row, a list (a list, a
  tuple or a 1-d array) of doc ids, best first; a doc id is text or an integer (its decimal text), and the input
  rows name distinct queries (one row per query).
* **Anything else is refused**, naming the model: ``None``, a single value, a frame of several columns, an array
  of another shape, a number of values other than the number of input rows, single values mixed with lists, a
  list holding a float among other values, ``None`` or a nested list, and lists for input rows that repeat a
  query.

Whether finite scores are required, and where a row is, stays with the caller (the local engine names the row, the
Spark engine counts them all).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import DataError, preview

SCORES, LISTS = "scores", "lists"

EXPECTED = (
    "a ranker returns one score per row (a 1-d array, an (n, 1) array, a one-column frame or a Series of "
    "numbers), a retriever one list of doc ids per query (a list or Series of lists)"
)


@dataclass(frozen=True)
class Predictions:
    """A model's output for ``n`` input rows: ``kind`` is ``"scores"`` (``scores``: float64, one per row) or
    ``"lists"`` (``lists``: per row, its doc ids as text, best first)."""

    kind: str
    scores: Any = None
    lists: list[list[str]] | None = None


def read_predictions(
    output: Any,
    queries: Any,
    *,
    model: str,
    where: str,
    file: str | os.PathLike[str],
    seen: set[str] | None = None,
    expect: str | None = None,
) -> Predictions:
    """``output`` of ``model`` (its URI, for messages) for input rows whose query ids are ``queries`` (a sequence,
    one per row), as :class:`Predictions`; a DataError naming ``file`` and the rows (``where``, e.g. "rows 1-8 of
    c.parquet") for anything the module's rule refuses. ``seen``, when given, holds the queries of earlier
    batches of ranked lists (updated here): a query is on one input row of them all. ``expect``: the kind the
    caller takes (a ``ranker``'s scores, a ``retriever``'s lists), the other refused; None: either."""
    import numpy as np
    import pandas as pd

    n = len(queries)
    if output is None:
        raise DataError(file, f"{model} returned None for {where}; {EXPECTED}.")
    if isinstance(output, pd.DataFrame):
        if output.shape[1] != 1:
            raise DataError(
                file,
                f"{model} returned {output.shape[1]} columns ({preview(list(output.columns))}) "
                f"for {where}; {EXPECTED}.",
            )
        output = output.iloc[:, 0]
    if isinstance(output, np.ndarray):
        if output.ndim == 2 and output.shape[1] == 1:
            output = output[:, 0]
        elif output.ndim != 1:
            raise DataError(file, f"{model} returned an array of shape {output.shape} for {where}; {EXPECTED}.")
    elif not isinstance(output, (pd.Series, list, tuple)):
        what = (
            f"the single value {output!r}"
            if np.ndim(output) == 0 and not isinstance(output, (dict, set))
            else f"a {type(output).__name__}"
        )
        raise DataError(file, f"{model} returned {what} (of type {type(output).__name__}) for {where}; {EXPECTED}.")
    if len(output) != n:
        raise DataError(file, f"{model} returned {len(output)} values for {n} input rows ({where}); {EXPECTED}.")
    if n == 0:
        return Predictions(SCORES, scores=np.zeros(0))
    values = output.to_numpy() if isinstance(output, pd.Series) else output
    listed = (
        [False] * n
        if isinstance(values, np.ndarray) and values.dtype.kind != "O"
        else [isinstance(v, (list, tuple, np.ndarray)) for v in values]
    )
    qs = [str(q) for q in (queries.tolist() if hasattr(queries, "tolist") else queries)]
    if all(listed) and expect != LISTS:
        column = _one_number_each(values, ints=expect == SCORES)
        if column is not None:  # (n, 1) as nested lists or one-element arrays: one score per row
            return Predictions(SCORES, scores=column)
    if expect == LISTS and not all(listed):
        i = listed.index(False)
        raise DataError(
            file,
            f"{model} returned {type(values[i]).__name__} for query {qs[i]!r} ({where}); a "
            f"retriever returns, per row, a list of doc ids.",
        )
    if expect == SCORES and any(listed):
        i = listed.index(True)
        raise DataError(
            file, f"{model} returned a list for query {qs[i]!r} ({where}); a ranker returns one score per row."
        )
    if not any(listed):
        return Predictions(SCORES, scores=_numbers(values, model, where, file))
    if not all(listed):
        i = listed.index(not listed[0])
        odd = values[i]
        what = type(odd).__name__ if listed[0] else "a list"
        among = (
            "ranked lists; every row's output is a list of doc ids"
            if listed[0]
            else "scores; every row's output is one number"
        )
        raise DataError(file, f"{model} returned {what} for query {qs[i]!r} ({where}) among {among}.")
    lists = []
    for q, docs in zip(qs, values):
        if isinstance(docs, np.ndarray) and docs.ndim != 1:
            raise DataError(
                file, f"{model} returned an array of shape {docs.shape} for query {q!r} ({where}); {EXPECTED}."
            )
        ids = []
        for i, d in enumerate(docs.tolist() if isinstance(docs, np.ndarray) else docs):
            if isinstance(d, (str, np.str_)):
                ids.append(str(d))
            elif isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
                ids.append(str(int(d)))
            elif isinstance(d, (float, np.floating)) and not np.isnan(d):
                raise DataError(
                    file,
                    f"{model} returned the number {d!r} at position {i + 1} of the list of query "
                    f"{q!r} ({where}): a ranked list holds doc ids (text or integers), and one "
                    f"score per row is a 1-d array, an (n, 1) array, a one-column frame or a "
                    f"Series of numbers, not a Series of lists of numbers.",
                )
            else:
                raise DataError(
                    file,
                    f"{model} returned {d!r} at position {i + 1} of the list of query {q!r} "
                    f"({where}); a ranked list holds doc ids (text or integers).",
                )
        lists.append(ids)
    earlier = seen if seen is not None else set()
    mine: dict[str, int] = {}
    for i, q in enumerate(qs):
        if q in mine or q in earlier:
            rows = (
                f"on rows {mine[q] + 1} and {i + 1} of {where}"
                if q in mine
                else f"on row {i + 1} of {where} and on an earlier row"
            )
            raise DataError(
                file,
                f"{model} returned ranked lists, and query {q!r} is {rows}: a retriever gets one "
                f"row per query (a ranker returns one score per row).",
            )
        mine[q] = i
    earlier.update(mine)
    return Predictions(LISTS, lists=lists)


def _one_number_each(values: Any, ints: bool) -> Any:
    """The scores of an ``(n, 1)`` output given as nested sequences (``[[0.1], [0.7]]``, ``.tolist()`` of a
    column; a Series of one-element arrays): float64, when every row holds exactly one float (or, with ``ints``,
    one integer too: a ranker's output, never doc ids); else None. A lone integer is a doc id otherwise."""
    import numpy as np

    kinds = (float, np.floating, int, np.integer) if ints else (float, np.floating)
    out = np.empty(len(values))
    for i, row in enumerate(values):
        if len(row) != 1:
            return None
        v = row[0] if not isinstance(row, np.ndarray) or row.ndim == 1 else None
        if not isinstance(v, kinds) or isinstance(v, (bool, np.bool_)):
            return None
        out[i] = v
    return out


def _numbers(values: Any, model: str, where: str, file: str | os.PathLike[str]) -> Any:
    """The scores as float64: numbers only (text, booleans and dates are not scores, even when they convert)."""
    import numpy as np

    raw = np.asarray(values) if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if raw.dtype.kind == "O" and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in raw
    ):
        return raw.astype(np.float64)
    if raw.dtype.kind in "iuf":
        return raw.astype(np.float64)
    odd = next(
        (v for v in raw if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, (bool, np.bool_))),
        raw[0],
    )
    shown = odd.item() if isinstance(odd, np.generic) else odd
    raise DataError(
        file,
        f"{model} returned values that are not numbers for {where} (such as {shown!r}, of type "
        f"{type(odd).__name__}); a ranker returns one finite score per row.",
    )
