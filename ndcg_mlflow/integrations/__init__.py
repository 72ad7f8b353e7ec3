"""MLflow's own evaluation entry points, under the spec's definition.

* :mod:`.evaluator`: the ``mlflow.model_evaluator`` entry point ``ndcg_spec``, for
  ``mlflow.models.evaluate(model, data, model_type="ranker" | "retriever", evaluators="ndcg_spec",
  evaluator_config={"spec": "eval.yaml"})``.
* :mod:`.genai`: a scorer for ``mlflow.genai.evaluate`` (nDCG@K of a trace's retriever span against graded
  expectations) and the paired comparison of two GenAI evaluation runs.

Both import mlflow inside their functions only; importing this package imports no mlflow.
"""
