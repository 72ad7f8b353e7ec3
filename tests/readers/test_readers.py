"""Readers: TREC layouts, CSV/TSV/JSONL/Parquet equivalence, and errors that name file and line."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import ndcg_mlflow
from ndcg_mlflow import DataError
from ndcg_mlflow.readers import read_qrels, read_run

pytestmark = pytest.mark.usefixtures("reader_mode")  # each test with the C reader and without

# --------------------------------------------------------------------------- data and helpers

# (query, doc, grade); includes a float grade and a zero
QRELS = [
    ("q1", "A", 3),
    ("q1", "B", 2),
    ("q1", "C", 1),
    ("q1", "D", 0),
    ("q2", "A", 1),
    ("q2", "E", 2.5),
    ("q2", "F", 0),
    ("q3", "G", 1),
]
# (query, doc, rank, score); in q1, X and A tie at 2.0 (X ranked first) and X, Y are unjudged;
# in q2, E and A tie at 8.0
RUN = [
    ("q1", "B", 1, 4.0),
    ("q1", "X", 2, 2.0),
    ("q1", "A", 3, 2.0),
    ("q1", "Y", 4, 1.5),
    ("q1", "C", 5, 0.5),
    ("q2", "F", 1, 9.0),
    ("q2", "E", 2, 8.0),
    ("q2", "A", 3, 8.0),
    ("q3", "G", 1, 0.25),
]


def write(tmp_path, name, text, newline="\n"):
    p = tmp_path / name
    p.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return p


def trec_qrels(rows=QRELS, sep=" "):
    return "".join(sep.join([q, "0", d, f"{g:g}"]) + "\n" for q, d, g in rows)


def trec_run(rows=RUN, sep=" "):
    return "".join(sep.join([q, "Q0", d, str(r), repr(s), "tag"]) + "\n" for q, d, r, s in rows)


def rows_of(table):
    """A table as plain rows: (query, doc, value, rank)."""
    return [
        (
            table.query.row(i),
            table.doc.row(i),
            float(table.value[i]),
            None if table.rank is None else float(table.rank[i]),
        )
        for i in range(len(table))
    ]


def spec(qrels, run, *, ties="displayed_order", gain="exponential", cutoffs=(1, 2, 3, "all")):
    return {
        "spec_version": 1,
        "name": "readers",
        "metric": {
            "gain": gain,
            "cutoffs": list(cutoffs),
            "discount": "log2",
            "ties": ties,
            "ideal": "judged_catalog",
            "empty_ideal": "exclude",
            "unjudged": "zero",
            "missing_queries": "zero",
        },
        "queries": {"weights": "uniform"},
        "data": {"qrels": qrels, "systems": {"sys": run}},
    }


def numbers(result):
    cols = ["query_id", "cutoff", "ndcg", "dcg", "idcg", "idcg_candidates", "judged_coverage", "n_returned", "status"]
    return result.per_query[cols].reset_index(drop=True)


def expect_data_error(reader, path, line, *, contains=None):
    with pytest.raises(DataError) as info:
        reader(path)
    err = info.value
    msg = str(err)
    assert path.name in msg
    if line is not None:
        assert err.line == line, msg
        assert msg.startswith(f"{path}:{line}: "), msg
    if contains:
        assert re.search(contains, msg), msg
    return err


# --------------------------------------------------------------------------- TREC layouts


@pytest.mark.parametrize("kind", ["qrels", "run"])
def test_trec_separators_and_line_endings_give_identical_tables(tmp_path, kind):
    make, reader = (trec_qrels, read_qrels) if kind == "qrels" else (trec_run, read_run)
    variants = {
        "tabs": write(tmp_path, "tabs.txt", make(sep="\t")),
        "spaces": write(tmp_path, "spaces.txt", make(sep=" ")),
        "several": write(tmp_path, "several.txt", make(sep="   ")),  # the line-by-line fallback
        "mixed": write(tmp_path, "mixed.txt", make(sep=" \t ")),
        "crlf_spaces": write(tmp_path, "crlf1.txt", make(sep=" "), newline="\r\n"),
        "crlf_tabs": write(tmp_path, "crlf2.txt", make(sep="\t"), newline="\r\n"),
        "crlf_several": write(tmp_path, "crlf3.txt", make(sep="  "), newline="\r\n"),
        "blank_lines": write(tmp_path, "blank.txt", "\n" + make(sep=" ").replace("\n", "\n\n")),
    }
    reference = rows_of(reader(variants["spaces"]))
    expected_rows = (
        [(q, d, float(g), None) for q, d, g in QRELS]
        if kind == "qrels"
        else [(q, d, s, float(r)) for q, d, r, s in RUN]
    )
    assert reference == expected_rows
    for name, path in variants.items():
        assert rows_of(reader(path)) == reference, name


def test_trec_irregular_spacing_after_line_fifty(tmp_path):
    """The first lines look single-spaced; a later line uses several spaces: read all the same."""
    rows = [("q1", f"d{i}", i % 3) for i in range(80)]
    text = trec_qrels(rows)
    lines = text.splitlines(keepends=True)
    lines[70] = lines[70].replace(" ", "   ")
    odd = write(tmp_path, "odd.txt", "".join(lines))
    plain = write(tmp_path, "plain.txt", text)
    assert rows_of(read_qrels(odd)) == rows_of(read_qrels(plain))


def test_trec_run_with_bom(tmp_path):
    plain = write(tmp_path, "plain.run", trec_run())
    bom = tmp_path / "bom.run"
    bom.write_bytes(b"\xef\xbb\xbf" + trec_run().encode())
    assert rows_of(read_run(bom)) == rows_of(read_run(plain))


# --------------------------------------------------------------------------- other formats


def write_formats(tmp_path):
    """The same qrels and run in every format: {format: (qrels path, run path)}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = {"trec": (write(tmp_path, "qrels.txt", trec_qrels()), write(tmp_path, "sys.run", trec_run()))}
    for fmt, sep in (("csv", ","), ("tsv", "\t")):
        q = write(
            tmp_path,
            f"qrels.{fmt}",
            sep.join(["query_id", "doc_id", "grade"])
            + "\n"
            + "".join(sep.join([a, b, f"{g:g}"]) + "\n" for a, b, g in QRELS),
        )
        # columns in another order than TREC's, with both score and rank
        r = write(
            tmp_path,
            f"sys.{fmt}",
            sep.join(["doc_id", "score", "query_id", "rank"])
            + "\n"
            + "".join(sep.join([d, repr(s), qq, str(k)]) + "\n" for qq, d, k, s in RUN),
        )
        out[fmt] = (q, r)
    q = write(
        tmp_path,
        "qrels.jsonl",
        "".join(json.dumps({"query_id": a, "doc_id": b, "grade": g}) + "\n" for a, b, g in QRELS),
    )
    r = write(
        tmp_path,
        "sys.jsonl",
        "".join(json.dumps({"query_id": a, "doc_id": b, "rank": k, "score": s}) + "\n" for a, b, k, s in RUN),
    )
    out["jsonl"] = (q, r)
    qp, rp = tmp_path / "qrels.parquet", tmp_path / "sys.parquet"
    pq.write_table(
        pa.table(
            {
                "query_id": [a for a, _, _ in QRELS],
                "doc_id": [b for _, b, _ in QRELS],
                "grade": [float(g) for _, _, g in QRELS],
            }
        ),
        qp,
    )
    pq.write_table(
        pa.table(
            {
                "query_id": [a for a, *_ in RUN],
                "doc_id": [b for _, b, _, _ in RUN],
                "score": [s for *_, s in RUN],
                "rank": [k for _, _, k, _ in RUN],
            }
        ),
        rp,
    )
    out["parquet"] = (qp, rp)
    return out


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_formats_read_the_same_rows_as_trec(tmp_path, fmt):
    files = write_formats(tmp_path)
    tq, tr = files["trec"]
    q, r = files[fmt]
    assert rows_of(read_qrels(q)) == rows_of(read_qrels(tq))
    assert rows_of(read_run(r)) == rows_of(read_run(tr))


