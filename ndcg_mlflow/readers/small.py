"""Small files: query sets, weights and segments, and the row reader they share with the companion files."""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import DataError, preview
from .accept import (
    SEGMENTS,
    Refused,
    clip,
    column_twice,
    column_type,
    csv_fields,
    empty_id,
    is_blank,
    json_id,
    json_object,
    named_fields,
    null_value,
    one_purpose,
    parse_number,
    refusals,
    split_fields,
)
from .text import COMPRESSION, check_file, open_file, text_lines


def read_query_set(path: str | Path) -> list[str]:
    """A declared query set: one query id a line (or a CSV/TSV with a ``query_id`` column)."""
    path = Path(path)
    rows = list(small_rows(path, ("query_id",)))
    ids: list[str] = []
    seen: dict[str, int] = {}
    for line, fields in rows:
        qid = fields[0]
        if qid in seen:
            raise DataError(path, f"query {qid!r} is listed twice (first at line {seen[qid]}).", line)
        seen[qid] = line
        ids.append(qid)
    if not ids:
        raise DataError(path, "the query set is empty.")
    return ids


# the smallest ratio of a weight to the largest weight: below it, w / max(w) loses precision (subnormal)
# and the weighted mean could not tell the query from one of weight 0
MIN_WEIGHT_RATIO = sys.float_info.min


def unjudged_set_message(n: int, first: Iterable[object], qrels: str) -> str:
    """The words of queries of a declared set that ``qrels`` does not judge (``first``: some of them, ``n`` in all)."""
    return (
        f"{n} queries of the declared set have no judgments in {qrels}: {preview(first, total=n)}. Judge them or "
        f"remove them from the set."
    )


def unweighted_message(n: int, first: Iterable[object]) -> str:
    """The words of evaluated queries the weights file does not list (``first``: some of them, ``n`` in all)."""
    return f"{n} evaluated queries have no weight: {preview(first, total=n)}."


def weight_sum_message(n: int) -> str:
    """The words of weights whose sum overflows a double (every engine checks the sum of the evaluated queries')."""
    return (
        f"the weights of the {n} evaluated queries add up to more than the largest double "
        f"({sys.float_info.max:.4g}), so their sum cannot be reported; only their ratios matter: divide them all by "
        f"a common factor."
    )


def read_weights(path: str | Path) -> dict[str, float]:
    """Query weights: ``query_id weight`` per line (spaces/tabs, or a CSV/TSV with those columns).

    Every weight is a finite number > 0, and its ratio to the largest weight is a normal double
    (at least about 2.2e-308), so that means computed with weights divided by the largest one keep
    every query's share; weights of any magnitude (5e-324 alike, 1e308) are otherwise fine.
    """
    path = Path(path)
    out: dict[str, float] = {}
    lines: dict[str, int] = {}
    for line, fields in small_rows(path, ("query_id", "weight")):
        qid, raw = fields
        try:
            w = parse_number(raw)
        except ValueError:
            raise DataError(path, f"weight of query {qid!r} must be a number, got {clip(raw)!r}.", line) from None
        if not math.isfinite(w) or w <= 0:
            raise DataError(
                path,
                f"weight of query {qid!r} must be a finite number > 0, got {clip(raw)!r} "
                f"(to leave a query out, declare a query set without it).",
                line,
            )
        if qid in out:
            raise DataError(path, f"query {qid!r} has a weight twice (first at line {lines[qid]}).", line)
        out[qid] = w
        lines[qid] = line
    if not out:
        raise DataError(path, "the weights file is empty.")
    top = max(out.values())
    top_q = max(out, key=out.__getitem__)
    for qid, w in out.items():
        if w / top < MIN_WEIGHT_RATIO:
            raise DataError(
                path,
                f"weight of query {qid!r} is {w!r}, {w / top:.3g} times the largest weight "
                f"({top!r}, query {top_q!r} at line {lines[top_q]}): ratios below "
                f"{MIN_WEIGHT_RATIO:.3g} cannot be represented in the weighted mean; "
                f"leave the query out with a query set instead.",
                lines[qid],
            )
    return out


# --------------------------------------------------------------------------- segments

