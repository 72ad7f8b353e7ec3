"""A text run of the spec (TREC, CSV, TSV, JSONL) read by the local engine's own reader in a Spark task and
pre-filtered there (:class:`TextTask`): only the rows the top-K pre-filter keeps enter Spark.

Without it, the task's rows (every row of the file) go to Spark's JVM, are joined to the evaluated judgments
there and come back to a Python worker for the pre-filter. Here the task that reads the file looks each row's
grade up in the evaluated judgments shipped with it (:func:`.parquet_tasks.grades_of`), gathers the rows into
chunks cut where the query id changes and yields what :func:`.prefilter.prefilter_rows` keeps of each
(:func:`.parquet_tasks.prefiltered_chunks`): the same reader, the same function, checks and kept rows as after
the join. The file's rows were counted and its reader's error raised by :func:`.sources.local_reader_frame`
before; the reader refuses a document listed twice for a query (naming both lines), so no query's rows need the
second duplicate check of the rows the pre-filter left out (:func:`.assemble.unchecked_duplicates`), however
scattered in the file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...spec import Metric
from . import prefilter
from .parquet_tasks import PrefilteringTasks, grade_lookup, prefiltered_chunks
from .sources import file_batches


@dataclass(frozen=True)
class TextTask(PrefilteringTasks):
    """How a text run's task reads it: the file (its absolute path), its format and column mapping as the spec
    declares them, whether its rank column is read, whether the rows carry their place in the file (``_order``)
    and whether that place is their rank (a run without ranks under a rule that follows the displayed order)."""

    path: str
    format: str
    columns: tuple[tuple[str, str], ...]
    read_rank: bool
    keep_order: bool
    rank_from_order: bool

    @property
    def task_count(self) -> int:
        return 1

    def reader(
        self,
        judged: Any,
        metric: Metric,
        depth: int,
        has_rank: bool,
        alternatives: Sequence[Metric] = (),
        chunk_rows: int | None = None,
    ) -> Any:
        """The task's function (of :meth:`~.parquet_tasks.PrefilteringTasks.prefiltered`): its one-row batch ->
        the file's pre-filtered rows, as Arrow batches, chunk by chunk of at least ``chunk_rows`` rows (default
        :data:`.prefilter.PREFILTER_CHUNK_ROWS`)."""
        chunk_rows = prefilter.PREFILTER_CHUNK_ROWS if chunk_rows is None else chunk_rows
        lookup = grade_lookup(judged)

        def read(batches: Iterable[Any]) -> Iterator[Any]:
            for batch in batches:
                if batch.num_rows:
                    yield from prefiltered_chunks(
                        self.tables(), lookup, metric, depth, has_rank, alternatives, chunk_rows
                    )

        return read

    def tables(self) -> Iterator[Any]:
        """The file's rows as the pre-filter takes them (query_id, doc_id, score, rank; ``_order`` when kept), in
        the file's order, a batch of the reader at a time. A reader's error (the file changed since it was
        checked) gives no rows: the evaluation then stops on the file's changed digest, as on the other paths."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in file_batches(self.path, "run", self.format, self.columns, self.read_rank):
            if batch.column("_error").null_count < batch.num_rows:
                return
            order = batch.column("_order")
            rank = pc.cast(order, pa.float64()) if self.rank_from_order else batch.column("rank")
            cols = {c: batch.column(c) for c in ("query_id", "doc_id", "score")} | {"rank": rank}
            if self.keep_order:
                cols["_order"] = order
            yield pa.table(cols)
