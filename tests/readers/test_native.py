"""The C TREC reader and id hashes (``readers/cparse.c``) against the Python readings of the same bytes.

Every property compares what the C reader accepted with the line-by-line reader's reading of the same file (ids,
codes, numbers bit for bit, ranks), or with ``float()`` and the numpy hashes; and where the C reader refuses a
line (its code and place, worded by ``readers/accept.py``), the line reader must refuse the file with the same
error, naming the same line.
"""

from __future__ import annotations

import itertools
import math
import re
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ndcg_mlflow import DataError
from ndcg_mlflow.readers import hashing
from ndcg_mlflow.readers import trec as readers_trec

FAST = readers_trec.native_reader()
pytestmark = pytest.mark.skipif(FAST is None, reason="the C reader is not built")
PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=examples(300), print_blob=True)
_counter = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("native")


def _write(folder: Path, data: bytes) -> Path:
    path = folder / f"f{next(_counter)}.run"
    path.write_bytes(data)
    return path


def bits(a: np.ndarray) -> list[int]:
    """Each float's bits (so that -0.0 and 0.0, or two NaNs, are told apart)."""
    return np.asarray(a, dtype=np.float64).view(np.uint64).tolist()


def reading(table) -> dict:
    return {
        "queries": [str(table.query.values[c]) for c in table.query.codes],
        "codes": table.query.codes.tolist(),
        "values_": list(table.query.values),
        "docs": table.doc.array.to_pylist(),
        "value": bits(table.value),
        "rank": None if table.rank is None else bits(table.rank),
    }


def line_reading(path: Path, kind: str, rank: bool):
    """The line-by-line reader's table, or the DataError it raises."""
    try:
        return readers_trec._trec_python(path, kind, rank)
    except DataError as exc:
        return exc


def native_reading(path: Path, kind: str, rank: bool, part_size: int = readers_trec.NATIVE_PART):
    """The C reader's table, or the DataError it raises (None: it left the file to the line reader)."""
    try:
        return readers_trec._trec_native(path, kind, rank, part_size=part_size)
    except DataError as exc:
        return exc


# Lines after the ones a test is about: with 64 bytes after a line's start, the C reader cuts the line into fields
# by the bit masks of its bytes' classes, and with 32 after a number's, or 16 after an id's, it reads them a word
# at a time (the last bytes of a range go the byte-by-byte way)
PAD = {"run": b"zz Q0 pad 1 0 tag\n" * 6, "qrels": b"zz 0 pad 1\n" * 10}


# the C reader's vector widths: none (the scalar code), SSE2 (every x86-64), AVX2; the widest last, as the tests
# after the ones of every width run with the last (the fixture's module scope keeps it until the module's end)
WIDTHS = [0, 128, 256]


@pytest.fixture(scope="module", params=WIDTHS)
def vector_width(request):
    """Every test with the C reader's 256-bit vectors (AVX2), its 128-bit ones (SSE2) and without vectors (the
    scalar code that a build without SSE2 runs, ``NDCG_MLFLOW_SCALAR=1``)."""
    assert FAST is not None
    before = FAST.vector_width(None)
    if FAST.vector_width(request.param) != request.param:
        FAST.vector_width(before)
        pytest.skip(f"this build or CPU has no {request.param}-bit vectors")
    yield request.param
    FAST.vector_width(before)


widths = pytest.mark.usefixtures("vector_width")


def check(path: Path, kind: str, rank: bool, part_size: int = readers_trec.NATIVE_PART, padded: bool = True) -> None:
    """The C reader's table of the file against the line reader's, and (``padded``) of the file with lines after
    it (PAD), so that every line of its own is read the vector way."""
    if padded:
        check(path, kind, rank, part_size, padded=False)
        data = path.read_bytes()
        path = _write(path.parent, data + (b"\n" if data and not data.endswith(b"\n") else b"") + PAD[kind])
    got = native_reading(path, kind, rank, part_size)
    expect = line_reading(path, kind, rank)
    assert got is not None, f"the C reader's refusal is not the line reader's: {path.read_bytes()!r}"
    if isinstance(got, DataError):  # the same error, naming the same line
        assert isinstance(expect, DataError), f"the C reader refused a file the line reader reads ({got})"
        assert (str(got), got.line) == (str(expect), expect.line)
        return
    assert not isinstance(expect, DataError), f"the C reader read a file the line reader refuses ({expect})"
    assert reading(got) == reading(expect)
    assert got.finite and np.isfinite(got.value).all()  # (check_finite then skips the values)
    assert got.read_pair_keys is not None
    assert got.read_pair_keys.tolist() == numpy_pair_keys(got).tolist()


def numpy_pair_keys(table) -> np.ndarray:
    """pair_hashes' keys by their definition, in numpy alone: the query id's mix XOR the doc id's hash."""
    with np.errstate(over="ignore"):
        query = hashing._numpy_hashes(pa.array(list(table.query.values), type=pa.string())) ^ hashing._QUERY_SALT
        return hashing._mix(query)[table.query.codes] ^ hashing._numpy_hashes(table.doc.array.combine_chunks())


# --------------------------------------------------------------------------- strategies

NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.tuples(st.floats(-1e6, 1e6), st.integers(0, 20)).map(lambda t: f"{t[0]:.{t[1]}f}"),
    st.tuples(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 20)).map(lambda t: f"{t[0]:.{t[1]}e}"),
    st.integers(-(10**20), 10**20).map(str),
    # 15 and 16 digits, up to 8 on either side of the dot: m / 10^k is exact only for up to 15 digits
    st.tuples(st.integers(0, 10**8 - 1), st.integers(0, 8), st.integers(0, 10**8 - 1), st.sampled_from(["", "-"])).map(
        lambda t: f"{t[3]}{t[0]}.{t[2] % 10 ** t[1]:0{t[1]}d}"
    ),
    st.sampled_from(
        [
            "0",
            "-0",
            "+0",
            "-0.0",
            ".5",
            "5.",
            "+.5e-3",
            "1E5",
            "1e+5",
            "00012.5000",
            "9007199254740993",
            "0.1000000000000000055511151231257827",
            "123456789012345678901234567890",
            "1e22",
            "1e23",
            "4.9e-324",
            "2.4e-324",
            "1e-400",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "1e999",
            "-1e999",
            "91528947.00282669",
            "-96207290.13421809",
            "1234567.12345678",
            "12345678.1234567",
            "123456789.1",
            "1.123456789",
            "nan",
            "NaN",
            "inf",
            "-Infinity",
            "0x10",
            "1_0",
            "1e",
            "e5",
            ".",
            "-",
            "+",
            "1.2.3",
            "1e5.5",
            "١٢",
            "1,5",
            "12a",
            "--1",
            "+-1",
        ]
    ),
)
IDS = st.one_of(
    st.sampled_from(
        [
            "q1",
            "7067032",
            "0",
            "007",
            "12345678901234567890",
            "123456789012345678",
            "d-1",
            "Q0",
            "é",
            "doc\u00a0x",
            "x" * 65,
            "9" * 70,
            "\ufeffd",
            "d\x00",
        ]
    ),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\r\n"), min_size=1, max_size=8),
    st.integers(0, 10**19).map(str),
)
SEPS = st.sampled_from([" ", " ", "\t", "  ", " \t", "\t\t "])


@st.composite
def trec_file(draw, kind: str) -> bytes:
    lines = []
    queries = draw(st.lists(IDS, min_size=1, max_size=4, unique=True))
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 12)) == 0:
            lines.append(draw(st.sampled_from(["", " ", "\t", " \t "])))  # a blank line
            continue
        q, d = draw(st.sampled_from(queries)), draw(IDS)
        rank = draw(st.one_of(st.integers(-3, 2000).map(str), NUMBER_TEXT))
        value = draw(NUMBER_TEXT) if draw(st.integers(0, 3)) else draw(st.integers(0, 4).map(str))
        fields = [q, "0", d, value] if kind == "qrels" else [q, "Q0", d, rank, value, "tag"]
        if draw(st.integers(0, 8)) == 0:
            fields = fields[: draw(st.integers(1, len(fields) - 1))]  # too few fields
        elif draw(st.integers(0, 5)) == 0:
            fields += draw(st.lists(IDS, min_size=1, max_size=2))  # more (after the tag, or too many)
        line = draw(SEPS).join(fields)
        lead, trail = draw(st.sampled_from(["", "", "", " ", "\t"])), draw(st.sampled_from(["", "", "", " ", "\t"]))
        lines.append(lead + line + trail)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = "".join(
        line + (newline if draw(st.integers(0, 30)) else draw(st.sampled_from(["\r", "\r\r\n"]))) for line in lines
    )
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no final line end
    data = text.encode("utf-8")
    if draw(st.integers(0, 20)) == 0 and data:  # bytes that are not UTF-8
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe0\x80\x80"])) + data[at:]
    if draw(st.integers(0, 6)) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


# --------------------------------------------------------------------------- properties


@widths
@PROPERTY
@given(data=trec_file("run"), rank=st.booleans())
def test_runs_read_as_the_line_reader_reads_them(folder, data, rank):
    check(_write(folder, data), "run", rank)


@widths
@PROPERTY
@given(data=trec_file("qrels"))
def test_qrels_read_as_the_line_reader_reads_them(folder, data):
    check(_write(folder, data), "qrels", True)


@widths
@PROPERTY
@given(data=trec_file("run"), part_size=st.integers(1, 200))
def test_a_file_read_in_parts_reads_as_one(folder, data, part_size):
    """Parts of a few bytes: a query's rows across parts keep one code, blank lines between parts leave no gap,
    each part's document ids are one Arrow chunk."""
    check(_write(folder, data), "run", True, part_size=part_size)


@PROPERTY
@given(data=trec_file("run"), part_size=st.sampled_from([readers_trec.NATIVE_PART, 40]))
def test_the_vector_code_reads_as_the_scalar_code(folder, data, part_size):
    """A file (lines after it, so that its own lines are read the vector way) read at each vector width there is:
    the same table as without vectors, or the same refusal (the same error, naming the same line)."""
    path = _write(folder, data + (b"\n" if data and not data.endswith(b"\n") else b"") + PAD["run"])
    before = FAST.vector_width(None)
    readings = {}
    try:
        for width in WIDTHS:
            if FAST.vector_width(width) == width:
                got = native_reading(path, "run", True, part_size)
                readings[width] = (str(got), got.line) if isinstance(got, DataError) else reading(got)
    finally:
        FAST.vector_width(before)
    assert len(readings) > 1 or FAST.vector_width(None) == 0
    assert all(r == readings[0] for r in readings.values())


@widths
@PROPERTY
@given(text=NUMBER_TEXT)
def test_numbers_are_python_floats_bit_for_bit(folder, text):
    for pad in (b"", PAD["run"]):  # (the last bytes of a file byte by byte; the others a word at a time)
        path = _write(folder, f"q Q0 d 1 {text} t\n".encode() + pad)
        got = native_reading(path, "run", False)
        try:
            expect = readers_trec._trec_python(path, "run", False).value[0]
        except DataError as exc:
            assert isinstance(got, DataError) and str(got) == str(exc)
            continue
        assert not isinstance(got, DataError) and bits(got.value[:1]) == bits([expect])