@pytest.mark.parametrize("ties", ["displayed_order", "average", "id_ascending"])
@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_formats_give_the_same_ndcg_as_trec(tmp_path, fmt, ties):
    files = write_formats(tmp_path)
    tq, tr = files["trec"]
    q, r = files[fmt]
    ref = ndcg_mlflow.evaluate(spec(tq.name, tr.name, ties=ties), base_dir=tmp_path)
    got = ndcg_mlflow.evaluate(spec(q.name, r.name, ties=ties), base_dir=tmp_path)
    assert numbers(got).equals(numbers(ref)), (numbers(got), numbers(ref))
    # and mixing formats (TREC qrels with a run in this format) changes nothing
    mixed = ndcg_mlflow.evaluate(spec(tq.name, r.name, ties=ties), base_dir=tmp_path)
    assert numbers(mixed).equals(numbers(ref))


def test_displayed_order_tie_is_broken_by_rank_in_every_format(tmp_path):
    """q1: B (4.0), then X and A tied at 2.0 with X ranked first -> A at rank 3."""
    files = write_formats(tmp_path)
    for fmt, (q, r) in files.items():
        res = ndcg_mlflow.evaluate(spec(q.name, r.name, cutoffs=(3,)), base_dir=tmp_path)
        pq = res.per_query
        dcg = pq[(pq.query_id == "q1")].dcg.iloc[0]
        assert dcg == pytest.approx(3 + 0 / np.log2(3) + 7 / 2, rel=1e-12), fmt


def test_csv_score_only_run_in_displayed_order(tmp_path):
    """A CSV run without rank: lines in display order give the TREC numbers."""
    tq = write(tmp_path, "qrels.txt", trec_qrels())
    tr = write(tmp_path, "sys.run", trec_run())
    r = write(tmp_path, "sys.csv", "query_id,doc_id,score\n" + "".join(f"{q},{d},{s!r}\n" for q, d, _, s in RUN))
    ref = ndcg_mlflow.evaluate(spec(tq.name, tr.name), base_dir=tmp_path)
    got = ndcg_mlflow.evaluate(spec(tq.name, r.name), base_dir=tmp_path)
    assert numbers(got).equals(numbers(ref))


def test_csv_rank_only_run(tmp_path):
    tq = write(tmp_path, "qrels.txt", trec_qrels())
    tr = write(tmp_path, "sys.run", trec_run())
    r = write(tmp_path, "sys.csv", "query_id,doc_id,rank\n" + "".join(f"{q},{d},{k}\n" for q, d, k, _ in RUN))
    # without a score, rank 1 scores highest and there are no ties: any tie rule gives TREC's rank order
    got = ndcg_mlflow.evaluate(spec(tq.name, r.name, ties="id_ascending"), base_dir=tmp_path)
    ref = ndcg_mlflow.evaluate(spec(tq.name, tr.name), base_dir=tmp_path)
    assert numbers(got).equals(numbers(ref))


def test_declared_format_overrides_the_suffix(tmp_path):
    files = write_formats(tmp_path)
    tq, tr = files["trec"]
    q = write(tmp_path, "judgments.dat", files["csv"][0].read_text())
    ref = ndcg_mlflow.evaluate(spec(tq.name, tr.name), base_dir=tmp_path)
    got = ndcg_mlflow.evaluate(spec({"path": q.name, "format": "csv"}, tr.name), base_dir=tmp_path)
    assert numbers(got).equals(numbers(ref))


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_delimited_with_bom_and_crlf(tmp_path, fmt):
    files = write_formats(tmp_path)
    q, r = files[fmt]
    qb = tmp_path / f"bom_qrels.{fmt}"
    qb.write_bytes(b"\xef\xbb\xbf" + q.read_bytes().replace(b"\n", b"\r\n"))
    rb = tmp_path / f"bom_sys.{fmt}"
    rb.write_bytes(b"\xef\xbb\xbf" + r.read_bytes().replace(b"\n", b"\r\n"))
    assert rows_of(read_qrels(qb)) == rows_of(read_qrels(q))
    assert rows_of(read_run(rb)) == rows_of(read_run(r))


# --------------------------------------------------------------------------- errors: short line


@pytest.mark.parametrize("sep", [" ", "\t", "  "])
def test_short_line_trec_qrels(tmp_path, sep):
    p = write(
        tmp_path,
        "qrels.txt",
        sep.join("q1 0 A 1".split()) + "\n" + sep.join("q1 0 B 2".split()) + "\n\n" + sep.join("q1 0 C".split()) + "\n",
    )
    expect_data_error(read_qrels, p, 4, contains=r"expected 4 fields")


@pytest.mark.parametrize("sep", [" ", "\t", "  "])
def test_short_line_trec_run(tmp_path, sep):
    p = write(tmp_path, "sys.run", sep.join("q1 Q0 A 1 3 t".split()) + "\n" + sep.join("q1 Q0 B 2 t".split()) + "\n")
    expect_data_error(read_run, p, 2, contains=r"expected 6 fields")


def test_short_line_far_into_a_trec_file(tmp_path):
    rows = [("q1", f"d{i}", i % 3) for i in range(120)]
    lines = trec_qrels(rows).splitlines(keepends=True)
    lines[99] = "q1 0 d99\n"
    p = write(tmp_path, "qrels.txt", "".join(lines))
    expect_data_error(read_qrels, p, 100)


def test_short_line_csv(tmp_path):
    p = write(tmp_path, "qrels.csv", "query_id,doc_id,grade\nq1,A,1\nq1,B\n")
    expect_data_error(read_qrels, p, 3)


def test_short_line_tsv_run(tmp_path):
    p = write(tmp_path, "sys.tsv", "query_id\tdoc_id\tscore\nq1\tA\t1\nq1\tB\t0.5\nq1\tC\n")
    expect_data_error(read_run, p, 4)


def test_jsonl_missing_field(tmp_path):
    p = write(
        tmp_path, "sys.jsonl", '{"query_id": "q1", "doc_id": "A", "score": 1}\n{"query_id": "q1", "doc_id": "B"}\n'
    )
    expect_data_error(read_run, p, 2, contains="score")


# --------------------------------------------------------------------------- errors: bad numbers


@pytest.mark.parametrize("sep", [" ", "  "])
def test_non_numeric_score_trec(tmp_path, sep):
    p = write(
        tmp_path, "sys.run", sep.join("q1 Q0 A 1 3 t".split()) + "\n" + sep.join("q1 Q0 B 2 high t".split()) + "\n"
    )
    expect_data_error(read_run, p, 2, contains=r"score.*'high'")


def test_non_numeric_grade_trec(tmp_path):
    p = write(tmp_path, "qrels.txt", "q1 0 A 1\nq1 0 B two\n")
    expect_data_error(read_qrels, p, 2, contains=r"grade.*'two'")


def test_non_numeric_score_csv(tmp_path):
    p = write(tmp_path, "sys.csv", "query_id,doc_id,score\nq1,A,1\nq1,B,high\n")
    expect_data_error(read_run, p, 3, contains="score")


def test_non_numeric_score_jsonl(tmp_path):
    p = write(
        tmp_path,
        "sys.jsonl",
        '{"query_id": "q1", "doc_id": "A", "score": 1}\n{"query_id": "q1", "doc_id": "B", "score": "high"}\n',
    )
    expect_data_error(read_run, p, 2, contains="score")


@pytest.mark.parametrize("bad", ["nan", "NaN", "inf", "-inf", "Infinity"])
@pytest.mark.parametrize("sep", [" ", "\t", "  "])
def test_non_finite_score_trec(tmp_path, bad, sep):
    p = write(
        tmp_path, "sys.run", sep.join("q1 Q0 A 1 3 t".split()) + "\n\n" + sep.join(f"q1 Q0 B 2 {bad} t".split()) + "\n"
    )
    expect_data_error(read_run, p, 3, contains="finite")


@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_non_finite_grade_trec(tmp_path, bad):
    p = write(tmp_path, "qrels.txt", f"q1 0 A 1\nq1 0 B {bad}\n")
    expect_data_error(read_qrels, p, 2, contains="finite")


@pytest.mark.parametrize("fmt,sep", [("csv", ","), ("tsv", "\t")])
@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_non_finite_score_delimited(tmp_path, fmt, sep, bad):
    p = write(
        tmp_path,
        f"sys.{fmt}",
        sep.join(["query_id", "doc_id", "score"])
        + "\n"
        + sep.join(["q1", "A", "1"])
        + "\n"
        + sep.join(["q1", "B", bad])
        + "\n",
    )
    expect_data_error(read_run, p, 3, contains="finite")


def test_non_finite_score_jsonl(tmp_path):
    p = write(
        tmp_path,
        "sys.jsonl",
        '{"query_id": "q1", "doc_id": "A", "score": 1}\n\n{"query_id": "q1", "doc_id": "B", "score": NaN}\n',
    )
    expect_data_error(read_run, p, 3, contains="finite")


