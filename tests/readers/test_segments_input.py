"""Query segments as input: the segments file in every format, its refusals with file and line, the result's
``segments`` aligned with its query ids on both engines, the per-query table's ``segment`` column, the grouped
Spark path's refusal, and ``compare``'s refusal of runs whose segments differ.

Every expected value is read from the files in the test itself (``csv``, ``json``), not by the reader under test."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import metric_spec, write_qrels, write_run

import ndcg_mlflow
from ndcg_mlflow.errors import DataError, SpecError
from ndcg_mlflow.outputs import write_outputs
from ndcg_mlflow.readers import read_segments
from ndcg_mlflow.result import PER_QUERY_COLUMNS

# --------------------------------------------------------------------------- the reader


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _parquet(path: Path, columns: dict) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)
    return path


EXPECTED = {"q1": "head", "q2": "tail", "q10": "head"}


@pytest.mark.parametrize(
    "name, text",
    [
        ("seg.tsv", "query_id\tsegment\nq1\thead\nq2\ttail\nq10\thead\n"),
        ("seg.tsv", "q1\thead\nq2\ttail\n\nq10\thead\n"),  # no header; a blank line
        ("seg.txt", "q1 head\n  q2\t\ttail  \nq10   head\r\n"),  # runs of spaces and tabs; CRLF
        ("seg.txt", "query_id segment\nq1 head\nq2 tail\nq10 head\n"),
        ("seg.csv", 'query_id,segment\nq1,head\n q2 , tail \nq10,"head"\n'),
        ("seg.csv", "segment,query_id,extra\nhead,q1,x\ntail,q2,y\nhead,q10,z\n"),  # any order, other columns
        (
            "seg.jsonl",
            '{"query_id": "q1", "segment": "head"}\n{"segment": "tail", "query_id": "q2"}\n'
            '{"query_id": "q10", "segment": "head", "note": 1}\n',
        ),
    ],
)
def test_each_text_format_reads_the_same_segments(tmp_path, name, text):
    got = read_segments(_write(tmp_path / name, text))
    assert got == EXPECTED and list(got) == list(EXPECTED)  # the file's order


def test_parquet_and_compressed_text(tmp_path):
    path = _parquet(tmp_path / "seg.parquet", {"query_id": ["q1", "q2", "q10"], "segment": ["head", "tail", "head"]})
    assert read_segments(path) == EXPECTED
    # integer ids and labels are read as their decimal text, as ids are everywhere
    path = _parquet(tmp_path / "ints.parquet", {"query_id": [3, 17], "segment": [1, 2]})
    assert read_segments(path) == {"3": "1", "17": "2"}
    gz = tmp_path / "seg.tsv.gz"
    gz.write_bytes(gzip.compress(b"query_id\tsegment\nq1\thead\nq2\ttail\nq10\thead\n"))
    assert read_segments(gz) == EXPECTED
    gz = tmp_path / "seg.csv.gz"
    gz.write_bytes(gzip.compress(b"query_id,segment\nq1,head\nq2,tail\nq10,head\n"))
    assert read_segments(gz) == EXPECTED


def test_a_label_may_hold_spaces_in_tsv_with_a_header_and_in_csv(tmp_path):
    assert read_segments(_write(tmp_path / "s.tsv", "query_id\tsegment\nq1\tlong tail\n")) == {"q1": "long tail"}
    assert read_segments(_write(tmp_path / "s.csv", 'query_id,segment\nq1,"a, b"\n')) == {"q1": "a, b"}
    # declared as tsv: tabs split every line, with or without a header
    assert read_segments(_write(tmp_path / "s.txt", "q1\tlong tail\n"), "tsv") == {"q1": "long tail"}


def test_a_column_mapping_and_a_declared_format(tmp_path):
    mapping = (("query_id", "QID"), ("segment", "market"))
    path = _write(tmp_path / "s.txt", "QID,market,segment\nq1,de,x\nq2,fr,y\n")
    assert read_segments(path, "csv", mapping) == {"q1": "de", "q2": "fr"}  # 'segment' is not the mapped column
    path = _parquet(tmp_path / "m.parquet", {"QID": ["q1"], "market": ["de"]})
    assert read_segments(path, "auto", mapping) == {"q1": "de"}
    path = _write(tmp_path / "m.jsonl", '{"QID": "q1", "market": "de"}\n')
    assert read_segments(path, "jsonl", mapping) == {"q1": "de"}


@pytest.mark.parametrize(
    "name, text, line, words",
    [
        ("s.tsv", "q1\thead\nq2\ttail\nq1\thead\n", 3, "query 'q1' is listed twice (line 1 and line 3)"),
        ("s.tsv", "query_id\tsegment\nq1\thead\nq1\ttail\n", 3, "query 'q1' is listed twice (line 2 and line 3)"),
        ("s.csv", "query_id,segment\nq1,a\nq2,b\nq2,b\n", 4, "query 'q2' is listed twice (line 3 and line 4)"),
        ("s.jsonl", '{"query_id": "q1", "segment": "a"}\n{"query_id": "q1", "segment": "a"}\n', 2, "listed twice"),
        ("s.tsv", "query_id\tsegment\nq1\thead\nq2\t\n", 3, "segment is empty"),
        ("s.csv", "query_id,segment\nq1,head\nq2,  \n", 3, "segment is empty"),
        ("s.jsonl", '{"query_id": "q1", "segment": "  "}\n', 1, "segment is empty"),
        ("s.jsonl", '{"query_id": "q1", "segment": ""}\n', 1, "segment is empty"),
        ("s.jsonl", '{"query_id": "q1", "segment": null}\n', 1, "segment is null"),
        ("s.jsonl", '{"query_id": "q1", "segment": 1.5}\n', 1, "segment must be a string"),
        ("s.jsonl", '{"query_id": "q1"}\n', 1, "missing field 'segment'"),
        ("s.txt", "q1 head\nq2 long tail\n", 2, "expected 2 field(s) (query_id segment), found 3"),
        ("s.txt", "q1 head\nq2\n", 2, "expected 2 field(s) (query_id segment), found 1"),
        ("s.csv", "query_id,segment\nq1,head,x\n", 2, "expected 2 fields (query_id, segment), found 3"),
        ("s.csv", "query_id,label\nq1,head\n", 1, "missing column(s) segment"),
    ],
)
def test_refusals_name_the_file_and_line(tmp_path, name, text, line, words):
    path = _write(tmp_path / name, text)
    with pytest.raises(DataError) as err:
        read_segments(path)
    assert err.value.file == str(path) and err.value.line == line, str(err.value)
    assert words in err.value.message, str(err.value)


@pytest.mark.parametrize(
    "columns, words",
    [
        (
            {"query_id": ["q1", "q2", "q1"], "segment": ["a", "b", "a"]},
            "row 3: query 'q1' is listed twice (row 1 and row 3)",
        ),
        ({"query_id": ["q1", "q2"], "segment": ["a", None]}, "row 2: segment is null"),
        ({"query_id": ["q1", None], "segment": ["a", "b"]}, "row 2: query_id is null"),
        ({"query_id": ["q1", "q2"], "segment": ["a", " "]}, "row 2: segment is empty"),
        ({"query_id": ["q1", ""], "segment": ["a", "b"]}, "row 2: query_id is empty"),
        ({"query_id": ["q1"], "segment": [1.5]}, "column segment must hold strings"),
        ({"query_id": ["q1"], "label": ["a"]}, "missing column 'segment'"),
    ],
)
def test_parquet_refusals_name_the_file_and_row(tmp_path, columns, words):
    path = _parquet(tmp_path / "s.parquet", columns)
    with pytest.raises(DataError) as err:
        read_segments(path)
    assert err.value.file == str(path) and words in err.value.message, str(err.value)


def test_an_empty_file_is_refused(tmp_path):
    with pytest.raises(DataError, match="the segments file is empty"):
        read_segments(_write(tmp_path / "s.tsv", "query_id\tsegment\n"))


# --------------------------------------------------------------------------- the evaluation

QRELS = {f"q{i}": {"d1": i % 3, "d2": 1, "d3": (i + 1) % 2} for i in range(1, 13)}
RUNS = {
    "base": {q: ["d1", "d2", "x"] for q in QRELS},
    "cand": {q: ["d3", "d1", "d2"] if int(q[1:]) % 2 else ["d2", "d3"] for q in QRELS},
}
LABELS = ("head", "torso", "long tail")


def segments_text(queries, extra=()) -> str:
    """A TSV with a header: query i in LABELS[i % 3] (a label with a space too), and queries not evaluated."""
    lines = ["query_id\tsegment"] + [f"{q}\t{LABELS[int(q[1:]) % 3]}" for q in queries]
    return "\n".join(lines + [f"{q}\tother" for q in extra]) + "\n"


def case(folder: Path, *, segments: str | None = None, qset=None, **changes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    qrels = write_qrels(folder, QRELS)
    runs = {name: write_run(folder, ranking, f"{name}.run") for name, ranking in RUNS.items()}
    raw = metric_spec(qrels, runs, name="segments", cutoffs=(1, 3), qset=qset)
    if segments is not None:
        _write(folder / "segments.tsv", segments)
        raw["queries"]["segments"] = "segments.tsv"
    raw["uncertainty"] = {"resamples": 200, "confidence": 0.9, "method": "percentile", "seed": 5}
    raw["comparison"] = {
        "baseline": "base",
        "test": "randomization",
        "correction": "holm",
        "wins_losses": 0,
        "tie_tolerance": 0,
    }
    raw["mlflow"] = {"experiment": "segments"}
    for key, value in changes.items():
        section, field = key.split("__")
        raw.setdefault(section, {})[field] = value
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def labels_in(path: Path) -> dict[str, str]:
    """The file's query -> label, read here with the csv module (tab-separated, a header line)."""
    with path.open(encoding="utf-8", newline="") as fh:
        return {row["query_id"]: row["segment"] for row in csv.DictReader(fh, delimiter="\t")}


