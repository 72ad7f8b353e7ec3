"""Hostile and malformed input: every case ends in a clear user error or in a documented, deliberate handling.

A user error is exit code 2 through the CLI, with the file and line (or the spec key path) in the message and
no traceback; a deliberate handling is checked against what docs/data.md documents (BOM, CRLF and irregular
white space read as usual, float and negative grades, duplicate identical judgments merged, ids kept as
given and escaped in the report, paths outside the spec folder allowed but recorded).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ndcg_mlflow
from ndcg_mlflow.cli import main

pytestmark = pytest.mark.usefixtures("reader_mode")  # each test with the C reader and without

REPO = Path(__file__).resolve().parents[2]

QRELS = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq2 0 d1 1\nq2 0 d4 3\n"
RUN = "q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq1 Q0 d5 3 1.0 t\nq2 Q0 d4 1 2.0 t\nq2 Q0 d1 2 1.0 t\n"


class Case:
    """A small evaluation in a folder: data files written as bytes, and a spec naming them."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.write("qrels.txt", QRELS)
        self.write("run.txt", RUN)

    def write(self, name: str, data: str | bytes) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        return path

    def spec(
        self,
        *,
        qrels: str = "qrels.txt",
        systems: dict | None = None,
        weights: str = "uniform",
        qset: str | None = None,
        gain: str = "linear",
        name: str = "spec.yaml",
        extra: str = "",
    ) -> Path:
        systems = systems or {"sys": "run.txt"}
        lines = "\n".join(f"    {k}: {json.dumps(v)}" for k, v in systems.items())
        text = (
            f"spec_version: 1\nname: hostile\n"
            f"metric: {{gain: {gain}, cutoffs: [2, all], discount: log2, ties: displayed_order,\n"
            f"         ideal: judged_catalog, empty_ideal: exclude, unjudged: zero, missing_queries: zero}}\n"
            f"queries: {{weights: {json.dumps(weights)}, set: {json.dumps(qset)}}}\n"
            f"data:\n  qrels: {json.dumps(qrels)}\n  systems:\n{lines}\n"
            f"mlflow: {{experiment: hostile}}\n{extra}"
        )
        return self.write(name, text)


@pytest.fixture
def case(tmp_path, monkeypatch) -> Case:
    monkeypatch.chdir(tmp_path)
    return Case(tmp_path / "case")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in this process; an exception other than the CLI's own handling would be a traceback."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # noqa: BLE001 - this is what the test is about
        pytest.fail(
            f"'ndcg-mlflow {' '.join(args)}' let {type(exc).__name__} escape (the CLI prints a "
            f"traceback, exit 1): {str(exc)[:300]}"
        )
    out, err = capsys.readouterr()
    return code, out, err


def user_error(capsys, *args: str) -> str:
    code, out, err = cli(capsys, *args)
    assert code == 2, (code, out[-500:], err[-2000:])
    assert "Traceback" not in err
    assert err.startswith("error: ")
    return err


def run_error(capsys, case: Case, spec: Path) -> str:
    return user_error(capsys, "run", str(spec), "--no-mlflow", "--quiet", "--out", str(case.folder / "out"))


def means(spec: Path) -> dict:
    result = ndcg_mlflow.evaluate(spec)
    return {(s, k): m["mean"] for s, keys in result.summary["systems"].items() for k, m in keys.items()}


# --------------------------------------------------------------------------- empty files


@pytest.mark.parametrize(
    "which, data, expect",
    [
        ("qrels", b"", "is empty"),
        ("qrels", b"\n  \n\t\n", "no data lines"),
        ("run", b"", "is empty"),
        ("run", b"\r\n\r\n", "no data lines"),
        ("weights", b"", "empty"),
        ("set", b"", "empty"),
    ],
)
def test_empty_data_files_are_errors_naming_the_file(case, capsys, which, data, expect):
    files = {"qrels": "qrels.txt", "run": "run.txt", "weights": "weights.txt", "set": "set.txt"}
    case.write(files[which], data)
    spec = case.spec(
        weights="weights.txt" if which == "weights" else "uniform", qset="set.txt" if which == "set" else None
    )
    err = run_error(capsys, case, spec)
    assert files[which] in err and expect in err


