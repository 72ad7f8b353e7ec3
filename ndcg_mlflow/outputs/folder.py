"""An output folder as a whole: its atomic publish, its manifest, reading it back, and its lock.

The folder contract:

* A folder is written whole into a new hidden sibling (``.<name>.partial-<random>``) and only
  then put in place by a rename, so ``--out`` holds either its previous contents or the complete
  new result, never a mixture, never a half-written folder. A failure (an exception, a full disk,
  a signal) removes the sibling and leaves ``--out`` as it was.
* ``manifest.json``, written last, lists every file with its size and sha256 and marks the
  folder as written by ndcg-mlflow. A folder without a valid manifest, or whose files differ
  from it, is not a complete result: ``upload`` refuses it.
* ``--out`` may be absent, an empty folder, or an earlier output folder of this tool (its
  manifest lists every file in it); its contents are then replaced as a whole. Any other
  non-empty folder, or a file, is refused.
* Every evaluation written gets a new run key (``run_key.txt``, 32 hex digits).
* One process at a time uses a folder: an exclusive lock on ``.<name>.ndcg-mlflow.lock``
  beside it is held from writing until logging ends (by ``run``) and while uploading (by
  ``upload``). Another process waits for it, saying so on stderr.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import JSON_ERRORS, DataError, NdcgError, preview
from ..paths import shown_path
from ..spec import PARTIAL_SUFFIX

MANIFEST = "manifest.json"
WRITTEN_BY = "ndcg-mlflow"
MANIFEST_VERSION = 1
RUN_KEY = re.compile(r"[0-9a-f]{32}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SUMMARY_KEYS = {
    "name": str,
    "systems": dict,
    "spec": dict,
    "n_queries": int,
    "spec_sha256": str,
    "definition_sha256": str,
}

log = logging.getLogger("ndcg_mlflow")


def atomic_bytes(path: Path, data: bytes) -> None:
    """Write a file under a temporary name (``<name>.partial``), then rename it into place."""
    tmp = path.with_name(path.name + PARTIAL_SUFFIX)
    tmp.write_bytes(data)
    os.replace(tmp, path)


def os_reason(exc: OSError) -> str:
    """Why an operating-system call failed, naming the file."""
    text = exc.strerror or str(exc)
    return f"{text} ({exc.filename})" if exc.filename else text


# --------------------------------------------------------------------------- staging and replacing a folder


@contextmanager
def staged_folder(out: str | Path, *, kind: str, run_key: str | None = None) -> Iterator[Path]:
    """Yield a new empty hidden sibling of ``out`` to write into; when the block ends normally, write its
    manifest (last) and put it in place of ``out`` by a rename. On any failure the sibling is removed and
    ``out`` is untouched. Holds the folder lock throughout (re-entrant: a caller may hold it longer)."""
    out = Path(out)
    refuse_non_folder(out)
    with folder_lock(out):
        target = check_target(out)
        tmp = _fresh_sibling(target)
        try:
            yield tmp
            write_manifest(tmp, kind=kind, run_key=run_key)
            _publish(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def refuse_non_folder(out: Path) -> None:
    """An ``--out`` that exists and is not a folder (a file, ``/dev/null``) is refused before anything."""
    if os.path.lexists(out) and not out.is_dir():
        raise NdcgError(
            f"output folder {shown_path(out)}: exists and is not a folder; give a new or empty folder, or an "
            f"earlier output folder of ndcg-mlflow."
        )
    if out.is_dir() and not Path(os.path.abspath(out)).name:
        raise NdcgError(f"output folder {shown_path(out)}: the root folder cannot be an output folder.")


def check_target(out: str | Path) -> Path:
    """The absolute path that will hold the result, after checking that ``out`` may be replaced: absent,
    an empty folder, or an earlier output folder of ndcg-mlflow holding nothing but what its manifest
    lists. Anything else is refused (exit 2), naming the folder and what is in it."""
    out = Path(out)
    refuse_non_folder(out)
    target = out.resolve()  # a symlink to a folder: the folder it points to is replaced
    if not target.is_dir():
        if os.path.lexists(target):
            raise NdcgError(f"output folder {shown_path(out)}: exists and is not a folder.")
        return target
    try:
        entries = sorted(p.name for p in target.iterdir())
    except OSError as exc:
        raise NdcgError(f"output folder {shown_path(out)}: cannot be read: {os_reason(exc)}.") from None
    if not entries:
        return target
    manifest = _load_manifest(target)
    if manifest is None:
        raise NdcgError(
            f"output folder {shown_path(out)} is not empty and is not an output folder of ndcg-mlflow (it has no "
            f"valid {MANIFEST}); it holds {preview(entries)}. Nothing was written: choose a new or "
            f"empty folder, or empty this one."
        )
    foreign = sorted(set(_files_of(target)) - set(manifest["files"]))
    if foreign:
        raise NdcgError(
            f"output folder {shown_path(out)} is an earlier result of ndcg-mlflow but also holds files it did not "
            f"write: {preview(foreign)}. Nothing was written: move them away or choose another folder "
            f"(an earlier result is replaced as a whole)."
        )
    return target


def _fresh_sibling(target: Path) -> Path:
    """A new hidden folder beside ``target``; leftovers of earlier writers of ``target`` that were killed
    (they cannot be running: the caller holds the folder lock) are removed first."""
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    leftover = re.compile(re.escape(f".{target.name}.") + r"(partial|old)-[0-9a-f]{8}")
    for stale in parent.iterdir():
        if leftover.fullmatch(stale.name):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = parent / f".{target.name}.partial-{secrets.token_hex(4)}"
    tmp.mkdir()
    return tmp


def _publish(tmp: Path, target: Path) -> None:
    """Put the complete folder ``tmp`` in place of ``target`` (absent, empty, or an earlier result)."""
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    if _exchange(tmp, target):  # one atomic step: target now holds the new result, tmp the previous one
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = target.parent / f".{target.name}.old-{secrets.token_hex(4)}"
    os.rename(target, old)
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


# --------------------------------------------------------------------------- the manifest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files_of(folder: Path) -> list[str]:
    """Every file under ``folder`` (relative POSIX paths) except the manifest; anything that is not a
    regular file or a folder is listed too, so that it is never taken for ours."""
    out = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        for name in files:
            path = (rel / name).as_posix()
            if path != MANIFEST:
                out.append(path)
        for name in list(dirs):
            if (Path(root) / name).is_symlink():
                out.append((rel / name).as_posix())
                dirs.remove(name)
    return sorted(out)


def write_manifest(folder: Path, *, kind: str, run_key: str | None) -> Path:
    """``manifest.json``: every file of the folder with its size and sha256, written last and atomically."""
    from ..version import __version__

    files = {}
    for rel in _files_of(folder):
        path = folder / rel
        files[rel] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    manifest = {
        "written_by": WRITTEN_BY,
        "manifest_version": MANIFEST_VERSION,
        "kind": kind,
        "ndcg_mlflow_version": __version__,
        "run_key": run_key,
        "files": files,
    }
    atomic_bytes(folder / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return folder / MANIFEST


def _load_manifest(folder: Path) -> dict | None:
    """The folder's manifest when it is a well-formed manifest of ndcg-mlflow, else None."""
    try:
        return _parse_manifest(folder / MANIFEST)
    except DataError:
        return None


