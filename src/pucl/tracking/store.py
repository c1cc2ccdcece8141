"""An MLflow tracking store and one experiment in it: opening it (or saying once that
tracking is off), creating runs, reading them back, and the model registry."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pucl.errors import PuclError, did_you_mean
from pucl.runtime.environment import quiet_defaults
from pucl.runtime.interrupts import run_status
from pucl.tracking.location import standard_tags
from pucl.tracking.runs import TRACKING_ENV, Run, first_line, tracking_disabled, warn

# Which process holds a run open: "host:pid:start time", so a run whose process is gone
# can be told from one still running (Store.reap_orphans); ORPHAN_TAG marks what it closed.
OWNER_TAG, ORPHAN_TAG = "pucl_owner", "orphan"


def process_id(pid: int | None = None) -> str:
    """This process's (or `pid`'s) OWNER_TAG value."""
    import psutil

    started = psutil.Process(pid).create_time()
    return f"{socket.gethostname()}:{pid or os.getpid()}:{started:.3f}"


def owner_alive(owner: str) -> bool:
    """Whether the process an OWNER_TAG value names still runs (on this machine: the same
    pid started at the same time, so a reused pid is not taken for it)."""
    import psutil

    try:
        _, pid, started = owner.rsplit(":", 2)
        return abs(psutil.Process(int(pid)).create_time() - float(started)) < 0.01
    except (ValueError, psutil.Error):
        return False


@dataclass
class RunRecord:
    """A run read back from the store (plain data, for tables and tests)."""

    run_id: str
    name: str
    status: str
    start_time: int
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    end_time: int | None = None  # ms since the epoch; None while running

    @property
    def parent_id(self) -> str | None:
        return self.tags.get("mlflow.parentRunId")

    @property
    def minutes(self) -> float | None:
        """Wall-clock minutes from start to end (None while running)."""
        return (self.end_time - self.start_time) / 60000 if self.end_time else None

    @classmethod
    def of(cls, run: Any) -> RunRecord:
        """From an mlflow.entities.Run."""
        return cls(run.info.run_id, run.info.run_name or "", run.info.status,
                   run.info.start_time or 0, dict(run.data.params), dict(run.data.metrics),
                   dict(run.data.tags), run.info.end_time)


class Store:
    """An MLflow tracking store and one experiment in it."""

    def __init__(self, client: Any, experiment_id: str, uri: str):
        self.client = client
        self.experiment_id = experiment_id
        self.uri = uri

    def start_run(self, name: str, tags: Mapping[str, Any], parent_run_id: str | None) -> Run:
        """A new run, owned by this process (OWNER_TAG) unless `tags` name its owner."""
        all_tags = {"mlflow.runName": name, OWNER_TAG: process_id(), **tags}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id, run_name=name,
                                     tags={k: str(v) for k, v in all_tags.items()})
        return Run(self.client, run.info.run_id, self.uri)

    def attach(self, run_id: str) -> Run:
        return Run(self.client, run_id, self.uri)

    def reap_orphans(self) -> list[str]:
        """Close the runs left RUNNING by a process of this machine that is gone (killed
        with SIGKILL, or the machine restarted): KILLED, tagged `orphan=true`. Runs owned
        by a live process, by another machine, or with no owner are left alone. Returns
        the ids closed."""
        host = socket.gethostname()
        reaped = []
        for run in self.runs(f"attributes.status = 'RUNNING' and "
                             f"tags.{OWNER_TAG} LIKE '{host}:%'"):
            if not owner_alive(run.tags[OWNER_TAG]):
                handle = self.attach(run.run_id)
                handle.set_tags({ORPHAN_TAG: "true"})
                handle.finish("KILLED")
                reaped.append(run.run_id)
        return reaped

    def close_left_running(self, run_id: str, reason: str) -> list[str]:
        """Close a run left RUNNING by a process known to be gone, and its RUNNING child
        runs, deepest first: KILLED, tagged `orphan=true` and `orphan.reason`. Returns the
        ids closed."""
        closed = []
        for child in self.children(run_id):
            if child.status == "RUNNING":
                closed += self.close_left_running(child.run_id, reason)
        handle = self.attach(run_id)
        handle.set_tags({ORPHAN_TAG: "true", f"{ORPHAN_TAG}.reason": reason})
        handle.finish("KILLED")
        return [*closed, run_id]

    def runs(self, filter_string: str = "", experiment_ids: list[str] | None = None
             ) -> list[RunRecord]:
        from mlflow.entities import ViewType

        found = self.client.search_runs(experiment_ids or [self.experiment_id],
                                        filter_string=filter_string,
                                        run_view_type=ViewType.ACTIVE_ONLY,
                                        max_results=50000, order_by=["attributes.start_time ASC"])
        return [RunRecord.of(r) for r in found]

    def children(self, run_id: str) -> list[RunRecord]:
        return self.runs(f"tags.mlflow.parentRunId = '{run_id}'")

    def get(self, run_id: str) -> RunRecord:
        return RunRecord.of(self.client.get_run(run_id))

    def artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        """Artifact paths of a run, recursively."""
        out = []
        for item in self.client.list_artifacts(run_id, path):
            out.extend(self.artifacts(run_id, item.path) if item.is_dir else [item.path])
        return out

    # -- model registry ------------------------------------------------------------------

    def register_model(self, name: str, model_id: str, run_id: str,
                       tags: Mapping[str, Any]) -> str:
        """A new version of registered model `name` from a logged model; its number."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(name)
        except MlflowException:
            self.client.create_registered_model(
                name, description="PU classifiers registered by the pucl retrain flow")
        version = self.client.create_model_version(
            name, f"models:/{model_id}", run_id=run_id, model_id=model_id,
            tags={k: str(v) for k, v in tags.items()})
        return str(version.version)

    def version_for_alias(self, name: str, alias: str) -> Any | None:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version_by_alias(name, alias)
        except MlflowException:
            return None

    def versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of a registered model, oldest first, as plain data: version,
        creation time (ms), tags, and the aliases pointing at it."""
        model = self.client.get_registered_model(name)
        aliases: dict[str, list[str]] = {}
        for alias, version in (model.aliases or {}).items():
            aliases.setdefault(str(version), []).append(alias)
        found = self.client.search_model_versions(f"name = '{name}'")
        return sorted(({"version": int(v.version), "created": v.creation_timestamp,
                        "tags": dict(v.tags), "aliases": aliases.get(str(v.version), [])}
                       for v in found), key=lambda v: v["version"])

    def set_alias(self, name: str, alias: str, version: str) -> None:
        self.client.set_registered_model_alias(name, alias, version)

    def set_version_tag(self, name: str, version: str, key: str, value: Any) -> None:
        self.client.set_model_version_tag(name, version, key, str(value))


def _configure_http() -> None:
    import logging

    # "Creating initial MLflow database tables..." is noise on every fresh store.
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    quiet_defaults()
    # A tracking server that is down must not stall the pipeline for minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")


# The MLflow UI opens an experiment on the view of its kind; untagged ones land on the
# GenAI overview. pucl trains models.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


class StoreUnavailable(PuclError):
    """The MLflow store cannot be read (down, locked, not a store, not created yet)."""


class UnknownExperiment(PuclError):
    """The store has no experiment of that name."""


def existing_client(uri: str) -> Any:
    """An MlflowClient on a store that already exists: reading must not create an empty
    sqlite store where a path was mistyped or nothing ran yet."""
    from mlflow.tracking import MlflowClient

    _configure_http()
    if uri.startswith("sqlite:///"):
        file = Path(uri[len("sqlite:///"):])
        if not file.is_file():
            raise StoreUnavailable(f"MLflow store {uri}: {file} does not exist (runs create it: "
                            "pucl run, pucl repro)")
    return MlflowClient(tracking_uri=uri)


def read_store(uri: str, experiment: str) -> Store:
    """An existing experiment of an existing store, for reading: nothing is created or
    tagged; an unknown experiment is one line naming the known ones."""
    try:
        client = existing_client(uri)
        exp = client.get_experiment_by_name(experiment)
        known = [] if exp else sorted(e.name for e in client.search_experiments())
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"MLflow store {uri} cannot be read ({first_line(exc)})"
                               ) from None
    if exp is None:
        raise UnknownExperiment(f"no experiment {experiment!r} in the MLflow store {uri}"
                        f"{did_you_mean(experiment, known)} (experiments: "
                        f"{', '.join(known) or 'none yet'})")
    return Store(client, exp.experiment_id, uri)


def open_store(uri: str, experiment: str, root: Path) -> Store:
    """Connect and get (or create) the experiment; raises when the store is unusable."""
    from mlflow.tracking import MlflowClient

    _configure_http()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        for key, value in EXPERIMENT_KIND.items():
            if key not in exp.tags:
                client.set_experiment_tag(exp.experiment_id, key, value)
        return Store(client, exp.experiment_id, uri)
    location = (root / "mlartifacts").resolve().as_uri() if uri.startswith("sqlite") else None
    try:
        exp_id = client.create_experiment(experiment, artifact_location=location,
                                          tags=EXPERIMENT_KIND)
    except Exception:  # created meanwhile by a concurrent run
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise
        exp_id = exp.experiment_id
    return Store(client, exp_id, uri)


def try_open_store(uri: str, experiment: str, root: Path) -> Store | None:
    """`open_store`, or None after one line on stderr (and tracking switched off for this
    process and the stage processes it starts, so that the line is not repeated)."""
    if tracking_disabled():
        return None
    try:
        return open_store(uri, experiment, root)
    except Exception as exc:
        warn(f"MLflow store {uri} cannot be used ({first_line(exc)}); "
              "results are written locally only")
        os.environ[TRACKING_ENV] = "off"
        return None


@contextmanager
def tracked_run(
    name: str,
    experiment: str,
    uri: str,
    root: Path,
    tags: Mapping[str, Any] | None = None,
    parent_run_id: str | None = None,
) -> Iterator[Run]:
    """Create a run (nested under `parent_run_id` when given), yield it, and close it
    FINISHED, KILLED when the body is stopped (Ctrl-C, SIGTERM), or FAILED when it
    raises. Without a usable store, yields a run that
    records nothing."""
    with run_in(try_open_store(uri, experiment, root), name, root, tags,
                parent_run_id) as handle:
        yield handle


@contextmanager
def run_in(store: Store | None, name: str, root: Path, tags: Mapping[str, Any] | None = None,
           parent_run_id: str | None = None) -> Iterator[Run]:
    """`tracked_run` on a store already opened (or None: a run that records nothing)."""
    handle = Run(None, None)
    if store is not None:
        try:
            if parent_run_id is None:  # once per command: what killed commands left
                for run_id in store.reap_orphans():
                    warn(f"run {run_id} was left RUNNING by a process that is gone (killed?):"
                          " marked KILLED")
            handle = store.start_run(name, {**standard_tags(root), **(tags or {})},
                                     parent_run_id)
        except Exception as exc:
            warn(f"MLflow store {store.uri} cannot be used ({first_line(exc)}); "
                  "results are written locally only")
            os.environ[TRACKING_ENV] = "off"
    try:
        yield handle
    except BaseException as exc:
        handle.finish(run_status(exc))  # KILLED when stopped (Ctrl-C, SIGTERM)
        raise
    handle.finish("FINISHED")
