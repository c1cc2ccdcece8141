"""What evaluate reports beside the test metrics (pure: arrays and models in, numbers out).

- `ablation_metrics`: what each part of the classifier's scoring bought, on the same
  heads: the smoothing (accuracy_unsmoothed), the extra test-time views
  (accuracy_one_view), the other members (accuracy_one_member).
- `oracle_metrics`: diagnostics that read true training labels, which the method never
  sees: PUPL's pseudo-label accuracy on U and kNN probes of the pretrained features, beside
  the same probe on the flattened inputs (the number a representation has to beat).
  Left out, not made up, where U holds rows of unknown label (real PU data).
- `representation_metrics`: prototype representation bias (paper 002 eq. 16) and, with
  non-negative projections (paper 004), sparsity and per-dimension class consistency.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from pucl.classify.neighbours import NeighbourHead
from pucl.evaluation.metrics import (
    classification_metrics,
    knn_accuracy,
    prototype_bias,
)
from pucl.models import ContrastiveModel
from pucl.models.features import augmented_projections, embed, encoder_part, input_features
from pucl.recipe.scoring import member_scores
from pucl.runtime.device import seeded_generator


def ablation_metrics(heads: Sequence[nn.Module], features: list[list[np.ndarray]],
                     scores: np.ndarray, y: np.ndarray, device: torch.device | None = None
                     ) -> dict[str, float]:
    """scores[member, view, row] of `heads` on features[member][view] (scored on
    `device`)."""
    out = {}
    if isinstance(heads[0], NeighbourHead):
        unsmoothed = member_scores([head.base for head in heads], features, device)
        out["accuracy_unsmoothed"] = classification_metrics(y, unsmoothed.mean(axis=(0, 1))
                                                            )["accuracy"]
    if scores.shape[1] > 1:
        out["accuracy_one_view"] = classification_metrics(y, scores[:, 0].mean(axis=0)
                                                          )["accuracy"]
    if scores.shape[0] > 1:
        out["accuracy_one_member"] = classification_metrics(y, scores[0].mean(axis=0)
                                                            )["accuracy"]
    return out


def oracle_metrics(model: ContrastiveModel, x_train: np.ndarray, y_train: np.ndarray,
                   in_u: np.ndarray, pseudo_labels: np.ndarray, x_test: np.ndarray,
                   y_test: np.ndarray, k: int, inputs_probe: bool,
                   device: torch.device | None = None,
                   f_test: np.ndarray | None = None) -> dict[str, float]:
    """y_train: true labels of the training rows (-1: unknown); pseudo_labels: PUPL's."""
    out = {}
    known = y_train >= 0
    if in_u.any() and known[in_u].all():
        out["pseudo_label_accuracy"] = float((pseudo_labels[in_u] == y_train[in_u]).mean())
    y_known = y_train[known]
    if len(np.unique(y_known)) < 2:
        return out
    f_test = embed(model, x_test, "encoder", device) if f_test is None else f_test
    f_train = embed(model, x_train, "encoder", device)[known]  # as the map's batches are
    out["knn_accuracy"] = knn_accuracy(f_train, y_known, f_test, y_test, k, device)
    if encoder_part(model.encoder, "trunk") is not model.encoder:  # LeNet-5's conv trunk
        out["knn_accuracy_trunk"] = knn_accuracy(
            embed(model, x_train[known], "trunk", device), y_known,
            embed(model, x_test, "trunk", device), y_test, k, device)
    if inputs_probe:
        out["knn_accuracy_inputs"] = knn_accuracy(input_features(x_train[known]), y_known,
                                                  input_features(x_test), y_test, k, device)
    return out


def representation_metrics(model: ContrastiveModel, images: np.ndarray, labels: np.ndarray,
                           augment, views: int, seed: int,
                           device: torch.device | None = None) -> dict[str, float]:
    """On the embedding map's points: prototype bias under `views` augmentations of each
    (0: off)."""
    out = {}
    if views > 0:
        out["prototype_bias"] = prototype_bias(
            augmented_projections(model, images, augment, views, seeded_generator(seed),
                                  device), labels)
    return out
