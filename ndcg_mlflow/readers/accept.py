"""What input is accepted: a line, a field, a number, an id, a header, the rows of a table; and the words of
every refusal. One definition, which every reader and engine applies:

* the line reader (:mod:`.trec`, :mod:`.columns`, :mod:`.small`) calls these checks line by line;
* the C reader (``cparse.c``) stops at the first line it does not take, reporting why (a code) and where (the
  line's offset): :func:`trec_refusal` checks that line here, and the message is this module's;
* the Arrow paths read a file only where their reading is sure to be this one (else the line reader does);
* tables in memory and Parquet go through :func:`first_bad_row`, on Arrow columns;
* Spark's checks of a DataFrame's rows use the message functions, given :class:`Rows` (how many rows, and the
  smallest (query, document) among them) where a local message gives a line or row.

A check raises :class:`Refused` (the message, no place); the reader adds the file and line (:meth:`Refused.at`).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from ..errors import DataError

QRELS = "qrels"
RUN = "run"
TREC_COLUMNS = {
    QRELS: ("query_id", "iteration", "doc_id", "grade"),
    RUN: ("query_id", "q0", "doc_id", "rank", "score", "tag"),
}
TREC_LAYOUT = {QRELS: "qid iter docid grade", RUN: "qid Q0 docid rank score tag"}
NO_ROWS = "the table has no rows."


class Refused(Exception):
    """Input a rule refuses: its message, and the rule (``line end``, ``utf-8``, ``fields``, ``number``...)."""

    def __init__(self, message: str, rule: str = "") -> None:
        super().__init__(message)
        self.message, self.rule = message, rule

    def at(self, source: Any, line: int | None = None) -> DataError:
        """The DataError naming ``source`` (a file or a table's label) and the line."""
        return DataError(source, self.message, line)


@contextmanager
def refusals(source: Any, line: int | None = None) -> Iterator[None]:
    """A :class:`Refused` raised within, as the DataError naming ``source`` and ``line``."""
    try:
        yield
    except Refused as exc:
        raise exc.at(source, line) from None


class Rows(NamedTuple):
    """Where Spark found a problem, for a message that cannot name a line: how many rows have it, and the smallest
    (query, document) among them."""

    n: int
    query: str | None
    doc: str | None

    def example(self) -> str:
        return f"query {self.query!r}, document {self.doc!r}"


def clip(text: str, n: int = 120) -> str:
    text = text.rstrip("\r\n")
    return text if len(text) <= n else text[: n - 3] + "..."


# --------------------------------------------------------------------------- lines

BOM = b"\xef\xbb\xbf"
LINE_ENDS = "line ends must be LF or CRLF"


def strip_line_end(raw: bytes) -> bytes:
    if raw.endswith(b"\r\n"):
        return raw[:-2]
    if raw.endswith(b"\n"):
        return raw[:-1]
    return raw


def line_text(body: bytes) -> str:
    """A line's text (its line end removed): a carriage return left in it (CR-only line ends, a stray CR) is
    refused, then bytes that are not UTF-8."""
    if b"\r" in body:
        raise Refused(lone_cr(body), "line end")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 text (byte {exc.start + 1} of the line).", "utf-8") from None


def lone_cr(body: bytes) -> str:
    at = body.index(b"\r")
    if at + 1 < len(body):
        return (
            f"a carriage return (CR) not followed by a line feed, at byte {at + 1} of the line: {LINE_ENDS} "
            f"(a file with CR-only line ends, as old Mac editors wrote, must be converted)."
        )
    return f"the line ends with a carriage return (CR) alone: {LINE_ENDS}."


def is_blank(text: str) -> bool:
    """A line holding nothing but ASCII spaces and tabs (the only characters that separate fields)."""
    return not text.strip(" \t")


_FIELD_SEP = re.compile(r"[ \t]+")


def split_fields(text: str) -> list[str]:
    """TREC and plain small-file fields: separated by runs of ASCII spaces and tabs, nothing else."""
    text = text.strip(" \t")
    return _FIELD_SEP.split(text) if text else []


def csv_fields(text: str, delimiter: str, fmt: str | None = None) -> list[str]:
    """One CSV/TSV line's fields (quotes as Python's csv module and Arrow read them; a quoted field ends on its
    line), each without surrounding ASCII spaces and tabs. With ``fmt`` (``CSV``, ``TSV``: a line of the file, as
    :func:`line_text` gives it) a quote left open is refused; without (a guess at a header, from any text), the
    fields are then the text split at the delimiter, as they are where a carriage return is in the text."""

    def guess() -> list[str]:
        return [f.strip(" \t") for f in text.split(delimiter)]

    if fmt is None and "\r" in text:
        return guess()
    try:
        fields = next(csv.reader([text], delimiter=delimiter, strict=True))
    except csv.Error as exc:
        if "expected after" not in str(exc):  # an unterminated quote: a field may not span lines
            if fmt is None:
                return guess()
            raise Refused(f"not readable as {fmt}: {exc} (a quoted field must end on its line).", "fields") from None
        fields = next(csv.reader([text], delimiter=delimiter))  # '"a"b' is 'ab', as Arrow reads it
    except StopIteration:
        return []
    return [f.strip(" \t") for f in fields]


def trec_fields(kind: str, found: int, text: str) -> str:
    n = len(TREC_COLUMNS[kind])
    layout = TREC_LAYOUT[kind]
    return f"expected {n} fields ({layout}) separated by spaces or tabs, found {found}: {clip(text)!r}."


def named_fields(names: list[str], found: int) -> str:
    return f"expected {len(names)} fields ({', '.join(names)}), found {found}."


def trec_row(text: str, kind: str, rank: bool = True) -> tuple[str, str, float, float | None] | None:
    """A TREC line's (query id, doc id, grade or score, rank) (None for a blank line): a qrels line has four
    fields, a run line at least six (those after the tag are ignored, as trec_eval does); the rank is read only
    with ``rank``, before the score (its field comes first)."""
    parts = split_fields(text)
    if not parts:
        return None
    ncols = len(TREC_COLUMNS[kind])
    if len(parts) < ncols or (kind == QRELS and len(parts) > ncols):
        raise Refused(trec_fields(kind, len(parts), text), "fields")
    if kind == QRELS:
        return parts[0], parts[2], number(parts[3], "grade"), None
    r = number(parts[3], "rank") if rank else None
    return parts[0], parts[2], number(parts[4], "score"), r


# the C reader's codes for the first line it does not take (cparse.c's WHY_*), as the rules of Refused
C_RULES = {1: "line end", 2: "utf-8", 3: "fields", 4: "number"}


def trec_refusal(code: int, body: bytes, kind: str, rank: bool) -> str | None:
    """The message for a line the C reader refused (its ``code``; ``body``, the line without its line end): this
    module's check of the line. None when the check finds the line fine, or refuses it by another rule than the
    C reader's (the two then disagree: the line reader reads the file)."""
    try:
        trec_row(line_text(body), kind, rank)
    except Refused as exc:
        return exc.message if exc.rule == C_RULES.get(code) else None
    return None


# --------------------------------------------------------------------------- numbers

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE_WORDS = {"nan", "inf", "infinity"}


def parse_number(raw: str) -> float:
    """A decimal number (``-1``, ``2.5``, ``.5``, ``1e3``); NaN or an infinity for those words (refused by the
    callers, as ``1e999`` is); ValueError for anything else (``0x10``, ``1_0``, non-ASCII digits)."""
    if _DECIMAL.fullmatch(raw):
        return float(raw)
    if raw.lstrip("+-").lower() in _NON_FINITE_WORDS and len(raw) - len(raw.lstrip("+-")) <= 1:
        return float(raw)
    raise ValueError(raw)


def is_number(raw: str) -> bool:
    """Whether ``raw`` reads as a number (:func:`parse_number`)."""
    try:
        parse_number(raw)
    except ValueError:
        return False
    return True


def number(raw: str, what: str) -> float:
    """A field that must be a finite decimal number."""
    try:
        x = parse_number(raw)
    except ValueError:
        raise Refused(not_a_number(what, repr(clip(raw))), "number") from None
    if not math.isfinite(x):
        raise Refused(not_finite(what, x), "number")
    return x


def not_a_number(what: str, shown: str) -> str:
    return f"{what} must be a number, got {shown}."


def not_finite(what: str, x: float, rows: Rows | None = None) -> str:
    """The problem of a value read as NaN or an infinity (``1e999`` too), whichever reader read it."""
    of, tail = ("", "") if rows is None else (f" for {rows.example()}", f"; {rows.n} rows in all")
    return (
        f"{what} must be a finite number, got {x}{of} (NaN, an infinity, or a value beyond the range of a "
        f"double{tail})."
    )


def not_integer(what: str, x: float, rows: Rows | None = None) -> str:
    tail = "" if rows is None else f" for {rows.example()} ({rows.n} rows in all)"
    return f"{what} must be an integer, got {x!r}{tail}."


# --------------------------------------------------------------------------- ids, nulls, rows


def _among(rows: Rows | None) -> str:
    return "" if rows is None else f" in {rows.n} rows (e.g. the row of {rows.example()})"


def null_value(column: str, rows: Rows | None = None) -> str:
    return f"{column} is null{_among(rows)}; every row needs a {column} (nulls are refused in every format)."


def empty_id(column: str, rows: Rows | None = None) -> str:
    return f"{column} is empty{_among(rows)}; every row needs a {column}."


def id_type(column: str, shown: str) -> str:
    return f"{column} must be a string (or an integer), got {shown}."


def column_type(column: str, found: Any, numeric: bool) -> str:
    kind = "be numeric (an integer or floating-point type)" if numeric else "hold strings (or integers)"
    return f"column {column} must {kind}, found {found}."


def listed_twice(doc: str | None, query: str | None, note: str) -> str:
    """A document twice for a query of a run; ``note``: where the first was, or how many rows repeat."""
    return f"document {doc!r} is listed twice for query {query!r} ({note}); a ranking holds each document once."


def judged_twice(doc: str | None, query: str | None, grades: str) -> str:
    return f"document {doc!r} of query {query!r} is judged twice with different grades ({grades})."


def no_data_lines(kind: str) -> str:
    return f"the {kind} file has no data lines."


def first_empty(column: Any) -> int | None:
    """The first row of an Arrow string column (chunked or not; ``string`` or ``large_string``) holding an empty
    string (not a null): two equal offsets, looked at chunk by chunk (the strings' bytes are not read); None if
    none."""
    return _first(column, _empties)


def first_bad_row(ids: dict[str, Any], numbers: dict[str, Any]) -> tuple[int, str] | None:
    """The first row of a table that a rule refuses, and the message: an id (``ids``: Arrow string columns, by
    name) null or empty; a number (``numbers``: Arrow float64 columns, or numpy arrays) null or not finite. Rows
    in order, as a file's lines are read; within a row, the columns in the order given (query, document, rank,
    score: a TREC line's order of fields)."""
    import numpy as np

    found: list[tuple[int, int, str]] = []  # (row, the column's place, message)
    for place, (name, col) in enumerate([*ids.items(), *numbers.items()]):
        if isinstance(col, np.ndarray):
            bad = np.flatnonzero(~np.isfinite(col))
            if bad.size:
                found.append((int(bad[0]), place, not_finite(name, float(col[bad[0]]))))
            continue
        null = _first(col, _nulls) if col.null_count else None
        if null is not None:
            found.append((null, place, null_value(name)))
        if name in ids:
            row = first_empty(col)
            if row is not None:
                found.append((row, place, empty_id(name)))
        else:
            row = _first(col, _non_finite)
            if row is not None:
                found.append((row, place, not_finite(name, _float_at(col, row))))
    if not found:
        return None
    row, _, message = min(found)
    return row, message


def _first(column: Any, flags: Any) -> int | None:
    """The first row of an Arrow column (chunked or not) whose ``flags(chunk)`` (a numpy bool array) is set."""
    import numpy as np
    import pyarrow as pa

    base = 0
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        if len(chunk):
            at = np.flatnonzero(flags(chunk))
            if at.size:
                return base + int(at[0])
        base += len(chunk)
    return None


def _nulls(chunk: Any) -> Any:
    import numpy as np

    n = len(chunk)
    if not chunk.null_count:
        return np.zeros(n, dtype=bool)
    bits = chunk.buffers()[0]
    if bits is None:
        return np.ones(n, dtype=bool)
    valid = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=chunk.offset + n, bitorder="little")
    return valid[chunk.offset :] == 0


