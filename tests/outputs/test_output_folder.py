"""The output folder contract: nothing stale, nothing mixed, nothing half-done uploaded.

* ``--out`` is absent, empty or an earlier output folder of ndcg-mlflow (its manifest lists every file):
  it is replaced whole by a folder written beside it, with a NEW run key; anything else is refused;
* a failure while writing (an exception, a full disk) leaves ``--out`` exactly as it was;
* ``manifest.json`` (written last) says the folder is complete; ``upload`` refuses a folder without it or
  whose files differ from it, a corrupt summary, a run key that is not ours;
* one process at a time per folder: concurrent runs into one ``--out`` and concurrent uploads of one
  folder take turns (against a SQLite store and against a real ``mlflow server``);
* ``report RUN --out X`` follows the same contract.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import (
    assert_one_complete_set,
    clean_env,
    cli_command,
    client_for,
    runs_of_key,
    write_spec,
)

from ndcg_mlflow.cli import main
from ndcg_mlflow.outputs import MANIFEST, lock_path, read_result_folder, verify_folder, write_manifest

COMPARISON = (
    "uncertainty: {resamples: 200, confidence: 0.95, method: percentile, seed: 7}\n"
    "comparison: {baseline: s00, test: randomization, correction: holm, wins_losses: 3,\n"
    "             tie_tolerance: 1.0e-9}\n"
)


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the sha256 of its bytes."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _siblings(folder: Path) -> list[str]:
    """Hidden leftovers beside ``folder`` (half-written folders, replaced folders, lock files)."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


def _key(folder: Path) -> str:
    return (folder / "run_key.txt").read_text().strip()


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def _forge_manifest(folder: Path) -> None:
    """Rewrite the manifest to match the folder as it now is (a manifest edited along with the files)."""
    old = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).unlink()
    write_manifest(folder, kind=old["kind"], run_key=old["run_key"])


# --------------------------------------------------------------------------- rerunning into one --out