def test_empty_spec_is_an_error(case, capsys):
    spec = case.write("empty.yaml", b"")
    err = user_error(capsys, "validate", str(spec))
    assert "empty.yaml" in err and "expected a mapping" in err


# --------------------------------------------------------------------------- BOM, CRLF, irregular white space


def test_utf8_bom_is_skipped_in_data_files_and_spec(case, capsys):
    reference = means(case.spec())
    case.write("qrels_bom.txt", b"\xef\xbb\xbf" + QRELS.encode())
    case.write("run_bom.txt", b"\xef\xbb\xbf" + RUN.encode())
    csv_text = "query_id,doc_id,grade\n" + "".join(
        ",".join(line.split()[i] for i in (0, 2, 3)) + "\n" for line in QRELS.splitlines()
    )
    case.write("qrels_bom.csv", b"\xef\xbb\xbf" + csv_text.encode())
    for qrels in ("qrels_bom.txt", "qrels_bom.csv"):
        spec = case.spec(qrels=qrels, systems={"sys": "run_bom.txt"})
        spec.write_bytes(b"\xef\xbb\xbf" + spec.read_bytes())
        assert means(spec) == reference
        code, _out, err = cli(
            capsys, "run", str(spec), "--no-mlflow", "--quiet", "--out", str(case.folder / f"out-{qrels}")
        )
        assert code == 0, err


def test_crlf_line_ends_read_as_usual(case):
    reference = means(case.spec())
    case.write("qrels_crlf.txt", QRELS.replace("\n", "\r\n"))
    case.write("run_crlf.txt", RUN.replace("\n", "\r\n"))
    spec = case.spec(qrels="qrels_crlf.txt", systems={"sys": "run_crlf.txt"})
    spec.write_bytes(spec.read_bytes().replace(b"\n", b"\r\n"))
    assert means(spec) == reference
    table = ndcg_mlflow.readers.read_qrels(case.folder / "qrels_crlf.txt")
    assert table.doc.array.to_pylist() == ["d1", "d2", "d3", "d1", "d4"]  # no '\r' left in any id


def test_tabs_and_several_spaces_between_fields(case):
    reference = means(case.spec())
    odd = [
        "  ".join(line.split()) if i % 2 else "\t \t".join(line.split()) + "   "
        for i, line in enumerate(QRELS.splitlines())
    ]
    case.write("qrels_ws.txt", "\n".join(odd) + "\n")
    case.write(
        "run_ws.txt",
        "".join(
            "\t".join(line.split()) + "\n" if i % 2 else "   " + "    ".join(line.split()) + "\n"
            for i, line in enumerate(RUN.splitlines())
        ),
    )
    assert means(case.spec(qrels="qrels_ws.txt", systems={"sys": "run_ws.txt"})) == reference


# --------------------------------------------------------------------------- bytes that are not text


@pytest.mark.parametrize("target", ["run.txt", "qrels.txt", "qrels.csv"])
def test_non_utf8_bytes_name_the_line(case, capsys, target):
    if target == "qrels.csv":
        case.write(target, b"query_id,doc_id,grade\nq1,d1,2\nq1,d\xff\xfe2,1\nq2,d4,3\n")
        spec = case.spec(qrels=target)
        line = 3
    else:
        base = (RUN if target == "run.txt" else QRELS).encode().splitlines(keepends=True)
        base[2] = base[2].replace(b"d", b"d\xe9", 1)  # latin-1 'é'
        case.write(target, b"".join(base))
        spec = case.spec()
        line = 3
    err = run_error(capsys, case, spec)
    assert f"{target}:{line}:" in err and "UTF-8" in err


def test_non_utf8_spec(case, capsys):
    spec = case.spec()
    spec.write_bytes(spec.read_bytes().replace(b"name: hostile", b"name: hostil\xe9"))
    err = user_error(capsys, "validate", str(spec))
    assert "spec.yaml" in err and "UTF-8" in err


# --------------------------------------------------------------------------- very long lines


