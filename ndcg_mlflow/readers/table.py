"""The table every reader returns (:class:`Table`, :class:`Ids`, :class:`Strings`) and the id encoders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .accept import BOM, first_bad_row
from .text import native_reader, open_data


@dataclass
class Ids:
    """Dictionary-encoded strings: ``values[codes[i]]`` is row i's id."""

    codes: np.ndarray  # int32, one per row
    values: np.ndarray  # object array of distinct str

    def __len__(self) -> int:
        return len(self.codes)

    def row(self, i: int) -> str:
        return str(self.values[self.codes[i]])


@dataclass
class Strings:
    """An Arrow string column (document ids), one entry per row."""

    array: Any  # pyarrow Array or ChunkedArray of strings

    def __len__(self) -> int:
        return len(self.array)

    def row(self, i: int) -> str:
        return self.array[int(i)].as_py()

    def take(self, rows: np.ndarray) -> list[str]:
        return take_rows(self.array, rows).to_pylist()

    def filter(self, mask: np.ndarray) -> Strings:
        return Strings(self.array.filter(arrow_values(np.asarray(mask, dtype=bool))))


@dataclass
class Table:
    """One file's rows: ``query``, ``doc`` and ``value`` (grade or score), plus ``rank`` for runs."""

    path: str
    kind: str
    query: Ids
    doc: Strings
    value: np.ndarray  # float64
    rank: np.ndarray | None  # float64, runs only, None when the file has no rank column
    format: str
    header_lines: int = 0
    source_rows: np.ndarray | None = None  # original row of each row, when rows were merged away
    digest: str | None = None  # sha256 of an in-memory table's content (readers.table_digest)
    # a run's (query, doc) keys (readers.hashing.pair_hashes) as its duplicate check computed them, for the join
    # to the judgments, which takes them (None: computed when needed)
    pair_keys: np.ndarray | None = None
    # the (query, doc) keys themselves (readers.hashing.pair_hashes) as the C reader made them, for the first
    # pair_hashes, which takes them
    read_pair_keys: np.ndarray | None = None
    # the values are known to be finite numbers (the C reader refuses a line with any other), so check_finite
    # need not look at them again
    finite: bool = False
    # a check of the rows still under way in a thread (readers.columns.checked_run(background=True)): a function
    # returning its error, or None; :meth:`checked` waits for it
    pending: Any = None

    def __len__(self) -> int:
        return len(self.value)

    def checked(self) -> None:
        """Wait for the check still under way, if any, and raise the error it found."""
        pending, self.pending = self.pending, None
        if pending is not None:
            error = pending()
            if error is not None:
                raise error

    def line_of(self, row: int) -> int | None:
        """The 1-based file line of a row (None for Parquet), counting lines as the readers do:
        blank lines are skipped and the first ``header_lines`` non-blank lines are the header."""
        if self.format in ("parquet", "table"):
            return None
        if self.source_rows is not None:
            row = int(self.source_rows[row])
        seen = -1 - self.header_lines
        with open_data(Path(self.path)) as fh:
            for lineno, raw in enumerate(fh, 1):
                if lineno == 1 and raw.startswith(BOM):
                    raw = raw[3:]
                if raw.strip(b" \t\r\n"):  # blank lines as the readers see them (line ends are LF or CRLF)
                    seen += 1
                    if seen == row:
                        return lineno
        return None

    def locate(self, row: int) -> str:
        """``line 12`` (or ``row 12`` for Parquet) of a row, for messages."""
        line = self.line_of(row)
        if line is not None:
            return f"line {line}"
        src = int(self.source_rows[row]) if self.source_rows is not None else row
        return f"row {src + 1}"

    def at(self, row: int) -> str:
        """``path:line`` of a row (``path, row N`` for Parquet), as error messages start."""
        line = self.line_of(row)
        return f"{self.path}:{line}" if line is not None else f"{self.path}, {self.locate(row)}"

    def error(self, row: int, message: str) -> DataError:
        """A DataError pointing at a row: ``path:line: message`` (``path: row N: message`` for Parquet)."""
        line = self.line_of(row)
        if line is None:
            return DataError(self.path, f"{self.locate(row)}: {message}")
        return DataError(self.path, message, line)


# --------------------------------------------------------------------------- encoding and checks


