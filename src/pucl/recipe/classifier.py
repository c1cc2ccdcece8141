"""The recipe's classifier step: a head per pretrained encoder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from pucl.classify.fit import ClassifierSettings, Member, fit_member
from pucl.classify.linear import LinearSettings
from pucl.classify.objectives import CLASSIFIER_OBJECTIVES, Targets, TrainingRows
from pucl.data.augment import make_augment
from pucl.errors import ParamsError
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe, entry_settings
from pucl.recipe.by_input import AUTO, RULES
from pucl.runtime.device import seeded_generator


def classifier_objective(recipe: Recipe):
    entry = CLASSIFIER_OBJECTIVES.get(recipe.classifier.objective)
    return entry.build(entry_settings(recipe.classifier, "classifier", entry))


def reads_pseudo_labels(recipe: Recipe) -> bool:
    """Whether the classifier learns from PUPL's pseudo-labels (the objective says)."""
    return classifier_objective(recipe).reads_pseudo_labels


def classifier_settings(recipe: Recipe) -> ClassifierSettings:
    p = recipe.classifier
    undecided = [key for key in RULES["features"]  # what for_inputs decides (one home)
                 if key.startswith("classifier.") and getattr(p, key.split(".")[1]) == AUTO]
    if undecided:  # a caller skipped pucl.recipe.by_input.for_inputs
        raise ValueError(f"{undecided[0]} is still 'auto': decide the recipe for its inputs "
                         "first (pucl.recipe.by_input.for_inputs)")
    return ClassifierSettings(LinearSettings(p.epochs, p.lr, p.weight_decay, p.batch_size),
                              p.features, p.finetune_epochs, p.finetune_lr, p.neighbours)


def head_start(recipe: Recipe, model: ContrastiveModel) -> torch.Tensor:
    """The global random state every head initialises from: the seed, advanced by
    building one model like `model` (what a train_classifier process has done when it
    loads the pretrained model), so member k trains as the single run of its encoder."""
    torch.manual_seed(recipe.seed)
    ContrastiveModel(model.encoder_name, model.in_shape, model.proj_hidden, model.proj_dim)
    return torch.get_rng_state()


def fit_classifiers(recipe: Recipe, models: Sequence[ContrastiveModel], x_train: np.ndarray,
                    rows: TrainingRows, prior: float | None, device: torch.device,
                    method_heads: Sequence[nn.Module | None] | None = None,
                    progress: bool = False, announce=None) -> tuple[Targets, list[Member]]:
    """A classifier on each pretrained encoder (fine-tuning changes them in place): the
    objective's targets among the training rows (`x_train` holds every row `rows.index`
    names) and each encoder's member. `announce(k, n)` is told when member k starts."""
    objective = classifier_objective(recipe)
    targets = objective.targets(rows, prior)
    p = recipe.classifier
    if p.neighbours > len(targets.rows):  # checked before any training
        raise ParamsError(f"classifier.neighbours = {p.neighbours} exceeds the "
                        f"{len(targets.rows)} training rows (allowed: 0 to "
                        f"{len(targets.rows)})")
    images = x_train[targets.rows]
    augment = make_augment(recipe.pretrain.augment, images.ndim == 2)
    start = head_start(recipe, models[0])
    heads = method_heads or [None] * len(models)
    members = []
    for k, (model, method_head) in enumerate(zip(models, heads, strict=True)):
        if announce is not None:
            announce(k, len(models))
        torch.set_rng_state(start)
        members.append(fit_member(objective, model, images, targets, classifier_settings(recipe),
                                  augment, seeded_generator(recipe.seed, device), device, progress,
                                  method_head))
    return targets, members
