"""Readers for judgments (qrels), rankings (runs), query sets and weights.

Formats:

* TREC qrels ``qid iter docid grade`` and TREC runs ``qid Q0 docid rank score tag``,
  fields separated by white space (grades may be floats).
* CSV / TSV with a header naming the columns ``query_id``, ``doc_id`` and ``grade``
  (qrels) or ``score`` and/or ``rank`` (runs); JSONL with the same names; Parquet.

Ids are strings. The result is columnar: query ids are encoded into integer codes
in order of first appearance (one ``int32`` per row and a small array of distinct
ids); document ids stay an Arrow string array (millions of distinct ids are never
turned into Python objects); values are ``float64`` arrays. Every error names the
file and line (row, for Parquet).

Large TREC and CSV files go through Arrow's multi-threaded CSV reader; a file
that reader refuses is re-read line by line, which either finds the exact
line at fault or reads the file's irregular spacing correctly.
"""

from __future__ import annotations

import csv
import hashlib
import sys
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import DataError, preview

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

    array: object  # pyarrow Array or ChunkedArray of strings

    def __len__(self) -> int:
        return len(self.array)

    def row(self, i: int) -> str:
        return self.array[int(i)].as_py()

    def take(self, rows: np.ndarray) -> list[str]:
        return self.array.take(np.asarray(rows, dtype=np.int64)).to_pylist()

    def filter(self, mask: np.ndarray) -> "Strings":
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

    def __len__(self) -> int:
        return len(self.value)

    def line_of(self, row: int) -> int | None:
        """The 1-based file line of a row (None for Parquet), counting lines as the readers do:
        blank lines are skipped and the first ``header_lines`` non-blank lines are the header."""
        if self.format == "parquet":
            return None
        if self.source_rows is not None:
            row = int(self.source_rows[row])
        seen = -1 - self.header_lines
        with open(self.path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if raw.strip():
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


def read_qrels(path: str | Path, format: str = "auto") -> Table:
    """Read judgments. A document judged twice with different grades is an error; twice alike is merged."""
    table = _read(Path(path), QRELS, format)
    _check_finite(table, "grade")
    return _dedupe_qrels(table)


def read_run(path: str | Path, format: str = "auto", *, rank: bool = True) -> Table:
    """Read one system's ranking. A document listed twice for one query is an error.

    ``rank=False`` skips the rank column of a TREC run where nothing uses it (it is then
    neither parsed nor checked), which saves time on large files.
    """
    table = _read(Path(path), RUN, format, rank)
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
    ids, seen = [], {}
    for line, fields in rows:
        qid = fields[0]
        if qid in seen:
            raise DataError(path, f"query {qid!r} is listed twice (first at line {seen[qid]}).", line)
        seen[qid] = line
        ids.append(qid)
    if not ids:
        raise DataError(path, "the query set is empty.")
    return ids


def read_weights(path: str | Path) -> dict[str, float]:
    """Query weights: ``query_id weight`` per line (white space, or a CSV/TSV with those columns)."""
    path = Path(path)
    out: dict[str, float] = {}
    lines: dict[str, int] = {}
    for line, fields in _small_rows(path, ("query_id", "weight")):
        qid, raw = fields
        try:
            w = float(raw)
        except ValueError:
            raise DataError(path, f"weight of query {qid!r} must be a number, got {raw!r}.", line) from None
        if not math.isfinite(w) or w <= 0:
            raise DataError(path, f"weight of query {qid!r} must be a finite number > 0, got {raw!r} "
                                  f"(to leave a query out, declare a query set without it).", line)
        if qid in out:
            raise DataError(path, f"query {qid!r} has a weight twice (first at line {lines[qid]}).", line)
        out[qid] = w
        lines[qid] = line
    if not out:
        raise DataError(path, "the weights file is empty.")
    return out


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------- format dispatch


def detect_format(path: Path, declared: str = "auto") -> str:
    if declared != "auto":
        return declared
    suffix = path.suffix.lower()
    if suffix in (".gz", ".bz2", ".xz", ".zst"):
        raise DataError(path, "compressed files are not read; decompress it first.")
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        first = _first_line(path)
        delim = "," if suffix == ".csv" else "\t"
        names = [c.strip().lower() for c in first.split(delim)]
        if "query_id" in names:
            return suffix[1:]
    return "trec"


def _first_line(path: Path) -> str:
    with open(path, "rb") as fh:
        for raw in fh:
            if raw.strip():
                return raw.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    return ""


def _read(path: Path, kind: str, format: str, rank: bool = True) -> Table:
    if not path.is_file():
        raise DataError(path, "file not found.")
    fmt = detect_format(path, format)
    if path.stat().st_size == 0:
        raise DataError(path, f"the {kind} file is empty.")
    if fmt == "trec":
        return _read_trec(path, kind, rank)
    if fmt in ("csv", "tsv"):
        return _read_delimited(path, kind, fmt)
    if fmt == "jsonl":
        return _read_jsonl(path, kind)
    return _read_parquet(path, kind)


# --------------------------------------------------------------------------- TREC


def _read_trec(path: Path, kind: str, rank: bool = True) -> Table:
    names = _TREC_COLUMNS[kind]
    delimiter = _trec_delimiter(path, len(names))
    if delimiter is not None:
        try:
            return _trec_arrow(path, kind, delimiter, rank)
        except _FastPathRefused:
            pass
    return _trec_python(path, kind)


class _FastPathRefused(Exception):
    pass


def _trec_delimiter(path: Path, ncols: int) -> str | None:
    """A single tab or space when the first lines use exactly that between fields, else None."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if head.startswith(_BOM):
        return None
    lines = [ln for ln in head.split(b"\n")[:-1] if ln.strip()][:50] or [head.strip()]
    for delim in (b"\t", b" "):
        ok = True
        for ln in lines:
            parts = ln.rstrip(b"\r").split(delim)
            if len(parts) != ncols or any(not p or p != p.strip() for p in parts):
                ok = False
                break
        if ok:
            return delim.decode()
    return None


def _trec_arrow(path: Path, kind: str, delimiter: str, want_rank: bool = True) -> Table:
    import pyarrow as pa
    from pyarrow import csv as pacsv

    names = list(_TREC_COLUMNS[kind])
    value_col = "grade" if kind == QRELS else "score"
    types = {"query_id": pa.string(), "doc_id": pa.string(), value_col: pa.float64()}
    include = ["query_id", "doc_id", value_col]
    if kind == RUN and want_rank:
        types["rank"] = pa.float64()
        include.append("rank")
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
    if not _valid_utf8(tbl, ("query_id", "doc_id")):
        raise _FastPathRefused()
    value = tbl.column(value_col).to_numpy()
    rank = tbl.column("rank").to_numpy() if "rank" in include else None
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


def _trec_python(path: Path, kind: str) -> Table:
    """Line-by-line reader: any run of spaces/tabs separates fields; errors name the exact line."""
    ncols = len(_TREC_COLUMNS[kind])
    layout = _TREC_LAYOUT[kind]
    qs, ds, vs, rs = [], [], [], []
    for lineno, text in _text_lines(path):
        parts = text.split()
        if not parts:
            continue
        if len(parts) < ncols or (kind == QRELS and len(parts) > ncols):
            raise DataError(path, f"expected {ncols} fields ({layout}), found {len(parts)}: {_clip(text)!r}.",
                            lineno)
        if kind == QRELS:
            qid, _, doc, grade = parts
            vs.append(_number(path, lineno, grade, "grade"))
        else:
            qid, _, doc, rank, score = parts[:5]  # fields after the tag are ignored, as trec_eval does
            rs.append(_number(path, lineno, rank, "rank"))
            vs.append(_number(path, lineno, score, "score"))
        qs.append(qid)
        ds.append(doc)
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return Table(str(path), kind, _encode_list(qs), _strings(ds), np.asarray(vs, dtype=np.float64),
                 np.asarray(rs, dtype=np.float64) if kind == RUN else None, "trec")


def _number(path: Path, lineno: int, raw: str, what: str) -> float:
    try:
        x = float(raw)
    except ValueError:
        raise DataError(path, f"{what} must be a number, got {_clip(raw)!r}.", lineno) from None
    if not math.isfinite(x):
        raise DataError(path, f"{what} must be a finite number, got {_clip(raw)!r}.", lineno)
    return x


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(path, f"not UTF-8 text (byte {exc.start + 1} of the line).", lineno) from None


def _clip(text: str, n: int = 120) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= n else text[: n - 3] + "..."


# --------------------------------------------------------------------------- named columns


def _required_columns(kind: str, present: list[str], path: Path) -> tuple[str, str | None, str | None]:
    """(value column, rank column) for the present column names."""
    missing = [c for c in ("query_id", "doc_id") if c not in present]
    if kind == QRELS:
        if "grade" not in present:
            missing.append("grade")
        if missing:
            raise DataError(path, f"missing column(s) {', '.join(missing)}; a qrels file with named columns "
                                  f"has query_id, doc_id, grade. Found: {', '.join(present)}.", 1)
        return "grade", None, None
    if "score" not in present and "rank" not in present:
        missing.append("score (or rank)")
    if missing:
        raise DataError(path, f"missing column(s) {', '.join(missing)}; a run file with named columns has "
                              f"query_id, doc_id, score and/or rank. Found: {', '.join(present)}.", 1)
    return ("score" if "score" in present else None), ("rank" if "rank" in present else None), None


def _read_delimited(path: Path, kind: str, fmt: str) -> Table:
    import pyarrow as pa
    from pyarrow import csv as pacsv

    delimiter = "," if fmt == "csv" else "\t"
    header = [c.strip() for c in _first_line(path).split(delimiter)]
    value_col, rank_col, _ = _required_columns(kind, header, path) if kind == RUN else (
        _required_columns(kind, header, path))
    include = ["query_id", "doc_id"] + [c for c in (value_col, rank_col) if c]
    types = {"query_id": pa.string(), "doc_id": pa.string()}
    types.update({c: pa.float64() for c in (value_col, rank_col) if c})
    with open(path, "rb") as fh:
        bom = fh.read(3) == _BOM
    try:
        if bom:
            raise _FastPathRefused()
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=include, null_values=[],
                                                 strings_can_be_null=False),
        )
        if not _valid_utf8(tbl, ("query_id", "doc_id")):
            raise _FastPathRefused()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, KeyError, _FastPathRefused):
        return _delimited_python(path, kind, delimiter, value_col, rank_col, fmt)
    return _table_from_columns(path, kind, fmt, _trimmed(tbl.column("query_id")), _trimmed(tbl.column("doc_id")),
                               tbl.column(value_col).to_numpy() if value_col else None,
                               tbl.column(rank_col).to_numpy() if rank_col else None, header_lines=1)


def _delimited_python(path: Path, kind: str, delimiter: str, value_col: str | None, rank_col: str | None,
                      fmt: str) -> Table:
    """Line-by-line CSV/TSV reader (quoted fields allowed within a line); errors name the exact line."""
    csv.field_size_limit(sys.maxsize)  # an id may be long: the line itself is the limit
    header = None
    idx: dict[str, int] = {}
    qs, ds, vs, rs = [], [], [], []
    for lineno, text in _text_lines(path):
        if not text.strip():
            continue
        try:
            fields = [f.strip() for f in next(csv.reader([text.rstrip("\r\n")], delimiter=delimiter))]
        except csv.Error as exc:
            raise DataError(path, f"not readable as {fmt.upper()}: {exc} (line ends must be LF or CRLF).",
                            lineno) from None
        if header is None:
            header = fields
            idx = {name: header.index(name) for name in ["query_id", "doc_id"] + [c for c in (value_col, rank_col)
                                                                                    if c]}
            continue
        if len(fields) != len(header):
            raise DataError(path, f"expected {len(header)} fields ({', '.join(header)}), found {len(fields)}.",
                            lineno)
        qs.append(fields[idx["query_id"]])
        ds.append(fields[idx["doc_id"]])
        if value_col:
            vs.append(_number(path, lineno, fields[idx[value_col]], value_col))
        if rank_col:
            rs.append(_number(path, lineno, fields[idx[rank_col]], rank_col))
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return _table_from_columns(path, kind, fmt, qs, ds, np.asarray(vs) if value_col else None,
                               np.asarray(rs) if rank_col else None, header_lines=1)


def _trimmed(column):
    """Ids without surrounding white space (``q1, d2`` in a CSV means ids 'q1' and 'd2')."""
    import pyarrow.compute as pc

    return pc.utf8_trim_whitespace(column)


def _read_jsonl(path: Path, kind: str) -> Table:
    import json

    qs, ds, vs, rs = [], [], [], []
    value_col = rank_col = None
    for lineno, text in _text_lines(path):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(path, f"not valid JSON: {exc.msg} (column {exc.colno}).", lineno) from None
        except RecursionError:
            raise DataError(path, "not valid here: JSON nested too deeply.", lineno) from None
        if not isinstance(obj, dict):
            raise DataError(path, "each line must be a JSON object.", lineno)
        if value_col is None and rank_col is None:
            value_col, rank_col, _ = _required_columns(kind, list(obj), path)
        for col in ("query_id", "doc_id") + tuple(c for c in (value_col, rank_col) if c):
            if col not in obj:
                raise DataError(path, f"missing field {col!r}.", lineno)
        for col in ("query_id", "doc_id"):
            if not isinstance(obj[col], (str, int)) or isinstance(obj[col], bool):
                raise DataError(path, f"{col} must be a string (or an integer), got {obj[col]!r}.", lineno)
        qs.append(str(obj["query_id"]))
        ds.append(str(obj["doc_id"]))
        for col, out in ((value_col, vs), (rank_col, rs)):
            if col:
                v = obj[col]
                try:
                    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(float(v))
                except OverflowError:
                    ok = False
                if not ok:
                    raise DataError(path, f"{col} must be a finite number, got {_clip(str(v), 60)!r}.", lineno)
                out.append(float(v))
    if not qs:
        raise DataError(path, f"the {kind} file has no data lines.")
    return _table_from_columns(path, kind, "jsonl", qs, ds, np.asarray(vs) if value_col else None,
                               np.asarray(rs) if rank_col else None)


def _read_parquet(path: Path, kind: str) -> Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        tbl = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(path, f"not a readable Parquet file: {exc}") from None
    value_col, rank_col, _ = _required_columns(kind, tbl.column_names, path)
    cols = {}
    for c in ("query_id", "doc_id"):
        col = tbl.column(c)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                or pa.types.is_integer(col.type)):
            raise DataError(path, f"column {c} must hold strings (or integers), found {col.type}.")
        cols[c] = col.cast(pa.string())
    nums = {}
    for c in (value_col, rank_col):
        if c:
            col = tbl.column(c)
            if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                raise DataError(path, f"column {c} must be numeric, found {col.type}.")
            if col.null_count:
                row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise DataError(path, f"row {row + 1}: {c} is empty.")
            nums[c] = col.cast(pa.float64()).to_numpy()
    return _table_from_columns(path, kind, "parquet", cols["query_id"], cols["doc_id"], nums.get(value_col),
                               nums.get(rank_col))


def _table_from_columns(path: Path, kind: str, fmt: str, query, doc, value, rank, header_lines: int = 0) -> Table:
    if kind == RUN and value is None:
        value = -np.asarray(rank, dtype=np.float64)  # no score column: rank 1 scores highest
    q = _encode(query) if not isinstance(query, list) else _encode_list(query)
    d = Strings(doc) if not isinstance(doc, list) else _strings(doc)
    if len(q) == 0:
        raise DataError(path, f"the {kind} file has no data lines.")
    return Table(str(path), kind, q, d, np.ascontiguousarray(value, dtype=np.float64),
                 None if rank is None else np.ascontiguousarray(rank, dtype=np.float64), fmt, header_lines)


# --------------------------------------------------------------------------- small files


def _small_rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """Rows of a small file of a few columns (query sets, weights, duplicate groups, catalogs): white-space
    separated, or CSV/TSV whose header names ``columns`` (a header is recognized by ``columns[0]``)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file not found.")
    csv.field_size_limit(sys.maxsize)
    lines = list(_text_lines(path))
    first = next((t for _, t in lines if t.strip()), "")
    delim = "," if path.suffix.lower() == ".csv" else ("\t" if "\t" in first else None)

    def split(lineno: int, text: str) -> list[str]:
        if delim is None:
            return text.split()
        try:
            return [f.strip() for f in next(csv.reader([text.rstrip("\r\n")], delimiter=delim))]
        except csv.Error as exc:
            raise DataError(path, f"not readable: {exc} (line ends must be LF or CRLF).", lineno) from None

    header: list[str] | None = None
    idx: list[int] | None = None
    for lineno, text in lines:
        if not text.strip():
            continue
        fields = split(lineno, text)
        if header is None and idx is None and columns[0] in [f.lower() for f in fields]:
            header = [f.lower() for f in fields]
            missing = [c for c in columns if c not in header]
            if missing:
                raise DataError(path, f"missing column(s) {', '.join(missing)} in the header.", lineno)
            idx = [header.index(c) for c in columns]
            continue
        if idx is not None:
            if len(fields) <= max(idx):
                raise DataError(path, f"expected {len(header)} fields, found {len(fields)}.", lineno)
            yield lineno, [fields[i] for i in idx]
        else:
            header = []  # the first line was data: no header in this file
            if len(fields) != len(columns):
                raise DataError(path, f"expected {len(columns)} field(s) ({' '.join(columns)}), found "
                                      f"{len(fields)}: {_clip(text)!r}.", lineno)
            yield lineno, fields


# --------------------------------------------------------------------------- encoding and checks


def _encode(column) -> Ids:
    """Codes in order of first appearance. Runs group their queries, so only the boundaries
    between runs of equal ids are looked at; an ungrouped file falls back to a hash encoding."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    heads_at, heads = [], []
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
                 table.header_lines, np.flatnonzero(keep))


__all__ = ["Table", "Ids", "Strings", "read_qrels", "read_run", "read_query_set", "read_weights", "sha256_file",
           "detect_format", "string_hashes", "duplicate_pairs", "preview"]
