"""One whole pipeline in process, in a temporary directory, for the measurement scripts
(evaluation_table, honest_rows): what it wrote that they read, and its minutes."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PipelineRun:
    metrics: dict  # evaluate's metrics.json
    split: dict  # build_split's summary.json
    stages: dict  # each stage's own metrics (PipelineResult.stages)
    minutes: float  # wall time


def run_once(overrides: dict, seed: int, name: str, cache: Path | None = None) -> PipelineRun:
    """params.yaml with `overrides`, `base.seed` = seed and the pretraining cache `cache`
    (None: no cache), every stage in order; tracking as PUCL_TRACKING says."""
    from pucl.stages.runner import resolve_params, run_pipeline

    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        params = resolve_params(ROOT, {**overrides, "base.seed": seed,
                                       "paths.pretrain_cache": str(cache) if cache else None})
        start = time.perf_counter()
        result = run_pipeline(params, Path(tmp), f"{name}-s{seed}")
        minutes = (time.perf_counter() - start) / 60

        def read(section: str, file: str) -> dict:
            return json.loads((Path(tmp) / getattr(params.paths, section) / file).read_text())

        return PipelineRun(read("evaluate", "metrics.json"), read("split", "summary.json"),
                           result.stages, minutes)
