"""Commands that run many pipelines and compare them: sweep, bench (paper presets),
ablate (every objective) and compare (finished runs, read back from MLflow)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pucl import tracking
from pucl.cli._common import (
    SetOption,
    app,
    err,
    fail,
    frame_table,
    out,
    parse_ints,
    prefect_env,
    preset_or_exit,
    project_or_exit,
    run_flow,
    split_list,
)
from pucl.errors import PuclError


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
    from pucl.params.sweeps import parse_sweep
    from pucl.reporting.tables import ablation_tables

    root = project_or_exit()
    names = [v.strip() for v in losses.split(",") if v.strip()]
    unknown = [v for v in names if v not in CONTRASTIVE_LOSSES]
    if unknown:
        fail(f"unknown loss {unknown[0]!r} (allowed: {', '.join(CONTRASTIVE_LOSSES)})")
    # One sweep: objective x n_p x seed. The oracle prior is ignored by prior-free losses.
    try:
        from pucl.flows.sweep import validate_points

        spec = parse_sweep({
            "name": "ablation", "seeds": parse_ints(seeds),
            "grid": {"pretrain.loss": names, "split.n_p": parse_ints(n_p)},
            # every training row: the table compares objectives, it chooses nothing
            "set": {"prior.method": "oracle", "pretrain.prior": "oracle",
                    "split.val_fraction": 0.0, "pretrain.epochs": epochs,
                    "tracking.experiment": "ablation"}})

        validate_points(spec, root)  # every configuration, before running any
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    prefect_env()
    from pucl.flows.sweep import sweep as sweep_flow

    result = run_flow(lambda: sweep_flow(spec=spec.model_dump(), project=str(root)))
    commit = tracking.git_commit(root)[:12]  # reports/ rows name the commit that measured them
    markdown, table = ablation_tables([_ablation_row(point, commit)
                                       for point in result["points"]], epochs=epochs)
    from pucl.io import atomic_path, write_table

    target = root / report_dir
    write_table(target / "ablation.csv", table)
    with atomic_path(target / "ablation.md") as tmp:
        tmp.write_text(markdown)
    out.print(f"wrote {target / 'ablation.md'} and {target / 'ablation.csv'}")


def _ablation_row(point: dict, commit: str) -> dict:
    metrics, chosen = point["metrics"], point["overrides"]
    return {"loss": chosen["pretrain.loss"], "n_p": chosen["split.n_p"],
            "seed": chosen["base.seed"], "gamma": point["gamma"],
            "knn_accuracy": metrics.get("knn_accuracy"),
            "pseudo_label_accuracy": metrics.get("pseudo_label_accuracy"),
            "accuracy": metrics["accuracy"], "pretrain_seconds": point["pretrain_seconds"],
            "commit": commit}


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
    from pucl.params.sweeps import load_sweep

    try:
        spec = load_sweep(grid)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    result = _run_sweep(spec, workers, runner, address, split_list(by))
    if result["comparison"]:
        import pandas as pd

        from pucl.reporting.tables import with_std

        table = pd.read_csv(result["comparison"])
        out.print(frame_table(with_std(table), f"sweep {spec.name}"))
        out.print(f"comparison: {Path(result['comparison']).parent}")


def _run_sweep(spec, workers: int, runner: str, address: str | None, by: list[str]) -> dict:
    """Validate every point, then run the sweep flow (shared by sweep and bench)."""
    if runner not in RUNNERS:
        fail(f"invalid --runner {runner!r} (allowed: {', '.join(RUNNERS)})")
    root = project_or_exit()
    try:
        from pucl.flows.sweep import validate_points

        points = validate_points(spec, root)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    fixed = {**spec.set}
    if workers > 1 and "base.threads" not in spec.set and "base.threads" not in spec.grid:
        # points in parallel share the cores instead of each taking all of them
        fixed["base.threads"] = max(1, (os.cpu_count() or 1) // workers)
        err.print(f"pucl: {workers} workers: base.threads = {fixed['base.threads']} per point")
    if runner == "threads" and workers > 1:
        err.print("pucl: warning: points in threads share torch's global RNG and thread "
                  "settings; use --runner processes for reproducible parallel points")
    spec = spec.model_copy(update={"set": fixed})
    prefect_env()
    from pucl.flows.sweep import sweep as sweep_flow

    task_runner = _task_runner(runner, workers, address)
    err.print(f"pucl: sweep {spec.name}: {len(points)} points, runner "
              f"{'dask@' + address if address else runner}, {workers} worker(s)")
    return run_flow(lambda: sweep_flow.with_options(task_runner=task_runner)(
        spec=spec.model_dump(), project=str(root), by=by))


@app.command()
def bench(
    preset: Annotated[str | None, typer.Argument(
        help="preset name (params/presets/NAME.yaml) or a sweep file path")] = None,
    seeds: Annotated[str | None, typer.Option(help="override the preset's seeds, e.g. 0,1")] = None,
    variants: Annotated[str | None, typer.Option(
        help="run only these variants, comma-separated ('default': the preset's "
             "recommended one)")] = None,
    workers: Annotated[int, typer.Option(min=1, help="points run at once")] = 1,
    runner: Annotated[str, typer.Option(
        help="task runner: processes | threads | dask")] = "processes",
    address: Annotated[str | None, typer.Option(
        help="scheduler address of an existing Dask cluster")] = None,
    set_: SetOption = None,
    refit: Annotated[bool, typer.Option(
        "--refit", help="then train each chosen variant again on the same seeds with "
                        "every labelled positive and all of U (no validation part)")] = False,
) -> None:
    """Run a paper protocol (a preset) over its seeds through the sweep flow and print
    test accuracy as mean +- std per variant beside the paper's number (Table 3 style),
    and the variant the validation estimate chooses at each grid point (P and U alone).
    --set adds to the preset's `set`: every point gets it, unless its variant sets it; a
    grid key (split.n_p, say) set this way runs that value only. With --refit, the chosen
    variant of each grid point runs again as the sweep `<name>-refit-<point>`, without a
    validation part: the model worth reporting (its runs are tagged refit_of; the
    validation estimate describes the chosen runs, which held that part out).
    Without PRESET: list the presets."""
    from pucl.reporting.tables import bench_table

    root = project_or_exit()
    if preset is None:
        from pucl.params.presets import PRESETS

        _list_presets(root / PRESETS)
        return
    try:
        spec = _narrowed(preset_or_exit(root, preset), preset, seeds, variants, set_)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    by = [*(["variant"] if spec.variants else []), *spec.grid]  # a row per variant and point
    result = _run_sweep(spec, workers, runner, address, by)
    if result["comparison"]:
        import pandas as pd

        from pucl.params.sweeps import reference_of
        from pucl.reporting.tables import choice_lines

        grouped = pd.read_csv(result["comparison"])
        # the paired choice where the sweep could make one (reporting.paired_choice)
        picks = grouped["chosen"].astype(bool).to_numpy() if "chosen" in grouped else None
        table = bench_table(grouped, lambda row: reference_of(
            spec, row.get("variant"), {key: row[key] for key in spec.grid}), list(spec.grid),
            picks)
        out.print(frame_table(table, f"{spec.name}: test accuracy (%), mean +- std over "
                                      f"seeds {', '.join(map(str, spec.seeds))}"))
        # per grid point, the variant a user with P and U alone would take
        for line in choice_lines(grouped, by, list(spec.grid), picks):
            out.print(line, soft_wrap=True)
        out.print(f"comparison: {Path(result['comparison']).parent}")
        if refit:
            _refit_chosen(spec, grouped, by, workers, runner, address)


def _refit_chosen(spec, grouped, by: list[str], workers: int, runner: str,
                  address: str | None) -> None:
    """Each grid point's chosen variant trained again without a validation part, its
    test accuracy printed beside the chosen runs' (which held that part out)."""
    import pandas as pd

    from pucl.params.sweeps import point_label, refit_spec
    from pucl.reporting.tables import chosen

    mask = (grouped["chosen"].astype(bool).to_numpy() if "chosen" in grouped
            else chosen(grouped, list(spec.grid)))  # the paired choice where there is one
    picks = grouped[mask].to_dict("records")
    if not picks:
        fail("--refit: no variant was chosen (no run has a validation estimate; allowed: "
             "split.val_fraction above 0 and a variant that does not read the true prior)")
    for rec in picks:
        again = refit_spec(spec, rec.get("variant"), {key: rec[key] for key in spec.grid})
        result = _run_sweep(again, workers, runner, address, by)
        where = point_label(again, {key: values[0] for key, values in again.grid.items()})
        what = ", ".join(filter(None, [f"variant={rec['variant']}" if "variant" in rec
                                       else "", where]))
        if not result["comparison"]:  # no MLflow store to read the runs back from
            out.print(f"refit on every labelled positive and all of U ({what}): sweep "
                      f"{again.name}, in {result['out_dir']}", soft_wrap=True)
            continue
        refitted = pd.read_csv(result["comparison"]).iloc[0]
        out.print(f"refit on every labelled positive and all of U ({what}): test accuracy "
                  f"{100 * refitted['accuracy']:.1f} +- "
                  f"{100 * refitted.get('accuracy_std', float('nan')):.1f} over "
                  f"{refitted['n']} seeds, against {100 * rec['accuracy']:.1f} with the "
                  f"validation part held out; comparison: "
                  f"{Path(result['comparison']).parent}", soft_wrap=True)


