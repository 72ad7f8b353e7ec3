"""Delta tables: the Parquet files of one version, resolved from the table's log with ``deltalake`` (delta-rs).

A Delta table's folder holds the Parquet files of every version it had (an overwrite adds files and marks the
old ones removed in ``_delta_log``), so reading the folder as a Parquet dataset would read removed rows too.
:func:`snapshot_files` lists the files of the version the spec names; both engines read exactly those files
(the local readers, or ``spark.read.parquet``). Tables whose protocol asks a reader for more than reading those
files (deletion vectors, column mapping, and any other reader feature not known to be harmless) and partitioned
tables (partition values live in the log, not in the files) are refused with an error saying so.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ..errors import DataError

# reader features that change nothing for a reader of the snapshot's Parquet files
HARMLESS_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "v2Checkpoint", "checkpointProtection"})


def open_table(path: str | Path, version: int) -> Any:
    """The ``deltalake.DeltaTable`` of ``path`` at ``version``, checked (errors name the path)."""
    try:
        from deltalake import DeltaTable
    except ImportError:
        raise DataError(
            path,
            "reading a Delta table needs the deltalake package: pip install "
            "'ndcg-mlflow[spark]' (or pip install deltalake).",
        ) from None
    try:
        table = DeltaTable(str(path), version=version)
    except Exception as exc:  # deltalake's errors (no such table, no such version) carry no stable type
        latest = _latest(path)
        hint = f" (its latest version is {latest})" if latest is not None and latest < version else ""
        raise DataError(path, f"cannot open version {version} of the Delta table{hint}: {exc}".rstrip()) from None
    check_protocol(path, table)
    return table


def _latest(path: str | Path) -> int | None:
    try:
        from deltalake import DeltaTable

        return int(DeltaTable(str(path)).version())
    except Exception:
        return None


def check_protocol(path: str | Path, table: Any) -> None:
    """Refuse a table whose snapshot is more than its Parquet files."""
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    config = dict(table.metadata().configuration or {})
    mode = config.get("delta.columnMapping.mode", "none")
    if "columnMapping" in features or mode != "none":
        raise DataError(
            path,
            f"the Delta table uses column mapping (delta.columnMapping.mode = {mode}): its "
            f"Parquet files name the columns otherwise than the table does, which this reader "
            f"does not follow; rewrite the table without column mapping, or read it with "
            f"Spark's Delta data source.",
        )
    if "deletionVectors" in features:
        raise DataError(
            path,
            "the Delta table's protocol has deletion vectors (rows deleted without "
            "rewriting their Parquet file), which this reader cannot apply; disable them and "
            "purge the table (REORG TABLE ... APPLY (PURGE)), or read it with Spark's Delta data "
            "source.",
        )
    unknown = sorted(features - HARMLESS_FEATURES)
    if unknown or protocol.min_reader_version > 3:
        raise DataError(
            path,
            f"the Delta table's protocol needs reader features this reader does not support: "
            f"{', '.join(unknown) or f'reader version {protocol.min_reader_version}'}.",
        )
    partitions = list(table.metadata().partition_columns or ())
    if partitions:
        raise DataError(
            path,
            f"the Delta table is partitioned by {', '.join(partitions)} (values kept in its "
            f"log, not in its files), which this reader does not read; write it unpartitioned.",
        )


def snapshot_files(path: str | Path, version: int) -> list[Path]:
    """The Parquet files of the Delta table ``path`` at ``version``, in sorted order."""
    table = open_table(path, version)
    return sorted(Path(_local(u)) for u in table.file_uris())


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def snapshot_digest(path: str | Path, version: int, files: list[Path] | None = None) -> str:
    """sha256 of ``delta version N`` and of the snapshot's files' bytes one after the other in sorted order (as
    a Parquet folder's): the version read is part of what was read."""
    h = hashlib.sha256(f"delta version {version}\n".encode())
    for part in files if files is not None else snapshot_files(path, version):
        with open(part, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()
