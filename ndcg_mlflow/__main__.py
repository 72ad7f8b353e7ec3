"""``python -m ndcg_mlflow``: the ``ndcg-mlflow`` command."""

import sys

from .cli import main

sys.exit(main())
