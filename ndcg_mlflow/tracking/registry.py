"""The models of model systems in MLflow's registry and tracking store: resolving a model URI (an alias becomes the
version it points to, once, when the evaluation starts), loading a model, its signature or its files, scoring the
spec's model systems with the local engine, and ``--promote`` (moving an alias, with the compare-and-set MLflow
lacks done by reading it before and after). What needs no mlflow (the resolution's record, the candidates'
columns, the scored rows, the spec-level checks) is :mod:`ndcg_mlflow.models.systems`'s. mlflow is imported lazily,
inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import EXIT_DECISION, NdcgError, SpecError
from ..models.systems import (
    BATCH_ROWS,
    ResolvedModel,
    check_not_itself,
    model_id_of_source,
    model_systems,
    registered_name,
    score_candidates,
    scored_name,
    with_scored,
)
from ..spec import Spec
from ..uris import first_line


def resolve(uri: str, key: str, client: Any) -> ResolvedModel:
    """Resolve a model URI once against the registry and tracking store of ``client``; a missing model, version,
    alias or run is a SpecError naming ``key`` (the spec key of the URI)."""
    from mlflow.exceptions import MlflowException

    try:
        if uri.startswith("models:/m-"):
            model_id = uri[len("models:/") :].rstrip("/")
            lm = client.get_logged_model(model_id)
            return ResolvedModel(
                uri, f"models:/{model_id}", source=lm.model_uri, run_id=lm.source_run_id, model_id=model_id
            )
        if uri.startswith("models:/"):
            rest = uri[len("models:/") :].rstrip("/")
            alias: str | None = None
            if "@" in rest:
                name, _, alias = rest.rpartition("@")
                mv = _alias_version(client, name, alias, key, uri)
            else:
                name, _, version = rest.rpartition("/")
                mv = client.get_model_version(name, version)
            mid = getattr(mv, "model_id", None) or model_id_of_source(mv.source)
            run_id = mv.run_id
            if run_id is None and mid is not None:
                run_id = client.get_logged_model(mid).source_run_id
            return ResolvedModel(
                uri,
                f"models:/{name}/{mv.version}",
                registered_model=name,
                version=str(mv.version),
                alias=alias,
                source=mv.source,
                run_id=run_id,
                model_id=mid,
            )
        run_id, _, path = uri[len("runs:/") :].partition("/")
        run = client.get_run(run_id)
        path = path.strip("/")
        found = client.search_logged_models(
            experiment_ids=[run.info.experiment_id],
            filter_string=f"source_run_id = '{run_id}' AND name = '{path}'"
            if "'" not in path
            else f"source_run_id = '{run_id}'",
        )
        ids = [m.model_id for m in found if m.name == path]
        return ResolvedModel(uri, uri, source=uri, run_id=run_id, model_id=ids[0] if len(ids) == 1 else None)
    except SpecError:
        raise
    except MlflowException as exc:
        code = getattr(exc, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            raise SpecError(key, f"{uri}: {first_line(exc)}") from None
        raise NdcgError(f"at key '{key}': the registry could not resolve {uri}: {first_line(exc)}") from None


def _alias_version(client: Any, name: str, alias: str, key: str, uri: str) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        try:
            aliases = sorted(client.get_registered_model(name).aliases)
        except MlflowException:
            raise SpecError(key, f"{uri}: registered model {name!r} does not exist ({first_line(exc)}).") from None
        known = f"its aliases are {', '.join(aliases)}" if aliases else "it has no aliases"
        raise SpecError(key, f"{uri}: registered model {name!r} has no alias {alias!r} ({known}).") from None


@contextmanager
def using_store(uri: str | None) -> Iterator[None]:
    """MLflow's global tracking URI (which also names the registry, unless one is set apart) set to ``uri`` for
    the duration (``mlflow.pyfunc.load_model`` has no argument for it), then as it was: MLflow's own again
    (``MLFLOW_TRACKING_URI``, else its default) unless one had been set apart from that variable."""
    if uri is None:
        yield
        return
    import os

    import mlflow
    from mlflow.tracking import is_tracking_uri_set

    env = os.environ.get("MLFLOW_TRACKING_URI")
    before = mlflow.get_tracking_uri() if is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        # None: unset, MLflow's own again (set_tracking_uri sets or unsets the variable too; put back below)
        mlflow.set_tracking_uri(None if before == env else before)  # type: ignore[arg-type]
        if env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env


def load_model(uri: str, key: str, tracking_uri: str | None) -> Any:
    """The model ``uri`` loaded by ``mlflow.pyfunc.load_model`` from the store of ``tracking_uri``; a failure is
    an NdcgError naming ``key``."""
    import mlflow.pyfunc

    try:
        with using_store(tracking_uri):
            return mlflow.pyfunc.load_model(uri)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the model's
        raise NdcgError(f"at key '{key}': cannot load {uri}: {type(exc).__name__}: {first_line(exc)}") from None


def signature_columns(uri: str, key: str, tracking_uri: str | None) -> tuple[list[str] | None, bool]:
    """The model's input column names from its signature (None without one, or without names), and whether its
    signature declares a list output (a retriever); read from the model's metadata, without loading it."""
    from mlflow.models import get_model_info

    try:
        with using_store(tracking_uri):
            info = get_model_info(uri)
    except Exception as exc:  # noqa: BLE001 - any failure to read the model's metadata is the model's
        raise NdcgError(
            f"at key '{key}': cannot read the metadata of {uri}: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    sig = info.signature
    if sig is None:
        return None, False
    names = list(sig.inputs.input_names()) if sig.inputs is not None and sig.inputs.has_input_names() else None
    outputs = getattr(sig.outputs, "inputs", None) or []
    listed = any(type(getattr(c, "type", None)).__name__ == "Array" for c in outputs)
    return names, listed


def download_model(uri: str, key: str, folder: Path, tracking_uri: str | None) -> str:
    """The files of the model ``uri`` downloaded into ``folder`` (for Spark's executors to load: the folder is where
    they see the driver's files); their absolute path. A failure is an NdcgError naming ``key``."""
    from mlflow.artifacts import download_artifacts

    try:
        with using_store(tracking_uri):
            local = download_artifacts(artifact_uri=uri, dst_path=str(folder))
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is the model's
        raise NdcgError(
            f"at key '{key}': cannot load {uri} for Spark: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    return str(Path(local).resolve())


_LOADED: dict[str, Any] = {}  # in a process (a Spark Python worker): the model last loaded, by path


def local_model(path: str) -> Any:
    """The model at ``path`` loaded by ``mlflow.pyfunc.load_model``, once per process (the last one kept)."""
    if path not in _LOADED:
        import mlflow.pyfunc

        _LOADED.clear()
        _LOADED[path] = mlflow.pyfunc.load_model(path)
    return _LOADED[path]


def resolve_model_systems(spec: Spec, tracking_uri: str | None) -> dict[str, ResolvedModel]:
    """Every model URI of the spec resolved once against the registry of ``tracking_uri`` (all of them before any
    scoring, so a missing alias stops the evaluation first), by system name."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    resolved = {}
    for name, src in spec.systems:
        if src.unscored:
            assert src.model is not None
            resolved[name] = resolve(src.model, f"data.systems.{name}.model", client)
    check_not_itself(spec, resolved)
    return resolved


def score_model_systems(
    spec: Spec,
    folder: str | Path,
    *,
    tracking_uri: str | None = None,
    progress: Callable[[str], None] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> tuple[Spec, dict[str, ResolvedModel], dict[str, Path]]:
    """Resolve every model URI of the spec (all of them first, so a missing alias stops the evaluation before any
    scoring), then score each model's candidates into ``folder/systems/<stem>.scored.parquet``. Returns the spec
    whose model systems read those files, what each URI resolved to, and the files."""
    names = model_systems(spec)
    if not names:
        return spec, {}, {}
    resolved = resolve_model_systems(spec, tracking_uri)
    scored: dict[str, Path] = {}
    folder = Path(folder)
    for name in names:
        src = dict(spec.systems)[name]
        assert src.candidates is not None
        target = folder / scored_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        key = f"data.systems.{name}"
        rows, written = score_candidates(
            name,
            resolved[name],
            src.candidates,
            target,
            key=key,
            load=partial(load_model, resolved[name].loaded_uri, key, tracking_uri),
            progress=progress,
            batch_rows=batch_rows,
        )
        spec, resolved[name] = with_scored(
            spec, name, resolved[name], candidate_rows=rows, scored_rows=written, target=target
        )
        scored[name] = target
    return spec, resolved, scored


# --------------------------------------------------------------------------- promotion


def alias_version(client: Any, name: str, alias: str) -> str | None:
    """The version ``alias`` of registered model ``name`` points to now, or None when it points to none."""
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException as exc:
        if getattr(exc, "error_code", "") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            return None
        raise


def alias_at_start(spec: Spec, alias: str, tracking_uri: str | None) -> str | None:
    """``--promote ALIAS``: the version the alias points to when the evaluation starts (None: none), read before
    the model URIs are resolved; the alias moves at the end only if it still points there."""
    from mlflow.tracking import MlflowClient

    baseline = spec.comparison.baseline if spec.comparison else None
    uri = next(s.model for n, s in spec.systems if n != baseline)
    assert uri is not None
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    try:
        return alias_version(client, registered_name(uri), alias)
    except Exception as exc:  # noqa: BLE001 - any registry failure, before any work
        raise NdcgError(
            f"--promote {alias}: the registry could not be read for {uri}: {type(exc).__name__}: {first_line(exc)}"
        ) from None


class AliasMoved(NdcgError):
    """``--promote``: the alias was moved by someone else during the evaluation (or as it was moved); it is left
    where it is (exit 4: evaluated and logged, not promoted)."""

    exit_code = EXIT_DECISION


def promote(
    summary: dict, alias: str, evaluation_run_id: str, tracking_uri: str | None, expected: str | None
) -> dict[str, Any]:
    """Move ``alias`` of the candidate's registered model to the candidate's version (the one resolved when the
    evaluation started) and tag that version with the previous holder and the evaluation run, only if the alias
    still points to ``expected``, the version it pointed to when the evaluation started (None: no version).
    MLflow has no compare-and-set of an alias: it is read again just before the move and just after it; an
    alias that moved before is left where it is, and one that moved as it was set is reported (both
    :class:`AliasMoved`, naming the version it points to). The caller calls it only when the decision passed
    and logging completed. Returns what was done."""
    from mlflow.tracking import MlflowClient

    baseline = summary["spec"]["comparison.baseline"]
    candidate = next(n for n in summary["systems"] if n != baseline)
    record = summary["models"][candidate]
    name, version = record["registered_model"], str(record["version"])
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)

    def holder(v: str | None) -> str:
        if v is None:
            return "no version"
        try:
            tags = client.get_model_version(name, v).tags or {}
        except Exception:  # noqa: BLE001 - the version's tags only add who moved it
            tags = {}
        run = tags.get("ndcg_mlflow.evaluation_run") if tags.get("ndcg_mlflow.promoted_alias") == alias else None
        return f"version {v}" + (
            f" (promoted by the evaluation run {run}, its tag ndcg_mlflow.evaluation_run)"
            if run
            else " (its tags do not say who moved it)"
        )

    started = "no version" if expected is None else f"version {expected}"
    for other, rec in summary["models"].items():  # an alias of the spec, resolved to another version than read
        if rec.get("registered_model") == name and rec.get("alias") == alias and str(rec["version"]) != expected:
            raise AliasMoved(
                f"@{alias} of {name} pointed to {started} when the evaluation started, and to version "
                f"{rec['version']} when '{other}' resolved it: it moved during the evaluation, so it "
                f"stays where it is; evaluate again."
            )
    previous = alias_version(client, name, alias)
    if previous != expected:
        raise AliasMoved(
            f"@{alias} of {name} pointed to {started} when the evaluation started and now points to "
            f"{holder(previous)}: it moved during the evaluation, so it stays there (version {version} "
            f"was compared with the baseline of the start); evaluate again."
        )
    client.set_registered_model_alias(name, alias, version)
    after = alias_version(client, name, alias)
    if after != version:
        raise AliasMoved(
            f"@{alias} of {name} was moved to version {version}, and at once by another process: it now "
            f"points to {holder(after)} (a race: MLflow cannot set an alias only if unchanged); it is "
            f"left there, and version {version} was not tagged as promoted."
        )
    for key, value in (
        ("ndcg_mlflow.promoted_alias", alias),
        ("ndcg_mlflow.previous_version", "none" if previous is None else str(previous)),
        ("ndcg_mlflow.evaluation_run", evaluation_run_id),
    ):
        client.set_model_version_tag(name, version, key, value)
    client.set_tag(
        evaluation_run_id,
        "ndcg_mlflow.promoted",
        f"{name} version {version} is now @{alias} (before: "
        f"{'no version' if previous is None else 'version ' + str(previous)})",
    )
    return {
        "registered_model": name,
        "alias": alias,
        "version": str(version),
        "previous_version": None if previous is None else str(previous),
        "evaluation_run": evaluation_run_id,
    }
