"""Tables in memory: Arrow C stream objects (pyarrow, pandas, polars) and nested mappings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import DataError
from .columns import (
    arrow_columns,
    canonical_names,
    checked_qrels,
    checked_run,
    required_columns,
    source_name,
    table_from_columns,
)
from .hashing import table_digest
from .table import QRELS, Table
from .text import clip

# --------------------------------------------------------------------------- in-memory tables


def table_from_object(obj: Any, kind: str, label: str, columns: tuple[tuple[str, str], ...] | dict = ()) -> Table:
    """An in-memory table as the file readers' :class:`Table`, checked exactly as a file is.

    ``obj`` is anything Arrow reads through the Arrow C stream interface (``__arrow_c_stream__``: a pyarrow
    Table or RecordBatchReader, a pandas, polars or DuckDB frame...), or a nested mapping
    ``{query_id: {doc_id: grade}}`` (judgments) / ``{query_id: {doc_id: score}}`` (a run). ``kind`` is
    ``"qrels"`` or ``"run"``; ``label`` names the table in errors (``systems['v3']``); ``columns`` maps the
    tool's column names to the table's. Integer ids are read as their decimal text.
    """
    import pyarrow as pa

    columns = tuple(dict(columns).items())
    if isinstance(obj, Table):
        return obj
    if isinstance(obj, Mapping) and not obj:
        raise DataError(label, "the table has no rows.")
    if isinstance(obj, Mapping) and all(isinstance(v, Mapping) for v in obj.values()):
        if columns:
            raise DataError(
                label,
                "a column mapping is for tables with named columns, not for a nested mapping "
                "{query_id: {doc_id: value}}.",
            )
        qs, ds, vs = _nested_rows(obj, kind, label)
        table = table_from_columns(
            label,
            kind,
            "table",
            pa.array(qs, type=pa.string()),
            pa.array(ds, type=pa.string()),
            np.asarray(vs, dtype=np.float64),
            None,
        )
    else:
        tbl = _arrow_table(obj, label)
        if tbl.num_rows == 0:
            raise DataError(label, "the table has no rows.")
        value_col, rank_col, _ = required_columns(kind, canonical_names(tbl.column_names, columns), label, None)
        needed = [c for c in ("query_id", "doc_id", value_col, rank_col) if c]
        named = pa.table({c: tbl.column(source_name(columns, c)) for c in needed})
        table = table_from_columns(label, kind, "table", *arrow_columns(named, label, value_col, rank_col))
    table.digest = table_digest(table)
    return checked_qrels(table) if kind == QRELS else checked_run(table)


def _arrow_table(obj: Any, label: str) -> Any:
    """Any Arrow-compatible object as a pyarrow Table (through the Arrow C stream interface when it has one)."""
    import pyarrow as pa

    try:
        if isinstance(obj, pa.Table):
            return obj
        if isinstance(obj, pa.RecordBatchReader):
            return obj.read_all()
        if isinstance(obj, pa.RecordBatch):
            return pa.Table.from_batches([obj])
        if hasattr(obj, "__arrow_c_stream__"):
            return pa.RecordBatchReader.from_stream(obj).read_all()
        if hasattr(obj, "arrow") and callable(obj.arrow):  # DuckDB relations of versions without the interface
            return _arrow_table(obj.arrow(), label)
        return pa.table(obj)
    except DataError:
        raise
    except (TypeError, ValueError, KeyError, pa.ArrowException) as exc:
        raise DataError(
            label,
            f"cannot be read as a table ({type(obj).__name__}): {clip(str(exc), 200).rstrip('.')}. "
            f"Give an "
            f"object with the Arrow C stream interface (pyarrow, pandas, polars, DuckDB) or "
            f"a mapping {{query_id: {{doc_id: value}}}}.",
        ) from None


def _nested_rows(obj: Any, kind: str, label: str) -> tuple[list[str], list[str], list[float]]:
    import numbers

    what = "grade" if kind == QRELS else "score"
    qs, ds, vs = [], [], []

    def text(key: Any, where: str) -> str:
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (str, numbers.Integral)):
            raise DataError(
                label, f"{where}: ids must be strings (or integers), got {type(key).__name__} {clip(repr(key), 60)}."
            )
        key = str(key) if isinstance(key, str) else str(int(key))
        if not key:
            raise DataError(label, f"{where}: an id is empty; every row needs a query_id and a doc_id.")
        return key

    for q, docs in obj.items():
        qid = text(q, f"[{q!r}]")
        for d, v in docs.items():
            where = f"[{q!r}][{d!r}]"
            doc = text(d, where)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                raise DataError(
                    label, f"{where}: {what} must be a finite number, got {type(v).__name__} {clip(repr(v), 60)}."
                )
            try:
                x = float(v)
            except OverflowError:
                x = math.inf
            if not math.isfinite(x):
                raise DataError(label, f"{where}: {what} must be a finite number, got {clip(repr(v), 60)}.")
            qs.append(qid)
            ds.append(doc)
            vs.append(x)
    return qs, ds, vs
