"""The sweep flow: a grid over params and seeds, one pipeline per point.

Points fan out over the flow's task runner (`pucl sweep` picks it: a local process pool
by default, threads, or a Dask cluster at `--address`). Points that train the same
encoder (one seed's variants that differ downstream) run one after the other, so the
later ones restore it from `paths.pretrain_cache` instead of training it twice at
once. Every point runs the stage functions in its own directory
`<paths.runs>/<sweep>/<point>/` (never `dvc repro`, which holds one lock per checkout)
under one MLflow parent run of the sweep; at the end the comparison table and the
accuracy-against-gamma figure are written and logged to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait

from pucl import tracking
from pucl.errors import ParamsError, PuclError
from pucl.flows._progress import PROGRESS_FILE, PointProgress, SweepWatch
from pucl.flows._tasks import exit_with_parent, project_dir, retry_if_transient
from pucl.params.config import Params
from pucl.params.sweeps import SweepPoint, SweepSpec, expand, parse_sweep
from pucl.recipe import Recipe
from pucl.recipe.pretraining import encoder_identity, member_seeds, needs_prior
from pucl.reporting.comparison import compare_runs, pipeline_runs, validation_scores_of
from pucl.runtime.progress import listening
from pucl.stages.preflight import check_inputs
from pucl.stages.runner import (
    read_raw_params,
    resolve_params,
    run_directory,
    run_pipeline,
    safe_name,
)


class SweepFailed(RuntimeError):
    """Some points of a sweep failed (the others completed and were compared)."""


def validate_points(spec: SweepSpec, root: Path, raw: dict | None = None) -> list[SweepPoint]:
    """Every point's params, validated before any point runs."""
    raw = raw if raw is not None else read_raw_params(root)
    points = expand(spec)
    for point in points:
        try:
            check_inputs(resolve_params(root, point.overrides, raw), root)
        except PuclError as exc:
            raise ParamsError(f"sweep point {point.name}: {exc}") from None
    return points


def shared_pretraining(params: Params) -> str | None:
    """Points with equal keys train the same encoder, so the later ones can restore it
    from paths.pretrain_cache; None when there is no cache to share it through."""
    if params.paths.pretrain_cache is None:
        return None
    recipe = Recipe.of(params)
    key = {**encoder_identity(recipe, member_seeds(recipe)[0]),
           "data": params.data.model_dump(), "split": params.split.model_dump()}
    if params.pretrain.prior == "estimate" and needs_prior(recipe):  # the first estimate's
        key["prior"] = params.prior.model_dump()
    return json.dumps(key, sort_keys=True, default=str)


def submit_points(points: list[SweepPoint], root: Path, raw: dict, submit,
                  poll_seconds: float = 2.0, watch=None) -> list:
    """Submit every point; a point whose encoder an earlier point also trains is
    submitted once that point has finished (whatever its outcome), so two workers never
    train one encoder at the same time and the later point restores it from the cache.
    (Prefect's own wait_for cannot express "whatever its outcome" on a process pool.)
    `watch(futures)` is called at every poll (None for the points not yet submitted)."""
    keys = [shared_pretraining(resolve_params(root, p.overrides, raw)) for p in points]
    first: dict[str, int] = {}
    futures: list[Any] = [None] * len(points)
    waiting: list[tuple[int, int]] = []  # (point, the earlier point it waits for)
    for i, key in enumerate(keys):
        if key is not None and key in first:
            waiting.append((i, first[key]))
            continue
        if key is not None:
            first[key] = i
        futures[i] = submit(points[i])
    while waiting:
        ready = [(i, j) for i, j in waiting if futures[j].state.is_final()]
        for i, j in ready:
            futures[i] = submit(points[i])
            waiting.remove((i, j))
        if waiting and not ready:
            futures[waiting[0][1]].wait(timeout=poll_seconds)
        if watch is not None:
            watch(futures)
    return futures


def point_directory(root: Path, raw: dict, sweep_name: str, point: SweepPoint) -> Path:
    """Where a point runs: <paths.runs>/<sweep>/<point>/."""
    return run_directory(root, resolve_params(root, point.overrides, raw),
                         f"{sweep_name}/{safe_name(point.name)}")


def wait_watching(futures: list, watch: SweepWatch, poll_seconds: float = 2.0) -> None:
    """Wait for every point, logging where they are as they move."""
    while not all(future.state.is_final() for future in futures):
        wait(futures, timeout=poll_seconds)
        watch.poll(futures)
    watch.poll(futures)


STOP_MARKER = ".stopped"  # in the sweep's directory while a stopped sweep winds down


@contextmanager
def stop_workers_on_exit(marker: Path) -> Iterator[None]:
    """Leave `marker` behind when the block ends by an exception (SIGTERM, Ctrl-C): the
    pool's workers see it, stop their running point and start no other (exit_with_parent).
    A stale marker of an earlier stopped run of the same sweep is removed first."""
    marker.unlink(missing_ok=True)
    try:
        yield
    except BaseException:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        raise


