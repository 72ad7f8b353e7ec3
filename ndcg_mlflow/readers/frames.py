"""Tables in memory: Arrow C stream objects (pyarrow, pandas, polars) and nested mappings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import DataError
from .accept import (
    NO_ROWS,
    QRELS,
    Refused,
    clip,
    empty_id,
    id_type,
    named_columns,
    not_a_number,
    not_finite,
    refusals,
    source_name,
)
from .columns import arrow_columns, checked_qrels, checked_run, table_from_columns
from .hashing import table_digest
from .table import Table

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
        raise DataError(label, NO_ROWS)
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
            raise DataError(label, NO_ROWS)
        with refusals(label):
            value_col, rank_col = named_columns(kind, tbl.column_names, columns)
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
    """The rows of ``{query_id: {doc_id: value}}``: ids strings or integers (their decimal text), non-empty;
    values finite numbers. Errors name the label and the entry (``['q1']['d3']``)."""
    import numbers

    what = "grade" if kind == QRELS else "score"
    qs, ds, vs = [], [], []

    def text(column: str, key: Any) -> str:
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (str, numbers.Integral)):
            raise Refused(id_type(column, f"{type(key).__name__} {clip(repr(key), 60)}"))
        key = str(key) if isinstance(key, str) else str(int(key))
        if not key:
            raise Refused(empty_id(column))
        return key

    where = ""
    try:
        for q, docs in obj.items():
            where = f"[{q!r}]"
            qid = text("query_id", q)
            for d, v in docs.items():
                where = f"[{q!r}][{d!r}]"
                doc = text("doc_id", d)
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                    raise Refused(not_a_number(what, f"{type(v).__name__} {clip(repr(v), 60)}"))
                try:
                    x = float(v)
                except OverflowError:
                    x = -math.inf if str(v).startswith("-") else math.inf  # (an integer beyond a double)
                if not math.isfinite(x):
                    raise Refused(not_finite(what, x))
                qs.append(qid)
                ds.append(doc)
                vs.append(x)
    except Refused as exc:
        raise DataError(label, f"{where}: {exc.message}") from None
    return qs, ds, vs
