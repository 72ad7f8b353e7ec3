"""One corpus of hostile input, fed to every reader and engine: each case is the bytes of a run or qrels file (TREC,
CSV or JSONL) and, where a table can hold the same rows, those rows as an in-memory table.

Every path must give the same outcome: read, with the same per-query numbers (bit for bit), or refused, with the
same words (:mod:`ndcg_mlflow.readers.accept`'s), the place aside (a file's line, a table's row, Spark's count of
rows and example). The paths: the C reader at each vector width it has and in its scalar code, Arrow's readers
(no C reader), the line reader (``NDCG_MLFLOW_LINE_READER``), the file gzipped (read as a stream), a TREC file
with lines after the case's (so that the C reader reads every line of the case through its vector windows),
pandas and pyarrow tables; and, marked ``integration``, Spark (one ``local[1]`` session): the files it reads in a
task, its checks of a run DataFrame, and of judgments kept in Spark. A difference is a bug of the shared rules,
not a tolerance.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import ndcg_mlflow
from ndcg_mlflow.errors import DataError
from ndcg_mlflow.readers.text import native_reader

# the base data: judgments (query, doc, grade) and a run (query, doc, rank, score) that is not the ideal ranking
QRELS = [("q1", "d1", 2.0), ("q1", "d2", 1.0), ("q1", "d3", 0.0), ("q2", "d1", 1.0), ("q2", "d4", 3.0)]
RUN = [("q1", "d2", 1, 3.0), ("q1", "d1", 2, 2.0), ("q1", "d5", 3, 1.0), ("q2", "d4", 1, 2.0), ("q2", "d1", 2, 1.0)]
NAMES = {"run": ("query_id", "doc_id", "rank", "score"), "qrels": ("query_id", "doc_id", "grade")}

SPEC = {
    "spec_version": 1,
    "name": "hostile-corpus",
    "metric": {
        "gain": "linear",
        "cutoffs": [2, "all"],
        "discount": "log2",
        "ties": "displayed_order",  # (every reader then reads the rank, TREC's too)
        "ideal": "judged_catalog",
        "empty_ideal": "exclude",
        "unjudged": "zero",
        "missing_queries": "zero",
    },
    "queries": {"weights": "uniform"},
    "uncertainty": {"resamples": 100, "confidence": 0.9, "method": "percentile", "seed": 1},
}


# --------------------------------------------------------------------------- the rows in each format


def _text(x: Any) -> str:
    """A cell as a text file writes it (a float as repr writes it: nan, inf, 2.5)."""
    return repr(x) if isinstance(x, float) else str(x)


def trec(rows: list[tuple], kind: str) -> bytes:
    lines = [f"{q} Q0 {d} {_text(r)} {_text(s)} t" for q, d, r, s in rows] if kind == "run" else []
    lines += [f"{q} 0 {d} {_text(g)}" for q, d, g in rows] if kind == "qrels" else []
    return "".join(line + "\n" for line in lines).encode()


def csv(rows: list[tuple], kind: str) -> bytes:
    def cell(x: Any) -> str:
        text = _text(x)
        return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"') else text

    return "".join(",".join(map(cell, r)) + "\n" for r in [NAMES[kind], *rows]).encode()


def jsonl(rows: list[tuple], kind: str) -> bytes:
    return "".join(json.dumps(dict(zip(NAMES[kind], r))) + "\n" for r in rows).encode()


def table(rows: list[tuple], kind: str) -> pa.Table:
    types = [pa.string(), pa.string()] + [pa.float64()] * (len(NAMES[kind]) - 2)
    return pa.table({n: pa.array(list(c), type=t) for n, c, t in zip(NAMES[kind], zip(*rows), types)})


# --------------------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Case:
    """One hostile input: ``data``, the bytes of the ``kind`` file named ``name`` (its suffix is its format; the
    other file is the base's); ``rows``, the same rows as a table, where a table holds them. Refused when
    ``refused`` (words of the message) is given, naming ``line`` of the file (and row ``row`` of the table).
    ``like_base``: read as the base data. ``spark``: also through Spark."""

    case: str
    kind: str
    name: str
    data: bytes
    rows: list[tuple] | None = None
    refused: str | None = None
    line: int | None = None
    row: int | None = None
    like_base: bool = False
    spark: bool = False


def rows_cases(case: str, kind: str, rows: list[tuple], formats: str = "trec csv jsonl", **kw: Any) -> list[Case]:
    """The case's rows as each format's file (and a table): ``row``, when refused, is the row at fault (the line
    of a TREC or JSONL file, the line after the header of a CSV)."""
    out = []
    spark = kw.pop("spark", False)
    for fmt in formats.split():
        render, suffix, header = {"trec": (trec, "txt", 0), "csv": (csv, "csv", 1), "jsonl": (jsonl, "jsonl", 0)}[fmt]
        line = kw["row"] + header if kw.get("row") else None
        data = render(rows, kind)
        out.append(Case(f"{case}-{fmt}", kind, f"{kind}.{suffix}", data, rows, line=line, spark=spark, **kw))
        spark = False  # (Spark reads the first format only: its tasks read every text file with the same readers)
    return out


def edit(rows: list[tuple], at: int, **change: Any) -> list[tuple]:
    """The rows with row ``at`` (1-based) changed (``doc=``, ``score=``, ``rank=``, ``grade=``, ``query=``)."""
    fields = {"run": ("query", "doc", "rank", "score"), "qrels": ("query", "doc", "grade")}[
        "run" if len(rows[0]) == 4 else "qrels"
    ]
    out = list(rows)
    out[at - 1] = tuple(change.get(f, v) for f, v in zip(fields, rows[at - 1]))
    return out


BASE = {"run": trec(RUN, "run"), "qrels": trec(QRELS, "qrels")}
CSV = {"run": csv(RUN, "run"), "qrels": csv(QRELS, "qrels")}
JSONL = {"run": jsonl(RUN, "run"), "qrels": jsonl(QRELS, "qrels")}


def changed(case: str, kind: str, old: bytes, new: bytes, fmt: str = "txt", **kw: Any) -> Case:
    """The base ``kind`` file in format ``fmt`` (txt: TREC, csv, jsonl) with the bytes ``old`` (once in it) made
    ``new``."""
    data = {"txt": BASE, "csv": CSV, "jsonl": JSONL}[fmt][kind]
    assert data.count(old) == 1, (case, old)
    return Case(case, kind, f"{kind}.{fmt}", data.replace(old, new), **kw)


def every(case: str, kind: str, old: bytes, new: bytes, **kw: Any) -> Case:
    """The base ``kind`` TREC file with every ``old`` made ``new``."""
    return Case(case, kind, f"{kind}.txt", BASE[kind].replace(old, new), **kw)


NAN, INF = float("nan"), float("inf")
CR = "carriage return"
FINITE = "must be a finite number"
NUMBER = "must be a number"
R, Q = "run", "qrels"

CORPUS: list[Case] = [
    # the same rows in every format and as a table
    *rows_cases("base", R, RUN, like_base=True, spark=True),
    *rows_cases("base", Q, QRELS, like_base=True, spark=True),
    *rows_cases("nan-score", R, edit(RUN, 3, score=NAN), refused=f"score {FINITE}, got nan", row=3, spark=True),
    *rows_cases("inf-score", R, edit(RUN, 4, score=-INF), refused=f"score {FINITE}, got -inf", row=4),
    *rows_cases("fraction-rank", R, edit(RUN, 2, rank=2.5), refused="rank must be an integer, got 2.5", row=2),
    *rows_cases("nan-rank", R, edit(RUN, 2, rank=NAN), refused=f"rank {FINITE}, got nan", row=2, spark=True),
    # a row's rank before its score; the first row at fault before a later one, whatever its problem
    *rows_cases("nan-rank-and-score", R, edit(RUN, 2, rank=NAN, score=INF), refused="rank", row=2),
    *rows_cases("late-rank", R, edit(edit(RUN, 4, rank=NAN), 2, score=NAN), refused="score", row=2),
    *rows_cases("fraction-then-nan", R, edit(edit(RUN, 1, rank=1.5), 4, score=NAN), refused="score", row=4),
    *rows_cases("twice", R, edit(RUN, 5, doc="d4"), refused="'d4' is listed twice", row=5, spark=True),
    *rows_cases("empty-doc", R, edit(RUN, 3, doc=""), "csv jsonl", refused="doc_id is empty", row=3, spark=True),
    *rows_cases("empty-query", Q, edit(QRELS, 2, query=""), "csv jsonl", refused="query_id is empty", row=2),
    *rows_cases("empty-doc-late", R, edit(edit(RUN, 4, doc=""), 2, score=NAN), "csv jsonl", refused="score", row=2),
    *rows_cases("null-score", R, edit(RUN, 3, score=None), "jsonl", refused="score is null", row=3, spark=True),
    *rows_cases("null-doc", R, edit(RUN, 2, doc=None), "jsonl", refused="doc_id is null", row=2),
    *rows_cases("judged-twice", Q, edit(QRELS, 4, doc="d4"), refused="judged twice", row=5, spark=True),
    *rows_cases("nan-grade", Q, edit(QRELS, 2, grade=NAN), refused=f"grade {FINITE}, got nan", row=2, spark=True),
    *rows_cases("null-grade", Q, edit(QRELS, 4, grade=None), "jsonl", refused="grade is null", row=4, spark=True),
    *rows_cases("judged-again", Q, [*QRELS, QRELS[0]], like_base=True),
    *rows_cases("float-negative-grades", Q, edit(edit(QRELS, 1, grade=-1.0), 5, grade=2.5)),
    *rows_cases("unicode-spaces-in-ids", R, edit(edit(RUN, 1, doc="d\u00a02"), 4, query="q\u20022"), spark=True),
    *rows_cases("numeric-looking-ids", R, edit(edit(RUN, 2, doc="007"), 3, doc="7")),
    *rows_cases("long-id", R, edit(RUN, 3, doc="x" * 70_000)),
    *rows_cases("spaces-quotes-commas", R, edit(edit(RUN, 1, doc="d 2"), 2, doc='a,"b"'), "csv jsonl"),
    *rows_cases("tiny-and-huge-numbers", R, edit(edit(RUN, 1, score=5e-324), 2, score=1.7976931348623157e308)),
    # files: line ends, bytes, blanks and fields, numbers as text, headers
    every("crlf", R, b"\n", b"\r\n", like_base=True, spark=True),
    Case("bom", R, "run.txt", b"\xef\xbb\xbf" + BASE[R], like_base=True, spark=True),
    Case(
        "bom-short-line",
        R,
        "run.txt",
        b"\xef\xbb\xbf" + BASE[R].replace(b"d5 3 1.0", b"d5 3"),
        refused="6 fields",
        line=3,
    ),
    Case("bom-crlf", Q, "qrels.txt", b"\xef\xbb\xbf" + BASE[Q].replace(b"\n", b"\r\n"), like_base=True),
    every("tabs-and-spaces", R, b" Q0 ", b"\t Q0\t\t", like_base=True),
    every("trailing-blanks", R, b"\n", b" \t\n", like_base=True),
    Case("blank-lines", Q, "qrels.txt", b"\n \t\n" + BASE[Q].replace(b"\n", b"\n\t \n"), like_base=True),
    every("fields-after-the-tag", R, b" t\n", b" t more fields\n", like_base=True, spark=True),
    Case("no-last-line-end", R, "run.txt", BASE[R][:-1], like_base=True),
    every("numbers-as-text", R, b" 3.0 ", b" +3E0 ", like_base=True),
    every("numbers-as-text-2", Q, b" 1.0\n", b" .1e1\n", like_base=True),
    every("cr-only", R, b"\n", b"\r", refused=CR, line=1, spark=True),
    changed("stray-cr", R, b"d5 3", b"d5\r3", refused=CR, line=3, spark=True),
    every("cr-cr-lf", Q, b"\n", b"\r\r\n", refused=CR, line=1, spark=True),
    Case("cr-at-the-end", R, "run.txt", BASE[R][:-1] + b"\r", refused=CR, line=5),
    changed("not-utf8", R, b"d5", b"d\xe95", refused="not UTF-8", line=3, spark=True),
    changed("not-utf8-qrels", Q, b"d4", b"d\xff4", refused="not UTF-8", line=5, spark=True),
    changed("not-utf8-judged-doc", R, b"d1 2 2.0", b"d1\xff 2 2.0", refused="not UTF-8", line=2),
    # the first line at fault, whatever its problem (the C reader checks UTF-8 after a range's fields)
    changed(
        "utf8-then-fields", R, b"d1 2 2.0 t\nq1 Q0 d5 3 1.0 t", b"d\xe91 2 2.0 t\nq1 Q0 d5", refused="UTF-8", line=2
    ),
    changed("fields-then-utf8", R, b"d1 2 2.0 t\nq1 Q0 d5", b"d1\nq1 Q0 d\xe95", refused="6 fields", line=2),
    changed("utf8-in-a-short-line", R, b"d5 3 1.0 t", b"d\xe95", refused="not UTF-8", line=3),
    changed("cr-in-a-bad-utf8-line", R, b"d5 3", b"d\xe95\r3", refused=CR, line=3),
    changed("short-line", R, b"d5 3 1.0 t", b"d5 3", refused="expected 6 fields", line=3, spark=True),
    changed("five-field-qrels", Q, b"d2 1.0", b"d2 1.0 x", refused="expected 4 fields", line=2),
    changed("decimal-comma", R, b"d4 1 2.0", b"d4 1 2,0", refused=f"score {NUMBER}, got '2,0'", line=4, spark=True),
    changed("hex", Q, b"d4 3.0", b"d4 0x3", refused=f"grade {NUMBER}, got '0x3'", line=5),
    changed("underscore", R, b" 3.0 ", b" 3_0 ", refused=f"score {NUMBER}", line=1),
    changed("fullwidth-digit", R, b"d5 3", "d5 \uff13".encode(), refused=f"rank {NUMBER}", line=3),
    changed("two-signs", R, b"d5 3 1.0", b"d5 3 +-1", refused=f"score {NUMBER}", line=3),
    changed("nan-word", R, b"d5 3 1.0", b"d5 3 -NaN", refused=f"score {FINITE}, got nan", line=3),
    changed("beyond-a-double", Q, b"d4 3.0", b"d4 1e999", refused=f"grade {FINITE}, got inf", line=5),
    Case("blank-file", R, "run.txt", b"\n \t\n\r\n", refused="no data lines"),
    Case("a-header-on-trec", R, "run.txt", b"query doc rank score\n" + BASE[R], refused="like a header", line=1),
    Case("csv-cr-only", R, "run.csv", CSV[R].replace(b"\n", b"\r"), refused=CR, line=1, spark=True),
    Case("csv-bom-crlf", R, "run.csv", b"\xef\xbb\xbf" + CSV[R].replace(b"\n", b"\r\n"), like_base=True),
    Case("csv-spaces-around", R, "run.csv", CSV[R].replace(b",", b" ,\t"), like_base=True),
    changed("csv-not-utf8", Q, b"d4", b"d\xe94", "csv", refused="not UTF-8", line=6),
    changed("csv-open-quote", R, b"q1,d5", b'q1,"d5', "csv", refused="quoted field", line=4),
    changed("csv-short-row", R, b"d5,3,1.0", b"d5,3", "csv", refused="expected 4 fields", line=4),
    changed("csv-empty-score", R, b"d5,3,1.0", b"d5,3,", "csv", refused=f"score {NUMBER}, got ''", line=4),
    changed("csv-column-twice", R, b"rank,", b"score,", "csv", refused="'score' appears 2 times", line=1),
    changed("csv-no-doc-column", R, b",doc_id,", b",doc,", "csv", refused="missing column(s) doc_id", line=1),
    changed("jsonl-array", R, JSONL[R].split(b"\n")[3], b'["q2", "d4", 1, 2.0]', "jsonl", refused="object", line=4),
    changed("jsonl-key-twice", R, b'"rank": 3,', b'"rank": 3, "rank": 4,', "jsonl", refused="appears twice", line=3),
    changed("jsonl-text-score", R, b'3, "score": 1.0', b'3, "score": "1.0"', "jsonl", refused='got "1.0"', line=3),
    changed("jsonl-surrogate", R, b'"d5"', b'"d\\udc805"', "jsonl", refused="lone surrogate", line=3),
    changed("jsonl-huge-integer", Q, b'"grade": 3.0', b'"grade": ' + b"9" * 400, "jsonl", refused="got inf", line=5),
    changed("jsonl-not-utf8", R, b"d5", b"d\xe95", "jsonl", refused="not UTF-8", line=3, spark=True),
]


# --------------------------------------------------------------------------- reading a case


COLUMNS = ("query_id", "cutoff", "ndcg", "dcg", "idcg", "judged_coverage", "n_returned", "status")


def numbers(per_query: pd.DataFrame, columns: tuple[str, ...] = COLUMNS) -> list[tuple]:
    """The per-query rows of the judged queries (not the padding's ``zz``), each float as its exact hex text."""
    rows = per_query[per_query["query_id"] != "zz"][list(columns)].astype({"cutoff": str})
    rows = rows.sort_values(["query_id", "cutoff"])
    return [tuple(float(x).hex() if isinstance(x, float) else x for x in r) for r in rows.itertuples(index=False)]


def words(exc: DataError) -> str:
    """A refusal's words without its place: a table's ``row N: `` or ``['q']['d']: ``, the Spark engine's count of
    rows and example (query, document), the place of a first occurrence, the grades of a judgment given twice."""
    m = re.sub(r"^(row \d+|\[.*?\](\[.*?\])?): ", "", exc.message)
    m = re.sub(r" in \d+ rows \(e\.g\. the row of query '.*?', document '.*?'\)", "", m)
    m = re.sub(r" for query '.*?', document '.*?'", "", m)
    m = re.sub(r"(; | \()\d+ rows in all\)", lambda g: ")" if g.group(1) == "; " else "", m)
    m = re.sub(r"\((first at (line|row) \d+|\d+ repeated rows in all)\)", "(...)", m)
    return re.sub(r"judged twice with different grades \(.*\)\.$", "judged twice with different grades.", m)


def outcome(evaluate: Any, columns: tuple[str, ...] = COLUMNS) -> tuple:
    """``("read", numbers)`` or ``("refused", words, line, row)``: what an evaluation of the case gave (a grouped
    Spark evaluation's numbers: its Parquet per-query table's)."""
    try:
        result = evaluate()
    except DataError as exc:
        row = re.match(r"row (\d+): ", exc.message)
        return ("refused", words(exc), exc.line, int(row.group(1)) if row else None)
    grouped = result.per_query_path is not None
    return ("read", numbers(pd.read_parquet(result.per_query_path) if grouped else result.per_query, columns))


def vector_widths() -> list[int]:
    """The C reader's vector widths this CPU has, and 0: its scalar code."""
    fast = native_reader()
    if fast is None:
        return []
    before = fast.vector_width(None)
    widths = [width for width in (256, 128, 0) if fast.vector_width(width) == width]
    fast.vector_width(before)
    return widths


PAD = {  # 64 bytes and more after every line of the case, of a query no case judges
    "run": b"".join(b"zz Q0 pad%d %d 0 tag\n" % (i, i + 1) for i in range(6)),
    "qrels": b"".join(b"zz 0 pad%d 1\n" % i for i in range(10)),
}


def file_paths(case: Case) -> list[tuple[str, dict[str, str], int | None, str]]:
    """(path, environment, the C reader's vector width, variant of the file) of every reader of the case's file."""
    trec_file = case.name.endswith(".txt")
    paths = [("lines", {"NDCG_MLFLOW_LINE_READER": "1"}, None, "as is")]
    paths.append(("arrow", {"NDCG_MLFLOW_PURE_PYTHON": "1"}, None, "as is"))
    paths.append(("gzip", {}, None, "gzip"))
    if trec_file:
        for width in vector_widths():
            paths.append((f"c{width}", {}, width, "as is"))
            if width and case.data.endswith(b"\n") and case.case != "blank-file":
                paths.append((f"c{width}-padded", {}, width, "padded"))
    return paths


def write_case(folder: Path, case: Case, variant: str = "as is") -> dict[str, str]:
    """The case's file and the base's other file in ``folder``; the spec's data section naming them."""
    folder.mkdir(parents=True, exist_ok=True)
    name, data = case.name, case.data
    if variant == "padded":
        data += PAD[case.kind]
    elif variant == "gzip":
        name, data = name + ".gz", gzip.compress(data, mtime=0)
    (folder / name).write_bytes(data)
    other = "qrels.base.txt" if case.kind == "run" else "run.base.txt"
    (folder / other).write_bytes(BASE["qrels" if case.kind == "run" else "run"])
    return (
        {"qrels": name, "systems": {"s": other}} if case.kind == "qrels" else {"qrels": other, "systems": {"s": name}}
    )


def read_file(folder: Path, case: Case, env: dict[str, str], width: int | None, variant: str) -> tuple:
    """The outcome of the case's file read with ``env`` set and the C reader at vector ``width`` (0: its scalar
    code; None: as it is)."""
    data = write_case(folder, case, variant)
    fast = native_reader() if width is not None else None
    before = fast.vector_width(None) if fast is not None else None
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        try:
            if fast is not None:
                fast.vector_width(width)
            return outcome(lambda: ndcg_mlflow.evaluate({**SPEC, "data": data}, base_dir=folder))
        finally:
            if fast is not None:
                fast.vector_width(before)


def table_of(rows: list[tuple], kind: str, library: str) -> Any:
    """The rows as a pyarrow table, or a pandas one: numpy columns, or Arrow ones where a value is null or NaN (a
    NaN in a numpy column is pandas' own missing value, a null once pandas hands the table to Arrow)."""
    tbl = table(rows, kind)
    if library == "pyarrow":
        return tbl
    missing = any(
        c.null_count or (pa.types.is_floating(c.type) and c.is_nan().to_pylist().count(True)) for c in tbl.columns
    )
    return tbl.to_pandas(types_mapper=pd.ArrowDtype) if missing else tbl.to_pandas()


def read_table(case: Case, library: str) -> tuple:
    mine = table_of(case.rows or [], case.kind, library)
    qrels, run = (table(QRELS, "qrels"), mine) if case.kind == "run" else (mine, table(RUN, "run"))
    return outcome(lambda: ndcg_mlflow.evaluate(SPEC, qrels=qrels, systems={"s": run}))


def check_expected(case: Case, got: tuple, base: dict[str, tuple]) -> None:
    """The case's own expectation: refused with its words at its line, or read (as the base data, for
    ``like_base``)."""
    if case.refused is not None:
        assert got[0] == "refused", f"{case.case}: read, where '{case.refused}' was expected"
        assert case.refused in got[1], f"{case.case}: {got[1]}"
        assert got[2] == case.line, f"{case.case}: line {got[2]}, not {case.line}: {got[1]}"
    else:
        assert got[0] == "read", f"{case.case}: refused: {got[1]}"
        if case.like_base:
            assert got == base[case.kind], f"{case.case}: numbers other than the base data's"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, tuple]:
    """The base data's outcome (its per-query numbers), whichever file a case replaces."""
    folder = tmp_path_factory.mktemp("base")
    out = {
        kind: read_file(folder, Case("base", kind, f"{kind}.txt", BASE[kind]), {}, None, "as is")
        for kind in ("run", "qrels")
    }
    assert out["run"] == out["qrels"] and out["run"][0] == "read"
    return out


# --------------------------------------------------------------------------- every local path


@pytest.mark.parametrize("case", CORPUS, ids=[f"{c.kind}:{c.case}" for c in CORPUS])
def test_every_reader_gives_each_case_the_same_outcome(tmp_path, base, case):
    """The line reader, Arrow's readers, the C reader at each vector width and in its scalar code (and with lines
    after the case), the file gzipped, and the rows as pyarrow and pandas tables: one outcome, the case's own."""
    got = {
        path: read_file(tmp_path / path, case, env, width, variant) for path, env, width, variant in file_paths(case)
    }
    first = got["lines"]
    check_expected(case, first, base)
    for path, other in got.items():
        assert other == first, f"{case.case}: {path} gives {other}, the line reader {first}"
    if case.rows is None:
        return
    for library in ("pyarrow", "pandas"):
        tables = read_table(case, library)
        assert tables[:2] == first[:2], f"{case.case}: a {library} table gives {tables}, the file {first}"
        assert tables[0] == "read" or tables[3] == case.row, f"{case.case}: {library}: row {tables[3]}, not {case.row}"


# --------------------------------------------------------------------------- Spark

SPARK_CASES = [c for c in CORPUS if c.spark]
GROUPED = ("query_id", "cutoff", "ndcg")  # the numbers compared for a grouped evaluation (its Parquet table)


def grouped_numbers(got: tuple) -> tuple:
    """An outcome with only the numbers a grouped evaluation writes."""
    return ("read", [r[: len(GROUPED)] for r in got[1]]) if got[0] == "read" else got


@pytest.mark.integration
@pytest.mark.parametrize("case", SPARK_CASES, ids=[f"{c.kind}:{c.case}" for c in SPARK_CASES])
def test_spark_gives_each_case_the_local_outcome(spark, tmp_path, case):
    """The case's file read by Spark (in a task, by the local readers; judgments also kept in Spark), and its rows as
    a Spark DataFrame (Spark's own checks of a run, or of judgments kept in Spark): the local engine's outcome."""
    from ndcg_mlflow.engines import Spark
    from ndcg_mlflow.engines.spark import evaluate_grouped

    local = read_file(tmp_path / "local", case, {}, None, "as is")
    spec = {**SPEC, "data": write_case(tmp_path, case)}
    got = outcome(lambda: ndcg_mlflow.evaluate(spec, base_dir=tmp_path, engine=Spark(spark)))
    assert got == local, f"{case.case}: Spark gives {got}, the local engine {local}"

    def grouped(name: str, **tables: Any) -> tuple:
        return outcome(
            lambda: evaluate_grouped(
                spec, per_query_path=tmp_path / name, base_dir=tmp_path, spark=spark, driver_judgments=0, **tables
            ),
            GROUPED,
        )

    if case.kind == "qrels":  # judgments kept in Spark, read by the local reader in a task
        got = grouped("file")
        assert got == grouped_numbers(local), f"{case.case}: judgments kept in Spark give {got}, locally {local}"
    if case.rows is None:
        return
    frame = spark.createDataFrame(table(case.rows, case.kind))
    tables = read_table(case, "pyarrow")
    if case.kind == "run":
        qrels = table(QRELS, "qrels")
        got = outcome(lambda: ndcg_mlflow.evaluate(SPEC, qrels=qrels, systems={"s": frame}, engine=Spark(spark)))
    else:
        got, tables = grouped("frame", qrels=frame), grouped_numbers(tables)
    assert got[:2] == tables[:2], f"{case.case}: a Spark DataFrame gives {got}, a table {tables}"