@widths
@PROPERTY
@given(x=st.floats(allow_nan=False, allow_infinity=False))
def test_every_double_reads_back_as_itself(folder, x):
    """repr and %.17g of any double (subnormals and the largest included) read back to the same bits."""
    for pad in (b"", PAD["run"]):
        path = _write(folder, f"q Q0 a 1 {x!r} t\nq Q0 b 2 {x:.17g} t\nq Q0 c 3 {x:.25e} t\n".encode() + pad)
        got = readers_trec._trec_native(path, "run", False)
        assert got is not None
        assert bits(got.value[:3]) == bits([x, x, float(f"{x:.25e}")])


@PROPERTY
@given(ids=st.lists(IDS, min_size=1, max_size=30))
def test_id_hashes_are_the_numpy_hashes(ids):
    array = pa.array(ids, type=pa.string())
    sliced = pa.array(["pad"] + ids, type=pa.string()).slice(1)  # (an array with an offset)
    assert hashing._chunk_hashes(array).tolist() == hashing._numpy_hashes(array).tolist()
    assert hashing._chunk_hashes(sliced).tolist() == hashing._numpy_hashes(array).tolist()


@widths
@PROPERTY
@given(
    lines=st.lists(
        st.tuples(
            st.integers(0, 10**8),
            st.one_of(st.integers(0, 10**18).map(str), IDS),
            NUMBER_TEXT,
            st.integers(50, 72),
            SEPS,
            st.sampled_from(["\n", "\r\n", "\r"]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_lines_about_the_windows_length_read_as_the_line_reader_reads_them(folder, lines):
    """Lines of 50 to 72 bytes (the tag made as long as it takes), LF or CRLF (a lone CR now and then): line ends
    at, before and past the 64 bytes the C reader looks at for a line, numbers and ids of 1 to 20 bytes about the
    lengths it reads a word at a time."""
    text = []
    for q, doc, value, length, sep, end in lines:
        head = sep.join([str(q), "Q0", doc, "1", value, ""])
        text.append(head + "t" * max(1, length - len(head) - len(end)) + end)
    check(_write(folder, "".join(text).encode()), "run", True)


@widths
def test_a_lone_cr_at_a_part_boundary_and_at_the_end_is_refused(folder):
    for data in (b"q Q0 d1 1 2 t\r\nq Q0 d2 2 1 t\r", b"q Q0 d1 1 2 t\rq Q0 d2 2 1 t\n", b"q Q0 d1 1 2 t\r"):
        for part_size in (1, 5, 14, 15, 16, 1 << 20):
            check(_write(folder, data), "run", True, part_size=part_size)
            got = native_reading(_write(folder, data), "run", True, part_size)
            assert isinstance(got, DataError) and "carriage return" in str(got)


@widths
def test_many_queries_grow_the_query_table(folder):
    """Thousands of distinct query ids (the C reader's id table grows), first seen in every part."""
    lines = [f"q{(i * 7919) % 5000} Q0 d{i} 1 {i / 7} t\n" for i in range(20000)]
    path = _write(folder, "".join(lines).encode())
    for part_size in (1 << 20, 4096):
        check(path, "run", True, part_size=part_size)


@widths
def test_a_number_that_needs_strtod_reads_as_python_reads_it(folder):
    """Beyond 15 digits or 10^22 the C reader leaves the fast path; the halfway cases must still round to even."""
    cases = [
        "9007199254740993",
        "9007199254740995",
        "1.00000000000000011102230246251565404236316680908203125",
        "1e23",
        "8.98846567431158e307",
        "2.2250738585072011e-308",
        "2.2250738585072012e-308",
        "0." + "0" * 400 + "1",
        "1" * 300,
        "1" * 30 + "e-30",
    ]
    path = _write(folder, "".join(f"q Q0 d{i} 1 {c} t\n" for i, c in enumerate(cases)).encode())
    got = readers_trec._trec_native(path, "run", False)
    assert got is not None
    assert bits(got.value) == bits([float(c) for c in cases])
    assert all(math.isfinite(v) for v in got.value)


# --------------------------------------------------------------------------- the number parser against float()

# After the field, the rest of a line: none (the field read byte by byte), or 32 bytes and more (the word at a
# time read first, as for most numbers of a run), including digits and dots, which must not count
AFTER = (b"", b" tag\n" + b"x" * 40, b"9" * 40, b"." * 40)


def c_number(text: str, after: bytes) -> float | None:
    """The C reader's number for a field ``text`` followed by ``after``; None where it leaves the line to the line
    reader."""
    from ndcg_mlflow.readers import cparse

    data = text.encode()
    return cparse.number(data + after, len(data))


def pure_number(text: str) -> float | None:
    """``float(text)`` where the line reader takes it as a score (text.parse_number's grammar, finite); else None
    (the line reader refuses it, naming the line)."""
    if not re.fullmatch(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text):
        return None
    x = float(text)
    return x if math.isfinite(x) else None


def number_bits(x: float | None) -> bytes | None:
    return None if x is None else struct.pack("<d", x)


def assert_numbers_read_as_float_does(cases) -> None:
    for text in cases:
        expect = number_bits(pure_number(text))
        for after in AFTER if len(text) <= 16 else AFTER[:2]:  # (a longer field is never read a word at a time)
            got = number_bits(c_number(text, after))
            assert got == expect, (
                f"{clip_text(text)}: C {got and struct.unpack('<d', got)[0]!r}, "
                f"float() {expect and struct.unpack('<d', expect)[0]!r} (after {after[:6]!r})"
            )


def clip_text(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:40]}...{text[-30:]} ({len(text)} characters)"


def _digit_strings(k: int) -> list[str]:
    """Mantissas of k digits: the largest, a power of ten, a 1 at each end, and digits of pi."""
    pi = "31415926535897932384626433832795028841971693993751"
    return sorted({"9" * k, "1" + "0" * (k - 1), "1" + "0" * max(0, k - 2) + "1"[: k - 1], pi[:k]})


def _every_length_cases() -> list[str]:
    """Mantissas of 1 to 24 digits, without a dot and with one at every place (".5" and "5." too), signed, with
    powers of ten about the fast path's 10^22 and past them: about its 15 digits (8 on either side of the dot for
    the word at a time) and past them."""
    cases = []
    for k in range(1, 25):
        for digits in _digit_strings(k):
            for mantissa in [digits] + [digits[:dot] + "." + digits[dot:] for dot in range(k + 1)]:
                for sign in ("", "-", "+"):
                    cases.append(sign + mantissa)
                    for e in (-25, -23, -22, -21, -16, -15, -8, -1, 0, 1, 7, 8, 15, 16, 21, 22, 23, 25):
                        cases.append(f"{sign}{mantissa}e{e}")
    return cases


def _exponent(e: int, width: int = 0) -> str:
    return f"{'-' if e < 0 else '+'}{abs(e):0{width}d}"


def _long_exponent_cases() -> list[str]:
    """Exponents of many digits, signed, with leading zeros, beside mantissas of many leading or trailing zeros
    that bring the number back within range (or not), and exponents too large for any count of digits."""
    cases = []
    shifts = (-400, -330, -325, -324, -309, -308, -23, -22, -1, 0, 1, 22, 23, 307, 308, 309, 400)
    for zeros in (0, 1, 14, 15, 21, 22, 23, 300, 308, 309, 323, 324, 325, 400, 4000, 99_999, 100_000, 200_000):
        many = zeros > 400
        for digits in (
            ("1", "123456789012345")
            if many
            else ("1", "5", "123456789012345", "1234567890123456789", "12345678901234567890123")
        ):
            for shift in (-325, -324, 0, 308, 309) if many else shifts:
                small = "0." + "0" * zeros + digits  # 10^-(zeros + 1) <= x < 10^-zeros
                big = digits + "0" * zeros  # trailing zeros
                e = zeros + shift
                cases += [f"{small}e{e}", f"{small}e{_exponent(e, zeros % 7 + 20)}", f"-{small}E{e}"]
                cases += [f"{big}e{-e}", f"{big}.{'0' * (zeros % 50)}e{_exponent(-e, 30)}", f"-{big}e{-e}"]
    # the exponents of the examples that went wrong: a count of zeros balanced against 10^6 and more
    cases += [
        "0." + "0" * 99_999 + "1e1000000",
        "0." + "0" * 199_999 + "1e2000000",
        "0." + "0" * 99_999 + "1e100000",
        "0." + "0" * 99_999 + "1e100001",
        "0." + "0" * 99_999 + "1e99999",
        "1" + "0" * 100_000 + "e-1000000",
        "1" + "0" * 100_000 + "e-100000",
        "1" + "0" * 100_000 + "e-99999",
    ]
    for e in (
        "99999",
        "100000",
        "100001",
        "999999999",
        "1000000000",
        "1000000001",
        "2147483647",
        "2147483648",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551616",
        "9" * 40,
    ):
        for mantissa in ("1", "0", "0.000", "-0", "123456789012345678901234567890", "0." + "0" * 400 + "1"):
            cases += [f"{mantissa}e{e}", f"{mantissa}e-{e}", f"{mantissa}e+{e}", f"{mantissa}E+000{e}"]
    cases += [
        "1e+000000000000000001",
        "1e-0000000000000000000000000000000000000022",
        "1e" + "0" * 60 + "308",
        "1e" + "0" * 60 + "309",
        "1e-" + "0" * 60 + "324",
        "5e-" + "0" * 60 + "324",
    ]
    return cases


EDGE_NUMBERS = [
    # zeros and signs
    "0",
    "-0",
    "+0",
    "0.",
    "-0.",
    ".0",
    "-.0",
    "+.0",
    "0.0",
    "-0.0",
    "00",
    "-00",
    "000.000",
    "-0e0",
    "-0e999999",
    "-0.000e-99999999999",
    "0e99999999999999999999",
    # the grammar's corners
    ".5",
    "-.5",
    "+.5",
    "5.",
    "-5.",
    "+5.",
    "5.e3",
    ".5e-3",
    "00012.5000",
    "1E5",
    "1e+5",
    "1e-5",
    # 19 and 20 digits about the fast path's 15 and the 64 bits of the mantissa
    "9999999999999999999",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999e-5",
    "1844674407370955161.5",
    "0.18446744073709551616e20",
    "9007199254740992",
    "9007199254740993",
    "9007199254740995",
    "900719925474099.3",
    "999999999999999",
    "999999999999999e22",
    "999999999999999e-22",
    "9999999999999999",
    "9999999999999999e22",
    "0.1000000000000000055511151231257827",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.00000000000000011102230246251565404236316680908203124",
    "1.00000000000000011102230246251565404236316680908203126",
    # near the largest double and the smallest subnormal
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "1.7976931348623159e308",
    "-1.7976931348623159e308",
    "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286"
    "4166928879109465555478519404026306574886715058206819089020007083836762738548458177115317644757302700698555713"
    "669596228429148198608349364752927190741684443655107043427115596995080930428801779041744977920",
    "1e308",
    "1e309",
    "2.2250738585072011e-308",
    "2.2250738585072012e-308",
    "2.2250738585072014e-308",
    "4.9406564584124654e-324",
    "4.9e-324",
    "5e-324",
    "2.4703282292062327e-324",
    "2.4703282292062328e-324",
    "-2.4703282292062328e-324",
    "2.47032822920623272e-324",
    "1e-323",
    "1e-324",
    "-1e-324",
    "1e-400",
    "3e-324",
    "7.4e-324",
    "7.5e-324",
    # long mantissas
    "1" * 300,
    "1" * 30 + "e-30",
    "1" * 800 + "e-800",
    "0." + "9" * 800,
    "1" + "0" * 400 + "1" + "e-401",
    "0." + "0" * 400 + "1",
    "9" * 310,
    "9" * 309 + "e-1",
    "0." + "0" * 330 + "1" + "0" * 500 + "e330",
    # not numbers, or not finite: the line reader's to refuse
    "",
    "+",
    "-",
    ".",
    "+.",
    "-.",
    "e5",
    ".e5",
    "1e",
    "1e+",
    "1e-",
    "1e+-5",
    "1.2.3",
    "--1",
    "+-1",
    "1e5.5",
    " 1",
    "1 ",
    "0x10",
    "1_0",
    "1,5",
    "12a",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "Infinity",
    "1e999",
    "-1e999",
    "\u0661",
]


@widths
def test_the_number_parser_reads_edge_cases_as_float_does():
    assert_numbers_read_as_float_does(EDGE_NUMBERS)


@widths
def test_the_number_parser_reads_every_length_and_place_of_the_dot_as_float_does():
    assert_numbers_read_as_float_does(_every_length_cases())


@widths
def test_the_number_parser_reads_long_exponents_and_long_runs_of_zeros_as_float_does():
    """The exponent counted in full (or the number left to strtod): an exponent of a million beside as many zeros
    is no longer read as if it stopped at 100,000 (1.0 for what float() reads as inf)."""
    assert_numbers_read_as_float_does(_long_exponent_cases())
    assert c_number("0." + "0" * 99_999 + "1e1000000", b"") is None
    assert c_number("0." + "0" * 99_999 + "1e100000", b"") == 1.0


@st.composite
def number_text(draw) -> str:
    """Decimal text of any shape: a sign, digits (leading and trailing zeros), a dot, an exponent of up to 25
    digits with leading zeros; now and then a character out of place."""
    digit_run = st.one_of(
        st.text("0123456789", max_size=25),
        st.tuples(st.integers(0, 400), st.text("0123456789", max_size=20), st.integers(0, 400)).map(
            lambda t: "0" * t[0] + t[1] + "0" * t[2]
        ),
    )
    text = draw(st.sampled_from(["", "", "-", "+"])) + draw(digit_run)
    if draw(st.booleans()):
        text += "." + draw(digit_run)
    if draw(st.booleans()):
        e = draw(st.one_of(st.integers(0, 30), st.integers(0, 400), st.integers(0, 10**6), st.integers(0, 10**25)))
        text += (
            draw(st.sampled_from("eE")) + draw(st.sampled_from(["", "+", "-"])) + "0" * draw(st.integers(0, 3)) + str(e)
        )
    if draw(st.integers(0, 20)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from([".", "e", "-", "x", " ", "\u0663"])) + text[at:]
    return text


@widths
@PROPERTY
@given(text=number_text())
def test_the_number_parser_reads_generated_text_as_float_does(text):
    assert_numbers_read_as_float_does([text])


@widths
def test_the_table_carries_the_hashes_once(folder):
    """The first pair_hashes takes the C reader's keys; a second one computes them again, alike."""
    path = _write(folder, b"q1 Q0 7 1 2 t\nq1 Q0 x 2 1 t\nq2 Q0 7 1 2 t\n")
    table = readers_trec._trec_native(path, "run", True)
    made = table.read_pair_keys
    first = hashing.pair_hashes(table)
    assert first is made and table.read_pair_keys is None
    assert hashing.pair_hashes(table).tolist() == first.tolist() == numpy_pair_keys(table).tolist()


# --------------------------------------------------------------------------- the join's and the kernel's C passes

from ndcg_mlflow import join as join_module  # noqa: E402
from ndcg_mlflow import kernel as kernel_module  # noqa: E402
from ndcg_mlflow.join import string_ranks  # noqa: E402

CK = kernel_module.native_kernel()
needs_ckernel = pytest.mark.skipif(CK is None, reason="ckernel.c is not built")


@needs_ckernel
@PROPERTY
@given(codes=st.lists(st.integers(0, 6), max_size=60), q_map=st.lists(st.integers(-1, 5), min_size=7, max_size=7))
def test_map_codes_is_numpys_gather(codes, q_map):
    codes_a, map_a = np.array(codes, dtype=np.int32), np.array(q_map, dtype=np.int32)
    out = np.empty(len(codes), dtype=np.int32)
    unmapped = CK.map_codes(codes_a, map_a, out)
    assert out.tolist() == map_a[codes_a].tolist() and unmapped == int((map_a[codes_a] < 0).sum())


# keys from a few top 16-bit prefixes and a few low bits: run keys equal to judged ones, sharing their prefixes
# (top 22 bits, or only the top 16) without being equal, and elsewhere
PROBE_KEYS = st.builds(
    lambda top, mid, low: (top << 48) | (mid << 42) | low,
    st.sampled_from([0, 1, 7, 0xFFFF]),
    st.integers(0, 2),
    st.sampled_from([0, 1, 2, 2**42 - 1]),
) | st.integers(0, 2**64 - 1)


@needs_ckernel
@PROPERTY
@given(judged=st.sets(PROBE_KEYS, max_size=12), keys=st.lists(PROBE_KEYS, max_size=60))
def test_probe_finds_the_keys_numpy_finds(judged, keys):
    """The rows whose key is a judged key, and where it is among them: numpy's isin and searchsorted."""
    sorted_keys = np.array(sorted(judged), dtype=np.uint64)
    keys_a = np.array(keys, dtype=np.uint64)
    shift = np.uint64(64 - join_module.PAIR_FILTER_BITS)
    flags = np.zeros(1 << join_module.PAIR_FILTER_BITS, dtype=bool)
    flags[sorted_keys >> shift] = True
    bits, starts = join_module.probe_tables(sorted_keys, flags)
    rows, at = np.empty(len(keys), dtype=np.int64), np.empty(len(keys), dtype=np.int64)
    n = CK.probe(keys_a, bits, int(shift), sorted_keys, starts, rows, at)
    expect = np.flatnonzero(np.isin(keys_a, sorted_keys))
    assert rows[:n].tolist() == expect.tolist()
    assert at[:n].tolist() == np.searchsorted(sorted_keys, keys_a[expect]).tolist()


def test_probe_refuses_tables_of_the_wrong_size():
    keys = np.zeros(3, dtype=np.uint64)
    sorted_keys = np.array([5], dtype=np.uint64)
    flags = np.zeros(1 << join_module.PAIR_FILTER_BITS, dtype=bool)
    bits, starts = join_module.probe_tables(sorted_keys, flags)
    out = np.empty(3, dtype=np.int64)
    for args in (
        (bits[:-1], 42, sorted_keys, starts),
        (bits, 42, sorted_keys, starts[:-1]),
        (bits, 49, sorted_keys, starts),
        (bits, 42, sorted_keys[:0], starts),
    ):
        with pytest.raises(ValueError):
            CK.probe(keys, *args, out, out.copy())


def _numpy_rank_check(query, score):
    change = query[1:] != query[:-1]
    heads = query[np.r_[0, np.flatnonzero(change) + 1]]
    if not ((np.bincount(heads) <= 1).all() and not np.any(~change & (score[1:] > score[:-1]))):
        return None
    return np.flatnonzero(~change & (score[1:] == score[:-1])).tolist()


@needs_ckernel
@PROPERTY
@given(
    blocks=st.lists(
        st.tuples(
            st.integers(0, 5), st.lists(st.sampled_from([3.0, 2.0, 2.0, 1.0, -0.0, 0.0]), min_size=1, max_size=6)
        ),
        min_size=1,
        max_size=6,
    ),
    descending=st.booleans(),
)
def test_rank_check_is_numpys(blocks, descending):
    """Queries in blocks (repeated or not), scores sorted descending (or as drawn): the same verdict and ties."""
    query = np.array([q for q, s in blocks for _ in s], dtype=np.int32)
    score = np.array([x for _, s in blocks for x in (sorted(s, reverse=True) if descending else s)])
    tied, starts = np.empty(query.size, dtype=np.int64), np.empty(6, dtype=np.int64)
    n, n_blocks = CK.rank_check(query, score, 6, tied, starts)
    expect = _numpy_rank_check(query, score)
    assert (n < 0 and expect is None) or tied[:n].tolist() == expect
    if n >= 0:
        assert starts[:n_blocks].tolist() == np.flatnonzero(np.r_[True, query[1:] != query[:-1]]).tolist()


@needs_ckernel
@PROPERTY
@given(
    groups=st.lists(
        st.lists(st.sampled_from(["a", "b", "ab", "", "é", "z", "a\x00", "10", "9", "ä"]), min_size=1, max_size=40),
        min_size=1,
        max_size=8,
    ),
    descending=st.booleans(),
)
def test_group_order_is_lexsort_of_string_ranks(groups, descending):
    """Groups of up to 40 strings (the merge sort beyond 16), equal strings included."""
    values = pa.array([s for g in groups for s in g], type=pa.string())
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    group = np.repeat(np.arange(sizes.size), sizes)
    ranks = string_ranks(values)
    order = np.lexsort((-ranks if descending else ranks, group))
    place = np.empty(len(values), dtype=np.int64)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1)
    CK.group_order(offsets, values.buffers()[2] or b"", sizes, descending, place)
    got = np.empty_like(order)
    got[np.repeat(np.cumsum(sizes) - sizes, sizes) + place] = np.arange(len(values))
    assert got.tolist() == order.tolist()


@st.composite
def scored_runs(draw) -> tuple[dict, dict]:
    queries = [f"q{i}" for i in range(draw(st.integers(1, 4)))]
    docs = [f"d{i}" for i in range(8)] + ["D", "é", "10", "9"]
    ranking = {}
    for q in queries:
        picked = draw(st.lists(st.sampled_from(docs), unique=True, min_size=1, max_size=10))
        scores = draw(st.lists(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0]), min_size=len(picked), max_size=len(picked)))
        if draw(st.booleans()):
            scores = sorted(scores, reverse=True)  # (in order: the kernel's pass without a sort)
        ranking[q] = list(zip(picked, scores))
    judgments = {
        q: {
            d: draw(st.integers(0, 3))
            for d in draw(st.lists(st.sampled_from(docs), unique=True, min_size=1, max_size=6))
        }
        for q in queries
    }
    return judgments, ranking


