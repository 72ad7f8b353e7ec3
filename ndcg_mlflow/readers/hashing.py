"""String hashes, duplicate (query, document) pairs and content digests."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..paths import dataset_files
from .accept import judged_twice
from .table import Ids, Table, arrow_values, numpy_values, pool_array, string_array, string_buffers, take_rows
from .text import CHANGED_WHILE_READ, blocks, native_reader, open_file, unchanged_since


def sha256_file(path: str | Path, version: int | None = None, stop: Any = None) -> str:
    """sha256 of a file's bytes as stored (compressed files too); of a Parquet folder or glob, of its files'
    bytes one after the other, in sorted file order; of a Delta table at ``version``, see
    :func:`~ndcg_mlflow.readers.delta.snapshot_digest`. ``stop``: a ``threading.Event`` that, once set, ends the
    reading early (the result is then meaningless: a digest nobody waits for any more)."""
    if version is not None:
        from .delta import snapshot_digest

        return snapshot_digest(path, version)
    h = hashlib.sha256()
    identity = []
    for part in dataset_files(path) or [Path(path)]:
        with open_file(Path(part)) as fh:
            before = _stat(fh)
            identity.append(_identity(before))
            # read into one buffer, filled again for each block: never mapped, where a file cut short while it is
            # hashed would end the process (SIGBUS) rather than this thread's read
            for block in blocks(fh, HASH_BLOCK):
                h.update(block)  # (hashlib frees the GIL while it hashes a block this large)
                if stop is not None and stop.is_set():
                    return ""
            if before is not None and not unchanged_since(fh, before):  # (the digest would be of no one version)
                raise DataError(part, CHANGED_WHILE_READ)
    digest = FileDigest(h.hexdigest())
    digest.identity = tuple(identity)
    return digest


class FileDigest(str):
    """A file's sha256 (hex), which also knows the files it is of: the (device, inode, size, modification time)
    of each file hashed, as :func:`file_identity` gives them."""

    identity: tuple[Any, ...] | None = None


def _identity(st: Any) -> Any:
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def file_identity(path: str | Path, version: int | None = None) -> tuple[Any, ...] | None:
    """What names the bytes at ``path`` now: the (device, inode, size, modification time) of the file, or of each
    file of a Parquet folder or glob; None for a Delta table's version (its files are never rewritten) or a path
    that cannot be looked at (its reader says why)."""
    import os

    if version is not None:
        return None
    try:
        return tuple(_identity(os.stat(part)) for part in dataset_files(path) or [Path(path)])
    except OSError:
        return None


def read_unchanged(path: str | Path, version: int | None, read: Any) -> tuple[Any, tuple[Any, ...] | None]:
    """``read()`` of the file at ``path`` (its result), and the identity of the file it read: the same before the
    read and after it, or the file was replaced (renamed over, rewritten) while it was read, a DataError."""
    before = file_identity(path, version)
    result = read()
    if file_identity(path, version) != before:
        raise DataError(path, CHANGED_WHILE_READ)
    return result, before


def check_same_file(digest: str, identity: tuple[Any, ...] | None, path: str | Path) -> str:
    """``digest`` (a :func:`sha256_file`), when it is of the very files that were read (``identity``, from
    :func:`read_unchanged`); a file replaced between its hash and its read is a DataError: the recorded sha256
    must be of the bytes evaluated."""
    hashed = getattr(digest, "identity", None)
    if identity is not None and hashed is not None and hashed != identity:
        raise DataError(path, CHANGED_WHILE_READ)
    return str(digest)


def check_unchanged(path: str | Path, digest: str) -> None:
    """For an engine that reads a file lazily, after its last read: the file at ``path`` is still the one its
    digest (a :func:`sha256_file`) was taken of, or a DataError (the recorded sha256 must be of the bytes
    evaluated). A digest that names no file (a Delta version, a table) is not compared."""
    identity = getattr(digest, "identity", None)
    if identity is not None and file_identity(path) != identity:
        raise DataError(path, CHANGED_WHILE_READ)


def read_with_digest(path: str | Path, version: int | None, read: Any) -> tuple[Any, str]:
    """``read()`` of a file and the sha256 of the bytes it read (hashed after the read; a file replaced in
    between is a DataError)."""
    result, identity = read_unchanged(path, version, read)
    return result, check_same_file(sha256_file(path, version), identity, path)


def _stat(fh: Any) -> Any:
    """``os.fstat`` of an open file; None for a stream that has no file (then nothing is compared)."""
    import os

    try:
        return os.fstat(fh.fileno())
    except (OSError, AttributeError, ValueError):
        return None


HASH_BLOCK = 1 << 20  # bytes of a file read, then hashed, at a time (the buffer stays in the cache)


def table_digest(table: Table) -> str:
    """sha256 of a table's content, whatever library held it: the query ids, doc ids (UTF-8), values and ranks
    (float64, -0.0 as 0.0) of its rows in row order, each column length-prefixed. Row order is part of the
    content: under ``ties: displayed_order`` it orders tied rows."""
    import pyarrow as pa

    h = hashlib.sha256(b"ndcg-mlflow table v1\0" + table.kind.encode() + b"\0")
    query = pa.array(table.query.values, type=pa.string()).take(pa.array(table.query.codes, type=pa.int32()))
    doc = table.doc.array
    doc = (doc.combine_chunks() if isinstance(doc, pa.ChunkedArray) else doc).cast(pa.string())
    for name, arr in (("query_id", query), ("doc_id", doc)):
        n = len(arr)
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + n + 1].astype("<i8")
        data = arr.buffers()[2]
        h.update(name.encode() + b"\0" + np.int64(n).astype("<i8").tobytes())
        h.update(np.diff(offsets).astype("<i8").tobytes())
        if data is not None and n:
            h.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    for name, values in (("value", table.value), ("rank", table.rank)):
        if values is not None:
            h.update(name.encode() + b"\0" + (np.asarray(values, dtype=np.float64) + 0.0).astype("<f8").tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- (query, doc) identity

_U = np.uint64
_VECTOR_HASH_MAX = 64  # ids longer than this are hashed individually


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a bijection of uint64 that spreads every input bit (in place when ``h`` is a
    uint64 array of its own)."""
    h = np.asarray(h, dtype=_U)
    t = h >> _U(30)
    h ^= t
    h *= _U(0xBF58476D1CE4E5B9)
    np.right_shift(h, _U(27), out=t)
    h ^= t
    h *= _U(0x94D049BB133111EB)
    np.right_shift(h, _U(31), out=t)
    h ^= t
    return h