def encode_ids(column: Any) -> Ids:
    """Codes in order of first appearance. Runs group their queries, so only the boundaries
    between runs of equal ids are looked at; an ungrouped file falls back to a hash encoding."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        return encode_dictionary(column)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    heads_at: list[np.ndarray] = []
    heads: list[str] = []
    base = 0
    fast = native_reader()
    for chunk in chunks:
        n = len(chunk)
        if n:
            if fast is not None and pa.types.is_string(chunk.type) and chunk.null_count == 0:  # the same, in C
                found = np.empty(n, dtype=np.int64)  # (pages touched only where a run starts)
                _, offsets, data = string_buffers(chunk)
                at = found[: fast.run_starts(offsets, data, found)].copy()
                del found
            else:
                change = numpy_values(pc.not_equal(chunk.slice(1), chunk.slice(0, n - 1)), np.bool_)
                at = np.flatnonzero(np.r_[True, change])
            if len(heads) + at.size > 100_000 and at.size > n // 8:  # not grouped by query
                return _encode_hashed(column)
            heads_at.append(at + base)
            heads.extend(chunk.take(arrow_values(at)).to_pylist())
        base += n
    index: dict[str, int] = {}
    head_codes = np.fromiter((index.setdefault(h, len(index)) for h in heads), dtype=np.int32, count=len(heads))
    starts = np.concatenate(heads_at) if heads_at else np.zeros(0, dtype=np.int64)
    if fast is not None:
        codes = pool_array(base, np.int32)
        fast.fill_runs(head_codes, np.ascontiguousarray(np.r_[starts, base], dtype=np.int64), codes)
    else:
        codes = np.repeat(head_codes, np.diff(np.r_[starts, base]))
    return Ids(codes, np.asarray(list(index), dtype=object))


def string_buffers(chunk: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    """(the chunk as Arrow strings, its int32 offsets (length + 1, its slice offset applied), its bytes) of an
    Arrow array of string ids: what the C passes over a string column take."""
    import pyarrow as pa

    if not pa.types.is_string(chunk.type):
        chunk = chunk.cast(pa.string())
    offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1, offset=4 * chunk.offset)
    data = (
        np.frombuffer(chunk.buffers()[2], dtype=np.uint8)
        if chunk.buffers()[2] is not None
        else np.zeros(1, dtype=np.uint8)
    )
    return chunk, offsets, data


def same_strings(a: Any, b: Any) -> bool:
    """Whether two Arrow string arrays hold the same strings, row by row: the same lengths, and the same bytes
    end to end (the lengths then cut both alike)."""
    if len(a) != len(b):
        return False
    if a.null_count or b.null_count:
        return a.equals(b)
    _, off_a, data_a = string_buffers(a)
    _, off_b, data_b = string_buffers(b)
    return bool(
        np.array_equal(np.diff(off_a), np.diff(off_b))
        and np.array_equal(data_a[off_a[0] : off_a[-1]], data_b[off_b[0] : off_b[-1]])
    )


def gather_strings(array: Any, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The strings of ``rows`` of an Arrow string or large_string array (chunked or not, without nulls) as
    (int64 offsets, length + 1; their UTF-8 bytes end to end), gathered from each chunk's buffers (a memcpy a row
    in C, ``ckernel.copy_ranges``; else numpy, a slice of rows at a time), for :func:`take_rows`: no Arrow take,
    whose compute module's import alone costs ~45 ms, and no Python string. None for an array of another type or
    with nulls."""
    import pyarrow as pa

    rows = np.asarray(rows, dtype=np.int64)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    if any(c.null_count or not (pa.types.is_string(c.type) or pa.types.is_large_string(c.type)) for c in chunks):
        return None
    sizes = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))
    first = np.concatenate(([0], np.cumsum(sizes)))
    if rows.size and (rows.min() < 0 or rows.max() >= first[-1]):
        raise IndexError(f"row index out of bounds (a column of {first[-1]} rows)")
    which = np.searchsorted(first, rows, side="right") - 1
    picked = [np.flatnonzero(which == j) for j in range(len(chunks))] if len(chunks) > 1 else [np.arange(rows.size)]
    start, n = np.empty(rows.size, dtype=np.int64), np.empty(rows.size, dtype=np.int64)
    for c, sel, base in zip(chunks, picked, first):
        if sel.size:
            off = _offsets(c)
            local = rows[sel] - base
            start[sel] = off[local]
            n[sel] = off[local + 1] - start[sel]
    offsets = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(n, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    fast = native_reader()
    for c, sel in zip(chunks, picked):
        m, to, at = n[sel], offsets[sel], start[sel]
        if not m.sum():
            continue
        source = np.frombuffer(c.buffers()[2], dtype=np.uint8)
        if fast is not None:  # a memcpy a row
            fast.copy_ranges(source, at, m, data, to)
            continue
        # rows a slice at a time, about GATHER_BYTES of ids each: the byte indices below are 8 bytes a byte
        total = np.cumsum(m)
        cuts = np.searchsorted(total, np.arange(GATHER_BYTES, total[-1], GATHER_BYTES), side="right")
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, m.size]):
            k = m[lo:hi]
            count = int(k.sum())
            if count:
                step = np.arange(count, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)  # 0, 1, .. within a row
                data[np.repeat(to[lo:hi], k) + step] = source[np.repeat(at[lo:hi], k) + step]
    return offsets, data


