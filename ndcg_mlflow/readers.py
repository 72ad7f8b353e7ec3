"""Readers for judgments (qrels), rankings (runs), query sets and weights.

Formats:

* TREC qrels ``qid iter docid grade`` and TREC runs ``qid Q0 docid rank score tag``,
  fields separated by runs of ASCII spaces and tabs (no other character separates fields: an id
  may contain U+00A0 or any other Unicode space); grades may be floats.
* CSV / TSV with a header naming the columns ``query_id``, ``doc_id`` and ``grade``
  (qrels) or ``score`` and/or ``rank`` (runs); JSONL with the same names; Parquet, also a folder or
  glob of Parquet files read as one table (files in sorted order). A column mapping reads other names.
* TREC, CSV, TSV and JSONL compressed with gzip (``.gz``) or zstd (``.zst``), decompressed as read.
* Tables in memory (:func:`table_from_object`): anything with the Arrow C stream interface, or a nested
  mapping ``{query_id: {doc_id: value}}``, checked as files are; errors name the table and the row.

Ids are strings. The result is columnar: query ids are encoded into integer codes
in order of first appearance (one ``int32`` per row and a small array of distinct
ids); document ids stay an Arrow string array (millions of distinct ids are never
turned into Python objects); values are ``float64`` arrays. Every error names the
file and line (row, for Parquet).

Lines end with LF or CRLF in every text format; a carriage return not followed by a line
feed is refused (naming its line), so that no reader ever sees a different set of lines.
A line holding only spaces and tabs is blank and skipped. Numbers are decimal
(``[+-]digits[.digits][e[+-]digits]``) and finite; ids are non-empty.

TREC and CSV files go through Arrow's multi-threaded CSV reader when that reader's split of
each line is sure to be the line-by-line split (a TREC file using only one of space and tab,
with no empty field; UTF-8 without a BOM; no empty id, no line end inside a quoted CSV id); any
other file, or one Arrow refuses, is read line by line, which either finds the exact line at
fault or reads the file. Both paths give the same table for any file they accept.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import math
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DataError, preview
from .spec import dataset_files, file_problem, os_error_problem, shown_path, source_problem

QRELS = "qrels"
RUN = "run"

_TREC_COLUMNS = {QRELS: ("query_id", "iteration", "doc_id", "grade"),
                 RUN: ("query_id", "q0", "doc_id", "rank", "score", "tag")}
_TREC_LAYOUT = {QRELS: "qid iter docid grade", RUN: "qid Q0 docid rank score tag"}
_BOM = b"\xef\xbb\xbf"


@dataclass
class Ids:
    """Dictionary-encoded strings: ``values[codes[i]]`` is row i's id."""

    codes: np.ndarray  # int32, one per row
    values: np.ndarray  # object array of distinct str

    def __len__(self) -> int:
        return len(self.codes)

    def row(self, i: int) -> str:
        return str(self.values[self.codes[i]])


@dataclass
class Strings:
    """An Arrow string column (document ids), one entry per row."""

    array: Any  # pyarrow Array or ChunkedArray of strings

    def __len__(self) -> int:
        return len(self.array)

    def row(self, i: int) -> str:
        return self.array[int(i)].as_py()

    def take(self, rows: np.ndarray) -> list[str]:
        return self.array.take(np.asarray(rows, dtype=np.int64)).to_pylist()

    def filter(self, mask: np.ndarray) -> Strings:
        import pyarrow as pa

        return Strings(self.array.filter(pa.array(mask)))


@dataclass
class Table:
    """One file's rows: ``query``, ``doc`` and ``value`` (grade or score), plus ``rank`` for runs."""

    path: str
    kind: str
    query: Ids
    doc: Strings
    value: np.ndarray  # float64
    rank: np.ndarray | None  # float64, runs only, None when the file has no rank column
    format: str
    header_lines: int = 0
    source_rows: np.ndarray | None = None  # original row of each row, when rows were merged away
    digest: str | None = None  # sha256 of an in-memory table's content (readers.table_digest)

    def __len__(self) -> int:
        return len(self.value)

    def line_of(self, row: int) -> int | None:
        """The 1-based file line of a row (None for Parquet), counting lines as the readers do:
        blank lines are skipped and the first ``header_lines`` non-blank lines are the header."""
        if self.format in ("parquet", "table"):
            return None
        if self.source_rows is not None:
            row = int(self.source_rows[row])
        seen = -1 - self.header_lines
        with _open_data(Path(self.path)) as fh:
            for lineno, raw in enumerate(fh, 1):
                if lineno == 1 and raw.startswith(_BOM):
                    raw = raw[3:]
                if raw.strip(b" \t\r\n"):  # blank lines as the readers see them (line ends are LF or CRLF)
                    seen += 1
                    if seen == row:
                        return lineno
        return None

    def locate(self, row: int) -> str:
        """``line 12`` (or ``row 12`` for Parquet) of a row, for messages."""
        line = self.line_of(row)
        if line is not None:
            return f"line {line}"
        src = int(self.source_rows[row]) if self.source_rows is not None else row
        return f"row {src + 1}"

    def at(self, row: int) -> str:
        """``path:line`` of a row (``path, row N`` for Parquet), as error messages start."""
        line = self.line_of(row)
        return f"{self.path}:{line}" if line is not None else f"{self.path}, {self.locate(row)}"

    def error(self, row: int, message: str) -> DataError:
        """A DataError pointing at a row: ``path:line: message`` (``path: row N: message`` for Parquet)."""
        line = self.line_of(row)
        if line is None:
            return DataError(self.path, f"{self.locate(row)}: {message}")
        return DataError(self.path, message, line)


# --------------------------------------------------------------------------- public entry points


