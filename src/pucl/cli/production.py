"""Commands of the production cycle (docs/production.md): `data init | add | status`
grow the tracked dataset, `retrain` runs one pass of the retrain flow, `predict` scores
new inputs with a registered classifier."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pucl import tracking
from pucl.cli._common import (
    SetOption,
    app,
    err,
    fail,
    out,
    prefect_env,
    project_or_exit,
    run_flow,
    validated_overrides,
)
from pucl.errors import PuclError

data_app = typer.Typer(help="The tracked dataset (paths.dataset): create it, add batches, "
                       "show its version.", no_args_is_help=True)
app.add_typer(data_app, name="data")


def _typed(path: str) -> Path:
    """A path as the user typed it: relative to the current directory."""
    return Path(path).expanduser().resolve()


def _dataset(set_: list[str] | None):
    """Project, params (with --set) and the tracked dataset's directory. Unlike the other
    commands, the data is not checked: creating it is what these commands are for."""
    from pucl.params.config import anchor_paths, parse_assignments
    from pucl.stages.runner import resolve_params

    root = project_or_exit()
    try:
        overrides = anchor_paths(parse_assignments(set_ or []), Path.cwd())
        params = resolve_params(root, overrides)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    return root, params, Path(params.paths.dataset)


def _log_data_run(root: Path, params, directory: Path, version, name: str, tags: dict,
                  metrics: dict) -> None:
    """One MLflow run (kind=data) per change of the tracked dataset, with its version as
    the run's dataset input (named as pipeline runs on it name theirs)."""
    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    with tracking.tracked_run(name, params.tracking.experiment, uri, root,
                              {"kind": "data", **version.as_tags(), **tags}) as run:
        run.log_metrics(metrics)
        run.log_dataset("tracked:given", version.digest, str(directory))


@data_app.command("init")
def data_init(
    source: Annotated[str, typer.Argument(
        help="a dataset with class labels (default: the embedded mnist5k, labelled by "
             "data.task and split.n_p), or an npz file / image folder of your own")] = "mnist5k",
    rows: Annotated[int | None, typer.Option(
        help="take this many training rows (seeded by base.seed); default all")] = None,
    rest: Annotated[str | None, typer.Option(
        help="write the training rows not taken to this npz, a batch to add later")] = None,
    set_: SetOption = None,
) -> None:
    """Create the tracked dataset: its frozen holdout and its first batch, as a DVC
    version. Refuses when it already holds data."""
    from pucl.production import datastore

    root, params, directory = _dataset(set_)
    rest_path = _typed(rest) if rest else None
    try:
        if rest_path is not None and rest_path.suffix != ".npz":
            raise PuclError(f"--rest {rest}: the batch file must end in .npz")
        source_arg = str(_typed(source)) if Path(source).exists() else source
        batch, holdout = datastore.initial_batch(
            params, source_arg, Path(params.paths.data_root))
        first, remaining = datastore.take_rows(batch, rows, params.base.seed)
        holdout = datastore.freeze_prior(params, holdout, first)
        version = datastore.init_dataset(root, directory, first, holdout)
        if rest_path is not None and remaining is not None:
            datastore.write_npz(rest_path, remaining.arrays())
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    _log_data_run(root, params, directory, version, "data init",
                  {"data.batch": "00000", "data.source": source},
                  {"rows": len(first.x), "positives": int(first.pu.sum()),
                   "holdout_rows": len(holdout.x),
                   **({"holdout_prior": holdout.prior} if holdout.prior is not None else {})})
    kind = ("labelled" if holdout.pu is None else
            f"PU: {int(holdout.pu.sum())} labelled positive, U's prior {holdout.prior:.4f} "
            "estimated and frozen with it")
    if holdout.pu is not None:
        _say_holdout_width(params, holdout)
    out.print(f"tracked dataset {directory}: {len(first.x)} training rows "
              f"({int(first.pu.sum())} labelled positive), holdout {len(holdout.x)} rows "
              f"({kind}); version {version.digest[:12]} (DVC {version.dvc_md5})")
    if rest_path is not None and remaining is not None:
        out.print(f"the other {len(remaining.x)} rows: {rest_path} (pucl data add {rest})")
    _advise_use(params, first.pu, first.x.shape[1:], holdout.pu is None)


