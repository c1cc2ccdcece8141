"""Run the six stages in-process in a directory of their own (no DVC): the DVC-free path
used by `pucl ablate` (and by sweeps), so that several configurations never share one
DVC workspace."""

from __future__ import annotations

import os
from pathlib import Path

from pucl import tracking
from pucl.config import Params
from stages import (
    STAGES,
    build_split,
    estimate_prior,
    evaluate,
    pretrain,
    pupl_label,
    train_classifier,
)
from stages._common import execute

RUNS = {"build_split": build_split.run, "estimate_prior": estimate_prior.run,
        "pretrain": pretrain.run, "pupl_label": pupl_label.run,
        "train_classifier": train_classifier.run, "evaluate": evaluate.run}


def run_pipeline(params: Params, workdir: Path, name: str, tags: dict | None = None,
                 progress: bool = False) -> dict:
    """All stages in order with outputs under `workdir`, grouped under one parent MLflow
    run named `name`; returns the evaluate metrics plus the pretrain and PUPL summaries."""
    workdir.mkdir(parents=True, exist_ok=True)
    root = tracking.project_root()
    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    results: dict = {}
    with tracking.tracked_run(name, params.tracking.experiment, uri, root,
                              {"kind": "pipeline", **(tags or {})}) as parent:
        previous = os.environ.get(tracking.PARENT_RUN_ENV)
        if parent.run_id:
            os.environ[tracking.PARENT_RUN_ENV] = parent.run_id
        try:
            for stage in STAGES:
                results[stage] = execute(stage, RUNS[stage], params, workdir, progress)
        finally:
            if previous is None:
                os.environ.pop(tracking.PARENT_RUN_ENV, None)
            else:
                os.environ[tracking.PARENT_RUN_ENV] = previous
        parent.log_metrics(results["evaluate"])
    return results
