"""The project's error types.

A user error (a bad spec, a bad data file, a failed tracking server) is an
:class:`NdcgError`; the CLI prints its message and exits non-zero without a
traceback. Anything else escaping is a bug.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

EXIT_OK, EXIT_BUG, EXIT_USER, EXIT_TRACKING, EXIT_DECISION, EXIT_INTERRUPT, EXIT_TERMINATED = 0, 1, 2, 3, 4, 130, 143

#: What each exit code of the ``ndcg-mlflow`` command means: every command's ``--help`` lists the codes it returns
#: in these words, and the README's paragraph repeats them (``tests/cli/test_cli.py`` checks both).
EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_BUG: "an internal error (a bug: the traceback is printed)",
    EXIT_USER: "a bad spec, data file or option, or a declared rule stopped the evaluation (nothing logged)",
    EXIT_TRACKING: "the tracking server failed (the local results are kept)",
    EXIT_DECISION: "evaluated, written and logged, and the spec's decision rule failed, or --promote's alias was "
    "moved by someone else during the evaluation (and left there)",
    EXIT_INTERRUPT: "interrupted (SIGINT)",
    EXIT_TERMINATED: "terminated (SIGTERM)",
}


class NdcgError(Exception):
    """Base class of every error caused by the user's input or environment."""

    exit_code = EXIT_USER

    def __str__(self) -> str:
        """The message without credentials (:func:`ndcg_mlflow.uris.redact`), wherever it is shown."""
        from .uris import redact

        return redact(super().__str__())


class SpecError(NdcgError):
    """A spec that does not follow the schema.

    ``path`` is the key path inside the spec (``metric.cutoffs[1]``); ``source``
    the spec file, when it came from one.
    """

    def __init__(self, path: str, message: str, source: str | None = None):
        self.path = path
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        key = f"at key '{path}': " if path else ""
        super().__init__(f"{where}{key}{message}")


#: what reading a JSON file of a result folder raises when the file is not JSON the tool can read: unreadable,
#: not UTF-8, not JSON or a number beyond the digits Python converts (ValueError), nested deeper than the parser
#: goes (RecursionError)
JSON_ERRORS = (OSError, UnicodeDecodeError, ValueError, RecursionError)


class DataError(NdcgError):
    """A data file (qrels, run, query set, weights) that cannot be used as is.

    ``file`` is kept as given (:attr:`file`); the message names it as the terminal shows a path
    (:func:`~ndcg_mlflow.paths.shown_path`: on one line, its control characters and backslashes escaped)."""

    def __init__(self, file: str | os.PathLike[str], message: str, line: int | None = None):
        from .paths import shown_path

        self.file = str(file)
        self.line = line
        self.message = message
        shown = shown_path(self.file)
        where = f"{shown}:{line}" if line is not None else shown
        super().__init__(f"{where}: {message}")


class EvaluationError(NdcgError):
    """A declared rule (``empty_ideal: error``, ``unjudged: error`` ...) stopped the evaluation, or a result was asked
    for what it does not hold (a system or cutoff not evaluated, per-query rows that stayed in Spark)."""


class TrackingError(NdcgError):
    """Logging to the MLflow tracking server failed; local results are kept."""

    exit_code = EXIT_TRACKING


def preview(items: Iterable[object], limit: int = 5, total: int | None = None) -> str:
    """``'a', 'b', 'c' and 12 more`` — a short quoted list for error messages (``total``: how many there are in
    all, when ``items`` holds only the first of them)."""
    items = list(items)
    shown = ", ".join(repr(str(x)) for x in items[:limit])
    rest = (len(items) if total is None else total) - min(limit, len(items))
    return f"{shown} and {rest} more" if rest > 0 else shown


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
