"""Credentials in URIs are never written, shown or logged, whichever characters they hold: the tracking URI
(``--tracking-uri``, ``MLFLOW_TRACKING_URI``, the spec's ``mlflow.tracking_uri``) and any URI inside an
``mlflow.tags`` or ``--tag`` value. Every password below holds one character that ends a token in text
(a quote, ``<``/``>``, a backtick, a space) or an ``@``; each is checked in stdout, stderr, every file of
the output folder and, for a local SQLite store, every param, tag and artifact of every run."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from helpers import client_for, free_port, runs_of_experiment, write_spec

# each password is LEFT + one awkward character + RIGHT: neither half may appear anywhere
LEFT, RIGHT = "Kq7Zx", "Wv8Rt"
AWKWARD = ('"', "'", "<", ">", "`", " ", "@", "\t", "\"'<> `@")
PASSWORDS = [f"{LEFT}{c}{RIGHT}" for c in AWKWARD]
IDS = ["dquote", "squote", "lt", "gt", "backtick", "space", "at", "tab", "all"]


def _leaks(text: str) -> list[str]:
    return [piece for piece in (LEFT, RIGHT) if piece in text]


def _files_leaking(root: Path) -> list[str]:
    return [
        f"{path}: {piece}"
        for path in sorted(root.rglob("*"))
        if path.is_file()
        for piece in (LEFT, RIGHT)
        if piece.encode() in path.read_bytes()
    ]


# --------------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize("password", PASSWORDS, ids=IDS)
def test_redact_removes_the_whole_userinfo_whatever_it_holds(password):
    """Userinfo is everything between scheme:// and the last @: each form loses it whole and keeps the rest."""
    from ndcg_mlflow.uris import redact

    shown = repr(f"http://u:{password}@h:1")
    cases = {
        f"http://user:{password}@host": "http://host",
        f"http://user:{password}@host:5000/path": "http://host:5000/path",
        f"http://:{password}@host": "http://host",
        f"http://user:p@{password}@host/x": "http://host/x",  # an @ inside the password as well
        f"HTTPS://User:{password}@Host.example/": "HTTPS://Host.example/",
        f"https://user:{password}@host/?token=x&q=1": "https://host/?token=REDACTED&q=1",
        f"https://user:{quote(password, safe='')}@host/": "https://host/",  # percent-encoded
        f"error: cannot reach 'http://user:{password}@127.0.0.1:1/api' (retries exhausted)": (
            "error: cannot reach 'http://127.0.0.1:1/api' (retries exhausted)"
        ),
        f"{{'uri': {shown}}}": f"{{'uri': {shown[0]}http://h:1{shown[0]}}}",  # Python's repr, quotes escaped
        f"tag link = http://u:{password}@h.example/x\nnext line: a@b": "tag link = http://h.example/x\nnext line: a@b",
    }
    for text, expected in cases.items():
        assert redact(text) == expected, (text, redact(text))
        assert redact(expected) == expected  # a second pass changes nothing


def test_redact_keeps_uris_without_userinfo():
    from ndcg_mlflow.uris import redact

    for text in (
        "databricks://profile",
        "databricks",
        "databricks://scope:prefix",
        "sqlite:////tmp/a@b/mlflow.db",
        "file:///tmp/x@y/mlruns",
        "models:/reranker@champion",
        "http://127.0.0.1:5000/#/experiments/1",
        "alice@example.com wrote nDCG@10",
    ):
        assert redact(text) == text


def test_redact_values_redacts_every_string_and_returns_the_same_object_when_none_changes():
    from ndcg_mlflow.uris import redact_values

    shared = ["http://127.0.0.1:5000", 3]
    clean = {"a": shared, "b": shared, "c": ("x", 1.5)}
    assert redact_values(clean) is clean
    uri = f"http://u:{PASSWORDS[-1]}@h:1"
    dirty = {"a": shared, "b": shared, "tags": {"link": uri, "n": 2}, "t": (uri,)}
    kept = redact_values(dirty)
    assert kept == {"a": shared, "b": shared, "tags": {"link": "http://h:1", "n": 2}, "t": ("http://h:1",)}
    assert kept["a"] is shared and kept["b"] is shared and dirty["tags"]["link"] == uri  # (the input unchanged)


def test_error_messages_hold_no_credentials():
    from ndcg_mlflow.errors import DataError, SpecError, TrackingError

    uri = f"http://u:{PASSWORDS[-1]}@h.example:5000"
    for exc in (
        SpecError("mlflow.tracking_uri", f"cannot use {uri!r}.", "spec.yaml"),
        DataError(uri, "not found"),
        TrackingError(f"logging to {uri} failed"),
    ):
        assert not _leaks(str(exc)) and "h.example:5000" in str(exc), str(exc)