def _say_holdout_width(params, holdout) -> None:
    """What a PU holdout of this size can tell: the half-width of a label-free accuracy
    estimate on it, for a model right on 90% of each class, with the prior's part that
    every retrain's interval carries (evaluate.prior_error, or the holdout prior's own
    half-width where that is wider)."""
    from pucl.data.split import unlabeled_rows
    from pucl.evaluation.label_free import accuracy_halfwidth
    from pucl.recipe.prior import error_allowed

    n_p = int(holdout.pu.sum())
    n_u = int(unlabeled_rows(holdout.pu == 1, params.split.scenario).sum())
    prior_error = error_allowed(params.evaluate.prior_error, holdout.prior_halfwidth)
    rows = accuracy_halfwidth(n_p, n_u, holdout.prior)
    width = accuracy_halfwidth(n_p, n_u, holdout.prior, prior_error=prior_error)
    out.print(f"the holdout's {n_p} labelled positives and {n_u} unlabeled rows estimate a "
              f"model's accuracy within about +-{width:.3f} (95%, for a model right on 90% "
              f"of each class: +-{rows:.3f} from the rows, with the prior known to "
              f"+-{prior_error:.3f}); retrains promote only when the paired difference clears "
              "tracking.min_improvement. A larger split.val_fraction at init narrows the "
              "rows' part; only a more precise prior narrows the prior's",
              soft_wrap=True)


# What params.yaml needs to train on the tracked dataset (`pucl data use` writes it)
TRACKED = {"data.dataset": "tracked", "data.task": "given"}


def _advise_use(params, pu, in_shape, labelled_holdout: bool) -> None:
    """After init: the command that points params.yaml at the dataset, and a warning when
    retraining on these rows needs another split.val_fraction than params' own."""
    from pucl.production import datastore

    try:
        fraction = datastore.validation_fraction_for(params, pu, in_shape, labelled_holdout)
    except PuclError as exc:
        err.print(f"pucl: warning: {exc}", soft_wrap=True)
        return
    if fraction != params.split.val_fraction:
        err.print(f"pucl: warning: split.val_fraction = {params.split.val_fraction} leaves a "
                  f"retrain on these {len(pu)} rows ({int(pu.sum())} labelled positive) too "
                  f"small a validation part (at least 20 labelled positives and 20 "
                  f"unlabeled rows); `pucl data use` sets it to {fraction:g}", soft_wrap=True)
    out.print("train on it: `pucl data use` points params.yaml at it (data.dataset: tracked, "
              "data.task: given, a split.val_fraction its rows support)", soft_wrap=True)


@data_app.command("use")
def data_use(set_: SetOption = None) -> None:
    """Point params.yaml at the tracked dataset: data.dataset tracked, data.task given,
    and a split.val_fraction whose validation part its training rows can fill (at least
    20 labelled positives and 20 unlabeled rows), so that every later retrain runs
    without --set. Only those values change; comments and every other line stay."""
    import numpy as np

    from pucl.data.tracked import batch_files, is_initialised, read_batch, read_holdout
    from pucl.params.config import parse_params
    from pucl.params.editing import write_settings
    from pucl.production import datastore

    root, params, directory = _dataset(set_)
    if not is_initialised(directory):
        fail(f"the tracked dataset {directory} holds no data yet (run: pucl data init "
             "[SOURCE])", 2)
    try:
        files = batch_files(directory)
        first = read_batch(files[0])  # every batch's rows share its shape
        pu = np.concatenate([first.pu, *(read_batch(file).pu for file in files[1:])])
        fraction = datastore.validation_fraction_for(params, pu, first.x.shape[1:],
                                                     read_holdout(directory).labelled)
        changed = write_settings(root / "params.yaml",
                                 {**TRACKED, "split.val_fraction": fraction}, parse_params)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    for key, (old, new) in changed.items():
        out.print(f"params.yaml: {key}: {old} -> {new}")
    if not changed:
        out.print("params.yaml already trains on the tracked dataset")