def _narrowed(spec, preset: str, seeds: str | None, variants: str | None,
              set_: list[str] | None):
    """The preset with the command line's seeds, variants and --set (a grid key set this
    way runs that value only), checked as a sweep file is."""
    from pucl.params.sweeps import parse_sweep, select_variants

    update: dict = {}
    if set_:
        from pucl.params.config import anchor_paths, parse_assignments

        given = anchor_paths(parse_assignments(set_), Path.cwd())
        update["set"] = {**spec.set, **given}
        update["grid"] = {k: [given[k]] if k in given else v for k, v in spec.grid.items()}
    if seeds:
        update["seeds"] = parse_ints(seeds)
    if variants:
        spec = select_variants(spec, split_list(variants))
    return parse_sweep({**spec.model_dump(), **update}, f"preset {preset}")


def _list_presets(directory: Path) -> None:
    from pucl.params.presets import preset_summary
    from pucl.params.sweeps import load_sweep

    table = Table(title=f"presets ({directory}); pucl run --preset NAME runs the default variant")
    table.add_column("preset")
    table.add_column("what")
    table.add_column("default variant")
    for path in sorted(directory.glob("*.yaml")):
        first = preset_summary(path)
        try:
            default = load_sweep(path).default or "-"
        except PuclError as exc:  # one broken preset must not hide the others
            default = f"invalid: {exc}"
        table.add_row(path.stem, first, default)
    out.print(table)


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
    against gamma = n_p / n_u per value of the first --by param (default: the
    pretraining loss); name the row (run or group) with the best validation estimate,
    the choice P and U alone make. Reads the store, changes nothing in it; writes files
    under --out."""
    from pucl.reporting.comparison import (
        compare_runs,
        find_sweep,
        pipeline_runs,
        validation_scores_of,
    )
    from pucl.stages.runner import resolve_params

    root = project_or_exit()
    try:
        params = resolve_params(root)
        uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
        name = experiment or params.tracking.experiment
        store = tracking.read_store(uri, name)
        if sweep_ref:
            found = find_sweep(store, sweep_ref)
            runs = pipeline_runs(store, found.run_id)
            title = found.name
            target = out_dir or root / params.paths.runs / found.tags.get("sweep", found.name)
        else:
            runs = pipeline_runs(store)
            title = f"experiment {name}"
            target = out_dir or root / params.paths.runs / "comparison"
        result = compare_runs(runs, target.resolve(), split_list(by), title=title,
                              scores_of=validation_scores_of(store))
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    from pucl.reporting.tables import with_std

    out.print(frame_table(with_std(result.table), f"{title}: {len(result.frame)} runs"))
    for line in result.choice:
        out.print(line, soft_wrap=True)
    out.print(f"wrote {', '.join(str(p) for p in result.files)}")
