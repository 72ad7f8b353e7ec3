"""Qrels and runs from files: format detection, CSV/TSV, JSONL, Parquet and Parquet datasets (TREC in :mod:`.trec`)."""

from __future__ import annotations

import csv
import math
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..paths import dataset_files, shown_path, source_problem
from .hashing import dedupe_qrels, first_duplicate, pair_hashes
from .table import (
    QRELS,
    RUN,
    Strings,
    Table,
    check_finite,
    encode_id_list,
    encode_ids,
    first_empty,
    numpy_column,
    string_column,
    yield_cpu,
)
from .text import (
    BOM,
    COMPRESSION,
    check_file,
    checked_number,
    clip,
    csv_fields,
    first_line,
    is_blank,
    is_number,
    not_finite,
    open_data,
    open_file,
    scan_text,
    split_fields,
    text_lines,
)
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
    """Refuse scores that are not finite, ranks that are not integers and a document listed twice for a query.
    ``background``: the duplicate check runs in a thread (the table is returned with its ``pending`` check; the
    caller joins it to the judgments meanwhile and then calls :meth:`Table.checked`)."""
    check_finite(table, "score")
    if table.rank is not None:
        # a rank that is not finite first, wherever it is: the line reader refuses it as it reads its line
        bad = np.flatnonzero(~np.isfinite(table.rank))
        if bad.size:
            raise table.error(int(bad[0]), not_finite("rank", float(table.rank[bad[0]])))
        bad = np.flatnonzero(table.rank != np.round(table.rank))
        if bad.size:
            raise table.error(int(bad[0]), f"rank must be an integer, got {float(table.rank[bad[0]])!r}.")
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
    return table.error(
        second,
        f"document {table.doc.row(second)!r} is listed twice for query "
        f"{table.query.row(second)!r} (first at {table.locate(first)}); a ranking holds each "
        f"document once.",
    )


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


def looks_like_header(fields: list[str]) -> bool:
    """A line of column names: two or more fields, none empty, and no number anywhere in them, even between spaces
    (every TREC line holds numbers)."""
    return (
        len(fields) >= 2
        and all(f.strip(" \t") for f in fields)
        and not any(is_number(word) for f in fields for word in split_fields(f))
    )


# the names other tools give the tool's columns, for the mapping an error message suggests
SYNONYMS = {
    "query_id": ("qid", "query", "queryid", "q_id", "topic", "topic_id", "user", "userid", "user_id", "session_id"),
    "doc_id": (
        "docid",
        "doc",
        "docno",
        "document",
        "document_id",
        "d_id",
        "pid",
        "passage_id",
        "item",
        "itemid",
        "item_id",
        "product_id",
    ),
    "grade": ("rel", "relevance", "label", "rating", "judgment", "judgement", "qrel", "score"),
    "score": ("prediction", "pred", "predicted", "sim", "similarity", "logit", "relevance_score"),
    "rank": ("position", "pos", "rnk"),
}


def mapping_hint(missing: list[str], present: list[str]) -> str:
    """A column mapping that would name the missing columns, guessed from usual names, as a spec would write it."""
    guesses: dict[str, str] = {}
    lowered = {p.lower(): p for p in present}
    for name in missing:
        for synonym in SYNONYMS.get(name, ()):
            if synonym in lowered and lowered[synonym] not in guesses.values():
                guesses[name] = lowered[synonym]
                break
    example = ", ".join(f"{k}: {v}" for k, v in guesses.items()) or "query_id: <your query column>, ..."
    return (
        f" Map the file's own names under the source in the spec (`path: ...` and `columns: {{{example}}}`), "
        f"or with `columns=` in evaluate(), or rename the columns."
    )


def source_name(columns: tuple[tuple[str, str], ...], name: str) -> str:
    """The name a source uses for one of the tool's columns (``query_id``, ``doc_id``, ``grade``, ``score``,
    ``rank``), under a column mapping."""
    return dict(columns).get(name, name)


def canonical_names(present: list[str], columns: tuple[tuple[str, str], ...]) -> list[str]:
    """A source's column names as the tool's names: mapped ones renamed, and a name the mapping replaces (a
    ``score`` column when ``score`` is mapped to ``prediction``) hidden, so it is not taken by mistake."""
    if not columns:
        return list(present)
    tool = {v: k for k, v in columns}
    return [tool[h] if h in tool else ("\x00" + h if h in dict(columns) else h) for h in present]


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
            raise DataError(shown_path(path), problem + ".")
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
        raise DataError(shown_path(path), problem + ".")
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


