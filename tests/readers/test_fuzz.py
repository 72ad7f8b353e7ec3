"""Fuzzing the readers and the spec loader.

Readers: every generated file is also read by an independent reference written here from the documentation's
description of the formats (lines end with LF or CRLF, a CR anywhere else is refused; TREC fields are
separated by runs of ASCII spaces and tabs; numbers are decimal and finite; CSV quoting within a line; ids
are non-empty; nulls are refused ...). A file the reference accepts must be read to exactly the reference's
rows (same query ids, doc ids, values and ranks, in the same order), by the Arrow fast path and by the
line-by-line reader alike; a file the reference refuses must be refused with a DataError naming a line (or
a Parquet row). "A table or an error" is not enough: a silently different parse fails these tests.

The spec loader: whatever the input, a valid spec or an :class:`ndcg_mlflow.NdcgError`, never another
exception.

Deterministic (``derandomize=True``, no example database) and small enough to run in seconds.
Property tests of the nDCG engine live elsewhere.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
import sys
from pathlib import Path

import pytest
import yaml
from helpers import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ndcg_mlflow import DataError, NdcgError, Spec, load_spec
from ndcg_mlflow.readers import read_qrels, read_query_set, read_run, read_weights

pytestmark = pytest.mark.usefixtures("reader_mode")  # each test with the C reader and without

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=examples(120),
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_counter = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _write(folder: Path, suffix: str, data: bytes) -> Path:
    path = folder / f"f{next(_counter)}{suffix}"
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- the reference reading


class Refused(Exception):
    """The reference refuses the file (the readers must too, naming a line or row)."""


BOM = b"\xef\xbb\xbf"
DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # [0-9]: ASCII digits only


def ref_lines(data: bytes) -> list[tuple[int, str]]:
    """Lines end with LF or CRLF; any other CR, or bytes that are not UTF-8, refuse the file."""
    if data.startswith(BOM):
        data = data[3:]
    pieces = data.split(b"\n")
    out = []
    for n, raw in enumerate(pieces, 1):
        terminated = n < len(pieces)
        if not terminated and raw == b"":
            break
        if terminated and raw.endswith(b"\r"):
            raw = raw[:-1]
        if b"\r" in raw:
            raise Refused(f"line {n}: CR")
        try:
            out.append((n, raw.decode("utf-8")))
        except UnicodeDecodeError:
            raise Refused(f"line {n}: not UTF-8") from None
    return out


def ref_blank(text: str) -> bool:
    return text.strip(" \t") == ""


def ref_number(tok: str) -> float:
    if not DECIMAL.fullmatch(tok):
        raise Refused(f"not a number: {tok!r}")
    x = float(tok)
    if not math.isfinite(x):
        raise Refused(f"not finite: {tok!r}")
    return x


def ref_trec(data: bytes, kind: str) -> list[tuple]:
    rows = []
    for n, text in ref_lines(data):
        fields = [f for f in re.split(r"[ \t]+", text) if f != ""]
        if not fields:
            continue
        if kind == "qrels":
            if len(fields) != 4:
                raise Refused(f"line {n}: {len(fields)} fields")
            rows.append((fields[0], fields[2], ref_number(fields[3]), None))
        else:
            if len(fields) < 6:
                raise Refused(f"line {n}: {len(fields)} fields")
            rank, score = ref_number(fields[3]), ref_number(fields[4])
            rows.append((fields[0], fields[2], score, rank))
    return rows


def ref_csv_fields(line: str, delim: str) -> list[str]:
    """One line of CSV: a field that opens with a quote runs to the closing quote ("" inside is a quote) and
    anything after the closing quote up to the delimiter is kept as is; an unclosed quote is refused. Each
    field loses its surrounding ASCII spaces and tabs."""
    fields, i, n = [], 0, len(line)
    while True:
        buf = []
        if i < n and line[i] == '"':
            i += 1
            while True:
                if i >= n:
                    raise Refused("unclosed quote")
                if line[i] == '"':
                    if i + 1 < n and line[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(line[i])
                i += 1
        while i < n and line[i] != delim:
            buf.append(line[i])
            i += 1
        fields.append("".join(buf).strip(" \t"))
        if i >= n:
            return fields
        i += 1


def ref_named(data: bytes, kind: str, delim: str) -> list[tuple]:
    lines = [(n, t) for n, t in ref_lines(data) if not ref_blank(t)]
    if not lines:
        raise Refused("no lines")
    header = ref_csv_fields(lines[0][1], delim)
    needed = ["query_id", "doc_id"] + (["grade"] if kind == "qrels" else ["score", "rank"])
    if any(header.count(c) > 1 for c in needed):
        raise Refused("column twice")
    if "query_id" not in header or "doc_id" not in header:
        raise Refused("missing column")
    if kind == "qrels":
        if "grade" not in header:
            raise Refused("missing grade")
        value_col, rank_col = "grade", None
    else:
        value_col = "score" if "score" in header else None
        rank_col = "rank" if "rank" in header else None
        if value_col is None and rank_col is None:
            raise Refused("missing score and rank")
    rows = []
    for n, text in lines[1:]:
        fields = ref_csv_fields(text, delim)
        if len(fields) != len(header):
            raise Refused(f"line {n}: {len(fields)} fields")
        row = (
            dict(zip(header, fields))
            if len(set(header)) == len(header)
            else {c: fields[header.index(c)] for c in needed if c in header}
        )
        q, d = row["query_id"], row["doc_id"]
        if not q or not d:
            raise Refused(f"line {n}: empty id")
        value = ref_number(row[value_col]) if value_col else None
        rank = ref_number(row[rank_col]) if rank_col else None
        if value is None:
            value = -rank
        rows.append((q, d, value, rank))
    return rows


def ref_detect(data: bytes, suffix: str) -> str:
    """.csv/.tsv files whose first non-blank line names a query_id column have named columns, else TREC."""
    if suffix not in (".csv", ".tsv"):
        return "trec"
    delim = "," if suffix == ".csv" else "\t"
    text = data[3:] if data.startswith(BOM) else data
    for raw in text.split(b"\n"):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        line_text = line.decode("utf-8", errors="replace")
        if not ref_blank(line_text):
            try:
                names = ref_csv_fields(line_text, delim)
            except Refused:
                names = [f.strip(" \t") for f in line_text.split(delim)]
            return "named" if "query_id" in [x.lower() for x in names] else "trec"
    return "trec"


def ref_jsonl(data: bytes, kind: str) -> list[tuple]:
    def unique(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise Refused("key twice")
        return dict(pairs)

    rows, cols = [], None
    for n, text in ref_lines(data):
        if ref_blank(text):
            continue
        try:
            obj = json.loads(text, object_pairs_hook=unique)
        except (ValueError, RecursionError):
            raise Refused(f"line {n}: JSON") from None
        if not isinstance(obj, dict):
            raise Refused(f"line {n}: not an object")
        if cols is None:
            keys = list(obj)
            if "query_id" not in keys or "doc_id" not in keys:
                raise Refused("missing column")
            if kind == "qrels":
                if "grade" not in keys:
                    raise Refused("missing grade")
                cols = ("grade", None)
            else:
                cols = ("score" if "score" in keys else None, "rank" if "rank" in keys else None)
                if cols == (None, None):
                    raise Refused("missing score and rank")
        ids = []
        for c in ("query_id", "doc_id"):
            v = obj.get(c, None)
            if isinstance(v, bool) or not isinstance(v, (str, int)) or str(v) == "":
                raise Refused(f"line {n}: bad id")
            try:
                str(v).encode("utf-8")
            except UnicodeEncodeError:
                raise Refused(f"line {n}: surrogate") from None
            ids.append(str(v))
        nums = []
        for c in cols:
            if c is None:
                nums.append(None)
                continue
            v = obj.get(c, "missing")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise Refused(f"line {n}: bad number")
            try:
                x = float(v)
            except OverflowError:
                raise Refused(f"line {n}: huge") from None
            if not math.isfinite(x):
                raise Refused(f"line {n}: not finite")
            nums.append(x)
        value, rank = nums
        rows.append((ids[0], ids[1], -rank if value is None else value, rank))
    return rows


def ref_table(rows: list[tuple], kind: str) -> list[tuple]:
    """Table-level rules: no data is refused; qrels merge a repeated judgment with the same grade and refuse
    different grades; a run refuses a document listed twice for a query and a rank that is not an integer."""
    if not rows:
        raise Refused("no data lines")
    seen: dict[tuple[str, str], float] = {}
    out = []
    for q, d, value, rank in rows:
        if kind == "run" and rank is not None and rank != round(rank):
            raise Refused("rank not an integer")
        if (q, d) in seen:
            if kind == "run" or seen[(q, d)] != value:
                raise Refused("twice")
            continue
        seen[(q, d)] = value
        out.append((q, d, value, rank))
    return out


def reference(data: bytes, suffix: str, kind: str) -> list[tuple]:
    if suffix == ".jsonl":
        return ref_table(ref_jsonl(data, kind), kind)
    if ref_detect(data, suffix) == "named":
        return ref_table(ref_named(data, kind, "," if suffix == ".csv" else "\t"), kind)
    return ref_table(ref_trec(data, kind), kind)


# --------------------------------------------------------------------------- comparing the readers to it


def rows_of(table) -> list[tuple]:
    ranks = table.rank.tolist() if table.rank is not None else [None] * len(table)
    queries = table.query.values[table.query.codes].tolist()
    return list(zip(queries, table.doc.array.to_pylist(), table.value.tolist(), ranks))


def line_by_line(monkeypatch) -> None:
    """Force the line-by-line readers (no C reader, no Arrow fast path)."""
    monkeypatch.setenv("NDCG_MLFLOW_LINE_READER", "1")


def _names_a_line(exc: DataError, path: Path) -> bool:
    return str(path) in str(exc) and (
        exc.line is not None
        or re.search(r"\brow \d+", str(exc)) is not None
        or "empty" in str(exc)
        or "no data lines" in str(exc)
    )


def _event(label: str) -> None:
    """Hypothesis's statistics of what a test saw (outside a Hypothesis test, as for the pinned cases: nothing)."""
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():
        event(label)


