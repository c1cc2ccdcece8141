"""The recipe's steps in pipeline order, in memory: what the six stages compute one
process each, as `PUClassifier.fit` runs it. Each step starts from the global random
state a stage process starts with (`seed_everything`), so the model is the pipeline's."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pucl.classify.heads import rebuild
from pucl.classify.objectives import TrainingRows
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe, seed_everything
from pucl.recipe.by_input import for_inputs
from pucl.recipe.classifier import fit_classifiers, reads_pseudo_labels
from pucl.recipe.crossfit import fit_folds
from pucl.recipe.pretraining import member_seeds, needs_prior, pretrain
from pucl.recipe.prior import (
    Prior,
    PriorUncertainWarning,
    prior_for,
    resolve_prior,
    uncertainty_warning,
)
from pucl.recipe.pupl import fit_pseudo_labels, pupl_features
from pucl.runtime.clock import StepClock


@dataclass
class Fitted:
    recipe: Recipe  # the recipe with its `auto` settings decided for these rows
    prior: Prior
    members: list[tuple[ContrastiveModel, nn.Module]]  # each encoder and its head, in eval
    pseudo_labels: np.ndarray | None  # PUPL's labels of the rows, when the head reads them
    out_of_fold: np.ndarray | None = None  # with folds: each row's score out of its fold


def fit_sequence(recipe: Recipe, x: np.ndarray, labelled: np.ndarray, in_u: np.ndarray,
                 device: torch.device, progress: bool = False,
                 clock: StepClock | None = None, folds: np.ndarray | None = None) -> Fitted:
    """Prior, encoders, pseudo-labels (when the objective reads them) and heads from the
    rows `x`, their PU labels (`labelled`) and which rows are unlabeled (`in_u`); with
    `folds` (each row's cross-fitting fold) also each row's score by the heads fitted
    without its fold (pucl.recipe.crossfit; with classifier.shipped: ensemble, those
    classifiers are the members). `clock` records each step's cost under its
    name: prior, pretrain, pupl, classifier, crossfit."""
    clock = clock or StepClock()
    recipe = for_inputs(recipe, x.shape[1:], len(x))

    def step(name: str, run: Callable[[], object]):
        """One step from the random state a stage process starts with."""
        with clock(name):
            seed_everything(recipe.seed)
            return run()

    prior = step("prior", lambda: resolve_prior(recipe, lambda: (x[in_u], x[labelled]), None,
                                               progress, device))
    said = uncertainty_warning(prior.value, prior.halfwidth, recipe.evaluate.prior_error,
                               int(labelled.sum()))
    if said:  # at the start, before the long steps: the estimates read this prior
        warnings.warn(PriorUncertainWarning(said), stacklevel=3)
    images, is_labeled = torch.from_numpy(x), torch.from_numpy(labelled)
    loss_prior = prior_for(recipe.pretrain.prior, prior)[0] if needs_prior(recipe) else None
    models, heads = [], []
    for seed in member_seeds(recipe):
        model, result = step("pretrain", lambda seed=seed: pretrain(
            recipe, images, is_labeled, loss_prior, seed, device, progress))
        models.append(model)
        heads.append(rebuild(result.classifier) if result.classifier else None)
    rows, pseudo = TrainingRows(np.arange(len(x)), labelled, in_u), None
    if reads_pseudo_labels(recipe):
        labeller = step("pupl", lambda: fit_pseudo_labels(
            recipe, pupl_features(models[0], x, device), labelled, in_u, prior.value))
        pseudo = labeller.result_.labels
        rows = TrainingRows(rows.index, labelled, in_u, pseudo)
    head_prior = prior_for(recipe.classifier.prior, prior)[0]
    crossfit = None if folds is None else step("crossfit", lambda: fit_folds(
        recipe, models, x, rows, folds, head_prior, device, heads, progress))
    if crossfit is not None and recipe.classifier.shipped == "ensemble":
        members = [(model, member.head) for _, model, member in crossfit.members]
    else:
        _, fitted = step("classifier", lambda: fit_classifiers(
            recipe, models, x, rows, head_prior, device, heads, progress))
        members = [(model.eval(), member.head.eval())
                   for model, member in zip(models, fitted, strict=True)]
    return Fitted(recipe, prior, members, pseudo, crossfit and crossfit.scores)
