"""Qrels and runs from files: format detection, CSV/TSV, JSONL, Parquet and Parquet datasets (TREC in :mod:`.trec`)."""

from __future__ import annotations

import csv
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..paths import dataset_files, source_problem
from .accept import (
    BOM,
    NO_ROWS,
    QRELS,
    RUN,
    Refused,
    canonical_names,
    clip,
    column_type,
    csv_fields,
    empty_id,
    first_bad_row,
    first_empty,
    is_blank,
    json_id,
    json_number,
    json_object,
    listed_twice,
    looks_like_header,
    named_columns,
    named_fields,
    no_data_lines,
    not_integer,
    number,
    refusals,
    source_name,
    split_fields,
)
from .hashing import dedupe_qrels, first_duplicate, pair_hashes
from .table import Strings, Table, check_finite, encode_id_list, encode_ids, numpy_column, string_column, yield_cpu
from .text import COMPRESSION, check_file, first_line, line_reader_only, open_data, open_file, scan_text, text_lines
from .trec import FastPathRefused, read_trec, valid_utf8

# (query ids, doc ids, values, ranks) of a columnar source: Arrow string columns and float64 arrays (or None)
ArrowColumns = tuple[Any, Any, "np.ndarray | None", "np.ndarray | None"]

# --------------------------------------------------------------------------- public entry points


def read_qrels(
    path: str | Path, format: str = "auto", columns: tuple[tuple[str, str], ...] = (), version: int | None = None
) -> Table:
    """Read judgments. A document judged twice with different grades is an error; twice alike is merged.

    ``columns`` maps the tool's column names to the file's (``(("query_id", "userID"), ...)``); ``version``: the
    version of a Delta table (``format="delta"``)."""
    return checked_qrels(_read(Path(path), QRELS, format, columns=columns, version=version))


def checked_qrels(table: Table) -> Table:
    check_finite(table, "grade")
    return dedupe_qrels(table)


def read_run(
    path: str | Path,
    format: str = "auto",
    *,
    rank: bool = True,
    columns: tuple[tuple[str, str], ...] = (),
    version: int | None = None,
    pair_keys: bool = False,
    background: bool = False,
) -> Table:
    """Read one system's ranking. A document listed twice for one query is an error.

    ``rank=False`` skips the rank column of a TREC run where nothing uses it (it is then
    neither parsed nor checked, by either reader), which saves time on large files.
    ``pair_keys=True`` leaves the (query, doc) keys the duplicate check computed on the table
    (``Table.pair_keys``, 8 bytes a row) for the join to the judgments, which takes them. ``background=True``
    (with ``pair_keys``) returns before the duplicate check ends: it goes on in a thread, and
    :meth:`Table.checked` waits for it and raises its error.
    """
    return checked_run(_read(Path(path), RUN, format, rank, columns, version), pair_keys, background)


def checked_run(table: Table, pair_keys: bool = False, background: bool = False) -> Table:
    """Refuse scores and ranks that are not finite, ranks that are not integers and a document listed twice for a
    query. ``background``: the duplicate check runs in a thread (the table is returned with its ``pending`` check;
    the caller joins it to the judgments meanwhile and then calls :meth:`Table.checked`)."""
    check_finite(table, "score")
    if table.rank is not None:
        bad = np.flatnonzero(table.rank != np.round(table.rank))
        if bad.size:
            raise table.error(int(bad[0]), not_integer("rank", float(table.rank[bad[0]])))
    keys = pair_hashes(table)
    if pair_keys:
        table.pair_keys = keys
    if background and pair_keys:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="ndcg-mlflow-duplicates", initializer=yield_cpu
        )  # (the join and the kernel come first)
        found = pool.submit(_duplicate_error, table, keys)  # (the keys are only read, by both)
        pool.shutdown(wait=False)
        table.pending = found.result
        return table
    error = _duplicate_error(table, keys)
    if error is not None:
        raise error
    return table


def _duplicate_error(table: Table, keys: np.ndarray) -> DataError | None:
    dup = first_duplicate(table, keys)
    if dup is None:
        return None
    first, second = dup
    note = f"first at {table.locate(first)}"
    return table.error(second, listed_twice(table.doc.row(second), table.query.row(second), note))


# --------------------------------------------------------------------------- format dispatch


