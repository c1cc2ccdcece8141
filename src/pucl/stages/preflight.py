"""Checks that need the data, run before any stage output is touched (`pucl repro`,
`check`, `run`, `sweep`): so a typo or an impossible setting never costs the last results."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from pucl.data import check_task, get_task, load_dataset
from pucl.data.split import (
    check_folds,
    check_validation_counts,
    resolve_val_fraction,
    why_no_validation_part,
)
from pucl.errors import DataError, ParamsError
from pucl.params.config import Params
from pucl.params.dataset import dataset_arguments
from pucl.recipe import Recipe
from pucl.recipe.checks import check_methods
from pucl.recipe.crossfit import validation_plan
from pucl.recipe.pretraining import resolve_encoder


@functools.lru_cache(maxsize=8)
def _training_labels(arguments: tuple[tuple[str, Any], ...]
                     ) -> tuple[np.ndarray, tuple[int, ...], np.ndarray | None, int]:
    """Labels, input shape and given PU labels of the training data, and the number of
    labelled test rows (cached by the loader's arguments: a sweep checks every point)."""
    data = load_dataset(**dict(arguments))
    return data.y_train, tuple(data.image_shape), data.pu_train, len(data.y_test)


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
    the image shape, the validation part is large enough."""
    check_methods(params)
    check_task(params.data.dataset, params.data.task)
    y_train, shape, given_pu, n_test = _training_labels(
        tuple(dataset_arguments(params, root).items()))
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
    if params.evaluate.tta == "hflip" and len(shape) != 3:
        raise ParamsError(f"evaluate.tta = 'hflip' mirrors images, but {params.data.dataset} "
                          f"rows have shape {list(shape)} (allowed for feature rows: none)")
    p = params.pretrain
    encoder = resolve_encoder(p.encoder, shape)
    problem = _encoder_fits(encoder, shape, p.proj_hidden, p.proj_dim)
    if problem:
        raise ParamsError(f"pretrain.encoder = {p.encoder!r} does not fit "
                          f"{params.data.dataset} images of shape {list(shape)} ({problem})")
    n_labelled = (int(given_pu[task.keep(y_train)].sum()) if given_pu is not None
                  else params.split.n_p)
    folds, setting = validation_plan(params.split, Recipe.of(params), shape, len(kept),
                                     n_labelled)
    if folds:
        check_folds(folds, n_labelled)
    in_u = params.split.scenario == "case_control"
    fraction = resolve_val_fraction(setting, n_labelled, len(kept) - n_labelled, in_u)
    if n_test == 0 and fraction == 0 and not folds:
        raise ParamsError(f"{params.data.path or params.data.dataset} has no labelled test "
                          "rows, so only the validation estimates can judge the classifier, "
                          f"and {why_no_validation_part(setting, n_labelled)}")
    if params.split.prior is None:  # else U's subsample is only known once drawn
        check_validation_counts(n_labelled, len(kept) - n_labelled, fraction, in_u)
