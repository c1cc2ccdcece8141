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


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        _fail(f"expected comma-separated integers, got {text!r}")
        raise  # unreachable


@app.command()
def ablate(
    losses: Annotated[str, typer.Option(help="objectives, comma-separated")] = (
        "sscl,scl_pu,mcl,pucl,punce,dcl,balanced,balanced_pucl"),
    n_p: Annotated[str, typer.Option("--n-p", help="labelled positives, comma-separated")] = (
        "120,400,1200"),
    seeds: Annotated[str, typer.Option(help="base.seed values, comma-separated")] = "0,1",
    epochs: Annotated[int, typer.Option(help="pretraining epochs of every run")] = 30,
    report_dir: Annotated[Path, typer.Option(
        "--out", help="directory for ablation.md / ablation.csv")] = Path("reports"),
) -> None:
    """Train every objective with the same budget and seeds on the configured data, and
    write one table: objective x n_p x seeds (kNN, PUPL pseudo-label and test accuracy).

    Runs the stages in-process, each configuration in its own directory under
    data/ablation/ (no DVC). PUNCE and DCL get the true prior of U (oracle), so the table
    isolates the objectives from prior-estimation error."""
    import yaml

    from pucl.config import parse_params
    from pucl.losses import LOSSES, PRIOR_LOSSES
    from stages.runner import run_pipeline
    from stages.summaries import ablation_tables

    root = tracking.project_root()
    raw = yaml.safe_load((root / "params.yaml").read_text())
    names = [v.strip() for v in losses.split(",") if v.strip()]
    unknown = [v for v in names if v not in LOSSES]
    if unknown:
        _fail(f"unknown loss {unknown[0]!r} (allowed: {', '.join(sorted(LOSSES))})")
    grid = [(loss, k, seed) for loss in names for k in _ints(n_p) for seed in _ints(seeds)]
    configs = []
    for loss, k, seed in grid:  # validate every configuration before running any
        config = {**raw, "base": {**raw["base"], "seed": seed},
                  "split": {**raw["split"], "n_p": k},
                  "prior": {**raw["prior"], "method": "oracle"},
                  "pretrain": {**raw["pretrain"], "loss": loss, "epochs": epochs,
                               "prior": "oracle" if loss in PRIOR_LOSSES else "estimate"},
                  "tracking": {**raw.get("tracking", {}), "experiment": "ablation"}}
        try:
            configs.append((loss, k, seed, parse_params(config)))
        except PuclError as exc:
            _fail(f"{loss}, n_p={k}, seed={seed}: {exc}", exc.exit_code)
    rows = []
    for i, (loss, k, seed, params) in enumerate(configs, start=1):
        name = f"{loss}-np{k}-s{seed}"
        err.print(f"[{i}/{len(configs)}] {name}", highlight=False)
        try:
            result = run_pipeline(params, root / "data" / "ablation" / name, name,
                                  {"loss": loss, "n_p": k, "seed": seed})
        except PuclError as exc:
            _fail(f"{name}: {exc}", exc.exit_code)
        metrics = result["evaluate"]
        rows.append({"loss": loss, "n_p": k, "seed": seed,
                     "gamma": result["build_split"]["gamma"],
                     "knn_accuracy": metrics["knn_accuracy"],
                     "pseudo_label_accuracy": metrics["pseudo_label_accuracy"],
                     "accuracy": metrics["accuracy"],
                     "pretrain_seconds": result["pretrain"]["train_seconds"]})
    markdown, table = ablation_tables(rows, epochs=epochs)
    from stages._common import atomic_path, write_table

    target = root / report_dir
    write_table(target / "ablation.csv", table)
    with atomic_path(target / "ablation.md") as tmp:
        tmp.write_text(markdown)
    out.print(f"wrote {target / 'ablation.md'} and {target / 'ablation.csv'}")


if __name__ == "__main__":
    app()