def string_hashes(array: Any) -> np.ndarray:
    """A 64-bit hash of each string (equal strings hash equal; unequal ones rarely collide).

    Canonical decimal ids (``7067032``; ASCII digits, no sign, no leading zero, at most 18 digits) hash
    through their integer value; other ids through FNV-1a over their UTF-8 bytes, one byte position at a
    time across all strings of a chunk. The choice is made id by id, so that an id hashes alike whatever
    chunk, table or file it is in.
    """
    import pyarrow as pa

    # slices of at most HASH_SLICE rows: a slice's temporaries stay in the cache, and two threads share the work
    # evenly (a Parquet row group is a million rows)
    chunks = [
        c.slice(a, HASH_SLICE)
        for c in (array.chunks if isinstance(array, pa.ChunkedArray) else [array])
        for a in range(0, len(c), HASH_SLICE)
    ]
    out = pool_array(len(array), _U)
    starts = np.cumsum([0] + [len(c) for c in chunks]).tolist()

    def hash_chunks(which: range) -> None:
        with np.errstate(over="ignore"):
            for i in which:
                if len(chunks[i]):
                    _chunk_hashes(chunks[i], out[starts[i] : starts[i + 1]])

    workers = min(HASH_THREADS, len(chunks)) if len(array) >= 1 << 20 else 1
    if workers <= 1:
        hash_chunks(range(len(chunks)))
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:  # Arrow's casts and numpy's loops free the GIL
        for done in [pool.submit(hash_chunks, range(k, len(chunks), workers)) for k in range(workers)]:
            done.result()
    return out


HASH_THREADS = 2  # threads hashing the chunks of a large column
HASH_SLICE = 1 << 17  # rows hashed at a time


