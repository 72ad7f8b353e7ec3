"""Shared fixtures: an isolated MLflow store per test, made from one pre-migrated SQLite database, and one real
``mlflow server`` for the session (helpers.py holds the functions the test modules share)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory) -> Path:
    """An empty MLflow SQLite store with every migration applied, made once per session."""
    folder = tmp_path_factory.mktemp("mlflow_template")
    db = folder / "mlflow.db"
    old = os.getcwd()
    os.chdir(folder)
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    finally:
        os.chdir(old)
    return db


@pytest.fixture
def tracking_uri(migrated_db, tmp_path, monkeypatch) -> str:
    """A fresh store for this test in its own working directory (never the repo)."""
    db = tmp_path / "mlflow.db"
    shutil.copy(migrated_db, db)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.fixture
def demo_copy(tmp_path) -> Path:
    """A copy of configs/ (demo spec and data) in a temporary folder."""
    dest = tmp_path / "configs"
    shutil.copytree(CONFIGS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.fixture(scope="session")
def server(tmp_path_factory, migrated_db):
    """One ``mlflow server`` on 127.0.0.1 for every test that asks for it, stopped at the end of the session."""
    from helpers import MlflowServer

    srv = MlflowServer(tmp_path_factory.mktemp("mlflow_server"), migrated_db).start()
    yield srv
    srv.stop()
