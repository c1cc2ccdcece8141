"""One whole pipeline in process, in a temporary directory, for the measurement scripts
(evaluation_table, honest_rows): what it wrote that they read, and its minutes; and a
progress bar over a script's pipelines."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
# Encoders the measurement scripts share by fingerprint: under the project's ignored data/,
# so they outlive a machine's /tmp (an F-MNIST encoder takes about 5 minutes to pretrain)
ENCODER_CACHE = ROOT / "data" / "cache" / "measurements"


@dataclass(frozen=True)
class PipelineRun:
    metrics: dict  # evaluate's metrics.json
    split: dict  # build_split's summary.json
    stages: dict  # each stage's own metrics (PipelineResult.stages)
    minutes: float  # wall time
    kept: pd.DataFrame | None = None  # the one table asked for by `keep`
    stage_minutes: dict[str, float] | None = None  # wall time of each stage
    shipped: str = "refit"  # classifier.shipped as the run resolved it

    def stage_minutes_json(self) -> str:
        """Each stage's minutes, for a CSV cell (where a run's time went)."""
        return json.dumps({k: round(v, 3) for k, v in (self.stage_minutes or {}).items()})


def run_once(overrides: dict, seed: int, name: str, cache: Path | None = None,
             keep: tuple[str, str] | None = None) -> PipelineRun:
    """params.yaml with `overrides`, `base.seed` = seed and the pretraining cache `cache`
    (None: no cache), every stage in order; tracking as PUCL_TRACKING says. `keep`
    (section, csv file) names one more output table to return before the run's directory
    goes."""
    from pucl.stages.runner import call_stage, resolve_params, run_pipeline

    stage_minutes: dict[str, float] = {}

    def timed(stage: str, *args) -> dict:
        start = time.perf_counter()
        metrics = call_stage(stage, *args)
        stage_minutes[stage] = (time.perf_counter() - start) / 60
        return metrics

    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        params = resolve_params(ROOT, {**overrides, "base.seed": seed,
                                       "paths.pretrain_cache": str(cache) if cache else None})
        start = time.perf_counter()
        result = run_pipeline(params, Path(tmp), f"{name}-s{seed}", stage_call=timed)
        minutes = (time.perf_counter() - start) / 60

        def read(section: str, file: str) -> dict:
            return json.loads((Path(tmp) / getattr(params.paths, section) / file).read_text())

        kept = (pd.read_csv(Path(tmp) / getattr(params.paths, keep[0]) / keep[1])
                if keep else None)
        return PipelineRun(read("evaluate", "metrics.json"), read("split", "summary.json"),
                           result.stages, minutes, kept, stage_minutes,
                           params.classifier.shipped)


class RunsBar:
    """One bar over a script's whole pipelines (they run for minutes each): its label
    says which run, stage and epoch is under way, redrawn as each moves; the scripts'
    lines go through `write` so they do not break it."""

    def __init__(self, total: int, desc: str):
        self.bar = tqdm(total=total, unit="run", desc=desc)

    @contextlib.contextmanager
    def running(self, label: str) -> Iterator[None]:
        """Label the bar with each stage and epoch that `label`'s pipeline reports, and
        count the run as done when the block ends."""
        from pucl.runtime.progress import listening

        def show(event: dict) -> None:
            step = (f"{event['step']} {event['done']}/{event['total']}" if "step" in event
                    else event.get("stage", ""))
            self.bar.set_postfix_str(f"{label}: {step}")

        with listening(show):
            yield
        self.bar.update()

    def skip(self) -> None:
        """A run measured before (a resumed script): counted, not run."""
        self.bar.update()

    def write(self, text: str) -> None:
        self.bar.write(text)

    def close(self) -> None:
        self.bar.close()