def check_against_reference(path: Path, data: bytes) -> None:
    """Both kinds of file, through both readers: the reference's rows, or a refusal naming a line."""
    for reader, kind in ((read_qrels, "qrels"), (read_run, "run")):
        try:
            expect = reference(data, path.suffix, kind)
        except Refused as why:
            expect = why
        for mode in ("default", "line-by-line"):
            with pytest.MonkeyPatch.context() as mp:
                if mode == "line-by-line":
                    line_by_line(mp)
                try:
                    got = rows_of(reader(path))
                except DataError as exc:
                    assert isinstance(expect, Refused), (
                        f"{kind}/{mode}: refused ({exc}) where the reference reads {expect[:5]}"
                    )
                    assert _names_a_line(exc, path), f"{kind}/{mode}: {exc}"
                    _event(f"{kind}: refused")
                    continue
                assert not isinstance(expect, Refused), (
                    f"{kind}/{mode}: read {got[:5]} where the reference refuses ({expect})"
                )
                assert got == expect, f"{kind}/{mode}: a different parse"
                _event(f"{kind}: read")


# --------------------------------------------------------------------------- readers: random bytes


@FUZZ
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".txt", ".run", ".csv", ".tsv", ".jsonl"]))
def test_readers_on_random_bytes(folder, data, suffix):
    check_against_reference(_write(folder, suffix, data), data)


