"""Opening data files (gzip, zstd), reading their lines, and the scan of their bytes that chooses a reader (what a
line, a field and a number may be: :mod:`.accept`)."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import DataError
from ..paths import file_problem, os_error_problem
from .accept import BOM, Refused, clip, is_blank, line_text, strip_line_end

# --------------------------------------------------------------------------- files


def open_file(path: Path) -> BinaryIO:
    """``open(path, 'rb')`` for a file checked by :func:`check_file`; an OSError becomes a DataError."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise DataError(path, os_error_problem(exc) + ".") from None


COMPRESSION = {".gz": "gzip", ".zst": "zstd"}


def open_data(path: Path) -> BinaryIO:
    """A file's text bytes: ``.gz`` and ``.zst`` files decompressed as they are read (Arrow's codecs)."""
    codec = COMPRESSION.get(path.suffix.lower())
    fh = open_file(path)
    if codec is None:
        return fh
    import io

    import pyarrow as pa

    raw: Any = _Decompressed(path, codec, fh, pa.CompressedInputStream(pa.PythonFile(fh, "r"), codec))
    return io.BufferedReader(raw, buffer_size=1 << 20)  # (a raw stream by duck typing)


class _Decompressed:
    """A raw stream over Arrow's decompressing stream; a corrupt or truncated file is a DataError."""

    def __init__(self, path: Path, codec: str, fh: BinaryIO, stream: Any) -> None:
        self.path, self.codec, self.fh, self.stream = path, codec, fh, stream
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        try:
            data = self.stream.read(len(buffer))
        except (OSError, ValueError, EOFError) as exc:
            raise DataError(self.path, f"not readable as {self.codec} data: {clip(str(exc), 200)}") from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.stream.close()
            self.fh.close()

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("no file descriptor")

    def isatty(self) -> bool:
        return False


def check_file(path: Path) -> None:
    problem = file_problem(path)
    if problem is not None:
        raise DataError(path, problem + ".")


def first_line(path: Path) -> tuple[int, str]:
    """(line number, text) of the first non-blank line (BOM and line end removed); (0, '') when none."""
    with open_data(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[3:]
            text = strip_line_end(raw).decode("utf-8", errors="replace")
            if not is_blank(text):
                return lineno, text
    return 0, ""


# --------------------------------------------------------------------------- lines, and the scan of a file's bytes


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of every line, LF or CRLF ended (:func:`.accept.line_text`: a
    carriage return anywhere else, or text that is not UTF-8, is an error naming the line)."""
    with open_data(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[3:]
            try:
                text = line_text(strip_line_end(raw))
            except Refused as exc:
                raise exc.at(path, lineno) from None
            yield lineno, text


def line_reader_only() -> bool:
    """Whether every text file is read line by line (``NDCG_MLFLOW_LINE_READER=1``: no C reader, no Arrow fast
    path; the same tables and errors, slower), for the tests of each path."""
    import os

    return os.environ.get("NDCG_MLFLOW_LINE_READER", "") not in ("", "0")


def native_reader() -> Any:
    """The C functions the readers use: the TREC reader's inner loop and the id hashes (``readers/cparse.c``) and
    the passes over a column's rows (``ckernel.c``), built when the package is installed where a C compiler is;
    None when they are not built, or turned off by ``NDCG_MLFLOW_PURE_PYTHON=1`` (the readers are then Arrow's and
    the line reader, and numpy makes the passes: the same numbers)."""
    import os

    if os.environ.get("NDCG_MLFLOW_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from ..ckernel import copy_ranges, fill_runs, mix_pairs, repeats, run_starts
        from .cparse import FileCutShort, count_lines, parse_trec, string_hashes, vector_width
    except ImportError:
        return None
    return NativeReader(
        count_lines,
        parse_trec,
        string_hashes,
        run_starts,
        fill_runs,
        mix_pairs,
        vector_width,
        repeats,
        copy_ranges,
        FileCutShort,
    )


@dataclass(frozen=True)
class NativeReader:
    count_lines: Any  # (data, start, stop) -> the LF bytes in data[start:stop]
    parse_trec: Any  # whole TREC lines of a range of bytes into the caller's arrays (see cparse.c)
    string_hashes: Any  # (offsets, data, out) -> hashing.string_hashes of an Arrow string array's buffers
    run_starts: Any  # (offsets, data, out) -> k: out[:k] the rows whose string differs from the one before
    fill_runs: Any  # (values, starts, out): out[starts[j]:starts[j + 1]] = values[j]
    mix_pairs: Any  # (keys, codes, query_mix): keys ^= query_mix[codes], in place
    vector_width: Any  # (0, 128, 256 or None) -> the C reader's vector width in bits (0: none; a width: switched to)
    repeats: Any  # (keys, codes, start, stop) -> 1 if a key repeats within a run of equal codes, 0 if not, -1: too long
    copy_ranges: Any  # (source, starts, lengths, dest, at): each range of bytes of source copied to dest at at[i]
    FileCutShort: Any  # the OSError of count_lines and parse_trec when the mapped file they read was cut short


SCAN_BLOCK = 1 << 22  # bytes the scan reads at a time

CHANGED_WHILE_READ = (
    "the file changed while it was read (another program truncated, rewrote or replaced it); "
    "read it again once it is complete."
)


def unchanged_since(fh: Any, before: Any) -> bool:
    """Whether the open file's size, modification time and inode are still those of ``before`` (an ``os.stat``
    result): a file rewritten or cut short while it was read is caught by its end."""
    import os

    after = os.fstat(fh.fileno())
    return (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)


@dataclass
class _Scan:
    """What one pass over a text file's bytes found (for choosing the Arrow fast path safely)."""

    utf8: bool = True
    lone_cr: bool = False  # a carriage return not followed by a line feed (the scan stops there)
    has: dict[bytes, bool] = field(default_factory=dict)  # byte -> present anywhere
    empty_field: bool = False  # with ``fields``: a TREC field would be empty under a one-byte separator


