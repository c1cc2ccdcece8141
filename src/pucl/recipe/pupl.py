"""The recipe's PUPL step: pseudo-labels of the training rows."""

from __future__ import annotations

import numpy as np
import torch

from pucl.models import ContrastiveModel
from pucl.models.features import embed
from pucl.pupl import PSEUDO_LABELLERS
from pucl.recipe import Recipe, entry_settings


def pupl_features(model: ContrastiveModel, images: np.ndarray,
                  device: torch.device | None = None) -> np.ndarray:
    """What PUPL clusters: the projector's L2-normalised outputs, the geometry the
    contrastive loss shaped."""
    return embed(model, images, "projector", device)


def fit_pseudo_labels(recipe: Recipe, features: np.ndarray, labelled: np.ndarray,
                      in_u: np.ndarray, prior: float):
    """pupl.method, fitted on the training rows' features; its `result_` holds the labels."""
    entry = PSEUDO_LABELLERS.get(recipe.pupl.method)
    labeller = entry.build(entry_settings(recipe.pupl, "pupl", entry), prior=prior,
                           random_state=recipe.seed)
    return labeller.fit(features, labelled.astype(np.int64), in_u)