def test_the_result_carries_each_querys_segment(tmp_path):
    spec = case(tmp_path, segments=segments_text(QRELS, extra=["q99", "zz"]))
    result = ndcg_mlflow.evaluate(str(spec))
    file = labels_in(tmp_path / "segments.tsv")
    assert list(result.query_ids) == sorted(QRELS)
    assert result.segments is not None and result.segments.dtype == object and len(result.segments) == len(QRELS)
    assert list(result.segments) == [file[q] for q in result.query_ids]
    assert all(type(label) is str for label in result.segments)
    (info,) = [f for f in result.files if f.role == "queries.segments"]
    data = (tmp_path / "segments.tsv").read_bytes()
    assert info.sha256 == hashlib.sha256(data).hexdigest() and info.rows == len(QRELS) + 2
    assert info.declared == "segments.tsv"
    assert result.summary["files"]["queries.segments"]["sha256"] == info.sha256


def test_the_per_query_table_has_a_segment_column_after_the_weight(tmp_path):
    spec = case(tmp_path, segments=segments_text(QRELS))
    result = ndcg_mlflow.evaluate(str(spec))
    table = result.per_query
    columns = list(PER_QUERY_COLUMNS)
    assert (
        list(table.columns)
        == columns[: columns.index("weight") + 1] + ["segment"] + columns[columns.index("weight") + 1 :]
    )
    file = labels_in(tmp_path / "segments.tsv")
    assert table["segment"].tolist() == [file[q] for q in table["query_id"]]
    out = tmp_path / "out"
    write_outputs(result, out, reports=False)
    for csv_path in (out / "per_query.csv", out / "systems" / "cand.per_query.csv"):
        with csv_path.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert list(rows[0]) == list(table.columns)
        assert rows and all(row["segment"] == file[row["query_id"]] for row in rows)