def test_non_finite_score_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "sys.parquet"
    pq.write_table(
        pa.table({"query_id": ["q1", "q1"], "doc_id": ["A", "B"], "score": pa.array([1.0, float("inf")])}), p
    )
    err = expect_data_error(read_run, p, None, contains=r"row 2")
    assert err.line is None


# Numbers of a long exponent beside as many zeros: float() reads the first three as infinities, the others as
# finite numbers
LONG_EXPONENT_INFINITE = [
    "0." + "0" * 99_999 + "1e1000000",
    "-0." + "0" * 199_999 + "1e2000000",
    "1" + "0" * 1000 + "e99999999999999999999",
]
LONG_EXPONENT_FINITE = [
    "0." + "0" * 99_999 + "1e100000",
    "0." + "0" * 99_999 + "15e+0000100001",
    "1" + "0" * 100_000 + "e-100000",
    "0." + "0" * 199_999 + "1e-2000000",
    "0." + "0" * 99_999 + "12345678901234567e100017",
]


@pytest.mark.parametrize("bad", LONG_EXPONENT_INFINITE, ids=["1e1000000", "-1e2000000", "1e1000+"])
def test_a_score_or_grade_of_a_long_exponent_that_is_infinite_is_refused_naming_the_line(tmp_path, bad):
    """Refused by every reader (the C reader's fast path and strtod, Arrow's, the line reader) in one message."""
    x = float(bad)
    assert math.isinf(x)
    beyond = "(NaN, an infinity, or a value beyond the range of a double)."
    run = write(tmp_path, "sys.run", f"q1 Q0 A 1 3 t\n\nq1 Q0 B 2 {bad} t\nq1 Q0 C 3 1 t\n")
    err = expect_data_error(read_run, run, 3)
    assert str(err) == f"{run}:3: score must be a finite number, got {x} {beyond}"
    qrels = write(tmp_path, "qrels.txt", f"q1 0 A 1\nq1 0 B {bad}\n")
    err = expect_data_error(read_qrels, qrels, 2)
    assert str(err) == f"{qrels}:2: grade must be a finite number, got {x} {beyond}"


@pytest.mark.parametrize(
    "bad", ["nan", "-inf", "1e999", LONG_EXPONENT_INFINITE[0]], ids=["nan", "-inf", "1e999", "1e1000000"]
)
def test_a_rank_that_is_not_finite_is_refused_naming_the_line_in_one_message(tmp_path, bad):
    run = write(tmp_path, "sys.run", f"q1 Q0 A 1 3 t\nq1 Q0 B 2.5 2 t\nq1 Q0 C {bad} 1 t\n")
    err = expect_data_error(read_run, run, 3)
    assert str(err) == (
        f"{run}:3: rank must be a finite number, got {float(bad)} (NaN, an infinity, or a value "
        f"beyond the range of a double)."
    )
    run = write(tmp_path, "sys.run", "q1 Q0 A 1 3 t\nq1 Q0 B 2.5 2 t\n")
    err = expect_data_error(read_run, run, 2)
    assert str(err) == f"{run}:2: rank must be an integer, got 2.5."


def test_scores_and_grades_of_long_exponents_read_as_float_reads_them(tmp_path):
    run = write(tmp_path, "sys.run", "".join(f"q1 Q0 d{i} {i + 1} {x} t\n" for i, x in enumerate(LONG_EXPONENT_FINITE)))
    qrels = write(tmp_path, "qrels.txt", "".join(f"q1 0 d{i} {x}\n" for i, x in enumerate(LONG_EXPONENT_FINITE)))
    expect = np.array([float(x) for x in LONG_EXPONENT_FINITE]).view(np.uint64).tolist()
    assert expect[:4] == np.array([1.0, 15.0, 1.0, 0.0]).view(np.uint64).tolist()  # (the closed forms)
    for table in (read_run(run), read_qrels(qrels)):
        assert np.asarray(table.value, dtype=np.float64).view(np.uint64).tolist() == expect


# --------------------------------------------------------------------------- errors: duplicates


@pytest.mark.parametrize("sep", [" ", "\t", "  "])
def test_document_listed_twice_in_run(tmp_path, sep):
    lines = ["q1 Q0 A 1 3 t", "q2 Q0 A 1 3 t", "q1 Q0 B 2 2 t", "q1 Q0 A 3 1 t"]
    p = write(tmp_path, "sys.run", "".join(sep.join(ln.split()) + "\n" for ln in lines))
    expect_data_error(read_run, p, 4, contains=r"'A'.*twice.*'q1'.*line 1\b")


def test_document_listed_twice_in_csv_run(tmp_path):
    p = write(tmp_path, "sys.csv", "query_id,doc_id,score\nq1,A,3\nq1,B,2\n\nq1,A,1\n")
    expect_data_error(read_run, p, 5, contains=r"'A'.*twice.*line 2\b")


