"""The package's C parts: the TREC reader's inner loop and the id hashes (ndcg_mlflow/readers/cparse.c), and the
passes over a table's rows for the readers, the join and the kernel (ndcg_mlflow/ckernel.c).

Optional: where no C compiler is, the install goes on without them and the readers are Arrow's and the line
reader, the passes numpy's (the same numbers, more slowly). Everything else is in pyproject.toml.

Warnings: ``NDCG_MLFLOW_STRICT_C=1`` in the environment of the build (.ci/run and tools/sanitize.sh set it) adds
``-Wall -Wextra -Werror`` and makes the extensions required, so that a warning fails the build instead of
leaving the package without its C parts. A user's install has neither: the code is clean under gcc's -Wall -Wextra
today, but a newer compiler may add a warning, and an install must not lose its C parts, nor fail, for that.
"""

import os

from setuptools import Extension, setup

STRICT = os.environ.get("NDCG_MLFLOW_STRICT_C", "") not in ("", "0")
FLAGS = ["-O2", "-fno-fast-math"] + (["-Wall", "-Wextra", "-Werror"] if STRICT else [])  # (IEEE doubles)

HEADERS = ["ndcg_mlflow/cbuffers.h"]  # (shared by both; MANIFEST.in puts it in the source distribution)

setup(
    ext_modules=[
        Extension(name, [source], optional=not STRICT, extra_compile_args=FLAGS, depends=HEADERS)
        for name, source in [
            ("ndcg_mlflow.readers.cparse", "ndcg_mlflow/readers/cparse.c"),
            ("ndcg_mlflow.ckernel", "ndcg_mlflow/ckernel.c"),
        ]
    ]
)