def test_a_several_megabyte_id_is_read_in_reasonable_time(case):
    """Deliberate: ids are strings of any length; a 1 MB document id is just an unjudged document. Reading
    it must not cost much more than reading 2 MB (hashing ids one byte position at a time across all ids
    costs one numpy pass per byte of the LONGEST id: seconds per megabyte)."""
    long_id = "x" * (1 << 20)
    case.write("run_long.txt", RUN + f"q2 Q0 {long_id} 3 0.5 t\n")
    start = time.monotonic()
    result = ndcg_mlflow.evaluate(case.spec(systems={"sys": "run_long.txt"}))
    elapsed = time.monotonic() - start
    assert result.mean("sys", "all") == means(case.spec())[("sys", "ndcg_at_all")]
    assert elapsed < 2, f"reading a run with one 1 MB id took {elapsed:.1f} s"


@pytest.mark.parametrize("suffix", [".txt", ".csv"])
def test_a_several_megabyte_garbage_line_is_an_error_with_a_short_message(case, capsys, suffix):
    garbage = "y" * (6 << 20)
    if suffix == ".csv":
        case.write("run.csv", "query_id,doc_id,score\nq1,d1,1\n" + garbage + "\n")
    else:
        case.write("run.txt", RUN + garbage + "\n")
    err = run_error(capsys, case, case.spec(systems={"sys": f"run{suffix}"}))
    assert f"run{suffix}:" in err and len(err) < 2000


def test_a_huge_field_in_a_csv_that_takes_the_line_by_line_path(case, capsys):
    """A BOM sends a CSV through the line-by-line reader; a long id there must not hit csv's field limit."""
    case.write("qrels.csv", b"\xef\xbb\xbfquery_id,doc_id,grade\nq1,d1,2\nq1," + b"z" * 200_000 + b",1\n")
    code, _out, err = cli(
        capsys, "run", str(case.spec(qrels="qrels.csv")), "--no-mlflow", "--quiet", "--out", str(case.folder / "out")
    )
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert "qrels.csv:3" in err


@pytest.mark.parametrize(
    "name, data",
    [
        ("qrels.csv", b"query_id,doc_id,grade,note\rq1,d1,2,x\rq1,d2,1\r"),  # a short row
        ("qrels.csv", b"\xef\xbb\xbfquery_id,doc_id,grade,note\rq1,d1,2,x\rq1,d2,1,y\r"),  # a BOM
        ("run.txt", RUN.replace("\n", "\r").encode()),  # a run read as one line lost every query after the first
        ("qrels.txt", QRELS.replace("\n", "\r").encode()),
    ],
    ids=["csv-short-row", "csv-bom", "trec-run", "trec-qrels"],
)
def test_carriage_return_line_ends_are_refused_naming_the_line(case, capsys, name, data):
    """Old Mac line ends (a lone CR) are refused the same way in every format, naming line 1, never read as one
    line (whose other queries a run would have dropped as fields after the tag)."""
    case.write(name, data)
    spec = case.spec(**({"qrels": name} if name.startswith("qrels") else {"systems": {"sys": name}}))
    err = run_error(capsys, case, spec)
    assert f"{name}:1: " in err and "carriage return" in err and "LF or CRLF" in err, err


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999"])
def test_non_finite_scores_name_the_line(case, capsys, value):
    lines = RUN.splitlines()
    lines[3] = f"q2 Q0 d4 1 {value} t"
    case.write("run.txt", "\n".join(lines) + "\n")
    err = run_error(capsys, case, case.spec())
    assert "run.txt:4:" in err and "finite" in err


@pytest.mark.parametrize("value", ["nan", "inf", "1e999"])
def test_non_finite_scores_in_csv_and_grades(case, capsys, value):
    case.write("run.csv", f"query_id,doc_id,score\nq1,d1,1\nq1,d2,{value}\n")
    err = run_error(capsys, case, case.spec(systems={"sys": "run.csv"}))
    assert "run.csv:3:" in err and "score" in err and "finite" in err
    case.write("qrels.txt", QRELS.replace("q2 0 d4 3", f"q2 0 d4 {value}"))
    err = run_error(capsys, case, case.spec())
    assert "qrels.txt:5:" in err and "grade" in err and "finite" in err


def test_huge_integer_in_jsonl_is_an_error(case, capsys):
    case.write(
        "run.jsonl",
        '{"query_id": "q1", "doc_id": "d1", "score": 1}\n'
        '{"query_id": "q1", "doc_id": "d2", "score": ' + "9" * 400 + "}\n",
    )
    err = run_error(capsys, case, case.spec(systems={"sys": "run.jsonl"}))
    assert "run.jsonl:2" in err