@pytest.mark.parametrize("password", PASSWORDS, ids=IDS)
def test_the_recorded_spec_holds_no_credentials_and_is_still_the_spec(tmp_path, password):
    """spec.yaml as recorded: the values redacted (a YAML double-quoted password, a folded one, one in a
    comment), the result a valid spec with the same settings but the credentials."""
    from ndcg_mlflow.spec import RECORDED_HEADER, load_spec

    uri = f"http://user:{password}@127.0.0.1:5000"
    spec = write_spec(tmp_path, "recorded")
    spec.write_text(
        spec.read_text().replace(
            "mlflow: {experiment: recorded}\n",
            f"# the old store was http://user:{password}@old.example\n"
            f"mlflow: {{experiment: recorded, tracking_uri: {json.dumps(uri)},\n"
            f"         tags: {{link: {json.dumps('see http://bob:' + password + '@h.example/x')}, team: search}}}}\n",
        )
    )
    loaded = load_spec(spec)
    assert loaded.mlflow.tracking_uri == uri  # what connects keeps its credentials
    recorded = loaded.recorded_text
    assert recorded.startswith(RECORDED_HEADER) and not _leaks(recorded), recorded
    again = load_spec(_write(tmp_path / "again.yaml", recorded))
    assert again.mlflow.tracking_uri == "http://127.0.0.1:5000"
    assert dict(again.mlflow.tags) == {"link": "see http://h.example/x", "team": "search"}
    assert dict(loaded.mlflow.tags) == dict(again.mlflow.tags)
    assert again.resolved() == loaded.resolved() and again.recorded_text == recorded

    plain = write_spec(tmp_path, "plain")  # no credentials: the text as given, byte for byte
    assert load_spec(plain).recorded_text == plain.read_text()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("password", PASSWORDS, ids=IDS)
def test_the_mlflow_ui_line_names_the_store_without_the_password(password):
    from ndcg_mlflow.render.terminal import mlflow_ui_hint

    page = "#/experiments/7/runs/abc"
    cases = {
        f"http://user:{password}@mlflow.example:5000/": f"MLflow UI: http://mlflow.example:5000/{page}",
        f"HTTPS://:{password}@mlflow.example/ml": f"MLflow UI: HTTPS://mlflow.example/ml/{page}",
        f"postgresql://u:{password}@db:5432/mlflow": "MLflow UI: run abc in experiment 7 of "
        "postgresql://db:5432/mlflow",
        "databricks://profile": "MLflow UI: run abc in experiment 7 of databricks://profile",
    }
    for uri, expected in cases.items():
        assert mlflow_ui_hint(uri, "7", "abc") == expected


# --------------------------------------------------------------------------- a run against a tracking server


@pytest.mark.parametrize("password", PASSWORDS, ids=IDS)
def test_a_run_logged_with_a_password_in_the_uri_never_shows_or_logs_it(tmp_path, server, monkeypatch, capfd, password):
    """Logged to a real server (which takes any credentials) through a URI whose password is awkward: the
    tracking URI and UI lines name the server without it; nothing of it is in stdout, stderr, the output
    folder, any param or tag, or any artifact."""
    from ndcg_mlflow.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    experiment = f"server-{tmp_path.name}"
    spec = write_spec(tmp_path, "served", experiment=experiment)
    out = tmp_path / "out"
    assert (
        main(["run", str(spec), "--out", str(out), "--tracking-uri", f"http://user:{password}@127.0.0.1:{server.port}"])
        == 0
    )
    shown = capfd.readouterr()
    assert f"MLflow tracking URI: http://127.0.0.1:{server.port}\n" in shown.out
    assert f"MLflow UI: http://127.0.0.1:{server.port}/#/experiments/" in shown.out
    assert not _leaks(shown.out + shown.err), shown
    assert not _files_leaking(out)
    client = client_for(server.uri)
    runs = runs_of_experiment(client, experiment)
    assert len(runs) == 4
    for run in runs:
        assert not _leaks(json.dumps({"params": run.data.params, "tags": run.data.tags})), run.info.run_id
        local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl" / run.info.run_id)))
        assert not _files_leaking(local), run.info.run_id


# --------------------------------------------------------------------------- a run against a server that is down


