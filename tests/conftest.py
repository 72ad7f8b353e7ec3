"""Shared fixtures: an isolated MLflow store per test, made from one pre-migrated SQLite database, and one real
``mlflow server`` for the session (helpers.py holds the functions the test modules share).

Two loops:

* ``python -m pytest`` (what CI runs): every test; the property and fuzz tests run the ``thorough`` Hypothesis
  profile.
* ``python -m pytest -m "not integration and not slow"`` (the edit loop): no process, server, MLflow store or
  Monte Carlo calibration; the property and fuzz tests run the ``quick`` profile (a tenth of the examples, at
  least 10, from the same strategies; ``helpers.examples``).

``HYPOTHESIS_PROFILE=thorough|quick`` chooses the profile explicitly. A test that uses an MLflow store or server
fixture is marked ``integration`` whether or not its module says so.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_PROPERTY = dict(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", **_PROPERTY)
settings.register_profile("quick", **_PROPERTY)
STORE_FIXTURES = {"migrated_db", "tracking_uri", "server"}

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
SHARED = REPO.parent / "shared"

# Spark's Python workers run the interpreter running the tests (with the packages it sees), not the ``python3``
# first on PATH, which in a virtual environment that is not activated is another interpreter: the sessions the
# tests build themselves, in this process or in a child, inherit it (the engine's own session does the same)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def pytest_configure(config) -> None:
    profile = os.environ.get("HYPOTHESIS_PROFILE")
    if profile is None:
        quick = "not integration" in (config.getoption("markexpr", "") or "")
        profile = "quick" if quick else "thorough"
    settings.load_profile(profile)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if STORE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


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
def fluent_store(tracking_uri, monkeypatch) -> str:
    """``tracking_uri`` made the fluent API's store, with an active experiment ``evals`` (``mlflow.set_tracking_uri``
    and ``mlflow.set_experiment``, which the MLflow entry points use); the process-wide state they set (the URI,
    the tracer's destination, the active experiment and their environment variables) is undone afterwards."""
    import mlflow
    import mlflow.tracking.fluent as fluent

    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)  # set_experiment sets it; restored afterwards
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment("evals")
    yield tracking_uri
    while mlflow.active_run():
        mlflow.end_run()
    fluent._active_experiment_id = None
    mlflow.set_tracking_uri(None)


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


@pytest.fixture(scope="session")
def spark():
    """One classic SparkSession for every Spark test of the run (``helpers.local_spark``: ``local[2]``, a 1 GB
    driver, 4 shuffle partitions, no UI, UTC), started by the first test that asks for it (a run without Spark
    tests starts none) and stopped at the end; the test is skipped without pyspark or Java. A test that needs
    another setting sets it on the session and puts it back after (``spark.conf``)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")
    from helpers import java_problem, local_spark

    if java_problem():
        pytest.skip(java_problem() or "")
    yield from local_spark()


@pytest.fixture(scope="module", params=["native", "scalar", "pure"])
def reader_mode(request):
    """A module's tests with the readers as built (the C TREC reader, where the install compiled it), with the C
    reader's scalar code (no vectors, as a build without SSE2 runs: ``vector_width(0)``, ``NDCG_MLFLOW_SCALAR``)
    and in pure Python (Arrow's readers and the line reader, as where no compiler is): ``NDCG_MLFLOW_PURE_PYTHON``."""
    from ndcg_mlflow.readers.trec import native_reader

    patch = pytest.MonkeyPatch()
    fast = native_reader()
    if request.param == "pure":
        patch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
    elif fast is None:
        pytest.skip("the C reader is not built (no C compiler where the package was installed)")
    width = fast.vector_width(None) if fast is not None else 0
    if request.param == "scalar":
        fast.vector_width(0)
    yield request.param
    if fast is not None:
        fast.vector_width(width)
    patch.undo()