_ZERO = ord("0")
_NINE = ord("9")


def _chunk_hashes(chunk: Any, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`string_hashes` of one chunk, written into ``out`` when given (else a new array)."""
    chunk, offsets, data = string_buffers(chunk)
    fast = native_reader()
    if fast is None:
        hashes = _numpy_hashes(chunk)
        if out is None:
            return hashes
        out[:] = hashes
        return out
    out = np.empty(len(chunk), dtype=_U) if out is None else out
    if fast.string_hashes(offsets, data, out):  # the same hashes, in C; ids longer than _VECTOR_HASH_MAX bytes:
        long_hashes(chunk, offsets, out)
    return out


def long_hashes(chunk: Any, offsets: np.ndarray, out: np.ndarray) -> None:
    """The hashes of a chunk's ids longer than ``_VECTOR_HASH_MAX`` bytes (``offsets``: the chunk's), written into
    ``out`` (the C hashes leave them to this)."""
    import pyarrow as pa

    at = np.flatnonzero(np.diff(offsets) > _VECTOR_HASH_MAX)
    out[at] = _numpy_hashes(chunk.take(pa.array(at)))


def _numpy_hashes(chunk: Any) -> np.ndarray:
    """:func:`string_hashes` of one chunk of Arrow strings, in numpy."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunk, offsets, data = string_buffers(chunk)
    starts = offsets[:-1]
    lengths = (offsets[1:] - starts).astype(np.int64)
    if lengths.max() <= 18 and lengths.min() >= 1:  # the common case first: a chunk of decimal ids
        try:
            ints = numpy_values(pc.cast(chunk, pa.int64()), np.int64)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            ints = None
        # Arrow's cast also takes a sign, leading zeros and a 0x prefix: canonical means a first byte 1-9 (or a
        # single digit), the rest digits as the cast found
        if ints is not None:
            first = data[starts]
            if (((first > _ZERO) & (first <= _NINE)) | (lengths == 1)).all():
                return _int_hashes(ints)
    decimal = numpy_values(pc.ascii_is_decimal(chunk), np.bool_)
    first = data[np.minimum(starts, data.size - 1)]
    canonical = decimal & (lengths <= 18) & ((first != _ZERO) | (lengths == 1))
    h = _byte_hashes(data, starts.astype(np.int64), lengths)
    if canonical.any():
        ints = numpy_values(pc.cast(chunk.filter(arrow_values(canonical)), pa.int64()), np.int64)
        h[canonical] = _int_hashes(ints)
    return h


def _int_hashes(ints: np.ndarray) -> np.ndarray:
    h = ints.astype(_U)
    h += _U(0x9E3779B97F4A7C15)
    return _mix(h)


def _byte_hashes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """FNV-1a over each string's bytes (ids longer than ``_VECTOR_HASH_MAX`` bytes through blake2b), mixed."""
    n = lengths.size
    h = np.full(n, 0xCBF29CE484222325, dtype=_U) ^ lengths.astype(_U)
    prime = _U(0x100000001B3)
    long_ids = np.flatnonzero(lengths > _VECTOR_HASH_MAX)
    if long_ids.size:  # one numpy pass per byte position is for short ids; long ones are hashed one by one
        for i in long_ids:
            raw = data[starts[i] : starts[i] + lengths[i]].tobytes()
            h[i] = np.frombuffer(hashlib.blake2b(raw, digest_size=8).digest(), dtype=_U)[0]
        lengths = np.where(lengths > _VECTOR_HASH_MAX, 0, lengths)
    for j in range(int(lengths.max()) if lengths.size else 0):
        live = lengths > j
        if live.all():
            h = (h ^ data[starts + j].astype(_U)) * prime
        else:
            idx = np.flatnonzero(live)
            h[idx] = (h[idx] ^ data[starts[idx] + j].astype(_U)) * prime
    return _mix(h)


_QUERY_SALT = _U(0xD6E8FEB86659FD93)


