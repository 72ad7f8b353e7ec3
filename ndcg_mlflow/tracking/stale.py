"""Runs left behind: who logs a run (its owner, a process on a machine), ending the runs of loggings that are
over, an earlier upload of the same folder (reused when complete, deleted when not), and ending the runs of one
logging after it failed. mlflow is imported lazily, inside the functions."""

from __future__ import annotations

import os
import time

from .bounds import Abandoned
from .names import ATTACHED_TAG, TAG_PREFIX

CLOCK_SKEW = 120.0  # seconds allowed between this machine's clock and another's (stray runs)
ACTIVE_KEYS: set[str] = set()  # run keys being logged by this process


def owner_id() -> str:
    """``host|pid-namespace|pid|process start``: tells whether the process logging a run is still alive."""
    return f"{_this_machine()}|{os.getpid()}|{process_start(os.getpid())}"


def _this_machine() -> str:
    """``host|pid-namespace``: the processes whose pids this process can check."""
    import socket

    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = "-"
    return f"{socket.gethostname()}|{namespace}"


def process_start(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks since boot
    except (OSError, IndexError):
        return "-"


def _owner_gone(owner: str | None, run_key: str | None, deadline: str | None, now: float) -> bool:
    """Whether the process that logged a run can no longer end it (see :func:`end_dead_runs`)."""
    try:
        if deadline is not None and now > float(deadline) + CLOCK_SKEW:
            return True
    except ValueError:
        pass
    parts = (owner or "").split("|")
    if len(parts) != 4 or "|".join(parts[:2]) != _this_machine():
        return False  # another machine, or not tagged: only its logging deadline tells
    try:
        pid = int(parts[2])
    except ValueError:
        return False
    if pid == os.getpid():
        return parts[3] != process_start(pid) or run_key not in ACTIVE_KEYS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    except OSError:
        return False
    started = process_start(pid)
    return started != "-" and parts[3] != "-" and started != parts[3]  # the pid now belongs to another process


def end_dead_runs(client, experiment_id: str, run_key: str) -> list[str]:
    """End (FAILED) the runs of this experiment that an earlier logging left RUNNING and can no longer end.

    A run is ended when it carries this tool's role tag, its ``ndcg_mlflow.logging`` is not ``complete``,
    its status is RUNNING, it is not of the folder being logged now (its own upload handles those), and
    either its logging deadline (tag ``ndcg_mlflow.logging_deadline``, the time by which its logging has
    ended or given up) passed more than 2 minutes ago, or it was logged on this machine (same host name
    and process namespace, tag ``ndcg_mlflow.owner``) by a process that is no longer running. A live
    concurrent logging is never touched.
    """
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`{TAG_PREFIX}.logging` != 'complete'",
        max_results=1000,
    )
    now = time.time()
    dead = [
        r.info.run_id
        for r in runs
        if r.data.tags.get(f"{TAG_PREFIX}.role") in ("evaluation", "system")
        and r.data.tags.get(f"{TAG_PREFIX}.run_key") != run_key
        and _owner_gone(
            r.data.tags.get(f"{TAG_PREFIX}.owner"),
            r.data.tags.get(f"{TAG_PREFIX}.run_key"),
            r.data.tags.get(f"{TAG_PREFIX}.logging_deadline"),
            now,
        )
    ]
    for rid in dead:
        from mlflow.entities import RunTag

        client.log_batch(
            rid,
            tags=[RunTag(f"{TAG_PREFIX}.logging", "abandoned: the process logging it ended before it was complete")],
        )
        client.set_terminated(rid, "FAILED")
    return dead


def earlier_upload(client, experiment_id: str, run_key: str) -> tuple[str, dict[str, str]] | None:
    """A complete earlier upload of the same folder (its evaluation run, its system runs by system), or None
    after ending and deleting the runs of an incomplete one."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`{TAG_PREFIX}.run_key` = {filter_literal(run_key)}", max_results=1000
    )
    parents = [r for r in runs if r.data.tags.get(f"{TAG_PREFIX}.role") == "evaluation"]
    complete = [
        r
        for r in parents
        if r.data.tags.get(f"{TAG_PREFIX}.logging") == "complete"
        and (r.info.status == "FINISHED" or r.data.tags.get(ATTACHED_TAG) == "true")
    ]
    if complete:
        parent = complete[0].info.run_id
        children = {
            r.data.tags.get(f"{TAG_PREFIX}.system"): r.info.run_id
            for r in runs
            if r.data.tags.get("mlflow.parentRunId") == parent
        }
        return parent, children
    for r in runs:  # an incomplete earlier upload: end its runs, then delete them (never the caller's own run)
        if r.data.tags.get(ATTACHED_TAG) == "true":
            continue
        if r.info.status in ("RUNNING", "SCHEDULED"):
            client.set_tag(r.info.run_id, f"{TAG_PREFIX}.logging", "superseded by a later upload")
            client.set_terminated(r.info.run_id, "FAILED")
        client.delete_run(r.info.run_id)
    return None


def fail_runs(client, run_ids: list[str], stage: str, status: str = "FAILED") -> None:
    """End ``run_ids`` with ``status`` and the tag ``ndcg_mlflow.logging`` saying how far logging got (best
    effort: stops at the first request that fails, as the ones after it would fail the same way)."""
    if client is None:
        return
    from mlflow.entities import RunTag

    word = "killed" if status == "KILLED" else "failed"
    for rid in run_ids:
        try:
            client.log_batch(rid, tags=[RunTag(f"{TAG_PREFIX}.logging", f"{word} while {stage}")])
            client.set_terminated(rid, status)
        except Abandoned:
            return
        except Exception:  # noqa: BLE001 - cleanup must not hide the original error
            continue


def end_strays(client, run_key: str, stage: str, status: str, experiment_id: str | None = None) -> None:
    """End runs of this upload that a request created but whose id never came back (an interrupted
    create_run): found by the run key, best effort (the server may be gone)."""
    if client is None:
        return
    try:
        exps = [experiment_id] if experiment_id else [e.experiment_id for e in client.search_experiments()]
        runs = client.search_runs(
            exps,
            filter_string=f"tags.`{TAG_PREFIX}.run_key` = {filter_literal(run_key)} and attributes.status = 'RUNNING'",
            max_results=1000,
        )
    except Exception:  # noqa: BLE001 - cleanup must not hide the original error
        return
    fail_runs(client, [r.info.run_id for r in runs if r.data.tags.get(ATTACHED_TAG) != "true"], stage, status=status)


def filter_literal(value: str) -> str:
    """``value`` as a string literal of an MLflow search filter. MLflow strips the quotes without
    unescaping anything, so the value is quoted with a quote character it does not contain; a value
    holding both quote characters or a backslash cannot be written and is refused (run keys are hex)."""
    for quote in ("'", '"'):
        if quote not in value and "\\" not in value:
            return f"{quote}{value}{quote}"
    raise ValueError(f"{value!r} cannot be used in an MLflow search filter")
