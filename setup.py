"""The package's C part: the TREC reader's inner loop and the id hashes (ndcg_mlflow/readers/cparse.c).

Optional: where no C compiler is, the install goes on without it and the readers are Arrow's and the line
reader (the same numbers, more slowly). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ndcg_mlflow.readers.cparse", ["ndcg_mlflow/readers/cparse.c"], optional=True,
                             extra_compile_args=["-O2", "-fno-fast-math"])])
