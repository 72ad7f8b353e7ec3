"""mkdocs hooks (mkdocs.yml ``hooks:``): the spec reference page generated from the package on every build
(``gen_spec_reference.py``), the changelog page from the repository's ``CHANGELOG.md``, the module map of the
architecture page from the modules' docstrings (``gen_module_map.py``), and the reST roles of the package's
docstrings (:func:`x`) shown as the code they name."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

DOCS = Path(__file__).resolve().parent
if str(DOCS.parent) not in sys.path:
    sys.path.insert(0, str(DOCS.parent))  # this checkout's package, as mkdocstrings reads it (paths: [.])


def _generator(name: str = "gen_spec_reference"):
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_files(files, config):
    gen = _generator()
    files.append(File.generated(config, gen.PAGE, content=gen.render()))
    files.append(File.generated(config, "changelog.md", content=(DOCS.parent / "CHANGELOG.md").read_text("utf-8")))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "architecture.md":
        return markdown
    gen = _generator("gen_module_map")
    if gen.MARKER not in markdown:
        raise ValueError(f"docs/architecture.md has no {gen.MARKER} where the module map goes")
    return markdown.replace(gen.MARKER, gen.render())


ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj):(?=<code>)")
SHORT = re.compile(r"<code>~(?:[\w]+\.)*(\w+)</code>")  # :class:`~a.b.C` shows C, as Sphinx does


def on_page_content(html, page, config, files):
    return SHORT.sub(r"<code>\1</code>", ROLE.sub("", html))