@PROPERTY
@given(
    case=scored_runs(),
    ties=st.sampled_from(["displayed_order", "id_ascending", "id_descending", "average"]),
    unjudged=st.sampled_from(["zero", "condense"]),
)
def test_an_evaluation_gives_the_same_numbers_with_and_without_the_c_parts(tmp_path_factory, case, ties, unjudged):
    """Bit for bit, every per-query number and status, under every tie rule."""
    from helpers import metric_spec, write_qrels, write_run

    import ndcg_mlflow

    judgments, ranking = case
    folder = tmp_path_factory.mktemp("both")
    qrels, run = write_qrels(folder, judgments), write_run(folder, ranking)
    spec = metric_spec(qrels, run, name="both", cutoffs=(1, 3, "all"), ties=ties, unjudged=unjudged, gain="linear")
    tables = []
    for pure in ("", "1"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("NDCG_MLFLOW_PURE_PYTHON", pure)
            table = ndcg_mlflow.evaluate(spec, base_dir=folder).per_query
        tables.append(table.to_dict("list"))
    for column in tables[0]:
        a, b = tables[0][column], tables[1][column]
        if isinstance(a[0], float):
            assert bits(np.array(a, dtype=float)) == bits(np.array(b, dtype=float)), column
        else:
            assert a == b, column


@PROPERTY
@given(
    ids=st.lists(st.sampled_from(["q1", "q2", "", "q10", "é", "q1\x00"]), min_size=1, max_size=40),
    cut=st.integers(0, 5),
)
def test_run_starts_and_fill_runs_encode_ids_as_numpy_does(ids, cut):
    """A (sliced) Arrow string column's run starts and codes, in C and in numpy: the same Ids."""
    from ndcg_mlflow.readers.table import encode_ids, string_buffers

    column = pa.array(["pad"] * cut + ids, type=pa.string()).slice(cut)
    found = np.empty(len(ids), dtype=np.int64)
    _, offsets, data = string_buffers(column)
    k = FAST.run_starts(offsets, data, found)
    expect = [i for i in range(len(ids)) if i == 0 or ids[i] != ids[i - 1]]
    assert found[:k].tolist() == expect
    native = encode_ids(column)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
        pure = encode_ids(column)
    assert native.codes.tolist() == pure.codes.tolist() and list(native.values) == list(pure.values)
    assert [native.values[c] for c in native.codes] == ids


@PROPERTY
@given(codes=st.lists(st.integers(0, 4), max_size=50), seed=st.integers(0, 2**32 - 1))
def test_mix_pairs_is_numpys_xor(codes, seed):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**63, size=len(codes), dtype=np.uint64)
    mix = rng.integers(0, 2**63, size=5, dtype=np.uint64)
    codes_a = np.array(codes, dtype=np.int32)
    expect = keys ^ mix[codes_a]
    before = keys.copy()
    FAST.mix_pairs(keys, codes_a, mix)
    assert keys.tolist() == expect.tolist()
    # with a map of the codes: the codes mapped in place first, then the keys mixed by the mapped codes
    q_map = rng.permutation(5).astype(np.int32)
    FAST.mix_pairs(before, codes_a, mix, q_map)
    assert codes_a.tolist() == q_map[np.array(codes, dtype=np.int32)].tolist()
    assert before.tolist() == (keys ^ mix[np.array(codes, dtype=np.int32)] ^ mix[codes_a]).tolist()
    one = np.zeros(1, dtype=np.uint64)
    with pytest.raises(ValueError):  # a code outside the map
        FAST.mix_pairs(one, np.array([5], dtype=np.int32), mix, q_map)
    with pytest.raises(ValueError):  # a mapped code outside the mix
        FAST.mix_pairs(one, np.array([0], dtype=np.int32), mix, np.array([7], dtype=np.int32))