@task(name="sweep-point", task_run_name="{point_name}", retries=1, retry_delay_seconds=5,
      retry_condition_fn=retry_if_transient, cache_policy=NO_CACHE)
def run_point(point_name: str, overrides: dict[str, Any], raw: dict[str, Any], root: str,
              sweep_name: str, sweep_run_id: str | None, tracking_uri: str,
              variant: str | None = None, stop_marker: str | None = None,
              refit_of: str | None = None) -> dict[str, Any]:
    """One grid point: the whole pipeline in its own directory, nested under the sweep.
    It may run on another machine's Dask worker: project and store come as arguments."""
    exit_with_parent(stop_marker)  # a worker must not outlive a killed or stopped sweep
    if sweep_run_id is None:  # the store was unusable when the sweep started: say it once
        os.environ[tracking.TRACKING_ENV] = "off"
    os.environ["MLFLOW_TRACKING_URI"] = tracking_uri
    project = project_dir(root)
    params = resolve_params(project, overrides, raw)
    workdir = run_directory(project, params, f"{sweep_name}/{safe_name(point_name)}")
    tags = {"sweep": sweep_name, **({"variant": variant} if variant else {}),
            **({"refit_of": refit_of} if refit_of else {})}
    progress = PointProgress(workdir / PROGRESS_FILE)  # read by the sweep's flow
    try:
        with listening(progress):
            result = run_pipeline(params, workdir, point_name, tags=tags,
                                  entry="sweep", parent_run_id=sweep_run_id)
    finally:
        progress.remove()
    return {**result.summary(), "overrides": overrides}


@flow(name="pucl-sweep", description="Grid over params and seeds, one pipeline per point, "
      "compared at the end")
def sweep(spec: dict[str, Any], project: str | None = None,
          by: list[str] | None = None) -> dict[str, Any]:
    logger = get_run_logger()
    root = project_dir(project)
    sweep_spec = parse_sweep(spec)
    raw = read_raw_params(root)
    points = validate_points(sweep_spec, root, raw)
    base = resolve_params(root, points[0].overrides, raw)
    uri = tracking.resolve_tracking_uri(base.tracking.uri, root)
    out_dir = run_directory(root, base, sweep_spec.name)
    tags = {"kind": "sweep", "sweep": sweep_spec.name, "points": len(points),
            "dataset": base.data.dataset, "task": base.data.task,
            **({"refit_of": sweep_spec.refit_of} if sweep_spec.refit_of else {})}
    with tracking.tracked_run(f"sweep:{sweep_spec.name}", base.tracking.experiment, uri,
                              root, tags) as parent:
        parent.log_params({"sweep.name": sweep_spec.name, "sweep.seeds": sweep_spec.seeds,
                           **{f"sweep.grid.{k}": v for k, v in sweep_spec.grid.items()},
                           **{f"sweep.set.{k}": v for k, v in sweep_spec.set.items()}})
        parent.log_text(yaml.safe_dump(spec, sort_keys=False), "sweep.yaml")
        logger.info(f"sweep {sweep_spec.name}: {len(points)} points -> {out_dir}")
        marker = out_dir / STOP_MARKER
        watch = SweepWatch([p.name for p in points],
                           [point_directory(root, raw, sweep_spec.name, p) for p in points],
                           lambda line: logger.info(f"sweep {sweep_spec.name}: {line}"))
        with stop_workers_on_exit(marker):
            futures = submit_points(points, root, raw, lambda p: run_point.submit(
                p.name, p.overrides, raw, str(root), sweep_spec.name, parent.run_id, uri,
                p.variant, str(marker), sweep_spec.refit_of), watch=watch.poll)
            wait_watching(futures, watch)
        results, failed = [], []
        for point, future in zip(points, futures, strict=True):
            if future.state.is_completed():
                results.append(future.result())
            else:
                failed.append(point.name)
                logger.error(f"point {point.name} failed: {future.state.message}")
        comparison = None
        store = tracking.try_open_store(uri, base.tracking.experiment, root)
        if store is not None and parent.run_id and results:
            comparison = compare_runs(pipeline_runs(store, parent.run_id), out_dir, by or (),
                                      title=f"sweep {sweep_spec.name}", log_to=parent,
                                      scores_of=validation_scores_of(store),
                                      within=[k for k in sweep_spec.grid if k in (by or ())])
            logger.info(f"comparison: {comparison.files[0]}")
        parent.log_metrics({"points_completed": len(results), "points_failed": len(failed)})
        if failed:
            raise SweepFailed(f"{len(failed)} of {len(points)} sweep points failed: "
                              f"{', '.join(failed)}")
    return {"sweep": sweep_spec.name, "mlflow_run_id": parent.run_id, "out_dir": str(out_dir),
            "points": results,
            "comparison": str(comparison.files[0]) if comparison else None}