# --------------------------------------------------------------------------- readers: adversarial TREC text

ODD_SPACES = [
    "\u00a0",
    "\u2003",
    "\u3000",
    "\u2028",
    "\u2029",
    "\x85",
    "\x0b",
    "\x0c",
    "\x1c",
    "\u200b",
    "\ufeff",
    "\u1680",
    "\u202f",
]
TOKENS = st.one_of(
    st.sampled_from(
        [
            "q1",
            "q2",
            "q10",
            "d1",
            "d2",
            "d10",
            "0",
            "Q0",
            "1",
            "2",
            "3",
            "-1",
            "1.5",
            "0.25",
            "-0",
            "1e3",
            "1e999",
            "-1e999",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "Infinity",
            "0x10",
            "1_0",
            "+1",
            ".5",
            "5.",
            "1e",
            "tag",
            "é",
            "d\u00e9",
            "\x00",
            '"',
            "'",
            '""',
            ",",
            ";",
            "#",
            "\\",
            "<b>",
            "&amp;",
            "9" * 40,
            "\uff11",
            "\u0661",
            "1e-400",
            "+.5",
            ".",
        ]
        + ODD_SPACES
    ),
    st.text(alphabet="abqdQ019 \t,;:\"'#\\.-+eE\u00e9\u00df\u4e2d\x00\r" + "".join(ODD_SPACES), min_size=1, max_size=4),
)
SEPARATORS = st.sampled_from([" ", " ", "\t", "\t", "  ", " \t ", "\t\t", ","])
NEWLINES = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r", "\n\n", "\r\n\r\n", "\n \n", "\n\t\n"])
IDS = st.one_of(
    st.sampled_from(["q1", "q2", "q3"]),
    st.builds(
        lambda a, b, c: a + b + c,
        st.sampled_from(["q", "d", ""]),
        st.sampled_from(ODD_SPACES + ["", "x", '"']),
        st.sampled_from(["1", "2", "", "\u00e9"]),
    ),
)