def test_a_file_that_cannot_be_mapped_is_read_by_arrows_reader(folder, monkeypatch):
    import mmap

    path = _write(folder, b"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\n")

    def refuse(*args, **kwargs):
        raise OSError("no mmap here")

    monkeypatch.setattr(mmap, "mmap", refuse)
    table = readers_trec.read_trec(path, "run", True)
    assert table.doc.array.to_pylist() == ["d1", "d2"] and table.value.tolist() == [2.5, 1.5]
    assert table.read_pair_keys is None  # (not the C reader's table)


@widths
@PROPERTY
@given(data=st.binary(max_size=200), start=st.integers(0, 200), stop=st.integers(0, 200))
def test_count_lines_counts_the_line_feeds(data, start, stop):
    start, stop = min(start, len(data)), min(max(start, stop), len(data))
    assert FAST.count_lines(data, start, stop) == data[start:stop].count(b"\n")


def _python_repeats(keys: list[int], codes: list[int], start: int, stop: int) -> bool:
    """Whether some key occurs twice among the rows of one run of equal codes in rows [start, stop)."""
    seen: set[tuple[int, int]] = set()  # (run, key)
    run = 0
    for i in range(start, stop):
        if i > start and codes[i] != codes[i - 1]:
            run += 1
        if (run, keys[i]) in seen:
            return True
        seen.add((run, keys[i]))
    return False