GATHER_BYTES = 1 << 20  # bytes of ids gather_strings copies at a time without C (its index arrays: 24 bytes a byte)
GATHER_ROWS = 1 << 18  # take_rows gathers at most this many rows itself (a few ids each query shows, tied or
# matched); more go through Arrow's take, whose compute module's import is then small beside the work


def _offsets(chunk: Any) -> np.ndarray:
    """A string or large_string chunk's offsets (length + 1, its slice offset applied), as int32 or int64."""
    import pyarrow as pa

    dtype = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    return np.frombuffer(
        chunk.buffers()[1], dtype=dtype, count=len(chunk) + 1, offset=np.dtype(dtype).itemsize * chunk.offset
    )


def encode_dictionary(column: Any, pool: Any = None) -> Ids:
    """:func:`encode_ids` of a dictionary-encoded string column (as Arrow's CSV reader gives one: a dictionary per
    chunk, a few of a large file's queries each), the same codes and values: each chunk's dictionary is mapped to
    codes in order of first appearance and its indices through that map, into one array. The order is checked to
    be the order of first appearance (codes that first appear in increasing order, every value used), else the
    codes are renumbered in that order. ``pool``: an Arrow memory pool the codes are allocated from (after a large
    parse, pages the parse has just freed there)."""
    import pyarrow as pa

    chunks = [c for c in (column.chunks if isinstance(column, pa.ChunkedArray) else [column]) if len(c)]
    index: dict[str, int] = {}
    n_rows = sum(len(c) for c in chunks)
    codes = (
        np.frombuffer(pa.allocate_buffer(4 * n_rows, memory_pool=pool), dtype=np.int32)
        if pool is not None
        else np.empty(n_rows, dtype=np.int32)
    )
    at = 0
    for chunk in chunks:
        n = len(chunk)
        mapping = np.fromiter(
            (index.setdefault(v, len(index)) for v in chunk.dictionary.to_pylist()),
            dtype=np.int32,
            count=len(chunk.dictionary),
        )
        indices = chunk.indices
        local = np.frombuffer(indices.buffers()[1], dtype=np.int32, count=n, offset=4 * indices.offset)
        np.take(mapping, local, out=codes[at : at + n])
        at += n
    values = np.asarray(list(index), dtype=object)
    if codes.size and not _first_appearance_order(codes, len(values)):
        present, first = np.unique(codes, return_index=True)
        in_order = present[np.argsort(first)]
        renumber = np.zeros(len(values), dtype=np.int32)
        renumber[in_order] = np.arange(in_order.size, dtype=np.int32)
        codes = renumber[codes]
        values = values[in_order]
    return Ids(codes, values)


def _first_appearance_order(codes: np.ndarray, n_values: int) -> bool:
    """Whether codes 0, 1, 2, ... first appear in that order and all of ``n_values`` appear. A code first appears
    where a run of equal codes starts, so only those starts are looked at: each at most one above every one
    before it."""
    starts = codes[np.r_[0, np.flatnonzero(codes[1:] != codes[:-1]) + 1]].astype(np.int64)
    if starts[0] != 0:
        return False
    running = np.maximum.accumulate(starts)
    return bool((starts[1:] <= running[:-1] + 1).all()) and int(running[-1]) + 1 == n_values


def _encode_hashed(column: Any) -> Ids:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    enc = pc.dictionary_encode(column)
    codes = numpy_values(enc.indices, np.int32)
    return Ids(codes, np.asarray(enc.dictionary.to_pylist(), dtype=object))