@st.composite
def trec_text(draw) -> bytes:
    """Mostly well-formed qrels or run lines (one layout per file) with odd ids, numbers, separators and line
    ends (CR, CRLF, LF mixed); now and then a line of random tokens, extra fields or leading separators."""
    layout = draw(st.sampled_from(["qrels", "run"]))
    noise = draw(st.sampled_from([0, 0, 0, 1, 3]))  # chance in 10 that a line is random tokens
    sep = draw(SEPARATORS)
    newline = draw(st.sampled_from(["\n", "\n", "\r\n", "\n\n", "\r"]))
    lines = []
    for _ in range(draw(st.integers(0, 10))):
        if draw(st.integers(0, 9)) >= noise:
            q = draw(IDS) or "q1"
            d = (draw(IDS) if draw(st.integers(0, 3)) == 0 else "") + f"d{draw(st.integers(1, 80))}"
            num = draw(
                st.sampled_from(["0", "1", "2", "3", "1.5", "-1", "0.5", "-0", "1e3", "+2", ".5", "3."])
                if draw(st.integers(0, 20))
                else st.sampled_from(["nan", "1e999", "-inf", "x", "1_0", "\uff11"])
            )
            rank = str(len(lines) + 1) if draw(st.integers(0, 20)) else draw(st.sampled_from(["2.0", "1.5", "-1"]))
            fields = [q, "0", d, num] if layout == "qrels" else [q, "Q0", d, rank, num, "tag"]
            if layout == "run" and draw(st.integers(0, 4)) == 0:
                fields += draw(st.lists(TOKENS, max_size=3))  # fields after the tag
            line_sep = sep if draw(st.integers(0, 5)) else draw(SEPARATORS)
        else:
            fields = draw(st.lists(TOKENS, max_size=8))
            line_sep = draw(SEPARATORS)
        lead = draw(st.sampled_from(["", "", "", " ", "\t"])) if noise else ""
        end = newline if draw(st.integers(0, 6)) or not noise else draw(NEWLINES)
        lines.append(lead + line_sep.join(fields) + draw(st.sampled_from(["", "", " ", "\t"])) + end)
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no final line end
    prefix = b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b""
    return prefix + text.encode("utf-8")


@FUZZ
@given(data=trec_text(), suffix=st.sampled_from([".txt", ".run", ".tsv"]))
def test_readers_on_adversarial_trec(folder, data, suffix):
    check_against_reference(_write(folder, suffix, data), data)


# --------------------------------------------------------------------------- readers: adversarial CSV / TSV

COLUMNS = ["query_id", "doc_id", "grade", "score", "rank", "extra"]


