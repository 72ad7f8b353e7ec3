"""Hostile text (CR, LF, ESC, BEL, NUL, lone surrogates, markdown emphasis and links, HTML tags, backslashes) given
as a path, label, id or name reaches every medium shown, not acted on: an error message and a printed line (one
line, its control characters escaped, reading back as the given text), a run name, markdown and HTML text."""

from __future__ import annotations

import ast
import re

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ndcg_mlflow.cli import main
from ndcg_mlflow.errors import DataError
from ndcg_mlflow.escapes import CONTROL_CHARACTERS, term_text
from ndcg_mlflow.render.format import html_text, md_text
from ndcg_mlflow.tracking.names import run_name_text

PIECES = ["\r", "\n", "\r\n", "\x1b[31m", "\x07", "\x00", "\ud800", "\x85", "**", "[x](y)", "<script>", "\\", "a", " "]
HOSTILE = st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join)
CONTROL = re.compile(f"[\t\n\r\x0c{CONTROL_CHARACTERS}]")


def _reads_back(shown: str, text: str) -> None:
    assert not CONTROL.search(shown), repr(shown)
    assert ast.literal_eval(f'"{shown}"') == text  # (the escapes of a Python string literal)


@settings(max_examples=examples(300))
@given(HOSTILE, st.sampled_from([None, 3]))
def test_a_data_errors_message_shows_the_path_on_one_line(path, line):
    exc = DataError(path, "expected a TSV file.", line)
    assert exc.file == path  # (kept as given)
    text = str(exc)
    assert not CONTROL.search(text), repr(text)
    where = term_text(path)
    assert text == f"{where}{'' if line is None else f':{line}'}: expected a TSV file."
    _reads_back(where, path)


@settings(max_examples=examples(300))
@given(HOSTILE)
def test_a_run_name_is_one_line_that_reads_back(name):
    _reads_back(run_name_text(f"{name} · nightly"), f"{name} · nightly")


@settings(max_examples=examples(300))
@given(HOSTILE)
def test_markdown_and_html_text_show_what_is_given(text):
    md = md_text(text)
    assert not CONTROL.search(md), repr(md)
    assert "**" not in md.replace("\\*", "")  # no emphasis
    assert "](" not in md.replace("\\]", "")  # no link
    assert "<script>" not in md
    page = html_text(text)
    assert not CONTROL.search(page.replace("\n", "").replace("\r", "").replace("\t", "")), repr(page)
    assert "<" not in page and "\x00" not in page


# the file names a file system holds (no NUL, no lone surrogate)
ON_DISK = st.lists(st.sampled_from([p for p in PIECES if p not in ("\x00", "\ud800")]), min_size=1, max_size=6).map(
    "".join
)


@pytest.mark.parametrize(
    "argv",
    [
        ["upload", "{folder}", "--tracking-uri", "sqlite:///{tmp}/mlflow.db"],
        ["plan", "{folder}", "--margin", "0.01"],
    ],
    ids=["upload", "plan"],
)
def test_the_commands_name_a_hostile_folder_on_one_line(argv, tmp_path, capsys):
    """upload and plan of a folder that is not a result: exit 2, one error line naming the folder as it reads
    back (its line breaks and escapes written out), never acted on by the terminal."""
    name = "bad\r\nfolder\x1b[31m\x07 **[x](y)<script>\\"
    folder = tmp_path / name
    folder.mkdir()
    args = [a.format(folder=folder, tmp=tmp_path) for a in argv]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert term_text(folder) in lines[0]
    assert not CONTROL.search(err.strip())
