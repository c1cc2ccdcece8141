"""MLflow tracking: the only module that imports mlflow.

Runs are created with `MlflowClient` and explicit run ids (the fluent API keeps its
active run per thread). The default store is a sqlite file in the project root, resolved
to an absolute path at run time so that runs started from DVC's temporary experiment
copies (`.dvc/tmp/exps/...`) land in the same store. When the store cannot be reached,
the pipeline still completes and writes its outputs; one line says tracking is off.

Run layout: one parent run per pipeline execution (tag `kind=pipeline`), one nested run
per stage (`kind=stage`); a sweep adds a parent above its pipelines (`kind=sweep`).
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PARENT_RUN_ENV = "PUCL_PARENT_RUN_ID"
ROOT_ENV = "PUCL_ROOT"
TRACKING_ENV = "PUCL_TRACKING"  # "off": no MLflow at all (set once the store failed)
_DVC_EXP_MARKER = (".dvc", "tmp", "exps")


def project_root(start: Path | None = None) -> Path:
    """The directory holding dvc.yaml; for a DVC temporary experiment copy, the original
    workspace that owns it. PUCL_ROOT overrides."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = (start or Path.cwd()).resolve()
    parts = here.parts
    for i in range(len(parts) - 2):
        if parts[i:i + 3] == _DVC_EXP_MARKER:
            return Path(*parts[:i])
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").exists():
            return candidate
    return here


