"""The package version (its own module, so that every module can name it without importing the package), and what
``ndcg-mlflow --version`` says: the version and which C parts this install loaded."""

from __future__ import annotations

__version__ = "0.1.0"

#: the C parts (setup.py); where they are not loaded, Arrow and numpy do their work (the same numbers, more slowly)
C_PARTS = ("ndcg_mlflow.readers.cparse", "ndcg_mlflow.ckernel")

VECTOR_CODE = {256: "AVX2, 256-bit vectors", 128: "SSE2, 128-bit vectors", 0: "scalar code"}


def version_text() -> str:
    """``ndcg-mlflow 0.1.0 (Python 3.11.7, Linux x86_64)`` and a line per C part: loaded (the C reader's vector
    code: AVX2, SSE2, or scalar where the CPU has neither or ``NDCG_MLFLOW_SCALAR=1`` says so) or not, and why
    (``NDCG_MLFLOW_PURE_PYTHON=1``, or the import's error: not built where no C compiler was)."""
    import os
    import platform

    head = f"ndcg-mlflow {__version__} (Python {platform.python_version()}, {platform.system()} {platform.machine()})"
    if os.environ.get("NDCG_MLFLOW_PURE_PYTHON", "") not in ("", "0"):
        return f"{head}\nC parts: off (NDCG_MLFLOW_PURE_PYTHON=1): pure Python fallback (Arrow and numpy)"
    status = {name: _status(name) for name in C_PARTS}
    loaded = sum(s.startswith("loaded") for s in status.values())
    state = "loaded" if loaded == len(C_PARTS) else "partly loaded" if loaded else "pure Python fallback"
    width = max(map(len, C_PARTS))
    return "\n".join([head, f"C parts: {state}", *(f"  {name:<{width}}  {status[name]}" for name in C_PARTS)])


def _status(name: str) -> str:
    import importlib

    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return f"not loaded, pure Python fallback: {type(exc).__name__}: {exc}"
    width = getattr(module, "vector_width", None)
    return f"loaded: {VECTOR_CODE.get(width(None), 'vector code')}" if width else "loaded"