def test_deeply_nested_jsonl_value_is_an_error(case, capsys):
    case.write("run.jsonl", '{"query_id": "q1", "doc_id": "d1", "score": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    err = run_error(capsys, case, case.spec(systems={"sys": "run.jsonl"}))
    assert "run.jsonl:1" in err


def test_float_and_negative_grades(case):
    """Documented: grades may be floats; negative grades earn 0 under exponential and linear."""
    case.write("qrels.txt", "q1 0 d1 1.5\nq1 0 d2 -1\nq1 0 d3 0.5\n")
    case.write("run.txt", "q1 Q0 d2 1 3 t\nq1 Q0 d1 2 2 t\nq1 Q0 d3 3 1 t\n")
    for gain, g in (("linear", lambda x: max(x, 0.0)), ("exponential", lambda x: 2**x - 1 if x > 0 else 0.0)):
        dcg = g(-1) / math.log2(2) + g(1.5) / math.log2(3) + g(0.5) / math.log2(4)
        idcg = g(1.5) / math.log2(2) + g(0.5) / math.log2(3)
        result = ndcg_mlflow.evaluate(case.spec(gain=gain))
        assert result.mean("sys", "all") == pytest.approx(dcg / idcg, rel=1e-12)
        assert result.grades == [-1.0, 0.5, 1.5]


# --------------------------------------------------------------------------- duplicates and conflicts


def test_document_twice_in_one_query_of_a_run(case, capsys):
    case.write("run.txt", RUN + "q1 Q0 d2 4 0.5 t\n")
    err = run_error(capsys, case, case.spec())
    assert "run.txt:6:" in err and "'d2'" in err and "listed twice" in err and "line 1" in err


def test_same_judgment_twice_is_merged(case):
    reference = means(case.spec())
    case.write("qrels.txt", QRELS + "q1 0 d1 2\n")
    assert means(case.spec()) == reference


def test_conflicting_judgments_name_both_lines(case, capsys):
    case.write("qrels.txt", QRELS + "q1 0 d1 1\n")
    err = run_error(capsys, case, case.spec())
    assert "qrels.txt:6:" in err and "judged twice with different grades" in err and "line 1" in err


# --------------------------------------------------------------------------- ids


def test_ids_with_quotes_commas_and_html_in_csv(case, capsys):
    """Deliberate: a CSV id is the field's value (quoting undone), kept as is, and escaped in the report."""
    evil_q, evil_d = "<b>q1</b>", "<script>alert(1)</script>"
    case.write(
        "qrels.csv",
        "query_id,doc_id,grade\n"
        f'"{evil_q}","{evil_d}",2\n"{evil_q}","d""quoted""",1\n"{evil_q}","a,b",1\n'
        '"q\'2","d1",1\n"q\'2","<img src=x onerror=alert(2)>",2\n',
    )
    case.write(
        "run.csv",
        "query_id,doc_id,score\n"
        f'"{evil_q}","d""quoted""",3\n"{evil_q}","{evil_d}",2\n"{evil_q}","a,b",1\n'
        '"q\'2","<img src=x onerror=alert(2)>",2\n"q\'2","d1",1\n',
    )
    case.write("run2.csv", f'query_id,doc_id,score\n"{evil_q}","{evil_d}",3\n"{evil_q}","a,b",2\n"q\'2","d1",2\n')
    spec = case.spec(
        qrels="qrels.csv",
        systems={"evil": "run.csv", "other": "run2.csv"},
        extra="uncertainty: {resamples: 200, confidence: 0.9, method: percentile, seed: 1}\n"
        "comparison: {baseline: evil, test: both, correction: holm, wins_losses: 5, "
        "tie_tolerance: 0.0}\n",
    )
    out = case.folder / "out"
    code, _stdout, err = cli(capsys, "run", str(spec), "--no-mlflow", "--quiet", "--out", str(out))
    assert code == 0, err
    import pandas as pd

    table = pd.read_csv(out / "per_query.csv", dtype={"query_id": str})
    assert set(table.query_id) == {evil_q, "q'2"}
    top = pd.read_csv(out / "systems" / "evil.top.csv", dtype=str, keep_default_na=False)
    assert {evil_d, 'd"quoted"', "a,b", "<img src=x onerror=alert(2)>"} <= set(top.doc_id)
    html = (out / "report.html").read_text(encoding="utf-8")
    for raw in (evil_d, evil_q, "<img src=x"):
        assert raw not in html
    assert "&lt;script&gt;" in html or "&lt;b&gt;" in html
    assert "<script" not in html.lower()


def test_quotes_in_trec_ids_are_part_of_the_id(case):
    case.write("qrels.txt", 'q1 0 "d1" 2\nq1 0 d1 1\n')
    case.write("run.txt", 'q1 Q0 d1 1 2 t\nq1 Q0 "d1" 2 1 t\n')
    result = ndcg_mlflow.evaluate(case.spec())
    # d1 (grade 1) first, "d1" (grade 2) second
    assert result.mean("sys", "all") == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)), rel=1e-12)