@pytest.mark.integration
def test_rerun_into_the_same_out_replaces_the_result_and_logs_it_under_a_new_key(tracking_uri, tmp_path, capsys):
    out = tmp_path / "out"
    first = write_spec(tmp_path, "first", experiment="rerun", extra=COMPARISON)
    assert main(["run", str(first), "--out", str(out), "--quiet"]) == 0
    old_key = _key(out)
    assert {"comparisons.csv", "wins_losses.json", "wins_losses.md", "bootstrap.csv"} <= _files(out)

    second = write_spec(tmp_path, "second", systems=2, experiment="rerun")  # no comparison, two systems
    assert main(["run", str(second), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "already logged" not in printed
    new_key = _key(out)
    assert new_key != old_key
    # nothing of the first evaluation is left: the folder is exactly what the manifest of the second lists
    manifest = verify_folder(out)
    assert _files(out) == set(manifest["files"]) | {MANIFEST}
    assert not {"comparisons.csv", "wins_losses.json", "wins_losses.md", "bootstrap.csv"} & _files(out)
    assert sorted(p.name for p in (out / "systems").iterdir()) == [
        "s00.per_query.csv",
        "s00.top.csv",
        "s01.per_query.csv",
        "s01.top.csv",
    ]
    assert json.loads((out / "summary.json").read_text())["name"] == "second"
    assert not _siblings(out)
    # MLflow holds the second result under the new key, and the first one still under its own
    client = client_for(tracking_uri)
    assert_one_complete_set(client, out, tmp_path / "dl")
    assert len([r for r in runs_of_key(client, old_key) if r.data.tags["ndcg_mlflow.role"] == "evaluation"]) == 1
    assert main(["upload", str(out), "--quiet"]) == 0  # and uploading the folder again changes nothing
    assert_one_complete_set(client, out, tmp_path / "dl2")


def test_a_folder_that_is_not_ours_is_refused_and_left_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, "foreign")
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "notes.txt").write_text("my own notes\n")
    (mine / "summary.json").write_text("{}\n")  # looks like ours, but no manifest says so
    (mine / "sub" / "data.csv").write_text("a,b\n")
    before = _snapshot(mine)
    assert main(["run", str(spec), "--out", str(mine), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert str(mine) in err and "'notes.txt'" in err and "not an output folder of ndcg-mlflow" in err
    assert "Traceback" not in err
    assert _snapshot(mine) == before and not _siblings(mine)

    # an earlier result of ours to which the user added a file is not replaced either: the file would be lost
    ours = tmp_path / "ours"
    assert main(["run", str(spec), "--out", str(ours), "--no-mlflow", "--quiet"]) == 0
    (ours / "systems" / "my-notes.txt").write_text("keep me\n")
    before = _snapshot(ours)
    assert main(["run", str(spec), "--out", str(ours), "--no-mlflow", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'systems/my-notes.txt'" in err and "did not write" in err
    assert _snapshot(ours) == before

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert main(["run", str(spec), "--out", str(a_file), "--no-mlflow"]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert a_file.read_text() == "x"

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["run", str(spec), "--out", str(empty), "--no-mlflow", "--quiet"]) == 0
    read_result_folder(empty)
    assert not (tmp_path / "mlflow.db").exists()


# --------------------------------------------------------------------------- a failure while writing


def test_a_failure_while_rendering_the_report_keeps_the_previous_result(tmp_path, monkeypatch):
    from ndcg_mlflow.render import report

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    spec = write_spec(tmp_path, "failing-report")
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    before = _snapshot(out)

    def broken(folder):
        (Path(folder) / "report.html").write_text("half")
        raise TypeError("simulated: a bug while rendering the report")

    monkeypatch.setattr(report, "write_reports", broken)
    other = write_spec(tmp_path, "other", systems=2)
    with pytest.raises(TypeError):
        main(["run", str(other), "--out", str(out), "--no-mlflow", "--quiet"])
    assert _snapshot(out) == before  # the previous complete result, untouched
    assert not _siblings(out)  # and no half-written folder beside it

    fresh = tmp_path / "fresh"
    with pytest.raises(TypeError):
        main(["run", str(other), "--out", str(fresh), "--no-mlflow", "--quiet"])
    assert not fresh.exists() and not _siblings(fresh)  # nothing that could look like a result


def test_a_full_disk_while_writing_keeps_the_previous_result_and_exits_2(tmp_path, monkeypatch, capsys):
    import errno

    from ndcg_mlflow.outputs import write

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    spec = write_spec(tmp_path, "full-disk")
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    before = _snapshot(out)
    real = write.atomic_bytes
    calls = []

    def full(path, data):
        calls.append(path)
        if path.name.endswith(".csv") and sum(p.name.endswith(".csv") for p in calls) == 3:  # (a system's top list)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(write, "atomic_bytes", full)
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and str(out) in err and "unchanged" in err
    assert "Traceback" not in err
    assert _snapshot(out) == before and not _siblings(out)
    assert not (tmp_path / "mlflow.db").exists()  # nothing was logged


# --------------------------------------------------------------------------- upload takes only a complete folder


@pytest.mark.integration
def test_upload_refuses_an_incomplete_changed_or_corrupt_folder(tracking_uri, tmp_path, capsys):
    import shutil

    spec = write_spec(tmp_path, "refused", experiment="refused", extra=COMPARISON)
    good = tmp_path / "good"
    assert main(["run", str(spec), "--out", str(good), "--no-mlflow", "--quiet"]) == 0

    def variant(name, change):
        folder = tmp_path / name
        shutil.copytree(good, folder)
        change(folder)
        return folder

    cases = [
        # an interrupted run: everything written but the manifest
        (variant("no-manifest", lambda f: (f / MANIFEST).unlink()), ["manifest.json: not found"]),
        (variant("missing", lambda f: (f / "comparisons.csv").unlink()), ["missing: 'comparisons.csv'"]),
        (
            variant("truncated", lambda f: (f / "per_query.csv").write_text("system,query_id\n")),
            ["changed since it was written: 'per_query.csv'"],
        ),
        (
            variant("corrupt-summary", lambda f: (f / "summary.json").write_text('{"systems": ')),
            ["changed since it was written: 'summary.json'"],
        ),
        (
            variant("extra", lambda f: (f / "sensitivity.csv").write_text("stale\n")),
            ["not written by ndcg-mlflow: 'sensitivity.csv'"],
        ),
        (
            variant("corrupt-manifest", lambda f: (f / MANIFEST).write_text('{"files": [')),
            ["manifest.json: cannot be read as JSON"],
        ),
        (
            variant("forged-summary", lambda f: ((f / "summary.json").write_text("{not json"), _forge_manifest(f))),
            ["summary.json: cannot be read as JSON"],
        ),
        (
            variant("summary-not-ours", lambda f: ((f / "summary.json").write_text("[1, 2]"), _forge_manifest(f))),
            ["summary.json: expected a JSON object"],
        ),
        (
            variant(
                "summary-no-systems", lambda f: ((f / "summary.json").write_text('{"name": "x"}'), _forge_manifest(f))
            ),
            ["summary.json: expected the key 'systems'"],
        ),
    ]
    for folder, needles in cases:
        assert main(["upload", str(folder)]) == 2, folder.name
        err = capsys.readouterr().err
        assert "Traceback" not in err, (folder.name, err)
        for needle in needles:
            assert needle in err, (folder.name, err)
    assert main(["upload", str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err
    client = client_for(tracking_uri)
    assert client.get_experiment_by_name("refused") is None  # nothing was logged for any of them
    assert main(["upload", str(good), "--quiet"]) == 0
    assert_one_complete_set(client, good, tmp_path / "dl")


@pytest.mark.integration
@pytest.mark.parametrize("forged", [False, True])
def test_upload_follows_no_symbolic_link(tracking_uri, tmp_path, capsys, forged):
    """A figure replaced by a link (to a copy of itself outside the folder, which its manifest still matches; or to
    any other file, the manifest forged to match) is refused, naming the link, and nothing is logged."""
    spec = write_spec(tmp_path, "linked", experiment="linked")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    figure = sorted((out / "figures").glob("*.svg"))[0]
    outside = tmp_path / ("secret.txt" if forged else figure.name)
    outside.write_bytes(b"not for the tracking server\n" if forged else figure.read_bytes())
    figure.unlink()
    figure.symlink_to(outside)
    if forged:
        _forge_manifest(out)  # (without it the manifest matches the linked file's bytes: only the link tells)
    assert main(["upload", str(out)]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and f"figures/{figure.name}" in err and "Traceback" not in err, err
    assert client_for(tracking_uri).get_experiment_by_name("linked") is None


@pytest.mark.integration
@pytest.mark.parametrize("text", ["abc' or tags.x = 'y", "0123456789abcdef0123456789abcdeF", "", "\u00e9" * 32])
def test_upload_refuses_a_run_key_that_is_not_ours(tracking_uri, tmp_path, capsys, text):
    spec = write_spec(tmp_path, "bad-key", experiment="bad-key")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    (out / "run_key.txt").write_text(text + "\n")
    _forge_manifest(out)  # even with a manifest that agrees, the key must have our format
    assert main(["upload", str(out)]) == 2
    err = capsys.readouterr().err
    assert "run_key.txt" in err and "32 lowercase hex digits" in err and "Traceback" not in err
    assert client_for(tracking_uri).get_experiment_by_name("bad-key") is None


@pytest.mark.integration
def test_search_filters_quote_values_safely(tracking_uri):
    from ndcg_mlflow.tracking import filter_literal

    client = client_for(tracking_uri)
    exp = client.create_experiment("quoting")
    for value in ("it's", 'say "hi"', "plain"):
        run = client.create_run(exp, tags={"k": value})
        found = client.search_runs([exp], filter_string=f"tags.k = {filter_literal(value)}")
        assert [r.info.run_id for r in found] == [run.info.run_id], value
    for bad in ("both ' and \"", "back\\slash"):
        with pytest.raises(ValueError):
            filter_literal(bad)


# --------------------------------------------------------------------------- report RUN --out


@pytest.mark.integration
def test_report_out_follows_the_folder_contract(tracking_uri, tmp_path, capsys):
    spec = write_spec(tmp_path, "reported", experiment="reported", extra=COMPARISON)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    client = client_for(tracking_uri)
    parent = [r for r in runs_of_key(client, _key(out)) if r.data.tags["ndcg_mlflow.role"] == "evaluation"][0]
    rid = parent.info.run_id

    for bad in ("/dev/null", str(out / "summary.json")):
        assert main(["report", rid, "--out", bad]) == 2
        err = capsys.readouterr().err
        assert bad in err and "is not a folder" in err and "Traceback" not in err
    assert main(["report", rid, "--out", str(out / "spec.yaml" / "x")]) == 2  # cannot be created
    assert "Traceback" not in capsys.readouterr().err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    assert main(["report", rid, "--out", str(mine)]) == 2
    assert "'keep.txt'" in capsys.readouterr().err and (mine / "keep.txt").read_text() == "mine"

    rep = tmp_path / "rep"
    for _ in range(2):  # the second time the earlier report folder is replaced
        assert main(["report", rid, "--out", str(rep)]) == 0
        assert (rep / "report.html").is_file() and verify_folder(rep)["kind"] == "report"
        assert not _siblings(rep)
    assert main(["upload", str(rep)]) == 2  # a rebuilt report is not an evaluation's output
    assert "nothing to upload" in capsys.readouterr().err


# --------------------------------------------------------------------------- one process at a time per folder


def _start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        cli_command(*args), cwd=cwd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(procs: list[subprocess.Popen], timeout: float = 240) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + timeout
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    return results


@pytest.mark.integration
def test_a_second_writer_waits_for_the_folder_lock(tmp_path):
    from ndcg_mlflow.outputs import folder_lock

    spec = write_spec(tmp_path, "waiting")
    out = tmp_path / "out"
    lines: list[str] = []
    with folder_lock(out):
        assert lock_path(out).is_file()
        proc = _start("run", str(spec), "--out", str(out), "--no-mlflow", cwd=tmp_path)
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not any("in use" in ln for ln in lines):
            time.sleep(0.1)
        try:
            assert any("in use by another ndcg-mlflow process" in ln for ln in lines), (proc.poll(), lines)
            time.sleep(0.5)
            assert proc.poll() is None and not out.exists()  # it waits: nothing written while we hold the lock
        except BaseException:
            proc.kill()
            raise
    assert proc.wait(timeout=120) == 0, lines
    read_result_folder(out)
    assert not lock_path(out).exists()  # the lock file is removed when released


def _two_runs_into_one_out(tmp_path: Path, uri: str) -> tuple[Path, list[str]]:
    out = tmp_path / "out"
    specs = [
        write_spec(tmp_path, "writer-a", systems=6, experiment="one-out", extra=COMPARISON),
        write_spec(tmp_path, "writer-b", systems=2, experiment="one-out"),
    ]
    procs = [_start("run", str(s), "--out", str(out), "--tracking-uri", uri, "--quiet", cwd=tmp_path) for s in specs]
    results = _finish(procs)
    assert [code for code, _, _ in results] == [0, 0], [err[-2000:] for _, _, err in results]
    return out, [err for _, _, err in results]


@pytest.mark.integration
def test_two_runs_into_one_out_at_once_take_turns(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    out, _ = _two_runs_into_one_out(tmp_path, uri)
    folder = read_result_folder(out)  # complete and consistent: one evaluation's files, nothing else
    assert folder.summary["name"] in ("writer-a", "writer-b")
    systems = sorted(folder.summary["systems"])
    assert sorted({p.name.split(".")[0] for p in (out / "systems").iterdir()}) == systems
    assert ("comparisons.csv" in _files(out)) == (folder.summary["name"] == "writer-a")
    client = client_for(uri)
    assert_one_complete_set(client, out, tmp_path / "dl")
    # each run logged its own result completely, under its own key
    parents = [
        r
        for r in client.search_runs([client.get_experiment_by_name("one-out").experiment_id])
        if r.data.tags.get("ndcg_mlflow.role") == "evaluation"
    ]
    assert sorted(r.data.tags["ndcg_mlflow.evaluation"] for r in parents) == ["writer-a", "writer-b"]
    assert len({r.data.tags["ndcg_mlflow.run_key"] for r in parents}) == 2
    assert all(r.info.status == "FINISHED" and r.data.tags["ndcg_mlflow.logging"] == "complete" for r in parents)
    assert not _siblings(out)


def _two_uploads_at_once(tmp_path: Path, uri: str) -> Path:
    spec = write_spec(tmp_path, "uploaded-twice", systems=12, experiment=f"uploads-{tmp_path.name}")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    procs = [_start("upload", str(out), "--tracking-uri", uri, cwd=tmp_path) for _ in range(2)]
    results = _finish(procs)
    assert [code for code, _, _ in results] == [0, 0], [err[-2000:] for _, _, err in results]
    printed = [stdout for _, stdout, _ in results]
    assert sum("already logged" in p for p in printed) == 1, printed  # the second reused the first's upload
    client = client_for(uri)
    assert_one_complete_set(client, out, tmp_path / "dl")
    everything = runs_of_key(client, _key(out), deleted=True)  # no run of either upload was deleted
    assert len(everything) == 13 and all(r.info.lifecycle_stage == "active" for r in everything)
    return out


@pytest.mark.integration
def test_two_uploads_of_one_folder_at_once_sqlite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _two_uploads_at_once(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")


@pytest.mark.integration
def test_two_uploads_of_one_folder_at_once_server(tmp_path, server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    _two_uploads_at_once(tmp_path, server.uri)


_LOCKER = """
import sys, time
from pathlib import Path
from ndcg_mlflow.outputs import folder_lock
folder, counter = Path(sys.argv[1]), Path(sys.argv[2])
for _ in range(25):
    with folder_lock(folder):  # a read-modify-write that loses updates unless the lock excludes the others
        value = int(counter.read_text())
        time.sleep(0.002)
        counter.write_text(str(value + 1))
"""


@pytest.mark.integration
def test_the_folder_lock_excludes_other_processes_although_its_file_is_removed_on_release(tmp_path):
    """Each release removes the lock file while others wait on it: a waiter must notice and lock the new file,
    never hold a lock on the removed one at the same time as another process."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [
        subprocess.Popen(
            [*cli_command()[:1], "-c", _LOCKER, str(tmp_path / "out"), str(counter)],
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = _finish(procs, timeout=120)
    assert [code for code, _, _ in results] == [0] * 4, [err[-1000:] for _, _, err in results]
    assert int(counter.read_text()) == 4 * 25
    assert not lock_path(tmp_path / "out").exists()


def test_an_interrupted_write_leaves_nothing_that_looks_complete(tmp_path, monkeypatch, capsys):
    """SIGINT while writing: exit 130, no --out at all; a writer killed outright (SIGKILL) leaves only a
    hidden half-written folder, which upload refuses and the next writer of that folder removes."""
    import shutil

    from ndcg_mlflow.outputs import write

    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, "interrupted")
    out = tmp_path / "out"
    real = write.atomic_bytes

    def interrupted(path, data):
        real(path, data)
        if path.name.endswith(".csv"):  # (the first table written)
            raise KeyboardInterrupt

    monkeypatch.setattr(write, "atomic_bytes", interrupted)
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists() and not _siblings(out)
    monkeypatch.setattr(write, "atomic_bytes", real)

    # what a SIGKILL leaves: a hidden folder without a manifest (and maybe a replaced one)
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    half = tmp_path / ".out.partial-deadbeef"
    shutil.copytree(out, half)
    (half / MANIFEST).unlink()
    shutil.copytree(out, tmp_path / ".out.old-0badc0de")
    unrelated = tmp_path / ".out.partial-notours"
    unrelated.mkdir()
    assert main(["upload", str(half)]) == 2
    assert "manifest.json: not found" in capsys.readouterr().err
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    assert _siblings(out) == [".out.partial-notours"]  # the leftovers of killed writers are gone
    read_result_folder(out)


# --------------------------------------------------------------------------- a link made after the check


def _swap_after_check(monkeypatch, tmp_path: Path, how: str) -> list[str]:
    """Makes the folder's check (read_result_folder, as upload calls it) succeed and then, before anything is
    read for logging, replace a file as another process could: by a link to a copy of itself outside the folder
    (``file``), the folder ``systems`` by a link to a copy of it (``folder``), or the same file rewritten with
    other bytes (``rewrite``). Returns the relative path changed (filled in when the check runs)."""
    import shutil
    import sys

    import ndcg_mlflow.outputs.folder as folder_module

    changed: list[str] = []
    check = folder_module.read_result_folder

    def check_then_swap(folder):
        result = check(folder)
        if sys._getframe(1).f_code.co_name != "_log_folder":  # (the last check, that of the logging itself)
            return result
        folder = Path(folder)
        if how == "folder":
            copy = tmp_path / "systems-copy"
            shutil.copytree(folder / "systems", copy)
            shutil.rmtree(folder / "systems")
            (folder / "systems").symlink_to(copy, target_is_directory=True)
            changed.append("systems/")
        else:
            path = folder / "per_query.csv"
            data = path.read_bytes()
            if how == "file":
                (tmp_path / "outside.csv").write_bytes(data)
                path.unlink()
                path.symlink_to(tmp_path / "outside.csv")
            else:
                path.write_bytes(data.replace(b"\n", b"\r\n", 1))
            changed.append("per_query.csv")
        return result

    monkeypatch.setattr(folder_module, "read_result_folder", check_then_swap)
    return changed


@pytest.mark.integration
@pytest.mark.parametrize("how", ["file", "folder", "rewrite"])
def test_upload_logs_only_what_it_verified(tracking_uri, tmp_path, capsys, monkeypatch, how):
    """A file of the folder replaced by a link (or the systems folder by a link to a copy of it, or a file
    rewritten) after the folder was verified and before it is read for logging is refused, naming it, exit 2,
    and nothing is logged: what upload logs is read from the bytes it verified, following no link."""
    spec = write_spec(tmp_path, "raced", experiment="raced")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    changed = _swap_after_check(monkeypatch, tmp_path, how)
    assert main(["upload", str(out)]) == 2
    err = capsys.readouterr().err
    assert changed and changed[0].rstrip("/") in err and "Traceback" not in err, err
    assert ("symbolic link" if how != "rewrite" else "changed after the folder was verified") in err, err
    assert client_for(tracking_uri).get_experiment_by_name("raced") is None


def test_a_snapshot_holds_the_verified_bytes(tmp_path):
    """snapshot_folder copies every listed file and the manifest, byte for byte."""
    from ndcg_mlflow.outputs.folder import snapshot_folder

    spec = write_spec(tmp_path, "copied")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    manifest = verify_folder(out)
    copy = snapshot_folder(out, manifest, tmp_path / "copy")
    assert _files(copy) == _files(out)
    for rel in [*manifest["files"], MANIFEST]:
        assert (copy / rel).read_bytes() == (out / rel).read_bytes(), rel


def test_a_snapshot_that_cannot_be_written_is_an_error_about_the_copy(tmp_path):
    """Where the copy cannot be made (here its folder is a file; a full temporary folder alike), the error says
    so and names where the copy went: not a traceback, and not a fault of the output folder's files."""
    from ndcg_mlflow.errors import DataError, NdcgError
    from ndcg_mlflow.outputs.folder import snapshot_folder

    spec = write_spec(tmp_path, "nowhere")
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--no-mlflow", "--quiet"]) == 0
    (tmp_path / "copy").write_text("a file, not a folder\n")
    with pytest.raises(NdcgError, match="cannot copy the output folder to") as info:
        snapshot_folder(out, verify_folder(out), tmp_path / "copy")
    assert not isinstance(info.value, DataError) and str(tmp_path / "copy") in str(info.value)
