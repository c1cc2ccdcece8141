"""Commands that run or check the pipeline: repro (DVC), run (the Prefect flow), check,
methods, and ui (the MLflow UI)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pucl import tracking
from pucl.cli._common import (
    PresetOption,
    SetOption,
    VariantOption,
    app,
    err,
    fail,
    metrics_table,
    out,
    prefect_env,
    preset_overrides,
    project_or_exit,
    run_flow,
    score_hint,
    sections_table,
    validated_overrides,
)
from pucl.errors import PuclError
from pucl.params.config import load_params
from pucl.runtime.environment import quiet_defaults
from pucl.runtime.interrupts import end_on_sigterm


def _stage_env(root: Path, parent_run_id: str | None) -> dict[str, str]:
    """Environment for DVC: this interpreter's bin first on PATH (stages run `python`),
    telemetry off, and the parent MLflow run that stage runs nest under."""
    env = quiet_defaults(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env[tracking.ROOT_ENV] = str(root)
    if parent_run_id:
        env[tracking.PARENT_RUN_ENV] = parent_run_id
    return env


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
        fail(f"no dvc.yaml in {root} or its parents: run pucl inside the project")
    try:  # refuse before DVC deletes any stage output
        params = load_params(root / "params.yaml")
        from pucl.stages.preflight import check_inputs

        check_inputs(params, root)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    if importlib.util.find_spec("dvc") is None:
        fail("dvc is not installed in this environment (run: make setup)")

    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    # `kill` stops it the way Ctrl-C does: dvc and the stage stop too, their runs KILLED.
    # (Only here: the Prefect flows of other commands bring their own SIGTERM handling.)
    end_on_sigterm()
    cmd = [sys.executable, "-m", "dvc", "repro", *(["--force"] if force else []), *(stages or [])]
    from pucl.stages._harness import pipeline_run

    with pipeline_run(params, "pipeline (pucl repro)", "repro") as parent:
        parent.log_artifact(root / "params.yaml")
        code = _call_as_group(cmd, cwd=root, env=_stage_env(root, parent.run_id))
        metrics_path = root / params.paths.evaluate / "metrics.json"
        if code == 0 and metrics_path.exists():  # also when every stage was up to date
            parent.log_metrics(json.loads(metrics_path.read_text()))
            parent.log_artifact(metrics_path)
        if code != 0:
            parent.finish("FAILED")
    if code != 0:
        err.print(f"pucl: dvc repro failed (exit {code})")
        raise typer.Exit(code)
    table = metrics_table(root / params.paths.evaluate / "metrics.json")
    if table is not None:
        out.print(table)
        out.print(score_hint(root))
    out.print(f"MLflow store: {uri}  (open it with `pucl ui`)")


def _call_as_group(cmd: list[str], **popen) -> int:
    """Run `cmd` in a process group of its own and return its exit code. However this
    process ends (Ctrl-C, SIGTERM, killed), the whole group ends too (dvc and the stage it
    runs; the MLflow server and its workers), so nothing runs on as an orphan; a stage
    closes its MLflow run as KILLED."""
    from pucl.flows._reaper import stop, watch

    end_on_sigterm()  # SIGTERM unwinds through the `except` below, as Ctrl-C does
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    watcher = watch(proc.pid, group=True)  # for a SIGKILL of this process
    try:
        return proc.wait()
    except BaseException:  # SIGTERM, not SIGINT, to the group: a background job ignores SIGINT
        stop(proc.pid, grace=30, group=True)
        raise
    finally:
        watcher.kill()
        watcher.wait()


@app.command()
def ui(
    port: Annotated[int, typer.Option(help="port on localhost")] = 5000,
    workers: Annotated[int, typer.Option(
        min=1, help="server processes (MLflow's default is 4; one serves a local user)")] = 1,
) -> None:
    """Start the MLflow UI on localhost for this project's tracking store (reads it,
    changes nothing in it)."""
    root = project_or_exit()
    try:
        params = load_params(root / "params.yaml")
        uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
        try:  # the link goes straight to the experiment's runs table
            store = tracking.read_store(uri, params.tracking.experiment)
            page = f"#/experiments/{store.experiment_id}"
        except tracking.UnknownExperiment:
            page = ""
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    out.print(f"MLflow UI for {uri} at http://127.0.0.1:{port}/{page} (Ctrl-C to stop)")
    raise typer.Exit(_call_as_group(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
         "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)], cwd=root))


@app.command()
def check(assignments: SetOption = None, preset: PresetOption = None,
          variant: VariantOption = None) -> None:
    """Validate params.yaml (with a preset's settings and any --set overrides) and the
    data without running."""
    root = project_or_exit()
    base, tags = preset_overrides(root, preset, variant)
    validated_overrides(root, assignments, base)
    with_ = ([f"preset {tags['preset']} variant {tags['variant']}"] if tags else []) + \
        list(assignments or [])
    suffix = f" with {', '.join(with_)}" if with_ else ""
    out.print(f"params.yaml is valid{suffix} ({root / 'params.yaml'})")


@app.command("run")
def run_cmd(
    set_: SetOption = None,
    name: Annotated[str | None, typer.Option(
        help="run name (default: run-TIME-LOSS-sSEED)")] = None,
    progress: Annotated[bool, typer.Option(help="progress bars")] = True,
    preset: PresetOption = None,
    variant: VariantOption = None,
) -> None:
    """Run the whole pipeline as a Prefect flow, in its own run directory (not the DVC outs).
    With --preset: that benchmark's settings and its recommended variant, on one seed
    (base.seed; --set base.seed=S for another)."""
    root = project_or_exit()
    base, tags = preset_overrides(root, preset, variant)
    overrides = validated_overrides(root, set_, base)
    prefect_env()
    from pucl.flows.pipeline import pipeline

    prefix = f"{tags['preset']}-{tags['variant']}" if tags else "run"
    summary = run_flow(lambda: pipeline(overrides=overrides, run_name=name,
                                         project=str(root), progress=progress,
                                         name_prefix=prefix, tags=tags))
    out.print(sections_table(summary["metrics"],
                             f"results, estimates and diagnostics: {summary['name']}"))
    out.print(f"outputs: {summary['workdir']}")
    out.print(score_hint(Path(summary["workdir"])))
    if summary["mlflow_run_id"]:
        out.print(f"MLflow parent run: {summary['mlflow_run_id']}  (pucl ui)")


@app.command()
def methods(
    pattern: Annotated[str, typer.Argument(help="names matching this shell pattern")] = "*",
    settings: Annotated[bool, typer.Option(
        "--settings", help="also every setting of each method, with its default")] = False,
) -> None:
    """List every registered method by kind (prior estimators, losses, ...), with the
    params.yaml sub-section its settings go in and the first sentence of its description."""
    import pucl
    from pucl.recipe.checks import registry_sections

    sections = registry_sections()
    shown = 0
    for name in pucl._REGISTRIES:
        registry = getattr(pucl, name)
        entries = [e for e in registry.entries() if e.name in registry.names(pattern)]
        if not entries:
            continue
        table = Table(title=f"{registry.kind} ({name})")
        table.add_column("name")
        table.add_column("its settings")
        table.add_column("what it is")
        for entry in entries:
            where = f"{sections[registry.kind]}.{entry.params_key}" if entry.params_key else ""
            table.add_row(entry.name, where, entry.summary)
            shown += 1
            if settings and entry.params is not None:
                defaults = entry.params().model_dump(mode="json")
                for field, info in entry.params.model_fields.items():
                    table.add_row("", f"  {where}.{field}: {defaults[field]}",
                                  info.description or "")
        out.print(table)
    if not shown:
        fail(f"no registered method matches {pattern!r} (`pucl methods` lists them all)")
