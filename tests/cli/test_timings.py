"""Where the wall time goes (:mod:`ndcg_mlflow.timings`, ``ndcg-mlflow run --timings``): each second is charged
to the innermost phase under way, so that the phases and ``other`` add up to the total; outside a recording the
phases cost nothing and record nothing."""

from __future__ import annotations

import re

import pytest
from helpers import write_spec

from ndcg_mlflow import timings
from ndcg_mlflow.cli import main


class Clock:
    """A clock that moves only when told: the tests' seconds are exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(timings.time, "perf_counter", c)
    return c


def test_a_phase_inside_another_is_charged_once_and_the_rest_is_other(clock):
    with timings.recording() as rec:
        clock.now += 1.0  # in no phase: other
        with timings.phase("read"):
            clock.now += 2.0
            with timings.phase("scoring"):  # read pauses while scoring runs
                clock.now += 5.0
            clock.now += 0.5
        with timings.phase("statistics"):
            clock.now += 0.25
        with timings.phase("read"):  # a phase entered twice adds up
            clock.now += 1.5
    assert rec.rows() == [("read", 4.0), ("scoring", 5.0), ("statistics", 0.25), ("other", 1.0)]
    assert rec.total == 10.25
    assert rec.format().splitlines() == [
        "where the time went (wall seconds):",
        "  read               4.00",
        "  scoring            5.00",
        "  statistics         0.25",
        "  other              1.00",
        "  total             10.25",
    ]


def test_a_phase_left_by_an_exception_is_still_charged(clock):
    with timings.recording() as rec, pytest.raises(RuntimeError), timings.phase("logging"):
        clock.now += 3.0
        raise RuntimeError("the server went away")
    assert rec.rows() == [("logging", 3.0), ("other", 0.0)]


def test_outside_a_recording_a_phase_records_nothing(clock):
    with timings.phase("read"):
        clock.now += 1.0
    with timings.recording() as rec:
        pass
    assert rec.rows() == [("other", 0.0)] and rec.seconds == {}


def test_an_unknown_phase_is_refused():
    with timings.recording(), pytest.raises(ValueError, match="unknown phase 'parsing'"), timings.phase("parsing"):
        pass


def test_run_timings_prints_each_phase_of_the_local_engine_and_they_add_up(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, "timed", systems=2)
    assert main(["run", str(spec), "--no-mlflow", "--quiet", "--timings", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.splitlines()
    start = err.index("where the time went (wall seconds):")
    rows = {}
    for line in err[start + 1 :]:
        m = re.fullmatch(r"  (\S.*?) +(\d+\.\d\d)", line)
        assert m, line
        rows[m.group(1)] = float(m.group(2))
    assert list(rows) == ["read", "scoring", "statistics", "outputs", "other", "total"]
    assert abs(sum(v for k, v in rows.items() if k != "total") - rows["total"]) <= 0.03  # rounding of 5 values
    assert (tmp_path / "out" / "summary.json").is_file()


def test_run_without_timings_prints_no_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, "untimed", systems=1)
    assert main(["run", str(spec), "--no-mlflow", "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert "where the time went" not in capsys.readouterr().err