@pytest.mark.integration  # imports mlflow
@pytest.mark.parametrize("password", PASSWORDS, ids=IDS)
def test_a_tracking_uri_password_is_never_shown_or_written(tmp_path, monkeypatch, capfd, password):
    """The password in --tracking-uri and in the spec's mlflow.tracking_uri, against a port nothing listens
    on: exit 3, the server named without the password on stderr, nothing of it in stdout, stderr or any file
    of the output folder (spec.yaml and summary.json record the URI without it)."""
    from ndcg_mlflow.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    port = free_port()
    uri = f"http://user:{password}@127.0.0.1:{port}/mlflow"
    spec = write_spec(tmp_path, "down")
    assert main(["run", str(spec), "--out", str(tmp_path / "flag"), "--tracking-uri", uri]) == 3
    flag = capfd.readouterr()
    assert f"logging to MLflow at http://127.0.0.1:{port}/mlflow failed" in flag.err, flag.err
    assert "Traceback" not in flag.err
    assert not _leaks(flag.out + flag.err), flag.err
    assert not _files_leaking(tmp_path / "flag")

    spec.write_text(
        spec.read_text().replace(
            "mlflow: {experiment: down}", f"mlflow: {{experiment: down, tracking_uri: {json.dumps(uri)}}}"
        )
    )
    out = tmp_path / "in_spec"
    assert main(["run", str(spec), "--out", str(out)]) == 3
    given = capfd.readouterr()
    assert f"logging to MLflow at http://127.0.0.1:{port}/mlflow failed" in given.err, given.err
    assert not _leaks(given.out + given.err), given.err
    assert not _files_leaking(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mlflow"]["tracking_uri"] == f"http://127.0.0.1:{port}/mlflow"
    assert (
        yaml.safe_load((out / "spec.yaml").read_text())["mlflow"]["tracking_uri"] == f"http://127.0.0.1:{port}/mlflow"
    )


# --------------------------------------------------------------------------- tags into a real local store


@pytest.mark.parametrize("password", PASSWORDS, ids=IDS)
def test_a_uri_in_a_tag_value_is_logged_without_its_password(tmp_path, tracking_uri, monkeypatch, capfd, password):
    """A credentialed URI in an mlflow.tags value and in a --tag value, logged to a local SQLite store: the
    tags hold the URIs without userinfo on every run (and the --tag on a comparison of two of them); nothing
    of the password is in stdout, stderr, the output folders, any param or tag, or any artifact."""
    from ndcg_mlflow.cli import main

    experiment = f"tags-{tmp_path.name}"
    spec = write_spec(tmp_path, "tagged", experiment=experiment)
    link = f"see http://bob:{password}@h.example/x?y=1"
    spec.write_text(
        spec.read_text().replace(
            f"mlflow: {{experiment: {experiment}}}",
            f"mlflow: {{experiment: {experiment}, tags: {{link: {json.dumps(link)}}}}}",
        )
    )
    out = tmp_path / "out"
    origin = f"origin=HTTPS://ci:{password}@ci.example:8443/job"
    assert main(["run", str(spec), "--out", str(out), "--tag", origin]) == 0
    shown = capfd.readouterr()
    assert not _leaks(shown.out + shown.err), shown
    assert not _files_leaking(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mlflow"]["tags"] == {"link": "see http://h.example/x?y=1"}

    client = client_for(tracking_uri)
    runs = runs_of_experiment(client, experiment)
    assert len(runs) == 4  # the evaluation and its three systems
    for run in runs:
        tags, params = run.data.tags, run.data.params
        assert tags["link"] == "see http://h.example/x?y=1", run.info.run_id
        assert tags["origin"] == "HTTPS://ci.example:8443/job", run.info.run_id
        assert not _leaks(json.dumps({"params": params, "tags": tags})), run.info.run_id
        local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl" / run.info.run_id)))
        assert any(local.rglob("*.json"))
        assert not _files_leaking(local), run.info.run_id

    # the --tag of a comparison of two of its system runs, on the comparison run
    systems = {r.data.tags.get("ndcg_mlflow.system"): r.info.run_id for r in runs}
    settings = [
        "--resamples",
        "100",
        "--confidence",
        "0.9",
        "--method",
        "percentile",
        "--seed",
        "1",
        "--test",
        "t_test",
        "--correction",
        "none",
        "--wins-losses",
        "3",
        "--tie-tolerance",
        "0",
    ]
    assert (
        main(["compare", systems["s00"], systems["s01"], "--out", str(tmp_path / "c"), "--tag", origin, *settings]) == 0
    )
    shown = capfd.readouterr()
    assert not _leaks(shown.out + shown.err), shown
    assert not _files_leaking(tmp_path / "c")
    [comparison] = [
        r for r in runs_of_experiment(client, experiment) if r.data.tags.get("ndcg_mlflow.role") == "comparison"
    ]
    assert comparison.data.tags["origin"] == "HTTPS://ci.example:8443/job"
    assert not _leaks(json.dumps({"params": comparison.data.params, "tags": comparison.data.tags}))


@pytest.mark.parametrize("where", ["--tracking-uri", "MLFLOW_TRACKING_URI", "mlflow.tracking_uri"])
def test_a_tracking_uri_with_a_line_break_is_refused_without_showing_it(tmp_path, monkeypatch, capsys, where):
    """Userinfo is read within a line, so a URI holding a line break (a password with one, unescaped) is
    refused before any work (exit 2, naming where it came from), and none of it is shown."""
    from ndcg_mlflow.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"http://user:{LEFT}\n{RIGHT}@127.0.0.1:{free_port()}"
    spec = write_spec(tmp_path, "broken")
    args = ["run", str(spec), "--out", str(tmp_path / "out")]
    if where == "--tracking-uri":
        args += ["--tracking-uri", uri]
    elif where == "MLFLOW_TRACKING_URI":
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    else:
        spec.write_text(
            spec.read_text().replace(
                "mlflow: {experiment: broken}", f"mlflow: {{experiment: broken, tracking_uri: {json.dumps(uri)}}}"
            )
        )
    assert main(args) == 2
    shown = capsys.readouterr()
    assert where in shown.err and "line break" in shown.err and "Traceback" not in shown.err, shown.err
    assert not _leaks(shown.out + shown.err), shown
    assert not (tmp_path / "out").exists()
