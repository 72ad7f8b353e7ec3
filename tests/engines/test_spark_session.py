"""The session the Spark engine starts where Java is missing or broken: ``ndcg-mlflow run --engine spark`` exits 2
saying what is missing and how to install it, before Spark's launcher runs (no java, a JAVA_HOME without one), or
when the Java it started exits at once; never exit 1 with pyspark's JAVA_GATEWAY_EXITED traceback.

Needs pyspark, not Java: each case runs the CLI with a PATH and JAVA_HOME that give it none (or a broken one).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGS
from helpers import clean_env

pytestmark = pytest.mark.integration  # every test starts the CLI

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ndcg-mlflow[spark]')")


def _path_without_java(folder: Path) -> str:
    """A folder of links to every command of PATH but ``java`` (the shell and tools Spark's launcher uses stay)."""
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name != "java" and not target.exists() and not target.is_symlink():
                target.symlink_to(entry.path)
    return str(folder)


def _run_spark(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environ = clean_env(**env)
    for name in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT", "SPARK_HOME"):
        if name not in env:
            environ.pop(name, None)
    argv = [sys.executable, "-m", "ndcg_mlflow", "run", str(CONFIGS / "demo.yaml"), "--engine", "spark"]
    return subprocess.run(
        [*argv, "--no-mlflow", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=300,
    )


def _assert_says_how_to_get_java(done: subprocess.CompletedProcess, tmp_path: Path, *words: str) -> None:
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "JAVA_GATEWAY_EXITED" not in done.stderr, done.stderr[-3000:]
    for word in ("Java 17", "apt-get install openjdk-17-jre-headless", "JAVA_HOME", *words):
        assert word in done.stderr, (word, done.stderr)
    assert not (tmp_path / "out").exists()  # nothing written


def test_spark_without_java_on_path_exits_2_saying_how_to_install_it(tmp_path):
    done = _run_spark(tmp_path, PATH=_path_without_java(tmp_path / "bin"))
    _assert_says_how_to_get_java(done, tmp_path, "no java on PATH")


def test_spark_with_a_java_home_without_java_exits_2_naming_it(tmp_path):
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    done = _run_spark(tmp_path, JAVA_HOME=str(home))
    _assert_says_how_to_get_java(done, tmp_path, f"JAVA_HOME ({home}) has no bin/java")


def test_a_java_that_exits_at_start_is_exit_2_not_a_traceback(tmp_path):
    """A java that is there but exits at once (a broken install): Spark's gateway exits before it starts."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'Error: this java is broken' >&2\nexit 1\n", encoding="utf-8")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    done = _run_spark(tmp_path, JAVA_HOME=str(home))
    _assert_says_how_to_get_java(done, tmp_path, "Spark's Java process exited as it started")
    assert "this java is broken" in done.stderr  # its own message, above the tool's
