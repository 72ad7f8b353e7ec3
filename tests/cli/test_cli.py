"""The command line's own words: each command's help (its examples parse with the real parser; its exit codes are
those it can return, in the words of errors.EXIT_CODES, which the README repeats), --version, and the demo."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
from conftest import CONFIGS, REPO

from ndcg_mlflow.arguments import build_parser
from ndcg_mlflow.cli import main
from ndcg_mlflow.errors import EXIT_CODES, NdcgError, TrackingError

# what each command can return, read from its code: 2 from any NdcgError, 3 where it logs to or reads from MLflow
# (TrackingError), 4 from run's decision and --promote; 0, 1 (a bug), 130 and 143 from every command
EVERY = {0, 1, 2, 130, 143}
RETURNS = {
    "run": EVERY | {3, 4},
    "validate": EVERY,
    "explain": EVERY,
    "upload": EVERY | {3},
    "report": EVERY | {3},
    "compare": EVERY | {3},
    "plan": EVERY | {3},
    "demo": EVERY | {3},
    "ui": EVERY,
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_command_is_covered():
    assert set(_commands()) == set(RETURNS)


@pytest.mark.parametrize("command", sorted(RETURNS))
def test_each_commands_help_ends_with_its_examples_and_the_exit_codes_it_returns(command, capsys):
    text = _help(capsys, command)
    before, examples, codes = re.fullmatch(r"(.*)\nexamples:\n(.*?)\n\nexit codes:\n(.*)\n", text, re.S).groups()
    assert 2 <= len(re.findall(r"^  ndcg-mlflow ", examples, re.M)) <= 3
    listed = [int(code) for code in re.findall(r"^  (\d+) ", codes, re.M)]
    assert listed == sorted(RETURNS[command])
    assert _flat(codes) == _flat(" ".join(f"{code} {EXIT_CODES[code]}" for code in listed))


def _example_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.startswith("  ndcg-mlflow ")]


def _argv(line: str) -> list[str]:
    """An example's arguments: its words up to a shell operator (``|| exit $?``) or a comment."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    cut = next((i for i, w in enumerate(words) if set(w) <= set("|&;<>()")), len(words))
    assert words[0] == "ndcg-mlflow"
    return words[1:cut]


@pytest.mark.parametrize("command", sorted(RETURNS))
def test_every_example_parses_with_the_real_parser(command, capsys):
    """The examples are read from the help as it prints: each parses, names its own command, and the --set values
    of an example validate against the demo's spec."""
    from ndcg_mlflow.spec import load_spec

    for line in _example_lines(_help(capsys, command)):
        try:
            args = build_parser().parse_args(_argv(line))
        except SystemExit:
            pytest.fail(f"the example does not parse: {line}\n{capsys.readouterr().err}")
        assert args.command == command, line
        if getattr(args, "set", None):
            load_spec(CONFIGS / "demo.yaml", overrides=args.set)


def test_runs_examples_show_a_gate_an_override_and_spark(capsys):
    lines = _example_lines(_help(capsys, "run"))
    assert any("|| exit $?" in line for line in lines)
    assert any("--set " in line for line in lines) and any("--engine spark" in line for line in lines)


def test_the_readme_says_each_exit_code_in_the_same_words():
    text = _flat((REPO / "README.md").read_text(encoding="utf-8").replace("`", ""))
    for code, meaning in EXIT_CODES.items():
        assert re.search(rf"\b{code} (\([^)]*\) )?{re.escape(meaning)}", text), (code, meaning)


def test_the_errors_carry_the_codes_the_help_names():
    from ndcg_mlflow.tracking.registry import AliasMoved

    assert (NdcgError.exit_code, TrackingError.exit_code, AliasMoved.exit_code) == (2, 3, 4)


def _version(capsys) -> list[str]:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    return capsys.readouterr().out.splitlines()


def test_version_names_the_c_parts_and_the_readers_vector_code(capsys):
    from ndcg_mlflow.kernel import native_kernel
    from ndcg_mlflow.readers.text import native_reader
    from ndcg_mlflow.version import VECTOR_CODE, __version__

    if native_reader() is None or native_kernel() is None:
        pytest.skip("the C parts are not built here")
    from ndcg_mlflow.readers.cparse import vector_width

    before = vector_width(None)
    lines = _version(capsys)
    assert lines[0].startswith(f"ndcg-mlflow {__version__} (Python ")
    assert lines[1:] == [
        "C parts: loaded",
        f"  ndcg_mlflow.readers.cparse  loaded: {VECTOR_CODE[before]}",
        "  ndcg_mlflow.ckernel         loaded",
    ]
    try:
        vector_width(0)
        assert _version(capsys)[2].endswith("loaded: scalar code")
    finally:
        vector_width(before)


def test_version_says_pure_python_and_why(capsys, monkeypatch):
    monkeypatch.setenv("NDCG_MLFLOW_PURE_PYTHON", "1")
    assert _version(capsys)[1] == "C parts: off (NDCG_MLFLOW_PURE_PYTHON=1): pure Python fallback (Arrow and numpy)"
    monkeypatch.delenv("NDCG_MLFLOW_PURE_PYTHON")
    monkeypatch.setitem(__import__("sys").modules, "ndcg_mlflow.ckernel", None)  # (as an import that fails)
    lines = _version(capsys)
    assert lines[1] in ("C parts: partly loaded", "C parts: pure Python fallback")
    assert lines[3].startswith("  ndcg_mlflow.ckernel         not loaded, pure Python fallback: ModuleNotFoundError: ")


