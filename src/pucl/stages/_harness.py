"""The harness around every stage: load params, seed and set threads, open the stage's
MLflow run (nested under its pipeline's parent run), call `run(ctx)`, log its metrics, and
turn errors into one line and an exit code. DVC (`python -m pucl.stages NAME`) and the
Prefect flows (`pucl.stages.runner`) both go through `execute`, so they run identical code.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pucl import tracking
from pucl.errors import DEBUG_ENV, PuclError, debugging, disk_full
from pucl.params.config import Params, load_params
from pucl.recipe.checks import check_methods, chosen_settings
from pucl.recipe.settings import flatten
from pucl.runtime import work
from pucl.runtime.device import configure
from pucl.runtime.environment import quiet_defaults
from pucl.runtime.interrupts import end_on_sigterm, run_status
from pucl.stages import NUMPY_ONLY_STAGES, STAGES
from pucl.stages._context import StageContext

PARAMS_ENV = "PUCL_PARAMS"


def params_path(root: Path) -> Path:
    return Path(os.environ.get(PARAMS_ENV) or root / "params.yaml")


def pipeline_tags(params: Params, entry: str) -> dict[str, Any]:
    """Tags of a parent (pipeline) run; `entry` says what started it."""
    return {"kind": "pipeline", "entry": entry, "dataset": params.data.dataset,
            "task": params.data.task, "seed": params.base.seed, "loss": params.pretrain.loss}


def all_params(params: Params) -> dict[str, Any]:
    """Every parameter, flattened (`pretrain.temperature`), with the settings of the
    methods in use (`prior.heldout.folds`, defaults included), for the parent run."""
    return {k: v for k, v in {**flatten(params), **chosen_settings(params)}.items()
            if not k.startswith("paths.")}


WORK = "work_gmac"  # each stage's metrics: its work (pucl.runtime.work)


def parent_rollup(stage: str, metrics: dict) -> dict:
    """What a stage adds to its pipeline's parent run, so that one row per pipeline
    holds the numbers runs are compared by, and the stage's work as `work_gmac_<stage>`."""
    if stage == "evaluate":
        own = {k: v for k, v in metrics.items() if k != WORK}
    elif stage == "build_split":
        own = {k: metrics[k] for k in ("gamma", "n_p", "n_u") if k in metrics}
    elif stage in ("pupl_label", "train_classifier"):  # a collapse shows in the run's row
        own = {k: metrics[k] for k in ("pupl_degenerate", "classifier_degenerate")
               if k in metrics}
    elif stage == "pretrain":  # an encoder from the cache counts at what it took to train
        own = {"pretrain_seconds": metrics.get("train_seconds", float("nan")),
               "pretrain_gmac": metrics.get("train_gmac", float("nan")),
               "pretrain_reused": metrics.get("reused", 0.0)}
    else:
        own = {}
    return {**own, **({f"{WORK}_{stage}": metrics[WORK]} if WORK in metrics else {})}


@contextmanager
def pipeline_run(params: Params, name: str, entry: str, tags: dict | None = None,
                 parent_run_id: str | None = None) -> Iterator[tracking.Run]:
    """The parent MLflow run of one pipeline execution (flow, pucl repro, sweep point)."""
    root = tracking.project_root()
    uri = tracking.resolve_tracking_uri(params.tracking.uri, root)
    with tracking.tracked_run(name, params.tracking.experiment, uri, root,
                              {**pipeline_tags(params, entry), **(tags or {})},
                              parent_run_id) as parent:
        parent.log_params(all_params(params))
        from pucl.production.datastore import data_identity

        name, digest, source = data_identity(params, root)
        parent.log_dataset(name, digest, source)
        yield parent


def _attach_parent(params: Params, store: tracking.Store | None, root: Path,
                   parent_run_id: str | None) -> tracking.Run | None:
    """The parent run of this stage: given, from the environment (pucl repro), or shared by
    the stages of one plain `dvc repro` (created by the first of them)."""
    if store is None:
        return None
    parent_run_id = parent_run_id or os.environ.get(tracking.PARENT_RUN_ENV)
    if parent_run_id is not None:
        return store.attach(parent_run_id)
    invocation = tracking.dvc_invocation()
    if invocation is None:
        return None
    try:
        parent = tracking.invocation_parent(
            store, invocation, "pipeline (dvc repro)",
            {**tracking.standard_tags(root), **pipeline_tags(params, "dvc")}, all_params(params))
    except Exception as exc:
        print(f"pucl: MLflow parent run unavailable ({type(exc).__name__}); continuing",
              file=sys.stderr)
        return None
    parent._safe("mark running", "update_run", status="RUNNING")
    parent.owned = True
    return parent


def execute(name: str, run: Callable[[StageContext], dict], params: Params | None = None,
            root: Path | None = None, progress: bool = True,
            parent_run_id: str | None = None) -> dict:
    """Validate params, open a tracked run (nested under the pipeline's parent run), run the
    stage, log its metrics, and roll the key numbers up to the parent."""
    quiet_defaults()
    end_on_sigterm()  # a stopped stage closes its MLflow runs as KILLED
    root = (root or Path.cwd()).resolve()
    params = params or load_params(params_path(root))
    check_methods(params)
    device = configure(params.base.seed, params.base.device, params.base.threads,
                       deterministic_torch=name not in NUMPY_ONLY_STAGES)
    tracking_root = tracking.project_root()
    uri = tracking.resolve_tracking_uri(params.tracking.uri, tracking_root)
    store = tracking.try_open_store(uri, params.tracking.experiment, tracking_root)
    parent = _attach_parent(params, store, tracking_root, parent_run_id)
    owned = parent is not None and parent.owned
    tags = {"kind": "stage", "stage": name, "dataset": params.data.dataset,
            "task": params.data.task, "seed": params.base.seed}
    try:
        with tracking.run_in(store, name, tracking_root, tags,
                             parent.run_id if parent else None) as mlrun:
            logged = {"base.seed": params.base.seed, "data.dataset": params.data.dataset,
                      "data.task": params.data.task}
            if name not in NUMPY_ONLY_STAGES:  # what the device resolved to
                logged["base.device"] = device.type
            methods = chosen_settings(params)
            for section in STAGES[name]:  # a section, sub-section or one value
                value = functools.reduce(getattr, section.split("."), params)
                logged.update(flatten(value, section) if hasattr(value, "model_dump")
                              else {section: value})
                logged.update({k: v for k, v in methods.items() if k.startswith(f"{section}.")})
            mlrun.log_params(logged)
            ctx = StageContext(name, params, root, mlrun, progress)
            with work.counting() as tally:
                metrics = run(ctx)
            metrics = {**metrics, WORK: tally.gmac}
            mlrun.log_metrics(metrics)
    except BaseException as exc:
        if owned:
            parent.finish(run_status(exc))
        raise
    if parent is not None:
        parent.log_metrics(parent_rollup(name, metrics))
        if owned:
            parent.finish("FINISHED")
    return metrics


def main_for(name: str, run: Callable[[StageContext], dict]) -> None:
    """Command-line entry: one line on stderr and exit 2 for user errors, 1 otherwise."""
    debug = debugging()
    try:
        execute(name, run)
    except PuclError as exc:
        if debug:
            traceback.print_exc()
        print(f"pucl {name}: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print(f"pucl {name}: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        if debug:
            traceback.print_exc()
        full = disk_full(exc)
        if full is not None:
            print(f"pucl {name}: error: {full}", file=sys.stderr)
            sys.exit(full.exit_code)
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"pucl {name}: internal error: {type(exc).__name__}: {first} "
              f"(set {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
        sys.exit(1)