def detect_format(path: Path, declared: str = "auto", columns: tuple[tuple[str, str], ...] = ()) -> str:
    suffix = path.suffix.lower()
    if suffix in (".bz2", ".xz"):
        raise DataError(
            path,
            f"{suffix[1:]} files are not read; decompress it first, or compress it with gzip (.gz) or zstd (.zst).",
        )
    if suffix in COMPRESSION:
        suffix = Path(path.stem).suffix.lower()
        if suffix == ".parquet" or declared == "parquet":
            raise DataError(
                path,
                "a compressed Parquet file is not read: Parquet compresses inside the file "
                "(write it uncompressed, with the codec of your choice inside).",
            )
    if declared != "auto":
        return declared
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        delim = "," if suffix == ".csv" else "\t"
        _, first = first_line(path)
        fields = csv_fields(first, delim)
        names = [c.lower() for c in fields]
        if source_name(columns, "query_id").lower() in names or looks_like_header(fields):
            return suffix[1:]  # a header, with the expected names or not: the CSV reader names what is missing
    return "trec"


def _read(
    path: Path,
    kind: str,
    format: str,
    rank: bool = True,
    columns: tuple[tuple[str, str], ...] = (),
    version: int | None = None,
) -> Table:
    if format == "delta":
        from .delta import snapshot_files

        if version is None:
            raise DataError(path, "a Delta table is read at a version (format: delta, version: N).")
        problem = source_problem(path, delta=True)
        if problem is not None:
            raise DataError(path, problem + ".")
        return _read_dataset(path, snapshot_files(path, version), kind, "parquet", columns, checked=True)
    files = dataset_files(path)
    if files is not None:
        return _read_dataset(path, files, kind, format, columns)
    check_file(path)
    fmt = detect_format(path, format, columns)
    if path.stat().st_size == 0:
        raise DataError(path, f"the {kind} file is empty.")
    if fmt == "trec":
        if columns:
            raise DataError(
                path,
                f"the file is read as TREC (its first line names no column "
                f"{source_name(columns, 'query_id')!r}), which has no column names to map; a "
                f"column mapping is for csv, tsv, jsonl and parquet sources.",
            )
        try:
            return read_trec(path, kind, rank)
        except DataError as exc:
            header_line, first = first_line(path)
            if (
                exc.line != header_line
                or not looks_like_header(split_fields(first) or [first])
                and not looks_like_header(csv_fields(first, ","))
            ):
                raise
            raise DataError(
                path,
                f"{exc.message} The line looks like a header (column names, no number); a "
                f"TREC file has none: remove the line, or name the file .csv / .tsv with the "
                f"columns query_id, doc_id and {'grade' if kind == QRELS else 'score'} (a "
                f"`columns:` mapping under the source reads other names).",
                exc.line,
            ) from None
    mapped = (columns,) if columns else ()  # (the readers' plain signatures stay as they were)
    if fmt in ("csv", "tsv"):
        return _read_delimited(path, kind, fmt, *mapped)
    if fmt == "jsonl":
        return _read_jsonl(path, kind, *mapped)
    return _read_parquet(path, kind, *mapped)


def _read_dataset(
    path: Path, files: list[Path], kind: str, format: str, columns: tuple[tuple[str, str], ...], checked: bool = False
) -> Table:
    """A Parquet folder or glob (or a Delta table's snapshot: ``checked``): its files in sorted order, read as
    one table (errors name the file and row; a (query, doc) pair repeated across files names the row of the
    whole dataset)."""
    import pyarrow as pa

    problem = None if checked else source_problem(path)
    if problem is not None:
        raise DataError(path, problem + ".")
    if not files:
        raise DataError(path, f"the {kind} table holds no files (no rows).")
    if format not in ("auto", "parquet"):
        raise DataError(path, f"a folder or glob is read as a Parquet dataset, not as {format}.")
    parts = [_parquet_columns(f, kind, columns) for f in files]
    shape = {(p[2] is None, p[3] is None) for p in parts}
    if len(shape) > 1:
        raise DataError(path, "the dataset's files do not all have the same value and rank columns.")
    queries = [p[0] for p in parts]
    if all(pa.types.is_dictionary(q.type) for q in queries):  # (each file's dictionaries, as encode_ids takes them)
        query = pa.chunked_array([c for q in queries for c in _chunks(q)], type=queries[0].type)
    else:
        query = pa.chunked_array(
            [c for q in queries for c in _chunks(_decoded(q) if pa.types.is_dictionary(q.type) else q)],
            type=pa.string(),
        )
    doc = pa.chunked_array([c for p in parts for c in _chunks(p[1])], type=pa.string())
    value = None if parts[0][2] is None else np.concatenate([p[2] for p in parts])
    rank = None if parts[0][3] is None else np.concatenate([p[3] for p in parts])
    return table_from_columns(path, kind, "parquet", query, doc, value, rank)


