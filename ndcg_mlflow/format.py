"""Escaping text from the data for the markdown files the tool writes (``report.md``, ``wins_losses.md``).

Every string that comes from the data or the spec — system names, query and document ids, the
spec name, notes, file names — goes through :func:`md_text` wherever it lands in markdown (heading,
paragraph, list item or table cell): each ASCII punctuation character markdown could read is
backslash-escaped, which CommonMark defines as that character taken literally, so no link, image, autolink (``:``, ``.``
and ``@`` are escaped), code span, emphasis, HTML tag, comment, entity, table pipe or math delimiter
can come from the data. Only characters that mean nothing inside a line are left as they are, so
ids stay readable in a terminal: ``, ; ? % / ' " =``, ``-`` and ``+`` unless they come first
(where they could open a list), and ``_`` between two letters or digits (``displayed_order``), where
CommonMark never reads it as emphasis. Line breaks and runs of white space become one space, so a string
never starts a line (a heading, list item or table row) of its own. The one raw HTML element these
files use (``<summary>``, whose content markdown does not process) takes :func:`md_html` instead:
HTML escaping.

A leaf module (nothing of the package imported), so both ``analysis`` and ``report`` use it.
"""

from __future__ import annotations

import html
import re
from typing import Any

# every ASCII punctuation character (!"#$%&'()*+,-./ :;<=>?@ [\]^_` {|}~) but those inert inside a line
_PUNCTUATION = re.compile(r"([!#$&()*.:<>@\[-^`{-~])")
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # a "_" not between two letters or digits
_LEADING = re.compile(r"^( ?)([-+])")  # a list marker where a string opens a list item
# line breaks of every kind, and runs of blanks (an indented run could open a code block in a list item)
_BREAKS = re.compile("[ \t\n\v\f\r\x1c-\x1f\x85\u2028\u2029]+")


def _one_line(value: Any) -> str:
    return _BREAKS.sub(" ", str(value)).replace("\x00", "\ufffd")


def md_text(value: Any) -> str:
    """``value`` as literal markdown text: shown exactly (white space aside), never interpreted."""
    text = _UNDERSCORE.sub(r"\\_", _PUNCTUATION.sub(r"\\\1", _one_line(value)))
    return _LEADING.sub(r"\1\\\2", text)


def md_html(value: Any) -> str:
    """``value`` as literal text inside a raw HTML element of a markdown file (``<summary>``)."""
    return html.escape(_one_line(value), quote=True)