@PROPERTY
@given(
    runs=st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 6), min_size=1, max_size=40)), max_size=12),
    spread=st.booleans(),
    start=st.integers(0, 300),
    stop=st.integers(0, 300),
)
def test_repeats_finds_a_key_twice_in_a_run_of_equal_codes_as_a_set_does(runs, spread, start, stop):
    """Keys from a small alphabet (0 among them: the table's empty mark), or spread over 64 bits so that they
    share the table's slots only by probing; codes that come back after other codes are other runs."""
    codes = [c for c, ks in runs for _ in ks]
    small = [k for _, ks in runs for k in ks]
    keys = [k * 0x9E3779B97F4A7C15 % 2**64 if spread and k else k for k in small]
    start, stop = min(start, len(keys)), min(max(start, stop), len(keys))
    a, c = np.array(keys, dtype=np.uint64), np.array(codes, dtype=np.int32)
    assert FAST.repeats(a, c, start, stop) == int(_python_repeats(keys, codes, start, stop))


def test_repeats_leaves_a_run_beyond_its_table_to_the_caller():
    n = (1 << 20) + 1
    keys = np.arange(1, n + 2, dtype=np.uint64)
    codes = np.zeros(n + 1, dtype=np.int32)
    codes[-1] = 1
    assert FAST.repeats(keys, codes, 0, n + 1) == -1
    assert FAST.repeats(keys, codes, n, n + 1) == 0  # the run of one row after it
    keys[3] = keys[2]
    assert FAST.repeats(keys, codes, 0, n - 1) == 1  # a run within the limit
    with pytest.raises(ValueError):
        FAST.repeats(keys, codes[:-1], 0, 1)
    with pytest.raises(ValueError):
        FAST.repeats(keys, codes, 2, 1)
    with pytest.raises(ValueError):
        FAST.repeats(keys, codes, 0, n + 2)


