"""Packaging contracts: the entry points, and a core free of mlflow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGS

pytestmark = pytest.mark.integration  # every test starts a Python process


def test_import_does_not_import_mlflow():
    code = (
        "import sys, ndcg_mlflow, ndcg_mlflow.engines.local.pipeline, ndcg_mlflow.kernel, ndcg_mlflow.readers, "
        "ndcg_mlflow.spec, ndcg_mlflow.cli; print('mlflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_package_and_its_tracking_hook_import_nothing_until_used():
    """MLflow loads ``ndcg_mlflow.tracking.bounds`` (the request header provider of this package's entry point) in
    every process that imports its registry: that import, like ``import ndcg_mlflow``, loads neither numpy nor the
    package's modules; the package's names load when first used."""
    code = (
        "import sys, ndcg_mlflow.tracking.bounds; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pyarrow', 'mlflow', 'ndcg_mlflow'))); "
        "import ndcg_mlflow; print(ndcg_mlflow.evaluate.__module__, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, used = out.stdout.splitlines()
    assert loaded == str(
        [
            "ndcg_mlflow",
            "ndcg_mlflow.lazy",
            "ndcg_mlflow.tracking",
            "ndcg_mlflow.tracking.bounds",
            "ndcg_mlflow.version",
        ]
    )
    assert used == "ndcg_mlflow.api True"


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


def _imports(root: Path | None = None) -> dict[str, set[tuple[str, int, bool]]]:
    """Every module of the package at ``root`` (the installed ``ndcg_mlflow`` by default; its folder's name is the
    package's), subpackages included (``ndcg_mlflow.readers.columns``), and what it imports, read from its syntax
    tree: (module imported, line, whether inside a function), relative imports made absolute. ``from . import x``
    of a submodule is an import of that submodule, not of the package's ``__init__``."""
    import ast

    import ndcg_mlflow

    root = Path(ndcg_mlflow.__file__).parent if root is None else root
    modules: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join([root.name, *(parts[:-1] if is_package else parts)])] = (path, is_package)
    found = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rsplit(".", 1)[0]
        imports: set[tuple[str, int, bool]] = set()

        def visit(node: ast.AST, lazy: bool, package: str = package, imports: set = imports) -> None:
            if isinstance(node, ast.Import):
                imports.update((a.name, node.lineno, lazy) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                submodules = {f"{target}.{a.name}" for a in node.names} & set(modules)
                imports.update((m, node.lineno, lazy) for m in submodules)
                if len(submodules) < len(node.names):
                    imports.add((target, node.lineno, lazy))
            inside = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, inside)

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
        found[name] = imports
    return found


def _module_graph(root: Path | None = None) -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports, at module level or inside functions."""
    imports = _imports(root)
    return {name: {m for m, _, _ in found if m in imports and m != name} for name, found in imports.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``, each as the modules along it (the first one again at the end)."""
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
    return cycles


def test_no_module_of_the_package_takes_part_in_an_import_cycle():
    graph = _module_graph()
    assert "ndcg_mlflow.readers.columns" in graph and "ndcg_mlflow.tracking.client" in graph
    assert "ndcg_mlflow.paths" in graph["ndcg_mlflow.readers.columns"]  # the graph sees relative imports
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
    importers = sorted(m for m in graph if "ndcg_mlflow" in graph[m])
    assert not importers, f"modules that import the package itself: {importers}"


# the layer rules: (what is imported, the only parts of the package that may import it, whether only inside
# functions there): mlflow in the logging layer and the MLflow integrations, lazily (importing the package
# imports no mlflow); pyspark in the Spark engine
LAYERS = {
    "mlflow": (("ndcg_mlflow.tracking", "ndcg_mlflow.integrations"), True),
    "pyspark": (("ndcg_mlflow.engines.spark",), False),
}


def _within(name: str, parts: tuple[str, ...]) -> bool:
    return any(name == part or name.startswith(part + ".") for part in parts)


def _imports_of(imports: dict[str, set[tuple[str, int, bool]]], target: str, by: tuple[str, ...] = ()) -> list[str]:
    """``module:line: imported`` for each import of ``target`` or one of its submodules (by the modules inside
    ``by`` when given), sorted."""
    return sorted(
        f"{module}:{line}: {name}{' (inside a function)' if lazy else ''}"
        for module, found in imports.items()
        for name, line, lazy in found
        if _within(name, (target,)) and (not by or _within(module, by))
    )


def _layer_violations(imports: dict[str, set[tuple[str, int, bool]]]) -> list[str]:
    """The imports that break :data:`LAYERS`: a library imported outside its parts, or at module level there
    when it must be imported inside functions."""
    return [
        found
        for library, (parts, lazy) in LAYERS.items()
        for found in _imports_of(imports, library)
        if not _within(found.split(":", 1)[0], parts) or (lazy and not found.endswith("(inside a function)"))
    ]


def test_mlflow_and_pyspark_are_imported_only_in_their_layers():
    """mlflow only in tracking/ and integrations/, inside functions; pyspark only in engines/spark/."""
    imports = _imports()
    assert _imports_of(imports, "mlflow", ("ndcg_mlflow.tracking",))  # (the rule sees the imports it is about)
    assert _imports_of(imports, "pyspark", ("ndcg_mlflow.engines.spark",))
    violations = _layer_violations(imports)
    assert not violations, "imports outside their layer:\n" + "\n".join(violations)


def test_the_readers_do_not_import_the_spec():
    """The readers take plain values (paths, formats, column names): the path checks they share with the spec
    are in the leaf ``ndcg_mlflow.paths`` (which names a path through the leaf ``ndcg_mlflow.escapes``)."""
    found = _imports_of(_imports(), "ndcg_mlflow.spec", ("ndcg_mlflow.readers",))
    assert not found, "readers importing the spec:\n" + "\n".join(found)
    graph = _module_graph()
    assert graph["ndcg_mlflow.paths"] <= {"ndcg_mlflow.escapes"}, "ndcg_mlflow.paths imports only the escapes"
    assert graph["ndcg_mlflow.escapes"] == set(), "ndcg_mlflow.escapes imports nothing of the package"


# the layers inside the package: (the modules a rule is about, the modules they must not import, the rule in words)
SEPARATIONS = (
    (("ndcg_mlflow.statistics",), ("ndcg_mlflow.render",), "the statistics never import the rendering"),
    (("ndcg_mlflow.engines",), ("ndcg_mlflow.render",), "the engines return data, the rendering words it"),
    (("ndcg_mlflow.render",), ("ndcg_mlflow.engines",), "the rendering imports no engine"),
    (("ndcg_mlflow.engines.local",), ("ndcg_mlflow.engines.spark",), "the local engine does not import Spark's"),
    (("ndcg_mlflow.engines.spark",), ("ndcg_mlflow.engines.local",), "the Spark engine does not import the local one"),
)
#: the modules at the package's root that an engine may import: the leaves, the per-query core and the seam, the
#: result type; a pipeline at the root (a library both engines call) belongs in ``engines/`` or ``statistics/``
ENGINE_ROOT_IMPORTS = frozenset(
    f"ndcg_mlflow.{name}"
    for name in (
        "ckernel",
        "companions",
        "errors",
        "escapes",
        "join",
        "kernel",
        "lazy",
        "paths",
        "queries",
        "result",
        "rules",
        "timings",
        "uris",
        "version",
    )
)


def _separation_violations(imports: dict[str, set[tuple[str, int, bool]]]) -> list[str]:
    """The imports that break :data:`SEPARATIONS`, and an engine's imports of a module at the package's root
    beyond :data:`ENGINE_ROOT_IMPORTS` (the package's subpackages are not root modules), each with its rule."""
    found = [
        f"{breach} ({words})"
        for parts, forbidden, words in SEPARATIONS
        for target in forbidden
        for breach in _imports_of(imports, target, parts)
    ]
    packages = {name.rsplit(".", 1)[0] for name in imports if name.count(".") > 1}
    found += [
        f"{module}:{line}: {name}{' (inside a function)' if lazy else ''} (an engine imports a root module)"
        for module, names in sorted(imports.items())
        if _within(module, ("ndcg_mlflow.engines",))
        for name, line, lazy in sorted(names)
        if name.count(".") == 1
        and name.startswith("ndcg_mlflow.")
        and name not in packages
        and name not in ENGINE_ROOT_IMPORTS
    ]
    return found


def test_the_layers_import_only_downwards():
    """Numbers in, numbers out: the statistics import no rendering, the rendering no engine; the local and the
    Spark engine do not import each other, and an engine imports from the package's root only its leaves, the
    per-query core and the result type (what both engines share lives in ``engines/`` or ``statistics/``)."""
    imports = _imports()
    assert _imports_of(imports, "ndcg_mlflow.statistics", ("ndcg_mlflow.engines",))  # (the rule sees its imports)
    violations = _separation_violations(imports)
    assert not violations, "imports across the layers:\n" + "\n".join(violations)


def test_no_two_modules_share_a_file_name():
    """Where a module stands says what it holds: no two files of the package (``__init__.py`` aside) share a
    name."""
    import ndcg_mlflow

    root = Path(ndcg_mlflow.__file__).parent
    names: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name != "__init__.py":
            names.setdefault(path.name, []).append(str(path.relative_to(root)))
    twice = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert not twice, f"file names used twice: {twice}"


def test_the_import_rules_find_what_breaks_them(tmp_path):
    """Each rule above on a package planted with one breach of each (and with what each rule allows): an eager
    or misplaced mlflow import, pyspark outside the Spark engine (in another module of engines/ too, inside a
    function), a reader importing the spec (a submodule of it, inside a function), a cycle through an import inside
    a function, and a breach of each layer of :data:`SEPARATIONS` (the statistics importing the rendering at module
    level, inside a function and through the package: no statistics module is excused) and of
    :data:`ENGINE_ROOT_IMPORTS`."""
    files = {
        "__init__.py": "",
        "core.py": "def f():\n    from mlflow.tracking import MlflowClient\n",
        "cycle_a.py": "from . import cycle_b\n",
        "cycle_b.py": "def f():\n    from .cycle_a import g\n",
        "spec/__init__.py": "",
        "spec/load.py": "",
        "readers/__init__.py": "",
        "readers/columns.py": "import os\n\n\ndef f():\n    from ..spec.load import parse\n",
        "readers/text.py": "from .. import core\n",
        "tracking/__init__.py": "",
        "tracking/client.py": "def f():\n    import mlflow\n",
        "tracking/eager.py": "import mlflow.entities\n",
        "integrations/genai.py": "def f():\n    import mlflow.genai\n",
        "engines/spark/__init__.py": "",
        "engines/spark/buckets.py": "import pyspark.sql\n",
        "engines/grouped.py": "def f():\n    from pyspark.sql import functions\n",
        "report.py": "from pyspark.sql import functions\n",
        "kernel.py": "",
        "pipeline.py": "",
        "statistics/__init__.py": "",
        "statistics/risk.py": "def f():\n    from ..render.format import number\n",
        "statistics/decision.py": "from ..render.format import exact\n",
        "statistics/segments.py": "from ..render import words\n",
        "render/__init__.py": "",
        "render/words.py": "",
        "render/format.py": "from .. import kernel\n",
        "render/report.py": "from ..engines.local import run\n",
        "engines/__init__.py": "",
        "engines/local/__init__.py": "from ...kernel import f\nfrom ..spark import buckets\n",
        "engines/local/run.py": "from ... import pipeline\n",
        "engines/spark/driver.py": "from ..local.run import f\nfrom ...statistics import risk\n",
        "engines/outcome.py": "def f():\n    from ..render.words import consistency_note\n",
    }
    root = tmp_path / "ndcg_mlflow"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    imports = _imports(root)
    assert _layer_violations(imports) == [
        "ndcg_mlflow.core:2: mlflow.tracking (inside a function)",
        "ndcg_mlflow.tracking.eager:1: mlflow.entities",
        "ndcg_mlflow.engines.grouped:2: pyspark.sql (inside a function)",
        "ndcg_mlflow.report:1: pyspark.sql",
    ]
    assert _imports_of(imports, "ndcg_mlflow.spec", ("ndcg_mlflow.readers",)) == [
        "ndcg_mlflow.readers.columns:5: ndcg_mlflow.spec.load (inside a function)"
    ]
    assert _cycles(_module_graph(root)) == [["ndcg_mlflow.cycle_a", "ndcg_mlflow.cycle_b", "ndcg_mlflow.cycle_a"]]
    assert _separation_violations(imports) == [
        "ndcg_mlflow.statistics.decision:1: ndcg_mlflow.render.format (the statistics never import the rendering)",
        "ndcg_mlflow.statistics.risk:2: ndcg_mlflow.render.format (inside a function) "
        "(the statistics never import the rendering)",
        "ndcg_mlflow.statistics.segments:1: ndcg_mlflow.render.words (the statistics never import the rendering)",
        "ndcg_mlflow.engines.outcome:2: ndcg_mlflow.render.words (inside a function) "
        "(the engines return data, the rendering words it)",
        "ndcg_mlflow.render.report:1: ndcg_mlflow.engines.local.run (the rendering imports no engine)",
        "ndcg_mlflow.engines.local:2: ndcg_mlflow.engines.spark.buckets (the local engine does not import Spark's)",
        "ndcg_mlflow.engines.spark.driver:1: ndcg_mlflow.engines.local.run "
        "(the Spark engine does not import the local one)",
        "ndcg_mlflow.engines.local.run:1: ndcg_mlflow.pipeline (an engine imports a root module)",
    ]


def test_the_statistics_and_the_engines_return_facts_that_render_words():
    """What the statistics find is returned as data and worded in ``render/words.py`` alone (beside the import rule
    above): the family's statement, why studentized intervals are undefined and the sensitivity alternatives not
    computed are render's functions, not the statistics'; the analysis holds no notes or statement in words, and
    the sensitivity's collection takes no list of notes to write into."""
    import dataclasses
    import inspect

    from ndcg_mlflow.render import words
    from ndcg_mlflow.statistics import comparisons, sensitivity

    for name in ("studentized_note", "family_statement", "family_record", "left_out_note", "statistics_notes"):
        assert callable(getattr(words, name, None)), f"render.words.{name}"
        assert not hasattr(comparisons, name) and not hasattr(sensitivity, name), name
    fields = {f.name for f in dataclasses.fields(comparisons.Analysis)}
    assert {"too_few", "correction_family", "consistency"} <= fields
    assert not fields & {"notes", "family"}, fields & {"notes", "family"}
    assert "notes" not in inspect.signature(sensitivity.collect_alternatives).parameters
    family = comparisons.correction_family(
        comparisons.Comparison("b", "randomization", "holm", 0, 0.0), 1, 1, 0, [("a", "ndcg_at_10", None)], [0.5], "x"
    )
    assert "statement" not in family and "statement" in words.family_record(family)


# the seam's entry points into the join and the kernel (module -> names): only the seam, ndcg_mlflow.queries, calls
# them; every engine and every other module goes through the seam (queries.query_rows, raw_query_rows, ndcg_under)
JOIN_ENTRY_POINTS = {
    "ndcg_mlflow.join": {"join", "prepare_run", "judged_rows", "compute"},
    "ndcg_mlflow.kernel": {"evaluate_rows"},
    "ndcg_mlflow.queries": {"score_queries"},
}
SEAM = "ndcg_mlflow.queries"
BELOW_THE_SEAM = {"ndcg_mlflow.join": "ndcg_mlflow.kernel"}  # the join's compute is the kernel's caller


def _joiners(root: Path | None = None) -> list[str]:
    """Where a module other than the seam (and than the entry point's own module) imports a join or kernel entry
    point (``from ..join import compute``) or reaches one through its module (``from .. import join``,
    ``join.compute``): ``module:line: entry point``."""
    import ast

    import ndcg_mlflow

    root = Path(ndcg_mlflow.__file__).parent if root is None else root
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join([root.name, *(parts[:-1] if is_package else parts)])
        if name == SEAM:
            continue
        package = name if is_package else name.rsplit(".", 1)[0]
        aliases: dict[str, str] = {}  # a local name -> the entry points' module it stands for
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    module = f"{target}.{a.name}"
                    if module in JOIN_ENTRY_POINTS and module != name:
                        aliases[a.asname or a.name] = module
                    if a.name in JOIN_ENTRY_POINTS.get(target, ()) and target not in (name, BELOW_THE_SEAM.get(name)):
                        found.append(f"{name}:{node.lineno}: {target}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in JOIN_ENTRY_POINTS and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                module = aliases[node.value.id]
                if node.attr in JOIN_ENTRY_POINTS[module]:
                    found.append(f"{name}:{node.lineno}: {module}.{node.attr}")
    return found


def test_only_the_seam_joins_and_calls_the_kernel():
    assert _joiners() == []


def test_the_seam_rule_finds_what_breaks_it(tmp_path):
    """The rule on a package planted with each way of reaching the join or the kernel outside the seam (and with
    what it allows: the seam itself, the join calling the kernel, the judgments' index built elsewhere)."""
    files = {
        "__init__.py": "",
        "join.py": "from .kernel import evaluate_rows\n\n\ndef join():\n    return evaluate_rows()\n",
        "kernel.py": "def evaluate_rows():\n    pass\n",
        "queries.py": "from .join import compute, join\nfrom .kernel import evaluate_rows\n",
        "evaluation.py": "from .join import judgments, join\n",
        "sensitivity.py": "def f(prep):\n    from . import join as j\n\n    return j.compute(prep)\n",
        "engines/spark/buckets.py": "from ...queries import score_queries, query_rows\n",
    }
    root = tmp_path / "ndcg_mlflow"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert sorted(_joiners(root)) == [
        "ndcg_mlflow.engines.spark.buckets:1: ndcg_mlflow.queries.score_queries",
        "ndcg_mlflow.evaluation:1: ndcg_mlflow.join.join",
        "ndcg_mlflow.sensitivity:4: ndcg_mlflow.join.compute",
    ]


def test_import_of_the_core_does_not_import_mlflow_or_the_optional_libraries():
    code = (
        "import sys, ndcg_mlflow, ndcg_mlflow.join, ndcg_mlflow.statistics.sensitivity, "
        "ndcg_mlflow.statistics.comparisons; "
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


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_venv_runs_the_demo(tmp_path):
    """What a user installs: the wheel built from the package's files alone, installed into a new virtual
    environment, runs ``ndcg-mlflow demo`` through its console script in a folder outside the source tree, with its
    C parts where the tree has them; its metadata states the license as an SPDX expression. Nothing is downloaded:
    the dependencies are those of the interpreter running the tests, a virtual environment's or not (a ``.pth``
    file of the new environment names that interpreter's own site-packages folders; ``--system-site-packages``
    would give the base interpreter's, not a venv's)."""
    import os
    import shutil
    import site
    import zipfile
    from importlib.metadata import version as installed

    from ndcg_mlflow.kernel import native_kernel

    if int(installed("setuptools").split(".")[0]) < 77:  # (pyproject.toml's build-system floor)
        pytest.skip("setuptools before 77 here: pip install 'setuptools>=77' (the test extra has it)")
    root = Path(__file__).resolve().parents[1]
    src, dist, venv, work = (tmp_path / name for name in ("src", "dist", "venv", "work"))
    shutil.copytree(root / "ndcg_mlflow", src / "ndcg_mlflow", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy(root / name, src / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(("NDCG_MLFLOW_", "MLFLOW_"))}

    def run(*argv, cwd=tmp_path):
        done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
        assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    pip = ("-m", "pip", "--disable-pip-version-check")
    run(sys.executable, *pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, src)
    (wheel,) = dist.glob("ndcg_mlflow-*.whl")
    with zipfile.ZipFile(wheel) as archive:  # the license as an SPDX expression and its file (PEP 639)
        metadata = archive.read("ndcg_mlflow-0.1.0.dist-info/METADATA").decode().splitlines()
        assert "ndcg_mlflow-0.1.0.dist-info/licenses/LICENSE" in archive.namelist()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert not [line for line in metadata if line.startswith(("License:", "Classifier: License ::"))]
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    ours = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    ours = [p for p in dict.fromkeys(ours) if Path(p).is_dir()]
    purelib = run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    (Path(purelib) / "_running_interpreter.pth").write_text("".join(f"{p}\n" for p in ours), encoding="utf-8")
    run(venv / "bin" / "python", *pip, "install", "--no-deps", "--no-index", "--ignore-installed", wheel)
    work.mkdir()
    where = run(venv / "bin" / "python", "-c", "import ndcg_mlflow; print(ndcg_mlflow.__file__)", cwd=work)
    assert Path(where.strip()).is_relative_to(venv)
    version = run(venv / "bin" / "ndcg-mlflow", "--version", cwd=work)
    if native_kernel() is not None:  # (built in the tree: so in the wheel, with the same compiler)
        assert "C parts: loaded" in version, version
    out = run(venv / "bin" / "ndcg-mlflow", "demo", "--no-mlflow", cwd=work)
    assert "  ndcg-mlflow run ndcg-mlflow-demo/demo.yaml --no-mlflow\n" in out
    assert (work / "ndcg-mlflow-demo" / "demo" / "qrels.tsv").is_file()
    (folder,) = (work / "ndcg_reports").iterdir()
    assert (folder / "summary.json").is_file() and (folder / "report.html").is_file()