def _empties(chunk: Any) -> Any:
    """Empty strings, nulls not (a null's offsets are equal too)."""
    import numpy as np
    import pyarrow as pa

    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    n = len(chunk)
    offsets = np.frombuffer(
        chunk.buffers()[1], dtype=width, count=n + 1, offset=np.dtype(width).itemsize * chunk.offset
    )
    same = offsets[1:] == offsets[:-1]
    return same & ~_nulls(chunk) if chunk.null_count else same


def _non_finite(chunk: Any) -> Any:
    import numpy as np

    values = np.frombuffer(chunk.buffers()[1], dtype=np.float64, count=len(chunk), offset=8 * chunk.offset)
    bad = ~np.isfinite(values)
    return bad & ~_nulls(chunk) if chunk.null_count else bad


def _float_at(column: Any, row: int) -> float:
    return float(column[row].as_py())


# --------------------------------------------------------------------------- JSON lines


def json_object(text: str) -> dict[str, Any]:
    """A JSONL line: one JSON object, each key once."""

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise Refused(f"field {clip(k, 60)!r} appears twice in the object; each field is named once.")
            obj[k] = v
        return obj

    try:
        obj = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise Refused(f"not valid JSON: {exc.msg} (column {exc.colno}).") from None
    except RecursionError:
        raise Refused("not valid here: JSON nested too deeply.") from None
    if not isinstance(obj, dict):
        raise Refused("each line must be a JSON object.")
    return obj