def test_document_listed_twice_in_parquet_run(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "sys.parquet"
    pq.write_table(pa.table({"query_id": ["q1", "q1", "q1"], "doc_id": ["A", "B", "A"], "score": [3.0, 2.0, 1.0]}), p)
    err = expect_data_error(read_run, p, None, contains=r"row 3")
    assert "None" not in str(err), str(err)  # rows, not a line "None"


@pytest.mark.parametrize("sep", [" ", "\t", "  "])
def test_document_judged_twice_with_different_grades(tmp_path, sep):
    lines = ["q1 0 A 1", "q1 0 B 2", "", "q1 0 A 2"]
    p = write(tmp_path, "qrels.txt", "".join(sep.join(ln.split()) + "\n" for ln in lines))
    expect_data_error(read_qrels, p, 4, contains=r"'A'.*'q1'.*twice.*line 1\b")


def test_document_judged_twice_with_different_grades_csv(tmp_path):
    p = write(tmp_path, "qrels.csv", "query_id,doc_id,grade\nq1,A,1\nq2,A,2\nq1,A,3\n")
    expect_data_error(read_qrels, p, 4, contains=r"twice.*line 2\b")


def test_document_judged_twice_with_the_same_grade_is_accepted(tmp_path):
    p = write(tmp_path, "qrels.txt", "q1 0 A 1\nq1 0 B 2\nq1 0 A 1\n")
    assert sorted(rows_of(read_qrels(p))) == [("q1", "A", 1.0, None), ("q1", "B", 2.0, None)]
    run = write(tmp_path, "sys.run", "q1 Q0 A 1 2 t\nq1 Q0 B 2 1 t\n")
    res = ndcg_mlflow.evaluate(spec(p.name, run.name, cutoffs=("all",)), base_dir=tmp_path)
    r = res.per_query.iloc[0]
    assert r.idcg == pytest.approx(3 + 1 / np.log2(3), rel=1e-12)  # A counted once in the ideal
    assert r.dcg == pytest.approx(1 + 3 / np.log2(3), rel=1e-12)


def test_same_doc_in_two_queries_is_not_a_duplicate(tmp_path):
    q = write(tmp_path, "qrels.txt", "q1 0 A 1\nq2 0 A 2\n")
    r = write(tmp_path, "sys.run", "q1 Q0 A 1 1 t\nq2 Q0 A 1 1 t\n")
    assert len(read_qrels(q)) == 2 and len(read_run(r)) == 2


# --------------------------------------------------------------------------- errors: empty files


@pytest.mark.parametrize("name", ["qrels.txt", "qrels.csv", "qrels.tsv", "qrels.jsonl", "qrels.parquet"])
def test_empty_qrels_file(tmp_path, name):
    p = write(tmp_path, name, "")
    expect_data_error(read_qrels, p, None, contains="empty|no data")


@pytest.mark.parametrize("name", ["sys.run", "sys.csv", "sys.jsonl", "sys.parquet"])
def test_empty_run_file(tmp_path, name):
    p = write(tmp_path, name, "")
    expect_data_error(read_run, p, None, contains="empty|no data")


@pytest.mark.parametrize(
    "name,text,reader",
    [
        ("qrels.txt", "\n  \n\n", read_qrels),
        ("sys.run", "\r\n\r\n", read_run),
        ("qrels.csv", "query_id,doc_id,grade\n", read_qrels),
        ("sys.tsv", "query_id\tdoc_id\tscore\n\n", read_run),
        ("sys.jsonl", "\n\n", read_run),
    ],
)
def test_file_without_data_lines(tmp_path, name, text, reader):
    p = write(tmp_path, name, text)
    expect_data_error(reader, p, None, contains="no data|empty")


def test_empty_qrels_through_evaluate(tmp_path):
    write(tmp_path, "qrels.txt", "")
    write(tmp_path, "sys.run", trec_run())
    with pytest.raises(DataError, match=r"qrels\.txt"):
        ndcg_mlflow.evaluate(spec("qrels.txt", "sys.run"), base_dir=tmp_path)


def test_error_from_evaluate_names_the_run_file_and_line(tmp_path):
    write(tmp_path, "qrels.txt", trec_qrels())
    write(tmp_path, "sys.run", "q1 Q0 A 1 3 t\nq1 Q0 B 2 nan t\n")
    with pytest.raises(DataError, match=r"sys\.run:2: "):
        ndcg_mlflow.evaluate(spec("qrels.txt", "sys.run"), base_dir=tmp_path)


# --------------------------------------------------------------------------- line numbers and padding in CSV


def test_csv_line_number_with_blank_line_before_header(tmp_path):
    p = write(tmp_path, "sys.csv", "\nquery_id,doc_id,score\nq1,A,1\nq1,B,nan\n")
    expect_data_error(read_run, p, 4, contains="finite")


def test_csv_line_number_with_blank_line_after_header(tmp_path):
    p = write(tmp_path, "sys.csv", "query_id,doc_id,score\n\nq1,A,1\nq1,B,nan\n")
    expect_data_error(read_run, p, 4, contains="finite")


def test_csv_fields_padded_with_spaces_are_stripped(tmp_path):
    """Ids are stripped like the header (and like the line-by-line reader does): ' A' is document 'A'."""
    padded = write(tmp_path, "padded.csv", "query_id,doc_id,score\nq1, A, 1\nq1,B ,2\n")
    plain = write(tmp_path, "plain.csv", "query_id,doc_id,score\nq1,A,1\nq1,B,2\n")
    assert rows_of(read_run(padded)) == rows_of(read_run(plain))


# --------------------------------------------------------------------------- line ends, separators, nulls, headers

from ndcg_mlflow.readers import columns as readers_columns  # noqa: E402
from ndcg_mlflow.readers import read_query_set, read_segments, read_weights  # noqa: E402


def force_line_reader(monkeypatch):
    """Every text file read by the line-by-line readers (no C reader, no Arrow fast path)."""
    monkeypatch.setenv("NDCG_MLFLOW_LINE_READER", "1")


def small_file_readers():
    from ndcg_mlflow.companions import read_catalog, read_duplicate_groups

    return {
        "set": (read_query_set, "q1\nq2\nq3\n"),
        "weights": (read_weights, "q1 1\nq2 2\nq3 3\n"),
        "groups": (read_duplicate_groups, "d1 g1\nd2 g1\nd3 g2\n"),
        "catalog": (read_catalog, "d1\nd2\nd3\n"),
        "segments": (read_segments, "q1 a\nq2 a\nq3 b\n"),
    }


@pytest.mark.parametrize("fast", [True, False], ids=["arrow", "line-by-line"])
@pytest.mark.parametrize(
    "name, text",
    [
        ("run.txt", trec_run()),
        ("qrels.txt", trec_qrels()),
        ("run.csv", "query_id,doc_id,score\nq1,d1,1\nq1,d2,0.5\nq2,d1,2\n"),
        ("qrels.tsv", "query_id\tdoc_id\tgrade\nq1\td1\t1\nq2\td1\t2\nq3\td1\t2\n"),
        (
            "qrels.jsonl",
            '{"query_id": "q1", "doc_id": "d1", "grade": 1}\n{"query_id": "q2", "doc_id": "d1", "grade": 2}\n'
            '{"query_id": "q3", "doc_id": "d1", "grade": 2}\n',
        ),
    ],
)
def test_cr_only_line_ends_are_refused_in_every_format(tmp_path, monkeypatch, fast, name, text):
    """CR-only line ends (and any CR not followed by LF) are refused with the line, by both readers: a run read
    as one line would have taken the other queries as "fields after the tag" and scored them 0."""
    if not fast:
        force_line_reader(monkeypatch)
    reader = read_qrels if name.startswith("qrels") else read_run
    path = write(tmp_path, name, text, newline="\r")
    expect_data_error(reader, path, 1, contains="carriage return")
    # a stray CR far into an otherwise LF file names its own line
    lines = text.splitlines(keepends=True)
    lines[1] = lines[1].replace("\n", "\r\n")
    lines[2] = lines[2].replace("1", "1\r", 1)
    stray = write(tmp_path, "stray_" + name, "".join(lines))
    expect_data_error(reader, stray, 3, contains="carriage return")


@pytest.mark.parametrize("which", ["set", "weights", "groups", "catalog", "segments"])
def test_cr_only_line_ends_are_refused_in_small_files(tmp_path, which):
    reader, text = small_file_readers()[which]
    path = write(tmp_path, f"{which}.txt", text, newline="\r")
    expect_data_error(reader, path, 1, contains="carriage return")
    crlf = write(tmp_path, f"{which}_crlf.txt", text, newline="\r\n")
    lf = write(tmp_path, f"{which}_lf.txt", text)
    assert plain(reader(crlf)) == plain(reader(lf))  # CRLF is a line end like LF


def plain(value):
    """A small file's reading as plain Python values, for comparisons."""
    if hasattr(value, "group"):
        return value.docs.to_pylist(), value.group.tolist()
    if hasattr(value, "to_pylist"):
        return value.to_pylist()
    return value


def test_run_with_cr_line_ends_does_not_lose_queries_through_evaluate(tmp_path):
    qrels = write(tmp_path, "qrels.txt", trec_qrels())
    run = write(tmp_path, "run.txt", trec_run(), newline="\r")
    with pytest.raises(DataError, match=r"run\.txt:1: .*carriage return"):
        ndcg_mlflow.evaluate(spec(str(qrels), str(run)))


UNICODE_SPACES = ["\u00a0", "\u2003", "\u3000", "\u2028", "\x85", "\x0b", "\x0c", "\u200b", "\ufeff"]


@pytest.mark.parametrize("space", UNICODE_SPACES, ids=[f"U+{ord(c):04X}" for c in UNICODE_SPACES])
@pytest.mark.parametrize("sep", [" ", "\t"])
def test_only_ascii_space_and_tab_separate_trec_fields(tmp_path, monkeypatch, space, sep):
    """An id may hold any other (Unicode) space: both readers keep it inside the id, whatever other lines hold."""
    run_rows = [("q1", f"d2{space}7", 1, 9.0), ("q1", "d3", 2, 8.0), ("q2", f"{space}x", 1, 1.0)]
    qrels_rows = [("q1", f"d2{space}7", 1), ("q2", f"x{space}", 2)]
    got = {}
    for fast in (True, False):
        if not fast:
            force_line_reader(monkeypatch)
        run = read_run(write(tmp_path, f"r{fast}.txt", trec_run(run_rows, sep=sep)))
        qrels = read_qrels(write(tmp_path, f"q{fast}.txt", trec_qrels(qrels_rows, sep=sep)))
        got[fast] = (rows_of(run), rows_of(qrels))
    assert got[True] == got[False]
    assert got[True][0] == [(q, d, s, float(r)) for q, d, r, s in run_rows]
    assert got[True][1] == [(q, d, float(g), None) for q, d, g in qrels_rows]


def test_unrelated_irregular_line_does_not_change_the_parse(tmp_path):
    """Which reader runs depends on the whole file; the parse must not."""
    rows = [("q1", f"d{i}\u00a0{i}", i + 1, 10.0 - i) for i in range(5)]
    plain = trec_run(rows)
    irregular = plain.replace("q1 Q0 d4", "q1  Q0\td4")  # several separators on one line only
    assert rows_of(read_run(write(tmp_path, "a.run", plain))) == rows_of(read_run(write(tmp_path, "b.run", irregular)))


@pytest.mark.parametrize("fast", [True, False], ids=["arrow", "line-by-line"])
@pytest.mark.parametrize(
    "text, line",
    [
        ("q1 Q0 d1 1 2.0 t\nq1  Q0 d2 2 1.0 t\nq1 Q0  d3 3 0.5 t\n", None),  # several spaces: read, not shifted
        ("q1 0 d1 1\nq1 0 \u00a0 1\n", None),  # an id that is a lone U+00A0
    ],
)
def test_trec_double_separators_never_make_empty_fields(tmp_path, monkeypatch, fast, text, line):
    if not fast:
        force_line_reader(monkeypatch)
    reader = read_run if "Q0" in text else read_qrels
    table = reader(write(tmp_path, "f.txt", text))
    assert all(d for _, d, _, _ in rows_of(table))
    if reader is read_run:
        assert [d for _, d, _, _ in rows_of(table)] == ["d1", "d2", "d3"]


def test_trec_numbers_follow_one_grammar_in_both_readers(tmp_path, monkeypatch):
    """Python's float() also reads '1_0', '０' and ' 1'; the readers accept decimal numbers only, in both paths."""
    for bad in ["1_0", "\uff11", "\u0661", "0x10", "1e", "1d3"]:
        for fast in (True, False):
            with monkeypatch.context() as m:
                if not fast:
                    force_line_reader(m)
                path = write(tmp_path, f"bad{fast}.txt", f"q1 0 d1 1\nq1 0 d2 {bad}\n")
                expect_data_error(read_qrels, path, 2, contains="grade must be a number")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "tsv", "jsonl"])
