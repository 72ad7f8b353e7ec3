"""The documentation site (docs/, mkdocs.yml) and the README say what the package does.

- docs/getting-started.md runs as written: its shell and Python blocks, in a new folder with a store of its own,
  print what the page shows.
- The spec reference, generated from ndcg_mlflow/rules.py, presets.py and spec/types.py by
  docs/gen_spec_reference.py, lists every rule and choice, every key and whether it is required.
- The exit codes are worded as errors.EXIT_CODES words them, and the README links only to pages that exist.
- Every fenced block of the README and docs/ is checked by its language (the convention is above the tests:
  yaml specs validated, python blocks run on the demo, bash commands parsed).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGS
from helpers import clean_env

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SHOWN_FOLDER = "/home/me/eval"  # the working folder of the output shown in getting-started.md

FENCE = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)")
MARKER = re.compile(r"[ \t]*<!-- docs-test: (?P<mark>.*?)-->[ \t]*")
#: the other names of the languages the checks know
ALIASES = {"yml": "yaml", "sh": "bash", "shell": "bash", "py": "python"}


def fenced_blocks(text: str) -> list[tuple[int, str, str, str]]:
    """(line of the opening fence, marker, language, text) of every fenced block of a Markdown page, as CommonMark
    finds them: fenced by three or more backticks or tildes, closed by a line of the same character at least as
    long, indented in a list or not (the text loses the fence's indentation); the language is the info string's
    first word (``{.lang}`` too), under :data:`ALIASES`; the marker is a ``docs-test`` comment on the line before
    the fence, or ''."""
    lines = text.split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = FENCE.fullmatch(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        closing = re.compile(rf"[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
        end = next((j for j in range(i + 1, len(lines)) if closing.fullmatch(lines[j])), len(lines))
        words = m["info"].strip().strip("{}").split()
        lang = words[0].lstrip(".") if words else ""
        mark = MARKER.fullmatch(lines[i - 1]) if i else None
        body = "\n".join(line[indent:] if not line[:indent].strip() else line.lstrip() for line in lines[i + 1 : end])
        found.append((i + 1, mark["mark"].strip() if mark else "", ALIASES.get(lang, lang), body + "\n"))
        i = end + 1
    return found


def blocks(page: str) -> list[tuple[str, str, str]]:
    """(marker, language, text) of each fenced block of a docs page (:func:`fenced_blocks`); the marker's first
    word (``skip``, ``output``), or ''."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(mark.split(" ")[0], lang, body) for _, mark, lang, body in fenced_blocks(text)]


def generator(name: str = "gen_spec_reference"):
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- getting started, run as written


def _normalized(text: str, folder: str) -> list[str]:
    """The lines of a command's output with what changes from run to run written one way: the working folder, run
    ids and the time and random suffix of the output folder's name."""
    text = text.replace(folder, SHOWN_FOLDER)
    text = re.sub(r"\b[0-9a-f]{32}\b", "<run id>", text)
    text = re.sub(r"-\d{8}-\d{6}-[0-9a-f]{6}\b", "-<time>-<suffix>", text)
    return [line.rstrip() for line in text.strip().splitlines()]


@pytest.mark.integration
def test_getting_started_runs_as_written(tracking_uri, tmp_path):
    """Each bash block (``ndcg-mlflow`` being this checkout's command) and each Python block of the page, in
    order, in a new folder whose store is ./mlflow.db; the demo's output is the page's, line by line."""
    env = clean_env(MLFLOW_TRACKING_URI=tracking_uri)
    shown, printed = None, []
    for mark, lang, body in blocks("getting-started.md"):
        if mark == "skip":
            continue
        if mark == "output":
            shown = body
            continue
        if lang == "bash":
            script = f'ndcg-mlflow() {{ "{sys.executable}" -m ndcg_mlflow "$@"; }}\nset -e\n{body}'
            argv = ["bash", "-c", script]
        elif lang == "python":
            argv = [sys.executable, "-c", body]
        else:
            continue
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{lang} block failed ({done.returncode}):\n{body}\n{done.stdout}\n{done.stderr}"
        printed.append(done.stdout)
    assert shown is not None, "getting-started.md shows no output (a block marked docs-test: output)"
    assert _normalized(printed[0], str(tmp_path)) == _normalized(shown, SHOWN_FOLDER)
    assert (tmp_path / "mlflow.db").is_file() and list((tmp_path / "ndcg_reports").glob("*/report.html"))


def test_the_shown_output_is_the_demos_own():
    """The page shows the output of the demo, the first block it runs, and the folder it was run in."""
    runnable = [(mark, lang, body) for mark, lang, body in blocks("getting-started.md") if mark != "skip"]
    assert runnable[0][1] == "bash" and runnable[0][2].strip() == "ndcg-mlflow demo"
    assert runnable[1][0] == "output" and f"sqlite:///{SHOWN_FOLDER}/mlflow.db" in runnable[1][2]


# --------------------------------------------------------------------------- the spec reference


def test_the_spec_reference_lists_every_rule_and_choice():
    from ndcg_mlflow.rules import RULES

    page = generator().render()
    sections = re.split(r"^### ", page, flags=re.M)
    for key, rule in RULES.items():
        (section,) = [s for s in sections if s.startswith(f"`{key}`")]
        for choice in rule.choices:
            assert f"| `{choice}` | " in section, (key, choice)
        for entry, words in rule.words_of.items():  # the words explain prints (a value's placeholder aside)
            longest = max(re.split(r"\{\d*\}", words.removeprefix(f"{entry}: ")), key=len)
            assert longest in section, (key, entry)


def test_the_spec_reference_lists_every_key_and_choice_of_the_schema():
    from ndcg_mlflow.spec import types as T
    from ndcg_mlflow.spec.presets import PRESETS
    from ndcg_mlflow.spec.validate import TOP_OPTIONAL, TOP_REQUIRED

    gen = generator()
    page = gen.render()
    assert gen.undocumented() == []
    for key in gen.declared_keys() + list(TOP_REQUIRED + TOP_OPTIONAL):
        assert f"| `{key}` | " in page, key
    for choices in (T.FORMATS, T.CI_METHODS, T.TESTS, T.CORRECTIONS, T.DECISION_RULES, tuple(PRESETS)):
        for choice in choices:
            assert f"`{choice}`" in page, choice
    for preset in PRESETS.values():
        assert f"| `{preset.name}` | {preset.values['gain']} |" in page


def test_the_reference_says_what_the_validator_requires():
    gen = generator()
    page = gen.render()
    required = {"spec_version", "name", "metric", "queries", "uncertainty.seed", "decision.margin"}
    optional = {"uncertainty", "comparison", "decision", "mlflow.tracking_uri", "decision.max_p", "data.*.format"}
    for key in required:
        assert gen.required(key) and f"| `{key}` | yes |" in page, key
    for key in optional:
        assert not gen.required(key) and f"| `{key}` | no |" in page, key
    assert gen.required("metric.gain") and gen.required("queries.weights") and not gen.required("queries.set")
    assert "### `queries.set`\n\nDefault: `null`: every judged query." in page


def test_a_key_without_words_stops_the_reference(monkeypatch):
    gen = generator()
    monkeypatch.delitem(gen.FIELDS, "uncertainty.seed")
    with pytest.raises(RuntimeError, match="uncertainty.seed"):
        gen.render()


# --------------------------------------------------------------------------- words shared with the package


def test_the_docs_say_each_exit_code_in_the_same_words():
    from ndcg_mlflow.errors import EXIT_CODES

    text = " ".join((DOCS / "decision.md").read_text(encoding="utf-8").replace("`", "").split())
    for code, meaning in EXIT_CODES.items():
        assert re.search(rf"\b{code} (\([^)]*\) )?{re.escape(meaning)}", text), (code, meaning)


def test_every_module_says_its_purpose_in_its_docstring():
    """The architecture page's module map is the first sentence of each module's docstring: every module of the
    package (``__init__.py`` and ``__main__.py`` too) has one, and the map lists each module once, with it."""
    gen = generator("gen_module_map")
    found = gen.modules()
    assert len(found) > 60 and ("engines/inputs.py" in dict(found))  # (the map sees the package's subpackages)
    missing = [path for path, purpose in found if not purpose]
    assert not missing, f"modules without a docstring that says their purpose in a first sentence: {missing}"
    page = gen.render()
    for path, purpose in found:
        assert page.count(f"- `{path}`: {purpose}\n") == 1, path
    assert gen.MARKER in (DOCS / "architecture.md").read_text(encoding="utf-8")


def test_the_purpose_is_the_first_sentence_on_one_line():
    gen = generator("gen_module_map")
    assert gen.purpose('"""x"""') is None and gen.purpose(None) is None and gen.purpose("  \n") is None
    assert gen.purpose("A module\nof two lines. And more.\n\nDetails.") == "A module of two lines."
    assert gen.purpose("No sentence here\n\nA later one.") is None
    assert gen.purpose("Uses ``a.b`` and :mod:`x.y`. Then.") == "Uses ``a.b`` and :mod:`x.y`."
    assert gen.purpose("Does it pass? Yes.") == "Does it pass?"


def test_the_readme_links_to_pages_that_exist():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        assert (REPO / link).is_file(), link
    assert len(text.splitlines()) <= 250


# --------------------------------------------------------------------------- every block of the README and docs/
#
# Every fenced block of README.md and docs/*.md is checked by its language:
#
# - ``yaml``: a spec. One with ``spec_version`` is validated by the spec loader as written; one without is a
#   fragment: each top-level section it shows replaces that section of configs/demo.yaml (a section is shown whole,
#   so a required key missing from it is an error), and the result is validated. Data files are not read.
# - ``python``: every name it uses is imported or assigned in it (or named by ``given:`` in its marker); then it
#   runs, in its own process, in a folder holding the demo as the page's own first command leaves it: the README's
#   a copy of the source tree's ``configs/`` (``ndcg-mlflow run configs/demo.yaml``), a docs page's the
#   ``ndcg-mlflow-demo/`` that ``ndcg-mlflow demo`` writes; with an MLflow store of its own.
# - ``bash``: each command is one that exists: ``ndcg-mlflow`` with arguments its parser takes, ``pip install``
#   of this package with extras it declares, ``python -m pytest``, ``java -version``; no ``mlflow`` command (not
#   on PATH after ``pipx install .``: ``ndcg-mlflow ui`` is).
# - ``text`` and unlabelled blocks: output and synopses, not run.
#
# ``<!-- docs-test: skip (why) -->`` on the line before a block keeps it from running (a reason is required); its
# names, spec and commands are checked all the same. ``given: a b`` in the marker names what a skipped Python
# block takes from its context. getting-started.md's blocks run in test_getting_started_runs_as_written.

PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def every_block() -> list[tuple[str, str, str, str]]:
    """(where: page:line, marker text, language, text) of every fenced block of the README and docs/ (its pages
    in folders too)."""
    found = []
    for page in PAGES:
        for line, mark, lang, body in fenced_blocks(page.read_text(encoding="utf-8")):
            found.append((f"{page.relative_to(REPO)}:{line}", mark, lang, body))
    return found


def _of(lang: str) -> list:
    return [pytest.param(where, mark, body, id=where) for where, mark, kind, body in every_block() if kind == lang]


def test_every_fence_is_found_whatever_its_form():
    """Blocks fenced by ``~~~``, indented in a list, with a longer fence or with attributes after the language, and
    the usual aliases of a language (``yml``, ``sh``, ``shell``, ``py``), are found and checked as their
    language: none is skipped unseen, and none shifts the blocks after it."""
    page = (
        "Intro.\n\n~~~yaml\nname: a\n~~~\n\n1. Then:\n\n   ```yml\n   name: b\n   ```\n\n"
        "<!-- docs-test: skip (why) -->\n````python title=\"x.py\"\nprint('```')\n````\n\n"
        "```{.sh}\nndcg-mlflow demo\n```\n\n```shell\nls\n```\n\n```py\nx = 1\n```\n\n```console\n$ ls\n```\n"
    )
    assert fenced_blocks(page) == [
        (3, "", "yaml", "name: a\n"),
        (9, "", "yaml", "name: b\n"),
        (14, "skip (why)", "python", "print('```')\n"),
        (18, "", "bash", "ndcg-mlflow demo\n"),
        (22, "", "bash", "ls\n"),
        (26, "", "python", "x = 1\n"),
        (30, "", "console", "$ ls\n"),
    ]
    assert all(page.name.endswith(".md") for page in PAGES) and REPO / "README.md" in PAGES
    assert set(PAGES) >= {REPO / "README.md", *DOCS.rglob("*.md")}


def test_every_block_has_a_language_the_checks_know_and_skips_say_why():
    for where, mark, lang, _ in every_block():
        assert lang in ("yaml", "python", "bash", "text", ""), (where, lang)
        if mark.startswith("skip"):
            assert re.match(r"skip \(.+\)", mark), f"{where}: a skip says why: <!-- docs-test: skip (why) -->"


@pytest.mark.parametrize("where, mark, body", _of("yaml"))
def test_each_yaml_block_is_a_valid_spec_or_spec_fragment(where, mark, body):
    from ndcg_mlflow.spec import load_spec
    from ndcg_mlflow.spec.yamltext import safe_yaml

    shown = safe_yaml(body, "the block")
    assert isinstance(shown, dict) and shown, "a yaml block is a spec or a mapping of spec sections"
    spec = shown
    if "spec_version" not in shown:
        spec = {**safe_yaml((CONFIGS / "demo.yaml").read_text(encoding="utf-8"), "demo.yaml"), **shown}
    load_spec(spec, base_dir=CONFIGS)


def _undefined_names(code: str) -> set[str]:
    """The names a block reads that nothing in it binds (no import, assignment, loop, def or class), builtins
    aside: read from its symbol tables, nested scopes (lambdas, functions) included."""
    import builtins
    import symtable

    top = symtable.symtable(code, "<block>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    bound |= set(dir(builtins))
    missing: set[str] = set()

    def visit(table: symtable.SymbolTable) -> None:
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (table is top or symbol.is_global()) and symbol.get_name() not in bound:
                missing.add(symbol.get_name())
        for child in table.get_children():
            visit(child)

    visit(top)
    return missing


def test_the_name_check_finds_a_missing_import():
    assert _undefined_names("import ndcg_mlflow\nr = ndcg_mlflow.evaluate(spec)\nf = lambda x: mlflow.y(x, r)\n") == {
        "spec",
        "mlflow",
    }
    assert _undefined_names("import os\nfor p in os.listdir():\n    print(p)\n") == set()


@pytest.mark.integration
@pytest.mark.parametrize("where, mark, body", _of("python"))
def test_each_python_block_names_what_it_uses_and_runs_on_the_demo(where, mark, body, tracking_uri, tmp_path):
    given = set(re.search(r"given: ([\w ]+)", mark)[1].split()) if "given:" in mark else set()
    missing = _undefined_names(body) - given
    assert not missing, f"names used but never imported or assigned: {sorted(missing)}"
    if mark.startswith("skip") or where.startswith("docs/getting-started.md:"):
        return
    import shutil

    from ndcg_mlflow.demo import write_demo

    if where.startswith("README.md:"):  # (the README is read in the source tree: pip install . && ndcg-mlflow run ...)
        shutil.copytree(CONFIGS, tmp_path / "configs")
    else:  # (the site is read where the tool was installed: ndcg-mlflow demo)
        write_demo(tmp_path / "ndcg-mlflow-demo")
    env = clean_env(MLFLOW_TRACKING_URI=tracking_uri)
    done = subprocess.run(
        [sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"the block failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}"


def _commands(body: str) -> list[list[str]]:
    """The simple commands of a bash block: continuation lines joined, comments dropped, split at ``&&``, ``||``,
    ``;`` and ``|``, leading ``NAME=value`` assignments dropped."""
    import shlex

    commands: list[list[str]] = []
    for line in body.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for word in [*lexer, ";"]:
            if set(word) <= set("|&;()"):
                while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
                    words.pop(0)
                if words:
                    commands.append(words)
                words = []
            else:
                words.append(word)
    return commands


def _command_problem(words: list[str]) -> str | None:
    """Why a command of a docs page would not run as shown, or None."""
    from importlib.metadata import metadata

    from ndcg_mlflow.arguments import build_parser

    name, args = words[0], words[1:]
    if name == "ndcg-mlflow":
        try:
            build_parser().parse_args(args)
        except SystemExit:
            return "its arguments do not parse with ndcg-mlflow's parser"
        return None
    if name == "pip" and args[:1] == ["install"]:
        extras = set(metadata("ndcg-mlflow").get_all("Provides-Extra") or [])
        targets = [a for a in args[1:] if a != "-e"]
        for target in targets:
            m = re.fullmatch(r"(\.|ndcg-mlflow)(?:\[([\w,]+)\])?", target)
            if not m:
                return f"pip install {target}: not this package"
            unknown = set((m[2] or "").split(",")) - {""} - extras
            if unknown:
                return f"extras {sorted(unknown)} are not declared in pyproject.toml"
        return None if targets else "pip install of nothing"
    if name == "mlflow":
        return "the mlflow command is not on PATH where the tool was installed with pipx: ndcg-mlflow ui"
    if [name, *args] in (["python", "-m", "pytest"], ["java", "-version"]) or name == "exit":
        return None
    return "not a command the docs' checks know"


def test_the_command_check_finds_what_does_not_exist():
    assert _commands("A=1 ndcg-mlflow run x.yaml --quiet || exit $?  # a gate\npip install . && \\\n  mkdocs") == [
        ["ndcg-mlflow", "run", "x.yaml", "--quiet"],
        ["exit", "$?"],
        ["pip", "install", "."],
        ["mkdocs"],
    ]
    assert _command_problem(["ndcg-mlflow", "run", "x.yaml", "--no-such-flag"])
    assert _command_problem(["ndcg-mlflow", "plan", "FOLDER", "--margin", "M"])  # (a synopsis, not a command)
    assert _command_problem(["pip", "install", ".[tests]"])
    assert _command_problem(["mlflow", "ui"])
    assert _command_problem(["pip", "install", "-e", ".[test,spark]"]) is None


@pytest.mark.parametrize("where, mark, body", _of("bash"))
def test_each_bash_block_runs_commands_that_exist(where, mark, body):
    problems = [f"{' '.join(words)}: {p}" for words in _commands(body) if (p := _command_problem(words))]
    assert not problems, "\n".join(problems)