@data_app.command("reestimate-prior")
def data_reestimate_prior(set_: SetOption = None) -> None:
    """Estimate a PU holdout's frozen prior again, by prior.method, on the rows it was
    first estimated on (the first batch), as a new DVC version. Every later retrain
    scores with the new prior; the old one stays in DVC and on the data run."""
    from pucl.production import datastore

    root, params, directory = _dataset(set_)
    try:
        before, after, version = datastore.reestimate_holdout_prior(params, root, directory)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    _log_data_run(root, params, directory, version, "data reestimate-prior",
                  {"holdout.prior_before": f"{before:.6f}",
                   "prior.method": params.prior.method},
                  {"holdout_prior": after})
    out.print(f"holdout prior of {directory}: {before:.4f} -> {after:.4f} "
              f"({params.prior.method}); version {version.digest[:12]}")


@data_app.command("add")
def data_add(
    path: Annotated[str, typer.Argument(
        help="the batch: npz with x, pu[, y], or a folder with positive/ and unlabeled/")],
    set_: SetOption = None,
) -> None:
    """Append a batch to the tracked dataset as a new DVC version. It is checked whole
    first (shape, dtype, labels, the batch data contract): refused, nothing changes."""
    from pucl.production import datastore

    root, params, directory = _dataset(set_)
    try:
        batch_id, rows, positives, version = datastore.add_batch(
            root, directory, _typed(path), validate=params.validation.enabled)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    watch = _watch(params, root, batch_id)
    _log_data_run(root, params, directory, version, f"data add {batch_id}",
                  {"data.batch": batch_id, "data.source": str(path),
                   **(watch.tags() if watch else {})},
                  {"rows": rows, "positives": positives, "total_rows": version.rows,
                   **(watch.metrics() if watch else {})})
    out.print(f"batch {batch_id}: {rows} rows ({positives} labelled positive) added to "
              f"{directory}; {version.batches} batches, {version.rows} rows; version "
              f"{version.digest[:12]} (DVC {version.dvc_md5})")
    if watch is not None and watch.accuracy is not None:
        low, high = watch.accuracy.interval()
        out.print(f"champion v{watch.champion_version} on it: estimated accuracy "
                  f"{watch.accuracy.value:.4f} [{low:.4f}, {high:.4f}], U's prior "
                  f"{watch.prior:.4f}")
    if watch is not None and watch.alert:
        err.print(f"pucl: monitor.alert: {watch.alert}")


def _watch(params, root: Path, batch_id: str):
    """The batch watched (pucl.production.monitoring), or None with a warning: the batch is in
    already, and a store or model that cannot be read must not undo that."""
    from pucl.production.monitoring import watch_batch

    try:
        return watch_batch(params, root, batch_id)
    except Exception as exc:  # noqa: BLE001 - reported, and the add stands
        err.print(f"pucl: warning: batch {batch_id} added, but not watched "
                  f"({tracking.first_line(exc)})")
        return None


@data_app.command("status")
def data_status(set_: SetOption = None) -> None:
    """The tracked dataset's batches, rows and version."""
    from pucl.data.tracked import is_initialised
    from pucl.production import datastore

    _, _, directory = _dataset(set_)
    if not is_initialised(directory):
        out.print(f"tracked dataset {directory}: no data yet (pucl data init [SOURCE])")
        return
    v = datastore.current_version(directory)
    out.print(f"tracked dataset {directory}: {v.batches} batches, {v.rows} training rows; "
              f"version {v.digest[:12]}, DVC {v.dvc_md5}")