def test_the_demo_writes_the_files_in_configs(tmp_path):
    from ndcg_mlflow.demo import write_demo

    assert write_demo(tmp_path / "d") == tmp_path / "d" / "demo.yaml"
    written = sorted(str(p.relative_to(tmp_path / "d")) for p in (tmp_path / "d").rglob("*") if p.is_file())
    assert written == [
        "demo.yaml",
        "demo/bm25.run",
        "demo/dense_ties.run",
        "demo/duplicate_groups.tsv",
        "demo/human_qrels.tsv",
        "demo/judge_qrels.tsv",
        "demo/qrels.tsv",
        "demo/reranker_v2.run",
        "demo/weights.tsv",
        "demo_judge.yaml",
        "demo_weighted.yaml",
    ]
    for path in written:
        assert (tmp_path / "d" / path).read_bytes() == (CONFIGS / path).read_bytes(), path


def test_the_demo_replaces_no_file_of_another(tmp_path, capsys):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "demo.yaml").write_text("mine\n")
    assert main(["demo", "--dir", str(folder), "--no-run"]) == 2
    assert f"{folder / 'demo.yaml'} is there and is not the demo's" in capsys.readouterr().err
    assert (folder / "demo.yaml").read_text() == "mine\n" and not (folder / "demo").exists()


def test_the_demo_prints_the_run_command_and_runs_it(tmp_path, capsys, monkeypatch):
    """--no-run writes the files and prints the command; the demo runs that command (again into the same folder:
    the files are the demo's, left as they are)."""
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--dir", "d", "--no-run"]) == 0
    out = capsys.readouterr().out
    assert out == "the demo's specs and data are in d/; evaluate them:\n  ndcg-mlflow run d/demo.yaml\n"
    assert main(["demo", "--dir", "d", "--no-mlflow"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("the demo's specs and data are in d/; running:\n  ndcg-mlflow run d/demo.yaml --no-mlflow\n")
    (folder,) = (tmp_path / "ndcg_reports").iterdir()
    assert folder.name.startswith("demo-product-search-") and (folder / "summary.json").is_file()
    assert f"local results: {folder.resolve()}" in out


@pytest.mark.integration
def test_ui_serves_mlflows_ui_with_no_mlflow_command_on_path(tmp_path):
    """``ndcg-mlflow ui`` (the command every run prints) where no ``mlflow`` command is on PATH, as after ``pipx
    install .``: MLflow's UI answers on the port given, for the store given; Ctrl-C ends it with exit 130."""
    import os
    import shutil
    import signal
    import subprocess
    import time
    import urllib.request

    from helpers import clean_env, cli_command, free_port

    path = os.pathsep.join(d for d in ("/usr/bin", "/bin") if os.path.isdir(d))
    assert shutil.which("mlflow", path=path) is None, "an mlflow command on the PATH of the test"
    port = free_port()
    store = f"sqlite:///{tmp_path / 'ui.db'}"
    argv = cli_command("ui", "--backend-store-uri", store, "--port", str(port), "--workers", "1")
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=clean_env(PATH=path, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # (its own process group, as a terminal's foreground job: Ctrl-C reaches all)
    )
    try:
        deadline, answered = time.monotonic() + 120, False
        while time.monotonic() < deadline and proc.poll() is None and not answered:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    answered = resp.status == 200
            except OSError:
                time.sleep(0.5)
        assert answered, f"no answer on port {port} (exit {proc.poll()})"
        assert (tmp_path / "ui.db").is_file()  # the store given, not ./mlflow.db
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, out
        assert "ndcg_mlflow/" not in out, out  # (no traceback of the tool's)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


@pytest.mark.parametrize("where", ["key", "path"])
def test_an_error_naming_a_spec_key_or_a_path_is_one_line(tmp_path, capsys, where):
    """A spec key (or a data file's path) holding a line break and an escape sequence is shown as terminal text
    in the error: one line, ``error:`` only at its start, the key or path readable as Python writes it."""
    import yaml

    from ndcg_mlflow.render.format import term_text

    odd = "foo\nerror: forged\x1b[31m"
    spec = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    if where == "key":
        spec["metric"][odd] = 1
    else:
        spec["data"]["qrels"] = odd
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and err.endswith("\n"), err
    assert term_text(odd) in err and "\x1b" not in err, err


def test_the_result_folder_is_named_on_one_line(tmp_path):
    """``local results:`` and ``report:`` name a folder holding a line break and an escape sequence on their two
    lines, as terminal text."""
    from ndcg_mlflow.render.format import term_text
    from ndcg_mlflow.render.terminal import format_locations

    folder = tmp_path / "out\nreport: forged\x1b[31m"
    lines = format_locations(folder).split("\n")
    assert lines == [f"local results: {term_text(folder)}", f"report: {term_text(folder / 'report.html')}"], lines
    assert "\x1b" not in "".join(lines)