def json_id(column: str, v: Any) -> str:
    """A JSON value as an id: a string or an integer (its decimal text), non-empty, valid Unicode."""
    if v is None:
        raise Refused(null_value(column))
    if not isinstance(v, (str, int)) or isinstance(v, bool):
        raise Refused(id_type(column, clip(json.dumps(v), 60)))
    v = str(v)
    if not v:
        raise Refused(empty_id(column))
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Refused(
            f"{column} holds a lone surrogate ({json.dumps(v[exc.start])}), which is not a character: ids must be "
            f"valid Unicode text."
        ) from None
    return v


def json_number(name: str, v: Any) -> float:
    """A JSON value as a number: a JSON number, finite once read as a double."""
    if v is None:
        raise Refused(null_value(name))
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Refused(not_a_number(name, clip(json.dumps(v), 60)))
    try:
        x = float(v)
    except OverflowError:
        x = math.inf if v > 0 else -math.inf
    if not math.isfinite(x):
        raise Refused(not_finite(name, x))
    return x


# --------------------------------------------------------------------------- headers


def looks_like_header(fields: list[str]) -> bool:
    """A line of column names: two or more fields, none empty, and no number anywhere in them, even between spaces
    (every TREC line holds numbers)."""
    return (
        len(fields) >= 2
        and all(f.strip(" \t") for f in fields)
        and not any(is_number(word) for f in fields for word in split_fields(f))
    )


