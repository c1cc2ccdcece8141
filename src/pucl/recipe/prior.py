"""The recipe's first step: the class prior of U."""

from __future__ import annotations

import numpy as np
import torch

from pucl.data.augment import unit_scale
from pucl.errors import DataError
from pucl.prior import PRIOR_ESTIMATORS
from pucl.recipe import Recipe, entry_settings


def estimate_prior(recipe: Recipe, unlabeled: np.ndarray, positive: np.ndarray,
                   progress: bool = False, device: torch.device | None = None
                   ) -> tuple[float, dict]:
    """prior.method's estimate of U's class prior (pixels scaled to [0, 1]) and the
    estimator's details. The sources `given` and `oracle` are the caller's. Estimators
    that train a network (the held-out ones) train it on `device`."""
    entry = PRIOR_ESTIMATORS.get(recipe.prior.method)
    estimator = entry.build(entry_settings(recipe.prior, "prior", entry),
                            random_state=recipe.seed, progress=progress,
                            device=str(device or "cpu"))
    try:
        estimator.fit(unit_scale(unlabeled), unit_scale(positive))
    except ValueError as exc:  # too few rows for the estimator, say
        raise DataError(f"prior estimator {recipe.prior.method!r}: {exc}") from None
    return float(estimator.prior_), estimator.details_