def test_ids_are_strings_leading_zeros_kept(case):
    case.write("qrels.csv", "query_id,doc_id,grade\n001,0002,1\n001,2,3\n")
    case.write("run.txt", "001 Q0 0002 1 2 t\n001 Q0 2 2 1 t\n")
    result = ndcg_mlflow.evaluate(case.spec(qrels="qrels.csv"))
    assert list(result.query_ids) == ["001"]
    # '0002' (grade 1) first, '2' (grade 3) second: two different documents
    assert result.mean("sys", "all") == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)), rel=1e-12)


# --------------------------------------------------------------------------- sets that do not fit


def test_run_sharing_no_query_with_the_qrels(case, capsys):
    case.write("other.txt", "x1 Q0 d1 1 1 t\nx2 Q0 d2 1 1 t\n")
    err = run_error(capsys, case, case.spec(systems={"sys": "run.txt", "stranger": "other.txt"}))
    assert "stranger" in err and "other.txt" in err and "none of the" in err


def test_query_set_naming_unknown_queries(case, capsys):
    case.write("set.txt", "q1\nq9\n")
    err = run_error(capsys, case, case.spec(qset="set.txt"))
    assert "set.txt" in err and "'q9'" in err and "no judgments" in err


@pytest.mark.parametrize("bad", ["-1", "0", "0.0", "abc", "nan", "inf", "1e999"])
def test_bad_weights(case, capsys, bad):
    case.write("weights.txt", f"q1 1\nq2 {bad}\n")
    err = run_error(capsys, case, case.spec(weights="weights.txt"))
    assert "weights.txt:2:" in err and "q2" in err


def _directory(case):
    (case.folder / "adir").mkdir()
    return "adir"


def _fifo(case):
    os.mkfifo(case.folder / "pipe")
    return "pipe"


def _symlink_loop(case):
    os.symlink(case.folder / "loop_b", case.folder / "loop_a")
    os.symlink(case.folder / "loop_a", case.folder / "loop_b")
    return "loop_a"


def _long_name(case):
    return "x" * 5000


def _dangling(case):
    os.symlink(case.folder / "nowhere", case.folder / "dangling")
    return "dangling"


@pytest.mark.parametrize(
    "make, expect",
    [
        (_directory, "is a directory"),
        (_fifo, "not a regular file (a FIFO"),
        (_symlink_loop, "a symbolic link loop"),
        (_long_name, "file name too long"),
        (_dangling, "file not found (a symbolic link to a missing file)"),
    ],
    ids=["directory", "fifo", "symlink-loop", "name-too-long", "dangling-symlink"],
)
@pytest.mark.parametrize("role", ["qrels", "run", "weights", "set"])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_unusable_data_paths_are_named_precisely(case, capsys, make, expect, role, command):
    """Each kind of unusable path gets its own message naming the key and the path, from run and validate alike
    (exit 2, no traceback); none of them is "file not found" unless the file is missing."""
    name = make(case)
    spec = case.spec(
        **{
            "qrels": {"qrels": name},
            "run": {"systems": {"sys": name}},
            "weights": {"weights": name},
            "set": {"qset": name},
        }[role]
    )
    if command == "run":
        err = run_error(capsys, case, spec)
    else:
        err = user_error(capsys, "validate", str(spec))
    key = {"qrels": "data.qrels", "run": "data.systems.sys", "weights": "queries.weights", "set": "queries.set"}[role]
    assert f"at key '{key}': {expect}" in err, err
    assert name[-40:] in err and len(err) < 1000, err  # the path, shortened when very long