def encode_id_list(items: list[str]) -> Ids:
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(x, len(index)) for x in items), dtype=np.int32, count=len(items))
    return Ids(codes, np.asarray(list(index), dtype=object))


def string_column(items: list[str]) -> Strings:
    import pyarrow as pa

    return Strings(pa.array(items, type=pa.string()))


def string_array(items: Any) -> Any:
    """An Arrow string array of Python strings, built from their UTF-8 bytes (``pa.array`` of a list imports
    pandas, when installed, which costs more than the ids of a large file take to read)."""
    import pyarrow as pa

    encoded = [str(x).encode("utf-8") for x in items]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    wide = bool(offsets[-1] > np.iinfo(np.int32).max)
    array = pa.Array.from_buffers(
        pa.large_string() if wide else pa.string(),
        len(encoded),
        [None, pa.py_buffer(offsets if wide else offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))],
    )
    return array


# Arrow <-> numpy without pandas: pyarrow's own conversions (``to_numpy``, ``pa.array`` of an ndarray) import pandas
# when it is installed, which costs more than reading a large file's ids takes; these read and wrap the buffers.


def numpy_values(column: Any, dtype: Any = np.float64) -> np.ndarray:
    """A fixed-width Arrow column without nulls (chunked or not; numbers or booleans) as one numpy array of
    ``dtype`` (the column's own width: float64, int64, int32 or bool)."""
    import pyarrow as pa

    dtype = np.dtype(dtype)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if len(chunks) == 1:
        return _chunk_values(chunks[0], dtype)
    out = np.empty(len(column), dtype=dtype)
    at = 0
    for chunk in chunks:
        n = len(chunk)
        out[at : at + n] = _chunk_values(chunk, dtype)
        at += n
    return out


def pooled_values(column: Any, dtype: Any, pool: Any = None) -> np.ndarray:
    """:func:`numpy_values` of a chunked column combined into one buffer of Arrow's ``pool`` (read-only): after a
    large parse, memory the parse has just freed in that pool, where a new numpy array would touch new pages."""
    import pyarrow as pa

    if pool is not None and isinstance(column, pa.ChunkedArray) and column.num_chunks > 1:
        column = column.combine_chunks(memory_pool=pool)
    return numpy_values(column, dtype)


def numpy_values_or(column: Any, dtype: Any, missing: Any) -> np.ndarray:
    """A fixed-width Arrow column (chunked or not) as one numpy array of ``dtype``, ``missing`` where null."""
    import pyarrow as pa

    dtype = np.dtype(dtype)
    out = np.empty(len(column), dtype=dtype)
    at = 0
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        n = len(chunk)
        if n:
            bits = chunk.buffers()[0]
            values = np.frombuffer(chunk.buffers()[1], dtype=dtype, count=n, offset=dtype.itemsize * chunk.offset)
            if chunk.null_count and bits is not None:
                valid = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=chunk.offset + n, bitorder="little")[
                    chunk.offset :
                ].view(np.bool_)
                out[at : at + n] = np.where(valid, values, missing)
            elif chunk.null_count:  # all null
                out[at : at + n] = missing
            else:
                out[at : at + n] = values
        at += n
    return out


def _chunk_values(chunk: Any, dtype: np.dtype) -> np.ndarray:
    n = len(chunk)
    if chunk.null_count:
        raise ValueError("a column with nulls has no plain numpy values")
    if n == 0:
        return np.zeros(0, dtype=dtype)
    buf = chunk.buffers()[1]
    if dtype == np.bool_:
        bits = np.frombuffer(buf, dtype=np.uint8)
        return np.unpackbits(bits, count=chunk.offset + n, bitorder="little")[chunk.offset :].view(np.bool_)
    if chunk.type.bit_width != 8 * dtype.itemsize:
        raise TypeError(f"a {chunk.type} column is not read as {dtype}")
    return np.frombuffer(buf, dtype=dtype, count=n, offset=dtype.itemsize * chunk.offset)