def query_mixes(values: np.ndarray) -> np.ndarray:
    """The part of a pair's key that comes from its query id: one uint64 per id of ``values``."""
    with np.errstate(over="ignore"):
        query_hashes = string_hashes(string_array(values))
        query_hashes ^= _QUERY_SALT  # (a pair of two equal ids must not hash to 0 for every id)
        return _mix(query_hashes)


def pair_hashes(table: Table) -> np.ndarray:
    """A 64-bit key per (query, doc) row, a function of the two ids alone (the same pair gives the same key in
    any table, so a run's keys can be looked up among the judgments'); unequal pairs rarely share a key, and
    whoever relies on a match compares the ids themselves (:func:`duplicate_pairs`, the join)."""
    made, table.read_pair_keys = table.read_pair_keys, None  # (the C reader's, when it read the file)
    if made is not None and made.size == len(table):
        return made
    with np.errstate(over="ignore"):
        query_mix = query_mixes(table.query.values)
        keys = string_hashes(table.doc.array)
        fast = native_reader()
        codes = table.query.codes
        if fast is not None and keys.flags.writeable and keys.flags.c_contiguous and codes.dtype == np.int32:
            fast.mix_pairs(keys, np.ascontiguousarray(codes), np.ascontiguousarray(query_mix, dtype=_U))
            return keys
        step = 1 << 20  # a slice at a time: no whole-column temporary
        for a in range(0, keys.size, step):
            keys[a : a + step] ^= query_mix[codes[a : a + step]]
        return keys


def _any_equal_neighbours(sorted_keys: np.ndarray) -> bool:
    """Whether two consecutive values are equal, a slice at a time (no row-length temporary)."""
    step = 1 << 20
    for a in range(0, max(sorted_keys.size - 1, 0), step):
        b = min(a + step, sorted_keys.size - 1)
        if (sorted_keys[a + 1 : b + 1] == sorted_keys[a:b]).any():
            return True
    return False


REPEAT_ROWS = 1 << 20  # the most rows of one query the C duplicate check takes (ckernel.c's REPEAT_ROWS_MAX)
SEGMENT_ROWS = 1 << 12  # rows of whole queries sorted together by the duplicate check of a grouped table


def query_segments(codes: np.ndarray, target: int | None = None) -> np.ndarray | None:
    """Row bounds ``[0, b1, ..., n]`` cutting a table into segments of whole queries, about ``target`` rows each
    (a query of more rows is a segment of its own), when every query's rows are contiguous (a run file lists a
    query's documents together); None when some query's rows are split (its code occurs in two runs of equal
    codes), and then no segment holds all of a query's rows."""
    n = codes.size
    target = target or SEGMENT_ROWS
    if n == 0:
        return None
    starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    heads = codes[np.r_[0, starts]]
    if heads.min() < 0 or np.bincount(heads).max() > 1:  # (not np.unique: it imports numpy.ma, 15 ms)
        return None  # a code starts two runs: that query's rows are not contiguous
    if n <= target:
        return np.array([0, n], dtype=np.int64)
    # the first query start at or after each multiple of the target
    at = np.searchsorted(starts, np.arange(target, n, target, dtype=np.int64))
    cuts = starts[at[at < starts.size]]  # (ascending)
    cuts = cuts[np.r_[True, cuts[1:] != cuts[:-1]]] if cuts.size else cuts
    return np.concatenate(([0], cuts, [n])).astype(np.int64)


def _repeats_in_segments(keys: np.ndarray, bounds: np.ndarray, codes: np.ndarray | None = None) -> bool:
    """Whether some segment ``keys[bounds[i]:bounds[i + 1]]`` holds a key twice. Given the rows' query ``codes``,
    the C pass (``ckernel.repeats``) puts each query's keys in a small hash table, in one pass over the rows in
    this thread; else, and for a query of more rows than it takes, each segment is sorted on its own (small sorts
    stay in the cache: several times faster than one sort of the column), in two threads (numpy's sort and the C
    pass free the GIL)."""
    fast = native_reader() if codes is not None else None
    if fast is not None and not (
        keys.dtype == np.uint64
        and keys.flags.c_contiguous
        and codes is not None
        and codes.dtype == np.int32
        and codes.flags.c_contiguous
    ):
        fast = None

    def check(which: range) -> bool:
        for i in which:
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            if fast is not None:
                found = fast.repeats(keys, codes, lo, hi, REPEAT_ROWS)
                if found >= 0:
                    if found:
                        return True
                    continue
            s = np.sort(keys[lo:hi])
            if (s[1:] == s[:-1]).any():
                return True
        return False

    if fast is not None:  # one pass over every query, in this thread
        found = fast.repeats(keys, codes, 0, keys.size, REPEAT_ROWS)
        if found >= 0:
            return bool(found)
        # (a query of more rows than the C table takes: segment by segment below, that one sorted)
    segments = bounds.size - 1
    if segments < 2 * HASH_THREADS or keys.size < 1 << 16:
        return check(range(segments))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        found = [pool.submit(check, range(k, segments, HASH_THREADS)) for k in range(HASH_THREADS)]
        return any([f.result() for f in found])


