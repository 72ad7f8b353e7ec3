"""End to end: the CLI evaluates the demo and logs it to a real local SQLite MLflow store; read it all back."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from helpers import client_for, runs_of_experiment

from ndcg_mlflow.cli import main


def _runs(uri, experiment="demo-product-search"):
    return runs_of_experiment(client_for(uri), experiment, deleted=False)


def _table(client, run_id: str, name: str, tmp: Path) -> list[dict]:
    """The rows of an MLflow table logged with ``log_table``, as dicts."""
    import uuid

    path = Path(client.download_artifacts(run_id, name, str(tmp / uuid.uuid4().hex)))
    table = json.loads(path.read_text())
    return [dict(zip(table["columns"], row)) for row in table["data"]]


@pytest.mark.integration
def test_demo_run_logs_everything(tracking_uri, demo_copy, tmp_path, capsys):
    out = tmp_path / "out"
    spec_path = demo_copy / "demo.yaml"
    assert main(["run", str(spec_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nDCG@10" in printed and "evaluation run:" in printed
    assert "against baseline 'bm25'" in printed and "largest wins / losses" in printed

    summary = json.loads((out / "summary.json").read_text())
    spec_sha = hashlib.sha256(spec_path.read_bytes()).hexdigest()
    assert summary["spec_sha256"] == spec_sha
    assert (out / "spec.yaml").read_bytes() == spec_path.read_bytes()

    runs = _runs(tracking_uri)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["ndcg_mlflow.spec_sha256"] == spec_sha
    assert parent.data.tags["ndcg_mlflow.logging"] == "complete"
    for name, rel in (("qrels", "demo/qrels.tsv"), ("system.bm25", "demo/bm25.run")):
        expected = hashlib.sha256((demo_copy / rel).read_bytes()).hexdigest()
        assert parent.data.tags[f"ndcg_mlflow.data.{name}.sha256"] == expected
    assert parent.data.tags["ndcg_mlflow.version"]

    params = parent.data.params
    assert params["metric.gain"] == "exponential"
    assert params["metric.cutoffs"] == "5,10,all"
    assert params["metric.ties"] == "displayed_order"
    assert params["metric.empty_ideal"] == "exclude"
    assert params["metric.missing_queries"] == "zero"
    assert params["queries.weights"] == "uniform"
    assert params["data.systems.reranker-v2"] == "demo/reranker_v2.run"

    client = client_for(tracking_uri)
    by_name = {c.data.tags["ndcg_mlflow.system"]: c for c in children}
    assert set(by_name) == {"bm25", "reranker-v2", "dense-ties"}
    for name, child in by_name.items():
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED"
        figures = {row["key"]: row for row in _table(client, child.info.run_id, "figures_table.json", tmp_path)}
        assert {row["system"] for row in figures.values()} == {name}
        for key in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all"):
            entry = summary["systems"][name][key]
            assert child.data.metrics[key] == pytest.approx(entry["mean"], rel=1e-12)
            assert parent.data.metrics[f"{name}.{key}"] == pytest.approx(entry["mean"], rel=1e-12)
            for bound in ("ci_low", "ci_high"):  # the interval: metrics of the system's run, not of the parent
                assert child.data.metrics[f"{key}.{bound}"] == pytest.approx(entry[bound], rel=1e-12)
                assert f"{name}.{key}.{bound}" not in parent.data.metrics
            for field in (
                "n_evaluated",
                "n_excluded",
                "n_missing",
                "n_empty_ideal",
                "std_error",
                "n_eff",
                "weight_sum",
                "judged_coverage",
            ):  # counts and the rest: the figures table, not metrics
                # MLflow writes a table's numbers to 10 decimal places (pandas' to_json)
                assert figures[key][field] == pytest.approx(entry[field], rel=1e-12, abs=1e-10), (name, key, field)
                assert not any(field in metric for metric in child.data.metrics), field
        # its own per-query table, as an MLflow table
        rows = _table(client, child.info.run_id, "per_query_table.json", tmp_path)
        assert len(rows) == 240 * 3 and {r["system"] for r in rows} == {name}
    assert _table(client, by_name["reranker-v2"].info.run_id, "figures_table.json", tmp_path)[1]["n_missing"] == 1
    for name in by_name:
        entry = summary["systems"][name]["ndcg_at_10"]
        assert entry["ci_low"] <= entry["mean"] <= entry["ci_high"]
    assert parent.data.params["n_queries"] == "240"

    # the parent: every mean, and each candidate's comparison at the headline cutoff (4 figures), nothing else
    comparisons = summary["comparisons"]
    headline = {c["candidate"]: c for c in comparisons if c["key"] == "ndcg_at_10"}
    assert len(parent.data.metrics) == 3 * 3 + 2 * 4
    for name, c in headline.items():
        for figure in ("delta", "ci_low", "ci_high", "p_corrected"):
            assert parent.data.metrics[f"{name}.compare.ndcg_at_10.{figure}"] == pytest.approx(c[figure], rel=1e-12)
    note = parent.data.tags["mlflow.note.content"]
    assert note.startswith("Against baseline bm25 at nDCG@10:\n- reranker-v2: +0.0")
    assert f"wins/ties/losses {headline['dense-ties']['wins']}/" in note
    assert {(c["candidate"], c["key"]) for c in comparisons} == {
        (c, k) for c in ("reranker-v2", "dense-ties") for k in ("ndcg_at_5", "ndcg_at_10", "ndcg_at_all")
    }
    assert not any(key.startswith("compare.") for key in by_name["bm25"].data.metrics)  # the baseline
    for c in comparisons:
        child = by_name[c["candidate"]]
        assert child.data.tags["ndcg_mlflow.baseline"] == "bm25"
        for figure in ("delta", "ci_low", "ci_high", "p_randomization", "p_corrected"):
            key = f"compare.{c['key']}.{figure}"  # no system in the key: it charts across candidates' runs
            assert child.data.metrics[key] == pytest.approx(c[figure], rel=1e-12), key
        assert f"compare.{c['key']}.p_t_test" not in child.data.metrics  # test: randomization only
        table = {r["key"]: r for r in _table(client, child.info.run_id, "comparisons_table.json", tmp_path)}
        for figure in ("effect_size_dz", "relative_delta", "wins", "ties", "losses", "n_paired"):
            assert table[c["key"]][figure] == pytest.approx(c[figure], rel=1e-12, abs=1e-10), figure
    # the columns a reviewer reads first lead the table the MLflow UI shows, then every other column of the CSV
    rows = _table(client, parent.info.run_id, "comparisons_table.json", tmp_path)
    first = ["candidate", "baseline", "key", "delta", "ci_low", "ci_high", "p_corrected", "wins", "ties", "losses"]
    assert list(rows[0])[: len(first)] == first and len(rows) == len(comparisons)
    csv_columns = (out / "comparisons.csv").read_text().splitlines()[0].split(",")
    assert sorted(rows[0]) == sorted(csv_columns)

    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {
        "spec.yaml",
        "summary.json",
        "per_query.csv",
        "per_query_table.json",
        "comparisons_table.json",
        "figures_table.json",
        "comparisons.csv",
        "wins_losses.json",
        "wins_losses.md",
    } <= names
    local = Path(client.download_artifacts(parent.info.run_id, "spec.yaml", str(tmp_path / "dl")))
    assert local.read_bytes() == spec_path.read_bytes()
    assert len(_table(client, parent.info.run_id, "per_query_table.json", tmp_path)) == 3 * 240 * 3
    assert len(_table(client, parent.info.run_id, "figures_table.json", tmp_path)) == 3 * 3
    child_files = {a.path for a in client.list_artifacts(by_name["bm25"].info.run_id)}
    assert {
        "bm25.per_query.csv",
        "bm25.top.csv",
        "summary.json",
        "per_query_table.json",
        "figures_table.json",
        "sensitivity_table.json",
    } <= child_files
    # the MLflow UI finds a run's tables through this tag, which log_table would have set
    for run_id, tables in (
        (
            parent.info.run_id,
            {"per_query_table.json", "figures_table.json", "comparisons_table.json", "sensitivity_table.json"},
        ),
        (
            by_name["reranker-v2"].info.run_id,
            {"per_query_table.json", "figures_table.json", "comparisons_table.json", "sensitivity_table.json"},
        ),
        (by_name["bm25"].info.run_id, {"per_query_table.json", "figures_table.json", "sensitivity_table.json"}),
    ):
        listed = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
        assert {e["path"] for e in listed} == tables and {e["type"] for e in listed} == {"table"}
        assert tables <= {a.path for a in client.list_artifacts(run_id)}

    per_query = pd.read_csv(out / "per_query.csv", dtype={"cutoff": str})
    for col in (
        "system",
        "query_id",
        "cutoff",
        "ndcg",
        "dcg",
        "idcg",
        "idcg_candidates",
        "judged_coverage",
        "weight",
        "status",
    ):
        assert col in per_query.columns
    bm25_10 = per_query[(per_query.system == "bm25") & (per_query.cutoff == "10")]
    assert bm25_10.ndcg.mean() == pytest.approx(summary["systems"]["bm25"]["ndcg_at_10"]["mean"], rel=1e-12)
    assert bm25_10.ndcg.isna().sum() == summary["systems"]["bm25"]["ndcg_at_10"]["n_excluded"]


@pytest.mark.integration
def test_bad_spec_exits_without_traceback_or_run(tracking_uri, demo_copy, capsys):
    text = (demo_copy / "demo.yaml").read_text().replace("cutoffs:", "cuttoffs:")
    bad = demo_copy / "bad.yaml"
    bad.write_text(text)
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "metric.cuttoffs" in err and "did you mean 'cutoffs'" in err
    assert "Traceback" not in err
    assert _runs(tracking_uri) == []
    assert not Path("ndcg_reports").exists()


@pytest.mark.integration
def test_bad_data_file_exits_without_run(tracking_uri, demo_copy, capsys):
    run = demo_copy / "demo" / "bm25.run"
    lines = run.read_text().splitlines()
    lines[41] = lines[41].rsplit(" ", 2)[0] + " nan bm25"
    run.write_text("\n".join(lines) + "\n")
    assert main(["run", str(demo_copy / "demo.yaml")]) == 2
    err = capsys.readouterr().err
    assert "bm25.run:42:" in err and "score" in err
    assert "Traceback" not in err
    assert _runs(tracking_uri) == []


@pytest.mark.integration
def test_unreachable_server_keeps_local_results(demo_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    out = tmp_path / "out"
    code = main(["run", str(demo_copy / "demo.yaml"), "--out", str(out), "--tracking-uri", "http://127.0.0.1:9"])
    assert code == 3
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err and str(out) in err
    summary = json.loads((out / "summary.json").read_text())
    assert not math.isnan(summary["systems"]["bm25"]["ndcg_at_10"]["mean"])
    assert (out / "per_query.csv").is_file()


def test_validate_command(demo_copy, capsys):
    assert main(["validate", str(demo_copy / "demo.yaml")]) == 0
    assert "valid spec 'demo-product-search'" in capsys.readouterr().out
    (demo_copy / "demo" / "bm25.run").unlink()
    assert main(["validate", str(demo_copy / "demo.yaml")]) == 2
    err = capsys.readouterr().err
    assert "data.systems.bm25" in err and "file not found" in err


def test_no_mlflow_option_writes_local_only(demo_copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec_path = demo_copy / "demo.yaml"
    spec_path.write_text(spec_path.read_text().replace("resamples: 10000", "resamples: 200"))
    assert main(["run", str(demo_copy / "demo.yaml"), "--no-mlflow", "--out", "o", "--quiet"]) == 0
    assert (tmp_path / "o" / "summary.json").is_file()
    assert not (tmp_path / "mlflow.db").exists()


DOCUMENTED_SEARCHES = {  # the searches of docs/mlflow.md ("Searching runs"), with the values filled in
    "spec": "tags.`ndcg_mlflow.spec_sha256` = '{spec}'",
    "judgments": "tags.`ndcg_mlflow.data.qrels.sha256` = '{qrels}'",
    "system": "tags.`ndcg_mlflow.data.system.reranker-v2.sha256` LIKE '%'",
    "run_file": "tags.`ndcg_mlflow.data.system.reranker-v2.sha256` = '{run_file}'",
    "custom": "tags.ticket = 'SEARCH-123'",
}


@pytest.mark.integration
def test_the_documented_searches_find_every_kind_of_run(tracking_uri, demo_copy, tmp_path):
    """An evaluation (with --set, spec tags and --tag) and a comparison of two of its system runs; each search
    of docs/mlflow.md finds the evaluation run, the system runs and the comparison run it should."""
    import mlflow

    page = (Path(__file__).resolve().parents[2] / "docs" / "mlflow.md").read_text(encoding="utf-8")
    for search in DOCUMENTED_SEARCHES.values():
        assert search.split(" = ")[0].split(" LIKE ")[0] in page, search
    spec_path = demo_copy / "demo.yaml"
    assert (
        main(
            [
                "run",
                str(spec_path),
                "--out",
                str(tmp_path / "o"),
                "--quiet",
                "--set",
                "uncertainty.resamples=200",
                "--set",
                "report.sensitivity=false",
                "--set",
                "mlflow.tags={team: search}",
                "--tag",
                "ticket=SEARCH-123",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    recorded = (tmp_path / "o" / "spec.yaml").read_text()
    assert hashlib.sha256(recorded.encode()).hexdigest() == summary["spec_sha256"]  # the digest of what ran
    assert "resamples: 200" in recorded and "--set uncertainty.resamples=200" in recorded
    assert summary["spec_sha256"] != hashlib.sha256(spec_path.read_bytes()).hexdigest()
    child = {
        r.data.tags["ndcg_mlflow.system"]: r.info.run_id
        for r in _runs(tracking_uri)
        if r.data.tags["ndcg_mlflow.role"] == "system"
    }
    assert (
        main(
            [
                "compare",
                child["bm25"],
                child["reranker-v2"],
                "--out",
                str(tmp_path / "c"),
                "--quiet",
                "--tag",
                "ticket=SEARCH-123",
            ]
        )
        == 0
    )
    values = {
        "spec": summary["spec_sha256"],
        "qrels": summary["files"]["qrels"]["sha256"],
        "run_file": summary["files"]["system:reranker-v2"]["sha256"],
    }

    def kinds(search: str) -> list[tuple[str, str]]:
        found = mlflow.search_runs(
            search_all_experiments=True,
            output_format="list",
            filter_string=DOCUMENTED_SEARCHES[search].format(**values),
        )
        return sorted((r.data.tags["ndcg_mlflow.role"], r.data.tags.get("ndcg_mlflow.system", "")) for r in found)

    every = [
        ("comparison", ""),
        ("evaluation", ""),
        ("system", "bm25"),
        ("system", "dense-ties"),
        ("system", "reranker-v2"),
    ]
    assert kinds("spec") == every
    assert kinds("judgments") == every
    assert kinds("custom") == every
    assert kinds("system") == kinds("run_file") == [("comparison", ""), ("evaluation", ""), ("system", "reranker-v2")]
    runs = {r.data.tags["ndcg_mlflow.role"]: r for r in _runs(tracking_uri)}
    comparison = runs["comparison"]
    assert comparison.data.tags["ndcg_mlflow.baseline"] == "bm25"
    assert comparison.data.tags["ndcg_mlflow.candidate"] == "reranker-v2"
    assert "team" not in comparison.data.tags  # the spec's tags are the evaluation's; --tag is on every run
    assert all(
        r.data.tags["team"] == "search" for r in _runs(tracking_uri) if r.data.tags["ndcg_mlflow.role"] != "comparison"
    )
    # one key per figure across run kinds: the comparison run charts what the candidate's system run charts
    candidate = next(r for r in _runs(tracking_uri) if r.data.tags.get("ndcg_mlflow.system") == "reranker-v2")
    compare_keys = {k for k in candidate.data.metrics if k.startswith("compare.")}
    assert compare_keys and compare_keys <= set(comparison.data.metrics)
    for key in compare_keys - {k for k in compare_keys if k.endswith("p_corrected")}:  # another family
        assert comparison.data.metrics[key] == pytest.approx(candidate.data.metrics[key], rel=1e-9), key
    # run names a person tells apart: spec name, systems, data digest, time
    parent = runs["evaluation"]
    digest = parent.data.tags["ndcg_mlflow.data_sha256"]
    assert re.fullmatch(
        rf"demo-product-search · bm25, reranker-v2, dense-ties · data {digest[:8]} · "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
        parent.info.run_name,
    ), parent.info.run_name
    assert candidate.info.run_name.startswith("reranker-v2 · demo-product-search · ")
    assert comparison.info.run_name.startswith("compare reranker-v2 vs bm25 · ")
    assert "nDCG evaluation 'demo-product-search'" in parent.data.tags["mlflow.note.content"]
    assert all(r.data.tags.get("mlflow.note.content") for r in _runs(tracking_uri))


@pytest.mark.integration
def test_spec_run_name_names_the_runs(tracking_uri, demo_copy, tmp_path):
    assert (
        main(
            [
                "run",
                str(demo_copy / "demo.yaml"),
                "--out",
                str(tmp_path / "o"),
                "--quiet",
                "--set",
                "uncertainty.resamples=200",
                "--set",
                "report.sensitivity=false",
                "--set",
                "mlflow.run_name=nightly 2026-12-01",
            ]
        )
        == 0
    )
    names = sorted(r.info.run_name for r in _runs(tracking_uri))
    assert names == [
        "bm25 · nightly 2026-12-01",
        "dense-ties · nightly 2026-12-01",
        "nightly 2026-12-01",
        "reranker-v2 · nightly 2026-12-01",
    ]


@pytest.mark.integration
@pytest.mark.parametrize("field", ["name", "mlflow.run_name"])
def test_run_names_hold_the_spec_names_control_characters_escaped(tracking_uri, demo_copy, tmp_path, field):
    """A spec name (or mlflow.run_name) holding an escape sequence, a bell, a line break, a backslash and a C1
    control reaches MLflow's SQLite store as one line of visible text, as the terminal writes it, which reads back
    as the given name (the control characters went into the store as they were)."""
    import ast

    given = "evil\x1b[31m\r\nx\x07\\y\x85z"
    yaml_text = '"evil\\e[31m\\r\\nx\\a\\\\y\\x85z"'
    argv = ["run", str(demo_copy / "demo.yaml"), "--out", str(tmp_path / "o"), "--quiet"]
    argv += ["--set", "uncertainty.resamples=200", "--set", "report.sensitivity=false", "--set", f"{field}={yaml_text}"]
    assert main(argv) == 0
    shown = "evil\\x1b[31m\\r\\nx\\x07\\\\y\\x85z"
    assert ast.literal_eval(f'"{shown}"') == given  # (reads back as the given name)
    names = [r.info.run_name for r in _runs(tracking_uri)]
    assert len(names) == 4 and all(shown in name for name in names), names  # the evaluation's, the systems'
    for name in names:
        assert not any(c in name for c in "\x1b\r\n\x07\x85"), repr(name)


@pytest.mark.integration
@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_system_names_mlflow_accepts_are_logged_and_compared(request, tmp_path, monkeypatch, store):
    """A '/' and a space in a system name: MLflow accepts them in keys, so the evaluation logs them, its files
    are written, and compare reads the system's run back (its artifacts through a server too)."""
    from helpers import write_qrels, write_run

    tracking_uri = request.getfixturevalue("tracking_uri")
    if store == "server":
        tracking_uri = request.getfixturevalue("server").uri
        monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    name = f"odd-names-{store}"

    write_qrels(tmp_path, {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}, "q3": {"d": 3, "e": 1}})
    base = write_run(tmp_path, {"q1": ["b", "a"], "q2": ["x", "c"], "q3": ["e", "d"]}, "base.run")
    cand = write_run(tmp_path, {"q1": ["a", "b"], "q2": ["c"], "q3": ["d", "e"]}, "cand.run")
    spec = {
        "spec_version": 1,
        "name": name,
        "metric": {"preset": "trec_eval", "cutoffs": [2]},
        "queries": {"weights": "uniform"},
        "data": {"qrels": "qrels.txt", "systems": {"team/base v1": base, "team/model v2": cand}},
        "uncertainty": {"resamples": 200, "confidence": 0.9, "method": "percentile", "seed": 1},
        "comparison": {
            "baseline": "team/base v1",
            "test": "both",
            "correction": "none",
            "wins_losses": 2,
            "tie_tolerance": 1e-9,
        },
    }
    import yaml

    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert (tmp_path / "o" / "systems" / "team~model v2.per_query.csv").is_file()
    runs = {r.data.tags.get("ndcg_mlflow.system"): r for r in _runs(tracking_uri, name)}
    parent = runs[None]
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert parent.data.metrics["team/model v2.ndcg_at_2"] == pytest.approx(
        summary["systems"]["team/model v2"]["ndcg_at_2"]["mean"], rel=1e-12
    )
    cand_run = runs["team/model v2"]
    assert cand_run.data.metrics["compare.ndcg_at_2.delta"] == pytest.approx(summary["comparisons"][0]["delta"])
    assert "compare.ndcg_at_2.p_t_test" in cand_run.data.metrics  # test: both
    out = tmp_path / "c"
    assert (
        main(
            [
                "compare",
                runs["team/base v1"].info.run_id,
                cand_run.info.run_id,
                "--out",
                str(out),
                "--quiet",
                "--no-mlflow",
            ]
        )
        == 0
    )
    got = json.loads((out / "summary.json").read_text())["comparisons"][0]
    assert got["delta"] == pytest.approx(summary["comparisons"][0]["delta"], rel=1e-12)