SEGMENT_FIELDS = ("query_id", "segment")  # a segments file's columns, as the tool names them


def unsegmented_message(n: int, first: Iterable[object]) -> str:
    """The words of evaluated queries the segments file does not list (``first``: some of them, ``n`` in all)."""
    return (
        f"{n} evaluated queries have no segment: {preview(first, total=n)}. Every evaluated query belongs to "
        f"exactly one segment: add them to the segments file."
    )


def segment_twice_message(query: str, first: str, again: str) -> str:
    """The words of a query listed twice in a segments file (``first``, ``again``: where, ``line 3``/``row 3``),
    whether in one segment or two."""
    return (
        f"query {query!r} is listed twice ({first} and {again}); every query belongs to exactly one segment, "
        f"listed once."
    )


def read_segments(path: str | Path, format: str = "auto", columns: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """Query segments: query id -> segment label, in the file's order.

    TSV or whitespace-separated text ``query_id segment`` one a line (a header line naming ``query_id`` allowed;
    a label holding spaces needs a TSV header or CSV), CSV with a header, JSONL objects, or a Parquet file, with the
    columns ``query_id`` and ``segment`` (``columns`` maps these names to the file's). ``format``: ``auto`` (from
    the file's name: ``.parquet``, ``.jsonl``/``.ndjson``, ``.csv``; anything else is text), ``csv``, ``tsv``,
    ``jsonl`` or ``parquet``; text may be compressed (``.gz``, ``.zst``). A label is a non-empty string (an
    integer is read as its decimal text) without surrounding ASCII spaces and tabs. A query listed twice, even in
    the same segment, is refused naming both lines (rows, in Parquet)."""
    path = Path(path)
    with refusals(path):
        one_purpose(SEGMENTS, tuple(columns))
    names = tuple(dict(columns).get(c, c) for c in SEGMENT_FIELDS)
    fmt = _segments_format(path, format)
    if fmt == "parquet":
        rows: Iterable[tuple[int, str, str]] = _parquet_segments(path, names)
    elif fmt == "jsonl":
        rows = _jsonl_segments(path, names)
    else:
        rows = ((line, q, g) for line, (q, g) in small_rows(path, names, fmt))
    unit = "row" if fmt == "parquet" else "line"
    out: dict[str, str] = {}
    where: dict[str, int] = {}
    for at, qid, raw in rows:
        label = raw.strip(" \t")
        if not label:
            raise _at(path, unit, at, empty_id("segment"))
        if qid in out:
            raise _at(path, unit, at, segment_twice_message(qid, f"{unit} {where[qid]}", f"{unit} {at}"))
        out[qid] = label
        where[qid] = at
    if not out:
        raise DataError(path, "the segments file is empty.")
    return out


def _at(path: Path, unit: str, at: int, message: str) -> DataError:
    """A refusal at a line of a text file, or a row of a Parquet file (named in the message, as the readers do)."""
    return DataError(path, message, at) if unit == "line" else DataError(path, f"row {at}: {message}")


def _segments_format(path: Path, declared: str) -> str:
    if declared != "auto":
        return declared
    suffix = path.suffix.lower()
    if suffix in COMPRESSION:
        suffix = Path(path.stem).suffix.lower()
    return {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}.get(suffix, "auto")


def _jsonl_segments(path: Path, names: tuple[str, ...]) -> Iterator[tuple[int, str, str]]:
    check_file(path)
    for lineno, text in text_lines(path):
        if is_blank(text):
            continue
        try:
            obj = json_object(text)
            for tool, name in zip(SEGMENT_FIELDS, names):
                if name not in obj:
                    raise Refused(f"missing field {name!r}" + (f" (the {tool})." if name != tool else "."))
            qid, label = (json_id(tool, obj[name]) for tool, name in zip(SEGMENT_FIELDS, names))
        except Refused as exc:
            raise exc.at(path, lineno) from None
        yield lineno, qid, label


def _parquet_segments(path: Path, names: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """A Parquet file's (row, query id, label): two columns of strings (or integers, read as their decimal text),
    no null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_file(path)
    try:
        with open_file(path) as fh:
            parquet = pq.ParquetFile(fh)
            present = parquet.schema_arrow.names
            for tool, name in zip(SEGMENT_FIELDS, names):
                if present.count(name) != 1:
                    problem = column_twice(name, present.count(name)) if name in present else f"missing column {name!r}"
                    raise DataError(path, f"{problem} (the {tool}); the file has {', '.join(map(repr, present))}.")
            table = parquet.read(columns=list(names))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(path, f"not a readable Parquet file: {clip(str(exc), 300)}") from None
    values = []
    for tool, name in zip(SEGMENT_FIELDS, names):
        column = table.column(name)
        kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)):
            raise DataError(path, column_type(name, column.type, numeric=False))
        if column.null_count:
            first = column.is_null().to_pylist().index(True)
            raise DataError(path, f"row {first + 1}: {null_value(tool)}")
        values.append([str(v) for v in column.to_pylist()])
    for i, qid in enumerate(values[0]):
        if not qid:
            raise DataError(path, f"row {i + 1}: {empty_id('query_id')}")
    return [(i + 1, q, g) for i, (q, g) in enumerate(zip(*values))]


# --------------------------------------------------------------------------- small files


def small_rows(path: Path, columns: tuple[str, ...], fmt: str = "auto") -> Iterator[tuple[int, list[str]]]:
    """Rows of a small file of a few columns (query sets, weights, duplicate groups, catalogs, segments): fields
    separated by runs of ASCII spaces and tabs, or CSV/TSV whose header names ``columns`` (a header is recognized by
    ``columns[0]``). Line ends, blank lines, quoting and field trimming are those of the data readers. ``fmt``
    ``csv`` or ``tsv`` reads every line as CSV or TSV whatever the file's name (``auto``: see :func:`_delimiter`)."""
    path = Path(path)
    check_file(path)
    csv.field_size_limit(sys.maxsize)
    lines = list(text_lines(path))
    delim = {"csv": ",", "tsv": "\t"}.get(fmt) or _delimiter(
        path, next((t for _, t in lines if not is_blank(t)), ""), columns[0]
    )

    header: list[str] | None = None
    idx: list[int] | None = None
    for lineno, text in lines:
        if is_blank(text):
            continue
        try:
            fields = split_fields(text) if delim is None else csv_fields(text, delim, "CSV" if delim == "," else "TSV")
            if header is None and idx is None and columns[0] not in fields:
                other = next((f for f in fields if f.lower() == columns[0].lower()), None)
                if other is not None:
                    raise Refused(
                        f"the header names {other!r}: column names are compared exactly, so the {columns[0]} "
                        f"column is named {columns[0]!r} ({', '.join(map(repr, columns))})."
                    )
            if header is None and idx is None and columns[0] in fields:
                header = list(fields)
                for c in columns:
                    if header.count(c) > 1:
                        raise Refused(column_twice(c, header.count(c)))
                missing = [c for c in columns if c not in header]
                if missing:
                    raise Refused(f"missing column(s) {', '.join(missing)} in the header.")
                idx = [header.index(c) for c in columns]
                continue
            if idx is not None:
                assert header is not None  # read with idx
                if len(fields) != len(header):
                    raise Refused(named_fields(header, len(fields)))
                fields = [fields[i] for i in idx]
            else:
                header = []  # the first line was data: no header in this file
                if len(fields) != len(columns):
                    raise Refused(
                        f"expected {len(columns)} field(s) ({' '.join(columns)}), found {len(fields)}: {clip(text)!r}."
                    )
            for c, value in zip(columns, fields):
                if not value:
                    raise Refused(empty_id(c))
        except Refused as exc:
            raise exc.at(path, lineno) from None
        yield lineno, fields


def _delimiter(path: Path, first: str, key: str) -> str | None:
    """How a small file's lines split: a ``.csv`` file as CSV; any other file's fields are runs of ASCII spaces
    and tabs, unless its first line is a header naming ``key`` (in any case: the names are compared exactly
    after) with tabs between the names (a TSV writer's, which may quote them): then as TSV. A tab on a first data
    line says nothing of the lines after it."""
    if path.suffix.lower() == ".csv":
        return ","
    if "\t" in first and key.lower() in [f.strip(' \t"').lower() for f in first.split("\t")]:
        return "\t"
    return None