def test_repeats_takes_a_smaller_limit_of_rows():
    keys = np.arange(1, 11, dtype=np.uint64)
    codes = np.repeat(np.array([0, 1], dtype=np.int32), [4, 6])
    assert FAST.repeats(keys, codes, 0, 10, 6) == 0
    assert FAST.repeats(keys, codes, 0, 10, 5) == -1  # the second query's 6 rows
    keys[1] = keys[0]
    assert FAST.repeats(keys, codes, 0, 10, 5) == 1  # (found in the first query, before the long one)


@PROPERTY
@given(source=st.binary(max_size=40), ranges=st.lists(st.tuples(st.integers(0, 45), st.integers(0, 10)), max_size=8))
def test_copy_ranges_copies_each_range_or_refuses_one_outside(source, ranges):
    """Each range's bytes land where they are asked to, as Python's slicing copies them; a range beyond the source
    or the destination is refused before anything is copied."""
    starts = np.array([s for s, _ in ranges], dtype=np.int64)
    lengths = np.array([n for _, n in ranges], dtype=np.int64)
    at = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if ranges else np.zeros(0, np.int64)
    dest = bytearray(b"\xff" * int(lengths.sum()))
    if any(s + n > len(source) for s, n in ranges):
        with pytest.raises(ValueError):
            FAST.copy_ranges(source, starts, lengths, dest, at)
        assert dest == bytearray(b"\xff" * len(dest))
        return
    FAST.copy_ranges(source, starts, lengths, dest, at)
    assert bytes(dest) == b"".join(source[s : s + n] for s, n in ranges)
    if ranges and lengths[-1]:
        with pytest.raises(ValueError):  # the last range one byte further than the destination holds
            FAST.copy_ranges(source, starts, lengths, dest, at + 1)


