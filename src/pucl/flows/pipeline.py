"""The pipeline flow: the stages, in order, as Prefect tasks in a run directory.

`pucl run [--set key=value ...]` runs it on params.yaml plus the overrides. Its outputs go
to `<paths.runs>/<run name>/`, never to the DVC outputs, so a flow and `dvc repro` can run
side by side; the same stage functions run in both.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from pucl.flows._crashed import FLOW_RUN_TAG, close_what_crashed_workers_left, flow_run_id
from pucl.flows._tasks import prefect_stage_call, project_dir
from pucl.reporting.tables import headline
from pucl.stages.runner import (
    default_run_name,
    resolve_params,
    run_directory,
    run_pipeline,
    safe_name,
)


@flow(name="pucl-pipeline", description="PU split -> class prior -> contrastive pretraining "
      "-> PUPL -> classifier -> evaluation, in a run directory")
def pipeline(overrides: dict[str, Any] | None = None, run_name: str | None = None,
             project: str | None = None, progress: bool = True,
             name_prefix: str = "run", tags: dict[str, str] | None = None) -> dict[str, Any]:
    """Returns the run's name, directory, MLflow parent run id and test metrics. `tags` go
    on the MLflow parent run (a preset run's `preset` and `variant`)."""
    root = project_dir(project)
    params = resolve_params(root, overrides)
    name = safe_name(run_name) if run_name else default_run_name(params, name_prefix)
    close_what_crashed_workers_left(params, root, get_run_logger())
    result = run_pipeline(params, run_directory(root, params, name), name,
                          tags={FLOW_RUN_TAG: flow_run_id(), **(tags or {})},
                          progress=progress,
                          entry="prefect", stage_call=prefect_stage_call)
    # a worker's log is often all its user reads: what the run gave and where it is
    get_run_logger().info(
        f"run {name}: {headline(result.metrics)}; outputs in {result.workdir}"
        + (f"; MLflow run {result.mlflow_run_id}" if result.mlflow_run_id else ""))
    return result.summary()
