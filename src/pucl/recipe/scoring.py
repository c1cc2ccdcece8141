"""The recipe's scoring: each member's scores of each test-time view."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from pucl.models import ContrastiveModel
from pucl.models.features import embed, encoder_part, scoring_views
from pucl.recipe import Recipe


def views(recipe: Recipe, images: np.ndarray) -> Iterator[np.ndarray]:
    """The test-time views of evaluate.tta and evaluate.tta_shift, one at a time (feature
    rows are scored as they are: mirrors and translations are for images)."""
    image_views = images.ndim == 4
    return scoring_views(images, image_views and recipe.evaluate.tta == "hflip",
                         recipe.evaluate.tta_shift if image_views else 0)


def view_features(recipe: Recipe, members: Sequence[tuple[ContrastiveModel, nn.Module]],
                  images: np.ndarray, reads: str, device: torch.device | None = None
                  ) -> list[list[np.ndarray]]:
    """features[member][view]: what each member's head reads of each view. Views outermost,
    so each is made once and dropped after every member saw it."""
    out: list[list[np.ndarray]] = [[] for _ in members]
    for view in views(recipe, images):
        for kept, (model, _) in zip(out, members, strict=True):
            kept.append(embed(model, view, reads, device))
    return out


def member_scores(heads: Sequence[nn.Module], features: list[list[np.ndarray]],
                  device: torch.device | None = None) -> np.ndarray:
    """P(y = 1 | x) as scores[member, view, row], computed on `device` (neighbour
    smoothing's comparisons with the bank); the classifier's is their mean over the first
    two axes."""
    return np.array([[head.positive_score(f, device) for f in fs]
                     for head, fs in zip(heads, features, strict=True)])


def scoring_parts(members: Sequence[tuple[ContrastiveModel, nn.Module]], reads: str
                  ) -> list[tuple[nn.Module, nn.Module]]:
    """(the part of each encoder its head reads, the head): what a served model runs."""
    return [(encoder_part(model.encoder, reads), head) for model, head in members]