def read_full(fh: Any, view: memoryview) -> int:
    """Fill ``view`` from ``fh`` (short reads, as from a decompressing stream, are read on); the bytes read, fewer
    than ``len(view)`` only at the end of the file."""
    n = 0
    while n < len(view):
        got = fh.readinto(view[n:])
        if not got:
            break
        n += got
    return n


def blocks(fh: Any, size: int = SCAN_BLOCK) -> Iterator[bytearray]:
    """A file's bytes, ``size`` at a time, in one buffer filled again for each block (a block is valid until the
    next is asked for): a pass over a large file touches ``size`` bytes of fresh memory, not the file's size. The
    last, shorter block is a copy. A file smaller than ``size`` gets a buffer of its size."""
    import os

    try:
        size = max(1, min(size, os.fstat(fh.fileno()).st_size + 1))
    except (OSError, AttributeError, ValueError):
        pass  # (a decompressing stream: its size is not known)
    buf = bytearray(size)
    view = memoryview(buf)
    try:
        while True:
            n = read_full(fh, view)
            if n == size:
                yield buf
            else:
                if n:
                    yield buf[:n]
                return
    finally:
        view.release()


def scan_text(path: Path, fields: bool = False) -> _Scan:
    """One pass over the bytes: records whether space, tab and the double quote occur, and a lone CR (where it
    stops: the line reader then reads the file, naming the first line at fault); checks UTF-8. With ``fields``,
    also records whether splitting each line at every single space or tab would give an empty field (a separator
    at a line's start or end, or two in a row), which the split at runs of spaces and tabs would not see."""
    scan = _Scan(has={b" ": False, b"\t": False, b'"': False})
    decoder = codecs.getincrementaldecoder("utf-8")()
    cr_before = False  # the byte before ``data`` is a CR (whose LF, if any, opens ``data``)
    before = -1  # the byte before ``data`` (-1: the start of the file, as a line start)
    scratch: _FieldScratch | None = None
    with open_data(path) as fh:
        for i, block in enumerate(blocks(fh)):
            if fields and scratch is None:
                scratch = _FieldScratch(len(block))
            data: bytes | bytearray = block[3:] if i == 0 and block.startswith(BOM) else block
            if not data:
                continue
            # a CR not followed by a LF (one in a block's last byte: its next block's first byte says)
            cr_before, lone = data[-1] == _CR, cr_before and data[0] != _LF
            if lone or b"\r" in data and data.count(b"\r") - cr_before != data.count(b"\r\n"):
                scan.lone_cr = True
                return scan
            if scan.utf8 and not (data.isascii() and decoder.getstate()[0] == b""):
                try:
                    decoder.decode(data)
                except UnicodeDecodeError:
                    scan.utf8 = False
            for mark in scan.has:
                if not scan.has[mark] and mark in data:
                    scan.has[mark] = True
            if scratch is not None and not scan.empty_field:
                scan.empty_field = _empty_field(data, before, scratch)
            before = data[-1]
    scan.lone_cr = cr_before  # a CR at the very end of the file
    if fields and before in _SEPARATORS:  # the last line ends with a separator
        scan.empty_field = True
    if scan.utf8:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            scan.utf8 = False
    return scan


_CR, _LF = ord("\r"), ord("\n")


class _FieldScratch:
    """The flag arrays :func:`_empty_field` fills for each block, made once per scan."""

    def __init__(self, size: int) -> None:
        import numpy as np

        self.low = np.empty(size, dtype=np.bool_)
        self.pair = np.empty(size, dtype=np.bool_)


_SEPARATORS = (ord(" "), ord("\t"))
_LINE_BREAKS = (ord("\n"), ord("\r"))


def _empty_field(data: bytes | bytearray, before: int, scratch: _FieldScratch) -> bool:
    """Whether two neighbouring bytes of ``data`` (``before``, the byte preceding it, -1 for the start of the
    file) are a separator (space or tab) and a separator or line break, in either order: an empty field where
    lines are split at every single separator. Vectorized: the pairs of bytes both at most 32 (rare in text but
    for CRLF line ends) are looked at one by one."""
    import numpy as np

    a = np.frombuffer(data, dtype=np.uint8)
    n = a.size
    low = np.less_equal(a, 32, out=scratch.low[:n])
    pairs = np.flatnonzero(np.logical_and(low[:-1], low[1:], out=scratch.pair[: max(n - 1, 0)]))
    x, y = a[pairs], a[pairs + 1]
    sep_x = (x == 32) | (x == 9)
    sep_y = (y == 32) | (y == 9)
    if (sep_x & (sep_y | (y == 10) | (y == 13))).any() or ((x == 10) | (x == 13))[sep_y].any():
        return True
    head = int(a[0])
    if head in _SEPARATORS:
        return before < 0 or before in _SEPARATORS or before in _LINE_BREAKS
    return head in _LINE_BREAKS and before in _SEPARATORS
