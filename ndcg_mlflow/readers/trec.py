"""TREC qrels and runs: Arrow's CSV reader when its split is sure to be the line-by-line split, else line by line."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .accept import (
    BOM,
    QRELS,
    RUN,
    TREC_COLUMNS,
    Refused,
    first_empty,
    no_data_lines,
    strip_line_end,
    trec_refusal,
    trec_row,
)
from .hashing import long_hashes, query_mixes
from .table import (
    Ids,
    Strings,
    Table,
    encode_dictionary,
    encode_id_list,
    parse_pool,
    pool_array,
    pooled_values,
    string_column,
)
from .text import (
    CHANGED_WHILE_READ,
    COMPRESSION,
    line_reader_only,
    native_reader,
    open_data,
    open_file,
    scan_text,
    text_lines,
    unchanged_since,
)

# --------------------------------------------------------------------------- TREC


def read_trec(path: Path, kind: str, rank: bool = True) -> Table:
    """A TREC file: through the C reader (:func:`_trec_native`) when it is built and the file is not compressed
    (its first refused line is then the error, in :mod:`.accept`'s words); else through Arrow's reader when
    :func:`_trec_delimiter` clears it; else (and whenever the C reader is not sure of a line) line by line, which
    names the line of an error. ``NDCG_MLFLOW_LINE_READER=1``: line by line.

    The scan of the bytes that decides it runs beside Arrow's parse, which starts on the separator of the
    file's first block; the parse is kept only when the scan then names the same separator (a lone CR the
    scan finds sends the file to the line reader, whatever the parse gave)."""
    from concurrent.futures import ThreadPoolExecutor

    if line_reader_only():
        return _trec_python(path, kind, rank)
    if native_reader() is not None and path.suffix.lower() not in COMPRESSION:
        try:
            native = _trec_native(path, kind, rank)
        except NotMappable:
            pass  # (Arrow's reader, below)
        else:
            return native if native is not None else _trec_python(path, kind, rank)
    guess = _first_block_delimiter(path)
    table: Table | None = None
    with ThreadPoolExecutor(max_workers=1) as pool:
        decided = pool.submit(_trec_delimiter, path)
        if guess is not None:
            try:
                table = _trec_arrow(path, kind, guess, rank)
            except FastPathRefused:
                table = None
            except BaseException:
                decided.result()  # the scan's error (a file that cannot be read) comes first
                raise
        delimiter = decided.result()
    if delimiter is not None and delimiter == guess:
        if table is not None:
            return table
    elif delimiter is not None:
        try:
            return _trec_arrow(path, kind, delimiter, rank)
        except FastPathRefused:
            pass
    return _trec_python(path, kind, rank)


class NotMappable(Exception):
    """The file cannot be memory-mapped (the C reader then leaves it to Arrow's reader)."""


NATIVE_PART = 1 << 24  # bytes of a file the C reader parses in one call (one Arrow chunk of document ids)


def _trec_native(path: Path, kind: str, want_rank: bool = True, part_size: int = NATIVE_PART) -> Table | None:
    """The file's rows as the line-by-line reader reads them, parsed in C (``readers/cparse.c``), the file's parts
    (whole lines, about ``part_size`` bytes each) on Arrow's CPU threads. The first line the C reader does not take
    (a line end, bytes that are not UTF-8, a field count, a number: its code and the line's offset) is a DataError
    naming the line, in the words of :func:`.accept.trec_refusal`; None when that check of the line does not
    agree with the C reader's (the line reader then reads the file). The rows' (query, doc) keys
    (``hashing.pair_hashes``) come with the table (``read_pair_keys``), for the duplicate check and the join."""
    fast = native_reader()
    fh = open_file(path)
    try:
        return _trec_mapped(path, fh, fast, kind, want_rank, part_size)
    except fast.FileCutShort:
        raise DataError(path, CHANGED_WHILE_READ) from None
    finally:
        fh.close()


def _trec_mapped(path: Path, fh: Any, fast: Any, kind: str, want_rank: bool, part_size: int) -> Table | None:
    """:func:`_trec_native`'s work on the open file ``fh``: its bytes mapped for the C calls, which are guarded
    against the file being cut short (``FileCutShort``); the few bytes looked at here are read with ``pread``,
    which a shorter file answers with fewer bytes, never a fault. A file whose size or modification time changed
    by the end is refused (DataError)."""
    import mmap
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    fd = fh.fileno()
    before = os.fstat(fd)
    size = before.st_size
    if size == 0:
        raise DataError(path, no_data_lines(kind))
    try:
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system or special file that cannot be mapped
        raise NotMappable() from None
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    try:
        start = 3 if os.pread(fd, 3, 0) == BOM else 0
        cuts = [start]
        while cuts[-1] < size:
            at = _line_end(fd, min(cuts[-1] + part_size, size) - 1, size, path)
            cuts.append(size if at < 0 else at + 1)
        parts = list(zip(cuts[:-1], cuts[1:]))
        last_byte = os.pread(fd, 1, size - 1)
        if len(last_byte) != 1:
            raise DataError(path, CHANGED_WHILE_READ)
        workers = max(1, min(pa.cpu_count(), len(parts)))
        pool = parse_pool()
        with (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ndcg-mlflow-parse")
            if workers > 1
            else _Inline() as ex
        ):

            def lines(part: tuple[int, int]) -> int:  # a part's lines (the last may have no line end): its most rows
                a, b = part
                _advise(mm, a, b, _POPULATE_READ)
                n = fast.count_lines(mm, a, b) + (b == size and last_byte != b"\n")  # (other parts end at a LF)
                _advise(mm, a, b, dontneed)  # (the file's pages are not held)
                return n

            counts = list(ex.map(lines, parts))
            first = np.cumsum([0] + counts)
            n_max = int(first[-1])
            codes = pool_array(n_max, np.int32, pool)
            values = pool_array(n_max, np.float64, pool)
            ranks = pool_array(n_max, np.float64, pool) if kind == RUN and want_rank else None
            hashes = pool_array(n_max, np.uint64, pool)

            def parse(k: int) -> tuple:
                a, b = parts[k]
                lo, hi = int(first[k]), int(first[k + 1])
                offsets = pa.allocate_buffer(4 * (hi - lo + 1), memory_pool=pool)
                data = pa.allocate_buffer(b - a, memory_pool=pool)
                _advise(mm, a, b, _POPULATE_READ)  # the part's pages mapped at once, not a fault at a time
                out = fast.parse_trec(
                    mm,
                    a,
                    b,
                    kind == QRELS,
                    bool(want_rank),
                    codes[lo:hi],
                    offsets,
                    data,
                    values[lo:hi],
                    None if ranks is None else ranks[lo:hi],
                    hashes[lo:hi],
                )
                _advise(mm, a, b, dontneed)  # and let go (they stay in the page cache)
                return out, offsets, data

            results = list(ex.map(parse, range(len(parts))))
            refused = next((k for k, r in enumerate(results) if r[0][0] != 0), None)
            if refused is not None:  # the first part's first refused line (earlier parts took every line)
                why, at = results[refused][0][5:]
                line = parts[refused][0] + at
                end = _line_end(fd, line, size, path)
                body = strip_line_end(os.pread(fd, (size if end < 0 else end + 1) - line, line))
                message = trec_refusal(why, body, kind, want_rank)
                if message is None:
                    return None
                raise DataError(path, message, fast.count_lines(mm, 0, line) + 1)
            if sum(r[0][1] for r in results) == 0:
                raise DataError(path, no_data_lines(kind))
            query_values: dict[bytes, int] = {}
            chunks, kept, maps = [], [], []
            for k, ((_, rows, doc_bytes, long_ids, query_ids, *_), offsets, data) in enumerate(results):
                lo = int(first[k])
                local = np.fromiter(
                    (query_values.setdefault(q, len(query_values)) for q in query_ids),
                    dtype=np.int32,
                    count=len(query_ids),
                )
                # (the part's codes, as the whole file's: below, with the keys)
                maps.append(None if np.array_equal(local, np.arange(local.size)) else local)
                chunks.append(
                    pa.Array.from_buffers(
                        pa.string(), rows, [None, offsets.slice(0, 4 * (rows + 1)), data.slice(0, doc_bytes)]
                    )
                )
                kept.append((lo, lo + rows))
                if long_ids:  # (the C reader leaves the longest ids' hashes to Python)
                    long_hashes(
                        chunks[-1], np.frombuffer(offsets, dtype=np.int32, count=rows + 1), hashes[lo : lo + rows]
                    )
            strings = np.empty(len(query_values), dtype=object)
            strings[:] = [v.decode() for v in query_values]
            query_mix = query_mixes(strings)

            def finish(k: int) -> None:  # the part's codes made the file's, its hashes the (query, doc) keys
                lo, hi = kept[k]
                fast.mix_pairs(hashes[lo:hi], codes[lo:hi], query_mix, maps[k])

            list(ex.map(finish, range(len(parts))))
    finally:
        mm.close()
    if not unchanged_since(fh, before):
        raise DataError(path, CHANGED_WHILE_READ)
    if any(b - a != int(first[k + 1] - first[k]) for k, (a, b) in enumerate(kept)):  # blank lines: close the gaps
        keep = np.concatenate([np.arange(a, b) for a, b in kept])
        codes, values, hashes = codes[keep], values[keep], hashes[keep]
        ranks = None if ranks is None else ranks[keep]
    else:
        n = kept[-1][1]
        codes, values, hashes = codes[:n], values[:n], hashes[:n]
        ranks = None if ranks is None else ranks[:n]
    table = Table(
        str(path), kind, Ids(codes, strings), Strings(pa.chunked_array(chunks, type=pa.string())), values, ranks, "trec"
    )
    table.read_pair_keys = hashes
    table.finite = True  # (parse_trec refuses a number that is not finite)
    return table


LINE_END_WINDOW = 1 << 16  # bytes read at a time while looking for the line end after a part's nominal end


def _line_end(fd: int, at: int, size: int, path: Path) -> int:
    """The offset of the first LF at or after ``at`` in the file's first ``size`` bytes, -1 when there is none."""
    while at < size:
        window = os.pread(fd, min(LINE_END_WINDOW, size - at), at)
        if not window:
            raise DataError(path, CHANGED_WHILE_READ)
        found = window.find(b"\n")
        if found >= 0:
            return at + found
        at += len(window)
    return -1


_POPULATE_READ = 22  # Linux's MADV_POPULATE_READ (5.14 and later; refused by older kernels, then skipped)


def _advise(mm: Any, start: int, stop: int, advice: int | None) -> None:
    """``madvise`` of the whole pages of ``mm[start:stop]``, where the system takes the advice."""
    import mmap

    if advice is None or not hasattr(mm, "madvise"):
        return
    start -= start % mmap.PAGESIZE
    try:
        mm.madvise(advice, start, stop - start)
    except (OSError, ValueError):
        pass


class _Inline:
    """``ThreadPoolExecutor``'s ``map`` in the calling thread (one part, or one CPU)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def map(self, fn: Any, items: Iterable[Any]) -> Iterable[Any]:
        return map(fn, items)


def _first_block_delimiter(path: Path) -> str | None:
    """The only one of space and tab in the file's first block (None when it has both, neither, or a BOM)."""
    with open_data(path) as fh:
        block = fh.read(1 << 16)
    if block.startswith(BOM):
        return None
    space, tab = b" " in block, b"\t" in block
    return " " if space and not tab else ("\t" if tab and not space else None)


class FastPathRefused(Exception):
    pass


def _trec_delimiter(path: Path) -> str | None:
    """The separator for Arrow's reader: the file's only one of space and tab (UTF-8, no BOM); None when it
    uses both or neither, or when splitting a line at every single separator would give an empty field (two
    separators in a row, or one at a line's start or end), which the line-by-line split on runs of spaces and
    tabs would not see: the line-by-line reader then reads the file. Arrow's split on that one separator is
    then the line-by-line split, in every column, also the ones Arrow is not asked to convert."""
    scan = scan_text(path, fields=True)
    with open_data(path) as fh:
        if fh.read(3) == BOM or not scan.utf8 or scan.lone_cr or scan.empty_field:
            return None
    for sep, other in ((b"\t", b" "), (b" ", b"\t")):
        if scan.has[sep] and not scan.has[other]:
            return sep.decode()
    return None


def _trec_arrow(path: Path, kind: str, delimiter: str, want_rank: bool = True) -> Table:
    """Arrow's multi-threaded CSV reader on a UTF-8 file that :func:`_trec_delimiter` cleared (so every field
    Arrow cuts at an ASCII separator is valid UTF-8 text, and none is empty). Only the columns used are
    converted; Arrow still cuts every line into its fields and refuses a line with more or fewer of them."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    names = list(TREC_COLUMNS[kind])
    value_col = "grade" if kind == QRELS else "score"
    # query ids dictionary-encoded (a code per row and each block's few distinct ids), doc ids as strings
    types = {"query_id": pa.dictionary(pa.int32(), pa.string()), "doc_id": pa.string(), value_col: pa.float64()}
    if kind == RUN and want_rank:
        types["rank"] = pa.float64()
    pool = parse_pool()
    try:
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter,
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=True,
            ),
            # (UTF-8 is checked by the scan, whose verdict the parse waits for)
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                include_columns=[c for c in names if c in types],
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=False,
            ),
            memory_pool=pool,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        raise FastPathRefused() from None
    if (
        tbl.num_rows == 0
        or first_empty(tbl.column("doc_id")) is not None
        or any(first_empty(c.dictionary) is not None for c in tbl.column("query_id").chunks)
    ):
        raise FastPathRefused()
    # the numbers and codes in one buffer each, from the pages the parse has freed in its pool
    rank = pooled_values(tbl.column("rank"), np.float64, pool) if "rank" in types else None
    try:
        query = encode_dictionary(tbl.column("query_id"), pool)
    except UnicodeDecodeError:  # (not UTF-8: the scan sends the file to the line-by-line reader, naming the line)
        raise FastPathRefused() from None
    table = Table(
        str(path),
        kind,
        query,
        Strings(tbl.column("doc_id")),
        pooled_values(tbl.column(value_col), np.float64, pool),
        rank,
        "trec",
    )
    del tbl  # the parser's buffers: handed back to the system, not kept by Arrow's pool
    pool.release_unused()
    return table


def valid_utf8(tbl: Any, columns: Iterable[str]) -> bool:
    try:
        for c in columns:
            tbl.column(c).validate(full=True)
    except Exception:
        return False
    return True


def _trec_python(path: Path, kind: str, want_rank: bool = True) -> Table:
    """Line-by-line reader (:func:`.accept.trec_row`); errors name the exact line."""
    qs, ds, vs, rs = [], [], [], []
    for lineno, text in text_lines(path):
        try:
            row = trec_row(text, kind, want_rank)
        except Refused as exc:
            raise exc.at(path, lineno) from None
        if row is not None:
            qs.append(row[0])
            ds.append(row[1])
            vs.append(row[2])
            rs.append(row[3])
    if not qs:
        raise DataError(path, no_data_lines(kind))
    return Table(
        str(path),
        kind,
        encode_id_list(qs),
        string_column(ds),
        np.asarray(vs, dtype=np.float64),
        np.asarray(rs, dtype=np.float64) if kind == RUN and want_rank else None,
        "trec",
    )
