"""`pucl serve`: the retrain flow on a cron schedule."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Annotated

import typer

from pucl.cli._common import (
    SetOption,
    app,
    fail,
    out,
    prefect_env,
    project_or_exit,
    run_flow,
    validated_overrides,
)


@app.command()
def serve(
    cron: Annotated[str, typer.Option(help="cron schedule of the retraining (UTC)")] = "0 2 * * *",
    name: Annotated[str | None, typer.Option(
        help="deployment name (default: the project directory's name and a hash of its "
             "path)")] = None,
    wait: Annotated[float, typer.Option(
        min=0, help="seconds a scheduled pass waits for a retrain already running")] = 600,
    set_: SetOption = None,
) -> None:
    """Serve the retrain flow on a cron schedule (Ctrl-C stops it). Each run is one pass of
    `pucl retrain` on the current params and data (docs/production.md); a pass that meets
    another one running waits up to --wait seconds, then fails with one line."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except Exception:
        fail(f"invalid --cron {cron!r}: expected five fields, e.g. '0 2 * * *' (02:00 daily)")
    root = project_or_exit()
    overrides = validated_overrides(root, set_)
    name = name or deployment_name(root)
    prefect_env()
    from pucl.flows.retrain import retrain

    # Prefect's runner stops cleanly on SIGTERM, but on Ctrl-C (SIGINT) it hung in
    # asyncio's cancellation of its tasks, for good: Ctrl-C becomes the SIGTERM it handles.
    signal.signal(signal.SIGINT, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
    out.print(f"serving deployment pucl-retrain/{name} on cron {cron!r} (Ctrl-C to stop)")
    run_flow(lambda: retrain.serve(name=name, cron=cron, parameters={
        "overrides": overrides, "project": str(root), "wait": wait}), scheduler=True)


def deployment_name(root: Path) -> str:
    """One name per project: two projects served against one Prefect database under one
    name ran each other's scheduled passes, with the other's parameters (seen by hand)."""
    import hashlib

    root = root.resolve()
    return f"{root.name}-{hashlib.sha256(str(root).encode()).hexdigest()[:8]}"
