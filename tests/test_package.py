"""Packaging contracts: the entry points, and a core free of mlflow."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CONFIGS

pytestmark = pytest.mark.integration  # every test starts a Python process


def test_import_does_not_import_mlflow():
    code = ("import sys, ndcg_mlflow, ndcg_mlflow.evaluation, ndcg_mlflow.kernel, ndcg_mlflow.readers, "
            "ndcg_mlflow.spec, ndcg_mlflow.cli; print('mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_dash_m_validates(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ndcg_mlflow", "validate", str(CONFIGS / "demo.yaml")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "metric.gain: exponential" in out.stdout


def test_python_dash_m_reports_user_error(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("spec_version: 1\nname: x\nmetric: [1, 2\n")
    out = subprocess.run([sys.executable, "-m", "ndcg_mlflow", "run", str(spec)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 2
    assert "not valid YAML at line" in out.stderr and "Traceback" not in out.stderr


def _imports(path, package: str, modules: set[str]) -> set[str]:
    """The package modules one module imports (at module level or inside functions), from its syntax tree."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith(package + ".")
                         and a.name.count(".") >= 1)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").startswith(package + "."):
                found.add(node.module.split(".")[1])
            elif node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:  # from . import x: a module of the package, or a name of its __init__
                found.update(a.name if a.name in modules else "__init__" for a in node.names)
    return found & modules


def test_no_module_of_the_package_takes_part_in_an_import_cycle():
    from pathlib import Path

    import ndcg_mlflow

    root = Path(ndcg_mlflow.__file__).parent
    modules = {p.stem for p in root.glob("*.py")}
    graph = {m: _imports(root / f"{m}.py", "ndcg_mlflow", modules) - {m} for m in modules}
    graph["__init__"] = set()  # the package's own imports are its public names, which import downwards
    cycles = []

    def visit(node, trail):
        for nxt in sorted(graph[node]):
            if nxt in trail:
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in done:
                visit(nxt, trail + [nxt])
        done.add(node)

    done: set[str] = set()
    for m in sorted(graph):
        if m not in done:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
    assert "__init__" not in set().union(*(graph[m] for m in graph)), "a module imports the package itself"


def test_import_of_the_core_does_not_import_mlflow_or_the_optional_libraries():
    code = ("import sys, ndcg_mlflow, ndcg_mlflow.join, ndcg_mlflow.sensitivity, ndcg_mlflow.analysis; "
            "print(sorted(m for m in ('mlflow', 'polars', 'duckdb') if m in sys.modules))")
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
                found += [f"{path.relative_to(root)}:{node.lineno}: {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, "private names imported across modules:\n" + "\n".join(found)