def _chunks(column: Any) -> list[Any]:
    import pyarrow as pa

    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


# --------------------------------------------------------------------------- named columns


def _read_delimited(path: Path, kind: str, fmt: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    delimiter = "," if fmt == "csv" else "\t"
    scan = scan_text(path)
    # the header: the first line that is not blank, checked as the line reader checks every line
    header_line, first = next(((n, t) for n, t in text_lines(path) if not is_blank(t)), (0, ""))
    with refusals(path, header_line):
        header = csv_fields(first, delimiter, fmt.upper())
        value_col, rank_col = named_columns(kind, header, columns)
    src = {c: source_name(columns, c) for c in ("query_id", "doc_id", value_col, rank_col) if c}
    include = [src[c] for c in ["query_id", "doc_id"] + [c for c in (value_col, rank_col) if c]]
    types = {src["query_id"]: pa.string(), src["doc_id"]: pa.string()}
    types.update({src[c]: pa.float64() for c in (value_col, rank_col) if c})
    with open_data(path) as fh:
        bom = fh.read(3) == BOM
    try:
        if (
            line_reader_only()
            or bom
            or not scan.utf8
            or scan.lone_cr
            or len(set(header)) != len(header)
            or "" in header
        ):
            raise FastPathRefused()
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=True, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=include, null_values=[], strings_can_be_null=False
            ),
        )
        if tbl.num_rows == 0 or not valid_utf8(tbl, ("query_id", "doc_id")):
            raise FastPathRefused()
        ids = {c: _trimmed(tbl.column(src[c])) for c in ("query_id", "doc_id")}
        for c in ids:  # an empty id or a line end inside a quoted id: the line reader names the line
            if first_empty(ids[c]) is not None or pc.any(pc.match_substring_regex(ids[c], "[\r\n]")).as_py():
                raise FastPathRefused()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, KeyError, FastPathRefused):
        return _delimited_python(path, kind, delimiter, value_col, rank_col, fmt, columns)
    return table_from_columns(
        path,
        kind,
        fmt,
        ids["query_id"],
        ids["doc_id"],
        numpy_column(tbl.column(src[value_col])) if value_col else None,
        numpy_column(tbl.column(src[rank_col])) if rank_col else None,
        header_lines=1,
    )


def _delimited_python(
    path: Path,
    kind: str,
    delimiter: str,
    value_col: str | None,
    rank_col: str | None,
    fmt: str,
    columns: tuple[tuple[str, str], ...] = (),
) -> Table:
    """Line-by-line CSV/TSV reader (quoted fields allowed within a line); errors name the exact line."""
    csv.field_size_limit(sys.maxsize)  # an id may be long: the line itself is the limit
    header: list[str] | None = None
    idx: dict[str, int] = {}
    rows = _Rows(value_col, rank_col)
    for lineno, text in text_lines(path):
        if is_blank(text):
            continue
        try:
            fields = csv_fields(text, delimiter, fmt.upper())
            if header is None:
                header, named = fields, canonical_names(fields, columns)
                idx = {name: named.index(name) for name in ("query_id", "doc_id", value_col, rank_col) if name}
                continue
            if len(fields) != len(header):
                raise Refused(named_fields(header, len(fields)))
            rows.add({name: fields[i] for name, i in idx.items()}, _text_id, number)
        except Refused as exc:
            raise exc.at(path, lineno) from None
    return rows.table(path, kind, fmt, header_lines=1)


def _text_id(column: str, value: str) -> str:
    if not value:
        raise Refused(empty_id(column))
    return value


