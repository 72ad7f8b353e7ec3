"""The ``ndcg-mlflow`` command: ``main(argv) -> int`` and one function per command. The parser and each command's
help are in :mod:`ndcg_mlflow.arguments`, the exit codes and their meanings in :data:`ndcg_mlflow.errors.EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .arguments import build_parser
from .errors import (
    EXIT_BUG,  # noqa: F401 - (every exit code importable from here, as before)
    EXIT_DECISION,
    EXIT_INTERRUPT,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_TRACKING,  # noqa: F401
    EXIT_USER,
    NdcgError,
    SpecError,
    TrackingError,
)
from .render.terminal import (
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
from .timings import phase, recording

log = logging.getLogger("ndcg_mlflow")


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
            "plan": cmd_plan,
            "upload": cmd_upload,
            "demo": cmd_demo,
            "ui": cmd_ui,
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
        uses_store = args.command in ("run", "upload", "report", "compare", "demo") and not getattr(
            args, "no_mlflow", False
        )
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

    from .engines import Inputs, Local
    from .engines.local.pipeline import evaluate

    scored = tuple((n, s) for n, s in spec.systems if not s.unscored)
    if spec.judge is not None:  # both judgments read, and the labelled queries checked, as 'run' does
        from .engines import Local
        from .engines.with_judge import evaluate as evaluate_judged

        judged = dataclasses.replace(spec, systems=scored, decision=None, report=None)
        result = evaluate_judged(Local(), judged, Inputs())
        return [f"{f.role}: {f.rows} rows read from {f.declared}" for f in result.files]
    result = evaluate(
        Local(),
        dataclasses.replace(spec, systems=scored, uncertainty=None, comparison=None, decision=None, report=None),
        Inputs(),
    )
    lines = [f"{f.role}: {f.rows} rows read from {f.declared}" for f in result.files]
    if spec.decision is not None and spec.comparison is not None and spec.uncertainty is not None:
        from .render.words import undetectable_message
        from .statistics.comparisons import planned_detection

        found = (undetectable_message(*planned, spec.decision) for planned in planned_detection(result, spec))
        lines += [f"warning: {w}" for w in found if w]
    return lines


def cmd_explain(args: argparse.Namespace) -> int:
    from .render.explain import explain
    from .spec import load_spec

    spec = load_spec(args.spec, overrides=args.set)
    print(explain(spec))
    if args.sensitivity:
        from .api import evaluate
        from .engines import Local
        from .render.command_text import format_sensitivity
        from .statistics.sensitivity import sensitivity

        result = evaluate(spec, progress=progress_reporter(args.quiet), engine=Local(keep_data=True))
        table = result.sensitivity if result.sensitivity is not None else sensitivity(result)
        for label in table["cutoff"].drop_duplicates():
            print()
            print(format_sensitivity(table, label))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    if not args.timings:
        return _run(args)
    with recording() as timings:
        code = _run(args)
    print(timings.format(), file=sys.stderr)
    return code


def _run(args: argparse.Namespace) -> int:
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
        from .models.systems import promotion_problem

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
                with phase("outputs"):
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

            with phase("logging"):
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
        from .render.words import summary_line

        summary = result.summary
        print(f"ndcg-mlflow: {summary_line(summary['decision'], summary.get('models'))}", file=sys.stderr)
    return EXIT_DECISION


def cmd_demo(args: argparse.Namespace) -> int:
    """The demo's files written into ``--dir``, then ``run`` on its spec, the command line printed first (or only,
    with ``--no-run``)."""
    import shlex

    from .demo import write_demo

    spec = write_demo(Path(args.dir))
    flags = [f for f, on in (("--no-mlflow", args.no_mlflow), ("--quiet", args.quiet)) if on]
    argv = ["run", str(spec), *flags, *(["--engine", args.engine] if args.engine != "local" else [])]
    if args.no_run or not args.quiet:
        print(f"the demo's specs and data are in {spec.parent}/; {'evaluate them' if args.no_run else 'running'}:")
        print(f"  ndcg-mlflow {shlex.join(argv)}")
    return EXIT_OK if args.no_run else cmd_run(build_parser().parse_args(argv))


def ui_command(args: argparse.Namespace) -> list[str]:
    """``mlflow ui`` with ``ui``'s options, run by this interpreter (``python -m mlflow``): the tool's own
    environment has mlflow, while the ``mlflow`` command may not be on PATH (``pipx install`` puts only the
    tool's commands there)."""
    argv = [sys.executable, "-m", "mlflow", "ui"]
    for flag in ("--backend-store-uri", "--host", "--port", "--workers"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            argv += [flag, str(value)]
    return argv


def cmd_ui(args: argparse.Namespace) -> int:
    """MLflow's UI until it stops (Ctrl-C: exit 130); an exit of its own that is not 0 (a port in use, a store
    it cannot open: its message printed above) is exit 2. Interrupted or terminated, the tool waits for it to
    stop (Ctrl-C reaches both), then asks it to (SIGTERM), then ends it, so that no server is left behind."""
    import shlex
    import subprocess

    argv = ui_command(args)
    proc = subprocess.Popen(argv)
    try:
        code = proc.wait()
    except BaseException:
        for ask in (None, proc.terminate, proc.kill):
            if ask is not None:
                ask()
            try:
                proc.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        raise
    if code != 0:
        raise NdcgError(f"mlflow ui exited with code {code} (its messages are above): {shlex.join(argv)}")
    return EXIT_OK


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


def cmd_plan(args: argparse.Namespace) -> int:
    """The planning table of an evaluation (an output folder, or a logged run's artifacts downloaded into a
    temporary folder): :func:`ndcg_mlflow.outputs.plan_source.plan_evaluation`, printed by
    :func:`~ndcg_mlflow.render.command_text.format_plan`."""
    import math
    import re
    import tempfile

    from .errors import DataError
    from .outputs.plan_source import plan_evaluation
    from .render.command_text import format_plan

    if not (math.isfinite(args.margin) and args.margin > 0):
        raise NdcgError(f"--margin {args.margin:g}: expected a positive difference of nDCG, such as --margin 0.01.")
    if not 0 < args.power < 1:
        raise NdcgError(f"--power {args.power:g}: expected a probability strictly between 0 and 1, such as 0.8.")
    if args.confidence is not None and not 0 < args.confidence < 1:
        raise NdcgError(f"--confidence {args.confidence:g}: expected a level strictly between 0 and 1, such as 0.95.")
    options = dict(margin=args.margin, power=args.power, confidence=args.confidence, key=args.key)
    folder = Path(args.source)
    if folder.exists():
        plan = plan_evaluation(folder, **options)
    elif re.fullmatch(r"[0-9a-fA-F]{32}", args.source):
        from .tracking.compare import download_evaluation

        with tempfile.TemporaryDirectory(prefix="ndcg-mlflow-plan-") as tmp:
            download_evaluation(args.source, Path(tmp), args.tracking_uri)
            plan = plan_evaluation(Path(tmp), **options, shown=f"MLflow run {args.source}")
    else:
        raise DataError(
            folder,
            "no such folder, and not an MLflow run id (32 hexadecimal digits): give the output folder of an "
            "evaluation or the id of its MLflow run.",
        )
    print(format_plan(plan))
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