def resolve_tracking_uri(configured: str | None, root: Path) -> str:
    """MLFLOW_TRACKING_URI, else params `tracking.uri`, else sqlite:///<root>/mlflow.db.
    Relative sqlite and file paths are made absolute against the project root."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or configured
    if not uri:
        return f"sqlite:///{root / 'mlflow.db'}"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{(root / uri[len('sqlite:///'):]).resolve()}"
    if "://" not in uri:
        return (root / uri).resolve().as_uri()
    return uri


def git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "none"


def _warn(message: str) -> None:
    print(f"pucl: {message}", file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def tracking_disabled() -> bool:
    return os.environ.get(TRACKING_ENV, "").lower() in ("off", "0", "false")


class Run:
    """One MLflow run; every call degrades to a warning when the store fails."""

    def __init__(self, client: Any | None, run_id: str | None, uri: str | None = None):
        self.client = client
        self.run_id = run_id
        self.uri = uri
        self.ended = False
        self.owned = False  # a stage process that created this parent run closes it

    @property
    def active(self) -> bool:
        return self.client is not None

    def _safe(self, what: str, method: str, *args, **kwargs) -> Any:
        """Call MlflowClient.<method>(run_id, ...) when tracking is on; never raise."""
        if not self.active:
            return None
        try:
            return getattr(self.client, method)(self.run_id, *args, **kwargs)
        except Exception as exc:  # tracking must never break the pipeline
            _warn(f"MLflow {what} failed ({_first_line(exc)}); continuing")
            return None

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self._safe("log params", "log_batch", params=items[start:start + 100])

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step or 0) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)
                 and math.isfinite(float(v))]
        for start in range(0, len(items), 500):
            self._safe("log metrics", "log_batch", metrics=items[start:start + 500])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._safe("set tags", "log_batch", tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self._safe("log artifacts", "log_artifacts", str(path), artifact_path)
        elif path.exists():
            self._safe("log artifact", "log_artifact", str(path), artifact_path)

    def log_text(self, text: str, artifact_file: str) -> None:
        self._safe("log text", "log_text", text, artifact_file)

    def log_pytorch_model(self, module: Any, name: str, example_input: Any) -> str | None:
        """Log `module` with the mlflow.pytorch flavour and a signature inferred from
        `example_input` (a float32 numpy batch) and the module's output on it. Returns the
        MLflow model id (also set as the run tag `model_id`), None without tracking."""
        if not self.active:
            return None
        try:
            import mlflow
            import mlflow.pytorch
            import torch
            from mlflow.models import infer_signature

            with torch.no_grad():
                output = module(torch.as_tensor(example_input)).numpy()
            # log_model resolves its store from the global URI: point it at ours.
            mlflow.set_tracking_uri(self.uri)
            # pt2 (torch.export): loading needs torch only, not pucl, and runs no pickled code
            info = mlflow.pytorch.log_model(
                module, name=name, run_id=self.run_id, serialization_format="pt2",
                input_example=example_input, signature=infer_signature(example_input, output),
                # explicit requirements: inferring them reloads the model in a subprocess
                pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
            )
        except Exception as exc:
            _warn(f"MLflow log model failed ({_first_line(exc)}); continuing")
            return None
        self.set_tags({"model_id": info.model_id, "model_uri": info.model_uri})
        return info.model_id

    def finish(self, status: str) -> None:
        """Close the run as FINISHED or FAILED (once; later calls are ignored)."""
        if self.active and not self.ended:
            self.ended = True
            self._safe("end run", "set_terminated", status)


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

    @property
    def parent_id(self) -> str | None:
        return self.tags.get("mlflow.parentRunId")

    @classmethod
    def of(cls, run: Any) -> RunRecord:
        """From an mlflow.entities.Run."""
        return cls(run.info.run_id, run.info.run_name or "", run.info.status,
                   run.info.start_time or 0, dict(run.data.params), dict(run.data.metrics),
                   dict(run.data.tags))


class Store:
    """An MLflow tracking store and one experiment in it."""

    def __init__(self, client: Any, experiment_id: str, uri: str):
        self.client = client
        self.experiment_id = experiment_id
        self.uri = uri

    def start_run(self, name: str, tags: Mapping[str, Any], parent_run_id: str | None) -> Run:
        all_tags = {"mlflow.runName": name, **tags}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id, run_name=name,
                                     tags={k: str(v) for k, v in all_tags.items()})
        return Run(self.client, run.info.run_id, self.uri)

    def attach(self, run_id: str) -> Run:
        return Run(self.client, run_id, self.uri)

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

    def set_alias(self, name: str, alias: str, version: str) -> None:
        self.client.set_registered_model_alias(name, alias, version)

    def set_version_tag(self, name: str, version: str, key: str, value: Any) -> None:
        self.client.set_model_version_tag(name, version, key, str(value))


def _configure_http() -> None:
    import logging

    # "Creating initial MLflow database tables..." is noise on every fresh store.
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # A tracking server that is down must not stall the pipeline for minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")


def open_store(uri: str, experiment: str, root: Path) -> Store:
    """Connect and get (or create) the experiment; raises when the store is unusable."""
    from mlflow.tracking import MlflowClient

    _configure_http()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return Store(client, exp.experiment_id, uri)
    location = (root / "mlartifacts").resolve().as_uri() if uri.startswith("sqlite") else None
    try:
        exp_id = client.create_experiment(experiment, artifact_location=location)
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
        _warn(f"MLflow store {uri} cannot be used ({_first_line(exc)}); "
              "results are written locally only")
        os.environ[TRACKING_ENV] = "off"
        return None


def standard_tags(root: Path) -> dict[str, str]:
    return {"git_commit": git_commit(root), "dvc_lock": file_digest(root / "dvc.lock")}


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
    FINISHED, or FAILED when the body raises. Without a usable store, yields a run that
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
            handle = store.start_run(name, {**standard_tags(root), **(tags or {})},
                                     parent_run_id)
        except Exception as exc:
            _warn(f"MLflow store {store.uri} cannot be used ({_first_line(exc)}); "
                  "results are written locally only")
            os.environ[TRACKING_ENV] = "off"
    try:
        yield handle
    except BaseException:
        handle.finish("FAILED")
        raise
    handle.finish("FINISHED")


def dvc_invocation() -> str | None:
    """An id of the `dvc repro` / `dvc exp run` process this stage runs under (None when
    started otherwise), so that the stages of one invocation share one parent run."""
    try:
        import psutil

        for proc in psutil.Process().parents():
            args = proc.cmdline()
            is_dvc = any(a == "dvc" or a.endswith("/dvc") for a in args[:3])
            if is_dvc and any(a in ("repro", "exp") for a in args[1:5]):
                return f"{os.uname().nodename}:{proc.pid}:{proc.create_time():.3f}"
    except Exception:  # no psutil, no /proc, process gone: just no grouping
        return None
    return None


def invocation_parent(store: Store, invocation: str, name: str, tags: Mapping[str, Any],
                      params: Mapping[str, Any]) -> Run:
    """The parent run of one DVC invocation: found by its tag, created by its first stage."""
    found = store.runs(f"tags.pucl_invocation = '{invocation}'")
    if found:
        return store.attach(found[0].run_id)
    run = store.start_run(name, {**tags, "pucl_invocation": invocation}, None)
    run.log_params(params)
    return run
