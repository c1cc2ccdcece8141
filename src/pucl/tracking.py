"""MLflow tracking: the only module that imports mlflow.

Runs are created with `MlflowClient` and explicit run ids (the fluent API keeps its
active run per thread). The default store is a sqlite file in the project root, resolved
to an absolute path at run time so that runs started from DVC's temporary experiment
copies (`.dvc/tmp/exps/...`) land in the same store. When the store cannot be reached,
the stage still completes and writes its outputs; a single line says tracking is off.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PARENT_RUN_ENV = "PUCL_PARENT_RUN_ID"
ROOT_ENV = "PUCL_ROOT"
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


class Run:
    """One MLflow run; every call degrades to a warning when the store fails."""

    def __init__(self, client: Any | None, run_id: str | None):
        self.client = client
        self.run_id = run_id
        self.ended = False

    @property
    def active(self) -> bool:
        return self.client is not None

    def _safe(self, what: str, method: str, *args, **kwargs) -> None:
        """Call MlflowClient.<method>(run_id, ...) when tracking is on; never raise."""
        if not self.active:
            return
        try:
            getattr(self.client, method)(self.run_id, *args, **kwargs)
        except Exception as exc:  # tracking must never break the pipeline
            _warn(f"MLflow {what} failed ({type(exc).__name__}: {exc}); continuing")

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self._safe("log params", "log_batch",
                       params=items[start:start + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        import math
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step or 0) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and math.isfinite(float(v))]
        for start in range(0, len(items), 500):
            self._safe("log metrics", "log_batch",
                       metrics=items[start:start + 500])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._safe("set tags", "log_batch",
                   tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self._safe("log artifacts", "log_artifacts", str(path),
                       artifact_path)
        elif path.exists():
            self._safe("log artifact", "log_artifact", str(path),
                       artifact_path)

    def finish(self, status: str) -> None:
        """Close the run as FINISHED or FAILED (once; later calls are ignored)."""
        if self.active and not self.ended:
            self.ended = True
            self._safe("end run", "set_terminated", status)


def _client_and_experiment(uri: str, experiment: str, root: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return client, exp.experiment_id
    location = (root / "mlartifacts").resolve().as_uri() if uri.startswith("sqlite") else None
    return client, client.create_experiment(experiment, artifact_location=location)


@contextmanager
def tracked_run(
    name: str,
    experiment: str,
    uri: str,
    root: Path,
    tags: Mapping[str, Any] | None = None,
    parent_run_id: str | None = None,
) -> Iterator[Run]:
    """Create a run (nested under `parent_run_id` or $PUCL_PARENT_RUN_ID when given),
    yield it, and close it FINISHED, or FAILED when the body raises."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # A tracking server that is down must not stall the pipeline for minutes of retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    parent = parent_run_id or os.environ.get(PARENT_RUN_ENV)
    all_tags = {"mlflow.runName": name, "git_commit": git_commit(root),
                "dvc_lock": file_digest(root / "dvc.lock"), **(tags or {})}
    if parent:
        all_tags["mlflow.parentRunId"] = parent
    try:
        client, exp_id = _client_and_experiment(uri, experiment, root)
        run = client.create_run(exp_id, tags={k: str(v) for k, v in all_tags.items()},
                                run_name=name)
        handle = Run(client, run.info.run_id)
    except Exception as exc:
        _warn(f"MLflow store {uri} cannot be used ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0] if str(exc) else ''}); results are written locally only")
        handle = Run(None, None)
    try:
        yield handle
    except BaseException:
        handle.finish("FAILED")
        raise
    handle.finish("FINISHED")
