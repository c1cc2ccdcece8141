"""Run the stages in-process in a directory of their own (no DVC).

This is the DVC-free path behind the Prefect flows, sweeps and `pucl ablate`: each run
gets `<paths.runs>/<name>/` holding a snapshot of its params and the stage outputs, so
that several configurations never share (or lock) the DVC workspace.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pucl.io import atomic_path
from pucl.params.config import Params, parse_params, read_yaml_mapping
from pucl.recipe.settings import apply_overrides
from pucl.runtime.progress import report
from pucl.stages import STAGES


def stage_function(stage: str) -> Callable[..., dict]:
    """The `run(ctx)` of a stage module (imported on first use: each pulls in torch)."""
    return importlib.import_module(f"pucl.stages.{stage}").run

# (stage, params, workdir, progress, parent_run_id) -> stage metrics
StageCall = Callable[[str, Params, Path, bool, "str | None"], dict]


@dataclass
class PipelineResult:
    name: str
    workdir: Path
    mlflow_run_id: str | None
    stages: dict[str, dict] = field(default_factory=dict)

    @property
    def metrics(self) -> dict:
        return self.stages.get("evaluate", {})

    def summary(self) -> dict[str, Any]:
        """Plain data (for Prefect results and tables)."""
        return {"name": self.name, "workdir": str(self.workdir),
                "mlflow_run_id": self.mlflow_run_id, "metrics": self.metrics,
                "gamma": self.stages.get("build_split", {}).get("gamma"),
                "pretrain_seconds": self.stages.get("pretrain", {}).get("train_seconds")}


def rollup(stages: dict[str, dict]) -> dict:
    """What each stage's metrics give the pipeline's parent run, merged: the one row a
    comparison reads (pucl.reporting.tables: minutes_per_seed, work_per_seed)."""
    from pucl.stages._harness import parent_rollup  # torch, MLflow: not needed to read params

    merged: dict = {}
    for stage, metrics in stages.items():
        merged.update(parent_rollup(stage, metrics))
    return merged


def read_raw_params(root: Path) -> dict:
    return read_yaml_mapping(root / "params.yaml", "params file")


def resolve_params(root: Path, overrides: dict[str, Any] | None = None,
                   raw: dict | None = None) -> Params:
    """params.yaml (or `raw`) with dotted overrides, validated; the inputs (data root,
    tracked dataset, data.path) and the pretraining cache are pinned to absolute paths
    against the project root, so that stages running in a run directory read the
    project's data and share one cache."""
    params = parse_params(apply_overrides(raw if raw is not None else read_raw_params(root),
                                          overrides or {}))
    shared = {key: str((root / getattr(params.paths, key)).resolve())
              for key in ("data_root", "dataset", "pretrain_cache")
              if getattr(params.paths, key)}
    update: dict[str, Any] = {"paths": params.paths.model_copy(update=shared)}
    if params.data.path:
        update["data"] = params.data.model_copy(
            update={"path": str((root / params.data.path).resolve())})
    return params.model_copy(update=update)


_UNSAFE = re.compile(r"[^A-Za-z0-9._=,-]+")


def safe_name(text: str) -> str:
    """A directory- and MLflow-friendly name."""
    return _UNSAFE.sub("_", text).strip("_") or "run"


def default_run_name(params: Params, prefix: str = "run") -> str:
    return safe_name(f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{params.pretrain.loss}"
                     f"-s{params.base.seed}")


def run_directory(root: Path, params: Params, name: str) -> Path:
    return (root / params.paths.runs / name).resolve()


def write_snapshot(params: Params, workdir: Path) -> None:
    """The exact params of this run, next to its outputs."""
    workdir.mkdir(parents=True, exist_ok=True)
    with atomic_path(workdir / "params.yaml") as tmp:
        tmp.write_text(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False))


def call_stage(stage: str, params: Params, workdir: Path, progress: bool,
               parent_run_id: str | None) -> dict:
    from pucl.stages._harness import execute  # torch, MLflow: not needed to read params

    return execute(stage, stage_function(stage), params, workdir, progress, parent_run_id)


def run_pipeline(params: Params, workdir: Path, name: str, tags: dict | None = None,
                 progress: bool = False, entry: str = "runner",
                 parent_run_id: str | None = None,
                 stage_call: StageCall = call_stage) -> PipelineResult:
    """All stages in order with outputs under `workdir`, grouped under one parent MLflow
    run named `name` (itself nested under `parent_run_id`, e.g. a sweep). Another run in
    the same directory at the same time is refused at once (LockedError): two runs
    writing one directory would mix their outputs."""
    from pucl.production.datastore import exclusive
    from pucl.stages._harness import pipeline_run

    lock = workdir.with_name(f".{workdir.name}.lock")
    with exclusive(lock, f"run named {name!r}", timeout=0), \
            pipeline_run(params, name, entry, tags, parent_run_id) as parent:
        write_snapshot(params, workdir)
        parent.log_artifact(workdir / "params.yaml")
        result = PipelineResult(name, workdir, parent.run_id)
        for stage in STAGES:
            report(stage=stage)  # to a sweep point's progress file, when one listens
            result.stages[stage] = stage_call(stage, params, workdir, progress, parent.run_id)
        parent.set_tags({"run_dir": str(workdir)})
    return result
