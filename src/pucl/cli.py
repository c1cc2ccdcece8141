"""The `pucl` command line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pucl import tracking
from pucl.config import load_params
from pucl.errors import PuclError

app = typer.Typer(help="Contrastive PU learning pipeline (DVC stages, MLflow tracking).",
                  no_args_is_help=True, add_completion=False)
err = Console(stderr=True)
out = Console()

TELEMETRY_OFF = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
                 "GX_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1",
                 "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]pucl: error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def _stage_env(root: Path, parent_run_id: str | None) -> dict[str, str]:
    """Environment for DVC: this interpreter's bin first on PATH (stages run `python`),
    telemetry off, and the parent MLflow run that stage runs nest under."""
    env = {**os.environ, **{k: v for k, v in TELEMETRY_OFF.items() if k not in os.environ}}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env[tracking.ROOT_ENV] = str(root)
    if parent_run_id:
        env[tracking.PARENT_RUN_ENV] = parent_run_id
    return env


def _metrics_table(path: Path) -> Table | None:
    if not path.exists():
        return None
    metrics = json.loads(path.read_text())
    table = Table(title=f"test metrics and diagnostics: {path.name}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in metrics.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    return table


@app.command()
def repro(
    stages: Annotated[
        list[str] | None, typer.Argument(help="stages to reproduce (default: all)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", "-f", help="rerun even if up to date")] = False,
) -> None:
    """Validate params.yaml, then run `dvc repro` under one parent MLflow run."""
    root = tracking.project_root()
    if not (root / "dvc.yaml").exists():
        _fail(f"no dvc.yaml in {root} or its parents: run pucl inside the project")
    try:
        params = load_params(root / "params.yaml")
        from pucl.data import check_task

        check_task(params.data.dataset, params.data.task)
    except PuclError as exc:  # refuse before DVC deletes any stage output
        _fail(str(exc), exc.exit_code)
    if importlib.util.find_spec("dvc") is None:
        _fail("dvc is not installed in this environment (run: make setup)")

    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    cmd = [sys.executable, "-m", "dvc", "repro", *(["--force"] if force else []), *(stages or [])]
    with tracking.tracked_run("pipeline", params.tracking.experiment, uri, root,
                              {"kind": "pipeline", "dataset": params.data.dataset,
                               "task": params.data.task, "seed": params.base.seed}) as parent:
        code = subprocess.call(cmd, cwd=root, env=_stage_env(root, parent.run_id))
        metrics_path = root / params.paths.evaluate / "metrics.json"
        if code == 0 and metrics_path.exists():
            parent.log_metrics(json.loads(metrics_path.read_text()))
            parent.log_artifact(metrics_path)
        if code != 0:
            parent.finish("FAILED")
    if code != 0:
        err.print(f"pucl: dvc repro failed (exit {code})")
        raise typer.Exit(code)
    table = _metrics_table(root / params.paths.evaluate / "metrics.json")
    if table is not None:
        out.print(table)
    out.print(f"MLflow store: {uri}  (open it with `pucl ui`)")


@app.command()
def ui(
    port: Annotated[int, typer.Option(help="port on localhost")] = 5000,
) -> None:
    """Start the MLflow UI on localhost for this project's tracking store."""
    root = tracking.project_root()
    params = load_params(root / "params.yaml")
    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    out.print(f"MLflow UI for {uri} at http://127.0.0.1:{port} (Ctrl-C to stop)")
    raise typer.Exit(subprocess.call(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
         "--host", "127.0.0.1", "--port", str(port)], cwd=root))


@app.command()
def check() -> None:
    """Validate params.yaml without running anything."""
    root = tracking.project_root()
    try:
        params = load_params(root / "params.yaml")
        from pucl.data import check_task

        check_task(params.data.dataset, params.data.task)
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    out.print(f"params.yaml is valid ({root / 'params.yaml'})")


if __name__ == "__main__":
    app()
