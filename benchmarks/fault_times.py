#!/usr/bin/env python
"""How long ``ndcg-mlflow run`` takes to fail against tracking servers that stop answering, against the
documented bound, and whether any run is left RUNNING afterwards.

    python benchmarks/fault_times.py [--timeout S] [--retries N] [--only silent,trickle,frozen,sigterm]
                                     [--workdir DIR] [--keep]

Servers, all on 127.0.0.1 only, each stopped at the end:

* ``silent``: accepts every connection and never answers;
* ``trickle``: accepts, then sends one byte of a response every second, forever (each byte resets a
  per-read timeout, so only a bound on the whole request ends it);
* ``frozen``: a real ``mlflow server``, frozen with SIGSTOP once the evaluation run exists (mid-logging),
  resumed with SIGCONT after the CLI gave up; then ``ndcg-mlflow upload`` of the same folder;
* ``sigterm``: the trickling server again, and SIGTERM sent to the CLI once it is connected.

For each it prints the time to fail (from the first connection, or from the freeze, or from SIGTERM, to the
CLI's exit), the bound (:meth:`ndcg_mlflow.tracking.Bounds.worst_failure`: one request's bound plus the
cleanup budget; for SIGTERM the signal's cleanup budget, 3 s), the exit code (3, or 143 after SIGTERM) and, for the
real server, the runs still RUNNING once it is resumed and after the upload (none may be left after it).
Exit status 0 when every scenario is within its bound (plus 3 s for the process to exit) with the
expected exit code and no run left RUNNING, else 1. Every wait is bounded; the whole script takes about
2 minutes with the defaults (the package's own HTTP settings: 8 s per attempt, 2 retries).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from _servers import HOST, MlflowServer, clean_env, cli_command  # noqa: E402 - beside this script

DEMO = REPO / "configs" / "demo"
DEMO_RUNS = ("bm25.run", "reranker_v2.run", "dense_ties.run")
EXIT_MARGIN = 3.0  # seconds for the process to exit after it gave up


# --------------------------------------------------------------------------- servers that stop answering


class FakeServer:
    """A TCP server on 127.0.0.1 that accepts every connection and hands it to :meth:`serve` in a thread."""

    max_seconds = 600.0  # no connection is served longer than this, whatever happens

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.first_connection: float | None = None
        self.connections = 0
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._loop, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> FakeServer:
        self._accept.start()
        return self

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            if self.first_connection is None:
                self.first_connection = time.monotonic()
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                self.serve(conn, time.monotonic() + self.max_seconds)
        except OSError:
            pass

    def serve(self, conn: socket.socket, until: float) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()
        self._accept.join(timeout=5)
        for t in self._threads:
            t.join(timeout=5)


class SilentServer(FakeServer):
    """Accepts, reads what it is sent, never answers."""

    def serve(self, conn: socket.socket, until: float) -> None:
        conn.settimeout(0.2)
        while not self.stopped.is_set() and time.monotonic() < until:
            try:
                if conn.recv(65536) == b"":
                    return
            except TimeoutError:
                continue


class TrickleServer(FakeServer):
    """Accepts, then sends the start of a response one byte a second, forever (until stopped)."""

    def serve(self, conn: socket.socket, until: float) -> None:
        conn.settimeout(0.2)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Trickle: "
        i = 0
        while not self.stopped.is_set() and time.monotonic() < until:
            try:
                conn.recv(65536)
            except TimeoutError:
                pass
            conn.sendall(head[i : i + 1] if i < len(head) else b"a")
            i += 1
            self.stopped.wait(1.0)


# --------------------------------------------------------------------------- the CLI


def write_spec(folder: Path, name: str, *, timeout: float | None, retries: int | None, systems: int = 3) -> Path:
    """A quick spec on the demo data; its ``mlflow`` section sets the HTTP bounds when given."""
    data = folder / "demo"
    if not data.exists():
        shutil.copytree(DEMO, data)
    lines = [f"    s{i:02d}: demo/{DEMO_RUNS[i % 3]}" for i in range(systems)]
    extra = "".join(f", {k}: {v}" for k, v in (("timeout", timeout), ("max_retries", retries)) if v is not None)
    text = (
        f"spec_version: 1\nname: {name}\n"
        "metric: {gain: exponential, cutoffs: [5, 10], discount: log2, ties: displayed_order,\n"
        "         ideal: judged_catalog, empty_ideal: exclude, unjudged: zero, missing_queries: zero}\n"
        "queries: {weights: uniform}\n"
        "data:\n  qrels: demo/qrels.tsv\n  systems:\n" + "\n".join(lines) + "\n"
        f"mlflow: {{experiment: {name}{extra}}}\n"
    )
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def bound_of(timeout: float | None, retries: int | None) -> object:
    """The package's bounds for these settings (the defaults of ``configure_http`` where not given)."""
    from ndcg_mlflow.tracking import DEFAULT_HTTP, Bounds

    return Bounds(
        timeout=float(timeout if timeout is not None else DEFAULT_HTTP["MLFLOW_HTTP_REQUEST_TIMEOUT"]),
        retries=int(retries if retries is not None else DEFAULT_HTTP["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]),
        backoff=float(DEFAULT_HTTP["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"]),
        jitter=1.0,
        total=600.0,
    )


@dataclass
class Outcome:
    name: str
    code: int | None
    expected_code: int
    seconds: float  # time to fail, as described in the module docstring
    total: float  # the whole CLI process
    bound: float
    running_after_resume: int | None = None
    running_after_upload: int | None = None
    stderr: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.code == self.expected_code
            and self.seconds <= self.bound + EXIT_MARGIN
            and not self.running_after_upload
            and "Traceback" not in self.stderr
        )


def start_cli(spec: Path, out: Path, uri: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        cli_command("run", str(spec), "--out", str(out), "--tracking-uri", uri, "--quiet"),
        cwd=cwd,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int | None, str, float]:
    """Wait for the CLI (at most ``timeout``); kill it when it overruns. Returns code, stderr, exit time."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        return None, err + f"\n[killed after {timeout:.0f} s]", time.monotonic()
    return proc.returncode, err, time.monotonic()


def run_against_fake(kind: str, workdir: Path, timeout: float | None, retries: int | None) -> Outcome:
    """``silent``, ``trickle`` or ``sigterm`` (trickle, then SIGTERM once connected)."""
    from ndcg_mlflow.tracking import SIGNAL_CLEANUP_SECONDS

    bounds = bound_of(timeout, retries)
    folder = workdir / kind
    folder.mkdir(parents=True, exist_ok=True)
    spec = write_spec(folder, f"fault-{kind}", timeout=timeout, retries=retries)
    server = (SilentServer() if kind == "silent" else TrickleServer()).start()
    limit = bounds.worst_failure() + 120  # the guard of this script, far above the bound
    try:
        start = time.monotonic()
        proc = start_cli(spec, folder / "out", server.uri, folder)
        mark = None
        if kind == "sigterm":
            deadline = time.monotonic() + limit
            while server.first_connection is None and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # well inside the first request
            mark = time.monotonic()
            proc.send_signal(signal.SIGTERM)
        code, err, ended = finish(proc, limit)
        if mark is None:
            mark = server.first_connection if server.first_connection is not None else start
    finally:
        server.stop()
    bound = SIGNAL_CLEANUP_SECONDS if kind == "sigterm" else bounds.worst_failure()
    return Outcome(kind, code, 143 if kind == "sigterm" else 3, ended - mark, ended - start, bound, stderr=err)


def running_runs(uri: str, experiment: str) -> int:
    """Runs of ``experiment`` (deleted ones included) whose status is RUNNING."""
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "1"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "20"
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return 0
    runs = client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL, max_results=1000)
    return sum(r.info.status == "RUNNING" for r in runs)


def run_frozen(
    workdir: Path, timeout: float | None, retries: int | None, *, systems: int = 6, template_db: Path | None = None
) -> Outcome:
    bounds = bound_of(timeout, retries)
    folder = workdir / "frozen"
    folder.mkdir(parents=True, exist_ok=True)
    name = "fault-frozen"
    spec = write_spec(folder, name, timeout=timeout, retries=retries, systems=systems)
    out = folder / "out"
    server = MlflowServer(folder / "server", template_db).start()
    limit = bounds.worst_failure() + 120
    try:
        offset = server.log.stat().st_size
        start = time.monotonic()
        proc = start_cli(spec, out, server.uri, folder)
        seen = server.wait_for_log("/api/2.0/mlflow/runs/create", offset, 120, proc)
        time.sleep(0.3)  # a few requests later: mid-logging
        server.signal(signal.SIGSTOP)
        mark = time.monotonic()
        code, err, ended = finish(proc, limit)
        server.signal(signal.SIGCONT)
        outcome = Outcome("frozen", code, 3, ended - mark, ended - start, bounds.worst_failure(), stderr=err)
        if not seen:
            outcome.notes.append("the CLI never created a run: the server was frozen before logging")
            outcome.code = None
        server.healthy(60)  # answered after the connections queued while it was frozen were taken
        time.sleep(2.0)  # and their requests worked through
        outcome.running_after_resume = running_runs(server.uri, name)
        up = subprocess.run(
            cli_command("upload", str(out), "--tracking-uri", server.uri, "--quiet"),
            cwd=folder,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if up.returncode != 0:
            outcome.notes.append(f"upload exited {up.returncode}: {up.stderr.strip()[-500:]}")
            outcome.code = None
        outcome.running_after_upload = running_runs(server.uri, name)
        return outcome
    finally:
        server.stop()


SCENARIOS = ("silent", "trickle", "frozen", "sigterm")


def run_all(workdir: Path, timeout: float | None, retries: int | None, only=SCENARIOS) -> list[Outcome]:
    results = []
    for kind in only:
        results.append(
            run_frozen(workdir, timeout, retries)
            if kind == "frozen"
            else run_against_fake(kind, workdir, timeout, retries)
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, help="mlflow.timeout of the spec (default: the package's, 8 s)")
    parser.add_argument("--retries", type=int, help="mlflow.max_retries of the spec (default: the package's, 2)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--workdir", type=Path, help="work folder (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fault_times_"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = run_all(workdir, args.timeout, args.retries, only)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"{'scenario':<9} {'exit':>4} {'to fail s':>9} {'bound s':>8} {'CLI s':>7} {'RUNNING after resume':>21} "
        f"{'after upload':>12}  verdict"
    )
    for r in results:
        resume = "-" if r.running_after_resume is None else str(r.running_after_resume)
        upload = "-" if r.running_after_upload is None else str(r.running_after_upload)
        print(
            f"{r.name:<9} {str(r.code):>4} {r.seconds:>9.1f} {r.bound:>8.1f} {r.total:>7.1f} {resume:>21} "
            f"{upload:>12}  {'ok' if r.ok else 'FAIL'}"
        )
        for note in r.notes:
            print(f"  note: {note}")
        if not r.ok:
            print("  stderr: " + r.stderr.strip()[-1500:].replace("\n", "\n          "))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
