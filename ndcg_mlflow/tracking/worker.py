"""Running one logging within its bounds: the store lock, the worker thread that logs, the watchdog that gives
it up (a deadline passed, a request over its bound, SIGINT or SIGTERM) and the cleanup that then ends the runs
created. mlflow is imported lazily, inside the functions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import NdcgError, TrackingError
from ..uris import first_line, safe_uri
from .bounds import SIGNAL_CLEANUP_SECONDS, Abandoned, Bounds, Watch, cleanup_http
from .names import TAG_PREFIX
from .stale import ACTIVE_KEYS, end_strays, fail_runs, owner_id


class Terminated(BaseException):
    """SIGTERM arrived: the runs being logged end KILLED."""


class Guarded:
    """An MlflowClient whose calls refuse to start once logging was given up (``cancelled``) or past ``deadline``
    (monotonic seconds), each call under ``watch`` when given (the watchdog sees it)."""

    def __init__(self, client, cancelled: threading.Event | None, deadline: float | None = None, watch=None):
        self._client, self._cancelled, self._deadline, self._watch = client, cancelled, deadline, watch

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self._cancelled is not None and self._cancelled.is_set():
                raise Abandoned("logging was given up")
            if self._deadline is not None and time.monotonic() >= self._deadline:
                raise Abandoned("no time left for another call")
            if self._watch is None:
                return attr(*args, **kwargs)
            with self._watch.call(f"MlflowClient.{name}", _largest_upload(name, args)):
                return attr(*args, **kwargs)

        return call


def _largest_upload(name: str, args: tuple) -> int:
    """The largest file a call of ``log_artifact`` / ``log_artifacts`` (run id, local path) uploads in one
    request; 0 for any other call."""
    if name not in ("log_artifact", "log_artifacts") or len(args) < 2:
        return 0
    path = Path(args[1])
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return max((f.stat().st_size for f in files), default=0)


class Logging:
    """One logging of an output folder, run in a worker thread that the calling thread can abandon.

    The calling thread waits and watches: the whole logging within ``mlflow.total_timeout``, each HTTP
    request within :meth:`Bounds.request`. When a bound is passed, or SIGINT / SIGTERM arrives (they are
    handled in the calling thread, never blocked by the network), the worker is abandoned (it makes no
    further call) and a cleanup with its own small budget ends the runs created so far.
    """

    def __init__(
        self,
        uri: str,
        out_dir: Path,
        summary: dict,
        run_key: str,
        run_name: str | None,
        total: float | None,
        custom_tags: dict[str, str] | None = None,
    ):
        self.uri, self.out_dir, self.summary, self.run_key, self.run_name = uri, out_dir, summary, run_key, run_name
        self.source = out_dir  # where the files logged are read: a verified copy of out_dir (tracking.client)
        self.custom_tags = dict(custom_tags or {})
        self.bounds = Bounds.current(total)
        self.watch = Watch(self.bounds, remote=uri.startswith(("http:", "https:", "databricks")))
        self.stage = "connecting"
        self.created: list[str] = []
        self.raw_client: Any = None  # the MlflowClient, once created
        self.experiment_id: str | None = None
        self.cancelled = threading.Event()
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.deadline = 0.0  # monotonic, set by run()
        deadline_epoch = int(time.time() + self.bounds.total + self.bounds.cleanup + 1)
        self.owner_tags = {f"{TAG_PREFIX}.owner": owner_id(), f"{TAG_PREFIX}.logging_deadline": str(deadline_epoch)}
        self.attach: str | None = None  # the caller's run to log into, instead of a new evaluation run
        self.logging_into: str | None = None  # that run, once it was checked and logging into it began

    def client(self, raw) -> Guarded:
        """``raw`` (an MlflowClient) as the worker uses it: given up with the logging, its calls watched."""
        self.raw_client = raw
        return Guarded(raw, self.cancelled, watch=self.watch)

    def _work(self, body: Callable[[Logging], Any]) -> None:
        try:
            self.result = body(self)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self.error = exc
        finally:
            self.done.set()

    def _overdue(self) -> str | None:
        """Why the worker is to be abandoned now, or None."""
        now = time.monotonic()
        if now >= self.deadline:
            return (
                f"logging did not finish within mlflow.total_timeout = {self.bounds.total:g} s (the server "
                f"answers too slowly, or not at all)"
            )
        request = self.watch.request
        if request is not None and now - request[0] > request[1]:
            return (
                f"the server did not answer within {request[1]:.0f} s ({request[2]}; mlflow.timeout "
                f"{self.bounds.timeout:g} s per attempt, {self.bounds.retries} retries)"
            )
        return None

    def run(self, body: Callable[[Logging], Any]) -> Any:
        """``body(self)`` in the worker thread, within the bounds; its result, or the error that ended it."""
        self.deadline = time.monotonic() + self.bounds.total
        worker = threading.Thread(target=self._work, args=(body,), name="ndcg-mlflow-logging", daemon=True)
        ACTIVE_KEYS.add(self.run_key)
        try:
            worker.start()
            overdue = None
            while not self.done.wait(0.1):
                overdue = self._overdue()
                if overdue:
                    break
        except (KeyboardInterrupt, Terminated):
            self._give_up("KILLED")
            raise
        finally:
            ACTIVE_KEYS.discard(self.run_key)
        if overdue and not self.done.is_set():
            self._give_up("FAILED")
            raise TrackingError(self._message(overdue))
        error = self.error
        if error is None:
            return self.result
        if isinstance(error, (KeyboardInterrupt, Terminated)):
            self._give_up("KILLED")
            raise error
        self._give_up("FAILED")
        if isinstance(error, NdcgError):
            raise error
        if not isinstance(error, Exception):
            raise error
        raise TrackingError(self._message(describe(error))) from error

    def _message(self, what: str) -> str:
        return (
            f"logging to MLflow at {safe_uri(self.uri)} failed while {self.stage}: {what}. The complete "
            f"local results are in {self.out_dir}; log them later with 'ndcg-mlflow upload {self.out_dir}"
            + (f" --run-id {self.attach}" if self.attach else "")
            + "'."
        )

    def _give_up(self, status: str) -> None:
        """Abandon the worker, then end the runs it created (and any run of this key left RUNNING) within the
        cleanup budget, without retries, in a thread of its own: the network cannot hold this thread longer."""
        self.cancelled.set()
        stage = self.stage
        budget = self.bounds.cleanup if status == "FAILED" else min(self.bounds.cleanup, SIGNAL_CLEANUP_SECONDS)
        deadline = time.monotonic() + budget

        def cleanup() -> None:
            try:
                raw = self.raw_client
                if raw is None:
                    from mlflow.tracking import MlflowClient

                    raw = MlflowClient(tracking_uri=self.uri)
                client = Guarded(raw, None, deadline)
                fail_runs(client, list(self.created), stage, status=status)
                if self.logging_into is not None:  # the caller's run says how far logging got, and stays as it was
                    word = "killed" if status == "KILLED" else "failed"
                    client.set_tag(self.logging_into, f"{TAG_PREFIX}.logging", f"{word} while {stage}")
                end_strays(client, self.run_key, stage, status, self.experiment_id)
            except BaseException:  # noqa: BLE001 - best effort
                pass

        with cleanup_http(budget):
            helper = threading.Thread(target=cleanup, name="ndcg-mlflow-cleanup", daemon=True)
            helper.start()
            helper.join(budget)


def describe(exc: BaseException) -> str:
    """One line saying what went wrong; a full disk under a local store is named as such."""
    import errno

    seen, chain = set(), []
    item: BaseException | None = exc
    while item is not None and id(item) not in seen:
        seen.add(id(item))
        chain.append(item)
        item = item.__cause__ or item.__context__
    for item in chain:
        text = str(item).lower()
        if (
            getattr(item, "errno", None) == errno.ENOSPC
            or "no space left on device" in text
            or "database or disk is full" in text
        ):
            return "no space left on device: the store (or its artifact folder) is full, nothing more can be written"
    return f"{type(exc).__name__}: {first_line(exc)}"


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialize writers of one local SQLite store (its first-use migration and concurrent writes race);
    a tracking server serializes its own writes."""
    import fcntl

    path = _sqlite_path(uri)
    if path is None:
        yield
        return
    lock = Path(str(path) + ".ndcg-mlflow.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+")  # noqa: SIM115 (entered below, once the open's error is reported)
    except OSError as exc:
        raise TrackingError(f"cannot open the MLflow store {safe_uri(uri)}: {exc.strerror or exc} ({lock}).") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:"):
        return None
    rest = uri[len("sqlite:") :]
    if rest.startswith("///"):  # sqlite:///relative or sqlite:////absolute
        return Path(rest[3:])
    return None