def read_qrels(path: str | Path, format: str = "auto", columns: tuple[tuple[str, str], ...] = ()) -> Table:
    """Read judgments. A document judged twice with different grades is an error; twice alike is merged.

    ``columns`` maps the tool's column names to the file's (``(("query_id", "userID"), ...)``)."""
    return _checked_qrels(_read(Path(path), QRELS, format, columns=columns))


def _checked_qrels(table: Table) -> Table:
    _check_finite(table, "grade")
    return _dedupe_qrels(table)


def read_run(path: str | Path, format: str = "auto", *, rank: bool = True,
             columns: tuple[tuple[str, str], ...] = ()) -> Table:
    """Read one system's ranking. A document listed twice for one query is an error.

    ``rank=False`` skips the rank column of a TREC run where nothing uses it (it is then
    neither parsed nor checked, by either reader), which saves time on large files.
    """
    return _checked_run(_read(Path(path), RUN, format, rank, columns))


def _checked_run(table: Table) -> Table:
    _check_finite(table, "score")
    if table.rank is not None:
        bad = np.flatnonzero(~np.isfinite(table.rank) | (table.rank != np.round(table.rank)))
        if bad.size:
            raise table.error(int(bad[0]), f"rank must be an integer, got {table.rank[bad[0]]!r}.")
    dup = _first_duplicate(table)
    if dup is not None:
        first, second = dup
        raise table.error(second, f"document {table.doc.row(second)!r} is listed twice for query "
                                  f"{table.query.row(second)!r} (first at {table.locate(first)}); a ranking "
                                  f"holds each document once.")
    return table


def read_query_set(path: str | Path) -> list[str]:
    """A declared query set: one query id a line (or a CSV/TSV with a ``query_id`` column)."""
    path = Path(path)
    rows = list(_small_rows(path, ("query_id",)))
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


def read_weights(path: str | Path) -> dict[str, float]:
    """Query weights: ``query_id weight`` per line (spaces/tabs, or a CSV/TSV with those columns).

    Every weight is a finite number > 0, and its ratio to the largest weight is a normal double
    (at least about 2.2e-308), so that means computed with weights divided by the largest one keep
    every query's share; weights of any magnitude (5e-324 alike, 1e308) are otherwise fine.
    """
    path = Path(path)
    out: dict[str, float] = {}
    lines: dict[str, int] = {}
    for line, fields in _small_rows(path, ("query_id", "weight")):
        qid, raw = fields
        try:
            w = _parse_number(raw)
        except ValueError:
            raise DataError(path, f"weight of query {qid!r} must be a number, got {_clip(raw)!r}.", line) from None
        if not math.isfinite(w) or w <= 0:
            raise DataError(path, f"weight of query {qid!r} must be a finite number > 0, got {_clip(raw)!r} "
                                  f"(to leave a query out, declare a query set without it).", line)
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
            raise DataError(path, f"weight of query {qid!r} is {w!r}, {w / top:.3g} times the largest weight "
                                  f"({top!r}, query {top_q!r} at line {lines[top_q]}): ratios below "
                                  f"{MIN_WEIGHT_RATIO:.3g} cannot be represented in the weighted mean; "
                                  f"leave the query out with a query set instead.", lines[qid])
    return out


def sha256_file(path: str | Path) -> str:
    """sha256 of a file's bytes as stored (compressed files too); of a Parquet folder or glob, of its files'
    bytes one after the other, in sorted file order."""
    h = hashlib.sha256()
    for part in dataset_files(path) or [Path(path)]:
        with _open(Path(part)) as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- files


def _open(path: Path):
    """``open(path, 'rb')`` for a file checked by :func:`_check_file`; an OSError becomes a DataError."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise DataError(shown_path(path), os_error_problem(exc) + ".") from None


_COMPRESSION = {".gz": "gzip", ".zst": "zstd"}


def _open_data(path: Path):
    """A file's text bytes: ``.gz`` and ``.zst`` files decompressed as they are read (Arrow's codecs)."""
    codec = _COMPRESSION.get(path.suffix.lower())
    fh = _open(path)
    if codec is None:
        return fh
    import io

    import pyarrow as pa

    return io.BufferedReader(_Decompressed(path, codec, fh, pa.CompressedInputStream(pa.PythonFile(fh, "r"), codec)),
                             buffer_size=1 << 20)


class _Decompressed:
    """A raw stream over Arrow's decompressing stream; a corrupt or truncated file is a DataError."""

    def __init__(self, path: Path, codec: str, fh, stream):
        self.path, self.codec, self.fh, self.stream = path, codec, fh, stream
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def readinto(self, buffer) -> int:
        try:
            data = self.stream.read(len(buffer))
        except (OSError, ValueError, EOFError) as exc:
            raise DataError(self.path, f"not readable as {self.codec} data: {_clip(str(exc), 200)}") from None
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.stream.close()
            self.fh.close()

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("no file descriptor")

    def isatty(self) -> bool:
        return False


def _check_file(path: Path) -> None:
    problem = file_problem(path)
    if problem is not None:
        raise DataError(shown_path(path), problem + ".")


# --------------------------------------------------------------------------- format dispatch


def detect_format(path: Path, declared: str = "auto", columns: tuple[tuple[str, str], ...] = ()) -> str:
    suffix = path.suffix.lower()
    if suffix in (".bz2", ".xz"):
        raise DataError(path, f"{suffix[1:]} files are not read; decompress it first, or compress it with gzip "
                              f"(.gz) or zstd (.zst).")
    if suffix in _COMPRESSION:
        suffix = Path(path.stem).suffix.lower()
        if suffix == ".parquet" or declared == "parquet":
            raise DataError(path, "a compressed Parquet file is not read: Parquet compresses inside the file "
                                  "(write it uncompressed, with the codec of your choice inside).")
    if declared != "auto":
        return declared
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        delim = "," if suffix == ".csv" else "\t"
        _, first = _first_line(path)
        names = [c.lower() for c in _csv_fields(first, delim)]
        if _source_name(columns, "query_id").lower() in names:
            return suffix[1:]
    return "trec"


