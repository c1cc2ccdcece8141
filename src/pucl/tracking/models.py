"""The MLflow model registry as pucl uses it: model references (NAME, NAME@ALIAS,
NAME/VERSION) resolved to a version with one-line errors, the classifier a pipeline run
logged, and loading either as a pyfunc model."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pucl.errors import PuclError
from pucl.runtime.environment import quiet_defaults
from pucl.tracking.runs import first_line
from pucl.tracking.store import StoreUnavailable, existing_client

CHAMPION = "champion"
_REFERENCE = re.compile(r"^(?P<name>[^@/]+)(?:@(?P<alias>[^@/]+)|/(?P<version>\d+))?$")


class ModelNotFound(PuclError):
    """The model reference names no registered model, alias or version."""


def open_registry(uri: str) -> Any:
    """An MlflowClient on `uri` that has answered once, or one line saying why not."""
    try:
        client = existing_client(uri)
        client.search_registered_models(max_results=1)
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"MLflow store {uri} cannot be used ({first_line(exc)})"
                               ) from None
    return client


@contextmanager
def use_tracking_uri(uri: str) -> Iterator[None]:
    """mlflow's global tracking URI set to `uri` for the block (model loading reads it)."""
    import mlflow

    before = os.environ.get("MLFLOW_TRACKING_URI")
    previous = mlflow.get_tracking_uri() if before is None else before
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)


def parse_reference(reference: str) -> tuple[str, str | None, str | None]:
    """NAME, NAME@ALIAS or NAME/VERSION -> (name, alias, version); bare NAME is the
    champion."""
    match = _REFERENCE.match(reference.strip())
    if not match:
        raise ModelNotFound(f"model {reference!r} is not NAME, NAME@ALIAS or NAME/VERSION "
                            "(e.g. pucl-classifier@champion)")
    alias = match["alias"] or (None if match["version"] else CHAMPION)
    return match["name"], alias, match["version"]


def resolve_version(client: Any, reference: str) -> tuple[str, str]:
    """(name, version number) of a model reference, with a one-line error naming what
    exists when it does not resolve."""
    from mlflow.exceptions import MlflowException

    name, alias, version = parse_reference(reference)
    try:
        model = client.get_registered_model(name)
    except MlflowException:
        names = sorted(m.name for m in client.search_registered_models())
        raise ModelNotFound(f"no registered model {name!r} (registered: "
                            f"{', '.join(names) or 'none yet; run pucl retrain'})") from None
    if alias:
        if alias not in (model.aliases or {}):
            known = sorted(model.aliases or {})
            raise ModelNotFound(f"model {name!r} has no alias {alias!r} (aliases: "
                                f"{', '.join(known) or 'none'})")
        return name, str(model.aliases[alias])
    try:
        client.get_model_version(name, version)
    except MlflowException:
        raise ModelNotFound(f"model {name!r} has no version {version}") from None
    return name, str(version)


class UnsafeModel(PuclError):
    """An MLflow model whose loading could run code that came with it."""


def check_loadable(model_uri: str) -> None:
    """Refuse, before anything of it loads, an MLflow model that could run code of its
    own: pucl loads only what it logs, the pytorch flavour served by mlflow.pytorch with
    no code directory. Its weights MLflow checks to be pickle-free, as pucl runs it with
    unpickling off (pucl.runtime.environment)."""
    from mlflow.models import get_model_info

    quiet_defaults()  # MLflow unpickles nothing in the load that follows
    flavors = get_model_info(model_uri).flavors
    pyfunc, torch_flavor = flavors.get("python_function") or {}, flavors.get("pytorch") or {}
    loader = pyfunc.get("loader_module")
    code = pyfunc.get("code") or torch_flavor.get("code")
    if loader != "mlflow.pytorch" or not torch_flavor or code:
        why = (f"it carries code ({code})" if code else
               f"its flavours are {sorted(flavors)} with loader {loader!r}")
        raise UnsafeModel(f"refused model {model_uri}: {why}, and loading it could run that "
                          "code; pucl loads the pytorch models it logs (allowed: a model "
                          "logged by pucl repro, pucl run or pucl retrain)")


def _load_pyfunc(model_uri: str) -> Any:
    """`model_uri` as a pyfunc model, once `check_loadable` let it through; a model saved
    as a pickle (MLflow's other pytorch format) is refused as MLflow refuses it."""
    import mlflow.pyfunc

    check_loadable(model_uri)
    try:
        return mlflow.pyfunc.load_model(model_uri)
    except Exception as exc:
        if "using pickle is disallowed" not in str(exc):
            raise
        raise UnsafeModel(f"refused model {model_uri}: it is saved as a pickle, and loading "
                          "it could run code from it; log it again as pucl does, as a "
                          "torch.export program (pucl retrain, or pucl repro)") from None


def load_version(uri: str, name: str, version: str) -> Any:
    """The registered version as an MLflow pyfunc model."""
    with use_tracking_uri(uri):
        return _load_pyfunc(f"models:/{name}/{version}")



def load_uri(uri: str, model_uri: str) -> Any:
    """A model by MLflow URI (runs:/RUN_ID/PATH, models:/NAME/VERSION, models:/MODEL_ID)
    as a pyfunc model, or one line saying why not. runs:/RUN_ID also names the
    classifier a pucl run logged: the stage run's own (its `model_uri` tag), or a pipeline
    run's (its evaluate stage's)."""
    if model_uri.startswith("runs:/"):
        model_uri = _logged_by_run(open_registry(uri), model_uri)
    try:
        with use_tracking_uri(uri):
            return _load_pyfunc(model_uri)
    except UnsafeModel:
        raise
    except Exception as exc:  # MlflowException, OSError: whatever the URI named is not there
        raise ModelNotFound(f"model {model_uri} cannot be loaded from {uri} "
                            f"({first_line(exc)})") from None


def _evaluate_model(client: Any, parent: Any) -> str | None:
    """The model URI a pipeline run's evaluate stage logged (None without one)."""
    for stage in client.search_runs(
            [parent.info.experiment_id],
            f"tags.mlflow.parentRunId = '{parent.info.run_id}' and tags.stage = 'evaluate'"):
        if stage.data.tags.get("model_uri"):
            return stage.data.tags["model_uri"]
    return None


def pipeline_run_models(client: Any, name: str) -> list[str]:
    """The URIs of the classifiers logged by pipeline runs named `name` (kind=pipeline,
    their evaluate stage's model), newest first, in every experiment of the store."""
    if "'" in name:
        return []
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents = client.search_runs(
        experiments, f"attributes.run_name = '{name}' and tags.kind = 'pipeline'",
        order_by=["attributes.start_time DESC"])
    return [uri for uri in (_evaluate_model(client, p) for p in parents) if uri]


def _logged_by_run(client: Any, model_uri: str) -> str:
    """The model URI that runs:/RUN_ID[/PATH] stands for: the model the run (or, for a
    pipeline run, its evaluate stage) logged; the URI itself for any other run."""
    run_id = model_uri[len("runs:/"):].split("/", 1)[0]
    try:
        run = client.get_run(run_id)
    except Exception:
        raise ModelNotFound(f"model {model_uri}: no run {run_id!r} in the store") from None
    if run.data.tags.get("model_uri"):
        return run.data.tags["model_uri"]
    if run.data.tags.get("kind") == "pipeline":
        logged = _evaluate_model(client, run)
        if logged is None:
            raise ModelNotFound(f"model {model_uri}: the pipeline run logged no classifier "
                                "(did its evaluate stage finish, with tracking on?)")
        return logged
    return model_uri
