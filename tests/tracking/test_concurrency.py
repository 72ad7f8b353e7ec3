"""Several evaluations logging at the same time: every one of them ends with its complete set of runs.

* 4 ``ndcg-mlflow run`` processes started at once against ONE FRESH SQLite store (a path that does not exist
  yet, so the first-use migration races too; no pre-migrated template);
* 3 at once against one tracking server (the session's shared server, conftest.py).

All of them use the same new experiment name, so its creation races as well.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers import (
    assert_one_complete_set,
    clean_env,
    cli_command,
    client_for,
    runs_of_experiment,
    write_spec,
)

pytestmark = pytest.mark.integration  # every test starts CLI processes


def _run_at_once(n: int, tmp_path: Path, uri: str, experiment: str, timeout: float = 180) -> list[Path]:
    """Start ``n`` evaluations together (each its own spec folder and output folder), wait for all."""
    procs, outs = [], []
    for i in range(n):
        folder = tmp_path / f"eval{i}"
        folder.mkdir()
        spec = write_spec(folder, f"concurrent-{i}", experiment=experiment)
        out = folder / "out"
        outs.append(out)
        procs.append(
            subprocess.Popen(
                cli_command("run", str(spec), "--out", str(out), "--tracking-uri", uri, "--quiet"),
                cwd=tmp_path,
                env=clean_env(MLFLOW_HTTP_REQUEST_MAX_RETRIES="2"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + timeout
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append((p.returncode, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    failed = [(i, code, err[-3000:]) for i, (code, err) in enumerate(results) if code != 0]
    assert not failed, failed
    return outs


def test_four_evaluations_at_once_into_one_fresh_sqlite_store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    db = tmp_path / "store" / "fresh" / "mlflow.db"  # neither the file nor its folder exists yet
    assert not db.exists()
    uri = f"sqlite:///{db}"
    outs = _run_at_once(4, tmp_path, uri, "concurrent-sqlite")
    client = client_for(uri)
    runs = runs_of_experiment(client, "concurrent-sqlite")
    assert len(runs) == 4 * 4
    assert len(client.search_experiments()) == 2  # Default and the one shared experiment, created once
    for i, out in enumerate(outs):
        assert_one_complete_set(client, out, tmp_path / f"dl{i}")


def test_three_evaluations_at_once_against_one_server(tmp_path, server, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    experiment = f"concurrent-server-{tmp_path.name}"
    outs = _run_at_once(3, tmp_path, server.uri, experiment)
    client = client_for(server.uri)
    runs = runs_of_experiment(client, experiment)
    assert len(runs) == 3 * 4
    assert len([e for e in client.search_experiments() if e.name == experiment]) == 1
    for i, out in enumerate(outs):
        assert_one_complete_set(client, out, tmp_path / f"dl{i}")
