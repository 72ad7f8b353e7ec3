"""The module map of ``docs/architecture.md``: every module of the package with the first sentence of its docstring,
package by package, generated on every build (``docs/hooks.py``) so that the map says what the code says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ndcg_mlflow"
MARKER = "<!-- module-map -->"  # where docs/architecture.md shows the map
SENTENCE = re.compile(r"(.+?[.?!])(?:\s|$)", re.S)


def purpose(docstring: str | None) -> str | None:
    """A module's purpose: the first sentence (ending in ``.``, ``?`` or ``!``) of its docstring's first paragraph,
    on one line; None without one."""
    if not docstring or not docstring.strip():
        return None
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    found = SENTENCE.match(paragraph)
    return found.group(1) if found else None


def modules(root: Path = PACKAGE) -> list[tuple[str, str | None]]:
    """Each module of the package (its path inside the package) and its purpose, the root's modules first, then
    each subpackage's."""
    paths = sorted(root.rglob("*.py"), key=lambda p: (len(p.relative_to(root).parts) > 1, p.relative_to(root).parts))
    return [
        (p.relative_to(root).as_posix(), purpose(ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))))
        for p in paths
    ]


def render(root: Path = PACKAGE) -> str:
    """The map as markdown: a list per package."""
    lines: list[str] = []
    package = None
    for path, text in modules(root):
        folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        if folder != package:
            package = folder
            lines += ["", f"**`{root.name}/{folder}`**", ""]
        lines.append(f"- `{path}`: {text or '(no docstring)'}")
    return "\n".join(lines).strip() + "\n"
