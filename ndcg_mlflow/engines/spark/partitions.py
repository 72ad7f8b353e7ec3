"""Query buckets placed one to a Spark partition.

A bucket of queries is one group of the scoring job (:func:`.buckets.bucket_results`). Left to Spark, the groups
are shuffled into ``spark.sql.shuffle.partitions`` partitions (200 by default) that adaptive execution coalesces,
except where the result is persisted (catalog coverage reads it twice), where the 200 tasks stay, mostly empty:
on a small evaluation, seconds of task overhead a job. The engine instead shuffles both sides of the job into
exactly as many partitions as buckets, each bucket into a partition of its own: Spark's hash partitioning puts a
row whose key is ``v`` into partition ``pmod(murmur3(v, 42), n)``, so bucket ``b`` is given the key
:func:`bucket_keys` ``(n)[b]``, the smallest non-negative integer that Spark places in partition ``b``
(:func:`bucket_column`). Beyond :data:`KEYED_BUCKETS` buckets the bucket's index is its key.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

_MASK = 0xFFFFFFFF
SEED = 42
"""The seed of Spark's ``Murmur3Hash`` (``hash()``, and the partition of a hash-partitioned row)."""


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _MASK, 15) * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def murmur3_long(value: int, seed: int = SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashLong(value, seed)``: the hash Spark gives a 64-bit integer (a signed 32-bit
    result), as ``pyspark.sql.functions.hash`` returns it for a ``long`` column."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _MASK, _mix_k1(v & _MASK))
    h1 = _mix_h1(h1, _mix_k1(v >> 32))
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def spark_partition(value: int, n: int) -> int:
    """The partition, among ``n``, of a row whose only partitioning key is the ``long`` ``value``."""
    return murmur3_long(value) % n  # Python's % of a negative hash is Spark's pmod


KEYED_BUCKETS = 4096
"""Bucket counts up to this one are keyed by :func:`bucket_keys` (a literal array of the keys in the plan, found
in about 0.1 s); beyond it, the keys would cost seconds on the driver and a plan of as many literals, and the
bucket's index is its key: Spark's hash partitioning may then put two buckets in one partition and leave another
empty, and the numbers are the same (the job groups the rows by bucket, not by partition)."""


def bucket_column(query_id: Any, n: int) -> Any:
    """The key (a ``long`` column) of the bucket of the query ``query_id`` (a string column), among ``n``: the
    query's bucket is ``pmod(xxhash64(query_id), n)``; up to :data:`KEYED_BUCKETS` buckets, its key is
    :func:`bucket_keys` ``(n)`` of it, which puts it in a partition of its own."""
    from pyspark.sql import functions as F

    index = F.pmod(F.xxhash64(query_id), F.lit(n))
    if n > KEYED_BUCKETS:
        return index
    keys = F.array(*[F.lit(k) for k in bucket_keys(n)]).cast("array<bigint>")
    return F.element_at(keys, (index + 1).cast("int"))


@lru_cache(maxsize=64)
def bucket_keys(n: int) -> tuple[int, ...]:
    """For each bucket ``b`` of ``n``, the smallest non-negative integer Spark puts in partition ``b`` of ``n``."""
    if n < 1:
        raise ValueError(f"a positive number of buckets, got {n}")
    keys: list[int | None] = [None] * n
    missing, v = n, 0
    while missing:
        b = spark_partition(v, n)
        if keys[b] is None:
            keys[b] = v
            missing -= 1
        v += 1
    return tuple(k for k in keys if k is not None)
