"""The documentation site (docs/, mkdocs.yml) says what the package does.

- docs/getting-started.md runs as written: its shell and Python blocks, in a new folder with a store of its own,
  print what the page shows.
- The spec reference, generated from ndcg_mlflow/rules.py, presets.py and spec/types.py by
  docs/gen_spec_reference.py, lists every rule and choice, every key and whether it is required.
- The exit codes are worded as errors.EXIT_CODES words them, and the README links only to pages that exist.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import clean_env

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SHOWN_FOLDER = "/home/me/eval"  # the working folder of the output shown in getting-started.md

BLOCK = re.compile(r"(?:<!-- docs-test: (?P<mark>\w+)[^>]*-->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```\n", re.S)


def blocks(page: str) -> list[tuple[str, str, str]]:
    """(marker, language, text) of each fenced block of a docs page; the marker is the ``docs-test`` comment on
    the line before the block (``skip``, ``output``), or ''."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(m["mark"] or "", m["lang"], m["body"]) for m in BLOCK.finditer(text)]


def generator():
    spec = importlib.util.spec_from_file_location("gen_spec_reference", DOCS / "gen_spec_reference.py")
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
    from ndcg_mlflow.presets import PRESETS
    from ndcg_mlflow.spec import types as T
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


def test_the_readme_links_to_pages_that_exist():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        assert (REPO / link).is_file(), link
    assert len(text.splitlines()) <= 250