@pytest.mark.parametrize("column", ["query_id", "doc_id", "score"])
def test_nulls_and_empty_ids_are_refused_in_every_format(tmp_path, fmt, column):
    """A null (Parquet) or empty (CSV/TSV/JSONL) id or score is refused naming the row or line; before, Parquet
    dropped a null query_id's row and turned a null doc_id into an empty id ranked first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d1"], "score": [3.0, 2.0, 1.0]}
    rows[column] = list(rows[column])
    rows[column][1] = None
    path = tmp_path / f"run.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.table(rows), path)
        where = "row 2"
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps({k: rows[k][i] for k in rows}) + "\n" for i in range(3)))
        where = f"{path}:2:"
    else:
        sep = "," if fmt == "csv" else "\t"
        cells = lambda i: [("" if rows[k][i] is None else str(rows[k][i])) for k in rows]  # noqa: E731
        path.write_text(sep.join(rows) + "\n" + "".join(sep.join(cells(i)) + "\n" for i in range(3)))
        where = f"{path}:3:"
    with pytest.raises(DataError) as info:
        read_run(path)
    assert where in str(info.value) and column in str(info.value), str(info.value)


def test_parquet_nan_score_and_empty_string_id_are_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "run.parquet"
    pq.write_table(pa.table({"query_id": ["q1", "q1"], "doc_id": ["d1", ""], "score": [1.0, 2.0]}), path)
    with pytest.raises(DataError, match="row 2: doc_id is empty"):
        read_run(path)
    pq.write_table(pa.table({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [1.0, float("nan")]}), path)
    with pytest.raises(DataError, match="row 2"):
        read_run(path)


@pytest.mark.parametrize("escape", ["\\udc80", "\\ud800", "\\udfff"])
@pytest.mark.parametrize("column", ["query_id", "doc_id"])
def test_lone_surrogates_in_jsonl_ids_are_refused_at_read_time(tmp_path, escape, column):
    ids = {"query_id": '"q1"', "doc_id": '"d1"'}
    ids[column] = f'"x{escape}"'
    path = write(
        tmp_path,
        "run.jsonl",
        '{"query_id": "q1", "doc_id": "d0", "score": 2}\n'
        f'{{"query_id": {ids["query_id"]}, "doc_id": {ids["doc_id"]}, "score": 1}}\n',
    )
    expect_data_error(read_run, path, 2, contains=f"{column} holds a lone surrogate")


@pytest.mark.parametrize("dtype", ["uint64", "int64", "uint32", "int8", "float16", "float32"])
def test_any_numeric_parquet_type_is_read_as_the_nearest_double(tmp_path, dtype):
    import pyarrow as pa
    import pyarrow.parquet as pq

    info = np.iinfo(dtype) if dtype.startswith(("u", "i")) else np.finfo(dtype)
    values = [info.max, 1, info.min if dtype != "float16" else -1]
    path = tmp_path / "run.parquet"
    pq.write_table(
        pa.table(
            {
                "query_id": ["q1"] * 3,
                "doc_id": ["d1", "d2", "d3"],
                "score": pa.array(values, type=pa.from_numpy_dtype(np.dtype(dtype))),
            }
        ),
        path,
    )
    table = read_run(path)
    assert table.value.tolist() == [float(v) for v in values]  # 2^64-1 included: the double nearest to it


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_quoted_header_is_read_as_named_columns(tmp_path, fmt):
    """R's write.csv quotes every name and string: the file is CSV with its columns, not TREC."""
    sep = "," if fmt == "csv" else "\t"
    text = (
        sep.join(['""', '"query_id"', '"doc_id"', '"score"'])
        + "\n"
        + sep.join(['"1"', '"q1"', '"d1"', "2.5"])
        + "\n"
        + sep.join(['"2"', '"q1"', '"d2"', "1"])
        + "\n"
    )
    table = read_run(write(tmp_path, f"run.{fmt}", text))
    assert table.format == fmt
    assert rows_of(table) == [("q1", "d1", 2.5, None), ("q1", "d2", 1.0, None)]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_a_needed_column_named_twice_is_refused(tmp_path, fmt):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / f"run.{fmt}"
    if fmt == "parquet":
        pq.write_table(
            pa.Table.from_arrays(
                [pa.array(["q1"]), pa.array(["d1"]), pa.array([1.0]), pa.array([2.0])],
                names=["query_id", "doc_id", "score", "score"],
            ),
            path,
        )
    elif fmt == "jsonl":
        path.write_text('{"query_id": "q1", "doc_id": "d1", "score": 1, "score": 2}\n')
    else:
        sep = "," if fmt == "csv" else "\t"
        path.write_text(
            sep.join(["query_id", "doc_id", "score", "score"]) + "\n" + sep.join(["q1", "d1", "1", "2"]) + "\n"
        )
    with pytest.raises(DataError, match="'score' appears (2 times|twice)"):
        read_run(path)


@pytest.mark.parametrize("which", ["set", "weights", "groups", "catalog", "segments"])
def test_small_files_refuse_a_needed_column_named_twice(tmp_path, which):
    reader, _ = small_file_readers()[which]
    header = {
        "set": "query_id,query_id",
        "weights": "query_id,weight,weight",
        "groups": "doc_id,group,group",
        "catalog": "doc_id,doc_id",
        "segments": "query_id,segment,segment",
    }[which]
    path = write(tmp_path, f"{which}.csv", header + "\n" + ",".join(["a"] * (header.count(",") + 1)) + "\n")
    expect_data_error(reader, path, 1, contains="appears 2 times")


def test_unicode_spaces_are_part_of_small_file_ids(tmp_path):
    path = write(tmp_path, "set.txt", "q\u00a01\nq2\n")
    assert read_query_set(path) == ["q\u00a01", "q2"]
    with pytest.raises(DataError, match="expected 1 field"):
        read_query_set(write(tmp_path, "set2.txt", "q 1\n"))


def test_crlf_across_the_scan_blocks_and_a_late_lone_cr(tmp_path):
    """The one-pass scan reads 4 MiB blocks: a CRLF split between two blocks is a line end; a lone CR after the
    first block is refused with its own line number (the line-by-line count)."""
    block = 1 << 22
    line = "q1 Q0 d{} {} 1.0 t\r\n"
    lines, size, i = [], 0, 0
    while size < block + 200:
        text = line.format(i, i + 1)
        lines.append(text)
        size += len(text)
        i += 1
    data = "".join(lines)
    # pad the first line so that some line's CR is the block's last byte and its LF the next block's first
    cut = data.index("\r\n", block - 60)
    pad = block - 1 - cut
    lines[0] = lines[0].replace("t\r\n", "t" + "x" * pad + "\r\n")
    data = "".join(lines)
    assert data[block - 1 : block + 1] == "\r\n"
    ok = write(tmp_path, "ok.run", data)
    assert len(read_run(ok, rank=False)) == len(lines)
    late = len(lines) - 3
    lines[late] = lines[late].replace(" t\r\n", " t\rx\r\n")
    bad = write(tmp_path, "bad.run", "".join(lines))
    expect_data_error(read_run, bad, late + 1, contains="carriage return")


# --------------------------------------------------------------------------- id hashes across chunks