@pytest.mark.parametrize("role", ["qrels", "run", "weights", "set"])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_permission_denied_is_named_even_as_root(case, capsys, monkeypatch, role, command):
    """A file whose opening fails with EACCES (as root cannot be made to happen with chmod, open is patched)."""
    import builtins

    case.write("weights.txt", "q1 1\nq2 2\n")
    case.write("set.txt", "q1\nq2\n")
    target = {"qrels": "qrels.txt", "run": "run.txt", "weights": "weights.txt", "set": "set.txt"}[role]
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):
        if str(file).endswith(target):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    spec = case.spec(weights="weights.txt", qset="set.txt")
    monkeypatch.setattr(builtins, "open", guarded_open)
    if command == "validate":  # a folder of the path that cannot be searched: stat itself fails
        real_stat = os.stat

        def guarded_stat(path, *args, **kwargs):
            if str(path).endswith(target):
                raise PermissionError(13, "Permission denied", str(path))
            return real_stat(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", guarded_stat)
    if command == "run":
        err = run_error(capsys, case, spec)
    else:
        err = user_error(capsys, "validate", str(spec))
    assert "permission denied" in err and target in err, err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_unreadable_file_or_folder_with_chmod(case, capsys, what):
    sub = case.folder / "sub"
    sub.mkdir()
    (sub / "qrels.txt").write_text(QRELS)
    (sub / "qrels.txt" if what == "file" else sub).chmod(0)
    try:
        spec = case.spec(qrels="sub/qrels.txt")
        for err in (run_error(capsys, case, spec), user_error(capsys, "validate", str(spec))):
            assert "at key 'data.qrels': permission denied" in err and "qrels.txt" in err, err
    finally:
        sub.chmod(0o755)
        (sub / "qrels.txt").chmod(0o644)


def test_missing_file_is_still_file_not_found(case, capsys):
    err = user_error(capsys, "validate", str(case.spec(qrels="nope.txt")))
    assert "at key 'data.qrels': file not found" in err and "nope.txt" in err


# --------------------------------------------------------------------------- YAML


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system",
        "!!python/object/new:os.system",
        "!!python/name:os.system",
        "!!python/module:os",
    ],
)
def test_yaml_python_objects_are_refused(case, capsys, tag):
    marker = case.folder / "pwned"
    spec = case.spec()
    text = spec.read_text().replace("name: hostile", f'name: {tag} ["touch {marker}"]')
    spec.write_text(text)
    err = user_error(capsys, "validate", str(spec))
    assert "spec.yaml" in err and "not valid YAML" in err
    assert not marker.exists()


@pytest.mark.parametrize("value", ["!!float", "!!int 0x", "!!bool maybe", "!!timestamp yesterday"])
def test_yaml_explicit_tags_with_impossible_values(case, capsys, value):
    """PyYAML's safe constructors raise IndexError, ValueError, KeyError or AttributeError on these, not
    YAMLError: the spec error must still name the spec file."""
    spec = case.spec()
    spec.write_text(spec.read_text().replace("name: hostile", f"name: {value}"))
    err = user_error(capsys, "validate", str(spec))
    assert "spec.yaml" in err


def test_yaml_alias_bomb_over_the_alias_limit(case, capsys):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    spec = case.write("bomb.yaml", "\n".join(lines) + "\n")
    start = time.monotonic()
    err = user_error(capsys, "validate", str(spec))
    assert time.monotonic() - start < 5
    assert "bomb.yaml" in err and "aliases" in err