@pytest.mark.integration
@pytest.mark.parametrize("command", ["compare", "report"])
def test_reading_runs_without_a_store_creates_none(tmp_path, command):
    """compare / report in a folder without the store: no mlflow.db is created, the message names the store
    searched, exit 2 (a user error)."""
    from helpers import run_cli

    args = ["compare", "0" * 32, "1" * 32] if command == "compare" else ["report", "0" * 32]
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()
    assert "Creating initial MLflow database tables" not in done.stderr + done.stdout
    assert f"no MLflow store at {tmp_path / 'mlflow.db'}" in done.stderr and "--tracking-uri" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.integration
@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_a_run_id_that_does_not_exist_is_a_user_error(request, tmp_path, capsys, command, store):
    uri = request.getfixturevalue("tracking_uri") if store == "sqlite" else request.getfixturevalue("server").uri
    args = ["compare", "0" * 32, "1" * 32] if command == "compare" else ["report", "0" * 32]
    assert main([*args, "--out", str(tmp_path / "x"), "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert f"run '{'0' * 32}' not found in the MLflow store {uri}" in err
    assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_progress_goes_to_a_terminal_only(capsys, monkeypatch):
    import io
    import logging

    from ndcg_mlflow.render import terminal

    terminal.configure_logging(quiet=False)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    terminal.progress_reporter(quiet=False)("reading system 'x'")
    assert "reading system 'x'" in tty.getvalue()
    tty.truncate(0)
    tty.seek(0)
    terminal.progress_reporter(quiet=True)("resampling queries")
    assert tty.getvalue() == ""
    pipe = io.StringIO()  # not a terminal: progress is only logged at DEBUG
    monkeypatch.setattr("sys.stderr", pipe)
    terminal.progress_reporter(quiet=False)("computing nDCG")
    assert pipe.getvalue() == ""
    assert logging.getLogger("ndcg_mlflow").level == logging.INFO


@pytest.mark.integration
def test_upload_tags_and_tags_set_again_on_a_logged_folder(tracking_uri, demo_copy, tmp_path, capsys):
    """--tag on upload reaches every run; an upload of a folder logged before reuses its runs and sets the new
    tags on them; a --tag MLflow would refuse stops the command before any work."""
    out = tmp_path / "o"
    assert (
        main(
            [
                "run",
                str(demo_copy / "demo.yaml"),
                "--out",
                str(out),
                "--quiet",
                "--no-mlflow",
                "--set",
                "uncertainty.resamples=200",
                "--set",
                "report.sensitivity=false",
            ]
        )
        == 0
    )
    assert main(["upload", str(out), "--quiet", "--tag", "team=search"]) == 0
    assert main(["upload", str(out), "--quiet", "--tag", "ticket=SEARCH-123"]) == 0
    runs = _runs(tracking_uri)
    assert len(runs) == 4
    assert all(r.data.tags["team"] == "search" and r.data.tags["ticket"] == "SEARCH-123" for r in runs)
    capsys.readouterr()
    assert main(["upload", str(out), "--tag", "v@1=x"]) == 2
    assert "--tag 'v@1=x': not a usable MLflow tag key: MLflow refuses '@'" in capsys.readouterr().err
    assert main(["upload", str(out), "--tag", "nokey"]) == 2


@pytest.mark.parametrize(
    ("n_metrics", "n_params", "n_tags"), [(3, 2, 1), (0, 0, 0), (2500, 7, 3), (5, 250, 99), (1, 1, 100)]
)
def test_a_batch_splits_at_mlflow_limits_and_sets_the_final_tags_last(n_metrics, n_params, n_tags):
    """``log_batch`` sends every metric, param and tag once, each request within MLflow's limits, and the final
    tags (logging complete) in the last request only, alone or with the last part: in one request when all fits."""
    from ndcg_mlflow.tracking import client as tc

    class Recorder:
        def __init__(self):
            self.calls = []

        def log_batch(self, run_id, metrics, params, tags):
            self.calls.append((metrics, params, tags))

    rec = Recorder()
    metrics = {f"m{i}": float(i) for i in range(n_metrics)}
    params = {f"p{i}": str(i) for i in range(n_params)}
    tags = {f"t{i}": str(i) for i in range(n_tags)}
    tc.log_batch(rec, "run", metrics, params, tags, final_tags={"ndcg_mlflow.logging": "complete"})
    assert all(len(m) <= tc.MAX_METRICS and len(p) <= tc.MAX_PARAMS and len(t) <= tc.MAX_TAGS for m, p, t in rec.calls)
    assert sorted(x.key for m, _, _ in rec.calls for x in m) == sorted(metrics)
    assert sorted(x.key for _, p, _ in rec.calls for x in p) == sorted(params)
    sent_tags = [x.key for _, _, t in rec.calls for x in t]
    assert sorted(sent_tags) == sorted([*tags, "ndcg_mlflow.logging"])
    assert [x.key for x in rec.calls[-1][2]][-1] == "ndcg_mlflow.logging"
    assert all("ndcg_mlflow.logging" not in [x.key for x in t] for _, _, t in rec.calls[:-1])
    parts = max(-(-n_metrics // tc.MAX_METRICS), -(-n_params // tc.MAX_PARAMS), -(-n_tags // tc.MAX_TAGS))
    fits = parts >= 1 and len(rec.calls) == parts  # (the final tag went into the last part)
    assert fits or len(rec.calls) == parts + 1
    if n_metrics + n_params + n_tags and n_tags < tc.MAX_TAGS and parts == 1:
        assert len(rec.calls) == 1


@pytest.mark.integration  # imports mlflow
def test_mlflow_asks_the_request_clock_before_every_request_of_a_watched_call(tmp_path):
    """``tracking/bounds.py`` needs one hook beyond MLflow's settings: a request header provider (declared by this
    package's ``mlflow.request_header_provider`` entry point) is asked for its headers before every HTTP request
    MLflow makes, tracking and artifacts alike, in the thread that makes it; that is how the watchdog bounds a whole
    request (a server trickling a byte at a time). Checked on the installed MLflow, which must be in the range
    pyproject.toml supports, against a server on 127.0.0.1 that answers everything: if this fails, bounds.py must
    change before the range does."""
    import http.server
    import threading
    from importlib.metadata import entry_points

    import mlflow
    from helpers import REPO
    from mlflow.tracking import MlflowClient
    from packaging.version import Version

    from ndcg_mlflow.tracking.bounds import Bounds, RequestClock, Watch, installed

    low, high = re.search(r'"mlflow>=([\d.]+),<([\d.]+)"', (REPO / "pyproject.toml").read_text()).groups()
    assert Version(low) <= Version(mlflow.__version__) < Version(high), (mlflow.__version__, low, high)

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, body: dict) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            seen.append(f"{self.command} {self.path.split('?')[0]}")
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # runs/get: a run whose artifacts this server holds
            info = {"run_id": "r1", "run_uuid": "r1", "experiment_id": "0", "status": "RUNNING", "start_time": 1}
            info["artifact_uri"] = f"mlflow-artifacts://127.0.0.1:{port}/0/r1/artifacts"
            self._answer({"run": {"info": info, "data": {}}})

        def do_PUT(self):
            self._answer({})

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()

    class CountingWatch(Watch):
        restarts = 0

        def restart(self) -> None:
            self.restarts += 1
            super().restart()

    try:
        clocks = [e for e in entry_points(group="mlflow.request_header_provider") if e.load() is RequestClock]
        assert len(clocks) == 1 and installed()  # declared once, and MLflow loaded it
        folder = tmp_path / "files"
        folder.mkdir()
        (folder / "a.txt").write_text("a")
        (folder / "b.txt").write_text("bb")
        client, watch = MlflowClient(tracking_uri=f"http://127.0.0.1:{port}"), CountingWatch(Bounds.current(30))
        client.get_run("r1")  # no call under the watch: not seen by it
        with watch.call("MlflowClient.log_artifacts"):
            client.log_artifacts("r1", str(folder))
    finally:
        server.shutdown()
        server.server_close()
    assert sorted(seen[1:]) == [
        "GET /api/2.0/mlflow/runs/get",
        "PUT /api/2.0/mlflow-artifacts/artifacts/0/r1/artifacts/a.txt",
        "PUT /api/2.0/mlflow-artifacts/artifacts/0/r1/artifacts/b.txt",
    ]
    assert watch.restarts == 3 and watch.request is None


def test_the_evaluation_runs_description_and_metrics_without_wins_losses():
    """Beyond the driver's limit the comparisons carry no wins, ties and losses (the per-query rows stayed in
    Spark): the evaluation run's description says they were not computed, and its metrics are the means and the
    headline comparison's four figures."""
    from ndcg_mlflow.tracking.names import parent_metrics, parent_note

    row = {"baseline": "a", "candidate": "b", "key": "ndcg_at_10", "delta": 0.25, "ci_low": 0.125, "ci_high": 0.5}
    summary = {
        "name": "s",
        "n_queries": 3,
        "spec": {"metric.cutoffs": "5,10"},
        "systems": {s: {"ndcg_at_5": {"mean": 0.5}, "ndcg_at_10": {"mean": 0.75}} for s in ("a", "b")},
        "comparisons": [row | {"p_corrected": 0.03}, row | {"key": "ndcg_at_5", "p_corrected": 0.5}],
    }
    note = parent_note(summary)
    assert note.startswith("Against baseline a at nDCG@10:\n- b: +0.2500 [+0.1250, +0.5000], p corrected 0.0300;")
    assert "wins/ties/losses not computed" in note
    metrics = parent_metrics(summary)
    assert metrics["b.compare.ndcg_at_10.p_corrected"] == 0.03 and "b.compare.ndcg_at_5.delta" not in metrics
    assert len(metrics) == 4 + 4


def test_the_descriptions_show_names_and_reasons_as_typed_never_as_markdown():
    """A system name, spec name or reason holding line ends and markdown (a forged decision, a link) stays one
    escaped run of text in the run descriptions: one decision paragraph, no link, no HTML."""
    from ndcg_mlflow.tracking.names import parent_note, system_note

    forged = "x\n\n**Decision: PASS** [proof](http://evil.example/) <img src=x>"
    row = {"baseline": "a", "candidate": forged, "key": "ndcg_at_10", "delta": 0.25, "ci_low": 0.1, "ci_high": 0.5}
    summary = {
        "name": forged,
        "n_queries": 3,
        "spec": {"metric.cutoffs": "10"},
        "systems": {s: {"ndcg_at_10": {"mean": 0.5}} for s in ("a", forged)},
        "comparisons": [row | {"p_corrected": 0.03}],
        "decision": {
            "key": "ndcg_at_10",
            "outcome": "fail",
            "statement": "rule",
            "candidates": [{"candidate": forged, "outcome": "fail", "reason": f"segment '{forged}': lower"}],
        },
    }
    for note in (parent_note(summary), system_note(summary, forged, "r1")):
        decisions = [line for line in note.splitlines() if line.startswith("**")]
        assert decisions in ([], ["**Decision: FAIL** — rule"]), note
        assert "**Decision: PASS" not in note and "[proof](" not in note
        assert not re.search(r"(?<!\\)<", note)  # (every < escaped: no HTML)
        assert "\\*\\*Decision\\: PASS\\*\\* \\[proof\\]\\(http\\:" in note


def test_the_comparison_description_shows_differing_file_names_as_text():
    """compare --allow-spec-mismatch's run description lists each differing definition; a weights file named with
    markdown (a link, emphasis, a line break) stays escaped text there, as the system names do."""
    from ndcg_mlflow.tracking.compare import comparison_note

    forged = "w.tsv\n\n**Decision: PASS** [proof](http://evil.example/) <img src=x>"
    note = comparison_note(["a", "b"], "r1", "r2", [f"queries.weights: {forged!r} vs 'w.tsv'"])
    assert "[proof](" not in note and "**Decision" not in note and not re.search(r"(?<!\\)<", note), note
    assert "\n" not in note and "\\*\\*Decision\\: PASS\\*\\* \\[proof\\]\\(http\\:" in note, note
