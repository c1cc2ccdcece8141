"""Prefect tasks shared by the flows: one stage of the pipeline, with retries on transient
errors only (a bad parameter or bad data fails at once; a flaky disk or network retries)."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from pucl.errors import PuclError
from pucl.params.config import Params
from pucl.runtime.interrupts import SIGTERM_EXIT_CODE
from pucl.stages.runner import call_stage

STAGE_RETRIES = 2
STOP_GRACE_SECONDS = 60  # an orphaned worker's time to close its runs before it is ended


def project_dir(project: str | None) -> Path:
    """The project a flow works on. A given directory also becomes PUCL_ROOT, so that the
    stages, their MLflow store and the champion lookup all agree on it."""
    from pucl import tracking

    if not project:
        return tracking.project_root()
    root = Path(project).resolve()
    os.environ[tracking.ROOT_ENV] = str(root)
    return root


STOP_POLL_SECONDS = 2.0  # how often a worker looks for its sweep's stop marker


def exit_with_parent(stop_marker: str | None = None) -> None:
    """In a worker process of a local pool: end this process when the sweep that started
    it is gone. Gone means the process that started it died (SIGKILL, a closed terminal)
    or the sweep left `stop_marker` behind: a stopped sweep (SIGTERM, Ctrl-C) unwinds
    while its pool waits for the points already handed out, so without the marker they
    would all still run. The worker first unwinds (its MLflow runs end KILLED), then is
    ended. A point handed out after that does not start. A no-op in the main process
    (the threads runner); one watcher per process."""
    import multiprocessing
    import signal
    import threading
    import time
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def stopped() -> bool:
        return not parent.is_alive() or (stop_marker is not None and Path(stop_marker).exists())

    if stopped():  # a point the pool handed on after its sweep had died or stopped
        os._exit(SIGTERM_EXIT_CODE)
    if getattr(exit_with_parent, "watching", False):
        return
    exit_with_parent.watching = True

    def watch() -> None:
        while not stopped():
            wait([parent.sentinel], timeout=STOP_POLL_SECONDS)  # ready once the parent ended
        os.kill(os.getpid(), signal.SIGTERM)  # unwinds, closing MLflow runs as KILLED
        time.sleep(STOP_GRACE_SECONDS)  # unless the pool's loop caught it and lives on
        os._exit(SIGTERM_EXIT_CODE)

    threading.Thread(target=watch, name="pucl-exit-with-parent", daemon=True).start()


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: I/O and connection failures, never a user error."""
    return isinstance(exc, OSError) and not isinstance(exc, PuclError)


def retry_if_transient(task, task_run, state) -> bool:  # Prefect's retry_condition_fn
    try:
        state.result()
    except BaseException as exc:
        return is_transient(exc)
    return False


# DVC decides what to recompute, so Prefect must never serve a cached stage result.
@task(name="stage", task_run_name="{stage}", retries=STAGE_RETRIES, retry_delay_seconds=5,
      retry_condition_fn=retry_if_transient, cache_policy=NO_CACHE)
def stage_task(stage: str, params: Params, workdir: Path, progress: bool,
               parent_run_id: str | None) -> dict:
    return call_stage(stage, params, workdir, progress, parent_run_id)


def prefect_stage_call(stage: str, params: Params, workdir: Path, progress: bool,
                       parent_run_id: str | None) -> dict:
    """A `StageCall` for `run_pipeline` that runs each stage as a Prefect task."""
    return stage_task(stage, params, workdir, progress, parent_run_id)
