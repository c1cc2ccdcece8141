"""The MLflow model registry as pucl uses it: model references (NAME, NAME@ALIAS,
NAME/VERSION) resolved to a version with one-line errors, and loading a version as a
pyfunc model."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pucl.errors import PuclError
from pucl.tracking.runs import first_line

CHAMPION = "champion"
_REFERENCE = re.compile(r"^(?P<name>[^@/]+)(?:@(?P<alias>[^@/]+)|/(?P<version>\d+))?$")


class ModelNotFound(PuclError):
    """The model reference names no registered model, alias or version."""


class StoreUnavailable(PuclError):
    """The MLflow store cannot be read (down, locked, not a store)."""


def open_registry(uri: str) -> Any:
    """An MlflowClient on `uri` that has answered once, or one line saying why not."""
    from mlflow.tracking import MlflowClient

    from pucl.tracking.store import _configure_http

    _configure_http()
    if uri.startswith("sqlite:///"):  # reading must not create an empty store on a typo
        from pathlib import Path

        file = Path(uri[len("sqlite:///"):])
        if not file.is_file():
            raise StoreUnavailable(f"MLflow store {uri}: {file} does not exist")
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_registered_models(max_results=1)
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


def load_version(uri: str, name: str, version: str) -> Any:
    """The registered version as an MLflow pyfunc model."""
    import mlflow.pyfunc

    with use_tracking_uri(uri):
        return mlflow.pyfunc.load_model(f"models:/{name}/{version}")


