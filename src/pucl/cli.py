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
err = Console(stderr=True, soft_wrap=True)  # one error, one line, whatever the width
# Tables of runs are wide: do not squeeze them to 80 columns when piped to a file.
out = Console() if sys.stdout.isatty() else Console(width=220)

TELEMETRY_OFF = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
                 "GX_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1",
                 "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _fail(message: str, code: int = 2) -> None:
    from rich.markup import escape

    err.print(f"[red]pucl: error:[/red] {escape(message)}", highlight=False)
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
    try:  # refuse before DVC deletes any stage output
        params = load_params(root / "params.yaml")
        from pucl.stages.preflight import check_inputs

        check_inputs(params, root)
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    if importlib.util.find_spec("dvc") is None:
        _fail("dvc is not installed in this environment (run: make setup)")

    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    cmd = [sys.executable, "-m", "dvc", "repro", *(["--force"] if force else []), *(stages or [])]
    from pucl.stages._harness import pipeline_run

    with pipeline_run(params, "pipeline (pucl repro)", "repro") as parent:
        parent.log_artifact(root / "params.yaml")
        code = subprocess.call(cmd, cwd=root, env=_stage_env(root, parent.run_id))
        metrics_path = root / params.paths.evaluate / "metrics.json"
        if code == 0 and metrics_path.exists():  # also when every stage was up to date
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

    Runs as one sweep (the sweep flow), each configuration in its own directory under
    data/runs/ablation/ (no DVC), tracked in the MLflow experiment 'ablation'. PUNCE and DCL
    get the true prior of U (oracle), so the table isolates the objectives from
    prior-estimation error."""
    from pucl.losses import CONTRASTIVE_LOSSES
    from pucl.reporting import ablation_tables
    from pucl.sweep import parse_sweep

    root = _project()
    names = [v.strip() for v in losses.split(",") if v.strip()]
    unknown = [v for v in names if v not in CONTRASTIVE_LOSSES]
    if unknown:
        _fail(f"unknown loss {unknown[0]!r} (allowed: {', '.join(CONTRASTIVE_LOSSES)})")
    # One sweep: objective x n_p x seed. The oracle prior is ignored by prior-free losses.
    try:
        from pucl.flows.sweep import validate_points

        spec = parse_sweep({
            "name": "ablation", "seeds": _ints(seeds),
            "grid": {"pretrain.loss": names, "split.n_p": _ints(n_p)},
            "set": {"prior.method": "oracle", "pretrain.prior": "oracle",
                    "pretrain.epochs": epochs, "tracking.experiment": "ablation"}})

        validate_points(spec, root)  # every configuration, before running any
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    _prefect_env()
    from pucl.flows.sweep import sweep as sweep_flow

    result = _run_flow(lambda: sweep_flow(spec=spec.model_dump(), project=str(root)))
    rows = []
    for point in result["points"]:
        metrics, chosen = point["metrics"], point["overrides"]
        rows.append({"loss": chosen["pretrain.loss"], "n_p": chosen["split.n_p"],
                     "seed": chosen["base.seed"], "gamma": point["gamma"],
                     "knn_accuracy": metrics.get("knn_accuracy"),
                     "pseudo_label_accuracy": metrics.get("pseudo_label_accuracy"),
                     "accuracy": metrics["accuracy"],
                     "pretrain_seconds": point["pretrain_seconds"]})
    markdown, table = ablation_tables(rows, epochs=epochs)
    from pucl.io import atomic_path, write_table

    target = root / report_dir
    write_table(target / "ablation.csv", table)
    with atomic_path(target / "ablation.md") as tmp:
        tmp.write_text(markdown)
    out.print(f"wrote {target / 'ablation.md'} and {target / 'ablation.csv'}")


# -- Prefect flows -----------------------------------------------------------------------

SetOption = Annotated[list[str] | None, typer.Option(
    "--set", "-s", help="override a param for this run: section.name=value (repeatable)")]


def _project() -> Path:
    root = tracking.project_root()
    if not (root / "params.yaml").exists():
        _fail(f"no params.yaml in {root} or its parents: run pucl inside the project")
    return root


def _validated_overrides(root: Path, assignments: list[str] | None) -> dict:
    """Parse --set values and validate params.yaml with them, before any work starts."""
    from pucl.config import parse_assignments
    from pucl.stages.runner import resolve_params

    try:
        overrides = parse_assignments(assignments or [])
        params = resolve_params(root, overrides)
        from pucl.stages.preflight import check_inputs

        check_inputs(params, root)
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    return overrides


@app.command()
def check(assignments: SetOption = None) -> None:
    """Validate params.yaml (with any --set overrides) and the data without running."""
    root = _project()
    _validated_overrides(root, assignments)
    suffix = f" with {', '.join(assignments)}" if assignments else ""
    out.print(f"params.yaml is valid{suffix} ({root / 'params.yaml'})")


def _prefect_env() -> None:
    for key, value in TELEMETRY_OFF.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _run_flow(call):
    """Run a flow against one Prefect API; user errors raised inside it become one line
    and exit 2."""
    from pucl.flows._server import prefect_api

    try:
        with prefect_api():
            return call()
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)


def _frame_table(frame, title: str) -> Table:
    from pucl.reporting import format_cell

    table = Table(title=title)
    for col in frame.columns:
        table.add_column(str(col), justify="left" if frame[col].dtype == object else "right",
                         overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(format_cell(v) for v in row))
    return table


@app.command("run")
def run_cmd(
    set_: SetOption = None,
    name: Annotated[str | None, typer.Option(
        help="run name (default: run-<time>-<loss>-s<seed>)")] = None,
    progress: Annotated[bool, typer.Option(help="progress bars")] = True,
) -> None:
    """Run the whole pipeline as a Prefect flow, in its own run directory (not the DVC outs)."""
    root = _project()
    overrides = _validated_overrides(root, set_)
    _prefect_env()
    from pucl.flows.pipeline import pipeline

    summary = _run_flow(lambda: pipeline(overrides=overrides, run_name=name,
                                         project=str(root), progress=progress))
    table = Table(title=f"test metrics: {summary['name']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary["metrics"].items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    out.print(table)
    out.print(f"outputs: {summary['workdir']}")
    if summary["mlflow_run_id"]:
        out.print(f"MLflow parent run: {summary['mlflow_run_id']}  (pucl ui)")


@app.command()
def serve(
    cron: Annotated[str, typer.Option(help="cron schedule of the retraining (UTC)")] = "0 2 * * *",
    name: Annotated[str, typer.Option(help="deployment name")] = "pucl-retrain",
    set_: SetOption = None,
) -> None:
    """Serve the retrain flow on a cron schedule (Ctrl-C stops it). Each run retrains on the
    current params and data and moves the MLflow 'champion' alias only on improvement."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except Exception:
        _fail(f"invalid --cron {cron!r}: expected five fields, e.g. '0 2 * * *' (02:00 daily)")
    root = _project()
    overrides = _validated_overrides(root, set_)
    _prefect_env()
    from pucl.flows.retrain import retrain

    out.print(f"serving deployment pucl-retrain/{name} on cron {cron!r} (Ctrl-C to stop)")
    _run_flow(lambda: retrain.serve(name=name, cron=cron, parameters={
        "overrides": overrides, "project": str(root)}))


