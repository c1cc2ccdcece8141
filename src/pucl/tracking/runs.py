"""One MLflow run, written through MlflowClient with its explicit id (the fluent API keeps
its active run per thread); every call degrades to a warning when the store fails, so
tracking never breaks the pipeline."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PARENT_RUN_ENV = "PUCL_PARENT_RUN_ID"
TRACKING_ENV = "PUCL_TRACKING"  # "off": no MLflow at all (set once the store failed)

# torch.export sets a process-wide "compiling" flag and restores the value it found, with
# no lock: two exports at once (pipelines in threads of one process) fail, and can leave
# the flag set for good, after which every optimiser step takes its traced path (other
# numbers) and no work is counted. One export at a time in a process.
EXPORT_LOCK = threading.Lock()


def warn(message: str) -> None:
    print(f"pucl: {message}", file=sys.stderr)


def first_line(exc: BaseException) -> str:
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
            warn(f"MLflow {what} failed ({first_line(exc)}); continuing")
            return None

    def log_params(self, params: Mapping[str, Any]) -> None:
        if not self.active:  # tracking off: MLflow is never imported
            return
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self._safe("log params", "log_batch", params=items[start:start + 100])

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if not self.active:  # tracking off: MLflow is never imported
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step or 0) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)
                 and math.isfinite(float(v))]
        for start in range(0, len(items), 500):
            self._safe("log metrics", "log_batch", metrics=items[start:start + 500])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if not self.active:  # tracking off: MLflow is never imported
            return
        from mlflow.entities import RunTag

        self._safe("set tags", "log_batch", tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self._safe("log artifacts", "log_artifacts", str(path), artifact_path)
        elif path.exists():
            self._safe("log artifact", "log_artifact", str(path), artifact_path)

    def log_dataset(self, name: str, digest: str, source: str, context: str = "training",
                    profile: Mapping[str, Any] | None = None) -> None:
        """The data this run read, as an MLflow dataset input (the runs table's Dataset
        column): its name, version digest and where it lives."""
        if not self.active:
            return
        import json

        from mlflow.entities import Dataset, DatasetInput, InputTag

        dataset = Dataset(name=name, digest=digest[:36], source_type="local",
                          source=json.dumps({"uri": source}),
                          profile=json.dumps(dict(profile or {})))
        self._safe("log dataset", "log_inputs",
                   datasets=[DatasetInput(dataset, [InputTag("mlflow.data.context", context)])])

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
            with EXPORT_LOCK:  # the global URI below too
                # log_model resolves its store from the global URI: point it at ours.
                mlflow.set_tracking_uri(self.uri)
                # pt2 (torch.export): loading needs torch only, not pucl, and runs no
                # pickled code
                info = mlflow.pytorch.log_model(
                    module, name=name, run_id=self.run_id, serialization_format="pt2",
                    input_example=example_input,
                    signature=infer_signature(example_input, output),
                    # explicit requirements: inferring them reloads the model in a subprocess
                    pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
                    # MLflow's serving check reloads the model through pyfunc (about a
                    # second a stage process) and only warns; tests check that the logged
                    # model gives the stage's own scores, a stricter check
                    validate_serving_input=False,
                )
        except Exception as exc:
            warn(f"MLflow log model failed ({first_line(exc)}); continuing")
            return None
        self.set_tags({"model_id": info.model_id, "model_uri": info.model_uri})
        return info.model_id

    def finish(self, status: str) -> None:
        """Close the run as FINISHED, FAILED or KILLED (once; later calls are ignored)."""
        if self.active and not self.ended:
            self.ended = True
            self._safe("end run", "set_terminated", status)
