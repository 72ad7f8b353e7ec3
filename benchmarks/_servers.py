"""A real ``mlflow server`` on 127.0.0.1, and the environment of the processes that talk to it.

Shared by benchmarks/fault_times.py and the tests (tests/helpers.py): one server class, stopped with its
worker, and one clean environment for ``ndcg-mlflow`` subprocesses.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening on it (at the time of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess: no MLFLOW_* setting of the caller leaks in; the package under test
    is imported from this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def cli_command(*args: str) -> list[str]:
    """``ndcg-mlflow ARGS`` as a command line of this interpreter."""
    return [sys.executable, "-m", "ndcg_mlflow", *args]


class MlflowServer:
    """One ``mlflow server`` process (and its uvicorn worker) in its own process group on 127.0.0.1, so that
    a signal (SIGKILL for a crash, SIGSTOP to freeze it) reaches the worker too."""

    def __init__(self, root: Path, template_db: Path | None = None, port: int | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.db = self.root / "srv.db"
        if template_db is not None and not self.db.exists():
            shutil.copy(template_db, self.db)  # pre-migrated: the server starts faster
        self.artifacts = self.root / "artifacts"
        self.log = self.root / "server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 120) -> MlflowServer:
        cmd = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.db}",
            "--serve-artifacts",
            "--artifacts-destination",
            str(self.artifacts),
        ]
        env = clean_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"mlflow server did not answer /health within {timeout} s:\n{self.tail()}")

    def healthy(self, timeout: float) -> bool:
        """Whether /health answers within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=5) as resp:
                    if resp.status == 200:
                        return True
            except OSError:
                time.sleep(0.2)
        return False

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def log_offset(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def wait_for_log(self, needle: str, offset: int, timeout: float, proc: subprocess.Popen | None = None) -> bool:
        """Wait until the server's access log shows ``needle`` after ``offset`` (False when ``proc`` ended or
        the time ran out first)."""
        deadline = time.monotonic() + timeout
        data = needle.encode()
        while time.monotonic() < deadline:
            with open(self.log, "rb") as fh:
                fh.seek(offset)
                if data in fh.read():
                    return True
            if proc is not None and proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def signal(self, sig: int) -> None:
        """``sig`` to the server and its worker (the group :meth:`start` created)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """A crash: SIGKILL to the server and its worker, no clean shutdown."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=15)
        # the worker may outlive the parent for a moment: make sure the group is gone
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
