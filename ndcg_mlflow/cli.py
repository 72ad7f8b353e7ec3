"""The ``ndcg-mlflow`` command.

Exit codes: 0 success; 2 a user error (spec, data, a declared rule stopped the
run); 3 the tracking server failed (local results are kept); 4 evaluated and
logged, and the spec's decision rule failed, or ``--promote``'s alias was moved
by someone else during the evaluation and left there (``run`` only); 130 interrupted
(SIGINT), 143 terminated (SIGTERM); 1 an internal error (a bug: the traceback is
printed).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import NdcgError, SpecError, TrackingError
from .terminal import (
    configure_logging,
    format_locations,
    format_summary,
    logged_lines,
    mlflow_ui_hint,
    progress_reporter,
    redacting_streams,
    restore_streams,
    validation_lines,
)
from .version import __version__

log = logging.getLogger("ndcg_mlflow")

EXIT_OK, EXIT_BUG, EXIT_USER, EXIT_TRACKING, EXIT_INTERRUPT, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143
EXIT_DECISION = 4  # everything evaluated, written and logged; the decision rule says no, or --promote's alias moved


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ndcg-mlflow", description="Spec-driven nDCG evaluation of ranking systems, logged to MLflow."
    )
    parser.add_argument("--version", action="version", version=f"ndcg-mlflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="evaluate every system of a spec and log the results to MLflow")
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

    val = sub.add_parser("validate", help="check a spec and read its data files as 'run' would, without running")
    val.add_argument("spec", help="path to the YAML evaluation spec")
    val.add_argument(
        "--spec-only", action="store_true", help="check the spec and that its files exist, without reading them"
    )
    _set_option(val)

    exp = sub.add_parser("explain", help="every resolved choice in plain words, and how other tools differ")
    exp.add_argument("spec", help="path to the YAML evaluation spec")
    _set_option(exp)
    exp.add_argument(
        "--sensitivity",
        action="store_true",
        help="also evaluate and show how far each rule's alternatives move every mean and difference",
    )
    exp.add_argument("--quiet", action="store_true", help="no progress messages")

    up = sub.add_parser("upload", help="log a finished local result to MLflow (idempotent)")
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

    rep = sub.add_parser("report", help="rebuild the report of a logged evaluation locally")
    rep.add_argument("run_id", help="the evaluation's MLflow run id (or one of its systems' runs)")
    rep.add_argument("--out", metavar="DIR", help="folder for the report (default: ./ndcg_reports/report-RUN_ID)")
    rep.add_argument(
        "--tracking-uri", metavar="URI", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, then ./mlflow.db)"
    )

    cmp_ = sub.add_parser("compare", help="compare two systems' runs logged by earlier evaluations")
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
        cmp_.add_argument(f"--{flag}", type=kind, help=f"{what} (default: run A's evaluation's value)")
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


def _tags(args: argparse.Namespace) -> dict[str, str]:
    """``--tag KEY=VALUE`` options, each checked as the spec's ``mlflow.tags`` are (exit 2 naming the option);
    the values without credentials (:func:`ndcg_mlflow.uris.redact`), as the spec's are recorded."""
    from .spec import tag_problem
    from .uris import redact

    tags: dict[str, str] = {}
    for text in getattr(args, "tag", None) or []:
        key, sep, value = text.partition("=")
        if not sep:
            raise NdcgError(f"--tag {text!r}: expected KEY=VALUE, such as --tag team=search.")
        problem = tag_problem(key, value)
        if problem:
            raise NdcgError(f"--tag {text!r}: {problem}")
        tags[key] = redact(value)
    return tags


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USER
    configure_logging(quiet=getattr(args, "quiet", False))
    previous = _on_sigterm()
    streams = redacting_streams()  # no credential in a URI reaches stdout or stderr, whoever prints it
    thresholds = _fewer_collections()
    try:
        _check_overrides(args)
        _tags(args)  # refused before any work
        commands = {
            "run": cmd_run,
            "validate": cmd_validate,
            "explain": cmd_explain,
            "report": cmd_report,
            "compare": cmd_compare,
            "upload": cmd_upload,
        }
        return commands[args.command](args)
    except NdcgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPT
    except _terminated() as exc:  # noqa: F841
        print("terminated", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        _restore_sigterm(previous)
        restore_streams(streams)
        gc.set_threshold(*thresholds)


#: the young generation of Python's cycle collector during a command (Python's default: 700 allocations)
YOUNG_GENERATION = 10_000


def _fewer_collections() -> tuple[int, ...]:
    """Raise the collector's first threshold for the command; the thresholds before, to restore.

    A ``run`` imports pandas, mlflow and its SQL store (SQLAlchemy, alembic): hundreds of thousands of objects
    that live as long as the process. With the default threshold the collector ran about 740 times in the CLI
    run of the 7M-line benchmark, passes over all of them among those, 0.5 s of CPU in a 3 s run; with 10,000
    it runs about 50 times, 0.1-0.2 s. Nothing the command computes depends on when cycles are collected."""
    before = gc.get_threshold()
    if before[0] > 0:  # (0: automatic collection turned off, and left so)
        gc.set_threshold(max(before[0], YOUNG_GENERATION), *before[1:])
    return before


def _check_overrides(args: argparse.Namespace) -> None:
    """Command-line values that MLflow would refuse only after the work is done: refused before any work
    (exit 2). A tracking URI must name a store that persists; an experiment name must fit MLflow's limit."""
    from .spec import experiment_name_problem
    from .uris import store_problem

    uri_flag = getattr(args, "tracking_uri", None)
    for where, uri in (
        ("--tracking-uri", uri_flag),
        ("MLFLOW_TRACKING_URI", None if uri_flag else os.environ.get("MLFLOW_TRACKING_URI")),
    ):
        uses_store = args.command in ("run", "upload", "report", "compare") and not getattr(args, "no_mlflow", False)
        problem = store_problem(uri) if uses_store else None
        if problem:
            raise NdcgError(f"{where}: {problem}")
    experiment = getattr(args, "experiment", None)
    if experiment is not None:
        problem = experiment_name_problem(experiment) or (None if experiment.strip() else "it is empty.")
        if problem:
            raise SpecError("mlflow.experiment", f"--experiment: {problem}")


def _terminated():
    from .tracking import Terminated

    return Terminated


def _on_sigterm():
    """SIGTERM ends the command like SIGINT does: runs being logged end KILLED, the exit code is non-zero."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise _terminated()()

    try:
        return signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return None


def _restore_sigterm(previous) -> None:
    import signal

    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except (ValueError, OSError):
            pass


def cmd_validate(args: argparse.Namespace) -> int:
    from .spec import check_files, load_spec

    spec = load_spec(args.spec, overrides=args.set)
    problems = check_files(spec)
    if problems:
        raise SpecError("", "; ".join(problems), args.spec)
    read = None if args.spec_only else _read_data(spec)
    print(*validation_lines(args.spec, spec, read), sep="\n")
    return EXIT_OK


def _read_data(spec) -> list[str]:
    """Every data file of a spec read and checked as the local engine's run reads and checks it (the join and
    the metric's error rules included, no statistics): the rows read from each, or the run's own error. A
    model's candidates are checked when it is scored, by 'run'."""
    import dataclasses

    from .evaluation import evaluate

    scored = tuple((n, s) for n, s in spec.systems if not s.unscored)
    result = evaluate(
        dataclasses.replace(spec, systems=scored, uncertainty=None, comparison=None, decision=None, report=None)
    )
    return [f"{f.role}: {f.rows} rows read from {f.declared}" for f in result.files]


def cmd_explain(args: argparse.Namespace) -> int:
    from .explain import explain
    from .spec import load_spec

    spec = load_spec(args.spec, overrides=args.set)
    print(explain(spec))
    if args.sensitivity:
        from .api import evaluate
        from .sensitivity import format_sensitivity, sensitivity

        result = evaluate(spec, progress=progress_reporter(args.quiet), keep_data=True)
        table = result.sensitivity if result.sensitivity is not None else sensitivity(result)
        for label in table["cutoff"].drop_duplicates():
            print()
            print(format_sensitivity(table, label))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    import tempfile
    import uuid

    from .api import evaluate
    from .outputs.folder import check_target, folder_lock
    from .outputs.write import new_output_dir, per_query_home, previous_per_query, remove_per_query, write_outputs

    quiet = args.quiet
    if args.out:
        check_target(Path(args.out))  # a file, or a non-empty folder that is not ours: refused before evaluating
    from .spec import load_spec

    progress = progress_reporter(quiet)

    if args.spark_remote and args.engine != "spark":
        raise SpecError("--spark-remote", "applies to --engine spark.")
    if args.driver_queries is not None and (args.engine != "spark" or args.driver_queries < 0):
        raise SpecError("--driver-queries", "applies to --engine spark and is a number of queries (0 or more).")
    if args.driver_judgments is not None and (args.engine != "spark" or args.driver_judgments < 0):
        raise SpecError("--driver-judgments", "applies to --engine spark and is a number of judgments (0 or more).")
    spec = load_spec(args.spec, overrides=args.set)
    for flag, value in (("--run-id", args.run_id), ("--promote", args.promote)):
        if value is not None and args.no_mlflow:
            raise SpecError(flag, "logs to MLflow, and --no-mlflow logs nothing.")
    if args.promote is not None:
        from .models import promotion_problem

        problem = promotion_problem(spec, args.promote)
        if problem:
            raise SpecError("--promote", problem)
    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or spec.mlflow.tracking_uri
    expected = None  # --promote: the version the alias points to as the evaluation starts; it moves only from there
    if args.promote is not None:
        from .tracking.registry import alias_at_start

        expected = alias_at_start(spec, args.promote, uri)
    # a model's scored rows wait here until write_outputs puts them in the output folder
    with tempfile.TemporaryDirectory(prefix="ndcg-mlflow-scored-") as scoring:
        if args.engine == "spark":
            from .engines import Spark
            from .engines.spark import session

            out_dir = Path(args.out) if args.out else new_output_dir(spec.name)
            # models are scored on Spark first; the session starts once their URIs resolve (a missing alias or
            # model stops before Spark starts)
            models = any(src.unscored for _, src in spec.systems)
            spark = (lambda: session(args.spark_remote)) if models else session(args.spark_remote)
            # beyond the driver limit the per-query table goes to a new folder next to the output folder
            pq_path = per_query_home(out_dir) / uuid.uuid4().hex[:12]
            try:
                engine = Spark(
                    spark,
                    driver_queries=args.driver_queries,
                    per_query_path=pq_path,
                    driver_judgments=args.driver_judgments,
                )
                result = evaluate(
                    spec, progress=progress, engine=engine, tracking_uri=uri, scored_dir=scoring if models else None
                )
            except BaseException:  # the engine removed its own folder; the home goes when left empty
                remove_per_query(out_dir, pq_path)
                raise
        else:
            result = evaluate(spec, progress=progress, tracking_uri=uri, scored_dir=scoring)
            out_dir = Path(args.out) if args.out else new_output_dir(result.spec.name)
        # one process at a time per folder, from writing until logging ends: what is logged is what was written
        with folder_lock(out_dir):
            progress(f"writing the local results and the report to {out_dir}")
            replaced = previous_per_query(out_dir)
            try:
                write_outputs(result, out_dir)  # a new folder with a new run key, put in place of --out whole
            except BaseException:  # beyond the driver limit: no folder refers to the new per-query table, it goes
                remove_per_query(out_dir, result.per_query_path)
                raise
            remove_per_query(out_dir, replaced)
            if not quiet:
                print(format_summary(result))
                print()
                print(format_locations(out_dir))
                if result.per_query_path is not None:
                    print(f"per-query table (Parquet): {result.per_query_path}")
            if args.no_mlflow:
                return _decision_exit(result, quiet)

            from .tracking import log_evaluation

            logged = log_evaluation(result, out_dir, tracking_uri=uri, tags=_tags(args), run_id=args.run_id)
    return _logged_exit(result, logged, args, expected)


def _logged_exit(result, logged, args: argparse.Namespace, expected: str | None) -> int:
    """The end of ``run`` once the result is logged: where it was logged, ``--promote``, the exit code."""
    if not args.quiet:
        print(*logged_lines(logged, None if args.run_id else result.spec.mlflow.experiment), sep="\n")
    if args.promote is not None and not _promote(result, args.promote, logged, args.quiet, expected):
        return EXIT_DECISION
    return _decision_exit(result, args.quiet)


def _promote(result, alias: str, logged, quiet: bool, expected: str | None) -> bool:
    """``--promote``: reached only when evaluating, writing and logging all completed; the alias moves only when
    the decision passed and the alias still points to ``expected``, the version it pointed to when the evaluation
    started. False when it was moved by someone else meanwhile (said on stderr; exit 4, as a failed decision). A
    registry failure is a tracking failure (exit 3)."""
    from .tracking.registry import AliasMoved, promote

    if result.decision is None or result.decision["outcome"] != "pass":
        print(f"not promoted: the decision failed, so @{alias} stays where it is", file=sys.stderr)
        return True
    try:
        done = promote(result.summary, alias, logged.parent_run_id, logged.tracking_uri, expected)
    except AliasMoved as exc:
        print(f"not promoted: {exc}", file=sys.stderr)
        return False
    except Exception as exc:  # noqa: BLE001 - any registry failure, said in one line
        from .uris import first_line

        raise TrackingError(
            f"the evaluation passed and is logged (run {logged.parent_run_id}), but moving the alias "
            f"@{alias} failed: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    if not quiet:
        before = done["previous_version"]
        print(
            f"promoted: {done['registered_model']} version {done['version']} is now @{alias} "
            f"(before: {'no version' if before is None else 'version ' + before})"
        )
    return True


def _decision_exit(result, quiet: bool) -> int:
    """Exit code 4 when the spec declares a decision and it fails, 0 otherwise. The summary printed says why;
    with --quiet the decision's line still goes to stderr, so a CI log shows why the job failed."""
    if result.decision is None or result.decision["outcome"] == "pass":
        return EXIT_OK
    if quiet:
        from .decision import summary_line

        print(f"ndcg-mlflow: {summary_line(result.decision, result.summary.get('models'))}", file=sys.stderr)
    return EXIT_DECISION


def cmd_upload(args: argparse.Namespace) -> int:
    from .outputs.folder import folder_lock, read_result_folder, refuse_non_folder

    folder = Path(args.folder)
    refuse_non_folder(folder)
    with folder_lock(folder):  # a second upload of the folder waits, then finds this one complete
        summary = read_result_folder(folder).summary  # complete and unchanged, else exit 2 saying what is wrong
        from .tracking import log_folder

        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        logged = log_folder(folder, tracking_uri=uri, tags=_tags(args), run_id=args.run_id)
    if not args.quiet:
        experiment = None if args.run_id else summary.get("mlflow", {}).get("experiment") or summary["name"]
        print(*logged_lines(logged, experiment), sep="\n")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from .outputs.folder import check_target
    from .tracking import rebuild_report

    out = Path(args.out) if args.out else Path("ndcg_reports") / f"report-{args.run_id}"
    check_target(out)  # not a folder (/dev/null), or a non-empty folder that is not ours: exit 2 at once
    html_path, md_path = rebuild_report(args.run_id, out, args.tracking_uri)
    print(f"report: {html_path.resolve()}")
    print(f"summary: {md_path.resolve()}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from .tracking import compare_runs

    overrides = {
        "resamples": args.resamples,
        "confidence": args.confidence,
        "method": args.method,
        "seed": args.seed,
        "test": args.test,
        "correction": args.correction,
        "wins_losses": args.wins_losses,
        "tie_tolerance": args.tie_tolerance,
    }
    if not args.quiet:
        log.info(f"comparing run {args.run_b} (candidate) with run {args.run_a} (baseline)")
    result, out_dir, new_run = compare_runs(
        args.run_a,
        args.run_b,
        tracking_uri=args.tracking_uri,
        out=args.out,
        allow_spec_mismatch=args.allow_spec_mismatch,
        overrides=overrides,
        log=not args.no_mlflow,
        experiment=args.experiment,
        tags=_tags(args),
    )
    if not args.quiet:
        print(format_summary(result))
        print()
        print(format_locations(out_dir))
        if new_run:
            from .tracking import default_tracking_uri

            print(f"comparison run: {new_run}")
            uri = args.tracking_uri or default_tracking_uri()
            print(mlflow_ui_hint(uri, None, new_run))
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
