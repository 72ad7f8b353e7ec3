"""The package's C parts: the TREC reader's inner loop and the id hashes (ndcg_mlflow/readers/cparse.c), and
three passes over a run's rows for the join and the kernel (ndcg_mlflow/ckernel.c).

Optional: where no C compiler is, the install goes on without it and the readers are Arrow's and the line
reader (the same numbers, more slowly). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

FLAGS = ["-O2", "-fno-fast-math"]  # (IEEE doubles, as numpy's and Python's)

HEADERS = ["ndcg_mlflow/cbuffers.h"]  # (shared by both; MANIFEST.in puts it in the source distribution)

setup(
    ext_modules=[
        Extension(
            "ndcg_mlflow.readers.cparse",
            ["ndcg_mlflow/readers/cparse.c"],
            optional=True,
            extra_compile_args=FLAGS,
            depends=HEADERS,
        ),
        Extension(
            "ndcg_mlflow.ckernel", ["ndcg_mlflow/ckernel.c"], optional=True, extra_compile_args=FLAGS, depends=HEADERS
        ),
    ]
)