class _Rows:
    """The rows a line reader of named columns has read: ids, and each row's numbers (the rank first, as a TREC
    line's fields)."""

    def __init__(self, value_col: str | None, rank_col: str | None) -> None:
        self.value_col, self.rank_col = value_col, rank_col
        self.qs: list[str] = []
        self.ds: list[str] = []
        self.vs: list[float] = []
        self.rs: list[float] = []

    def add(self, cells: dict[str, Any], as_id: Any, as_number: Any) -> None:
        q, d = as_id("query_id", cells["query_id"]), as_id("doc_id", cells["doc_id"])
        if self.rank_col:
            self.rs.append(as_number(cells[self.rank_col], self.rank_col))
        if self.value_col:
            self.vs.append(as_number(cells[self.value_col], self.value_col))
        self.qs.append(q)
        self.ds.append(d)

    def table(self, path: Path, kind: str, fmt: str, header_lines: int = 0) -> Table:
        if not self.qs:
            raise DataError(path, no_data_lines(kind))
        value = np.asarray(self.vs) if self.value_col else None
        rank = np.asarray(self.rs) if self.rank_col else None
        return table_from_columns(path, kind, fmt, self.qs, self.ds, value, rank, header_lines)


def _trimmed(column: Any) -> Any:
    """Ids without surrounding ASCII spaces and tabs (``q1, d2`` in a CSV means ids 'q1' and 'd2')."""
    import pyarrow.compute as pc

    return pc.utf8_trim(column, characters=" \t")


