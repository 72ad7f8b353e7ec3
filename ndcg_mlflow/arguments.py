"""The ``ndcg-mlflow`` command line: its commands and their options, and what each command's ``--help`` ends with,
its examples and the exit codes it can return (in the words of :data:`ndcg_mlflow.errors.EXIT_CODES`)."""

from __future__ import annotations

import argparse
import functools
import shutil
import textwrap

from .errors import (
    EXIT_BUG,
    EXIT_CODES,
    EXIT_DECISION,
    EXIT_INTERRUPT,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_TRACKING,
    EXIT_USER,
)
from .rules import KEY_FORMS
from .timings import PHASES

#: the exit codes of a command that does not use MLflow; one that logs to it or reads from it adds 3, ``run`` adds 4
LOCAL = (EXIT_OK, EXIT_BUG, EXIT_USER, EXIT_INTERRUPT, EXIT_TERMINATED)
LOGGING = (*LOCAL, EXIT_TRACKING)

#: each command's exit codes and its examples, a comment and a command line (tests/cli/test_cli.py parses each line with
#: build_parser, so that an example cannot drift from the options)
COMMANDS: dict[str, tuple[tuple[int, ...], tuple[tuple[str, str], ...]]] = {
    "run": (
        (*LOGGING, EXIT_DECISION),
        (
            (
                "a CI gate: the job stops unless the exit code is 0 (4: the spec's decision rule said no)",
                "ndcg-mlflow run eval.yaml --quiet || exit $?",
            ),
            (
                "other cutoffs and more resamples, for this run (recorded in the spec written with the results)",
                "ndcg-mlflow run eval.yaml --set 'metric.cutoffs=[5, 20]' --set uncertainty.resamples=20000",
            ),
            (
                "the same numbers computed by Apache Spark, on a Spark Connect server",
                "ndcg-mlflow run eval.yaml --engine spark --spark-remote sc://spark-host:15002",
            ),
        ),
    ),
    "validate": (
        LOCAL,
        (
            (
                "a CI step before the evaluation: exit 2 stops the job on a bad spec or data file",
                "ndcg-mlflow validate eval.yaml || exit $?",
            ),
            (
                "the spec with another tie rule, its files checked to be there but not read",
                "ndcg-mlflow validate eval.yaml --spec-only --set metric.ties=average",
            ),
        ),
    ),
    "explain": (
        LOCAL,
        (
            ("every resolved choice in words, and how other tools differ", "ndcg-mlflow explain eval.yaml"),
            (
                "also how far each rule's alternatives move the numbers, with linear gains",
                "ndcg-mlflow explain eval.yaml --sensitivity --set metric.gain=linear",
            ),
        ),
    ),
    "upload": (
        LOGGING,
        (
            (
                "log a folder written with --no-mlflow, or one whose logging failed (exit 3), once the server answers",
                "ndcg-mlflow upload ndcg_reports/demo-product-search-20260105-093000-4f1c2a "
                "--tracking-uri http://mlflow.internal:5000",
            ),
            (
                "into an existing MLflow run (a training run, say), with a tag",
                "ndcg-mlflow upload results/ --run-id RUN_ID --tag team=search",
            ),
        ),
    ),
    "report": (
        LOGGING,
        (
            (
                "the report of a logged evaluation (or of one of its systems' runs) from a tracking server",
                "ndcg-mlflow report RUN_ID --tracking-uri http://mlflow.internal:5000",
            ),
            ("into a folder of your choice", "ndcg-mlflow report RUN_ID --out eval-report/"),
        ),
    ),
    "compare": (
        LOGGING,
        (
            (
                "two systems' runs logged earlier, with the statistics of the baseline's evaluation",
                "ndcg-mlflow compare BASELINE_RUN_ID CANDIDATE_RUN_ID",
            ),
            (
                "both tests and more resamples, written locally only",
                "ndcg-mlflow compare BASELINE_RUN_ID CANDIDATE_RUN_ID --test both --resamples 20000 --no-mlflow",
            ),
        ),
    ),
    "plan": (
        LOGGING,
        (
            (
                "the queries a non-inferiority margin of 0.01 needs at 80% power, from an evaluation's output folder",
                "ndcg-mlflow plan ndcg_reports/demo-product-search-20260105-093000-4f1c2a --margin 0.01",
            ),
            (
                "at 90% power and at the cutoff 10 only, from an evaluation logged to a tracking server",
                "ndcg-mlflow plan RUN_ID --margin 0.02 --power 0.9 --key 10 --tracking-uri http://mlflow.internal:5000",
            ),
        ),
    ),
    "demo": (
        LOGGING,
        (
            (
                "write the demo's specs and data into ./ndcg-mlflow-demo/ and evaluate its demo.yaml as 'run' does "
                "(results under ./ndcg_reports/, logged to MLflow)",
                "ndcg-mlflow demo",
            ),
            (
                "only write the files, into another folder, and print the command that evaluates them",
                "ndcg-mlflow demo --dir /tmp/ndcg-demo --no-run",
            ),
            (
                "the same numbers computed by Apache Spark, logging nothing",
                "ndcg-mlflow demo --engine spark --no-mlflow",
            ),
        ),
    ),
    "ui": (
        LOCAL,
        (
            (
                "MLflow's UI on MLflow's default local store, ./mlflow.db, at http://127.0.0.1:5000 (until Ctrl-C)",
                "ndcg-mlflow ui",
            ),
            (
                "the store an evaluation printed, on another port",
                "ndcg-mlflow ui --backend-store-uri sqlite:////home/me/eval/mlflow.db --port 5001",
            ),
        ),
    ),
}