def duplicate_pairs(table: Table, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows (first, later) of every (query, doc) pair that occurs more than once, verified exactly. ``keys``:
    the table's :func:`pair_hashes` when already at hand (left as they are); else they are computed.

    Equal pairs have equal keys, so a table whose keys are all distinct has no duplicate: that is checked within
    segments of whole queries when each query's rows are contiguous (a duplicate's two rows share a query, so a
    segment), else over the whole column sorted (one row-length array, sorted in place). Only when some keys
    repeat are their rows compared by their exact ids."""
    given = keys is not None
    if keys is None:
        keys = pair_hashes(table)
    bounds = query_segments(table.query.codes)
    if bounds is not None:
        repeated = _repeats_in_segments(keys, bounds, table.query.codes)
    else:
        if given:
            repeated = _any_equal_neighbours(np.sort(keys))
        else:
            keys.sort()  # keys of our own: sorted in place (one row-length array, not two)
            repeated = _any_equal_neighbours(keys)
            if repeated:
                keys = pair_hashes(table)  # only when some keys repeat: the keys again, in row order
    if not repeated:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    same = np.flatnonzero(sk[1:] == sk[:-1])
    # the rows of repeated keys (a duplicate's, or unequal pairs sharing a key) are ordered by their exact ids,
    # then by row; neighbours of equal ids are the duplicates (first, later), each later row paired with the one
    # before it
    shared = np.zeros(sk.size, dtype=bool)
    shared[same] = True
    shared[same + 1] = True
    rows = order[shared]
    del order, sk
    import pyarrow.compute as pc

    taken = take_rows(table.doc.array, rows)
    docs = numpy_values(pc.dictionary_encode(taken).indices, np.int32)
    queries = table.query.codes[rows]
    exact = np.lexsort((rows, docs, queries))
    rows, docs, queries = rows[exact], docs[exact], queries[exact]
    again = np.flatnonzero((queries[1:] == queries[:-1]) & (docs[1:] == docs[:-1]))
    return rows[again], rows[again + 1]


def first_duplicate(table: Table, keys: np.ndarray | None = None) -> tuple[int, int] | None:
    """(first row, later row) of the duplicate whose later row comes first in the file (``keys``: the table's
    :func:`pair_hashes`, when at hand)."""
    a, b = duplicate_pairs(table, keys)
    if not b.size:
        return None
    i = int(np.argmin(b))
    return int(a[i]), int(b[i])


def dedupe_qrels(table: Table) -> Table:
    a, b = duplicate_pairs(table)
    if not b.size:
        return table
    conflict = np.flatnonzero(table.value[a] != table.value[b])
    if conflict.size:
        i = conflict[np.argmin(b[conflict])]
        first, second = int(a[i]), int(b[i])
        grades = f"{table.value[first]:g} at {table.locate(first)}, {table.value[second]:g} here"
        raise table.error(second, judged_twice(table.doc.row(second), table.query.row(second), grades))
    keep = np.ones(len(table), dtype=bool)
    keep[b] = False
    return Table(
        table.path,
        table.kind,
        Ids(table.query.codes[keep], table.query.values),
        table.doc.filter(keep),
        table.value[keep],
        None,
        table.format,
        table.header_lines,
        np.flatnonzero(keep),
        table.digest,
    )
