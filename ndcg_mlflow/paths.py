"""Path and dataset checks: why a path cannot be read as a data file, in words, and the files of a Parquet dataset.

A leaf: the readers, the engines and the spec use these without importing one another (stdlib only).
"""

from __future__ import annotations

import errno
import glob
import os
import stat
from pathlib import Path


def shown_path(path: str | Path, limit: int = 240) -> str:
    """A path for a message, as terminal text (:func:`~.escapes.term_text`: on one line, its control characters
    shown): in full, or its start and end around the number of characters left out."""
    from .escapes import term_text

    text = term_text(path)
    if len(text) <= limit:
        return text
    head, tail = limit // 2, limit // 4
    return f"{text[:head]}...({len(text) - head - tail} characters left out)...{text[-tail:]}"


def os_error_problem(exc: OSError) -> str:
    """What an OSError met while opening or reading a data file means, in words."""
    reasons = {
        errno.ENOENT: "file not found",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EISDIR: "is a directory, not a file",
        errno.ELOOP: "a symbolic link loop (too many levels of symbolic links)",
        errno.ENAMETOOLONG: "file name too long",
        errno.ENOTDIR: "a part of the path is not a directory",
    }
    if exc.errno in reasons:
        return reasons[exc.errno]
    return f"cannot be read: {exc.strerror or type(exc).__name__}"


def file_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as a data file (in words), or None when it is a readable regular file.

    Told apart: not found, permission denied (on the file or on a folder of its path), a directory, a FIFO
    or another non-regular file, a symbolic link loop, a name too long. A FIFO is never opened.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "file not found (a symbolic link to a missing file)" if os.path.islink(path) else "file not found"
    except (OSError, ValueError) as exc:
        return os_error_problem(exc) if isinstance(exc, OSError) else f"not a usable path: {exc}"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a special file"
        )
        return f"not a regular file ({kind})"
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return os_error_problem(exc)
    return None


GLOB_CHARACTERS = "*?["


def dataset_files(path: str | Path) -> list[Path] | None:
    """The files of a Parquet dataset in sorted order: the ``.parquet`` files of a folder, or the files a glob
    pattern (``runs/v3/*.parquet``) matches; None when ``path`` names one file (or nothing)."""
    path = Path(path)
    try:
        if path.is_dir():
            return sorted(p for p in path.iterdir() if p.suffix.lower() == ".parquet" and p.is_file())
    except OSError:
        return None
    text = str(path)
    if any(c in path.name for c in GLOB_CHARACTERS) and not os.path.lexists(path):
        return sorted(Path(p) for p in glob.glob(text) if os.path.isfile(p))
    return None


def source_problem(path: str | Path, delta: bool = False) -> str | None:
    """:func:`file_problem` for a data source, which may also be a folder or glob of Parquet files, or (``delta``)
    a Delta table's folder."""

    def folder(p: Path) -> bool:
        try:
            return p.is_dir()
        except OSError:  # a name too long, a loop: file_problem says which
            return False

    log = Path(path) / "_delta_log"
    if delta:
        problem = None if folder(Path(path)) else file_problem(path) or "is a file, not a Delta table's folder"
        return problem or (None if folder(log) else "is not a Delta table (it has no _delta_log folder)")
    if folder(log):
        return (
            "is a Delta table: its folder holds the Parquet files of every version; declare it as {path: ..., "
            "format: delta, version: N} to read one version"
        )
    files = dataset_files(path)
    if files is None:
        return file_problem(path)
    if not files:
        if Path(path).is_dir():
            return "is a directory, not a file, and holds no .parquet files (a folder is read as a Parquet dataset)"
        return "file not found (the pattern matches no file)"
    for f in files:
        if f.suffix.lower() != ".parquet":
            return f"the pattern matches {f.name}, which is not a .parquet file (a glob is read as a Parquet dataset)"
        problem = file_problem(f)
        if problem is not None:
            return f"{problem}: {shown_path(f)}"
    return None
