"""What both engines do on the driver before the runs: the spec resolved with the tables given in its place
(:func:`resolve_spec`, :func:`input_table`), the companion files read (:func:`read_companions`), a problem in a
model system's scored rows said of its candidates (:func:`said_of_candidates`), and where model systems' scored
rows are written (:func:`scoring_folder`)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import DataError, SpecError
from ..paths import shown_path
from ..readers import Table
from ..readers.hashing import read_with_digest
from ..result import FileInfo
from ..spec import Spec, check_files, load_spec


def resolve_spec(
    spec: str | Path | Mapping[str, Any] | Spec,
    qrels: Any,
    systems: Mapping[str, Any] | None,
    base_dir: str | Path | None = None,
) -> Spec:
    """The spec, its data entries replaced by the tables given (``qrels``, ``systems``), its files checked."""
    from ..spec import IN_MEMORY, InMemory, Source, system_name_problem

    if systems is not None and not isinstance(systems, Mapping):
        raise SpecError("systems", f"must map each system name to its table, got {type(systems).__name__}.")
    names = tuple(systems) if systems is not None else None
    given = InMemory(qrels is not None, names) if qrels is not None or names is not None else None
    if isinstance(spec, Spec):  # a spec built earlier: its data entries are replaced by the tables given
        import dataclasses

        memory = Source(None, IN_MEMORY, "table")
        for name in names or ():
            problem = system_name_problem(name)
            if problem:
                raise SpecError(f"systems[{name!r}]", problem)
        if names is not None and spec.comparison is not None and spec.comparison.baseline not in names:
            raise SpecError(
                "comparison.baseline",
                f"names {spec.comparison.baseline!r}, which is not among the "
                f"systems given ({', '.join(map(str, names))}).",
            )
        spec = dataclasses.replace(
            spec,
            qrels=memory if qrels is not None else spec.qrels,
            systems=tuple((n, memory) for n in names) if names is not None else spec.systems,
        )
    else:
        spec = load_spec(spec, base_dir=base_dir, tables=given)
    problems = check_files(spec)
    if problems:
        raise SpecError("", "; ".join(problems), str(spec.source) if spec.source else None)
    return spec


def input_table(obj: Any, kind: str, label: str, shared: dict[str, str]) -> Table:
    from ..readers import table_from_object
    from ..readers.accept import kind_mapping

    mapping = shared
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], Mapping):
        obj, mapping = obj[0], {**shared, **obj[1]}
    if obj is None:
        raise DataError(label, "no table was given.")
    if isinstance(obj, Table):
        if obj.digest is None:
            from ..readers import table_digest

            obj.digest = table_digest(obj)
        return obj
    usable = kind_mapping(kind, mapping)
    unknown = [k for k in mapping if k not in ("query_id", "doc_id", "grade", "score", "rank")]
    if unknown:
        raise SpecError(
            "columns", f"unknown column {unknown[0]!r}; a column mapping names query_id, doc_id, grade, score or rank."
        )
    return table_from_object(obj, kind, label, usable)


@contextmanager
def said_of_candidates(sources: Any) -> Iterator[None]:
    """A model system's rows are the scored rows it wrote (into the output folder being made, or a folder of the
    caller's: a file the user never declared): a problem found in them, by any engine, is said of the candidates
    file they were scored from, naming the model. ``sources``: the systems' sources (others pass through)."""
    scored = {
        key: src
        for src in sources
        if getattr(src, "candidates", None) is not None and src.path is not None
        for key in (str(src.path), shown_path(src.path))
    }
    try:
        yield
    except DataError as exc:
        src = scored.get(exc.file)
        if src is None:
            raise
        candidates = src.candidates
        raise DataError(
            candidates.path if candidates.path is not None else candidates.declared,
            f"{exc.message} (found in the rows {src.model} scored from these candidates: a model "
            f"that scores each row keeps their order, so a row number is the candidates' own)",
            exc.line,
        ) from None


def read_companions(spec: Spec, files: list[FileInfo]) -> dict[str, Any] | None:
    c = spec.companions
    if c is None:
        return None
    from ..companions import read_catalog, read_duplicate_groups

    out: dict[str, Any] = {}
    if c.duplicates is not None:
        out["duplicates"], sha = read_with_digest(
            c.duplicates.file, None, lambda: read_duplicate_groups(c.duplicates.file)
        )
        files.append(
            FileInfo(
                "companions.duplicates",
                str(c.duplicates.path),
                c.duplicates.declared,
                sha,
                len(out["duplicates"].group),
            )
        )
    if c.catalog is not None:
        out["catalog"], sha = read_with_digest(c.catalog.file, None, lambda: read_catalog(c.catalog.file))
        files.append(FileInfo("companions.catalog", str(c.catalog.path), c.catalog.declared, sha, len(out["catalog"])))
    elif c.catalog_size is not None:
        out["catalog_size"] = c.catalog_size
    return out


def scoring_folder(scored_dir: str | Path | None) -> Path:
    """Where a model's scored rows are written: the caller's folder, else a new temporary one."""
    return Path(scored_dir) if scored_dir is not None else Path(tempfile.mkdtemp(prefix="ndcg-mlflow-scored-"))


def remove_with(result: Any, folder: Path) -> None:
    """A scoring folder of our own lives as long as the result that names its files."""
    import shutil
    import weakref

    weakref.finalize(result, shutil.rmtree, folder, True)