@st.composite
def delimited_text(draw) -> tuple[bytes, str]:
    suffix = draw(st.sampled_from([".csv", ".tsv"]))
    delim = "," if suffix == ".csv" else "\t"
    header = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=6))
    if draw(st.integers(0, 3)):
        header = draw(
            st.permutations(
                ["query_id", "doc_id", draw(st.sampled_from(["grade", "score", "rank"]))]
                + header[: draw(st.integers(0, 2))]
            )
        )
    if draw(st.integers(0, 3)) == 0:
        header = [f'"{h}"' for h in header]  # R's write.csv quotes the names
    noise = draw(st.sampled_from([0, 0, 0, 1, 3]))  # chance in 10 that a cell or line end is odd
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    rows = [delim.join(header)]
    for _ in range(draw(st.integers(0, 8))):
        n = len(header) + (draw(st.sampled_from([0, 0, 0, -1, 1])) if draw(st.integers(0, 9)) < noise else 0)
        cells = []
        for name in header[:n] + ["extra"] * (n - len(header)):
            name = name.strip('"')
            if draw(st.integers(0, 9)) < noise:
                cell = draw(TOKENS)
            elif name in ("query_id", "doc_id", "extra"):
                cell = draw(
                    st.sampled_from(
                        [
                            "q1",
                            "q2",
                            "d1",
                            "d2",
                            "d3",
                            " q1",
                            "d1 ",
                            "q\u00a01",
                            "\u00a0",
                            "d\u2003x",
                            "a,b",
                            'say "hi"',
                            "\t d4\t",
                        ]
                    )
                )
            else:
                cell = draw(st.sampled_from(["1", "2", "3", "0.5", "-1", " 2", "+1", "1e1", ".5"]))
            if draw(st.integers(0, 4)) == 0 or (delim in cell) or '"' in cell:  # quoted as a CSV writer does
                odd = (
                    draw(st.sampled_from(["", ",", "\t", '""', "\n", "\r"])) if draw(st.integers(0, 9)) < noise else ""
                )
                cell = '"' + cell.replace('"', '""') + odd + '"'
            cells.append(cell)
        rows.append(delim.join(cells))
    text = "".join(r + (newline if draw(st.integers(0, 9)) >= noise else draw(NEWLINES)) for r in rows)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    prefix = b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b""
    return prefix + text.encode("utf-8"), suffix


# Cases pinned whatever the installed Hypothesis generates (a generator's version decides which cases it reaches):
# a CR inside a header or a row, quoted or not, at every place the line ends' rule and the header's guess meet.
KNOWN_DELIMITED = [
    (b'\xef\xbb\xbf"query_id"\t"doc_id"\t"grade"\t"query_id"\rq1\tq1\t1\tq1\nq1\td1\t1\tq1\n', ".tsv"),
    (b'"query_id","doc_id","grade"\rq1,d1,1\n', ".csv"),
    (b'"query_id"\t"doc_id"\t"score"\r\nq1\td1\t1\r\n"q1"\t"d\r2"\t2\n', ".tsv"),
    (b"query_id,doc_id,grade\r\r\nq1,d1,1\n", ".csv"),
    (b'query_id,doc_id,"gr\rade"\nq1,d1,1\n', ".csv"),
    (b'"query_id,doc_id,grade\rq1,d1,1\n', ".csv"),
    (b"query_id\tdoc_id\tgrade\nq1\td1\t1\rq2\td2\t2\n", ".tsv"),
    (b'"a"\t"b"\t"c"\rq1 0 d1 1\n', ".tsv"),
    (b"q1 0 d1 1\rq1 0 d2 2\n", ".csv"),
    (b'"query_id","doc_id","grade"\nq1,d1,1\r', ".csv"),
]


@pytest.mark.parametrize("data, suffix", KNOWN_DELIMITED)
def test_readers_on_known_delimited_cases(folder, data, suffix):
    check_against_reference(_write(folder, suffix, data), data)