def _limited_memory():  # runs in the child before exec
    limit = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _validate_limited(spec: Path, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``ndcg-mlflow validate SPEC`` in a process limited to 1 GiB of address space; its result and seconds."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "ndcg_mlflow", "validate", str(spec)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limited_memory,
        check=False,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return proc, time.monotonic() - start


@pytest.mark.integration
def test_yaml_alias_bomb_within_the_alias_limit(case):
    """Exactly 50 aliases (the limit: 50 are read) still describe 2 * 3**16 = 86 million strings of 100
    characters. Shared references cost nothing to load; the spec then fails on its bad ``name``, and that
    error must not expand them (say, to print the bad value). One alias more is refused while reading."""
    bomb = '\n  - &l0 "' + "x" * 100 + '"\n'
    for i in range(1, 17):
        bomb += f"  - &l{i} [" + ", ".join([f"*l{i - 1}"] * 3) + "]\n"  # 16 * 3 = 48 aliases
    spec = case.spec()
    text = spec.read_text()
    spec.write_text(text.replace("name: hostile\n", "name:" + bomb + "  - [*l16, *l16]\n"))  # 50
    proc, elapsed = _validate_limited(spec, case.folder)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-800:])
    assert "at key 'name'" in proc.stderr and "aliases" not in proc.stderr, proc.stderr[-800:]
    assert elapsed < 20
    spec.write_text(text.replace("name: hostile\n", "name:" + bomb + "  - [*l16, *l16, *l16]\n"))  # 51
    proc, _ = _validate_limited(spec, case.folder)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-800:])
    assert "more than 50 aliases" in proc.stderr and "at key 'name'" not in proc.stderr, proc.stderr[-800:]


def test_deeply_nested_yaml_is_an_error(case, capsys):
    spec = case.write("deep.yaml", "[" * 60_000 + "]" * 60_000 + "\n")
    err = user_error(capsys, "validate", str(spec))
    assert "deep.yaml" in err


def test_duplicate_keys_in_the_spec_are_an_error(case, capsys):
    """Two values for one key must not silently become the last one: here the metric's gain."""
    spec = case.spec()
    spec.write_text(spec.read_text().replace("metric: {gain: linear,", "metric: {gain: exponential, gain: linear,"))
    err = user_error(capsys, "validate", str(spec))
    assert "gain" in err


def test_home_of_an_unknown_user_in_a_path(case, capsys):
    spec = case.spec(qrels="~no_such_user_xyz/qrels.txt")
    err = user_error(capsys, "validate", str(spec))
    assert "data.qrels" in err


def test_a_spec_over_one_megabyte(case, capsys):
    spec = case.spec()
    spec.write_text(spec.read_text() + "# padding\n" * 110_000)
    assert spec.stat().st_size > 1_000_000
    start = time.monotonic()
    err = user_error(capsys, "validate", str(spec))
    assert time.monotonic() - start < 5
    assert "spec.yaml" in err and "1000000 bytes" in err


def test_out_folder_that_is_a_file(case, capsys):
    existing = case.write("taken", "not a folder\n")
    err = user_error(capsys, "run", str(case.spec()), "--no-mlflow", "--quiet", "--out", str(existing))
    assert "taken" in err


# --------------------------------------------------------------------------- paths outside the spec folder


@pytest.mark.integration
def test_paths_outside_the_spec_folder_are_allowed_and_recorded(tracking_uri, tmp_path, capsys):
    data = Case(tmp_path / "data")
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = data.spec(qrels="../data/qrels.txt", systems={"sys": "../data/run.txt"}, name="../specs/spec.yaml")
    assert spec.resolve().parent == specs
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "run", str(spec), "--out", str(out))
    assert code == 0, err
    assert "note: data path outside the spec's folder: ../data/qrels.txt" in stdout
    summary = json.loads((out / "summary.json").read_text())
    outside = summary["paths_outside_spec_folder"]
    assert len(outside) == 2 and any(p.startswith("../data/qrels.txt -> ") for p in outside)
    assert any("outside the spec's folder" in n for n in summary["notes"])

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name("hostile")
    parents = [
        r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ndcg_mlflow.role") == "evaluation"
    ]
    assert len(parents) == 1
    tag = parents[0].data.tags["ndcg_mlflow.paths_outside_spec_folder"]
    assert "../data/qrels.txt" in tag and "../data/run.txt" in tag


# --------------------------------------------------------------------------- ids and weights at the extremes