def required_columns(
    kind: str, present: list[str], path: str | Path, line: int | None = 1
) -> tuple[str | None, str | None, None]:
    """(value column, rank column) for the present column names; a needed name present twice is an error."""
    needed = ["query_id", "doc_id"] + (["grade"] if kind == QRELS else ["score", "rank"])
    for name in needed:
        if present.count(name) > 1:
            raise DataError(
                path,
                f"column {name!r} appears {present.count(name)} times in the header; each column is named once.",
                line,
            )
    missing = [c for c in ("query_id", "doc_id") if c not in present]
    if kind == QRELS:
        if "grade" not in present:
            missing.append("grade")
        if missing:
            raise DataError(
                path,
                f"missing column(s) {', '.join(missing)}; a qrels file with named columns "
                f"has query_id, doc_id, grade. Found: {', '.join(present)}."
                f"{mapping_hint(missing, present)}",
                line,
            )
        return "grade", None, None
    if "score" not in present and "rank" not in present:
        missing.append("score (or rank)")
    if missing:
        wanted = [m.split(" ")[0] for m in missing] + (["rank"] if "score (or rank)" in missing else [])
        raise DataError(
            path,
            f"missing column(s) {', '.join(missing)}; a run file with named columns has "
            f"query_id, doc_id, score and/or rank. Found: {', '.join(present)}."
            f"{mapping_hint(wanted, present)}",
            line,
        )
    return ("score" if "score" in present else None), ("rank" if "rank" in present else None), None


