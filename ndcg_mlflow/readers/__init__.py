"""Readers for judgments (qrels), rankings (runs), query sets, weights and segments.

Formats:

* TREC qrels ``qid iter docid grade`` and TREC runs ``qid Q0 docid rank score tag``,
  fields separated by runs of ASCII spaces and tabs (no other character separates fields: an id
  may contain U+00A0 or any other Unicode space); grades may be floats.
* CSV / TSV with a header naming the columns ``query_id``, ``doc_id`` and ``grade``
  (qrels) or ``score`` and/or ``rank`` (runs); JSONL with the same names; Parquet, also a folder or
  glob of Parquet files read as one table (files in sorted order). A column mapping reads other names.
* TREC, CSV, TSV and JSONL compressed with gzip (``.gz``) or zstd (``.zst``), decompressed as read.
* Tables in memory (:func:`table_from_object`): anything with the Arrow C stream interface, or a nested
  mapping ``{query_id: {doc_id: value}}``, checked as files are; errors name the table and the row.

Ids are strings. The result is columnar: query ids are encoded into integer codes
in order of first appearance (one ``int32`` per row and a small array of distinct
ids); document ids stay an Arrow string array (millions of distinct ids are never
turned into Python objects); values are ``float64`` arrays. Every error names the
file and line (row, for Parquet).

Lines end with LF or CRLF in every text format; a carriage return not followed by a line
feed is refused (naming its line), so that no reader ever sees a different set of lines.
A line holding only spaces and tabs is blank and skipped. Numbers are decimal
(``[+-]digits[.digits][e[+-]digits]``) and finite; ids are non-empty.

TREC and CSV files go through Arrow's multi-threaded CSV reader when that reader's split of
each line is sure to be the line-by-line split (a TREC file using only one of space and tab,
with no empty field; UTF-8 without a BOM; no empty id, no line end inside a quoted CSV id); any
other file, or one Arrow refuses, is read line by line, which either finds the exact line at
fault or reads the file. Both paths give the same table for any file they accept.

The package: :mod:`.accept` (what a line, a field, a number, an id and a header may be, and every refusal's
words: one definition that the C reader, the Arrow paths, the line reader, tables and the Spark engine apply),
:mod:`.text` (opening files, their lines, the scan that chooses a reader), :mod:`.table` (the table type),
:mod:`.trec`, :mod:`.columns` (CSV/TSV, JSONL, Parquet and the entry points), :mod:`.frames` (tables in memory),
:mod:`.small` (query sets, weights and segments) and :mod:`.hashing` (string hashes, duplicate pairs, digests).
``NDCG_MLFLOW_LINE_READER=1`` reads every text file line by line (no C reader, no Arrow fast path).
"""

from ..errors import preview
from .columns import detect_format, read_qrels, read_run
from .frames import table_from_object
from .hashing import duplicate_pairs, sha256_file, string_hashes, table_digest
from .small import read_query_set, read_segments, read_weights
from .table import Ids, Strings, Table

__all__ = [
    "Table",
    "Ids",
    "Strings",
    "read_qrels",
    "read_run",
    "table_from_object",
    "table_digest",
    "read_query_set",
    "read_weights",
    "read_segments",
    "sha256_file",
    "detect_format",
    "string_hashes",
    "duplicate_pairs",
    "preview",
]
