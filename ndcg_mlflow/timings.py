"""Where an evaluation's wall time goes, by phase (``ndcg-mlflow run --timings``).

Every engine marks its phases with :func:`phase`, which costs nothing unless a :class:`Timings` is recording
(:func:`recording`). Time is charged to the innermost phase under way: a phase inside another is not counted
twice, so the phases and ``other`` add up to the recorded wall time.

The phases, in the order they are shown (:data:`PHASES`):

* ``session start``: the Spark session started (and pyspark imported) by the command line;
* ``models``: the spec's registered models resolved and their candidates scored (their scored rows are then the
  systems' runs, read in ``read``);
* ``read``: judgments, query files and runs read and checked (on Spark: on the driver, and the runs' footers,
  row counts and digests; the run rows themselves are read by the scoring job's tasks);
* ``scoring``: the per-query numbers (the local engine's join and kernel; on Spark the job that reads the runs'
  rows in its tasks, pre-filters them and scores each bucket of queries, and the rows' assembly on the driver);
* ``statistics``: intervals, paired comparisons, the decision, sensitivity;
* ``outputs``: the local results and the report written;
* ``logging``: everything sent to MLflow.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("session start", "models", "read", "scoring", "statistics", "outputs", "logging")
"""The phases, in the order of a run."""


class Timings:
    """Wall seconds by phase, each charged to the innermost phase under way; ``total`` from the start of
    recording to :meth:`stop`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[str] = []
        self._mark = self._start = time.perf_counter()
        self.total: float | None = None

    def _charge(self) -> None:
        now = time.perf_counter()
        if self._stack:
            name = self._stack[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + now - self._mark
        self._mark = now

    def enter(self, name: str) -> None:
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}: one of {', '.join(PHASES)}")
        self._charge()
        self._stack.append(name)

    def leave(self) -> None:
        self._charge()
        self._stack.pop()

    def stop(self) -> None:
        self._charge()
        self.total = time.perf_counter() - self._start

    def rows(self) -> list[tuple[str, float]]:
        """(phase, seconds) in :data:`PHASES` order for the phases that ran, then ``other`` (the recorded time in
        no phase: imports, the spec's load, the summary printed)."""
        out = [(name, self.seconds[name]) for name in PHASES if name in self.seconds]
        if self.total is not None:
            out.append(("other", max(0.0, self.total - sum(self.seconds.values()))))
        return out

    def format(self) -> str:
        """The table ``--timings`` prints."""
        rows = self.rows()
        lines = ["where the time went (wall seconds):"]
        lines += [f"  {name:<14} {seconds:8.2f}" for name, seconds in rows]
        if self.total is not None:
            lines.append(f"  {'total':<14} {self.total:8.2f}")
        return "\n".join(lines)


_current: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("ndcg_mlflow_timings", default=None)


@contextmanager
def recording() -> Iterator[Timings]:
    """Record the phases run within the block (in this thread or task) into a new :class:`Timings`."""
    timings = Timings()
    token = _current.set(timings)
    try:
        yield timings
    finally:
        timings.stop()
        _current.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Charge the block's wall time to ``name`` (one of :data:`PHASES`) when recording; nothing otherwise."""
    timings = _current.get()
    if timings is None:
        yield
        return
    timings.enter(name)
    try:
        yield
    finally:
        timings.leave()
