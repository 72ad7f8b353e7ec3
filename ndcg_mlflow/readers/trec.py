"""TREC qrels and runs: Arrow's CSV reader when its split is sure to be the line-by-line split, else line by line."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError
from .table import _TREC_COLUMNS, _TREC_LAYOUT, QRELS, RUN, Strings, Table, _encode, _encode_list, _strings
from .text import _BOM, _clip, _number, _open_data, _scan_text, _split_fields, _text_lines

# --------------------------------------------------------------------------- TREC


def _read_trec(path: Path, kind: str, rank: bool = True) -> Table:
    delimiter = _trec_delimiter(path)
    if delimiter is not None:
        try:
            return _trec_arrow(path, kind, delimiter, rank)
        except _FastPathRefused:
            pass
    return _trec_python(path, kind, rank)


class _FastPathRefused(Exception):
    pass


def _trec_delimiter(path: Path) -> str | None:
    """The separator for Arrow's reader: the file's only one of space and tab (UTF-8, no BOM); None when it
    uses both or neither (the line-by-line reader then reads the file). Arrow's split on that one separator
    is the line-by-line split on runs of spaces and tabs as long as no field comes out empty (two separators
    in a row, or one at a line's start or end), which :func:`_trec_arrow` checks."""
    scan = _scan_text(path)  # also refuses a lone CR, whichever reader runs
    with _open_data(path) as fh:
        if fh.read(3) == _BOM or not scan.utf8:
            return None
    for sep, other in ((b"\t", b" "), (b" ", b"\t")):
        if scan.has[sep] and not scan.has[other]:
            return sep.decode()
    return None


def _trec_arrow(path: Path, kind: str, delimiter: str, want_rank: bool = True) -> Table:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    names = list(_TREC_COLUMNS[kind])
    value_col = "grade" if kind == QRELS else "score"
    # every column is read (the unused ones as strings) so that an empty field, which the line-by-line split
    # on runs of separators would not see, sends the file to the line-by-line reader
    types = {c: pa.string() for c in names}
    types[value_col] = pa.float64()
    if kind == RUN and want_rank:
        types["rank"] = pa.float64()
    include = names
    try:
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False,
                                              ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=include,
                                                 null_values=[], strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        raise _FastPathRefused() from None
    if tbl.num_rows == 0 or not _valid_utf8(tbl, ("query_id", "doc_id")):
        raise _FastPathRefused()
    for c in names:
        if types[c] == pa.string() and pc.min(pc.utf8_length(tbl.column(c))).as_py() == 0:
            raise _FastPathRefused()
    value = tbl.column(value_col).to_numpy()
    rank = tbl.column("rank").to_numpy() if types.get("rank") == pa.float64() else None
    return Table(str(path), kind, _encode(tbl.column("query_id")), Strings(tbl.column("doc_id")),
                 np.ascontiguousarray(value, dtype=np.float64),
                 None if rank is None else np.ascontiguousarray(rank, dtype=np.float64), "trec")


def _valid_utf8(tbl, columns) -> bool:
    try:
        for c in columns:
            tbl.column(c).validate(full=True)
    except Exception:
        return False
    return True


def _trec_python(path: Path, kind: str, want_rank: bool = True) -> Table:
    """Line-by-line reader: runs of ASCII spaces and tabs separate fields; errors name the exact line."""
    ncols = len(_TREC_COLUMNS[kind])
    layout = _TREC_LAYOUT[kind]
    qs, ds, vs, rs = [], [], [], []
    for lineno, text in _text_lines(path):
        parts = _split_fields(text)
        if not parts:
            continue
        if len(parts) < ncols or (kind == QRELS and len(parts) > ncols):
            raise DataError(path, f"expected {ncols} fields ({layout}) separated by spaces or tabs, found "
                                  f"{len(parts)}: {_clip(text)!r}.", lineno)
        if kind == QRELS:
            qid, _, doc, grade = parts
            vs.append(_number(path, lineno, grade, "grade"))
        else:
            qid, _, doc, rank, score = parts[:5]  # fields after the tag are ignored, as trec_eval does
            if want_rank:
                rs.append(_number(path, lineno, rank, "rank"))
            vs.append(_number(path, lineno, score, "score"))
        qs.append(qid)
        ds.append(doc)
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return Table(str(path), kind, _encode_list(qs), _strings(ds), np.asarray(vs, dtype=np.float64),
                 np.asarray(rs, dtype=np.float64) if kind == RUN and want_rank else None, "trec")