@app.command()
def retrain(set_: SetOption = None,
            wait: Annotated[float, typer.Option(
                min=0, help="seconds to wait for a retrain already running (then refuse)")] = 0,
            progress: Annotated[bool, typer.Option(help="progress bars")] = True) -> None:
    """One pass of the retrain flow (what `pucl serve` schedules): skip when nothing
    changed since the champion, else train a challenger, score both on the frozen holdout
    and promote by the margin rule."""
    root = project_or_exit()
    overrides = validated_overrides(root, set_)
    prefect_env()
    from pucl.flows.retrain import open_registry_store
    from pucl.flows.retrain import retrain as retrain_flow
    from pucl.stages.runner import resolve_params

    try:  # before a Prefect server starts: no registry, no retrain
        open_registry_store(resolve_params(root, overrides), root)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)

    d = run_flow(lambda: retrain_flow(overrides=overrides, project=str(root),
                                       progress=progress, wait=wait))

    def show(v):
        return "none" if v is None else f"{v:.4f}"

    out.print(f"retrain: {d['decision']} - {d['reason']}")
    kind = "estimated from P and U" if d["score_kind"] == "estimated" else "labelled"
    out.print(f"{d['metric']} ({kind}) on the holdout (sha256 {d['holdout_sha256'][:12]}): "
              "champion "
              f"{show(d['champion_score'])}, challenger {show(d['challenger_score'])}; "
              f"champion is v{d['champion_version']}")
    if d["prior_drift"] is not None:
        out.print(f"prior of U {d['prior_estimate']:.4f} (drift {d['prior_drift']:+.4f} "
                  "from the champion's data)")
    if d["new_data_prior"] is not None:
        out.print(f"prior of the {d['new_rows']} rows of U that arrived since the "
                  f"champion: {d['new_data_prior']:.4f} (drift {d['new_data_drift']:+.4f})")
    if d["run_id"]:
        out.print(f"MLflow run: {d['run_id']}  (pucl ui)")


@app.command()
def predict(
    inputs: Annotated[str, typer.Argument(help="npz with x, or a folder of images")],
    out_file: Annotated[str, typer.Option("--out", help="scores: .csv or .parquet")],
    model: Annotated[str | None, typer.Option(
        help="a registered model (NAME, NAME@ALIAS, NAME/VERSION), a pipeline run (its "
             "directory, e.g. data/runs/NAME, or its name), a file of PUClassifier.save "
             "or an MLflow URI (runs:/..., models:/...); default: "
             "tracking.registered_model@champion")] = None,
    threshold: Annotated[float, typer.Option(
        help="label = 1 when the score P(y=1|x) is at least this")] = 0.5,
    tracking_uri: Annotated[str | None, typer.Option(
        help="MLflow store (default: MLFLOW_TRACKING_URI, else the project's)")] = None,
    progress: Annotated[bool, typer.Option(help="progress bar")] = True,
) -> None:
    """Score new inputs with a trained classifier: one row per input with its score
    P(y = 1 | x) and its label (score >= threshold)."""
    import os

    from pucl.production import serving

    if not 0.0 <= threshold <= 1.0:
        fail(f"--threshold {threshold}: must be in [0, 1]")
    target = _typed(out_file)
    uri, reference, runs = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI"), model, None
    if uri is not None and "://" not in uri:
        uri = tracking.resolve_tracking_uri(uri, Path.cwd())
    root = tracking.project_root()
    if (root / "params.yaml").exists():  # the project's settings, when run inside one
        from pucl.params.config import load_params

        try:
            params = load_params(root / "params.yaml")
        except PuclError as exc:
            fail(str(exc), exc.exit_code)
        uri = uri or tracking.resolve_tracking_uri(params.tracking.uri, root)
        reference = reference or f"{params.tracking.registered_model}@{tracking.CHAMPION}"
        runs = root / params.paths.runs
    elif reference is None:
        fail("outside a project: give --model (a run directory, a file of "
              "PUClassifier.save, NAME@ALIAS with --tracking-uri, or an MLflow URI)")
    try:
        serving.check_output(target)
        data = serving.read_inputs(_typed(inputs))
        classifier, label = serving.open_model(reference, uri, runs)
        scores = serving.score(classifier, data.x, progress, label)
        serving.write_scores(target, data, scores, threshold)
    except PuclError as exc:
        fail(str(exc), exc.exit_code)
    positive = int((scores >= threshold).sum())
    out.print(f"{len(scores)} rows scored with {label}: {positive} labelled 1 "
              f"(score >= {threshold:g}) -> {target}")