def test_an_id_hashes_alike_in_every_chunk_and_a_duplicate_across_chunks_is_found():
    """Decimal ids hash through their value, other ids through their bytes, decided id by id: a document
    repeated in a chunk of decimal ids and in a chunk that also holds a non-decimal id is still a duplicate
    (a block of a large file holds only decimal ids while a later block does not)."""
    import pyarrow as pa

    from ndcg_mlflow.readers import string_hashes, table_from_object

    docs = pa.chunked_array([["7", "12", "0", "5"], ["x", "12", "012", "+5", "5 ", "0"]])
    h = string_hashes(docs)
    assert h[1] == h[5] and h[2] == h[9]  # '12' and '0' in both chunks
    assert len({int(v) for v in h}) == 8  # '012', '+5' and '5 ' are other ids than '12' and '5'
    assert string_hashes(pa.array(["12"]))[0] == h[1]
    run = pa.table(
        {
            "query_id": pa.chunked_array([["q", "q"], ["q", "q"]]),
            "doc_id": pa.chunked_array([["1", "2"], ["x", "1"]]),
            "score": pa.chunked_array([[4.0, 3.0], [2.0, 1.0]]),
        }
    )
    with pytest.raises(DataError, match=r"row 4: document '1' is listed twice for query 'q' \(first at row 1\)"):
        table_from_object(run, "run", "systems['a']")


@pytest.mark.parametrize(
    "line",
    ["q1 Q0 d2 2 1.5 ", "q1  d2 2 1.5 t", "q1 Q0 d2  1.5 t", " q1 Q0 d2 2 1.5"],
    ids=["empty-tag", "empty-q0", "empty-rank", "leading-separator"],
)
@pytest.mark.parametrize("rank", [True, False])
def test_an_empty_field_in_a_column_the_engine_does_not_use_is_refused(tmp_path, line, rank):
    """Six fields on the line when split at every separator, one of them empty (in a column that is not
    otherwise used): split on runs of separators the line has five, and the error names it."""
    p = write(tmp_path, "run.txt", f"q1 Q0 d1 1 2.5 t\n{line}\nq1 Q0 d3 3 0.5 t\n")
    with pytest.raises(DataError, match=r"run\.txt:2: expected 6 fields .* found 5"):
        read_run(p, rank=rank)


@pytest.mark.parametrize(
    "text, line",
    [
        ("q1 Q0 d1 1 2.5 t\r\nq1 Q0 d2 2 1.5 \r\n", 2),  # a separator before CRLF
        ("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 ", 2),  # before the end of a file without a last line end
        ("q1 Q0 d1 1 2.5 t\n\n\tq1 Q0 d2 2 1.5\n", 3),  # at a line's start, after a blank line
    ],
)
def test_an_empty_field_at_a_line_end_is_refused_in_both_readers(tmp_path, monkeypatch, text, line):
    for fast in (True, False):
        with monkeypatch.context() as m:
            if not fast:
                force_line_reader(m)
            p = tmp_path / f"run{fast}.txt"
            p.write_bytes(text.replace("\t", " ").encode())
            expect_data_error(lambda path: read_run(path, rank=False), p, line, contains="expected 6 fields")
    q = write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1  d2 1\n")  # an empty iteration field
    expect_data_error(read_qrels, q, 2, contains="expected 4 fields")


