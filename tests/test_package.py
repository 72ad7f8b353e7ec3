"""Packaging contracts: the entry points, and a core free of mlflow."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CONFIGS

pytestmark = pytest.mark.integration  # every test starts a Python process


def test_import_does_not_import_mlflow():
    code = ("import sys, ndcg_mlflow, ndcg_mlflow.evaluation, ndcg_mlflow.kernel, ndcg_mlflow.readers, "
            "ndcg_mlflow.spec, ndcg_mlflow.cli; print('mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_dash_m_validates(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ndcg_mlflow", "validate", str(CONFIGS / "demo.yaml")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "metric.gain: exponential" in out.stdout


def test_python_dash_m_reports_user_error(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("spec_version: 1\nname: x\nmetric: [1, 2\n")
    out = subprocess.run([sys.executable, "-m", "ndcg_mlflow", "run", str(spec)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 2
    assert "not valid YAML at line" in out.stderr and "Traceback" not in out.stderr