_CUT_SHORT = r"""
import mmap, os, sys
import numpy as np
from ndcg_mlflow.readers import cparse

path, mode = sys.argv[1], sys.argv[2]
if mode == "faulthandler":
    import faulthandler
    faulthandler.enable()
line = b"q1 Q0 d1 1 1.5 x\n"
with open(path, "wb") as fh:
    fh.write(line * 100_000)
fh = open(path, "rb")
mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
size = len(mm)
os.truncate(path, 4096)  # the pages after the first are gone from the mapping


def parse(stop):
    n = 100_000
    return cparse.parse_trec(mm, 0, stop, False, False, np.empty(n, np.int32), bytearray(4 * (n + 1)),
                             bytearray(size), np.empty(n), None, np.empty(n, np.uint64))


for call in (lambda: cparse.count_lines(mm, 0, size), lambda: parse(size)):
    try:
        call()
        print("no error")
    except cparse.FileCutShort as exc:
        print("cut short", isinstance(exc, OSError), exc)
whole = 4096 - 4096 % len(line)
print("then", cparse.count_lines(mm, 0, whole), parse(whole)[:2])
if mode != "guarded":
    sys.stdout.flush()
    mm[size - 1]  # a fault outside the guarded calls
    print("survived")
"""


@pytest.mark.parametrize("mode", ["guarded", "unguarded", "faulthandler"])
def test_a_mapping_cut_short_ends_a_guarded_call_with_an_error_and_any_other_fault_as_before(tmp_path, mode):
    """A file truncated while mapped: count_lines and parse_trec, reading past its new end, raise FileCutShort (an
    OSError) and leave the process working; a fault outside them still ends the process by SIGBUS, after
    faulthandler's traceback where it is enabled (the handler there was before is kept)."""
    import signal
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _CUT_SHORT, str(tmp_path / "cut.run"), mode], capture_output=True, text=True, timeout=120
    )
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["cut short True the mapped file was cut short while it was read"] * 2 + [
        "then 240 (0, 240)"
    ], proc.stdout + proc.stderr
    if mode == "guarded":
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == -signal.SIGBUS and "survived" not in proc.stdout
        assert ("Bus error" in proc.stderr) is (mode == "faulthandler"), proc.stderr


@pytest.mark.parametrize("change", ["truncated", "touched"])
def test_a_run_file_changed_while_the_c_reader_reads_it_is_refused_naming_it(folder, monkeypatch, change):
    """Cut short during the parse (the C calls' fault is the error), or rewritten in place (its modification time
    moved on by the end): a DataError naming the file, not a process ended by SIGBUS nor rows of two versions."""
    import dataclasses
    import os

    path = _write(
        folder, b"".join(b"q%d Q0 d%d %d %d.5 t\n" % (i // 50, i, i % 50 + 1, 60 - i % 50) for i in range(20_000))
    )
    real = readers_trec.native_reader()
    cut = []

    def count_lines(data, start, stop):
        if change == "truncated" and not cut:
            cut.append(True)
            os.truncate(path, 4096)
        return real.count_lines(data, start, stop)

    def parse_trec(*args):
        out = real.parse_trec(*args)
        if change == "touched":
            st = os.stat(path)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        return out

    monkeypatch.setattr(
        readers_trec, "native_reader", lambda: dataclasses.replace(real, count_lines=count_lines, parse_trec=parse_trec)
    )
    with pytest.raises(DataError, match="changed while it was read") as err:
        readers_trec._trec_native(path, "run", True, part_size=1 << 12)
    assert str(path.name) in str(err.value)
