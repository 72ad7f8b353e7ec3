"""Loading a spec: its YAML file (or a mapping) with ``--set`` overrides applied, then validated; and the data
files it names, checked before any is read."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..paths import file_problem, os_error_problem, shown_path, source_problem
from .types import InMemory, Source, Spec
from .validate import parse_spec
from .yamltext import dump, safe_yaml

MAX_SPEC_BYTES = 1_000_000


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--set``: a dotted key path into the spec and a value read as YAML (``[5, 10]`` is a
    list, ``10`` a number, ``null`` empty)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise SpecError(
            "",
            f"--set {text!r}: expected KEY=VALUE with KEY a dotted key path of the spec, such as "
            f"metric.cutoffs=[5,10] or data.systems.candidate=runs/pr-123.run.",
        )
    return key, safe_yaml(value, f"--set {key}")


def apply_overrides(raw: Any, overrides: list[tuple[str, Any]]) -> Any:
    """``raw`` (a spec parsed from YAML) with each ``(key path, value)`` of ``--set`` put in place. A path step
    matches the longest existing key it can (a system name may hold dots: ``data.systems.v1.2``), else one
    dot-separated part; missing mappings on the way are created."""
    import copy

    raw = copy.deepcopy(raw)
    for key, value in overrides:
        node, parts, done = raw, key.split("."), list[str]()
        while True:
            if not isinstance(node, dict):
                where = ".".join(done) or "the spec"
                raise SpecError(
                    ".".join(done), f"--set {key}: {where} is not a mapping, so it has no key '{'.'.join(parts)}'."
                )
            step, n = _override_step(node, parts)
            parts = parts[n:]
            if not parts:
                node[step] = value
                break
            if node.get(step) is None:
                node[step] = {}
            node = node[step]
            done.append(str(step))
    return raw


def _override_step(node: dict, parts: list[str]) -> tuple[Any, int]:
    for n in range(len(parts), 0, -1):
        joined = ".".join(parts[:n])
        if joined in node:
            return joined, n
        if re.fullmatch(r"-?\d+", joined) and int(joined) in node:  # a gain table's grades are numbers
            return int(joined), n
    return parts[0], 1


def _from_override(exc: SpecError, overrides: list[tuple[str, Any]], texts: dict[str, str]) -> SpecError:
    """``exc`` saying which ``--set`` gave the value at its key path (or above or below it)."""
    for key, _ in overrides:
        p = exc.path
        if p == key or p.startswith((key + ".", key + "[")) or (p and key.startswith(p + ".")):
            return SpecError(p, f"{exc.message} (the value at '{key}' came from --set {texts[key]})", exc.source)
    return exc


def load_spec(
    spec: str | Path | Mapping[str, Any] | Spec,
    *,
    base_dir: str | Path | None = None,
    tables: InMemory | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> Spec:
    """Load and validate a spec from a YAML file path, a mapping, or pass a :class:`Spec` through.

    ``overrides`` are ``--set KEY=VALUE`` texts applied to the file's content before validation; the spec then
    recorded (``spec.yaml``, its sha256) is the spec with them applied, so it describes what ran."""
    if base_dir is not None and not isinstance(base_dir, (str, os.PathLike)):
        raise SpecError("", f"base_dir must be a folder's path (a str or a Path), got {type(base_dir).__name__}.")
    if isinstance(overrides, (str, bytes)) or not all(isinstance(t, str) for t in overrides):
        raise SpecError("", "overrides must be a list of KEY=VALUE texts (as --set takes them).")
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec), base_dir=Path(base_dir) if base_dir else Path.cwd(), tables=tables)
    if not isinstance(spec, (str, os.PathLike)):
        raise SpecError(
            "",
            f"the spec must be a YAML file's path (a str or a Path), a mapping or a Spec, got {type(spec).__name__}.",
        )
    path = Path(spec)
    problem = file_problem(path)
    if problem is not None:
        raise SpecError("", f"cannot read the spec {shown_path(path)}: {problem}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError("", f"cannot read the spec {shown_path(path)}: {os_error_problem(exc)}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError("", f"spec file is {len(data)} bytes; a spec is at most {MAX_SPEC_BYTES} bytes.", str(path))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError("", f"spec is not UTF-8 text (byte {exc.start}).", str(path)) from None
    raw = safe_yaml(text, str(path))
    pairs = [parse_override(t) for t in overrides]
    if pairs:
        texts = {key: t.strip() for (key, _), t in zip(pairs, overrides)}
        raw = apply_overrides(raw, pairs)
        header = "".join(f"# --set {texts[key]}\n" for key, _ in pairs)
        text = f"# {path.name} with these values set on the command line:\n{header}" + dump(raw)
        try:
            return parse_spec(
                raw,
                base_dir=Path(base_dir) if base_dir else path.resolve().parent,
                source=str(path),
                text=text,
                tables=tables,
            )
        except SpecError as exc:
            raise _from_override(exc, pairs, texts) from None
    return parse_spec(
        raw, base_dir=Path(base_dir) if base_dir else path.resolve().parent, source=str(path), text=text, tables=tables
    )


def outside_paths(spec: Spec) -> list[str]:
    """Declared data paths that lead outside the spec's folder (allowed, but recorded with the results)."""
    if spec.source is None:
        return []
    base = spec.source.resolve().parent
    q = spec.queries
    sources = [spec.qrels, q.weights, q.set, q.segments] + [s.candidates or s for _, s in spec.systems]
    if spec.companions is not None:
        sources += [spec.companions.duplicates, spec.companions.catalog]
    if spec.judge is not None:
        sources.append(spec.judge.judgments)
    out = []
    for src in sources:
        if src is None or src.path is None:
            continue
        try:
            src.path.resolve().relative_to(base)
        except ValueError:
            out.append(f"{src.declared} -> {src.path.resolve()}")
    return out


def check_files(spec: Spec) -> list[str]:
    """Problems with the files a spec names (missing, unreadable, not a regular file); empty when all are fine."""
    problems = []
    named: list[tuple[str, Source | None]] = [
        ("data.qrels", spec.qrels),
        ("queries.weights", spec.queries.weights),
        ("queries.set", spec.queries.set),
        ("queries.segments", spec.queries.segments),
    ]
    named += [
        (f"data.systems.{n}.candidates", s.candidates)
        if s.model is not None and s.candidates is not None
        else (f"data.systems.{n}", s)
        for n, s in spec.systems
    ]
    if spec.judge is not None:
        named.append(("data.judge_qrels", spec.judge.judgments))
    if spec.companions is not None:
        named += [
            ("companions.duplicates", spec.companions.duplicates),
            ("companions.catalog", spec.companions.catalog),
        ]
    for key, src in named:
        check = source_problem if key.startswith("data.") else file_problem  # folders and globs: data only
        if src is None or src.path is None:
            continue
        problem = source_problem(src.path, True) if src.format == "delta" else check(src.path)
        if problem is not None:
            problems.append(f"at key '{key}': {problem}: {shown_path(src.path)}")
    return problems
