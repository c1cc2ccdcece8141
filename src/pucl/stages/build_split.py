"""Stage build_split: the PU split of the training set, plus the labelled test split.

Writes `manifest.parquet` (one row per used image: index into its split, split (train,
val: the held-out validation part, test), pu = labelled positive, in_u = member of U,
y = true binary label, label = original class; y and label are for evaluation only; with
split.folds, fold = the cross-fitting fold of a training row, -1 on test rows) and
`summary.json`. Later stages train on the `train` rows only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pucl.data.catalog import dataset_spec
from pucl.data.split import (
    PUSplit,
    cap_unlabeled,
    crossfit_folds,
    given_pu_split,
    make_pu_split,
    validation_rows,
)
from pucl.errors import ParamsError
from pucl.io import write_json, write_table
from pucl.recipe import Recipe
from pucl.recipe.crossfit import validation_plan
from pucl.stages._context import StageContext
from pucl.validation import suites

NAME = "build_split"


def run(ctx: StageContext) -> dict:
    p = ctx.params
    data = ctx.data()
    task = ctx.task()
    spec = dataset_spec(p.data.dataset)
    ctx.validate(lambda: suites.raw_data(data.x_train, data.y_train, data.x_test, data.y_test,
                                         spec.classes, spec.image_shape))
    rng = np.random.default_rng(p.base.seed)

    keep_train = np.flatnonzero(task.keep(data.y_train))
    labels = data.y_train[keep_train]
    split = cap_unlabeled(pu_split(p, data, keep_train, task, rng), p.split.max_unlabeled,
                          rng)  # draws only above the cap
    folds, part = validation_plan(p.split, Recipe.of(p), data.x_train.shape[1:],
                                  len(keep_train), int(split.labeled.sum()))
    # drawn after the split, so that val_fraction 0 leaves the split as it was
    held = validation_rows(split, part, rng)
    y = np.where(labels < 0, -1, task.binarize(labels))  # -1: label unknown
    used = split.used
    train = pd.DataFrame({
        "index": keep_train[used], "split": np.where(held[used], "val", "train"),
        "pu": split.labeled[used].astype(np.int8), "in_u": split.in_u[used],
        "y": y[used].astype(np.int8), "label": labels[used],
    })
    keep_test = np.flatnonzero(task.keep(data.y_test))
    test = pd.DataFrame({
        "index": keep_test, "split": "test", "pu": np.int8(0), "in_u": False,
        "y": task.binarize(data.y_test[keep_test]).astype(np.int8),
        "label": data.y_test[keep_test],
    })
    if folds:  # cross-fitting: the fold each training row is left out of
        train["fold"] = crossfit_folds(split.labeled[used], split.in_u[used], folds,
                                       p.base.seed)
        test["fold"] = -1
    manifest = pd.concat([train, test], ignore_index=True)
    summary = {
        **PUSplit(labeled=split.labeled & ~held, in_u=split.in_u & ~held).summary(y),
        **validation_summary(PUSplit(labeled=split.labeled & held, in_u=split.in_u & held), y),
        "n_test": len(test),
        "prior_test_true": float(test["y"].mean()),
        "scenario": p.split.scenario,
        "dataset": p.data.dataset,
        "task": p.data.task,
        "folds": folds,
    }
    ctx.validate(lambda: suites.pu_split(
        manifest, summary, data.x_train[train["index"].to_numpy()],
        data.x_test[test["index"].to_numpy()], int(split.labeled.sum()), p.split.prior,
        p.validation.prior_tolerance))
    write_table(ctx.path("split", "manifest.parquet"), manifest)
    write_json(ctx.path("split", "summary.json"), summary)
    ctx.write_validation("split")
    ctx.run.log_artifact(ctx.path("split", "summary.json"))
    ctx.run.log_artifact(ctx.path("split", "manifest.parquet"))
    return {k: v for k, v in summary.items() if isinstance(v, (int, float))}



def pu_split(p, data, keep_train: np.ndarray, task, rng: np.random.Generator) -> PUSplit:
    """The PU split of the task's training rows: the data's own (npz, folder), else drawn."""
    if data.pu_train is None:
        return make_pu_split(data.y_train[keep_train], task.positive, p.split.n_p,
                             p.split.scenario, rng, prior=p.split.prior)
    if p.split.prior is not None:  # bring your own: the file names its labelled positives
        raise ParamsError(f"split.prior = {p.split.prior} needs the true label of every "
                          f"training row; dataset '{p.data.dataset}' gives its own PU "
                          "split (allowed: null)")
    return given_pu_split(data.pu_train[keep_train], p.split.scenario)


def validation_summary(val: PUSplit, y: np.ndarray) -> dict:
    """The validation part's counts and U's true prior in it (none without a part)."""
    if not val.used.any():
        return {}
    counts = val.summary(y)
    return {"n_val_p": counts["n_p"], "n_val_u": counts["n_u"],
            "prior_val_true": counts["prior_u_true"]}