def _read_delimited(path: Path, kind: str, fmt: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    delimiter = "," if fmt == "csv" else "\t"
    scan = scan_text(path)  # refuses a lone CR, whichever reader runs
    header_line, first = first_line(path)
    header = csv_fields(first, delimiter, path, header_line, fmt.upper())
    value_col, rank_col, _ = required_columns(kind, canonical_names(header, columns), path, header_line)
    src = {c: source_name(columns, c) for c in ("query_id", "doc_id", value_col, rank_col) if c}
    include = [src[c] for c in ["query_id", "doc_id"] + [c for c in (value_col, rank_col) if c]]
    types = {src["query_id"]: pa.string(), src["doc_id"]: pa.string()}
    types.update({src[c]: pa.float64() for c in (value_col, rank_col) if c})
    with open_data(path) as fh:
        bom = fh.read(3) == BOM
    try:
        if bom or not scan.utf8 or len(set(header)) != len(header) or any(not h for h in header):
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
            if (
                pc.any(pc.equal(pc.utf8_length(ids[c]), 0)).as_py()
                or pc.any(pc.match_substring_regex(ids[c], "[\r\n]")).as_py()
            ):
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
    header = None
    idx: dict[str, int] = {}
    qs: list[str] = []
    ds: list[str] = []
    vs: list[float] = []
    rs: list[float] = []
    for lineno, text in text_lines(path):
        if is_blank(text):
            continue
        fields = csv_fields(text, delimiter, path, lineno, fmt.upper())
        if header is None:
            header = fields
            named = canonical_names(header, columns)
            idx = {name: named.index(name) for name in ["query_id", "doc_id"] + [c for c in (value_col, rank_col) if c]}
            continue
        if len(fields) != len(header):
            raise DataError(path, f"expected {len(header)} fields ({', '.join(header)}), found {len(fields)}.", lineno)
        for name, out in (("query_id", qs), ("doc_id", ds)):
            value = fields[idx[name]]
            if not value:
                raise DataError(path, f"{name} is empty; every row needs a {name}.", lineno)
            out.append(value)
        if value_col:
            vs.append(checked_number(path, lineno, fields[idx[value_col]], value_col))
        if rank_col:
            rs.append(checked_number(path, lineno, fields[idx[rank_col]], rank_col))
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return table_from_columns(
        path,
        kind,
        fmt,
        qs,
        ds,
        np.asarray(vs) if value_col else None,
        np.asarray(rs) if rank_col else None,
        header_lines=1,
    )


def _trimmed(column: Any) -> Any:
    """Ids without surrounding ASCII spaces and tabs (``q1, d2`` in a CSV means ids 'q1' and 'd2')."""
    import pyarrow.compute as pc

    return pc.utf8_trim(column, characters=" \t")


def _read_jsonl(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    import json

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise _DuplicateKey(k)
            obj[k] = v
        return obj

    qs: list[str] = []
    ds: list[str] = []
    vs: list[float] = []
    rs: list[float] = []
    value_col = rank_col = None
    for lineno, text in text_lines(path):
        if is_blank(text):
            continue
        try:
            obj = json.loads(text, object_pairs_hook=unique_keys)
        except json.JSONDecodeError as exc:
            raise DataError(path, f"not valid JSON: {exc.msg} (column {exc.colno}).", lineno) from None
        except RecursionError:
            raise DataError(path, "not valid here: JSON nested too deeply.", lineno) from None
        except _DuplicateKey as exc:
            raise DataError(
                path, f"field {clip(exc.args[0], 60)!r} appears twice in the object; each field is named once.", lineno
            ) from None
        if not isinstance(obj, dict):
            raise DataError(path, "each line must be a JSON object.", lineno)
        if columns:
            obj = dict(zip(canonical_names(list(obj), columns), obj.values()))
        if value_col is None and rank_col is None:
            value_col, rank_col, _ = required_columns(kind, list(obj), path, lineno)
        for col in ("query_id", "doc_id") + tuple(c for c in (value_col, rank_col) if c):
            if col not in obj:
                raise DataError(path, f"missing field {col!r}.", lineno)
        for col, out in (("query_id", qs), ("doc_id", ds)):
            v = obj[col]
            if v is None or not isinstance(v, (str, int)) or isinstance(v, bool):
                raise DataError(path, f"{col} must be a string (or an integer), got {clip(json.dumps(v), 60)}.", lineno)
            v = str(v)
            if not v:
                raise DataError(path, f"{col} is empty; every row needs a {col}.", lineno)
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DataError(
                    path,
                    f"{col} holds a lone surrogate ({json.dumps(v[exc.start])}), which is not "
                    f"a character: ids must be valid Unicode text.",
                    lineno,
                ) from None
            out.append(v)
        for name, numbers in ((value_col, vs), (rank_col, rs)):
            if name:
                v = obj[name]
                try:
                    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(float(v))
                except OverflowError:
                    ok = False
                if not ok:
                    raise DataError(path, f"{name} must be a finite number, got {clip(json.dumps(v), 60)}.", lineno)
                numbers.append(float(v))
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return table_from_columns(
        path, kind, "jsonl", qs, ds, np.asarray(vs) if value_col else None, np.asarray(rs) if rank_col else None
    )


class _DuplicateKey(Exception):
    pass


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
            value_col, rank_col, _ = required_columns(
                kind, canonical_names(parquet.schema_arrow.names, columns), path, None
            )
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
    as their decimal text), non-empty; numbers of an integer or floating-point type, read as the nearest
    double; no nulls. Errors name ``path`` and the row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = {}
    c: str | None  # an id column's name, then a number column's (None when absent)
    for c in ("query_id", "doc_id"):
        col = tbl.column(c)
        if c == "query_id" and _plain_dictionary(col):  # (encode_ids maps each chunk's dictionary)
            cols[c] = col
            continue
        if pa.types.is_dictionary(col.type):
            col = _decoded(col)
        if not (
            pa.types.is_string(col.type)
            or pa.types.is_large_string(col.type)
            or _is_string_view(col.type)
            or pa.types.is_integer(col.type)
        ):
            raise DataError(path, f"column {c} must hold strings (or integers), found {col.type}.")
        _refuse_nulls(path, col, c)
        col = col.cast(pa.string())
        row = first_empty(col)
        if row is not None:
            raise DataError(path, f"row {row + 1}: {c} is empty; every row needs a {c}.")
        cols[c] = col
    nums: dict[str | None, np.ndarray] = {}
    for c in (value_col, rank_col):
        if c:
            col = tbl.column(c)
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                raise DataError(
                    path, f"column {c} must be numeric (an integer or floating-point type), found {col.type}."
                )
            _refuse_nulls(path, col, c)
            # any integer type is read as the nearest double, as a decimal text number is (2^64-1 included)
            nums[c] = numpy_column(pc.cast(col, pa.float64(), safe=False))
    return cols["query_id"], cols["doc_id"], nums.get(value_col), nums.get(rank_col)


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


def _refuse_nulls(path: Path | str, col: Any, name: str) -> None:
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError(
            path, f"row {row + 1}: {name} is null; every row needs a {name} (nulls are refused in every format)."
        )


def table_from_columns(
    path: str | Path, kind: str, fmt: str, query: Any, doc: Any, value: Any, rank: Any, header_lines: int = 0
) -> Table:
    if kind == RUN and value is None:
        value = -np.asarray(rank, dtype=np.float64)  # no score column: rank 1 scores highest
    q = encode_ids(query) if not isinstance(query, list) else encode_id_list(query)
    d = Strings(doc) if not isinstance(doc, list) else string_column(doc)
    if len(q) == 0:
        raise DataError(path, "the table has no rows." if fmt == "table" else f"the {kind} file has no data lines.")
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