def test_without_segments_the_table_is_as_before(tmp_path):
    result = ndcg_mlflow.evaluate(str(case(tmp_path)))
    assert result.segments is None
    assert list(result.per_query.columns) == list(PER_QUERY_COLUMNS)
    assert "queries.segments" not in result.summary["files"]
    out = tmp_path / "out"
    write_outputs(result, out, reports=False)
    header = (out / "per_query.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == ",".join(PER_QUERY_COLUMNS)


def test_an_evaluated_query_without_a_segment_is_refused(tmp_path):
    listed = sorted(QRELS)[4:]  # in string order q1, q10, q11, q12 come first: they are left out
    spec = case(tmp_path, segments=segments_text(listed))
    with pytest.raises(DataError) as err:
        ndcg_mlflow.evaluate(str(spec))
    missing = sorted(QRELS)[:4]
    assert err.value.file == str(tmp_path / "segments.tsv")
    assert err.value.message.startswith(f"4 evaluated queries have no segment: {', '.join(map(repr, missing))}.")
    assert "exactly one segment" in err.value.message


def test_with_a_query_set_only_its_queries_need_a_segment(tmp_path):
    chosen = ["q1", "q2", "q3"]
    tmp_path.mkdir(parents=True, exist_ok=True)
    _write(tmp_path / "set.txt", "\n".join(chosen) + "\n")
    result = ndcg_mlflow.evaluate(str(case(tmp_path, segments=segments_text(chosen), qset="set.txt")))
    assert list(result.query_ids) == chosen
    assert list(result.segments) == [LABELS[int(q[1:]) % 3] for q in chosen]


def test_a_bad_segments_file_stops_the_evaluation_naming_its_line(tmp_path):
    text = segments_text(QRELS) + "q1\thead\n"
    with pytest.raises(DataError) as err:
        ndcg_mlflow.evaluate(str(case(tmp_path, segments=text)))
    assert err.value.line == len(QRELS) + 2 and "query 'q1' is listed twice (line 2 and line" in err.value.message


def test_a_missing_segments_file_is_named_at_its_key(tmp_path):
    spec = case(tmp_path, segments=segments_text(QRELS))
    (tmp_path / "segments.tsv").unlink()
    with pytest.raises(SpecError, match=r"at key 'queries.segments': .*segments.tsv"):
        ndcg_mlflow.evaluate(str(spec))


# --------------------------------------------------------------------------- the grouped Spark path


@pytest.mark.parametrize(
    "changes, key",
    [
        ({}, "queries.segments"),
        ({"uncertainty__stratify": "segments"}, "uncertainty.stratify"),
        (
            {
                "decision__key": "ndcg_at_3",
                "decision__rule": "superiority",
                "decision__margin": 0,
                "decision__guardrails": {"regressions": {"delta": 0.1, "max_share": 0.1}},
            },
            "decision.guardrails",
        ),
    ],
)
def test_the_grouped_path_refuses_what_needs_every_query(tmp_path, changes, key):
    pytest.importorskip("pyspark")
    from ndcg_mlflow.engines.spark import check_grouped

    spec = ndcg_mlflow.load_spec(case(tmp_path, segments=segments_text(QRELS), **changes))
    with pytest.raises(SpecError) as err:
        check_grouped(spec)
    assert err.value.path == key and "every query's value on the driver" in err.value.message
    # without what needs every query, the grouped path's checks pass
    raw = yaml.safe_load((tmp_path / "spec.yaml").read_text(encoding="utf-8"))
    raw["queries"].pop("segments")
    raw["uncertainty"].pop("stratify", None)
    raw.pop("decision", None)
    check_grouped(ndcg_mlflow.load_spec(raw, base_dir=tmp_path))


# --------------------------------------------------------------------------- compare of logged runs


@pytest.mark.integration
def test_compare_refuses_runs_whose_segments_differ(tracking_uri, tmp_path):

    from ndcg_mlflow.tracking.compare import CompareError

    specs = {
        "plain": case(tmp_path / "plain"),
        "seg": case(tmp_path / "seg", segments=segments_text(QRELS)),
        "same": case(tmp_path / "same", segments=segments_text(QRELS)),
        "other": case(tmp_path / "other", segments=segments_text(QRELS).replace("long tail", "tail")),
    }
    runs = _system_runs(tracking_uri, tmp_path, specs)
    for key in specs:
        summary = json.loads((tmp_path / f"out_{key}" / "summary.json").read_text(encoding="utf-8"))
        assert summary["files"].get("queries.segments", {}).get("sha256") == (
            None if key == "plain" else hashlib.sha256((tmp_path / key / "segments.tsv").read_bytes()).hexdigest()
        )

    def compare(a: str, b: str, **kw):
        return _compare(runs, a, b, tracking_uri, tmp_path, **kw)

    sha = {k: hashlib.sha256((tmp_path / k / "segments.tsv").read_bytes()).hexdigest() for k in ("seg", "other")}
    with pytest.raises(CompareError) as err:
        compare("seg", "other")
    message = str(err.value)
    assert runs["seg"]["base"].info.run_id in message and runs["other"]["cand"].info.run_id in message
    assert sha["seg"] in message and sha["other"] in message and "'segments.tsv'" in message
    with pytest.raises(CompareError) as err:
        compare("plain", "seg")
    message = str(err.value)
    assert f"run {runs['plain']['base'].info.run_id} declared no queries.segments" in message
    assert sha["seg"] in message
    # anyway, when told: without segments, and said
    result, out, _ = compare("plain", "seg", allow_spec_mismatch=True)
    assert result.segments is None and "segment" not in result.per_query.columns
    assert any("different segments" in note for note in result.notes)
    # the same file on both sides: the segments come back from the logged per-query tables
    result, out, _ = compare("seg", "same")
    file = labels_in(tmp_path / "seg" / "segments.tsv")
    assert result.segments is not None and list(result.segments) == [file[q] for q in result.query_ids]
    assert result.spec.queries.segments is not None and result.spec.queries.segments.declared == "segments.tsv"
    with (out / "per_query.csv").open(encoding="utf-8", newline="") as fh:
        assert all(row["segment"] == file[row["query_id"]] for row in csv.DictReader(fh))


def _system_runs(tracking_uri: str, tmp_path: Path, specs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Each spec run and logged (``run SPEC``, output in ``out_<key>``), and its system runs by system name."""
    from helpers import client_for

    from ndcg_mlflow.cli import main

    client = client_for(tracking_uri)
    runs = {}
    for key, path in specs.items():
        assert main(["run", str(path), "--out", str(tmp_path / f"out_{key}"), "--quiet"]) == 0, key
        key_tag = (tmp_path / f"out_{key}" / "run_key.txt").read_text(encoding="utf-8").strip()
        found = client.search_runs(
            [client.get_experiment_by_name("segments").experiment_id],
            filter_string=f"tags.`ndcg_mlflow.run_key` = '{key_tag}'",
        )
        runs[key] = {r.data.tags["ndcg_mlflow.system"]: r for r in found if r.data.tags["ndcg_mlflow.role"] == "system"}
    return runs


def _compare(runs: dict[str, dict[str, Any]], a: str, b: str, tracking_uri: str, tmp_path: Path, **kw: Any):
    """``compare_runs`` of run ``a``'s baseline and run ``b``'s candidate (from :func:`_system_runs`), not logged,
    its output in ``cmp_<a>_<b>``."""
    from ndcg_mlflow.tracking.compare import compare_runs

    return compare_runs(
        runs[a]["base"].info.run_id,
        runs[b]["cand"].info.run_id,
        tracking_uri=tracking_uri,
        out=tmp_path / f"cmp_{a}_{b}",
        log=False,
        **kw,
    )


@pytest.mark.integration
def test_compare_without_segments_computes_the_declared_statistics(tracking_uri, tmp_path):
    """Runs compared without segments (one declared them) keep every other declared statistic: the tail risk at
    the logged alphas, not the defaults; the settings' run stratified by segments, which no comparison without
    segments can compute, is refused, saying why."""
    from ndcg_mlflow.tracking.compare import CompareError

    alphas = [2, 7]
    specs = {
        "plain": case(tmp_path / "plain", comparison__risk_alpha=alphas),
        "seg": case(tmp_path / "seg", segments=segments_text(QRELS), comparison__risk_alpha=alphas),
        "strat": case(
            tmp_path / "strat",
            segments=segments_text(QRELS),
            comparison__risk_alpha=alphas,
            uncertainty__stratify="segments",
        ),
    }
    runs = _system_runs(tracking_uri, tmp_path, specs)

    def compare(a: str, b: str):
        return _compare(runs, a, b, tracking_uri, tmp_path, allow_spec_mismatch=True)

    for a, b in (("plain", "seg"), ("seg", "plain")):
        result, out, _ = compare(a, b)
        assert result.segments is None
        assert result.spec.comparison.risk_alpha == (2.0, 7.0), (a, b)
        assert result.analysis.comparisons
        for row in result.analysis.comparisons:
            assert sorted(row["urisk"]) == sorted(row["trisk"]) == ["2", "7"], (a, b)
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert all(sorted(c["urisk"]) == ["2", "7"] for c in summary["comparisons"])
    for a, b in (("strat", "plain"), ("plain", "strat")):
        with pytest.raises(CompareError) as err:
            compare(a, b)
        assert "uncertainty.stratify" in str(err.value) and "segments" in str(err.value), (a, b)
    # the same file on both sides: the stratified intervals as declared
    result, _, _ = compare("strat", "strat")
    assert result.spec.uncertainty.stratify and result.spec.comparison.risk_alpha == (2.0, 7.0)


# --------------------------------------------------------------------------- both engines


@pytest.mark.integration
def test_the_spark_engine_carries_the_same_segments(tmp_path, spark):
    spec = case(tmp_path, segments=segments_text(QRELS, extra=["q99"]))
    local = ndcg_mlflow.evaluate(str(spec))
    on_spark = ndcg_mlflow.evaluate(str(spec), engine=ndcg_mlflow.Spark(spark))
    assert on_spark.engine == "spark"
    assert list(on_spark.query_ids) == list(local.query_ids)
    assert on_spark.segments is not None and on_spark.segments.dtype == object
    file = labels_in(tmp_path / "segments.tsv")
    assert list(on_spark.segments) == [file[q] for q in on_spark.query_ids] == list(local.segments)
    assert on_spark.per_query["segment"].tolist() == local.per_query["segment"].tolist()
    (info,) = [f for f in on_spark.files if f.role == "queries.segments"]
    assert info.sha256 == hashlib.sha256((tmp_path / "segments.tsv").read_bytes()).hexdigest()
    # the same refusal on Spark as locally, from the same words
    _write(tmp_path / "segments.tsv", segments_text(sorted(QRELS)[1:]))
    with pytest.raises(DataError, match=r"1 evaluated queries have no segment: 'q1'\."):
        ndcg_mlflow.evaluate(str(spec), engine=ndcg_mlflow.Spark(spark))


@pytest.mark.parametrize(
    "name, text",
    [
        ("s.txt", "query_id segment\nq1 head\nq2 tail\n"),
        ("s.tsv", "query_id\tsegment\nq1\thead\nq2\ttail\n"),
        ("s.csv", "query_id,segment\nq1,head\nq2,tail\n"),
        ("s.jsonl", '{"query_id": "q1", "segment": "head"}\n{"query_id": "q2", "segment": "tail"}\n'),
        ("s.parquet", None),
    ],
)
@pytest.mark.parametrize("mapping", [{"segment": "query_id"}, {"query_id": "segment"}])
def test_a_mapping_giving_one_column_both_purposes_is_refused(tmp_path, name, text, mapping):
    """``{segment: query_id}`` (the query ids read as their own segments: one query a segment) or
    ``{query_id: segment}``: the other column is not mapped, so it is read from the column of its own name, which
    the mapping gives to the first. Refused, naming the file and the column, as a run's mapping is."""
    if text is None:
        path = _parquet(tmp_path / name, {"query_id": ["q1", "q2"], "segment": ["head", "tail"]})
    else:
        path = _write(tmp_path / name, text)
    with pytest.raises(DataError) as err:
        read_segments(path, "auto", tuple(mapping.items()))
    column = next(iter(mapping.values()))
    assert err.value.file == str(path), str(err.value)
    assert f"reads column {column!r} as the" in err.value.message, str(err.value)
    assert "each source column serves one purpose" in err.value.message, str(err.value)


def test_a_segments_mapping_giving_the_query_ids_a_second_purpose_stops_the_evaluation(tmp_path):
    """Through the spec (``queries.segments: {path, columns: {segment: query_id}}``): no evaluation of one-query
    segments; the error names the segments file."""
    folder = tmp_path
    judgments = {f"q{i}": {"d1": 1, "d2": 0} for i in range(4)}
    ranking = {f"q{i}": ["d1", "d2"] for i in range(4)}
    spec = metric_spec(write_qrels(folder, judgments), {"a": write_run(folder, ranking)}, name="seg-mapping")
    _write(folder / "seg.csv", "query_id,segment\n" + "".join(f"q{i},s{i % 2}\n" for i in range(4)))
    spec["queries"] = {**spec.get("queries", {}), "segments": {"path": "seg.csv", "columns": {"segment": "query_id"}}}
    with pytest.raises(DataError) as err:
        ndcg_mlflow.evaluate(spec, base_dir=folder)
    assert err.value.file is not None and err.value.file.endswith("seg.csv"), str(err.value)
    assert "serves one purpose" in err.value.message


@pytest.mark.integration
def test_compare_computes_what_both_runs_declared_or_refuses(tracking_uri, tmp_path):
    """Settings both runs' evaluations declared with different values are not settled by taking run A's: the
    comparison refuses, naming each field and its flag, until a flag settles it; the tail risk is computed at
    every alpha either declared."""
    from ndcg_mlflow.tracking.compare import CompareError, compare_runs

    specs = {
        "a": case(tmp_path / "a", comparison__risk_alpha=[2, 7]),
        "b": case(
            tmp_path / "b",
            comparison__risk_alpha=[7, 3],
            uncertainty__confidence=0.99,
            uncertainty__method="bca",
            comparison__tie_tolerance=0.01,
        ),
    }
    runs = _system_runs(tracking_uri, tmp_path, specs)

    def compare(overrides=None, tag=""):
        return compare_runs(
            runs["a"]["base"].info.run_id,
            runs["b"]["cand"].info.run_id,
            tracking_uri=tracking_uri,
            out=tmp_path / f"cmp{tag}",
            log=False,
            overrides=overrides,
        )

    with pytest.raises(CompareError) as err:
        compare()
    text = str(err.value)
    for field, flag in (
        ("uncertainty.confidence", "--confidence"),
        ("uncertainty.method", "--method"),
        ("comparison.tie_tolerance", "--tie-tolerance"),
    ):
        assert field in text and flag in text, field
    assert "uncertainty.resamples" not in text and "risk_alpha" not in text
    with pytest.raises(CompareError) as err:  # one flag settles one field: the others are still named
        compare({"confidence": 0.99})
    assert "uncertainty.confidence" not in str(err.value) and "uncertainty.method" in str(err.value)
    result, _, _ = compare({"confidence": 0.99, "method": "bca", "tie_tolerance": 0.01}, "ok")
    assert result.spec.uncertainty.confidence == 0.99 and result.spec.uncertainty.method == "bca"
    assert result.spec.comparison.tie_tolerance == 0.01
    assert result.spec.comparison.risk_alpha == (2.0, 7.0, 3.0)
    [row] = result.analysis.comparisons[:1]
    assert sorted(row["urisk"]) == ["2", "3", "7"]
