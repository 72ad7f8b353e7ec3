"""How a text from the data or the spec (a label, an id, a name, a path) is shown without being acted on: the
control characters of every medium, and their escapes for the terminal. A leaf: it imports nothing of the package,
so the path checks (:mod:`ndcg_mlflow.paths`) name a path as the terminal shows it; :mod:`ndcg_mlflow.render.format` has
the other media (markdown, HTML)."""

from __future__ import annotations

import re
from typing import Any

# what a display could act on rather than show (one definition for every medium): the C0 and C1 control
# characters (escape sequences, bell, NUL) but the white space a page lays out (tab, line feed, form feed, carriage
# return), DEL, the Unicode line and paragraph separators and the bidirectional controls (marks, embeddings,
# overrides, isolates), which would reorder the rest of a line, and the lone surrogates (a JSON "\ud800"), which no
# UTF-8 text can hold
CONTROL_CHARACTERS = "\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"

# what a terminal could act on rather than show: CONTROL_CHARACTERS, form feeds and carriage returns (line feeds
# and tabs too, in a name, label or id)
_OTHER_CONTROL = f"\x0c\r{CONTROL_CHARACTERS}"
_TERMINAL_ANY = re.compile(f"[\\\\\t\n{_OTHER_CONTROL}]")
_TERMINAL_STREAM = re.compile(f"[{_OTHER_CONTROL}]")  # (line feeds, tabs and backslashes kept)
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def term_text(value: Any) -> str:
    """``value`` (a label, an id, a name from the data or the spec) as terminal text: each control character and
    backslash written as Python writes it in a string literal (``\\x1b``, ``\\n``, ``\\\\``), so that the
    terminal shows it, on one line, rather than acting on it, and the text reads back as the same string."""
    return _TERMINAL_ANY.sub(_escape, str(value))


def term_stream(text: str) -> str:
    """Text on its way to the terminal (every line printed, whoever prints it): its control characters escaped
    as :func:`term_text` escapes them, but line feeds and tabs, which lay the text out, and backslashes."""
    return _TERMINAL_STREAM.sub(_escape, text)