@pytest.mark.parametrize("at", [-2, -1, 0, 1])
@pytest.mark.parametrize("pattern", ["  ", "\n ", " \n"])
def test_the_scan_sees_an_empty_field_across_its_block_boundary(tmp_path, at, pattern):
    """The scan reads 4 MiB blocks: two separators (or a separator and a line end) on either side of a block's
    end are seen, as anywhere else."""
    from ndcg_mlflow.readers.text import SCAN_BLOCK, scan_text

    line = "q1 Q0 d1 1 2.5 t\n"
    boundary = SCAN_BLOCK
    head = line * (boundary // len(line) - 1)
    head += "q1 Q0 " + "x" * (boundary + at - len(head) - len("q1 Q0 ") - 1) + "1"  # the pattern: at boundary + at
    tail = pattern + "2 2.5 t\n" + line
    bad = tmp_path / "bad.run"
    bad.write_bytes((head + tail).encode())
    assert len(head) == boundary + at
    assert scan_text(bad, fields=True).empty_field
    good = tmp_path / "good.run"
    good.write_bytes((head + " 2 2.5 t\n" + line).encode())
    assert not scan_text(good, fields=True).empty_field


@pytest.mark.parametrize(
    "bad", [b"q\xe91 Q0 d2 2 1.5 t", b"q1 Q0 d2 2 1.5 t\xff", b"q1 Q\xc3 d2 2 1.5 t"], ids=["query-id", "tag", "q0"]
)
def test_bytes_that_are_not_utf8_name_their_line_in_any_column(tmp_path, bad):
    """Also in the columns Arrow is not asked to convert, and in a query id (Arrow's parse does not check UTF-8:
    the scan does)."""
    p = tmp_path / "run.txt"
    p.write_bytes(b"q1 Q0 d1 1 2.5 t\n" + bad + b"\nq1 Q0 d3 3 0.5 t\n")
    for rank in (True, False):
        expect_data_error(lambda path, rank=rank: read_run(path, rank=rank), p, 2, contains="not UTF-8")


def test_dictionary_encoded_query_ids_get_the_codes_of_first_appearance():
    """Whatever order Arrow's dictionaries list their values in, the codes are those of the plain strings."""
    import pyarrow as pa

    from ndcg_mlflow.readers.table import encode_dictionary, encode_ids

    rng = np.random.default_rng(2)
    for _ in range(40):
        ids = [f"q{i}" for i in rng.integers(0, 12, size=int(rng.integers(1, 60)))]
        cuts = sorted({0, len(ids), *rng.integers(0, len(ids), size=3).tolist()})
        chunks = []
        for a, b in zip(cuts, cuts[1:]):
            part = ids[a:b]
            values = sorted(set(part), reverse=bool(rng.integers(0, 2))) + (["unused"] if rng.random() < 0.2 else [])
            chunks.append(
                pa.DictionaryArray.from_arrays(
                    pa.array([values.index(x) for x in part], type=pa.int32()), pa.array(values)
                )
            )
        column = pa.chunked_array(chunks, type=pa.dictionary(pa.int32(), pa.string()))
        got, want = encode_dictionary(column), encode_ids(pa.array(ids))
        assert got.values.tolist() == want.values.tolist()
        np.testing.assert_array_equal(got.codes, want.codes)


def test_query_codes_of_a_large_file_are_those_of_the_line_reader(tmp_path, monkeypatch):
    """Queries interleaved across the Arrow reader's blocks (more than 4 MiB): the same ids in the same order."""
    rng = np.random.default_rng(4)
    queries = rng.integers(0, 3000, size=200_000)
    text = "".join(f"q{q} Q0 d{i} 1 {i % 7}.5 t\n" for i, q in enumerate(queries.tolist()))
    path = write(tmp_path, "big.run", text)
    fast = read_run(path, rank=False)
    force_line_reader(monkeypatch)
    slow = read_run(path, rank=False)
    assert fast.query.values.tolist() == slow.query.values.tolist()
    np.testing.assert_array_equal(fast.query.codes, slow.query.codes)
    assert fast.doc.array.to_pylist() == slow.doc.array.to_pylist()


# --------------------------------------------------------------------------- headers that are not the expected ones


@pytest.mark.parametrize(
    ("name", "text", "reader"),
    [
        ("run.csv", "qid,docid,score\nq1,d1,0.5\nq1,d2,0.25\n", read_run),
        ("run.tsv", "userID\titemID\tprediction\nu1\ti1\t0.5\nu1\ti2\t0.25\n", read_run),
        ("qrels.csv", "q_id,doc_id,rating\nq1,d1,2\nq1,d2,0\n", read_qrels),
    ],
)
def test_a_header_with_other_names_is_answered_with_the_mapping_that_reads_it(tmp_path, name, text, reader):
    """A CSV/TSV header that names no query_id was read as TREC ("expected 6 fields, found 1"): it is a header,
    the error names line 1, the columns expected, and a mapping, which read as given reads the file."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError) as info:
        reader(path)
    err = info.value
    assert err.line == 1 and "expected 6 fields" not in str(err)
    assert "missing column(s)" in err.message and "query_id" in err.message
    suggested = re.search(r"`columns: \{(.*?)\}`", err.message).group(1)
    mapping = tuple(tuple(pair.split(": ")) for pair in suggested.split(", "))
    table = reader(path, columns=mapping)
    header, *rows = [line.split("," if name.endswith(".csv") else "\t") for line in text.splitlines()]
    assert list(table.query.values[table.query.codes]) == [r[0] for r in rows]
    assert table.doc.array.to_pylist() == [r[1] for r in rows]
    assert table.value.tolist() == [float(r[2]) for r in rows]


@pytest.mark.parametrize("header", ["qid Q0 docid rank score tag", "query_id,doc_id,score", "qid\titer\tdocno\trel"])
def test_a_header_line_in_a_trec_file_is_named_as_one(tmp_path, header):
    kind = read_qrels if "rel" in header else read_run
    body = "q1 0 d1 1\n" if kind is read_qrels else "q1 Q0 d1 1 0.5 t\n"
    path = tmp_path / "data.txt"
    path.write_text(f"{header}\n{body}")
    with pytest.raises(DataError) as info:
        kind(path)
    assert info.value.line == 1 and "looks like a header" in info.value.message
    path.write_text(body)  # the same file without it reads
    assert len(kind(path)) == 1


def test_a_tsv_named_trec_file_without_a_header_stays_trec(tmp_path):
    """Tab-separated TREC lines in a .tsv hold numbers: not a header, read as TREC as before."""
    path = tmp_path / "run.tsv"
    path.write_text("q1\tQ0\td1\t1\t0.5\tt\nq1\tQ0\td2\t2\t0.25\tt\n")
    assert read_run(path).doc.array.to_pylist() == ["d1", "d2"]


def test_an_empty_id_is_named_by_its_row_across_row_groups_and_string_widths(tmp_path):
    """The row of the first empty id counts the rows of earlier row groups (chunks), sliced or not, for
    string and large_string columns alike."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ndcg_mlflow.readers.accept import first_empty

    docs = [f"d{i}" for i in range(10)]
    docs[7] = ""
    for kind in (pa.string(), pa.large_string()):
        path = tmp_path / f"run_{kind}.parquet"
        table = pa.table(
            {
                "query_id": pa.array(["q1"] * 10, kind),
                "doc_id": pa.array(docs, kind),
                "score": [float(i) for i in range(10)],
            }
        )
        pq.write_table(table, path, row_group_size=3)  # rows 7 is the second of the third row group
        with pytest.raises(DataError, match="row 8: doc_id is empty"):
            read_run(path)
        column = pa.chunked_array([pa.array(docs[:4], kind).slice(1), pa.array(docs[4:], kind).slice(2)])
        assert first_empty(column) == 4  # docs[1:4] + docs[6:]: the empty docs[7] is the fifth
        assert first_empty(pa.array(docs[:7], kind)) is None


@pytest.mark.parametrize("size", [0, 10, (1 << 18) - 1, 1 << 18, (1 << 18) + 4095, 3 * (1 << 18) + 7])
def test_a_files_sha256_is_hashlibs_of_its_bytes_read_a_block_at_a_time_never_mapped(tmp_path, monkeypatch, size):
    """The digest is that of the file's bytes, read a block at a time (blocks made small here, so that a file has
    several and its last is short), with no mapping of the file (one cut short while mapped ends the process)."""
    import hashlib
    import mmap
    import threading

    from ndcg_mlflow.readers import hashing

    def refuse(*args, **kwargs):
        raise AssertionError("the file was mapped")

    monkeypatch.setattr(hashing, "HASH_BLOCK", 1 << 18)
    monkeypatch.setattr(mmap, "mmap", refuse)
    data = np.random.default_rng(size).integers(0, 256, size=size, dtype=np.uint8).tobytes()
    path = tmp_path / "f.run"
    path.write_bytes(data)
    assert hashing.sha256_file(path) == hashlib.sha256(data).hexdigest()
    stop = threading.Event()
    stop.set()
    assert hashing.sha256_file(path, stop=stop) == ("" if size else hashlib.sha256(b"").hexdigest())


def test_a_file_rewritten_while_its_sha256_is_read_is_refused_naming_it(tmp_path, monkeypatch):
    """A digest of bytes from before and after a rewrite is of no version of the file: a DataError naming it."""
    import os

    from ndcg_mlflow.readers import hashing

    path = tmp_path / "moving.run"
    path.write_bytes(b"q1 Q0 d1 1 1.5 t\n" * 50_000)
    real_blocks = hashing.blocks

    def touching(fh, size):
        for i, block in enumerate(real_blocks(fh, size)):
            if i == 1:
                st = os.stat(path)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            yield block

    monkeypatch.setattr(hashing, "HASH_BLOCK", 1 << 16)
    monkeypatch.setattr(hashing, "blocks", touching)
    with pytest.raises(DataError, match="moving.run.*changed while it was read"):
        hashing.sha256_file(path)


def test_a_module_imported_beside_a_long_call_is_imported_once_and_its_failure_left_to_the_caller(
    tmp_path, monkeypatch
):
    """``import_beside``: a module not yet imported is imported in a thread of its own (which an exit waits
    for); one imported already starts nothing; a module that fails to import raises nothing there (the
    caller's own import raises it)."""
    import sys

    (tmp_path / "beside_probe.py").write_text("import time\ntime.sleep(0.05)\nVALUE = 42\n")
    (tmp_path / "beside_broken.py").write_text("raise RuntimeError('broken module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "beside_probe", raising=False)
    thread = readers_columns.import_beside("beside_probe")
    assert thread is not None and not thread.daemon
    thread.join(10)
    assert sys.modules["beside_probe"].VALUE == 42
    assert readers_columns.import_beside("beside_probe") is None
    monkeypatch.delitem(sys.modules, "beside_probe")
    broken = readers_columns.import_beside("beside_broken")
    assert broken is not None
    broken.join(10)
    assert not broken.is_alive() and "beside_broken" not in sys.modules
    with pytest.raises(RuntimeError, match="broken module"):
        __import__("beside_broken")


# --------------------------------------------------------------------------- the digest is of the bytes evaluated


def _replace(path: Path, text: str) -> None:
    """Write ``text`` beside ``path`` and rename it over ``path`` (an atomic replacement, a new inode)."""
    import os

    new = path.with_name(path.name + ".new")
    new.write_text(text)
    os.replace(new, path)


def _race_spec(tmp_path: Path) -> dict:
    from helpers import metric_spec, write_qrels, write_run

    qrels = write_qrels(tmp_path, {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}})
    run = write_run(tmp_path, {"q1": ["d2", "d1"], "q2": ["d3"]}, name="a.run")
    spec = metric_spec(qrels, run, name="race")
    spec.pop("uncertainty", None)  # (no interval)
    return spec


BETTER_RUN = "q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\nq2 Q0 d3 1 1 t\n"


@pytest.mark.parametrize("order", ["hashed, replaced, read", "read, replaced, hashed"])
def test_a_run_replaced_between_its_hash_and_its_read_is_refused(tmp_path, monkeypatch, order):
    """A run renamed over between the background sha256 and the read would give the new file's numbers with the
    old file's digest (or the reverse): refused, naming the file. Untouched, the recorded sha256 is that of the
    bytes read."""
    import hashlib
    import threading

    from ndcg_mlflow import evaluate
    from ndcg_mlflow.engines.local import pipeline as ev

    spec = _race_spec(tmp_path)
    path = tmp_path / "a.run"
    untouched = evaluate(spec, base_dir=tmp_path)
    (record,) = [f for f in untouched.files if f.role == "system:sys"]
    assert record.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()

    first, second = threading.Event(), threading.Event()
    real_sha, real_read = ev.sha256_file, ev.read_run

    def sha(p, *args, **kwargs):
        if Path(p).name != "a.run":
            return real_sha(p, *args, **kwargs)
        if order.startswith("read"):
            assert second.wait(10)
        digest = real_sha(p, *args, **kwargs)
        if order.startswith("hashed"):
            _replace(path, BETTER_RUN)
            first.set()
        return digest

    def read(p, *args, **kwargs):
        if order.startswith("hashed"):
            assert first.wait(10)
        table = real_read(p, *args, **kwargs)
        if order.startswith("read"):
            _replace(path, BETTER_RUN)
            second.set()
        return table

    monkeypatch.setattr(ev, "sha256_file", sha)
    monkeypatch.setattr(ev, "read_run", read)
    with pytest.raises(DataError, match=r"a\.run.*changed while it was read"):
        evaluate(spec, base_dir=tmp_path)


@pytest.mark.parametrize("what", ["queries.weights", "queries.set", "queries.segments"])
def test_a_small_file_replaced_while_it_is_read_and_hashed_is_refused(tmp_path, monkeypatch, what):
    """The weights, query set and segments are hashed after their read: a file renamed over in between is
    refused."""
    from ndcg_mlflow import evaluate
    from ndcg_mlflow.engines import inputs as ev

    spec = _race_spec(tmp_path)
    key = what.split(".")[1]
    name, text, reader, other = {
        "weights": ("w.tsv", "q1 1\nq2 3\n", "read_weights", "q1 5\nq2 1\n"),
        "set": ("set.txt", "q1\nq2\n", "read_query_set", "q1\n"),
        "segments": ("seg.tsv", "q1 a\nq2 b\n", "read_segments", "q1 b\nq2 a\n"),
    }[key]
    (tmp_path / name).write_text(text)
    spec["queries"][key] = name
    assert len(evaluate(spec, base_dir=tmp_path).query_ids) == 2  # (read as it is)
    real = getattr(ev, reader)

    def replacing(p, *args, **kwargs):
        out = real(p, *args, **kwargs)
        _replace(Path(p), other)
        return out

    monkeypatch.setattr(ev, reader, replacing)
    with pytest.raises(DataError, match=rf"{name}.*changed while it was read"):
        evaluate(spec, base_dir=tmp_path)


# --------------------------------------------------------------------------- column mappings: one purpose a column


def _mapped_file(tmp_path: Path, fmt: str, header: list[str], rows: list[list]) -> Path:
    """The rows under ``header`` in a csv, jsonl or parquet file."""
    path = tmp_path / f"data.{fmt}"
    if fmt == "csv":
        path.write_text("".join(",".join(map(str, r)) + "\n" for r in [header, *rows]))
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(dict(zip(header, r))) + "\n" for r in rows))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({h: [r[i] for r in rows] for i, h in enumerate(header)}), path)
    return path


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize(
    "reader, header, mapping, column",
    [
        (read_run, ["query_id", "doc_id", "score"], (("score", "query_id"),), "query_id"),
        (read_run, ["query_id", "doc_id", "score"], (("query_id", "doc_id"),), "doc_id"),
        (read_qrels, ["query_id", "doc_id", "grade"], (("grade", "doc_id"),), "doc_id"),
    ],
)
def test_a_mapping_giving_a_needed_columns_name_to_another_is_refused(tmp_path, fmt, reader, header, mapping, column):
    """A mapping that reads a needed column's own name as another column, leaving that needed column unmapped
    (read from the column of its own name): one column would serve two purposes. Refused in those words, naming
    the column, in every format (and as a table in memory); not as a column missing from a list of names holding a
    NUL."""
    path = _mapped_file(tmp_path, fmt, header, [["q1", "d1", 1], ["q1", "d2", 2]])
    with pytest.raises(DataError) as err:
        reader(path, columns=mapping)
    assert err.value.file == str(path), str(err.value)
    message = err.value.message
    assert "each source column serves one purpose" in message and f"column {column!r}" in message, message
    assert "\x00" not in message and "missing" not in message, message
    kind = "run" if reader is read_run else "qrels"
    table = {h: [r[i] for r in [["q1", "d1", 1], ["q1", "d2", 2]]] for i, h in enumerate(header)}
    with pytest.raises(DataError) as err:
        ndcg_mlflow.readers.table_from_object(table, kind, "t", mapping)
    assert "each source column serves one purpose" in err.value.message, err.value.message


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_one_column_mapped_to_two_names_is_refused_by_the_readers_too(tmp_path, fmt):
    """``columns=`` given to a reader (not through the spec, whose check says the same): a column named for both
    the score and the rank is refused, not read as the rank alone."""
    path = _mapped_file(tmp_path, fmt, ["query_id", "doc_id", "x"], [["q1", "d1", 1], ["q1", "d2", 2]])
    with pytest.raises(DataError) as err:
        read_run(path, columns=(("score", "x"), ("rank", "x")))
    assert err.value.message == "column 'x' is mapped to 2 names; each source column serves one purpose."


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_column_the_mapping_replaces_is_not_read_and_is_named_as_the_file_names_it(tmp_path, fmt):
    """With ``{score: s}`` the file's own ``score`` column is not read (the ``s`` column is the score); without an
    ``s`` column the refusal lists the file's names as they are (``score``, not a hidden name)."""
    rows = [["q1", "d1", 0.5, 9.0], ["q1", "d2", 0.25, 8.0]]
    path = _mapped_file(tmp_path, fmt, ["query_id", "doc_id", "s", "score"], rows)
    table = read_run(path, columns=(("score", "s"),))
    assert table.value.tolist() == [0.5, 0.25]
    (tmp_path / "other").mkdir()
    path = _mapped_file(tmp_path / "other", fmt, ["query_id", "doc_id", "score"], [r[:2] + r[3:] for r in rows])
    with pytest.raises(DataError) as err:
        read_run(path, columns=(("score", "s"),))
    assert "\x00" not in err.value.message and "Found: query_id, doc_id, score." in err.value.message, str(err.value)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_names_that_differ_by_case_are_two_columns(tmp_path, fmt):
    """``score`` and ``SCORE``, ``query_id`` and ``QUERY_ID``: each name is its own column, the tool's names read
    exactly as written."""
    header = ["QUERY_ID", "query_id", "doc_id", "SCORE", "score"]
    path = _mapped_file(tmp_path, fmt, header, [["x", "q1", "d1", 7.0, 0.5], ["y", "q2", "d2", 6.0, 0.25]])
    table = read_run(path)
    assert list(table.query.values[table.query.codes]) == ["q1", "q2"] and table.value.tolist() == [0.5, 0.25]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.csv", "query_id,doc_id,score\nq1,d1,0.5\n"),
        ("run.tsv", "query_id\tdoc_id\tscore\nq1\td1\t0.5\n"),
        ("run.jsonl", '{"query_id": "q1", "doc_id": "d1", "score": 0.5}\n'),
    ],
)
def test_a_mapping_to_a_column_the_file_lacks_names_that_column(tmp_path, name, text):
    """``score`` mapped to ``SCORE`` in a file without it: the refusal names the mapped name that is missing (it
    said 'missing column(s) score' while listing the file's own score among the columns found)."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError) as info:
        read_run(path, columns=(("score", "SCORE"),))
    message = info.value.message
    assert info.value.line == 1
    assert "missing column(s) 'SCORE' (the score, as the column mapping names it)" in message


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("w.tsv", "query_id\tweight\tWEIGHT\nq1\t1\t5\nq2\t2\t6\n", {"q1": 1.0, "q2": 2.0}),
        ("w.csv", "WEIGHT,query_id,weight\n5,q1,1\n6,q2,2\n", {"q1": 1.0, "q2": 2.0}),
    ],
)
def test_a_small_files_header_names_are_compared_exactly(tmp_path, name, text, expected):
    """``weight`` and ``WEIGHT`` are two columns in a weights file too (as in a run): the one named ``weight`` is
    read, where the small files' reader compared names in lower case and refused the header as naming weight
    twice."""
    path = tmp_path / name
    path.write_text(text)
    assert read_weights(path) == expected


def test_a_small_files_header_in_other_case_is_refused_saying_names_are_exact(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("Query_ID,Weight\nq1,1\n")
    with pytest.raises(DataError) as info:
        read_weights(path)
    assert info.value.line == 1 and "compared exactly" in info.value.message and "'Query_ID'" in info.value.message


def test_a_segments_mapping_reads_the_column_of_that_exact_name_in_csv_as_in_jsonl(tmp_path):
    """{segment: Label} reads the column 'Label', not 'label', from a CSV file as from JSONL (the CSV reader
    compared the mapped name in lower case: it refused the header as naming label twice)."""
    csv_path = tmp_path / "s.csv"
    csv_path.write_text("query_id,label,Label\nq1,x,head\nq2,y,tail\n")
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(
        '{"query_id": "q1", "label": "x", "Label": "head"}\n{"query_id": "q2", "label": "y", "Label": "tail"}\n'
    )
    columns = (("segment", "Label"),)
    assert (
        read_segments(csv_path, columns=columns)
        == read_segments(jsonl, columns=columns)
        == {"q1": "head", "q2": "tail"}
    )