@pytest.mark.integration
@pytest.mark.parametrize("data, suffix", KNOWN_DELIMITED[:2])
def test_a_cr_in_a_quoted_header_is_refused_by_validate_and_run_naming_the_line(tmp_path, data, suffix):
    """``validate`` reads the data as ``run`` does: both refuse the file with exit 2, naming its first line."""
    from helpers import metric_spec, run_cli, write_run

    (tmp_path / f"qrels{suffix}").write_bytes(data)
    run = write_run(tmp_path, {"q1": ["d1"]})
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(metric_spec(f"qrels{suffix}", run, name="cr")))
    for args in (("validate", str(spec)), ("run", str(spec), "--out", str(tmp_path / "out"))):
        done = run_cli(*args, cwd=tmp_path, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert f"qrels{suffix}:1: a carriage return (CR)" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@FUZZ
@given(case=delimited_text())
def test_readers_on_adversarial_csv(folder, case):
    data, suffix = case
    check_against_reference(_write(folder, suffix, data), data)


# --------------------------------------------------------------------------- readers: JSONL

JSON_VALUES = st.one_of(
    st.sampled_from(["q1", "q2", "d1", "d2", "", "\u00a0", "x\udc80", "\ud800"]),
    st.integers(-3, 3),
    st.sampled_from([2**64 - 1, 10**400, True, None, 1.5, -0.0, [1], {}]),
    st.floats(allow_nan=True, allow_infinity=True),
)


@st.composite
def jsonl_text(draw) -> bytes:
    keys = draw(st.permutations(["query_id", "doc_id", draw(st.sampled_from(["grade", "score", "rank"]))]))
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        obj = {
            k: draw(JSON_VALUES)
            if draw(st.integers(0, 3)) == 0
            else (
                f"q{draw(st.integers(1, 2))}"
                if k == "query_id"
                else f"d{draw(st.integers(1, 4))}"
                if k == "doc_id"
                else draw(st.integers(0, 3))
            )
            for k in keys
        }
        text = json.dumps(obj)
        if draw(st.integers(0, 8)) == 0:
            text = text[:-1] + ', "score": 1}'  # possibly a key twice
        lines.append(text + draw(NEWLINES))
    return "".join(lines).encode("utf-8", errors="surrogatepass")


@FUZZ
@given(data=jsonl_text())
def test_readers_on_jsonl(folder, data):
    check_against_reference(_write(folder, ".jsonl", data), data)


# --------------------------------------------------------------------------- readers: Parquet with nulls

PARQUET_IDS = st.one_of(st.sampled_from(["q1", "q2", "d1", "d2", "", None, "\u00a0", " d1"]))
PARQUET_NUMBERS = st.one_of(st.integers(0, 3), st.sampled_from([None, float("nan"), float("inf"), 0.5, -1.0]))


@FUZZ
@given(
    rows=st.lists(st.tuples(PARQUET_IDS, PARQUET_IDS, PARQUET_NUMBERS), max_size=6),
    id_type=st.sampled_from(["string", "large_string", "int64"]),
    value_type=st.sampled_from(["float64", "float32", "int64", "uint64", "int8"]),
    value_name=st.sampled_from(["grade", "score", "rank"]),
)
def test_readers_on_parquet_with_nulls(folder, rows, id_type, value_type, value_name):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def id_value(v):
        if id_type != "int64" or v is None:
            return v
        return int(v[1:]) if v[1:].isdigit() else 7

    qs, ds = [id_value(r[0]) for r in rows], [id_value(r[1]) for r in rows]
    vals = [r[2] for r in rows]
    if value_type not in ("float64", "float32"):
        vals = [None if v is None else (int(v) if math.isfinite(v) else None) for v in vals]
    try:
        table = pa.table(
            {
                "query_id": pa.array(qs, type=getattr(pa, id_type)()),
                "doc_id": pa.array(ds, type=getattr(pa, id_type)()),
                value_name: pa.array(vals, type=getattr(pa, value_type)()),
            }
        )
    except (pa.ArrowInvalid, OverflowError):
        return
    path = folder / f"f{next(_counter)}.parquet"
    pq.write_table(table, path)
    for reader, kind in ((read_qrels, "qrels"), (read_run, "run")):
        try:
            if (kind == "qrels") != (value_name == "grade"):
                raise Refused("missing column")
            expect = []
            for q, d, v in zip(qs, ds, table.column(value_name).to_pylist()):
                if q is None or d is None or str(q) == "" or str(d) == "":
                    raise Refused("null or empty id")
                if v is None or not math.isfinite(float(v)):
                    raise Refused("null or non-finite value")
                expect.append(
                    (
                        str(q),
                        str(d),
                        -float(v) if value_name == "rank" else float(v),
                        float(v) if value_name == "rank" else None,
                    )
                )
            expect = ref_table(expect, kind)
        except Refused as why:
            with pytest.raises(DataError) as info:
                reader(path)
            assert str(path) in str(info.value), str(info.value)
            event(f"{kind}: refused ({why})")
            continue
        assert rows_of(reader(path)) == expect
        event(f"{kind}: read")


# --------------------------------------------------------------------------- small files


def ref_small(data: bytes, suffix: str, columns: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    lines = [(n, t) for n, t in ref_lines(data) if not ref_blank(t)]
    # a .csv file is CSV; any other's fields are runs of spaces and tabs, unless its first line is a header with
    # tabs between the names (then TSV)
    head = lines[0][1].split("\t") if lines else []
    delim = (
        ","
        if suffix == ".csv"
        else ("\t" if len(head) > 1 and columns[0] in [h.strip(' \t"').lower() for h in head] else None)
    )
    split = (
        (lambda t: [f for f in re.split(r"[ \t]+", t) if f]) if delim is None else (lambda t: ref_csv_fields(t, delim))
    )
    out, idx, header = [], None, None
    for i, (n, text) in enumerate(lines):
        fields = split(text)
        if i == 0 and columns[0] in [f.lower() for f in fields]:
            header = [f.lower() for f in fields]
            if any(header.count(c) > 1 for c in columns) or any(c not in header for c in columns):
                raise Refused("header")
            idx = [header.index(c) for c in columns]
            continue
        if idx is not None:
            if len(fields) != len(header):
                raise Refused(f"line {n}")
            row = [fields[j] for j in idx]
        else:
            if len(fields) != len(columns):
                raise Refused(f"line {n}")
            row = fields
        if any(not v for v in row):
            raise Refused(f"line {n}: empty")
        out.append((n, row))
    return out


def ref_weights(data: bytes, suffix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for n, (qid, raw) in ref_small(data, suffix, ("query_id", "weight")):
        w = ref_number(raw)
        if w <= 0 or qid in out:
            raise Refused(f"line {n}")
        out[qid] = w
    if not out:
        raise Refused("empty")
    top = max(out.values())
    if any(w / top < sys.float_info.min for w in out.values()):
        raise Refused("ratio")
    return out


def ref_query_set(data: bytes, suffix: str) -> list[str]:
    ids = [row[0] for _, row in ref_small(data, suffix, ("query_id",))]
    if not ids or len(set(ids)) != len(ids):
        raise Refused("empty or twice")
    return ids


WEIGHT_TOKENS = st.sampled_from(
    ["1", "2", "0.5", "5e-324", "1e308", "1e-300", "0", "-1", "nan", "1_0", "\uff11", "2.2250738585072014e-308", "3"]
)


@st.composite
def small_text(draw) -> bytes:
    sep = draw(st.sampled_from([" ", "\t", "  ", ","]))
    lines = []
    if draw(st.integers(0, 4)) == 0:
        lines.append(sep.join(draw(st.permutations(["query_id", "weight"]))))
    noise = draw(st.sampled_from([0, 0, 1, 3]))
    for i in range(draw(st.integers(0, 6))):
        fields = [draw(IDS) or f"q{i}", draw(WEIGHT_TOKENS) if draw(st.integers(0, 9)) < noise + 1 else str(i + 1)]
        if draw(st.integers(0, 9)) < noise:
            fields = draw(st.lists(TOKENS, max_size=3))
        line_sep = sep if draw(st.integers(0, 3)) else draw(st.sampled_from([" ", "\t", " \t"]))  # mixed
        lines.append(draw(st.sampled_from(["", "", " "])) + line_sep.join(fields))
    return "".join(line + (draw(NEWLINES) if noise else "\n") for line in lines).encode("utf-8")


KNOWN_SMALL = [
    (b"q1\t2\nq2 3\nq3 \t 1\n", ".txt"),
    (b"q1\t2\nq2 3\n", ".tsv"),
    (b'"query_id"\t"weight"\nq1\t2\nq2\t3\n', ".txt"),
    (b"query_id\tweight\nq1 2\n", ".txt"),
    (b"query_id weight\nq1\t2\n", ".tsv"),
    (b"q1,2\nq2 3\n", ".txt"),
    (b"q1\t2\nq2,3\n", ".csv"),
]


@pytest.mark.parametrize("data, suffix", KNOWN_SMALL)
def test_small_file_readers_on_known_cases(folder, data, suffix):
    check_small(folder, data, suffix)


@FUZZ
@given(data=small_text(), suffix=st.sampled_from([".txt", ".csv", ".tsv"]))
def test_small_file_readers_against_the_reference(folder, data, suffix):
    check_small(folder, data, suffix)


def check_small(folder: Path, data: bytes, suffix: str) -> None:
    path = _write(folder, suffix, data)
    for reader, ref in ((read_weights, ref_weights), (read_query_set, ref_query_set)):
        try:
            expect = ref(data, suffix)
        except Refused:
            with pytest.raises(DataError) as info:
                reader(path)
            assert str(path) in str(info.value)
            _event(f"{reader.__name__}: refused")
            continue
        assert reader(path) == expect
        _event(f"{reader.__name__}: read")


# --------------------------------------------------------------------------- spec loader

VALID = {
    "spec_version": 1,
    "name": "fuzz",
    "metric": {
        "gain": "exponential",
        "cutoffs": [5, 10, "all"],
        "discount": "log2",
        "ties": "displayed_order",
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    },
    "queries": {"weights": "uniform", "set": None},
    "data": {
        "qrels": "demo/qrels.tsv",
        "systems": {"bm25": "demo/bm25.run", "rr": {"path": "rr.csv", "format": "csv"}},
    },
    "uncertainty": {"resamples": 1000, "confidence": 0.95, "method": "bca", "seed": 1},
    "comparison": {"baseline": "bm25", "test": "both", "correction": "holm", "wins_losses": 5, "tie_tolerance": 1e-9},
    "report": {"sensitivity": False},
    "companions": {"duplicates": "dups.tsv", "catalog": 1000},
    "mlflow": {
        "experiment": "fuzz",
        "tracking_uri": "http://127.0.0.1:5000",
        "run_name": "r",
        "timeout": 5,
        "max_retries": 1,
    },
}

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "all",
            "uniform",
            "exponential",
            "linear",
            "log2",
            "average",
            "trec_eval",
            "bm25",
            "rr",
            "zero",
            "exclude",
            "error",
            "csv",
            "",
            " ",
            "~",
            "~no_such_user/x",
            "..",
            "../x",
            "/",
            "nan",
            "@",
            "a@b",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), SCALARS), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(tree, prefix=()):
    yield prefix
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _paths(v, prefix + (i,))


ALL_PATHS = [p for p in _paths(VALID) if p]


def _mutate(tree, path, value, delete: bool):
    tree = copy.deepcopy(tree)
    node = tree
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return tree


def _load(raw, folder: Path) -> None:
    try:
        spec = load_spec(raw, base_dir=folder)
    except NdcgError as exc:
        assert str(exc)
        event(type(exc).__name__)
        return
    event("valid spec")
    assert isinstance(spec, Spec)
    spec.resolved()  # a valid spec resolves and hashes
    spec.definition_digest()


def test_the_unmutated_spec_is_valid(folder):
    assert isinstance(load_spec(copy.deepcopy(VALID), base_dir=folder), Spec)


@FUZZ
@given(path=st.sampled_from(ALL_PATHS), value=VALUES, delete=st.integers(0, 6))
def test_spec_loader_on_mutated_valid_spec(folder, path, value, delete):
    _load(_mutate(VALID, path, value, delete == 0), folder)


@FUZZ
@given(raw=st.dictionaries(st.one_of(st.sampled_from(list(VALID)), st.text(max_size=8), SCALARS), VALUES, max_size=8))
def test_spec_loader_on_random_nested_dicts(folder, raw):
    _load(raw, folder)


YAML_TOKENS = st.sampled_from(
    [
        "spec_version",
        "name",
        "metric",
        "gain",
        "cutoffs",
        "queries",
        "weights",
        "data",
        "qrels",
        "systems",
        "mlflow",
        "experiment",
        ":",
        ": ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&a ",
        "*a",
        "<<: *a",
        "!!str ",
        "!!int ",
        "!!float ",
        "!!binary ",
        "!!set ",
        "!!python/object/apply:os.system ",
        "!!python/name:os.system",
        "? ",
        "|",
        ">",
        "'",
        '"',
        "#",
        "~",
        "null",
        "true",
        "1",
        "0x1F",
        "1e999",
        ".nan",
        ".inf",
        "all",
        "uniform",
        "2001-12-14",
        "\t",
        "  ",
        "\n",
        "\n  ",
        "\n    ",
        "---",
        "...",
        "%YAML 1.1\n",
        "é",
        "\ufeff",
        "\x85",
    ]
)


@FUZZ
@given(tokens=st.lists(YAML_TOKENS, max_size=40), as_bytes=st.binary(max_size=6))
def test_spec_loader_on_yaml_ish_text(folder, tokens, as_bytes):
    path = _write(folder, ".yaml", "".join(tokens).encode("utf-8") + as_bytes)
    _load(path, folder)


@FUZZ
@given(path=st.sampled_from(ALL_PATHS), value=VALUES)
def test_spec_loader_on_mutated_spec_files(folder, path, value):
    """The same mutations through a YAML file (the CLI's path), including anchors when a value repeats."""
    raw = _mutate(VALID, path, value, False)
    try:
        text = yaml.safe_dump(raw, sort_keys=False)
    except yaml.YAMLError:
        return
    _load(_write(folder, ".yaml", text.encode("utf-8")), folder)
