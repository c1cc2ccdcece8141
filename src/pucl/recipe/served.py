"""The recipe's classifier as one module: what MLflow logs (evaluate) and what
`pucl predict --model RUN` runs. Its own module, so that only the stages that build it
depend on the serving module."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from pucl.classify.deployable import ServedClassifier
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe
from pucl.recipe.scoring import scoring_parts


def served_classifier(recipe: Recipe, members: Sequence[tuple[ContrastiveModel, nn.Module]],
                      reads: str, images: bool) -> ServedClassifier:
    """Every member, every test-time view of evaluate.tta / tta_shift (translations for
    images only), scored as evaluate scores the test split."""
    parts = scoring_parts(members, reads)
    return ServedClassifier(*parts[0], mirror=recipe.evaluate.tta == "hflip",
                            shift=recipe.evaluate.tta_shift if images else 0,
                            others=parts[1:]).eval()
