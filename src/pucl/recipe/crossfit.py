"""Cross-fitted scores (split.folds): every training row scored by a classifier that did
not train on it, so the label-free estimates read every labelled positive and every
member of U while the shipped classifier trains on all of them.

Folds for the classifier step only: the prior, the encoders and PUPL's pseudo-labels are
fitted once on every row, as for the shipped classifier, and each fold fits the heads
(and their fine-tuning) again from those pretrained encoders without its rows. What the
encoder learnt from a held-out positive's label is the estimate's one leak; docs/
evaluation.md says how large it measured. With `classifier.shipped: ensemble` the folds'
classifiers are the shipped classifier too (their scores averaged), and nothing is refit.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pucl.classify.fit import Member
from pucl.classify.objectives import TrainingRows
from pucl.data.split import resolve_folds
from pucl.errors import ParamsError
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.classifier import classifier_objective, fit_members, member_jobs
from pucl.recipe.scoring import member_scores, view_features
from pucl.recipe.settings import SplitParams


def validation_plan(split: SplitParams, recipe: Recipe, in_shape: Sequence[int], n_rows: int,
                    n_labelled: int) -> tuple[int, float | str]:
    """(folds, the validation part's share setting) of split.folds and split.val_fraction
    for a task of `n_rows` training rows of `in_shape`, `n_labelled` of them labelled: no
    part when cross-fitting, and `auto` folds only for a classifier the folds can refit."""
    refits = classifier_objective(for_inputs(recipe, in_shape)).trains
    folds = resolve_folds(split.folds, split.val_fraction, n_rows, n_labelled, refits)
    return folds, (0.0 if folds else split.val_fraction)


def without(rows: TrainingRows, out: np.ndarray) -> TrainingRows:
    """The training rows less those where `out` is True."""
    keep = ~out
    pseudo = None if rows.pseudo_labels is None else rows.pseudo_labels[keep]
    return TrainingRows(rows.index[keep], rows.labelled[keep], rows.in_u[keep], pseudo)


@dataclass
class CrossFitted:
    """Each training row's score out of its fold, and the folds' classifiers: per fold
    and encoder, (which pretrained encoder it started from, the fitted model, its member)."""

    scores: np.ndarray
    members: list[tuple[int, ContrastiveModel, Member]]


def fit_folds(recipe: Recipe, models: Sequence[ContrastiveModel], x: np.ndarray,
              rows: TrainingRows, fold: np.ndarray, prior: float | None,
              device: torch.device, method_heads: Sequence[nn.Module | None] | None = None,
              progress: bool = False,
              announce: Callable[[int, int], None] | None = None, workers: int = 1,
              threads: int | None = None) -> CrossFitted:
    """The classifier fitted once per fold without its rows (`fold[i]` in 0 .. K - 1; a
    row of fold -1 is never left out and scores NaN), from copies of the pretrained
    `models`, which stay as they are; each row scored as the shipped classifier scores:
    every member, every test-time view (evaluate.tta, tta_shift). The folds' fits are
    independent: with `workers` > 1 they run side by side (`fit_members`)."""
    folds = int(fold.max()) + 1
    if not classifier_objective(recipe).trains:
        raise ParamsError(f"split.folds = {folds} refits the classifier without "
                          f"each fold, and classifier.objective = "
                          f"'{recipe.classifier.objective}' comes ready-made from "
                          "pretraining (allowed with folds: an objective the head learns, "
                          "e.g. nnpu)")
    copies = [[copy.deepcopy(model) for model in models] for _ in range(folds)]
    jobs = [job for k in range(folds) for job in member_jobs(
        recipe, copies[k], x, without(rows, fold == k), prior, method_heads)[1]]

    def fold_starts(j: int, n: int) -> None:  # job j: fold j // members
        if announce is not None and j % len(models) == 0:
            announce(j // len(models), folds)

    fitted = fit_members(recipe, jobs, device, progress, workers, threads, fold_starts)
    scores, fitted_members = np.full(len(rows.index), np.nan), []
    for k in range(folds):
        out = fold == k
        mine = fitted[k * len(models):(k + 1) * len(models)]
        members = [(model.eval(), member.head.eval())
                   for model, member in zip(copies[k], mine, strict=True)]
        features = view_features(recipe, members, x[rows.index[out]],
                                 recipe.classifier.features, device)
        scores[out] = member_scores([head for _, head in members], features,
                                    device).mean(axis=(0, 1))
        fitted_members += [(m, model, member) for m, (model, member)
                           in enumerate(zip(copies[k], mine, strict=True))]
    return CrossFitted(scores, fitted_members)