def _read_jsonl(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    rows: _Rows | None = None
    for lineno, text in text_lines(path):
        if is_blank(text):
            continue
        try:
            obj = json_object(text)
            if rows is None:
                rows = _Rows(*named_columns(kind, list(obj), columns))
            if columns:
                obj = dict(zip(canonical_names(list(obj), columns), obj.values()))
            for col in ("query_id", "doc_id", rows.value_col, rows.rank_col):
                if col and col not in obj:
                    raise Refused(f"missing field {col!r}.")
            rows.add(obj, json_id, lambda v, name: json_number(name, v))
        except Refused as exc:
            raise exc.at(path, lineno) from None
    if rows is None:
        raise DataError(path, no_data_lines(kind))
    return rows.table(path, kind, "jsonl")


def _read_parquet(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    return table_from_columns(path, kind, "parquet", *_parquet_columns(path, kind, columns))


def import_beside(module: str) -> threading.Thread | None:
    """Import ``module`` in a thread of its own, unless it is imported already: started before a call that
    releases the GIL for long (Arrow's Parquet decode), its import overlaps that call instead of following it
    (the caller's own ``import`` then waits for it, or finds it done). Not a daemon: an exit waits for it."""
    import importlib

    if module in sys.modules:
        return None

    def run() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # (the caller's own import raises it, where it is needed)
            pass

    thread = threading.Thread(target=run, name=f"ndcg-mlflow-import-{module}")
    thread.start()
    return thread


def _parquet_columns(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()) -> ArrowColumns:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import_beside("pyarrow.compute")  # (arrow_columns' checks and casts need it once the decode is done)
    try:
        with open_file(path) as fh:
            parquet = pq.ParquetFile(fh)
            with refusals(path):
                value_col, rank_col = named_columns(kind, parquet.schema_arrow.names, columns)
            needed = [c for c in ("query_id", "doc_id", value_col, rank_col) if c]
            query_name = source_name(columns, "query_id")
            query_type = parquet.schema_arrow.field(query_name).type
            if pa.types.is_string(query_type) or pa.types.is_large_string(query_type):
                # the query ids as each row group's dictionary and its indices (a run's few distinct ids are not
                # made into a string a row); arrow_columns checks them as it checks strings
                parquet = pq.ParquetFile(fh, metadata=parquet.metadata, read_dictionary=[query_name])
            tbl = parquet.read(columns=[source_name(columns, c) for c in needed])
    except (pa.ArrowException, OSError) as exc:
        raise DataError(path, f"not a readable Parquet file: {clip(str(exc), 300)}") from None
    import pyarrow as pa

    named = pa.table({c: tbl.column(source_name(columns, c)) for c in needed})
    return arrow_columns(named, str(path), value_col, rank_col)


def arrow_columns(tbl: Any, path: str, value_col: str | None, rank_col: str | None) -> ArrowColumns:
    """(query ids, doc ids, values, ranks) of an Arrow table with the tool's column names, checked as every
    format is: ids of a string type (dictionary-encoded, large or view strings alike) or an integer type (read
    as their decimal text), numbers of an integer or floating-point type, read as the nearest double; then the
    rows (:func:`.accept.first_bad_row`: no null, no empty id, no number that is not finite). Errors name ``path``
    and the row."""
    import pyarrow as pa

    ids, nums = typed_columns(tbl, path, value_col, rank_col, dictionary=True)
    bad = first_bad_row({c: v for c, v in ids.items() if not pa.types.is_dictionary(v.type)}, nums)
    if bad is not None:
        raise DataError(path, f"row {bad[0] + 1}: {bad[1]}")
    value, rank = (numpy_column(nums[c]) if c else None for c in (value_col, rank_col))
    return ids["query_id"], ids["doc_id"], value, rank


def typed_columns(
    tbl: Any, path: str, value_col: str | None, rank_col: str | None, dictionary: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The type checks and casts of :func:`arrow_columns`, without the rows' checks: the id columns (by name) as
    Arrow strings, the number columns (by name: the rank first) as Arrow float64; with ``dictionary``, query ids
    that are dictionary-encoded strings needing no other check kept so (:func:`_plain_dictionary`). A column of
    another type is refused naming ``path``. The Spark engine's tasks that read Parquet apply it too."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids: dict[str, Any] = {}
    nums: dict[str, Any] = {}
    for c in ("query_id", "doc_id"):
        col = tbl.column(c)
        if dictionary and c == "query_id" and _plain_dictionary(col):  # (checked by its dictionaries)
            ids[c] = col
            continue
        if pa.types.is_dictionary(col.type):
            col = _decoded(col)
        if not (
            pa.types.is_string(col.type)
            or pa.types.is_large_string(col.type)
            or _is_string_view(col.type)
            or pa.types.is_integer(col.type)
        ):
            raise DataError(path, column_type(c, col.type, numeric=False))
        ids[c] = col.cast(pa.string())
    for name in (rank_col, value_col):  # (the rank first, as a TREC line's fields)
        if name:
            col = tbl.column(name)
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                raise DataError(path, column_type(name, col.type, numeric=True))
            # any integer type is read as the nearest double, as a decimal text number is (2^64-1 included)
            nums[name] = pc.cast(col, pa.float64(), safe=False)
    return ids, nums


def _decoded(column: Any) -> Any:
    """A dictionary-encoded column as its values (text dictionaries of any string type as plain strings)."""
    import pyarrow as pa

    def plain(values: Any) -> Any:
        return (
            values.cast(pa.string())
            if pa.types.is_large_string(values.type) or _is_string_view(values.type)
            else values
        )

    chunks = [plain(c.dictionary).take(c.indices) for c in _chunks(column)]
    return pa.chunked_array(chunks, type=plain(pa.array([], type=column.type.value_type)).type)


def _plain_dictionary(column: Any) -> bool:
    """Whether a column is dictionary-encoded strings that need no check beyond their dictionaries: int32
    indices, none null, and dictionaries of non-empty strings without nulls (an empty or null value, used or not,
    sends the column to :func:`_decoded` and the checks of every string column, which name the row)."""
    import pyarrow as pa

    t = column.type
    if (
        not (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type) and t.index_type == pa.int32())
        or column.null_count
    ):
        return False
    return all(c.dictionary.null_count == 0 and first_empty(c.dictionary) is None for c in _chunks(column))


def _is_string_view(t: Any) -> bool:
    import pyarrow as pa

    return bool(getattr(pa.types, "is_string_view", lambda _: False)(t))


def table_from_columns(
    path: str | Path, kind: str, fmt: str, query: Any, doc: Any, value: Any, rank: Any, header_lines: int = 0
) -> Table:
    if kind == RUN and value is None:
        value = -np.asarray(rank, dtype=np.float64)  # no score column: rank 1 scores highest
    q = encode_ids(query) if not isinstance(query, list) else encode_id_list(query)
    d = Strings(doc) if not isinstance(doc, list) else string_column(doc)
    if len(q) == 0:
        raise DataError(path, NO_ROWS if fmt == "table" else no_data_lines(kind))
    return Table(
        str(path),
        kind,
        q,
        d,
        np.ascontiguousarray(value, dtype=np.float64),
        None if rank is None else np.ascontiguousarray(rank, dtype=np.float64),
        fmt,
        header_lines,
    )
