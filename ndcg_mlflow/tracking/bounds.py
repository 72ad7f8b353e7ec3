"""The time bounds of logging to a tracking server, and the one hook into MLflow they need.

MLflow's own settings bound each attempt of a request and its retries: :func:`configure_http` sets its public
variables (``MLFLOW_HTTP_REQUEST_TIMEOUT``, ``..._MAX_RETRIES``, ``..._BACKOFF_FACTOR``) from the spec, and
:class:`Bounds` reads them back. That ends a request against a server that never answers, not one that trickles
a byte at a time (each byte restarts the read timeout): only a bound on the whole request ends that one, so the
watchdog of :mod:`.worker` must know when each request began. :class:`Watch` holds it: the call of the client
under way (set by the worker's client wrapper) and the start of its current HTTP request, set by
:class:`RequestClock`, a request header provider (MLflow's plugin interface, called once before every request it
makes, tracking and artifacts alike) that adds no header. This package declares it as an
``mlflow.request_header_provider`` entry point (``pyproject.toml``), MLflow's public way of adding one, which
MLflow loads when its registry is first imported (:func:`installed` says whether it did);
``tests/tracking/test_tracking.py`` checks, for the supported MLflow range, that MLflow calls it for every request.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

DEFAULT_HTTP = {  # fail within about 30 s against an unreachable server (MLflow's own defaults take minutes)
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "8",
}
TOTAL_TIMEOUT = 600.0  # default of mlflow.total_timeout: seconds for the whole logging phase
CLEANUP_SECONDS = 5.0  # the best-effort ending of runs after a failure, on top of any bound
SIGNAL_CLEANUP_SECONDS = 3.0  # the same after SIGINT / SIGTERM: the process ends within about this
UPLOAD_RATE = 1 << 20  # bytes per second granted to a request for the body it uploads
_SLACK = 2.0


def configure_http(timeout: float | None = None, max_retries: int | None = None) -> None:
    """Bounded retries and timeouts: the spec's ``mlflow`` section first, then MLflow's own environment
    variables when the user set them, then these defaults."""
    if timeout is not None:  # MLflow reads this variable as an integer: whole seconds, at least 1
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, math.ceil(timeout)))
    if max_retries is not None:
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(max_retries)
    for key, value in DEFAULT_HTTP.items():
        os.environ.setdefault(key, value)
    # MLflow prints "View run ... at <tracking URI>" lines, credentials included when the URI has them
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    import logging

    for name in ("mlflow.store.db.utils", "alembic"):  # schema-migration chatter of a new local store
        logging.getLogger(name).setLevel(logging.WARNING)
    # a failing SQL statement is logged with its whole traceback before it is raised; the error that ends
    # logging says what failed in one line (a full disk included)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


@dataclass(frozen=True)
class Bounds:
    """The time bounds of logging to a tracking server (seconds), from the spec's ``mlflow`` section and
    MLflow's HTTP variables (:func:`configure_http` sets them)."""

    timeout: float  # per attempt of a request (MLFLOW_HTTP_REQUEST_TIMEOUT)
    retries: int  # MLFLOW_HTTP_REQUEST_MAX_RETRIES
    backoff: float  # MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR
    jitter: float  # MLFLOW_HTTP_REQUEST_BACKOFF_JITTER
    total: float  # mlflow.total_timeout: the whole logging phase
    cleanup: float = CLEANUP_SECONDS

    @classmethod
    def current(cls, total: float | None = None) -> Bounds:
        def number(name: str, default: float) -> float:
            try:
                value = float(os.environ.get(name, default))
            except ValueError:
                return default
            return value if math.isfinite(value) and value >= 0 else default

        return cls(
            timeout=number("MLFLOW_HTTP_REQUEST_TIMEOUT", 120) or 120.0,
            retries=int(number("MLFLOW_HTTP_REQUEST_MAX_RETRIES", 7)),
            backoff=number("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", 2),
            jitter=number("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", 1),
            total=float(total) if total else TOTAL_TIMEOUT,
        )

    def request(self, upload_bytes: int = 0) -> float:
        """Longest one request may take, all its attempts and backoff sleeps included, however the server
        behaves (a silent, trickling or frozen server included): (retries + 1) x timeout + the backoff
        sleeps + 2 s, plus 1 s per MiB it uploads."""
        sleeps = sum(min(self.backoff * 2**i, 120.0) + self.jitter for i in range(self.retries))
        return (self.retries + 1) * self.timeout + sleeps + _SLACK + upload_bytes / UPLOAD_RATE

    def worst_failure(self) -> float:
        """Longest a failing logging takes against a server that stops answering: one request's bound, then
        the cleanup's budget."""
        return self.request() + self.cleanup


class Abandoned(RuntimeError):
    """Logging was given up (a deadline, a signal): the abandoned thread makes no further call."""


class Watch:
    """The request under way in one thread, for a watchdog in another: ``request`` is (started, limit, what) or
    None. :meth:`call` wraps a call of the client (its limit: one request's bound, for the largest body the call
    uploads); :class:`RequestClock` starts the clock at each HTTP request the call makes, but for a tracking server
    (``remote``) the call's first request starts with the call (its headers, resolved first, take time too). A
    local store makes no request: only the whole logging's deadline bounds it."""

    def __init__(self, bounds: Bounds, remote: bool = True):
        self.bounds, self.remote = bounds, remote
        self.request: tuple[float, float, str] | None = None
        self._call: tuple[float, str] | None = None
        self._started = False  # the call's first request started with the call

    @contextmanager
    def call(self, what: str, upload_bytes: int = 0) -> Iterator[None]:
        self._call = (self.bounds.request(upload_bytes), what)
        self.request = (time.monotonic(), *self._call) if self.remote else None
        self._started = self.remote
        _LOCAL.watch = self
        try:
            yield
        finally:
            self.request = self._call = _LOCAL.watch = None

    def restart(self) -> None:
        if self._started:  # the call's first request: its clock started with the call
            self._started = False
        elif self._call is not None:
            self.request = (time.monotonic(), *self._call)


_LOCAL = threading.local()  # .watch: the Watch of the call under way in this thread


class RequestClock:
    """A request header provider (MLflow's ``RequestHeaderProvider`` interface): in a thread with a call under
    :meth:`Watch.call`, each request MLflow makes restarts the watch; it adds no header."""

    def in_context(self) -> bool:
        return getattr(_LOCAL, "watch", None) is not None

    def request_headers(self) -> dict[str, str]:
        watch = getattr(_LOCAL, "watch", None)
        if watch is not None:
            watch.restart()
        return {}


class _Asked:
    asked = False

    def restart(self) -> None:
        self.asked = True


def installed() -> bool:
    """Whether MLflow asks :class:`RequestClock` before its requests (it does when this package is installed with
    its entry point); else only the whole logging's deadline bounds a trickling server."""
    try:
        from mlflow.tracking.request_header.registry import resolve_request_headers
    except ImportError:
        return False
    probe = _Asked()
    _LOCAL.watch = probe
    try:
        resolve_request_headers()
    finally:
        _LOCAL.watch = None
    return probe.asked


@contextmanager
def cleanup_http(budget: float) -> Iterator[None]:
    """MLflow's requests without retries, each attempt at most ``budget`` seconds, for the cleanup after a
    failure (the variables are MLflow's, read at each request; restored after)."""
    timeout = min(Bounds.current().timeout, max(1, math.ceil(budget)))
    values = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(int(timeout))}
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
