"""What every stage shares: params loading, atomic output writing, tracking, error exits.

A stage module defines `run(ctx) -> dict` (reads its inputs, calls the core, writes its
declared outputs through `ctx`) and `main()` = `execute(NAME, run)`. Flows call the same
`execute`, so DVC and Prefect run identical code.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pucl import tracking
from pucl.config import Params, flatten, load_params
from pucl.data import ImageData, check_task, get_task, load_dataset
from pucl.errors import DataError, ParamsError, PuclError
from pucl.runtime import configure

PARAMS_ENV = "PUCL_PARAMS"
DEBUG_ENV = "PUCL_DEBUG"

# Which params sections each stage reads (mirrors `params:` in dvc.yaml).
STAGE_SECTIONS: dict[str, tuple[str, ...]] = {
    "build_split": ("data", "split", "validation"),
    "estimate_prior": ("data", "prior"),
    "pretrain": ("data", "pretrain"),
    "pupl_label": ("data", "pupl", "validation"),
    "train_classifier": ("data", "classifier", "pretrain.augment"),  # augment: fine-tuning
    "evaluate": ("data", "evaluate", "validation", "pretrain.augment", "pretrain.nonneg"),
}


NUMPY_ONLY_STAGES = ("build_split", "estimate_prior")
MANIFEST_COLUMNS = ("index", "split", "pu", "in_u", "y")
LABEL_COLUMNS = ("index", "pseudo_label")


@dataclass
class StageContext:
    name: str
    params: Params
    root: Path
    run: tracking.Run
    progress: bool = True
    validations: dict = field(default_factory=dict)

    def path(self, section: str, filename: str) -> Path:
        """An input or output file under the directory `paths.<section>`."""
        return (self.root / getattr(self.params.paths, section) / filename).resolve()

    def data(self) -> ImageData:
        p = self.params
        check_task(p.data.dataset, p.data.task)
        return load_dataset(p.data.dataset, root=str(self.root / p.paths.data_root),
                            test_fraction=p.data.test_fraction, seed=p.data.seed,
                            download=p.data.download, path=data_path(p, self.root))

    def task(self):
        return get_task(self.params.data.task)

    def manifest(self) -> pd.DataFrame:
        return read_table(self.path("split", "manifest.parquet"), MANIFEST_COLUMNS)

    def validate(self, build: Callable[[], Any]) -> Any:
        """Run a data-contract suite (`build()` returns its report) when validation is on.
        The full report goes to MLflow; a failed suite stops the stage with one line."""
        if not self.params.validation.enabled:
            return None
        from pucl.validation import enforce

        report = build()
        self.run.log_text(json.dumps(report.to_dict(), indent=2),
                          f"validation/{report.suite}.json")
        self.validations[report.suite] = {"success": report.success,
                                          "evaluated": len(report.results),
                                          "failed": len(report.failures)}
        return enforce(report)

    def write_validation(self, section: str) -> None:
        """The suites' outcome as a DVC metrics file of the stage (empty when off)."""
        write_json(self.path(section, "validation.json"), self.validations)

    def class_prior(self, choice: str | float) -> tuple[float, str]:
        """A prior setting ('estimate', 'oracle' or a number) as (value, source); the
        source says where it came from and is logged as a tag (oracle is never hidden)."""
        if isinstance(choice, float):
            return choice, "given"
        report = self.read_json("prior", "prior.json")
        if choice == "oracle":
            if report.get("prior_true") is None:
                raise ParamsError("prior 'oracle' needs the true labels of U, which this "
                                  "data does not have (allowed here: estimate or a number)")
            return float(report["prior_true"]), "oracle"
        return float(report["prior"]), "oracle" if report.get("oracle") else report["method"]

    def read_json(self, section: str, filename: str) -> dict:
        path = self.path(section, filename)
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise DataError(f"missing input {path}: run the stage that writes it first "
                            "(pucl repro)") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"input {path} is not valid JSON: {exc}") from None


def data_path(params: Params, root: Path) -> str | None:
    """data.path (bring-your-own file or folder) resolved against the project root."""
    return str(root / params.data.path) if params.data.path else None


@functools.lru_cache(maxsize=8)
def _training_labels(dataset: str, data_root: str, test_fraction: float, seed: int,
                     download: bool, path: str | None
                     ) -> tuple[np.ndarray, tuple[int, ...], np.ndarray | None]:
    """Labels, input shape and given PU labels of the training data (cached: a sweep
    checks every point)."""
    data = load_dataset(dataset, root=data_root, test_fraction=test_fraction, seed=seed,
                        download=download, path=path)
    return data.y_train, tuple(data.image_shape), data.pu_train


@functools.lru_cache(maxsize=8)
def _encoder_fits(encoder: str, shape: tuple[int, ...], proj_hidden: int, proj_dim: int
                  ) -> str | None:
    """None when the model takes images of this shape, else why not."""
    import torch

    from pucl.models import ContrastiveModel

    try:
        model = ContrastiveModel(encoder, shape, proj_hidden, proj_dim).eval()
        with torch.no_grad():
            model(torch.zeros(2, *shape))
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


