"""The evaluation spec: schema, validation and the resolved, immutable form.

A spec fixes every choice that changes an nDCG number before any system is
compared. Validation runs before any data is read: unknown keys are errors
(with a "did you mean"), every ``metric`` field and ``queries.weights`` is
required, and each error names the key path and what was expected. Each metric and query rule (its
choices, words, alternatives and resolved form) is declared in :mod:`ndcg_mlflow.rules`.

The package: :mod:`.types` (the frozen dataclasses and the schema's constants), :mod:`.checks` (the checks of one
value), :mod:`.statistics` (the uncertainty, comparison and decision sections), :mod:`.validate` (the other
sections, :func:`parse_spec`), :mod:`.load` (:func:`load_spec`, ``--set`` overrides, the files a spec names),
:mod:`.yamltext` (YAML read safely and the text recorded) and :mod:`.names` (MLflow's naming rules). The path
checks that readers share are in :mod:`ndcg_mlflow.paths`.

Version 1::

    spec_version: 1
    name: demo-product-search
    metric:
      gain: exponential          # exponential | linear | {grade: gain, ...}
      cutoffs: [5, 10, all]
      discount: log2
      ties: displayed_order      # displayed_order | id_ascending | id_descending | average
      ideal: judged_catalog      # judged_catalog | candidates
      empty_ideal: exclude       # exclude | zero | one | error
      unjudged: zero             # zero | condense | error
      missing_queries: zero      # zero | exclude | error
    queries:
      weights: uniform           # uniform | path to a (query_id, weight) file
      set: null                  # optional path to a list of query ids
      segments: segments.tsv     # optional (query_id, segment) file: every evaluated query in one segment
    data:                        # may be left out when the data are given as tables (evaluate_tables)
      qrels: demo/qrels.tsv      # a path (a Parquet folder or glob too), or
                                 # {path: ..., format: trec|csv|tsv|jsonl|parquet, columns: {query_id: ...}}
                                 # or a Delta table: {path: ..., format: delta, version: N}
      systems:
        bm25: demo/bm25.run
      judge_qrels: judge.tsv     # optional: a model's judgments of every evaluated query (with the judge section)
    judge:                       # optional: data.qrels then holds human judgments of a random subset of queries
      estimator: ppi++           # ppi++ | ppi | human_only
      labelled_queries: random   # random | segments
      name: umbrela-v1           # optional: the judge's model and prompt, recorded
    mlflow:
      experiment: demo-product-search
      run_name: nightly            # optional: the evaluation run's name
      tags: {team: search}         # optional: custom tags on every run logged
"""

# the public names of the spec, and of the leaves it re-exports (its names before it became a package)
from ..paths import GLOB_CHARACTERS, dataset_files, file_problem, os_error_problem, shown_path, source_problem  # noqa: F401
from ..rules import METRIC_FIELDS, Gain, cutoff_key, cutoff_label  # noqa: F401
from .load import MAX_SPEC_BYTES, apply_overrides, check_files, load_spec, outside_paths, parse_override  # noqa: F401
from .mlflow_names import (  # noqa: F401
    MAX_EXPERIMENT_NAME,
    MAX_FILE_NAME,
    MAX_MLFLOW_KEY,
    MAX_SYSTEM_NAME,
    MAX_TAG_VALUE,
    PARTIAL_SUFFIX,
    RESERVED_TAG_PREFIXES,
    SYSTEM_FILE_SUFFIXES,
    experiment_name_problem,
    mlflow_key_problem,
    system_file_stem,
    system_name_problem,
    tag_problem,
)
from .types import (  # noqa: F401
    CANDIDATE_COLUMNS,
    CI_METHODS,
    CORRECTIONS,
    DECISION_RULES,
    FORMATS,
    IN_MEMORY,
    MAX_CUTOFF,
    MAX_RESAMPLES,
    QRELS_COLUMNS,
    RISK_ALPHA,
    RUN_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_FORMATS,
    SPEC_VERSION,
    STRATIFY,
    TESTS,
    Companions,
    Comparison,
    Decision,
    Guardrails,
    InMemory,
    Judge,
    Metric,
    MlflowSection,
    Queries,
    RegressionGuardrail,
    Report,
    SegmentGuardrail,
    Source,
    Spec,
    Uncertainty,
)
from .validate import parse_spec  # noqa: F401
from .yamltext import MAX_ALIASES, RECORDED_HEADER, recorded_spec_text  # noqa: F401
