"""TREC qrels and runs: Arrow's CSV reader when its split is sure to be the line-by-line split, else line by line."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .table import (
    QRELS,
    RUN,
    TREC_COLUMNS,
    TREC_LAYOUT,
    Strings,
    Table,
    encode_dictionary,
    encode_id_list,
    has_empty,
    pooled_values,
    string_column,
)
from .text import BOM, checked_number, clip, open_data, scan_text, split_fields, text_lines

# --------------------------------------------------------------------------- TREC


def read_trec(path: Path, kind: str, rank: bool = True) -> Table:
    """A TREC file through Arrow's reader when :func:`_trec_delimiter` clears it, else line by line.

    The scan of the bytes that decides it runs beside Arrow's parse, which starts on the separator of the
    file's first block; the parse is kept only when the scan then names the same separator (a lone CR the
    scan finds is the error, whatever the parse gave)."""
    from concurrent.futures import ThreadPoolExecutor

    guess = _first_block_delimiter(path)
    table: Table | None = None
    with ThreadPoolExecutor(max_workers=1) as pool:
        decided = pool.submit(_trec_delimiter, path)
        if guess is not None:
            try:
                table = _trec_arrow(path, kind, guess, rank)
            except FastPathRefused:
                table = None
            except BaseException:
                decided.result()  # the scan's error (a lone CR) comes first
                raise
        delimiter = decided.result()
    if delimiter is not None and delimiter == guess:
        if table is not None:
            return table
    elif delimiter is not None:
        try:
            return _trec_arrow(path, kind, delimiter, rank)
        except FastPathRefused:
            pass
    return _trec_python(path, kind, rank)


def _first_block_delimiter(path: Path) -> str | None:
    """The only one of space and tab in the file's first block (None when it has both, neither, or a BOM)."""
    with open_data(path) as fh:
        block = fh.read(1 << 16)
    if block.startswith(BOM):
        return None
    space, tab = b" " in block, b"\t" in block
    return " " if space and not tab else ("\t" if tab and not space else None)


class FastPathRefused(Exception):
    pass


def _trec_delimiter(path: Path) -> str | None:
    """The separator for Arrow's reader: the file's only one of space and tab (UTF-8, no BOM); None when it
    uses both or neither, or when splitting a line at every single separator would give an empty field (two
    separators in a row, or one at a line's start or end), which the line-by-line split on runs of spaces and
    tabs would not see: the line-by-line reader then reads the file. Arrow's split on that one separator is
    then the line-by-line split, in every column, also the ones Arrow is not asked to convert."""
    scan = scan_text(path, fields=True)  # also refuses a lone CR, whichever reader runs
    with open_data(path) as fh:
        if fh.read(3) == BOM or not scan.utf8 or scan.empty_field:
            return None
    for sep, other in ((b"\t", b" "), (b" ", b"\t")):
        if scan.has[sep] and not scan.has[other]:
            return sep.decode()
    return None


def _trec_arrow(path: Path, kind: str, delimiter: str, want_rank: bool = True) -> Table:
    """Arrow's multi-threaded CSV reader on a UTF-8 file that :func:`_trec_delimiter` cleared (so every field
    Arrow cuts at an ASCII separator is valid UTF-8 text, and none is empty). Only the columns used are
    converted; Arrow still cuts every line into its fields and refuses a line with more or fewer of them."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    names = list(TREC_COLUMNS[kind])
    value_col = "grade" if kind == QRELS else "score"
    # query ids dictionary-encoded (a code per row and each block's few distinct ids), doc ids as strings
    types = {"query_id": pa.dictionary(pa.int32(), pa.string()), "doc_id": pa.string(), value_col: pa.float64()}
    if kind == RUN and want_rank:
        types["rank"] = pa.float64()
    pool = parse_pool()
    try:
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False,
                                              ignore_empty_lines=True),
            # (UTF-8 is checked by the scan, whose verdict the parse waits for)
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=[c for c in names if c in types],
                                                 null_values=[], strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False, check_utf8=False),
            memory_pool=pool,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        raise FastPathRefused() from None
    if tbl.num_rows == 0 or has_empty(tbl.column("doc_id")) or \
            any(has_empty(c.dictionary) for c in tbl.column("query_id").chunks):
        raise FastPathRefused()
    # the numbers and codes in one buffer each, from the pages the parse has freed in its pool
    rank = pooled_values(tbl.column("rank"), np.float64, pool) if "rank" in types else None
    try:
        query = encode_dictionary(tbl.column("query_id"), pool)
    except UnicodeDecodeError:  # (not UTF-8: the scan sends the file to the line-by-line reader, naming the line)
        raise FastPathRefused() from None
    table = Table(str(path), kind, query, Strings(tbl.column("doc_id")),
                  pooled_values(tbl.column(value_col), np.float64, pool), rank, "trec")
    del tbl  # the parser's buffers: handed back to the system, not kept by Arrow's pool
    pool.release_unused()
    return table


def parse_pool() -> Any:
    """The memory pool for a large parse: jemalloc where pyarrow has it. Arrow's default pool (mimalloc) keeps
    the pages its reader threads freed (~150 MB after a 7M-line run), which the kernel's arrays would then come
    on top of; jemalloc hands them back when asked (``release_unused``)."""
    import pyarrow as pa

    try:
        return pa.jemalloc_memory_pool()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return pa.default_memory_pool()


def valid_utf8(tbl: Any, columns: Iterable[str]) -> bool:
    try:
        for c in columns:
            tbl.column(c).validate(full=True)
    except Exception:
        return False
    return True


def _trec_python(path: Path, kind: str, want_rank: bool = True) -> Table:
    """Line-by-line reader: runs of ASCII spaces and tabs separate fields; errors name the exact line."""
    ncols = len(TREC_COLUMNS[kind])
    layout = TREC_LAYOUT[kind]
    qs, ds, vs, rs = [], [], [], []
    for lineno, text in text_lines(path):
        parts = split_fields(text)
        if not parts:
            continue
        if len(parts) < ncols or (kind == QRELS and len(parts) > ncols):
            raise DataError(path, f"expected {ncols} fields ({layout}) separated by spaces or tabs, found "
                                  f"{len(parts)}: {clip(text)!r}.", lineno)
        if kind == QRELS:
            qid, _, doc, grade = parts
            vs.append(checked_number(path, lineno, grade, "grade"))
        else:
            qid, _, doc, rank, score = parts[:5]  # fields after the tag are ignored, as trec_eval does
            if want_rank:
                rs.append(checked_number(path, lineno, rank, "rank"))
            vs.append(checked_number(path, lineno, score, "score"))
        qs.append(qid)
        ds.append(doc)
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return Table(str(path), kind, encode_id_list(qs), string_column(ds), np.asarray(vs, dtype=np.float64),
                 np.asarray(rs, dtype=np.float64) if kind == RUN and want_rank else None, "trec")
