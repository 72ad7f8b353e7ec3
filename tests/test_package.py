"""Packaging contracts: the entry points, and a core free of mlflow."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CONFIGS

pytestmark = pytest.mark.integration  # every test starts a Python process


def test_import_does_not_import_mlflow():
    code = (
        "import sys, ndcg_mlflow, ndcg_mlflow.evaluation, ndcg_mlflow.kernel, ndcg_mlflow.readers, "
        "ndcg_mlflow.spec, ndcg_mlflow.cli; print('mlflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_dash_m_validates(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ndcg_mlflow", "validate", str(CONFIGS / "demo.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "metric.gain: exponential" in out.stdout


def test_python_dash_m_reports_user_error(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("spec_version: 1\nname: x\nmetric: [1, 2\n")
    out = subprocess.run(
        [sys.executable, "-m", "ndcg_mlflow", "run", str(spec)], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 2
    assert "not valid YAML at line" in out.stderr and "Traceback" not in out.stderr


def _module_graph() -> dict[str, set[str]]:
    """Every module of the package, subpackages included (``ndcg_mlflow.readers.columns``), and the package
    modules it imports, at module level or inside functions, read from its syntax tree. ``from . import x``
    of a submodule is an import of that submodule, not of the package's ``__init__``."""
    import ast
    from pathlib import Path

    import ndcg_mlflow

    root = Path(ndcg_mlflow.__file__).parent
    modules: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(["ndcg_mlflow", *(parts[:-1] if is_package else parts)])] = (path, is_package)
    graph = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                submodules = {f"{target}.{a.name}" for a in node.names} & set(modules)
                deps |= submodules
                if len(submodules) < len(node.names):
                    deps.add(target)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def test_no_module_of_the_package_takes_part_in_an_import_cycle():
    graph = _module_graph()
    assert "ndcg_mlflow.readers.columns" in graph and "ndcg_mlflow.tracking.client" in graph
    assert "ndcg_mlflow.paths" in graph["ndcg_mlflow.readers.columns"]  # the graph sees relative imports
    cycles = []

    def visit(node, trail):
        for nxt in sorted(graph[node]):
            if nxt in trail:
                cycles.append(trail[trail.index(nxt) :] + [nxt])
            elif nxt not in done:
                visit(nxt, trail + [nxt])
        done.add(node)

    done: set[str] = set()
    for m in sorted(graph):
        if m not in done:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
    importers = sorted(m for m in graph if "ndcg_mlflow" in graph[m])
    assert not importers, f"modules that import the package itself: {importers}"


def test_the_readers_do_not_import_the_spec():
    """The readers take plain values (paths, formats, column names): the path checks they share with the spec
    are in the leaf ``ndcg_mlflow.paths``."""
    graph = _module_graph()
    found = sorted(
        f"{m} -> {d}" for m in graph if m.startswith("ndcg_mlflow.readers") for d in graph[m] if ".spec" in d
    )
    assert not found, f"readers that import the spec: {found}"
    assert graph["ndcg_mlflow.paths"] == set(), "ndcg_mlflow.paths imports nothing of the package"


def test_import_of_the_core_does_not_import_mlflow_or_the_optional_libraries():
    code = (
        "import sys, ndcg_mlflow, ndcg_mlflow.join, ndcg_mlflow.sensitivity, ndcg_mlflow.analysis; "
        "print(sorted(m for m in ('mlflow', 'polars', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_module_imports_a_private_name_of_another():
    """A name with a leading underscore is private to its module: shared helpers have public names, so a change
    inside a module cannot silently break another."""
    import ast
    from pathlib import Path

    import ndcg_mlflow

    root = Path(ndcg_mlflow.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("ndcg_mlflow")):
                found += [
                    f"{path.relative_to(root)}:{node.lineno}: {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_the_c_reader_is_built_where_a_compiler_is():
    """``pip install`` builds the C part (``readers/cparse.c``) where a C compiler is: a failed build would only
    show as a slower read, so it is checked here."""
    import shutil
    import sysconfig
    from pathlib import Path

    from ndcg_mlflow.readers.trec import native_reader

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the readers are Arrow's and the line reader")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        pytest.skip("no Python headers here (Python.h): the C parts cannot be built")
    assert native_reader() is not None, "readers/cparse.c was not built: run pip install -e . again"


@pytest.mark.parametrize("given", [(700, 10, 10), (50_000, 3, 4), (0, 10, 10)])
def test_a_command_raises_the_collectors_first_threshold_and_restores_it(given, monkeypatch, tmp_path):
    """During a command the young generation is at least YOUNG_GENERATION (fewer collections while mlflow's
    modules are imported), never turned back on when it was off (0), and every threshold is restored after, on
    success and on an error."""
    import gc

    from ndcg_mlflow import cli

    seen = []

    def fake_validate(args):
        seen.append(gc.get_threshold())
        raise cli.NdcgError("stop here")

    monkeypatch.setattr(cli, "cmd_validate", fake_validate)
    before = gc.get_threshold()
    try:
        gc.set_threshold(*given)
        spec = tmp_path / "s.yaml"
        spec.write_text("spec_version: 1\n")
        assert cli.main(["validate", str(spec)]) == 2
        assert gc.get_threshold() == given
    finally:
        gc.set_threshold(*before)
    want = given if given[0] == 0 else (max(given[0], cli.YOUNG_GENERATION), *given[1:])
    assert seen == [want]