def _parse_manifest(path: Path) -> dict:
    if not path.is_file():
        raise DataError(
            path,
            "not found: the folder is not a complete result of ndcg-mlflow (an interrupted or "
            "failed run leaves none, and a folder without it is never uploaded); run the "
            "evaluation again.",
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except JSON_ERRORS as exc:
        raise DataError(
            path,
            f"cannot be read as JSON ({_short(exc)}): the folder is not a complete result of "
            f"ndcg-mlflow; run the evaluation again.",
        ) from None
    problem = None
    if not isinstance(manifest, dict) or manifest.get("written_by") != WRITTEN_BY:
        problem = f"it does not say written_by: {WRITTEN_BY}"
    elif manifest.get("manifest_version") != MANIFEST_VERSION:
        problem = f"manifest_version {manifest.get('manifest_version')!r} is not {MANIFEST_VERSION}"
    elif not isinstance(manifest.get("files"), dict) or not all(
        isinstance(k, str)
        and _safe_relative(k)
        and isinstance(v, dict)
        and isinstance(v.get("size"), int)
        and isinstance(v.get("sha256"), str)
        and _SHA256.fullmatch(v["sha256"])
        for k, v in manifest["files"].items()
    ):
        problem = "its 'files' are not a mapping of relative paths to {size, sha256}"
    if problem:
        raise DataError(path, f"not a manifest of ndcg-mlflow: {problem}.")
    return manifest


def _safe_relative(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 200 else text[:200] + " …"


def verify_folder(folder: str | Path) -> dict:
    """The manifest of a complete output folder whose files are exactly the ones it lists, unchanged;
    otherwise a :class:`DataError` saying what is missing, changed or foreign."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(
            folder, "not a folder: give the output folder of a finished evaluation (ndcg-mlflow run writes it)."
        )
    manifest = _parse_manifest(folder / MANIFEST)
    listed = manifest["files"]
    present = set(_files_of(folder))
    links = sorted(rel for rel in present | {MANIFEST} if (folder / rel).is_symlink())
    if links:  # never written by ndcg-mlflow: what a link points to is not the folder's to read or upload
        raise DataError(
            folder,
            f"holds symbolic links ({preview(links)}), which ndcg-mlflow never writes: the folder is read and "
            f"uploaded as written, following no link out of it; replace each link by the file it stands for, "
            f"or run the evaluation again.",
        )
    missing = sorted(set(listed) - present)
    foreign = sorted(present - set(listed))
    changed = []
    for rel in sorted(set(listed) & present):
        path = folder / rel
        try:
            if path.stat().st_size != listed[rel]["size"] or _sha256(path) != listed[rel]["sha256"]:
                changed.append(rel)
        except OSError:
            changed.append(rel)
    if missing or changed or foreign:
        parts = []
        if missing:
            parts.append(f"missing: {preview(missing)}")
        if changed:
            parts.append(f"changed since it was written: {preview(changed)}")
        if foreign:
            parts.append(f"not written by ndcg-mlflow: {preview(foreign)}")
        advice = (
            "run the evaluation again"
            if missing or changed
            else "move those files out of the folder (it is uploaded as written, nothing more)"
        )
        raise DataError(
            folder,
            f"does not match its {MANIFEST} ({'; '.join(parts)}), so it is not the complete "
            f"result of one evaluation as written; {advice}.",
        )
    return manifest


def snapshot_folder(folder: str | Path, manifest: dict, dest: str | Path) -> Path:
    """``dest``, made a copy of the verified output folder ``folder`` (``manifest``, :func:`verify_folder`'s):
    every file the manifest lists and the manifest itself, each opened without following a symbolic link at any
    step of its path below ``folder`` and its sha256 checked against the manifest as it is copied. Logging reads
    the copy, so a file rewritten, or replaced by a link, after the folder was verified is refused
    (:class:`DataError` naming it) rather than uploaded: what is logged is what was verified."""
    folder, dest = Path(folder), Path(dest)
    for rel in [*sorted(manifest["files"]), MANIFEST]:
        target = dest / rel
        h, size = hashlib.sha256(), 0
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = open(target, "wb")  # noqa: SIM115 (closed by the with below, which reads the source)
        except OSError as exc:
            raise NdcgError(
                f"cannot copy the output folder to {shown_path(dest)} before logging it: {_short(exc)}."
            ) from None
        try:
            with os.fdopen(_open_below(folder, rel), "rb") as src, out:
                if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file")
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    try:
                        size += out.write(block)
                    except OSError as exc:  # (the copy, not the folder: a full temporary folder)
                        raise NdcgError(
                            f"cannot copy the output folder to {shown_path(dest)} before logging it: {_short(exc)}; "
                            f"nothing was "
                            f"logged (the copy is made in the temporary folder: TMPDIR)."
                        ) from None
        except OSError as exc:
            linked = exc.errno in (errno.ELOOP, errno.ENOTDIR)
            raise DataError(
                folder / rel,
                ("was replaced by a symbolic link" if linked else f"cannot be read ({_short(exc)})")
                + " after the folder was verified: nothing was logged; run the evaluation again.",
            ) from None
        same = (
            _parse_manifest(target) == manifest
            if rel == MANIFEST
            else size == manifest["files"][rel]["size"] and h.hexdigest() == manifest["files"][rel]["sha256"]
        )
        if not same:
            raise DataError(
                folder / rel,
                "changed after the folder was verified (rewritten while it was being logged): nothing was "
                "logged; run the evaluation again.",
            )
    return dest


def _open_below(folder: Path, rel: str) -> int:
    """A read-only descriptor of ``folder / rel`` (a POSIX relative path) that follows no symbolic link below
    ``folder``: each folder of the path and the file itself opened with ``O_NOFOLLOW`` (a link is ``ELOOP``),
    the file without blocking (a FIFO opens, and is then refused as no regular file)."""
    *dirs, name = rel.split("/")
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))  # (the folder named may be a link)
    try:
        for part in dirs:
            inner = os.open(part, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(name, os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0), dir_fd=fd)
    finally:
        os.close(fd)


@dataclass
class ResultFolder:
    """A verified output folder of an evaluation: its summary and run key."""

    path: Path
    summary: dict[str, Any]
    run_key: str
    manifest: dict[str, Any]


def read_result_folder(folder: str | Path) -> ResultFolder:
    """Verify an evaluation's output folder (complete, unchanged, a valid run key and summary) and read it.
    Every problem is a :class:`DataError` naming the file and what was expected."""
    folder = Path(folder)
    manifest = verify_folder(folder)
    if manifest.get("kind") != "evaluation":
        raise DataError(
            folder / MANIFEST,
            f"this folder holds a {manifest.get('kind')!r}, not the output of an "
            f"evaluation: there is nothing to upload.",
        )
    for needed in ("run_key.txt", "summary.json", "spec.yaml"):
        if needed not in manifest["files"]:
            raise DataError(
                folder / needed,
                "not found: give the output folder of a finished evaluation (ndcg-mlflow run writes it).",
            )
    run_key = check_run_key(folder / "run_key.txt")
    if manifest.get("run_key") != run_key:
        raise DataError(folder / "run_key.txt", f"the run key {run_key} is not the one of {MANIFEST}.")
    path = folder / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except JSON_ERRORS as exc:
        raise DataError(path, f"cannot be read as JSON: {_short(exc)}.") from None
    if not isinstance(summary, dict):
        raise DataError(path, "expected a JSON object (the summary of an evaluation).")
    for key, kind in _SUMMARY_KEYS.items():
        if not isinstance(summary.get(key), kind):
            raise DataError(
                path,
                f"expected the key '{key}' holding a {kind.__name__} (the summary of an "
                f"evaluation written by ndcg-mlflow run).",
            )
    if "per_query.csv" not in manifest["files"] and not isinstance(summary.get("per_query_path"), str):
        raise DataError(
            folder / "per_query.csv",
            "not found: give the output folder of a finished evaluation (ndcg-mlflow run writes it).",
        )
    for name, means in summary["systems"].items():
        if not isinstance(means, dict) or not all(isinstance(m, dict) and "mean" in m for m in means.values()):
            raise DataError(path, f"expected 'systems.{name}' to map each cutoff to its mean and counts.")
    if "mlflow" in summary and not isinstance(summary["mlflow"], dict):
        raise DataError(path, "expected the key 'mlflow' holding a mapping.")
    return ResultFolder(folder, summary, run_key, manifest)


def check_run_key(path: Path) -> str:
    """The run key of ``run_key.txt``: 32 lowercase hex digits (a new uuid4 per evaluation)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(path, f"cannot be read: {_short(exc)}.") from None
    key = text.strip()
    if not RUN_KEY.fullmatch(key):
        shown = key if len(key) <= 60 else key[:60] + "…"
        raise DataError(
            path, f"expected a run key of 32 lowercase hex digits (ndcg-mlflow run writes one), found {shown!r}."
        )
    return key


# --------------------------------------------------------------------------- one process at a time per folder


class _Held:
    def __init__(self) -> None:
        self.thread_lock = threading.RLock()
        self.count = 0
        self.fd: int | None = None
        self.path: Path | None = None


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def lock_path(folder: str | Path) -> Path:
    """The lock file of an output folder: ``.<name>.ndcg-mlflow.lock`` beside it."""
    target = Path(folder).resolve()
    return target.parent / f".{target.name}.ndcg-mlflow.lock"


@contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """Exclusive use of an output folder by this process: writing it, logging it, uploading it.

    Another process waits (saying so on stderr). Re-entrant within a thread, so ``run`` holds it from
    writing until logging ends while the writing and logging functions take it too. The lock file is
    removed on release; a waiter that then finds its file gone takes the lock anew."""
    key = str(Path(folder).resolve())
    with _HELD_GUARD:
        held = _HELD.setdefault(key, _Held())
    with held.thread_lock:
        if held.count == 0:
            held.fd, held.path = _acquire(Path(folder))
        held.count += 1
        try:
            yield
        finally:
            held.count -= 1
            if held.count == 0:
                _release(held.fd, held.path)
                held.fd, held.path = None, None


def _acquire(folder: Path) -> tuple[int, Path | None]:
    path = lock_path(folder)
    waited = False
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and folder.is_dir():
                # a folder in a read-only place: nobody can replace it, so locking the folder itself suffices
                fd = os.open(folder, os.O_RDONLY)
                _flock(fd, folder, waited)
                return fd, None
            raise NdcgError(
                f"output folder {shown_path(folder)}: cannot create its lock file {shown_path(path)}: {os_reason(exc)}."
            ) from None
        try:
            waited = _flock(fd, folder, waited) or waited
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            except OSError:
                pass
            return fd, path
        os.close(fd)  # the holder removed this lock file on release: take the new one


def _flock(fd: int, folder: Path, waited: bool) -> bool:
    """Lock ``fd`` exclusively; True when it had to wait for another process."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        pass
    if not waited:
        log.warning(
            f"output folder {folder} is in use by another ndcg-mlflow process (writing, logging or "
            f"uploading it); waiting for it to finish"
        )
    fcntl.flock(fd, fcntl.LOCK_EX)
    return True


def _release(fd: int | None, path: Path | None) -> None:
    import fcntl

    if fd is None:
        return
    try:
        if path is not None:
            try:
                path.unlink()  # still held: a waiter on this file will notice and retry on a new one
            except OSError:
                pass
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
