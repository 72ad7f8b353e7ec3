"""The C part (cparse.c): the TREC reader's inner loop and the id hashes."""

from typing import Any

class FileCutShort(OSError): ...

def count_lines(data: Any, start: int, stop: int) -> int: ...
def parse_trec(
    data: Any,
    start: int,
    stop: int,
    qrels: bool,
    want_rank: bool,
    codes: Any,
    doc_offsets: Any,
    doc_data: Any,
    values: Any,
    ranks: Any,
    doc_hash: Any,
) -> tuple[int, int, int, int, list[bytes], int, int]: ...
def string_hashes(offsets: Any, data: Any, out: Any) -> int: ...
def number(data: bytes, n: int) -> float | None: ...
def vector_width(wanted: int | None) -> int: ...