def column_twice(name: str, count: int) -> str:
    return f"column {name!r} appears {count} times in the header; each column is named once."


# --------------------------------------------------------------------------- column mappings

SEGMENTS = "segments"
CANDIDATES = "candidates"
NEEDED = {
    QRELS: ("query_id", "doc_id", "grade"),
    RUN: ("query_id", "doc_id"),  # and a score or a rank: the mapping's name of either wins over a column's own
    SEGMENTS: ("query_id", "segment"),
    CANDIDATES: ("query_id", "doc_id"),
}
"""The tool's columns each kind of source with named columns must have."""

MAPPED = {QRELS: ("query_id", "doc_id", "grade"), RUN: ("query_id", "doc_id", "score", "rank")}
"""The tool's columns a mapping names for each kind of table (a mapping given for every table names them all)."""


def kind_mapping(kind: str, mapping: Any) -> tuple[tuple[str, str], ...]:
    """The part of a column mapping (``{column: name}`` or pairs) that a ``kind`` table reads: ``columns=`` given
    for every table maps the judgments' grade beside the runs' score."""
    return tuple((k, v) for k, v in dict(mapping).items() if k in MAPPED[kind])


_HIDDEN = "\x00"  # (before a source's name that the mapping gives to another column: no name of the tool's)


def source_name(columns: tuple[tuple[str, str], ...], name: str) -> str:
    """The name a source uses for one of the tool's columns (``query_id``, ``doc_id``, ``grade``, ``score``,
    ``rank``, ``segment``), under a column mapping."""
    return dict(columns).get(name, name)