RUNNERS = ("processes", "threads", "dask")


@app.command()
def sweep(
    grid: Annotated[Path, typer.Option("--grid", help="sweep file (name, seeds, grid, set)")],
    workers: Annotated[int, typer.Option(min=1, help="points run at once")] = 1,
    runner: Annotated[str, typer.Option(
        help="task runner: processes | threads | dask (a local Dask cluster)")] = "processes",
    address: Annotated[str | None, typer.Option(
        help="scheduler address of an existing Dask cluster, e.g. tcp://10.0.0.5:8786")] = None,
    by: Annotated[str | None, typer.Option(
        help="group the comparison by these params, comma-separated")] = None,
) -> None:
    """Run every point of a parameter x seed grid as its own pipeline, then compare them."""
    from pucl.sweep import load_sweep

    try:
        spec = load_sweep(grid)
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    result = _run_sweep(spec, workers, runner, address, _split_list(by))
    if result["comparison"]:
        import pandas as pd

        from pucl.reporting import with_std

        table = pd.read_csv(result["comparison"])
        out.print(_frame_table(with_std(table), f"sweep {spec.name}"))
        out.print(f"comparison: {Path(result['comparison']).parent}")


def _run_sweep(spec, workers: int, runner: str, address: str | None, by: list[str]) -> dict:
    """Validate every point, then run the sweep flow (shared by sweep and bench)."""
    if runner not in RUNNERS:
        _fail(f"invalid --runner {runner!r} (allowed: {', '.join(RUNNERS)})")
    root = _project()
    try:
        from pucl.flows.sweep import validate_points

        points = validate_points(spec, root)
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    fixed = {**spec.set}
    if workers > 1 and "base.threads" not in spec.set and "base.threads" not in spec.grid:
        # points in parallel share the cores instead of each taking all of them
        fixed["base.threads"] = max(1, (os.cpu_count() or 1) // workers)
        err.print(f"pucl: {workers} workers: base.threads = {fixed['base.threads']} per point")
    if runner == "threads" and workers > 1:
        err.print("pucl: warning: points in threads share torch's global RNG and thread "
                  "settings; use --runner processes for reproducible parallel points")
    spec = spec.model_copy(update={"set": fixed})
    _prefect_env()
    from pucl.flows.sweep import sweep as sweep_flow

    task_runner = _task_runner(runner, workers, address)
    err.print(f"pucl: sweep {spec.name}: {len(points)} points, runner "
              f"{'dask@' + address if address else runner}, {workers} worker(s)")
    return _run_flow(lambda: sweep_flow.with_options(task_runner=task_runner)(
        spec=spec.model_dump(), project=str(root), by=by))


PRESETS = Path("params") / "presets"


@app.command()
def bench(
    preset: Annotated[str | None, typer.Argument(
        help="preset name (params/presets/NAME.yaml) or a sweep file path")] = None,
    seeds: Annotated[str | None, typer.Option(help="override the preset's seeds, e.g. 0,1")] = None,
    variants: Annotated[str | None, typer.Option(
        help="run only these variants, comma-separated")] = None,
    workers: Annotated[int, typer.Option(min=1, help="points run at once")] = 1,
    runner: Annotated[str, typer.Option(
        help="task runner: processes | threads | dask")] = "processes",
    address: Annotated[str | None, typer.Option(
        help="scheduler address of an existing Dask cluster")] = None,
) -> None:
    """Run a paper protocol (a preset) over its seeds through the sweep flow and print
    test accuracy as mean +- std per variant beside the paper's number (Table 3 style).
    Without PRESET: list the presets."""
    from pucl.reporting import bench_table
    from pucl.sweep import load_sweep

    root = _project()
    if preset is None:
        _list_presets(root / PRESETS)
        return
    path = Path(preset) if preset.endswith((".yaml", ".yml")) else root / PRESETS / f"{preset}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (root / PRESETS).glob("*.yaml"))
        _fail(f"unknown preset {preset!r} (allowed: {', '.join(known) or 'none'}, or a "
              "sweep file path)")
    try:
        spec = load_sweep(path)
        update: dict = {}
        if seeds:
            update["seeds"] = _ints(seeds)
        if variants:
            wanted = _split_list(variants)
            unknown = [v for v in wanted if v not in spec.variants]
            if unknown:
                _fail(f"unknown variant {unknown[0]!r} in --variants (allowed: "
                      f"{', '.join(spec.variants) or 'none'})")
            update["variants"] = {k: v for k, v in spec.variants.items() if k in wanted}
            update["reference"] = {k: v for k, v in spec.reference.items() if k in wanted}
        from pucl.sweep import parse_sweep

        spec = parse_sweep({**spec.model_dump(), **update}, f"preset {preset}")
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    by = ["variant"] if spec.variants else list(spec.grid)
    result = _run_sweep(spec, workers, runner, address, by)
    if result["comparison"]:
        import pandas as pd

        table = bench_table(pd.read_csv(result["comparison"]), spec.reference)
        out.print(_frame_table(table, f"{spec.name}: test accuracy (%), mean +- std over "
                                      f"seeds {', '.join(map(str, spec.seeds))}"))
        out.print(f"comparison: {Path(result['comparison']).parent}")


def _list_presets(directory: Path) -> None:
    table = Table(title=f"presets ({directory})")
    table.add_column("preset")
    table.add_column("what")
    for path in sorted(directory.glob("*.yaml")):
        first = next((line.lstrip("# ").strip() for line in path.read_text().splitlines()
                      if line.startswith("#")), "")
        table.add_row(path.stem, first)
    out.print(table)


def _split_list(text: str | None) -> list[str]:
    return [v.strip() for v in (text or "").split(",") if v.strip()]


def _task_runner(kind: str, workers: int, address: str | None):
    if address or kind == "dask":
        from prefect_dask import DaskTaskRunner

        if address:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    if kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=workers)
    from prefect.task_runners import ProcessPoolTaskRunner

    return ProcessPoolTaskRunner(max_workers=workers)