def epilog(name: str) -> str:
    """The end of a command's ``--help``: its examples, then the exit codes it can return and what they mean."""
    codes, examples = COMMANDS[name]
    width = shutil.get_terminal_size().columns - 2  # (as argparse wraps the rest of the help)
    wrap = functools.partial(textwrap.wrap, width=width, break_on_hyphens=False, break_long_words=False)
    lines = ["examples:"]
    for comment, line in examples:
        lines += [*wrap(comment, initial_indent="  # ", subsequent_indent="  # "), f"  {line}"]
    lines += ["", "exit codes:"]
    for code in sorted(codes):
        lines += wrap(EXIT_CODES[code], initial_indent=f"  {code:<5}", subsequent_indent=" " * 7)
    return "\n".join(lines)


class _Version(argparse.Action):
    """``--version``: the version and which C parts are loaded (:func:`ndcg_mlflow.version.version_text`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from .version import version_text

        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ndcg-mlflow",
        description="Spec-driven nDCG evaluation of ranking systems, logged to MLflow.",
        epilog="A first try: 'ndcg-mlflow demo'. Each command's --help ends with examples and its exit codes.",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version and which C parts are loaded, and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help, description=help, epilog=epilog(name), formatter_class=argparse.RawDescriptionHelpFormatter
        )

    run = command("run", "evaluate every system of a spec and log the results to MLflow")
    run.add_argument("spec", help="path to the YAML evaluation spec")
    run.add_argument("--out", metavar="DIR", help="local output folder (default: a new folder under ./ndcg_reports/)")
    run.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, then the spec's mlflow.tracking_uri, "
        "then MLflow's default local store ./mlflow.db)",
    )
    run.add_argument("--no-mlflow", action="store_true", help="write the local results only; log nothing")
    run.add_argument("--quiet", action="store_true", help="print only errors")
    run.add_argument(
        "--timings",
        action="store_true",
        help=f"print on stderr where the wall time went: {', '.join(PHASES)} (the phases that ran), other",
    )
    _set_option(run)
    _tag_option(run)
    run.add_argument(
        "--run-id",
        metavar="RUN_ID",
        help="log into this existing MLflow run (a training run, say) instead of a new evaluation run: "
        "the system runs nest under it",
    )
    run.add_argument(
        "--promote",
        metavar="ALIAS",
        help="when the spec's decision passes and logging completed, move this registry alias to the "
        "candidate's model version (one candidate, a registered model version)",
    )
    run.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="what computes the per-query numbers (the same numbers): this process (local, the default) "
        "or Apache Spark (needs the spark extra and Java 17)",
    )
    run.add_argument(
        "--spark-remote",
        metavar="URL",
        help="with --engine spark: a Spark Connect server "
        "(sc://host:15002; default: a classic session, as "
        "spark-submit or the environment configures it)",
    )
    run.add_argument(
        "--driver-queries",
        metavar="N",
        type=int,
        help="with --engine spark: beyond N evaluated queries (default 5,000,000) the per-query rows "
        "stay in Spark, written as Parquet next to the output folder (OUT.per_query/), and the "
        "statistics come from random groups of queries",
    )
    run.add_argument(
        "--driver-judgments",
        metavar="N",
        type=int,
        help="with --engine spark, beyond --driver-queries: beyond N judgments (default 50,000,000) "
        "the judgments, the evaluated query set and the weights are read and checked in Spark "
        "and stay there (0: always)",
    )

    val = command("validate", "check a spec and read its data files as 'run' would, without running")
    val.add_argument("spec", help="path to the YAML evaluation spec")
    val.add_argument(
        "--spec-only", action="store_true", help="check the spec and that its files exist, without reading them"
    )
    _set_option(val)

    exp = command("explain", "every resolved choice in plain words, and how other tools differ")
    exp.add_argument("spec", help="path to the YAML evaluation spec")
    _set_option(exp)
    exp.add_argument(
        "--sensitivity",
        action="store_true",
        help="also evaluate and show how far each rule's alternatives move every mean and difference",
    )
    exp.add_argument("--quiet", action="store_true", help="no progress messages")

    up = command("upload", "log a finished local result to MLflow (idempotent)")
    up.add_argument("folder", help="the output folder written by 'ndcg-mlflow run'")
    up.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, "
        "then the spec's mlflow.tracking_uri, then ./mlflow.db)",
    )
    up.add_argument("--quiet", action="store_true", help="print only errors")
    up.add_argument(
        "--run-id",
        metavar="RUN_ID",
        help="log into this existing MLflow run instead of a new evaluation run (as 'run --run-id')",
    )
    _tag_option(up)

    rep = command("report", "rebuild the report of a logged evaluation locally")
    rep.add_argument("run_id", help="the evaluation's MLflow run id (or one of its systems' runs)")
    rep.add_argument("--out", metavar="DIR", help="folder for the report (default: ./ndcg_reports/report-RUN_ID)")
    rep.add_argument(
        "--tracking-uri", metavar="URI", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, then ./mlflow.db)"
    )

    cmp_ = command("compare", "compare two systems' runs logged by earlier evaluations")
    cmp_.add_argument("run_a", help="the baseline system's run id (a child run of an evaluation)")
    cmp_.add_argument("run_b", help="the candidate system's run id")
    cmp_.add_argument("--tracking-uri", metavar="URI", help="MLflow tracking URI")
    cmp_.add_argument("--out", metavar="DIR", help="local output folder")
    cmp_.add_argument(
        "--allow-spec-mismatch",
        action="store_true",
        help="compare even when the runs' metric or query definitions differ (the report says so)",
    )
    cmp_.add_argument("--experiment", help="experiment of the new comparison run (default: run A's)")
    cmp_.add_argument("--no-mlflow", action="store_true", help="write the local results only")
    cmp_.add_argument("--quiet", action="store_true", help="print only errors")
    _tag_option(cmp_)
    for flag, kind, what in (
        ("resamples", int, "bootstrap resamples"),
        ("confidence", float, "interval level"),
        ("method", str, "bca | percentile | studentized"),
        ("seed", int, "random seed"),
        ("test", str, "randomization | t_test | both"),
        ("correction", str, "holm | bonferroni | benjamini_hochberg | none"),
        ("wins-losses", int, "largest wins and losses listed"),
        ("tie-tolerance", float, "a |difference| at or below this is a tie"),
    ):
        cmp_.add_argument(f"--{flag}", type=kind, help=f"{what} (default: run A's evaluation's value, else run B's)")

    plan = command(
        "plan",
        "how many queries a comparison needs: the smallest difference its test detects now, and the queries at "
        "which it detects a margin with a given power",
    )
    plan.add_argument(
        "source",
        metavar="FOLDER_OR_RUN_ID",
        help="an evaluation's output folder, or the MLflow run id of an evaluation (or of one of its systems' runs)",
    )
    plan.add_argument(
        "--margin",
        metavar="M",
        type=float,
        required=True,
        help="the difference of nDCG to detect: the distance between the true difference and the threshold the "
        "interval must clear (a non-inferiority margin, for a candidate as good as the baseline)",
    )
    plan.add_argument(
        "--power", metavar="P", type=float, default=0.8, help="the probability of detecting it (default: 0.8)"
    )
    plan.add_argument(
        "--confidence",
        metavar="C",
        type=float,
        help="the two-sided interval's level (default: the evaluation's uncertainty.confidence)",
    )
    plan.add_argument("--key", metavar="KEY", help=f"one compared key: {KEY_FORMS} (default: every compared key)")
    plan.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow tracking URI, for a run id (default: MLFLOW_TRACKING_URI, then ./mlflow.db)",
    )

    demo = command("demo", "write the demo's specs and data into a folder, and evaluate demo.yaml as 'run' does")
    demo.add_argument(
        "--dir",
        metavar="DIR",
        default="ndcg-mlflow-demo",
        help="the folder (default: ./ndcg-mlflow-demo; a file already there must be the demo's, it is not replaced)",
    )
    demo.add_argument("--no-run", action="store_true", help="write the files and print the command that evaluates them")
    demo.add_argument("--no-mlflow", action="store_true", help="write the local results only; log nothing")
    demo.add_argument("--engine", choices=("local", "spark"), default="local", help="as 'run --engine'")
    demo.add_argument("--quiet", action="store_true", help="print only errors")

    ui = command(
        "ui",
        "serve MLflow's UI (mlflow ui) from this tool's own Python environment, wherever it was installed "
        "(pipx too: no mlflow command needed on PATH)",
    )
    ui.add_argument(
        "--backend-store-uri",
        metavar="URI",
        help="the store whose runs it shows, as the 'MLflow UI:' line of run prints it (default: mlflow ui's, "
        "./mlflow.db)",
    )
    ui.add_argument("--host", metavar="HOST", help="the address to listen on (default: mlflow ui's, 127.0.0.1)")
    ui.add_argument("--port", metavar="PORT", type=int, help="the port to listen on (default: mlflow ui's, 5000)")
    ui.add_argument("--workers", metavar="N", type=int, help="the server's worker processes (default: mlflow ui's, 4)")
    return parser


def _set_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a spec field (dotted key path; the value is read as YAML), e.g. "
        "--set metric.cutoffs=[5,10]; repeatable; validated like the file and recorded in the "
        "spec written with the results",
    )


def _tag_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an MLflow tag set on every run logged (after the spec's mlflow.tags); repeatable",
    )