def canonical_names(present: list[str], columns: tuple[tuple[str, str], ...]) -> list[str]:
    """A source's column names as the tool's names: mapped ones renamed, and a name the mapping replaces (a
    ``score`` column when ``score`` is mapped to ``prediction``) hidden, so it is not taken by mistake. Names are
    compared exactly: ``score`` and ``SCORE`` are two columns."""
    if not columns:
        return list(present)
    tool = {v: k for k, v in columns}
    return [tool[h] if h in tool else (_HIDDEN + h if h in dict(columns) else h) for h in present]


def one_purpose(kind: str, columns: tuple[tuple[str, str], ...]) -> None:
    """Refuse a column mapping that gives one source column two purposes: one column named for two of the tool's
    columns, or the own name of a column ``kind`` needs (:data:`NEEDED`) given to another column while that one is
    not mapped (it would be read from the column of its own name: ``{segment: query_id}`` makes the query ids
    their own segments)."""
    names = [n for _, n in columns]
    for n in names:
        if names.count(n) > 1:
            # (the words of the spec's check of a mapping: spec/validate.py)
            raise Refused(f"column {n!r} is mapped to {names.count(n)} names; each source column serves one purpose.")
    given = dict(columns)
    for name in NEEDED[kind]:
        if name not in given and name in names:
            other = next(k for k, v in columns if v == name)
            raise Refused(
                f"the column mapping reads column {name!r} as the {other}, and {name}, which it does not map, "
                f"from the column of its own name, {name!r}: each source column serves one purpose (map {name} "
                f"to the column that holds it)."
            )


def named_columns(
    kind: str, present: list[str], columns: tuple[tuple[str, str], ...] = ()
) -> tuple[str | None, str | None]:
    """(value column, rank column) that a run or qrels source whose columns are named ``present`` (its own names,
    in order) has under the column mapping ``columns``: the one rule of every reader and engine
    (:func:`one_purpose`, :func:`canonical_names`, :func:`required_columns`)."""
    one_purpose(kind, columns)
    return required_columns(kind, canonical_names(present, columns), present, columns)


def column_places(kind: str, present: list[str], columns: tuple[tuple[str, str], ...] = ()) -> dict[str, int]:
    """The place in ``present`` of each of the tool's columns a run or qrels source reads (query_id, doc_id, then
    the value's column and the rank's that it has), by :func:`named_columns`' rule."""
    value_col, rank_col = named_columns(kind, present, columns)
    named = canonical_names(present, columns)
    return {c: named.index(c) for c in ("query_id", "doc_id", value_col, rank_col) if c}


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


def required_columns(
    kind: str, present: list[str], shown: list[str] | None = None, columns: tuple[tuple[str, str], ...] = ()
) -> tuple[str | None, str | None]:
    """(value column, rank column) of a table or file with named columns (the tool's names); a needed name present
    twice, or missing, is refused (``shown``: the source's own names, which the message lists; a missing column
    that the mapping ``columns`` names is said by the mapped name)."""
    found = ", ".join(present if shown is None else shown)
    given = dict(columns)

    def said(name: str) -> str:
        return f"{given[name]!r} (the {name}, as the column mapping names it)" if name in given else name

    needed = ["query_id", "doc_id"] + (["grade"] if kind == QRELS else ["score", "rank"])
    for name in needed:
        if present.count(name) > 1:
            raise Refused(column_twice(name, present.count(name)))
    missing = [c for c in ("query_id", "doc_id") if c not in present]
    if kind == QRELS:
        if "grade" not in present:
            missing.append("grade")
        if missing:
            raise Refused(
                f"missing column(s) {', '.join(map(said, missing))}; a qrels file with named columns has query_id, "
                f"doc_id, grade. Found: {found}.{mapping_hint(missing, present)}"
            )
        return "grade", None
    value = "score" not in present and "rank" not in present
    if missing or value:
        wanted = missing + ["score", "rank"] * value
        either = f"{said('score')} (or {said('rank')})"
        raise Refused(
            f"missing column(s) {', '.join([*map(said, missing), *[either] * value])}; a run file with named columns "
            f"has query_id, doc_id, score and/or rank. Found: {found}.{mapping_hint(wanted, present)}"
        )
    return ("score" if "score" in present else None), ("rank" if "rank" in present else None)