def test_one_very_long_query_id_does_not_allocate_per_query_copies_of_it(case):
    """Fixed-width numpy strings (dtype '<U…') size every entry by the longest id: 1,001 queries with one id of
    10^5 characters took 400 MB (5,001 queries and 10^6 characters, 18.6 GiB). Ids stay Python/Arrow strings."""
    import tracemalloc

    long_id = "L" * 100_000
    lines = [f"q{i} 0 d1 1\n" for i in range(1000)] + [f"{long_id} 0 d1 2\n"]
    case.write("qrels.txt", "".join(lines))
    case.write("run.txt", "".join(f"q{i} Q0 d1 1 1.0 t\n" for i in range(0, 1000, 3)) + f"{long_id} Q0 d1 1 1 t\n")
    spec = case.spec(extra="uncertainty: {resamples: 200, confidence: 0.9, method: percentile, seed: 1}\n")
    ndcg_mlflow.evaluate(spec)  # imports and caches first: the peak below is the evaluation's own
    tracemalloc.start()
    try:
        result = ndcg_mlflow.evaluate(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert long_id in set(result.query_ids) and len(result.query_ids) == 1001
    assert result.mean("sys", 2) == pytest.approx(335 / 1001)
    assert peak < 25e6, f"peak {peak / 1e6:.0f} MB"  # about 5 MB here; a '<U100000' copy of the ids: 400 MB


def _weights_case(case, weights: dict[str, str]) -> Path:
    case.write("weights.txt", "".join(f"{q} {w}\n" for q, w in weights.items()))
    return case.spec(
        weights="weights.txt",
        name="weighted.yaml",
        extra=("uncertainty: {resamples: 500, confidence: 0.9, method: bca, seed: 7}\n"),
    )


def test_tiny_equal_weights_give_the_uniform_numbers(case):
    """All weights 5e-324 (the smallest subnormal) mean exactly what uniform weights mean; before, the weighted
    mean underflowed (0.0 or a wrong value) and n_eff was null."""
    uniform = ndcg_mlflow.evaluate(
        case.spec(extra="uncertainty: {resamples: 500, confidence: 0.9, method: bca, seed: 7}\n")
    )
    tiny = ndcg_mlflow.evaluate(_weights_case(case, {"q1": "5e-324", "q2": "5e-324"}))
    for key in ("ndcg_at_2", "ndcg_at_all"):
        a, b = uniform.summary["systems"]["sys"][key], tiny.summary["systems"]["sys"][key]
        for field in ("mean", "n_eff", "ci_low", "ci_high", "std_error"):
            assert a[field] == b[field], (key, field)
    assert tiny.per_query["weight"].tolist() == [5e-324] * len(tiny.per_query)  # the table keeps them as given


def test_huge_weights_keep_their_ratios_and_go_through_the_report(case, capsys):
    """Weights near the largest double: the same numbers as the same ratios at ordinary scale, and a complete
    output folder with its report (before: n_eff null, then a TypeError in the report)."""
    huge = _weights_case(case, {"q1": "1e308", "q2": "2.5e307"})
    code, out, err = cli(capsys, "run", str(huge), "--no-mlflow", "--quiet", "--out", str(case.folder / "out"))
    assert code == 0, err
    summary = json.loads((case.folder / "out" / "summary.json").read_text())
    assert (case.folder / "out" / "report.html").is_file() and (case.folder / "out" / "report.md").is_file()
    small = ndcg_mlflow.evaluate(_weights_case(case, {"q1": "4", "q2": "1"}))
    for key in ("ndcg_at_2", "ndcg_at_all"):
        got, expect = summary["systems"]["sys"][key], small.summary["systems"]["sys"][key]
        assert got["mean"] == pytest.approx(expect["mean"], rel=1e-15)
        assert got["n_eff"] == pytest.approx(expect["n_eff"], rel=1e-15)
        assert got["weight_sum"] == pytest.approx(1.25e308)


@pytest.mark.parametrize(
    "weights, line, expect",
    [
        ({"q1": "1e308", "q2": "1"}, 2, "times the largest weight"),  # 1e-308: a subnormal ratio
        ({"q1": "1", "q2": "5e-324"}, 2, "times the largest weight"),
        ({"q1": "1e308", "q2": "1e308"}, None, "add up to more than the largest double"),
    ],
)
def test_weights_whose_ratios_or_sum_cannot_be_represented_are_refused(case, capsys, weights, line, expect):
    err = run_error(capsys, case, _weights_case(case, weights))
    assert ("weights.txt:2:" if line else "weights.txt:") in err and expect in err, err