@app.command()
def compare(
    experiment: Annotated[str | None, typer.Option(
        help="MLflow experiment (default: tracking.experiment)")] = None,
    sweep_ref: Annotated[str | None, typer.Option(
        "--sweep", help="only this sweep's runs: its name, its run id, or 'latest'")] = None,
    by: Annotated[str | None, typer.Option(
        help="group by these params (mean and std of the rest), comma-separated")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="where to write comparison.csv/.md and the figure")] = None,
) -> None:
    """Compare finished pipeline runs: params that differ, key test metrics, and accuracy
    against gamma = n_p / n_u per objective (logged to the sweep's parent run)."""
    from pucl.comparison import compare_runs, find_sweep, pipeline_runs
    from pucl.stages.runner import resolve_params

    root = _project()
    try:
        params = resolve_params(root)
        uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
        name = experiment or params.tracking.experiment
        try:
            store = tracking.open_store(uri, name, root)
        except Exception as exc:
            _fail(f"cannot open the MLflow store {uri}: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}")
        log_to = None
        if sweep_ref:
            found = find_sweep(store, sweep_ref)
            runs = pipeline_runs(store, found.run_id)
            log_to = store.attach(found.run_id)
            title = found.name
            target = out_dir or root / params.paths.runs / found.tags.get("sweep", found.name)
        else:
            runs = pipeline_runs(store)
            title = f"experiment {name}"
            target = out_dir or root / params.paths.runs / "comparison"
        result = compare_runs(runs, target.resolve(), _split_list(by), title=title,
                              log_to=log_to)
    except PuclError as exc:
        _fail(str(exc), exc.exit_code)
    from pucl.reporting import with_std

    out.print(_frame_table(with_std(result.table), f"{title}: {len(result.frame)} runs"))
    out.print(f"wrote {', '.join(str(p) for p in result.files)}")


if __name__ == "__main__":
    app()
