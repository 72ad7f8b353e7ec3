"""The CSV files' text: the lines ``frame.to_csv(index=False, float_format="%.17g", na_rep="")`` writes, formatted
column by column without pandas' writer (:func:`csv_lines`), and every text field quoted where a CSV reader would
read it otherwise (a lone carriage return, which pandas' writer leaves bare): each reads back as the same string."""

from __future__ import annotations

import re

import numpy as np

FLOAT_FORMAT = "%.17g"  # every float of the CSV files: 17 significant digits, which read back as the same double
FEW_VALUES_MIN_ROWS = 4096  # a column at least this long is formatted by its distinct values when they are few


# what a field is quoted for: a comma, a double quote or a line end of any kind (a lone carriage return too,
# which Python's CSV writer leaves unquoted when the line end is "\n": every CSV reader ends the line there)
_NEEDS_QUOTES = re.compile('[,"\r\n]')


def csv_lines(frame) -> list[str] | None:
    """The lines (header first, each with its line end) of ``frame.to_csv(index=False, float_format="%.17g",
    na_rep="")``, the same text, formatted column by column: floats with :data:`FLOAT_FORMAT`, integers and
    booleans as Python writes them, text as it is, a missing value (NaN, None) as an empty field, quoted as
    :func:`csv_join` quotes (where pandas' writer leaves a lone carriage return unquoted, and the line ends
    there); a categorical column (the ``cutoff`` column) as its values are written. None for a column of another
    type (pandas' other extension types, dates or nullable numbers, which hold no text: left to pandas)."""
    import pandas as pd

    columns: list[list[str]] = []
    for name in frame.columns:
        column = frame[name]
        numpy_type = isinstance(column.dtype, np.dtype)
        if numpy_type and column.dtype.kind in "fiub":
            columns.append(number_text(column.to_numpy()))
        elif (numpy_type and column.dtype.kind == "O") or (
            not numpy_type and pd.api.types.is_string_dtype(column.dtype)  # ("string", Arrow's strings)
        ):
            columns.append(_object_text(column.to_numpy(dtype=object), column.isna().to_numpy()))
        elif isinstance(column.dtype, pd.CategoricalDtype):
            text = [str(c) for c in column.cat.categories] + [""]  # (code -1, a missing value: empty)
            columns.append([text[i] for i in column.cat.codes.tolist()])
        else:
            return None
    return csv_join([str(c) for c in frame.columns], columns)


def number_text(values: np.ndarray) -> list[str]:
    """A float column's fields (:data:`FLOAT_FORMAT`, NaN empty), or an integer or boolean one's (``str``).

    A long column of few distinct values (grades, ranks) formats each distinct value once: distinct by their bits,
    so that -0.0 and 0.0 keep their own text."""
    if values.size >= FEW_VALUES_MIN_ROWS and values.dtype.itemsize in (1, 2, 4, 8):
        bits = np.ascontiguousarray(values).view(f"u{values.dtype.itemsize}")
        if np.unique(bits[:FEW_VALUES_MIN_ROWS]).size * 8 <= FEW_VALUES_MIN_ROWS:  # (few in the first rows)
            distinct, where = np.unique(bits, return_inverse=True)
            if distinct.size * 8 <= values.size:
                text = number_text(distinct.view(values.dtype))
                return [text[i] for i in where.ravel().tolist()]
    if values.dtype.kind != "f":
        return [str(v) for v in values.tolist()]
    text = [FLOAT_FORMAT % v for v in values.tolist()]
    for i in np.flatnonzero(np.isnan(values)).tolist():
        text[i] = ""
    return text


def _object_text(values: np.ndarray, missing: np.ndarray) -> list[str]:
    """A text column's fields: each value's ``str``, a missing one empty."""
    return ["" if gone else str(v) for v, gone in zip(values.tolist(), missing.tolist())]


def csv_join(header: list[str], columns: list[list[str]]) -> list[str]:
    """The CSV lines of a header and its columns' fields, each line ending with ``\\n``: a field holding a comma,
    a double quote or a line end (``\\n`` or ``\\r``) in double quotes, its quotes doubled, so that every CSV
    reader reads it back as the same string; a row of one empty field as ``""`` (else an empty line)."""
    if not header:
        return ["\n"]
    # only a column holding such a field is quoted field by field (numbers never are)
    columns = [[_field(f) for f in c] if _NEEDS_QUOTES.search("".join(c)) else c for c in columns]
    header = [_field(h) for h in header]
    if len(header) == 1:
        columns, header = [[f or '""' for f in columns[0]]], [header[0] or '""']
    ends = [field + "\n" for field in columns[-1]]  # (each row's last field with the line end)
    return [",".join(header) + "\n", *map(",".join, zip(*columns[:-1], ends))]


def _field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text