def _source_name(columns: tuple[tuple[str, str], ...], name: str) -> str:
    """The name a source uses for one of the tool's columns (``query_id``, ``doc_id``, ``grade``, ``score``,
    ``rank``), under a column mapping."""
    return dict(columns).get(name, name)


def _canonical_names(present: list[str], columns: tuple[tuple[str, str], ...]) -> list[str]:
    """A source's column names as the tool's names: mapped ones renamed, and a name the mapping replaces (a
    ``score`` column when ``score`` is mapped to ``prediction``) hidden, so it is not taken by mistake."""
    if not columns:
        return list(present)
    tool = {v: k for k, v in columns}
    return [tool[h] if h in tool else ("\x00" + h if h in dict(columns) else h) for h in present]


def _first_line(path: Path) -> tuple[int, str]:
    """(line number, text) of the first non-blank line (BOM and line end removed); (0, '') when none."""
    with _open_data(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            text = _strip_line_end(raw).decode("utf-8", errors="replace")
            if not _blank(text):
                return lineno, text
    return 0, ""


def _read(path: Path, kind: str, format: str, rank: bool = True, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    files = dataset_files(path)
    if files is not None:
        return _read_dataset(path, files, kind, format, columns)
    _check_file(path)
    fmt = detect_format(path, format, columns)
    if path.stat().st_size == 0:
        raise DataError(path, f"the {kind} file is empty.")
    if fmt == "trec":
        if columns:
            raise DataError(path, f"the file is read as TREC (its first line names no column "
                                  f"{_source_name(columns, 'query_id')!r}), which has no column names to map; a "
                                  f"column mapping is for csv, tsv, jsonl and parquet sources.")
        return _read_trec(path, kind, rank)
    mapped = (columns,) if columns else ()  # (the readers' plain signatures stay as they were)
    if fmt in ("csv", "tsv"):
        return _read_delimited(path, kind, fmt, *mapped)
    if fmt == "jsonl":
        return _read_jsonl(path, kind, *mapped)
    return _read_parquet(path, kind, *mapped)


def _read_dataset(path: Path, files: list[Path], kind: str, format: str, columns) -> Table:
    """A Parquet folder or glob: its files in sorted order, read as one table (errors name the file and row;
    a (query, doc) pair repeated across files names the row of the whole dataset)."""
    import pyarrow as pa

    problem = source_problem(path)
    if problem is not None:
        raise DataError(shown_path(path), problem + ".")
    if format not in ("auto", "parquet"):
        raise DataError(path, f"a folder or glob is read as a Parquet dataset, not as {format}.")
    parts = [_parquet_columns(f, kind, columns) for f in files]
    shape = {(p[2] is None, p[3] is None) for p in parts}
    if len(shape) > 1:
        raise DataError(path, "the dataset's files do not all have the same value and rank columns.")
    query = pa.chunked_array([c for p in parts for c in _chunks(p[0])], type=pa.string())
    doc = pa.chunked_array([c for p in parts for c in _chunks(p[1])], type=pa.string())
    value = None if parts[0][2] is None else np.concatenate([p[2] for p in parts])
    rank = None if parts[0][3] is None else np.concatenate([p[3] for p in parts])
    return _table_from_columns(path, kind, "parquet", query, doc, value, rank)


def _chunks(column) -> list:
    import pyarrow as pa

    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


# --------------------------------------------------------------------------- text: lines, fields, numbers

_FIELD_SEP = re.compile(r"[ \t]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE_WORDS = {"nan", "inf", "infinity"}
_LINE_ENDS = "line ends must be LF or CRLF"


def _blank(text: str) -> bool:
    """A line holding nothing but ASCII spaces and tabs (the only characters that separate fields)."""
    return not text.strip(" \t")


def _split_fields(text: str) -> list[str]:
    """TREC and plain small-file fields: separated by runs of ASCII spaces and tabs, nothing else."""
    text = text.strip(" \t")
    return _FIELD_SEP.split(text) if text else []


def _parse_number(raw: str) -> float:
    """A decimal number (``-1``, ``2.5``, ``.5``, ``1e3``); NaN or an infinity for those words (refused by the
    callers, as ``1e999`` is); ValueError for anything else (``0x10``, ``1_0``, non-ASCII digits)."""
    if _DECIMAL.fullmatch(raw):
        return float(raw)
    if raw.lstrip("+-").lower() in _NON_FINITE_WORDS and len(raw) - len(raw.lstrip("+-")) <= 1:
        return float(raw)
    raise ValueError(raw)


def _number(path: Path, lineno: int, raw: str, what: str) -> float:
    try:
        x = _parse_number(raw)
    except ValueError:
        raise DataError(path, f"{what} must be a number, got {_clip(raw)!r}.", lineno) from None
    if not math.isfinite(x):
        raise DataError(path, f"{what} must be a finite number, got {_clip(raw)!r}.", lineno)
    return x


def _strip_line_end(raw: bytes) -> bytes:
    if raw.endswith(b"\r\n"):
        return raw[:-2]
    if raw.endswith(b"\n"):
        return raw[:-1]
    return raw


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of every line, LF or CRLF ended; a carriage return anywhere
    else (CR-only line ends, a stray CR inside a line) is an error naming the line, as is non-UTF-8 text."""
    with _open_data(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            body = _strip_line_end(raw)
            if b"\r" in body:
                raise DataError(path, _lone_cr_message(body), lineno)
            try:
                yield lineno, body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(path, f"not UTF-8 text (byte {exc.start + 1} of the line).", lineno) from None


def _lone_cr_message(body: bytes) -> str:
    at = body.index(b"\r")
    if at + 1 < len(body):
        return (f"a carriage return (CR) not followed by a line feed, at byte {at + 1} of the line: {_LINE_ENDS} "
                f"(a file with CR-only line ends, as old Mac editors wrote, must be converted).")
    return f"the line ends with a carriage return (CR) alone: {_LINE_ENDS}."


def _clip(text: str, n: int = 120) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass
class _Scan:
    """What one pass over a text file's bytes found (for choosing the Arrow fast path safely)."""

    utf8: bool = True
    has: dict[bytes, bool] = field(default_factory=dict)  # byte -> present anywhere


def _scan_text(path: Path) -> _Scan:
    """One pass over the bytes: refuses a lone CR (naming its line); records whether space, tab and the double
    quote occur; checks UTF-8."""
    scan = _Scan(has={b" ": False, b"\t": False, b'"': False})
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines_before = 0
    carry = b""
    first = True
    with _open_data(path) as fh:
        while True:
            block = fh.read(1 << 22)
            if first and block.startswith(_BOM):
                block = block[3:]
            first = False
            data = carry + block
            if not block:
                if data:  # a CR at the very end of the file
                    raise DataError(path, _lone_cr_message(b"\r"), lines_before + 1)
                break
            carry = b""
            if data.endswith(b"\r"):
                carry, data = b"\r", data[:-1]
            if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
                at = data.find(b"\r")
                while data[at + 1:at + 2] == b"\n":
                    at = data.find(b"\r", at + 1)
                start = data.rfind(b"\n", 0, at) + 1
                # (a trailing CR was carried over, so a byte follows this one)
                raise DataError(path, _lone_cr_message(data[start:at + 2]), lines_before + data.count(b"\n", 0, at) + 1)
            if scan.utf8 and not (data.isascii() and decoder.getstate()[0] == b""):
                try:
                    decoder.decode(data)
                except UnicodeDecodeError:
                    scan.utf8 = False
            for mark in scan.has:
                if not scan.has[mark] and mark in data:
                    scan.has[mark] = True
            lines_before += data.count(b"\n")
    if scan.utf8:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            scan.utf8 = False
    return scan


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


# --------------------------------------------------------------------------- named columns


def _required_columns(kind: str, present: list[str], path: str | Path,
                      line: int | None = 1) -> tuple[str | None, str | None, None]:
    """(value column, rank column) for the present column names; a needed name present twice is an error."""
    needed = ["query_id", "doc_id"] + (["grade"] if kind == QRELS else ["score", "rank"])
    for name in needed:
        if present.count(name) > 1:
            raise DataError(path, f"column {name!r} appears {present.count(name)} times in the header; each "
                                  f"column is named once.", line)
    missing = [c for c in ("query_id", "doc_id") if c not in present]
    if kind == QRELS:
        if "grade" not in present:
            missing.append("grade")
        if missing:
            raise DataError(path, f"missing column(s) {', '.join(missing)}; a qrels file with named columns "
                                  f"has query_id, doc_id, grade. Found: {', '.join(present)}.", line)
        return "grade", None, None
    if "score" not in present and "rank" not in present:
        missing.append("score (or rank)")
    if missing:
        raise DataError(path, f"missing column(s) {', '.join(missing)}; a run file with named columns has "
                              f"query_id, doc_id, score and/or rank. Found: {', '.join(present)}.", line)
    return ("score" if "score" in present else None), ("rank" if "rank" in present else None), None


def _csv_fields(text: str, delimiter: str, path: Path | None = None, lineno: int = 0, fmt: str = "CSV") -> list[str]:
    """One CSV/TSV line's fields (quotes as Python's csv module and Arrow read them; a quoted field ends on its
    line), each without surrounding ASCII spaces and tabs."""
    try:
        fields = next(csv.reader([text], delimiter=delimiter, strict=True))
    except csv.Error as exc:
        if "expected after" not in str(exc):  # an unterminated quote: a field may not span lines
            if path is None:
                return [f.strip(" \t") for f in text.split(delimiter)]
            raise DataError(path, f"not readable as {fmt}: {exc} (a quoted field must end on its line).",
                            lineno) from None
        fields = next(csv.reader([text], delimiter=delimiter))  # '"a"b' is 'ab', as Arrow reads it
    except StopIteration:
        return []
    return [f.strip(" \t") for f in fields]


def _read_delimited(path: Path, kind: str, fmt: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    delimiter = "," if fmt == "csv" else "\t"
    scan = _scan_text(path)  # refuses a lone CR, whichever reader runs
    header_line, first = _first_line(path)
    header = _csv_fields(first, delimiter, path, header_line, fmt.upper())
    value_col, rank_col, _ = _required_columns(kind, _canonical_names(header, columns), path, header_line)
    src = {c: _source_name(columns, c) for c in ("query_id", "doc_id", value_col, rank_col) if c}
    include = [src[c] for c in ["query_id", "doc_id"] + [c for c in (value_col, rank_col) if c]]
    types = {src["query_id"]: pa.string(), src["doc_id"]: pa.string()}
    types.update({src[c]: pa.float64() for c in (value_col, rank_col) if c})
    with _open_data(path) as fh:
        bom = fh.read(3) == _BOM
    try:
        if bom or not scan.utf8 or len(set(header)) != len(header) or any(not h for h in header):
            raise _FastPathRefused()
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=True,
                                              newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=include, null_values=[],
                                                 strings_can_be_null=False),
        )
        if tbl.num_rows == 0 or not _valid_utf8(tbl, ("query_id", "doc_id")):
            raise _FastPathRefused()
        ids = {c: _trimmed(tbl.column(src[c])) for c in ("query_id", "doc_id")}
        for c in ids:  # an empty id or a line end inside a quoted id: the line reader names the line
            if pc.any(pc.equal(pc.utf8_length(ids[c]), 0)).as_py() or \
                    pc.any(pc.match_substring_regex(ids[c], "[\r\n]")).as_py():
                raise _FastPathRefused()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, KeyError, _FastPathRefused):
        return _delimited_python(path, kind, delimiter, value_col, rank_col, fmt, columns)
    return _table_from_columns(path, kind, fmt, ids["query_id"], ids["doc_id"],
                               tbl.column(src[value_col]).to_numpy() if value_col else None,
                               tbl.column(src[rank_col]).to_numpy() if rank_col else None, header_lines=1)


def _delimited_python(path: Path, kind: str, delimiter: str, value_col: str | None, rank_col: str | None,
                      fmt: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    """Line-by-line CSV/TSV reader (quoted fields allowed within a line); errors name the exact line."""
    csv.field_size_limit(sys.maxsize)  # an id may be long: the line itself is the limit
    header = None
    idx: dict[str, int] = {}
    qs: list[str] = []
    ds: list[str] = []
    vs: list[float] = []
    rs: list[float] = []
    for lineno, text in _text_lines(path):
        if _blank(text):
            continue
        fields = _csv_fields(text, delimiter, path, lineno, fmt.upper())
        if header is None:
            header = fields
            named = _canonical_names(header, columns)
            idx = {name: named.index(name) for name in ["query_id", "doc_id"] + [c for c in (value_col, rank_col)
                                                                                    if c]}
            continue
        if len(fields) != len(header):
            raise DataError(path, f"expected {len(header)} fields ({', '.join(header)}), found {len(fields)}.",
                            lineno)
        for name, out in (("query_id", qs), ("doc_id", ds)):
            value = fields[idx[name]]
            if not value:
                raise DataError(path, f"{name} is empty; every row needs a {name}.", lineno)
            out.append(value)
        if value_col:
            vs.append(_number(path, lineno, fields[idx[value_col]], value_col))
        if rank_col:
            rs.append(_number(path, lineno, fields[idx[rank_col]], rank_col))
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return _table_from_columns(path, kind, fmt, qs, ds, np.asarray(vs) if value_col else None,
                               np.asarray(rs) if rank_col else None, header_lines=1)


def _trimmed(column):
    """Ids without surrounding ASCII spaces and tabs (``q1, d2`` in a CSV means ids 'q1' and 'd2')."""
    import pyarrow.compute as pc

    return pc.utf8_trim(column, characters=" \t")


def _read_jsonl(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    import json

    def unique_keys(pairs):
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
    for lineno, text in _text_lines(path):
        if _blank(text):
            continue
        try:
            obj = json.loads(text, object_pairs_hook=unique_keys)
        except json.JSONDecodeError as exc:
            raise DataError(path, f"not valid JSON: {exc.msg} (column {exc.colno}).", lineno) from None
        except RecursionError:
            raise DataError(path, "not valid here: JSON nested too deeply.", lineno) from None
        except _DuplicateKey as exc:
            raise DataError(path, f"field {_clip(exc.args[0], 60)!r} appears twice in the object; each field is "
                                  f"named once.", lineno) from None
        if not isinstance(obj, dict):
            raise DataError(path, "each line must be a JSON object.", lineno)
        if columns:
            obj = dict(zip(_canonical_names(list(obj), columns), obj.values()))
        if value_col is None and rank_col is None:
            value_col, rank_col, _ = _required_columns(kind, list(obj), path, lineno)
        for col in ("query_id", "doc_id") + tuple(c for c in (value_col, rank_col) if c):
            if col not in obj:
                raise DataError(path, f"missing field {col!r}.", lineno)
        for col, out in (("query_id", qs), ("doc_id", ds)):
            v = obj[col]
            if v is None or not isinstance(v, (str, int)) or isinstance(v, bool):
                raise DataError(path, f"{col} must be a string (or an integer), got {_clip(json.dumps(v), 60)}.",
                                lineno)
            v = str(v)
            if not v:
                raise DataError(path, f"{col} is empty; every row needs a {col}.", lineno)
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DataError(path, f"{col} holds a lone surrogate ({json.dumps(v[exc.start])}), which is not "
                                      f"a character: ids must be valid Unicode text.", lineno) from None
            out.append(v)
        for name, numbers in ((value_col, vs), (rank_col, rs)):
            if name:
                v = obj[name]
                try:
                    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(float(v))
                except OverflowError:
                    ok = False
                if not ok:
                    raise DataError(path, f"{name} must be a finite number, got {_clip(json.dumps(v), 60)}.",
                                    lineno)
                numbers.append(float(v))
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return _table_from_columns(path, kind, "jsonl", qs, ds, np.asarray(vs) if value_col else None,
                               np.asarray(rs) if rank_col else None)


class _DuplicateKey(Exception):
    pass


def _read_parquet(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()) -> Table:
    return _table_from_columns(path, kind, "parquet", *_parquet_columns(path, kind, columns))


def _parquet_columns(path: Path, kind: str, columns: tuple[tuple[str, str], ...] = ()):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with _open(path) as fh:
            parquet = pq.ParquetFile(fh)
            value_col, rank_col, _ = _required_columns(kind, _canonical_names(parquet.schema_arrow.names, columns),
                                                       path, None)
            needed = [c for c in ("query_id", "doc_id", value_col, rank_col) if c]
            tbl = parquet.read(columns=[_source_name(columns, c) for c in needed])
    except (pa.ArrowException, OSError) as exc:
        raise DataError(path, f"not a readable Parquet file: {_clip(str(exc), 300)}") from None
    import pyarrow as pa

    named = pa.table({c: tbl.column(_source_name(columns, c)) for c in needed})
    return _arrow_columns(named, str(path), value_col, rank_col)


def _arrow_columns(tbl, path: str, value_col: str | None, rank_col: str | None):
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
        if pa.types.is_dictionary(col.type):
            col = _decoded(col)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                or _is_string_view(col.type) or pa.types.is_integer(col.type)):
            raise DataError(path, f"column {c} must hold strings (or integers), found {col.type}.")
        _refuse_nulls(path, col, c)
        col = col.cast(pa.string())
        empty = pc.equal(pc.utf8_length(col), 0)
        if pc.any(empty).as_py():
            row = int(np.flatnonzero(empty.to_numpy(zero_copy_only=False))[0])
            raise DataError(path, f"row {row + 1}: {c} is empty; every row needs a {c}.")
        cols[c] = col
    nums: dict[str | None, np.ndarray] = {}
    for c in (value_col, rank_col):
        if c:
            col = tbl.column(c)
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                raise DataError(path, f"column {c} must be numeric (an integer or floating-point type), found "
                                      f"{col.type}.")
            _refuse_nulls(path, col, c)
            # any integer type is read as the nearest double, as a decimal text number is (2^64-1 included)
            nums[c] = np.asarray(pc.cast(col, pa.float64(), safe=False).to_numpy(), dtype=np.float64)
    return cols["query_id"], cols["doc_id"], nums.get(value_col), nums.get(rank_col)


def _decoded(column):
    """A dictionary-encoded column as its values (text dictionaries of any string type as plain strings)."""
    import pyarrow as pa

    def plain(values):
        return values.cast(pa.string()) if pa.types.is_large_string(values.type) or \
            _is_string_view(values.type) else values

    chunks = [plain(c.dictionary).take(c.indices) for c in _chunks(column)]
    return pa.chunked_array(chunks, type=plain(pa.array([], type=column.type.value_type)).type)


def _is_string_view(t) -> bool:
    import pyarrow as pa

    return bool(getattr(pa.types, "is_string_view", lambda _: False)(t))


def _refuse_nulls(path: Path | str, col, name: str) -> None:
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError(path, f"row {row + 1}: {name} is null; every row needs a {name} (nulls are refused in "
                              f"every format).")


def _table_from_columns(path: str | Path, kind: str, fmt: str, query, doc, value, rank, header_lines: int = 0) -> Table:
    if kind == RUN and value is None:
        value = -np.asarray(rank, dtype=np.float64)  # no score column: rank 1 scores highest
    q = _encode(query) if not isinstance(query, list) else _encode_list(query)
    d = Strings(doc) if not isinstance(doc, list) else _strings(doc)
    if len(q) == 0:
        raise DataError(path, "the table has no rows." if fmt == "table" else f"the {kind} file has no data lines.")
    return Table(str(path), kind, q, d, np.ascontiguousarray(value, dtype=np.float64),
                 None if rank is None else np.ascontiguousarray(rank, dtype=np.float64), fmt, header_lines)


# --------------------------------------------------------------------------- in-memory tables


def table_from_object(obj, kind: str, label: str, columns: tuple[tuple[str, str], ...] | dict = ()) -> Table:
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
            raise DataError(label, "a column mapping is for tables with named columns, not for a nested mapping "
                                   "{query_id: {doc_id: value}}.")
        qs, ds, vs = _nested_rows(obj, kind, label)
        table = _table_from_columns(label, kind, "table", pa.array(qs, type=pa.string()),
                                    pa.array(ds, type=pa.string()), np.asarray(vs, dtype=np.float64), None)
    else:
        tbl = _arrow_table(obj, label)
        if tbl.num_rows == 0:
            raise DataError(label, "the table has no rows.")
        value_col, rank_col, _ = _required_columns(kind, _canonical_names(tbl.column_names, columns), label, None)
        needed = [c for c in ("query_id", "doc_id", value_col, rank_col) if c]
        named = pa.table({c: tbl.column(_source_name(columns, c)) for c in needed})
        table = _table_from_columns(label, kind, "table", *_arrow_columns(named, label, value_col, rank_col))
    table.digest = table_digest(table)
    return _checked_qrels(table) if kind == QRELS else _checked_run(table)


def _arrow_table(obj, label: str):
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
        raise DataError(label, f"cannot be read as a table ({type(obj).__name__}): {_clip(str(exc), 200).rstrip('.')}. "
                               f"Give an "
                               f"object with the Arrow C stream interface (pyarrow, pandas, polars, DuckDB) or "
                               f"a mapping {{query_id: {{doc_id: value}}}}.") from None


def _nested_rows(obj, kind: str, label: str) -> tuple[list[str], list[str], list[float]]:
    import numbers

    what = "grade" if kind == QRELS else "score"
    qs, ds, vs = [], [], []

    def text(key, where: str) -> str:
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (str, numbers.Integral)):
            raise DataError(label, f"{where}: ids must be strings (or integers), got {type(key).__name__} "
                                   f"{_clip(repr(key), 60)}.")
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
                raise DataError(label, f"{where}: {what} must be a finite number, got {type(v).__name__} "
                                       f"{_clip(repr(v), 60)}.")
            try:
                x = float(v)
            except OverflowError:
                x = math.inf
            if not math.isfinite(x):
                raise DataError(label, f"{where}: {what} must be a finite number, got {_clip(repr(v), 60)}.")
            qs.append(qid)
            ds.append(doc)
            vs.append(x)
    return qs, ds, vs


def table_digest(table: Table) -> str:
    """sha256 of a table's content, whatever library held it: the query ids, doc ids (UTF-8), values and ranks
    (float64, -0.0 as 0.0) of its rows in row order, each column length-prefixed. Row order is part of the
    content: under ``ties: displayed_order`` it orders tied rows."""
    import pyarrow as pa

    h = hashlib.sha256(b"ndcg-mlflow table v1\0" + table.kind.encode() + b"\0")
    query = pa.array(table.query.values, type=pa.string()).take(pa.array(table.query.codes, type=pa.int32()))
    doc = table.doc.array
    doc = (doc.combine_chunks() if isinstance(doc, pa.ChunkedArray) else doc).cast(pa.string())
    for name, arr in (("query_id", query), ("doc_id", doc)):
        n = len(arr)
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype("<i8")
        data = arr.buffers()[2]
        h.update(name.encode() + b"\0" + np.int64(n).astype("<i8").tobytes())
        h.update(np.diff(offsets).astype("<i8").tobytes())
        if data is not None and n:
            h.update(memoryview(data)[int(offsets[0]):int(offsets[-1])])
    for name, values in (("value", table.value), ("rank", table.rank)):
        if values is not None:
            h.update(name.encode() + b"\0" + (np.asarray(values, dtype=np.float64) + 0.0).astype("<f8").tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- small files


def _small_rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """Rows of a small file of a few columns (query sets, weights, duplicate groups, catalogs): fields separated
    by runs of ASCII spaces and tabs, or CSV/TSV whose header names ``columns`` (a header is recognized by
    ``columns[0]``). Line ends, blank lines, quoting and field trimming are those of the data readers."""
    path = Path(path)
    _check_file(path)
    csv.field_size_limit(sys.maxsize)
    lines = list(_text_lines(path))
    first = next((t for _, t in lines if not _blank(t)), "")
    delim = "," if path.suffix.lower() == ".csv" else ("\t" if "\t" in first else None)

    def split(lineno: int, text: str) -> list[str]:
        if delim is None:
            return _split_fields(text)
        return _csv_fields(text, delim, path, lineno, "CSV" if delim == "," else "TSV")

    header: list[str] | None = None
    idx: list[int] | None = None
    for lineno, text in lines:
        if _blank(text):
            continue
        fields = split(lineno, text)
        if header is None and idx is None and columns[0] in [f.lower() for f in fields]:
            header = [f.lower() for f in fields]
            for c in columns:
                if header.count(c) > 1:
                    raise DataError(path, f"column {c!r} appears {header.count(c)} times in the header; each "
                                          f"column is named once.", lineno)
            missing = [c for c in columns if c not in header]
            if missing:
                raise DataError(path, f"missing column(s) {', '.join(missing)} in the header.", lineno)
            idx = [header.index(c) for c in columns]
            continue
        if idx is not None:
            assert header is not None  # read with idx
            if len(fields) != len(header):
                raise DataError(path, f"expected {len(header)} fields, found {len(fields)}.", lineno)
            row = [fields[i] for i in idx]
        else:
            header = []  # the first line was data: no header in this file
            if len(fields) != len(columns):
                raise DataError(path, f"expected {len(columns)} field(s) ({' '.join(columns)}), found "
                                      f"{len(fields)}: {_clip(text)!r}.", lineno)
            row = fields
        for c, value in zip(columns, row):
            if not value:
                raise DataError(path, f"{c} is empty.", lineno)
        yield lineno, row


# --------------------------------------------------------------------------- encoding and checks


def _encode(column) -> Ids:
    """Codes in order of first appearance. Runs group their queries, so only the boundaries
    between runs of equal ids are looked at; an ungrouped file falls back to a hash encoding."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    heads_at: list[np.ndarray] = []
    heads: list[str] = []
    base = 0
    for chunk in chunks:
        n = len(chunk)
        if n:
            change = pc.not_equal(chunk.slice(1), chunk.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            at = np.flatnonzero(np.r_[True, change])
            if len(heads) + at.size > 100_000 and at.size > n // 8:  # not grouped by query
                return _encode_hashed(column)
            heads_at.append(at + base)
            heads.extend(chunk.take(pa.array(at)).to_pylist())
        base += n
    index: dict[str, int] = {}
    head_codes = np.fromiter((index.setdefault(h, len(index)) for h in heads), dtype=np.int32, count=len(heads))
    starts = np.concatenate(heads_at) if heads_at else np.zeros(0, dtype=np.int64)
    codes = np.repeat(head_codes, np.diff(np.r_[starts, base]))
    return Ids(codes, np.asarray(list(index), dtype=object))


def _encode_hashed(column) -> Ids:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    enc = pc.dictionary_encode(column)
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    return Ids(codes, np.asarray(enc.dictionary.to_pylist(), dtype=object))


def _encode_list(items: list[str]) -> Ids:
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(x, len(index)) for x in items), dtype=np.int32, count=len(items))
    return Ids(codes, np.asarray(list(index), dtype=object))


def _strings(items: list[str]) -> Strings:
    import pyarrow as pa

    return Strings(pa.array(items, type=pa.string()))


def _check_finite(table: Table, what: str) -> None:
    bad = np.flatnonzero(~np.isfinite(table.value))
    if bad.size:
        raise table.error(int(bad[0]), f"{what} must be a finite number, got {float(table.value[bad[0]])} "
                                       f"(NaN, an infinity, or a value beyond the range of a double).")


# --------------------------------------------------------------------------- (query, doc) identity

_U = np.uint64
_VECTOR_HASH_MAX = 64  # ids longer than this are hashed individually
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a bijection of uint64 that spreads every input bit."""
    h = h ^ (h >> _U(30))
    h = h * _U(0xBF58476D1CE4E5B9)
    h = h ^ (h >> _U(27))
    h = h * _U(0x94D049BB133111EB)
    return h ^ (h >> _U(31))


def string_hashes(array) -> np.ndarray:
    """A 64-bit hash of each string (equal strings hash equal; unequal ones rarely collide).

    Canonical decimal ids (``7067032``; no sign, no leading zero) hash through their
    integer value; other ids through FNV-1a over their UTF-8 bytes, one byte position
    at a time across all strings of a chunk.
    """
    import pyarrow as pa

    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    with np.errstate(over="ignore"):
        return np.concatenate([_chunk_hashes(c) for c in chunks]) if chunks else np.zeros(0, dtype=_U)


def _chunk_hashes(chunk) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(chunk)
    if n == 0:
        return np.zeros(0, dtype=_U)
    lengths = pc.binary_length(chunk).to_numpy(zero_copy_only=False).astype(np.int64)
    if lengths.max() <= 18 and lengths.min() >= 1:
        try:
            pc.cast(chunk.slice(0, 64), pa.int64())  # a cheap look first: a failed cast of millions is slow
            ints = pc.cast(chunk, pa.int64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            ints = None
        if ints is not None and (ints >= 0).all():
            digits = np.searchsorted(_POW10, ints, side="right") + 1  # decimal digits of each value
            if (digits == lengths).all():
                return _mix(ints.astype(_U) + _U(0x9E3779B97F4A7C15))
    chunk = pc.cast(chunk, pa.string()) if not pa.types.is_string(chunk.type) else chunk
    offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset:chunk.offset + n + 1].astype(np.int64)
    data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8) if chunk.buffers()[2] is not None else \
        np.zeros(1, dtype=np.uint8)
    starts = offsets[:-1]
    h = np.full(n, 0xCBF29CE484222325, dtype=_U) ^ lengths.astype(_U)
    prime = _U(0x100000001B3)
    long_ids = np.flatnonzero(lengths > _VECTOR_HASH_MAX)
    if long_ids.size:  # one numpy pass per byte position is for short ids; long ones are hashed one by one
        for i in long_ids:
            raw = data[offsets[i]:offsets[i + 1]].tobytes()
            h[i] = np.frombuffer(hashlib.blake2b(raw, digest_size=8).digest(), dtype=_U)[0]
        lengths = np.where(lengths > _VECTOR_HASH_MAX, 0, lengths)
    for j in range(int(lengths.max()) if lengths.size else 0):
        live = lengths > j
        if live.all():
            h = (h ^ data[starts + j].astype(_U)) * prime
        else:
            idx = np.flatnonzero(live)
            h[idx] = (h[idx] ^ data[starts[idx] + j].astype(_U)) * prime
    return _mix(h)


def _pair_hashes(table: Table) -> np.ndarray:
    """A 64-bit key per (query, doc) row: equal pairs give equal keys; the rare collisions of unequal
    pairs are told apart by :func:`duplicate_pairs`, which compares the ids themselves."""
    with np.errstate(over="ignore"):
        query_mix = _mix(np.arange(1, len(table.query.values) + 1, dtype=_U))
        return string_hashes(table.doc.array) ^ query_mix[table.query.codes]


def duplicate_pairs(table: Table) -> tuple[np.ndarray, np.ndarray]:
    """Rows (first, later) of every (query, doc) pair that occurs more than once, verified exactly."""
    keys = _pair_hashes(table)
    sk = np.sort(keys)
    if not (sk[1:] == sk[:-1]).any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    same = np.flatnonzero(sk[1:] == sk[:-1])
    # neighbours of equal hash (file order within a hash, as the sort is stable) are compared exactly
    firsts_a, laters_a = order[same], order[same + 1]
    q_equal = table.query.codes[firsts_a] == table.query.codes[laters_a]
    d_a = table.doc.take(firsts_a)
    d_b = table.doc.take(laters_a)
    equal = q_equal & np.array([x == y for x, y in zip(d_a, d_b)], dtype=bool)
    return firsts_a[equal], laters_a[equal]


def _first_duplicate(table: Table) -> tuple[int, int] | None:
    """(first row, later row) of the duplicate whose later row comes first in the file."""
    a, b = duplicate_pairs(table)
    if not b.size:
        return None
    i = int(np.argmin(b))
    return int(a[i]), int(b[i])


def _dedupe_qrels(table: Table) -> Table:
    a, b = duplicate_pairs(table)
    if not b.size:
        return table
    conflict = np.flatnonzero(table.value[a] != table.value[b])
    if conflict.size:
        i = conflict[np.argmin(b[conflict])]
        first, second = int(a[i]), int(b[i])
        raise table.error(second, f"document {table.doc.row(second)!r} of query {table.query.row(second)!r} "
                                  f"is judged twice with different grades ({table.value[first]:g} at "
                                  f"{table.locate(first)}, {table.value[second]:g} here).")
    keep = np.ones(len(table), dtype=bool)
    keep[b] = False
    return Table(table.path, table.kind, Ids(table.query.codes[keep], table.query.values),
                 table.doc.filter(keep), table.value[keep], None, table.format,
                 table.header_lines, np.flatnonzero(keep), table.digest)


__all__ = ["Table", "Ids", "Strings", "read_qrels", "read_run", "table_from_object", "table_digest",
           "read_query_set", "read_weights", "sha256_file", "detect_format", "string_hashes", "duplicate_pairs",
           "preview"]