def check_inputs(params: Params, root: Path) -> None:
    """Rules that need the data, checked before any stage output is touched (pucl repro,
    check, run, sweep): the data loads, n_p fits the task's positives, the encoder fits
    the image shape."""
    check_task(params.data.dataset, params.data.task)
    y_train, shape, given_pu = _training_labels(
        params.data.dataset, str(root / params.paths.data_root), params.data.test_fraction,
        params.data.seed, params.data.download, data_path(params, root))
    task = get_task(params.data.task)
    kept = y_train[task.keep(y_train)]
    positives = int(task.binarize(kept).sum())
    if given_pu is not None:  # bring your own: the file's PU labels replace split.n_p
        if params.split.prior is not None:
            raise ParamsError(f"split.prior = {params.split.prior} needs true labels for "
                              f"every row; dataset '{params.data.dataset}' gives its own PU "
                              "split (allowed: null)")
    elif positives == 0:
        raise DataError(f"the {params.data.dataset} training data holds no positive of task "
                        f"{params.data.task}: nothing can be labelled")
    elif params.split.n_p > positives:
        raise ParamsError(f"split.n_p = {params.split.n_p} exceeds the {positives} positives "
                          f"of task {params.data.task} in the {params.data.dataset} training "
                          f"data (allowed: 1 to {positives})")
    elif params.split.scenario == "single_dataset" and params.split.n_p >= len(kept):
        raise DataError(f"split.n_p = {params.split.n_p} labels every training row: with "
                        "scenario single_dataset the unlabeled set U would be empty")
    p = params.pretrain
    problem = _encoder_fits(p.encoder, shape, p.proj_hidden, p.proj_dim)
    if problem:
        raise ParamsError(f"pretrain.encoder = {p.encoder!r} does not fit "
                          f"{params.data.dataset} images of shape {list(shape)} ({problem})")


def read_table(path: Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """A stage's table input, with the columns the reader relies on."""
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise DataError(f"missing input {path}: run the stage that writes it first "
                        "(pucl repro)") from None
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise DataError(f"cannot read {path}: {type(exc).__name__}: {first}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"{path} lacks the columns {missing} (has {list(frame.columns)}): "
                        "rerun the stage that writes it")
    return frame


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only on success, so a
    crash never leaves a half-written output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_json(path: Path, data: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_jsonable(data), indent=2, sort_keys=True) + "\n")


def write_table(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        if path.suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)


def save_figure(path: Path, fig) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip("."), dpi=110, bbox_inches="tight")
    plt.close(fig)


def params_path(root: Path) -> Path:
    return Path(os.environ.get(PARAMS_ENV) or root / "params.yaml")


def pipeline_tags(params: Params, entry: str) -> dict[str, Any]:
    """Tags of a parent (pipeline) run; `entry` says what started it."""
    return {"kind": "pipeline", "entry": entry, "dataset": params.data.dataset,
            "task": params.data.task, "seed": params.base.seed, "loss": params.pretrain.loss}


def all_params(params: Params) -> dict[str, Any]:
    """Every parameter, flattened (`pretrain.temperature`), for the parent run."""
    return {k: v for k, v in flatten(params).items() if not k.startswith("paths.")}


def parent_rollup(stage: str, metrics: dict) -> dict:
    """What a stage adds to its pipeline's parent run, so that one row per pipeline
    holds the numbers runs are compared by."""
    if stage == "evaluate":
        return metrics
    if stage == "build_split":
        return {k: metrics[k] for k in ("gamma", "n_p", "n_u") if k in metrics}
    if stage == "pretrain":
        return {"pretrain_seconds": metrics.get("train_seconds", float("nan"))}
    return {}


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
    root = (root or Path.cwd()).resolve()
    params = params or load_params(params_path(root))
    configure(params.base.seed, params.base.device, params.base.threads,
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
            for section in STAGE_SECTIONS[name]:  # a section, sub-section or one value
                value = functools.reduce(getattr, section.split("."), params)
                logged.update(flatten(value, section) if hasattr(value, "model_dump")
                              else {section: value})
            mlrun.log_params(logged)
            ctx = StageContext(name, params, root, mlrun, progress)
            metrics = run(ctx)
            mlrun.log_metrics(metrics)
    except BaseException:
        if owned:
            parent.finish("FAILED")
        raise
    if parent is not None:
        parent.log_metrics(parent_rollup(name, metrics))
        if owned:
            parent.finish("FINISHED")
    return metrics


def main_for(name: str, run: Callable[[StageContext], dict]) -> None:
    """Command-line entry: one line on stderr and exit 2 for user errors, 1 otherwise."""
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
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
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"pucl {name}: internal error: {type(exc).__name__}: {first} "
              f"(set {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
        sys.exit(1)

