"""MLflow's naming rules as the spec applies them: keys, system names (and the file stems made of them), custom
tags and experiment names, with MLflow's limits."""

from __future__ import annotations

import re
from typing import Any

from ..rules import cutoff_key
from .yamltext import got

# MLflow's rule for metric, param and tag keys (mlflow/utils/validation.py, outside Windows) and its key length
_MLFLOW_KEY = re.compile(r"[/\w.\- :]*")  # (fullmatch: "$" would also match before a final line feed)
MAX_MLFLOW_KEY = 250
MAX_TAG_VALUE = 8000  # MLflow's limit on a tag value
MAX_SYSTEM_NAME = 150  # the longest key built from a system name adds at most 100 characters to it
RESERVED_TAG_PREFIXES = ("mlflow.", "ndcg_mlflow.")
MAX_EXPERIMENT_NAME = 500  # MLflow's limit on an experiment name (mlflow.utils.validation)
MAX_FILE_NAME = 255  # bytes of one file name (NAME_MAX of Linux's file systems, and of most others)
SYSTEM_FILE_SUFFIXES = ("per_query.csv", "top.csv", "scored.parquet")  # systems/<stem>.<suffix>
PARTIAL_SUFFIX = ".partial"  # a file is written under its name and this, then renamed


def mlflow_key_problem(key: str) -> str | None:
    """Why MLflow refuses ``key`` as a metric, param or tag key, or None. MLflow's own rule
    (``mlflow.utils.validation``): letters, digits (of any script), ``_ - . / :`` and spaces; not a name that
    resolves to another one as a file path (``a//b``, ``a/``, ``./a``, ``/a``, ``../a``); at most 250
    characters."""
    import posixpath

    if not key:
        return "it is empty"
    if not _MLFLOW_KEY.fullmatch(key):
        bad = sorted({c for c in key if not _MLFLOW_KEY.fullmatch(c)})
        return (
            f"MLflow refuses {', '.join(repr(c) for c in bad)} in metric, param and tag keys (they may hold "
            f"letters, digits, '_', '-', '.', '/', ':' and spaces)"
        )
    norm = posixpath.normpath(key)
    if norm != key:
        return (
            f"MLflow reads keys as file paths and refuses one that resolves to another name ({key!r} "
            f"resolves to {norm!r})"
        )
    if norm == "." or norm.startswith(("..", "/")):
        return "MLflow reads keys as file paths and refuses one that is '.' or starts with '..' or '/'"
    if len(key) > MAX_MLFLOW_KEY:
        return f"MLflow keys hold at most {MAX_MLFLOW_KEY} characters; this one has {len(key)}"
    return None


def system_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a system, or None. A system name is part of MLflow param, metric and tag keys
    (``data.systems.<name>``, ``<name>.ndcg_at_10`` on the evaluation's run, ``ndcg_mlflow.data.system.<name>.sha256``),
    so it follows MLflow's rule for keys (:func:`mlflow_key_problem`) and nothing more."""
    if not isinstance(name, str) or not name:
        return f"a system name is a non-empty string. {got(name)}"
    if len(name) > MAX_SYSTEM_NAME:
        return (
            f"a system name has at most {MAX_SYSTEM_NAME} characters (it is part of MLflow keys, which hold at "
            f"most {MAX_MLFLOW_KEY}); this one has {len(name)}."
        )
    longest = max(SYSTEM_FILE_SUFFIXES, key=len)
    size = len(system_file_stem(name).encode("utf-8", "surrogatepass")) + len(f".{longest}{PARTIAL_SUFFIX}")
    if size > MAX_FILE_NAME:
        return (
            f"a system name is the name of its files (such as 'systems/<name>.{longest}', written as "
            f"'<name>.{longest}{PARTIAL_SUFFIX}' first), and a file name holds at most {MAX_FILE_NAME} bytes of "
            f"UTF-8; this name makes one of {size} bytes (letters outside ASCII take 2 to 4 bytes each)."
        )
    for key in (f"data.systems.{name}", f"{name}.{cutoff_key(None)}.ci_high", f"ndcg_mlflow.data.system.{name}.sha256"):
        problem = mlflow_key_problem(key)
        if problem:
            return f"the system name becomes part of MLflow keys such as {key!r}, and {problem}."
    return None


def system_file_stem(name: str) -> str:
    """The file name stem of a system's files (``systems/<stem>.per_query.csv``, and the artifacts of its MLflow
    run): its name, with each ``/`` (allowed in a system name, as MLflow allows it in keys) written as ``~``
    (which a system name cannot hold, so two names never share a stem)."""
    return name.replace("/", "~")


def tag_problem(key: Any, value: Any) -> str | None:
    """Why a custom tag (``mlflow.tags`` of the spec, ``--tag``) cannot be set, or None: a string key that MLflow
    accepts (:func:`mlflow_key_problem`) outside the reserved ``mlflow.`` and ``ndcg_mlflow.`` names, and a string
    value of at most 8000 characters."""
    if not isinstance(key, str):
        return f"a tag key is a string. {got(key)}"
    problem = mlflow_key_problem(key)
    if problem:
        return f"not a usable MLflow tag key: {problem}."
    if key.startswith(RESERVED_TAG_PREFIXES):
        return (
            f"tag keys starting with {' or '.join(repr(p) for p in RESERVED_TAG_PREFIXES)} are reserved (MLflow's "
            f"own tags and this tool's); choose another key."
        )
    if not isinstance(value, str):
        return f'a tag value is a string (in YAML, quote it: "{value}"). {got(value)}'
    if len(value) > MAX_TAG_VALUE:
        return f"MLflow tag values hold at most {MAX_TAG_VALUE} characters; this one has {len(value)}."
    return None


def experiment_name_problem(experiment: str) -> str | None:
    """Why MLflow would refuse ``experiment`` as an experiment name, or None."""
    if len(experiment) > MAX_EXPERIMENT_NAME:
        return (
            f"an MLflow experiment name has at most {MAX_EXPERIMENT_NAME} characters; this one has {len(experiment)}."
        )
    return None