def take_rows(array: Any, rows: np.ndarray) -> Any:
    """``array.take(rows)`` as one Arrow array: up to :data:`GATHER_ROWS` rows of a string column gathered by
    :func:`gather_strings`; else Arrow's take chunk by chunk (Arrow's take of a chunked array concatenates every
    chunk first: a copy of the whole column, ~80 MB of new memory for 7M doc ids, when a few rows are wanted)."""
    import pyarrow as pa

    rows = np.asarray(rows, dtype=np.int64)
    gathered = gather_strings(array, rows) if rows.size <= GATHER_ROWS else None  # (more: Arrow's take)
    if gathered is not None:
        offsets, data = gathered
        wide = pa.types.is_large_string(array.type)
        if wide or offsets[-1] < 2**31:
            return pa.Array.from_buffers(
                pa.large_string() if wide else pa.string(),
                rows.size,
                [None, pa.py_buffer(offsets if wide else offsets.astype(np.int32)), pa.py_buffer(data)],
            )
    if not isinstance(array, pa.ChunkedArray):
        return array.take(arrow_values(rows))
    if array.num_chunks <= 1:
        return (array.chunk(0) if array.num_chunks else pa.array([], type=array.type)).take(arrow_values(rows))
    lengths = np.fromiter((len(c) for c in array.chunks), dtype=np.int64, count=array.num_chunks)
    starts = np.concatenate(([0], np.cumsum(lengths)))
    if rows.size and (rows.min() < 0 or rows.max() >= starts[-1]):
        raise IndexError(f"row index out of bounds (a column of {starts[-1]} rows)")
    which = np.searchsorted(starts, rows, side="right") - 1
    order = None
    if rows.size > 1 and not (which[1:] >= which[:-1]).all():
        order = np.argsort(which, kind="stable")
        rows, which = rows[order], which[order]
    bounds = np.searchsorted(which, np.arange(array.num_chunks + 1))
    pieces = [
        array.chunk(k).take(arrow_values(rows[bounds[k] : bounds[k + 1]] - starts[k]))
        for k in range(array.num_chunks)
        if bounds[k + 1] > bounds[k]
    ]
    out = pa.concat_arrays(pieces) if pieces else pa.array([], type=array.type)
    if order is not None:  # back to the order asked for
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        out = out.take(arrow_values(back))
    return out


def arrow_values(values: np.ndarray) -> Any:
    """A numpy array of int32, int64, float64 or bool as an Arrow array over the same memory (packed bits for
    booleans)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    types = {np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64(), np.dtype(np.float64): pa.float64()}
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), values.size, [None, pa.py_buffer(bits)])
    if values.dtype not in types:
        values = values.astype(np.int64)
    return pa.Array.from_buffers(types[values.dtype], values.size, [None, pa.py_buffer(values)])


def numpy_column(column: Any) -> np.ndarray:
    """A float64 Arrow column without nulls (chunked or not) as one contiguous float64 numpy array."""
    return numpy_values(column, np.float64)


def check_finite(table: Table, what: str) -> None:
    """Refuse the first row whose rank or value (``what``: grade or score) is not finite (the rank first, as its
    field comes first in a TREC line)."""
    if table.finite:
        return
    numbers = {"rank": table.rank} if table.rank is not None else {}
    bad = first_bad_row({}, {**numbers, what: table.value})
    if bad is not None:
        raise table.error(*bad)


def yield_cpu() -> None:
    """Lower the calling thread's CPU priority (Linux: a thread's own nice value), for a background thread whose
    result is waited for last (the digests, the duplicate check): it takes the cores the parse, the join and the
    kernel leave idle rather than slowing them. Nothing where threads have no priority of their own."""
    import os
    import threading

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


def parse_pool() -> Any:
    """The memory pool for a large parse: jemalloc where pyarrow has it. Arrow's default pool (mimalloc) keeps
    the pages its reader threads freed (~150 MB after a 7M-line run), which the kernel's arrays would then come
    on top of; jemalloc hands them back when asked (``release_unused``)."""
    import pyarrow as pa

    try:
        return pa.jemalloc_memory_pool()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return pa.default_memory_pool()


def pool_array(n: int, dtype: Any, pool: Any = None) -> np.ndarray:
    """An uninitialized array of ``n`` items in Arrow's memory pool (:func:`parse_pool` by default): small pages,
    which the pool keeps and hands out again, where numpy asks the system for fresh huge pages for any large
    array (on a virtual machine that returns freed memory to its host, touching those costs ~2 ms a MB)."""
    import pyarrow as pa

    dt = np.dtype(dtype)
    buffer = pa.allocate_buffer(max(n, 1) * dt.itemsize, memory_pool=pool if pool is not None else parse_pool())
    return np.frombuffer(buffer, dtype=dt, count=n)
